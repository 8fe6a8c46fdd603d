//! Experiment 3, `flood`: an urgent item queued behind a flood waits for the
//! whole flood, unless the pool has a priority lane or the flood is
//! throttled.

use std::hint::black_box;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::{ids, metric_bars, settle, thread_baseline, Measured, RunCtx, RunResult, RunSpec};
use crate::features::{self, GROUPS, PRIORITY};
use crate::measure::{Latch, Timeline};
use crate::report::plot::Plot;
use crate::systems::{rayon_pool, tokio_runtime, System, TidepoolConfig};
use crate::work::{calibrated_rounds, fib_rounds};

/// What the experiment shows.
pub const ABOUT: &str = "A producer enqueues 2,000 CPU-bound items of about 2 ms at once on a \
pool sized to the cores, and an urgent item 100 ms later. In a plain FIFO pool the urgent \
item waits for the whole flood; a priority lane or a group that keeps only 2 x cores of the \
flood in the pool at a time lets it through at once, and the flood takes no longer.";

/// The runs.
pub const RUNS: &[RunSpec] = &RUNS_ARRAY;
const RUNS_ARRAY: [RunSpec; 5] = [
    RunSpec::new("unthrottled", "tidepool", "Flood and urgent item through Pool::spawn_fn on the default pool."),
    RunSpec::new("priority-high", "tidepool", "Flood at normal priority; the urgent item at Priority::High.").needing(PRIORITY),
    RunSpec::new("group-throttled", "tidepool", "Flood through a group with max_concurrency(2 x cores); the urgent item straight to the pool.").needing(GROUPS),
    RunSpec::new("tokio-unthrottled", "tokio", "Flood and urgent item as tasks on tokio's default multi-thread runtime."),
    RunSpec::new("rayon-unthrottled", "rayon", "Flood and urgent item through rayon::ThreadPool::spawn on a default pool."),
];
/// The run ids.
pub const IDS: &[&str] = &ids(&RUNS_ARRAY);

/// How the flood and the urgent item reach the pool.
enum Route {
    /// Both through the system's ordinary spawn.
    Plain(System),
    /// Urgent item at high priority.
    Priority(tidepool::Pool),
    /// Flood through a throttled group.
    Group(tidepool::Pool, features::GroupSpawner),
}

/// Runs one run.
///
/// # Errors
///
/// When the system cannot be built or items do not finish.
pub fn run(spec: &RunSpec, ctx: &RunCtx) -> Result<Measured, String> {
    let n = ctx.items_or(ctx.scale.pick(2000, 500, 40));
    let item = Duration::from_micros(ctx.scale.pick(2000, 2000, 500));
    let urgent_after = Duration::from_millis(ctx.scale.pick(100, 100, 5));
    ctx.bar.phase("calibrating");
    let rounds = calibrated_rounds(item);

    let baseline = thread_baseline();
    let default_pool = || TidepoolConfig::default_pool().build();
    let route = match spec.id {
        "unthrottled" => Route::Plain(System::Tidepool(default_pool()?)),
        "priority-high" => {
            PRIORITY.check().map_err(|f| f.to_string())?;
            Route::Priority(default_pool()?)
        }
        "group-throttled" => {
            let pool = default_pool()?;
            let group = features::throttled_group(&pool, 2 * ctx.cores)?;
            Route::Group(pool, group)
        }
        "tokio-unthrottled" => Route::Plain(System::Tokio(tokio_runtime()?)),
        "rayon-unthrottled" => Route::Plain(System::Rayon(rayon_pool(None)?)),
        other => return Err(format!("flood has no run '{other}'")),
    };

    // Items 0..n are the flood, item n is the urgent one.
    let timeline = Arc::new(Timeline::new(n + 1));
    let flood_done = Arc::new(Latch::new(n));
    let urgent_done = Arc::new(Latch::new(1));
    let follow = ctx.follow(&flood_done);
    let job = |i: usize, latch: &Arc<Latch>| {
        let (tl, latch) = (timeline.clone(), latch.clone());
        move || {
            tl.start(i);
            black_box(fib_rounds(rounds));
            tl.end(i);
            latch.count_down();
        }
    };

    ctx.bar.phase("flooding");
    let t0 = Instant::now();
    for i in 0..n {
        timeline.submit(i);
        let f = job(i, &flood_done);
        match &route {
            Route::Plain(s) => s.spawn_fn(f),
            Route::Priority(p) => drop(p.spawn_fn(f)),
            Route::Group(_, g) => g(Box::new(f)),
        }
    }
    if let Some(rest) = urgent_after.checked_sub(t0.elapsed()) {
        thread::sleep(rest);
    }
    timeline.submit(n);
    let f = job(n, &urgent_done);
    match &route {
        Route::Plain(s) => s.spawn_fn(f),
        Route::Priority(p) => features::spawn_fn_high(p, f).map_err(|f| f.to_string())?,
        Route::Group(p, _) => drop(p.spawn_fn(f)),
    }
    let limit = item * u32::try_from(n).unwrap_or(u32::MAX) + Duration::from_secs(60);
    let all = flood_done.wait_timeout(limit);
    let flood_wall = t0.elapsed();
    let urgent = urgent_done.wait_timeout(Duration::from_secs(60));
    drop(follow);
    ctx.bar.phase("shutting down");
    match route {
        Route::Plain(s) => s.finish(),
        Route::Priority(p) | Route::Group(p, _) => crate::systems::shutdown_pool(&p),
    }
    settle(baseline);

    if !all || !urgent {
        return Err(format!(
            "did not finish: {} of {n} flood items, urgent item {}",
            flood_done.finished(),
            if urgent { "done" } else { "not done" }
        ));
    }
    let lat = timeline.start_latencies_ms();
    let urgent_ms = *lat.last().ok_or("urgent item recorded no start")?;
    let mut m = Measured::default();
    m.put("items", n as f64);
    m.put("item_ms", item.as_secs_f64() * 1e3);
    m.put("urgent_start_ms", urgent_ms);
    m.put("flood_wall_ms", flood_wall.as_secs_f64() * 1e3);
    m.note = Some(format!(
        "{n} items of about {} ms each on {} cores; the urgent item is queued {} ms in.",
        item.as_secs_f64() * 1e3,
        ctx.cores,
        urgent_after.as_millis()
    ));
    Ok(m)
}

/// The urgent item's start latency, a bar per run.
pub fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let bars = metric_bars(runs, "urgent_start_ms");
    if bars.is_empty() {
        return Vec::new();
    }
    vec![Plot::bars(
        "flood-urgent-start",
        "When the urgent item starts",
        "queue-to-start latency of the urgent item, ms",
        bars,
    )]
}

//! The `flood` experiment. What it runs and shows is said once, in
//! [`EXPERIMENT`]: its `summary` (the command line's help) and its `about`
//! (the report's).

use std::hint::black_box;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use tidepool::Priority;

use super::{metric_bars, settle, thread_baseline};
use crate::aggregate::Measured;
use crate::measure::{Latch, Timeline};
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::report::table::group_digits;
use crate::systems::{rayon_pool, tokio_runtime, System, TidepoolConfig};
use crate::work::{calibrated_rounds, fib_rounds};
use std::fmt::Write as _;

use crate::report::summary::{median, ms, times};

/// What the experiment shows.
const ABOUT: &str = "A producer enqueues 2,000 CPU-bound items of about 2 ms at once on a \
pool sized to the cores, and an urgent item 100 ms later. In a plain FIFO pool the urgent \
item waits for the whole flood; a priority lane or a group that keeps only 2 x cores of the \
flood in the pool at a time lets it through at once, and the flood takes no longer.";

/// The plain FIFO pool, the baseline.
pub(crate) const UNTHROTTLED: &str = "unthrottled";
/// The urgent item at high priority.
pub(crate) const PRIORITY_HIGH: &str = "priority-high";
/// The flood through a throttled group.
pub(crate) const GROUP_THROTTLED: &str = "group-throttled";

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "flood",
    about: ABOUT,
    summary: "An urgent item queued behind a flood of CPU-bound items.",
    question: "Does an urgent item wait for a flood queued before it?",
    verdict,
    scale: describe_scale,
    headline: "urgent_start_ms",
    baseline: UNTHROTTLED,
    baselines: &[],
    headlines: &[],
    runs: &[
        RunSpec {
            id: UNTHROTTLED,
            system: "tidepool",
            description: "Flood and urgent item through Pool::execute on the default pool.",
            execute: |ctx| run(ctx, || Ok(Route::Plain(System::Tidepool(default_pool()?)))),
        },
        RunSpec {
            id: PRIORITY_HIGH,
            system: "tidepool",
            description: "Flood at normal priority; the urgent item at Priority::High.",
            execute: |ctx| run(ctx, || Ok(Route::Priority(default_pool()?))),
        },
        RunSpec {
            id: GROUP_THROTTLED,
            system: "tidepool",
            description: "Flood through a group with max_concurrency(2 x cores); the urgent item straight to the pool.",
            execute: |ctx| {
                let limit = 2 * ctx.cores;
                run(ctx, move || {
                    let pool = default_pool()?;
                    let group = pool
                        .group()
                        .max_concurrency(limit)
                        .build()
                        .map_err(|e| format!("group with max_concurrency({limit}): {e}"))?;
                    Ok(Route::Group(pool, group))
                })
            },
        },
        RunSpec {
            id: "tokio-unthrottled",
            system: "tokio",
            description: "Flood and urgent item as tasks on tokio's default multi-thread runtime.",
            execute: |ctx| run(ctx, || Ok(Route::Plain(System::Tokio(tokio_runtime()?)))),
        },
        RunSpec {
            id: "rayon-unthrottled",
            system: "rayon",
            description: "Flood and urgent item through rayon::ThreadPool::spawn on a default pool.",
            execute: |ctx| run(ctx, || Ok(Route::Plain(System::Rayon(rayon_pool(None)?)))),
        },
    ],
    opt_in: &[],
    plots,
    full_only: &[],
    default_repeat: 5,
    rotate: false,
};

/// Counts and durations at a scale.
#[derive(Debug, Clone, Copy)]
struct Params {
    /// Flood items (before `--items`).
    items: usize,
    /// CPU time of one flood item.
    item_us: u64,
    /// When the urgent item is queued.
    urgent_after_ms: u64,
}

/// The experiment's size at each scale.
const SCALES: ScaleTable<Params> = ScaleTable {
    full: Params {
        items: 2000,
        item_us: 2000,
        urgent_after_ms: 100,
    },
    quick: Params {
        items: 500,
        item_us: 2000,
        urgent_after_ms: 100,
    },
    tiny: Params {
        items: 40,
        item_us: 500,
        urgent_after_ms: 5,
    },
};

fn describe_scale(scale: Scale) -> String {
    let p = SCALES.at(scale);
    format!(
        "{} items of {} ms, urgent at {} ms",
        group_digits(p.items as f64),
        p.item_us as f64 / 1e3,
        p.urgent_after_ms
    )
}

fn default_pool() -> Result<tidepool::Pool, String> {
    TidepoolConfig::default_pool().build()
}

/// How the flood and the urgent item reach the pool.
enum Route {
    /// Both through the system's ordinary spawn.
    Plain(System),
    /// Urgent item at high priority.
    Priority(tidepool::Pool),
    /// Flood through a throttled group.
    Group(tidepool::Pool, tidepool::Group),
}

/// Floods the pool `route` builds and measures when the urgent item starts.
///
/// # Errors
///
/// When the system cannot be built or items do not finish.
fn run(ctx: &RunCtx, route: impl FnOnce() -> Result<Route, String>) -> Result<Measured, String> {
    let p = SCALES.at(ctx.scale);
    let n = ctx.items_or(p.items);
    let item = Duration::from_micros(p.item_us);
    let urgent_after = Duration::from_millis(p.urgent_after_ms);
    ctx.bar.phase("calibrating");
    let rounds = calibrated_rounds(item);

    let baseline = thread_baseline();
    let route = route()?;

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
            Route::Group(_, g) => drop(g.spawn_fn(f)),
        }
    }
    if let Some(rest) = urgent_after.checked_sub(t0.elapsed()) {
        thread::sleep(rest);
    }
    timeline.submit(n);
    let f = job(n, &urgent_done);
    match &route {
        Route::Plain(s) => s.spawn_fn(f),
        Route::Priority(p) => drop(p.task().priority(Priority::High).spawn_fn(f)),
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
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let bars = metric_bars(runs, "urgent_start_ms");
    if bars.is_empty() {
        return Vec::new();
    }
    vec![Plot::bars(
        "flood-urgent-start",
        (
            "When the urgent item starts (log scale)",
            "In a plain FIFO pool the urgent item waits for the whole flood; at high priority or with the flood throttled in a group it starts within milliseconds.",
        ),
        "queue-to-start latency of the urgent item, ms",
        bars,
    )]
}

/// The summary's answer: when the urgent item starts on each route.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let start = |id| median(exp, id, "urgent_start_ms");
    let plain = start(UNTHROTTLED)?;
    let mut s = format!("In a plain FIFO pool it starts after {}", ms(plain));
    let priority = start(PRIORITY_HIGH);
    let group = start(GROUP_THROTTLED);
    if let Some(p) = priority {
        let _ = write!(s, "; at Priority::High after {}", ms(p));
    }
    if let Some(g) = group {
        let _ = write!(s, "; with the flood in a throttled group after {}", ms(g));
    }
    for (id, name) in [
        ("tokio-unthrottled", "tokio"),
        ("rayon-unthrottled", "rayon"),
    ] {
        if let Some(v) = start(id) {
            let _ = write!(s, "; {name} {}", ms(v));
        }
    }
    s.push_str(". Verdict: ");
    match priority.or(group) {
        Some(best) if best * 10.0 < plain => {
            let _ = write!(
                s,
                "a priority lane or a throttled group lets it through {} sooner; without one it waits for the flood.",
                times(plain, best)
            );
        }
        Some(_) => s.push_str("no clear gain from priority or throttling at this scale."),
        None => s.push_str("run priority-high or group-throttled for a verdict."),
    }
    Some(s)
}

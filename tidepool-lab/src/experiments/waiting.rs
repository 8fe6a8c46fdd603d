//! Experiment 1, `waiting`: work items that spend their time waiting starve
//! a capped pool.
//!
//! 1,000 items arrive one every 10 ms and each waits 500 ms, so about 50 are
//! in flight at once. A pool capped at 10 threads queues them for tens of
//! seconds; the same wait as an async sleep needs no thread at all.

use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::paced::{finish_system, measure, tidepool_report, ItemProbe, Pace};
use super::{done, ids, per_item_plot, Measured, RunCtx, RunResult, RunSpec};
use crate::features::{self, GRADUAL};
use crate::report::plot::{Plot, Series};
use crate::systems::{rayon_pool, tokio_runtime, System, TidepoolConfig};

/// What the experiment shows.
pub const ABOUT: &str = "Work items arrive one every 10 ms and each spends 500 ms waiting \
(a sleep, a lock, a remote call; 250 ms at --quick scale), so about 50 are in flight at once. A pool capped below \
that queues items for seconds, and one that adds threads slowly for longer still; a pool \
that notices blocked threads, or async code that holds no thread while it waits, starts \
every item at once.";

/// The runs.
pub const RUNS: &[RunSpec] = &RUNS_ARRAY;
const RUNS_ARRAY: [RunSpec; 10] = [
    RunSpec::new("fixed10-sleep", "tidepool", "Controller::Fixed with 10 threads; each item blocks in thread::sleep."),
    RunSpec::new("fixed20-sleep", "tidepool", "Controller::Fixed with 20 threads; each item blocks in thread::sleep."),
    RunSpec::new("async-1thread", "tidepool", "Async tasks awaiting tidepool::sleep on a pool of one thread (Fixed, concurrency 1)."),
    RunSpec::new("adaptive-sleep", "tidepool", "The default pool (Adaptive); each item blocks in thread::sleep."),
    RunSpec::new("adaptive-mutex", "tidepool", "The default pool (Adaptive); each item waits on a std Mutex that a helper thread (one per item) holds for the wait."),
    RunSpec::new("gradual500-sleep", "tidepool", "Controller::Gradual adding one thread per 500 ms while the queue makes no progress; each item blocks in thread::sleep.").needing(GRADUAL),
    RunSpec::new("tokio-blocking-sleep", "tokio", "thread::sleep inside tasks spawned on tokio's default multi-thread runtime (one worker per core)."),
    RunSpec::new("tokio-spawn-blocking", "tokio", "thread::sleep inside tokio's spawn_blocking (default cap of 512 blocking threads)."),
    RunSpec::new("rayon-sleep", "rayon", "thread::sleep inside rayon::ThreadPool::spawn on a default pool (one thread per core)."),
    RunSpec::new("threadpool10-sleep", "threadpool", "thread::sleep inside threadpool::ThreadPool::execute with 10 threads."),
];
/// The run ids.
pub const IDS: &[&str] = &ids(&RUNS_ARRAY);

/// Counts and durations at a scale.
#[derive(Debug, Clone, Copy)]
struct Params {
    items: usize,
    interval: Duration,
    wait: Duration,
    /// Items for the runs whose pools have one thread per core: all items
    /// would take items * wait / cores, minutes at full scale.
    items_per_core_pools: usize,
    /// Items for the Gradual run: it barely grows (that is its failure), so
    /// all items would take ~items * wait / cores too; 60% still shows
    /// delays of a minute and more and keeps the full lab under 10 minutes.
    items_gradual: usize,
}

impl Params {
    fn new(ctx: &RunCtx) -> Params {
        let items = ctx.items_or(ctx.scale.pick(1000, 200, 16));
        Params {
            items,
            interval: Duration::from_millis(ctx.scale.pick(10, 10, 2)),
            wait: Duration::from_millis(ctx.scale.pick(500, 250, 20)),
            items_per_core_pools: (items / 10).max(1),
            items_gradual: (items * 3 / 5).max(1),
        }
    }

    fn pace(&self, items: usize) -> Pace {
        // Worst case: one thread serving every wait in turn, plus a minute.
        Pace {
            items,
            interval: self.interval,
            limit: self.wait * u32::try_from(items).unwrap_or(u32::MAX) + Duration::from_secs(60),
        }
    }
}

/// Runs one run.
///
/// # Errors
///
/// When the system cannot be built or items do not finish.
pub fn run(spec: &RunSpec, ctx: &RunCtx) -> Result<Measured, String> {
    let p = Params::new(ctx);
    let wait = p.wait;
    let sleep = move |probe: ItemProbe| {
        probe.start();
        thread::sleep(wait);
        probe.end();
    };
    let on = |cfg: TidepoolConfig| move || cfg.build().map(System::Tidepool);
    let spawn_sleep = |s: &System, probe: ItemProbe| s.spawn_fn(move || sleep(probe));
    let full = p.pace(p.items);
    let short = p.pace(p.items_per_core_pools.min(p.items));
    let mut m = match spec.id {
        "fixed10-sleep" => measure(
            ctx,
            full,
            on(TidepoolConfig::fixed(10)),
            spawn_sleep,
            finish_system,
        ),
        "fixed20-sleep" => measure(
            ctx,
            full,
            on(TidepoolConfig::fixed(20)),
            spawn_sleep,
            finish_system,
        ),
        "adaptive-sleep" => measure(
            ctx,
            full,
            on(TidepoolConfig::default_pool()),
            spawn_sleep,
            finish_system,
        ),
        "adaptive-mutex" => measure(
            ctx,
            full,
            on(TidepoolConfig::default_pool()),
            |s: &System, probe: ItemProbe| {
                s.spawn_fn(move || {
                    probe.start();
                    wait_on_held_mutex(wait);
                    probe.end();
                })
            },
            finish_system,
        ),
        "gradual500-sleep" => {
            let controller =
                features::gradual(Duration::from_millis(500)).map_err(|f| f.to_string())?;
            let cfg = TidepoolConfig {
                controller: Some(controller),
                ..TidepoolConfig::default_pool()
            };
            let gradual = p.pace(p.items_gradual.min(p.items));
            measure(ctx, gradual, on(cfg), spawn_sleep, finish_system)
        }
        "async-1thread" => measure(
            ctx,
            full,
            || TidepoolConfig::fixed(1).build(),
            |pool: &tidepool::Pool, probe: ItemProbe| {
                drop(pool.spawn(async move {
                    probe.start();
                    tidepool::sleep(wait).await;
                    probe.end();
                }))
            },
            |pool| {
                let r = tidepool_report(&pool);
                crate::systems::shutdown_pool(&pool);
                r
            },
        ),
        "tokio-blocking-sleep" => measure(
            ctx,
            short,
            || tokio_runtime().map(System::Tokio),
            spawn_sleep,
            finish_system,
        ),
        "tokio-spawn-blocking" => measure(
            ctx,
            full,
            || tokio_runtime().map(System::TokioBlocking),
            spawn_sleep,
            finish_system,
        ),
        "rayon-sleep" => measure(
            ctx,
            short,
            || rayon_pool(None).map(System::Rayon),
            spawn_sleep,
            finish_system,
        ),
        "threadpool10-sleep" => measure(
            ctx,
            full,
            || Ok(System::ThreadPool(threadpool::ThreadPool::new(10))),
            spawn_sleep,
            finish_system,
        ),
        other => Err(format!("waiting has no run '{other}'")),
    }?;
    let ran = m.get("items").unwrap_or(0.0) as usize;
    m.note = Some(if ran < p.items {
        format!(
            "Ran the first {ran} of the {} items (arrival every {} ms, wait {} ms): with one thread per core all of them would take {:.0} s, and the queue only grows with more items.",
            p.items,
            p.interval.as_millis(),
            p.wait.as_millis(),
            (p.items as f64 * p.wait.as_secs_f64()) / ctx.cores as f64
        )
    } else {
        format!(
            "{} items, one every {} ms, each waiting {} ms.",
            p.items,
            p.interval.as_millis(),
            p.wait.as_millis()
        )
    });
    Ok(m)
}

/// Waits about `wait` on a contended `std::sync::Mutex`: a helper thread
/// takes the lock, says so, and holds it for `wait`; the item then blocks in
/// `lock()` until the helper lets go.
pub(crate) fn wait_on_held_mutex(wait: Duration) {
    let lock = Arc::new(Mutex::new(()));
    let held = lock.clone();
    let (tx, rx) = mpsc::sync_channel(0);
    let helper = thread::spawn(move || {
        let _guard = held.lock().unwrap_or_else(|e| e.into_inner());
        let _ = tx.send(());
        thread::sleep(wait);
    });
    let _ = rx.recv();
    drop(lock.lock().unwrap_or_else(|e| e.into_inner()));
    let _ = helper.join();
}

/// Start latency by item (log scale), and threads over time for the
/// adaptive and gradual pools.
pub fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let mut out: Vec<Plot> = per_item_plot(
        runs,
        "waiting-start-latency",
        "Start latency by item",
        "item (arrival order)",
        "queue-to-start latency, ms (log)",
        true,
    )
    .into_iter()
    .collect();
    let with_threads: Vec<&RunResult> = done(runs)
        .filter(|r| matches!(r.spec.id, "adaptive-sleep" | "gradual500-sleep"))
        .filter(|r| r.measured.threads.is_some())
        .collect();
    if !with_threads.is_empty() {
        let mut sources: Vec<&str> = Vec::new();
        let mut series = Vec::new();
        for r in with_threads {
            if let Some((source, pts)) = &r.measured.threads {
                if !sources.contains(&source.as_str()) {
                    sources.push(source);
                }
                series.push(Series::new(r.spec.id, pts.clone()));
            }
        }
        out.push(Plot::line(
            "waiting-threads",
            "Threads over time: adaptive and gradual",
            "seconds since the pool was built",
            &format!("threads ({})", sources.join("; ")),
            series,
            false,
        ));
    }
    out
}

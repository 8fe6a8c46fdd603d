//! The `waiting` experiment. What it runs and shows is said once, in
//! [`EXPERIMENT`]: its `summary` (the command line's help) and its `about`
//! (the report's).

use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::paced::{finish_system, measure, tidepool_report, ItemProbe, Pace};
use tidepool::Controller;

use super::{done, per_item_plot};
use crate::aggregate::Measured;
use crate::model::plot::{Plot, Series};
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::report::table::group_digits;
use crate::systems::{rayon_pool, tokio_runtime, System, TidepoolConfig};
use std::fmt::Write as _;

use crate::report::summary::{median, ms};

/// What the experiment shows.
const ABOUT: &str = "Work items arrive one every 10 ms and each spends 500 ms waiting \
(a sleep, a lock, a remote call; 250 ms at --quick scale), so about 50 are in flight at once. A pool capped below \
that queues items for seconds, and one that adds threads slowly for longer still; a pool \
that notices blocked threads, or async code that holds no thread while it waits, starts \
every item at once.";

/// The run tidepool's default stands for.
pub(crate) const ADAPTIVE_SLEEP: &str = "adaptive-sleep";
/// The classic capped pool.
pub(crate) const FIXED10_SLEEP: &str = "fixed10-sleep";
/// The pool that adds threads slowly.
pub(crate) const GRADUAL500_SLEEP: &str = "gradual500-sleep";
/// The gradual pool with waits long enough to make it climb.
pub(crate) const GRADUAL500_CLIMB: &str = "gradual500-climb";
/// Blocking code in plain tokio tasks.
pub(crate) const TOKIO_BLOCKING_SLEEP: &str = "tokio-blocking-sleep";
/// Blocking code in tokio's `spawn_blocking`.
pub(crate) const TOKIO_SPAWN_BLOCKING: &str = "tokio-spawn-blocking";

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "waiting",
    about: ABOUT,
    summary: "Work items that wait 500 ms each, arriving every 10 ms.",
    question: "Does work that blocks starve the pool?",
    verdict,
    scale: describe_scale,
    headline: "mean_start_ms",
    baseline: ADAPTIVE_SLEEP,
    baselines: &[],
    headlines: &[],
    runs: &[
        RunSpec {
            id: FIXED10_SLEEP,
            system: "tidepool",
            description: "Controller::Fixed with 10 threads; each item blocks in thread::sleep.",
            execute: |ctx| sleep_on(ctx, Share::All, || tidepool(TidepoolConfig::fixed(10))),
        },
        RunSpec {
            id: "fixed20-sleep",
            system: "tidepool",
            description: "Controller::Fixed with 20 threads; each item blocks in thread::sleep.",
            execute: |ctx| sleep_on(ctx, Share::All, || tidepool(TidepoolConfig::fixed(20))),
        },
        RunSpec {
            id: "async-1thread",
            system: "tidepool",
            description: "Async tasks awaiting tidepool::sleep on a pool of one thread (Fixed, concurrency 1).",
            execute: async_on_one_thread,
        },
        RunSpec {
            id: ADAPTIVE_SLEEP,
            system: "tidepool",
            description: "The default pool (Adaptive); each item blocks in thread::sleep.",
            execute: |ctx| sleep_on(ctx, Share::All, || tidepool(TidepoolConfig::default_pool())),
        },
        RunSpec {
            id: "adaptive-mutex",
            system: "tidepool",
            description: "The default pool (Adaptive); each item waits on a std Mutex that a helper thread (one per item) holds for the wait.",
            execute: mutex_on_default_pool,
        },
        RunSpec {
            id: GRADUAL500_SLEEP,
            system: "tidepool",
            description: "Controller::Gradual adding one thread per 500 ms while the queue makes no progress; each item blocks in thread::sleep.",
            execute: |ctx| {
                let cfg = TidepoolConfig {
                    controller: Some(Controller::Gradual { interval: Duration::from_millis(500) }),
                    ..TidepoolConfig::default_pool()
                };
                sleep_on(ctx, Share::Gradual, || tidepool(cfg))
            },
        },
        RunSpec {
            id: GRADUAL500_CLIMB,
            system: "tidepool",
            description: "Controller::Gradual as in gradual500-sleep, with fewer items that each wait ten intervals: no item ends for the first wait, so the pool climbs one thread per interval and its climb shows in the threads plot. Not comparable with the other rows (other counts).",
            execute: gradual_climb,
        },
        RunSpec {
            id: TOKIO_BLOCKING_SLEEP,
            system: "tokio",
            description: "thread::sleep inside tasks spawned on tokio's default multi-thread runtime (one worker per core).",
            execute: |ctx| sleep_on(ctx, Share::PerCorePool, || tokio_runtime().map(System::Tokio)),
        },
        RunSpec {
            id: TOKIO_SPAWN_BLOCKING,
            system: "tokio",
            description: "thread::sleep inside tokio's spawn_blocking (default cap of 512 blocking threads).",
            execute: |ctx| sleep_on(ctx, Share::All, || tokio_runtime().map(System::TokioBlocking)),
        },
        RunSpec {
            id: "rayon-sleep",
            system: "rayon",
            description: "thread::sleep inside rayon::ThreadPool::spawn on a default pool (one thread per core).",
            execute: |ctx| sleep_on(ctx, Share::PerCorePool, || rayon_pool(None).map(System::Rayon)),
        },
        RunSpec {
            id: "threadpool10-sleep",
            system: "threadpool",
            description: "thread::sleep inside threadpool::ThreadPool::execute with 10 threads.",
            execute: |ctx| {
                sleep_on(ctx, Share::All, || Ok(System::ThreadPool(threadpool::ThreadPool::new(10))))
            },
        },
    ],
    opt_in: &[],
    plots,
    full_only: &["fixed20-sleep", "adaptive-mutex", GRADUAL500_SLEEP, GRADUAL500_CLIMB],
    default_repeat: 1,
    rotate: false,
};

/// Counts and durations at a scale.
#[derive(Debug, Clone, Copy)]
struct Params {
    /// Items submitted (before `--items`).
    items: usize,
    /// Time between arrivals.
    interval_ms: u64,
    /// How long each item waits.
    wait_ms: u64,
    /// The gradual climb run: items, time between arrivals, the Gradual
    /// interval; each item waits ten intervals.
    climb: (usize, u64, u64),
}

/// The experiment's size at each scale.
const SCALES: ScaleTable<Params> = ScaleTable {
    full: Params {
        items: 1000,
        interval_ms: 10,
        wait_ms: 500,
        climb: (60, 100, 500),
    },
    quick: Params {
        items: 200,
        interval_ms: 10,
        wait_ms: 250,
        climb: (30, 100, 250),
    },
    tiny: Params {
        items: 16,
        interval_ms: 2,
        wait_ms: 20,
        climb: (8, 5, 20),
    },
};

fn describe_scale(scale: Scale) -> String {
    let p = SCALES.at(scale);
    format!(
        "{} items every {} ms, {} ms wait",
        group_digits(p.items as f64),
        p.interval_ms,
        p.wait_ms
    )
}

/// Which part of the items a run submits.
#[derive(Debug, Clone, Copy)]
enum Share {
    /// All of them.
    All,
    /// The first tenth, for the pools with one thread per core: all items
    /// would take items * wait / cores, minutes at full scale.
    PerCorePool,
    /// The first 60%, for the Gradual run: it barely grows (that is its
    /// failure), so all items would take ~items * wait / cores too; 60%
    /// still shows delays of a minute and more and keeps the full lab under
    /// 10 minutes.
    Gradual,
}

/// The run's counts: the scale's, `--items`, and the share it submits.
struct Sized {
    items: usize,
    submitted: usize,
    interval: Duration,
    wait: Duration,
}

impl Sized {
    fn new(ctx: &RunCtx, share: Share) -> Sized {
        let p = SCALES.at(ctx.scale);
        let items = ctx.items_or(p.items);
        let submitted = match share {
            Share::All => items,
            Share::PerCorePool => (items / 10).max(1),
            Share::Gradual => (items * 3 / 5).max(1),
        };
        Sized {
            items,
            submitted,
            interval: Duration::from_millis(p.interval_ms),
            wait: Duration::from_millis(p.wait_ms),
        }
    }

    fn pace(&self) -> Pace {
        // Worst case: one thread serving every wait in turn, plus a minute.
        Pace {
            items: self.submitted,
            interval: self.interval,
            limit: self.wait * u32::try_from(self.submitted).unwrap_or(u32::MAX)
                + Duration::from_secs(60),
        }
    }

    /// The sentence added to the run's description.
    fn note(&self, cores: usize) -> String {
        if self.submitted < self.items {
            format!(
                "Ran the first {} of the {} items (arrival every {} ms, wait {} ms): with one thread per core all of them would take {:.0} s, and the queue only grows with more items.",
                self.submitted,
                self.items,
                self.interval.as_millis(),
                self.wait.as_millis(),
                (self.items as f64 * self.wait.as_secs_f64()) / cores as f64
            )
        } else {
            format!(
                "{} items, one every {} ms, each waiting {} ms.",
                self.items,
                self.interval.as_millis(),
                self.wait.as_millis()
            )
        }
    }
}

fn tidepool(cfg: TidepoolConfig) -> Result<System, String> {
    cfg.build().map(System::Tidepool)
}

/// Items that block in `thread::sleep`, on the system `make` builds.
fn sleep_on(
    ctx: &RunCtx,
    share: Share,
    make: impl FnOnce() -> Result<System, String>,
) -> Result<Measured, String> {
    let size = Sized::new(ctx, share);
    let wait = size.wait;
    let mut m = measure(
        ctx,
        size.pace(),
        make,
        |s: &System, probe: ItemProbe| {
            s.spawn_fn(move || {
                probe.start();
                thread::sleep(wait);
                probe.end();
            })
        },
        finish_system,
    )?;
    m.note = Some(size.note(ctx.cores));
    Ok(m)
}

/// Items that wait on a held `std::sync::Mutex`, on the default pool.
fn mutex_on_default_pool(ctx: &RunCtx) -> Result<Measured, String> {
    let size = Sized::new(ctx, Share::All);
    let wait = size.wait;
    let mut m = measure(
        ctx,
        size.pace(),
        || tidepool(TidepoolConfig::default_pool()),
        |s: &System, probe: ItemProbe| {
            s.spawn_fn(move || {
                probe.start();
                wait_on_held_mutex(wait);
                probe.end();
            })
        },
        finish_system,
    )?;
    m.note = Some(size.note(ctx.cores));
    Ok(m)
}

/// The Gradual pool with items that wait ten of its intervals, so that no
/// item ends for a while and the pool climbs.
fn gradual_climb(ctx: &RunCtx) -> Result<Measured, String> {
    let (items, every_ms, interval_ms) = SCALES.at(ctx.scale).climb;
    let items = ctx.items_or(items);
    let interval = Duration::from_millis(interval_ms);
    let wait = interval * 10;
    let pace = Pace {
        items,
        interval: Duration::from_millis(every_ms),
        limit: wait * u32::try_from(items).unwrap_or(u32::MAX) + Duration::from_secs(60),
    };
    let cfg = TidepoolConfig {
        controller: Some(Controller::Gradual { interval }),
        ..TidepoolConfig::default_pool()
    };
    let mut m = measure(
        ctx,
        pace,
        || tidepool(cfg),
        |s: &System, probe: ItemProbe| {
            s.spawn_fn(move || {
                probe.start();
                thread::sleep(wait);
                probe.end();
            })
        },
        finish_system,
    )?;
    m.put("wait_ms", wait.as_secs_f64() * 1e3);
    m.note = Some(format!(
        "{items} items, one every {every_ms} ms, each waiting {} ms; Gradual interval {interval_ms} ms.",
        wait.as_millis()
    ));
    Ok(m)
}

/// Async tasks awaiting `tidepool::sleep` on a pool of one thread.
fn async_on_one_thread(ctx: &RunCtx) -> Result<Measured, String> {
    let size = Sized::new(ctx, Share::All);
    let wait = size.wait;
    let mut m = measure(
        ctx,
        size.pace(),
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
    )?;
    m.note = Some(size.note(ctx.cores));
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

/// Start latency by item, split into the pools that queue blocked work
/// and those that do not (at most five lines each), and threads over time
/// zoomed on where the pools grow.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let mut out = Vec::new();
    out.extend(per_item_plot(
        runs,
        &[FIXED10_SLEEP, "fixed20-sleep", GRADUAL500_SLEEP, TOKIO_BLOCKING_SLEEP, "threadpool10-sleep"],
        "waiting-start-latency-queued",
        (
            "Start latency by item: pools that queue blocked work",
            "Each item waits for the ones before it, so latency climbs item after item; the gradual pool grows too slowly to catch up. rayon-sleep behaves like tokio-blocking-sleep (see the table).",
        ),
        "item (arrival order)",
        "queue-to-start latency, ms (log)",
        true,
    ));
    out.extend(per_item_plot(
        runs,
        &[ADAPTIVE_SLEEP, "adaptive-mutex", "async-1thread", TOKIO_SPAWN_BLOCKING],
        "waiting-start-latency-prompt",
        (
            "Start latency by item: pools that do not queue it",
            "Every item starts within about a millisecond of its arrival, all the way through; isolated spikes are single items.",
        ),
        "item (arrival order)",
        "queue-to-start latency, ms (log)",
        true,
    ));
    let shown = [
        ADAPTIVE_SLEEP,
        FIXED10_SLEEP,
        GRADUAL500_SLEEP,
        GRADUAL500_CLIMB,
    ];
    let with_threads: Vec<&RunResult> = shown
        .iter()
        .filter_map(|id| done(runs).find(|r| r.spec.id == *id))
        .filter(|r| r.measured.threads.is_some())
        .collect();
    if !with_threads.is_empty() {
        let mut sources: Vec<&str> = Vec::new();
        let mut series = Vec::new();
        for r in &with_threads {
            if let Some((source, pts)) = &r.measured.threads {
                if !sources.contains(&source.as_str()) {
                    sources.push(source);
                }
                series.push(Series::new(r.spec.id, pts.clone()));
            }
        }
        // The action is in the first seconds: the adaptive pool grows within
        // one, the gradual one climbs while no item ends.
        let window = with_threads
            .iter()
            .find(|r| r.spec.id == GRADUAL500_CLIMB)
            .and_then(|r| r.measured.get("wait_ms"))
            .map(|w| 2.0 * w / 1e3)
            .or_else(|| with_threads.iter().find_map(|r| r.measured.get("wall_s")));
        let plot = Plot::line(
            "waiting-threads",
            (
                "Threads over time",
                "The adaptive pool adds threads within its first second, as items block; the fixed pool stays at 10; the gradual pool adds one per interval only while no item ends, so with short waits it stalls at 2-3 threads and with long waits (gradual500-climb) it climbs step by step.",
            ),
            "seconds since the pool was built",
            &format!("threads ({})", sources.join("; ")),
            series,
            false,
        );
        out.push(match window {
            Some(w) => plot.zoom_x(w),
            None => plot,
        });
    }
    out
}

/// The summary's answer: start latency of the default pool against the
/// capped ones, and what tokio needs to match it.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let start = |id| median(exp, id, "mean_start_ms");
    let adaptive = start(ADAPTIVE_SLEEP)?;
    let mut s = format!(
        "tidepool's default starts a blocked item in {} on average",
        ms(adaptive)
    );
    let fixed = start(FIXED10_SLEEP);
    if let Some(f) = fixed {
        let _ = write!(s, "; a fixed pool of 10 threads in {}", ms(f));
    }
    if let Some(g) = start(GRADUAL500_SLEEP) {
        let _ = write!(s, ", one that adds a thread per 500 ms in {}", ms(g));
    }
    match (start(TOKIO_BLOCKING_SLEEP), start(TOKIO_SPAWN_BLOCKING)) {
        (Some(plain), Some(marked)) => {
            let _ = write!(
                s,
                "; tokio in {} with the blocking in plain tasks, {} when it is marked with spawn_blocking",
                ms(plain),
                ms(marked)
            );
        }
        (Some(plain), None) => {
            let _ = write!(s, "; tokio tasks that block in {}", ms(plain));
        }
        (None, Some(marked)) => {
            let _ = write!(s, "; tokio's spawn_blocking in {}", ms(marked));
        }
        (None, None) => {}
    }
    s.push_str(". Verdict: ");
    s.push_str(match fixed {
        Some(f) if f >= 100.0 * adaptive => {
            "capped pools queue blocking work for as long as it waits; tidepool's default does not, without annotations."
        }
        Some(_) => "no clear difference from a capped pool at this scale.",
        None => "compare with a capped pool (fixed10-sleep) for a verdict.",
    });
    Some(s)
}

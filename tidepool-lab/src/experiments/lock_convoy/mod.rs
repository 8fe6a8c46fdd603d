#![doc = include_str!("about.md")]
//!
#![doc = include_str!("../quota/about_rest.md")]
//!
//! # Items
//!
//! The lab's thread hands every item over in a loop, with no pause; the
//! clock starts just before the first. Each item locks the one shared
//! `Mutex`, computes the hold (`work::burn_cpu`: its own CPU time, so a
//! holder preempted on a busy core holds the lock longer in wall time, as
//! a real critical section would), adds one to the counter the mutex
//! guards, unlocks, and records when it ended. After the last, the counter
//! must equal the item count.
//!
//! Counts at full scale are those of the ids (`10k`, `100k`); at `--quick`
//! a tenth, at `--tiny` a hundredth (each run's note says what it ran).
//! The holds are those of the ids at every scale: what matters is how they
//! compare with the monitor's interval (1 ms).
//!
//! # Systems
//!
//! - `tidepool-*`: `Pool::builder().concurrency(2)`, the default
//!   (adaptive) controller, closures through `Pool::execute`.
//! - `taught-*` (system `tidepool-taught`): the same pool, taught first
//!   that the convoy's kind blocks: `TEACH_ITEMS` (100) items of the same
//!   closure type that sleep `TEACH_SLEEP` (5 ms) each (a tenth as many at
//!   `--tiny`), then, once they ended, the convoy, whose items are then
//!   presumed blocking (handed threads of their own) from the first. The
//!   worst case of issue #41: before the growth climb (`control/growth.rs`
//!   in tidepool), 10,000 x 100 µs taught this way reached 512 threads.
//! - `loaded-10k-100us` (system `tidepool-taught-loaded`): the taught
//!   row of 10,000 x 100 µs with `BUSY_PER_CORE` (3) threads per core
//!   spinning beside the convoy, in the same process, from its first item
//!   to its last: a loaded machine keeps the lock's holder off the cores
//!   for milliseconds while its kind's waiters sleep, the shape the growth
//!   climb's "A sibling runs" rule exists for (before it, 512 threads in 3
//!   runs of 8). Judged on nothing by the verdict (the targets
//!   are for a quiet machine); the ablation reads its threads at work.
//! - `fixed-*` (system `tidepool-fixed`): `Controller::Fixed` with
//!   `concurrency(2)` and `max_threads(2)`: a pool that never grows, so
//!   the convoy costs it nothing beyond the lock. Every row's ratio
//!   divides by the Fixed row of its convoy.
//! - `threadpool-*`: the threadpool crate with 2 threads.
//! - `rayon-*`: a rayon pool of 2 threads, closures through `spawn`.
//!
//! # Figures
//!
//! - `wall_ms` (the headline): from just before the first item was handed
//!   over to the end of the last. The ratio column divides it by the Fixed
//!   row's of the same convoy: the target for tidepool is 1.2x.
//! - `lock_bound_ms`: items x hold, the least any system can take with the
//!   lock held one item at a time; `wall_vs_lock_bound`, the one over the
//!   other.
//! - `peak_threads` and tidepool's counters, as in `quota`. The target for
//!   tidepool: at most `concurrency + 8` = 10 threads.
//! - `taught-*` rows also: `convoy_peak_threads`, the most threads from
//!   the convoy's first item on (the teaching's sleepers left parked
//!   count too, until they retire), `convoy_peak_busy_threads`, the most
//!   holding a slot or blocked in a task at once from the pool's own
//!   series (what the convoy itself used: the row's threads target is
//!   judged on it; absent when the monitor took no sample during the
//!   convoy, as at `--tiny`), `convoy_threads_started` and
//!   `convoy_presumed_blocking` (the pool's counters over the convoy),
//!   and `teach_wall_ms`. Their `peak_threads` includes the teaching.
//!
//! # Run time
//!
//! A row takes about its lock bound and the start of a process: at full
//! scale a system's five default convoys hold the lock 0.05 + 0.2 + 1 +
//! 0.5 + 2 = 3.75 s, so a round of the four systems about 15 s, plus
//! whatever each system adds per item. The four rows of 100,000 x 100 µs
//! (10 s each) are opt-in: `--only lock-convoy/tidepool-100k-100us,...`.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::fresh_process::in_fresh_process;
use super::latency::threads_plot;
use super::quota::session::{Phase, Session, Way};
use super::quota::{on_every_row, put_against, CONCURRENCY};
use crate::aggregate::Measured;
use crate::experiments::metric_bars;
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::report::summary::{count, median, ms};
use crate::report::table::group_digits;
use crate::work::burn_cpu;

/// What the experiment shows: the module doc's opening paragraph.
const ABOUT: &str = include_str!("about.md").trim_ascii_end();

/// The headline.
const WALL: &str = "wall_ms";

/// The target for tidepool's threads: `concurrency + 8`.
const THREADS_TARGET: usize = CONCURRENCY + 8;

/// The target for tidepool's wall time over the Fixed pool's.
const WALL_TARGET: f64 = 1.2;

/// Items that teach the `taught-*` rows' pool that the convoy's kind
/// blocks, at full and `--quick` scale (a tenth at `--tiny`).
const TEACH_ITEMS: usize = 100;

/// How long each teaching item sleeps: longer than the monitor's interval
/// (1 ms), so the monitor finds them asleep.
const TEACH_SLEEP: Duration = Duration::from_millis(5);

/// What the teaching's count is divided by at each scale.
const TEACH_DIVIDE: ScaleTable<usize> = ScaleTable {
    full: 1,
    quick: 1,
    tiny: 10,
};

/// The convoys, as their ids name them: (count, hold in µs).
const CONVOYS: [(&str, &str); 6] = [
    ("10k", "5us"),
    ("10k", "20us"),
    ("10k", "100us"),
    ("100k", "5us"),
    ("100k", "20us"),
    ("100k", "100us"),
];

/// One row: a system and its convoy at full scale, taught first or not.
#[derive(Debug, Clone, Copy)]
struct Row {
    way: Way,
    items: usize,
    hold: Duration,
    taught: bool,
    /// Threads spin beside the convoy (`BusyThreads`).
    loaded: bool,
}

/// Spinning threads per core beside a `loaded-*` row's convoy.
const BUSY_PER_CORE: usize = 3;

/// What the counts are divided by at each scale.
const DIVIDE: ScaleTable<usize> = ScaleTable {
    full: 1,
    quick: 10,
    tiny: 100,
};

/// How each system runs the items, in its description.
macro_rules! how {
    (tidepool) => {
        "tidepool with concurrency(2) and its default controller, closures through Pool::execute"
    };
    (taught) => {
        "tidepool with concurrency(2) and its default controller, closures through Pool::execute, taught first that the kind blocks (100 items of the same closure type sleeping 5 ms each)"
    };
    (fixed) => {
        "tidepool's Controller::Fixed with concurrency(2) and max_threads(2), closures through Pool::execute"
    };
    (threadpool) => {
        "the threadpool crate with 2 threads"
    };
    (rayon) => {
        "rayon with 2 threads, closures through ThreadPool::spawn"
    };
}

/// A row's `RunSpec`: `<system>-<count>-<hold>`.
macro_rules! row {
    ($system:ident, $label:literal, $way:expr, $count:literal, $items:literal, $hold:literal) => {
        row!($system, $label, $way, $count, $items, $hold, false)
    };
    ($system:ident, $label:literal, $way:expr, $count:literal, $items:literal, $hold:literal, $taught:literal) => {
        RunSpec {
            id: concat!(stringify!($system), "-", $count, "-", $hold, "us"),
            system: $label,
            description: concat!(
                how!($system),
                "; ",
                $count,
                " items, each holding one shared Mutex for ",
                $hold,
                " µs of CPU."
            ),
            execute: |ctx| {
                run(
                    ctx,
                    concat!(stringify!($system), "-", $count, "-", $hold, "us"),
                    Row {
                        way: $way,
                        items: $items,
                        hold: Duration::from_micros($hold),
                        taught: $taught,
                        loaded: false,
                    },
                )
            },
        }
    };
}

/// The four systems' rows of one convoy, and tidepool taught first.
macro_rules! convoy {
    ($count:literal, $items:literal, $hold:literal) => {
        [
            row!(tidepool, "tidepool", Way::Tidepool, $count, $items, $hold),
            row!(
                taught,
                "tidepool-taught",
                Way::Tidepool,
                $count,
                $items,
                $hold,
                true
            ),
            row!(
                fixed,
                "tidepool-fixed",
                Way::TidepoolFixed,
                $count,
                $items,
                $hold
            ),
            row!(
                threadpool,
                "threadpool",
                Way::ThreadPool,
                $count,
                $items,
                $hold
            ),
            row!(rayon, "rayon", Way::Rayon, $count, $items, $hold),
        ]
    };
}

/// Rows per convoy.
const PER_CONVOY: usize = 5;

/// Every row, convoy by convoy.
const RUNS: [[RunSpec; PER_CONVOY]; 6] = [
    convoy!("10k", 10_000, 5),
    convoy!("10k", 10_000, 20),
    convoy!("10k", 10_000, 100),
    convoy!("100k", 100_000, 5),
    convoy!("100k", 100_000, 20),
    convoy!("100k", 100_000, 100),
];

/// The taught convoy of 10,000 x 100 µs beside busy threads.
const LOADED: RunSpec = RunSpec {
    id: "loaded-10k-100us",
    system: "tidepool-taught-loaded",
    description: concat!(
        how!(taught),
        "; 10k items, each holding one shared Mutex for 100 µs of CPU, with 3 threads per core \
         spinning beside the convoy in the same process."
    ),
    execute: |ctx| {
        run(
            ctx,
            "loaded-10k-100us",
            Row {
                way: Way::Tidepool,
                items: 10_000,
                hold: Duration::from_micros(100),
                taught: true,
                loaded: true,
            },
        )
    },
};

/// The rows in one slice: the convoys', then `LOADED`.
static FLAT: [RunSpec; 6 * PER_CONVOY + 1] = {
    let mut out = [LOADED; 6 * PER_CONVOY + 1];
    let mut i = 0;
    while i < 6 * PER_CONVOY {
        out[i] = RUNS[i / PER_CONVOY][i % PER_CONVOY];
        i += 1;
    }
    out
};

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "lock-convoy",
    about: ABOUT,
    summary: "Issue #41: closures convoying on one mutex: threads and wall time against a fixed \
pool.",
    question: "Closures convoying on one Mutex look blocked while they wait: does tidepool stay within concurrency + 8 threads and 1.2x the wall time of a Fixed pool of 2, also when it was taught first that their kind blocks?",
    verdict,
    scale: describe_scale,
    headline: WALL,
    baseline: "fixed-10k-5us",
    baselines: &[
        ("tidepool-10k-5us", "fixed-10k-5us"),
        ("taught-10k-5us", "fixed-10k-5us"),
        ("threadpool-10k-5us", "fixed-10k-5us"),
        ("rayon-10k-5us", "fixed-10k-5us"),
        ("tidepool-10k-20us", "fixed-10k-20us"),
        ("taught-10k-20us", "fixed-10k-20us"),
        ("fixed-10k-20us", "fixed-10k-20us"),
        ("threadpool-10k-20us", "fixed-10k-20us"),
        ("rayon-10k-20us", "fixed-10k-20us"),
        ("tidepool-10k-100us", "fixed-10k-100us"),
        ("taught-10k-100us", "fixed-10k-100us"),
        ("fixed-10k-100us", "fixed-10k-100us"),
        ("threadpool-10k-100us", "fixed-10k-100us"),
        ("rayon-10k-100us", "fixed-10k-100us"),
        ("tidepool-100k-5us", "fixed-100k-5us"),
        ("taught-100k-5us", "fixed-100k-5us"),
        ("fixed-100k-5us", "fixed-100k-5us"),
        ("threadpool-100k-5us", "fixed-100k-5us"),
        ("rayon-100k-5us", "fixed-100k-5us"),
        ("tidepool-100k-20us", "fixed-100k-20us"),
        ("taught-100k-20us", "fixed-100k-20us"),
        ("fixed-100k-20us", "fixed-100k-20us"),
        ("threadpool-100k-20us", "fixed-100k-20us"),
        ("rayon-100k-20us", "fixed-100k-20us"),
        ("tidepool-100k-100us", "fixed-100k-100us"),
        ("taught-100k-100us", "fixed-100k-100us"),
        ("fixed-100k-100us", "fixed-100k-100us"),
        ("threadpool-100k-100us", "fixed-100k-100us"),
        ("rayon-100k-100us", "fixed-100k-100us"),
        ("loaded-10k-100us", "fixed-10k-100us"),
    ],
    headlines: &[],
    runs: &FLAT,
    opt_in: &[
        "tidepool-100k-100us",
        "taught-100k-100us",
        "fixed-100k-100us",
        "threadpool-100k-100us",
        "rayon-100k-100us",
    ],
    plots,
    full_only: &[],
    default_repeat: 3,
    rotate: true,
};

fn describe_scale(scale: Scale) -> String {
    let d = DIVIDE.at(scale);
    format!(
        "{} and {} items holding one Mutex for 5, 20 or 100 µs each (the 100,000 x 100 µs rows \
         opt-in), tidepool also taught first by {} items sleeping 5 ms; 2 slots",
        group_digits((10_000 / d) as f64),
        group_digits((100_000 / d) as f64),
        TEACH_ITEMS / TEACH_DIVIDE.at(scale)
    )
}

/// The least a row can take: its items one after the other, each holding
/// the lock.
fn lock_bound(items: usize, hold: Duration) -> Duration {
    hold * u32::try_from(items).unwrap_or(u32::MAX)
}

/// The teaching's items at `scale` (none for a row not taught).
fn teach_items(row: Row, scale: Scale) -> usize {
    if row.taught {
        TEACH_ITEMS / TEACH_DIVIDE.at(scale)
    } else {
        0
    }
}

/// One repetition of one row, in a process of its own.
fn run(ctx: &RunCtx, id: &str, row: Row) -> Result<Measured, String> {
    let items = row.items / DIVIDE.at(ctx.scale);
    let teach = TEACH_SLEEP * u32::try_from(teach_items(row, ctx.scale)).unwrap_or(u32::MAX);
    let limit = lock_bound(items, row.hold) * 20 + teach + Duration::from_secs(120);
    in_fresh_process(ctx, &EXPERIMENT, id, limit, |ctx| measure(ctx, row))
}

/// Builds the system, teaches it (a `taught-*` row), hands it the
/// convoy, waits for it, and reports.
fn measure(ctx: &RunCtx, row: Row) -> Result<Measured, String> {
    let items = (row.items / DIVIDE.at(ctx.scale)).max(1);
    let teach = teach_items(row, ctx.scale);
    let bound = lock_bound(items, row.hold);
    let lock = Arc::new(Mutex::new(0_usize));
    let limit = bound * 20 + Duration::from_secs(60);
    let session = Session::start(ctx, row.way, false, teach + items)?;
    let taught = (teach > 0).then(|| {
        let teaching = session.hand_over(ctx, "teaching", teach, limit, |system, phase, i| {
            system.spawn_fn(item(
                phase.clone(),
                lock.clone(),
                i,
                Hold::Sleep(TEACH_SLEEP),
            ));
        });
        (teaching, session.tidepool_metrics())
    });
    let busy = row.loaded.then(|| {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        BusyThreads::start(BUSY_PER_CORE * cores)
    });
    let waited = match &taught {
        Some((Err(e), _)) => Err(format!("no convoy: the teaching did not end: {e}")),
        _ => session.hand_over(ctx, "convoy", items, limit, |system, phase, i| {
            system.spawn_fn(item(phase.clone(), lock.clone(), i, Hold::Lock(row.hold)));
        }),
    };
    let busy = busy.map(|b| b.stop());
    let after = session.tidepool_metrics();
    let ended = session.finish(ctx);
    let done = waited?;
    let counted = *lock.lock().unwrap_or_else(|e| e.into_inner());
    if counted != items {
        return Err(format!("{counted} of {items} items held the lock"));
    }

    let wall = done.last();
    let mut m = Measured::default();
    m.put("items", items as f64);
    put_against(
        &mut m,
        [WALL, "lock_bound_ms", "wall_vs_lock_bound"],
        wall,
        bound,
    );
    ended.put_threads_and_pool(&mut m);
    let mut note = format!(
        "{} items held the lock {} µs each.",
        group_digits(items as f64),
        row.hold.as_micros()
    );
    if let Some(busy) = busy {
        let _ = write!(note, " {busy} threads spun beside the convoy.");
    }
    if let Some((teaching, before)) = taught {
        let teaching = teaching?;
        m.put("teach_wall_ms", teaching.last().as_secs_f64() * 1e3);
        m.put(
            "convoy_peak_threads",
            ended.peak_threads_since(done.origin) as f64,
        );
        if let (Some(before), Some(after)) = (before, after) {
            for (name, v) in convoy_counters(&before, &after) {
                m.put(name, v);
            }
        }
        note = format!(
            "{teach} items of the same closure type slept {} ms each first; then {note}",
            TEACH_SLEEP.as_millis()
        );
    }
    m.note = Some(note);
    Ok(m)
}

/// What a taught pool did over its convoy, from its metrics `before` the
/// convoy and `after` it: the most threads holding a slot or blocked in a
/// task at once (its own series from the convoy's first sample on; parked
/// leftovers of the teaching not counted; none if the monitor took no
/// sample during the convoy, as in a `--tiny` one of a few milliseconds),
/// threads started, and tasks presumed blocking.
fn convoy_counters(
    before: &tidepool::Metrics,
    after: &tidepool::Metrics,
) -> Vec<(&'static str, f64)> {
    let from = before.thread_series.last().map_or(Duration::ZERO, |p| p.at);
    let busy = after
        .thread_series
        .iter()
        .filter(|p| p.at > from)
        .map(|p| p.running + p.blocked)
        .max();
    let busy = busy.map(|b| ("convoy_peak_busy_threads", b as f64));
    busy.into_iter()
        .chain([
            (
                "convoy_threads_started",
                after.threads_started.saturating_sub(before.threads_started) as f64,
            ),
            (
                "convoy_presumed_blocking",
                after
                    .presumed_blocking
                    .saturating_sub(before.presumed_blocking) as f64,
            ),
        ])
        .collect()
}

/// Threads that spin until stopped: a loaded machine, beside a
/// `loaded-*` row's convoy.
struct BusyThreads {
    stop: Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyThreads {
    /// Starts `n` spinning threads.
    fn start(n: usize) -> BusyThreads {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        BusyThreads { stop, threads }
    }

    /// Stops and joins them; returns how many there were.
    fn stop(self) -> usize {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let n = self.threads.len();
        for thread in self.threads {
            let _ = thread.join();
        }
        n
    }
}

/// What an item does: hold the lock, computing, or (teaching) sleep
/// without it.
#[derive(Debug, Clone, Copy)]
enum Hold {
    Lock(Duration),
    Sleep(Duration),
}

/// Item `i`: holds the lock for `hold` of its own CPU time, or sleeps
/// (one closure type either way: a taught pool's teaching and its convoy
/// are one kind).
fn item(
    phase: Arc<Phase>,
    lock: Arc<Mutex<usize>>,
    i: usize,
    hold: Hold,
) -> impl FnOnce() + Send + 'static {
    move || {
        match hold {
            Hold::Lock(hold) => {
                let mut held = lock.lock().unwrap_or_else(|e| e.into_inner());
                std::hint::black_box(burn_cpu(hold));
                *held += 1;
            }
            Hold::Sleep(sleep) => std::thread::sleep(sleep),
        }
        phase.end(i);
    }
}

/// Threads per row, and threads over time on the longest default convoy.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let mut out = vec![Plot::bars(
        "lock-convoy-peak-threads",
        (
            "Most threads during a lock convoy",
            "Only one item runs at a time whatever the thread count; the issue's target for tidepool is at most concurrency + 8 = 10.",
        ),
        "threads",
        metric_bars(runs, "peak_threads"),
    )];
    out.extend(threads_plot(
        runs,
        &[
            "tidepool-100k-20us",
            "fixed-100k-20us",
            "threadpool-100k-20us",
            "rayon-100k-20us",
        ],
        "lock-convoy-threads",
        (
            "Threads over a convoy of 100,000 x 20 µs",
            "Threads each system ran while its items queued for one lock.",
        ),
    ));
    out
}

/// The tidepool rows the verdict judges: the id's system, the label its
/// row gets, and the threads figure judged (a taught pool's teaching left
/// threads parked: its convoy is judged on those at work).
const JUDGED: [(&str, &str, &str); 2] = [
    ("tidepool", "", "peak_threads"),
    ("taught", "taught ", "convoy_peak_busy_threads"),
];

/// The summary's answer: each tidepool convoy's threads and wall time over
/// the Fixed pool's, against the targets, untaught and taught.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let mut rows = Vec::new();
    let mut missed = Vec::new();
    for ((items, hold), (system, label, figure)) in CONVOYS
        .into_iter()
        .flat_map(|c| JUDGED.into_iter().map(move |j| (c, j)))
    {
        let convoy = format!("{items}-{hold}");
        let Some(threads) = median(exp, &format!("{system}-{convoy}"), figure) else {
            continue;
        };
        let wall = median(exp, &format!("{system}-{convoy}"), WALL);
        let fixed = median(exp, &format!("fixed-{convoy}"), WALL);
        let mut row = format!(
            "{label}{items} x {} {}",
            hold.replace("us", " µs"),
            count(threads, "thread", "threads")
        );
        if threads > THREADS_TARGET as f64 {
            missed.push(format!("{label}{convoy} threads"));
        }
        if let (Some(w), Some(f)) = (wall, fixed) {
            let x = w / f;
            let _ = write!(row, ", {} = {x:.2}x the Fixed pool's", ms(w));
            if x > WALL_TARGET {
                missed.push(format!("{label}{convoy} wall"));
            }
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return None;
    }
    let mut s = format!("tidepool's convoys: {}", rows.join("; "));
    let _ = write!(
        s,
        ". Verdict: {} (the goals: at most concurrency + 8 = {THREADS_TARGET} threads and at \
         most {WALL_TARGET}x the wall time of tidepool's Fixed pool of 2).",
        on_every_row("both goals met", rows.len(), "missed on", &missed)
    );
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::testing::{
        assert_plain_about, assert_verdict_says, done_run, verdict_of,
    };

    #[test]
    fn the_about_text_is_plain() {
        assert_plain_about(ABOUT, "A lock convoy");
    }

    #[test]
    fn every_row_is_compared_with_the_fixed_pool_of_its_convoy() {
        let ids = EXPERIMENT.run_ids();
        assert_eq!(ids.len(), 31);
        assert_eq!(ids[0], "tidepool-10k-5us");
        assert_eq!(ids[1], "taught-10k-5us");
        assert_eq!(ids[29], "rayon-100k-100us");
        assert_eq!(ids[30], "loaded-10k-100us");
        for id in &ids {
            let (system, convoy) = id.split_once('-').unwrap();
            assert_eq!(
                EXPERIMENT.baseline_of(id),
                format!("fixed-{convoy}"),
                "{id}"
            );
            let spec = EXPERIMENT.run(id).unwrap();
            let want = match system {
                "fixed" => "tidepool-fixed",
                "taught" => "tidepool-taught",
                "loaded" => "tidepool-taught-loaded",
                _ => system,
            };
            assert_eq!(spec.system, want);
        }
        let defaults = EXPERIMENT.default_run_ids();
        assert_eq!(defaults.len(), 26);
        assert!(defaults.iter().all(|id| !id.ends_with("100k-100us")));
    }

    #[test]
    fn the_lock_bound_is_items_times_the_hold() {
        assert_eq!(
            lock_bound(100_000, Duration::from_micros(20)),
            Duration::from_secs(2)
        );
        assert_eq!(lock_bound(0, Duration::from_micros(20)), Duration::ZERO);
    }

    #[test]
    fn only_taught_rows_teach() {
        let taught = |id| EXPERIMENT.run(id).unwrap().system == "tidepool-taught";
        assert!(taught("taught-10k-100us"));
        assert!(!taught("tidepool-10k-100us"));
        let row = |taught| Row {
            way: Way::Tidepool,
            items: 10_000,
            hold: Duration::from_micros(20),
            taught,
            loaded: false,
        };
        assert_eq!(teach_items(row(true), Scale::Full), TEACH_ITEMS);
        assert_eq!(teach_items(row(true), Scale::Tiny), TEACH_ITEMS / 10);
        assert_eq!(teach_items(row(false), Scale::Full), 0);
    }

    #[test]
    fn a_taught_convoy_counts_what_the_pool_did_after_the_teaching() {
        use tidepool::ThreadSample;
        let sample = |ms, running, blocked, idle| ThreadSample {
            at: Duration::from_millis(ms),
            running,
            blocked,
            idle,
        };
        let mut before = tidepool::Metrics::default();
        before.thread_series = vec![sample(1, 2, 100, 0), sample(5, 2, 0, 100)];
        before.threads_started = 102;
        before.presumed_blocking = 90;
        let mut after = before.clone();
        after
            .thread_series
            .extend([sample(6, 2, 5, 100), sample(7, 2, 3, 100)]);
        after.threads_started = 105;
        after.presumed_blocking = 190;
        assert_eq!(
            convoy_counters(&before, &after),
            [
                ("convoy_peak_busy_threads", 7.0),
                ("convoy_threads_started", 3.0),
                ("convoy_presumed_blocking", 100.0),
            ]
        );
        // No sample during the convoy: no busy figure, not a zero.
        let counters = convoy_counters(&before, &before);
        assert_eq!(counters.len(), 2);
        assert_eq!(counters[0].0, "convoy_threads_started");
    }

    #[test]
    fn busy_threads_spin_until_stopped() {
        let busy = BusyThreads::start(2);
        assert!(busy.threads.iter().all(|t| !t.is_finished()));
        assert_eq!(busy.stop(), 2, "joined, so they ended");
    }

    #[test]
    fn items_hold_the_lock_one_at_a_time_and_count() {
        let phase = Phase::for_test(3);
        let lock = Arc::new(Mutex::new(0));
        let threads: Vec<_> = (0..3)
            .map(|i| {
                std::thread::spawn(item(
                    phase.clone(),
                    lock.clone(),
                    i,
                    if i == 0 {
                        Hold::Sleep(Duration::from_millis(1))
                    } else {
                        Hold::Lock(Duration::from_micros(50))
                    },
                ))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(*lock.lock().unwrap(), 2, "the sleeper does not count");
        assert!(phase.wait(Duration::ZERO).is_ok());
    }

    fn result(id: &str, threads: f64, wall: f64) -> RunResult {
        done_run(&EXPERIMENT, id, &[("peak_threads", threads), (WALL, wall)])
    }

    #[test]
    fn the_verdict_holds_tidepool_to_both_targets() {
        assert_verdict_says(
            &EXPERIMENT,
            vec![
                result("tidepool-10k-5us", 4.0, 60.0),
                result("fixed-10k-5us", 2.0, 50.0),
                result("tidepool-100k-20us", 14.0, 2100.0),
                result("fixed-100k-20us", 2.0, 2050.0),
            ],
            &[
                "10k x 5 µs 4 threads, 60 ms = 1.20x the Fixed pool's; 100k x 20 µs 14 threads, 2.1 s = 1.02x",
                "Verdict: missed on 100k-20us threads (",
            ],
        );
        let taught = done_run(
            &EXPERIMENT,
            "taught-10k-100us",
            &[
                ("peak_threads", 102.0),
                ("convoy_peak_busy_threads", 12.0),
                (WALL, 1100.0),
            ],
        );
        assert_verdict_says(
            &EXPERIMENT,
            vec![
                result("tidepool-10k-100us", 3.0, 1000.0),
                taught,
                result("fixed-10k-100us", 2.0, 1000.0),
            ],
            &[
                "10k x 100 µs 3 threads, 1.0 s = 1.00x the Fixed pool's; taught 10k x 100 µs 12 threads, 1.1 s = 1.10x",
                "missed on taught 10k-100us threads (",
            ],
        );
        assert_verdict_says(
            &EXPERIMENT,
            vec![
                result("tidepool-10k-5us", 4.0, 70.0),
                result("fixed-10k-5us", 2.0, 50.0),
            ],
            &["missed on 10k-5us wall"],
        );
        assert_verdict_says(
            &EXPERIMENT,
            vec![result("tidepool-10k-20us", 3.0, 1.0)],
            &["both goals met on every tidepool row (1)"],
        );
        assert_eq!(
            verdict_of(&EXPERIMENT, vec![result("fixed-10k-5us", 2.0, 1.0)]),
            None
        );
    }
}

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

/// The convoys, as their ids name them: (count, hold in µs).
const CONVOYS: [(&str, &str); 6] = [
    ("10k", "5us"),
    ("10k", "20us"),
    ("10k", "100us"),
    ("100k", "5us"),
    ("100k", "20us"),
    ("100k", "100us"),
];

/// One row: a system and its convoy at full scale.
#[derive(Debug, Clone, Copy)]
struct Row {
    way: Way,
    items: usize,
    hold: Duration,
}

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
                    },
                )
            },
        }
    };
}

/// The four systems' rows of one convoy.
macro_rules! convoy {
    ($count:literal, $items:literal, $hold:literal) => {
        [
            row!(tidepool, "tidepool", Way::Tidepool, $count, $items, $hold),
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

/// Every row, convoy by convoy.
const RUNS: [[RunSpec; 4]; 6] = [
    convoy!("10k", 10_000, 5),
    convoy!("10k", 10_000, 20),
    convoy!("10k", 10_000, 100),
    convoy!("100k", 100_000, 5),
    convoy!("100k", 100_000, 20),
    convoy!("100k", 100_000, 100),
];

/// The rows in one slice.
static FLAT: [RunSpec; 24] = {
    let mut out = [RUNS[0][0]; 24];
    let mut i = 0;
    while i < 24 {
        out[i] = RUNS[i / 4][i % 4];
        i += 1;
    }
    out
};

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "lock-convoy",
    about: ABOUT,
    question: "Closures convoying on one Mutex look blocked while they wait: does tidepool stay within concurrency + 8 threads and 1.2x the wall time of a Fixed pool of 2?",
    verdict,
    scale: describe_scale,
    headline: WALL,
    baseline: "fixed-10k-5us",
    baselines: &[
        ("tidepool-10k-5us", "fixed-10k-5us"),
        ("threadpool-10k-5us", "fixed-10k-5us"),
        ("rayon-10k-5us", "fixed-10k-5us"),
        ("tidepool-10k-20us", "fixed-10k-20us"),
        ("fixed-10k-20us", "fixed-10k-20us"),
        ("threadpool-10k-20us", "fixed-10k-20us"),
        ("rayon-10k-20us", "fixed-10k-20us"),
        ("tidepool-10k-100us", "fixed-10k-100us"),
        ("fixed-10k-100us", "fixed-10k-100us"),
        ("threadpool-10k-100us", "fixed-10k-100us"),
        ("rayon-10k-100us", "fixed-10k-100us"),
        ("tidepool-100k-5us", "fixed-100k-5us"),
        ("fixed-100k-5us", "fixed-100k-5us"),
        ("threadpool-100k-5us", "fixed-100k-5us"),
        ("rayon-100k-5us", "fixed-100k-5us"),
        ("tidepool-100k-20us", "fixed-100k-20us"),
        ("fixed-100k-20us", "fixed-100k-20us"),
        ("threadpool-100k-20us", "fixed-100k-20us"),
        ("rayon-100k-20us", "fixed-100k-20us"),
        ("tidepool-100k-100us", "fixed-100k-100us"),
        ("fixed-100k-100us", "fixed-100k-100us"),
        ("threadpool-100k-100us", "fixed-100k-100us"),
        ("rayon-100k-100us", "fixed-100k-100us"),
    ],
    headlines: &[],
    runs: &FLAT,
    opt_in: &[
        "tidepool-100k-100us",
        "fixed-100k-100us",
        "threadpool-100k-100us",
        "rayon-100k-100us",
    ],
    plots,
    default_repeat: 3,
    rotate: true,
};

fn describe_scale(scale: Scale) -> String {
    let d = DIVIDE.at(scale);
    format!(
        "{} and {} items holding one Mutex for 5, 20 or 100 µs each (the 100,000 x 100 µs rows \
         opt-in); 2 slots",
        group_digits((10_000 / d) as f64),
        group_digits((100_000 / d) as f64)
    )
}

/// The least a row can take: its items one after the other, each holding
/// the lock.
fn lock_bound(items: usize, hold: Duration) -> Duration {
    hold * u32::try_from(items).unwrap_or(u32::MAX)
}

/// One repetition of one row, in a process of its own.
fn run(ctx: &RunCtx, id: &str, row: Row) -> Result<Measured, String> {
    let items = row.items / DIVIDE.at(ctx.scale);
    let limit = lock_bound(items, row.hold) * 20 + Duration::from_secs(120);
    in_fresh_process(ctx, &EXPERIMENT, id, limit, |ctx| measure(ctx, row))
}

/// Builds the system, hands it the convoy, waits for it, and reports.
fn measure(ctx: &RunCtx, row: Row) -> Result<Measured, String> {
    let items = (row.items / DIVIDE.at(ctx.scale)).max(1);
    let bound = lock_bound(items, row.hold);
    let lock = Arc::new(Mutex::new(0_usize));
    let limit = bound * 20 + Duration::from_secs(60);
    let (waited, ended) = Session::one_batch(
        ctx,
        row.way,
        false,
        "convoy",
        items,
        limit,
        |system, phase, i| {
            system.spawn_fn(item(phase.clone(), lock.clone(), i, row.hold));
        },
    )?;
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
    m.note = Some(format!(
        "{} items held the lock {} µs each.",
        group_digits(items as f64),
        row.hold.as_micros()
    ));
    Ok(m)
}

/// Item `i`: holds the lock for `hold` of its own CPU time.
fn item(
    phase: Arc<Phase>,
    lock: Arc<Mutex<usize>>,
    i: usize,
    hold: Duration,
) -> impl FnOnce() + Send + 'static {
    move || {
        {
            let mut held = lock.lock().unwrap_or_else(|e| e.into_inner());
            std::hint::black_box(burn_cpu(hold));
            *held += 1;
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

/// The summary's answer: each tidepool convoy's threads and wall time over
/// the Fixed pool's, against the targets.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let mut rows = Vec::new();
    let mut missed = Vec::new();
    for (items, hold) in CONVOYS {
        let convoy = format!("{items}-{hold}");
        let Some(threads) = median(exp, &format!("tidepool-{convoy}"), "peak_threads") else {
            continue;
        };
        let wall = median(exp, &format!("tidepool-{convoy}"), WALL);
        let fixed = median(exp, &format!("fixed-{convoy}"), WALL);
        let mut row = format!(
            "{items} x {} {}",
            hold.replace("us", " µs"),
            count(threads, "thread", "threads")
        );
        if threads > THREADS_TARGET as f64 {
            missed.push(format!("{convoy} threads"));
        }
        if let (Some(w), Some(f)) = (wall, fixed) {
            let x = w / f;
            let _ = write!(row, ", {} = {x:.2}x the Fixed pool's", ms(w));
            if x > WALL_TARGET {
                missed.push(format!("{convoy} wall"));
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
        assert_eq!(ids.len(), 24);
        assert_eq!(ids[0], "tidepool-10k-5us");
        assert_eq!(ids[23], "rayon-100k-100us");
        for id in &ids {
            let (system, convoy) = id.split_once('-').unwrap();
            assert_eq!(
                EXPERIMENT.baseline_of(id),
                format!("fixed-{convoy}"),
                "{id}"
            );
            let spec = EXPERIMENT.run(id).unwrap();
            let want = if system == "fixed" {
                "tidepool-fixed"
            } else {
                system
            };
            assert_eq!(spec.system, want);
        }
        let defaults = EXPERIMENT.default_run_ids();
        assert_eq!(defaults.len(), 20);
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
    fn items_hold_the_lock_one_at_a_time_and_count() {
        let phase = Phase::for_test(3);
        let lock = Arc::new(Mutex::new(0));
        let threads: Vec<_> = (0..3)
            .map(|i| {
                std::thread::spawn(item(
                    phase.clone(),
                    lock.clone(),
                    i,
                    Duration::from_micros(50),
                ))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(*lock.lock().unwrap(), 3);
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

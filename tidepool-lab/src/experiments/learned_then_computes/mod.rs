#![doc = include_str!("about.md")]
//!
#![doc = include_str!("../quota/about_rest.md")]
//!
//! # The program
//!
//! Every item, of both phases, is the one closure `Phase::item` returns:
//! a `Job` decides whether it sleeps or computes, so to tidepool it is one
//! kind of task, the kind that was seen blocking.
//!
//! 1. Teaching: 100 items that sleep 5 ms (1 ms at `--tiny`), handed over
//!    in a loop, then waited for. On tidepool the monitor finds them
//!    asleep and the kind is learned to block; `presumed_after_teaching`
//!    says whether the pool presumes the kind blocking when the burst
//!    starts (1) or not (0).
//! 2. The burst: N items (60 or 300, the row's) that compute 50 ms of
//!    their own CPU time (12.5 ms at `--quick`, 2 ms at `--tiny`), handed
//!    over in a loop with no pause. Its clock starts just before the first.
//!
//! # Figures
//!
//! - `burst_wall_ms` (the headline): from just before the burst's first
//!   item was handed over to the end of its last; `ideal_wall_ms`, the
//!   slot-bound `ceil(N/2) x 50 ms`, and `wall_vs_ideal`.
//! - The computing count's figures (`over_quota_ms`, `peak_computing`,
//!   `peak_computing_sampled`, `max_sample_gap_ms`), as in `quota`: only
//!   the burst computes, so they are the burst's.
//! - `burst_presumed_blocking` and `burst_presumptions_failed`: tidepool's
//!   counters over the burst alone (after less before).
//! - `burst_peak_threads`: the most threads the system ran during the
//!   burst (threads left idle by the teaching count), counted as
//!   `peak_threads` is: tidepool's own series (its monitor's samples),
//!   the process's threads from `/proc` for the others; `peak_threads`
//!   and tidepool's counters over the whole run, as in `quota`.
//! - `teach_wall_ms`: how long the teaching took.
//!
//! The ratio column divides each row's burst wall time by tidepool's row
//! of the same burst.
//!
//! # Run time
//!
//! A row takes its teaching (about 0.25 s on the peers, which sleep 2 at
//! a time, less on tidepool) and its burst's slot-bound time: a round at
//! full scale about 3 x (1.5 + 7.5) + 6 x 0.25 = 28.5 s, with six process
//! starts.

use std::fmt::Write as _;
use std::time::Duration;

use super::fresh_process::in_fresh_process;
use super::latency::threads_plot;
use super::quota::ideal;
use super::quota::session::{Job, Session, Way};
use super::quota::{duration, on_every_row, over_quota_plot, put_against, serial, CONCURRENCY};
use crate::aggregate::Measured;
use crate::experiments::metric_bars;
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::report::summary::{count, median, ms};

/// What the experiment shows: the module doc's opening paragraph.
const ABOUT: &str = include_str!("about.md").trim_ascii_end();

/// The headline: the burst's wall time.
const WALL: &str = "burst_wall_ms";

/// The target for tidepool's time over quota, ms.
const OVER_QUOTA_TARGET_MS: f64 = 100.0;

/// The target for tidepool's presumptions failed per burst.
const FAILED_TARGET: f64 = 2.0;

/// Items of the teaching phase.
const TEACH_ITEMS: usize = 100;

/// The burst sizes.
const BURSTS: [usize; 2] = [60, 300];

/// One row: a system and its burst's size.
#[derive(Debug, Clone, Copy)]
struct Row {
    way: Way,
    burst: usize,
}

/// The teaching items' sleep and the burst items' computation.
#[derive(Debug, Clone, Copy)]
struct Times {
    teach_sleep: Duration,
    compute: Duration,
}

/// The times at each scale.
const SCALES: ScaleTable<Times> = ScaleTable {
    full: Times {
        teach_sleep: Duration::from_millis(5),
        compute: Duration::from_millis(50),
    },
    quick: Times {
        teach_sleep: Duration::from_millis(5),
        compute: Duration::from_micros(12_500),
    },
    tiny: Times {
        teach_sleep: Duration::from_millis(1),
        compute: Duration::from_millis(2),
    },
};

/// How each system runs the items, in its description.
macro_rules! how {
    (tidepool) => {
        "tidepool with concurrency(2), each item a closure through Pool::execute"
    };
    (tokio) => {
        "tokio with 2 workers, each item a task (Runtime::spawn) that sleeps or computes inline"
    };
    (rayon) => {
        "rayon with 2 threads, each item in ThreadPool::spawn"
    };
}

/// A row's `RunSpec`: `<system>-burst-<n>`.
macro_rules! row {
    ($system:ident, $way:expr, $n:literal) => {
        RunSpec {
            id: concat!(stringify!($system), "-burst-", $n),
            system: stringify!($system),
            description: concat!(
                how!($system),
                "; taught with 100 items of the closure type that sleep 5 ms, then a burst of ",
                $n,
                " of the same type that compute."
            ),
            execute: |ctx| {
                run(
                    ctx,
                    concat!(stringify!($system), "-burst-", $n),
                    Row {
                        way: $way,
                        burst: $n,
                    },
                )
            },
        }
    };
}

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "learned-then-computes",
    about: ABOUT,
    summary: "Issue #41: a closure type taught to block, then a burst of it that computes: how \
many compute at once.",
    question: "Taught that a closure type blocks, then given a burst of that type that computes: does tidepool keep to its slots (at most 100 ms with more than concurrency + 2 computing, at most 2 presumptions failed per burst)?",
    verdict,
    scale: describe_scale,
    headline: WALL,
    baseline: "tidepool-burst-60",
    baselines: &[
        ("tokio-burst-60", "tidepool-burst-60"),
        ("rayon-burst-60", "tidepool-burst-60"),
        ("tidepool-burst-300", "tidepool-burst-300"),
        ("tokio-burst-300", "tidepool-burst-300"),
        ("rayon-burst-300", "tidepool-burst-300"),
    ],
    headlines: &[],
    runs: &[
        row!(tidepool, Way::Tidepool, 60),
        row!(tokio, Way::Tokio, 60),
        row!(rayon, Way::Rayon, 60),
        row!(tidepool, Way::Tidepool, 300),
        row!(tokio, Way::Tokio, 300),
        row!(rayon, Way::Rayon, 300),
    ],
    opt_in: &[],
    plots,
    full_only: &[],
    default_repeat: 3,
    rotate: true,
};

fn describe_scale(scale: Scale) -> String {
    let t = SCALES.at(scale);
    format!(
        "{TEACH_ITEMS} items sleeping {}, then a burst of 60 or 300 computing {} of CPU each; 2 slots",
        duration(t.teach_sleep),
        duration(t.compute)
    )
}

/// The longest a row should take: the teaching and the burst, each on 2
/// threads one item after the other.
fn longest(row: Row, t: Times) -> Duration {
    serial(TEACH_ITEMS, t.teach_sleep) + serial(row.burst, t.compute)
}

/// One repetition of one row, in a process of its own.
fn run(ctx: &RunCtx, id: &str, row: Row) -> Result<Measured, String> {
    let limit = longest(row, SCALES.at(ctx.scale)) * 4 + Duration::from_secs(60);
    in_fresh_process(ctx, &EXPERIMENT, id, limit, |ctx| measure(ctx, row))
}

/// Teaches, then bursts, and reports.
fn measure(ctx: &RunCtx, row: Row) -> Result<Measured, String> {
    let t = SCALES.at(ctx.scale);
    let limit = longest(row, t) * 4 + Duration::from_secs(30);
    let session = Session::start(ctx, row.way, true, TEACH_ITEMS + row.burst)?;
    let batch = |label, n, job| {
        session.hand_over(ctx, label, n, limit, |system, phase, i| {
            system.spawn_fn(phase.item(i, job));
        })
    };
    let taught = batch("teaching", TEACH_ITEMS, Job::Sleep(t.teach_sleep));
    let before = session.tidepool_metrics();
    let burst = match &taught {
        Ok(_) => batch("burst", row.burst, Job::Compute(t.compute)),
        Err(_) => Err("no burst: the teaching did not end".to_string()),
    };
    let after = session.tidepool_metrics();
    let ended = session.finish(ctx);
    let teach_wall = taught.map_err(|e| format!("teaching: {e}"))?.last();
    let burst = burst?;
    let (burst_from, burst_wall) = (burst.origin, burst.last());

    let ideal = ideal::last_completion(row.burst, CONCURRENCY, Duration::ZERO, t.compute);
    let mut m = Measured::default();
    m.put("items", row.burst as f64);
    put_against(
        &mut m,
        [WALL, "ideal_wall_ms", "wall_vs_ideal"],
        burst_wall,
        ideal,
    );
    ended.put_computing(&mut m);
    if let (Some(before), Some(after)) = (&before, &after) {
        m.put(
            "burst_presumed_blocking",
            (after.presumed_blocking - before.presumed_blocking) as f64,
        );
        m.put(
            "burst_presumptions_failed",
            (after.presumptions_failed - before.presumptions_failed) as f64,
        );
        let presumed = before.kinds.iter().any(|k| k.presumed_now);
        m.put("presumed_after_teaching", f64::from(u8::from(presumed)));
    }
    m.put(
        "burst_peak_threads",
        ended.peak_threads_since(burst_from) as f64,
    );
    m.put("teach_wall_ms", teach_wall.as_secs_f64() * 1e3);
    ended.put_threads_and_pool(&mut m);
    m.note = Some(format!(
        "{TEACH_ITEMS} items slept {} each, then {} computed {} of CPU each.",
        duration(t.teach_sleep),
        row.burst,
        duration(t.compute)
    ));
    Ok(m)
}

/// Time over quota and the most computing at once per row; threads of
/// the bursts of 300.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let mut out = vec![
        over_quota_plot(
            runs,
            "learned-then-computes-over-quota",
            "The burst after the teaching; the issue's target for tidepool is at most 100 ms.",
        ),
        Plot::bars(
            "learned-then-computes-peak-computing",
            (
                "Most tasks computing at once",
                "2 is one per slot; every start is counted, however short the overlap.",
            ),
            "tasks computing at once",
            metric_bars(runs, "peak_computing"),
        ),
    ];
    out.extend(threads_plot(
        runs,
        &["tidepool-burst-300", "tokio-burst-300", "rayon-burst-300"],
        "learned-then-computes-threads",
        (
            "Threads over the teaching and the burst of 300",
            "Threads started for the teaching's sleeps, and whether the burst that computes gets more.",
        ),
    ));
    out
}

/// The summary's answer: each tidepool row against the targets,
/// with the peers' most computing at once.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let mut rows = Vec::new();
    let mut missed = Vec::new();
    for n in BURSTS {
        let id = format!("tidepool-burst-{n}");
        let get = |metric| median(exp, &id, metric);
        let (Some(quota), Some(failed)) = (get("over_quota_ms"), get("burst_presumptions_failed"))
        else {
            continue;
        };
        let mut row = format!("burst of {n}: {} over the quota", ms(quota));
        let _ = write!(
            row,
            ", {}",
            count(failed, "presumption failed", "presumptions failed")
        );
        if let Some(peak) = get("peak_computing") {
            let _ = write!(row, ", at most {peak:.0} computing at once");
        }
        if let Some(x) = get("wall_vs_ideal") {
            let _ = write!(row, ", wall {x:.2}x the slot-bound");
        }
        rows.push(row);
        if quota > OVER_QUOTA_TARGET_MS {
            missed.push(format!("{n}: time over quota"));
        }
        if failed > FAILED_TARGET {
            missed.push(format!("{n}: presumptions failed"));
        }
    }
    if rows.is_empty() {
        return None;
    }
    let mut s = format!("tidepool's {}", rows.join("; "));
    for peer in ["tokio", "rayon"] {
        let peaks: Vec<String> = BURSTS
            .iter()
            .filter_map(|n| median(exp, &format!("{peer}-burst-{n}"), "peak_computing"))
            .map(|p| format!("{p:.0}"))
            .collect();
        if !peaks.is_empty() {
            let _ = write!(
                s,
                "; {peer} at most {} computing at once",
                peaks.join(" and ")
            );
        }
    }
    let _ = write!(
        s,
        ". Verdict: {} (the goals: at most {OVER_QUOTA_TARGET_MS:.0} ms with more than \
         concurrency + 2 computing, at most {FAILED_TARGET:.0} presumptions failed per burst).",
        on_every_row("both goals met", rows.len(), "missed on burst", &missed)
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
        assert_plain_about(ABOUT, "Does what tidepool learned");
    }

    fn result(id: &str, quota: f64, failed: f64) -> RunResult {
        let figures = [
            ("over_quota_ms", quota),
            ("burst_presumptions_failed", failed),
            ("peak_computing", 3.0),
            ("wall_vs_ideal", 1.04),
        ];
        done_run(&EXPERIMENT, id, &figures)
    }

    #[test]
    fn the_verdict_holds_each_tidepool_row_to_both_targets() {
        assert_verdict_says(
            &EXPERIMENT,
            vec![
                result("tidepool-burst-60", 12.0, 1.0),
                result("tidepool-burst-300", 140.0, 2.0),
                result("tokio-burst-60", 0.0, 0.0),
            ],
            &[
                "burst of 60: 12 ms over the quota, 1 presumption failed, at most 3 computing at once, wall 1.04x the slot-bound",
                "tokio at most 3 computing at once",
                "Verdict: missed on burst 300: time over quota",
            ],
        );
        assert_verdict_says(
            &EXPERIMENT,
            vec![result("tidepool-burst-60", 99.0, 3.0)],
            &["missed on burst 60: presumptions failed"],
        );
        assert_verdict_says(
            &EXPERIMENT,
            vec![result("tidepool-burst-60", 0.0, 0.0)],
            &["both goals met on every tidepool row (1)"],
        );
        assert_eq!(
            verdict_of(&EXPERIMENT, vec![result("rayon-burst-60", 0.0, 0.0)]),
            None
        );
    }
}

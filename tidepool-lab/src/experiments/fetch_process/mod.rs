#![doc = include_str!("about.md")]
//!
#![doc = include_str!("../quota/about_rest.md")]
//!
//! # Items
//!
//! The lab's thread hands all N items over in a loop, with no pause, and
//! the clock starts just before the first. Each item sleeps the wait
//! (`thread::sleep`), then computes a fixed amount of its own CPU time,
//! counted as computing, then records when it ended. At full scale the
//! wait is 20 ms and the computation 30 ms; at `--quick` 5 ms and 7.5 ms;
//! at `--tiny` 1 ms and 1 ms. The counts are those of the ids at every
//! scale.
//!
//! - One type: every item is the same closure (`fetch_item::<0>`), one
//!   kind of task to tidepool, which learns from the first items found
//!   asleep that the kind blocks, presumes the next ones blocking (hands
//!   each a thread without a slot) and must find out that they compute.
//! - 16 types: item `i` is `fetch_item::<{i % 16}>`, a const-generic
//!   closure, so 16 types and 16 kinds, each learning on its own (with 16
//!   items, each kind has one).
//!
//! # Systems
//!
//! - `tidepool-*`: `Pool::builder().concurrency(2)`, each item a closure
//!   through `Pool::execute`, no `tidepool::blocking`, no hint.
//! - `tokio-*`: tokio's multi-thread runtime with 2 workers; each item a
//!   task (`Runtime::spawn`) that awaits `spawn_blocking` of the wait and
//!   then computes on the runtime's worker: what a tokio user writes.
//! - `rayon-*`: a rayon pool of 2 threads, each whole item in `spawn`: the
//!   waits hold the threads, so rayon's mean is far above the schedule's,
//!   the cost of a pool that cannot tell waiting from computing.
//!
//! The peers' rows of 16 types (`tokio-*-distinct-types`,
//! `rayon-*-distinct-types`) are opt-in: they only confirm that a type
//! changes nothing for a pool that does not learn, and would cost 13 s of
//! a default round.
//!
//! # Figures
//!
//! - `mean_completion_ms` (the headline): the mean over the items of when
//!   each ended, from just before the first was handed over.
//! - `ideal_mean_ms`: the slot-bound schedule's mean for the same N, wait
//!   and computation (`quota::ideal`, where the formula is derived), and
//!   `mean_vs_ideal`, the one over the other: the target is
//!   `mean_vs_ideal` at most 1.15 on tidepool's rows.
//! - `wall_ms`: when the last item ended; `ideal_wall_ms`, the schedule's
//!   (`wait + ceil(N/2) x computation`).
//! - The computing count's figures (`over_quota_ms`, `peak_computing`,
//!   `peak_computing_sampled`, `max_sample_gap_ms`), `peak_threads` and
//!   tidepool's counters, as in `quota`.
//!
//! The ratio column divides each row's mean completion by tidepool's row of
//! one type with the same N.
//!
//! # Run time
//!
//! A row takes about its slot-bound wall time (rayon's: N x 50 ms / 2)
//! and the start of a process: at full scale tidepool's six rows about
//! 10 s, tokio's three 5 s, rayon's three 8.5 s, so a round of the default
//! rows takes about 25 s.

use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use super::done;
use super::fresh_process::in_fresh_process;
use super::quota::ideal;
use super::quota::session::{Phase, Session, Way};
use super::quota::{duration, on_every_row, put_against, serial, CONCURRENCY};
use crate::aggregate::Measured;
use crate::experiments::{metric_bars, per_item_plot};
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::report::summary::{median, ms};
use crate::systems::System;

/// What the experiment shows: the module doc's opening paragraph.
const ABOUT: &str = include_str!("about.md").trim_ascii_end();

/// The headline: the items' mean completion time.
const MEAN: &str = "mean_completion_ms";

/// The mean completion over the slot-bound schedule's.
const MEAN_VS_IDEAL: &str = "mean_vs_ideal";

/// The target for tidepool's `mean_vs_ideal`.
const TARGET: f64 = 1.15;

/// The item counts.
const COUNTS: [usize; 3] = [16, 64, 256];

/// Distinct closure types in the rows of distinct types.
const TYPES: usize = 16;

/// One row: a system, its item count, and whether its closures are of
/// [`TYPES`] types or one.
#[derive(Debug, Clone, Copy)]
struct Row {
    way: Way,
    items: usize,
    distinct: bool,
    /// The wait inside `tidepool::blocking` (one type).
    declared: bool,
}

/// An item's wait, then its computation.
#[derive(Debug, Clone, Copy)]
struct Times {
    wait: Duration,
    compute: Duration,
}

/// The items' times at each scale.
const SCALES: ScaleTable<Times> = ScaleTable {
    full: Times {
        wait: Duration::from_millis(20),
        compute: Duration::from_millis(30),
    },
    quick: Times {
        wait: Duration::from_millis(5),
        compute: Duration::from_micros(7500),
    },
    tiny: Times {
        wait: Duration::from_millis(1),
        compute: Duration::from_millis(1),
    },
};

/// A row's `RunSpec`: `<system>-<n>-<types>`.
macro_rules! row {
    ($system:ident, $way:expr, $n:literal, one) => {
        row!(@ $system, $way, $n, "one-type", "of one type", false)
    };
    ($system:ident, $way:expr, $n:literal, distinct) => {
        row!(@ $system, $way, $n, "distinct-types", "of 16 distinct types", true)
    };
    ($system:ident, $way:expr, $n:literal, declared) => {
        row!(@ $system, $way, $n, "declared", "of one type, the wait inside tidepool::blocking", false, true)
    };
    (@ $system:ident, $way:expr, $n:literal, $types:literal, $words:literal, $distinct:expr) => {
        row!(@ $system, $way, $n, $types, $words, $distinct, false)
    };
    (@ $system:ident, $way:expr, $n:literal, $types:literal, $words:literal, $distinct:expr, $declared:expr) => {
        RunSpec {
            id: concat!(stringify!($system), "-", $n, "-", $types),
            system: stringify!($system),
            description: concat!(how!($system), "; ", $n, " items, closures ", $words, "."),
            execute: |ctx| {
                run(
                    ctx,
                    concat!(stringify!($system), "-", $n, "-", $types),
                    Row {
                        way: $way,
                        items: $n,
                        distinct: $distinct,
                        declared: $declared,
                    },
                )
            },
        }
    };
}

/// How each system is handed an item, in its description.
macro_rules! how {
    (tidepool) => {
        "tidepool with concurrency(2), each item a closure through Pool::execute that sleeps, then computes"
    };
    (tokio) => {
        "tokio with 2 workers, each item a task that awaits spawn_blocking of the sleep, then computes on the runtime"
    };
    (rayon) => {
        "rayon with 2 threads, each whole item (sleep, then compute) in ThreadPool::spawn"
    };
}

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "fetch-process",
    about: ABOUT,
    summary: "Issue #41: items that wait, then compute, all at once: mean completion against two \
computing at a time.",
    question: "Items that wait, then compute half as long again (20 ms and 30 ms at full scale, 5 and 7.5 at the quick one), all handed over at once: is tidepool's mean completion within 1.15x of the slot-bound schedule (2 computing at a time after the waits)?",
    verdict,
    scale: describe_scale,
    headline: MEAN,
    baseline: "tidepool-16-one-type",
    baselines: &[
        ("tidepool-16-distinct-types", "tidepool-16-one-type"),
        ("tidepool-16-declared", "tidepool-16-one-type"),
        ("tokio-16-one-type", "tidepool-16-one-type"),
        ("rayon-16-one-type", "tidepool-16-one-type"),
        ("tokio-16-distinct-types", "tidepool-16-one-type"),
        ("rayon-16-distinct-types", "tidepool-16-one-type"),
        ("tidepool-64-one-type", "tidepool-64-one-type"),
        ("tidepool-64-distinct-types", "tidepool-64-one-type"),
        ("tidepool-64-declared", "tidepool-64-one-type"),
        ("tokio-64-one-type", "tidepool-64-one-type"),
        ("rayon-64-one-type", "tidepool-64-one-type"),
        ("tokio-64-distinct-types", "tidepool-64-one-type"),
        ("rayon-64-distinct-types", "tidepool-64-one-type"),
        ("tidepool-256-one-type", "tidepool-256-one-type"),
        ("tidepool-256-distinct-types", "tidepool-256-one-type"),
        ("tidepool-256-declared", "tidepool-256-one-type"),
        ("tokio-256-one-type", "tidepool-256-one-type"),
        ("rayon-256-one-type", "tidepool-256-one-type"),
        ("tokio-256-distinct-types", "tidepool-256-one-type"),
        ("rayon-256-distinct-types", "tidepool-256-one-type"),
    ],
    headlines: &[],
    runs: &[
        row!(tidepool, Way::Tidepool, 16, one),
        row!(tidepool, Way::Tidepool, 16, distinct),
        row!(tidepool, Way::Tidepool, 16, declared),
        row!(tokio, Way::Tokio, 16, one),
        row!(rayon, Way::Rayon, 16, one),
        row!(tidepool, Way::Tidepool, 64, one),
        row!(tidepool, Way::Tidepool, 64, distinct),
        row!(tidepool, Way::Tidepool, 64, declared),
        row!(tokio, Way::Tokio, 64, one),
        row!(rayon, Way::Rayon, 64, one),
        row!(tidepool, Way::Tidepool, 256, one),
        row!(tidepool, Way::Tidepool, 256, distinct),
        row!(tidepool, Way::Tidepool, 256, declared),
        row!(tokio, Way::Tokio, 256, one),
        row!(rayon, Way::Rayon, 256, one),
        row!(tokio, Way::Tokio, 16, distinct),
        row!(rayon, Way::Rayon, 16, distinct),
        row!(tokio, Way::Tokio, 64, distinct),
        row!(rayon, Way::Rayon, 64, distinct),
        row!(tokio, Way::Tokio, 256, distinct),
        row!(rayon, Way::Rayon, 256, distinct),
    ],
    opt_in: &[
        "tokio-16-distinct-types",
        "rayon-16-distinct-types",
        "tokio-64-distinct-types",
        "rayon-64-distinct-types",
        "tokio-256-distinct-types",
        "rayon-256-distinct-types",
    ],
    plots,
    full_only: &[
        "tidepool-16-distinct-types",
        "tidepool-64-distinct-types",
        "tidepool-256-distinct-types",
        "tidepool-16-declared",
        "tidepool-64-declared",
        "tidepool-256-declared",
    ],
    default_repeat: 3,
    rotate: true,
};

fn describe_scale(scale: Scale) -> String {
    let t = SCALES.at(scale);
    format!(
        "16, 64 and 256 items at once, each waiting {} then computing {} of CPU; 2 slots",
        duration(t.wait),
        duration(t.compute)
    )
}

/// The longest a row can take: every item's wait and computation on 2
/// threads, one after the other (rayon's way).
fn longest(items: usize, t: Times) -> Duration {
    serial(items, t.wait + t.compute)
}

/// One repetition of one row, in a process of its own.
fn run(ctx: &RunCtx, id: &str, row: Row) -> Result<Measured, String> {
    let limit = longest(row.items, SCALES.at(ctx.scale)) * 4 + Duration::from_secs(60);
    in_fresh_process(ctx, &EXPERIMENT, id, limit, |ctx| measure(ctx, row))
}

/// Builds the system, hands it every item at once, waits for them, and
/// reports.
fn measure(ctx: &RunCtx, row: Row) -> Result<Measured, String> {
    let t = SCALES.at(ctx.scale);
    let limit = longest(row.items, t) * 4 + Duration::from_secs(30);
    let (waited, ended) = Session::one_batch(
        ctx,
        row.way,
        true,
        "items",
        row.items,
        limit,
        |system, phase, i| {
            if row.declared {
                system.spawn_fn(declared_item(phase.clone(), i, t));
                return;
            }
            let kind = if row.distinct { i % TYPES } else { 0 };
            SUBMIT[kind](system, phase.clone(), i, t);
        },
    )?;
    let done = waited?;

    let ideal_mean = ideal::mean_completion(row.items, CONCURRENCY, t.wait, t.compute);
    let ideal_wall = ideal::last_completion(row.items, CONCURRENCY, t.wait, t.compute);
    let mean = done.mean();
    let mut m = Measured::default();
    m.put("items", row.items as f64);
    put_against(
        &mut m,
        [MEAN, "ideal_mean_ms", MEAN_VS_IDEAL],
        mean,
        ideal_mean,
    );
    m.put("wall_ms", done.last().as_secs_f64() * 1e3);
    m.put("ideal_wall_ms", ideal_wall.as_secs_f64() * 1e3);
    ended.put_computing(&mut m);
    ended.put_threads_and_pool(&mut m);
    m.note = Some(format!(
        "Each item waited {} and computed {} of CPU.",
        duration(t.wait),
        duration(t.compute)
    ));
    m.per_item = done.ms();
    Ok(m)
}

/// Hands item `i` to a system, as a closure (or task) of one kind.
type Submit = fn(&System, Arc<Phase>, usize, Times);

/// `[submit_kind::<0>, submit_kind::<1>, ...]`.
macro_rules! kinds {
    ($($k:literal)*) => {
        [$(submit_kind::<$k> as Submit),*]
    };
}

/// The [`TYPES`] kinds: `SUBMIT[k]` hands over `fetch_item::<k>` (or, to
/// tokio, `fetch_task::<k>`).
const SUBMIT: [Submit; TYPES] = kinds!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);

/// Hands item `i` over as kind `K`.
fn submit_kind<const K: usize>(system: &System, phase: Arc<Phase>, i: usize, t: Times) {
    match system {
        System::Tokio(rt) => drop(rt.spawn(fetch_task::<K>(phase, i, t))),
        _ => system.spawn_fn(fetch_item::<K>(phase, i, t)),
    }
}

/// Item `i` as a closure of kind `K`: each `K` is a type of its own (a
/// closure's type carries its function's generic parameters).
fn fetch_item<const K: usize>(
    phase: Arc<Phase>,
    i: usize,
    t: Times,
) -> impl FnOnce() + Send + 'static {
    move || {
        black_box(K);
        thread::sleep(t.wait);
        phase.compute(t.compute);
        phase.end(i);
    }
}

/// Item `i` with its wait declared (`tidepool::blocking`): its slot is
/// handed over during the wait, and the section's end counts the worker
/// against the slots again at once, so no new item starts while it
/// computes.
fn declared_item(phase: Arc<Phase>, i: usize, t: Times) -> impl FnOnce() + Send + 'static {
    move || {
        tidepool::blocking(|| thread::sleep(t.wait));
        phase.compute(t.compute);
        phase.end(i);
    }
}

/// Item `i` as tokio code: the wait in `spawn_blocking`, awaited, then the
/// computation on the runtime's worker.
async fn fetch_task<const K: usize>(phase: Arc<Phase>, i: usize, t: Times) {
    black_box(K);
    // A sleep cannot panic, so there is no error to see.
    let _ = tokio::task::spawn_blocking(move || thread::sleep(t.wait)).await;
    phase.compute(t.compute);
    phase.end(i);
}

/// Mean completion over the schedule's per row, and completion by item
/// for the rows of 256.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let mut out = vec![Plot::bars(
        "fetch-process-mean-vs-ideal",
        (
            "Mean completion over the slot-bound schedule's",
            "1.0 is the best any pool of 2 slots can do; the issue's target for tidepool is at most 1.15.",
        ),
        "mean completion ÷ slot-bound schedule's",
        metric_bars(runs, MEAN_VS_IDEAL),
    )];
    out.extend(per_item_plot(
        runs,
        &[
            "tidepool-256-one-type",
            "tidepool-256-distinct-types",
            "tokio-256-one-type",
            "rayon-256-one-type",
        ],
        "fetch-process-completion-256",
        (
            "When each of 256 items ended",
            "The slot-bound schedule is a staircase, two items every computation; items that share the cores with many others all end late together.",
        ),
        "item (in the order handed over)",
        "completion, ms after the first was handed over",
        false,
    ));
    out
}

/// The summary's answer: each tidepool row's mean completion over the
/// slot-bound schedule's, against the target, with the peers' and
/// tidepool's most computing at once.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let mut rows = Vec::new();
    let mut over = Vec::new();
    for (variant, words) in [
        ("one-type", "one type"),
        ("distinct-types", "16 types"),
        ("declared", "one type, the wait declared"),
    ] {
        for n in COUNTS {
            let id = format!("tidepool-{n}-{variant}");
            if let Some(x) = median(exp, &id, MEAN_VS_IDEAL) {
                rows.push(format!("{n} of {words} {x:.2}x"));
                if x > TARGET {
                    over.push(id);
                }
            }
        }
    }
    if rows.is_empty() {
        return None;
    }
    let mut s = format!(
        "tidepool's mean completion over the slot-bound schedule's: {}",
        rows.join(", ")
    );
    for peer in ["tokio", "rayon"] {
        let xs: Vec<String> = COUNTS
            .iter()
            .filter_map(|n| {
                median(exp, &format!("{peer}-{n}-one-type"), MEAN_VS_IDEAL)
                    .map(|x| format!("{x:.2}x"))
            })
            .collect();
        if !xs.is_empty() {
            let _ = write!(s, "; {peer}'s {}", xs.join(", "));
        }
    }
    let tidepool_worst = |metric: &str| {
        done(&exp.runs)
            .filter(|r| r.spec.system == "tidepool")
            .filter_map(|r| r.measured.get(metric))
            .max_by(f64::total_cmp)
    };
    if let (Some(peak), Some(quota)) = (
        tidepool_worst("peak_computing"),
        tidepool_worst("over_quota_ms"),
    ) {
        let _ = write!(
            s,
            "; tidepool's most tasks computing at once {peak:.0}, longest time over the quota {}",
            ms(quota)
        );
    }
    let _ = write!(
        s,
        ". Verdict: {} (the goal: tidepool's mean completion at most {TARGET}x the slot-bound \
         schedule's on every row).",
        on_every_row(
            &format!("within {TARGET}x"),
            rows.len(),
            "over the goal on",
            &over
        )
    );
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::testing::{
        assert_plain_about, assert_verdict_says, done_run, verdict_of,
    };
    use std::any::TypeId;

    fn type_of<T: 'static>(_: &T) -> TypeId {
        TypeId::of::<T>()
    }

    #[test]
    fn the_about_text_is_plain() {
        assert_plain_about(ABOUT, "Items that each wait 20 ms");
    }

    #[test]
    fn each_kind_is_a_type_of_its_own() {
        let t = SCALES.at(Scale::Tiny);
        let phase = Phase::for_test(1);
        let a = type_of(&fetch_item::<0>(phase.clone(), 0, t));
        let a_again = type_of(&fetch_item::<0>(phase.clone(), 0, t));
        let b = type_of(&fetch_item::<1>(phase.clone(), 0, t));
        let p = type_of(&fetch_item::<15>(phase, 0, t));
        assert_eq!(a, a_again);
        assert_ne!(a, b);
        assert_ne!(b, p);
        assert_eq!(SUBMIT.len(), TYPES);
    }

    #[test]
    fn the_ids_say_what_each_row_runs() {
        let ids = EXPERIMENT.run_ids();
        assert_eq!(ids.len(), 21);
        assert!(ids.contains(&"tidepool-16-one-type"));
        assert!(ids.contains(&"tidepool-64-declared"));
        assert!(ids.contains(&"tidepool-256-distinct-types"));
        assert!(ids.contains(&"rayon-64-one-type"));
        let defaults = EXPERIMENT.default_run_ids();
        assert_eq!(defaults.len(), 15);
        assert!(!defaults.contains(&"tokio-256-distinct-types"));
        for id in ids {
            let n: usize = id.split('-').nth(1).unwrap().parse().unwrap();
            assert_eq!(
                EXPERIMENT.baseline_of(id),
                format!("tidepool-{n}-one-type"),
                "{id}"
            );
        }
    }

    fn result(id: &str, x: f64, peak: f64) -> RunResult {
        let figures = [
            (MEAN_VS_IDEAL, x),
            ("peak_computing", peak),
            ("over_quota_ms", 0.0),
        ];
        done_run(&EXPERIMENT, id, &figures)
    }

    #[test]
    fn the_verdict_holds_each_tidepool_row_to_the_target() {
        assert_verdict_says(
            &EXPERIMENT,
            vec![
                result("tidepool-16-one-type", 1.04, 2.0),
                result("tidepool-256-distinct-types", 1.3, 5.0),
                result("tokio-16-one-type", 1.02, 2.0),
                result("rayon-16-one-type", 1.9, 2.0),
            ],
            &[
                "16 of one type 1.04x, 256 of 16 types 1.30x",
                "tokio's 1.02x; rayon's 1.90x",
                "most tasks computing at once 5",
                "Verdict: over the goal on tidepool-256-distinct-types",
            ],
        );
        assert_verdict_says(
            &EXPERIMENT,
            vec![result("tidepool-64-one-type", 1.1, 2.0)],
            &["Verdict: within 1.15x on every tidepool row (1)"],
        );
        assert_eq!(
            verdict_of(&EXPERIMENT, vec![result("tokio-16-one-type", 1.0, 2.0)]),
            None
        );
    }
}

#![doc = include_str!("about.md")]
//!
#![doc = include_str!("../quota/about_rest.md")]
//!
//! # Items
//!
//! Which items sleep is `sleepers`: exactly half of them, picked by a
//! Fisher-Yates shuffle driven by SplitMix64 from a fixed seed, so every
//! run and every system gets the same items in the same order. Every item
//! is the one closure `Phase::item` returns, a `Job` deciding what it
//! does; the lab's thread hands all 200 over in a loop with no pause, the
//! clock starting just before the first. At full scale the sleep is 20 ms and
//! the computation 50 ms; at `--quick` 5 ms and 12.5 ms; at `--tiny` 1 ms
//! and 2 ms.
//!
//! # Systems
//!
//! - `tidepool`: `Pool::builder().concurrency(2)`, closures through
//!   `Pool::execute`, no annotation.
//! - `tokio-spawn-blocking`: tokio with 2 workers, every item through
//!   `spawn_blocking`: the blocking pool (up to 512 threads) starts one
//!   thread per item, so the computing half shares the cores 100 at a
//!   time: the oversubscription the issue is about, on the peer.
//! - `rayon`: a rayon pool of 2 threads, every item in `spawn`: never more
//!   than 2 computing, but the sleeps hold its threads.
//!
//! # Figures
//!
//! - `wall_ms` (the headline): when the last item ended; `ideal_wall_ms`,
//!   the slot-bound `max(sleep, ceil(100/2) x computation)`, and
//!   `wall_vs_ideal`.
//! - The computing count's figures (`over_quota_ms`, `peak_computing`,
//!   `peak_computing_sampled`, `max_sample_gap_ms`), `peak_threads` and
//!   tidepool's counters (`presumptions_failed` among them), as in
//!   `quota`.
//!
//! # Run time
//!
//! About 2.5 s each for tidepool and tokio, 3.5 s for rayon (its two
//! threads also sleep 100 x 20 ms), with three process starts: under 10 s
//! a round at full scale.

use std::fmt::Write as _;
use std::time::Duration;

use super::fresh_process::in_fresh_process;
use super::latency::threads_plot;
use super::quota::ideal;
use super::quota::session::{Job, Session, Way};
use super::quota::{duration, over_quota_plot, put_against, serial, CONCURRENCY};
use crate::aggregate::Measured;
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::report::summary::{count, median, ms};

/// What the experiment shows: the module doc's opening paragraph.
const ABOUT: &str = include_str!("about.md").trim_ascii_end();

/// The headline.
const WALL: &str = "wall_ms";

/// The target for tidepool's time over quota, ms.
const OVER_QUOTA_TARGET_MS: f64 = 250.0;

/// Items handed over.
const ITEMS: usize = 200;

/// The shuffle's seed: the same half sleeps in every run.
const SEED: u64 = 0x4d49_5845_442d_4b49;

/// tidepool.
const TIDEPOOL: &str = "tidepool";
/// tokio, everything in spawn_blocking.
const TOKIO: &str = "tokio-spawn-blocking";
/// rayon.
const RAYON: &str = "rayon";

/// The sleepers' sleep and the others' computation.
#[derive(Debug, Clone, Copy)]
struct Times {
    sleep: Duration,
    compute: Duration,
}

/// The times at each scale.
const SCALES: ScaleTable<Times> = ScaleTable {
    full: Times {
        sleep: Duration::from_millis(20),
        compute: Duration::from_millis(50),
    },
    quick: Times {
        sleep: Duration::from_millis(5),
        compute: Duration::from_micros(12_500),
    },
    tiny: Times {
        sleep: Duration::from_millis(1),
        compute: Duration::from_millis(2),
    },
};

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "mixed-kind",
    about: ABOUT,
    summary: "Issue #41: one closure type that half sleeps, half computes: time with more than \
the slots computing.",
    question: "One closure type that sleeps 20 ms in half its items and computes 50 ms in the other half: does tidepool keep to its slots (at most 250 ms in all with more than concurrency + 2 computing)?",
    verdict,
    scale: describe_scale,
    headline: WALL,
    baseline: TIDEPOOL,
    baselines: &[],
    headlines: &[],
    runs: &[
        RunSpec {
            id: TIDEPOOL,
            system: "tidepool",
            description: "tidepool with concurrency(2), every item a closure (one type) through Pool::execute.",
            execute: |ctx| run(ctx, TIDEPOOL, Way::Tidepool),
        },
        RunSpec {
            id: TOKIO,
            system: "tokio",
            description: "tokio with 2 workers, every item through spawn_blocking (its blocking pool at its defaults, up to 512 threads).",
            execute: |ctx| run(ctx, TOKIO, Way::TokioBlocking),
        },
        RunSpec {
            id: RAYON,
            system: "rayon",
            description: "rayon with 2 threads, every item in ThreadPool::spawn.",
            execute: |ctx| run(ctx, RAYON, Way::Rayon),
        },
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
        "{ITEMS} items at once, half sleeping {}, half computing {} of CPU; 2 slots",
        duration(t.sleep),
        duration(t.compute)
    )
}

/// Which of `n` items sleep: exactly `n / 2` of them, shuffled from
/// `seed` (Fisher-Yates, SplitMix64), the same for the same seed.
fn sleepers(n: usize, seed: u64) -> Vec<bool> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut v: Vec<bool> = (0..n).map(|i| i < n / 2).collect();
    for i in (1..n).rev() {
        let j = usize::try_from(next() % (i as u64 + 1)).unwrap_or(0);
        v.swap(i, j);
    }
    v
}

/// The longest a row should take: every item on 2 threads, one after the
/// other (rayon's way).
fn longest(t: Times) -> Duration {
    serial(ITEMS, t.sleep + t.compute)
}

/// One repetition of one system, in a process of its own.
fn run(ctx: &RunCtx, id: &str, way: Way) -> Result<Measured, String> {
    let limit = longest(SCALES.at(ctx.scale)) * 4 + Duration::from_secs(60);
    in_fresh_process(ctx, &EXPERIMENT, id, limit, |ctx| measure(ctx, way))
}

/// Builds the system, hands it the items, waits for them, and reports.
fn measure(ctx: &RunCtx, way: Way) -> Result<Measured, String> {
    let t = SCALES.at(ctx.scale);
    let sleeps = sleepers(ITEMS, SEED);
    let limit = longest(t) * 4 + Duration::from_secs(30);
    let (waited, ended) =
        Session::one_batch(ctx, way, true, "items", ITEMS, limit, |system, phase, i| {
            let job = if sleeps[i] {
                Job::Sleep(t.sleep)
            } else {
                Job::Compute(t.compute)
            };
            system.spawn_fn(phase.item(i, job));
        })?;
    let done = waited?;

    let computing = sleeps.iter().filter(|s| !**s).count();
    let ideal =
        ideal::last_completion(computing, CONCURRENCY, Duration::ZERO, t.compute).max(t.sleep);
    let wall = done.last();
    let mut m = Measured::default();
    m.put("items", ITEMS as f64);
    put_against(
        &mut m,
        [WALL, "ideal_wall_ms", "wall_vs_ideal"],
        wall,
        ideal,
    );
    ended.put_computing(&mut m);
    ended.put_threads_and_pool(&mut m);
    m.note = Some(format!(
        "{} items slept {}, {computing} computed {} of CPU.",
        ITEMS - computing,
        duration(t.sleep),
        duration(t.compute)
    ));
    m.per_item = done.ms();
    Ok(m)
}

/// Time over quota per system, and threads over time.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let mut out = vec![over_quota_plot(
        runs,
        "mixed-kind-over-quota",
        "One closure type that sleeps or computes; the issue's target for tidepool is at most 250 ms.",
    )];
    out.extend(threads_plot(
        runs,
        &[TIDEPOOL, TOKIO, RAYON],
        "mixed-kind-threads",
        (
            "Threads over a mixed kind",
            "Threads each system ran for 100 sleepers and 100 computations of one closure type.",
        ),
    ));
    out
}

/// The summary's answer: tidepool's time over quota against the target,
/// with the peers'.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let quota = median(exp, TIDEPOOL, "over_quota_ms")?;
    let mut s = format!("tidepool {} over the quota", ms(quota));
    let get = |id, metric| median(exp, id, metric);
    if let Some(peak) = get(TIDEPOOL, "peak_computing") {
        let _ = write!(s, ", at most {peak:.0} computing at once");
    }
    if let Some(failed) = get(TIDEPOOL, "presumptions_failed") {
        let _ = write!(
            s,
            ", {}",
            count(failed, "presumption failed", "presumptions failed")
        );
    }
    if let Some(x) = get(TIDEPOOL, "wall_vs_ideal") {
        let _ = write!(s, ", wall {x:.2}x the slot-bound");
    }
    for (id, name) in [(TOKIO, "tokio with spawn_blocking"), (RAYON, "rayon")] {
        if let (Some(q), Some(peak), Some(x)) = (
            get(id, "over_quota_ms"),
            get(id, "peak_computing"),
            get(id, "wall_vs_ideal"),
        ) {
            let _ = write!(
                s,
                "; {name} {} over the quota, at most {peak:.0} computing at once, wall {x:.2}x",
                ms(q)
            );
        }
    }
    let _ = write!(
        s,
        ". Verdict: {} (the goal: at most {OVER_QUOTA_TARGET_MS:.0} ms in all with more than \
         concurrency + 2 computing).",
        if quota <= OVER_QUOTA_TARGET_MS {
            "tidepool meets the goal".to_string()
        } else {
            format!(
                "tidepool {} over the goal",
                ms(quota - OVER_QUOTA_TARGET_MS)
            )
        }
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
        assert_plain_about(ABOUT, "One closure type, two kinds of work");
    }

    #[test]
    fn exactly_half_sleep_the_same_half_for_the_same_seed() {
        let a = sleepers(ITEMS, SEED);
        assert_eq!(a.len(), ITEMS);
        assert_eq!(a.iter().filter(|s| **s).count(), ITEMS / 2);
        assert_eq!(a, sleepers(ITEMS, SEED));
        assert_ne!(a, sleepers(ITEMS, SEED + 1));
        // Shuffled: not the first half then the second.
        assert!(a[..ITEMS / 2].iter().any(|s| !*s));
        assert!(a[ITEMS / 2..].iter().any(|s| *s));
        assert_eq!(sleepers(0, SEED), Vec::<bool>::new());
        assert_eq!(sleepers(1, SEED), vec![false]);
    }

    fn result(id: &str, quota: f64) -> RunResult {
        let figures = [
            ("over_quota_ms", quota),
            ("peak_computing", 3.0),
            ("presumptions_failed", 1.0),
            ("wall_vs_ideal", 1.05),
        ];
        done_run(&EXPERIMENT, id, &figures)
    }

    #[test]
    fn the_verdict_holds_tidepool_to_the_target() {
        assert_verdict_says(
            &EXPERIMENT,
            vec![result(TIDEPOOL, 40.0), result(TOKIO, 2400.0)],
            &[
                "tidepool 40 ms over the quota, at most 3 computing at once, 1 presumption failed, wall 1.05x the slot-bound; tokio with spawn_blocking 2.4 s over the quota",
                "Verdict: tidepool meets the goal",
            ],
        );
        assert_verdict_says(
            &EXPERIMENT,
            vec![result(TIDEPOOL, 300.0)],
            &["Verdict: tidepool 50 ms over the goal"],
        );
        assert_eq!(verdict_of(&EXPERIMENT, vec![result(RAYON, 0.0)]), None);
    }
}

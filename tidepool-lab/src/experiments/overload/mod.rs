#![doc = include_str!("about.md")]
//!
//! (That paragraph is the experiment's `about` in the report and
//! `results.json`; the rest of this description is here only.)
//!
//! # Arrivals
//!
//! The rate is 1.5 x cores / the mean CPU time of an arrival (1 ms: the
//! blocking arrivals' sleep uses no core), 3,000 a second on 2 cores, so
//! a system that computes on every core serves two thirds of them and its
//! queue grows all window long. Every arrival computes until its thread
//! has used 1 ms of CPU time (`work::burn_cpu`); arrivals 0, 4 and 7 of
//! every ten then sleep 5 ms (30%, spread out). CPU time, not a count of
//! loop rounds calibrated beforehand: this machine flips between a fast
//! and a slow state (about 2x, minutes each), and a round count calibrated
//! in one state and run in the other made a run that did not overload at
//! all (every arrival served, the longest start 10-100 ms) beside runs
//! that did. A millisecond of CPU is a millisecond of a core in either
//! state, so every run overloads at 1.5x. The computing and the blocking arrivals are separate closures
//! (separate async blocks), two kinds of task, as two handlers of a
//! service would be.
//!
//! The generator, the main thread of the run's process (which does
//! nothing else meanwhile, and is left out of the system's threads),
//! submits arrival `i` at the origin plus `i / rate` (absolute times: a
//! late submission does not delay the rest) and never waits for one to
//! start or end: an open loop. It shares the saturated machine with the
//! system; how late it got is `max_late_ms`, and it is part of every start
//! latency, as a client's lateness would be.
//!
//! The window is 2 s at full scale, 1 s at `--quick`, 0.2 s at `--tiny`;
//! `--items N` makes N arrivals at the same rate (the 10 s on 2
//! cores is `--items 30000`).
//!
//! # After the window
//!
//! The systems keep serving. The measurement ends when every arrival has
//! started, or one more window after the arrivals stopped, whichever comes
//! first. An arrival that has not started by then counts with the wait it
//! had so far (a lower bound of its start latency) and in `unstarted`, and
//! skips its work when it does start, so the system drains at once. A
//! system that keeps every core computing serves the window's arrivals in
//! 1.5 windows; one whose threads block inline (2 threads that spend
//! 2.5 ms an arrival serve 800 a second) is cut off, its tail a lower
//! bound: the cut never flatters a system against one that finished.
//!
//! # Systems
//!
//! - `tidepool-execute`: tidepool's default pool, closures through
//!   `Pool::execute`.
//! - `tidepool-spawn`: the same pool, each arrival an async task
//!   (`Pool::spawn`) whose body is the same blocking code. Two rows rather
//!   than a mixed one: closures and futures take different paths through
//!   the pool (a closure of a kind known to block is presumed blocking and
//!   handed a thread as it is spawned; a future is only ever found blocked
//!   by the monitor), and a mixed row would average a fast path with a
//!   slow one and hide which one has the tail.
//! - `tokio-inline`: tokio's default multi-thread runtime, each arrival a
//!   task that blocks inline; `tokio-spawn-blocking`: the same, the sleep in
//!   `spawn_blocking`, awaited. Tasks spawned from outside the runtime go
//!   through its shared injection queue, first in, first out.
//! - `threadpool`: the threadpool crate with a thread per core, one shared
//!   queue: the plainest FIFO.
//!
//! # Figures
//!
//! - `p50_start_ms`, `p99_start_ms`, `max_start_ms` (the headline): start
//!   latency (start less intended arrival) over every arrival, nearest
//!   rank.
//! - `decile<N>_p50_start_ms`, `..._p99_...`, `..._max_...`: the same over
//!   the arrivals due in the Nth tenth of the window.
//! - `completed`: arrivals whose work ended within the window;
//!   `unstarted`: arrivals cut off (above); `arrivals`, `arrivals_per_s`.
//! - `peak_threads`: tidepool's own count; for the others the process's
//!   threads above the count before the system was built, from `/proc`
//!   every 5 ms.
//! - `pool_start_max_ms` (tidepool): the pool's own
//!   `Metrics::start_latency.max` when the measurement ends, from each
//!   task's spawn (not its intended arrival) to its first run; with the
//!   pool's `concurrency`, `monitor_busy_ms`, `blocked_detections`,
//!   `presumed_blocking` and `presumptions_failed`.
//!
//! The summary compares each tidepool row's `max_start_ms` with the
//! lowest of the FIFO peers' (both tokio rows and `threadpool`): the goal
//! is at most 1.2x.
//!
//! # Rounds and run time
//!
//! Each repetition of each system runs in a process of its own
//! (`fresh_process`), and the rounds rotate, as in `service`. A run takes
//! 1.5 to 2 windows and the start of a process, about 3.5 s at full scale,
//! so 3 rounds (the default at full scale; 1 at `--quick`) of the five
//! systems take about a minute. The 10 s windows with five rounds
//! would take about seven minutes, too long for the lab's default run;
//! `--items 30000 --repeat 5 overload` runs them.

mod arrivals;
mod figures;
mod work;

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::fresh_process::in_fresh_process;
use super::latency::{finish, threads_plot};
use super::paced::steps;
use super::{done, sampled_threads, settle, thread_baseline};
use crate::aggregate::Measured;
use crate::model::plot::{Plot, Series};
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::probe::{self, ThreadSampler};
use crate::report::summary::{median, ms, times};
use crate::report::table::group_digits;
use arrivals::Schedule;
use figures::{DECILE_METRICS, MAX_START};
use work::{Record, Way};

/// What the experiment shows: the module doc's opening paragraph.
const ABOUT: &str = include_str!("about.md").trim_ascii_end();

/// tidepool's closures: the baseline.
const TIDEPOOL_EXECUTE: &str = "tidepool-execute";
/// tidepool's async tasks.
const TIDEPOOL_SPAWN: &str = "tidepool-spawn";
/// tokio, blocking inline.
const TOKIO_INLINE: &str = "tokio-inline";
/// tokio, blocking in spawn_blocking.
const TOKIO_SPAWN_BLOCKING: &str = "tokio-spawn-blocking";
/// The threadpool crate.
const THREADPOOL: &str = "threadpool";

/// The FIFO peers tidepool's rows are held to, with their names in the
/// summary.
const FIFO_PEERS: [(&str, &str); 3] = [
    (TOKIO_INLINE, "tokio inline"),
    (TOKIO_SPAWN_BLOCKING, "tokio with spawn_blocking"),
    (THREADPOOL, "the threadpool crate"),
];

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "overload",
    about: ABOUT,
    summary: "Closures and tasks arriving at 1.5x what the cores compute, 30% of them blocking: \
the longest start latency against FIFO pools.",
    question: "Overloaded by 1.5x with arrivals that compute and some that block, does any arrival wait much longer on tidepool than first-in, first-out order would make it wait?",
    verdict,
    scale: describe_scale,
    headline: MAX_START,
    baseline: TIDEPOOL_EXECUTE,
    baselines: &[],
    headlines: &[],
    runs: &[
        RunSpec {
            id: TIDEPOOL_EXECUTE,
            system: "tidepool",
            description: "tidepool's default pool, each arrival a closure through Pool::execute.",
            execute: |ctx| run(ctx, TIDEPOOL_EXECUTE, Way::TidepoolExecute),
        },
        RunSpec {
            id: TIDEPOOL_SPAWN,
            system: "tidepool",
            description: "tidepool's default pool, each arrival an async task (Pool::spawn) running the same blocking code.",
            execute: |ctx| run(ctx, TIDEPOOL_SPAWN, Way::TidepoolSpawn),
        },
        RunSpec {
            id: TOKIO_INLINE,
            system: "tokio",
            description: "tokio's default multi-thread runtime, each arrival a task that blocks inline.",
            execute: |ctx| run(ctx, TOKIO_INLINE, Way::TokioInline),
        },
        RunSpec {
            id: TOKIO_SPAWN_BLOCKING,
            system: "tokio",
            description: "tokio's default multi-thread runtime, each arrival a task, its 5 ms sleep in spawn_blocking (awaited).",
            execute: |ctx| run(ctx, TOKIO_SPAWN_BLOCKING, Way::TokioSpawnBlocking),
        },
        RunSpec {
            id: THREADPOOL,
            system: "threadpool",
            description: "The threadpool crate with a thread per core (one shared FIFO queue), each arrival a closure.",
            execute: |ctx| run(ctx, THREADPOOL, Way::ThreadPool),
        },
    ],
    opt_in: &[],
    plots,
    full_only: &[],
    default_repeat: 3,
    rotate: true,
};

/// Every arrival's computation.
const CPU: Duration = Duration::from_millis(1);

/// How long the arrivals still running when the measurement ends may take
/// to end (they are at most one computation and one block long; the rest
/// skip their work).
const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// How often the `/proc` sampler counts the process's threads.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// The arrival window at each scale.
const SCALES: ScaleTable<Duration> = ScaleTable {
    full: Duration::from_secs(2),
    quick: Duration::from_secs(1),
    tiny: Duration::from_millis(200),
};

fn describe_scale(scale: Scale) -> String {
    format!(
        "arrivals for {} s at 1.5x what the cores compute (3,000 a second on 2 cores), 30% of \
         them blocking 5 ms after 1 ms of CPU",
        SCALES.at(scale).as_secs_f64()
    )
}

/// The arrivals of a run: the scale's window, or `--items` arrivals.
fn schedule(ctx: &RunCtx) -> Schedule {
    let s = Schedule::overloading(ctx.cores, CPU, SCALES.at(ctx.scale));
    match ctx.items {
        Some(n) => s.with_arrivals(n),
        None => s,
    }
}

/// One repetition of one system, in a process of its own.
fn run(ctx: &RunCtx, id: &str, way: Way) -> Result<Measured, String> {
    let limit = schedule(ctx).window() * 2 + DRAIN_LIMIT + Duration::from_secs(60);
    in_fresh_process(ctx, &EXPERIMENT, id, limit, |ctx| measure(ctx, way))
}

/// Builds the system, lets the arrivals come, waits until every arrival
/// has started (or the measurement's end), and reports.
fn measure(ctx: &RunCtx, way: Way) -> Result<Measured, String> {
    let schedule = schedule(ctx);
    let arrivals = schedule.count();
    let measured_until = schedule.window() * 2;
    let record = Record::new(arrivals, measured_until);
    // Its thread is the lab's, in the baseline.
    let _follow = ctx.follow(&record.all_started);
    let baseline = thread_baseline();
    let sampler = ThreadSampler::start(SAMPLE_EVERY, baseline, false);
    let system = match way.build(ctx.cores) {
        Ok(s) => s,
        Err(e) => {
            sampler.finish();
            return Err(e);
        }
    };
    let created = Instant::now();
    let record = Arc::new(record.timed_from_now());

    // The open loop, on this thread: the lab's own, not the system's.
    ctx.bar.phase("arrivals");
    let late = arrivals::generate(&schedule, record.origin(), |i| {
        work::submit(&system, way, &record, i, arrivals::blocks(i), CPU);
    });
    ctx.bar.phase("serving the queue");
    let end = record.origin() + measured_until;
    record
        .all_started
        .wait_timeout(end.saturating_duration_since(Instant::now()));
    let pool = system.tidepool_metrics();
    let all_ended = record.all_ended.wait_timeout(DRAIN_LIMIT);
    let lifetime = created.elapsed().as_secs_f64();
    ctx.bar.phase("shutting down");
    let report = finish(system);
    let observed = sampler.finish();
    settle(baseline);
    if !all_ended {
        return Err(format!(
            "only {} of {arrivals} arrivals ended {} s after the measurement",
            record.all_ended.finished(),
            DRAIN_LIMIT.as_secs()
        ));
    }

    let figures = figures::summarise(
        &schedule,
        measured_until,
        &record.started(),
        &record.ended(),
    )
    .ok_or("no arrivals")?;
    let mut m = Measured::default();
    m.put("arrivals", arrivals as f64);
    m.put("arrivals_per_s", schedule.rate_per_s());
    figures.put(&mut m);
    let peak = report
        .peak_threads
        .unwrap_or_else(|| probe::peak_threads(&observed));
    m.put("peak_threads", peak as f64);
    if let Some(pool) = pool {
        m.put(
            "pool_start_max_ms",
            pool.start_latency.max.as_secs_f64() * 1e3,
        );
    }
    m.put("max_late_ms", late.as_secs_f64() * 1e3);
    for (name, v) in report.extra {
        m.put(name, v);
    }
    m.note = Some(format!(
        "{} arrivals at {:.0} a second over {} s; measured until {} s.",
        group_digits(arrivals as f64),
        schedule.rate_per_s(),
        schedule.window().as_secs_f64(),
        measured_until.as_secs_f64()
    ));
    m.per_item = figures.latencies_ms;
    m.threads = Some(match report.series {
        Some((label, pts)) => (label, steps(&pts, lifetime)),
        None => ("sampled from /proc".to_string(), sampled_threads(&observed)),
    });
    Ok(m)
}

/// Start latency by decile of the arrival window (max and p50), and
/// threads over time.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let ids: Vec<&str> = runs.iter().map(|r| r.spec.id).collect();
    let by_decile = |key: &str, which: usize, titles: (&str, &str)| {
        let series: Vec<Series> = done(runs)
            .filter_map(|r| {
                let points: Vec<(f64, f64)> = DECILE_METRICS
                    .iter()
                    .enumerate()
                    .filter_map(|(d, names)| {
                        r.measured.get(names[which]).map(|v| ((d + 1) as f64, v))
                    })
                    .collect();
                (!points.is_empty()).then(|| Series::new(r.spec.id, points))
            })
            .collect();
        (!series.is_empty()).then(|| {
            Plot::line(
                key,
                titles,
                "tenth of the arrival window (by intended arrival)",
                "start latency from the intended arrival, ms (log)",
                series,
                true,
            )
        })
    };
    let mut out = Vec::new();
    out.extend(by_decile(
        "overload-max-start-by-decile",
        2,
        (
            "Longest start latency by arrival decile",
            "A FIFO's longest wait grows steadily with the queue; a point far above its neighbours, or above the FIFO peers', is an arrival left behind while later ones ran.",
        ),
    ));
    out.extend(by_decile(
        "overload-p50-start-by-decile",
        0,
        (
            "Median start latency by arrival decile",
            "How fast each system's queue grows: the slope is the share of the arrivals it cannot serve.",
        ),
    ));
    out.extend(threads_plot(
        runs,
        &ids,
        "overload-threads",
        (
            "Threads over time under overload",
            "Threads each system ran while arrivals came 1.5x faster than the cores compute them.",
        ),
    ));
    out
}

/// The summary's answer: each tidepool row's longest start latency
/// against the lowest of the FIFO peers'.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let max = |id| median(exp, id, MAX_START);
    let peers: Vec<(&str, f64)> = FIFO_PEERS
        .iter()
        .filter_map(|(id, name)| max(id).map(|v| (*name, v)))
        .collect();
    let (best_name, best) = peers.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))?;
    let listed: Vec<String> = peers
        .iter()
        .map(|(name, v)| format!("{name} {}", ms(*v)))
        .collect();
    let mut s = format!(
        "Longest start latency from the intended arrival: {}",
        listed.join(", ")
    );
    let mut verdicts = Vec::new();
    for (id, name) in [
        (TIDEPOOL_EXECUTE, "tidepool's closures"),
        (TIDEPOOL_SPAWN, "tidepool's async tasks"),
    ] {
        let Some(v) = max(id) else {
            continue;
        };
        let _ = write!(s, "; {name} {} ({} of {best_name}'s", ms(v), times(v, best));
        if let Some(p99) = median(exp, id, "p99_start_ms") {
            let _ = write!(s, ", p99 {}", ms(p99));
        }
        if let Some(c) = median(exp, id, "completed") {
            let _ = write!(s, ", {} completed in the window", group_digits(c));
        }
        s.push(')');
        verdicts.push(if v <= 1.2 * best {
            format!("{name} within 1.2x of the best FIFO peer")
        } else {
            format!(
                "{name} {} the best FIFO peer's: over the goal",
                times(v, best)
            )
        });
    }
    if verdicts.is_empty() {
        return None;
    }
    let _ = write!(
        s,
        ". Verdict: {} (the goal: tidepool's max start at most 1.2x the lowest of the FIFO \
         peers': tokio, inline or with spawn_blocking, and the threadpool crate).",
        verdicts.join("; ")
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
    fn the_about_text_is_the_module_docs_opening() {
        assert_plain_about(ABOUT, "Closures and async tasks arriving at 1.5 times");
    }

    fn result(id: &str, max: f64) -> RunResult {
        let figures = [
            ("p99_start_ms", max / 2.0),
            (MAX_START, max),
            ("completed", 4000.0),
        ];
        done_run(&EXPERIMENT, id, &figures)
    }

    #[test]
    fn the_verdict_holds_tidepool_to_the_lowest_fifo_peer() {
        assert_verdict_says(
            &EXPERIMENT,
            vec![
                result(TIDEPOOL_EXECUTE, 700.0),
                result(TIDEPOOL_SPAWN, 1300.0),
                result(TOKIO_INLINE, 1500.0),
                result(TOKIO_SPAWN_BLOCKING, 650.0),
                result(THREADPOOL, 1450.0),
            ],
            &[
                "tidepool's closures 700 ms (1.1x of tokio with spawn_blocking's, p99 350 ms, 4,000 completed in the window)",
                "tidepool's closures within 1.2x of the best FIFO peer",
                "tidepool's async tasks 2.0x the best FIFO peer's: over the goal",
            ],
        );
        assert_eq!(
            verdict_of(&EXPERIMENT, vec![result(TIDEPOOL_EXECUTE, 1.0)]),
            None,
            "no peer, no verdict"
        );
        assert_eq!(
            verdict_of(&EXPERIMENT, vec![result(THREADPOOL, 1.0)]),
            None,
            "no tidepool row, no verdict"
        );
    }

    #[test]
    fn a_decile_plot_has_a_point_per_decile() {
        let mut r = result(THREADPOOL, 10.0);
        for (d, names) in DECILE_METRICS.iter().enumerate() {
            r.measured.put(names[2], d as f64);
        }
        let plots = plots(&[r]);
        let max = plots
            .iter()
            .find(|p| p.key == "overload-max-start-by-decile")
            .unwrap();
        let crate::model::plot::Shape::Lines { series, .. } = &max.shape else {
            panic!("a line plot")
        };
        assert_eq!(series[0].points.len(), 10);
        assert_eq!(series[0].points[9], (10.0, 9.0));
    }
}

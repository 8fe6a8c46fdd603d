//! The `thread-per-task` experiment. What it runs and shows is said once, in
//! [`EXPERIMENT`]: its `summary` (the command line's help) and its `about`
//! (the report's).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{metric_bars, settle, thread_baseline};
use crate::aggregate::Measured;
use crate::measure::Latch;
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::probe::CpuTimes;
use crate::report::table::group_digits;
use crate::systems::{rayon_pool, tokio_runtime, System, TidepoolConfig};
use std::fmt::Write as _;

use crate::report::plot::format_value;
use crate::report::summary::{median, times};

/// What the experiment shows.
const ABOUT: &str = "A million tiny tasks, each locking a shared mutex to bump a counter. \
Starting an OS thread for each one costs tens of microseconds, most of it kernel time, \
where a pool hands a task to a running thread for well under a microsecond.";

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "thread-per-task",
    about: ABOUT,
    summary: "A million tiny tasks: a thread each versus a pool.",
    question: "What does starting a thread per tiny task cost, next to a pool?",
    verdict,
    scale: describe_scale,
    headline: "ns_per_task",
    baseline: TIDEPOOL,
    baselines: &[],
    headlines: &[],
    runs: &[
        RunSpec {
            id: THREAD_PER_TASK,
            system: "std::thread",
            description: "A detached std::thread::spawn per task.",
            // A thread each for all of them takes too long: a tenth.
            execute: |ctx| run(ctx, 10, || Ok(System::ThreadPerItem)),
        },
        RunSpec {
            id: TIDEPOOL,
            system: "tidepool",
            description: "Pool::execute (no handle, as rayon::spawn and threadpool::execute) on the default pool, from one outside thread.",
            execute: |ctx| {
                run(ctx, 1, || {
                    TidepoolConfig::default_pool().build().map(System::Tidepool)
                })
            },
        },
        RunSpec {
            id: TIDEPOOL_ASYNC,
            system: "tidepool",
            description: "Pool::spawn of an async block on the default pool, from one outside \
thread: tokio's tasks, on tidepool.",
            execute: |ctx| {
                run(ctx, 1, || {
                    TidepoolConfig::default_pool()
                        .build()
                        .map(System::TidepoolAsync)
                })
            },
        },
        RunSpec {
            id: "tokio",
            system: "tokio",
            description:
                "tokio::runtime::Runtime::spawn of an async block, default multi-thread runtime.",
            execute: |ctx| run(ctx, 1, || tokio_runtime().map(System::Tokio)),
        },
        RunSpec {
            id: "rayon",
            system: "rayon",
            description: "rayon::ThreadPool::spawn on a default pool.",
            execute: |ctx| run(ctx, 1, || rayon_pool(None).map(System::Rayon)),
        },
        RunSpec {
            id: "threadpool",
            system: "threadpool",
            description: "threadpool::ThreadPool::execute with one thread per core.",
            execute: |ctx| {
                let cores = ctx.cores;
                run(ctx, 1, move || {
                    Ok(System::ThreadPool(threadpool::ThreadPool::new(cores)))
                })
            },
        },
    ],
    opt_in: &[],
    plots,
    full_only: &[],
    default_repeat: 5,
    rotate: false,
};

/// tidepool's default pool, the baseline.
pub(crate) const TIDEPOOL: &str = "tidepool";
/// A thread per task.
pub(crate) const THREAD_PER_TASK: &str = "thread-per-task";
/// tidepool's default pool running async tasks, beside tokio's.
const TIDEPOOL_ASYNC: &str = "tidepool-async";

/// Tasks at each scale (before `--items`).
const SCALES: ScaleTable<usize> = ScaleTable {
    full: 1_000_000,
    quick: 200_000,
    tiny: 2_000,
};

fn describe_scale(scale: Scale) -> String {
    let n = SCALES.at(scale);
    format!(
        "{} tasks ({} threads)",
        group_digits(n as f64),
        group_digits((n / 10) as f64)
    )
}

/// Runs `tasks / divisor` tasks on the system `make` builds.
///
/// # Errors
///
/// When the system cannot be built, tasks do not finish, or the counter
/// does not add up.
fn run(
    ctx: &RunCtx,
    divisor: usize,
    make: impl FnOnce() -> Result<System, String>,
) -> Result<Measured, String> {
    let tasks = ctx.items_or(SCALES.at(ctx.scale));
    let n = (tasks / divisor).max(1);
    let baseline = thread_baseline();
    let system = make()?;
    let counter = Arc::new(Mutex::new(0_u64));
    let latch = Arc::new(Latch::new(n));
    let follow = ctx.follow(&latch);
    ctx.bar.phase("spawning");

    let cpu0 = CpuTimes::now();
    let t0 = Instant::now();
    for _ in 0..n {
        let counter = counter.clone();
        let latch = latch.clone();
        system.spawn_fn(move || {
            *counter.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            latch.count_down();
        });
    }
    let finished = latch.wait_timeout(Duration::from_secs(600));
    let wall = t0.elapsed();
    let cpu = CpuTimes::now().zip(cpu0).map(|(a, b)| a.since(b));
    drop(follow);
    ctx.bar.phase("shutting down");
    system.finish();
    settle(baseline);

    if !finished {
        return Err(format!(
            "only {} of {n} tasks finished in 600 s",
            latch.finished()
        ));
    }
    let count = *counter.lock().unwrap_or_else(|e| e.into_inner());
    if count != n as u64 {
        return Err(format!("counter is {count}, expected {n}"));
    }
    let mut m = Measured::default();
    m.put("tasks", n as f64);
    m.put("wall_ms", wall.as_secs_f64() * 1e3);
    m.put("ns_per_task", wall.as_nanos() as f64 / n as f64);
    if let Some(c) = cpu {
        m.put("user_cpu_ms", c.user_ms);
        m.put("sys_cpu_ms", c.sys_ms);
    }
    m.note = Some(if n < tasks {
        format!("Ran {n} of the {tasks} tasks (a tenth: a thread each for all of them takes too long); compare ns_per_task.")
    } else {
        format!("{n} tasks.")
    });
    Ok(m)
}

/// Nanoseconds per task, a bar per run.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let bars = metric_bars(runs, "ns_per_task");
    if bars.is_empty() {
        return Vec::new();
    }
    vec![Plot::bars(
        "thread-per-task-ns",
        (
            "Cost per tiny task (log scale)",
            "A fresh thread per task costs orders of magnitude more than handing the task to a running pool thread; the pools differ by small factors.",
        ),
        "wall time per task, ns",
        bars,
    )]
}

/// The summary's answer: cost per task of a thread each and of each pool.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let cost = |id| median(exp, id, "ns_per_task");
    let ours = cost(TIDEPOOL)?;
    let mut s = String::new();
    if let Some(t) = cost(THREAD_PER_TASK) {
        let _ = write!(
            s,
            "A thread per task costs {} ns per task, {} tidepool's {} ns",
            group_digits(t),
            times(t, ours),
            format_value(ours)
        );
    } else {
        let _ = write!(
            s,
            "tidepool's default costs {} ns per task",
            format_value(ours)
        );
    }
    let peers: Vec<(&str, f64)> = ["tokio", "rayon", "threadpool"]
        .into_iter()
        .filter_map(|id| Some((id, cost(id)?)))
        .collect();
    for (id, v) in &peers {
        let _ = write!(s, "; {id} {} ns", format_value(*v));
    }
    if let Some(ours_async) = cost(TIDEPOOL_ASYNC) {
        let _ = write!(
            s,
            "; tidepool's async tasks {} ns",
            format_value(ours_async)
        );
        if let Some(tokio) = cost("tokio") {
            let _ = write!(s, " ({} tokio's)", times(ours_async, tokio));
        }
    }
    s.push_str(". Verdict: ");
    match peers.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
        Some((_, best)) if ours <= *best => s.push_str("tidepool is the cheapest pool here."),
        Some((id, best)) => {
            let _ = write!(
                s,
                "tidepool costs {} as much as {id}, the cheapest here.",
                times(ours, *best)
            );
        }
        None => s.push_str("compare with the peers for a verdict."),
    }
    Some(s)
}

//! Experiment 2, `thread-per-task`: a fresh thread per tiny task costs far
//! more than a pool, most of it in the kernel.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{ids, metric_bars, settle, thread_baseline, Measured, RunCtx, RunResult, RunSpec};
use crate::measure::Latch;
use crate::probe::CpuTimes;
use crate::report::plot::Plot;
use crate::systems::{rayon_pool, tokio_runtime, System, TidepoolConfig};

/// What the experiment shows.
pub const ABOUT: &str = "A million tiny tasks, each locking a shared mutex to bump a counter. \
Starting an OS thread for each one costs tens of microseconds, most of it kernel time, \
where a pool hands a task to a running thread for well under a microsecond.";

/// The runs.
pub const RUNS: &[RunSpec] = &RUNS_ARRAY;
const RUNS_ARRAY: [RunSpec; 5] = [
    RunSpec::new(
        "thread-per-task",
        "std::thread",
        "A detached std::thread::spawn per task.",
    ),
    RunSpec::new(
        "tidepool",
        "tidepool",
        "Pool::spawn_fn on the default pool, from one outside thread.",
    ),
    RunSpec::new(
        "tokio",
        "tokio",
        "tokio::runtime::Runtime::spawn of an async block, default multi-thread runtime.",
    ),
    RunSpec::new(
        "rayon",
        "rayon",
        "rayon::ThreadPool::spawn on a default pool.",
    ),
    RunSpec::new(
        "threadpool",
        "threadpool",
        "threadpool::ThreadPool::execute with one thread per core.",
    ),
];
/// The run ids.
pub const IDS: &[&str] = &ids(&RUNS_ARRAY);

/// Runs one run.
///
/// # Errors
///
/// When the system cannot be built, tasks do not finish, or the counter
/// does not add up.
pub fn run(spec: &RunSpec, ctx: &RunCtx) -> Result<Measured, String> {
    let tasks = ctx.items_or(ctx.scale.pick(1_000_000, 200_000, 2_000));
    let baseline = thread_baseline();
    let (system, n) = match spec.id {
        "thread-per-task" => (System::ThreadPerItem, (tasks / 10).max(1)),
        "tidepool" => (
            System::Tidepool(TidepoolConfig::default_pool().build()?),
            tasks,
        ),
        "tokio" => (System::Tokio(tokio_runtime()?), tasks),
        "rayon" => (System::Rayon(rayon_pool(None)?), tasks),
        "threadpool" => (
            System::ThreadPool(threadpool::ThreadPool::new(ctx.cores)),
            tasks,
        ),
        other => return Err(format!("thread-per-task has no run '{other}'")),
    };
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
pub fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let bars = metric_bars(runs, "ns_per_task");
    if bars.is_empty() {
        return Vec::new();
    }
    vec![Plot::bars(
        "thread-per-task-ns",
        "Cost per tiny task",
        "wall time per task, ns",
        bars,
    )]
}

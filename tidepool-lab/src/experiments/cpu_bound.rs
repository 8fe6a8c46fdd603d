//! Experiment 5, `cpu-bound`: CPU-bound jobs must not oversubscribe the
//! cores. Ten one-second jobs on ten threads of a two-core machine each take
//! five seconds; run two at a time, each takes one.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{ids, per_item_plot, settle, thread_baseline, Measured, RunCtx, RunResult, RunSpec};
use crate::measure::{Latch, Timeline};
use crate::probe::{sustained_peak_runnable, ThreadSampler};
use crate::report::plot::Plot;
use crate::stats::Summary;
use crate::systems::{rayon_pool, tokio_runtime, System, TidepoolConfig};
use crate::work::{calibrated_rounds, fib_rounds};

/// What the experiment shows.
pub const ABOUT: &str = "Ten jobs that each compute the largest Fibonacci number below 100 in a \
loop sized to take about a second alone. On ten threads they share two cores and each takes \
about five times longer; with the running threads held at the number of cores each job \
finishes in its single-thread time and the total is the same.";

/// The runs.
pub const RUNS: &[RunSpec] = &RUNS_ARRAY;
const RUNS_ARRAY: [RunSpec; 6] = [
    RunSpec::new("threads10", "std::thread", "One OS thread per job."),
    RunSpec::new("fixed10", "tidepool", "Controller::Fixed with 10 threads."),
    RunSpec::new("adaptive", "tidepool", "The default pool (Adaptive)."),
    RunSpec::new(
        "hill-climbing",
        "tidepool",
        "Controller::HillClimbing: the running target moves to maximise completions per second.",
    ),
    RunSpec::new(
        "tokio",
        "tokio",
        "Jobs as tasks on tokio's default multi-thread runtime.",
    ),
    RunSpec::new(
        "rayon",
        "rayon",
        "rayon::ThreadPool::spawn on a default pool.",
    ),
];
/// The run ids.
pub const IDS: &[&str] = &ids(&RUNS_ARRAY);

/// Runs one run.
///
/// # Errors
///
/// When the system cannot be built or jobs do not finish.
pub fn run(spec: &RunSpec, ctx: &RunCtx) -> Result<Measured, String> {
    let jobs = ctx.items_or(ctx.scale.pick(10, 10, 4));
    let target = Duration::from_millis(ctx.scale.pick(1000, 250, 20));
    ctx.bar.phase("calibrating");
    let rounds = calibrated_rounds(target);
    // The job alone, measured now, on the lab's own thread.
    let t = Instant::now();
    black_box(fib_rounds(rounds));
    let single = t.elapsed();

    // The progress follower starts before the baseline, so it is not
    // counted as one of the system's threads.
    let latch = Arc::new(Latch::new(jobs));
    let follow = ctx.follow(&latch);
    let baseline = thread_baseline();
    let sampler = ThreadSampler::start(Duration::from_millis(10), baseline, true);
    let system = match spec.id {
        "threads10" => Ok(System::ThreadPerItem),
        "fixed10" => TidepoolConfig::fixed(10).build().map(System::Tidepool),
        "adaptive" => TidepoolConfig::default_pool().build().map(System::Tidepool),
        "hill-climbing" => TidepoolConfig {
            controller: Some(tidepool::Controller::HillClimbing),
            ..TidepoolConfig::default_pool()
        }
        .build()
        .map(System::Tidepool),
        "tokio" => tokio_runtime().map(System::Tokio),
        "rayon" => rayon_pool(None).map(System::Rayon),
        other => Err(format!("cpu-bound has no run '{other}'")),
    };
    let system = match system {
        Ok(s) => s,
        Err(e) => {
            sampler.finish();
            return Err(e);
        }
    };
    let timeline = Arc::new(Timeline::new(jobs));
    ctx.bar.phase("running jobs");
    let t0 = Instant::now();
    for i in 0..jobs {
        let (tl, latch) = (timeline.clone(), latch.clone());
        timeline.submit(i);
        system.spawn_fn(move || {
            tl.start(i);
            black_box(fib_rounds(rounds));
            tl.end(i);
            latch.count_down();
        });
    }
    let limit = single * u32::try_from(jobs * 4).unwrap_or(u32::MAX) + Duration::from_secs(60);
    let finished = latch.wait_timeout(limit);
    let wall = t0.elapsed();
    drop(follow);
    let observed = sampler.finish();
    let detections = system.tidepool_metrics().map(|m| m.blocked_detections);
    ctx.bar.phase("shutting down");
    system.finish();
    settle(baseline);

    if !finished {
        return Err(format!("only {} of {jobs} jobs finished", latch.finished()));
    }
    let durations = timeline.durations_s();
    let s = Summary::of(&durations).ok_or("no job recorded its duration")?;
    let mut m = Measured::default();
    m.put("jobs", jobs as f64);
    m.put("mean_job_s", s.mean);
    m.put("max_job_s", s.max);
    m.put("wall_s", wall.as_secs_f64());
    m.put("single_job_s", single.as_secs_f64());
    if let Some(p) = sustained_peak_runnable(&observed) {
        m.put("peak_running", p as f64);
    }
    if let Some(d) = detections {
        // A CPU-bound job is runnable, never blocked: this should stay 0.
        m.put("blocked_detections", d as f64);
    }
    m.per_item = durations;
    m.note = Some(format!(
        "{jobs} jobs of about {:.2} s alone on {} cores; peak_running counts runnable threads (state R in /proc) held over two 10 ms samples.",
        single.as_secs_f64(),
        ctx.cores
    ));
    Ok(m)
}

/// Each job's duration, a line per run.
pub fn plots(runs: &[RunResult]) -> Vec<Plot> {
    per_item_plot(
        runs,
        "cpu-bound-jobs",
        "Duration of each CPU-bound job",
        "job (submission order)",
        "job duration, s",
        false,
    )
    .into_iter()
    .collect()
}

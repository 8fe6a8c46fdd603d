//! The `cpu-bound` experiment. What it runs and shows is said once, in
//! [`EXPERIMENT`]: its `summary` (the command line's help) and its `about`
//! (the report's).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{per_item_plot, settle, thread_baseline};
use crate::aggregate::Measured;
use crate::measure::{Latch, Timeline};
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::probe::{sustained_peak_runnable, ThreadSampler};
use crate::stats::Summary;
use crate::systems::{rayon_pool, tokio_runtime, System, TidepoolConfig};
use crate::work::{calibrated_rounds, fib_rounds};
use std::fmt::Write as _;

use crate::report::summary::{count, median, times};

/// What the experiment shows.
const ABOUT: &str = "Ten jobs that each compute the largest Fibonacci number below 100 in a \
loop sized to take about a second alone. On ten threads they share two cores and each takes \
about five times longer; with the running threads held at the number of cores each job \
finishes in its single-thread time and the total is the same.";

/// tidepool's default pool, the baseline.
pub(crate) const ADAPTIVE: &str = "adaptive";
/// One OS thread per job.
pub(crate) const THREADS10: &str = "threads10";

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "cpu-bound",
    about: ABOUT,
    summary: "Ten CPU-bound jobs of about a second on a two-core machine.",
    question: "Do CPU-bound jobs on more threads than cores slow each other down?",
    verdict,
    scale: describe_scale,
    headline: "mean_job_s",
    baseline: ADAPTIVE,
    baselines: &[],
    headlines: &[],
    runs: &[
        RunSpec {
            id: THREADS10,
            system: "std::thread",
            description: "One OS thread per job.",
            execute: |ctx| run(ctx, || Ok(System::ThreadPerItem)),
        },
        RunSpec {
            id: "fixed10",
            system: "tidepool",
            description: "Controller::Fixed with 10 threads.",
            execute: |ctx| run(ctx, || tidepool(TidepoolConfig::fixed(10))),
        },
        RunSpec {
            id: ADAPTIVE,
            system: "tidepool",
            description: "The default pool (Adaptive).",
            execute: |ctx| run(ctx, || tidepool(TidepoolConfig::default_pool())),
        },
        RunSpec {
            id: "hill-climbing",
            system: "tidepool",
            description: "Controller::HillClimbing: the running target moves to maximise completions per second.",
            execute: |ctx| {
                run(ctx, || {
                    tidepool(TidepoolConfig {
                        controller: Some(tidepool::Controller::HillClimbing),
                        ..TidepoolConfig::default_pool()
                    })
                })
            },
        },
        RunSpec {
            id: "tokio",
            system: "tokio",
            description: "Jobs as tasks on tokio's default multi-thread runtime.",
            execute: |ctx| run(ctx, || tokio_runtime().map(System::Tokio)),
        },
        RunSpec {
            id: "rayon",
            system: "rayon",
            description: "rayon::ThreadPool::spawn on a default pool.",
            execute: |ctx| run(ctx, || rayon_pool(None).map(System::Rayon)),
        },
    ],
    opt_in: &[],
    plots,
    full_only: &["fixed10", "hill-climbing"],
    default_repeat: 1,
    rotate: false,
};

/// Counts and durations at a scale.
#[derive(Debug, Clone, Copy)]
struct Params {
    /// Jobs (before `--items`).
    jobs: usize,
    /// CPU time of one job alone.
    job_ms: u64,
}

/// The experiment's size at each scale.
const SCALES: ScaleTable<Params> = ScaleTable {
    full: Params {
        jobs: 10,
        job_ms: 1000,
    },
    quick: Params {
        jobs: 10,
        job_ms: 250,
    },
    tiny: Params {
        jobs: 4,
        job_ms: 20,
    },
};

fn describe_scale(scale: Scale) -> String {
    let p = SCALES.at(scale);
    format!("{} jobs of about {} s", p.jobs, p.job_ms as f64 / 1e3)
}

fn tidepool(cfg: TidepoolConfig) -> Result<System, String> {
    cfg.build().map(System::Tidepool)
}

/// Runs the jobs on the system `make` builds.
///
/// # Errors
///
/// When the system cannot be built or jobs do not finish.
fn run(ctx: &RunCtx, make: impl FnOnce() -> Result<System, String>) -> Result<Measured, String> {
    let p = SCALES.at(ctx.scale);
    let jobs = ctx.items_or(p.jobs);
    let target = Duration::from_millis(p.job_ms);
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
    let system = make();
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
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    per_item_plot(
        runs,
        &[THREADS10, "fixed10", ADAPTIVE, "tokio", "rayon"],
        "cpu-bound-jobs",
        (
            "Duration of each CPU-bound job",
            "On ten threads every job shares two cores and takes about five times its time alone; pools that keep running threads at the core count finish each job in its time alone (hill-climbing behaves like adaptive: see the table).",
        ),
        "job (submission order)",
        "job duration, s",
        false,
    )
    .into_iter()
    .collect()
}

/// The summary's answer: a job's time on ten threads and on the default
/// pool, against its time alone.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let ours = median(exp, ADAPTIVE, "mean_job_s")?;
    let alone = median(exp, ADAPTIVE, "single_job_s")?;
    let running = median(exp, ADAPTIVE, "peak_running");
    let mut s = String::new();
    let threads = median(exp, THREADS10, "mean_job_s");
    if let Some(t) = threads {
        let _ = write!(
            s,
            "On a thread each a job takes {t:.2} s, {} its {alone:.2} s alone; ",
            times(t, alone)
        );
    }
    let _ = write!(
        s,
        "on tidepool's default {ours:.2} s ({})",
        times(ours, alone)
    );
    if let Some(r) = running {
        let _ = write!(s, " with at most {} running", count(r, "thread", "threads"));
    }
    for id in ["tokio", "rayon"] {
        if let Some(v) = median(exp, id, "mean_job_s") {
            let _ = write!(s, "; {id} {v:.2} s");
        }
    }
    s.push_str(". Verdict: ");
    s.push_str(if ours <= alone * 1.5 {
        "tidepool holds running threads at the cores, so each job takes its time alone"
    } else {
        "jobs on tidepool's default take clearly longer than alone here"
    });
    if let Some(t) = threads {
        let _ = write!(
            s,
            "; a thread each makes every job {} slower.",
            times(t, ours)
        );
    } else {
        s.push('.');
    }
    Some(s)
}

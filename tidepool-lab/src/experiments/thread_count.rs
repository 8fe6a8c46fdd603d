//! Experiment 4, `thread-count`: more threads is not faster. Tiny items that
//! share a lock run slower on 200 threads than on 2.

use std::io::{BufWriter, Sink, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{
    done, settle, thread_baseline, Experiment, Measured, RunCtx, RunResult, RunSpec, Scale,
    ScaleTable,
};
use crate::measure::Latch;
use crate::probe::{self, ThreadSampler};
use crate::report::plot::Plot;
use crate::report::table::group_digits;
use crate::systems::{rayon_pool, tokio_runtime, System, TidepoolConfig};

/// What the experiment shows.
const ABOUT: &str = "100,000 tiny items each write a short line to a shared buffered sink \
behind a mutex and bump an atomic counter, on pools of 2, 25 and 200 threads. The classic \
expectation is that many threads contending for one lock run slower than a few (lock convoys, \
context switches); the table shows how far that holds on this machine, and peak_threads how \
many threads each pool actually started.";

/// tidepool's default pool, the baseline.
pub(crate) const ADAPTIVE: &str = "adaptive";

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "thread-count",
    about: ABOUT,
    scale: describe_scale,
    headline: "wall_ms",
    baseline: ADAPTIVE,
    runs: &[
        RunSpec {
            id: "fixed2",
            system: "tidepool",
            description: "Controller::Fixed with 2 threads.",
            execute: |ctx| run(ctx, || tidepool(TidepoolConfig::fixed(2))),
        },
        RunSpec {
            id: "fixed25",
            system: "tidepool",
            description: "Controller::Fixed with 25 threads.",
            execute: |ctx| run(ctx, || tidepool(TidepoolConfig::fixed(25))),
        },
        RunSpec {
            id: "fixed200",
            system: "tidepool",
            description: "Controller::Fixed with 200 threads (tidepool starts threads on demand, so peak_threads shows how many it used).",
            execute: |ctx| run(ctx, || tidepool(TidepoolConfig::fixed(200))),
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
            description: "Tasks on tokio's default multi-thread runtime.",
            execute: |ctx| run(ctx, || tokio_runtime().map(System::Tokio)),
        },
        RunSpec {
            id: "rayon",
            system: "rayon",
            description: "rayon::ThreadPool::spawn on a default pool.",
            execute: |ctx| run(ctx, || rayon_pool(None).map(System::Rayon)),
        },
        RunSpec {
            id: "threadpool200",
            system: "threadpool",
            description: "threadpool::ThreadPool with 200 threads, all started up front: the classic oversized pool.",
            execute: |ctx| run(ctx, || Ok(System::ThreadPool(threadpool::ThreadPool::new(200)))),
        },
    ],
    plots,
    default_repeat: 5,
};

/// Items at each scale (before `--items`).
const SCALES: ScaleTable<usize> = ScaleTable {
    full: 100_000,
    quick: 30_000,
    tiny: 1_000,
};

fn describe_scale(scale: Scale) -> String {
    format!("{} items", group_digits(SCALES.at(scale) as f64))
}

fn tidepool(cfg: TidepoolConfig) -> Result<System, String> {
    cfg.build().map(System::Tidepool)
}

/// Runs the tiny items on the system `make` builds.
///
/// # Errors
///
/// When the system cannot be built, or items do not finish or do not add up.
fn run(ctx: &RunCtx, make: impl FnOnce() -> Result<System, String>) -> Result<Measured, String> {
    let n = ctx.items_or(SCALES.at(ctx.scale));
    // The progress follower starts before the baseline, so it is not
    // counted as one of the system's threads.
    let latch = Arc::new(Latch::new(n));
    let follow = ctx.follow(&latch);
    let baseline = thread_baseline();
    let sampler = ThreadSampler::start(Duration::from_millis(5), baseline, false);
    let system = make();
    let system = match system {
        Ok(s) => s,
        Err(e) => {
            sampler.finish();
            return Err(e);
        }
    };

    let sink: Arc<Mutex<BufWriter<Sink>>> = Arc::new(Mutex::new(BufWriter::new(std::io::sink())));
    let count = Arc::new(AtomicU64::new(0));
    ctx.bar.phase("spawning");
    let t0 = Instant::now();
    for i in 0..n {
        let (sink, count, latch) = (sink.clone(), count.clone(), latch.clone());
        system.spawn_fn(move || {
            {
                let mut w = sink.lock().unwrap_or_else(|e| e.into_inner());
                let _ = writeln!(w, "item {i} done");
            }
            count.fetch_add(1, Ordering::Relaxed);
            latch.count_down();
        });
    }
    let finished = latch.wait_timeout(Duration::from_secs(600));
    let wall = t0.elapsed();
    drop(follow);
    let own_peak = system.own_peak_threads();
    ctx.bar.phase("shutting down");
    system.finish();
    let observed = sampler.finish();
    settle(baseline);

    if !finished {
        return Err(format!(
            "only {} of {n} items finished in 600 s",
            latch.finished()
        ));
    }
    // Relaxed is enough: the latch wait ordered every item before this load.
    let c = count.load(Ordering::Relaxed);
    if c != n as u64 {
        return Err(format!("counter is {c}, expected {n}"));
    }
    let mut m = Measured::default();
    m.put("items", n as f64);
    m.put("wall_ms", wall.as_secs_f64() * 1e3);
    let peak = own_peak.unwrap_or_else(|| probe::peak_threads(&observed));
    m.put("peak_threads", peak as f64);
    m.note = Some(format!(
        "{n} items; peak_threads is the number of threads the system actually started."
    ));
    Ok(m)
}

/// Wall time per run, each bar labelled with the threads it used.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let bars: Vec<(String, f64)> = done(runs)
        .filter_map(|r| {
            let wall = r.measured.get("wall_ms")?;
            let threads = r.measured.get("peak_threads").unwrap_or(0.0);
            Some((format!("{} ({threads:.0} thr)", r.spec.id), wall))
        })
        .collect();
    if bars.is_empty() {
        return Vec::new();
    }
    vec![Plot::bars(
        "thread-count-wall",
        "Wall time by thread count",
        "wall time, ms",
        bars,
    )]
}

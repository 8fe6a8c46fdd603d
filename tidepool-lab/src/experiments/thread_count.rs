//! Experiment 4, `thread-count`: more threads is not faster. Tiny items that
//! share a lock run slower on 200 threads than on 2.

use std::io::{BufWriter, Sink, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{done, ids, settle, thread_baseline, Measured, RunCtx, RunResult, RunSpec};
use crate::measure::Latch;
use crate::probe::{self, ThreadSampler};
use crate::report::plot::Plot;
use crate::systems::{rayon_pool, tokio_runtime, System, TidepoolConfig};

/// What the experiment shows.
pub const ABOUT: &str = "100,000 tiny items each write a short line to a shared buffered sink \
behind a mutex and bump an atomic counter, on pools of 2, 25 and 200 threads. The classic \
expectation is that many threads contending for one lock run slower than a few (lock convoys, \
context switches); the table shows how far that holds on this machine, and peak_threads how \
many threads each pool actually started.";

/// The runs.
pub const RUNS: &[RunSpec] = &RUNS_ARRAY;
const RUNS_ARRAY: [RunSpec; 8] = [
    RunSpec::new("fixed2", "tidepool", "Controller::Fixed with 2 threads."),
    RunSpec::new("fixed25", "tidepool", "Controller::Fixed with 25 threads."),
    RunSpec::new(
        "fixed200",
        "tidepool",
        "Controller::Fixed with 200 threads (tidepool starts threads on demand, so peak_threads shows how many it used).",
    ),
    RunSpec::new("adaptive", "tidepool", "The default pool (Adaptive)."),
    RunSpec::new(
        "hill-climbing",
        "tidepool",
        "Controller::HillClimbing: the running target moves to maximise completions per second.",
    ),
    RunSpec::new(
        "tokio",
        "tokio",
        "Tasks on tokio's default multi-thread runtime.",
    ),
    RunSpec::new(
        "rayon",
        "rayon",
        "rayon::ThreadPool::spawn on a default pool.",
    ),
    RunSpec::new(
        "threadpool200",
        "threadpool",
        "threadpool::ThreadPool with 200 threads, all started up front: the classic oversized pool.",
    ),
];
/// The run ids.
pub const IDS: &[&str] = &ids(&RUNS_ARRAY);

/// Runs one run.
///
/// # Errors
///
/// When the system cannot be built, or items do not finish or do not add up.
pub fn run(spec: &RunSpec, ctx: &RunCtx) -> Result<Measured, String> {
    let n = ctx.items_or(ctx.scale.pick(100_000, 30_000, 1_000));
    // The progress follower starts before the baseline, so it is not
    // counted as one of the system's threads.
    let latch = Arc::new(Latch::new(n));
    let follow = ctx.follow(&latch);
    let baseline = thread_baseline();
    let sampler = ThreadSampler::start(Duration::from_millis(5), baseline, false);
    let system = match spec.id {
        "fixed2" => TidepoolConfig::fixed(2).build().map(System::Tidepool),
        "fixed25" => TidepoolConfig::fixed(25).build().map(System::Tidepool),
        "fixed200" => TidepoolConfig::fixed(200).build().map(System::Tidepool),
        "adaptive" => TidepoolConfig::default_pool().build().map(System::Tidepool),
        "hill-climbing" => TidepoolConfig {
            controller: Some(tidepool::Controller::HillClimbing),
            ..TidepoolConfig::default_pool()
        }
        .build()
        .map(System::Tidepool),
        "tokio" => tokio_runtime().map(System::Tokio),
        "rayon" => rayon_pool(None).map(System::Rayon),
        "threadpool200" => Ok(System::ThreadPool(threadpool::ThreadPool::new(200))),
        other => Err(format!("thread-count has no run '{other}'")),
    };
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
pub fn plots(runs: &[RunResult]) -> Vec<Plot> {
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

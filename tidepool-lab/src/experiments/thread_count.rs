//! The `thread-count` experiment. What it runs and shows is said once, in
//! [`EXPERIMENT`]: its `summary` (the command line's help) and its `about`
//! (the report's).

use std::io::{BufWriter, Sink, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{done, settle, thread_baseline};
use crate::aggregate::Measured;
use crate::measure::Latch;
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::probe::{self, ThreadSampler};
use crate::report::plot::format_value;
use crate::report::summary::{figure, median, times};
use crate::report::table::group_digits;
use crate::systems::{rayon_pool, tokio_runtime, System, TidepoolConfig};
use std::fmt::Write as _;

/// What the experiment shows.
const ABOUT: &str = "100,000 tiny items each write a short line to a shared buffered sink \
behind a mutex and bump an atomic counter, on pools of 2, 25 and 200 threads. The classic \
expectation is that many threads contending for one lock run slower than a few (lock convoys, \
context switches); the table shows how far that holds on this machine, and peak_threads how \
many threads each pool actually started.";

/// tidepool's default pool, the baseline.
pub(crate) const ADAPTIVE: &str = "adaptive";
/// The fixed pools, by thread count.
const FIXED2: &str = "fixed2";
const FIXED25: &str = "fixed25";
const FIXED200: &str = "fixed200";
/// The oversized pool of the threadpool crate.
const THREADPOOL200: &str = "threadpool200";

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "thread-count",
    about: ABOUT,
    summary: "Tiny items on 2, 25 and 200 threads.",
    question: "Are more threads slower for tiny items that share a lock?",
    verdict,
    scale: describe_scale,
    headline: "wall_ms",
    baseline: ADAPTIVE,
    baselines: &[],
    headlines: &[],
    runs: &[
        RunSpec {
            id: FIXED2,
            system: "tidepool",
            description: "Controller::Fixed with 2 threads, both started before measuring.",
            execute: |ctx| run(ctx, Some(2), || tidepool(TidepoolConfig::fixed(2))),
        },
        RunSpec {
            id: FIXED25,
            system: "tidepool",
            description: "Controller::Fixed with 25 threads, all started before measuring.",
            execute: |ctx| run(ctx, Some(25), || tidepool(TidepoolConfig::fixed(25))),
        },
        RunSpec {
            id: FIXED200,
            system: "tidepool",
            description: "Controller::Fixed with 200 threads, all started before measuring (tidepool starts threads on demand, so 200 items that wait for each other make it start them).",
            execute: |ctx| run(ctx, Some(200), || tidepool(TidepoolConfig::fixed(200))),
        },
        RunSpec {
            id: ADAPTIVE,
            system: "tidepool",
            description: "The default pool (Adaptive).",
            execute: |ctx| run(ctx, None, || tidepool(TidepoolConfig::default_pool())),
        },
        RunSpec {
            id: "hill-climbing",
            system: "tidepool",
            description: "Controller::HillClimbing: the running target moves to maximise completions per second.",
            execute: |ctx| {
                run(ctx, None, || {
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
            execute: |ctx| run(ctx, None, || tokio_runtime().map(System::Tokio)),
        },
        RunSpec {
            id: "rayon",
            system: "rayon",
            description: "rayon::ThreadPool::spawn on a default pool.",
            execute: |ctx| run(ctx, None, || rayon_pool(None).map(System::Rayon)),
        },
        RunSpec {
            id: THREADPOOL200,
            system: "threadpool",
            description: "threadpool::ThreadPool with 200 threads, all started up front: the classic oversized pool.",
            execute: |ctx| {
                run(ctx, Some(200), || Ok(System::ThreadPool(threadpool::ThreadPool::new(200))))
            },
        },
    ],
    opt_in: &[],
    plots,
    full_only: &[],
    default_repeat: 5,
    rotate: false,
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

/// Runs the tiny items on the system `make` builds, after starting `warm`
/// of its threads when the run is about a thread count.
///
/// # Errors
///
/// When the system cannot be built, or items do not finish or do not add up.
fn run(
    ctx: &RunCtx,
    warm: Option<usize>,
    make: impl FnOnce() -> Result<System, String>,
) -> Result<Measured, String> {
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

    let warmed = warm.map(|n| {
        ctx.bar.phase("starting threads");
        warm_up(&system, n)
    });
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
    if let Some(w) = warmed {
        m.put("warm_threads", w as f64);
    }
    m.note = Some(format!(
        "{n} items; peak_threads is the number of threads the system actually started, warm_threads how many ran at once before measuring."
    ));
    Ok(m)
}

/// How long the warm-up waits for the threads to start.
const WARM_UP_LIMIT: Duration = Duration::from_secs(10);

/// Makes `system` start `n` threads before it is measured: `n` items that
/// each wait until all `n` are running at once, which a pool that starts
/// threads on demand (tidepool) can only satisfy with `n` threads. Returns
/// how many ran at once; after [`WARM_UP_LIMIT`] the items are let go
/// anyway, so a pool that cannot start them all still gets measured (and
/// the figure says so). Waits until every warm-up item has ended.
fn warm_up(system: &System, n: usize) -> usize {
    let gate = Arc::new((Mutex::new((0_usize, false, 0_usize)), Condvar::new()));
    for _ in 0..n {
        let gate = gate.clone();
        system.spawn_fn(move || {
            let (lock, cv) = &*gate;
            let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
            g.0 += 1;
            cv.notify_all();
            while !g.1 {
                g = cv.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            g.2 += 1;
            cv.notify_all();
        });
    }
    let (lock, cv) = &*gate;
    let g = lock.lock().unwrap_or_else(|e| e.into_inner());
    let (mut g, _) = cv
        .wait_timeout_while(g, WARM_UP_LIMIT, |g| g.0 < n)
        .unwrap_or_else(|e| e.into_inner());
    let arrived = g.0;
    g.1 = true;
    cv.notify_all();
    drop(
        cv.wait_timeout_while(g, WARM_UP_LIMIT * 3, |g| g.2 < n)
            .unwrap_or_else(|e| e.into_inner()),
    );
    arrived
}

/// Wall time per run, each bar labelled with the threads it used.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let bars: Vec<(String, f64)> = done(runs)
        .filter_map(|r| {
            let wall = r.measured.get("wall_ms")?;
            let threads = r.measured.get("peak_threads").unwrap_or(0.0);
            Some((format!("{} ({threads:.0} threads)", r.spec.id), wall))
        })
        .collect();
    if bars.is_empty() {
        return Vec::new();
    }
    vec![Plot::bars(
        "thread-count-wall",
        (
            "Wall time by thread count",
            "Tiny items behind one lock, on pools of 2 to 200 threads (under each bar, the threads it started): compare the bars of one system; the summary says whether more threads was slower here.",
        ),
        "wall time, ms",
        bars,
    )]
}

/// The summary's answer: wall time on 2, 25 and 200 threads, and whether
/// more threads was slower here, whatever the answer.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let wall = |id| figure(exp, id, "wall_ms");
    let threads = |id| median(exp, id, "peak_threads").map_or("?".into(), |t| format!("{t:.0}"));
    let (two, _, two_max) = wall(FIXED2)?;
    let (_, two_min, _) = wall(FIXED2)?;
    let mut s = format!(
        "Fixed pools took {} ms on {} threads",
        format_value(two),
        threads(FIXED2)
    );
    for id in [FIXED25, FIXED200] {
        if let Some((v, _, _)) = wall(id) {
            let _ = write!(s, ", {} ms on {}", format_value(v), threads(id));
        }
    }
    if let Some((v, _, _)) = wall(THREADPOOL200) {
        let _ = write!(
            s,
            "; the threadpool crate {} ms on {}",
            format_value(v),
            threads(THREADPOOL200)
        );
    }
    s.push_str(". Verdict: ");
    match wall(FIXED200) {
        Some((v, lo, _)) if lo > two_max && v > two * 1.05 => {
            let _ = write!(
                s,
                "more threads was slower here: 200 threads took {} the time of 2.",
                times(v, two)
            );
        }
        Some((v, _, hi)) if hi < two_min && v < two * 0.95 => {
            let _ = write!(
                s,
                "more threads was not slower here: 200 threads took {} the time of 2.",
                times(v, two)
            );
        }
        Some((v, _, _)) => {
            let _ = write!(
                s,
                "no clear difference here: 200 threads took {} the time of 2, within 5% or the spread of the repetitions.",
                times(v, two)
            );
        }
        None => s.push_str("run fixed200 for a verdict."),
    }
    Some(s)
}

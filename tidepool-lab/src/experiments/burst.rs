//! Experiment 7, `burst`: hundreds of items submitted at once. Items that
//! block should each get a thread at once; items that compute should run on
//! one thread per core, never on hundreds.

use std::hint::black_box;
use std::thread;
use std::time::Duration;

use super::latency::{finish, rename, threads_plot};
use super::paced::{measure_sampled, ItemProbe, Pace};
use super::{metric_bars, per_item_plot};
use crate::aggregate::Measured;
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::report::summary::{median, ms, times};
use crate::report::table::group_digits;
use crate::systems::{rayon_pool, tokio_runtime, System, TidepoolConfig};
use crate::work::{calibrated_rounds, fib_rounds};
use std::fmt::Write as _;

/// What the experiment shows.
const ABOUT: &str = "500 items submitted at once, each blocking 200 ms in thread::sleep \
(100 ms at --quick scale): a pool that gives a blocked item's thread slot away can start \
them all within milliseconds, as tokio's spawn_blocking does with a thread each; a pool \
that caps or paces its threads starts them in waves. Then 500 items of 2 ms of computation \
at once (the -cpu runs): those gain nothing from more threads, so at most one per core \
should run at a time.";

/// tidepool's default pool with blocking items, the baseline.
pub(crate) const TIDEPOOL_SLEEP: &str = "tidepool-sleep";
/// tokio's spawn_blocking with blocking items.
pub(crate) const TOKIO_SLEEP: &str = "tokio-spawn-blocking-sleep";
/// A fixed pool of 10 with blocking items.
pub(crate) const FIXED10_SLEEP: &str = "fixed10-sleep";
/// rayon's default pool with blocking items.
pub(crate) const RAYON_SLEEP: &str = "rayon-sleep";
/// tidepool's default pool with CPU-bound items.
pub(crate) const TIDEPOOL_CPU: &str = "tidepool-cpu";
/// tokio's spawn_blocking with CPU-bound items.
pub(crate) const TOKIO_CPU: &str = "tokio-spawn-blocking-cpu";
/// A fixed pool of 10 with CPU-bound items.
pub(crate) const FIXED10_CPU: &str = "fixed10-cpu";
/// rayon's default pool with CPU-bound items.
pub(crate) const RAYON_CPU: &str = "rayon-cpu";

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "burst",
    about: ABOUT,
    question: "Do items submitted in one burst start at once, without oversubscribing the cores?",
    verdict,
    scale: describe_scale,
    headline: "p50_start_ms",
    baseline: TIDEPOOL_SLEEP,
    baselines: &[],
    runs: &[
        RunSpec {
            id: TIDEPOOL_SLEEP,
            system: "tidepool",
            description: "The default pool (Adaptive), Pool::execute; each item blocks in thread::sleep.",
            execute: |ctx| run(ctx, Work::Sleep(Share::All), default_pool),
        },
        RunSpec {
            id: TOKIO_SLEEP,
            system: "tokio",
            description: "tokio's spawn_blocking on a default multi-thread runtime (up to 512 blocking threads); each item blocks in thread::sleep.",
            execute: |ctx| run(ctx, Work::Sleep(Share::All), tokio_blocking),
        },
        RunSpec {
            id: FIXED10_SLEEP,
            system: "tidepool",
            description: "A fixed pool of 10 threads (tidepool's Controller::Fixed with concurrency 10); each item blocks in thread::sleep.",
            execute: |ctx| run(ctx, Work::Sleep(Share::All), fixed10),
        },
        RunSpec {
            id: RAYON_SLEEP,
            system: "rayon",
            description: "rayon::ThreadPool::spawn on a default pool (one thread per core); each item blocks in thread::sleep.",
            execute: |ctx| run(ctx, Work::Sleep(Share::Tenth), rayon),
        },
        RunSpec {
            id: TIDEPOOL_CPU,
            system: "tidepool",
            description: "The default pool (Adaptive), Pool::execute; each item computes for about 2 ms.",
            execute: |ctx| run(ctx, Work::Cpu, default_pool),
        },
        RunSpec {
            id: TOKIO_CPU,
            system: "tokio",
            description: "tokio's spawn_blocking on a default multi-thread runtime; each item computes for about 2 ms.",
            execute: |ctx| run(ctx, Work::Cpu, tokio_blocking),
        },
        RunSpec {
            id: FIXED10_CPU,
            system: "tidepool",
            description: "A fixed pool of 10 threads (tidepool's Controller::Fixed with concurrency 10); each item computes for about 2 ms.",
            execute: |ctx| run(ctx, Work::Cpu, fixed10),
        },
        RunSpec {
            id: RAYON_CPU,
            system: "rayon",
            description: "rayon::ThreadPool::spawn on a default pool; each item computes for about 2 ms.",
            execute: |ctx| run(ctx, Work::Cpu, rayon),
        },
    ],
    plots,
    default_repeat: 5,
    rotate: false,
};

/// Counts and durations at a scale.
#[derive(Debug, Clone, Copy)]
struct Params {
    /// Items in the burst (before `--items`).
    items: usize,
    /// How long a blocking item sleeps.
    sleep_ms: u64,
    /// CPU time of a CPU-bound item.
    cpu_us: u64,
}

/// The experiment's size at each scale.
const SCALES: ScaleTable<Params> = ScaleTable {
    full: Params {
        items: 500,
        sleep_ms: 200,
        cpu_us: 2000,
    },
    quick: Params {
        items: 300,
        sleep_ms: 100,
        cpu_us: 2000,
    },
    tiny: Params {
        items: 20,
        sleep_ms: 10,
        cpu_us: 500,
    },
};

fn describe_scale(scale: Scale) -> String {
    let p = SCALES.at(scale);
    format!(
        "{} items at once, {} ms sleep / {} ms CPU",
        group_digits(p.items as f64),
        p.sleep_ms,
        p.cpu_us as f64 / 1e3
    )
}

/// What each item does.
#[derive(Debug, Clone, Copy)]
enum Work {
    /// Blocks in `thread::sleep`, submitted in part or in full.
    Sleep(Share),
    /// Computes (the lab's calibrated Fibonacci loop).
    Cpu,
}

/// Which part of the burst a blocking run submits.
#[derive(Debug, Clone, Copy)]
enum Share {
    /// All of it.
    All,
    /// The first tenth, for a pool of one thread per core: the whole burst
    /// would take items x sleep / cores (50 s at full scale, five times).
    Tenth,
}

fn default_pool() -> Result<System, String> {
    TidepoolConfig::default_pool().build().map(System::Tidepool)
}

fn fixed10() -> Result<System, String> {
    TidepoolConfig::fixed(10).build().map(System::Tidepool)
}

fn tokio_blocking() -> Result<System, String> {
    tokio_runtime().map(System::TokioBlocking)
}

fn rayon() -> Result<System, String> {
    rayon_pool(None).map(System::Rayon)
}

/// Submits the burst to the system `make` builds, all at once, and
/// measures when each item starts. The CPU-bound runs name their start
/// latencies `cpu_*`, so that the ratio column (which divides the blocking
/// burst's p50) leaves them out, and also count the threads running
/// (`peak_running`, and without tidepool's monitor `peak_running_workers`).
fn run(ctx: &RunCtx, work: Work, make: fn() -> Result<System, String>) -> Result<Measured, String> {
    let p = SCALES.at(ctx.scale);
    let items = ctx.items_or(p.items);
    let mut m = match work {
        Work::Sleep(share) => {
            let wait = Duration::from_millis(p.sleep_ms);
            let submitted = match share {
                Share::All => items,
                Share::Tenth => (items / 10).max(1),
            };
            let pace = Pace {
                items: submitted,
                interval: Duration::ZERO,
                // Worst case: one thread sleeping for every item in turn.
                limit: wait * u32::try_from(submitted).unwrap_or(u32::MAX)
                    + Duration::from_secs(60),
            };
            let mut m = measure_sampled(
                ctx,
                pace,
                false,
                make,
                |s: &System, probe: ItemProbe| {
                    s.spawn_fn(move || {
                        probe.start();
                        thread::sleep(wait);
                        probe.end();
                    })
                },
                finish,
            )?;
            m.note = Some(if submitted < items {
                format!(
                    "Submitted the first {submitted} of the {items} items at once, each sleeping {} ms: with one thread per core all of them would take {:.0} s.",
                    p.sleep_ms,
                    items as f64 * wait.as_secs_f64() / ctx.cores as f64
                )
            } else {
                format!(
                    "{items} items submitted at once, each sleeping {} ms.",
                    p.sleep_ms
                )
            });
            m
        }
        Work::Cpu => {
            let cpu = Duration::from_micros(p.cpu_us);
            ctx.bar.phase("calibrating");
            let rounds = calibrated_rounds(cpu);
            let pace = Pace {
                items,
                interval: Duration::ZERO,
                limit: cpu * u32::try_from(items.saturating_mul(4)).unwrap_or(u32::MAX)
                    + Duration::from_secs(60),
            };
            let mut m = measure_sampled(
                ctx,
                pace,
                true,
                make,
                |s: &System, probe: ItemProbe| {
                    s.spawn_fn(move || {
                        probe.start();
                        black_box(fib_rounds(rounds));
                        probe.end();
                    })
                },
                finish,
            )?;
            for (from, to) in [
                ("mean_start_ms", "cpu_mean_start_ms"),
                ("p50_start_ms", "cpu_p50_start_ms"),
                ("p99_start_ms", "cpu_p99_start_ms"),
                ("max_start_ms", "cpu_max_start_ms"),
            ] {
                rename(&mut m, from, to, 1.0);
            }
            m.note = Some(format!(
                "{items} items submitted at once, each computing for about {} ms, on {} cores; peak_running counts runnable threads (state R in /proc) held over two 10 ms samples.",
                p.cpu_us as f64 / 1e3,
                ctx.cores
            ));
            m
        }
    };
    rename(&mut m, "wall_s", "wall_ms", 1e3);
    Ok(m)
}

/// Start latency by item and threads over time for the blocking burst;
/// threads running at once for the CPU-bound one.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let sleep = [TIDEPOOL_SLEEP, TOKIO_SLEEP, FIXED10_SLEEP, RAYON_SLEEP];
    let mut out = Vec::new();
    out.extend(per_item_plot(
        runs,
        &sleep,
        "burst-start-latency",
        (
            "Start latency by item: a burst of blocking items",
            "A flat line near the bottom means every item got a thread at once; steps one sleep apart mean the items started in waves as threads freed up or were added (rayon-sleep ran the first tenth only).",
        ),
        "item (submission order)",
        "submit-to-start latency, ms (log)",
        true,
    ));
    // Zoomed on tidepool's burst: the fixed pool's and rayon's take seconds.
    let window = super::done(runs)
        .find(|r| r.spec.id == TIDEPOOL_SLEEP)
        .and_then(|r| r.measured.get("wall_ms"))
        .map(|w| 1.5 * w / 1e3);
    out.extend(
        threads_plot(
            runs,
            &sleep,
            "burst-threads",
            (
                "Threads over time: a burst of blocking items",
                "How fast each pool reaches a thread per blocked item, over the first 1.5x of tidepool's burst (the fixed pool stays at 10, rayon at one per core).",
            ),
        )
        .map(|p| match window {
            Some(w) => p.zoom_x(w),
            None => p,
        }),
    );
    let running: Vec<(String, f64)> = metric_bars(runs, "peak_running_workers");
    if !running.is_empty() {
        out.push(Plot::bars(
            "burst-cpu-running",
            (
                "Threads running at once: a burst of CPU-bound items",
                "Threads found runnable over two 10 ms samples in a row while 2 ms CPU-bound items ran (tidepool's monitor thread left out: see peak_running); more than the number of cores means the items took turns on the cores (oversubscription).",
            ),
            "peak runnable threads",
            running,
        ));
    }
    out
}

/// The summary's answer: tidepool's median start against spawn_blocking's,
/// its threads against the items in flight, and its running threads in the
/// CPU-bound burst against its running slots.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let ours = median(exp, TIDEPOOL_SLEEP, "p50_start_ms")?;
    let mut s = format!(
        "Of a burst of blocking items, tidepool's default starts half within {}",
        ms(ours)
    );
    if let Some(p99) = median(exp, TIDEPOOL_SLEEP, "p99_start_ms") {
        let _ = write!(s, " (p99 {})", ms(p99));
    }
    let tokio = median(exp, TOKIO_SLEEP, "p50_start_ms");
    if let Some(t) = tokio {
        let _ = write!(
            s,
            ", tokio's spawn_blocking within {} (tidepool {} of it)",
            ms(t),
            times(ours, t)
        );
    }
    for (id, what) in [
        (FIXED10_SLEEP, "a fixed pool of 10"),
        (RAYON_SLEEP, "rayon"),
    ] {
        if let Some(v) = median(exp, id, "p50_start_ms") {
            let _ = write!(s, ", {what} within {}", ms(v));
        }
    }
    let items = median(exp, TIDEPOOL_SLEEP, "items");
    let concurrency = median(exp, TIDEPOOL_SLEEP, "concurrency")
        .or_else(|| median(exp, TIDEPOOL_CPU, "concurrency"));
    let threads = median(exp, TIDEPOOL_SLEEP, "peak_threads");
    if let (Some(t), Some(n)) = (threads, items) {
        let _ = write!(s, "; it used {t:.0} threads for {n:.0} items in flight");
    }
    let running = median(exp, TIDEPOOL_CPU, "peak_running_workers");
    if let Some(r) = running {
        let _ = write!(
            s,
            "; of a burst of CPU-bound items at most {r:.0} workers ran at once"
        );
        if let Some(c) = concurrency {
            let _ = write!(s, " on its {c:.0} slots");
        }
        if let Some(all) = median(exp, TIDEPOOL_CPU, "peak_running").filter(|a| Some(*a) > running)
        {
            let _ = write!(s, " ({all:.0} threads with its monitor)");
        }
        if let Some(t) = median(exp, TOKIO_CPU, "peak_running") {
            let _ = write!(s, " ({t:.0} on spawn_blocking)");
        }
    }
    s.push_str(". Verdict: ");
    let mut verdicts = Vec::new();
    match tokio {
        Some(t) if ours <= t => {
            verdicts.push("tidepool starts a burst at least as fast as spawn_blocking".to_string())
        }
        Some(t) => verdicts.push(format!(
            "tidepool starts a burst {} slower than spawn_blocking (median)",
            times(ours, t)
        )),
        None => {}
    }
    if let (Some(t), Some(n), Some(c)) = (threads, items, concurrency) {
        verdicts.push(if t <= n + c {
            "no more threads than items in flight plus slots".to_string()
        } else {
            format!(
                "{t:.0} threads, more than items in flight plus slots ({:.0})",
                n + c
            )
        });
    }
    if let (Some(r), Some(c)) = (running, concurrency) {
        verdicts.push(if r <= c {
            "CPU-bound items do not oversubscribe the cores".to_string()
        } else {
            format!("CPU-bound items ran on {r:.0} workers at once on {c:.0} slots: oversubscribed")
        });
    }
    if verdicts.is_empty() {
        verdicts.push("compare with tokio-spawn-blocking-sleep for a verdict".into());
    }
    s.push_str(&verdicts.join("; "));
    s.push('.');
    Some(s)
}

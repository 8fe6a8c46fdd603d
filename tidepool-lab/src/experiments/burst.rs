//! The `burst` experiment. What it runs and shows is said once, in
//! [`EXPERIMENT`]: its `summary` (the command line's help) and its `about`
//! (the report's).
//!
//! Why every system runs twice, cold and warm: tidepool learns per pool
//! which kinds of task block (each pool has its own table of kinds), and a
//! process also keeps what any system leaves behind (glibc's cache of
//! thread stacks, allocator arenas). So:
//!
//! - a cold run (`...-cold`) measures each repetition in a process of its
//!   own (`fresh_process`): the first burst of its kind that process and
//!   its pool see;
//! - a warm run (the ids without `-cold`, as before cold runs existed)
//!   measures, in the lab's process, the second burst on one pool: every
//!   repetition builds its system, submits one unmeasured burst of the
//!   same items to it, waits for them, then measures the next burst on
//!   the same system (what a service's one long-lived pool meets when a
//!   burst comes back).
//!
//! `p50_start_ms` counts each item from its own submit. tokio's
//! `spawn_blocking` starts a thread inside the call, so its items start
//! soon after their own submit while the submitter slows down; the runs
//! also report `p50_start_since_burst_ms` (counted from the burst's first
//! submit) and `submit_ms` (how long handing the burst over took), which
//! compare the two on what the submitter asked for.

use std::hint::black_box;
use std::thread;
use std::time::Duration;

use super::fresh_process::in_fresh_process;
use super::latency::{finish, rename, threads_plot};
use super::paced::{measure_sampled, ItemProbe, Pace};
use super::{metric_bars, per_item_plot};
use crate::aggregate::Measured;
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::report::summary::{count, median, ms, times};
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
should run at a time. Each run is measured cold (-cold: every repetition the first burst \
of a fresh process, before tidepool has learnt that the items block) and warm (the second \
burst on the same pool, after an unmeasured one).";

/// tidepool's default pool with blocking items, warm: the baseline.
pub(crate) const TIDEPOOL_SLEEP: &str = "tidepool-sleep";
/// tidepool's default pool with blocking items, in a fresh process.
pub(crate) const TIDEPOOL_SLEEP_COLD: &str = "tidepool-sleep-cold";
/// tokio's spawn_blocking with blocking items, warm.
pub(crate) const TOKIO_SLEEP: &str = "tokio-spawn-blocking-sleep";
/// tokio's spawn_blocking with blocking items, in a fresh process.
pub(crate) const TOKIO_SLEEP_COLD: &str = "tokio-spawn-blocking-sleep-cold";
/// A fixed pool of 10 with blocking items, warm.
pub(crate) const FIXED10_SLEEP: &str = "fixed10-sleep";
/// A fixed pool of 10 with blocking items, in a fresh process.
pub(crate) const FIXED10_SLEEP_COLD: &str = "fixed10-sleep-cold";
/// rayon's default pool with blocking items, warm.
pub(crate) const RAYON_SLEEP: &str = "rayon-sleep";
/// rayon's default pool with blocking items, in a fresh process.
pub(crate) const RAYON_SLEEP_COLD: &str = "rayon-sleep-cold";
/// tidepool's default pool with CPU-bound items, warm.
pub(crate) const TIDEPOOL_CPU: &str = "tidepool-cpu";
/// tidepool's default pool with CPU-bound items, in a fresh process.
pub(crate) const TIDEPOOL_CPU_COLD: &str = "tidepool-cpu-cold";
/// tokio's spawn_blocking with CPU-bound items, warm.
pub(crate) const TOKIO_CPU: &str = "tokio-spawn-blocking-cpu";
/// tokio's spawn_blocking with CPU-bound items, in a fresh process.
pub(crate) const TOKIO_CPU_COLD: &str = "tokio-spawn-blocking-cpu-cold";
/// A fixed pool of 10 with CPU-bound items, warm.
pub(crate) const FIXED10_CPU: &str = "fixed10-cpu";
/// A fixed pool of 10 with CPU-bound items, in a fresh process.
pub(crate) const FIXED10_CPU_COLD: &str = "fixed10-cpu-cold";
/// rayon's default pool with CPU-bound items, warm.
pub(crate) const RAYON_CPU: &str = "rayon-cpu";
/// rayon's default pool with CPU-bound items, in a fresh process.
pub(crate) const RAYON_CPU_COLD: &str = "rayon-cpu-cold";

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "burst",
    about: ABOUT,
    summary: "500 items submitted at once: blocking ones, then CPU-bound ones.",
    question: "Do items submitted in one burst start at once, without oversubscribing the cores?",
    verdict,
    scale: describe_scale,
    headline: "p50_start_ms",
    baseline: TIDEPOOL_SLEEP,
    // A cold run is compared with tidepool's cold run.
    baselines: &[
        (TIDEPOOL_SLEEP_COLD, TIDEPOOL_SLEEP_COLD),
        (TOKIO_SLEEP_COLD, TIDEPOOL_SLEEP_COLD),
        (FIXED10_SLEEP_COLD, TIDEPOOL_SLEEP_COLD),
        (RAYON_SLEEP_COLD, TIDEPOOL_SLEEP_COLD),
        (TIDEPOOL_CPU_COLD, TIDEPOOL_SLEEP_COLD),
        (TOKIO_CPU_COLD, TIDEPOOL_SLEEP_COLD),
        (FIXED10_CPU_COLD, TIDEPOOL_SLEEP_COLD),
        (RAYON_CPU_COLD, TIDEPOOL_SLEEP_COLD),
    ],
    headlines: &[],
    runs: &[
        RunSpec {
            id: TIDEPOOL_SLEEP_COLD,
            system: "tidepool",
            description: "Cold (each repetition the first burst of a fresh process): the default pool (Adaptive), Pool::execute; each item blocks in thread::sleep.",
            execute: |ctx| cold(ctx, TIDEPOOL_SLEEP_COLD, Work::Sleep(Share::All), default_pool),
        },
        RunSpec {
            id: TIDEPOOL_SLEEP,
            system: "tidepool",
            description: "Warm (the second burst of its kind in the lab's process): the default pool (Adaptive), Pool::execute; each item blocks in thread::sleep.",
            execute: |ctx| warm(ctx, Work::Sleep(Share::All), default_pool),
        },
        RunSpec {
            id: TOKIO_SLEEP_COLD,
            system: "tokio",
            description: "Cold: tokio's spawn_blocking on a default multi-thread runtime (up to 512 blocking threads); each item blocks in thread::sleep.",
            execute: |ctx| cold(ctx, TOKIO_SLEEP_COLD, Work::Sleep(Share::All), tokio_blocking),
        },
        RunSpec {
            id: TOKIO_SLEEP,
            system: "tokio",
            description: "Warm: tokio's spawn_blocking on a default multi-thread runtime (up to 512 blocking threads); each item blocks in thread::sleep.",
            execute: |ctx| warm(ctx, Work::Sleep(Share::All), tokio_blocking),
        },
        RunSpec {
            id: FIXED10_SLEEP_COLD,
            system: "tidepool",
            description: "Cold: a fixed pool of 10 threads (tidepool's Controller::Fixed with concurrency 10); each item blocks in thread::sleep.",
            execute: |ctx| cold(ctx, FIXED10_SLEEP_COLD, Work::Sleep(Share::All), fixed10),
        },
        RunSpec {
            id: FIXED10_SLEEP,
            system: "tidepool",
            description: "Warm: a fixed pool of 10 threads (tidepool's Controller::Fixed with concurrency 10); each item blocks in thread::sleep.",
            execute: |ctx| warm(ctx, Work::Sleep(Share::All), fixed10),
        },
        RunSpec {
            id: RAYON_SLEEP_COLD,
            system: "rayon",
            description: "Cold: rayon::ThreadPool::spawn on a default pool (one thread per core); each item blocks in thread::sleep.",
            execute: |ctx| cold(ctx, RAYON_SLEEP_COLD, Work::Sleep(Share::Tenth), rayon),
        },
        RunSpec {
            id: RAYON_SLEEP,
            system: "rayon",
            description: "Warm: rayon::ThreadPool::spawn on a default pool (one thread per core); each item blocks in thread::sleep.",
            execute: |ctx| warm(ctx, Work::Sleep(Share::Tenth), rayon),
        },
        RunSpec {
            id: TIDEPOOL_CPU_COLD,
            system: "tidepool",
            description: "Cold: the default pool (Adaptive), Pool::execute; each item computes for about 2 ms.",
            execute: |ctx| cold(ctx, TIDEPOOL_CPU_COLD, Work::Cpu, default_pool),
        },
        RunSpec {
            id: TIDEPOOL_CPU,
            system: "tidepool",
            description: "Warm: the default pool (Adaptive), Pool::execute; each item computes for about 2 ms.",
            execute: |ctx| warm(ctx, Work::Cpu, default_pool),
        },
        RunSpec {
            id: TOKIO_CPU_COLD,
            system: "tokio",
            description: "Cold: tokio's spawn_blocking on a default multi-thread runtime; each item computes for about 2 ms.",
            execute: |ctx| cold(ctx, TOKIO_CPU_COLD, Work::Cpu, tokio_blocking),
        },
        RunSpec {
            id: TOKIO_CPU,
            system: "tokio",
            description: "Warm: tokio's spawn_blocking on a default multi-thread runtime; each item computes for about 2 ms.",
            execute: |ctx| warm(ctx, Work::Cpu, tokio_blocking),
        },
        RunSpec {
            id: FIXED10_CPU_COLD,
            system: "tidepool",
            description: "Cold: a fixed pool of 10 threads (tidepool's Controller::Fixed with concurrency 10); each item computes for about 2 ms.",
            execute: |ctx| cold(ctx, FIXED10_CPU_COLD, Work::Cpu, fixed10),
        },
        RunSpec {
            id: FIXED10_CPU,
            system: "tidepool",
            description: "Warm: a fixed pool of 10 threads (tidepool's Controller::Fixed with concurrency 10); each item computes for about 2 ms.",
            execute: |ctx| warm(ctx, Work::Cpu, fixed10),
        },
        RunSpec {
            id: RAYON_CPU_COLD,
            system: "rayon",
            description: "Cold: rayon::ThreadPool::spawn on a default pool; each item computes for about 2 ms.",
            execute: |ctx| cold(ctx, RAYON_CPU_COLD, Work::Cpu, rayon),
        },
        RunSpec {
            id: RAYON_CPU,
            system: "rayon",
            description: "Warm: rayon::ThreadPool::spawn on a default pool; each item computes for about 2 ms.",
            execute: |ctx| warm(ctx, Work::Cpu, rayon),
        },
    ],
    opt_in: &[],
    plots,
    full_only: &[FIXED10_SLEEP_COLD, FIXED10_SLEEP, FIXED10_CPU_COLD, FIXED10_CPU],
    default_repeat: 5,
    // As in every experiment whose runs start processes: no run always
    // comes first in a round.
    rotate: true,
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

impl Share {
    /// The items submitted of a burst of `items`.
    fn of(self, items: usize) -> usize {
        match self {
            Share::All => items,
            Share::Tenth => (items / 10).max(1),
        }
    }
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

/// A cold run: each repetition in a process of its own, its first burst.
/// The CPU-bound items' calibration is made here, in the lab's process, and
/// handed over, so cold and warm runs do the same work.
fn cold(
    ctx: &RunCtx,
    id: &str,
    work: Work,
    make: fn() -> Result<System, String>,
) -> Result<Measured, String> {
    let p = SCALES.at(ctx.scale);
    if let Work::Cpu = work {
        calibrated_rounds(Duration::from_micros(p.cpu_us));
    }
    // The burst's own limit, and time to start the process and settle.
    let limit = time_limit(p, work, ctx.items_or(p.items)) + Duration::from_secs(30);
    in_fresh_process(ctx, &EXPERIMENT, id, limit, |ctx| run(ctx, work, make))
}

/// A warm run: in the lab's process, the second burst on one system:
/// [`run`] builds it, hands it one unmeasured burst of the same items and
/// waits for their end, then measures the next.
fn warm(
    ctx: &RunCtx,
    work: Work,
    make: fn() -> Result<System, String>,
) -> Result<Measured, String> {
    let p = SCALES.at(ctx.scale);
    let items = ctx.items_or(p.items);
    let warmed = move || {
        let system = make()?;
        ctx.bar
            .phase("warming up: an unmeasured burst on the same pool");
        let (done, ended) = std::sync::mpsc::channel();
        let submitted = match work {
            Work::Sleep(share) => {
                let wait = Duration::from_millis(p.sleep_ms);
                let submitted = share.of(items);
                for _ in 0..submitted {
                    let done = done.clone();
                    system.spawn_fn(move || {
                        thread::sleep(wait);
                        // The receiver outlives every item (it waits below).
                        let _ = done.send(());
                    });
                }
                submitted
            }
            Work::Cpu => {
                let rounds = calibrated_rounds(Duration::from_micros(p.cpu_us));
                for _ in 0..items {
                    let done = done.clone();
                    system.spawn_fn(move || {
                        black_box(fib_rounds(rounds));
                        let _ = done.send(());
                    });
                }
                items
            }
        };
        let deadline = std::time::Instant::now() + time_limit(p, work, items);
        for _ in 0..submitted {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            ended
                .recv_timeout(left)
                .map_err(|_| "the warm-up burst did not end in time".to_string())?;
        }
        Ok(system)
    };
    run(ctx, work, warmed)
}

/// How long a burst may take before its run fails: one item after the
/// other, and a minute more.
fn time_limit(p: Params, work: Work, items: usize) -> Duration {
    let one_by_one = match work {
        Work::Sleep(share) => {
            Duration::from_millis(p.sleep_ms) * u32::try_from(share.of(items)).unwrap_or(u32::MAX)
        }
        // Four times the CPU time, as the cores are shared.
        Work::Cpu => {
            Duration::from_micros(p.cpu_us)
                * u32::try_from(items.saturating_mul(4)).unwrap_or(u32::MAX)
        }
    };
    one_by_one + Duration::from_secs(60)
}

/// Submits the burst to the system `make` builds, all at once, and
/// measures when each item starts. The CPU-bound runs name their start
/// latencies `cpu_*`, so that the ratio column (which divides the blocking
/// burst's p50) leaves them out, and also count the threads running
/// (`peak_running`, and without tidepool's monitor `peak_running_workers`).
fn run(
    ctx: &RunCtx,
    work: Work,
    make: impl FnOnce() -> Result<System, String>,
) -> Result<Measured, String> {
    let p = SCALES.at(ctx.scale);
    let items = ctx.items_or(p.items);
    let mut m = match work {
        Work::Sleep(share) => {
            let wait = Duration::from_millis(p.sleep_ms);
            let submitted = share.of(items);
            let pace = Pace {
                items: submitted,
                interval: Duration::ZERO,
                limit: time_limit(p, work, items),
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
                limit: time_limit(p, work, items),
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
    // Cold and warm for tidepool and spawn_blocking; the fixed pool and
    // rayon start in waves either way, so their warm runs stand for both
    // (and the palette has no more than seven colours).
    let sleep = [
        TIDEPOOL_SLEEP_COLD,
        TIDEPOOL_SLEEP,
        TOKIO_SLEEP_COLD,
        TOKIO_SLEEP,
        FIXED10_SLEEP,
        RAYON_SLEEP,
    ];
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
    // Zoomed on tidepool's bursts: the fixed pool's and rayon's take seconds.
    let window = super::done(runs)
        .filter(|r| r.spec.id == TIDEPOOL_SLEEP || r.spec.id == TIDEPOOL_SLEEP_COLD)
        .filter_map(|r| r.measured.get("wall_ms"))
        .reduce(f64::max)
        .map(|w| 1.5 * w / 1e3);
    out.extend(
        threads_plot(
            runs,
            &sleep,
            "burst-threads",
            (
                "Threads over time: a burst of blocking items",
                "How fast each pool reaches a thread per blocked item, cold (in a fresh process) and warm, over the first 1.5x of tidepool's longer burst (the fixed pool stays at 10, rayon at one per core).",
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
/// cold and warm; its threads against the items in flight; and its running
/// threads in the CPU-bound burst against its running slots.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let p50 = |id| median(exp, id, "p50_start_ms");
    let states = [
        (
            "cold (the first burst of a fresh process)",
            "cold",
            TIDEPOOL_SLEEP_COLD,
            TOKIO_SLEEP_COLD,
        ),
        (
            "warm (the second burst in a process)",
            "warm",
            TIDEPOOL_SLEEP,
            TOKIO_SLEEP,
        ),
    ];
    let mut parts = Vec::new();
    let mut verdicts = Vec::new();
    for (what, state, ours_id, tokio_id) in states {
        let Some(ours) = p50(ours_id) else {
            continue;
        };
        let mut part = format!("{what}, tidepool's default starts half within {}", ms(ours));
        if let Some(p99) = median(exp, ours_id, "p99_start_ms") {
            let _ = write!(part, " (p99 {})", ms(p99));
        }
        if let Some(t) = p50(tokio_id) {
            let _ = write!(
                part,
                ", tokio's spawn_blocking within {} (tidepool {} of it)",
                ms(t),
                times(ours, t)
            );
            // spawn_blocking starts a thread inside the call, so its items'
            // own latencies are short while the submitter is slowed: the
            // start counted from the burst's first submit says both.
            let since = |id| median(exp, id, "p50_start_since_burst_ms");
            if let (Some(o), Some(s)) = (since(ours_id), since(tokio_id)) {
                let _ = write!(
                    part,
                    "; counted from the burst's first submit, half started within {} on tidepool and {} on spawn_blocking ({} of it)",
                    ms(o),
                    ms(s),
                    times(o, s)
                );
                if let Some(sub) = median(exp, tokio_id, "submit_ms") {
                    let _ = write!(
                        part,
                        ", whose submitter took {} to hand the burst over",
                        ms(sub)
                    );
                }
            }
            verdicts.push(if ours <= t {
                format!("{state}, tidepool starts a burst at least as fast as spawn_blocking")
            } else {
                format!(
                    "{state}, tidepool starts a burst {} slower than spawn_blocking (median)",
                    times(ours, t)
                )
            });
        }
        parts.push(part);
    }
    if parts.is_empty() {
        return None;
    }
    let mut s = format!("Of a burst of blocking items: {}", parts.join("; "));
    for (id, what) in [
        (FIXED10_SLEEP, "a fixed pool of 10"),
        (RAYON_SLEEP, "rayon"),
    ] {
        if let Some(v) = p50(id) {
            let _ = write!(s, "; {what} within {} warm", ms(v));
        }
    }
    // Threads and slots: the warm run's, or the cold one's if only it ran.
    let either = |warm: &str, cold: &str, metric: &str| {
        median(exp, warm, metric).or_else(|| median(exp, cold, metric))
    };
    let items = either(TIDEPOOL_SLEEP, TIDEPOOL_SLEEP_COLD, "items");
    let concurrency = either(TIDEPOOL_SLEEP, TIDEPOOL_SLEEP_COLD, "concurrency")
        .or_else(|| either(TIDEPOOL_CPU, TIDEPOOL_CPU_COLD, "concurrency"));
    let threads = either(TIDEPOOL_SLEEP, TIDEPOOL_SLEEP_COLD, "peak_threads");
    if let (Some(t), Some(n)) = (threads, items) {
        let _ = write!(
            s,
            "; it used {} for {} in flight",
            count(t, "thread", "threads"),
            count(n, "item", "items")
        );
    }
    let running = either(TIDEPOOL_CPU, TIDEPOOL_CPU_COLD, "peak_running_workers");
    if let Some(r) = running {
        let _ = write!(
            s,
            "; of a burst of CPU-bound items at most {} ran at once",
            count(r, "worker", "workers")
        );
        if let Some(c) = concurrency {
            let _ = write!(s, " on its {}", count(c, "slot", "slots"));
        }
        if let Some(all) =
            either(TIDEPOOL_CPU, TIDEPOOL_CPU_COLD, "peak_running").filter(|a| Some(*a) > running)
        {
            let _ = write!(s, " ({} with its monitor)", count(all, "thread", "threads"));
        }
        if let Some(t) = either(TOKIO_CPU, TOKIO_CPU_COLD, "peak_running") {
            let _ = write!(s, " ({t:.0} on spawn_blocking)");
        }
    }
    s.push_str(". Verdict: ");
    if let (Some(t), Some(n), Some(c)) = (threads, items, concurrency) {
        verdicts.push(if t <= n + c {
            "no more threads than items in flight plus slots".to_string()
        } else {
            format!(
                "{}, more than items in flight plus slots ({:.0})",
                count(t, "thread", "threads"),
                n + c
            )
        });
    }
    if let (Some(r), Some(c)) = (running, concurrency) {
        verdicts.push(if r <= c {
            "CPU-bound items do not oversubscribe the cores".to_string()
        } else {
            format!(
                "CPU-bound items ran on {} at once on {}: oversubscribed",
                count(r, "worker", "workers"),
                count(c, "slot", "slots")
            )
        });
    }
    if verdicts.is_empty() {
        verdicts.push("compare with tokio-spawn-blocking-sleep for a verdict".into());
    }
    s.push_str(&verdicts.join("; "));
    s.push('.');
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::testing::{assert_verdict_says, done_run, verdict_of};

    #[test]
    fn every_run_is_measured_cold_and_warm() {
        let (cold, warm): (Vec<&RunSpec>, Vec<&RunSpec>) =
            EXPERIMENT.runs.iter().partition(|r| r.id.contains("cold"));
        assert_eq!(cold.len(), warm.len());
        for w in warm {
            let twin = EXPERIMENT
                .run(&format!("{}-cold", w.id))
                .unwrap_or_else(|| panic!("{} has no cold twin", w.id));
            assert_eq!(twin.system, w.system, "{}", w.id);
            let what = |d: &'static str| d.split_once(": ").map_or(d, |(_, rest)| rest);
            assert_eq!(what(twin.description), what(w.description), "{}", w.id);
            assert!(w.description.starts_with("Warm"), "{}", w.id);
            assert!(twin.description.starts_with("Cold"), "{}", twin.id);
            // Each state is compared with tidepool's run in the same state.
            let base = EXPERIMENT.baseline_of(twin.id);
            assert!(base.ends_with("-cold"), "{} against {base}", twin.id);
        }
    }

    fn result(id: &str, p50: f64) -> RunResult {
        let figures = [
            ("items", 500.0),
            ("p50_start_ms", p50),
            ("p99_start_ms", 3.0 * p50),
            ("peak_threads", 502.0),
            ("concurrency", 2.0),
        ];
        done_run(&EXPERIMENT, id, &figures)
    }

    #[test]
    fn the_verdict_compares_cold_with_cold_and_warm_with_warm() {
        assert_verdict_says(
            &EXPERIMENT,
            vec![
                result(TIDEPOOL_SLEEP_COLD, 4.0),
                result(TIDEPOOL_SLEEP, 0.2),
                result(TOKIO_SLEEP_COLD, 1.0),
                result(TOKIO_SLEEP, 1.0),
            ],
            &[
                "cold (the first burst of a fresh process), tidepool's default starts half within 4.0 ms (p99 12 ms), tokio's spawn_blocking within 1.0 ms (tidepool 4.0x of it)",
                "cold, tidepool starts a burst 4.0x slower than spawn_blocking",
                "warm, tidepool starts a burst at least as fast as spawn_blocking",
                "no more threads than items in flight plus slots",
            ],
        );
        // A warm run alone still has an answer; no tidepool run, none.
        let s = assert_verdict_says(&EXPERIMENT, vec![result(TIDEPOOL_SLEEP, 0.2)], &[]);
        assert!(!s.contains("cold"), "{s}");
        assert_eq!(
            verdict_of(&EXPERIMENT, vec![result(TOKIO_SLEEP, 1.0)]),
            None
        );
    }

    /// [`result`], with the starts counted from the burst's first submit
    /// and the submitter's time.
    fn result_since(id: &str, p50: f64, since: f64, submit: f64) -> RunResult {
        let figures = [
            ("items", 500.0),
            ("p50_start_ms", p50),
            ("p99_start_ms", 3.0 * p50),
            ("p50_start_since_burst_ms", since),
            ("submit_ms", submit),
            ("peak_threads", 502.0),
            ("concurrency", 2.0),
        ];
        done_run(&EXPERIMENT, id, &figures)
    }

    #[test]
    fn the_verdict_also_counts_from_the_bursts_first_submit() {
        let s = assert_verdict_says(
            &EXPERIMENT,
            vec![
                result_since(TIDEPOOL_SLEEP_COLD, 12.0, 12.0, 0.1),
                result_since(TOKIO_SLEEP_COLD, 1.5, 10.0, 15.0),
            ],
            &[
                "counted from the burst's first submit, half started within 12 ms on tidepool and 10 ms on spawn_blocking (1.2x of it), whose submitter took 15 ms to hand the burst over",
            ],
        );
        // Without the figures (runs made before they existed), no such part.
        let s2 = assert_verdict_says(
            &EXPERIMENT,
            vec![
                result(TIDEPOOL_SLEEP_COLD, 12.0),
                result(TOKIO_SLEEP_COLD, 1.5),
            ],
            &[],
        );
        assert!(s.len() > s2.len() && !s2.contains("first submit"), "{s2}");
    }
}

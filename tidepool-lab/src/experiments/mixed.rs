//! The `mixed` experiment. What it runs and shows is said once, in
//! [`EXPERIMENT`]: its `summary` (the command line's help) and its `about`
//! (the report's).

use std::cell::Cell;
use std::hint::black_box;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use tidepool::{Builder, Controller, Pool};

use super::latency::finish;
use super::paced::{measure, ItemProbe, Pace};
use super::per_item_plot;
use crate::aggregate::Measured;
use crate::measure::{Latch, Timeline};
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::report::summary::{median, ms};
use crate::stats::Summary;
use crate::systems::{rayon_pool, tokio_runtime, System};
use crate::work::{calibrated_rounds, fib_rounds};
use std::fmt::Write as _;

/// What the experiment shows.
const ABOUT: &str = "As many CPU-bound tasks as cores, about 2 s each (1 s at --quick \
scale), start first and hold every running slot; meanwhile an item that blocks 50 ms in \
thread::sleep arrives every 20 ms. A pool that only hands out a slot when a worker blocks \
keeps the items waiting until a CPU task ends; the goal is to start them within 10 ms on \
average while the CPU tasks take at most 1.1x their time alone. tokio looks good here \
because its blocking pool is separate from its workers.";

/// tidepool's default pool, the baseline.
pub(crate) const TIDEPOOL: &str = "tidepool";
/// tidepool's fixed pool: no compensation at all.
pub(crate) const TIDEPOOL_FIXED: &str = "tidepool-fixed";

/// How the system of a run is built.
#[derive(Clone, Copy)]
enum Setup {
    /// A tidepool pool from `Pool::builder()` with these settings; tasks and
    /// items through `Pool::spawn_fn`.
    Tidepool(fn(Builder) -> Builder),
    /// tokio's default multi-thread runtime: tasks through `spawn`, items
    /// through `spawn_blocking`.
    Tokio,
    /// rayon's default pool: tasks and items through `ThreadPool::spawn`.
    Rayon,
}

/// A run of this experiment, in one line: id, system, description, setup.
macro_rules! mixed_run {
    ($id:expr, $system:expr, $description:expr, $setup:expr) => {
        RunSpec {
            id: $id,
            system: $system,
            description: $description,
            execute: |ctx| run(ctx, $setup),
        }
    };
}

/// The runs, one line each. A tidepool run is its builder settings, so a
/// pool setting the library gains (the default pool with its quantum off,
/// `|b| b.quantum(None)`) is one more line of this table.
#[rustfmt::skip]
const RUNS: &[RunSpec] = &[
    mixed_run!(TIDEPOOL, "tidepool", "The default pool (Adaptive); tasks and items through Pool::execute.", Setup::Tidepool(|b| b)),
    mixed_run!("tidepool-quantum-off", "tidepool", "The default pool with Builder::quantum(None): queued items wait for a CPU task to end.", Setup::Tidepool(|b| b.quantum(None))),
    mixed_run!(TIDEPOOL_FIXED, "tidepool", "Controller::Fixed with one thread per core: no compensation at all, the floor.", Setup::Tidepool(|b| b.controller(Controller::Fixed))),
    mixed_run!("tokio", "tokio", "Default multi-thread runtime: CPU tasks through spawn, items through spawn_blocking (a separate pool of blocking threads).", Setup::Tokio),
    mixed_run!("rayon", "rayon", "rayon::ThreadPool::spawn on a default pool (one thread per core) for tasks and items.", Setup::Rayon),
];

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "mixed",
    about: ABOUT,
    summary: "Blocking items arriving while CPU-bound tasks hold every slot.",
    question: "Do blocking items start promptly while CPU-bound tasks hold every slot?",
    verdict,
    scale: describe_scale,
    headline: "mean_start_ms",
    baseline: TIDEPOOL,
    baselines: &[],
    headlines: &[],
    runs: RUNS,
    opt_in: &[],
    plots,
    full_only: &["tidepool-quantum-off", TIDEPOOL_FIXED],
    default_repeat: 1,
    rotate: false,
};

/// Counts and durations at a scale.
#[derive(Debug, Clone, Copy)]
struct Params {
    /// CPU time of one task alone.
    task_ms: u64,
    /// Time between item arrivals.
    every_ms: u64,
    /// How long an item blocks.
    block_ms: u64,
}

/// The experiment's size at each scale.
const SCALES: ScaleTable<Params> = ScaleTable {
    full: Params {
        task_ms: 2000,
        every_ms: 20,
        block_ms: 50,
    },
    quick: Params {
        task_ms: 1000,
        every_ms: 20,
        block_ms: 50,
    },
    tiny: Params {
        task_ms: 60,
        every_ms: 5,
        block_ms: 5,
    },
};

fn describe_scale(scale: Scale) -> String {
    let p = SCALES.at(scale);
    format!(
        "a task of about {} s per core; an item blocking {} ms every {} ms",
        p.task_ms as f64 / 1e3,
        p.block_ms,
        p.every_ms
    )
}

fn build(setup: Setup) -> Result<System, String> {
    match setup {
        Setup::Tidepool(configure) => configure(Pool::builder())
            .build()
            .map(System::Tidepool)
            .map_err(|e| format!("tidepool build failed: {e}")),
        Setup::Tokio => tokio_runtime().map(System::Tokio),
        Setup::Rayon => rayon_pool(None).map(System::Rayon),
    }
}

/// Times one task alone, then starts one per core on the system and, while
/// they run, submits the blocking items; measures when the items start and
/// how long the tasks take.
///
/// # Errors
///
/// When the system cannot be built or the tasks or items do not finish.
fn run(ctx: &RunCtx, setup: Setup) -> Result<Measured, String> {
    let p = SCALES.at(ctx.scale);
    let tasks = ctx.cores;
    let task = Duration::from_millis(p.task_ms);
    let every = Duration::from_millis(p.every_ms);
    let block = Duration::from_millis(p.block_ms);
    // Items arrive for as long as the tasks run alone.
    let items = ctx.items_or(usize::try_from(p.task_ms / p.every_ms).unwrap_or(1).max(1));
    ctx.bar.phase("calibrating");
    let rounds = calibrated_rounds(task);
    // A task alone, measured now, on the lab's own thread.
    let t = Instant::now();
    black_box(fib_rounds(rounds));
    let alone = t.elapsed();

    let cpu = Arc::new(Timeline::new(tasks));
    let cpu_done = Arc::new(Latch::new(tasks));
    let cpu_limit = alone * u32::try_from(tasks * 4).unwrap_or(u32::MAX) + Duration::from_secs(60);
    let pace = Pace {
        items,
        interval: every,
        limit: cpu_limit + block * u32::try_from(items).unwrap_or(u32::MAX),
    };
    let cpu_finished = Cell::new(false);
    let mut m = measure(
        ctx,
        pace,
        || {
            let sys = build(setup)?;
            for i in 0..tasks {
                let (tl, latch) = (cpu.clone(), cpu_done.clone());
                cpu.submit(i);
                sys.spawn_fn(move || {
                    tl.start(i);
                    black_box(fib_rounds(rounds));
                    tl.end(i);
                    latch.count_down();
                });
            }
            // The tasks hold every slot before the first item arrives.
            let deadline = Instant::now() + Duration::from_secs(10);
            while cpu.started_count() < tasks && Instant::now() < deadline {
                thread::sleep(Duration::from_micros(200));
            }
            Ok(sys)
        },
        |sys: &System, probe: ItemProbe| {
            let item = move || {
                probe.start();
                thread::sleep(block);
                probe.end();
            };
            match sys {
                System::Tokio(rt) => drop(rt.spawn_blocking(item)),
                other => other.spawn_fn(item),
            }
        },
        |sys| {
            cpu_finished.set(cpu_done.wait_timeout(cpu_limit));
            finish(sys)
        },
    )?;
    if !cpu_finished.get() {
        return Err(format!(
            "only {} of {tasks} CPU tasks finished",
            cpu_done.finished()
        ));
    }
    let durations = cpu.durations_s();
    let s = Summary::of(&durations).ok_or("no CPU task recorded its duration")?;
    let alone_s = alone.as_secs_f64();
    m.put("cpu_tasks", tasks as f64);
    m.put("single_task_s", alone_s);
    m.put("mean_task_s", s.mean);
    m.put("cpu_slowdown", s.mean / alone_s);
    m.note = Some(format!(
        "{tasks} CPU tasks of {alone_s:.2} s alone; {items} items blocking {} ms, one every {} ms. cpu_slowdown is the tasks' mean duration over a task's time alone.",
        p.block_ms, p.every_ms
    ));
    Ok(m)
}

/// Start latency by item, every run.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let ids: Vec<&str> = runs.iter().map(|r| r.spec.id).collect();
    per_item_plot(
        runs,
        &ids,
        "mixed-start-latency",
        (
            "Start latency of blocking items while CPU-bound tasks hold every slot",
            "Items arrive in order while the CPU tasks run: a line falling from the tasks' length toward zero means each item waited for a CPU task to end; a flat line near the bottom means items started at once.",
        ),
        "item (arrival order)",
        "submit-to-start latency, ms (log)",
        true,
    )
    .into_iter()
    .collect()
}

/// The summary's answer: the items' mean start and the CPU tasks'
/// slowdown on tidepool's default, against the goals and the other pools.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let start = |id| median(exp, id, "mean_start_ms");
    let ours = start(TIDEPOOL)?;
    let slowdown = median(exp, TIDEPOOL, "cpu_slowdown");
    let mut s = format!(
        "While CPU-bound tasks hold every slot, tidepool's default starts an arriving blocking item after {} on average (goal: under 10 ms)",
        ms(ours)
    );
    if let Some(x) = slowdown {
        let _ = write!(
            s,
            " and the tasks take {x:.2}x their time alone (goal: at most 1.1x)"
        );
    }
    for (id, what) in [
        (TIDEPOOL_FIXED, "a fixed pool"),
        ("tokio", "tokio's separate blocking pool"),
        ("rayon", "rayon"),
    ] {
        if let Some(v) = start(id) {
            let _ = write!(s, "; {what} {}", ms(v));
            if let Some(x) = median(exp, id, "cpu_slowdown") {
                let _ = write!(s, " ({x:.2}x)");
            }
        }
    }
    s.push_str(". Verdict: ");
    let latency_ok = ours < 10.0;
    let cpu_ok = slowdown.is_none_or(|x| x <= 1.1);
    s.push_str(match (latency_ok, cpu_ok) {
        (true, true) => "tidepool meets both goals.",
        (true, false) => "items start promptly, but the CPU tasks slow down more than 10%.",
        (false, true) => {
            "the CPU tasks keep their pace, but arriving items wait for a slot: tidepool misses the start-latency goal."
        }
        (false, false) => "tidepool misses both goals.",
    });
    Some(s)
}

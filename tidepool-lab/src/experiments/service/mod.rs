//! The `service` experiment. What it runs and shows is said once, in
//! [`EXPERIMENT`]: its `summary` (the command line's help) and its `about`
//! (the report's).
//! The rest of this description, the service's details, is here only.
//!
//! # The service
//!
//! An axum 0.8 router with one handler, `GET /item/{id}` (`app.rs`), which
//! does what a typical handler does, in this order:
//!
//! 1. A blocking database call: an aggregate query (per category, over a
//!    range of 6,000 ids of the integer primary key) on a SQLite file of
//!    20,000 rows that the lab makes in a temporary folder at the start of
//!    each run (rusqlite, SQLite compiled in), on a read-only connection
//!    each thread opens on first use and keeps in a thread-local; then
//!    5 ms of `std::thread::sleep`, standing for a database server's round
//!    trip. Plain blocking code, inline in the handler, except where a
//!    system says otherwise.
//! 2. About 1 ms of CPU: the query's rows serialised with serde_json, then
//!    hashed over and over.
//! 3. An outbound HTTP/1.1 call through hyper-util's legacy `Client` to an
//!    upstream that answers after 20 ms without holding a thread.
//!
//! It answers with a small JSON body. The query's range and the hash's
//! rounds are constants, calibrated once so the query takes about 1.2 ms
//! and the CPU part about 1 ms on the project machine (`app.rs`'s ignored
//! `calibration` test measures them again); every run's description says
//! what they took in the lab's process that run.
//!
//! # Systems
//!
//! One run per system, its id the system's ([`ServeSystem`]): tidepool's
//! recommended way (`tidepool::http::serve`, the database call inline, the
//! client on `tidepool::http::Executor`), the same with the call in
//! `tidepool::blocking`, or in `tidepool::spawn_fn` awaited (the shape of
//! tokio's `spawn_blocking`), `axum::serve` inside `tidepool::block_on` with
//! hyper-util's `TokioExecutor` (what a new user writes), and tokio's
//! default multi-thread runtime with `axum::serve`, the call in
//! `spawn_blocking` (the baseline) or inline.
//!
//! # A run
//!
//! One run is one round of one system (`load.rs`). The lab starts the
//! upstream on a tokio runtime of its own (one worker) in its process,
//! then the server: its own binary again, as `tidepool-lab serve-system
//! <run id> --db <file> --upstream <addr>`, which prints its port and serves
//! until its standard input closes. The load generator, a hyper HTTP/1.1
//! client with keep-alive on another one-worker runtime in the lab's
//! process, then runs two phases, each a warm-up and a measured window:
//!
//! - `fixed`: an open loop of 200 requests/s over 50 connections. Each
//!   request is due at its time whatever came before and its latency runs
//!   from then, so a server that falls behind is charged for the queue
//!   (no coordinated omission).
//! - `overload`: a closed loop, 200 connections sending back to back.
//!
//! A request not answered within 10 s is given up and counted as an error,
//! as is any answer but a success. After the window, the requests in
//! flight are waited for, so every request due (or sent) in the window is
//! either timed or counted as an error.
//!
//! Figures per phase, each name starting with `fixed_` or `overload_`:
//! `requests_per_s` (answers that arrived in the window over its length),
//! `p50_ms`, `p99_ms`, `max_ms` (hdrhistogram, three significant digits),
//! `errors`, `peak_threads` (the server process's `Threads:` in
//! `/proc/<pid>/status`, read every 10 ms through the phase; it counts the
//! process's main thread and the thread that reads its standard input),
//! `cpu_ms_per_request` (the server process's user + system CPU time in the
//! window, from `/proc/<pid>/stat`, over the answers in the window). A
//! tidepool server is also asked for its global pool's `Metrics` at each
//! phase's end: `pool_start_max_ms` (`start_latency.max` since the process
//! started), and the growth during the phase of `tokio_blocked`,
//! `blocked_detections`, `counted_again` (`workers_counted_again`) and
//! `held` (`workers_held`): what the pool did per blocking call. The server
//! process builds tidepool's global pool as it starts, so that asking does
//! not start threads in the middle of a run.
//!
//! # Rounds
//!
//! A round is a repetition of the lab (`--repeat`; 5 by default at full
//! scale, 1 at `--quick`), each run a fresh server process, and the rounds
//! rotate ([`Experiment::rotate`]): each starts one system later than the
//! one before. Every figure is the median over the rounds with its spread,
//! as in the other experiments. `--items N` makes each window N / 200
//! seconds long (N requests in the fixed phase).

mod app;
mod load;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use clap::ValueEnum;

use super::metric_bars;
use crate::aggregate::Measured;
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::report::summary::{count, figure, ms, times};
use crate::report::table::group_digits;
use load::{Load, PhaseResult, PoolFigures, ServerProcess, Upstream};

pub use app::serve;

/// The hidden subcommand that starts one of the `service` experiment's
/// server processes (the lab starts them; not for people).
pub const SERVE_SYSTEM: &str = "serve-system";

/// `tidepool-lab serve-system`: serves the `service` experiment's service
/// on one system, in this process, for the lab that started it.
#[derive(Debug, Clone, PartialEq, Eq, clap::Parser)]
#[command(name = "tidepool-lab serve-system")]
pub struct ServeArgs {
    /// The system, by its run id.
    #[arg(value_enum)]
    pub system: ServeSystem,
    /// The SQLite file the lab made.
    #[arg(long, value_name = "FILE")]
    pub db: PathBuf,
    /// The upstream the handler calls.
    #[arg(long, value_name = "ADDR")]
    pub upstream: std::net::SocketAddr,
}

/// The systems the service runs on, one server process each; their
/// command-line names are the run ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum ServeSystem {
    /// `tidepool::http::serve`, the database call inline.
    TidepoolServe,
    /// `tidepool::http::serve`, the database call in `tidepool::blocking`.
    TidepoolServeBlocking,
    /// `tidepool::http::serve`, the database call in `tidepool::spawn_fn`,
    /// its handle awaited.
    TidepoolServeSpawnFn,
    /// `axum::serve` inside `tidepool::block_on`, the database call inline.
    TidepoolAxumServe,
    /// `axum::serve` on tokio, the database call in `spawn_blocking`.
    TokioSpawnBlocking,
    /// `axum::serve` on tokio, the database call inline.
    TokioInline,
}

impl ServeSystem {
    /// Its run id.
    pub fn id(self) -> &'static str {
        match self {
            ServeSystem::TidepoolServe => TIDEPOOL_SERVE,
            ServeSystem::TidepoolServeBlocking => TIDEPOOL_SERVE_BLOCKING,
            ServeSystem::TidepoolServeSpawnFn => TIDEPOOL_SERVE_SPAWN_FN,
            ServeSystem::TidepoolAxumServe => TIDEPOOL_AXUM_SERVE,
            ServeSystem::TokioSpawnBlocking => TOKIO_SPAWN_BLOCKING,
            ServeSystem::TokioInline => TOKIO_INLINE,
        }
    }

    /// Whether it runs on tidepool (and so has a pool to report on).
    pub fn is_tidepool(self) -> bool {
        matches!(
            self,
            ServeSystem::TidepoolServe
                | ServeSystem::TidepoolServeBlocking
                | ServeSystem::TidepoolServeSpawnFn
                | ServeSystem::TidepoolAxumServe
        )
    }
}

/// tidepool's recommended way.
const TIDEPOOL_SERVE: &str = "tidepool-serve";
/// The same, the call declared blocking.
const TIDEPOOL_SERVE_BLOCKING: &str = "tidepool-serve-blocking";
/// The same, the call handed to a closure of its own and awaited.
const TIDEPOOL_SERVE_SPAWN_FN: &str = "tidepool-serve-spawn-fn";
/// `axum::serve` on tidepool.
const TIDEPOOL_AXUM_SERVE: &str = "tidepool-axum-serve";
/// tokio with `spawn_blocking`: the baseline.
const TOKIO_SPAWN_BLOCKING: &str = "tokio-spawn-blocking";
/// tokio with the call inline.
const TOKIO_INLINE: &str = "tokio-inline";

/// What the experiment shows.
const ABOUT: &str = "An axum web service whose handler makes a blocking SQLite call (a query \
of about 1.2 ms, then 5 ms standing for the database server's round trip), does about 1 ms of \
CPU work and calls an upstream that answers after 20 ms; each system serves it in a process of \
its own. The lab's load generator sends 200 requests/s over 50 connections, latency counted from \
each request's due time, then overloads it with 200 connections sending back to back, and reads \
the server's threads and CPU time from /proc.";

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "service",
    about: ABOUT,
    summary: "An axum service (a database call, CPU, an outbound call) under load, each system in \
a server process of its own.",
    question: "Does a blocking axum handler on tidepool serve as well as tokio with spawn_blocking?",
    verdict,
    scale: describe_scale,
    headline: "fixed_p99_ms",
    baseline: TOKIO_SPAWN_BLOCKING,
    baselines: &[],
    headlines: &[],
    runs: &[
        RunSpec {
            id: TIDEPOOL_SERVE,
            system: "tidepool",
            description: "tidepool::http::serve inside tidepool::block_on, the database call inline (plain blocking code), the outbound client on tidepool::http::Executor::current(): the recommended way.",
            execute: |ctx| run(ctx, ServeSystem::TidepoolServe),
        },
        RunSpec {
            id: TIDEPOOL_SERVE_BLOCKING,
            system: "tidepool",
            description: "As tidepool-serve, the database call inside tidepool::blocking.",
            execute: |ctx| run(ctx, ServeSystem::TidepoolServeBlocking),
        },
        RunSpec {
            id: TIDEPOOL_SERVE_SPAWN_FN,
            system: "tidepool",
            description: "As tidepool-serve, the database call in tidepool::spawn_fn, its handle awaited (tokio's spawn_blocking shape: the handler's worker runs other tasks meanwhile).",
            execute: |ctx| run(ctx, ServeSystem::TidepoolServeSpawnFn),
        },
        RunSpec {
            id: TIDEPOOL_AXUM_SERVE,
            system: "tidepool",
            description: "axum::serve inside tidepool::block_on, the database call inline, the outbound client on hyper-util's TokioExecutor: what a new user writes.",
            execute: |ctx| run(ctx, ServeSystem::TidepoolAxumServe),
        },
        RunSpec {
            id: TOKIO_SPAWN_BLOCKING,
            system: "tokio",
            description: "axum::serve on tokio's default multi-thread runtime (a worker per core), the database call in tokio::task::spawn_blocking.",
            execute: |ctx| run(ctx, ServeSystem::TokioSpawnBlocking),
        },
        RunSpec {
            id: TOKIO_INLINE,
            system: "tokio",
            description: "axum::serve on tokio's default multi-thread runtime, the database call inline.",
            execute: |ctx| run(ctx, ServeSystem::TokioInline),
        },
    ],
    opt_in: &[],
    plots,
    full_only: &[TIDEPOOL_SERVE_BLOCKING, TIDEPOOL_SERVE_SPAWN_FN],
    default_repeat: 5,
    rotate: true,
};

/// Requests per second of the fixed phase.
const FIXED_RATE: f64 = 200.0;
/// Connections of the fixed phase.
const FIXED_CONNECTIONS: usize = 50;
/// Connections of the overload phase.
const OVERLOAD_CONNECTIONS: usize = 200;

/// Durations at a scale.
#[derive(Debug, Clone, Copy)]
struct Params {
    /// Load before each phase's window.
    warmup_ms: u64,
    /// Each phase's measured window.
    window_ms: u64,
}

/// The experiment's size at each scale.
const SCALES: ScaleTable<Params> = ScaleTable {
    full: Params {
        warmup_ms: 1_000,
        window_ms: 5_000,
    },
    quick: Params {
        warmup_ms: 500,
        window_ms: 2_000,
    },
    tiny: Params {
        warmup_ms: 100,
        window_ms: 300,
    },
};

fn describe_scale(scale: Scale) -> String {
    let p = SCALES.at(scale);
    format!(
        "{FIXED_RATE} requests/s over {FIXED_CONNECTIONS} connections, then \
         {OVERLOAD_CONNECTIONS} connections back to back; each phase {} s after a {} s warm-up",
        p.window_ms as f64 / 1e3,
        p.warmup_ms as f64 / 1e3
    )
}

/// The metric names of a phase.
#[derive(Debug)]
struct PhaseNames {
    requests_per_s: &'static str,
    p50: &'static str,
    p99: &'static str,
    max: &'static str,
    errors: &'static str,
    peak_threads: &'static str,
    cpu: &'static str,
    pool_start_max: &'static str,
    tokio_blocked: &'static str,
    blocked_detections: &'static str,
    counted_again: &'static str,
    held: &'static str,
}

/// The fixed-rate phase's metrics.
const FIXED: PhaseNames = PhaseNames {
    requests_per_s: "fixed_requests_per_s",
    p50: "fixed_p50_ms",
    p99: "fixed_p99_ms",
    max: "fixed_max_ms",
    errors: "fixed_errors",
    peak_threads: "fixed_peak_threads",
    cpu: "fixed_cpu_ms_per_request",
    pool_start_max: "fixed_pool_start_max_ms",
    tokio_blocked: "fixed_tokio_blocked",
    blocked_detections: "fixed_blocked_detections",
    counted_again: "fixed_counted_again",
    held: "fixed_held",
};

/// The overload phase's metrics.
const OVERLOAD: PhaseNames = PhaseNames {
    requests_per_s: "overload_requests_per_s",
    p50: "overload_p50_ms",
    p99: "overload_p99_ms",
    max: "overload_max_ms",
    errors: "overload_errors",
    peak_threads: "overload_peak_threads",
    cpu: "overload_cpu_ms_per_request",
    pool_start_max: "overload_pool_start_max_ms",
    tokio_blocked: "overload_tokio_blocked",
    blocked_detections: "overload_blocked_detections",
    counted_again: "overload_counted_again",
    held: "overload_held",
};

/// A temporary folder, removed when dropped.
#[derive(Debug)]
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, String> {
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "tidepool-lab-service-{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("temporary folder {}: {e}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the query and the CPU part took in this process (ms), measured
/// once, on the first run's database.
fn work_times(db: &Path) -> Option<(f64, f64)> {
    static TIMES: OnceLock<Option<(f64, f64)>> = OnceLock::new();
    *TIMES.get_or_init(|| app::time_the_work(db, 30).ok())
}

/// Everything one round of a system measured.
#[derive(Debug)]
struct Round {
    fixed: PhaseResult,
    overload: PhaseResult,
    /// The pool's figures after each phase (tidepool systems).
    pool: Option<(PoolFigures, PoolFigures)>,
}

/// One round of `system`: a database, the upstream, the server process and
/// the two phases.
///
/// # Errors
///
/// When something cannot be set up, or the server process fails. Failed
/// requests are counted, not returned.
fn run(ctx: &RunCtx, system: ServeSystem) -> Result<Measured, String> {
    let p = SCALES.at(ctx.scale);
    let warmup = Duration::from_millis(p.warmup_ms);
    let window = ctx.items.map_or(Duration::from_millis(p.window_ms), |n| {
        Duration::from_secs_f64(n as f64 / FIXED_RATE)
    });
    ctx.bar.phase("making the database");
    let scratch = Scratch::new()?;
    let db = scratch.0.join("items.sqlite");
    app::create_database(&db)?;
    let work = work_times(&db);
    let upstream = Upstream::start()?;
    let rt = load::load_runtime()?;
    let round = serve_and_load(ctx, system, &db, &upstream, &rt, (warmup, window));
    rt.shutdown_timeout(Duration::from_secs(5));
    upstream.stop();
    drop(scratch);
    let round = round?;

    let mut m = Measured::default();
    put_phase(&mut m, &FIXED, &round.fixed);
    if let Some((after_fixed, _)) = round.pool {
        put_pool(&mut m, &FIXED, &after_fixed, None);
    }
    put_phase(&mut m, &OVERLOAD, &round.overload);
    if let Some((after_fixed, after_overload)) = round.pool {
        put_pool(&mut m, &OVERLOAD, &after_overload, Some(&after_fixed));
    }
    let mut note = format!(
        "Windows of {} s after {} s warm-ups.",
        window.as_secs_f64(),
        warmup.as_secs_f64()
    );
    if let Some((query_ms, cpu_ms)) = work {
        let _ = write!(
            note,
            " The query took {query_ms:.2} ms and the CPU part {cpu_ms:.2} ms in the lab's process."
        );
    }
    m.note = Some(note);
    Ok(m)
}

/// The pool's figures at a phase's end: its start latency's max so far,
/// and how much each count grew during the phase (since `before`, the
/// figures at the end of the phase before; `None`: since the start).
fn put_pool(
    m: &mut Measured,
    names: &PhaseNames,
    after: &PoolFigures,
    before: Option<&PoolFigures>,
) {
    let grew = |count: fn(&PoolFigures) -> f64| count(after) - before.map_or(0.0, count);
    m.put(names.pool_start_max, after.start_latency_max_ms);
    m.put(names.tokio_blocked, grew(|f| f.tokio_blocked));
    m.put(names.blocked_detections, grew(|f| f.blocked_detections));
    m.put(names.counted_again, grew(|f| f.counted_again));
    m.put(names.held, grew(|f| f.held));
}

/// Starts the server process and runs both phases against it.
fn serve_and_load(
    ctx: &RunCtx,
    system: ServeSystem,
    db: &Path,
    upstream: &Upstream,
    rt: &tokio::runtime::Runtime,
    (warmup, window): (Duration, Duration),
) -> Result<Round, String> {
    ctx.bar.phase("starting the server");
    let mut server = ServerProcess::start(system, db, upstream.addr)?;
    let pool = |server: &mut ServerProcess| {
        system
            .is_tidepool()
            .then(|| server.pool_figures())
            .transpose()
    };
    ctx.bar.phase("fixed rate");
    let fixed = load::run_phase(
        rt,
        &server,
        Load {
            connections: FIXED_CONNECTIONS,
            rate: Some(FIXED_RATE),
            warmup,
            window,
        },
    )?;
    let after_fixed = pool(&mut server)?;
    ctx.bar.phase("overload");
    let overload = load::run_phase(
        rt,
        &server,
        Load {
            connections: OVERLOAD_CONNECTIONS,
            rate: None,
            warmup,
            window,
        },
    )?;
    let after_overload = pool(&mut server)?;
    server.finish()?;
    Ok(Round {
        fixed,
        overload,
        pool: after_fixed.zip(after_overload),
    })
}

/// A phase's figures, under its names. Latencies are left out when no
/// request was answered, CPU time when `/proc` could not be read.
fn put_phase(m: &mut Measured, names: &PhaseNames, r: &PhaseResult) {
    m.put(names.requests_per_s, r.served as f64 / r.window_s);
    let h = &r.latency_us;
    if !h.is_empty() {
        m.put(names.p50, h.value_at_quantile(0.5) as f64 / 1e3);
        m.put(names.p99, h.value_at_quantile(0.99) as f64 / 1e3);
        m.put(names.max, h.max() as f64 / 1e3);
    }
    m.put(names.errors, r.errors as f64);
    if let Some(t) = r.peak_threads {
        m.put(names.peak_threads, t as f64);
    }
    if let (Some(cpu), true) = (r.cpu_ms, r.served > 0) {
        m.put(names.cpu, cpu / r.served as f64);
    }
}

/// Bars of the figures the summary compares.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    vec![
        Plot::bars(
            "service-fixed-p99",
            (
                "p99 latency at 200 requests/s",
                "Lower is better: the slowest 1% of requests at a rate every system can serve, from each request's due time.",
            ),
            "p99 latency, ms",
            metric_bars(runs, FIXED.p99),
        ),
        Plot::bars(
            "service-overload-throughput",
            (
                "Requests per second when overloaded",
                "Higher is better: 200 connections sending back to back.",
            ),
            "requests per second",
            metric_bars(runs, OVERLOAD.requests_per_s),
        ),
        Plot::bars(
            "service-overload-p99",
            (
                "p99 latency when overloaded",
                "Lower is better: the slowest 1% of requests of 200 connections sending back to back.",
            ),
            "p99 latency, ms",
            metric_bars(runs, OVERLOAD.p99),
        ),
        Plot::bars(
            "service-overload-threads",
            (
                "Server threads when overloaded",
                "The most threads the server process had at once.",
            ),
            "peak threads",
            metric_bars(runs, OVERLOAD.peak_threads),
        ),
    ]
}

/// The figures the summary compares, of one run (medians). The overload
/// phase's latencies are missing when no request sent in its window was
/// answered (a server so far behind that the requests of the warm-up still
/// held every connection).
#[derive(Debug, Clone, Copy)]
struct Compared {
    fixed_p99: f64,
    requests_per_s: f64,
    p99: Option<f64>,
    max: Option<f64>,
    cpu: Option<f64>,
    errors: f64,
    threads: Option<f64>,
}

impl Compared {
    fn of(exp: &ExperimentResult, id: &str) -> Option<Compared> {
        let get = |metric| figure(exp, id, metric).map(|f| f.0);
        Some(Compared {
            fixed_p99: get(FIXED.p99)?,
            requests_per_s: get(OVERLOAD.requests_per_s)?,
            p99: get(OVERLOAD.p99),
            max: get(OVERLOAD.max),
            cpu: get(OVERLOAD.cpu),
            errors: get(FIXED.errors)? + get(OVERLOAD.errors)?,
            threads: get(OVERLOAD.peak_threads),
        })
    }

    /// Where this run falls short of `base`: p99 at the fixed rate above
    /// 1.25x, throughput when overloaded below 0.9x, or more errors.
    fn shortfalls(&self, base: &Compared) -> Vec<String> {
        let mut out = Vec::new();
        if self.fixed_p99 > 1.25 * base.fixed_p99 {
            out.push(format!(
                "p99 at 200 requests/s {}",
                times(self.fixed_p99, base.fixed_p99)
            ));
        }
        if self.requests_per_s < 0.9 * base.requests_per_s {
            out.push(format!(
                "throughput when overloaded {}",
                times(self.requests_per_s, base.requests_per_s)
            ));
        }
        if self.errors > base.errors {
            out.push(count(self.errors, "error", "errors"));
        }
        out
    }
}

/// A count of threads, or `- threads`.
fn threads(v: Option<f64>) -> String {
    v.map_or("- threads".into(), |v| count(v, "thread", "threads"))
}

/// A duration in milliseconds, or `-`.
fn some_ms(v: Option<f64>) -> String {
    v.map_or("-".into(), ms)
}

/// How many times `a` is `b`, or `-` when either is missing.
fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    a.zip(b).map_or("-".into(), |(a, b)| times(a, b))
}

/// The summary's answer: tidepool-serve and tidepool-axum-serve against
/// tokio with spawn_blocking.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let base = Compared::of(exp, TOKIO_SPAWN_BLOCKING)?;
    let mut s = format!(
        "tokio with spawn_blocking: p99 {} at 200 requests/s; overloaded, {} requests/s, p99 {}, \
         max {}, {} CPU per request, {}, {}",
        ms(base.fixed_p99),
        group_digits(base.requests_per_s),
        some_ms(base.p99),
        some_ms(base.max),
        some_ms(base.cpu),
        count(base.errors, "error", "errors"),
        threads(base.threads)
    );
    let contenders = [
        (TIDEPOOL_SERVE, "tidepool::http::serve"),
        (TIDEPOOL_AXUM_SERVE, "axum::serve on tidepool"),
    ];
    let mut judged = Vec::new();
    for (id, name) in contenders {
        let Some(c) = Compared::of(exp, id) else {
            continue;
        };
        let _ = write!(
            s,
            "; {name}: p99 {} at 200 requests/s; overloaded, {} the throughput, p99 {}, max {}, \
             CPU per request {}, {}, {}",
            times(c.fixed_p99, base.fixed_p99),
            times(c.requests_per_s, base.requests_per_s),
            ratio(c.p99, base.p99),
            ratio(c.max, base.max),
            ratio(c.cpu, base.cpu),
            count(c.errors, "error", "errors"),
            threads(c.threads)
        );
        judged.push((name, c.shortfalls(&base)));
    }
    if judged.is_empty() {
        return None;
    }
    s.push_str(". Verdict: ");
    let verdicts: Vec<String> = judged
        .iter()
        .map(|(name, short)| {
            if short.is_empty() {
                format!("{name} with a blocking handler matches tokio with spawn_blocking")
            } else {
                format!("{name} falls short ({})", short.join(", "))
            }
        })
        .collect();
    s.push_str(&verdicts.join("; "));
    s.push_str(
        " (the goal: p99 within 1.25x at 200 requests/s, at least 0.9x the throughput when \
         overloaded, no more errors).",
    );
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::testing::{assert_verdict_says, done_run, verdict_of};

    #[test]
    fn every_system_is_a_run_under_the_same_name() {
        assert_eq!(ServeSystem::value_variants().len(), EXPERIMENT.runs.len());
        for s in ServeSystem::value_variants() {
            let name = s.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(name, s.id(), "the server process is started by run id");
            let run = EXPERIMENT.run(s.id()).unwrap();
            assert_eq!(run.system == "tidepool", s.is_tidepool(), "{name}");
        }
    }

    fn result(id: &str, fixed_p99: f64, rps: f64, errors: f64) -> RunResult {
        let figures = [
            (FIXED.p99, fixed_p99),
            (FIXED.errors, 0.0),
            (OVERLOAD.requests_per_s, rps),
            (OVERLOAD.p99, 300.0),
            (OVERLOAD.max, 900.0),
            (OVERLOAD.errors, errors),
            (OVERLOAD.cpu, 2.5),
            (OVERLOAD.peak_threads, 40.0),
        ];
        done_run(&EXPERIMENT, id, &figures)
    }

    #[test]
    fn the_verdict_compares_with_spawn_blocking() {
        assert_verdict_says(
            &EXPERIMENT,
            vec![
                result(TIDEPOOL_SERVE, 30.0, 800.0, 0.0),
                result(TIDEPOOL_AXUM_SERVE, 60.0, 500.0, 3.0),
                result(TOKIO_SPAWN_BLOCKING, 28.0, 820.0, 0.0),
            ],
            &[
                "tidepool::http::serve: p99 1.1x",
                "tidepool::http::serve with a blocking handler matches",
                "axum::serve on tidepool falls short (p99 at 200 requests/s 2.1x, \
                 throughput when overloaded 0.6x, 3 errors)",
                "Verdict: ",
            ],
        );
        assert_eq!(
            verdict_of(&EXPERIMENT, vec![result(TIDEPOOL_SERVE, 30.0, 800.0, 0.0)]),
            None,
            "no baseline, no verdict"
        );
        // A baseline so far behind that no request sent in the overload
        // window was answered.
        let mut behind = result(TOKIO_SPAWN_BLOCKING, 28.0, 820.0, 0.0);
        behind
            .measured
            .metrics
            .retain(|(n, _)| *n != OVERLOAD.p99 && *n != OVERLOAD.max);
        assert_verdict_says(
            &EXPERIMENT,
            vec![result(TIDEPOOL_SERVE, 30.0, 800.0, 0.0), behind],
            &[
                "overloaded, 820 requests/s, p99 -, max -",
                "1.0x the throughput, p99 -, max -",
            ],
        );
    }
}

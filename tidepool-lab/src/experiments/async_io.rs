//! The `async-io` experiment. What it runs and shows is said once, in
//! [`EXPERIMENT`]: its `summary` (the command line's help) and its `about`
//! (the report's).
//!
//! The second workload, the connect burst of issue #40, is in
//! `connect_burst.rs`. Its figure, `mean_start_ms`, is its workload's
//! headline in `headlines`, not the echo's `ns_per_round_trip`; its rows
//! are compared with tidepool's one-slot row, and run by default (about a
//! second each).

mod connect_burst;

use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::metric_bars;
use crate::aggregate::Measured;
use crate::measure::Latch;
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::probe::CpuTimes;
use crate::report::summary::{count, figure, ms};
use crate::report::table::group_digits;
use crate::stats::Summary;
use crate::systems::{shutdown_pool, tokio_runtime, TidepoolConfig};
use connect_burst::{TIDEPOOL_1SLOT, TOKIO_CURRENT_THREAD};

/// What the experiment shows.
const ABOUT: &str = "An echo server and its clients on the loopback interface, all async tasks \
on the system under test: 1,000 connections make 100,000 round trips of 64 bytes, each client \
waiting for its echo before it sends again. tidepool's own sockets use its reactor, which keeps \
readiness and is polled by the workers while they are busy, as tokio's workers poll theirs; \
tokio's sockets on tidepool (the `tokio` feature) are woken by a reactor on its own thread, one \
thread hop per event. async-executor with its threads parked in async_io::block_on (async-io's \
reactor, as in smol) is a reference. A second workload, a connect burst: 2,000 tasks spawned at \
once on one slot, each opening a loopback connection, sending one byte and reading its echo, on \
a one-slot tidepool pool with its own sockets and on tokio's current-thread runtime; its figure \
is the tasks' mean start latency, from spawn to first poll.";

/// tidepool `Async` sockets on the default pool: the baseline.
pub(crate) const TIDEPOOL_ASYNC: &str = "tidepool-async";
/// tokio sockets in tidepool tasks, through the `tokio` feature.
pub(crate) const TIDEPOOL_TOKIO: &str = "tidepool-tokio-net";
/// tokio sockets on tokio's multi-thread runtime.
pub(crate) const TOKIO: &str = "tokio";
/// async-io sockets on async-executor, threads parked in the reactor.
pub(crate) const EXECUTOR: &str = "async-executor";

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "async-io",
    about: ABOUT,
    summary: "An echo server and 1,000 clients over loopback sockets.",
    question: "Are tidepool's sockets as fast as tokio's, and do 2,000 connecting tasks on one slot start as soon as on tokio's current-thread runtime?",
    verdict,
    scale: describe_scale,
    headline: "ns_per_round_trip",
    baseline: TIDEPOOL_ASYNC,
    baselines: &[
        (TIDEPOOL_1SLOT, TIDEPOOL_1SLOT),
        (TOKIO_CURRENT_THREAD, TIDEPOOL_1SLOT),
    ],
    headlines: &[(TIDEPOOL_1SLOT, connect_burst::MEAN_START)],
    runs: &[
        RunSpec {
            id: TIDEPOOL_ASYNC,
            system: "tidepool",
            description: "Server and clients over tidepool::Async<TcpStream> in tasks on the default pool (tidepool's reactor: readiness kept, polled by busy workers).",
            execute: |ctx| run(ctx, Sys::TidepoolAsync),
        },
        RunSpec {
            id: TIDEPOOL_TOKIO,
            system: "tidepool",
            description: "Server and clients over tokio::net::TcpStream in tasks on the default pool, through tidepool's `tokio` feature (a shared tokio reactor on its own thread).",
            execute: |ctx| run(ctx, Sys::TidepoolTokio),
        },
        RunSpec {
            id: TOKIO,
            system: "tokio",
            description: "Server and clients over tokio::net::TcpStream in tasks on tokio's default multi-thread runtime (its workers poll the reactor).",
            execute: |ctx| run(ctx, Sys::Tokio),
        },
        RunSpec {
            id: EXECUTOR,
            system: "async-executor",
            description: "Server and clients over async_io::Async<TcpStream> on async-executor, one thread per core, each parked in async_io::block_on (idle threads drive the reactor, as in smol): the design reference.",
            execute: |ctx| run(ctx, Sys::Executor),
        },
        RunSpec {
            id: TIDEPOOL_1SLOT,
            system: "tidepool",
            description: "Connect burst: 2,000 tasks spawned at once from a task on a one-slot pool (Pool::builder().concurrency(1)), each connecting with tidepool::Async<TcpStream> to a listener with a backlog of 4,096 (its accept loop a task on the same pool, each echo another), sending one byte and reading it back.",
            execute: |ctx| connect_burst::run(ctx, connect_burst::Sys::Tidepool1Slot),
        },
        RunSpec {
            id: TOKIO_CURRENT_THREAD,
            system: "tokio",
            description: "Connect burst: 2,000 tasks spawned at once from Runtime::block_on on tokio's current-thread runtime, each connecting with tokio::net::TcpStream to a TcpSocket listening with a backlog of 4,096 (its accept loop a task on the same runtime, each echo another), sending one byte and reading it back.",
            execute: |ctx| connect_burst::run(ctx, connect_burst::Sys::TokioCurrentThread),
        },
    ],
    opt_in: &[],
    plots,
    full_only: &[],
    default_repeat: 5,
    rotate: true,
};

/// Counts at a scale.
#[derive(Debug, Clone, Copy)]
struct Params {
    /// Concurrent connections (before the file-descriptor limit).
    connections: usize,
    /// Round trips in all (before `--items`).
    round_trips: usize,
}

/// The experiment's size at each scale.
const SCALES: ScaleTable<Params> = ScaleTable {
    full: Params {
        connections: 1000,
        round_trips: 100_000,
    },
    quick: Params {
        connections: 200,
        round_trips: 20_000,
    },
    tiny: Params {
        connections: 10,
        round_trips: 200,
    },
};

/// Bytes per message.
const MESSAGE: usize = 64;

/// File descriptors kept free for the rest of the process.
const SPARE_FDS: usize = 256;

fn describe_scale(scale: Scale) -> String {
    let p = SCALES.at(scale);
    format!(
        "{} connections, {} round trips of {MESSAGE} bytes; {}",
        group_digits(p.connections as f64),
        group_digits(p.round_trips as f64),
        connect_burst::describe_scale(scale)
    )
}

/// The system under test.
#[derive(Debug, Clone, Copy)]
enum Sys {
    TidepoolAsync,
    TidepoolTokio,
    Tokio,
    Executor,
}

/// The soft limit on open files (`Max open files` in `/proc/self/limits`),
/// if it can be read and is not unlimited.
fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A non-blocking listener on 127.0.0.1 (a port the OS picks) whose
/// backlog holds every connection at once: with std's 128, a burst of
/// connects overflows it and the dropped SYNs are retried a second later,
/// which would measure TCP's retry timer instead of the system.
fn listen(connections: usize) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())?;
    socket.listen(i32::try_from(connections + 16).unwrap_or(i32::MAX))?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// What every client and the measurement share.
#[derive(Debug)]
struct Shared {
    origin: Instant,
    /// Clients count down when they finish.
    done: Arc<Latch>,
    /// Round-trip times, ms.
    rtt_ms: Mutex<Vec<f64>>,
    /// The first round trip's start and the last one's end, ns since origin.
    first_ns: AtomicU64,
    last_ns: AtomicU64,
    errors: AtomicUsize,
}

impl Shared {
    fn ns(&self, at: Instant) -> u64 {
        u64::try_from(at.duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    /// A client's round trips, once it is done.
    fn record(&self, started: Instant, rtts: &[f64]) {
        self.first_ns.fetch_min(self.ns(started), Ordering::Relaxed);
        self.last_ns
            .fetch_max(self.ns(Instant::now()), Ordering::Relaxed);
        self.rtt_ms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(rtts);
    }

    /// Counts a failed client; the first few are printed, so a failure is
    /// never silent.
    fn error(&self, e: &std::io::Error) {
        if self.errors.fetch_add(1, Ordering::Relaxed) < 3 {
            eprintln!("async-io: a client failed: {e}");
        }
    }
}

/// Runs the server and the clients on `sys` and measures.
///
/// # Errors
///
/// When the system or the listener cannot be set up, or the clients do not
/// finish within the time limit. Failed clients are counted in `errors`.
fn run(ctx: &RunCtx, sys: Sys) -> Result<Measured, String> {
    let p = SCALES.at(ctx.scale);
    let wanted = p.connections;
    let fd_limit = open_file_limit();
    // Two descriptors per connection (client and server side).
    let connections = match fd_limit {
        Some(limit) => wanted.min(limit.saturating_sub(SPARE_FDS) / 2).max(1),
        None => wanted,
    };
    let round_trips = ctx.items_or(p.round_trips).max(connections);
    let per_client = round_trips / connections;
    let shared = Arc::new(Shared {
        origin: Instant::now(),
        done: Arc::new(Latch::new(connections)),
        rtt_ms: Mutex::new(Vec::with_capacity(per_client * connections)),
        first_ns: AtomicU64::new(u64::MAX),
        last_ns: AtomicU64::new(0),
        errors: AtomicUsize::new(0),
    });
    let listener = listen(connections).map_err(|e| format!("listener on 127.0.0.1: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let limit = Duration::from_secs(120);
    let _follow = ctx.follow(&shared.done);
    let cpu0 = CpuTimes::now();
    let finished = match sys {
        Sys::TidepoolAsync | Sys::TidepoolTokio => {
            let pool = TidepoolConfig::default_pool().build()?;
            let tokio_sockets = matches!(sys, Sys::TidepoolTokio);
            // The server: the accept loop is a task, each connection another.
            let server = pool.spawn(async move {
                if tokio_sockets {
                    let listener = tokio::net::TcpListener::from_std(listener)?;
                    for _ in 0..connections {
                        let (stream, _) = listener.accept().await?;
                        drop(tidepool::spawn(echo_tokio(stream)));
                    }
                } else {
                    let listener = tidepool::Async::new(listener)?;
                    for _ in 0..connections {
                        let (stream, _) = listener.accept().await?;
                        drop(tidepool::spawn(echo_async(stream)));
                    }
                }
                Ok::<_, std::io::Error>(())
            });
            for _ in 0..connections {
                let shared = shared.clone();
                drop(pool.spawn(async move {
                    let outcome = if tokio_sockets {
                        client_tokio(addr, per_client, &shared).await
                    } else {
                        client_tidepool(addr, per_client, &shared).await
                    };
                    if let Err(e) = outcome {
                        shared.error(&e);
                    }
                    shared.done.count_down();
                }));
            }
            let finished = shared.done.wait_timeout(limit);
            if finished {
                if let Err(e) = server.join() {
                    eprintln!("async-io: server task: {e}");
                }
            }
            shutdown_pool(&pool);
            finished
        }
        Sys::Tokio => {
            let rt = tokio_runtime()?;
            rt.spawn(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                for _ in 0..connections {
                    let (stream, _) = listener.accept().await?;
                    tokio::spawn(echo_tokio(stream));
                }
                Ok::<_, std::io::Error>(())
            });
            for _ in 0..connections {
                let shared = shared.clone();
                rt.spawn(async move {
                    if let Err(e) = client_tokio(addr, per_client, &shared).await {
                        shared.error(&e);
                    }
                    shared.done.count_down();
                });
            }
            let finished = shared.done.wait_timeout(limit);
            rt.shutdown_timeout(Duration::from_secs(10));
            finished
        }
        Sys::Executor => {
            let executor = Arc::new(async_executor::Executor::new());
            let (stop, stopped) = tokio::sync::watch::channel(());
            let threads: Vec<_> = (0..ctx.cores.max(1))
                .map(|i| {
                    let executor = executor.clone();
                    let mut stopped = stopped.clone();
                    std::thread::Builder::new()
                        .name(format!("lab-executor-{i}"))
                        .spawn(move || {
                            async_io::block_on(executor.run(async {
                                let _ = stopped.changed().await;
                            }));
                        })
                        .map_err(|e| format!("executor thread: {e}"))
                })
                .collect::<Result<_, _>>()?;
            let ex = executor.clone();
            executor
                .spawn(async move {
                    let listener = async_io::Async::new(listener)?;
                    for _ in 0..connections {
                        let (stream, _) = listener.accept().await?;
                        ex.spawn(echo_async(stream)).detach();
                    }
                    Ok::<_, std::io::Error>(())
                })
                .detach();
            for _ in 0..connections {
                let shared = shared.clone();
                executor
                    .spawn(async move {
                        if let Err(e) = client_async_io(addr, per_client, &shared).await {
                            shared.error(&e);
                        }
                        shared.done.count_down();
                    })
                    .detach();
            }
            let finished = shared.done.wait_timeout(limit);
            drop(stop);
            for t in threads {
                let _ = t.join();
            }
            finished
        }
    };
    let cpu = CpuTimes::now().zip(cpu0).map(|(a, b)| a.since(b));
    if !finished {
        return Err(format!(
            "{} of {connections} clients finished within {limit:?}",
            shared.done.finished()
        ));
    }

    let rtts = std::mem::take(&mut *shared.rtt_ms.lock().unwrap_or_else(|e| e.into_inner()));
    let summary = Summary::of(&rtts).ok_or("no round trip finished")?;
    let first = shared.first_ns.load(Ordering::Relaxed);
    let last = shared.last_ns.load(Ordering::Relaxed);
    let wall_s = last.saturating_sub(first) as f64 / 1e9;
    let mut m = Measured::default();
    m.put("ns_per_round_trip", wall_s * 1e9 / rtts.len() as f64);
    m.put("round_trips_per_s", rtts.len() as f64 / wall_s);
    m.put("p50_rtt_ms", summary.p50);
    m.put("p99_rtt_ms", summary.p99);
    m.put("max_rtt_ms", summary.max);
    m.put("wall_ms", wall_s * 1e3);
    if let Some(cpu) = cpu {
        m.put("cpu_ms", cpu.user_ms + cpu.sys_ms);
    }
    m.put("connections", connections as f64);
    m.put("round_trips", rtts.len() as f64);
    m.put("errors", shared.errors.load(Ordering::Relaxed) as f64);
    let mut note = format!(
        "{connections} connections, {per_client} round trips each ({} in all).",
        rtts.len()
    );
    if connections < wanted {
        let _ = write!(
            note,
            " Fewer connections than the scale's {wanted}: the open-file limit is {}.",
            fd_limit.unwrap_or(0)
        );
    }
    m.note = Some(note);
    Ok(m)
}

/// The message every client sends.
fn message() -> [u8; MESSAGE] {
    let mut m = [b'x'; MESSAGE];
    m[MESSAGE - 1] = b'\n';
    m
}

/// Echoes until the client closes (`futures-io` sockets: tidepool's
/// `Async` or async-io's).
async fn echo_async<S>(mut stream: S)
where
    S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin,
{
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if stream.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Echoes until the client closes (tokio sockets).
async fn echo_tokio(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if stream.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// One client over tidepool's `Async`: `n` round trips, each timed.
async fn client_tidepool(addr: SocketAddr, n: usize, shared: &Shared) -> std::io::Result<()> {
    let stream = tidepool::Async::<TcpStream>::connect(addr).await?;
    stream.get_ref().set_nodelay(true)?;
    round_trips(stream, n, shared).await
}

/// One client over async-io's `Async`: `n` round trips, each timed.
async fn client_async_io(addr: SocketAddr, n: usize, shared: &Shared) -> std::io::Result<()> {
    let stream = async_io::Async::<TcpStream>::connect(addr).await?;
    stream.get_ref().set_nodelay(true)?;
    round_trips(stream, n, shared).await
}

/// `n` timed round trips over a connected `futures-io` socket.
async fn round_trips<S>(mut stream: S, n: usize, shared: &Shared) -> std::io::Result<()>
where
    S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin,
{
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    let message = message();
    let mut back = [0u8; MESSAGE];
    let mut rtts = Vec::with_capacity(n);
    let started = Instant::now();
    for _ in 0..n {
        let sent = Instant::now();
        stream.write_all(&message).await?;
        stream.read_exact(&mut back).await?;
        rtts.push(sent.elapsed().as_secs_f64() * 1e3);
        check(&back)?;
    }
    shared.record(started, &rtts);
    Ok(())
}

/// One client over tokio sockets: `n` round trips, each timed.
async fn client_tokio(addr: SocketAddr, n: usize, shared: &Shared) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let message = message();
    let mut back = [0u8; MESSAGE];
    let mut rtts = Vec::with_capacity(n);
    let started = Instant::now();
    for _ in 0..n {
        let sent = Instant::now();
        stream.write_all(&message).await?;
        stream.read_exact(&mut back).await?;
        rtts.push(sent.elapsed().as_secs_f64() * 1e3);
        check(&back)?;
    }
    shared.record(started, &rtts);
    Ok(())
}

/// The echo must be the message.
fn check(back: &[u8; MESSAGE]) -> std::io::Result<()> {
    if *back == message() {
        Ok(())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the echo differs from the message sent",
        ))
    }
}

/// Round trips per second and p99 latency, per run; the connect burst's
/// mean start, if it ran.
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    let mut plots = vec![
        Plot::bars(
            "async-io-throughput",
            (
                "Round trips per second",
                "Higher is better: the same echo load on each system.",
            ),
            "round trips per second",
            metric_bars(runs, "round_trips_per_s"),
        ),
        Plot::bars(
            "async-io-p99",
            (
                "99th-percentile round-trip time",
                "Lower is better: the slowest 1% of round trips.",
            ),
            "p99 round trip, ms",
            metric_bars(runs, "p99_rtt_ms"),
        ),
    ];
    plots.extend(connect_burst::plot(runs));
    plots
}

/// The summary's answer: the echo's part, then the connect burst's.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    match (echo_verdict(exp), connect_burst::verdict(exp)) {
        (Some(echo), Some(burst)) => Some(format!("{echo} {burst}")),
        (echo, burst) => echo.or(burst),
    }
}

/// The echo's answer: throughput and p99 of each run against tokio's.
fn echo_verdict(exp: &ExperimentResult) -> Option<String> {
    let rate = |id| figure(exp, id, "round_trips_per_s");
    let p99 = |id| figure(exp, id, "p99_rtt_ms");
    let (ours, ours_p99) = (rate(TIDEPOOL_ASYNC)?, p99(TIDEPOOL_ASYNC)?);
    let mut s = format!(
        "tidepool::Async: {} round trips/s, p99 {}",
        group_digits(ours.0),
        ms(ours_p99.0)
    );
    for (id, name) in [
        (TIDEPOOL_TOKIO, "tokio sockets on tidepool"),
        (TOKIO, "tokio"),
        (EXECUTOR, "async-executor parked in the reactor"),
    ] {
        if let (Some(r), Some(p)) = (rate(id), p99(id)) {
            let _ = write!(
                s,
                "; {name}: {} round trips/s, p99 {}",
                group_digits(r.0),
                ms(p.0)
            );
        }
    }
    let errors: f64 = [TIDEPOOL_ASYNC, TIDEPOOL_TOKIO, TOKIO, EXECUTOR]
        .iter()
        .filter_map(|id| figure(exp, id, "errors").map(|f| f.0))
        .sum();
    let _ = write!(
        s,
        "; {}. Verdict: ",
        count(errors, "failed client", "failed clients")
    );
    match (rate(TOKIO), p99(TOKIO)) {
        (Some(t), Some(tp)) => {
            let faster = ours.0 >= t.0;
            let steadier = ours_p99.0 <= tp.0;
            s.push_str(match (faster, steadier) {
                (true, true) => "tidepool's sockets match tokio's throughput and p99: goal met.",
                (true, false) => {
                    "tidepool's sockets match tokio's throughput but not its p99: goal not met."
                }
                (false, true) => {
                    "tidepool's sockets match tokio's p99 but not its throughput: goal not met."
                }
                (false, false) => {
                    "tidepool's sockets are behind tokio's in throughput and p99: goal not met."
                }
            });
        }
        _ => s.push_str("compare with the tokio run for a verdict."),
    }
    Some(s)
}

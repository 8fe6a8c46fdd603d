//! The `web-service` experiment. What it runs and shows is said once, in
//! [`EXPERIMENT`]: its `summary` (the command line's help) and its `about`
//! (the report's).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::paced::{finish_system, measure, tidepool_report, ItemProbe, Pace};
use super::per_item_plot;
use crate::aggregate::Measured;
use crate::model::plot::Plot;
use crate::model::{Experiment, ExperimentResult, RunCtx, RunResult, RunSpec, Scale, ScaleTable};
use crate::report::table::group_digits;
use crate::systems::{tokio_runtime, System, TidepoolConfig};
use std::fmt::Write as _;

use crate::report::summary::{count, median, ms};

/// What the experiment shows.
const ABOUT: &str = "A real HTTP/1.1 server on the loopback interface answers every request \
after 500 ms, without holding a thread per request. 1,000 requests are issued one every 10 ms, \
each from a work item or task on the pool under test. Blocking clients on a capped pool queue \
up exactly like the waiting experiment; blocking clients on the adaptive pool, and async \
clients on any pool, start at once.";

/// Blocking clients on the classic capped pool.
pub(crate) const FIXED10_BLOCKING: &str = "fixed10-blocking-client";
/// Blocking clients on tidepool's default pool, the baseline.
pub(crate) const ADAPTIVE_BLOCKING: &str = "adaptive-blocking-client";
/// Async clients on tidepool.
pub(crate) const TIDEPOOL_ASYNC: &str = "tidepool-async-client";
/// Async clients on tokio.
pub(crate) const TOKIO_ASYNC: &str = "tokio-async-client";

/// The experiment.
pub static EXPERIMENT: Experiment = Experiment {
    name: "web-service",
    about: ABOUT,
    summary: "A real HTTP server that answers after 500 ms, called from the pool.",
    question: "Do blocking HTTP clients starve the pool?",
    verdict,
    scale: describe_scale,
    headline: "mean_start_ms",
    baseline: ADAPTIVE_BLOCKING,
    baselines: &[],
    headlines: &[],
    runs: &[
        RunSpec {
            id: FIXED10_BLOCKING,
            system: "tidepool",
            description: "Plain blocking std::net client code in work items on Controller::Fixed with 10 threads.",
            execute: |ctx| run(ctx, Client::Blocking(TidepoolConfig::fixed(10))),
        },
        RunSpec {
            id: ADAPTIVE_BLOCKING,
            system: "tidepool",
            description: "Plain blocking std::net client code in work items on the default pool (Adaptive).",
            execute: |ctx| run(ctx, Client::Blocking(TidepoolConfig::default_pool())),
        },
        RunSpec {
            id: TIDEPOOL_ASYNC,
            system: "tidepool",
            description: "An async client over tidepool::Async<TcpStream> in tasks on the default pool.",
            execute: |ctx| run(ctx, Client::TidepoolAsync),
        },
        RunSpec {
            id: TOKIO_ASYNC,
            system: "tokio",
            description: "An async client over tokio::net::TcpStream in tasks on tokio's default multi-thread runtime.",
            execute: |ctx| run(ctx, Client::TokioAsync),
        },
    ],
    opt_in: &[],
    plots,
    full_only: &[FIXED10_BLOCKING],
    default_repeat: 1,
    rotate: false,
};

/// Counts and durations at a scale.
#[derive(Debug, Clone, Copy)]
struct Params {
    /// Requests (before `--items`).
    requests: usize,
    /// Time between requests.
    interval_ms: u64,
    /// How long the server takes to answer.
    answer_ms: u64,
}

/// The experiment's size at each scale.
const SCALES: ScaleTable<Params> = ScaleTable {
    full: Params {
        requests: 1000,
        interval_ms: 10,
        answer_ms: 500,
    },
    quick: Params {
        requests: 200,
        interval_ms: 10,
        answer_ms: 250,
    },
    tiny: Params {
        requests: 10,
        interval_ms: 2,
        answer_ms: 20,
    },
};

fn describe_scale(scale: Scale) -> String {
    let p = SCALES.at(scale);
    format!(
        "{} requests every {} ms, {} ms answers",
        group_digits(p.requests as f64),
        p.interval_ms,
        p.answer_ms
    )
}

/// How the clients run.
enum Client {
    /// Blocking `std::net` code in work items on a tidepool pool.
    Blocking(TidepoolConfig),
    /// `tidepool::Async<TcpStream>` in tasks on the default pool.
    TidepoolAsync,
    /// `tokio::net::TcpStream` in tasks on tokio's default runtime.
    TokioAsync,
}

/// The request every client sends.
const REQUEST: &[u8] = b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
/// The answer's body.
const BODY: &str = "slow hello\n";

/// Issues the requests from `client`.
///
/// # Errors
///
/// When the server or the system cannot be started, or requests do not
/// finish. Failed requests are counted in `errors`, not returned.
fn run(ctx: &RunCtx, client: Client) -> Result<Measured, String> {
    let p = SCALES.at(ctx.scale);
    let items = ctx.items_or(p.requests);
    let interval = Duration::from_millis(p.interval_ms);
    let delay = Duration::from_millis(p.answer_ms);
    let server = SlowServer::start(delay)?;
    let addr = server.addr;
    let errors = Arc::new(AtomicUsize::new(0));
    let pace = Pace {
        items,
        interval,
        limit: delay * u32::try_from(items).unwrap_or(u32::MAX) + Duration::from_secs(60),
    };
    let mut m = match client {
        Client::Blocking(cfg) => measure(
            ctx,
            pace,
            || cfg.build().map(System::Tidepool),
            |s: &System, probe: ItemProbe| {
                let errors = errors.clone();
                s.spawn_fn(move || {
                    probe.start();
                    if let Err(e) = blocking_get(addr) {
                        note_error(&errors, probe.index(), &e);
                    }
                    probe.end();
                })
            },
            finish_system,
        ),
        Client::TidepoolAsync => measure(
            ctx,
            pace,
            || TidepoolConfig::default_pool().build(),
            |pool: &tidepool::Pool, probe: ItemProbe| {
                let errors = errors.clone();
                drop(pool.spawn(async move {
                    probe.start();
                    if let Err(e) = tidepool_get(addr).await {
                        note_error(&errors, probe.index(), &e);
                    }
                    probe.end();
                }))
            },
            |pool| {
                let r = tidepool_report(&pool);
                crate::systems::shutdown_pool(&pool);
                r
            },
        ),
        Client::TokioAsync => measure(
            ctx,
            pace,
            tokio_runtime,
            |rt: &tokio::runtime::Runtime, probe: ItemProbe| {
                let errors = errors.clone();
                drop(rt.spawn(async move {
                    probe.start();
                    if let Err(e) = tokio_get(addr).await {
                        note_error(&errors, probe.index(), &e);
                    }
                    probe.end();
                }))
            },
            |rt| {
                rt.shutdown_timeout(Duration::from_secs(10));
                Default::default()
            },
        ),
    }?;
    server.stop();
    m.put("errors", errors.load(Ordering::Relaxed) as f64);
    m.note = Some(format!(
        "{items} requests, one every {} ms; the server answers each after {} ms.",
        interval.as_millis(),
        delay.as_millis()
    ));
    Ok(m)
}

/// Counts a failed request; the first few are also printed, so a failure
/// is never silent.
fn note_error(errors: &AtomicUsize, index: usize, e: &std::io::Error) {
    if errors.fetch_add(1, Ordering::Relaxed) < 3 {
        eprintln!("web-service: request {index} failed: {e}");
    }
}

/// Checks a complete response.
fn check_response(buf: &[u8]) -> std::io::Result<()> {
    let text = String::from_utf8_lossy(buf);
    if text.starts_with("HTTP/1.1 200") && text.ends_with(BODY) {
        Ok(())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "unexpected answer: {:?}",
                text.chars().take(60).collect::<String>()
            ),
        ))
    }
}

/// One request with plain blocking `std::net` code.
fn blocking_get(addr: SocketAddr) -> std::io::Result<()> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    s.write_all(REQUEST)?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    check_response(&buf)
}

/// One request over `tidepool::Async<TcpStream>`.
async fn tidepool_get(addr: SocketAddr) -> std::io::Result<()> {
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    let mut s = tidepool::Async::<TcpStream>::connect(addr).await?;
    s.write_all(REQUEST).await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    check_response(&buf)
}

/// One request over `tokio::net::TcpStream`.
async fn tokio_get(addr: SocketAddr) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(REQUEST).await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    check_response(&buf)
}

/// A loopback HTTP/1.1 server that answers every request after a delay. It
/// waits asynchronously (a tokio runtime of its own with one worker), so it
/// holds no thread per request and is never the bottleneck.
#[derive(Debug)]
pub struct SlowServer {
    /// Where it listens (127.0.0.1, a port the OS chose).
    pub addr: SocketAddr,
    runtime: tokio::runtime::Runtime,
}

impl SlowServer {
    /// Starts the server.
    ///
    /// # Errors
    ///
    /// When the socket or the runtime cannot be set up.
    pub fn start(delay: Duration) -> Result<SlowServer, String> {
        let std_listener =
            TcpListener::bind("127.0.0.1:0").map_err(|e| format!("server bind: {e}"))?;
        let addr = std_listener.local_addr().map_err(|e| e.to_string())?;
        std_listener
            .set_nonblocking(true)
            .map_err(|e| e.to_string())?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("lab-http-server")
            .enable_all()
            .build()
            .map_err(|e| format!("server runtime: {e}"))?;
        let listener = {
            let _enter = runtime.enter();
            tokio::net::TcpListener::from_std(std_listener).map_err(|e| e.to_string())?
        };
        runtime.spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(answer(conn, delay));
            }
        });
        Ok(SlowServer { addr, runtime })
    }

    /// Stops the server and waits for its threads.
    pub fn stop(self) {
        self.runtime.shutdown_timeout(Duration::from_secs(5));
    }
}

/// Reads one request head, waits `delay`, answers and closes.
async fn answer(mut conn: tokio::net::TcpStream, delay: Duration) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut head = Vec::with_capacity(256);
    let mut chunk = [0_u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
    tokio::time::sleep(delay).await;
    let reply = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let _ = conn.write_all(reply.as_bytes()).await;
    let _ = conn.shutdown().await;
}

/// Start latency by request (log scale).
fn plots(runs: &[RunResult]) -> Vec<Plot> {
    per_item_plot(
        runs,
        &[FIXED10_BLOCKING, ADAPTIVE_BLOCKING, TIDEPOOL_ASYNC, TOKIO_ASYNC],
        "web-service-start-latency",
        (
            "Start latency by request",
            "Blocking clients on the fixed pool queue: latency climbs request after request; blocking clients on the adaptive pool start as promptly as async ones.",
        ),
        "request (issue order)",
        "queue-to-start latency, ms (log)",
        true,
    )
    .into_iter()
    .collect()
}

/// The summary's answer: when a request starts with each client.
fn verdict(exp: &ExperimentResult) -> Option<String> {
    let start = |id| median(exp, id, "mean_start_ms");
    let ours = start(ADAPTIVE_BLOCKING)?;
    let mut s = format!(
        "A blocking client on tidepool's default starts a request in {}",
        ms(ours)
    );
    let fixed = start(FIXED10_BLOCKING);
    if let Some(f) = fixed {
        let _ = write!(s, ", on a fixed pool of 10 threads in {}", ms(f));
    }
    for (id, name) in [
        (TIDEPOOL_ASYNC, "an async client on tidepool"),
        (TOKIO_ASYNC, "on tokio"),
    ] {
        if let Some(v) = start(id) {
            let _ = write!(s, "; {name} in {}", ms(v));
        }
    }
    let errors: f64 = exp
        .runs
        .iter()
        .filter_map(|r| r.measured.get("errors"))
        .sum();
    let _ = write!(
        s,
        "; {}. Verdict: ",
        count(errors, "failed request", "failed requests")
    );
    s.push_str(match fixed {
        Some(f) if f >= 100.0 * ours => {
            "plain blocking clients work on tidepool's default as well as async ones; a capped pool queues them."
        }
        Some(_) => "no clear difference from a capped pool at this scale.",
        None => "compare with fixed10-blocking-client for a verdict.",
    });
    Some(s)
}

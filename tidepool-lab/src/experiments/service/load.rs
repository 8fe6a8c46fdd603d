//! The lab's side of a run: the upstream the service calls, the server
//! process, and the load generator's two phases.

use std::convert::Infallible;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::runtime::Runtime;

use super::ServeSystem;
use super::SERVE_SYSTEM;
use crate::probe::{self, CpuTimes};

/// How long the upstream takes to answer.
const UPSTREAM_DELAY: Duration = Duration::from_millis(20);
/// The upstream's answer.
const UPSTREAM_BODY: &[u8] = b"{\"price\":42}";
/// A request not answered within this is given up and counted as an error.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the server process's thread count is read.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);
/// How long a server process may take to start, answer a `metrics` line,
/// or exit once told to.
const PROCESS_LIMIT: Duration = Duration::from_secs(10);

/// A runtime of one worker, its threads named `name` (`lab-...`, so the
/// lab's probes know them as the lab's own).
fn one_worker(name: &str) -> Result<Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
        .map_err(|e| format!("{name} runtime: {e}"))
}

/// The upstream: an HTTP/1.1 server on 127.0.0.1 that answers every
/// request after [`UPSTREAM_DELAY`] (a timer: no thread is held while it
/// waits), on a runtime of its own in the lab's process.
#[derive(Debug)]
pub(super) struct Upstream {
    /// Where it listens.
    pub(super) addr: SocketAddr,
    runtime: Runtime,
}

impl Upstream {
    /// Starts the upstream.
    pub(super) fn start() -> Result<Upstream, String> {
        let runtime = one_worker("lab-upstream")?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .map_err(|e| format!("upstream bind: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                tokio::spawn(async move {
                    let answer = hyper::service::service_fn(|_request| async {
                        tokio::time::sleep(UPSTREAM_DELAY).await;
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
                            UPSTREAM_BODY,
                        ))))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), answer)
                        .await;
                });
            }
        });
        Ok(Upstream { addr, runtime })
    }

    /// Stops the upstream and waits for its thread.
    pub(super) fn stop(self) {
        self.runtime.shutdown_timeout(Duration::from_secs(5));
    }
}

/// What a tidepool server process says about its pool.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct PoolFigures {
    /// `Metrics::start_latency.max` so far, ms.
    pub(super) start_latency_max_ms: f64,
    /// `Metrics::tokio_blocked` so far.
    pub(super) tokio_blocked: f64,
    /// `Metrics::blocked_detections` so far.
    pub(super) blocked_detections: f64,
    /// `Metrics::workers_counted_again` so far.
    pub(super) counted_again: f64,
    /// `Metrics::workers_held` so far.
    pub(super) held: f64,
}

/// A server process: the lab's binary started again as
/// `tidepool-lab serve-system <run id> --db <file> --upstream <addr>`.
#[derive(Debug)]
pub(super) struct ServerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Where it serves.
    pub(super) addr: SocketAddr,
}

impl ServerProcess {
    /// Starts the server process of `system` and waits for its port.
    pub(super) fn start(
        system: ServeSystem,
        db: &Path,
        upstream: SocketAddr,
    ) -> Result<ServerProcess, String> {
        let exe = std::env::current_exe().map_err(|e| format!("the lab's own binary: {e}"))?;
        let mut child = Command::new(exe)
            .arg(SERVE_SYSTEM)
            .arg(system.id())
            .arg("--db")
            .arg(db)
            .arg("--upstream")
            .arg(upstream.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("server process: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("server process: no stdout")?;
        let (send, lines) = mpsc::channel();
        thread::Builder::new()
            .name("lab-server-out".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if send.send(line).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| format!("server process reader: {e}"))?;
        let mut process = ServerProcess {
            child,
            stdin,
            lines,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let port: u16 = process
            .lines
            .recv_timeout(PROCESS_LIMIT)
            .map_err(|_| "the server process did not say its port".to_string())?
            .trim()
            .parse()
            .map_err(|e| format!("the server process's port: {e}"))?;
        process.addr.set_port(port);
        Ok(process)
    }

    /// Its process id.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Asks a tidepool server process for its pool's figures.
    pub(super) fn pool_figures(&mut self) -> Result<PoolFigures, String> {
        let stdin = self.stdin.as_mut().ok_or("server process: stdin closed")?;
        writeln!(stdin, "metrics")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("server process: {e}"))?;
        let line = self
            .lines
            .recv_timeout(PROCESS_LIMIT)
            .map_err(|_| "the server process did not answer `metrics`".to_string())?;
        let v: serde_json::Value =
            serde_json::from_str(&line).map_err(|e| format!("server metrics {line:?}: {e}"))?;
        let field = |name| v[name].as_f64().ok_or(format!("server metrics: no {name}"));
        Ok(PoolFigures {
            start_latency_max_ms: field("start_latency_max_ms")?,
            tokio_blocked: field("tokio_blocked")?,
            blocked_detections: field("blocked_detections")?,
            counted_again: field("counted_again")?,
            held: field("held")?,
        })
    }

    /// Closes its standard input (it exits), and waits for it; kills it
    /// if it does not go. An exit before it was told is an error.
    pub(super) fn finish(mut self) -> Result<(), String> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Err(format!("the server process exited early: {status}"));
        }
        drop(self.stdin.take());
        let deadline = Instant::now() + PROCESS_LIMIT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(5));
        }
        Err("the server process did not exit when told to".into())
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// The largest thread count of a process, read every [`SAMPLE_EVERY`]
/// from `/proc/<pid>/status` until finished.
#[derive(Debug)]
struct ThreadPeak {
    stop: Arc<AtomicBool>,
    handle: thread::JoinHandle<Option<usize>>,
}

impl ThreadPeak {
    fn start(pid: u32) -> Result<ThreadPeak, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = thread::Builder::new()
            .name("lab-sampler".into())
            .spawn(move || {
                let mut peak = None;
                // Relaxed: the flag carries no data; the join publishes `peak`.
                while !flag.load(Ordering::Relaxed) {
                    peak = peak.max(probe::thread_count_of(pid));
                    thread::sleep(SAMPLE_EVERY);
                }
                peak.max(probe::thread_count_of(pid))
            })
            .map_err(|e| format!("sampler thread: {e}"))?;
        Ok(ThreadPeak { stop, handle })
    }

    fn finish(self) -> Option<usize> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or(None)
    }
}

/// A phase of load.
#[derive(Debug, Clone, Copy)]
pub(super) struct Load {
    /// Connections, each one request at a time.
    pub(super) connections: usize,
    /// Requests per second in all (open loop: each request is due at its
    /// time whatever came before), or `None` for back-to-back requests on
    /// every connection (closed loop).
    pub(super) rate: Option<f64>,
    /// Load before the measured window.
    pub(super) warmup: Duration,
    /// The measured window.
    pub(super) window: Duration,
}

/// What a phase measured.
#[derive(Debug)]
pub(super) struct PhaseResult {
    /// Latencies of the requests due (open loop) or sent (closed loop) in
    /// the window that were answered, in microseconds.
    pub(super) latency_us: Histogram<u64>,
    /// Requests due or sent in the window that failed or timed out.
    pub(super) errors: u64,
    /// Requests answered within the window.
    pub(super) served: u64,
    /// The window's length, seconds.
    pub(super) window_s: f64,
    /// The server process's user + system CPU time in the window, ms.
    pub(super) cpu_ms: Option<f64>,
    /// The server process's largest thread count during the phase.
    pub(super) peak_threads: Option<usize>,
}

/// Runs one phase of load against `server` on `rt`.
pub(super) fn run_phase(
    rt: &Runtime,
    server: &ServerProcess,
    load: Load,
) -> Result<PhaseResult, String> {
    let peak = ThreadPeak::start(server.pid())?;
    let (tally, cpu_ms) = rt.block_on(drive(server.addr, server.pid(), load));
    let peak_threads = peak.finish();
    Ok(PhaseResult {
        latency_us: tally.latency_us,
        errors: tally.errors,
        served: tally.served,
        window_s: load.window.as_secs_f64(),
        cpu_ms,
        peak_threads,
    })
}

/// The phase's clock: when it started, and its measured window.
#[derive(Debug, Clone, Copy)]
struct Window {
    from: Instant,
    to: Instant,
}

/// The figures of one connection, merged at the phase's end.
#[derive(Debug)]
struct Tally {
    latency_us: Histogram<u64>,
    errors: u64,
    served: u64,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            // 1 µs to 10 minutes, three significant digits.
            latency_us: Histogram::new_with_bounds(1, 600_000_000, 3)
                .expect("static histogram bounds are valid"),
            errors: 0,
            served: 0,
        }
    }

    /// Records a request due (or sent) at `due` and finished at `done`.
    fn record(&mut self, window: Window, due: Instant, done: Instant, answered: bool) {
        if answered && done >= window.from && done < window.to {
            self.served += 1;
        }
        if due < window.from {
            return;
        }
        if answered {
            let us = u64::try_from(done.saturating_duration_since(due).as_micros())
                .unwrap_or(u64::MAX)
                .max(1);
            self.latency_us.saturating_record(us);
        } else {
            self.errors += 1;
        }
    }

    fn merge(&mut self, other: &Tally) {
        // Both have the same bounds, so adding cannot fail.
        let _ = self.latency_us.add(&other.latency_us);
        self.errors += other.errors;
        self.served += other.served;
    }
}

/// Drives a phase: the connections' tasks, and the server's CPU time read
/// as the window opens and closes. Requests in flight when it closes are
/// waited for (each within [`REQUEST_TIMEOUT`]).
async fn drive(addr: SocketAddr, pid: u32, load: Load) -> (Tally, Option<f64>) {
    let start = Instant::now();
    let window = Window {
        from: start + load.warmup,
        to: start + load.warmup + load.window,
    };
    let next = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..load.connections)
        .map(|_| {
            let next = next.clone();
            match load.rate {
                Some(rate) => tokio::spawn(open_loop(addr, window, start, rate, next)),
                None => tokio::spawn(closed_loop(addr, window, next)),
            }
        })
        .collect();
    tokio::time::sleep_until(window.from.into()).await;
    let cpu0 = CpuTimes::of_process(pid);
    tokio::time::sleep_until(window.to.into()).await;
    let cpu1 = CpuTimes::of_process(pid);
    let mut tally = Tally::new();
    for task in tasks {
        if let Ok(t) = task.await {
            tally.merge(&t);
        }
    }
    let cpu_ms = cpu1
        .zip(cpu0)
        .map(|(a, b)| a.since(b))
        .map(|c| c.user_ms + c.sys_ms);
    (tally, cpu_ms)
}

/// One connection of the open loop: takes the next request number `i`,
/// waits until it is due (`start + i / rate`), sends it, and times it from
/// when it was due, so a server that falls behind is charged for the wait
/// (no coordinated omission). Stops at the first request due after the
/// window.
async fn open_loop(
    addr: SocketAddr,
    window: Window,
    start: Instant,
    rate: f64,
    next: Arc<AtomicU64>,
) -> Tally {
    let mut tally = Tally::new();
    let mut conn = Connection::new(addr);
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        if due >= window.to {
            return tally;
        }
        tokio::time::sleep_until(due.into()).await;
        let answered = conn.get(i).await;
        tally.record(window, due, Instant::now(), answered);
    }
}

/// One connection of the closed loop: sends requests back to back until
/// the window ends.
async fn closed_loop(addr: SocketAddr, window: Window, next: Arc<AtomicU64>) -> Tally {
    let mut tally = Tally::new();
    let mut conn = Connection::new(addr);
    loop {
        let sent = Instant::now();
        if sent >= window.to {
            return tally;
        }
        let answered = conn.get(next.fetch_add(1, Ordering::Relaxed)).await;
        tally.record(window, sent, Instant::now(), answered);
        if !answered {
            // A refused connection must not turn the loop into a spin.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A keep-alive HTTP/1.1 connection to the server, made again after a
/// failure.
struct Connection {
    addr: SocketAddr,
    sender: Option<SendRequest<Empty<Bytes>>>,
}

impl Connection {
    fn new(addr: SocketAddr) -> Connection {
        Connection { addr, sender: None }
    }

    /// `GET /item/{i}`: whether it was answered with a success, in full,
    /// within [`REQUEST_TIMEOUT`]. A failed connection is dropped.
    async fn get(&mut self, i: u64) -> bool {
        let answered = matches!(
            tokio::time::timeout(REQUEST_TIMEOUT, self.try_get(i)).await,
            Ok(Ok(()))
        );
        if !answered {
            self.sender = None;
        }
        answered
    }

    async fn try_get(&mut self, i: u64) -> Result<(), String> {
        if self.sender.as_ref().is_none_or(SendRequest::is_closed) {
            self.sender = Some(connect(self.addr).await?);
        }
        let sender = self.sender.as_mut().ok_or("no connection")?;
        sender.ready().await.map_err(|e| e.to_string())?;
        let request = Request::get(format!("/item/{}", i % u64::from(u32::MAX)))
            .header(hyper::header::HOST, "127.0.0.1")
            .body(Empty::new())
            .map_err(|e| e.to_string())?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let ok = response.status().is_success();
        response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        if ok {
            Ok(())
        } else {
            Err("not a success".into())
        }
    }
}

/// Opens a connection and starts its task.
async fn connect(addr: SocketAddr) -> Result<SendRequest<Empty<Bytes>>, String> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// The load generator's runtime: one worker (`lab-load`), so that it takes
/// as little of the cores from the server as it can.
pub(super) fn load_runtime() -> Result<Runtime, String> {
    one_worker("lab-load")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_counts_what_was_due_in_its_window_and_serves_what_ended_in_it() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let window = Window {
            from: at(100),
            to: at(200),
        };
        let mut t = Tally::new();
        t.record(window, at(50), at(90), true); // warm-up: nothing
        t.record(window, at(90), at(110), true); // served in the window only
        t.record(window, at(150), at(160), true); // both
        t.record(window, at(190), at(250), true); // latency only
        t.record(window, at(120), at(130), false); // an error
        assert_eq!(t.served, 2);
        assert_eq!(t.errors, 1);
        assert_eq!(t.latency_us.len(), 2);
        assert_eq!(t.latency_us.max(), t.latency_us.highest_equivalent(60_000));
        let mut all = Tally::new();
        all.merge(&t);
        all.merge(&t);
        assert_eq!((all.served, all.errors, all.latency_us.len()), (4, 2, 4));
    }
}

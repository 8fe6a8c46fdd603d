//! The connect burst of `async-io` (issue #40): 2,000 async tasks spawned
//! at once on one slot, each opening a loopback connection, writing one
//! byte and reading its echo, then ending. What it measures is how soon a
//! task starts when many arrive together and their sockets' wakes arrive
//! while later tasks still wait for their first poll.
//!
//! Two rows, each on a fresh system per repetition (in the lab's process,
//! as the echo rows):
//!
//! - [`TIDEPOOL_1SLOT`]: a pool built with `Pool::builder().concurrency(1)`
//!   (the default controller) and tidepool's own sockets
//!   (`Async::<TcpListener>::bind_with_backlog`, `Async::<TcpStream>::connect`);
//! - [`TOKIO_CURRENT_THREAD`]: tokio's current-thread runtime
//!   (`Builder::new_current_thread().enable_all()`) and `tokio::net`
//!   (a `TcpSocket` listening with the same backlog).
//!
//! On both, the tasks are spawned by code running on the system's one
//! slot, one after another without yielding: a task on the pool
//! (`tidepool::spawn`), the future in `Runtime::block_on` (`tokio::spawn`).
//! The listener's accept loop is a task on the same system, and each
//! accepted connection's echo another. The backlog ([`BACKLOG`]) holds the
//! whole burst, so no SYN waits for TCP's retry timer.
//!
//! Per task: its start latency, from just before its `spawn` call to the
//! first line of its future (its first poll), and its connect time, from
//! that first poll to the connection's completion. Per run:
//! `mean_start_ms` (this workload's figure of merit), `p50_start_ms`,
//! `p99_start_ms`, `max_start_ms`, `mean_connect_ms`, `wall_ms` (first
//! spawn to the last task's end), `errors` (tasks whose connect, write or
//! read failed) and `connections`. The goal of issue #40: tidepool's mean
//! start at most tokio current-thread's, comparing medians over the
//! repetitions.

use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{echo_async, echo_tokio, open_file_limit, SPARE_FDS};
use crate::aggregate::Measured;
use crate::measure::Latch;
use crate::model::plot::Plot;
use crate::model::{ExperimentResult, RunCtx, RunResult, Scale, ScaleTable};
use crate::report::summary::{count, median, ms, times};
use crate::report::table::group_digits;
use crate::stats::Summary;
use crate::systems::{shutdown_pool, TidepoolConfig};

/// tidepool on one slot, its own sockets.
pub(crate) const TIDEPOOL_1SLOT: &str = "tidepool-connect-burst-1slot";
/// tokio's current-thread runtime, tokio's sockets.
pub(crate) const TOKIO_CURRENT_THREAD: &str = "tokio-current-thread-connect-burst";

/// This workload's figure of merit: the tasks' mean start latency.
pub(crate) const MEAN_START: &str = "mean_start_ms";

/// The listener's backlog: the whole burst fits.
const BACKLOG: u32 = 4096;

/// Tasks in the burst (before `--items` and the open-file limit).
const SCALES: ScaleTable<usize> = ScaleTable {
    full: 2000,
    quick: 2000,
    tiny: 20,
};

/// The byte each task sends and expects back.
const BYTE: u8 = b'!';

/// The time limit of one burst.
const LIMIT: Duration = Duration::from_secs(60);

/// The burst's size at a scale, in words.
pub(super) fn describe_scale(scale: Scale) -> String {
    format!(
        "a connect burst of {} tasks on one slot",
        group_digits(SCALES.at(scale) as f64)
    )
}

/// The system under test.
#[derive(Debug, Clone, Copy)]
pub(super) enum Sys {
    /// tidepool, one slot, `tidepool::Async` sockets.
    Tidepool1Slot,
    /// tokio's current-thread runtime, `tokio::net` sockets.
    TokioCurrentThread,
}

/// What the tasks and the measurement share.
#[derive(Debug)]
struct Shared {
    origin: Instant,
    /// Tasks count down when they end.
    done: Arc<Latch>,
    /// Start latencies (spawn to first poll), ms.
    starts_ms: Mutex<Vec<f64>>,
    /// Connect times (first poll to connected), ms, of the tasks that connected.
    connects_ms: Mutex<Vec<f64>>,
    /// The first spawn and the last task's end, ns since `origin`.
    first_ns: AtomicU64,
    last_ns: AtomicU64,
    errors: AtomicUsize,
}

impl Shared {
    fn new(tasks: usize) -> Shared {
        Shared {
            origin: Instant::now(),
            done: Arc::new(Latch::new(tasks)),
            starts_ms: Mutex::new(Vec::with_capacity(tasks)),
            connects_ms: Mutex::new(Vec::with_capacity(tasks)),
            first_ns: AtomicU64::new(u64::MAX),
            last_ns: AtomicU64::new(0),
            errors: AtomicUsize::new(0),
        }
    }

    fn ns(&self, at: Instant) -> u64 {
        u64::try_from(at.duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    /// The time just before a task's spawn.
    fn spawning(&self) -> Instant {
        let now = Instant::now();
        self.first_ns.fetch_min(self.ns(now), Ordering::Relaxed);
        now
    }

    /// A task's first poll, at `polled`.
    fn started(&self, spawned: Instant, polled: Instant) {
        push(&self.starts_ms, ms_between(spawned, polled));
    }

    /// A task's connection, made at `connected`.
    fn connected(&self, polled: Instant, connected: Instant) {
        push(&self.connects_ms, ms_between(polled, connected));
    }

    /// A task's end: its error counted (the first few printed, so a
    /// failure is never silent), its end time kept.
    fn ended(&self, outcome: std::io::Result<()>) {
        if let Err(e) = outcome {
            if self.errors.fetch_add(1, Ordering::Relaxed) < 3 {
                eprintln!("async-io: a connect-burst task failed: {e}");
            }
        }
        self.last_ns
            .fetch_max(self.ns(Instant::now()), Ordering::Relaxed);
        self.done.count_down();
    }
}

fn ms_between(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1e3
}

fn push(list: &Mutex<Vec<f64>>, v: f64) {
    list.lock().unwrap_or_else(|e| e.into_inner()).push(v);
}

fn take(list: &Mutex<Vec<f64>>) -> Vec<f64> {
    std::mem::take(&mut *list.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Runs one burst on `sys` and measures.
///
/// # Errors
///
/// When the system or the listener cannot be set up, or the tasks do not
/// end within [`LIMIT`]. Failed tasks are counted in `errors`.
pub(super) fn run(ctx: &RunCtx, sys: Sys) -> Result<Measured, String> {
    let wanted = ctx.items_or(SCALES.at(ctx.scale)).max(1);
    let fd_limit = open_file_limit();
    // Two descriptors per connection (client and server side).
    let tasks = match fd_limit {
        Some(limit) => wanted.min(limit.saturating_sub(SPARE_FDS) / 2).max(1),
        None => wanted,
    };
    let shared = Arc::new(Shared::new(tasks));
    let _follow = ctx.follow(&shared.done);
    let finished = match sys {
        Sys::Tidepool1Slot => burst_tidepool(tasks, &shared)?,
        Sys::TokioCurrentThread => burst_tokio(tasks, &shared)?,
    };
    if !finished {
        return Err(format!(
            "{} of {tasks} tasks ended within {LIMIT:?}",
            shared.done.finished()
        ));
    }
    let starts = take(&shared.starts_ms);
    let connects = take(&shared.connects_ms);
    let start = Summary::of(&starts).ok_or("no task started")?;
    let first = shared.first_ns.load(Ordering::Relaxed);
    let last = shared.last_ns.load(Ordering::Relaxed);
    let mut m = Measured::default();
    m.put(MEAN_START, start.mean);
    m.put("p50_start_ms", start.p50);
    m.put("p99_start_ms", start.p99);
    m.put("max_start_ms", start.max);
    if let Some(c) = Summary::of(&connects) {
        m.put("mean_connect_ms", c.mean);
    }
    m.put("wall_ms", last.saturating_sub(first) as f64 / 1e6);
    m.put("errors", shared.errors.load(Ordering::Relaxed) as f64);
    m.put("connections", connects.len() as f64);
    let mut note = format!("{tasks} tasks, {} connected.", connects.len());
    if tasks < wanted {
        let _ = write!(
            note,
            " Fewer tasks than the {wanted} asked for: the open-file limit is {}.",
            fd_limit.unwrap_or(0)
        );
    }
    m.note = Some(note);
    Ok(m)
}

/// The burst on a fresh one-slot pool; whether every task ended in time.
fn burst_tidepool(tasks: usize, shared: &Arc<Shared>) -> Result<bool, String> {
    let pool = TidepoolConfig {
        concurrency: Some(1),
        controller: None,
        max_threads: None,
    }
    .build()?;
    let listener = tidepool::Async::<TcpListener>::bind_with_backlog(([127, 0, 0, 1], 0), BACKLOG)
        .map_err(|e| format!("listener on 127.0.0.1: {e}"))?;
    let addr = listener.get_ref().local_addr().map_err(|e| e.to_string())?;
    let server = pool.spawn(async move {
        for _ in 0..tasks {
            let (stream, _) = listener.accept().await?;
            drop(tidepool::spawn(echo_async(stream)));
        }
        Ok::<_, std::io::Error>(())
    });
    let spawner = shared.clone();
    drop(pool.spawn(async move {
        for _ in 0..tasks {
            let shared = spawner.clone();
            let spawned = shared.spawning();
            drop(tidepool::spawn(async move {
                let outcome = client_tidepool(addr, spawned, &shared).await;
                shared.ended(outcome);
            }));
        }
    }));
    let finished = shared.done.wait_timeout(LIMIT);
    if finished {
        if let Err(e) = server.join() {
            eprintln!("async-io: connect-burst server task: {e}");
        }
    }
    shutdown_pool(&pool);
    Ok(finished)
}

/// The burst on a fresh tokio current-thread runtime; whether every task
/// ended in time.
fn burst_tokio(tasks: usize, shared: &Arc<Shared>) -> Result<bool, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let finished = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.set_reuseaddr(true)?;
        socket.bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let listener = socket.listen(BACKLOG)?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            for _ in 0..tasks {
                let (stream, _) = listener.accept().await?;
                tokio::spawn(echo_tokio(stream));
            }
            Ok::<_, std::io::Error>(())
        });
        let mut handles = Vec::with_capacity(tasks);
        for _ in 0..tasks {
            let shared = shared.clone();
            let spawned = shared.spawning();
            handles.push(tokio::spawn(async move {
                let outcome = client_tokio(addr, spawned, &shared).await;
                shared.ended(outcome);
            }));
        }
        let all = async {
            for h in handles {
                let _ = h.await;
            }
        };
        Ok::<_, std::io::Error>(tokio::time::timeout(LIMIT, all).await.is_ok())
    });
    rt.shutdown_timeout(Duration::from_secs(10));
    finished.map_err(|e| format!("listener on 127.0.0.1: {e}"))
}

/// One task over tidepool's `Async`: connect, one byte there and back.
async fn client_tidepool(
    addr: SocketAddr,
    spawned: Instant,
    shared: &Shared,
) -> std::io::Result<()> {
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    let polled = Instant::now();
    shared.started(spawned, polled);
    let mut stream = tidepool::Async::<TcpStream>::connect(addr).await?;
    shared.connected(polled, Instant::now());
    stream.write_all(&[BYTE]).await?;
    let mut back = [0u8; 1];
    stream.read_exact(&mut back).await?;
    check(back)
}

/// One task over tokio's sockets: connect, one byte there and back.
async fn client_tokio(addr: SocketAddr, spawned: Instant, shared: &Shared) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let polled = Instant::now();
    shared.started(spawned, polled);
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    shared.connected(polled, Instant::now());
    stream.write_all(&[BYTE]).await?;
    let mut back = [0u8; 1];
    stream.read_exact(&mut back).await?;
    check(back)
}

/// The echo must be the byte sent.
fn check(back: [u8; 1]) -> std::io::Result<()> {
    if back == [BYTE] {
        Ok(())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the echo differs from the byte sent",
        ))
    }
}

/// Mean start latency per connect-burst run, if any ran.
pub(super) fn plot(runs: &[RunResult]) -> Option<Plot> {
    let bars: Vec<(String, f64)> = super::metric_bars(runs, MEAN_START)
        .into_iter()
        .filter(|(id, _)| id == TIDEPOOL_1SLOT || id == TOKIO_CURRENT_THREAD)
        .collect();
    (!bars.is_empty()).then(|| {
        Plot::bars(
            "async-io-connect-burst-start",
            (
                "Connect burst: mean start latency",
                "Lower is better: 2,000 tasks spawned at once on one slot, each connecting over loopback.",
            ),
            "mean start, ms",
            bars,
        )
    })
}

/// The connect burst's part of the summary: tidepool's mean start against
/// tokio current-thread's (medians), and whether the goal is met.
pub(super) fn verdict(exp: &ExperimentResult) -> Option<String> {
    let mean = |id| median(exp, id, MEAN_START);
    let p99 = |id| median(exp, id, "p99_start_ms");
    let ours = mean(TIDEPOOL_1SLOT)?;
    let mut s = format!(
        "Connect burst on one slot: tidepool's mean start {}",
        ms(ours)
    );
    if let Some(p) = p99(TIDEPOOL_1SLOT) {
        let _ = write!(s, " (p99 {})", ms(p));
    }
    let errors: f64 = [TIDEPOOL_1SLOT, TOKIO_CURRENT_THREAD]
        .iter()
        .filter_map(|id| median(exp, id, "errors"))
        .sum();
    let Some(theirs) = mean(TOKIO_CURRENT_THREAD) else {
        let _ = write!(
            s,
            "; {}. Compare with the tokio current-thread run for a verdict.",
            count(errors, "failed task", "failed tasks")
        );
        return Some(s);
    };
    let _ = write!(s, ", tokio current-thread's {}", ms(theirs));
    if let Some(p) = p99(TOKIO_CURRENT_THREAD) {
        let _ = write!(s, " (p99 {})", ms(p));
    }
    let _ = write!(
        s,
        ", {} tokio's; {}. Verdict: ",
        times(ours, theirs),
        count(errors, "failed task", "failed tasks")
    );
    s.push_str(if ours <= theirs {
        "tidepool's mean start is at most tokio current-thread's: goal met."
    } else {
        "tidepool's mean start is above tokio current-thread's: goal not met."
    });
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::async_io::EXPERIMENT;
    use crate::experiments::testing::{done_run, result_of, verdict_of};

    /// Row `id`, finished with these figures.
    fn done(id: &str, mean: f64, p99: f64, errors: f64) -> RunResult {
        let figures = [
            (MEAN_START, mean),
            ("p99_start_ms", p99),
            ("errors", errors),
        ];
        done_run(&EXPERIMENT, id, &figures)
    }

    #[test]
    fn the_verdict_holds_tidepools_mean_start_to_tokio_current_threads() {
        let behind = verdict_of(
            &EXPERIMENT,
            vec![
                done(TIDEPOOL_1SLOT, 120.0, 300.0, 0.0),
                done(TOKIO_CURRENT_THREAD, 50.0, 110.0, 0.0),
            ],
        );
        assert_eq!(
            behind.as_deref(),
            Some(
                "Connect burst on one slot: tidepool's mean start 120 ms (p99 300 ms), tokio \
                 current-thread's 50 ms (p99 110 ms), 2.4x tokio's; 0 failed tasks. Verdict: \
                 tidepool's mean start is above tokio current-thread's: goal not met."
            )
        );
        let met = verdict_of(
            &EXPERIMENT,
            vec![
                done(TIDEPOOL_1SLOT, 4.5, 9.0, 1.0),
                done(TOKIO_CURRENT_THREAD, 4.5, 12.0, 0.0),
            ],
        );
        assert_eq!(
            met.as_deref(),
            Some(
                "Connect burst on one slot: tidepool's mean start 4.5 ms (p99 9.0 ms), tokio \
                 current-thread's 4.5 ms (p99 12 ms), 1.0x tokio's; 1 failed task. Verdict: \
                 tidepool's mean start is at most tokio current-thread's: goal met."
            )
        );
    }

    #[test]
    fn the_burst_is_a_workload_of_its_own_judged_by_its_mean_start() {
        use crate::report::table::{format_ratio, headline_table, table};
        assert_eq!(EXPERIMENT.headline_of(TOKIO_CURRENT_THREAD), MEAN_START);
        assert_eq!(EXPERIMENT.headline_of(TIDEPOOL_1SLOT), MEAN_START);
        assert_eq!(EXPERIMENT.headline_of("tokio"), "ns_per_round_trip");
        let echo = |id: &str, ns: f64| done_run(&EXPERIMENT, id, &[("ns_per_round_trip", ns)]);
        let exp = result_of(
            &EXPERIMENT,
            vec![
                echo(super::super::TIDEPOOL_ASYNC, 100.0),
                echo(super::super::TOKIO, 150.0),
                done(TIDEPOOL_1SLOT, 2.0, 5.0, 0.0),
                done(TOKIO_CURRENT_THREAD, 1.0, 2.0, 0.0),
            ],
        );
        let t = table(&exp);
        let ratio = t.header.len() - 2;
        assert_eq!(
            t.header[ratio],
            "ns_per_round_trip or mean_start_ms ÷ same workload's tidepool (lower is better)"
        );
        let ratios: Vec<&str> = t.rows.iter().map(|r| r[ratio].as_str()).collect();
        let slower = format_ratio(1.5);
        let faster = format_ratio(0.5);
        assert_eq!(ratios, ["baseline", &slower, "baseline", &faster]);
        let short = headline_table(&exp, &t);
        assert_eq!(
            short.header[2..4],
            ["ns_per_round_trip".to_string(), MEAN_START.to_string()]
        );
    }

    #[test]
    fn without_tokios_row_there_is_no_verdict_and_without_tidepools_no_line() {
        let alone = verdict_of(&EXPERIMENT, vec![done(TIDEPOOL_1SLOT, 3.0, 7.0, 0.0)]).unwrap();
        assert!(alone.ends_with(
            "; 0 failed tasks. Compare with the tokio current-thread run for a verdict."
        ));
        assert!(!alone.contains("Verdict"), "{alone}");
        assert_eq!(
            verdict_of(&EXPERIMENT, vec![done(TOKIO_CURRENT_THREAD, 3.0, 7.0, 0.0)]),
            None
        );
    }
}

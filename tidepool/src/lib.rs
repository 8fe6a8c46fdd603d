//! tidepool: one thread pool for closures and async tasks that keeps every
//! core busy with useful work, whatever that work does.
//!
//! * Work items ([`spawn_fn`]) and async tasks ([`spawn`]) run on the same
//!   workers.
//! * A pool has `concurrency` running slots (one per core by default). When a
//!   worker blocks — a synchronous HTTP call, `thread::sleep`, a contended
//!   lock — the monitor sees it in the kernel's thread state and gives its
//!   slot to another worker at once. CPU-bound work never adds threads.
//! * An async task that awaits a timer or a socket ([`sleep`], [`Async`])
//!   holds no thread at all.
//! * Urgent work can jump the queue ([`Priority`]).
//!
//! # Quick start
//!
//! ```
//! use std::time::Duration;
//!
//! // The process-wide pool, built on first use with the defaults.
//! let work_item = tidepool::spawn_fn(|| {
//!     std::thread::sleep(Duration::from_millis(10)); // blocking is fine
//!     "slept"
//! });
//! let task = tidepool::spawn(async {
//!     tidepool::sleep(Duration::from_millis(10)).await; // holds no thread
//!     "awaited"
//! });
//! assert_eq!(work_item.join().unwrap(), "slept");
//! assert_eq!(tidepool::block_on(task).unwrap(), "awaited");
//!
//! // Or a pool of your own.
//! let pool = tidepool::Pool::builder().concurrency(2).build()?;
//! let sum = pool.spawn_fn(|| (1..=100).sum::<u32>()).join().unwrap();
//! assert_eq!(sum, 5050);
//! pool.shutdown().unwrap();
//! # Ok::<(), tidepool::BuildError>(())
//! ```

/// The README's examples, compiled and run as doc-tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

// The layers, top to bottom. A module names only modules below it (checked
// by `.ci/modcycles`); ARCHITECTURE.md at the repository root says what each
// one owns and how a task travels through them.
//
//   global ─▶ pool ─▶ fair ─▶ task ─▶ worker ─▶ runtime ─▶ control ─▶ metrics, sys, sync
//              │                        ▲          ▲
//              └──────▶ monitor ────────┴──────────┘
//
// * pool:    Pool, TaskBuilder, Builder: the public face; starts the monitor.
// * fair:    groups and concurrent/exclusive pairs (admission gates).
// * task:    JoinHandle and the task errors users see.
// * monitor: the thread that finds blocked workers and applies the policy.
// * worker:  worker threads: spawning, scheduling, the run loop, thread starts.
// * runtime: the state a pool shares: queues, entries, parking, the latch,
//            the task cell and the thread-locals. Starts no thread.
// * control: slot accounting, policies, pacing, the monitor's signal.
mod control;
mod fair;
mod global;
#[cfg(all(test, tidepool_loom))]
mod loom_models;
mod metrics;
mod monitor;
mod pool;
mod runtime;
mod sync;
mod sys;
mod task;
mod trace;
mod worker;

pub use async_io::{Async, Timer};
pub use control::Controller;
pub use fair::{
    ConcurrentSpawner, ExclusiveSpawner, Group, GroupBuilder, GroupError, GroupMetrics,
    QUEUE_BUDGET_PER_SLOT,
};
pub use global::{block_on, global, spawn, spawn_fn, GlobalPoolError};
pub use metrics::{LatencySummary, Metrics, ThreadSample};
pub use pool::{
    BuildError, Builder, Pool, ShutdownError, TaskBuilder, MAX_THREADS_LIMIT, MIN_STACK_SIZE,
};
pub use runtime::{PanicPayload, Priority};
pub use task::{JoinError, JoinHandle, SpawnError, TaskPanic};

use std::time::{Duration, Instant};

/// Waits for `duration` without holding a thread: the task is parked in the
/// timer reactor and woken when the time is up. Returns the instant it woke.
///
/// ```
/// use std::time::{Duration, Instant};
/// let start = Instant::now();
/// tidepool::block_on(tidepool::sleep(Duration::from_millis(5)));
/// assert!(start.elapsed() >= Duration::from_millis(5));
/// ```
pub async fn sleep(duration: Duration) -> Instant {
    Timer::after(duration).await
}

/// Lets other tasks run: the calling task is woken at once and re-queued
/// behind the tasks already queued on its worker (on its lane's queue when
/// not on a worker; tasks queued from outside the pool get a turn at least
/// once in 61 picks), then resumes. Use it in a
/// long computation inside an async task so it does not hold its worker
/// while other tasks wait (a closure from `spawn_fn` cannot yield: it runs
/// to its end).
///
/// ```
/// let handle = tidepool::spawn(async {
///     let mut sum = 0u64;
///     for i in 0..1_000u64 {
///         sum += i;
///         if i % 100 == 0 {
///             tidepool::yield_now().await;
///         }
///     }
///     sum
/// });
/// assert_eq!(handle.join().unwrap(), 499_500);
/// ```
pub async fn yield_now() {
    futures_lite::future::yield_now().await;
}

/// Runs `future` for at most `duration`: its output, or [`Elapsed`] if the
/// time ran out first (the future is then dropped, which cancels it). The
/// wait holds no thread (a timer in the reactor, as [`sleep`]). A future
/// that is ready at once wins even with a zero duration.
///
/// # Errors
///
/// [`Elapsed`] if `duration` passed before `future` completed.
///
/// ```
/// use std::time::Duration;
///
/// let quick = tidepool::block_on(tidepool::timeout(Duration::from_secs(5), async { 1 }));
/// assert_eq!(quick, Ok(1));
///
/// let never = std::future::pending::<()>();
/// let err = tidepool::block_on(tidepool::timeout(Duration::from_millis(5), never)).unwrap_err();
/// assert_eq!(err.duration(), Duration::from_millis(5));
/// ```
pub async fn timeout<F: std::future::Future>(
    duration: Duration,
    future: F,
) -> Result<F::Output, Elapsed> {
    let output = async { Ok(future.await) };
    let timer = async {
        Timer::after(duration).await;
        Err(Elapsed { duration })
    };
    futures_lite::future::or(output, timer).await
}

/// The error of [`timeout`]: the time ran out before the future completed.
///
/// ```
/// use std::time::Duration;
/// let never = std::future::pending::<()>();
/// let err = tidepool::block_on(tidepool::timeout(Duration::from_millis(1), never)).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "timed out after 1ms before the future completed: raise the timeout, or handle Elapsed as a failure"
/// );
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Elapsed {
    duration: Duration,
}

impl Elapsed {
    /// The timeout that passed.
    ///
    /// ```
    /// use std::time::Duration;
    /// let never = std::future::pending::<()>();
    /// let err = tidepool::block_on(tidepool::timeout(Duration::from_millis(2), never)).unwrap_err();
    /// assert_eq!(err.duration(), Duration::from_millis(2));
    /// ```
    pub fn duration(&self) -> Duration {
        self.duration
    }
}

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "timed out after {:?} before the future completed: raise the timeout, or handle Elapsed as a failure",
            self.duration
        )
    }
}

impl std::fmt::Debug for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Elapsed: {self}")
    }
}

impl std::error::Error for Elapsed {}

/// Runs `f`, a piece of code known to block, and tells the pool so first.
///
/// Called on a pool worker, the worker gives its running slot to another
/// worker before `f` runs, so the pool keeps `concurrency` workers running
/// meanwhile. When the task ends, the worker takes a slot back or, if they are
/// all taken, gives way. Called outside a pool it just runs `f`.
///
/// The monitor detects blocking by itself within about a millisecond;
/// declaring it skips that delay.
///
/// ```
/// let handle = tidepool::spawn_fn(|| {
///     tidepool::blocking(|| std::thread::sleep(std::time::Duration::from_millis(5)));
///     "done"
/// });
/// assert_eq!(handle.join().unwrap(), "done");
/// ```
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    worker::declare_blocking();
    f()
}

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

mod builder;
mod control;
mod fair;
mod global;
mod metrics;
mod pool;
mod shared;
mod shutdown;
mod sync;
mod sys;
mod task;
mod worker;

pub use async_io::{Async, Timer};
pub use builder::{BuildError, Builder, MAX_THREADS_LIMIT, MIN_STACK_SIZE};
pub use control::Controller;
pub use fair::{
    ConcurrentSpawner, ExclusiveSpawner, Group, GroupBuilder, GroupError, GroupMetrics,
    QUEUE_BUDGET_PER_SLOT,
};
pub use global::{block_on, global, spawn, spawn_fn};
pub use metrics::{LatencySummary, Metrics, ThreadSample};
pub use pool::{Pool, ShutdownError, TaskBuilder};
pub use task::{JoinError, JoinHandle, PanicPayload, Priority, SpawnError};

/// The admission state machine of groups and pairs, for the loom model in
/// `tests/loom_group.rs` only.
#[cfg(tidepool_loom)]
#[doc(hidden)]
pub mod loom_fair {
    pub use crate::fair::admission::*;
}

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

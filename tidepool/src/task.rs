//! Task handles: [`JoinHandle`], [`JoinError`], [`SpawnError`] and the
//! wrapper every spawned future runs inside.
//!
//! Task cells, waking and join come from `async-task`. Closures run as tasks
//! too (a future that calls the closure in its first poll), so there is one
//! code path. The wrapper future (see [`tracked`]) adds what async-task does
//! not do: it catches panics, records the queue-to-first-poll latency, and
//! keeps the pool's counters honest — a future dropped before it finished
//! counts as cancelled, so spawned = completed + panicked + cancelled + live.

use crate::metrics::EndCounter;
use crate::sync::Arc;
use futures_lite::FutureExt;
use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The payload of a panic caught in a task, as `std::panic::catch_unwind`
/// returns it.
pub type PanicPayload = Box<dyn Any + Send + 'static>;

/// The scheduling lane of a task: higher lanes are served first.
///
/// The default is [`Priority::Normal`]. Lower lanes never starve: see
/// [`TaskBuilder::priority`](crate::TaskBuilder::priority) for the bound.
///
/// ```
/// use tidepool::{Pool, Priority};
/// let pool = Pool::builder().concurrency(1).build().unwrap();
/// let urgent = pool.task().priority(Priority::High).spawn_fn(|| "now");
/// assert_eq!(urgent.join().unwrap(), "now");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    /// Served before everything else.
    High,
    /// The default lane.
    #[default]
    Normal,
    /// Served when nothing else waits, and at a bounded rate when it does.
    Low,
}

/// What the scheduler needs to know about a task without polling it.
#[derive(Debug)]
pub(crate) struct TaskMeta {
    pub(crate) priority: Priority,
    /// An admission gate (a group, a concurrent/exclusive pair) that decides
    /// when the task may enter the pool's queues. `None` for plain tasks.
    pub(crate) gate: Option<Arc<dyn Gate>>,
}

impl TaskMeta {
    /// A plain task of the given priority.
    pub(crate) fn plain(priority: Priority) -> Self {
        TaskMeta {
            priority,
            gate: None,
        }
    }
}

/// Admission control between "the task was woken" and "the task is queued in
/// the pool". Implemented by the fairness module (`fair`).
///
/// The contract:
///
/// * [`Gate::admit`] is called every time a gated task is scheduled (first
///   spawn and every wake). It returns the runnable to let it into the pool's
///   queues now, or keeps it (returns `None`) and hands it to
///   [`Shared::push_ready`](crate::shared::Shared::push_ready) later.
/// * [`Gate::after_run`] is called by the worker right after every run (poll)
///   of a gated task, panicking or not, so the gate can count runs and admit
///   the next task.
pub(crate) trait Gate: Send + Sync + std::fmt::Debug {
    /// See the trait docs.
    fn admit(&self, runnable: Runnable) -> Option<Runnable>;
    /// See the trait docs.
    fn after_run(&self);
}

/// A runnable task of a tidepool pool.
pub(crate) type Runnable = async_task::Runnable<TaskMeta>;

type TaskOutput<T> = Result<T, PanicPayload>;

/// Wraps `future` for a task: panics are caught, the first poll records its
/// start latency, and the end of the task (or its drop before the end) is
/// counted exactly once.
///
/// The wrapper holds no reference to the pool (one shared reference count
/// touched by two cores per task costs more than the rest of the wrapper): a
/// task's future is only ever polled or dropped by its own pool's workers, or
/// by its pool draining its queues, and both tell `worker::with_task_pool`
/// which pool that is.
pub(crate) fn tracked<F>(future: F) -> impl Future<Output = TaskOutput<F::Output>> + Send + 'static
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let queued_at = start_sampler::stamp();
    let mut guard = EndGuard {
        outcome: EndCounter::Cancelled,
    };
    async move {
        if queued_at != start_sampler::NOT_SAMPLED {
            crate::worker::record_start(crate::sys::ticks().saturating_sub(queued_at));
        }
        let output = AssertUnwindSafe(future).catch_unwind().await;
        guard.outcome = match output {
            Ok(_) => EndCounter::Completed,
            Err(_) => EndCounter::Panicked,
        };
        // `guard` drops here, at the end of the task, and counts the outcome.
        drop(guard);
        output
    }
}

/// Frees a work item's task cell on the thread that allocated it.
///
/// Every task is a cell the spawning thread allocates. Freed by the worker
/// that ran it — another core — the allocator's free lists bounce between the
/// cores: with glibc, a spawner and two workers ran tiny work items at ~400 ns
/// each, against ~310 ns (from outside the pool) and ~220 ns (from inside)
/// when the spawning thread frees the cells itself (examples/spawn_profile.rs,
/// two workers). So the spawning thread keeps a waker of each work item it
/// spawns — a reference that keeps the cell alive — in a short ring, and drops
/// the oldest as new ones come: by then the item has usually run, and the
/// cell is freed here, into this thread's allocator cache.
///
/// Only for closures: a closure's future finishes in its first poll, so the
/// kept waker never keeps an unfinished task alive (an async task whose only
/// reference were this waker would otherwise linger until evicted). A kept
/// waker is never woken; if the item has not run by eviction, dropping it is
/// an ordinary reference drop and the worker frees the cell as before.
pub(crate) mod local_free {
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::task::Waker;

    /// Cells kept per spawning thread: ~25 KiB of 96-byte cells; long enough
    /// that the item has usually run by the time it is evicted.
    const KEPT: usize = 256;

    thread_local! {
        static RING: RefCell<VecDeque<Waker>> = const { RefCell::new(VecDeque::new()) };
    }

    /// Keeps `waker` (of a work item just spawned) and drops the oldest kept.
    pub(crate) fn keep(waker: Waker) {
        let evicted = RING.try_with(|ring| {
            let mut ring = ring.borrow_mut();
            let evicted = if ring.len() >= KEPT {
                ring.pop_front()
            } else {
                None
            };
            ring.push_back(waker);
            evicted
        });
        // Dropped outside the borrow: freeing a cell runs no user code for a
        // finished task, but a task's last reference may run its destructor.
        drop(evicted);
    }
}

/// Which spawns get a queue-to-start measurement.
///
/// Reading the time-stamp counter at spawn and at first poll, and recording
/// the difference, cost ~75 ns of a ~250 ns tiny task on the project machine
/// (examples/spawn_parts.rs). So each spawning thread measures every spawn
/// while its spawns are spread out, and one in `BURST_EVERY` while it
/// spawns in a burst (less than `BURST_GAP_TICKS` apart on average). The
/// summary stays exact for the latency-sensitive trickle and statistically
/// sound for floods, whose tasks share the same queue wait.
mod start_sampler {
    use std::cell::Cell;

    /// The stamp of a spawn that is not measured.
    pub(super) const NOT_SAMPLED: u64 = 0;

    /// In a burst, one spawn in this many is measured.
    const BURST_EVERY: u32 = 8;

    /// Spawns closer than this on average (in ticks: ~5-10 µs at 2-4 GHz)
    /// form a burst.
    const BURST_GAP_TICKS: u64 = 20_000;

    thread_local! {
        /// (spawns left until the next measured one, current interval,
        /// stamp of the last measured spawn)
        static STATE: Cell<(u32, u32, u64)> = const { Cell::new((0, 1, 0)) };
    }

    /// A stamp to measure this spawn's start latency from, or [`NOT_SAMPLED`].
    #[inline]
    pub(super) fn stamp() -> u64 {
        STATE
            .try_with(|state| {
                let (left, every, last) = state.get();
                if left > 1 {
                    state.set((left - 1, every, last));
                    return NOT_SAMPLED;
                }
                let now = crate::sys::ticks().max(1);
                let mean_gap = now.saturating_sub(last) / u64::from(every);
                let every = if mean_gap < BURST_GAP_TICKS {
                    BURST_EVERY
                } else {
                    1
                };
                state.set((every, every, now));
                now
            })
            .unwrap_or(NOT_SAMPLED)
    }
}

/// Counts a task's end when dropped: as cancelled unless the wrapper set the
/// outcome first. Dropping the future early (a cancelled handle, shutdown)
/// therefore still counts it.
struct EndGuard {
    outcome: EndCounter,
}

impl Drop for EndGuard {
    fn drop(&mut self) {
        let outcome = self.outcome;
        crate::worker::with_task_pool(|shared, index| shared.task_ended(index, outcome));
    }
}

/// A handle to a spawned task: await it, [`join`](JoinHandle::join) it, or
/// [`cancel`](JoinHandle::cancel) it.
///
/// Dropping a handle *detaches* the task: it still runs to its end.
///
/// ```
/// use tidepool::Pool;
/// let pool = Pool::builder().build().unwrap();
/// let handle = pool.spawn(async { 6 * 7 });
/// assert_eq!(handle.join().unwrap(), 42);
/// ```
#[must_use = "a dropped JoinHandle detaches its task; call .join() or .await to get the output"]
pub struct JoinHandle<T> {
    task: Option<async_task::FallibleTask<TaskOutput<T>, TaskMeta>>,
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(task: async_task::Task<TaskOutput<T>, TaskMeta>) -> Self {
        JoinHandle {
            task: Some(task.fallible()),
        }
    }

    /// A handle for a task that was never accepted: it resolves to
    /// [`JoinError::Cancelled`] at once.
    pub(crate) fn refused() -> Self {
        JoinHandle { task: None }
    }

    /// Waits for the task on this thread and returns its output.
    ///
    /// Called on a pool worker, the wait counts as declared blocking (see
    /// [`blocking`](crate::blocking)): the worker's running slot goes to
    /// another worker for the duration, so a task waiting for another task
    /// cannot deadlock a pool that has room to grow.
    ///
    /// # Errors
    ///
    /// [`JoinError::Cancelled`] if the task was cancelled or refused,
    /// [`JoinError::Panicked`] with the payload if it panicked.
    ///
    /// ```
    /// let handle = tidepool::spawn_fn(|| 1 + 1);
    /// assert_eq!(handle.join().unwrap(), 2);
    /// ```
    pub fn join(self) -> Result<T, JoinError> {
        crate::blocking(|| futures_lite::future::block_on(self))
    }

    /// Cancels the task unless it has already finished; returns true if this
    /// call cancelled it.
    ///
    /// A task that has not started never runs. An async task that has started
    /// is dropped at its next `.await`. A closure already running cannot be
    /// interrupted: it runs to its end and its output is discarded. After a
    /// successful cancel the handle resolves to [`JoinError::Cancelled`]; after
    /// an unsuccessful one (the task had finished) it still yields the output.
    ///
    /// # Panics
    ///
    /// Never here; but a cancelled future is dropped by its task cell
    /// (`async-task`), which aborts the process if the future's destructor
    /// panics. The same holds for tasks dropped unrun when a pool stops.
    ///
    /// ```
    /// use tidepool::{JoinError, Pool};
    /// let pool = Pool::builder().build().unwrap();
    /// let mut handle = pool.spawn(std::future::pending::<()>());
    /// assert!(handle.cancel());
    /// assert!(matches!(handle.join(), Err(JoinError::Cancelled)));
    /// ```
    pub fn cancel(&mut self) -> bool {
        match self.task.take() {
            Some(task) if task.is_finished() => {
                self.task = Some(task);
                false
            }
            // Dropping an async-task handle cancels the task; its future is
            // dropped by a worker (or right here if it is not scheduled).
            Some(task) => {
                drop(task);
                true
            }
            None => false,
        }
    }

    /// Returns true if the task has finished (completed, panicked or was
    /// cancelled). A finished task's output is still available to `join`.
    ///
    /// ```
    /// use tidepool::Pool;
    /// let pool = Pool::builder().build().unwrap();
    /// let mut handle = pool.spawn(std::future::pending::<()>());
    /// assert!(!handle.is_finished());
    /// handle.cancel();
    /// assert!(handle.is_finished());
    /// ```
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().map_or(true, |task| task.is_finished())
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(task) = self.task.as_mut() else {
            return Poll::Ready(Err(JoinError::Cancelled));
        };
        let result = match Pin::new(task).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => Err(JoinError::Cancelled),
            Poll::Ready(Some(Ok(value))) => Ok(value),
            Poll::Ready(Some(Err(payload))) => Err(JoinError::Panicked(payload)),
        };
        self.task = None;
        Poll::Ready(result)
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.detach();
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// Why a task produced no output.
///
/// ```
/// use tidepool::{JoinError, Pool};
/// let pool = Pool::builder().build().unwrap();
/// let err = pool.spawn_fn(|| panic!("boom")).join().unwrap_err();
/// assert!(err.is_panic());
/// assert_eq!(err.to_string(), "task panicked: boom");
/// ```
pub enum JoinError {
    /// The task was cancelled (by its handle, or by shutdown) or refused
    /// because the pool was shut down; it did not run to its end.
    Cancelled,
    /// The task panicked; the payload is what `catch_unwind` returned.
    Panicked(PanicPayload),
}

impl JoinError {
    /// True for [`JoinError::Cancelled`].
    ///
    /// ```
    /// assert!(tidepool::JoinError::Cancelled.is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled)
    }

    /// True for [`JoinError::Panicked`].
    ///
    /// ```
    /// assert!(!tidepool::JoinError::Cancelled.is_panic());
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panicked(_))
    }

    /// The panic payload, to re-raise with `std::panic::resume_unwind`, or
    /// `None` for a cancelled task.
    ///
    /// ```
    /// let err = tidepool::spawn_fn(|| panic!("boom")).join().unwrap_err();
    /// let payload = err.into_panic().unwrap();
    /// assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
    /// ```
    pub fn into_panic(self) -> Option<PanicPayload> {
        match self {
            JoinError::Panicked(payload) => Some(payload),
            JoinError::Cancelled => None,
        }
    }
}

/// The text of a panic payload, when it is a string.
fn panic_message(payload: &PanicPayload) -> Option<&str> {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Cancelled => f.write_str("Cancelled"),
            JoinError::Panicked(payload) => f
                .debug_tuple("Panicked")
                .field(&panic_message(payload).unwrap_or("<non-string payload>"))
                .finish(),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Cancelled => f.write_str("task was cancelled before it finished"),
            JoinError::Panicked(payload) => match panic_message(payload) {
                Some(message) => write!(f, "task panicked: {message}"),
                None => f.write_str("task panicked with a non-string payload"),
            },
        }
    }
}

impl std::error::Error for JoinError {}

/// Returned by [`Pool::try_spawn`](crate::Pool::try_spawn) and
/// [`Pool::try_spawn_fn`](crate::Pool::try_spawn_fn) when the pool takes no
/// more work.
///
/// ```
/// use tidepool::{Pool, SpawnError};
/// let pool = Pool::builder().build().unwrap();
/// pool.shutdown().unwrap();
/// let err = pool.try_spawn_fn(|| ()).unwrap_err();
/// assert_eq!(err, SpawnError::ShutDown);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpawnError {
    /// The pool (or group) was shut down; nothing new is accepted.
    ShutDown,
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::ShutDown => f.write_str(
                "the pool is shut down and accepts no new tasks; spawn on a pool that is still running",
            ),
        }
    }
}

impl std::error::Error for SpawnError {}

//! What a user holds of a spawned task: [`JoinHandle`], and the errors
//! [`JoinError`] and [`SpawnError`]. The task cell itself is the runtime's
//! (`runtime::task`).

use crate::runtime::item::ItemHandle;
use crate::runtime::task::{FallibleCell, TaskCell};
use crate::runtime::PanicPayload;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

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
    task: Option<Cell<T>>,
    /// Never accepted: resolves to [`JoinError::ShutDown`], not `Cancelled`.
    refused: bool,
}

/// The task cell as the handle holds it: a future's as spawned, until the
/// first poll needs the fallible form (a cancelled `Task` panics when
/// polled); or a work item's.
enum Cell<T> {
    Fresh(TaskCell<T>),
    Polled(FallibleCell<T>, ClaimRef),
    Item(ItemHandle<T>),
}

/// The claim of a task whose handle holds it in the fallible form, which
/// does not give its metadata out (async-task 4.7): kept from the fresh
/// form, for `JoinHandle::cancel`.
struct ClaimRef(std::ptr::NonNull<crate::runtime::task::Claim>);

impl ClaimRef {
    fn of<T>(cell: &TaskCell<T>) -> ClaimRef {
        ClaimRef(std::ptr::NonNull::from(&cell.metadata().task.claim))
    }

    fn get(&self) -> &crate::runtime::task::Claim {
        // SAFETY: the pointer was taken from the metadata of the task whose
        // fallible handle sits beside it in the same `Cell::Polled`. (1)
        // async-task keeps a task's metadata in its allocation's header
        // until the allocation is freed, which waits for every handle,
        // this one included, and never moves it. (2) The `ClaimRef` is
        // dropped with (or before) that handle: they live and die in one
        // enum variant. (3) A `Claim` is an atomic, read through `&` only.
        unsafe { self.0.as_ref() }
    }
}

// SAFETY: a `ClaimRef` is a shared reference to a `Claim` (an atomic, `Sync`)
// that outlives it (see `ClaimRef::get`); sending or sharing it is sending or
// sharing that reference.
unsafe impl Send for ClaimRef {}
// SAFETY: as for `Send`.
unsafe impl Sync for ClaimRef {}

impl<T> Cell<T> {
    fn is_finished(&self) -> bool {
        match self {
            Cell::Fresh(task) => task.is_finished(),
            Cell::Polled(task, _) => task.is_finished(),
            Cell::Item(item) => item.is_finished(),
        }
    }

    fn detach(self) {
        match self {
            Cell::Fresh(task) => task.detach(),
            Cell::Polled(task, _) => task.detach(),
            // Dropping an item's handle detaches it.
            Cell::Item(item) => drop(item),
        }
    }
}

impl<T> JoinHandle<T> {
    /// The handle of an accepted task.
    pub(crate) fn new(task: TaskCell<T>) -> Self {
        JoinHandle {
            task: Some(Cell::Fresh(task)),
            refused: false,
        }
    }

    /// The handle of an accepted work item.
    pub(crate) fn from_item(item: ItemHandle<T>) -> Self {
        JoinHandle {
            task: Some(Cell::Item(item)),
            refused: false,
        }
    }

    /// A handle for a task that was never accepted (the pool was shut
    /// down): it resolves to [`JoinError::ShutDown`] at once.
    pub(crate) fn refused() -> Self {
        JoinHandle {
            task: None,
            refused: true,
        }
    }

    /// Waits for the task on this thread and returns its output.
    ///
    /// Called on a pool worker, the thread does not block while the task is
    /// unfinished: it runs the pool's queued work, usually the awaited task
    /// itself if it has not started. So a recursive fork-join written with
    /// `spawn_fn` and `join` needs no more threads than the pool's
    /// `concurrency` while its nested waits fit in half of a worker's stack
    /// (see [`Builder::stack_size`](crate::Builder::stack_size)); a wait past
    /// that blocks, and the pool may start a thread for it. (A helped task
    /// runs on this thread's stack and delays this call's return by its own
    /// length.)
    ///
    /// So do not hold a lock across `join` on a worker that queued work may
    /// take: that work, run here, would block on the lock above the frame
    /// that holds it, a deadlock (see [`join`](crate::join), "A lock held
    /// across `join`"). Release it first, or call `join` inside
    /// [`isolate`](crate::isolate), which waits without running other work
    /// (the task then runs on another worker, given this one's slot).
    ///
    /// # Errors
    ///
    /// [`JoinError::Cancelled`] if the task was cancelled,
    /// [`JoinError::ShutDown`] if it was refused because the pool was shut
    /// down, [`JoinError::Panicked`] with the payload if it panicked.
    ///
    /// ```
    /// let handle = tidepool::spawn_fn(|| 1 + 1);
    /// assert_eq!(handle.join().unwrap(), 2);
    /// ```
    pub fn join(mut self) -> Result<T, JoinError> {
        if let Some(output) = crate::worker::poll_helping(Pin::new(&mut self)) {
            return output;
        }
        // Not a worker, or helping nested too deep: block (declared, if on
        // a worker, so the slot goes to another worker meanwhile).
        crate::worker::declare_pool_wait();
        futures_lite::future::block_on(self)
    }

    /// Cancels the task unless it has already finished or, for a closure,
    /// already started; returns true if this call cancelled it: the task
    /// will not run to its end.
    ///
    /// A task that has not started never runs. An async task that has
    /// started is dropped at its next `.await`. A closure already running
    /// cannot be interrupted: `cancel` returns false and the handle then
    /// yields the closure's output, whether or not the handle was polled
    /// before (in a `select`, say). After a successful cancel the handle
    /// resolves to [`JoinError::Cancelled`]; after an unsuccessful one it
    /// yields the output.
    ///
    /// One case is left to the async runtime beneath: an async task whose
    /// poll is in progress and returns its output in that very poll is
    /// counted completed while its handle says `Cancelled`.
    ///
    /// # Panics
    ///
    /// Never. If the cancelled future's destructor (a captured value's)
    /// panics, the pool catches it and counts it in
    /// [`Metrics::dropped_panics`](crate::Metrics::dropped_panics); the same
    /// holds for tasks dropped unrun when a pool stops.
    ///
    /// ```
    /// use tidepool::{JoinError, Pool};
    /// let pool = Pool::builder().build().unwrap();
    /// let mut handle = pool.spawn(std::future::pending::<()>());
    /// assert!(handle.cancel());
    /// assert!(matches!(handle.join(), Err(JoinError::Cancelled)));
    /// ```
    pub fn cancel(&mut self) -> bool {
        let Some(task) = self.task.take() else {
            return false;
        };
        if task.is_finished() {
            self.task = Some(task);
            return false;
        }
        let claim = match &task {
            Cell::Item(item) => &item.metadata().claim,
            // A group's or a pair's closure is a future with a closure's
            // claim; an async task's claim always lets the cancel through.
            Cell::Fresh(cell) => &cell.metadata().task.claim,
            Cell::Polled(_, claim) => claim.get(),
        };
        if !claim.cancel() {
            // A closure a worker has started: it runs to its end.
            self.task = Some(task);
            return false;
        }
        // Dropping an async-task handle cancels the task; its future is
        // dropped by a worker (or right here if it is not scheduled). A
        // cancelled item is dropped unrun by the worker that finds it.
        drop(task);
        true
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
        self.task.as_ref().is_none_or(|task| task.is_finished())
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(Cell::Fresh(_)) = &self.task {
            if let Some(Cell::Fresh(task)) = self.task.take() {
                // A cancelled `Task` panics when polled; a fallible one
                // resolves to `None`.
                let claim = ClaimRef::of(&task);
                self.task = Some(Cell::Polled(task.fallible(), claim));
            }
        }
        let refused = self.refused;
        let output = match self.task.as_mut() {
            Some(Cell::Polled(task, _)) => match Pin::new(task).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(output) => output.map(|output| output.into_inner()),
            },
            Some(Cell::Item(item)) => match item.poll_output(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(output) => output,
            },
            Some(Cell::Fresh(_)) => unreachable!("made fallible above"),
            None if refused => return Poll::Ready(Err(JoinError::ShutDown)),
            None => return Poll::Ready(Err(JoinError::Cancelled)),
        };
        self.task = None;
        Poll::Ready(match output {
            None => Err(JoinError::Cancelled),
            Some(result) => result.map_err(|payload| JoinError::Panicked(TaskPanic::new(payload))),
        })
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
/// `JoinError` is `Send + Sync + 'static`, so `?` carries it into
/// `Box<dyn Error + Send + Sync>` or `anyhow::Error`. Its `Debug` (what
/// `unwrap()` and `main() -> Result` print) includes the same message as its
/// `Display`.
///
/// New variants may be added: match with a `_` arm, or use
/// [`is_cancelled`](JoinError::is_cancelled) and
/// [`is_panic`](JoinError::is_panic).
///
/// ```
/// use tidepool::{JoinError, Pool};
/// let pool = Pool::builder().build().unwrap();
/// let err = pool.spawn_fn(|| panic!("boom")).join().unwrap_err();
/// assert!(err.is_panic());
/// assert_eq!(err.to_string(), "task panicked: boom");
/// assert_eq!(format!("{err:?}"), "JoinError::Panicked: task panicked: boom");
///
/// // `?` into a boxed error that must be Send + Sync:
/// fn run(pool: &Pool) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
///     Ok(pool.spawn_fn(|| 7).join()?)
/// }
/// assert_eq!(run(&pool).unwrap(), 7);
/// ```
#[non_exhaustive]
pub enum JoinError {
    /// The task was cancelled (by its handle, or by a shutdown that dropped
    /// it unrun or abandoned it); it did not run to its end.
    Cancelled,
    /// The task was refused: the pool (or its group or pair) was already
    /// closed when it was spawned (shut down, or its last handle dropped),
    /// so it never ran. Spawn on a running
    /// pool; [`Pool::try_spawn`](crate::Pool::try_spawn) reports this as a
    /// [`SpawnError`] instead. [`is_cancelled`](JoinError::is_cancelled) is
    /// true for it too, since the task did not run.
    ShutDown,
    /// The task panicked; [`TaskPanic`] holds what `catch_unwind` returned.
    Panicked(TaskPanic),
}

impl JoinError {
    /// True if the task did not run to its end without panicking:
    /// [`JoinError::Cancelled`], or [`JoinError::ShutDown`] (refused, it
    /// never ran).
    ///
    /// ```
    /// assert!(tidepool::JoinError::Cancelled.is_cancelled());
    /// assert!(tidepool::JoinError::ShutDown.is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled | JoinError::ShutDown)
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
    /// `None` for a task that did not panic.
    ///
    /// ```
    /// let err = tidepool::spawn_fn(|| panic!("boom")).join().unwrap_err();
    /// let payload = err.into_panic().unwrap();
    /// assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
    /// ```
    pub fn into_panic(self) -> Option<PanicPayload> {
        match self {
            JoinError::Panicked(panic) => Some(panic.into_payload()),
            JoinError::Cancelled | JoinError::ShutDown => None,
        }
    }

    fn variant(&self) -> &'static str {
        match self {
            JoinError::Cancelled => "Cancelled",
            JoinError::ShutDown => "ShutDown",
            JoinError::Panicked(_) => "Panicked",
        }
    }
}

/// The panic of a task, in [`JoinError::Panicked`]: its message, if the
/// payload was a string, and the payload itself.
///
/// The payload (`Box<dyn Any + Send>`) is not `Sync`; it is kept behind a
/// mutex so that a [`JoinError`] is `Sync` and fits `anyhow::Error` and
/// `Box<dyn Error + Send + Sync>`. [`TaskPanic::into_payload`] gives back the
/// original box, for `std::panic::resume_unwind`.
///
/// ```
/// use tidepool::JoinError;
/// let err = tidepool::spawn_fn(|| std::panic::panic_any(String::from("boom 1")))
///     .join()
///     .unwrap_err();
/// let JoinError::Panicked(panic) = err else { unreachable!() };
/// assert_eq!(panic.message(), Some("boom 1"));
/// let payload = panic.into_payload();
/// assert_eq!(payload.downcast_ref::<String>().unwrap(), "boom 1");
/// ```
pub struct TaskPanic {
    message: Option<String>,
    payload: std::sync::Mutex<PanicPayload>,
}

impl TaskPanic {
    pub(crate) fn new(payload: PanicPayload) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned());
        TaskPanic {
            message,
            payload: std::sync::Mutex::new(payload),
        }
    }

    /// The panic message, when the payload is a `&str` or a `String` (what
    /// `panic!` produces); `None` for other payloads.
    ///
    /// ```
    /// use tidepool::JoinError;
    /// let err = tidepool::spawn_fn(|| std::panic::panic_any(42u8)).join().unwrap_err();
    /// let JoinError::Panicked(panic) = err else { unreachable!() };
    /// assert_eq!(panic.message(), None);
    /// ```
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// The original payload, as `catch_unwind` returned it.
    ///
    /// ```
    /// use tidepool::JoinError;
    /// let err = tidepool::spawn_fn(|| std::panic::panic_any(42u8)).join().unwrap_err();
    /// let JoinError::Panicked(panic) = err else { unreachable!() };
    /// assert_eq!(panic.into_payload().downcast_ref::<u8>(), Some(&42));
    /// ```
    pub fn into_payload(self) -> PanicPayload {
        match self.payload.into_inner() {
            Ok(payload) => payload,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

impl fmt::Debug for TaskPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TaskPanic")
            .field(&self.message().unwrap_or("<non-string payload>"))
            .finish()
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JoinError::{}: {self}", self.variant())
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Cancelled => f.write_str("task was cancelled before it finished"),
            JoinError::ShutDown => f.write_str(
                "task refused: the pool was closed (shut down, or its last Pool handle dropped) before this task was spawned; spawn on a running pool, and keep a handle to it while its tasks spawn",
            ),
            JoinError::Panicked(panic) => match panic.message() {
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
/// assert_eq!(
///     format!("{err:?}"),
///     "SpawnError::ShutDown: the pool is closed (shut down, or its last Pool handle dropped) and accepts no new tasks; spawn on a pool that is still running, and keep a handle to it while its tasks spawn"
/// );
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpawnError {
    /// The pool (or group) was closed: shut down, or its last handle was
    /// dropped (the pool then finishes its tasks in the background);
    /// nothing new is accepted.
    ShutDown,
    /// No worker thread is alive and the OS refused to start one (the last
    /// attempt was made by this spawn): nothing could run the task. Usually
    /// the process's thread limit (`ulimit -u`, `RLIMIT_NPROC`, a cgroup's
    /// `pids.max`) or memory. The pool keeps trying: a later spawn succeeds
    /// once a thread can start.
    NoThreads {
        /// The kind of the last start's error.
        last_error: std::io::ErrorKind,
        /// Its OS error number (`EAGAIN`: the thread limit), if any.
        os_error: Option<i32>,
    },
}

impl SpawnError {
    /// The error for a pool that could not start any thread.
    pub(crate) fn no_threads(failure: crate::runtime::StartFailure) -> Self {
        SpawnError::NoThreads {
            last_error: failure.kind,
            os_error: failure.os_error,
        }
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::ShutDown => f.write_str(
                "the pool is closed (shut down, or its last Pool handle dropped) and accepts no new tasks; spawn on a pool that is still running, and keep a handle to it while its tasks spawn",
            ),
            SpawnError::NoThreads { last_error, os_error } => {
                f.write_str("the pool has no worker thread and the system refused to start one (")?;
                match os_error {
                    Some(code) => write!(f, "{}", std::io::Error::from_raw_os_error(*code))?,
                    None => write!(f, "{last_error}")?,
                }
                f.write_str(
                    "), so nothing could run the task; raise the thread limit (ulimit -u, RLIMIT_NPROC, the cgroup's pids.max) or free threads, then spawn again",
                )
            }
        }
    }
}

impl fmt::Debug for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let variant = match self {
            SpawnError::ShutDown => "ShutDown",
            SpawnError::NoThreads { .. } => "NoThreads",
        };
        write!(f, "SpawnError::{variant}: {self}")
    }
}

impl std::error::Error for SpawnError {}

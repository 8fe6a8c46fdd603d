//! What a user holds of a spawned task: [`JoinHandle`], and the errors
//! [`JoinError`] and [`SpawnError`]. The task cell itself is the runtime's
//! (`runtime::task`).

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
}

/// The task cell as the handle holds it: as spawned, so `cancel` can reach
/// the task's claim (`TaskMeta`), until the first poll needs the fallible
/// form (`async-task`'s `FallibleTask` hides the metadata).
enum Cell<T> {
    Fresh(TaskCell<T>),
    Polled(FallibleCell<T>),
}

impl<T> Cell<T> {
    fn is_finished(&self) -> bool {
        match self {
            Cell::Fresh(task) => task.is_finished(),
            Cell::Polled(task) => task.is_finished(),
        }
    }

    fn detach(self) {
        match self {
            Cell::Fresh(task) => task.detach(),
            Cell::Polled(task) => task.detach(),
        }
    }
}

impl<T> JoinHandle<T> {
    /// The handle of an accepted task.
    pub(crate) fn new(task: TaskCell<T>) -> Self {
        JoinHandle {
            task: Some(Cell::Fresh(task)),
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

    /// Cancels the task unless it has already finished or, for a closure,
    /// already started; returns true if this call cancelled it: the task
    /// will not run to its end.
    ///
    /// A task that has not started never runs. An async task that has
    /// started is dropped at its next `.await`. A closure already running
    /// cannot be interrupted: `cancel` returns false and the handle then
    /// yields the closure's output. After a successful cancel the handle
    /// resolves to [`JoinError::Cancelled`]; after an unsuccessful one it
    /// yields the output.
    ///
    /// (One race is left to the async runtime beneath: an async task whose
    /// poll is in progress and returns its output in that very poll is
    /// counted completed while its handle says `Cancelled`. A handle already
    /// polled, e.g. in a `select`, cancels a closure the same way.)
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
        if let Cell::Fresh(cell) = &task {
            if !cell.metadata().claim.cancel() {
                // A closure a worker has started: it runs to its end.
                self.task = Some(task);
                return false;
            }
        }
        // Dropping an async-task handle cancels the task; its future is
        // dropped by a worker (or right here if it is not scheduled).
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
        self.task.as_ref().map_or(true, |task| task.is_finished())
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(Cell::Fresh(_)) = &self.task {
            if let Some(Cell::Fresh(task)) = self.task.take() {
                self.task = Some(Cell::Polled(task.fallible()));
            }
        }
        let Some(Cell::Polled(task)) = self.task.as_mut() else {
            return Poll::Ready(Err(JoinError::Cancelled));
        };
        let result = match Pin::new(task).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => Err(JoinError::Cancelled),
            Poll::Ready(Some(output)) => output.into_inner().map_err(JoinError::Panicked),
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
#[non_exhaustive]
pub enum SpawnError {
    /// The pool (or group) was shut down; nothing new is accepted.
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
                "the pool is shut down and accepts no new tasks; spawn on a pool that is still running",
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

impl std::error::Error for SpawnError {}

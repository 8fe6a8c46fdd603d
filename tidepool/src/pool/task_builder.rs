//! [`TaskBuilder`]: settings for one task (its priority lane), then the
//! same spawns as [`Pool`]'s.

use super::{execute_in, spawn_fn_in, spawn_in, Pool};
use crate::runtime::Priority;
use crate::task::{JoinHandle, SpawnError};
use std::future::Future;
use std::panic::Location;

/// Settings for one task, from [`Pool::task`].
///
/// ```
/// use tidepool::{Pool, Priority};
/// let pool = Pool::builder().build().unwrap();
/// let low = pool.task().priority(Priority::Low).spawn_fn(|| "later");
/// assert_eq!(low.join().unwrap(), "later");
/// ```
#[derive(Debug, Clone, Copy)]
#[must_use = "a TaskBuilder does nothing until .spawn() or .spawn_fn()"]
pub struct TaskBuilder<'a> {
    pub(super) pool: &'a Pool,
    pub(super) priority: Priority,
}

impl TaskBuilder<'_> {
    /// The task's lane. Workers serve `High` before `Normal` before `Low`,
    /// across stealing too, and in each lane the tasks spawned this way
    /// before those a [`Group`](crate::Group) or a pair admitted. Lower lanes
    /// never starve: every 61st pick of a worker (a prime, so it does not
    /// fall into step with periodic work) starts at a lower queue, each in
    /// turn, so with every lane busy each worker takes at least one task from
    /// each lower lane in every 244 picks.
    ///
    /// Default: [`Priority::Normal`].
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Spawns an async task with these settings. See [`Pool::spawn`].
    #[track_caller]
    pub fn spawn<F>(self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_spawn(future)
            .unwrap_or_else(|_| JoinHandle::refused())
    }

    /// Spawns a closure with these settings. See [`Pool::spawn_fn`].
    #[track_caller]
    pub fn spawn_fn<F, R>(self, work: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.try_spawn_fn(work)
            .unwrap_or_else(|_| JoinHandle::refused())
    }

    /// Runs a closure with these settings, with no handle. See
    /// [`Pool::execute`].
    ///
    /// # Errors
    ///
    /// [`SpawnError::ShutDown`] if the pool accepts no new work;
    /// [`SpawnError::NoThreads`] if no worker thread is alive and the system
    /// refuses to start one.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use tidepool::{Pool, Priority};
    /// let pool = Pool::builder().build().unwrap();
    /// let (done, finished) = mpsc::channel();
    /// pool.task().priority(Priority::High).execute(move || done.send("urgent").unwrap()).unwrap();
    /// assert_eq!(finished.recv().unwrap(), "urgent");
    /// ```
    #[track_caller]
    pub fn execute<F>(self, work: F) -> Result<(), SpawnError>
    where
        F: FnOnce() + Send + 'static,
    {
        execute_in(self.pool.shared(), work, self.priority, Location::caller())
    }

    /// Like [`TaskBuilder::spawn`], but says so if the pool is shut down.
    ///
    /// # Errors
    ///
    /// [`SpawnError::ShutDown`] if the pool accepts no new work;
    /// [`SpawnError::NoThreads`] if no worker thread is alive and the system
    /// refuses to start one.
    #[track_caller]
    pub fn try_spawn<F>(self, future: F) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        spawn_in(
            self.pool.shared(),
            future,
            self.priority,
            Location::caller(),
        )
    }

    /// Like [`TaskBuilder::spawn_fn`], but says so if the pool is shut down.
    ///
    /// # Errors
    ///
    /// [`SpawnError::ShutDown`] if the pool accepts no new work;
    /// [`SpawnError::NoThreads`] if no worker thread is alive and the system
    /// refuses to start one.
    #[track_caller]
    pub fn try_spawn_fn<F, R>(self, work: F) -> Result<JoinHandle<R>, SpawnError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        spawn_fn_in(self.pool.shared(), work, self.priority, Location::caller())
    }
}

//! The public face of a pool: [`Pool`], the handle users spawn on,
//! [`TaskBuilder`] (in `task_builder`) for per-task settings, and
//! [`Builder`] (in `builder`) for the pool's settings; `spawn` is the one
//! path all of them spawn through.

mod builder;
mod spawn;
mod task_builder;

pub use builder::{BuildError, Builder, MAX_THREADS_LIMIT, MIN_STACK_SIZE};
pub(crate) use spawn::{execute_in, spawn_fn_in, spawn_in, wait_here};
pub use task_builder::TaskBuilder;

use crate::metrics::{Metrics, RunningTask};
use crate::runtime::context;
use crate::runtime::{Config, OpenHandle, Priority, Shared};
use crate::sync::Arc;
use crate::task::{JoinHandle, SpawnError};
use crate::{monitor, worker};
use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

/// A thread pool that runs closures and async tasks on the same workers.
///
/// `Pool` is a cheap handle: clone it to share the pool. When the last handle
/// is dropped the pool stops taking work, finishes what it has in the
/// background, and its threads exit; the dropping thread does not wait. An
/// async task that nothing can wake any more (no waker of it is held outside
/// the pool: it awaits `std::future::pending`, say) would never finish: the
/// pool drops it then (its captured values with it) and counts it
/// cancelled, unless its [`JoinHandle`] is still held: then when the handle
/// is dropped. A task whose waker something holds (a timer, a socket, a
/// channel) runs on.
///
/// ```
/// use tidepool::Pool;
///
/// let pool = Pool::builder().build()?;
/// let closure = pool.spawn_fn(|| (1..=10).sum::<u32>());
/// let future = pool.spawn(async { tidepool::sleep(std::time::Duration::from_millis(1)).await; 7 });
/// assert_eq!(closure.join().unwrap() + future.join().unwrap(), 62);
/// # Ok::<(), tidepool::BuildError>(())
/// ```
#[derive(Clone)]
pub struct Pool {
    /// Shared with the pool's groups and pairs: the pool closes when the
    /// last of them is dropped.
    handle: Arc<OpenHandle>,
}

impl Pool {
    /// Starts configuring a pool. See [`Builder`] for the settings and
    /// their defaults.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().concurrency(4).build().unwrap();
    /// assert_eq!(pool.concurrency(), 4);
    /// ```
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// The pool for `config`, with its monitor started; `Err` with the
    /// system's error if the monitor thread could not start.
    pub(crate) fn from_config(config: Config) -> std::io::Result<Pool> {
        // Two descriptors per worker thread (its probe), plus room for the
        // program's own: grown once now instead of in waves during a burst.
        crate::sys::reserve_descriptors(2 * config.max_threads + 256);
        let handle = OpenHandle::new(config);
        monitor::start(handle.shared())?;
        monitor::sentinel::start(handle.shared());
        worker::start_floor(handle.shared());
        Ok(Pool { handle })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        self.handle.shared()
    }

    /// The pool whose task is running on this thread, or `None` outside any
    /// pool (or in a pool whose every handle was dropped: it is closing).
    ///
    /// The free functions ([`spawn`](crate::spawn), [`join`](crate::join),
    /// ...) use the pool whose task runs on this thread, and the global pool
    /// outside any pool. In a closing pool (every handle dropped) they still
    /// use that pool, which refuses new tasks ([`JoinError::ShutDown`](crate::JoinError::ShutDown)) but
    /// still runs `join` and `scope`: a task that spawns keeps its pool's
    /// handle alive, or holds one of its own.
    ///
    /// ```
    /// use tidepool::Pool;
    /// assert!(Pool::current().is_none());
    /// let pool = Pool::builder().concurrency(1).build()?;
    /// let inner = pool.spawn_fn(|| Pool::current().map(|p| p.concurrency()));
    /// assert_eq!(inner.join().unwrap(), Some(1));
    /// # Ok::<(), tidepool::BuildError>(())
    /// ```
    pub fn current() -> Option<Pool> {
        OpenHandle::current().map(|handle| Pool { handle })
    }

    /// Runs `a` and `b`, possibly in parallel, on this pool and returns both
    /// results. The closures may borrow from the caller's stack. See
    /// [`join`](crate::join) for how it works and how panics propagate.
    ///
    /// Do not hold a lock across it that the pool's queued work may take:
    /// the wait may run that work on this thread, which then deadlocks on
    /// itself (see [`join`](crate::join), "A lock held across `join`"); or
    /// call it inside [`isolate`](crate::isolate).
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().build().unwrap();
    /// let data = vec![1, 2, 3, 4];
    /// let (left, right) = pool.join(|| data[..2].iter().sum::<i32>(), || data[2..].iter().sum::<i32>());
    /// assert_eq!(left + right, 10);
    /// ```
    #[track_caller]
    pub fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        crate::fork::join_in(self.shared(), std::panic::Location::caller(), a, b)
    }

    /// Runs `op` with a [`Scope`](crate::Scope) on this pool, and returns
    /// once every task spawned in it has finished. See
    /// [`scope`](crate::scope).
    ///
    /// Do not hold a lock across it that the pool's queued work may take:
    /// the scope's end may run that work on this thread, which then
    /// deadlocks on itself (see [`join`](crate::join), "A lock held across
    /// `join`"); or call it inside [`isolate`](crate::isolate).
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().build().unwrap();
    /// let mut counts = [0u32; 4];
    /// pool.scope(|s| {
    ///     for (i, count) in counts.iter_mut().enumerate() {
    ///         s.spawn(move |_| *count = i as u32 * 2);
    ///     }
    /// });
    /// assert_eq!(counts, [0, 2, 4, 6]);
    /// ```
    #[track_caller]
    pub fn scope<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&crate::Scope<'scope>) -> R + Send,
        R: Send,
    {
        crate::fork::scope_in(self.shared(), std::panic::Location::caller(), op)
    }

    /// Runs `future` as a task on the pool. While it awaits (a timer, a
    /// socket, another task) it holds no thread.
    ///
    /// On a shut-down pool the task is dropped and the handle resolves to
    /// [`JoinError::ShutDown`](crate::JoinError::ShutDown) at once; use
    /// [`Pool::try_spawn`] to be told instead.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().build().unwrap();
    /// let handle = pool.spawn(async { "hello" });
    /// assert_eq!(pool.block_on(handle).unwrap(), "hello");
    /// ```
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.task().spawn(future)
    }

    /// Runs `work` (a closure) on the pool. If it blocks (sleeps, waits on a
    /// lock, a socket or a file) the pool notices and lets another worker run.
    ///
    /// On a shut-down pool the closure is dropped and the handle resolves to
    /// [`JoinError::ShutDown`](crate::JoinError::ShutDown) at once.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().build().unwrap();
    /// let handle = pool.spawn_fn(|| std::thread::current().name().map(str::to_owned));
    /// assert!(handle.join().unwrap().unwrap().starts_with("tidepool-"));
    /// ```
    #[track_caller]
    pub fn spawn_fn<F, R>(&self, work: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.task().spawn_fn(work)
    }

    /// Like [`Pool::spawn`], but says so if the pool is shut down.
    ///
    /// # Errors
    ///
    /// [`SpawnError::ShutDown`] if the pool accepts no new work;
    /// [`SpawnError::NoThreads`] if no worker thread is alive and the system
    /// refuses to start one.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().build().unwrap();
    /// assert_eq!(pool.try_spawn(async { 1 }).unwrap().join().unwrap(), 1);
    /// ```
    #[track_caller]
    pub fn try_spawn<F>(&self, future: F) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.task().try_spawn(future)
    }

    /// Like [`Pool::spawn_fn`], but says so if the pool is shut down.
    ///
    /// # Errors
    ///
    /// [`SpawnError::ShutDown`] if the pool accepts no new work;
    /// [`SpawnError::NoThreads`] if no worker thread is alive and the system
    /// refuses to start one.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().build().unwrap();
    /// assert_eq!(pool.try_spawn_fn(|| 1).unwrap().join().unwrap(), 1);
    /// ```
    #[track_caller]
    pub fn try_spawn_fn<F, R>(&self, work: F) -> Result<JoinHandle<R>, SpawnError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.task().try_spawn_fn(work)
    }

    /// Runs `work` (a closure) on the pool, with no handle: fire and forget,
    /// as the threadpool crate's `execute` or `rayon::spawn`. Cheaper than
    /// dropping [`Pool::spawn_fn`]'s handle: no handle is made, returned
    /// or dropped (a drop that releases the cell with a locked
    /// instruction). Everything else is
    /// [`Pool::spawn_fn`]'s: blocking is noticed, a panic is caught (and
    /// counted in [`Metrics::panicked`](crate::Metrics::panicked)), the
    /// pool's hooks and metrics see the item.
    ///
    /// # Errors
    ///
    /// [`SpawnError::ShutDown`] if the pool accepts no new work (the
    /// closure is dropped here); [`SpawnError::NoThreads`] if no worker
    /// thread is alive and the system refuses to start one.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// let pool = tidepool::Pool::builder().build().unwrap();
    /// let (done, finished) = mpsc::channel();
    /// pool.execute(move || done.send(6 * 7).unwrap()).unwrap();
    /// assert_eq!(finished.recv().unwrap(), 42);
    /// ```
    #[track_caller]
    pub fn execute<F>(&self, work: F) -> Result<(), SpawnError>
    where
        F: FnOnce() + Send + 'static,
    {
        self.task().execute(work)
    }

    /// Starts configuring a [`Group`](crate::Group): a throttled share of
    /// this pool with its own FIFO, limits, weight and priority. See
    /// [`GroupBuilder`](crate::GroupBuilder) for the settings and defaults.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().build().unwrap();
    /// let flood = pool.group().max_concurrency(2).build().unwrap();
    /// assert_eq!(flood.spawn_fn(|| 1).join().unwrap(), 1);
    /// ```
    pub fn group(&self) -> crate::GroupBuilder {
        crate::fair::GroupBuilder::new(Arc::clone(&self.handle))
    }

    /// A concurrent/exclusive pair: items spawned on the
    /// [`ConcurrentSpawner`](crate::ConcurrentSpawner) run up to
    /// `max_concurrency` at once; items spawned on the
    /// [`ExclusiveSpawner`](crate::ExclusiveSpawner) run alone with respect
    /// to the pair. Both sides are FIFO, and a waiting exclusive item is never
    /// starved by a stream of concurrent ones. For async tasks each poll is
    /// a run.
    ///
    /// # Errors
    ///
    /// [`GroupError::ZeroPairConcurrency`](crate::GroupError::ZeroPairConcurrency)
    /// if `max_concurrency` is 0.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().build().unwrap();
    /// let (readers, writer) = pool.concurrent_exclusive(4)?;
    /// let read = readers.spawn_fn(|| "read");
    /// let write = writer.spawn_fn(|| "written");
    /// assert_eq!((read.join().unwrap(), write.join().unwrap()), ("read", "written"));
    /// # Ok::<(), tidepool::GroupError>(())
    /// ```
    pub fn concurrent_exclusive(
        &self,
        max_concurrency: usize,
    ) -> Result<(crate::ConcurrentSpawner, crate::ExclusiveSpawner), crate::GroupError> {
        crate::fair::pair(Arc::clone(&self.handle), max_concurrency)
    }

    /// Per-task settings, such as priority.
    ///
    /// ```
    /// use tidepool::{Pool, Priority};
    /// let pool = Pool::builder().build().unwrap();
    /// let handle = pool.task().priority(Priority::High).spawn(async { 1 });
    /// assert_eq!(handle.join().unwrap(), 1);
    /// ```
    pub fn task(&self) -> TaskBuilder<'_> {
        TaskBuilder {
            pool: self,
            priority: Priority::Normal,
        }
    }

    /// Runs `future` to completion on the calling thread, driving timers and
    /// sockets while it waits. Tasks it spawns with the free functions
    /// ([`spawn`](crate::spawn), ...) run on this pool.
    ///
    /// Called on a worker of a pool, the thread does not block: while the
    /// future is pending it runs that pool's queued work (usually what the
    /// future waits for), so waiting inside the pool never needs another
    /// thread. So do not hold a lock across it that queued work may take:
    /// that work would deadlock on this thread (see [`join`](crate::join),
    /// "A lock held across `join`"); or call it inside
    /// [`isolate`](crate::isolate), which polls only the future.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().build().unwrap();
    /// let answer = pool.block_on(async {
    ///     let a = tidepool::spawn(async { 40 });
    ///     a.await.unwrap() + 2
    /// });
    /// assert_eq!(answer, 42);
    /// ```
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        if let Some(output) = worker::poll_helping(future.as_mut()) {
            return output;
        }
        // Not a worker, or helping nested too deep: block (declared, if on a
        // worker, so the slot goes to another worker meanwhile).
        worker::declare_pool_wait();
        let _tokio = self.shared().config.tokio.enter();
        context::entered(self.shared(), || wait_here(future))
    }

    /// Publishes [`Pool::metrics`] through the [`metrics`](https://docs.rs/metrics)
    /// crate's facade, to whatever recorder the program installed (e.g.
    /// `metrics-exporter-prometheus`; see `examples/prometheus.rs`). Only
    /// with the `metrics` cargo feature.
    ///
    /// The pool's monitor thread already publishes once a second while the
    /// pool is busy, and once when it goes idle, so a scrape is at most
    /// about a second behind. Call this yourself for exact figures at a
    /// given moment (before rendering a scrape, at the end of a batch). It
    /// takes one snapshot (as [`Pool::metrics`]) and sets every series to
    /// it: counters are set to their absolute values, so publishing more
    /// often never counts twice.
    ///
    /// Every series is labelled `pool` = the pool's
    /// [`thread_name`](crate::Builder::thread_name):
    ///
    /// | series | kind | labels |
    /// |---|---|---|
    /// | `tidepool_threads` | gauge | `state`: `running`, `blocked`, `idle` |
    /// | `tidepool_threads_alive`, `tidepool_threads_peak`, `tidepool_concurrency_target` | gauge | |
    /// | `tidepool_tasks_queued`, `tidepool_tasks_in_flight` | gauge | |
    /// | `tidepool_tasks_spawned_total`, `tidepool_tasks_rejected_total` | counter | |
    /// | `tidepool_tasks_ended_total` | counter | `outcome`: `completed`, `panicked`, `cancelled` |
    /// | `tidepool_thread_starts_total` | counter | `reason`: `demand`, `compensation`, `policy` |
    /// | `tidepool_thread_retirements_total` | counter | `reason`: `idle`, `surplus` |
    /// | `tidepool_blocking_total` | counter | `how`: `detected`, `declared` |
    /// | `tidepool_thread_start_failures_total`, `tidepool_oversubscribed_total`, `tidepool_hook_panics_total` | counter | |
    /// | `tidepool_start_latency_seconds` | gauge | `quantile`: `0.5`, `0.99`, `1` (max), since the pool was built |
    /// | `tidepool_start_latency_mean_seconds`, `tidepool_start_latency_samples_total` | gauge, counter | |
    ///
    /// Start latency is published as quantile gauges of the pool's own
    /// histogram (a summary), not as a `metrics` histogram: recording each
    /// start into the facade would put a recorder call on the per-task path.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().thread_name("api").build().unwrap();
    /// pool.spawn_fn(|| ()).join().unwrap();
    /// // With no recorder installed the facade drops the values.
    /// pool.publish_metrics();
    /// ```
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self) {
        self.metrics().publish(&self.shared().config.thread_name);
    }

    /// A snapshot of the pool's counters, latencies and thread counts.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().build().unwrap();
    /// pool.spawn_fn(|| ()).join().unwrap();
    /// assert_eq!(pool.metrics().completed, 1);
    /// ```
    pub fn metrics(&self) -> Metrics {
        self.shared().metrics()
    }

    /// The tasks running now on the pool's workers, by worker index: for
    /// each, its kind's name (the type of its closure or future), where
    /// the first task of its kind was spawned, how long it has run (at
    /// least) and whether its slot was given away (it blocked). A task
    /// that is queued, or an async task between polls, is not running.
    ///
    /// It reads each worker entry the pool has used and locks one small
    /// lock per running task (the monitor's record of when it first saw
    /// it); nothing the workers wait on. For a pool that seems stuck, this
    /// says which work holds the threads.
    ///
    /// ```
    /// use std::sync::mpsc;
    ///
    /// let pool = tidepool::Pool::builder().build().unwrap();
    /// let (release, released) = mpsc::channel::<()>();
    /// let waiting = pool.spawn_fn(move || released.recv().is_ok());
    /// while pool.running().is_empty() {
    ///     std::thread::yield_now();
    /// }
    /// let task = pool.running()[0];
    /// assert!(task.name.ends_with("{{closure}}"), "{task:?}");
    /// // Where it was spawned: the `spawn_fn` call above.
    /// assert_eq!(task.site.map(|site| site.line()), Some(line!() - 7));
    /// release.send(()).unwrap();
    /// assert!(waiting.join().unwrap());
    /// ```
    pub fn running(&self) -> Vec<RunningTask> {
        self.shared().running()
    }

    /// The number of running slots the pool was built with.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().concurrency(3).build().unwrap();
    /// assert_eq!(pool.concurrency(), 3);
    /// ```
    pub fn concurrency(&self) -> usize {
        self.shared().config.concurrency
    }

    /// Stops taking new work, runs everything already accepted (queued,
    /// running or awaiting) to its end, and waits for the worker threads to
    /// exit.
    ///
    /// # Errors
    ///
    /// [`ShutdownError::OnWorkerThread`] if called from one of this pool's
    /// own tasks or threads — including a destructor the pool runs, such as
    /// that of a task dropped unrun while the pool stops: the pool is closed,
    /// but waiting for itself would never end.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().build().unwrap();
    /// let handle = pool.spawn_fn(|| 5);
    /// pool.shutdown().unwrap();
    /// assert_eq!(handle.join().unwrap(), 5);
    /// assert!(pool.spawn_fn(|| 6).join().unwrap_err().is_cancelled());
    /// ```
    pub fn shutdown(&self) -> Result<(), ShutdownError> {
        self.shutdown_until(None)
    }

    /// Like [`Pool::shutdown`], but gives up after `timeout`: the tasks not
    /// finished by then are abandoned. Those not running are cancelled: queued
    /// ones, and async tasks waiting for a wake (their futures are dropped,
    /// releasing what they hold, and their handles say
    /// [`JoinError::is_cancelled`](crate::JoinError::is_cancelled)); running
    /// ones are left to finish on their threads, which exit after them, and
    /// are cancelled at their next wait. A
    /// timeout too long to be a point in time (`Duration::MAX`) waits like
    /// `shutdown`. If every accepted task has ended by the timeout it returns
    /// `Ok`, even if idle worker threads are still exiting (they run nothing
    /// more): so `shutdown_timeout(Duration::ZERO)` on an idle pool is `Ok`.
    ///
    /// # Errors
    ///
    /// [`ShutdownError::TimedOut`] with the number of tasks abandoned, or
    /// [`ShutdownError::OnWorkerThread`] as for `shutdown`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tidepool::{Pool, ShutdownError};
    ///
    /// let pool = Pool::builder().build().unwrap();
    /// let _forever = pool.spawn(std::future::pending::<()>());
    /// let err = pool.shutdown_timeout(Duration::from_millis(50)).unwrap_err();
    /// assert_eq!(err, ShutdownError::TimedOut { abandoned: 1 });
    /// ```
    pub fn shutdown_timeout(&self, timeout: Duration) -> Result<(), ShutdownError> {
        // A timeout too long to represent as an instant waits like `shutdown`.
        self.shutdown_until(Instant::now().checked_add(timeout))
    }

    fn shutdown_until(&self, deadline: Option<Instant>) -> Result<(), ShutdownError> {
        let shared = self.shared();
        shared.close();
        if context::waits_on_itself(shared) {
            return Err(ShutdownError::OnWorkerThread);
        }
        loop {
            // In slices, to notice a pool that can run nothing: no thread
            // alive and the system refusing new ones. Waiting for it to
            // drain would never end.
            let slice = Instant::now() + NO_THREADS_CHECK;
            let until = deadline.map_or(slice, |d| d.min(slice));
            if shared.wait_stopped(Some(until), 0) {
                return Ok(());
            }
            if shared.threads.failing() && worker::can_run(shared).is_err() {
                let abandoned = shared.live();
                // Drops what is queued: those tasks count as cancelled.
                shared.stop();
                if abandoned == 0 {
                    return Ok(());
                }
                return Err(ShutdownError::NoThreads { abandoned });
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
        }
        let abandoned = shared.live();
        shared.stop();
        if abandoned == 0 {
            // Every task ended; only idle threads are still on their way
            // out, and they run nothing more. Nothing was abandoned, so this
            // is no timeout (an idle pool's `shutdown_timeout(ZERO)` said
            // `TimedOut { abandoned: 0 }`).
            return Ok(());
        }
        Err(ShutdownError::TimedOut { abandoned })
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = self.shared();
        f.debug_struct("Pool")
            .field("concurrency", &shared.config.concurrency)
            .field("max_threads", &shared.config.max_threads)
            .field("controller", &shared.config.controller)
            .field("closed", &shared.is_closed())
            .finish()
    }
}

/// How often a waiting shutdown checks that the pool can still run its
/// work at all (see [`ShutdownError::NoThreads`]).
const NO_THREADS_CHECK: Duration = Duration::from_millis(20);

/// Why a shutdown did not complete.
///
/// ```
/// use tidepool::ShutdownError;
/// let err = ShutdownError::TimedOut { abandoned: 3 };
/// assert_eq!(
///     err.to_string(),
///     "shutdown timed out with 3 tasks unfinished; they were abandoned (those not running were cancelled)"
/// );
/// assert!(format!("{err:?}").starts_with("ShutdownError::TimedOut: shutdown timed out with 3 tasks"));
/// assert_eq!(
///     ShutdownError::TimedOut { abandoned: 1 }.to_string(),
///     "shutdown timed out with 1 task unfinished; it was abandoned (those not running were cancelled)"
/// );
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShutdownError {
    /// The timeout passed with tasks still unfinished; they were abandoned.
    TimedOut {
        /// Tasks accepted and not finished when the timeout passed.
        abandoned: usize,
    },
    /// `shutdown` was called from one of the pool's own tasks or threads,
    /// or from a destructor the pool ran while stopping. The pool is closed
    /// and will stop when its tasks end, but the call cannot wait.
    OnWorkerThread,
    /// The pool had no worker thread and the system refused to start one,
    /// so the work left could never run: it was cancelled (queued tasks and
    /// tasks waiting for a wake), and the call returned.
    NoThreads {
        /// Tasks accepted and not finished, abandoned.
        abandoned: usize,
    },
}

impl fmt::Display for ShutdownError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShutdownError::TimedOut { abandoned } => write!(
                f,
                "shutdown timed out with {} unfinished; {} abandoned (those not running were cancelled)",
                tasks(*abandoned),
                if *abandoned == 1 { "it was" } else { "they were" },
            ),
            ShutdownError::NoThreads { abandoned } => write!(
                f,
                "shutdown gave up on {} unfinished: the pool has no worker thread and the system refused to start one (see Metrics::thread_start_failures); raise the thread limit (ulimit -u, RLIMIT_NPROC) or free threads",
                tasks(*abandoned),
            ),
            ShutdownError::OnWorkerThread => f.write_str(
                "shutdown called from a task of the same pool: the pool is closed, but cannot wait for itself; call shutdown from outside the pool",
            ),
        }
    }
}

/// "1 task", "3 tasks": a count of tasks for an error message.
fn tasks(count: usize) -> String {
    if count == 1 {
        "1 task".to_owned()
    } else {
        format!("{count} tasks")
    }
}

impl fmt::Debug for ShutdownError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let variant = match self {
            ShutdownError::TimedOut { .. } => "TimedOut",
            ShutdownError::OnWorkerThread => "OnWorkerThread",
            ShutdownError::NoThreads { .. } => "NoThreads",
        };
        write!(f, "ShutdownError::{variant}: {self}")
    }
}

impl std::error::Error for ShutdownError {}

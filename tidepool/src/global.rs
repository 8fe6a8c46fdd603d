//! The process-wide pool, built lazily with the defaults (or once, earlier,
//! with [`Builder::build_global`]): the equivalent of a runtime's shared
//! pool (`QueueUserWorkItem`, rayon's global pool), and the free functions.
//!
//! Every free function uses *the current pool*: the pool whose task is
//! running on this thread, else the pool whose `block_on` runs on this
//! thread, else the global pool. So work spawned inside a pool's task stays
//! in that pool.

use crate::fork::{self, Scope};
use crate::pool::{execute_in, spawn_fn_in, spawn_in, wait_here, BuildError, Builder, Pool};
use crate::runtime::{context, Priority, Shared};
use crate::sync::Arc;
use crate::task::{JoinHandle, SpawnError};
use std::fmt;
use std::future::Future;
use std::sync::OnceLock;

/// Runs `f` with the current pool (see the module docs).
fn with_current_pool<R>(f: impl FnOnce(&Arc<Shared>) -> R) -> R {
    context::with_current_pool(outside_pool, f)
}

/// The current pool of a thread that is no worker: the pool whose
/// `block_on` runs here, else the global pool.
fn outside_pool() -> Arc<Shared> {
    context::with_current_pool(|| Arc::clone(global().shared()), Arc::clone)
}

static GLOBAL: OnceLock<Pool> = OnceLock::new();

/// The global pool's thread name unless [`Builder::build_global`] was given one.
const GLOBAL_NAME: &str = "tidepool-global";

/// The process-wide pool. It is built on first use with [`Builder`]'s
/// defaults (threads named `tidepool-global-N`), unless
/// [`Builder::build_global`] built it earlier with other settings. It is
/// never shut down.
///
/// # Panics
///
/// If the pool cannot be built because the system refuses the threads
/// every pool needs ([`BuildError::HelperThreadStart`]);
/// the panic names the cause. A later call tries again.
///
/// ```
/// assert!(tidepool::global().concurrency() >= 1);
/// ```
pub fn global() -> &'static Pool {
    GLOBAL.get_or_init(|| {
        Builder::new()
            .default_thread_name(GLOBAL_NAME)
            .build()
            .unwrap_or_else(|error| panic!("tidepool's global pool could not be built: {error}"))
    })
}

impl Builder {
    /// Builds the process-wide pool ([`global`], used by the free functions
    /// outside any pool: [`spawn`], [`spawn_fn`], [`join`], ...) with these settings instead of the
    /// defaults, like rayon's `ThreadPoolBuilder::build_global`. Call it
    /// once, early in `main`, before anything uses the global pool.
    ///
    /// Without [`thread_name`](Builder::thread_name) its threads are named
    /// `tidepool-global-N`, as when it is built lazily.
    ///
    /// # Errors
    ///
    /// [`GlobalPoolError::AlreadyBuilt`] if the global pool exists already
    /// (built by an earlier call, or lazily by a use of it): the settings
    /// were not applied. [`GlobalPoolError::Build`] if the settings are
    /// invalid (see [`Builder::build`]).
    ///
    /// ```
    /// use tidepool::{GlobalPoolError, Pool};
    ///
    /// Pool::builder().concurrency(2).build_global()?;
    /// assert_eq!(tidepool::global().concurrency(), 2);
    ///
    /// // Only once.
    /// let again = Pool::builder().concurrency(3).build_global().unwrap_err();
    /// assert!(matches!(again, GlobalPoolError::AlreadyBuilt));
    /// # Ok::<(), GlobalPoolError>(())
    /// ```
    pub fn build_global(self) -> Result<(), GlobalPoolError> {
        if GLOBAL.get().is_some() {
            return Err(GlobalPoolError::AlreadyBuilt);
        }
        let pool = self
            .default_thread_name(GLOBAL_NAME)
            .build()
            .map_err(GlobalPoolError::Build)?;
        // Lost a race with another build or a first use: this pool has no
        // tasks; dropping its only handle lets its threads exit.
        GLOBAL.set(pool).map_err(|_| GlobalPoolError::AlreadyBuilt)
    }
}

/// Why [`Builder::build_global`] did not build the global pool.
///
/// ```
/// use tidepool::{BuildError, GlobalPoolError, Pool};
/// let err = Pool::builder().concurrency(0).build_global().unwrap_err();
/// assert!(matches!(err, GlobalPoolError::Build(BuildError::ZeroConcurrency)));
/// assert!(err.to_string().starts_with("the global pool was not built: concurrency (0)"));
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GlobalPoolError {
    /// The global pool already exists (built by an earlier `build_global` or
    /// lazily by a first use); these settings were not applied.
    AlreadyBuilt,
    /// The settings were refused.
    Build(BuildError),
}

impl fmt::Display for GlobalPoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobalPoolError::AlreadyBuilt => f.write_str(
                "the global pool is already built (by an earlier build_global or a first use of tidepool::spawn, spawn_fn, block_on or global): call build_global once, at the start of main, before anything uses the global pool",
            ),
            GlobalPoolError::Build(error) => write!(f, "the global pool was not built: {error}"),
        }
    }
}

impl fmt::Debug for GlobalPoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let variant = match self {
            GlobalPoolError::AlreadyBuilt => "AlreadyBuilt",
            GlobalPoolError::Build(_) => "Build",
        };
        write!(f, "GlobalPoolError::{variant}: {self}")
    }
}

impl std::error::Error for GlobalPoolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GlobalPoolError::Build(error) => Some(error),
            GlobalPoolError::AlreadyBuilt => None,
        }
    }
}

/// Spawns an async task on the current pool: the pool running this task,
/// or the global pool outside any pool. See [`Pool::spawn`].
///
/// ```
/// let handle = tidepool::spawn(async { 1 + 1 });
/// assert_eq!(handle.join().unwrap(), 2);
/// ```
#[track_caller]
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let site = std::panic::Location::caller();
    with_current_pool(|shared| spawn_in(shared, future, Priority::Normal, site))
        .unwrap_or_else(|_| JoinHandle::refused())
}

/// Spawns a closure on the current pool: the pool running this task, or
/// the global pool outside any pool. See [`Pool::spawn_fn`].
///
/// ```
/// let handle = tidepool::spawn_fn(|| 2 * 21);
/// assert_eq!(handle.join().unwrap(), 42);
///
/// // Inside a pool's task, spawns stay in that pool.
/// let pool = tidepool::Pool::builder().thread_name("mine").build().unwrap();
/// let inner = pool.spawn_fn(|| {
///     tidepool::spawn_fn(|| std::thread::current().name().map(str::to_owned)).join()
/// });
/// assert!(inner.join().unwrap().unwrap().unwrap().starts_with("mine-"));
/// ```
#[track_caller]
pub fn spawn_fn<F, R>(work: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let site = std::panic::Location::caller();
    with_current_pool(|shared| spawn_fn_in(shared, work, Priority::Normal, site))
        .unwrap_or_else(|_| JoinHandle::refused())
}

/// Runs a closure on the current pool, with no handle: fire and forget.
/// See [`Pool::execute`].
///
/// # Errors
///
/// [`SpawnError::ShutDown`] if the current pool accepts no new work (a
/// pool shut down while its task runs this); [`SpawnError::NoThreads`] if
/// it has no worker thread and the system refuses to start one.
///
/// ```
/// use std::sync::mpsc;
/// let (done, finished) = mpsc::channel();
/// tidepool::execute(move || done.send("ran").unwrap()).unwrap();
/// assert_eq!(finished.recv().unwrap(), "ran");
/// ```
#[track_caller]
pub fn execute<F>(work: F) -> Result<(), SpawnError>
where
    F: FnOnce() + Send + 'static,
{
    let site = std::panic::Location::caller();
    with_current_pool(|shared| execute_in(shared, work, Priority::Normal, site))
}

/// Runs a future to completion on the calling thread, with the current pool
/// for what it spawns. See [`Pool::block_on`]: on a worker, the wait helps
/// the pool instead of blocking the thread.
///
/// Outside any pool this builds nothing: the thread waits for the future,
/// timers and sockets are served by the reactor's thread, and whatever the
/// future spawns goes to the global pool, built then if it was not yet (so
/// a [`Builder::build_global`] after a `block_on` that spawned nothing
/// still applies its settings). With the `tokio` cargo feature the thread
/// enters the shared tokio runtime's context meanwhile, as a pool's
/// threads do, so tokio-based futures work here too.
///
/// On a worker, holding a lock across `block_on` deadlocks if queued work
/// that the waiting thread runs takes the same lock (see [`join`], "A lock
/// held across `join`"): release it first, or call `block_on` inside
/// [`isolate`](crate::isolate), which polls only the future.
///
/// ```
/// assert_eq!(tidepool::block_on(async { 3 }), 3);
///
/// // Spawns go to the global pool.
/// let sum = tidepool::block_on(async { tidepool::spawn(async { 40 }).await.unwrap() + 2 });
/// assert_eq!(sum, 42);
/// ```
pub fn block_on<F: Future>(future: F) -> F::Output {
    if let Some(pool) = Pool::current() {
        return pool.block_on(future);
    }
    if context::in_block_on() {
        // Nested in a pool's `block_on` on this thread: that pool stays the
        // current one for spawns, and its tokio context is entered already.
        return wait_here(future);
    }
    if let Some(pool) = GLOBAL.get() {
        return pool.block_on(future);
    }
    // No pool anywhere yet. Building the global pool here would start its
    // threads and monitor only to name it as the pool for spawns the
    // future may never make, and a later `build_global` would then fail;
    // the free functions build it anyway when the future spawns.
    //
    // A lease on the shared tokio runtime (feature `tokio`), held while
    // the future runs. If the OS refuses it, the future runs without the
    // context: a tokio call then fails as it would off any runtime.
    #[cfg(feature = "tokio")]
    let tokio = crate::interop::TokioContext::shared().ok();
    #[cfg(feature = "tokio")]
    let _entered = tokio.as_ref().map(crate::interop::TokioContext::enter);
    wait_here(future)
}

/// Runs `a` and `b`, possibly in parallel, on the current pool (the global
/// pool outside any pool), and returns both results.
///
/// The closures may borrow from the caller's stack. On a worker, `b` is
/// queued where idle workers can steal it and `a` runs at once; then `b`
/// runs here too unless a thief took it, in which case this worker runs
/// other queued work until `b` is done. So a recursion needs no more threads
/// than the pool's `concurrency` while those nested waits fit in half of a
/// worker's stack (a wait past that blocks, and the pool may start a thread
/// for it). Called from outside the
/// pool, the whole join runs on a worker while this thread waits (on a pool
/// that was shut down, both closures run on this thread).
///
/// # A lock held across `join`
///
/// While it waits for a stolen `b`, a worker runs *any* queued work of the
/// pool on this thread, so holding a lock across `join` deadlocks if queued
/// work takes the same lock: that work blocks on the lock, on top of the
/// frame that holds it, and the thread never gets back to releasing it
/// (rayon's issue #592). The same goes for a call from outside the pool,
/// whose join runs on a worker. Release the lock before the `join`, or
/// call it inside [`isolate`](crate::isolate), whose waits run only the
/// work they wait for (the thread blocks meanwhile, its slot given to
/// another worker).
///
/// # Panics
///
/// If `a` or `b` panics, the panic is resumed here once both have finished
/// (`a`'s, if both panicked).
///
/// ```
/// fn sum(values: &[u64]) -> u64 {
///     if values.len() <= 1024 {
///         return values.iter().sum();
///     }
///     let (left, right) = values.split_at(values.len() / 2);
///     let (a, b) = tidepool::join(|| sum(left), || sum(right));
///     a + b
/// }
/// let values: Vec<u64> = (1..=100_000).collect();
/// assert_eq!(sum(&values), 5_000_050_000);
/// ```
#[track_caller]
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    fork::join_current(outside_pool, std::panic::Location::caller(), a, b)
}

/// Runs `op` with a [`Scope`] on the current pool (the global pool outside
/// any pool); tasks spawned in the scope may borrow from outside it, and
/// `scope` returns once every one of them has finished.
///
/// The waiting thread helps: on a worker, it runs the scope's tasks that
/// nobody has started (newest first) and other queued work while the rest
/// finish, so a scope never needs more threads than the pool has slots.
/// Inside an async task, prefer spawning tasks and awaiting their
/// [`JoinHandle`]s: a scope blocks the task's thread until it ends (it does
/// not deadlock, since the thread helps, but it holds a worker meanwhile).
///
/// Holding a lock across `scope` deadlocks if queued work that the waiting
/// thread runs takes the same lock (see [`join`], "A lock held across
/// `join`"): release it first, or call `scope` inside
/// [`isolate`](crate::isolate), whose scope end runs only the scope's own
/// tasks.
///
/// # Panics
///
/// A panic in `op` or in any spawned task is resumed here once every task
/// of the scope has finished (`op`'s first, else the first task's).
///
/// ```
/// let mut values = vec![1, 2, 3, 4, 5, 6];
/// let (left, right) = values.split_at_mut(3);
/// tidepool::scope(|s| {
///     s.spawn(|_| left.iter_mut().for_each(|v| *v *= 2));
///     s.spawn(|_| right.iter_mut().for_each(|v| *v += 100));
/// });
/// assert_eq!(values, [2, 4, 6, 104, 105, 106]);
/// ```
#[track_caller]
pub fn scope<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R + Send,
    R: Send,
{
    let site = std::panic::Location::caller();
    with_current_pool(|shared| fork::scope_in(shared, site, op))
}

/// Calls `f` on every item of `items`, in parallel on the current pool (the
/// global pool outside any pool): the slice is split in halves with
/// [`join`] down to about eight chunks per slot, and idle workers steal
/// halves, so uneven items balance out.
///
/// # Panics
///
/// If `f` panics, the panic is resumed here once every chunk has finished.
///
/// ```
/// let mut values: Vec<u64> = (0..10_000).collect();
/// tidepool::for_each(&mut values, |v| *v *= *v);
/// assert_eq!(values[9_999], 9_999 * 9_999);
/// ```
#[track_caller]
pub fn for_each<T, F>(items: &mut [T], f: F)
where
    T: Send,
    F: Fn(&mut T) + Sync,
{
    let site = std::panic::Location::caller();
    with_current_pool(|shared| fork::for_each_in(shared, site, items, f))
}

/// Calls `f` on every index of `range`, in parallel on the current pool (the
/// global pool outside any pool), split like [`for_each`].
///
/// # Panics
///
/// If `f` panics, the panic is resumed here once every chunk has finished.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// let total = AtomicU64::new(0);
/// tidepool::for_range(0..1_000, |i| {
///     total.fetch_add(i as u64, Ordering::Relaxed);
/// });
/// assert_eq!(total.into_inner(), 499_500);
/// ```
#[track_caller]
pub fn for_range<F>(range: std::ops::Range<usize>, f: F)
where
    F: Fn(usize) + Sync,
{
    let site = std::panic::Location::caller();
    with_current_pool(|shared| fork::for_range_in(shared, site, range, f))
}

/// Runs `f` on a worker of the current pool (the global pool outside any
/// pool), with that pool's concurrency: see [`fork::run_on_current`]. The
/// parallel iterators' entry (`crate::iter`).
pub(crate) fn on_current_pool<R: Send>(
    site: &'static std::panic::Location<'static>,
    f: impl FnOnce(usize) -> R + Send,
) -> R {
    fork::run_on_current(outside_pool, site, f)
}

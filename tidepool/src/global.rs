//! The process-wide pool, built lazily with the defaults (or once, earlier,
//! with [`Builder::build_global`]): the equivalent of a runtime's shared
//! pool (`QueueUserWorkItem`, rayon's global pool).

use crate::pool::{BuildError, Builder, Pool};
use crate::task::JoinHandle;
use std::fmt;
use std::future::Future;
use std::sync::OnceLock;

static GLOBAL: OnceLock<Pool> = OnceLock::new();

/// The global pool's thread name unless [`Builder::build_global`] was given one.
const GLOBAL_NAME: &str = "tidepool-global";

/// The process-wide pool. It is built on first use with [`Builder`]'s
/// defaults (threads named `tidepool-global-N`), unless
/// [`Builder::build_global`] built it earlier with other settings. It is
/// never shut down.
///
/// ```
/// assert!(tidepool::global().concurrency() >= 1);
/// ```
pub fn global() -> &'static Pool {
    GLOBAL.get_or_init(|| {
        Builder::new()
            .default_thread_name(GLOBAL_NAME)
            .build()
            .expect("the default settings are valid")
    })
}

impl Builder {
    /// Builds the process-wide pool ([`global`], used by [`spawn`],
    /// [`spawn_fn`] and [`block_on`]) with these settings instead of the
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

/// Spawns an async task on the process-wide pool. See [`Pool::spawn`].
///
/// ```
/// let handle = tidepool::spawn(async { 1 + 1 });
/// assert_eq!(handle.join().unwrap(), 2);
/// ```
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    global().spawn(future)
}

/// Spawns a closure on the process-wide pool. See [`Pool::spawn_fn`].
///
/// ```
/// let handle = tidepool::spawn_fn(|| 2 * 21);
/// assert_eq!(handle.join().unwrap(), 42);
/// ```
pub fn spawn_fn<F, R>(work: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    global().spawn_fn(work)
}

/// Runs a future to completion on the calling thread. See [`Pool::block_on`].
///
/// ```
/// assert_eq!(tidepool::block_on(async { 3 }), 3);
/// ```
pub fn block_on<F: Future>(future: F) -> F::Output {
    global().block_on(future)
}

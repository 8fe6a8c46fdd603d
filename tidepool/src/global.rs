//! The process-wide pool, built lazily with the defaults: the equivalent of a
//! runtime's shared pool (`QueueUserWorkItem`).

use crate::pool::{Builder, Pool};
use crate::task::JoinHandle;
use std::future::Future;
use std::sync::OnceLock;

static GLOBAL: OnceLock<Pool> = OnceLock::new();

/// The process-wide pool, built with [`Builder`]'s defaults
/// on first use. It is never shut down.
///
/// # Panics
///
/// If the pool cannot be built because the system refuses the threads
/// every pool needs ([`BuildError::HelperThreadStart`](crate::BuildError::HelperThreadStart));
/// the panic names the cause. A later call tries again.
///
/// ```
/// assert!(tidepool::global().concurrency() >= 1);
/// ```
pub fn global() -> &'static Pool {
    GLOBAL.get_or_init(|| {
        Builder::new()
            .thread_name("tidepool-global")
            .build()
            .unwrap_or_else(|error| panic!("tidepool's global pool could not be built: {error}"))
    })
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

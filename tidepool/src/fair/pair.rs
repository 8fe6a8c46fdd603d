//! The concurrent/exclusive pair: [`ConcurrentSpawner`] and
//! [`ExclusiveSpawner`], from [`Pool::concurrent_exclusive`].
//!
//! [`Pool::concurrent_exclusive`]: crate::Pool::concurrent_exclusive

use super::admission::{Side, UnitConfig};
use super::group::{GroupError, GroupMetrics, Spawner};
use crate::runtime::{OpenHandle, Priority};
use crate::sync::Arc;
use crate::task::{JoinHandle, SpawnError};
use std::fmt;
use std::future::Future;

/// Builds a pair (see [`Pool::concurrent_exclusive`](crate::Pool::concurrent_exclusive)).
pub(crate) fn pair(
    pool: Arc<OpenHandle>,
    max_concurrency: usize,
) -> Result<(ConcurrentSpawner, ExclusiveSpawner), GroupError> {
    if max_concurrency == 0 {
        return Err(GroupError::ZeroPairConcurrency);
    }
    let config = UnitConfig {
        max_running: max_concurrency,
        max_in_flight: usize::MAX,
        weight: 1,
        lane: Priority::Normal.index(),
    };
    let spawner = Spawner::new(pool, config, Priority::Normal, None, Side::Concurrent);
    let exclusive = spawner.with_side(Side::Exclusive);
    Ok((
        ConcurrentSpawner { spawner },
        ExclusiveSpawner { spawner: exclusive },
    ))
}

macro_rules! spawner_methods {
    ($kind:literal, $side:literal) => {
        #[doc = concat!("Runs `future` as ", $kind, " task of the pair. Each poll is one ", $side, " run.")]
        ///
        /// On a closed pair or a shut-down pool the task is dropped and the
        /// handle resolves to [`JoinError::ShutDown`](crate::JoinError::ShutDown).
        ///
        /// ```
        /// # let pool = tidepool::Pool::builder().build().unwrap();
        /// let (concurrent, exclusive) = pool.concurrent_exclusive(2).unwrap();
        /// # let _ = (&concurrent, &exclusive);
        #[doc = concat!("assert_eq!(", $side, ".spawn(async { 1 }).join().unwrap(), 1);")]
        /// ```
        #[track_caller]
        pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
        where
            F: Future + Send + 'static,
            F::Output: Send + 'static,
        {
            self.spawner.spawn(future)
        }

        #[doc = concat!("Runs `work` (a closure) as ", $kind, " item of the pair: one ", $side, " run.")]
        ///
        /// ```
        /// # let pool = tidepool::Pool::builder().build().unwrap();
        /// let (concurrent, exclusive) = pool.concurrent_exclusive(2).unwrap();
        /// # let _ = (&concurrent, &exclusive);
        #[doc = concat!("assert_eq!(", $side, ".spawn_fn(|| 2).join().unwrap(), 2);")]
        /// ```
        #[track_caller]
        pub fn spawn_fn<F, R>(&self, work: F) -> JoinHandle<R>
        where
            F: FnOnce() -> R + Send + 'static,
            R: Send + 'static,
        {
            self.spawner.spawn_fn(work)
        }

        /// Like `spawn`, but says so if the pair or the pool is closed.
        ///
        /// # Errors
        ///
        /// [`SpawnError::ShutDown`] if the pair was closed or the pool shut down.
        ///
        /// ```
        /// # let pool = tidepool::Pool::builder().build().unwrap();
        /// let (concurrent, exclusive) = pool.concurrent_exclusive(2).unwrap();
        /// # let _ = (&concurrent, &exclusive);
        #[doc = concat!("assert_eq!(", $side, ".try_spawn(async { 3 }).unwrap().join().unwrap(), 3);")]
        /// ```
        #[track_caller]
        pub fn try_spawn<F>(&self, future: F) -> Result<JoinHandle<F::Output>, SpawnError>
        where
            F: Future + Send + 'static,
            F::Output: Send + 'static,
        {
            self.spawner.try_spawn(future)
        }

        /// Like `spawn_fn`, but says so if the pair or the pool is closed.
        ///
        /// # Errors
        ///
        /// [`SpawnError::ShutDown`] if the pair was closed or the pool shut down.
        ///
        /// ```
        /// # let pool = tidepool::Pool::builder().build().unwrap();
        /// let (concurrent, exclusive) = pool.concurrent_exclusive(2).unwrap();
        /// # let _ = (&concurrent, &exclusive);
        #[doc = concat!($side, ".close();")]
        #[doc = concat!("assert!(", $side, ".try_spawn_fn(|| 4).is_err());")]
        /// ```
        #[track_caller]
        pub fn try_spawn_fn<F, R>(&self, work: F) -> Result<JoinHandle<R>, SpawnError>
        where
            F: FnOnce() -> R + Send + 'static,
            R: Send + 'static,
        {
            self.spawner.try_spawn_fn(work)
        }

        /// Counters of the whole pair (both sides).
        ///
        /// ```
        /// # let pool = tidepool::Pool::builder().build().unwrap();
        /// let (concurrent, exclusive) = pool.concurrent_exclusive(2).unwrap();
        /// concurrent.spawn_fn(|| ()).join().unwrap();
        /// exclusive.spawn_fn(|| ()).join().unwrap();
        #[doc = concat!("assert_eq!(", $side, ".metrics().completed, 2);")]
        /// ```
        pub fn metrics(&self) -> GroupMetrics {
            self.spawner.metrics()
        }

        /// Closes the whole pair (both sides): later spawns are refused;
        /// tasks already spawned still run.
        ///
        /// ```
        /// # let pool = tidepool::Pool::builder().build().unwrap();
        /// let (concurrent, exclusive) = pool.concurrent_exclusive(2).unwrap();
        #[doc = concat!($side, ".close();")]
        /// assert!(concurrent.is_closed() && exclusive.is_closed());
        /// ```
        pub fn close(&self) {
            self.spawner.close();
        }

        /// True once either side was closed.
        ///
        /// ```
        /// # let pool = tidepool::Pool::builder().build().unwrap();
        /// let (concurrent, exclusive) = pool.concurrent_exclusive(2).unwrap();
        #[doc = concat!("assert!(!", $side, ".is_closed());")]
        /// ```
        pub fn is_closed(&self) -> bool {
            self.spawner.is_closed()
        }
    };
}

/// The concurrent side of a pair: up to `max_concurrency` of its items run at
/// once, never while an exclusive item of the pair runs, and none is admitted
/// while an exclusive item waits (so exclusive items cannot starve). Items
/// are admitted in FIFO order. Cheap to clone.
///
/// "Run" means one poll: a closure runs once, an async task once per wake, and
/// an awaiting task is not running. See [`ExclusiveSpawner`].
///
/// ```
/// use std::sync::{Arc, RwLock};
/// let pool = tidepool::Pool::builder().build()?;
/// let (readers, writers) = pool.concurrent_exclusive(4)?;
/// let data = Arc::new(RwLock::new(0));
/// let d = data.clone();
/// let write = writers.spawn_fn(move || *d.try_write().unwrap() += 1); // never contended
/// let d = data.clone();
/// let read = readers.spawn_fn(move || *d.try_read().unwrap());
/// write.join().unwrap();
/// assert_eq!(read.join().unwrap(), 1); // FIFO: the write went first
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ConcurrentSpawner {
    spawner: Spawner,
}

impl ConcurrentSpawner {
    spawner_methods!("a concurrent", "concurrent");
}

/// The exclusive side of a pair: each of its runs happens alone with respect
/// to the pair — no concurrent item and no other exclusive item of the pair
/// runs meanwhile. Items are admitted in FIFO order; once one waits, no new
/// concurrent item is admitted until it has run. Waiting exclusive items
/// thus go before concurrent items that are still waiting, even ones queued
/// earlier (as in a scheduler pair: exclusive work has precedence). Cheap to
/// clone.
///
/// For an async task, *each poll* is an exclusive run: while it awaits, the
/// pair's concurrent items may run. Keep state that must not be seen half
/// updated consistent across `.await` points, or use closures.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// let pool = tidepool::Pool::builder().build()?;
/// let (_concurrent, exclusive) = pool.concurrent_exclusive(4)?;
/// let inside = Arc::new(AtomicUsize::new(0));
/// let handles: Vec<_> = (0..8)
///     .map(|_| {
///         let inside = inside.clone();
///         exclusive.spawn_fn(move || {
///             assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0); // alone
///             inside.fetch_sub(1, Ordering::SeqCst);
///         })
///     })
///     .collect();
/// for handle in handles {
///     handle.join().unwrap();
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ExclusiveSpawner {
    spawner: Spawner,
}

impl ExclusiveSpawner {
    spawner_methods!("an exclusive", "exclusive");
}

impl fmt::Debug for ConcurrentSpawner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrentSpawner")
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl fmt::Debug for ExclusiveSpawner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExclusiveSpawner")
            .field("closed", &self.is_closed())
            .finish()
    }
}

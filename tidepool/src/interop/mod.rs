//! The tokio context every worker thread enters (cargo feature `tokio`), so
//! tokio-based crates (`tokio::net`, `tokio::time`, hyper, reqwest, tonic,
//! ...) work inside tidepool tasks unchanged.
//!
//! A pool's [`TokioContext`] is either the user's own runtime handle
//! (`Builder::tokio_handle`) or a lease on the *shared* runtime: a tokio
//! multi-thread runtime with its I/O and time drivers. The shared runtime
//! starts with the first pool built with the feature and stops when the
//! last such pool is gone (its `Shared`, and so its `Config`, dropped:
//! every worker exited and every handle dropped). A later pool starts a new
//! one.
//!
//! The worker thread holds the `EnterGuard` for its whole life (taken where
//! threads start, `worker::start::start_thread`), and `Pool::block_on`
//! holds one while it blocks. Entering costs a thread-local write; nothing
//! is added to the per-task path.
//!
//! # The shared runtime's workers
//!
//! Whatever is spawned with `tokio::spawn` runs on the shared runtime's own
//! workers: tokio offers no way to run it elsewhere, and libraries do it
//! (axum's `serve` spawns every connection so). So those workers are
//! treated like the pool's, as far as tokio's hooks allow: a worker waking
//! for work waits while `available_parallelism` (or
//! `TIDEPOOL_CONCURRENCY`) of them hold a place (`gate`), a watcher finds
//! the ones that block and gives their place to another (`watch`, deciding
//! by `control::back_from_block`), and a blocked one that runs again is
//! counted again. It is not held: tokio shows no task boundary where it
//! could give way, so after blocks, under sustained load, more workers than
//! places may run until some park. There are 16 more workers than places (`SPARE_WORKERS`), parked
//! until a block needs them. Blocks found are counted in
//! `Metrics::tokio_blocked` and reported through `tracing`.
//!
//! Without the feature, [`TokioContext`] is empty and `enter` does nothing.
//!
//! The shared runtime's workers are paced while the pool's workers are
//! saturated (`reactor_pacing`).

// Built for the loom model too, which runs without the feature.
#[cfg(any(feature = "tokio", tidepool_loom))]
pub(crate) mod gate;
#[cfg(feature = "tokio")]
mod watch;

#[cfg(feature = "tokio")]
pub(crate) use with_tokio::TokioContext;
#[cfg(not(feature = "tokio"))]
pub(crate) use without_tokio::TokioContext;

#[cfg(not(feature = "tokio"))]
mod without_tokio {
    /// No tokio context: the feature is off.
    #[derive(Clone, Debug)]
    pub(crate) struct TokioContext;

    /// What `enter` returns without the feature: nothing to leave.
    #[derive(Debug)]
    pub(crate) struct NotEntered;

    impl TokioContext {
        /// Does nothing.
        #[inline(always)]
        pub(crate) fn enter(&self) -> NotEntered {
            NotEntered
        }

        /// No runtime, no blocks.
        pub(crate) fn blocks(&self) -> (u64, u64) {
            (0, 0)
        }
    }
}

#[cfg(feature = "tokio")]
mod with_tokio {
    use std::sync::{Arc, Mutex, PoisonError, Weak};
    use tokio::runtime::{EnterGuard, Handle};

    /// The tokio runtime a pool's threads enter.
    #[derive(Clone, Debug)]
    pub(crate) enum TokioContext {
        /// The shared runtime; the pool holds a lease on it.
        Shared(Arc<SharedRuntime>),
        /// A runtime of the user's (`Builder::tokio_handle`).
        User(Handle),
    }

    impl TokioContext {
        /// A lease on the shared runtime, started if no pool holds one.
        ///
        /// # Errors
        ///
        /// The OS refused the runtime's epoll instance, its eventfd or its
        /// thread (the error says which).
        pub(crate) fn shared() -> std::io::Result<TokioContext> {
            SharedRuntime::lease().map(TokioContext::Shared)
        }

        /// Enters the runtime's context until the guard is dropped.
        pub(crate) fn enter(&self) -> EnterGuard<'_> {
            match self {
                TokioContext::Shared(shared) => shared.handle.enter(),
                TokioContext::User(handle) => handle.enter(),
            }
        }

        /// Blocks found on the shared runtime's workers, and workers
        /// counted again after one (a user's runtime is not watched).
        pub(crate) fn blocks(&self) -> (u64, u64) {
            match self {
                TokioContext::Shared(shared) => shared.blocks(),
                TokioContext::User(_) => (0, 0),
            }
        }
    }

    /// How many workers the shared runtime has beyond its places: each
    /// can take the place of a worker blocked in a task that
    /// `tokio::spawn` put there. Parked, they cost no CPU.
    pub(crate) const SPARE_WORKERS: usize = 16;

    /// The shared runtime: its handle, its watched workers, and the
    /// runtime itself (dropped in the background when the last lease goes).
    #[derive(Debug)]
    pub(crate) struct SharedRuntime {
        handle: Handle,
        watched: Arc<super::watch::Watched>,
        runtime: Option<tokio::runtime::Runtime>,
    }

    /// The current shared runtime, if a pool still holds it.
    /// (An `Option`: `Weak::new` is const only since Rust 1.73.)
    static CURRENT: Mutex<Option<Weak<SharedRuntime>>> = Mutex::new(None);

    impl SharedRuntime {
        fn lease() -> std::io::Result<Arc<SharedRuntime>> {
            let mut current = CURRENT.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(running) = current.as_ref().and_then(Weak::upgrade) {
                return Ok(running);
            }
            let started = Arc::new(SharedRuntime::start()?);
            *current = Some(Arc::downgrade(&started));
            Ok(started)
        }

        /// Builds the runtime (its workers start parked) and the watcher.
        fn start() -> std::io::Result<SharedRuntime> {
            // As many as a pool's default slots: `TIDEPOOL_CONCURRENCY`
            // if set (a bad value is the pool's build error to report),
            // else the cores.
            let places = crate::sys::env_count("TIDEPOOL_CONCURRENCY")
                .ok()
                .flatten()
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
            let watched = Arc::new(super::watch::Watched::new(places));
            let (on_park, on_unpark) = (watched.clone(), watched.clone());
            let mut runtime = tokio::runtime::Builder::new_multi_thread();
            runtime
                .worker_threads(places + SPARE_WORKERS)
                .enable_io()
                .enable_time()
                .on_thread_start(crate::reactor_pacing::this_thread_drives_tokio)
                .on_thread_park(move || {
                    on_park.leave();
                    crate::reactor_pacing::before_park();
                })
                .on_thread_unpark(move || {
                    crate::reactor_pacing::after_unpark();
                    on_unpark.enter();
                })
                .thread_name("tidepool-tokio");
            // tokio panics when the OS refuses one of its workers (thread
            // limits); a pool's build reports it as an error instead.
            let runtime =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| runtime.build()))
                    .unwrap_or_else(|_| {
                        Err(std::io::Error::other(
                        "the OS refused one of its worker threads (see the panic message above; \
                         raise the thread limit, `ulimit -u`)",
                    ))
                    })?;
            super::watch::start(watched.clone())?;
            Ok(SharedRuntime {
                handle: runtime.handle().clone(),
                watched,
                runtime: Some(runtime),
            })
        }

        /// Blocks found on the runtime's workers, and workers counted again
        /// after a block.
        pub(crate) fn blocks(&self) -> (u64, u64) {
            use std::sync::atomic::Ordering::Relaxed;
            (
                self.watched.blocked.load(Relaxed),
                self.watched.counted_again.load(Relaxed),
            )
        }
    }

    impl Drop for SharedRuntime {
        fn drop(&mut self) {
            self.watched.stop();
            if let Some(runtime) = self.runtime.take() {
                // Workers blocked in a task are not waited for: they end
                // on their own.
                runtime.shutdown_background();
            }
        }
    }
}

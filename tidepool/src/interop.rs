//! The tokio context every worker thread enters (cargo feature `tokio`), so
//! tokio-based crates (`tokio::net`, `tokio::time`, hyper, reqwest, tonic,
//! ...) work inside tidepool tasks unchanged.
//!
//! A pool's [`TokioContext`] is either the user's own runtime handle
//! (`Builder::tokio_handle`) or a lease on the *shared* runtime: a tokio
//! current-thread runtime with its I/O and time drivers, driven by one
//! background thread (`tidepool-tokio`). The shared runtime starts with the
//! first pool built with the feature and stops when the last such pool is
//! gone (its `Shared`, and so its `Config`, dropped: every worker exited and
//! every handle dropped). A later pool starts a new one.
//!
//! The worker thread holds the `EnterGuard` for its whole life (taken where
//! threads start, `worker::schedule::start_thread`), and `Pool::block_on`
//! holds one while it blocks. Entering costs a thread-local write; nothing
//! is added to the per-task path.
//!
//! Without the feature, [`TokioContext`] is empty and `enter` does nothing.
//!
//! The shared runtime's thread is paced while the workers are saturated
//! (`reactor_pacing`).

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
    }

    /// The shared runtime: its handle, and the channel that stops it.
    #[derive(Debug)]
    pub(crate) struct SharedRuntime {
        handle: Handle,
        /// Dropping it ends the background thread's `block_on`.
        _stop: tokio::sync::oneshot::Sender<()>,
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

        /// Builds the runtime on this thread (so an error is the builder's)
        /// and moves it to its background thread, which drives its I/O and
        /// time drivers until the stop channel closes.
        fn start() -> std::io::Result<SharedRuntime> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .on_thread_park(crate::reactor_pacing::before_park)
                .on_thread_unpark(crate::reactor_pacing::after_unpark)
                // Names the threads of its blocking pool (`spawn_blocking`).
                .thread_name("tidepool-tokio-blocking")
                .build()?;
            let handle = runtime.handle().clone();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            std::thread::Builder::new()
                .name("tidepool-tokio".to_owned())
                // Only the drivers and the tasks `tokio::spawn` puts here
                // run on it.
                .spawn(move || {
                    crate::reactor_pacing::this_thread_drives_tokio();
                    let _ = runtime.block_on(stopped);
                    // Blocking-pool threads (`spawn_blocking`) are not
                    // waited for: they end on their own.
                    runtime.shutdown_background();
                })?;
            Ok(SharedRuntime {
                handle,
                _stop: stop,
            })
        }
    }
}

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
//! # Reactor turns under load
//!
//! Every readiness event that finds the `tidepool-tokio` thread asleep in
//! `epoll_wait` wakes it, and the kernel does that inside the sender's
//! `send`, on a worker's core (in the lab's `async-io`, 17% of the
//! workers' samples were `sock_def_readable` waking it). tokio's own
//! workers seldom pay this: they look at the reactor between tasks, so
//! while they are busy nobody sleeps in `epoll_wait`. So the shared
//! runtime's thread pauses (200 µs, `with_tokio::pacing::PAUSE`) before it
//! sleeps in the reactor again when its last sleep was short (events keep
//! coming) and a task its last turn woke was queued behind busy workers:
//! the tasks the next turn wakes would wait for a worker anyway, and the
//! events of the pause are gathered in one turn, without wake-ups. With a
//! worker free, or with events further apart than a millisecond, it never
//! pauses, so an event's latency is unchanged there. On the lab's
//! `async-io` (tokio sockets on tidepool, 1,000 connections) it took the
//! time per round trip from 14.5 to 11.3 µs (medians of 7 alternating
//! runs; docs/measurements.md, "Pacing the shared reactor").

#[cfg(feature = "tokio")]
pub(crate) use with_tokio::{pacing::queued_behind_busy_workers, TokioContext};
#[cfg(not(feature = "tokio"))]
pub(crate) use without_tokio::{queued_behind_busy_workers, TokioContext};

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

    /// Does nothing: there is no shared runtime to pace.
    #[inline(always)]
    pub(crate) fn queued_behind_busy_workers() {}
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
                .on_thread_park(pacing::before_park)
                .on_thread_unpark(pacing::after_unpark)
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

    /// When the shared runtime's thread pauses before it sleeps in the
    /// reactor again (see the module docs, "Reactor turns under load").
    /// Its hooks run on that thread only, so the state is the thread's own.
    pub(super) mod pacing {
        use std::cell::Cell;
        use std::time::{Duration, Instant};

        /// How long the thread pauses when it does. Chosen with
        /// `tidepool-lab async-io --only tidepool-tokio-net,tokio` on 2
        /// cores (a first version pausing after every short sleep; two
        /// runs of `--repeat 3` each, binaries alternating; time per round
        /// trip against tokio's in the same run): no pause 1.51x, 1.56x;
        /// 50 µs 1.41x, 1.35x; 200 µs 1.28x, 1.21x. Longer pauses were not
        /// tried: each is added to the start of tasks when the workers
        /// free up during one. A sleep also takes the thread's timer
        /// slack (50 µs by default) on top.
        pub(crate) const PAUSE: Duration = Duration::from_micros(200);

        /// A sleep in the reactor shorter than this is "short": events
        /// come faster than the thread can sleep between them.
        pub(crate) const SHORT_SLEEP: Duration = Duration::from_millis(1);

        /// Whether to pause before sleeping in the reactor again: the last
        /// sleep was short (events keep coming), and a task the last turn
        /// woke was queued behind busy workers (no slot free, nobody
        /// looking for work), so the tasks the next turn wakes would wait
        /// for a worker anyway.
        pub(crate) fn should_pause(last_sleep: Duration, queued_behind_busy: bool) -> bool {
            queued_behind_busy && last_sleep < SHORT_SLEEP
        }

        thread_local! {
            /// When this thread's last sleep in the reactor began, and how
            /// long the one before lasted (tokio's thread only).
            static SLEEP: Cell<(Instant, Duration)> = Cell::new((Instant::now(), SHORT_SLEEP));
            /// A task woken on this thread since its last sleep was queued
            /// behind busy workers.
            static QUEUED_BEHIND_BUSY: Cell<bool> = const { Cell::new(false) };
        }

        /// Called by the scheduler when a task woken or spawned on this
        /// thread (not a worker) was queued while every slot was busy and
        /// no worker was looking for work. A thread-local write; only the
        /// shared runtime's thread ever reads it.
        #[inline]
        pub(crate) fn queued_behind_busy_workers() {
            let _ = QUEUED_BEHIND_BUSY.try_with(|flag| flag.set(true));
        }

        /// tokio's `on_thread_park` hook: pauses if [`should_pause`] says
        /// so, then notes when the sleep begins.
        pub(crate) fn before_park() {
            let queued_behind_busy = QUEUED_BEHIND_BUSY.try_with(|flag| flag.replace(false));
            let _ = SLEEP.try_with(|sleep| {
                let (_, last) = sleep.get();
                if should_pause(last, queued_behind_busy == Ok(true)) {
                    std::thread::sleep(PAUSE);
                }
                sleep.set((Instant::now(), last));
            });
        }

        /// tokio's `on_thread_unpark` hook: notes how long the sleep lasted.
        pub(crate) fn after_unpark() {
            let _ = SLEEP.try_with(|sleep| {
                let (began, _) = sleep.get();
                sleep.set((began, began.elapsed()));
            });
        }

        #[cfg(all(test, not(tidepool_loom)))]
        mod tests {
            use super::*;

            const MS: Duration = Duration::from_millis(1);

            #[test]
            fn a_dense_stream_into_busy_workers_pauses() {
                assert!(should_pause(MS / 10, true));
                assert!(should_pause(Duration::ZERO, true));
            }

            #[test]
            fn sparse_events_or_free_workers_never_pause() {
                // Free workers: the woken tasks start at once, so must the next.
                assert!(!should_pause(MS / 10, false));
                // Long sleeps: events are sparse, each is served at once.
                assert!(!should_pause(2 * MS, true));
            }

            #[test]
            fn the_hooks_pause_only_after_a_busy_turn() {
                // A short sleep (the first one only sets the clock).
                before_park();
                after_unpark();
                // A task queued behind busy workers in that turn: a pause.
                queued_behind_busy_workers();
                let started = Instant::now();
                before_park();
                assert!(started.elapsed() >= PAUSE, "paused");
                assert!(!QUEUED_BEHIND_BUSY.with(Cell::get), "the flag is taken");
            }
        }
    }
}

//! When the threads that drive I/O reactors pause: async-io's own thread
//! (which tidepool starts only off Unix, for its `Timer` and `Async`, or a
//! program that uses async-io itself; on Unix tidepool's
//! [`Async`](crate::Async) and [`Timer`](crate::Timer) have its own
//! reactor, whose thread steps aside instead, `reactor::handoff`, asking
//! [`take_queued_behind_busy`] when) and the shared tokio runtime's thread
//! (the `tokio` feature, `interop`).
//!
//! # Why pause
//!
//! Both reactors run on a thread of their own, asleep in `epoll_wait`
//! between events. Every readiness event that finds it asleep wakes it,
//! and the kernel does that inside the sender's `send`, on a worker's core:
//! in the lab's `async-io` (tokio sockets on tidepool, 1,000 connections)
//! 17% of the workers' samples were `sock_def_readable` waking it. tokio's
//! own workers seldom pay this: they look at the reactor between tasks, so
//! while they are busy nobody sleeps in `epoll_wait`.
//!
//! So while the pool's workers are saturated, a reactor thread pauses
//! ([`PAUSE`]) now and then: the tasks it wakes are queued behind busy
//! workers and would wait for one anyway, and the events that arrive during
//! the pause are gathered by one `epoll_wait`, with no wake-ups.
//!
//! # When
//!
//! A reactor thread pauses when a task it woke was queued with every slot
//! busy and no worker looking for work ([`queued_behind_busy_workers`],
//! called by the scheduler), its events are dense (less than [`DENSE`]
//! apart), and (for async-io's thread, which may pause in any of the many
//! wakes of one turn) it has not paused within the last [`PAUSE`]
//! ([`should_pause`]).
//! With a worker free, or with events further apart than [`DENSE`], it
//! never pauses, so an event's latency is unchanged there.
//!
//! * The tokio thread pauses at the end of a turn, before it sleeps in the
//!   reactor again (tokio's `on_thread_park` hook: [`before_park`],
//!   [`after_unpark`]).
//! * async-io's thread has no such hook: it pauses right after queueing
//!   the task, inside the waker, and the rest of that turn's events wait
//!   with it. It is found by its name, `async-io` (async-io's
//!   `driver.rs`); only that thread and the tokio one ever pause, never a
//!   user's thread that wakes a task.
//!
//! # The cost
//!
//! The reactor serves every pool in the process: while one pool is
//! saturated, events for another pool's tasks (and, off Unix, where
//! tidepool's timers are async-io's, timers and threads in `block_on`,
//! which cannot take async-io's reactor while its thread pauses in a
//! waker) may wait up to [`PAUSE`] plus the timer slack.
//! Measured gains are in docs/measurements.md, "Pacing the reactor
//! threads".

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How long a reactor thread pauses. Chosen on the lab's `async-io` with
/// tokio sockets (`--only tidepool-tokio-net,tokio`, two runs of
/// `--repeat 3` each, binaries alternating, a first version that paused
/// after every short sleep; time per round trip against tokio's in the
/// same run): no pause 1.51x, 1.56x; 50 µs 1.41x, 1.35x; 200 µs 1.28x,
/// 1.21x. Longer pauses were not tried: each adds to the start of tasks
/// when workers free up during it. A sleep also takes the thread's timer
/// slack (50 µs by default) on top.
pub(crate) const PAUSE: Duration = Duration::from_micros(200);

/// Events closer than this are dense: they come faster than the reactor
/// thread could sleep between them.
pub(crate) const DENSE: Duration = Duration::from_millis(1);

/// Whether a reactor thread pauses now: a task it woke was just queued
/// behind busy workers (`queued_behind_busy`), the previous event came
/// `since_event` ago (its last sleep in the reactor lasted that long, or
/// the previous task it woke was that long ago; `None`: no previous one),
/// and its last pause ended `since_pause` ago (`None`: never paused, or
/// the caller pauses at most once per turn).
pub(crate) fn should_pause(
    queued_behind_busy: bool,
    since_event: Option<Duration>,
    since_pause: Option<Duration>,
) -> bool {
    queued_behind_busy
        && since_event.is_some_and(|gap| gap < DENSE)
        && since_pause.is_none_or(|gap| gap >= PAUSE)
}

/// What the calling thread is, for pacing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Not looked at yet.
    Unknown,
    /// Any other thread: never pauses.
    Other,
    /// async-io's reactor thread: pauses inside the waker.
    AsyncIo,
    /// The shared tokio runtime's thread: pauses before it parks.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    Tokio,
    /// tidepool's own reactor thread: never pauses; it steps aside instead
    /// (`reactor::handoff`), when [`take_queued_behind_busy`] says so.
    Own,
}

/// A reactor thread's pacing state (its own: thread-locals).
#[derive(Clone, Copy, Debug)]
struct Pacer {
    role: Role,
    /// A task woken on this thread was queued behind busy workers since
    /// its last turn ended (tokio's thread).
    queued_behind_busy: bool,
    /// When the last event was seen: the last task queued behind busy
    /// workers (async-io) or the start of the last sleep (tokio).
    last_event: Option<Instant>,
    /// How long the last sleep in the reactor lasted (tokio).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    last_sleep: Option<Duration>,
    /// When the last pause ended.
    last_pause: Option<Instant>,
}

thread_local! {
    static PACER: Cell<Pacer> = const {
        Cell::new(Pacer {
            role: Role::Unknown,
            queued_behind_busy: false,
            last_event: None,
            last_sleep: None,
            last_pause: None,
        })
    };
}

/// The name async-io gives its reactor thread.
const ASYNC_IO_THREAD: &str = "async-io";
/// The name of tidepool's own reactor thread (`reactor`).
pub(crate) const OWN_REACTOR_THREAD: &str = "tidepool-reactor";

/// Called by the scheduler when a task woken or spawned on this thread (not
/// one of the pool's workers) was queued with every slot busy and nobody
/// searching. On async-io's thread it may pause here; on the tokio thread
/// it notes the fact for [`before_park`]; elsewhere it does nothing (a
/// thread-local read).
pub(crate) fn queued_behind_busy_workers() {
    let _ = PACER.try_with(|cell| {
        let mut pacer = cell.get();
        if pacer.role == Role::Unknown {
            pacer.role = match std::thread::current().name() {
                Some(ASYNC_IO_THREAD) => Role::AsyncIo,
                Some(OWN_REACTOR_THREAD) => Role::Own,
                _ => Role::Other,
            };
            cell.set(pacer);
        }
        match pacer.role {
            Role::Tokio | Role::Own => pacer.queued_behind_busy = true,
            Role::AsyncIo => {
                let now = Instant::now();
                let since_event = pacer.last_event.map(|at| now.duration_since(at));
                let since_pause = pacer.last_pause.map(|at| now.duration_since(at));
                pacer.last_event = Some(now);
                if should_pause(true, since_event, since_pause) {
                    std::thread::sleep(PAUSE);
                    pacer.last_pause = Some(Instant::now());
                }
            }
            // Every other thread: the read above is all it pays.
            Role::Unknown | Role::Other => return,
        }
        cell.set(pacer);
    });
}

/// Whether a task woken on this thread was queued behind busy workers
/// since the last call (tidepool's own reactor thread asks after each
/// turn); clears the mark.
pub(crate) fn take_queued_behind_busy() -> bool {
    PACER
        .try_with(|cell| {
            let mut pacer = cell.get();
            let queued = std::mem::take(&mut pacer.queued_behind_busy);
            cell.set(pacer);
            queued
        })
        .unwrap_or(false)
}

/// Marks the calling thread as the shared tokio runtime's (`interop`), so
/// its park hooks pace it.
#[cfg(feature = "tokio")]
pub(crate) fn this_thread_drives_tokio() {
    let _ = PACER.try_with(|cell| {
        let mut pacer = cell.get();
        pacer.role = Role::Tokio;
        cell.set(pacer);
    });
}

/// tokio's `on_thread_park` hook for the shared runtime: pauses if
/// [`should_pause`] says so, then notes when the sleep begins.
#[cfg(feature = "tokio")]
pub(crate) fn before_park() {
    let _ = PACER.try_with(|cell| {
        let mut pacer = cell.get();
        let queued_behind_busy = std::mem::take(&mut pacer.queued_behind_busy);
        // At most one pause per turn already: no window to keep.
        if should_pause(queued_behind_busy, pacer.last_sleep, None) {
            std::thread::sleep(PAUSE);
            pacer.last_pause = Some(Instant::now());
        }
        pacer.last_event = Some(Instant::now());
        cell.set(pacer);
    });
}

/// tokio's `on_thread_unpark` hook for the shared runtime: notes how long
/// the sleep in the reactor lasted.
#[cfg(feature = "tokio")]
pub(crate) fn after_unpark() {
    let _ = PACER.try_with(|cell| {
        let mut pacer = cell.get();
        pacer.last_sleep = pacer.last_event.map(|at| at.elapsed());
        cell.set(pacer);
    });
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn dense_events_into_busy_workers_pause_once_per_pause() {
        assert!(should_pause(true, Some(10 * US), None));
        assert!(should_pause(true, Some(10 * US), Some(PAUSE)));
        // Just paused: the events of the pause are served first.
        assert!(!should_pause(true, Some(10 * US), Some(PAUSE / 2)));
    }

    #[test]
    fn free_workers_or_sparse_events_never_pause() {
        assert!(!should_pause(false, Some(10 * US), None));
        assert!(!should_pause(true, Some(DENSE), None));
        assert!(!should_pause(true, None, None));
    }

    #[test]
    fn other_threads_never_pause() {
        // A test thread is neither async-io's nor tokio's.
        for _ in 0..100 {
            queued_behind_busy_workers();
        }
        let pacer = PACER.with(Cell::get);
        assert_eq!(pacer.role, Role::Other);
        assert!(pacer.last_pause.is_none());
    }

    /// Calls `event` until the thread has paused (each call a dense event
    /// unless the machine stalls this thread for a millisecond: a later
    /// pair will be dense), and returns how long the call that paused took.
    fn until_paused(mut event: impl FnMut()) -> Duration {
        for _ in 0..10_000 {
            let started = Instant::now();
            event();
            if PACER.with(Cell::get).last_pause.is_some() {
                return started.elapsed();
            }
        }
        panic!("never paused");
    }

    #[test]
    fn a_thread_named_async_io_pauses_while_tasks_queue_behind_busy_workers() {
        let paused = std::thread::Builder::new()
            .name(ASYNC_IO_THREAD.to_owned())
            .spawn(|| until_paused(queued_behind_busy_workers))
            .unwrap()
            .join()
            .unwrap();
        assert!(paused >= PAUSE, "the call that paused slept the pause");
    }

    #[cfg(feature = "tokio")]
    #[test]
    fn the_tokio_thread_pauses_at_the_end_of_a_busy_turn() {
        std::thread::spawn(|| {
            this_thread_drives_tokio();
            // Turns that woke nothing into busy workers: never a pause.
            for _ in 0..100 {
                before_park();
                after_unpark();
            }
            assert!(PACER.with(Cell::get).last_pause.is_none());
            // Turns that did: a pause before the next sleep.
            let paused = until_paused(|| {
                queued_behind_busy_workers();
                before_park();
                after_unpark();
            });
            assert!(paused >= PAUSE, "paused");
            assert!(
                !PACER.with(Cell::get).queued_behind_busy,
                "the flag is taken"
            );
        })
        .join()
        .unwrap();
    }
}

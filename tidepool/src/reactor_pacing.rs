//! When the thread that drives the shared tokio runtime's reactor pauses
//! (the `tokio` feature, `interop`), and when tidepool's own reactor
//! thread steps aside (`reactor::handoff`, asking
//! [`take_queued_behind_busy`] when).
//!
//! # Why pause
//!
//! A reactor runs on a thread of its own, asleep in `epoll_wait` between
//! events. Every readiness event that finds it asleep wakes it, and the
//! kernel does that inside the sender's `send`, on a worker's core: in the
//! lab's `async-io` (tokio sockets on tidepool, 1,000 connections) 17% of
//! the workers' samples were `sock_def_readable` waking it. tokio's own
//! workers seldom pay this: they look at the reactor between tasks, so
//! while they are busy nobody sleeps in `epoll_wait`.
//!
//! So while the pool's workers are saturated, the tokio reactor's thread
//! pauses ([`PAUSE`]) at the end of a turn, before it sleeps in the reactor
//! again (tokio's `on_thread_park` hook: `before_park`, `after_unpark`):
//! the tasks it wakes are queued behind busy workers and would wait for one
//! anyway, and the events that arrive during the pause are gathered by one
//! `epoll_wait`, with no wake-ups.
//!
//! # When
//!
//! It pauses when a task it woke was queued with every slot busy and no
//! worker looking for work ([`queued_behind_busy_workers`], called by the
//! scheduler) and its events are dense (its last sleep in the reactor
//! lasted less than [`DENSE`]) ([`should_pause`]). With a worker free, or
//! with events further apart than [`DENSE`], it never pauses, so an
//! event's latency is unchanged there.
//!
//! A thread is paced only if it said what it is: the tokio runtime's
//! thread in its start hook (`this_thread_drives_tokio`), tidepool's
//! reactor thread as it starts ([`this_thread_drives_the_reactor`]).
//! No thread is recognised by its name: async-io's reactor thread (which
//! tidepool used before it had its own reactor, and still does off Unix)
//! was once found by its name and paused inside a waker, which held up the
//! rest of its turn, including the events of a program that uses async-io
//! itself; that pacing is gone.
//!
//! # The cost
//!
//! The tokio runtime serves every pool in the process: while one pool is
//! saturated, events for another pool's tasks may wait up to [`PAUSE`]
//! plus the timer slack. Measured gains are in docs/measurements.md,
//! "Pacing the reactor threads".

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
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
pub(crate) const PAUSE: Duration = Duration::from_micros(200);

/// Events closer than this are dense: they come faster than a reactor
/// thread could sleep between them, and it would be woken for each (the
/// shared tokio runtime's thread pauses, tidepool's own steps aside:
/// `reactor`).
#[cfg_attr(not(any(feature = "tokio", unix)), allow(dead_code))]
pub(crate) const DENSE: Duration = Duration::from_millis(1);

/// Whether the reactor thread pauses now: a task it woke was just queued
/// behind busy workers (`queued_behind_busy`), and its last sleep in the
/// reactor lasted `since_event` (`None`: it has not slept yet).
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
pub(crate) fn should_pause(queued_behind_busy: bool, since_event: Option<Duration>) -> bool {
    queued_behind_busy && since_event.is_some_and(|gap| gap < DENSE)
}

/// What the calling thread is, for pacing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Any thread that did not say what it is: never pauses.
    Other,
    /// The shared tokio runtime's thread: pauses before it parks.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    Tokio,
    /// tidepool's own reactor thread: never pauses; it steps aside instead
    /// (`reactor::handoff`), when [`take_queued_behind_busy`] says so.
    #[cfg_attr(not(unix), allow(dead_code))]
    Own,
}

/// A reactor thread's pacing state (its own: thread-locals).
#[derive(Clone, Copy, Debug)]
struct ReactorPacing {
    role: Role,
    /// A task woken on this thread was queued behind busy workers since
    /// its last turn ended.
    queued_behind_busy: bool,
    /// When the last sleep in the reactor began (tokio).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    last_event: Option<Instant>,
    /// How long the last sleep in the reactor lasted (tokio).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    last_sleep: Option<Duration>,
    /// When the last pause ended.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    last_pause: Option<Instant>,
}

thread_local! {
    static PACER: Cell<ReactorPacing> = const {
        Cell::new(ReactorPacing {
            role: Role::Other,
            queued_behind_busy: false,
            last_event: None,
            last_sleep: None,
            last_pause: None,
        })
    };
}

/// Whether tidepool's own reactor thread may step aside
/// (`reactor::handoff`): true unless a pool was built with the lab's
/// `reactor-pacing` switch off (`TIDEPOOL_ABLATE`). The reactor is the
/// process's, not a pool's, so one such pool turns it off for all.
static OWN_THREAD_STEPS_ASIDE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(true);

/// Whether tidepool's own reactor thread may step aside (see
/// [`OWN_THREAD_STEPS_ASIDE`]).
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) fn own_thread_steps_aside() -> bool {
    OWN_THREAD_STEPS_ASIDE.load(std::sync::atomic::Ordering::Relaxed)
}

/// A pool was built with reactor pacing switched off: tidepool's own
/// reactor thread never steps aside from now on.
pub(crate) fn switch_off_stepping_aside() {
    OWN_THREAD_STEPS_ASIDE.store(false, std::sync::atomic::Ordering::Relaxed);
}

/// Called by the scheduler when a task woken or spawned on this thread (not
/// one of the pool's workers) was queued with every slot busy and nobody
/// searching: on a reactor's thread it notes the fact (for `before_park`
/// or [`take_queued_behind_busy`]); elsewhere it does nothing (a
/// thread-local read).
pub(crate) fn queued_behind_busy_workers() {
    let _ = PACER.try_with(|cell| {
        let mut pacer = cell.get();
        if pacer.role != Role::Other {
            pacer.queued_behind_busy = true;
            cell.set(pacer);
        }
    });
}

/// Marks the calling thread as tidepool's own reactor thread (`reactor`),
/// which asks [`take_queued_behind_busy`] after each turn.
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) fn this_thread_drives_the_reactor() {
    set_role(Role::Own);
}

/// Sets the calling thread's role.
#[cfg_attr(not(any(unix, feature = "tokio")), allow(dead_code))]
fn set_role(role: Role) {
    let _ = PACER.try_with(|cell| {
        let mut pacer = cell.get();
        pacer.role = role;
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
    set_role(Role::Tokio);
}

/// tokio's `on_thread_park` hook for the shared runtime: pauses if
/// [`should_pause`] says so, then notes when the sleep begins.
#[cfg(feature = "tokio")]
pub(crate) fn before_park() {
    let _ = PACER.try_with(|cell| {
        let mut pacer = cell.get();
        let queued_behind_busy = std::mem::take(&mut pacer.queued_behind_busy);
        // At most one pause per turn already: no window to keep.
        if should_pause(queued_behind_busy, pacer.last_sleep) {
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
    fn dense_events_into_busy_workers_pause() {
        assert!(should_pause(true, Some(10 * US)));
    }

    #[test]
    fn free_workers_or_sparse_events_never_pause() {
        assert!(!should_pause(false, Some(10 * US)));
        assert!(!should_pause(true, Some(DENSE)));
        assert!(!should_pause(true, None));
    }

    #[test]
    fn threads_that_did_not_say_what_they_are_are_never_paced_whatever_their_name() {
        // A thread named as async-io's reactor thread once paused inside
        // the wakers it called, holding up a program's own async-io.
        for name in ["async-io", "tidepool-reactor", "tokio-runtime-worker"] {
            std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(|| {
                    for _ in 0..100 {
                        queued_behind_busy_workers();
                    }
                    let pacer = PACER.with(Cell::get);
                    assert_eq!(pacer.role, Role::Other);
                    assert!(!pacer.queued_behind_busy);
                    assert!(pacer.last_pause.is_none());
                })
                .unwrap()
                .join()
                .unwrap();
        }
    }

    #[test]
    fn the_reactor_thread_learns_that_its_tasks_queued_behind_busy_workers() {
        std::thread::spawn(|| {
            this_thread_drives_the_reactor();
            assert!(!take_queued_behind_busy());
            queued_behind_busy_workers();
            assert!(take_queued_behind_busy());
            assert!(!take_queued_behind_busy(), "the flag is taken");
            assert!(PACER.with(Cell::get).last_pause.is_none(), "never paused");
        })
        .join()
        .unwrap();
    }

    #[cfg(feature = "tokio")]
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

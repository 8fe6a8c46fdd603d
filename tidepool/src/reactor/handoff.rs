//! Who waits for I/O events: the reactor's own thread, or the workers.
//!
//! # Why hand off
//!
//! The reactor's thread sleeps in `epoll_wait`. Every event that finds it
//! asleep wakes it, and the kernel does that inside the sender's system
//! call, on a core the workers need; then the thread wakes the task, which
//! crosses to a worker. While the workers are busy anyway, they can look
//! for events themselves between tasks (an `epoll_wait` that does not
//! wait) and queue the tasks those events wake for themselves and the
//! other workers: no sleeping thread to wake, no hop. So while workers are busy and events are dense,
//! the thread *steps aside* (sleeps away from the reactor) and the workers
//! poll.
//!
//! # The protocol
//!
//! The danger is a reactor nobody polls: the thread aside, every worker
//! parked. Two counters and a flag rule it out:
//!
//! ```text
//! reactor thread stepping aside            worker parking (or exiting)
//! 1. aside = true (SeqCst)                 a. awake -= 1 (SeqCst)
//! 2. read awake; if 0: aside = false,      b. if it was the last one awake:
//!    poll as before                           swap aside to false; if it
//!                                             was true, wake the thread
//! ```
//!
//! Either (2) sees the last worker's (a) and the thread stays, or (b) sees
//! (1) and calls the thread back. A worker counts itself awake once the
//! reactor exists ([`Handoff::worker_awake`]) and uncounts itself as it
//! parks ([`Handoff::worker_sleeps`]); the loom model in
//! `loom_models/reactor.rs` runs both against [`Handoff::step_aside`].
//!
//! Awake is not polling: a worker may sit in a long task, or block. So the
//! thread aside looks every [`CHECK`] whether workers polled since its last
//! look ([`Handoff::stay_aside`]) and returns to the reactor if none did:
//! events wait at most about that long for a worker that does not come.
//!
//! # When
//!
//! After a turn of the thread's that came less than [`DENSE`] after the
//! previous one ([`steps_aside`], a pure rule), and either
//!
//! * a task it woke was queued behind busy workers (they would have taken
//!   it had one been free), or
//! * its sockets' events woke nobody: their tasks are running or queued,
//!   and will look at the readiness themselves. A worker that registers a
//!   socket already ready (a loopback connect is made inside `connect`)
//!   wakes the thread from inside `epoll_ctl`, for nothing. On the lab's
//!   VM the kernel put the woken thread on the worker's own core (513 of
//!   519 wake-ups in one profiled run of five bursts of 2,000 connects),
//!   and with the process held to one core the bursts' mean start was
//!   29-55 ms against 25-29 once the thread stepped aside on such turns
//!   (docs/measurements.md, "The connect burst's reactor wake-ups").
//!
//! [`DENSE`]: crate::reactor_pacing::DENSE

use crate::reactor_pacing::DENSE;
use crate::sync::{seqcst_pair, AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// One turn of the reactor's thread: what [`steps_aside`] reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Turn {
    /// Wakers the turn called (tasks of ready sockets and due timers).
    pub(crate) woke: usize,
    /// Events of registered sockets the turn found.
    pub(crate) socket_events: usize,
    /// Since the previous turn ended (`None`: the first turn, or the first
    /// after a time aside).
    pub(crate) since_last: Option<Duration>,
    /// A task the turn woke was queued with every slot busy and nobody
    /// searching (`reactor_pacing::take_queued_behind_busy`).
    pub(crate) queued_behind_busy: bool,
}

/// Whether the thread asks to step aside after `turn` (module docs,
/// "When"); [`Handoff::step_aside`] still refuses with no worker awake.
pub(crate) fn steps_aside(turn: &Turn) -> bool {
    let dense = turn.since_last.is_some_and(|gap| gap < DENSE);
    let behind_busy_workers = turn.woke > 0 && turn.queued_behind_busy;
    let woke_nobody = turn.woke == 0 && turn.socket_events > 0;
    dense && (behind_busy_workers || woke_nobody)
}

/// How often the thread aside checks that workers still poll.
pub(crate) const CHECK: Duration = Duration::from_millis(1);

/// The state the reactor's thread and the workers share (module docs).
#[derive(Debug)]
pub(crate) struct Handoff {
    /// The thread has stepped aside: awake workers poll between tasks.
    aside: AtomicBool,
    /// Workers of any pool awake and counted (not parked).
    awake: AtomicUsize,
    /// Polls by workers so far: the thread aside watches it move.
    polls: AtomicUsize,
}

impl Handoff {
    pub(crate) fn new() -> Self {
        Handoff {
            aside: AtomicBool::new(false),
            awake: AtomicUsize::new(0),
            polls: AtomicUsize::new(0),
        }
    }

    /// The thread asks to step aside (steps 1-2). Returns true if it may:
    /// some worker is awake, and the last to park will call it back.
    pub(crate) fn step_aside(&self) -> bool {
        self.aside.store(true, Ordering::SeqCst);
        seqcst_pair();
        if self.awake.load(Ordering::SeqCst) == 0 {
            // Nobody to poll. A worker that parked meanwhile may have seen
            // the flag and woken the thread: a spurious wake-up, harmless.
            self.aside.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Whether the thread is aside (workers poll). A hint: read without
    /// ordering on every worker's path between tasks.
    pub(crate) fn is_aside(&self) -> bool {
        self.aside.load(Ordering::Relaxed)
    }

    /// The thread aside, after a [`CHECK`] or a wake-up: true to stay
    /// aside (still aside, and workers polled since `polls_before`, the
    /// count [`polls`](Self::polls) gave before the wait).
    pub(crate) fn stay_aside(&self, polls_before: usize) -> bool {
        if !self.aside.load(Ordering::SeqCst) {
            // A parking worker called it back.
            return false;
        }
        if self.polls.load(Ordering::Relaxed) != polls_before {
            return true;
        }
        self.aside.store(false, Ordering::SeqCst);
        false
    }

    /// The number of polls by workers so far.
    pub(crate) fn polls(&self) -> usize {
        self.polls.load(Ordering::Relaxed)
    }

    /// A worker polled.
    pub(crate) fn polled(&self) {
        self.polls.fetch_add(1, Ordering::Relaxed);
    }

    /// A worker is awake and polls between tasks while the thread is aside.
    pub(crate) fn worker_awake(&self) {
        self.awake.fetch_add(1, Ordering::SeqCst);
    }

    /// A counted worker parks or exits (steps a-b). Returns true if the
    /// caller must wake the thread: it was the last awake and the thread
    /// was aside (the flag is cleared).
    pub(crate) fn worker_sleeps(&self) -> bool {
        if self.awake.fetch_sub(1, Ordering::SeqCst) != 1 {
            return false;
        }
        seqcst_pair();
        self.aside.swap(false, Ordering::SeqCst)
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    fn turn(woke: usize, socket_events: usize, since_last_us: Option<u64>, behind: bool) -> Turn {
        Turn {
            woke,
            socket_events,
            since_last: since_last_us.map(|us| US * u32::try_from(us).unwrap()),
            queued_behind_busy: behind,
        }
    }

    #[test]
    fn a_dense_turn_whose_woken_task_queued_behind_busy_workers_steps_aside() {
        assert!(steps_aside(&turn(3, 3, Some(200), true)));
        assert!(
            !steps_aside(&turn(3, 3, Some(200), false)),
            "a free worker took the task: nothing to gain"
        );
    }

    #[test]
    fn a_dense_turn_whose_events_woke_nobody_steps_aside() {
        // A burst of connects: each registration of a ready socket wakes
        // the thread before its task waits.
        assert!(steps_aside(&turn(0, 1, Some(30), false)));
        assert!(steps_aside(&turn(0, 40, Some(900), false)));
    }

    #[test]
    fn a_turn_that_found_only_its_own_wake_up_stays() {
        // A timer moved earlier, or a spurious wake: no socket's events.
        assert!(!steps_aside(&turn(0, 0, Some(30), false)));
    }

    #[test]
    fn a_sparse_or_first_turn_stays() {
        assert!(
            !steps_aside(&turn(0, 5, Some(1_000), false)),
            "a DENSE apart"
        );
        assert!(!steps_aside(&turn(0, 5, Some(50_000), false)));
        assert!(!steps_aside(&turn(2, 2, Some(5_000), true)));
        assert!(!steps_aside(&turn(0, 5, None, false)), "no previous turn");
        assert!(!steps_aside(&turn(2, 2, None, true)));
    }

    #[test]
    fn the_thread_stays_in_the_reactor_with_no_worker_awake() {
        let handoff = Handoff::new();
        assert!(!handoff.step_aside());
        assert!(!handoff.is_aside());
    }

    #[test]
    fn the_last_worker_to_park_calls_the_thread_back() {
        let handoff = Handoff::new();
        handoff.worker_awake();
        handoff.worker_awake();
        assert!(handoff.step_aside());
        assert!(handoff.is_aside());
        assert!(!handoff.worker_sleeps(), "one is still awake");
        assert!(handoff.worker_sleeps(), "the last one wakes the thread");
        assert!(!handoff.is_aside());
    }

    #[test]
    fn the_thread_returns_when_workers_stop_polling() {
        let handoff = Handoff::new();
        handoff.worker_awake();
        assert!(handoff.step_aside());
        let before = handoff.polls();
        handoff.polled();
        assert!(handoff.stay_aside(before), "a worker polled");
        assert!(!handoff.stay_aside(handoff.polls()), "none since");
        assert!(!handoff.is_aside());
    }
}

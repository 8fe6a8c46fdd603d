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

use crate::sync::{seqcst_pair, AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

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

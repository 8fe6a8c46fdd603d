//! The gate around the shared tokio runtime's workers: a worker waking for
//! work waits for a place while `target` of them hold one, and the watcher
//! (`interop::watch`) can give a blocked one's place to another, or count
//! one back from its block again. Why a gate at all:
//! `control::back_from_block`.
//!
//! What it does not bound: a worker counted again runs on, and the count
//! stays above `target` until enough workers park (tokio shows no task
//! boundary where one could give way). Under sustained load nobody parks,
//! so after blocks more than `target` workers can run for as long as the
//! load lasts; the gate only stops new ones from joining them.
//!
//! # The protocol
//!
//! tokio calls [`Gate::enter`] when a worker wakes for work (its
//! `on_thread_unpark` hook) and [`Gate::leave`] before it parks
//! (`on_thread_park`). One mutex guards `running`, the places counted; a
//! condvar wakes workers waiting for one. Each worker has a
//! [`TaskStatus`] word (the pool's own: `control::slots`), which settles
//! who gives a place back:
//!
//! ```text
//!   enter: wait until running < target, running += 1, word := InTask
//!   leave: word := Idle; if it was InTask, running -= 1 and wake a waiter
//!   watcher, under the lock:
//!     take:        InTask  -> Blocked, running -= 1, wake a waiter
//!     count again: Blocked -> InTask,  running += 1
//! ```
//!
//! The watcher's swaps happen under the lock, and a worker that finds its
//! word `InTask` at `leave` then takes the lock to give its place back, so
//! the count never goes below zero: a place counted again is counted
//! before its worker can give it back. Exactly one of the worker and the
//! watcher settles each place: `TaskStatus` swaps race through one word.
//! A worker waiting in `enter` while the gate closes (the runtime stops)
//! is let through, so tokio's shutdown never waits for a place.
//!
//! The loom model `loom_models/tokio_gate.rs` drives this code.

use crate::control::slots::{StatusWord, TaskStatus};
use crate::sync::{lock, wait, Condvar, Mutex};

/// The gate. See the module docs.
#[derive(Debug)]
pub(crate) struct Gate {
    state: Mutex<State>,
    /// Workers waiting in [`Gate::enter`].
    place_free: Condvar,
}

#[derive(Debug)]
struct State {
    /// Places counted: workers running tasks, less those whose place was
    /// given away while they block.
    running: usize,
    /// How many places there are.
    target: usize,
    /// Workers waiting in `enter`.
    waiting: usize,
    /// The runtime stops: nobody waits any more.
    closed: bool,
}

impl Gate {
    /// A gate with `target` places, none taken.
    pub(crate) fn new(target: usize) -> Gate {
        Gate {
            state: Mutex::new(State {
                running: 0,
                target: target.max(1),
                waiting: 0,
                closed: false,
            }),
            place_free: Condvar::new(),
        }
    }

    /// Waits for a place, takes it, and marks `status` as in a task.
    pub(crate) fn enter(&self, status: &TaskStatus) {
        let mut state = lock(&self.state);
        while state.running >= state.target && !state.closed {
            state.waiting += 1;
            state = wait(&self.place_free, state);
            state.waiting -= 1;
        }
        state.running += 1;
        // The word is Idle (the worker left, or never entered), and only
        // this thread writes an Idle word: `begin_task`'s plain store.
        status.begin_task();
    }

    /// Gives the place back unless the watcher took it while this worker
    /// blocked.
    pub(crate) fn leave(&self, status: &TaskStatus) {
        if status.end_task() {
            self.give_back(&mut lock(&self.state));
        }
    }

    /// The watcher: takes the place of a worker seen blocked in `seen`.
    /// True if it did (the worker had not moved on).
    pub(crate) fn take(&self, status: &TaskStatus, seen: StatusWord) -> bool {
        let mut state = lock(&self.state);
        if !status.try_mark_blocked(seen) {
            return false;
        }
        self.give_back(&mut state);
        true
    }

    /// The watcher: counts a worker seen running again after its block
    /// (`seen`: its word then) as holding a place. True if it did (the
    /// worker had not parked meanwhile).
    pub(crate) fn count_again(&self, status: &TaskStatus, seen: StatusWord) -> bool {
        let mut state = lock(&self.state);
        if !status.try_count_again(seen) {
            return false;
        }
        state.running += 1;
        true
    }

    /// Lets every waiting worker through, now and from now on.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn close(&self) {
        lock(&self.state).closed = true;
        self.place_free.notify_all();
    }

    /// How many places are counted now, and how many workers wait for one.
    #[cfg(any(test, tidepool_loom))]
    pub(crate) fn counts(&self) -> (usize, usize) {
        let state = lock(&self.state);
        (state.running, state.waiting)
    }

    fn give_back(&self, state: &mut State) {
        state.running -= 1;
        if state.waiting > 0 {
            self.place_free.notify_one();
        }
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;
    use crate::control::slots::Phase;

    #[test]
    fn a_taken_place_is_given_back_once_and_counted_again_once() {
        let gate = Gate::new(1);
        let worker = TaskStatus::default();
        gate.enter(&worker);
        assert_eq!(gate.counts(), (1, 0));
        let seen = worker.load();
        assert!(gate.take(&worker, seen));
        assert!(!gate.take(&worker, seen), "taken once");
        assert_eq!(gate.counts(), (0, 0));
        let blocked = worker.load();
        assert_eq!(blocked.phase(), Phase::Blocked);
        assert!(gate.count_again(&worker, blocked));
        assert!(!gate.count_again(&worker, blocked), "counted once");
        assert_eq!(gate.counts(), (1, 0));
        gate.leave(&worker);
        assert_eq!(gate.counts(), (0, 0));
    }

    #[test]
    fn a_worker_that_parks_after_its_place_was_taken_gives_nothing_back() {
        let gate = Gate::new(2);
        let worker = TaskStatus::default();
        gate.enter(&worker);
        assert!(gate.take(&worker, worker.load()));
        gate.leave(&worker);
        assert_eq!(gate.counts(), (0, 0));
        assert!(!gate.count_again(&worker, worker.load()), "parked: idle");
    }

    #[test]
    fn a_taken_place_lets_a_waiting_worker_in() {
        let gate = std::sync::Arc::new(Gate::new(1));
        let first = TaskStatus::default();
        gate.enter(&first);
        let second = std::thread::spawn({
            let gate = gate.clone();
            move || {
                let status = TaskStatus::default();
                gate.enter(&status);
                gate.leave(&status);
            }
        });
        while gate.counts().1 == 0 {
            std::thread::yield_now();
        }
        assert!(gate.take(&first, first.load()));
        second.join().unwrap();
        gate.leave(&first);
        assert_eq!(gate.counts(), (0, 0));
    }

    #[test]
    fn a_closed_gate_lets_everyone_through() {
        let gate = std::sync::Arc::new(Gate::new(1));
        let first = TaskStatus::default();
        gate.enter(&first);
        let second = std::thread::spawn({
            let gate = gate.clone();
            move || gate.enter(&TaskStatus::default())
        });
        while gate.counts().1 == 0 {
            std::thread::yield_now();
        }
        gate.close();
        second.join().unwrap();
    }
}

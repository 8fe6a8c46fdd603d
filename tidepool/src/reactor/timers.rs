//! The reactor's timers: the deadlines tasks wait for, ordered, and the
//! one rule that keeps the reactor's thread from sleeping past a deadline.
//!
//! # Who fires a timer
//!
//! Whoever polls the reactor ([`fire_due`](Timers::fire_due) after every
//! poll): its own thread, which sleeps in `epoll_wait` until the earliest
//! deadline, or, while that thread stands aside (`handoff`), the workers
//! between tasks and the thread aside at each of its checks. A timer a
//! worker fires wakes its task on that worker's lane, with no thread hop,
//! as an I/O event does.
//!
//! # The protocol
//!
//! A timer registered while the thread sleeps must not wait for a later
//! deadline the thread chose before it (or for no deadline at all). Both
//! sides work under the list's lock:
//!
//! ```text
//! reactor thread, before its wait          a task registering a timer
//! 1. lock; deadline = earliest entry       a. lock; insert (when, id)
//! 2. record "asleep until deadline"        b. if the thread is asleep until
//! 3. unlock; wait in epoll (until the         later than `when` (or for
//!    deadline)                                ever): record `when`, and
//!                                             after unlocking, wake it
//! ```
//!
//! The lock orders (1-2) and (a-b): either the thread's earliest entry is
//! already the new timer or one before it, or (b) sees the record of (2)
//! and wakes the thread. The wake is sticky (an eventfd), so one sent
//! between (3)'s unlock and the wait ends the wait at once. After the wait
//! the thread records that it is awake ([`thread_woke`]); a registration
//! then wakes nobody. The loom model is in `loom_models/timers.rs`.
//!
//! A removed timer is not un-armed: the thread may wake once for it and
//! find nothing due, which costs one turn and saves a system call on every
//! timeout that does not fire (the common case of a timeout).
//!
//! [`thread_woke`]: Timers::thread_woke

use crate::sync::{lock, AtomicUsize, Mutex, Ordering};
use std::collections::BTreeMap;
use std::task::Waker;
use std::time::Instant;

/// The timers of one reactor.
#[derive(Debug)]
pub(crate) struct Timers {
    list: Mutex<List>,
    /// How many timers are registered: a poll with none skips the lock and
    /// the clock. Written under the lock (a plain store, cheaper than a
    /// read-modify-write on every timer); read without it, as a hint.
    registered: AtomicUsize,
}

#[derive(Debug)]
struct List {
    /// Wakers by deadline; the id tells apart timers with equal deadlines.
    entries: BTreeMap<(Instant, u64), Waker>,
    next_id: u64,
    /// What the reactor's thread waits for, if it waits in the reactor.
    thread: ThreadWait,
}

/// Whether and until when the reactor's thread sleeps in `epoll_wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ThreadWait {
    /// Awake, or aside: a registration wakes nobody.
    Awake,
    /// Asleep until an event or this deadline.
    Until(Instant),
    /// Asleep until an event.
    Forever,
}

/// A registration: where the timer sits in the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimerKey {
    pub(crate) when: Instant,
    id: u64,
}

impl Timers {
    pub(crate) fn new() -> Self {
        Timers {
            list: Mutex::new(List {
                entries: BTreeMap::new(),
                next_id: 0,
                thread: ThreadWait::Awake,
            }),
            registered: AtomicUsize::new(0),
        }
    }

    /// Registers a timer due at `when` that wakes `waker` (steps a-b).
    /// Returns its key, and true if the caller must wake the reactor's
    /// thread (it sleeps past `when`).
    pub(crate) fn insert(&self, when: Instant, waker: Waker) -> (TimerKey, bool) {
        let mut list = lock(&self.list);
        let id = list.next_id;
        list.next_id += 1;
        list.entries.insert((when, id), waker);
        self.registered.store(list.entries.len(), Ordering::Relaxed);
        let wake_thread = match list.thread {
            ThreadWait::Awake => false,
            ThreadWait::Until(deadline) => when < deadline,
            ThreadWait::Forever => true,
        };
        if wake_thread {
            // Recorded so that a second earlier timer before the thread
            // wakes does not send a second wake.
            list.thread = ThreadWait::Until(when);
        }
        (TimerKey { when, id }, wake_thread)
    }

    /// Replaces the waker of a registered timer. Returns false if the timer
    /// is no longer registered (it fired meanwhile).
    pub(crate) fn set_waker(&self, key: TimerKey, waker: &Waker) -> bool {
        let mut list = lock(&self.list);
        match list.entries.get_mut(&(key.when, key.id)) {
            Some(registered) => {
                registered.clone_from(waker);
                true
            }
            None => false,
        }
    }

    /// Removes a timer if it is still registered (a fired one is gone).
    pub(crate) fn remove(&self, key: TimerKey) {
        let mut list = lock(&self.list);
        let removed = list.entries.remove(&(key.when, key.id));
        self.registered.store(list.entries.len(), Ordering::Relaxed);
        drop(list);
        // The waker drops outside the lock.
        drop(removed);
    }

    /// Takes the wakers of the timers due at `now` into `wake`. Returns how
    /// many it took.
    pub(crate) fn fire_due(&self, now: impl FnOnce() -> Instant, wake: &mut Vec<Waker>) -> usize {
        if self.registered.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let now = now();
        let mut list = lock(&self.list);
        let before = wake.len();
        while let Some(entry) = list.entries.first_entry() {
            if entry.key().0 > now {
                break;
            }
            wake.push(entry.remove());
        }
        self.registered.store(list.entries.len(), Ordering::Relaxed);
        wake.len() - before
    }

    /// The thread is about to wait in the reactor (steps 1-2): records it
    /// and returns the earliest deadline, the end of its wait.
    pub(crate) fn thread_waits(&self) -> Option<Instant> {
        let mut list = lock(&self.list);
        let earliest = list.entries.first_key_value().map(|((when, _), _)| *when);
        list.thread = earliest.map_or(ThreadWait::Forever, ThreadWait::Until);
        earliest
    }

    /// The thread's wait ended: registrations no longer wake it.
    pub(crate) fn thread_woke(&self) {
        lock(&self.list).thread = ThreadWait::Awake;
    }

    /// What the thread waits for, as recorded (for the tests).
    #[cfg(all(test, not(tidepool_loom)))]
    pub(crate) fn thread_wait(&self) -> ThreadWait {
        lock(&self.list).thread
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;
    use crate::sync::counting::waker as counting_waker;
    use std::time::Duration;

    #[test]
    fn due_timers_fire_in_deadline_order_and_later_ones_wait() {
        let timers = Timers::new();
        let now = Instant::now();
        let (wakes, waker) = counting_waker();
        let late = now + Duration::from_secs(60);
        timers.insert(now + Duration::from_millis(2), waker.clone());
        timers.insert(now + Duration::from_millis(1), waker.clone());
        let (late_key, _) = timers.insert(late, waker);
        let mut wake = Vec::new();
        assert_eq!(timers.fire_due(|| now, &mut wake), 0, "nothing due yet");
        let fired = timers.fire_due(|| now + Duration::from_millis(5), &mut wake);
        assert_eq!(fired, 2);
        wake.drain(..).for_each(Waker::wake);
        assert_eq!(wakes.get(), 2);
        assert_eq!(timers.thread_waits(), Some(late), "the late one is left");
        timers.remove(late_key);
        assert_eq!(timers.registered.load(Ordering::Relaxed), 0);
        assert_eq!(timers.fire_due(|| late, &mut wake), 0);
    }

    #[test]
    fn a_timer_earlier_than_the_sleeping_thread_wakes_it_once() {
        let timers = Timers::new();
        let now = Instant::now();
        let (_wakes, waker) = counting_waker();
        assert_eq!(timers.thread_waits(), None);
        assert_eq!(timers.thread_wait(), ThreadWait::Forever);
        let soon = now + Duration::from_millis(10);
        assert!(timers.insert(soon, waker.clone()).1, "it sleeps for ever");
        assert_eq!(timers.thread_wait(), ThreadWait::Until(soon));
        assert!(
            !timers
                .insert(soon + Duration::from_millis(1), waker.clone())
                .1,
            "already woken for an earlier one"
        );
        assert!(timers.insert(now, waker.clone()).1, "earlier still");
        timers.thread_woke();
        assert!(!timers.insert(now, waker).1, "awake: nobody to wake");
    }

    #[test]
    fn a_removed_or_fired_timer_takes_no_new_waker() {
        let timers = Timers::new();
        let now = Instant::now();
        let (first, waker) = counting_waker();
        let (second, other) = counting_waker();
        let (key, _) = timers.insert(now, waker);
        assert!(timers.set_waker(key, &other));
        let mut wake = Vec::new();
        timers.fire_due(|| now, &mut wake);
        wake.drain(..).for_each(Waker::wake);
        assert_eq!((first.get(), second.get()), (0, 1));
        assert!(!timers.set_waker(key, &other), "fired: gone");
        timers.remove(key);
        assert_eq!(timers.registered.load(Ordering::Relaxed), 0);
    }
}

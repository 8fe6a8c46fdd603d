//! Parking idle workers without losing a wake-up.
//!
//! # The protocol
//!
//! Idle workers wait on a LIFO stack of sleepers. LIFO so that the same few
//! threads stay warm and the cold ones at the bottom reach their idle timeout
//! and retire.
//!
//! The danger is the lost wake-up: a worker decides there is no work, a task
//! arrives, the notifier sees "somebody is searching" and leaves, and the
//! worker goes to sleep with the task queued. It is avoided by ordering:
//!
//! ```text
//! worker going idle                      notifier with a new task
//! 1. push itself on the sleeper stack    a. push the task on a queue
//! 2. release slot + searching (SeqCst)   b. fence(SeqCst)
//! 3. look at every queue again           c. read the slot counters; if nobody
//!    - work and a free slot? take it,       searches and a slot is free,
//!      then take itself off the stack       reserve one and pop a sleeper
//!      (or find it was popped already    d. wake the popped sleeper
//!      and give one slot back); search
//!    - work, no free slot? stay on the
//!      stack
//! 4. wait for a wake token
//! ```
//!
//! Either (c) sees the slot released in (2), and the worker is already on the
//! stack to be popped, or (3) sees the task pushed in (a).
//!
//! The worker never leaves the stack without a slot: if it did, a notifier
//! that took the slot it released could find the stack empty and start a
//! new thread while this one goes back to sleep (a wasted thread start; the
//! loom model asserts it cannot happen).
//!
//! A *wake token* is the per-worker flag a notifier sets when it pops a
//! sleeper; the notifier has already reserved a slot and a searching mark for
//! it (see `control::slots`), so a woken worker starts out searching. Tokens
//! and the stack are guarded by one mutex; each worker waits on its own
//! condition variable so a wake-up wakes exactly one thread.
//!
//! Invariants (checked by the loom model in `tests/loom_park.rs`):
//!
//! 1. A worker is on the stack, or holds a token, or is awake: never two.
//! 2. Every token set is consumed by exactly one return from [`Sleepers::park`]
//!    or [`Sleepers::remove`].

use crate::sync::{lock, AtomicUsize, Condvar, Mutex, Ordering};
use std::time::{Duration, Instant};

/// The stack of parked workers and their wake tokens.
#[derive(Debug)]
pub(crate) struct Sleepers {
    state: Mutex<SleepState>,
    /// One condition variable per worker index.
    wakers: Box<[Condvar]>,
    /// Mirror of `state.stack.len()` for lock-free metrics and fast checks.
    parked: AtomicUsize,
}

#[derive(Debug)]
struct SleepState {
    /// Parked worker indices; the last is the most recently parked.
    stack: Vec<usize>,
    /// `token[i]`: a notifier popped worker `i` and reserved a slot for it.
    token: Vec<bool>,
    /// Set once at shutdown: every park returns [`Wake::Stop`].
    stopping: bool,
}

/// Why [`Sleepers::park`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A notifier popped this worker and reserved a searching slot for it.
    Woken,
    /// The timeout passed and the worker retires; it has taken itself off
    /// the stack (and off the thread count, through `retire`).
    TimedOut,
    /// The pool is stopping; the worker has taken itself off the stack.
    Stop,
}

impl Sleepers {
    /// Room for workers `0..capacity`.
    pub(crate) fn new(capacity: usize) -> Self {
        Sleepers {
            state: Mutex::new(SleepState {
                stack: Vec::with_capacity(capacity),
                token: vec![false; capacity],
                stopping: false,
            }),
            wakers: (0..capacity).map(|_| Condvar::new()).collect(),
            parked: AtomicUsize::new(0),
        }
    }

    /// How many workers are parked (approximate, lock-free).
    pub(crate) fn parked(&self) -> usize {
        self.parked.load(Ordering::Relaxed)
    }

    /// Step 1 of going idle: puts `worker` on top of the stack.
    pub(crate) fn push(&self, worker: usize) {
        let mut state = lock(&self.state);
        debug_assert!(!state.stack.contains(&worker) && !state.token[worker]);
        state.stack.push(worker);
        self.parked.store(state.stack.len(), Ordering::Relaxed);
    }

    /// Step 3 of going idle, when work showed up: takes `worker` off the
    /// stack. Returns true if it was still there (the caller holds nothing and
    /// must get a slot itself), false if a notifier got there first (the caller
    /// was handed a searching slot; its token is consumed here).
    pub(crate) fn remove(&self, worker: usize) -> bool {
        let mut state = lock(&self.state);
        if let Some(position) = state.stack.iter().rposition(|&w| w == worker) {
            state.stack.remove(position);
            self.parked.store(state.stack.len(), Ordering::Relaxed);
            true
        } else {
            debug_assert!(state.token[worker], "off the stack without a token");
            state.token[worker] = false;
            false
        }
    }

    /// Step 4: waits for a wake token, the timeout (if any) or shutdown. The
    /// worker must be on the stack (after [`Sleepers::push`]).
    ///
    /// When the timeout passes, `retire` decides (under the lock, so the
    /// worker never leaves the stack without a slot unless it leaves the
    /// pool): if it says yes the worker comes off the stack and gets
    /// [`Wake::TimedOut`]; if not, the worker keeps waiting, now without a
    /// timeout (a worker kept for `min_threads` would otherwise wake up every
    /// timeout for nothing, and spin with a tiny one).
    pub(crate) fn park(
        &self,
        worker: usize,
        timeout: Option<Duration>,
        mut retire: impl FnMut() -> bool,
    ) -> Wake {
        // A timeout too long to represent as an instant (`idle_timeout` may be
        // `Duration::MAX`) is no timeout.
        let mut deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut state = lock(&self.state);
        loop {
            if state.token[worker] {
                state.token[worker] = false;
                return Wake::Woken;
            }
            if state.stopping {
                self.take_off(&mut state, worker);
                return Wake::Stop;
            }
            match deadline {
                None => {
                    state = match self.wakers[worker].wait(state) {
                        Ok(guard) => guard,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                }
                Some(until) => {
                    let now = Instant::now();
                    if now >= until {
                        if retire() {
                            self.take_off(&mut state, worker);
                            return Wake::TimedOut;
                        }
                        deadline = None;
                        continue;
                    }
                    state = match self.wakers[worker].wait_timeout(state, until - now) {
                        Ok((guard, _)) => guard,
                        Err(poisoned) => poisoned.into_inner().0,
                    };
                }
            }
        }
    }

    fn take_off(&self, state: &mut SleepState, worker: usize) {
        if let Some(position) = state.stack.iter().rposition(|&w| w == worker) {
            state.stack.remove(position);
            self.parked.store(state.stack.len(), Ordering::Relaxed);
        }
    }

    /// Step (c)/(d) for a notifier that reserved a searching slot: pops the
    /// most recently parked worker, hands it the reservation and wakes it.
    /// Returns false if nobody is parked (the caller must start a thread or
    /// give the reservation back).
    pub(crate) fn wake_one(&self) -> bool {
        let worker = {
            let mut state = lock(&self.state);
            let Some(worker) = state.stack.pop() else {
                return false;
            };
            self.parked.store(state.stack.len(), Ordering::Relaxed);
            state.token[worker] = true;
            worker
        };
        // Notified outside the lock so the woken thread does not block on it.
        self.wakers[worker].notify_one();
        true
    }

    /// Wakes every parked worker with [`Wake::Stop`], now and forever after.
    pub(crate) fn stop_all(&self) {
        let parked: Vec<usize> = {
            let mut state = lock(&self.state);
            state.stopping = true;
            state.stack.clone()
        };
        for worker in parked {
            self.wakers[worker].notify_one();
        }
    }
}

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
//! A *wake token* is what a notifier leaves a sleeper it pops. Two kinds:
//!
//! * a *slot* token: the notifier has already reserved a slot and a
//!   searching mark for it (see `control::slots`), so a woken worker starts
//!   out searching;
//! * a *task* token ([`Sleepers::hand`]): a task presumed blocking
//!   (`control::presumption`), which the worker runs without a slot, as if the
//!   monitor had found it blocked. No slot changes hands, so this needs none
//!   of the ordering above: the task is in the token, not in a queue.
//!
//! Tokens and the stack are guarded by one mutex; each worker waits on its
//! own condition variable so a wake-up wakes exactly one thread.
//!
//! Invariants (checked by the loom model in `loom_models/park.rs`, which
//! runs [`go_idle`], [`notify`] and [`Sleepers::hand`], the functions the
//! pool itself calls):
//!
//! 1. A worker is on the stack, or holds a token, or is awake: never two.
//! 2. Every token set is consumed by exactly one return from [`Sleepers::park`]
//!    or [`Sleepers::remove`]; a handed task comes out of exactly one of them
//!    (or back to the caller of [`Sleepers::hand`] when nobody was parked).

use crate::control::slots::Slots;
use crate::sync::{fence, lock, wait, wait_timeout, AtomicUsize, Condvar, Mutex, Ordering};
use std::time::{Duration, Instant};

/// Steps 1-3 of the protocol, for a searching worker that found nothing:
/// `worker` goes on the sleeper stack and gives its slot back, then
/// `work_or_stop` looks at every queue (and the shutdown latch) again.
///
/// Returns [`Idle::Search`] if the worker ends up holding a searching slot
/// (it saw work, took a free slot, and is off the stack), or [`Idle::Park`]
/// if it stays on the stack and must call [`Sleepers::park`] (step 4).
pub(crate) fn go_idle<T>(
    sleepers: &Sleepers<T>,
    slots: &Slots,
    worker: usize,
    work_or_stop: impl FnOnce() -> bool,
) -> Idle<T> {
    sleepers.push(worker);
    // Releases the slot with a SeqCst fence: the pair of the notifier's.
    slots.release_searching();
    if work_or_stop() {
        // Take a slot while still on the stack: a notifier that comes
        // meanwhile pops us and hands us its reservation, instead of finding
        // the stack empty and starting a thread for nothing.
        if slots.try_acquire(true) {
            return match sleepers.remove(worker) {
                Removed::OnStack => Idle::Search(None),
                Removed::Slot => {
                    // A notifier popped us too and reserved a slot for us
                    // (`remove` consumed its token): keep one of the two.
                    slots.release_searching();
                    Idle::Search(None)
                }
                // Handed a task meanwhile: ours to run, with the slot we
                // took or without it (the worker decides).
                Removed::Task(task) => Idle::Search(Some(task)),
            };
        }
        // No free slot: the workers holding them will find the work, or a
        // notifier took the slot we released and is about to pop us. Either
        // way we stay on the stack: leaving it, even for a moment, would let
        // that notifier find it empty and start a thread.
    }
    Idle::Park
}

/// What [`go_idle`] decided.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Idle<T> {
    /// The worker holds a searching slot and looks for work again; with a
    /// task a notifier handed it while it was on the stack.
    Search(Option<T>),
    /// The worker is on the stack without a slot: park it.
    Park,
}

/// What [`Sleepers::remove`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Removed<T> {
    /// The worker was still on the stack; it is off it now, holding nothing.
    OnStack,
    /// A notifier popped it and reserved a searching slot for it.
    Slot,
    /// A notifier popped it and handed it this task.
    Task(T),
}

/// Steps (b)-(d) of the protocol, for a thread that has just queued work:
/// if nobody is searching and a slot is free, reserves a searching slot and
/// hands it to a parked worker, or else to a thread `start` starts (it
/// returns false if it could not start one, and the reservation is given
/// back).
///
/// `stopped` is asked first, after the fence: if it returns true the pool
/// has stopped and nobody will run the work (it has dropped what was
/// queued), so nobody is woken.
///
/// Returns true if a worker was handed the work, or none was needed because
/// somebody is searching already (or the pool stopped).
pub(crate) fn notify<T>(
    sleepers: &Sleepers<T>,
    slots: &Slots,
    stopped: impl FnOnce() -> bool,
    start: impl FnOnce() -> bool,
) -> bool {
    // Pairs with the fence in `Slots::release_searching` (step 2): the queue
    // write before this and the queue reads after that are not SeqCst.
    fence(Ordering::SeqCst);
    if stopped() {
        return true;
    }
    if slots.try_reserve_searcher() {
        hand_over(sleepers, slots, start);
        return true;
    }
    slots.counts().searching > 0
}

/// Hands a searching slot the caller reserved to a parked worker, or to a
/// thread `start` starts; gives the reservation back if neither is possible.
pub(crate) fn hand_over<T>(sleepers: &Sleepers<T>, slots: &Slots, start: impl FnOnce() -> bool) {
    hand_over_with(sleepers, slots, |_| {}, start);
}

/// [`hand_over`], calling `before_wake` with the index of the parked worker
/// it pops (off the stack's lock, before the wake-up: the worker cannot
/// leave its park, nor its thread exit, before it is woken).
pub(crate) fn hand_over_with<T>(
    sleepers: &Sleepers<T>,
    slots: &Slots,
    before_wake: impl FnOnce(usize),
    start: impl FnOnce() -> bool,
) {
    if sleepers.wake_one_with(before_wake) {
        return;
    }
    if !start() {
        slots.release_searching();
    }
}

/// The stack of parked workers and their wake tokens; `T` is what a task
/// token carries (the pool's `Runnable`).
#[derive(Debug)]
pub(crate) struct Sleepers<T> {
    state: Mutex<SleepState<T>>,
    /// One condition variable per worker index.
    wakers: Box<[Condvar]>,
    /// Mirror of `state.stack.len()` for lock-free metrics and fast checks.
    parked: AtomicUsize,
}

#[derive(Debug)]
struct SleepState<T> {
    /// Parked worker indices; the last is the most recently parked.
    stack: Vec<usize>,
    /// `token[i]`: what a notifier that popped worker `i` left it.
    token: Vec<Token<T>>,
    /// Set once at shutdown: every park returns [`Wake::Stop`].
    stopping: bool,
}

/// A wake token (see the module docs).
#[derive(Debug)]
enum Token<T> {
    None,
    /// A searching slot was reserved for the worker.
    Slot,
    /// A task to run without a slot.
    Task(T),
}

impl<T> Token<T> {
    fn is_none(&self) -> bool {
        matches!(self, Token::None)
    }
}

/// Why [`Sleepers::park`] returned.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Wake<T> {
    /// A notifier popped this worker and reserved a searching slot for it.
    Woken,
    /// A notifier popped this worker and handed it a task to run without a
    /// slot ([`Sleepers::hand`]).
    Handed(T),
    /// The timeout passed and the worker retires; it has taken itself off
    /// the stack (and off the thread count, through `retire`).
    TimedOut,
    /// The pool is stopping; the worker has taken itself off the stack.
    Stop,
}

impl<T> Sleepers<T> {
    /// Room for workers `0..capacity`.
    pub(crate) fn new(capacity: usize) -> Self {
        Sleepers {
            state: Mutex::new(SleepState {
                stack: Vec::with_capacity(capacity),
                token: (0..capacity).map(|_| Token::None).collect(),
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
        debug_assert!(!state.stack.contains(&worker) && state.token[worker].is_none());
        state.stack.push(worker);
        self.parked.store(state.stack.len(), Ordering::Relaxed);
    }

    /// Step 3 of going idle, when work showed up: takes `worker` off the
    /// stack, or consumes the token of the notifier that got there first.
    pub(crate) fn remove(&self, worker: usize) -> Removed<T> {
        let mut state = lock(&self.state);
        if let Some(position) = state.stack.iter().rposition(|&w| w == worker) {
            state.stack.remove(position);
            self.parked.store(state.stack.len(), Ordering::Relaxed);
            return Removed::OnStack;
        }
        match std::mem::replace(&mut state.token[worker], Token::None) {
            Token::Slot => Removed::Slot,
            Token::Task(task) => Removed::Task(task),
            Token::None => unreachable!("worker {worker} off the stack without a token"),
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
    ) -> Wake<T> {
        // A timeout too long to represent as an instant (`idle_timeout` may be
        // `Duration::MAX`) is no timeout.
        let mut deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut state = lock(&self.state);
        loop {
            match std::mem::replace(&mut state.token[worker], Token::None) {
                Token::None => {}
                Token::Slot => return Wake::Woken,
                Token::Task(task) => return Wake::Handed(task),
            }
            if state.stopping {
                self.take_off(&mut state, worker);
                return Wake::Stop;
            }
            match deadline {
                None => {
                    state = wait(&self.wakers[worker], state);
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
                    state = wait_timeout(&self.wakers[worker], state, until - now).0;
                }
            }
        }
    }

    fn take_off(&self, state: &mut SleepState<T>, worker: usize) {
        if let Some(position) = state.stack.iter().rposition(|&w| w == worker) {
            state.stack.remove(position);
            self.parked.store(state.stack.len(), Ordering::Relaxed);
        }
    }

    /// Step (c)/(d) for a notifier that reserved a searching slot: pops the
    /// most recently parked worker, hands it the reservation and wakes it.
    /// Returns false if nobody is parked (the caller must start a thread or
    /// give the reservation back). `before_wake` is called with the popped
    /// worker's index before it is woken.
    pub(crate) fn wake_one_with(&self, before_wake: impl FnOnce(usize)) -> bool {
        let worker = {
            let mut state = lock(&self.state);
            let Some(worker) = state.stack.pop() else {
                return false;
            };
            self.parked.store(state.stack.len(), Ordering::Relaxed);
            state.token[worker] = Token::Slot;
            worker
        };
        before_wake(worker);
        // Notified outside the lock so the woken thread does not block on it.
        self.wakers[worker].notify_one();
        true
    }

    /// Pops the most recently parked worker and hands it `task`, to run
    /// without a slot; wakes it. Gives the task back if nobody is parked (or
    /// the pool is stopping: a stopping worker would not run it).
    pub(crate) fn hand(&self, task: T) -> Result<(), T> {
        let worker = {
            let mut state = lock(&self.state);
            if state.stopping {
                return Err(task);
            }
            let Some(worker) = state.stack.pop() else {
                return Err(task);
            };
            self.parked.store(state.stack.len(), Ordering::Relaxed);
            state.token[worker] = Token::Task(task);
            worker
        };
        self.wakers[worker].notify_one();
        Ok(())
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

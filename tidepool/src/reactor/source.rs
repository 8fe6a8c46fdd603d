//! One registered file descriptor: the readiness the reactor last saw for
//! it, and the tasks waiting for more.
//!
//! # The protocol
//!
//! Readiness is kept, not asked for again: the descriptor is registered
//! once, edge-triggered, for both directions, and each event *sets* a
//! direction's bit ([`Source::set_ready`]). A task that wants to read looks
//! at the bit first ([`Source::poll_ready`]); while it is set, it tries the
//! read at once (no system call to re-arm, no wait). Only when the read says
//! `WouldBlock` does the task clear the bit ([`Source::clear_ready`]) and
//! wait for the next edge.
//!
//! Two races, and why neither loses an event:
//!
//! * **An event between the check and the wait.** The waiter registers its
//!   waker under the `waiters` lock and then looks at the bit again, still
//!   under the lock; the reactor sets the bit *before* it takes the lock to
//!   collect wakers. If the reactor's critical section comes first, the
//!   waiter's second look sees the bit; if the waiter's comes first, the
//!   reactor finds its waker.
//! * **An event between the failed read and the clear.** Every event moves a
//!   counter (the *tick*) kept in the same word as the bits. A task clears
//!   only the tick it read before its attempt: if an edge arrived since, the
//!   tick moved, the clear does nothing, and the task tries again.
//!
//! # Who waits
//!
//! A future (`read_with`, `readable` and the socket methods built on
//! them) waits through a [`Waiter`] of its own, whose entry leaves the
//! list when the future is dropped: a wait given up on a quiet socket (a
//! timeout, a cancelled task) keeps nothing. The poll functions
//! (`poll_readable`, `AsyncRead`, ...) have no value that lives as long as
//! the wait, so they keep one entry per task until the next event.
//!
//! The loom model `loom_models/reactor.rs` runs these functions against
//! each other.

use crate::sync::{lock, AtomicUsize, Mutex, Ordering};
use std::task::{Context, Poll, Waker};

/// Which way a task waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Readable (or closed, or in error: a read will say which).
    Read,
    /// Writable (or closed, or in error).
    Write,
}

impl Direction {
    /// The direction's readiness bit in [`Source::state`]: cleared when an
    /// attempt would block.
    const fn bit(self) -> usize {
        match self {
            Direction::Read => READ,
            Direction::Write => WRITE,
        }
    }

    /// The direction's closed bit: never cleared.
    const fn closed_bit(self) -> usize {
        match self {
            Direction::Read => READ_CLOSED,
            Direction::Write => WRITE_CLOSED,
        }
    }
}

/// The readable bit of [`Source::state`].
pub(crate) const READ: usize = 0b0001;
/// The writable bit of [`Source::state`].
pub(crate) const WRITE: usize = 0b0010;
/// The peer closed its side, or the socket is in error: reads end at once
/// (they return the end or the error), for good. Kept apart from [`READ`]
/// and never cleared: the hang-up often comes in the same event as the
/// last data, and a short read of that data clears [`READ`] (see
/// `Async`'s `stream_socket`); no later edge would come to end the wait.
pub(crate) const READ_CLOSED: usize = 0b0100;
/// As [`READ_CLOSED`], for writes.
pub(crate) const WRITE_CLOSED: usize = 0b1000;
/// Every readiness bit.
const BITS: usize = READ | WRITE | READ_CLOSED | WRITE_CLOSED;
/// The tick lives above the bits.
const TICK_SHIFT: u32 = 4;

/// A registered descriptor's readiness and waiters (see the module docs).
///
/// One cache line: the state, the lock and the two usual waiters sit
/// together (56 bytes), so a task's registration and the reactor's event
/// each move one line between cores, not three. With the lists of wakers
/// a first layout kept, [`poll_ready`](Self::poll_ready) and
/// [`set_ready`](Self::set_ready) took twice the samples of tokio's
/// equivalents in a profile of the lab's `async-io`, mostly on the lock's
/// first touch. In one line, `Async`'s median went from 0.92x to 0.95x of
/// tokio's round trips per second, within overlapping spreads
/// (docs/measurements.md, "A source in one cache line").
#[derive(Debug)]
#[repr(align(64))]
pub(crate) struct Source {
    /// The readiness bits ([`READ`], [`WRITE`]) and above them the tick,
    /// which every event moves on (it wraps; only equality matters).
    state: AtomicUsize,
    /// Tasks waiting for each direction.
    waiters: Mutex<Waiters>,
}

/// The wakers of the tasks waiting on one source.
#[derive(Debug, Default)]
struct Waiters {
    /// The first task waiting to read through the poll functions
    /// (`poll_readable`, `AsyncRead`, ...): usually the only one.
    reader: Option<Waker>,
    /// As `reader`, for writes.
    writer: Option<Waker>,
    /// Everything else, made on first need and kept: more tasks polling a
    /// direction, and the futures' [`Waiter`]s. Boxed, so the usual case
    /// fits one cache line with the state (see [`Source`]).
    more: Option<Box<MoreWaiters>>,
}

/// The waiters beyond one polling task per direction (see [`Waiters`]).
#[derive(Debug, Default)]
struct MoreWaiters {
    readers: WaiterList,
    writers: WaiterList,
    /// The key the next [`Waiter`] to register gets. Never reused (64
    /// bits do not wrap), so a waiter whose entry an event took out
    /// cannot remove another's.
    next_key: u64,
}

/// The tasks waiting on one direction of a source.
#[derive(Debug, Default)]
struct WaiterList {
    /// Wakers registered through the poll functions (`poll_readable`,
    /// `AsyncRead`, ...), one per task: nothing tells when their wait
    /// ends, so they stay until the next event.
    polled: Vec<Waker>,
    /// Wakers of [`Waiter`]s (the futures: `read_with`, `readable`, and
    /// the socket methods built on them), by key: a waiter dropped before
    /// its event (cancelled, timed out) takes its entry out, so a quiet
    /// socket does not keep the tasks that gave up on it.
    keyed: Vec<(u64, Waker)>,
}

impl Waiters {
    /// The inline slot of the first task polling `direction`.
    fn first(&mut self, direction: Direction) -> &mut Option<Waker> {
        match direction {
            Direction::Read => &mut self.reader,
            Direction::Write => &mut self.writer,
        }
    }

    /// The rest, made if there were none.
    fn more(&mut self) -> &mut MoreWaiters {
        self.more.get_or_insert_with(Box::default)
    }

    /// Registers `waker` of a task polling `direction`, once per task.
    fn add_polled(&mut self, direction: Direction, waker: &Waker) {
        match self.first(direction) {
            slot @ None => *slot = Some(waker.clone()),
            Some(first) if first.will_wake(waker) => {}
            Some(_) => {
                let list = &mut self.more().of(direction).polled;
                if !list.iter().any(|w| w.will_wake(waker)) {
                    list.push(waker.clone());
                }
            }
        }
    }

    /// Moves every waker waiting on `direction` to `wake`.
    fn take_all(&mut self, direction: Direction, wake: &mut Vec<Waker>) {
        wake.extend(self.first(direction).take());
        if let Some(more) = &mut self.more {
            more.of(direction).take_all(wake);
        }
    }
}

impl MoreWaiters {
    fn of(&mut self, direction: Direction) -> &mut WaiterList {
        match direction {
            Direction::Read => &mut self.readers,
            Direction::Write => &mut self.writers,
        }
    }
}

impl WaiterList {
    /// Moves every waker to `wake`.
    fn take_all(&mut self, wake: &mut Vec<Waker>) {
        wake.append(&mut self.polled);
        wake.extend(self.keyed.drain(..).map(|(_, waker)| waker));
    }
}

/// One future's wait on one direction of a [`Source`]: its waker is kept
/// under a key of its own, which its drop takes out again (see
/// [`WaiterList`]). Made by [`Source::waiter`].
#[derive(Debug)]
pub(crate) struct Waiter<'a> {
    source: &'a Source,
    direction: Direction,
    key: Option<u64>,
}

impl Waiter<'_> {
    /// [`Source::poll_ready`] for this waiter: registers (or updates) its
    /// own entry when the direction is not ready.
    pub(crate) fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Ready> {
        if let Some(ready) = self.source.ready(self.direction) {
            return Poll::Ready(ready);
        }
        let mut guard = lock(&self.source.waiters);
        let waiters = guard.more();
        let key = match self.key {
            Some(key) => key,
            None => {
                let key = waiters.next_key;
                waiters.next_key += 1;
                self.key = Some(key);
                key
            }
        };
        let list = &mut waiters.of(self.direction).keyed;
        let replaced = match list.iter_mut().find(|(k, _)| *k == key) {
            Some((_, waker)) if !waker.will_wake(cx.waker()) => {
                Some(std::mem::replace(waker, cx.waker().clone()))
            }
            Some(_) => None,
            // First wait, or an event took the entry out since.
            None => {
                list.push((key, cx.waker().clone()));
                None
            }
        };
        // Under the lock, as in `Source::poll_ready`.
        let poll = match self.source.ready(self.direction) {
            Some(ready) => Poll::Ready(ready),
            None => Poll::Pending,
        };
        drop(guard);
        // Outside the lock, as in `drop`.
        drop(replaced);
        poll
    }

    /// [`Source::clear_ready`] for this waiter's direction.
    pub(crate) fn clear_ready(&self, ready: Ready) {
        self.source.clear_ready(self.direction, ready);
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            let removed = {
                let mut waiters = lock(&self.source.waiters);
                // A key was given out under the lock with the box made.
                waiters.more.as_mut().and_then(|more| {
                    let list = &mut more.of(self.direction).keyed;
                    list.iter()
                        .position(|(k, _)| *k == key)
                        .map(|at| list.swap_remove(at).1)
                })
            };
            // Dropped outside the lock: the last reference to a task may
            // free it, and that runs user destructors.
            drop(removed);
        }
    }
}

/// What [`Source::poll_ready`] saw: the tick to pass to
/// [`Source::clear_ready`] if the attempt it allows would block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ready {
    tick: usize,
}

impl Source {
    /// A source not yet seen ready: a fresh edge-triggered registration
    /// reports the descriptor's current readiness as its first event.
    pub(crate) fn new() -> Self {
        Source {
            state: AtomicUsize::new(0),
            waiters: Mutex::new(Waiters::default()),
        }
    }

    /// Ready if the last event said `direction` may proceed and no attempt
    /// since found otherwise; else registers `cx`'s waker for the next
    /// event in that direction and returns `Pending`. Many tasks may wait
    /// on one direction (each is woken).
    pub(crate) fn poll_ready(&self, direction: Direction, cx: &mut Context<'_>) -> Poll<Ready> {
        if let Some(ready) = self.ready(direction) {
            return Poll::Ready(ready);
        }
        let mut waiters = lock(&self.waiters);
        waiters.add_polled(direction, cx.waker());
        // Under the lock: an event that set the bit before we pushed the
        // waker is seen here (the reactor sets bits before it locks).
        match self.ready(direction) {
            Some(ready) => Poll::Ready(ready),
            None => Poll::Pending,
        }
    }

    /// A waiter for one future's wait on `direction` (see [`Waiter`]).
    pub(crate) fn waiter(&self, direction: Direction) -> Waiter<'_> {
        Waiter {
            source: self,
            direction,
            key: None,
        }
    }

    /// How many wakers wait on `direction` (for tests).
    #[cfg(all(test, not(tidepool_loom)))]
    pub(crate) fn waiting(&self, direction: Direction) -> usize {
        let mut waiters = lock(&self.waiters);
        let first = usize::from(waiters.first(direction).is_some());
        let list = waiters.more().of(direction);
        first + list.polled.len() + list.keyed.len()
    }

    /// The tick if `direction`'s bit is set.
    fn ready(&self, direction: Direction) -> Option<Ready> {
        let state = self.state.load(Ordering::Acquire);
        let bits = direction.bit() | direction.closed_bit();
        (state & bits != 0).then_some(Ready {
            tick: state >> TICK_SHIFT,
        })
    }

    /// An attempt allowed by `ready` would have blocked: clears
    /// `direction`'s bit unless an event came since (then the caller just
    /// tries again).
    pub(crate) fn clear_ready(&self, direction: Direction, ready: Ready) {
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                (state >> TICK_SHIFT == ready.tick).then_some(state & !direction.bit())
            });
    }

    /// The reactor saw an event: sets `bits` ([`READ`], [`WRITE`], and the
    /// closed bits),
    /// moves the tick on, and appends the wakers of the tasks waiting on
    /// those directions to `wake` (woken by the caller, outside any lock).
    pub(crate) fn set_ready(&self, bits: usize, wake: &mut Vec<Waker>) {
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                let tick = (state >> TICK_SHIFT).wrapping_add(1);
                Some((tick << TICK_SHIFT) | (state & BITS) | bits)
            });
        let mut waiters = lock(&self.waiters);
        if bits & (READ | READ_CLOSED) != 0 {
            waiters.take_all(Direction::Read, wake);
        }
        if bits & (WRITE | WRITE_CLOSED) != 0 {
            waiters.take_all(Direction::Write, wake);
        }
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize as Count;
    use std::sync::Arc;
    use std::task::Wake;

    struct Counter(Count);
    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn waker() -> (Arc<Counter>, Waker) {
        let counter = Arc::new(Counter(Count::new(0)));
        (counter.clone(), Waker::from(counter))
    }

    /// What the reactor does with one event: sets `bits`, wakes the
    /// waiters it collected.
    fn event(source: &Source, bits: usize) {
        let mut wake = Vec::new();
        source.set_ready(bits, &mut wake);
        wake.into_iter().for_each(Waker::wake);
    }

    #[test]
    fn a_waiter_is_woken_by_an_event_in_its_direction_only() {
        let source = Source::new();
        let (reads, read_waker) = waker();
        let mut cx = Context::from_waker(&read_waker);
        assert!(source.poll_ready(Direction::Read, &mut cx).is_pending());
        let mut wake = Vec::new();
        source.set_ready(WRITE, &mut wake);
        assert!(wake.is_empty(), "a write event wakes no reader");
        source.set_ready(READ, &mut wake);
        assert_eq!(wake.len(), 1);
        wake.drain(..).for_each(Waker::wake);
        assert_eq!(reads.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(source.poll_ready(Direction::Read, &mut cx).is_ready());
    }

    #[test]
    fn readiness_stays_until_an_attempt_blocks() {
        let source = Source::new();
        let (_, w) = waker();
        let mut cx = Context::from_waker(&w);
        source.set_ready(READ | WRITE, &mut Vec::new());
        let Poll::Ready(ready) = source.poll_ready(Direction::Read, &mut cx) else {
            panic!("set")
        };
        assert!(
            source.poll_ready(Direction::Read, &mut cx).is_ready(),
            "kept"
        );
        source.clear_ready(Direction::Read, ready);
        assert!(source.poll_ready(Direction::Read, &mut cx).is_pending());
        assert!(
            source.poll_ready(Direction::Write, &mut cx).is_ready(),
            "the other direction is untouched"
        );
    }

    #[test]
    fn a_clear_after_a_newer_event_keeps_the_bit() {
        let source = Source::new();
        let (_, w) = waker();
        let mut cx = Context::from_waker(&w);
        source.set_ready(READ, &mut Vec::new());
        let Poll::Ready(stale) = source.poll_ready(Direction::Read, &mut cx) else {
            panic!("set")
        };
        // An edge arrives between the attempt and the clear.
        source.set_ready(READ, &mut Vec::new());
        source.clear_ready(Direction::Read, stale);
        assert!(source.poll_ready(Direction::Read, &mut cx).is_ready());
    }

    #[test]
    fn a_hang_up_stays_after_the_readiness_is_cleared() {
        let source = Source::new();
        let (_, w) = waker();
        let mut cx = Context::from_waker(&w);
        // The last data and the hang-up in one event.
        source.set_ready(READ | READ_CLOSED, &mut Vec::new());
        let Poll::Ready(ready) = source.poll_ready(Direction::Read, &mut cx) else {
            panic!("set")
        };
        source.clear_ready(Direction::Read, ready);
        assert!(
            source.poll_ready(Direction::Read, &mut cx).is_ready(),
            "the end of the stream is still to be read"
        );
        assert!(source.poll_ready(Direction::Write, &mut cx).is_pending());
    }

    #[test]
    fn a_dropped_waiter_leaves_no_waker_behind() {
        let source = Source::new();
        let counters: Vec<_> = (0..100).map(|_| waker()).collect();
        for (_, w) in &counters {
            let mut waiter = source.waiter(Direction::Read);
            assert!(waiter.poll_ready(&mut Context::from_waker(w)).is_pending());
            assert_eq!(
                source.waiting(Direction::Read),
                1,
                "its entry, while it waits"
            );
            // Dropped unwoken: a cancelled or timed-out wait.
        }
        assert_eq!(source.waiting(Direction::Read), 0);
        for (counter, _) in &counters {
            assert_eq!(Arc::strong_count(counter), 2, "no clone kept");
        }
    }

    #[test]
    fn a_waiter_woken_by_an_event_waits_again_under_its_key() {
        let source = Source::new();
        let (count, w) = waker();
        let mut cx = Context::from_waker(&w);
        let mut waiter = source.waiter(Direction::Write);
        assert!(waiter.poll_ready(&mut cx).is_pending());
        assert!(waiter.poll_ready(&mut cx).is_pending(), "polled again");
        assert_eq!(source.waiting(Direction::Write), 1, "one entry per waiter");
        event(&source, WRITE);
        assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        let Poll::Ready(ready) = waiter.poll_ready(&mut cx) else {
            panic!("the event set the bit")
        };
        // The attempt would block: the waiter waits again.
        waiter.clear_ready(ready);
        assert!(waiter.poll_ready(&mut cx).is_pending());
        assert_eq!(source.waiting(Direction::Write), 1);
        event(&source, WRITE);
        assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 2);
        drop(waiter);
        assert_eq!(source.waiting(Direction::Write), 0);
    }

    #[test]
    fn a_waiter_polled_by_another_task_wakes_that_task_only() {
        let source = Source::new();
        let (first_count, first) = waker();
        let (second_count, second) = waker();
        let mut waiter = source.waiter(Direction::Read);
        assert!(waiter
            .poll_ready(&mut Context::from_waker(&first))
            .is_pending());
        // The future moved to another task (a `select` in a new task).
        assert!(waiter
            .poll_ready(&mut Context::from_waker(&second))
            .is_pending());
        assert_eq!(source.waiting(Direction::Read), 1);
        assert_eq!(Arc::strong_count(&first_count), 2, "the old waker let go");
        event(&source, READ);
        assert_eq!(first_count.0.load(std::sync::atomic::Ordering::SeqCst), 0);
        assert_eq!(second_count.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn two_waiters_of_one_task_keep_their_own_entries() {
        let source = Source::new();
        let (count, w) = waker();
        let mut cx = Context::from_waker(&w);
        let mut first = source.waiter(Direction::Read);
        let mut second = source.waiter(Direction::Read);
        assert!(first.poll_ready(&mut cx).is_pending());
        assert!(second.poll_ready(&mut cx).is_pending());
        // The first gives up; the second must still be woken.
        drop(first);
        assert_eq!(source.waiting(Direction::Read), 1);
        event(&source, READ);
        assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(second.poll_ready(&mut cx).is_ready());
    }

    #[test]
    fn a_source_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Source>(), 64);
        assert_eq!(std::mem::align_of::<Source>(), 64);
    }

    #[test]
    fn a_second_task_polling_a_direction_is_woken_too() {
        let source = Source::new();
        let (first_count, first) = waker();
        let (second_count, second) = waker();
        for w in [&first, &second, &first, &second] {
            let mut cx = Context::from_waker(w);
            assert!(source.poll_ready(Direction::Read, &mut cx).is_pending());
        }
        assert_eq!(source.waiting(Direction::Read), 2, "one entry per task");
        event(&source, READ);
        assert_eq!(first_count.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(second_count.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(source.waiting(Direction::Read), 0);
    }

    #[test]
    fn one_task_polled_twice_is_woken_once() {
        let source = Source::new();
        let (count, w) = waker();
        let mut cx = Context::from_waker(&w);
        assert!(source.poll_ready(Direction::Write, &mut cx).is_pending());
        assert!(source.poll_ready(Direction::Write, &mut cx).is_pending());
        event(&source, WRITE);
        assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}

//! Running slots: how many workers may run tasks at once.
//!
//! # The protocol
//!
//! A pool has `target` running slots (normally `concurrency`; the hill-climbing
//! policy moves it). A worker must hold a slot to search for or run tasks.
//! Two counters, packed in one `AtomicU64` so they change together:
//!
//! * `active`: workers holding a slot;
//! * `searching`: how many of those are looking for work right now.
//!
//! A worker's life as seen by the counters:
//!
//! ```text
//!            reserve_searcher()                 stop_searching()
//!  parked ---------------------> searching -----------------------> running a task
//!    ^                              |  ^                                 |   |
//!    |   release_searching()        |  |        start_searching()       |   | mark_blocked():
//!    +------------------------------+  +--------------------------------+   | the monitor (or
//!    |                                                                      v | `blocking`) gives
//!    |        try_acquire() fails: surplus, parks without a slot      blocked   the slot away
//!    +--------------------------------------------------------------- (no slot)
//!                                  try_acquire() succeeds: back to running
//! ```
//!
//! Invariants (checked by the loom model in `loom_models/slots.rs`):
//!
//! 1. `active <= target` after every operation that *takes* a slot, with one
//!    exception: [`Slots::try_reserve_urgent`] may take up to
//!    [`URGENT_RESERVE`] slots beyond the target, so a high-priority task
//!    finds a thread at once on a saturated pool. `active` can also exceed a
//!    target that was lowered. Either way the surplus is temporary: whoever
//!    takes a slot beyond the target raises the pool's `shrink` flag, and a
//!    worker that sees it at its next task boundary while `active > target`
//!    gives its slot back.
//! 2. `searching <= active`.
//! 3. A slot is given away exactly once per blocked task: [`TaskStatus`] makes
//!    the monitor's "mark blocked" and the worker's "task ended" race through
//!    one atomic word, so exactly one of them owns the slot's release.
//!
//! A slot is never held by a parked worker, so parked threads cost no slot.

use crate::sync::{fence, AtomicU64, AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;

/// How many slots beyond the target high-priority tasks may borrow at once.
/// One: enough to start an urgent task at once on a saturated pool, while the
/// pool is over its slots by at most one worker, for about one task.
pub(crate) const URGENT_RESERVE: usize = 1;

const ONE_ACTIVE: u64 = 1;
const ONE_SEARCHING: u64 = 1 << 32;
const LOW_MASK: u64 = (1 << 32) - 1;

/// The pool-wide slot counters. See the module docs for the protocol.
#[derive(Debug)]
pub(crate) struct Slots {
    /// `active` in the low 32 bits, `searching` in the high 32 bits.
    state: CachePadded<AtomicU64>,
    /// How many slots there are.
    target: AtomicUsize,
}

/// A consistent reading of the slot counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SlotCounts {
    /// Workers holding a slot.
    pub(crate) active: usize,
    /// Workers holding a slot and looking for work.
    pub(crate) searching: usize,
}

fn unpack(word: u64) -> SlotCounts {
    SlotCounts {
        active: (word & LOW_MASK) as usize,
        searching: (word >> 32) as usize,
    }
}

impl Slots {
    /// `target` slots, none taken.
    pub(crate) fn new(target: usize) -> Self {
        Slots {
            state: CachePadded::new(AtomicU64::new(0)),
            target: AtomicUsize::new(target),
        }
    }

    /// How many slots there are now.
    pub(crate) fn target(&self) -> usize {
        self.target.load(Ordering::Relaxed)
    }

    /// Changes the number of slots (policies only). Lowering it takes effect as
    /// workers reach task boundaries; raising it lets the next notify wake more.
    pub(crate) fn set_target(&self, target: usize) {
        self.target.store(target, Ordering::Relaxed);
    }

    /// Reads both counters.
    ///
    /// SeqCst: a notifier's read here pairs with the `SeqCst` RMWs in
    /// [`Slots::release_searching`] (the Dekker pattern described in
    /// `runtime::park`): either the notifier sees the worker's slot released, or
    /// the worker, after releasing, sees the notifier's new task.
    pub(crate) fn counts(&self) -> SlotCounts {
        unpack(self.state.load(Ordering::SeqCst))
    }

    /// For a notifier with new work: takes a slot *and* a searching mark for a
    /// worker it is about to wake or start, but only if nobody is searching
    /// already (that worker will find the work) and a slot is free.
    pub(crate) fn try_reserve_searcher(&self) -> bool {
        self.try_reserve_searcher_beyond(0)
    }

    /// Like [`Slots::try_reserve_searcher`], but may take up to
    /// [`URGENT_RESERVE`] slots beyond the target: for a high-priority task
    /// that finds every slot busy and nobody searching. The caller raises the
    /// pool's `shrink` flag, so the surplus is given back at a task boundary
    /// (invariant 1).
    pub(crate) fn try_reserve_urgent(&self) -> bool {
        self.try_reserve_searcher_beyond(URGENT_RESERVE)
    }

    fn try_reserve_searcher_beyond(&self, extra: usize) -> bool {
        let limit = (self.target() + extra) as u64;
        let mut current = self.state.load(Ordering::SeqCst);
        loop {
            let counts = unpack(current);
            if counts.searching > 0 || counts.active as u64 >= limit {
                return false;
            }
            match self.state.compare_exchange_weak(
                current,
                current + ONE_ACTIVE + ONE_SEARCHING,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(actual) => current = actual,
            }
        }
    }

    /// True if more slots are held than there are (the target was lowered, or
    /// a reserve slot was lent).
    pub(crate) fn over_target(&self) -> bool {
        self.counts().active > self.target()
    }

    /// Takes a slot if one is free, as a searcher (a parked worker that saw work
    /// on its way to sleep) or not (a worker back from a blocked task).
    pub(crate) fn try_acquire(&self, searching: bool) -> bool {
        let add = if searching {
            ONE_ACTIVE + ONE_SEARCHING
        } else {
            ONE_ACTIVE
        };
        let target = self.target() as u64;
        let mut current = self.state.load(Ordering::Relaxed);
        loop {
            if current & LOW_MASK >= target {
                return false;
            }
            // AcqRel: taking a slot orders this worker's following queue reads
            // after whatever the releaser published before giving it back.
            match self.state.compare_exchange_weak(
                current,
                current + add,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => current = actual,
            }
        }
    }

    /// Counts a slot for a worker whose slot was given away while it
    /// blocked and that now computes again (`control::back_from_block`):
    /// beyond the target if need be, like a lowered target, so the caller
    /// raises the pool's `shrink` flag and a worker gives a slot back at
    /// its next task boundary (invariant 1). The caller then swaps the
    /// worker's status word back to `InTask` ([`TaskStatus::try_count_again`]),
    /// and gives the slot back with [`Slots::release`] if that fails (the
    /// task ended first, with no slot to give back).
    pub(crate) fn count_again(&self) {
        self.state.fetch_add(ONE_ACTIVE, Ordering::SeqCst);
    }

    /// Gives up a slot held by a worker that is running a task (it blocked).
    pub(crate) fn release(&self) {
        let previous = self.state.fetch_sub(ONE_ACTIVE, Ordering::SeqCst);
        debug_assert!(previous & LOW_MASK > 0, "slot released twice");
    }

    /// A searching worker found nothing and is going to park: gives up its slot
    /// and its searching mark in one step.
    ///
    /// The caller must look at the queues again *after* this call. The
    /// fence at the end pairs with the notifier's fence between pushing a task
    /// and [`Slots::counts`]: the queue reads that follow are not SeqCst
    /// accesses, so both sides need a fence (the Dekker pattern in
    /// `runtime::park`). This is the slow path (a worker going to sleep).
    pub(crate) fn release_searching(&self) {
        let previous = self
            .state
            .fetch_sub(ONE_ACTIVE + ONE_SEARCHING, Ordering::SeqCst);
        debug_assert!(unpack(previous).searching > 0 && unpack(previous).active > 0);
        fence(Ordering::SeqCst);
    }

    /// A worker with a slot begins to look for work outside its own queue.
    pub(crate) fn start_searching(&self) {
        self.state.fetch_add(ONE_SEARCHING, Ordering::SeqCst);
    }

    /// A searching worker found a task. Returns true if it was the last
    /// searcher: it must then wake another worker if more work is waiting, so a
    /// burst fans out one wake-up at a time instead of all at once.
    pub(crate) fn stop_searching(&self) -> bool {
        let previous = self.state.fetch_sub(ONE_SEARCHING, Ordering::SeqCst);
        debug_assert!(unpack(previous).searching > 0);
        unpack(previous).searching == 1
    }
}

/// What a worker is doing, as the monitor sees it: one word per worker that
/// the worker writes at each task boundary and the monitor reads and, to take
/// the slot of a blocked worker, compare-and-swaps.
///
/// The word is `tick << 2 | phase`. The tick counts tasks, so the monitor can
/// tell "the same task for a whole interval" from "many short tasks" without
/// the worker reading a clock per task.
#[derive(Debug)]
pub(crate) struct TaskStatus {
    word: CachePadded<AtomicU64>,
}

/// The phase bits of a [`TaskStatus`] word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Between tasks: searching, parked, or not running a task.
    Idle,
    /// Running a task and holding a slot.
    InTask,
    /// Running a task whose slot was given away (detected or declared blocking).
    Blocked,
}

const PHASE_IDLE: u64 = 0;
const PHASE_IN_TASK: u64 = 1;
const PHASE_BLOCKED: u64 = 2;

/// One reading of a [`TaskStatus`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StatusWord(u64);

impl StatusWord {
    /// The phase at the time of reading.
    pub(crate) fn phase(self) -> Phase {
        match self.0 & 3 {
            PHASE_IN_TASK => Phase::InTask,
            PHASE_BLOCKED => Phase::Blocked,
            _ => Phase::Idle,
        }
    }

    /// The task counter at the time of reading.
    pub(crate) fn tick(self) -> u64 {
        self.0 >> 2
    }
}

impl Default for TaskStatus {
    fn default() -> Self {
        TaskStatus {
            word: CachePadded::new(AtomicU64::new(PHASE_IDLE)),
        }
    }
}

impl TaskStatus {
    /// Reads the word.
    pub(crate) fn load(&self) -> StatusWord {
        StatusWord(self.word.load(Ordering::Acquire))
    }

    /// The worker starts its next task while holding a slot. Returns the
    /// task's tick (the previous one plus one: only the worker changes
    /// ticks, so the word itself is the counter).
    ///
    /// A plain store is enough: the word is `Idle` now and nobody else writes
    /// an `Idle` word (the monitor only swaps `InTask` words).
    pub(crate) fn begin_task(&self) -> u64 {
        let tick = self.load().tick().wrapping_add(1);
        self.word
            .store(tick << 2 | PHASE_IN_TASK, Ordering::Release);
        tick
    }

    /// Like [`TaskStatus::begin_task`], for a worker that holds no slot: it
    /// resumes a task after a helping wait in which its slot was given away
    /// and none was free again. The task runs as if found blocked.
    pub(crate) fn begin_task_blocked(&self) {
        let tick = self.load().tick().wrapping_add(1);
        self.word
            .store(tick << 2 | PHASE_BLOCKED, Ordering::Release);
    }

    /// The worker finished (or suspended) its current task. Returns true if
    /// it still holds its slot, false if the slot was given away while the
    /// task ran.
    ///
    /// AcqRel pairs with the AcqRel of [`TaskStatus::try_mark_blocked`]: if that
    /// swap won, the worker sees `Blocked` here and knows it owns no slot.
    pub(crate) fn end_task(&self) -> bool {
        // The monitor keeps the tick when it marks the word, so reading it
        // first and swapping after is safe.
        let tick = self.load().tick();
        let previous = self.word.swap(tick << 2 | PHASE_IDLE, Ordering::AcqRel);
        previous & 3 != PHASE_BLOCKED
    }

    /// Takes the slot of a worker still in the task seen as `seen`. Returns true
    /// if this call won: the caller must then release exactly one slot.
    /// Fails if the worker has moved on (another tick) or was marked already.
    pub(crate) fn try_mark_blocked(&self, seen: StatusWord) -> bool {
        if seen.phase() != Phase::InTask {
            return false;
        }
        self.word
            .compare_exchange(
                seen.0,
                seen.0 & !3 | PHASE_BLOCKED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Counts a thread whose slot was taken (seen as `seen`, `Blocked`) as
    /// holding one again: it was seen running after its block. Returns true
    /// if this call won; the caller must then count one more slot taken.
    /// Fails if the thread has ended the task meanwhile (its `end_task`
    /// then returned false and released nothing), so exactly one of the
    /// two settles the slot: after a won swap, `end_task` returns true and
    /// the thread releases the slot counted here.
    pub(crate) fn try_count_again(&self, seen: StatusWord) -> bool {
        if seen.phase() != Phase::Blocked {
            return false;
        }
        self.word
            .compare_exchange(
                seen.0,
                seen.0 & !3 | PHASE_IN_TASK,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }
}

/// Counts a worker whose slot was given away in the blocked task seen as
/// `seen` (its `status`) against `slots` again: the slot first, then the
/// word, so the worker never gives back a slot not yet counted (it does
/// once its word says `InTask`). True if this call counted it; if the task
/// ended first, or another caller counted it (the monitor, seeing it
/// compute, and the worker itself, leaving a declared section, may both
/// try), the slot goes back and the call returns false.
pub(crate) fn count_worker_again(slots: &Slots, status: &TaskStatus, seen: StatusWord) -> bool {
    slots.count_again();
    if status.try_count_again(seen) {
        true
    } else {
        slots.release();
        false
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    #[test]
    fn reserve_needs_a_free_slot_and_no_searcher() {
        let slots = Slots::new(2);
        assert!(slots.try_reserve_searcher());
        // Someone is searching: a second notify leaves it to them.
        assert!(!slots.try_reserve_searcher());
        assert!(!slots.stop_searching() || slots.counts().searching == 0);
        assert!(slots.try_reserve_searcher());
        slots.stop_searching();
        // Both slots taken.
        assert!(!slots.try_reserve_searcher());
        assert!(!slots.try_acquire(false));
        assert_eq!(
            slots.counts(),
            SlotCounts {
                active: 2,
                searching: 0
            }
        );
        slots.release();
        assert!(slots.try_acquire(false));
    }

    #[test]
    fn blocked_mark_and_task_end_race_has_one_winner() {
        let status = TaskStatus::default();
        assert_eq!(status.begin_task(), 1);
        let seen = status.load();
        assert_eq!(seen.phase(), Phase::InTask);
        assert_eq!(seen.tick(), 1);
        assert!(status.try_mark_blocked(seen));
        // A second mark of the same task fails: the slot is given away once.
        assert!(!status.try_mark_blocked(seen));
        assert!(!status.end_task(), "worker must learn it lost its slot");
        assert_eq!(
            status.load().tick(),
            1,
            "the mark and the end keep the tick"
        );

        assert_eq!(status.begin_task(), 2);
        let stale = StatusWord(1 << 2 | PHASE_IN_TASK);
        assert!(
            !status.try_mark_blocked(stale),
            "a finished task cannot be marked"
        );
        assert!(status.end_task());
    }

    #[test]
    fn a_task_resumed_without_a_slot_ends_as_blocked() {
        let status = TaskStatus::default();
        status.begin_task();
        assert!(status.end_task());
        status.begin_task_blocked();
        assert_eq!(status.load().phase(), Phase::Blocked);
        assert_eq!(status.load().tick(), 2);
        assert!(!status.end_task(), "it holds no slot");
    }
}

//! Holding a worker back from its block until a slot is its own
//! (`control::hold` decides when): the word the held thread waits on, the
//! queue of held workers in the order they were held, and the two ways a
//! held worker gets its slot.
//!
//! # The protocol
//!
//! A held worker's task status stays `Blocked` (it holds no slot) while it
//! waits; it gets a slot the way any worker back from a block is counted
//! again, by the swap [`TaskStatus::try_count_again`] of the status word it
//! was held in:
//!
//! - **Handed** ([`Holds::hand_slot`]): a worker that ends a task with its
//!   slot gives that slot to the oldest held worker. The count does not
//!   change; the slot changes owner when the swap wins, and the giver then
//!   holds none (it gives way). If the swap fails (the held task ended:
//!   its thread stopped waiting, see patience), the giver keeps its slot
//!   and tries the next.
//! - **Free** ([`Holds::count_free`], the monitor): a slot free within the
//!   target is taken for the oldest held worker, as
//!   `control::slots::count_worker_again` takes one.
//!
//! Either way the worker's [`HoldWord`] then goes from `ASKED` to `LET_GO`
//! and its thread is woken: the status word settles the slot, the hold
//! word only ends the wait. So a thread that stopped waiting on its own
//! (its patience ran out, `sys::hold_signal`) and is handed a slot later
//! runs with it, counted: the count is right either way.
//!
//! The monitor asks ([`HoldWord::ask`]: `FREE` to `ASKED`) before it
//! queues the worker and signals its thread; the thread, in the signal's
//! handler, waits while the word says `ASKED` ([`wait_in_handler`]) and
//! leaves it `FREE`. A let-go that comes before the signal is handled
//! leaves `LET_GO`, and the handler returns at once. The loom model
//! `loom_models::hold` checks that a handed slot is counted exactly once
//! and that the waiter always ends.

use crate::control::slots::{count_worker_again, Slots, StatusWord, TaskStatus};
use crate::sync::{lock, AtomicU32, AtomicU64, AtomicUsize, Mutex, Ordering};
use crossbeam_utils::CachePadded;
use std::collections::VecDeque;

/// Nobody asked the thread to wait.
const FREE: u32 = 0;
/// The monitor asked the thread to wait for a slot.
const ASKED: u32 = 1;
/// The wait is over (a slot was counted for it, or its patience ended).
const LET_GO: u32 = 2;

/// The word a held worker's thread waits on, and the task it was last held
/// in: one per worker entry.
#[derive(Debug, Default)]
pub(crate) struct HoldWord {
    /// `FREE`, `ASKED` or `LET_GO`: what the thread waits on.
    word: AtomicU32,
    /// The status tick of the task the worker was last asked to wait in.
    asked_in: AtomicU64,
}

impl HoldWord {
    /// Whether the worker was held in the task of status tick `tick`
    /// already (`control::hold`: once a task).
    pub(crate) fn held_in(&self, tick: u64) -> bool {
        self.asked_in.load(Ordering::Relaxed) == tick
    }

    /// Asks the thread to wait in the task of tick `tick`; false if it was
    /// asked already (or its last let-go is not yet seen by it).
    pub(crate) fn ask(&self, tick: u64) -> bool {
        let asked = self
            .word
            .compare_exchange(FREE, ASKED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if asked {
            // Only the monitor asks: nobody else writes the tick.
            self.asked_in.store(tick, Ordering::Relaxed);
        }
        asked
    }

    /// Takes the ask back before the thread was signalled (the signal could
    /// not be sent).
    pub(crate) fn withdraw(&self) {
        let _ = self
            .word
            .compare_exchange(ASKED, FREE, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Ends the wait. True if the thread was asked (the caller wakes it).
    pub(crate) fn let_go(&self) -> bool {
        self.word
            .compare_exchange(ASKED, LET_GO, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// A new thread takes the entry: nothing is asked of it.
    pub(crate) fn reset(&self) {
        self.word.store(FREE, Ordering::Release);
    }

    /// Whether the thread is asked to wait now (the monitor does not count
    /// a held worker as blocked: it waits for a slot, not for the world).
    pub(crate) fn is_asked(&self) -> bool {
        self.word.load(Ordering::Acquire) == ASKED
    }

    /// On the held thread (the loom model's view of the handler's wait,
    /// [`wait_in_handler`]): waits while the word says `ASKED`. `park(word,
    /// ASKED)` sleeps while the word holds `ASKED` (it may return early);
    /// it returns false once the thread's patience is over, and the thread
    /// then stops waiting. Leaves the word `FREE`.
    #[cfg(tidepool_loom)]
    pub(crate) fn wait(&self, park: impl FnMut(&AtomicU32, u32) -> bool) {
        wait_on(&self.word, park);
    }
}

/// The held thread's wait on its word (`HoldWord::wait` in the loom
/// model, [`wait_in_handler`] in the signal's handler).
fn wait_on(word: &AtomicU32, mut park: impl FnMut(&AtomicU32, u32) -> bool) {
    while word.load(Ordering::Acquire) == ASKED {
        if !park(word, ASKED) {
            break;
        }
    }
    // `ASKED` (patience over) or `LET_GO`: either way, done.
    word.store(FREE, Ordering::Release);
}

/// What the hold signal's handler does on a worker's thread (`held_as`
/// is its entry, given to `sys::hold_signal::enter`): if the thread is
/// still in the task it was asked to wait in (the signal may come after
/// that task ended: the thread then runs on at once), waits on its hold
/// word until let go, or for `sys::hold_signal`'s longest wait.
///
/// While the thread is in this handler its task cannot end, so the check
/// holds until a let-go: only the hand-off of a slot (which also lets it
/// go) moves its status word on.
#[cfg(not(tidepool_loom))]
fn wait_in_handler(held_as: *const ()) {
    // SAFETY: `held_as` is the entry the worker thread running this
    // handler gave `sys::hold_signal::enter` (`worker::run`), which stays
    // alive (the thread holds its pool) until that thread calls `leave`;
    // the handler runs on the same thread, between the two.
    let entry = unsafe { &*held_as.cast::<super::threads::Entry>() };
    let hold = &entry.hold;
    let seen = entry.status.load();
    let asked_in = hold.asked_in.load(Ordering::Relaxed);
    if seen.phase() != crate::control::slots::Phase::Blocked || seen.tick() != asked_in {
        hold.withdraw();
        return;
    }
    let deadline = crate::sys::hold_signal::wait_deadline();
    wait_on(&hold.word, |word, expected| {
        crate::sys::hold_signal::wait_until(word, expected, deadline)
    });
}

/// Installs the process's hold signal (`sys::hold_signal`), once, for a
/// pool that asked to hold (named `pool` in the `tracing` event); false if
/// none could be had (nothing is held then). On Linux that is said once
/// per pool (`hold signal unavailable`), since the pool then runs workers
/// back from their blocks beyond the slots; off Linux nothing can be held,
/// as documented, and nothing is said.
pub(crate) fn install_signal(pool: &str) -> bool {
    #[cfg(not(tidepool_loom))]
    let installed = crate::sys::hold_signal::install(wait_in_handler).is_some();
    #[cfg(tidepool_loom)]
    let installed = false;
    if !installed && cfg!(all(target_os = "linux", not(tidepool_loom), not(miri))) {
        crate::trace::hold_signal_unavailable(pool);
    }
    installed
}

/// Wakes the held thread waiting on `word` (after a let-go).
pub(crate) fn wake(word: &HoldWord) {
    #[cfg(not(tidepool_loom))]
    crate::sys::hold_signal::wake(&word.word);
    #[cfg(tidepool_loom)]
    let _ = word;
}

/// A held worker: its entry's index and the status word it was held in.
pub(crate) type Held = (usize, StatusWord);

/// The pool's held workers, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    queue: Mutex<VecDeque<Held>>,
    /// The queue's length, for the cheap check at every task end: on a
    /// line of its own, written only when workers are held or let go.
    len: CachePadded<AtomicUsize>,
    /// Whether this pool holds at all (`control::hold`: the signal is
    /// installed, blocked workers are replaced, the switch is on).
    pub(crate) can_hold: bool,
}

impl Holds {
    /// The held workers of a pool that `can_hold`.
    pub(crate) fn new(can_hold: bool) -> Holds {
        Holds {
            can_hold,
            ..Holds::default()
        }
    }

    /// Whether any worker is held (one load of a line written only when
    /// workers are held or let go).
    pub(crate) fn any(&self) -> bool {
        self.len.load(Ordering::Relaxed) > 0
    }

    /// How many are held.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Queues a worker the monitor asked to wait.
    pub(crate) fn push(&self, held: Held) {
        let mut queue = lock(&self.queue);
        queue.push_back(held);
        self.len.store(queue.len(), Ordering::Relaxed);
    }

    fn pop(&self) -> Option<Held> {
        let mut queue = lock(&self.queue);
        let held = queue.pop_front();
        self.len.store(queue.len(), Ordering::Relaxed);
        held
    }

    /// Gives the caller's slot to the oldest held worker whose swap wins
    /// (`status(index)` is its task status); `let_go(index)` then ends its
    /// wait. True if the slot went (the caller holds none now).
    pub(crate) fn hand_slot<'a>(
        &self,
        status: impl Fn(usize) -> &'a TaskStatus,
        mut let_go: impl FnMut(usize),
    ) -> bool {
        while let Some((index, seen)) = self.pop() {
            if status(index).try_count_again(seen) {
                let_go(index);
                return true;
            }
        }
        false
    }

    /// Counts held workers on free slots within the target, oldest first,
    /// and `let_go`s each; stops at the first slot not free. Returns how
    /// many were counted.
    pub(crate) fn count_free<'a>(
        &self,
        slots: &Slots,
        status: impl Fn(usize) -> &'a TaskStatus,
        mut let_go: impl FnMut(usize),
    ) -> usize {
        let mut counted = 0;
        while self.any() {
            if !slots.try_acquire(false) {
                break;
            }
            let Some((index, seen)) = self.pop() else {
                slots.release();
                break;
            };
            if status(index).try_count_again(seen) {
                let_go(index);
                counted += 1;
            } else {
                slots.release();
            }
        }
        counted
    }

    /// Lets every held worker go, each counted beyond the slots
    /// (`count_worker_again`: the caller raises the pool's `shrink` flag):
    /// nothing ended for a patience. Returns how many went.
    pub(crate) fn let_all_go<'a>(
        &self,
        slots: &Slots,
        status: impl Fn(usize) -> &'a TaskStatus,
        mut let_go: impl FnMut(usize),
    ) -> usize {
        let mut went = 0;
        while let Some((index, seen)) = self.pop() {
            if count_worker_again(slots, status(index), seen) {
                went += 1;
            }
            let_go(index);
        }
        went
    }
}

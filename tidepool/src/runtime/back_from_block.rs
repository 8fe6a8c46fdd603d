//! A worker's slot going away and coming back, the pool's side: a worker
//! whose slot was given away in a blocked task is counted against the
//! slots again when it computes or its declared section returns
//! (`control::back_from_block`), or held until a slot is its own
//! (`control::hold`, the protocol in `runtime::hold`); a presumed task
//! found computing is judged so; a slot given up goes to the oldest held
//! worker first.

use super::{hold, kinds, Shared};
use crate::metrics::ThreadCounters;
use crate::sync::{lock, Ordering};

impl Shared {
    /// Counts the worker at `index`, whose slot was given away in the
    /// blocked task it was seen in (`seen`), against the slots again: it
    /// computes again (the monitor saw it, `control::back_from_block`) or
    /// its declared section ended (`tidepool::blocking` returned, as a
    /// goroutine reacquires a P after a system call): see
    /// `control::slots::count_worker_again`. Over the target, the
    /// `shrink` flag makes a worker give a slot back at its next task
    /// boundary. True if this call counted it.
    pub(crate) fn count_again(
        &self,
        index: usize,
        seen: crate::control::slots::StatusWord,
    ) -> bool {
        let entry = self.threads.entry(index);
        if !crate::control::slots::count_worker_again(&self.slots, &entry.status, seen) {
            return false;
        }
        // The flag before the counter: whoever reads the count sees the
        // pool already asking a worker over the target to give way.
        if self.slots.over_target() {
            self.shrink.store(true, Ordering::Release);
        }
        ThreadCounters::bump(&self.threads.counters.counted_again);
        true
    }

    /// A worker whose slot was given away in the blocked task it was seen
    /// in (`seen`) computes again (the monitor saw it so for
    /// `computing_for`): it takes a free slot, or is held until a slot is
    /// its own, or is counted beyond the slots, or is looked at again
    /// (`control::hold`). True if it was counted or held.
    pub(crate) fn back_from_block(
        &self,
        index: usize,
        seen: crate::control::slots::StatusWord,
        computing_for: std::time::Duration,
    ) -> bool {
        use crate::control::hold::{back_from_block, BackFromBlock};
        let entry = self.threads.entry(index);
        let took = self.slots.try_acquire(false);
        let held_before = entry.hold.held_in(seen.tick());
        match back_from_block(took, self.holds.in_handler, held_before, computing_for) {
            BackFromBlock::Counted => {
                if entry.status.try_count_again(seen) {
                    ThreadCounters::bump(&self.threads.counters.counted_again);
                    true
                } else {
                    self.slots.release();
                    false
                }
            }
            BackFromBlock::Hold => self.hold(index, seen) || self.count_again(index, seen),
            BackFromBlock::CountBeyond => self.count_again(index, seen),
            BackFromBlock::NotYet => false,
        }
    }

    /// The presumed task the worker at `index` runs in the task of tick
    /// `tick` was found computing (by the monitor's look, or by its own
    /// CPU timer): its kind stops being presumed at once and it counts as
    /// a wrong guess. False if it was judged already (by this, or by the
    /// task's end if that came first). Only atomics: a signal handler may
    /// run this.
    pub(crate) fn presumed_task_computes(&self, index: usize, tick: u64) -> bool {
        let entry = self.threads.entry(index);
        if entry
            .presumed
            .compare_exchange(tick, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        let kind = kinds::Kind::from_bits(entry.kind.load(Ordering::Relaxed));
        self.kinds.computed_while_presumed(kind);
        ThreadCounters::bump(&self.threads.counters.presumptions_failed);
        self.presumption_failed(kind);
        true
    }

    /// On the worker's own thread, in the hold signal's handler: its CPU
    /// timer fired, armed when its slot was given away in the task seen as
    /// `seen`, so it computes again without a slot (`control::hold`). It
    /// takes a free slot, or holds itself: asks, queues itself if the
    /// queue is free (`hold::Holds::hold_self`, which says what it did;
    /// `Held`: the thread is to wait). Only atomics, futex wakes and a
    /// lock that the interrupted task cannot hold: a signal handler may
    /// run this.
    pub(crate) fn hold_self(
        &self,
        index: usize,
        seen: crate::control::slots::StatusWord,
    ) -> hold::HeldSelf {
        use hold::HeldSelf;
        // A presumed task computing for its timer's while is judged so.
        self.presumed_task_computes(index, seen.tick());
        let status = |index: usize| &self.threads.entry(index).status;
        let word = &self.threads.entry(index).hold;
        let did = self
            .holds
            .hold_self(&self.slots, status, word, (index, seen), |index| {
                self.let_held_go(index)
            });
        match did {
            HeldSelf::Counted => ThreadCounters::bump(&self.threads.counters.counted_again),
            HeldSelf::Held => ThreadCounters::bump(&self.threads.counters.held),
            HeldSelf::Busy | HeldSelf::Not => {}
        }
        did
    }

    /// On the worker's own thread: its declared section returned after its
    /// slot was given away in the task seen as `seen` (found or declared
    /// blocked, or started presumed). It takes a slot back before it runs
    /// on, as a goroutine reacquires a P when its system call returns: a
    /// free one, or it waits, held, for one (`hold::Holds::hold_after_section`,
    /// handed by the next worker to end a task); this wait needs no hold
    /// signal. Where the pool does not hold at all (a controller other than
    /// the adaptive ones, or the lab's `hold` switch off), it is counted
    /// beyond the slots and gives way at its next task boundary
    /// (`count_again`).
    pub(crate) fn take_slot_back(&self, index: usize, seen: crate::control::slots::StatusWord) {
        #[cfg(not(tidepool_loom))]
        if self.holds.after_sections {
            use hold::HeldSelf;
            let entry = self.threads.entry(index);
            let status = |index: usize| &self.threads.entry(index).status;
            let did = self.holds.hold_after_section(
                &self.slots,
                status,
                &entry.hold,
                (index, seen),
                |index| self.let_held_go(index),
            );
            match did {
                HeldSelf::Counted => {
                    ThreadCounters::bump(&self.threads.counters.counted_again);
                    return;
                }
                HeldSelf::Held => {
                    ThreadCounters::bump(&self.threads.counters.held);
                    hold::wait_while_the_pool_runs(&entry.hold, self);
                    // Handed a slot, or let go beyond the slots
                    // (`Holds::let_oldest_go`): counted either way, unless
                    // the pool stopped meanwhile.
                    let now = entry.status.load();
                    if now.phase() == crate::control::slots::Phase::Blocked {
                        self.count_again(index, now);
                    }
                    return;
                }
                // Asked by the monitor: its signal's handler waits.
                HeldSelf::Not => return,
                HeldSelf::Busy => {}
            }
        }
        self.count_again(index, seen);
    }

    /// Holds the worker at `index` (seen as `seen`) until a slot is its own:
    /// asks, signals its thread, queues it. False if its thread could not
    /// be signalled (then nothing is asked of it).
    fn hold(&self, index: usize, seen: crate::control::slots::StatusWord) -> bool {
        let entry = self.threads.entry(index);
        let Some(tid) = lock(&entry.probe).as_ref().map(|probe| probe.tid()) else {
            return false;
        };
        if !entry.hold.ask(seen.tick()) {
            // Asked already: by its own timer (`hold_self`), so held.
            return entry.hold.is_asked();
        }
        if !crate::sys::hold_signal::send(tid) {
            entry.hold.withdraw();
            return false;
        }
        self.holds.push((index, seen));
        ThreadCounters::bump(&self.threads.counters.held);
        true
    }

    /// Ends the wait of the held worker at `index`, if it waits.
    fn let_held_go(&self, index: usize) {
        let word = &self.threads.entry(index).hold;
        if word.let_go() {
            hold::wake(word);
        }
    }

    /// Ends the wait of the held worker at `index`, if it waits, from a
    /// worker that gives it a slot and then parks or blocks: its thread
    /// wakes on this worker's CPU (`hold::let_go_here`).
    fn let_held_go_here(&self, index: usize) {
        #[cfg(not(tidepool_loom))]
        if self
            .config
            .switches
            .on(crate::control::ablation::Mechanism::WakeHere)
        {
            hold::let_go_here(&self.threads.entry(index).hold);
            return;
        }
        self.let_held_go(index);
    }

    /// At a task boundary of a worker that holds a slot: gives the slot to
    /// the oldest held worker (`hold::Holds::hand_slot`), woken on this
    /// worker's CPU. True if it went; the caller then holds no slot (it
    /// gives way, or blocks).
    pub(crate) fn hand_slot_to_held(&self) -> bool {
        self.hand_slot_to_held_from(true)
    }

    /// [`hand_slot_to_held`](Self::hand_slot_to_held), the held worker
    /// woken on the caller's CPU only if `leaving_core` (the caller is
    /// about to park or block: its core is the one to be free; the
    /// monitor's is some worker's).
    fn hand_slot_to_held_from(&self, leaving_core: bool) -> bool {
        self.holds.hand_slot(
            |index| &self.threads.entry(index).status,
            |index| {
                if leaving_core {
                    self.let_held_go_here(index);
                } else {
                    self.let_held_go(index);
                }
            },
        )
    }

    /// Gives up a slot held for a worker that stopped using it (found or
    /// declared blocked, started presumed): to the oldest held worker if
    /// any (it has started its task; queued work has not, and a held
    /// thread may hold what others wait for), else back to the pool.
    /// True if it went back to the pool (the caller wakes a worker for
    /// queued work). `leaving_core`: the caller is the worker itself, about
    /// to block (not the monitor), so a held worker handed the slot wakes
    /// on its CPU.
    pub(crate) fn give_up_slot(&self, leaving_core: bool) -> bool {
        if self.holds.any() && self.hand_slot_to_held_from(leaving_core) {
            return false;
        }
        self.slots.release();
        true
    }

    /// A look at the held workers (the monitor's, or a parking worker's
    /// with `let_go` 0 and `parking`): counts them on free slots, or lets
    /// the `let_go` oldest go, counted beyond the slots
    /// (`control::hold::let_go`). A parking worker's leaves a core free: a
    /// thread counted on a free slot wakes on it (`let_held_go_here`).
    pub(crate) fn look_at_held(&self, let_go: usize, parking: bool) {
        let status = |index: usize| &self.threads.entry(index).status;
        if let_go > 0 {
            let went = self
                .holds
                .let_oldest_go(let_go, &self.slots, status, |index| self.let_held_go(index));
            if went > 0 && self.slots.over_target() {
                self.shrink.store(true, Ordering::Release);
            }
            let counted = &self.threads.counters.counted_again;
            counted.fetch_add(went as u64, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        self.holds.count_free(&self.slots, status, |index| {
            if parking {
                self.let_held_go_here(index);
            } else {
                self.let_held_go(index);
            }
        });
    }
}

//! What happens to a worker back from its block that computes again: it
//! takes a free slot, or it is held until one is its own, or (as before
//! holding existed) it is counted beyond the slots and runs on. Pure
//! decisions; the worker's own CPU timer and the monitor carry them out
//! (`runtime::hold::wait_in_handler`, `monitor`), `runtime::hold` is the
//! protocol between the held thread, the monitor and the worker that hands
//! it a slot, and `sys::hold_signal` stops the held thread.
//!
//! # Design note
//!
//! A task that blocks and then computes (fetch, then process) loses its
//! slot in the block: another worker takes it and starts the next task,
//! which blocks in turn. When the waits end, every such task computes at
//! once: 16 on 2 cores in the lab's `fetch-process`, each finishing at
//! the end of the whole batch (the mean completion 1.6-2x the slot-bound
//! schedule's, where two compute at a time and the first finish early).
//! Counting them again (`control::back_from_block`) stops *new* tasks from
//! starting, but a task has no boundary between its wait and its
//! computation, so the ones already running run on together.
//!
//! Go's runtime makes a goroutine back from a system call reacquire a P
//! before it runs on, and parks its thread if there is none. A pool cannot
//! stop a closure between two lines of it, but the kernel can: the monitor
//! sends the thread a signal whose handler waits, asleep on a futex, until
//! a worker that ends a task hands it its slot (the slot moves; no count
//! changes) or the monitor finds a slot free. Held threads get slots in the
//! order they were held, so the batch runs two at a time to completion,
//! the schedule a slot-bound pool would run.
//!
//! **Who notices: the thread's own CPU timer.** The monitor looks at a
//! blocked worker less and less often while it sleeps, and it is one more
//! thread on the cores: when dozens of workers come back from their waits
//! at once it shares the cores with all of them, and its quarter-interval
//! naps took 5-40 ms, so a batch of 64 ran together for a tenth of a
//! second, and one of 256 long enough that nothing ended within the
//! patience below and every held thread was let go (the whole batch then
//! computed at once: 3.9 s over the slots). So when a worker's slot is
//! given away in a block (found by the monitor), or a task starts presumed
//! blocking, a timer on its thread's CPU clock is armed (for a presumed
//! task, by the monitor's first look at it, which comes at once: armed as
//! the task started, its system calls delayed every presumed task's start
//! by about 2 µs); it fires on the
//! thread itself once the thread computes, whether or not the monitor gets
//! a core, and [`on_timer`] decides there (the monitor's looks stay, for a
//! thread whose timer could not be armed). With the timer and the crowd
//! look ([`on_timer`]), the lab's `fetch-process` went from 1.41x to 1.24x
//! of the slot-bound schedule at 64 items and from 1.83x to 1.43x at 256
//! (over the slots 264 ms to 46 ms, and 3.9 s to 0.13 s).
//!
//! Lowering the thread's priority instead (`SCHED_IDLE`, a higher nice)
//! would need the way back, which an unprivileged thread does not have
//! (`RLIMIT_NICE` is 0 by default); and an idle-priority thread still
//! shares the core with the other held ones, so their mean completion is
//! not the slot-bound one.
//!
//! # Bounds
//!
//! - **Patience.** A held thread may hold what the slot holders wait for
//!   (a spin lock, a value a holder polls for): nothing would end. When
//!   threads are held and no task of the pool has ended for [`PATIENCE`],
//!   the oldest held thread is let go, counted beyond the slots (a worker
//!   gives a slot back at its next task boundary), and while nothing ends,
//!   twice as many each patience after ([`let_go`]). Not the quantum: the quantum
//!   lends a slot to queued work that may block, and refuses it to work
//!   known to compute, which a held thread is; with a patience of one
//!   quantum (10 ms) every computation longer than that ran unheld, and
//!   `fetch-process` (30 ms computations) was no better than without
//!   holding. A holder that waits for a held thread by blocking (a mutex,
//!   a channel, a condvar) is found blocked and its slot moves: only
//!   spinning waits meet the patience.
//! - **Once a task.** A task is held at most once: let go, it runs on
//!   counted beyond the slots, so a holder that waits on it loses at most
//!   one patience.
//! - **Where nothing can hold.** Off Linux, without the signal (another
//!   handler owns it, the process blocks it), or switched off
//!   (`TIDEPOOL_ABLATE=hold`), the worker is counted beyond the slots.

use std::time::Duration;

/// How long a worker back from its block must have computed (seen so at
/// the monitor's looks) before it is held: a continuation that computes
/// a millisecond or two (a service's handler between its database call and
/// its next await) runs on, counted beyond the slots. Held at once, such
/// continuations cost the lab's overloaded `service` 18% of its
/// throughput in hand-offs (502 against 616 requests a second), for
/// computations about as long as the wait for a slot.
pub(crate) const HOLD_AFTER: Duration = Duration::from_millis(3);

/// How much CPU time a worker whose slot was given away uses before its
/// own CPU timer asks [`on_timer`] about it for the first time.
pub(crate) const FIRST_LOOK: Duration = Duration::from_micros(250);

/// What a worker's thread does when its CPU timer fires (`runtime::hold`),
/// or another worker's look finds it computing: it computed `computed`
/// since its slot was given away in this task (read from its CPU clock),
/// while `computing` workers without a slot (it among them) have been
/// found so, on a pool of `slots` slots.
///
/// The kernel's timer fires on the thread itself, whether or not the
/// monitor gets a core: with dozens of threads back from their waits and
/// computing, the monitor shared the cores with all of them, its quarter-
/// interval naps became 5-40 ms, and the batch ran together for a tenth
/// of a second before the first was held. But a timer counts CPU time,
/// which such a crowd earns slowly: 3 ms of it took 96 ms of wall time
/// for each of 64 threads on 2 cores. So the first fire comes after
/// [`FIRST_LOOK`], and a worker holds itself at once if the workers
/// computing without a slot outnumber the slots (the cores are
/// oversubscribed by its own pool's continuations); otherwise it runs on
/// until [`HOLD_AFTER`], as a short continuation should.
///
/// A CPU timer is checked only at a scheduler tick that finds its thread
/// on a core (4 ms apart at 250 Hz), so each of a crowd still computed a
/// tick's worth before its own fired. The first of them to find the crowd
/// therefore looks at the others (`runtime::hold`, at most once a
/// millisecond) and signals those whose CPU clock moved since their slot
/// went; each decides here as if its own timer had fired.
pub(crate) fn on_timer(computed: Duration, computing: usize, slots: usize) -> OnTimer {
    if computed >= HOLD_AFTER || computing > slots {
        OnTimer::Hold
    } else {
        OnTimer::RunOn(HOLD_AFTER - computed)
    }
}

/// See [`on_timer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnTimer {
    /// Take a free slot or be held.
    Hold,
    /// Run on; the timer fires again after this much more CPU time.
    RunOn(Duration),
}

/// How long held threads wait while no task of the pool ends.
pub(crate) const PATIENCE: Duration = Duration::from_millis(100);

/// What to do with a worker whose slot was given away in a block and that
/// computes again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BackFromBlock {
    /// A slot was free: it was counted on it.
    Counted,
    /// Every slot is taken: hold it until one is its own.
    Hold,
    /// Every slot is taken, and it has not computed for [`HOLD_AFTER`]
    /// yet: look again.
    NotYet,
    /// Every slot is taken and it cannot be held: count it beyond the
    /// slots (a worker gives one back at its next task boundary).
    CountBeyond,
}

/// What to do with a worker back from its block, seen computing again for
/// `computing_for`, that `took_free_slot` or not, that `can_hold` (the
/// signal is installed and holding is on) and that was `held_before` in
/// this task.
pub(crate) fn back_from_block(
    took_free_slot: bool,
    can_hold: bool,
    held_before: bool,
    computing_for: Duration,
) -> BackFromBlock {
    if took_free_slot {
        BackFromBlock::Counted
    } else if can_hold && !held_before {
        if computing_for >= HOLD_AFTER {
            BackFromBlock::Hold
        } else {
            BackFromBlock::NotYet
        }
    } else {
        BackFromBlock::CountBeyond
    }
}

/// How many held threads are let go now (the oldest first, each counted
/// beyond the slots): `held` threads are held, the pool's last task ended
/// (or the last thread was held, or the last were let go)
/// `since_progress` ago, and `let_go_since_end` were let go since a task
/// last ended. After a patience without progress, as many go as went
/// since the last end, at least one: 1, 1, 2, 4, 8, ... a patience apart.
///
/// The patience exists for a holder that spins on what a held thread
/// holds; letting go one, then doubling, frees any one held thread within
/// about log2(held) patiences. Letting every held thread go at once did
/// the same in one patience, but when the stall came only from the slot
/// holders sharing the cores with a crowd not yet held (256 items back
/// from their waits at once), the whole batch then computed together, each
/// run once held never held again (fetch-process at 256 items of 16 types:
/// 1.9x of the slot-bound schedule in 3 of 6 runs, against 1.12-1.16x).
pub(crate) fn let_go(
    held: usize,
    since_progress: Duration,
    patience: Duration,
    let_go_since_end: usize,
) -> usize {
    if held == 0 || since_progress < patience {
        0
    } else {
        let_go_since_end.max(1).min(held)
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_free_slot_is_taken_whatever_else_holds() {
        for can_hold in [false, true] {
            for held_before in [false, true] {
                for computing_for in [Duration::ZERO, HOLD_AFTER] {
                    assert_eq!(
                        back_from_block(true, can_hold, held_before, computing_for),
                        BackFromBlock::Counted
                    );
                }
            }
        }
    }

    #[test]
    fn every_slot_taken_holds_once_a_task() {
        assert_eq!(
            back_from_block(false, true, false, HOLD_AFTER),
            BackFromBlock::Hold
        );
        assert_eq!(
            back_from_block(false, true, true, HOLD_AFTER),
            BackFromBlock::CountBeyond,
            "let go once, it runs on"
        );
    }

    #[test]
    fn a_short_continuation_is_looked_at_again_before_it_is_held() {
        assert_eq!(
            back_from_block(false, true, false, Duration::ZERO),
            BackFromBlock::NotYet
        );
        assert_eq!(
            back_from_block(false, true, false, HOLD_AFTER - MS),
            BackFromBlock::NotYet
        );
    }

    #[test]
    fn without_the_signal_it_is_counted_beyond_the_slots() {
        assert_eq!(
            back_from_block(false, false, false, Duration::ZERO),
            BackFromBlock::CountBeyond
        );
    }

    #[test]
    fn held_threads_wait_while_tasks_end() {
        // A task ended 30 ms ago (the holders compute longer than a
        // quantum): slots move as tasks end, the held wait on.
        assert_eq!(let_go(14, 30 * MS, PATIENCE, 0), 0);
        // Nothing ended for a patience: the holders may wait on the held.
        assert_eq!(let_go(14, PATIENCE, PATIENCE, 0), 1);
        assert_eq!(let_go(1, 250 * MS, PATIENCE, 0), 1);
    }

    #[test]
    fn while_nothing_ends_the_held_go_one_then_doubling() {
        let mut held = 256;
        let mut went = 0;
        let mut patiences = 0;
        // Every held thread is free within about log2(256) patiences.
        while held > 0 {
            let n = let_go(held, PATIENCE, PATIENCE, went);
            assert!(n >= 1 && n <= held.max(1));
            held -= n;
            went += n;
            patiences += 1;
        }
        assert_eq!(patiences, 9, "1, 1, 2, 4, ..., 128");
    }

    #[test]
    fn a_short_continuation_runs_on_while_few_compute_without_a_slot() {
        assert_eq!(
            on_timer(FIRST_LOOK, 1, 2),
            OnTimer::RunOn(HOLD_AFTER - FIRST_LOOK)
        );
        assert_eq!(
            on_timer(FIRST_LOOK, 2, 2),
            OnTimer::RunOn(HOLD_AFTER - FIRST_LOOK)
        );
        // Computed for the whole while: held, however few.
        assert_eq!(on_timer(HOLD_AFTER, 1, 2), OnTimer::Hold);
    }

    #[test]
    fn a_crowd_computing_without_slots_is_held_at_the_first_fire() {
        assert_eq!(on_timer(FIRST_LOOK, 3, 2), OnTimer::Hold);
        assert_eq!(on_timer(FIRST_LOOK, 64, 2), OnTimer::Hold);
    }

    #[test]
    fn nobody_held_nobody_let_go() {
        assert_eq!(let_go(0, Duration::from_secs(5), PATIENCE, 3), 0);
    }
}

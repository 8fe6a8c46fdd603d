//! Declared blocking: sections (`tidepool::blocking`) whose slot the monitor
//! hands over after a grace, and waits on the pool that give the slot away at
//! once.

use super::notify;
use crate::control::slots::{Phase, StatusWord};
use crate::metrics::ThreadCounters;
use crate::runtime::context;
use crate::runtime::kinds::{Kind, KindTable};
use crate::runtime::Shared;
use crate::sync::{Arc, Ordering};

/// A declared blocking section (`tidepool::blocking`) on a worker, from its
/// start to the guard's drop.
///
/// Entering one moves no slot and wakes no thread: a call that returns
/// quickly costs two writes of the worker's own word. The monitor hands
/// the slot over if it finds the worker in the same section at two looks
/// in a row, that is after one monitor interval at the least (Go's
/// runtime retakes a P from a goroutine in a system call at its sysmon's
/// tick likewise), and nudges itself awake if it sleeps longer than an
/// interval, so a long call hands over within one or two intervals. The
/// kind learns that it blocks at the hand-over, not before. A call that
/// returns after its slot was handed over (or in a task that started
/// presumed blocking, without one) takes a slot back before the task runs
/// on (`Shared::take_slot_back`), as a goroutine reacquires a P when its
/// system call returns: a free one, or it waits for the next task's end
/// to hand it one. So what follows the call (the response built from a
/// query, the processing of what was fetched) never computes beside the
/// slots' holders.
#[derive(Debug)]
pub(crate) struct DeclaredSection {
    /// The pool and worker index whose section this is; `None` off a
    /// worker or inside another section.
    entered: Option<(Arc<Shared>, usize)>,
}

impl DeclaredSection {
    /// Enters a section if the current thread is a worker running a task,
    /// and not in a section already. A task without a slot (started
    /// presumed, or found blocked earlier) enters one too: it takes a slot
    /// back as the call returns.
    pub(crate) fn enter() -> DeclaredSection {
        let Some(ctx) = context::current() else {
            return DeclaredSection { entered: None };
        };
        let shared = &ctx.shared;
        let entry = shared.threads.entry(ctx.index);
        let sections = &entry.declared_sections;
        let phase = entry.status.load().phase();
        if sections.load(Ordering::Relaxed) % 2 == 1 || phase == Phase::Idle {
            return DeclaredSection { entered: None };
        }
        sections.fetch_add(1, Ordering::Relaxed);
        if phase == Phase::InTask {
            // The monitor hands the slot over after the grace.
            shared.monitor.nudge();
        }
        DeclaredSection {
            entered: Some((shared.clone(), ctx.index)),
        }
    }
}

impl Drop for DeclaredSection {
    fn drop(&mut self) {
        if let Some((shared, index)) = &self.entered {
            let entry = shared.threads.entry(*index);
            entry.declared_sections.fetch_add(1, Ordering::Relaxed);
            let seen = entry.status.load();
            if seen.phase() != Phase::Blocked {
                return;
            }
            // A task started presumed blocking is judged by its time until
            // now: it waited, as presumed (or computed inside the call);
            // what it does with the slot it takes back is not presumed.
            if let Some(ctx) = context::current() {
                ctx.end_presumed_run();
            }
            // The call returned without a slot: the worker takes one back
            // now, not at the monitor's next look, so what follows the call
            // does not compute beside the workers that hold the slots.
            shared.take_slot_back(*index, seen);
            // Holding a slot, it has nothing to be held for.
            entry.hold.disarm(&shared.holds);
        }
    }
}

/// The monitor found the worker at `index` in the same declared section
/// ([`DeclaredSection`]) at two looks, in the task it saw as `seen`: gives
/// its slot away, as `declare_pool_wait` does. True if it did (the task had
/// not ended).
pub(crate) fn hand_over_declared(shared: &Arc<Shared>, index: usize, seen: StatusWord) -> bool {
    // Only a section that outlasted its grace teaches the kind that it
    // blocks: taught at every section's start, a kind whose calls return in
    // microseconds was presumed blocking, and its items were handed
    // threads of their own (688 presumptions and 7 threads for 2,000 such
    // items on 2 slots).
    give_slot_away(shared, index, seen, KindTable::declared_blocking, false)
}

/// Gives the slot of the worker at `index`, in the task seen as `seen`, to
/// another worker, as declared, and tells its kind (`teach`). False if the
/// task had moved on. `by_itself`: the worker gives it, about to wait (not
/// the monitor).
fn give_slot_away(
    shared: &Arc<Shared>,
    index: usize,
    seen: StatusWord,
    teach: fn(&KindTable, Kind),
    by_itself: bool,
) -> bool {
    let entry = shared.threads.entry(index);
    if !entry.status.try_mark_blocked(seen) {
        return false;
    }
    let kind = Kind::from_bits(entry.kind.load(Ordering::Relaxed));
    teach(&shared.kinds, kind);
    ThreadCounters::bump(&shared.threads.counters.declared_blocking);
    shared.worker_blocked(index, kind, crate::runtime::Blocked::Declared);
    if shared.give_up_slot(by_itself) && shared.has_work() {
        notify(shared);
    }
    true
}

/// If the current thread is a worker running a task, gives its slot away
/// at once so another worker can run meanwhile: for a wait on the pool's
/// own work that could not help (`join`, `block_on`, a scope's end, nested
/// too deep). It teaches the kind that it waits on the pool, so it is never
/// presumed blocking (taught to block, a recursive fork-join's kind got a
/// thread per spawn, every one of them waiting on queued children: a lab
/// run hung that way with 514 threads). The worker takes a slot back, or
/// gives way, at the end of its task. (A task's own blocking code goes
/// through [`DeclaredSection`] instead, which moves the slot only after a
/// grace.)
pub(crate) fn declare_pool_wait() {
    let Some(ctx) = context::current() else {
        return;
    };
    let seen = ctx.shared.threads.entry(ctx.index).status.load();
    give_slot_away(&ctx.shared, ctx.index, seen, KindTable::saw_pool_wait, true);
}

//! Tasks presumed blocking, on the worker side (see `control::presumption`):
//! which tasks start presumed, handing one a parked worker or a thread of its
//! own (and a spare thread for the next), the fan-out of a queue of them, and
//! running one without a slot.

use super::find::steal_one;
use super::run_task;
use super::schedule::notify_for;
use super::start::{start_thread_for, Start};
use crate::control::ablation::Mechanism;
use crate::control::spare::{self, SpareAsk};
use crate::control::StartReason;
use crate::metrics::ThreadCounters;
use crate::runtime::context::WorkerContext;
use crate::runtime::presumed::{AtPark, PresumedRun};
use crate::runtime::retry_until_settled;
use crate::runtime::task::Runnable;
use crate::runtime::{Priority, Queued, Shared, Work};
use crate::sync::{Arc, Ordering};

/// Whether `task` starts presumed blocking (and if so, it holds one of
/// its kind's presumed places: `runtime::kinds::Presumption`): a closure
/// of a kind seen blocking (and never computing) while other work waits,
/// in a pool that replaces blocked workers. Costs every other task a load
/// of its claim, of its place and of its kind's word (a read-mostly line).
pub(super) fn presumes_blocking(ctx: &WorkerContext, task: &Runnable) -> bool {
    let shared = &ctx.shared;
    let meta = task.metadata();
    // `has_work` reads every worker's deque (a cache miss each): after the
    // kind's load, which says no for almost every task. In the other
    // order a fork per call (fine-spawn) took 1.5x as long.
    could_presume(shared, task)
        && meta.may_take_presumption(&shared.kinds)
        && shared.has_work()
        && meta.take_presumption(&shared.kinds)
}

/// Whether `task` is presumed blocking in `shared`'s pool, and if so holds
/// one of its kind's presumed places (`runtime::kinds::Presumption`): a
/// closure of a kind seen blocking (and never computing), with fewer of
/// its kind presumed in flight than its cap (`control::presumption`), in a
/// pool that replaces blocked workers.
fn try_presume_blocking(shared: &Shared, task: &Runnable) -> bool {
    could_presume(shared, task) && task.metadata().take_presumption(&shared.kinds)
}

/// The cheap half of a presumption's conditions: a closure (an async task
/// may block in one poll and not the next), in a pool that compensates.
fn could_presume(shared: &Shared, task: &Runnable) -> bool {
    task.metadata().claim.is_closure()
        && shared.compensates_blocking()
        && shared.config.switches.on(Mechanism::Presumption)
}

/// Gives `runnable` a thread of its own if it is a closure presumed
/// blocking ([`try_presume_blocking`]: its kind blocked before, and
/// has room under its cap): it never takes a slot, so a burst of a kind
/// known to block starts a thread per item as it is spawned, within the
/// cap (as tokio's `spawn_blocking` does, without being told), and the
/// slots stay with work that computes. Returns the
/// task if it is not started here (not such a task, or no thread to be
/// had: it is queued as any other).
pub(super) fn start_presumed(shared: &Arc<Shared>, runnable: Runnable) -> Option<Runnable> {
    if !try_presume_blocking(shared, &runnable) {
        return Some(runnable);
    }
    hand_or_start(shared, runnable)
}

/// Hands `runnable`, a closure presumed blocking, to a parked worker (which
/// runs it without a slot), or to a thread started for it. Returns it if neither could be had (the threads left below
/// `max_threads` are the slots' to use, the OS refused, the pool is
/// stopping), its presumption given back (`runtime::kinds::Presumption`):
/// it then waits for a slot as any other task.
fn hand_or_start(shared: &Arc<Shared>, runnable: Runnable) -> Option<Runnable> {
    let runnable = match shared.sleepers.hand(runnable) {
        Ok(()) => {
            ThreadCounters::bump(&shared.threads.counters.presumed_handed);
            if shared.sleepers.parked() == 0 {
                shared.monitor.want_spare();
            }
            return None;
        }
        Err(runnable) => runnable,
    };
    if !room_for_unslotted_thread(shared) {
        runnable.metadata().give_back_presumption(&shared.kinds);
        return Some(runnable);
    }
    let first = Arc::new(crate::sync::Mutex::new(Some(runnable)));
    if start_thread_for(
        shared,
        StartReason::Presumed,
        Start::Presumed(Arc::clone(&first)),
    ) {
        return None;
    }
    // Refused: the closure that would have run it was dropped unrun.
    let unstarted = crate::sync::lock(&first).take();
    if let Some(task) = &unstarted {
        // It waits for a slot as any other: not presumed after all.
        task.metadata().give_back_presumption(&shared.kinds);
    }
    unstarted
}

/// Whether a thread that holds no slot (one for a presumed task, or a
/// spare) may start (`control::spare`).
fn room_for_unslotted_thread(shared: &Shared) -> bool {
    spare::room_for_unslotted_thread(
        shared.threads.alive(),
        shared.config.concurrency,
        shared.config.max_threads,
    )
}

/// Starts a spare worker that parks at once, if `control::spare` says so:
/// called by the monitor when a presumed task took the last parked worker
/// (`convoy_held`: every task at work at its last look is of a kind its
/// growth climb holds).
pub(crate) fn start_spare(shared: &Arc<Shared>, convoy_held: bool) {
    let ask = SpareAsk {
        parked: shared.sleepers.parked(),
        room: room_for_unslotted_thread(shared),
        stopped: shared.is_stopped(),
        convoy_held,
    };
    if shared.config.switches.on(Mechanism::Spare) && spare::starts_spare(ask) {
        start_thread_for(shared, StartReason::Spare, Start::Spare);
    }
}

/// How many queued tasks presumed blocking a worker that starts one hands
/// a thread each (`fan_out`) before its own. Two: a queue of such tasks
/// then starts as a tree, doubling the threads starting at once each
/// generation (500 items in about nine thread starts' time instead of 500
/// in a row); more would put more serial thread starts before each
/// worker's own task.
const FAN_OUT: usize = 2;

/// Hands up to [`FAN_OUT`] queued tasks presumed blocking to parked
/// workers or new threads, stopping at the first task that is not presumed
/// blocking. Takes one task at a time, from the top of this worker's deque,
/// the normal lane, then another worker's deque: a batch taken into this
/// deque would sit there while this worker blocks, out of reach of the
/// threads it starts (they fan out from the shared queues too).
fn fan_out(ctx: &WorkerContext) {
    let shared = &ctx.shared;
    if !shared.config.switches.on(Mechanism::FanOut) {
        return;
    }
    for turn in 0..FAN_OUT {
        let next = ctx
            .local
            .pop()
            .map(Queued::into_work)
            .or_else(|| shared.lanes.pop_one(Priority::Normal))
            .or_else(|| steal_one(ctx, turn as u64));
        let Some(work) = next else {
            return;
        };
        match work {
            Work::Task(task) if try_presume_blocking(shared, &task) => {
                if let Some(task) = hand_or_start(shared, task) {
                    // No thread to be had: it waits for a slot as before.
                    ctx.local.push(Queued::from(task));
                    return;
                }
            }
            other => {
                ctx.local.push(Queued::from(other));
                return;
            }
        }
    }
}

/// How many tasks [`presume_queued`] moves from the workers' deques to the
/// lanes at most, for the threads it starts to fan out to: enough for the
/// room a look gives, a few times over at most, at a steal each.
const PRESUME_QUEUED_AT_MOST: usize = 32;

/// How many queued tasks [`presume_queued`] looks at, at most, for ones
/// presumed blocking: a task of another kind at the head of the lane (one
/// that holds a slot as soon as it runs, say) must not hide those behind it.
const PRESUME_LOOKS_AT_MOST: usize = 8;

/// Hands queued tasks presumed blocking (their kind has room) threads of
/// their own, up to [`FAN_OUT`] of them: called by the monitor when a look
/// gave a kind more room (`control::presumption`). Each thread fans out
/// ([`fan_out`]) as it starts its task, and so does each it hands one to,
/// so the room fills as a tree in a few thread starts' time, instead of
/// waiting until a worker with a slot takes one of the kind (those that
/// hold the slots may all run tasks of the kind that found no room, and
/// hold their slots until the monitor finds them blocked, or run a long
/// computation). Looks at the first [`PRESUME_LOOKS_AT_MOST`] tasks of the
/// normal lane and, if none is presumed, at the oldest of the workers'
/// deques (moved to the lane); those it passes go back before the lane's
/// new arrivals. Returns whether it handed one.
pub(crate) fn presume_queued(shared: &Arc<Shared>) -> bool {
    let handed = presume_from_lane(shared);
    if handed {
        return true;
    }
    // From the workers' deques: a worker that took a batch from the lane
    // (the one that holds a slot, or one that fanned out and found no room
    // for the rest) may be running a long task, or blocked without a slot.
    // The oldest of each go to the lane's handed-off FIFO, where the
    // fan-out of the threads started looks too.
    let mut moved = 0;
    for entry in shared.threads.used() {
        let Some(stealer) = entry.stealer().filter(|s| !s.is_empty()) else {
            continue;
        };
        while moved < PRESUME_QUEUED_AT_MOST {
            let Some(queued) = retry_until_settled(|| stealer.steal()) else {
                break;
            };
            shared.lanes.hand_off(queued.into_work());
            moved += 1;
        }
    }
    moved > 0 && presume_from_lane(shared)
}

/// [`presume_queued`]'s look at the normal lane.
fn presume_from_lane(shared: &Arc<Shared>) -> bool {
    let mut handed = 0;
    let mut passed = Vec::new();
    for _ in 0..PRESUME_LOOKS_AT_MOST {
        let Some(work) = shared.lanes.pop_one(Priority::Normal) else {
            break;
        };
        match work {
            Work::Task(task) if try_presume_blocking(shared, &task) => {
                match hand_or_start(shared, task) {
                    None => handed += 1,
                    Some(task) => {
                        // No thread to be had: it waits for a slot.
                        passed.push(Work::Task(task));
                        break;
                    }
                }
                if handed == FAN_OUT {
                    break;
                }
            }
            other => passed.push(other),
        }
    }
    for work in passed {
        shared.lanes.hand_off(work);
    }
    handed > 0
}

/// Runs a task presumed blocking (see `control::presumption`): it runs
/// without a slot, as if the monitor had found it blocked. A worker that
/// `held_slot` gives it on to the queued work at once: a burst of blocking
/// items then starts a thread each in a chain (each worker hands its slot
/// to the next) instead of waiting for the monitor's look at each. The
/// entry is marked with the task (`Entry::presumed`), so the monitor judges
/// it while it runs: one that keeps a core busy instead is counted against
/// the slots again, and its kind stops being presumed at once
/// (`runtime::presumed`).
pub(super) fn run_presumed_blocking(
    ctx: &WorkerContext,
    task: Runnable,
    held_slot: bool,
    at_park: AtPark,
) {
    let shared = &ctx.shared;
    let entry = shared.threads.entry(ctx.index);
    let kind = task.metadata().kind;
    entry.kind.store(kind.to_bits(), Ordering::Relaxed);
    // Marked presumed for the monitor, which judges it while it runs
    // (`runtime::presumed`): before the status word that makes it look.
    // Only this worker changes its ticks, so the next one is known.
    let tick = entry.status.load().tick().wrapping_add(1);
    entry.presumed.store(tick, Ordering::Relaxed);
    // The monitor only marks `InTask` words, so the slot given up here is
    // released exactly once (`control::slots`, invariant 3).
    entry.status.begin_task_blocked();
    ThreadCounters::bump(&shared.threads.counters.presumed_blocking);
    shared.worker_blocked(ctx.index, kind, crate::runtime::Blocked::Presumed);
    if held_slot && shared.give_up_slot(true) {
        notify_for(shared, StartReason::Presumed);
    }
    // Where fan-out looks first, cheaply: `Shared::has_work` would also
    // read every other worker's deque, a cache miss each, before a handed
    // task starts.
    if shared.lanes.has_work(Priority::Normal) || !ctx.local.is_empty() {
        fan_out(ctx);
    }
    // Every way here took a presumption for the task (it is ended with
    // the verdict on what the task did); the task itself is gone after the
    // run.
    let held = task.metadata().presumption.let_go();
    ctx.presumed_run.set(Some(PresumedRun::start(
        kind,
        held,
        (ctx.index, tick),
        &ctx.probe,
        at_park,
    )));
    // Its CPU timer (`control::hold`) is armed by the monitor's first look
    // at it (`Monitor::judge_presumed`), not here: arming is two system
    // calls (a read of the CPU clock and `timer_settime`, about 2 µs on the
    // lab's machine), and here they came before every presumed task's
    // start.
    run_task(ctx, task);
    entry.hold.disarm(&shared.holds);
    // The task's end judged it (`context::count_task_end`), unless it was
    // dropped unrun (its handle cancelled it first): judged here, short.
    ctx.end_presumed_run();
}

//! Finding work: where a worker looks, in which order, and stealing.
//!
//! Each worker owns a deque (`crossbeam-deque`): LIFO for its owner, FIFO
//! for thieves. Plain normal-priority tasks spawned or woken on a worker go
//! to its deque (a task that yields goes to the back of its lane instead);
//! other plain tasks go to a global lane, and tasks a group's or pair's gate
//! admitted to their lane's admitted FIFO (`runtime::queues`), never to a
//! deque. A worker looks for work in this order:
//!
//! 1. the high lane, then its admitted tasks (urgent work is never behind
//!    local work);
//! 2. its own deque, newest first: a fork-join's stack discipline (the task
//!    a join waits for is usually on top) and the warmest cache;
//! 3. as a *searcher*: the normal lane (taking a batch), the other workers'
//!    deques (stealing a batch, oldest first), the normal lane's admitted
//!    tasks (one), the low lane, then its admitted tasks (one).
//!
//! So a lane's plain tasks go before its admitted ones: an urgent plain task
//! spawned after a throttled flood waits for the flood's running items only,
//! not for the items its group keeps queued. Admitted tasks are taken one at
//! a time: batched into a deque they would be served before plain tasks
//! queued later.
//!
//! Four rules keep everything moving: every 61st pick starts with the
//! normal lane, the low lane, the oldest task of the worker's own deque or
//! the groups' admitted tasks, in turn (`control::fairness`, whose design
//! note states the bound).

use super::coalesce;
use crate::control::ablation::Mechanism;
use crate::control::fairness::{self, Lane, Turn};
use crate::runtime::context::WorkerContext;
use crate::runtime::retry_until_settled;
use crate::runtime::{Priority, Queued, Shared, Work};
use crossbeam_deque::Steal;
use std::time::{Duration, Instant};

/// Picks the next task for the worker of `ctx`; `pick` numbers the pick (the
/// worker's next task tick). Outside the search phase only the high lane and
/// the worker's own deque are looked at; a searcher looks everywhere. See
/// the module docs for the order and the fairness turns.
pub(super) fn find_task(ctx: &WorkerContext, pick: u64, searching: bool) -> Option<Work> {
    find_task_stealing_with(ctx, pick, searching, steal)
}

/// [`find_task`], stealing from other workers' deques with `steal`.
pub(super) fn find_task_stealing_with(
    ctx: &WorkerContext,
    pick: u64,
    searching: bool,
    steal: impl FnOnce(&WorkerContext, u64) -> Option<Work>,
) -> Option<Work> {
    let shared = &ctx.shared;
    let lanes = &shared.lanes;
    let local = &ctx.local;
    let turn = fairness::turn(pick).filter(|_| shared.config.switches.on(Mechanism::FairnessTurns));
    if let Some(turn) = turn {
        let found = match turn {
            Turn::NormalLane => lanes.pop(Priority::Normal, local),
            Turn::LowLane => lanes
                .pop(Priority::Low, local)
                .or_else(|| lanes.pop_admitted(Priority::Low)),
            Turn::OldestLocal => oldest_local(ctx),
            Turn::Admitted(first) => lanes.pop_any_admitted(match first {
                Lane::Normal => Priority::Normal,
                Lane::Low => Priority::Low,
                Lane::High => Priority::High,
            }),
        };
        if found.is_some() {
            return found;
        }
    }
    // One check of both high FIFOs: the common case, nothing urgent, pays
    // two empty-checks of lines written only by urgent work.
    if lanes.has_work(Priority::High) {
        if let Some(task) = lanes
            .pop(Priority::High, local)
            .or_else(|| lanes.pop_admitted(Priority::High))
        {
            return Some(task);
        }
    }
    if let Some(task) = local.pop() {
        return Some(task.into_work());
    }
    if !searching {
        return None;
    }
    if let Some(task) = lanes.pop(Priority::Normal, local) {
        return Some(task);
    }
    if let Some(task) = steal(ctx, pick) {
        return Some(task);
    }
    if let Some(task) = lanes.pop_admitted(Priority::Normal) {
        return Some(task);
    }
    lanes
        .pop(Priority::Low, local)
        .or_else(|| lanes.pop_admitted(Priority::Low))
}

/// Waits `wait` nanoseconds (a coalescer's wait), without touching the
/// queues a spawner writes. Ends early when high-priority work or shutdown
/// arrives: only normal and low-priority tasks are ever batched.
pub(super) fn wait_for_batch(shared: &Shared, wait: u32) {
    if wait == 0 || !shared.config.switches.on(Mechanism::Coalesce) {
        return;
    }
    let deadline = Instant::now() + Duration::from_nanos(u64::from(wait));
    while Instant::now() < deadline {
        if shared.lanes.has_work(Priority::High) || shared.is_stopped() {
            return;
        }
        for _ in 0..16 {
            std::hint::spin_loop();
        }
    }
}

/// The oldest task of the worker's own deque (the FIFO end thieves use).
fn oldest_local(ctx: &WorkerContext) -> Option<Work> {
    let stealer = ctx.shared.threads.entry(ctx.index).stealer()?;
    if stealer.is_empty() {
        return None; // without pinning the epoch (see `steal`)
    }
    retry_until_settled(|| stealer.steal()).map(Queued::into_work)
}

/// Steals a batch from another worker's deque, starting at a different
/// victim for each `pick` so thieves spread out.
pub(super) fn steal(ctx: &WorkerContext, pick: u64) -> Option<Work> {
    let entries = ctx.shared.threads.used();
    let count = entries.len();
    if count <= 1 {
        return None;
    }
    let start = (pick as usize).wrapping_mul(0x9E37_79B9) % count;
    let mut retry = true;
    while retry {
        retry = false;
        for offset in 0..count {
            let victim = (start + offset) % count;
            if victim == ctx.index {
                continue;
            }
            // `is_empty` first: it reads two indices, where a steal pins
            // crossbeam's epoch, and every 128th pin walks the list of all
            // threads that ever pinned. With hundreds of threads (a burst
            // of blocking items) searches over their empty deques took a
            // quarter of the CPU that thread starts needed.
            let Some(stealer) = entries[victim].stealer().filter(|s| !s.is_empty()) else {
                continue;
            };
            // Our own limit, so that a full batch (`coalesce::FULL_STEAL`)
            // means what the coalescer reads it as.
            match stealer.steal_batch_with_limit_and_pop(&ctx.local, coalesce::FULL_STEAL) {
                Steal::Success(task) => return Some(task.into_work()),
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
        }
    }
    None
}

/// Steals one task (not a batch) from another worker's deque, starting at
/// a victim that depends on `pick`.
pub(super) fn steal_one(ctx: &WorkerContext, pick: u64) -> Option<Work> {
    let entries = ctx.shared.threads.used();
    let count = entries.len();
    let start = (ctx.index as u64 ^ pick).wrapping_mul(0x9E37_79B9) as usize % count.max(1);
    (0..count)
        .map(|offset| (start + offset) % count)
        .filter(|&victim| victim != ctx.index)
        .filter_map(|victim| entries[victim].stealer().filter(|s| !s.is_empty()))
        .find_map(|stealer| retry_until_settled(|| stealer.steal()))
        .map(Queued::into_work)
}

//! How a task reaches a worker: spawning, scheduling (spawn and every wake),
//! queueing, and making sure somebody will run what was queued — waking a
//! parked worker or starting a thread.

use super::presumed::start_presumed;
use super::start::start_thread;
use super::urgent::wake_for_urgent;
use crate::control::ablation::Mechanism;
use crate::control::StartReason;
use crate::metrics::ThreadCounters;
use crate::runtime::context;
use crate::runtime::free_rings;
use crate::runtime::item::{self, ItemHandle};
use crate::runtime::kinds::Kind;
use crate::runtime::park;
use crate::runtime::task::{self, FutureMeta, MaybeGate, Runnable, TaskCell, TaskMeta};
use crate::runtime::{Priority, Shared};
use crate::sync::{Arc, Ordering};
use async_task::{ScheduleInfo, WithInfo};
use std::future::Future;

/// Accepts `future` as a task of `shared`'s pool, or returns `None` if the
/// pool is closed.
pub(crate) fn spawn<F, G>(
    shared: &Arc<Shared>,
    future: F,
    priority: Priority,
    gate: G,
) -> Option<TaskCell<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    G: MaybeGate,
{
    spawn_task(shared, future, priority, gate, false)
}

/// Like [`spawn`], for a closure made into a future (a group's or a pair's
/// `spawn_fn`, which goes through their gate): it gets a closure's claim,
/// so `JoinHandle::cancel` says true only if it will not run, and it may
/// be presumed blocking like any closure.
pub(crate) fn spawn_closure<F, G>(
    shared: &Arc<Shared>,
    future: F,
    priority: Priority,
    gate: G,
) -> Option<TaskCell<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    G: MaybeGate,
{
    spawn_task(shared, future, priority, gate, true)
}

#[inline(always)]
fn spawn_task<F, G>(
    shared: &Arc<Shared>,
    future: F,
    priority: Priority,
    gate: G,
    closure: bool,
) -> Option<TaskCell<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    G: MaybeGate,
{
    let caller = admit_spawn(shared)?;
    let meta = FutureMeta {
        gate: gate.to_meta(),
        task: TaskMeta {
            kind: Kind::of::<F>(),
            priority,
            claim: task::Claim::new(closure),
            presumption: Default::default(),
        },
    };
    let scheduler = Arc::clone(shared);
    let (runnable, cell) = async_task::Builder::new().metadata(meta).spawn(
        move |_: &FutureMeta| task::wrap(future, gate),
        WithInfo(move |runnable, info: ScheduleInfo| {
            schedule(
                &scheduler,
                Runnable::Future(runnable),
                info.woken_while_running,
            )
        }),
    );
    // Our scheduler called directly, not through `Runnable::schedule`:
    // that goes through the cell's vtable, and because the scheduler
    // captures the pool it guards the call with a temporary waker, two
    // atomic updates of the cell's state per spawn. Here the caller's
    // `shared` and the runnable itself keep everything alive.
    let in_rush = kept_length(shared, free_rings::future_rush_length::<F, G>());
    let kept = (in_rush > 0).then(|| {
        free_rings::KeptFuture::new(
            runnable.waker(),
            Arc::as_ptr(shared).cast(),
            runnable.metadata(),
        )
    });
    schedule_from(shared, Runnable::Future(runnable), false, caller);
    // Kept after scheduling, as an item's cell is (`spawn_item`).
    free_rings::keep_future(kept, in_rush);
    Some(cell)
}

/// Accepts `work` as a work item of `shared`'s pool, of kind `kind` (its
/// closure's type for `spawn_fn`; a scope's task passes its call site's),
/// or returns `None` if the pool is closed. The item's cell
/// (`runtime::item`) is kept in the spawning thread's free ring, so this
/// thread frees it (see `runtime::free_rings`).
///
/// Never inlined into the caller's spawn loop: inlined there (through
/// `spawn_fn_in`), the handle came back through memory, a few more stores
/// per spawn behind those of the cell, the free ring and the lane, and a
/// spawner whose stores wait on cache lines other cores hold stalls on
/// them (in one profile, `perf annotate` put 96% of the caller's samples
/// on the first store after the call). See docs/measurements.md, "Which
/// store the spawner waits on".
#[inline(never)]
pub(crate) fn spawn_item<F, R>(
    shared: &Arc<Shared>,
    work: F,
    kind: Kind,
    priority: Priority,
) -> Option<ItemHandle<R>>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let caller = admit_spawn(shared)?;
    let (runnable, handle, kept) = item::spawn(item_meta(kind, priority), work);
    let in_rush = kept_length(shared, free_rings::rush_length(item::cell_bytes::<F, R>()));
    queue_item(shared, runnable, kept, caller, in_rush);
    Some(handle)
}

/// Spawns a work item no handle will look at (`Pool::execute`). False if
/// the pool accepts no new task (the closure is dropped).
///
/// Never inlined, as [`spawn_item`]: inlined into a worker's spawn loop it
/// ran slower. `cargo bench --bench spawn_many -- 'tidepool-execute$'`,
/// six processes of each build in turn: from inside a task 86.5 ns per
/// task (72-121) against 98.0 (82-119) inlined, 0.83x, lower in 4 of 6;
/// from outside 79.0 (66-117) against 78.0 (69-104), noise.
#[inline(never)]
pub(crate) fn spawn_detached_item<F>(
    shared: &Arc<Shared>,
    work: F,
    kind: Kind,
    priority: Priority,
) -> bool
where
    F: FnOnce() + Send + 'static,
{
    let Some(caller) = admit_spawn(shared) else {
        return false;
    };
    let (runnable, kept) = item::spawn_detached(item_meta(kind, priority), work);
    let in_rush = kept_length(shared, free_rings::rush_length(item::cell_bytes::<F, ()>()));
    queue_item(shared, runnable, kept, caller, in_rush);
    true
}

/// `in_rush`, the free ring's length in a rush for a cell, or 0 (keep
/// nothing) with the free rings switched off (`control::ablation`).
#[inline(always)]
fn kept_length(shared: &Shared, in_rush: usize) -> usize {
    if shared.config.switches.on(Mechanism::FreeRings) {
        in_rush
    } else {
        0
    }
}

/// A work item's metadata.
#[inline]
fn item_meta(kind: Kind, priority: Priority) -> TaskMeta {
    TaskMeta {
        kind,
        priority,
        claim: task::Claim::new(true),
        presumption: Default::default(),
    }
}

/// Queues a new work item's runnable, and keeps its cell in this thread's
/// free ring, which holds `in_rush` such cells in a rush
/// (`free_rings::rush_length`).
#[inline]
fn queue_item(
    shared: &Arc<Shared>,
    runnable: item::ItemRunnable,
    kept: item::ItemKept,
    caller: Caller,
    in_rush: usize,
) {
    schedule_from(shared, Runnable::Item(runnable), false, caller);
    // Kept after scheduling: an evicted cell's free must not delay the
    // item's start.
    free_rings::keep(free_rings::Kept::of(kept), in_rush);
}

/// Where a task is scheduled from, as far as its scheduler knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Caller {
    /// Not known: a wake-up, or a spawn on a thread that may be a worker
    /// of the pool.
    Unknown,
    /// A thread that is not one of the pool's workers: a spawn that looked
    /// (`admit_spawn`), so that scheduling need not look again.
    Outside,
}

/// Counts a spawn and asks the latch whether the pool accepts it; `None`
/// if it does not, else what the count learned of the calling thread.
#[inline]
fn admit_spawn(shared: &Arc<Shared>) -> Option<Caller> {
    // Count before asking the latch: see `runtime::lifecycle`.
    let index = context::current_index(shared);
    let counters = shared.counters(index);
    counters.spawned();
    if !shared.admit_spawn(counters) {
        return None;
    }
    Some(match index {
        Some(_) => Caller::Unknown,
        None => Caller::Outside,
    })
}

#[cfg(unix)]
use crate::reactor::waking_from_poll;

/// No reactor of tidepool's own here: no task is woken by one.
#[cfg(not(unix))]
fn waking_from_poll() -> bool {
    false
}

/// Schedules a runnable task (spawned or woken): through its gate if it has
/// one (then to its lane's admitted FIFO), else onto the worker's deque or
/// its lane. `yielded` says the task was woken during its own poll (it
/// yielded): it goes to the back of its lane, never on top of the worker's
/// LIFO deque, where it would run again at once and starve the rest.
pub(crate) fn schedule(shared: &Arc<Shared>, runnable: Runnable, yielded: bool) {
    schedule_from(shared, runnable, yielded, Caller::Unknown);
}

/// [`schedule`], from a `caller` the spawn path knows (a thread outside the
/// pool has no deque of the pool's to push onto: no second look at the
/// thread-local that says so).
#[inline]
fn schedule_from(shared: &Arc<Shared>, runnable: Runnable, yielded: bool, caller: Caller) {
    let mut runnable = match runnable.gate().cloned() {
        Some(gate) => {
            // Admitted at once, or kept by the gate and queued when admitted
            // (`push_admitted`): either way never on a worker's deque.
            if let Some(admitted) = gate.admit(runnable) {
                schedule_admitted(shared, admitted, yielded);
            }
            return;
        }
        None => runnable,
    };
    if !yielded {
        let Some(unstarted) = start_presumed(shared, runnable) else {
            return;
        };
        runnable = unstarted;
    }
    let lane = runnable.metadata().priority;
    // A normal task spawned or woken on one of this pool's workers goes on
    // that worker's own deque (cache-warm, no contention) if
    // `control::spawn_order` says so (a closure always, a future only onto
    // an empty deque); everything else on its lane, and so do tasks a
    // reactor poll woke (FIFO: see `reactor::waking_from_poll`).
    let runnable =
        if lane == Priority::Normal && !yielded && caller == Caller::Unknown && !waking_from_poll()
        {
            context::push_local(shared, runnable)
        } else {
            Some(runnable)
        };
    let on_lane = runnable.is_some();
    if let Some(runnable) = runnable {
        shared.lanes.push(lane, runnable);
    }
    if !notify_lane(shared, lane) && on_lane {
        // Queued with every slot busy and nobody searching: a reactor
        // thread that woke it may pause (`reactor_pacing`); any other
        // thread reads a thread-local and goes on.
        if shared.config.switches.on(Mechanism::ReactorPacing) {
            crate::reactor_pacing::queued_behind_busy_workers();
        }
    }
}

/// [`schedule`]'s path for a task its gate admitted at once: a thread of its
/// own if presumed blocking (as for a plain task), else [`push_admitted`].
fn schedule_admitted(shared: &Arc<Shared>, runnable: Runnable, yielded: bool) {
    let runnable = if yielded {
        runnable
    } else {
        match start_presumed(shared, runnable) {
            Some(unstarted) => unstarted,
            None => return,
        }
    };
    push_admitted(shared, runnable);
}

/// Queues a task a gate admitted on its lane's admitted FIFO (never a
/// worker's own deque, nor the lane of plain tasks), then makes sure
/// somebody will run it. Workers serve a lane's plain tasks before its
/// admitted ones (see `runtime::queues`): an urgent plain task spawned
/// after a throttled flood waits only for the flood's running items, not
/// for the admitted items queued before it, nor for those a worker would
/// have moved into its deque (which it serves before any global lane).
pub(crate) fn push_admitted(shared: &Arc<Shared>, runnable: Runnable) {
    let lane = runnable.metadata().priority;
    shared.lanes.push_admitted(runnable);
    notify_lane(shared, lane);
}

/// [`notify`] after a push on `lane`; a high-priority task that finds every
/// slot busy and nobody searching borrows the urgent reserve slot: the woken
/// worker looks at the high lane first, and the `shrink` flag makes some
/// worker give a slot back at its next task boundary, so the pool is over its
/// slots for about one task (`control::slots`, invariant 1). Returns false
/// if no worker will look at the lane before a busy one finishes its task
/// (every slot busy, nobody searching, no reserve lent).
fn notify_lane(shared: &Arc<Shared>, lane: Priority) -> bool {
    if notify(shared) {
        return true;
    }
    if lane == Priority::High && shared.slots.try_reserve_urgent() {
        // Release: a worker that sees the flag sees the new counts.
        shared.shrink.store(true, Ordering::Release);
        ThreadCounters::bump(&shared.threads.counters.reserve_lends);
        wake_for_urgent(shared);
        return true;
    }
    false
}

/// Called after new work was queued: wakes or starts a worker if nobody is
/// searching and a slot is free (the notifier side of `runtime::park`).
/// Returns true if it took a slot for a worker, or none was needed because
/// somebody is searching (or the pool stopped: the work was dropped).
pub(crate) fn notify(shared: &Arc<Shared>) -> bool {
    notify_for(shared, StartReason::Demand)
}

/// [`notify`], naming why a thread would be started (`reason`, counted
/// in `Metrics`).
pub(super) fn notify_for(shared: &Arc<Shared>, reason: StartReason) -> bool {
    let stopped = || {
        if shared.is_stopped() {
            // Stopped after the push: nobody will run it, so drop it here
            // (its task counts as cancelled).
            shared.drain_queues();
            return true;
        }
        false
    };
    let handed = park::notify(&shared.sleepers, &shared.slots, stopped, || {
        start_thread(shared, reason)
    });
    if !handed {
        // No free slot and nobody searching: saturated, the CPU sentinels
        // watch (`control::sentinel`; one load while they do).
        shared.monitor.arm_sentinels();
    }
    handed
}

/// Hands a searching slot the caller reserved to a parked worker, or to a new
/// thread; gives the reservation back if neither is possible.
///
/// The monitor, if asleep on an idle pool, is woken by the worker when it
/// starts a task (`RunLoop::run`), not here: woken first from the spawning
/// thread, it took the idle core and the worker waited for it, and a spawn
/// onto an idle pool started after 50-94 µs (median) instead of 12-21 µs
/// (`benches/tools/wake_latency.rs`).
///
/// `woken` is called with the index of the parked worker it wakes, if it
/// wakes one.
pub(crate) fn wake_or_start_with(
    shared: &Arc<Shared>,
    reason: StartReason,
    woken: impl FnOnce(usize),
) {
    park::hand_over_with(&shared.sleepers, &shared.slots, woken, || {
        start_thread(shared, reason)
    });
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use crate::runtime::task::{NoGate, Phase};
    use crate::{Pool, Priority};

    /// A work item that returned or panicked can no longer be cancelled
    /// (its claim was taken), and its handle has its result; an async
    /// task's claim never changes.
    #[test]
    fn a_closure_that_ran_cannot_be_cancelled_and_its_handle_has_its_result() {
        let pool = Pool::builder().concurrency(1).build().unwrap();
        let shared = pool.shared();
        let item = |panics: bool| {
            let work = move || assert!(!panics, "boom");
            super::spawn_item(shared, work, super::Kind::of::<()>(), Priority::Normal)
                .expect("the pool is open")
        };
        let (mut returned, mut panicked) = (item(false), item(true));
        let task = super::spawn(shared, async {}, Priority::Normal, NoGate).expect("open");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !(returned.is_finished() && panicked.is_finished() && task.is_finished()) {
            assert!(std::time::Instant::now() < deadline, "the tasks ran");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // Its claim says started (`Running`): the free ring asks the cell
        // whether its worker let it go before it asks the claim.
        assert_eq!(returned.metadata().claim.phase(), Phase::Running);
        assert!(!returned.metadata().claim.cancel(), "it ran");
        assert!(!panicked.metadata().claim.cancel(), "it ran");
        let (_, waker) = crate::sync::counting::waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(matches!(
            returned.poll_output(&mut cx),
            std::task::Poll::Ready(Some(Ok(())))
        ));
        assert!(matches!(
            panicked.poll_output(&mut cx),
            std::task::Poll::Ready(Some(Err(_)))
        ));
        assert!(
            task.metadata().task.claim.cancel(),
            "an async task's claim is untouched"
        );
    }
}

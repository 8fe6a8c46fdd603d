//! How a task reaches a worker: spawning, scheduling (spawn and every wake),
//! queueing, and making sure somebody will run what was queued — waking a
//! parked worker or starting a thread.

use super::{run, Begin};
use crate::control::slots::StatusWord;
use crate::control::StartReason;
use crate::metrics::ThreadCounters;
use crate::runtime::context;
use crate::runtime::free_rings;
use crate::runtime::item::{self, ItemHandle};
use crate::runtime::kinds::{Kind, KindTable};
use crate::runtime::park;
use crate::runtime::task::{self, FutureMeta, MaybeGate, Runnable, TaskCell, TaskMeta};
use crate::runtime::{Priority, Shared, StartFailure};
use crate::sync::{Arc, Ordering};
use crate::trace;
use async_task::{ScheduleInfo, WithInfo};
use std::future::Future;
use std::time::{Duration, Instant};

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
    let in_rush = free_rings::future_rush_length::<F, G>();
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
    let in_rush = free_rings::rush_length(item::cell_bytes::<F, R>());
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
    let in_rush = free_rings::rush_length(item::cell_bytes::<F, ()>());
    queue_item(shared, runnable, kept, caller, in_rush);
    true
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
    // that worker's own deque (cache-warm, no contention); everything else
    // on its lane, and so do tasks a reactor poll woke (FIFO: see
    // `reactor::waking_from_poll`).
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
        crate::reactor_pacing::queued_behind_busy_workers();
    }
}

/// Gives `runnable` a thread of its own if it is a closure presumed
/// blocking (`super::try_presume_blocking`: its kind blocked before, and
/// has room under its cap): it never takes a slot, so a burst of a kind
/// known to block starts a thread per item as it is spawned, within the
/// cap (as tokio's `spawn_blocking` does, without being told), and the
/// slots stay with work that computes. Returns the
/// task if it is not started here (not such a task, or no thread to be
/// had: it is queued as any other).
fn start_presumed(shared: &Arc<Shared>, runnable: Runnable) -> Option<Runnable> {
    if !super::try_presume_blocking(shared, &runnable) {
        return Some(runnable);
    }
    hand_or_start(shared, runnable)
}

/// Hands `runnable`, a closure presumed blocking, to a parked worker (which
/// runs it without a slot), or to a thread started for it (unpaced: a
/// presumed task is a blocked worker's replacement, not a speculative
/// start). Returns it if neither could be had (the threads left below
/// `max_threads` are the slots' to use, the OS refused, the pool is
/// stopping), its presumption given back (`runtime::kinds::Presumption`):
/// it then waits for a slot as any other task.
pub(crate) fn hand_or_start(shared: &Arc<Shared>, runnable: Runnable) -> Option<Runnable> {
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
/// spare) may start: such threads never take the last `concurrency`
/// threads below `max_threads`. A presumed task holds no slot, and if
/// every thread were one waiting on work queued behind it, nobody would be
/// left to run that work.
fn room_for_unslotted_thread(shared: &Shared) -> bool {
    shared.threads.alive() + shared.config.concurrency < shared.config.max_threads
}

/// Starts a spare worker that parks at once, if none is parked: called by
/// the monitor when a presumed task took the last parked worker. The next
/// task presumed blocking is then handed to a parked thread (a wake-up,
/// tens of microseconds) instead of waiting for a thread to start for it
/// (hundreds: in the lab's `waiting`, every item of the ramp to 50 threads
/// in flight paid that). At most one spare per hand that emptied the
/// stack; an unused spare retires after `idle_timeout` like any idle
/// worker.
pub(crate) fn start_spare(shared: &Arc<Shared>) {
    if shared.sleepers.parked() == 0 && room_for_unslotted_thread(shared) && !shared.is_stopped() {
        start_thread_for(shared, StartReason::Spare, Start::Spare);
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

/// [`notify`], naming why a thread would be started (`reason` decides
/// whether the start is paced).
pub(crate) fn notify_for(shared: &Arc<Shared>, reason: StartReason) -> bool {
    let stopped = || {
        if shared.is_stopped() {
            // Stopped after the push: nobody will run it, so drop it here
            // (its task counts as cancelled).
            shared.drain_queues();
            return true;
        }
        false
    };
    park::notify(&shared.sleepers, &shared.slots, stopped, || {
        start_thread(shared, reason)
    })
}

/// Hands a searching slot the caller reserved to a parked worker, or to a new
/// thread; gives the reservation back if neither is possible.
///
/// The monitor, if asleep on an idle pool, is woken by the worker when it
/// starts a task (`RunLoop::run`), not here: woken first from the spawning
/// thread, it took the idle core and the worker waited for it, and a spawn
/// onto an idle pool started after 50-94 µs (median) instead of 12-21 µs
/// (`benches/tools/wake_latency.rs`).
pub(crate) fn wake_or_start(shared: &Arc<Shared>, reason: StartReason) {
    park::hand_over(&shared.sleepers, &shared.slots, || {
        start_thread(shared, reason)
    });
}

/// [`wake_or_start`] for the urgent reserve slot. Every slot is busy, so
/// the woken worker must take a core from a running one: the kernel does
/// that at once only for a thread whose deadline comes first, and a
/// thread's deadline is its slice away. So the parked worker popped is
/// asked a short slice (`sys::set_urgent_slice`) before it is woken, and
/// gives it back after its next task (`give_back_urgent_slice`). A thread
/// started instead (nobody parked) starts with the default slice.
fn wake_for_urgent(shared: &Arc<Shared>) {
    let ask_short_slice = |worker: usize| {
        let entry = shared.threads.entry(worker);
        let tid = crate::sync::lock(&entry.probe).as_ref().map(|p| p.tid());
        if tid.is_some_and(|tid| crate::sys::set_urgent_slice(tid, true)) {
            entry.urgent_slice.store(true, Ordering::Relaxed);
        }
    };
    park::hand_over_with(&shared.sleepers, &shared.slots, ask_short_slice, || {
        start_thread(shared, StartReason::Demand)
    });
}

/// Gives back the short scheduler slice [`wake_for_urgent`] asked for this
/// worker's thread, if it did: a short slice means more context switches
/// whenever threads share a core. A load for every other task.
#[inline]
pub(crate) fn give_back_urgent_slice(ctx: &crate::runtime::context::WorkerContext) {
    let entry = ctx.shared.threads.entry(ctx.index);
    if entry.urgent_slice.load(Ordering::Relaxed) {
        reset_slice(ctx, &entry.urgent_slice);
    }
}

/// The rare half of [`give_back_urgent_slice`], out of the task path.
#[cold]
#[inline(never)]
fn reset_slice(ctx: &crate::runtime::context::WorkerContext, flag: &std::sync::atomic::AtomicBool) {
    if flag.swap(false, Ordering::Relaxed) {
        crate::sys::set_urgent_slice(ctx.probe.tid(), false);
    }
}

/// Starts `shared.config.min_threads` workers at build, so the threads a
/// pool keeps anyway are there before the first task (a burst wakes them
/// instead of starting them). Each starts as a searcher with a slot, finds
/// nothing and parks by the ordinary protocol (`runtime::park`), so no
/// wake-up can be lost meanwhile; with more threads than slots, a start
/// waits for an earlier one to park (within a bound, past which the rest is
/// left to demand, as is a refused start).
pub(crate) fn start_floor(shared: &Arc<Shared>) {
    let deadline = Instant::now() + FLOOR_START_BOUND;
    for _ in 0..shared.config.min_threads {
        while !shared.slots.try_acquire(true) {
            if Instant::now() >= deadline {
                return;
            }
            std::thread::yield_now();
        }
        if !start_thread(shared, StartReason::Floor) {
            shared.slots.release_searching();
            return;
        }
    }
}

/// How long `start_floor` waits for slots in all: starting a thread and
/// seeing it park takes tens of microseconds, so even thousands of
/// `min_threads` start well within it.
const FLOOR_START_BOUND: Duration = Duration::from_secs(1);

/// Starts a worker thread that begins as a searcher, using the caller's
/// reservation. Returns false if `max_threads` are running, the pacing of
/// starts beyond `concurrency` says not yet (see `control::pacing`), or the
/// OS refused the thread.
fn start_thread(shared: &Arc<Shared>, reason: StartReason) -> bool {
    start_thread_for(shared, reason, Start::Searching)
}

/// A task handed to a thread being started, in a cell the starter can take
/// it back from if the start is refused (`std` drops the thread's closure,
/// and a `Runnable` dropped unrun would cancel its task).
type FirstTask = Arc<crate::sync::Mutex<Option<Runnable>>>;

/// How a thread [`start_thread_for`] starts begins: the starter's side of
/// [`Begin`], with the presumed task in a cell it can take back.
enum Start {
    /// With the searching slot the starter reserved.
    Searching,
    /// Without a slot, running this task first, presumed blocking (see
    /// [`start_presumed`]).
    Presumed(FirstTask),
    /// Without a slot, parked (see [`start_spare`]).
    Spare,
}

/// [`start_thread`], with the thread begun as `start` says.
fn start_thread_for(shared: &Arc<Shared>, reason: StartReason, start: Start) -> bool {
    let threads = &shared.threads;
    let config = &shared.config;
    if reason.is_paced()
        && threads.alive() >= config.concurrency
        && !threads.pace(shared.built_at.elapsed())
    {
        return false;
    }
    let Some(before) = threads.count_start(config.max_threads) else {
        return false;
    };
    let Some(index) = threads.take_entry() else {
        threads.count_exit();
        return false;
    };
    let mut builder = std::thread::Builder::new().name(shared.worker_name(index));
    if let Some(size) = config.stack_size {
        builder = builder.stack_size(size);
    }
    let owned = Arc::clone(shared);
    let counters = &threads.counters;
    let spawned = builder.spawn(move || {
        // The tokio context (feature `tokio`), entered for the thread's life.
        let tokio = owned.config.tokio.clone();
        let _entered = tokio.enter();
        let begin = match start {
            Start::Searching => Begin::Searching,
            // The starter takes the task back only when the start failed,
            // and then this closure never runs.
            Start::Presumed(cell) => match crate::sync::lock(&cell).take() {
                Some(task) => Begin::Presumed(task),
                None => Begin::Spare,
            },
            Start::Spare => Begin::Spare,
        };
        run(owned, index, begin)
    });
    match spawned {
        Ok(_) => {
            trace::thread_started(
                &config.thread_name,
                index,
                reason.as_str(),
                config.settings(),
            );
            threads.start_worked();
            ThreadCounters::bump(&counters.started);
            ThreadCounters::bump(match reason {
                StartReason::Demand => &counters.started_demand,
                StartReason::Compensation => &counters.started_compensation,
                StartReason::Policy => &counters.started_policy,
                StartReason::Burst => &counters.started_burst,
                StartReason::Floor => &counters.started_floor,
                StartReason::Quantum => &counters.started_quantum,
                StartReason::Presumed => &counters.started_presumed,
                StartReason::Spare => &counters.started_spare,
            });
            counters
                .peak_threads
                .fetch_max(before as u64 + 1, Ordering::Relaxed);
            true
        }
        Err(error) => {
            trace::thread_start_failed(&config.thread_name, reason.as_str(), &error);
            // EAGAIN or out of memory: keep running on the threads we have,
            // and make sure the monitor retries while work waits (asleep on
            // an idle pool, it is only woken by a worker starting a task,
            // and there may be none: see `control::signal` for the pairing,
            // the work was queued before this).
            ThreadCounters::bump(&counters.start_failures);
            threads.start_failed(StartFailure::of(&error));
            threads.give_back_entry(index);
            threads.count_exit();
            shared.monitor.wake();
            false
        }
    }
}

/// Whether the pool can run work, for a spawn about to be accepted: `Err`
/// with the system's error if no worker thread is alive and starting one
/// here fails. With a thread alive (the common case) it costs one load of
/// the thread count, a line written only when threads start and exit. With
/// none, the thread started here begins as a searcher, so the spawn's own
/// notify finds it and starts no other.
pub(crate) fn can_run(shared: &Arc<Shared>) -> Result<(), StartFailure> {
    let threads = &shared.threads;
    if threads.alive() > 0 {
        return Ok(());
    }
    if shared.slots.try_reserve_searcher() {
        park::hand_over(&shared.sleepers, &shared.slots, || {
            start_thread(shared, StartReason::Demand)
        });
    }
    if threads.alive() > 0 || !threads.failing() {
        Ok(())
    } else {
        Err(threads.last_failure())
    }
}

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
/// returns after its slot was handed over counts its worker against the
/// slots again at once (`Shared::count_again`), as a goroutine reacquires
/// a P when its system call returns: over the target, a worker gives a
/// slot back at its next task boundary.
#[derive(Debug)]
pub(crate) struct DeclaredSection {
    /// The pool and worker index whose section this is; `None` off a
    /// worker or inside another section.
    entered: Option<(Arc<Shared>, usize)>,
}

impl DeclaredSection {
    /// Enters a section if the current thread is a worker running a task
    /// with a slot, and not in a section already.
    pub(crate) fn enter() -> DeclaredSection {
        let Some(ctx) = context::current() else {
            return DeclaredSection { entered: None };
        };
        let shared = &ctx.shared;
        let entry = shared.threads.entry(ctx.index);
        let sections = &entry.declared_sections;
        if sections.load(Ordering::Relaxed) % 2 == 1
            || entry.status.load().phase() != crate::control::slots::Phase::InTask
        {
            return DeclaredSection { entered: None };
        }
        sections.fetch_add(1, Ordering::Relaxed);
        shared.monitor.nudge();
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
            // The call returned after the monitor handed the slot over:
            // the worker is counted against the slots again now, not at
            // the monitor's next look, so what follows the call (the
            // response built from a query) does not compute beside the
            // worker that took the slot.
            let seen = entry.status.load();
            if seen.phase() == crate::control::slots::Phase::Blocked {
                shared.count_again(*index, seen);
            }
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
    give_slot_away(shared, index, seen, KindTable::declared_blocking)
}

/// Gives the slot of the worker at `index`, in the task seen as `seen`, to
/// another worker, as declared, and tells its kind (`teach`). False if the
/// task had moved on.
fn give_slot_away(
    shared: &Arc<Shared>,
    index: usize,
    seen: StatusWord,
    teach: fn(&KindTable, Kind),
) -> bool {
    let entry = shared.threads.entry(index);
    if !entry.status.try_mark_blocked(seen) {
        return false;
    }
    let kind = Kind::from_bits(entry.kind.load(Ordering::Relaxed));
    teach(&shared.kinds, kind);
    ThreadCounters::bump(&shared.threads.counters.declared_blocking);
    shared.worker_blocked(index, kind, crate::runtime::Blocked::Declared);
    shared.slots.release();
    if shared.has_work() {
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
    give_slot_away(&ctx.shared, ctx.index, seen, KindTable::saw_pool_wait);
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use crate::runtime::task::{NoGate, Phase};
    use crate::sys::{current_tid, scheduler_slice};
    use crate::{Pool, Priority};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    const HANG: Duration = Duration::from_secs(30);

    fn eventually(mut done: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + HANG;
        while !done() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    #[test]
    fn a_worker_woken_for_urgent_work_runs_it_on_a_short_slice_then_gives_it_back() {
        let Some(default) = scheduler_slice(current_tid()) else {
            return; // Off Linux: no slices.
        };
        if default.is_zero() {
            return; // A kernel before 6.12 has no custom slices.
        }
        let pool = Pool::builder().concurrency(1).build().unwrap();
        // The spare thread the pool starts at build is parked.
        assert!(eventually(|| pool.metrics().idle_threads >= 1));
        let (started, release) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let holder = {
            let (started, release) = (started.clone(), release.clone());
            pool.spawn_fn(move || {
                started.store(true, Ordering::SeqCst);
                let deadline = Instant::now() + HANG;
                while !release.load(Ordering::SeqCst) && Instant::now() < deadline {
                    std::thread::yield_now();
                }
            })
        };
        assert!(eventually(|| started.load(Ordering::SeqCst)));
        // Every slot busy: the urgent task borrows the reserve slot, and the
        // parked worker woken for it is asked a short slice first.
        let urgent = pool.task().priority(Priority::High).spawn_fn(|| {
            let tid = current_tid();
            (tid, scheduler_slice(tid))
        });
        let (tid, slice) = urgent.join().unwrap();
        release.store(true, Ordering::SeqCst);
        holder.join().unwrap();
        assert_eq!(slice, Some(Duration::from_micros(100)));
        assert!(
            eventually(|| scheduler_slice(tid) == Some(default)),
            "the default slice again after the task: {:?}",
            scheduler_slice(tid)
        );
        let m = pool.metrics();
        assert!(m.reserve_slot_lends >= 1, "{m:?}");
    }

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

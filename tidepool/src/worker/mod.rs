//! Worker threads: the run loop, finding work, and the thread-local context.
//!
//! Each worker owns a FIFO deque (`crossbeam-deque`). Normal-priority tasks
//! woken on a worker go to its deque; everything else goes to a global lane.
//! A worker looks for work in this order:
//!
//! 1. the high lane (urgent work is never behind local work);
//! 2. its own deque;
//! 3. as a *searcher*: the normal lane (taking a batch), the other workers'
//!    deques (stealing a batch), the low lane.
//!
//! Two rules keep every lane moving: every [`FAIRNESS_INTERVAL`]-th pick
//! starts with the normal global lane (work from outside the pool is never
//! starved by local work), and every other such pick starts with the low
//! lane. So with every lane busy, each lane gets at least one pick in
//! [`FAIRNESS_INTERVAL`] per worker.
//!
//! The run loop does not know about policies or the monitor: it only
//! publishes its [`TaskStatus`] at task boundaries and obeys the slot it
//! holds (see `control::slots`).

mod coalesce;
pub(crate) mod park;

use crate::control::slots::TaskStatus;
use crate::metrics::{LatencyRecorder, TaskCounters, ThreadCounters};
use crate::shared::Shared;
use crate::sync::{lock, Arc, Mutex, Ordering};
use crate::sys::ThreadProbe;
use crate::task::Runnable;
use coalesce::Coalescer;
use crossbeam_deque::{Steal, Stealer, Worker};
use crossbeam_utils::{Backoff, CachePadded};
use park::Wake;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// One pick in this many starts with a lower lane. 61 is prime, so it does
/// not fall into step with a program's own periodic patterns, and small
/// enough that outside work waits behind at most 60 local tasks per worker.
pub(crate) const FAIRNESS_INTERVAL: u64 = 61;

/// Lane indices (see `shared::lane`).
const HIGH: usize = 0;
const NORMAL: usize = 1;
const LOW: usize = 2;

/// What the pool keeps for each worker index, whether or not a thread has it.
#[derive(Debug, Default)]
pub(crate) struct Entry {
    /// Phase and task tick, read by the monitor.
    pub(crate) status: TaskStatus,
    /// The stealing end of this entry's deque, created with the first worker.
    stealer: OnceLock<Stealer<Runnable>>,
    /// The owning end, held by the thread while it runs; kept here between
    /// threads so tasks left behind stay stealable.
    deque: Mutex<Option<Worker<Runnable>>>,
    pub(crate) counters: CachePadded<TaskCounters>,
    pub(crate) latency: LatencyRecorder,
    /// How the monitor asks the kernel about this worker's thread.
    pub(crate) probe: Mutex<Option<Arc<ThreadProbe>>>,
}

impl Entry {
    /// The stealing end of this entry's deque, if it ever had one.
    pub(crate) fn stealer(&self) -> Option<&Stealer<Runnable>> {
        self.stealer.get()
    }

    fn take_deque(&self) -> Worker<Runnable> {
        let mut slot = lock(&self.deque);
        match slot.take() {
            Some(deque) => deque,
            None => {
                let deque = Worker::new_fifo();
                let _ = self.stealer.set(deque.stealer());
                deque
            }
        }
    }
}

/// The thread-local view of the worker running on this thread.
struct Context {
    shared: Arc<Shared>,
    index: usize,
    local: Worker<Runnable>,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<Context>>> = const { RefCell::new(None) };
    /// The pool dropping its queued runnables on this thread, if any.
    static DRAINING: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
}

/// Runs `f` with the pool a task belongs to, when that task's future is being
/// polled or dropped on this thread: the pool draining its queues here, or
/// else the pool whose worker this is (a runnable only ever runs on its own
/// pool's workers). `f` also gets the worker's entry index, if any.
pub(crate) fn with_task_pool(f: impl FnOnce(&Arc<Shared>, Option<usize>)) {
    let draining = DRAINING.try_with(|d| d.borrow().clone()).ok().flatten();
    if let Some(shared) = draining {
        return f(&shared, current_index(&shared));
    }
    let ctx = CURRENT.try_with(|c| c.borrow().clone()).ok().flatten();
    if let Some(ctx) = ctx {
        f(&ctx.shared, Some(ctx.index));
    }
    // Otherwise this thread's locals are being destroyed (a user's
    // thread-local destructor made a stopped pool drop tasks here): the end
    // is not counted. A panic instead would abort the process, as it would
    // happen in a destructor.
}

/// Runs `f` (which drops runnables of `shared`) with `shared` marked as the
/// pool draining on this thread, for [`with_task_pool`].
///
/// On a thread whose locals are being destroyed the mark cannot be set; the
/// runnables are still dropped, and their end counts are lost (see
/// [`with_task_pool`]).
pub(crate) fn draining<R>(shared: &Arc<Shared>, f: impl FnOnce() -> R) -> R {
    let previous = DRAINING
        .try_with(|d| d.borrow_mut().replace(Arc::clone(shared)))
        .ok()
        .flatten();
    let result = f();
    let _ = DRAINING.try_with(|d| *d.borrow_mut() = previous);
    result
}

/// Records a task's queue-to-first-poll latency, in `sys::ticks`: in the
/// worker's entry, or in the outside threads' recorder for a first poll
/// outside a worker.
pub(crate) fn record_start(latency: u64) {
    let recorded = CURRENT
        .try_with(|current| match &*current.borrow() {
            Some(ctx) => {
                ctx.shared.entries[ctx.index].latency.record(latency);
                true
            }
            None => false,
        })
        .unwrap_or(false);
    if !recorded {
        with_task_pool(|shared, _| shared.record_start_outside(latency));
    }
}

/// Pushes `runnable` on the current thread's deque if it is a worker of
/// `shared`; gives it back otherwise.
///
/// The runnable stays outside the closure: `try_with` fails on a thread whose
/// locals are being destroyed (a user's thread-local destructor spawning or
/// waking a task), and such a thread is no worker, so the task must come
/// back to go to the global lane rather than be dropped or panic there.
pub(crate) fn push_local(shared: &Arc<Shared>, runnable: Runnable) -> Option<Runnable> {
    let mut runnable = Some(runnable);
    let _ = CURRENT.try_with(|current| {
        if let Some(ctx) = &*current.borrow() {
            if Arc::ptr_eq(&ctx.shared, shared) {
                if let Some(runnable) = runnable.take() {
                    ctx.local.push(runnable);
                }
            }
        }
    });
    runnable
}

/// The entry index of the current thread if it is a worker of `shared`.
pub(crate) fn current_index(shared: &Shared) -> Option<usize> {
    CURRENT
        .try_with(|current| match &*current.borrow() {
            Some(ctx) if std::ptr::eq(Arc::as_ptr(&ctx.shared), shared) => Some(ctx.index),
            _ => None,
        })
        .ok()
        .flatten()
}

/// If the current thread is a worker running a task, gives its slot away
/// (declared blocking) so another worker can run meanwhile. The worker takes a
/// slot back, or gives way, at the end of its task.
pub(crate) fn declare_blocking() {
    let ctx = CURRENT
        .try_with(|current| current.borrow().clone())
        .ok()
        .flatten();
    let Some(ctx) = ctx else { return };
    let shared = &ctx.shared;
    let status = &shared.entries[ctx.index].status;
    if status.try_mark_blocked(status.load()) {
        ThreadCounters::bump(&shared.thread_counters.declared_blocking);
        shared.slots.release();
        if shared.has_work() {
            shared.notify();
        }
    }
}

/// The body of a worker thread. It starts holding a searching slot reserved by
/// whoever started it.
pub(crate) fn run(shared: Arc<Shared>, index: usize) {
    let entry = &shared.entries[index];
    *lock(&entry.probe) = Some(Arc::new(ThreadProbe::for_current_thread()));
    let ctx = Rc::new(Context {
        local: entry.take_deque(),
        shared: Arc::clone(&shared),
        index,
    });
    CURRENT.with(|current| *current.borrow_mut() = Some(Rc::clone(&ctx)));

    let mut worker = RunLoop {
        ctx: &ctx,
        tick: entry.status.load().tick(),
        searching: true,
        coalescer: Coalescer::default(),
    };
    let exit = worker.run();

    CURRENT.with(|current| *current.borrow_mut() = None);
    let ctx = Rc::try_unwrap(ctx).unwrap_or_else(|_| unreachable!("context escaped its thread"));
    let leftover = !ctx.local.is_empty();
    *lock(&entry.deque) = Some(ctx.local);
    *lock(&entry.probe) = None;
    if leftover && !shared.is_stopped() {
        // Tasks stay stealable in the entry; make sure somebody looks.
        shared.notify();
    }
    if shared.is_stopped() {
        shared.drain_queues();
    }
    // A retiring worker took itself off the thread count already.
    shared.worker_exited(index, matches!(exit, Exit::Stop));
}

struct RunLoop<'a> {
    ctx: &'a Context,
    /// Tasks started by this entry, ever (continues across threads).
    tick: u64,
    /// Whether this worker counts itself in `Slots::searching`.
    searching: bool,
    /// How long to wait before looking again after running dry.
    coalescer: Coalescer,
}

/// Why the run loop ended.
enum Exit {
    Retire,
    Stop,
}

impl RunLoop<'_> {
    fn shared(&self) -> &Arc<Shared> {
        &self.ctx.shared
    }

    fn run(&mut self) -> Exit {
        loop {
            if self.shared().is_stopped() {
                break Exit::Stop;
            }
            if let Some(task) = self.find_task() {
                if self.searching {
                    self.searching = false;
                    // About to run a task with a slot taken since the pool may
                    // have been idle: a monitor asleep on an idle pool must
                    // watch it (see `control::monitor` for the pairing).
                    self.shared().monitor.wake();
                    if self.shared().slots.stop_searching() && self.shared().has_work() {
                        // Last searcher: hand the rest of the burst to one more.
                        self.shared().notify();
                    }
                }
                if !self.run_task(task) {
                    // Our slot was given away while the task blocked.
                    if self.shared().slots.try_acquire(false) {
                        self.shared().monitor.wake();
                    } else if let Some(exit) = self.give_way() {
                        break exit;
                    }
                } else if self.shared().shrink.load(Ordering::Relaxed) && self.give_slot_back() {
                    if let Some(exit) = self.give_way() {
                        break exit;
                    }
                }
                continue;
            }
            if !self.searching {
                self.shared().slots.start_searching();
                self.searching = true;
                continue;
            }
            if let Some(task) = self.search_a_little() {
                // Same as the found-task path above, via the loop's next turn.
                self.ctx.local.push(task);
                continue;
            }
            if let Some(exit) = self.go_idle() {
                break exit;
            }
        }
    }

    /// Picks the next task. Outside the search phase only the high lane and
    /// the worker's own deque are looked at; a searcher looks everywhere.
    fn find_task(&mut self) -> Option<Runnable> {
        let shared = &self.ctx.shared;
        let local = &self.ctx.local;
        let pick = self.tick.wrapping_add(1);
        if pick % FAIRNESS_INTERVAL == 0 {
            let first = if (pick / FAIRNESS_INTERVAL) % 2 == 0 {
                LOW
            } else {
                NORMAL
            };
            if let Some(task) = shared.pop_lane(first, local) {
                return Some(task);
            }
        }
        if shared.lane_has_work(HIGH) {
            if let Some(task) = shared.pop_lane(HIGH, local) {
                return Some(task);
            }
        }
        if let Some(task) = local.pop() {
            return Some(task);
        }
        if !self.searching {
            return None;
        }
        if let Some(task) = shared.pop_lane(NORMAL, local) {
            return Some(task);
        }
        if let Some(task) = self.steal() {
            return Some(task);
        }
        shared.pop_lane(LOW, local)
    }

    /// Steals a batch from another worker's deque, starting at a different
    /// victim each time so thieves spread out.
    fn steal(&self) -> Option<Runnable> {
        let shared = &self.ctx.shared;
        let count = shared.high_water.load(Ordering::Acquire);
        if count <= 1 {
            return None;
        }
        let start = (self.tick as usize).wrapping_mul(0x9E37_79B9) % count;
        let mut retry = true;
        while retry {
            retry = false;
            for offset in 0..count {
                let victim = (start + offset) % count;
                if victim == self.ctx.index {
                    continue;
                }
                let Some(stealer) = shared.entries[victim].stealer() else {
                    continue;
                };
                match stealer.steal_batch_and_pop(&self.ctx.local) {
                    Steal::Success(task) => return Some(task),
                    Steal::Retry => retry = true,
                    Steal::Empty => {}
                }
            }
        }
        None
    }

    /// Runs one task. Returns false if the worker's slot was given away while
    /// it ran (the monitor saw it blocked, or it declared blocking).
    fn run_task(&mut self, task: Runnable) -> bool {
        self.tick = self.tick.wrapping_add(1);
        let status = &self.ctx.shared.entries[self.ctx.index].status;
        status.begin_task(self.tick);
        let gate = task.metadata().gate.clone();
        // The task wrapper catches panics of the future's poll; this catches
        // whatever else unwinds out of `run` (a panicking waker or scheduler
        // path), so a worker never unwinds. A future whose destructor panics
        // while `async-task` drops it (cancelled) aborts the process: the
        // cell drops it under an abort guard, beyond anyone's reach.
        let _ = catch_unwind(AssertUnwindSafe(|| task.run()));
        if let Some(gate) = gate {
            gate.after_run();
        }
        status.end_task(self.tick)
    }

    /// Before parking, keeps looking for a short, bounded while: spinning,
    /// then yielding the CPU ([`Backoff::snooze`]). Parking and being woken
    /// cost two futex calls and a context switch (~5-10 µs); work that arrives
    /// in a steady stream usually shows up sooner than that. During a dense
    /// stream the first look waits a little so tasks are taken in batches
    /// (see `coalesce`).
    fn search_a_little(&mut self) -> Option<Runnable> {
        self.wait_for_batch();
        let backoff = Backoff::new();
        let mut looks = 0;
        while !backoff.is_completed() {
            if looks > 0 {
                backoff.snooze();
            }
            looks += 1;
            if self.shared().is_stopped() {
                return None;
            }
            if let Some(task) = self.find_task() {
                self.coalescer.found(looks, 1 + self.ctx.local.len());
                return Some(task);
            }
        }
        self.coalescer.ran_out();
        None
    }

    /// Waits the coalescer's current wait, without touching the queues a
    /// spawner writes. Ends early when high-priority work or shutdown
    /// arrives: only normal and low-priority tasks are ever batched.
    fn wait_for_batch(&self) {
        let wait = self.coalescer.wait_nanos();
        if wait == 0 {
            return;
        }
        let deadline = Instant::now() + Duration::from_nanos(u64::from(wait));
        let shared = self.shared();
        while Instant::now() < deadline {
            if shared.lane_has_work(HIGH) || shared.is_stopped() {
                return;
            }
            for _ in 0..16 {
                std::hint::spin_loop();
            }
        }
    }

    /// A searcher found nothing: park until woken. Returns `Some` to leave.
    fn go_idle(&mut self) -> Option<Exit> {
        let shared = Arc::clone(self.shared());
        let index = self.ctx.index;
        shared.sleepers.push(index);
        shared.slots.release_searching();
        self.searching = false;
        // Step 3 of the protocol in `park`: look again after releasing.
        if shared.has_work() || shared.is_stopped() {
            // Take a slot while still on the stack: a notifier that comes
            // meanwhile pops us and hands us its reservation, instead of
            // finding the stack empty and starting a thread for nothing.
            if shared.slots.try_acquire(true) {
                if !shared.sleepers.remove(index) {
                    // A notifier popped us too and reserved a slot for us
                    // (`remove` consumed its token): keep one of the two.
                    shared.slots.release_searching();
                }
                self.searching = true;
                return None;
            }
            // No free slot: the workers holding them will find the work, or
            // a notifier took the slot we released and is about to pop us.
            // Either way we stay on the stack: leaving it, even for a moment,
            // would let that notifier find it empty and start a thread.
        }
        self.park(&shared)
    }

    /// The pool may hold more slots than there are (`Shared::shrink`): if it
    /// does, gives this worker's slot back and returns true (the caller then
    /// gives way). The flag is cleared before the check and raised again when
    /// this worker was surplus, so a target lowered concurrently is never
    /// missed: its `store(true)` comes after its new target, and either lands
    /// after our swap or is seen by our check.
    fn give_slot_back(&self) -> bool {
        let shared = self.shared();
        // AcqRel pairs with the Release store in `Shared::set_target` and
        // `lend_reserve_slot`: seeing the flag means seeing the new counts.
        if !shared.shrink.swap(false, Ordering::AcqRel) || !shared.slots.over_target() {
            return false;
        }
        shared.slots.release();
        // Others may be surplus too; let them check.
        shared.shrink.store(true, Ordering::Release);
        true
    }

    /// A worker whose blocked task ended finds every slot taken: it is
    /// surplus. It parks without a slot (or retires), and makes sure the work
    /// in its deque is seen by the others.
    fn give_way(&mut self) -> Option<Exit> {
        let shared = Arc::clone(self.shared());
        shared.sleepers.push(self.ctx.index);
        if shared.has_work() {
            // Our deque stays stealable, and other queues may hold work: wake
            // a searcher if a slot is free.
            shared.notify();
        }
        let exit = self.park(&shared);
        if let Some(Exit::Retire) = exit {
            ThreadCounters::bump(&shared.thread_counters.retired_surplus);
        }
        exit
    }

    /// Waits on the sleeper stack (the worker is on it and holds no slot).
    fn park(&mut self, shared: &Arc<Shared>) -> Option<Exit> {
        let index = self.ctx.index;
        let timeout = Some(shared.config.idle_timeout);
        match shared.sleepers.park(index, timeout, || try_retire(shared)) {
            Wake::Woken => {
                self.searching = true;
                None
            }
            Wake::Stop => Some(Exit::Stop),
            Wake::TimedOut => {
                ThreadCounters::bump(&shared.thread_counters.retired_idle);
                Some(Exit::Retire)
            }
        }
    }
}

/// Lets a parked worker leave the pool if it has more than `min_threads`
/// threads (any number once it is closed), by taking it off the thread count.
/// The caller holds no slot.
fn try_retire(shared: &Shared) -> bool {
    let floor = if shared.is_closed() {
        0
    } else {
        shared.config.min_threads
    };
    let mut threads = shared.threads.load(Ordering::Relaxed);
    while threads > floor {
        match shared.threads.compare_exchange_weak(
            threads,
            threads - 1,
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => return true,
            Err(actual) => threads = actual,
        }
    }
    false
}

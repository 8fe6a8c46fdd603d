//! The state one pool's handles, workers, tasks and monitor share.
//!
//! `Shared` owns the queues, the worker slots (`Entry`), the slot counters and
//! the sleepers, and implements the operations that cut across them: spawning
//! a task, scheduling a woken task, waking or starting a worker, and the
//! shutdown latch.
//!
//! Shutdown goes `open → closed → stopped`; the states and the argument that
//! nobody is stranded are in `shutdown`.

use crate::builder::Config;
use crate::control::monitor::MonitorSignal;
use crate::control::pacing::Pacer;
use crate::control::slots::{Phase, Slots};
use crate::control::StartReason;
use crate::metrics::{EndCounter, LatencyRecorder, Metrics, TaskCounters, ThreadCounters};
use crate::shutdown::Latch;
use crate::sync::{fence, lock, Arc, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering};
use crate::task::{tracked, JoinHandle, Priority, Runnable, TaskMeta};
use crate::worker::{self, park::Sleepers, Entry};
use crossbeam_deque::{Injector, Steal};
use crossbeam_utils::CachePadded;
use std::future::Future;
use std::time::Instant;

/// Everything one pool shares. See the module docs.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: Config,
    /// Global queues, one per [`Priority`], indexed by [`lane`].
    lanes: [Injector<Runnable>; 3],
    /// One entry per possible worker (`max_threads` of them).
    pub(crate) entries: Box<[Entry]>,
    /// Entries at or above this index have never had a worker.
    pub(crate) high_water: AtomicUsize,
    /// Entries without a worker thread now, lowest index last.
    free_entries: Mutex<Vec<usize>>,
    pub(crate) slots: Slots,
    pub(crate) sleepers: Sleepers,
    /// Worker threads alive.
    pub(crate) threads: AtomicUsize,
    /// Counters of threads outside the pool (spawns from outside, drops of
    /// runnables outside a worker).
    external: CachePadded<TaskCounters>,
    external_latency: LatencyRecorder,
    pub(crate) thread_counters: ThreadCounters,
    latch: Latch,
    /// Signalled when a worker thread exits and when the pool stops.
    exit_lock: Mutex<()>,
    exit_cv: Condvar,
    pub(crate) monitor: MonitorSignal,
    pub(crate) built_at: Instant,
    /// The groups' and pairs' shared state, while any exist (see `fair`).
    pub(crate) fair: std::sync::Mutex<std::sync::Weak<crate::fair::Fair>>,
    /// Paces thread starts beyond `concurrency`.
    pacer: Mutex<Pacer>,
    /// Set when workers may hold more slots than there are (the target was
    /// lowered, or a reserve slot was lent): workers check it at each task
    /// boundary and one gives its slot back. A flag, so the common case costs
    /// one load of a line nobody writes.
    pub(crate) shrink: CachePadded<AtomicBool>,
}

/// How many slots beyond the target high-priority tasks may borrow at once.
/// One: enough to start an urgent task at once on a saturated pool, while the
/// pool is over its slots by at most one worker, for about one task.
pub(crate) const RESERVE_SLOTS: usize = 1;

/// The lane index of a priority: 0 is served first.
pub(crate) fn lane(priority: Priority) -> usize {
    match priority {
        Priority::High => 0,
        Priority::Normal => 1,
        Priority::Low => 2,
    }
}

impl Shared {
    pub(crate) fn new(config: Config) -> Self {
        crate::sys::start_tick_calibration();
        let capacity = config.max_threads;
        Shared {
            lanes: [Injector::new(), Injector::new(), Injector::new()],
            entries: (0..capacity).map(|_| Entry::default()).collect(),
            high_water: AtomicUsize::new(0),
            free_entries: Mutex::new((0..capacity).rev().collect()),
            slots: Slots::new(config.concurrency),
            sleepers: Sleepers::new(capacity),
            threads: AtomicUsize::new(0),
            external: CachePadded::new(TaskCounters::default()),
            external_latency: LatencyRecorder::default(),
            thread_counters: ThreadCounters::default(),
            latch: Latch::default(),
            exit_lock: Mutex::new(()),
            exit_cv: Condvar::new(),
            monitor: MonitorSignal::default(),
            built_at: Instant::now(),
            fair: std::sync::Mutex::new(std::sync::Weak::new()),
            pacer: Mutex::new(Pacer::default()),
            shrink: CachePadded::new(AtomicBool::new(false)),
            config,
        }
    }

    // ----- spawning and scheduling -------------------------------------------------

    /// Accepts `future` as a task, or returns `None` if the pool is closed.
    /// `closure` says the future is a work item's closure (it finishes in its
    /// first poll), which lets the spawning thread free its cell (see
    /// `task::local_free`).
    pub(crate) fn spawn<F>(
        self: &Arc<Self>,
        future: F,
        meta: TaskMeta,
        closure: bool,
    ) -> Option<JoinHandle<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // Count before asking the latch: see `shutdown`.
        let counters = self.counters(worker::current_index(self));
        counters.spawned();
        if !self.latch.accepts() {
            counters.refused();
            self.check_drained();
            return None;
        }
        let scheduler = Arc::clone(self);
        let (runnable, task) = async_task::Builder::new().metadata(meta).spawn(
            |_| tracked(future),
            move |runnable| scheduler.schedule(runnable),
        );
        if closure {
            crate::task::local_free::keep(runnable.waker());
        }
        runnable.schedule();
        Some(JoinHandle::new(task))
    }

    /// Queues a runnable task, through its admission gate if it has one: on
    /// the current worker's own deque when it is a
    /// normal-priority task woken on one of this pool's workers (cache-warm,
    /// no contention), otherwise on its lane's global queue. Then makes sure
    /// somebody will run it.
    pub(crate) fn schedule(self: &Arc<Self>, runnable: Runnable) {
        if let Some(gate) = runnable.metadata().gate.clone() {
            if let Some(admitted) = gate.admit(runnable) {
                self.push_ready(admitted);
            }
        } else {
            self.push_ready(runnable);
        }
    }

    /// Queues a runnable on its lane's global queue (never a worker's own
    /// deque), then makes sure somebody will run it.
    pub(crate) fn push_global(self: &Arc<Self>, runnable: Runnable) {
        let lane = lane(runnable.metadata().priority);
        self.lanes[lane].push(runnable);
        self.notify_lane(lane);
    }

    /// Queues a runnable that needs no (more) admission: see [`Shared::schedule`].
    pub(crate) fn push_ready(self: &Arc<Self>, runnable: Runnable) {
        let lane = lane(runnable.metadata().priority);
        let runnable = if lane == 1 {
            worker::push_local(self, runnable)
        } else {
            Some(runnable)
        };
        if let Some(runnable) = runnable {
            self.lanes[lane].push(runnable);
        }
        self.notify_lane(lane);
    }

    /// `notify` after a push on `lane`; a high-priority task that finds every
    /// slot busy and nobody searching borrows the reserve slot.
    fn notify_lane(self: &Arc<Self>, lane: usize) {
        if !self.notify() && lane == 0 {
            self.lend_reserve_slot();
        }
    }

    /// Lends one slot beyond the target to run a high-priority task now
    /// instead of after a running task ends (which may take a while: the
    /// flood experiment's items run 2 ms). The woken worker looks at the high
    /// lane first; the `shrink` flag makes some worker give a slot back at
    /// its next task boundary, so the pool is over its slots for about one
    /// task. At most [`RESERVE_SLOTS`] are lent at a time.
    fn lend_reserve_slot(self: &Arc<Self>) {
        if self.slots.try_reserve_searcher_beyond(RESERVE_SLOTS) {
            self.shrink.store(true, Ordering::Release);
            ThreadCounters::bump(&self.thread_counters.reserve_lends);
            self.wake_or_start(StartReason::Demand);
        }
    }

    /// Changes the number of slots (policies). Lowering it raises `shrink` so
    /// surplus workers give their slots back at their next task boundary.
    pub(crate) fn set_target(&self, target: usize) {
        let lower = target < self.slots.target();
        self.slots.set_target(target);
        if lower {
            // Release: a worker that sees the flag sees the new target.
            self.shrink.store(true, Ordering::Release);
        }
    }

    /// Called after new work was queued: wakes or starts a worker if nobody is
    /// searching and a slot is free. See `worker::park` for why the fence.
    /// Returns true if it took a slot for a worker, or none was needed because
    /// somebody is searching.
    pub(crate) fn notify(self: &Arc<Self>) -> bool {
        fence(Ordering::SeqCst);
        if self.latch.is_stopped() {
            // Stopped after the push: nobody will run it, so drop it here
            // (its task counts as cancelled).
            self.drain_queues();
            return true;
        }
        if self.slots.try_reserve_searcher() {
            self.wake_or_start(StartReason::Demand);
            return true;
        }
        self.slots.counts().searching > 0
    }

    /// Hands a reserved searching slot to a parked worker, or to a new thread.
    /// Gives the reservation back if neither is possible.
    ///
    /// The monitor, if asleep on an idle pool, is woken by the worker when it
    /// starts a task (`RunLoop::run`), not here: woken first from the
    /// spawning thread, it took the idle core and the worker waited for it,
    /// and a spawn onto an idle pool started after 50-94 µs (median) instead
    /// of the 12-21 µs it takes now (`examples/wake_latency.rs`).
    pub(crate) fn wake_or_start(self: &Arc<Self>, reason: StartReason) {
        if self.sleepers.wake_one() {
            return;
        }
        if !self.start_worker(reason) {
            self.slots.release_searching();
        }
    }

    /// Starts a worker thread that begins as a searcher, using the caller's
    /// reservation. Returns false if `max_threads` are running, the pacing of
    /// starts beyond `concurrency` says not yet (see `control::pacing`), or the
    /// OS refused the thread.
    fn start_worker(self: &Arc<Self>, reason: StartReason) -> bool {
        if self.threads.load(Ordering::Relaxed) >= self.config.concurrency {
            let now = self.built_at.elapsed();
            if !lock(&self.pacer).try_start(now) {
                ThreadCounters::bump(&self.thread_counters.start_paced);
                return false;
            }
        }
        let mut threads = self.threads.load(Ordering::Relaxed);
        loop {
            if threads >= self.config.max_threads {
                return false;
            }
            match self.threads.compare_exchange_weak(
                threads,
                threads + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => threads = actual,
            }
        }
        let Some(index) = lock(&self.free_entries).pop() else {
            // Only while a retiring thread (already off the count) has not
            // handed its entry back yet: treat it like max_threads reached.
            self.threads.fetch_sub(1, Ordering::AcqRel);
            return false;
        };
        self.high_water.fetch_max(index + 1, Ordering::AcqRel);
        let mut builder =
            std::thread::Builder::new().name(format!("{}-{index}", self.config.thread_name));
        if let Some(size) = self.config.stack_size {
            builder = builder.stack_size(size);
        }
        let shared = Arc::clone(self);
        match builder.spawn(move || worker::run(shared, index)) {
            Ok(_) => {
                ThreadCounters::bump(&self.thread_counters.started);
                ThreadCounters::bump(match reason {
                    StartReason::Demand => &self.thread_counters.started_demand,
                    StartReason::Compensation => &self.thread_counters.started_compensation,
                    StartReason::Policy => &self.thread_counters.started_policy,
                });
                self.thread_counters
                    .peak_threads
                    .fetch_max(threads as u64 + 1, Ordering::Relaxed);
                true
            }
            Err(_) => {
                // EAGAIN or out of memory: keep running on the threads we have.
                ThreadCounters::bump(&self.thread_counters.start_failures);
                lock(&self.free_entries).push(index);
                self.threads.fetch_sub(1, Ordering::AcqRel);
                false
            }
        }
    }

    /// Called by a worker thread as its last act. `count_down` is false for a
    /// retiring worker, which took itself off `threads` when it decided.
    pub(crate) fn worker_exited(&self, index: usize, count_down: bool) {
        lock(&self.free_entries).push(index);
        let _guard = lock(&self.exit_lock);
        if count_down {
            self.threads.fetch_sub(1, Ordering::AcqRel);
        }
        self.exit_cv.notify_all();
    }

    // ----- queues ------------------------------------------------------------------

    /// Takes one task from lane `lane`'s global queue; for the normal lane,
    /// moves a batch into `local` too.
    pub(crate) fn pop_lane(
        &self,
        lane: usize,
        local: &crossbeam_deque::Worker<Runnable>,
    ) -> Option<Runnable> {
        loop {
            let steal = if lane == 1 {
                self.lanes[lane].steal_batch_and_pop(local)
            } else {
                self.lanes[lane].steal()
            };
            match steal {
                Steal::Success(task) => return Some(task),
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }

    /// True if lane `lane`'s global queue has tasks.
    pub(crate) fn lane_has_work(&self, lane: usize) -> bool {
        !self.lanes[lane].is_empty()
    }

    /// True if any queue, global or a worker's, holds a task.
    pub(crate) fn has_work(&self) -> bool {
        self.lanes.iter().any(|lane| !lane.is_empty())
            || self.entries[..self.high_water.load(Ordering::Acquire)]
                .iter()
                .any(|entry| entry.stealer().is_some_and(|s| !s.is_empty()))
    }

    /// Tasks waiting in queues now.
    pub(crate) fn queued(&self) -> usize {
        self.lanes.iter().map(Injector::len).sum::<usize>()
            + self.entries[..self.high_water.load(Ordering::Acquire)]
                .iter()
                .filter_map(Entry::stealer)
                .map(|s| s.len())
                .sum::<usize>()
    }

    /// Drops every queued runnable (their tasks count as cancelled).
    pub(crate) fn drain_queues(self: &Arc<Self>) {
        worker::draining(self, || self.drop_queued());
    }

    fn drop_queued(&self) {
        for lane in &self.lanes {
            loop {
                match lane.steal() {
                    Steal::Success(task) => drop(task),
                    Steal::Retry => continue,
                    Steal::Empty => break,
                }
            }
        }
        for entry in &self.entries[..self.high_water.load(Ordering::Acquire)] {
            if let Some(stealer) = entry.stealer() {
                loop {
                    match stealer.steal() {
                        Steal::Success(task) => drop(task),
                        Steal::Retry => continue,
                        Steal::Empty => break,
                    }
                }
            }
        }
    }

    // ----- counters ----------------------------------------------------------------

    /// The counter shard of worker `index`, or the outside threads' shard.
    fn counters(&self, index: Option<usize>) -> &TaskCounters {
        match index {
            Some(index) => &self.entries[index].counters,
            None => &self.external,
        }
    }

    /// Tasks ended so far, however they ended.
    pub(crate) fn task_totals(&self) -> u64 {
        self.external.ended_total()
            + self.entries[..self.high_water.load(Ordering::Acquire)]
                .iter()
                .map(|e| e.counters.ended_total())
                .sum::<u64>()
    }

    /// Records a task's queue-to-first-poll latency from outside a worker
    /// (workers batch theirs: see `worker::record_start`).
    pub(crate) fn record_start_outside(&self, latency: u64) {
        self.external_latency.record(latency);
    }

    /// Counts a task's end (on worker `index`, or outside the pool) and, if it
    /// was the last task of a closed pool, stops the pool.
    pub(crate) fn task_ended(self: &Arc<Self>, index: Option<usize>, how: EndCounter) {
        self.counters(index).ended(how);
        self.check_drained();
    }

    /// After a count that lowers `live`: if the pool is closed and nothing is
    /// live any more, stop it. See "Shutdown phases".
    fn check_drained(self: &Arc<Self>) {
        if self.latch.stop_if_drained(|| self.live()) {
            self.on_stop();
        }
    }

    // ----- shutdown ----------------------------------------------------------------

    /// Stops taking new tasks; the pool stops by itself once the last task ends.
    pub(crate) fn close(self: &Arc<Self>) {
        if !self.latch.close() {
            return;
        }
        self.check_drained();
        // Parked workers may now retire below `min_threads`.
        self.monitor.wake();
    }

    /// True once `close` was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.latch.is_closed()
    }

    /// True once the pool stopped: workers leave after their current task.
    pub(crate) fn is_stopped(&self) -> bool {
        self.latch.is_stopped()
    }

    /// Moves to `stopped`: wakes every worker so they leave, and drops what is
    /// still queued. Idempotent.
    pub(crate) fn stop(self: &Arc<Self>) {
        if self.latch.stop() {
            self.on_stop();
        }
    }

    /// What the one call that stopped the pool does next.
    fn on_stop(self: &Arc<Self>) {
        let fair = match self.fair.lock() {
            Ok(weak) => weak.upgrade(),
            Err(poisoned) => poisoned.into_inner().upgrade(),
        };
        if let Some(fair) = fair {
            fair.drain_if_stopped();
        }
        self.sleepers.stop_all();
        self.monitor.stop();
        self.drain_queues();
        let _guard = lock(&self.exit_lock);
        self.exit_cv.notify_all();
    }

    /// Tasks accepted and not yet ended: the sum over the counter shards.
    pub(crate) fn live(&self) -> usize {
        let high_water = self.high_water.load(Ordering::SeqCst);
        let live = self.external.live_part()
            + self.entries[..high_water]
                .iter()
                .map(|e| e.counters.live_part())
                .sum::<i64>();
        usize::try_from(live).unwrap_or(0)
    }

    /// Waits until the pool has stopped and every worker thread has exited, or
    /// `deadline` passes. Returns true if it got there.
    pub(crate) fn wait_stopped(&self, deadline: Option<Instant>, allow_threads: usize) -> bool {
        let mut guard = lock(&self.exit_lock);
        loop {
            if self.is_stopped() && self.threads.load(Ordering::Acquire) <= allow_threads {
                return true;
            }
            match deadline {
                None => {
                    guard = match self.exit_cv.wait(guard) {
                        Ok(g) => g,
                        Err(p) => p.into_inner(),
                    }
                }
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return false;
                    }
                    guard = match self.exit_cv.wait_timeout(guard, deadline - now) {
                        Ok((g, _)) => g,
                        Err(p) => p.into_inner().0,
                    }
                }
            }
        }
    }

    // ----- metrics -----------------------------------------------------------------

    /// A snapshot of every counter.
    pub(crate) fn metrics(&self) -> Metrics {
        let mut m = Metrics::default();
        let mut latency = crate::metrics::new_histogram();
        m.add_tasks(&self.external);
        self.external_latency.add_to(&mut latency);
        let high_water = self.high_water.load(Ordering::Acquire);
        let (mut running, mut blocked) = (0, 0);
        for entry in &self.entries[..high_water] {
            m.add_tasks(&entry.counters);
            entry.latency.add_to(&mut latency);
            match entry.status.load().phase() {
                Phase::InTask => running += 1,
                Phase::Blocked => blocked += 1,
                Phase::Idle => {}
            }
        }
        // Saturating: shards are read one by one while tasks move between them.
        m.in_flight = m
            .spawned
            .saturating_sub(m.completed + m.panicked + m.cancelled);
        m.queued = self.queued() as u64;
        m.threads = self.threads.load(Ordering::Acquire);
        m.idle_threads = self.sleepers.parked();
        m.running_threads = self.slots.counts().active.max(running);
        m.blocked_threads = blocked;
        self.thread_counters.fill(&mut m);
        m.concurrency_target = self.slots.target();
        m.start_latency =
            crate::metrics::LatencySummary::from_ticks(&latency, crate::sys::nanos_per_tick());
        self.monitor.fill_metrics(&mut m);
        m
    }
}

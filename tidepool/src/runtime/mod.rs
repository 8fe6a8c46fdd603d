//! The runtime core: the state one pool's handles, workers, tasks and monitor
//! share ([`Shared`]), the task cell, and the protocols that need no thread of
//! their own (parking, the shutdown latch).
//!
//! This layer is passive: it starts no thread and runs no task. The worker
//! layer above it (`worker`) starts threads, schedules and runs tasks on
//! this state; the monitor (`monitor`) watches it.
//!
//! * `config`: the resolved settings.
//! * `queues`: the global lanes, one per [`Priority`], each with a FIFO of
//!   its own for tasks a gate admitted.
//! * `threads`: the worker entries and thread accounting.
//! * `lifecycle`: the shutdown latch and the exit signal.
//! * `park`: the sleeper stack and the park/wake protocol.
//! * `context`: the thread-locals (which worker runs here).
//! * `task`: the task cell, its metadata and the gate hook.
//! * `work`: what queues hold: tasks and fork-join jobs.
//! * `kinds`, `kind_names`, `presumed`: the kinds of task and the table of
//!   what the pool learned per kind (its rules are `control::presumption`),
//!   what each kind is called, and a task presumed blocking.
//! * `observed`: the events and figures that name the work that blocked,
//!   and the tasks running now.

mod back_from_block;
mod config;
pub(crate) mod context;
pub(crate) mod free_rings;
pub(crate) mod hold;
pub(crate) mod item;
pub(crate) mod kind_names;
pub(crate) mod kinds;
mod lifecycle;
mod observed;
pub(crate) mod park;
mod placement;
pub(crate) mod presumed;
mod queues;
mod start_sampler;
pub(crate) mod task;
mod threads;
pub(crate) mod waiting;
mod work;

pub(crate) use config::{Config, Hook, NameFn};
pub(crate) use lifecycle::{Exits, Latch};
pub(crate) use observed::Blocked;
pub use queues::Priority;
pub(crate) use queues::{retry_until_settled, Lanes};
pub use task::PanicPayload;
pub(crate) use threads::{Entry, StartFailure, Threads};
pub(crate) use work::{Job, JobRef, JobSlot, Queued, Work};

use crate::control::ablation::Mechanism;
use crate::control::signal::MonitorSignal;
use crate::control::slots::{Phase, Slots};
use crate::metrics::{
    KindCounters, LatencyRecorder, Metrics, Outcome, TaskCounters, ThreadCounters,
};
use crate::sync::{Arc, AtomicBool, Ordering};
use crate::trace;
use crossbeam_utils::CachePadded;
use park::Sleepers;
use std::any::Any;
use std::sync::{Mutex as StdMutex, OnceLock, Weak};
use std::time::Instant;

/// Everything one pool shares. Each field is one job; the methods here are
/// the operations that cut across them (task accounting and stopping,
/// metrics).
#[derive(Debug)]
pub(crate) struct Shared {
    /// The pool's settings.
    pub(crate) config: Config,
    /// The global lanes and admitted FIFOs (workers' own deques are in their
    /// entries).
    pub(crate) lanes: Lanes,
    /// The worker entries and thread counts.
    pub(crate) threads: Threads,
    /// The running slots (see `control::slots`).
    pub(crate) slots: Slots,
    /// Parked workers (see `park`).
    pub(crate) sleepers: Sleepers<task::Runnable>,
    /// `open → closed → stopped` (see `lifecycle`).
    latch: Latch,
    /// Wakes shutdown waiters when a worker exits or the pool stops.
    exits: Exits,
    /// How workers wake the monitor, and what it reports back.
    pub(crate) monitor: MonitorSignal,
    /// Task counters of threads outside the pool (spawns from outside, ends
    /// of tasks dropped outside a worker).
    external: CachePadded<TaskCounters>,
    /// Start latencies of tasks first polled outside a worker.
    external_latency: LatencyRecorder,
    /// Async tasks waiting for a wake, cancelled when the pool stops
    /// (see `waiting`).
    pub(crate) waiting: waiting::WaitingTasks,
    /// Set when workers may hold more slots than there are (the target was
    /// lowered, or an urgent slot was lent): workers check it at each task
    /// boundary and one gives its slot back. A flag, so the common case
    /// costs one load of a line nobody writes.
    pub(crate) shrink: CachePadded<AtomicBool>,
    /// A slot is lent to queued work under the quantum rule (see
    /// `Builder::quantum`): set by the monitor, cleared by it or by the
    /// worker that finds the lent slot would go to computing work.
    quantum_lent: CachePadded<AtomicBool>,
    /// A worker refused the lent slot since the monitor last looked: the
    /// queued work is of a kind known to compute.
    quantum_refused: AtomicBool,
    /// State a higher layer keeps for this pool (see [`Attachment`]).
    attachment: StdMutex<Option<AttachmentRef>>,
    /// The handle that keeps this pool open, for `Pool::current` on its
    /// workers; weak, since the handle owns this state.
    owner: OnceLock<Weak<OpenHandle>>,
    /// When the pool was built: the zero of the monitor's clock and series.
    pub(crate) built_at: Instant,
    /// Blocking events per kind of task, for `Metrics::kinds` (see
    /// `observed`).
    kind_counters: KindCounters,
    /// What this pool has learned per kind of task (see `kinds`, and the
    /// rules in `control::presumption`).
    pub(crate) kinds: kinds::KindTable,
    /// Workers back from a block held until a slot is their own (see
    /// `hold`, `control::hold`).
    pub(crate) holds: hold::Holds,
}

/// State a higher layer keeps per pool, created on first use: the fairness
/// arbiter of groups and pairs. The pool holds it weakly (it holds the pool)
/// and tells it when the pool stops, so what it keeps queued is cancelled.
pub(crate) trait Attachment: Send + Sync + 'static {
    /// The pool stopped: drop whatever waits to be queued in it.
    fn pool_stopped(&self);
}

#[derive(Debug)]
struct AttachmentRef {
    /// For [`Shared::attachment`] to hand out the concrete type.
    any: Weak<dyn Any + Send + Sync>,
    /// For [`Shared::on_stop`].
    hook: Weak<dyn Attachment>,
}

impl std::fmt::Debug for dyn Attachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Attachment")
    }
}

/// Keeps a pool open: held by every `Pool` handle, group and pair. When the
/// last one is dropped the pool closes (and stops once its tasks end).
#[derive(Debug)]
pub(crate) struct OpenHandle {
    shared: Arc<Shared>,
}

impl OpenHandle {
    /// A pool built from `config`, not yet with any thread.
    pub(crate) fn new(config: Config) -> Arc<Self> {
        let handle = Arc::new(OpenHandle {
            shared: Arc::new(Shared::new(config)),
        });
        let _ = handle.shared.owner.set(Arc::downgrade(&handle));
        handle
    }

    /// The handle of the pool whose worker runs on this thread, if any and
    /// if the pool is still open (some handle to it exists).
    pub(crate) fn current() -> Option<Arc<OpenHandle>> {
        context::current()?.shared.owner.get()?.upgrade()
    }

    /// The pool's shared state.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl Drop for OpenHandle {
    fn drop(&mut self) {
        self.shared.close();
        // Nobody can stop the pool now: the wakers the registry holds only
        // keep alive tasks that may never be woken (`runtime::waiting`).
        self.shared.waiting.abandon();
        // So do the wakers the spawning threads keep to free the cells of
        // tasks they spawned (`free_rings`).
        free_rings::let_go_of_kept_futures(Arc::as_ptr(&self.shared).cast());
    }
}

impl Shared {
    /// The pool is idle: its monitor found no task running or queued.
    /// What the spawning threads' free rings keep of its tasks goes
    /// (`free_rings::pool_went_idle`), so that memory follows live
    /// work. Returns false if a thread that spawned since the last call
    /// kept its part: the monitor calls again a while later.
    pub(crate) fn went_idle(&self) -> bool {
        free_rings::pool_went_idle((self as *const Shared).cast())
    }

    fn new(config: Config) -> Self {
        crate::sys::start_tick_calibration();
        Shared {
            lanes: Lanes::new(config.switches.on(Mechanism::HandedOffFifo)),
            threads: Threads::new(config.max_threads),
            slots: Slots::new(config.concurrency),
            sleepers: Sleepers::new(config.max_threads),
            latch: Latch::default(),
            exits: Exits::default(),
            monitor: MonitorSignal::default(),
            external: CachePadded::new(TaskCounters::default()),
            external_latency: LatencyRecorder::default(),
            // A shard per slot and then some: workers rarely share one.
            waiting: waiting::WaitingTasks::new((config.concurrency * 2).clamp(1, 64)),
            shrink: CachePadded::new(AtomicBool::new(false)),
            quantum_lent: CachePadded::new(AtomicBool::new(false)),
            quantum_refused: AtomicBool::new(false),
            attachment: StdMutex::new(None),
            owner: OnceLock::new(),
            built_at: Instant::now(),
            kind_counters: KindCounters::default(),
            kinds: kinds::KindTable::default(),
            holds: hold::Holds::new(
                config.hold && hold::install_signal(&config.thread_name),
                config.hold_after_sections,
                config.max_threads,
            ),
            config,
        }
    }

    /// This pool's attachment of type `T`, created by `create` if there is
    /// none alive.
    pub(crate) fn attachment<T: Attachment>(&self, create: impl FnOnce() -> Arc<T>) -> Arc<T> {
        let mut slot = self.attachment.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = slot.as_ref().and_then(|r| r.any.upgrade()) {
            if let Ok(existing) = existing.downcast::<T>() {
                return existing;
            }
        }
        let created = create();
        let any: Weak<dyn Any + Send + Sync> = Arc::downgrade(&created) as Weak<T>;
        let hook: Weak<dyn Attachment> = Arc::downgrade(&created) as Weak<T>;
        *slot = Some(AttachmentRef { any, hook });
        created
    }

    // ----- queues ------------------------------------------------------------

    /// True if any queue, global or a worker's, holds a task.
    pub(crate) fn has_work(&self) -> bool {
        self.lanes.any_work()
            || self
                .threads
                .used()
                .iter()
                .any(|entry| entry.stealer().is_some_and(|s| !s.is_empty()))
    }

    /// Moves what worker `index`'s deque holds to the lanes' handed-off
    /// FIFO ([`Lanes::hand_off`]: before the normal lane's new arrivals),
    /// oldest first, and returns how many: for a worker that gives way (it
    /// lost its slot while its task blocked, and found none free at the
    /// task's end). Its deque stays stealable, but only a worker that runs
    /// out of work steals, and under load none does: the tasks it queued
    /// after its block waited there for seconds (the lab's `service`,
    /// overloaded: p99 1.8 s and max 2.4 s before, 1.0 s and 1.5 s after,
    /// three rounds). Go's runtime likewise hands a P's run queue on with
    /// the P. A fork-join job moved so is run by whoever takes it, as a
    /// stolen one is. (Doing the same when the monitor marks a worker
    /// blocked changed what the presumption tests' teaching pools learned,
    /// and was left out.)
    pub(crate) fn hand_off_queue(&self, index: usize) -> usize {
        let Some(stealer) = self.threads.entry(index).stealer() else {
            return 0;
        };
        let mut moved = 0;
        while let Some(queued) = retry_until_settled(|| stealer.steal()) {
            self.lanes.hand_off(queued.into_work());
            moved += 1;
        }
        moved
    }

    /// Tasks waiting in queues now.
    pub(crate) fn queued(&self) -> usize {
        self.lanes.len()
            + self
                .threads
                .used()
                .iter()
                .filter_map(Entry::stealer)
                .map(|s| s.len())
                .sum::<usize>()
    }

    /// Drops every queued runnable (their tasks count as cancelled).
    pub(crate) fn drain_queues(self: &Arc<Self>) {
        context::draining(self, || {
            self.lanes.drain(drop);
            for stealer in self.threads.used().iter().filter_map(Entry::stealer) {
                while let Some(item) = retry_until_settled(|| stealer.steal()) {
                    drop(item);
                }
            }
        });
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

    /// True while a slot is lent under the quantum rule.
    pub(crate) fn quantum_lent(&self) -> bool {
        self.quantum_lent.load(Ordering::Relaxed)
    }

    /// The monitor lends a slot under the quantum rule (it raises the
    /// target itself).
    pub(crate) fn lend_for_quantum(&self) {
        self.quantum_lent.store(true, Ordering::Relaxed);
        ThreadCounters::bump(&self.threads.counters.quantum_lends);
    }

    /// The lend is over (the monitor lowers the target itself).
    pub(crate) fn end_quantum_lend(&self) {
        self.quantum_lent.store(false, Ordering::Relaxed);
    }

    /// For a worker about to run a task on the lent slot that tasks of its
    /// kind are known to compute: ends the lend, target back to
    /// `concurrency`. Returns true if this call ended it.
    pub(crate) fn refuse_quantum_lend(&self) -> bool {
        if !self.quantum_lent.swap(false, Ordering::Relaxed) {
            return false;
        }
        self.quantum_refused.store(true, Ordering::Relaxed);
        self.set_target(self.config.concurrency);
        true
    }

    /// For the monitor: whether a worker refused a lent slot since it last
    /// asked.
    pub(crate) fn take_quantum_refusal(&self) -> bool {
        self.quantum_refused.swap(false, Ordering::Relaxed)
    }

    // ----- task accounting -----------------------------------------------------

    /// The counter shard of worker `index`, or the outside threads' shard.
    pub(crate) fn counters(&self, index: Option<usize>) -> &TaskCounters {
        match index {
            Some(index) => &self.threads.entry(index).counters,
            None => &self.external,
        }
    }

    /// Tasks ended so far, however they ended.
    pub(crate) fn task_totals(&self) -> u64 {
        self.external.ended_total()
            + self
                .threads
                .used()
                .iter()
                .map(|e| e.counters.ended_total())
                .sum::<u64>()
    }

    /// Counts a spawn refused because no thread could run it.
    pub(crate) fn no_thread_refusal(&self) {
        ThreadCounters::bump(&self.threads.counters.no_thread_refusals);
    }

    /// Counts a panic caught in the destructor of a task's value.
    pub(crate) fn dropped_panic(&self) {
        ThreadCounters::bump(&self.threads.counters.dropped_panics);
    }

    /// Records a task's queue-to-first-poll latency from outside a worker.
    pub(crate) fn record_start_outside(&self, latency: u64) {
        self.external_latency.record(latency);
    }

    /// For a spawn that has counted itself in `counters`: true if the pool
    /// still accepts tasks; if not, counts the refusal.
    pub(crate) fn admit_spawn(self: &Arc<Self>, counters: &TaskCounters) -> bool {
        if self.latch.accepts() {
            return true;
        }
        counters.refused();
        self.check_drained();
        false
    }

    /// Counts a task's end (on worker `index`, or outside the pool) and, if it
    /// was the last task of a closed pool, stops the pool.
    pub(crate) fn task_ended(self: &Arc<Self>, index: Option<usize>, how: Outcome) {
        self.counters(index).ended(how);
        self.check_drained();
    }

    /// Tasks accepted and not yet ended: the sum over the counter shards.
    pub(crate) fn live(&self) -> usize {
        let live = self.external.live_part()
            + self
                .threads
                .used_seqcst()
                .iter()
                .map(|e| e.counters.live_part())
                .sum::<i64>();
        usize::try_from(live).unwrap_or(0)
    }

    // ----- lifecycle -----------------------------------------------------------

    /// After a count that lowers `live`: if the pool is closed and nothing is
    /// live any more, stop it (see `lifecycle`).
    fn check_drained(self: &Arc<Self>) {
        if self.latch.stop_if_drained(|| self.live()) {
            self.on_stop();
        }
    }

    /// Stops taking new tasks; the pool stops by itself once the last task ends.
    pub(crate) fn close(self: &Arc<Self>) {
        if !self.latch.close() {
            return;
        }
        trace::pool_closed(&self.config.thread_name);
        self.check_drained();
        // Parked workers may now retire below `min_threads`.
        self.monitor.wake();
    }

    /// True once `close` was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.latch.is_closed()
    }

    /// True if the pool's controller replaces blocked workers (and so may
    /// start a task presumed blocking: `worker`).
    pub(crate) fn compensates_blocking(&self) -> bool {
        matches!(
            self.config.controller,
            crate::control::Controller::Adaptive | crate::control::Controller::HillClimbing
        )
    }

    /// True once the pool stopped: workers leave after their current task.
    pub(crate) fn is_stopped(&self) -> bool {
        self.latch.is_stopped()
    }

    /// Moves to `stopped` whether drained or not (a shutdown that timed
    /// out): wakes every worker so they leave, and drops what is queued.
    pub(crate) fn stop(self: &Arc<Self>) {
        if self.latch.stop() {
            self.on_stop();
        }
    }

    /// What the one call that stopped the pool does next.
    fn on_stop(self: &Arc<Self>) {
        trace::pool_stopped(&self.config.thread_name);
        let hook = self
            .attachment
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(|r| r.hook.upgrade());
        if let Some(hook) = hook {
            hook.pool_stopped();
        }
        self.sleepers.stop_all();
        self.monitor.stop();
        self.drain_queues();
        // Tasks waiting for a wake are in no queue: woken, each is
        // scheduled on the stopped pool and dropped there (cancelled).
        self.waiting.cancel_all();
        self.exits.signal();
    }

    /// Called by a worker thread as its last act: gives its entry back and
    /// wakes shutdown waiters. `count_down` is false for a retiring worker,
    /// which took itself off the count when it decided.
    pub(crate) fn worker_exited(&self, index: usize, count_down: bool) {
        self.threads.give_back_entry(index);
        self.exits.signal_after(|| {
            if count_down {
                self.threads.count_exit();
            }
        });
    }

    /// Waits until the pool has stopped and at most `allow_threads` worker
    /// threads are alive, or `deadline` passes. Returns true if it got there.
    pub(crate) fn wait_stopped(&self, deadline: Option<Instant>, allow_threads: usize) -> bool {
        self.exits.wait_until(deadline, || {
            self.is_stopped() && self.threads.alive() <= allow_threads
        })
    }

    // ----- thread hooks ----------------------------------------------------------

    /// Runs a thread hook if one is set, counting a panic in it. `which`
    /// names it in events.
    pub(crate) fn run_hook(&self, hook: Option<&Hook>, which: &'static str) {
        if let Some(hook) = hook {
            if !hook.run() {
                ThreadCounters::bump(&self.threads.counters.hook_panics);
                trace::hook_panicked(&self.config.thread_name, which);
            }
        }
    }

    /// The name of the worker thread on entry `index` (see
    /// `Config::worker_name`), counting a panic of the name function.
    pub(crate) fn worker_name(&self, index: usize) -> String {
        let (name, panicked) = self.config.worker_name(index);
        if panicked {
            ThreadCounters::bump(&self.threads.counters.hook_panics);
            trace::hook_panicked(&self.config.thread_name, "thread_name_fn");
        }
        name
    }

    // ----- metrics -------------------------------------------------------------

    /// A snapshot of every counter.
    pub(crate) fn metrics(&self) -> Metrics {
        let mut m = Metrics::default();
        let mut latency = crate::metrics::new_histogram();
        let shards = || {
            let workers = self.threads.used().iter().map(|entry| &*entry.counters);
            std::iter::once(&*self.external).chain(workers)
        };
        crate::metrics::add_task_counters(shards, &mut m);
        self.external_latency.add_to(&mut latency);
        let (mut running, mut blocked) = (0, 0);
        for entry in self.threads.used() {
            entry.latency.add_to(&mut latency);
            match entry.status.load().phase() {
                Phase::InTask => running += 1,
                Phase::Blocked => blocked += 1,
                Phase::Idle => {}
            }
        }
        m.queued = self.queued() as u64;
        (m.tokio_blocked, m.tokio_counted_again) = self.config.tokio.blocks();
        m.threads = self.threads.alive();
        m.idle_threads = self.sleepers.parked();
        // Capped by the threads alive: a worker that leaves a stopped pool
        // does not hand its slot back (nobody will take it), so after a
        // shutdown the slot count alone said 1 or 2 with no thread left.
        m.running_threads = self.slots.counts().active.max(running).min(m.threads);
        m.blocked_threads = blocked;
        self.threads.counters.fill(&mut m);
        m.detection = if self.compensates_blocking() {
            self.threads.detection()
        } else {
            crate::metrics::Detection::Off
        };
        m.holds_workers = self.holds.in_handler;
        m.concurrency_target = self.slots.target();
        m.concurrency = self.config.concurrency;
        m.concurrency_from = self.config.concurrency_from;
        m.max_threads = self.config.max_threads;
        m.max_threads_from = self.config.max_threads_from;
        m.start_latency =
            crate::metrics::LatencySummary::from_ticks(&latency, crate::sys::nanos_per_tick());
        self.monitor.fill_metrics(&mut m);
        (m.kinds, m.kinds_untracked) = self.kind_figures();
        m.workers = self.worker_figures();
        m
    }
}

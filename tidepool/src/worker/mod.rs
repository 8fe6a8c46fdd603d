//! Worker threads: the run loop (this file: find, run, search, park, give
//! way), and beside it one file per mechanism:
//!
//! * `find`: where a worker looks for work and in which order (the fairness
//!   turns), stealing;
//! * `schedule`: how tasks reach workers (spawn, wake, notify);
//! * `start`: thread starts;
//! * `presumed`: tasks presumed blocking, handed threads of their own, and
//!   the fan-out of a queue of them;
//! * `lend`: the quantum rule's guard on a lent slot;
//! * `urgent`: the short scheduler slice of a worker woken for urgent work;
//! * `declared`: declared blocking sections and waits on the pool;
//! * `help`: helping waits; `coalesce`: the batching wait.
//!
//! The run loop does not know about policies: it publishes its task status
//! at task boundaries, obeys the slot it holds (see `control::slots`), and
//! wakes the monitor when it starts running with a slot taken while the pool
//! may have been idle (see `control::signal`).

mod coalesce;
mod declared;
mod find;
mod help;
mod lend;
mod presumed;
mod schedule;
mod start;
mod urgent;

pub(crate) use declared::{declare_pool_wait, hand_over_declared, DeclaredSection};
pub(crate) use help::{help_until, poll_helping};
pub(crate) use presumed::{presume_queued, start_spare};
pub(crate) use schedule::{
    notify, push_admitted, spawn, spawn_closure, spawn_detached_item, spawn_item,
    wake_or_start_with,
};
pub(crate) use start::{can_run, start_floor};

use crate::metrics::ThreadCounters;
use crate::runtime::context::{self, WorkerContext};
use crate::runtime::park::{self, Idle, Wake};
use crate::runtime::presumed::AtPark;
use crate::runtime::task::Runnable;
use crate::runtime::{Queued, Shared, Work};
use crate::sync::{lock, Arc, Ordering};
use crate::sys::ThreadProbe;
use crate::trace;
use coalesce::Coalescer;
use crossbeam_utils::Backoff;
use find::{find_task, find_task_stealing_with, steal, wait_for_batch};
use presumed::{presumes_blocking, run_presumed_blocking};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

/// How a new worker thread begins (see [`run`]).
pub(crate) enum Begin {
    /// Holding a searching slot reserved by whoever started it.
    Searching,
    /// Holding no slot, with a task presumed blocking (see
    /// `presumed::start_presumed`): it runs the task as if found blocked,
    /// then carries on as any worker whose blocked task ended.
    Presumed(Runnable),
    /// Holding nothing: it parks at once, a spare for the next task
    /// presumed blocking (see `presumed::hand_or_start`).
    Spare,
}

/// The body of a worker thread, begun as `begin` says.
pub(crate) fn run(shared: Arc<Shared>, index: usize, begin: Begin) {
    help::mark_stack_base();
    // The pool's CPUs, not those of the thread that started this one: a
    // mover may have kept that one to a single CPU for a moment.
    if let Some(cpus) = shared.config.cpus {
        if crate::sys::thread_cpus(0) != Some(cpus) {
            crate::sys::set_thread_cpus(0, cpus);
        }
    }
    shared.run_hook(shared.config.on_thread_start.as_ref(), "on_thread_start");
    let entry = shared.threads.entry(index);
    let probe = ThreadProbe::for_current_thread();
    if let Some(mode) = shared.threads.probe_opened(&probe) {
        trace::detection_fell_back(
            &shared.config.thread_name,
            index,
            mode.name(),
            probe.open_error(),
        );
    }
    let probe = Arc::new(probe);
    // Before the probe is published: whoever moves this thread by its
    // probe's id gives it back these CPUs.
    entry
        .hold
        .set_own_cpus(crate::sys::thread_cpus(0).unwrap_or(0));
    *lock(&entry.probe) = Some(Arc::clone(&probe));
    *lock(&entry.thread) = Some(std::thread::current());
    // What the monitor asked of the entry's last thread is not this one's.
    entry.hold.reset();
    let hold_site = crate::runtime::hold::HoldSite {
        shared: &shared,
        index,
    };
    crate::sys::hold_signal::enter(
        (&hold_site as *const crate::runtime::hold::HoldSite<'_>).cast(),
    );
    if shared.holds.in_handler {
        entry.hold.set_timer(
            crate::sys::hold_signal::CpuTimer::for_current_thread(),
            probe.tid(),
            probe.clock_id(),
        );
    }
    let ctx = Rc::new(WorkerContext {
        local: entry.take_deque(),
        shared: Arc::clone(&shared),
        index,
        probe,
        // A thread just started has not waited for a core yet; its CPU
        // so far (its start hook) is not a task's.
        at_park: std::cell::Cell::new(AtPark {
            run_delay: Some(std::time::Duration::ZERO),
            cpu: None,
        }),
        presumed_run: std::cell::Cell::new(None),
        jobs_unannounced: std::cell::Cell::new(0),
    });
    context::enter(Rc::clone(&ctx));

    let mut worker = RunLoop {
        ctx: &ctx,
        tick: entry.status.load().tick(),
        searching: matches!(begin, Begin::Searching),
        coalescer: Coalescer::default(),
        handed: None,
        reactor: WorkerPolls::default(),
    };
    let exit = match begin {
        Begin::Searching => worker.run(),
        Begin::Presumed(task) => worker.run_from_presumed(task),
        Begin::Spare => worker.run_from_spare(),
    };

    context::leave();
    // Before the pool (and the word) may go: nothing holds this thread now.
    crate::sys::hold_signal::leave();
    entry.hold.set_timer(None, 0, None);
    let ctx = Rc::try_unwrap(ctx).unwrap_or_else(|_| unreachable!("context escaped its thread"));
    let leftover = !ctx.local.is_empty();
    entry.return_deque(ctx.local);
    *lock(&entry.probe) = None;
    *lock(&entry.thread) = None;
    if leftover && !shared.is_stopped() {
        // Tasks stay stealable in the entry; make sure somebody looks.
        notify(&shared);
    }
    if shared.is_stopped() {
        shared.drain_queues();
    }
    let reason = match exit {
        Exit::Retire(reason) => reason,
        Exit::Stop => "shutdown",
    };
    let config = &shared.config;
    trace::thread_retired(&config.thread_name, index, reason, config.settings());
    // Before the exit is signalled: `shutdown` returns after the hooks ran.
    shared.run_hook(shared.config.on_thread_stop.as_ref(), "on_thread_stop");
    // A retiring worker took itself off the thread count already.
    shared.worker_exited(index, matches!(exit, Exit::Stop));
}

struct RunLoop<'a> {
    ctx: &'a WorkerContext,
    /// Tasks started by this entry, ever (continues across threads).
    tick: u64,
    /// Whether this worker counts itself in `Slots::searching`.
    searching: bool,
    /// How long to wait before looking again after running dry.
    coalescer: Coalescer,
    /// A task presumed blocking handed to this worker while it was parked
    /// without a slot (`park::Wake::Handed`): run next, without a slot.
    handed: Option<Runnable>,
    /// This worker's part in polling the I/O reactor (`reactor::handoff`):
    /// between tasks while the reactor's thread stands aside. Dropped (the
    /// worker uncounted) when the thread exits.
    reactor: WorkerPolls,
}

#[cfg(unix)]
use crate::reactor::WorkerPolls;

/// Where there is no reactor of tidepool's own (`Async` is async-io's),
/// workers have no part in polling.
#[cfg(not(unix))]
#[derive(Default)]
struct WorkerPolls;

#[cfg(not(unix))]
impl WorkerPolls {
    fn between_tasks(&self, _nothing_queued: impl FnOnce() -> bool) {}
    fn before_idle(&self) -> bool {
        false
    }
    fn sleep(&self) {}
}

/// Why the run loop ended.
enum Exit {
    /// Left the pool: `idle` (idle timeout) or `surplus` (given way).
    Retire(&'static str),
    Stop,
}

impl RunLoop<'_> {
    fn shared(&self) -> &Arc<Shared> {
        &self.ctx.shared
    }

    /// The run loop of a worker started, without a slot, for `task`, a
    /// closure presumed blocking.
    fn run_from_presumed(&mut self, task: Runnable) -> Exit {
        if let Some(exit) = self.run_handed(task) {
            return exit;
        }
        self.run()
    }

    /// The run loop of a spare worker: parked from the start, without a
    /// slot (the stack's protocol allows it: it holds no slot to give back,
    /// so a notifier that pops it must bring one or a task).
    fn run_from_spare(&mut self) -> Exit {
        let shared = Arc::clone(self.shared());
        shared.sleepers.push(self.ctx.index);
        if let Some(exit) = self.park(&shared) {
            return exit;
        }
        self.run()
    }

    /// Runs `task`, a closure presumed blocking that this worker was handed
    /// while it held no slot (at its start, or parked), then, as after any
    /// blocked task, takes a free slot or gives way. `Some` to leave. If
    /// its kind stopped being presumed meanwhile (the monitor found one of
    /// its presumed tasks computing), the task is queued for a slot
    /// instead.
    fn run_handed(&mut self, task: Runnable) -> Option<Exit> {
        let shared = Arc::clone(self.shared());
        if shared.is_stopped() {
            // Queued for the shutdown's drain, which cancels it.
            task.metadata().give_back_presumption(&shared.kinds);
            shared.lanes.requeue(task);
            return Some(Exit::Stop);
        }
        let at_park = self.ctx.at_park.take();
        if task.metadata().take_presumption(&shared.kinds) {
            run_presumed_blocking(self.ctx, task, false, at_park);
            let status = &shared.threads.entry(self.ctx.index).status;
            self.tick = status.load().tick();
            if status.end_task() {
                // The task took a free slot back in a helping wait (a join,
                // `block_on`), or was counted against the slots again (the
                // monitor found it computing), and holds it still: go on
                // with it, unless the pool holds more than it has (this is
                // the task boundary where a surplus slot goes back).
                // (Ignored, the slot leaked: once every slot had, the pool
                // hung.)
                if shared.shrink.load(Ordering::Relaxed) && self.give_slot_back() {
                    return self.give_way();
                }
                if shared.holds.any() && shared.hand_slot_to_held() {
                    // As at any task's end with a slot: a held worker
                    // (started, back from its block) runs on with it
                    // before any new task.
                    return self.give_way();
                }
                return None;
            }
        } else {
            // Its kind was judged computing since it was handed out (its
            // place is given back): it waits for a slot as any other task,
            // before the lane's new arrivals.
            shared.lanes.hand_off(Work::Task(task));
            notify(&shared);
        }
        // With nothing queued, park at once, without a slot: searching with
        // one would spin on a core that a worker just handed a task may be
        // waiting for (the handed items of a stream started 1-3 us later).
        if shared.has_work() && shared.slots.try_acquire(false) {
            shared.monitor.wake();
            None
        } else {
            self.give_way()
        }
    }

    fn run(&mut self) -> Exit {
        loop {
            if self.shared().is_stopped() {
                if let Some(task) = self.handed.take() {
                    // Handed just before the stop: queued for the stop's
                    // drain (`run`), which cancels it and counts it.
                    task.metadata().give_back_presumption(&self.shared().kinds);
                    self.shared().lanes.requeue(task);
                }
                break Exit::Stop;
            }
            if let Some(task) = self.handed.take() {
                if let Some(exit) = self.run_handed(task) {
                    break exit;
                }
                continue;
            }
            if let Some(task) = self.find_task() {
                if let Some(exit) = self.run_found(task) {
                    break exit;
                }
                continue;
            }
            if !self.searching {
                self.shared().slots.start_searching();
                self.searching = true;
                if let Some(task) = self.first_look_after_running_dry() {
                    if let Some(exit) = self.run_found(task) {
                        break exit;
                    }
                    continue;
                }
                // Nothing: on to the search, without looking again at
                // once (its first look, after the coalescer's wait, also
                // sees work that reached a lane meanwhile).
            }
            if let Some(task) = self.search_a_little() {
                // Run here, not pushed on our deque for the next turn: an
                // admitted task there would be served before plain tasks
                // queued on its lane meanwhile (see `runtime::queues`).
                if let Some(exit) = self.run_found(task) {
                    break exit;
                }
                continue;
            }
            if self.reactor.before_idle() {
                // I/O events woke tasks (onto this worker's deque).
                continue;
            }
            if self.shared().waiting.release_if_abandoned() > 0 {
                // The pool's last handle is gone, and tasks that first
                // waited since may be ones nobody can wake: their wakers
                // were dropped, and async-task queued those it could free
                // (onto this worker's deque) to drop their futures.
                continue;
            }
            if let Some(exit) = self.go_idle() {
                break exit;
            }
        }
    }

    /// Runs a task the loop found, and deals with the slot afterwards.
    /// Returns `Some` to leave the loop.
    fn run_found(&mut self, task: Work) -> Option<Exit> {
        let Some(task) = self.keep_lent_slot_from_computing_work(task) else {
            return self.give_way();
        };
        if self.searching {
            self.searching = false;
            // About to run a task with a slot taken since the pool may
            // have been idle: a monitor asleep on an idle pool must
            // watch it (see `control::signal` for the pairing).
            self.shared().monitor.wake();
            if self.shared().slots.stop_searching() && self.shared().has_work() {
                // Last searcher: hand the rest of the burst to one more.
                notify(self.shared());
            }
        }
        let kept_slot = self.run_task(task);
        // A block in the task armed the hold timer: the task is over.
        self.shared()
            .threads
            .entry(self.ctx.index)
            .hold
            .disarm(&self.shared().holds);
        if !kept_slot {
            // Our slot was given away while the task blocked.
            self.shared().worker_returned(self.ctx.index);
            if self.shared().slots.try_acquire(false) {
                self.shared().monitor.wake();
            } else {
                return self.give_way();
            }
        } else if self.shared().shrink.load(Ordering::Relaxed) && self.give_slot_back() {
            return self.give_way();
        } else if self.shared().holds.any() && self.shared().hand_slot_to_held() {
            // A worker held for a slot (back from its block, computing)
            // runs on with ours, before any new task (`control::hold`).
            return self.give_way();
        }
        None
    }

    /// Picks the next task or job (see [`find_task`]).
    fn find_task(&mut self) -> Option<Work> {
        find_task(self.ctx, self.tick.wrapping_add(1), self.searching)
    }

    /// The first look of a worker that ran out of its own work: as
    /// [`find_task`] looks (the lanes at once), but a steal from another
    /// worker's deque first waits the coalescer's wait, and tells it how
    /// many tasks it took (see `coalesce`, "Stealing from a worker that
    /// spawns").
    fn first_look_after_running_dry(&mut self) -> Option<Work> {
        let ctx = self.ctx;
        let coalescer = &mut self.coalescer;
        let mut stole = false;
        let found = find_task_stealing_with(ctx, self.tick.wrapping_add(1), true, |ctx, pick| {
            wait_for_batch(&ctx.shared, coalescer.steal_wait_nanos());
            let stolen = steal(ctx, pick);
            if stolen.is_some() {
                coalescer.stole(1 + ctx.local.len());
                stole = true;
            }
            stolen
        });
        if found.is_some() && !stole {
            coalescer.took_from_lanes();
        }
        found
    }

    /// Runs one task or job (see [`run_work`]) and moves this loop's tick on.
    fn run_task(&mut self, work: Work) -> bool {
        let kept = run_work(self.ctx, work);
        self.reactor
            .between_tasks(|| self.ctx.local.is_empty() && !self.ctx.shared.lanes.any_work());
        self.tick = self
            .ctx
            .shared
            .threads
            .entry(self.ctx.index)
            .status
            .load()
            .tick();
        kept
    }

    /// Before parking, keeps looking for a short, bounded while: spinning,
    /// then yielding the CPU ([`Backoff::snooze`]). Parking and being woken
    /// cost two futex calls and a context switch (~5-10 µs); work that arrives
    /// in a steady stream usually shows up sooner than that. During a dense
    /// stream the first look waits a little so tasks are taken in batches
    /// (see `coalesce`).
    fn search_a_little(&mut self) -> Option<Work> {
        wait_for_batch(self.shared(), self.coalescer.wait_nanos());
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

    /// A searcher found nothing: park until woken. Returns `Some` to leave.
    fn go_idle(&mut self) -> Option<Exit> {
        let shared = Arc::clone(self.shared());
        let work_or_stop = || shared.has_work() || shared.is_stopped();
        match park::go_idle(
            &shared.sleepers,
            &shared.slots,
            self.ctx.index,
            work_or_stop,
        ) {
            Idle::Search(None) => None,
            Idle::Search(Some(task)) => {
                // Handed a task while taking a slot: this worker searches
                // with the slot, and runs the task like any it finds (it
                // gives the slot on if the task starts presumed blocking;
                // it keeps its presumption until then: `run_work`).
                self.ctx.local.push(Queued::from(task));
                None
            }
            Idle::Park => {
                self.searching = false;
                if shared.holds.any() {
                    // The slot just released goes to the oldest held
                    // worker now, not at the monitor's next look (which,
                    // on cores crowded by workers back from their blocks,
                    // came tens of milliseconds late).
                    shared.look_at_held(0, true);
                }
                self.park(&shared)
            }
        }
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
        // `schedule::notify_lane`: seeing the flag means seeing the new counts.
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
        // What this worker queued goes to the lanes, where the workers that
        // hold the slots look: left on its deque, it waited for one of them
        // to run out of work, which under load none does
        // (`Shared::hand_off_queue`).
        shared.hand_off_queue(self.ctx.index);
        shared.sleepers.push(self.ctx.index);
        if shared.has_work() {
            // Other queues may hold work: wake a searcher if a slot is free.
            notify(&shared);
        }
        let exit = self.park(&shared);
        if let Some(Exit::Retire(_)) = exit {
            ThreadCounters::bump(&shared.threads.counters.retired_surplus);
            return Some(Exit::Retire("surplus"));
        }
        exit
    }

    /// Waits on the sleeper stack (the worker is on it and holds no slot).
    fn park(&mut self, shared: &Arc<Shared>) -> Option<Exit> {
        let index = self.ctx.index;
        // Asleep, it polls no more: the reactor's thread may have to.
        self.reactor.sleep();
        // Woken for an urgent task that another worker took first.
        urgent::give_back_urgent_slice(self.ctx);
        // Idle: the finished items its free ring keeps go (memory
        // follows live work; `runtime::free_rings`).
        crate::runtime::free_rings::let_go_here();
        // Its CPU may idle now (`control::placement`).
        shared.pull_a_worker_here(Some(self.ctx.probe.tid()));
        let timeout = Some(shared.config.idle_timeout);
        if shared.compensates_blocking() {
            // Tasks may be handed to this worker while it sleeps: read last
            // before the sleep (see `WorkerContext::at_park`).
            self.ctx.at_park.set(AtPark {
                run_delay: self.ctx.probe.run_delay(),
                cpu: self.ctx.probe.cpu_time(),
            });
        }
        let wake = shared.sleepers.park(index, timeout, || try_retire(shared));
        // Kept to an idle CPU for the wake-up by the monitor: its own
        // CPUs back before any task runs.
        shared.threads.entry(index).hold.give_cpus_back();
        match wake {
            Wake::Woken => {
                self.searching = true;
                None
            }
            Wake::Handed(task) => {
                self.handed = Some(task);
                None
            }
            Wake::Stop => Some(Exit::Stop),
            Wake::TimedOut => {
                ThreadCounters::bump(&shared.threads.counters.retired_idle);
                Some(Exit::Retire("idle"))
            }
        }
    }
}

/// Runs one task or job on the worker of `ctx`. Returns false if the
/// worker's slot was given away while it ran (the monitor saw it blocked, or
/// it declared blocking). To the monitor a job is a task like any other.
fn run_work(ctx: &WorkerContext, work: Work) -> bool {
    let entry = ctx.shared.threads.entry(ctx.index);
    let status = &entry.status;
    match work {
        Work::Task(task) => {
            // For the monitor's record of what this kind of task does
            // (published before the status word that makes it look).
            let kind = task.metadata().kind;
            entry.kind.store(kind.to_bits(), Ordering::Relaxed);
            if presumes_blocking(ctx, &task) {
                // No run-delay read on this path (a file read before the
                // task starts): judged by its CPU share of the wall time.
                run_presumed_blocking(ctx, task, true, AtPark::default());
            } else {
                // Presumed when handed on, it runs with a slot after all.
                task.metadata().give_back_presumption(&ctx.shared.kinds);
                status.begin_task();
                run_task(ctx, task);
            }
        }
        // A job catches its closure's panics itself.
        Work::Job(job) => {
            entry.kind.store(job.kind().to_bits(), Ordering::Relaxed);
            let _span = ctx.shared.task_span(ctx.index, job.kind());
            status.begin_task();
            job.run();
        }
    }
    urgent::give_back_urgent_slice(ctx);
    status.end_task()
}

/// Runs one task (between its status's begin and end) on the worker of
/// `ctx`, inside its `tracing` span (feature `tracing`).
fn run_task(ctx: &WorkerContext, task: Runnable) {
    let _span = ctx.shared.task_span(ctx.index, task.metadata().kind);
    // Only a gated task pays for its gate: one branch for the others.
    let gate = task.gate().cloned();
    // The task wrapper catches panics of the future's poll; this catches
    // whatever else unwinds out of `run` (a panicking waker or scheduler
    // path), so a worker never unwinds. A future whose destructor panics
    // while `async-task` drops it (cancelled) aborts the process: the cell
    // drops it under an abort guard, beyond anyone's reach.
    // `async-task` drops a cancelled future or an untaken output under an
    // abort guard; the wrapper's own destructors catch their panics first
    // (`task::drop_caught`).
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if task.metadata().claim.start() {
            task.run();
        } else {
            // Its handle cancelled it first: dropped unrun (the wrapper
            // counts it cancelled).
            drop(task);
        }
    }));
    if let Some(gate) = gate {
        gate.after_run();
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
    shared.threads.count_retire(floor)
}

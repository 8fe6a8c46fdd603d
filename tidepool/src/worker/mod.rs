//! Worker threads: the run loop and finding work (this file), and how tasks
//! reach workers (`schedule`: spawn, wake, notify, thread starts).
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
//! Four rules keep everything moving: every [`FAIRNESS_INTERVAL`]-th pick
//! starts, in turn, with the normal global lane (work from outside the pool
//! is never starved by local work), with the low lane (plain, then
//! admitted), with the *oldest* task of the worker's own deque (so LIFO
//! never starves the bottom of the deque, even with no thief), or with the
//! admitted tasks (so a stream of plain tasks never starves a group: this
//! turn looks at each lane's admitted FIFO first in a round of its own).
//! With every queue busy, each of the four gets at least one pick in four
//! [`FAIRNESS_INTERVAL`]s per worker, and each lane's admitted FIFO one in
//! twelve.
//!
//! The run loop does not know about policies: it publishes its task status
//! at task boundaries, obeys the slot it holds (see `control::slots`), and
//! wakes the monitor when it starts running with a slot taken while the pool
//! may have been idle (see `control::signal`).

mod coalesce;
mod help;
mod schedule;

pub(crate) use help::{help_until, poll_helping};
pub(crate) use schedule::{
    can_run, declare_pool_wait, hand_over_declared, notify, push_admitted, spawn, spawn_closure,
    spawn_detached_item, spawn_item, start_floor, start_spare, wake_or_start, DeclaredSection,
};

use crate::control::StartReason;
use crate::metrics::ThreadCounters;
use crate::runtime::context::{self, WorkerContext};
use crate::runtime::park::{self, Idle, Wake};
use crate::runtime::presumed::PresumedRun;
use crate::runtime::retry_until_settled;
use crate::runtime::task::Runnable;
use crate::runtime::{Priority, Queued, Shared, Work};
use crate::sync::{lock, Arc, Ordering};
use crate::sys::ThreadProbe;
use crate::trace;
use coalesce::Coalescer;
use crossbeam_deque::Steal;
use crossbeam_utils::Backoff;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// One pick in this many starts with a lower lane. 61 is prime, so it does
/// not fall into step with a program's own periodic patterns, and small
/// enough that outside work waits behind at most 60 local tasks per worker.
pub(crate) const FAIRNESS_INTERVAL: u64 = 61;

/// The fairness picks rotate over this many turns: the normal lane, the low
/// lane, the oldest local task, the admitted tasks.
const FAIRNESS_TURNS: u64 = 4;

/// How a new worker thread begins (see [`run`]).
pub(crate) enum Begin {
    /// Holding a searching slot reserved by whoever started it.
    Searching,
    /// Holding no slot, with a task presumed blocking (see
    /// `schedule::start_presumed`): it runs the task as if found blocked,
    /// then carries on as any worker whose blocked task ended.
    Presumed(Runnable),
    /// Holding nothing: it parks at once, a spare for the next task
    /// presumed blocking (see `schedule::hand_or_start`).
    Spare,
}

/// The body of a worker thread, begun as `begin` says.
pub(crate) fn run(shared: Arc<Shared>, index: usize, begin: Begin) {
    help::mark_stack_base();
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
    *lock(&entry.probe) = Some(Arc::clone(&probe));
    *lock(&entry.thread) = Some(std::thread::current());
    let ctx = Rc::new(WorkerContext {
        local: entry.take_deque(),
        shared: Arc::clone(&shared),
        index,
        probe,
        // A thread just started has not waited for a core yet.
        run_delay_at_park: std::cell::Cell::new(Some(std::time::Duration::ZERO)),
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
        let run_delay_before = self.ctx.run_delay_at_park.take();
        if task.metadata().take_presumption(&shared.kinds) {
            run_presumed_blocking(self.ctx, task, false, run_delay_before);
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
        if !self.run_task(task) {
            // Our slot was given away while the task blocked.
            self.shared().worker_returned(self.ctx.index);
            if self.shared().slots.try_acquire(false) {
                self.shared().monitor.wake();
            } else {
                return self.give_way();
            }
        } else if self.shared().shrink.load(Ordering::Relaxed) && self.give_slot_back() {
            return self.give_way();
        }
        None
    }

    /// The quantum rule's guard (see `Builder::quantum`): while a slot is
    /// lent, a task whose kind is known to compute is not run on it (the
    /// pool would only run more CPU-bound threads than cores). The lend
    /// exists for the work queued behind the computing tasks, so the worker
    /// that picks one looks past it ([`RunLoop::look_past_computing_work`]);
    /// finding only computing work, it ends the lend and gives its slot up,
    /// and returns `None` (the caller gives way). Costs other picks one load
    /// of a line written only when a slot is lent.
    fn keep_lent_slot_from_computing_work(&mut self, work: Work) -> Option<Work> {
        if !computes_on_lent_slot(self.shared(), &work) {
            return Some(work);
        }
        if let Some(found) = self.look_past_computing_work(work) {
            return Some(found);
        }
        let ctx = self.ctx;
        let shared = &ctx.shared;
        // If the monitor ended the lend meanwhile, it lowered the target
        // itself. Either way the target is back at `concurrency`, and this
        // worker's slot is the surplus one.
        shared.refuse_quantum_lend();
        if self.searching {
            self.searching = false;
            shared.slots.stop_searching();
        }
        shared.slots.release();
        notify(shared);
        None
    }

    /// One pass over `first` (computing work just picked), this worker's
    /// deque (the rest of the batch it came with) and then the FIFOs a
    /// worker serves after its deque and the high lane, in their serving
    /// order (the normal lane, its admitted tasks, the low lane, its
    /// admitted tasks), each in queue order: the first item that does not
    /// compute is returned, to run on the lent slot. Every other item goes
    /// to the back of its FIFO in the order it was taken, and a FIFO is
    /// passed over whole (as long as it was before anything was put back),
    /// so it ends in its old order: computing jobs keep their FIFO turn
    /// though a lend looks past them every quantum. Once an item is found,
    /// only the FIFOs that items were put back into are passed over (to
    /// restore their order). A FIFO longer than [`LOOK_PAST_AT_MOST`] is
    /// skipped: its pass would cost more than the lend is worth.
    fn look_past_computing_work(&mut self, first: Work) -> Option<Work> {
        /// The FIFOs of the pass, in serving order: (lane, admitted).
        const FIFOS: [(Priority, bool); 4] = [
            (Priority::Normal, false),
            (Priority::Normal, true),
            (Priority::Low, false),
            (Priority::Low, true),
        ];
        let shared = Arc::clone(self.shared());
        let lanes = &shared.lanes;
        // Their lengths before anything is put back: a pass over more
        // would take the items put back again, out of their order.
        let lengths = FIFOS.map(|(lane, admitted)| lanes.fifo_len(lane, admitted));
        let mut found = None;
        let mut put_back_into = [false; 4];
        let consider = |work: Work, found: &mut Option<Work>, put_back_into: &mut [bool; 4]| {
            if found.is_none() && !computes_on_lent_slot(&shared, &work) {
                *found = Some(work);
                return;
            }
            let fifo = match &work {
                Work::Task(task) => (task.metadata().priority, task.gate().is_some()),
                Work::Job(_) => (Priority::Normal, false),
            };
            if let Some(index) = FIFOS.iter().position(|f| *f == fifo) {
                put_back_into[index] = true;
            }
            match work {
                // Back to its own FIFO: plain or admitted, by its lane.
                Work::Task(task) => lanes.requeue(task),
                job => lanes.push_work(Priority::Normal, job),
            }
        };
        consider(first, &mut found, &mut put_back_into);
        // In the order this worker would run them: its own `pop`. The
        // thieves' end is not the oldest of a batch taken from a lane (the
        // batch is written into the LIFO deque newest first, so that `pop`
        // serves it in lane order): taken from there, a batch's jobs went
        // back to the lane turned around (`[1, 4, 3, 2, 5, ...]` in
        // `tests/control_blocking.rs`, whenever no second pass happened to
        // turn them around again).
        while let Some(work) = self.ctx.local.pop() {
            consider(work.into_work(), &mut found, &mut put_back_into);
        }
        for (index, (lane, admitted)) in FIFOS.into_iter().enumerate() {
            let queued = lengths[index];
            if queued > LOOK_PAST_AT_MOST || (found.is_some() && !put_back_into[index]) {
                continue;
            }
            for _ in 0..queued {
                let next = if admitted {
                    lanes.pop_admitted(lane)
                } else {
                    lanes.pop_one(lane)
                };
                match next {
                    Some(work) => consider(work, &mut found, &mut put_back_into),
                    None => break,
                }
            }
        }
        found
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
        schedule::give_back_urgent_slice(self.ctx);
        if shared.compensates_blocking() {
            // Tasks may be handed to this worker while it sleeps: see
            // `WorkerContext::run_delay_at_park`.
            self.ctx.run_delay_at_park.set(self.ctx.probe.run_delay());
        }
        // Idle: the finished items its free ring keeps go (memory
        // follows live work; `runtime::free_rings`).
        crate::runtime::free_rings::let_go_here();
        let timeout = Some(shared.config.idle_timeout);
        match shared.sleepers.park(index, timeout, || try_retire(shared)) {
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

/// Picks the next task for the worker of `ctx`; `pick` numbers the pick (the
/// worker's next task tick). Outside the search phase only the high lane and
/// the worker's own deque are looked at; a searcher looks everywhere. See
/// the module docs for the order and the fairness turns.
fn find_task(ctx: &WorkerContext, pick: u64, searching: bool) -> Option<Work> {
    find_task_stealing_with(ctx, pick, searching, steal)
}

/// [`find_task`], stealing from other workers' deques with `steal`.
fn find_task_stealing_with(
    ctx: &WorkerContext,
    pick: u64,
    searching: bool,
    steal: impl FnOnce(&WorkerContext, u64) -> Option<Work>,
) -> Option<Work> {
    let shared = &ctx.shared;
    let lanes = &shared.lanes;
    let local = &ctx.local;
    if pick.is_multiple_of(FAIRNESS_INTERVAL) {
        let turn = pick / FAIRNESS_INTERVAL;
        let found = match turn % FAIRNESS_TURNS {
            0 => lanes.pop(Priority::Normal, local),
            1 => lanes
                .pop(Priority::Low, local)
                .or_else(|| lanes.pop_admitted(Priority::Low)),
            2 => oldest_local(ctx),
            _ => lanes.pop_any_admitted(admitted_turn_start(turn)),
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

/// The lane whose admitted FIFO the admitted tasks' fairness turn (`turn`
/// counts fairness picks) looks at first: each lane in its round, so none
/// waits for the others' admitted FIFOs to drain.
fn admitted_turn_start(turn: u64) -> Priority {
    match (turn / FAIRNESS_TURNS) % 3 {
        0 => Priority::Normal,
        1 => Priority::Low,
        _ => Priority::High,
    }
}

/// Waits `wait` nanoseconds (a coalescer's wait), without touching the
/// queues a spawner writes. Ends early when high-priority work or shutdown
/// arrives: only normal and low-priority tasks are ever batched.
fn wait_for_batch(shared: &Shared, wait: u32) {
    if wait == 0 {
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
fn steal(ctx: &WorkerContext, pick: u64) -> Option<Work> {
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
                run_presumed_blocking(ctx, task, true, None);
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
    schedule::give_back_urgent_slice(ctx);
    status.end_task()
}

/// Whether `task` starts presumed blocking (and if so, it holds one of
/// its kind's presumed places: `runtime::kinds::Presumption`): a closure
/// of a kind seen blocking (and never computing) while other work waits,
/// in a pool that replaces blocked workers. Costs every other task a load
/// of its claim, of its place and of its kind's word (a read-mostly line).
fn presumes_blocking(ctx: &WorkerContext, task: &Runnable) -> bool {
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
pub(crate) fn try_presume_blocking(shared: &Shared, task: &Runnable) -> bool {
    could_presume(shared, task) && task.metadata().take_presumption(&shared.kinds)
}

/// The cheap half of a presumption's conditions: a closure (an async task
/// may block in one poll and not the next), in a pool that compensates.
fn could_presume(shared: &Shared, task: &Runnable) -> bool {
    task.metadata().claim.is_closure() && shared.compensates_blocking()
}

/// How many queued tasks presumed blocking a worker that starts one hands
/// a thread each (`fan_out`) before its own. Two: a queue of such tasks
/// then starts as a tree, doubling the threads starting at once each
/// generation (500 items in about nine thread starts' time instead of 500
/// in a row); more would put more serial thread starts before each
/// worker's own task.
const FAN_OUT: usize = 2;

/// The longest FIFO (a lane, or its admitted tasks) a worker on a slot lent
/// by the quantum rule looks through for work that does not compute (see
/// `RunLoop::look_past_computing_work`): each item of the pass is taken and
/// queued again (an injector pop and push, as a spawn's queueing), so a
/// pass costs at most a few thousand of those, once per lend (the monitor
/// offers one every quantum while computing work holds every slot). Not
/// measured by itself.
const LOOK_PAST_AT_MOST: usize = 1024;

/// Whether `work` is a task of a kind known to compute picked while a slot
/// is lent under the quantum rule (see
/// `RunLoop::keep_lent_slot_from_computing_work`).
fn computes_on_lent_slot(shared: &Shared, work: &Work) -> bool {
    match work {
        Work::Task(task) => {
            shared.quantum_lent() && shared.kinds.likely_computes(task.metadata().kind)
        }
        Work::Job(job) => shared.quantum_lent() && shared.kinds.likely_computes(job.kind()),
    }
}

/// Hands up to [`FAN_OUT`] queued tasks presumed blocking to parked
/// workers or new threads, stopping at the first task that is not presumed
/// blocking. Takes one task at a time, from the top of this worker's deque,
/// the normal lane, then another worker's deque: a batch taken into this
/// deque would sit there while this worker blocks, out of reach of the
/// threads it starts (they fan out from the shared queues too).
fn fan_out(ctx: &WorkerContext) {
    let shared = &ctx.shared;
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
                if let Some(task) = schedule::hand_or_start(shared, task) {
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
                match schedule::hand_or_start(shared, task) {
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

/// Steals one task (not a batch) from another worker's deque, starting at
/// a victim that depends on `pick`.
fn steal_one(ctx: &WorkerContext, pick: u64) -> Option<Work> {
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

/// Runs a task presumed blocking (see `control::presumption`): it runs
/// without a slot, as if the monitor had found it blocked. A worker that
/// `held_slot` gives it on to the queued work at once: a burst of blocking
/// items then starts a thread each in a chain (each worker hands its slot
/// to the next) instead of waiting for the monitor's look at each. The
/// entry is marked with the task (`Entry::presumed`), so the monitor judges
/// it while it runs: one that keeps a core busy instead is counted against
/// the slots again, and its kind stops being presumed at once
/// (`runtime::presumed`).
fn run_presumed_blocking(
    ctx: &WorkerContext,
    task: Runnable,
    held_slot: bool,
    run_delay_before: Option<Duration>,
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
    if held_slot {
        shared.slots.release();
        schedule::notify_for(shared, StartReason::Presumed);
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
        run_delay_before,
    )));
    run_task(ctx, task);
    // The task's end judged it (`context::count_task_end`), unless it was
    // dropped unrun (its handle cancelled it first): judged here, short.
    ctx.end_presumed_run();
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

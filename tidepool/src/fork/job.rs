//! Jobs: closures that may borrow from their waiter's stack, queued in the
//! pool and run exactly once.
//!
//! Two kinds, one rule (the waiter outlives the job):
//!
//! * [`StackJob`] (for `join`'s second half, and for a join or scope started
//!   outside the pool): lives in the waiter's frame and is queued as a bare
//!   [`JobRef`], so a join allocates nothing. Whoever takes the entry out of
//!   a deque or lane (a thief, or the waiter popping it back) owns the run;
//!   the waiter does not return before the job is done, abandoned (then it
//!   runs the closure itself), or popped back by itself.
//! * [`Job`] (for scope tasks, which outlive the spawning call): an `Arc`
//!   queued as a task, claimed under a mutex by a worker or by the scope's
//!   owner, following the protocol below. (A scope task costs allocations a
//!   stack job does not; scope spawns are rarer than joins.)
//!
//! This module and `runtime::work` are the only ones besides `sys` with
//! `unsafe`: the lifetime erasure that lets a queued job refer to a stack
//! frame, and the accesses to a stack job's cells that the queue's
//! ownership makes exclusive. Every unsafe block says which rule it relies
//! on.
//!
//! # The protocol of a [`Job`]
//!
//! * The scope's owner makes each job with an [`erase`]d closure, queues it
//!   with [`submit`] and keeps it in the scope's list, and does not return
//!   (nor unwind) before the scope's pending count reached zero: each job's
//!   closure decrements it as its very last act.
//! * The closure is taken out of the job under its mutex, so it is run (or
//!   dropped) at most once: a claim that finds it gone does nothing, and a
//!   task dropped unrun ([`JobRunner`]'s drop) only wakes the owner, leaving
//!   the closure for the owner to claim from its list.
//! * What outlives the scope (the `Arc<Job>` a queued task still holds)
//!   contains no borrowed data any more: the closure slot is empty.

use crate::runtime::kinds::Kind;
use crate::runtime::{context, Entry, JobRef, JobSlot, Priority, Queued, Shared, Work};
use crate::sync::Mutex;
use crate::sync::{lock, Arc};
use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, Ordering};
use std::thread::{self, Thread};
use std::time::Duration;

/// A [`StackJob`] not yet taken out of its queue.
const PENDING: u8 = 0;
/// A worker ran it; the result is in its cell.
const DONE: u8 = 1;
/// Its queue entry was dropped unrun; the waiter runs it.
const ABANDONED: u8 = 2;

/// Who waits for a [`StackJob`], to be woken when it is done.
#[derive(Clone)]
pub(super) enum Waiter<'w> {
    /// A worker of the job's pool (its entry): waking it takes no reference
    /// count, and the entry outlives the thief, which holds the pool.
    Worker(&'w Entry),
    /// A thread outside the pool.
    Thread(Thread),
}

impl Waiter<'_> {
    fn wake(&self) {
        match self {
            Waiter::Worker(entry) => entry.unpark(),
            Waiter::Thread(thread) => thread.unpark(),
        }
    }
}

/// `join`'s second half (or a whole join or scope started outside the
/// pool), living in the waiter's frame. See the module docs.
pub(super) struct StackJob<'w, F, R> {
    /// The closure, until the one owner of the run takes it.
    func: UnsafeCell<Option<F>>,
    /// Its result, written by a worker that ran it, read by the waiter
    /// after it saw `DONE`.
    result: UnsafeCell<Option<thread::Result<R>>>,
    /// `PENDING`, `DONE` or `ABANDONED`.
    state: AtomicU8,
    /// Woken when the state leaves `PENDING`.
    waiter: Waiter<'w>,
    /// The kind of the work that forked it ([`StackJob::new`]).
    kind: Kind,
    /// Forked inside `tidepool::isolate`: a thief runs it isolated too
    /// (`worker::help`, "Isolated waits").
    isolated: bool,
    /// What its queue entry points to ([`JobSlot`]).
    slot: JobSlot,
}

// SAFETY: the cells are only touched by the one thread that owns the run
// (the thread that took the job's queue entry, or the waiter once the entry
// is gone: popped back, or abandoned), and the result is handed from that
// thread to the waiter through the Release/Acquire of `state`. So sharing a
// `&StackJob` between threads is sound when `F` and `R` may be sent.
unsafe impl<F: Send, R: Send> Sync for StackJob<'_, F, R> {}

impl<'w, F, R> StackJob<'w, F, R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    /// A job for `func`, whose waiter is `waiter` (the calling thread), of
    /// kind `kind`: the kind of the task or job that forks it, so a worker
    /// that steals it runs more of the same work as far as the monitor and
    /// the quantum rule are concerned. (Its own closure's type would be a
    /// kind nobody had seen run yet: a slot lent under the quantum rule took
    /// it, and a recursion that computed on `concurrency(1)` ran on two
    /// cores.) The job is isolated if the calling thread's waits are
    /// (`context::isolated`).
    pub(super) fn new(func: F, waiter: Waiter<'w>, kind: Kind) -> Self {
        StackJob {
            func: UnsafeCell::new(Some(func)),
            result: UnsafeCell::new(None),
            state: AtomicU8::new(PENDING),
            waiter,
            kind,
            isolated: context::isolated(),
            slot: JobSlot::default(),
        }
    }

    /// The queue entry for this job.
    ///
    /// # Safety
    ///
    /// The caller (the waiter) must not let the job go out of scope before
    /// [`StackJob::wait`] or [`StackJob::wait_outside`] returned, and must
    /// make only one entry.
    pub(super) unsafe fn entry(&self) -> JobRef {
        // SAFETY: `JobRef::new`'s contract is the caller's: the job stays in
        // the waiter's frame until a wait returned, which is after `run` or
        // `abandon` stopped touching it (they read everything they need
        // before their last store to `state`).
        unsafe { JobRef::new(self, &self.slot) }
    }

    /// Runs the closure on this thread.
    ///
    /// # Safety
    ///
    /// The caller owns the run: it took the job's entry out of its queue
    /// (and forgot it), or saw the entry abandoned.
    unsafe fn run_here(&self) -> thread::Result<R> {
        // SAFETY: the caller owns the run, so nobody else touches `func`.
        let func = unsafe { (*self.func.get()).take() };
        let func = func.expect("a job's closure runs once");
        catch_unwind(AssertUnwindSafe(func))
    }

    /// For the waiter, on one of the pool's workers: the job's result. Pops
    /// the job back and runs it here if it is still on top of this worker's
    /// deque (the common case: nobody stole it); else helps the pool until
    /// the thief is done (or runs it here if it was abandoned).
    #[inline]
    pub(super) fn wait(&self, ctx: &context::WorkerContext) -> thread::Result<R> {
        match ctx.local.pop().map(Queued::into_work) {
            Some(Work::Job(entry)) if entry.is(&self.slot) => {
                entry.take_back();
                // SAFETY: we took our own entry out of the deque.
                return unsafe { self.run_here() };
            }
            Some(other) => ctx.local.push(Queued::from(other)),
            None => {}
        }
        if self.isolated {
            if let Some(result) = self.dig_out(ctx) {
                return result;
            }
        }
        self.wait_for_thief()
    }

    /// For an isolated waiter whose job was not on top of its deque (the
    /// first half left work queued above it): looks through the deque for
    /// the job without running anything else, and runs it here if found.
    /// What was above it goes back in its order. `None` if a thief has it.
    /// An isolated wait must not depend on another thread for work it can
    /// reach: on a pool that cannot add one (`Controller::Fixed` on one
    /// thread) the job would wait forever beneath the queued work.
    #[cold]
    #[inline(never)]
    fn dig_out(&self, ctx: &context::WorkerContext) -> Option<thread::Result<R>> {
        let mut above = Vec::new();
        let mut found = false;
        while let Some(queued) = ctx.local.pop() {
            match queued.into_work() {
                Work::Job(entry) if entry.is(&self.slot) => {
                    entry.take_back();
                    found = true;
                    break;
                }
                other => above.push(other),
            }
        }
        for work in above.into_iter().rev() {
            ctx.local.push(Queued::from(work));
        }
        // SAFETY: we took our own entry out of the deque.
        found.then(|| unsafe { self.run_here() })
    }

    /// [`StackJob::wait`] once another worker took the job: helps until
    /// it is done. Out of line, so the common join (its job popped back)
    /// inlines only the pop: a wait of every level's call overhead
    /// included cost ~44 instructions a join (callgrind, fib(24) a join
    /// per call on `concurrency(1)`: 57.8M before inlining, 48.0M after).
    #[cold]
    #[inline(never)]
    fn wait_for_thief(&self) -> thread::Result<R> {
        let settled = || self.state.load(Ordering::Acquire) != PENDING;
        if !crate::worker::help_until(settled) {
            crate::worker::declare_pool_wait();
            while !settled() {
                thread::park_timeout(Duration::from_millis(10));
            }
        }
        self.settled_result()
    }

    /// Whether the job is spent: its closure taken (run, here or by a
    /// thief) and no result left in its cell, as every job is once its
    /// wait returned. For `join_here`, which then leaves it undropped.
    pub(super) fn is_spent(&self) -> bool {
        // SAFETY: called after the wait returned, so nobody else touches
        // the cells: the entry was popped back, or its thief stored `DONE`
        // as its last act, or it was abandoned and run here.
        unsafe { (*self.func.get()).is_none() && (*self.result.get()).is_none() }
    }

    /// For a waiter that is not one of the pool's workers.
    pub(super) fn wait_outside(&self) -> thread::Result<R> {
        while self.state.load(Ordering::Acquire) == PENDING {
            // Woken by `run` or `abandon`; the timeout only guards against
            // a lost unpark token.
            thread::park_timeout(Duration::from_millis(10));
        }
        self.settled_result()
    }

    /// The result once the state left `PENDING`.
    fn settled_result(&self) -> thread::Result<R> {
        match self.state.load(Ordering::Acquire) {
            // SAFETY: `DONE` (Acquire) means the worker that ran the job has
            // written the result and will not touch the job again.
            DONE => unsafe { (*self.result.get()).take() }.expect("a done job has a result"),
            // SAFETY: an abandoned job's entry is gone: the run is ours.
            _ => unsafe { self.run_here() },
        }
    }
}

impl<F, R> crate::runtime::Job for StackJob<'_, F, R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    fn run(&self) {
        // SAFETY: `JobRef::run` is called by the one thread that took the
        // job's entry out of a queue: it owns the run.
        let run = || unsafe { self.run_here() };
        // Its waiter waits isolated, so must whatever it waits on (the
        // waiter itself runs the job isolated when it pops it back).
        let result = if self.isolated {
            context::isolated_while(run)
        } else {
            run()
        };
        // SAFETY: as above; the waiter reads the cell only after `DONE`.
        unsafe { *self.result.get() = Some(result) };
        let waiter = self.waiter.clone();
        // Release: the waiter that sees `DONE` sees the result. After this
        // store the waiter may return and the job be gone: no more access.
        self.state.store(DONE, Ordering::Release);
        waiter.wake();
    }

    fn kind(&self) -> Kind {
        self.kind
    }

    fn abandon(&self) {
        let waiter = self.waiter.clone();
        self.state.store(ABANDONED, Ordering::Release);
        waiter.wake();
    }
}

/// Queues `entry` in `shared`'s pool: on this worker's deque when called on
/// one of its workers (where idle workers steal it), else on the normal lane;
/// then makes sure somebody will look.
///
/// # Which pushes announce the job
///
/// Announcing (`worker::notify`) costs a full fence and a read of the slot
/// counts, which idle workers write; a fine-grained recursion pays it at
/// every `join`. On a worker, a job pushed onto a deque that already held
/// work is not announced, except every [`ANNOUNCE_EVERY`]th such push:
///
/// * no job is lost: the pushing worker is awake, inside the task or job
///   that waits for this one, and that wait pops its own deque first and
///   then helps (`StackJob::wait`), so it runs the job itself if nobody
///   steals it; and if that task blocks instead, the monitor gives its slot
///   away and wakes a worker while work waits, as for any queued work;
/// * parallelism is not lost for long: the push that made the deque
///   non-empty was announced (a searcher was woken, or one was searching,
///   or every slot was busy and a freed slot's worker looks at the queues
///   before it parks), and a searcher that finds work wakes one more while
///   work remains (`RunLoop::run_found`). What an unannounced push can miss
///   is a worker parking at that instant whose last look, unordered with
///   the push, saw the deque empty; the next announced push, at most
///   [`ANNOUNCE_EVERY`] later, wakes it.
///
/// `tidepool-lab fork-join --only fine-join,fine-rayon --repeat 5` (fib(30),
/// a join per call), the binaries before and after this rule in turn,
/// eight processes each: 1.59x rayon's time (1.29-2.03) against 1.76x
/// (1.63-1.90); docs/measurements.md, "A join's job announced once per
/// sixteen pushes onto a busy deque".
#[inline]
pub(super) fn push(shared: &Arc<Shared>, ctx: Option<&context::WorkerContext>, entry: JobRef) {
    match ctx {
        Some(ctx) => {
            let held_work = !ctx.local.is_empty();
            ctx.local.push(Queued::from(Work::Job(entry)));
            if held_work {
                let unannounced = ctx.jobs_unannounced.get() + 1;
                if unannounced < ANNOUNCE_EVERY {
                    ctx.jobs_unannounced.set(unannounced);
                    return;
                }
            }
            ctx.jobs_unannounced.set(0);
        }
        None => shared.lanes.push_work(Priority::Normal, Work::Job(entry)),
    }
    crate::worker::notify(shared);
}

/// At most this many jobs in a row are pushed onto a worker's non-empty
/// deque without an announcement (see [`push`]): a worker that parked
/// unordered with a push waits at most this many more joins of the pusher
/// (not measured: the race is rare), and the fence is paid on one `join`
/// in sixteen. Only 16 was measured (and "never", within one binary:
/// docs/measurements.md).
const ANNOUNCE_EVERY: u32 = 16;

/// A closure whose borrows the job protocol keeps alive (see the module
/// docs). It must not panic: callers wrap their code in `catch_unwind`.
pub(super) type ErasedFn = Box<dyn FnOnce() + Send + 'static>;

/// Erases the lifetime of `f` so a pool task can hold it.
///
/// # Safety
///
/// The caller puts `f` in a [`Job`] at once and follows the job protocol of
/// the module docs: it does not let anything `f` borrows go out of scope
/// before the job's closure was run or dropped (claimed and run by the
/// caller, or `is_done`, or its scope's pending count at zero).
pub(super) unsafe fn erase<'a>(f: Box<dyn FnOnce() + Send + 'a>) -> ErasedFn {
    // SAFETY: the two types differ only in the trait object's lifetime
    // bound, so they have the same layout (a data pointer and a vtable
    // pointer). Extending the bound is sound because the caller keeps every
    // borrow of `f` alive until `f` has been run or dropped (this function's
    // contract, met by the job protocol).
    unsafe {
        std::mem::transmute::<Box<dyn FnOnce() + Send + 'a>, Box<dyn FnOnce() + Send + 'static>>(f)
    }
}

/// A scope task: run exactly once, by a worker that picked its queued task
/// or by the scope's owner. See the module docs.
pub(super) struct Job {
    /// The closure until somebody claims it.
    func: Mutex<Option<ErasedFn>>,
    /// The scope's owner: woken when the queued task is dropped unrun, so it
    /// claims the job itself.
    owner: Thread,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job").finish_non_exhaustive()
    }
}

impl Job {
    /// A job for `func`, in a scope owned by `owner`.
    pub(super) fn new(func: ErasedFn, owner: Thread) -> Arc<Job> {
        Arc::new(Job {
            func: Mutex::new(Some(func)),
            owner,
        })
    }

    /// Takes the closure if nobody has: the caller must run it.
    pub(super) fn claim(&self) -> Option<ErasedFn> {
        lock(&self.func).take()
    }
}

/// What the pool's task holds: runs the job if it is still unclaimed; wakes
/// the owner if the task is dropped unrun (the owner then claims it).
struct JobRunner(Arc<Job>);

impl JobRunner {
    fn run(self) {
        if let Some(func) = self.0.claim() {
            func();
        }
    }
}

impl Drop for JobRunner {
    fn drop(&mut self) {
        if lock(&self.0.func).is_some() {
            self.0.owner.unpark();
        }
    }
}

/// Queues a task that runs `job` in `shared`'s pool: on the current worker's
/// deque when called on one of its workers, else on the normal lane. If the
/// pool refuses it (closed), the task is dropped at once and the scope's
/// owner runs the job. The task is of kind `kind` (its closure's), not of
/// its future's type, which every scope task shares: one scope's tasks
/// seen blocking would have had every other scope's presumed blocking.
pub(super) fn submit(shared: &Arc<Shared>, job: &Arc<Job>, kind: Kind) {
    let runner = JobRunner(Arc::clone(job));
    // The handle is dropped at once: the item runs detached.
    let _ = crate::worker::spawn_item(shared, move || runner.run(), kind, Priority::Normal);
}

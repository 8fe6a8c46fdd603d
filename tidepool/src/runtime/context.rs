//! The thread-locals several layers read: which pool's worker runs on this
//! thread (set by the worker layer, read by spawning, scheduling, task
//! accounting and `blocking`), which pool is dropping its queued tasks
//! here, and whether waits here are isolated (`tidepool::isolate`).
//!
//! Every access uses `try_with`: a user's thread-local destructor may spawn,
//! wake or drop a task after these locals are gone, and a panic there would
//! abort the process (it would happen in a destructor).

use super::presumed::PresumedRun;
use super::task::Runnable;
use super::waiting::{Registered, WaitingKey};
use super::work::Queued;
use super::Shared;
use crate::metrics::Outcome;
use crate::sync::Arc;
use crossbeam_deque::Worker;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Waker;

/// The worker running on this thread.
#[derive(Debug)]
pub(crate) struct WorkerContext {
    /// The worker's pool.
    pub(crate) shared: Arc<Shared>,
    /// The worker's entry index.
    pub(crate) index: usize,
    /// The owning end of the worker's deque.
    pub(crate) local: Worker<Queued>,
    /// The worker's probe (the same the monitor reads through the entry),
    /// kept here so the worker reads its own CPU clock without the entry's
    /// lock.
    pub(crate) probe: Arc<crate::sys::ThreadProbe>,
    /// The thread's run delay (its time spent runnable, waiting for a
    /// core) and CPU time as it last parked, in pools that hand tasks to
    /// parked workers (a run delay of zero and no CPU time at its start:
    /// its start hook's CPU is not a task's). A task presumed blocking is
    /// judged against them at its end (`runtime::presumed`); handed to the
    /// worker, it starts without a file read and a read of the thread's
    /// CPU clock (a system call, about a microsecond on the lab's
    /// machine). The wake-up between the reads and the task is far below
    /// what a presumed task is judged by (a monitor interval). Taken (left
    /// empty) by the task it is handed.
    pub(crate) at_park: std::cell::Cell<crate::runtime::presumed::AtPark>,
    /// The task presumed blocking that this worker runs now, if any: its
    /// end ([`count_task_end`]) records the verdict on its kind before its
    /// output reaches its handle. Set aside while the task helps the pool
    /// (`worker::help_until`), so a task it runs meanwhile is not taken
    /// for it.
    pub(crate) presumed_run: std::cell::Cell<Option<PresumedRun>>,
    /// Fork-join jobs pushed onto a non-empty deque since this worker last
    /// announced one to the parked workers (`fork::job::push`).
    pub(crate) jobs_unannounced: std::cell::Cell<u32>,
}

impl WorkerContext {
    /// Judges the presumed task this worker runs, if it has not been
    /// judged yet (see [`PresumedRun::end`]).
    pub(crate) fn end_presumed_run(&self) {
        if let Some(run) = self.presumed_run.take() {
            run.end(&self.shared, &self.probe);
        }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<WorkerContext>>> = const { RefCell::new(None) };
    /// Whether waits on this thread are isolated: inside
    /// `tidepool::isolate`, or running a fork-join job started inside one.
    static ISOLATED: Cell<bool> = const { Cell::new(false) };
    /// The pool dropping its queued runnables on this thread, if any.
    static DRAINING: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
    /// The pool whose `block_on` runs on this (non-worker) thread, if any.
    static ENTERED: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
}

/// Runs `f` with `shared` as the pool that free functions (`tidepool::spawn`
/// and friends) use on this thread, unless it is a worker (whose own pool
/// comes first). For `Pool::block_on` from outside the pool.
pub(crate) fn entered<R>(shared: &Arc<Shared>, f: impl FnOnce() -> R) -> R {
    let previous = ENTERED
        .try_with(|e| e.borrow_mut().replace(Arc::clone(shared)))
        .ok()
        .flatten();
    // Restored even if `f` unwinds.
    struct Restore(Option<Arc<Shared>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            let _ = ENTERED.try_with(|e| *e.borrow_mut() = previous);
        }
    }
    let _restore = Restore(previous);
    f()
}

/// Whether a pool's `block_on` runs on this thread (see [`entered`]).
pub(crate) fn in_block_on() -> bool {
    ENTERED.try_with(|e| e.borrow().is_some()).unwrap_or(false)
}

/// Runs `f` with the pool free functions use on this thread: the pool of the
/// worker running here, else the pool whose `block_on` runs here, else
/// `fallback`.
pub(crate) fn with_current_pool<R>(
    fallback: impl FnOnce() -> Arc<Shared>,
    f: impl FnOnce(&Arc<Shared>) -> R,
) -> R {
    if let Some(ctx) = current() {
        return f(&ctx.shared);
    }
    let entered = ENTERED.try_with(|e| e.borrow().clone()).ok().flatten();
    match entered {
        Some(shared) => f(&shared),
        None => f(&fallback()),
    }
}

/// Whether a wait on this thread must run only the work it waits for
/// (`tidepool::isolate`; see `worker::help`, "Isolated waits").
#[inline]
pub(crate) fn isolated() -> bool {
    ISOLATED.try_with(Cell::get).unwrap_or(false)
}

/// Runs `f` with this thread's waits isolated (see [`isolated`]), then
/// puts back what was before, even if `f` unwinds.
pub(crate) fn isolated_while<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = ISOLATED.try_with(|isolated| isolated.set(self.0));
        }
    }
    let _restore = Restore(ISOLATED.try_with(|i| i.replace(true)).unwrap_or(false));
    f()
}

/// Makes `context` this thread's worker until [`leave`].
pub(crate) fn enter(context: Rc<WorkerContext>) {
    CURRENT.with(|current| *current.borrow_mut() = Some(context));
}

/// Ends [`enter`].
pub(crate) fn leave() {
    let _ = CURRENT.try_with(|current| current.borrow_mut().take());
}

/// Runs `f` with the worker running on this thread, of any pool (`None`
/// on any other thread), borrowed: no reference count is touched, which
/// is what a recursive `join` pays for at every level. The borrow may be
/// held across user code (a join's closures): the context is only
/// replaced by [`enter`] and [`leave`], which the worker's loop calls
/// before and after it runs anything.
#[inline]
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&WorkerContext>) -> R) -> R {
    let mut f = Some(f);
    let ran = CURRENT.try_with(|current| f.take().map(|f| f(current.borrow().as_deref())));
    match (ran, f) {
        (Ok(Some(value)), _) => value,
        // This thread's locals are being destroyed: no worker runs here.
        (_, Some(f)) => f(None),
        (Err(_) | Ok(None), None) => unreachable!("`f` ran, or is still here"),
    }
}

/// The worker running on this thread, of any pool.
pub(crate) fn current() -> Option<Rc<WorkerContext>> {
    CURRENT
        .try_with(|current| current.borrow().clone())
        .ok()
        .flatten()
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

/// True if a wait for `shared` to stop would wait for the calling thread
/// itself: the thread is one of the pool's workers, or it is dropping the
/// pool's queued tasks (a destructor run by the drain of a stopping pool, on
/// a worker leaving it or on the thread whose shutdown stopped it).
pub(crate) fn waits_on_itself(shared: &Shared) -> bool {
    let draining = DRAINING
        .try_with(|d| {
            d.borrow()
                .as_ref()
                .is_some_and(|d| std::ptr::eq(Arc::as_ptr(d), shared))
        })
        .unwrap_or(false);
    draining || current_index(shared).is_some()
}

/// Pushes `runnable` on the current thread's deque if it is a worker of
/// `shared` and `control::spawn_order` says so (a closure always, a future
/// only onto an empty deque); gives it back otherwise, for the lane.
///
/// The runnable stays outside the closure: on a thread whose locals are being
/// destroyed `try_with` fails, and such a thread is no worker, so the task
/// must come back to go to a global lane rather than be dropped.
pub(crate) fn push_local(shared: &Arc<Shared>, runnable: Runnable) -> Option<Runnable> {
    let mut runnable = Some(runnable);
    let _ = CURRENT.try_with(|current| {
        if let Some(ctx) = &*current.borrow() {
            let is_future = matches!(runnable, Some(Runnable::Future(_)));
            if Arc::ptr_eq(&ctx.shared, shared)
                && crate::control::spawn_order::to_own_deque(is_future, || ctx.local.is_empty())
            {
                if let Some(runnable) = runnable.take() {
                    ctx.local.push(Queued::from(runnable));
                }
            }
        }
    });
    runnable
}

/// Runs `f` with the pool a task belongs to, when that task's future is being
/// polled or dropped on this thread: the pool draining its queues here, or
/// else the pool whose worker this is (a runnable only ever runs on its own
/// pool's workers). `f` also gets the worker's entry index, if any.
///
/// On a thread whose locals are being destroyed (a user's thread-local
/// destructor made a stopped pool drop tasks here) `f` is not called: the
/// end is not counted, rather than panic in a destructor.
pub(crate) fn with_task_pool(f: impl FnOnce(&Arc<Shared>, Option<usize>)) {
    let draining = DRAINING.try_with(|d| d.borrow().clone()).ok().flatten();
    if let Some(shared) = draining {
        return f(&shared, current_index(&shared));
    }
    with_current(|ctx| {
        if let Some(ctx) = ctx {
            f(&ctx.shared, Some(ctx.index));
        }
    });
}

/// Runs `f` (which drops runnables of `shared`) with `shared` marked as the
/// pool draining on this thread, for [`with_task_pool`].
pub(crate) fn draining<R>(shared: &Arc<Shared>, f: impl FnOnce() -> R) -> R {
    let previous = DRAINING
        .try_with(|d| d.borrow_mut().replace(Arc::clone(shared)))
        .ok()
        .flatten();
    let result = f();
    let _ = DRAINING.try_with(|d| *d.borrow_mut() = previous);
    result
}

/// Counts a task's end in the pool it belongs to (see [`with_task_pool`]).
/// A task that finished on a worker running it presumed blocking is judged
/// first ([`WorkerContext::end_presumed_run`]): whoever sees the output
/// then sees the verdict too. Not a cancelled task: one dropped here while
/// the presumed task runs (its handle cancelled by the presumed task) is
/// not the one presumed.
pub(crate) fn count_task_end(outcome: Outcome) {
    let draining = DRAINING.try_with(|d| d.borrow().clone()).ok().flatten();
    if let Some(shared) = draining {
        return shared.task_ended(current_index(&shared), outcome);
    }
    with_current(|ctx| {
        if let Some(ctx) = ctx {
            if outcome != Outcome::Cancelled {
                ctx.end_presumed_run();
            }
            ctx.shared.task_ended(Some(ctx.index), outcome);
        }
    });
}

/// Registers `waker`, of a task that just returned `Pending`, with the
/// pool it belongs to (`runtime::waiting`); `None` outside any pool.
pub(crate) fn register_waiting(waker: &Waker) -> Option<Registered> {
    let mut registered = None;
    with_task_pool(|shared, index| {
        registered = Some(shared.waiting.register(index.unwrap_or(0), waker));
    });
    registered
}

/// Removes a task that ended from its pool's waiting tasks.
pub(crate) fn deregister_waiting(key: WaitingKey) {
    with_task_pool(|shared, _| shared.waiting.deregister(key));
}

/// Records a task's queue-to-first-poll latency, in `sys::ticks`: in the
/// worker's entry, or in the pool's recorder for outside threads.
pub(crate) fn record_start(latency: u64) {
    let recorded = CURRENT
        .try_with(|current| match &*current.borrow() {
            Some(ctx) => {
                ctx.shared.threads.entry(ctx.index).latency.record(latency);
                true
            }
            None => false,
        })
        .unwrap_or(false);
    if !recorded {
        with_task_pool(|shared, _| shared.record_start_outside(latency));
    }
}

//! Fork-join: [`join`](crate::join) and [`scope`](crate::scope), whose
//! closures may borrow from the caller's stack, and the parallel loops built
//! on them.
//!
//! On a worker of the pool, `join(a, b)` queues `b` as a [`job`] that lives
//! in the joiner's frame (on this worker's deque, where idle workers steal
//! it), runs `a` here, then pops `b` back and runs it here too if nobody
//! has stolen it — the common case when the pool is busy, so a deep
//! recursion costs a few atomic operations per level and no allocation, and
//! never a thread. If a thief has it, the worker helps (runs other queued
//! work; see `worker::help`) until `b` is done. A scope works the same way:
//! its owner runs the jobs nobody took, newest first, and helps while the
//! others finish.
//!
//! From outside the pool, the whole `join` or `scope` is itself queued as a
//! job and the calling thread waits for it: the closures always run on the
//! pool's workers (so spawns inside them stay in that pool), unless the pool
//! was shut down, in which case they run on the calling thread.
//!
//! Panics: a panic in either closure, or in any job of a scope, is caught,
//! everything still running is waited for (borrowed data must outlive it),
//! and then the panic is resumed on the caller: the first one, in `join`'s
//! case `a`'s if both panicked.

mod job;

use crate::runtime::context::{self, WorkerContext};
use crate::runtime::kind_names;
use crate::runtime::kinds::Kind;
use crate::runtime::{PanicPayload, Shared};
use crate::sync::Mutex;
use crate::sync::{lock, Arc};
use job::{erase, submit, Job, StackJob, Waiter};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::{self, Thread};

/// Runs `a` and `b` in `shared`'s pool, possibly in parallel, and returns
/// both results. See the module docs.
pub(crate) fn join_in<A, B, RA, RB>(shared: &Arc<Shared>, site: Site, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    context::with_current(|ctx| match ctx {
        Some(ctx) if Arc::ptr_eq(&ctx.shared, shared) => join_here(ctx, a, b),
        _ => run_in(shared, kind_names::kind_at::<A>(site), |shared| {
            join_in_or_here(shared, a, b)
        }),
    })
}

/// [`join_in`] for the current pool: the worker's own, else `outside()`'s
/// (the pool whose `block_on` runs here, or the global pool). The hot path
/// of a recursive `tidepool::join`: one thread-local read.
#[inline]
pub(crate) fn join_current<A, B, RA, RB>(
    outside: impl FnOnce() -> Arc<Shared>,
    site: Site,
    a: A,
    b: B,
) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    context::with_current(|ctx| match ctx {
        Some(ctx) => join_here(ctx, a, b),
        None => {
            let shared = outside();
            run_in(&shared, kind_names::kind_at::<A>(site), |shared| {
                join_in_or_here(shared, a, b)
            })
        }
    })
}

/// Inside `run_in`: on a worker of `shared` (the usual case) the join proper;
/// on the caller, because the pool took no work (shut down), `a` then `b`,
/// with the same panic rule.
fn join_in_or_here<A, B, RA, RB>(shared: &Arc<Shared>, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    match context::current() {
        Some(ctx) if Arc::ptr_eq(&ctx.shared, shared) => join_here(&ctx, a, b),
        _ => {
            let a_out = catch_unwind(AssertUnwindSafe(a));
            let b_out = catch_unwind(AssertUnwindSafe(b));
            both(a_out, b_out)
        }
    }
}

/// Both results, or the first panic (`a`'s if both panicked).
fn both<RA, RB>(a: thread::Result<RA>, b: thread::Result<RB>) -> (RA, RB) {
    match (a, b) {
        (Ok(ra), Ok(rb)) => (ra, rb),
        (Err(panic), _) | (Ok(_), Err(panic)) => resume_unwind(panic),
    }
}

/// [`join_in`] on the worker of `ctx`.
fn join_here<A, B, RA, RB>(ctx: &WorkerContext, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let entry = ctx.shared.threads.entry(ctx.index);
    // The kind of what this worker runs now: `b` is more of it.
    let kind = Kind::from_bits(entry.kind.load(Ordering::Relaxed));
    // Never dropped: once its wait returned the job is spent (its closure
    // ran, its result was taken) and its waiter is a reference, so its drop
    // glue would find nothing to drop; skipping the call saves ~16
    // instructions of ~200 a join (callgrind, fib(24) with a join per call,
    // ~225,000 joins: 45.96M before, 41.71M after). Were anything to unwind
    // past here, the job would leak, not be dropped half-used.
    let job = ManuallyDrop::new(StackJob::new(b, Waiter::Worker(entry), kind));
    // SAFETY: `job` lives in this frame until `job.wait` below has returned:
    // `a` runs under `catch_unwind`, so nothing between here and the wait
    // can unwind past it; one entry only.
    let entry = unsafe { job.entry() };
    job::push(&ctx.shared, Some(ctx), entry);
    let a_out = catch_unwind(AssertUnwindSafe(a));
    let b_out = job.wait(ctx);
    debug_assert!(job.is_spent(), "a join's job is spent once waited for");
    both(a_out, b_out)
}

/// Where a `join`, `scope` or loop was called (`#[track_caller]`): the
/// kind of the work it starts from outside the pool ([`Kind::at`]).
pub(crate) type Site = &'static std::panic::Location<'static>;

/// Runs `f` on one of `shared`'s workers and waits for it on this thread,
/// which is not one of them. Runs it here if the pool takes no work. The
/// job, and every job it forks, is of kind `kind`.
fn run_in<R: Send>(
    shared: &Arc<Shared>,
    kind: Kind,
    f: impl FnOnce(&Arc<Shared>) -> R + Send,
) -> R {
    let pool = Arc::clone(shared);
    let job = StackJob::new(move || f(&pool), Waiter::Thread(thread::current()), kind);
    // SAFETY: `job` lives in this frame until `wait_outside` has returned,
    // and nothing between here and there can unwind; one entry only.
    let entry = unsafe { job.entry() };
    job::push(shared, None, entry);
    match job.wait_outside() {
        Ok(value) => value,
        Err(panic) => resume_unwind(panic),
    }
}

/// Runs `f` on a worker of the current pool: here, if this thread is
/// one of any pool's workers, else on a worker of `outside()`'s pool while
/// this thread waits (here, if that pool takes no work). `f` is given that
/// pool's concurrency. For a parallel iterator or sort: one hop into the
/// pool for the whole run, so its joins are a worker's joins rather than a
/// hop each.
pub(crate) fn run_on_current<R: Send>(
    outside: impl FnOnce() -> Arc<Shared>,
    site: Site,
    f: impl FnOnce(usize) -> R + Send,
) -> R {
    let here = context::with_current(|ctx| ctx.map(|ctx| ctx.shared.config.concurrency));
    match here {
        Some(concurrency) => f(concurrency),
        None => {
            let shared = outside();
            let concurrency = shared.config.concurrency;
            run_in(&shared, Kind::at(site), move |_| f(concurrency))
        }
    }
}

/// A scope in which tasks may borrow from outside it: see
/// [`scope`](crate::scope). Every task spawned in it has finished when
/// `scope` returns.
///
/// ```
/// let mut halves = [vec![1, 2, 3], vec![4, 5, 6]];
/// let (left, right) = halves.split_at_mut(1);
/// tidepool::scope(|s| {
///     s.spawn(|_| left[0].iter_mut().for_each(|x| *x *= 10));
///     s.spawn(|_| right[0].iter_mut().for_each(|x| *x += 1));
/// });
/// assert_eq!(halves, [vec![10, 20, 30], vec![5, 6, 7]]);
/// ```
pub struct Scope<'scope> {
    shared: Arc<Shared>,
    /// Jobs spawned and not finished. The owner waits for zero.
    pending: AtomicUsize,
    /// Spawned jobs the owner has not looked at yet, newest last: the owner
    /// runs those nobody has started, newest first.
    jobs: Mutex<Vec<Arc<Job>>>,
    /// The first panic of a job, resumed when the scope ends.
    panic: Mutex<Option<PanicPayload>>,
    /// The thread that waits for the scope to end.
    owner: Thread,
    /// Made inside `tidepool::isolate`: its tasks run isolated wherever
    /// they run, and its owner's wait helps with nothing else.
    isolated: bool,
    /// Invariant in `'scope`, as a borrow that both reads and writes.
    _scope: PhantomData<&'scope mut &'scope ()>,
}

impl std::fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("pending", &self.pending.load(Ordering::Relaxed))
            .finish()
    }
}

impl<'scope> Scope<'scope> {
    /// Spawns `body` in the scope's pool. It may borrow anything that
    /// outlives the scope, and spawn more tasks through the `&Scope` it is
    /// given. A panic in it is resumed when the scope ends, after every task
    /// of the scope has finished.
    ///
    /// ```
    /// let words = vec!["tide", "pool"];
    /// let total = std::sync::atomic::AtomicUsize::new(0);
    /// tidepool::scope(|s| {
    ///     for word in &words {
    ///         let total = &total;
    ///         s.spawn(move |_| {
    ///             total.fetch_add(word.len(), std::sync::atomic::Ordering::Relaxed);
    ///         });
    ///     }
    /// });
    /// assert_eq!(total.into_inner(), 8);
    /// ```
    #[track_caller]
    pub fn spawn<F>(&self, body: F)
    where
        F: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        // Relaxed: the owner reads zero only after every decrement (AcqRel
        // read-modify-writes of the same counter), and a job's decrement
        // comes after the increments of the jobs it spawned.
        self.pending.fetch_add(1, Ordering::Relaxed);
        let scope: &Scope<'scope> = self;
        let task: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
            let run = AssertUnwindSafe(|| body(scope));
            let ran = if scope.isolated {
                catch_unwind(|| context::isolated_while(run))
            } else {
                catch_unwind(run)
            };
            if let Err(panic) = ran {
                lock(&scope.panic).get_or_insert(panic);
            }
            scope.job_done();
        });
        // SAFETY: the job protocol (job.rs): the scope's owner does not let
        // the scope (nor anything `'scope` borrows) end before `pending` is
        // zero, and this job's last act is its decrement (`job_done`).
        let job = Job::new(unsafe { erase(task) }, self.owner.clone());
        lock(&self.jobs).push(Arc::clone(&job));
        let kind = kind_names::kind_at::<F>(std::panic::Location::caller());
        submit(&self.shared, &job, kind);
    }

    /// A job's last act: one fewer pending, and the owner woken at zero.
    fn job_done(&self) {
        let owner = self.owner.clone();
        // AcqRel: pairs with the owner's Acquire load, which then sees every
        // write of every job.
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            owner.unpark();
        }
        // `self` may be gone from here on: the owner returns at zero.
    }

    /// The owner's wait: runs the jobs nobody started (newest first), and
    /// helps the pool while the others finish.
    fn complete(&self) {
        loop {
            let next = lock(&self.jobs).pop();
            if let Some(job) = next {
                if let Some(run) = job.claim() {
                    run();
                }
                continue;
            }
            if self.pending.load(Ordering::Acquire) == 0 {
                return;
            }
            let done = || self.pending.load(Ordering::Acquire) == 0 || !lock(&self.jobs).is_empty();
            if !crate::worker::help_until(done) {
                // Nested too deep to help: block until a job ends (each
                // job's end or the last one's unparks this thread).
                crate::worker::declare_pool_wait();
                thread::park_timeout(std::time::Duration::from_millis(1));
            }
        }
    }
}

/// Runs `f` with *isolated waits*: a wait on a pool inside `f` runs only
/// the work it waits for, never other queued work. For code that holds a
/// lock across a wait.
///
/// # Why
///
/// On a worker, a wait — [`join`](crate::join), [`scope`](crate::scope),
/// [`block_on`](crate::block_on), [`JoinHandle::join`](crate::JoinHandle::join),
/// and the [`Pool`](crate::Pool) methods of the same names — runs queued
/// work while what it waits for is unfinished (so a recursion of joins
/// needs no thread per join). That queued work can be any task of the
/// pool. If the waiting code holds a lock and such a task takes the same
/// lock, the thread waits for itself: the task blocks on the lock, and the
/// lock's holder, suspended beneath the task on the same thread, never
/// resumes to release it (a `std::sync::Mutex` may panic instead). The
/// same holds for a join or scope called from outside the pool while
/// holding the lock: the join runs on a worker, whose waits help. This is
/// rayon's issue #592. Releasing the lock before the wait is the best fix;
/// where it must be held, isolate the wait.
///
/// # What an isolated wait does
///
/// * [`join`](crate::join)`(a, b)` runs `b` itself if no other worker took
///   it, as every join does (even from under work that `a` left queued
///   above it, which stays queued); if one did, it waits without running
///   anything else.
/// * A [`scope`](crate::scope)'s end runs the scope's own tasks that nobody
///   started, then waits for the others.
/// * [`block_on`](crate::block_on) and [`JoinHandle::join`](crate::JoinHandle::join)
///   poll only their own future: the awaited task runs on another worker.
/// * While it waits, the thread blocks; on a worker it gives its slot to
///   another worker first (woken, or started if none is parked), as a
///   blocking call does, so the pool keeps running its other work, the
///   lock's other takers included. The cost: a thread per isolated wait in
///   progress, up to `max_threads` (a [`Controller::Fixed`](crate::Controller::Fixed)
///   pool starts none: there the wait lasts until one of its threads is
///   free to run what it waits for).
/// * The second halves of joins and the tasks of scopes started inside `f`
///   run isolated too, on whichever worker runs them: a thief that helped
///   while running one could end up beneath a task that waits on your
///   lock, and your wait would never end.
///
/// Tasks spawned inside `f` ([`spawn`](crate::spawn),
/// [`spawn_fn`](crate::spawn_fn), [`execute`](crate::execute)) are not
/// isolated: they run as any task, and one that waits on the pool itself
/// may run queued work that takes your lock. Wait isolated only for work
/// that does not, or that only forks with `join` and `scope`.
///
/// Outside any wait, `isolate` changes nothing: `f` runs on the calling
/// thread, and returns its value (a panic in `f` passes through).
///
/// ```
/// use std::sync::{Arc, Mutex};
///
/// let totals = Arc::new(Mutex::new(Vec::new()));
/// let pool = tidepool::Pool::builder().concurrency(2).build()?;
/// let task = pool.spawn_fn({
///     let totals = totals.clone();
///     move || {
///         let mut held = totals.lock().unwrap();
///         // Queued work that takes the same lock: a plain `join` below
///         // could run it on this thread while the lock is held here.
///         let writer = {
///             let totals = totals.clone();
///             tidepool::spawn_fn(move || totals.lock().unwrap().push(1))
///         };
///         let (a, b) = tidepool::isolate(|| tidepool::join(|| 40, || 2));
///         held.push(a + b);
///         drop(held);
///         writer.join().unwrap();
///     }
/// });
/// task.join().unwrap();
/// let mut totals = totals.lock().unwrap().clone();
/// totals.sort();
/// assert_eq!(totals, [1, 42]);
/// # Ok::<(), tidepool::BuildError>(())
/// ```
pub fn isolate<R>(f: impl FnOnce() -> R) -> R {
    context::isolated_while(f)
}

/// Runs `op` with a new scope in `shared`'s pool and waits for every task
/// spawned in it. See [`scope`](crate::scope).
pub(crate) fn scope_in<'scope, OP, R>(shared: &Arc<Shared>, site: Site, op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R + Send,
    R: Send,
{
    if context::current_index(shared).is_some() {
        scope_here(shared, op)
    } else {
        run_in(shared, kind_names::kind_at::<OP>(site), |shared| {
            scope_here(shared, op)
        })
    }
}

fn scope_here<'scope, OP, R>(shared: &Arc<Shared>, op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R + Send,
    R: Send,
{
    let scope = Scope {
        shared: Arc::clone(shared),
        pending: AtomicUsize::new(0),
        jobs: Mutex::new(Vec::new()),
        panic: Mutex::new(None),
        owner: thread::current(),
        isolated: context::isolated(),
        _scope: PhantomData,
    };
    let out = catch_unwind(AssertUnwindSafe(|| op(&scope)));
    scope.complete();
    let job_panic = lock(&scope.panic).take();
    match (out, job_panic) {
        (Err(panic), _) | (Ok(_), Some(panic)) => resume_unwind(panic),
        (Ok(value), None) => value,
    }
}

/// Calls `f` on every item of `items`, in parallel in `shared`'s pool. See
/// [`for_each`](crate::for_each).
pub(crate) fn for_each_in<T, F>(shared: &Arc<Shared>, site: Site, items: &mut [T], f: F)
where
    T: Send,
    F: Fn(&mut T) + Sync,
{
    let grain = grain(items.len(), shared.config.concurrency);
    split(
        shared,
        site,
        items,
        &|chunk: &mut [T]| chunk.iter_mut().for_each(&f),
        grain,
    );
}

/// Calls `f` on every index of `range`, in parallel in `shared`'s pool. See
/// [`for_range`](crate::for_range).
pub(crate) fn for_range_in<F>(shared: &Arc<Shared>, site: Site, range: std::ops::Range<usize>, f: F)
where
    F: Fn(usize) + Sync,
{
    let len = range.end.saturating_sub(range.start);
    let grain = grain(len, shared.config.concurrency);
    split_range(shared, site, range, &f, grain);
}

/// The chunk size below which a loop runs sequentially: about eight chunks
/// per slot, so an uneven chunk can be balanced by the others, and no chunk
/// split so fine that the fork costs more than the work.
fn grain(len: usize, concurrency: usize) -> usize {
    (len / (8 * concurrency.max(1))).max(1)
}

fn split<T: Send>(
    shared: &Arc<Shared>,
    site: Site,
    items: &mut [T],
    body: &(dyn Fn(&mut [T]) + Sync),
    grain: usize,
) {
    if items.len() <= grain {
        body(items);
        return;
    }
    let (left, right) = items.split_at_mut(items.len() / 2);
    join_in(
        shared,
        site,
        || split(shared, site, left, body, grain),
        || split(shared, site, right, body, grain),
    );
}

fn split_range(
    shared: &Arc<Shared>,
    site: Site,
    range: std::ops::Range<usize>,
    body: &(dyn Fn(usize) + Sync),
    grain: usize,
) {
    let len = range.end.saturating_sub(range.start);
    if len <= grain {
        range.for_each(body);
        return;
    }
    let mid = range.start + len / 2;
    join_in(
        shared,
        site,
        || split_range(shared, site, range.start..mid, body, grain),
        || split_range(shared, site, mid..range.end, body, grain),
    );
}

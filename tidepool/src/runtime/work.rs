//! What the pool's queues hold: [`Work`], a task (an `async-task` runnable)
//! or a job (a fork-join closure, usually living on a waiting thread's
//! stack, reached through a [`JobRef`]).
//!
//! Jobs exist so that `join` allocates nothing: the half it offers to other
//! workers stays in the joiner's frame, and only a pointer to it is queued.
//! This module has the one `unsafe` dereference of such a pointer; the
//! contract that makes it sound is on [`JobRef::new`], and the jobs that
//! meet it are in `fork::job`.

use super::kinds::Kind;
use super::task::Runnable;
use std::ptr::NonNull;

/// One item of a deque or lane.
#[derive(Debug)]
pub(crate) enum Work {
    /// A spawned task.
    Task(Runnable),
    /// A fork-join job.
    Job(JobRef),
}

/// What a queued job can do. Exactly one of the two is called, once, for
/// each [`JobRef`] made for it.
pub(crate) trait Job: Sync {
    /// Runs the job. It must not unwind: jobs catch their closures' panics.
    fn run(&self);
    /// The job's queue entry was dropped unrun (its pool stopped with it
    /// queued). The job must still end: it tells its waiter, or runs.
    fn abandon(&self);
    /// The job's kind (the type of its closure): what the monitor learns
    /// about while a worker runs it, and what the quantum rule asks before
    /// it lends a slot to it (`runtime::kinds`).
    fn kind(&self) -> Kind;
}

/// A queued job: a pointer to a [`Job`] that someone keeps alive until it
/// has run or been abandoned. Dropping it abandons the job.
pub(crate) struct JobRef {
    job: NonNull<dyn Job>,
}

// SAFETY: a `JobRef` only ever gives access to `&dyn Job` (shared), and
// `Job: Sync`, so using it from another thread is sound; whoever made it
// keeps the job alive until `run` or `abandon` has returned (`JobRef::new`).
unsafe impl Send for JobRef {}

impl std::fmt::Debug for JobRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("JobRef")
            .field(&self.job.cast::<()>())
            .finish()
    }
}

impl JobRef {
    /// A queue entry for `job`.
    ///
    /// # Safety
    ///
    /// 1. `job` must stay valid, at the same address, until the returned
    ///    `JobRef` (or the one it is moved into) has been run, abandoned or
    ///    forgotten with [`JobRef::take_back`], and until that call has
    ///    returned: `Job::run` and `Job::abandon` must not let the job's
    ///    owner free it before their last access to it.
    /// 2. No other `JobRef` is made for the same job while this one lives.
    pub(crate) unsafe fn new<'a>(job: &'a (dyn Job + 'a)) -> JobRef {
        let job: NonNull<dyn Job + 'a> = NonNull::from(job);
        // SAFETY: only the trait object's lifetime bound changes, not the
        // layout of the fat pointer. Extending it is what the caller's
        // contract (1) allows: the pointer is never dereferenced after the
        // job is gone.
        let job = unsafe { std::mem::transmute::<NonNull<dyn Job + 'a>, NonNull<dyn Job>>(job) };
        JobRef { job }
    }

    /// True if this entry is for `job`.
    pub(crate) fn is(&self, job: &dyn Job) -> bool {
        // Addresses only: vtable pointers of one type may differ between
        // codegen units.
        self.job.as_ptr().cast::<()>().cast_const() == (job as *const dyn Job).cast::<()>()
    }

    /// Runs the job.
    pub(crate) fn run(self) {
        let job = self.job;
        std::mem::forget(self);
        // SAFETY: contract (1) of `new`: the job is alive until this call
        // returns; `forget` made sure it is not abandoned as well.
        unsafe { job.as_ref() }.run();
    }

    /// The job's kind ([`Job::kind`]).
    pub(crate) fn kind(&self) -> Kind {
        // SAFETY: contract (1) of `new`: the job is alive while its entry
        // is, and only a shared reference is made.
        unsafe { self.job.as_ref() }.kind()
    }

    /// For the job's owner, which popped its own entry back: forgets the
    /// entry without running or abandoning the job (the owner runs it).
    pub(crate) fn take_back(self) {
        std::mem::forget(self);
    }
}

impl Drop for JobRef {
    fn drop(&mut self) {
        // SAFETY: contract (1) of `new`: an entry dropped unrun still points
        // to a live job, which stays alive until `abandon` returns.
        unsafe { self.job.as_ref() }.abandon();
    }
}

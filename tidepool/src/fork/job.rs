//! A job: a closure that may borrow from its waiter's stack, queued in the
//! pool as a task and run exactly once — by whichever thread claims it
//! first: a worker that picked the task, or the waiter itself.
//!
//! This is the only module besides `sys` with `unsafe`: the lifetime erasure
//! that lets a pool task run a closure borrowing from a stack frame. The
//! argument that it is sound is the protocol below; every caller restates
//! its part of it at the call.
//!
//! # The protocol
//!
//! * The waiter creates the job with [`erase`]d closure, queues it with
//!   [`submit`], and does not return (nor unwind) before one of:
//!   - it claimed the closure itself ([`Job::claim`]) and ran it; or
//!   - [`Job::is_done`] returned true (a worker claimed it, ran it, and
//!     dropped it before setting `done` with Release); or, for a scope, the
//!     scope's pending count reached zero (each job decrements it last).
//! * The closure is taken out of the job under its mutex, so it is run (or
//!   dropped) at most once, and never after the waiter returned: a claim
//!   that finds it gone does nothing, and a task dropped unrun
//!   ([`JobRunner`]'s drop) only marks the job abandoned, leaving the closure
//!   for the waiter to claim.
//! * What outlives the waiter (the `Arc<Job>` a queued task still holds)
//!   contains no borrowed data any more: the closure slot is empty.

use crate::runtime::task::NoGate;
use crate::runtime::{Priority, Shared};
use crate::sync::{lock, Arc};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread::{self, Thread};
use std::time::Duration;

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

/// One closure, run exactly once. See the module docs.
pub(super) struct Job {
    /// The closure until somebody claims it.
    func: Mutex<Option<ErasedFn>>,
    /// Set (Release) after a worker that claimed the closure has run and
    /// dropped it; read with Acquire by the waiter.
    done: AtomicBool,
    /// Set when the task that would have run the job was dropped unrun (the
    /// pool refused or stopped): the waiter must run it.
    abandoned: AtomicBool,
    /// Woken when the job is done or abandoned.
    waiter: Thread,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("done", &self.done.load(Ordering::Relaxed))
            .finish()
    }
}

impl Job {
    /// A job for `func`, whose waiter is `waiter`.
    pub(super) fn new(func: ErasedFn, waiter: Thread) -> Arc<Job> {
        Arc::new(Job {
            func: Mutex::new(Some(func)),
            done: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            waiter,
        })
    }

    /// Takes the closure if nobody has: the caller must run it.
    pub(super) fn claim(&self) -> Option<ErasedFn> {
        lock(&self.func).take()
    }

    /// True once a worker ran the job (not set when the waiter runs it).
    pub(super) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// For a thread that is not a worker: waits until a worker ran the job,
    /// or runs it here if the pool dropped its task unrun.
    pub(super) fn wait_outside(&self) {
        loop {
            if self.is_done() {
                return;
            }
            if self.abandoned.load(Ordering::Acquire) {
                if let Some(func) = self.claim() {
                    func();
                    return;
                }
            }
            // Woken by `run` or the runner's drop; the timeout only guards
            // against a lost unpark token.
            thread::park_timeout(Duration::from_millis(10));
        }
    }
}

/// What the pool's task holds: runs the job if it is still unclaimed; marks
/// it abandoned if the task is dropped unrun.
struct JobRunner(Arc<Job>);

impl JobRunner {
    fn run(self) {
        if let Some(func) = self.0.claim() {
            func();
            // Release: the waiter that sees `done` sees everything the
            // closure wrote (its result slot).
            self.0.done.store(true, Ordering::Release);
            self.0.waiter.unpark();
        }
    }
}

impl Drop for JobRunner {
    fn drop(&mut self) {
        let unrun = lock(&self.0.func).is_some();
        if unrun {
            self.0.abandoned.store(true, Ordering::Release);
            self.0.waiter.unpark();
        }
    }
}

/// Queues a task that runs `job` in `shared`'s pool: on the current worker's
/// deque when called on one of its workers, else on the normal lane. If the
/// pool refuses it (closed), the job is abandoned at once and its waiter
/// runs it.
pub(super) fn submit(shared: &Arc<Shared>, job: &Arc<Job>) {
    let runner = JobRunner(Arc::clone(job));
    let task = async move { runner.run() };
    if let Some(cell) = crate::worker::spawn(shared, task, Priority::Normal, NoGate, true) {
        cell.detach();
    }
}

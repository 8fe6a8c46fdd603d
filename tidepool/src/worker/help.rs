//! Waiting inside the pool helps: a worker that waits for something (a
//! `JoinHandle::join`, `Pool::block_on`, the other half of a `join`, the end
//! of a `scope`) runs the pool's queued work meanwhile, usually the very task
//! it waits for, instead of blocking its thread.
//!
//! # Why
//!
//! A join that blocks its thread gives its slot away, and the pool starts
//! another thread to keep `concurrency` running. A recursive fork-join then
//! needs a thread per pending join: deep recursions ran out of `max_threads`
//! and hung. A helping wait keeps its slot and runs queued tasks, so a
//! fork-join needs no more threads than `concurrency` (plus threads blocked
//! outside the pool), whatever its depth, as long as the nested waits fit
//! in the worker's stack (see "Limits" below).
//!
//! # The states of a helping worker
//!
//! The task that waits is *suspended*: its status goes to `Idle` for the
//! monitor (`TaskStatus::end_task`), so the wait is not mistaken for a
//! blocked task and compensated. While it waits the worker either runs a
//! queued task (a nested `run_task`, with its own status) or, finding none,
//! spins briefly and then parks for a bounded time: it is woken by the
//! completion it waits for (the caller's waker unparks this thread) and
//! looks at the queues again at least every [`MAX_PARK`]. When the wait is
//! over the task resumes with a new tick (`begin_task`), or, if its slot was
//! given away and none is free, as blocked (`begin_task_blocked`): then it
//! runs on without a slot and gives way when it ends, as after any block.
//!
//! A worker never runs a task without holding a slot, so limits hold:
//! helped tasks come from the pool's queues, where groups and pairs admit
//! only what their permits allow, and the pick order is the run loop's
//! (the high lane first).
//!
//! # Limits
//!
//! A helped task runs on the waiter's stack, so helping nests: a wait that
//! steals a big piece of another worker's recursion nests that recursion's
//! depth on top of its own. Once a worker has used [`STACK_SHARE`] of its
//! stack, a wait there does not help: it blocks as a declared block (its
//! slot goes to another worker, started if need be), so a long chain of
//! tasks each waiting for the next neither overflows the stack nor
//! deadlocks the pool. (A fixed limit of 64 nested waits was hit by a
//! `spawn_fn` + `join` recursion with a fork per call, fib(26) on two
//! slots, which then started 12-17 threads; the stack bound lets it run on
//! its slots.) A helped task that runs long delays the waiter's return by
//! as much (the same trade as rayon's).
//!
//! # Isolated waits
//!
//! Helping runs *any* queued work on the waiter's stack. Code that holds a
//! lock across the wait deadlocks if that work takes the same lock: the
//! lock's holder is suspended beneath it on the same thread (rayon's issue
//! #592). Inside `tidepool::isolate` (`context::isolated`) a wait does not
//! help: [`help_until`] returns false at once, and the caller blocks as it
//! does when nested too deep, declared (`declare_pool_wait`), so its slot
//! goes to another worker (woken or started) and the awaited work and the
//! lock's other takers run there. What a wait runs itself is only its own
//! work: a join's second half popped back from its deque, a scope's jobs
//! claimed from its list. The fork-join jobs started inside `isolate` carry
//! it to the worker that steals them (`fork::job`), so a thief does not help
//! either: beneath a helped task that waits on the lock, the awaited half
//! would never end.

use super::{find_task, run_work};
use crate::runtime::context;
use crate::runtime::kinds::Kind;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

/// A wait helps only while the worker has used less than this share of its
/// stack (each nested help runs a task on it). Half: what a helped task
/// itself needs is unknown, and the other half is the margin for it.
const STACK_SHARE: usize = 2;

/// The stack size of a thread whose size was not set: Rust's default for
/// spawned threads (`RUST_MIN_STACK` can raise it; a lower bound is safe).
const DEFAULT_STACK: usize = 2 * 1024 * 1024;

/// Empty looks at the queues before parking: a completion or a new task often
/// arrives within a few microseconds, and parking costs a futex round trip.
const SPINS: u32 = 64;

/// The longest park between looks at the queues. Work queued while every
/// slot is held by helping waiters is picked up this late at the worst
/// (nobody is searching, and no slot is free to wake a parked worker).
const MAX_PARK: Duration = Duration::from_millis(1);

thread_local! {
    /// The address of a local near the bottom of this worker's stack, set
    /// when the worker starts (0 elsewhere).
    static STACK_BASE: Cell<usize> = const { Cell::new(0) };
}

/// For a worker thread starting: remembers where its stack begins.
pub(crate) fn mark_stack_base() {
    let here = 0u8;
    let _ = STACK_BASE.try_with(|base| base.set(&here as *const u8 as usize));
}

/// Whether this worker may run another task nested on its stack: it has
/// used less than `1 / STACK_SHARE` of `stack_size`.
fn stack_has_room(stack_size: usize) -> bool {
    let here = 0u8;
    let here = &here as *const u8 as usize;
    let base = STACK_BASE.try_with(Cell::get).unwrap_or(0);
    // Stacks grow down on every platform Rust's std threads run on here; a
    // base of 0 (not a worker) or above-base reading means "unknown": no.
    base != 0 && base >= here && base - here < stack_size / STACK_SHARE
}

/// True if the current thread is a worker of some pool (so a wait here can
/// help instead of block).
pub(crate) fn on_worker() -> bool {
    context::current().is_some()
}

/// A waker that unparks `thread`.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that unparks the current thread: a completion that wakes it ends
/// a helping wait's park at once.
pub(crate) fn unpark_waker() -> Waker {
    thread_local! {
        static WAKER: Waker = Waker::from(Arc::new(Unpark(thread::current())));
    }
    WAKER
        .try_with(Waker::clone)
        .unwrap_or_else(|_| Waker::from(Arc::new(Unpark(thread::current()))))
}

/// Runs the current worker's queued work until `done()` returns true. Whoever
/// makes `done` true should unpark this thread (see [`unpark_waker`]); the
/// wait also looks again at least every [`MAX_PARK`].
///
/// Returns false, without waiting, when the current thread is not a worker,
/// has used [`STACK_SHARE`] of its stack, or waits isolated (see "Isolated
/// waits"): the caller then blocks, declaring it (see `declare_pool_wait`)
/// if on a worker.
pub(crate) fn help_until(mut done: impl FnMut() -> bool) -> bool {
    let Some(ctx) = context::current() else {
        return false;
    };
    let shared = &ctx.shared;
    let entry = shared.threads.entry(ctx.index);
    // The waiting task's kind waits on the pool: never presume it blocking
    // (`control::presumption`), whether this wait helps or blocks.
    let waiting_kind = entry.kind.load(Ordering::Relaxed);
    shared.kinds.saw_pool_wait(Kind::from_bits(waiting_kind));
    if context::isolated() || !stack_has_room(shared.config.stack_size.unwrap_or(DEFAULT_STACK)) {
        return false;
    }
    let status = &entry.status;
    // A presumed task waiting here is judged by its own end, not by the
    // end of a task it helps with meanwhile.
    let presumed = ctx.presumed_run.take();
    // And the monitor must not judge it by what the tasks it runs
    // meanwhile do (a presumed task among them marks the entry as its own):
    // the mark comes back with it, and stays the waiting task's to take at
    // its end (`runtime::presumed`).
    let presumed_mark = entry.presumed.swap(0, Ordering::Relaxed);
    // Suspend the waiting task: the monitor must not take the wait for a
    // blocked task. `false`: its slot was given away already.
    let mut holding = status.end_task();
    let mut empty_looks = 0u32;
    let mut park = Duration::from_micros(16);
    while !done() {
        if !holding && shared.slots.try_acquire(false) {
            holding = true;
            // Running again with a slot taken since the pool may have been
            // idle: see `control::signal`.
            shared.monitor.wake();
        }
        if holding {
            let pick = status.load().tick().wrapping_add(1);
            if let Some(task) = find_task(&ctx, pick, true) {
                holding = run_work(&ctx, task);
                empty_looks = 0;
                park = Duration::from_micros(16);
                continue;
            }
        }
        empty_looks += 1;
        if empty_looks < SPINS {
            std::hint::spin_loop();
        } else if empty_looks == SPINS {
            thread::yield_now();
        } else {
            thread::park_timeout(park);
            park = (park * 2).min(MAX_PARK);
        }
    }
    if !holding {
        holding = shared.slots.try_acquire(false);
    }
    // The tasks helped meanwhile published their kinds: the monitor's
    // record is the waiting task's again (before the status that makes it
    // look).
    entry.kind.store(waiting_kind, Ordering::Relaxed);
    ctx.presumed_run.set(presumed);
    entry.presumed.store(presumed_mark, Ordering::Relaxed);
    if holding {
        status.begin_task();
    } else {
        status.begin_task_blocked();
    }
    true
}

/// Drives `future` to completion on the current worker, helping the pool
/// while it is pending. Returns `None`, without polling it, when the current
/// thread is not a worker or [`help_until`] does not help (nested too deep,
/// or isolated).
pub(crate) fn poll_helping<F: Future>(mut future: Pin<&mut F>) -> Option<F::Output> {
    if !on_worker() {
        return None;
    }
    let waker = unpark_waker();
    let mut cx = Context::from_waker(&waker);
    let mut output = None;
    help_until(|| match future.as_mut().poll(&mut cx) {
        Poll::Ready(value) => {
            output = Some(value);
            true
        }
        Poll::Pending => false,
    });
    output
}

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
//! fork-join never needs more threads than `concurrency` (plus threads
//! blocked outside the pool), whatever its depth.
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
//! A helped task runs on the waiter's stack, so helping nests. Past
//! [`MAX_DEPTH`] nested waits a worker does not help: the wait blocks as a
//! declared block (its slot goes to another worker, started if need be), so
//! a long chain of tasks each waiting for the next neither overflows the
//! stack nor deadlocks the pool. A helped task that runs long delays the
//! waiter's return by as much (the same trade as rayon's).

use super::{find_task, run_work};
use crate::runtime::context;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

/// Helping waits nested deeper than this only wait: each level is a task
/// running on the waiter's stack.
const MAX_DEPTH: u32 = 64;

/// Empty looks at the queues before parking: a completion or a new task often
/// arrives within a few microseconds, and parking costs a futex round trip.
const SPINS: u32 = 64;

/// The longest park between looks at the queues. Work queued while every
/// slot is held by helping waiters is picked up this late at the worst
/// (nobody is searching, and no slot is free to wake a parked worker).
const MAX_PARK: Duration = Duration::from_millis(1);

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
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
/// Returns false, without waiting, when the current thread is not a worker
/// or its helping waits are nested [`MAX_DEPTH`] deep: the caller then
/// blocks, declaring it (see `declare_blocking`) if on a worker.
pub(crate) fn help_until(mut done: impl FnMut() -> bool) -> bool {
    let Some(ctx) = context::current() else {
        return false;
    };
    let depth = DEPTH.with(|d| d.get());
    if depth >= MAX_DEPTH {
        return false;
    }
    DEPTH.with(|d| d.set(depth + 1));
    let shared = &ctx.shared;
    let status = &shared.threads.entry(ctx.index).status;
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
    DEPTH.with(|d| d.set(depth));
    if !holding {
        holding = shared.slots.try_acquire(false);
    }
    if holding {
        status.begin_task();
    } else {
        status.begin_task_blocked();
    }
    true
}

/// Drives `future` to completion on the current worker, helping the pool
/// while it is pending. Returns `None`, without polling it, when the current
/// thread is not a worker.
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

//! The per-task side of a gate: [`TaskGate`] (the core's `Gate` for one task)
//! and [`gated`], the future wrapper that tells the arbiter when a poll starts
//! and when the task ends, and counts the unit's metrics.

use super::admission::{Side, Ticket, UnitId};
use super::{Fair, Queued};
use crate::sync::Arc;
use crate::task::{Gate, Runnable};
use futures_lite::FutureExt;
use std::future::Future;
use std::panic::{resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc as StdArc, Weak as StdWeak};
use std::task::{Context, Poll};

/// Counters of one unit, kept beside the arbiter's (which count permits).
/// Plain statistics: every access is `Relaxed`.
#[derive(Debug, Default)]
pub(crate) struct UnitStats {
    pub(crate) spawned: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) panicked: AtomicU64,
    pub(crate) cancelled: AtomicU64,
    /// Polls in progress now.
    pub(crate) polling: AtomicUsize,
}

/// One group or pair as the tasks see it: its arbiter entry, its pool lane and
/// its counters. Shared by the user's handles and every task of the unit; the
/// arbiter entry is removed when the last of them is gone.
#[derive(Debug)]
pub(crate) struct UnitCore {
    pub(crate) fair: StdArc<Fair>,
    pub(crate) id: UnitId,
    pub(crate) priority: crate::Priority,
    pub(crate) name: Option<String>,
    /// Set by `close`. Relaxed: it publishes no data, and a spawn ordered
    /// after `close` by any other synchronisation sees it by coherence.
    pub(crate) closed: AtomicBool,
    pub(crate) stats: UnitStats,
}

impl Drop for UnitCore {
    fn drop(&mut self) {
        // Empty unless the pool stopped with tasks queued; drop them after
        // the arbiter's lock is released (dropping re-enters the gate).
        drop(self.fair.arbiter().remove_unit(self.id));
    }
}

/// The core's [`Gate`] for one gated task: its ticket (the permits it holds)
/// and its unit. One per task, so the gate knows which permits to give back.
#[derive(Debug)]
pub(crate) struct TaskGate {
    unit: StdArc<UnitCore>,
    ticket: Ticket,
    /// This gate itself, to queue it beside its runnable in a FIFO.
    me: StdWeak<TaskGate>,
}

impl TaskGate {
    pub(crate) fn new(unit: StdArc<UnitCore>, side: Side) -> StdArc<TaskGate> {
        StdArc::new_cyclic(|me| TaskGate {
            unit,
            ticket: Ticket::new(side),
            me: me.clone(),
        })
    }

    pub(crate) fn ticket(&self) -> &Ticket {
        &self.ticket
    }

    /// This gate as the core's task metadata wants it.
    pub(crate) fn as_dyn(this: &StdArc<TaskGate>) -> Arc<dyn Gate> {
        StdArc::clone(this) as Arc<dyn Gate>
    }

    fn fair(&self) -> &Fair {
        &self.unit.fair
    }
}

impl Gate for TaskGate {
    fn admit(&self, runnable: Runnable) -> Option<Runnable> {
        let Some(gate) = self.me.upgrade() else {
            // Unreachable: the core calls us through an Arc of this gate.
            return Some(runnable);
        };
        let fair = self.fair();
        if fair.shared().is_stopped() {
            // Nobody will run it: drop it here (its task counts as
            // cancelled), and cancel our FIFOs too. Handing it back to be
            // queued would let a worker still finishing its last task take
            // it and run it without a permit.
            crate::worker::draining(fair.shared(), || drop(runnable));
            fair.drain_if_stopped();
            return None;
        }
        let admitted = fair
            .arbiter()
            .schedule(self.unit.id, Queued { gate, runnable });
        fair.release(admitted);
        None
    }

    fn after_run(&self) {
        let fair = self.fair();
        let admitted = fair.arbiter().after_run(self.unit.id, &self.ticket);
        fair.release(admitted);
    }
}

/// Wraps a gated task's future: each poll first gives the task's queue token
/// back, the unit's counters see every end, and the end (or the drop of an
/// unfinished future) gives the in-flight permit back.
pub(crate) fn gated<F>(gate: StdArc<TaskGate>, future: F) -> impl Future<Output = F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    gate.unit.stats.spawned.fetch_add(1, Ordering::Relaxed);
    // Created outside the async block, so it is dropped (and counts the task
    // as cancelled) even if the future is dropped before its first poll.
    let mut end = EndGuard { gate, done: false };
    async move {
        let future = std::pin::pin!(AssertUnwindSafe(future).catch_unwind());
        let output = PollHook {
            gate: &end.gate,
            future,
        }
        .await;
        match output {
            Ok(value) => {
                end.finish(Outcome::Completed);
                value
            }
            Err(payload) => {
                end.finish(Outcome::Panicked);
                // The core's wrapper outside this one catches it again and
                // reports it through the handle.
                resume_unwind(payload)
            }
        }
    }
}

/// Polls the inner future, telling the arbiter first that the poll started.
struct PollHook<'a, F> {
    gate: &'a StdArc<TaskGate>,
    future: Pin<&'a mut F>,
}

impl<F: Future> Future for PollHook<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let gate = self.gate;
        let fair = gate.fair();
        fair.release(fair.arbiter().poll_started(gate.unit.id, &gate.ticket));
        let stats = &gate.unit.stats;
        stats.polling.fetch_add(1, Ordering::Relaxed);
        // The inner future catches its panics, so this always returns.
        let poll = self.future.as_mut().poll(cx);
        stats.polling.fetch_sub(1, Ordering::Relaxed);
        poll
    }
}

/// Ends a gated task exactly once: in `finish` when the future returns, or on
/// drop (cancelled, or dropped by a stopping pool).
struct EndGuard {
    gate: StdArc<TaskGate>,
    done: bool,
}

#[derive(Clone, Copy)]
enum Outcome {
    Completed,
    Panicked,
    Cancelled,
}

impl EndGuard {
    fn finish(&mut self, outcome: Outcome) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let stats = &self.gate.unit.stats;
        let counter = match outcome {
            Outcome::Completed => &stats.completed,
            Outcome::Panicked => &stats.panicked,
            Outcome::Cancelled => &stats.cancelled,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let fair = self.gate.fair();
        let admitted = fair.arbiter().ended(self.gate.unit.id, &self.gate.ticket);
        fair.release(admitted);
    }
}

impl Drop for EndGuard {
    fn drop(&mut self) {
        self.finish(Outcome::Cancelled);
    }
}

//! The per-task side of groups and pairs: [`TaskGate`], the runtime's
//! [`Gate`] hook for one gated task, and [`UnitCore`], what a unit's tasks
//! and handles share. The runtime's one task wrapper calls the hook; there is
//! no second wrapper, guard or outcome type here.

use super::admission::{Side, Ticket, UnitId};
use super::{Fair, Queued};
use crate::metrics::Outcome;
use crate::runtime::task::{Gate, Runnable};
use crate::runtime::{context, Priority};
use crate::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Counters of one unit, kept beside the arbiter's (which count permits).
/// Statistics, with one ordering rule: an end is counted `Release` and read
/// `Acquire` before `spawned` is read ([`UnitStats::snapshot`]), so a
/// snapshot that sees a task's end sees its spawn, and never shows more
/// tasks ended than spawned.
#[derive(Debug, Default)]
pub(crate) struct UnitStats {
    pub(crate) spawned: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) panicked: AtomicU64,
    pub(crate) cancelled: AtomicU64,
    /// Polls in progress now.
    pub(crate) polling: AtomicUsize,
}

impl UnitStats {
    fn ended(&self, outcome: Outcome) {
        let counter = match outcome {
            Outcome::Completed => &self.completed,
            Outcome::Panicked => &self.panicked,
            Outcome::Cancelled => &self.cancelled,
        };
        // Release: pairs with the `Acquire` reads in `snapshot`.
        counter.fetch_add(1, Ordering::Release);
    }

    /// `(spawned, completed, panicked, cancelled)`, the ends read first
    /// (see the type docs).
    pub(crate) fn snapshot(&self) -> (u64, u64, u64, u64) {
        let completed = self.completed.load(Ordering::Acquire);
        let panicked = self.panicked.load(Ordering::Acquire);
        let cancelled = self.cancelled.load(Ordering::Acquire);
        let spawned = self.spawned.load(Ordering::Relaxed);
        (spawned, completed, panicked, cancelled)
    }
}

/// One group or pair as the tasks see it: its arbiter entry, its pool lane and
/// its counters. Shared by the user's handles and every task of the unit; the
/// arbiter entry is removed when the last of them is gone.
#[derive(Debug)]
pub(crate) struct UnitCore {
    pub(crate) fair: Arc<Fair>,
    pub(crate) id: UnitId,
    pub(crate) priority: Priority,
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

/// The runtime's [`Gate`] for one gated task: its ticket (the permits it
/// holds) and its unit. One per task, so the gate knows which permits to give
/// back.
#[derive(Debug)]
pub(crate) struct TaskGate {
    unit: Arc<UnitCore>,
    ticket: Ticket,
}

impl TaskGate {
    pub(crate) fn new(unit: Arc<UnitCore>, side: Side) -> Arc<TaskGate> {
        Arc::new(TaskGate {
            unit,
            ticket: Ticket::new(side),
        })
    }

    pub(crate) fn ticket(&self) -> &Ticket {
        &self.ticket
    }

    fn fair(&self) -> &Fair {
        &self.unit.fair
    }
}

impl Gate for TaskGate {
    fn admit(self: Arc<Self>, runnable: Runnable) -> Option<Runnable> {
        let fair = Arc::clone(&self.unit.fair);
        if fair.shared().is_stopped() {
            // Nobody will run it: drop it here (its task counts as
            // cancelled), and cancel our FIFOs too. Handing it back to be
            // queued would let a worker still finishing its last task take
            // it and run it without a permit.
            context::draining(fair.shared(), || drop(runnable));
            fair.drain_if_stopped();
            return None;
        }
        let id = self.unit.id;
        let admitted = fair.arbiter().schedule(
            id,
            Queued {
                gate: self,
                runnable,
            },
        );
        fair.release(admitted);
        None
    }

    fn poll_started(&self) {
        let fair = self.fair();
        fair.release(fair.arbiter().poll_started(self.unit.id, &self.ticket));
        self.unit.stats.polling.fetch_add(1, Ordering::Relaxed);
    }

    fn poll_ended(&self) {
        self.unit.stats.polling.fetch_sub(1, Ordering::Relaxed);
    }

    fn after_run(&self) {
        let fair = self.fair();
        fair.release(fair.arbiter().after_run(self.unit.id, &self.ticket));
    }

    fn ended(&self, outcome: Outcome) {
        self.unit.stats.ended(outcome);
        let fair = self.fair();
        fair.release(fair.arbiter().ended(self.unit.id, &self.ticket));
    }
}

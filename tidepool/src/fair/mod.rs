//! Fairness beyond priority lanes: throttled [`Group`]s and
//! concurrent/exclusive pairs ([`ConcurrentSpawner`], [`ExclusiveSpawner`]).
//!
//! Both are *admission gates* on top of the core's lanes: a gated task enters
//! the pool's queues only when its group (or pair) and its lane allow it, and
//! waits in the group's own FIFO until then. The pool's queues therefore stay
//! short however large a flood is. Admitted tasks wait in their lane's
//! admitted FIFO, which workers serve after the lane's plain tasks
//! (`runtime::queues`): a plain task queued after a flood waits only for the
//! flood's running items, and another unit's task behind at most a lane's
//! budget of gated items, never behind the flood.
//!
//! # Words
//!
//! * A **unit** is a group or a pair. Each has its own FIFOs and permits.
//! * A **run** is one poll of a task, wherever it happens: a closure runs once,
//!   an async task runs once per wake. Limits count runs, the way a throttled
//!   scheduler counts executions: an async task that is awaiting (a timer, a
//!   socket, another task) is not running and holds no run permit.
//! * A task is **admitted** when the gate hands its runnable to the pool's
//!   queue. From then until the worker reports the run over, it holds a
//!   **run permit**. So "running" (being polled) is a subset of "admitted",
//!   and a limit on admitted items bounds running items too.
//!
//! # Permits
//!
//! * **Run permits** (`max_concurrency`): taken at admission, given back by
//!   the worker's `after_run` hook once the poll returned. At most
//!   `max_concurrency` of a group's items are admitted, hence polled, at once.
//! * **In-flight permits** (`max_in_flight`): taken at a task's first
//!   admission, given back when the task ends (completes, panics, or its
//!   future is dropped because it was cancelled). Awaiting tasks keep theirs.
//! * **Exclusive permit** (pairs): an exclusive item is admitted only when no
//!   item of its pair holds a run permit, and while it holds its permit no
//!   other item of the pair is admitted. Hence an exclusive *run* never
//!   overlaps any other run of the pair. An async exclusive task is exclusive
//!   per poll: while it awaits, the pair's concurrent items may run (as with
//!   a scheduler pair, where each continuation is a separate execution).
//! * **Queue tokens** (fair share): each pool lane (High, Normal, Low) lets
//!   at most [`QUEUE_BUDGET_PER_SLOT`] × `concurrency` gated items wait in the
//!   pool's queues. A token is taken at admission and given back when the
//!   task's poll *starts* (not ends), so a gated item that blocks its thread
//!   does not hold the budget, and the pool's blocking compensation still
//!   applies to grouped work.
//!
//! # States of a gated task
//!
//! ```text
//!  spawn / wake          admitted (pool queue)        polling
//! ─────────────> waiting ─────────────────> queued ─────────────> running
//!  (no permit      in FIFO   run permit + token        token given back
//!   free)                    (+ in-flight, 1st time)          │
//!                    ▲                                         │ poll returns,
//!                    │ wake                                    ▼ after_run
//!                  idle (awaiting) <──────────── run permit given back
//!                  holds in-flight only                        │ future done
//!                                                              ▼ or dropped
//!                                                  ended: in-flight given back
//! ```
//!
//! A task may be woken *during* its own poll (a `yield`): the core schedules it
//! again before `after_run`, so for a moment it holds its old run permit and
//! asks for a new one. The new request simply queues (FIFO) until a permit is
//! free; the count is conservative, never short.
//!
//! # Admission order
//!
//! Inside a unit (see `admission::Unit::next`): a waiting exclusive item
//! blocks every waiting concurrent item (exclusive work has precedence, as in
//! a scheduler pair) and is admitted as soon as the pair's run permits are all
//! back, so a stream of concurrent work cannot starve it. Wakes of started group tasks go before tasks that have not
//! started yet (each kind FIFO): a started task never waits behind a task that
//! needs the in-flight permit it holds, so `max_in_flight` cannot deadlock a
//! group by itself.
//!
//! Between units of a lane: units whose own limits admit their head item but
//! that find no free token wait in the lane's **ring**. Each freed token goes
//! to the ring's head; after `weight` admissions the head moves to the back
//! (weighted round robin). Two floods of weight 1 thus alternate admissions.
//!
//! # Invariants
//!
//! 1. Per unit: `running <= max_concurrency`, `in_flight <= max_in_flight`,
//!    and an exclusive permit is held only while `running == 0`.
//! 2. Per lane: free tokens + tokens held by gated items = the lane budget.
//! 3. No lost admission: after every operation, a lane with free tokens has an
//!    empty ring, and every unit whose limits admit its head item is in its
//!    lane's ring. So a queued item waits only for a permit held by an item
//!    that will give it back (through `after_run`, its poll, or its end).
//! 4. Every scheduled item is in exactly one FIFO or admitted exactly once.
//! 5. All of it sits under one mutex per pool; no runnable is queued in the
//!    pool or dropped while it is held (dropping a runnable drops its future,
//!    whose end re-enters the gate).
//!
//! The state machine lives in [`admission`] and is checked by the loom model
//! `loom_models/admission.rs` (admit, finish, cancel, panic, re-wake).
//!
//! # Shutdown
//!
//! Tasks in a group's FIFO are accepted tasks: [`Pool::shutdown`] runs them
//! (as permits free up) like any queued task. If the pool *stops* before that
//! (`shutdown_timeout` gave up), the FIFOs are emptied at the gate's next
//! operation and their tasks cancelled: their handles say so and the counters
//! add up.
//!
//! [`Pool::shutdown`]: crate::Pool::shutdown

pub(crate) mod admission;
mod gate;
mod group;
mod pair;

pub use group::{Group, GroupBuilder, GroupError, GroupMetrics};
pub(crate) use pair::pair;
pub use pair::{ConcurrentSpawner, ExclusiveSpawner};

use crate::runtime::task::Runnable;
use crate::runtime::{Attachment, Shared};
use crate::sync::Arc;
use admission::{Admitted, Arbiter, Ticket, Ticketed};
use gate::TaskGate;

/// Each lane lets this many gated items per running slot wait in the pool's
/// queues. Two: one item per slot about to start and one behind it, so a
/// worker that finishes always finds the next gated item queued (no idle gap
/// while the gate reacts), yet another group's task queued behind a flood
/// waits for at most two flood items per slot (a plain task waits for none of
/// the queued ones: workers serve plain tasks first).
pub const QUEUE_BUDGET_PER_SLOT: usize = 2;

/// A runnable waiting in (or leaving) a unit's FIFO, with its task's gate.
pub(crate) struct Queued {
    gate: Arc<TaskGate>,
    runnable: Runnable,
}

impl Ticketed for Queued {
    fn ticket(&self) -> &Ticket {
        self.gate.ticket()
    }
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queued")
            .field("ticket", self.gate.ticket())
            .finish()
    }
}

/// The fairness state of one pool: the arbiter of all its groups and pairs.
#[derive(Debug)]
pub(crate) struct Fair {
    shared: Arc<Shared>,
    arbiter: Arbiter<Queued>,
}

impl Fair {
    /// The fairness state of `shared`'s pool, created on first use. The pool
    /// keeps it only as a weak attachment, since `Fair` holds the pool: the
    /// groups and pairs that use it keep it alive.
    pub(crate) fn of(shared: &Arc<Shared>) -> Arc<Fair> {
        shared.attachment(|| {
            let budget = QUEUE_BUDGET_PER_SLOT * shared.config.concurrency.max(1);
            Arc::new(Fair {
                shared: Arc::clone(shared),
                arbiter: Arbiter::new(budget),
            })
        })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    pub(crate) fn arbiter(&self) -> &Arbiter<Queued> {
        &self.arbiter
    }

    /// Queues admitted runnables in the pool. Called without the arbiter's
    /// lock. If the pool has stopped, also empties every FIFO: nobody would
    /// ever admit those tasks, so they are cancelled (dropped) here.
    fn release(&self, admitted: Admitted<Queued>) {
        for queued in admitted {
            // To the lane's admitted FIFO, even when admitted on a worker
            // (see `worker::push_admitted`). The worker layer drops the
            // runnable if the pool stopped meanwhile.
            crate::worker::push_admitted(&self.shared, queued.runnable);
        }
        self.drain_if_stopped();
    }

    /// If the pool has stopped, cancels (drops) every task waiting in a FIFO.
    fn drain_if_stopped(&self) {
        if self.shared.is_stopped() {
            // Dropping runnables counts their tasks as cancelled in this pool.
            crate::runtime::context::draining(&self.shared, || drop(self.arbiter.drain()));
        }
    }
}

/// The pool tells its fairness state when it stops, so queued group tasks
/// are cancelled even if no group operation follows.
impl Attachment for Fair {
    fn pool_stopped(&self) {
        self.drain_if_stopped();
    }
}

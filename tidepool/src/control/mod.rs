//! Concurrency control: running slots, the policies that decide when threads
//! are added or retired, and the signal the monitor thread (`crate::monitor`,
//! a layer above) sleeps on. Nothing here starts a thread or knows the pool.
//!
//! * `slots`: the slot counters and per-worker task status (the protocol).
//! * `policy`: pure decision functions, one per [`Controller`].
//! * `signal`: how workers wake the monitor, and what it reports back.
//! * `stuck`: when a pool with every thread blocked counts as stuck.
//! * `presumption`: what a pool learned per kind of task, and when its
//!   tasks are presumed blocking (pure decisions on a kind's record).
//! * `growth`: the growth climb: how far a look may raise a kind's
//!   presumption cap, only while its completions per second rise with it
//!   (lock convoys stay small).
//! * `hold`: what happens to a worker back from its block that computes
//!   again while every slot is taken (held until a slot is its own).
//! * `declared`: when a declared blocking section gives its slot away
//!   (past its grace, or asleep sooner).
//! * `fairness`: which queue a worker's pick starts with, every 61st pick.
//! * `pace`: how long the monitor sleeps between its ticks.
//! * `spare`: when a thread without a slot may start, and when a spare
//!   parked worker is kept for the next presumed task.
//! * `spawn_order`: whether a task spawned or woken on a worker goes on
//!   its deque (closures; a future only onto an empty one) or the lane.
//! * `placement`: which runnable worker a thread about to leave its CPU
//!   idle pulls onto it.
//! * `sentinel`: which pools have CPU sentinels, and how often one looks.
//! * `ablation`: the switches that turn one mechanism off, for the lab's
//!   table of what each one buys.

/// Why a worker thread was started (each start is counted under its reason in
/// [`Metrics`](crate::Metrics)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StartReason {
    /// New work and a free slot, no parked worker (from `spawn`, or the
    /// monitor picking up work nobody was woken for).
    Demand,
    /// Replacing workers the monitor found blocked.
    Compensation,
    /// A policy (Gradual, HillClimbing) raised the number of slots.
    Policy,
    /// A burst of blocking work: replacements beyond one per blocked worker.
    Burst,
    /// Started parked at build, up to `min_threads`.
    Floor,
    /// A slot lent to queued work under the quantum rule.
    Quantum,
    /// A worker started a task presumed blocking (its kind blocked before)
    /// and gave its slot to the queued work.
    Presumed,
    /// A spare parked thread, after a task presumed blocking took the last
    /// parked one.
    Spare,
}

impl StartReason {
    /// The reason's name in events (`trace`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StartReason::Demand => "demand",
            StartReason::Compensation => "compensation",
            StartReason::Policy => "policy",
            StartReason::Burst => "burst",
            StartReason::Floor => "min_threads",
            StartReason::Quantum => "quantum",
            StartReason::Presumed => "presumed",
            StartReason::Spare => "spare",
        }
    }
}

pub(crate) mod ablation;
pub(crate) mod back_from_block;
mod burst;
pub(crate) mod declared;
pub(crate) mod fairness;
pub(crate) mod growth;
mod hill_climb;
pub(crate) mod hold;
pub(crate) mod pace;
pub(crate) mod placement;
pub(crate) mod policy;
pub(crate) mod presumption;
mod quantum;
pub(crate) mod sentinel;
pub(crate) mod signal;
pub(crate) mod slots;
pub(crate) mod spare;
pub(crate) mod spawn_order;
pub(crate) mod stuck;

use std::time::Duration;

/// The policy that decides when a pool adds or retires threads.
///
/// ```
/// use std::time::Duration;
/// use tidepool::{Controller, Pool};
///
/// // A classic capped pool of 10 threads that never grows.
/// let fixed = Pool::builder().concurrency(10).controller(Controller::Fixed).build().unwrap();
/// // A pool that adds one thread per 500 ms while queued work makes no progress.
/// let gradual = Pool::builder()
///     .controller(Controller::Gradual { interval: Duration::from_millis(500) })
///     .build()
///     .unwrap();
/// # drop((fixed, gradual));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Controller {
    /// The default. `concurrency` workers run; a worker the kernel reports
    /// blocked (sleeping or waiting on I/O or a lock, for longer than the
    /// monitor interval, while work waits) gives its slot to another worker,
    /// woken or started at once. While queued work keeps blocking in turn (a
    /// burst of blocking requests), the replacements per monitor tick double
    /// (1, 2, 4, ... per blocked worker), so 500 such items all start within
    /// a few ticks; the first worker found computing ends the burst. A
    /// CPU-bound task never causes a thread to be added.
    ///
    /// The pool also remembers which kinds of work item blocked in it (a
    /// kind is the closure's type: in effect one per `spawn_fn` call site;
    /// each pool learns for itself). A work item of a kind seen blocking,
    /// and not seen computing since, is *presumed
    /// blocking* (`Metrics::presumed_blocking`): spawned, it is handed to a
    /// parked worker or a thread started for it, and runs without a slot,
    /// as tokio's `spawn_blocking` would run it, but without being told; a
    /// worker that finds one queued gives its slot on at once and hands two
    /// more queued ones a thread each, so a queue of them starts as a tree.
    /// When one takes the last parked worker, the pool starts a spare that
    /// parks (`Metrics::threads_started_spare`), so the next one is woken
    /// onto a thread rather than waiting for a thread to start.
    /// No more items of a kind run presumed at once than its cap, which
    /// rests on what the monitor sees now: 2 to begin with, then twice
    /// those it finds asleep at each look while they all wait (so they
    /// double at every look, a quarter of an interval apart while they
    /// grow), falling back as they wake or end. The monitor judges each
    /// presumed item while it runs: one that keeps a core busy
    /// (`Metrics::presumptions_failed`) is counted against the slots again,
    /// and its kind stops being presumed at once, until it is seen blocking
    /// again (a second wrong guess: for good). Items of the kind that keep
    /// ending within an eighth of a monitor interval pause it too. A kind
    /// whose items also wait for the pool's own tasks (a join, `block_on`,
    /// a scope) is never presumed: those waits help on a slot, which a
    /// presumed item does not hold.
    /// Async tasks are never presumed: they should not block.
    #[default]
    Adaptive,
    /// Exactly `concurrency` threads; never adds any. Reproduces a classic
    /// capped pool (`max_threads` defaults to `concurrency`).
    Fixed,
    /// Adds one running slot per `interval` while queued work makes no
    /// progress, and gives them back when the queue drains: how runtime pools
    /// that deliberately delay thread creation behave.
    Gradual {
        /// How often a slot may be added.
        interval: Duration,
    },
    /// Moves the number of running slots between `concurrency` and
    /// `max_threads` to maximise completions per second, on top of the
    /// `Adaptive` replacement of blocked workers.
    HillClimbing,
}

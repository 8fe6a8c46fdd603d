//! A task presumed blocking (`control::presumption`), from its start to
//! the verdict on its kind: did it wait, end short, or compute?
//!
//! The monitor may judge it while it runs (it computes: its kind stops
//! being presumed at once, and its worker is counted against the slots
//! again). Whoever judges it first takes the worker entry's mark of the
//! presumed task (`Entry::presumed`, the task's status tick): the monitor
//! with a compare-and-swap, the task's end with a swap, so a task is
//! judged once and counted as a wrong guess at most once.
//!
//! The verdict at the end is recorded when the task ends, inside its last
//! poll and before its output reaches its `JoinHandle`
//! (`context::count_task_end`), not when the worker gets back from running
//! it: a caller that joins a batch of presumed tasks and spawns the next
//! batch at once must find the kind already judged. Judged after the run
//! instead, the next batch was spawned (and presumed again) before the
//! first batch's workers, preempted on a loaded machine, had recorded that
//! it computed (`tests/control_presumed.rs` failed about 1 run in 15 on
//! it).

use super::kinds::Kind;
use super::Shared;
use crate::control::presumption::{judge_end, Ended};
use crate::metrics::ThreadCounters;
use crate::sys::ThreadProbe;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What a worker read as it last parked (`WorkerContext::at_park`), for a
/// presumed task handed to it there:
/// the baselines it is judged against, without reads before it starts.
/// Empty for a task the worker took itself (it ran others since).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AtPark {
    /// The thread's run delay (time runnable, waiting for a core).
    pub(crate) run_delay: Option<Duration>,
    /// The thread's CPU time.
    pub(crate) cpu: Option<Duration>,
}

/// A presumed task running on this worker: what its end is judged by.
/// Kept in the worker's context (`WorkerContext::presumed_run`) while the
/// task runs, and taken by its end, so it is judged exactly once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PresumedRun {
    kind: Kind,
    /// Whether the task holds one of its kind's presumed places, to be
    /// given back with the verdict (`KindTable::presumption_over`).
    held: bool,
    /// The worker entry the task runs on, and the task's status tick: the
    /// entry's mark (`Entry::presumed`) while nobody judged it.
    index: usize,
    tick: u64,
    cpu_before: Option<Duration>,
    started: Instant,
    /// The thread's run delay when it parked or started, if read then.
    run_delay_before: Option<Duration>,
}

impl PresumedRun {
    /// A presumed task of `kind` starting now, as task `tick` of the entry
    /// at `index`, on the thread `probe` reads. `at_park` has the thread's
    /// run delay and CPU time as it parked, if the task was handed to it
    /// there and they were read then (a read here would put a file read
    /// and a system call before the task).
    pub(crate) fn start(
        kind: Kind,
        held: bool,
        (index, tick): (usize, u64),
        probe: &ThreadProbe,
        at_park: AtPark,
    ) -> Self {
        PresumedRun {
            kind,
            held,
            index,
            tick,
            // As it parked (the wake-up since is a few microseconds), else
            // read here, never when the thread started: its start hook is
            // not the task's CPU. A start hook's 20 ms, charged to a 5 ms
            // sleep, marked a kind that blocks as one that computes, never
            // presumed again.
            cpu_before: at_park.cpu.or_else(|| probe.cpu_time()),
            started: Instant::now(),
            run_delay_before: at_park.run_delay,
        }
    }

    /// Judges the task, which just ended (or was dropped unrun), unless the
    /// monitor judged it while it ran; counts a wrong guess in `shared`'s
    /// metrics and gives its place back to its kind with the verdict.
    pub(crate) fn end(self, shared: &Shared, probe: &ThreadProbe) {
        let mark = &shared.threads.entry(self.index).presumed;
        let ours = mark
            .compare_exchange(self.tick, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        let what = if ours {
            self.judge(shared, probe)
        } else {
            None
        };
        if self.held {
            shared.kinds.presumption_over(self.kind, what);
        }
        // Counted after the kind's record: whoever reads the counter sees
        // the verdict in the kind too.
        if what == Some(Ended::Computed) {
            ThreadCounters::bump(&shared.threads.counters.presumptions_failed);
            shared.presumption_failed(self.kind);
        }
    }

    /// What the task did (`presumption::judge_end`).
    fn judge(&self, shared: &Shared, probe: &ThreadProbe) -> Option<Ended> {
        let wall = self.started.elapsed();
        let cpu = match (self.cpu_before, probe.cpu_time()) {
            (Some(before), Some(after)) => Some(after.saturating_sub(before)),
            _ => None,
        };
        // The time it waited runnable for a core, read only when the CPU
        // time alone leaves it open (a file read). Counted from when the
        // thread parked or started, so a wait for a core before the task
        // counts too: that only lowers the bar for a task that used a whole
        // interval of CPU.
        let waited_for_core = || match (self.run_delay_before, probe.run_delay()) {
            (Some(before), Some(after)) => Some(after.saturating_sub(before)),
            _ => None,
        };
        judge_end(cpu, wall, shared.config.monitor_interval, waited_for_core)
    }
}

//! A task presumed blocking (`runtime::kinds`), from its start to the
//! verdict on its kind: did it wait, end short, or compute?
//!
//! The verdict is recorded when the task ends, inside its last poll and
//! before its output reaches its `JoinHandle` (`context::count_task_end`),
//! not when the worker gets back from running it: a caller that joins a
//! batch of presumed tasks and spawns the next batch at once must find the
//! kind already judged. Judged after the run instead, the next batch was
//! spawned (and presumed again) before the first batch's workers, preempted
//! on a loaded machine, had recorded that it computed
//! (`tests/control_presumed.rs` failed about 1 run in 15 on it).

use super::kinds::{Kind, Presumed};
use super::Shared;
use crate::control::policy::BUSY_CPU_SHARE;
use crate::metrics::ThreadCounters;
use crate::sys::ThreadProbe;
use std::time::{Duration, Instant};

/// A presumed task that ends within this share of a monitor interval
/// (125 µs at the default 1 ms) counts against its kind's credit
/// (`runtime::kinds`): the items of a lock convoy take microseconds, while
/// blocking worth a thread of its own takes a good part of an interval.
const SHORT_SHARE: u32 = 8;

/// A presumed task running on this worker: what its end is judged by.
/// Kept in the worker's context (`WorkerContext::presumed_run`) while the
/// task runs, and taken by its end, so it is judged exactly once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PresumedRun {
    kind: Kind,
    /// Whether the task holds one of its kind's presumed places, to be
    /// given back with the verdict ([`Kind::presumption_over`]).
    held: bool,
    cpu_before: Option<Duration>,
    started: Instant,
    /// The thread's run delay when it parked or started, if read then.
    run_delay_before: Option<Duration>,
}

impl PresumedRun {
    /// A presumed task of `kind` starting now on the thread `probe` reads.
    /// `run_delay_before` is the thread's run delay when it parked or
    /// started, if it was read then (a read here would put a file read
    /// before the task).
    pub(crate) fn start(
        kind: Kind,
        held: bool,
        probe: &ThreadProbe,
        run_delay_before: Option<Duration>,
    ) -> Self {
        PresumedRun {
            kind,
            held,
            // Read here, not when the thread parked or started: what it did
            // since (its start hook, hand-offs) is not the task's CPU. A
            // start hook's 20 ms, charged to a 5 ms sleep, marked a kind
            // that blocks as one that computes, never presumed again.
            cpu_before: probe.cpu_time(),
            started: Instant::now(),
            run_delay_before,
        }
    }

    /// Judges the task, which just ended (or was dropped unrun), counts a
    /// wrong guess in `shared`'s metrics and gives its place back to its
    /// kind with the verdict.
    pub(crate) fn end(self, shared: &Shared, probe: &ThreadProbe) {
        let wall = self.started.elapsed();
        let cpu = match (self.cpu_before, probe.cpu_time()) {
            (Some(before), Some(after)) => Some(after.saturating_sub(before)),
            _ => None,
        };
        let interval = shared.config.monitor_interval;
        // The time it waited runnable for a core, read only when the CPU
        // time alone leaves it open (a file read). Counted from when the
        // thread parked or started, so a wait for a core before the task
        // counts too: that only lowers the bar for a task that used a whole
        // interval of CPU.
        let waited_for_core = || match (self.run_delay_before, probe.run_delay()) {
            (Some(before), Some(after)) => Some(after.saturating_sub(before)),
            _ => None,
        };
        let what = match cpu {
            Some(cpu) if computed(cpu, wall, interval, waited_for_core) => Some(Presumed::Computed),
            // Far shorter than anything the monitor would have caught: a
            // thread spent on a task that hardly waited (a convoy's item).
            _ if wall < interval / SHORT_SHARE => Some(Presumed::Short),
            // Long enough that the monitor would have caught it blocked.
            _ if wall >= interval => Some(Presumed::Waited),
            // In between (a wait of a few hundred microseconds): no
            // evidence either way.
            _ => None,
        };
        if self.held {
            self.kind.presumption_over(what);
        }
        // Counted after the kind's record: whoever reads the counter sees
        // the verdict in the kind too.
        if what == Some(Presumed::Computed) {
            ThreadCounters::bump(&shared.threads.counters.presumptions_failed);
            shared.presumption_failed(self.kind);
        }
    }
}

/// Whether a presumed task that ran for `wall` and used `cpu` of it
/// computed: at least a monitor interval of CPU, and a CPU share a blocked
/// task never reaches ([`BUSY_CPU_SHARE`]) of the time it could run: its
/// wall time less what `waited_for_core` says it spent runnable waiting for
/// a core (asked only when the share of the whole wall time falls short).
/// Without that discount, on a loaded machine a computing task got less
/// than the share of its wall time, was taken for blocking, and was
/// presumed again: more CPU-bound threads where the cores were already
/// short (`tests/control_presumed.rs` failed 1 run in 20 on it).
fn computed(
    cpu: Duration,
    wall: Duration,
    interval: Duration,
    waited_for_core: impl FnOnce() -> Option<Duration>,
) -> bool {
    let busy_share_of = |time: Duration| cpu.as_secs_f64() >= time.as_secs_f64() * BUSY_CPU_SHARE;
    if cpu < interval {
        return false;
    }
    if busy_share_of(wall) {
        return true;
    }
    waited_for_core().is_some_and(|waited| busy_share_of(wall.saturating_sub(waited)))
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_millis(1);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_task_that_used_a_quarter_of_its_wall_time_computed() {
        let unasked = || -> Option<Duration> { panic!("the CPU share decided") };
        assert!(computed(ms(5), ms(20), INTERVAL, unasked));
        assert!(computed(ms(20), ms(20), INTERVAL, unasked));
    }

    #[test]
    fn a_task_under_a_monitor_interval_of_cpu_did_not() {
        let unasked = || -> Option<Duration> { panic!("too little CPU decided") };
        assert!(!computed(
            Duration::from_micros(900),
            ms(1),
            INTERVAL,
            unasked
        ));
    }

    #[test]
    fn time_spent_waiting_for_a_core_is_not_held_against_a_computing_task() {
        // 3 ms of CPU in 20 ms, 16 of them runnable on a loaded machine:
        // it computed whenever it could.
        assert!(computed(ms(3), ms(20), INTERVAL, || Some(ms(16))));
        // The same, asleep for 16 ms instead: it blocked.
        assert!(!computed(ms(3), ms(20), INTERVAL, || Some(Duration::ZERO)));
        // Nothing to read the run delay from: judged by the wall time.
        assert!(!computed(ms(3), ms(20), INTERVAL, || None));
    }
}

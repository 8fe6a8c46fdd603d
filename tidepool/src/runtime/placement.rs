//! Pulling a runnable worker onto a CPU about to idle: the readings and
//! the move. Which worker, if any, is `control::placement`'s decision
//! (its design note says why the pool places threads at all).

use crate::control::ablation::Mechanism;
use crate::control::placement::{to_pull, Runnable};
use crate::control::slots::Phase;
use crate::runtime::Shared;
use crate::sync::lock;
use crate::sys::ThreadState;

/// The most workers read per look (one `stat` read each, 2-3 µs): the
/// ones in a task first, then those computing beyond the slots.
const MOST_READ: usize = 8;

impl Shared {
    /// From a pool thread about to leave its CPU idle (the monitor before
    /// it sleeps, a worker before it parks; `own`: the caller's thread id
    /// if it is a worker, left out of the readings): pulls one of the
    /// pool's runnable workers onto this CPU if none is on it and two or
    /// more share another (`control::placement::to_pull`). True if one
    /// was moved.
    ///
    /// Only while every slot is taken, two or more workers are at work
    /// besides the caller, and one of them has had its slot given away:
    /// otherwise a CPU idles because there is less work than cores, or
    /// the workers at work are no more than the cores, and nothing is
    /// read (the check is a few loads).
    pub(crate) fn pull_a_worker_here(&self, own: Option<i32>) -> bool {
        if !self.config.switches.on(Mechanism::PullHere)
            || self.slots.counts().active < self.slots.target()
        {
            return false;
        }
        let entries = self.threads.used();
        let at_work = |phase: Phase| {
            entries
                .iter()
                .filter(move |entry| entry.status.load().phase() == phase && !entry.hold.is_asked())
        };
        // More runnable workers than cores come only from workers whose
        // slot was given away (back from a block, or presumed): none, and
        // the slots' holders are one per core at most.
        let callers = usize::from(own.is_some());
        if at_work(Phase::Blocked).next().is_none()
            || at_work(Phase::InTask)
                .chain(at_work(Phase::Blocked))
                .take(2 + callers)
                .count()
                < 2 + callers
        {
            return false;
        }
        let Some(here) = crate::sys::current_cpu() else {
            return false;
        };
        let mut runnable = [Runnable { tid: 0, cpu: 0 }; MOST_READ];
        let mut found = 0;
        let candidates = at_work(Phase::InTask).chain(at_work(Phase::Blocked));
        for entry in candidates.take(MOST_READ + callers) {
            let Some(probe) = lock(&entry.probe).clone() else {
                continue;
            };
            let tid = probe.tid();
            if Some(tid) == own {
                continue;
            }
            if let (ThreadState::Running, Some(cpu)) = probe.state_and_cpu() {
                if cpu == here {
                    return false;
                }
                runnable[found] = Runnable { tid, cpu };
                found += 1;
                if found == MOST_READ {
                    break;
                }
            }
        }
        to_pull(here, &runnable[..found]).is_some_and(|tid| crate::sys::pull_to_this_cpu(tid, here))
    }
}

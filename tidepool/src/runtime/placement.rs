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
    /// Not while CPU sentinels watch (`control::placement`'s design
    /// note). Only while every slot is taken, two or more workers are at work
    /// besides the caller, and one of them has had its slot given away:
    /// otherwise a CPU idles because there is less work than cores, or
    /// the workers at work are no more than the cores, and nothing is
    /// read (the check is a few loads).
    pub(crate) fn pull_a_worker_here(&self, own: Option<i32>) -> bool {
        if !self.config.switches.on(Mechanism::PullHere)
            || self.monitor.sentinels_watch()
            || self.slots.counts().active < self.slots.target()
        {
            return false;
        }
        // One pass over the status words: the workers in a task, then
        // those whose slot was given away (read in that order).
        let mut in_task = [0usize; MOST_READ];
        let mut given_away = [0usize; MOST_READ];
        let (mut tasks, mut away) = (0, 0);
        for (index, entry) in self.threads.used().iter().enumerate() {
            if entry.hold.is_asked() {
                continue;
            }
            let (list, len) = match entry.status.load().phase() {
                Phase::InTask => (&mut in_task, &mut tasks),
                Phase::Blocked => (&mut given_away, &mut away),
                Phase::Idle => continue,
            };
            if *len < MOST_READ {
                list[*len] = index;
                *len += 1;
            }
        }
        // More runnable workers than cores come only from workers whose
        // slot was given away (back from a block, or presumed): none, and
        // the slots' holders are one per core at most.
        if away == 0 || tasks + away < 2 + usize::from(own.is_some()) {
            return false;
        }
        let Some(here) = crate::sys::current_cpu() else {
            return false;
        };
        let mut runnable = [Runnable { tid: 0, cpu: 0 }; MOST_READ];
        let mut own_cpus = [0u64; MOST_READ];
        let mut found = 0;
        let candidates = in_task[..tasks].iter().chain(&given_away[..away]);
        for &index in candidates.take(MOST_READ) {
            let Some(probe) = lock(&self.threads.entry(index).probe).clone() else {
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
                own_cpus[found] = self.threads.entry(index).hold.own_cpus();
                found += 1;
            }
        }
        let Some(tid) = to_pull(here, &runnable[..found]) else {
            return false;
        };
        let own = runnable[..found]
            .iter()
            .zip(own_cpus)
            .find_map(|(r, own)| (r.tid == tid).then_some(own))
            .unwrap_or(0);
        crate::sys::pull_to_this_cpu(tid, here, own)
    }
}

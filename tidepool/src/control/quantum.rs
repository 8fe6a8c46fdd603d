//! The quantum rule of the `Adaptive` controller (`Builder::quantum`):
//! when every slot has been held by the same computing task for longer
//! than the quantum and work is queued, one slot is lent to the queue, and
//! taken back when the queue drains or the lent slot computes too. A pure
//! function of the tick's [`Sample`]; `control::policy` calls it when no
//! burst owns the target, and its tests script samples and a fake clock
//! there.

use super::policy::{Decision, Limits, Sample};
use std::time::Duration;

/// The quantum rule's memory between ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Lend {
    /// After a lend was refused (the lent worker found only computing work
    /// queued) or its slot computed too: no new lend before this
    /// `Sample::now`, a quantum later, unless a worker is found blocked
    /// first (and none while more slots than `concurrency` are held: the
    /// lent slot's computing task still runs). Lending at once would only
    /// add a CPU-bound thread; never lending again would leave work queued
    /// after the refusal waiting as long as the computing tasks run.
    no_lend_until: Option<Duration>,
}

impl Lend {
    /// The quantum rule (`Builder::quantum`): when every slot has been held
    /// by the same computing task for longer than the quantum and work is
    /// queued, lend one slot; end the lend when the queue drains, or when
    /// the lent slot computes too (then lend again only a quantum later, or
    /// once a worker blocks).
    pub(super) fn quantum(&mut self, limits: &Limits, sample: &Sample, decision: &mut Decision) {
        let Some(quantum) = limits.quantum else {
            return;
        };
        if !decision.mark_blocked.is_empty() {
            self.no_lend_until = None;
        } else if sample.lend_refused {
            self.no_lend_until = Some(sample.now + quantum);
        }
        // Counted on the CPU evidence, not on runnable alone: the lent
        // worker refuses work of a kind known to compute, and the kind is
        // learned on that evidence. Lent on runnable alone, in a tick where
        // the evidence was not in yet (a loaded machine, the tasks short of
        // a core), the slot went to a third task of the same CPU-bound kind
        // (`running_workers_never_exceed_the_slots_under_cpu_load`, 2 of 45
        // runs beside two CPU spinners).
        let long_computing = sample
            .in_task
            .iter()
            .filter(|w| w.computed && w.in_task_for >= quantum)
            .count();
        if sample.lent {
            let lent_slot_computes = long_computing > limits.concurrency;
            if sample.queued == 0 || lent_slot_computes {
                if lent_slot_computes {
                    self.no_lend_until = Some(sample.now + quantum);
                }
                decision.lend = Some(false);
                decision.set_target = Some(limits.concurrency);
            }
        } else if self.no_lend_until.is_none_or(|until| sample.now >= until)
            // A worker whose lent slot went to computing work still holds
            // it until that task ends: lending again meanwhile would add a
            // second CPU-bound thread beyond the slots, and a third...
            && sample.slots.active <= limits.concurrency
            && sample.queued > 0
            && sample.target == limits.concurrency
            && long_computing >= limits.concurrency
        {
            decision.lend = Some(true);
            decision.set_target = Some(limits.concurrency + 1);
        }
    }
}

//! The quantum rule of the `Adaptive` controller (`Builder::quantum`):
//! when every slot has been held by the same computing task for longer
//! than the quantum and work is queued, one slot is lent to the queue, and
//! taken back when the queue drains or the lent slot computes too. A pure
//! function of the tick's [`Sample`]; `control::policy` calls it when no
//! burst owns the target. Its tests below script samples and a fake clock
//! through the policy.

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

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::super::policy::tests::*;
    use super::super::policy::*;
    use super::super::Controller;

    fn quantum_limits() -> Limits {
        Limits {
            quantum: Some(10 * MS),
            ..wide_limits()
        }
    }

    /// A worker found computing for `for_ms`, its CPU time in evidence.
    fn computing(index: usize, for_ms: u64) -> WorkerView {
        WorkerView {
            computed: true,
            ..worker(index, for_ms, RUNNABLE)
        }
    }

    #[test]
    fn the_quantum_lends_nothing_while_the_cpu_evidence_is_not_in() {
        let mut policy = Policy::new(Controller::Adaptive);
        let limits = quantum_limits();
        // Runnable at every probe for a quantum, but short of a core so far:
        // the lent slot could go to a third task of the same kind.
        let starved = |index| WorkerView {
            computed: false,
            ..computing(index, 11)
        };
        let s = sample(vec![starved(0), starved(1)], 3);
        assert_eq!(policy.decide(&limits, &s).lend, None);
        // The evidence in for both: lend.
        let s = sample(vec![computing(0, 12), computing(1, 12)], 3);
        assert_eq!(policy.decide(&limits, &s).lend, Some(true));
    }

    #[test]
    fn the_quantum_lends_one_slot_when_computing_tasks_hold_every_slot() {
        let mut policy = Policy::new(Controller::Adaptive);
        let limits = quantum_limits();
        // Not yet a quantum: no lend.
        let young = sample(vec![computing(0, 5), computing(1, 5)], 3);
        assert_eq!(policy.decide(&limits, &young).lend, None);
        // Every slot computing for a quantum, work queued: lend one.
        let s = sample(vec![computing(0, 11), computing(1, 11)], 3);
        let d = policy.decide(&limits, &s);
        assert_eq!((d.lend, d.set_target), (Some(true), Some(3)));
        assert_eq!(d.wake, 1);
        // Nothing queued, or the quantum off: no lend.
        assert_eq!(
            policy.decide(&limits, &sample(s.in_task.clone(), 0)).lend,
            None
        );
        let off = Limits {
            quantum: None,
            ..limits
        };
        assert_eq!(
            Policy::new(Controller::Adaptive).decide(&off, &s).lend,
            None
        );
    }

    #[test]
    fn the_lend_ends_when_the_queue_drains() {
        let mut policy = Policy::new(Controller::Adaptive);
        let mut s = sample(vec![computing(0, 20), computing(1, 20)], 0);
        s.lent = true;
        s.target = 3;
        let d = policy.decide(&quantum_limits(), &s);
        assert_eq!((d.lend, d.set_target), (Some(false), Some(2)));
    }

    #[test]
    fn a_refused_lend_is_offered_again_a_quantum_later_or_when_a_worker_blocks() {
        let mut policy = Policy::new(Controller::Adaptive);
        let limits = quantum_limits();
        let mut s = sample(vec![computing(0, 30), computing(1, 30)], 5);
        s.now = 100 * MS;
        s.lend_refused = true;
        assert_eq!(policy.decide(&limits, &s).lend, None);
        // Within a quantum of the refusal: not again.
        s.lend_refused = false;
        s.now = 105 * MS;
        assert_eq!(policy.decide(&limits, &s).lend, None, "not yet");
        // A quantum later: work queued since may be of another kind.
        s.now = 110 * MS;
        assert_eq!(policy.decide(&limits, &s).lend, Some(true));
        // Refused again, then a worker is found blocked: at once.
        let mut refused = sample(vec![computing(0, 40), computing(1, 40)], 5);
        refused.now = 120 * MS;
        refused.lend_refused = true;
        policy.decide(&limits, &refused);
        let mut blocked = sample(vec![worker(0, 5, SLEEPING), computing(1, 40)], 5);
        blocked.now = 121 * MS;
        policy.decide(&limits, &blocked);
        s.now = 122 * MS;
        assert_eq!(policy.decide(&limits, &s).lend, Some(true));
    }

    #[test]
    fn a_lent_slot_that_computes_too_ends_the_lend_for_a_quantum() {
        let mut policy = Policy::new(Controller::Adaptive);
        let limits = quantum_limits();
        let mut s = sample(
            vec![computing(0, 30), computing(1, 30), computing(2, 11)],
            5,
        );
        s.now = 100 * MS;
        s.lent = true;
        s.target = 3;
        let d = policy.decide(&limits, &s);
        assert_eq!((d.lend, d.set_target), (Some(false), Some(2)));
        // Every slot computing again: no new lend within the quantum...
        let mut again = sample(vec![computing(0, 40), computing(1, 40)], 5);
        again.now = 109 * MS;
        assert_eq!(policy.decide(&limits, &again).lend, None);
        // ...nor after it while the lent slot's task still runs...
        let mut still = sample(
            vec![computing(0, 50), computing(1, 50), computing(2, 21)],
            5,
        );
        still.now = 110 * MS;
        assert_eq!(policy.decide(&limits, &still).lend, None);
        // ...but once it ended and gave its slot back.
        again.now = 111 * MS;
        assert_eq!(policy.decide(&limits, &again).lend, Some(true));
    }
}

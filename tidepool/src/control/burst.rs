//! The burst rule of the `Adaptive` controller: how many replacements
//! the monitor starts per blocked worker while work is queued, as a pure
//! function of the tick's [`Sample`] (`control::policy` calls it from
//! [`Policy::decide`](super::policy::Policy::decide); its tests below
//! script samples and a fake clock through it, with the samples
//! `control::policy`'s tests share).
//!
//! # Design note: bursts grow in proportion
//!
//! One replacement per blocked worker grows a pool by its slot count per
//! tick: 500 queued items that each block 200 ms on 2 slots would take 250
//! ticks to all start. So while work is queued and every worker the monitor
//! looks at blocks in turn, [`Burst`] multiplies the replacements: each tick
//! with new blocked workers (and none found computing) doubles the factor
//! (1, 2, 4, ... up to [`MAX_BURST_FACTOR`]) and raises the slot target by
//! the extra replacements. The first worker found computing, or an empty
//! queue, ends the burst: the target drops back to `concurrency`, and the
//! surplus workers give their slots back at their next task boundary. A
//! CPU-bound burst never starts it: its workers are runnable, not blocked.
//!
//! Nor does a burst grow while tasks are being presumed blocking (started
//! without a slot, a thread each: `control::presumption`): the workers that take
//! the queued work hand it threads themselves, and threads the burst
//! started for the same queue would find it empty.
//!
//! And a burst grows only as its growth climb allows (`control::growth`):
//! from the first tick with blocked workers, while the pool completes
//! nothing for 4 intervals it may grow at every tick; once tasks end, a
//! raise needs the pool's completions per second to have risen with the
//! target (a probe first). A lock convoy's workers, found asleep on the
//! lock, complete no faster for more threads: a convoy of a kind taught to
//! block started 460 burst threads before this. Not when most of the
//! workers found blocked at a tick sleep outside the process
//! ([`KernelView::waits_outside`](super::policy::KernelView::waits_outside): the kernel names a system call other
//! than a futex, a timer or a socket): such waits end on their own
//! however many wait beside them, and the burst grows unasked.
//!
//! Nor does a queue that *flows*: more than [`FLOWING_ENDS_PER_SLOT`] tasks
//! ending per slot per interval. Workers of a lock convoy (tiny items that
//! all take one mutex) sleep on the lock whenever its holder is preempted,
//! and the monitor finds one asleep now and then; each is replaced, but
//! doubling the replacements would pile threads onto the convoy (a lab run
//! reached 23-28 threads for 100,000 such items on 2 slots), where more
//! threads are slower, not faster. Items that really block end a few per
//! slot per interval at most.

use super::ablation::Mechanism;
use super::growth::Climb;
use super::policy::{to_u32, Limits, Sample, BUSY_CPU_SHARE};
use super::slots::StatusWord;
use std::time::Duration;

/// The largest burst factor: a tick may start up to this many replacements
/// per blocked worker. 64: 500 blocking items on 2 slots all start within
/// about eight ticks, while one tick can never start more than 64 threads
/// per worker it found blocked.
pub(crate) const MAX_BURST_FACTOR: usize = 64;

/// Tasks ended per slot per monitor interval above which the queue flows
/// and a burst does not grow (module docs). A slot whose tasks block for an
/// interval or more ends at most one per interval; 4 leaves room for
/// shorter blocks, and a convoy's tiny items end hundreds per interval.
pub(crate) const FLOWING_ENDS_PER_SLOT: u64 = 4;

/// The burst's memory between ticks (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Burst {
    /// Replacements per blocked worker in the next tick with blocked workers.
    factor: usize,
    /// Slots above `concurrency` the burst has raised the target by.
    pub(super) raised: usize,
    /// `Sample::ended` and `Sample::now` at the previous tick, to tell a
    /// flowing queue (module docs).
    last: Option<(u64, Duration)>,
    /// `Sample::presumed` at the previous tick.
    last_presumed: u64,
    /// The burst's growth climb (`control::growth`): the target it may
    /// raise to, while the pool's completions per second rise with it.
    /// Begun at the burst's first raise, dropped when the burst ends.
    climb: Option<Climb>,
}

impl Default for Burst {
    fn default() -> Self {
        Burst {
            factor: 1,
            raised: 0,
            last: None,
            last_presumed: 0,
            climb: None,
        }
    }
}

impl Burst {
    /// One tick of the burst rule (module docs); `blocked_now` workers were
    /// found blocked this tick, most of them waiting outside the process
    /// if `outside` ([`wait_outside`]). Returns a new target, if it changes.
    pub(super) fn step(
        &mut self,
        limits: &Limits,
        sample: &Sample,
        blocked_now: usize,
        outside: bool,
    ) -> Option<usize> {
        let computing = sample.in_task.iter().any(|w| {
            matches!(w.kernel, Some(k) if !k.waiting || k.cpu_share.is_some_and(|s| s >= BUSY_CPU_SHARE))
        });
        let ended_since = self
            .last
            .map_or(0, |(ended, _)| sample.ended.saturating_sub(ended));
        let flowing = self.last.is_some_and(|(ended, at)| {
            let intervals =
                sample.now.saturating_sub(at).as_nanos() / limits.threshold.as_nanos().max(1);
            let slots = sample.target as u64 * (intervals as u64).max(1);
            sample.ended.saturating_sub(ended) > FLOWING_ENDS_PER_SLOT * slots
        });
        self.last = Some((sample.ended, sample.now));
        let presuming = sample.presumed > self.last_presumed;
        self.last_presumed = sample.presumed;
        if sample.queued == 0 || computing || flowing || !limits.switches.on(Mechanism::Burst) {
            self.factor = 1;
            self.climb = None;
            if self.raised == 0 {
                return None;
            }
            self.raised = 0;
            return Some(limits.concurrency);
        }
        // Tasks presumed blocking since the last tick: the queued work is
        // of a kind known to block, and workers hand it threads as they
        // take it (doubling while they all wait: `control::presumption`).
        // Burst threads started for the same queue found it empty: 25 of
        // 225 threads idle for 200 items, beyond items + slots.
        if blocked_now == 0 || presuming {
            self.climb_within(limits, sample, ended_since);
            return None;
        }
        // Queued work the plain replacements (one per blocked worker) leave
        // unstarted, and threads that may still exist.
        let waiting = sample.queued.saturating_sub(blocked_now);
        let room = limits.max_threads.saturating_sub(sample.target);
        let extra = (blocked_now * (self.factor - 1)).min(waiting).min(room);
        // Raised only while the pool's completions per second rise with
        // the target (`control::growth`), from the burst's first tick with
        // blocked workers: a lock convoy's workers, found asleep on the
        // lock, complete no faster for more threads (a convoy of a kind
        // taught to block reached 512 threads, 460 of them the burst's,
        // before this). The factor doubles only with a raise.
        // Workers asleep outside the process (a sleep, a socket: the
        // kernel names the system call) complete their own waits however
        // many wait beside them (Little's law): the burst grows unasked.
        let allowed = if outside || !limits.switches.on(Mechanism::GrowthClimb) {
            self.climb = None;
            extra
        } else {
            let target = to_u32(sample.target);
            let (climb, ends) = match &mut self.climb {
                Some(climb) => (climb, to_u32(ended_since)),
                none => (none.insert(Climb::holding(sample.now, target)), 0),
            };
            climb.look(
                sample.now,
                (ends, None),
                target,
                to_u32(sample.target + extra),
                limits.threshold,
            );
            climb.level().saturating_sub(target) as usize
        };
        if extra == 0 {
            self.factor = (self.factor * 2).min(MAX_BURST_FACTOR);
            return None;
        }
        let extra = extra.min(allowed);
        if extra == 0 {
            return None;
        }
        self.factor = (self.factor * 2).min(MAX_BURST_FACTOR);
        self.raised += extra;
        Some(sample.target + extra)
    }

    /// A tick that raises nothing still counts its ends toward the burst's
    /// climb (it does not press: `Climb::look` with the target as it is).
    fn climb_within(&mut self, limits: &Limits, sample: &Sample, ended_since: u64) {
        if let Some(climb) = &mut self.climb {
            let target = to_u32(sample.target);
            climb.look(
                sample.now,
                (to_u32(ended_since), None),
                target,
                target,
                limits.threshold,
            );
        }
    }
}

/// Whether most of the workers `marked` blocked this tick sleep outside the
/// process (`KernelView::waits_outside`): a burst of them needs no climb.
/// False when none is marked, or the kernel named no system call.
pub(super) fn wait_outside(sample: &Sample, marked: &[(usize, StatusWord)]) -> bool {
    let outside = sample
        .in_task
        .iter()
        .filter(|w| marked.iter().any(|&(index, _)| index == w.index))
        .filter(|w| w.kernel.is_some_and(|k| k.waits_outside))
        .count();
    outside * 2 > marked.len()
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::super::policy::tests::*;
    use super::super::policy::*;
    use super::super::Controller;

    #[test]
    fn a_burst_doubles_its_replacements_while_every_worker_blocks() {
        let mut policy = Policy::new(Controller::Adaptive);
        let limits = wide_limits();
        let mut target = 2;
        let mut raises = Vec::new();
        for tick in 0..5 {
            let mut s = sample(vec![worker(0, 5, SLEEPING), worker(1, 5, SLEEPING)], 500);
            // Nothing ends, so the burst's climb (`control::growth`) lets
            // it grow at every tick once FREE_AFTER_INTERVALS passed.
            s.now = FREE * tick;
            s.target = target;
            s.threads = target;
            let d = policy.decide(&limits, &s);
            assert_eq!(d.mark_blocked.len(), 2);
            if let Some(t) = d.set_target {
                raises.push(t - target);
                target = t;
            }
            assert_eq!(d.burst, target > 2);
        }
        // Factor 1, 2, 4, 8, 16: extra replacements 0, 2, 6, 14, 30.
        assert_eq!(raises, [2, 6, 14, 30]);
        assert_eq!(target, 54);
        // The wakes fill the freed and raised slots.
        let mut s = sample(vec![worker(0, 5, SLEEPING), worker(1, 5, SLEEPING)], 500);
        s.now = FREE * 5;
        s.target = target;
        s.threads = target;
        let d = policy.decide(&limits, &s);
        assert_eq!(d.wake, d.set_target.unwrap() - s.slots.active + 2);
    }

    #[test]
    fn a_queue_that_flows_does_not_grow_a_burst() {
        // A lock convoy: workers found asleep on the lock every tick, while
        // tasks end by the hundred. Each blocked worker is replaced, one for
        // one, but the replacements never multiply.
        let mut policy = Policy::new(Controller::Adaptive);
        let limits = wide_limits();
        let mut ended = 0;
        for tick in 0..6u32 {
            let mut s = sample(vec![worker(0, 5, SLEEPING), worker(1, 5, SLEEPING)], 500);
            s.now = MS * tick;
            ended += 300;
            s.ended = ended;
            let d = policy.decide(&limits, &s);
            assert_eq!(d.mark_blocked.len(), 2, "each is still replaced");
            assert_eq!(d.set_target, None, "tick {tick}: no burst");
            assert!(!d.burst);
        }
        // The same blocked workers with nothing ending: the burst grows.
        let mut s = sample(vec![worker(0, 5, SLEEPING), worker(1, 5, SLEEPING)], 500);
        s.now = MS * 7;
        s.ended = ended;
        policy.decide(&limits, &s);
        s.now = MS * 7 + FREE;
        assert!(policy.decide(&limits, &s).set_target.is_some_and(|t| t > 2));
    }

    #[test]
    fn a_burst_does_not_grow_while_queued_work_is_presumed_blocking() {
        // Workers hand the queued items threads themselves (presumed
        // blocking): more threads from the burst would find the queue
        // empty. The blocked workers are still replaced one for one.
        let mut policy = Policy::new(Controller::Adaptive);
        let limits = wide_limits();
        for tick in 0..5u64 {
            let mut s = sample(vec![worker(0, 5, SLEEPING), worker(1, 5, SLEEPING)], 500);
            s.presumed = 10 * (tick + 1);
            let d = policy.decide(&limits, &s);
            assert_eq!(d.mark_blocked.len(), 2, "each is still replaced");
            assert_eq!(d.set_target, None, "tick {tick}: no burst");
        }
        // No more presumed since the last tick: the burst grows again.
        let mut s = sample(vec![worker(0, 5, SLEEPING), worker(1, 5, SLEEPING)], 500);
        s.presumed = 50;
        policy.decide(&limits, &s);
        s.now = FREE;
        assert!(policy.decide(&limits, &s).set_target.is_some_and(|t| t > 2));
    }

    #[test]
    fn a_worker_found_computing_ends_the_burst() {
        let mut policy = Policy::new(Controller::Adaptive);
        let limits = wide_limits();
        let mut s = sample(vec![worker(0, 5, SLEEPING), worker(1, 5, SLEEPING)], 500);
        policy.decide(&limits, &s);
        s.now = FREE;
        let raised = policy.decide(&limits, &s).set_target.unwrap();
        assert!(raised > 2);
        s.target = raised;
        s.in_task = vec![worker(0, 5, SLEEPING), worker(1, 5, RUNNABLE)];
        let d = policy.decide(&limits, &s);
        assert_eq!(d.set_target, Some(2), "back to concurrency");
        assert!(!d.burst);
        // And it starts over from one replacement per blocked worker.
        s.target = 2;
        s.in_task = vec![worker(0, 5, SLEEPING), worker(1, 5, SLEEPING)];
        assert_eq!(policy.decide(&limits, &s).set_target, None);
    }

    #[test]
    fn an_empty_queue_ends_the_burst_and_growth_stops_at_the_work_and_max_threads() {
        let mut policy = Policy::new(Controller::Adaptive);
        let wide = wide_limits();
        let blocked = || vec![worker(0, 5, SLEEPING), worker(1, 5, SLEEPING)];
        let mut s = sample(blocked(), 3);
        policy.decide(&wide, &s);
        s.now = FREE;
        // Factor 2: two extra wanted, but only one item waits beyond the two
        // plain replacements.
        assert_eq!(policy.decide(&wide, &s).set_target, Some(3));
        let mut s = sample(blocked(), 0);
        s.target = 3;
        assert_eq!(policy.decide(&wide, &s).set_target, Some(2));
        // Never past max_threads.
        let mut policy = Policy::new(Controller::Adaptive);
        let mut s = sample(blocked(), 500);
        policy.decide(&limits(), &s);
        s.now = FREE;
        let d = policy.decide(&limits(), &s);
        assert_eq!(d.set_target, Some(4), "max_threads is 4");
    }

    /// One tick of `policy` (wide limits) finding two workers in their
    /// task for 5 ms as `kernel` says, 500 tasks queued, at `tick` ms,
    /// with `ended` tasks ended so far and the slot target `target`.
    fn two_blocked(
        policy: &mut Policy,
        kernel: Option<KernelView>,
        tick: u32,
        ended: u64,
        target: usize,
    ) -> Decision {
        let mut s = sample(vec![worker(0, 5, kernel), worker(1, 5, kernel)], 500);
        s.now = MS * tick;
        s.ended = ended;
        s.target = target;
        s.threads = target;
        policy.decide(&wide_limits(), &s)
    }

    #[test]
    fn a_burst_grows_only_while_completions_rise_with_it() {
        // A lock convoy whose queue does not flow by the per-slot measure:
        // workers found asleep on the lock at every tick, 6 tasks ending
        // per interval whatever the threads. One probe (the climb's first
        // judgement, `control::growth`), then held.
        let mut policy = Policy::new(Controller::Adaptive);
        let mut target = 2;
        for tick in 0..100u32 {
            let d = two_blocked(&mut policy, SLEEPING, tick, 6 * u64::from(tick), target);
            assert_eq!(d.mark_blocked.len(), 2, "each is still replaced");
            target = d.set_target.unwrap_or(target);
        }
        assert_eq!(target, 4, "one probe");
        // Waits that complete in proportion to the threads (twice the ends
        // per interval at twice the target, still short of flowing): it
        // grows again.
        for tick in 100..104u32 {
            let ended = 594 + 12 * u64::from(tick - 99);
            let d = two_blocked(&mut policy, SLEEPING, tick, ended, target);
            target = d.set_target.unwrap_or(target);
        }
        assert!(target > 4, "{target}");
    }

    #[test]
    fn a_burst_of_workers_asleep_outside_the_process_grows_unjudged() {
        // The same flat completions as the convoy above, but the kernel
        // says the workers sleep in a timer or a socket, not a futex: no
        // climb, so the burst doubles at each tick that finds them blocked.
        let outside = Some(KernelView {
            waits_outside: true,
            ..SLEEPING.unwrap()
        });
        let mut policy = Policy::new(Controller::Adaptive);
        let mut target = 2;
        for tick in 0..6u32 {
            let d = two_blocked(&mut policy, outside, tick, 6 * u64::from(tick), target);
            target = d.set_target.unwrap_or(target);
        }
        assert!(target > 4, "grew past one probe within 6 ticks: {target}");
    }
}

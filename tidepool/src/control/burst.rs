//! The burst rule of the `Adaptive` controller: how many replacements
//! the monitor starts per blocked worker while work is queued, as a pure
//! function of the tick's [`Sample`] (`control::policy` calls it from
//! [`Policy::decide`](super::policy::Policy::decide); its tests script
//! samples and a fake clock there).
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

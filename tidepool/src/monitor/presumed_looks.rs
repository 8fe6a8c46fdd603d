//! The monitor's looks at tasks presumed blocking: each one asked about
//! through its probe, tallied per kind at each tick, how often the kernel
//! may be asked what an asleep one waits for (the ask token bucket), and
//! what the monitor does with what they found (`Monitor::judge_presumed`:
//! the verdicts of `control::presumption`, each kind's cap within what its
//! growth climb in `control::growth` allows).

use super::kernel::{recent_cpu_share, Reading, MAX_PROBE_BACKOFF};
use super::{Monitor, Track};
use crate::control::ablation::Mechanism;
use crate::control::back_from_block::Look;
use crate::control::growth::{Climb, Step};
use crate::control::policy::BUSY_CPU_SHARE;
use crate::control::presumption::{computes_while_running, look_cap};
use crate::control::slots::StatusWord;
use crate::runtime::kinds::Kind;
use crate::runtime::Shared;
use crate::sync::{lock, Arc, Ordering};
use crate::sys::{ThreadState, WaitsFor};
use std::time::{Duration, Instant};

/// How often the monitor may ask the kernel what an asleep presumed task
/// waits for (`Track::waits_for`: an open, a read and a close, 5-10 µs),
/// and how many asks it may save up: a sample of a kind's tasks says what
/// the kind waits for. Asking about every task cost the monitor 7 ms over
/// two bursts of 500 on one pool, and 12 ms over short-blocking's 2,000 items (twice its
/// busy time); 250 a second cost at most a fifth of a millisecond of each
/// second, and 4 saved let a burst's first looks ask at once.
const ASK_EVERY: Duration = Duration::from_millis(4);

pub(super) const ASKS_SAVED: u32 = 4;

/// What one look at a worker running a presumed task found.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PresumedLook {
    /// It sleeps: at this look, or at the last one if it was not asked
    /// now (asked less and less often while it sleeps).
    pub(super) asleep: bool,
    /// Asleep, and what it waits for, if the kernel was asked
    /// (`Track::waits_for`).
    waits: Option<WaitsFor>,
    /// It computes (`presumption::computes_while_running`).
    pub(super) computes: bool,
    /// Found runnable at this look, an interval or more after the monitor
    /// first saw it: a stall's runner if its kind ends nothing
    /// (`control::growth`, "A sibling runs").
    pub(super) runs: bool,
}

/// The presumed tasks seen at one tick, per kind (`presumption::Seen::Look`).
#[derive(Debug, Default)]
pub(super) struct PresumedLooks(Vec<KindLook>);

/// One kind's presumed tasks seen at one tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct KindLook {
    pub(super) kind: Kind,
    /// Seen running.
    pub(super) seen: u32,
    /// Of those, asleep.
    pub(super) asleep: u32,
    /// Of those, the kernel said (when asked, `Track::waits_for`) wait
    /// outside the process, and in a futex.
    pub(super) outside: u32,
    pub(super) in_process: u32,
}

impl KindLook {
    /// Whether the kind waits outside the process by this look: more than
    /// a quarter of its asleep tasks the kernel was asked about sleep
    /// outside, not in a futex; with none asked about, as `before`.
    ///
    /// A quarter, not a half: a futex wait is not always a sibling's (a
    /// mutex a thread outside the pool holds, a blocking client's reply),
    /// and while a share of a kind's tasks wait for the world, threads
    /// for them complete more. A convoy's waiters are all in the lock's
    /// futex, bar its holder if it holds the lock across a wait of its
    /// own (one of five or more).
    pub(super) fn waits_outside(&self, before: bool) -> bool {
        let asked = self.outside + self.in_process;
        if asked == 0 {
            before
        } else {
            self.outside * 4 > asked
        }
    }
}

impl PresumedLooks {
    /// Counts the presumed task of `entry`, seen as `look`.
    pub(super) fn tally(&mut self, entry: &crate::runtime::Entry, look: PresumedLook) {
        let kind = Kind::from_bits(entry.kind.load(Ordering::Relaxed));
        let at = match self.0.iter().position(|k| k.kind == kind) {
            Some(at) => at,
            None => {
                self.0.push(KindLook {
                    kind,
                    seen: 0,
                    asleep: 0,
                    outside: 0,
                    in_process: 0,
                });
                self.0.len() - 1
            }
        };
        let counts = &mut self.0[at];
        counts.seen += 1;
        counts.asleep += u32::from(look.asleep);
        counts.outside += u32::from(look.waits == Some(WaitsFor::Outside));
        counts.in_process += u32::from(look.waits == Some(WaitsFor::ThisProcess));
    }

    /// This tick's counts, leaving none.
    pub(super) fn take(&mut self) -> Vec<KindLook> {
        std::mem::take(&mut self.0)
    }
}

impl Monitor {
    /// How many asleep presumed tasks the kernel may be asked about at this
    /// tick, `now`: one more for each [`ASK_EVERY`] since the allowance
    /// last grew, at most [`ASKS_SAVED`].
    pub(super) fn asks_allowed(&mut self, now: Duration) -> u32 {
        let (left, since) = self.asks;
        let grown = now.saturating_sub(since).as_nanos() / ASK_EVERY.as_nanos();
        let grown = u32::try_from(grown).unwrap_or(u32::MAX);
        if grown > 0 {
            self.asks = ((left.saturating_add(grown)).min(ASKS_SAVED), now);
        }
        self.asks.0
    }
}

/// Looks at the worker of `entry`, which runs a presumed task (`track`
/// follows it), through its probe: is it asleep, and does it compute
/// (`presumption::computes_while_running`, over the time since its first
/// look, and since the last)? Asked at once when first seen, then every
/// tick while it runs, less and less often while it sleeps.
pub(super) fn look_at_presumed(
    entry: &crate::runtime::Entry,
    track: &mut Track,
    now: Instant,
    interval: Duration,
    classify: &mut u32,
) -> PresumedLook {
    let asleep_before = track.back_look.is_some_and(|l| l.asleep);
    if track.probe_wait > 0 {
        track.probe_wait -= 1;
        return PresumedLook {
            asleep: asleep_before,
            waits: track.waits_for.filter(|_| asleep_before),
            computes: false,
            runs: false,
        };
    }
    let Some(probe) = lock(&entry.probe).clone() else {
        return PresumedLook::default();
    };
    let state = probe.state();
    let cpu = probe.cpu_time();
    let previous = track.back_look;
    let asleep = match state {
        // No state letter: asleep if it used next to no CPU since the
        // last look.
        ThreadState::Unknown => previous
            .and_then(|p| recent_cpu_share((p.at, p.cpu?), (now, cpu?)))
            .is_some_and(|share| share < BUSY_CPU_SHARE),
        state => state.is_waiting(),
    };
    let look = Look {
        at: now,
        asleep,
        cpu,
        run_delay: None,
    };
    if previous.is_none() {
        track.cpu_at_since = cpu;
    }
    let first = Look {
        at: track.since,
        asleep: false,
        cpu: track.cpu_at_since,
        run_delay: None,
    };
    if !asleep && track.runnable_first.is_none() {
        // From here, how much it computed of the time it could run.
        track.runnable_first = Reading::now(&probe);
    }
    let computes = computes_while_running(first, previous, look, interval, || {
        track.computed_when_it_could(Some(&*probe))
    });
    track.back_look = Some(look);
    if asleep {
        track.backoff = (track.backoff * 2).min(MAX_PROBE_BACKOFF);
        track.probe_wait = track.backoff;
    } else {
        track.backoff = 1;
    }
    if asleep && state.is_waiting() && track.waits_for.is_none() && *classify > 0 {
        *classify -= 1;
        track.waits_outside(&probe);
    }
    PresumedLook {
        asleep,
        waits: track.waits_for.filter(|_| asleep),
        computes,
        runs: state == ThreadState::Running && now.duration_since(track.since) >= interval,
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_kind_waits_outside_once_more_than_a_quarter_asked_about_do() {
        let look = |outside, in_process| KindLook {
            kind: Kind::from_bits(0),
            seen: 8,
            asleep: 8,
            outside,
            in_process,
        };
        // A convoy: every waiter asked about is in the lock's futex.
        assert!(!look(0, 4).waits_outside(true));
        // Its holder asleep in a wait of its own, one of five: still a convoy.
        assert!(!look(1, 4).waits_outside(true));
        // Half sleep, half wait on mutexes held outside the pool
        // (short-blocking's kind): outside.
        assert!(look(2, 2).waits_outside(false));
        assert!(look(2, 5).waits_outside(false), "2 of 7 is over a quarter");
        // Nobody asked about: as the last verdict.
        assert!(look(0, 0).waits_outside(true));
        assert!(!look(0, 0).waits_outside(false));
    }
}

impl Monitor {
    /// Carries out what this tick's looks at presumed tasks found
    /// (`control::presumption`): a presumed task judged computing stops
    /// its kind's presumption at once, counts as a wrong guess, and its
    /// worker is held or counted against the slots again
    /// (`Shared::back_from_block`); then each kind's look
    /// sets its cap, within the level its growth climb allows `now`
    /// (`control::growth`: only while its completions per second rise with
    /// the cap), and a kind given more room has queued tasks handed
    /// threads (`worker::presume_queued`: their fan-out fills the room).
    /// `ended` is the pool's total of ended tasks, which a climb compares
    /// too while every task at work is of a held kind.
    /// True if a cap grew, or a climb gathers evidence (the next look
    /// should come soon).
    pub(super) fn judge_presumed(
        &mut self,
        shared: &Arc<Shared>,
        now: Duration,
        ended: u64,
    ) -> bool {
        let interval = shared.config.monitor_interval;
        for (index, seen) in std::mem::take(&mut self.presumed_unarmed) {
            arm_presumed(shared, index, seen);
        }
        for (index, seen) in std::mem::take(&mut self.presumed_computing) {
            if !shared.presumed_task_computes(index, seen.tick()) {
                continue;
            }
            // Judged computing over its run (`runtime::presumed`), not at
            // one look: held at once if every slot is taken. (Left to
            // the next looks, a burst of a kind learned as blocking that
            // computes ran uncounted for their 3 ms, and new tasks took
            // the slots: learned-then-computes went from 0 to 96 ms with
            // more than `concurrency + 2` computing.) Presumed tasks are
            // closures, never a service's async continuations.
            shared.back_from_block(index, seen, crate::control::hold::HOLD_AFTER);
        }
        let mut grew = false;
        let again = std::mem::take(&mut self.presume_again);
        self.climbs.retain(|(_, c)| !c.forgotten(now, interval));
        let climbs = &self.climbs;
        self.slot_ends
            .retain(|(k, _)| climbs.iter().any(|(c, _)| c == k));
        for look in self.presumed_looks.take() {
            let KindLook {
                kind, seen, asleep, ..
            } = look;
            // A task of the kind can run: nothing ending is a stall, not
            // a wait (`control::growth`, "A sibling runs").
            let sibling_runs = self.runnable.contains(&kind);
            // The ends since the last look, and what the look would set:
            // the climb says how far it may.
            let record = shared.kinds.take_ends(kind);
            let (cap, wants) = (record.cap(), look_cap(record, seen, asleep));
            let (climb, ends) = match self.climbs.iter_mut().position(|(k, _)| *k == kind) {
                Some(at) => (&mut self.climbs[at].1, record.ends()),
                None => {
                    self.climbs.push((kind, Climb::new(now, cap)));
                    (&mut self.climbs.last_mut().expect("just pushed").1, 0)
                }
            };
            let on_slots = self
                .slot_ends
                .iter()
                .position(|(k, _)| *k == kind)
                .map(|at| self.slot_ends.swap_remove(at).1);
            // While every task at work is of a held kind, the pool's ends
            // are theirs: a probe must raise them too.
            let pool = self.all_held.then_some(ended);
            // Its asleep tasks wait outside the process (a timer, a
            // socket): not a convoy, and the level follows the look.
            let step = if look.waits_outside(climb.waited_outside(now, interval))
                || !shared.config.switches.on(Mechanism::GrowthClimb)
            {
                climb.waits_outside(now, wants)
            } else {
                climb.look_in_pool(
                    now,
                    (ends, on_slots),
                    pool,
                    sibling_runs,
                    cap,
                    wants,
                    interval,
                )
            };
            grew |= step == Step::Gathering;
            let more_room = shared.kinds.looked(kind, seen, asleep, climb.level());
            grew |= more_room;
            // Queued tasks of the kind are handed threads when a look gives
            // it more room, and at each look after one that found some, as
            // long as it has room: room that nobody takes (every slot held
            // by a long task, its queued tasks out of the fan-outs' reach)
            // must not sit unused.
            let more_queued = || again.contains(&kind) && shared.kinds.likely_blocks(kind);
            if (more_room || more_queued()) && crate::worker::presume_queued(shared) {
                self.presume_again.push(kind);
            }
        }
        // Kinds with no presumed task this tick: their ends on slots keep
        // their climbs (and holds) alive (`Climb::slot_look`).
        for (kind, climb) in &mut self.climbs {
            let first = self
                .slot_ends
                .iter()
                .find(|(k, _)| k == kind)
                .map(|&(_, f)| f);
            climb.slot_look(now, first, self.runnable.contains(kind), interval);
        }
        self.slot_ends.clear();
        grew
    }
}

/// Arms the CPU timer of the worker at `index`, which ran the presumed task
/// seen as `seen` at this look (`control::hold`): once it has computed
/// [`FIRST_LOOK`](crate::control::hold::FIRST_LOOK) without a slot, its
/// thread asks about itself, whether or not the monitor gets a core. Armed
/// here rather than as the task starts: the arming is two system calls,
/// and there they delayed every presumed task's start (about 2 µs on the
/// lab's machine); a task that ends before this look is never armed.
/// A task that is judged computing at this very look is counted again by
/// `judge_presumed` as well; the timer then finds it counted.
///
/// If the task ended meanwhile, the timer is disarmed again. A task that
/// ends between that look and the disarm may leave the timer armed for a
/// task that is over (as the arming of a worker found blocked may): it
/// fires once in a later task that computes, whose handler finds another
/// task and returns.
fn arm_presumed(shared: &Shared, index: usize, seen: StatusWord) {
    let entry = shared.threads.entry(index);
    entry
        .hold
        .arm(seen.tick(), crate::control::hold::FIRST_LOOK);
    if entry.status.load() != seen {
        entry.hold.disarm(&shared.holds);
    }
}

//! Asking the kernel about a worker's thread: its state, CPU clock and run
//! delay (`sys::ThreadProbe`), what the monitor remembers of those reads per
//! task, and the judgements made from them (step 2 of the monitor's tick, and
//! the looks at a worker whose slot was given away).

use super::Track;
use crate::control::ablation::Mechanism;
use crate::control::back_from_block::{judge, Look, Verdict};
use crate::control::policy::{FallbackView, KernelView, BUSY_CPU_SHARE};
use crate::metrics::ThreadCounters;
use crate::runtime::Shared;
use crate::sync::lock;
use crate::sys::{ThreadProbe, ThreadState, WaitsFor};
use std::time::{Duration, Instant};

/// A suspect seen runnable is probed at most every this many ticks.
pub(super) const MAX_PROBE_BACKOFF: u32 = 64;

/// A suspect found runnable is still probed every tick until it has been
/// in its task for this many thresholds; only then less and less often.
/// A service's poll computes a millisecond or two and then blocks: backed
/// off after one runnable look, it kept its slot through the next three
/// ticks of its block. A task still computing after this long is likely
/// CPU-bound, and the backoff spares the busy cores the monitor's looks.
const PROBED_EVERY_TICK_FOR: u32 = 8;

/// A thread's clocks at one probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Reading {
    at: Instant,
    /// The thread's CPU time.
    cpu: Duration,
    /// The thread's run delay: time runnable, waiting for a core.
    run_delay: Duration,
}

impl Reading {
    /// The thread's clocks now; `None` if either cannot be read.
    pub(super) fn now(probe: &ThreadProbe) -> Option<Reading> {
        Some(Reading {
            cpu: probe.cpu_time()?,
            run_delay: probe.run_delay()?,
            at: Instant::now(),
        })
    }
}

impl Track {
    /// Whether this task, runnable, computed a share of the time it could
    /// run ([`computed_when_it_could`], from its first runnable probe to
    /// now); a yes is kept for the task, so the run delay is read again
    /// only while the answer is no.
    pub(super) fn computed_when_it_could(&mut self, probe: Option<&ThreadProbe>) -> bool {
        if !self.known_computing {
            self.known_computing = match (self.runnable_first, probe) {
                (Some(first), Some(probe)) => {
                    Reading::now(probe).is_some_and(|now| computed_when_it_could(first, now))
                }
                _ => false,
            };
        }
        self.known_computing
    }

    /// Whether the thread, found asleep, sleeps outside the process (not
    /// in a futex: `sys::WaitsFor`), asked of the kernel at the first such
    /// look in the task and then remembered (a task's waits are mostly of
    /// one sort; the question costs an open and a read).
    pub(super) fn waits_outside(&mut self, probe: &ThreadProbe) -> bool {
        let waits = match self.waits_for {
            Some(known) => known,
            None => {
                let asked = probe.waits_for();
                // Caught between two waits: ask again at the next look.
                if asked != WaitsFor::Unknown {
                    self.waits_for = Some(asked);
                }
                asked
            }
        };
        waits == WaitsFor::Outside
    }
}

/// Whether the worker of `entry`, whose slot was given away (`track`
/// follows its blocked task), computes again, and if so for how long it
/// has been seen so (zero at the first such look): looked at through its
/// probe, less and less often while it sleeps.
pub(super) fn back_from_block(
    entry: &crate::runtime::Entry,
    track: &mut Track,
    now: Instant,
) -> Option<Duration> {
    if track.probe_wait > 0 {
        track.probe_wait -= 1;
        return None;
    }
    let probe = lock(&entry.probe).clone()?;
    let look = Look {
        at: now,
        asleep: probe.state().is_waiting(),
        cpu: probe.cpu_time(),
        run_delay: probe.run_delay(),
    };
    let verdict = judge(
        false,
        now.saturating_duration_since(track.since),
        Duration::ZERO,
        track.back_look,
        look,
    );
    track.back_look = Some(look);
    if look.asleep {
        // Blocked (again): not computing since any time. (A runnable look
        // that saw no CPU does not reset it: on oversubscribed cores a
        // thread waits for a core a slice at a time, and short windows
        // between looks see nothing.)
        track.running_again_since = None;
        // Look again later, less and less often.
        track.backoff = (track.backoff * 2).min(MAX_PROBE_BACKOFF);
        track.probe_wait = track.backoff;
    } else {
        track.backoff = 1;
    }
    (verdict == Verdict::RunningAgain)
        .then(|| now.saturating_duration_since(*track.running_again_since.get_or_insert(now)))
}

/// The CPU time a worker's thread used since it was first seen in the
/// task `track` follows, if its clock can be read.
pub(super) fn cpu_since(probe: Option<&ThreadProbe>, track: &Track) -> Option<Duration> {
    Some(probe?.cpu_time()?.saturating_sub(track.cpu_at_since?))
}

/// Whether a worker in the same task for `in_task_for`, found runnable,
/// used a core for it: `cpu_used` is at least [`BUSY_CPU_SHARE`] of that
/// time. Runnable is not computing: a task woken onto busy cores (or a
/// stalled VM) waits runnable with next to no CPU, and one such look
/// marked a blocking kind as computing. Without a CPU clock, runnable is
/// all there is to go by.
pub(super) fn used_a_core(cpu_used: Option<Duration>, in_task_for: Duration) -> bool {
    cpu_used.is_none_or(|cpu| cpu.as_secs_f64() >= in_task_for.as_secs_f64() * BUSY_CPU_SHARE)
}

/// Whether a thread probed runnable at `first`, and read again at `last`
/// (an extra read of its run delay, made only where [`used_a_core`] says
/// no: [`Track::computed_when_it_could`]), spent
/// at least [`BUSY_CPU_SHARE`] of the time it could run computing: its CPU
/// time over the wall time less its run delay (the time it waited for a
/// core). On a machine whose cores other processes keep busy, a CPU-bound
/// task gets a fraction of a core, and [`used_a_core`] (CPU over wall time)
/// missed it: the quantum rule then lent a slot to another task of the kind,
/// one more thread computing on cores already short (the two tests of
/// `tests/control_blocking.rs` that check it failed 5 times in 25 runs
/// beside two CPU spinners). A task that blocks waits asleep, not for a
/// core, so the discount does not make it compute. False for readings at
/// one moment, or if the window was all waiting.
pub(super) fn computed_when_it_could(first: Reading, last: Reading) -> bool {
    let wall = last.at.saturating_duration_since(first.at);
    let could_run = wall.saturating_sub(last.run_delay.saturating_sub(first.run_delay));
    let cpu = last.cpu.saturating_sub(first.cpu);
    !could_run.is_zero()
        && !cpu.is_zero()
        && cpu.as_secs_f64() >= could_run.as_secs_f64() * BUSY_CPU_SHARE
}

/// Step 2 for one suspect: asks the kernel about it through `probe` if it is
/// due, and schedules the next look. Returns what the kernel said, if asked,
/// or what could be read instead where it cannot say (`control::policy`,
/// "When the kernel cannot answer").
pub(super) fn ask_kernel(
    shared: &Shared,
    probe: &ThreadProbe,
    track: &mut Track,
    in_task_for: Duration,
    threshold: Duration,
) -> (Option<KernelView>, Option<FallbackView>) {
    if !probe.reads_state() && !probe.reads_cpu_clock() {
        // Nothing to read: judged by time alone, every tick. A nonzero wait
        // keeps such suspects from making the monitor tick fast: time is
        // as well judged at its busy pace.
        track.probe_wait = 1;
        return (None, Some(FallbackView::TimeOnly));
    }
    if track.probe_wait > 0 {
        track.probe_wait -= 1;
        return (None, None);
    }
    let state = probe.state();
    let cpu_now = probe.cpu_time();
    let now = Instant::now();
    let look = cpu_now.map(|cpu| (now, cpu));
    let recent_share = match (track.last_look, look) {
        (Some(last), Some(look)) => recent_cpu_share(last, look),
        _ => None,
    };
    track.last_look = look.or(track.last_look);
    if state == ThreadState::Unknown {
        // The CPU clock alone decides here, over the whole watch (the
        // fallback's thresholds are in whole-watch time too).
        let cpu_share = match (track.cpu_at_since, cpu_now) {
            (Some(then), Some(cpu)) => {
                Some(cpu.saturating_sub(then).as_secs_f64() / in_task_for.as_secs_f64().max(1e-9))
            }
            _ => None,
        };
        // No state letter: the CPU clock decides, or time. One that computes
        // is looked at less and less often, like a runnable one.
        if cpu_share.is_some_and(|share| share >= BUSY_CPU_SHARE) {
            track.seen_runnable = true;
            track.backoff = (track.backoff * 2).min(MAX_PROBE_BACKOFF);
            track.probe_wait = track.backoff;
        }
        let fallback = match cpu_share {
            Some(cpu_share) => FallbackView::CpuClock { cpu_share },
            None => FallbackView::TimeOnly,
        };
        return (None, Some(fallback));
    }
    let waiting = state.is_waiting();
    track.runnable_at_last_probe = state == ThreadState::Running;
    let waits_outside =
        waiting && shared.config.switches.on(Mechanism::WaitClasses) && track.waits_outside(probe);
    if !waiting {
        // Runnable: if it waits for a CPU, the cores are oversubscribed; more
        // threads would not help.
        let delay = probe.run_delay();
        if let (Some(before), Some(now)) = (track.run_delay, delay) {
            if now > before {
                ThreadCounters::bump(&shared.threads.counters.oversubscribed);
            }
        }
        track.run_delay = delay;
        if let (Some(cpu), Some(run_delay)) = (cpu_now, delay) {
            let reading = Reading {
                at: Instant::now(),
                cpu,
                run_delay,
            };
            track.runnable_first.get_or_insert(reading);
        }
        track.seen_runnable = true;
        // Look again later, less and less often, once it has computed
        // long enough to be likely CPU-bound.
        if in_task_for >= threshold * PROBED_EVERY_TICK_FOR {
            track.backoff = (track.backoff * 2).min(MAX_PROBE_BACKOFF);
            track.probe_wait = track.backoff;
        }
    }
    (
        Some(KernelView {
            waiting,
            cpu_share: recent_share,
            waits_outside,
        }),
        None,
    )
}

/// The share of a core a thread used between two looks, each a moment and
/// the thread's CPU time then; `None` for looks at one moment.
///
/// Rule 3 of `control::policy` judges this recent window, not the whole
/// watch: a service's poll that computed a millisecond or two and then
/// waited on its database was judged by its share since it was first seen,
/// which stayed over [`BUSY_CPU_SHARE`] for milliseconds into the wait
/// (1.2 ms of CPU needs 4.8 ms of watch to fall under a quarter), and the
/// slot sat idle most of the wait. Asleep now after an interval spent
/// mostly asleep is blocked, whatever the task computed before.
pub(super) fn recent_cpu_share(last: (Instant, Duration), now: (Instant, Duration)) -> Option<f64> {
    let wall = now.0.saturating_duration_since(last.0);
    (!wall.is_zero()).then(|| now.1.saturating_sub(last.1).as_secs_f64() / wall.as_secs_f64())
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_recent_share_is_of_the_window_since_the_last_look() {
        let ms = Duration::from_millis;
        let start = Instant::now();
        let look = |wall: u64, cpu: u64| (start + ms(wall), ms(cpu));
        // Computed 1.2 ms, then slept: over the last millisecond it used
        // nothing, whatever it did before.
        assert_eq!(recent_cpu_share(look(1, 1), look(2, 1)), Some(0.0));
        let share = recent_cpu_share(look(0, 0), look(2, 1)).unwrap();
        assert!((share - 0.5).abs() < 1e-9, "{share}");
        assert_eq!(recent_cpu_share(look(1, 0), look(1, 0)), None, "one moment");
        assert_eq!(
            recent_cpu_share(look(2, 1), look(1, 1)),
            None,
            "a clock read out of order is no window"
        );
    }

    #[test]
    fn a_task_runnable_without_cpu_did_not_use_a_core() {
        let ms = Duration::from_millis;
        assert!(used_a_core(Some(ms(9)), ms(10)), "a busy core");
        assert!(used_a_core(Some(ms(3)), ms(10)), "preempted, still busy");
        assert!(
            !used_a_core(Some(ms(1)), ms(10)),
            "woken onto busy cores: runnable, not computing"
        );
        assert!(!used_a_core(Some(Duration::ZERO), ms(10)));
        assert!(used_a_core(None, ms(10)), "no clock: runnable decides");
    }

    #[test]
    fn a_task_computing_on_a_loaded_machine_computed_when_it_could() {
        let ms = Duration::from_millis;
        let start = Instant::now();
        let at = |wall: u64, cpu: u64, run_delay: u64| Reading {
            at: start + ms(wall),
            cpu: ms(cpu),
            run_delay: ms(run_delay),
        };
        // 20 ms in which other processes held the cores for 16: 4 ms of
        // CPU is a fifth of the wall time (not "a core" by `used_a_core`),
        // and all of the time it could run.
        assert!(!used_a_core(Some(ms(4)), ms(20)));
        assert!(computed_when_it_could(at(0, 10, 5), at(20, 14, 21)));
        // A task that slept most of the window and waited a little for a
        // core after each wake-up: asleep, not computing.
        assert!(!computed_when_it_could(at(0, 1, 0), at(20, 2, 2)));
        // Waiting for a core the whole window: nothing to judge by.
        assert!(!computed_when_it_could(at(0, 1, 0), at(20, 1, 20)));
        // Two readings at one moment: nothing to judge by.
        assert!(!computed_when_it_could(at(0, 1, 0), at(0, 1, 0)));
    }
}

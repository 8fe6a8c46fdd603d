//! Pure decision functions, one per [`Controller`].
//!
//! `Gradual` reproduces the starvation rule of runtime pools that delay
//! thread creation on purpose: one more thread per interval, but only while
//! work waits and *no* task ended during the interval. Work that blocks for
//! about as long as the interval keeps ending now and then, so the pool
//! barely grows and the queue backs up for minutes: exactly the failure the
//! lab shows. It is a baseline, not a recommendation.
//!
//! The monitor samples the pool (phases of the workers, what the kernel says
//! about suspects, queue lengths, counters) into a [`Sample`], calls
//! [`Policy::decide`], and applies the [`Decision`]. Nothing here touches a
//! thread, a clock or an atomic, so every policy is tested with scripted
//! samples and a fake clock (`Sample::now`).
//!
//! `Adaptive`'s two rules beyond replacing blocked workers have files of
//! their own: the burst (`control::burst`: how many replacements per
//! blocked worker) and the quantum (`control::quantum`: lending a slot to
//! work queued behind long computing tasks); `HillClimbing`'s search is
//! `control::hill_climb`, each with its tests; the scripted samples they
//! share are this file's `tests`.
//!
//! # When a worker counts as blocked (`Adaptive`, `HillClimbing`)
//!
//! All of these must hold:
//!
//! 1. it holds a slot and has been in the same task for at least the monitor
//!    interval (no progress) — or, on a tick a CPU sentinel asked for
//!    ([`Sample::core_idle`]: a core idles while every slot is taken and
//!    work waits), for at least [`IDLE_CORE_GRACE`] if the kernel finds it
//!    asleep outside the process ([`KernelView::waits_outside`]: a sleep, a
//!    socket, a disk). Its slot then does nothing while the queue waits and
//!    a core is free, and such a wait does not end sooner for anything the
//!    pool does. A wait on a futex (a lock, a channel) keeps the interval:
//!    the waiters of a lock convoy sleep on the lock whenever its holder is
//!    preempted, and handing their slots over at once started a thread per
//!    waiter (512 threads for 10,000 items holding a mutex for 100 µs);
//! 2. the kernel says it waits on something other than a CPU (state `S` or
//!    `D`);
//! 3. its CPU clock advanced by less than [`BUSY_CPU_SHARE`] of the wall time
//!    since the monitor's previous look at it (or since it was first seen)
//!    — a task that computes between short waits is making progress. The
//!    window is the recent one, not the whole watch: a task that computed
//!    for a while and then waits is blocked from the first look that finds
//!    the wait, not once the wait has diluted what it computed before.
//!
//! A runnable thread waiting for a CPU (`R`) is oversubscribed, not blocked:
//! another thread would only lengthen the queue for the cores, so it is never
//! compensated. Giving a blocked worker's slot away costs nothing by itself;
//! threads are woken or started only when work is waiting (now, or when it
//! arrives: `spawn` uses the free slot at once).
//!
//! # When the kernel cannot answer
//!
//! A worker whose `/proc` file could not be opened (no `/proc`, out of
//! descriptors) or read, or any worker off Linux, has no state letter. It is
//! judged by what is left ([`FallbackView`], `metrics::Detection`), never
//! left alone silently:
//!
//! * **Its CPU clock**: blocked once watched for [`CPU_CLOCK_THRESHOLDS`]
//!   thresholds with a CPU share below [`BUSY_CPU_SHARE`]. Without the state
//!   letter a thread waiting for a core looks like a blocked one, so the
//!   clock gets longer than the kernel's one threshold to see a preempted
//!   thread run again (a CFS wait for a busy core is a few milliseconds). A
//!   computing thread that gets its fair share of a core is never marked.
//! * **Time alone** (no clock either: off Linux): blocked once in the same
//!   task for [`TIME_ONLY_THRESHOLDS`] thresholds *while work is queued*,
//!   at most `concurrency` workers blocked at once. Time cannot tell a
//!   blocked worker from a computing one, so this is a guess, bounded three
//!   ways: a task that finishes within 50 ms at the default interval is
//!   never guessed at (short waits do not pay for a thread); nothing is
//!   guessed while no work waits for the slot; and with `concurrency`
//!   workers already blocked no more are guessed, so wrong guesses on
//!   CPU-bound work at most double the threads competing for the cores
//!   (each surplus thread retires when its task ends). A worker whose clock
//!   works is never judged by time: a CPU-bound task there is never
//!   compensated.

use super::ablation::Switches;
use super::burst::{wait_outside, Burst};
use super::hill_climb::HillClimb;
use super::quantum::Lend;
use super::slots::{SlotCounts, StatusWord};
use super::Controller;
use std::time::Duration;

/// A suspect whose CPU clock advanced by at least this share of the wall time
/// it was watched is computing, not blocked. A sleeping thread scores ~0, a
/// CPU-bound one ~1 (or less when preempted, hence a low bar).
pub(crate) const BUSY_CPU_SHARE: f64 = 0.25;

/// How long a slot holder must have been in its task to be marked blocked
/// at a tick a CPU sentinel asked for, if it sleeps outside the process
/// (rule 1 of the module docs). Long enough that the look itself (a
/// sentinel's poll, the monitor's wake-up, its reads) is not most of it;
/// short against the waits it is for (a database's round trip, 1-5 ms).
pub(crate) const IDLE_CORE_GRACE: Duration = Duration::from_micros(100);

/// A suspect judged by its CPU clock alone (no state letter) must have been
/// watched for this many thresholds before its share counts.
pub(crate) const CPU_CLOCK_THRESHOLDS: u32 = 10;

/// A suspect judged by time alone (no state letter, no CPU clock) must have
/// been in the same task for this many thresholds, while work is queued.
pub(crate) const TIME_ONLY_THRESHOLDS: u32 = 50;

/// One worker that is inside a task.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct WorkerView {
    /// Entry index.
    pub(crate) index: usize,
    /// The status word seen (phase and task tick).
    pub(crate) seen: StatusWord,
    /// How long the worker has been seen in this same task.
    pub(crate) in_task_for: Duration,
    /// What the kernel says, for suspects that were probed.
    pub(crate) kernel: Option<KernelView>,
    /// What could be read instead, for suspects whose state the kernel could
    /// not tell.
    pub(crate) fallback: Option<FallbackView>,
    /// Found runnable at a probe during this task, in it for a quantum,
    /// *and* its CPU time says it used the core it could get (the
    /// monitor's evidence, the same that teaches its kind to compute:
    /// `monitor::kernel::used_a_core`, `monitor::kernel::computed_when_it_could`).
    /// Runnable alone is not enough for the quantum rule: see
    /// [`Lend::quantum`].
    pub(crate) computed: bool,
    /// Its task is of a kind whose tasks end (its growth climb holds it:
    /// `control::growth::Climb::holds`) while every task at work is of
    /// such a kind: asleep, it waits for a sibling (a lock another task of
    /// the kind holds), and is never marked blocked, so its slot is not
    /// handed to another thread that would only join the wait.
    pub(crate) sibling_wait: bool,
}

/// What is known of a suspect whose kernel state could not be read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum FallbackView {
    /// Its CPU clock: CPU time over wall time since the task was first seen.
    CpuClock { cpu_share: f64 },
    /// Nothing but how long it has been in its task.
    TimeOnly,
}

/// The kernel's view of one suspect.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct KernelView {
    /// State `S` or `D`: waiting on something other than a CPU.
    pub(crate) waiting: bool,
    /// CPU time over wall time since the monitor's previous look at the
    /// task (or since it was first seen), if the CPU clock could be read.
    pub(crate) cpu_share: Option<f64>,
    /// Waiting, in a system call other than a futex (`sys::WaitsFor`): a
    /// sleep, a socket, a disk. Its wait does not shorten if a sibling
    /// runs, so more threads beside it complete more (the burst's climb
    /// is not asked). False for a futex (a lock, a channel) or unknown.
    pub(crate) waits_outside: bool,
}

/// Everything a policy may look at.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Sample {
    /// Time since the pool was built (a fake clock in tests).
    pub(crate) now: Duration,
    /// Workers inside a task, holding a slot (`InTask`); blocked ones are not
    /// listed again.
    pub(crate) in_task: Vec<WorkerView>,
    /// Workers inside a task whose slot was given away.
    pub(crate) blocked: usize,
    /// Tasks waiting in queues.
    pub(crate) queued: usize,
    /// Tasks ended so far (completed + panicked + cancelled).
    pub(crate) ended: u64,
    /// Tasks started presumed blocking so far (`worker`: each without a
    /// slot, on a parked worker or a thread started for it).
    pub(crate) presumed: u64,
    /// The slot counters.
    pub(crate) slots: SlotCounts,
    /// Running slots now.
    pub(crate) target: usize,
    /// Worker threads alive.
    pub(crate) threads: usize,
    /// Parked worker threads.
    pub(crate) parked: usize,
    /// A slot is lent under the quantum rule.
    pub(crate) lent: bool,
    /// A worker refused a lent slot since the last sample (the queued work
    /// is of a kind known to compute).
    pub(crate) lend_refused: bool,
    /// A CPU sentinel asked for this tick: a core idled while every slot
    /// was taken, work waited and a slot holder slept (`monitor::sentinel`).
    pub(crate) core_idle: bool,
}

/// The limits a policy works within.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) concurrency: usize,
    pub(crate) max_threads: usize,
    /// How long a task must run before its worker is a suspect.
    pub(crate) threshold: Duration,
    /// See `Builder::quantum`; `None`: off.
    pub(crate) quantum: Option<Duration>,
    /// Which mechanisms are on (`control::ablation`): the burst and its
    /// growth climb can be switched off.
    pub(crate) switches: Switches,
}

#[cfg(all(test, not(tidepool_loom)))]
impl Limits {
    /// Test limits: a 1 ms threshold and no quantum.
    pub(crate) fn for_tests(concurrency: usize, max_threads: usize) -> Self {
        Limits {
            concurrency,
            max_threads,
            threshold: Duration::from_millis(1),
            quantum: None,
            switches: Switches::ALL_ON,
        }
    }
}

/// What the monitor should do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Decision {
    /// Workers to mark blocked (their slot goes back to the pool), with the
    /// status word seen, so a worker that moved on is left alone.
    pub(crate) mark_blocked: Vec<(usize, StatusWord)>,
    /// A new number of running slots.
    pub(crate) set_target: Option<usize>,
    /// How many workers to wake or start, each into a free slot: only while
    /// work is queued, and never past `max_threads`.
    pub(crate) wake: usize,
    /// The target is raised by a burst (wakes beyond the blocked workers'
    /// replacements are burst growth).
    pub(crate) burst: bool,
    /// `Some(true)`: lend a slot to queued work (the quantum rule; the new
    /// target is in `set_target`); `Some(false)`: the lend is over.
    pub(crate) lend: Option<bool>,
}

/// A policy and its memory between ticks.
// One per monitor, kept across ticks and never moved on a hot path: the
// burst's growth climb makes `Adaptive` the large variant, boxing it
// would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Policy {
    /// See [`Controller::Adaptive`]: the burst's memory and the quantum's.
    Adaptive { burst: Burst, lend: Lend },
    /// See [`Controller::Fixed`].
    Fixed,
    /// See [`Controller::Gradual`].
    Gradual {
        interval: Duration,
        /// When the last check ran, and how many tasks had ended by then.
        last_check: Duration,
        last_ended: u64,
    },
    /// See [`Controller::HillClimbing`].
    HillClimbing(HillClimb),
}

impl Policy {
    /// The policy for a controller, starting at time zero.
    pub(crate) fn new(controller: Controller) -> Self {
        match controller {
            Controller::Adaptive => Policy::Adaptive {
                burst: Burst::default(),
                lend: Lend::default(),
            },
            Controller::Fixed => Policy::Fixed,
            Controller::Gradual { interval } => Policy::Gradual {
                interval,
                last_check: Duration::ZERO,
                last_ended: 0,
            },
            Controller::HillClimbing => Policy::HillClimbing(HillClimb::new()),
        }
    }

    /// True if this policy replaces blocked workers, so suspects are worth a
    /// look at the kernel.
    pub(crate) fn detects_blocking(&self) -> bool {
        matches!(self, Policy::Adaptive { .. } | Policy::HillClimbing(_))
    }

    /// Workers the monitor should ask the kernel about: in the same task for
    /// at least the threshold, or [`IDLE_CORE_GRACE`] on a tick a CPU
    /// sentinel asked for (`core_idle`). Empty for policies that do not
    /// detect blocking.
    pub(crate) fn is_suspect(&self, limits: &Limits, worker: &WorkerView, core_idle: bool) -> bool {
        let after = if core_idle {
            IDLE_CORE_GRACE.min(limits.threshold)
        } else {
            limits.threshold
        };
        self.detects_blocking() && worker.in_task_for >= after
    }

    /// Decides what to do about `sample`.
    pub(crate) fn decide(&mut self, limits: &Limits, sample: &Sample) -> Decision {
        let mut decision = Decision::default();
        if self.detects_blocking() {
            decision.mark_blocked = blocked_workers(limits, sample);
        }
        match self {
            Policy::Adaptive { burst, lend } => {
                let outside = wait_outside(sample, &decision.mark_blocked);
                decision.set_target =
                    burst.step(limits, sample, decision.mark_blocked.len(), outside);
                decision.burst = burst.raised > 0;
                if burst.raised > 0 || decision.set_target.is_some() {
                    // A burst owns the target; a lend it overrode is over.
                    if sample.lent {
                        decision.lend = Some(false);
                    }
                } else {
                    lend.quantum(limits, sample, &mut decision);
                }
            }
            Policy::Fixed => {}
            Policy::Gradual {
                interval,
                last_check,
                last_ended,
            } => {
                // Subtracting, not adding: `interval` may be as long as
                // `Duration::MAX` (valid input), and an addition would overflow.
                if sample.now.saturating_sub(*last_check) >= *interval {
                    let target = sample.target;
                    if sample.queued > 0 && sample.ended == *last_ended {
                        // Work waited a whole interval and not one task
                        // ended: starvation. One more slot.
                        if target < limits.max_threads {
                            decision.set_target = Some(target + 1);
                        }
                    } else if sample.queued == 0 && target > limits.concurrency {
                        decision.set_target = Some(target - 1);
                    }
                    *last_check = sample.now;
                    *last_ended = sample.ended;
                }
            }
            Policy::HillClimbing(hill) => {
                decision.set_target = hill.step(limits, sample, !decision.mark_blocked.is_empty());
            }
        }
        decision.wake = wakes_needed(limits, sample, &decision);
        decision
    }
}

/// Whether `worker` is asleep waiting for a sibling (`WorkerView::sibling_wait`)
/// rather than for something outside the process: a held kind's worker
/// the kernel finds in a timer or a socket waits as any other.
fn waits_for_sibling(worker: &WorkerView) -> bool {
    worker.sibling_wait && !worker.kernel.is_some_and(|k| k.waits_outside)
}

/// `n` as a `u32`, at most `u32::MAX`.
pub(super) fn to_u32(n: impl TryInto<u32>) -> u32 {
    n.try_into().unwrap_or(u32::MAX)
}

/// Free slots after the decision, filled only while work waits and only with
/// threads that may exist: parked ones, or new ones below `max_threads`.
fn wakes_needed(limits: &Limits, sample: &Sample, decision: &Decision) -> usize {
    if sample.queued == 0 || sample.slots.searching > 0 {
        // Nothing to do, or a searcher will take it (and wake the next).
        return 0;
    }
    let target = decision.set_target.unwrap_or(sample.target);
    let active = sample
        .slots
        .active
        .saturating_sub(decision.mark_blocked.len());
    let free_slots = target.saturating_sub(active);
    let available_threads = sample.parked + limits.max_threads.saturating_sub(sample.threads);
    free_slots.min(sample.queued).min(available_threads)
}

/// The suspects of `sample` to mark blocked: by the kernel's view (rules 2
/// and 3 of the module docs), or failing that by their CPU clock or by time
/// ("When the kernel cannot answer").
fn blocked_workers(limits: &Limits, sample: &Sample) -> Vec<(usize, StatusWord)> {
    // Workers blocked by a guess from time alone never take the blocked
    // count past `concurrency`.
    let mut guesses = limits.concurrency.saturating_sub(sample.blocked);
    sample
        .in_task
        .iter()
        .filter(|w| watched_long_enough(limits, sample, w) && !waits_for_sibling(w))
        .filter(|w| match verdict(limits, sample, w) {
            Verdict::Blocked => true,
            Verdict::Guess if guesses > 0 => {
                guesses -= 1;
                true
            }
            Verdict::Guess | Verdict::NotBlocked => false,
        })
        .map(|w| (w.index, w.seen))
        .collect()
}

/// Rule 1 of the module docs: in its task for the threshold, or for
/// [`IDLE_CORE_GRACE`] while a core idles if it sleeps outside the process.
fn watched_long_enough(limits: &Limits, sample: &Sample, worker: &WorkerView) -> bool {
    worker.in_task_for >= limits.threshold
        || (sample.core_idle
            && worker.in_task_for >= IDLE_CORE_GRACE
            && worker.kernel.is_some_and(|k| k.waiting && k.waits_outside))
}

/// What a suspect's readings say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Blocked,
    /// Blocked by the measure of time alone.
    Guess,
    NotBlocked,
}

fn verdict(limits: &Limits, sample: &Sample, worker: &WorkerView) -> Verdict {
    let watched = |thresholds: u32| worker.in_task_for >= limits.threshold * thresholds;
    let blocked = |yes: bool| {
        if yes {
            Verdict::Blocked
        } else {
            Verdict::NotBlocked
        }
    };
    match (worker.kernel, worker.fallback) {
        (
            Some(KernelView {
                waiting, cpu_share, ..
            }),
            _,
        ) => blocked(waiting && cpu_share.is_none_or(|share| share < BUSY_CPU_SHARE)),
        (None, Some(FallbackView::CpuClock { cpu_share })) => {
            blocked(watched(CPU_CLOCK_THRESHOLDS) && cpu_share < BUSY_CPU_SHARE)
        }
        (None, Some(FallbackView::TimeOnly))
            if watched(TIME_ONLY_THRESHOLDS) && sample.queued > 0 =>
        {
            Verdict::Guess
        }
        _ => Verdict::NotBlocked,
    }
}

/// The policy's tests, and the scripted samples the burst's, the
/// quantum's and the hill climb's tests (in their own files) share.
#[cfg(all(test, not(tidepool_loom)))]
pub(in crate::control) mod tests {
    use super::*;
    use crate::control::slots::TaskStatus;

    pub(in crate::control) const MS: Duration = Duration::from_millis(1);
    /// How long a burst's climb waits with nothing ended before it lets
    /// the burst grow (`control::growth`): a tick that far apart.
    pub(in crate::control) const FREE: Duration =
        Duration::from_millis(crate::control::growth::FREE_AFTER_INTERVALS as u64);

    pub(in crate::control) fn limits() -> Limits {
        Limits::for_tests(2, 4)
    }

    pub(in crate::control) fn in_task(_index: usize, tick: u64) -> StatusWord {
        let status = TaskStatus::default();
        while status.begin_task() < tick {
            status.end_task();
        }
        status.load()
    }

    pub(in crate::control) fn worker(
        index: usize,
        for_ms: u64,
        kernel: Option<KernelView>,
    ) -> WorkerView {
        WorkerView {
            index,
            seen: in_task(index, 1),
            in_task_for: MS * for_ms as u32,
            kernel,
            fallback: None,
            computed: false,
            sibling_wait: false,
        }
    }

    pub(in crate::control) const SLEEPING: Option<KernelView> = Some(KernelView {
        waiting: true,
        cpu_share: Some(0.0),
        waits_outside: false,
    });
    pub(in crate::control) const RUNNABLE: Option<KernelView> = Some(KernelView {
        waiting: false,
        cpu_share: Some(0.5),
        waits_outside: false,
    });

    pub(in crate::control) fn sample(workers: Vec<WorkerView>, queued: usize) -> Sample {
        Sample {
            slots: SlotCounts {
                active: workers.len(),
                searching: 0,
            },
            in_task: workers,
            queued,
            target: 2,
            threads: 2,
            ..Sample::default()
        }
    }

    pub(in crate::control) fn wide_limits() -> Limits {
        Limits {
            concurrency: 2,
            max_threads: 1_000,
            threshold: MS,
            quantum: None,
            switches: Switches::ALL_ON,
        }
    }

    #[test]
    fn a_blocked_worker_is_replaced_only_while_work_is_queued() {
        let mut policy = Policy::new(Controller::Adaptive);
        let both_asleep = vec![worker(0, 5, SLEEPING), worker(1, 5, SLEEPING)];
        let d = policy.decide(&limits(), &sample(both_asleep.clone(), 10));
        assert_eq!(d.mark_blocked.len(), 2);
        assert_eq!(
            d.wake, 2,
            "two slots freed, work queued, room for two threads"
        );
        // Same workers, empty queue: slots are freed but nobody is woken.
        let d = policy.decide(&limits(), &sample(both_asleep, 0));
        assert_eq!(d.mark_blocked.len(), 2);
        assert_eq!(d.wake, 0);
    }

    #[test]
    fn replacements_never_pass_max_threads() {
        let mut policy = Policy::new(Controller::Adaptive);
        let mut s = sample(vec![worker(0, 5, SLEEPING), worker(1, 5, SLEEPING)], 10);
        s.threads = 4; // == max_threads
        s.parked = 0;
        assert_eq!(policy.decide(&limits(), &s).wake, 0);
        s.threads = 3;
        assert_eq!(policy.decide(&limits(), &s).wake, 1);
        s.parked = 1;
        assert_eq!(policy.decide(&limits(), &s).wake, 2);
    }

    #[test]
    fn a_searcher_takes_the_work_without_extra_wakes() {
        let mut policy = Policy::new(Controller::Adaptive);
        let mut s = sample(vec![worker(0, 5, SLEEPING)], 10);
        s.slots.searching = 1;
        s.slots.active = 2;
        assert_eq!(policy.decide(&limits(), &s).wake, 0);
    }

    #[test]
    fn adaptive_marks_a_sleeping_worker_after_the_threshold() {
        let mut policy = Policy::new(Controller::Adaptive);
        let d = policy.decide(&limits(), &sample(vec![worker(0, 2, SLEEPING)], 5));
        assert_eq!(d.mark_blocked, vec![(0, in_task(0, 1))]);
        assert_eq!(d.set_target, None);
    }

    #[test]
    fn adaptive_leaves_runnable_and_busy_workers_alone() {
        let mut policy = Policy::new(Controller::Adaptive);
        let busy_but_sleeping_now = Some(KernelView {
            waiting: true,
            cpu_share: Some(0.9),
            waits_outside: false,
        });
        let d = policy.decide(
            &limits(),
            &sample(
                vec![
                    worker(0, 50, RUNNABLE),
                    worker(1, 50, busy_but_sleeping_now),
                ],
                5,
            ),
        );
        assert!(d.mark_blocked.is_empty(), "{d:?}");
    }

    #[test]
    fn adaptive_waits_for_the_threshold_and_for_a_kernel_reading() {
        let mut policy = Policy::new(Controller::Adaptive);
        let young = WorkerView {
            in_task_for: MS / 2,
            ..worker(0, 0, SLEEPING)
        };
        assert!(!policy.is_suspect(&limits(), &young, false));
        let d = policy.decide(&limits(), &sample(vec![young, worker(1, 5, None)], 5));
        assert!(d.mark_blocked.is_empty());
    }

    /// Rule 1's idle-core grace: a sleep outside the process is marked
    /// after `IDLE_CORE_GRACE` on a tick a sentinel asked for, and only
    /// then; a futex wait (a lock's waiter) keeps the threshold.
    #[test]
    fn an_idle_core_shortens_the_wait_for_sleeps_outside_the_process_only() {
        let micros = |us| Duration::from_micros(us);
        let asleep = |outside: bool, for_us: u64| WorkerView {
            in_task_for: micros(for_us),
            kernel: Some(KernelView {
                waiting: true,
                cpu_share: Some(0.0),
                waits_outside: outside,
            }),
            ..worker(0, 0, None)
        };
        let decide = |w: WorkerView, core_idle: bool| {
            let mut s = sample(vec![w], 5);
            s.core_idle = core_idle;
            Policy::new(Controller::Adaptive)
                .decide(&limits(), &s)
                .mark_blocked
                .len()
        };
        let grace = IDLE_CORE_GRACE.as_micros() as u64;
        assert!(grace * 2 < limits().threshold.as_micros() as u64);
        assert_eq!(decide(asleep(true, grace), true), 1, "outside, idle core");
        assert_eq!(decide(asleep(true, grace), false), 0, "no idle core");
        assert_eq!(decide(asleep(false, grace), true), 0, "a futex wait");
        assert_eq!(decide(asleep(true, grace - 1), true), 0, "too young");
        // Past the threshold, a futex wait is marked either way.
        assert_eq!(decide(asleep(false, 2 * 1000), false), 1);
        let policy = Policy::new(Controller::Adaptive);
        assert!(policy.is_suspect(&limits(), &asleep(true, grace), true));
        assert!(!policy.is_suspect(&limits(), &asleep(true, grace), false));
    }

    /// What the monitor builds from a probe off Linux: no state letter and
    /// no CPU clock (`FallbackView::TimeOnly`). The crate docs ("Platform
    /// support") promise that the monitor then marks a worker blocked by
    /// time alone while work waits, and that a growing controller still adds
    /// slots for queued work that stops moving.
    #[test]
    fn without_a_kernel_reading_time_decides_and_gradual_still_grows() {
        let unknown = |index| WorkerView {
            fallback: Some(FallbackView::TimeOnly),
            ..worker(index, 10_000, None)
        };
        let stuck = || sample(vec![unknown(0), unknown(1)], 50);
        for controller in [Controller::Adaptive, Controller::HillClimbing] {
            let mut policy = Policy::new(controller);
            assert!(policy.is_suspect(&limits(), &unknown(0), false));
            let d = policy.decide(&limits(), &stuck());
            assert_eq!(d.mark_blocked.len(), 2, "{controller:?}: {d:?}");
            assert_eq!(d.wake, 2, "{controller:?}: {d:?}");
        }
        let interval = Duration::from_millis(500);
        let mut gradual = Policy::new(Controller::Gradual { interval });
        let mut s = stuck();
        s.now = interval;
        let d = gradual.decide(&limits(), &s);
        assert!(d.mark_blocked.is_empty());
        assert_eq!(
            d.set_target,
            Some(3),
            "one more slot after an interval without progress"
        );
    }

    #[test]
    fn fixed_never_marks_or_grows() {
        let mut policy = Policy::new(Controller::Fixed);
        let w = worker(0, 100, SLEEPING);
        assert!(!policy.is_suspect(&limits(), &w, false));
        assert!(!policy.is_suspect(&limits(), &w, true));
        for t in 0..100 {
            let mut s = sample(vec![w, worker(1, 100, SLEEPING)], 1000);
            s.now = MS * t * 100;
            let d = policy.decide(&limits(), &s);
            assert!(d.mark_blocked.is_empty() && d.set_target.is_none(), "{d:?}");
            assert_eq!(d.wake, 0, "both slots are held by the sleepers");
        }
    }

    #[test]
    fn gradual_adds_one_slot_per_interval_while_nothing_ends() {
        let interval = Duration::from_millis(500);
        let mut policy = Policy::new(Controller::Gradual { interval });
        let mut target = 2;
        let mut added_at = Vec::new();
        for t in 0..=40u32 {
            let mut s = sample(vec![], 100);
            s.now = Duration::from_millis(100) * t;
            s.target = target;
            if let Some(new) = policy.decide(&limits(), &s).set_target {
                assert_eq!(new, target + 1, "one at a time");
                target = new;
                added_at.push(s.now);
            }
        }
        // max_threads is 4: two additions, one interval apart.
        assert_eq!(
            added_at,
            vec![Duration::from_millis(500), Duration::from_millis(1000)]
        );
        assert_eq!(target, 4);
        // The backlog drains: slots are given back one per interval.
        let mut s = sample(vec![], 0);
        s.now = Duration::from_secs(10);
        s.target = 4;
        assert_eq!(policy.decide(&limits(), &s).set_target, Some(3));
    }

    #[test]
    fn gradual_with_the_longest_interval_never_adds() {
        let mut policy = Policy::new(Controller::Gradual {
            interval: Duration::MAX,
        });
        for t in [0, 1, 3600, u64::from(u32::MAX)] {
            let mut s = sample(vec![], 100);
            s.now = Duration::from_secs(t);
            assert_eq!(policy.decide(&limits(), &s).set_target, None, "at {t} s");
        }
    }

    #[test]
    fn gradual_holds_while_tasks_keep_ending() {
        let mut policy = Policy::new(Controller::Gradual { interval: MS * 500 });
        for (t, ended) in [(500, 0), (1000, 2), (1500, 4), (2000, 4)] {
            let mut s = sample(vec![], 100);
            s.now = MS * t;
            s.ended = ended;
            let d = policy.decide(&limits(), &s);
            // Grows only in the intervals in which nothing ended.
            let expected = matches!(t, 500 | 2000).then_some(3);
            assert_eq!(d.set_target, expected, "at {t} ms");
        }
    }

    #[test]
    fn a_worker_waiting_for_a_sibling_is_not_marked_blocked() {
        let mut policy = Policy::new(Controller::Adaptive);
        let sibling = WorkerView {
            sibling_wait: true,
            ..worker(0, 5, SLEEPING)
        };
        let d = policy.decide(
            &limits(),
            &sample(vec![sibling, worker(1, 5, SLEEPING)], 10),
        );
        assert_eq!(d.mark_blocked, [(1, in_task(1, 1))], "only the other one");
        // Unless the kernel finds it in a timer or a socket: a wait of its
        // own, not a sibling's.
        let outside = WorkerView {
            kernel: Some(KernelView {
                waits_outside: true,
                ..SLEEPING.unwrap()
            }),
            ..sibling
        };
        let d = policy.decide(&limits(), &sample(vec![outside], 10));
        assert_eq!(d.mark_blocked, [(0, in_task(0, 1))]);
    }
}

/// The detection modes side by side, on scripted samples: the kernel's view
/// (`Detection::Kernel`), the CPU clock alone (`CpuClock`), time alone
/// (`TimeOnly`).
#[cfg(all(test, not(tidepool_loom)))]
mod detection_mode_tests {
    use super::*;
    use crate::control::slots::TaskStatus;

    const MS: Duration = Duration::from_millis(1);

    fn limits() -> Limits {
        Limits::for_tests(2, 8)
    }

    fn view(index: usize, thresholds: u32, kernel: Option<KernelView>) -> WorkerView {
        let status = TaskStatus::default();
        status.begin_task();
        WorkerView {
            index,
            seen: status.load(),
            in_task_for: MS * thresholds,
            kernel,
            fallback: None,
            computed: false,
            sibling_wait: false,
        }
    }

    fn clock(index: usize, thresholds: u32, cpu_share: f64) -> WorkerView {
        WorkerView {
            fallback: Some(FallbackView::CpuClock { cpu_share }),
            ..view(index, thresholds, None)
        }
    }

    fn time_only(index: usize, thresholds: u32) -> WorkerView {
        WorkerView {
            fallback: Some(FallbackView::TimeOnly),
            ..view(index, thresholds, None)
        }
    }

    fn sample(workers: Vec<WorkerView>, queued: usize, blocked: usize) -> Sample {
        Sample {
            slots: SlotCounts {
                active: workers.len(),
                searching: 0,
            },
            in_task: workers,
            queued,
            blocked,
            target: 2,
            threads: 2 + blocked,
            ..Sample::default()
        }
    }

    fn marked(workers: Vec<WorkerView>, queued: usize, blocked: usize) -> Vec<usize> {
        let mut policy = Policy::new(Controller::Adaptive);
        let d = policy.decide(&limits(), &sample(workers, queued, blocked));
        d.mark_blocked.iter().map(|&(index, _)| index).collect()
    }

    #[test]
    fn kernel_mode_marks_a_sleeper_after_one_threshold_and_never_a_runnable_thread() {
        let asleep = Some(KernelView {
            waiting: true,
            cpu_share: Some(0.0),
            waits_outside: false,
        });
        let runnable_but_starved = Some(KernelView {
            waiting: false,
            cpu_share: Some(0.0),
            waits_outside: false,
        });
        assert_eq!(marked(vec![view(0, 1, asleep)], 0, 0), vec![0]);
        assert!(marked(vec![view(0, 10_000, runnable_but_starved)], 9, 0).is_empty());
    }

    #[test]
    fn cpu_clock_mode_marks_an_idle_clock_once_watched_long_enough() {
        let early = CPU_CLOCK_THRESHOLDS - 1;
        assert!(marked(vec![clock(0, early, 0.0)], 5, 0).is_empty());
        assert_eq!(
            marked(vec![clock(0, CPU_CLOCK_THRESHOLDS, 0.0)], 5, 0),
            vec![0]
        );
        // Like the kernel mode, with or without queued work (the slot is
        // only filled when work waits).
        assert_eq!(
            marked(vec![clock(0, CPU_CLOCK_THRESHOLDS, 0.1)], 0, 0),
            vec![0]
        );
    }

    #[test]
    fn cpu_clock_mode_never_marks_a_thread_that_computes() {
        for share in [BUSY_CPU_SHARE, 0.5, 1.0] {
            for thresholds in [CPU_CLOCK_THRESHOLDS, TIME_ONLY_THRESHOLDS, 100_000] {
                let w = clock(0, thresholds, share);
                assert!(marked(vec![w], 100, 0).is_empty(), "{w:?}");
            }
        }
    }

    #[test]
    fn time_only_mode_guesses_after_fifty_thresholds_and_only_while_work_waits() {
        let early = TIME_ONLY_THRESHOLDS - 1;
        assert!(marked(vec![time_only(0, early)], 5, 0).is_empty());
        assert!(marked(vec![time_only(0, TIME_ONLY_THRESHOLDS)], 0, 0).is_empty());
        assert_eq!(
            marked(vec![time_only(0, TIME_ONLY_THRESHOLDS)], 1, 0),
            vec![0]
        );
    }

    #[test]
    fn time_only_guesses_never_take_the_blocked_count_past_concurrency() {
        let four = || (0..4).map(|i| time_only(i, 1000)).collect::<Vec<_>>();
        assert_eq!(marked(four(), 10, 0), vec![0, 1]);
        assert_eq!(marked(four(), 10, 1), vec![0]);
        assert!(marked(four(), 10, 2).is_empty());
        // The bound is for guesses only: readings are believed.
        let idle_clocks = (0..4).map(|i| clock(i, 1000, 0.0)).collect();
        assert_eq!(marked(idle_clocks, 10, 2), vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_computing_worker_with_a_clock_is_never_judged_by_time() {
        // Mixed modes in one pool: one worker lost its clock, one did not.
        let workers = vec![clock(0, 100_000, 0.9), time_only(1, 100_000)];
        assert_eq!(marked(workers, 10, 0), vec![1]);
    }

    #[test]
    fn no_reading_at_all_marks_nothing() {
        // A suspect not probed this tick (backing off) has neither view.
        assert!(marked(vec![view(0, 100_000, None)], 10, 0).is_empty());
    }
}

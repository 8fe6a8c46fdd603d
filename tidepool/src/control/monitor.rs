//! The monitor thread: finds blocked workers and applies the policy.
//!
//! # What it does each tick
//!
//! 1. Reads every worker's status word (an atomic load each: cheap) and keeps,
//!    per worker, since when it has seen the *same* task running.
//! 2. For suspects only — workers holding a slot whose task has run at least
//!    the monitor interval — asks the kernel (`sys::ThreadProbe`: one `pread`
//!    of `/proc/self/task/<tid>/stat` and one CPU-clock read). A suspect found
//!    runnable is asked again less and less often (doubling, up to
//!    [`MAX_PROBE_BACKOFF`] ticks) until it changes task, and does not keep
//!    the monitor ticking fast meanwhile.
//! 3. Hands the [`Sample`] to the policy and applies its [`Decision`](super::policy::Decision): marks
//!    blocked workers (their slot goes back to the pool), changes the number of
//!    slots, wakes or starts workers for queued work.
//! 4. Records one point of the thread-count series.
//!
//! # How long it sleeps
//!
//! Like a system monitor, it ticks at the monitor interval only while there
//! are suspects, doubles its sleep up to [`MAX_SLEEP`] while there are none,
//! and sleeps until woken while the pool is idle (no worker holds a slot or
//! runs a task, and nothing is queued). A worker about to run a task with a
//! slot it took (or was handed) since it last ran one wakes it
//! (`MonitorSignal::wake`), through a Dekker pair: the monitor sets
//! `idle_sleep` then re-reads the slot counters; the slot is taken (by the
//! worker, or by the notifier that then hands it over, which orders the two)
//! before the worker reads `idle_sleep`. All SeqCst, so one sees the other
//! (loom model: `tests/loom_monitor_idle.rs`).
//! The worker wakes it rather than the spawning thread so that a task spawned
//! onto an idle pool gets the idle core, not the monitor.
//!
//! The monitor holds only a `Weak` reference to the pool, so a pool whose
//! handles are gone is never kept alive by it.

use super::policy::{KernelView, Limits, Policy, Sample, WorkerView};
use super::slots::{Phase, StatusWord};
use super::StartReason;
use crate::metrics::{Metrics, ThreadCounters, ThreadSample};
use crate::shared::Shared;
use crate::sync::{lock, Arc, AtomicBool, Condvar, Mutex, Ordering};
use std::collections::VecDeque;
use std::sync::Weak;
use std::time::{Duration, Instant};

/// The longest sleep between ticks while the pool is busy. 10 ms keeps the
/// monitor under 0.1% of a core and still notices a new blocker quickly once
/// the first tick after it sets the pace back to the interval.
const MAX_SLEEP: Duration = Duration::from_millis(10);

/// A suspect seen runnable is probed at most every this many ticks.
const MAX_PROBE_BACKOFF: u32 = 64;

/// Points kept in the thread-count series (oldest dropped first): a minute at
/// 1 ms ticks, ~1.5 MiB.
const SERIES_CAPACITY: usize = 65_536;

/// How other threads nudge the monitor, and what it reports back.
#[derive(Debug, Default)]
pub(crate) struct MonitorSignal {
    state: Mutex<SignalState>,
    cv: Condvar,
    /// The monitor is (about to be) sleeping until woken.
    idle_sleep: AtomicBool,
}

#[derive(Debug, Default)]
struct SignalState {
    woken: bool,
    stopped: bool,
    busy: Duration,
    series: VecDeque<ThreadSample>,
}

impl MonitorSignal {
    /// Wakes the monitor if it sleeps because the pool was idle. Workers call
    /// it before running a task with a newly taken slot (see the module docs
    /// for the pairing).
    pub(crate) fn wake(&self) {
        // The slot was taken (SeqCst) before this read: see `seqcst_pair`.
        crate::sync::seqcst_pair();
        if self.idle_sleep.load(Ordering::SeqCst) {
            let mut state = lock(&self.state);
            state.woken = true;
            self.cv.notify_one();
        }
    }

    /// Tells the monitor to exit.
    pub(crate) fn stop(&self) {
        let mut state = lock(&self.state);
        state.stopped = true;
        self.cv.notify_one();
    }

    /// Copies the monitor's own figures into a metrics snapshot.
    pub(crate) fn fill_metrics(&self, m: &mut Metrics) {
        let state = lock(&self.state);
        m.monitor_busy = state.busy;
        m.thread_series = state.series.iter().copied().collect();
    }

    /// Sleeps for `timeout`, or until woken if `None`. Returns false if the
    /// monitor should exit.
    fn sleep(&self, timeout: Option<Duration>) -> bool {
        let mut state = lock(&self.state);
        if timeout.is_none() && state.woken {
            state.woken = false;
            return !state.stopped;
        }
        if !state.stopped {
            state = match timeout {
                Some(t) => match self.cv.wait_timeout(state, t) {
                    Ok((g, _)) => g,
                    Err(p) => p.into_inner().0,
                },
                None => loop {
                    state = match self.cv.wait(state) {
                        Ok(g) => g,
                        Err(p) => p.into_inner(),
                    };
                    if state.woken || state.stopped {
                        break state;
                    }
                },
            };
        }
        state.woken = false;
        !state.stopped
    }

    fn record(&self, busy: Duration, point: Option<ThreadSample>) {
        let mut state = lock(&self.state);
        state.busy += busy;
        if let Some(point) = point {
            if state.series.len() == SERIES_CAPACITY {
                state.series.pop_front();
            }
            state.series.push_back(point);
        }
    }
}

/// Starts the monitor thread of `shared`.
pub(crate) fn start(shared: &Arc<Shared>) {
    let weak = Arc::downgrade(shared);
    let name = format!("{}-monitor", shared.config.thread_name);
    // A pool without a monitor still runs tasks; it only cannot replace
    // blocked workers. Better than failing the build on a transient EAGAIN.
    let _ = std::thread::Builder::new()
        .name(name)
        .stack_size(256 * 1024)
        .spawn(move || Monitor::new(weak).run());
}

/// What the monitor remembers about one worker entry.
#[derive(Clone, Copy, Debug)]
struct Track {
    /// The status word last seen.
    seen: StatusWord,
    /// When that word was first seen.
    since: Instant,
    /// The thread's CPU time when first seen in this task.
    cpu_at_since: Option<Duration>,
    /// The thread's run delay (time runnable but not running) at the last probe.
    run_delay: Option<Duration>,
    /// Ticks to wait before the next kernel probe, and the current backoff.
    probe_wait: u32,
    backoff: u32,
}

struct Monitor {
    pool: Weak<Shared>,
    tracks: Vec<Option<Track>>,
    policy: Option<Policy>,
    sleep: Duration,
}

impl Monitor {
    fn new(pool: Weak<Shared>) -> Self {
        Monitor {
            pool,
            tracks: Vec::new(),
            policy: None,
            sleep: Duration::ZERO,
        }
    }

    fn run(mut self) {
        loop {
            let Some(shared) = self.pool.upgrade() else {
                return;
            };
            if shared.is_stopped() {
                return;
            }
            let started = Instant::now();
            let (suspects, idle) = self.tick(&shared);
            let interval = shared.config.monitor_interval;
            let timeout = if idle {
                shared.monitor.idle_sleep.store(true, Ordering::SeqCst);
                // Re-check after announcing the idle sleep (Dekker pair with
                // `MonitorSignal::wake`; the fence because `has_work` reads
                // the queues with weaker loads).
                std::sync::atomic::fence(Ordering::SeqCst);
                if shared.slots.counts().active == 0 && !shared.has_work() {
                    None
                } else {
                    shared.monitor.idle_sleep.store(false, Ordering::SeqCst);
                    Some(interval)
                }
            } else if suspects {
                Some(interval)
            } else {
                // `max`: an interval longer than MAX_SLEEP (the builder
                // accepts up to 10 s) is itself the longest sleep.
                Some((self.sleep * 2).clamp(interval, MAX_SLEEP.max(interval)))
            };
            self.sleep = timeout.unwrap_or(interval);
            let signal = Arc::clone(&shared);
            shared.monitor.record(started.elapsed(), None);
            drop(shared);
            let keep_going = signal.monitor.sleep(timeout);
            signal.monitor.idle_sleep.store(false, Ordering::SeqCst);
            if !keep_going {
                return;
            }
        }
    }

    /// One tick. Returns (whether any worker is a suspect, whether the pool is
    /// idle).
    fn tick(&mut self, shared: &Arc<Shared>) -> (bool, bool) {
        let config = &shared.config;
        let policy = self
            .policy
            .get_or_insert_with(|| Policy::new(config.controller));
        let limits = Limits {
            concurrency: config.concurrency,
            max_threads: config.max_threads,
            threshold: config.monitor_interval,
        };
        let now = Instant::now();
        let high_water = shared.high_water.load(Ordering::Acquire);
        if self.tracks.len() < high_water {
            self.tracks.resize(high_water, None);
        }

        let mut sample = Sample {
            now: now.duration_since(shared.built_at),
            ..Sample::default()
        };
        let mut any_suspect = false;
        for (index, track) in self.tracks.iter_mut().enumerate() {
            let entry = &shared.entries[index];
            let seen = entry.status.load();
            match seen.phase() {
                Phase::Idle => {
                    *track = None;
                    continue;
                }
                Phase::Blocked => {
                    sample.blocked += 1;
                    continue;
                }
                Phase::InTask => {}
            }
            let fresh = !matches!(track, Some(t) if t.seen == seen);
            if fresh {
                *track = Some(Track {
                    seen,
                    since: now,
                    cpu_at_since: None,
                    run_delay: None,
                    probe_wait: 0,
                    backoff: 1,
                });
            }
            let Some(t) = track.as_mut() else { continue };
            let mut view = WorkerView {
                index,
                seen,
                in_task_for: now.duration_since(t.since),
                kernel: None,
            };
            if policy.detects_blocking() {
                let probe = lock(&entry.probe).clone();
                if let Some(probe) = probe {
                    if fresh {
                        t.cpu_at_since = probe.cpu_time();
                    } else if policy.is_suspect(&limits, &view) {
                        if t.probe_wait == 0 {
                            let waiting = probe.state().is_waiting();
                            let cpu_share = match (t.cpu_at_since, probe.cpu_time()) {
                                (Some(then), Some(cpu)) => Some(
                                    cpu.saturating_sub(then).as_secs_f64()
                                        / view.in_task_for.as_secs_f64().max(1e-9),
                                ),
                                _ => None,
                            };
                            view.kernel = Some(KernelView { waiting, cpu_share });
                            if !waiting {
                                // Runnable: if it waits for a CPU, the cores are
                                // oversubscribed; more threads would not help.
                                let delay = probe.run_delay();
                                if let (Some(before), Some(now)) = (t.run_delay, delay) {
                                    if now > before {
                                        ThreadCounters::bump(
                                            &shared.thread_counters.oversubscribed,
                                        );
                                    }
                                }
                                t.run_delay = delay;
                                // Look again later, less and less often.
                                t.backoff = (t.backoff * 2).min(MAX_PROBE_BACKOFF);
                                t.probe_wait = t.backoff;
                            }
                        } else {
                            t.probe_wait -= 1;
                        }
                        // Tick fast only for suspects due for a look next
                        // tick; one found runnable again and again (CPU-bound)
                        // lets the monitor slow down, so it does not take a
                        // thousand wake-ups a second from the busy cores.
                        any_suspect |= t.probe_wait == 0;
                    }
                }
            }
            sample.in_task.push(view);
        }

        sample.queued = shared.queued();
        sample.slots = shared.slots.counts();
        sample.target = shared.slots.target();
        sample.threads = shared.threads.load(Ordering::Acquire);
        sample.parked = shared.sleepers.parked();
        sample.ended = shared.task_totals();

        let decision = policy.decide(&limits, &sample);
        for &(index, seen) in &decision.mark_blocked {
            if shared.entries[index].status.try_mark_blocked(seen) {
                shared.slots.release();
                ThreadCounters::bump(&shared.thread_counters.blocked_detections);
                self.tracks[index] = None;
            }
        }
        if let Some(target) = decision.set_target {
            shared.set_target(target);
        }
        let reason = if !decision.mark_blocked.is_empty() {
            StartReason::Compensation
        } else if decision.set_target.is_some_and(|t| t > sample.target) {
            StartReason::Policy
        } else {
            StartReason::Demand
        };
        for _ in 0..decision.wake {
            if !shared.slots.try_acquire(true) {
                break;
            }
            shared.wake_or_start(reason);
        }

        // Idle also needs the policy at rest: a raised target must first be
        // given back, which takes ticks.
        let idle = sample.in_task.is_empty()
            && sample.blocked == 0
            && sample.queued == 0
            && sample.slots.active == 0
            && shared.slots.target() == config.concurrency;
        let point = (!idle).then(|| ThreadSample {
            at: sample.now,
            running: sample.slots.active,
            blocked: sample.blocked + decision.mark_blocked.len(),
            idle: sample.parked,
        });
        shared.monitor.record(Duration::ZERO, point);
        (any_suspect, idle)
    }
}

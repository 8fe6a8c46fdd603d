//! How workers and the pool reach the monitor thread, and what it reports
//! back: [`MonitorSignal`].
//!
//! # The idle sleep
//!
//! The monitor sleeps until woken while the pool is idle. A worker about to
//! run a task with a slot it took (or was handed) since it last ran one
//! wakes it ([`MonitorSignal::wake`]), through a Dekker pair: the monitor
//! sets `idle_sleep`, then re-reads the slot counters and queues
//! ([`MonitorSignal::announce_idle`]); the slot is taken (by the worker, or
//! by the notifier that then hands it over, which orders the two) before the
//! worker reads `idle_sleep`. All SeqCst, so one sees the other, and a
//! running task is always watched. The loom model `loom_models/monitor_idle.rs`
//! runs these functions with the real slot counters.
//!
//! # Spare requests
//!
//! A spawner that handed a presumed task the last parked worker asks for a
//! spare ([`MonitorSignal::want_spare`]): a flag under the state's lock and
//! a notify. The monitor serves it inside whatever sleep it is in, with the
//! lock let go while the thread starts, and sleeps on; the wake flag is
//! read on every turn of the sleep's loop, so a wake that lands during the
//! start still ends a sleep until woken (the same loom model checks both:
//! no request lost, no wake missed).
//!
//! # The CPU sentinels' arming
//!
//! CPU sentinels (`control::sentinel`) watch only while the pool is
//! saturated. One that finds it is not puts the `sentinels_resting` flag
//! up and waits ([`MonitorSignal::sentinel_wait`]); whoever saturates it
//! (a spawn that found no free slot, the monitor's tick) takes the flag
//! down and wakes them ([`MonitorSignal::arm_sentinels`]). The same Dekker
//! pair as the idle sleep: the sentinel stores the flag, then reads the
//! slots and queues again; the armer changed those, then reads the flag;
//! all SeqCst, so either the sentinel sees the pool saturated and stays
//! up, or the armer sees the flag up and wakes it. The flag starts down,
//! so a pool without sentinels pays one load per arm, never the lock. The loom model
//! `loom_models/sentinel.rs` runs both with a stop.

use crate::metrics::{Metrics, ThreadSample};
use crate::sync::{fence, lock, wait, wait_timeout, AtomicBool, Condvar, Mutex, Ordering};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

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
    /// The monitor is (about to be) in a timed sleep longer than its
    /// interval: a declared blocking section nudges it awake
    /// ([`MonitorSignal::nudge`]).
    long_sleep: AtomicBool,
    /// A CPU sentinel (`monitor::sentinel`) found the pool not saturated
    /// and waits to be armed: set by it, cleared by whoever saturates the
    /// pool. Never set in a pool without sentinels.
    sentinels_resting: AtomicBool,
    /// Where disarmed sentinels wait.
    sentinel_cv: Condvar,
    /// The CPU of the last sentinel that poked, plus one (0: none).
    poked_cpu: std::sync::atomic::AtomicUsize,
    /// How many CPU sentinels watch (started on their CPU under
    /// `SCHED_IDLE`, and not yet gone).
    sentinels: std::sync::atomic::AtomicUsize,
    /// The monitor thread's id, once it runs (0 before).
    monitor_tid: std::sync::atomic::AtomicI32,
    /// The CPUs the monitor thread may run on (a bitmap; 0 if unknown).
    monitor_cpus: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Default)]
struct SignalState {
    woken: bool,
    /// A declared blocking section began during a long sleep: end it.
    nudged: bool,
    /// A spare worker is wanted ([`MonitorSignal::want_spare`]).
    spare: bool,
    /// A CPU sentinel saw its CPU idle: end any timed sleep.
    poked: bool,
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

    /// A worker entered a declared blocking section: if the monitor is in
    /// a timed sleep longer than its interval (it backs off to 10 ms while
    /// nothing is due for a look), ends it, so the section is looked at
    /// within an interval or two. Costs one load otherwise. A nudge that
    /// misses a sleep just begun costs that sleep's length, never a hang.
    pub(crate) fn nudge(&self) {
        if self.long_sleep.load(Ordering::Relaxed) {
            let mut state = lock(&self.state);
            state.nudged = true;
            self.cv.notify_one();
        }
    }

    /// A CPU sentinel found its CPU idle while the pool is saturated: ends
    /// the monitor's timed sleep, whatever its length, so it looks now.
    pub(crate) fn poke(&self, cpu: usize) {
        self.poked_cpu.store(cpu + 1, Ordering::Relaxed);
        let mut state = lock(&self.state);
        state.poked = true;
        self.cv.notify_one();
    }

    /// The monitor thread says who it is (its thread id) and which CPUs
    /// are its own, for a sentinel to move it onto an idle CPU and back.
    pub(crate) fn set_monitor_thread(&self, tid: i32, cpus: u64) {
        self.monitor_cpus.store(cpus, Ordering::Relaxed);
        self.monitor_tid.store(tid, Ordering::Relaxed);
    }

    /// The monitor thread's id and own CPUs, once it has started.
    pub(crate) fn monitor_thread(&self) -> Option<(i32, u64)> {
        let tid = self.monitor_tid.load(Ordering::Relaxed);
        (tid != 0).then(|| (tid, self.monitor_cpus.load(Ordering::Relaxed)))
    }

    /// A CPU sentinel starts watching (`watching`) or stops.
    pub(crate) fn sentinel_watches(&self, watching: bool) {
        if watching {
            self.sentinels.fetch_add(1, Ordering::Relaxed);
        } else {
            self.sentinels.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether any CPU sentinel watches the pool's cores.
    pub(crate) fn sentinels_watch(&self) -> bool {
        self.sentinels.load(Ordering::Relaxed) > 0
    }

    /// The CPU of the sentinel that poked since the last call, if any.
    pub(crate) fn take_poked_cpu(&self) -> Option<usize> {
        self.poked_cpu.swap(0, Ordering::Relaxed).checked_sub(1)
    }

    /// The pool is saturated (every slot taken, work queued: the caller
    /// saw it after making it so, or at a tick): wakes the CPU sentinels
    /// if they wait. One load while they watch, or if there are none. The other side of
    /// [`MonitorSignal::sentinel_wait`]'s pair (module docs).
    pub(crate) fn arm_sentinels(&self) {
        crate::sync::seqcst_pair();
        if self.sentinels_resting.load(Ordering::SeqCst) {
            let _state = lock(&self.state);
            self.sentinels_resting.store(false, Ordering::SeqCst);
            self.sentinel_cv.notify_all();
        }
    }

    /// A sentinel found the pool not saturated: puts the flag up, asks
    /// `still_calm` again, and waits until the sentinels are armed again,
    /// unless the pool saturated meanwhile (then it returns at once to
    /// watch). False if the pool stopped.
    pub(crate) fn sentinel_wait(&self, still_calm: impl FnOnce() -> bool) -> bool {
        let mut state = lock(&self.state);
        self.sentinels_resting.store(true, Ordering::SeqCst);
        // The fence because `still_calm` reads the queues with weaker loads.
        fence(Ordering::SeqCst);
        if !still_calm() {
            // An arm that read the flag before it went up was a no-op.
            self.sentinels_resting.store(false, Ordering::SeqCst);
            return !state.stopped;
        }
        while !state.stopped && self.sentinels_resting.load(Ordering::SeqCst) {
            state = wait(&self.sentinel_cv, state);
        }
        !state.stopped
    }

    /// Asks the monitor to start a spare parked worker now (see
    /// `worker::start_spare`), whatever its sleep: the thread that asks has
    /// just woken a worker, and a start there would compete with it for the
    /// core it was woken on (in the lab's `waiting`, the woken item started
    /// 0.13-0.18 ms late instead of 0.05-0.08).
    pub(crate) fn want_spare(&self) {
        let mut state = lock(&self.state);
        if !state.spare {
            state.spare = true;
            self.cv.notify_one();
        }
    }

    /// Whether a spare worker was asked for and not yet served (the loom
    /// model checks that a request is never lost).
    #[cfg(all(tidepool_loom, test))]
    pub(crate) fn spare_pending(&self) -> bool {
        lock(&self.state).spare
    }

    /// Tells the monitor to exit.
    pub(crate) fn stop(&self) {
        let mut state = lock(&self.state);
        state.stopped = true;
        self.cv.notify_one();
        self.sentinel_cv.notify_all();
    }

    /// Copies the monitor's own figures into a metrics snapshot.
    pub(crate) fn fill_metrics(&self, m: &mut Metrics) {
        let state = lock(&self.state);
        m.monitor_busy = state.busy;
        m.thread_series = state.series.iter().copied().collect();
    }

    /// The monitor found the pool idle: announces that it will sleep until
    /// woken, then asks `still_idle` again (the Dekker pair with
    /// [`MonitorSignal::wake`]). Returns true if the pool is still idle and
    /// the monitor may sleep until woken; false (announcement withdrawn) if
    /// work showed up meanwhile.
    pub(crate) fn announce_idle(&self, still_idle: impl FnOnce() -> bool) -> bool {
        self.idle_sleep.store(true, Ordering::SeqCst);
        // The fence because `still_idle` reads the queues with weaker loads.
        fence(Ordering::SeqCst);
        if still_idle() {
            return true;
        }
        self.idle_sleep.store(false, Ordering::SeqCst);
        false
    }

    /// Sleeps for `timeout`, or until woken if `None`, then withdraws any
    /// idle announcement. Returns false if the monitor should exit.
    ///
    /// A request for a spare worker ([`MonitorSignal::want_spare`]) is
    /// served by `serve_spare` as it comes, and the sleep goes on: the
    /// request asks for a thread, not for a look at the pool (a tick out
    /// of turn would also change what the monitor learns, for example how
    /// long a kind's tasks are seen waiting). The idle announcement stays
    /// up meanwhile, so a wake during the start is not lost.
    pub(crate) fn sleep(&self, timeout: Option<Duration>, mut serve_spare: impl FnMut()) -> bool {
        self.sleep_nudged_after(timeout, None, &mut serve_spare)
    }

    /// Like [`MonitorSignal::sleep`], but a timed sleep longer than
    /// `nudged_after` ends early when [`MonitorSignal::nudge`]d.
    pub(crate) fn sleep_nudged_after(
        &self,
        timeout: Option<Duration>,
        nudged_after: Option<Duration>,
        mut serve_spare: impl FnMut(),
    ) -> bool {
        // A timeout too long for an instant is a sleep until woken.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let long = matches!((timeout, nudged_after), (Some(t), Some(n)) if t > n);
        if long {
            self.long_sleep.store(true, Ordering::Relaxed);
        }
        let mut state = lock(&self.state);
        if !long {
            state.nudged = false;
        }
        // A wake that came before this sleep-until-woken counts; a timed
        // sleep ignores it (it was for an earlier sleep). Checked on every
        // turn, not only before the first wait: a wake can also land while
        // a spare is being started, with the lock let go (the loom model
        // `monitor_idle` deadlocked when it was checked only after a wait).
        while !state.stopped {
            if deadline.is_none() && state.woken {
                break;
            }
            if long && state.nudged {
                break;
            }
            if deadline.is_some() && state.poked {
                break;
            }
            if state.spare {
                state.spare = false;
                drop(state);
                serve_spare();
                state = lock(&self.state);
                continue;
            }
            match deadline {
                Some(until) => {
                    let now = Instant::now();
                    if now >= until {
                        break;
                    }
                    state = wait_timeout(&self.cv, state, until - now).0;
                }
                None => state = wait(&self.cv, state),
            }
        }
        state.woken = false;
        state.nudged = false;
        state.poked = false;
        let keep_going = !state.stopped;
        drop(state);
        self.long_sleep.store(false, Ordering::Relaxed);
        self.idle_sleep.store(false, Ordering::SeqCst);
        keep_going
    }

    /// Adds to the monitor's busy time and appends a point to the series.
    pub(crate) fn record(&self, busy: Duration, point: Option<ThreadSample>) {
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

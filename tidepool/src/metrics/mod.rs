//! Counters, latency histograms and thread-count series, and the
//! [`Metrics`] snapshot users read with [`Pool::metrics`](crate::Pool::metrics).
//!
//! Hot counters are sharded: each worker slot owns a cache-padded set that
//! only its thread writes, plus one shared set for threads outside the pool.
//! A snapshot adds the shards up, so reading metrics costs the reader, not the
//! workers.
//!
//! - `counters`: the sharded counters and latency recorders workers write;
//! - `kinds`: the per-kind table behind [`Metrics::kinds`];
//! - `export` (feature `metrics`): the series `Pool::publish_metrics`
//!   publishes.

mod counters;
#[cfg(feature = "metrics")]
mod export;
mod kinds;

pub(crate) use counters::{
    add_task_counters, new_histogram, LatencyRecorder, Outcome, TaskCounters, ThreadCounters,
};
#[cfg(feature = "metrics")]
pub(crate) use export::PUBLISH_EVERY;
pub(crate) use kinds::{KindCounters, KindEvent};

use hdrhistogram::Histogram;
use std::time::Duration;

/// How the monitor tells a blocked worker from a busy one: the pool's
/// [`Metrics::detection`].
///
/// On Linux every worker opens its `/proc/self/task/<tid>/stat` file when it
/// starts, and the pool is in [`Kernel`](Self::Kernel) mode. A worker that
/// cannot (`/proc` not mounted, the process out of file descriptors) is
/// judged by its thread CPU clock instead, and one without a CPU clock (off
/// Linux) by time alone; the pool reports the weakest mode of its workers,
/// and [`Metrics::detection_fallbacks`] counts the workers that fell back.
///
/// ```
/// use tidepool::{Controller, Detection, Pool};
/// let pool = Pool::builder().build().unwrap();
/// pool.spawn_fn(|| ()).join().unwrap();
/// let m = pool.metrics();
/// if cfg!(target_os = "linux") && std::fs::metadata("/proc/self/stat").is_ok() {
///     assert_eq!(m.detection, Detection::Kernel);
///     assert_eq!(m.detection_fallbacks, 0);
/// }
/// // A fixed-size pool never looks.
/// let fixed = Pool::builder().controller(Controller::Fixed).build().unwrap();
/// assert_eq!(fixed.metrics().detection, Detection::Off);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Detection {
    /// The kernel's thread state: a suspect that sleeps (`S` or `D`) and used
    /// little CPU is blocked; a runnable one never is. The best mode.
    #[default]
    Kernel,
    /// The thread CPU clock alone: a suspect whose clock advanced by less
    /// than a quarter of the wall time over ten monitor intervals is
    /// blocked. A thread kept off the cores that long by other load can be
    /// taken for blocked; a computing one never is.
    CpuClock,
    /// Time alone: a worker in the same task for fifty monitor intervals
    /// while work waits is taken for blocked, whether it blocks or
    /// computes; at most `concurrency` workers are blocked this way at
    /// once. Declare blocking calls with [`blocking`](crate::blocking)
    /// rather than rely on it.
    TimeOnly,
    /// The controller does not replace blocked workers
    /// ([`Controller::Fixed`](crate::Controller::Fixed),
    /// [`Controller::Gradual`](crate::Controller::Gradual)).
    Off,
}

impl Detection {
    /// The mode a worker with `probe` is judged in.
    pub(crate) fn of(probe: &crate::sys::ThreadProbe) -> Detection {
        if probe.reads_state() {
            Detection::Kernel
        } else if probe.reads_cpu_clock() {
            Detection::CpuClock
        } else {
            Detection::TimeOnly
        }
    }

    /// The mode the platform offers at best (before any probe is opened).
    pub(crate) fn best() -> Detection {
        if cfg!(target_os = "linux") {
            Detection::Kernel
        } else {
            Detection::TimeOnly
        }
    }

    /// A number for an atomic.
    pub(crate) fn code(self) -> u64 {
        match self {
            Detection::Kernel => 0,
            Detection::CpuClock => 1,
            Detection::TimeOnly => 2,
            Detection::Off => 3,
        }
    }

    /// The mode of a [`code`](Self::code).
    pub(crate) fn from_code(code: u64) -> Detection {
        match code {
            0 => Detection::Kernel,
            1 => Detection::CpuClock,
            2 => Detection::TimeOnly,
            _ => Detection::Off,
        }
    }

    /// Its name in metrics and events.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Detection::Kernel => "kernel",
            Detection::CpuClock => "cpu_clock",
            Detection::TimeOnly => "time_only",
            Detection::Off => "off",
        }
    }
}

/// Where one of a pool's settings came from: [`Metrics::concurrency_from`]
/// and [`Metrics::max_threads_from`].
///
/// A value set in code ([`Builder::concurrency`](crate::Builder::concurrency),
/// [`Builder::max_threads`](crate::Builder::max_threads)) wins over the
/// environment (`TIDEPOOL_CONCURRENCY`, `TIDEPOOL_MAX_THREADS`), which wins
/// over the default. With the `tracing` feature, the `thread started` and
/// `thread retired` events carry the same answer (`concurrency_from`,
/// `max_threads_from`: `"code"`, `"environment"` or `"default"`).
///
/// ```
/// use tidepool::{Pool, SettingSource};
/// let pool = Pool::builder().concurrency(2).build()?;
/// let m = pool.metrics();
/// assert_eq!((m.concurrency, m.concurrency_from), (2, SettingSource::Code));
/// // Not set in code: the environment's value, or the default.
/// assert_ne!(m.max_threads_from, SettingSource::Code);
/// # Ok::<(), tidepool::BuildError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SettingSource {
    /// Set in code, on the [`Builder`](crate::Builder).
    Code,
    /// Read from the environment variable (`TIDEPOOL_CONCURRENCY`,
    /// `TIDEPOOL_MAX_THREADS`), since the code left the setting unset.
    Environment,
    /// Neither: the builder's default (see each setting's documentation).
    #[default]
    Default,
}

impl SettingSource {
    /// The source as the `tracing` events name it: `"code"`,
    /// `"environment"` or `"default"`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SettingSource::Code => "code",
            SettingSource::Environment => "environment",
            SettingSource::Default => "default",
        }
    }
}

/// A summary of queue-to-start latencies: from `spawn` to the task's first
/// poll.
///
/// Every start is measured while a thread spawns at a trickle; during a burst
/// (spawns less than ~10 µs apart) one in eight is, because reading the clock
/// twice per task would cost a tiny task a quarter of its time. `count` says
/// how many starts were measured. A snapshot includes every start measured
/// before it was taken.
///
/// ```
/// let pool = tidepool::Pool::builder().build().unwrap();
/// pool.spawn_fn(|| ()).join().unwrap();
/// let latency = pool.metrics().start_latency;
/// assert_eq!(latency.count, 1);
/// assert!(latency.p50 <= latency.max);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencySummary {
    /// How many starts were measured (see the sampling note above).
    pub count: u64,
    /// Mean latency.
    pub mean: Duration,
    /// Median latency.
    pub p50: Duration,
    /// 99th percentile latency.
    pub p99: Duration,
    /// Largest latency seen.
    pub max: Duration,
}

impl LatencySummary {
    /// Summarises a histogram of `sys::ticks`, `nanos_per_tick` apart.
    pub(crate) fn from_ticks(h: &Histogram<u64>, nanos_per_tick: f64) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        let time = |ticks: f64| Duration::from_nanos((ticks * nanos_per_tick) as u64);
        LatencySummary {
            count: h.len(),
            mean: time(h.mean()),
            p50: time(h.value_at_quantile(0.5) as f64),
            p99: time(h.value_at_quantile(0.99) as f64),
            max: time(h.max() as f64),
        }
    }
}

/// One point of the thread-count time series: how many worker threads were in
/// each state at `at` (time since the pool was built).
///
/// ```
/// use std::time::Duration;
/// let pool = tidepool::Pool::builder().concurrency(1).build().unwrap();
/// pool.spawn_fn(|| std::thread::sleep(Duration::from_millis(20))).join().unwrap();
/// let series = pool.metrics().thread_series;
/// // Sampled by the monitor while the pool was busy, oldest first.
/// assert!(series.windows(2).all(|w| w[0].at <= w[1].at));
/// assert!(series.iter().all(|s| s.running <= 1));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadSample {
    /// Time since the pool was built.
    pub at: Duration,
    /// Workers holding a running slot (running a task or looking for one).
    pub running: usize,
    /// Workers inside a task whose slot was given away (blocked).
    pub blocked: usize,
    /// Parked workers.
    pub idle: usize,
}

/// A snapshot of a pool's counters, taken by [`Pool::metrics`](crate::Pool::metrics).
///
/// The task counters always add up:
/// `spawned == completed + panicked + cancelled + in_flight`.
///
/// ```
/// use tidepool::Pool;
/// let pool = Pool::builder().build().unwrap();
/// pool.spawn_fn(|| ()).join().unwrap();
/// let m = pool.metrics();
/// assert_eq!(m.spawned, 1);
/// assert_eq!(m.completed, 1);
/// assert_eq!(m.spawned, m.completed + m.panicked + m.cancelled + m.in_flight);
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Metrics {
    /// Tasks accepted by `spawn`, `spawn_fn` and friends.
    pub spawned: u64,
    /// Tasks that ran to their end.
    pub completed: u64,
    /// Tasks that panicked (the panic was caught; the worker carried on).
    pub panicked: u64,
    /// Tasks dropped before their end: cancelled by a handle, or by shutdown.
    pub cancelled: u64,
    /// Spawns refused because the pool was shut down (not counted in `spawned`).
    pub rejected: u64,
    /// Tasks accepted and not yet ended: queued, running, or awaiting.
    pub in_flight: u64,
    /// Tasks waiting in a queue now.
    pub queued: u64,
    /// Worker threads alive now.
    pub threads: usize,
    /// Parked worker threads now.
    pub idle_threads: usize,
    /// Workers holding a running slot now.
    pub running_threads: usize,
    /// Workers inside a task that gave its slot up (blocked) now.
    pub blocked_threads: usize,
    /// The most worker threads alive at once.
    pub peak_threads: usize,
    /// Worker threads started, for any reason (the eight `threads_started_*` reasons below add up to it).
    pub threads_started: u64,
    /// Threads started for new work with a free slot and no parked worker.
    pub threads_started_demand: u64,
    /// Threads started to replace workers found blocked.
    pub threads_started_compensation: u64,
    /// Threads started because a policy (Gradual, HillClimbing) added slots.
    pub threads_started_policy: u64,
    /// Threads started beyond one per blocked worker because a burst of
    /// queued work kept blocking in turn (`Adaptive` grows in proportion:
    /// see [`Controller::Adaptive`](crate::Controller::Adaptive)).
    pub threads_started_burst: u64,
    /// Threads started parked when the pool was built, to have
    /// `min_threads` from the start.
    pub threads_started_floor: u64,
    /// Threads started to take a slot lent under the quantum rule (see
    /// [`Builder::quantum`](crate::Builder::quantum)); a parked worker takes
    /// it when there is one.
    pub threads_started_quantum: u64,
    /// Threads started for a task presumed blocking as it was spawned or
    /// found queued (it runs on the new thread without a slot), or for
    /// queued work when a worker gave its slot up at the start of one (see
    /// [`Metrics::presumed_blocking`]); a parked worker takes either when
    /// there is one.
    pub threads_started_presumed: u64,
    /// Spare threads started parked after a task presumed blocking took the
    /// last parked worker, so that the next one is handed to a parked
    /// thread instead of waiting for a thread to start (at most one per
    /// such hand; a spare nobody needs retires after `idle_timeout`).
    pub threads_started_spare: u64,
    /// Slots lent under the quantum rule: every slot had been held by a
    /// computing task for longer than the quantum while work was queued.
    /// While only computing work is queued, a lend is offered (and refused
    /// by the worker that takes it) once a quantum, so this grows by about
    /// 100 a second at the default quantum during such a stretch.
    pub quantum_lends: u64,
    /// Thread starts that failed (the OS refused); the pool kept running,
    /// and retries (at the next spawn, and at each monitor tick while work
    /// waits).
    pub thread_start_failures: u64,
    /// Spawns refused with [`SpawnError::NoThreads`](crate::SpawnError::NoThreads)
    /// (or resolved as cancelled, for `spawn`): no worker thread was alive
    /// and the OS refused to start one, so nothing could have run them.
    pub no_thread_refusals: u64,
    /// Threads retired after `idle_timeout` without work.
    pub threads_retired_idle: u64,
    /// Threads retired because the pool had more than it needed.
    pub threads_retired_surplus: u64,
    /// Times the monitor found a worker blocked and gave its slot away.
    pub blocked_detections: u64,
    /// Declared blocking sections entered on workers (`blocking`, `join`,
    /// `block_on` called on a worker).
    pub declared_blocking: u64,
    /// Closures started without a slot because tasks of their kind blocked
    /// before (and never computed): handed a thread as they were spawned, or
    /// started by a worker that found them queued and gave its slot on, as
    /// it would once the monitor found the task blocked. See
    /// [`Controller::Adaptive`](crate::Controller::Adaptive).
    pub presumed_blocking: u64,
    /// Presumed-blocking closures handed, as they were spawned, to a parked
    /// worker that runs them without a slot (the others of
    /// `presumed_blocking` got a thread started for them, or were found
    /// queued by a worker).
    pub presumed_handed: u64,
    /// Presumed-blocking closures that kept a core busy instead (for at
    /// least a monitor interval, at a quarter of their wall time or more):
    /// two of a kind in a row mark it, never presumed blocking again.
    pub presumptions_failed: u64,
    /// Times the monitor found a long-running worker runnable but waiting for a
    /// CPU (its scheduler run delay grew): the cores are oversubscribed, by
    /// this pool or by other processes. tidepool never adds threads for it.
    pub oversubscribed_observations: u64,
    /// How the monitor tells blocked workers from busy ones now: the weakest
    /// mode of the workers alive (of the last one started, if none is). See
    /// [`Detection`].
    pub detection: Detection,
    /// Worker threads started that could not read the kernel's thread state
    /// (no `/proc`, out of file descriptors, or not Linux) and were judged
    /// by their CPU clock or by time instead.
    pub detection_fallbacks: u64,
    /// True while the pool is stuck: every thread up to `max_threads` is
    /// blocked and queued work has waited for ten monitor intervals or
    /// more. Raise `max_threads`, or do not make tasks wait for tasks
    /// queued behind them (a chain of `join`s).
    pub stuck: bool,
    /// Times the pool became stuck (see [`stuck`](Self::stuck)).
    pub stuck_episodes: u64,
    /// Times a high-priority task found every slot busy and borrowed the
    /// reserve slot to start at once.
    pub reserve_slot_lends: u64,
    /// Panics caught in the thread hooks (`Builder::on_thread_start`,
    /// `on_thread_stop`, `thread_name_fn`). A panicking hook is reported by
    /// the panic hook (stderr by default) and counted here; the thread
    /// carries on.
    pub hook_panics: u64,
    /// Panics out of destructors the pool ran for its tasks — a task's
    /// future or captures dropped when it was cancelled or drained, an output
    /// or a panic payload nobody took — caught so they cannot abort the
    /// process. Each was reported by the panic hook like any panic. Drops on
    /// a thread outside the pool (say, a `JoinHandle` detached after its task
    /// finished) are caught too but cannot be counted here.
    pub dropped_panics: u64,
    /// Times a worker of the shared tokio runtime (feature `tokio`) was
    /// found blocked inside a task that `tokio::spawn` put there (by the
    /// program or a library: `axum::serve` spawns every connection so) and
    /// its place went to another of its workers. Process-wide: every pool
    /// on the shared runtime shows the same figure; 0 with
    /// `Builder::tokio_handle`. Nonzero means blocking work runs off the
    /// pool, where nothing learns it: run it on the pool
    /// ([`spawn`](crate::spawn), or `tidepool::http::serve` for a server).
    pub tokio_blocked: u64,
    /// Times a shared tokio runtime worker whose place was given away in a
    /// block was seen computing again and counted again (so no other worker
    /// was let in until the running count fell back).
    pub tokio_counted_again: u64,
    /// Times a worker whose slot was given away while it blocked was seen
    /// computing again and counted against the slots again, so no new
    /// task started until the running workers were back at
    /// `concurrency` (`control::back_from_block`).
    pub workers_counted_again: u64,
    /// Times a worker whose slot was given away while it blocked was seen
    /// computing again while every slot was taken, and was held (its
    /// thread stopped by a signal) until a slot was its own, as a
    /// goroutine back from a system call waits for a P
    /// (`control::hold`). Those let go after the pool's patience count in
    /// [`workers_counted_again`](Self::workers_counted_again).
    pub workers_held: u64,
    /// Whether this pool holds workers back from their blocks with its
    /// signal ([`workers_held`](Self::workers_held)): false when
    /// [`Builder::hold_signal`](crate::Builder::hold_signal) turned it
    /// off, with a controller other than the adaptive ones, off Linux, or
    /// when no real-time signal was free (the `tracing` event `hold signal
    /// unavailable` says so). A [`blocking`](crate::blocking) section's
    /// end waits for a slot whatever this says (no signal is needed there).
    pub holds_workers: bool,
    /// Running slots now.
    pub concurrency_target: usize,
    /// The running slots the pool was built with
    /// ([`Builder::concurrency`](crate::Builder::concurrency)); a policy
    /// that adds slots moves [`concurrency_target`](Self::concurrency_target),
    /// not this.
    pub concurrency: usize,
    /// Where [`concurrency`](Self::concurrency) came from: the code, the
    /// environment variable `TIDEPOOL_CONCURRENCY`, or the default.
    pub concurrency_from: SettingSource,
    /// The most worker threads the pool may have
    /// ([`Builder::max_threads`](crate::Builder::max_threads)).
    pub max_threads: usize,
    /// Where [`max_threads`](Self::max_threads) came from: the code, the
    /// environment variable `TIDEPOOL_MAX_THREADS`, or the default.
    pub max_threads_from: SettingSource,
    /// Time the monitor thread has spent working (not sleeping).
    pub monitor_busy: Duration,
    /// Queue-to-first-poll latency of every task started so far.
    pub start_latency: LatencySummary,
    /// Thread counts by state over time, one sample per monitor tick while the
    /// pool is busy (capped; oldest first).
    pub thread_series: Vec<ThreadSample>,
    /// The kinds of task that blocked in this pool, most blocking first:
    /// which closure or future it was (its type's name), how often it was
    /// found blocked, declared blocking, was presumed blocking, and what
    /// the pool has learned about it. See [`KindFigures`]. At most
    /// [`KINDS_TRACKED`] kinds: the first that blocked; later kinds'
    /// events are counted in [`kinds_untracked`](Self::kinds_untracked).
    pub kinds: Vec<KindFigures>,
    /// Blocking events of kinds the per-kind table had no room for (see
    /// [`kinds`](Self::kinds)).
    pub kinds_untracked: u64,
    /// One entry per worker index the pool has used (the `N` of a worker
    /// thread's default name `{pool}-N`): its state now, the tasks that
    /// ended on it and how often its slot was given away. See
    /// [`WorkerFigures`].
    pub workers: Vec<WorkerFigures>,
}

/// The most kinds of task a pool keeps figures for ([`Metrics::kinds`]):
/// the first kinds that block in it; the events of later ones are only
/// counted, in [`Metrics::kinds_untracked`].
///
/// ```
/// let pool = tidepool::Pool::builder().build().unwrap();
/// assert!(pool.metrics().kinds.len() <= tidepool::KINDS_TRACKED);
/// ```
pub const KINDS_TRACKED: usize = 64;

/// What one kind of task did in a pool: an entry of [`Metrics::kinds`].
///
/// A task's *kind* is the type of its closure or future (for a `join` or a
/// scope's task started outside the pool, its call site): every task
/// spawned from one `spawn_fn(|| ...)` call site is one kind. The pool
/// counts here each time a task of the kind gave its worker's slot away:
/// found blocked by the monitor, a declared block handed over, or started
/// presumed blocking because the kind blocked before.
///
/// ```
/// use std::time::Duration;
///
/// let pool = tidepool::Pool::builder().concurrency(1).build().unwrap();
/// let slow = pool.spawn_fn(|| {
///     // Declared, so the pool hands the slot over on every platform.
///     tidepool::blocking(|| std::thread::sleep(Duration::from_millis(50)))
/// });
/// slow.join().unwrap();
/// for kind in pool.metrics().kinds {
///     // The closure's type: "my_crate::my_function::{{closure}}".
///     assert!(kind.name.ends_with("{{closure}}"), "{kind:?}");
///     println!(
///         "{} (first spawned at {:?}): {} found blocked, {} declared, {} presumed",
///         kind.name, kind.site, kind.blocked_detections, kind.declared_blocking,
///         kind.presumed_blocking,
///     );
/// }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KindFigures {
    /// The name of the kind's closure or future type
    /// (`std::any::type_name`), such as `my_crate::handler::{{closure}}`:
    /// the function the closure is written in. `"(unnamed)"` for work the
    /// process-wide name table had no room for (it names 1,024 kinds).
    pub name: &'static str,
    /// Where the first task of the kind was spawned (the caller of
    /// `spawn_fn`, `spawn`, `execute`, a group's spawns, `join`, `scope`,
    /// `Scope::spawn`), if known. Two call sites that spawn closures of one
    /// type (a closure returned by a function) are one kind, named after
    /// the first.
    pub site: Option<&'static std::panic::Location<'static>>,
    /// Times the monitor found a task of the kind blocked and gave its
    /// slot away ([`Metrics::blocked_detections`], per kind).
    pub blocked_detections: u64,
    /// Times a task of the kind gave its slot away declaring that it
    /// blocks: a [`blocking`](crate::blocking) section handed over after
    /// its grace, or a wait on the pool's own work on a worker (`join`,
    /// `block_on`, a scope's end) ([`Metrics::declared_blocking`], per
    /// kind).
    pub declared_blocking: u64,
    /// Closures of the kind started presumed blocking, without a slot
    /// ([`Metrics::presumed_blocking`], per kind).
    pub presumed_blocking: u64,
    /// Of those, the ones that kept a core busy instead
    /// ([`Metrics::presumptions_failed`], per kind).
    pub presumptions_failed: u64,
    /// The kind's closures are presumed blocking now: handed a thread of
    /// their own as they are spawned (see
    /// [`Controller::Adaptive`](crate::Controller::Adaptive)), within a
    /// cap. What a pool learned is its own: another pool's tasks of the
    /// kind do not count.
    pub presumed_now: bool,
    /// The kind's tasks were seen computing for a whole quantum, and not
    /// blocking since.
    pub computes: bool,
    /// The kind's tasks wait for the pool's own work (a `join`,
    /// `block_on`, a scope's end): never presumed blocking.
    pub waits_on_pool: bool,
}

impl KindFigures {
    /// Every time a task of the kind gave its slot away: found blocked,
    /// declared, or presumed. [`Metrics::kinds`] is sorted by it, most
    /// first.
    ///
    /// ```
    /// let figures = tidepool::Pool::builder().build().unwrap().metrics().kinds;
    /// assert!(figures.windows(2).all(|w| w[0].blocking() >= w[1].blocking()));
    /// ```
    pub fn blocking(&self) -> u64 {
        self.blocked_detections + self.declared_blocking + self.presumed_blocking
    }
}

/// What a worker is doing now: [`WorkerFigures::state`].
///
/// ```
/// use tidepool::WorkerState;
/// let pool = tidepool::Pool::builder().min_threads(1).build().unwrap();
/// pool.spawn_fn(|| ()).join().unwrap();
/// let states: Vec<WorkerState> = pool.metrics().workers.iter().map(|w| w.state).collect();
/// assert!(!states.is_empty());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WorkerState {
    /// No thread has the entry now (it retired, or never started).
    #[default]
    NoThread,
    /// A thread between tasks: looking for work, or parked.
    Idle,
    /// Running a task, holding one of the pool's running slots.
    Running,
    /// Running a task whose slot was given away: found blocked, declared
    /// blocking, or started presumed blocking.
    Blocked,
}

/// One worker's figures: an entry of [`Metrics::workers`].
///
/// A worker is an entry of the pool's table of `max_threads` (its index,
/// the `N` of the default thread name `{pool}-N`); a thread that retires
/// gives its entry to the next one started, so the figures are the
/// entry's, over every thread that had it.
///
/// ```
/// let pool = tidepool::Pool::builder().build().unwrap();
/// let handles: Vec<_> = (0..10).map(|i| pool.spawn_fn(move || i)).collect();
/// for handle in handles {
///     handle.join().unwrap();
/// }
/// let workers = pool.metrics().workers;
/// // Every task ended on some worker.
/// assert_eq!(workers.iter().map(|w| w.tasks_ended).sum::<u64>(), 10);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerFigures {
    /// The worker's index.
    pub index: usize,
    /// What it does now.
    pub state: WorkerState,
    /// Tasks that ended on this worker: ran to their end, panicked, or
    /// were dropped there (an async task's end is counted where its last
    /// poll ran).
    pub tasks_ended: u64,
    /// Times a task on this worker gave its slot away: found blocked,
    /// declared blocking, or started presumed blocking.
    pub blocked: u64,
}

/// A task running now on one of the pool's workers: an entry of
/// [`Pool::running`](crate::Pool::running).
///
/// ```
/// use std::sync::mpsc;
///
/// let pool = tidepool::Pool::builder().build().unwrap();
/// let (release, released) = mpsc::channel::<()>();
/// let task = pool.spawn_fn(move || released.recv().is_ok());
/// let running = loop {
///     let running = pool.running();
///     if !running.is_empty() {
///         break running;
///     }
///     std::thread::yield_now();
/// };
/// assert!(running[0].name.ends_with("{{closure}}"), "{running:?}");
/// release.send(()).unwrap();
/// assert!(task.join().unwrap());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunningTask {
    /// The index of the worker that runs it (see [`WorkerFigures::index`]).
    pub worker: usize,
    /// Its kind's name: the type of its closure or future (see
    /// [`KindFigures::name`]). A fork-join job is of the kind of the task
    /// that forked it.
    pub name: &'static str,
    /// Where the first task of its kind was spawned, if known (see
    /// [`KindFigures::site`]).
    pub site: Option<&'static std::panic::Location<'static>>,
    /// How long it has run, at least: since the pool's monitor first saw
    /// it (the monitor looks every monitor interval while a task may need
    /// a look, at most every 10 ms while tasks run). Zero for a task the
    /// monitor has not looked at yet. For an async task, the current poll.
    pub running_for: Duration,
    /// Its slot was given away: found blocked, declared blocking, or
    /// started presumed blocking.
    pub blocked: bool,
}

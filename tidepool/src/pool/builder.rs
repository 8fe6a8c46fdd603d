//! [`Builder`]: a pool's settings and their validation ([`BuildError`]).

use super::Pool;
use crate::control::ablation::{Mechanism, Switches, UnknownMechanism};
use crate::control::Controller;
use crate::interop::TokioContext;
use crate::metrics::SettingSource;
use crate::runtime::{Config, Hook, NameFn};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The most worker threads a pool may have. The slot counters pack thread
/// counts in 32 bits; far below that, this keeps a typo (`max_threads(1 <<
/// 40)`) from allocating per-thread bookkeeping for threads that never come.
pub const MAX_THREADS_LIMIT: usize = 32_768;

/// The default [`Builder::quantum`]: ten monitor intervals, long enough that
/// an ordinary task ends first, short against the seconds a queued request
/// would otherwise wait behind long computations.
const DEFAULT_QUANTUM: Duration = Duration::from_millis(10);

/// Threads below this stack size crash on the first call into the standard
/// library's panic or formatting machinery. 64 KiB leaves room for a small
/// task; real work wants the default (2 MiB).
pub const MIN_STACK_SIZE: usize = 64 * 1024;

/// Configures and builds a [`Pool`].
///
/// Every setting has a default; a pool built with none of them runs one task
/// per core and adds threads only to replace workers that block.
///
/// ```
/// use std::time::Duration;
/// use tidepool::Pool;
///
/// let pool = Pool::builder()
///     .concurrency(2)
///     .max_threads(64)
///     .thread_name("io-pool")
///     .idle_timeout(Duration::from_secs(30))
///     .build()?;
/// assert_eq!(pool.spawn_fn(|| 2 + 2).join().unwrap(), 4);
/// # Ok::<(), tidepool::BuildError>(())
/// ```
#[derive(Clone, Debug, Default)]
#[must_use = "a Builder does nothing until .build() is called"]
pub struct Builder {
    concurrency: Option<usize>,
    min_threads: Option<usize>,
    max_threads: Option<usize>,
    thread_name: Option<String>,
    stack_size: Option<usize>,
    idle_timeout: Option<Duration>,
    monitor_interval: Option<Duration>,
    quantum: Option<Option<Duration>>,
    controller: Controller,
    on_thread_start: Option<Hook>,
    on_thread_stop: Option<Hook>,
    thread_name_fn: Option<NameFn>,
    hold_signal: Option<bool>,
    #[cfg(feature = "tokio")]
    tokio_handle: Option<tokio::runtime::Handle>,
}

/// The default number of running slots: the available parallelism.
pub(crate) fn default_concurrency() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The environment variable that sets `concurrency` when the code does not.
pub(crate) const CONCURRENCY_VAR: &str = "TIDEPOOL_CONCURRENCY";
/// The environment variable that sets `max_threads` when the code does not.
pub(crate) const MAX_THREADS_VAR: &str = "TIDEPOOL_MAX_THREADS";

/// [`crate::sys::env_count`] of `variable`, its refusal a [`BuildError`].
fn env_count(variable: &'static str) -> Result<Option<usize>, BuildError> {
    crate::sys::env_count(variable).map_err(|value| BuildError::Environment { variable, value })
}

impl Builder {
    /// A builder with every setting at its default.
    pub fn new() -> Self {
        Builder::default()
    }

    /// How many workers may *run* at once: the running slots. Workers beyond
    /// this exist only to replace workers that are blocked.
    ///
    /// Default: the environment variable `TIDEPOOL_CONCURRENCY` if it is
    /// set (so an operator can cap a service without a rebuild, as with
    /// `RAYON_NUM_THREADS` or `GOMAXPROCS`), else the number of cores
    /// (`std::thread::available_parallelism`). A value set here wins over
    /// the variable. [`Metrics::concurrency`](crate::Metrics::concurrency)
    /// shows what a pool got, and
    /// [`Metrics::concurrency_from`](crate::Metrics::concurrency_from) where
    /// from ([`SettingSource`]).
    ///
    /// ```
    /// use tidepool::SettingSource;
    /// // Set in code: the environment does not change it.
    /// let pool = tidepool::Pool::builder().concurrency(1).build()?;
    /// assert_eq!(pool.concurrency(), 1);
    /// assert_eq!(pool.metrics().concurrency_from, SettingSource::Code);
    /// # Ok::<(), tidepool::BuildError>(())
    /// ```
    pub fn concurrency(mut self, slots: usize) -> Self {
        self.concurrency = Some(slots);
        self
    }

    /// Threads kept alive even when idle. They are started (parked) when the
    /// pool is built, like .NET's `SetMinThreads`: a burst of blocking work
    /// wakes them instead of waiting for threads to start.
    ///
    /// Default: `concurrency + 1`, capped at `max_threads`: one thread beyond
    /// the slots stays parked while every slot is busy, so a
    /// [`Priority::High`](crate::Priority::High) task on a saturated pool
    /// wakes it at once instead of waiting for a thread to start.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().concurrency(2).min_threads(8).build()?;
    /// assert_eq!(pool.metrics().threads, 8);
    /// # Ok::<(), tidepool::BuildError>(())
    /// ```
    pub fn min_threads(mut self, threads: usize) -> Self {
        self.min_threads = Some(threads);
        self
    }

    /// The most worker threads the pool will ever have, blocked ones included.
    ///
    /// Default: the environment variable `TIDEPOOL_MAX_THREADS` if it is
    /// set (a value set here wins), else `max(512, 64 * concurrency)`: room for a burst of hundreds
    /// of blocked work items (as much as tokio's blocking pool), since a
    /// blocked thread costs memory, not CPU. With [`Controller::Fixed`] the
    /// default is `concurrency`.
    /// [`Metrics::max_threads`](crate::Metrics::max_threads) shows what a
    /// pool got, and
    /// [`Metrics::max_threads_from`](crate::Metrics::max_threads_from) where
    /// from ([`SettingSource`]).
    ///
    /// ```
    /// use tidepool::SettingSource;
    /// let pool = tidepool::Pool::builder().concurrency(2).max_threads(16).build()?;
    /// let m = pool.metrics();
    /// assert_eq!((m.max_threads, m.max_threads_from), (16, SettingSource::Code));
    /// # Ok::<(), tidepool::BuildError>(())
    /// ```
    pub fn max_threads(mut self, threads: usize) -> Self {
        self.max_threads = Some(threads);
        self
    }

    /// The name of worker threads, followed by `-N`. It must not be empty
    /// (threads named `-0`, `-1` say nothing about whose they are) and must
    /// not contain a NUL byte: [`Builder::build`] refuses both.
    ///
    /// Default: `"tidepool"`.
    ///
    /// ```
    /// use tidepool::{BuildError, Pool};
    /// let err = Pool::builder().thread_name("").build().unwrap_err();
    /// assert_eq!(err, BuildError::EmptyThreadName);
    /// ```
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = Some(name.into());
        self
    }

    /// Names worker threads with `name(index)` instead of
    /// `{thread_name}-{index}`. The index is the worker's entry, reused by a
    /// thread that replaces one that exited, so names stay few. The monitor
    /// thread is still named `{thread_name}-monitor` (and on Linux, in a
    /// pool with a slot per CPU, the CPU sentinels `{thread_name}-sentinel-{cpu}`:
    /// threads under `SCHED_IDLE` that run only when a CPU would idle while
    /// every slot is taken, and then have the monitor look for a blocked
    /// worker at once; they run no code of yours), and
    /// [`thread_name`](Builder::thread_name) still labels the pool (in
    /// metrics and tracing).
    ///
    /// NUL bytes in a returned name are removed. If `name` panics the
    /// default name is used and the panic is counted in
    /// [`Metrics::hook_panics`](crate::Metrics::hook_panics).
    ///
    /// Default: none (`{thread_name}-{index}`).
    ///
    /// ```
    /// let pool = tidepool::Pool::builder()
    ///     .thread_name_fn(|index| format!("db-worker-{index}"))
    ///     .build()
    ///     .unwrap();
    /// let name = pool.spawn_fn(|| std::thread::current().name().map(str::to_owned));
    /// assert!(name.join().unwrap().unwrap().starts_with("db-worker-"));
    /// ```
    pub fn thread_name_fn<F>(mut self, name: F) -> Self
    where
        F: Fn(usize) -> String + Send + Sync + 'static,
    {
        self.thread_name_fn = Some(NameFn(Arc::new(name)));
        self
    }

    /// Runs `hook` first on every thread the pool starts: each worker,
    /// including those started later to replace blocked or retired ones,
    /// and the monitor thread (whose stack is 256 KiB: keep the hook
    /// small); not the CPU sentinels (see
    /// [`thread_name_fn`](Builder::thread_name_fn)), each pinned to its CPU
    /// and running no code of yours. Like tokio's `on_thread_start` and rayon's `start_handler`:
    /// set up thread-locals, pin a thread, register with a profiler.
    ///
    /// A panic in the hook is caught: the panic hook reports it (stderr by
    /// default), [`Metrics::hook_panics`](crate::Metrics::hook_panics)
    /// counts it, and the thread carries on.
    ///
    /// Default: none.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let started = Arc::new(AtomicUsize::new(0));
    /// let counter = Arc::clone(&started);
    /// let pool = tidepool::Pool::builder()
    ///     .on_thread_start(move || {
    ///         counter.fetch_add(1, Ordering::SeqCst);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// pool.spawn_fn(|| ()).join().unwrap();
    /// // At least the worker that ran the task (and the monitor, by now or soon).
    /// assert!(started.load(Ordering::SeqCst) >= 1);
    /// ```
    pub fn on_thread_start<F>(mut self, hook: F) -> Self
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.on_thread_start = Some(Hook(Arc::new(hook)));
        self
    }

    /// Runs `hook` last on every thread the pool started, as it exits:
    /// a worker retiring after [`idle_timeout`](Builder::idle_timeout) or
    /// as surplus, every worker at shutdown (before
    /// [`Pool::shutdown`](crate::Pool::shutdown) returns), and the monitor
    /// thread when the pool stops. Panics are handled as for
    /// [`on_thread_start`](Builder::on_thread_start).
    ///
    /// Default: none.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let stopped = Arc::new(AtomicUsize::new(0));
    /// let counter = Arc::clone(&stopped);
    /// let pool = tidepool::Pool::builder()
    ///     .concurrency(1)
    ///     .on_thread_stop(move || {
    ///         counter.fetch_add(1, Ordering::SeqCst);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// pool.spawn_fn(|| ()).join().unwrap();
    /// pool.shutdown().unwrap();
    /// assert!(stopped.load(Ordering::SeqCst) >= 1, "the worker's hook ran before shutdown returned");
    /// ```
    pub fn on_thread_stop<F>(mut self, hook: F) -> Self
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.on_thread_stop = Some(Hook(Arc::new(hook)));
        self
    }

    /// Stack size of worker threads, in bytes (at least [`MIN_STACK_SIZE`]).
    ///
    /// Default: the standard library's (2 MiB unless `RUST_MIN_STACK` says
    /// otherwise).
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// How long a thread above `min_threads` stays parked without work before
    /// it exits. `Duration::MAX` (or any timeout too long to be a point in
    /// time) keeps parked threads forever.
    ///
    /// Default: 10 seconds.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }

    /// How long a task may run before the monitor asks the kernel whether
    /// its thread is blocked. Shorter replaces blocked workers sooner and
    /// costs a little more monitor time while tasks run long.
    ///
    /// Default: 1 ms. Must be between 100 µs and 10 s.
    pub fn monitor_interval(mut self, interval: Duration) -> Self {
        self.monitor_interval = Some(interval);
        self
    }

    /// A bound on how long queued work waits while every slot is held by a
    /// task that computes (CPU-bound, so never compensated as blocked):
    /// once every slot has been held by the same computing task for longer
    /// than `quantum`, and work is queued, the pool lends one slot beyond
    /// `concurrency` so the queued work starts (`Controller::Adaptive`
    /// only). The lent slot is given back when the queue drains; and it is
    /// never used for work of a kind seen computing for a quantum (the type
    /// of its closure or future; a `join`'s or `scope`'s work counts as the
    /// task that started it), so ten CPU-bound jobs, or a recursion that
    /// computes, still run
    /// `concurrency` at a time: the worker on the lent slot looks past such
    /// jobs for other work (in the normal and low lanes and groups' admitted
    /// tasks, each up to 1,024 items long; the jobs keep their order);
    /// finding only computing work, it gives the slot up, and the pool
    /// offers one again a quantum later (work queued since may be of another
    /// kind). `None` turns it off.
    ///
    /// The trade-off: with it, a blocking request arriving while long
    /// CPU-bound tasks hold every slot starts after about `quantum` instead
    /// of after a CPU-bound task ends (seconds, say); the cost is one more
    /// thread competing for the cores for the time a lent task takes to
    /// block, and, for the first job of a new kind, possibly its whole run.
    ///
    /// Default: `Some(10 ms)`. `Some(Duration::ZERO)` is an error.
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = tidepool::Pool::builder().quantum(Some(Duration::from_millis(20))).build()?;
    /// let strict = tidepool::Pool::builder().quantum(None).build()?;
    /// # drop((pool, strict));
    /// # Ok::<(), tidepool::BuildError>(())
    /// ```
    pub fn quantum(mut self, quantum: Option<Duration>) -> Self {
        self.quantum = Some(quantum);
        self
    }

    /// Whether a worker back from a block may be held (Linux): a task
    /// whose slot was handed over while it blocked, and that computes
    /// again while every slot is taken, has its thread stopped by a
    /// real-time signal until a slot is its own, as a goroutine back from
    /// a system call waits for a P. So a batch that fetches, then
    /// processes, computes about `concurrency` at a time instead of all at
    /// once. [`Metrics::workers_held`](crate::Metrics::workers_held)
    /// counts the holds; [`Metrics::holds_workers`](crate::Metrics::holds_workers)
    /// says whether the pool can.
    ///
    /// The signal is the highest real-time signal from `SIGRTMAX - 1` down
    /// to `SIGRTMIN + 4` that has no handler when the first such pool is
    /// built, one for the whole process, installed with `SA_RESTART`. Turn
    /// holding off if the program needs that signal for itself, or cannot
    /// have a worker's system call interrupted (the few that Linux never
    /// restarts, such as `epoll_wait`, `nanosleep` and `poll`, return
    /// `EINTR`, which std, mio and async-io retry). Off, a worker back from
    /// its block is still counted against the slots (no new task starts
    /// until the running workers are back at `concurrency`), but runs on
    /// until its task ends. With no free signal the pool does not hold,
    /// and says so once (the `tracing` event `hold signal unavailable`).
    /// Either way a [`blocking`](crate::blocking) section that returns
    /// after its slot was handed over still waits for a slot before its
    /// task runs on: that wait is in the worker's own code and needs no
    /// signal.
    ///
    /// Default: `true` with the adaptive controllers
    /// ([`Controller::Adaptive`], [`Controller::HillClimbing`]); the
    /// others never hold.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder().hold_signal(false).build()?;
    /// assert!(!pool.metrics().holds_workers);
    /// # Ok::<(), tidepool::BuildError>(())
    /// ```
    pub fn hold_signal(mut self, on: bool) -> Self {
        self.hold_signal = Some(on);
        self
    }

    /// The policy that decides when to add or retire threads.
    ///
    /// Default: [`Controller::Adaptive`].
    pub fn controller(mut self, controller: Controller) -> Self {
        self.controller = controller;
        self
    }

    /// The tokio runtime whose context every worker thread enters, in place
    /// of the shared one (see the crate docs, "tokio"). Only with the
    /// `tokio` cargo feature.
    ///
    /// tokio resources (`tokio::net` sockets, `tokio::time` timers) created
    /// in the pool's tasks then register with this runtime's I/O and time
    /// drivers, so the runtime must have them enabled (`enable_all`) and
    /// must outlive the pool's use of them: a multi-thread runtime drives
    /// them on its own workers; a current-thread runtime only while some
    /// thread is inside its `block_on`. `tokio::spawn` in a task puts the
    /// task on this runtime.
    ///
    /// Default: the shared runtime, a current-thread runtime driven by one
    /// background thread (`tidepool-tokio`) that starts with the first pool
    /// built with the feature and stops when the last one is gone.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let tokio_rt = tokio::runtime::Builder::new_multi_thread()
    ///     .worker_threads(1)
    ///     .enable_all()
    ///     .build()
    ///     .unwrap();
    /// let pool = tidepool::Pool::builder()
    ///     .tokio_handle(tokio_rt.handle().clone())
    ///     .build()
    ///     .unwrap();
    /// let slept = pool.spawn(async {
    ///     tokio::time::sleep(Duration::from_millis(5)).await;
    ///     "slept on tokio's timer, ran on tidepool"
    /// });
    /// assert_eq!(slept.join().unwrap(), "slept on tokio's timer, ran on tidepool");
    /// pool.shutdown().unwrap();
    /// ```
    #[cfg(feature = "tokio")]
    pub fn tokio_handle(mut self, handle: tokio::runtime::Handle) -> Self {
        self.tokio_handle = Some(handle);
        self
    }

    /// Checks the settings and starts the pool (its threads start on demand).
    /// With a [`stack_size`](Builder::stack_size) set, it first starts and
    /// joins one thread with that stack, so a stack the system cannot give is
    /// an error here rather than tasks that never start.
    ///
    /// # Errors
    ///
    /// A [`BuildError`] naming the setting, its value and the fix, when a
    /// setting is out of range, two settings contradict each other, or the
    /// system refuses a thread with the stack size given.
    pub fn build(self) -> Result<Pool, BuildError> {
        let config = self.config()?;
        if let Some(bytes) = config.stack_size {
            try_thread_with_stack(bytes)?;
        }
        start_io_driver()?;
        Pool::from_config(config).map_err(|error| BuildError::HelperThreadStart {
            thread: "monitor",
            error: error.to_string(),
        })
    }

    /// Sets the thread name unless the user set one.
    pub(crate) fn default_thread_name(mut self, name: &str) -> Self {
        self.thread_name.get_or_insert_with(|| name.to_owned());
        self
    }

    pub(crate) fn config(self) -> Result<Config, BuildError> {
        // A value set in code wins over the environment's.
        let (concurrency, concurrency_from) = match self.concurrency {
            Some(slots) => (slots, SettingSource::Code),
            None => match env_count(CONCURRENCY_VAR)? {
                Some(slots) => (slots, SettingSource::Environment),
                None => (default_concurrency(), SettingSource::Default),
            },
        };
        if concurrency == 0 {
            return Err(BuildError::ZeroConcurrency);
        }
        if concurrency > MAX_THREADS_LIMIT {
            return Err(BuildError::TooMuchConcurrency { concurrency });
        }
        let fixed = matches!(self.controller, Controller::Fixed);
        let (max_threads, max_threads_from) = match self.max_threads {
            Some(max) => (max, SettingSource::Code),
            None => match env_count(MAX_THREADS_VAR)? {
                Some(max) => (max, SettingSource::Environment),
                None if fixed => (concurrency, SettingSource::Default),
                // Capped: on a machine with more than 512 cores the default
                // must still be a valid setting.
                None => (
                    64usize
                        .saturating_mul(concurrency)
                        .clamp(512, MAX_THREADS_LIMIT),
                    SettingSource::Default,
                ),
            },
        };
        if max_threads > MAX_THREADS_LIMIT {
            return Err(BuildError::TooManyThreads { max_threads });
        }
        if concurrency > max_threads {
            return Err(BuildError::MaxBelowConcurrency {
                max_threads,
                concurrency,
            });
        }
        // One spare beyond the slots: parked while the pool is saturated, it
        // is what an urgent task wakes (a futex wake, not a thread start).
        let min_threads = self
            .min_threads
            .unwrap_or((concurrency + 1).min(max_threads));
        if min_threads > max_threads {
            return Err(BuildError::MinAboveMax {
                min_threads,
                max_threads,
            });
        }
        if let Some(bytes) = self.stack_size {
            if bytes < MIN_STACK_SIZE {
                return Err(BuildError::StackTooSmall { bytes });
            }
        }
        if let Some(name) = &self.thread_name {
            if name.is_empty() {
                return Err(BuildError::EmptyThreadName);
            }
            if name.contains('\0') {
                return Err(BuildError::ThreadNameNul { name: name.clone() });
            }
        }
        let monitor_interval = self.monitor_interval.unwrap_or(Duration::from_millis(1));
        if monitor_interval < Duration::from_micros(100)
            || monitor_interval > Duration::from_secs(10)
        {
            return Err(BuildError::MonitorInterval {
                interval: monitor_interval,
            });
        }
        if let Controller::Gradual { interval } = self.controller {
            if interval.is_zero() {
                return Err(BuildError::ZeroGradualInterval);
            }
        }
        // The lab's ablation switches (`control::ablation`).
        let switches =
            Switches::from_env().map_err(|unknown| BuildError::Ablation { name: unknown.0 })?;
        if !switches.on(Mechanism::ReactorPacing) {
            crate::reactor_pacing::switch_off_stepping_aside();
        }
        // Only the adaptive controllers count a worker back from its
        // block again, which is what holding carries out.
        let holds_at_all = matches!(
            self.controller,
            Controller::Adaptive | Controller::HillClimbing
        ) && switches.on(Mechanism::Hold);
        // How long queued work may wait behind computing tasks: see
        // `Builder::quantum`.
        let quantum = self.quantum.unwrap_or(Some(DEFAULT_QUANTUM));
        let quantum = quantum.filter(|_| switches.on(Mechanism::Quantum));
        if quantum == Some(Duration::ZERO) {
            return Err(BuildError::ZeroQuantum);
        }
        #[cfg(feature = "tokio")]
        let tokio = match self.tokio_handle {
            Some(handle) => TokioContext::User(handle),
            None => TokioContext::shared().map_err(|error| BuildError::TokioRuntime {
                error: error.to_string(),
            })?,
        };
        #[cfg(not(feature = "tokio"))]
        let tokio = TokioContext;
        Ok(Config {
            concurrency,
            cpus: crate::sys::thread_cpus(0),
            concurrency_from,
            min_threads,
            max_threads,
            max_threads_from,
            thread_name: self.thread_name.unwrap_or_else(|| "tidepool".to_owned()),
            stack_size: self.stack_size,
            idle_timeout: self.idle_timeout.unwrap_or(Duration::from_secs(10)),
            monitor_interval,
            quantum,
            controller: self.controller,
            on_thread_start: self.on_thread_start,
            on_thread_stop: self.on_thread_stop,
            thread_name_fn: self.thread_name_fn,
            hold: self.hold_signal.unwrap_or(true) && holds_at_all,
            hold_after_sections: holds_at_all,
            tokio,
            switches,
        })
    }
}

/// Starts tidepool's reactor and its thread (once per process; it serves
/// every pool's timers and sockets) now, where a refusal can be an error,
/// rather than at the first timer, which could only panic.
#[cfg(unix)]
fn start_io_driver() -> Result<(), BuildError> {
    crate::reactor::Reactor::get()
        .map(|_| ())
        .map_err(|error| BuildError::HelperThreadStart {
            thread: "reactor",
            error: error.to_string(),
        })
}

/// Starts `async-io`'s driver thread (once per process; off Unix it serves
/// timers and sockets) now, where a refusal can be an error, rather than
/// at the first timer or `block_on`: there `async-io` panics, and
/// `block_on`'s cleanup panics again, which aborts. Registering a timer
/// makes `async-io` build its reactor, which starts the thread; a refusal
/// panics inside the reactor's initialisation, which is left
/// uninitialised (a later build tries again).
#[cfg(not(unix))]
fn start_io_driver() -> Result<(), BuildError> {
    use std::future::Future;
    use std::sync::OnceLock;
    static STARTED: OnceLock<()> = OnceLock::new();
    if STARTED.get().is_some() {
        return Ok(());
    }
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    let register = || {
        let mut timer = async_io::Timer::after(Duration::from_secs(3600));
        let waker = std::task::Waker::from(std::sync::Arc::new(Noop));
        let mut cx = std::task::Context::from_waker(&waker);
        let _ = std::pin::Pin::new(&mut timer).poll(&mut cx);
    };
    match std::panic::catch_unwind(register) {
        Ok(()) => {
            let _ = STARTED.set(());
            Ok(())
        }
        Err(payload) => {
            let error = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic in async-io's reactor".to_owned());
            // Not dropped: a payload's destructor could panic too.
            std::mem::forget(payload);
            Err(BuildError::HelperThreadStart {
                thread: "async-io driver",
                error,
            })
        }
    }
}

/// Starts and joins one thread with a stack of `bytes`: workers start on
/// demand, so a stack the system cannot give (a huge `stack_size`) would
/// otherwise show up only as tasks that are accepted and never run.
fn try_thread_with_stack(bytes: usize) -> Result<(), BuildError> {
    std::thread::Builder::new()
        .stack_size(bytes)
        .spawn(|| ())
        .and_then(|thread| {
            thread
                .join()
                .map_err(|_| std::io::Error::other("the probe thread panicked"))
        })
        .map_err(|error| BuildError::ThreadStart {
            bytes,
            error: error.to_string(),
        })
}

/// Why [`Builder::build`] refused the settings. Each message names the
/// setting, the value given and how to fix it.
///
/// ```
/// use tidepool::{BuildError, Pool};
/// let err = Pool::builder().min_threads(8).max_threads(4).concurrency(2).build().unwrap_err();
/// assert_eq!(err, BuildError::MinAboveMax { min_threads: 8, max_threads: 4 });
/// assert_eq!(
///     err.to_string(),
///     "max_threads (4) must be >= min_threads (8): raise max_threads or lower min_threads"
/// );
/// // Debug (what `unwrap()` prints) names the variant and says the same.
/// assert_eq!(
///     format!("{err:?}"),
///     "BuildError::MinAboveMax: max_threads (4) must be >= min_threads (8): raise max_threads or lower min_threads"
/// );
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// `concurrency(0)`: a pool needs at least one running slot.
    ZeroConcurrency,
    /// `min_threads` is above `max_threads`.
    MinAboveMax {
        /// The `min_threads` given (or defaulted).
        min_threads: usize,
        /// The `max_threads` given (or defaulted).
        max_threads: usize,
    },
    /// `max_threads` is below `concurrency`: some slots could never be used.
    MaxBelowConcurrency {
        /// The `max_threads` given.
        max_threads: usize,
        /// The `concurrency` given (or defaulted).
        concurrency: usize,
    },
    /// `max_threads` is above [`MAX_THREADS_LIMIT`].
    TooManyThreads {
        /// The `max_threads` given.
        max_threads: usize,
    },
    /// `stack_size` is below [`MIN_STACK_SIZE`].
    StackTooSmall {
        /// The `stack_size` given, in bytes.
        bytes: usize,
    },
    /// `monitor_interval` is outside 100 µs ..= 10 s.
    MonitorInterval {
        /// The interval given.
        interval: Duration,
    },
    /// `Controller::Gradual { interval }` with a zero interval.
    ZeroGradualInterval,
    /// `quantum(Some(Duration::ZERO))`.
    ZeroQuantum,
    /// `concurrency` is above [`MAX_THREADS_LIMIT`].
    TooMuchConcurrency {
        /// The `concurrency` given.
        concurrency: usize,
    },
    /// `thread_name` contains a NUL byte, which no OS thread name can hold.
    ThreadNameNul {
        /// The name given.
        name: String,
    },
    /// `thread_name("")`: worker threads would be named `-0`, `-1`, ...
    EmptyThreadName,
    /// The system refused to start one of the threads every pool needs: its
    /// monitor, or the process's reactor (timers and sockets; off Unix,
    /// async-io's driver).
    HelperThreadStart {
        /// Which thread: `"monitor"`, `"reactor"` (`"async-io driver"` off
        /// Unix).
        thread: &'static str,
        /// What the system said.
        error: String,
    },
    /// The system refused to start a thread with the `stack_size` given.
    ThreadStart {
        /// The `stack_size` given, in bytes.
        bytes: usize,
        /// What the system said.
        error: String,
    },
    /// An environment variable that sets a count (`TIDEPOOL_CONCURRENCY`,
    /// `TIDEPOOL_MAX_THREADS`) holds something other than a whole number
    /// of at least 1.
    Environment {
        /// The variable's name.
        variable: &'static str,
        /// What it holds.
        value: String,
    },
    /// The environment variable `TIDEPOOL_ABLATE`, which the lab sets to
    /// switch one of the pool's mechanisms off for its ablation table
    /// (docs/ablation.md; not a setting for services), names something
    /// that is no mechanism.
    Ablation {
        /// The name that is no mechanism's.
        name: String,
    },
    /// With the `tokio` feature and no
    /// [`tokio_handle`](Builder#method.tokio_handle): the shared tokio runtime
    /// could not be started (the system refused its epoll instance, its
    /// eventfd or its thread).
    TokioRuntime {
        /// What the system said.
        error: String,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroConcurrency => f.write_str(
                "concurrency (0) must be at least 1: a pool needs one running slot; omit it to use one per core",
            ),
            BuildError::MinAboveMax { min_threads, max_threads } => write!(
                f,
                "max_threads ({max_threads}) must be >= min_threads ({min_threads}): raise max_threads or lower min_threads"
            ),
            BuildError::MaxBelowConcurrency { max_threads, concurrency } => write!(
                f,
                "max_threads ({max_threads}) must be >= concurrency ({concurrency}): raise max_threads or lower concurrency"
            ),
            BuildError::TooManyThreads { max_threads } => write!(
                f,
                "max_threads ({max_threads}) must be <= {MAX_THREADS_LIMIT}: lower max_threads"
            ),
            BuildError::StackTooSmall { bytes } => write!(
                f,
                "stack_size ({bytes} bytes) is too small to run a thread: use at least {MIN_STACK_SIZE} bytes, or omit it for the default"
            ),
            BuildError::MonitorInterval { interval } => write!(
                f,
                "monitor_interval ({interval:?}) must be between 100µs and 10s: omit it for the default of 1ms"
            ),
            BuildError::ZeroGradualInterval => f.write_str(
                "Controller::Gradual interval (0ns) must be positive: use e.g. 500ms",
            ),
            BuildError::ZeroQuantum => f.write_str(
                "quantum (Some(0ns)) must be positive: use e.g. Some(10ms), or None to turn it off",
            ),
            BuildError::TooMuchConcurrency { concurrency } => write!(
                f,
                "concurrency ({concurrency}) must be <= {MAX_THREADS_LIMIT}: lower concurrency, or omit it to use one per core"
            ),
            BuildError::ThreadNameNul { name } => write!(
                f,
                "thread_name ({name:?}) must not contain a NUL byte: remove it"
            ),
            BuildError::EmptyThreadName => f.write_str(
                "thread_name (\"\") must not be empty: threads would be named \"-0\", \"-1\"; pass a name, or omit it for the default \"tidepool\"",
            ),
            BuildError::HelperThreadStart { thread, error } => write!(
                f,
                "the system refused to start the pool's {thread} thread ({error}): raise the thread limit (ulimit -u, RLIMIT_NPROC, the cgroup's pids.max) or free threads, then build again"
            ),
            BuildError::ThreadStart { bytes, error } => write!(
                f,
                "stack_size ({bytes} bytes): the system could not start a thread with it ({error}): lower stack_size, or omit it for the default"
            ),
            BuildError::Environment { variable, value } => write!(
                f,
                "{variable} ({value:?}) must be a whole number of at least 1: fix or unset it, or set the value in code"
            ),
            BuildError::Ablation { name } => write!(
                f,
                "TIDEPOOL_ABLATE: {}: unset it (it is the lab's, for switching mechanisms off)",
                UnknownMechanism(name.clone())
            ),
            BuildError::TokioRuntime { error } => write!(
                f,
                "the shared tokio runtime (feature `tokio`) could not start ({error}): raise the open-file or thread limit, or pass a runtime of your own with Builder::tokio_handle"
            ),
        }
    }
}

impl fmt::Debug for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let variant = match self {
            BuildError::ZeroConcurrency => "ZeroConcurrency",
            BuildError::MinAboveMax { .. } => "MinAboveMax",
            BuildError::MaxBelowConcurrency { .. } => "MaxBelowConcurrency",
            BuildError::TooManyThreads { .. } => "TooManyThreads",
            BuildError::StackTooSmall { .. } => "StackTooSmall",
            BuildError::MonitorInterval { .. } => "MonitorInterval",
            BuildError::ZeroGradualInterval => "ZeroGradualInterval",
            BuildError::ZeroQuantum => "ZeroQuantum",
            BuildError::TooMuchConcurrency { .. } => "TooMuchConcurrency",
            BuildError::ThreadNameNul { .. } => "ThreadNameNul",
            BuildError::ThreadStart { .. } => "ThreadStart",
            BuildError::EmptyThreadName => "EmptyThreadName",
            BuildError::HelperThreadStart { .. } => "HelperThreadStart",
            BuildError::Environment { .. } => "Environment",
            BuildError::Ablation { .. } => "Ablation",
            BuildError::TokioRuntime { .. } => "TokioRuntime",
        };
        write!(f, "BuildError::{variant}: {self}")
    }
}

impl std::error::Error for BuildError {}

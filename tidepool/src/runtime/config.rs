//! A pool's settings, resolved and validated by the builder
//! (`pool::builder`), which documents each one and its default.

use crate::control::ablation::Switches;
use crate::control::Controller;
use crate::interop::TokioContext;
use crate::metrics::SettingSource;
use crate::sync::Arc;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

/// A thread hook (`Builder::on_thread_start`, `on_thread_stop`).
#[derive(Clone)]
pub(crate) struct Hook(pub(crate) Arc<dyn Fn() + Send + Sync>);

impl fmt::Debug for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hook(..)")
    }
}

/// Names worker threads by index (`Builder::thread_name_fn`).
#[derive(Clone)]
pub(crate) struct NameFn(pub(crate) Arc<dyn Fn(usize) -> String + Send + Sync>);

impl fmt::Debug for NameFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NameFn(..)")
    }
}

/// Settings of a pool, resolved and validated.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// Running slots (`Builder::concurrency`).
    pub(crate) concurrency: usize,
    /// The CPUs the thread that built the pool could run on (a bitmap,
    /// `sys::thread_cpus`), which every pool thread starts with: a thread
    /// inherits its creator's CPUs, and a pool thread may create one while
    /// a placement move keeps it to a single CPU for a moment
    /// (`control::placement`, `control::sentinel`). `None` if unknown.
    pub(crate) cpus: Option<u64>,
    /// Where `concurrency` came from: the code, `TIDEPOOL_CONCURRENCY`, or
    /// the default (`Metrics::concurrency_from`, the thread events).
    pub(crate) concurrency_from: SettingSource,
    /// Threads kept when idle (`Builder::min_threads`).
    pub(crate) min_threads: usize,
    /// The most worker threads alive at once (`Builder::max_threads`).
    pub(crate) max_threads: usize,
    /// Where `max_threads` came from: the code, `TIDEPOOL_MAX_THREADS`, or
    /// the default.
    pub(crate) max_threads_from: SettingSource,
    /// Worker threads are named `{thread_name}-{index}`.
    pub(crate) thread_name: String,
    /// Stack size of worker threads; `None` is the system's default.
    pub(crate) stack_size: Option<usize>,
    /// How long a parked worker above `min_threads` waits before it retires.
    pub(crate) idle_timeout: Duration,
    /// How long a task runs before the monitor asks the kernel about it.
    pub(crate) monitor_interval: Duration,
    /// How long every slot may be held by computing tasks before one slot
    /// is lent to queued work (`Builder::quantum`); `None`: never.
    pub(crate) quantum: Option<Duration>,
    /// The policy the monitor applies.
    pub(crate) controller: Controller,
    /// Run first on every worker and monitor thread.
    pub(crate) on_thread_start: Option<Hook>,
    /// Run last on every worker and monitor thread.
    pub(crate) on_thread_stop: Option<Hook>,
    /// Names worker threads instead of `{thread_name}-{index}`.
    pub(crate) thread_name_fn: Option<NameFn>,
    /// Whether workers back from a block may be held by the hold signal
    /// (`Builder::hold_signal`, an adaptive controller, the lab's switch
    /// on); the signal may still be missing (`runtime::hold::install_signal`).
    pub(crate) hold: bool,
    /// Whether a declared section that returns without a slot waits for
    /// one (an adaptive controller, the lab's `hold` switch on). No signal
    /// is involved, so `Builder::hold_signal(false)` leaves it on.
    pub(crate) hold_after_sections: bool,
    /// The tokio runtime worker threads enter (feature `tokio`; empty
    /// without it).
    pub(crate) tokio: TokioContext,
    /// Which mechanisms are on (all, unless the lab switched one off:
    /// `control::ablation`).
    pub(crate) switches: Switches,
}

impl Hook {
    /// Runs the hook; a panic in it is caught (the default panic hook has
    /// printed it). Returns false if it panicked.
    pub(crate) fn run(&self) -> bool {
        catch_unwind(AssertUnwindSafe(|| (self.0)())).is_ok()
    }
}

impl Config {
    /// The settings the thread events carry (`trace::Settings`).
    #[inline(always)]
    pub(crate) fn settings(&self) -> crate::trace::Settings {
        crate::trace::Settings {
            concurrency: self.concurrency,
            concurrency_from: self.concurrency_from.as_str(),
            max_threads: self.max_threads,
            max_threads_from: self.max_threads_from.as_str(),
        }
    }

    /// The name of the worker thread on entry `index`, and whether the
    /// name function panicked (then the default name is used). NUL bytes,
    /// which no thread name can hold, are removed.
    pub(crate) fn worker_name(&self, index: usize) -> (String, bool) {
        let default = || format!("{}-{index}", self.thread_name);
        match &self.thread_name_fn {
            Some(name) => match catch_unwind(AssertUnwindSafe(|| (name.0)(index))) {
                Ok(name) => (name.replace('\0', ""), false),
                Err(_) => (default(), true),
            },
            None => (default(), false),
        }
    }
}

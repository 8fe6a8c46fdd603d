//! A pool's settings, resolved and validated by the builder
//! (`pool::builder`), which documents each one and its default.

use crate::control::Controller;
use std::time::Duration;

/// Settings of a pool, resolved and validated.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// Running slots (`Builder::concurrency`).
    pub(crate) concurrency: usize,
    /// Threads kept when idle (`Builder::min_threads`).
    pub(crate) min_threads: usize,
    /// The most worker threads alive at once (`Builder::max_threads`).
    pub(crate) max_threads: usize,
    /// Worker threads are named `{thread_name}-{index}`.
    pub(crate) thread_name: String,
    /// Stack size of worker threads; `None` is the system's default.
    pub(crate) stack_size: Option<usize>,
    /// How long a parked worker above `min_threads` waits before it retires.
    pub(crate) idle_timeout: Duration,
    /// How long a task runs before the monitor asks the kernel about it.
    pub(crate) monitor_interval: Duration,
    /// The policy the monitor applies.
    pub(crate) controller: Controller,
}

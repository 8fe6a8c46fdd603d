//! Events for the `tracing` crate, behind the `tracing` cargo feature.
//!
//! Each function here is one event (or the task span); without the
//! feature they are empty and inlined, so the call sites compile to
//! nothing. No event is on the per-task path: they mark thread starts and
//! exits, blocking, start failures, hook panics and the pool's close and
//! stop, which happen at most a few times per blocked task. The one thing
//! per task is the `tidepool.task` span ([`task_span`]), at TRACE: with no
//! subscriber that wants it, a level check and a callsite check per run.
//!
//! Every event has the target `tidepool` and a `pool` field (the pool's
//! `thread_name`); thread events have `thread` (the worker's entry index,
//! the `N` of its default name `{pool}-N`) and a `reason`. Events about a
//! task name its kind: `kind` (the type name of its closure or future,
//! `std::any::type_name`; `(unnamed)` if the name table had no room) and
//! `site` (`file:line:column` of the first spawn of the kind, when the
//! spawn function tracked its caller). Thread events carry the pool's
//! settings, as `Metrics` shows them: `concurrency` and `max_threads`, and
//! where each came from, `concurrency_from` and `max_threads_from`
//! (`code`, `environment` or `default`).
//!
//! | event | level | fields |
//! |---|---|---|
//! | `thread started` | DEBUG | `reason`: `demand`, `compensation` (replacing a blocked worker), `policy`; the settings (below) |
//! | `thread retired` | DEBUG | `reason`: `idle` (idle timeout), `surplus` (blocked task ended, every slot taken), `shutdown`; the settings (below) |
//! | `thread start failed` | WARN | `reason`, `error` (what the OS said) |
//! | `worker blocked` | DEBUG | `reason`: `detected` (the monitor saw it blocked in the kernel), `declared` (`blocking`, `join`, `block_on` on a worker) or `presumed` (its kind blocked before: started without a slot); `kind`, `site` |
//! | `worker returned from blocking` | DEBUG | `kind`, `site` |
//! | `hook panicked` | WARN | `hook`: `on_thread_start`, `on_thread_stop`, `thread_name_fn` |
//! | `blocking detection fell back` | WARN | `mode`: `cpu_clock` or `time_only`, `error` (why `/proc` could not be read); once per pool, `Metrics::detection_fallbacks` counts them all |
//! | `hold signal unavailable` | WARN | `fix`; once per pool that holds workers back from their blocks (`Builder::hold_signal`) and found every real-time signal it may use taken (Linux), so it does not hold |
//! | `pool stuck` | WARN | `threads`, `blocked`, `queued`, `max_threads`, `fix`; once per episode |
//! | `pool no longer stuck` | INFO | |
//! | `pool closed` | INFO | (shutdown began or the last handle was dropped) |
//! | `pool stopped` | INFO | (threads leave; queued tasks are dropped) |
//!
//! | span | level | fields |
//! |---|---|---|
//! | `tidepool.task` | TRACE | `pool`, `thread`, `kind`, `site`; entered for each run of a task (a closure's run, each poll of a future), so an event a task emits is inside it |

#![cfg_attr(not(feature = "tracing"), allow(unused_variables))]

use std::panic::Location;

/// What the thread events say of the pool's settings: its `concurrency`
/// and `max_threads`, and where each came from (`"code"`, `"environment"`
/// or `"default"`: `metrics::SettingSource`). Built from the pool's
/// config at the call (`runtime::Config::settings`); without the feature
/// nothing reads it, and the loads that fill it compile away.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) struct Settings {
    pub(crate) concurrency: usize,
    pub(crate) concurrency_from: &'static str,
    pub(crate) max_threads: usize,
    pub(crate) max_threads_from: &'static str,
}

/// A worker thread was started for `reason`, in a pool with `settings`.
#[inline(always)]
pub(crate) fn thread_started(pool: &str, thread: usize, reason: &'static str, settings: Settings) {
    #[cfg(feature = "tracing")]
    {
        let Settings {
            concurrency,
            concurrency_from,
            max_threads,
            max_threads_from,
        } = settings;
        tracing::debug!(
            target: "tidepool",
            pool,
            thread,
            reason,
            concurrency,
            concurrency_from,
            max_threads,
            max_threads_from,
            "thread started"
        );
    }
}

/// A worker thread exits for `reason`, from a pool with `settings`.
#[inline(always)]
pub(crate) fn thread_retired(pool: &str, thread: usize, reason: &'static str, settings: Settings) {
    #[cfg(feature = "tracing")]
    {
        let Settings {
            concurrency,
            concurrency_from,
            max_threads,
            max_threads_from,
        } = settings;
        tracing::debug!(
            target: "tidepool",
            pool,
            thread,
            reason,
            concurrency,
            concurrency_from,
            max_threads,
            max_threads_from,
            "thread retired"
        );
    }
}

/// The OS refused a thread the pool wanted for `reason`.
#[inline(always)]
pub(crate) fn thread_start_failed(pool: &str, reason: &'static str, error: &std::io::Error) {
    #[cfg(feature = "tracing")]
    tracing::warn!(target: "tidepool", pool, reason, %error, "thread start failed");
}

/// A kind of task as events name it: its closure's or future's type name,
/// and where its first task was spawned if known (`runtime::kind_names`).
pub(crate) type KindName = (&'static str, Option<&'static Location<'static>>);

/// A worker gave its slot away: blocked (`detected`), `declared` or
/// `presumed`, in a task of the kind `kind` names (asked only if the event
/// is emitted).
#[inline(always)]
pub(crate) fn worker_blocked(
    pool: &str,
    thread: usize,
    reason: &'static str,
    kind: impl FnOnce() -> KindName,
) {
    #[cfg(feature = "tracing")]
    if tracing::enabled!(target: "tidepool", tracing::Level::DEBUG) {
        let (kind, site) = kind();
        let site = site.map(tracing::field::display);
        tracing::debug!(target: "tidepool", pool, thread, reason, kind, site, "worker blocked");
    }
}

/// A worker of the shared tokio runtime blocked inside a task that was
/// spawned with `tokio::spawn` (by the program or by a library): its place
/// went to another worker. `blocks` counts the blocks since the last such
/// event (they are reported at most once every ten seconds).
#[cfg(feature = "tokio")]
#[inline(always)]
pub(crate) fn tokio_worker_blocked(thread: i32, blocks: u64) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "tidepool",
        thread,
        blocks,
        "a task spawned with tokio::spawn blocked a thread of the shared tokio runtime; \
         another thread took its place, but the pool cannot learn the call or schedule it. \
         Run the task on the pool instead: tidepool::spawn, or tidepool::http::serve for \
         an HTTP server (axum::serve spawns every connection with tokio::spawn)"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (thread, blocks);
}

/// A worker whose slot was given away finished its task, of the kind
/// `kind` names.
#[inline(always)]
pub(crate) fn worker_returned(pool: &str, thread: usize, kind: impl FnOnce() -> KindName) {
    #[cfg(feature = "tracing")]
    if tracing::enabled!(target: "tidepool", tracing::Level::DEBUG) {
        let (kind, site) = kind();
        let site = site.map(tracing::field::display);
        tracing::debug!(target: "tidepool", pool, thread, kind, site, "worker returned from blocking");
    }
}

/// The span a task runs in, entered for one run of it (a closure's run, a
/// future's poll) and left when dropped; nothing without the feature.
#[cfg(feature = "tracing")]
pub(crate) type TaskSpan = tracing::span::EnteredSpan;
/// The span a task runs in: nothing without the `tracing` feature.
#[cfg(not(feature = "tracing"))]
#[derive(Debug)]
pub(crate) struct TaskSpan;

/// Enters a `tidepool.task` span (TRACE) for one run of a task of the
/// kind `kind` names on worker `thread` of `pool`. The name is asked only
/// if a subscriber wants the span: otherwise the cost is the level and
/// callsite checks of `tracing`'s macros.
#[inline(always)]
pub(crate) fn task_span(pool: &str, thread: usize, kind: impl FnOnce() -> KindName) -> TaskSpan {
    #[cfg(feature = "tracing")]
    {
        if !tracing::enabled!(target: "tidepool", tracing::Level::TRACE) {
            return tracing::Span::none().entered();
        }
        let (kind, site) = kind();
        let site = site.map(tracing::field::display);
        tracing::trace_span!(target: "tidepool", "tidepool.task", pool, thread, kind, site)
            .entered()
    }
    #[cfg(not(feature = "tracing"))]
    TaskSpan
}

/// A thread hook panicked (the panic was caught).
#[inline(always)]
pub(crate) fn hook_panicked(pool: &str, hook: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::warn!(target: "tidepool", pool, hook, "hook panicked");
}

/// The pool was closed: it takes no new tasks.
#[inline(always)]
pub(crate) fn pool_closed(pool: &str) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "tidepool", pool, "pool closed");
}

/// The pool stopped: its threads leave.
#[inline(always)]
pub(crate) fn pool_stopped(pool: &str) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "tidepool", pool, "pool stopped");
}

/// A worker could not read the kernel's thread state (its `/proc` file did
/// not open: `error`) and is judged by its CPU clock or by time (`mode`).
#[inline(always)]
pub(crate) fn detection_fell_back(
    pool: &str,
    thread: usize,
    mode: &'static str,
    error: Option<&std::io::Error>,
) {
    #[cfg(feature = "tracing")]
    {
        let error = error.map_or_else(|| "not Linux".to_owned(), ToString::to_string);
        tracing::warn!(target: "tidepool", pool, thread, mode, %error, "blocking detection fell back");
    }
}

/// A pool that holds workers back from their blocks (`Builder::hold_signal`)
/// found no free real-time signal: it does not hold.
#[inline(always)]
pub(crate) fn hold_signal_unavailable(pool: &str) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "tidepool",
        pool,
        fix = "leave one of SIGRTMIN+4..=SIGRTMAX-1 without a handler, or build with hold_signal(false)",
        "hold signal unavailable"
    );
}

/// Every thread up to `max_threads` is blocked and work has waited for a
/// while: the pool cannot make progress until a blocked task returns.
#[inline(always)]
pub(crate) fn pool_stuck(
    pool: &str,
    threads: usize,
    blocked: usize,
    queued: usize,
    max_threads: usize,
) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "tidepool",
        pool,
        threads,
        blocked,
        queued,
        max_threads,
        fix = "raise max_threads, or do not make tasks wait for tasks queued behind them (a chain of joins)",
        "pool stuck"
    );
}

/// A stuck pool made progress again.
#[inline(always)]
pub(crate) fn pool_unstuck(pool: &str) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "tidepool", pool, "pool no longer stuck");
}

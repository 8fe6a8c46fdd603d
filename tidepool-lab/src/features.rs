//! tidepool features that land in stages, behind one switch each.
//!
//! A run that needs a feature which has not landed is skipped and reported as
//! pending; it is never approximated. Each feature is a [`Feature`] constant
//! plus the few wrapper functions the experiments call. To enable one once
//! the library has it: set `landed: true` and put the real call (written in
//! the comment) in place of the `Err` in its wrappers.

use std::fmt;
use std::time::Duration;

use tidepool::{Controller, Metrics, Pool, Priority};

/// A library feature the lab may wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    /// What the lab calls, as a user would write it.
    pub api: &'static str,
    /// The issue that brings it.
    pub issue: u32,
    /// Whether the library has it in this build.
    pub landed: bool,
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (issue {})", self.api, self.issue)
    }
}

impl Feature {
    /// `Ok` if the feature has landed, else the feature as the reason.
    pub fn check(self) -> Result<(), Feature> {
        if self.landed {
            Ok(())
        } else {
            Err(self)
        }
    }
}

/// `Controller::Gradual { interval }`.
pub const GRADUAL: Feature = Feature {
    api: "Controller::Gradual",
    issue: 3,
    landed: true,
};

/// `pool.task().priority(Priority::High).spawn_fn(f)`.
pub const PRIORITY: Feature = Feature {
    api: "Pool::task().priority(Priority::High)",
    issue: 4,
    landed: true,
};

/// `pool.group().max_concurrency(n).build()` and `Group::spawn_fn`.
pub const GROUPS: Feature = Feature {
    api: "Pool::group().max_concurrency(n)",
    issue: 4,
    landed: true,
};

/// `Metrics::thread_series`, the pool's own thread counts by state over time.
/// The field exists; it counts as landed once the pool fills it in (an
/// empty series means it does not yet).
pub const THREAD_SERIES: Feature = Feature {
    api: "Metrics::thread_series",
    issue: 3,
    landed: true,
};

/// The `Gradual` controller adding one thread per `interval`.
pub fn gradual(interval: Duration) -> Result<Controller, Feature> {
    GRADUAL.check()?;
    Ok(Controller::Gradual { interval })
}

/// Spawns `f` on `pool` at high priority.
pub fn spawn_fn_high<F>(pool: &Pool, f: F) -> Result<(), Feature>
where
    F: FnOnce() + Send + 'static,
{
    PRIORITY.check()?;
    drop(pool.task().priority(Priority::High).spawn_fn(f));
    Ok(())
}

/// A closure that spawns work items into a group of `pool` that runs at
/// most `max_concurrency` of them at once.
pub type GroupSpawner = Box<dyn Fn(Box<dyn FnOnce() + Send + 'static>)>;

/// Builds a group of `pool` limited to `max_concurrency` running items.
///
/// # Errors
///
/// The pending feature, or the library's refusal to build the group, as
/// text (a refusal is a failure of the run, not a pending feature).
pub fn throttled_group(pool: &Pool, max_concurrency: usize) -> Result<GroupSpawner, String> {
    GROUPS.check().map_err(|f| format!("waits for {f}"))?;
    let group = pool
        .group()
        .max_concurrency(max_concurrency)
        .build()
        .map_err(|e| format!("group with max_concurrency({max_concurrency}): {e}"))?;
    Ok(Box::new(move |job| drop(group.spawn_fn(job))))
}

/// One sample of the pool's thread counts by state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThreadPoint {
    /// Seconds since the pool started.
    pub at_s: f64,
    /// Threads running tasks.
    pub running: usize,
    /// Threads blocked (slot given up).
    pub blocked: usize,
    /// Idle threads.
    pub idle: usize,
}

/// The pool's thread counts over time, from its metrics.
pub fn thread_series(metrics: &Metrics) -> Result<Vec<ThreadPoint>, Feature> {
    THREAD_SERIES.check()?;
    if metrics.thread_series.is_empty() {
        return Err(THREAD_SERIES);
    }
    Ok(metrics
        .thread_series
        .iter()
        .map(|s| ThreadPoint {
            at_s: s.at.as_secs_f64(),
            running: s.running,
            blocked: s.blocked,
            idle: s.idle,
        })
        .collect())
}

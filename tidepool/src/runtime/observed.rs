//! What a pool tells about the work that blocked and the work that runs:
//! the `worker blocked` events with the kind's name, the per-kind and
//! per-worker figures of `Metrics`, and the running tasks of
//! `Pool::running`.
//!
//! Nothing here is on the per-task path. The blocking paths (the monitor's
//! detection, a declared hand-over, a presumed start, a presumed task's
//! end) each count a kind's event in the pool's table
//! (`metrics::KindCounters`: a few loads and an add) and the entry's
//! `blocked`; the snapshots read the worker entries, the table and the
//! process-wide name table (`kind_names`), and cost their caller only.

use super::kind_names::{self, KindName};
use super::kinds::Kind;
use super::Shared;
use crate::control::slots::Phase;
use crate::metrics::{KindEvent, KindFigures, RunningTask, WorkerFigures, WorkerState};
use crate::sync::{lock, Ordering};
use crate::trace;
use std::time::Instant;

/// How a worker came to give its slot away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// The monitor found it blocked.
    Detected,
    /// Its task declared it (a section past its grace, a wait on the pool).
    Declared,
    /// Its task started presumed blocking (its kind blocked before).
    Presumed,
}

impl Blocked {
    /// The event's `reason`.
    fn reason(self) -> &'static str {
        match self {
            Blocked::Detected => "detected",
            Blocked::Declared => "declared",
            Blocked::Presumed => "presumed",
        }
    }
}

/// A kind's name as the `trace` events take it.
fn for_trace(kind: Kind) -> trace::KindName {
    let KindName { name, site } = kind_names::name_of(kind);
    (name, site)
}

impl Shared {
    /// The worker at `index`, in a task of `kind`, gave its slot away
    /// (`how`): counted for the kind and the worker, and traced with the
    /// kind's name. The caller counts the pool-wide figure.
    pub(crate) fn worker_blocked(&self, index: usize, kind: Kind, how: Blocked) {
        let event = match how {
            Blocked::Detected => KindEvent::Detected,
            Blocked::Declared => KindEvent::Declared,
            Blocked::Presumed => KindEvent::Presumed,
        };
        self.kind_counters.count(kind.to_bits(), event);
        self.threads
            .entry(index)
            .blocked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        trace::worker_blocked(&self.config.thread_name, index, how.reason(), || {
            for_trace(kind)
        });
    }

    /// The worker at `index` finished the task whose slot was given away.
    pub(crate) fn worker_returned(&self, index: usize) {
        let kind = self.threads.entry(index).kind.load(Ordering::Relaxed);
        trace::worker_returned(&self.config.thread_name, index, || {
            for_trace(Kind::from_bits(kind))
        });
    }

    /// A task of `kind`, started presumed blocking, computed instead.
    pub(crate) fn presumption_failed(&self, kind: Kind) {
        self.kind_counters
            .count(kind.to_bits(), KindEvent::PresumptionFailed);
    }

    /// Enters the `tidepool.task` span for one run of a task of `kind` on
    /// the worker at `index` (feature `tracing`; nothing without it).
    #[inline(always)]
    pub(crate) fn task_span(&self, index: usize, kind: Kind) -> trace::TaskSpan {
        trace::task_span(&self.config.thread_name, index, || for_trace(kind))
    }

    /// The per-kind figures of `Metrics::kinds` (most blocking first) and
    /// the events of kinds the table had no room for.
    pub(crate) fn kind_figures(&self) -> (Vec<KindFigures>, u64) {
        let (counted, untracked) = self.kind_counters.read();
        let mut figures: Vec<KindFigures> = counted
            .into_iter()
            .map(|(bits, counts)| {
                let kind = Kind::from_bits(bits);
                let KindName { name, site } = kind_names::name_of(kind);
                let learned = self.kinds.learned(kind);
                KindFigures {
                    name,
                    site,
                    blocked_detections: counts.blocked_detections,
                    declared_blocking: counts.declared_blocking,
                    presumed_blocking: counts.presumed_blocking,
                    presumptions_failed: counts.presumptions_failed,
                    presumed_now: learned.presumed,
                    computes: learned.computes,
                    waits_on_pool: learned.waits_on_pool,
                }
            })
            .collect();
        figures.sort_by(|a, b| b.blocking().cmp(&a.blocking()).then(a.name.cmp(b.name)));
        (figures, untracked)
    }

    /// The per-worker figures of `Metrics::workers`: one per entry ever
    /// used.
    pub(crate) fn worker_figures(&self) -> Vec<WorkerFigures> {
        self.threads
            .used()
            .iter()
            .enumerate()
            .map(|(index, entry)| {
                let state = if lock(&entry.thread).is_none() {
                    WorkerState::NoThread
                } else {
                    match entry.status.load().phase() {
                        Phase::Idle => WorkerState::Idle,
                        Phase::InTask => WorkerState::Running,
                        Phase::Blocked => WorkerState::Blocked,
                    }
                };
                WorkerFigures {
                    index,
                    state,
                    tasks_ended: entry.counters.ended_total(),
                    blocked: entry.blocked.load(std::sync::atomic::Ordering::Relaxed),
                }
            })
            .collect()
    }

    /// The tasks running now (`Pool::running`), by worker index.
    pub(crate) fn running(&self) -> Vec<RunningTask> {
        let now = Instant::now();
        self.threads
            .used()
            .iter()
            .enumerate()
            .filter_map(|(worker, entry)| {
                let seen = entry.status.load();
                let blocked = match seen.phase() {
                    Phase::Idle => return None,
                    Phase::InTask => false,
                    Phase::Blocked => true,
                };
                // The worker publishes the kind before the status word
                // (`worker::run_work`); read again after, so a task that
                // ended meanwhile is left out rather than shown with the
                // next one's kind.
                let kind = Kind::from_bits(entry.kind.load(Ordering::Relaxed));
                let since = entry.task_seen_at(seen.tick());
                if entry.status.load().tick() != seen.tick() {
                    return None;
                }
                let KindName { name, site } = kind_names::name_of(kind);
                Some(RunningTask {
                    worker,
                    name,
                    site,
                    running_for: since
                        .map_or(Default::default(), |at| now.saturating_duration_since(at)),
                    blocked,
                })
            })
            .collect()
    }
}

//! The hot counters workers bump (sharded: each worker entry owns a set
//! only its thread writes), the queue-to-start latency recorders, and how a
//! snapshot adds them up.

use super::Metrics;
use crate::sync::lock;
use crate::sync::{AtomicU64, Mutex, Ordering};
use hdrhistogram::Histogram;

/// One shard of the task counters. Only one thread at a time writes a
/// shard (a worker its entry's; outside threads share one), so the
/// increments never contend; `live` is derived from the sums.
///
/// Increments are SeqCst: they are the "write" half of the shutdown Dekker
/// pairs described in `runtime::lifecycle` (spawn: `spawned` then read `closed`; task end:
/// `completed`/`panicked`/`cancelled` then read `closed`). On x86 a SeqCst
/// RMW costs the same as a Relaxed one.
#[derive(Debug, Default)]
pub(crate) struct TaskCounters {
    spawned: AtomicU64,
    /// Spawns that found the pool closed after counting themselves in
    /// `spawned`: they cancel that count out.
    refused: AtomicU64,
    completed: AtomicU64,
    panicked: AtomicU64,
    cancelled: AtomicU64,
}

/// How a task ended: the one outcome type the pool's counters, a group's
/// counters and the task's gate hook all use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The future returned (a closure ran to its end).
    Completed,
    /// A poll panicked; the panic was caught.
    Panicked,
    /// The future was dropped before it finished: cancelled by its handle, or
    /// dropped unrun by a stopping pool.
    Cancelled,
}

impl TaskCounters {
    pub(crate) fn spawned(&self) {
        self.spawned.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn refused(&self) {
        self.refused.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn ended(&self, how: Outcome) {
        let counter = match how {
            Outcome::Completed => &self.completed,
            Outcome::Panicked => &self.panicked,
            Outcome::Cancelled => &self.cancelled,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }

    /// This shard's contribution to the number of live tasks (may be negative:
    /// a task spawned from one thread ends on another).
    pub(crate) fn live_part(&self) -> i64 {
        // Read the ends first: a task's end is counted after its spawn, so a
        // reader racing with both never sees an end without its spawn.
        let ended = self.ended_total() + self.refused.load(Ordering::SeqCst);
        self.spawned.load(Ordering::SeqCst) as i64 - ended as i64
    }

    /// Tasks ended, however they ended.
    pub(crate) fn ended_total(&self) -> u64 {
        self.completed.load(Ordering::SeqCst)
            + self.panicked.load(Ordering::SeqCst)
            + self.cancelled.load(Ordering::SeqCst)
    }

    /// Adds this shard's ends (and refusals) to `m`. A snapshot adds every
    /// shard's ends before any shard's spawns ([`Self::add_spawns_to`]):
    /// each task's spawn is counted before its end (both `SeqCst`), so
    /// whatever end the snapshot sees, it sees that task's spawn too, and
    /// `completed + panicked + cancelled` never exceeds `spawned`. Read
    /// shard by shard in one pass, a task spawned on a shard read before its
    /// spawn and ended on one read after showed as ended but never spawned
    /// (about one live snapshot in 2,000 broke the sum).
    pub(crate) fn add_ends_to(&self, m: &mut Metrics) {
        m.rejected += self.refused.load(Ordering::SeqCst);
        m.completed += self.completed.load(Ordering::SeqCst);
        m.panicked += self.panicked.load(Ordering::SeqCst);
        m.cancelled += self.cancelled.load(Ordering::SeqCst);
    }

    /// Adds this shard's spawns to `m`'s `spawned`, refusals included (the
    /// snapshot takes them out once every shard is read).
    pub(crate) fn add_spawns_to(&self, m: &mut Metrics) {
        m.spawned += self.spawned.load(Ordering::SeqCst);
    }
}

/// Adds the task counters of every shard `shards` yields to `m` (it is
/// called twice): every shard's ends before any shard's spawns (see
/// [`TaskCounters::add_ends_to`]), so the snapshot never shows more tasks
/// ended than spawned; then `in_flight`.
pub(crate) fn add_task_counters<'a, I>(shards: impl Fn() -> I, m: &mut Metrics)
where
    I: Iterator<Item = &'a TaskCounters>,
{
    shards().for_each(|shard| shard.add_ends_to(m));
    shards().for_each(|shard| shard.add_spawns_to(m));
    m.spawned = m.spawned.saturating_sub(m.rejected);
    // Saturating only for safety: the read order keeps the ends within the
    // spawns.
    m.in_flight = m
        .spawned
        .saturating_sub(m.completed + m.panicked + m.cancelled);
}

/// A new latency histogram: `sys::ticks`, 2 significant figures (1%
/// resolution: plenty for means and percentiles, and 16x smaller than 3
/// figures, which keeps snapshots cheap), auto-resizing (small while
/// latencies are small).
pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new(2).expect("2 significant figures is valid")
}

/// Queue-to-first-poll latencies measured by one worker entry (or by the
/// threads outside the pool), in `sys::ticks` (converted to time only when a
/// snapshot is taken).
///
/// Recorded directly, under a lock only its worker and snapshots take: with
/// one start in eight measured during bursts (see `runtime::start_sampler`),
/// the uncontended lock costs a tiny task a few nanoseconds on average, and
/// a snapshot always sees every start measured so far. (An earlier version
/// kept a thread-local batch and published it every 4096 starts or when the
/// worker parked; a busy pool's snapshots then lagged by seconds, and
/// spawn_profile showed no difference between the two.)
#[derive(Debug, Default)]
pub(crate) struct LatencyRecorder {
    histogram: Mutex<Option<Histogram<u64>>>,
}

impl LatencyRecorder {
    /// Records one latency.
    pub(crate) fn record(&self, latency: u64) {
        let mut slot = lock(&self.histogram);
        let _ = slot
            .get_or_insert_with(new_histogram)
            .record(latency.max(1));
    }

    pub(crate) fn add_to(&self, total: &mut Histogram<u64>) {
        if let Some(h) = &*lock(&self.histogram) {
            let _ = total.add(h);
        }
    }
}

/// Pool-wide counters of thread lifecycle and blocking, written rarely.
#[derive(Debug, Default)]
pub(crate) struct ThreadCounters {
    pub(crate) started: AtomicU64,
    pub(crate) started_demand: AtomicU64,
    pub(crate) started_compensation: AtomicU64,
    pub(crate) started_policy: AtomicU64,
    pub(crate) started_burst: AtomicU64,
    pub(crate) started_floor: AtomicU64,
    pub(crate) started_quantum: AtomicU64,
    pub(crate) started_presumed: AtomicU64,
    pub(crate) started_spare: AtomicU64,
    pub(crate) quantum_lends: AtomicU64,
    pub(crate) counted_again: AtomicU64,
    pub(crate) held: AtomicU64,
    pub(crate) reserve_lends: AtomicU64,
    pub(crate) start_failures: AtomicU64,
    pub(crate) retired_idle: AtomicU64,
    pub(crate) retired_surplus: AtomicU64,
    pub(crate) blocked_detections: AtomicU64,
    pub(crate) declared_blocking: AtomicU64,
    pub(crate) presumed_blocking: AtomicU64,
    pub(crate) presumed_handed: AtomicU64,
    pub(crate) presumptions_failed: AtomicU64,
    pub(crate) oversubscribed: AtomicU64,
    pub(crate) peak_threads: AtomicU64,
    pub(crate) hook_panics: AtomicU64,
    pub(crate) dropped_panics: AtomicU64,
    pub(crate) no_thread_refusals: AtomicU64,
    /// Worker threads whose probe could not read the kernel's thread state.
    pub(crate) detection_fallbacks: AtomicU64,
    /// The [`Detection`](super::Detection) of the last probe opened (its `code`).
    pub(crate) last_detection: AtomicU64,
    /// Stuck episodes begun, and 1 while one lasts (written by the monitor).
    pub(crate) stuck_episodes: AtomicU64,
    pub(crate) stuck: AtomicU64,
}

impl ThreadCounters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Copies every counter into a snapshot.
    pub(crate) fn fill(&self, m: &mut Metrics) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        m.peak_threads = get(&self.peak_threads) as usize;
        m.threads_started = get(&self.started);
        m.workers_counted_again = get(&self.counted_again);
        m.workers_held = get(&self.held);
        m.threads_started_demand = get(&self.started_demand);
        m.threads_started_compensation = get(&self.started_compensation);
        m.threads_started_policy = get(&self.started_policy);
        m.threads_started_burst = get(&self.started_burst);
        m.threads_started_floor = get(&self.started_floor);
        m.threads_started_quantum = get(&self.started_quantum);
        m.threads_started_presumed = get(&self.started_presumed);
        m.threads_started_spare = get(&self.started_spare);
        m.quantum_lends = get(&self.quantum_lends);
        m.reserve_slot_lends = get(&self.reserve_lends);
        m.thread_start_failures = get(&self.start_failures);
        m.threads_retired_idle = get(&self.retired_idle);
        m.threads_retired_surplus = get(&self.retired_surplus);
        m.blocked_detections = get(&self.blocked_detections);
        m.declared_blocking = get(&self.declared_blocking);
        m.presumed_blocking = get(&self.presumed_blocking);
        m.presumed_handed = get(&self.presumed_handed);
        m.presumptions_failed = get(&self.presumptions_failed);
        m.oversubscribed_observations = get(&self.oversubscribed);
        m.hook_panics = get(&self.hook_panics);
        m.dropped_panics = get(&self.dropped_panics);
        m.no_thread_refusals = get(&self.no_thread_refusals);
        m.detection_fallbacks = get(&self.detection_fallbacks);
        m.stuck_episodes = get(&self.stuck_episodes);
        m.stuck = get(&self.stuck) != 0;
    }
}

//! What an arrival does (compute, then perhaps block) and records, and how
//! each system under test is handed one.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::measure::Latch;
use crate::systems::{tokio_runtime, System, TidepoolConfig};
use crate::work::burn_cpu;

/// How long a blocking arrival blocks, after its computation.
pub(super) const BLOCK: Duration = Duration::from_millis(5);

/// Marks a time that was never recorded.
const UNSET: u64 = u64::MAX;

/// When each arrival started and ended, in nanoseconds after the origin
/// (the generator's too), and latches that open once every arrival has
/// started, and ended.
#[derive(Debug)]
pub(super) struct Record {
    origin: Instant,
    /// An arrival that starts this long after the origin or later does not
    /// do its work: the measurement is over, and the system drains at once.
    work_until: Duration,
    started: Vec<AtomicU64>,
    ended: Vec<AtomicU64>,
    /// Opens when every arrival has started.
    pub(super) all_started: Arc<Latch>,
    /// Opens when every arrival has ended.
    pub(super) all_ended: Arc<Latch>,
}

impl Record {
    /// A record of `arrivals` arrivals, its origin now.
    pub(super) fn new(arrivals: usize, work_until: Duration) -> Record {
        let unset = || (0..arrivals).map(|_| AtomicU64::new(UNSET)).collect();
        Record {
            origin: Instant::now(),
            work_until,
            started: unset(),
            ended: unset(),
            all_started: Arc::new(Latch::new(arrivals)),
            all_ended: Arc::new(Latch::new(arrivals)),
        }
    }

    /// The same record, its origin now (when the arrivals begin).
    pub(super) fn timed_from_now(self) -> Record {
        Record {
            origin: Instant::now(),
            ..self
        }
    }

    /// The origin every time is measured from.
    pub(super) fn origin(&self) -> Instant {
        self.origin
    }

    // Relaxed stores: the times are read after the latches opened (their
    // count-downs order them).

    /// Arrival `i` starts now; returns whether it is to do its work.
    fn start(&self, i: usize) -> bool {
        let at = self.origin.elapsed();
        self.started[i].store(nanos(at), Ordering::Relaxed);
        self.all_started.count_down();
        at < self.work_until
    }

    /// Arrival `i` ends now.
    fn end(&self, i: usize) {
        self.ended[i].store(nanos(self.origin.elapsed()), Ordering::Relaxed);
        self.all_ended.count_down();
    }

    /// When each arrival started, after the origin.
    pub(super) fn started(&self) -> Vec<Option<Duration>> {
        times(&self.started)
    }

    /// When each arrival ended, after the origin.
    pub(super) fn ended(&self) -> Vec<Option<Duration>> {
        times(&self.ended)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(UNSET - 1)
}

fn times(v: &[AtomicU64]) -> Vec<Option<Duration>> {
    v.iter()
        .map(|t| match t.load(Ordering::Relaxed) {
            UNSET => None,
            ns => Some(Duration::from_nanos(ns)),
        })
        .collect()
}

/// How a system is handed the arrivals: one per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Way {
    /// tidepool's default pool, closures through `Pool::execute`.
    TidepoolExecute,
    /// tidepool's default pool, each arrival an async task (`Pool::spawn`)
    /// whose body is the same blocking code.
    TidepoolSpawn,
    /// tokio's default multi-thread runtime, each arrival a task that
    /// blocks inline.
    TokioInline,
    /// The same, the blocking part in `spawn_blocking`, awaited.
    TokioSpawnBlocking,
    /// The threadpool crate with a thread per core: one shared FIFO queue.
    ThreadPool,
}

impl Way {
    /// Builds the system.
    pub(super) fn build(self, cores: usize) -> Result<System, String> {
        match self {
            Way::TidepoolExecute => TidepoolConfig::default_pool().build().map(System::Tidepool),
            Way::TidepoolSpawn => TidepoolConfig::default_pool()
                .build()
                .map(System::TidepoolAsync),
            Way::TokioInline | Way::TokioSpawnBlocking => tokio_runtime().map(System::Tokio),
            Way::ThreadPool => Ok(System::ThreadPool(threadpool::ThreadPool::new(cores))),
        }
    }
}

/// Hands arrival `i` to `system`: it computes `cpu` of its thread's CPU
/// time, and if it `blocks`, then sleeps [`BLOCK`]. Computing
/// and blocking arrivals are separate closures (so separate kinds of task
/// to tidepool), as two handlers of a service would be.
pub(super) fn submit(
    system: &System,
    way: Way,
    record: &Arc<Record>,
    i: usize,
    blocks: bool,
    cpu: Duration,
) {
    let record = record.clone();
    match system {
        System::Tokio(rt) if way == Way::TokioSpawnBlocking && blocks => {
            drop(rt.spawn(async move {
                if record.start(i) {
                    black_box(burn_cpu(cpu));
                    // Sleeping cannot panic, so there is no error to see.
                    let _ = tokio::task::spawn_blocking(|| thread::sleep(BLOCK)).await;
                }
                record.end(i);
            }));
        }
        _ if blocks => system.spawn_fn(move || {
            if record.start(i) {
                black_box(burn_cpu(cpu));
                thread::sleep(BLOCK);
            }
            record.end(i);
        }),
        _ => system.spawn_fn(move || {
            if record.start(i) {
                black_box(burn_cpu(cpu));
            }
            record.end(i);
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arrival_after_the_measurement_skips_its_work_but_is_recorded() {
        let record = Record::new(2, Duration::from_secs(3600));
        assert!(record.start(0), "within: it works");
        record.end(0);
        let late = Record::new(1, Duration::ZERO);
        assert!(!late.start(0), "after: it skips");
        late.end(0);
        assert!(late.all_ended.wait_timeout(Duration::ZERO));
        assert!(record.started()[0].is_some());
        assert_eq!(record.started()[1], None);
        assert!(record.ended()[0] >= record.started()[0]);
        assert!(
            !record.all_started.wait_timeout(Duration::ZERO),
            "one to go"
        );
    }
}

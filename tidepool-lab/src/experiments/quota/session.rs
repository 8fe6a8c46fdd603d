//! One run of an issue #41 experiment in its process: the systems (each
//! built in one place, [`Way`]), the samplers around the system
//! ([`Session`]), a batch of items and when each ended ([`Phase`],
//! [`Session::hand_over`], [`Session::one_batch`]), and the figures every
//! run reports ([`Ended`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::computing::{Computing, OverQuota, QuotaSampler};
use super::{CONCURRENCY, QUOTA};
use crate::aggregate::Measured;
use crate::experiments::latency::finish;
use crate::experiments::paced::{steps, SelfReport};
use crate::experiments::{sampled_threads, settle, thread_baseline};
use crate::measure::Latch;
use crate::model::RunCtx;
use crate::probe::{self, ThreadObservation, ThreadSampler};
use crate::progress::Follow;
use crate::systems::{rayon_pool, tokio_runtime_with, System, TidepoolConfig};

/// How often the computing count is sampled.
const SAMPLE_COMPUTING_EVERY: Duration = Duration::from_millis(1);

/// How often the process's threads are counted (the other experiments'
/// interval).
const SAMPLE_THREADS_EVERY: Duration = Duration::from_millis(5);

/// A system under test, sized to [`CONCURRENCY`]: each is built here and
/// nowhere else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    /// tidepool, `Pool::builder().concurrency(2)` and the default
    /// controller; closures through `Pool::execute`.
    Tidepool,
    /// tidepool's `Controller::Fixed` with 2 slots and at most 2 threads.
    TidepoolFixed,
    /// tokio's multi-thread runtime with 2 workers; each item a task
    /// (`Runtime::spawn`), the way the experiment says.
    Tokio,
    /// The same runtime, each item a closure through `spawn_blocking`.
    TokioBlocking,
    /// A rayon pool of 2 threads, closures through `ThreadPool::spawn`.
    Rayon,
    /// The threadpool crate with 2 threads.
    ThreadPool,
}

impl Way {
    /// Builds the system.
    fn build(self) -> Result<System, String> {
        match self {
            Way::Tidepool => TidepoolConfig {
                concurrency: Some(CONCURRENCY),
                controller: None,
                max_threads: None,
            }
            .build()
            .map(System::Tidepool),
            Way::TidepoolFixed => TidepoolConfig::fixed(CONCURRENCY)
                .build()
                .map(System::Tidepool),
            Way::Tokio => tokio_runtime_with(CONCURRENCY).map(System::Tokio),
            Way::TokioBlocking => tokio_runtime_with(CONCURRENCY).map(System::TokioBlocking),
            Way::Rayon => rayon_pool(Some(CONCURRENCY)).map(System::Rayon),
            Way::ThreadPool => Ok(System::ThreadPool(threadpool::ThreadPool::new(CONCURRENCY))),
        }
    }
}

/// What an item does before it ends: wait (sleep, no CPU) or compute a
/// fixed amount of its own CPU time, counted as computing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Job {
    /// `thread::sleep` this long.
    Sleep(Duration),
    /// Compute this much of the thread's own CPU time.
    Compute(Duration),
}

/// A system with the samplers around it: the computing count's and the
/// progress bar's (started first, so their threads are in the baseline)
/// and the process's threads'.
#[derive(Debug)]
pub(crate) struct Session {
    system: System,
    computing: Arc<Computing>,
    progress: Arc<Latch>,
    follow: Follow,
    quota: Option<QuotaSampler>,
    threads: ThreadSampler,
    threads_from: Instant,
    baseline: usize,
    created: Instant,
}

impl Session {
    /// Builds `way`'s system, sampling the computing count when
    /// `count_computing`; the run's bar follows `items`, the items of all
    /// its phases.
    ///
    /// # Errors
    ///
    /// When the system or the sampler cannot be started.
    pub(crate) fn start(
        ctx: &RunCtx,
        way: Way,
        count_computing: bool,
        items: usize,
    ) -> Result<Session, String> {
        let progress = Arc::new(Latch::new(items));
        let follow = ctx.follow(&progress);
        let computing = Arc::new(Computing::default());
        let quota = if count_computing {
            Some(QuotaSampler::start(
                computing.clone(),
                QUOTA,
                SAMPLE_COMPUTING_EVERY,
            )?)
        } else {
            None
        };
        let baseline = thread_baseline();
        let threads_from = Instant::now();
        let threads = ThreadSampler::start(SAMPLE_THREADS_EVERY, baseline, false);
        match way.build() {
            Ok(system) => Ok(Session {
                system,
                computing,
                progress,
                follow,
                quota,
                threads,
                threads_from,
                baseline,
                created: Instant::now(),
            }),
            Err(e) => {
                threads.finish();
                quota.map(QuotaSampler::finish);
                Err(e)
            }
        }
    }

    /// A batch of `items` items, its origin now: call just before the
    /// first is handed over.
    fn phase(&self, items: usize) -> Arc<Phase> {
        Arc::new(Phase {
            origin: Instant::now(),
            ended: (0..items).map(|_| AtomicU64::new(UNSET)).collect(),
            done: Arc::new(Latch::new(items)),
            progress: self.progress.clone(),
            computing: self.computing.clone(),
        })
    }

    /// tidepool's metrics now, for a tidepool system.
    pub(crate) fn tidepool_metrics(&self) -> Option<tidepool::Metrics> {
        self.system.tidepool_metrics()
    }

    /// Starts a session, hands the system one batch of `items` items
    /// ([`Session::hand_over`]) and finishes ([`Session::finish`]): the
    /// whole of a run that has one batch. The items' times are an error
    /// when they did not all end within `limit`.
    ///
    /// # Errors
    ///
    /// When the system or the sampler cannot be started.
    pub(crate) fn one_batch(
        ctx: &RunCtx,
        way: Way,
        count_computing: bool,
        label: &str,
        items: usize,
        limit: Duration,
        hand: impl FnMut(&System, &Arc<Phase>, usize),
    ) -> Result<(Result<Completions, String>, Ended), String> {
        let session = Session::start(ctx, way, count_computing, items)?;
        let waited = session.hand_over(ctx, label, items, limit, hand);
        Ok((waited, session.finish(ctx)))
    }

    /// Hands the system a batch of `items` items, one after the other with
    /// no pause (`hand(system, phase, i)` hands over item `i`), the bar's
    /// phase `label`, the batch's origin just before the first; waits up to
    /// `limit` for all of them to end.
    ///
    /// # Errors
    ///
    /// How many had ended when the limit passed.
    pub(crate) fn hand_over(
        &self,
        ctx: &RunCtx,
        label: &str,
        items: usize,
        limit: Duration,
        mut hand: impl FnMut(&System, &Arc<Phase>, usize),
    ) -> Result<Completions, String> {
        ctx.bar.phase(label);
        let phase = self.phase(items);
        for i in 0..items {
            hand(&self.system, &phase, i);
        }
        phase.wait(limit)
    }

    /// Shuts the system down (it drains what is left), stops the samplers
    /// and waits for the system's threads to go; the bar says so.
    pub(crate) fn finish(self, ctx: &RunCtx) -> Ended {
        ctx.bar.phase("shutting down");
        let counted_again = self
            .system
            .tidepool_metrics()
            .map(|m| m.workers_counted_again);
        let lifetime = self.created.elapsed().as_secs_f64();
        // One reading as the work ends: a run shorter than the sampler's
        // interval (a tiny convoy) may end between two samples.
        let at_end = probe::thread_count().map(|n| n.saturating_sub(self.baseline + 1));
        let report = finish(self.system);
        let mut observed = self.threads.finish();
        if let Some(threads) = at_end {
            observed.push(ThreadObservation {
                at_s: self.threads_from.elapsed().as_secs_f64(),
                threads,
                runnable: None,
            });
        }
        let quota = self.quota.map(QuotaSampler::finish);
        settle(self.baseline);
        drop(self.follow);
        Ended {
            report,
            counted_again,
            observed,
            threads_from: self.threads_from,
            created: self.created,
            quota,
            peak_computing: self.computing.peak(),
            lifetime,
        }
    }
}

/// Marks an item that has not ended.
const UNSET: u64 = u64::MAX;

/// A batch of items handed to the system together: when each ended,
/// after the origin, and a latch that opens when all have.
#[derive(Debug)]
pub(crate) struct Phase {
    origin: Instant,
    ended: Vec<AtomicU64>,
    done: Arc<Latch>,
    progress: Arc<Latch>,
    computing: Arc<Computing>,
}

impl Phase {
    /// Item `i` as a closure that does `job`: one closure type whatever
    /// the job, so to tidepool every item is one kind of task.
    pub(crate) fn item(self: &Arc<Self>, i: usize, job: Job) -> impl FnOnce() + Send + 'static {
        let phase = self.clone();
        move || phase.run(i, job)
    }

    /// Does `job`, then ends item `i`.
    pub(crate) fn run(&self, i: usize, job: Job) {
        match job {
            Job::Sleep(d) => thread::sleep(d),
            Job::Compute(cpu) => self.compute(cpu),
        }
        self.end(i);
    }

    /// Computes `cpu` of the thread's own CPU time, counted as computing.
    pub(crate) fn compute(&self, cpu: Duration) {
        self.computing.compute(cpu);
    }

    /// Item `i` ends now.
    pub(crate) fn end(&self, i: usize) {
        let ns = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(UNSET - 1);
        // Relaxed: read after the latch opened (its count-downs order it).
        self.ended[i].store(ns, Ordering::Relaxed);
        self.done.count_down();
        self.progress.count_down();
    }

    /// Waits up to `limit` for every item to end; returns when each
    /// ended, after the origin.
    ///
    /// # Errors
    ///
    /// How many had ended when the limit passed.
    pub(crate) fn wait(&self, limit: Duration) -> Result<Completions, String> {
        if !self.done.wait_timeout(limit) {
            return Err(format!(
                "only {} of {} items ended within {:.0} s",
                self.done.finished(),
                self.done.total(),
                limit.as_secs_f64()
            ));
        }
        Ok(Completions {
            origin: self.origin,
            times: self
                .ended
                .iter()
                .map(|t| Duration::from_nanos(t.load(Ordering::Relaxed)))
                .collect(),
        })
    }
}

#[cfg(test)]
impl Phase {
    /// A batch of `items` with a counter of its own, for tests.
    pub(crate) fn for_test(items: usize) -> Arc<Phase> {
        Arc::new(Phase {
            origin: Instant::now(),
            ended: (0..items).map(|_| AtomicU64::new(UNSET)).collect(),
            done: Arc::new(Latch::new(items)),
            progress: Arc::new(Latch::new(items)),
            computing: Arc::new(Computing::default()),
        })
    }
}

/// When each item of a batch ended, after the batch's origin.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Completions {
    /// When the batch began.
    pub(crate) origin: Instant,
    /// In item order.
    pub(crate) times: Vec<Duration>,
}

impl Completions {
    /// The mean completion time (zero for no items).
    pub(crate) fn mean(&self) -> Duration {
        match u32::try_from(self.times.len()) {
            Ok(0) | Err(_) => Duration::ZERO,
            Ok(n) => self.times.iter().sum::<Duration>() / n,
        }
    }

    /// The last completion: the batch's wall time.
    pub(crate) fn last(&self) -> Duration {
        self.times.iter().copied().max().unwrap_or_default()
    }

    /// Completion times in milliseconds, in item order (a plot's points).
    pub(crate) fn ms(&self) -> Vec<f64> {
        self.times.iter().map(|t| t.as_secs_f64() * 1e3).collect()
    }
}

/// What a session measured besides the items' own times.
#[derive(Debug)]
pub(crate) struct Ended {
    report: SelfReport,
    counted_again: Option<u64>,
    observed: Vec<ThreadObservation>,
    threads_from: Instant,
    created: Instant,
    quota: Option<OverQuota>,
    peak_computing: usize,
    lifetime: f64,
}

impl Ended {
    /// The most threads the system ran: tidepool's own count, else the
    /// process's threads above the baseline, sampled from `/proc`.
    pub(crate) fn peak_threads(&self) -> usize {
        self.report
            .peak_threads
            .unwrap_or_else(|| probe::peak_threads(&self.observed))
    }

    /// The most threads the system ran from `from` on, counted as
    /// [`peak_threads`](Ended::peak_threads) counts them: tidepool's own
    /// series (its monitor's samples, each holding until the next), else
    /// the `/proc` samples. Threads left idle from before count too.
    pub(crate) fn peak_threads_since(&self, from: Instant) -> usize {
        if let Some((_, points)) = &self.report.series {
            let after = from.saturating_duration_since(self.created).as_secs_f64();
            if let Some(peak) = peak_of_steps_since(points, after) {
                return peak;
            }
        }
        let after = from
            .saturating_duration_since(self.threads_from)
            .as_secs_f64();
        self.observed
            .iter()
            .filter(|o| o.at_s >= after)
            .map(|o| o.threads)
            .max()
            .unwrap_or(0)
    }

    /// `over_quota_ms`, `peak_computing` (every start counted),
    /// `peak_computing_sampled` (the 1 ms sampler's) and
    /// `max_sample_gap_ms` (the sampler's longest gap: the resolution of
    /// the time over quota), when the computing count was sampled.
    pub(crate) fn put_computing(&self, m: &mut Measured) {
        let Some(q) = &self.quota else {
            return;
        };
        m.put("over_quota_ms", q.over().as_secs_f64() * 1e3);
        m.put("peak_computing", self.peak_computing as f64);
        m.put("peak_computing_sampled", q.peak() as f64);
        m.put("max_sample_gap_ms", q.longest_gap().as_secs_f64() * 1e3);
    }

    /// `peak_threads`, and for tidepool its counters (`blocked_detections`,
    /// `presumed_blocking`, `presumptions_failed`, `concurrency`,
    /// `monitor_busy_ms`, `workers_counted_again`); the threads-over-time
    /// series for the plots.
    pub(crate) fn put_threads_and_pool(&self, m: &mut Measured) {
        m.put("peak_threads", self.peak_threads() as f64);
        for (name, v) in &self.report.extra {
            m.put(name, *v);
        }
        if let Some(n) = self.counted_again {
            m.put("workers_counted_again", n as f64);
        }
        m.threads = Some(match &self.report.series {
            Some((label, pts)) => (label.clone(), steps(pts, self.lifetime)),
            None => (
                "sampled from /proc".to_string(),
                sampled_threads(&self.observed),
            ),
        });
    }
}

/// The highest value of a step series (`(seconds, value)` change points,
/// each value holding until the next) from `after` on: the points from
/// then, and the one in force then. `None` if it has no point by then or
/// after.
fn peak_of_steps_since(points: &[(f64, f64)], after: f64) -> Option<usize> {
    let in_force = points.iter().rev().find(|(t, _)| *t < after);
    points
        .iter()
        .filter(|(t, _)| *t >= after)
        .chain(in_force)
        .map(|(_, v)| *v as usize)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_series_peak_counts_the_value_in_force() {
        let pts = [(0.0, 20.0), (1.0, 3.0), (2.0, 5.0), (3.0, 4.0)];
        assert_eq!(peak_of_steps_since(&pts, 1.5), Some(5));
        assert_eq!(peak_of_steps_since(&pts, 2.5), Some(5), "5 holds until 3");
        assert_eq!(peak_of_steps_since(&pts, 0.0), Some(20));
        assert_eq!(peak_of_steps_since(&pts, 9.0), Some(4));
        assert_eq!(peak_of_steps_since(&[], 1.0), None);
    }

    #[test]
    fn completions_have_a_mean_and_a_last() {
        let c = Completions {
            origin: Instant::now(),
            times: vec![
                Duration::from_millis(10),
                Duration::from_millis(30),
                Duration::from_millis(20),
            ],
        };
        assert_eq!(c.mean(), Duration::from_millis(20));
        assert_eq!(c.last(), Duration::from_millis(30));
        assert_eq!(c.ms(), vec![10.0, 30.0, 20.0]);
        let none = Completions {
            origin: Instant::now(),
            times: Vec::new(),
        };
        assert_eq!((none.mean(), none.last()), (Duration::ZERO, Duration::ZERO));
    }

    #[test]
    fn a_phase_records_each_end_and_counts_computing() {
        let phase = Phase::for_test(2);
        phase.run(1, Job::Compute(Duration::from_millis(1)));
        assert!(phase.wait(Duration::ZERO).is_err(), "one to go");
        phase.run(0, Job::Sleep(Duration::from_millis(1)));
        let c = phase.wait(Duration::ZERO).unwrap();
        assert!(c.times[1] >= Duration::from_millis(1));
        assert!(c.times[0] >= c.times[1]);
        assert_eq!(phase.computing.peak(), 1);
    }

    fn type_of<T: 'static>(_: &T) -> std::any::TypeId {
        std::any::TypeId::of::<T>()
    }

    #[test]
    fn items_that_sleep_and_items_that_compute_are_one_closure_type() {
        let phase = Phase::for_test(2);
        let sleeps = phase.item(0, Job::Sleep(Duration::from_millis(5)));
        let computes = phase.item(1, Job::Compute(Duration::from_millis(50)));
        assert_eq!(type_of(&sleeps), type_of(&computes));
    }
}

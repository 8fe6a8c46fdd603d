//! How many tasks compute at once: every task counts itself while it
//! computes ([`Computing`]), and a sampler thread ([`QuotaSampler`]) looks
//! at the count every millisecond and adds up the time it found more than
//! the quota computing ([`OverQuota`], a pure accumulator).
//!
//! A thread inside its computation may be stopped by the pool: tidepool
//! holds a thread back from its block, computing while every slot is
//! taken, until a slot is its own (its `control::hold`), asleep in a
//! signal handler. The count says it computes; the kernel says it sleeps.
//! A computation never sleeps by itself, so when the count is over the
//! quota the sampler asks the kernel about each computing thread and
//! leaves out those asleep ([`Computing::running`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::work::burn_cpu;

/// The tasks computing now, the most that ever did at once, and the
/// threads computing now.
#[derive(Debug, Default)]
pub(crate) struct Computing {
    now: AtomicUsize,
    peak: AtomicUsize,
    threads: Mutex<Vec<u32>>,
}

impl Computing {
    /// Computes `cpu` of the calling thread's own CPU time, counted as
    /// computing from before the first instruction to after the last.
    pub(crate) fn compute(&self, cpu: Duration) {
        let tid = crate::probe::own_tid_number();
        if let Some(tid) = tid {
            self.threads
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(tid);
        }
        // Relaxed: a count, read by the sampler; nothing is published
        // through it.
        let n = self.now.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(n, Ordering::Relaxed);
        std::hint::black_box(burn_cpu(cpu));
        self.now.fetch_sub(1, Ordering::Relaxed);
        if let Some(tid) = tid {
            let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(at) = threads.iter().position(|&t| t == tid) {
                threads.swap_remove(at);
            }
        }
    }

    /// Tasks computing now that the kernel does not find asleep (held by
    /// the pool): a `/proc` read per computing thread, so only for counts
    /// that matter.
    pub(crate) fn running(&self) -> usize {
        let threads = self
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let asleep = threads
            .iter()
            .filter(|&&tid| crate::probe::thread_asleep(tid))
            .count();
        self.now().saturating_sub(asleep)
    }

    /// Tasks computing now.
    pub(crate) fn now(&self) -> usize {
        self.now.load(Ordering::Relaxed)
    }

    /// The most tasks that computed at once, counted at every start (so a
    /// moment of overlap counts, however short).
    pub(crate) fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }
}

/// What the samples of the computing count add up to: the time during
/// which more than `quota` tasks computed at once, the highest count seen,
/// and the longest gap between two samples (how late the sampler got on
/// busy cores: the resolution of the time over quota).
///
/// Each sample's count is taken to hold until the next sample: the
/// interval after a sample over the quota counts whole, the interval after
/// one within it not at all. A change between two samples is thus placed
/// at the later one; the error is at most one gap per change.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OverQuota {
    quota: usize,
    last: Option<(Duration, usize)>,
    over: Duration,
    peak: usize,
    longest_gap: Duration,
}

impl OverQuota {
    /// An accumulator for more than `quota` tasks computing at once.
    pub(crate) fn new(quota: usize) -> OverQuota {
        OverQuota {
            quota,
            last: None,
            over: Duration::ZERO,
            peak: 0,
            longest_gap: Duration::ZERO,
        }
    }

    /// A sample: `computing` tasks computed at `at` (from any fixed
    /// origin; samples come in time order).
    pub(crate) fn observe(&mut self, at: Duration, computing: usize) {
        if let Some((then, was)) = self.last {
            let gap = at.saturating_sub(then);
            self.longest_gap = self.longest_gap.max(gap);
            if was > self.quota {
                self.over += gap;
            }
        }
        self.peak = self.peak.max(computing);
        self.last = Some((at, computing));
    }

    /// Time with more than the quota computing, between the first sample
    /// and the last.
    pub(crate) fn over(&self) -> Duration {
        self.over
    }

    /// The highest count a sample found.
    pub(crate) fn peak(&self) -> usize {
        self.peak
    }

    /// The longest time between two samples.
    pub(crate) fn longest_gap(&self) -> Duration {
        self.longest_gap
    }
}

/// A sample that reads `/proc` takes this many times the CPU time it used
/// as sleep after it, so the sampler uses at most about 1/20 of a core
/// (CPU time, not wall time: on crowded cores a sample's reads wait for a
/// core, and paced by its wall time the sampler slept for seconds).
/// Sampling every millisecond regardless, it read 256 threads' `/proc`
/// files a sample while a pool held them (each in its computation, so
/// counted, and asleep) and took a fifth of the machine's CPU from the
/// very pool it measured (`perf`, fetch-process with 256 items); the
/// peers, never over the quota, paid nothing. The longer gaps are in
/// `max_sample_gap_ms`, the resolution of the time over quota.
const SAMPLER_SHARE: u32 = 20;

/// A thread (`lab-quota`, one of the lab's own) that samples a
/// [`Computing`] count at a fixed interval (longer after a costly sample:
/// [`SAMPLER_SHARE`]) into an [`OverQuota`].
#[derive(Debug)]
pub(crate) struct QuotaSampler {
    stop: Arc<AtomicBool>,
    handle: thread::JoinHandle<OverQuota>,
}

impl QuotaSampler {
    /// Starts sampling `computing` every `every`, against `quota`.
    ///
    /// # Errors
    ///
    /// When the thread cannot be started.
    pub(crate) fn start(
        computing: Arc<Computing>,
        quota: usize,
        every: Duration,
    ) -> Result<QuotaSampler, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = thread::Builder::new()
            .name("lab-quota".into())
            .spawn(move || {
                let origin = Instant::now();
                let mut acc = OverQuota::new(quota);
                loop {
                    // Over the quota, the threads the pool holds (asleep
                    // inside their computation) do not count.
                    let cpu_before = crate::probe::thread_cpu_time();
                    let now = match computing.now() {
                        n if n > quota => computing.running(),
                        n => n,
                    };
                    acc.observe(origin.elapsed(), now);
                    // Relaxed: the flag carries no data; the join publishes
                    // the accumulator. One last sample after it is seen.
                    if flag.load(Ordering::Relaxed) {
                        return acc;
                    }
                    let cost = crate::probe::thread_cpu_time().saturating_sub(cpu_before);
                    thread::sleep(every.max(cost * SAMPLER_SHARE));
                }
            })
            .map_err(|e| format!("the computing sampler's thread: {e}"))?;
        Ok(QuotaSampler { stop, handle })
    }

    /// Stops sampling and returns what the samples add up to.
    pub(crate) fn finish(self) -> OverQuota {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_else(|_| OverQuota::new(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn time_over_quota_is_the_intervals_after_samples_over_it() {
        // Quota 4: over at 2, 3 (5 and 6 computing), within at 4.
        let mut acc = OverQuota::new(4);
        for (at, n) in [(0, 2), (1, 4), (2, 5), (3, 6), (7, 3), (8, 0)] {
            acc.observe(ms(at), n);
        }
        // 2 -> 3 and 3 -> 7: 1 + 4 ms.
        assert_eq!(acc.over(), ms(5));
        assert_eq!(acc.peak(), 6);
        assert_eq!(acc.longest_gap(), ms(4));
    }

    #[test]
    fn exactly_the_quota_is_not_over_it_and_a_last_sample_adds_nothing() {
        let mut acc = OverQuota::new(4);
        acc.observe(ms(0), 4);
        acc.observe(ms(10), 4);
        assert_eq!(acc.over(), Duration::ZERO);
        let mut acc = OverQuota::new(4);
        acc.observe(ms(5), 9);
        assert_eq!(acc.over(), Duration::ZERO, "one sample spans no time");
        assert_eq!(acc.peak(), 9);
        acc.observe(ms(6), 9);
        assert_eq!(acc.over(), ms(1));
    }

    #[test]
    fn a_sample_out_of_order_counts_no_negative_time() {
        let mut acc = OverQuota::new(0);
        acc.observe(ms(5), 1);
        acc.observe(ms(3), 1);
        assert_eq!(acc.over(), Duration::ZERO);
    }

    #[test]
    fn the_counter_counts_while_computing_and_keeps_its_peak() {
        let c = Arc::new(Computing::default());
        let sampler = QuotaSampler::start(c.clone(), 0, Duration::from_micros(200)).unwrap();
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let c = c.clone();
                thread::spawn(move || c.compute(ms(5)))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(c.now(), 0);
        assert!((1..=3).contains(&c.peak()), "{}", c.peak());
        let acc = sampler.finish();
        assert!(acc.peak() <= c.peak());
    }
}

//! Per-item timing shared by every system under test.
//!
//! Start latency is measured the same way for every pool: the submitting
//! thread records an instant just before it hands the item over, and the item
//! records one as its first action. Both are stored as nanoseconds since a
//! common origin, in atomics, so recording costs one clock read and one
//! relaxed store and needs no lock.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Marks a slot that was never written.
const UNSET: u64 = u64::MAX;

/// Submission, start and end instants of a fixed number of items.
#[derive(Debug)]
pub struct Timeline {
    origin: Instant,
    submitted: Vec<AtomicU64>,
    started: Vec<AtomicU64>,
    ended: Vec<AtomicU64>,
}

impl Timeline {
    /// A timeline for `n` items, with its origin now.
    pub fn new(n: usize) -> Timeline {
        let slots = || (0..n).map(|_| AtomicU64::new(UNSET)).collect();
        Timeline {
            origin: Instant::now(),
            submitted: slots(),
            started: slots(),
            ended: slots(),
        }
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.submitted.len()
    }

    /// Whether there are no items.
    pub fn is_empty(&self) -> bool {
        self.submitted.is_empty()
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(UNSET - 1)
    }

    // Relaxed stores: every reader runs after the items are known finished
    // (a `Latch` wait or a join), which orders these stores before the reads.

    /// Records that item `i` is being submitted now.
    pub fn submit(&self, i: usize) {
        self.submitted[i].store(self.now_ns(), Ordering::Relaxed);
    }

    /// Records that item `i` starts now.
    pub fn start(&self, i: usize) {
        self.started[i].store(self.now_ns(), Ordering::Relaxed);
    }

    /// Records that item `i` ends now.
    pub fn end(&self, i: usize) {
        self.ended[i].store(self.now_ns(), Ordering::Relaxed);
    }

    fn get(v: &[AtomicU64], i: usize) -> Option<u64> {
        match v[i].load(Ordering::Relaxed) {
            UNSET => None,
            ns => Some(ns),
        }
    }

    /// Milliseconds from submission to start, per item, in item order.
    /// Items that never started are left out.
    pub fn start_latencies_ms(&self) -> Vec<f64> {
        (0..self.len())
            .filter_map(|i| {
                let s = Self::get(&self.submitted, i)?;
                let t = Self::get(&self.started, i)?;
                Some(t.saturating_sub(s) as f64 / 1e6)
            })
            .collect()
    }

    /// Milliseconds from the first item's submission to each item's start,
    /// in item order: when an item started counted from when the whole
    /// burst was asked for. Unlike [`Timeline::start_latencies_ms`] it does
    /// not credit a system whose submitter is slowed by each submission
    /// (tokio's `spawn_blocking` starting a thread in the call) with short
    /// latencies. Items that never started are left out.
    pub fn starts_since_first_submit_ms(&self) -> Vec<f64> {
        let Some(first) = (0..self.len())
            .filter_map(|i| Self::get(&self.submitted, i))
            .min()
        else {
            return Vec::new();
        };
        (0..self.len())
            .filter_map(|i| Some(Self::get(&self.started, i)?.saturating_sub(first) as f64 / 1e6))
            .collect()
    }

    /// Milliseconds from the first submission to the last: how long the
    /// submitter spent handing the items over.
    pub fn submitting_ms(&self) -> Option<f64> {
        let times = || (0..self.len()).filter_map(|i| Self::get(&self.submitted, i));
        let (first, last) = (times().min()?, times().max()?);
        Some((last - first) as f64 / 1e6)
    }

    /// Seconds from start to end, per item, in item order.
    pub fn durations_s(&self) -> Vec<f64> {
        (0..self.len())
            .filter_map(|i| {
                let s = Self::get(&self.started, i)?;
                let e = Self::get(&self.ended, i)?;
                Some(e.saturating_sub(s) as f64 / 1e9)
            })
            .collect()
    }

    /// Number of items that recorded a start.
    pub fn started_count(&self) -> usize {
        (0..self.len())
            .filter(|i| Self::get(&self.started, *i).is_some())
            .count()
    }
}

/// A count-down latch: items count down as they finish, the runner waits
/// for zero. Its count is also the progress shown on screen.
#[derive(Debug)]
pub struct Latch {
    total: usize,
    remaining: AtomicUsize,
    done: Mutex<bool>,
    cv: Condvar,
}

impl Latch {
    /// A latch that opens after `n` count-downs.
    pub fn new(n: usize) -> Latch {
        Latch {
            total: n,
            remaining: AtomicUsize::new(n),
            done: Mutex::new(n == 0),
            cv: Condvar::new(),
        }
    }

    /// One item finished.
    pub fn count_down(&self) {
        // AcqRel: the last count-down acquires every earlier item's writes
        // (their releases) before it opens the latch under the mutex, and the
        // waiter acquires them through the mutex.
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
            *done = true;
            self.cv.notify_all();
        }
    }

    /// Items the latch waits for.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Items finished so far.
    pub fn finished(&self) -> usize {
        self.total - self.remaining.load(Ordering::Relaxed)
    }

    /// Blocks until every item has counted down, or `limit` passes; returns
    /// whether all finished.
    pub fn wait_timeout(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while !*done {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            done = self
                .cv
                .wait_timeout(done, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

/// Calls `submit(i)` for `i` in `0..n`, the i-th at `origin + i * interval`
/// (absolute deadlines, so a late submission does not delay the rest).
pub fn paced(n: usize, interval: Duration, mut submit: impl FnMut(usize)) {
    let origin = Instant::now();
    for i in 0..n {
        let due = origin + interval * u32::try_from(i).unwrap_or(u32::MAX);
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        submit(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn timeline_measures_what_was_recorded() {
        let t = Timeline::new(3);
        t.submit(0);
        t.start(0);
        t.end(0);
        t.submit(1);
        t.start(1);
        t.submit(2);
        assert_eq!(t.start_latencies_ms().len(), 2);
        assert_eq!(t.durations_s().len(), 1);
        assert_eq!(t.started_count(), 2);
        assert!(t.start_latencies_ms().iter().all(|v| *v >= 0.0));
    }

    #[test]
    fn starts_since_the_first_submit_count_the_submitters_time_too() {
        let t = Timeline::new(3);
        t.submit(0);
        thread::sleep(Duration::from_millis(20));
        t.submit(1);
        t.start(1);
        t.start(0);
        t.submit(2);
        let own = t.start_latencies_ms();
        let since_first = t.starts_since_first_submit_ms();
        assert_eq!(since_first.len(), 2, "the item never started is left out");
        // Item 1 started at once after its own submit, 20 ms after item 0's.
        assert!(since_first[1] - own[1] >= 20.0, "{own:?} {since_first:?}");
        assert!(since_first[0] >= own[0]);
        assert!(t.submitting_ms().unwrap() >= 20.0);
        assert_eq!(Timeline::new(2).submitting_ms(), None);
        assert!(Timeline::new(2).starts_since_first_submit_ms().is_empty());
    }

    #[test]
    fn latch_opens_after_all() {
        let l = Arc::new(Latch::new(100));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                thread::spawn(move || (0..25).for_each(|_| l.count_down()))
            })
            .collect();
        assert!(l.wait_timeout(Duration::from_secs(30)));
        hs.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(l.finished(), 100);
        assert!(Latch::new(0).wait_timeout(Duration::ZERO));
        assert!(!Latch::new(1).wait_timeout(Duration::from_millis(1)));
    }

    #[test]
    fn paced_keeps_order() {
        let mut seen = Vec::new();
        paced(5, Duration::from_micros(10), |i| seen.push(i));
        assert_eq!(seen, vec![0, 1, 2, 3, 4]);
    }
}

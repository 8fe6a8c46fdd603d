//! When a pool is stuck: every thread up to `max_threads` is blocked and
//! queued work has waited for [`STUCK_THRESHOLDS`] monitor intervals. No
//! thread can run that work until a blocked task returns; if the blocked
//! tasks wait for the queued ones (a chain of `join`s deeper than
//! `max_threads`), none ever will. The monitor reports each episode once
//! (`Metrics::stuck`, `stuck_episodes`, a `tracing` warning).
//!
//! Pure, like the policies: it reads the monitor's [`Sample`].

use super::policy::{Limits, Sample};
use std::time::Duration;

/// Work must have waited with every thread blocked for this many monitor
/// intervals before the pool counts as stuck: long enough that a thread
/// about to return does not start an episode, short enough to say so within
/// a few ticks (10 ms at the default interval).
pub(crate) const STUCK_THRESHOLDS: u32 = 10;

/// A change the monitor reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// An episode began.
    Began,
    /// The episode ended: a thread is free for work, or no work waits.
    Ended,
}

/// The monitor's memory of the current episode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StuckWatch {
    /// Since when (`Sample::now`) every thread has been blocked with work
    /// waiting, if it is so now.
    since: Option<Duration>,
    /// An episode was reported and has not ended.
    stuck: bool,
}

impl StuckWatch {
    /// Looks at one tick's sample; returns the change to report, if any.
    pub(crate) fn observe(&mut self, limits: &Limits, sample: &Sample) -> Option<Change> {
        let every_thread_blocked = sample.queued > 0
            && sample.threads >= limits.max_threads
            && sample.blocked >= sample.threads;
        if !every_thread_blocked {
            self.since = None;
            let ended = std::mem::take(&mut self.stuck);
            return ended.then_some(Change::Ended);
        }
        let since = *self.since.get_or_insert(sample.now);
        let waited = sample.now.saturating_sub(since);
        if !self.stuck && waited >= limits.threshold * STUCK_THRESHOLDS {
            self.stuck = true;
            return Some(Change::Began);
        }
        None
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn limits() -> Limits {
        Limits::for_tests(1, 2)
    }

    fn at(ms: u32, threads: usize, blocked: usize, queued: usize) -> Sample {
        Sample {
            now: MS * ms,
            threads,
            blocked,
            queued,
            ..Sample::default()
        }
    }

    #[test]
    fn every_thread_blocked_with_work_waiting_is_one_episode_reported_once() {
        let mut watch = StuckWatch::default();
        let limits = limits();
        assert_eq!(watch.observe(&limits, &at(0, 2, 2, 1)), None);
        assert_eq!(watch.observe(&limits, &at(9, 2, 2, 1)), None);
        assert_eq!(
            watch.observe(&limits, &at(10, 2, 2, 1)),
            Some(Change::Began)
        );
        assert_eq!(watch.observe(&limits, &at(500, 2, 2, 7)), None);
        // A blocked task returned: its thread is free for the work.
        assert_eq!(
            watch.observe(&limits, &at(501, 2, 1, 1)),
            Some(Change::Ended)
        );
        assert_eq!(watch.observe(&limits, &at(502, 2, 1, 1)), None);
        // Blocked again: a new episode, after a new wait.
        assert_eq!(watch.observe(&limits, &at(503, 2, 2, 1)), None);
        assert_eq!(
            watch.observe(&limits, &at(513, 2, 2, 1)),
            Some(Change::Began)
        );
        // The queue emptied: over too.
        assert_eq!(
            watch.observe(&limits, &at(514, 2, 2, 0)),
            Some(Change::Ended)
        );
    }

    #[test]
    fn not_stuck_while_a_thread_may_still_start_or_run() {
        let limits = limits();
        for (threads, blocked, queued) in [
            (1, 1, 5), // room for one more thread
            (2, 1, 5), // one thread holds a slot: it will take the work
            (2, 2, 0), // nothing waits
        ] {
            let mut watch = StuckWatch::default();
            for ms in 0..1000 {
                let change = watch.observe(&limits, &at(ms, threads, blocked, queued));
                assert_eq!(change, None, "{threads} {blocked} {queued} at {ms} ms");
            }
        }
    }

    #[test]
    fn a_wait_broken_off_starts_over() {
        let mut watch = StuckWatch::default();
        let limits = limits();
        assert_eq!(watch.observe(&limits, &at(0, 2, 2, 1)), None);
        assert_eq!(watch.observe(&limits, &at(8, 2, 1, 1)), None);
        assert_eq!(watch.observe(&limits, &at(9, 2, 2, 1)), None);
        assert_eq!(watch.observe(&limits, &at(18, 2, 2, 1)), None);
        assert_eq!(
            watch.observe(&limits, &at(19, 2, 2, 1)),
            Some(Change::Began)
        );
    }
}

//! Pacing of thread starts beyond `concurrency`.
//!
//! The first `concurrency` threads start without delay: they are the running
//! slots. Beyond that, a thread is started only to replace a blocked worker
//! (or because a policy raised the target), and a burst of short blocking
//! tasks could otherwise start hundreds of threads that find nothing to do by
//! the time they run. So starts are paced:
//!
//! * while starts come more than [`PRESSURE_WINDOW`] apart, there is no delay
//!   (items arriving every 10 ms, each blocking, get a thread at once);
//! * a start that follows the previous one within the window (plus the current
//!   delay) is sustained pressure: the delay doubles, from [`MIN_DELAY`] up to
//!   [`MAX_DELAY`];
//! * a start refused by the delay is retried by the next spawn or monitor
//!   tick; once starts are spread out again the delay resets to zero.
//!
//! Pure: the caller passes the time, so tests use a fake clock.

use std::time::Duration;

/// Starts closer together than this (beyond the current delay) count as
/// sustained pressure. Short enough that a steady 100 starts per second
/// (the waiting experiment's ramp-up) is not paced at all.
pub(crate) const PRESSURE_WINDOW: Duration = Duration::from_millis(2);

/// The first delay once pressure is sustained: one monitor interval.
pub(crate) const MIN_DELAY: Duration = Duration::from_millis(1);

/// The longest delay between paced starts: at most ~16 new threads a second
/// under a sustained burst, against ~thousands unpaced.
pub(crate) const MAX_DELAY: Duration = Duration::from_millis(64);

/// The pacer's memory. Times are durations since any fixed origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StartPacer {
    last_start: Option<Duration>,
    delay: Duration,
}

impl StartPacer {
    /// May a thread beyond `concurrency` start at `now`? Records the start if
    /// so.
    pub(crate) fn try_start(&mut self, now: Duration) -> bool {
        let Some(last) = self.last_start else {
            self.last_start = Some(now);
            return true;
        };
        let gap = now.saturating_sub(last);
        if gap < self.delay {
            return false;
        }
        self.delay = if gap < self.delay + PRESSURE_WINDOW {
            (self.delay * 2).clamp(MIN_DELAY, MAX_DELAY)
        } else {
            Duration::ZERO
        };
        self.last_start = Some(now);
        true
    }

    /// The current delay between starts.
    #[cfg(all(test, not(tidepool_loom)))]
    pub(crate) fn delay(&self) -> Duration {
        self.delay
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn spread_out_starts_are_never_delayed() {
        let mut pacer = StartPacer::default();
        for i in 0..100u32 {
            assert!(pacer.try_start(MS * 10 * i), "start {i} refused");
            assert_eq!(pacer.delay(), Duration::ZERO);
        }
    }

    #[test]
    fn a_burst_is_paced_with_a_growing_delay() {
        let mut pacer = StartPacer::default();
        let mut started = Vec::new();
        // Someone asks for a thread every 100 µs for one second.
        for i in 0..10_000u32 {
            let now = Duration::from_micros(100) * i;
            if pacer.try_start(now) {
                started.push(now);
            }
        }
        assert!(
            started.len() < 40,
            "{} starts in a 1 s burst",
            started.len()
        );
        let gaps: Vec<Duration> = started.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            gaps.windows(2).all(|g| g[1] >= g[0]),
            "delays only grow: {gaps:?}"
        );
        assert!(*gaps.last().unwrap() >= MAX_DELAY);
        assert!(gaps
            .iter()
            .all(|g| *g <= MAX_DELAY + Duration::from_micros(100)));
    }

    #[test]
    fn the_delay_resets_when_pressure_ends() {
        let mut pacer = StartPacer::default();
        for i in 0..20u32 {
            pacer.try_start(Duration::from_micros(500) * i);
        }
        assert!(pacer.delay() > Duration::ZERO);
        let quiet = Duration::from_secs(5);
        assert!(pacer.try_start(quiet));
        assert_eq!(pacer.delay(), Duration::ZERO);
        assert!(pacer.try_start(quiet + 10 * MS));
    }
}

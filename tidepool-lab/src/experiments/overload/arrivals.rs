//! When arrivals are due, which of them block, and the open-loop generator
//! that submits each at its intended time.

use std::thread;
use std::time::{Duration, Instant};

/// How many times what the cores can compute arrives.
pub(super) const OVERLOAD: f64 = 1.5;

/// Arrivals due at a fixed rate through a window: arrival `i` is due
/// `i / rate` after the origin, and every arrival is due inside the window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Schedule {
    /// Nanoseconds between two arrivals.
    interval_ns: f64,
    /// The window arrivals are due in.
    window: Duration,
}

impl Schedule {
    /// `rate_per_s` arrivals a second through `window`.
    pub(super) fn new(rate_per_s: f64, window: Duration) -> Schedule {
        Schedule {
            interval_ns: 1e9 / rate_per_s,
            window,
        }
    }

    /// [`OVERLOAD`] times what `cores` serve of arrivals that each compute
    /// `cpu` (blocking uses no core), through `window`.
    pub(super) fn overloading(cores: usize, cpu: Duration, window: Duration) -> Schedule {
        Schedule::new(OVERLOAD * cores as f64 / cpu.as_secs_f64(), window)
    }

    /// The same rate, through the window that holds `arrivals` arrivals
    /// (`--items`).
    pub(super) fn with_arrivals(self, arrivals: usize) -> Schedule {
        let window_ns = arrivals as f64 * self.interval_ns;
        Schedule {
            window: Duration::from_nanos(window_ns.round() as u64),
            ..self
        }
    }

    /// Arrivals a second.
    pub(super) fn rate_per_s(&self) -> f64 {
        1e9 / self.interval_ns
    }

    /// The window arrivals are due in.
    pub(super) fn window(&self) -> Duration {
        self.window
    }

    /// How many arrivals are due in the window.
    pub(super) fn count(&self) -> usize {
        (self.window.as_nanos() as f64 / self.interval_ns).ceil() as usize
    }

    /// When arrival `i` is due, after the origin.
    pub(super) fn intended(&self, i: usize) -> Duration {
        Duration::from_nanos((i as f64 * self.interval_ns) as u64)
    }

    /// Which tenth of the window arrival `i` is due in, 0 to 9.
    pub(super) fn decile(&self, i: usize) -> usize {
        let window = self.window.as_nanos().max(1);
        let at = self.intended(i).as_nanos();
        usize::try_from(at * 10 / window).map_or(9, |d| d.min(9))
    }
}

/// Whether arrival `i` blocks after its computation: 3 in every 10
/// consecutive arrivals (0, 4 and 7 of each ten), spread out rather than
/// in a row, and the same arrivals in every run.
pub(super) fn blocks(i: usize) -> bool {
    (i % 10) * 3 % 10 < 3
}

/// The open loop: calls `submit(i)` for every arrival of `schedule`, each
/// at `origin` plus its intended time, on this thread. Absolute times, so
/// a late submission does not delay the ones after it; nothing waits for
/// an arrival to start or end. Returns the latest a submission came after
/// its intended time (the generator's own lateness, which the arrival's
/// start latency includes, as a client's would).
pub(super) fn generate(
    schedule: &Schedule,
    origin: Instant,
    mut submit: impl FnMut(usize),
) -> Duration {
    let mut latest = Duration::ZERO;
    for i in 0..schedule.count() {
        let due = origin + schedule.intended(i);
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        latest = latest.max(Instant::now().saturating_duration_since(due));
        submit(i);
    }
    latest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_and_a_half_times_what_the_cores_compute() {
        let s = Schedule::overloading(2, Duration::from_millis(1), Duration::from_secs(2));
        assert!((s.rate_per_s() - 3000.0).abs() < 1e-6);
        assert_eq!(s.count(), 6000);
        assert_eq!(s.intended(0), Duration::ZERO);
        assert_eq!(s.intended(3), Duration::from_millis(1));
        assert!(
            s.intended(s.count() - 1) < s.window(),
            "every arrival is due in the window"
        );
    }

    #[test]
    fn items_set_the_window_at_the_same_rate() {
        let s = Schedule::overloading(2, Duration::from_millis(1), Duration::from_secs(2))
            .with_arrivals(30_000);
        assert_eq!(s.count(), 30_000);
        assert_eq!(s.window(), Duration::from_secs(10));
        assert!((s.rate_per_s() - 3000.0).abs() < 1e-6);
    }

    #[test]
    fn the_window_splits_into_ten_equal_deciles_by_intended_arrival() {
        // 100 arrivals a second through 1 s: ten arrivals in each tenth.
        let s = Schedule::new(100.0, Duration::from_secs(1));
        assert_eq!(s.count(), 100);
        let mut per_decile = [0; 10];
        for i in 0..s.count() {
            per_decile[s.decile(i)] += 1;
        }
        assert_eq!(per_decile, [10; 10]);
        assert_eq!(s.decile(0), 0);
        assert_eq!(s.decile(9), 0, "due at 90 ms");
        assert_eq!(
            s.decile(10),
            1,
            "due at 100 ms, where the second tenth starts"
        );
        assert_eq!(s.decile(99), 9);
        // Past the window (not an arrival) still falls in the last decile.
        assert_eq!(s.decile(250), 9);
        // An uneven split: 7 arrivals through 1 s.
        let s = Schedule::new(7.0, Duration::from_secs(1));
        let deciles: Vec<usize> = (0..s.count()).map(|i| s.decile(i)).collect();
        assert_eq!(deciles, vec![0, 1, 2, 4, 5, 7, 8]);
    }

    #[test]
    fn three_in_ten_block_spread_out() {
        let blocking: Vec<usize> = (0..10).filter(|i| blocks(*i)).collect();
        assert_eq!(blocking, vec![0, 4, 7]);
        for start in [0, 10, 1230, 77_777] {
            assert_eq!((start..start + 10).filter(|i| blocks(*i)).count(), 3);
        }
    }

    #[test]
    fn the_generator_submits_every_arrival_in_order() {
        let s = Schedule::new(10_000.0, Duration::from_millis(5));
        let mut seen = Vec::new();
        let origin = Instant::now();
        generate(&s, origin, |i| seen.push(i));
        assert_eq!(seen, (0..50).collect::<Vec<_>>());
        assert!(origin.elapsed() >= s.intended(49), "none early");
    }
}

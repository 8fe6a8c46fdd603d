//! From what each arrival recorded to the experiment's figures: start
//! latency from the intended arrival, overall and per decile of the
//! arrival window, and the counts.

use std::time::Duration;

use super::arrivals::Schedule;
use crate::aggregate::Measured;
use crate::stats::Summary;

/// The metrics of each decile: p50, p99 and max start latency.
pub(super) const DECILE_METRICS: [[&str; 3]; 10] = [
    [
        "decile1_p50_start_ms",
        "decile1_p99_start_ms",
        "decile1_max_start_ms",
    ],
    [
        "decile2_p50_start_ms",
        "decile2_p99_start_ms",
        "decile2_max_start_ms",
    ],
    [
        "decile3_p50_start_ms",
        "decile3_p99_start_ms",
        "decile3_max_start_ms",
    ],
    [
        "decile4_p50_start_ms",
        "decile4_p99_start_ms",
        "decile4_max_start_ms",
    ],
    [
        "decile5_p50_start_ms",
        "decile5_p99_start_ms",
        "decile5_max_start_ms",
    ],
    [
        "decile6_p50_start_ms",
        "decile6_p99_start_ms",
        "decile6_max_start_ms",
    ],
    [
        "decile7_p50_start_ms",
        "decile7_p99_start_ms",
        "decile7_max_start_ms",
    ],
    [
        "decile8_p50_start_ms",
        "decile8_p99_start_ms",
        "decile8_max_start_ms",
    ],
    [
        "decile9_p50_start_ms",
        "decile9_p99_start_ms",
        "decile9_max_start_ms",
    ],
    [
        "decile10_p50_start_ms",
        "decile10_p99_start_ms",
        "decile10_max_start_ms",
    ],
];

/// The overall maximum: the headline.
pub(super) const MAX_START: &str = "max_start_ms";

/// What one run measured, summarised.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Figures {
    /// Every arrival's start latency.
    pub(super) overall: Summary,
    /// The start latencies of the arrivals due in each tenth of the window.
    pub(super) deciles: [Option<Summary>; 10],
    /// Arrivals whose work ended within the arrival window.
    pub(super) completed: usize,
    /// Arrivals that had not started when the measurement ended.
    pub(super) unstarted: usize,
    /// Start latency per arrival, in arrival order, ms.
    pub(super) latencies_ms: Vec<f64>,
}

/// Summarises a run: `started[i]` and `ended[i]` are when arrival `i`
/// started and ended after the origin (`None`: it never did), and the
/// measurement ended at `measured_until`. An arrival that had not started
/// by then counts with the wait it had so far (`measured_until` less its
/// intended arrival: a lower bound of its latency) and as `unstarted`.
/// `None` when there were no arrivals.
pub(super) fn summarise(
    schedule: &Schedule,
    measured_until: Duration,
    started: &[Option<Duration>],
    ended: &[Option<Duration>],
) -> Option<Figures> {
    let mut unstarted = 0;
    let mut by_decile: [Vec<f64>; 10] = Default::default();
    let latencies_ms: Vec<f64> = started
        .iter()
        .enumerate()
        .map(|(i, start)| {
            let start = match start {
                Some(s) if *s < measured_until => *s,
                _ => {
                    unstarted += 1;
                    measured_until
                }
            };
            let ms = start.saturating_sub(schedule.intended(i)).as_secs_f64() * 1e3;
            by_decile[schedule.decile(i)].push(ms);
            ms
        })
        .collect();
    let completed = ended
        .iter()
        .filter(|e| e.is_some_and(|e| e < schedule.window()))
        .count();
    Some(Figures {
        overall: Summary::of(&latencies_ms)?,
        deciles: by_decile.map(|d| Summary::of(&d)),
        completed,
        unstarted,
        latencies_ms,
    })
}

impl Figures {
    /// Puts the figures into `m`: `p50_start_ms`, `p99_start_ms`,
    /// `max_start_ms`, then per decile, then `completed` and `unstarted`.
    pub(super) fn put(&self, m: &mut Measured) {
        m.put("p50_start_ms", self.overall.p50);
        m.put("p99_start_ms", self.overall.p99);
        m.put(MAX_START, self.overall.max);
        for (names, decile) in DECILE_METRICS.iter().zip(&self.deciles) {
            if let Some(d) = decile {
                m.put(names[0], d.p50);
                m.put(names[1], d.p99);
                m.put(names[2], d.max);
            }
        }
        m.put("completed", self.completed as f64);
        m.put("unstarted", self.unstarted as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn each_decile_has_its_own_percentiles() {
        // 100 arrivals a second through 1 s, ten per decile; arrival i
        // starts i ms after it is due, so decile d's latencies are
        // 10d .. 10d + 9 ms.
        let s = Schedule::new(100.0, ms(1000));
        let started: Vec<Option<Duration>> = (0..100)
            .map(|i| Some(s.intended(i) + ms(i as u64)))
            .collect();
        let ended: Vec<Option<Duration>> = started.iter().map(|t| t.map(|t| t + ms(1))).collect();
        let f = summarise(&s, ms(2000), &started, &ended).unwrap();
        assert_eq!(f.unstarted, 0);
        // Nearest rank over 0..=99 ms: p50 is the 50th value, p99 the 99th.
        assert_eq!(f.overall.p50, 49.0);
        assert_eq!(f.overall.p99, 98.0);
        assert_eq!(f.overall.max, 99.0);
        let third = f.deciles[2].unwrap();
        assert_eq!(third.count, 10);
        // Of 20..=29: the 5th value and, for p99, the 10th.
        assert_eq!((third.p50, third.p99, third.max), (24.0, 29.0, 29.0));
        assert_eq!(f.deciles[9].unwrap().max, 99.0);
        assert_eq!(f.latencies_ms[7], 7.0);
        // Arrival i ends at 10i + i + 1 ms: before 1 s for i up to 90.
        assert_eq!(f.completed, 91);
    }

    #[test]
    fn an_arrival_not_started_when_the_measurement_ends_counts_its_wait_so_far() {
        // Ten arrivals, one per decile of 1 s, measured until 1.5 s.
        let s = Schedule::new(10.0, ms(1000));
        let mut started: Vec<Option<Duration>> = (0..10).map(|i| Some(s.intended(i))).collect();
        started[2] = None; // never started: waited 1500 - 200 ms
        started[5] = Some(ms(1700)); // started after the end: 1500 - 500 ms
        started[9] = Some(ms(1400)); // late, but within: 1400 - 900 ms
        let ended = vec![None; 10];
        let f = summarise(&s, ms(1500), &started, &ended).unwrap();
        assert_eq!(f.unstarted, 2);
        assert_eq!(f.latencies_ms[2], 1300.0);
        assert_eq!(f.latencies_ms[5], 1000.0);
        assert_eq!(f.latencies_ms[9], 500.0);
        assert_eq!(f.overall.max, 1300.0);
        assert_eq!(f.deciles[2].unwrap().max, 1300.0);
        assert_eq!(f.deciles[0].unwrap().max, 0.0);
        assert_eq!(f.completed, 0);
    }

    #[test]
    fn a_decile_without_arrivals_has_no_figures() {
        // Three arrivals through 1 s: due at 0, 333 and 667 ms.
        let s = Schedule::new(3.0, ms(1000));
        let started = vec![Some(ms(10)), Some(ms(400)), Some(ms(700))];
        let f = summarise(&s, ms(1000), &started, &[None, None, None]).unwrap();
        let present: Vec<usize> = (0..10).filter(|d| f.deciles[*d].is_some()).collect();
        assert_eq!(present, vec![0, 3, 6]);
        let mut m = Measured::default();
        f.put(&mut m);
        assert_eq!(m.get("decile4_max_start_ms").map(f64::round), Some(67.0));
        assert_eq!(m.get("decile2_max_start_ms"), None);
        assert_eq!(m.get(MAX_START), Some(f.overall.max));
        assert_eq!(m.get("unstarted"), Some(0.0));
        assert!(summarise(&s, ms(1000), &[], &[]).is_none());
    }
}

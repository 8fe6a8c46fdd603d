//! The `HillClimbing` controller's search: one step of the slot target
//! per window, kept while completions per second rise, turned around
//! otherwise; paused while blocked workers are being replaced. A pure
//! function of the tick's [`Sample`]; its tests below script samples and a
//! fake clock through the policy.

use super::policy::{Limits, Sample};
use std::time::Duration;

/// How long the hill climber measures completions per second before each
/// step: long enough to average over a few hundred short tasks or a few long
/// ones, short enough to react within a couple of seconds.
pub(super) const HILL_WINDOW: Duration = Duration::from_millis(250);

/// A step up must raise throughput by more than this share to be kept (and
/// a step down may lower it by up to this share).
const HILL_MARGIN: f64 = 0.05;

/// A window must see at least this many completions before its throughput
/// counts; until then it keeps growing. With long tasks (a CPU-bound job of a
/// second) a 250 ms window sees zero or one completion, and comparing such
/// windows is noise that walked the target up to twice the cores in the lab.
const HILL_MIN_COMPLETIONS: u64 = 20;

/// State of the hill-climbing search.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HillClimb {
    window_start: Duration,
    ended_at_start: u64,
    last_rate: Option<f64>,
    /// +1 or -1: the direction of the last move.
    direction: i64,
}

impl HillClimb {
    /// A search that starts moving up, its first window from time zero.
    pub(super) fn new() -> Self {
        HillClimb {
            window_start: Duration::ZERO,
            ended_at_start: 0,
            last_rate: None,
            direction: 1,
        }
    }

    /// One hill-climbing step per window: keep moving the target in the
    /// direction that raised completions per second, turn around otherwise.
    /// Paused (the window restarts) while blocking compensation is going on,
    /// so the two never fight over the same slots.
    pub(super) fn step(
        &mut self,
        limits: &Limits,
        sample: &Sample,
        compensating: bool,
    ) -> Option<usize> {
        if compensating || sample.blocked > 0 {
            self.restart(sample);
            return None;
        }
        let elapsed = sample.now.saturating_sub(self.window_start);
        if elapsed < HILL_WINDOW {
            return None;
        }
        let ended = sample.ended.saturating_sub(self.ended_at_start);
        if ended < HILL_MIN_COMPLETIONS && sample.queued > 0 {
            return None; // too few completions to compare yet: keep measuring
        }
        let rate = ended as f64 / elapsed.as_secs_f64();
        self.restart(sample);
        if sample.queued == 0 {
            // Nothing waits: throughput says nothing about the thread count.
            self.last_rate = None;
            return (sample.target > limits.concurrency).then(|| sample.target - 1);
        }
        if let Some(last) = self.last_rate {
            // Biased towards fewer threads: going up must pay for itself by
            // a clear margin, going down only must not cost much. Without the
            // bias, measurement noise walks the target up on CPU-bound work,
            // where extra threads only add switching.
            let keep_going = if self.direction > 0 {
                rate > last * (1.0 + HILL_MARGIN)
            } else {
                rate >= last * (1.0 - HILL_MARGIN)
            };
            if !keep_going {
                self.direction = -self.direction;
            }
        }
        self.last_rate = Some(rate);
        let next = (sample.target as i64 + self.direction)
            .clamp(limits.concurrency as i64, limits.max_threads as i64)
            as usize;
        (next != sample.target).then_some(next)
    }

    fn restart(&mut self, sample: &Sample) {
        self.window_start = sample.now;
        self.ended_at_start = sample.ended;
    }
}

#[cfg(all(test, not(tidepool_loom)))]
mod tests {
    use super::super::policy::tests::*;
    use super::super::policy::*;
    use super::super::Controller;
    use super::HILL_WINDOW;

    #[test]
    fn hill_climbing_does_not_climb_on_flat_throughput() {
        let mut policy = Policy::new(Controller::HillClimbing);
        let mut target = 2;
        let mut ended = 0;
        let mut most = 2;
        // CPU-bound: throughput is the same at every target, give or take 1%.
        for window in 1..=40u32 {
            ended += if window % 2 == 0 { 101 } else { 99 };
            let mut s = sample(vec![], 50);
            s.now = HILL_WINDOW * window;
            s.ended = ended;
            s.target = target;
            if let Some(new) = policy.decide(&limits(), &s).set_target {
                target = new;
            }
            most = most.max(target);
        }
        assert!(most <= 3, "wandered up to {most}");
    }

    #[test]
    fn hill_climbing_moves_towards_more_throughput_and_stays_in_bounds() {
        let mut policy = Policy::new(Controller::HillClimbing);
        let mut target = 2;
        let mut ended = 0;
        let mut seen = Vec::new();
        // Throughput grows with the target up to 3, then falls.
        for window in 1..=20u32 {
            ended += match target {
                2 => 100,
                3 => 150,
                _ => 120,
            };
            let mut s = sample(vec![], 50);
            s.now = HILL_WINDOW * window;
            s.ended = ended;
            s.target = target;
            if let Some(new) = policy.decide(&limits(), &s).set_target {
                assert!((2..=4).contains(&new));
                target = new;
            }
            seen.push(target);
        }
        assert!(
            seen.iter().filter(|&&t| t == 3).count() >= seen.len() / 3,
            "{seen:?}"
        );
    }

    #[test]
    fn hill_climbing_holds_still_on_long_tasks() {
        let mut policy = Policy::new(Controller::HillClimbing);
        let mut ended = 0;
        // One-second jobs: a completion every few windows, lumpy.
        for window in 1..=40u32 {
            if window % 3 == 0 {
                ended += 1;
            }
            let mut s = sample(vec![], 8);
            s.now = HILL_WINDOW * window;
            s.ended = ended;
            assert_eq!(
                policy.decide(&limits(), &s).set_target,
                None,
                "window {window}"
            );
        }
    }

    #[test]
    fn hill_climbing_pauses_while_compensating() {
        let mut policy = Policy::new(Controller::HillClimbing);
        let mut s = sample(vec![worker(0, 5, SLEEPING)], 50);
        s.now = HILL_WINDOW * 4;
        s.ended = 1000;
        let d = policy.decide(&limits(), &s);
        assert_eq!(d.mark_blocked.len(), 1);
        assert_eq!(d.set_target, None);
    }
}

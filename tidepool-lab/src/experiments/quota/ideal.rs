//! The slot-bound schedule: the best any pool of `slots` computing tasks
//! at a time can do, the yardstick of issue #41's figures.
//!
//! `n` items all start at once; each first waits `wait` (a sleep, which
//! uses no core, so all the waits overlap) and then computes `compute` of
//! CPU. With `slots` cores no more than `slots` items compute at a time,
//! and the waits all end at `wait`. Running the items `slots` at a time,
//! each to its end, finishes the `k`-th group (k = 1, 2, ...) at
//! `wait + k x compute`. No schedule has a lower mean completion time for
//! equal items on equal cores: sharing the cores among more items (time
//! slices) only delays the early ones, and none can start computing before
//! its wait ends. So, with `q = n / slots` (whole groups) and
//! `r = n % slots` (items of the last, partial group):
//!
//! ```text
//! sum of completions = n x wait + compute x (slots x q(q+1)/2 + r(q+1))
//! mean completion    = wait + compute x (slots x q(q+1)/2 + r(q+1)) / n
//! last completion    = wait + ceil(n / slots) x compute
//! ```
//!
//! For `n` a multiple of `slots` the mean is
//! `wait + compute x (n/slots + 1) / 2`: 155 ms for 16 items that wait
//! 20 ms and compute 30 ms on 2 slots.

use std::time::Duration;

/// The slot-bound schedule's mean completion time (see the module doc).
/// Zero for no items.
pub(crate) fn mean_completion(
    n: usize,
    slots: usize,
    wait: Duration,
    compute: Duration,
) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    let slots = slots.max(1) as f64;
    let n_f = n as f64;
    let q = (n_f / slots).floor();
    let r = n_f - q * slots;
    let groups = slots * q * (q + 1.0) / 2.0 + r * (q + 1.0);
    wait + compute.mul_f64(groups / n_f)
}

/// The slot-bound schedule's last completion (its wall time). Zero for no
/// items.
pub(crate) fn last_completion(
    n: usize,
    slots: usize,
    wait: Duration,
    compute: Duration,
) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    let groups = u32::try_from(n.div_ceil(slots.max(1))).unwrap_or(u32::MAX);
    wait + compute * groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn close(a: Duration, b: Duration) -> bool {
        a.abs_diff(b) < Duration::from_micros(1)
    }

    #[test]
    fn even_counts_follow_the_closed_form() {
        // wait + compute x (n/2 + 1) / 2 on 2 slots.
        for (n, want) in [(16, 155.0), (64, 515.0), (256, 1955.0), (2, 50.0)] {
            let got = mean_completion(n, 2, ms(20), ms(30));
            let want = Duration::from_secs_f64(want / 1e3);
            assert!(close(got, want), "{n}: {got:?} vs {want:?}");
        }
    }

    #[test]
    fn a_partial_last_group_counts_its_items_only() {
        // 3 items on 2 slots: done at 50, 50, 80 ms.
        assert!(close(mean_completion(3, 2, ms(20), ms(30)), ms(60)));
        assert_eq!(last_completion(3, 2, ms(20), ms(30)), ms(80));
        // 5 items on 3 slots, no wait: 10, 10, 10, 20, 20.
        assert!(close(mean_completion(5, 3, ms(0), ms(10)), ms(14)));
        // Fewer items than slots: all done after one compute.
        assert!(close(mean_completion(1, 2, ms(20), ms(30)), ms(50)));
    }

    #[test]
    fn the_last_completion_is_the_wall_time() {
        assert_eq!(last_completion(16, 2, ms(20), ms(30)), ms(260));
        assert_eq!(last_completion(300, 2, ms(0), ms(50)), ms(7500));
        assert_eq!(last_completion(0, 2, ms(20), ms(30)), Duration::ZERO);
        assert_eq!(mean_completion(0, 2, ms(20), ms(30)), Duration::ZERO);
    }

    #[test]
    fn the_mean_matches_a_simulation_of_the_schedule() {
        for slots in 1..=4 {
            for n in 1..=40 {
                let (wait, compute) = (ms(7), ms(11));
                let sum: Duration = (0..n)
                    .map(|i| wait + compute * u32::try_from(i / slots + 1).unwrap())
                    .sum();
                let want = sum / u32::try_from(n).unwrap();
                let got = mean_completion(n, slots, wait, compute);
                assert!(close(got, want), "{n} on {slots}: {got:?} vs {want:?}");
            }
        }
    }
}

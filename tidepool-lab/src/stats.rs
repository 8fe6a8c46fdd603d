//! Summary statistics over measured samples.
//!
//! Percentiles use the nearest-rank method on the sorted samples: the p-th
//! percentile is the smallest sample with at least p% of the samples at or
//! below it. It never interpolates, so every reported figure is a value that
//! was actually measured.

/// Mean, median, 99th percentile and maximum of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Number of samples.
    pub count: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median (nearest rank).
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Largest sample.
    pub max: f64,
}

impl Summary {
    /// Summarises `samples`; `None` when there are none or one is not a
    /// number.
    ///
    /// ```
    /// # use tidepool_lab::stats::Summary;
    /// let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
    /// assert_eq!((s.mean, s.p50, s.max), (2.0, 2.0, 3.0));
    /// ```
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mean = sorted.iter().sum::<f64>() / sorted.len() as f64;
        Some(Summary {
            count: sorted.len(),
            mean,
            p50: percentile_sorted(&sorted, 50.0),
            p99: percentile_sorted(&sorted, 99.0),
            max: sorted[sorted.len() - 1],
        })
    }
}

/// Nearest-rank percentile `p` (0 to 100) of samples sorted ascending.
///
/// # Panics
///
/// If `sorted` is empty.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    assert!(!sorted.is_empty(), "percentile of no samples");
    let p = p.clamp(0.0, 100.0);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `value / base`, or `None` when the ratio means nothing (a zero or
/// non-finite base).
pub fn ratio(value: f64, base: f64) -> Option<f64> {
    if base == 0.0 || !base.is_finite() || !value.is_finite() {
        None
    } else {
        Some(value / base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_nan_have_no_summary() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn single_sample() {
        let s = Summary::of(&[4.5]).unwrap();
        assert_eq!(s.count, 1);
        assert_eq!((s.mean, s.p50, s.p99, s.max), (4.5, 4.5, 4.5, 4.5));
    }

    #[test]
    fn nearest_rank_on_one_to_hundred() {
        let v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let s = Summary::of(&v).unwrap();
        assert_eq!(s.mean, 50.5);
        assert_eq!(s.p50, 50.0);
        assert_eq!(s.p99, 99.0);
        assert_eq!(s.max, 100.0);
    }

    #[test]
    fn percentiles_are_measured_values() {
        let v = [10.0, 20.0, 30.0, 40.0];
        let s = Summary::of(&v).unwrap();
        assert_eq!(s.p50, 20.0);
        assert_eq!(s.p99, 40.0);
        assert_eq!(percentile_sorted(&v, 0.0), 10.0);
        assert_eq!(percentile_sorted(&v, 25.0), 10.0);
        assert_eq!(percentile_sorted(&v, 26.0), 20.0);
        assert_eq!(percentile_sorted(&v, 100.0), 40.0);
    }

    #[test]
    fn one_outlier_moves_p99_only_with_enough_samples() {
        let mut v = vec![1.0; 1000];
        v[17] = 1000.0;
        let s = Summary::of(&v).unwrap();
        assert_eq!(s.p50, 1.0);
        assert_eq!(s.p99, 1.0);
        assert_eq!(s.max, 1000.0);
        assert!((s.mean - 1.999).abs() < 1e-9);
    }

    #[test]
    fn ratios() {
        assert_eq!(ratio(6.0, 2.0), Some(3.0));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
    }
}

//! Repetitions of a run combined into one result: per metric the median and
//! the spread (min and max) across repetitions.
//!
//! The median is the nearest-rank one ([`crate::stats::percentile_sorted`]
//! at 50%): with an even count it is the lower middle value, so every
//! reported figure is one that was actually measured. The plots draw the
//! repetition whose headline metric is that median.

use crate::stats::percentile_sorted;

/// What a finished run measured.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// Named figures, each name ending in its unit (`_ms`, `_s`, ...).
    pub metrics: Vec<(&'static str, f64)>,
    /// A sentence added to the run's description (counts that differ from
    /// the experiment's, for example).
    pub note: Option<String>,
    /// Per-item values for the plots (latency, duration, ...), in item order.
    pub per_item: Vec<f64>,
    /// Threads over time: (seconds, threads), and where they come from.
    pub threads: Option<(String, Vec<(f64, f64)>)>,
}

impl Measured {
    /// Adds a metric.
    pub fn put(&mut self, name: &'static str, value: f64) {
        self.metrics.push((name, value));
    }

    /// A metric's value.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }
}

/// The lowest and highest value of one metric across repetitions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Metric name.
    pub name: &'static str,
    /// Lowest value.
    pub min: f64,
    /// Highest value.
    pub max: f64,
}

/// Combines the repetitions of one run: the result's metrics are the
/// medians (in the order the repetitions report them), its per-item and
/// thread series those of the median repetition by `headline`. `None` when
/// there are no repetitions.
pub fn combine(reps: Vec<Measured>, headline: &str) -> Option<(Measured, Vec<Spread>)> {
    let mut names: Vec<&'static str> = Vec::new();
    for m in &reps {
        for (n, _) in &m.metrics {
            if !names.contains(n) {
                names.push(n);
            }
        }
    }
    let mut medians = Vec::new();
    let mut spread = Vec::new();
    for name in names {
        let mut values: Vec<f64> = reps
            .iter()
            .filter_map(|m| m.get(name))
            .filter(|v| !v.is_nan())
            .collect();
        if values.is_empty() {
            continue;
        }
        values.sort_by(f64::total_cmp);
        medians.push((name, percentile_sorted(&values, 50.0)));
        spread.push(Spread {
            name,
            min: values[0],
            max: values[values.len() - 1],
        });
    }
    let median_headline = medians.iter().find(|(n, _)| *n == headline).map(|m| m.1);
    let pick = reps
        .iter()
        .position(|m| m.get(headline) == median_headline && median_headline.is_some())
        .unwrap_or(0);
    let mut combined = reps.into_iter().nth(pick)?;
    combined.metrics = medians;
    Some((combined, spread))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rep(ms: f64, items: f64) -> Measured {
        let mut m = Measured::default();
        m.put("wall_ms", ms);
        m.put("items", items);
        m.per_item = vec![ms];
        m
    }

    #[test]
    fn medians_spreads_and_the_median_repetition() {
        let (m, s) = combine(
            vec![rep(30.0, 5.0), rep(10.0, 5.0), rep(20.0, 5.0)],
            "wall_ms",
        )
        .unwrap();
        assert_eq!(m.metrics, vec![("wall_ms", 20.0), ("items", 5.0)]);
        assert_eq!(m.per_item, vec![20.0], "series of the median repetition");
        assert_eq!(
            s[0],
            Spread {
                name: "wall_ms",
                min: 10.0,
                max: 30.0
            }
        );
        assert_eq!((s[1].min, s[1].max), (5.0, 5.0));
    }

    #[test]
    fn even_counts_take_the_lower_middle() {
        let (m, _) = combine(vec![rep(4.0, 1.0), rep(1.0, 1.0)], "wall_ms").unwrap();
        assert_eq!(m.get("wall_ms"), Some(1.0));
        assert!(combine(Vec::new(), "wall_ms").is_none());
    }
}

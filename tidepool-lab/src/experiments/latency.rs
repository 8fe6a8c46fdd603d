//! What the start-latency experiments (`burst`, `mixed`, `short-blocking`)
//! share: tidepool's own figures at the end of a run, a threads-over-time
//! plot, and item durations spread evenly over a range.

use std::time::Duration;

use super::done;
use super::paced::{finish_system, SelfReport};
use crate::aggregate::Measured;
use crate::model::plot::{Plot, Series};
use crate::model::RunResult;
use crate::systems::System;

/// Finishes `sys` like [`finish_system`], and for a tidepool pool also
/// reports its running slots (`concurrency`) and the time its monitor
/// thread spent working (`monitor_busy_ms`).
pub(crate) fn finish(sys: System) -> SelfReport {
    let own = match &sys {
        System::Tidepool(p) | System::TidepoolAsync(p) => {
            Some((p.concurrency(), p.metrics().monitor_busy))
        }
        _ => None,
    };
    let mut report = finish_system(sys);
    if let Some((concurrency, busy)) = own {
        report.extra.push(("concurrency", concurrency as f64));
        report
            .extra
            .push(("monitor_busy_ms", busy.as_secs_f64() * 1e3));
    }
    report
}

/// Renames metric `from` to `to`, multiplying its value by `factor`
/// (`wall_s` into `wall_ms`, for one).
pub(crate) fn rename(m: &mut Measured, from: &str, to: &'static str, factor: f64) {
    for (name, value) in &mut m.metrics {
        if *name == from {
            *name = to;
            *value *= factor;
        }
    }
}

/// A duration between `lo` and `hi` for item `i`: the same for the same
/// item in every run, spread evenly over the range across items (a
/// SplitMix64 hash of the index, so no generator state is shared).
pub(crate) fn spread(i: usize, lo: Duration, hi: Duration) -> Duration {
    let mut z = (i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let span = u64::try_from(hi.saturating_sub(lo).as_micros()).unwrap_or(u64::MAX);
    lo + Duration::from_micros(z % span.saturating_add(1))
}

/// Threads over time of the finished runs among `ids` that recorded a
/// series, or `None`; the y label names where the counts come from (the
/// pool's own series, or the process's threads sampled from `/proc`).
pub(crate) fn threads_plot(
    runs: &[RunResult],
    ids: &[&str],
    key: &str,
    titles: (&str, &str),
) -> Option<Plot> {
    let mut sources: Vec<&str> = Vec::new();
    let mut series = Vec::new();
    for id in ids {
        let Some(r) = done(runs).find(|r| r.spec.id == *id) else {
            continue;
        };
        if let Some((source, pts)) = &r.measured.threads {
            if !sources.contains(&source.as_str()) {
                sources.push(source);
            }
            series.push(Series::new(r.spec.id, pts.clone()));
        }
    }
    (!series.is_empty()).then(|| {
        Plot::line(
            key,
            titles,
            "seconds since the system was built",
            &format!("threads ({})", sources.join("; ")),
            series,
            false,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_stays_in_range_and_covers_it() {
        let (lo, hi) = (Duration::from_millis(2), Duration::from_millis(5));
        let d: Vec<Duration> = (0..2000).map(|i| spread(i, lo, hi)).collect();
        assert!(d.iter().all(|v| *v >= lo && *v <= hi));
        assert_eq!(spread(7, lo, hi), spread(7, lo, hi));
        let mean = d.iter().map(Duration::as_secs_f64).sum::<f64>() / d.len() as f64;
        assert!((mean - 0.0035).abs() < 0.0002, "mean {mean}");
        assert_eq!(spread(3, lo, lo), lo);
    }

    #[test]
    fn rename_scales() {
        let mut m = Measured::default();
        m.put("wall_s", 1.5);
        rename(&mut m, "wall_s", "wall_ms", 1e3);
        assert_eq!(m.get("wall_ms"), Some(1500.0));
        assert_eq!(m.get("wall_s"), None);
    }
}

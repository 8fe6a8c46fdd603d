//! What the start-latency experiments (`burst`, `mixed`, `short-blocking`)
//! share: tidepool's own figures at the end of a run and a threads-over-time
//! plot.

use super::paced::{finish_system, SelfReport};
use super::{done, Measured, RunResult};
use crate::report::plot::{Plot, Series};
use crate::systems::System;

/// Finishes `sys` like [`finish_system`], and for a tidepool pool also
/// reports its running slots (`concurrency`) and the time its monitor
/// thread spent working (`monitor_busy_ms`).
pub(crate) fn finish(sys: System) -> SelfReport {
    let own = match &sys {
        System::Tidepool(p) => Some((p.concurrency(), p.metrics().monitor_busy)),
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
    fn rename_scales() {
        let mut m = Measured::default();
        m.put("wall_s", 1.5);
        rename(&mut m, "wall_s", "wall_ms", 1e3);
        assert_eq!(m.get("wall_ms"), Some(1500.0));
        assert_eq!(m.get("wall_s"), None);
    }
}

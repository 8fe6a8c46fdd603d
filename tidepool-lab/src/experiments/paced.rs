//! The measuring harness shared by `waiting` and `web-service`: items are
//! submitted at a steady rate, each records when it starts and ends, and the
//! run reports start latency, wall time and threads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tidepool::Pool;

use super::{sampled_threads, settle, thread_baseline};
use crate::aggregate::Measured;
use crate::measure::{paced, Latch, Timeline};
use crate::model::RunCtx;
use crate::probe::{self, ThreadSampler};
use crate::stats::Summary;
use crate::systems::System;

/// How often the thread sampler looks at the process.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// How often it looks when it also reads which threads are runnable.
const SAMPLE_RUNNABLE_EVERY: Duration = Duration::from_millis(10);

/// Recording handle given to one item.
#[derive(Debug, Clone)]
pub(crate) struct ItemProbe {
    timeline: Arc<Timeline>,
    latch: Arc<Latch>,
    index: usize,
}

impl ItemProbe {
    /// The item's index.
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// The item starts now (call first thing).
    pub(crate) fn start(&self) {
        self.timeline.start(self.index);
    }

    /// The item is done.
    pub(crate) fn end(self) {
        self.timeline.end(self.index);
        self.latch.count_down();
    }
}

/// What a system tells about itself when the run is over.
#[derive(Debug, Default)]
pub(crate) struct SelfReport {
    /// Peak threads by the system's own count.
    pub(crate) peak_threads: Option<usize>,
    /// The system's own thread series: (seconds, threads), and its label.
    pub(crate) series: Option<(String, Vec<(f64, f64)>)>,
    /// Counters only this system keeps (tidepool's blocking detections).
    pub(crate) extra: Vec<(&'static str, f64)>,
}

/// Reads what a tidepool pool knows about its threads. An empty
/// `thread_series` (a pool that records none) leaves the plot to the
/// `/proc` sampler.
pub(crate) fn tidepool_report(pool: &Pool) -> SelfReport {
    let m = pool.metrics();
    let series = (!m.thread_series.is_empty()).then(|| {
        let v = m
            .thread_series
            .iter()
            .map(|p| (p.at.as_secs_f64(), (p.running + p.blocked + p.idle) as f64))
            .collect();
        ("pool metrics".to_string(), v)
    });
    SelfReport {
        peak_threads: Some(m.peak_threads),
        series,
        extra: vec![
            ("blocked_detections", m.blocked_detections as f64),
            ("presumed_blocking", m.presumed_blocking as f64),
            ("presumptions_failed", m.presumptions_failed as f64),
        ],
    }
}

/// Finishes a [`System`] and returns its self-report.
pub(crate) fn finish_system(sys: System) -> SelfReport {
    let report = match &sys {
        System::Tidepool(p) | System::TidepoolAsync(p) => tidepool_report(p),
        _ => SelfReport::default(),
    };
    sys.finish();
    report
}

/// Shape of a paced run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pace {
    /// Items to submit.
    pub(crate) items: usize,
    /// Time between submissions.
    pub(crate) interval: Duration,
    /// Give up waiting for the items after this long.
    pub(crate) limit: Duration,
}

/// Builds the system with `make`, submits `pace.items` items with `submit`
/// at the given rate, waits for them, and tears the system down with
/// `finish`. Returns the start-latency figures, wall time and peak threads
/// (the system's own count when it keeps one, else sampled from `/proc`),
/// and per-item start latencies for the plots.
pub(crate) fn measure<S>(
    ctx: &RunCtx,
    pace: Pace,
    make: impl FnOnce() -> Result<S, String>,
    submit: impl FnMut(&S, ItemProbe),
    finish: impl FnOnce(S) -> SelfReport,
) -> Result<Measured, String> {
    measure_sampled(ctx, pace, false, make, submit, finish)
}

/// [`measure`], and with `runnable` also `peak_running`: the most threads
/// runnable (state `R`) in two consecutive samples, 10 ms apart (reading
/// every thread's state costs more than counting them, hence the longer
/// interval); and `peak_running_workers`, the same without tidepool's
/// monitor thread, which wakes every millisecond and so is often found
/// runnable, waiting for a core, when the workers keep every core busy.
pub(crate) fn measure_sampled<S>(
    ctx: &RunCtx,
    pace: Pace,
    runnable: bool,
    make: impl FnOnce() -> Result<S, String>,
    mut submit: impl FnMut(&S, ItemProbe),
    finish: impl FnOnce(S) -> SelfReport,
) -> Result<Measured, String> {
    let timeline = Arc::new(Timeline::new(pace.items));
    let latch = Arc::new(Latch::new(pace.items));
    let _follow = ctx.follow(&latch);
    let baseline = thread_baseline();
    let every = if runnable {
        SAMPLE_RUNNABLE_EVERY
    } else {
        SAMPLE_EVERY
    };
    let sampler = ThreadSampler::start(every, baseline, runnable);
    let system = match make() {
        Ok(s) => s,
        Err(e) => {
            sampler.finish();
            return Err(e);
        }
    };

    let created = Instant::now();
    ctx.bar.phase("submitting");
    let began = Instant::now();
    paced(pace.items, pace.interval, |i| {
        let probe = ItemProbe {
            timeline: timeline.clone(),
            latch: latch.clone(),
            index: i,
        };
        timeline.submit(i);
        submit(&system, probe);
    });
    ctx.bar.phase("waiting for the last items");
    let all_done = latch.wait_timeout(pace.limit);
    let wall = began.elapsed();
    ctx.bar.phase("shutting down");
    let lifetime = created.elapsed().as_secs_f64();
    // tidepool's monitor (`<name>-monitor`) is no worker: peak_running_workers
    // leaves it out.
    let monitors = if runnable {
        probe::thread_ids_named(is_monitor_name)
    } else {
        Vec::new()
    };
    let report = finish(system);
    let observed = sampler.finish();
    settle(baseline);

    if !all_done {
        return Err(format!(
            "only {} of {} items finished within {:.0} s",
            latch.finished(),
            pace.items,
            pace.limit.as_secs_f64()
        ));
    }
    let lat = timeline.start_latencies_ms();
    let s = Summary::of(&lat).ok_or("no item recorded its start")?;
    let mut m = Measured::default();
    m.put("items", pace.items as f64);
    m.put("mean_start_ms", s.mean);
    m.put("p50_start_ms", s.p50);
    m.put("p99_start_ms", s.p99);
    m.put("max_start_ms", s.max);
    m.put("wall_s", wall.as_secs_f64());
    if pace.interval.is_zero() {
        // A burst: also when items started counted from when the burst was
        // asked for, and how long handing it over took the submitter.
        if let Some(since) = Summary::of(&timeline.starts_since_first_submit_ms()) {
            m.put("p50_start_since_burst_ms", since.p50);
            m.put("max_start_since_burst_ms", since.max);
        }
        if let Some(submitting) = timeline.submitting_ms() {
            m.put("submit_ms", submitting);
        }
    }
    let peak = report
        .peak_threads
        .unwrap_or_else(|| probe::peak_threads(&observed));
    m.put("peak_threads", peak as f64);
    if let Some(p) = probe::sustained_peak_runnable(&observed) {
        m.put("peak_running", p as f64);
        let workers = probe::without_threads(&observed, &monitors);
        if let Some(w) = probe::sustained_peak_runnable(&workers) {
            m.put("peak_running_workers", w as f64);
        }
    }
    for (name, v) in report.extra {
        m.put(name, v);
    }
    m.per_item = lat;
    m.threads = Some(match report.series {
        Some((label, pts)) => (label, steps(&pts, lifetime)),
        None => ("sampled from /proc".to_string(), sampled_threads(&observed)),
    });
    Ok(m)
}

/// Whether a thread name (`comm`, cut at 15 bytes by the kernel) is that
/// of a tidepool monitor, `<name>-monitor`: the default one shows as
/// `tidepool-monito`.
fn is_monitor_name(comm: &str) -> bool {
    const SUFFIX: &str = "-monitor";
    comm.ends_with(SUFFIX)
        || (comm.len() == 15 && (2..SUFFIX.len()).any(|k| comm.ends_with(&SUFFIX[..k])))
}

/// Turns change points into a step line (each value holds until the next
/// change) that runs on to `until` seconds.
pub(crate) fn steps(points: &[(f64, f64)], until: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2 + 1);
    for (i, &(t, v)) in points.iter().enumerate() {
        if i > 0 {
            out.push((t, points[i - 1].1));
        }
        out.push((t, v));
    }
    if let Some(&(t, v)) = points.last() {
        if until > t {
            out.push((until, v));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{is_monitor_name, steps};

    #[test]
    fn monitor_names_even_when_cut() {
        assert!(is_monitor_name("tidepool-monito"));
        assert!(is_monitor_name("io-monitor"));
        assert!(!is_monitor_name("tidepool-0"));
        assert!(!is_monitor_name("tidepool-lab"));
    }

    #[test]
    fn steps_hold_values() {
        let s = steps(&[(0.0, 1.0), (1.0, 3.0)], 2.0);
        assert_eq!(s, vec![(0.0, 1.0), (1.0, 1.0), (1.0, 3.0), (2.0, 3.0)]);
        assert!(steps(&[], 1.0).is_empty());
    }
}

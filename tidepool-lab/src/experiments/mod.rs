//! The experiments: what each one shows, its runs, and how a run is
//! measured. One file per experiment; this module holds what they share.
//! What an experiment and a run are is the lab's vocabulary, in
//! [`crate::model`].

use std::time::Duration;

use clap::ValueEnum;

use crate::model::plot::{Plot, Series};
use crate::model::{Experiment, Outcome, RunResult};
use crate::probe::{self, ThreadObservation};

pub mod async_io;
pub mod burst;
pub mod cpu_bound;
pub mod fetch_process;
pub mod flood;
pub mod fork_join;
pub mod fresh_process;
mod latency;
pub mod learned_then_computes;
pub mod lock_convoy;
pub mod mixed;
pub mod mixed_kind;
pub mod overload;
mod paced;
mod quota;
pub mod service;
pub mod short_blocking;
#[cfg(test)]
pub(crate) mod testing;
pub mod thread_count;
pub mod thread_per_task;
pub mod waiting;
pub mod web_service;

/// The experiments, in the order they run by default. Each is described
/// in its [`Experiment`]: the command line's help shows its `summary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum ExperimentKind {
    /// [`waiting::EXPERIMENT`].
    #[value(help = waiting::EXPERIMENT.summary)]
    Waiting,
    /// [`thread_per_task::EXPERIMENT`].
    #[value(help = thread_per_task::EXPERIMENT.summary)]
    ThreadPerTask,
    /// [`flood::EXPERIMENT`].
    #[value(help = flood::EXPERIMENT.summary)]
    Flood,
    /// [`thread_count::EXPERIMENT`].
    #[value(help = thread_count::EXPERIMENT.summary)]
    ThreadCount,
    /// [`cpu_bound::EXPERIMENT`].
    #[value(help = cpu_bound::EXPERIMENT.summary)]
    CpuBound,
    /// [`web_service::EXPERIMENT`].
    #[value(help = web_service::EXPERIMENT.summary)]
    WebService,
    /// [`fork_join::EXPERIMENT`].
    #[value(help = fork_join::EXPERIMENT.summary)]
    ForkJoin,
    /// [`burst::EXPERIMENT`].
    #[value(help = burst::EXPERIMENT.summary)]
    Burst,
    /// [`mixed::EXPERIMENT`].
    #[value(help = mixed::EXPERIMENT.summary)]
    Mixed,
    /// [`short_blocking::EXPERIMENT`].
    #[value(help = short_blocking::EXPERIMENT.summary)]
    ShortBlocking,
    /// [`async_io::EXPERIMENT`].
    #[value(help = async_io::EXPERIMENT.summary)]
    AsyncIo,
    /// [`service::EXPERIMENT`].
    #[value(help = service::EXPERIMENT.summary)]
    Service,
    /// [`overload::EXPERIMENT`].
    #[value(help = overload::EXPERIMENT.summary)]
    Overload,
    /// [`fetch_process::EXPERIMENT`].
    #[value(help = fetch_process::EXPERIMENT.summary)]
    FetchProcess,
    /// [`learned_then_computes::EXPERIMENT`].
    #[value(help = learned_then_computes::EXPERIMENT.summary)]
    LearnedThenComputes,
    /// [`lock_convoy::EXPERIMENT`].
    #[value(help = lock_convoy::EXPERIMENT.summary)]
    LockConvoy,
    /// [`mixed_kind::EXPERIMENT`].
    #[value(help = mixed_kind::EXPERIMENT.summary)]
    MixedKind,
}

impl ExperimentKind {
    /// The experiment's description.
    pub fn experiment(self) -> &'static Experiment {
        match self {
            ExperimentKind::Waiting => &waiting::EXPERIMENT,
            ExperimentKind::ThreadPerTask => &thread_per_task::EXPERIMENT,
            ExperimentKind::Flood => &flood::EXPERIMENT,
            ExperimentKind::ThreadCount => &thread_count::EXPERIMENT,
            ExperimentKind::CpuBound => &cpu_bound::EXPERIMENT,
            ExperimentKind::WebService => &web_service::EXPERIMENT,
            ExperimentKind::ForkJoin => &fork_join::EXPERIMENT,
            ExperimentKind::Burst => &burst::EXPERIMENT,
            ExperimentKind::Mixed => &mixed::EXPERIMENT,
            ExperimentKind::ShortBlocking => &short_blocking::EXPERIMENT,
            ExperimentKind::AsyncIo => &async_io::EXPERIMENT,
            ExperimentKind::Service => &service::EXPERIMENT,
            ExperimentKind::Overload => &overload::EXPERIMENT,
            ExperimentKind::FetchProcess => &fetch_process::EXPERIMENT,
            ExperimentKind::LearnedThenComputes => &learned_then_computes::EXPERIMENT,
            ExperimentKind::LockConvoy => &lock_convoy::EXPERIMENT,
            ExperimentKind::MixedKind => &mixed_kind::EXPERIMENT,
        }
    }

    /// The experiment's name on the command line and in the results.
    pub fn name(self) -> &'static str {
        self.experiment().name
    }
}

/// The process's thread count now, for a sampler's baseline.
pub(crate) fn thread_baseline() -> usize {
    probe::thread_count().unwrap_or(0)
}

/// After a system is torn down, waits for its threads to be gone (up to a
/// few seconds), so the next run starts from the same baseline.
pub(crate) fn settle(baseline: usize) {
    probe::wait_for_threads_at_most(baseline, Duration::from_secs(5));
}

/// Starts the thread tidepool keeps for the whole process, its reactor's
/// (it serves every pool's timers and sockets and outlives them), by
/// building and dropping a pool, before any run takes its baseline.
/// Otherwise the first tidepool run starts it, and that run's `settle`
/// waits its full five seconds for a thread that never goes (every lab
/// process's first tidepool run "took 5.2 s" of which 5 were that wait).
/// A build does not mark the reactor used, so the runs' pools behave as
/// they would have.
pub fn start_process_wide_threads() {
    let before = thread_baseline();
    if let Ok(pool) = tidepool::Pool::builder().concurrency(1).build() {
        drop(pool);
    }
    // The pool's worker and monitor go; the reactor's thread stays.
    probe::wait_for_threads_at_most(before + 1, Duration::from_secs(5));
}

/// Converts sampler observations into a plottable thread series.
pub(crate) fn sampled_threads(obs: &[ThreadObservation]) -> Vec<(f64, f64)> {
    obs.iter().map(|o| (o.at_s, o.threads as f64)).collect()
}

/// Latency-by-item series for a plot: item index against value.
pub(crate) fn by_index(values: &[f64]) -> Vec<(f64, f64)> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| (i as f64, *v))
        .collect()
}

/// A line plot of the per-item values of the finished runs among `ids`
/// (in that order), by item index, or `None` if none of them finished.
/// `log_y` draws the values on a log scale.
pub(crate) fn per_item_plot(
    runs: &[RunResult],
    ids: &[&str],
    key: &str,
    titles: (&str, &str),
    x_label: &str,
    y_label: &str,
    log_y: bool,
) -> Option<Plot> {
    let series: Vec<Series> = ids
        .iter()
        .filter_map(|id| done(runs).find(|r| r.spec.id == *id))
        .map(|r| Series::new(r.spec.id, by_index(&r.measured.per_item)))
        .collect();
    (!series.is_empty()).then(|| Plot::line(key, titles, x_label, y_label, series, log_y))
}

/// The finished runs with their per-item series, for plots.
pub(crate) fn done(runs: &[RunResult]) -> impl Iterator<Item = &RunResult> {
    runs.iter().filter(|r| r.outcome == Outcome::Done)
}

/// A bar per finished run, of one metric.
pub(crate) fn metric_bars(runs: &[RunResult], metric: &str) -> Vec<(String, f64)> {
    done(runs)
        .filter_map(|r| r.measured.get(metric).map(|v| (r.spec.id.to_string(), v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Scale;

    #[test]
    fn every_experiment_is_well_formed() {
        for kind in ExperimentKind::value_variants() {
            let e = kind.experiment();
            assert_eq!(
                Some(e.name),
                kind.to_possible_value().as_ref().map(|v| v.get_name()),
                "the command line and the results use one name"
            );
            assert!(
                !e.summary.is_empty() && !e.summary.contains('\n'),
                "{}: a one-line summary",
                e.name
            );
            assert_eq!(
                kind.to_possible_value()
                    .and_then(|v| v.get_help().map(ToString::to_string)),
                Some(e.summary.to_string()),
                "{}: the command line's help is the summary",
                e.name
            );
            let ids = e.run_ids();
            let mut unique = ids.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), ids.len(), "{}: duplicate run id", e.name);
            for base in e.all_baselines() {
                assert!(
                    e.run(base).is_some(),
                    "{}: baseline {base} is a run",
                    e.name
                );
            }
            for (run, base) in e.baselines {
                assert!(e.run(run).is_some(), "{}: {run} is a run", e.name);
                assert_eq!(
                    e.baseline_of(base),
                    *base,
                    "{}: {base} is its own baseline",
                    e.name
                );
            }
            for (base, metric) in e.headlines {
                assert!(
                    e.all_baselines().contains(base),
                    "{}: {base}, measured by {metric}, is a workload's baseline",
                    e.name
                );
                assert_eq!(e.headline_of(base), *metric, "{}", e.name);
            }
            for id in e.opt_in {
                assert!(e.run(id).is_some(), "{}: opt-in {id} is a run", e.name);
            }
            for id in e.full_only {
                assert!(e.run(id).is_some(), "{}: full-only {id} is a run", e.name);
                assert!(
                    !e.all_baselines().contains(id),
                    "{}: the default run keeps the baseline {id}",
                    e.name
                );
            }
            assert!(
                !e.opt_in.contains(&e.baseline),
                "{}: the baseline runs by default",
                e.name
            );
            for scale in [Scale::Full, Scale::Quick, Scale::Tiny] {
                assert!(!(e.scale)(scale).is_empty());
            }
        }
    }
}

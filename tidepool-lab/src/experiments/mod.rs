//! The experiments: what each one shows, its runs, and how a run is
//! measured. One file per experiment; this module holds what they share.

use std::sync::Arc;
use std::time::Duration;

use clap::ValueEnum;

pub use crate::aggregate::Measured;
use crate::aggregate::Spread;
use crate::measure::Latch;
use crate::probe::{self, ThreadObservation};
use crate::progress::RunBar;
use crate::report::plot::{Plot, Series};

pub mod async_io;
pub mod burst;
pub mod cpu_bound;
pub mod flood;
pub mod fork_join;
mod latency;
pub mod mixed;
mod paced;
pub mod service;
pub mod short_blocking;
pub mod thread_count;
pub mod thread_per_task;
pub mod waiting;
pub mod web_service;

/// The experiments, in the order they run by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum ExperimentKind {
    /// Work items that wait 500 ms each, arriving every 10 ms.
    Waiting,
    /// A million tiny tasks: a thread each versus a pool.
    ThreadPerTask,
    /// An urgent item queued behind a flood of CPU-bound items.
    Flood,
    /// Tiny items on 2, 25 and 200 threads.
    ThreadCount,
    /// Ten CPU-bound jobs of about a second on a two-core machine.
    CpuBound,
    /// A real HTTP server that answers after 500 ms, called from the pool.
    WebService,
    /// Recursive divide and conquer: tidepool's join and scope beside rayon::join.
    ForkJoin,
    /// 500 items submitted at once: blocking ones, then CPU-bound ones.
    Burst,
    /// Blocking items arriving while CPU-bound tasks hold every slot.
    Mixed,
    /// Items that block 2-5 ms, arriving faster than the cores serve them.
    ShortBlocking,
    /// An echo server and 1,000 clients over loopback sockets.
    AsyncIo,
    /// An axum service (a database call, CPU, an outbound call) under load,
    /// each system in a server process of its own.
    Service,
}

/// How big the runs are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// The counts of the issue (about ten minutes in all on two cores).
    Full,
    /// Smaller counts and shorter waits: about two minutes in all.
    Quick,
    /// Tiny counts, for the lab's own tests (seconds).
    Tiny,
}

impl Scale {
    /// Picks the value for this scale.
    pub fn pick<T>(self, full: T, quick: T, tiny: T) -> T {
        match self {
            Scale::Full => full,
            Scale::Quick => quick,
            Scale::Tiny => tiny,
        }
    }

    /// The scale's name in the results.
    pub fn name(self) -> &'static str {
        self.pick("full", "quick", "tiny")
    }
}

/// One run of an experiment: a system and a configuration, and the
/// function that carries it out. A run is described here and nowhere else.
#[derive(Clone, Copy)]
pub struct RunSpec {
    /// Stable id (`--only` takes it; results.json carries it).
    pub id: &'static str,
    /// The system under test.
    pub system: &'static str,
    /// What the run does, in one sentence.
    pub description: &'static str,
    /// Carries the run out once.
    pub execute: fn(&RunCtx) -> Result<Measured, String>,
}

impl std::fmt::Debug for RunSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSpec")
            .field("id", &self.id)
            .field("system", &self.system)
            .finish_non_exhaustive()
    }
}

/// Counts and durations of an experiment at each [`Scale`], in one table.
#[derive(Debug, Clone, Copy)]
pub struct ScaleTable<P> {
    /// The counts of the issue.
    pub full: P,
    /// `--quick`.
    pub quick: P,
    /// `--tiny` (the lab's own tests).
    pub tiny: P,
}

impl<P: Copy> ScaleTable<P> {
    /// The entry for `scale`.
    pub fn at(&self, scale: Scale) -> P {
        scale.pick(self.full, self.quick, self.tiny)
    }
}

/// An experiment, described once: what it shows, how big it is, which run
/// the others are compared with, its runs and its plots.
#[derive(Debug)]
pub struct Experiment {
    /// Name on the command line and in the results.
    pub name: &'static str,
    /// What the experiment shows, in two or three sentences.
    pub about: &'static str,
    /// The question its summary line answers.
    pub question: &'static str,
    /// The summary's answer and verdict, computed from the results; `None`
    /// when a run it needs did not finish.
    pub verdict: fn(&ExperimentResult) -> Option<String>,
    /// Its counts and durations at a scale, in words.
    pub scale: fn(Scale) -> String,
    /// The metric the ratio column divides (lower is better for all of them).
    pub headline: &'static str,
    /// The run the ratio column compares every run with: tidepool's default
    /// in most experiments.
    pub baseline: &'static str,
    /// Runs compared with another run than `baseline`, as (run, its
    /// baseline): an experiment with several workloads compares each run
    /// with the baseline of its own workload. Empty for one workload.
    pub baselines: &'static [(&'static str, &'static str)],
    /// Its runs, in the order they run.
    pub runs: &'static [RunSpec],
    /// Its plots, from its results.
    pub plots: fn(&[RunResult]) -> Vec<Plot>,
    /// Repetitions of every run in a default full-scale lab: several for
    /// the short experiments, one for those that take minutes.
    pub default_repeat: usize,
    /// Whether each round of repetitions starts one run later than the
    /// round before (A B C, then B C A, then C A B), so that no run always
    /// comes first or last in a round.
    pub rotate: bool,
}

impl Experiment {
    /// The run with this id.
    pub fn run(&self, id: &str) -> Option<&'static RunSpec> {
        self.runs.iter().find(|r| r.id == id)
    }

    /// The run ids, in order.
    pub fn run_ids(&self) -> Vec<&'static str> {
        self.runs.iter().map(|r| r.id).collect()
    }

    /// The run whose headline figure run `id`'s ratio divides by.
    pub fn baseline_of(&self, id: &str) -> &'static str {
        self.baselines
            .iter()
            .find(|(run, _)| *run == id)
            .map_or(self.baseline, |(_, base)| base)
    }

    /// Every baseline run, `baseline` first, each once.
    pub fn all_baselines(&self) -> Vec<&'static str> {
        let mut all = vec![self.baseline];
        for (_, base) in self.baselines {
            if !all.contains(base) {
                all.push(base);
            }
        }
        all
    }
}

/// What a run gets to work with.
#[derive(Debug)]
pub struct RunCtx {
    /// Count scale.
    pub scale: Scale,
    /// `--items`, if given.
    pub items: Option<usize>,
    /// Logical cores.
    pub cores: usize,
    /// The progress bar of this run.
    pub bar: RunBar,
}

impl RunCtx {
    /// The item count: `--items` if given, else the scale's default.
    pub fn items_or(&self, default: usize) -> usize {
        self.items.unwrap_or(default)
    }

    /// Shows `latch`'s progress on this run's bar until the returned guard
    /// is dropped.
    pub fn follow(&self, latch: &Arc<Latch>) -> crate::progress::Follow {
        self.bar.follow(latch.clone())
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It ran and measured.
    Done,
    /// It ran and failed (the message says why).
    Failed(String),
}

/// A run's result, as reported.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The run.
    pub spec: &'static RunSpec,
    /// How it ended.
    pub outcome: Outcome,
    /// What it measured (empty unless done): per metric the median over
    /// the repetitions.
    pub measured: Measured,
    /// Per metric, the lowest and highest value over the repetitions.
    pub spread: Vec<Spread>,
    /// Repetitions that finished.
    pub repeat: usize,
    /// Wall time of all its repetitions together, in seconds.
    pub elapsed_s: f64,
}

impl RunResult {
    /// A run that did not get to measure anything.
    pub fn failed(spec: &'static RunSpec, error: String, elapsed_s: f64) -> RunResult {
        RunResult {
            spec,
            outcome: Outcome::Failed(error),
            measured: Measured::default(),
            spread: Vec::new(),
            repeat: 0,
            elapsed_s,
        }
    }

    /// A metric's median, lowest and highest value over the repetitions.
    pub fn figure(&self, metric: &str) -> Option<(f64, f64, f64)> {
        let median = self.measured.get(metric)?;
        Some(
            self.spread
                .iter()
                .find(|s| s.name == metric)
                .map_or((median, median, median), |s| (median, s.min, s.max)),
        )
    }

    /// Description with the run's note, if any.
    pub fn description(&self) -> String {
        match &self.measured.note {
            Some(n) => format!("{} {}", self.spec.description, n),
            None => self.spec.description.to_string(),
        }
    }
}

/// An experiment's results.
#[derive(Debug, Clone)]
pub struct ExperimentResult {
    /// Which experiment.
    pub experiment: &'static Experiment,
    /// Its runs, in order.
    pub runs: Vec<RunResult>,
    /// Repetitions planned for every run.
    pub repeat: usize,
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

    #[test]
    fn every_experiment_is_well_formed() {
        for kind in ExperimentKind::value_variants() {
            let e = kind.experiment();
            assert_eq!(
                Some(e.name),
                kind.to_possible_value().as_ref().map(|v| v.get_name()),
                "the command line and the results use one name"
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
            for scale in [Scale::Full, Scale::Quick, Scale::Tiny] {
                assert!(!(e.scale)(scale).is_empty());
            }
        }
    }
}

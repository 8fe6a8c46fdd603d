//! The lab's vocabulary, below both the experiments and the report: what
//! an experiment and a run are ([`Experiment`], [`RunSpec`], [`Scale`],
//! [`RunCtx`]), what a run yields ([`Outcome`], [`RunResult`],
//! [`ExperimentResult`]) and what a plot shows ([`plot::Plot`]). The
//! experiments fill these in, the report reads them, so neither names the
//! other's module for them.

use std::sync::Arc;

use clap::ValueEnum;

use crate::aggregate::{Measured, Spread};
use crate::measure::Latch;
use crate::progress::RunBar;

pub mod plot;

use plot::Plot;

/// Repetitions of every run in the default run (neither `--full` nor
/// `--quick`): enough for a median with its spread in the README's table.
pub const DEFAULT_RUN_REPEAT: usize = 5;

/// How big the runs are (on the command line of a run in a fresh process
/// too, hence `ValueEnum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scale {
    /// The counts of the issue (`--full`: about half an hour in all on two
    /// cores).
    Full,
    /// Smaller counts and shorter waits: the default run's (five
    /// repetitions, about ten minutes on two cores) and `--quick`'s (one,
    /// about three minutes).
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

/// An experiment, described once (its module's doc refers here rather
/// than repeating it): what it shows, how big it is, which run
/// the others are compared with, its runs and its plots.
#[derive(Debug)]
pub struct Experiment {
    /// Name on the command line and in the results.
    pub name: &'static str,
    /// What the experiment shows, in two or three sentences: the report's
    /// and `results.json`'s description.
    pub about: &'static str,
    /// What it runs, in one line: the command line's help for its name.
    pub summary: &'static str,
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
    /// Workloads measured by another metric than `headline`, as (the
    /// workload's baseline run, its headline metric): their runs' ratios,
    /// progress lines and README row use that metric. Empty in most
    /// experiments.
    pub headlines: &'static [(&'static str, &'static str)],
    /// Its runs, in the order they run.
    pub runs: &'static [RunSpec],
    /// Runs that run only when `--only` names them: rows too long for the
    /// default run, or rows that only confirm what a default row shows.
    /// Empty in most experiments.
    pub opt_in: &'static [&'static str],
    /// Runs the default run leaves out (they run with `--full`, `--quick`
    /// or when `--only` names them): tidepool's other configurations whose
    /// rows the README's table does not show, where they would cost the
    /// default run most of its time. The default run keeps the runs its
    /// verdict needs. Empty in most experiments.
    pub full_only: &'static [&'static str],
    /// Its plots, from its results.
    pub plots: fn(&[RunResult]) -> Vec<Plot>,
    /// Repetitions of every run at `--full`: several for the short
    /// experiments, one for those that take minutes. (The default run
    /// repeats every run [`DEFAULT_RUN_REPEAT`] times, `--quick` once.)
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

    /// The ids of the runs that run at `--full` or `--quick` when `--only`
    /// does not name any: every run but the [`opt_in`](Experiment::opt_in)
    /// ones, in order.
    pub fn default_run_ids(&self) -> Vec<&'static str> {
        self.runs
            .iter()
            .map(|r| r.id)
            .filter(|id| !self.opt_in.contains(id))
            .collect()
    }

    /// The ids of the runs the default run runs when `--only` does not
    /// name any: [`default_run_ids`](Experiment::default_run_ids) but the
    /// [`full_only`](Experiment::full_only) ones, in order.
    pub fn short_run_ids(&self) -> Vec<&'static str> {
        self.default_run_ids()
            .into_iter()
            .filter(|id| !self.full_only.contains(id))
            .collect()
    }

    /// The run whose headline figure run `id`'s ratio divides by.
    pub fn baseline_of(&self, id: &str) -> &'static str {
        self.baselines
            .iter()
            .find(|(run, _)| *run == id)
            .map_or(self.baseline, |(_, base)| base)
    }

    /// The metric run `id` is judged by: its workload's headline (see
    /// [`headlines`](Experiment::headlines)), else `headline`.
    pub fn headline_of(&self, id: &str) -> &'static str {
        let base = self.baseline_of(id);
        self.headlines
            .iter()
            .find(|(run, _)| *run == base)
            .map_or(self.headline, |(_, metric)| metric)
    }

    /// Every headline metric, `headline` first, each once.
    pub fn all_headlines(&self) -> Vec<&'static str> {
        let mut all = vec![self.headline];
        for (_, metric) in self.headlines {
            if !all.contains(metric) {
                all.push(metric);
            }
        }
        all
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
    /// Whether this process was started for this one repetition (the
    /// hidden `run-fresh` subcommand): a run that wants a fresh process
    /// then measures here instead of starting another.
    pub own_process: bool,
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

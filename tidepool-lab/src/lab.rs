//! Runs a [`Plan`]: every selected run of every selected experiment, as
//! many times as planned, with a progress bar (or, without a terminal, a
//! line) per finished repetition.
//!
//! Repetitions are interleaved, A, B, C, A, B, C, ... rather than A five
//! times then B five times, so a slow drift of a shared machine (another
//! tenant, thermal throttling) hits every system alike. An experiment that
//! asks for it ([`Experiment::rotate`]) also starts each round one run
//! later: A, B, C, then B, C, A, then C, A, B.

use std::io::IsTerminal;
use std::time::Instant;

use crate::aggregate::{combine, Measured};
use crate::cli::Plan;
use crate::model::{Experiment, ExperimentResult, Outcome, RunCtx, RunResult, RunSpec};
use crate::progress::RunBar;
use crate::report::plot::format_value;

/// Runs the plan and returns every experiment's results (medians over the
/// repetitions). A failed run is reported, not fatal: its remaining
/// repetitions are skipped and the other runs go ahead.
pub fn run(plan: &Plan, cores: usize) -> Vec<ExperimentResult> {
    // Bars need a terminal; a log (`| tee`, CI) gets one line per repetition.
    let bars = std::io::stderr().is_terminal();
    crate::experiments::start_process_wide_threads();
    let mut results = Vec::new();
    for (kind, ids) in &plan.experiments {
        let experiment = kind.experiment();
        let repeat = plan.repeats_of(experiment);
        let mut pending: Vec<Repetitions> = experiment
            .runs
            .iter()
            .filter(|s| ids.contains(&s.id))
            .map(Repetitions::new)
            .collect();
        for rep in 1..=repeat {
            let n = pending.len();
            let shift = if experiment.rotate {
                (rep - 1) % n.max(1)
            } else {
                0
            };
            for k in 0..n {
                let r = &mut pending[(k + shift) % n];
                if r.error.is_some() {
                    continue;
                }
                let label = if repeat > 1 {
                    format!("{}/{} ({rep}/{repeat})", experiment.name, r.spec.id)
                } else {
                    format!("{}/{}", experiment.name, r.spec.id)
                };
                r.run_once(experiment, plan, cores, &label, bars, (rep, repeat));
            }
        }
        let runs = pending
            .into_iter()
            .map(|r| {
                let headline = experiment.headline_of(r.spec.id);
                r.finish(headline)
            })
            .collect();
        results.push(ExperimentResult {
            experiment,
            runs,
            repeat,
        });
    }
    results
}

/// The repetitions of one run collected so far.
struct Repetitions {
    spec: &'static RunSpec,
    done: Vec<Measured>,
    error: Option<String>,
    elapsed_s: f64,
}

impl Repetitions {
    fn new(spec: &'static RunSpec) -> Repetitions {
        Repetitions {
            spec,
            done: Vec::new(),
            error: None,
            elapsed_s: 0.0,
        }
    }

    /// Runs the run once more, on a fresh system, and reports the result.
    fn run_once(
        &mut self,
        experiment: &Experiment,
        plan: &Plan,
        cores: usize,
        label: &str,
        bars: bool,
        (rep, repeat): (usize, usize),
    ) {
        let bar = RunBar::new(label.to_string(), bars);
        let ctx = RunCtx {
            scale: plan.scale,
            items: plan.items,
            cores,
            bar: bar.clone(),
            own_process: false,
        };
        let started = Instant::now();
        let outcome = (self.spec.execute)(&ctx);
        let secs = started.elapsed().as_secs_f64();
        self.elapsed_s += secs;
        match outcome {
            Ok(m) => {
                bar.println(&progress_line(
                    label,
                    experiment.headline_of(self.spec.id),
                    &m,
                    secs,
                ));
                self.done.push(m);
            }
            Err(e) => {
                bar.println(&format!("{label}: failed after {secs:.1} s: {e}"));
                self.error = Some(if repeat > 1 {
                    format!("repetition {rep} of {repeat}: {e}")
                } else {
                    e
                });
            }
        }
        bar.finish();
    }

    /// The run's result: medians and spreads, or the failure.
    fn finish(self, headline: &str) -> RunResult {
        let repeat = self.done.len();
        match (self.error, combine(self.done, headline)) {
            (None, Some((measured, spread))) => RunResult {
                spec: self.spec,
                outcome: Outcome::Done,
                measured,
                spread,
                repeat,
                elapsed_s: self.elapsed_s,
            },
            (error, _) => RunResult::failed(
                self.spec,
                error.unwrap_or_else(|| "no repetition ran".into()),
                self.elapsed_s,
            ),
        }
    }
}

/// One line for a log: the run, its headline figure and how long it took.
pub fn progress_line(label: &str, headline: &str, m: &Measured, secs: f64) -> String {
    let figure = m.get(headline).map_or_else(
        || format!("{headline} -"),
        |v| format!("{headline} {}", format_value(v)),
    );
    format!("{label}: {figure}, took {secs:.1} s")
}

//! Runs a [`Plan`]: every selected run of every selected experiment, with a
//! progress bar per run and a table per experiment.

use std::io::Write;

use crate::cli::Plan;
use crate::experiments::{ExperimentResult, Measured, Outcome, RunCtx, RunResult};
use crate::progress::RunBar;
use crate::report::table::{ratio_legend, table};

/// Runs the plan, printing each experiment's table to `tables` as it
/// finishes. A failed run is reported, not fatal.
pub fn run(plan: &Plan, cores: usize, tables: &mut dyn Write) -> Vec<ExperimentResult> {
    let mut results = Vec::new();
    for (kind, ids) in &plan.experiments {
        let experiment = kind.experiment();
        let mut runs = Vec::new();
        for spec in experiment.runs.iter().filter(|s| ids.contains(&s.id)) {
            let label = format!("{}/{}", experiment.name, spec.id);
            let bar = RunBar::new(label.clone(), true);
            let ctx = RunCtx {
                scale: plan.scale,
                items: plan.items,
                cores,
                bar: bar.clone(),
            };
            let (outcome, measured) = match (spec.execute)(&ctx) {
                Ok(m) => (Outcome::Done, m),
                Err(e) => {
                    bar.println(&format!("{label}: failed: {e}"));
                    (Outcome::Failed(e), Measured::default())
                }
            };
            bar.finish();
            runs.push(RunResult {
                spec,
                outcome,
                measured,
            });
        }
        let result = ExperimentResult { experiment, runs };
        let _ = writeln!(
            tables,
            "\n== {} ==  ({})\n{}",
            experiment.name,
            ratio_legend(&result),
            table(&result).to_text()
        );
        let _ = tables.flush();
        results.push(result);
    }
    results
}

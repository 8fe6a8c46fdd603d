//! What the four experiments' tests share: their `about` held to plain
//! text, and their verdicts on finished runs with chosen figures.

use crate::aggregate::Measured;
use crate::model::{Experiment, ExperimentResult, Outcome, RunResult};

/// Checks an experiment's `about` (its `about.md`, trimmed): it opens
/// with `opening`, has no trailing newline and no Markdown code, since
/// the report shows it as plain text.
pub(crate) fn assert_plain_about(about: &str, opening: &str) {
    assert!(about.starts_with(opening), "{about}");
    assert!(!about.ends_with('\n'));
    assert!(!about.contains('`'), "plain text in the report");
}

/// Row `id` of `experiment`, finished once with these figures.
pub(crate) fn done_run(
    experiment: &'static Experiment,
    id: &str,
    figures: &[(&'static str, f64)],
) -> RunResult {
    let mut measured = Measured::default();
    for (name, value) in figures {
        measured.put(name, *value);
    }
    RunResult {
        spec: experiment.run(id).unwrap(),
        outcome: Outcome::Done,
        measured,
        spread: Vec::new(),
        repeat: 1,
        elapsed_s: 1.0,
    }
}

/// `experiment`'s verdict on `runs`, one repetition each.
pub(crate) fn verdict_of(experiment: &'static Experiment, runs: Vec<RunResult>) -> Option<String> {
    (experiment.verdict)(&ExperimentResult {
        experiment,
        runs,
        repeat: 1,
    })
}

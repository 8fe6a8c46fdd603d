//! What the experiments' tests share: an `about` held to plain text,
//! finished runs with chosen figures, and the verdict (or the result, for
//! a table) of such runs. A test builds its runs here rather than by hand,
//! so a field added to [`RunResult`] or [`ExperimentResult`] is filled in
//! one place.

use crate::aggregate::Measured;
use crate::model::{Experiment, ExperimentResult, Outcome, RunResult};

/// Checks an experiment's `about` (its `about.md`, trimmed): it opens
/// with `opening`, has no trailing newline and no Markdown code, since
/// the report shows it as plain text.
#[track_caller]
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

/// `experiment`'s result of `runs`, one repetition each.
pub(crate) fn result_of(experiment: &'static Experiment, runs: Vec<RunResult>) -> ExperimentResult {
    ExperimentResult {
        experiment,
        runs,
        repeat: 1,
    }
}

/// `experiment`'s verdict on `runs`, one repetition each.
pub(crate) fn verdict_of(experiment: &'static Experiment, runs: Vec<RunResult>) -> Option<String> {
    (experiment.verdict)(&result_of(experiment, runs))
}

/// `experiment`'s verdict on `runs`, which must give one that says each
/// of `says`; the verdict, for the checks that are not "it says".
#[track_caller]
pub(crate) fn assert_verdict_says(
    experiment: &'static Experiment,
    runs: Vec<RunResult>,
    says: &[&str],
) -> String {
    let verdict = verdict_of(experiment, runs).expect("a verdict");
    for part in says {
        assert!(verdict.contains(part), "no {part:?} in: {verdict}");
    }
    verdict
}

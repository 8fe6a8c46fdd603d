//! An experiment that exists only for the report's tests: runs with the
//! ids and wording of `waiting`'s, so the tests read like a real report
//! without the report naming the experiments' module.

use crate::model::{Experiment, RunSpec};

/// A run that is described but never carried out.
const fn run(id: &'static str, description: &'static str) -> RunSpec {
    RunSpec {
        id,
        system: "tidepool",
        description,
        execute: |_| Err("a fixture does not run".into()),
    }
}

/// The experiment.
pub(crate) static SAMPLE: Experiment = Experiment {
    name: "waiting",
    about: "Items that wait, arriving at a steady rate.",
    summary: "Items that wait.",
    question: "Do waiting items start at once?",
    verdict: |_| Some("They do.".into()),
    scale: |_| "a few items".into(),
    headline: "mean_start_ms",
    baseline: "adaptive-sleep",
    baselines: &[],
    headlines: &[],
    runs: &[
        run(
            "adaptive-sleep",
            "The default pool (Adaptive); items sleep.",
        ),
        run("fixed10-sleep", "A fixed pool of 10; items sleep."),
        run("gradual500-sleep", "The Gradual controller; items sleep."),
        run("rayon-sleep", "rayon's default pool; items sleep."),
    ],
    opt_in: &[],
    plots: |_| Vec::new(),
    full_only: &[],
    default_repeat: 1,
    rotate: false,
};

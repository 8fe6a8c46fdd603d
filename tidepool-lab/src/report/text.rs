//! The terminal's report: a table per experiment.

use std::fmt::Write as _;

use super::table::{ratio_legend, table};
use crate::experiments::ExperimentResult;

/// Renders every experiment's table as plain text.
pub fn render(results: &[ExperimentResult]) -> String {
    let mut s = String::new();
    for exp in results {
        let _ = writeln!(
            s,
            "\n== {} ==  ({})\n{}",
            exp.experiment.name,
            ratio_legend(exp),
            table(exp).to_text()
        );
    }
    s
}

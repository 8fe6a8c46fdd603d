//! The terminal's report: the summary, then a table per experiment.

use std::fmt::Write as _;

use super::json::Document;
use super::summary;
use super::table::{ratio_legend, table};
use crate::model::ExperimentResult;

/// Renders the summary and every experiment's table as plain text.
pub fn render(doc: &Document, results: &[ExperimentResult]) -> String {
    let mut s = format!("\n{}", summary::text(doc, results));
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

//! The report: `results.json`, `report.md`, `report.html` and `plots/`;
//! and, from `results.json` files, the README's results table
//! ([`readme`]).
//!
//! Everything is written into a temporary folder inside the output folder
//! first and moved into place only when all of it has been written, so a
//! failed or interrupted run never leaves a half-written report behind.

use std::fs;
use std::path::{Path, PathBuf};

use crate::model::{ExperimentResult, Scale};

#[cfg(test)]
mod fixture;
pub mod html;
pub mod json;
pub mod md;
pub mod plot;
pub mod readme;
pub mod summary;
pub mod table;
pub mod text;

use crate::model::plot::Plot;
use json::Document;

/// Everything the renderers need.
#[derive(Debug)]
pub struct Rendered<'a> {
    /// The JSON document (machine, version, runs).
    pub doc: &'a Document,
    /// The results, with their per-item series.
    pub results: &'a [ExperimentResult],
    /// Per experiment, its plots and their SVG text.
    pub plots: Vec<Vec<(Plot, String)>>,
    /// The command line that produced the report (the document's).
    pub command: &'a str,
    /// The scale the runs used.
    pub scale: Scale,
}

/// Creates the output folder if needed and checks that it can be written.
///
/// # Errors
///
/// One line naming the folder and the problem.
pub fn check_out_dir(dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create output folder {}: {e}", dir.display()))?;
    let probe = dir.join(format!(".tidepool-lab-probe-{}", std::process::id()));
    fs::write(&probe, b"probe")
        .map_err(|e| format!("cannot write to output folder {}: {e}", dir.display()))?;
    let _ = fs::remove_file(&probe);
    Ok(())
}

/// Writes the report into `dir`; returns the paths of the files written.
///
/// # Errors
///
/// A message when a file cannot be written or moved into place; nothing
/// half-written is left in `dir` then.
pub fn write(
    dir: &Path,
    doc: &Document,
    results: &[ExperimentResult],
    scale: Scale,
) -> Result<Vec<PathBuf>, String> {
    let mut plots = Vec::new();
    for e in results {
        let mut these = Vec::new();
        for p in (e.experiment.plots)(&e.runs) {
            let svg = plot::svg(&p)?;
            these.push((p, svg));
        }
        plots.push(these);
    }
    let rendered = Rendered {
        doc,
        results,
        plots,
        command: &doc.command,
        scale,
    };

    let tmp = dir.join(format!(".tidepool-lab-tmp-{}", std::process::id()));
    let staged = stage(&tmp, &rendered);
    let moved = staged.and_then(|names| publish(&tmp, dir, &names));
    let _ = fs::remove_dir_all(&tmp);
    moved
}

/// Writes every file into `tmp`; returns the top-level names.
fn stage(tmp: &Path, r: &Rendered<'_>) -> Result<Vec<&'static str>, String> {
    let err =
        |what: &str, e: std::io::Error| format!("cannot write {what} in {}: {e}", tmp.display());
    let _ = fs::remove_dir_all(tmp);
    fs::create_dir_all(tmp.join("plots")).map_err(|e| err("plots/", e))?;
    for (plot, svg) in r.plots.iter().flatten() {
        fs::write(tmp.join("plots").join(format!("{}.svg", plot.key)), svg)
            .map_err(|e| err("a plot", e))?;
    }
    fs::write(tmp.join("results.json"), r.doc.to_json()).map_err(|e| err("results.json", e))?;
    fs::write(tmp.join("report.md"), md::render(r)).map_err(|e| err("report.md", e))?;
    fs::write(tmp.join("report.html"), html::render(r)).map_err(|e| err("report.html", e))?;
    Ok(vec!["plots", "results.json", "report.md", "report.html"])
}

/// Moves the staged files into `dir`, replacing an earlier report.
fn publish(tmp: &Path, dir: &Path, names: &[&str]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for name in names {
        let from = tmp.join(name);
        let to = dir.join(name);
        if from.is_dir() && to.exists() {
            // An old plots/ folder cannot be renamed over: move it away first.
            let _ = fs::remove_dir_all(&to);
        }
        fs::rename(&from, &to)
            .map_err(|e| format!("cannot move {} into place: {e}", to.display()))?;
        out.push(to);
    }
    Ok(out)
}

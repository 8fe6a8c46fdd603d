//! `report.md`: the report as Markdown, with the plots as SVG files beside
//! it (`plots/<key>.svg`).

use std::fmt::Write as _;

use super::table::{ratio_legend, table};
use super::Rendered;

/// Renders the Markdown report.
pub fn render(r: &Rendered<'_>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# tidepool lab report\n");
    let _ = writeln!(
        s,
        "Machine: {} cores, {}, {}. Scale: {}. Command: `{}`. tidepool-lab {}.\n",
        r.doc.machine.cores,
        r.doc.machine.cpu,
        r.doc.machine.os,
        r.doc.scale,
        r.command,
        r.doc.version
    );
    let _ = writeln!(
        s,
        "Each table compares the runs of one experiment; the ratio column divides a run's headline \
         figure by tidepool's default run. Metric names end in their unit.\n"
    );
    for (exp, plots) in r.results.iter().zip(&r.plots) {
        let _ = writeln!(s, "## {}\n", exp.experiment.name);
        let _ = writeln!(s, "{}\n", exp.experiment.about);
        let _ = writeln!(s, "{}\n", ratio_legend(exp));
        let _ = writeln!(s, "{}", table(exp).to_markdown());
        for run in &exp.runs {
            let _ = writeln!(s, "- `{}`: {}", run.spec.id, run.description());
        }
        let _ = writeln!(s);
        for (plot, _) in plots {
            let _ = writeln!(s, "![{}](plots/{}.svg)\n", plot.title, plot.key);
        }
    }
    s
}

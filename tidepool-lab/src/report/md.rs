//! `report.md`: the report as Markdown, with the plots as SVG files beside
//! it (`plots/<key>.svg`).

use std::fmt::Write as _;

use super::summary;
use super::table::{headline_table, ratio_legend, table};
use super::Rendered;

/// Renders the Markdown report: the summary first, then per experiment the
/// headline table, every metric in a collapsed block, and the plots.
pub fn render(r: &Rendered<'_>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# tidepool lab report\n");
    let _ = writeln!(s, "## Summary\n");
    let _ = writeln!(s, "{}.\n", summary::heading(r.doc));
    for line in summary::lines(r.results) {
        let _ = writeln!(s, "- {line}");
    }
    let _ = writeln!(
        s,
        "\nCommand: `{}`. Each table compares the runs of one experiment; figures are medians \
         over the repetitions, shown as `median (min-max)`, and the ratio column divides a run's \
         headline figure by its baseline run's: tidepool's default, unless the line above the \
         table names another. Metric names end in their unit.\n",
        r.command
    );
    for (exp, plots) in r.results.iter().zip(&r.plots) {
        let e = exp.experiment;
        let _ = writeln!(s, "## {}\n", e.name);
        let _ = writeln!(s, "{} Scale: {}.\n", e.about, (e.scale)(r.scale));
        let _ = writeln!(s, "**{}**\n", summary::line(exp));
        let _ = writeln!(s, "{}\n", ratio_legend(exp));
        let full = table(exp);
        let _ = writeln!(s, "{}", headline_table(exp, &full).to_markdown());
        let _ = writeln!(
            s,
            "<details><summary>All metrics</summary>\n\n{}\n</details>\n",
            full.to_markdown()
        );
        for run in &exp.runs {
            let _ = writeln!(s, "- `{}`: {}", run.spec.id, run.description());
        }
        let _ = writeln!(s);
        for (plot, _) in plots {
            let _ = writeln!(
                s,
                "![{}](plots/{}.svg)\n\n*{}*\n",
                plot.title, plot.key, plot.caption
            );
        }
    }
    s
}

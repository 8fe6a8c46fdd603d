//! `report.html`: one self-contained page (inline CSS and SVG, no network).

use std::fmt::Write as _;

use super::table::{ratio_legend, table, Table};
use super::Rendered;

/// Escapes text for HTML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0;font-size:0.9em}\
th,td{border:1px solid #ccc;padding:0.3em 0.6em}th{background:#f3f3f3}\
td.num{text-align:right;font-variant-numeric:tabular-nums}\
tr.failed td{color:#a00}\
.plot svg{max-width:100%;height:auto;border:1px solid #eee;margin:0.5em 0}\
code{background:#f6f6f6;padding:0 0.2em}";

fn table_html(t: &Table) -> String {
    let mut s = String::from("<table>\n<tr>");
    for h in &t.header {
        let _ = write!(s, "<th>{}</th>", escape(h));
    }
    s.push_str("</tr>\n");
    let last = t.header.len() - 1;
    for row in &t.rows {
        let class = if row[last].starts_with("failed") {
            " class=\"failed\""
        } else {
            ""
        };
        let _ = write!(s, "<tr{class}>");
        for (c, cell) in row.iter().enumerate() {
            let num = if c >= 2 && c < last {
                " class=\"num\""
            } else {
                ""
            };
            let _ = write!(s, "<td{num}>{}</td>", escape(cell));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</table>\n");
    s
}

/// Renders the HTML report.
pub fn render(r: &Rendered<'_>) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>tidepool lab report</title><style>{STYLE}</style></head><body>\n\
         <h1>tidepool lab report</h1>\n<p>Machine: {} cores, {}, {}. Scale: {}. \
         Command: <code>{}</code>. tidepool-lab {}.</p>\n\
         <p>Each table compares the runs of one experiment; the ratio column divides a run's \
         headline figure by tidepool's default run. Metric names end in their unit.</p>\n<ul>",
        r.doc.machine.cores,
        escape(&r.doc.machine.cpu),
        escape(&r.doc.machine.os),
        escape(&r.doc.scale),
        escape(r.command),
        escape(&r.doc.version),
    );
    for exp in r.results {
        let n = exp.experiment.name;
        let _ = write!(s, "<li><a href=\"#{n}\">{n}</a></li>");
    }
    s.push_str("</ul>\n");
    for (exp, plots) in r.results.iter().zip(&r.plots) {
        let n = exp.experiment.name;
        let _ = writeln!(
            s,
            "<h2 id=\"{n}\">{n}</h2>\n<p>{}</p>",
            escape(exp.experiment.about)
        );
        let _ = writeln!(s, "<p><em>{}</em></p>", escape(&ratio_legend(exp)));
        s.push_str(&table_html(&table(exp)));
        s.push_str("<ul>");
        for run in &exp.runs {
            let _ = write!(
                s,
                "<li><code>{}</code>: {}</li>",
                escape(run.spec.id),
                escape(&run.description())
            );
        }
        s.push_str("</ul>\n");
        for (plot, svg) in plots {
            let _ = writeln!(
                s,
                "<figure class=\"plot\" id=\"{}\">{}</figure>",
                escape(&plot.key),
                strip_xml_prolog(svg)
            );
        }
    }
    s.push_str("</body></html>\n");
    s
}

/// Inline SVG must not carry an XML declaration.
fn strip_xml_prolog(svg: &str) -> &str {
    match svg.strip_prefix("<?xml") {
        Some(rest) => rest.split_once("?>").map_or(svg, |(_, r)| r.trim_start()),
        None => svg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(
            strip_xml_prolog("<?xml version=\"1.0\"?>\n<svg/>"),
            "<svg/>"
        );
        assert_eq!(strip_xml_prolog("<svg/>"), "<svg/>");
    }
}

//! `report.html`: one self-contained page (inline CSS and SVG, no network).

use std::fmt::Write as _;

use super::summary;
use super::table::{headline_table, ratio_legend, table, Table};
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

/// The page's CSS. Tables never set a width: they wrap inside a
/// scrolling box and their cells wrap, so nothing overflows the page at
/// 800 px; secondary columns live in a collapsed block.
pub const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.4}\
.table-wrap{max-width:100%;overflow-x:auto}\
table{border-collapse:collapse;margin:0.5em 0;font-size:0.88em}\
th,td{border:1px solid #ccc;padding:0.3em 0.5em;vertical-align:top;overflow-wrap:break-word}\
th{background:#f3f3f3;text-align:left}\
td.num{text-align:right;font-variant-numeric:tabular-nums}\
tr.failed td{color:#a00}\
.summary{background:#f6f8fa;border:1px solid #dde;padding:0.5em 1em;margin:1em 0}\
.summary li{margin:0.4em 0}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}\
figcaption{font-size:0.9em;color:#444}\
details{margin:0.5em 0}\
code{background:#f6f6f6;padding:0 0.2em}";

fn table_html(t: &Table) -> String {
    let mut s = String::from("<div class=\"table-wrap\"><table>\n<tr>");
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
    s.push_str("</table></div>\n");
    s
}

/// Renders the HTML report: the summary first, then per experiment the
/// headline table, every metric in a collapsed block, and the plots.
pub fn render(r: &Rendered<'_>) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>tidepool lab report</title><style>{STYLE}</style></head><body>\n\
         <h1>tidepool lab report</h1>\n<section class=\"summary\" id=\"summary\"><h2>Summary</h2>\n<p>{}.</p>\n<ul>",
        escape(&summary::heading(r.doc)),
    );
    for exp in r.results {
        let n = exp.experiment.name;
        let line = summary::line(exp);
        let rest = line.strip_prefix(n).unwrap_or(&line);
        let _ = write!(
            s,
            "<li><a href=\"#{n}\"><strong>{n}</strong></a>{}</li>",
            escape(rest)
        );
    }
    let _ = write!(
        s,
        "</ul></section>\n<p>Command: <code>{}</code>. Each table compares the runs of one \
         experiment; figures are medians over the repetitions, shown as <code>median \
         (min-max)</code>, and the ratio column divides a run's headline figure by its baseline \
         run's: tidepool's default, unless the line above the table names another. Metric names \
         end in their unit.</p>\n",
        escape(r.command),
    );
    for (exp, plots) in r.results.iter().zip(&r.plots) {
        let e = exp.experiment;
        let _ = writeln!(
            s,
            "<h2 id=\"{}\">{}</h2>\n<p>{} Scale: {}.</p>",
            e.name,
            e.name,
            escape(e.about),
            escape(&(e.scale)(r.scale))
        );
        let _ = writeln!(s, "<p><em>{}</em></p>", escape(&ratio_legend(exp)));
        let full = table(exp);
        s.push_str(&table_html(&headline_table(exp, &full)));
        s.push_str("<details><summary>All metrics and what each run did</summary>\n");
        s.push_str(&table_html(&full));
        s.push_str("<ul>");
        for run in &exp.runs {
            let _ = write!(
                s,
                "<li><code>{}</code>: {}</li>",
                escape(run.spec.id),
                escape(&run.description())
            );
        }
        s.push_str("</ul></details>\n");
        for (plot, svg) in plots {
            let _ = writeln!(
                s,
                "<figure id=\"{}\">{}<figcaption>{}</figcaption></figure>",
                escape(&plot.key),
                strip_xml_prolog(svg),
                escape(&plot.caption)
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

    #[test]
    fn tables_cannot_push_the_page_wider() {
        // No fixed widths anywhere; tables scroll inside their box and
        // cells wrap, so the page fits 800 px whatever the figures.
        assert!(STYLE.contains(".table-wrap{max-width:100%;overflow-x:auto}"));
        assert!(STYLE.contains("overflow-wrap:break-word"));
        assert!(STYLE.contains("svg{max-width:100%;height:auto"));
        for declaration in STYLE.split(['{', ';', '}']) {
            assert!(
                !declaration.starts_with("width:")
                    && !declaration.starts_with("min-width:")
                    && declaration != "white-space:nowrap",
                "fixed width in the CSS: {declaration}"
            );
        }
        let t = Table {
            header: vec!["run".into(), "system".into(), "x".into(), "status".into()],
            rows: vec![vec!["a".into(), "b".into(), "1".into(), "ok".into()]],
        };
        assert!(table_html(&t).starts_with("<div class=\"table-wrap\"><table>"));
    }
}

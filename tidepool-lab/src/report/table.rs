//! An experiment's results as a table: one row per run, one column per
//! metric, and a ratio column against tidepool's default run.

use crate::experiments::{ExperimentResult, Outcome};
use crate::report::plot::format_value;
use crate::stats::ratio;

/// A table of text cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// Column headers.
    pub header: Vec<String>,
    /// Rows of cells, as long as the header.
    pub rows: Vec<Vec<String>>,
}

/// What the ratio column of `exp`'s table means, in one line.
pub fn ratio_legend(exp: &ExperimentResult) -> String {
    format!(
        "ratio: {} relative to run {} (tidepool's default)",
        exp.experiment.headline, exp.experiment.baseline
    )
}

/// Builds the table of `exp`. Metric columns appear in the order the runs
/// report them; the ratio column divides each run's headline metric by the
/// baseline run's (`-` when the baseline did not run or is zero).
pub fn table(exp: &ExperimentResult) -> Table {
    let mut metrics: Vec<&str> = Vec::new();
    for r in &exp.runs {
        for (name, _) in &r.measured.metrics {
            if !metrics.contains(name) {
                metrics.push(name);
            }
        }
    }
    let headline = exp.experiment.headline;
    let baseline_id = exp.experiment.baseline;
    let base = exp
        .runs
        .iter()
        .find(|r| r.spec.id == baseline_id && r.outcome == Outcome::Done)
        .and_then(|r| r.measured.get(headline));

    let mut header = vec!["run".to_string(), "system".to_string()];
    header.extend(metrics.iter().map(|m| m.to_string()));
    header.push("ratio".to_string());
    header.push("status".to_string());

    let rows = exp
        .runs
        .iter()
        .map(|r| {
            let mut row = vec![r.spec.id.to_string(), r.spec.system.to_string()];
            for m in &metrics {
                row.push(r.measured.get(m).map_or("-".into(), format_value));
            }
            let x = r
                .measured
                .get(headline)
                .zip(base)
                .and_then(|(v, b)| ratio(v, b));
            row.push(x.map_or("-".into(), format_ratio));
            row.push(match &r.outcome {
                Outcome::Done => "ok".into(),
                Outcome::Failed(e) => format!("failed: {e}"),
            });
            row
        })
        .collect();
    Table { header, rows }
}

/// A ratio with precision to match its size: `0.018x`, `1.00x`, `12.3x`,
/// `6020x`, `1.2e6x`.
pub fn format_ratio(x: f64) -> String {
    if x >= 10_000.0 {
        // Past five digits the exact figure is noise: 1.2e6x reads better.
        format!("{x:.1e}x")
    } else if x >= 100.0 {
        format!("{x:.0}x")
    } else if x >= 10.0 {
        format!("{x:.1}x")
    } else if x >= 0.01 {
        format!("{x:.2}x")
    } else {
        format!("{x:.4}x")
    }
}

/// A whole number with thousands separators: `1,000,000`. Fractions are
/// rounded away; use it for counts and large figures.
pub fn group_digits(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 && digits != "0" {
        out.insert(0, '-');
    }
    out
}

impl Table {
    /// Plain text with aligned columns (numbers right-aligned), for the
    /// terminal.
    pub fn to_text(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|c| {
                std::iter::once(&self.header[c])
                    .chain(self.rows.iter().map(|r| &r[c]))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let last = self.header.len() - 1;
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (c, cell) in cells.iter().enumerate() {
                let w = widths[c];
                if c == last {
                    s.push_str(cell);
                } else if c >= 2 {
                    s.push_str(&format!("{cell:>w$}  "));
                } else {
                    s.push_str(&format!("{cell:<w$}  "));
                }
            }
            s.trim_end().to_string()
        };
        let mut out = line(&self.header);
        out.push('\n');
        let rule: usize = widths.iter().sum::<usize>() + 2 * last;
        out.push_str(&"-".repeat(rule));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }

    /// A Markdown (GitHub) table.
    pub fn to_markdown(&self) -> String {
        let esc = |s: &String| s.replace('|', "\\|");
        let mut out = format!(
            "| {} |\n|{}|\n",
            self.header.iter().map(esc).collect::<Vec<_>>().join(" | "),
            (0..self.header.len())
                .map(|c| if c >= 2 && c + 1 < self.header.len() {
                    "---:"
                } else {
                    "---"
                })
                .collect::<Vec<_>>()
                .join("|")
        );
        for r in &self.rows {
            out.push_str(&format!(
                "| {} |\n",
                r.iter().map(esc).collect::<Vec<_>>().join(" | ")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::{waiting, Measured, RunResult};

    pub(crate) fn sample() -> ExperimentResult {
        let mut a = Measured::default();
        a.put("mean_start_ms", 0.5);
        a.put("wall_s", 10.5);
        let mut b = Measured::default();
        b.put("mean_start_ms", 5000.0);
        b.put("wall_s", 50.0);
        let spec = |id: &str| waiting::EXPERIMENT.run(id).unwrap();
        ExperimentResult {
            experiment: &waiting::EXPERIMENT,
            runs: vec![
                RunResult {
                    spec: spec("fixed10-sleep"),
                    outcome: Outcome::Done,
                    measured: b,
                },
                RunResult {
                    spec: spec("adaptive-sleep"),
                    outcome: Outcome::Done,
                    measured: a,
                },
                RunResult {
                    spec: spec("gradual500-sleep"),
                    outcome: Outcome::Failed("boom".into()),
                    measured: Measured::default(),
                },
            ],
        }
    }

    #[test]
    fn ratio_against_the_default_run() {
        let t = table(&sample());
        assert_eq!(
            t.header,
            vec![
                "run",
                "system",
                "mean_start_ms",
                "wall_s",
                "ratio",
                "status"
            ]
        );
        assert_eq!(t.rows[0][4], "1.0e4x");
        assert_eq!(format_ratio(6020.4), "6020x");
        assert_eq!(format_ratio(1_207_303.0), "1.2e6x");
        assert_eq!(format_ratio(0.0002), "0.0002x");
        assert_eq!(
            ratio_legend(&sample()),
            "ratio: mean_start_ms relative to run adaptive-sleep (tidepool's default)"
        );
        assert_eq!(t.rows[1][4], "1.00x");
        assert_eq!(t.rows[2][2], "-");
        assert_eq!(t.rows[2][4], "-");
        assert_eq!(t.rows[2][5], "failed: boom");
    }

    #[test]
    fn text_and_markdown() {
        let t = table(&sample());
        let text = t.to_text();
        assert_eq!(text.lines().count(), 5);
        assert!(text.lines().nth(2).unwrap().starts_with("fixed10-sleep"));
        let md = t.to_markdown();
        assert!(md.starts_with("| run | system |"));
        assert_eq!(md.lines().count(), 5);
    }
}

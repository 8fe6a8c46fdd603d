//! An experiment's results as a table: one row per run, one column per
//! metric, and a ratio column against tidepool's default run.

use crate::model::{Experiment, ExperimentResult, Outcome};
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
    let e = exp.experiment;
    let all = e.all_baselines();
    if all.len() == 1 {
        format!(
            "ratio: each run's {} divided by that of run {} ({}); lower is better",
            e.headline,
            e.baseline,
            baseline_is(exp)
        )
    } else {
        format!(
            "ratio: each run's {} divided by that of the baseline run of its workload ({}: {}); \
             lower is better",
            headline_words(e),
            all.join(", "),
            baseline_is(exp)
        )
    }
}

/// The ratio column's header: what it divides, and which way is better.
pub fn ratio_header(exp: &ExperimentResult) -> String {
    let e = exp.experiment;
    if e.baselines.is_empty() {
        format!("{} ÷ {} (lower is better)", e.headline, e.baseline)
    } else {
        format!(
            "{} ÷ same workload's {} (lower is better)",
            e.all_headlines().join(" or "),
            baseline_system(exp)
        )
    }
}

/// The headline metric in words: `headline`, and each workload measured by
/// another (`mean_start_ms in tidepool-connect-burst-1slot's workload`).
fn headline_words(e: &Experiment) -> String {
    if e.headlines.is_empty() {
        return e.headline.to_string();
    }
    let others: Vec<String> = e
        .headlines
        .iter()
        .map(|(run, metric)| format!("{metric} in {run}'s workload"))
        .collect();
    format!("{} ({})", e.headline, others.join(", "))
}

/// The system of the baseline run (`?` if the experiment has no such run).
fn baseline_system(exp: &ExperimentResult) -> &'static str {
    exp.experiment
        .run(exp.experiment.baseline)
        .map_or("?", |r| r.system)
}

/// What the baseline stands for, in words: tidepool's default, or the
/// peer it is.
fn baseline_is(exp: &ExperimentResult) -> String {
    match baseline_system(exp) {
        "tidepool" => "tidepool's default".into(),
        other => other.into(),
    }
}

/// Builds the table of `exp`. Metric columns appear in the order the runs
/// report them, each cell `median (min-max)` over the repetitions (just the
/// value when they agree); the ratio column divides each run's median
/// headline metric by its baseline run's (`-` when the baseline did not run
/// or is zero).
pub fn table(exp: &ExperimentResult) -> Table {
    let mut metrics: Vec<&str> = Vec::new();
    for r in &exp.runs {
        for (name, _) in &r.measured.metrics {
            if !metrics.contains(name) {
                metrics.push(name);
            }
        }
    }
    // A run and its baseline share a workload, so a headline.
    let base_of = |id: &str| {
        let base = exp.experiment.baseline_of(id);
        exp.runs
            .iter()
            .find(|r| r.spec.id == base && r.outcome == Outcome::Done)
            .and_then(|r| r.measured.get(exp.experiment.headline_of(id)))
    };

    let mut header = vec!["run".to_string(), "system".to_string()];
    header.extend(metrics.iter().map(|m| m.to_string()));
    header.push(ratio_header(exp));
    header.push("status".to_string());

    let rows = exp
        .runs
        .iter()
        .map(|r| {
            let mut row = vec![r.spec.id.to_string(), r.spec.system.to_string()];
            for m in &metrics {
                row.push(
                    r.figure(m)
                        .map_or("-".into(), |(v, lo, hi)| format_figure(v, lo, hi)),
                );
            }
            let x = r
                .measured
                .get(exp.experiment.headline_of(r.spec.id))
                .zip(base_of(r.spec.id))
                .and_then(|(v, b)| ratio(v, b));
            row.push(
                if exp.experiment.baseline_of(r.spec.id) == r.spec.id && x.is_some() {
                    "baseline".into()
                } else {
                    x.map_or("-".into(), format_ratio)
                },
            );
            row.push(match &r.outcome {
                Outcome::Done => "ok".into(),
                Outcome::Failed(e) => format!("failed: {e}"),
            });
            row
        })
        .collect();
    Table { header, rows }
}

/// The columns a reader needs first: run, system, the headline metric, the
/// ratio and the status. The full table keeps every metric.
pub fn headline_table(exp: &ExperimentResult, full: &Table) -> Table {
    let n = full.header.len();
    let keep: Vec<usize> = (0..n)
        .filter(|&c| {
            c < 2
                || c + 2 >= n
                || exp
                    .experiment
                    .all_headlines()
                    .contains(&full.header[c].as_str())
        })
        .collect();
    Table {
        header: keep.iter().map(|&c| full.header[c].clone()).collect(),
        rows: full
            .rows
            .iter()
            .map(|r| keep.iter().map(|&c| r[c].clone()).collect())
            .collect(),
    }
}

/// A median with its spread: `12.3 (11.9-13.0)`, or the value alone when
/// every repetition gave the same.
pub fn format_figure(median: f64, min: f64, max: f64) -> String {
    let (v, lo, hi) = (format_value(median), format_value(min), format_value(max));
    if lo == hi {
        v
    } else {
        format!("{v} ({lo}-{hi})")
    }
}

/// A ratio of times (lower is better) in words: `3.6x slower`, `2,500x
/// faster`, `same` within half a percent.
pub fn format_ratio(x: f64) -> String {
    if (0.995..=1.005).contains(&x) {
        return "same".into();
    }
    let (factor, word) = if x > 1.0 {
        (x, "slower")
    } else {
        (1.0 / x, "faster")
    };
    let n = if factor >= 100.0 {
        group_digits(factor)
    } else if factor >= 10.0 {
        format!("{factor:.1}")
    } else {
        format!("{factor:.2}")
    };
    format!("{n}x {word}")
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
    use crate::aggregate::Measured;
    use crate::aggregate::Spread;
    use crate::model::RunResult;
    use crate::report::fixture::SAMPLE;

    pub(crate) fn sample() -> ExperimentResult {
        let mut a = Measured::default();
        a.put("mean_start_ms", 0.5);
        a.put("wall_s", 10.5);
        let mut b = Measured::default();
        b.put("mean_start_ms", 5000.0);
        b.put("wall_s", 50.0);
        let spec = |id: &str| SAMPLE.run(id).unwrap();
        let done = |id: &str, measured: Measured, spread: Vec<Spread>| RunResult {
            spec: spec(id),
            outcome: Outcome::Done,
            measured,
            spread,
            repeat: 3,
            elapsed_s: 1.0,
        };
        ExperimentResult {
            experiment: &SAMPLE,
            runs: vec![
                done(
                    "fixed10-sleep",
                    b,
                    vec![Spread {
                        name: "mean_start_ms",
                        min: 4000.0,
                        max: 6000.0,
                    }],
                ),
                done("adaptive-sleep", a, Vec::new()),
                RunResult::failed(spec("gradual500-sleep"), "boom".into(), 0.5),
            ],
            repeat: 3,
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
                "mean_start_ms ÷ adaptive-sleep (lower is better)",
                "status"
            ]
        );
        assert_eq!(t.rows[0][4], "10,000x slower");
        assert_eq!(t.rows[0][2], "5,000 (4,000-6,000)", "median (min-max)");
        assert_eq!(t.rows[1][2], "0.500", "no spread, no range");
        assert_eq!(format_ratio(6020.4), "6,020x slower");
        assert_eq!(format_ratio(1_207_303.0), "1,207,303x slower");
        assert_eq!(format_ratio(0.0002), "5,000x faster");
        assert_eq!(format_ratio(0.83), "1.20x faster");
        assert_eq!(format_ratio(1.001), "same");
        assert_eq!(group_digits(1234.0), "1,234");
        assert_eq!(group_digits(-999.0), "-999");
        assert!(ratio_legend(&sample()).contains("lower is better"));
        assert_eq!(t.rows[1][4], "baseline");
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

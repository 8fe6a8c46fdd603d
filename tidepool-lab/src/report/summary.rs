//! The summary: one line per experiment with its question, the answer in
//! numbers and the verdict, computed from the results, under a line naming
//! the machine and the commit. It opens the terminal output and both
//! reports.

use crate::model::{ExperimentResult, Outcome};
use crate::report::json::Document;

/// The heading line: machine, commit, scale.
pub fn heading(doc: &Document) -> String {
    format!(
        "tidepool-lab {} at commit {} on {} cores ({}, {}), {} scale",
        doc.version, doc.commit, doc.machine.cores, doc.machine.cpu, doc.machine.os, doc.scale
    )
}

/// One line per experiment: `name: question answer`.
pub fn lines(results: &[ExperimentResult]) -> Vec<String> {
    results.iter().map(line).collect()
}

/// The summary line of one experiment.
pub fn line(exp: &ExperimentResult) -> String {
    let e = exp.experiment;
    let answer = (e.verdict)(exp).unwrap_or_else(|| {
        "No answer: a run it needs failed or was not selected (see the table).".into()
    });
    let repeat = if exp.repeat > 1 {
        format!(" (medians of {})", exp.repeat)
    } else {
        String::new()
    };
    format!("{}{repeat}: {} {answer}", e.name, e.question)
}

/// The terminal's summary block.
pub fn text(doc: &Document, results: &[ExperimentResult]) -> String {
    let mut s = format!("== summary ==  {}\n", heading(doc));
    for l in lines(results) {
        s.push_str("- ");
        s.push_str(&l);
        s.push('\n');
    }
    s
}

/// The median of `metric` in run `id` of `exp`, if that run finished.
pub fn median(exp: &ExperimentResult, id: &str, metric: &str) -> Option<f64> {
    exp.runs
        .iter()
        .find(|r| r.spec.id == id && r.outcome == Outcome::Done)
        .and_then(|r| r.measured.get(metric))
}

/// The median, min and max of `metric` in run `id`, if that run finished.
pub fn figure(exp: &ExperimentResult, id: &str, metric: &str) -> Option<(f64, f64, f64)> {
    exp.runs
        .iter()
        .find(|r| r.spec.id == id && r.outcome == Outcome::Done)
        .and_then(|r| r.figure(metric))
}

/// A duration given in milliseconds, in the unit that reads best:
/// `19.8 s`, `2.3 ms`, `0.020 ms`.
pub fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.1} s", v / 1000.0)
    } else if v >= 10.0 {
        format!("{v:.0} ms")
    } else if v >= 1.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.3} ms")
    }
}

/// A count and what it counts, in the singular for one: `1 failed task`,
/// `0 failed tasks`, `3 failed tasks`. `n` is rounded to a whole number
/// first (a median over repetitions can fall between two).
pub fn count(n: f64, one: &str, many: &str) -> String {
    let whole = format!("{n:.0}");
    let noun = if whole == "1" { one } else { many };
    format!("{whole} {noun}")
}

/// How many times `a` is `b`, in words: `about the same`, `3.6x`.
pub fn times(a: f64, b: f64) -> String {
    if b == 0.0 || !a.is_finite() || !b.is_finite() {
        return "-".into();
    }
    let x = a / b;
    if x >= 100.0 {
        format!("{}x", crate::report::table::group_digits(x))
    } else if x >= 10.0 {
        format!("{x:.0}x")
    } else {
        format!("{x:.1}x")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_factors_read_plainly() {
        assert_eq!(ms(19806.0), "19.8 s");
        assert_eq!(ms(25.4), "25 ms");
        assert_eq!(ms(2.34), "2.3 ms");
        assert_eq!(ms(0.0199), "0.020 ms");
        assert_eq!(times(19806.0, 0.02), "990,300x");
        assert_eq!(times(36.0, 1.0), "36x");
        assert_eq!(times(3.61, 1.0), "3.6x");
        assert_eq!(times(1.0, 0.0), "-");
    }

    #[test]
    fn one_of_a_thing_is_singular() {
        assert_eq!(count(1.0, "failed task", "failed tasks"), "1 failed task");
        assert_eq!(count(0.0, "failed task", "failed tasks"), "0 failed tasks");
        assert_eq!(count(2.0, "thread", "threads"), "2 threads");
        // As the figure reads, not as it is stored.
        assert_eq!(count(1.4, "thread", "threads"), "1 thread");
        assert_eq!(count(0.6, "thread", "threads"), "1 thread");
        assert_eq!(count(1.6, "thread", "threads"), "2 threads");
    }
}

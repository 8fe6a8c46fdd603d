//! `tidepool-lab ablation`: what each of the pool's mechanisms buys.
//!
//! The library can switch each of its mechanisms off, one at a time,
//! through the environment variable `TIDEPOOL_ABLATE` (the library's
//! `control::ablation`; not a setting for services). This subcommand runs,
//! for each mechanism in [`PLAN`], the tidepool runs of the experiments the
//! mechanism exists for, with the mechanism on (the base) and off, in
//! rounds: each round runs the base and then every mechanism's variant,
//! each in a lab process of its own (`tidepool-lab EXPERIMENTS --only RUNS
//! --repeat 1 --json`), so that nothing learned in one variant carries
//! into the next, and the machine's slow spells fall on all of them alike.
//! The order within a round rotates from round to round.
//!
//! The table (written to `--write`, docs/ablation.md in the repository)
//! shows per mechanism and figure the median and spread (min-max) over
//! the rounds with the mechanism on and off, their ratio, and a verdict:
//! off is worse or better when the two spreads do not overlap, else the
//! difference is within the spread. A mechanism with no row outside the
//! spread buys nothing measurable on the runs it exists for.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use clap::Parser;

use crate::report::json::Document;
use crate::stats;

/// The subcommand's name.
pub const ABLATION: &str = "ablation";

/// The environment variable the library reads its switches from.
pub const ABLATE_VAR: &str = "TIDEPOOL_ABLATE";

/// One figure a mechanism is judged by: an experiment, one of its run
/// ids, and a metric of that run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figure {
    /// The experiment's name.
    pub experiment: &'static str,
    /// The run's id.
    pub run: &'static str,
    /// The metric.
    pub metric: &'static str,
}

/// A mechanism (its name in `TIDEPOOL_ABLATE`), why it exists, and the
/// figures that show what it buys: the runs of the experiments it exists
/// for, and the service where it acts on one.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    /// The mechanism's name.
    pub mechanism: &'static str,
    /// What it is for, in a few words.
    pub purpose: &'static str,
    /// Its figures.
    pub figures: &'static [Figure],
}

const fn fig(experiment: &'static str, run: &'static str, metric: &'static str) -> Figure {
    Figure {
        experiment,
        run,
        metric,
    }
}

const SERVICE_RPS: Figure = fig("service", "tidepool-serve", "overload_requests_per_s");
const SERVICE_P99: Figure = fig("service", "tidepool-serve", "overload_p99_ms");
const SERVICE_MAX: Figure = fig("service", "tidepool-serve", "overload_max_ms");
const BURST_COLD: Figure = fig("burst", "tidepool-sleep-cold", "p50_start_ms");
const BURST_WARM: Figure = fig("burst", "tidepool-sleep", "p50_start_ms");
const SHORT_MEAN: Figure = fig("short-blocking", "tidepool", "mean_start_ms");
const SHORT_MAX: Figure = fig("short-blocking", "tidepool", "max_start_ms");
const CONVOY_THREADS: Figure = fig("lock-convoy", "tidepool-10k-100us", "peak_threads");
const CONVOY_WALL: Figure = fig("lock-convoy", "tidepool-10k-100us", "wall_ms");
const TAUGHT_THREADS: Figure = fig(
    "lock-convoy",
    "taught-10k-100us",
    "convoy_peak_busy_threads",
);

/// Every mechanism the library can switch off, with its figures.
pub const PLAN: &[Probe] = &[
    Probe {
        mechanism: "presumption",
        purpose: "closures of a kind learned to block start on threads of their own",
        figures: &[BURST_WARM, SHORT_MEAN, SERVICE_RPS],
    },
    Probe {
        mechanism: "growth-climb",
        purpose: "blocked work grows only while completions rise (lock convoys)",
        figures: &[CONVOY_THREADS, TAUGHT_THREADS, CONVOY_WALL, BURST_COLD],
    },
    Probe {
        mechanism: "wait-classes",
        purpose: "waits outside the process grow without the climb",
        figures: &[BURST_COLD, BURST_WARM, SHORT_MEAN],
    },
    Probe {
        mechanism: "burst",
        purpose: "more replacements than blocked workers while the queue stays",
        figures: &[BURST_COLD, SHORT_MEAN],
    },
    Probe {
        mechanism: "quantum",
        purpose: "a slot lent to queued work while computing tasks hold every slot",
        figures: &[fig("mixed", "tidepool", "mean_start_ms")],
    },
    Probe {
        mechanism: "spare",
        purpose: "a parked spare thread for the next presumed task",
        figures: &[BURST_WARM, SHORT_MEAN, SHORT_MAX],
    },
    Probe {
        mechanism: "fan-out",
        purpose: "a queue of presumed tasks starts as a tree",
        figures: &[BURST_WARM, SHORT_MEAN],
    },
    Probe {
        mechanism: "fairness-turns",
        purpose: "every 61st pick serves the lanes and the deque's oldest task",
        figures: &[
            fig("overload", "tidepool-execute", "max_start_ms"),
            fig("overload", "tidepool-spawn", "max_start_ms"),
        ],
    },
    Probe {
        mechanism: "free-rings",
        purpose: "finished cells freed by the thread that allocated them",
        figures: &[
            fig("thread-per-task", "tidepool", "ns_per_task"),
            fig("thread-per-task", "tidepool-async", "ns_per_task"),
        ],
    },
    Probe {
        mechanism: "coalesce",
        purpose: "searchers wait a little for a batch to gather",
        figures: &[
            fig("thread-per-task", "tidepool", "ns_per_task"),
            fig("fork-join", "fine-spawn", "wall_ms"),
        ],
    },
    Probe {
        mechanism: "handed-off-fifo",
        purpose: "a blocked worker's queued work goes before new arrivals",
        figures: &[SERVICE_P99, SERVICE_MAX, SERVICE_RPS],
    },
    Probe {
        mechanism: "quick-pace",
        purpose: "the monitor ticks at a quarter interval after a find",
        figures: &[SHORT_MEAN, SHORT_MAX, SERVICE_RPS],
    },
    Probe {
        mechanism: "count-again",
        purpose: "a worker back from its block counts against the slots again",
        figures: &[
            fig("fetch-process", "tidepool-16-one-type", "over_quota_ms"),
            fig("fetch-process", "tidepool-16-one-type", "mean_vs_ideal"),
            fig("mixed-kind", "tidepool", "over_quota_ms"),
        ],
    },
    Probe {
        mechanism: "convoy-hold",
        purpose: "while all work is a held convoy, few threads and no spares",
        figures: &[TAUGHT_THREADS, CONVOY_THREADS],
    },
    Probe {
        mechanism: "start-pacing",
        purpose: "threads beyond the slots started for new work are paced",
        figures: &[
            fig("short-blocking", "tidepool", "peak_threads"),
            SHORT_MEAN,
        ],
    },
    Probe {
        mechanism: "reactor-pacing",
        purpose: "a reactor thread pauses while the workers are saturated",
        figures: &[
            fig("async-io", "tidepool-async", "ns_per_round_trip"),
            fig("async-io", "tidepool-tokio-net", "ns_per_round_trip"),
        ],
    },
];

/// `tidepool-lab ablation`: runs [`PLAN`] and writes the table.
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(name = "tidepool-lab ablation")]
pub struct AblationArgs {
    /// Rounds: each runs the base and every mechanism's variant once.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,

    /// Only these mechanisms (comma separated; default: all of them).
    #[arg(long, value_delimiter = ',')]
    pub mechanisms: Vec<String>,

    /// Folder for each variant's lab run (results.json and report).
    #[arg(long, default_value = "ablation-report")]
    pub out: PathBuf,

    /// Write the table to FILE (it is generated whole) instead of
    /// printing it.
    #[arg(long, value_name = "FILE")]
    pub write: Option<PathBuf>,
}

/// Runs the subcommand; `args` are the process's arguments after the
/// program's name and the subcommand's.
pub fn main(args: &[String]) -> ExitCode {
    let parsed = AblationArgs::try_parse_from(
        std::iter::once(format!("tidepool-lab {ABLATION}")).chain(args.iter().cloned()),
    );
    let args = match parsed {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let probes = match chosen(&args.mechanisms) {
        Ok(probes) => probes,
        Err(e) => {
            eprintln!("tidepool-lab {ABLATION}: {e}");
            return ExitCode::from(2);
        }
    };
    let Ok(lab) = std::env::current_exe() else {
        eprintln!("tidepool-lab {ABLATION}: cannot find the lab's own binary");
        return ExitCode::FAILURE;
    };
    let mut values = Values::new();
    let mut failures = Vec::new();
    let mut variants: Vec<Option<&Probe>> = vec![None];
    variants.extend(probes.iter().map(Some));
    let base_figures: Vec<Figure> = union(&probes);
    for round in 0..args.rounds {
        // Rotated, so no variant always runs right after the base.
        let start = round as usize % variants.len();
        for offset in 0..variants.len() {
            let variant = variants[(start + offset) % variants.len()];
            let (name, figures) = match variant {
                None => ("base", base_figures.as_slice()),
                Some(p) => (p.mechanism, p.figures),
            };
            let out = args.out.join(format!("{name}-{}", round + 1));
            let began = Instant::now();
            match run_variant(&lab, variant.map(|p| p.mechanism), figures, &out) {
                Ok(doc) => {
                    values.add(name, &doc, figures);
                    eprintln!(
                        "round {}/{}: {name}: {:.1} s",
                        round + 1,
                        args.rounds,
                        began.elapsed().as_secs_f64()
                    );
                }
                Err(e) => {
                    eprintln!("round {}/{}: {name}: {e}", round + 1, args.rounds);
                    failures.push(format!("round {} {name}: {e}", round + 1));
                }
            }
        }
    }
    let table = render(&probes, &values, args.rounds, &failures);
    match &args.write {
        None => print!("{table}"),
        Some(path) => {
            if let Err(e) = std::fs::write(path, &table) {
                eprintln!("tidepool-lab {ABLATION}: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
            eprintln!("ablation table written to {}", path.display());
        }
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The probes `names` picks (all of them if empty), or the unknown name.
pub fn chosen(names: &[String]) -> Result<Vec<Probe>, String> {
    if names.is_empty() {
        return Ok(PLAN.to_vec());
    }
    names
        .iter()
        .map(|name| {
            PLAN.iter()
                .find(|p| p.mechanism == name)
                .copied()
                .ok_or_else(|| {
                    let known: Vec<&str> = PLAN.iter().map(|p| p.mechanism).collect();
                    format!(
                        "--mechanisms: {name:?} is no mechanism (known: {})",
                        known.join(", ")
                    )
                })
        })
        .collect()
}

/// Every figure of `probes`, each once, in first-seen order.
pub fn union(probes: &[Probe]) -> Vec<Figure> {
    let mut all: Vec<Figure> = Vec::new();
    for figure in probes.iter().flat_map(|p| p.figures) {
        if !all.contains(figure) {
            all.push(*figure);
        }
    }
    all
}

/// The lab's arguments that run `figures`' runs once each:
/// the experiments, then `--only experiment/run,...`.
pub fn lab_args(figures: &[Figure]) -> Vec<String> {
    let mut experiments: Vec<&str> = Vec::new();
    let mut runs: Vec<String> = Vec::new();
    for f in figures {
        if !experiments.contains(&f.experiment) {
            experiments.push(f.experiment);
        }
        let run = format!("{}/{}", f.experiment, f.run);
        if !runs.contains(&run) {
            runs.push(run);
        }
    }
    let mut args: Vec<String> = experiments.iter().map(|e| e.to_string()).collect();
    args.extend(["--only".to_string(), runs.join(",")]);
    args.extend([
        "--repeat".to_string(),
        "1".to_string(),
        "--json".to_string(),
    ]);
    args
}

/// Runs one variant in a lab process of its own, with `mechanism` switched
/// off (none: the base), and returns its document.
fn run_variant(
    lab: &Path,
    mechanism: Option<&str>,
    figures: &[Figure],
    out: &Path,
) -> Result<Document, String> {
    let mut command = Command::new(lab);
    command
        .args(lab_args(figures))
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match mechanism {
        Some(name) => command.env(ABLATE_VAR, name),
        None => command.env_remove(ABLATE_VAR),
    };
    let output = command
        .output()
        .map_err(|e| format!("could not start the lab: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str::<Document>(&text).map_err(|e| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        format!(
            "no results ({e}; exit {:?}): {}",
            output.status.code(),
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        )
    })
}

/// Each figure's values, per variant (`base` or a mechanism), over the
/// rounds.
#[derive(Debug, Default)]
pub struct Values {
    by: BTreeMap<(String, Figure), Vec<f64>>,
}

impl Ord for Figure {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.experiment, self.run, self.metric).cmp(&(other.experiment, other.run, other.metric))
    }
}

impl PartialOrd for Figure {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Values {
    /// No values yet.
    pub fn new() -> Values {
        Values::default()
    }

    /// Adds what `doc` measured of `figures` under `variant`. A run that
    /// failed, or a metric it does not have, adds nothing.
    pub fn add(&mut self, variant: &str, doc: &Document, figures: &[Figure]) {
        for f in figures {
            let value = doc
                .experiments
                .iter()
                .filter(|e| e.name == f.experiment)
                .flat_map(|e| &e.runs)
                .find(|r| r.id == f.run && r.status == "ok")
                .and_then(|r| r.metrics.get(f.metric))
                .and_then(serde_json::Value::as_f64);
            if let Some(value) = value {
                self.by
                    .entry((variant.to_string(), *f))
                    .or_default()
                    .push(value);
            }
        }
    }

    /// The values of `figure` under `variant`.
    pub fn of(&self, variant: &str, figure: Figure) -> &[f64] {
        self.by
            .get(&(variant.to_string(), figure))
            .map_or(&[], Vec::as_slice)
    }
}

/// Whether a larger value of `metric` is the better one (a rate).
pub fn higher_is_better(metric: &str) -> bool {
    metric.ends_with("_per_s")
}

/// What switching the mechanism off did to one figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Off is worse, beyond both spreads: the mechanism buys this.
    Buys,
    /// Off is better, beyond both spreads: the mechanism costs this.
    Costs,
    /// The spreads overlap.
    WithinSpread,
    /// A side has no values.
    NoData,
}

/// Judges `on` against `off` for `metric`.
pub fn verdict(metric: &str, on: &[f64], off: &[f64]) -> Verdict {
    let range = |v: &[f64]| {
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (min, max)
    };
    if on.is_empty() || off.is_empty() {
        return Verdict::NoData;
    }
    let ((on_min, on_max), (off_min, off_max)) = (range(on), range(off));
    let (off_worse, off_better) = if higher_is_better(metric) {
        (off_max < on_min, off_min > on_max)
    } else {
        (off_min > on_max, off_max < on_min)
    };
    if off_worse {
        Verdict::Buys
    } else if off_better {
        Verdict::Costs
    } else {
        Verdict::WithinSpread
    }
}

/// Median (nearest rank), min and max of `values`; `None` if empty.
fn spread(values: &[f64]) -> Option<(f64, f64, f64)> {
    let summary = stats::Summary::of(values)?;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    Some((summary.p50, min, summary.max))
}

/// `median (min-max)` of `values`, or `-`.
fn cell(values: &[f64]) -> String {
    match spread(values) {
        Some((median, min, max)) => crate::report::table::format_figure(median, min, max),
        None => "-".to_string(),
    }
}

/// The Markdown document.
pub fn render(probes: &[Probe], values: &Values, rounds: u32, failures: &[String]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# What each mechanism buys\n\n\
         <!-- Generated by `tidepool-lab ablation --write docs/ablation.md`: rerun it, do not edit. -->\n\n\
         Each mechanism of the pool switched off alone (`TIDEPOOL_ABLATE`, the library's\n\
         `control/ablation.rs`), on the tidepool runs of the experiments it exists for.\n\
         {rounds} rounds; in each, the base (every mechanism on) and each variant ran once, each\n\
         in a lab process of its own (`--repeat 1`), in an order rotated per round.\n\
         Figures: median (min-max) over the rounds. Verdict: *buys* when switching it off\n\
         made the figure worse beyond both spreads, *costs* when better, else *within spread*.\n\
         Lower is better except for rates (`_per_s`)."
    );
    let _ = writeln!(
        s,
        "\n| mechanism | what it is for | run | figure | on | off | off/on | verdict |\n|---|---|---|---|---|---|---|---|"
    );
    for p in probes {
        for (i, f) in p.figures.iter().enumerate() {
            let on = values.of("base", *f);
            let off = values.of(p.mechanism, *f);
            let ratio = match (spread(on), spread(off)) {
                (Some((a, ..)), Some((b, ..))) if a != 0.0 => format!("{:.2}x", b / a),
                _ => "-".to_string(),
            };
            let verdict = match verdict(f.metric, on, off) {
                Verdict::Buys => "**buys**",
                Verdict::Costs => "costs",
                Verdict::WithinSpread => "within spread",
                Verdict::NoData => "no data",
            };
            let (name, purpose) = if i == 0 {
                (format!("`{}`", p.mechanism), p.purpose)
            } else {
                (String::new(), "")
            };
            let _ = writeln!(
                s,
                "| {name} | {purpose} | {}/{} | `{}` | {} | {} | {ratio} | {verdict} |",
                f.experiment,
                f.run,
                f.metric,
                cell(on),
                cell(off)
            );
        }
    }
    if !failures.is_empty() {
        let _ = writeln!(s, "\nVariants that gave no results:\n");
        for f in failures {
            let _ = writeln!(s, "- {f}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_runs_every_figure_once_and_the_lab_args_pick_them() {
        let all = union(PLAN);
        assert!(all
            .iter()
            .all(|f| all.iter().filter(|g| *g == f).count() == 1));
        let args = lab_args(&[BURST_COLD, BURST_WARM, SHORT_MEAN]);
        assert_eq!(
            args,
            [
                "burst",
                "short-blocking",
                "--only",
                "burst/tidepool-sleep-cold,burst/tidepool-sleep,short-blocking/tidepool",
                "--repeat",
                "1",
                "--json"
            ]
        );
    }

    #[test]
    fn an_unknown_mechanism_is_named_with_the_known_ones() {
        let e = chosen(&["spare".into(), "sparse".into()]).unwrap_err();
        assert!(
            e.contains("\"sparse\" is no mechanism (known: presumption, "),
            "{e}"
        );
        assert_eq!(chosen(&[]).unwrap().len(), PLAN.len());
    }

    #[test]
    fn a_verdict_needs_the_spreads_apart_and_knows_which_way_is_better() {
        assert_eq!(
            verdict("wall_ms", &[10.0, 12.0], &[13.0, 15.0]),
            Verdict::Buys
        );
        assert_eq!(
            verdict("wall_ms", &[10.0, 12.0], &[11.0, 15.0]),
            Verdict::WithinSpread
        );
        assert_eq!(
            verdict("wall_ms", &[10.0, 12.0], &[8.0, 9.0]),
            Verdict::Costs
        );
        assert_eq!(
            verdict("x_requests_per_s", &[10.0, 12.0], &[8.0, 9.0]),
            Verdict::Buys
        );
        assert_eq!(verdict("wall_ms", &[], &[8.0]), Verdict::NoData);
    }
}

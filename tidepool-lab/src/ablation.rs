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
//! the rounds with the mechanism on and off, their ratio, and in how many
//! rounds the figure was worse with it off than the base's of the same
//! round (pairs in one round share the machine's state, which swings by
//! 2x within minutes here, so pairs say more than the spreads). The
//! verdict: *buys* when off was worse in all rounds but at most one (of
//! at least five), *costs* when better in as many, else *no clear
//! difference*. A mechanism with no *buys* row buys nothing measurable on
//! the runs it exists for.
//!
//! Each variant's lab run is kept (`--out`, one folder per variant and
//! round), so `--from` renders the table again from them without running.

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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
            SERVICE_RPS,
            SERVICE_P99,
        ],
    },
    Probe {
        mechanism: "hold",
        purpose: "a worker back from its block waits for a slot while every slot is taken",
        figures: &[
            fig("fetch-process", "tidepool-16-one-type", "mean_vs_ideal"),
            fig("fetch-process", "tidepool-64-one-type", "mean_vs_ideal"),
            fig("mixed-kind", "tidepool", "over_quota_ms"),
            SERVICE_RPS,
            SERVICE_P99,
        ],
    },
    Probe {
        mechanism: "wake-here",
        purpose: "a held worker handed a slot wakes on the giver's core",
        figures: &[
            fig("fetch-process", "tidepool-64-declared", "mean_vs_ideal"),
            fig("fetch-process", "tidepool-256-one-type", "mean_vs_ideal"),
            SERVICE_RPS,
            SERVICE_P99,
        ],
    },
    Probe {
        mechanism: "pull-here",
        purpose: "a thread about to leave its CPU idle pulls a worker waiting behind another",
        figures: &[
            SERVICE_RPS,
            SERVICE_P99,
            fig("fetch-process", "tidepool-64-one-type", "mean_vs_ideal"),
        ],
    },
    Probe {
        mechanism: "cpu-sentinel",
        purpose: "a thread per CPU that runs when the CPU would idle has the monitor look at once",
        figures: &[
            fig("overload", "tidepool-execute", "max_start_ms"),
            fig("overload", "tidepool-spawn", "max_start_ms"),
            SERVICE_RPS,
            SERVICE_P99,
            CONVOY_THREADS,
        ],
    },
    Probe {
        mechanism: "convoy-hold",
        purpose: "while all work is a held convoy, few threads and no spares",
        figures: &[TAUGHT_THREADS, CONVOY_THREADS],
    },
    Probe {
        mechanism: "sibling-runs",
        purpose: "no climb with nothing ended while a task of the kind is runnable (a stalled lock holder)",
        figures: &[
            TAUGHT_THREADS,
            fig("lock-convoy", "loaded-10k-100us", "convoy_peak_busy_threads"),
        ],
    },
    Probe {
        mechanism: "reactor-pacing",
        purpose: "a reactor thread pauses, or steps aside, while the workers are saturated",
        figures: &[
            fig("async-io", "tidepool-async", "ns_per_round_trip"),
            fig("async-io", "tidepool-tokio-net", "ns_per_round_trip"),
            fig("async-io", "tidepool-connect-burst-1slot", "mean_start_ms"),
        ],
    },
];

/// `tidepool-lab ablation`: runs [`PLAN`] and writes the table.
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(name = "tidepool-lab ablation")]
pub struct AblationArgs {
    /// Rounds: each runs the base and every mechanism's variant once.
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..))]
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

    /// Run nothing: render the table from the variants' runs kept in DIR
    /// by an earlier `--out DIR` (`base-1/results.json`, ...).
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
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
    let mut values = Values::new();
    let mut failures = Vec::new();
    let mut variants: Vec<Option<&Probe>> = vec![None];
    variants.extend(probes.iter().map(Some));
    let base_figures: Vec<Figure> = union(&probes);
    if let Some(dir) = &args.from {
        let rounds = kept_rounds(dir, &variants, &base_figures, &mut values);
        if rounds == 0 {
            eprintln!(
                "tidepool-lab {ABLATION}: {}: no base-N/results.json",
                dir.display()
            );
            return ExitCode::from(2);
        }
        return write_table(&args, &render(&probes, &values, rounds, &failures), true);
    }
    let Ok(lab) = std::env::current_exe() else {
        eprintln!("tidepool-lab {ABLATION}: cannot find the lab's own binary");
        return ExitCode::FAILURE;
    };
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
                    values.add(name, round + 1, &doc, figures);
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
    write_table(&args, &table, failures.is_empty())
}

/// Prints `table` or writes it to `--write`.
fn write_table(args: &AblationArgs, table: &str, ok: bool) -> ExitCode {
    match &args.write {
        None => print!("{table}"),
        Some(path) => {
            if let Err(e) = std::fs::write(path, table) {
                eprintln!("tidepool-lab {ABLATION}: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
            eprintln!("ablation table written to {}", path.display());
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Reads the variants' runs kept in `dir` (`NAME-ROUND/results.json`)
/// into `values`; returns how many rounds the base has.
fn kept_rounds(
    dir: &Path,
    variants: &[Option<&Probe>],
    base_figures: &[Figure],
    values: &mut Values,
) -> u32 {
    let mut rounds = 0;
    for round in 1.. {
        let mut any = false;
        for variant in variants {
            let (name, figures) = match variant {
                None => ("base", base_figures),
                Some(p) => (p.mechanism, p.figures),
            };
            let path = dir.join(format!("{name}-{round}")).join("results.json");
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            if let Ok(doc) = serde_json::from_str::<Document>(&text) {
                values.add(name, round, &doc, figures);
                any = true;
                if variant.is_none() {
                    rounds = round;
                }
            }
        }
        if !any {
            break;
        }
    }
    rounds
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

/// The lab's arguments that run `figures`' runs once each, at the full
/// scale (the runs' ids and figures are the README's): the experiments,
/// then `--only experiment/run,...`.
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
    args.extend(["--full", "--repeat", "1", "--json"].map(String::from));
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
    /// Per variant and figure, the value of each round (numbered from 1).
    by: BTreeMap<(String, Figure), BTreeMap<u32, f64>>,
    /// The commits the variants' lab runs were built from.
    commits: std::collections::BTreeSet<String>,
}

impl Values {
    /// No values yet.
    pub fn new() -> Values {
        Values::default()
    }

    /// Adds what `doc` measured of `figures` under `variant` in `round`. A
    /// run that failed, or a metric it does not have, adds nothing.
    pub fn add(&mut self, variant: &str, round: u32, doc: &Document, figures: &[Figure]) {
        self.commits.insert(doc.commit.clone());
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
                    .insert(round, value);
            }
        }
    }

    /// The values of `figure` under `variant`, in round order.
    pub fn of(&self, variant: &str, figure: Figure) -> Vec<f64> {
        self.by
            .get(&(variant.to_string(), figure))
            .map(|rounds| rounds.values().copied().collect())
            .unwrap_or_default()
    }

    /// The rounds in which both `a` and `b` measured `figure`: pairs of
    /// (`a`'s value, `b`'s value).
    pub fn pairs(&self, a: &str, b: &str, figure: Figure) -> Vec<(f64, f64)> {
        let (Some(a), Some(b)) = (
            self.by.get(&(a.to_string(), figure)),
            self.by.get(&(b.to_string(), figure)),
        ) else {
            return Vec::new();
        };
        a.iter()
            .filter_map(|(round, x)| b.get(round).map(|y| (*x, *y)))
            .collect()
    }
}

/// Whether a larger value of `metric` is the better one (a rate).
pub fn higher_is_better(metric: &str) -> bool {
    metric.ends_with("_per_s")
}

/// What switching the mechanism off did to one figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Off was worse in all rounds but at most one: the mechanism buys
    /// this.
    Buys,
    /// Off was better in as many: the mechanism costs this.
    Costs,
    /// Neither.
    NoClearDifference,
    /// Fewer than [`MIN_PAIRS`] rounds with both.
    TooFewRounds,
}

/// The fewest paired rounds a verdict needs.
pub const MIN_PAIRS: usize = 5;

/// In how many of `pairs` (on, off) the figure `metric` was worse off.
pub fn worse_off(metric: &str, pairs: &[(f64, f64)]) -> usize {
    let higher = higher_is_better(metric);
    pairs
        .iter()
        .filter(|(on, off)| if higher { off < on } else { off > on })
        .count()
}

/// Judges the rounds' pairs (on, off) of `metric`.
pub fn verdict(metric: &str, pairs: &[(f64, f64)]) -> Verdict {
    let n = pairs.len();
    if n < MIN_PAIRS {
        return Verdict::TooFewRounds;
    }
    let worse = worse_off(metric, pairs);
    // Better off is worse off with the roles swapped.
    let better = pairs
        .iter()
        .filter(|(on, off)| worse_off(metric, &[(*off, *on)]) == 1)
        .count();
    if worse + 1 >= n {
        Verdict::Buys
    } else if better + 1 >= n {
        Verdict::Costs
    } else {
        Verdict::NoClearDifference
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
         Figures: median (min-max) over the rounds. *Worse off*: in how many rounds the\n\
         figure was worse with the mechanism off than the base's of the same round.\n\
         Verdict: *buys* when worse off in all rounds but at most one, *costs* when better\n\
         in as many, else *no clear difference*. Lower is better except for rates (`_per_s`)."
    );
    let commits: Vec<&str> = values.commits.iter().map(String::as_str).collect();
    let _ = writeln!(
        s,
        "\nThe lab's commit: {}. Command: `tidepool-lab ablation --rounds {rounds} --write docs/ablation.md`.",
        if commits.is_empty() { "-".to_string() } else { commits.join(", ") }
    );
    let _ = writeln!(
        s,
        "\n| mechanism | what it is for | run | figure | on | off | off/on | worse off | verdict |\n|---|---|---|---|---|---|---|---|---|"
    );
    for p in probes {
        for (i, f) in p.figures.iter().enumerate() {
            let on = values.of("base", *f);
            let off = values.of(p.mechanism, *f);
            let pairs = values.pairs("base", p.mechanism, *f);
            let ratio = match (spread(&on), spread(&off)) {
                (Some((a, ..)), Some((b, ..))) if a != 0.0 => format!("{:.2}x", b / a),
                _ => "-".to_string(),
            };
            let worse = format!("{} of {}", worse_off(f.metric, &pairs), pairs.len());
            let verdict = match verdict(f.metric, &pairs) {
                Verdict::Buys => "**buys**",
                Verdict::Costs => "costs",
                Verdict::NoClearDifference => "no clear difference",
                Verdict::TooFewRounds => "too few rounds",
            };
            let (name, purpose) = if i == 0 {
                (format!("`{}`", p.mechanism), p.purpose)
            } else {
                (String::new(), "")
            };
            let _ = writeln!(
                s,
                "| {name} | {purpose} | {}/{} | `{}` | {} | {} | {ratio} | {worse} | {verdict} |",
                f.experiment,
                f.run,
                f.metric,
                cell(&on),
                cell(&off)
            );
        }
    }
    let _ = writeln!(
        s,
        "\nThe free rings and coalescing exist for the spawn path, which thread-per-task\n\
         (one repetition in a fresh process) measures too noisily to judge them; the\n\
         spawn benches' pairs, and why each mechanism with no *buys* row is kept, are in\n\
         docs/measurements.md (\"What each mechanism buys\")."
    );
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
                "--full",
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
    fn a_verdict_needs_all_rounds_but_one_the_same_way_and_knows_which_way_is_better() {
        let worse = [
            (10.0, 13.0),
            (12.0, 15.0),
            (9.0, 9.5),
            (30.0, 31.0),
            (11.0, 10.0),
        ];
        assert_eq!(verdict("wall_ms", &worse), Verdict::Buys);
        assert_eq!(worse_off("wall_ms", &worse), 4);
        // For a rate, lower off is worse.
        assert_eq!(verdict("x_requests_per_s", &worse), Verdict::Costs);
        let mixed = [
            (10.0, 13.0),
            (12.0, 15.0),
            (9.0, 8.0),
            (30.0, 29.0),
            (11.0, 12.0),
        ];
        assert_eq!(verdict("wall_ms", &mixed), Verdict::NoClearDifference);
        assert_eq!(verdict("wall_ms", &worse[..4]), Verdict::TooFewRounds);
    }

    #[test]
    fn values_pair_the_rounds_both_variants_measured() {
        let mut values = Values::new();
        let doc = |v: f64| {
            serde_json::from_value::<Document>(serde_json::json!({
                "version": "0", "machine": {"cores": 2, "os": "", "cpu": ""},
                "quick": false, "scale": "full",
                "experiments": [{"name": "burst", "about": "", "baseline": "", "summary": "",
                    "headline": "", "repeat": 1,
                    "runs": [{"id": "tidepool-sleep", "system": "tidepool", "description": "",
                        "status": "ok", "metrics": {"p50_start_ms": v}}]}]
            }))
            .unwrap()
        };
        values.add("base", 1, &doc(1.0), &[BURST_WARM]);
        values.add("base", 2, &doc(2.0), &[BURST_WARM]);
        values.add("spare", 2, &doc(3.0), &[BURST_WARM]);
        values.add("spare", 3, &doc(4.0), &[BURST_WARM]);
        assert_eq!(values.of("base", BURST_WARM), [1.0, 2.0]);
        assert_eq!(values.pairs("base", "spare", BURST_WARM), [(2.0, 3.0)]);
        assert!(values.of("base", BURST_COLD).is_empty());
    }
}

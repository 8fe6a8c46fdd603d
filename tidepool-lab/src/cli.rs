//! The command line: parsing with clap, then validation into a [`Plan`].
//!
//! Every way the input can be wrong ends in a [`UsageError`], a single line
//! that names the problem; `main` prints it and exits with code 2.

use std::fmt;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::experiments::fresh_process::{FreshArgs, RUN_FRESH};
use crate::experiments::service::{ServeArgs, SERVE_SYSTEM};
use crate::experiments::ExperimentKind;
use crate::model::{Experiment, Scale, DEFAULT_RUN_REPEAT};

/// `tidepool-lab`: runs the classic thread-pool experiments on tidepool and
/// its peers (tokio, rayon, threadpool) and writes a report.
#[derive(Debug, Parser)]
#[command(
    name = "tidepool-lab",
    version,
    about,
    long_about = None,
    after_help = "Also: `tidepool-lab readme-table [--write README.md] [--runs PAGE] RESULTS.json...` \
renders the README's results table from results.json files (see its --help)."
)]
pub struct Cli {
    /// Experiments to run (default: all of them, in this order). Without
    /// --full or --quick, the default run: every experiment at the quick
    /// scale, each run 5 times, leaving out the runs of tidepool's other
    /// configurations that only --full runs (about 10 minutes on 2 cores).
    #[arg(value_enum)]
    pub experiments: Vec<ExperimentKind>,

    /// The full scale: the issue's counts, every run, each experiment's
    /// own repetitions (see --repeat); about half an hour on 2 cores.
    #[arg(long, conflicts_with = "quick")]
    pub full: bool,

    /// The default run's scale, every run once: about three minutes on two
    /// cores.
    #[arg(long)]
    pub quick: bool,

    /// Folder for results.json, report.md, report.html and plots/.
    #[arg(long, value_name = "DIR", default_value = "lab-report")]
    pub out: PathBuf,

    /// Print results.json on standard output (tables go to standard error).
    #[arg(long)]
    pub json: bool,

    /// Run only these run ids (comma separated); `experiment/id` picks one
    /// experiment's run when several experiments share an id. The runs an
    /// experiment leaves out by default (too long, or only confirming a
    /// default run) run only when named here.
    #[arg(long, value_name = "ID,...", value_delimiter = ',')]
    pub only: Vec<String>,

    /// Number of work items (requests, tasks, jobs) of every experiment run,
    /// in place of the scale's default.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub items: Option<i64>,

    /// Run every selected run N times, interleaved (A, B, C, A, B, C, ...),
    /// each time on a fresh pool, and report medians with their spread.
    /// Default: 5 in the default run; 1 at --quick; at --full, 5 for
    /// thread-per-task, flood, thread-count, fork-join, burst,
    /// short-blocking, async-io and service, 3 for overload, fetch-process,
    /// learned-then-computes, lock-convoy and mixed-kind, and 1 for the
    /// others.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub repeat: Option<i64>,

    /// Tiny counts and short waits, for the lab's own tests (implies --quick).
    #[arg(long, hide = true)]
    pub tiny: bool,
}

/// What the lab was asked to do, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Experiments to run, in order, each with the run ids selected in it.
    pub experiments: Vec<(ExperimentKind, Vec<&'static str>)>,
    /// Count and duration scale.
    pub scale: Scale,
    /// Item-count override (at least 1).
    pub items: Option<usize>,
    /// `--repeat`: repetitions of every run, in place of the defaults.
    pub repeat: Option<usize>,
    /// Neither `--full` nor `--quick` (nor `--tiny`): the default run, at
    /// the quick scale with [`DEFAULT_RUN_REPEAT`] repetitions.
    pub default_run: bool,
    /// Output folder.
    pub out: PathBuf,
    /// Print the JSON document on standard output.
    pub json: bool,
}

impl Plan {
    /// How many times each run of `experiment` runs: `--repeat` if given,
    /// else [`DEFAULT_RUN_REPEAT`] in the default run, the experiment's
    /// own at `--full`, and once at `--quick`.
    pub fn repeats_of(&self, experiment: &Experiment) -> usize {
        self.repeat.unwrap_or(match self.scale {
            _ if self.default_run => DEFAULT_RUN_REPEAT,
            Scale::Full => experiment.default_repeat,
            Scale::Quick | Scale::Tiny => 1,
        })
    }
}

/// Bad input: one line naming the problem. Exit code 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The subcommand that renders the README's results table.
pub const README_TABLE: &str = "readme-table";

/// `tidepool-lab readme-table`: renders one Markdown table from one or more
/// `results.json` files, merged (an experiment in a later file replaces the
/// same experiment in an earlier one): per experiment the headline figure
/// of tidepool's run and of each peer in the same run, median (min-max),
/// the peer's ratio to tidepool, and the command that made the run; and
/// the list of those runs (commit, scale, machine), below the table or,
/// with `--runs`, on a page of its own.
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(name = "tidepool-lab readme-table")]
pub struct ReadmeArgs {
    /// The results.json files, in order: a later file's experiment
    /// replaces an earlier file's of the same name.
    #[arg(required = true, value_name = "RESULTS.json")]
    pub results: Vec<PathBuf>,

    /// Write the table into FILE, between its `<!-- results:begin -->` and
    /// `<!-- results:end -->` lines, instead of printing it.
    #[arg(long, value_name = "FILE")]
    pub write: Option<PathBuf>,

    /// Write the list of runs (each run's command, commit, scale and
    /// machine) into PAGE, between its `<!-- runs:begin -->` and
    /// `<!-- runs:end -->` lines, and link PAGE from the table instead of
    /// listing the runs below it.
    #[arg(long, value_name = "PAGE")]
    pub runs: Option<PathBuf>,
}

/// What parsing the arguments led to.
#[derive(Debug)]
pub enum Parsed {
    /// Run this plan.
    Run(Plan),
    /// `--help` or `--version`: print this text and exit successfully.
    Info(String),
    /// `serve-system`: be one of the `service` experiment's servers.
    Serve(ServeArgs),
    /// `run-fresh`: carry out one repetition of a run in this process.
    Fresh(FreshArgs),
    /// `readme-table`: render the README's results table.
    ReadmeTable(ReadmeArgs),
}

/// The command line as `results.json` and the report record it:
/// `tidepool-lab` and the arguments, each quoted for a POSIX shell where it
/// needs it. The program's path (`target/release/tidepool-lab`, or what
/// `cargo run` passed) is left out: `tidepool-lab ARGS` runs the same as
/// `cargo run --release -p tidepool-lab -- ARGS`.
pub fn command_line<I, T>(args: I) -> String
where
    I: IntoIterator<Item = T>,
    T: AsRef<str>,
{
    let mut line = String::from("tidepool-lab");
    for arg in args.into_iter().skip(1) {
        line.push(' ');
        line.push_str(&shell_quoted(arg.as_ref()));
    }
    line
}

/// `arg` as a shell would need it: as it is when it has only characters no
/// shell treats specially, else in single quotes.
fn shell_quoted(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./,:=@%+".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// Parses and validates `args` (the first item is the program name).
///
/// # Errors
///
/// A [`UsageError`] for unknown experiments or ids, bad counts and any other
/// malformed argument. The output folder is checked later, by the report
/// writer, because checking means writing to it.
pub fn parse<I, T>(args: I) -> Result<Parsed, UsageError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    if args.get(1).is_some_and(|a| a == SERVE_SYSTEM) {
        return ServeArgs::try_parse_from(&args[1..])
            .map(Parsed::Serve)
            .map_err(|e| UsageError(one_line(&e.render().to_string())));
    }
    if args.get(1).is_some_and(|a| a == RUN_FRESH) {
        return FreshArgs::try_parse_from(&args[1..])
            .map(Parsed::Fresh)
            .map_err(|e| UsageError(one_line(&e.render().to_string())));
    }
    if args.get(1).is_some_and(|a| a == README_TABLE) {
        return match ReadmeArgs::try_parse_from(&args[1..]) {
            Ok(readme) => Ok(Parsed::ReadmeTable(readme)),
            Err(e) => match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    Ok(Parsed::Info(e.render().to_string()))
                }
                _ => Err(UsageError(one_line(&e.render().to_string()))),
            },
        };
    }
    match Cli::try_parse_from(args) {
        Ok(cli) => plan(cli).map(Parsed::Run),
        Err(e) => match e.kind() {
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                Ok(Parsed::Info(e.render().to_string()))
            }
            _ => Err(UsageError(one_line(&e.render().to_string()))),
        },
    }
}

/// Squeezes clap's multi-line message into one line: the lines before the
/// usage block, joined, without the `error: ` prefix.
fn one_line(rendered: &str) -> String {
    let parts: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let joined = parts.join("; ");
    let joined = joined
        .strip_prefix("error: ")
        .unwrap_or(&joined)
        .to_string();
    if joined.is_empty() {
        "invalid arguments (see --help)".to_string()
    } else {
        joined
    }
}

fn plan(cli: Cli) -> Result<Plan, UsageError> {
    let scale = if cli.tiny {
        Scale::Tiny
    } else if cli.full {
        Scale::Full
    } else {
        Scale::Quick
    };
    let default_run = !(cli.tiny || cli.full || cli.quick);
    let items = count("--items", cli.items)?;
    let repeat = count("--repeat", cli.repeat)?;
    if cli.out.as_os_str().is_empty() {
        return Err(UsageError(
            "--out needs a folder name, got an empty one".into(),
        ));
    }

    let mut kinds: Vec<ExperimentKind> = Vec::new();
    for k in &cli.experiments {
        if !kinds.contains(k) {
            kinds.push(*k);
        }
    }
    let named_experiments = !kinds.is_empty();
    if !named_experiments {
        kinds = ExperimentKind::value_variants().to_vec();
    }

    let experiments = if cli.only.is_empty() {
        kinds
            .iter()
            .map(|k| {
                let e = k.experiment();
                let ids = if default_run {
                    e.short_run_ids()
                } else {
                    e.default_run_ids()
                };
                (*k, ids)
            })
            .collect()
    } else {
        select_ids(&kinds, &cli.only, named_experiments)?
    };
    Ok(Plan {
        experiments,
        scale,
        items,
        repeat,
        default_run,
        out: cli.out,
        json: cli.json,
    })
}

/// Checks an optional count flag: at least 1 and fits this machine.
fn count(flag: &str, value: Option<i64>) -> Result<Option<usize>, UsageError> {
    match value {
        None => Ok(None),
        Some(n) if n >= 1 => usize::try_from(n)
            .map(Some)
            .map_err(|_| UsageError(format!("{flag} {n} is too large for this machine"))),
        Some(n) => Err(UsageError(format!(
            "{flag} must be a count of at least 1, got {n}"
        ))),
    }
}

/// Applies `--only` to the chosen experiments. Every id must match a run of
/// at least one of them; experiments left without a run are dropped unless
/// they were named explicitly (then it is an error).
fn select_ids(
    kinds: &[ExperimentKind],
    only: &[String],
    named_experiments: bool,
) -> Result<Vec<(ExperimentKind, Vec<&'static str>)>, UsageError> {
    let mut wanted: Vec<(Option<ExperimentKind>, String)> = Vec::new();
    for raw in only {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(UsageError("--only has an empty id".into()));
        }
        match raw.split_once('/') {
            Some((exp, id)) => {
                let kind = ExperimentKind::from_str(exp, false).map_err(|_| {
                    UsageError(format!(
                        "--only {raw}: unknown experiment '{exp}' (known: {})",
                        known_experiments()
                    ))
                })?;
                wanted.push((Some(kind), id.to_string()));
            }
            None => wanted.push((None, raw.to_string())),
        }
    }

    for (exp, id) in &wanted {
        let found = kinds
            .iter()
            .filter(|k| exp.is_none_or(|e| e == **k))
            .any(|k| k.experiment().run(id).is_some());
        if !found {
            let scope = match exp {
                Some(e) => format!("experiment {}", e.name()),
                None if named_experiments => "the chosen experiments".to_string(),
                None => "any experiment".to_string(),
            };
            let mut known: Vec<&str> = kinds
                .iter()
                .filter(|k| exp.is_none_or(|e| e == **k))
                .flat_map(|k| k.experiment().run_ids())
                .collect();
            known.sort_unstable();
            known.dedup();
            return Err(UsageError(format!(
                "--only: unknown run id '{id}' in {scope} (known: {})",
                known.join(", ")
            )));
        }
    }

    let mut out = Vec::new();
    for k in kinds {
        let ids: Vec<&'static str> = k
            .experiment()
            .run_ids()
            .into_iter()
            .filter(|id| {
                wanted
                    .iter()
                    .any(|(e, w)| e.is_none_or(|e| e == *k) && w == id)
            })
            .collect();
        if ids.is_empty() {
            if named_experiments {
                return Err(UsageError(format!(
                    "--only selects no run of experiment {} (its ids: {})",
                    k.name(),
                    k.experiment().run_ids().join(", ")
                )));
            }
            continue;
        }
        out.push((*k, ids));
    }
    Ok(out)
}

fn known_experiments() -> String {
    ExperimentKind::value_variants()
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::service::ServeSystem;

    fn run(args: &[&str]) -> Result<Plan, UsageError> {
        let mut all = vec!["tidepool-lab"];
        all.extend_from_slice(args);
        match parse(all)? {
            Parsed::Run(p) => Ok(p),
            Parsed::Info(_) | Parsed::Serve(_) | Parsed::Fresh(_) | Parsed::ReadmeTable(_) => {
                panic!("unexpected {args:?}")
            }
        }
    }

    fn err(args: &[&str]) -> String {
        let e = run(args).expect_err("should fail").0;
        assert!(!e.contains('\n'), "error must be one line: {e:?}");
        e
    }

    #[test]
    fn defaults_to_every_experiment_at_quick_scale_without_the_full_only_runs() {
        let p = run(&[]).unwrap();
        assert_eq!(p.experiments.len(), ExperimentKind::value_variants().len());
        assert_eq!(p.scale, Scale::Quick);
        assert!(p.default_run);
        let waiting = &p.experiments[0].1;
        assert!(!waiting.contains(&"gradual500-sleep"), "{waiting:?}");
        let full = run(&["--full"]).unwrap();
        assert_eq!(full.scale, Scale::Full);
        assert!(!full.default_run);
        assert!(full.experiments[0].1.contains(&"gradual500-sleep"));
        assert!(run(&["--quick"]).unwrap().experiments[0]
            .1
            .contains(&"gradual500-sleep"));
        assert!(err(&["--full", "--quick"]).contains("--quick"));
        assert_eq!(p.out, PathBuf::from("lab-report"));
        assert!(!p.json);
        assert_eq!(p.experiments[0].0, ExperimentKind::Waiting);
        assert!(p.experiments[0].1.contains(&"adaptive-sleep"));
        assert_eq!(p.experiments[6].0, ExperimentKind::ForkJoin);
    }

    #[test]
    fn names_and_flags() {
        let p = run(&["flood", "cpu-bound", "--quick", "--out", "x", "--json"]).unwrap();
        let kinds: Vec<_> = p.experiments.iter().map(|e| e.0).collect();
        assert_eq!(kinds, vec![ExperimentKind::Flood, ExperimentKind::CpuBound]);
        assert_eq!(p.scale, Scale::Quick);
        assert!(p.json);
        assert_eq!(run(&["--tiny"]).unwrap().scale, Scale::Tiny);
    }

    #[test]
    fn only_filters_runs_and_experiments() {
        let p = run(&["--only", "adaptive,fixed2"]).unwrap();
        let got: Vec<_> = p
            .experiments
            .iter()
            .map(|(k, ids)| (k.name(), ids.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("thread-count", vec!["fixed2", "adaptive"]),
                ("cpu-bound", vec!["adaptive"]),
            ]
        );
        let p = run(&["--only", "cpu-bound/adaptive"]).unwrap();
        assert_eq!(
            p.experiments,
            vec![(ExperimentKind::CpuBound, vec!["adaptive"])]
        );
    }

    #[test]
    fn unknown_experiment_is_one_line() {
        let e = err(&["nosuch"]);
        assert!(e.contains("nosuch"), "{e}");
    }

    #[test]
    fn unknown_id_is_named() {
        let e = err(&["--only", "bogus-id"]);
        assert!(e.contains("bogus-id"), "{e}");
        let e = err(&["--only", "nope/adaptive"]);
        assert!(e.contains("nope"), "{e}");
        let e = err(&["waiting", "--only", "fixed2"]);
        assert!(e.contains("fixed2"), "{e}");
    }

    #[test]
    fn counts_must_be_positive() {
        assert!(err(&["--items", "0"]).contains("at least 1"));
        assert!(err(&["--items", "-5"]).contains("-5"));
        assert!(err(&["--items", "many"]).contains("many"));
        assert_eq!(run(&["--items", "7"]).unwrap().items, Some(7));
        assert!(err(&["--repeat", "0"]).contains("--repeat must be a count of at least 1, got 0"));
        assert_eq!(run(&["--repeat", "3"]).unwrap().repeat, Some(3));
    }

    #[test]
    fn opt_in_runs_run_only_when_named() {
        let p = run(&["lock-convoy"]).unwrap();
        assert!(!p.experiments[0].1.contains(&"tidepool-100k-100us"));
        assert!(p.experiments[0].1.contains(&"tidepool-100k-20us"));
        let p = run(&["--only", "lock-convoy/tidepool-100k-100us,fixed-100k-100us"]).unwrap();
        assert_eq!(
            p.experiments,
            vec![(
                ExperimentKind::LockConvoy,
                vec!["tidepool-100k-100us", "fixed-100k-100us"]
            )]
        );
    }

    #[test]
    fn repeats_default_by_experiment_at_full_scale_only() {
        let full = run(&["--full"]).unwrap();
        let flood = ExperimentKind::Flood.experiment();
        let waiting = ExperimentKind::Waiting.experiment();
        assert_eq!(full.repeats_of(flood), 5);
        assert_eq!(full.repeats_of(waiting), 1);
        assert_eq!(full.repeats_of(ExperimentKind::ForkJoin.experiment()), 5);
        let default = run(&[]).unwrap();
        assert_eq!(default.repeats_of(waiting), DEFAULT_RUN_REPEAT);
        assert_eq!(default.repeats_of(flood), DEFAULT_RUN_REPEAT);
        assert_eq!(run(&["--quick"]).unwrap().repeats_of(flood), 1);
        assert_eq!(run(&["--repeat", "2"]).unwrap().repeats_of(waiting), 2);
    }

    #[test]
    fn unknown_flag_is_one_line() {
        let e = err(&["--frobnicate"]);
        assert!(e.contains("--frobnicate"), "{e}");
    }

    #[test]
    fn serve_system_is_a_hidden_subcommand() {
        let parsed = parse([
            "tidepool-lab",
            "serve-system",
            "tokio-inline",
            "--db",
            "/tmp/x.sqlite",
            "--upstream",
            "127.0.0.1:4000",
        ]);
        let Ok(Parsed::Serve(args)) = parsed else {
            panic!("{parsed:?}")
        };
        assert_eq!(args.system, ServeSystem::TokioInline);
        assert_eq!(args.upstream.port(), 4000);
        let e = parse(["tidepool-lab", "serve-system", "nosuch"]).unwrap_err();
        assert!(e.0.contains("nosuch"), "{e}");
        let Ok(Parsed::Info(help)) = parse(["tidepool-lab", "--help"]) else {
            panic!("help")
        };
        assert!(!help.contains(SERVE_SYSTEM), "hidden: {help}");
    }

    #[test]
    fn run_fresh_is_a_hidden_subcommand() {
        let parsed = parse([
            "tidepool-lab",
            "run-fresh",
            "burst",
            "tidepool-sleep-cold",
            "--scale",
            "quick",
            "--cores",
            "2",
            "--calibrated",
            "1000000:77",
        ]);
        let Ok(Parsed::Fresh(args)) = parsed else {
            panic!("{parsed:?}")
        };
        assert_eq!(args.experiment, ExperimentKind::Burst);
        assert_eq!(args.run, "tidepool-sleep-cold");
        assert_eq!(args.scale, Scale::Quick);
        assert_eq!(args.items, None);
        assert_eq!(
            args.calibrated,
            vec![(std::time::Duration::from_millis(1), 77)]
        );
        let e = parse(["tidepool-lab", "run-fresh", "burst", "x"]).unwrap_err();
        assert!(e.0.contains("--scale"), "{e}");
        let Ok(Parsed::Info(help)) = parse(["tidepool-lab", "--help"]) else {
            panic!("help")
        };
        assert!(!help.contains(RUN_FRESH), "hidden: {help}");
    }

    #[test]
    fn readme_table_is_a_subcommand() {
        let parsed = parse([
            "tidepool-lab",
            "readme-table",
            "a.json",
            "b.json",
            "--write",
            "README.md",
            "--runs",
            "docs/results/README.md",
        ]);
        let Ok(Parsed::ReadmeTable(args)) = parsed else {
            panic!("{parsed:?}")
        };
        assert_eq!(
            args.results,
            vec![PathBuf::from("a.json"), PathBuf::from("b.json")]
        );
        assert_eq!(args.write, Some(PathBuf::from("README.md")));
        assert_eq!(args.runs, Some(PathBuf::from("docs/results/README.md")));
        let e = parse(["tidepool-lab", "readme-table"]).unwrap_err();
        assert!(e.0.contains("RESULTS.json"), "{e}");
        assert!(matches!(
            parse(["tidepool-lab", "readme-table", "--help"]),
            Ok(Parsed::Info(_))
        ));
        let Ok(Parsed::Info(help)) = parse(["tidepool-lab", "--help"]) else {
            panic!("help")
        };
        assert!(help.contains(README_TABLE), "named in --help: {help}");
    }

    #[test]
    fn the_command_line_is_recorded_as_tidepool_lab_and_its_arguments() {
        assert_eq!(
            command_line(["target/release/tidepool-lab"]),
            "tidepool-lab"
        );
        assert_eq!(
            command_line(["/x/tidepool-lab", "waiting", "--quick", "--repeat", "5"]),
            "tidepool-lab waiting --quick --repeat 5"
        );
        assert_eq!(
            command_line(["tidepool-lab", "--out", "my report", "--only", "it's"]),
            r"tidepool-lab --out 'my report' --only 'it'\''s'"
        );
        assert_eq!(command_line(["tidepool-lab", ""]), "tidepool-lab ''");
    }

    #[test]
    fn help_is_info() {
        assert!(matches!(
            parse(["tidepool-lab", "--help"]),
            Ok(Parsed::Info(_))
        ));
    }
}

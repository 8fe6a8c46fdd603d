//! One repetition of a run in a process of its own: the lab's binary
//! started again as `tidepool-lab run-fresh <experiment> <run id> --scale
//! <scale> --cores <n> [--items <n>] [--calibrated <ns>:<rounds>]...`, which
//! carries the run out once and prints what it measured as one line of JSON
//! on its standard output.
//!
//! Why: a process remembers. tidepool learns per process which kinds of
//! task block (and from then on hands them threads as they are spawned),
//! and any system leaves threads' stacks, allocator arenas and touched pages
//! behind. A run that must start cold, or must not inherit what an earlier
//! system left, asks for a fresh process with `in_fresh_process`; the
//! `service` experiment's server processes are the same idea for a system
//! measured from outside.
//!
//! The lab's calibrations (`work::calibrations`) go along, so the run in
//! the fresh process does exactly the same work as the lab's other runs.

use std::io::{Read, Write};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{start_process_wide_threads, ExperimentKind};
use crate::aggregate::Measured;
use crate::model::{Experiment, RunCtx, Scale};
use crate::progress::RunBar;
use crate::work;

/// The hidden subcommand that runs one repetition in this process (the lab
/// starts it; not for people).
pub const RUN_FRESH: &str = "run-fresh";

/// `tidepool-lab run-fresh`: one repetition of one run, in this process.
#[derive(Debug, Clone, PartialEq, Eq, clap::Parser)]
#[command(name = "tidepool-lab run-fresh")]
pub struct FreshArgs {
    /// The experiment.
    #[arg(value_enum)]
    pub experiment: ExperimentKind,
    /// The run's id.
    pub run: String,
    /// The lab's scale.
    #[arg(long, value_enum)]
    pub scale: Scale,
    /// The lab's `--items`.
    #[arg(long)]
    pub items: Option<usize>,
    /// The cores the lab counted.
    #[arg(long)]
    pub cores: usize,
    /// A calibration the lab made: a target in nanoseconds and its rounds.
    #[arg(long = "calibrated", value_name = "NS:ROUNDS", value_parser = parse_calibration)]
    pub calibrated: Vec<(Duration, u64)>,
}

/// `<nanoseconds>:<rounds>`.
fn parse_calibration(text: &str) -> Result<(Duration, u64), String> {
    let (ns, rounds) = text
        .split_once(':')
        .ok_or_else(|| format!("{text}: want <nanoseconds>:<rounds>"))?;
    let ns: u64 = ns.parse().map_err(|e| format!("{text}: {e}"))?;
    let rounds: u64 = rounds.parse().map_err(|e| format!("{text}: {e}"))?;
    Ok((Duration::from_nanos(ns), rounds))
}

/// Runs `here` in a fresh process: starts the lab's binary again for run
/// `id` of `experiment`, which calls this same function with
/// [`RunCtx::own_process`] set, so `here` runs there; returns what it
/// measured. A process that has not answered within `limit` is killed.
///
/// # Errors
///
/// The run's own error, or why the process did not give a result.
pub(crate) fn in_fresh_process(
    ctx: &RunCtx,
    experiment: &Experiment,
    id: &str,
    limit: Duration,
    here: impl FnOnce(&RunCtx) -> Result<Measured, String>,
) -> Result<Measured, String> {
    if ctx.own_process {
        return here(ctx);
    }
    ctx.bar.phase("in a process of its own");
    let exe = std::env::current_exe().map_err(|e| format!("the lab's own binary: {e}"))?;
    let mut command = Command::new(exe);
    command
        .arg(RUN_FRESH)
        .arg(experiment.name)
        .arg(id)
        .arg("--scale")
        .arg(ctx.scale.name())
        .arg("--cores")
        .arg(ctx.cores.to_string());
    if let Some(n) = ctx.items {
        command.arg("--items").arg(n.to_string());
    }
    for (target, rounds) in work::calibrations() {
        command
            .arg("--calibrated")
            .arg(format!("{}:{rounds}", target.as_nanos()));
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("the run's process: {e}"))?;
    let mut stdout = child.stdout.take().ok_or("the run's process: no stdout")?;
    let (send, output) = mpsc::channel();
    thread::Builder::new()
        .name("lab-fresh-out".into())
        .spawn(move || {
            let mut text = String::new();
            let read = stdout.read_to_string(&mut text).map(|_| text);
            let _ = send.send(read);
        })
        .map_err(|e| format!("the run's process reader: {e}"))?;
    let Ok(read) = output.recv_timeout(limit) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!(
            "the run's process gave no result within {:.0} s and was killed",
            limit.as_secs_f64()
        ));
    };
    let status = child
        .wait()
        .map_err(|e| format!("the run's process: {e}"))?;
    let text = read.map_err(|e| format!("the run's process's output: {e}"))?;
    match text.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(line) => decode(line),
        None => Err(format!(
            "the run's process ended ({status}) without a result"
        )),
    }
}

/// The `run-fresh` subcommand: carries the run out once and prints the
/// result as one line of JSON. Exit code 0 when it measured, 1 when it
/// failed.
pub fn run_here(args: &FreshArgs) -> ExitCode {
    let experiment = args.experiment.experiment();
    let outcome = match experiment.run(&args.run) {
        None => Err(format!(
            "experiment {} has no run {}",
            experiment.name, args.run
        )),
        Some(spec) => {
            for (target, rounds) in &args.calibrated {
                work::remember_calibration(*target, *rounds);
            }
            start_process_wide_threads();
            let ctx = RunCtx {
                scale: args.scale,
                items: args.items,
                cores: args.cores,
                bar: RunBar::hidden(),
                own_process: true,
            };
            (spec.execute)(&ctx)
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", encode(&outcome));
    let _ = out.flush();
    if outcome.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// A result as it crosses from the run's process to the lab. JSON has no
/// NaN, so figures are optional numbers (`null` stands for NaN).
#[derive(Debug, Serialize, Deserialize)]
enum Reply {
    /// What the run measured.
    Measured {
        metrics: Vec<(String, Option<f64>)>,
        note: Option<String>,
        per_item: Vec<Option<f64>>,
        threads: Option<(String, Vec<(f64, f64)>)>,
    },
    /// Why it failed.
    Failed(String),
}

/// One line of JSON for `outcome`.
fn encode(outcome: &Result<Measured, String>) -> String {
    let finite = |v: f64| (!v.is_nan()).then_some(v);
    let reply = match outcome {
        Ok(m) => Reply::Measured {
            metrics: m
                .metrics
                .iter()
                .map(|(n, v)| ((*n).to_string(), finite(*v)))
                .collect(),
            note: m.note.clone(),
            per_item: m.per_item.iter().map(|v| finite(*v)).collect(),
            threads: m.threads.clone(),
        },
        Err(e) => Reply::Failed(e.clone()),
    };
    serde_json::to_string(&reply).expect("a reply always serialises")
}

/// The result a line of [`encode`] carries.
fn decode(line: &str) -> Result<Measured, String> {
    let reply: Reply = serde_json::from_str(line)
        .map_err(|e| format!("the run's process answered {line:?}: {e}"))?;
    match reply {
        Reply::Failed(e) => Err(e),
        Reply::Measured {
            metrics,
            note,
            per_item,
            threads,
        } => Ok(Measured {
            metrics: metrics
                .into_iter()
                .map(|(n, v)| (intern(&n), v.unwrap_or(f64::NAN)))
                .collect(),
            note,
            per_item: per_item
                .into_iter()
                .map(|v| v.unwrap_or(f64::NAN))
                .collect(),
            threads,
        }),
    }
}

/// A metric name as the `&'static str` [`Measured`] keeps: each distinct
/// name is leaked once (a few dozen per lab run).
fn intern(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<Vec<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(|| Mutex::new(Vec::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(known) = names.iter().find(|n| **n == name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.push(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_crosses_the_process_boundary_unchanged() {
        let mut m = Measured::default();
        m.put("p50_start_ms", 0.25);
        m.put("broken_ms", f64::NAN);
        m.note = Some("A note.".into());
        m.per_item = vec![1.0, f64::NAN, 3.0];
        m.threads = Some(("sampled".into(), vec![(0.0, 2.0), (0.5, 4.0)]));
        let line = encode(&Ok(m));
        assert!(!line.contains('\n'), "one line: {line}");
        let back = decode(&line).unwrap();
        assert_eq!(back.metrics[0], ("p50_start_ms", 0.25));
        assert_eq!(back.metrics[1].0, "broken_ms");
        assert!(back.metrics[1].1.is_nan(), "NaN travels as null");
        assert_eq!(back.note.as_deref(), Some("A note."));
        assert_eq!(back.per_item[0], 1.0);
        assert!(back.per_item[1].is_nan());
        assert_eq!(back.threads.unwrap().1, vec![(0.0, 2.0), (0.5, 4.0)]);
        assert_eq!(decode(&encode(&Err("boom".into()))).unwrap_err(), "boom");
        assert!(decode("not json").unwrap_err().contains("not json"));
    }

    #[test]
    fn names_are_interned_once() {
        let a = intern("some_metric_ms");
        let b = intern(&String::from("some_metric_ms"));
        assert!(std::ptr::eq(a, b));
    }

    #[test]
    fn calibrations_parse() {
        assert_eq!(
            parse_calibration("1000000:4242"),
            Ok((Duration::from_millis(1), 4242))
        );
        assert!(parse_calibration("12").is_err());
        assert!(parse_calibration("x:1").is_err());
    }
}

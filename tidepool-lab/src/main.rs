//! `tidepool-lab`: runs the experiments and writes the report; with
//! `readme-table`, renders the README's results table from results.json
//! files.
//!
//! Exit codes: 0 success, 1 a run failed or the
//! report could not be written, 2 bad input.
#![forbid(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

use clap::ValueEnum;
use tidepool_lab::cli::{self, Parsed, ReadmeArgs};
use tidepool_lab::experiments::ExperimentKind;
use tidepool_lab::lab;
use tidepool_lab::model::Outcome;
use tidepool_lab::probe::{self, Machine};
use tidepool_lab::report::{self, json::Document};

fn main() -> ExitCode {
    // What each mechanism buys: a driver of lab runs of its own.
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(tidepool_lab::ablation::ABLATION) {
        return tidepool_lab::ablation::main(&args[2..]);
    }
    let plan = match cli::parse(std::env::args_os()) {
        Ok(Parsed::Run(plan)) => plan,
        Ok(Parsed::Info(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        // One of the `service` experiment's server processes.
        Ok(Parsed::Serve(args)) => return tidepool_lab::experiments::service::serve(&args),
        // One repetition of a run that wants a process of its own.
        Ok(Parsed::Fresh(args)) => {
            return tidepool_lab::experiments::fresh_process::run_here(&args)
        }
        Ok(Parsed::ReadmeTable(args)) => return readme_table(&args),
        Err(e) => {
            eprintln!("tidepool-lab: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = report::check_out_dir(&plan.out) {
        eprintln!("tidepool-lab: {e}");
        return ExitCode::from(2);
    }

    let machine = Machine::detect();
    let command = cli::command_line(std::env::args());
    let results = lab::run(&plan, machine.cores);
    let doc = Document::new(machine, probe::git_commit(), command, plan.scale, &results);
    // With --json, standard output carries the document only.
    let tables = report::text::render(&doc, &results);
    if plan.json {
        eprint!("{tables}");
    } else {
        print!("{tables}");
        let _ = std::io::stdout().flush();
    }
    match report::write(&plan.out, &doc, &results, plan.scale) {
        Ok(files) => {
            let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
            eprintln!("report written: {}", names.join(", "));
        }
        Err(e) => {
            eprintln!("tidepool-lab: {e}");
            return ExitCode::FAILURE;
        }
    }
    if plan.json {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(doc.to_json().as_bytes());
        let _ = out.flush();
    }
    let failed = results
        .iter()
        .flat_map(|e| &e.runs)
        .filter(|r| matches!(r.outcome, Outcome::Failed(_)))
        .count();
    if failed > 0 {
        eprintln!("tidepool-lab: {failed} run(s) failed; see the report");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// `readme-table`: reads the documents, renders the table, and prints it
/// or writes it between the markers of `--write`'s file. A file that
/// cannot be read or parsed, or a target without its markers, is bad
/// input (exit 2); a target that cannot be written, a failure (exit 1).
fn readme_table(args: &ReadmeArgs) -> ExitCode {
    let mut docs = Vec::new();
    for path in &args.results {
        let parsed = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str::<Document>(&text).map_err(|e| e.to_string()));
        match parsed {
            Ok(doc) => docs.push(doc),
            Err(e) => {
                eprintln!("tidepool-lab: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        }
    }
    let order: Vec<&str> = ExperimentKind::value_variants()
        .iter()
        .map(|k| k.name())
        .collect();
    let block = report::readme::render(&docs, &order);
    let Some(target) = &args.write else {
        print!("{block}");
        return ExitCode::SUCCESS;
    };
    let spliced = std::fs::read_to_string(target)
        .map_err(|e| e.to_string())
        .and_then(|text| report::readme::splice(&text, &block));
    match spliced {
        Ok(text) => match std::fs::write(target, text) {
            Ok(()) => {
                eprintln!("results table written into {}", target.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("tidepool-lab: {}: {e}", target.display());
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("tidepool-lab: {}: {e}", target.display());
            ExitCode::from(2)
        }
    }
}

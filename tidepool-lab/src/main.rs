//! `tidepool-lab`: runs the experiments and writes the report.
//!
//! Exit codes: 0 success, 1 a run failed or the
//! report could not be written, 2 bad input.
#![forbid(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

use tidepool_lab::cli::{self, Parsed};
use tidepool_lab::lab;
use tidepool_lab::model::Outcome;
use tidepool_lab::probe::{self, Machine};
use tidepool_lab::report::{self, json::Document};

fn main() -> ExitCode {
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

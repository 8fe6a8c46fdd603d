//! tidepool-lab: the classic thread-pool experiments, run on tidepool and on
//! the pools a user would pick instead (tokio, rayon, the threadpool crate,
//! a thread per task), written up as tables, plots and a report.
//!
//! The binary (`src/main.rs`) is a thin shell over this library: [`cli`]
//! parses and validates, [`lab`] runs the experiments, [`report`] writes
//! `results.json`, `report.md` and `report.html`. Both the experiments and
//! the report speak [`model`]'s types (what an experiment, a run and its
//! result are); the experiments also use the report's formatting, never
//! the other way round.
#![forbid(unsafe_code)]

pub mod ablation;
pub mod aggregate;
pub mod cli;
pub mod experiments;
pub mod lab;
pub mod measure;
pub mod model;
pub mod probe;
pub mod progress;
pub mod report;
pub mod stats;
pub mod systems;
pub mod work;

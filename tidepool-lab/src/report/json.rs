//! `results.json`: the stable, machine-readable form of a lab run.
//!
//! Shape (other tools read it; add fields, never rename or remove them):
//!
//! ```text
//! {"version": "0.1.0",
//!  "machine": {"cores": 2, "os": "...", "cpu": "..."},
//!  "commit": "755e7ba", "command": "tidepool-lab waiting --quick",
//!  "quick": true, "scale": "quick",
//!  "experiments": [{"name": "waiting", "about": "...", "baseline": "adaptive-sleep",
//!    "runs": [{"id": "adaptive-sleep", "system": "tidepool", "description": "...",
//!              "status": "ok", "metrics": {"mean_start_ms": 0.4, ...}},
//!             {"id": "rayon-sleep", ..., "status": "failed",
//!              "error": "...", "metrics": {}}]}]}
//! ```
//!
//! `status` is `ok` or `failed` (the reason is in `error`). Earlier versions
//! also wrote `pending` (with a `pending` field naming a library feature);
//! every feature has landed, so neither appears any more. Metric names end
//! in their unit: `_ms`, `_s`, `_ns`, or a count (`items`, `peak_threads`,
//! `errors`, ...).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::{ExperimentResult, Outcome, Scale};
use crate::probe::Machine;

/// The whole document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// The lab's version.
    pub version: String,
    /// Where it ran.
    pub machine: Machine,
    /// `git rev-parse --short HEAD` where the lab ran, or `unknown`.
    #[serde(default = "unknown")]
    pub commit: String,
    /// The command line that made the run, `tidepool-lab` and its
    /// arguments (the program's path shortened to its name; see
    /// [`crate::cli::command_line`]); empty in documents written before
    /// it was recorded.
    #[serde(default)]
    pub command: String,
    /// Whether counts were scaled down (`--quick`).
    pub quick: bool,
    /// `full`, `quick` or `tiny`.
    pub scale: String,
    /// The experiments that ran, in order.
    pub experiments: Vec<ExperimentDoc>,
}

/// One experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentDoc {
    /// Its name (`waiting`, ...).
    pub name: String,
    /// What it shows.
    pub about: String,
    /// The run the ratios compare against (for a run listed in the
    /// experiment's `baselines`, its run's `baseline` says which).
    pub baseline: String,
    /// The summary line: question, answer in numbers, verdict.
    #[serde(default)]
    pub summary: String,
    /// The metric the ratios divide (added with `--repeat`).
    #[serde(default)]
    pub headline: String,
    /// Repetitions planned for every run.
    #[serde(default = "one")]
    pub repeat: usize,
    /// Its runs.
    pub runs: Vec<RunDoc>,
}

/// One run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDoc {
    /// Stable id.
    pub id: String,
    /// System under test.
    pub system: String,
    /// What it did.
    pub description: String,
    /// `ok` or `failed`.
    pub status: String,
    /// Why a failed run failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Named figures, each the median over the repetitions; each name
    /// ends in its unit.
    pub metrics: Map<String, Value>,
    /// Per metric, `{"min", "max"}` over the repetitions.
    #[serde(default)]
    pub spread: Map<String, Value>,
    /// Repetitions that finished (0 for a run that failed at once).
    #[serde(default = "one")]
    pub repeat: usize,
    /// Wall time of all its repetitions, in seconds.
    #[serde(default)]
    pub elapsed_s: f64,
    /// The run its ratio compares with: the experiment's `baseline`,
    /// unless the experiment has several workloads.
    #[serde(default)]
    pub baseline: String,
    /// The metric its ratio divides: the experiment's `headline`, unless
    /// its workload is measured by another (empty in documents written
    /// before runs carried it).
    #[serde(default)]
    pub headline: String,
}

/// Documents written before `commit` existed do not know it.
fn unknown() -> String {
    "unknown".into()
}

/// Documents written before `repeat` existed ran everything once.
fn one() -> usize {
    1
}

/// A number as JSON; JSON has no NaN or infinity, so such a figure is left
/// out (`None`) rather than written as something it is not.
fn number(v: f64) -> Option<Value> {
    serde_json::Number::from_f64(v).map(Value::Number)
}

impl Document {
    /// Builds the document from the lab's results.
    pub fn new(
        machine: Machine,
        commit: String,
        command: String,
        scale: Scale,
        results: &[ExperimentResult],
    ) -> Document {
        Document {
            version: env!("CARGO_PKG_VERSION").to_string(),
            machine,
            commit,
            command,
            quick: scale != Scale::Full,
            scale: scale.name().to_string(),
            experiments: results.iter().map(experiment).collect(),
        }
    }

    /// Pretty JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("the document always serialises") + "\n"
    }
}

fn experiment(e: &ExperimentResult) -> ExperimentDoc {
    ExperimentDoc {
        name: e.experiment.name.to_string(),
        about: e.experiment.about.to_string(),
        baseline: e.experiment.baseline.to_string(),
        headline: e.experiment.headline.to_string(),
        summary: crate::report::summary::line(e),
        repeat: e.repeat,
        runs: e
            .runs
            .iter()
            .map(|r| {
                let mut metrics = Map::new();
                for (name, v) in &r.measured.metrics {
                    if let Some(n) = number(*v) {
                        metrics.insert((*name).to_string(), n);
                    }
                }
                let mut spread = Map::new();
                for s in &r.spread {
                    if let (Some(min), Some(max)) = (number(s.min), number(s.max)) {
                        spread.insert(
                            s.name.to_string(),
                            serde_json::json!({"min": min, "max": max}),
                        );
                    }
                }
                let (status, error) = match &r.outcome {
                    Outcome::Done => ("ok", None),
                    Outcome::Failed(e) => ("failed", Some(e.clone())),
                };
                RunDoc {
                    id: r.spec.id.to_string(),
                    system: r.spec.system.to_string(),
                    description: r.description(),
                    status: status.to_string(),
                    error,
                    metrics,
                    spread,
                    repeat: r.repeat,
                    elapsed_s: r.elapsed_s,
                    baseline: e.experiment.baseline_of(r.spec.id).to_string(),
                    headline: e.experiment.headline_of(r.spec.id).to_string(),
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Measured;
    use crate::aggregate::Spread;
    use crate::model::RunResult;
    use crate::report::fixture::SAMPLE;

    fn machine() -> Machine {
        Machine {
            cores: 2,
            os: "Linux".into(),
            cpu: "test cpu".into(),
        }
    }

    fn results() -> Vec<ExperimentResult> {
        let spec = |id: &str| SAMPLE.run(id).unwrap();
        let mut m = Measured::default();
        m.put("mean_start_ms", 0.4);
        m.put("peak_threads", 55.0);
        m.put("broken_ms", f64::NAN);
        vec![ExperimentResult {
            experiment: &SAMPLE,
            runs: vec![
                RunResult {
                    spec: spec("adaptive-sleep"),
                    outcome: Outcome::Done,
                    measured: m,
                    spread: vec![Spread {
                        name: "mean_start_ms",
                        min: 0.3,
                        max: 0.9,
                    }],
                    repeat: 3,
                    elapsed_s: 31.5,
                },
                RunResult::failed(spec("rayon-sleep"), "boom".into(), 2.0),
            ],
            repeat: 3,
        }]
    }

    #[test]
    fn shape_is_stable() {
        let doc = Document::new(
            machine(),
            "abc1234".into(),
            "tidepool-lab waiting --quick".into(),
            Scale::Quick,
            &results(),
        );
        let v: Value = serde_json::from_str(&doc.to_json()).unwrap();
        assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(v["machine"]["cores"], 2);
        assert_eq!(v["machine"]["os"], "Linux");
        assert_eq!(v["machine"]["cpu"], "test cpu");
        assert_eq!(v["quick"], true);
        let e = &v["experiments"][0];
        assert_eq!(e["name"], "waiting");
        let ok = &e["runs"][0];
        assert_eq!(ok["id"], "adaptive-sleep");
        assert_eq!(ok["system"], "tidepool");
        assert_eq!(ok["status"], "ok");
        assert!(ok["description"].as_str().unwrap().contains("Adaptive"));
        assert_eq!(ok["metrics"]["mean_start_ms"], 0.4);
        assert_eq!(ok["metrics"]["peak_threads"], 55.0);
        assert!(ok["metrics"].get("broken_ms").is_none(), "NaN is left out");
        assert!(ok.get("pending").is_none());
        let keys: Vec<&String> = ok["metrics"].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["mean_start_ms", "peak_threads"],
            "metric order is kept"
        );
        assert_eq!(v["commit"], "abc1234");
        assert_eq!(v["command"], "tidepool-lab waiting --quick");
        assert!(e["summary"]
            .as_str()
            .unwrap()
            .starts_with("waiting (medians of 3): "));
        assert_eq!(e["repeat"], 3);
        assert_eq!(e["headline"], "mean_start_ms");
        assert_eq!(ok["repeat"], 3);
        assert_eq!(ok["spread"]["mean_start_ms"]["min"], 0.3);
        assert_eq!(ok["spread"]["mean_start_ms"]["max"], 0.9);
        assert_eq!(ok["elapsed_s"], 31.5);
        assert_eq!(ok["baseline"], "adaptive-sleep");
        let failed = &e["runs"][1];
        assert_eq!(failed["status"], "failed");
        assert_eq!(failed["error"], "boom");
        assert_eq!(failed["metrics"], serde_json::json!({}));
    }

    #[test]
    fn round_trips() {
        let doc = Document::new(
            machine(),
            "unknown".into(),
            "tidepool-lab".into(),
            Scale::Full,
            &results(),
        );
        let back: Document = serde_json::from_str(&doc.to_json()).unwrap();
        assert_eq!(back, doc);
        assert!(!back.quick);
    }
}

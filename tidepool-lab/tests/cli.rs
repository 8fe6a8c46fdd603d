//! Runs the built binary: bad input exits with 2 and one line; a tiny run of
//! every experiment writes a results.json that parses and has every run id
//! the binary was asked for. No timing is asserted.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tidepool-lab"))
        .args(args)
        .output()
        .expect("run tidepool-lab")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tidepool-lab-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let out_dir = scratch("bad");
    let out = out_dir.to_str().unwrap();
    for args in [
        vec!["nosuch-experiment"],
        vec!["--only", "no-such-id"],
        vec!["--items", "0"],
        vec!["--items", "-3"],
        vec!["--bogus-flag"],
    ] {
        let mut all = args.clone();
        all.extend(["--out", out]);
        let o = lab(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("tidepool-lab: "), "{err}");
    }
    // An output folder that cannot be created: a path below a plain file.
    std::fs::create_dir_all(&out_dir).unwrap();
    let file = out_dir.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let below = file.join("report");
    let o = lab(&[
        "--tiny",
        "--only",
        "fixed2",
        "--out",
        below.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("output folder"), "{err}");
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn tiny_run_of_every_experiment_writes_every_claimed_id() {
    let out_dir = scratch("tiny");
    // A small run of each experiment, tidepool's and its peers'.
    let ids = [
        "waiting/adaptive-sleep",
        "waiting/async-1thread",
        "waiting/gradual500-sleep",
        "thread-per-task/tidepool",
        "thread-per-task/thread-per-task",
        "flood/unthrottled",
        "flood/group-throttled",
        "thread-count/fixed2",
        "thread-count/rayon",
        "cpu-bound/adaptive",
        "cpu-bound/tokio",
        "web-service/adaptive-blocking-client",
        "web-service/tidepool-async-client",
        "fork-join/fib-join",
        "fork-join/fib-scope",
        "fork-join/fib-spawn",
        "fork-join/fib-rayon",
        "fork-join/fib-sequential",
        "fork-join/fine-join",
        "fork-join/fine-scope",
        "fork-join/fine-spawn",
        "fork-join/fine-rayon",
        "fork-join/fine-sequential",
        "fork-join/sort-join",
        "fork-join/sort-scope",
        "fork-join/sort-spawn",
        "fork-join/sort-rayon",
        "fork-join/sort-sequential",
        "fork-join/sumsq-iter",
        "fork-join/sumsq-rayon",
        "fork-join/filter-iter",
        "fork-join/filter-rayon",
        "fork-join/psort-iter",
        "fork-join/psort-rayon",
        "fork-join/words-iter",
        "fork-join/words-rayon",
        "async-io/tidepool-async",
        "async-io/tidepool-tokio-net",
        "async-io/tokio",
        "async-io/async-executor",
        "async-io/tidepool-connect-burst-1slot",
        "async-io/tokio-current-thread-connect-burst",
    ];
    let only = ids.join(",");
    let o = lab(&[
        "--quick",
        "--tiny",
        "--json",
        "--only",
        &only,
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}: {stderr}", o.status);

    let text = std::fs::read_to_string(out_dir.join("results.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let printed: Value = serde_json::from_slice(&o.stdout).expect("--json prints the document");
    assert_eq!(printed, doc);
    assert_eq!(doc["quick"], true);
    assert!(doc["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(doc["version"].is_string());

    let experiments = doc["experiments"].as_array().unwrap();
    // Every experiment but the start-latency ones, which have a test of
    // their own below.
    assert_eq!(experiments.len(), 8, "every experiment ran");
    for want in ids {
        let (exp, id) = want.split_once('/').unwrap();
        let e = experiments
            .iter()
            .find(|e| e["name"] == exp)
            .unwrap_or_else(|| panic!("experiment {exp} missing"));
        let run = e["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("run {want} missing"));
        assert_eq!(run["status"], "ok", "{want}: {}", run["error"]);
        let m = run["metrics"].as_object().unwrap();
        assert!(!m.is_empty(), "{want} has metrics");
        assert!(m.values().all(Value::is_number), "{want}: {m:?}");
    }
    // Every run in the file was asked for: nothing more, nothing less.
    let total: usize = experiments
        .iter()
        .map(|e| e["runs"].as_array().unwrap().len())
        .sum();
    assert_eq!(total, ids.len());
    let web = experiments
        .iter()
        .find(|e| e["name"] == "web-service")
        .unwrap();
    for r in web["runs"].as_array().unwrap() {
        assert_eq!(r["metrics"]["errors"], 0.0, "every request answered");
    }
    // fork-join compares each workload with its own rayon::join run.
    let fork = experiments
        .iter()
        .find(|e| e["name"] == "fork-join")
        .unwrap();
    for r in fork["runs"].as_array().unwrap() {
        let id = r["id"].as_str().unwrap();
        let workload = id.split('-').next().unwrap();
        assert_eq!(r["baseline"], format!("{workload}-rayon"), "{id}");
        assert!(r["metrics"]["peak_threads"].is_number(), "{id}");
    }
    let echo = experiments
        .iter()
        .find(|e| e["name"] == "async-io")
        .unwrap();
    for r in echo["runs"].as_array().unwrap() {
        assert_eq!(r["metrics"]["errors"], 0.0, "every client finished");
        if r["id"].as_str().unwrap().contains("connect-burst") {
            // The connect burst's rows: every task connected and started.
            assert!(r["metrics"]["connections"].as_f64().unwrap() >= 1.0);
            assert!(r["metrics"]["mean_start_ms"].is_number());
            assert_eq!(r["baseline"], "tidepool-connect-burst-1slot");
        } else {
            assert!(r["metrics"]["round_trips"].as_f64().unwrap() >= 1.0);
        }
    }

    // The summary opens both reports and the terminal output: one line per
    // experiment, computed from the results, with the machine and commit.
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    let summary_md = md.find("## Summary").expect("report.md has a summary");
    assert!(summary_md < md.find("## waiting").unwrap(), "summary first");
    let summary_html = html
        .find("class=\"summary\"")
        .expect("report.html has a summary");
    assert!(
        summary_html < html.find("<h2 id=\"waiting\"").unwrap(),
        "summary first"
    );
    let summary_text = stderr.find("== summary ==").expect("terminal summary");
    assert!(
        summary_text < stderr.find("== waiting ==").unwrap(),
        "summary first"
    );
    for e in experiments {
        let line = e["summary"].as_str().unwrap();
        assert!(line.contains("Verdict: "), "{line}");
        assert!(md.contains(line), "report.md has: {line}");
        assert!(stderr.contains(line), "terminal has: {line}");
    }
    assert!(md.contains(" cores ("), "machine in the summary");
    assert!(md.contains("at commit "), "commit in the summary");
    assert!(html.contains("Verdict: "));
    assert!(html.contains("<svg"), "plots are inline");
    assert!(html.contains("<figcaption>"), "every plot says what to see");
    for remote in ["<script", "src=\"http", "href=\"http", "@import"] {
        assert!(!html.contains(remote), "self-contained: found {remote}");
    }
    let leftovers: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn repeat_reports_medians_and_spread_and_logs_each_repetition() {
    let out_dir = scratch("repeat");
    let o = lab(&[
        "--tiny",
        "--repeat",
        "3",
        "--only",
        "thread-count/fixed2,thread-count/adaptive",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}: {stderr}", o.status);

    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    let e = &doc["experiments"][0];
    assert_eq!(e["name"], "thread-count");
    assert_eq!(e["repeat"], 3);
    for run in e["runs"].as_array().unwrap() {
        assert_eq!(run["repeat"], 3, "{}", run["id"]);
        for (name, median) in run["metrics"].as_object().unwrap() {
            let median = median.as_f64().unwrap();
            let s = &run["spread"][name];
            let (min, max) = (s["min"].as_f64().unwrap(), s["max"].as_f64().unwrap());
            assert!(
                min <= median && median <= max,
                "{name}: {min} {median} {max}"
            );
        }
    }

    // Not a terminal here: one line per finished repetition, interleaved.
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("thread-count/"))
        .collect();
    let order: Vec<&str> = lines.iter().map(|l| l.split(':').next().unwrap()).collect();
    assert_eq!(
        order,
        [
            "thread-count/fixed2 (1/3)",
            "thread-count/adaptive (1/3)",
            "thread-count/fixed2 (2/3)",
            "thread-count/adaptive (2/3)",
            "thread-count/fixed2 (3/3)",
            "thread-count/adaptive (3/3)",
        ],
        "{stderr}"
    );
    assert!(
        lines
            .iter()
            .all(|l| l.contains("wall_ms ") && l.contains(" s")),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn tiny_run_of_the_start_latency_experiments() {
    let out_dir = scratch("latency");
    let names = ["burst", "mixed", "short-blocking"];
    let mut args = vec!["--tiny", "--json", "--out", out_dir.to_str().unwrap()];
    args.extend(names);
    let o = lab(&args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}: {stderr}", o.status);
    let doc: Value = serde_json::from_slice(&o.stdout).expect("--json prints the document");
    let experiments = doc["experiments"].as_array().unwrap();
    let got: Vec<&str> = experiments
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(got, names);
    for e in experiments {
        for run in e["runs"].as_array().unwrap() {
            let id = format!("{}/{}", e["name"], run["id"]);
            assert_eq!(run["status"], "ok", "{id}: {}", run["error"]);
            let m = run["metrics"].as_object().unwrap();
            assert!(m.values().all(Value::is_number), "{id}: {m:?}");
            assert!(
                m.keys().any(|k| k.ends_with("start_ms")),
                "{id} measures start latency: {m:?}"
            );
        }
        assert!(e["summary"].as_str().unwrap().contains("Verdict: "));
    }
    // The CPU-bound burst counts running threads; the tidepool runs of
    // short-blocking report their monitor's share of a core.
    let run = |exp: &str, id: &str| {
        experiments.iter().find(|e| e["name"] == exp).unwrap()["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap()["metrics"]
            .clone()
    };
    assert!(run("burst", "tidepool-cpu")["peak_running_workers"].is_number());
    assert!(run("short-blocking", "tidepool")["monitor_cpu_pct"].is_number());
    assert!(run("mixed", "tidepool")["cpu_slowdown"].is_number());
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn tiny_run_of_the_service_experiment_rotates_its_rounds() {
    let out_dir = scratch("service");
    let o = lab(&[
        "service",
        "--tiny",
        "--repeat",
        "2",
        "--json",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}: {stderr}", o.status);
    let doc: Value = serde_json::from_slice(&o.stdout).expect("--json prints the document");
    let e = &doc["experiments"][0];
    assert_eq!(e["name"], "service");
    assert_eq!(e["baseline"], "tokio-spawn-blocking");
    assert!(e["summary"].as_str().unwrap().contains("Verdict: "));
    let ids = [
        "tidepool-serve",
        "tidepool-serve-blocking",
        "tidepool-serve-spawn-fn",
        "tidepool-axum-serve",
        "tokio-spawn-blocking",
        "tokio-inline",
    ];
    let runs = e["runs"].as_array().unwrap();
    let got: Vec<&str> = runs.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(got, ids);
    for run in runs {
        let id = run["id"].as_str().unwrap();
        assert_eq!(run["status"], "ok", "{id}: {}", run["error"]);
        assert_eq!(run["repeat"], 2, "{id}");
        let m = run["metrics"].as_object().unwrap();
        assert!(m.values().all(Value::is_number), "{id}: {m:?}");
        // The fixed rate is one every system serves: every request answered.
        assert_eq!(m["fixed_errors"], 0.0, "{id}");
        for key in [
            "fixed_requests_per_s",
            "fixed_p99_ms",
            "fixed_peak_threads",
            "overload_requests_per_s",
            "overload_errors",
        ] {
            assert!(m.contains_key(key), "{id} has {key}: {m:?}");
        }
        let pool = ["fixed_pool_start_max_ms", "overload_tokio_blocked"];
        let tidepool = run["system"] == "tidepool";
        for key in pool {
            assert_eq!(m.contains_key(key), tidepool, "{id}: {key}");
        }
    }
    // One line per finished round and system; the second round starts one
    // system later.
    let order: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("service/"))
        .map(|l| l.split(':').next().unwrap())
        .collect();
    let mut want: Vec<String> = ids.iter().map(|id| format!("service/{id} (1/2)")).collect();
    want.extend(
        ids.iter()
            .cycle()
            .skip(1)
            .take(ids.len())
            .map(|id| format!("service/{id} (2/2)")),
    );
    assert_eq!(order, want, "{stderr}");
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn tiny_run_of_the_overload_experiment_rotates_fresh_processes() {
    let out_dir = scratch("overload");
    let o = lab(&[
        "overload",
        "--tiny",
        "--repeat",
        "2",
        "--json",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}: {stderr}", o.status);
    let doc: Value = serde_json::from_slice(&o.stdout).expect("--json prints the document");
    let e = &doc["experiments"][0];
    assert_eq!(e["name"], "overload");
    assert_eq!(e["headline"], "max_start_ms");
    assert!(e["summary"].as_str().unwrap().contains("Verdict: "));
    let ids = [
        "tidepool-execute",
        "tidepool-spawn",
        "tokio-inline",
        "tokio-spawn-blocking",
        "threadpool",
    ];
    let runs = e["runs"].as_array().unwrap();
    let got: Vec<&str> = runs.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(got, ids);
    for run in runs {
        let id = run["id"].as_str().unwrap();
        assert_eq!(run["status"], "ok", "{id}: {}", run["error"]);
        assert_eq!(run["repeat"], 2, "{id}");
        let m = run["metrics"].as_object().unwrap();
        assert!(m.values().all(Value::is_number), "{id}: {m:?}");
        for key in [
            "arrivals",
            "p50_start_ms",
            "p99_start_ms",
            "max_start_ms",
            "decile1_max_start_ms",
            "decile10_p50_start_ms",
            "completed",
            "unstarted",
            "peak_threads",
            "max_late_ms",
        ] {
            assert!(m.contains_key(key), "{id} has {key}: {m:?}");
        }
        let tidepool = run["system"] == "tidepool";
        assert_eq!(m.contains_key("pool_start_max_ms"), tidepool, "{id}");
    }
    // Every repetition in a process of its own, the second round one
    // system later.
    let order: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("overload/"))
        .map(|l| l.split(':').next().unwrap())
        .collect();
    let mut want: Vec<String> = ids
        .iter()
        .map(|id| format!("overload/{id} (1/2)"))
        .collect();
    want.extend(
        ids.iter()
            .cycle()
            .skip(1)
            .take(ids.len())
            .map(|id| format!("overload/{id} (2/2)")),
    );
    assert_eq!(order, want, "{stderr}");
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("Longest start latency by arrival decile"));
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn tiny_run_of_the_issue_41_experiments() {
    let out_dir = scratch("quota");
    let names = [
        "fetch-process",
        "learned-then-computes",
        "lock-convoy",
        "mixed-kind",
    ];
    let mut args = vec!["--tiny", "--json", "--out", out_dir.to_str().unwrap()];
    args.extend(names);
    let o = lab(&args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}: {stderr}", o.status);
    let doc: Value = serde_json::from_slice(&o.stdout).expect("--json prints the document");
    let experiments = doc["experiments"].as_array().unwrap();
    let got: Vec<&str> = experiments
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(got, names);
    for e in experiments {
        assert!(e["summary"].as_str().unwrap().contains("Verdict: "), "{e}");
        let computes = e["name"] != "lock-convoy";
        for run in e["runs"].as_array().unwrap() {
            let id = format!("{}/{}", e["name"], run["id"]);
            assert_eq!(run["status"], "ok", "{id}: {}", run["error"]);
            let m = run["metrics"].as_object().unwrap();
            assert!(m.values().all(Value::is_number), "{id}: {m:?}");
            assert!(m.contains_key("peak_threads"), "{id}: {m:?}");
            assert_eq!(m.contains_key("over_quota_ms"), computes, "{id}: {m:?}");
            assert_eq!(m.contains_key("peak_computing"), computes, "{id}: {m:?}");
            let tidepool = run["system"].as_str().unwrap().starts_with("tidepool");
            for key in ["presumptions_failed", "workers_counted_again"] {
                assert_eq!(m.contains_key(key), tidepool, "{id}: {key}");
            }
        }
    }
    // The opt-in rows stay out of a run that does not name them.
    let ids = |exp: &str| -> Vec<String> {
        experiments.iter().find(|e| e["name"] == exp).unwrap()["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids("fetch-process").len(), 15);
    assert!(!ids("fetch-process").contains(&"tokio-16-distinct-types".to_string()));
    assert_eq!(ids("lock-convoy").len(), 26);
    assert_eq!(ids("learned-then-computes").len(), 6);
    assert_eq!(ids("mixed-kind").len(), 3);
    let _ = std::fs::remove_dir_all(&out_dir);
}

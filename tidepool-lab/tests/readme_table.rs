//! `tidepool-lab readme-table`: the fixture documents render as the
//! expected Markdown (`tests/fixtures/`: `results-b.json` re-measures one
//! experiment of `results-a.json`, so its row replaces the earlier one);
//! `--write` and `--runs` replace only what is between the markers; bad
//! input exits with 2 and one line. And the repository's README and
//! `docs/results/README.md` carry exactly what the results in
//! `docs/results/` render to.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clap::ValueEnum;
use tidepool_lab::experiments::ExperimentKind;
use tidepool_lab::report::json::Document;
use tidepool_lab::report::readme::{self, ALSO_SHOWN, BEGIN, END, RUNS_BEGIN, RUNS_END};

fn lab(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tidepool-lab"))
        .arg("readme-table")
        .args(args)
        .output()
        .expect("run tidepool-lab")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn the_fixtures_render_as_expected() {
    let out = stdout(&lab(&[
        &fixture("results-a.json"),
        &fixture("results-b.json"),
    ]));
    let expected = std::fs::read_to_string(fixture("readme-table.md")).unwrap();
    assert_eq!(out, expected);
}

#[test]
fn write_replaces_only_the_block_between_the_markers() {
    let dir = std::env::temp_dir().join(format!("tidepool-lab-readme-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let target = dir.join("README.md");
    let before = format!("# A page\n\nText.\n\n{BEGIN}\nan old table\n{END}\n\nMore text.\n");
    std::fs::write(&target, &before).unwrap();
    let a = fixture("results-a.json");
    let write = Path::new("--write");
    let o = lab(&[&a, write, &target]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.is_empty(), "nothing printed with --write");
    let table = stdout(&lab(&[&a]));
    let after = std::fs::read_to_string(&target).unwrap();
    assert_eq!(
        after,
        format!("# A page\n\nText.\n\n{BEGIN}\n{table}{END}\n\nMore text.\n")
    );

    // A file without the markers is bad input, and is left as it was.
    std::fs::write(&target, "# No markers\n").unwrap();
    let o = lab(&[&a, write, &target]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(BEGIN), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "# No markers\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unreadable_or_malformed_results_exit_2_with_one_line() {
    let missing = fixture("no-such-results.json");
    let malformed = fixture("readme-table.md");
    for path in [&missing, &malformed] {
        let o = lab(&[path]);
        assert_eq!(o.status.code(), Some(2), "{}", path.display());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.starts_with("tidepool-lab: "), "{err}");
    }
}

#[test]
fn the_runs_shown_beside_tidepools_main_run_exist() {
    for (name, ids) in ALSO_SHOWN {
        let kind = ExperimentKind::value_variants()
            .iter()
            .find(|k| k.name() == *name)
            .unwrap_or_else(|| panic!("ALSO_SHOWN names no experiment {name}"));
        for id in *ids {
            let run = kind.experiment().run(id);
            assert!(run.is_some(), "{name} has no run {id}");
            assert_eq!(run.unwrap().system, "tidepool", "{name}/{id}");
        }
    }
}

/// `--runs PAGE` writes the runs list into PAGE and links PAGE from the
/// table, relative to the table's file; a PAGE without its markers is bad
/// input, and then neither file is written.
#[test]
fn runs_writes_the_list_into_its_page_and_the_table_links_it() {
    let dir = std::env::temp_dir().join(format!("tidepool-lab-runs-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    let target = dir.join("README.md");
    let page = dir.join("docs/runs.md");
    let before = format!("# A page\n\n{BEGIN}\nold\n{END}\n");
    std::fs::write(&target, &before).unwrap();
    std::fs::write(&page, "# Runs\n\nNo markers.\n").unwrap();
    let a = fixture("results-a.json");
    let (write, runs) = (Path::new("--write"), Path::new("--runs"));
    let o = lab(&[&a, write, &target, runs, &page]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), before);

    std::fs::write(&page, format!("# Runs\n\n{RUNS_BEGIN}\n{RUNS_END}\n")).unwrap();
    let o = lab(&[&a, write, &target, runs, &page]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let after = std::fs::read_to_string(&target).unwrap();
    assert!(after.contains("[`docs/runs.md`](docs/runs.md)"), "{after}");
    assert!(!after.contains("755e7ba"), "{after}");
    let listed = std::fs::read_to_string(&page).unwrap();
    assert!(
        listed.starts_with(&format!("# Runs\n\n{RUNS_BEGIN}\n")),
        "{listed}"
    );
    assert!(
        listed.contains("(waiting, fork-join): at 755e7ba, full scale\n"),
        "{listed}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What is between `begin` and `end` in `text`.
fn between(text: &str, begin: &str, end: &str) -> Option<String> {
    text.split_once(&format!("\n{begin}\n"))
        .and_then(|(_, rest)| rest.split_once(&format!("\n{end}\n")))
        .map(|(block, _)| format!("{block}\n"))
}

/// The README's results table is generated: what `docs/results/*.json`
/// (in name order) render to, between the markers, with the runs list in
/// `docs/results/README.md`.
#[test]
fn the_readmes_table_is_what_docs_results_render_to() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut results: Vec<PathBuf> = std::fs::read_dir(root.join("docs/results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    results.sort();
    assert!(!results.is_empty(), "docs/results/ has no results");
    let docs: Vec<Document> = results
        .iter()
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    let order: Vec<&str> = ExperimentKind::value_variants()
        .iter()
        .map(|k| k.name())
        .collect();
    let regenerate = "regenerate them:\n  cargo run --release -p tidepool-lab -- readme-table \
         --write README.md --runs docs/results/README.md docs/results/*.json";
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let block = between(&readme, BEGIN, END).expect("README.md has the results markers");
    assert!(
        block == readme::render(&docs, &order, Some("docs/results/README.md")),
        "README.md's results table is not what docs/results/*.json render to; {regenerate}"
    );
    let page = std::fs::read_to_string(root.join("docs/results/README.md")).unwrap();
    let runs =
        between(&page, RUNS_BEGIN, RUNS_END).expect("docs/results/README.md has the runs markers");
    assert!(
        runs.ends_with(&readme::render_runs(&docs, &order)),
        "docs/results/README.md's runs list is not what docs/results/*.json render to; {regenerate}"
    );
}

//! `tidepool-lab readme-table`: the fixture documents render as the
//! expected Markdown (`tests/fixtures/`: `results-b.json` re-measures one
//! experiment of `results-a.json`, so its row replaces the earlier one);
//! `--write` replaces only what is between the markers; bad input exits
//! with 2 and one line. And the repository's README carries exactly what
//! the results in `docs/results/` render to.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clap::ValueEnum;
use tidepool_lab::experiments::ExperimentKind;
use tidepool_lab::report::readme::{ALSO_SHOWN, BEGIN, END};

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

/// The README's results table is generated: what `docs/results/*.json`
/// (in name order) render to, between the markers.
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
    let paths: Vec<&Path> = results.iter().map(PathBuf::as_path).collect();
    let table = stdout(&lab(&paths));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let block = readme
        .split_once(&format!("\n{BEGIN}\n"))
        .and_then(|(_, rest)| rest.split_once(&format!("\n{END}\n")))
        .map(|(block, _)| format!("{block}\n"))
        .expect("README.md has the results markers");
    assert!(
        block == table,
        "README.md's results table is not what docs/results/*.json render to; regenerate it:\n  \
         cargo run --release -p tidepool-lab -- readme-table --write README.md docs/results/*.json"
    );
}

//! The library's modules form one-way layers: a module names only modules
//! below it (the diagram at the top of `src/lib.rs`). This test reads the
//! sources and fails on any `crate::X` path that names a module at the same
//! level or above, which also rules out import circles.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Top to bottom. A module may name only modules that come after it.
const LAYERS: &[&str] = &[
    "loom_models", // test-only, above everything
    "http",
    "iter",
    "global",
    "pool",
    "fork",
    "fair",
    "task",
    "monitor",
    "worker",
    "runtime",
    "interop",
    "control",
    "metrics",
    "trace",
    "reactor",
    "reactor_pacing",
    "sys",
    "sync",
];

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in fs::read_dir(path).unwrap() {
            rust_files(&entry.unwrap().path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_owned());
    }
}

/// The `crate::X` module names a source file uses, comments excluded.
fn named_modules(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.push(name);
            }
        }
        // `use crate::{a, b::c}` groups.
        if let Some(at) = code.find("use crate::{") {
            let group = &code[at + "use crate::{".len()..];
            for part in group.split([',', '}']) {
                let head = part.trim().split("::").next().unwrap_or("").trim();
                let is_name = head.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !head.is_empty() && is_name {
                    names.push(head.to_owned());
                }
            }
        }
    }
    names
}

#[test]
fn modules_name_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let rank: BTreeMap<&str, usize> = LAYERS.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let mut violations = Vec::new();
    for entry in fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        if name == "lib" {
            continue;
        }
        let Some(&own) = rank.get(name.as_str()) else {
            violations.push(format!("module `{name}` is missing from LAYERS"));
            continue;
        };
        let mut files = Vec::new();
        rust_files(&path, &mut files);
        for file in files {
            let source = fs::read_to_string(&file).unwrap();
            for named in named_modules(&source) {
                if let Some(&other) = rank.get(named.as_str()) {
                    if other <= own && named != name {
                        violations.push(format!(
                            "{} names crate::{named}, a layer at or above `{name}`",
                            file.strip_prefix(&src).unwrap().display()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "upward imports:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_checker_sees_plain_and_grouped_paths_but_not_comments() {
    let source =
        "use crate::{runtime::Shared, sync::Arc};\nlet x = crate::pool::Pool; // crate::fair";
    assert_eq!(named_modules(source), ["runtime", "sync", "pool"]);
}

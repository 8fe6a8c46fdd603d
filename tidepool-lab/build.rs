//! Records the commit the lab is built from (`TIDEPOOL_LAB_COMMIT`), so a
//! report names the code that ran, not whatever checkout the binary happens
//! to be started in (a copied binary in an A/B run, or a run outside the
//! repository, used to report the folder's commit or `unknown`).

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_string())
}

fn main() {
    // Rebuilt when the checkout moves to another commit, and when the
    // sources that make up the lab change (so the `-dirty` mark is right).
    if let Some(git_dir) = git(&["rev-parse", "--git-dir"]) {
        let git_dir = PathBuf::from(git_dir);
        println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
        if let (Some(common), Some(head_ref)) = (
            git(&["rev-parse", "--git-common-dir"]),
            git(&["rev-parse", "--symbolic-full-name", "HEAD"]),
        ) {
            let common = PathBuf::from(common);
            println!("cargo:rerun-if-changed={}", common.join(head_ref).display());
            println!(
                "cargo:rerun-if-changed={}",
                common.join("packed-refs").display()
            );
        }
    }
    for sources in ["src", "../tidepool/src", "../Cargo.lock"] {
        println!("cargo:rerun-if-changed={sources}");
    }
    let commit = match git(&["rev-parse", "--short", "HEAD"]) {
        Some(hash) if !hash.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|changes| !changes.is_empty());
            if dirty {
                format!("{hash}-dirty")
            } else {
                hash
            }
        }
        _ => "unknown".to_string(),
    };
    println!("cargo:rustc-env=TIDEPOOL_LAB_COMMIT={commit}");
}

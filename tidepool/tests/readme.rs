//! The repository's README (at the workspace root, outside the package)
//! shows Rust blocks that must compile and run. They are doc-tested through
//! the crate's own README, `tidepool/README.md` (`src/lib.rs` includes it
//! under `cfg(doctest)`), which the package carries: this test checks that
//! every Rust block of the repository's README is in the crate's README,
//! verbatim. Not packaged (`exclude` in Cargo.toml): the repository's README
//! is not in the package.

use std::fs;
use std::path::Path;

/// The fenced blocks of `markdown` whose info string starts with `rust`,
/// each with its fences.
fn rust_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match current.as_mut() {
            None if line.starts_with("```rust") => current = Some(format!("{line}\n")),
            None => {}
            Some(block) => {
                block.push_str(line);
                block.push('\n');
                if line == "```" {
                    blocks.extend(current.take());
                }
            }
        }
    }
    assert!(current.is_none(), "a Rust block is not closed");
    blocks
}

#[test]
fn the_repository_readmes_rust_blocks_are_the_crate_readmes() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repository = fs::read_to_string(crate_dir.join("../README.md")).unwrap();
    let packaged = fs::read_to_string(crate_dir.join("README.md")).unwrap();
    let blocks = rust_blocks(&repository);
    assert!(
        !blocks.is_empty(),
        "the repository's README has no Rust block"
    );
    for block in blocks {
        assert!(
            packaged.contains(&block),
            "this block of README.md is not in tidepool/README.md, where it is \
             doc-tested; copy it there verbatim:\n{block}"
        );
    }
}

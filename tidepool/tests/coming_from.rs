//! `docs/coming-from.md` (the repository's page for users of tokio, rayon,
//! .NET and the threadpool crate) carries the table of the crate docs'
//! "Coming from …" section (`src/lib.rs`), which is the one to edit: there
//! every tidepool name links to its item, so a renamed or removed item
//! fails the doc build (`cargo doc` with warnings denied, in CI). This test
//! fails when the page's table is not the crate's, links written as plain
//! code. `UPDATE_COMING_FROM=1 cargo test -p tidepool --test coming_from`
//! rewrites the page's table from the crate docs. Not packaged (`exclude`
//! in Cargo.toml): the page is not in the package.

use std::fs;
use std::path::Path;

/// The crate docs' table: the `//! |` lines of the "Coming from" section,
/// without the comment marker.
fn crate_table(lib_rs: &str) -> Vec<String> {
    let section: Vec<&str> = lib_rs
        .lines()
        .skip_while(|l| !l.starts_with("//! # Coming from"))
        .skip(1)
        .take_while(|l| !l.starts_with("//! # "))
        .collect();
    assert!(
        !section.is_empty(),
        "src/lib.rs has no \"# Coming from\" section"
    );
    section
        .iter()
        .filter_map(|l| l.strip_prefix("//! "))
        .filter(|l| l.starts_with('|'))
        .map(plain_links)
        .collect()
}

/// The page's table: its lines that start with `|`.
fn page_table(page: &str) -> Vec<String> {
    page.lines()
        .filter(|l| l.starts_with('|'))
        .map(str::to_string)
        .collect()
}

/// A line of rustdoc Markdown as the repository page shows it: an
/// intra-doc link `` [`name`] `` or `` [`text`](path) `` is its code text
/// alone, and a link to a section of the crate docs, `[text](#anchor)`,
/// names that section.
fn plain_links(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let text = &after[..close];
        let tail = &after[close + 1..];
        if let Some(target) = tail.strip_prefix('(').and_then(|t| t.split_once(')')) {
            let (target, tail) = target;
            if target.starts_with('#') {
                out.push_str(&format!("\"{text}\" in the crate docs"));
            } else {
                out.push_str(text);
            }
            rest = tail;
        } else {
            out.push_str(text);
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn links_become_code_text() {
    assert_eq!(
        plain_links("| [`tidepool::spawn(fut)`](spawn) / [`Pool::shutdown`] |"),
        "| `tidepool::spawn(fut)` / `Pool::shutdown` |"
    );
    assert_eq!(
        plain_links("see [tokio-based crates](#tokio-based-crates)"),
        "see \"tokio-based crates\" in the crate docs"
    );
    assert_eq!(plain_links("no links [here"), "no links [here");
}

#[test]
fn the_coming_from_page_is_the_crate_docs_table() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib_rs = fs::read_to_string(crate_dir.join("src/lib.rs")).unwrap();
    let page_path = crate_dir.join("../docs/coming-from.md");
    let page = fs::read_to_string(&page_path).unwrap();
    let want = crate_table(&lib_rs);
    assert!(want.len() > 2, "the crate docs' table has no rows");
    let have = page_table(&page);
    if have == want {
        return;
    }
    if std::env::var_os("UPDATE_COMING_FROM").is_some() {
        let mut lines: Vec<&str> = page.lines().collect();
        let first = lines.iter().position(|l| l.starts_with('|'));
        let at = first.unwrap_or(lines.len());
        lines.retain(|l| !l.starts_with('|'));
        let mut text: Vec<String> = lines.iter().map(|l| (*l).to_string()).collect();
        text.splice(at..at, want.iter().cloned());
        fs::write(&page_path, text.join("\n") + "\n").unwrap();
        return;
    }
    let first_difference = have
        .iter()
        .zip(&want)
        .position(|(h, w)| h != w)
        .unwrap_or(have.len().min(want.len()));
    panic!(
        "docs/coming-from.md's table is not the crate docs' (src/lib.rs, \"Coming from\"): \
         {} rows against {}; first difference at row {}:\n  page:  {}\n  crate: {}\n\
         Edit src/lib.rs, then run `UPDATE_COMING_FROM=1 cargo test -p tidepool --test \
         coming_from` to copy its table to the page.",
        have.len(),
        want.len(),
        first_difference + 1,
        have.get(first_difference).map_or("(none)", String::as_str),
        want.get(first_difference).map_or("(none)", String::as_str),
    );
}

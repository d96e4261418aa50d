//! The documentation holds together: the README stays short, the pages of `docs/` are
//! there, every link between them (and to files of the repository) resolves, anchors
//! included, and every `docs/design.md §N` a source file cites is a section of the design.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::support::rust_files;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The README and every page of `docs/`: (path from the repository's root, text).
pub(crate) fn pages() -> Vec<(PathBuf, String)> {
    let mut paths = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("read docs/")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .filter_map(|p| p.strip_prefix(root()).ok().map(Path::to_path_buf))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(root().join(&p)).expect("read a page");
            (p, text)
        })
        .collect()
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces
/// to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .into_iter()
        .filter(|l| l.starts_with('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

/// The targets of the inline links `[text](target)` on a line.
fn links(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        found.push(after[..end].to_string());
        rest = &after[end..];
    }
    found
}

#[test]
fn the_readme_is_short_and_the_pages_are_there() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README");
    let lines = readme.lines().count();
    assert!(lines <= 400, "the README is {lines} lines (at most 400)");
    let pages = pages();
    assert!(
        pages.iter().any(|(p, _)| p == Path::new("docs/design.md")),
        "docs/design.md"
    );
    assert!(
        pages.len() >= 8,
        "at least six pages besides the README and the design: {pages:?}"
    );
    for (page, _) in &pages[1..] {
        assert!(
            readme.contains(&format!("]({})", page.display())),
            "the README links {}",
            page.display()
        );
    }
}

#[test]
fn every_link_in_the_docs_resolves() {
    let pages = pages();
    let mut checked = 0;
    let mut broken = Vec::new();
    for (page, text) in &pages {
        let dir = page.parent().unwrap_or(Path::new(""));
        for (n, line) in prose(text).into_iter().enumerate() {
            for target in links(line) {
                if target.starts_with("http://")
                    || target.starts_with("https://")
                    || target.starts_with("mailto:")
                {
                    continue;
                }
                checked += 1;
                let (file, anchor) = match target.split_once('#') {
                    Some((file, anchor)) => (file, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let path = if file.is_empty() {
                    page.clone()
                } else {
                    dir.join(file)
                };
                let full = root().join(&path);
                if !full.exists() {
                    broken.push(format!("{}:{}: no file {target}", page.display(), n + 1));
                    continue;
                }
                if let Some(anchor) = anchor {
                    let text = std::fs::read_to_string(&full).unwrap_or_default();
                    if !anchors(&text).contains(anchor) {
                        broken.push(format!(
                            "{}:{}: {} has no section #{anchor}",
                            page.display(),
                            n + 1,
                            path.display()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} links found: is the reader broken?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_design_section_the_code_cites_exists() {
    let design = std::fs::read_to_string(root().join("docs/design.md")).expect("design");
    let sections: BTreeSet<u32> = design
        .lines()
        .filter_map(|l| l.strip_prefix("## ")?.split_once('.')?.0.parse().ok())
        .collect();
    assert!(sections.len() >= 12, "{sections:?}");
    let mut files = Vec::new();
    for folder in ["src", "crates", "tests", "benches"] {
        rust_files(&root().join(folder), &mut files);
    }
    let mut cited = 0;
    let mut missing = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        // "docs/design.md §N", the section number possibly on the next comment line.
        let flat = text.replace("\n//! ", " ").replace("\n    /// ", " ");
        for after in flat.split("docs/design.md").skip(1) {
            let after = after.trim_start();
            for part in after.split(" and ").take(2) {
                let Some(n) = part.strip_prefix('§') else {
                    break;
                };
                let digits: String = n.chars().take_while(char::is_ascii_digit).collect();
                if let Ok(n) = digits.parse::<u32>() {
                    cited += 1;
                    if !sections.contains(&n) {
                        missing.push(format!("{}: §{n}", file.display()));
                    }
                }
            }
        }
        assert!(
            !text.contains(concat!("DESIGN", " section")),
            "{} cites a design document the repository does not have; cite docs/design.md §N",
            file.display()
        );
    }
    assert!(cited > 20, "only {cited} citations found");
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

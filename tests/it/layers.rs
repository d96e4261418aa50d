//! The layering of DESIGN section 7, checked in the source: a part never names a part it
//! may not depend on. Comments are skipped (a doc link to another part is not a
//! dependency); every other line of every file of the part is read.

use std::path::{Path, PathBuf};

/// (the part's folder below `src/`, the paths it must never name, why).
const RULES: &[(&str, &[&str], &str)] = &[
    (
        "core",
        &[
            "crate::prompts",
            "crate::forge",
            "crate::http",
            "crate::store",
            "crate::config",
        ],
        "core is pure: the prompts render its types, not the other way round",
    ),
    (
        "agents",
        &["crate::config"],
        "an adapter takes its own settings type; the config layer converts",
    ),
    (
        "sources",
        &["crate::forge"],
        "issue clients are the HTTP layer's, not the forge's",
    ),
    ("chat", &["crate::forge"], "the Secret lives in core"),
    (
        "http",
        &["crate::forge", "crate::sources", "crate::chat"],
        "the HTTP layer is shared plumbing",
    ),
];

fn rust_files(folder: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn no_part_names_a_part_it_may_not_depend_on() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut broken = Vec::new();
    for (part, forbidden, why) in RULES {
        let mut files = Vec::new();
        let folder = src.join(part);
        rust_files(&folder, &mut files);
        let single = src.join(format!("{part}.rs"));
        if single.is_file() {
            files.push(single);
        }
        assert!(!files.is_empty(), "no source for part {part}");
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read source");
            for (n, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                for name in forbidden.iter() {
                    if code.contains(name) {
                        broken.push(format!(
                            "{}:{}: {part} names {name} ({why})",
                            file.strip_prefix(&src).unwrap_or(&file).display(),
                            n + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "layering broken:\n{}", broken.join("\n"));
}

//! The layering of the design (docs/design.md, the crate map). Between crates the compiler
//! holds it: a crate cannot name one it does not depend on, and the first test here checks
//! that the core depends on no I/O crate, however indirectly. Inside the `executor` crate
//! the parts are still modules, so the second test reads their source: a part never names
//! a part it may not depend on. Comments are skipped (a doc link to another part is not a
//! dependency); every other line of every file of the part is read.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use crate::support::rust_files;

/// What the core may never reach, directly or through another crate.
const IO_CRATES: &[&str] = &[
    "tokio", "sqlx", "rusqlite", "reqwest", "axum", "nix", "hyper", "notify",
];

/// The workspace's crates and, for `executor-core`, every crate its normal dependencies
/// reach (`cargo metadata`, offline: the lock file has them all).
fn core_reaches() -> (Vec<String>, BTreeSet<String>) {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline", "--locked"])
        // Only this platform's packages: the lock file's others need not be downloaded.
        .args(["--filter-platform", &host_triple()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let name_of: HashMap<&str, &str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p["name"].as_str()?)))
        .collect();
    let members: Vec<String> = meta["workspace_members"]
        .as_array()
        .expect("members")
        .iter()
        .filter_map(|id| name_of.get(id.as_str()?).map(|n| n.to_string()))
        .collect();
    let nodes: HashMap<&str, &serde_json::Value> = meta["resolve"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| Some((n["id"].as_str()?, n)))
        .collect();
    let start = name_of
        .iter()
        .find(|(_, name)| **name == "executor-core")
        .map(|(id, _)| *id)
        .expect("an executor-core crate");
    let (mut seen, mut todo) = (BTreeSet::new(), vec![start]);
    while let Some(id) = todo.pop() {
        for dep in nodes[id]["deps"].as_array().into_iter().flatten() {
            let normal = dep["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|k| k["kind"].is_null());
            if let (true, Some(pkg)) = (normal, dep["pkg"].as_str()) {
                if seen.insert(name_of[pkg].to_string()) {
                    todo.push(pkg);
                }
            }
        }
    }
    (members, seen)
}

fn host_triple() -> String {
    let arch = std::env::consts::ARCH;
    match std::env::consts::OS {
        "macos" => format!("{arch}-apple-darwin"),
        _ if cfg!(target_env = "musl") => format!("{arch}-unknown-linux-musl"),
        _ => format!("{arch}-unknown-linux-gnu"),
    }
}

#[test]
fn the_core_crate_reaches_no_io_crate() {
    let (members, reached) = core_reaches();
    assert!(members.len() >= 6, "the workspace's crates: {members:?}");
    // The walk found the graph: the core's own dependencies are in it.
    assert!(
        reached.contains("serde") && reached.contains("chrono"),
        "{reached:?}"
    );
    let io: Vec<&&str> = IO_CRATES.iter().filter(|c| reached.contains(**c)).collect();
    assert!(
        io.is_empty(),
        "executor-core reaches {io:?} (all it reaches: {reached:?})"
    );
}

/// (the part's folder below `src/`, the paths it must never name, why).
const RULES: &[(&str, &[&str], &str)] = &[
    (
        "agents",
        &["crate::config"],
        "an adapter takes its own settings type; the config layer converts",
    ),
    ("chat", &["crate::forge"], "the Secret lives in core"),
    (
        "supervisor",
        &["crate::sandbox", "crate::agents", "crate::config"],
        "the supervisor runs a process; the wall and the adapters build on it",
    ),
    (
        "config",
        &["crate::runner", "crate::forge", "crate::cli"],
        "the config is read before anything runs; what it validates lives below it",
    ),
    (
        "sandbox",
        &[
            "crate::agents",
            "crate::runner",
            "crate::cli",
            "crate::config",
        ],
        "the wall encloses any worker; the adapters and the engine ask it",
    ),
];

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

/// Every HTTP client is built by the one HTTP layer (`executor_http::client::build`: its
/// timeouts, no redirects, the user agent): no other file of any crate builds its own.
#[test]
fn only_the_http_layer_builds_an_http_client() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for krate in std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .flatten()
    {
        if krate.file_name() != "executor-http" {
            rust_files(&krate.path().join("src"), &mut files);
        }
    }
    assert!(files.len() > 100, "only {} files read", files.len());
    let builders: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            ["Client::builder(", "reqwest::Client::new(", "ClientBuilder"]
                .iter()
                .any(|b| text.contains(b))
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        builders.is_empty(),
        "build HTTP clients with executor_http::client::build: {builders:?}"
    );
}

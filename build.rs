//! Puts the commit executor was built from into `--version` (`EXECUTOR_COMMIT`): `git
//! rev-parse --short HEAD`, or "unknown" outside a git checkout (a source tarball, a
//! registry build).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|text| text.trim().to_string())
        .filter(|text| !text.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=EXECUTOR_COMMIT={commit}");
    // A new commit moves HEAD or the branch it names: rebuild then, not on every build.
    // (In a linked worktree HEAD is in its own git dir, the branches in the common one.)
    let mut watched = Vec::new();
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        watched.push(format!("{dir}/HEAD"));
    }
    if let Some(dir) = git(&["rev-parse", "--git-common-dir"]) {
        watched.push(format!("{dir}/refs/heads"));
        watched.push(format!("{dir}/packed-refs"));
    }
    for path in watched {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}

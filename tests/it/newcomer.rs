//! A newcomer's first minutes, from the README: its first command, exactly as written, in a
//! fresh folder, then `executor doctor` on the workspace it made.
//!
//! The command starts with `cargo install --locked --path .`; the binary under test is
//! built already, so a `cargo` on the test's `PATH` stands in for that step (it records what
//! it was asked) and `executor` on that `PATH` is the binary under test. Every other word of
//! the line runs as the README says.

use std::path::Path;
use std::process::Command;

use crate::support::BIN;

/// The first command of the README's first shell block (comments skipped).
fn first_readme_command() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("read README.md");
    let block = readme
        .split("```sh\n")
        .nth(1)
        .expect("the README has a shell block");
    block
        .lines()
        .take_while(|line| !line.starts_with("```"))
        .find(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .expect("the first block has a command")
        .to_string()
}

fn shim_path(dir: &Path) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin folder");
    std::os::unix::fs::symlink(BIN, bin.join("executor")).expect("link executor");
    let cargo = bin.join("cargo");
    std::fs::write(
        &cargo,
        "#!/bin/sh\necho \"$*\" > \"$(dirname \"$0\")/cargo-args\"\n",
    )
    .expect("write cargo");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    )
}

fn newcomer(dir: &Path, path: &str, program: &str, args: &[&str]) -> std::process::Output {
    Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("EXECUTOR_CONFIG")
        .env_remove("EXECUTOR_STORAGE_URL")
        .env_remove("EXECUTOR_SANDBOX_MODE")
        .env_remove("EXECUTOR_LOG")
        // The machine's own git identity stays out, as on a fresh machine.
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run")
}

#[test]
fn the_readmes_first_command_works_in_a_fresh_folder_and_doctor_finds_nothing_wrong() {
    let line = first_readme_command();
    assert!(
        line.starts_with("cargo install --locked --path . && executor init demo --example"),
        "the README's first command changed; this test runs it as written: {line}"
    );
    let home = tempfile::tempdir().expect("temp dir");
    let path = shim_path(home.path());
    let fresh = home.path().join("fresh");
    std::fs::create_dir(&fresh).expect("fresh folder");

    let out = newcomer(&fresh, &path, "sh", &["-c", &line]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{line}\n{stdout}\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("bin/cargo-args"))
            .expect("cargo was asked")
            .trim(),
        "install --locked --path ."
    );
    assert!(
        stdout.contains("EXAMPLE-1") && stdout.contains("in_progress -> done"),
        "`executor show EXAMPLE-1` shows the task done: {stdout}"
    );

    let demo = fresh.join("demo");
    let out = newcomer(&demo, &path, "executor", &["doctor"]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in report.lines() {
        let mut fields = line.split_whitespace();
        let (level, check) = (fields.next().unwrap_or(""), fields.next().unwrap_or(""));
        match (level, check) {
            ("ok", _) => {}
            // The example workspace names the example worker, and doctor says what it is.
            ("warn", "agent") => assert!(line.contains("example worker"), "{line}"),
            // What this machine's kernel allows, not the workspace: said, not failed.
            ("warn", "confinement" | "memory") => {
                eprintln!("doctor on this machine: {line}");
            }
            _ => panic!("doctor is not all ok on the README's first workspace: {line}\n{report}"),
        }
    }
    for check in [
        "config",
        "store",
        "git",
        "repository",
        "base branch",
        "verify",
    ] {
        assert!(
            report
                .lines()
                .any(|l| l.starts_with("ok") && l[2..].trim_start().starts_with(check)),
            "no ok `{check}` line: {report}"
        );
    }
}

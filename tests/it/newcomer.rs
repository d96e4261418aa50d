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
            // The example workspace names the example worker, and doctor says what it is.
            ("ok", "agent") => assert!(line.contains("example worker"), "{line}"),
            ("ok", _) => {}
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

/// `executor.toml` after the quick start's edits: its keys uncommented where `init` wrote
/// them, and what this test's machine needs besides (the CLI's path, the scripted model
/// server as the API, its port let through the wall).
fn quick_start_config(text: &str, cli: &Path, env: &[&str], port: &str) -> String {
    let edits = [
        ("# kind = \"auto\"", "kind = \"claude\"".to_string()),
        (
            "# program = \"claude\"",
            format!("program = \"{}\"", cli.display()),
        ),
        ("# env = []", format!("env = {env:?}")),
        (
            "# verify = []",
            "verify = [\"sh\", \"-c\", \"test -s greeting.txt\"]".to_string(),
        ),
        ("# allow = []", format!("allow = [\"127.0.0.1:{port}\"]")),
    ];
    let mut text = text.to_string();
    for (commented, set) in edits {
        assert!(text.contains(commented), "the template has `{commented}`");
        text = text.replacen(commented, &set, 1);
    }
    text
}

#[test]
fn the_claude_quick_start_completes_a_task_with_a_real_change_by_the_repositorys_author() {
    use crate::model_server::{ModelServer, Turn};
    let Some(cli) = crate::real_agents::agent_cli("claude") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::bash("echo verbose > greeting.txt"),
        Turn::text("[STATUS:implemented] wrote greeting.txt\n[DONE:implemented] flag added"),
    ]);
    let root = tempfile::tempdir().expect("temp dir");
    let (repo, home) = (root.path().join("app"), root.path().join("home"));
    std::fs::create_dir_all(&repo).expect("repo folder");
    std::fs::create_dir_all(&home).expect("home folder");
    crate::support::init_repo(&repo);
    crate::support::git(&repo, &["config", "user.name", "Ada Owner"]);
    crate::support::git(&repo, &["config", "user.email", "ada@example.com"]);

    let mode = if crate::confinement::wall_works() {
        "required"
    } else {
        "off"
    };
    let run = |args: &[&str]| {
        let mut cmd = crate::support::executor(&repo);
        cmd.args(args)
            .env("HOME", &home)
            .env(crate::support::SANDBOX_MODE_ENV, mode);
        for (key, value) in server.claude_env() {
            cmd.env(key, value);
        }
        let out = cmd.output().expect("run executor");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "executor {args:?}: {stdout}\n{stderr}"
        );
        stdout
    };

    run(&["init", "."]);
    let config = repo.join("executor.toml");
    let port = server
        .url()
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string();
    // The quick start's API key, and the scripted server standing in for Anthropic's API.
    let env = [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_MAX_RETRIES",
    ];
    let text = std::fs::read_to_string(&config).expect("read config");
    std::fs::write(&config, quick_start_config(&text, &cli, &env, &port)).expect("write");

    let doctor = run(&["doctor", "--offline"]);
    assert!(
        doctor.contains("API key in $ANTHROPIC_API_KEY"),
        "the login is found: {doctor}"
    );
    run(&["add", "--title", "Add a --verbose flag", "--gid", "V-1"]);
    run(&["go", "V-1"]);
    run(&["run", "--once"]);

    let shown: serde_json::Value =
        serde_json::from_str(&run(&["show", "V-1", "--json"])).expect("show --json");
    assert_eq!(shown["task"]["status"], "done", "{shown}");
    let the_run = &shown["runs"][0];
    assert_eq!(the_run["state"], "complete", "{shown}");
    let branch = the_run["branch_name"].as_str().expect("a branch");
    assert_eq!(
        crate::support::git(&repo, &["show", &format!("{branch}:greeting.txt")]),
        "verbose",
        "the worker's change is committed on the run's branch"
    );
    let commit = crate::support::git(&repo, &["log", "-1", "--format=%an <%ae>%n%B", branch]);
    assert!(
        commit.starts_with("Ada Owner <ada@example.com>"),
        "committed by the repository's own author: {commit}"
    );
    assert!(
        commit.contains(&format!("Executor-Run: {}", the_run["id"]))
            && commit.contains("Executor-Task: V-1"),
        "{commit}"
    );
}

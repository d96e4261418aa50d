//! `executor doctor`: the checks a person wants before any paid work, one line each, `ok`,
//! `warn` or `fail`, each failure with its fix: the agent CLI, git, the repository and its
//! base branch, the verify command, the store, and whether workers run confined.
//!
//! What it must never do: change anything (it starts the agent only for `--version`, and
//! the wall only with `true`), or print a secret.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::Settings;
use crate::store::Store;

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub check: &'static str,
    pub level: Level,
    /// What was found, or what is wrong and how to fix it.
    pub detail: String,
}

fn check(check: &'static str, level: Level, detail: impl Into<String>) -> Check {
    Check {
        check,
        level,
        detail: detail.into(),
    }
}

/// How long `PROGRAM --version` may take.
const VERSION_LIMIT: Duration = Duration::from_secs(10);

/// Runs every check, in the order a newcomer would fix them.
pub async fn checks(settings: &Settings, store: &dyn Store) -> Vec<Check> {
    let mut out = vec![check(
        "config",
        Level::Ok,
        settings.path.display().to_string(),
    )];
    out.push(match store.summary().await {
        Ok(_) => check("store", Level::Ok, settings.storage.display()),
        Err(error) => check(
            "store",
            Level::Fail,
            format!("{}: {error}", settings.storage.display()),
        ),
    });
    out.push(agent(settings));
    out.extend(git(settings));
    out.push(verify(settings));
    out.push(confinement(settings));
    out.push(memory(settings));
    out
}

fn agent(settings: &Settings) -> Check {
    match super::agent_adapter(settings) {
        Ok(adapter) => {
            let argv = adapter.argv(&crate::agents::Invocation::default());
            let program = argv.first().cloned().unwrap_or_default();
            match adapter {
                crate::agents::Adapter::Command { .. }
                    if Path::new(&program)
                        .file_name()
                        .is_some_and(|n| n == "executor-example-worker") =>
                {
                    check(
                        "agent",
                        Level::Warn,
                        format!("the bundled example worker ({program}): it writes EXECUTOR_EXAMPLE.md and does no real work; install Claude Code, Codex or pi (on the PATH executor sees), or set [agent] kind"),
                    )
                }
                crate::agents::Adapter::Command { .. } => {
                    check("agent", Level::Ok, format!("command worker `{program}`"))
                }
                _ => match version(Path::new(&program)) {
                    Some(v) => check("agent", Level::Ok, format!("{} at {program}: {v}", adapter.name())),
                    None => check(
                        "agent",
                        Level::Warn,
                        format!("{} at {program} did not answer `--version` within {VERSION_LIMIT:?}", adapter.name()),
                    ),
                },
            }
        }
        Err(error) => check(
            "agent",
            Level::Fail,
            format!("{error:#}: install Claude Code, Codex or pi, or name the program in [agent] program"),
        ),
    }
}

/// `program --version`, first line, when it answers in time.
fn version(program: &Path) -> Option<String> {
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < VERSION_LIMIT => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    // pi prints its version on stderr when stdin is not a terminal.
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    String::from_utf8_lossy(&text)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
}

/// git itself, the repository, and its base branch.
fn git(settings: &Settings) -> Vec<Check> {
    let runner = &settings.raw.runner;
    let Some(git) = version(Path::new("git")).or_else(|| {
        crate::agents::find_program("git", std::env::var_os("PATH").as_deref())
            .and_then(|p| version(&p))
    }) else {
        return vec![check("git", Level::Fail, "git is not on PATH: install git")];
    };
    let mut out = vec![check("git", Level::Ok, git)];
    let repo = settings.root.join(&runner.repository);
    let repo_git = crate::runner::git::Git::repository(&repo);
    match repo_git.run(&["rev-parse", "--git-dir"]) {
        Ok(_) => out.push(check("repository", Level::Ok, repo.display().to_string())),
        Err(error) => {
            out.push(check(
                "repository",
                Level::Fail,
                format!(
                    "{} is not a git repository ({error}): set [runner] repository to the repository workers change",
                    repo.display()
                ),
            ));
            return out;
        }
    }
    let base = &runner.base_branch;
    let reference = format!("refs/heads/{base}");
    match repo_git.run(&["rev-parse", "--verify", "--quiet", &reference]) {
        Ok(_) => out.push(check("base branch", Level::Ok, base.clone())),
        Err(_) => {
            let branches = repo_git
                .run(&["for-each-ref", "--format=%(refname:short)", "refs/heads"])
                .unwrap_or_default();
            let branches: Vec<&str> = branches.lines().collect();
            out.push(check(
                "base branch",
                Level::Fail,
                format!(
                    "[runner] base_branch = \"{base}\" is not a branch of {}; its branches: {}",
                    repo.display(),
                    if branches.is_empty() {
                        "none (make a first commit)".to_string()
                    } else {
                        branches.join(", ")
                    }
                ),
            ));
        }
    }
    out
}

fn verify(settings: &Settings) -> Check {
    let verify = &settings.raw.forge.verify;
    let Some(program) = verify.first() else {
        return check(
            "verify",
            Level::Warn,
            "[forge] verify is empty: a worker's change is committed without a check",
        );
    };
    let path = Path::new(program);
    let found = if program.contains('/') {
        let path = if path.is_relative() {
            settings.root.join(path)
        } else {
            path.to_path_buf()
        };
        path.is_file().then_some(path)
    } else {
        crate::agents::find_program(program, std::env::var_os("PATH").as_deref())
    };
    match found {
        Some(_) => check("verify", Level::Ok, verify.join(" ")),
        None => check(
            "verify",
            Level::Fail,
            format!("[forge] verify runs `{program}`, which is not on PATH or not a file: install it or fix the command"),
        ),
    }
}

fn confinement(settings: &Settings) -> Check {
    let found = super::confinement(settings);
    match (found.confined, found.mode) {
        (true, _) => check("confinement", Level::Ok, found.detail),
        (false, "off") => check(
            "confinement",
            Level::Warn,
            format!("{}: workers run unconfined, judged strictly", found.detail),
        ),
        (false, "required") => check(
            "confinement",
            Level::Fail,
            format!("{}: install bubblewrap or allow user namespaces (README: Confinement)", found.detail),
        ),
        (false, _) => check(
            "confinement",
            Level::Warn,
            format!("{}: workers run unconfined, judged strictly; install bubblewrap to confine them (README: Confinement)", found.detail),
        ),
    }
}

/// Whether confined workers' memory is held to `[sandbox] max_memory` (a cgroup v2 of
/// their own), or why not.
fn memory(settings: &Settings) -> Check {
    let found = super::confinement(settings).memory;
    if found.limited {
        check("memory", Level::Ok, found.detail)
    } else {
        check(
            "memory",
            Level::Warn,
            format!(
                "workers' memory is not limited: {} (README: Confinement, `max_memory`)",
                found.detail
            ),
        )
    }
}

/// Prints one line per check; `true` when none failed.
pub fn print(checks: &[Check]) -> bool {
    for c in checks {
        let level = match c.level {
            Level::Ok => "ok  ",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        println!("{level}  {:<12} {}", c.check, c.detail);
    }
    checks.iter().all(|c| c.level != Level::Fail)
}

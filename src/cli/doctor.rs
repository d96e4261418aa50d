//! `executor doctor`: the checks a person wants before any paid work, one line each, `ok`,
//! `warn` or `fail`, each failure with its fix: the agent CLI and its login, git, the
//! repository and its base branch, the verify command, the store, whether workers run
//! confined, every configured token (with one authenticated read each unless offline), the
//! chat personas, and the service. [`preflight`] is the part `run --once` and `daemon` run
//! before any worker: the checks whose failure would waste paid work.
//!
//! What it must never do: change anything (it starts the agent only for `--version`, the
//! wall only with `true`, and only reads from the services), or print a secret.

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

/// Runs every check, in the order a newcomer would fix them; `offline` leaves out the
/// calls to the forge, the sources and chat.
pub async fn checks(settings: &Settings, store: &dyn Store, offline: bool) -> Vec<Check> {
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
    out.extend(agent_login(settings));
    out.extend(git(settings));
    out.push(verify(settings));
    let wall = super::confinement(settings);
    out.push(confinement(&wall));
    out.push(processes(&wall.processes));
    out.push(memory(&wall.memory));
    out.extend(tokens(settings, offline).await);
    out.extend(personas(settings));
    out.push(service(settings));
    out
}

/// The checks whose failure would waste paid work, run by `run --once` and `daemon` before
/// the first worker: the agent CLI, the repository and its base branch, the verify program.
/// A failure is bad input (exit 2) naming each fault and its fix.
pub fn preflight(settings: &Settings) -> Result<(), super::BadInput> {
    // The agent only resolved, not started: `--version` of a real CLI costs a second.
    let mut found: Vec<Check> = super::agent_adapter(settings)
        .err()
        .map(agent_missing)
        .into_iter()
        .collect();
    found.extend(worktree_command(settings));
    found.extend(git(settings));
    found.push(verify(settings));
    let faults: Vec<String> = found
        .iter()
        .filter(|c| c.level == Level::Fail)
        .map(|c| format!("{}: {}", c.check, c.detail))
        .collect();
    if faults.is_empty() {
        Ok(())
    } else {
        Err(super::BadInput(format!(
            "nothing was started, as it would fail: {} (`executor doctor` checks it all)",
            faults.join("; ")
        )))
    }
}

/// One line per configured token: present, and working unless `offline`.
async fn tokens(settings: &Settings, offline: bool) -> Vec<Check> {
    let mut out = Vec::new();
    for credential in super::credentials::configured(settings) {
        let line = match super::credentials::check(&credential, offline).await {
            Ok(detail) => check("token", Level::Ok, format!("{}: {detail}", credential.what)),
            Err(why) => check("token", Level::Fail, format!("{}: {why}", credential.what)),
        };
        out.push(line);
    }
    out
}

/// Two chat personas may not be one bot: the topic could not tell them apart.
fn personas(settings: &Settings) -> Option<Check> {
    let chat = &settings.raw.chat;
    if chat.zulip.is_none() || chat.personas.len() < 2 {
        return None;
    }
    Some(match super::chat::distinct_personas(settings) {
        Ok(()) => check(
            "personas",
            Level::Ok,
            format!(
                "{} distinct bots",
                chat.personas.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        ),
        Err(error) => check("personas", Level::Fail, format!("{error:#}")),
    })
}

/// Whether this workspace's service is installed (either way fine: it is a choice).
fn service(settings: &Settings) -> Check {
    match super::service_setup::installed(settings) {
        Some(place) => check("service", Level::Ok, format!("installed: {place}")),
        None => check(
            "service",
            Level::Ok,
            "not installed (`executor service install --write` keeps executor running)",
        ),
    }
}

/// The variables that carry a model key for each agent, and the file its login leaves in
/// its configuration folder.
fn credentials_of(
    family: crate::sandbox::AgentFamily,
) -> Option<(&'static [&'static str], &'static str)> {
    use crate::sandbox::AgentFamily;
    match family {
        AgentFamily::Claude => Some((
            &[
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "CLAUDE_CODE_OAUTH_TOKEN",
            ],
            ".credentials.json",
        )),
        AgentFamily::Codex => Some((&["OPENAI_API_KEY", "CODEX_API_KEY"], "auth.json")),
        AgentFamily::Pi => Some((
            &[
                "ANTHROPIC_API_KEY",
                "OPENAI_API_KEY",
                "GEMINI_API_KEY",
                "OPENROUTER_API_KEY",
            ],
            "auth.json",
        )),
        AgentFamily::Command => None,
    }
}

/// The agent's model key or login, as a worker will get it: a key variable named in
/// `[agent] env` and set, or a login in the configuration folder workers are given. Never
/// prints a value.
fn agent_login(settings: &Settings) -> Option<Check> {
    let adapter = super::agent_adapter(settings).ok()?;
    let family = adapter.family();
    let (keys, login_file) = credentials_of(family)?;
    let passed: Vec<&str> = settings
        .raw
        .agent
        .env
        .iter()
        .map(|v| v.get_ref().as_str())
        .collect();
    let set = |var: &str| std::env::var_os(var).is_some_and(|v| !v.is_empty());
    if let Some(key) = keys.iter().find(|k| passed.contains(k) && set(k)) {
        return Some(check(
            "login",
            Level::Ok,
            format!("API key in ${key}, given to workers by [agent] env"),
        ));
    }
    let mut folders = Vec::new();
    if let Some(dir) = &settings.raw.sandbox.agent_config {
        folders.push(settings.root.join(dir));
    }
    if let Some((var, _)) = family.config_var() {
        if passed.contains(&var) {
            if let Some(dir) = std::env::var_os(var) {
                folders.push(std::path::PathBuf::from(dir));
            }
        }
    }
    if let Some(dir) = folders.iter().find(|d| d.join(login_file).is_file()) {
        return Some(check(
            "login",
            Level::Ok,
            format!("a login in {}", dir.display()),
        ));
    }
    let unpassed = keys.iter().find(|k| set(k) && !passed.contains(k));
    let detail = match unpassed {
        Some(key) => format!("${key} is set but not listed in [agent] env, so workers do not get it: add it there"),
        None => format!(
            "no model key or login for {} found: list {} in [agent] env (and set it), or log in with the agent and name its configuration folder in [sandbox] agent_config (README: Quick start with Claude Code)",
            adapter.name(),
            keys[0]
        ),
    };
    Some(check("login", Level::Warn, detail))
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
                    // Only a workspace that names it runs it (`auto` never does), so it is
                    // what the owner chose; the line says what it is and how to change it.
                    check(
                        "agent",
                        Level::Ok,
                        format!("the bundled example worker ({program}), as [agent] kind names it: it writes EXECUTOR_EXAMPLE.md and does no real work; for real work install Claude Code, Codex or pi and set [agent] kind"),
                    )
                }
                crate::agents::Adapter::Command { .. } => {
                    check("agent", Level::Ok, format!("command worker `{program}`"))
                }
                _ => match version(Path::new(&program)) {
                    Some(v) => check(
                        "agent",
                        Level::Ok,
                        format!("{} at {program}: {v}", adapter.name()),
                    ),
                    None => check(
                        "agent",
                        Level::Warn,
                        format!(
                            "{} at {program} did not answer `--version` within {VERSION_LIMIT:?}",
                            adapter.name()
                        ),
                    ),
                },
            }
        }
        Err(error) => agent_missing(error),
    }
}

fn agent_missing(error: anyhow::Error) -> Check {
    let fix = match error.downcast_ref::<crate::agents::AgentError>() {
        Some(crate::agents::AgentError::NotFound {
            kind: "command", ..
        }) => "fix [agent] command",
        _ => "install Claude Code, Codex or pi, or name the program in [agent] program",
    };
    check("agent", Level::Fail, format!("{error:#}: {fix}"))
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
    // Without worktrees, workers run in the folder itself and nothing is committed: it
    // need not be a repository, and there is no base branch to start from.
    if !runner.worktrees {
        out.push(if repo.is_dir() {
            check(
                "repository",
                Level::Ok,
                format!(
                    "{} (runner.worktrees = false: workers run in it, nothing is committed)",
                    repo.display()
                ),
            )
        } else {
            check(
                "repository",
                Level::Fail,
                format!(
                    "{} is not a folder: set [runner] repository to the folder workers work in",
                    repo.display()
                ),
            )
        });
        return out;
    }
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

/// A `[agent] command` given as a path relative to the worktree: each worktree is a
/// checkout of the repository, so the program must be an executable file of it.
fn worktree_command(settings: &Settings) -> Option<Check> {
    let agent = &settings.raw.agent;
    if agent.kind != crate::config::AgentKind::Command {
        return None;
    }
    let program = agent.command.first()?;
    let path = Path::new(program);
    if path.is_absolute() || !program.contains('/') {
        return None;
    }
    let repository = settings.root.join(&settings.raw.runner.repository);
    if crate::agents::is_executable(&repository.join(path)) {
        return None;
    }
    Some(check(
        "agent",
        Level::Fail,
        format!(
            "[agent] command runs `{program}` from the worktree, and {} is not an executable file: commit it (executable) or fix the command",
            repository.join(path).display()
        ),
    ))
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

fn confinement(found: &super::output::Confinement) -> Check {
    let bubblewrap = found
        .layers
        .iter()
        .any(|l| l == "bubblewrap" || l == "sandbox-exec");
    match (found.confined, found.mode) {
        (true, _) if bubblewrap => check("confinement", Level::Ok, found.detail.clone()),
        (true, _) => check(
            "confinement",
            Level::Warn,
            format!("{}: the seal alone holds workers, without a private /proc, /tmp or process ids; allow user namespaces (or install bubblewrap) for the whole wall (docs/confinement.md)", found.detail),
        ),
        (false, "off") => check(
            "confinement",
            Level::Warn,
            format!("{}: workers run unconfined, judged strictly", found.detail),
        ),
        (false, "required") => check(
            "confinement",
            Level::Fail,
            format!("{}: install bubblewrap or allow user namespaces (docs/confinement.md)", found.detail),
        ),
        (false, _) => check(
            "confinement",
            Level::Warn,
            format!("{}: workers run unconfined, judged strictly; install bubblewrap to confine them (docs/confinement.md)", found.detail),
        ),
    }
}

/// Whether confined workers' memory is held to `[sandbox] max_memory` (a cgroup v2 of
/// their own), or why not.
fn memory(found: &super::output::MemoryLimit) -> Check {
    if found.limited {
        check("memory", Level::Ok, found.detail.clone())
    } else {
        check(
            "memory",
            Level::Warn,
            format!(
                "workers' memory is not limited: {} (docs/confinement.md, `max_memory`)",
                found.detail
            ),
        )
    }
}

/// What holds each worker to `[sandbox] max_processes` (a pids cgroup, RLIMIT_NPROC), or
/// why nothing does and what to do.
fn processes(found: &super::output::ProcessLimit) -> Check {
    let detail = format!("{}: {}", found.mechanism, found.detail);
    match found.mechanism {
        "none" => check(
            "processes",
            Level::Warn,
            format!(
                "{detail}; {} (docs/confinement.md: \"Processes, and running as root\")",
                crate::sandbox::PROCESS_CAP_FIX
            ),
        ),
        _ => check("processes", Level::Ok, detail),
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

//! Making a worker ready to start: the repository's snapshot before it, its environment
//! and session, the Claude hook (with its relay through the wall), and its place in the
//! wall. Nothing here starts a process; [`super::watch`] does.

use super::{HookTarget, RunnerSettings};
use crate::agents::claude::RelayAddress;
use crate::agents::Adapter;
use crate::cli::hook::RelayListener;
use crate::core::record::Run;
use crate::prompts::Phase;
use crate::runner::drive::worker_env;
use crate::runner::drive::WorkerRun;
use crate::runner::drive::MAX_LINE;
use crate::runner::drive::SYSTEM_REMINDER;
use crate::runner::git::Baseline;
use crate::supervisor::WorkerSpec;
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A worker ready to be supervised.
pub(super) struct Launch {
    /// The enclosed process to run.
    pub(super) spec: WorkerSpec,
    pub(super) confined: bool,
    /// The kernel holds the worker to `[sandbox] max_processes`.
    pub(super) process_cap: bool,
    /// What the wall's network reaches (`None` unconfined).
    pub(super) network: Option<crate::policy::WallNetwork>,
    /// Held while the worker lives (the wall's proxy and bridge).
    pub(super) gate: Option<crate::sandbox::proxy::NetGate>,
    /// The confined hook's socket to the runner, with the settings file it was written for.
    pub(super) relay: Option<(HookRelay, PathBuf)>,
    /// The worker keeps the run's agent session (a reviewer works in one of its own).
    pub(super) keeps_session: bool,
}

/// The repository as it is before the worker can touch it: the orchestrator compares
/// against it before it runs its own git in the worktree again. `None` without worktrees.
pub(super) async fn baseline(
    settings: &RunnerSettings,
    worktree: &Path,
) -> Result<Option<Baseline>> {
    if !settings.worktrees {
        return Ok(None);
    }
    let (repo, tree, protected) = (
        settings.repository.clone(),
        worktree.to_path_buf(),
        vec![settings.base_branch.clone()],
    );
    Ok(Some(
        tokio::task::spawn_blocking(move || Baseline::take(&repo, &tree, &protected))
            .await?
            .context("cannot take a snapshot of the repository before the worker")?,
    ))
}

/// The worker's environment. Any command gets executor's session id, so a program that
/// keeps state between rounds can key it (the same id when a later phase continues the
/// session), and the tool set it may use; the id is saved with the worker's start record.
pub(super) async fn environment(
    w: &WorkerRun<'_>,
    run: &mut Run,
    keeps_session: bool,
) -> Result<HashMap<String, String>> {
    let mut env = worker_env(w.adapter, w.settings);
    let Adapter::Command { .. } = w.adapter else {
        return Ok(env);
    };
    let id = match (&run.worker_session_id, w.phase) {
        (Some(id), Phase::InProgress | Phase::FixCi | Phase::FixComments) => id.clone(),
        _ => format!(
            "cmd-{}",
            crate::core::gid::short_hash(&format!(
                "{}\n{}\n{}\n{}",
                w.gid,
                run.id,
                w.settings
                    .clock
                    .now()
                    .timestamp_nanos_opt()
                    .unwrap_or_default(),
                std::process::id()
            ))
        ),
    };
    env.insert("EXECUTOR_SESSION_ID".to_string(), id.clone());
    if let Some(tools) = &w.settings.agent.tools {
        env.insert("EXECUTOR_TOOLS".to_string(), tools.join(","));
    }
    // Saved with the worker's start record, as soon as its process runs.
    if keeps_session && run.worker_session_id.as_deref() != Some(id.as_str()) {
        run.worker_session_id = Some(id);
    }
    Ok(env)
}

/// The worker's process, enclosed by the wall, with `env` and `prompt`.
pub(super) fn launch(
    w: &WorkerRun<'_>,
    run: &Run,
    env: HashMap<String, String>,
    prompt: String,
    contract: Option<&crate::runner::contract::LoadedContract>,
) -> Result<Launch> {
    let (adapter, settings) = (w.adapter, w.settings);
    // The hook asks the runner through a socket of this worker's, and the runner judges
    // and records the call with the contract and the run's facts it holds already: inside
    // the wall the hook could not see the workspace, and outside it the hook need not read
    // a config, a contract or a store before Claude may go on.
    let relay = match (&settings.agent.hook, adapter) {
        (Some(_), Adapter::Claude { .. }) => {
            let sealed = matches!(
                settings.wall.posture(),
                crate::sandbox::Posture::Sealed { .. }
            );
            Some(HookRelay::open(sealed)?)
        }
        _ => None,
    };
    let hook_settings = match (&settings.agent.hook, adapter) {
        (Some(hook), Adapter::Claude { .. }) => Some(write_hook_settings(
            settings,
            hook,
            w.gid,
            run,
            w.worktree,
            contract,
            relay.as_ref().map(|r| &r.address),
        )?),
        _ => None,
    };
    let invocation = invocation(w, run, hook_settings.clone());
    let spec = WorkerSpec {
        argv: adapter.argv(&invocation),
        cwd: w.worktree.to_path_buf(),
        env,
        // An empty prompt continues a session as it stands (Claude re-asks its hook about
        // the tool call it parked); the agent then reads no prompt at all.
        stdin: (!prompt.is_empty()).then(|| prompt.into_bytes()),
        limits: settings.limits,
        grace: settings.grace,
        max_line: MAX_LINE,
        os_limits: None,
        kept: false,
        heartbeat: settings.lease_beat.heartbeat(run.id),
    };
    let mut place = settings.place(
        run.id,
        w.worktree,
        Some(adapter),
        format!("run {} ({})", run.id, w.phase.as_str()),
        hook_settings
            .iter()
            .filter_map(|p| p.parent().map(Path::to_path_buf))
            .collect(),
    );
    place
        .read_write
        .extend(relay.as_ref().and_then(|r| r.dir.clone()));
    place
        .loopback_ports
        .extend(relay.as_ref().and_then(HookRelay::port));
    place.read_only_worktree = invocation.read_only();
    let enclosed = settings.wall.enclose(spec, &place)?;
    Ok(Launch {
        spec: enclosed.spec,
        confined: enclosed.confined,
        process_cap: enclosed.process_cap,
        network: enclosed.network,
        gate: enclosed.gate,
        relay: relay.zip(hook_settings),
        keeps_session: w.phase != Phase::PrReview,
    })
}

/// How the agent is started. A later phase continues the agent's own session where the
/// agent can resume one, so it keeps what it learnt; otherwise every worker starts fresh
/// from its prompt.
fn invocation(
    w: &WorkerRun<'_>,
    run: &Run,
    hook_settings: Option<PathBuf>,
) -> crate::agents::Invocation {
    let settings = w.settings;
    crate::agents::Invocation {
        session: match (&run.worker_session_id, w.phase) {
            (Some(id), Phase::InProgress | Phase::FixCi | Phase::FixComments)
                if w.adapter.supports_resume() =>
            {
                crate::agents::Session::Resume { id: id.clone() }
            }
            _ => crate::agents::Session::New { id: None },
        },
        settings: hook_settings,
        allowed_tools: settings.agent.allowed_tools.clone(),
        append_system_prompt: Some(SYSTEM_REMINDER.to_string()),
        model: settings.agent.model.clone(),
        max_turns: settings.agent.max_turns,
        tools: settings.agent.tools.clone(),
        confined: settings.wall.is_confined(),
    }
}

/// Where a confined Claude worker's hook asks the runner: a socket in a short folder of
/// its own (a socket path holds at most 107 bytes), removed with the worker; or, where the
/// seal alone walls the worker (it may open no socket named in the file system), a
/// loopback TCP port the seal lets it connect to.
pub(super) struct HookRelay {
    pub(super) dir: Option<PathBuf>,
    pub(super) address: RelayAddress,
    pub(super) listener: Option<RelayListener>,
}

impl HookRelay {
    pub(super) fn open(sealed: bool) -> Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        if sealed {
            let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| {
                    l.set_nonblocking(true)?;
                    tokio::net::TcpListener::from_std(l)
                })
                .context("cannot listen on 127.0.0.1 for the hook's relay")?;
            let port = listener.local_addr()?.port();
            return Ok(HookRelay {
                dir: None,
                address: RelayAddress::Loopback(port),
                listener: Some(RelayListener::Loopback(listener)),
            });
        }
        let dir = std::env::temp_dir().join(format!(
            "executor-hook-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let socket = dir.join("hook.sock");
        let listener = tokio::net::UnixListener::bind(&socket)
            .with_context(|| format!("cannot listen on {}", socket.display()))?;
        Ok(HookRelay {
            dir: Some(dir),
            address: RelayAddress::Socket(socket),
            listener: Some(RelayListener::Socket(listener)),
        })
    }

    /// The loopback port the worker's seal must let it connect to, if any.
    fn port(&self) -> Option<u16> {
        match self.address {
            RelayAddress::Loopback(port) => Some(port),
            RelayAddress::Socket(_) => None,
        }
    }
}

impl Drop for HookRelay {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Writes the Claude settings file that installs executor's PreToolUse hook for run
/// `run_id`, beside the run's records, and returns its path.
pub(super) fn write_hook_settings(
    settings: &RunnerSettings,
    hook: &HookTarget,
    gid: &str,
    run: &Run,
    worktree: &Path,
    contract: Option<&crate::runner::contract::LoadedContract>,
    relay: Option<&RelayAddress>,
) -> Result<PathBuf> {
    let dir = settings.logs_dir.join(gid).join(format!("run-{}", run.id));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join("claude-settings.json");
    // The hook reads the contract the runner validated, not the owner's file, which may
    // be mid-edit (or broken) while the worker runs.
    let contract_path = match contract {
        Some(contract) => {
            let snapshot = dir.join("worker-policy.json");
            std::fs::write(&snapshot, &contract.text)
                .with_context(|| format!("cannot write {}", snapshot.display()))?;
            Some(snapshot)
        }
        None => None,
    };
    // With a relay, the small hook beside executor where it is installed: Claude waits on it
    // before every tool call.
    let thin = hook
        .executor
        .with_file_name(crate::agents::claude::THIN_HOOK);
    let program = if relay.is_some() && thin.is_file() {
        thin
    } else {
        hook.executor.clone()
    };
    let command = crate::agents::claude::hook_command(
        &program,
        &hook.config,
        run.id,
        worktree,
        run.branch_name.as_deref(),
        contract_path.as_deref(),
        relay,
    );
    let text = serde_json::to_string_pretty(&crate::agents::claude::hook_settings(&command))?;
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

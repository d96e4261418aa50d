//! One worker: its environment, its place in the wall, its supervision, and its record.
//! It never commits or pushes: the orchestrator does, after checking the repository.

use super::*;

/// Appended to a Claude worker's system prompt: the phase prompt teaches the format in full,
/// this keeps it in view however long the session grows.
pub(super) const SYSTEM_REMINDER: &str = "You are a worker of executor. Report to it with message \
lines exactly as your instructions describe ([STATUS:kind], [REQUEST:kind], [DONE:kind], \
[ESCALATE:kind] at the start of a line). End every phase with one [DONE:kind] or \
[ESCALATE:kind] line.";

/// Longest output line kept from a worker.
pub(super) const MAX_LINE: usize = 1024 * 1024;

/// The environment every agent process starts with: nothing inherited but `PATH`, `HOME`,
/// `LANG`, `TERM`, `TMPDIR`, the variables `agent.env` names, and the adapter's fixed ones.
pub(super) fn worker_env(adapter: &Adapter, settings: &RunnerSettings) -> HashMap<String, String> {
    agent_env(adapter, &settings.agent.env)
}

/// The environment an agent process gets: a few basics, the variables `[agent] env`
/// names, and the adapter's own settings. Nothing else of this process's environment (its
/// tokens above all) reaches it.
pub fn agent_env(adapter: &Adapter, allowed: &[String]) -> HashMap<String, String> {
    let mut env: HashMap<String, String> = HashMap::new();
    for key in ["PATH", "HOME", "LANG", "TERM", "TMPDIR"] {
        if let Ok(value) = std::env::var(key) {
            env.insert(key.to_string(), value);
        }
    }
    for key in allowed {
        if let Ok(value) = std::env::var(key) {
            env.insert(key.clone(), value);
        }
    }
    for (key, value) in adapter.fixed_env() {
        env.insert((*key).to_string(), (*value).to_string());
    }
    env
}

/// What a worker left for the owner to decide.
#[derive(Debug, Clone)]
pub(super) enum Asked {
    /// An `[ESCALATE:kind] …` line.
    Message(String),
    /// A tool call the agent parked for a decision (Claude's `defer`).
    DeferredTool(crate::agents::ToolUse),
}

/// What one worker did.
pub(super) struct Worked {
    pub(super) done: Option<String>,
    pub(super) asked: Option<Asked>,
    pub(super) stopped: Option<StopReason>,
    pub(super) why: String,
    /// The worker's record, as `result.json` keeps it.
    pub(super) result: serde_json::Value,
    /// The last of the worker's stderr.
    pub(super) stderr: Vec<String>,
    /// The repository as it was when the worker started (`None` without worktrees):
    /// what the orchestrator checks before it commits or pushes.
    pub(super) baseline: Option<Baseline>,
    /// The repository's git data changed while the worker ran: the orchestrator runs no
    /// git in the worktree and the run waits for the owner (`asked` says why).
    pub(super) tampered: bool,
}

/// Bytes of a worker's stderr kept for its run record (the newest).
pub(super) const STDERR_BYTES: usize = 256 * 1024;

#[allow(clippy::too_many_arguments)]
pub(super) async fn work(
    store: &dyn Store,
    adapter: &Adapter,
    settings: &RunnerSettings,
    run: &mut Run,
    gid: &str,
    phase: Phase,
    worktree: &Path,
    prompt: String,
) -> Result<Worked> {
    let logs = PhaseLog::create(&settings.logs_dir, gid, phase.as_str())?;
    // The repository as it is before the worker can touch it: the orchestrator compares
    // against it before it runs its own git in the worktree again.
    let baseline = if settings.worktrees {
        let (repo, tree, protected) = (
            settings.repository.clone(),
            worktree.to_path_buf(),
            vec![settings.base_branch.clone()],
        );
        Some(
            tokio::task::spawn_blocking(move || Baseline::take(&repo, &tree, &protected))
                .await?
                .context("cannot take a snapshot of the repository before the worker")?,
        )
    } else {
        None
    };
    let mut env = worker_env(adapter, settings);
    // A reviewer works in a session of its own and never takes the run's: the author's
    // session is the one later rounds continue.
    let keeps_session = phase != Phase::PrReview;
    // Any command gets executor's session id, so a program that keeps state between
    // rounds can key it (the same id when a later phase continues the session), and the
    // tool set it may use.
    if let Adapter::Command { .. } = adapter {
        let id = match (&run.worker_session_id, phase) {
            (Some(id), Phase::InProgress | Phase::FixCi | Phase::FixComments) => id.clone(),
            _ => format!(
                "cmd-{}",
                crate::core::gid::short_hash(&format!(
                    "{gid}\n{}\n{}\n{}",
                    run.id,
                    Utc::now().timestamp_nanos_opt().unwrap_or_default(),
                    std::process::id()
                ))
            ),
        };
        env.insert("EXECUTOR_SESSION_ID".to_string(), id.clone());
        if let Some(tools) = &settings.agent.tools {
            env.insert("EXECUTOR_TOOLS".to_string(), tools.join(","));
        }
        if keeps_session && run.worker_session_id.as_deref() != Some(id.as_str()) {
            run.worker_session_id = Some(id);
            run.updated_at = Utc::now();
            store.save_run(run).await?;
        }
    }
    // The contract this worker is judged by, fixed for its whole life (a reload applies to
    // the next worker).
    let contract = settings.worker_contract.as_ref().map(|cell| cell.current());
    // Inside the wall the hook cannot see the workspace: it asks the runner through a
    // socket of this worker's, and the runner judges and records the call.
    let relay = match (&settings.agent.hook, adapter) {
        (Some(_), Adapter::Claude { .. }) if settings.wall.is_confined() => {
            Some(HookRelay::open()?)
        }
        _ => None,
    };
    let hook_settings = match (&settings.agent.hook, adapter) {
        (Some(hook), Adapter::Claude { .. }) => Some(write_hook_settings(
            settings,
            hook,
            gid,
            run,
            worktree,
            contract.as_deref(),
            relay.as_ref().map(|r| r.socket.as_path()),
        )?),
        _ => None,
    };
    // A later phase continues the agent's own session where the agent can resume one, so
    // it keeps what it learnt; otherwise every worker starts fresh from its prompt.
    let invocation = crate::agents::Invocation {
        session: match (&run.worker_session_id, phase) {
            (Some(id), Phase::InProgress | Phase::FixCi | Phase::FixComments)
                if adapter.supports_resume() =>
            {
                crate::agents::Session::Resume { id: id.clone() }
            }
            _ => crate::agents::Session::New { id: None },
        },
        settings: hook_settings.clone(),
        allowed_tools: settings.agent.allowed_tools.clone(),
        append_system_prompt: Some(SYSTEM_REMINDER.to_string()),
        model: settings.agent.model.clone(),
        max_turns: settings.agent.max_turns,
        tools: settings.agent.tools.clone(),
        confined: settings.wall.is_confined(),
    };
    let spec = WorkerSpec {
        argv: adapter.argv(&invocation),
        cwd: worktree.to_path_buf(),
        env,
        // An empty prompt continues a session as it stands (Claude re-asks its hook about
        // the tool call it parked); the agent then reads no prompt at all.
        stdin: (!prompt.is_empty()).then(|| prompt.into_bytes()),
        limits: settings.limits,
        grace: settings.grace,
        max_line: MAX_LINE,
        os_limits: None,
    };
    let mut place = settings.place(
        run.id,
        worktree,
        Some(adapter),
        format!("run {} ({})", run.id, phase.as_str()),
        hook_settings
            .iter()
            .filter_map(|p| p.parent().map(Path::to_path_buf))
            .collect(),
    );
    place
        .read_write
        .extend(relay.as_ref().map(|r| r.dir.clone()));
    place.read_only_worktree = invocation.read_only();
    let enclosed = settings.wall.enclose(spec, &place)?;
    let (run_id_for_relay, branch_for_relay) = (run.id, run.branch_name.clone());
    let relay_served = async {
        match (relay, &hook_settings) {
            (Some(mut relay), Some(settings_file)) => {
                let contract_copy = settings_file.with_file_name("worker-policy.json");
                let Some(listener) = relay.listener.take() else {
                    return std::future::pending::<()>().await;
                };
                crate::cli::hook::serve_relay(
                    listener,
                    store,
                    crate::cli::hook::HookRun {
                        config: PathBuf::new(),
                        run_id: run_id_for_relay,
                        worktree: worktree.to_path_buf(),
                        branch: branch_for_relay,
                        contract: contract_copy.exists().then_some(contract_copy),
                        relay: None,
                    },
                )
                .await
            }
            _ => std::future::pending::<()>().await,
        }
    };
    tokio::pin!(relay_served);
    let (spec, confined, _gate) = (enclosed.spec, enclosed.confined, enclosed.gate);
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
    // The agent's session id is saved the moment it is known, so a worker killed with its
    // runner can still be resumed in its own session.
    let (session_tx, mut session_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    // Worker messages are stored (and requests decided) as they come, not at the end, so
    // the owner sees them while the worker works.
    let (message_tx, mut message_rx) =
        tokio::sync::mpsc::unbounded_channel::<(String, crate::protocol::Message)>();
    let run_id = run.id;
    let mut scanner = crate::protocol::Scanner::new();
    let scope = crate::policy::Scope::new(worktree.to_path_buf(), run.branch_name.as_deref())
        .with_confined(confined);
    let mut done = None;
    let mut escalated = None;
    let mut worker_id = None;
    let mut session_id = None;
    let mut finished: Option<crate::agents::Finished> = None;
    let mut stderr = crate::supervisor::tail::Tail::new(STDERR_BYTES);
    let mut logs_ok = logs;
    let outcome = {
        let supervised = supervisor::supervise(
            spec,
            |event| match event {
                WorkerEvent::Started { pid, start_time } => {
                    let _ = started_tx.send((pid, start_time));
                    false
                }
                WorkerEvent::Line { stream, line } => {
                    let text = line.text();
                    logs_ok.raw(stream, &text);
                    if stream == Stream::Stderr {
                        stderr.push(text);
                        return false;
                    }
                    let events = adapter.parse_line(&text);
                    for event in &events {
                        if let crate::agents::AgentEvent::Finished(end) = event {
                            finished = Some(end.as_ref().clone());
                        }
                        if let crate::agents::AgentEvent::SessionStarted {
                            session_id: id, ..
                        } = event
                        {
                            session_id = Some(id.clone());
                            let _ = session_tx.send(id.clone());
                        }
                        let crate::agents::AgentEvent::AssistantText { text } = event else {
                            continue;
                        };
                        // An agent's text block is a whole message of its own: a code fence
                        // never runs from one into the next. A plain command's lines are one
                        // text, so its fences span lines.
                        if !matches!(adapter, Adapter::Command { .. }) {
                            scanner = crate::protocol::Scanner::new();
                        }
                        for line in text.split('\n') {
                            let line = line.strip_suffix('\r').unwrap_or(line);
                            match scanner.line(line) {
                                Ok(Some(crate::protocol::Parsed::Message(message))) => {
                                    logs_ok.message(line);
                                    match message.tag {
                                        Tag::Done => done = Some(line.to_string()),
                                        Tag::Escalate => escalated = Some(line.to_string()),
                                        Tag::Request | Tag::Status => {}
                                    }
                                    let _ = message_tx.send((line.to_string(), message));
                                }
                                Ok(_) => {}
                                Err(error) => {
                                    logs_ok.message(&format!(
                                        "skipped a malformed message ({error}): {line}"
                                    ));
                                    tracing::warn!(gid = %gid, run = run_id, %error, %line, "a malformed worker message was skipped");
                                }
                            }
                        }
                    }
                    events.iter().any(|e| e.is_meaningful())
                }
            },
            None,
        );
        tokio::pin!(supervised);
        let mut claim_check = tokio::time::interval(CLAIM_CHECK);
        claim_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                outcome = &mut supervised => break outcome?,
                _ = claim_check.tick() => {
                    // Claimed elsewhere (the owner's cancel, a runner that took it over):
                    // the worker is stopped as the supervisor is dropped, nothing more is
                    // written for the run.
                    // A store out of reach says nothing about the claim: look again later.
                    if let Ok(false) = claim::still_ours(store, run).await {
                        tracing::warn!(gid = %gid, run = run.id, "the run was claimed elsewhere; stopping its worker");
                        return Err(crate::store::StoreError::Fenced { run_id: run.id }.into());
                    }
                }
                () = &mut relay_served => {}
                Some((line, message)) = message_rx.recv() => {
                    patience::durably("a worker message", run_id, || {
                        take_message(store, settings, contract.as_deref(), run, gid, &scope, (&line, &message))
                    })
                    .await?;
                    // A milestone is a sign of life the owner can see in `show`.
                    if message.tag == Tag::Status {
                        run.worker_last_update = Some(Utc::now());
                        run.updated_at = Utc::now();
                        patience::durably("the run", run_id, || async { Ok(store.save_run(run).await?) }).await?;
                    }
                }
                Some(id) = session_rx.recv() => {
                    if keeps_session && run.worker_session_id.as_deref() != Some(id.as_str()) {
                        run.worker_session_id = Some(id);
                        run.updated_at = Utc::now();
                        patience::durably("the run", run_id, || async { Ok(store.save_run(run).await?) }).await?;
                    }
                }
                Some((pid, start_time)) = started_rx.recv() => {
                    let record = WorkerRecord {
                        id: 0,
                        run_id: run.id,
                        phase: phase.as_str().to_string(),
                        host: host(),
                        pid: i64::from(pid),
                        start_time: start_time.and_then(|t| i64::try_from(t).ok()),
                        started_at: Utc::now(),
                        ended_at: None,
                        outcome: None,
                    };
                    worker_id = Some(patience::durably("the worker's record", run_id, || async {
                        Ok(store.record_worker(&record).await?)
                    })
                    .await?);
                    run.worker_pid = Some(i64::from(pid));
                    run.worker_last_update = Some(Utc::now());
                    run.updated_at = Utc::now();
                    patience::durably("the run", run_id, || async { Ok(store.save_run(run).await?) }).await?;
                }
            }
        }
    };
    while let Ok((line, message)) = message_rx.try_recv() {
        patience::durably("a worker message", run_id, || {
            take_message(
                store,
                settings,
                contract.as_deref(),
                run,
                gid,
                &scope,
                (&line, &message),
            )
        })
        .await?;
    }
    run.worker_pid = None;
    run.worker_last_update = Some(Utc::now());
    if keeps_session && session_id.is_some() {
        run.worker_session_id = session_id;
    }
    let deferred = finished.as_ref().and_then(|f| f.deferred_tool.as_ref());
    let api_error = finished.as_ref().and_then(|f| f.api_error());
    let why = match (&done, &escalated, outcome.stopped) {
        (Some(_), _, _) => "done".to_string(),
        (None, _, None) if deferred.is_some() => format!(
            "the agent parked a tool call for the owner: {}",
            deferred.map(|t| t.name.as_str()).unwrap_or_default()
        ),
        (None, Some(line), _) => format!("the worker escalated: {line}"),
        (None, None, Some(StopReason::NoOutput)) => "no output for too long".to_string(),
        (None, None, Some(StopReason::HardTimeout)) => "hard timeout".to_string(),
        (None, None, Some(StopReason::Requested)) => "stopped on request".to_string(),
        (None, None, None) => match (outcome.exit_code, outcome.signal) {
            // A model API error is the cause; the exit code is only its consequence.
            (Some(code), _) if api_error.is_some() => format!(
                "{} (the worker exited {code} without [DONE])",
                api_error.unwrap_or_default()
            ),
            (None, _) if api_error.is_some() => api_error.unwrap_or_default(),
            (Some(code), _) => format!("exited {code} without [DONE]"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            (None, None) => "ended without [DONE]".to_string(),
        },
    };
    logs_ok.message(&format!("worker ended: {why}"));
    if let Some(id) = worker_id {
        let at = Utc::now();
        patience::durably("the worker's end", run_id, || async {
            Ok(store.end_worker(id, at, &why).await?)
        })
        .await?;
    }
    let result = serde_json::json!({
        "run_id": run.id,
        "task_gid": gid,
        "phase": phase.as_str(),
        "agent": adapter.name(),
        "confined": confined,
        "wall": settings.wall.describe(),
        "session_id": run.worker_session_id,
        "done": done,
        "escalated": escalated,
        "why": why,
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        "stopped": outcome.stopped,
        "killed": outcome.killed,
        "lines": outcome.lines,
        "truncated_lines": outcome.truncated_lines,
        "agent_result": finished,
    });
    let mut asked = match (
        &done,
        finished.as_ref().and_then(|f| f.deferred_tool.clone()),
        &escalated,
    ) {
        (Some(_), _, _) => None,
        (None, Some(tool), _) => Some(Asked::DeferredTool(tool)),
        (None, None, Some(line)) => Some(Asked::Message(line.clone())),
        (None, None, None) => None,
    };
    // Whatever the worker said, a repository it tampered with goes to the owner, before
    // any git of the orchestrator's runs in it again.
    let (mut done, mut why, mut tampered) = (done, why, false);
    if let Some(found) = tampered_since(baseline.as_ref()).await? {
        tracing::warn!(gid = %gid, run = run.id, changes = %found.1, "the repository's git data changed while the worker ran; nothing is committed");
        logs_ok.message(&format!("the repository's git data changed: {}", found.1));
        (done, asked, why, tampered) = (
            None,
            Some(found.0),
            format!("the repository's git data changed: {}", found.1),
            true,
        );
    }
    Ok(Worked {
        done,
        asked,
        stopped: outcome.stopped,
        why,
        result,
        stderr: stderr.into_lines(),
        baseline,
        tampered,
    })
}

/// The socket a confined Claude worker's hook asks the runner through, in a short folder
/// of its own (a socket path holds at most 107 bytes), removed with the worker.
pub(super) struct HookRelay {
    pub(super) dir: PathBuf,
    pub(super) socket: PathBuf,
    pub(super) listener: Option<tokio::net::UnixListener>,
}

impl HookRelay {
    pub(super) fn open() -> Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
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
            dir,
            socket,
            listener: Some(listener),
        })
    }
}

impl Drop for HookRelay {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
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
    relay: Option<&Path>,
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
    let command = crate::agents::claude::hook_command(
        &hook.executor,
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

/// Writes the run record of one worker: what it changed (`patch.diff`, against the
/// branch's last commit, new files included), how it ended (`result.json`) and what it
/// said on stderr (`stderr.txt`), under `logs/<gid>/run-<id>/<n>-<phase>/`, n counting
/// the run's workers from 1.
pub(super) async fn write_run_record(
    settings: &RunnerSettings,
    gid: &str,
    run_id: i64,
    phase: Phase,
    worktree: &Path,
    worked: &Worked,
) -> Result<PathBuf> {
    let run_dir = settings.logs_dir.join(gid).join(format!("run-{run_id}"));
    // Numbered by what is already there, so a run resumed by a later runner never
    // overwrites an earlier worker's record.
    let sequence = std::fs::read_dir(&run_dir)
        .map(|entries| {
            entries
                .filter(|e| e.as_ref().is_ok_and(|e| e.path().is_dir()))
                .count()
        })
        .unwrap_or(0)
        + 1;
    let dir = run_dir.join(format!("{sequence}-{}", phase.as_str()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // Without a worktree there is no branch of the run's own to diff against; in a
    // repository the worker tampered with, the orchestrator runs no git at all.
    let git = (settings.worktrees && !worked.tampered)
        .then(|| orchestrator_git(settings, worktree))
        .transpose()?;
    let patch = tokio::task::spawn_blocking(move || -> Result<Vec<u8>> {
        let Some(git) = git else {
            return Ok(Vec::new());
        };
        let git = |args: &[&str]| {
            git.output(args)
                .with_context(|| format!("cannot run git {}", args.join(" ")))
        };
        // Stage everything (new files too) so the patch is the whole change; the commit
        // that may follow stages the same.
        let added = git(&["add", "-A"])?;
        anyhow::ensure!(
            added.status.success(),
            "git add failed: {}",
            String::from_utf8_lossy(&added.stderr)
        );
        let diff = git(&[
            "diff",
            "--cached",
            "--binary",
            git::NO_DIFF_PROGRAMS[0],
            git::NO_DIFF_PROGRAMS[1],
            "HEAD",
        ])?;
        anyhow::ensure!(
            diff.status.success(),
            "git diff failed: {}",
            String::from_utf8_lossy(&diff.stderr)
        );
        Ok(diff.stdout)
    })
    .await??;
    let write = |name: &str, bytes: &[u8]| {
        std::fs::write(dir.join(name), bytes)
            .with_context(|| format!("cannot write {}", dir.join(name).display()))
    };
    if settings.worktrees {
        write("patch.diff", &patch)?;
    }
    write(
        "result.json",
        serde_json::to_string_pretty(&worked.result)?.as_bytes(),
    )?;
    let mut stderr = worked.stderr.join("\n");
    if !stderr.is_empty() {
        stderr.push('\n');
    }
    write("stderr.txt", stderr.as_bytes())?;
    Ok(dir)
}

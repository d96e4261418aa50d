//! Supervising one worker while it lives: its lines are logged and read for messages, its
//! messages stored (and requests decided) as they come, its process recorded, its agent
//! session saved the moment it is known, and its claim on the run checked every second.

use super::CLAIM_CHECK;
use super::{claim, patience};
use crate::agents::Adapter;
use crate::core::record::{Run, WorkerRecord};
use crate::protocol::Tag;
use crate::runner::drive::host;
use crate::runner::drive::take_message;
use crate::runner::drive::HookRelay;
use crate::runner::drive::Launch;
use crate::runner::drive::PhaseLog;
use crate::runner::drive::Refusals;
use crate::runner::drive::Refused;
use crate::runner::drive::WorkerRun;
use crate::runner::drive::STDERR_BYTES;
use crate::store::Store;
use crate::supervisor::{self, Stream, WorkerEvent};
use anyhow::Result;
use std::path::PathBuf;

/// What a worker said, read line by line as it worked.
pub(super) struct Said {
    /// Its `[DONE:…]` line.
    pub(super) done: Option<String>,
    /// Its `[ESCALATE:…]` line.
    pub(super) escalated: Option<String>,
    /// The agent's own session id.
    pub(super) session_id: Option<String>,
    /// The agent's closing record (result, usage, a parked tool call, an API error).
    pub(super) finished: Option<crate::agents::Finished>,
    /// The newest of its stderr, bounded in bytes.
    pub(super) stderr: crate::supervisor::tail::Tail,
    /// The errors the agent reported on the way (the newest few).
    pub(super) failures: Vec<String>,
    /// The agent said a limit refused it, and when the limit lifts (seconds since the
    /// epoch) where it said.
    pub(super) limit_reached: Option<Option<i64>>,
    /// How many times the agent reported only retrying its network since its last sign
    /// of work, and the last of those reports.
    pub(super) retries: u64,
    pub(super) last_retry: Option<String>,
    pub(super) logs: PhaseLog,
}

/// Error events of an agent's kept for its end (the newest).
const FAILURES_KEPT: usize = 8;

/// A worker that ended.
pub(super) struct Watched {
    pub(super) outcome: supervisor::Outcome,
    pub(super) said: Said,
    /// The worker's process record, once its process started.
    pub(super) worker_id: Option<i64>,
    /// What the wall's proxy refused it.
    pub(super) refused: Refused,
}

/// Reads a worker's output lines as they come, off the supervisor's thread of control:
/// what it finds is kept in [`Said`] or sent on to the loop that stores it.
struct Reader<'a> {
    adapter: &'a Adapter,
    gid: &'a str,
    run_id: i64,
    scanner: crate::protocol::Scanner,
    said: Said,
    messages: tokio::sync::mpsc::UnboundedSender<(String, crate::protocol::Message)>,
    sessions: tokio::sync::mpsc::UnboundedSender<String>,
}

impl Reader<'_> {
    /// Takes one output line; true when it was a sign of life for the watchdog.
    fn line(&mut self, stream: Stream, text: String) -> bool {
        self.said.logs.raw(stream, &text);
        if stream == Stream::Stderr {
            self.said.stderr.push(text);
            return false;
        }
        let events = self.adapter.parse_line(&text);
        for event in &events {
            match event {
                crate::agents::AgentEvent::Finished(end) => {
                    self.said.finished = Some(end.as_ref().clone());
                }
                crate::agents::AgentEvent::SessionStarted { session_id, .. } => {
                    self.said.session_id = Some(session_id.clone());
                    let _ = self.sessions.send(session_id.clone());
                }
                crate::agents::AgentEvent::AssistantText { text } => self.text(text),
                crate::agents::AgentEvent::Failed { message } => {
                    if self.said.failures.len() == FAILURES_KEPT {
                        self.said.failures.remove(0);
                    }
                    self.said.failures.push(message.clone());
                }
                crate::agents::AgentEvent::LimitReached { resets_at, .. } => {
                    self.said.limit_reached = Some(*resets_at);
                }
                crate::agents::AgentEvent::Retrying { message } => {
                    if self.said.failures.len() == FAILURES_KEPT {
                        self.said.failures.remove(0);
                    }
                    self.said.failures.push(message.clone());
                    self.said.retries += 1;
                    self.said.last_retry = Some(message.clone());
                }
                _ => {}
            }
            // Work done after a retry: the retries were not all it did.
            if event.is_meaningful() {
                (self.said.retries, self.said.last_retry) = (0, None);
            }
        }
        events.iter().any(|e| e.is_meaningful())
    }

    /// The message lines in one text of the agent's.
    fn text(&mut self, text: &str) {
        // An agent's text block is a whole message of its own: a code fence never runs
        // from one into the next. A plain command's lines are one text, so its fences
        // span lines.
        if !matches!(self.adapter, Adapter::Command { .. }) {
            self.scanner = crate::protocol::Scanner::new();
        }
        for line in text.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            match self.scanner.line(line) {
                Ok(Some(crate::protocol::Parsed::Message(message))) => {
                    self.said.logs.message(line);
                    match message.tag {
                        Tag::Done => self.said.done = Some(line.to_string()),
                        Tag::Escalate => self.said.escalated = Some(line.to_string()),
                        Tag::Request | Tag::Status => {}
                    }
                    let _ = self.messages.send((line.to_string(), message));
                }
                Ok(_) => {}
                Err(error) => {
                    self.said
                        .logs
                        .message(&format!("skipped a malformed message ({error}): {line}"));
                    tracing::warn!(gid = %self.gid, run = self.run_id, %error, %line, "a malformed worker message was skipped");
                }
            }
        }
    }
}

/// Runs `launch` to its end. A run claimed elsewhere meanwhile (the owner's cancel, a
/// runner that took it over) has its worker stopped and fails as fenced: nothing more is
/// written for it.
pub(super) async fn watch(
    w: &WorkerRun<'_>,
    run: &mut Run,
    launch: Launch,
    logs: PhaseLog,
    contract: Option<&crate::runner::contract::LoadedContract>,
) -> Result<Watched> {
    let Launch {
        spec,
        confined,
        process_cap,
        network,
        gate,
        relay,
        keeps_session,
    } = launch;
    // Before the worker starts, so nothing it does goes unreported; the gate lives as long
    // as this function, past the worker's end.
    let refusals = Refusals::watch(w, run, gate.as_ref()).await;
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
    let (session_tx, mut session_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let (message_tx, mut message_rx) = tokio::sync::mpsc::unbounded_channel();
    let scope = crate::policy::Scope::new(w.worktree.to_path_buf(), run.branch_name.as_deref())
        .with_confined(confined)
        .with_process_cap(process_cap)
        .with_base_branch(Some(&w.settings.base_branch))
        .with_network(network.clone());
    let relay_served = serve_relay(
        w,
        run.id,
        run.branch_name.clone(),
        relay,
        (confined, process_cap, network),
    );
    tokio::pin!(relay_served);
    let mut reader = Reader {
        adapter: w.adapter,
        gid: w.gid,
        run_id: run.id,
        scanner: crate::protocol::Scanner::new(),
        said: Said {
            done: None,
            escalated: None,
            session_id: None,
            finished: None,
            stderr: crate::supervisor::tail::Tail::new(STDERR_BYTES),
            failures: Vec::new(),
            limit_reached: None,
            retries: 0,
            last_retry: None,
            logs,
        },
        messages: message_tx,
        sessions: session_tx,
    };
    let mut worker_id = None;
    let outcome = {
        let supervised = supervisor::supervise(
            spec,
            |event| match event {
                WorkerEvent::Started { pid, start_time } => {
                    let _ = started_tx.send((pid, start_time));
                    false
                }
                WorkerEvent::Line { stream, line } => reader.line(stream, line.text()),
            },
            None,
        );
        tokio::pin!(supervised);
        // The run was claimed a moment ago: the first look at the claim is one period on.
        let mut claim_check =
            tokio::time::interval_at(tokio::time::Instant::now() + CLAIM_CHECK, CLAIM_CHECK);
        claim_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                outcome = &mut supervised => break outcome?,
                _ = claim_check.tick() => {
                    // A store out of reach says nothing about the claim: look again later.
                    if let Ok(false) = claim::still_ours(w.store, run).await {
                        tracing::warn!(gid = %w.gid, run = run.id, "the run was claimed elsewhere; stopping its worker");
                        return Err(crate::store::StoreError::Fenced { run_id: run.id }.into());
                    }
                    if let Some(refusals) = &refusals {
                        refusals.write_due(w).await;
                    }
                }
                () = &mut relay_served => {}
                Some((line, message)) = message_rx.recv() => {
                    on_message(w, run, contract, &scope, &line, &message).await?;
                }
                Some(id) = session_rx.recv() => {
                    if keeps_session {
                        on_session(w, run, id).await?;
                    }
                }
                Some((pid, start_time)) = started_rx.recv() => {
                    worker_id = Some(on_started(w, run, pid, start_time).await?);
                }
            }
        }
    };
    // A worker that ended before its start was heard is recorded all the same.
    if let Ok((pid, start_time)) = started_rx.try_recv() {
        worker_id = Some(on_started(w, run, pid, start_time).await?);
    }
    while let Ok((line, message)) = message_rx.try_recv() {
        on_message(w, run, contract, &scope, &line, &message).await?;
    }
    let refused = match refusals {
        Some(refusals) => refusals.end(w).await,
        None => Refused::default(),
    };
    drop(gate);
    Ok(Watched {
        outcome,
        said: reader.said,
        worker_id,
        refused,
    })
}

/// Serves the confined hook's questions until the worker ends (never, without a relay).
async fn serve_relay(
    w: &WorkerRun<'_>,
    run_id: i64,
    branch: Option<String>,
    relay: Option<(HookRelay, PathBuf)>,
    (confined, process_cap, network): (bool, bool, Option<crate::policy::WallNetwork>),
) {
    let Some((mut relay, settings_file)) = relay else {
        return std::future::pending::<()>().await;
    };
    let contract_copy = settings_file.with_file_name("worker-policy.json");
    let Some(listener) = relay.listener.take() else {
        return std::future::pending::<()>().await;
    };
    crate::cli::hook::serve_relay(
        listener,
        w.store,
        crate::cli::hook::HookRun {
            config: PathBuf::new(),
            run_id,
            worktree: w.worktree.to_path_buf(),
            branch,
            contract: contract_copy.exists().then_some(contract_copy),
            relay: None,
            confined,
            process_cap,
            base_branch: Some(w.settings.base_branch.clone()),
            network,
        },
    )
    .await;
    // The relay's folder goes with the worker, not before.
    drop(relay);
}

/// Stores one message of the worker's; a milestone is a sign of life the owner sees in
/// `show`.
async fn on_message(
    w: &WorkerRun<'_>,
    run: &mut Run,
    contract: Option<&crate::runner::contract::LoadedContract>,
    scope: &crate::policy::Scope,
    line: &str,
    message: &crate::protocol::Message,
) -> Result<()> {
    let run_id = run.id;
    // One moment for every try of the line, so a try after a lost answer finds the first.
    let at = w.settings.clock.now();
    let tries = std::sync::atomic::AtomicU32::new(0);
    patience::durably("a worker message", run_id, || {
        let retry = tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed) > 0;
        take_message(
            w.store,
            w.settings,
            contract,
            run,
            w.gid,
            scope,
            (line, message),
            super::messages::Taking { at, retry },
        )
    })
    .await?;
    if message.tag == Tag::Status {
        let now = w.settings.clock.now();
        run.worker_last_update = Some(now);
        run.updated_at = now;
        save(w.store, run).await?;
    }
    Ok(())
}

/// Saves the agent's session id the moment it is known, so a worker killed with its
/// runner can still be resumed in its own session.
async fn on_session(w: &WorkerRun<'_>, run: &mut Run, id: String) -> Result<()> {
    if run.worker_session_id.as_deref() == Some(id.as_str()) {
        return Ok(());
    }
    run.worker_session_id = Some(id);
    run.updated_at = w.settings.clock.now();
    save(w.store, run).await
}

/// Records the worker's process (for recovery and `status`) as soon as it started.
async fn on_started(
    w: &WorkerRun<'_>,
    run: &mut Run,
    pid: u32,
    start_time: Option<u64>,
) -> Result<i64> {
    let now = w.settings.clock.now();
    let record = WorkerRecord {
        id: 0,
        run_id: run.id,
        phase: w.phase.as_str().to_string(),
        host: host(),
        pid: i64::from(pid),
        start_time: start_time.and_then(|t| i64::try_from(t).ok()),
        started_at: now,
        ended_at: None,
        outcome: None,
    };
    run.worker_pid = Some(i64::from(pid));
    run.worker_last_update = Some(now);
    run.updated_at = now;
    // One write: a transient failure retries both, and nothing is recorded twice.
    let id = patience::durably("the worker's record", run.id, || async {
        Ok(w.store.record_worker_start(&record, run).await?)
    })
    .await?;
    Ok(id)
}

async fn save(store: &dyn Store, run: &Run) -> Result<()> {
    patience::durably("the run", run.id, || async {
        Ok(store.save_run(run).await?)
    })
    .await
}

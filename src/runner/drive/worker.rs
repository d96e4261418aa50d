//! One worker: its environment, its place in the wall, its supervision, and its record.
//! It never commits or pushes: the orchestrator does, after checking the repository.

use super::RunnerSettings;
use super::{launch, limits, patience, watch};
use crate::agents::Adapter;
use crate::core::record::Run;
use crate::core::watchdog::StopReason;
use crate::prompts::Phase;
use crate::runner::drive::baseline;
use crate::runner::drive::environment;
use crate::runner::drive::tampered_since;
use crate::runner::drive::PhaseLog;
use crate::runner::drive::Refused;
use crate::runner::drive::Said;
use crate::runner::drive::Watched;
use crate::runner::git::Baseline;
use crate::store::Store;
use crate::supervisor::{self};
use anyhow::Result;
use chrono::Utc;
use std::collections::HashMap;
use std::path::Path;

/// How long a worker about to start waits for a renewal of its run's lease.
const LEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

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
    /// The agent's usage limit stopped the worker: the run may go on then (the reset, or
    /// `[agent] usage_limit_backoff` from now). Not a failed worker.
    pub(super) limited: Option<chrono::DateTime<Utc>>,
    /// The worker's end, when its caller records it with the run's next write (see
    /// [`WorkerRun::end_later`]); `None` when it is recorded already, or no worker started.
    pub(super) end: Option<crate::core::record::WorkerEnd>,
}

/// Bytes of a worker's stderr kept for its run record (the newest).
pub(super) const STDERR_BYTES: usize = 256 * 1024;

/// What one worker of a run works with.
pub(super) struct WorkerRun<'a> {
    pub(super) store: &'a dyn Store,
    pub(super) adapter: &'a Adapter,
    pub(super) settings: &'a RunnerSettings,
    pub(super) gid: &'a str,
    pub(super) phase: Phase,
    pub(super) worktree: &'a Path,
    /// The worker's end is left to the caller's next write of the run ([`Worked::end`]).
    /// Until then the worker's record is open: a recovery in between finds its process
    /// gone and ends it.
    pub(super) end_later: bool,
}

/// Runs one `phase` worker of `run` in `worktree` with `prompt` to its end, and says
/// what it did (see [`run_worker`]).
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
    let w = WorkerRun {
        store,
        adapter,
        settings,
        gid,
        phase,
        worktree,
        end_later: false,
    };
    run_worker(w, run, prompt).await
}

/// A worker starts on a fresh lease, or the run goes back for recovery (the store is still
/// out of reach, or this runner's renewals do not land): [`super::HandedBack`]. A step
/// that records a worker as started before it starts it asks this first.
pub(super) async fn fresh_lease(settings: &RunnerSettings, run_id: i64) -> Result<()> {
    let fresh_for = super::lease::lease_ttl() / 3;
    if settings.lease_beat.fresh(fresh_for, LEASE_WAIT).await {
        return Ok(());
    }
    Err(super::HandedBack {
        run_id,
        why: "no renewal of its lease landed before its worker could start".into(),
    }
    .into())
}

/// Runs one worker to its end, and says what it did. The run is saved as the worker goes
/// (its process, session and milestones).
pub(super) async fn run_worker(w: WorkerRun<'_>, run: &mut Run, prompt: String) -> Result<Worked> {
    let logs = PhaseLog::create(
        &w.settings.logs_dir,
        w.gid,
        w.phase.as_str(),
        &w.settings.clock,
    )?;
    let baseline = baseline(w.settings, w.worktree).await?;
    let keeps_session = w.phase != Phase::PrReview;
    let env = environment(&w, run, keeps_session).await?;
    // The contract this worker is judged by, fixed for its whole life (a reload applies to
    // the next worker).
    let contract = w
        .settings
        .worker_contract
        .as_ref()
        .map(|cell| cell.current());
    fresh_lease(w.settings, run.id).await?;
    let launch = launch(&w, run, env, prompt, contract.as_deref())?;
    let confined = launch.confined;
    let watched = watch(&w, run, launch, logs, contract.as_deref()).await?;
    run.worker_pid = None;
    run.worker_last_update = Some(w.settings.clock.now());
    if keeps_session && watched.said.session_id.is_some() {
        run.worker_session_id = watched.said.session_id.clone();
    }
    conclude(&w, run, watched, baseline, confined).await
}

/// A watchdog's stop `what`, with what the worker did instead of its work where its network
/// says: it only reported retrying, the wall refused it (and the allow line that would let
/// it through).
fn stopped_for(what: &str, said: &Said, refused: &Refused, configured: &[String]) -> String {
    let stalled = crate::core::net_refusals::stalled(
        said.retries,
        said.last_retry.as_deref(),
        &refused.rows,
        configured,
    );
    match stalled {
        Some(stalled) => format!("{what}: {stalled}"),
        None => what.to_string(),
    }
}

/// A worker stopped past its disk budget, in words.
fn disk_budget_passed(outcome: &supervisor::Outcome) -> String {
    match outcome.disk_used {
        Some(used) => format!(
            "stopped past its disk budget: it had written {} MiB in its worktree and home, more than [sandbox] max_disk allows",
            used >> 20
        ),
        None => "stopped past its disk budget ([sandbox] max_disk)".to_string(),
    }
}

/// The escalation kind of a run whose worker passed its disk budget.
pub const DISK_BUDGET: &str = "disk_budget";

/// Why a worker ended, in words for the log, the record and the owner.
fn why_ended(
    said: &Said,
    outcome: &supervisor::Outcome,
    refused: &Refused,
    configured: &[String],
) -> String {
    let deferred = said
        .finished
        .as_ref()
        .and_then(|f| f.deferred_tool.as_ref());
    let api_error = said.finished.as_ref().and_then(|f| f.api_error());
    match (&said.done, &said.escalated, outcome.stopped) {
        (Some(_), _, _) => "done".to_string(),
        (None, _, None) if deferred.is_some() => format!(
            "the agent parked a tool call for the owner: {}",
            deferred.map(|t| t.name.as_str()).unwrap_or_default()
        ),
        (None, Some(line), _) => format!("the worker escalated: {line}"),
        (None, None, Some(StopReason::NoOutput)) => {
            stopped_for("no output for too long", said, refused, configured)
        }
        (None, None, Some(StopReason::HardTimeout)) => {
            stopped_for("hard timeout", said, refused, configured)
        }
        (None, None, Some(StopReason::Requested)) => "stopped on request".to_string(),
        (None, None, Some(StopReason::DiskBudget)) => disk_budget_passed(outcome),
        (None, None, Some(StopReason::ProcessCap)) => {
            "stopped at its process cap: it tried to start more processes than [sandbox] max_processes allows".to_string()
        }
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
    }
}

/// Records the worker's end and says what it did. Whatever the worker said, a repository
/// it tampered with goes to the owner, before any git of the orchestrator's runs in it
/// again.
async fn conclude(
    w: &WorkerRun<'_>,
    run: &Run,
    watched: Watched,
    baseline: Option<Baseline>,
    confined: bool,
) -> Result<Worked> {
    let Watched {
        outcome,
        mut said,
        worker_id,
        refused,
    } = watched;
    if outcome.stopped == Some(StopReason::DiskBudget) {
        // The owner decides: free the space or raise the budget, then the run carries on.
        said.done = None;
        said.escalated = Some(format!(
            "[ESCALATE:{DISK_BUDGET}] the worker was {}. Free space (or raise max_disk in executor.toml), then answer to carry the run on; `executor cancel` abandons it.",
            disk_budget_passed(&outcome)
        ));
    }
    if outcome.stopped == Some(StopReason::ProcessCap) {
        // What a worker said before it ran into its process cap is not taken: a fork storm
        // is no finished phase, and its question is not the owner's to answer.
        said.done = None;
        said.escalated = None;
    }
    let limit = limits::limit_of(w.adapter, &said, &outcome, w.settings.clock.as_ref());
    let limited = limit
        .as_ref()
        .map(|l| l.until(w.settings.agent.usage_limit_backoff, w.settings.clock.now()));
    let why = match (&limit, limited) {
        (Some(limit), Some(until)) => format!(
            "{}; the run carries on after {} UTC",
            limit.sentence(),
            until.format("%Y-%m-%d %H:%M:%S")
        ),
        _ => {
            let configured: Vec<String> = w
                .settings
                .wall
                .allow()
                .iter()
                .map(ToString::to_string)
                .collect();
            why_ended(&said, &outcome, &refused, &configured)
        }
    };
    said.logs.message(&format!("worker ended: {why}"));
    let agent = w.adapter.name();
    let spend = said.finished.as_ref().map(|finished| {
        w.adapter
            .spend(finished)
            .priced_by(w.settings.agent.prices.get(agent))
    });
    let end = worker_id.map(|id| crate::core::record::WorkerEnd {
        id,
        at: w.settings.clock.now(),
        outcome: why.clone(),
    });
    if let (false, Some(end)) = (w.end_later, &end) {
        end_alone(w, run, end).await?;
    }
    let worked = async {
        // A worker whose agent said nothing of its end spent what no one can tell.
        if let (Some(id), Some(spend)) = (worker_id, &spend) {
            patience::durably("the worker's spend", run.id, || async {
                Ok(w.store.record_spend(id, agent, spend).await?)
            })
            .await?;
        }
        let mut worked = said_and_done(
            w, run, said, &outcome, why, spend, limit, limited, baseline, confined,
        )
        .await?;
        // The run record keeps what the wall refused this worker, beside why it ended.
        worked.result["net_refused"] = serde_json::json!(refused.rows);
        if refused.past_cap > 0 {
            worked.result["net_refused_unrecorded"] = serde_json::json!(refused.past_cap);
        }
        Ok(worked)
    }
    .await;
    match (worked, w.end_later, end) {
        (Ok(worked), true, end) => Ok(Worked { end, ..worked }),
        // The worker's end left to a write that will not come: recorded alone, tried once
        // (the store may be what failed; a recovery ends the worker's record otherwise).
        (Err(error), true, Some(end)) => {
            if let Err(lost) = w.store.end_worker(end.id, end.at, &end.outcome).await {
                tracing::error!(gid = %w.gid, run = run.id, error = %lost, "cannot record the worker's end; a recovery ends its record");
            }
            Err(error)
        }
        (worked, _, _) => worked,
    }
}

/// Records worker `end` on its own.
async fn end_alone(
    w: &WorkerRun<'_>,
    run: &Run,
    end: &crate::core::record::WorkerEnd,
) -> Result<()> {
    patience::durably("the worker's end", run.id, || async {
        Ok(w.store.end_worker(end.id, end.at, &end.outcome).await?)
    })
    .await
}

/// What an ended worker did, from what it said: its record, the pause its usage limit
/// starts, its question for the owner, and the check that it left the repository's git
/// data alone.
#[allow(clippy::too_many_arguments)]
async fn said_and_done(
    w: &WorkerRun<'_>,
    run: &Run,
    mut said: Said,
    outcome: &supervisor::Outcome,
    why: String,
    spend: Option<crate::core::spend::Spend>,
    limit: Option<crate::core::usage_limit::UsageLimit>,
    limited: Option<chrono::DateTime<Utc>>,
    baseline: Option<Baseline>,
    confined: bool,
) -> Result<Worked> {
    let agent = w.adapter.name();
    let result = serde_json::json!({
        "run_id": run.id,
        "task_gid": w.gid,
        "phase": w.phase.as_str(),
        "agent": agent,
        "confined": confined,
        "wall": w.settings.wall.describe(),
        "session_id": run.worker_session_id,
        "done": said.done,
        "escalated": said.escalated,
        "why": why,
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        "stopped": outcome.stopped,
        "killed": outcome.killed,
        "lines": outcome.lines,
        "truncated_lines": outcome.truncated_lines,
        "agent_result": said.finished,
        "spend": spend,
        "usage_limit": limit,
    });
    if let (Some(limit), Some(until)) = (&limit, limited) {
        limits::pause_for(w.store, w.settings, run.id, w.gid, limit, until).await?;
    }
    let deferred = said.finished.as_ref().and_then(|f| f.deferred_tool.clone());
    let mut asked = match (&said.done, deferred, &said.escalated) {
        (Some(_), _, _) => None,
        (None, Some(tool), _) => Some(Asked::DeferredTool(tool)),
        (None, None, Some(line)) => Some(Asked::Message(line.clone())),
        (None, None, None) => None,
    };
    let (mut done, mut why, mut tampered) = (said.done, why, false);
    if let Some((question, changes)) = tampered_since(baseline.as_ref()).await? {
        tracing::warn!(gid = %w.gid, run = run.id, %changes, "the repository's git data changed while the worker ran; nothing is committed");
        said.logs
            .message(&format!("the repository's git data changed: {changes}"));
        why = format!("the repository's git data changed: {changes}");
        (done, asked, tampered) = (None, Some(question), true);
    }
    Ok(Worked {
        done,
        asked,
        stopped: outcome.stopped,
        why,
        result,
        stderr: said.stderr.into_lines(),
        baseline,
        tampered,
        limited: if tampered { None } else { limited },
        end: None,
    })
}

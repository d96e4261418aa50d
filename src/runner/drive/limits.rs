//! Usage limits at the edge: reading a worker's end for one (`core::usage_limit` decides),
//! storing the agent's pause so no worker of it starts before the reset (a restart keeps
//! it), and telling the owner once per pause. It never counts a limit as a failed worker:
//! the lifecycle holds the run until the reset and carries it on in its session.

use super::patience;
use super::RunnerSettings;
use crate::agents::Adapter;
use crate::core::clock::Clock;
use crate::core::usage_limit::{self, AgentPause, UsageLimit};
use crate::runner::drive::Said;
use crate::store::Store;
use crate::supervisor::{self};
use anyhow::Result;
use chrono::Utc;

/// Lines of a worker's stderr read for a limit (the newest).
const STDERR_LINES: usize = 20;

/// The usage limit a worker ended on, if it ended on one: it did not say `[DONE]` or ask,
/// was not stopped by executor, and its agent's end (an error result, error events, a
/// rejected rate limit, its stderr) says a limit refused it.
pub(super) fn limit_of(
    adapter: &Adapter,
    said: &Said,
    outcome: &supervisor::Outcome,
    clock: &dyn Clock,
) -> Option<UsageLimit> {
    if said.done.is_some() || said.escalated.is_some() || outcome.stopped.is_some() {
        return None;
    }
    let finished = said.finished.as_ref();
    // A worker whose agent says it succeeded ended on no limit, whatever its text says.
    if finished.is_some_and(|f| !f.is_error) && said.limit_reached.is_none() {
        return None;
    }
    let mut texts: Vec<&str> = Vec::new();
    if let Some(f) = finished.filter(|f| f.is_error) {
        texts.extend(f.result.as_deref());
        texts.extend(f.reason.as_deref());
        texts.extend(f.errors.iter().map(String::as_str));
    }
    texts.extend(said.failures.iter().map(String::as_str));
    texts.extend(said.stderr.newest(STDERR_LINES));
    let signals = usage_limit::Signals {
        api_status: finished.and_then(|f| f.api_error_status),
        rejected: said.limit_reached.is_some(),
        reported_reset: said.limit_reached.flatten(),
        texts,
    };
    usage_limit::detect(adapter.name(), &signals, clock.now(), clock.local_offset())
}

/// The pause of `agent`'s workers in force now, if any.
pub(super) async fn paused(
    store: &dyn Store,
    settings: &RunnerSettings,
    agent: &str,
) -> Result<Option<AgentPause>> {
    let pauses = store.agent_pauses().await?;
    Ok(usage_limit::in_force(&pauses, agent, settings.clock.now()).cloned())
}

/// Stores the pause `limit` starts (or extends) until `until`, and tells the owner when it
/// is a new one.
pub(super) async fn pause_for(
    store: &dyn Store,
    settings: &RunnerSettings,
    run_id: i64,
    gid: &str,
    limit: &UsageLimit,
    until: chrono::DateTime<Utc>,
) -> Result<()> {
    let pause = AgentPause {
        agent: limit.agent.clone(),
        since: settings.clock.now(),
        until,
        reason: limit.sentence(),
        run_id: Some(run_id),
        task_gid: Some(gid.to_string()),
    };
    let new = patience::durably("the agent's pause", run_id, || async {
        Ok(store.pause_agent(&pause).await?)
    })
    .await?;
    tracing::warn!(gid = %gid, run = run_id, agent = %pause.agent, until = %until, new, "{}", pause.reason);
    if new {
        let notice = crate::chat::Notice {
            priority: crate::core::outbox::Priority::Action,
            persona: crate::chat::Persona::Orchestrator,
            task_gid: Some(gid.to_string()),
            run_id: Some(run_id),
            body: format!(
                "Usage limit: {}. No {} worker starts until {} UTC; run {run_id} then carries on in its session.",
                pause.reason,
                pause.agent,
                until.format("%Y-%m-%d %H:%M:%S")
            ),
        };
        settings.notices.tell(store, notice).await;
    }
    Ok(())
}

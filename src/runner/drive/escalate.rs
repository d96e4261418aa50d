//! Escalations: what a worker leaves to the owner is recorded, shown to the model judge
//! when the owner asked for one, and told to the owner.

use super::RunnerSettings;
use crate::agents::Adapter;
use crate::core::record::Run;
use crate::runner::drive::worker_env;
use crate::runner::drive::Asked;
use crate::store::Store;
use anyhow::Result;

/// How many of a run's latest messages an escalation shows the owner.
pub const MESSAGE_WINDOW: u32 = 20;

/// Opens the escalation for what a worker left to the owner (or finds the one its hook
/// already opened for a parked tool call), tells the owner, and returns its id.
pub(super) async fn open_escalation(
    store: &dyn Store,
    adapter: &Adapter,
    settings: &RunnerSettings,
    run: &Run,
    gid: &str,
    asked: &Asked,
) -> Result<i64> {
    let window = store.messages(run.id, settings.window).await?;
    let window_json = serde_json::to_string(&window)?;
    let existing = match asked {
        Asked::DeferredTool(tool) => store
            .run_escalations(run.id)
            .await?
            .into_iter()
            .find(|e| e.is_pending() && e.tool_use_id.as_deref() == Some(tool.id.as_str())),
        Asked::Message(_) => None,
    };
    let escalation = match existing {
        Some(found) => found,
        None => {
            let (action, detail, tool_use_id) = match asked {
                Asked::Message(line) => (escalation_kind(line).to_string(), line.clone(), None),
                Asked::DeferredTool(tool) => (
                    format!("tool:{}", tool.name),
                    serde_json::json!({"tool_name": tool.name, "tool_input": tool.input})
                        .to_string(),
                    Some(tool.id.clone()),
                ),
            };
            store
                .record_decision(&crate::core::record::NewDecision {
                    task_gid: Some(gid.to_string()),
                    run_id: Some(run.id),
                    at: settings.clock.now(),
                    role: "worker".to_string(),
                    action,
                    decision: "escalate".to_string(),
                    rule_id: None,
                    detail: Some(detail),
                    tool_use_id,
                    message_window: Some(window_json),
                    // The run's worker ran in this pass, enclosed by this process's wall,
                    // which confines every worker or none.
                    confined: Some(settings.wall.is_confined()),
                })
                .await?
        }
    };
    if let Some(judge) = settings.judge.as_ref().filter(|j| j.wants(&escalation)) {
        if judged_deny(store, adapter, settings, judge, gid, &escalation, &window).await {
            return Ok(escalation.id);
        }
    }
    settings
        .notices
        .tell(
            store,
            crate::chat::text::escalation(settings.notices.routing(), &escalation, &window),
        )
        .await;
    Ok(escalation.id)
}

/// Who the judge's answers are recorded as.
pub(super) const JUDGE: &str = "model judge";

/// Denials by the judge a run may get before its questions go to the owner directly.
pub(super) const MAX_JUDGE_DENIALS: usize = 2;

/// Asks the model judge about `escalation`; true when it denied it (recorded as the
/// answer, so the run resumes with the denial). A judge that fails leaves the question to
/// the owner.
pub(super) async fn judged_deny(
    store: &dyn Store,
    adapter: &Adapter,
    settings: &RunnerSettings,
    judge: &crate::runner::judge::JudgeSettings,
    gid: &str,
    escalation: &crate::core::record::Decision,
    window: &[crate::core::record::StoredMessage],
) -> bool {
    use crate::runner::judge::{self, Verdict};
    // A worker that keeps asking after the judge's denials gets the owner, not a loop.
    let denied_before = match escalation.run_id {
        Some(run_id) => store
            .run_escalations(run_id)
            .await
            .map(|all| {
                all.iter()
                    .filter(|e| e.resolved_by.as_deref() == Some(JUDGE))
                    .count()
            })
            .unwrap_or(usize::MAX),
        None => 0,
    };
    if denied_before >= MAX_JUDGE_DENIALS {
        tracing::info!(gid = %gid, escalation = escalation.id, "the model judge already denied this run's questions {MAX_JUDGE_DENIALS} times; the owner decides");
        return false;
    }
    let dir = settings
        .logs_dir
        .join(gid)
        .join(format!("judge-{}", escalation.id));
    let verdict = match judge::prompt(escalation, window) {
        Ok(prompt) => {
            judge::ask(
                adapter,
                judge,
                worker_env(adapter, settings),
                &dir,
                prompt,
                &settings.wall,
                format!("judge-{}", escalation.id),
            )
            .await
        }
        Err(error) => Err(error),
    };
    match verdict {
        Ok(Verdict::Deny(reason)) => {
            match store
                .resolve_escalation(
                    escalation.id,
                    "deny",
                    Some(&reason),
                    JUDGE,
                    settings.clock.now(),
                )
                .await
            {
                Ok(_) => {
                    tracing::info!(gid = %gid, escalation = escalation.id, %reason, "the model judge denied the escalation; the run resumes with the denial");
                    settings
                        .notices
                        .tell(
                            store,
                            crate::chat::Notice::orchestrator(
                                crate::core::outbox::Priority::Info,
                                gid.to_string(),
                                escalation.run_id,
                                format!(
                                    "The model judge denied escalation {} (`{}`): {reason}",
                                    escalation.id, escalation.action
                                ),
                            ),
                        )
                        .await;
                    true
                }
                Err(error) => {
                    tracing::error!(gid = %gid, escalation = escalation.id, %error, "cannot record the judge's denial; the owner decides");
                    false
                }
            }
        }
        Ok(Verdict::LeaveToOwner(why)) => {
            tracing::info!(gid = %gid, escalation = escalation.id, %why, "the model judge left the escalation to the owner");
            false
        }
        Err(error) => {
            tracing::warn!(gid = %gid, escalation = escalation.id, error = format!("{error:#}"), "the model judge failed; the owner decides");
            false
        }
    }
}

/// `needs_decision` of `[ESCALATE:needs_decision] …`.
pub(super) fn escalation_kind(line: &str) -> &str {
    line.strip_prefix("[ESCALATE:")
        .and_then(|rest| rest.split_once(']'))
        .map(|(kind, _)| kind)
        .unwrap_or("escalate")
}

//! The task's budget as the run's next worker meets it: read from the store, for the
//! lifecycle to decide on (`Event::OverBudget`, `PrLook::budget`). Nothing here decides
//! whether a worker starts; it only says what was spent and what the owner answered.

use super::RunnerSettings;
use crate::core::budget::Over;
use crate::core::lifecycle;
use crate::core::record::{Decision, Run};
use crate::core::spend::SpendTotal;
use crate::runner::drive::Asked;
use crate::runner::drive::Worked;
use crate::store::Store;
use anyhow::Result;

/// The escalation kind of a run over its task's budget.
pub const BUDGET: &str = "budget";

/// Whether the task's workers spent its budget (`[budget] per_task_usd` /
/// `per_task_tokens`) and the owner has not let this run go on since: an approved budget
/// escalation lets one more worker start.
pub(super) async fn over(
    store: &dyn Store,
    settings: &RunnerSettings,
    gid: &str,
    run: &Run,
) -> Result<Option<Over>> {
    Ok(spent(store, settings, gid, run)
        .await?
        .map(|(over, _)| over))
}

/// The budget of a run in its PR stage, where no answer of the owner is fed back as an
/// event: spent and not asked yet, asked and waiting, or refused.
pub(super) async fn of_pr_run(
    store: &dyn Store,
    settings: &RunnerSettings,
    gid: &str,
    run: &Run,
) -> Result<lifecycle::Budget> {
    let Some((over, questions)) = spent(store, settings, gid, run).await? else {
        return Ok(lifecycle::Budget::Within);
    };
    Ok(match questions.into_iter().max_by_key(|d| d.id) {
        Some(d) if d.resolution.is_none() => lifecycle::Budget::Asked,
        Some(d) if d.resolution.as_deref() == Some("deny") => lifecycle::Budget::Refused,
        _ => lifecycle::Budget::Over {
            why: over.sentence(),
        },
    })
}

/// What [`over`] says, with the run's budget questions it read to say it.
async fn spent(
    store: &dyn Store,
    settings: &RunnerSettings,
    gid: &str,
    run: &Run,
) -> Result<Option<(Over, Vec<Decision>)>> {
    let budget = &settings.budget;
    if budget.per_task_usd.is_none() && budget.per_task_tokens.is_none() {
        return Ok(None);
    }
    let rows = store.spend(Some(gid)).await?;
    let Some(over) = budget.task_over(&SpendTotal::of(&rows)) else {
        return Ok(None);
    };
    let questions: Vec<Decision> = store
        .run_escalations(run.id)
        .await?
        .into_iter()
        .filter(|d| d.action == BUDGET)
        .collect();
    let allowed = questions
        .iter()
        .filter(|d| d.resolution.as_deref() == Some("approve"))
        .filter_map(|d| d.resolved_at)
        .max();
    let worked_since = |at| rows.iter().any(|r| r.run_id == run.id && r.at > at);
    Ok(match allowed {
        Some(at) if !worked_since(at) => None,
        _ => Some((over, questions)),
    })
}

/// The owner's question for a run over its task's budget.
pub(super) fn question(gid: &str, run_id: i64, why: &str) -> Asked {
    Asked::Message(format!(
        "[ESCALATE:{BUDGET}] task {gid} is over its budget: {why}. Approve lets run {run_id} start one more worker; deny ends the run."
    ))
}

/// What a worker outside the lifecycle (a conductor's planner, a dispatched task file)
/// that the budget kept from starting "did": it asks the owner whether the run may spend
/// more.
pub(super) fn not_started(run: &Run, gid: &str, over: &Over) -> Worked {
    let why = over.sentence();
    Worked {
        done: None,
        asked: Some(question(gid, run.id, &why)),
        stopped: None,
        why: format!("no worker started: {why}"),
        result: serde_json::json!({ "run_id": run.id, "task_gid": gid, "budget": over }),
        stderr: Vec::new(),
        baseline: None,
        tampered: false,
        limited: None,
        end: None,
    }
}

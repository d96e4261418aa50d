//! A worker's message lines, stored as they come; a `[REQUEST:…]` is decided by the worker
//! contract there and then.

use super::RunnerSettings;
use crate::core::record::Run;
use crate::store::Store;
use anyhow::Result;

/// Stores one worker message with its run; a `[REQUEST:…]` is decided by the worker
/// contract there and then, the decision recorded (an escalation when the contract says
/// so) and written back into the run's messages, where the worker's next prompt shows it.
pub(super) async fn take_message(
    store: &dyn Store,
    settings: &RunnerSettings,
    contract: Option<&crate::runner::contract::LoadedContract>,
    run: &Run,
    gid: &str,
    scope: &crate::policy::Scope,
    (line, message): (&str, &crate::protocol::Message),
) -> Result<()> {
    let args: serde_json::Map<String, serde_json::Value> = message
        .args
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    store
        .record_message(&crate::core::record::NewMessage {
            run_id: run.id,
            task_gid: gid.to_string(),
            at: settings.clock.now(),
            source: "worker".to_string(),
            tag: message.tag.as_str().to_string(),
            kind: message.kind.clone(),
            args: serde_json::Value::Object(args).to_string(),
            text: message.text.clone(),
            line: line.to_string(),
        })
        .await?;
    settings
        .notices
        .tell(
            store,
            crate::chat::Notice {
                priority: crate::core::outbox::Priority::Info,
                persona: crate::chat::Persona::Worker,
                task_gid: Some(gid.to_string()),
                run_id: Some(run.id),
                body: crate::chat::text::mirrored(run.id, gid, line),
            },
        )
        .await;
    let (Some(action), Some(contract)) = (message.to_action(), contract) else {
        return Ok(());
    };
    decide_request(store, settings, contract, run, gid, scope, line, &action).await
}

/// Decides a worker's `[REQUEST:…]` by the contract: the decision is recorded (an
/// escalation when the contract says so), told to the owner and written back into the
/// run's messages as the orchestrator's `[STATUS:request_…]` answer.
#[allow(clippy::too_many_arguments)]
async fn decide_request(
    store: &dyn Store,
    settings: &RunnerSettings,
    contract: &crate::runner::contract::LoadedContract,
    run: &Run,
    gid: &str,
    scope: &crate::policy::Scope,
    line: &str,
    action: &crate::policy::Action,
) -> Result<()> {
    let (_, verdict) = crate::policy::judge(
        &contract.contract,
        &crate::policy::Input::Request(action),
        scope,
    );
    let decision = match verdict.decision {
        crate::policy::Decision::Approve => "approve",
        crate::policy::Decision::Deny => "deny",
        crate::policy::Decision::Escalate => "escalate",
    };
    let rule = verdict
        .rule_id
        .clone()
        .unwrap_or_else(|| "(default)".to_string());
    let shown = if decision == "escalate" {
        store.messages(run.id, settings.window).await?
    } else {
        Vec::new()
    };
    let window = if decision == "escalate" {
        Some(serde_json::to_string(&shown)?)
    } else {
        None
    };
    let recorded = store
        .record_decision(&crate::core::record::NewDecision {
            task_gid: Some(gid.to_string()),
            run_id: Some(run.id),
            at: settings.clock.now(),
            role: "worker".to_string(),
            action: action.kind.clone(),
            decision: decision.to_string(),
            rule_id: verdict.rule_id.clone(),
            detail: Some(line.to_string()),
            tool_use_id: None,
            message_window: window,
            // The posture the request was judged in: the worker's own.
            confined: Some(scope.confined),
        })
        .await?;
    let kind = match verdict.decision {
        crate::policy::Decision::Approve => "request_approved",
        crate::policy::Decision::Deny => "request_denied",
        crate::policy::Decision::Escalate => "request_escalated",
    };
    let answer = match verdict.decision {
        crate::policy::Decision::Escalate => format!(
            "[STATUS:{kind}] request={} escalation={} The owner decides this one (rule {rule}: {}); carry on without it meanwhile.",
            action.kind, recorded.id, verdict.why
        ),
        _ => format!(
            "[STATUS:{kind}] request={} rule={rule} {}",
            action.kind, verdict.why
        ),
    };
    tracing::info!(gid = %gid, run = run.id, request = %action, %decision, %rule, "decided a worker request");
    let notice = match verdict.decision {
        crate::policy::Decision::Escalate => {
            crate::chat::text::escalation(settings.notices.routing(), &recorded, &shown)
        }
        _ => crate::chat::Notice::orchestrator(
            crate::core::outbox::Priority::Info,
            gid.to_string(),
            Some(run.id),
            crate::chat::text::decided(run.id, &action.kind, decision, &rule, &verdict.why),
        ),
    };
    settings.notices.tell(store, notice).await;
    store
        .record_message(&crate::core::record::NewMessage {
            run_id: run.id,
            task_gid: gid.to_string(),
            at: settings.clock.now(),
            source: "orchestrator".to_string(),
            tag: "STATUS".to_string(),
            kind: kind.to_string(),
            args: serde_json::json!({ "request": action.kind, "rule": rule }).to_string(),
            text: verdict.why.clone(),
            line: answer,
        })
        .await?;
    Ok(())
}

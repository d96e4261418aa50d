//! A worker's message lines, stored as they come; a `[REQUEST:…]` is decided by the worker
//! contract there and then. The line, its notices and, for a request, the decision, its
//! notices and the answer are one write ([`crate::core::exchange`]): a write tried again
//! after the store failed cannot leave any of them twice or one without the others.

use std::sync::Arc;

use super::RunnerSettings;
use crate::chat::{Notice, Notices};
use crate::core::exchange::{DecidedRequest, NewExchange, RequestAnswer};
use crate::core::record::{Decision, NewDecision, NewMessage, Run, StoredMessage};
use crate::policy::Decision as Verdict;
use crate::store::Store;
use anyhow::Result;

/// How one line is taken: when it was received, and whether this is a try after one that
/// failed (which may have landed: the store then writes it once).
#[derive(Debug, Clone, Copy)]
pub(super) struct Taking {
    pub at: chrono::DateTime<chrono::Utc>,
    pub retry: bool,
}

/// Stores one worker message with its run; a `[REQUEST:…]` is decided by the worker
/// contract there and then, the decision recorded (an escalation when the contract says
/// so) and written back into the run's messages, where the worker's next prompt shows it.
#[allow(clippy::too_many_arguments)]
pub(super) async fn take_message(
    store: &dyn Store,
    settings: &RunnerSettings,
    contract: Option<&crate::runner::contract::LoadedContract>,
    run: &Run,
    gid: &str,
    scope: &crate::policy::Scope,
    (line, message): (&str, &crate::protocol::Message),
    taking: Taking,
) -> Result<()> {
    let args: serde_json::Map<String, serde_json::Value> = message
        .args
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    let at = taking.at;
    let mirrored = Notice {
        priority: crate::core::outbox::Priority::Info,
        persona: crate::chat::Persona::Worker,
        task_gid: Some(gid.to_string()),
        run_id: Some(run.id),
        body: crate::chat::text::mirrored(run.id, gid, line),
    };
    let request = match (message.to_action(), contract) {
        (Some(action), Some(contract)) => Some(Arc::new(decide(
            settings, contract, run, gid, scope, line, &action,
        ))),
        _ => None,
    };
    let exchanged = store
        .record_exchange(NewExchange {
            lease_epoch: run.lease_epoch,
            message: NewMessage {
                run_id: run.id,
                task_gid: gid.to_string(),
                at,
                source: "worker".to_string(),
                tag: message.tag.as_str().to_string(),
                kind: message.kind.clone(),
                args: serde_json::Value::Object(args).to_string(),
                text: message.text.clone(),
                line: line.to_string(),
            },
            outgoing: settings.notices.rows(&mirrored),
            request: request.clone().map(|r| r as Arc<dyn DecidedRequest>),
            retry: taking.retry,
        })
        .await?;
    if exchanged.landed_before {
        tracing::info!(gid = %gid, run = run.id, "a worker line whose write was thought lost had landed; it is not written again");
        return Ok(());
    }
    // Told only now that it is stored: the log never shows what did not land.
    settings.notices.log(&mirrored);
    if let (Some(request), Some((recorded, window))) = (request, &exchanged.request) {
        tracing::info!(gid = %gid, run = run.id, request = %request.request, decision = %request.decision, rule = %request.rule, "decided a worker request");
        settings.notices.log(&request.notice(recorded, window));
    }
    if !exchanged.outbox_ids.is_empty() {
        settings.notices.stored();
    }
    Ok(())
}

/// Judges a worker's `[REQUEST:…]` by the contract.
fn decide(
    settings: &RunnerSettings,
    contract: &crate::runner::contract::LoadedContract,
    run: &Run,
    gid: &str,
    scope: &crate::policy::Scope,
    line: &str,
    action: &crate::policy::Action,
) -> Decided {
    let (_, verdict) = crate::policy::judge(
        &contract.contract,
        &crate::policy::Input::Request(action),
        scope,
    );
    Decided {
        notices: settings.notices.clone(),
        window: match verdict.decision {
            Verdict::Escalate => settings.window,
            _ => 0,
        },
        at: settings.clock.now(),
        run_id: run.id,
        gid: gid.to_string(),
        line: line.to_string(),
        request: action.to_string(),
        action: action.kind.clone(),
        verdict: verdict.decision,
        decision: match verdict.decision {
            Verdict::Approve => "approve",
            Verdict::Deny => "deny",
            Verdict::Escalate => "escalate",
        },
        rule_id: verdict.rule_id.clone(),
        rule: verdict
            .rule_id
            .clone()
            .unwrap_or_else(|| "(default)".to_string()),
        why: verdict.why,
        confined: scope.confined,
    }
}

/// A request as the contract decided it. The rows it leads to are built inside the store's
/// write, from the decision as recorded: the answer and an escalation's notice name its id.
struct Decided {
    notices: Notices,
    /// Messages shown with the decision: the settings' window for an escalation, else 0.
    window: u32,
    at: chrono::DateTime<chrono::Utc>,
    run_id: i64,
    gid: String,
    line: String,
    /// The request as the log shows it.
    request: String,
    action: String,
    verdict: Verdict,
    decision: &'static str,
    rule_id: Option<String>,
    /// The rule as the answer names it (`(default)` when none matched).
    rule: String,
    why: String,
    /// The posture the request was judged in: the worker's own.
    confined: bool,
}

impl Decided {
    /// What the owner is told of the decision.
    fn notice(&self, recorded: &Decision, window: &[StoredMessage]) -> Notice {
        match self.verdict {
            Verdict::Escalate => {
                crate::chat::text::escalation(self.notices.routing(), recorded, window)
            }
            _ => Notice::orchestrator(
                crate::core::outbox::Priority::Info,
                self.gid.clone(),
                Some(self.run_id),
                crate::chat::text::decided(
                    self.run_id,
                    &self.action,
                    self.decision,
                    &self.rule,
                    &self.why,
                ),
            ),
        }
    }

    /// The orchestrator's `[STATUS:request_…]` line back to the worker.
    fn answer_line(&self, kind: &str, recorded: &Decision) -> String {
        match self.verdict {
            Verdict::Escalate => format!(
                "[STATUS:{kind}] request={} escalation={} The owner decides this one (rule {}: {}); carry on without it meanwhile.",
                self.action, recorded.id, self.rule, self.why
            ),
            _ => format!(
                "[STATUS:{kind}] request={} rule={} {}",
                self.action, self.rule, self.why
            ),
        }
    }
}

impl DecidedRequest for Decided {
    fn window(&self) -> u32 {
        self.window
    }

    fn decision(&self, window: &[StoredMessage]) -> Result<NewDecision, String> {
        let message_window = match self.verdict {
            Verdict::Escalate => {
                Some(serde_json::to_string(window).map_err(|error| error.to_string())?)
            }
            _ => None,
        };
        Ok(NewDecision {
            task_gid: Some(self.gid.clone()),
            run_id: Some(self.run_id),
            at: self.at,
            role: "worker".to_string(),
            action: self.action.clone(),
            decision: self.decision.to_string(),
            rule_id: self.rule_id.clone(),
            detail: Some(self.line.clone()),
            tool_use_id: None,
            message_window,
            confined: Some(self.confined),
        })
    }

    fn answer(
        &self,
        recorded: &Decision,
        window: &[StoredMessage],
    ) -> Result<RequestAnswer, String> {
        let kind = match self.verdict {
            Verdict::Approve => "request_approved",
            Verdict::Deny => "request_denied",
            Verdict::Escalate => "request_escalated",
        };
        Ok(RequestAnswer {
            outgoing: self.notices.rows(&self.notice(recorded, window)),
            message: NewMessage {
                run_id: self.run_id,
                task_gid: self.gid.clone(),
                at: self.at,
                source: "orchestrator".to_string(),
                tag: "STATUS".to_string(),
                kind: kind.to_string(),
                args: serde_json::json!({ "request": self.action, "rule": self.rule }).to_string(),
                text: self.why.clone(),
                line: self.answer_line(kind, recorded),
            },
        })
    }
}

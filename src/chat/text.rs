//! The words executor says in chat: a mirrored worker line, a decision, an escalation that
//! @mentions the owner with the run's recent messages and the answer syntax, a run's end.
//! Pure.
//!
//! Lines executor quotes sit in a code block, so that no reader of the topic (executor
//! included) takes a quoted line for a new message. A mirrored worker line is the one
//! exception: it is posted as the worker said it, under the worker's persona, so that it
//! reads back through the same parser.

use crate::chat::notice::{Notice, Persona, Routing};
use crate::chat::zulip::mention;
use crate::core::outbox::Priority;
use crate::core::record::{Decision, StoredMessage};

/// A worker's line, with the run it belongs to on the line before.
pub fn mirrored(run_id: i64, gid: &str, line: &str) -> String {
    format!("run {run_id} · `{gid}`\n{line}")
}

/// A `[REQUEST:…]` the contract decided.
pub fn decided(run_id: i64, action: &str, decision: &str, rule: &str, why: &str) -> String {
    format!("run {run_id}: `{action}` → **{decision}** (rule `{rule}`: {why})")
}

/// The owner's @mention, or nothing when chat does not know them.
fn owner(routing: &Routing) -> String {
    routing
        .owner
        .as_deref()
        .map(|name| format!("{} ", mention(name)))
        .unwrap_or_default()
}

/// An escalation: the question, the run's recent messages and how to answer.
pub fn escalation(routing: &Routing, escalation: &Decision, window: &[StoredMessage]) -> Notice {
    let id = escalation.id;
    let run = escalation
        .run_id
        .map(|r| format!("run {r}"))
        .unwrap_or_else(|| "a run".into());
    let gid = escalation.task_gid.as_deref().unwrap_or("?");
    let detail = escalation.detail.as_deref().unwrap_or("").replace('`', "'");
    let lines: Vec<String> = window
        .iter()
        .map(|m| format!("{} {}", m.source, m.line.replace("```", "'''")))
        .collect();
    let shown = if lines.is_empty() {
        "(none)".to_string()
    } else {
        lines.join("\n")
    };
    let body = format!(
        "{}escalation **{id}** · {run} of `{gid}` asks: `{}`\n> {detail}\n\nRecent messages ({}):\n```text\n{shown}\n```\nAnswer here: {} (or `executor decide {id} approve|deny --note …`).",
        owner(routing),
        escalation.action,
        window.len(),
        crate::chat::answer::syntax(id),
    );
    Notice {
        priority: Priority::Urgent,
        persona: Persona::Orchestrator,
        task_gid: escalation.task_gid.clone(),
        run_id: escalation.run_id,
        body,
    }
}

/// What the wall refused a run's worker that the run was not refused before: said once,
/// with the `[sandbox] allow` line that would permit it, in a block the owner can paste.
pub fn net_refused(
    run_id: i64,
    gid: &str,
    refused: &[crate::core::net_refusals::NetRefusal],
    configured: &[String],
) -> String {
    use crate::core::net_refusals::{allow_line, NetRefusal, Refused};
    let what: Vec<String> = refused.iter().map(NetRefusal::line).collect();
    let mut body = format!(
        "run {run_id} of `{gid}`: the wall refused the worker's network: {}.",
        what.join(", ").replace('`', "'")
    );
    if let Some(line) = allow_line(configured, refused) {
        body.push_str(&format!(
            " To allow it, set in `[sandbox]` of the config:\n```toml\n{line}\n```"
        ));
    }
    if refused.iter().any(|r| r.kind == Refused::LoopbackForwarded) {
        body.push_str(
            " A forwarded port is reached directly at 127.0.0.1, not through the proxy: \
             the worker's client ignores `NO_PROXY`.",
        );
    }
    body
}

/// A run that gave up.
pub fn abandoned(routing: &Routing, run_id: i64, gid: &str, why: &str) -> String {
    format!(
        "{}run {run_id} of `{gid}` was **abandoned**: {why}. The task is back for your review (`go {gid}` to try again).",
        owner(routing)
    )
}

/// A run that completed.
pub fn completed(run_id: i64, gid: &str, pr_url: Option<&str>) -> String {
    match pr_url {
        Some(url) => format!("run {run_id} of `{gid}` is **complete**: CI green, reviewed, nothing unresolved. {url} is yours to merge."),
        None => format!("run {run_id} of `{gid}` is **complete**."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision() -> Decision {
        Decision {
            id: 17,
            task_gid: Some("T-123".into()),
            run_id: Some(5),
            at: chrono::DateTime::from_timestamp(1_790_000_000, 0).expect("a fixed time"),
            role: "worker".into(),
            action: "merge_pr".into(),
            decision: "escalate".into(),
            rule_id: Some("merge".into()),
            detail: Some("[ESCALATE:merge_pr] pr=7 ready to merge".into()),
            resolved_at: None,
            resolution: None,
            resolution_note: None,
            resolved_by: None,
            applied_at: None,
            tool_use_id: None,
            message_window: None,
            confined: None,
        }
    }

    #[test]
    fn a_refusal_is_said_with_the_allow_line_to_paste() {
        use crate::core::net_refusals::{NetRefusal, Refused};
        let at = chrono::DateTime::from_timestamp(1_790_000_000, 0).expect("a fixed time");
        let row = NetRefusal {
            run_id: 5,
            task_gid: "T-123".into(),
            host: "example.org".into(),
            port: 443,
            kind: Refused::NotAllowed,
            count: 4,
            first_at: at,
            last_at: at,
        };
        assert_eq!(
            net_refused(5, "T-123", &[row], &["pypi.org:443".into()]),
            "run 5 of `T-123`: the wall refused the worker's network: CONNECT example.org:443 (4 times). \
             To allow it, set in `[sandbox]` of the config:\n```toml\nallow = [\"pypi.org:443\", \"example.org:443\"]\n```"
        );
    }

    #[test]
    fn an_escalation_mentions_the_owner_with_the_window_and_the_syntax() {
        let routing = Routing {
            owner: Some("Marek Kowalski".into()),
            ..Routing::default()
        };
        let window = vec![StoredMessage {
            id: 1,
            run_id: 5,
            task_gid: "T-123".into(),
            at: chrono::DateTime::from_timestamp(1_790_000_000, 0).expect("a fixed time"),
            source: "worker".into(),
            tag: "STATUS".into(),
            kind: "pr_open".into(),
            args: "{}".into(),
            text: "PR #7".into(),
            line: "[STATUS:pr_open] PR #7".into(),
        }];
        let notice = escalation(&routing, &decision(), &window);
        assert_eq!(notice.priority, Priority::Urgent);
        assert_eq!(notice.persona, Persona::Orchestrator);
        assert!(notice
            .body
            .starts_with("@**Marek Kowalski** escalation **17**"));
        assert!(notice
            .body
            .contains("```text\nworker [STATUS:pr_open] PR #7\n```"));
        assert!(notice.body.contains("`approve 17`"));
        assert!(notice.body.contains("`deny 17 <reason>`"));
        // The quoted lines are fenced, so no reader takes them for new messages.
        assert_eq!(crate::protocol::messages_in(&notice.body).count(), 0);
    }

    #[test]
    fn without_an_owner_nobody_is_mentioned() {
        let notice = escalation(&Routing::default(), &decision(), &[]);
        assert!(notice.body.starts_with("escalation **17**"));
        assert!(notice.body.contains("(none)"));
    }

    #[test]
    fn a_mirrored_line_reads_back_as_the_worker_wrote_it() {
        let text = mirrored(5, "T-123", "[STATUS:investigation] run=5 Analysing");
        let read: Vec<_> = crate::protocol::messages_in(&text).collect();
        assert_eq!(read.len(), 1);
    }
}

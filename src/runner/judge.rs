//! The model judge: for the escalations the owner marked "ask a model first"
//! (`[policy] ask_model_first`), an agent reads the question and the run's recent messages
//! before the owner is asked. It may turn the escalation into a denial, or leave it to the
//! owner; it can never approve.
//!
//! The judge runs with no tools (Claude: nothing allowed and no hook, so in print mode every
//! tool call is refused) in an empty folder of its own. Its answer is a worker message:
//! `[DONE:deny] reason` denies; anything else, including `[DONE:approve]`, an error, a
//! timeout or silence, leaves the escalation to the owner.
//!
//! What it must never do: record an approval, or let a failed judge block the owner's
//! question (a judge that fails is logged, and the owner decides as usual).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::agents::{Adapter, AgentEvent, Invocation};
use crate::core::record::{Decision, StoredMessage};
use crate::core::watchdog::Limits;
use crate::protocol::{Parsed, Scanner, Tag};
use crate::supervisor::{self, Stream, WorkerEvent, WorkerSpec};

/// The judge's prompt; `question`, `window` and `kinds` are filled in.
const PROMPT: &str = include_str!("../assets/prompts/executor-judge.md");

/// What the judge said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Deny, with the judge's reason (told to the worker as the owner's note would be).
    Deny(String),
    /// Leave the question to the owner; why, for the log.
    LeaveToOwner(String),
}

/// Which escalations the judge looks at first, and how long it may take.
#[derive(Debug, Clone)]
pub struct JudgeSettings {
    /// Action kinds, escalation kinds or rule ids (`merge_pr`, `needs_decision`, `merge`).
    pub ask_first: Vec<String>,
    pub limits: Limits,
    pub grace: std::time::Duration,
}

impl JudgeSettings {
    /// Whether the owner asked for a model's look at `escalation` first.
    pub fn wants(&self, escalation: &Decision) -> bool {
        let kinds = escalation.action.split(',').map(str::trim);
        let rule = escalation.rule_id.as_deref();
        self.ask_first
            .iter()
            .any(|wanted| kinds.clone().any(|k| k == wanted) || rule == Some(wanted.as_str()))
    }
}

#[derive(Serialize)]
struct PromptWindow<'a> {
    at: String,
    from: &'a str,
    line: &'a str,
}

/// The judge's prompt for `escalation`, with the run's recent messages.
pub fn prompt(escalation: &Decision, window: &[StoredMessage]) -> Result<String> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.add_template("executor-judge.md", PROMPT)
        .context("the built-in judge prompt does not parse")?;
    let window: Vec<PromptWindow<'_>> = window
        .iter()
        .map(|m| PromptWindow {
            at: crate::core::time::format_utc(&m.at),
            from: &m.source,
            line: &m.line,
        })
        .collect();
    let rendered = env
        .get_template("executor-judge.md")
        .and_then(|t| {
            t.render(minijinja::context! {
                action => escalation.action,
                detail => escalation.detail.as_deref().unwrap_or(""),
                rule => escalation.rule_id.as_deref().unwrap_or("(the contract's default)"),
                window => window,
            })
        })
        .context("cannot render the judge prompt")?;
    Ok(rendered)
}

/// The verdict in what the judge wrote: its last `[DONE:deny]` or `[DONE:escalate]`.
/// Anything else leaves the question to the owner.
pub fn read_verdict<'a>(texts: impl IntoIterator<Item = &'a str>) -> Verdict {
    let mut verdict = Verdict::LeaveToOwner("the judge gave no verdict".to_string());
    for text in texts {
        let mut scanner = Scanner::new();
        for line in text.lines() {
            let Ok(Some(Parsed::Message(message))) = scanner.line(line) else {
                continue;
            };
            if message.tag != Tag::Done {
                continue;
            }
            let reason = if message.text.is_empty() {
                "no reason given".to_string()
            } else {
                message.text.clone()
            };
            verdict = match message.kind.as_str() {
                "deny" => Verdict::Deny(reason),
                "escalate" => Verdict::LeaveToOwner(reason),
                other => Verdict::LeaveToOwner(format!(
                    "the judge answered `{other}`, which it may not: {reason}"
                )),
            };
        }
    }
    verdict
}

/// Runs the judge with `adapter` in `dir` (made empty for it) and reads its verdict.
pub async fn ask(
    adapter: &Adapter,
    settings: &JudgeSettings,
    env: HashMap<String, String>,
    dir: &Path,
    prompt: String,
    wall: &crate::sandbox::Wall,
    home: String,
) -> Result<Verdict> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let invocation = Invocation {
        append_system_prompt: Some(
            "You judge a request for the owner of a software project. You have no tools. \
             Answer with one line: [DONE:deny] reason, or [DONE:escalate] reason."
                .to_string(),
        ),
        confined: wall.is_confined(),
        ..Invocation::default()
    };
    let spec = WorkerSpec {
        argv: adapter.argv(&invocation),
        cwd: dir.to_path_buf(),
        env,
        stdin: Some(prompt.into_bytes()),
        limits: settings.limits,
        grace: settings.grace,
        max_line: 1024 * 1024,
        os_limits: None,
        kept: false,
        heartbeat: None,
    };
    let place = crate::sandbox::Place {
        worktree: dir.to_path_buf(),
        read_only_worktree: false,
        git_common_dir: None,
        home,
        agent: adapter.family(),
        read_only: Vec::new(),
        read_write: Vec::new(),
        loopback_ports: Vec::new(),
        label: "the model judge".to_string(),
    };
    let enclosed = wall.enclose(spec, &place)?;
    let (spec, _gate) = (enclosed.spec, enclosed.gate);
    let mut texts: Vec<String> = Vec::new();
    let outcome = supervisor::supervise(
        spec,
        |event| match event {
            WorkerEvent::Line {
                stream: Stream::Stdout,
                line,
            } => {
                let events = adapter.parse_line(&line.text());
                for event in &events {
                    if let AgentEvent::AssistantText { text } = event {
                        texts.push(text.clone());
                    }
                }
                events.iter().any(AgentEvent::is_meaningful)
            }
            _ => false,
        },
        None,
    )
    .await
    .context("cannot run the judge")?;
    if let Some(stopped) = outcome.stopped {
        return Ok(Verdict::LeaveToOwner(format!(
            "the judge was stopped ({stopped:?})"
        )));
    }
    Ok(read_verdict(texts.iter().map(String::as_str)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};

    fn fixed_time() -> DateTime<Utc> {
        DateTime::from_timestamp(1_790_000_000, 0).expect("a fixed time")
    }

    fn escalation(action: &str, rule: Option<&str>) -> Decision {
        Decision {
            id: 7,
            task_gid: Some("T-1".into()),
            run_id: Some(3),
            at: fixed_time(),
            role: "worker".into(),
            action: action.into(),
            decision: "escalate".into(),
            rule_id: rule.map(str::to_string),
            detail: Some("gh pr merge 12".into()),
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
    fn only_a_denial_is_taken_and_the_last_verdict_counts() {
        assert_eq!(
            read_verdict(["Thinking.\n[DONE:deny] the PR has no review yet"]),
            Verdict::Deny("the PR has no review yet".into())
        );
        assert!(matches!(
            read_verdict(["[DONE:escalate] the owner should say"]),
            Verdict::LeaveToOwner(_)
        ));
        // It may not approve: an approval leaves the question with the owner.
        match read_verdict(["[DONE:approve] looks fine"]) {
            Verdict::LeaveToOwner(why) => assert!(why.contains("may not"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            read_verdict(["no verdict"]),
            Verdict::LeaveToOwner(_)
        ));
        assert!(matches!(read_verdict([]), Verdict::LeaveToOwner(_)));
        // A verdict inside a code block is an example, not an answer.
        assert!(matches!(
            read_verdict(["```\n[DONE:deny] example\n```"]),
            Verdict::LeaveToOwner(_)
        ));
        assert_eq!(
            read_verdict(["[DONE:escalate] unsure", "[DONE:deny] on reflection, no"]),
            Verdict::Deny("on reflection, no".into())
        );
    }

    #[test]
    fn the_judge_looks_at_what_the_owner_marked() {
        let settings = JudgeSettings {
            ask_first: vec!["merge_pr".into(), "needs_decision".into(), "outside".into()],
            limits: Limits {
                no_output: std::time::Duration::from_secs(60),
                hard: std::time::Duration::from_secs(60),
            },
            grace: std::time::Duration::from_secs(1),
        };
        assert!(settings.wants(&escalation("merge_pr", Some("merge"))));
        assert!(settings.wants(&escalation("run_tests,merge_pr", None)));
        assert!(settings.wants(&escalation("needs_decision", None)));
        assert!(settings.wants(&escalation("tool:Write", Some("outside"))));
        assert!(!settings.wants(&escalation("post_comment", Some("tracker-comment"))));
    }

    #[test]
    fn the_prompt_carries_the_question_and_the_window() {
        let window = vec![StoredMessage {
            id: 1,
            run_id: 3,
            task_gid: "T-1".into(),
            at: fixed_time(),
            source: "worker".into(),
            tag: "STATUS".into(),
            kind: "ready".into(),
            args: "{}".into(),
            text: "ready to merge".into(),
            line: "[STATUS:ready] ready to merge".into(),
        }];
        let text = prompt(&escalation("merge_pr", Some("merge")), &window).expect("renders");
        assert!(text.contains("merge_pr"), "{text}");
        assert!(text.contains("gh pr merge 12"), "{text}");
        assert!(text.contains("[STATUS:ready] ready to merge"), "{text}");
        assert!(text.contains("[DONE:deny]"), "{text}");
    }
}

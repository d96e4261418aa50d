//! Codex: `codex exec --json` and `codex exec resume <thread_id> --json`.
//!
//! What the stream looks like (see `shared/fixtures/agents/README.md`, captured from
//! codex-cli 0.171.0): `thread.started` names the thread (the id to resume), `turn.started`,
//! then `item.started` / `item.updated` / `item.completed` for each item (`agent_message`,
//! `reasoning`, `command_execution`, `file_change`, `mcp_tool_call`, `web_search`,
//! `todo_list`, `error`), and the turn ends with `turn.completed` (with usage) or
//! `turn.failed`; a top-level `error` may come first. There is no result event: the outcome
//! is the last `agent_message` before the turn's end, which [`super::Summary`] keeps.
//! Sandbox and approval policy come from the `config.toml` in `CODEX_HOME`, which the runner
//! writes; nothing here sets them.

use std::path::Path;

use serde_json::{json, Value};

use super::event::{excerpt, AgentEvent, Finished, Usage, OUTPUT_EXCERPT_MAX};
use super::{parse_json_line, Invocation, Session};

/// The program name looked up on `PATH`.
pub const PROGRAM: &str = "codex";

/// The command line of one Codex worker; the prompt goes on stdin (the trailing `-`).
///
/// A new session: `codex exec --json [--model M] -` (Codex chooses the thread id and reports
/// it in `thread.started`; an id in [`Session::New`] is ignored). A resumed one:
/// `codex exec resume <thread_id> --json -` (the thread keeps its model).
pub fn argv(program: &Path, invocation: &Invocation) -> Vec<String> {
    let mut argv = vec![program.to_string_lossy().into_owned(), "exec".to_string()];
    match &invocation.session {
        Session::New { .. } => {
            argv.push("--json".to_string());
            if let Some(model) = &invocation.model {
                argv.extend(["--model".to_string(), model.clone()]);
            }
        }
        Session::Resume { id } => {
            argv.extend(["resume".to_string(), id.clone(), "--json".to_string()]);
        }
    }
    // `codex exec resume` takes no `--sandbox`; a config override works for both. Inside
    // executor's wall Codex's own sandbox (a nested bubblewrap) cannot start, so it is off
    // and the wall holds the worker (read-only worktree included).
    let mode = if invocation.confined {
        Some("danger-full-access")
    } else if invocation.read_only() {
        Some("read-only")
    } else {
        None
    };
    if let Some(mode) = mode {
        argv.splice(2..2, ["-c".to_string(), format!("sandbox_mode=\"{mode}\"")]);
    }
    argv.push("-".to_string());
    argv
}

/// The events one line of `exec --json` output means. Never fails: a line that is not JSON
/// or not understood becomes [`AgentEvent::Other`].
pub fn parse_line(line: &str) -> Vec<AgentEvent> {
    match parse_json_line(line) {
        Ok(value) => vec![parse_value(&value)],
        Err(events) => events,
    }
}

fn parse_value(value: &Value) -> AgentEvent {
    let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "thread.started" => match str_field(value, "thread_id") {
            Some(session_id) => AgentEvent::SessionStarted {
                session_id,
                model: None,
            },
            None => AgentEvent::other(kind),
        },
        "item.started" | "item.completed" => match value.get("item") {
            Some(item) => parse_item(kind, item),
            None => AgentEvent::other(kind),
        },
        "turn.completed" => AgentEvent::Finished(Box::new(Finished {
            is_error: false,
            usage: value.get("usage").and_then(usage),
            ..Finished::default()
        })),
        "turn.failed" => AgentEvent::Finished(Box::new(Finished {
            is_error: true,
            reason: value
                .pointer("/error/message")
                .and_then(Value::as_str)
                .map(readable_error),
            usage: value.get("usage").and_then(usage),
            ..Finished::default()
        })),
        // A stream error Codex retries (`Reconnecting... 2/5`, `waiting for network`) comes
        // as an `error` too: it is waiting, not failing, and no sign of life.
        "error" => AgentEvent::failed_or_retrying(
            str_field(value, "message")
                .map(|message| readable_error(&message))
                .unwrap_or_default(),
        ),
        "" => AgentEvent::other("untyped"),
        // turn.started, item.updated and whatever a later version adds.
        other => AgentEvent::other(other),
    }
}

fn parse_item(event: &str, item: &Value) -> AgentEvent {
    let id = str_field(item, "id").unwrap_or_default();
    let item_type = item.get("type").and_then(Value::as_str).unwrap_or("");
    let completed = event == "item.completed";
    match (item_type, completed) {
        ("agent_message", true) => AgentEvent::AssistantText {
            text: str_field(item, "text").unwrap_or_default(),
        },
        ("reasoning", true) => AgentEvent::Thinking {
            text: str_field(item, "text").unwrap_or_default(),
        },
        ("command_execution", false) => AgentEvent::ToolCall {
            id,
            name: item_type.to_string(),
            input: json!({ "command": item.get("command").cloned().unwrap_or(Value::Null) }),
        },
        ("command_execution", true) => {
            let exit_code = item
                .get("exit_code")
                .and_then(Value::as_i64)
                .and_then(|code| i32::try_from(code).ok());
            AgentEvent::ToolResult {
                id,
                is_error: status(item) != Some("completed") || exit_code.is_some_and(|c| c != 0),
                output_excerpt: excerpt(
                    item.get("aggregated_output")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                    OUTPUT_EXCERPT_MAX,
                ),
                exit_code,
            }
        }
        ("file_change", false) => AgentEvent::ToolCall {
            id,
            name: item_type.to_string(),
            input: json!({ "changes": item.get("changes").cloned().unwrap_or(Value::Null) }),
        },
        ("file_change", true) => AgentEvent::ToolResult {
            id,
            is_error: status(item) == Some("failed"),
            output_excerpt: excerpt(&file_changes(item), OUTPUT_EXCERPT_MAX),
            exit_code: None,
        },
        ("mcp_tool_call", false) => AgentEvent::ToolCall {
            id,
            name: format!(
                "mcp__{}__{}",
                str_field(item, "server").unwrap_or_default(),
                str_field(item, "tool").unwrap_or_default()
            ),
            input: item.get("arguments").cloned().unwrap_or(Value::Null),
        },
        ("mcp_tool_call", true) => {
            let error = item.pointer("/error/message").and_then(Value::as_str);
            let output = match error {
                Some(message) => message.to_string(),
                None => mcp_result_text(item.get("result")),
            };
            AgentEvent::ToolResult {
                id,
                is_error: error.is_some() || status(item) == Some("failed"),
                output_excerpt: excerpt(&output, OUTPUT_EXCERPT_MAX),
                exit_code: None,
            }
        }
        ("web_search", false) => AgentEvent::ToolCall {
            id,
            name: item_type.to_string(),
            input: json!({ "query": item.get("query").cloned().unwrap_or(Value::Null) }),
        },
        ("web_search", true) => AgentEvent::ToolResult {
            id,
            is_error: false,
            output_excerpt: excerpt(
                &str_field(item, "query").unwrap_or_default(),
                OUTPUT_EXCERPT_MAX,
            ),
            exit_code: None,
        },
        // Messages and reasoning in progress, to-do lists, non-fatal error items, new types.
        (other, _) => AgentEvent::other(format!("{event}/{other}")),
    }
}

fn status(item: &Value) -> Option<&str> {
    item.get("status").and_then(Value::as_str)
}

/// `add notes/hello.md`, one change a line.
fn file_changes(item: &Value) -> String {
    item.get("changes")
        .and_then(Value::as_array)
        .map(|changes| {
            changes
                .iter()
                .map(|change| {
                    format!(
                        "{} {}",
                        change.get("kind").and_then(Value::as_str).unwrap_or("?"),
                        change.get("path").and_then(Value::as_str).unwrap_or("?")
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn mcp_result_text(result: Option<&Value>) -> String {
    result
        .and_then(|result| result.get("content"))
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Codex passes the model API's error body through as the message; when it is JSON in the
/// usual `{"error": {"message", "type"}}` shape, say `type: message`.
fn readable_error(message: &str) -> String {
    let Ok(body) = serde_json::from_str::<Value>(message) else {
        return message.to_string();
    };
    let error = body.get("error").unwrap_or(&body);
    let said = match (
        error.get("type").and_then(Value::as_str),
        error.get("message").and_then(Value::as_str),
    ) {
        (Some(kind), Some(text)) => format!("{kind}: {text}"),
        (None, Some(text)) => text.to_string(),
        _ => return message.to_string(),
    };
    // A usage limit's reset is kept: the run waits for it (`core::usage_limit`).
    match (
        error.get("resets_at").and_then(Value::as_i64),
        error.get("resets_in_seconds").and_then(Value::as_i64),
    ) {
        (Some(at), _) => format!("{said} (resets_at: {at})"),
        (None, Some(seconds)) => format!("{said} (resets_in_seconds: {seconds})"),
        (None, None) => said,
    }
}

fn usage(value: &Value) -> Option<Usage> {
    let number = |key: &str| value.get(key).and_then(Value::as_u64).unwrap_or(0);
    value.is_object().then(|| Usage {
        input_tokens: number("input_tokens"),
        output_tokens: number("output_tokens"),
        cache_read_input_tokens: number("cached_input_tokens"),
        cache_creation_input_tokens: number("cache_write_input_tokens"),
        reasoning_output_tokens: number("reasoning_output_tokens"),
    })
}

fn str_field(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::event::Summary;
    use std::path::PathBuf;

    use crate::agents::fixture;

    fn parse_all(name: &str) -> Vec<AgentEvent> {
        fixture(name).lines().flat_map(parse_line).collect()
    }

    fn summary(events: &[AgentEvent]) -> Summary {
        let mut summary = Summary::default();
        events.iter().for_each(|event| summary.observe(event));
        summary
    }

    const FIXTURES: [&str; 4] = [
        "codex_exec.jsonl",
        "codex_exec_resume.jsonl",
        "codex_more_exec.jsonl",
        "codex_api_error.jsonl",
    ];

    #[test]
    fn every_fixture_line_is_one_event_and_none_is_garbage() {
        for name in FIXTURES {
            for (n, line) in fixture(name).lines().enumerate() {
                let events = parse_line(line);
                assert_eq!(events.len(), 1, "{name} line {}", n + 1);
                assert_ne!(
                    events[0],
                    AgentEvent::other("not_json"),
                    "{name} line {}",
                    n + 1
                );
                serde_json::to_string(&events[0]).unwrap();
            }
        }
    }

    #[test]
    fn an_exec_run_reads_thread_command_done_and_usage() {
        let events = parse_all("codex_exec.jsonl");
        assert_eq!(
            events[0],
            AgentEvent::SessionStarted {
                session_id: "01a2262d-4850-7ef0-8614-6d93bbe15eda".into(),
                model: None
            }
        );
        assert_eq!(events[1], AgentEvent::other("turn.started"));
        assert_eq!(
            events[2],
            AgentEvent::ToolCall {
                id: "item_0".into(),
                name: "command_execution".into(),
                input: json!({"command": "/bin/bash -lc 'echo hi > out.txt'"}),
            }
        );
        assert_eq!(
            events[3],
            AgentEvent::ToolResult {
                id: "item_0".into(),
                is_error: false,
                output_excerpt: String::new(),
                exit_code: Some(0),
            }
        );
        assert_eq!(
            events[4].protocol_lines(),
            vec!["[DONE:pr_ready] summary=wrote out.txt"]
        );
        let AgentEvent::Finished(done) = &events[5] else {
            panic!("{:?}", events[5])
        };
        assert!(!done.is_error);
        assert_eq!(
            done.usage,
            Some(Usage {
                input_tokens: 200,
                output_tokens: 40,
                ..Usage::default()
            })
        );
        assert_eq!(events.len(), 6);
        // No result event: the outcome is the last agent message before turn.completed.
        let summary = summary(&events);
        assert!(summary.succeeded());
        assert_eq!(
            summary.session_id.as_deref(),
            Some("01a2262d-4850-7ef0-8614-6d93bbe15eda")
        );
        assert_eq!(
            summary.final_text(),
            Some("Wrote out.txt.\n[DONE:pr_ready] summary=wrote out.txt")
        );
    }

    #[test]
    fn a_resumed_thread_keeps_its_id_and_reports_its_usage() {
        let events = parse_all("codex_exec_resume.jsonl");
        let summary = summary(&events);
        assert_eq!(
            summary.session_id.as_deref(),
            Some("01a2262d-4850-7ef0-8614-6d93bbe15eda")
        );
        let done = summary.finished.as_ref().unwrap();
        assert_eq!(done.usage.unwrap().input_tokens, 300);
        assert_eq!(done.usage.unwrap().output_tokens, 60);
        assert_eq!(
            done.result.as_deref(),
            Some("Scenario exhausted.\n[DONE:pr_ready] summary=scenario exhausted")
        );
    }

    #[test]
    fn a_file_change_and_a_failed_command_are_tool_results() {
        let events = parse_all("codex_more_exec.jsonl");
        assert!(events.contains(&AgentEvent::ToolCall {
            id: "item_1".into(),
            name: "file_change".into(),
            input: json!({"changes": [{"path": "/home/dev/runs/codex_more/repo/notes/hello.md", "kind": "add"}]}),
        }));
        assert!(events.contains(&AgentEvent::ToolResult {
            id: "item_1".into(),
            is_error: false,
            output_excerpt: "add /home/dev/runs/codex_more/repo/notes/hello.md".into(),
            exit_code: None,
        }));
        assert!(events.contains(&AgentEvent::ToolResult {
            id: "item_2".into(),
            is_error: true,
            output_excerpt: String::new(),
            exit_code: Some(3),
        }));
        let summary = summary(&events);
        assert_eq!(summary.tool_calls, 2);
        assert_eq!(summary.failed_tool_results, 1);
        assert!(summary.succeeded());
        assert_eq!(
            summary.final_text(),
            Some("[DONE:pr_ready] summary=patched notes/hello.md")
        );
        assert_eq!(summary.finished.unwrap().usage.unwrap().input_tokens, 400);
    }

    #[test]
    fn an_api_error_is_a_failure_then_a_failed_turn() {
        let events = parse_all("codex_api_error.jsonl");
        let message = "invalid_request_error: fake: scripted invalid request";
        assert_eq!(
            events[4],
            AgentEvent::Failed {
                message: message.into()
            }
        );
        let AgentEvent::Finished(done) = &events[5] else {
            panic!("{:?}", events[5])
        };
        assert!(done.is_error);
        assert_eq!(done.reason.as_deref(), Some(message));
        let summary = summary(&events);
        assert!(!summary.succeeded());
        assert_eq!(summary.failures, vec![message.to_string()]);
    }

    /// A transcript captured from codex-cli 0.171.0, in `tests/fixtures/codex/` (see its
    /// README).
    fn own_fixture(name: &str) -> String {
        let path = format!("{}/tests/fixtures/codex/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
    }

    #[test]
    fn a_codex_with_no_route_only_reports_retrying_and_nothing_is_a_sign_of_life() {
        let text = own_fixture("codex_no_route.jsonl");
        let events: Vec<AgentEvent> = text.lines().flat_map(parse_line).collect();
        assert_eq!(events.len(), 12);
        assert!(
            events.iter().all(|e| !e.is_meaningful()),
            "the watchdog must see no work: {events:?}"
        );
        let retrying: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Retrying { message } => Some(message.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(retrying.len(), 9, "{events:?}");
        assert!(retrying[0].starts_with("Reconnecting... 2/5 (stream disconnected"));
        assert_eq!(
            retrying[8],
            "Reconnecting... waiting for network (Connection failed: error sending request)"
        );
        // The fallback notice is an error item, kept as other.
        assert!(events.contains(&AgentEvent::other("item.completed/error")));
        // A retry's words are kept with the errors, where a limit would be read.
        assert_eq!(summary(&events).failures.len(), 9);
    }

    #[test]
    fn an_error_that_is_no_retry_is_still_a_failure() {
        let line =
            r#"{"type":"error","message":"stream error: unexpected status 401 Unauthorized"}"#;
        assert_eq!(
            parse_line(line),
            vec![AgentEvent::Failed {
                message: "stream error: unexpected status 401 Unauthorized".into()
            }]
        );
        let old = r#"{"type":"error","message":"stream error: error sending request for url (https://api.openai.com/v1/responses); retrying 1/5 in 203ms…"}"#;
        assert!(matches!(&parse_line(old)[0], AgentEvent::Retrying { .. }));
    }

    #[test]
    fn unknown_events_and_items_are_kept_as_other() {
        let cases = [
            (r#"{"type":"turn.paused","why":"new"}"#, "turn.paused"),
            (
                r#"{"type":"item.updated","item":{"id":"item_0","type":"todo_list","items":[]}}"#,
                "item.updated",
            ),
            (
                r#"{"type":"item.completed","item":{"id":"item_5","type":"hologram"}}"#,
                "item.completed/hologram",
            ),
            (
                r#"{"type":"item.started","item":{"id":"item_6","type":"agent_message","text":""}}"#,
                "item.started/agent_message",
            ),
            (r#"{"type":"item.completed"}"#, "item.completed"),
            (r#"{"thread_id":"x"}"#, "untyped"),
        ];
        for (line, kind) in cases {
            let events = parse_line(line);
            assert_eq!(events, vec![AgentEvent::other(kind)], "{line}");
            assert!(!events[0].is_meaningful());
        }
        assert_eq!(
            parse_line("Reading prompt from stdin..."),
            vec![AgentEvent::other("not_json")]
        );
        assert_eq!(parse_line(""), vec![]);
    }

    #[test]
    fn mcp_calls_reasoning_and_web_searches_are_read() {
        let call = r#"{"type":"item.started","item":{"id":"item_0","type":"mcp_tool_call","server":"fs","tool":"read_file","arguments":{"path":"a"},"result":null,"error":null,"status":"in_progress"}}"#;
        assert_eq!(
            parse_line(call),
            vec![AgentEvent::ToolCall {
                id: "item_0".into(),
                name: "mcp__fs__read_file".into(),
                input: json!({"path": "a"}),
            }]
        );
        let failed = r#"{"type":"item.completed","item":{"id":"item_0","type":"mcp_tool_call","server":"fs","tool":"read_file","arguments":{},"result":null,"error":{"message":"File not found"},"status":"failed"}}"#;
        assert!(matches!(
            &parse_line(failed)[0],
            AgentEvent::ToolResult { is_error: true, output_excerpt, .. } if output_excerpt == "File not found"
        ));
        let ok = r#"{"type":"item.completed","item":{"id":"item_0","type":"mcp_tool_call","result":{"content":[{"type":"text","text":"hello"}]},"error":null,"status":"completed"}}"#;
        assert!(matches!(
            &parse_line(ok)[0],
            AgentEvent::ToolResult { is_error: false, output_excerpt, .. } if output_excerpt == "hello"
        ));
        let reasoning = r#"{"type":"item.completed","item":{"id":"item_1","type":"reasoning","text":"**Planning**"}}"#;
        assert_eq!(
            parse_line(reasoning),
            vec![AgentEvent::Thinking {
                text: "**Planning**".into()
            }]
        );
        let search =
            r#"{"type":"item.started","item":{"id":"item_2","type":"web_search","query":"rust"}}"#;
        assert!(parse_line(search)[0].is_meaningful());
    }

    #[test]
    fn argv_starts_or_resumes_a_thread_with_the_prompt_on_stdin() {
        let program = PathBuf::from("/usr/bin/codex");
        let new = Invocation {
            session: Session::New {
                id: Some("ignored".into()),
            },
            model: Some("gpt-5.5".into()),
            allowed_tools: vec!["Bash".into()],
            ..Invocation::default()
        };
        assert_eq!(
            argv(&program, &new),
            [
                "/usr/bin/codex",
                "exec",
                "--json",
                "--model",
                "gpt-5.5",
                "-"
            ]
        );
        let resume = Invocation {
            session: Session::Resume {
                id: "01a2262d-4850-7ef0-8614-6d93bbe15eda".into(),
            },
            ..Invocation::default()
        };
        assert_eq!(
            argv(&program, &resume),
            [
                "/usr/bin/codex",
                "exec",
                "resume",
                "01a2262d-4850-7ef0-8614-6d93bbe15eda",
                "--json",
                "-"
            ]
        );
    }

    #[test]
    fn a_plain_error_message_is_kept_as_it_is() {
        assert_eq!(readable_error("stream disconnected"), "stream disconnected");
        assert_eq!(readable_error(r#"{"message":"m"}"#), "m");
        assert_eq!(readable_error("[1]"), "[1]");
    }

    #[test]
    fn a_usage_limit_error_keeps_its_reset() {
        let line = r#"{"type":"error","message":"{\"type\":\"error\",\"error\":{\"type\":\"usage_limit_reached\",\"message\":\"The usage limit has been reached\",\"plan_type\":\"plus\",\"resets_at\":1777936568,\"resets_in_seconds\":13872},\"status_code\":429}"}"#;
        assert_eq!(
            parse_line(line),
            vec![AgentEvent::Failed {
                message:
                    "usage_limit_reached: The usage limit has been reached (resets_at: 1777936568)"
                        .into()
            }]
        );
    }
}

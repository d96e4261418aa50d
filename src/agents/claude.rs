//! Claude Code in print mode: `claude -p --output-format stream-json --verbose`.
//!
//! What the stream looks like (see `shared/fixtures/agents/README.md`, captured from Claude
//! Code 2.1.332):
//! - `system/init` names the session; on `--resume` other events (`command_lifecycle`,
//!   `attachment`, a `user` tool result) come BEFORE it, so nothing here assumes an order.
//! - One `assistant` event per content block (text, tool_use, thinking); several may share a
//!   `message.id`. A model API error arrives as a synthetic assistant message flagged
//!   `is_api_error_message`.
//! - `user` events carry tool results; a hook's `deny` shows as an error tool result.
//! - `system/permission_denied` when print mode refuses a tool call nothing pre-approved.
//! - Exactly one `result` per process, which is the verdict: judged by `is_error` (a
//!   `success` subtype can still be an error), with the session id, turns, cost, usage,
//!   permission denials, and on a hook's `defer` the parked `deferred_tool_use`.
//! - Unknown types and subtypes appear in every version: they become
//!   [`AgentEvent::Other`].

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::event::{excerpt, AgentEvent, Finished, ToolUse, Usage, OUTPUT_EXCERPT_MAX};
use super::{parse_json_line, Invocation, Session};

/// The program name looked up on `PATH`.
pub const PROGRAM: &str = "claude";

/// Settings every Claude worker runs with: no telemetry, no self-update (the version is
/// pinned), no traffic beyond the model API. None of them is a secret.
pub const FIXED_ENV: [(&str, &str); 4] = [
    ("DISABLE_TELEMETRY", "1"),
    ("DISABLE_AUTOUPDATER", "1"),
    ("DISABLE_ERROR_REPORTING", "1"),
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
];

/// The command line of one Claude worker. The prompt goes on stdin (none on a resume that
/// only continues after a deferred tool call).
///
/// `claude -p --output-format stream-json --verbose`, then `--session-id <uuid>` for a new
/// session whose id executor chose (it must be a UUID) or `--resume <id>`, `--settings
/// <file>` (the hook settings, see [`hook_settings`]), `--model`, `--max-turns`,
/// `--allowedTools <tool>…` (one argument per tool, so `Bash(git diff:*)` stays whole) and
/// `--append-system-prompt <text>` (the worker message format).
pub fn argv(program: &Path, invocation: &Invocation) -> Vec<String> {
    let mut argv = vec![
        program.to_string_lossy().into_owned(),
        "-p".to_string(),
        "--output-format".to_string(),
        "stream-json".to_string(),
        "--verbose".to_string(),
    ];
    match &invocation.session {
        Session::New { id: Some(id) } => argv.extend(["--session-id".to_string(), id.clone()]),
        Session::New { id: None } => {}
        Session::Resume { id } => argv.extend(["--resume".to_string(), id.clone()]),
    }
    if let Some(settings) = &invocation.settings {
        argv.extend([
            "--settings".to_string(),
            settings.to_string_lossy().into_owned(),
        ]);
    }
    if let Some(model) = &invocation.model {
        argv.extend(["--model".to_string(), model.clone()]);
    }
    if let Some(max_turns) = invocation.max_turns {
        argv.extend(["--max-turns".to_string(), max_turns.to_string()]);
    }
    if let Some(tools) = &invocation.tools {
        argv.extend(["--tools".to_string(), tools.join(",")]);
    }
    if !invocation.allowed_tools.is_empty() {
        argv.push("--allowedTools".to_string());
        argv.extend(invocation.allowed_tools.iter().cloned());
    }
    if let Some(prompt) = &invocation.append_system_prompt {
        argv.extend(["--append-system-prompt".to_string(), prompt.clone()]);
    }
    argv
}

/// The arguments that make a call answer-only: no tools at all (`--tools ""`; Claude's own
/// `StructuredOutput` tool stays), and with `schema`, a final answer matching that JSON Schema
/// (`--json-schema`), which the `result` event carries as `structured_output`
/// ([`Finished::structured_output`]). Claude Code asks the model once more when it answers
/// without it, then ends without one: the caller still reads the text.
pub fn answer_only_args(schema: Option<&Value>) -> Vec<String> {
    let mut args = vec!["--tools".to_string(), String::new()];
    if let Some(schema) = schema {
        args.extend(["--json-schema".to_string(), schema.to_string()]);
    }
    args
}

pub use crate::sandbox::THIN_HOOK;

/// The shell command Claude runs as its PreToolUse hook: `<executor> hook claude --config
/// <file> --run <id>`, paths quoted for `sh` (with `executor`'s file named [`THIN_HOOK`]:
/// that program and the same options). The run and config are in the command, not in the
/// worker's environment, so nothing the worker does can point the hook elsewhere.
pub fn hook_command(
    executor: &Path,
    config: &Path,
    run_id: i64,
    worktree: &Path,
    branch: Option<&str>,
    contract: Option<&Path>,
    relay: Option<&RelayAddress>,
) -> String {
    let subcommand = if executor.file_name().is_some_and(|n| n == THIN_HOOK) {
        ""
    } else {
        " hook claude"
    };
    let mut command = format!(
        "{}{subcommand} --config {} --run {run_id} --worktree {}",
        shell_quote(&executor.to_string_lossy()),
        shell_quote(&config.to_string_lossy()),
        shell_quote(&worktree.to_string_lossy())
    );
    if let Some(branch) = branch {
        command.push_str(" --branch ");
        command.push_str(&shell_quote(branch));
    }
    if let Some(contract) = contract {
        command.push_str(" --contract ");
        command.push_str(&shell_quote(&contract.to_string_lossy()));
    }
    if let Some(relay) = relay {
        command.push_str(" --relay ");
        command.push_str(&shell_quote(&relay.to_arg()));
    }
    command
}

/// Where a walled hook asks the orchestrator: a socket of the worker's own folder (inside
/// bubblewrap), or a loopback TCP port (where the seal alone walls the worker, which may
/// open no socket named in the file system). On the hook's command line: the socket's
/// absolute path, or `tcp:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayAddress {
    Socket(PathBuf),
    Loopback(u16),
}

impl RelayAddress {
    pub fn to_arg(&self) -> String {
        match self {
            RelayAddress::Socket(path) => path.to_string_lossy().into_owned(),
            RelayAddress::Loopback(port) => format!("tcp:{port}"),
        }
    }

    /// Reads `--relay`: an absolute socket path or `tcp:PORT` (on 127.0.0.1).
    pub fn parse(text: &str) -> Result<Self, String> {
        if let Some(port) = text.strip_prefix("tcp:") {
            return port
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .map(RelayAddress::Loopback)
                .ok_or_else(|| format!("`{port}` is not a TCP port"));
        }
        if text.starts_with('/') {
            return Ok(RelayAddress::Socket(PathBuf::from(text)));
        }
        Err(format!(
            "`{text}` is neither a socket's absolute path nor tcp:PORT"
        ))
    }
}

/// The settings file passed with `--settings`: every tool call goes through `hook_command`
/// (see [`hook_command`]) before it runs, so the policy engine decides it.
pub fn hook_settings(hook_command: &str) -> Value {
    json!({
        "hooks": {
            "PreToolUse": [{
                "matcher": "*",
                "hooks": [{ "type": "command", "command": hook_command }]
            }]
        }
    })
}

fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%,=".contains(&b));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// The events one line of `stream-json` output means. Never fails: a line that is not JSON
/// or not understood becomes [`AgentEvent::Other`].
pub fn parse_line(line: &str) -> Vec<AgentEvent> {
    match parse_json_line(line) {
        Ok(value) => parse_value(&value),
        Err(events) => events,
    }
}

fn parse_value(value: &Value) -> Vec<AgentEvent> {
    let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "system" => vec![system(value)],
        "assistant" => assistant(value),
        "user" => user(value),
        "result" => vec![AgentEvent::Finished(Box::new(result(value)))],
        "rate_limit_event" => vec![rate_limit(value)],
        "" => vec![AgentEvent::other("untyped")],
        other => vec![AgentEvent::other(other)],
    }
}

/// Claude's account of its plan limits, sent as it goes: only a `rejected` one refused it
/// (`allowed` and `allowed_warning` are news, the work goes on).
fn rate_limit(value: &Value) -> AgentEvent {
    let info = value.get("rate_limit_info").unwrap_or(value);
    if info.get("status").and_then(Value::as_str) != Some("rejected") {
        return AgentEvent::other("rate_limit_event");
    }
    AgentEvent::LimitReached {
        resets_at: info.get("resetsAt").and_then(Value::as_i64),
        kind: str_field(info, "rateLimitType"),
    }
}

fn system(value: &Value) -> AgentEvent {
    let subtype = str_field(value, "subtype").unwrap_or_default();
    match subtype.as_str() {
        "init" => match str_field(value, "session_id") {
            Some(session_id) => AgentEvent::SessionStarted {
                session_id,
                model: str_field(value, "model"),
            },
            None => AgentEvent::other("system/init"),
        },
        // The shape is not in the captured fixtures; read leniently.
        "permission_denied" => AgentEvent::PermissionDenied {
            tool: str_field(value, "tool_name")
                .or_else(|| str_field(value, "tool"))
                .unwrap_or_default(),
            tool_use_id: str_field(value, "tool_use_id"),
            reason: str_field(value, "reason")
                .or_else(|| str_field(value, "message"))
                .or_else(|| str_field(value, "content")),
        },
        // Claude Code retrying a request its model API failed (a connection error, 429,
        // 5xx): it waits, and that is no work.
        "api_retry" => AgentEvent::Retrying {
            message: api_retry(value),
        },
        other => AgentEvent::other(format!("system/{other}")),
    }
}

/// `retrying the model API (attempt 2/10): connection_error, status 529`, from a
/// `system/api_retry` event's fields, each where present.
fn api_retry(value: &Value) -> String {
    let number = |key: &str| value.get(key).and_then(Value::as_u64);
    let mut text = "retrying the model API".to_string();
    match (number("attempt"), number("max_retries")) {
        (Some(attempt), Some(max)) => text.push_str(&format!(" (attempt {attempt}/{max})")),
        (Some(attempt), None) => text.push_str(&format!(" (attempt {attempt})")),
        _ => {}
    }
    let mut why = Vec::new();
    why.extend(str_field(value, "error"));
    why.extend(number("error_status").map(|status| format!("status {status}")));
    if !why.is_empty() {
        text.push_str(&format!(": {}", why.join(", ")));
    }
    text
}

fn assistant(value: &Value) -> Vec<AgentEvent> {
    let blocks = match value.pointer("/message/content") {
        Some(Value::Array(blocks)) => blocks.as_slice(),
        Some(Value::String(text)) => {
            return vec![AgentEvent::AssistantText { text: text.clone() }];
        }
        _ => return vec![AgentEvent::other("assistant")],
    };
    // A model API error is reported as a synthetic assistant message: its text is Claude
    // Code's, not the model's, so it must not be read as the worker speaking.
    let api_error = value.get("is_api_error_message").and_then(Value::as_bool) == Some(true)
        || value.get("error").is_some_and(Value::is_string);
    if api_error {
        let message = blocks
            .iter()
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        return vec![AgentEvent::Failed { message }];
    }
    if blocks.is_empty() {
        return vec![AgentEvent::other("assistant")];
    }
    blocks.iter().map(assistant_block).collect()
}

fn assistant_block(block: &Value) -> AgentEvent {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" => AgentEvent::AssistantText {
            text: str_field(block, "text").unwrap_or_default(),
        },
        "thinking" => AgentEvent::Thinking {
            text: str_field(block, "thinking").unwrap_or_default(),
        },
        "tool_use" | "server_tool_use" | "mcp_tool_use" => AgentEvent::ToolCall {
            id: str_field(block, "id").unwrap_or_default(),
            name: str_field(block, "name").unwrap_or_default(),
            input: block.get("input").cloned().unwrap_or(Value::Null),
        },
        other => AgentEvent::other(format!("assistant/{other}")),
    }
}

fn user(value: &Value) -> Vec<AgentEvent> {
    let Some(Value::Array(blocks)) = value.pointer("/message/content") else {
        return vec![AgentEvent::other("user")];
    };
    if blocks.is_empty() {
        return vec![AgentEvent::other("user")];
    }
    blocks
        .iter()
        .map(|block| match block.get("type").and_then(Value::as_str) {
            Some("tool_result") => AgentEvent::ToolResult {
                id: str_field(block, "tool_use_id").unwrap_or_default(),
                is_error: block.get("is_error").and_then(Value::as_bool) == Some(true),
                output_excerpt: excerpt(
                    &tool_result_text(block.get("content")),
                    OUTPUT_EXCERPT_MAX,
                ),
                exit_code: None,
            },
            Some(other) => AgentEvent::other(format!("user/{other}")),
            None => AgentEvent::other("user"),
        })
        .collect()
}

/// A tool result's content: a string, or blocks whose text parts are joined.
fn tool_result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn result(value: &Value) -> Finished {
    let subtype = str_field(value, "subtype");
    let error_subtype = subtype
        .as_deref()
        .filter(|subtype| subtype.starts_with("error"));
    // `is_error` is the verdict; an `error_*` subtype is never a success either, whatever
    // `is_error` says. Without `is_error`, only a `success` subtype is a success.
    let is_error = match value.get("is_error").and_then(Value::as_bool) {
        Some(is_error) => is_error || error_subtype.is_some(),
        None => subtype.as_deref() != Some("success"),
    };
    Finished {
        is_error,
        reason: str_field(value, "terminal_reason").or_else(|| error_subtype.map(str::to_string)),
        subtype: subtype.clone(),
        stop_reason: str_field(value, "stop_reason"),
        session_id: str_field(value, "session_id"),
        num_turns: value
            .get("num_turns")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok()),
        total_cost_usd: value.get("total_cost_usd").and_then(Value::as_f64),
        duration_ms: value.get("duration_ms").and_then(Value::as_u64),
        usage: value.get("usage").and_then(usage),
        result: str_field(value, "result"),
        permission_denials: value
            .get("permission_denials")
            .and_then(Value::as_array)
            .map(|denials| {
                denials
                    .iter()
                    .map(|denial| ToolUse {
                        id: str_field(denial, "tool_use_id").unwrap_or_default(),
                        name: str_field(denial, "tool_name").unwrap_or_default(),
                        input: denial.get("tool_input").cloned().unwrap_or(Value::Null),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        deferred_tool: value
            .get("deferred_tool_use")
            .filter(|tool| tool.is_object())
            .map(|tool| ToolUse {
                id: str_field(tool, "id").unwrap_or_default(),
                name: str_field(tool, "name").unwrap_or_default(),
                input: tool.get("input").cloned().unwrap_or(Value::Null),
            }),
        api_error_status: value
            .get("api_error_status")
            .and_then(Value::as_u64)
            .and_then(|status| u16::try_from(status).ok()),
        errors: value
            .get("errors")
            .and_then(Value::as_array)
            .map(|errors| {
                errors
                    .iter()
                    .map(|error| match error {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        structured_output: value
            .get("structured_output")
            .filter(|output| !output.is_null())
            .cloned(),
    }
}

fn usage(value: &Value) -> Option<Usage> {
    value.is_object().then(|| Usage {
        input_tokens: u64_at(value, "/input_tokens"),
        output_tokens: u64_at(value, "/output_tokens"),
        cache_read_input_tokens: u64_at(value, "/cache_read_input_tokens"),
        cache_creation_input_tokens: u64_at(value, "/cache_creation_input_tokens"),
        reasoning_output_tokens: u64_at(value, "/output_tokens_details/thinking_tokens"),
    })
}

fn str_field(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

fn u64_at(value: &Value, pointer: &str) -> u64 {
    value.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::event::Summary;

    use crate::agents::fixture;

    fn parse_all(text: &str) -> Vec<AgentEvent> {
        text.lines().flat_map(parse_line).collect()
    }

    /// The events that matter for the tests: Other (and thinking) left out.
    fn key_events(name: &str) -> Vec<AgentEvent> {
        parse_all(&fixture(name))
            .into_iter()
            .filter(|event| !matches!(event, AgentEvent::Other { .. }))
            .collect()
    }

    fn finished(events: &[AgentEvent]) -> &Finished {
        let mut finals = events.iter().filter_map(|event| match event {
            AgentEvent::Finished(finished) => Some(&**finished),
            _ => None,
        });
        let first = finals.next().expect("a Finished event");
        assert!(finals.next().is_none(), "exactly one Finished event");
        first
    }

    const FIXTURES: [&str; 5] = [
        "claude_stream.jsonl",
        "claude_hooks_stream.jsonl",
        "claude_defer_stream.jsonl",
        "claude_defer_resume_stream.jsonl",
        "claude_api_error_stream.jsonl",
    ];

    #[test]
    fn every_fixture_line_parses_to_at_least_one_event_and_serialises() {
        for name in FIXTURES {
            for (n, line) in fixture(name).lines().enumerate() {
                let events = parse_line(line);
                assert!(!events.is_empty(), "{name} line {}: no event", n + 1);
                for event in events {
                    assert!(
                        !matches!(&event, AgentEvent::Other { kind } if kind == "not_json"),
                        "{name} line {}",
                        n + 1
                    );
                    serde_json::to_string(&event).unwrap();
                }
            }
        }
    }

    #[test]
    fn a_plain_run_reads_session_text_tool_call_result_and_done() {
        let events = key_events("claude_stream.jsonl");
        let session = "e7a20cf3-356f-457c-a24a-f92b77635de2";
        assert_eq!(
            events[0],
            AgentEvent::SessionStarted {
                session_id: session.into(),
                model: Some("claude-opus-5-5".into())
            }
        );
        assert_eq!(
            events[1],
            AgentEvent::AssistantText {
                text: "I'll write the file.".into()
            }
        );
        assert_eq!(
            events[2],
            AgentEvent::ToolCall {
                id: "toolu_53080d87753a4f279b6b4cc7".into(),
                name: "Bash".into(),
                input: json!({"command": "echo hello > out.txt", "description": "Write hello to out.txt"}),
            }
        );
        assert_eq!(
            events[3],
            AgentEvent::ToolResult {
                id: "toolu_53080d87753a4f279b6b4cc7".into(),
                is_error: false,
                output_excerpt: "(Bash completed with no output)".into(),
                exit_code: None,
            }
        );
        assert_eq!(
            events[4].protocol_lines(),
            vec!["[DONE:pr_ready] summary=wrote out.txt"]
        );
        let done = finished(&events);
        assert!(!done.is_error);
        assert!(!done.is_deferred());
        assert_eq!(done.session_id.as_deref(), Some(session));
        assert_eq!(done.num_turns, Some(2));
        assert_eq!(done.total_cost_usd, Some(0.0016));
        assert_eq!(done.reason.as_deref(), Some("completed"));
        assert_eq!(done.subtype.as_deref(), Some("success"));
        assert_eq!(done.stop_reason.as_deref(), Some("end_turn"));
        assert_eq!(done.duration_ms, Some(158));
        assert_eq!(
            done.usage,
            Some(Usage {
                input_tokens: 200,
                output_tokens: 40,
                ..Usage::default()
            })
        );
        assert!(done.result.as_deref().unwrap().contains("[DONE:pr_ready]"));
        assert_eq!(events.len(), 6);
        // Everything but the session start resets the no-output watchdog.
        let meaningful: Vec<bool> = events.iter().map(AgentEvent::is_meaningful).collect();
        assert_eq!(meaningful, [false, true, true, true, true, true]);
    }

    #[test]
    fn a_hook_deny_is_an_error_tool_result_and_a_listed_denial() {
        let events = key_events("claude_hooks_stream.jsonl");
        let denied = "toolu_a12361d8164343ada3ac759f";
        assert!(events.iter().any(|event| matches!(
            event,
            AgentEvent::ToolResult { id, is_error: true, output_excerpt, .. }
                if id == denied && output_excerpt.contains("destructive command blocked")
        )));
        assert!(events.iter().any(|event| matches!(
            event,
            AgentEvent::ToolResult { id, is_error: false, .. } if id == "toolu_c2fc0774b15a45028cb0e9cf"
        )));
        let done = finished(&events);
        assert!(!done.is_error);
        assert_eq!(done.num_turns, Some(3));
        // The stream says 0.0024000000000000002; serde_json reads floats to within an ulp or so.
        assert!((done.total_cost_usd.unwrap() - 0.0024).abs() < 1e-12);
        assert_eq!(done.permission_denials.len(), 1);
        assert_eq!(done.permission_denials[0].id, denied);
        assert_eq!(done.permission_denials[0].name, "Bash");
        assert_eq!(
            done.permission_denials[0].input["command"],
            "rm -rf victim && echo removed"
        );
    }

    #[test]
    fn a_deferred_tool_call_ends_the_process_cleanly_with_the_parked_call() {
        let events = key_events("claude_defer_stream.jsonl");
        assert!(!events
            .iter()
            .any(|e| matches!(e, AgentEvent::ToolResult { .. })));
        let done = finished(&events);
        assert!(!done.is_error);
        assert!(done.is_deferred());
        assert_eq!(done.stop_reason.as_deref(), Some("tool_deferred"));
        let tool = done.deferred_tool.as_ref().unwrap();
        assert_eq!(tool.id, "toolu_40ee50ff790444888c85fc14");
        assert_eq!(tool.name, "Bash");
        assert_eq!(
            tool.input["command"],
            "echo approved > deferred.txt  # DEFER_ME"
        );
        let mut summary = Summary::default();
        events.iter().for_each(|e| summary.observe(e));
        assert_eq!(summary.final_text(), Some("Need approval for this one."));
    }

    #[test]
    fn a_resumed_stream_has_events_before_its_init() {
        let events = parse_all(&fixture("claude_defer_resume_stream.jsonl"));
        let session = "d0a4664a-f9e4-41a3-a04c-39186ced245b";
        assert_eq!(events[0], AgentEvent::other("command_lifecycle"));
        assert_eq!(events[1], AgentEvent::other("attachment"));
        assert!(matches!(
            &events[2],
            AgentEvent::ToolResult { id, is_error: false, .. } if id == "toolu_40ee50ff790444888c85fc14"
        ));
        assert!(
            matches!(&events[3], AgentEvent::SessionStarted { session_id, .. } if session_id == session)
        );
        assert_eq!(
            events[4].protocol_lines(),
            vec!["[DONE:pr_ready] summary=wrote deferred.txt after approval"]
        );
        let done = finished(&events);
        assert!(!done.is_error && !done.is_deferred());
        assert_eq!(done.num_turns, Some(1));
        assert_eq!(events.last(), Some(&AgentEvent::other("command_lifecycle")));
    }

    #[test]
    fn an_api_error_is_a_failure_and_an_error_result_despite_its_success_subtype() {
        let events = key_events("claude_api_error_stream.jsonl");
        assert!(events.iter().any(|event| matches!(
            event,
            AgentEvent::Failed { message } if message == "API Error: 400 fake: scripted invalid request"
        )));
        // The synthetic error message is not read as the model's text.
        assert!(!events.iter().any(
            |e| matches!(e, AgentEvent::AssistantText { text } if text.contains("API Error"))
        ));
        let done = finished(&events);
        assert!(done.is_error);
        assert_eq!(done.subtype.as_deref(), Some("success"));
        assert_eq!(done.reason.as_deref(), Some("api_error"));
        assert_eq!(done.api_error_status, Some(400));
        assert_eq!(done.num_turns, Some(2));
        let mut summary = Summary::default();
        events.iter().for_each(|e| summary.observe(e));
        assert!(!summary.succeeded());
        assert_eq!(
            summary.session_id.as_deref(),
            Some("dc69b050-ab05-4d48-a44b-59c927589178")
        );
    }

    /// Shaped like the fixtures' `result` event, as Claude Code writes it when `--max-turns`
    /// runs out.
    const MAX_TURNS_RESULT: &str = r#"{"duration_api_ms":58,"stop_reason":"tool_use","session_id":"e7a20cf3-356f-457c-a24a-f92b77635de2","total_cost_usd":0.0024,"usage":{"input_tokens":300,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":60,"output_tokens_details":{"thinking_tokens":0},"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0},"service_tier":"standard","cache_creation":{"ephemeral_1h_input_tokens":0,"ephemeral_5m_input_tokens":0},"inference_geo":"","iterations":[],"speed":"standard","fallback_credit":null},"modelUsage":{},"permission_denials":[],"terminal_reason":"max_turns","fast_mode_state":"off","fast_mode_disabled_reason":"sdk_opt_in_required","safety_stops":0,"is_error":IS_ERROR,"num_turns":3,"subtype":"error_max_turns","api_error_status":null,"errors":["Reached maximum number of turns (3)"],"type":"result","duration_ms":312,"uuid":"0c8a1f83-2f7e-4d3e-9a3f-5d8f3e1c2b7a","queued_turn_count":0,"result_index":0}"#;

    #[test]
    fn an_error_max_turns_result_is_an_error_whatever_its_is_error_says() {
        for is_error in ["true", "false"] {
            let events = parse_line(&MAX_TURNS_RESULT.replace("IS_ERROR", is_error));
            let done = finished(&events);
            assert!(done.is_error, "is_error: {is_error}");
            assert_eq!(done.subtype.as_deref(), Some("error_max_turns"));
            assert_eq!(done.reason.as_deref(), Some("max_turns"));
            assert_eq!(done.num_turns, Some(3));
            assert_eq!(done.total_cost_usd, Some(0.0024));
            assert_eq!(done.result, None);
            assert_eq!(done.errors, vec!["Reached maximum number of turns (3)"]);
        }
        // Without a terminal_reason the subtype says why.
        let bare = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":1,"session_id":"s"}"#;
        let events = parse_line(bare);
        assert_eq!(
            finished(&events).reason.as_deref(),
            Some("error_during_execution")
        );
    }

    #[test]
    fn a_rejected_rate_limit_event_says_when_the_limit_lifts() {
        let rejected = r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1778565600,"rateLimitType":"five_hour","overageStatus":"rejected","isUsingOverage":false},"session_id":"s"}"#;
        assert_eq!(
            parse_line(rejected),
            vec![AgentEvent::LimitReached {
                resets_at: Some(1778565600),
                kind: Some("five_hour".into())
            }]
        );
        let warning = r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1778565600}}"#;
        assert_eq!(
            parse_line(warning),
            vec![AgentEvent::other("rate_limit_event")]
        );
    }

    #[test]
    fn an_api_retry_is_retrying_and_no_sign_of_life() {
        // Claude Code's shape (2.1.x): attempt, max_retries, retry_delay_ms, error_status,
        // error.
        let line = r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1200,"error_status":null,"error":"connection_error","session_id":"s","uuid":"u"}"#;
        let events = parse_line(line);
        assert_eq!(
            events,
            vec![AgentEvent::Retrying {
                message: "retrying the model API (attempt 2/10): connection_error".into()
            }]
        );
        assert!(!events[0].is_meaningful());
        let overloaded = r#"{"type":"system","subtype":"api_retry","attempt":1,"error_status":529,"error":"overloaded"}"#;
        assert_eq!(
            parse_line(overloaded),
            vec![AgentEvent::Retrying {
                message: "retrying the model API (attempt 1): overloaded, status 529".into()
            }]
        );
    }

    #[test]
    fn unknown_events_subtypes_and_blocks_are_kept_as_other() {
        let cases = [
            (
                r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"},"session_id":"s"}"#,
                "rate_limit_event",
            ),
            (
                r#"{"type":"system","subtype":"hook_started","hook_name":"PreToolUse:Bash","session_id":"s"}"#,
                "system/hook_started",
            ),
            (
                r#"{"type":"assistant","message":{"content":[{"type":"hologram","data":1}]},"session_id":"s"}"#,
                "assistant/hologram",
            ),
            (
                r#"{"type":"stream_event","event":{"type":"ping"}}"#,
                "stream_event",
            ),
            (r#"{"no_type":true}"#, "untyped"),
            (r#"[1,2,3]"#, "untyped"),
        ];
        for (line, kind) in cases {
            let events = parse_line(line);
            assert_eq!(events, vec![AgentEvent::other(kind)], "{line}");
            assert!(!events[0].is_meaningful());
        }
    }

    #[test]
    fn garbage_lines_never_stop_the_run() {
        for line in [
            "not json at all",
            "{\"type\":\"result\",\"is_error\":fal",
            "\u{fffd}\u{fffd}{",
            "[DONE:pr_ready] printed raw by something",
        ] {
            assert_eq!(parse_line(line), vec![AgentEvent::other("not_json")]);
        }
        assert_eq!(parse_line(""), vec![]);
        assert_eq!(parse_line("  \r"), vec![]);
    }

    #[test]
    fn a_permission_denied_system_event_is_a_denial() {
        let line = r#"{"type":"system","subtype":"permission_denied","tool_name":"Write","tool_use_id":"toolu_1","reason":"Claude requested permissions to write to /etc/x","session_id":"s"}"#;
        assert_eq!(
            parse_line(line),
            vec![AgentEvent::PermissionDenied {
                tool: "Write".into(),
                tool_use_id: Some("toolu_1".into()),
                reason: Some("Claude requested permissions to write to /etc/x".into()),
            }]
        );
    }

    #[test]
    fn thinking_and_block_list_tool_results_are_read() {
        let thinking = r#"{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"Let me look.","signature":"x"}]}}"#;
        assert_eq!(
            parse_line(thinking),
            vec![AgentEvent::Thinking {
                text: "Let me look.".into()
            }]
        );
        let long = "x".repeat(OUTPUT_EXCERPT_MAX * 2);
        let result = json!({"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":[{"type":"text","text":"line one"},{"type":"text","text":long}]}]}});
        let events = parse_line(&result.to_string());
        let AgentEvent::ToolResult {
            id,
            is_error,
            output_excerpt,
            ..
        } = &events[0]
        else {
            panic!("{events:?}")
        };
        assert_eq!(id, "t1");
        assert!(is_error);
        assert!(output_excerpt.starts_with("line one\nxxx"));
        assert!(output_excerpt.len() < OUTPUT_EXCERPT_MAX + 40);
    }

    #[test]
    fn a_first_run_names_its_session_and_a_later_one_resumes_it() {
        let program = PathBuf::from("/usr/bin/claude");
        let first = Invocation {
            session: Session::New {
                id: Some("5f1c0a52-3d0e-4b8e-9a57-2c1f3b4d5e6f".into()),
            },
            settings: Some(PathBuf::from("/w/runs/42/claude-settings.json")),
            allowed_tools: vec!["Bash(git diff:*)".into(), "Edit".into()],
            append_system_prompt: Some("Print [DONE:pr_ready] when done.".into()),
            model: None,
            max_turns: Some(40),
            tools: None,
            confined: false,
        };
        assert_eq!(
            argv(&program, &first),
            [
                "/usr/bin/claude",
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--session-id",
                "5f1c0a52-3d0e-4b8e-9a57-2c1f3b4d5e6f",
                "--settings",
                "/w/runs/42/claude-settings.json",
                "--max-turns",
                "40",
                "--allowedTools",
                "Bash(git diff:*)",
                "Edit",
                "--append-system-prompt",
                "Print [DONE:pr_ready] when done.",
            ]
        );
        let resume = Invocation {
            session: Session::Resume { id: "5f1c".into() },
            ..Invocation::default()
        };
        assert_eq!(
            argv(&program, &resume),
            [
                "/usr/bin/claude",
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--resume",
                "5f1c"
            ]
        );
    }

    #[test]
    fn an_answer_only_call_has_no_tools_and_its_structured_output_is_read() {
        let schema = json!({"type": "object", "required": ["status"]});
        assert_eq!(
            answer_only_args(Some(&schema)),
            [
                "--tools",
                "",
                "--json-schema",
                r#"{"type":"object","required":["status"]}"#
            ]
        );
        assert_eq!(answer_only_args(None), ["--tools", ""]);
        // The `result` of Claude Code 2.1.332 run with `--json-schema` (trimmed).
        let line = r#"{"type":"result","subtype":"success","is_error":false,"num_turns":2,"stop_reason":"tool_use","terminal_reason":"completed","session_id":"b6ab","result":"{\"status\":\"skip\"}","structured_output":{"status":"skip"}}"#;
        let events = parse_line(line);
        assert_eq!(
            finished(&events).structured_output,
            Some(json!({"status": "skip"}))
        );
        let plain = r#"{"type":"result","subtype":"success","is_error":false,"result":"hi","structured_output":null}"#;
        assert_eq!(finished(&parse_line(plain)).structured_output, None);
    }

    #[test]
    fn the_hook_settings_send_every_tool_call_to_executor_hook_claude() {
        let command = hook_command(
            Path::new("/opt/my tools/executor"),
            Path::new("/home/o/it's/executor.toml"),
            17,
            Path::new("/w/executor-T-1"),
            Some("executor/T-1"),
            Some(Path::new("/l/run-17/worker-policy.json")),
            None,
        );
        assert_eq!(
            command,
            r"'/opt/my tools/executor' hook claude --config '/home/o/it'\''s/executor.toml' --run 17 --worktree /w/executor-T-1 --branch executor/T-1 --contract /l/run-17/worker-policy.json"
        );
        // Inside the wall the hook asks the runner through its socket.
        assert!(hook_command(
            Path::new("/e"),
            Path::new("/c.toml"),
            1,
            Path::new("/w"),
            None,
            None,
            Some(&RelayAddress::Socket(PathBuf::from(
                "/tmp/executor-hook-1-0/hook.sock"
            ))),
        )
        .ends_with(" --relay /tmp/executor-hook-1-0/hook.sock"));
        // Sealed without bubblewrap, over loopback TCP.
        assert!(hook_command(
            Path::new("/e"),
            Path::new("/c.toml"),
            1,
            Path::new("/w"),
            None,
            None,
            Some(&RelayAddress::Loopback(40123)),
        )
        .ends_with(" --relay tcp:40123"));
        for text in ["/tmp/x/hook.sock", "tcp:40123"] {
            assert_eq!(
                RelayAddress::parse(text).map(|r| r.to_arg()),
                Ok(text.to_string())
            );
        }
        for bad in ["tcp:0", "tcp:http", "hook.sock", ""] {
            assert!(RelayAddress::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            hook_command(
                Path::new("/usr/local/bin/executor"),
                Path::new("/srv/executor.toml"),
                3,
                Path::new("/srv/repo"),
                None,
                None,
                None
            ),
            "/usr/local/bin/executor hook claude --config /srv/executor.toml --run 3 --worktree /srv/repo"
        );
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        let settings = hook_settings(&command);
        let hook = &settings["hooks"]["PreToolUse"][0];
        assert_eq!(hook["matcher"], "*");
        assert_eq!(hook["hooks"][0]["type"], "command");
        assert_eq!(hook["hooks"][0]["command"], command);
    }
}

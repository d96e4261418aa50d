//! pi (Mario Zechner's coding agent, npm `@mariozechner/pi-coding-agent`) in JSON mode:
//! `pi --print --mode json`, the prompt on stdin.
//!
//! What the stream looks like (captured from pi 0.73.1, see `tests/fixtures/pi/README.md`):
//! - The first line is the session header, `{"type":"session","id":…,"cwd":…}`: the id to
//!   resume with (`--session <id>`). A resumed session prints the same header again.
//! - Then every event of the session, one JSON object a line: `agent_start`, `turn_start`,
//!   `message_start` / `message_update` (a streaming delta, repeating the partial message) /
//!   `message_end` for each message (user, assistant, toolResult), `tool_execution_start` /
//!   `tool_execution_update` / `tool_execution_end` for each tool call, `turn_end`, and
//!   `agent_end` with the messages of the run. Besides those: `auto_retry_start` /
//!   `auto_retry_end`, `compaction_start` / `compaction_end`, `queue_update`, and whatever a
//!   later version adds (`agent_settled`): all [`AgentEvent::Other`].
//! - The model's words are read from the `message_end` of each assistant message (text and
//!   thinking parts); tool calls from `tool_execution_start` / `_end`, so each call is
//!   counted once although the assistant message, `turn_end` and `agent_end` repeat it.
//! - A model API error is an assistant message with `stopReason: "error"` and an
//!   `errorMessage` (`"<status> <body>"` from the provider's SDK), and the process still
//!   exits 0 in JSON mode: the verdict is the stop reason of the run's last assistant
//!   message, read from `agent_end` ([`Finished::is_error`]).
//! - pi retries an error that looks transient (429, 5xx, "overloaded", …) by itself: each
//!   attempt ends in its own `agent_end`, then `auto_retry_start`. Every `agent_end` is a
//!   [`Finished`]; the last one is the verdict, as [`super::Summary`] and the runner take it.
//!   (Later versions mark a non-final one `willRetry: true`; it is then not a [`Finished`].)
//!
//! pi has no permission prompts and no hook: every tool it is given runs. `--tools` is the
//! whole set the worker has (see [`tool_list`]).

use std::path::Path;

use serde_json::Value;

use super::event::{excerpt, AgentEvent, Finished, Usage, OUTPUT_EXCERPT_MAX};
use super::{parse_json_line, Invocation, Session};

/// The program name looked up on `PATH`.
pub const PROGRAM: &str = "pi";

/// Settings every pi worker runs with, none of them secret. `PI_OFFLINE=1`: none of pi's
/// startup network work (its version check, installing or updating the pi packages a
/// settings file lists, downloading `fd` / `rg` for its `find` / `grep` tools); the model
/// API is not affected. `PI_TELEMETRY=0`: no install telemetry.
pub const FIXED_ENV: [(&str, &str); 2] = [("PI_OFFLINE", "1"), ("PI_TELEMETRY", "0")];

/// pi's own tool names (`pi --help`); `read`, `bash`, `edit` and `write` are on by default.
pub const BUILTIN_TOOLS: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];

/// The command line of one pi worker; the prompt goes on stdin (pi reads piped stdin as the
/// first message).
///
/// `pi --print --mode json`, then `--session <id>` to continue a session (a new one gets no
/// flag: pi names it in its header; an id in [`Session::New`] is ignored), `--model`
/// (`provider/id`, or a pattern pi resolves), `--tools <list>` or `--no-tools` when
/// `allowed_tools` is set (see [`tool_list`]), and `--append-system-prompt <text>`. pi has
/// no turn limit: `max_turns` is ignored.
///
/// `--session <id>` finds the session among those of the working directory (under
/// `~/.pi/agent/sessions/`, or `PI_CODING_AGENT_DIR`), so a resumed worker must run in the
/// same directory as the first. Elsewhere pi would offer to fork it and read the answer
/// from stdin, where the prompt is; it then prints nothing on stdout and exits 0.
pub fn argv(program: &Path, invocation: &Invocation) -> Vec<String> {
    let mut argv = vec![
        program.to_string_lossy().into_owned(),
        // `--mode json` alone means print mode in 0.73.1; `--print` keeps it so in
        // versions where the two are separate.
        "--print".to_string(),
        "--mode".to_string(),
        "json".to_string(),
    ];
    if let Session::Resume { id } = &invocation.session {
        argv.extend(["--session".to_string(), id.clone()]);
    }
    if let Some(model) = &invocation.model {
        argv.extend(["--model".to_string(), model.clone()]);
    }
    if let Some(tools) = &invocation.tools {
        match tool_list(tools) {
            Some(list) => argv.extend(["--tools".to_string(), list]),
            None => argv.push("--no-tools".to_string()),
        }
    } else if !invocation.allowed_tools.is_empty() {
        match tool_list(&invocation.allowed_tools) {
            Some(list) => argv.extend(["--tools".to_string(), list]),
            None => argv.push("--no-tools".to_string()),
        }
    }
    if let Some(prompt) = &invocation.append_system_prompt {
        argv.extend(["--append-system-prompt".to_string(), prompt.clone()]);
    }
    argv
}

/// The command line of a call that only answers: [`argv`] without any tool (`--no-tools`).
pub fn answer_only_argv(program: &Path, invocation: &Invocation) -> Vec<String> {
    let invocation = Invocation {
        allowed_tools: Vec::new(),
        ..invocation.clone()
    };
    let mut argv = argv(program, &invocation);
    argv.push("--no-tools".to_string());
    argv
}

/// `allowed_tools` as pi's `--tools` list: the only tools the worker has. pi's own tools
/// are matched whatever their case (`Bash` is `bash`); other names (an extension's tools)
/// are passed as they are. An entry that limits a tool's arguments, Claude's
/// `Bash(git diff:*)`, is left out, since pi cannot limit them and the tool is never widened
/// to all its uses; so is a name with a comma. `None` when nothing is left: no tools.
pub fn tool_list(allowed: &[String]) -> Option<String> {
    let mut names: Vec<String> = Vec::new();
    for name in allowed {
        let name = name.trim();
        if name.is_empty() || name.contains(['(', ')', ',']) {
            continue;
        }
        let name = BUILTIN_TOOLS
            .iter()
            .find(|builtin| builtin.eq_ignore_ascii_case(name))
            .map_or_else(|| name.to_string(), |builtin| builtin.to_string());
        if !names.contains(&name) {
            names.push(name);
        }
    }
    (!names.is_empty()).then(|| names.join(","))
}

/// The events one line of `--mode json` output means. Never fails: a line that is not JSON
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
        "session" => vec![match str_field(value, "id") {
            Some(session_id) => AgentEvent::SessionStarted {
                session_id,
                model: None,
            },
            None => AgentEvent::other(kind),
        }],
        "message_end" => match value.get("message") {
            Some(message) => message_end(message),
            None => vec![AgentEvent::other(kind)],
        },
        "tool_execution_start" => vec![AgentEvent::ToolCall {
            id: str_field(value, "toolCallId").unwrap_or_default(),
            name: str_field(value, "toolName").unwrap_or_default(),
            input: value.get("args").cloned().unwrap_or(Value::Null),
        }],
        "tool_execution_end" => vec![tool_execution_end(value)],
        // A run that pi will retry is not over (versions that say so).
        "agent_end" if value.get("willRetry").and_then(Value::as_bool) == Some(true) => {
            vec![AgentEvent::other("agent_end/will_retry")]
        }
        "agent_end" => vec![AgentEvent::Finished(Box::new(agent_end(value)))],
        // pi retrying its model API after a failed attempt: it waits, and that is no work.
        "auto_retry_start" => vec![AgentEvent::Retrying {
            message: auto_retry(value),
        }],
        "" => vec![AgentEvent::other("untyped")],
        // agent_start, turn_start, turn_end, message_start, message_update,
        // tool_execution_update, auto_retry_end, compaction_*, queue_update, agent_settled, …
        other => vec![AgentEvent::other(other)],
    }
}

/// `retrying the model API (attempt 1/3): 529 overloaded_error: …`, from an
/// `auto_retry_start` event's fields, each where present.
fn auto_retry(value: &Value) -> String {
    let number = |key: &str| value.get(key).and_then(Value::as_u64);
    let mut text = "retrying the model API".to_string();
    match (number("attempt"), number("maxAttempts")) {
        (Some(attempt), Some(max)) => text.push_str(&format!(" (attempt {attempt}/{max})")),
        (Some(attempt), None) => text.push_str(&format!(" (attempt {attempt})")),
        _ => {}
    }
    if let Some(error) = str_field(value, "errorMessage") {
        text.push_str(&format!(": {}", readable_error(&error)));
    }
    text
}

/// A finished message: an assistant's text and thinking parts, and its error. Its tool calls
/// are read from `tool_execution_start`; user and tool result messages add nothing.
fn message_end(message: &Value) -> Vec<AgentEvent> {
    let role = message.get("role").and_then(Value::as_str).unwrap_or("");
    if role != "assistant" {
        return vec![AgentEvent::other(if role.is_empty() {
            "message_end".to_string()
        } else {
            format!("message_end/{role}")
        })];
    }
    let mut events: Vec<AgentEvent> = match message.get("content") {
        Some(Value::Array(parts)) => parts.iter().filter_map(assistant_part).collect(),
        Some(Value::String(text)) => vec![AgentEvent::AssistantText { text: text.clone() }],
        _ => Vec::new(),
    };
    if let Some(message) = failure(message) {
        events.push(AgentEvent::Failed { message });
    }
    if events.is_empty() {
        events.push(AgentEvent::other("message_end/assistant"));
    }
    events
}

fn assistant_part(part: &Value) -> Option<AgentEvent> {
    match part.get("type").and_then(Value::as_str).unwrap_or("") {
        "text" => Some(AgentEvent::AssistantText {
            text: str_field(part, "text").unwrap_or_default(),
        }),
        "thinking" => Some(AgentEvent::Thinking {
            text: str_field(part, "thinking").unwrap_or_default(),
        }),
        // Reported by tool_execution_start when pi runs it.
        "toolCall" => None,
        other => Some(AgentEvent::other(format!("message_end/assistant/{other}"))),
    }
}

/// Why an assistant message failed: its `errorMessage` when its stop reason is `error` or
/// `aborted`.
fn failure(message: &Value) -> Option<String> {
    let stop_reason = message.get("stopReason").and_then(Value::as_str)?;
    if !matches!(stop_reason, "error" | "aborted") {
        return None;
    }
    Some(
        message
            .get("errorMessage")
            .and_then(Value::as_str)
            .filter(|text| !text.trim().is_empty())
            .map_or_else(|| format!("request {stop_reason}"), readable_error),
    )
}

fn tool_execution_end(value: &Value) -> AgentEvent {
    let is_error = value.get("isError").and_then(Value::as_bool) == Some(true);
    let output = tool_output(value.get("result"));
    // pi's bash tool fails a command that exits non-zero with this as its output's last line.
    let exit_code = (is_error && value.get("toolName").and_then(Value::as_str) == Some("bash"))
        .then(|| output.trim_end().rsplit('\n').next())
        .flatten()
        .and_then(|last| last.strip_prefix("Command exited with code "))
        .and_then(|code| code.trim().parse::<i32>().ok());
    AgentEvent::ToolResult {
        id: str_field(value, "toolCallId").unwrap_or_default(),
        is_error,
        output_excerpt: excerpt(&output, OUTPUT_EXCERPT_MAX),
        exit_code,
    }
}

/// A tool result's text: `result.content`'s text parts, joined; or a plain string.
fn tool_output(result: Option<&Value>) -> String {
    let content = match result {
        Some(Value::String(text)) => return text.clone(),
        Some(result) => result.get("content"),
        None => None,
    };
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => text_parts(parts),
        _ => String::new(),
    }
}

fn text_parts(parts: &[Value]) -> String {
    parts
        .iter()
        .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The end of a run, from the messages `agent_end` lists: the verdict and stop reason of the
/// last assistant message, the assistant messages as turns, their usage and cost added up,
/// and the last one's text as the result.
fn agent_end(value: &Value) -> Finished {
    let assistants: Vec<&Value> = value
        .get("messages")
        .and_then(Value::as_array)
        .map(|messages| {
            messages
                .iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
                .collect()
        })
        .unwrap_or_default();
    let last = assistants.last().copied();
    let stop_reason = last.and_then(|m| str_field(m, "stopReason"));
    let error = last.and_then(failure);
    let error_message = last.and_then(|m| m.get("errorMessage").and_then(Value::as_str));
    let usages: Vec<&Value> = assistants
        .iter()
        .filter_map(|m| m.get("usage"))
        .filter(|usage| usage.is_object())
        .collect();
    let costs: Vec<f64> = usages
        .iter()
        .filter_map(|usage| usage.pointer("/cost/total").and_then(Value::as_f64))
        .collect();
    let result = last
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
        .map(|parts| text_parts(parts))
        .filter(|text| !text.is_empty());
    Finished {
        // A run with no answer at all did not succeed either.
        is_error: last.is_none() || error.is_some(),
        reason: error.or_else(|| stop_reason.clone()),
        subtype: None,
        stop_reason,
        session_id: None,
        num_turns: u32::try_from(assistants.len()).ok(),
        total_cost_usd: (!costs.is_empty()).then(|| costs.iter().sum()),
        duration_ms: None,
        usage: (!usages.is_empty()).then(|| add_usage(&usages)),
        result,
        api_error_status: error_message.and_then(http_status),
        ..Finished::default()
    }
}

fn add_usage(usages: &[&Value]) -> Usage {
    let sum = |key: &str| -> u64 {
        usages
            .iter()
            .filter_map(|usage| usage.get(key).and_then(Value::as_u64))
            .sum()
    };
    Usage {
        input_tokens: sum("input"),
        output_tokens: sum("output"),
        cache_read_input_tokens: sum("cacheRead"),
        cache_creation_input_tokens: sum("cacheWrite"),
        // pi does not count reasoning tokens apart from output.
        reasoning_output_tokens: 0,
    }
}

/// The HTTP status at the start of a provider SDK's error message (`"500 {…}"`).
fn http_status(message: &str) -> Option<u16> {
    let (status, _) = message.split_once(' ')?;
    if status.len() != 3 || !status.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    status
        .parse()
        .ok()
        .filter(|status| (100..600).contains(status))
}

/// The SDK's `"<status> <body>"` with an API error body in the usual `{"error": {"type",
/// "message"}}` shape read as `<status> <type>: <message>`; anything else as it is.
fn readable_error(message: &str) -> String {
    let (status, body) = match http_status(message) {
        Some(status) => (Some(status), message[4..].trim_start()),
        None => (None, message),
    };
    let Ok(body) = serde_json::from_str::<Value>(body) else {
        return message.to_string();
    };
    let error = body.get("error").filter(|e| e.is_object()).unwrap_or(&body);
    let text = match (
        error.get("type").and_then(Value::as_str),
        error.get("message").and_then(Value::as_str),
    ) {
        (Some(kind), Some(text)) => format!("{kind}: {text}"),
        (None, Some(text)) => text.to_string(),
        _ => return message.to_string(),
    };
    // A usage limit's reset is kept: the run waits for it (`core::usage_limit`).
    let text = match (
        error.get("resets_at").and_then(Value::as_i64),
        error.get("resets_in_seconds").and_then(Value::as_i64),
    ) {
        (Some(at), _) => format!("{text} (resets_at: {at})"),
        (None, Some(seconds)) => format!("{text} (resets_in_seconds: {seconds})"),
        (None, None) => text,
    };
    match status {
        Some(status) => format!("{status} {text}"),
        None => text,
    }
}

fn str_field(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::event::Summary;
    use serde_json::json;
    use std::path::PathBuf;

    /// A transcript captured from pi 0.73.1, in `tests/fixtures/pi/` (see its README).
    fn fixture(name: &str) -> String {
        let path = format!("{}/tests/fixtures/pi/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
    }

    const FIXTURES: [&str; 6] = [
        "pi_json.jsonl",
        "pi_resume_first.jsonl",
        "pi_resume.jsonl",
        "pi_more.jsonl",
        "pi_api_error.jsonl",
        "pi_api_error_retry.jsonl",
    ];

    fn parse_all(name: &str) -> Vec<AgentEvent> {
        fixture(name).lines().flat_map(parse_line).collect()
    }

    /// The events that matter for the tests: Other left out.
    fn key_events(name: &str) -> Vec<AgentEvent> {
        parse_all(name)
            .into_iter()
            .filter(|event| !matches!(event, AgentEvent::Other { .. }))
            .collect()
    }

    fn summary(events: &[AgentEvent]) -> Summary {
        let mut summary = Summary::default();
        events.iter().for_each(|event| summary.observe(event));
        summary
    }

    fn finished(events: &[AgentEvent]) -> &Finished {
        events
            .iter()
            .rev()
            .find_map(|event| match event {
                AgentEvent::Finished(done) => Some(done.as_ref()),
                _ => None,
            })
            .expect("a finished event")
    }

    fn text(text: &str) -> AgentEvent {
        AgentEvent::AssistantText {
            text: text.to_string(),
        }
    }

    #[test]
    fn every_fixture_line_is_read_and_none_is_garbage() {
        for name in FIXTURES {
            for (n, line) in fixture(name).lines().enumerate() {
                let events = parse_line(line);
                assert!(!events.is_empty(), "{name} line {}", n + 1);
                for event in &events {
                    assert_ne!(
                        event,
                        &AgentEvent::other("not_json"),
                        "{name} line {}",
                        n + 1
                    );
                    assert_ne!(
                        event,
                        &AgentEvent::other("untyped"),
                        "{name} line {}",
                        n + 1
                    );
                    serde_json::to_string(event).unwrap();
                }
            }
        }
    }

    #[test]
    fn a_new_session_reads_its_id_text_tool_call_and_verdict() {
        let session = "01a22807-1b89-7287-8e3b-323685cd58d5";
        let events = key_events("pi_json.jsonl");
        assert_eq!(
            events[..5],
            [
                AgentEvent::SessionStarted {
                    session_id: session.into(),
                    model: None
                },
                text("Writing the file."),
                AgentEvent::ToolCall {
                    id: "toolu_00000e10000000000005".into(),
                    name: "bash".into(),
                    input: json!({"command": "echo hello > out.txt"}),
                },
                AgentEvent::ToolResult {
                    id: "toolu_00000e10000000000005".into(),
                    is_error: false,
                    output_excerpt: "(no output)".into(),
                    exit_code: None,
                },
                text("Wrote it.\n[STATUS:wrote] out.txt\n[DONE:implemented] wrote out.txt"),
            ]
        );
        assert_eq!(events.len(), 6);
        let done = finished(&events);
        assert!(!done.is_error);
        assert_eq!(done.stop_reason.as_deref(), Some("stop"));
        assert_eq!(done.reason.as_deref(), Some("stop"));
        assert_eq!(done.num_turns, Some(2));
        assert_eq!(done.total_cost_usd, Some(0.0));
        assert_eq!(done.api_error_status, None);
        assert_eq!(
            done.usage,
            Some(Usage {
                input_tokens: 200,
                output_tokens: 40,
                ..Usage::default()
            })
        );
        assert_eq!(
            done.result.as_deref(),
            Some("Wrote it.\n[STATUS:wrote] out.txt\n[DONE:implemented] wrote out.txt")
        );
        // Everything but the session start resets the no-output watchdog.
        let meaningful: Vec<bool> = events.iter().map(AgentEvent::is_meaningful).collect();
        assert_eq!(meaningful, [false, true, true, true, true, true]);
        let summary = summary(&events);
        assert!(summary.succeeded());
        assert_eq!(summary.session_id.as_deref(), Some(session));
        assert_eq!((summary.tool_calls, summary.failed_tool_results), (1, 0));
        assert!(summary.failures.is_empty());
    }

    #[test]
    fn worker_messages_reach_the_runner_exactly_as_from_claude() {
        let events = parse_all("pi_json.jsonl");
        let lines: Vec<&str> = events.iter().flat_map(AgentEvent::protocol_lines).collect();
        assert_eq!(
            lines,
            ["[STATUS:wrote] out.txt", "[DONE:implemented] wrote out.txt"]
        );
        // The same text from Claude Code and from pi is the same AgentEvent.
        let said = "Wrote out.txt.\n  [DONE:pr_ready] summary=wrote out.txt\nnot [DONE:x]";
        let claude =
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": said}]}});
        let pi = json!({"type": "message_end", "message": {"role": "assistant", "content": [{"type": "text", "text": said}], "stopReason": "stop"}});
        let from_claude = crate::agents::claude::parse_line(&claude.to_string());
        let from_pi = parse_line(&pi.to_string());
        assert_eq!(from_pi, from_claude);
        assert_eq!(
            from_pi[0].protocol_lines(),
            ["[DONE:pr_ready] summary=wrote out.txt"]
        );
    }

    #[test]
    fn a_resumed_session_names_the_same_session_and_carries_on() {
        let first = summary(&parse_all("pi_resume_first.jsonl"));
        let resumed_events = key_events("pi_resume.jsonl");
        let resumed = summary(&resumed_events);
        assert!(first.succeeded() && resumed.succeeded());
        assert_eq!(
            resumed.session_id.as_deref(),
            Some("01a22807-109a-7718-9dfe-4ebf8b4fdcad")
        );
        assert_eq!(resumed.session_id, first.session_id);
        assert_eq!(first.final_text(), Some("[DONE:implemented] wrote out.txt"));
        assert_eq!(resumed.final_text(), Some("[DONE:implemented] resumed"));
        // agent_end lists only this run's messages: one turn, its usage alone.
        let done = finished(&resumed_events);
        assert_eq!(done.num_turns, Some(1));
        assert_eq!(done.usage.unwrap().input_tokens, 100);
        assert_eq!(resumed.tool_calls, 0);
    }

    #[test]
    fn a_failed_command_is_an_error_result_with_its_exit_code() {
        let events = parse_all("pi_more.jsonl");
        assert!(events.contains(&AgentEvent::ToolResult {
            id: "toolu_0000113e000000000001".into(),
            is_error: true,
            output_excerpt: "oops\n\n\nCommand exited with code 3".into(),
            exit_code: Some(3),
        }));
        assert!(events.contains(&AgentEvent::ToolResult {
            id: "toolu_0000113e000000000003".into(),
            is_error: false,
            output_excerpt: "one\ntwo\n".into(),
            exit_code: None,
        }));
        // An assistant message that is only a tool call says nothing itself.
        assert!(events.contains(&AgentEvent::other("message_end/assistant")));
        assert!(events.contains(&text("Trying again.")));
        let summary = summary(&events);
        assert_eq!((summary.tool_calls, summary.failed_tool_results), (2, 1));
        assert!(summary.succeeded());
        assert_eq!(
            summary.final_text(),
            Some("[STATUS:tests] none to run\n[DONE:implemented] wrote notes.txt")
        );
        let done = summary.finished.unwrap();
        assert_eq!(done.num_turns, Some(3));
        assert_eq!(done.usage.unwrap().output_tokens, 60);
    }

    #[test]
    fn an_api_error_is_a_failure_and_an_error_finish_although_pi_exits_0() {
        let events = key_events("pi_api_error.jsonl");
        let message = "400 invalid_request_error: scripted error";
        assert_eq!(
            events,
            [
                AgentEvent::SessionStarted {
                    session_id: "01a22807-0660-7462-88e2-323c9c976362".into(),
                    model: None
                },
                AgentEvent::Failed {
                    message: message.into()
                },
                events[2].clone(),
            ]
        );
        let done = finished(&events);
        assert!(done.is_error);
        assert_eq!(done.reason.as_deref(), Some(message));
        assert_eq!(done.stop_reason.as_deref(), Some("error"));
        assert_eq!(done.api_error_status, Some(400));
        assert_eq!(done.num_turns, Some(1));
        assert_eq!(done.result, None);
        let summary = summary(&events);
        assert!(!summary.succeeded());
        assert_eq!(summary.failures, [message]);
        assert_eq!(summary.final_text(), None);
    }

    #[test]
    fn each_retried_attempt_ends_in_its_own_finish_and_the_last_one_counts() {
        let events = parse_all("pi_api_error_retry.jsonl");
        let finishes: Vec<&Finished> = events
            .iter()
            .filter_map(|event| match event {
                AgentEvent::Finished(done) => Some(done.as_ref()),
                _ => None,
            })
            .collect();
        assert_eq!(finishes.len(), 2);
        assert!(finishes.iter().all(|done| done.is_error));
        assert!(finishes
            .iter()
            .all(|done| done.api_error_status == Some(529)));
        assert_eq!(
            finishes[1].reason.as_deref(),
            Some("529 overloaded_error: scripted error")
        );
        let retry = AgentEvent::Retrying {
            message: "retrying the model API (attempt 1/1): 529 overloaded_error: scripted error"
                .into(),
        };
        assert!(events.contains(&retry), "{events:?}");
        assert!(!retry.is_meaningful());
        assert_eq!(events.last(), Some(&AgentEvent::other("auto_retry_end")));
        let mut summary = summary(&events);
        assert!(!summary.succeeded());
        // Each attempt's error, and the retry's words.
        assert_eq!(summary.failures.len(), 3);
        // Had the retry answered, its agent_end would be the verdict.
        for line in fixture("pi_resume.jsonl").lines().skip(1) {
            parse_line(line).iter().for_each(|e| summary.observe(e));
        }
        assert!(summary.succeeded());
        // A version that says a retry follows does not finish there.
        let will_retry = r#"{"type":"agent_end","messages":[{"role":"assistant","content":[],"stopReason":"error","errorMessage":"529 overloaded"}],"willRetry":true}"#;
        assert_eq!(
            parse_line(will_retry),
            [AgentEvent::other("agent_end/will_retry")]
        );
    }

    #[test]
    fn thinking_aborts_and_plain_string_results_are_read() {
        let line = json!({"type": "message_end", "message": {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Let me look.", "thinkingSignature": "x"},
            {"type": "text", "text": "Partial"},
            {"type": "toolCall", "id": "t1", "name": "read", "arguments": {"path": "a"}},
            {"type": "hologram"}
        ], "stopReason": "aborted"}});
        assert_eq!(
            parse_line(&line.to_string()),
            [
                AgentEvent::Thinking {
                    text: "Let me look.".into()
                },
                text("Partial"),
                AgentEvent::other("message_end/assistant/hologram"),
                AgentEvent::Failed {
                    message: "request aborted".into()
                },
            ]
        );
        let long = "x".repeat(OUTPUT_EXCERPT_MAX * 2);
        let end = json!({"type": "tool_execution_end", "toolCallId": "t1", "toolName": "read", "result": {"content": [{"type": "text", "text": "line one"}, {"type": "image", "data": "…"}, {"type": "text", "text": long}]}, "isError": false});
        let events = parse_line(&end.to_string());
        let [AgentEvent::ToolResult {
            output_excerpt,
            exit_code: None,
            ..
        }] = events.as_slice()
        else {
            panic!("one tool result")
        };
        assert!(output_excerpt.starts_with("line one\nxxx"));
        assert!(output_excerpt.len() < OUTPUT_EXCERPT_MAX + 40);
        let plain = r#"{"type":"tool_execution_end","toolCallId":"t2","toolName":"x","result":"done","isError":false}"#;
        assert!(matches!(
            &parse_line(plain)[0],
            AgentEvent::ToolResult { output_excerpt, .. } if output_excerpt == "done"
        ));
        // Only bash's own last line is an exit code.
        let other_tool = r#"{"type":"tool_execution_end","toolCallId":"t3","toolName":"read","result":{"content":[{"type":"text","text":"Command exited with code 2"}]},"isError":true}"#;
        assert!(matches!(
            &parse_line(other_tool)[0],
            AgentEvent::ToolResult {
                exit_code: None,
                is_error: true,
                ..
            }
        ));
    }

    #[test]
    fn a_run_without_an_answer_is_not_a_success() {
        for line in [
            r#"{"type":"agent_end","messages":[]}"#,
            r#"{"type":"agent_end"}"#,
            r#"{"type":"agent_end","messages":[{"role":"user","content":"hi"}]}"#,
        ] {
            let events = parse_line(line);
            let done = finished(&events);
            assert!(done.is_error, "{line}");
            assert_eq!((done.num_turns, done.usage), (Some(0), None), "{line}");
        }
        // A truncated reply is not an error: the runner judges it by its worker messages.
        let length = r#"{"type":"agent_end","messages":[{"role":"assistant","content":[{"type":"text","text":"[STATUS:x] half"}],"stopReason":"length","usage":{"input":5,"output":7,"cacheRead":2,"cacheWrite":3,"cost":{"total":0.25}}}]}"#;
        let events = parse_line(length);
        let done = finished(&events);
        assert!(!done.is_error);
        assert_eq!(done.stop_reason.as_deref(), Some("length"));
        assert_eq!(done.total_cost_usd, Some(0.25));
        assert_eq!(
            done.usage,
            Some(Usage {
                input_tokens: 5,
                output_tokens: 7,
                cache_read_input_tokens: 2,
                cache_creation_input_tokens: 3,
                reasoning_output_tokens: 0,
            })
        );
    }

    #[test]
    fn unknown_events_and_garbage_are_other_never_a_panic() {
        let cases = [
            (r#"{"type":"agent_settled"}"#, "agent_settled"),
            (
                r#"{"type":"queue_update","steering":[],"followUp":[]}"#,
                "queue_update",
            ),
            (
                r#"{"type":"compaction_start","reason":"threshold"}"#,
                "compaction_start",
            ),
            (r#"{"type":"session","version":3}"#, "session"),
            (r#"{"type":"message_end"}"#, "message_end"),
            (
                r#"{"type":"message_end","message":{"content":[]}}"#,
                "message_end",
            ),
            (
                r#"{"type":"message_end","message":{"role":"custom","content":"x"}}"#,
                "message_end/custom",
            ),
            (
                r#"{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"stop"}}"#,
                "message_end/assistant",
            ),
            (r#"{"no_type":true}"#, "untyped"),
            (r#"[1,2,3]"#, "untyped"),
            (r#""session""#, "untyped"),
        ];
        for (line, kind) in cases {
            let events = parse_line(line);
            assert_eq!(events, vec![AgentEvent::other(kind)], "{line}");
            assert!(!events[0].is_meaningful());
        }
        for line in [
            "not json at all",
            "{\"type\":\"agent_end\",\"messages\":[",
            "\u{fffd}\u{fffd}{",
            "[DONE:implemented] printed raw by something",
        ] {
            assert_eq!(parse_line(line), vec![AgentEvent::other("not_json")]);
        }
        assert_eq!(parse_line(""), vec![]);
        assert_eq!(parse_line("  \r"), vec![]);
        // Odd field types and every cut of every captured line: never a panic.
        for line in [
            r#"{"type":"tool_execution_start","toolCallId":7,"toolName":null}"#,
            r#"{"type":"tool_execution_end","toolCallId":"t","toolName":"bash","isError":true,"result":{"content":"Command exited with code x"}}"#,
            r#"{"type":"agent_end","messages":[{"role":"assistant","content":"t","usage":{"input":-1,"cost":"free"},"stopReason":7}]}"#,
            r#"{"type":"message_end","message":{"role":"assistant","content":[1,null,{"type":7}],"stopReason":"error","errorMessage":"999 {"}}"#,
        ] {
            parse_line(line);
        }
        for name in FIXTURES {
            for line in fixture(name).lines() {
                for cut in (0..line.len()).step_by(97) {
                    if line.is_char_boundary(cut) {
                        parse_line(&line[..cut]);
                    }
                }
            }
        }
    }

    #[test]
    fn provider_errors_are_read_with_their_status() {
        assert_eq!(
            readable_error(r#"500 {"type":"error","error":{"type":"api_error","message":"boom"}}"#),
            "500 api_error: boom"
        );
        assert_eq!(
            readable_error(r#"429 {"message":"slow down"}"#),
            "429 slow down"
        );
        assert_eq!(readable_error("Connection error."), "Connection error.");
        assert_eq!(readable_error("404 page not found"), "404 page not found");
        assert_eq!(http_status("404 page not found"), Some(404));
        assert_eq!(http_status("4000 x"), None);
        assert_eq!(http_status("abc {}"), None);
        assert_eq!(http_status("999 x"), None);
        assert_eq!(http_status("500"), None);
    }

    #[test]
    fn a_first_run_lets_pi_name_the_session_and_a_later_one_resumes_it() {
        let program = PathBuf::from("/usr/bin/pi");
        assert_eq!(
            argv(&program, &Invocation::default()),
            ["/usr/bin/pi", "--print", "--mode", "json"]
        );
        let first = Invocation {
            session: Session::New {
                id: Some("ignored".into()),
            },
            settings: Some(PathBuf::from("/w/claude-settings.json")),
            allowed_tools: vec![
                "Read".into(),
                "Bash(git diff:*)".into(),
                "bash".into(),
                "EDIT".into(),
                "my_tool".into(),
            ],
            append_system_prompt: Some("Print [DONE:pr_ready] when done.".into()),
            model: Some("anthropic/claude-sonnet-4-5".into()),
            max_turns: Some(40),
            tools: None,
            confined: false,
        };
        assert_eq!(
            argv(&program, &first),
            [
                "/usr/bin/pi",
                "--print",
                "--mode",
                "json",
                "--model",
                "anthropic/claude-sonnet-4-5",
                "--tools",
                "read,bash,edit,my_tool",
                "--append-system-prompt",
                "Print [DONE:pr_ready] when done.",
            ]
        );
        let resume = Invocation {
            session: Session::Resume {
                id: "01a22807-109a-7718-9dfe-4ebf8b4fdcad".into(),
            },
            model: Some("scripted/scripted-model".into()),
            ..Invocation::default()
        };
        assert_eq!(
            argv(&program, &resume),
            [
                "/usr/bin/pi",
                "--print",
                "--mode",
                "json",
                "--session",
                "01a22807-109a-7718-9dfe-4ebf8b4fdcad",
                "--model",
                "scripted/scripted-model",
            ]
        );
        // Nothing pi can honour in the allowlist: no tools at all, never all of them.
        let only_patterns = Invocation {
            allowed_tools: vec!["Bash(git diff:*)".into(), " ".into()],
            ..Invocation::default()
        };
        assert_eq!(argv(&program, &only_patterns).last().unwrap(), "--no-tools");
        assert_eq!(
            answer_only_argv(&program, &first),
            [
                "/usr/bin/pi",
                "--print",
                "--mode",
                "json",
                "--model",
                "anthropic/claude-sonnet-4-5",
                "--append-system-prompt",
                "Print [DONE:pr_ready] when done.",
                "--no-tools",
            ]
        );
    }

    #[test]
    fn the_tool_list_is_pi_names_once_each() {
        let list =
            |names: &[&str]| tool_list(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>());
        assert_eq!(
            list(&["Bash", "bash", " read "]).as_deref(),
            Some("bash,read")
        );
        assert_eq!(
            list(&["Grep", "Find", "LS", "Write"]).as_deref(),
            Some("grep,find,ls,write")
        );
        assert_eq!(list(&["read,write", "Edit(src/**)"]), None);
        assert_eq!(list(&["MyTool"]).as_deref(), Some("MyTool"));
        assert_eq!(list(&[]), None);
    }
}

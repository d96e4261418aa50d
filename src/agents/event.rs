//! The one event type the rest of executor hears from a worker, whatever agent CLI runs it.
//!
//! Each adapter turns one output line into zero or more [`AgentEvent`]s. The raw line is
//! always kept in the transcript by the supervisor; an event only says what the line meant.
//! [`Summary`] folds a worker's events into what the runner needs at the end: the session to
//! resume, whether it succeeded, its final words, cost and turns.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The prefixes of the worker messages of docs/design.md §5 that a worker prints.
pub const PROTOCOL_PREFIXES: [&str; 4] = ["[REQUEST:", "[STATUS:", "[DONE:", "[ESCALATE:"];

/// Longest tool output kept in a [`AgentEvent::ToolResult`], in bytes (cut at a character
/// boundary). The whole output stays in the raw transcript.
pub const OUTPUT_EXCERPT_MAX: usize = 2_000;

/// What one line of a worker's output meant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AgentEvent {
    /// The agent named its session (Claude's `system/init`, Codex's `thread.started`): the
    /// id to resume it with.
    SessionStarted {
        session_id: String,
        model: Option<String>,
    },
    /// Text the model wrote. Worker messages (`[DONE:…]` and the rest) are read from here.
    AssistantText { text: String },
    /// The model's visible reasoning (Claude's thinking blocks, Codex's reasoning items).
    Thinking { text: String },
    /// The model asked for a tool.
    ToolCall {
        id: String,
        name: String,
        input: Value,
    },
    /// A tool call's outcome, with the start of its output.
    ToolResult {
        id: String,
        is_error: bool,
        output_excerpt: String,
        /// A shell command's exit code, where the agent reports one.
        exit_code: Option<i32>,
    },
    /// The agent refused a tool call on a permission rule (Claude's `system/permission_denied`).
    PermissionDenied {
        tool: String,
        tool_use_id: Option<String>,
        reason: Option<String>,
    },
    /// The agent's work for this process is over (Claude's `result`, Codex's `turn.completed`
    /// or `turn.failed`). The process should exit next.
    Finished(Box<Finished>),
    /// The agent reported an error (a model API error, a stream error). Not necessarily the
    /// end: the outcome is [`Finished`] and the exit code.
    Failed { message: String },
    /// The agent reported it is only reconnecting or retrying its model API, with no work
    /// done meanwhile: Codex's stream errors (`Reconnecting... 2/5 (…)`, `Reconnecting...
    /// waiting for network (…)`), Claude Code's `system/api_retry`, pi's
    /// `auto_retry_start`, such a line of a plain command. Waiting is no sign of life: a
    /// worker that says nothing else is stopped by the no-output watchdog.
    Retrying { message: String },
    /// A plan or rate limit refused the agent (Claude's `rate_limit_event` with `status:
    /// "rejected"`); the work ends on it next. `resets_at`: when the limit lifts, in seconds
    /// since the epoch, where the agent says.
    LimitReached {
        resets_at: Option<i64>,
        kind: Option<String>,
    },
    /// Anything else: an unknown event type or subtype, a keep-alive, a line that is not
    /// JSON. Kept so the transcript can say what was skipped; never fatal.
    Other { kind: String },
}

/// How the agent's work ended, as far as it says.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Finished {
    /// The verdict. Claude: its `is_error` (a `success` subtype can still be an error), or an
    /// `error_*` subtype. Codex: `turn.failed`.
    pub is_error: bool,
    /// Why it ended, in the agent's words: Claude's `terminal_reason` (`completed`,
    /// `api_error`, `tool_deferred`, `max_turns`, …) or its `error_*` subtype; Codex's
    /// `turn.failed` message.
    pub reason: Option<String>,
    /// Claude's result subtype (`success`, `error_max_turns`, `error_during_execution`, …).
    pub subtype: Option<String>,
    /// Claude's `stop_reason` (`end_turn`, `tool_deferred`, …).
    pub stop_reason: Option<String>,
    pub session_id: Option<String>,
    pub num_turns: Option<u32>,
    pub total_cost_usd: Option<f64>,
    pub duration_ms: Option<u64>,
    pub usage: Option<Usage>,
    /// The final text: Claude's `result`. Codex has none; [`Summary`] fills it with the last
    /// assistant text.
    pub result: Option<String>,
    /// Tool calls the agent refused during the session (Claude's `permission_denials`).
    pub permission_denials: Vec<ToolUse>,
    /// The tool call a `defer` hook answer parked: the session waits for a decision and is
    /// then resumed (Claude's `deferred_tool_use`).
    pub deferred_tool: Option<ToolUse>,
    /// The HTTP status of a model API error, when that is why it ended.
    pub api_error_status: Option<u16>,
    /// Error messages the agent listed (Claude's `errors` on `error_*` results).
    pub errors: Vec<String>,
    /// The final answer as JSON, when the agent was asked for one matching a schema
    /// (Claude's `structured_output`, with `--json-schema`; see
    /// [`super::Adapter::answer_only_argv`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<Value>,
}

impl Finished {
    /// The session stopped to wait for a decision on [`Finished::deferred_tool`]; it is not
    /// done and must be resumed.
    pub fn is_deferred(&self) -> bool {
        self.deferred_tool.is_some() || self.stop_reason.as_deref() == Some("tool_deferred")
    }

    /// The model API error that ended the session, said plainly: `the model API answered
    /// 401: <the agent's message>`. `None` when it did not end on one.
    pub fn api_error(&self) -> Option<String> {
        let api_ended = self.api_error_status.is_some()
            || (self.is_error && self.reason.as_deref() == Some("api_error"));
        if !api_ended {
            return None;
        }
        // The agent's words: Claude's `result` ("API Error: 400 …"), else its `errors`.
        let message = self
            .result
            .as_deref()
            .filter(|text| !text.trim().is_empty())
            .map(str::to_string)
            .or_else(|| (!self.errors.is_empty()).then(|| self.errors.join("; ")));
        let message = message.map(|text| {
            let line = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim();
            if line.chars().count() > 300 {
                format!("{}…", line.chars().take(299).collect::<String>())
            } else {
                line.to_string()
            }
        });
        let head = match self.api_error_status {
            Some(status) => format!("the model API answered {status}"),
            None => "the model API failed".to_string(),
        };
        Some(match message {
            Some(message) if !message.is_empty() => format!("{head}: {message}"),
            _ => head,
        })
    }
}

/// One tool call named in a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUse {
    pub id: String,
    pub name: String,
    pub input: Value,
}

/// Token counts, normalised. Claude's `input_tokens` excludes cached tokens; Codex's
/// includes them: the numbers are recorded as each agent reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Claude's `cache_read_input_tokens`, Codex's `cached_input_tokens`.
    pub cache_read_input_tokens: u64,
    /// Claude's `cache_creation_input_tokens`, Codex's `cache_write_input_tokens`.
    pub cache_creation_input_tokens: u64,
    /// Claude's `output_tokens_details.thinking_tokens`, Codex's `reasoning_output_tokens`.
    pub reasoning_output_tokens: u64,
}

impl AgentEvent {
    /// Whether this event resets the no-output watchdog: the model wrote something, called a
    /// tool or heard back from one, or the work ended. Session set-up, errors the agent may
    /// be retrying, keep-alives and unknown events do not.
    pub fn is_meaningful(&self) -> bool {
        match self {
            AgentEvent::AssistantText { text } | AgentEvent::Thinking { text } => {
                !text.trim().is_empty()
            }
            AgentEvent::ToolCall { .. }
            | AgentEvent::ToolResult { .. }
            | AgentEvent::PermissionDenied { .. }
            | AgentEvent::Finished(_) => true,
            AgentEvent::SessionStarted { .. }
            | AgentEvent::Failed { .. }
            | AgentEvent::Retrying { .. }
            | AgentEvent::LimitReached { .. }
            | AgentEvent::Other { .. } => false,
        }
    }

    /// The worker-message lines in this event's assistant text, in order. Only
    /// [`AgentEvent::AssistantText`] carries them (Claude's final `result` repeats the last
    /// text, so it is not read again).
    pub fn protocol_lines(&self) -> Vec<&str> {
        match self {
            AgentEvent::AssistantText { text } => text
                .lines()
                .map(str::trim)
                .filter(|line| is_protocol_line(line))
                .collect(),
            _ => Vec::new(),
        }
    }

    pub(crate) fn other(kind: impl Into<String>) -> Self {
        AgentEvent::Other { kind: kind.into() }
    }

    /// [`AgentEvent::Retrying`] when `message` only reports retrying (see
    /// [`reports_retrying`]), else [`AgentEvent::Failed`]: how an agent's error event is read.
    pub(crate) fn failed_or_retrying(message: String) -> Self {
        if reports_retrying(&message) {
            AgentEvent::Retrying { message }
        } else {
            AgentEvent::Failed { message }
        }
    }
}

/// Whether `text` only says the agent is reconnecting or retrying its network: the words
/// of Codex's stream errors (`Reconnecting... 2/5 (stream disconnected before completion:
/// …)`, `Reconnecting... waiting for network (Connection failed: …)`; before 0.50, `stream
/// error: …; retrying 1/5 in 200ms…`), however a plain command prints them. Read at the
/// start of the text only, so a sentence that mentions them is still the worker speaking.
pub fn reports_retrying(text: &str) -> bool {
    let text = text.trim_start().to_ascii_lowercase();
    text.starts_with("reconnecting")
        || text.starts_with("waiting for network")
        || (text.starts_with("stream error") && text.contains("retrying"))
}

/// A line of worker protocol: `[REQUEST:`, `[STATUS:`, `[DONE:` or `[ESCALATE:` after any
/// leading blanks.
pub fn is_protocol_line(line: &str) -> bool {
    let line = line.trim_start();
    PROTOCOL_PREFIXES
        .iter()
        .any(|prefix| line.starts_with(prefix))
}

/// `text` cut to at most `max` bytes at a character boundary, with a note of what was cut.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} more bytes]", &text[..end], text.len() - end)
}

/// What a worker's events add up to, folded one event at a time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// From the session start, else from the final event.
    pub session_id: Option<String>,
    /// The last assistant text seen.
    pub last_text: Option<String>,
    /// The final event, its `result` filled with the last assistant text when the agent
    /// gives none (Codex).
    pub finished: Option<Finished>,
    /// Errors the agent reported on the way.
    pub failures: Vec<String>,
    pub tool_calls: u32,
    pub failed_tool_results: u32,
    pub permission_denials: u32,
    /// Events the adapter did not recognise (or lines that were not JSON).
    pub other_events: u32,
}

impl Summary {
    pub fn observe(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::SessionStarted { session_id, .. } => {
                self.session_id = Some(session_id.clone());
            }
            AgentEvent::AssistantText { text } => self.last_text = Some(text.clone()),
            AgentEvent::Thinking { .. } => {}
            AgentEvent::ToolCall { .. } => self.tool_calls += 1,
            AgentEvent::ToolResult { is_error, .. } => {
                if *is_error {
                    self.failed_tool_results += 1;
                }
            }
            AgentEvent::PermissionDenied { .. } => self.permission_denials += 1,
            AgentEvent::Finished(finished) => {
                let mut finished = (**finished).clone();
                if finished.result.is_none() {
                    finished.result = self.last_text.clone();
                }
                if self.session_id.is_none() {
                    self.session_id = finished.session_id.clone();
                }
                self.finished = Some(finished);
            }
            // A retry's words are kept with the errors: a limit may be said in them.
            AgentEvent::Failed { message } | AgentEvent::Retrying { message } => {
                self.failures.push(message.clone())
            }
            AgentEvent::LimitReached { .. } => {}
            AgentEvent::Other { .. } => self.other_events += 1,
        }
    }

    /// The agent finished and said it succeeded (the exit code is the caller's to check).
    pub fn succeeded(&self) -> bool {
        self.finished
            .as_ref()
            .is_some_and(|finished| !finished.is_error)
    }

    /// The agent's final words: its result text, else the last assistant text.
    pub fn final_text(&self) -> Option<&str> {
        self.finished
            .as_ref()
            .and_then(|finished| finished.result.as_deref())
            .filter(|text| !text.is_empty())
            .or(self.last_text.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_error_is_said_with_its_status_and_the_agents_message() {
        let claude = Finished {
            is_error: true,
            reason: Some("api_error".into()),
            api_error_status: Some(401),
            result: Some("API Error: 401 invalid x-api-key\nmore".into()),
            ..Finished::default()
        };
        assert_eq!(
            claude.api_error().as_deref(),
            Some("the model API answered 401: API Error: 401 invalid x-api-key")
        );
        let listed = Finished {
            is_error: true,
            api_error_status: Some(529),
            errors: vec!["Overloaded".into()],
            ..Finished::default()
        };
        assert_eq!(
            listed.api_error().as_deref(),
            Some("the model API answered 529: Overloaded")
        );
        let plain_failure = Finished {
            is_error: true,
            reason: Some("max_turns".into()),
            result: Some("stopped".into()),
            ..Finished::default()
        };
        assert_eq!(plain_failure.api_error(), None);
    }

    fn text(text: &str) -> AgentEvent {
        AgentEvent::AssistantText {
            text: text.to_string(),
        }
    }

    #[test]
    fn model_output_and_tools_are_meaningful_noise_is_not() {
        assert!(text("working on it").is_meaningful());
        assert!(!text("  \n").is_meaningful());
        assert!(AgentEvent::ToolCall {
            id: "t".into(),
            name: "Bash".into(),
            input: Value::Null
        }
        .is_meaningful());
        assert!(AgentEvent::ToolResult {
            id: "t".into(),
            is_error: true,
            output_excerpt: String::new(),
            exit_code: Some(1)
        }
        .is_meaningful());
        assert!(AgentEvent::Finished(Box::default()).is_meaningful());
        assert!(!AgentEvent::other("stream_event").is_meaningful());
        assert!(!AgentEvent::SessionStarted {
            session_id: "s".into(),
            model: None
        }
        .is_meaningful());
        assert!(!AgentEvent::Failed {
            message: "Reconnecting… 1/5".into()
        }
        .is_meaningful());
        assert!(!AgentEvent::Retrying {
            message: "Reconnecting... waiting for network".into()
        }
        .is_meaningful());
    }

    #[test]
    fn only_words_that_report_retrying_the_network_are_read_as_retrying() {
        // Codex 0.171.0's stream errors, as it printed them with its proxy refusing.
        for retrying in [
            "Reconnecting... 2/5 (stream disconnected before completion: URL error: Proxy connection failed: HTTP CONNECT failed with status 403)",
            "Reconnecting... waiting for network (Connection failed: error sending request)",
            "reconnecting… 1/5",
            "stream error: error sending request for url (https://api.openai.com/v1/responses); retrying 1/5 in 203ms…",
            "  Waiting for network...",
        ] {
            assert!(reports_retrying(retrying), "{retrying}");
        }
        for working in [
            "[STATUS:investigation] Reconnecting the cache layer",
            "I fixed the reconnecting bug",
            "stream error: unexpected status 400 Bad Request",
            "error sending request",
            "",
        ] {
            assert!(!reports_retrying(working), "{working}");
        }
    }

    #[test]
    fn protocol_lines_are_found_inside_assistant_text() {
        let event =
            text("Wrote out.txt.\n[DONE:pr_ready] summary=x\n  [STATUS:tests] ok\nnot [DONE:x]");
        assert_eq!(
            event.protocol_lines(),
            vec!["[DONE:pr_ready] summary=x", "[STATUS:tests] ok"]
        );
        assert!(is_protocol_line("[ESCALATE:scope_expansion] TabBar"));
        assert!(is_protocol_line("[REQUEST:run_tests] scheme=\"x\""));
        assert!(!is_protocol_line("[ACKNOWLEDGED: won't fix]"));
        assert!(!is_protocol_line("DONE"));
    }

    #[test]
    fn excerpts_cut_at_a_character_boundary() {
        assert_eq!(excerpt("short", 10), "short");
        let cut = excerpt("ééé", 3);
        assert_eq!(cut, "é… [4 more bytes]");
    }

    #[test]
    fn the_summary_takes_the_last_text_as_the_result_when_the_agent_gives_none() {
        let mut summary = Summary::default();
        for event in [
            AgentEvent::SessionStarted {
                session_id: "thread-1".into(),
                model: None,
            },
            text("first"),
            text("[DONE:pr_ready] summary=x"),
            AgentEvent::Finished(Box::default()),
        ] {
            summary.observe(&event);
        }
        assert!(summary.succeeded());
        assert_eq!(summary.session_id.as_deref(), Some("thread-1"));
        assert_eq!(summary.final_text(), Some("[DONE:pr_ready] summary=x"));
        assert_eq!(
            summary.finished.unwrap().result.as_deref(),
            Some("[DONE:pr_ready] summary=x")
        );
    }

    #[test]
    fn without_a_final_event_nothing_succeeded() {
        let mut summary = Summary::default();
        summary.observe(&text("[DONE:pr_ready]"));
        assert!(!summary.succeeded());
    }

    #[test]
    fn events_round_trip_through_json() {
        let event = AgentEvent::ToolCall {
            id: "toolu_1".into(),
            name: "Bash".into(),
            input: serde_json::json!({"command": "ls"}),
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["event"], "tool_call");
        assert_eq!(serde_json::from_value::<AgentEvent>(json).unwrap(), event);
    }
}

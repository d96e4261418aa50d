//! A scripted model server: the real Claude Code and Codex CLIs run offline against it, so
//! a test decides every model reply and can read every request the CLI made.
//!
//! It speaks two wire formats, each in its own module below: the Anthropic Messages API
//! (`POST /v1/messages`, SSE) for Claude Code and the OpenAI Responses API
//! (`POST /v1/responses`, SSE) for Codex. Anything else gets a 404 and is recorded, so a
//! test can see a CLI reaching for something the server does not serve. The shapes were
//! checked against Claude Code 2.1.332 and codex-cli 0.171.0, the versions that
//! `.ci/install-agent-clis` pins; `real_agents.rs` proves them.
//!
//! The script is a list of turns, and the turn a request gets is the number of assistant
//! turns already in its history, not the number of requests so far: a retried request gets
//! the same turn again and a resumed session carries on where it left off. Past the end of
//! the script every request gets [`EXHAUSTED_TEXT`], a final answer, so a run always ends
//! (repeating a last `Bash` turn would loop until the CLI's turn limit).
//!
//! What it must never do: reach the network. It listens on 127.0.0.1 only, opens no
//! connection of its own, and the settings it hands out ([`ModelServer::claude_env`],
//! [`ModelServer::codex_config`]) point the CLIs at loopback and switch off the traffic they
//! would otherwise send elsewhere (telemetry, update checks, plugin sync). Nor may it panic
//! on what a client sends: a body it cannot read gets an API-shaped 400.

use std::future::IntoFuture;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::oneshot;

/// One scripted model reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Turn {
    /// A final answer: text and no tool call, so the CLI ends its turn.
    Text(String),
    /// One shell command (Claude's `Bash` tool, Codex's `exec_command`), maybe after text.
    Bash {
        /// The shell command line, run as the CLI runs its shell tool.
        command: String,
        /// Text the model "says" in the same turn, before the call.
        text_before: Option<String>,
    },
    /// An HTTP error with the API's own error body.
    ApiError(u16),
}

impl Turn {
    /// A [`Turn::Text`].
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(text.into())
    }

    /// A [`Turn::Bash`] with no text before the call.
    pub fn bash(command: impl Into<String>) -> Self {
        Self::Bash {
            command: command.into(),
            text_before: None,
        }
    }
}

/// The final answer given to every request past the end of the script.
pub const EXHAUSTED_TEXT: &str = "[DONE:implemented] script exhausted";

/// The answer to Claude Code's side calls (see [`Served::Auxiliary`]).
pub const AUXILIARY_TEXT: &str = "Scripted session";

/// The API key the CLIs are given; the server accepts any.
pub const TEST_API_KEY: &str = "test-key";

/// The variable that Codex's provider in [`ModelServer::codex_config`] reads its key from.
pub const CODEX_KEY_ENV: &str = "SCRIPTED_MODEL_KEY";

/// How the server answered one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Served {
    /// The script's turn at this index (the number of assistant turns in the history).
    Turn(usize),
    /// [`EXHAUSTED_TEXT`]: the history held this many assistant turns, the script fewer.
    Exhausted(usize),
    /// A Claude Code side call (no tools offered, or a `max_tokens: 1` probe): answered
    /// with [`AUXILIARY_TEXT`] and not counted as a turn of the script.
    Auxiliary,
    /// A body that is not the API's request shape: a 400.
    BadRequest,
    /// Any other method or path: a 404.
    NotFound,
    /// A 429 with `retry-after` instead of the script's turn at this index (see
    /// [`ModelServer::limit_turn`]).
    UsageLimit(usize),
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Request {
    /// `POST`, `GET`, …
    pub method: String,
    /// The path without its query (Claude Code adds `?beta=true`).
    pub path: String,
    /// The parsed JSON body; `Null` when it was empty or not JSON.
    pub body: Value,
    /// What the server answered.
    pub served: Served,
}

impl Request {
    /// The tool outputs this request carries back to the model, oldest first.
    pub fn tool_results(&self) -> Vec<String> {
        match self.path.as_str() {
            claude::PATH => claude::tool_results(&self.body),
            codex::PATH => codex::tool_results(&self.body),
            _ => Vec::new(),
        }
    }

    /// The text of the user messages in this request's history, oldest first.
    pub fn user_texts(&self) -> Vec<String> {
        match self.path.as_str() {
            claude::PATH => claude::user_texts(&self.body),
            codex::PATH => codex::user_texts(&self.body),
            _ => Vec::new(),
        }
    }
}

/// A running server; it stops when dropped.
pub struct ModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    script: Vec<Turn>,
    requests: Mutex<Vec<Request>>,
    /// Turns answered with a usage limit first: (turn, times left, retry-after seconds).
    limits: Mutex<Vec<(usize, u32, u64)>>,
}

impl Shared {
    fn requests(&self) -> MutexGuard<'_, Vec<Request>> {
        // Nothing panics while holding the lock; should a test thread do so anyway, the
        // list is still whole.
        self.requests.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the request for turn `done` meets a usage limit (once less often from now):
    /// its `retry-after`, in seconds.
    fn limited(&self, done: usize) -> Option<u64> {
        let mut limits = self.limits.lock().unwrap_or_else(|e| e.into_inner());
        let (_, left, retry_after) = limits
            .iter_mut()
            .find(|(turn, left, _)| *turn == done && *left > 0)?;
        *left -= 1;
        Some(*retry_after)
    }

    /// The script's turn for a history holding `done` assistant turns.
    fn turn(&self, done: usize) -> (Served, Turn) {
        match self.script.get(done) {
            Some(turn) => (Served::Turn(done), turn.clone()),
            None => (Served::Exhausted(done), Turn::text(EXHAUSTED_TEXT)),
        }
    }
}

impl ModelServer {
    /// Serves `script` on 127.0.0.1 at a free port, from a thread with its own runtime, so
    /// plain `#[test]` functions can use it.
    pub fn start(script: Vec<Turn>) -> Self {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .expect("bind the model server on loopback");
        listener
            .set_nonblocking(true)
            .expect("make the model server's socket non-blocking");
        let addr = listener.local_addr().expect("model server address");
        let shared = Arc::new(Shared {
            script,
            requests: Mutex::new(Vec::new()),
            limits: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("model-server-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("model server runtime");
                runtime.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("model server listener");
                    // Not a graceful shutdown: a CLI still holding a keep-alive connection
                    // must not keep the test waiting. Dropping the runtime ends every
                    // connection task.
                    tokio::select! {
                        _ = axum::serve(listener, app).into_future() => {}
                        _ = stopped => {}
                    }
                });
            })
            .expect("spawn the model server thread");
        Self {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The first `times` requests for script turn `turn` are refused the way the Anthropic
    /// API refuses an account over its limit: a 429 `rate_limit_error` with `retry-after:
    /// retry_after` (seconds). Later ones get the turn. Claude Code only.
    pub fn limit_turn(&self, turn: usize, times: u32, retry_after: u64) {
        self.shared
            .limits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((turn, times, retry_after));
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash or `/v1`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in the order they arrived.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests().clone()
    }

    /// The requests that were answered from the script (a turn, or [`EXHAUSTED_TEXT`]).
    pub fn model_requests(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| matches!(r.served, Served::Turn(_) | Served::Exhausted(_)))
            .collect()
    }

    /// The environment that points Claude Code here; the caller adds `PATH` and a fresh
    /// `HOME`, `CLAUDE_CONFIG_DIR` and `TMPDIR` per run.
    pub fn claude_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("ANTHROPIC_BASE_URL", self.url()),
            ("ANTHROPIC_API_KEY", TEST_API_KEY.to_owned()),
            // Without these it also calls GET /api/hello here and sends telemetry, update
            // checks and error reports to hosts that are not loopback.
            ("DISABLE_TELEMETRY", "1".to_owned()),
            ("DISABLE_AUTOUPDATER", "1".to_owned()),
            ("DISABLE_ERROR_REPORTING", "1".to_owned()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
            // A retry would get the same scripted turn, so a 5xx or 529 fails at once
            // instead of after backoff (up to 10 tries over minutes).
            ("CLAUDE_CODE_MAX_RETRIES", "0".to_owned()),
        ]
    }

    /// A `config.toml` for `CODEX_HOME` that points Codex here, never asks for approval and
    /// runs commands unsandboxed; use it with [`ModelServer::codex_env`].
    pub fn codex_config(&self) -> String {
        // `model` must be in Codex's bundled catalog: an unknown name changes its tool set.
        // The retry limits make a scripted 5xx fail at once instead of after backoff (a
        // retry would get the same turn anyway). `plugins = false` stops the sync that
        // looks up github.com; analytics would be sent to OpenAI.
        format!(
            r#"model = "gpt-5.5"
model_provider = "scripted"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.scripted]
name = "scripted model server"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "{CODEX_KEY_ENV}"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false

[analytics]
enabled = false
"#,
            url = self.url()
        )
    }

    /// The environment Codex needs besides `PATH`, `HOME`, `CODEX_HOME` and `TMPDIR`.
    pub fn codex_env(&self) -> Vec<(&'static str, String)> {
        vec![(CODEX_KEY_ENV, TEST_API_KEY.to_owned())]
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Request bodies are a few hundred KiB at most; this only bounds a runaway client.
const BODY_LIMIT: usize = 64 * 1024 * 1024;

async fn handle(State(shared): State<Arc<Shared>>, request: axum::extract::Request) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let (served, body, response) = match axum::body::to_bytes(request.into_body(), BODY_LIMIT).await
    {
        Ok(bytes) => answer(&shared, &method, &path, &bytes),
        Err(e) => (
            Served::BadRequest,
            Value::Null,
            plain(StatusCode::BAD_REQUEST, format!("unreadable body: {e}")),
        ),
    };
    shared.requests().push(Request {
        method: method.to_string(),
        path,
        body,
        served,
    });
    response
}

fn answer(shared: &Shared, method: &Method, path: &str, bytes: &[u8]) -> (Served, Value, Response) {
    let parsed = serde_json::from_slice::<Value>(bytes);
    let (served, response) = match (method, path, &parsed) {
        (&Method::POST, claude::PATH, Ok(body)) => claude::answer(shared, body),
        (&Method::POST, claude::PATH, Err(e)) => (
            Served::BadRequest,
            claude::error(400, &format!("body is not JSON: {e}")),
        ),
        (&Method::POST, codex::PATH, Ok(body)) => codex::answer(shared, body),
        (&Method::POST, codex::PATH, Err(e)) => (
            Served::BadRequest,
            codex::error(400, &format!("body is not JSON: {e}")),
        ),
        _ => (
            Served::NotFound,
            plain(StatusCode::NOT_FOUND, format!("no {method} {path} here")),
        ),
    };
    (served, parsed.unwrap_or(Value::Null), response)
}

fn plain(status: StatusCode, text: String) -> Response {
    (status, text).into_response()
}

fn json_response(status: u16, body: &Value) -> Response {
    // A script may name any number; one outside HTTP's range becomes a 500.
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The whole SSE stream in one body: the CLIs parse it as they parse one sent event by
/// event, and pacing it would only slow the tests down.
fn sse(events: &[Value]) -> Response {
    let mut text = String::new();
    for event in events {
        let name = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        text.push_str(&format!("event: {name}\ndata: {event}\n\n"));
    }
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from(text))
        .unwrap_or_else(|e| plain(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// An id unique within this test process, which may run several servers over one session
/// (a resumed run's history must not hold two tool calls with one id).
fn next_id(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{:08x}{n:012x}", std::process::id())
}

/// The text of a message's content: a plain string, or the `text` of its parts.
fn content_text(content: Option<&Value>) -> Vec<String> {
    match content {
        Some(Value::String(text)) => vec![text.clone()],
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The Anthropic Messages API, as Claude Code uses it.
mod claude {
    use super::*;

    pub const PATH: &str = "/v1/messages";

    pub fn answer(shared: &Shared, body: &Value) -> (Served, Response) {
        let Some(messages) = body.get("messages").and_then(Value::as_array) else {
            return (
                Served::BadRequest,
                error(400, "messages: expected an array"),
            );
        };
        let model = body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("claude-scripted");
        if is_auxiliary(body) {
            return (
                Served::Auxiliary,
                stream(&Turn::text(AUXILIARY_TEXT), model),
            );
        }
        let done = assistant_turns(messages);
        if let Some(retry_after) = shared.limited(done) {
            let mut response = error(
                429,
                "This request would exceed your account's rate limit. Please try again later.",
            );
            if let Ok(value) = header::HeaderValue::from_str(&retry_after.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            return (Served::UsageLimit(done), response);
        }
        let (served, turn) = shared.turn(done);
        let response = match &turn {
            Turn::ApiError(status) => error(*status, "scripted error"),
            _ => stream(&turn, model),
        };
        (served, response)
    }

    /// Its agent loop always offers tools; its side calls (session titles, quota probes
    /// with `max_tokens: 1`) do not. 2.1.332 in `-p` mode with `ModelServer::claude_env`
    /// makes no side call at all: this keeps other versions and settings from eating the
    /// script's turns.
    fn is_auxiliary(body: &Value) -> bool {
        let no_tools = body
            .get("tools")
            .and_then(Value::as_array)
            .is_none_or(|tools| tools.is_empty());
        no_tools || body.get("max_tokens").and_then(Value::as_u64) == Some(1)
    }

    /// One assistant message per model turn; a run of them counts once in case a version
    /// splits a turn's blocks. The `system` messages it puts between turns do not count.
    fn assistant_turns(messages: &[Value]) -> usize {
        let mut turns = 0;
        let mut previous_was_assistant = false;
        for message in messages {
            let is_assistant = message.get("role").and_then(Value::as_str) == Some("assistant");
            if is_assistant && !previous_was_assistant {
                turns += 1;
            }
            previous_was_assistant = is_assistant;
        }
        turns
    }

    fn stream(turn: &Turn, model: &str) -> Response {
        let (blocks, stop_reason) = match turn {
            Turn::Text(text) => (vec![json!({"type": "text", "text": text})], "end_turn"),
            Turn::Bash {
                command,
                text_before,
            } => {
                let mut blocks: Vec<Value> = text_before
                    .iter()
                    .map(|text| json!({"type": "text", "text": text}))
                    .collect();
                blocks.push(json!({
                    "type": "tool_use",
                    "id": next_id("toolu"),
                    "name": "Bash",
                    "input": {"command": command},
                }));
                (blocks, "tool_use")
            }
            // Answered by `error` instead; never streamed.
            Turn::ApiError(_) => (Vec::new(), "end_turn"),
        };
        let mut events = vec![json!({
            "type": "message_start",
            "message": {
                "id": next_id("msg"),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {
                    "input_tokens": 100,
                    "output_tokens": 1,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            },
        })];
        for (index, block) in blocks.iter().enumerate() {
            // Each block opens empty and arrives as one delta, as the API streams it.
            let (start, delta) = if block["type"] == "tool_use" {
                let mut start = block.clone();
                start["input"] = json!({});
                let input = block["input"].to_string();
                (
                    start,
                    json!({"type": "input_json_delta", "partial_json": input}),
                )
            } else {
                let text = block["text"].clone();
                (
                    json!({"type": "text", "text": ""}),
                    json!({"type": "text_delta", "text": text}),
                )
            };
            events.push(
                json!({"type": "content_block_start", "index": index, "content_block": start}),
            );
            events.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
            events.push(json!({"type": "content_block_stop", "index": index}));
        }
        events.push(json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": 20},
        }));
        events.push(json!({"type": "message_stop"}));
        sse(&events)
    }

    pub fn error(status: u16, message: &str) -> Response {
        let kind = match status {
            400 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        };
        json_response(
            status,
            &json!({"type": "error", "error": {"type": kind, "message": message}}),
        )
    }

    fn messages(body: &Value) -> &[Value] {
        body.get("messages")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    fn user_parts(body: &Value) -> impl Iterator<Item = &Value> {
        messages(body)
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .filter_map(|m| m.get("content").and_then(Value::as_array))
            .flatten()
    }

    pub fn tool_results(body: &Value) -> Vec<String> {
        user_parts(body)
            .filter(|part| part.get("type").and_then(Value::as_str) == Some("tool_result"))
            .map(|part| content_text(part.get("content")).join("\n"))
            .collect()
    }

    pub fn user_texts(body: &Value) -> Vec<String> {
        messages(body)
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .flat_map(|m| match m.get("content") {
                // A string is the whole message; in an array only text parts are text
                // (tool results are parts too).
                Some(Value::String(text)) => vec![text.clone()],
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|part| part.get("text").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect(),
                _ => Vec::new(),
            })
            .collect()
    }
}

/// The OpenAI Responses API, as Codex uses it.
mod codex {
    use super::*;

    pub const PATH: &str = "/v1/responses";

    pub fn answer(shared: &Shared, body: &Value) -> (Served, Response) {
        let Some(input) = body.get("input").and_then(Value::as_array) else {
            return (Served::BadRequest, error(400, "input: expected an array"));
        };
        let model = body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("gpt-scripted");
        let (served, turn) = shared.turn(assistant_turns(input));
        let response = match &turn {
            Turn::ApiError(status) => error(*status, "scripted error"),
            _ => stream(&turn, model),
        };
        (served, response)
    }

    /// Codex replays a turn's output as separate items (an assistant message, then a
    /// function_call, maybe reasoning), so one model turn is a run of such items; a tool
    /// output or a user message ends it.
    fn assistant_turns(input: &[Value]) -> usize {
        let mut turns = 0;
        let mut previous_was_output = false;
        for item in input {
            let is_output = is_model_output(item);
            if is_output && !previous_was_output {
                turns += 1;
            }
            previous_was_output = is_output;
        }
        turns
    }

    fn is_model_output(item: &Value) -> bool {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => item.get("role").and_then(Value::as_str) == Some("assistant"),
            Some(
                "reasoning"
                | "function_call"
                | "custom_tool_call"
                | "local_shell_call"
                | "web_search_call"
                | "tool_search_call"
                | "image_generation_call",
            ) => true,
            _ => false,
        }
    }

    fn stream(turn: &Turn, model: &str) -> Response {
        let message = |text: &str| {
            json!({
                "type": "message",
                "id": next_id("msg"),
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            })
        };
        let items = match turn {
            Turn::Text(text) => vec![message(text)],
            Turn::Bash {
                command,
                text_before,
            } => {
                let mut items: Vec<Value> = text_before.iter().map(|t| message(t)).collect();
                items.push(json!({
                    "type": "function_call",
                    "id": next_id("fc"),
                    "call_id": next_id("call"),
                    "name": "exec_command",
                    // The Responses API carries arguments as a JSON string.
                    "arguments": json!({"cmd": command}).to_string(),
                    "status": "completed",
                }));
                items
            }
            // Answered by `error` instead; never streamed.
            Turn::ApiError(_) => Vec::new(),
        };
        let id = next_id("resp");
        let response = |status: &str, output: &[Value]| {
            json!({
                "id": id,
                "object": "response",
                "status": status,
                "model": model,
                "output": output,
            })
        };
        let mut events =
            vec![json!({"type": "response.created", "response": response("in_progress", &[])})];
        for (index, item) in items.iter().enumerate() {
            events.push(
                json!({"type": "response.output_item.added", "output_index": index, "item": item}),
            );
            // Codex builds its history from the `done` items; `added` only opens them.
            events.push(
                json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            );
        }
        let mut completed = response("completed", &items);
        completed["usage"] = json!({
            "input_tokens": 100,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 120,
        });
        events.push(json!({"type": "response.completed", "response": completed}));
        sse(&events)
    }

    pub fn error(status: u16, message: &str) -> Response {
        let (kind, code) = match status {
            429 => ("requests", json!("rate_limit_exceeded")),
            500.. => ("server_error", Value::Null),
            _ => ("invalid_request_error", Value::Null),
        };
        json_response(
            status,
            &json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
        )
    }

    fn items<'a>(body: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        body.get("input")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter(move |item| item.get("type").and_then(Value::as_str) == Some(kind))
    }

    pub fn tool_results(body: &Value) -> Vec<String> {
        items(body, "function_call_output")
            .chain(items(body, "custom_tool_call_output"))
            .map(|item| match item.get("output") {
                Some(Value::String(text)) => text.clone(),
                other => content_text(other).join("\n"),
            })
            .collect()
    }

    pub fn user_texts(body: &Value) -> Vec<String> {
        items(body, "message")
            .filter(|item| item.get("role").and_then(Value::as_str) == Some("user"))
            .flat_map(|item| content_text(item.get("content")))
            .collect()
    }
}

/// The server on its own, without the CLIs: what a client can get wrong.
mod self_tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    /// Sends one request; returns the status code and the body.
    fn send(server: &ModelServer, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(server.addr).expect("connect to the model server");
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            server.addr,
            body.len()
        )
        .expect("send a request");
        let mut reply = String::new();
        stream.read_to_string(&mut reply).expect("read the reply");
        let status = reply
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("no status line in {reply:?}"));
        let body = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        (status, body.to_owned())
    }

    fn data_lines(sse: &str) -> Vec<Value> {
        sse.lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .map(|data| serde_json::from_str(data).expect("SSE data is JSON"))
            .collect()
    }

    #[test]
    fn malformed_bodies_get_a_400_and_unknown_paths_a_404_and_all_are_recorded() {
        let server = ModelServer::start(vec![Turn::text("unused")]);
        let (status, body) = send(&server, "POST", "/v1/messages", "{not json");
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("invalid_request_error"), "{body}");
        let (status, body) = send(&server, "POST", "/v1/responses", r#"{"input": 3}"#);
        assert_eq!(status, 400, "{body}");
        assert!(body.contains(r#""error""#), "{body}");
        let (status, _) = send(&server, "GET", "/api/hello", "");
        assert_eq!(status, 404);
        let (status, _) = send(&server, "GET", "/v1/messages", "");
        assert_eq!(status, 404);

        let served: Vec<_> = server.requests().into_iter().map(|r| r.served).collect();
        assert_eq!(
            served,
            [
                Served::BadRequest,
                Served::BadRequest,
                Served::NotFound,
                Served::NotFound
            ]
        );
        let requests = server.requests();
        assert_eq!(requests[1].body, json!({"input": 3}));
        assert_eq!(
            (requests[2].method.as_str(), requests[2].path.as_str()),
            ("GET", "/api/hello")
        );
    }

    #[test]
    fn a_limited_turn_is_refused_with_retry_after_then_served() {
        let server = ModelServer::start(vec![Turn::text("first")]);
        server.limit_turn(0, 1, 7);
        let body = json!({"model": "m", "tools": [{"name": "Bash"}],
            "messages": [{"role": "user", "content": "go"}]})
        .to_string();
        let mut stream = TcpStream::connect(server.addr).expect("connect to the model server");
        write!(
            stream,
            "POST /v1/messages HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            server.addr,
            body.len()
        )
        .expect("send a request");
        let mut reply = String::new();
        stream.read_to_string(&mut reply).expect("read the reply");
        assert!(reply.starts_with("HTTP/1.1 429"), "{reply}");
        assert!(
            reply.to_ascii_lowercase().contains("retry-after: 7"),
            "{reply}"
        );
        assert!(reply.contains("rate_limit_error"), "{reply}");
        // The same turn asked again is served.
        let (status, answer) = send(&server, "POST", "/v1/messages", &body);
        assert_eq!(status, 200);
        assert!(answer.contains(r#""text":"first""#), "{answer}");
        let served: Vec<_> = server.requests().into_iter().map(|r| r.served).collect();
        assert_eq!(served, [Served::UsageLimit(0), Served::Turn(0)]);
    }

    #[test]
    fn the_turn_is_the_number_of_assistant_turns_in_the_history() {
        let server = ModelServer::start(vec![
            Turn::bash("true"),
            Turn::text("second"),
            Turn::ApiError(529),
        ]);
        let claude = |messages: Value| {
            json!({"model": "m", "tools": [{"name": "Bash"}], "messages": messages}).to_string()
        };
        let user = json!({"role": "user", "content": "go"});
        let assistant = json!({"role": "assistant", "content": [{"type": "text", "text": "ok"}]});
        let system = json!({"role": "system", "content": "env"});

        let (status, body) = send(
            &server,
            "POST",
            "/v1/messages?beta=true",
            &claude(json!([user, system])),
        );
        assert_eq!(status, 200);
        let events = data_lines(&body);
        assert_eq!(events[0]["type"], "message_start");
        let tool_use = events
            .iter()
            .find(|e| e["type"] == "content_block_start")
            .expect("a content block");
        assert_eq!(tool_use["content_block"]["name"], "Bash");
        assert!(events
            .iter()
            .any(|e| e["delta"]["partial_json"] == r#"{"command":"true"}"#));
        assert_eq!(
            events.last().map(|e| e["type"].clone()),
            Some(json!("message_stop"))
        );

        // One turn split over two assistant messages still counts once.
        let history = json!([user, system, assistant, assistant, user]);
        let (_, body) = send(&server, "POST", "/v1/messages", &claude(history));
        assert!(body.contains(r#""text":"second""#), "{body}");

        let history = json!([user, assistant, user, assistant, user]);
        let (status, body) = send(&server, "POST", "/v1/messages", &claude(history));
        assert_eq!(status, 529);
        assert!(body.contains("overloaded_error"), "{body}");

        let history = json!([user, assistant, user, assistant, user, assistant, user]);
        let (_, body) = send(&server, "POST", "/v1/messages", &claude(history));
        assert!(body.contains(EXHAUSTED_TEXT), "{body}");

        // No tools: a side call, answered without touching the script.
        let side = json!({"model": "m", "messages": [user]}).to_string();
        let (_, body) = send(&server, "POST", "/v1/messages", &side);
        assert!(body.contains(AUXILIARY_TEXT), "{body}");

        // Codex: text, a function call and its output are one turn.
        let codex = json!({"model": "m", "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
            {"type": "reasoning", "summary": []},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
            {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "exit 0"},
        ]})
        .to_string();
        let (status, body) = send(&server, "POST", "/v1/responses", &codex);
        assert_eq!(status, 200);
        let events = data_lines(&body);
        let completed = events.last().expect("events");
        assert_eq!(completed["type"], "response.completed");
        assert_eq!(
            completed["response"]["output"][0]["content"][0]["text"],
            "second"
        );
        assert!(completed["response"]["id"].is_string());

        let served: Vec<_> = server.requests().into_iter().map(|r| r.served).collect();
        assert_eq!(
            served,
            [
                Served::Turn(0),
                Served::Turn(1),
                Served::Turn(2),
                Served::Exhausted(3),
                Served::Auxiliary,
                Served::Turn(1)
            ]
        );
        let codex_request = &server.requests()[5];
        assert_eq!(codex_request.tool_results(), ["exit 0"]);
        assert_eq!(codex_request.user_texts(), ["go"]);
        assert_eq!(server.requests()[1].user_texts(), ["go", "go"]);
    }
}

//! A stateful fake Zulip for the tests: the paths of the real API under `/api/v1`, with
//! bodies shaped like `../shared/fixtures/http/zulip/` and changed as its state changes.
//!
//! [`FakeZulip::start`] is seeded with the fixtures' story: realm `lumen`, channel
//! `executor`, and the four messages of `get_messages_topic.json` in topic
//! [`TOPIC`]. It reproduces what the fixtures README lists: HTTP basic auth with a bot's
//! email and API key; form-encoded parameters with `narrow` and `event_types` as JSON text;
//! the topic sent as `topic` and answered as `subject`; `narrow` operators `channel` (or
//! `stream`) and `topic`; `{result:"error", msg, code, …extra}` on a 4xx
//! (`STREAM_DOES_NOT_EXIST` with `stream`, `BAD_EVENT_QUEUE_ID` with `queue_id`); the
//! `X-RateLimit-*` headers on every answer, and 429 `RATE_LIMIT_HIT` with `Retry-After` and
//! the `retry-after` body key. A post is stored (ids go on from the fixtures', 48217 first)
//! and read back through `GET /messages` and through every event queue whose narrow it
//! matches.
//!
//! Simpler than Zulip in two ways: `GET /messages` knows only `anchor=newest`, and
//! `GET /events` does not block: with nothing new it answers at once with a `heartbeat`.
//!
//! It records every request (method, path, query, body, and the `Authorization` value apart)
//! so a test can prove where the API key went. Faults (500, 429) are served for the next N
//! requests; queues can be expired.
//!
//! What it must never do: reach the network (it listens on 127.0.0.1 and opens nothing), or
//! panic on what a client sends: an unreadable request gets a 400.

use std::collections::{HashMap, VecDeque};
use std::future::IntoFuture;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, Method, StatusCode};
use axum::response::Response;
use axum::Router;
use executor::chat::zulip::ZulipSettings;
use executor::forge::github::Secret;
use serde_json::{json, Value};
use tokio::sync::oneshot;

/// The bot the fake accepts: the orchestrator's persona in the fixtures.
pub const BOT_EMAIL: &str = "executor-bot@lumen.zulipchat.com";
pub const BOT_NAME: &str = "Executor";
pub const BOT_ID: u64 = 31;
/// Its API key; distinctive, so a test can search for it.
pub const API_KEY: &str = "FAKEzulipKEY9c2e7a41b8d3f6";
pub const STREAM: &str = "executor";
pub const STREAM_ID: u64 = 12;
pub const TOPIC: &str = "run 42 · fix/tab-preview-stuck";
pub const OWNER_NAME: &str = "Marek Kowalski";
pub const OWNER_ID: u64 = 8;
pub const OWNER_EMAIL: &str = "user8@lumen.zulipchat.com";

/// A fixture file's text.
pub fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/http/zulip")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

pub fn fixture_json(name: &str) -> Value {
    serde_json::from_str(&fixture(name)).unwrap_or_else(|e| panic!("parse {name}: {e}"))
}

/// A failure served instead of the real answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// 429 `RATE_LIMIT_HIT` with this `Retry-After` (seconds, a float as Zulip sends).
    RateLimited { retry_after: f64 },
    /// This status with a Zulip-shaped error body.
    Status(u16),
}

/// One request as the fake saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// Below the host, `/api/v1` included.
    pub path: String,
    pub query: String,
    pub body: String,
    /// The `Authorization` header, kept apart so tests can say where the key went.
    pub authorization: Option<String>,
    pub status: u16,
}

impl Recorded {
    /// A query or form parameter, decoded.
    pub fn param(&self, name: &str) -> Option<String> {
        form_param(&self.query, name).or_else(|| form_param(&self.body, name))
    }
}

fn form_param(text: &str, name: &str) -> Option<String> {
    url::form_urlencoded::parse(text.as_bytes())
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.into_owned())
}

struct Queue {
    stream: Option<String>,
    events: Vec<Value>,
    expired: bool,
}

struct StateData {
    streams: Vec<String>,
    messages: Vec<Value>,
    next_message_id: u64,
    queues: HashMap<String, Queue>,
    queues_made: u64,
    next_event_id: i64,
    faults: VecDeque<Fault>,
    requests: Vec<Recorded>,
    now: i64,
}

struct Shared {
    state: Mutex<StateData>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, StateData> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running fake; it stops when dropped.
pub struct FakeZulip {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeZulip {
    /// The fixtures' story: channel `executor` with the four messages of the topic.
    pub fn start() -> Self {
        let messages = match fixture_json("get_messages_topic.json")["messages"].take() {
            Value::Array(items) => items,
            _ => Vec::new(),
        };
        let state = StateData {
            streams: vec![STREAM.to_owned()],
            next_message_id: 48217,
            messages,
            queues: HashMap::new(),
            queues_made: 0,
            next_event_id: 0,
            faults: VecDeque::new(),
            requests: Vec::new(),
            now: 1_773_654_500,
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
        });
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .expect("bind the fake Zulip on loopback");
        listener
            .set_nonblocking(true)
            .expect("make the fake Zulip's socket non-blocking");
        let addr = listener.local_addr().expect("fake Zulip address");
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("fake-zulip-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake Zulip runtime");
                runtime.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("fake Zulip listener");
                    tokio::select! {
                        _ = axum::serve(listener, app).into_future() => {}
                        _ = stopped => {}
                    }
                });
            })
            .expect("spawn the fake Zulip thread");
        Self {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:port`, the site a client is given.
    pub fn site(&self) -> url::Url {
        url::Url::parse(&format!("http://{}", self.addr)).expect("fake site URL")
    }

    /// Settings for the fake's bot.
    pub fn settings(&self) -> ZulipSettings {
        ZulipSettings {
            site: self.site(),
            bot_email: BOT_EMAIL.to_owned(),
            api_key: Secret::new(API_KEY),
        }
    }

    /// Serve `fault` instead of the next `n` answers.
    pub fn fail_next(&self, fault: Fault, n: usize) {
        let mut state = self.shared.state();
        state.faults.extend(std::iter::repeat_n(fault, n));
    }

    /// Every queue registered so far answers `BAD_EVENT_QUEUE_ID` from now on.
    pub fn expire_queues(&self) {
        for queue in self.shared.state().queues.values_mut() {
            queue.expired = true;
        }
    }

    /// A message from the owner (a human) in `topic` of `stream`; its id.
    pub fn post_as_owner(&self, stream: &str, topic: &str, content: &str) -> u64 {
        let mut state = self.shared.state();
        store_message(
            &mut state,
            stream,
            topic,
            content,
            (OWNER_ID, OWNER_EMAIL, OWNER_NAME),
        )
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.state().requests.clone()
    }
}

impl Drop for FakeZulip {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Stores a stream message and hands it to every live queue whose narrow matches.
fn store_message(
    state: &mut StateData,
    stream: &str,
    topic: &str,
    content: &str,
    (sender_id, sender_email, sender_name): (u64, &str, &str),
) -> u64 {
    let id = state.next_message_id;
    state.next_message_id += 1;
    state.now += 1;
    let message = json!({
        "avatar_url": null,
        "client": "executor",
        "content": content,
        "content_type": "text/x-markdown",
        "display_recipient": stream,
        "flags": [],
        "id": id,
        "is_me_message": false,
        "reactions": [],
        "recipient_id": 27,
        "sender_email": sender_email,
        "sender_full_name": sender_name,
        "sender_id": sender_id,
        "sender_realm_str": "lumen",
        "stream_id": STREAM_ID,
        "subject": topic,
        "submessages": [],
        "timestamp": state.now,
        "topic_links": [],
        "type": "stream",
    });
    let mut event_message = message.clone();
    if let Some(object) = event_message.as_object_mut() {
        // In events, the flags sit outside the message.
        object.remove("flags");
    }
    let mut next_event_id = state.next_event_id;
    for queue in state.queues.values_mut() {
        if queue.expired || queue.stream.as_deref().is_some_and(|s| s != stream) {
            continue;
        }
        next_event_id += 1;
        queue.events.push(json!({
            "type": "message",
            "message": event_message.clone(),
            "flags": [],
            "id": next_event_id,
        }));
    }
    state.next_event_id = next_event_id;
    state.messages.push(message);
    id
}

fn error_body(msg: &str, code: &str) -> Value {
    json!({"result": "error", "msg": msg, "code": code})
}

/// Standard base64 with padding.
fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn respond(status: u16, body: &Value, retry_after: Option<f64>) -> Response {
    let mut builder = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "application/json")
        .header("X-RateLimit-Limit", "200")
        .header("X-RateLimit-Reset", "1773654508");
    builder = match retry_after {
        Some(seconds) => builder
            .header(header::RETRY_AFTER, seconds.to_string())
            .header("X-RateLimit-Remaining", "0"),
        None => builder.header("X-RateLimit-Remaining", "199"),
    };
    builder
        .body(Body::from(body.to_string()))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

async fn handle(State(shared): State<Arc<Shared>>, request: axum::extract::Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let body = String::from_utf8_lossy(&body).into_owned();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().unwrap_or("").to_owned();
    let authorization = parts
        .headers
        .get(header::AUTHORIZATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let expected = format!(
        "Basic {}",
        base64(format!("{BOT_EMAIL}:{API_KEY}").as_bytes())
    );

    let mut state = shared.state();
    let (status, value, retry_after) = if authorization.as_deref() != Some(expected.as_str()) {
        (401, error_body("Invalid API key", "INVALID_API_KEY"), None)
    } else if let Some(fault) = state.faults.pop_front() {
        match fault {
            Fault::RateLimited { retry_after } => (
                429,
                json!({"result": "error", "msg": "API usage exceeded rate limit",
                       "code": "RATE_LIMIT_HIT", "retry-after": retry_after}),
                Some(retry_after),
            ),
            Fault::Status(status) => (
                status,
                error_body("Internal server error", "BAD_REQUEST"),
                None,
            ),
        }
    } else {
        let (status, value) = route(&mut state, &parts.method, &path, &query, &body);
        (status, value, None)
    };
    state.requests.push(Recorded {
        method: parts.method.to_string(),
        path,
        query,
        body,
        authorization,
        status,
    });
    respond(status, &value, retry_after)
}

fn route(
    state: &mut StateData,
    method: &Method,
    path: &str,
    query: &str,
    body: &str,
) -> (u16, Value) {
    let param = |name: &str| form_param(query, name).or_else(|| form_param(body, name));
    match (method.as_str(), path) {
        ("POST", "/api/v1/messages") => {
            let (Some(kind), Some(to), Some(topic), Some(content)) =
                (param("type"), param("to"), param("topic"), param("content"))
            else {
                return (
                    400,
                    error_body("Missing argument", "REQUEST_VARIABLE_MISSING"),
                );
            };
            if kind != "stream" {
                return (400, error_body("Invalid message type", "BAD_REQUEST"));
            }
            if !state.streams.contains(&to) {
                return (
                    400,
                    json!({"result": "error", "msg": format!("Channel '{to}' does not exist"),
                           "stream": to, "code": "STREAM_DOES_NOT_EXIST"}),
                );
            }
            let id = store_message(state, &to, &topic, &content, (BOT_ID, BOT_EMAIL, BOT_NAME));
            (200, json!({"result": "success", "msg": "", "id": id}))
        }
        ("GET", "/api/v1/messages") => {
            if param("anchor").as_deref() != Some("newest") {
                return (
                    400,
                    error_body("The fake knows only anchor=newest", "BAD_REQUEST"),
                );
            }
            let num_before = param("num_before")
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            let narrow: Vec<Value> = match param("narrow").map(|n| serde_json::from_str(&n)) {
                Some(Ok(Value::Array(terms))) => terms,
                None => Vec::new(),
                _ => return (400, error_body("Invalid narrow", "BAD_REQUEST")),
            };
            let matches = |message: &Value| {
                narrow.iter().all(|term| {
                    let operand = term["operand"].as_str();
                    match term["operator"].as_str() {
                        Some("channel" | "stream") => {
                            message["display_recipient"].as_str() == operand
                        }
                        Some("topic") => message["subject"].as_str() == operand,
                        _ => false,
                    }
                })
            };
            let found: Vec<Value> = state
                .messages
                .iter()
                .filter(|m| matches(m))
                .cloned()
                .collect();
            let skip = found.len().saturating_sub(num_before);
            let window: Vec<Value> = found.into_iter().skip(skip).collect();
            (
                200,
                json!({"result": "success", "msg": "", "messages": window,
                       "found_anchor": false, "found_oldest": skip == 0,
                       "found_newest": true, "history_limited": false,
                       "anchor": 10_000_000_000_000_000u64}),
            )
        }
        ("POST", "/api/v1/register") => {
            let stream = match param("narrow").map(|n| serde_json::from_str::<Value>(&n)) {
                Some(Ok(Value::Array(terms))) => terms
                    .iter()
                    .find(|t| matches!(t[0].as_str(), Some("channel" | "stream")))
                    .and_then(|t| t[1].as_str().map(str::to_owned)),
                None => None,
                _ => return (400, error_body("Invalid narrow", "BAD_REQUEST")),
            };
            state.queues_made += 1;
            let queue_id = format!("a4f1c3e2-9b7d-4e6f-8c5a-{:012x}", state.queues_made);
            state.queues.insert(
                queue_id.clone(),
                Queue {
                    stream,
                    events: Vec::new(),
                    expired: false,
                },
            );
            let max_message_id = state.next_message_id - 1;
            (
                200,
                json!({"result": "success", "msg": "", "queue_id": queue_id,
                       "last_event_id": -1, "zulip_version": "11.0-dev-2218-g6f2b1c7d4e",
                       "zulip_feature_level": 420,
                       "zulip_merge_base": "11.0-dev-2218-g6f2b1c7d4e",
                       "max_message_id": max_message_id}),
            )
        }
        ("GET", "/api/v1/events") => {
            let queue_id = param("queue_id").unwrap_or_default();
            let last = param("last_event_id")
                .and_then(|n| n.parse::<i64>().ok())
                .unwrap_or(-1);
            let next_id = state.next_event_id + 1;
            let Some(queue) = state.queues.get_mut(&queue_id).filter(|q| !q.expired) else {
                return (
                    400,
                    json!({"result": "error", "msg": format!("Bad event queue ID: {queue_id}"),
                           "queue_id": queue_id, "code": "BAD_EVENT_QUEUE_ID"}),
                );
            };
            queue
                .events
                .retain(|e| e["id"].as_i64().is_some_and(|id| id > last));
            let events = if queue.events.is_empty() {
                state.next_event_id = next_id;
                vec![json!({"type": "heartbeat", "id": next_id})]
            } else {
                queue.events.clone()
            };
            (
                200,
                json!({"result": "success", "msg": "", "events": events, "queue_id": queue_id}),
            )
        }
        _ => (404, error_body("Endpoint does not exist", "BAD_REQUEST")),
    }
}

//! A stateful fake Zulip for the tests: the paths of the real API under `/api/v1`, with
//! bodies shaped like `../shared/fixtures/http/zulip/` and changed as its state changes.
//!
//! [`FakeZulip::start`] is seeded with the fixtures' story: realm `lumen`, channel
//! `executor`, the four messages of `get_messages_topic.json` in topic [`TOPIC`], and one
//! bot ([`BOT_EMAIL`], [`API_KEY`]); more bots can be added ([`FakeZulip::add_bot`]). It
//! reproduces what the fixtures README lists: HTTP basic auth with a bot's email and API key
//! (checked against the bot table; a post is stored as from the bot that made it);
//! form-encoded parameters with `narrow` and `event_types` as JSON text;
//! the topic sent as `topic` and answered as `subject`; `narrow` operators `channel` (or
//! `stream`) and `topic`; `{result:"error", msg, code, …extra}` on a 4xx
//! (`STREAM_DOES_NOT_EXIST` with `stream`, `BAD_EVENT_QUEUE_ID` with `queue_id`); the
//! `X-RateLimit-*` headers on every answer, and 429 `RATE_LIMIT_HIT` with `Retry-After` and
//! the `retry-after` body key. A post is stored (ids go on from the fixtures', 48217 first)
//! and read back through `GET /messages` and through every event queue whose narrow it
//! matches. `GET /events` long-polls like Zulip's: with nothing queued it waits up to
//! [`FakeZulip::set_events_wait`] (1 s by default, where Zulip waits about a minute) for a
//! message, which that poll then gets, and otherwise answers a `heartbeat`; `dont_block=true`
//! answers at once (with no events if there are none). [`FakeZulip::outgoing_webhook_payload`]
//! builds what Zulip's outgoing webhook would POST for a stored message. The realm hides
//! real addresses: humans have API emails like [`OWNER_EMAIL`] (`user8@…`), and their real
//! address ([`OWNER_DELIVERY_EMAIL`]) shows only as `delivery_email` in `GET /users`;
//! `GET /users/{email}` knows API emails only (`No such user` otherwise).
//!
//! Simpler than Zulip: `GET /messages` knows only `anchor=newest` (with `num_before`) and
//! a message id (with `num_after`), there is one realm with
//! public streams only (every bot sees every queue), and `rendered_content` renders only
//! mentions, escaping and paragraphs.
//!
//! It records every request (method, path, query, body, and the `Authorization` value apart)
//! so a test can prove where the API key went, and [`FakeZulip::messages`] gives what a topic
//! holds without a request. Faults (500, 429) are served for the next N requests; the whole
//! server can be switched down ([`FakeZulip::set_down`]); queues can be expired.
//!
//! What it must never do: reach the network (it listens on 127.0.0.1 and opens nothing), or
//! panic on what a client sends: an unreadable request gets a 400.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, Method, StatusCode};
use axum::response::Response;
use axum::Router;
use executor::chat::zulip::ZulipSettings;
use executor::forge::github::Secret;
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::fake_server::FakeServer;

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
/// The owner's Zulip API email: the realm hides real addresses, as Zulip does by default.
pub const OWNER_EMAIL: &str = "user8@lumen.zulipchat.com";
/// The owner's real address (`delivery_email`), which `GET /users/{email}` does not know.
pub const OWNER_DELIVERY_EMAIL: &str = "marek.kowalski@lumen.example";
/// The first id [`FakeZulip::add_bot`] gives (the fixtures' users are below it).
pub const FIRST_ADDED_BOT_ID: u64 = 101;
/// How long `GET /events` waits for a message by default.
pub const DEFAULT_EVENTS_WAIT: Duration = Duration::from_secs(1);

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

/// A bot the fake accepts.
#[derive(Clone)]
struct Bot {
    id: u64,
    email: String,
    full_name: String,
    /// `Basic base64(email:key)`, what its requests carry.
    authorization: String,
}

impl Bot {
    fn new(id: u64, email: &str, api_key: &str, full_name: &str) -> Self {
        Self {
            id,
            email: email.to_owned(),
            full_name: full_name.to_owned(),
            authorization: format!("Basic {}", base64(format!("{email}:{api_key}").as_bytes())),
        }
    }
}

/// Someone who can post: the fixtures' people, the bots, and whoever [`FakeZulip::post_as`]
/// made speak. Mentions of them are rendered.
#[derive(Clone)]
struct User {
    id: u64,
    /// The Zulip API email: the real one for a bot, `userN@…` for a human.
    email: String,
    /// The real address of a human, shown by `GET /users` (the bot may see it).
    delivery_email: Option<String>,
    is_bot: bool,
    full_name: String,
    avatar_url: Value,
    /// The `client` their messages show: a bot posts through the API as `executor`, a human
    /// from the app.
    client: String,
}

struct Queue {
    stream: Option<String>,
    events: Vec<Value>,
    expired: bool,
}

struct StateData {
    bots: Vec<Bot>,
    users: Vec<User>,
    next_user_id: u64,
    down: Option<u16>,
    /// `POST /register` answers this status while set.
    register_down: Option<u16>,
    events_wait: Duration,
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
    /// Woken whenever something a waiting `GET /events` cares about changed: a message
    /// stored, queues expired, the server switched down.
    changed: Notify,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, StateData> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running fake; it stops when dropped.
pub struct FakeZulip {
    server: FakeServer,
    shared: Arc<Shared>,
}

impl FakeZulip {
    /// The fixtures' story: channel `executor` with the four messages of the topic.
    pub fn start() -> Self {
        let messages = match fixture_json("get_messages_topic.json")["messages"].take() {
            Value::Array(items) => items,
            _ => Vec::new(),
        };
        let mut users: Vec<User> = Vec::new();
        for message in &messages {
            let Some(id) = message["sender_id"].as_u64() else {
                continue;
            };
            if users.iter().any(|u| u.id == id) {
                continue;
            }
            let email = message["sender_email"].as_str().unwrap_or_default();
            let client = message["client"].as_str().unwrap_or("executor");
            users.push(User {
                id,
                email: email.to_owned(),
                delivery_email: (id == OWNER_ID).then(|| OWNER_DELIVERY_EMAIL.to_owned()),
                is_bot: client == "executor" || !email.starts_with("user"),
                full_name: message["sender_full_name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                avatar_url: message["avatar_url"].clone(),
                client: message["client"].as_str().unwrap_or("executor").to_owned(),
            });
        }
        let state = StateData {
            bots: vec![Bot::new(BOT_ID, BOT_EMAIL, API_KEY, BOT_NAME)],
            users,
            next_user_id: FIRST_ADDED_BOT_ID,
            down: None,
            register_down: None,
            events_wait: DEFAULT_EVENTS_WAIT,
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
            changed: Notify::new(),
        });
        let server = FakeServer::start(
            "Zulip",
            Router::new().fallback(handle).with_state(shared.clone()),
        );
        Self { server, shared }
    }

    /// `http://127.0.0.1:port`, the site a client is given.
    pub fn site(&self) -> url::Url {
        url::Url::parse(&self.server.url()).expect("fake site URL")
    }

    /// Settings for the fake's bot.
    pub fn settings(&self) -> ZulipSettings {
        ZulipSettings {
            site: self.site(),
            bot_email: BOT_EMAIL.to_owned(),
            api_key: Secret::new(API_KEY),
        }
    }

    /// Settings for any bot, such as one from [`FakeZulip::add_bot`].
    pub fn bot_settings(&self, email: &str, api_key: &str) -> ZulipSettings {
        ZulipSettings {
            site: self.site(),
            bot_email: email.to_owned(),
            api_key: Secret::new(api_key),
        }
    }

    /// Registers another bot the fake accepts; its user id. Adding an email again replaces
    /// that bot's key and name and keeps its id.
    pub fn add_bot(&self, email: &str, api_key: &str, full_name: &str) -> u64 {
        let mut state = self.shared.state();
        let id = match state.bots.iter().find(|b| b.email == email) {
            Some(bot) => bot.id,
            None => {
                let id = state.next_user_id;
                state.next_user_id += 1;
                id
            }
        };
        let bot = Bot::new(id, email, api_key, full_name);
        state.bots.retain(|b| b.id != id);
        state.bots.push(bot);
        let user = User {
            id,
            email: email.to_owned(),
            delivery_email: None,
            is_bot: true,
            full_name: full_name.to_owned(),
            avatar_url: Value::Null,
            client: "executor".to_owned(),
        };
        state.users.retain(|u| u.id != id);
        state.users.push(user);
        id
    }

    /// `Some(status)`: every request (even one with bad credentials) is answered `status`
    /// with a Zulip-shaped error body, and recorded; a waiting `GET /events` gets it too.
    /// `None`: normal again.
    pub fn set_down(&self, status: Option<u16>) {
        self.shared.state().down = status;
        self.shared.changed.notify_waiters();
    }

    /// While `Some(status)`, only `POST /register` answers `status` (no new event queue can
    /// be made); `None`: normal again.
    pub fn set_register_down(&self, status: Option<u16>) {
        self.shared.state().register_down = status;
    }

    /// How long `GET /events` waits for a message before it answers a heartbeat.
    pub fn set_events_wait(&self, wait: Duration) {
        self.shared.state().events_wait = wait;
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
        self.shared.changed.notify_waiters();
    }

    /// A message from the owner (a human) in `topic` of `stream`; its id.
    pub fn post_as_owner(&self, stream: &str, topic: &str, content: &str) -> u64 {
        self.post_as((OWNER_ID, OWNER_EMAIL, OWNER_NAME), stream, topic, content)
    }

    /// A message from someone other than the owner, `(user id, email, full name)`, posted
    /// from the app (not through the API); its id. Stored without checks, like
    /// [`FakeZulip::post_as_owner`].
    pub fn post_as(
        &self,
        sender: (u64, &str, &str),
        stream: &str,
        topic: &str,
        content: &str,
    ) -> u64 {
        let (id, email, full_name) = sender;
        let id = {
            let mut state = self.shared.state();
            if !state.users.iter().any(|u| u.id == id) {
                state.users.push(User {
                    id,
                    email: email.to_owned(),
                    delivery_email: None,
                    is_bot: false,
                    full_name: full_name.to_owned(),
                    avatar_url: Value::Null,
                    client: "ZulipFlutter".to_owned(),
                });
            }
            store_message(&mut state, stream, topic, content, sender)
        };
        self.shared.changed.notify_waiters();
        id
    }

    /// The stored messages of `topic` in `stream`, in id order, read from the state (no
    /// request is made or recorded).
    pub fn messages(&self, stream: &str, topic: &str) -> Vec<Value> {
        let state = self.shared.state();
        let mut found: Vec<Value> = state
            .messages
            .iter()
            .filter(|m| {
                m["display_recipient"].as_str() == Some(stream)
                    && m["subject"].as_str() == Some(topic)
            })
            .cloned()
            .collect();
        found.sort_by_key(|m| m["id"].as_u64());
        found
    }

    /// What Zulip's outgoing webhook would POST for the stored message `message_id`, in the
    /// shape of `outgoing_webhook_payload.json`: trigger `mention`, addressed to the first bot
    /// the message mentions (the default bot if it mentions none). Panics if there is no such
    /// message: that is a mistake in the test.
    pub fn outgoing_webhook_payload(&self, message_id: u64, token: &str) -> Value {
        let state = self.shared.state();
        let Some(stored) = state
            .messages
            .iter()
            .find(|m| m["id"].as_u64() == Some(message_id))
        else {
            panic!("the fake Zulip holds no message {message_id}");
        };
        let content = stored["content"].as_str().unwrap_or_default();
        let bot = state
            .bots
            .iter()
            .find(|b| content.contains(&format!("@**{}**", b.full_name)))
            .or_else(|| state.bots.iter().find(|b| b.id == BOT_ID))
            .or_else(|| state.bots.first());
        let (bot_email, bot_full_name) = bot
            .map(|b| (b.email.clone(), b.full_name.clone()))
            .unwrap_or_default();
        let trigger = if stored["type"] == "private" {
            "direct_message"
        } else {
            "mention"
        };
        json!({
            "data": content,
            "trigger": trigger,
            "token": token,
            "message": {
                "subject": stored["subject"],
                "sender_email": stored["sender_email"],
                "timestamp": stored["timestamp"],
                "client": stored["client"],
                "submessages": stored["submessages"],
                "recipient_id": stored["recipient_id"],
                "topic_links": stored["topic_links"],
                "sender_full_name": stored["sender_full_name"],
                "avatar_url": stored["avatar_url"],
                "rendered_content": render(content, &state.users),
                "sender_id": stored["sender_id"],
                "stream_id": stored["stream_id"],
                "content": content,
                "display_recipient": stored["display_recipient"],
                "type": stored["type"],
                "id": stored["id"],
                "is_me_message": stored["is_me_message"],
                "reactions": stored["reactions"],
                "sender_realm_str": stored["sender_realm_str"],
            },
            "bot_email": bot_email,
            "bot_full_name": bot_full_name,
        })
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.state().requests.clone()
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
    // New messages are stamped with the real time, as Zulip does (the fixtures' own
    // messages keep theirs), and never go back in time.
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    state.now = (state.now + 1).max(wall);
    let (avatar_url, client) = state
        .users
        .iter()
        .find(|u| u.id == sender_id)
        .map(|u| (u.avatar_url.clone(), u.client.clone()))
        .unwrap_or((Value::Null, "executor".to_owned()));
    let message = json!({
        "avatar_url": avatar_url,
        "client": client,
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

/// What the fake answers: a status, a body, and a `Retry-After` if any.
type Answer = (u16, Value, Option<f64>);

/// The answer of a server that is down with `status`.
fn down_answer(status: u16) -> Answer {
    match status {
        429 => (
            429,
            json!({"result": "error", "msg": "API usage exceeded rate limit",
                   "code": "RATE_LIMIT_HIT", "retry-after": 1.0}),
            Some(1.0),
        ),
        401 => (401, error_body("Invalid API key", "INVALID_API_KEY"), None),
        _ => {
            let reason = StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("Unavailable");
            (status, error_body(reason, "BAD_REQUEST"), None)
        }
    }
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
    let param = |name: &str| form_param(&query, name).or_else(|| form_param(&body, name));
    let long_poll = parts.method == Method::GET
        && path == "/api/v1/events"
        && param("dont_block").as_deref() != Some("true");

    let immediate: Option<Answer> = {
        let mut state = shared.state();
        let bot = state
            .bots
            .iter()
            .find(|b| authorization.as_deref() == Some(b.authorization.as_str()))
            .cloned();
        let register_down = state
            .register_down
            .filter(|_| parts.method == Method::POST && path == "/api/v1/register");
        if let Some(status) = state.down.or(register_down) {
            Some(down_answer(status))
        } else if let Some(bot) = bot {
            if let Some(fault) = state.faults.pop_front() {
                Some(match fault {
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
                })
            } else if long_poll {
                None
            } else {
                let (status, value) = route(&mut state, &parts.method, &path, &query, &body, &bot);
                Some((status, value, None))
            }
        } else {
            Some((401, error_body("Invalid API key", "INVALID_API_KEY"), None))
        }
    };
    let (status, value, retry_after) = match immediate {
        Some(answer) => answer,
        None => {
            let queue_id = param("queue_id").unwrap_or_default();
            let last = param("last_event_id")
                .and_then(|n| n.parse::<i64>().ok())
                .unwrap_or(-1);
            wait_for_events(&shared, &queue_id, last).await
        }
    };
    if parts.method == Method::POST && status == 200 {
        // A stored message may be what a waiting poll waits for.
        shared.changed.notify_waiters();
    }
    shared.state().requests.push(Recorded {
        method: parts.method.to_string(),
        path,
        query,
        body,
        authorization,
        status,
    });
    respond(status, &value, retry_after)
}

/// A long poll of `GET /events`: the queue's events as soon as there are any, or a heartbeat
/// once the wait is over; the down status if the server goes down meanwhile.
async fn wait_for_events(shared: &Shared, queue_id: &str, last: i64) -> Answer {
    let wait = shared.state().events_wait;
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        // Armed before the state is read, so a change between the read and the wait wakes it.
        let changed = shared.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        {
            let mut state = shared.state();
            if let Some(status) = state.down {
                return down_answer(status);
            }
            if let Some((status, value)) = poll_events(&mut state, queue_id, last, false) {
                return (status, value, None);
            }
        }
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            let mut state = shared.state();
            if let Some(status) = state.down {
                return down_answer(status);
            }
            let (status, value) = poll_events(&mut state, queue_id, last, false)
                .unwrap_or_else(|| heartbeat(&mut state, queue_id));
            return (status, value, None);
        }
    }
}

/// The answer to `GET /events` if there is one now: a bad queue, queued events, or (with
/// `at_once`) an empty list. `None`: nothing yet, wait.
fn poll_events(
    state: &mut StateData,
    queue_id: &str,
    last: i64,
    at_once: bool,
) -> Option<(u16, Value)> {
    let Some(queue) = state.queues.get_mut(queue_id).filter(|q| !q.expired) else {
        return Some((
            400,
            json!({"result": "error", "msg": format!("Bad event queue ID: {queue_id}"),
                   "queue_id": queue_id, "code": "BAD_EVENT_QUEUE_ID"}),
        ));
    };
    queue
        .events
        .retain(|e| e["id"].as_i64().is_some_and(|id| id > last));
    if queue.events.is_empty() && !at_once {
        return None;
    }
    Some((
        200,
        json!({"result": "success", "msg": "", "events": queue.events.clone(), "queue_id": queue_id}),
    ))
}

/// A heartbeat for `queue_id`, with a new event id.
fn heartbeat(state: &mut StateData, queue_id: &str) -> (u16, Value) {
    state.next_event_id += 1;
    let id = state.next_event_id;
    (
        200,
        json!({"result": "success", "msg": "", "events": [{"type": "heartbeat", "id": id}],
               "queue_id": queue_id}),
    )
}

fn route(
    state: &mut StateData,
    method: &Method,
    path: &str,
    query: &str,
    body: &str,
    bot: &Bot,
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
            let id = store_message(
                state,
                &to,
                &topic,
                &content,
                (bot.id, &bot.email, &bot.full_name),
            );
            (200, json!({"result": "success", "msg": "", "id": id}))
        }
        ("GET", "/api/v1/messages") => {
            // `newest`, or a message id to read forward from (`num_after`).
            let after: Option<u64> = match param("anchor").as_deref() {
                Some("newest") => None,
                Some(id) => match id.parse::<u64>() {
                    Ok(id) => Some(id),
                    Err(_) => return (400, error_body("Invalid anchor", "BAD_REQUEST")),
                },
                None => return (400, error_body("Missing 'anchor' argument", "BAD_REQUEST")),
            };
            let num_after = param("num_after")
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            let include_anchor = param("include_anchor").as_deref() != Some("false");
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
                        // Zulip matches topics without regard to case.
                        Some("topic") => message["subject"]
                            .as_str()
                            .zip(operand)
                            .is_some_and(|(a, b)| a.to_lowercase() == b.to_lowercase()),
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
            if let Some(anchor) = after {
                let later: Vec<Value> = found
                    .into_iter()
                    .filter(|m| {
                        let id = m["id"].as_u64().unwrap_or(0);
                        id > anchor || (include_anchor && id == anchor)
                    })
                    .collect();
                let found_newest = later.len() <= num_after;
                let page: Vec<Value> = later.into_iter().take(num_after).collect();
                return (
                    200,
                    json!({"result": "success", "msg": "", "messages": page,
                           "found_anchor": false, "found_oldest": false,
                           "found_newest": found_newest, "history_limited": false,
                           "anchor": anchor}),
                );
            }
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
            // Only `dont_block=true` comes here; a long poll is answered by `wait_for_events`.
            let queue_id = param("queue_id").unwrap_or_default();
            let last = param("last_event_id")
                .and_then(|n| n.parse::<i64>().ok())
                .unwrap_or(-1);
            poll_events(state, &queue_id, last, true).unwrap_or_else(|| heartbeat(state, &queue_id))
        }
        ("GET", "/api/v1/users") => {
            let members: Vec<Value> = state.users.iter().map(user_json).collect();
            (
                200,
                json!({"result": "success", "msg": "", "members": members}),
            )
        }
        ("GET", user) if user.starts_with("/api/v1/users/") => {
            // By the API email only, as Zulip does: a hidden real address is no such user.
            let wanted = percent_decode(&user["/api/v1/users/".len()..]);
            match state
                .users
                .iter()
                .find(|u| u.email.eq_ignore_ascii_case(&wanted))
            {
                Some(found) => (
                    200,
                    json!({"result": "success", "msg": "", "user": user_json(found)}),
                ),
                None => (400, error_body("No such user", "BAD_REQUEST")),
            }
        }
        _ => (404, error_body("Endpoint does not exist", "BAD_REQUEST")),
    }
}

/// A user as `GET /users` lists them (the fields executor could use).
fn user_json(user: &User) -> Value {
    let mut value = json!({
        "user_id": user.id,
        "email": user.email,
        "full_name": user.full_name,
        "is_bot": user.is_bot,
        "is_active": true,
        "avatar_url": user.avatar_url,
    });
    if let (Some(object), Some(real)) = (value.as_object_mut(), &user.delivery_email) {
        object.insert("delivery_email".into(), json!(real));
    }
    value
}

/// `%XX` escapes of a path segment, decoded.
fn percent_decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `rendered_content` for raw Markdown `content`, as far as the fake goes: HTML escaped,
/// `@**Full Name**` of a known user as Zulip's user-mention span, one `<p>` per block
/// separated by a blank line, line breaks inside a block as `<br>`.
fn render(content: &str, users: &[User]) -> String {
    let escape = |text: &str| {
        text.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let mut out = String::new();
    for block in content.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut html = escape(block.trim()).replace('\n', "<br>\n");
        for user in users {
            let mention = escape(&format!("@**{}**", user.full_name));
            if html.contains(&mention) {
                let span = format!(
                    "<span class=\"user-mention\" data-user-id=\"{}\">@{}</span>",
                    user.id,
                    escape(&user.full_name)
                );
                html = html.replace(&mention, &span);
            }
        }
        out.push_str(&format!("<p>{html}</p>"));
    }
    out
}

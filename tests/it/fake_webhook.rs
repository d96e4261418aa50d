//! A fake webhook receiver for the tests: any path on 127.0.0.1 takes any request, records
//! it (method, path, headers, body, and the status it answered) and answers like a Slack
//! incoming webhook: 200 with the body `ok`. It can be switched down
//! ([`FakeWebhook::set_status`]: that status with Slack's plain-text reason for it, and
//! `Retry-After: 1` on a 429), told exactly what to answer ([`FakeWebhook::set_reply`]), or
//! made slow ([`FakeWebhook::set_delay`]).
//!
//! What it must never do: reach the network (it listens on 127.0.0.1 and opens nothing), or
//! panic on what a client sends.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::Response;
use axum::Router;
use serde_json::Value;

use crate::fake_server::FakeServer;

/// One request as the receiver saw it.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    /// Below the host, with the query if any.
    pub path: String,
    /// Names lowercased, in the order they came.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// The status it was answered with.
    pub status: u16,
}

impl Received {
    /// The first value of the header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (`Null` if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// An answer served instead of 200 `ok`.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    pub headers: Vec<(String, String)>,
}

impl Reply {
    /// `status` with Slack's plain-text reason for it.
    pub fn slack(status: u16) -> Self {
        let body = match status {
            200 => "ok",
            400 => "invalid_payload",
            403 => "action_prohibited",
            404 => "no_service",
            410 => "channel_is_archived",
            429 => "rate_limited",
            500..=599 => "rollup_error",
            _ => "error",
        };
        let headers = if status == 429 {
            vec![("Retry-After".to_owned(), "1".to_owned())]
        } else {
            Vec::new()
        };
        Self {
            status,
            body: body.to_owned(),
            headers,
        }
    }
}

#[derive(Default)]
struct StateData {
    reply: Option<Reply>,
    delay: Duration,
    received: Vec<Received>,
}

struct Shared {
    state: Mutex<StateData>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, StateData> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running receiver; it stops when dropped.
pub struct FakeWebhook {
    server: FakeServer,
    shared: Arc<Shared>,
}

impl FakeWebhook {
    pub fn start() -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(StateData::default()),
        });
        let server = FakeServer::start(
            "webhook",
            Router::new().fallback(handle).with_state(shared.clone()),
        );
        Self { server, shared }
    }

    /// `http://127.0.0.1:port` followed by `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.url())
    }

    /// `Some(s)`: every request is answered `s` with Slack's reason for it (see
    /// [`Reply::slack`]); `None`: 200 `ok` again.
    pub fn set_status(&self, status: Option<u16>) {
        self.set_reply(status.map(Reply::slack));
    }

    /// `Some(reply)`: every request is answered with it; `None`: 200 `ok` again.
    pub fn set_reply(&self, reply: Option<Reply>) {
        self.shared.state().reply = reply;
    }

    /// Every answer waits this long first.
    pub fn set_delay(&self, delay: Duration) {
        self.shared.state().delay = delay;
    }

    /// Every request so far, in the order they came.
    pub fn received(&self) -> Vec<Received> {
        self.shared.state().received.clone()
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: axum::extract::Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| parts.uri.path().to_owned());
    let headers = parts
        .headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let (reply, delay) = {
        let mut state = shared.state();
        let reply = state.reply.clone().unwrap_or_else(|| Reply::slack(200));
        state.received.push(Received {
            method: parts.method.to_string(),
            path,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
            status: reply.status,
        });
        (reply, state.delay)
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut builder = Response::builder()
        .status(StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "text/html");
    for (name, value) in &reply.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    builder
        .body(Body::from(reply.body))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

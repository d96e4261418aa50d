//! The Zulip client: HTTP basic auth with a bot's email and API key, and the few calls the
//! chat needs: post to a stream's topic, read the last N messages of a topic (raw Markdown,
//! the topic coming back as `subject`), and receive new messages through an event queue
//! (`register`, then `events`). Cloning is cheap and shares the connection pool.
//!
//! A failure is returned as a typed [`ZulipError`] and never retried here: the caller waits
//! (`RateLimited`), re-registers (`QueueExpired`) or tries again later.
//!
//! What it must never do: put the API key anywhere but the `Authorization` header of a
//! request to the configured site (not in a URL, a body, an error, a `Debug` or a tracing
//! field), or follow a redirect (which could carry the header to another host).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use thiserror::Error;
use url::Url;

use crate::core::clock::{Clock, SystemClock};
use crate::http::{self, retry, Class, RateGate, Redactor, Secret, Transport};

/// Where the client talks to and as which bot.
#[derive(Clone, Debug)]
pub struct ZulipSettings {
    /// The realm's site, such as `https://lumen.zulipchat.com` (or the test fake). The API
    /// is under `/api/v1` below it.
    pub site: Url,
    pub bot_email: String,
    pub api_key: Secret,
}

/// Tuning with sensible defaults.
#[derive(Clone, Debug)]
pub struct ZulipOptions {
    /// Every call but the events long poll, body included.
    pub timeout: Duration,
    /// `GET /events`: Zulip holds it open until an event, or about a minute for a heartbeat.
    pub events_timeout: Duration,
    pub connect_timeout: Duration,
    pub user_agent: String,
    /// What rate-limit resets and `Retry-After` dates are measured against.
    pub clock: Arc<dyn Clock>,
}

impl Default for ZulipOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            events_timeout: Duration::from_secs(90),
            connect_timeout: Duration::from_secs(10),
            user_agent: http::USER_AGENT.into(),
            clock: Arc::new(SystemClock),
        }
    }
}

/// Every way a Zulip call can fail. No variant holds the API key or a request header:
/// messages come from Zulip's bodies and from paths the client built.
#[derive(Debug, Error)]
pub enum ZulipError {
    /// A 4xx with Zulip's `{"result":"error","msg","code"}`; `code` is Zulip's name for it
    /// (`STREAM_DOES_NOT_EXIST`, `UNAUTHORIZED`, `BAD_REQUEST`, …).
    #[error("Zulip answered {status} {code} to {path}: {message}")]
    Api {
        status: u16,
        code: String,
        path: String,
        message: String,
    },
    /// `BAD_EVENT_QUEUE_ID`: the queue expired or was never there; register a new one.
    #[error("the Zulip event queue {queue_id} expired; register again")]
    QueueExpired { queue_id: String },
    /// 429 `RATE_LIMIT_HIT`: wait `retry_after` before calling again.
    #[error("Zulip rate limit: retry after {:.1}s", retry_after.as_secs_f64())]
    RateLimited { retry_after: Duration },
    /// 5xx.
    #[error("Zulip server error {status} on {path}: {message}")]
    Server {
        status: u16,
        path: String,
        message: String,
    },
    /// No answer: the connection failed (DNS, refused, TLS, reset) or timed out.
    #[error("cannot reach Zulip: {message}")]
    Unreachable { message: String },
    /// A 2xx whose body is not the shape executor expects.
    #[error("cannot read Zulip's answer: {what}")]
    Decode {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// The settings cannot be used (a bad site URL, credentials unfit for a header).
    #[error("invalid Zulip settings: {0}")]
    Settings(String),
}

/// How long to wait after a 429 that says nothing readable about it.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(60);

impl ZulipError {
    /// Whether the same call may succeed later with nothing changed on executor's side.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. } | Self::Server { .. } | Self::Unreachable { .. }
        )
    }

    /// Zulip's error code, when the answer had one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Api { code, .. } => Some(code),
            Self::QueueExpired { .. } => Some("BAD_EVENT_QUEUE_ID"),
            Self::RateLimited { .. } => Some("RATE_LIMIT_HIT"),
            _ => None,
        }
    }
}

/// One message as `GET /messages` and message events give it (raw Markdown with
/// `apply_markdown=false`). Fields executor does not use are left out.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ZulipMessage {
    pub id: u64,
    pub sender_id: u64,
    #[serde(default)]
    pub sender_email: String,
    #[serde(default)]
    pub sender_full_name: String,
    pub content: String,
    /// The topic (Zulip's old name for it, kept in answers).
    #[serde(default)]
    pub subject: String,
    /// The stream's name for a stream message; a list of users for a direct message.
    #[serde(default)]
    pub display_recipient: Value,
    #[serde(default)]
    pub timestamp: i64,
    /// `stream` or `private`.
    #[serde(rename = "type", default)]
    pub kind: String,
}

impl ZulipMessage {
    /// The stream's name, for a stream message.
    pub fn stream(&self) -> Option<&str> {
        self.display_recipient.as_str()
    }
}

/// An event queue from `POST /register`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct EventQueue {
    pub queue_id: String,
    /// The id to acknowledge on the first `events` call (`-1` for a new queue).
    pub last_event_id: i64,
}

/// One event from `GET /events`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZulipEvent {
    /// The queue is alive and nothing happened.
    Heartbeat { id: i64 },
    Message {
        id: i64,
        /// Boxed: a message is much larger than the other events.
        message: Box<ZulipMessage>,
        flags: Vec<String>,
    },
    /// Any other event type (the queue was registered for messages only).
    Other { id: i64, kind: String },
}

impl ZulipEvent {
    /// The event id, to acknowledge as `last_event_id`.
    pub fn id(&self) -> i64 {
        match self {
            Self::Heartbeat { id } | Self::Message { id, .. } | Self::Other { id, .. } => *id,
        }
    }
}

/// `@**Full Name**`: a mention that notifies that user.
pub fn mention(full_name: &str) -> String {
    format!("@**{}**", full_name.trim())
}

/// The Zulip client. See the module docs.
#[derive(Clone)]
pub struct ZulipClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ZulipClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZulipClient")
            .field("site", &self.inner.site.as_str())
            .field("bot_email", &self.inner.bot_email)
            .field("api_key", &"***")
            .finish()
    }
}

struct Inner {
    http: reqwest::Client,
    /// The API key, cut out of any text that goes into an error.
    redactor: Redactor,
    site: Url,
    bot_email: String,
    /// `Basic base64(email:key)`, marked sensitive so no `Debug` of a request prints it.
    auth: HeaderValue,
    options: ZulipOptions,
    /// Until when Zulip said this bot's request budget is spent (`X-RateLimit-Remaining: 0`
    /// until `X-RateLimit-Reset`, or a 429's `Retry-After`): calls before then are not sent.
    spent_until: RateGate<()>,
}

#[derive(Deserialize)]
struct Posted {
    id: u64,
}

/// A user as `GET /users/{email}` and `GET /users` give them; `delivery_email` (the real
/// address) only where the realm lets this bot see it.
#[derive(Deserialize)]
struct User {
    user_id: u64,
    #[serde(default)]
    email: String,
    #[serde(default)]
    delivery_email: Option<String>,
}

#[derive(Deserialize)]
struct OneUser {
    user: User,
}

#[derive(Deserialize)]
struct Members {
    members: Vec<User>,
}

#[derive(Deserialize)]
struct Messages {
    messages: Vec<ZulipMessage>,
    #[serde(default)]
    found_newest: bool,
}

#[derive(Deserialize)]
struct RawEvent {
    id: i64,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    message: Option<ZulipMessage>,
    #[serde(default)]
    flags: Vec<String>,
}

#[derive(Deserialize)]
struct Events {
    events: Vec<RawEvent>,
}

#[derive(Deserialize, Default)]
struct ErrorBody {
    #[serde(default)]
    msg: String,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    queue_id: Option<String>,
    #[serde(default, rename = "retry-after")]
    retry_after: Option<f64>,
}

impl ZulipClient {
    /// A client with the default options.
    pub fn new(settings: ZulipSettings) -> Result<Self, ZulipError> {
        Self::with_options(settings, ZulipOptions::default())
    }

    pub fn with_options(
        settings: ZulipSettings,
        options: ZulipOptions,
    ) -> Result<Self, ZulipError> {
        let site =
            http::client::base_url(settings.site, "the site URL").map_err(ZulipError::Settings)?;
        let email = settings.bot_email.trim().to_owned();
        if email.is_empty() || email.contains(':') {
            return Err(ZulipError::Settings(
                "the bot email is empty or holds a `:`".into(),
            ));
        }
        let key = settings.api_key.expose();
        let auth = http::client::authorization(&format!(
            "Basic {}",
            base64_encode(format!("{email}:{key}").as_bytes())
        ))
        .map_err(|_| ZulipError::Settings("the API key cannot be sent in a header".into()))?;
        // Each request sets its own timeout: the events long poll waits longer.
        let http = http::client::build(
            &http::HttpOptions {
                timeout: None,
                connect_timeout: options.connect_timeout,
                user_agent: options.user_agent.clone(),
            },
            http::client::accept("application/json"),
        )
        .map_err(ZulipError::Settings)?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                redactor: Redactor::new([&settings.api_key]),
                site,
                bot_email: email,
                auth,
                options,
                spent_until: RateGate::default(),
            }),
        })
    }

    /// The site this client calls.
    pub fn site(&self) -> &Url {
        &self.inner.site
    }

    /// The bot this client posts as.
    pub fn bot_email(&self) -> &str {
        &self.inner.bot_email
    }

    // ----- operations -----

    /// Posts `content` (Markdown) to `topic` of `stream`; the new message's id.
    pub async fn post_to_topic(
        &self,
        stream: &str,
        topic: &str,
        content: &str,
    ) -> Result<u64, ZulipError> {
        let form = [
            ("type", "stream"),
            ("to", stream),
            ("topic", topic),
            ("content", content),
        ];
        let bytes = self
            .send(Method::POST, self.url("messages"), Some(&form), None)
            .await?;
        let posted: Posted = decode(&bytes, "the posted message")?;
        Ok(posted.id)
    }

    /// The last `n` messages of `topic` in `stream`, oldest first, as raw Markdown.
    pub async fn topic_window(
        &self,
        stream: &str,
        topic: &str,
        n: u32,
    ) -> Result<Vec<ZulipMessage>, ZulipError> {
        let narrow = json!([
            {"operator": "channel", "operand": stream},
            {"operator": "topic", "operand": topic},
        ])
        .to_string();
        let mut url = self.url("messages");
        url.query_pairs_mut()
            .append_pair("anchor", "newest")
            .append_pair("num_before", &n.to_string())
            .append_pair("num_after", "0")
            .append_pair("apply_markdown", "false")
            .append_pair("narrow", &narrow);
        let bytes = self.send(Method::GET, url, None, None).await?;
        let page: Messages = decode(&bytes, "the messages of the topic")?;
        Ok(page.messages)
    }

    /// Up to `n` messages of `topic` in `stream` after message `after`, oldest first, and
    /// whether they reach the newest message (`found_newest`).
    pub async fn topic_after(
        &self,
        stream: &str,
        topic: &str,
        after: u64,
        n: u32,
    ) -> Result<(Vec<ZulipMessage>, bool), ZulipError> {
        let narrow = json!([
            {"operator": "channel", "operand": stream},
            {"operator": "topic", "operand": topic},
        ])
        .to_string();
        let mut url = self.url("messages");
        url.query_pairs_mut()
            .append_pair("anchor", &after.to_string())
            .append_pair("include_anchor", "false")
            .append_pair("num_before", "0")
            .append_pair("num_after", &n.to_string())
            .append_pair("apply_markdown", "false")
            .append_pair("narrow", &narrow);
        let bytes = self.send(Method::GET, url, None, None).await?;
        let page: Messages = decode(&bytes, "the messages of the topic")?;
        Ok((page.messages, page.found_newest))
    }

    /// The user id of the person with address `email`: first as their Zulip API email
    /// (`GET /users/{email}`), then, where the realm hides real addresses (API emails like
    /// `user8@…`), by their `delivery_email` among all users (`GET /users`). `None` when
    /// nobody this bot can see has that address.
    pub async fn user_id_of(&self, email: &str) -> Result<Option<u64>, ZulipError> {
        let mut url = self.url("users");
        if let Ok(mut path) = url.path_segments_mut() {
            path.push(email);
        }
        match self.send(Method::GET, url, None, None).await {
            Ok(bytes) => {
                let found: OneUser = decode(&bytes, "the user")?;
                return Ok(Some(found.user.user_id));
            }
            // "No such user" (400, or 404 on other versions): perhaps not an API email.
            Err(ZulipError::Api { status, .. }) if status != 401 && status != 403 => {}
            Err(error) => return Err(error),
        }
        let bytes = self
            .send(Method::GET, self.url("users"), None, None)
            .await?;
        let all: Members = decode(&bytes, "the users of the realm")?;
        Ok(all
            .members
            .iter()
            .find(|u| {
                u.email.eq_ignore_ascii_case(email)
                    || u.delivery_email
                        .as_deref()
                        .is_some_and(|d| d.eq_ignore_ascii_case(email))
            })
            .map(|u| u.user_id))
    }

    /// A new event queue for the messages of `stream`.
    pub async fn register_queue(&self, stream: &str) -> Result<EventQueue, ZulipError> {
        let event_types = json!(["message"]).to_string();
        let narrow = json!([["channel", stream]]).to_string();
        let form = [
            ("event_types", event_types.as_str()),
            ("narrow", narrow.as_str()),
            ("apply_markdown", "false"),
        ];
        let bytes = self
            .send(Method::POST, self.url("register"), Some(&form), None)
            .await?;
        decode(&bytes, "the registered event queue")
    }

    /// The events of `queue` after `last_event_id` (which acknowledges the ones before).
    /// Zulip holds the call open until there is an event or a heartbeat is due.
    pub async fn events(
        &self,
        queue: &EventQueue,
        last_event_id: i64,
    ) -> Result<Vec<ZulipEvent>, ZulipError> {
        let mut url = self.url("events");
        url.query_pairs_mut()
            .append_pair("queue_id", &queue.queue_id)
            .append_pair("last_event_id", &last_event_id.to_string());
        let timeout = self.inner.options.events_timeout;
        let bytes = self.send(Method::GET, url, None, Some(timeout)).await?;
        let events: Events = decode(&bytes, "the events of the queue")?;
        Ok(events
            .events
            .into_iter()
            .map(|raw| match (raw.kind.as_str(), raw.message) {
                ("heartbeat", _) => ZulipEvent::Heartbeat { id: raw.id },
                ("message", Some(message)) => ZulipEvent::Message {
                    id: raw.id,
                    message: Box::new(message),
                    flags: raw.flags,
                },
                _ => ZulipEvent::Other {
                    id: raw.id,
                    kind: raw.kind,
                },
            })
            .collect())
    }

    // ----- machinery -----

    /// `{site}/api/v1/{endpoint}`.
    fn url(&self, endpoint: &str) -> Url {
        let mut url = self.inner.site.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(["api", "v1", endpoint]);
        }
        url
    }

    /// One request with the credentials; a non-success answer becomes its error.
    async fn send(
        &self,
        method: Method,
        url: Url,
        form: Option<&[(&str, &str)]>,
        timeout: Option<Duration>,
    ) -> Result<Vec<u8>, ZulipError> {
        let path = url.path().to_owned();
        let clock = &self.inner.options.clock;
        if let Some((until, ())) = self.inner.spent_until.check(clock.now()) {
            return Err(ZulipError::RateLimited {
                retry_after: retry::until(until, clock.now()),
            });
        }
        let timeout = timeout.unwrap_or(self.inner.options.timeout);
        let mut request = self
            .inner
            .http
            .request(method.clone(), url)
            .timeout(timeout)
            .header(reqwest::header::AUTHORIZATION, self.inner.auth.clone());
        if let Some(form) = form {
            request = request.form(form);
        }
        let answer = http::exchange(request, timeout, &self.inner.redactor, None).await?;
        let status = answer.status.as_u16();
        tracing::debug!(method = %method, path, status, "Zulip call");
        let now = clock.now();
        let mut spent = budget_spent_until(&answer.headers, now);
        let result = if answer.status.is_success() {
            Ok(answer.body)
        } else {
            Err(classify(status, &answer.headers, &answer.body, &path, now))
        };
        if let Err(ZulipError::RateLimited { retry_after }) = &result {
            spent = spent.max(Some(retry::later(now, *retry_after)));
        }
        // The latest answer knows best: a budget back opens the gate.
        match spent {
            Some(until) => self.inner.spent_until.shut(until, (), now),
            None => self.inner.spent_until.open(),
        }
        result
    }
}

/// The longest a reset time is believed: a clock far off must not silence chat for days.
const MAX_BUDGET_WAIT: Duration = Duration::from_secs(15 * 60);

/// When the headers say the request budget is spent (`X-RateLimit-Remaining: 0`), the time
/// it comes back (`X-RateLimit-Reset`, UNIX seconds), at most [`MAX_BUDGET_WAIT`] away.
fn budget_spent_until(headers: &HeaderMap, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let remaining = text("x-ratelimit-remaining")?
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)?;
    if remaining > 0.0 {
        return None;
    }
    let reset = retry::reset_at(text("x-ratelimit-reset")?, now)?;
    let latest = retry::later(now, MAX_BUDGET_WAIT);
    (reset > now).then_some(reset.min(latest))
}

/// The error for a response with a non-success status. `path` names what was asked.
fn classify(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    path: &str,
    now: DateTime<Utc>,
) -> ZulipError {
    let parsed = serde_json::from_slice::<ErrorBody>(body).ok();
    let message = match &parsed {
        Some(parsed) if !parsed.msg.is_empty() => shorten(&parsed.msg),
        _ => shorten(String::from_utf8_lossy(body).trim()),
    };
    let parsed = parsed.unwrap_or_default();
    if Class::of(status) == Class::TooManyRequests
        || parsed.code.as_deref() == Some("RATE_LIMIT_HIT")
    {
        // The header first, else the body's `retry-after` (seconds, with a fraction).
        let body_wait = parsed
            .retry_after
            .and_then(|s| retry::parse_retry_after(&s.to_string(), now));
        return ZulipError::RateLimited {
            retry_after: retry::retry_after(headers, now)
                .or(body_wait)
                .unwrap_or(DEFAULT_RETRY_AFTER)
                .min(MAX_BUDGET_WAIT),
        };
    }
    if parsed.code.as_deref() == Some("BAD_EVENT_QUEUE_ID") {
        return ZulipError::QueueExpired {
            queue_id: parsed.queue_id.unwrap_or_default(),
        };
    }
    if Class::of(status) == Class::Server {
        return ZulipError::Server {
            status,
            path: path.to_owned(),
            message,
        };
    }
    ZulipError::Api {
        status,
        code: parsed.code.unwrap_or_else(|| "UNKNOWN".to_owned()),
        path: path.to_owned(),
        message,
    }
}

fn shorten(text: &str) -> String {
    http::shorten(text, http::answer::MESSAGE_CHARS)
}

impl From<Transport> for ZulipError {
    fn from(failure: Transport) -> Self {
        ZulipError::Unreachable {
            message: failure.to_string(),
        }
    }
}

/// Decodes a 2xx body; the error names what was read and where in the body it broke.
fn decode<T: DeserializeOwned>(body: &[u8], what: &str) -> Result<T, ZulipError> {
    http::decode(body).map_err(|e| ZulipError::Decode {
        what: e.describe(what),
        source: e.source,
    })
}

/// Standard base64 with padding, for the basic-auth header.
fn base64_encode(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed_now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_790_000_000, 0).expect("a fixed time")
    }

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/../shared/fixtures/http/zulip/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
    }

    fn settings(site: &str) -> ZulipSettings {
        ZulipSettings {
            site: Url::parse(site).expect("url"),
            bot_email: "executor-bot@lumen.zulipchat.com".into(),
            api_key: Secret::new("fakeZulipKeySecret123"),
        }
    }

    #[test]
    fn base64_matches_the_rfc_examples() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(plain.as_bytes()), encoded, "{plain}");
        }
    }

    #[test]
    fn a_mention_is_bold_with_an_at() {
        assert_eq!(mention("Marek Kowalski"), "@**Marek Kowalski**");
    }

    #[test]
    fn the_fixtures_decode() {
        let page: Messages = decode(&fixture("get_messages_topic.json"), "m").expect("messages");
        assert_eq!(page.messages.len(), 4);
        assert_eq!(page.messages[3].content, "approve 17");
        assert_eq!(page.messages[3].subject, "run 42 · fix/tab-preview-stuck");
        assert_eq!(page.messages[3].stream(), Some("executor"));
        let queue: EventQueue = decode(&fixture("register_200.json"), "q").expect("queue");
        assert_eq!(queue.last_event_id, -1);
        let events: Events = decode(&fixture("events_200.json"), "e").expect("events");
        assert_eq!(events.events.len(), 2);
        assert_eq!(events.events[1].message.as_ref().map(|m| m.id), Some(48216));
    }

    #[test]
    fn failures_are_classified() {
        let error = classify(
            400,
            &HeaderMap::new(),
            &fixture("post_message_400.json"),
            "/api/v1/messages",
            fixed_now(),
        );
        assert_eq!(error.code(), Some("STREAM_DOES_NOT_EXIST"), "{error:?}");
        let error = classify(
            400,
            &HeaderMap::new(),
            &fixture("events_bad_queue_400.json"),
            "/api/v1/events",
            fixed_now(),
        );
        assert!(
            matches!(&error, ZulipError::QueueExpired { queue_id } if queue_id == "a4f1c3e2-9b7d-4e6f-8c5a-3d2b1e0f9a87"),
            "{error:?}"
        );
        let mut headers = HeaderMap::new();
        headers.insert(
            reqwest::header::RETRY_AFTER,
            HeaderValue::from_static("28.706807374954224"),
        );
        let body = br#"{"result":"error","msg":"API usage exceeded rate limit","code":"RATE_LIMIT_HIT","retry-after":28.706807374954224}"#;
        let error = classify(429, &headers, body, "/api/v1/messages", fixed_now());
        assert!(
            matches!(error, ZulipError::RateLimited { retry_after } if (retry_after.as_secs_f64() - 28.7068).abs() < 0.001),
            "{error:?}"
        );
        // Without the header, the body's key.
        let error = classify(
            429,
            &HeaderMap::new(),
            body,
            "/api/v1/messages",
            fixed_now(),
        );
        assert!(
            matches!(error, ZulipError::RateLimited { retry_after } if retry_after.as_secs() == 28)
        );
        let error = classify(
            502,
            &HeaderMap::new(),
            b"<html>bad gateway</html>",
            "/x",
            fixed_now(),
        );
        assert!(matches!(error, ZulipError::Server { status: 502, .. }));
        assert!(error.is_transient());
    }

    #[test]
    fn the_client_never_prints_its_key_and_refuses_credentials_in_the_url() {
        let client = ZulipClient::new(settings("https://lumen.zulipchat.com")).expect("client");
        let shown = format!("{client:?} {:?}", settings("https://x.example"));
        assert!(!shown.contains("fakeZulipKeySecret123"), "{shown}");
        assert_eq!(
            client.url("messages").as_str(),
            "https://lumen.zulipchat.com/api/v1/messages"
        );
        let error = ZulipClient::new(settings("https://bot:key@lumen.zulipchat.com"))
            .expect_err("credentials in the URL");
        assert!(matches!(error, ZulipError::Settings(_)));
    }

    #[test]
    fn a_spent_budget_is_known_until_its_reset_and_no_longer_than_the_cap() {
        let now = DateTime::from_timestamp(1_773_654_480, 0).expect("now");
        let headers = |remaining: &str, reset: &str| {
            let mut map = HeaderMap::new();
            map.insert(
                "x-ratelimit-remaining",
                HeaderValue::from_str(remaining).expect("h"),
            );
            map.insert(
                "x-ratelimit-reset",
                HeaderValue::from_str(reset).expect("h"),
            );
            map
        };
        assert_eq!(
            budget_spent_until(&headers("0", "1773654508"), now),
            Some(now + chrono::Duration::seconds(28))
        );
        assert_eq!(budget_spent_until(&headers("3", "1773654508"), now), None);
        assert_eq!(
            budget_spent_until(&headers("0", "1773654400"), now),
            None,
            "past"
        );
        assert_eq!(
            budget_spent_until(&headers("0", "1999999999"), now),
            Some(retry::later(now, MAX_BUDGET_WAIT))
        );
        assert_eq!(
            budget_spent_until(&headers("0", "99999999999999999"), now),
            Some(retry::later(now, MAX_BUDGET_WAIT))
        );
        assert_eq!(budget_spent_until(&headers("0", "soon"), now), None);
        assert_eq!(budget_spent_until(&HeaderMap::new(), now), None);
    }
}

//! Outgoing notifiers over HTTP: a notice (priority, text, the task, run and persona it is
//! about) POSTed to a URL the owner configured, either as executor's own JSON ([`WebhookKind::Json`],
//! with an `Idempotency-Key` so a receiver can drop a retried duplicate) or in the shape of a
//! Slack incoming webhook ([`WebhookKind::Slack`], `{"text": …}`).
//!
//! Slack's documented answers: 200 with the body `ok`; a plain-text reason otherwise: 400
//! `invalid_payload` or `user_not_found`, 403 `action_prohibited` or `invalid_token`, 404
//! `channel_not_found` or `no_service`, 410 `channel_is_archived`, 500 `rollup_error`, and 429
//! with `Retry-After` (seconds) when posting faster than about one message a second.
//!
//! A failure is returned as a typed [`WebhookError`] and never retried here: the caller waits
//! (`RateLimited`), tries again later (the other transient errors) or gives the notifier up
//! (`Rejected`).
//!
//! What it must never do: show the URL (a Slack URL embeds its token in the path) in an
//! error, a `Debug` print or a tracing field; a notifier is named by its configured `name`
//! only. Nor follow a redirect (the notice would go to a host nobody configured).

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::StatusCode;
use serde_json::{json, Value};
use thiserror::Error;
use url::Url;

use crate::http::{self, retry, Class, Redactor, Secret, Transport};

/// What a receiver expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebhookKind {
    /// executor's own JSON notice, with an `Idempotency-Key` header.
    Json,
    /// A Slack incoming webhook: `{"text": …}`.
    Slack,
}

impl WebhookKind {
    /// The name used in the config: `json` or `slack`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Slack => "slack",
        }
    }
}

impl std::str::FromStr for WebhookKind {
    type Err = WebhookError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "json" => Ok(Self::Json),
            "slack" => Ok(Self::Slack),
            other => Err(WebhookError::Settings(format!(
                "unknown webhook kind {other:?} (expected json or slack)"
            ))),
        }
    }
}

/// One notice for the owner.
#[derive(Clone, Debug)]
pub struct WebhookNotice<'a> {
    /// Such as `urgent` or `info`.
    pub priority: &'a str,
    pub text: &'a str,
    pub task_gid: Option<&'a str>,
    pub run_id: Option<i64>,
    pub persona: Option<&'a str>,
    pub created_at: DateTime<Utc>,
    /// The notice's own id: the same notice delivered twice carries the same id.
    pub id: i64,
}

/// Every way a delivery can fail. No variant holds the URL or any part of it: the notifier
/// is named by its `name`, and receivers' bodies and transport messages are scrubbed of it.
#[derive(Debug, Error)]
pub enum WebhookError {
    /// A 4xx other than 429 (or a 3xx, which is not followed): the same notice will not get
    /// through with nothing changed. `body_excerpt` is the start of the receiver's answer
    /// (Slack's reason, such as `no_service`).
    #[error("webhook notifier {name} refused the notice with HTTP {status}: {body_excerpt}")]
    Rejected {
        name: String,
        status: u16,
        body_excerpt: String,
    },
    /// 429: wait `retry_after` before delivering to it again.
    #[error(
        "webhook notifier {name} is rate limited: retry after {:.1}s",
        retry_after.as_secs_f64()
    )]
    RateLimited { name: String, retry_after: Duration },
    /// 5xx.
    #[error("webhook notifier {name} answered server error {status}")]
    Server { name: String, status: u16 },
    /// No answer: the connection failed (DNS, refused, TLS, reset) or timed out.
    #[error("cannot reach webhook notifier {name}: {message}")]
    Unreachable { name: String, message: String },
    /// The settings cannot be used (an empty name, a URL that is not http(s), no timeout).
    #[error("invalid webhook settings: {0}")]
    Settings(String),
}

impl WebhookError {
    /// Whether the same delivery may succeed later with nothing changed on executor's side.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. } | Self::Server { .. } | Self::Unreachable { .. }
        )
    }
}

/// How long to wait after a 429 that says nothing readable about it.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The longest wait a receiver's `Retry-After` can impose.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);
/// How much of a receiver's answer is read (the rest is dropped unread).
const MAX_BODY: usize = 4096;
/// How much of it goes into an error.
const EXCERPT_CHARS: usize = 200;

/// One configured receiver. Cloning is cheap and shares the connection pool.
#[derive(Clone)]
pub struct WebhookNotifier {
    name: String,
    kind: WebhookKind,
    /// The URL itself is secret: Slack's embed a token.
    url: Secret,
    /// The URL and its parts, cut out of whatever a receiver or the transport says.
    redactor: Redactor,
    timeout: Duration,
    client: reqwest::Client,
    /// What `Retry-After` dates are measured against.
    clock: std::sync::Arc<dyn crate::core::clock::Clock>,
}

impl fmt::Debug for WebhookNotifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookNotifier")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("url", &"***")
            .finish()
    }
}

impl WebhookNotifier {
    /// A notifier called `name` (the only way errors and logs refer to it) that POSTs to
    /// `url`, each delivery bounded by `timeout`.
    pub fn new(
        name: impl Into<String>,
        kind: WebhookKind,
        url: Secret,
        timeout: Duration,
    ) -> Result<Self, WebhookError> {
        let name = name.into().trim().to_owned();
        if name.is_empty() {
            return Err(WebhookError::Settings(
                "a webhook notifier needs a name".into(),
            ));
        }
        // The parse error names the fault, never the text it was given.
        let parsed = Url::parse(url.expose()).map_err(|e| {
            WebhookError::Settings(format!(
                "the URL of webhook notifier {name} is invalid: {e}"
            ))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(WebhookError::Settings(format!(
                "the URL of webhook notifier {name} is not an http(s) URL"
            )));
        }
        if timeout.is_zero() {
            return Err(WebhookError::Settings(format!(
                "webhook notifier {name} needs a timeout above zero"
            )));
        }
        let client = http::client::build(
            &http::HttpOptions {
                timeout: Some(timeout),
                connect_timeout: timeout.min(Duration::from_secs(10)),
                user_agent: http::USER_AGENT.into(),
            },
            HeaderMap::new(),
        )
        .map_err(|e| WebhookError::Settings(format!("webhook notifier {name}: {e}")))?;
        Ok(Self {
            name,
            kind,
            redactor: Redactor::of_url(&url),
            url,
            timeout,
            client,
            clock: std::sync::Arc::new(crate::core::clock::SystemClock),
        })
    }

    /// The configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> WebhookKind {
        self.kind
    }

    /// POSTs `notice` once. Any 2xx is delivered (Slack answers 200 `ok`).
    pub async fn deliver(&self, notice: &WebhookNotice<'_>) -> Result<(), WebhookError> {
        let mut request = self.client.post(self.url.expose()).header(
            header::ACCEPT,
            "application/json, text/plain;q=0.9, */*;q=0.5",
        );
        request = match self.kind {
            WebhookKind::Json => request
                .header("Idempotency-Key", idempotency_key(notice.id))
                .json(&json_payload(notice)),
            WebhookKind::Slack => request.json(&slack_payload(notice)),
        };
        // A success whose body broke off is still a success; a failure keeps what came.
        let answer = http::exchange(request, self.timeout, &self.redactor, Some(MAX_BODY))
            .await
            .map_err(|failure| self.transport(failure))?;
        let (status, headers, body) = (answer.status, answer.headers, answer.body);
        tracing::debug!(
            notifier = %self.name,
            kind = self.kind.as_str(),
            notice = notice.id,
            status = status.as_u16(),
            "webhook delivery"
        );
        if status.is_success() {
            return Ok(());
        }
        Err(classify(
            &self.name,
            status,
            &headers,
            &body,
            self.url.expose(),
            self.clock.now(),
        ))
    }

    fn transport(&self, failure: Transport) -> WebhookError {
        WebhookError::Unreachable {
            name: self.name.clone(),
            message: failure.to_string(),
        }
    }
}

/// `executor-<id>`: the same notice always carries the same key.
pub fn idempotency_key(id: i64) -> String {
    format!("executor-{id}")
}

/// The body of a [`WebhookKind::Json`] delivery. Absent fields are `null`, not left out.
fn json_payload(notice: &WebhookNotice<'_>) -> Value {
    json!({
        "id": notice.id,
        "priority": notice.priority,
        "text": notice.text,
        "task_gid": notice.task_gid,
        "run_id": notice.run_id,
        "persona": notice.persona,
        "created_at": notice.created_at.to_rfc3339_opts(SecondsFormat::AutoSi, true),
    })
}

/// The body of a [`WebhookKind::Slack`] delivery: the text with the three characters Slack's
/// markup gives a meaning (`&`, `<`, `>`) escaped, so a `<` in a notice is not read as a link
/// or a mention.
fn slack_payload(notice: &WebhookNotice<'_>) -> Value {
    json!({ "text": slack_escape(notice.text) })
}

fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The error for an answer that is not a 2xx. `url` is only scrubbed out of the body.
fn classify(
    name: &str,
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    url: &str,
    now: DateTime<Utc>,
) -> WebhookError {
    let name = name.to_owned();
    let code = status.as_u16();
    if status == StatusCode::TOO_MANY_REQUESTS {
        return WebhookError::RateLimited {
            name,
            retry_after: retry_after(headers.get(header::RETRY_AFTER), now),
        };
    }
    if Class::of(code) == Class::Server {
        return WebhookError::Server { name, status: code };
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let body_excerpt = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("no reason given")
            .to_owned()
    } else {
        shorten(&redact(text, url))
    };
    WebhookError::Rejected {
        name,
        status: code,
        body_excerpt,
    }
}

/// `Retry-After` as seconds (Slack's form) or as an HTTP date, capped at
/// [`MAX_RETRY_AFTER`]; [`DEFAULT_RETRY_AFTER`] when absent or unreadable.
fn retry_after(value: Option<&HeaderValue>, now: DateTime<Utc>) -> Duration {
    value
        .and_then(|v| v.to_str().ok())
        .and_then(|text| retry::parse_retry_after(text, now))
        .unwrap_or(DEFAULT_RETRY_AFTER)
        .min(MAX_RETRY_AFTER)
}

/// `text` with the URL, and every part of it that could hold a token, replaced by `***`.
fn redact(text: &str, url: &str) -> String {
    Redactor::of_url(&Secret::new(url)).scrub(text)
}

fn shorten(text: &str) -> String {
    http::shorten(text, EXCERPT_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed_now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_790_000_000, 0).expect("a fixed time")
    }
    use chrono::TimeZone;

    const URL: &str =
        "https://hooks.slack.com/services/T0EXAMPLE/B0EXAMPLE/sEcReTtOkEnPaTh0123456789";

    fn notice() -> WebhookNotice<'static> {
        WebhookNotice {
            priority: "urgent",
            text: "run 42 needs you: <approve> & merge",
            task_gid: Some("1209876543210987"),
            run_id: Some(42),
            persona: Some("orchestrator"),
            created_at: Utc
                .with_ymd_and_hms(2026, 3, 16, 9, 55, 0)
                .single()
                .expect("a valid date"),
            id: 7,
        }
    }

    fn notifier(kind: WebhookKind) -> WebhookNotifier {
        WebhookNotifier::new("ops-slack", kind, Secret::new(URL), Duration::from_secs(5))
            .expect("notifier")
    }

    #[test]
    fn the_json_payload_has_every_field() {
        assert_eq!(
            json_payload(&notice()),
            json!({
                "id": 7,
                "priority": "urgent",
                "text": "run 42 needs you: <approve> & merge",
                "task_gid": "1209876543210987",
                "run_id": 42,
                "persona": "orchestrator",
                "created_at": "2026-03-16T09:55:00Z",
            })
        );
        let bare = WebhookNotice {
            task_gid: None,
            run_id: None,
            persona: None,
            ..notice()
        };
        let payload = json_payload(&bare);
        assert_eq!(payload["task_gid"], Value::Null);
        assert_eq!(payload["run_id"], Value::Null);
        assert_eq!(payload["persona"], Value::Null);
        assert_eq!(idempotency_key(7), "executor-7");
    }

    #[test]
    fn the_slack_payload_is_the_escaped_text_only() {
        assert_eq!(
            slack_payload(&notice()),
            json!({"text": "run 42 needs you: &lt;approve&gt; &amp; merge"})
        );
    }

    #[test]
    fn answers_are_classified() {
        let none = HeaderMap::new();
        let error = classify(
            "ops",
            StatusCode::NOT_FOUND,
            &none,
            b"no_service",
            URL,
            fixed_now(),
        );
        assert!(
            matches!(&error, WebhookError::Rejected { status: 404, body_excerpt, .. } if body_excerpt == "no_service"),
            "{error:?}"
        );
        assert!(!error.is_transient());
        for (status, body) in [
            (StatusCode::BAD_REQUEST, "invalid_payload"),
            (StatusCode::FORBIDDEN, "action_prohibited"),
            (StatusCode::GONE, "channel_is_archived"),
        ] {
            let error = classify("ops", status, &none, body.as_bytes(), URL, fixed_now());
            assert!(matches!(error, WebhookError::Rejected { .. }), "{error:?}");
            assert!(error.to_string().contains(body), "{error}");
        }
        let error = classify("ops", StatusCode::FOUND, &none, b"", URL, fixed_now());
        assert!(
            matches!(&error, WebhookError::Rejected { status: 302, body_excerpt, .. } if body_excerpt == "Found"),
            "{error:?}"
        );
        let error = classify(
            "ops",
            StatusCode::INTERNAL_SERVER_ERROR,
            &none,
            b"rollup_error",
            URL,
            fixed_now(),
        );
        assert!(matches!(error, WebhookError::Server { status: 500, .. }));
        assert!(error.is_transient());
        let mut headers = HeaderMap::new();
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("30"));
        let error = classify(
            "ops",
            StatusCode::TOO_MANY_REQUESTS,
            &headers,
            b"",
            URL,
            fixed_now(),
        );
        assert!(
            matches!(error, WebhookError::RateLimited { retry_after, .. } if retry_after == Duration::from_secs(30)),
            "{error:?}"
        );
        assert!(error.is_transient());
        assert!(WebhookError::Unreachable {
            name: "ops".into(),
            message: "refused".into()
        }
        .is_transient());
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = Utc
            .with_ymd_and_hms(2015, 10, 21, 7, 27, 0)
            .single()
            .expect("a valid date");
        let header = |text: &'static str| HeaderValue::from_static(text);
        assert_eq!(retry_after(Some(&header("2")), now), Duration::from_secs(2));
        assert_eq!(
            retry_after(Some(&header("1.5")), now),
            Duration::from_millis(1500)
        );
        assert_eq!(
            retry_after(Some(&header("Wed, 21 Oct 2015 07:28:00 GMT")), now),
            Duration::from_secs(60)
        );
        assert_eq!(
            retry_after(Some(&header("Wed, 21 Oct 2015 07:00:00 GMT")), now),
            Duration::ZERO
        );
        assert_eq!(retry_after(None, now), DEFAULT_RETRY_AFTER);
        assert_eq!(retry_after(Some(&header("soon")), now), DEFAULT_RETRY_AFTER);
        assert_eq!(retry_after(Some(&header("-3")), now), DEFAULT_RETRY_AFTER);
        assert_eq!(retry_after(Some(&header("1e12")), now), MAX_RETRY_AFTER);
    }

    #[test]
    fn the_url_is_scrubbed_from_what_a_receiver_echoes() {
        let echoed = format!("no route for POST {URL} (path /services/T0EXAMPLE/B0EXAMPLE/sEcReTtOkEnPaTh0123456789)");
        let error = classify(
            "ops",
            StatusCode::NOT_FOUND,
            &HeaderMap::new(),
            echoed.as_bytes(),
            URL,
            fixed_now(),
        );
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains("sEcReTtOkEnPaTh"), "{shown}");
        assert!(shown.contains("ops"), "{shown}");
        assert_eq!(
            redact("just the token sEcReTtOkEnPaTh0123456789", URL),
            "just the token ***"
        );
        assert_eq!(redact("hooks services", URL), "hooks services");
    }

    #[test]
    fn a_long_body_is_cut() {
        let body = "x".repeat(1000);
        let error = classify(
            "ops",
            StatusCode::BAD_REQUEST,
            &HeaderMap::new(),
            body.as_bytes(),
            URL,
            fixed_now(),
        );
        let WebhookError::Rejected { body_excerpt, .. } = error else {
            panic!("{error:?}");
        };
        assert_eq!(body_excerpt.chars().count(), EXCERPT_CHARS + 1);
    }

    #[test]
    fn the_notifier_never_prints_its_url() {
        let shown = format!(
            "{:?} {:?}",
            notifier(WebhookKind::Slack),
            notifier(WebhookKind::Json)
        );
        assert!(!shown.contains("sEcReTtOkEnPaTh"), "{shown}");
        assert!(!shown.contains("hooks.slack.com"), "{shown}");
        assert!(shown.contains("ops-slack"), "{shown}");
        assert_eq!(notifier(WebhookKind::Json).name(), "ops-slack");
    }

    #[test]
    fn bad_settings_are_refused_without_quoting_the_url() {
        for url in [
            "ftp://files.example/sEcReTtOkEnPaTh0123456789",
            "not a url sEcReTtOkEnPaTh0123456789",
            "",
        ] {
            let error = WebhookNotifier::new(
                "ops",
                WebhookKind::Json,
                Secret::new(url),
                Duration::from_secs(5),
            )
            .expect_err("refused");
            let shown = format!("{error} {error:?}");
            assert!(matches!(error, WebhookError::Settings(_)), "{shown}");
            assert!(!shown.contains("sEcReTtOkEnPaTh"), "{shown}");
        }
        assert!(matches!(
            WebhookNotifier::new(
                " ",
                WebhookKind::Json,
                Secret::new(URL),
                Duration::from_secs(5)
            ),
            Err(WebhookError::Settings(_))
        ));
        assert!(matches!(
            WebhookNotifier::new("ops", WebhookKind::Json, Secret::new(URL), Duration::ZERO),
            Err(WebhookError::Settings(_))
        ));
        assert_eq!(
            "Slack".parse::<WebhookKind>().ok(),
            Some(WebhookKind::Slack)
        );
        assert_eq!("json".parse::<WebhookKind>().ok(), Some(WebhookKind::Json));
        assert!("teams".parse::<WebhookKind>().is_err());
    }
}

//! The webhook notifiers against the fake receiver: the JSON notice's shape and its
//! `Idempotency-Key` (the same on a retry), the Slack shape, each failure as its typed error
//! (5xx and 429 transient with the wait read, 4xx not, a redirect not followed, no answer
//! or a slow one unreachable), and the URL in no error's `Display` or `Debug`.

use std::future::Future;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use executor::chat::webhook::{WebhookError, WebhookKind, WebhookNotice, WebhookNotifier};
use executor::forge::github::Secret;
use serde_json::json;

use crate::fake_webhook::{FakeWebhook, Reply};

/// A path segment distinctive enough to search every printed error for.
const SECRET_SEGMENT: &str = "XoXb7hQ2sEcReTwEbHoOkToKeN";

fn secret_path() -> String {
    format!("/services/T0LUMEN01/B0EXEC042/{SECRET_SEGMENT}")
}

fn notice() -> WebhookNotice<'static> {
    WebhookNotice {
        priority: "urgent",
        text: "run 42 · fix/tab-preview-stuck waits for `approve 18` <now> & then",
        task_gid: Some("1209876543210987"),
        run_id: Some(42),
        persona: Some("orchestrator"),
        created_at: Utc
            .with_ymd_and_hms(2026, 3, 16, 9, 55, 30)
            .single()
            .expect("a valid date"),
        id: 18,
    }
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    notifier: WebhookNotifier,
}

impl Harness {
    fn new(kind: WebhookKind, url: String, timeout: Duration) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("notifier runtime");
        let notifier =
            WebhookNotifier::new("owner-pager", kind, Secret::new(url), timeout).expect("notifier");
        Self { runtime, notifier }
    }

    fn on(fake: &FakeWebhook, kind: WebhookKind) -> Self {
        Self::new(kind, fake.url(&secret_path()), Duration::from_secs(5))
    }

    fn deliver(&self) -> Result<(), WebhookError> {
        self.run(self.notifier.deliver(&notice()))
    }

    fn run<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

/// The URL is in no printed form of the error, and the notifier is named.
fn assert_no_url(error: &WebhookError) {
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains(SECRET_SEGMENT), "{shown}");
    assert!(!shown.contains("/services/"), "{shown}");
    assert!(!shown.contains("127.0.0.1"), "{shown}");
    assert!(shown.contains("owner-pager"), "{shown}");
}

#[test]
fn a_json_notice_carries_every_field_and_its_idempotency_key() {
    let fake = FakeWebhook::start();
    let h = Harness::on(&fake, WebhookKind::Json);
    h.deliver().expect("delivered");
    // A retry of the same notice carries the same key, so the receiver can drop it.
    h.deliver().expect("delivered again");

    let received = fake.received();
    assert_eq!(received.len(), 2);
    let first = &received[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, secret_path());
    assert_eq!(first.header("content-type"), Some("application/json"));
    assert_eq!(first.header("idempotency-key"), Some("executor-18"));
    assert_eq!(
        first.json(),
        json!({
            "id": 18,
            "priority": "urgent",
            "text": "run 42 · fix/tab-preview-stuck waits for `approve 18` <now> & then",
            "task_gid": "1209876543210987",
            "run_id": 42,
            "persona": "orchestrator",
            "created_at": "2026-03-16T09:55:30Z",
        })
    );
    assert_eq!(received[1].header("idempotency-key"), Some("executor-18"));
    assert_eq!(received[1].body, first.body);
    assert!(first.header("authorization").is_none());
}

#[test]
fn a_json_notice_without_task_run_or_persona_sends_nulls() {
    let fake = FakeWebhook::start();
    let h = Harness::on(&fake, WebhookKind::Json);
    let bare = WebhookNotice {
        priority: "info",
        task_gid: None,
        run_id: None,
        persona: None,
        id: 19,
        ..notice()
    };
    h.run(h.notifier.deliver(&bare)).expect("delivered");
    let body = fake.received()[0].json();
    assert_eq!(body["priority"], "info");
    assert_eq!(body["task_gid"], serde_json::Value::Null);
    assert_eq!(body["run_id"], serde_json::Value::Null);
    assert_eq!(body["persona"], serde_json::Value::Null);
    assert_eq!(
        fake.received()[0].header("idempotency-key"),
        Some("executor-19")
    );
}

#[test]
fn a_slack_notice_is_its_text_only() {
    let fake = FakeWebhook::start();
    let h = Harness::on(&fake, WebhookKind::Slack);
    h.deliver().expect("Slack answers 200 ok");
    let received = fake.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].header("content-type"), Some("application/json"));
    assert!(received[0].header("idempotency-key").is_none());
    assert_eq!(
        received[0].json(),
        json!({"text": "run 42 · fix/tab-preview-stuck waits for `approve 18` &lt;now&gt; &amp; then"})
    );
}

#[test]
fn a_500_is_transient_and_a_404_or_400_is_not() {
    let fake = FakeWebhook::start();
    let h = Harness::on(&fake, WebhookKind::Slack);
    for status in [500, 503] {
        fake.set_status(Some(status));
        let error = h.deliver().expect_err("server error");
        assert!(
            matches!(&error, WebhookError::Server { name, status: s } if name == "owner-pager" && *s == status),
            "{error:?}"
        );
        assert!(error.is_transient());
        assert_no_url(&error);
    }
    for (status, reason) in [
        (404, "no_service"),
        (400, "invalid_payload"),
        (403, "action_prohibited"),
        (410, "channel_is_archived"),
    ] {
        fake.set_status(Some(status));
        let error = h.deliver().expect_err("rejected");
        match &error {
            WebhookError::Rejected {
                name,
                status: s,
                body_excerpt,
            } => {
                assert_eq!(name, "owner-pager");
                assert_eq!(*s, status);
                assert_eq!(body_excerpt, reason);
            }
            other => panic!("{other:?}"),
        }
        assert!(!error.is_transient());
        assert_no_url(&error);
    }
    fake.set_status(None);
    h.deliver().expect("up again");
    let statuses: Vec<u16> = fake.received().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [500, 503, 404, 400, 403, 410, 200]);
}

#[test]
fn a_429_is_rate_limited_with_the_wait_it_names() {
    let fake = FakeWebhook::start();
    let h = Harness::on(&fake, WebhookKind::Slack);
    fake.set_reply(Some(Reply {
        status: 429,
        body: "rate_limited".into(),
        headers: vec![("Retry-After".into(), "30".into())],
    }));
    let error = h.deliver().expect_err("rate limited");
    assert!(
        matches!(error, WebhookError::RateLimited { retry_after, .. } if retry_after == Duration::from_secs(30)),
        "{error:?}"
    );
    assert!(error.is_transient());
    assert_no_url(&error);
    // Slack's usual one second.
    fake.set_status(Some(429));
    let error = h.deliver().expect_err("rate limited");
    assert!(
        matches!(error, WebhookError::RateLimited { retry_after, .. } if retry_after == Duration::from_secs(1)),
        "{error:?}"
    );
}

#[test]
fn a_redirect_is_not_followed() {
    let fake = FakeWebhook::start();
    let h = Harness::on(&fake, WebhookKind::Json);
    fake.set_reply(Some(Reply {
        status: 302,
        body: String::new(),
        headers: vec![("Location".into(), fake.url("/elsewhere"))],
    }));
    let error = h.deliver().expect_err("a redirect is refused");
    assert!(
        matches!(&error, WebhookError::Rejected { status: 302, .. }),
        "{error:?}"
    );
    assert!(!error.is_transient());
    assert_no_url(&error);
    let paths: Vec<String> = fake.received().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, [secret_path()]);
}

#[test]
fn the_url_is_in_no_error_even_when_the_receiver_echoes_it() {
    let fake = FakeWebhook::start();
    let h = Harness::on(&fake, WebhookKind::Slack);
    let url = fake.url(&secret_path());
    fake.set_reply(Some(Reply {
        status: 404,
        body: format!("no_service: nothing at {url} (token {SECRET_SEGMENT})"),
        headers: Vec::new(),
    }));
    let error = h.deliver().expect_err("rejected");
    assert_no_url(&error);
    assert!(error.to_string().contains("no_service"), "{error}");
    let shown = format!("{:?}", h.notifier);
    assert!(!shown.contains(SECRET_SEGMENT), "{shown}");
    assert!(shown.contains("owner-pager"), "{shown}");
}

#[test]
fn a_receiver_that_does_not_answer_is_unreachable_without_its_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let h = Harness::new(
        WebhookKind::Json,
        format!("http://{addr}{}", secret_path()),
        Duration::from_secs(5),
    );
    let error = h.deliver().expect_err("nobody listens");
    assert!(
        matches!(error, WebhookError::Unreachable { .. }),
        "{error:?}"
    );
    assert!(error.is_transient());
    assert_no_url(&error);
}

#[test]
fn a_receiver_too_slow_is_unreachable_without_its_url() {
    let fake = FakeWebhook::start();
    fake.set_delay(Duration::from_secs(3));
    let h = Harness::new(
        WebhookKind::Json,
        fake.url(&secret_path()),
        Duration::from_millis(300),
    );
    let error = h.deliver().expect_err("timed out");
    assert!(
        matches!(&error, WebhookError::Unreachable { message, .. } if message.contains("0.3")),
        "{error:?}"
    );
    assert!(error.is_transient());
    assert_no_url(&error);
}

//! GitHub's webhook deliveries: `POST /webhooks/github`. A delivery whose
//! `X-Hub-Signature-256` is the HMAC-SHA256 of its raw body under the webhook secret, taken
//! once by its `X-GitHub-Delivery`, of an event about a PR (checks, workflow runs, the PR,
//! its reviews and comments), asks the daemon to look at the PRs now instead of at its next
//! poll.
//!
//! A delivery is a hint, never the truth: nothing in its payload is acted on but the PR
//! numbers, which are only logged; the daemon reads the PR from GitHub itself (with its
//! answer cache expired). So a forged delivery with a leaked secret can at worst cause an
//! extra look. This module must never act on an unsigned or badly signed body, never read
//! the payload before the signature is checked, and never repeat a secret or a signature.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;
use tokio::sync::mpsc;

use crate::core::secret::Secret;
use crate::store::Store;

/// Where GitHub posts.
pub const PATH: &str = "/webhooks/github";

/// The store's name for GitHub's deliveries.
const SOURCE: &str = "github";

/// A delivery that asks for a look at the PRs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrLook {
    pub event: String,
    pub delivery: String,
    /// The PRs the delivery names (none: a check on a head no PR names yet, from a fork).
    pub prs: Vec<i64>,
}

/// What a delivery of `event` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// GitHub's test delivery, sent when the webhook is made.
    Ping,
    /// Look at the PRs (these numbers, as far as the payload names them).
    Look(Vec<i64>),
    /// An event executor does not act on.
    Ignored,
}

/// The events taken, and where each names its PRs.
pub fn asked(event: &str, payload: &Value) -> Asked {
    let numbers = |list: &Value| -> Vec<i64> {
        list.as_array()
            .map(|prs| prs.iter().filter_map(|p| p["number"].as_i64()).collect())
            .unwrap_or_default()
    };
    match event {
        "ping" => Asked::Ping,
        "check_suite" | "workflow_run" => Asked::Look(numbers(&payload[event]["pull_requests"])),
        // A check run names its PRs itself and through its suite (older servers: only there).
        "check_run" => {
            let mut prs = numbers(&payload["check_run"]["pull_requests"]);
            prs.extend(numbers(
                &payload["check_run"]["check_suite"]["pull_requests"],
            ));
            prs.sort_unstable();
            prs.dedup();
            Asked::Look(prs)
        }
        "pull_request" | "pull_request_review" | "pull_request_review_comment" => Asked::Look(
            payload["pull_request"]["number"]
                .as_i64()
                .into_iter()
                .collect(),
        ),
        // An issue comment concerns a PR only when its issue is one.
        "issue_comment" if !payload["issue"]["pull_request"].is_null() => {
            Asked::Look(payload["issue"]["number"].as_i64().into_iter().collect())
        }
        _ => Asked::Ignored,
    }
}

/// Whether `header` (`sha256=<hex>`) is the HMAC-SHA256 of `body` under `secret`, compared
/// in constant time.
pub fn signed(secret: &[u8], body: &[u8], header: Option<&str>) -> bool {
    let Some(given) = header
        .and_then(|h| h.strip_prefix("sha256="))
        .and_then(decode_hex)
    else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The endpoint's state.
struct Endpoint {
    secret: Secret,
    store: Arc<dyn Store>,
    /// When a delivery is taken.
    clock: Arc<dyn crate::core::clock::Clock>,
    looks: mpsc::UnboundedSender<PrLook>,
}

/// The route, handing each taken delivery's look to `looks`.
pub fn router(
    secret: Secret,
    store: Arc<dyn Store>,
    clock: Arc<dyn crate::core::clock::Clock>,
    looks: mpsc::UnboundedSender<PrLook>,
) -> axum::Router {
    let endpoint = Arc::new(Endpoint {
        secret,
        store,
        clock,
        looks,
    });
    axum::Router::new()
        .route(PATH, axum::routing::post(receive))
        .with_state(endpoint)
}

async fn receive(
    axum::extract::State(endpoint): axum::extract::State<Arc<Endpoint>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> (StatusCode, &'static str) {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if !signed(
        endpoint.secret.expose().as_bytes(),
        &body,
        header("x-hub-signature-256"),
    ) {
        tracing::warn!(
            delivery = header("x-github-delivery").unwrap_or("-"),
            "a GitHub webhook delivery without a valid signature; refused"
        );
        return (StatusCode::UNAUTHORIZED, "bad signature");
    }
    let (Some(event), Some(delivery)) = (header("x-github-event"), header("x-github-delivery"))
    else {
        return (
            StatusCode::BAD_REQUEST,
            "X-GitHub-Event and X-GitHub-Delivery are required",
        );
    };
    let Ok(payload) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "the body is not JSON");
    };
    let prs = match asked(event, &payload) {
        Asked::Ping => {
            tracing::info!(delivery, "GitHub's webhook ping arrived");
            return (StatusCode::OK, "pong");
        }
        Asked::Ignored => return (StatusCode::ACCEPTED, "event not used"),
        Asked::Look(prs) => prs,
    };
    match endpoint
        .store
        .take_delivery(SOURCE, delivery, endpoint.clock.now())
        .await
    {
        Ok(true) => {}
        Ok(false) => return (StatusCode::OK, "delivery already taken"),
        Err(error) => {
            // GitHub shows the failure on the webhook's page, where it can be redelivered;
            // the poll finds the change meanwhile.
            tracing::error!(%error, delivery, "cannot record a GitHub webhook delivery");
            return (StatusCode::SERVICE_UNAVAILABLE, "try again");
        }
    }
    tracing::info!(
        event,
        delivery,
        ?prs,
        "GitHub webhook: looking at the PRs now"
    );
    let _ = endpoint.looks.send(PrLook {
        event: event.to_string(),
        delivery: delivery.to_string(),
        prs,
    });
    (StatusCode::ACCEPTED, "looking")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sign(secret: &str, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key");
        mac.update(body);
        let bytes = mac.finalize().into_bytes();
        format!(
            "sha256={}",
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
        )
    }

    #[test]
    fn githubs_documented_example_signature_is_accepted() {
        // From GitHub's "Validating webhook deliveries": secret "It's a Secret to
        // Everybody", payload "Hello, World!".
        assert!(signed(
            b"It's a Secret to Everybody",
            b"Hello, World!",
            Some("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
        ));
    }

    #[test]
    fn a_wrong_missing_or_malformed_signature_is_refused() {
        let body = br#"{"action":"completed"}"#;
        let good = sign("s3cret", body);
        assert!(signed(b"s3cret", body, Some(&good)));
        assert!(!signed(b"other", body, Some(&good)));
        assert!(!signed(b"s3cret", b"{}", Some(&good)));
        assert!(!signed(b"s3cret", body, None));
        assert!(!signed(
            b"s3cret",
            body,
            Some(good.trim_start_matches("sha256="))
        ));
        assert!(!signed(b"s3cret", body, Some("sha256=zz")));
        assert!(!signed(b"s3cret", body, Some("sha256=abc")));
        assert!(!signed(
            b"s3cret",
            body,
            Some(&good.replace("sha256=", "sha1="))
        ));
    }

    #[test]
    fn each_event_names_its_prs() {
        let checks = json!({"pull_requests": [{"number": 7}, {"number": 9}]});
        assert_eq!(
            asked("check_suite", &json!({"check_suite": checks})),
            Asked::Look(vec![7, 9])
        );
        assert_eq!(
            asked("check_run", &json!({"check_run": checks})),
            Asked::Look(vec![7, 9])
        );
        assert_eq!(
            asked(
                "check_run",
                &json!({"check_run": {"pull_requests": [{"number": 9}], "check_suite": checks}})
            ),
            Asked::Look(vec![7, 9])
        );
        assert_eq!(
            asked(
                "workflow_run",
                &json!({"workflow_run": {"pull_requests": []}})
            ),
            Asked::Look(vec![])
        );
        for event in [
            "pull_request",
            "pull_request_review",
            "pull_request_review_comment",
        ] {
            assert_eq!(
                asked(event, &json!({"pull_request": {"number": 3}})),
                Asked::Look(vec![3]),
                "{event}"
            );
        }
        assert_eq!(
            asked(
                "issue_comment",
                &json!({"issue": {"number": 4, "pull_request": {"url": "…"}}})
            ),
            Asked::Look(vec![4])
        );
        assert_eq!(
            asked("issue_comment", &json!({"issue": {"number": 4}})),
            Asked::Ignored,
            "a comment on a plain issue"
        );
        assert_eq!(asked("ping", &json!({"zen": "…"})), Asked::Ping);
        assert_eq!(asked("star", &json!({})), Asked::Ignored);
    }
}

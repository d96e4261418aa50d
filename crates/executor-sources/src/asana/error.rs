//! Every way an Asana call can fail, in one enum, and the pure reading of a failed answer
//! (status, headers, body) into it, tested without a server.
//!
//! Asana's rules ("Errors" and "Rate limits" in its API docs): error bodies are
//! `{"errors": [{message, help}]}`, with `phrase` added on 500s; a bad or absent token is
//! `401` "Not Authorized"; too many requests is `429` with `Retry-After` in seconds (read
//! by the HTTP layer, which also takes an HTTP date, and capped at a day there).
//!
//! No variant holds the token or a request header: messages come from Asana's bodies (which
//! never echo credentials) and from paths the client built.

use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::header::HeaderMap;
use thiserror::Error;

use super::types::ErrorBody;
use executor_http::{self as http, retry, Class};

#[derive(Debug, Error)]
pub enum AsanaError {
    /// 401: the token is wrong, revoked or absent. `message` is Asana's.
    #[error("Asana refused the token (401): {message}")]
    Unauthorized { message: String },
    /// 429: wait `retry_after` (Asana's `Retry-After`) before calling again.
    #[error("Asana rate limit: retry after {}s", retry_after.as_secs())]
    RateLimited { retry_after: Duration },
    /// 5xx. `phrase` is what Asana support can look the incident up by.
    #[error("Asana server error {status}: {message}{}", phrase.as_deref().map(|p| format!(" (phrase: {p})")).unwrap_or_default())]
    Server {
        status: u16,
        message: String,
        phrase: Option<String>,
    },
    /// No answer: the connection failed (DNS, refused, TLS, reset) or timed out.
    #[error("cannot reach Asana: {message}")]
    Unreachable { message: String },
    /// 404: a project, section, workspace or task that does not exist or that the token's
    /// user cannot see.
    #[error("Asana has no {path}: {message}")]
    NotFound { path: String, message: String },
    /// Any other 4xx (400 for a bad parameter or an expired offset, 403, …).
    #[error("Asana answered {status} to {path}: {message}")]
    Http {
        status: u16,
        path: String,
        message: String,
    },
    /// A 2xx whose body is not the shape executor expects.
    #[error("cannot read Asana's answer: {what}")]
    Decode {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// A list that does not end: more pages than the client allows, or an offset the
    /// server already gave.
    #[error("Asana's list of {what} does not end: {reason}")]
    Paging { what: String, reason: String },
    /// The settings or the scope cannot be used (a bad base URL, a token unfit for a
    /// header, a gid that is not a number, nothing to read).
    #[error("invalid Asana settings: {0}")]
    Settings(String),
}

/// How long to wait after a 429 that came without a readable `Retry-After`.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(60);

impl AsanaError {
    /// Whether the same call may succeed later with nothing changed on executor's side.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. } | Self::Server { .. } | Self::Unreachable { .. }
        )
    }

    /// Whether this is Asana saying a pagination offset is no longer valid (a 400 whose
    /// message names the offset or the pagination token as expired or invalid): the list
    /// must be read again from its start.
    pub fn is_expired_offset(&self) -> bool {
        let Self::Http {
            status: 400,
            message,
            ..
        } = self
        else {
            return false;
        };
        let message = message.to_ascii_lowercase();
        (message.contains("offset") || message.contains("pagination token"))
            && (message.contains("expired") || message.contains("invalid"))
    }

    /// The earliest moment to call again, or `None` when retrying cannot help.
    pub fn retry_at(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Self::RateLimited { retry_after } => Some(retry::later(now, *retry_after)),
            _ if self.is_transient() => Some(now),
            _ => None,
        }
    }
}

/// The error for a response with a non-success status. `path` names what was asked.
pub fn classify(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    path: &str,
    now: DateTime<Utc>,
) -> AsanaError {
    let (message, phrase) = messages_of(body);
    match Class::of(status) {
        _ if status == 401 => AsanaError::Unauthorized { message },
        Class::TooManyRequests => AsanaError::RateLimited {
            retry_after: retry_after(headers, now).unwrap_or(DEFAULT_RETRY_AFTER),
        },
        _ if status == 404 => AsanaError::NotFound {
            path: path.to_owned(),
            message,
        },
        Class::Server => AsanaError::Server {
            status,
            message,
            phrase,
        },
        _ => AsanaError::Http {
            status,
            path: path.to_owned(),
            message,
        },
    }
}

/// `Retry-After` as whole seconds (Asana sends a whole number; a fraction is rounded up),
/// at most [`retry::MAX_WAIT`].
pub fn retry_after(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    let wait = retry::retry_after(headers, now)?;
    let whole = Duration::from_secs(wait.as_secs());
    Some(
        if whole < wait {
            whole + Duration::from_secs(1)
        } else {
            whole
        }
        .min(retry::MAX_WAIT),
    )
}

/// Asana's `errors[].message`s joined, shortened, with the first `phrase`; the raw body
/// (shortened) when it is not Asana's JSON.
fn messages_of(body: &[u8]) -> (String, Option<String>) {
    const MAX: usize = 300;
    let parsed = serde_json::from_slice::<ErrorBody>(body).ok();
    let (text, phrase) = match parsed {
        Some(parsed) if !parsed.errors.is_empty() => {
            let messages: Vec<&str> = parsed
                .errors
                .iter()
                .filter_map(|e| e.message.as_deref())
                .collect();
            let phrase = parsed.errors.iter().find_map(|e| e.phrase.clone());
            (messages.join("; "), phrase)
        }
        _ => (String::from_utf8_lossy(body).trim().to_owned(), None),
    };
    (http::shorten(&text, MAX), phrase)
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderValue, RETRY_AFTER};

    use super::*;

    fn fixed_now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_790_000_000, 0).expect("a fixed time")
    }

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/../../../shared/fixtures/http/asana/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
    }

    fn with_retry_after(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_str(value).expect("header"));
        headers
    }

    #[test]
    fn a_401_carries_asanas_message() {
        let error = classify(
            401,
            &HeaderMap::new(),
            &fixture("error_401.json"),
            "/tasks",
            fixed_now(),
        );
        match &error {
            AsanaError::Unauthorized { message } => assert_eq!(message, "Not Authorized"),
            other => panic!("{other:?}"),
        }
        assert!(!error.is_transient());
        assert_eq!(error.retry_at(fixed_now()), None);
    }

    #[test]
    fn a_429_waits_what_retry_after_says() {
        let body = br#"{"errors":[{"message":"You have made too many requests recently."}]}"#;
        let error = classify(429, &with_retry_after("30"), body, "/tasks", fixed_now());
        assert!(matches!(
            error,
            AsanaError::RateLimited { retry_after } if retry_after == Duration::from_secs(30)
        ));
        let error = classify(429, &with_retry_after("1.2"), body, "/tasks", fixed_now());
        assert!(matches!(
            error,
            AsanaError::RateLimited { retry_after } if retry_after == Duration::from_secs(2)
        ));
        let error = classify(429, &HeaderMap::new(), body, "/tasks", fixed_now());
        assert!(matches!(
            error,
            AsanaError::RateLimited { retry_after } if retry_after == DEFAULT_RETRY_AFTER
        ));
        let now = fixed_now();
        assert_eq!(
            error.retry_at(now),
            Some(now + chrono::Duration::seconds(60))
        );
    }

    #[test]
    fn a_huge_retry_after_is_capped_and_retry_at_never_panics() {
        let now = DateTime::parse_from_rfc3339("2026-03-16T09:00:00Z")
            .expect("now")
            .with_timezone(&Utc);
        let day = now + chrono::Duration::hours(24);
        let body = br#"{"errors":[{"message":"You have made too many requests recently."}]}"#;
        for value in ["99999999999", "1e20", "Fri, 31 Dec 9999 23:59:59 GMT"] {
            let error = classify(429, &with_retry_after(value), body, "/tasks", fixed_now());
            assert_eq!(error.retry_at(now), Some(day), "{value}: {error:?}");
        }
        for huge in [Duration::from_secs(99_999_999_999), Duration::MAX] {
            let error = AsanaError::RateLimited { retry_after: huge };
            assert_eq!(error.retry_at(now), Some(day), "{huge:?}");
        }
    }

    #[test]
    fn an_expired_offset_is_told_from_other_bad_requests() {
        let expired = classify(
            400,
            &HeaderMap::new(),
            br#"{"errors":[{"message":"offset: Your pagination token is invalid or has expired."}]}"#,
            "/tasks",
            fixed_now(),
        );
        assert!(expired.is_expired_offset(), "{expired}");
        let other = classify(
            400,
            &HeaderMap::new(),
            br#"{"errors":[{"message":"opt_fields: Unknown field: colour"}]}"#,
            "/tasks",
            fixed_now(),
        );
        assert!(!other.is_expired_offset(), "{other}");
        let server = classify(
            500,
            &HeaderMap::new(),
            b"offset expired",
            "/tasks",
            fixed_now(),
        );
        assert!(!server.is_expired_offset());
    }

    #[test]
    fn a_500_keeps_the_phrase_and_passes() {
        let body = br#"{"errors":[{"message":"Server Error","phrase":"6 sad squid snuggle softly","help":"..."}]}"#;
        let error = classify(
            500,
            &HeaderMap::new(),
            body,
            "/projects/1/tasks",
            fixed_now(),
        );
        assert!(
            error.to_string().contains("6 sad squid snuggle softly"),
            "{error}"
        );
        assert!(error.is_transient());
        let now = fixed_now();
        assert_eq!(error.retry_at(now), Some(now));
    }

    #[test]
    fn other_failures_name_the_path_and_a_raw_body_is_shortened() {
        let error = classify(
            404,
            &HeaderMap::new(),
            br#"{"errors":[{"message":"project: Unknown object: 42"}]}"#,
            "/projects/42/tasks",
            fixed_now(),
        );
        assert!(error.to_string().contains("/projects/42/tasks"), "{error}");
        assert!(error.to_string().contains("Unknown object"), "{error}");
        let long = "x".repeat(1000);
        let error = classify(
            400,
            &HeaderMap::new(),
            long.as_bytes(),
            "/tasks",
            fixed_now(),
        );
        assert!(error.to_string().len() < 400, "{error}");
        assert!(!error.is_transient());
    }
}

//! Every way a GitHub call can fail, in one enum. Each error says whether it passes by
//! itself ([`GithubError::is_transient`]) and when the affected run may try again
//! ([`GithubError::retry_at`]); the runner parks that run until then and goes on with the
//! others.
//!
//! No variant holds the token or a request header: messages come from GitHub's response
//! bodies (which never echo credentials) and from paths the client built.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use thiserror::Error;

/// One entry of a GraphQL `errors` array (HTTP 200 with `errors`, e.g. `NOT_FOUND`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GraphQlError {
    /// `NOT_FOUND`, `FORBIDDEN`, `RATE_LIMITED`, …; absent for syntax errors.
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    pub message: String,
    /// Where in the query it happened, e.g. `["repository", "pullRequest"]`.
    #[serde(default)]
    pub path: Vec<serde_json::Value>,
}

impl fmt::Display for GraphQlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Some(kind) => write!(f, "{kind}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

#[derive(Debug, Error)]
pub enum GithubError {
    /// The primary rate limit is spent (403/429 with `x-ratelimit-remaining: 0`).
    #[error("GitHub rate limit exhausted until {reset_at}")]
    RateLimited { reset_at: DateTime<Utc> },
    /// A secondary rate limit (403/429 with `retry-after`, or GitHub's message saying so).
    #[error("GitHub secondary rate limit: retry after {}s", retry_after.as_secs())]
    SecondaryLimit { retry_after: Duration },
    /// GitHub answered 5xx.
    #[error("GitHub server error {status}")]
    Server { status: u16 },
    /// No answer within the client's timeout.
    #[error("GitHub did not answer in time")]
    Timeout,
    /// The connection failed (DNS, refused, TLS, reset).
    #[error("cannot reach GitHub: {message}")]
    Transport { message: String },
    /// 404: the resource is gone (a deleted PR, a run whose logs expired) or never existed.
    #[error("GitHub has no {path}")]
    NotFound { path: String },
    /// HTTP 200 with a GraphQL `errors` array.
    #[error("GitHub GraphQL errors: {}", join(errors))]
    GraphQl { errors: Vec<GraphQlError> },
    /// Any other 4xx (401 bad credentials, 422 validation, 403 permissions).
    #[error("GitHub answered {status}: {message}")]
    Http { status: u16, message: String },
    /// A 2xx whose body is not the shape executor expects.
    #[error("cannot read GitHub's answer to {what}")]
    Decode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// The settings cannot make a client (bad base URL, a token unfit for a header).
    #[error("invalid GitHub settings: {0}")]
    Settings(String),
    /// One call made for several PRs failed as a whole: each PR gets this. It passes and
    /// retries as the failure inside does, but is never "not found" for any one PR (a
    /// repository the token cannot see answers `NOT_FOUND` too, and must not end every
    /// run).
    #[error("{0}")]
    Shared(Arc<GithubError>),
}

fn join(errors: &[GraphQlError]) -> String {
    let parts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    parts.join("; ")
}

/// How GitHub's GraphQL answer starts when a query ran out of time on its side.
const GRAPHQL_TIMEOUT: &str = "Something went wrong while executing your query";

/// How long to wait after a secondary limit that came without `retry-after`: GitHub's
/// guidance is "at least one minute".
pub const SECONDARY_DEFAULT_WAIT: Duration = Duration::from_secs(60);

impl GithubError {
    /// Whether the same call may succeed later with nothing changed on executor's side.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::RateLimited { .. }
            | Self::SecondaryLimit { .. }
            | Self::Server { .. }
            | Self::Timeout
            | Self::Transport { .. } => true,
            Self::GraphQl { errors } => errors.iter().any(|e| match e.kind.as_deref() {
                Some(kind) => matches!(kind, "RATE_LIMITED" | "SERVICE_UNAVAILABLE" | "INTERNAL"),
                // GitHub's word for a query that timed out on its side; it comes untyped.
                None => e.message.starts_with(GRAPHQL_TIMEOUT),
            }),
            Self::Shared(inner) => inner.is_transient(),
            Self::NotFound { .. } | Self::Http { .. } | Self::Decode { .. } | Self::Settings(_) => {
                false
            }
        }
    }

    /// The earliest moment the affected run should call again, or `None` when retrying the
    /// same call cannot help. 5xx, timeouts and connection failures answer `now`: the run
    /// tries again on its next tick, whose interval is the back-off.
    pub fn retry_at(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Self::RateLimited { reset_at } => Some(crate::retry::capped(*reset_at, now).max(now)),
            Self::SecondaryLimit { retry_after } => Some(crate::retry::later(now, *retry_after)),
            Self::Shared(inner) => inner.retry_at(now),
            _ if self.is_transient() => Some(now),
            _ => None,
        }
    }

    /// A 404, or a GraphQL `NOT_FOUND` (a deleted PR looks like either, depending on the API).
    pub fn is_not_found(&self) -> bool {
        match self {
            Self::NotFound { .. } => true,
            Self::GraphQl { errors } => errors
                .iter()
                .any(|e| e.kind.as_deref() == Some("NOT_FOUND")),
            _ => false,
        }
    }
}

pub fn to_chrono(duration: Duration) -> chrono::Duration {
    chrono::Duration::from_std(duration).unwrap_or(chrono::Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("timestamp")
            .with_timezone(&Utc)
    }

    #[test]
    fn retry_at_follows_the_kind_of_failure() {
        let now = at("2026-03-16T11:02:41Z");
        let reset = at("2026-03-16T12:00:00Z");
        let cases: Vec<(GithubError, Option<DateTime<Utc>>)> = vec![
            (GithubError::RateLimited { reset_at: reset }, Some(reset)),
            (
                GithubError::RateLimited {
                    reset_at: at("2026-03-16T11:00:00Z"),
                },
                Some(now),
            ),
            (
                GithubError::SecondaryLimit {
                    retry_after: Duration::from_secs(60),
                },
                Some(at("2026-03-16T11:03:41Z")),
            ),
            (GithubError::Server { status: 502 }, Some(now)),
            (GithubError::Timeout, Some(now)),
            (
                GithubError::NotFound {
                    path: "/repos/o/r/pulls/1".into(),
                },
                None,
            ),
            (
                GithubError::Http {
                    status: 422,
                    message: "Validation Failed".into(),
                },
                None,
            ),
        ];
        for (error, expected) in cases {
            assert_eq!(error.retry_at(now), expected, "{error}");
            assert_eq!(error.is_transient(), expected.is_some(), "{error}");
        }
    }
}

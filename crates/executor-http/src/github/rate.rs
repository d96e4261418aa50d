//! Reading GitHub's answers that are not successes: rate limits first, then the rest. Pure
//! functions over the status, the headers and the body, so the rules are tested without a
//! server.
//!
//! The rules (GitHub's "Rate limits for the REST API"):
//! - 403 or 429 with `retry-after`: a secondary limit; wait that many seconds. It takes
//!   precedence over `x-ratelimit-remaining`.
//! - 403 or 429 with `x-ratelimit-remaining: 0`: the primary limit; wait until
//!   `x-ratelimit-reset` (UNIX seconds).
//! - Every wait and reset is within a day of now ([`crate::retry::MAX_WAIT`]): a
//!   value past that (or past any calendar) is cut to it, never a panic.
//! - 403 or 429 whose message says "secondary rate limit", without `retry-after`: wait at
//!   least a minute. A 429 that says nothing at all is treated the same way.
//! - 404 is [`GithubError::NotFound`], 5xx [`GithubError::Server`], other 4xx
//!   [`GithubError::Http`] with GitHub's `message`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::header::HeaderMap;

use super::error::{GithubError, SECONDARY_DEFAULT_WAIT};
use crate::{self as http, retry, Class};

/// What GitHub last said of one of its request budgets (`x-ratelimit-remaining` and
/// `-reset` of the latest answer that carried them): how many requests are left until when.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Quota {
    /// `rest` or `graphql`.
    pub bucket: &'static str,
    pub remaining: u64,
    #[serde(serialize_with = "executor_core::time::serde_utc::optional")]
    pub reset_at: Option<DateTime<Utc>>,
    /// When the answer that said it came.
    #[serde(serialize_with = "executor_core::time::serde_utc::required")]
    pub seen_at: DateTime<Utc>,
}

/// What the rate-limit headers of any response say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateHeaders {
    pub remaining: Option<u64>,
    pub reset_at: Option<DateTime<Utc>>,
    pub retry_after: Option<Duration>,
    /// `x-ratelimit-resource: graphql`: the limit is the GraphQL bucket's, not REST's.
    pub graphql: bool,
}

impl RateHeaders {
    /// The headers as of `now` (reset times and waits capped).
    pub fn read(headers: &HeaderMap, now: DateTime<Utc>) -> Self {
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        Self {
            remaining: text("x-ratelimit-remaining").and_then(|v| v.parse().ok()),
            reset_at: text("x-ratelimit-reset").and_then(|v| retry::reset_at(v, now)),
            // GitHub sends delay-seconds; the HTTP-date form is read too.
            retry_after: retry::retry_after(headers, now),
            graphql: text("x-ratelimit-resource") == Some("graphql"),
        }
    }
}

/// The error for a response with a non-success status, as of `now`. `path` names the
/// resource for a 404.
pub fn classify(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    path: &str,
    now: DateTime<Utc>,
) -> GithubError {
    let rate = RateHeaders::read(headers, now);
    let message = http::message_of(body, "message");
    if status == 403 || status == 429 {
        if let Some(retry_after) = rate.retry_after {
            return GithubError::SecondaryLimit { retry_after };
        }
        if rate.remaining == Some(0) {
            if let Some(reset_at) = rate.reset_at {
                return GithubError::RateLimited { reset_at };
            }
        }
        if status == 429
            || message
                .to_ascii_lowercase()
                .contains("secondary rate limit")
        {
            return GithubError::SecondaryLimit {
                retry_after: SECONDARY_DEFAULT_WAIT,
            };
        }
    }
    match Class::of(status) {
        Class::NotFound => GithubError::NotFound {
            path: path.to_owned(),
        },
        Class::Server => GithubError::Server { status },
        _ => GithubError::Http { status, message },
    }
}

/// The `rel="next"` target of a `Link` header, as GitHub paginates REST lists.
pub fn next_link(link: &str) -> Option<&str> {
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        let is_next = params
            .split(';')
            .any(|p| matches!(p.trim(), "rel=\"next\"" | "rel=next"));
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        is_next.then_some(target)
    })
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderName, HeaderValue};

    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                HeaderName::from_bytes(name.as_bytes()).expect("name"),
                HeaderValue::from_str(value).expect("value"),
            );
        }
        map
    }

    const PRIMARY_BODY: &[u8] =
        br#"{"message":"API rate limit exceeded for installation ID 64213377.","status":"403"}"#;
    const SECONDARY_BODY: &[u8] =
        br#"{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","status":"403"}"#;

    #[test]
    fn responses_are_classified_as_github_documents() {
        let primary = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1773662400"),
            ("x-ratelimit-resource", "core"),
        ]);
        let now = DateTime::parse_from_rfc3339("2026-03-16T09:00:00Z")
            .expect("now")
            .with_timezone(&Utc);
        let reset = DateTime::parse_from_rfc3339("2026-03-16T12:00:00Z")
            .expect("reset")
            .with_timezone(&Utc);
        let with_retry = headers(&[
            ("retry-after", "60"),
            ("x-ratelimit-remaining", "4712"),
            ("x-ratelimit-reset", "1773658800"),
        ]);
        let none = HeaderMap::new();
        let minute = Duration::from_secs(60);
        let cases: Vec<(u16, &HeaderMap, &[u8], GithubError)> = vec![
            (
                403,
                &primary,
                PRIMARY_BODY,
                GithubError::RateLimited { reset_at: reset },
            ),
            (
                429,
                &primary,
                PRIMARY_BODY,
                GithubError::RateLimited { reset_at: reset },
            ),
            (
                403,
                &with_retry,
                SECONDARY_BODY,
                GithubError::SecondaryLimit {
                    retry_after: minute,
                },
            ),
            (
                429,
                &with_retry,
                b"",
                GithubError::SecondaryLimit {
                    retry_after: minute,
                },
            ),
            (
                403,
                &none,
                SECONDARY_BODY,
                GithubError::SecondaryLimit {
                    retry_after: minute,
                },
            ),
            (
                429,
                &none,
                b"",
                GithubError::SecondaryLimit {
                    retry_after: minute,
                },
            ),
            (
                403,
                &none,
                br#"{"message":"Resource not accessible by integration"}"#,
                GithubError::Http {
                    status: 403,
                    message: "Resource not accessible by integration".into(),
                },
            ),
            (
                404,
                &none,
                br#"{"message":"Not Found"}"#,
                GithubError::NotFound { path: "/p".into() },
            ),
            (
                502,
                &none,
                b"<html>bad gateway</html>",
                GithubError::Server { status: 502 },
            ),
            (
                422,
                &none,
                br#"{"message":"Validation Failed"}"#,
                GithubError::Http {
                    status: 422,
                    message: "Validation Failed".into(),
                },
            ),
        ];
        for (status, headers, body, expected) in cases {
            let got = classify(status, headers, body, "/p", now);
            assert_eq!(
                format!("{got:?}"),
                format!("{expected:?}"),
                "status {status}"
            );
        }
    }

    #[test]
    fn the_next_link_is_found_among_the_others() {
        let link = r#"<https://api.github.com/repositories/1/commits/abc/check-runs?per_page=2&page=2>; rel="next", <https://api.github.com/repositories/1/commits/abc/check-runs?per_page=2&page=3>; rel="last""#;
        assert_eq!(
            next_link(link),
            Some("https://api.github.com/repositories/1/commits/abc/check-runs?per_page=2&page=2")
        );
        let last_page = r#"<https://api.github.com/x?page=1>; rel="prev", <https://api.github.com/x?page=1>; rel="first""#;
        assert_eq!(next_link(last_page), None);
        assert_eq!(next_link("garbage"), None);
    }
}

//! One exchange with a service, and what its answer means before any service's own rules:
//! the transport failures (no answer in time, no connection) as a typed [`Transport`] error
//! with secrets cut out, the body read (up to a limit), the status sorted into the classes
//! every client treats alike ([`Class`]), and the body's own words (`message`) shortened.
//!
//! Each client maps these into its own error type, whose transient variants (a timeout, no
//! connection, a 5xx, a rate limit) tell the caller to try again later.

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{RequestBuilder, StatusCode};
use serde::de::DeserializeOwned;
use thiserror::Error;

use super::redact::Redactor;

/// No answer came. Both kinds are transient.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum Transport {
    /// Nothing within the request's timeout.
    #[error("no answer within {}s", after.as_secs_f64())]
    Timeout { after: Duration },
    /// The connection failed (DNS, refused, TLS, reset), with the cause's chain.
    #[error("{message}")]
    Unreachable { message: String },
}

impl Transport {
    /// The failure of `error`, for a request bounded by `timeout`, with `redactor`'s
    /// secrets cut out of the message (reqwest's chain never holds request headers, and the
    /// URL is dropped, but a URL can be the secret).
    pub fn from_reqwest(error: reqwest::Error, timeout: Duration, redactor: &Redactor) -> Self {
        if error.is_timeout() {
            return Self::Timeout { after: timeout };
        }
        // reqwest's own text is only "error sending request"; the cause (refused, DNS,
        // TLS) is further down the chain.
        let error = error.without_url();
        let mut message = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        Self::Unreachable {
            message: redactor.scrub(&message),
        }
    }
}

/// A whole answer: status, headers and (up to the limit asked) body.
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// Sends `request` and reads its whole answer; `max_body` cuts the body (the rest is not
/// read), for receivers whose answer only goes into an error.
pub async fn exchange(
    request: RequestBuilder,
    timeout: Duration,
    redactor: &Redactor,
    max_body: Option<usize>,
) -> Result<Answer, Transport> {
    let fail = |e| Transport::from_reqwest(e, timeout, redactor);
    let mut response = request.send().await.map_err(fail)?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = match max_body {
        None => response.bytes().await.map_err(fail)?.to_vec(),
        Some(max) => {
            let mut body = Vec::new();
            while body.len() < max {
                match response.chunk().await {
                    Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                    Ok(None) => break,
                    // A body that broke off keeps what came: the status has been answered.
                    Err(_) => break,
                }
            }
            body.truncate(max);
            body
        }
    };
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// What a status means before a service's own rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Success,
    /// 3xx: never followed (it could carry the credential to another host).
    Redirect,
    /// 429.
    TooManyRequests,
    /// 404 or 410.
    NotFound,
    /// 5xx: the service's fault, transient.
    Server,
    /// Any other 4xx: the request's fault, not transient.
    Client,
}

impl Class {
    pub fn of(status: u16) -> Self {
        match status {
            200..=299 => Self::Success,
            300..=399 => Self::Redirect,
            429 => Self::TooManyRequests,
            404 | 410 => Self::NotFound,
            500..=599 => Self::Server,
            _ => Self::Client,
        }
    }
}

/// How much of a service's text goes into an error.
pub const MESSAGE_CHARS: usize = 300;

/// `text` cut to `max` characters, with `…` when cut.
pub fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The string at `key` of a JSON body (`message` for GitHub and Gitea, `msg` for Zulip);
/// else the raw body, trimmed; shortened either way.
pub fn message_of(body: &[u8], key: &str) -> String {
    let text = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get(key).and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned());
    shorten(&text, MESSAGE_CHARS)
}

/// A body that is not the shape expected: where in it the reading broke, and why.
#[derive(Debug, Error)]
#[error("{source}")]
pub struct Undecodable {
    /// The path in the document (`data[3].gid`), empty at its top.
    pub at: String,
    #[source]
    pub source: serde_json::Error,
}

impl Undecodable {
    /// `what`, with where in the body it broke when that is not the top.
    pub fn describe(&self, what: &str) -> String {
        if self.at.is_empty() || self.at == "." {
            what.to_owned()
        } else {
            format!("{what} (at `{}`)", self.at)
        }
    }
}

/// Decodes a JSON body, saying where it broke.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, Undecodable> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|e| Undecodable {
        at: e.path().to_string(),
        source: e.into_inner(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_fall_into_their_classes() {
        let cases = [
            (200, Class::Success),
            (201, Class::Success),
            (204, Class::Success),
            (301, Class::Redirect),
            (304, Class::Redirect),
            (400, Class::Client),
            (401, Class::Client),
            (404, Class::NotFound),
            (410, Class::NotFound),
            (422, Class::Client),
            (429, Class::TooManyRequests),
            (500, Class::Server),
            (503, Class::Server),
        ];
        for (status, class) in cases {
            assert_eq!(Class::of(status), class, "{status}");
        }
    }

    #[test]
    fn messages_are_read_and_shortened() {
        assert_eq!(
            message_of(br#"{"message":"Not Found"}"#, "message"),
            "Not Found"
        );
        assert_eq!(
            message_of(b"  <html>bad</html> ", "message"),
            "<html>bad</html>"
        );
        let long = "x".repeat(1000);
        assert_eq!(
            message_of(long.as_bytes(), "msg").chars().count(),
            MESSAGE_CHARS + 1
        );
    }

    #[test]
    fn a_decode_error_says_where() {
        #[derive(serde::Deserialize, Debug)]
        struct Item {
            #[allow(dead_code)]
            gid: String,
        }
        let error = decode::<Vec<Item>>(br#"[{"gid":"1"},{"gid":2}]"#).expect_err("bad");
        assert_eq!(error.describe("tasks"), "tasks (at `[1].gid`)");
        let error = decode::<Vec<Item>>(b"<html>").expect_err("bad");
        assert_eq!(error.describe("tasks"), "tasks");
    }
}

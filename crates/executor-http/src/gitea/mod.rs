//! Gitea over its REST API (`…/api/v1`): a repository's issues listed by label, closed, and
//! commented on; its pull requests, commit statuses, reviews and labels (`pulls.rs`). One [`GiteaClient`] per Gitea host (it is not bound to a repository: every
//! call names one); cloning is cheap and shares the connection pool.
//!
//! What Gitea does, as confirmed in its own sources (go-gitea/gitea:
//! `templates/swagger/v1_json.tmpl`, `routers/api/v1/repo/issue.go`,
//! `services/context/api.go`, `models/issues/issue_search.go`, `modules/structs/issue.go`,
//! `modules/structs/issue_comment.go`) and its issue tracker:
//!
//! - Auth: the header `Authorization: token <TOKEN>` (the swagger's `AuthorizationHeaderToken`:
//!   "API tokens must be prepended with "token" followed by a space"). Gitea also takes a
//!   token in the query (`token=`, `access_token=`); this client never does that.
//! - `GET /repos/{owner}/{repo}/issues`: `state` = `open` (the default) | `closed` | `all`,
//!   `labels` = comma-separated names, `type` = `issues` | `pulls`, `since` / `before`
//!   (RFC 3339, "updated after" / "before", compared in whole seconds, both inclusive in the
//!   database search; the other issue indexers were not read), `page` (1-based), `limit`
//!   (the page size: 0 means `[api] DEFAULT_PAGING_NUM`, 30 by default, and more than
//!   `[api] MAX_RESPONSE_ITEMS`, 50 by default, is cut to it). The answer is a JSON array
//!   of `Issue`, newest created first, with the headers `X-Total-Count` (every match) and
//!   `Link` (`rel="next"`, `"last"`, `"first"`, `"prev"`). The `Link` URLs are built on the
//!   server's `ROOT_URL`, which need not be the host this client talks to, so they are
//!   never followed: the next page is this client's own URL with the next `page`.
//! - The labels filter: the swagger says "issues that have any of this labels", but the code
//!   read turns each name into a required label (an issue must carry all of them), and drops
//!   names the repository has no label for, so a filter of only unknown names filters
//!   nothing and lists every issue. Hence [`GiteaClient::list_issues`] checks the answer:
//!   only issues carrying one of the asked labels come back. Callers wanting "any of" ask
//!   one label per call.
//! - `Issue`: `id`, `number`, `title`, `body` (a string, `""` when empty), `state` (`open` |
//!   `closed`), `labels` (`[{id, name, color, …}]`), `assignee` (deprecated: the first of
//!   `assignees`, which is `null` when there are none), `user`, `html_url`, `created_at`,
//!   `updated_at`, `closed_at` (`null` while open), `pull_request` (`null` for an issue).
//!   Times are RFC 3339 in the server's time zone, not always `Z`.
//! - `PATCH /repos/{owner}/{repo}/issues/{index}` with `{"state": "closed"}`: `201` and the
//!   issue as it now is. Closing a closed issue changes nothing and is still a `201`; `412`
//!   when open dependencies block the closing, `403` when the token may not, `404` when
//!   there is no such issue.
//! - `POST /repos/{owner}/{repo}/issues/{index}/comments` with `{"body": …}` (required,
//!   not empty): `201` and the `Comment` (`id`, `html_url`, `issue_url`, `user`, `body`,
//!   `created_at`, `updated_at`).
//! - Errors: `{"message": …, "url": <the API docs URL>}`; a production server's `500` has
//!   an empty message, and a `404` may have no useful body.
//! - A wrong token: go-gitea/gitea#21671 and #24439 report that Gitea up to 1.19 treated an
//!   unknown token as no token (a public repository then lists as for anyone, a private one
//!   answers `404`, a write `401` "token is required"); #21671 is closed as fixed, with such
//!   requests answering `401`. Against an old server, a revoked token can therefore look
//!   like a repository without matching issues.
//!
//! A failure is returned as a typed [`GiteaError`] and never retried here; the caller polls
//! again later ([`GiteaError::is_transient`]).
//!
//! What it must never do: put the token anywhere but the `Authorization` header of a request
//! to the configured API host (not in a URL, a body, an error, a `Debug` or a tracing
//! field), follow a redirect, or follow a `Link` to wherever it points.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{json, Value};
use url::Url;

use crate::{self as http, retry, Class, RateGate, Redactor, Secret, Transport};

/// How long a 429 without a `Retry-After` keeps the client away from Gitea.
const RATE_WAIT_UNSAID: Duration = Duration::from_secs(60);

mod actions;
mod pulls;
pub use actions::{GiteaActionJob, GiteaActionRun, GiteaActionStep};
pub use pulls::{
    DiffLine, GiteaBranch, GiteaCombinedStatus, GiteaComment, GiteaPull, GiteaReview,
    GiteaReviewComment, GiteaStatus, NewGiteaPull, WIP_PREFIX,
};

/// The most a list page holds on a Gitea with default settings (`[api] MAX_RESPONSE_ITEMS`).
pub const MAX_PAGE_SIZE: u32 = 50;

/// Tuning with sensible defaults.
#[derive(Clone, Debug)]
pub struct GiteaOptions {
    /// The whole request, body included.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub user_agent: String,
    /// `limit` of each list request (at least 1). Gitea cuts it to its `MAX_RESPONSE_ITEMS`
    /// and pages by its own size, so a smaller server limit only means more pages.
    pub page_size: u32,
    /// Pages one list may take before the client gives up on it (a server that never stops
    /// saying there is more).
    pub max_pages: u32,
    /// What `Retry-After` dates are measured against.
    pub clock: std::sync::Arc<dyn executor_core::clock::Clock>,
}

impl Default for GiteaOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            user_agent: http::USER_AGENT.into(),
            page_size: MAX_PAGE_SIZE,
            max_pages: 200,
            clock: std::sync::Arc::new(executor_core::clock::SystemClock),
        }
    }
}

/// Every way a Gitea call can fail. No variant holds the token: messages come from Gitea's
/// answers (with the token cut out, should a proxy echo it) and from paths the client built.
#[derive(Debug, thiserror::Error)]
pub enum GiteaError {
    /// No answer within the client's timeout.
    #[error("Gitea did not answer in time")]
    Timeout,
    /// The connection failed (DNS, refused, TLS, reset).
    #[error("cannot reach Gitea: {message}")]
    Transport { message: String },
    /// Gitea (or a proxy before it) answered 5xx.
    #[error("Gitea server error {status}")]
    Server { status: u16 },
    /// 429, from a proxy or a rate limiter before Gitea.
    #[error("Gitea is rate limiting: {}", match retry_after {
        Some(wait) => format!("retry after {}s", wait.as_secs()),
        None => "retry later".to_string(),
    })]
    RateLimited { retry_after: Option<Duration> },
    /// 404 (or 410): no such repository or issue, or one the token may not see.
    #[error("Gitea has no {path}")]
    NotFound { path: String },
    /// Any other answer that is not a success: 401 (the token), 403 (its rights), 412
    /// (open dependencies), 422 (validation), or a redirect, which is never followed.
    #[error("Gitea answered {status}: {message}")]
    Http { status: u16, message: String },
    /// A success whose body is not the shape expected.
    #[error("cannot read Gitea's answer to {what}")]
    Decode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// A list that kept saying there was more.
    #[error("Gitea kept answering with more {what} after {pages} pages")]
    TooManyPages { what: &'static str, pages: u32 },
    /// The settings or the arguments cannot make a request (bad base URL, a token unfit for
    /// a header, an empty owner, a label with a comma).
    #[error("invalid Gitea settings: {0}")]
    Settings(String),
}

impl GiteaError {
    /// Whether the same call may succeed later with nothing changed on executor's side.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Timeout | Self::Transport { .. } | Self::Server { .. } | Self::RateLimited { .. }
        )
    }

    /// A 404 or 410: the repository or issue is not there (or not visible to the token).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// The HTTP status Gitea answered, when it answered one that failed the call.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Server { status } | Self::Http { status, .. } => Some(*status),
            Self::NotFound { .. } => Some(404),
            Self::RateLimited { .. } => Some(429),
            _ => None,
        }
    }
}

/// Gitea's `state` filter of the issue list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GiteaStateFilter {
    #[default]
    Open,
    Closed,
    All,
}

impl GiteaStateFilter {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closed => "closed",
            Self::All => "all",
        }
    }
}

/// Which issues [`GiteaClient::list_issues`] asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GiteaIssueQuery {
    /// Gitea's `labels`: see the module notes for what it matches; empty asks for any. A
    /// name holding a comma cannot be asked for and is refused.
    pub labels: Vec<String>,
    pub state: GiteaStateFilter,
    /// Only issues updated at or after this time (whole seconds: a fraction is dropped,
    /// which asks for a little more, never less).
    pub since: Option<DateTime<Utc>>,
}

/// An issue as Gitea's `Issue` schema has it, the fields executor reads.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GiteaIssue {
    pub id: u64,
    pub number: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub title: String,
    /// `""` for an issue opened without text.
    #[serde(default, deserialize_with = "null_as_default")]
    pub body: String,
    pub state: GiteaIssueState,
    #[serde(default, deserialize_with = "null_as_default")]
    pub labels: Vec<GiteaLabel>,
    /// Deprecated upstream: the first of `assignees`.
    #[serde(default)]
    pub assignee: Option<GiteaUser>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub assignees: Vec<GiteaUser>,
    /// Who opened it.
    #[serde(default)]
    pub user: Option<GiteaUser>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub html_url: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[serde(default)]
    pub closed_at: Option<DateTime<Utc>>,
    /// Present when the "issue" is a pull request.
    #[serde(default)]
    pub pull_request: Option<GiteaPullRequestMeta>,
}

impl GiteaIssue {
    pub fn is_pull_request(&self) -> bool {
        self.pull_request.is_some()
    }

    /// The label names, as named upstream, empty names left out.
    pub fn label_names(&self) -> impl Iterator<Item = &str> {
        self.labels
            .iter()
            .map(|l| l.name.as_str())
            .filter(|n| !n.trim().is_empty())
    }

    /// The assignee: `assignee`, else the first of `assignees`.
    pub fn first_assignee(&self) -> Option<&GiteaUser> {
        self.assignee.as_ref().or(self.assignees.first())
    }

    /// Whether it carries one of `labels`, ignoring case.
    fn carries_any(&self, labels: &[String]) -> bool {
        self.label_names()
            .any(|name| labels.iter().any(|l| l.trim().eq_ignore_ascii_case(name)))
    }
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum GiteaIssueState {
    Open,
    Closed,
    #[serde(other)]
    Other,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct GiteaLabel {
    #[serde(default)]
    pub id: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct GiteaUser {
    #[serde(default)]
    pub id: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub login: String,
}

/// The `pull_request` key of an issue that is a pull request.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct GiteaPullRequestMeta {
    #[serde(default)]
    pub merged: bool,
    #[serde(default)]
    pub merged_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub html_url: Option<String>,
}

/// The Gitea client. See the module notes.
#[derive(Clone)]
pub struct GiteaClient {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    /// Ends with `/`, so joining keeps its path.
    api_url: Url,
    /// `token <TOKEN>`, marked sensitive so no `Debug` of a request prints it.
    auth: HeaderValue,
    /// Cuts the token out of an error message, should something echo it.
    redactor: Redactor,
    options: GiteaOptions,
    /// The service's name for its pause: `gitea <api_url>`.
    service: String,
    /// Shut by a 429 until its `Retry-After` (every client of this Gitea in the process
    /// shares it, see [`crate::pauses`]): no request is sent to Gitea before then.
    gate: Arc<RateGate<()>>,
}

impl fmt::Debug for GiteaClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GiteaClient")
            .field("api_url", &self.inner.api_url.as_str())
            .field("token", &"***")
            .finish()
    }
}

impl GiteaClient {
    /// A client of the Gitea API at `api_url` (`https://gitea.example.com/api/v1`) with
    /// `token`, from [`Secret::from_env`] or [`Secret::from_file`].
    pub fn new(api_url: Url, token: Secret, options: GiteaOptions) -> Result<Self, GiteaError> {
        let mut api_url =
            http::client::base_url(api_url, "the API URL").map_err(GiteaError::Settings)?;
        if !api_url.path().ends_with('/') {
            let path = format!("{}/", api_url.path());
            api_url.set_path(&path);
        }
        let auth = http::client::authorization(&format!("token {}", token.expose()))
            .map_err(|_| GiteaError::Settings("the token cannot be sent in a header".into()))?;
        let http = http::client::build(
            &http::HttpOptions {
                timeout: Some(options.timeout),
                connect_timeout: options.connect_timeout,
                user_agent: options.user_agent.clone(),
            },
            http::client::accept("application/json"),
        )
        .map_err(GiteaError::Settings)?;
        let service = format!("gitea {api_url}");
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                api_url,
                auth,
                redactor: Redactor::new([&token]),
                options,
                gate: crate::pauses::gate(&service),
                service,
            }),
        })
    }

    /// The API URL, with a trailing `/`.
    pub fn api_url(&self) -> &Url {
        &self.inner.api_url
    }

    /// This Gitea's name for its pause ([`crate::pauses`]): `gitea <api_url>`.
    pub fn service(&self) -> &str {
        &self.inner.service
    }

    /// `GET /repos/{owner}/{repo}/issues` with `query` and `type=issues`, every page (by
    /// `page` number, to [`GiteaOptions::max_pages`]), each issue once, oldest change
    /// first. Pull requests are left out, and so is an issue carrying none of the asked
    /// labels (Gitea lists every issue when it knows none of them).
    pub async fn list_issues(
        &self,
        owner: &str,
        repo: &str,
        query: &GiteaIssueQuery,
    ) -> Result<Vec<GiteaIssue>, GiteaError> {
        if let Some(bad) = query
            .labels
            .iter()
            .find(|l| l.trim().is_empty() || l.contains(','))
        {
            return Err(GiteaError::Settings(format!(
                "the label `{bad}` cannot be asked for: Gitea's labels filter is a comma list"
            )));
        }
        let base = self.repo_url(owner, repo, &["issues"])?;
        let limit = self.inner.options.page_size.max(1);
        let mut issues: Vec<GiteaIssue> = Vec::new();
        let mut index: HashMap<u64, usize> = HashMap::new();
        let mut listed: u64 = 0;
        for page in 1..=self.inner.options.max_pages.max(1) {
            let mut url = base.clone();
            {
                let mut pairs = url.query_pairs_mut();
                pairs
                    .append_pair("state", query.state.as_str())
                    .append_pair("type", "issues");
                if !query.labels.is_empty() {
                    let labels: Vec<&str> = query.labels.iter().map(|l| l.trim()).collect();
                    pairs.append_pair("labels", &labels.join(","));
                }
                if let Some(since) = query.since {
                    pairs.append_pair("since", &since.to_rfc3339_opts(SecondsFormat::Secs, true));
                }
                pairs
                    .append_pair("page", &page.to_string())
                    .append_pair("limit", &limit.to_string());
            }
            let (headers, body) = self.send(Method::GET, url, None).await?;
            let items: Vec<GiteaIssue> = decode(&body, "issues")?;
            let count = items.len() as u64;
            listed += count;
            for issue in items {
                if issue.is_pull_request()
                    || (!query.labels.is_empty() && !issue.carries_any(&query.labels))
                {
                    continue;
                }
                match index.get(&issue.number) {
                    // An issue opened while the pages were read moves the others one
                    // place down: the one at a page's end comes again.
                    Some(&at) => {
                        if issue.updated_at > issues[at].updated_at {
                            issues[at] = issue;
                        }
                    }
                    None => {
                        index.insert(issue.number, issues.len());
                        issues.push(issue);
                    }
                }
            }
            let more = match total_count(&headers) {
                Some(total) => listed < total,
                None => has_next(&headers) || count >= u64::from(limit),
            };
            if count == 0 || !more {
                issues.sort_by_key(|i| (i.updated_at, i.number));
                return Ok(issues);
            }
        }
        Err(GiteaError::TooManyPages {
            what: "issues",
            pages: self.inner.options.max_pages.max(1),
        })
    }

    /// `PATCH /repos/{owner}/{repo}/issues/{number}` with `{"state": "closed"}`: the issue
    /// as it now is. Closing a closed issue is not an error.
    pub async fn close_issue(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
    ) -> Result<GiteaIssue, GiteaError> {
        let url = self.repo_url(owner, repo, &["issues", &number.to_string()])?;
        let (_, body) = self
            .send(Method::PATCH, url, Some(&json!({ "state": "closed" })))
            .await?;
        decode(&body, "the closed issue")
    }

    /// `POST /repos/{owner}/{repo}/issues/{number}/comments` with `{"body": body}`: the new
    /// comment's id.
    pub async fn comment_issue(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
        body: &str,
    ) -> Result<u64, GiteaError> {
        #[derive(Deserialize)]
        struct Comment {
            id: u64,
        }
        let url = self.repo_url(owner, repo, &["issues", &number.to_string(), "comments"])?;
        let (_, answer) = self
            .send(Method::POST, url, Some(&json!({ "body": body })))
            .await?;
        let comment: Comment = decode(&answer, "the new comment")?;
        Ok(comment.id)
    }

    // ----- machinery -----

    /// `{api}/repos/{owner}/{repo}/{rest…}`, each segment percent-encoded.
    fn repo_url(&self, owner: &str, repo: &str, rest: &[&str]) -> Result<Url, GiteaError> {
        let (owner, repo) = (owner.trim(), repo.trim());
        if owner.is_empty() || repo.is_empty() || owner.contains('/') || repo.contains('/') {
            return Err(GiteaError::Settings(format!(
                "`{owner}/{repo}` is not a repository's owner/name"
            )));
        }
        let mut url = self.inner.api_url.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments
                .pop_if_empty()
                .extend(["repos", owner, repo])
                .extend(rest);
        }
        Ok(url)
    }

    /// One request with the token; a success's headers and body, or the error for the rest.
    async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<(HeaderMap, Vec<u8>), GiteaError> {
        let now = self.inner.options.clock.now();
        // Gitea said "not before": nothing is sent until then, and the caller is told how
        // long is left.
        if let Some((until, ())) = self.inner.gate.check(now) {
            return Err(GiteaError::RateLimited {
                retry_after: Some(retry::until(until, now)),
            });
        }
        let path = url.path().to_owned();
        let mut request = self
            .inner
            .http
            .request(method.clone(), url)
            .header(header::AUTHORIZATION, self.inner.auth.clone());
        if let Some(body) = body {
            request = request.json(body);
        }
        let timeout = self.inner.options.timeout;
        let answer = http::exchange(request, timeout, &self.inner.redactor, None).await?;
        let status = answer.status.as_u16();
        tracing::debug!(method = %method, path, status, "Gitea call");
        if !answer.status.is_success() {
            let error = self.classify(status, &answer.headers, &answer.body, &path);
            if let GiteaError::RateLimited { retry_after } = &error {
                let now = self.inner.options.clock.now();
                let wait = retry_after.unwrap_or(RATE_WAIT_UNSAID);
                crate::pauses::pause(&self.inner.service, retry::later(now, wait), now).await;
            }
            tracing::debug!(path, error = %error, "Gitea call failed");
            return Err(error);
        }
        Ok((answer.headers, answer.body))
    }

    /// The error for a response that is not a success. `path` names the resource of a 404.
    fn classify(&self, status: u16, headers: &HeaderMap, body: &[u8], path: &str) -> GiteaError {
        match Class::of(status) {
            Class::NotFound => GiteaError::NotFound {
                path: path.to_owned(),
            },
            Class::TooManyRequests => GiteaError::RateLimited {
                retry_after: retry::retry_after(headers, self.inner.options.clock.now()),
            },
            Class::Server => GiteaError::Server { status },
            Class::Redirect => {
                let target = header_text(headers, header::LOCATION.as_str()).unwrap_or("nowhere");
                GiteaError::Http {
                    status,
                    message: self.scrub(&format!(
                        "a redirect to {}, not followed: set the API URL to where Gitea is",
                        shorten(target)
                    )),
                }
            }
            _ => GiteaError::Http {
                status,
                message: self.scrub(&message_of(status, body)),
            },
        }
    }

    /// `text` with the token cut out, should a proxy or a server echo a request's headers.
    fn scrub(&self, text: &str) -> String {
        self.inner.redactor.scrub(text)
    }
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// `X-Total-Count`: how many items match the whole query.
fn total_count(headers: &HeaderMap) -> Option<u64> {
    header_text(headers, "x-total-count").and_then(|v| v.parse().ok())
}

/// Whether `Link` has a `rel="next"` (its URL is not used; see the module notes).
fn has_next(headers: &HeaderMap) -> bool {
    header_text(headers, header::LINK.as_str()).is_some_and(|link| {
        link.split(',').any(|part| {
            part.split(';')
                .skip(1)
                .any(|p| matches!(p.trim(), "rel=\"next\"" | "rel=next"))
        })
    })
}

/// Gitea's `message`, shortened; the raw body (shortened) when it is not Gitea's JSON; the
/// status's name when both are empty.
fn message_of(status: u16, body: &[u8]) -> String {
    let text = http::message_of(body, "message");
    if text.trim().is_empty() {
        return reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("no message")
            .to_owned();
    }
    text
}

fn shorten(text: &str) -> String {
    http::shorten(text, http::answer::MESSAGE_CHARS)
}

impl From<Transport> for GiteaError {
    fn from(failure: Transport) -> Self {
        match failure {
            Transport::Timeout { .. } => GiteaError::Timeout,
            Transport::Unreachable { message } => GiteaError::Transport { message },
        }
    }
}

fn decode<T: DeserializeOwned>(body: &[u8], what: &'static str) -> Result<T, GiteaError> {
    serde_json::from_slice(body).map_err(|source| GiteaError::Decode { what, source })
}

/// A value Gitea may send as `null`, read as its default.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderName;

    use super::*;

    fn client(base: &str, token: &str) -> Result<GiteaClient, GiteaError> {
        GiteaClient::new(
            Url::parse(base).expect("url"),
            Secret::new(token),
            GiteaOptions::default(),
        )
    }

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

    #[test]
    fn repo_urls_keep_the_api_path_and_encode_each_segment() {
        for base in [
            "https://gitea.example.com/api/v1",
            "https://gitea.example.com/api/v1/",
            "https://gitea.example.com/api/v1?x=1#frag",
        ] {
            let client = client(base, "gta_x").expect("client");
            assert_eq!(
                client.api_url().as_str(),
                "https://gitea.example.com/api/v1/"
            );
            let url = client
                .repo_url("mkowalski", "lumen browser", &["issues", "12", "comments"])
                .expect("url");
            assert_eq!(
                url.as_str(),
                "https://gitea.example.com/api/v1/repos/mkowalski/lumen%20browser/issues/12/comments"
            );
        }
        let client = client("http://127.0.0.1:3000/git/api/v1", "gta_x").expect("client");
        let url = client.repo_url("o", "r", &["issues"]).expect("url");
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:3000/git/api/v1/repos/o/r/issues"
        );
        for (owner, repo) in [("", "r"), ("o", " "), ("o/x", "r"), ("o", "r/x")] {
            let error = client.repo_url(owner, repo, &[]).expect_err("refused");
            assert!(matches!(error, GiteaError::Settings(_)), "{error:?}");
        }
    }

    #[test]
    fn bad_settings_are_refused_without_echoing_the_token() {
        for base in ["ftp://gitea.example.com/api/v1", "mailto:me@example.com"] {
            let error = client(base, "gta_x").expect_err("not http");
            assert!(matches!(error, GiteaError::Settings(_)), "{error:?}");
        }
        let error =
            client("https://me:pw@gitea.example.com/api/v1", "gta_x").expect_err("credentials");
        assert!(!error.to_string().contains("pw"), "{error}");
        let error =
            client("https://gitea.example.com/api/v1", "gta_bad\nline").expect_err("header");
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains("gta_bad"), "{shown}");
    }

    #[test]
    fn the_client_prints_without_its_token() {
        let client = client("https://gitea.example.com/api/v1", "gta_supersecret").expect("client");
        let shown = format!("{client:?}");
        assert!(shown.contains("gitea.example.com"), "{shown}");
        assert!(!shown.contains("gta_supersecret"), "{shown}");
        assert!(!format!("{:?}", client.inner.auth).contains("gta_supersecret"));
    }

    #[test]
    fn failed_answers_are_classified_and_scrubbed() {
        let client = client("https://gitea.example.com/api/v1", "gta_echoed").expect("client");
        let none = HeaderMap::new();
        let cases: Vec<(u16, HeaderMap, &[u8], &str)> = vec![
            (
                401,
                none.clone(),
                br#"{"message":"token is required","url":"https://gitea.example.com/api/swagger"}"#,
                "Gitea answered 401: token is required",
            ),
            (
                404,
                none.clone(),
                b"",
                "Gitea has no /api/v1/repos/o/r/issues",
            ),
            (
                500,
                none.clone(),
                br#"{"message":"","url":"https://gitea.example.com/api/swagger"}"#,
                "Gitea server error 500",
            ),
            (
                429,
                headers(&[("retry-after", "30")]),
                b"slow down",
                "Gitea is rate limiting: retry after 30s",
            ),
            (
                412,
                none.clone(),
                br#"{"message":"cannot close this issue or pull request because it still has open dependencies","url":""}"#,
                "Gitea answered 412: cannot close this issue or pull request because it still has open dependencies",
            ),
            (
                403,
                none.clone(),
                b"",
                "Gitea answered 403: Forbidden",
            ),
            (
                400,
                none.clone(),
                b"<html>bad request: Authorization: token gta_echoed</html>",
                "Gitea answered 400: <html>bad request: Authorization: token ***</html>",
            ),
            (
                301,
                headers(&[("location", "https://gitea.example.com/api/v1/repos/o/r/issues")]),
                b"",
                "Gitea answered 301: a redirect to https://gitea.example.com/api/v1/repos/o/r/issues, not followed: set the API URL to where Gitea is",
            ),
        ];
        for (status, headers, body, shown) in cases {
            let error = client.classify(status, &headers, body, "/api/v1/repos/o/r/issues");
            assert_eq!(error.to_string(), shown);
            let transient = status == 429 || status >= 500;
            assert_eq!(error.is_transient(), transient, "{error}");
            assert_eq!(error.is_not_found(), status == 404, "{error}");
            assert_eq!(error.status(), Some(status), "{error}");
            assert!(!format!("{error:?}").contains("gta_echoed"));
        }
    }

    #[test]
    fn more_pages_are_read_from_the_headers() {
        assert_eq!(
            total_count(&headers(&[("x-total-count", "120")])),
            Some(120)
        );
        assert_eq!(total_count(&HeaderMap::new()), None);
        let link = r#"<https://gitea.example.com/api/v1/repos/o/r/issues?limit=50&page=2>; rel="next",<https://gitea.example.com/api/v1/repos/o/r/issues?limit=50&page=3>; rel="last""#;
        assert!(has_next(&headers(&[("link", link)])));
        let last = r#"<https://gitea.example.com/api/v1/repos/o/r/issues?page=1>; rel="first",<https://gitea.example.com/api/v1/repos/o/r/issues?page=2>; rel="prev""#;
        assert!(!has_next(&headers(&[("link", last)])));
        assert!(!has_next(&HeaderMap::new()));
    }

    #[test]
    fn an_issue_reads_from_giteas_shape() {
        let issue: GiteaIssue = serde_json::from_value(json!({
            "id": 4121, "url": "https://gitea.example.com/api/v1/repos/o/r/issues/7",
            "html_url": "https://gitea.example.com/o/r/issues/7", "number": 7,
            "user": { "id": 3, "login": "mkowalski", "username": "mkowalski" },
            "original_author": "", "original_author_id": 0,
            "title": "Tab preview sticks", "body": "", "ref": "", "assets": [],
            "labels": [{ "id": 11, "name": "executor", "color": "e11d21", "exclusive": false }],
            "milestone": null, "assignee": null, "assignees": null,
            "state": "closed", "is_locked": false, "comments": 2,
            "created_at": "2026-03-16T09:00:00+01:00", "updated_at": "2026-03-16T10:30:05+01:00",
            "closed_at": "2026-03-16T10:30:05+01:00", "due_date": null, "time_estimate": 0,
            "pull_request": null, "repository": { "id": 1, "name": "r", "owner": "o", "full_name": "o/r" },
            "pin_order": 0,
        }))
        .expect("issue");
        assert_eq!(issue.state, GiteaIssueState::Closed);
        assert_eq!(issue.body, "");
        assert!(issue.assignees.is_empty() && issue.first_assignee().is_none());
        assert!(!issue.is_pull_request());
        assert_eq!(issue.label_names().collect::<Vec<_>>(), ["executor"]);
        assert_eq!(
            issue.updated_at.to_rfc3339_opts(SecondsFormat::Secs, true),
            "2026-03-16T09:30:05Z"
        );
        assert!(issue.carries_any(&["EXECUTOR".into()]));
        assert!(!issue.carries_any(&["agent".into()]));

        let pr: GiteaIssue = serde_json::from_value(json!({
            "id": 4122, "number": 8, "title": "Fix", "body": null, "state": "open",
            "labels": null, "assignee": { "id": 3, "login": "mkowalski" },
            "assignees": [{ "id": 3, "login": "mkowalski" }],
            "created_at": "2026-03-16T09:00:00Z", "updated_at": "2026-03-16T09:00:00Z",
            "pull_request": { "merged": false, "merged_at": null, "draft": false,
                              "html_url": "https://gitea.example.com/o/r/pulls/8" },
        }))
        .expect("pull request");
        assert!(pr.is_pull_request());
        assert_eq!(
            pr.first_assignee().map(|u| u.login.as_str()),
            Some("mkowalski")
        );
    }
}

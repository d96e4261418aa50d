//! The Asana client: auth, timeouts, offset pagination, and the few calls the Asana source
//! makes (the tasks of a project, of a section, of the token owner's My Tasks, and a
//! comment on a task). Cloning is cheap and shares the connection pool.
//!
//! A failure is returned as a typed [`AsanaError`] and never retried here: the caller polls
//! again later ([`AsanaError::retry_at`]).
//!
//! What it must never do: put the token anywhere but the `Authorization` header of a request
//! to the configured API base (not in a URL, a body, an error or a tracing field), follow a
//! redirect, or follow a `next_page` link: only the `offset` is taken from it and sent back
//! with the client's own query, so a page cannot send the token to another host.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use reqwest::header::{self, HeaderValue};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use url::Url;

use super::error::{classify, AsanaError};
use super::types::{AsanaStory, AsanaTask, Envelope, Page, MAX_PAGE_SIZE, TASK_OPT_FIELDS};
use executor_http::{self as http, Redactor, Secret, Transport};

/// Asana's API base.
pub const DEFAULT_API_BASE: &str = "https://app.asana.com/api/1.0";

/// Where the client talks to and as whom. The token is a personal access token (or an
/// OAuth access token), from [`Secret::from_env`] or [`Secret::from_file`].
#[derive(Clone, Debug)]
pub struct AsanaSettings {
    /// [`DEFAULT_API_BASE`], or the test fake.
    pub api_base: Url,
    pub token: Secret,
}

impl AsanaSettings {
    /// Asana itself, with this token.
    pub fn new(token: Secret) -> Self {
        Self {
            api_base: Url::parse(DEFAULT_API_BASE).expect("DEFAULT_API_BASE is a valid URL"),
            token,
        }
    }
}

/// Tuning with sensible defaults.
#[derive(Clone, Debug)]
pub struct AsanaOptions {
    /// The whole request, body included.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub user_agent: String,
    /// `limit` of each list page, 1–100 (clamped).
    pub page_size: u32,
    /// Pages one list may take before the client gives up on it (a server that never stops
    /// answering with a `next_page`).
    pub max_pages: usize,
    /// What `Retry-After` dates are measured against.
    pub clock: std::sync::Arc<dyn executor_core::clock::Clock>,
}

impl Default for AsanaOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            user_agent: http::USER_AGENT.into(),
            page_size: MAX_PAGE_SIZE,
            max_pages: 1000,
            clock: std::sync::Arc::new(executor_core::clock::SystemClock),
        }
    }
}

/// Which tasks of a project, a section or My Tasks to read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskQuery {
    /// Only tasks changed at or after this time. Asana filters by `modified_since` only on
    /// `GET /tasks`, so a project or section read with it goes there (`project=` or
    /// `section=`) instead of to `/projects/{gid}/tasks` or `/sections/{gid}/tasks`.
    pub modified_since: Option<DateTime<Utc>>,
    /// Leave out tasks completed before the read (`completed_since=now`).
    pub incomplete_only: bool,
}

impl TaskQuery {
    /// Every task, completed ones included.
    pub fn all() -> Self {
        Self::default()
    }

    /// Tasks changed at or after `since`, completed ones included.
    pub fn modified_since(since: DateTime<Utc>) -> Self {
        Self {
            modified_since: Some(since),
            incomplete_only: false,
        }
    }
}

/// The Asana client. See the module docs.
#[derive(Clone)]
pub struct AsanaClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AsanaClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsanaClient")
            .field("api_base", &self.inner.api_base.as_str())
            .field("token", &"***")
            .finish()
    }
}

struct Inner {
    http: reqwest::Client,
    redactor: Redactor,
    api_base: Url,
    /// `Bearer <token>`, marked sensitive so no `Debug` of a request prints it.
    auth: HeaderValue,
    options: AsanaOptions,
}

impl AsanaClient {
    /// A client with the default options.
    pub fn new(settings: AsanaSettings) -> Result<Self, AsanaError> {
        Self::with_options(settings, AsanaOptions::default())
    }

    pub fn with_options(
        settings: AsanaSettings,
        options: AsanaOptions,
    ) -> Result<Self, AsanaError> {
        let api_base = http::client::base_url(settings.api_base, "the API base URL")
            .map_err(AsanaError::Settings)?;
        let auth = http::client::authorization(&format!("Bearer {}", settings.token.expose()))
            .map_err(|_| AsanaError::Settings("the token cannot be sent in a header".into()))?;
        let http = http::client::build(
            &http::HttpOptions {
                timeout: Some(options.timeout),
                connect_timeout: options.connect_timeout,
                user_agent: options.user_agent.clone(),
            },
            http::client::accept("application/json"),
        )
        .map_err(AsanaError::Settings)?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                redactor: Redactor::new([&settings.token]),
                api_base,
                auth,
                options,
            }),
        })
    }

    /// The API base this client calls.
    pub fn api_base(&self) -> &Url {
        &self.inner.api_base
    }

    // ----- operations -----

    /// Every task of a project (`GET /projects/{gid}/tasks`; with `modified_since`,
    /// `GET /tasks?project={gid}`), in the project's order, following `next_page.offset`.
    pub async fn project_tasks(
        &self,
        project_gid: &str,
        query: &TaskQuery,
    ) -> Result<Vec<AsanaTask>, AsanaError> {
        check_gid("project", project_gid)?;
        let url = match query.modified_since {
            None => self.url(&["projects", project_gid, "tasks"]),
            Some(_) => self.url_with(&["tasks"], &[("project", project_gid)]),
        };
        self.tasks(url, query, format!("the tasks of project {project_gid}"))
            .await
    }

    /// Every task of a section (`GET /sections/{gid}/tasks`; with `modified_since`,
    /// `GET /tasks?section={gid}`).
    pub async fn section_tasks(
        &self,
        section_gid: &str,
        query: &TaskQuery,
    ) -> Result<Vec<AsanaTask>, AsanaError> {
        check_gid("section", section_gid)?;
        let url = match query.modified_since {
            None => self.url(&["sections", section_gid, "tasks"]),
            Some(_) => self.url_with(&["tasks"], &[("section", section_gid)]),
        };
        self.tasks(url, query, format!("the tasks of section {section_gid}"))
            .await
    }

    /// Every task assigned to the token's user in a workspace (their My Tasks):
    /// `GET /tasks?assignee=me&workspace={gid}`. Asana wants both or neither.
    pub async fn my_tasks(
        &self,
        workspace_gid: &str,
        query: &TaskQuery,
    ) -> Result<Vec<AsanaTask>, AsanaError> {
        check_gid("workspace", workspace_gid)?;
        let url = self.url_with(
            &["tasks"],
            &[("assignee", "me"), ("workspace", workspace_gid)],
        );
        self.tasks(url, query, format!("My Tasks in workspace {workspace_gid}"))
            .await
    }

    /// A comment on a task: `POST /tasks/{gid}/stories` with `{"data": {"text": …}}`.
    pub async fn add_comment(&self, task_gid: &str, text: &str) -> Result<AsanaStory, AsanaError> {
        check_gid("task", task_gid)?;
        let url = self.url(&["tasks", task_gid, "stories"]);
        let body = json!({ "data": { "text": text } });
        let bytes = self.send(Method::POST, url, Some(&body)).await?;
        let story: Envelope<AsanaStory> =
            decode(&bytes, &format!("the comment posted on task {task_gid}"))?;
        Ok(story.data)
    }

    // ----- machinery -----

    /// `{api_base}/{segments…}`, each segment percent-encoded.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.inner.api_base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    fn url_with(&self, segments: &[&str], pairs: &[(&str, &str)]) -> Url {
        let mut url = self.url(segments);
        url.query_pairs_mut().extend_pairs(pairs);
        url
    }

    /// Every page of a task list, first to last. The offset goes back with the same query,
    /// as Asana requires.
    async fn tasks(
        &self,
        mut url: Url,
        query: &TaskQuery,
        what: String,
    ) -> Result<Vec<AsanaTask>, AsanaError> {
        {
            let mut pairs = url.query_pairs_mut();
            pairs.append_pair("opt_fields", TASK_OPT_FIELDS);
            let limit = self.inner.options.page_size.clamp(1, MAX_PAGE_SIZE);
            pairs.append_pair("limit", &limit.to_string());
            if let Some(since) = query.modified_since {
                pairs.append_pair(
                    "modified_since",
                    &since.to_rfc3339_opts(SecondsFormat::Millis, true),
                );
            }
            if query.incomplete_only {
                pairs.append_pair("completed_since", "now");
            }
        }
        let mut guard = PageGuard::new(self.inner.options.max_pages);
        let mut tasks = Vec::new();
        let mut offset: Option<String> = None;
        let mut pages = 0usize;
        let mut restarted = false;
        loop {
            let mut page_url = url.clone();
            if let Some(offset) = &offset {
                page_url.query_pairs_mut().append_pair("offset", offset);
            }
            let bytes = match self.send(Method::GET, page_url, None).await {
                Err(error) if offset.is_some() && !restarted && error.is_expired_offset() => {
                    // Asana: the offset "will expire after some time, as data may have
                    // changed"; the list is read again from its start, once.
                    tracing::warn!(%what, pages, %error, "Asana's page offset expired; reading the list again from its start");
                    restarted = true;
                    tasks.clear();
                    offset = None;
                    pages = 0;
                    guard = PageGuard::new(self.inner.options.max_pages);
                    continue;
                }
                other => other?,
            };
            let page: Page<AsanaTask> = decode(&bytes, &what)?;
            tasks.extend(page.data);
            pages += 1;
            if pages > 1 || page.next_page.is_some() {
                // A long read says how far it got, page by page.
                tracing::info!(%what, pages, tasks = tasks.len(), more = page.next_page.is_some(), "read a page from Asana");
            }
            match page.next_page {
                None => return Ok(tasks),
                Some(next) => {
                    guard
                        .advance(&next.offset)
                        .map_err(|reason| AsanaError::Paging {
                            what: what.clone(),
                            reason,
                        })?;
                    offset = Some(next.offset);
                }
            }
        }
    }

    /// One request with the token; a non-success answer becomes its error.
    async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<Vec<u8>, AsanaError> {
        let path = self.api_path(&url);
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
        tracing::debug!(method = %method, path, status, "Asana call");
        if !answer.status.is_success() {
            return Err(classify(
                status,
                &answer.headers,
                &answer.body,
                &path,
                self.inner.options.clock.now(),
            ));
        }
        Ok(answer.body)
    }

    /// The path below the API base (`/projects/1/tasks`), for errors and logs.
    fn api_path(&self, url: &Url) -> String {
        let base = self.inner.api_base.path().trim_end_matches('/');
        let path = url.path();
        match path.strip_prefix(base) {
            Some(rest) if rest.starts_with('/') => rest.to_owned(),
            _ => path.to_owned(),
        }
    }
}

/// Stops a list that does not end: a server that keeps answering with a `next_page`, or
/// one that sends an offset it sent before (which would loop forever).
#[derive(Debug)]
pub struct PageGuard {
    max_pages: usize,
    pages: usize,
    seen: HashSet<String>,
}

impl PageGuard {
    /// A guard for a list whose first page has been read.
    pub fn new(max_pages: usize) -> Self {
        Self {
            max_pages: max_pages.max(1),
            pages: 1,
            seen: HashSet::new(),
        }
    }

    /// Whether the page at `offset` may be read; the reason when not.
    pub fn advance(&mut self, offset: &str) -> Result<(), String> {
        if offset.is_empty() {
            return Err("a next page with an empty offset".into());
        }
        if !self.seen.insert(offset.to_owned()) {
            return Err(format!(
                "the same offset came back after {} pages",
                self.pages
            ));
        }
        if self.pages >= self.max_pages {
            return Err(format!("more than {} pages", self.max_pages));
        }
        self.pages += 1;
        Ok(())
    }
}

/// Asana's gids are decimal numbers sent as strings.
pub fn check_gid(kind: &str, gid: &str) -> Result<(), AsanaError> {
    if gid.is_empty() || gid.len() > 64 || !gid.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AsanaError::Settings(format!(
            "the {kind} gid `{}` is not a number",
            gid.escape_debug()
        )));
    }
    Ok(())
}

impl From<Transport> for AsanaError {
    fn from(failure: Transport) -> Self {
        AsanaError::Unreachable {
            message: failure.to_string(),
        }
    }
}

/// Decodes a 2xx body; the error names what was read and where in the body it broke.
fn decode<T: DeserializeOwned>(body: &[u8], what: &str) -> Result<T, AsanaError> {
    http::decode(body).map_err(|e| AsanaError::Decode {
        what: e.describe(what),
        source: e.source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(base: &str) -> AsanaClient {
        AsanaClient::new(AsanaSettings {
            api_base: Url::parse(base).expect("url"),
            token: Secret::new("2/1201987654320001/1209999999999999:fakePATsecret"),
        })
        .expect("client")
    }

    #[test]
    fn the_guard_stops_a_list_that_never_ends() {
        let mut guard = PageGuard::new(3);
        assert_eq!(guard.advance("a"), Ok(()));
        assert_eq!(guard.advance("b"), Ok(()));
        let error = guard.advance("c").expect_err("a fourth page");
        assert!(error.contains("more than 3 pages"), "{error}");
    }

    #[test]
    fn the_guard_stops_an_offset_that_comes_back() {
        let mut guard = PageGuard::new(1000);
        assert_eq!(guard.advance("eyJ0eXAi.one"), Ok(()));
        assert_eq!(guard.advance("eyJ0eXAi.two"), Ok(()));
        let error = guard.advance("eyJ0eXAi.one").expect_err("a loop");
        assert!(error.contains("same offset"), "{error}");
        assert!(guard.advance("").is_err());
    }

    #[test]
    fn urls_sit_below_the_base_path() {
        for base in [
            "https://app.asana.com/api/1.0",
            "https://app.asana.com/api/1.0/",
        ] {
            let client = client(base);
            let url = client.url_with(&["tasks"], &[("assignee", "me"), ("workspace", "12")]);
            assert_eq!(
                url.as_str(),
                "https://app.asana.com/api/1.0/tasks?assignee=me&workspace=12"
            );
            let url = client.url(&["projects", "1209512345678901", "tasks"]);
            assert_eq!(client.api_path(&url), "/projects/1209512345678901/tasks");
        }
        assert_eq!(
            AsanaSettings::new(Secret::new("x")).api_base.as_str(),
            "https://app.asana.com/api/1.0"
        );
    }

    #[test]
    fn the_client_never_prints_its_token() {
        let client = client("https://app.asana.com/api/1.0");
        let shown = format!("{client:?}");
        assert!(!shown.contains("fakePATsecret"), "{shown}");
        let settings = AsanaSettings::new(Secret::new("2/1/2:fakePATsecret"));
        assert!(!format!("{settings:?}").contains("fakePATsecret"));
    }

    #[test]
    fn a_base_url_with_credentials_or_a_bad_gid_is_refused() {
        let error = AsanaClient::new(AsanaSettings {
            api_base: Url::parse("https://user:pw@app.asana.com/api/1.0").expect("url"),
            token: Secret::new("x"),
        })
        .expect_err("credentials in the URL");
        assert!(matches!(error, AsanaError::Settings(_)));
        assert!(check_gid("project", "1209512345678901").is_ok());
        for bad in ["", "12a", "../1", "1 2"] {
            assert!(check_gid("project", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_decode_error_names_what_and_where() {
        let body = br#"{"data":[{"gid":"1","modified_at":"yesterday"}],"next_page":null}"#;
        let error =
            decode::<Page<AsanaTask>>(body, "the tasks of project 1").expect_err("bad time");
        let shown = error.to_string();
        assert!(shown.contains("the tasks of project 1"), "{shown}");
        assert!(shown.contains("data[0].modified_at"), "{shown}");
    }
}

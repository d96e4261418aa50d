//! The one GitHub client of the process: auth, timeouts, caches, pagination, and the
//! operations the orchestrator performs. Cloning is cheap and shares everything (the
//! connection pool, the caches, the rate-limit gate, the request counter).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use url::Url;

use super::error::{to_chrono, GithubError, GraphQlError};
use super::rate::{classify, next_link, Quota, RateHeaders};
use super::types::{
    CheckRuns, CheckRunsPage, CombinedStatus, Issue, IssueComment, IssueQuery, Job, JobsPage,
    Label, LogExcerpt, MergeAnswer, NewPullRequest, PullRequest, ResolvedThread, Review,
    ReviewComment, ReviewEvent, ReviewThread,
};
use crate::{self as http, retry, Answer, RateGate, Redactor, Secret, Transport};
use executor_core::clock::{Clock, SystemClock};

/// Where the client talks to and as whom. The config layer builds it; the token comes from
/// [`Secret::from_env`] or [`Secret::from_file`].
#[derive(Clone, Debug)]
pub struct GithubSettings {
    /// `https://api.github.com/`, `https://ghe.example.com/api/v3/`, or the test fake.
    pub api_base: Url,
    pub owner: String,
    pub repo: String,
    pub token: Secret,
}

/// Tuning with sensible defaults.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// How long a GET answer (or a GraphQL query's) is reused without asking GitHub at all:
    /// the calls made for several runs within one tick share one request.
    pub cache_ttl: Duration,
    /// How many URLs the ETag cache remembers; the least recently used go first.
    pub cache_capacity: usize,
    /// The whole request, body included.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub user_agent: String,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            cache_ttl: Duration::from_secs(10),
            cache_capacity: 2048,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            user_agent: http::USER_AGENT.into(),
        }
    }
}

/// How much of a job log [`GithubClient::job_log_excerpt`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogExcerptOptions {
    pub before_error: usize,
    pub after_error: usize,
    /// When no `##[error]` line exists.
    pub tail: usize,
}

impl Default for LogExcerptOptions {
    fn default() -> Self {
        Self {
            before_error: 40,
            after_error: 5,
            tail: 60,
        }
    }
}

/// The GitHub client. See the module docs of [`super`].
#[derive(Clone)]
pub struct GithubClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for GithubClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GithubClient")
            .field("api_base", &self.inner.api_base.as_str())
            .field("owner", &self.inner.owner)
            .field("repo", &self.inner.repo)
            .field("token", &"***")
            .finish()
    }
}

struct Inner {
    http: reqwest::Client,
    /// The token, cut out of any text that goes into an error.
    redactor: Redactor,
    api_base: Url,
    graphql_url: Url,
    owner: String,
    repo: String,
    /// `Bearer <token>`, marked sensitive so no `Debug` of a request prints it.
    auth: HeaderValue,
    options: ClientOptions,
    clock: Arc<dyn Clock>,
    cache: Mutex<Cache>,
    gate: Gate,
    /// What the latest answers said of the REST and the GraphQL budget, for the console.
    quota: Mutex<[Option<Quota>; 2]>,
    requests_sent: AtomicU64,
    bytes_received: AtomicU64,
}

/// A body as received, with where the next page is.
#[derive(Clone, Debug)]
struct Page {
    body: Arc<[u8]>,
    next: Option<Url>,
}

struct Entry {
    etag: Option<String>,
    page: Page,
    fetched_at: DateTime<Utc>,
    /// The cache's generation when fetched: a write bumps it, so no answer from before a
    /// write is reused without asking (the ETag is still sent, so unchanged ones stay cheap).
    generation: u64,
    last_used: u64,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<String, Entry>,
    generation: u64,
    uses: u64,
}

impl Cache {
    fn fresh(&mut self, key: &str, now: DateTime<Utc>, ttl: chrono::Duration) -> Option<Page> {
        self.uses += 1;
        let (generation, uses) = (self.generation, self.uses);
        let entry = self.entries.get_mut(key)?;
        if entry.generation != generation || now - entry.fetched_at >= ttl {
            return None;
        }
        entry.last_used = uses;
        Some(entry.page.clone())
    }

    fn revalidation(&self, key: &str) -> Option<(String, Page)> {
        let entry = self.entries.get(key)?;
        Some((entry.etag.clone()?, entry.page.clone()))
    }

    fn store(
        &mut self,
        key: String,
        etag: Option<String>,
        page: Page,
        now: DateTime<Utc>,
        capacity: usize,
    ) {
        self.uses += 1;
        if !self.entries.contains_key(&key) && self.entries.len() >= capacity.max(1) {
            // Linear, but only on insert into a full cache of a few thousand entries.
            if let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone())
            {
                self.entries.remove(&oldest);
            }
        }
        let entry = Entry {
            etag,
            page,
            fetched_at: now,
            generation: self.generation,
            last_used: self.uses,
        };
        self.entries.insert(key, entry);
    }
}

/// Until when each API refuses requests after a rate limit. REST and GraphQL have separate
/// primary buckets; a secondary limit covers both.
#[derive(Default)]
struct Gate {
    rest: RateGate<Blocked>,
    graphql: RateGate<Blocked>,
}

/// Which limit shut a gate.
#[derive(Clone, Copy)]
enum Blocked {
    Primary,
    Secondary,
}

impl Blocked {
    fn error(self, until: DateTime<Utc>, now: DateTime<Utc>) -> GithubError {
        match self {
            Self::Primary => GithubError::RateLimited { reset_at: until },
            Self::Secondary => GithubError::SecondaryLimit {
                retry_after: retry::until(until, now),
            },
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Api {
    Rest,
    GraphQl,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these locks; a poisoned one still holds whole data.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The GraphQL endpoint beside a REST base: `https://api.github.com/graphql`, and on GitHub
/// Enterprise Server `https://host/api/graphql` for the REST base `https://host/api/v3`.
fn graphql_url(api_base: &Url) -> Url {
    let path = api_base.path().trim_end_matches('/');
    let mut url = api_base.clone();
    match path.strip_suffix("/api/v3") {
        Some(prefix) => url.set_path(&format!("{prefix}/api/graphql")),
        None => url.set_path(&format!("{path}/graphql")),
    }
    url
}

const Q1_REVIEW_THREADS: &str =
    "query($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 50, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes { id isResolved isOutdated path line
          comments(first: 100) { nodes { id databaseId author { login } body createdAt url } } }
      }
    }
  }
}";

const M1_RESOLVE_THREAD: &str =
    "mutation($id: ID!) { resolveReviewThread(input: {threadId: $id}) { thread { id isResolved } } }";

/// A guard against a server that keeps answering with a next page.
const MAX_PAGES: usize = 100;

impl GithubClient {
    /// A client with the default options and the system clock.
    pub fn new(settings: GithubSettings) -> Result<Self, GithubError> {
        Self::with_options(settings, ClientOptions::default(), Arc::new(SystemClock))
    }

    /// A client with chosen options and clock (tests move a `ManualClock` past the TTL and
    /// past rate-limit resets).
    pub fn with_options(
        settings: GithubSettings,
        options: ClientOptions,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, GithubError> {
        let api_base = http::client::base_url(settings.api_base, "the API base URL")
            .map_err(GithubError::Settings)?;
        let graphql_url = graphql_url(&api_base);
        let auth = http::client::authorization(&format!("Bearer {}", settings.token.expose()))
            .map_err(|_| GithubError::Settings("the token cannot be sent in a header".into()))?;

        let mut headers = http::client::accept("application/vnd.github+json");
        headers.insert(
            "x-github-api-version",
            HeaderValue::from_static("2022-11-28"),
        );
        // Redirects are followed by hand: a job log's 302 goes to another host and must go
        // there without the token.
        let http = http::client::build(
            &http::HttpOptions {
                timeout: Some(options.timeout),
                connect_timeout: options.connect_timeout,
                user_agent: options.user_agent.clone(),
            },
            headers,
        )
        .map_err(GithubError::Settings)?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                redactor: Redactor::new([&settings.token]),
                api_base,
                graphql_url,
                owner: settings.owner,
                repo: settings.repo,
                auth,
                options,
                clock,
                cache: Mutex::new(Cache::default()),
                gate: Gate::default(),
                quota: Mutex::new([None, None]),
                requests_sent: AtomicU64::new(0),
                bytes_received: AtomicU64::new(0),
            }),
        })
    }

    /// The repository as `(owner, name)`.
    pub fn repository(&self) -> (&str, &str) {
        (&self.inner.owner, &self.inner.repo)
    }

    /// What GitHub last said of the REST and the GraphQL request budgets (those it said
    /// anything of yet).
    pub fn quota(&self) -> Vec<Quota> {
        let kept = self
            .inner
            .quota
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        kept.iter().flatten().cloned().collect()
    }

    /// Keeps what `headers` say of the budget of `api` (GraphQL's own header wins).
    fn remember_quota(&self, api: Api, headers: &HeaderMap, now: DateTime<Utc>) {
        let rate = RateHeaders::read(headers, now);
        let Some(remaining) = rate.remaining else {
            return;
        };
        let graphql = api == Api::GraphQl || rate.graphql;
        let (slot, bucket) = if graphql { (1, "graphql") } else { (0, "rest") };
        let mut kept = self
            .inner
            .quota
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        kept[slot] = Some(Quota {
            bucket,
            remaining,
            reset_at: rate.reset_at,
            seen_at: now,
        });
    }

    /// HTTP requests actually sent (cache hits not counted, 304s counted).
    pub fn requests_sent(&self) -> u64 {
        self.inner.requests_sent.load(Ordering::Relaxed)
    }

    /// Response body bytes received (a 304 adds none).
    pub fn bytes_received(&self) -> u64 {
        self.inner.bytes_received.load(Ordering::Relaxed)
    }

    /// Forgets every cached answer's freshness, so the next reads revalidate (ETags kept).
    pub fn expire_cache(&self) {
        lock(&self.inner.cache).generation += 1;
    }

    // ----- operations -----

    /// `GET /repos/{o}/{r}/pulls/{n}`. `mergeable` is `None` while GitHub computes it.
    pub async fn get_pr(&self, number: u64) -> Result<PullRequest, GithubError> {
        let url = self.repo_url(&["pulls", &number.to_string()]);
        self.get_json(url, "a pull request").await
    }

    /// The open PR whose head is `branch` of this repository's owner, if there is one
    /// (`GET /repos/{o}/{r}/pulls?head={owner}:{branch}&state=open`): GitHub allows one open
    /// PR per head, so this is the PR a create that may have landed made.
    pub async fn open_pr_for_head(&self, branch: &str) -> Result<Option<PullRequest>, GithubError> {
        let mut url = self.repo_url(&["pulls"]);
        url.query_pairs_mut()
            .append_pair("head", &format!("{}:{branch}", self.inner.owner))
            .append_pair("state", "open")
            .append_pair("per_page", "100");
        let prs: Vec<PullRequest> = self.list(url, "pull requests").await?;
        Ok(prs.into_iter().find(|pr| pr.head.branch == branch))
    }

    /// `POST /repos/{o}/{r}/pulls` with `draft: true`.
    pub async fn create_draft_pr(&self, pr: &NewPullRequest) -> Result<PullRequest, GithubError> {
        let url = self.repo_url(&["pulls"]);
        let body = json!({
            "title": pr.title, "head": pr.head, "base": pr.base, "body": pr.body, "draft": true,
        });
        self.send_json(Method::POST, url, &body, "the new pull request")
            .await
    }

    /// `POST /repos/{o}/{r}/issues/{n}/labels`: answers with every label now on the PR.
    pub async fn add_labels(
        &self,
        number: u64,
        labels: &[&str],
    ) -> Result<Vec<Label>, GithubError> {
        let url = self.repo_url(&["issues", &number.to_string(), "labels"]);
        self.send_json(
            Method::POST,
            url,
            &json!({ "labels": labels }),
            "the labels",
        )
        .await
    }

    /// Every check run for `git_ref` (a sha or a branch), following `Link: rel="next"`.
    pub async fn check_runs(&self, git_ref: &str) -> Result<CheckRuns, GithubError> {
        let mut url = self.repo_url(&["commits", git_ref, "check-runs"]);
        url.query_pairs_mut().append_pair("per_page", "100");
        let mut runs = Vec::new();
        let mut total_count = 0;
        for (i, page) in self.pages(url, "check runs").await?.into_iter().enumerate() {
            let page: CheckRunsPage = decode(&page.body, "check runs")?;
            if i == 0 {
                total_count = page.total_count;
            }
            runs.extend(page.check_runs);
        }
        Ok(CheckRuns { total_count, runs })
    }

    /// `GET /repos/{o}/{r}/commits/{ref}/status`.
    pub async fn combined_status(&self, git_ref: &str) -> Result<CombinedStatus, GithubError> {
        let url = self.repo_url(&["commits", git_ref, "status"]);
        self.get_json(url, "the combined status").await
    }

    /// Every comment on the PR's conversation, oldest first.
    pub async fn issue_comments(&self, number: u64) -> Result<Vec<IssueComment>, GithubError> {
        let mut url = self.repo_url(&["issues", &number.to_string(), "comments"]);
        url.query_pairs_mut().append_pair("per_page", "100");
        self.list(url, "issue comments").await
    }

    /// `GET /repos/{o}/{r}/issues` with `query`, every page, oldest change first
    /// (`sort=updated&direction=asc`, so an issue changed while the pages are read moves to a
    /// later page rather than past one already read). GitHub lists pull requests here too;
    /// they are left out. Each page goes through the caches like every GET: a repeat within
    /// the TTL is not sent, and an unchanged page costs a `304` that GitHub does not count.
    pub async fn list_issues(&self, query: &IssueQuery) -> Result<Vec<Issue>, GithubError> {
        if let Some(bad) = query
            .labels
            .iter()
            .find(|l| l.trim().is_empty() || l.contains(','))
        {
            return Err(GithubError::Settings(format!(
                "the label `{bad}` cannot be asked for: GitHub's labels filter is a comma list"
            )));
        }
        let mut url = self.repo_url(&["issues"]);
        {
            let mut pairs = url.query_pairs_mut();
            pairs.append_pair("state", query.state.as_str());
            if !query.labels.is_empty() {
                pairs.append_pair("labels", &query.labels.join(","));
            }
            if let Some(since) = query.since {
                pairs.append_pair(
                    "since",
                    &since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                );
            }
            pairs
                .append_pair("per_page", "100")
                .append_pair("sort", "updated")
                .append_pair("direction", "asc");
        }
        let mut issues: Vec<Issue> = self.list(url, "issues").await?;
        issues.retain(|issue| !issue.is_pull_request());
        Ok(issues)
    }

    /// Every review comment on the PR (REST; threads and resolution come from GraphQL).
    pub async fn review_comments(&self, number: u64) -> Result<Vec<ReviewComment>, GithubError> {
        let mut url = self.repo_url(&["pulls", &number.to_string(), "comments"]);
        url.query_pairs_mut().append_pair("per_page", "100");
        self.list(url, "review comments").await
    }

    /// Every review thread of the PR (query Q1), following `pageInfo.endCursor`. Comments
    /// past the first 100 of one thread are not fetched.
    pub async fn review_threads(&self, number: u64) -> Result<Vec<ReviewThread>, GithubError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Data {
            repository: Option<Repository>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Repository {
            pull_request: Option<PullRequestThreads>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct PullRequestThreads {
            review_threads: Connection,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Connection {
            page_info: PageInfo,
            nodes: Vec<ReviewThread>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct PageInfo {
            has_next_page: bool,
            end_cursor: Option<String>,
        }

        let mut threads = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let variables = json!({
                "owner": self.inner.owner, "name": self.inner.repo,
                "number": number, "after": after,
            });
            let data: Data = self
                .graphql(Q1_REVIEW_THREADS, variables, true, "review threads")
                .await?;
            // GitHub reports a missing PR as an error, handled above; a null without one is
            // still "not there".
            let connection = data
                .repository
                .and_then(|r| r.pull_request)
                .ok_or_else(|| GithubError::NotFound {
                    path: format!("pull request {number} (GraphQL)"),
                })?
                .review_threads;
            threads.extend(connection.nodes);
            match (
                connection.page_info.has_next_page,
                connection.page_info.end_cursor,
            ) {
                (true, Some(cursor)) => after = Some(cursor),
                _ => return Ok(threads),
            }
        }
        Ok(threads)
    }

    /// Resolves a review thread (mutation M1).
    pub async fn resolve_review_thread(
        &self,
        thread_id: &str,
    ) -> Result<ResolvedThread, GithubError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Data {
            resolve_review_thread: Option<Payload>,
        }
        #[derive(Deserialize)]
        struct Payload {
            thread: ResolvedThread,
        }
        let data: Data = self
            .graphql(
                M1_RESOLVE_THREAD,
                json!({ "id": thread_id }),
                false,
                "the resolved thread",
            )
            .await?;
        data.resolve_review_thread
            .map(|p| p.thread)
            .ok_or_else(|| GithubError::NotFound {
                path: format!("review thread {thread_id}"),
            })
    }

    /// Every job of an Actions run (latest attempt).
    pub async fn run_jobs(&self, run_id: u64) -> Result<Vec<Job>, GithubError> {
        let mut url = self.repo_url(&["actions", "runs", &run_id.to_string(), "jobs"]);
        url.query_pairs_mut().append_pair("per_page", "100");
        let mut jobs = Vec::new();
        for page in self.pages(url, "jobs").await? {
            let page: JobsPage = decode(&page.body, "jobs")?;
            jobs.extend(page.jobs);
        }
        Ok(jobs)
    }

    /// A job's whole log. GitHub answers `302` to a short-lived URL on another host, which
    /// is fetched without the token.
    pub async fn job_log(&self, job_id: u64) -> Result<String, GithubError> {
        let url = self.repo_url(&["actions", "jobs", &job_id.to_string(), "logs"]);
        let path = url.path().to_owned();
        let answer = self
            .send(Api::Rest, Method::GET, url.clone(), None, None)
            .await?;
        let status = answer.status;
        let body = if status.is_redirection() {
            let location = answer
                .headers
                .get(header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| GithubError::Http {
                    status: status.as_u16(),
                    message: "a redirect without a Location".into(),
                })?;
            let target = url.join(location).map_err(|_| GithubError::Http {
                status: status.as_u16(),
                message: "a redirect to an invalid URL".into(),
            })?;
            self.count_request();
            // No Authorization here: the signed URL is the credential.
            let answer = self.exchange(self.inner.http.get(target)).await?;
            if !answer.status.is_success() {
                let now = self.inner.clock.now();
                let status = answer.status.as_u16();
                return Err(classify(
                    status,
                    &HeaderMap::new(),
                    &answer.body,
                    &path,
                    now,
                ));
            }
            answer.body
        } else {
            if !status.is_success() {
                return Err(self.failure(Api::Rest, status, &answer.headers, &answer.body, &path));
            }
            answer.body
        };
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// The part of a job's log that explains the failure.
    pub async fn job_log_excerpt(
        &self,
        job_id: u64,
        options: LogExcerptOptions,
    ) -> Result<LogExcerpt, GithubError> {
        let log = self.job_log(job_id).await?;
        Ok(LogExcerpt::from_log(
            &log,
            options.before_error,
            options.after_error,
            options.tail,
        ))
    }

    /// `POST /repos/{o}/{r}/actions/runs/{id}/rerun-failed-jobs`.
    pub async fn rerun_failed_jobs(&self, run_id: u64) -> Result<(), GithubError> {
        let url = self.repo_url(&["actions", "runs", &run_id.to_string(), "rerun-failed-jobs"]);
        self.send_empty(Method::POST, url, &json!({})).await
    }

    /// `POST /repos/{o}/{r}/actions/workflows/{file}/dispatches` on `git_ref`.
    pub async fn dispatch_workflow(
        &self,
        workflow_file: &str,
        git_ref: &str,
        inputs: Option<&serde_json::Map<String, Value>>,
    ) -> Result<(), GithubError> {
        let url = self.repo_url(&["actions", "workflows", workflow_file, "dispatches"]);
        let mut body = json!({ "ref": git_ref });
        if let Some(inputs) = inputs {
            body["inputs"] = Value::Object(inputs.clone());
        }
        self.send_empty(Method::POST, url, &body).await
    }

    /// Every review of PR `number`, oldest first (`GET …/pulls/{n}/reviews`, every page).
    pub async fn reviews(&self, number: u64) -> Result<Vec<Review>, GithubError> {
        let mut url = self.repo_url(&["pulls", &number.to_string(), "reviews"]);
        url.query_pairs_mut().append_pair("per_page", "100");
        self.list(url, "reviews").await
    }

    /// `POST /repos/{o}/{r}/pulls/{n}/reviews`.
    pub async fn post_review(
        &self,
        number: u64,
        body: &str,
        event: ReviewEvent,
    ) -> Result<Review, GithubError> {
        let url = self.repo_url(&["pulls", &number.to_string(), "reviews"]);
        self.send_json(
            Method::POST,
            url,
            &json!({ "body": body, "event": event }),
            "the review",
        )
        .await
    }

    /// `POST /repos/{o}/{r}/pulls/{n}/comments/{comment_id}/replies`: a reply in the review
    /// thread that comment belongs to.
    pub async fn reply_to_review_comment(
        &self,
        number: u64,
        comment_id: u64,
        body: &str,
    ) -> Result<ReviewComment, GithubError> {
        let url = self.repo_url(&[
            "pulls",
            &number.to_string(),
            "comments",
            &comment_id.to_string(),
            "replies",
        ]);
        self.send_json(Method::POST, url, &json!({ "body": body }), "the reply")
            .await
    }

    /// `PUT /repos/{o}/{r}/pulls/{n}/merge` with `sha` (GitHub merges only while that is
    /// the PR's head, else 409) and `merge_method` (`merge`, `squash` or `rebase`). GitHub
    /// answers 405 when the PR cannot be merged (a rule of the repository, a conflict).
    pub async fn merge_pr(
        &self,
        number: u64,
        sha: &str,
        merge_method: &str,
    ) -> Result<MergeAnswer, GithubError> {
        let url = self.repo_url(&["pulls", &number.to_string(), "merge"]);
        let body = json!({ "sha": sha, "merge_method": merge_method });
        self.send_json(Method::PUT, url, &body, "the merge").await
    }

    /// `DELETE /repos/{o}/{r}/git/refs/heads/{branch}`.
    pub async fn delete_branch(&self, branch: &str) -> Result<(), GithubError> {
        let mut url = self.repo_url(&["git", "refs", "heads"]);
        if let Ok(mut segments) = url.path_segments_mut() {
            // A branch name's slashes are the ref's own path (`heads/fix/x`).
            segments.extend(branch.split('/'));
        }
        let path = url.path().to_owned();
        let sent = self.send(Api::Rest, Method::DELETE, url, None, None).await;
        self.expire_cache();
        let answer = sent?;
        if !answer.status.is_success() {
            let (status, headers) = (answer.status, &answer.headers);
            return Err(self.failure(Api::Rest, status, headers, &answer.body, &path));
        }
        Ok(())
    }

    /// `POST /repos/{o}/{r}/issues/{n}/comments`.
    pub async fn post_issue_comment(
        &self,
        number: u64,
        body: &str,
    ) -> Result<IssueComment, GithubError> {
        let url = self.repo_url(&["issues", &number.to_string(), "comments"]);
        self.send_json(Method::POST, url, &json!({ "body": body }), "the comment")
            .await
    }

    /// `PATCH /repos/{o}/{r}/issues/{n}` with `{"state": "closed"}` (GitHub's "Update an
    /// issue"; the reason defaults to `completed`): the issue as it now is. Closing a closed
    /// issue is not an error.
    pub async fn close_issue(&self, number: u64) -> Result<Issue, GithubError> {
        let url = self.repo_url(&["issues", &number.to_string()]);
        self.send_json(
            Method::PATCH,
            url,
            &json!({ "state": "closed" }),
            "the closed issue",
        )
        .await
    }

    // ----- machinery -----

    fn repo_url(&self, rest: &[&str]) -> Url {
        let mut url = self.inner.api_base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            // Each segment is percent-encoded: a branch name's `/` stays inside its segment.
            segments
                .pop_if_empty()
                .extend(["repos", &self.inner.owner, &self.inner.repo])
                .extend(rest);
        }
        url
    }

    fn count_request(&self) {
        self.inner.requests_sent.fetch_add(1, Ordering::Relaxed);
    }

    async fn get_json<T: DeserializeOwned>(
        &self,
        url: Url,
        what: &'static str,
    ) -> Result<T, GithubError> {
        let page = self.get(url).await?;
        decode(&page.body, what)
    }

    async fn list<T: DeserializeOwned>(
        &self,
        url: Url,
        what: &'static str,
    ) -> Result<Vec<T>, GithubError> {
        let mut items = Vec::new();
        for page in self.pages(url, what).await? {
            items.extend(decode::<Vec<T>>(&page.body, what)?);
        }
        Ok(items)
    }

    /// Every page of a REST list, first to last.
    async fn pages(&self, first: Url, what: &'static str) -> Result<Vec<Page>, GithubError> {
        let mut pages = Vec::new();
        let mut url = Some(first);
        while let Some(current) = url.take() {
            if pages.len() >= MAX_PAGES {
                return Err(GithubError::Http {
                    status: 200,
                    message: format!("{what}: more than {MAX_PAGES} pages"),
                });
            }
            let page = self.get(current).await?;
            url = page.next.clone();
            pages.push(page);
        }
        Ok(pages)
    }

    /// A GET through the caches: a fresh answer from memory, else a conditional request.
    async fn get(&self, url: Url) -> Result<Page, GithubError> {
        let key = url.as_str().to_owned();
        let now = self.inner.clock.now();
        let ttl = to_chrono(self.inner.options.cache_ttl);
        if let Some(page) = lock(&self.inner.cache).fresh(&key, now, ttl) {
            return Ok(page);
        }
        let cached = lock(&self.inner.cache).revalidation(&key);
        let path = url.path().to_owned();
        let etag = cached.as_ref().map(|(etag, _)| etag.as_str());
        let Answer {
            status,
            headers,
            body,
        } = self
            .send(Api::Rest, Method::GET, url.clone(), None, etag)
            .await?;
        if status == StatusCode::NOT_MODIFIED {
            if let Some((etag, page)) = cached {
                lock(&self.inner.cache).store(
                    key,
                    Some(etag),
                    page.clone(),
                    now,
                    self.inner.options.cache_capacity,
                );
                return Ok(page);
            }
        }
        if !status.is_success() {
            return Err(self.failure(Api::Rest, status, &headers, &body, &path));
        }
        let next = self.next_page(&headers)?;
        let page = Page {
            body: Arc::from(body),
            next,
        };
        let etag = headers
            .get(header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        lock(&self.inner.cache).store(
            key,
            etag,
            page.clone(),
            now,
            self.inner.options.cache_capacity,
        );
        Ok(page)
    }

    /// The `rel="next"` page, refused when it points away from the API host: the token
    /// must not follow a link anywhere else.
    fn next_page(&self, headers: &HeaderMap) -> Result<Option<Url>, GithubError> {
        let Some(link) = headers.get(header::LINK).and_then(|v| v.to_str().ok()) else {
            return Ok(None);
        };
        let Some(target) = next_link(link) else {
            return Ok(None);
        };
        let next = self
            .inner
            .api_base
            .join(target)
            .map_err(|_| GithubError::Http {
                status: 200,
                message: "a pagination link that is not a URL".into(),
            })?;
        if next.origin() != self.inner.api_base.origin() {
            return Err(GithubError::Http {
                status: 200,
                message: format!(
                    "a pagination link to another host ({})",
                    next.origin().ascii_serialization()
                ),
            });
        }
        Ok(Some(next))
    }

    async fn send_json<T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: &Value,
        what: &'static str,
    ) -> Result<T, GithubError> {
        let bytes = self.write(method, url, body).await?;
        decode(&bytes, what)
    }

    async fn send_empty(&self, method: Method, url: Url, body: &Value) -> Result<(), GithubError> {
        self.write(method, url, body).await.map(|_| ())
    }

    async fn write(&self, method: Method, url: Url, body: &Value) -> Result<Vec<u8>, GithubError> {
        let path = url.path().to_owned();
        let sent = self.send(Api::Rest, method, url, Some(body), None).await;
        // Whatever was read before this write may have changed, even when it failed: a 502
        // or a timeout can come after GitHub applied the write, and the retry first looks
        // (for the PR of a head, for a comment's marker) with fresh reads.
        self.expire_cache();
        let answer = sent?;
        if !answer.status.is_success() {
            let (status, headers) = (answer.status, &answer.headers);
            return Err(self.failure(Api::Rest, status, headers, &answer.body, &path));
        }
        Ok(answer.body)
    }

    /// A GraphQL call. Queries (`cacheable`) share the TTL cache keyed by their text and
    /// variables; GraphQL has no ETags. Mutations expire the cache. Any `errors` entry fails
    /// the call.
    async fn graphql<T: DeserializeOwned>(
        &self,
        query: &str,
        variables: Value,
        cacheable: bool,
        what: &'static str,
    ) -> Result<T, GithubError> {
        let (data, _) = self
            .graphql_answer(query, variables, cacheable, false, what)
            .await?;
        decode(data.get().as_bytes(), what)
    }

    /// A cacheable GraphQL query that may answer in part: `data` with `errors` beside it
    /// (one aliased field of many not found, say). Both come back; a rate limit, or
    /// `errors` without `data`, still fail the call. Partial answers are not cached.
    pub async fn graphql_partial(
        &self,
        query: &str,
        variables: Value,
        what: &'static str,
    ) -> Result<(Box<RawValue>, Vec<GraphQlError>), GithubError> {
        self.graphql_answer(query, variables, true, true, what)
            .await
    }

    async fn graphql_answer(
        &self,
        query: &str,
        variables: Value,
        cacheable: bool,
        partial: bool,
        what: &'static str,
    ) -> Result<(Box<RawValue>, Vec<GraphQlError>), GithubError> {
        #[derive(Deserialize)]
        struct Envelope {
            #[serde(default)]
            data: Option<Box<RawValue>>,
            #[serde(default)]
            errors: Vec<GraphQlError>,
        }
        let request = json!({ "query": query, "variables": variables });
        let key = format!("POST {} {request}", self.inner.graphql_url);
        let now = self.inner.clock.now();
        let ttl = to_chrono(self.inner.options.cache_ttl);
        let cached = if cacheable {
            lock(&self.inner.cache).fresh(&key, now, ttl)
        } else {
            None
        };
        let envelope: Envelope = match cached {
            Some(page) => decode(&page.body, what)?,
            None => {
                let url = self.inner.graphql_url.clone();
                let path = url.path().to_owned();
                let Answer {
                    status,
                    headers,
                    body,
                } = self
                    .send(Api::GraphQl, Method::POST, url, Some(&request), None)
                    .await?;
                if !status.is_success() {
                    return Err(self.failure(Api::GraphQl, status, &headers, &body, &path));
                }
                let envelope: Envelope = decode(&body, what)?;
                let has_data = envelope
                    .data
                    .as_ref()
                    .is_some_and(|d| d.get().trim() != "null");
                let limited = envelope
                    .errors
                    .iter()
                    .any(|e| e.kind.as_deref() == Some("RATE_LIMITED"));
                if !envelope.errors.is_empty() && (!partial || !has_data || limited) {
                    return Err(self.graphql_failure(envelope.errors, &headers));
                }
                if !cacheable {
                    self.expire_cache();
                } else if envelope.errors.is_empty() {
                    let page = Page {
                        body: Arc::from(body),
                        next: None,
                    };
                    lock(&self.inner.cache).store(
                        key,
                        None,
                        page,
                        now,
                        self.inner.options.cache_capacity,
                    );
                }
                envelope
            }
        };
        let data = envelope.data.ok_or_else(|| GithubError::GraphQl {
            errors: vec![GraphQlError {
                kind: None,
                message: "no data and no errors".into(),
                path: Vec::new(),
            }],
        })?;
        Ok((data, envelope.errors))
    }

    /// GraphQL reports its rate limit as an error of type `RATE_LIMITED` in an HTTP 200.
    fn graphql_failure(&self, errors: Vec<GraphQlError>, headers: &HeaderMap) -> GithubError {
        let limited = errors
            .iter()
            .any(|e| e.kind.as_deref() == Some("RATE_LIMITED"));
        let rate = RateHeaders::read(headers, self.inner.clock.now());
        let error = match (limited, rate.retry_after, rate.reset_at) {
            (true, Some(retry_after), _) => GithubError::SecondaryLimit { retry_after },
            (true, None, Some(reset_at)) => GithubError::RateLimited { reset_at },
            _ => GithubError::GraphQl { errors },
        };
        self.note_limit(Api::GraphQl, &error, rate.graphql);
        error
    }

    /// Turns a failed response into its error, and shuts the gate on a rate limit.
    fn failure(
        &self,
        api: Api,
        status: StatusCode,
        headers: &HeaderMap,
        body: &[u8],
        path: &str,
    ) -> GithubError {
        let now = self.inner.clock.now();
        let error = classify(status.as_u16(), headers, body, path, now);
        let graphql_bucket = api == Api::GraphQl || RateHeaders::read(headers, now).graphql;
        self.note_limit(api, &error, graphql_bucket);
        tracing::debug!(status = status.as_u16(), path, error = %error, "GitHub call failed");
        error
    }

    fn note_limit(&self, api: Api, error: &GithubError, graphql_bucket: bool) {
        let now = self.inner.clock.now();
        let gate = &self.inner.gate;
        match error {
            GithubError::RateLimited { reset_at } => {
                if graphql_bucket || api == Api::GraphQl {
                    gate.graphql.shut(*reset_at, Blocked::Primary, now);
                } else {
                    gate.rest.shut(*reset_at, Blocked::Primary, now);
                }
            }
            GithubError::SecondaryLimit { retry_after } => {
                // Secondary limits are shared by REST and GraphQL.
                let until = retry::later(now, *retry_after);
                gate.rest.shut(until, Blocked::Secondary, now);
                gate.graphql.shut(until, Blocked::Secondary, now);
            }
            _ => {}
        }
    }

    /// One HTTP request to the API host, with the token; refused without sending while the
    /// API is rate limited.
    async fn send(
        &self,
        api: Api,
        method: Method,
        url: Url,
        body: Option<&Value>,
        if_none_match: Option<&str>,
    ) -> Result<Answer, GithubError> {
        let now = self.inner.clock.now();
        let gate = match api {
            Api::Rest => &self.inner.gate.rest,
            Api::GraphQl => &self.inner.gate.graphql,
        };
        if let Some((until, blocked)) = gate.check(now) {
            return Err(blocked.error(until, now));
        }
        let path = url.path().to_owned();
        let mut request = self
            .inner
            .http
            .request(method.clone(), url)
            .header(header::AUTHORIZATION, self.inner.auth.clone());
        if let Some(etag) = if_none_match.and_then(|e| HeaderValue::from_str(e).ok()) {
            request = request.header(header::IF_NONE_MATCH, etag);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        self.count_request();
        let answer = self.exchange(request).await?;
        self.remember_quota(api, &answer.headers, now);
        tracing::debug!(method = %method, path, status = answer.status.as_u16(), "GitHub call");
        Ok(answer)
    }

    /// One exchange through the HTTP layer, its body counted.
    async fn exchange(&self, request: reqwest::RequestBuilder) -> Result<Answer, GithubError> {
        let timeout = self.inner.options.timeout;
        let answer = http::exchange(request, timeout, &self.inner.redactor, None).await?;
        self.inner
            .bytes_received
            .fetch_add(answer.body.len() as u64, Ordering::Relaxed);
        Ok(answer)
    }
}

impl From<Transport> for GithubError {
    fn from(failure: Transport) -> Self {
        match failure {
            Transport::Timeout { .. } => GithubError::Timeout,
            Transport::Unreachable { message } => GithubError::Transport { message },
        }
    }
}

fn decode<T: DeserializeOwned>(body: &[u8], what: &'static str) -> Result<T, GithubError> {
    serde_json::from_slice(body).map_err(|source| GithubError::Decode { what, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_graphql_endpoint_sits_beside_the_rest_base() {
        let cases = [
            ("https://api.github.com", "https://api.github.com/graphql"),
            ("https://api.github.com/", "https://api.github.com/graphql"),
            (
                "https://ghe.example.com/api/v3",
                "https://ghe.example.com/api/graphql",
            ),
            (
                "https://ghe.example.com/api/v3/",
                "https://ghe.example.com/api/graphql",
            ),
            ("http://127.0.0.1:4000/", "http://127.0.0.1:4000/graphql"),
        ];
        for (base, expected) in cases {
            let base = Url::parse(base).expect("url");
            assert_eq!(graphql_url(&base).as_str(), expected);
        }
    }

    #[test]
    fn repo_urls_encode_each_segment() {
        let client = GithubClient::new(GithubSettings {
            api_base: Url::parse("https://ghe.example.com/api/v3/").expect("url"),
            owner: "mkowalski".into(),
            repo: "lumen-browser".into(),
            token: Secret::new("ghs_x"),
        })
        .expect("client");
        let url = client.repo_url(&["commits", "fix/tab-preview-stuck", "check-runs"]);
        assert_eq!(
            url.as_str(),
            "https://ghe.example.com/api/v3/repos/mkowalski/lumen-browser/commits/fix%2Ftab-preview-stuck/check-runs"
        );
        assert!(!format!("{client:?}").contains("ghs_x"));
    }
}

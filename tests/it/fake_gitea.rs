//! A stateful fake Gitea for the tests: the issue endpoints of the real API under `/api/v1`,
//! as `crates/executor-forge/src/gitea_pr.rs` notes them (Gitea's swagger and `routers/api/v1/repo/issue.go`).
//!
//! Repositories hold issues (and pull requests, which Gitea lists among the issues) with
//! labels, assignees, a state and times. `GET /repos/{o}/{r}/issues` filters by `state`
//! (`open` by default), `labels` (each name a required label, names the repository lacks
//! dropped, so only unknown names filter nothing, as in the Gitea code read), `type`,
//! `since` / `before` (whole seconds, inclusive) and pages by `page` and `limit` (0 means 30,
//! more than the server's maximum, 50 unless a test sets it, is cut to it), newest created
//! first, with `X-Total-Count` and a `Link` built on the server's `ROOT_URL` (the fake's own
//! address unless a test sets another). `GET`/`PATCH /repos/{o}/{r}/issues/{n}` read and
//! edit an issue (`title`, `body`, `state`; `201`); `GET`/`POST …/{n}/comments` list and add
//! comments (`201`). Times are written in the server's zone (`+01:00`), as Gitea writes them.
//!
//! Every change (a test's edit upstream, a PATCH, a comment) moves the issue's
//! `updated_at` on the fake's own clock, one second per change, starting at
//! [`ISSUES_EPOCH`]. That a comment moves it is the fake's choice (GitHub does so; not
//! confirmed for Gitea).
//!
//! Auth: `Authorization: token <TOKEN>`; anything else is a `401` with Gitea's error shape
//! (`{"message": "token is required", "url": …}`), as current Gitea answers a wrong token
//! (older ones treated it as no token). It is stricter than Gitea in one way: a query
//! parameter the list does not document is a `400` (the text is the fake's own), so a
//! client is held to the documented ones, and a token in a URL would fail loudly.
//!
//! It records every request (method, path, query, headers without `Authorization`, body,
//! and the `Authorization` value apart) so a test can count calls and prove where the token
//! went. Faults are injected for the next N requests.
//!
//! What it must never do: reach the network (it listens on 127.0.0.1 and opens nothing), or
//! panic on what a client sends: an unreadable body gets a `422`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::Router;
use chrono::{DateTime, FixedOffset, SecondsFormat, Utc};
use executor::forge::gitea::{GiteaClient, GiteaOptions};
use executor::forge::github::Secret;
use serde_json::{json, Value};

use crate::fake_server::{FakeServer, FaultRule};

#[path = "fake_gitea_actions.rs"]
mod actions;
#[path = "fake_gitea_pulls.rs"]
mod pulls;

pub use actions::ActionsApi;

/// The access token the fake accepts; distinctive, so a test can search for it.
pub const TOKEN: &str = "9f3c1d7e5b2a4c6e8f0a1b3c5d7e9f1a2b4c6d8e";
pub const OWNER: &str = "mkowalski";
pub const REPO: &str = "lumen-browser";
/// The user the token belongs to: the executor's own Gitea user, who writes its comments.
pub const BOT: &str = "lumen-executor";
/// The path of the API below the host.
pub const API_PATH: &str = "/api/v1";
/// The fake's clock before the first change.
pub const ISSUES_EPOCH: &str = "2026-03-16T08:00:00Z";
/// Gitea's `[api] DEFAULT_PAGING_NUM` and `MAX_RESPONSE_ITEMS` defaults.
const DEFAULT_PAGING_NUM: usize = 30;
const MAX_RESPONSE_ITEMS: usize = 50;

const LIST_PARAMS: [&str; 12] = [
    "state",
    "labels",
    "q",
    "type",
    "milestones",
    "since",
    "before",
    "created_by",
    "assigned_by",
    "mentioned_by",
    "page",
    "limit",
];

/// A failure served instead of the real answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// This status with Gitea's error body (a 5xx with the empty message of a production
    /// server).
    Status(u16),
    /// 429 with `Retry-After`, as a proxy before Gitea sends it.
    RateLimited { retry_after: u64 },
    /// The real answer, this much later (for client timeouts).
    Delay(Duration),
    /// 200 with a body that is not JSON (a proxy's maintenance page).
    NotJson,
    /// A 400 whose body repeats the request's `Authorization` header, as a careless proxy
    /// might.
    EchoAuthorization,
    /// The request is carried out (the review stored, the comment saved), then this status
    /// is answered instead: a 502 from a proxy after Gitea did the write.
    AfterApplying(u16),
}

/// One request as the fake saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// Below the host, `/api/v1` included.
    pub path: String,
    pub query: String,
    /// Every header but `Authorization`, names lower-case.
    pub headers: Vec<(String, String)>,
    /// The `Authorization` header, kept apart so tests can say where the token went.
    pub authorization: Option<String>,
    pub body: String,
    pub status: u16,
}

impl Recorded {
    /// A query parameter, decoded.
    pub fn param(&self, name: &str) -> Option<String> {
        url::form_urlencoded::parse(self.query.as_bytes())
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.into_owned())
    }
}

/// What an added issue looks like.
#[derive(Clone, Debug, Default)]
pub struct IssueSeed {
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
    pub assignees: Vec<String>,
    pub closed: bool,
    /// A pull request, which Gitea lists among the issues.
    pub pull: bool,
}

impl IssueSeed {
    pub fn new(title: &str, body: &str, labels: &[&str]) -> Self {
        Self {
            title: title.into(),
            body: body.into(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            ..Self::default()
        }
    }

    pub fn assignee(mut self, login: &str) -> Self {
        self.assignees.push(login.into());
        self
    }

    pub fn closed(mut self) -> Self {
        self.closed = true;
        self
    }

    pub fn pull(mut self) -> Self {
        self.pull = true;
        self
    }
}

#[derive(Clone)]
struct FakeIssue {
    id: u64,
    number: u64,
    title: String,
    body: String,
    /// Label ids of the repository.
    labels: Vec<u64>,
    assignees: Vec<String>,
    closed: bool,
    pull: bool,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    closed_at: Option<DateTime<Utc>>,
    comments: Vec<Value>,
}

#[derive(Default)]
struct FakeRepo {
    id: u64,
    /// `(id, name)`, in creation order.
    labels: Vec<(u64, String)>,
    issues: BTreeMap<u64, FakeIssue>,
    /// The PR side of the issues that are PRs, by number.
    pulls: BTreeMap<u64, FakePull>,
    /// Commit statuses by sha, oldest first (`CommitStatus` JSON).
    statuses: BTreeMap<String, Vec<Value>>,
    /// Gitea Actions' workflow runs, oldest first.
    action_runs: Vec<actions::FakeActionRun>,
    /// The repository's git data (a bare repository a test pushes to), when it has one:
    /// a PR's head is then its branch's tip there, as on Gitea.
    git_dir: Option<std::path::PathBuf>,
}

/// What a PR has beyond its issue: its branches and reviews.
struct FakePull {
    head: String,
    head_sha: String,
    base: String,
    merged: bool,
    /// How `POST …/pulls/{n}/merge` merged it: (head, `Do`, `delete_branch_after_merge`).
    merged_as: Option<(String, String, bool)>,
    /// `PullReview` JSON, with the comments of each apart.
    reviews: Vec<(Value, Vec<Value>)>,
}

struct StateData {
    repos: BTreeMap<(String, String), FakeRepo>,
    now: DateTime<Utc>,
    next_id: u64,
    max_response_items: usize,
    /// The server's `ROOT_URL`, which `Link` URLs are built on.
    app_url: String,
    endless_pages: bool,
    after_next_list: Option<IssueSeed>,
    faults: VecDeque<FaultRule<Fault>>,
    requests: Vec<Recorded>,
    actions_api: ActionsApi,
}

impl StateData {
    fn tick(&mut self) -> DateTime<Utc> {
        self.now += chrono::Duration::seconds(1);
        self.now
    }

    fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn repo_mut(&mut self, owner: &str, repo: &str) -> &mut FakeRepo {
        let key = (owner.to_lowercase(), repo.to_lowercase());
        if !self.repos.contains_key(&key) {
            let id = self.new_id();
            self.repos.insert(
                key.clone(),
                FakeRepo {
                    id,
                    ..FakeRepo::default()
                },
            );
        }
        self.repos.get_mut(&key).expect("just made")
    }

    fn label_id(&mut self, owner: &str, repo: &str, name: &str) -> u64 {
        if let Some((id, _)) = self
            .repo_mut(owner, repo)
            .labels
            .iter()
            .find(|(_, n)| n == name)
        {
            return *id;
        }
        let id = self.new_id();
        self.repo_mut(owner, repo)
            .labels
            .push((id, name.to_owned()));
        id
    }
}

struct Shared {
    /// `http://127.0.0.1:PORT`.
    base: String,
    state: Mutex<StateData>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, StateData> {
        // Nothing panics while holding the lock; a poisoned one still holds whole data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running fake; it stops when dropped.
pub struct FakeGitea {
    server: FakeServer,
    shared: Arc<Shared>,
}

/// The zone the fake writes times in.
fn zone() -> FixedOffset {
    FixedOffset::east_opt(3600).expect("+01:00")
}

fn gitea_time(time: DateTime<Utc>) -> String {
    time.with_timezone(&zone())
        .to_rfc3339_opts(SecondsFormat::Secs, false)
}

impl FakeGitea {
    /// A fake with the empty repository `OWNER/REPO`.
    pub fn start() -> Self {
        let (server, shared) =
            FakeServer::start_with("Gitea", Router::new().fallback(handle), |base| {
                let mut state = StateData {
                    repos: BTreeMap::new(),
                    now: DateTime::parse_from_rfc3339(ISSUES_EPOCH)
                        .expect("epoch")
                        .with_timezone(&Utc),
                    next_id: 1000,
                    max_response_items: MAX_RESPONSE_ITEMS,
                    app_url: format!("{base}/"),
                    endless_pages: false,
                    after_next_list: None,
                    faults: VecDeque::new(),
                    requests: Vec::new(),
                    actions_api: ActionsApi::default(),
                };
                state.repo_mut(OWNER, REPO);
                Arc::new(Shared {
                    base: base.to_owned(),
                    state: Mutex::new(state),
                })
            });
        Self { server, shared }
    }

    /// `http://127.0.0.1:PORT/api/v1`: the API URL.
    pub fn url(&self) -> url::Url {
        url::Url::parse(&format!("{}{API_PATH}", self.server.url())).expect("fake Gitea URL")
    }

    /// A client of this fake with [`TOKEN`] and `options`.
    pub fn client_with(&self, options: GiteaOptions) -> GiteaClient {
        GiteaClient::new(self.url(), Secret::new(TOKEN), options).expect("Gitea client")
    }

    /// A client of this fake with [`TOKEN`] and the default options.
    pub fn client(&self) -> GiteaClient {
        self.client_with(GiteaOptions::default())
    }

    // ----- state a test sets -----

    /// A new issue in `OWNER/REPO`; its number.
    pub fn add_issue(&self, title: &str, body: &str, labels: &[&str]) -> u64 {
        self.add_issue_in(OWNER, REPO, IssueSeed::new(title, body, labels))
    }

    /// A new issue (or pull request) in `owner/repo`, numbered after the last one, made and
    /// changed now; its number.
    pub fn add_issue_in(&self, owner: &str, repo: &str, seed: IssueSeed) -> u64 {
        add_issue(&mut self.shared.state(), owner, repo, seed)
    }

    /// Right after the next issue list is answered, someone opens this issue in
    /// `OWNER/REPO` (between two pages of a read, say).
    pub fn open_issue_after_next_list(&self, seed: IssueSeed) {
        self.shared.state().after_next_list = Some(seed);
    }

    /// The issue's text edited on Gitea: `updated_at` moves on.
    pub fn edit_body(&self, number: u64, body: &str) {
        self.edit(number, |issue, _| issue.body = body.to_owned());
    }

    /// Closed on Gitea: `closed_at` and `updated_at` move on.
    pub fn close(&self, number: u64) {
        self.edit(number, |issue, at| {
            issue.closed = true;
            issue.closed_at = Some(at);
        });
    }

    /// A label added on Gitea (made in the repository on first use).
    pub fn add_label(&self, number: u64, name: &str) {
        let id = {
            let mut state = self.shared.state();
            state.label_id(OWNER, REPO, name)
        };
        self.edit(number, |issue, _| {
            if !issue.labels.contains(&id) {
                issue.labels.push(id);
            }
        });
    }

    fn edit(&self, number: u64, change: impl FnOnce(&mut FakeIssue, DateTime<Utc>)) {
        let mut state = self.shared.state();
        let at = state.tick();
        if let Some(issue) = state.repo_mut(OWNER, REPO).issues.get_mut(&number) {
            change(issue, at);
            issue.updated_at = at;
        }
    }

    /// The server's `MAX_RESPONSE_ITEMS`: the most a page holds, whatever `limit` asks.
    pub fn set_max_response_items(&self, max: usize) {
        self.shared.state().max_response_items = max.max(1);
    }

    /// The server's `ROOT_URL`, which `Link` headers are built on (a proxy's public name).
    pub fn set_app_url(&self, app_url: &str) {
        self.shared.state().app_url = app_url.to_owned();
    }

    /// Every page answers full, with a `Link` to the next and a total that never ends.
    pub fn set_endless_pages(&self, endless: bool) {
        self.shared.state().endless_pages = endless;
    }

    /// Serves `fault` for the next `count` authorized API requests.
    pub fn fail_next(&self, count: usize, fault: Fault) {
        self.fail_next_matching("", count, fault);
    }

    /// Serves `fault` for the next `count` authorized `method` requests whose path ends
    /// with `path_end`: a fault on one route, the rest answered as usual.
    pub fn fail_route(&self, method: &str, path_end: &str, count: usize, fault: Fault) {
        let method = Method::from_bytes(method.as_bytes()).expect("an HTTP method");
        let mut state = self.shared.state();
        for _ in 0..count {
            state
                .faults
                .push_back(FaultRule::route(fault.clone(), method.clone(), path_end));
        }
    }

    /// Serves `fault` for the next `count` authorized API requests whose path contains
    /// `path_part`.
    pub fn fail_next_matching(&self, path_part: &str, count: usize, fault: Fault) {
        let mut state = self.shared.state();
        for _ in 0..count {
            state.faults.push_back(FaultRule::matching(
                fault.clone(),
                (!path_part.is_empty()).then(|| path_part.to_owned()),
            ));
        }
    }

    // ----- state a test reads -----

    /// The fake's clock: the time of the latest change.
    pub fn now(&self) -> DateTime<Utc> {
        self.shared.state().now
    }

    /// Issue `number` of `OWNER/REPO` as `GET …/issues/{number}` answers it.
    pub fn issue(&self, number: u64) -> Option<Value> {
        let mut state = self.shared.state();
        let base = self.shared.base.clone();
        let repo = state.repo_mut(OWNER, REPO);
        let issue = repo.issues.get(&number)?;
        Some(issue_json(&base, OWNER, REPO, repo, issue))
    }

    /// The comments on issue `number` of `OWNER/REPO`, oldest first.
    pub fn comments(&self, number: u64) -> Vec<Value> {
        let mut state = self.shared.state();
        state
            .repo_mut(OWNER, REPO)
            .issues
            .get(&number)
            .map(|i| i.comments.clone())
            .unwrap_or_default()
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.state().requests.clone()
    }
}

fn add_issue(state: &mut StateData, owner: &str, repo: &str, seed: IssueSeed) -> u64 {
    let labels: Vec<u64> = seed
        .labels
        .iter()
        .map(|name| state.label_id(owner, repo, name))
        .collect();
    let at = state.tick();
    let id = state.new_id();
    let repo = state.repo_mut(owner, repo);
    let number = repo.issues.keys().next_back().map_or(1, |n| n + 1);
    repo.issues.insert(
        number,
        FakeIssue {
            id,
            number,
            title: seed.title,
            body: seed.body,
            labels,
            assignees: seed.assignees,
            closed: seed.closed,
            pull: seed.pull,
            created_at: at,
            updated_at: at,
            closed_at: seed.closed.then_some(at),
            comments: Vec::new(),
        },
    );
    number
}

// ----- records -----

fn user_json(base: &str, login: &str) -> Value {
    let id = match login {
        OWNER => 3,
        BOT => 7,
        _ => 40 + login.len() as u64,
    };
    json!({
        "id": id,
        "login": login,
        "login_name": "",
        "source_id": 0,
        "full_name": "",
        "email": format!("{login}@noreply.localhost"),
        "avatar_url": format!("{base}/avatars/{id}"),
        "html_url": format!("{base}/{login}"),
        "language": "",
        "is_admin": false,
        "last_login": "0001-01-01T00:00:00Z",
        "created": "2026-01-05T10:00:00+01:00",
        "restricted": false,
        "active": false,
        "prohibit_login": false,
        "location": "",
        "website": "",
        "description": "",
        "visibility": "public",
        "followers_count": 0,
        "following_count": 0,
        "starred_repos_count": 0,
        "username": login,
    })
}

/// An issue in the shape of Gitea's `Issue` (`convert.ToAPIIssue`).
fn issue_json(
    base: &str,
    owner: &str,
    repo_name: &str,
    repo: &FakeRepo,
    issue: &FakeIssue,
) -> Value {
    let kind = if issue.pull { "pulls" } else { "issues" };
    let labels: Vec<Value> = issue
        .labels
        .iter()
        .filter_map(|id| repo.labels.iter().find(|(l, _)| l == id))
        .map(|(id, name)| {
            json!({
                "id": id, "name": name, "exclusive": false, "is_archived": false,
                "color": "e11d21", "description": "",
                "url": format!("{base}{API_PATH}/repos/{owner}/{repo_name}/labels/{id}"),
            })
        })
        .collect();
    let assignees: Vec<Value> = issue
        .assignees
        .iter()
        .map(|login| user_json(base, login))
        .collect();
    json!({
        "id": issue.id,
        "url": format!("{base}{API_PATH}/repos/{owner}/{repo_name}/issues/{}", issue.number),
        "html_url": format!("{base}/{owner}/{repo_name}/{kind}/{}", issue.number),
        "number": issue.number,
        "user": user_json(base, OWNER),
        "original_author": "",
        "original_author_id": 0,
        "title": issue.title,
        "body": issue.body,
        "ref": "",
        "assets": [],
        "labels": labels,
        "milestone": null,
        "assignee": assignees.first().cloned(),
        // Gitea sends `null`, not `[]`, when nobody is assigned.
        "assignees": if assignees.is_empty() { Value::Null } else { Value::Array(assignees) },
        "state": if issue.closed { "closed" } else { "open" },
        "is_locked": false,
        "comments": issue.comments.len(),
        "created_at": gitea_time(issue.created_at),
        "updated_at": gitea_time(issue.updated_at),
        "closed_at": issue.closed_at.map(gitea_time),
        "due_date": null,
        "time_estimate": 0,
        "pull_request": if issue.pull {
            json!({
                "merged": false, "merged_at": null, "draft": false,
                "html_url": format!("{base}/{owner}/{repo_name}/pulls/{}", issue.number),
            })
        } else {
            Value::Null
        },
        "repository": {
            "id": repo.id, "name": repo_name, "owner": owner,
            "full_name": format!("{owner}/{repo_name}"),
        },
        "pin_order": 0,
    })
}

// ----- serving -----

/// An answer before it becomes an HTTP response.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn json(status: u16, value: &Value) -> Self {
        Self {
            status,
            headers: vec![(
                "content-type".into(),
                "application/json;charset=utf-8".into(),
            )],
            body: value.to_string().into_bytes(),
        }
    }

    /// Gitea's `APIError`.
    fn error(base: &str, status: u16, message: &str) -> Self {
        Self::json(
            status,
            &json!({ "message": message, "url": format!("{base}/api/swagger") }),
        )
    }

    /// Gitea's `ctx.NotFound()`.
    fn not_found(base: &str) -> Self {
        Self::json(
            404,
            &json!({
                "errors": [], "message": "The target couldn't be found.",
                "url": format!("{base}/api/swagger"),
            }),
        )
    }

    fn into_response(self) -> Response {
        let mut response = Response::new(Body::from(self.body));
        *response.status_mut() =
            StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        for (name, value) in self.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(&value),
            ) {
                response.headers_mut().append(name, value);
            }
        }
        response
    }
}

fn fault_reply(base: &str, fault: &Fault, authorization: Option<&str>) -> Reply {
    match fault {
        // A production Gitea hides a 500's message.
        Fault::Status(status) if *status >= 500 => Reply::error(base, *status, ""),
        Fault::Status(status) => Reply::error(base, *status, "injected failure"),
        Fault::RateLimited { retry_after } => Reply {
            status: 429,
            headers: vec![("retry-after".into(), retry_after.to_string())],
            body: b"Too Many Requests".to_vec(),
        },
        Fault::NotJson => Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/html".into())],
            body: b"<html><body>Gitea is down for maintenance</body></html>".to_vec(),
        },
        Fault::EchoAuthorization => Reply {
            status: 400,
            headers: vec![("content-type".into(), "text/plain".into())],
            body: format!(
                "400 Bad Request: unexpected header Authorization: {}",
                authorization.unwrap_or("")
            )
            .into_bytes(),
        },
        Fault::Delay(_) | Fault::AfterApplying(_) => Reply::error(base, 500, ""),
    }
}

/// Request bodies here are small; this only bounds a runaway client.
const BODY_LIMIT: usize = 1024 * 1024;

async fn handle(State(shared): State<Arc<Shared>>, request: axum::extract::Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, BODY_LIMIT)
        .await
        .unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().unwrap_or("").to_owned();
    let authorization = parts
        .headers
        .get(header::AUTHORIZATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter(|(name, _)| *name != header::AUTHORIZATION)
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let authorized = authorization.as_deref() == Some(format!("token {TOKEN}").as_str());

    let fault = if authorized {
        let mut state = shared.state();
        FaultRule::take(&mut state.faults, &parts.method, &path)
    } else {
        None
    };
    let fault = match fault {
        Some(Fault::Delay(delay)) => {
            tokio::time::sleep(delay).await;
            None
        }
        other => other,
    };

    let base = shared.base.as_str();
    let mut state = shared.state();
    let reply = if !authorized {
        Reply::error(base, 401, "token is required")
    } else if let Some(fault) = fault
        .as_ref()
        .filter(|f| !matches!(f, Fault::AfterApplying(_)))
    {
        fault_reply(base, fault, authorization.as_deref())
    } else {
        match path.strip_prefix(API_PATH) {
            Some(rest) => {
                let segments: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
                let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
                    .into_owned()
                    .collect();
                route(
                    &mut state,
                    base,
                    &parts.method,
                    &segments,
                    &pairs,
                    &path,
                    &body,
                )
            }
            None => Reply::not_found(base),
        }
    };
    let reply = match fault {
        Some(Fault::AfterApplying(status)) => Reply::error(base, status, ""),
        _ => reply,
    };
    state.requests.push(Recorded {
        method: parts.method.to_string(),
        path,
        query,
        headers,
        authorization,
        body: String::from_utf8_lossy(&body).into_owned(),
        status: reply.status,
    });
    drop(state);
    reply.into_response()
}

fn route(
    state: &mut StateData,
    base: &str,
    method: &Method,
    segments: &[&str],
    pairs: &[(String, String)],
    path: &str,
    body: &[u8],
) -> Reply {
    let ["repos", owner, repo, rest @ ..] = segments else {
        return Reply::not_found(base);
    };
    let key = (owner.to_lowercase(), repo.to_lowercase());
    if !state.repos.contains_key(&key) {
        return Reply::not_found(base);
    }
    let number = |text: &str| text.parse::<u64>().ok();
    match (method.clone(), rest) {
        (Method::GET, ["issues"]) => {
            let reply = list_issues(state, base, &key, owner, repo, pairs, path);
            if let Some(seed) = state.after_next_list.take() {
                add_issue(state, OWNER, REPO, seed);
            }
            reply
        }
        (Method::GET, ["issues", n]) => {
            let Some(n) = number(n) else {
                return Reply::not_found(base);
            };
            let repo_data = &state.repos[&key];
            match repo_data.issues.get(&n) {
                Some(issue) => Reply::json(200, &issue_json(base, owner, repo, repo_data, issue)),
                None => Reply::not_found(base),
            }
        }
        (Method::PATCH, ["issues", n]) => match number(n) {
            Some(n) => edit_issue(state, base, &key, owner, repo, n, body),
            None => Reply::not_found(base),
        },
        (Method::GET, ["issues", n, "comments"]) => {
            match number(n).and_then(|n| state.repos[&key].issues.get(&n)) {
                Some(issue) => Reply::json(200, &Value::Array(issue.comments.clone())),
                None => Reply::not_found(base),
            }
        }
        (Method::POST, ["issues", n, "comments"]) => match number(n) {
            Some(n) => create_comment(state, base, &key, owner, repo, n, body),
            None => Reply::not_found(base),
        },
        _ => match actions::route(state, base, &key, method, rest, pairs) {
            Some(reply) => reply,
            None => pulls::route(state, base, &key, method, rest, pairs, body),
        },
    }
}

fn parse_time(base: &str, name: &str, text: &str) -> Result<DateTime<Utc>, Reply> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| {
            Reply::error(
                base,
                422,
                &format!("parsing time \"{text}\" as \"2006-01-02T15:04:05Z07:00\": {name}"),
            )
        })
}

fn list_issues(
    state: &StateData,
    base: &str,
    key: &(String, String),
    owner: &str,
    repo_name: &str,
    pairs: &[(String, String)],
    path: &str,
) -> Reply {
    if let Some((unknown, _)) = pairs
        .iter()
        .find(|(name, _)| !LIST_PARAMS.contains(&name.as_str()))
    {
        return Reply::error(
            base,
            400,
            &format!("the fake Gitea does not know the query parameter `{unknown}`"),
        );
    }
    let param = |name: &str| {
        pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let repo = &state.repos[key];
    let closed = match param("state") {
        Some("closed") => Some(true),
        Some("all") => None,
        _ => Some(false),
    };
    let pulls = match param("type") {
        Some("pulls") => Some(true),
        Some("issues") => Some(false),
        _ => None,
    };
    // Each name the repository has is a required label; the others are dropped.
    let required: Vec<u64> = param("labels")
        .map(|list| {
            list.split(',')
                .filter_map(|name| repo.labels.iter().find(|(_, n)| n == name))
                .map(|(id, _)| *id)
                .collect()
        })
        .unwrap_or_default();
    let since = match param("since").map(|t| parse_time(base, "since", t)) {
        Some(Err(reply)) => return reply,
        Some(Ok(at)) => Some(at.timestamp()),
        None => None,
    };
    let before = match param("before").map(|t| parse_time(base, "before", t)) {
        Some(Err(reply)) => return reply,
        Some(Ok(at)) => Some(at.timestamp()),
        None => None,
    };
    let page = param("page")
        .and_then(|p| p.parse::<usize>().ok())
        .filter(|p| *p > 0)
        .unwrap_or(1);
    let limit = match param("limit").and_then(|l| l.parse::<usize>().ok()) {
        None | Some(0) => DEFAULT_PAGING_NUM,
        Some(l) => l.min(state.max_response_items),
    };
    let mut matching: Vec<&FakeIssue> = repo
        .issues
        .values()
        .filter(|i| closed.is_none_or(|c| i.closed == c))
        .filter(|i| pulls.is_none_or(|p| i.pull == p))
        .filter(|i| required.iter().all(|id| i.labels.contains(id)))
        .filter(|i| since.is_none_or(|s| i.updated_at.timestamp() >= s))
        .filter(|i| before.is_none_or(|b| i.updated_at.timestamp() <= b))
        .collect();
    // Newest created first.
    matching.sort_by_key(|i| std::cmp::Reverse((i.created_at, i.id)));
    let total = if state.endless_pages {
        usize::MAX / 2
    } else {
        matching.len()
    };
    let items: Vec<Value> = if state.endless_pages {
        matching.iter().cycle().take(limit).collect::<Vec<_>>()
    } else {
        matching
            .iter()
            .skip((page - 1) * limit)
            .take(limit)
            .collect()
    }
    .into_iter()
    .map(|issue| issue_json(base, owner, repo_name, repo, issue))
    .collect();
    let mut reply = Reply::json(200, &Value::Array(items));
    reply
        .headers
        .push(("x-total-count".into(), total.to_string()));
    let link = link_header(&state.app_url, path, pairs, page, limit, total);
    if !link.is_empty() {
        reply.headers.push(("link".into(), link));
    }
    reply
}

/// Gitea's `Link`: `next`, `last`, `first`, `prev` as they apply, on the `ROOT_URL`, with
/// the request's query (sorted, as Go encodes it) and the page replaced.
fn link_header(
    app_url: &str,
    path: &str,
    pairs: &[(String, String)],
    page: usize,
    limit: usize,
    total: usize,
) -> String {
    let pages = total.div_ceil(limit.max(1)).max(1);
    let url_for = |target: usize| {
        let mut query: Vec<(String, String)> =
            pairs.iter().filter(|(n, _)| n != "page").cloned().collect();
        query.push(("page".into(), target.to_string()));
        query.sort();
        let encoded: String = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(query)
            .finish();
        format!("<{}{}?{encoded}>", app_url, path.trim_start_matches('/'))
    };
    let mut links = Vec::new();
    if page < pages {
        links.push(format!("{}; rel=\"next\"", url_for(page + 1)));
        links.push(format!("{}; rel=\"last\"", url_for(pages)));
    }
    if page > 1 {
        links.push(format!("{}; rel=\"first\"", url_for(1)));
        links.push(format!("{}; rel=\"prev\"", url_for(page - 1)));
    }
    links.join(",")
}

/// `PATCH …/issues/{n}`: `title`, `body` and `state` (`open` | `closed`); `201` and the issue.
fn edit_issue(
    state: &mut StateData,
    base: &str,
    key: &(String, String),
    owner: &str,
    repo_name: &str,
    number: u64,
    body: &[u8],
) -> Reply {
    let Ok(form) = serde_json::from_slice::<Value>(body) else {
        return Reply::error(base, 422, "invalid JSON body");
    };
    if !state.repos[key].issues.contains_key(&number) {
        return Reply::not_found(base);
    }
    let wanted_state = form.get("state").and_then(Value::as_str);
    if let Some(other) = wanted_state.filter(|s| !matches!(*s, "open" | "closed")) {
        return Reply::error(base, 412, &format!("unknown state: {other}"));
    }
    let at = state.now + chrono::Duration::seconds(1);
    let repo = state.repos.get_mut(key).expect("checked");
    let issue = repo.issues.get_mut(&number).expect("checked");
    let mut changed = false;
    if let Some(title) = form
        .get("title")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        changed |= issue.title != title;
        issue.title = title.to_owned();
    }
    if let Some(text) = form.get("body").and_then(Value::as_str) {
        changed |= issue.body != text;
        issue.body = text.to_owned();
    }
    match wanted_state {
        Some("closed") if !issue.closed => {
            issue.closed = true;
            issue.closed_at = Some(at);
            changed = true;
        }
        Some("open") if issue.closed => {
            issue.closed = false;
            issue.closed_at = None;
            changed = true;
        }
        _ => {}
    }
    if changed {
        issue.updated_at = at;
        state.now = at;
    }
    let repo = &state.repos[key];
    Reply::json(
        201,
        &issue_json(base, owner, repo_name, repo, &repo.issues[&number]),
    )
}

/// `POST …/issues/{n}/comments`: `body` required and not empty; `201` and the comment.
fn create_comment(
    state: &mut StateData,
    base: &str,
    key: &(String, String),
    owner: &str,
    repo_name: &str,
    number: u64,
    body: &[u8],
) -> Reply {
    let Ok(form) = serde_json::from_slice::<Value>(body) else {
        return Reply::error(base, 422, "invalid JSON body");
    };
    if !state.repos[key].issues.contains_key(&number) {
        return Reply::not_found(base);
    }
    let Some(text) = form
        .get("body")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        return Reply::error(base, 422, "[Body]: Required");
    };
    let at = state.tick();
    let id = state.new_id();
    let repo = state.repos.get_mut(key).expect("checked");
    let issue = repo.issues.get_mut(&number).expect("checked");
    let comment = json!({
        "id": id,
        "html_url": format!("{base}/{owner}/{repo_name}/issues/{number}#issuecomment-{id}"),
        "pull_request_url": "",
        "issue_url": format!("{base}/{owner}/{repo_name}/issues/{number}"),
        "user": user_json(base, BOT),
        "original_author": "",
        "original_author_id": 0,
        "body": text,
        "assets": [],
        "created_at": gitea_time(at),
        "updated_at": gitea_time(at),
    });
    issue.comments.push(comment.clone());
    issue.updated_at = at;
    Reply::json(201, &comment)
}

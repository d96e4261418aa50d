//! A stateful fake GitHub (REST and GraphQL) for the tests: the paths of the real API, with
//! bodies built from `../shared/fixtures/http/github/` and changed as its state changes.
//!
//! It is seeded with the fixtures' story (repo `mkowalski/lumen-browser`, draft PR #1234,
//! Actions run 34712098321) and reproduces what the fixtures README lists: `mergeable: null`
//! until N GETs after creation, labels created on first use and answered in full, check runs
//! paginated with `Link` headers, review threads paginated with GraphQL cursors, the resolve
//! mutation, ETags with `304` on a matching `If-None-Match` (not counted against the rate
//! limit), a job log behind a `302` to a URL that needs no token, and faults injected for the
//! next N requests with GitHub's exact rate-limit headers and bodies.
//!
//! Issues a test adds ([`FakeGithub::add_issue`]) are listed by `GET /repos/{o}/{r}/issues`
//! in GitHub's `issue` shape, filtered by `state`, `labels` (all of them) and `since`
//! (updated at or after), sorted, paginated with `Link` headers; the PRs the fake holds
//! appear in that list too, with a `pull_request` key, as on GitHub. Issue times come from
//! the fake's own clock, [`ISSUES_EPOCH`] plus one second per change, so tests can reason
//! about `since` exactly. `PATCH /repos/{o}/{r}/issues/{n}` edits an issue (`title`, `body`,
//! `state`, `state_reason`) and answers it, as GitHub's "Update an issue" does.
//!
//! It records every request (method, path, query, headers without `Authorization`, body,
//! and the `Authorization` value apart) so a test can count calls and prove where the token
//! went. It answers `401 Bad credentials` to an API request without the right token.
//!
//! What it must never do: reach the network (it listens on 127.0.0.1 and opens nothing), or
//! panic on what a client sends: an unreadable body gets GitHub's 400 or 422.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::Router;
use chrono::{DateTime, Utc};
use executor::forge::github::{GithubSettings, Secret};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::fake_server::{FakeServer, FaultRule};

pub const OWNER: &str = "mkowalski";
pub const REPO: &str = "lumen-browser";
/// The token the fake accepts; distinctive, so a test can search for it anywhere.
pub const TOKEN: &str = "ghs_FAKEinstallationTOKEN4be1f0cSECRET";
/// PR #1234's first head, and the fix commit.
pub const FIRST_HEAD: &str = "4be1f0c7d93a2e58b6f1c40a7d2e9b3f58c61a07";
pub const FIX_HEAD: &str = "9d41c2e8a7f36b05c1d9e2a4f8b7c6d5e3a2b1f0";
pub const PR: u64 = 1234;
pub const RUN_ID: u64 = 34712098321;
pub const FAILED_JOB: u64 = 103651827391;
/// The GitHub App's bot, as REST shows it: the author of every PR the fake creates.
pub const BOT_LOGIN: &str = "lumen-executor[bot]";
/// `x-ratelimit-reset` of the primary-limit fixture: 2026-03-16T12:00:00Z.
pub const FIXTURE_RESET: i64 = 1_773_662_400;
/// The fake's issue clock before the first change: every added, edited or closed issue is
/// stamped one second later than the change before it.
pub const ISSUES_EPOCH: &str = "2026-03-16T08:00:00Z";

/// A fixture file's text.
pub fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/http/github")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

pub fn fixture_json(name: &str) -> Value {
    serde_json::from_str(&fixture(name)).unwrap_or_else(|e| panic!("parse {name}: {e}"))
}

/// The three CI fixtures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ci {
    /// `build` in progress, `ui-tests` queued.
    InProgress,
    /// `ui-tests` and the Xcode report failed, `build` passed.
    Failed,
    /// All three passed.
    Success,
}

impl Ci {
    /// The fixture's check runs, moved to `sha`.
    pub fn runs(self, sha: &str) -> Vec<Value> {
        let name = match self {
            Self::InProgress => "check_runs_in_progress.json",
            Self::Failed => "check_runs_failed.json",
            Self::Success => "check_runs_success.json",
        };
        let mut runs = match fixture_json(name)["check_runs"].take() {
            Value::Array(runs) => runs,
            _ => Vec::new(),
        };
        for run in &mut runs {
            run["head_sha"] = json!(sha);
            if let Some(prs) = run["pull_requests"].as_array_mut() {
                for pr in prs {
                    pr["head"]["sha"] = json!(sha);
                }
            }
        }
        runs
    }
}

/// A failure served instead of the real answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Case 1 of `rate_limited_headers.txt`, byte for byte: 403, remaining 0, reset
    /// [`FIXTURE_RESET`].
    PrimaryRateLimit,
    /// Case 1 with another `x-ratelimit-reset` (UNIX seconds).
    PrimaryRateLimitUntil(i64),
    /// Case 2 (secondary limit) with this status (403 or 429) and `retry-after` (or none).
    SecondaryLimit {
        status: u16,
        retry_after: Option<u64>,
    },
    /// This status with a GitHub-shaped body (e.g. 502).
    Status(u16),
    /// `graphql_error.json` with HTTP 200.
    GraphQlErrors,
    /// The real answer, this much later (for client timeouts).
    Delay(Duration),
    /// The request is carried out (the PR made, the comment saved), then this status is
    /// answered instead: a 502 from in front of GitHub after GitHub did the write.
    AfterApplying(u16),
}

/// One request as the fake saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
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
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostedReview {
    pub number: u64,
    pub event: String,
    pub body: String,
    /// The review as GitHub answers it, and lists it on `GET …/pulls/{n}/reviews`.
    pub json: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Dispatch {
    pub workflow: String,
    pub git_ref: String,
    pub inputs: Value,
}

struct FakePr {
    json: Value,
    /// GETs left that still answer `mergeable: null`.
    null_gets_left: u32,
    deleted: bool,
}

struct StateData {
    prs: BTreeMap<u64, FakePr>,
    mergeable_after_gets: u32,
    branch_heads: HashMap<String, String>,
    label_catalog: Vec<Value>,
    check_runs: HashMap<String, Vec<Value>>,
    max_per_page: usize,
    threads: BTreeMap<u64, Vec<Value>>,
    threads_page_size: usize,
    /// Issues by number, in GitHub's `issue` shape.
    issues: BTreeMap<u64, Value>,
    /// The last time stamped on an issue.
    issue_clock: DateTime<Utc>,
    issue_comments: BTreeMap<u64, Vec<Value>>,
    review_comments: BTreeMap<u64, Vec<Value>>,
    reviews: Vec<PostedReview>,
    /// `PUT …/pulls/{n}/merge` calls that merged: (PR, head, method).
    merges: Vec<(u64, String, String)>,
    /// Branches deleted with `DELETE …/git/refs/heads/{branch}`.
    deleted_branches: Vec<String>,
    jobs: HashMap<u64, Vec<Value>>,
    logs: HashMap<u64, String>,
    reruns: Vec<u64>,
    dispatches: Vec<Dispatch>,
    faults: VecDeque<FaultRule<Fault>>,
    requests: Vec<Recorded>,
    rate_used: u64,
    next_id: u64,
}

struct Shared {
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
pub struct FakeGithub {
    // First, so the server stops before its state goes.
    server: FakeServer,
    shared: Arc<Shared>,
}

impl FakeGithub {
    /// The fixtures' story: PR #1234 (mergeable computed), its comments and threads, CI
    /// failed on [`FIRST_HEAD`] and green on [`FIX_HEAD`], run [`RUN_ID`] with its jobs and
    /// the failing job's log.
    pub fn start() -> Self {
        let fake = Self::start_empty();
        {
            let mut state = fake.shared.state();
            let mut pr = fixture_json("pulls_get_open_draft.json");
            pr["labels"] = json!([]);
            state.prs.insert(
                PR,
                FakePr {
                    json: pr,
                    null_gets_left: 0,
                    deleted: false,
                },
            );
            state
                .issue_comments
                .insert(PR, array(fixture_json("issue_comments.json")));
            state
                .review_comments
                .insert(PR, array(fixture_json("pull_review_comments.json")));
            let mut threads = fixture_json("graphql_review_threads.json");
            let nodes =
                threads["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"].take();
            state.threads.insert(PR, array(nodes));
        }
        fake
    }

    /// No PR yet (the first one created gets #1234); CI, the Actions run and its log seeded.
    pub fn start_empty() -> Self {
        let mut check_runs = HashMap::new();
        check_runs.insert(FIRST_HEAD.to_owned(), Ci::Failed.runs(FIRST_HEAD));
        check_runs.insert(FIX_HEAD.to_owned(), Ci::Success.runs(FIX_HEAD));
        let mut jobs = HashMap::new();
        jobs.insert(
            RUN_ID,
            array(fixture_json("actions_run_jobs.json")["jobs"].take()),
        );
        let mut logs = HashMap::new();
        logs.insert(FAILED_JOB, fixture("actions_job_log_excerpt.txt"));
        let state = StateData {
            prs: BTreeMap::new(),
            mergeable_after_gets: 1,
            branch_heads: HashMap::new(),
            label_catalog: array(fixture_json("issues_labels_add_200.json")),
            check_runs,
            max_per_page: 100,
            threads: BTreeMap::new(),
            threads_page_size: 50,
            issues: BTreeMap::new(),
            issue_clock: DateTime::parse_from_rfc3339(ISSUES_EPOCH)
                .expect("the issues epoch")
                .with_timezone(&Utc),
            issue_comments: BTreeMap::new(),
            review_comments: BTreeMap::new(),
            reviews: Vec::new(),
            merges: Vec::new(),
            deleted_branches: Vec::new(),
            jobs,
            logs,
            reruns: Vec::new(),
            dispatches: Vec::new(),
            faults: VecDeque::new(),
            requests: Vec::new(),
            rate_used: 0,
            next_id: 5_000_000_000,
        };
        let (server, shared) =
            FakeServer::start_with("GitHub", Router::new().fallback(handle), move |base| {
                Arc::new(Shared {
                    base: base.to_owned(),
                    state: Mutex::new(state),
                })
            });
        Self { server, shared }
    }

    /// `http://127.0.0.1:PORT/`: the API base (GraphQL at `/graphql`).
    pub fn url(&self) -> url::Url {
        url::Url::parse(&format!("{}/", self.server.url())).expect("fake GitHub URL")
    }

    /// Settings for a client of this fake, with [`TOKEN`].
    pub fn settings(&self) -> GithubSettings {
        GithubSettings {
            api_base: self.url(),
            owner: OWNER.into(),
            repo: REPO.into(),
            token: Secret::new(TOKEN),
        }
    }

    // ----- state a test sets -----

    /// How many GETs after creation still answer `mergeable: null` (default 1).
    pub fn set_mergeable_after_gets(&self, gets: u32) {
        self.shared.state().mergeable_after_gets = gets;
    }

    /// The commit a branch points at when a PR is opened from it (default [`FIRST_HEAD`]).
    pub fn set_branch_head(&self, branch: &str, sha: &str) {
        self.shared
            .state()
            .branch_heads
            .insert(branch.into(), sha.into());
    }

    /// The PR is gone: REST answers 404, GraphQL `NOT_FOUND`.
    pub fn delete_pr(&self, number: u64) {
        if let Some(pr) = self.shared.state().prs.get_mut(&number) {
            pr.deleted = true;
        }
    }

    pub fn set_ci(&self, sha: &str, ci: Ci) {
        self.set_check_runs(sha, ci.runs(sha));
    }

    pub fn set_check_runs(&self, sha: &str, runs: Vec<Value>) {
        self.shared.state().check_runs.insert(sha.into(), runs);
    }

    /// Caps `per_page` below GitHub's 100, so a test paginates with a few items.
    pub fn set_max_per_page(&self, max: usize) {
        self.shared.state().max_per_page = max.max(1);
    }

    /// Caps `reviewThreads(first: …)` below the query's 50.
    pub fn set_threads_page_size(&self, size: usize) {
        self.shared.state().threads_page_size = size.max(1);
    }

    /// Serves `fault` for the next `count` API requests.
    pub fn fail_next(&self, count: usize, fault: Fault) {
        self.push_faults(count, fault, None);
    }

    /// Serves `fault` for the next `count` API requests whose path contains `path_part`.
    pub fn fail_next_matching(&self, path_part: &str, count: usize, fault: Fault) {
        self.push_faults(count, fault, Some(path_part.into()));
    }

    /// Serves `fault` for the next `count` requests of `method` whose path ends with
    /// `path_end` (`"/pulls"` is `POST /repos/{o}/{r}/pulls` and nothing else): a fault on
    /// one route of the flow, the rest answered as usual.
    pub fn fail_route(&self, method: &str, path_end: &str, count: usize, fault: Fault) {
        let method = Method::from_bytes(method.as_bytes()).expect("an HTTP method");
        let mut state = self.shared.state();
        for _ in 0..count {
            state
                .faults
                .push_back(FaultRule::route(fault.clone(), method.clone(), path_end));
        }
    }

    fn push_faults(&self, count: usize, fault: Fault, path_contains: Option<String>) {
        let mut state = self.shared.state();
        for _ in 0..count {
            state
                .faults
                .push_back(FaultRule::matching(fault.clone(), path_contains.clone()));
        }
    }

    /// Requests of `method` whose path ends with `path_end`, answered or not.
    pub fn count(&self, method: &str, path_end: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.method == method && r.path.ends_with(path_end))
            .count()
    }

    /// A push to the PR's branch: the head moves to `sha` and `updated_at` to now.
    pub fn set_pr_head(&self, number: u64, sha: &str) {
        if let Some(pr) = self.shared.state().prs.get_mut(&number) {
            pr.json["head"]["sha"] = json!(sha);
            pr.json["updated_at"] = json!(now_text());
        }
    }

    /// Marks a draft ready (or a PR draft again), as its author does in GitHub's UI.
    pub fn set_draft(&self, number: u64, draft: bool) {
        if let Some(pr) = self.shared.state().prs.get_mut(&number) {
            pr.json["draft"] = json!(draft);
            pr.json["updated_at"] = json!(now_text());
        }
    }

    /// Sets what GitHub computed of the PR's mergeability (`false`: it conflicts).
    pub fn set_mergeable(&self, number: u64, mergeable: bool) {
        if let Some(pr) = self.shared.state().prs.get_mut(&number) {
            pr.null_gets_left = 0;
            pr.json["mergeable"] = json!(mergeable);
            pr.json["mergeable_state"] = json!(if mergeable { "clean" } else { "dirty" });
        }
    }

    /// A human reviewer's verdict on the PR's current head: `APPROVED` or
    /// `CHANGES_REQUESTED`, listed by `GET …/pulls/{n}/reviews` and GraphQL's
    /// `latestOpinionatedReviews`.
    pub fn review_as(&self, number: u64, login: &str, state_name: &str) {
        let mut state = self.shared.state();
        let Some(pr) = state.prs.get(&number) else {
            return;
        };
        let commit = pr.json["head"]["sha"].clone();
        let review = review_json(
            &mut state,
            number,
            user_json(login),
            "",
            state_name,
            commit,
            "COLLABORATOR",
        );
        state.reviews.push(PostedReview {
            number,
            event: if state_name == "APPROVED" {
                "APPROVE"
            } else {
                "REQUEST_CHANGES"
            }
            .into(),
            body: String::new(),
            json: review,
        });
    }

    /// The merges GitHub performed: (PR, head, method).
    pub fn merges(&self) -> Vec<(u64, String, String)> {
        self.shared.state().merges.clone()
    }

    pub fn deleted_branches(&self) -> Vec<String> {
        self.shared.state().deleted_branches.clone()
    }

    /// Merged by a human: `state: closed`, `merged: true`, `merged_at` set.
    pub fn merge_pr(&self, number: u64) {
        self.finish_pr(number, true);
    }

    /// Closed unmerged by a human.
    pub fn close_pr(&self, number: u64) {
        self.finish_pr(number, false);
    }

    fn finish_pr(&self, number: u64, merged: bool) {
        if let Some(pr) = self.shared.state().prs.get_mut(&number) {
            let now = now_text();
            pr.json["state"] = json!("closed");
            pr.json["merged"] = json!(merged);
            pr.json["closed_at"] = json!(now);
            pr.json["updated_at"] = json!(now);
            pr.json["merged_at"] = if merged { json!(now) } else { Value::Null };
        }
    }

    /// Replaces a PR's review threads (GraphQL `PullRequestReviewThread` nodes).
    pub fn set_threads(&self, number: u64, threads: Vec<Value>) {
        self.shared.state().threads.insert(number, threads);
    }

    /// A comment by the repository's owner on the PR's conversation (the fixtures' owner
    /// comment, with a new id, `body` and the time now).
    pub fn add_owner_comment(&self, number: u64, body: &str) {
        let mut comment = array(fixture_json("issue_comments.json"))
            .into_iter()
            .find(|c| c["author_association"] == "OWNER")
            .expect("the fixtures hold an owner comment");
        let mut state = self.shared.state();
        let comments = state.issue_comments.entry(number).or_default();
        let id = 5_000_000_000u64 + comments.len() as u64;
        comment["id"] = json!(id);
        comment["body"] = json!(body);
        comment["created_at"] = json!(now_text());
        comment["updated_at"] = json!(now_text());
        comments.push(comment);
    }

    /// A label added on GitHub's side (by the owner, say), as `POST …/labels` would.
    pub fn add_label(&self, number: u64, name: &str) {
        add_labels(
            &mut self.shared.state(),
            number,
            &json!({ "labels": [name] }),
        );
    }

    /// An issue opened by the repository's owner (an empty `body` is GitHub's `null`),
    /// carrying `labels` (each created on first use, as GitHub does) and assigned to
    /// `assignee`. Answers its number: the next after
    /// the last issue, skipping numbers PRs hold.
    pub fn add_issue(
        &self,
        title: &str,
        body: &str,
        labels: &[&str],
        assignee: Option<&str>,
    ) -> u64 {
        let mut state = self.shared.state();
        let mut number = state.issues.keys().next_back().map_or(1, |n| n + 1);
        while state.prs.contains_key(&number) {
            number += 1;
        }
        let at = issue_tick(&mut state);
        let labels: Vec<Value> = labels
            .iter()
            .map(|name| catalog_label(&mut state, name))
            .collect();
        state.next_id += 1;
        let id = state.next_id;
        let assignee = assignee.map(user_json);
        let assignees: Vec<Value> = assignee.iter().cloned().collect();
        let api = format!("https://api.github.com/repos/{OWNER}/{REPO}/issues/{number}");
        let issue = json!({
            "url": api,
            "repository_url": format!("https://api.github.com/repos/{OWNER}/{REPO}"),
            "labels_url": format!("{api}/labels{{/name}}"),
            "comments_url": format!("{api}/comments"),
            "events_url": format!("{api}/events"),
            "html_url": format!("https://github.com/{OWNER}/{REPO}/issues/{number}"),
            "id": id,
            "node_id": format!("I_fake{id}"),
            "number": number,
            "title": title,
            "user": user_json(OWNER),
            "labels": labels,
            "state": "open",
            "locked": false,
            "assignee": assignee,
            "assignees": assignees,
            "milestone": null,
            "comments": 0,
            "created_at": at,
            "updated_at": at,
            "closed_at": null,
            "author_association": "OWNER",
            "type": null,
            "active_lock_reason": null,
            "sub_issues_summary": { "total": 0, "completed": 0, "percent_completed": 0 },
            // GitHub sends `null` for an issue opened without text.
            "body": if body.is_empty() { Value::Null } else { json!(body) },
            "closed_by": null,
            "reactions": {
                "url": format!("{api}/reactions"), "total_count": 0, "+1": 0, "-1": 0,
                "laugh": 0, "hooray": 0, "confused": 0, "heart": 0, "rocket": 0, "eyes": 0,
            },
            "timeline_url": format!("{api}/timeline"),
            "performed_via_github_app": null,
            "state_reason": null,
        });
        state.issues.insert(number, issue);
        number
    }

    /// The issue's text edited on GitHub: `body` replaced, `updated_at` moved on.
    pub fn edit_issue_body(&self, number: u64, body: &str) {
        let mut state = self.shared.state();
        let at = issue_tick(&mut state);
        if let Some(issue) = state.issues.get_mut(&number) {
            issue["body"] = json!(body);
            issue["updated_at"] = json!(at);
        }
    }

    /// Closed as completed by the owner: `state: closed`, `closed_at` and `updated_at` now.
    pub fn close_issue(&self, number: u64) {
        let mut state = self.shared.state();
        let at = issue_tick(&mut state);
        if let Some(issue) = state.issues.get_mut(&number) {
            issue["state"] = json!("closed");
            issue["state_reason"] = json!("completed");
            issue["closed_at"] = json!(at);
            issue["closed_by"] = user_json(OWNER);
            issue["updated_at"] = json!(at);
        }
    }

    // ----- state a test reads -----

    /// The issue as the fake holds it.
    pub fn issue(&self, number: u64) -> Option<Value> {
        self.shared.state().issues.get(&number).cloned()
    }

    /// Every PR not deleted, by number.
    pub fn pulls(&self) -> Vec<Value> {
        self.shared
            .state()
            .prs
            .values()
            .filter(|p| !p.deleted)
            .map(|p| p.json.clone())
            .collect()
    }

    /// The PR as the fake holds it (labels and mergeability included).
    pub fn pr(&self, number: u64) -> Option<Value> {
        self.shared.state().prs.get(&number).map(|p| p.json.clone())
    }

    pub fn labels(&self, number: u64) -> Vec<String> {
        self.pr(number)
            .and_then(|pr| {
                pr["labels"].as_array().map(|labels| {
                    labels
                        .iter()
                        .filter_map(|l| l["name"].as_str().map(str::to_owned))
                        .collect()
                })
            })
            .unwrap_or_default()
    }

    /// The review threads of a PR as GraphQL nodes.
    pub fn threads(&self, number: u64) -> Vec<Value> {
        self.shared
            .state()
            .threads
            .get(&number)
            .cloned()
            .unwrap_or_default()
    }

    pub fn issue_comments(&self, number: u64) -> Vec<Value> {
        self.shared
            .state()
            .issue_comments
            .get(&number)
            .cloned()
            .unwrap_or_default()
    }

    pub fn reviews(&self) -> Vec<PostedReview> {
        self.shared.state().reviews.clone()
    }

    pub fn reruns(&self) -> Vec<u64> {
        self.shared.state().reruns.clone()
    }

    pub fn dispatches(&self) -> Vec<Dispatch> {
        self.shared.state().dispatches.clone()
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.state().requests.clone()
    }

    /// Requests counted against the primary limit (a 304 is not).
    pub fn rate_used(&self) -> u64 {
        self.shared.state().rate_used
    }
}

fn array(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        _ => Vec::new(),
    }
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
                "application/json; charset=utf-8".into(),
            )],
            body: value.to_string().into_bytes(),
        }
    }

    fn empty(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    fn error(status: u16, message: &str) -> Self {
        Self::json(
            status,
            &json!({
                "message": message,
                "documentation_url": "https://docs.github.com/rest",
                "status": status.to_string(),
            }),
        )
    }

    fn not_found() -> Self {
        Self::error(404, "Not Found")
    }

    fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    fn has_header(&self, name: &str) -> bool {
        self.headers.iter().any(|(n, _)| n == name)
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

/// A case of `rate_limited_headers.txt`: status, headers (without `content-length`, which
/// the server sets), and body.
fn rate_limit_case(case: usize) -> Reply {
    let text = fixture("rate_limited_headers.txt");
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with(&format!("### Case {case}:")))
        .skip_while(|l| !l.starts_with("HTTP/2 "));
    let status = lines
        .next()
        .and_then(|l| l.trim_start_matches("HTTP/2 ").trim().parse().ok())
        .unwrap_or(403);
    let mut headers = Vec::new();
    for line in lines.by_ref() {
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name != "content-length" {
                headers.push((name.trim().to_owned(), value.trim().to_owned()));
            }
        }
    }
    let body = lines
        .take_while(|l| !l.starts_with("###"))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_owned();
    Reply {
        status,
        headers,
        body: body.into_bytes(),
    }
}

fn fault_reply(fault: &Fault) -> Reply {
    match fault {
        Fault::PrimaryRateLimit => rate_limit_case(1),
        Fault::PrimaryRateLimitUntil(reset) => {
            let mut reply = rate_limit_case(1);
            for (name, value) in &mut reply.headers {
                if name == "x-ratelimit-reset" {
                    *value = reset.to_string();
                }
            }
            reply
        }
        Fault::SecondaryLimit {
            status,
            retry_after,
        } => {
            let mut reply = rate_limit_case(2);
            reply.status = *status;
            reply.headers.retain(|(name, _)| name != "retry-after");
            if let Some(seconds) = retry_after {
                reply
                    .headers
                    .push(("retry-after".into(), seconds.to_string()));
            }
            reply
        }
        Fault::Status(status) => Reply::error(*status, "Server Error"),
        Fault::GraphQlErrors => Reply::json(200, &fixture_json("graphql_error.json")),
        Fault::Delay(_) | Fault::AfterApplying(_) => Reply::empty(500),
    }
}

/// Request bodies here are small; this only bounds a runaway client.
const BODY_LIMIT: usize = 8 * 1024 * 1024;

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
    let is_log_blob = path.starts_with("/_logs/");
    let authorized = matches!(
        authorization.as_deref(),
        Some(value) if value == format!("Bearer {TOKEN}") || value == format!("token {TOKEN}")
    );

    let fault = if authorized && !is_log_blob {
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

    let mut state = shared.state();
    let reply = if is_log_blob {
        serve_log(&state, &path)
    } else if !authorized {
        Reply::error(401, "Bad credentials")
    } else if let Some(fault) = fault
        .as_ref()
        .filter(|f| !matches!(f, Fault::AfterApplying(_)))
    {
        fault_reply(fault)
    } else {
        let body_json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let query_pairs: HashMap<String, String> = url::form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        let segments: Vec<String> = path
            .trim_start_matches('/')
            .split('/')
            .map(percent_decode)
            .collect();
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        let reply = route(
            &mut state,
            &shared.base,
            &parts.method,
            &segments,
            &path,
            &query_pairs,
            &body_json,
        );
        let if_none_match = parts
            .headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok());
        let reply = with_etag(&parts.method, reply, if_none_match);
        let resource = if path == "/graphql" {
            "graphql"
        } else {
            "core"
        };
        if reply.status != 304 {
            state.rate_used += 1;
        }
        let used = state.rate_used;
        let reply = match &fault {
            Some(Fault::AfterApplying(status)) => Reply::error(*status, "Server Error"),
            _ => reply,
        };
        reply
            .header("x-ratelimit-limit", "5000")
            .header(
                "x-ratelimit-remaining",
                5000u64.saturating_sub(used).to_string(),
            )
            .header("x-ratelimit-reset", FIXTURE_RESET.to_string())
            .header("x-ratelimit-used", used.to_string())
            .header("x-ratelimit-resource", resource)
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

/// A weak ETag on every successful GET, and a bodiless 304 when the client already has it.
fn with_etag(method: &Method, reply: Reply, if_none_match: Option<&str>) -> Reply {
    if method != Method::GET || reply.status != 200 || reply.has_header("location") {
        return reply;
    }
    let digest = Sha256::digest(&reply.body);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let etag = format!("W/\"{hex}\"");
    if if_none_match == Some(etag.as_str()) {
        return Reply::empty(304)
            .header("etag", etag)
            .header("cache-control", "private, max-age=60, s-maxage=60");
    }
    reply
        .header("etag", etag)
        .header("cache-control", "private, max-age=60, s-maxage=60")
}

fn percent_decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn route(
    state: &mut StateData,
    base: &str,
    method: &Method,
    segments: &[&str],
    path: &str,
    query: &HashMap<String, String>,
    body: &Value,
) -> Reply {
    let number = |s: &str| s.parse::<u64>().ok();
    match segments {
        ["graphql"] if method == Method::POST => graphql(state, body),
        ["repos", owner, repo, rest @ ..] if *owner == OWNER && *repo == REPO => {
            let get = method == Method::GET;
            let post = method == Method::POST;
            match rest {
                ["pulls"] if post => create_pr(state, body),
                ["pulls"] if get => list_prs(state, base, path, query),
                ["pulls", n] if get => {
                    number(n).map_or_else(Reply::not_found, |n| get_pr(state, n))
                }
                ["issues"] if get => list_issues(state, base, path, query),
                ["issues", n] if method == Method::PATCH => {
                    number(n).map_or_else(Reply::not_found, |n| update_issue(state, n, body))
                }
                ["issues", n, "labels"] if post => {
                    number(n).map_or_else(Reply::not_found, |n| add_labels(state, n, body))
                }
                ["commits", sha, "check-runs"] if get => {
                    let runs = state.check_runs.get(*sha).cloned().unwrap_or_default();
                    paginate(state, base, path, query, runs, Some("check_runs"))
                }
                ["commits", sha, "status"] if get => combined_status(sha),
                ["issues", n, "comments"] if get => match number(n).filter(|n| live(state, *n)) {
                    Some(n) => {
                        let items = state.issue_comments.get(&n).cloned().unwrap_or_default();
                        paginate(state, base, path, query, items, None)
                    }
                    None => Reply::not_found(),
                },
                ["issues", n, "comments"] if post => {
                    number(n).map_or_else(Reply::not_found, |n| post_comment(state, n, body))
                }
                ["pulls", n, "comments"] if get => match number(n).filter(|n| live(state, *n)) {
                    Some(n) => {
                        let items = state.review_comments.get(&n).cloned().unwrap_or_default();
                        paginate(state, base, path, query, items, None)
                    }
                    None => Reply::not_found(),
                },
                ["pulls", n, "comments", c, "replies"] if post => match (number(n), number(c)) {
                    (Some(n), Some(c)) => reply_to_review_comment(state, n, c, body),
                    _ => Reply::not_found(),
                },
                ["pulls", n, "merge"] if method == Method::PUT => {
                    number(n).map_or_else(Reply::not_found, |n| merge(state, n, body))
                }
                ["git", "refs", "heads", branch @ ..] if method == Method::DELETE => {
                    delete_ref(state, &branch.join("/"))
                }
                ["pulls", n, "reviews"] if post => {
                    number(n).map_or_else(Reply::not_found, |n| post_review(state, n, body))
                }
                // Lists every review of the PR, oldest first (`GET …/pulls/{n}/reviews`).
                ["pulls", n, "reviews"] if get => match number(n) {
                    Some(n) if state.prs.contains_key(&n) => {
                        let items: Vec<Value> = state
                            .reviews
                            .iter()
                            .filter(|r| r.number == n)
                            .map(|r| r.json.clone())
                            .collect();
                        paginate(state, base, path, query, items, None)
                    }
                    _ => Reply::not_found(),
                },
                ["actions", "runs", id, "jobs"] if get => {
                    match number(id).and_then(|id| state.jobs.get(&id).cloned()) {
                        Some(jobs) => paginate(state, base, path, query, jobs, Some("jobs")),
                        None => Reply::not_found(),
                    }
                }
                ["actions", "jobs", id, "logs"] if get => match number(id) {
                    Some(id) if state.logs.contains_key(&id) => Reply::empty(302).header(
                        "location",
                        format!("{base}/_logs/{id}?sig=short-lived-signature"),
                    ),
                    _ => Reply::not_found(),
                },
                ["actions", "runs", id, "rerun-failed-jobs"] if post => {
                    match number(id).filter(|id| state.jobs.contains_key(id)) {
                        Some(id) => {
                            state.reruns.push(id);
                            Reply::json(201, &json!({}))
                        }
                        None => Reply::not_found(),
                    }
                }
                ["actions", "workflows", workflow, "dispatches"] if post => {
                    match body["ref"].as_str() {
                        Some(git_ref) => {
                            state.dispatches.push(Dispatch {
                                workflow: (*workflow).to_owned(),
                                git_ref: git_ref.to_owned(),
                                inputs: body["inputs"].clone(),
                            });
                            Reply::empty(204)
                        }
                        None => Reply::error(422, "Invalid request.\n\n\"ref\" wasn't supplied."),
                    }
                }
                _ => Reply::not_found(),
            }
        }
        _ => Reply::not_found(),
    }
}

fn live(state: &StateData, number: u64) -> bool {
    state.prs.get(&number).is_some_and(|pr| !pr.deleted)
}

/// A REST list page by `per_page` and `page`, with GitHub's `Link` header.
fn paginate(
    state: &StateData,
    base: &str,
    path: &str,
    query: &HashMap<String, String>,
    items: Vec<Value>,
    wrapper: Option<&str>,
) -> Reply {
    let per_page = query
        .get("per_page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(30)
        .clamp(1, 100)
        .min(state.max_per_page);
    let page = query
        .get("page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let last = items.len().div_ceil(per_page).max(1);
    let total = items.len();
    let slice: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    let body = match wrapper {
        Some(key) => json!({ "total_count": total, key: slice }),
        None => Value::Array(slice),
    };
    // GitHub's links keep the request's other parameters (`state`, `labels`, `since`, …).
    let mut kept: Vec<(&String, &String)> = query
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "per_page" | "page"))
        .collect();
    kept.sort();
    let link = |p: usize, rel: &str| {
        let mut target = url::form_urlencoded::Serializer::new(String::new());
        for (key, value) in &kept {
            target.append_pair(key, value);
        }
        target
            .append_pair("per_page", &per_page.to_string())
            .append_pair("page", &p.to_string());
        format!("<{base}{path}?{}>; rel=\"{rel}\"", target.finish())
    };
    let mut links = Vec::new();
    if page > 1 {
        links.push(link(page - 1, "prev"));
    }
    if page < last {
        links.push(link(page + 1, "next"));
        links.push(link(last, "last"));
    }
    if page > 1 {
        links.push(link(1, "first"));
    }
    let reply = Reply::json(200, &body);
    if links.is_empty() {
        reply
    } else {
        reply.header("link", links.join(", "))
    }
}

fn get_pr(state: &mut StateData, number: u64) -> Reply {
    let Some(pr) = state.prs.get_mut(&number).filter(|pr| !pr.deleted) else {
        return Reply::not_found();
    };
    if pr.null_gets_left > 0 {
        pr.null_gets_left -= 1;
    } else if pr.json["mergeable"].is_null() {
        let draft = pr.json["draft"].as_bool().unwrap_or(false);
        pr.json["mergeable"] = json!(true);
        pr.json["rebaseable"] = json!(true);
        pr.json["mergeable_state"] = json!(if draft { "draft" } else { "clean" });
        pr.json["merge_commit_sha"] = json!("7c2d9e4f1a0b3c5d6e8f9a1b2c3d4e5f6a7b8c9d");
    }
    Reply::json(200, &pr.json)
}

fn create_pr(state: &mut StateData, body: &Value) -> Reply {
    let (Some(title), Some(head), Some(base)) = (
        body["title"].as_str(),
        body["head"].as_str(),
        body["base"].as_str(),
    ) else {
        return Reply::error(422, "Validation Failed");
    };
    let exists = state
        .prs
        .values()
        .any(|pr| !pr.deleted && pr.json["state"] == "open" && pr.json["head"]["ref"] == head);
    if exists {
        // GitHub's answer to a second PR for one head: a validation failure.
        return Reply::json(
            422,
            &json!({
                "message": "Validation Failed",
                "errors": [{
                    "resource": "PullRequest",
                    "code": "custom",
                    "message": format!("A pull request already exists for {OWNER}:{head}."),
                }],
                "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
                "status": "422",
            }),
        );
    }
    let number = state.prs.keys().next_back().map_or(PR, |n| n + 1);
    // The template's URLs name #1234; a created PR gets its own number in all of them.
    let template = fixture("pulls_create_201.json")
        .replace("pulls/1234", &format!("pulls/{number}"))
        .replace("pull/1234", &format!("pull/{number}"))
        .replace("issues/1234", &format!("issues/{number}"));
    let mut pr: Value = serde_json::from_str(&template).unwrap_or(Value::Null);
    let sha = state
        .branch_heads
        .get(head)
        .cloned()
        .unwrap_or_else(|| FIRST_HEAD.to_owned());
    pr["number"] = json!(number);
    pr["id"] = json!(3_290_417_765u64 + number - PR);
    pr["title"] = json!(title);
    pr["body"] = body["body"].clone();
    pr["draft"] = json!(body["draft"].as_bool().unwrap_or(false));
    pr["head"]["ref"] = json!(head);
    pr["head"]["label"] = json!(format!("{OWNER}:{head}"));
    pr["head"]["sha"] = json!(sha);
    pr["base"]["ref"] = json!(base);
    pr["base"]["label"] = json!(format!("{OWNER}:{base}"));
    pr["statuses_url"] = json!(format!(
        "https://api.github.com/repos/{OWNER}/{REPO}/statuses/{sha}"
    ));
    let null_gets_left = state.mergeable_after_gets;
    state.prs.insert(
        number,
        FakePr {
            json: pr.clone(),
            null_gets_left,
            deleted: false,
        },
    );
    Reply::json(201, &pr)
}

/// `GET …/pulls` ("List pull requests"): `state` (`open` by default, `closed`, `all`) and
/// `head` (`user:ref-name`) filter, newest first, paginated. A PR listed here has no
/// `mergeable` fields, as on GitHub (only the single-PR answer computes them).
fn list_prs(state: &StateData, base: &str, path: &str, query: &HashMap<String, String>) -> Reply {
    let wanted = query.get("state").map_or("open", String::as_str);
    let head = query.get("head").map(String::as_str);
    let items: Vec<Value> = state
        .prs
        .values()
        .rev()
        .filter(|pr| !pr.deleted)
        .map(|pr| &pr.json)
        .filter(|pr| wanted == "all" || pr["state"] == wanted)
        .filter(|pr| head.is_none_or(|h| pr["head"]["label"] == h))
        .map(|pr| {
            let mut pr = pr.clone();
            if let Some(fields) = pr.as_object_mut() {
                for key in [
                    "merged",
                    "mergeable",
                    "rebaseable",
                    "mergeable_state",
                    "merged_by",
                    "comments",
                    "review_comments",
                    "maintainer_can_modify",
                    "commits",
                    "additions",
                    "deletions",
                    "changed_files",
                ] {
                    fields.remove(key);
                }
            }
            pr
        })
        .collect();
    paginate(state, base, path, query, items, None)
}

fn add_labels(state: &mut StateData, number: u64, body: &Value) -> Reply {
    let Some(names) = body["labels"].as_array() else {
        return Reply::error(
            422,
            "Invalid request.\n\nFor 'properties/labels', nil is not an array.",
        );
    };
    let names: Vec<String> = names
        .iter()
        .filter_map(|n| n.as_str().map(str::to_owned))
        .collect();
    if !live(state, number) {
        return Reply::not_found();
    }
    for name in names {
        let label = catalog_label(state, &name);
        let Some(pr) = state.prs.get_mut(&number) else {
            return Reply::not_found();
        };
        if let Some(labels) = pr.json["labels"].as_array_mut() {
            if !labels.iter().any(|l| l["name"] == name.as_str()) {
                labels.push(label);
            }
        }
    }
    let labels = state
        .prs
        .get(&number)
        .map(|pr| pr.json["labels"].clone())
        .unwrap_or_else(|| json!([]));
    Reply::json(200, &labels)
}

/// The repository's label named `name`; GitHub creates a label on first use.
fn catalog_label(state: &mut StateData, name: &str) -> Value {
    if let Some(label) = state.label_catalog.iter().find(|l| l["name"] == name) {
        return label.clone();
    }
    state.next_id += 1;
    let label = json!({
        "id": state.next_id,
        "node_id": format!("LA_fake{}", state.next_id),
        "url": format!("https://api.github.com/repos/{OWNER}/{REPO}/labels/{name}"),
        "name": name,
        "color": "ededed",
        "default": false,
        "description": null,
    });
    state.label_catalog.push(label.clone());
    label
}

/// The next time on the fake's issue clock, as GitHub writes times.
fn issue_tick(state: &mut StateData) -> String {
    state.issue_clock += chrono::Duration::seconds(1);
    state
        .issue_clock
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A user as issues show one: the fixtures' owner, or a user of that shape named `login`
/// (with an id derived from the name).
fn user_json(login: &str) -> Value {
    let owner = array(fixture_json("issue_comments.json"))
        .into_iter()
        .find(|c| c["user"]["login"] == OWNER)
        .map(|mut c| c["user"].take())
        .unwrap_or_else(|| json!({ "login": OWNER, "id": 5120387, "type": "User" }));
    if login == OWNER {
        return owner;
    }
    let digest = Sha256::digest(login.as_bytes());
    let id = digest
        .iter()
        .take(3)
        .fold(10_000_000u64, |id, byte| id * 256 + u64::from(*byte));
    let text = owner.to_string().replace(OWNER, login);
    let mut user: Value = serde_json::from_str(&text).unwrap_or(owner);
    user["id"] = json!(id);
    user["node_id"] = json!(format!("U_fake{id}"));
    user["avatar_url"] = json!(format!("https://avatars.githubusercontent.com/u/{id}?v=4"));
    user
}

fn time_of(value: &Value) -> Option<DateTime<Utc>> {
    value
        .as_str()
        .and_then(|text| DateTime::parse_from_rfc3339(text).ok())
        .map(|at| at.with_timezone(&Utc))
}

/// A PR as the issues list shows it: the issue fields, and a `pull_request` key.
fn pr_as_issue(number: u64, pr: &Value) -> Value {
    let api = format!("https://api.github.com/repos/{OWNER}/{REPO}/issues/{number}");
    let assignees = if pr["assignees"].is_array() {
        pr["assignees"].clone()
    } else {
        json!([])
    };
    json!({
        "url": api,
        "repository_url": format!("https://api.github.com/repos/{OWNER}/{REPO}"),
        "labels_url": format!("{api}/labels{{/name}}"),
        "comments_url": format!("{api}/comments"),
        "events_url": format!("{api}/events"),
        "html_url": pr["html_url"],
        "id": pr["id"],
        "node_id": pr["node_id"],
        "number": number,
        "title": pr["title"],
        "user": pr["user"],
        "labels": pr["labels"],
        "state": pr["state"],
        "locked": false,
        "assignee": pr.get("assignee").cloned().unwrap_or(Value::Null),
        "assignees": assignees,
        "milestone": null,
        "comments": 0,
        "created_at": pr["created_at"],
        "updated_at": pr["updated_at"],
        "closed_at": pr["closed_at"],
        "author_association": pr["author_association"],
        "active_lock_reason": null,
        "draft": pr["draft"],
        "pull_request": {
            "url": format!("https://api.github.com/repos/{OWNER}/{REPO}/pulls/{number}"),
            "html_url": pr["html_url"],
            "diff_url": format!("https://github.com/{OWNER}/{REPO}/pull/{number}.diff"),
            "patch_url": format!("https://github.com/{OWNER}/{REPO}/pull/{number}.patch"),
            "merged_at": pr["merged_at"],
        },
        "body": pr["body"],
        "state_reason": null,
    })
}

/// `GET /repos/{o}/{r}/issues`: issues and PRs by `state` (default `open`), `labels` (a comma
/// list; an item must carry all of them, names compared ignoring case) and `since` (updated
/// at or after), sorted by `sort` (`created`, `updated`; default `created`) in `direction`
/// (default `desc`), one page of them.
fn list_issues(
    state: &StateData,
    base: &str,
    path: &str,
    query: &HashMap<String, String>,
) -> Reply {
    let wanted_state = query.get("state").map_or("open", String::as_str);
    if !matches!(wanted_state, "open" | "closed" | "all") {
        return Reply::error(422, "Validation Failed");
    }
    let labels: Vec<String> = query
        .get("labels")
        .map(|list| {
            list.split(',')
                .map(|l| l.trim().to_lowercase())
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let since = match query.get("since") {
        Some(text) => match time_of(&json!(text)) {
            Some(at) => Some(at),
            None => return Reply::error(422, "Validation Failed"),
        },
        None => None,
    };
    let by_updated = query.get("sort").map(String::as_str) == Some("updated");
    let ascending = query.get("direction").map(String::as_str) == Some("asc");
    let prs = state
        .prs
        .iter()
        .filter(|(_, pr)| !pr.deleted)
        .map(|(number, pr)| pr_as_issue(*number, &pr.json));
    let mut items: Vec<Value> = state
        .issues
        .values()
        .cloned()
        .chain(prs)
        .filter(|item| wanted_state == "all" || item["state"] == wanted_state)
        .filter(|item| {
            let names: Vec<String> = array(item["labels"].clone())
                .iter()
                .filter_map(|l| l["name"].as_str().map(str::to_lowercase))
                .collect();
            labels.iter().all(|wanted| names.contains(wanted))
        })
        .filter(|item| since.is_none_or(|since| time_of(&item["updated_at"]) >= Some(since)))
        .collect();
    let key = |item: &Value| {
        let field = if by_updated {
            "updated_at"
        } else {
            "created_at"
        };
        (time_of(&item[field]), item["number"].as_u64())
    };
    items.sort_by_key(key);
    if !ascending {
        items.reverse();
    }
    paginate(state, base, path, query, items, None)
}

fn combined_status(sha: &str) -> Reply {
    let mut status = fixture_json("status_combined_pending.json");
    if sha != FIRST_HEAD {
        // No legacy statuses: `pending` with `total_count: 0`, as on Actions-only repos.
        status["statuses"] = json!([]);
        status["total_count"] = json!(0);
    }
    let text = status.to_string().replace(FIRST_HEAD, sha);
    Reply::json(200, &serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn now_text() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `POST …/pulls/{n}/comments/{c}/replies`: the bot's reply joins comment `c`'s thread, in
/// the REST list and in the GraphQL thread alike.
fn reply_to_review_comment(
    state: &mut StateData,
    number: u64,
    comment_id: u64,
    body: &Value,
) -> Reply {
    let Some(text) = body["body"].as_str() else {
        return Reply::error(422, "Invalid request.\n\n\"body\" wasn't supplied.");
    };
    if !live(state, number) {
        return Reply::not_found();
    }
    // GitHub: "This must be the ID of a top-level review comment, not a reply to that
    // comment. Replies to replies are not supported." Its documented answers are 201 and
    // 404; a reply's id finds no top-level comment, so it is the 404.
    let Some(thread) = state.threads.get_mut(&number).and_then(|threads| {
        threads.iter_mut().find(|t| {
            t["comments"]["nodes"]
                .as_array()
                .and_then(|c| c.first())
                .is_some_and(|first| first["databaseId"] == comment_id)
        })
    }) else {
        return Reply::not_found();
    };
    state.next_id += 1;
    let id = state.next_id;
    let created = now_text();
    if let Some(nodes) = thread["comments"]["nodes"].as_array_mut() {
        nodes.push(json!({
            "id": format!("PRRC_fake{id}"),
            "databaseId": id,
            "author": {"login": "lumen-executor"},
            "body": text,
            "createdAt": created,
            "url": format!("https://github.com/{OWNER}/{REPO}/pull/{number}#discussion_r{id}"),
        }));
    }
    let mut comment = array(fixture_json("pull_review_comments.json"))
        .pop()
        .unwrap_or(Value::Null);
    comment["id"] = json!(id);
    comment["node_id"] = json!(format!("PRRC_fake{id}"));
    comment["in_reply_to_id"] = json!(comment_id);
    comment["body"] = json!(text);
    comment["created_at"] = json!(created);
    comment["updated_at"] = json!(created);
    state
        .review_comments
        .entry(number)
        .or_default()
        .push(comment.clone());
    Reply::json(201, &comment)
}

fn post_comment(state: &mut StateData, number: u64, body: &Value) -> Reply {
    let Some(text) = body["body"].as_str() else {
        return Reply::error(422, "Invalid request.\n\n\"body\" wasn't supplied.");
    };
    if !live(state, number) {
        return Reply::not_found();
    }
    state.next_id += 1;
    let id = state.next_id;
    // The bot's comment in the fixture is the template: executor posts as the app.
    let mut comment = array(fixture_json("issue_comments.json"))
        .pop()
        .unwrap_or(Value::Null);
    comment["id"] = json!(id);
    comment["node_id"] = json!(format!("IC_fake{id}"));
    comment["url"] = json!(format!(
        "https://api.github.com/repos/{OWNER}/{REPO}/issues/comments/{id}"
    ));
    comment["html_url"] = json!(format!(
        "https://github.com/{OWNER}/{REPO}/pull/{number}#issuecomment-{id}"
    ));
    comment["issue_url"] = json!(format!(
        "https://api.github.com/repos/{OWNER}/{REPO}/issues/{number}"
    ));
    comment["body"] = json!(text);
    comment["created_at"] = json!(now_text());
    comment["updated_at"] = json!(now_text());
    state
        .issue_comments
        .entry(number)
        .or_default()
        .push(comment.clone());
    Reply::json(201, &comment)
}

/// `PATCH …/issues/{n}` ("Update an issue"): `title`, `body`, `state` (`open` | `closed`)
/// and `state_reason` (`completed` by default when closing, `not_planned`, `duplicate`;
/// `reopened` when opening); `200` and the issue. A change of state stamps `closed_at`,
/// `closed_by` (the token's user, the app's bot) and `updated_at`; closing a closed issue
/// changes nothing but `updated_at`, as any edit does. Issues only: a PR number is a 404
/// here (GitHub would update the PR's issue side; the fake does not need it).
fn update_issue(state: &mut StateData, number: u64, body: &Value) -> Reply {
    if !body.is_object() {
        return Reply::error(400, "Problems parsing JSON");
    }
    const BAD_STATE: &str =
        "Invalid request.\n\nFor 'properties/state', is not one of [\"open\", \"closed\"].";
    let wanted = match body.get("state") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "open" || s == "closed" => Some(s.clone()),
        Some(_) => return Reply::error(422, BAD_STATE),
    };
    if !state.issues.contains_key(&number) {
        return Reply::not_found();
    }
    let at = issue_tick(state);
    let Some(issue) = state.issues.get_mut(&number) else {
        return Reply::not_found();
    };
    for key in ["title", "body"] {
        if let Some(text) = body.get(key).and_then(Value::as_str) {
            issue[key] = json!(text);
        }
    }
    let reason = body.get("state_reason").and_then(Value::as_str);
    match wanted.as_deref() {
        Some("closed") if issue["state"] != "closed" => {
            issue["state"] = json!("closed");
            issue["state_reason"] = json!(reason.unwrap_or("completed"));
            issue["closed_at"] = json!(at);
            issue["closed_by"] = user_json(BOT_LOGIN);
        }
        Some("open") if issue["state"] != "open" => {
            issue["state"] = json!("open");
            issue["state_reason"] = json!(reason.unwrap_or("reopened"));
            issue["closed_at"] = Value::Null;
            issue["closed_by"] = Value::Null;
        }
        _ => {}
    }
    issue["updated_at"] = json!(at);
    Reply::json(200, issue)
}

fn post_review(state: &mut StateData, number: u64, body: &Value) -> Reply {
    let Some(pr) = state.prs.get(&number).filter(|pr| !pr.deleted) else {
        return Reply::not_found();
    };
    let event = body["event"].as_str().unwrap_or("").to_owned();
    let text = body["body"].as_str().unwrap_or("").to_owned();
    let review_state = match event.as_str() {
        "COMMENT" => "COMMENTED",
        "APPROVE" => "APPROVED",
        "REQUEST_CHANGES" => "CHANGES_REQUESTED",
        _ => return Reply::error(422, "Unprocessable Entity"),
    };
    // The app opened the PR, so GitHub refuses to let the same app approve it or ask for
    // changes on it.
    if event != "COMMENT" && pr.json["user"]["login"] == BOT_LOGIN {
        let what = if event == "APPROVE" {
            "Can not approve your own pull request"
        } else {
            "Can not request changes on your own pull request"
        };
        return Reply::json(
            422,
            &json!({
                "message": "Unprocessable Entity",
                "errors": [what],
                "documentation_url": "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request",
                "status": "422",
            }),
        );
    }
    let user = pr.json["user"].clone();
    let commit = pr.json["head"]["sha"].clone();
    let review = review_json(
        state,
        number,
        user,
        &text,
        review_state,
        commit,
        "CONTRIBUTOR",
    );
    state.reviews.push(PostedReview {
        number,
        event,
        body: text.clone(),
        json: review.clone(),
    });
    Reply::json(200, &review)
}

/// `PUT …/pulls/{n}/merge`, as GitHub answers it: 405 for a PR that cannot be merged (a
/// draft, a conflict, one merged or closed already), 409 when `sha` is not the head, else
/// the PR is merged and `{sha, merged, message}` comes back.
fn merge(state: &mut StateData, number: u64, body: &Value) -> Reply {
    let Some(pr) = state.prs.get_mut(&number).filter(|pr| !pr.deleted) else {
        return Reply::not_found();
    };
    let head = pr.json["head"]["sha"].as_str().unwrap_or("").to_string();
    let docs = "https://docs.github.com/rest/pulls/pulls#merge-a-pull-request";
    let refuse = |status: u16, message: &str| {
        Reply::json(
            status,
            &json!({ "message": message, "documentation_url": docs, "status": status.to_string() }),
        )
    };
    if pr.json["state"] != "open" {
        return refuse(405, "Pull Request is not mergeable");
    }
    if pr.json["draft"].as_bool().unwrap_or(false) {
        return refuse(405, "Pull Request is still a draft");
    }
    if body["sha"].as_str().is_some_and(|sha| sha != head) {
        return refuse(
            409,
            "Head branch was modified. Review and try the merge again.",
        );
    }
    if pr.json["mergeable"] == json!(false) {
        return refuse(405, "Pull Request is not mergeable");
    }
    let method = body["merge_method"].as_str().unwrap_or("merge").to_string();
    let now = now_text();
    let merge_sha = "7c2d9e4f1a0b3c5d6e8f9a1b2c3d4e5f6a7b8c9d";
    pr.json["state"] = json!("closed");
    pr.json["merged"] = json!(true);
    pr.json["merged_at"] = json!(now);
    pr.json["closed_at"] = json!(now);
    pr.json["updated_at"] = json!(now);
    pr.json["merge_commit_sha"] = json!(merge_sha);
    state.merges.push((number, head, method));
    Reply::json(
        200,
        &json!({ "sha": merge_sha, "merged": true, "message": "Pull Request successfully merged" }),
    )
}

/// `DELETE …/git/refs/heads/{branch}`: 204, or 422 for a ref that does not exist.
fn delete_ref(state: &mut StateData, branch: &str) -> Reply {
    let known = state
        .prs
        .values()
        .any(|pr| pr.json["head"]["ref"] == branch);
    if !known || state.deleted_branches.iter().any(|b| b == branch) {
        return Reply::error(422, "Reference does not exist");
    }
    state.deleted_branches.push(branch.to_string());
    Reply::empty(204)
}

/// A `PullRequestReview` as GitHub answers and lists it, with a new id.
fn review_json(
    state: &mut StateData,
    number: u64,
    user: Value,
    body: &str,
    review_state: &str,
    commit: Value,
    association: &str,
) -> Value {
    state.next_id += 1;
    let id = state.next_id;
    json!({
        "id": id,
        "node_id": format!("PRR_fake{id}"),
        "user": user,
        "body": body,
        "state": review_state,
        "html_url": format!("https://github.com/{OWNER}/{REPO}/pull/{number}#pullrequestreview-{id}"),
        "pull_request_url": format!("https://api.github.com/repos/{OWNER}/{REPO}/pulls/{number}"),
        "author_association": association,
        "_links": {
            "html": { "href": format!("https://github.com/{OWNER}/{REPO}/pull/{number}#pullrequestreview-{id}") },
            "pull_request": { "href": format!("https://api.github.com/repos/{OWNER}/{REPO}/pulls/{number}") },
        },
        "submitted_at": now_text(),
        "commit_id": commit,
    })
}

fn serve_log(state: &StateData, path: &str) -> Reply {
    let id = path
        .trim_start_matches("/_logs/")
        .parse::<u64>()
        .ok()
        .and_then(|id| state.logs.get(&id));
    match id {
        Some(log) => Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/plain; charset=utf-8".into())],
            body: log.clone().into_bytes(),
        },
        None => Reply::not_found(),
    }
}

/// Opaque to clients, like GitHub's base64 cursors; the index of the page's last node.
const CURSOR_PREFIX: &str = "Y3Vyc29yOnYyOp";

fn graphql(state: &mut StateData, body: &Value) -> Reply {
    let query = body["query"].as_str().unwrap_or("");
    let variables = &body["variables"];
    if query.contains("resolveReviewThread") {
        let id = variables["id"].as_str().unwrap_or("");
        let thread = state
            .threads
            .values_mut()
            .flat_map(|threads| threads.iter_mut())
            .find(|t| t["id"] == id);
        return match thread {
            Some(thread) => {
                thread["isResolved"] = json!(true);
                let mut answer = fixture_json("graphql_resolve_thread.json");
                answer["data"]["resolveReviewThread"]["thread"]["id"] = json!(id);
                Reply::json(200, &answer)
            }
            None => Reply::json(
                200,
                &json!({
                    "data": { "resolveReviewThread": null },
                    "errors": [{
                        "type": "NOT_FOUND",
                        "path": ["resolveReviewThread"],
                        "locations": [{ "line": 1, "column": 21 }],
                        "message": format!("Could not resolve to a node with the global id of '{id}'"),
                    }],
                }),
            ),
        };
    }
    if query.contains("query ExecutorPrs(") {
        return pull_requests(state, query, variables);
    }
    if query.contains("reviewThreads") {
        let number = variables["number"].as_u64().unwrap_or(0);
        if variables["owner"] != OWNER || variables["name"] != REPO || !live(state, number) {
            let mut answer = fixture_json("graphql_error.json");
            answer["errors"][0]["message"] = json!(format!(
                "Could not resolve to a PullRequest with the number of {number}."
            ));
            return Reply::json(200, &answer);
        }
        let first = regex::Regex::new(r"reviewThreads\(first:\s*(\d+)")
            .ok()
            .and_then(|re| re.captures(query))
            .and_then(|c| c[1].parse::<usize>().ok())
            .unwrap_or(50)
            .min(state.threads_page_size);
        let start = variables["after"]
            .as_str()
            .and_then(|c| c.strip_prefix(CURSOR_PREFIX))
            .and_then(|i| i.parse::<usize>().ok())
            .map_or(0, |i| i + 1);
        let threads = state.threads.get(&number).cloned().unwrap_or_default();
        let nodes: Vec<Value> = threads.iter().skip(start).take(first).cloned().collect();
        let end = start + nodes.len();
        let end_cursor = if nodes.is_empty() {
            Value::Null
        } else {
            json!(format!("{CURSOR_PREFIX}{}", end - 1))
        };
        return Reply::json(
            200,
            &json!({ "data": { "repository": { "pullRequest": { "reviewThreads": {
                "pageInfo": { "hasNextPage": end < threads.len(), "endCursor": end_cursor },
                "nodes": nodes,
            }}}}}),
        );
    }
    Reply::json(
        200,
        &json!({ "errors": [{ "message": "the fake GitHub does not serve this query" }] }),
    )
}

/// `query ExecutorPrs(…)`: fields `prN: pullRequest(number: $nN) { ...executorPr }`, each
/// answered from the same state the REST paths serve, in GraphQL's shapes (upper-case
/// enums, `nodes`, `pageInfo`), honouring the caps a test set on pages. A missing PR is
/// `null` with a `NOT_FOUND` error whose path names its alias, as GitHub answers.
fn pull_requests(state: &mut StateData, query: &str, variables: &Value) -> Reply {
    if variables["owner"] != OWNER || variables["name"] != REPO {
        let mut answer = fixture_json("graphql_error.json");
        answer["data"] = json!({ "repository": null });
        answer["errors"][0]["path"] = json!(["repository"]);
        answer["errors"][0]["message"] = json!(format!(
            "Could not resolve to a Repository with the name '{}/{}'.",
            variables["owner"].as_str().unwrap_or(""),
            variables["name"].as_str().unwrap_or("")
        ));
        return Reply::json(200, &answer);
    }
    let first = |field: &str, default: usize| {
        regex::Regex::new(&format!(r"{field}\((?:first|last):\s*(\d+)"))
            .ok()
            .and_then(|re| re.captures(query))
            .and_then(|c| c[1].parse::<usize>().ok())
            .unwrap_or(default)
    };
    let contexts_page = first("contexts", 100).min(state.max_per_page);
    let threads_page = first("reviewThreads", 100).min(state.threads_page_size);
    let thread_comments = first("comments", 50);
    let aliases: Vec<(String, String)> =
        regex::Regex::new(r"(pr\d+): pullRequest\(number: \$(n\d+)\)")
            .map(|re| {
                re.captures_iter(query)
                    .map(|c| (c[1].to_string(), c[2].to_string()))
                    .collect()
            })
            .unwrap_or_default();
    let mut repository = serde_json::Map::new();
    let mut errors = Vec::new();
    for (alias, variable) in aliases {
        let number = variables[&variable].as_u64().unwrap_or(0);
        if !live(state, number) {
            let mut error = fixture_json("graphql_error.json")["errors"][0].take();
            error["path"] = json!(["repository", alias]);
            error["message"] = json!(format!(
                "Could not resolve to a PullRequest with the number of {number}."
            ));
            errors.push(error);
            repository.insert(alias, Value::Null);
            continue;
        }
        let node = pr_node(state, number, contexts_page, threads_page, thread_comments);
        repository.insert(alias, node);
    }
    let mut answer = json!({ "data": { "repository": repository } });
    if !errors.is_empty() {
        answer["errors"] = json!(errors);
    }
    Reply::json(200, &answer)
}

/// One PR as the `executorPr` fragment asks for it.
fn pr_node(
    state: &mut StateData,
    number: u64,
    contexts_page: usize,
    threads_page: usize,
    thread_comments: usize,
) -> Value {
    // A look computes mergeability as a REST GET does.
    let _ = get_pr(state, number);
    let pr = state
        .prs
        .get(&number)
        .map(|p| p.json.clone())
        .unwrap_or_default();
    let state_name = if pr["merged"] == true || !pr["merged_at"].is_null() {
        "MERGED"
    } else if pr["state"] == "closed" {
        "CLOSED"
    } else {
        "OPEN"
    };
    let mergeable = match pr["mergeable"].as_bool() {
        Some(true) => "MERGEABLE",
        Some(false) => "CONFLICTING",
        None => "UNKNOWN",
    };
    let head = pr["head"]["sha"].as_str().unwrap_or("").to_string();
    let upper = |v: &Value| match v.as_str() {
        Some(text) => json!(text.to_ascii_uppercase()),
        None => Value::Null,
    };
    let runs = state.check_runs.get(&head).cloned().unwrap_or_default();
    let rollup = if runs.is_empty() {
        Value::Null
    } else {
        let nodes: Vec<Value> = runs
            .iter()
            .take(contexts_page)
            .map(|run| {
                json!({
                    "__typename": "CheckRun",
                    "databaseId": run["id"],
                    "name": run["name"],
                    "status": upper(&run["status"]),
                    "conclusion": upper(&run["conclusion"]),
                    "startedAt": run["started_at"],
                    "detailsUrl": run["details_url"],
                    "permalink": run["html_url"],
                    "title": run["output"]["title"],
                })
            })
            .collect();
        json!({ "contexts": {
            "pageInfo": { "hasNextPage": runs.len() > contexts_page },
            "nodes": nodes,
        }})
    };
    let threads = state.threads.get(&number).cloned().unwrap_or_default();
    let thread_nodes: Vec<Value> = threads
        .iter()
        .take(threads_page)
        .map(|thread| {
            let mut thread = thread.clone();
            if let Some(comments) = thread["comments"]["nodes"].as_array_mut() {
                let skip = comments.len().saturating_sub(thread_comments);
                comments.drain(..skip);
                for comment in comments.iter_mut() {
                    let login = comment["author"]["login"]
                        .as_str()
                        .unwrap_or("")
                        .to_string();
                    let bot = BOT_LOGIN.strip_suffix("[bot]") == Some(login.as_str());
                    comment["author"]["__typename"] = json!(if bot { "Bot" } else { "User" });
                    comment["authorAssociation"] = json!(if login == OWNER {
                        "OWNER"
                    } else {
                        "CONTRIBUTOR"
                    });
                }
            }
            thread
        })
        .collect();
    let comments = state
        .issue_comments
        .get(&number)
        .cloned()
        .unwrap_or_default();
    let skip = comments.len().saturating_sub(100);
    let comment_nodes: Vec<Value> = comments
        .iter()
        .skip(skip)
        .map(|c| {
            let author = match c["user"]["login"].as_str() {
                Some(login) => json!({
                    "__typename": c["user"]["type"],
                    "login": login.strip_suffix("[bot]").unwrap_or(login),
                }),
                None => Value::Null,
            };
            json!({
                "databaseId": c["id"],
                "author": author,
                "authorAssociation": c["author_association"],
                "body": c["body"],
                "createdAt": c["created_at"],
            })
        })
        .collect();
    let labels: Vec<Value> = pr["labels"]
        .as_array()
        .map(|labels| {
            labels
                .iter()
                .map(|l| json!({ "name": l["name"] }))
                .collect()
        })
        .unwrap_or_default();
    let mut latest: BTreeMap<String, Value> = BTreeMap::new();
    for review in state.reviews.iter().filter(|r| r.number == number) {
        let login = review.json["user"]["login"]
            .as_str()
            .unwrap_or("")
            .to_string();
        match review.json["state"].as_str() {
            Some(verdict @ ("APPROVED" | "CHANGES_REQUESTED")) => {
                latest.insert(
                    login.clone(),
                    json!({
                        "state": verdict,
                        "author": { "login": login.strip_suffix("[bot]").unwrap_or(&login) },
                        "commit": { "oid": review.json["commit_id"] },
                    }),
                );
            }
            Some("DISMISSED") => {
                latest.remove(&login);
            }
            _ => {}
        }
    }
    let author = pr["user"]["login"]
        .as_str()
        .map(|login| json!({ "login": login.strip_suffix("[bot]").unwrap_or(login) }));
    json!({
        "number": number,
        "state": state_name,
        "author": author,
        "latestOpinionatedReviews": { "nodes": latest.into_values().collect::<Vec<_>>() },
        "isDraft": pr["draft"],
        "mergeable": mergeable,
        "headRefOid": head,
        "updatedAt": pr["updated_at"],
        "labels": { "nodes": labels },
        "commits": { "nodes": [{ "commit": { "oid": head, "statusCheckRollup": rollup } }] },
        "reviewThreads": {
            "pageInfo": { "hasNextPage": threads.len() > threads_page },
            "nodes": thread_nodes,
        },
        "comments": { "nodes": comment_nodes },
    })
}

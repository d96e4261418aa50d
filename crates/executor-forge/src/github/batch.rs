//! Many pull requests in one GraphQL query: [`GithubClient::pull_requests`] reads, for up
//! to [`PRS_PER_QUERY`] PRs per request, everything the `pr` machine looks at (state,
//! draft flag, mergeability, head, labels, the head commit's check runs, review threads
//! with their latest comments, the latest conversation comments).
//!
//! Why: a tick over fifty open PRs read one PR at a time costs five requests each (PR,
//! check runs, threads, two comment lists), even when every answer is a 304. Aliased fields
//! (`pr0: pullRequest(number: $n0) { …}`) put a whole tick in a few requests, so a tick
//! costs fewer requests than there are open PRs, whatever changed.
//!
//! Limits, and what happens past them: a PR with more than 100 check runs on its head or
//! more than 100 review threads comes back with `checks_complete` / `threads_complete`
//! false, and the caller reads that PR again one resource at a time (every page). A thread
//! keeps only its last 50 comments (the last one is what decides whether it asks for work),
//! the conversation only its last 100.
//!
//! Errors, and why they are split: GitHub answers a missing PR among many with `data` for
//! the others and a `NOT_FOUND` error whose `path` names the alias. That PR alone gets the
//! error (so the runner ends its run); an error that names no alias (a repository the
//! token cannot see is `NOT_FOUND` too), a failed request, or a rate limit reaches every PR
//! of the request as [`GithubError::Shared`], which never reads as "this PR is gone".
//!
//! What it must never do: call one PR gone because of an error about anything else.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use executor_core::merge::Verdict;
use executor_http::github::types::{self, nodes, Author, CheckOutput, ReviewThread};
use executor_http::github::GithubClient;
use executor_http::github::{GithubError, GraphQlError};

/// PRs per query. One PR asks for at most about 5,400 nodes (100 labels, 100 checks, 100
/// threads of 50 comments, 100 comments): 20 stay far inside GitHub's 500,000-node limit,
/// and fifty open PRs cost three requests.
pub const PRS_PER_QUERY: usize = 20;

/// One PR as the batch query saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrSnapshot {
    pub number: u64,
    pub state: SnapshotState,
    pub draft: bool,
    /// `None` while GitHub computes it (`UNKNOWN`).
    pub mergeable: Option<bool>,
    pub head_sha: String,
    pub updated_at: DateTime<Utc>,
    pub labels: Vec<String>,
    /// The head commit's check runs in the REST shape (legacy statuses left out).
    pub check_runs: Vec<types::CheckRun>,
    /// False when the head has more check runs than one page held.
    pub checks_complete: bool,
    pub threads: Vec<ReviewThread>,
    /// False when the PR has more review threads than one page held.
    pub threads_complete: bool,
    /// The latest conversation comments, oldest first.
    pub comments: Vec<SnapshotComment>,
    /// The PR's author (`None`: a deleted account).
    pub author: Option<String>,
    /// Each reviewer's latest approval or request for changes.
    pub verdicts: Vec<Verdict>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotState {
    Open,
    Closed,
    Merged,
}

/// A conversation comment (GraphQL `IssueComment`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotComment {
    #[serde(default)]
    pub database_id: Option<u64>,
    /// `None` for a deleted account.
    #[serde(default)]
    pub author: Option<Author>,
    #[serde(default)]
    pub author_association: String,
    #[serde(default)]
    pub body: String,
    pub created_at: DateTime<Utc>,
}

const PR_FRAGMENT: &str = "fragment executorPr on PullRequest {
  number state isDraft mergeable headRefOid updatedAt
  author { login }
  latestOpinionatedReviews(first: 100, writersOnly: true) { nodes { state author { login } commit { oid } } }
  labels(first: 100) { nodes { name } }
  commits(last: 1) { nodes { commit { oid statusCheckRollup { contexts(first: 100) {
    pageInfo { hasNextPage }
    nodes { __typename ... on CheckRun { databaseId name status conclusion startedAt detailsUrl permalink title } }
  } } } } }
  reviewThreads(first: 100) {
    pageInfo { hasNextPage }
    nodes { id isResolved isOutdated path line
      comments(last: 50) { nodes { id databaseId author { __typename login } authorAssociation body createdAt url } } }
  }
  comments(last: 100) { nodes { databaseId author { __typename login } authorAssociation body createdAt } }
}";

/// The query for `count` PRs: variables `$n0…`, fields aliased `pr0…`.
fn query_for(count: usize) -> String {
    let mut query = String::from("query ExecutorPrs($owner: String!, $name: String!");
    for i in 0..count {
        let _ = write!(query, ", $n{i}: Int!");
    }
    query.push_str(") {\n  repository(owner: $owner, name: $name) {\n");
    for i in 0..count {
        let _ = writeln!(
            query,
            "    pr{i}: pullRequest(number: $n{i}) {{ ...executorPr }}"
        );
    }
    query.push_str("  }\n}\n");
    query.push_str(PR_FRAGMENT);
    query
}

/// Looks at every PR of `numbers` (see the module notes), in order, one GraphQL request
/// per [`PRS_PER_QUERY`]. Answers go through the client's short-lived cache, so a repeat
/// within its TTL costs nothing.
pub async fn pull_requests(
    client: &GithubClient,
    numbers: &[u64],
) -> Vec<(u64, Result<PrSnapshot, GithubError>)> {
    let mut looked = Vec::with_capacity(numbers.len());
    for chunk in numbers.chunks(PRS_PER_QUERY) {
        match pull_request_chunk(client, chunk).await {
            Ok(answers) => looked.extend(answers),
            Err(error) => {
                let shared = Arc::new(error);
                looked.extend(
                    chunk
                        .iter()
                        .map(|n| (*n, Err(GithubError::Shared(Arc::clone(&shared))))),
                );
            }
        }
    }
    looked
}

async fn pull_request_chunk(
    client: &GithubClient,
    numbers: &[u64],
) -> Result<Vec<(u64, Result<PrSnapshot, GithubError>)>, GithubError> {
    #[derive(Deserialize)]
    struct Data {
        repository: Option<HashMap<String, Option<Box<RawValue>>>>,
    }
    let (owner, name) = client.repository();
    let mut variables = Map::new();
    variables.insert("owner".into(), json!(owner));
    variables.insert("name".into(), json!(name));
    for (i, number) in numbers.iter().enumerate() {
        variables.insert(format!("n{i}"), json!(number));
    }
    let (data, errors) = client
        .graphql_partial(
            &query_for(numbers.len()),
            Value::Object(variables),
            "pull requests",
        )
        .await?;

    // Each error to the PR whose alias its path names; any other fails the request.
    let mut by_alias: HashMap<String, Vec<GraphQlError>> = HashMap::new();
    for error in errors {
        let alias = match error.path.as_slice() {
            [repository, alias, ..] if repository == "repository" => {
                alias.as_str().map(str::to_owned)
            }
            _ => None,
        };
        match alias.filter(|a| is_alias(a, numbers.len())) {
            Some(alias) => by_alias.entry(alias).or_default().push(error),
            None => {
                return Err(GithubError::GraphQl {
                    errors: vec![error],
                })
            }
        }
    }
    let data: Data = serde_json::from_str(data.get()).map_err(|source| GithubError::Decode {
        what: "pull requests",
        source,
    })?;
    let mut nodes_by_alias = data.repository.unwrap_or_default();

    let mut looked = Vec::with_capacity(numbers.len());
    for (i, number) in numbers.iter().enumerate() {
        let alias = format!("pr{i}");
        let errors = by_alias.remove(&alias).unwrap_or_default();
        let node = nodes_by_alias.remove(&alias).flatten();
        looked.push((*number, snapshot_of(*number, node, errors)));
    }
    Ok(looked)
}

fn is_alias(alias: &str, count: usize) -> bool {
    alias
        .strip_prefix("pr")
        .and_then(|i| i.parse::<usize>().ok())
        .is_some_and(|i| i < count)
}

/// One alias's answer: the PR, or why not. Only `NOT_FOUND` on the PR itself says "gone".
fn snapshot_of(
    number: u64,
    node: Option<Box<RawValue>>,
    errors: Vec<GraphQlError>,
) -> Result<PrSnapshot, GithubError> {
    let (on_pr, deeper): (Vec<GraphQlError>, Vec<GraphQlError>) =
        errors.into_iter().partition(|e| e.path.len() == 2);
    if !deeper.is_empty() {
        // Part of the PR's answer failed: not a gone PR, and not a whole one either.
        return Err(GithubError::Shared(Arc::new(GithubError::GraphQl {
            errors: deeper,
        })));
    }
    let Some(node) = node.filter(|n| n.get().trim() != "null") else {
        return Err(match on_pr.is_empty() {
            true => GithubError::NotFound {
                path: format!("pull request {number} (GraphQL)"),
            },
            false => GithubError::GraphQl { errors: on_pr },
        });
    };
    if !on_pr.is_empty() {
        return Err(GithubError::Shared(Arc::new(GithubError::GraphQl {
            errors: on_pr,
        })));
    }
    let pr: GqlPullRequest =
        serde_json::from_str(node.get()).map_err(|source| GithubError::Decode {
            what: "a pull request",
            source,
        })?;
    Ok(pr.into_snapshot())
}

// ----- the GraphQL shapes -----

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GqlPullRequest {
    number: u64,
    /// `OPEN`, `CLOSED`, `MERGED`.
    state: String,
    is_draft: bool,
    /// `MERGEABLE`, `CONFLICTING`, `UNKNOWN`.
    mergeable: String,
    head_ref_oid: String,
    updated_at: DateTime<Utc>,
    #[serde(deserialize_with = "nodes")]
    labels: Vec<GqlLabel>,
    #[serde(deserialize_with = "nodes")]
    commits: Vec<GqlCommitNode>,
    review_threads: GqlConnection<ReviewThread>,
    #[serde(deserialize_with = "nodes")]
    comments: Vec<SnapshotComment>,
    #[serde(default)]
    author: Option<Author>,
    #[serde(default, deserialize_with = "nodes")]
    latest_opinionated_reviews: Vec<GqlReview>,
}

/// A reviewer's latest `APPROVED` or `CHANGES_REQUESTED` review.
#[derive(Deserialize)]
struct GqlReview {
    state: String,
    #[serde(default)]
    author: Option<Author>,
    #[serde(default)]
    commit: Option<GqlOid>,
}

#[derive(Deserialize)]
struct GqlOid {
    oid: String,
}

#[derive(Deserialize)]
struct GqlLabel {
    name: String,
}

#[derive(Deserialize)]
struct GqlCommitNode {
    commit: GqlCommit,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GqlCommit {
    oid: String,
    #[serde(default)]
    status_check_rollup: Option<GqlRollup>,
}

#[derive(Deserialize)]
struct GqlRollup {
    contexts: GqlConnection<GqlContext>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GqlConnection<T> {
    page_info: GqlPageInfo,
    nodes: Vec<T>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GqlPageInfo {
    has_next_page: bool,
}

/// A `StatusCheckRollupContext`: a `CheckRun` with its fields, or a legacy `StatusContext`
/// with none (none are asked for).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GqlContext {
    #[serde(rename = "__typename")]
    typename: String,
    #[serde(default)]
    database_id: Option<u64>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    conclusion: Option<String>,
    #[serde(default)]
    started_at: Option<DateTime<Utc>>,
    #[serde(default)]
    details_url: Option<String>,
    #[serde(default)]
    permalink: Option<String>,
    #[serde(default)]
    title: Option<String>,
}

impl GqlPullRequest {
    fn into_snapshot(self) -> PrSnapshot {
        let state = match self.state.as_str() {
            "MERGED" => SnapshotState::Merged,
            "CLOSED" => SnapshotState::Closed,
            _ => SnapshotState::Open,
        };
        let mergeable = match self.mergeable.as_str() {
            "MERGEABLE" => Some(true),
            "CONFLICTING" => Some(false),
            _ => None,
        };
        // `commits(last: 1)` is the head; its oid is the head's unless a push landed
        // between GitHub's two reads, when the checks belong to another commit.
        let commit = self
            .commits
            .into_iter()
            .next()
            .map(|n| n.commit)
            .filter(|c| c.oid == self.head_ref_oid);
        let (check_runs, checks_complete) = match commit.and_then(|c| c.status_check_rollup) {
            Some(rollup) => {
                let complete = !rollup.contexts.page_info.has_next_page;
                let runs = rollup
                    .contexts
                    .nodes
                    .into_iter()
                    .filter_map(|c| c.into_check_run(&self.head_ref_oid))
                    .collect();
                (runs, complete)
            }
            None => (Vec::new(), true),
        };
        PrSnapshot {
            number: self.number,
            state,
            draft: self.is_draft,
            mergeable,
            head_sha: self.head_ref_oid,
            updated_at: self.updated_at,
            labels: self.labels.into_iter().map(|l| l.name).collect(),
            check_runs,
            checks_complete,
            threads_complete: !self.review_threads.page_info.has_next_page,
            threads: self.review_threads.nodes,
            comments: self.comments,
            author: self.author.map(|a| a.login),
            verdicts: self
                .latest_opinionated_reviews
                .into_iter()
                .filter_map(|r| {
                    let approved = match r.state.as_str() {
                        "APPROVED" => true,
                        "CHANGES_REQUESTED" => false,
                        _ => return None,
                    };
                    Some(Verdict {
                        by: r.author?.login,
                        approved,
                        commit: r.commit.map(|c| c.oid),
                    })
                })
                .collect(),
        }
    }
}

impl GqlContext {
    /// The REST shape of a check run; `None` for a legacy status.
    fn into_check_run(self, head_sha: &str) -> Option<types::CheckRun> {
        if self.typename != "CheckRun" {
            return None;
        }
        // GraphQL's enums are REST's values in upper case.
        let lower = |v: Option<String>| v.map(|v| Value::String(v.to_ascii_lowercase()));
        let status = lower(self.status)
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or(types::CheckStatus::Other);
        let conclusion = lower(self.conclusion).and_then(|v| serde_json::from_value(v).ok());
        Some(types::CheckRun {
            id: self.database_id.unwrap_or_default(),
            name: self.name.unwrap_or_default(),
            head_sha: head_sha.to_owned(),
            status,
            conclusion,
            html_url: self.permalink,
            details_url: self.details_url,
            started_at: self.started_at,
            completed_at: None,
            output: CheckOutput {
                title: self.title,
                ..CheckOutput::default()
            },
            app: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(path: Value, kind: &str) -> GraphQlError {
        GraphQlError {
            kind: Some(kind.into()),
            message: "m".into(),
            path: path.as_array().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn the_query_aliases_each_pr_to_its_variable() {
        let query = query_for(2);
        assert!(query.starts_with(
            "query ExecutorPrs($owner: String!, $name: String!, $n0: Int!, $n1: Int!)"
        ));
        assert!(query.contains("pr0: pullRequest(number: $n0) { ...executorPr }"));
        assert!(query.contains("pr1: pullRequest(number: $n1) { ...executorPr }"));
        assert!(!query.contains("pr2:"));
        assert!(query.contains("fragment executorPr on PullRequest"));
    }

    #[test]
    fn only_not_found_on_the_pr_itself_says_it_is_gone() {
        let gone = snapshot_of(
            7,
            None,
            vec![error(json!(["repository", "pr0"]), "NOT_FOUND")],
        );
        assert!(gone.is_err_and(|e| e.is_not_found()));

        let null_without_error = snapshot_of(7, RawValue::from_string("null".into()).ok(), vec![]);
        assert!(null_without_error.is_err_and(|e| e.is_not_found()));

        let deeper = snapshot_of(
            7,
            None,
            vec![error(json!(["repository", "pr0", "commits"]), "NOT_FOUND")],
        );
        assert!(deeper.is_err_and(|e| !e.is_not_found()));
    }

    #[test]
    fn graphql_check_runs_read_as_the_rest_shape() {
        let context: GqlContext = serde_json::from_value(json!({
            "__typename": "CheckRun", "databaseId": 103651827391u64, "name": "ui-tests",
            "status": "COMPLETED", "conclusion": "STARTUP_FAILURE",
            "startedAt": "2026-03-16T10:40:12Z",
            "detailsUrl": "https://github.com/o/r/actions/runs/1/job/2",
            "permalink": "https://github.com/o/r/runs/2", "title": null
        }))
        .expect("a context");
        let run = context.into_check_run("abc").expect("a check run");
        assert_eq!(run.status, types::CheckStatus::Completed);
        assert_eq!(run.conclusion, Some(types::CheckConclusion::StartupFailure));
        assert_eq!(run.actions_job(), Some((1, 2)));
        assert_eq!(run.head_sha, "abc");

        let status: GqlContext =
            serde_json::from_value(json!({ "__typename": "StatusContext" })).expect("a status");
        assert!(status.into_check_run("abc").is_none());
    }

    #[test]
    fn an_unknown_alias_is_not_one_of_ours() {
        assert!(is_alias("pr0", 1));
        assert!(!is_alias("pr1", 1));
        assert!(!is_alias("pullRequest", 1));
    }
}

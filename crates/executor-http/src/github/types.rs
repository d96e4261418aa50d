//! The shapes executor sends to and reads from GitHub: only the fields it uses, so a field
//! GitHub adds or drops elsewhere does not break a run. Fields GitHub may send as `null`
//! (`mergeable` until it is computed, `conclusion` until a check completes, a deleted
//! author) are `Option`s; enums keep an `Other` arm for values GitHub adds later.
//!
//! Checked against `../shared/fixtures/http/github/` (GitHub's OpenAPI description and
//! captured payloads).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A user or an app's bot account.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct User {
    /// `mkowalski`; a GitHub App's bot in REST: `lumen-executor[bot]`.
    pub login: String,
    pub id: u64,
    /// `User`, `Bot` or `Organization`.
    #[serde(rename = "type", default)]
    pub kind: String,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Label {
    pub id: u64,
    pub name: String,
    #[serde(default)]
    pub color: String,
    #[serde(default)]
    pub description: Option<String>,
}

/// One side of a pull request (`head` or `base`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct PrBranch {
    /// The branch name.
    #[serde(rename = "ref")]
    pub branch: String,
    pub sha: String,
    #[serde(default)]
    pub label: String,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct PullRequest {
    pub id: u64,
    pub number: u64,
    #[serde(default)]
    pub node_id: String,
    pub html_url: String,
    /// `open` or `closed`.
    pub state: String,
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub draft: bool,
    /// Only in single-PR answers; lists leave it out.
    #[serde(default)]
    pub merged: bool,
    #[serde(default)]
    pub merged_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub closed_at: Option<DateTime<Utc>>,
    /// `None` while GitHub is still computing it, right after creation or a push.
    #[serde(default)]
    pub mergeable: Option<bool>,
    /// `clean`, `dirty`, `blocked`, `behind`, `unstable`, `has_hooks`, `draft`, `unknown`.
    #[serde(default)]
    pub mergeable_state: Option<String>,
    pub head: PrBranch,
    pub base: PrBranch,
    #[serde(default)]
    pub labels: Vec<Label>,
    pub user: User,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// `POST /repos/{o}/{r}/pulls`. Always a draft: executor marks a PR ready only through the
/// owner.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct NewPullRequest {
    pub title: String,
    /// The branch the run pushed.
    pub head: String,
    /// The branch to merge into.
    pub base: String,
    pub body: String,
}

/// An issue as `GET /repos/{o}/{r}/issues` lists it (GitHub's `issue` schema, the fields
/// executor reads). That list holds pull requests too, marked by a `pull_request` key;
/// [`super::GithubClient::list_issues`] leaves them out.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Issue {
    pub id: u64,
    #[serde(default)]
    pub node_id: String,
    pub number: u64,
    pub title: String,
    /// `None` for an issue opened without text.
    #[serde(default)]
    pub body: Option<String>,
    pub state: IssueState,
    /// `completed`, `not_planned`, `duplicate` (closed), `reopened` (open again), or `None`.
    #[serde(default)]
    pub state_reason: Option<String>,
    #[serde(default, deserialize_with = "nullable_vec")]
    pub labels: Vec<IssueLabel>,
    /// The first of `assignees`.
    #[serde(default)]
    pub assignee: Option<User>,
    #[serde(default, deserialize_with = "nullable_vec")]
    pub assignees: Vec<User>,
    /// Who opened it; `None` when GitHub sends `null`.
    #[serde(default)]
    pub user: Option<User>,
    pub html_url: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[serde(default)]
    pub closed_at: Option<DateTime<Utc>>,
    /// Present when the "issue" is a pull request.
    #[serde(default)]
    pub pull_request: Option<IssuePullRequest>,
}

impl Issue {
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
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum IssueState {
    Open,
    Closed,
    #[serde(other)]
    Other,
}

/// A label on an issue. GitHub's schema allows a label as an object or as its bare name;
/// both read into this (a bare name has no id, colour or description).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(from = "IssueLabelShape")]
pub struct IssueLabel {
    /// Empty when GitHub sent an object without a name.
    pub name: String,
    pub id: Option<u64>,
    pub color: Option<String>,
    pub description: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum IssueLabelShape {
    Name(String),
    Object {
        #[serde(default)]
        id: Option<u64>,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        color: Option<String>,
        #[serde(default)]
        description: Option<String>,
    },
}

impl From<IssueLabelShape> for IssueLabel {
    fn from(shape: IssueLabelShape) -> Self {
        match shape {
            IssueLabelShape::Name(name) => Self {
                name,
                id: None,
                color: None,
                description: None,
            },
            IssueLabelShape::Object {
                id,
                name,
                color,
                description,
            } => Self {
                name: name.unwrap_or_default(),
                id,
                color,
                description,
            },
        }
    }
}

/// The `pull_request` key of an issue that is a pull request.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct IssuePullRequest {
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub html_url: Option<String>,
    #[serde(default)]
    pub merged_at: Option<DateTime<Utc>>,
}

/// Which issues [`super::GithubClient::list_issues`] asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IssueQuery {
    pub state: IssueStateFilter,
    /// Issues carrying every one of these labels (GitHub's `labels=a,b` means all of them);
    /// empty asks for any. A name holding a comma cannot be asked for and is refused.
    pub labels: Vec<String>,
    /// Only issues updated at or after this time (GitHub's `since`, whole seconds: a
    /// fraction is dropped, which asks for a little more, never less).
    pub since: Option<DateTime<Utc>>,
}

/// GitHub's `state` filter of the issue list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IssueStateFilter {
    #[default]
    Open,
    Closed,
    All,
}

impl IssueStateFilter {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closed => "closed",
            Self::All => "all",
        }
    }
}

/// A list GitHub may send as `null`, read as empty.
fn nullable_vec<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

/// A check run's status; `conclusion` stays `None` until it is `Completed`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    Queued,
    InProgress,
    Completed,
    Waiting,
    Requested,
    Pending,
    #[serde(other)]
    Other,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CheckConclusion {
    Success,
    Failure,
    Neutral,
    Cancelled,
    Skipped,
    TimedOut,
    ActionRequired,
    Stale,
    StartupFailure,
    #[serde(other)]
    Other,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct CheckOutput {
    /// Only check runs created through the Checks API carry text; Actions jobs leave these
    /// `null`.
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub summary: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub annotations_count: u64,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct App {
    #[serde(default)]
    pub id: u64,
    #[serde(default)]
    pub slug: Option<String>,
    #[serde(default)]
    pub name: String,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct CheckRun {
    /// For an Actions job, the job id.
    pub id: u64,
    pub name: String,
    pub head_sha: String,
    pub status: CheckStatus,
    #[serde(default)]
    pub conclusion: Option<CheckConclusion>,
    /// For an Actions job: `…/actions/runs/{run}/job/{job}`.
    #[serde(default)]
    pub html_url: Option<String>,
    #[serde(default)]
    pub details_url: Option<String>,
    #[serde(default)]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub completed_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub output: CheckOutput,
    #[serde(default)]
    pub app: Option<App>,
}

impl CheckRun {
    /// The Actions run and job ids from `details_url` (`…/actions/runs/{run}/job/{job}`),
    /// for fetching the job's steps and log. `None` for checks from other CI.
    pub fn actions_job(&self) -> Option<(u64, u64)> {
        let url = self.details_url.as_deref().or(self.html_url.as_deref())?;
        let (_, rest) = url.split_once("/actions/runs/")?;
        let (run, rest) = rest.split_once("/job/")?;
        let job = rest.split(['/', '?', '#']).next()?;
        Some((run.parse().ok()?, job.parse().ok()?))
    }
}

/// All check runs for a ref, every page gathered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckRuns {
    /// GitHub's count over all pages.
    pub total_count: u64,
    pub runs: Vec<CheckRun>,
}

#[derive(Debug, Deserialize)]
pub struct CheckRunsPage {
    pub total_count: u64,
    pub check_runs: Vec<CheckRun>,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct CommitStatus {
    pub id: u64,
    /// `error`, `failure`, `pending`, `success`.
    pub state: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub target_url: Option<String>,
    pub context: String,
    pub updated_at: DateTime<Utc>,
}

/// The legacy combined status. `pending` with `total_count: 0` means "no statuses at all",
/// the normal case for Actions-only repos: judge CI by check runs.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct CombinedStatus {
    pub state: String,
    pub sha: String,
    pub total_count: u64,
    #[serde(default)]
    pub statuses: Vec<CommitStatus>,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct IssueComment {
    pub id: u64,
    #[serde(default)]
    pub node_id: String,
    pub html_url: String,
    #[serde(default)]
    pub body: String,
    /// `None` for a deleted account.
    #[serde(default)]
    pub user: Option<User>,
    /// `OWNER`, `MEMBER`, `COLLABORATOR`, `CONTRIBUTOR`, `NONE`, …
    #[serde(default)]
    pub author_association: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Set when an app (such as executor's own) posted it.
    #[serde(default)]
    pub performed_via_github_app: Option<App>,
}

/// A REST review comment; a reply has `in_reply_to_id` = the thread's first comment.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct ReviewComment {
    pub id: u64,
    #[serde(default)]
    pub node_id: String,
    #[serde(default)]
    pub pull_request_review_id: Option<u64>,
    #[serde(default)]
    pub in_reply_to_id: Option<u64>,
    pub path: String,
    #[serde(default)]
    pub line: Option<u64>,
    #[serde(default)]
    pub commit_id: String,
    #[serde(default)]
    pub diff_hunk: String,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub user: Option<User>,
    #[serde(default)]
    pub author_association: String,
    pub html_url: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A review thread (GraphQL `PullRequestReviewThread`), with its comments oldest first.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReviewThread {
    /// `PRRT_…`: what [`super::GithubClient::resolve_review_thread`] takes.
    pub id: String,
    pub is_resolved: bool,
    pub is_outdated: bool,
    pub path: String,
    /// `None` when the thread is outdated.
    #[serde(default)]
    pub line: Option<u64>,
    #[serde(deserialize_with = "nodes")]
    pub comments: Vec<ThreadComment>,
}

impl ReviewThread {
    pub fn last_comment(&self) -> Option<&ThreadComment> {
        self.comments.last()
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ThreadComment {
    /// `PRRC_…`.
    pub id: String,
    /// The REST comment id (deprecated in favour of `fullDatabaseId`, still served).
    #[serde(default)]
    pub database_id: Option<u64>,
    /// `None` for a deleted account. An app's bot shows without `[bot]` here.
    #[serde(default)]
    pub author: Option<Author>,
    /// `OWNER`, `MEMBER`, …, when the query asks for it.
    #[serde(default)]
    pub author_association: Option<String>,
    pub body: String,
    pub created_at: DateTime<Utc>,
    pub url: String,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Author {
    pub login: String,
    /// `User` or `Bot` (a GitHub App), when the query asks for `__typename`.
    #[serde(rename = "__typename", default)]
    pub kind: Option<String>,
}

pub fn nodes<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    #[derive(Deserialize)]
    struct Nodes<T> {
        nodes: Vec<T>,
    }
    Ok(Nodes::deserialize(deserializer)?.nodes)
}

/// The thread after `resolveReviewThread`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedThread {
    pub id: String,
    pub is_resolved: bool,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct JobStep {
    pub name: String,
    pub status: CheckStatus,
    #[serde(default)]
    pub conclusion: Option<CheckConclusion>,
    pub number: u64,
}

/// An Actions job: the failing step is what a `fix_ci` prompt names.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Job {
    pub id: u64,
    pub run_id: u64,
    pub name: String,
    #[serde(default)]
    pub workflow_name: Option<String>,
    pub head_sha: String,
    pub html_url: String,
    pub status: CheckStatus,
    #[serde(default)]
    pub conclusion: Option<CheckConclusion>,
    #[serde(default)]
    pub run_attempt: Option<u64>,
    #[serde(default)]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub completed_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub steps: Vec<JobStep>,
}

impl Job {
    /// The first step that failed.
    pub fn failed_step(&self) -> Option<&JobStep> {
        self.steps
            .iter()
            .find(|s| s.conclusion == Some(CheckConclusion::Failure))
    }
}

#[derive(Debug, Deserialize)]
pub struct JobsPage {
    pub jobs: Vec<Job>,
}

/// What a review does. A GitHub App cannot approve or request changes on a pull request it
/// opened itself; GitHub answers 422.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReviewEvent {
    Comment,
    Approve,
    RequestChanges,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Review {
    pub id: u64,
    /// `COMMENTED`, `APPROVED`, `CHANGES_REQUESTED`, …
    pub state: String,
    #[serde(default)]
    pub body: String,
    pub html_url: String,
    #[serde(default)]
    pub user: Option<User>,
    #[serde(default)]
    pub submitted_at: Option<DateTime<Utc>>,
    /// The head the review was given on.
    #[serde(default)]
    pub commit_id: Option<String>,
    /// The reviewer's standing in the repository (`OWNER`, `MEMBER`, `COLLABORATOR`, …).
    #[serde(default)]
    pub author_association: String,
}

/// GitHub's answer to a merge.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct MergeAnswer {
    #[serde(default)]
    pub merged: bool,
    #[serde(default)]
    pub sha: Option<String>,
    #[serde(default)]
    pub message: String,
}

/// The part of a job log a `fix_ci` prompt carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogExcerpt {
    /// The lines, timestamps stripped, oldest first.
    pub lines: Vec<String>,
    /// Whether lines were left out.
    pub truncated: bool,
    /// Whether the excerpt is centred on a `##[error]` line (else it is the log's tail).
    pub around_error: bool,
}

impl LogExcerpt {
    /// Cuts `log` down to `before` lines before the first error line ([`is_error_line`]) and `after` lines
    /// after it, or to its last `tail` lines when no step reported an error. Actions prints
    /// the cause (the failing test, the compiler error) above the `##[error]` line, which
    /// itself only says "Process completed with exit code …".
    pub fn from_log(log: &str, before: usize, after: usize, tail: usize) -> Self {
        let lines: Vec<&str> = log.lines().map(strip_timestamp).collect();
        let (start, end, around_error) = match lines.iter().position(|l| is_error_line(l)) {
            Some(at) => (
                at.saturating_sub(before),
                (at + 1 + after).min(lines.len()),
                true,
            ),
            None => (lines.len().saturating_sub(tail), lines.len(), false),
        };
        Self {
            lines: lines[start..end].iter().map(|l| (*l).to_owned()).collect(),
            truncated: start > 0 || end < lines.len(),
            around_error,
        }
    }

    pub fn text(&self) -> String {
        self.lines.join("\n")
    }
}

/// A line where a step's failure is reported: GitHub Actions' `##[error]`, or act_runner's
/// `❌  Failure - <step>` (Gitea Actions), both printed below the cause.
fn is_error_line(line: &str) -> bool {
    line.starts_with("##[error]") || line.starts_with("❌  Failure - ")
}

/// Drops the `2026-03-16T09:31:05.0472118Z ` prefix Actions puts on every line.
fn strip_timestamp(line: &str) -> &str {
    match line.split_once(' ') {
        Some((stamp, rest))
            if stamp.len() >= 20
                && stamp.ends_with('Z')
                && stamp.as_bytes().get(4) == Some(&b'-')
                && stamp.as_bytes().get(10) == Some(&b'T') =>
        {
            rest
        }
        _ if line.len() >= 20 && line.ends_with('Z') && line.as_bytes().get(10) == Some(&b'T') => {
            ""
        }
        _ => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_centres_on_the_first_error_and_strips_timestamps() {
        let log = "2026-03-16T09:31:04.9151162Z Failing tests:\n\
                   2026-03-16T09:31:05.0218467Z ** TEST FAILED **\n\
                   2026-03-16T09:31:05.0219022Z \n\
                   2026-03-16T09:31:05.0472118Z ##[error]Process completed with exit code 65.\n\
                   2026-03-16T09:31:05.0581263Z ##[group]Run actions/upload-artifact@v4\n\
                   2026-03-16T09:31:15.9183309Z Post job cleanup.";
        let excerpt = LogExcerpt::from_log(log, 2, 1, 10);
        assert!(excerpt.around_error);
        assert!(excerpt.truncated);
        assert_eq!(
            excerpt.lines,
            vec![
                "** TEST FAILED **",
                "",
                "##[error]Process completed with exit code 65.",
                "##[group]Run actions/upload-artifact@v4",
            ]
        );
        let tail = LogExcerpt::from_log("a\nb\nc", 5, 5, 2);
        assert_eq!(tail.lines, vec!["b", "c"]);
        assert!(!tail.around_error);
    }

    #[test]
    fn an_actions_job_is_found_from_its_check_run_url() {
        let run: CheckRun = serde_json::from_value(serde_json::json!({
            "id": 1, "name": "ui-tests", "head_sha": "abc", "status": "completed",
            "conclusion": "failure",
            "details_url": "https://github.com/o/r/actions/runs/34712098321/job/103651827391"
        }))
        .expect("check run");
        assert_eq!(run.actions_job(), Some((34712098321, 103651827391)));
    }

    #[test]
    fn an_issue_reads_with_labels_as_objects_or_names_and_nulls_where_github_allows() {
        let issue: Issue = serde_json::from_value(serde_json::json!({
            "id": 2901234567u64, "node_id": "I_kwDOMGtpR86s8x1H", "number": 812,
            "title": "Reader mode drops srcset-only images", "body": null,
            "state": "closed", "state_reason": "not_planned",
            "labels": [
                { "id": 7001, "node_id": "LA_1", "name": "executor", "color": "5319e7",
                  "default": false, "description": null },
                "macOS",
                { "id": 7002 }
            ],
            "assignee": null, "assignees": null, "user": null,
            "html_url": "https://github.com/mkowalski/lumen-browser/issues/812",
            "created_at": "2026-03-16T08:00:00Z", "updated_at": "2026-03-16T09:00:00Z",
            "closed_at": "2026-03-16T09:00:00Z", "locked": false, "comments": 0,
            "author_association": "OWNER"
        }))
        .expect("issue");
        assert_eq!(issue.state, IssueState::Closed);
        assert_eq!(issue.state_reason.as_deref(), Some("not_planned"));
        assert_eq!(issue.body, None);
        assert!(issue.assignees.is_empty());
        assert_eq!(issue.labels[0].id, Some(7001));
        assert_eq!(issue.labels[1].name, "macOS");
        assert_eq!(issue.labels[1].id, None);
        assert_eq!(
            issue.label_names().collect::<Vec<_>>(),
            ["executor", "macOS"]
        );
        assert!(!issue.is_pull_request());

        let pr: Issue = serde_json::from_value(serde_json::json!({
            "id": 1, "number": 1234, "title": "t", "state": "open", "locked": false,
            "html_url": "https://github.com/mkowalski/lumen-browser/pull/1234",
            "created_at": "2026-03-16T09:14:27Z", "updated_at": "2026-03-16T09:14:31Z",
            "pull_request": {
                "url": "https://api.github.com/repos/mkowalski/lumen-browser/pulls/1234",
                "html_url": "https://github.com/mkowalski/lumen-browser/pull/1234",
                "diff_url": "https://github.com/mkowalski/lumen-browser/pull/1234.diff",
                "patch_url": "https://github.com/mkowalski/lumen-browser/pull/1234.patch",
                "merged_at": null
            }
        }))
        .expect("pull request as an issue");
        assert!(pr.is_pull_request());
        assert!(pr.labels.is_empty());
        assert_eq!(pr.state, IssueState::Open);
    }
}

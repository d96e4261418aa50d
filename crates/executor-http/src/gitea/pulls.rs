//! Gitea's pull requests, as a forge needs them: open a draft PR, find the open PR of a
//! head, read one PR, its commit statuses (Gitea's CI), its reviews and their comments,
//! post a review, and put labels on it.
//!
//! What Gitea does (go-gitea/gitea: `modules/structs/pull.go`, `status.go`,
//! `pull_review.go`, `issue_label.go`, and the `[repository.pull-request]` settings):
//!
//! - `POST /repos/{o}/{r}/pulls` takes `{head, base, title, body}` (`labels` there are ids).
//!   There is no `draft` flag: a PR is a draft (Gitea's "work in progress") when its title
//!   starts with one of `WORK_IN_PROGRESS_PREFIXES`, `WIP:` and `[WIP]` by default; newer
//!   servers also answer `draft: true`. So a draft is opened with the title `WIP: …`.
//! - `GET /repos/{o}/{r}/pulls?state=open` lists PRs (`page`, `limit`); each has
//!   `head {ref, sha, label}` and `base {ref}`, `state`, `merged`, `mergeable`, `html_url`.
//! - `GET /repos/{o}/{r}/commits/{ref}/status`: the combined status, `{state, sha,
//!   total_count, statuses: [{id, status, context, description, target_url, …}]}`; each
//!   status's state is under `status` (not `state`): `pending`, `success`, `error`,
//!   `failure`, `warning`. CI on Gitea (Actions, Woodpecker, Drone) reports this way.
//! - `GET …/pulls/{n}/reviews` → `[{id, user, body, state, commit_id, stale, official,
//!   dismissed, comments_count, submitted_at, html_url}]`, `state` one of `APPROVED`,
//!   `PENDING`, `COMMENT`, `REQUEST_CHANGES`, `REQUEST_REVIEW`; `GET …/reviews/{id}/comments`
//!   → `[{id, body, user, path, position, original_position, commit_id, resolver, …}]`
//!   (`resolver` set once a reviewer marked the conversation resolved).
//! - `POST …/pulls/{n}/reviews` with `{body, event: "COMMENT"}` posts a review; with
//!   `comments: [{path, body, new_position}]` it also comments on a line of the diff.
//! - `GET /repos/{o}/{r}/issues/{n}/comments` → `[{id, body, user, created_at, …}]`: the
//!   PR's conversation (`page`, `limit`).
//! - Labels: `POST /repos/{o}/{r}/issues/{n}/labels` takes `{labels: [ids]}` (newer servers
//!   take names too), so names are turned into ids from `GET /repos/{o}/{r}/labels`, and a
//!   missing label is made first (`POST /repos/{o}/{r}/labels`, `{name, color}`).
//!
//! No Gitea API resolves a review conversation, and none replies in one: the forge answers
//! a conversation with a review comment on its line, which Gitea shows in that
//! conversation.

use chrono::{DateTime, Utc};
use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::{decode, null_as_default, GiteaClient, GiteaError, GiteaLabel, GiteaUser};

/// The title prefix that makes a Gitea PR a draft (the first of Gitea's defaults).
pub const WIP_PREFIX: &str = "WIP: ";

/// A PR as Gitea's `PullRequest` schema has it, the fields executor reads.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GiteaPull {
    pub number: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub title: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub html_url: String,
    /// `open` or `closed`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub state: String,
    #[serde(default)]
    pub merged: bool,
    #[serde(default)]
    pub mergeable: Option<bool>,
    /// Newer servers say so; older ones only by the title's prefix ([`GiteaPull::is_draft`]).
    #[serde(default)]
    pub draft: Option<bool>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub labels: Vec<GiteaLabel>,
    pub head: GiteaBranch,
    pub base: GiteaBranch,
    #[serde(default)]
    pub updated_at: Option<DateTime<Utc>>,
    /// The PR's author.
    #[serde(default)]
    pub user: Option<GiteaUser>,
}

impl GiteaPull {
    /// A work-in-progress PR: Gitea's `draft`, else the title's `WIP:` or `[WIP]` prefix.
    pub fn is_draft(&self) -> bool {
        self.draft
            .unwrap_or_else(|| Self::title_is_wip(&self.title))
    }
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct GiteaBranch {
    #[serde(rename = "ref", default, deserialize_with = "null_as_default")]
    pub branch: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub sha: String,
}

/// `GET …/commits/{ref}/status`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GiteaCombinedStatus {
    #[serde(default, deserialize_with = "null_as_default")]
    pub state: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub sha: String,
    #[serde(default)]
    pub total_count: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub statuses: Vec<GiteaStatus>,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GiteaStatus {
    #[serde(default)]
    pub id: u64,
    /// `pending`, `success`, `error`, `failure` or `warning`.
    #[serde(rename = "status", default, deserialize_with = "null_as_default")]
    pub state: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub context: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub description: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub target_url: String,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GiteaReview {
    pub id: u64,
    #[serde(default)]
    pub user: Option<GiteaUser>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub body: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub state: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub commit_id: String,
    #[serde(default)]
    pub stale: bool,
    #[serde(default)]
    pub dismissed: bool,
    #[serde(default)]
    pub comments_count: u64,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GiteaReviewComment {
    pub id: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub body: String,
    #[serde(default)]
    pub user: Option<GiteaUser>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub path: String,
    /// The line of the new file the comment is on (Gitea's `LineNum`); `0` for a comment
    /// on the old side of the diff.
    #[serde(default)]
    pub position: u64,
    /// The line of the old file, for a comment on the old side (Gitea's `OldLineNum`);
    /// `0` otherwise.
    #[serde(default)]
    pub original_position: u64,
    /// Who marked the conversation resolved; `None` while it is open.
    #[serde(default)]
    pub resolver: Option<GiteaUser>,
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
}

/// A line of a PR's diff: of the new file, or of the old one (a removed line).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DiffLine {
    New(u64),
    Old(u64),
}

impl GiteaReviewComment {
    /// The line the comment is on; `None` when Gitea gives neither.
    pub fn line(&self) -> Option<DiffLine> {
        match (self.position, self.original_position) {
            (0, 0) => None,
            (0, old) => Some(DiffLine::Old(old)),
            (new, _) => Some(DiffLine::New(new)),
        }
    }
}

/// A comment of an issue's or a PR's conversation (Gitea's `Comment`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GiteaComment {
    pub id: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub body: String,
    #[serde(default)]
    pub user: Option<GiteaUser>,
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
}

/// What [`GiteaClient::create_draft_pr`] opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewGiteaPull {
    pub title: String,
    pub head: String,
    pub base: String,
    pub body: String,
}

/// The colour a label executor makes is given (Gitea requires one).
const LABEL_COLOR: &str = "#5319e7";

impl GiteaClient {
    /// `POST /repos/{o}/{r}/pulls`, its title prefixed `WIP: ` (Gitea's draft).
    pub async fn create_draft_pr(
        &self,
        owner: &str,
        repo: &str,
        pr: &NewGiteaPull,
    ) -> Result<GiteaPull, GiteaError> {
        let url = self.repo_url(owner, repo, &["pulls"])?;
        let title = if GiteaPull::title_is_wip(&pr.title) {
            pr.title.clone()
        } else {
            format!("{WIP_PREFIX}{}", pr.title)
        };
        let body = json!({ "title": title, "head": pr.head, "base": pr.base, "body": pr.body });
        let (_, answer) = self.send(Method::POST, url, Some(&body)).await?;
        decode(&answer, "the new pull request")
    }

    /// `GET /repos/{o}/{r}/pulls/{n}`.
    pub async fn get_pr(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
    ) -> Result<GiteaPull, GiteaError> {
        let url = self.repo_url(owner, repo, &["pulls", &number.to_string()])?;
        let (_, answer) = self.send(Method::GET, url, None).await?;
        decode(&answer, "a pull request")
    }

    /// The open PR whose head is `branch`, if there is one (every page of
    /// `GET /repos/{o}/{r}/pulls?state=open`).
    pub async fn open_pr_for_head(
        &self,
        owner: &str,
        repo: &str,
        branch: &str,
    ) -> Result<Option<GiteaPull>, GiteaError> {
        let base = self.repo_url(owner, repo, &["pulls"])?;
        let limit = self.inner.options.page_size.max(1);
        for page in 1..=self.inner.options.max_pages.max(1) {
            let mut url = base.clone();
            url.query_pairs_mut()
                .append_pair("state", "open")
                .append_pair("page", &page.to_string())
                .append_pair("limit", &limit.to_string());
            let (_, answer) = self.send(Method::GET, url, None).await?;
            let pulls: Vec<GiteaPull> = decode(&answer, "pull requests")?;
            if let Some(found) = pulls.iter().find(|p| p.head.branch == branch) {
                return Ok(Some(found.clone()));
            }
            if (pulls.len() as u64) < u64::from(limit) {
                return Ok(None);
            }
        }
        Err(GiteaError::TooManyPages {
            what: "pull requests",
            pages: self.inner.options.max_pages.max(1),
        })
    }

    /// `GET /repos/{o}/{r}/commits/{ref}/status`: the CI of a commit.
    pub async fn combined_status(
        &self,
        owner: &str,
        repo: &str,
        git_ref: &str,
    ) -> Result<GiteaCombinedStatus, GiteaError> {
        let url = self.repo_url(owner, repo, &["commits", git_ref, "status"])?;
        let (_, answer) = self.send(Method::GET, url, None).await?;
        decode(&answer, "the combined status")
    }

    /// `GET …/pulls/{n}/reviews`.
    pub async fn reviews(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
    ) -> Result<Vec<GiteaReview>, GiteaError> {
        let url = self.repo_url(owner, repo, &["pulls", &number.to_string(), "reviews"])?;
        let (_, answer) = self.send(Method::GET, url, None).await?;
        decode(&answer, "the reviews")
    }

    /// `POST …/pulls/{n}/merge` with `Do` (`merge`, `squash` or `rebase`), the head it may
    /// merge (`head_commit_id`: Gitea refuses when the head moved) and whether to delete
    /// the branch after. Gitea answers 200 with no body; 405 when the PR cannot be merged
    /// (not mergeable, checks or approvals its rules require), 409 on a conflict or a head
    /// that moved.
    pub async fn merge_pr(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
        how: &str,
        head_sha: &str,
        delete_branch: bool,
    ) -> Result<(), GiteaError> {
        let url = self.repo_url(owner, repo, &["pulls", &number.to_string(), "merge"])?;
        let request = json!({
            "Do": how,
            "head_commit_id": head_sha,
            "delete_branch_after_merge": delete_branch,
        });
        self.send(Method::POST, url, Some(&request))
            .await
            .map(|_| ())
    }

    /// `GET …/pulls/{n}/reviews/{id}/comments`.
    pub async fn review_comments(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
        review_id: u64,
    ) -> Result<Vec<GiteaReviewComment>, GiteaError> {
        let (n, id) = (number.to_string(), review_id.to_string());
        let url = self.repo_url(owner, repo, &["pulls", &n, "reviews", &id, "comments"])?;
        let (_, answer) = self.send(Method::GET, url, None).await?;
        decode(&answer, "the review comments")
    }

    /// `POST …/pulls/{n}/reviews` with `event: COMMENT`: the orchestrator's review is a
    /// comment, never an approval of its own PR.
    pub async fn post_review(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
        body: &str,
    ) -> Result<GiteaReview, GiteaError> {
        let url = self.repo_url(owner, repo, &["pulls", &number.to_string(), "reviews"])?;
        let request = json!({ "body": body, "event": "COMMENT" });
        let (_, answer) = self.send(Method::POST, url, Some(&request)).await?;
        decode(&answer, "the review")
    }

    /// `POST …/pulls/{n}/reviews` with `event: COMMENT` and one comment on `line` of
    /// `path` (`new_position`, or `old_position` for a line of the old side). Gitea's API
    /// has no reply in a conversation; a comment on the same line joins that conversation
    /// in Gitea's view (which groups code comments by file and line).
    pub async fn post_line_comment(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
        (path, line): (&str, DiffLine),
        body: &str,
    ) -> Result<GiteaReview, GiteaError> {
        let url = self.repo_url(owner, repo, &["pulls", &number.to_string(), "reviews"])?;
        let (new, old) = match line {
            DiffLine::New(n) => (n, 0),
            DiffLine::Old(n) => (0, n),
        };
        let request = json!({
            "body": "", "event": "COMMENT",
            "comments": [{ "path": path, "new_position": new, "old_position": old, "body": body }],
        });
        let (_, answer) = self.send(Method::POST, url, Some(&request)).await?;
        decode(&answer, "the review")
    }

    /// `GET /repos/{o}/{r}/issues/{n}/comments`, every page: the conversation of an issue
    /// or a PR, oldest first.
    pub async fn issue_comments(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
    ) -> Result<Vec<GiteaComment>, GiteaError> {
        let base = self.repo_url(owner, repo, &["issues", &number.to_string(), "comments"])?;
        let limit = self.inner.options.page_size.max(1);
        let mut comments = Vec::new();
        for page in 1..=self.inner.options.max_pages.max(1) {
            let mut url = base.clone();
            url.query_pairs_mut()
                .append_pair("page", &page.to_string())
                .append_pair("limit", &limit.to_string());
            let (_, answer) = self.send(Method::GET, url, None).await?;
            let got: Vec<GiteaComment> = decode(&answer, "the comments")?;
            let last = (got.len() as u64) < u64::from(limit);
            comments.extend(got);
            if last {
                return Ok(comments);
            }
        }
        Err(GiteaError::TooManyPages {
            what: "comments",
            pages: self.inner.options.max_pages.max(1),
        })
    }

    /// Puts the labels named `names` on issue or PR `number`, making a label the
    /// repository lacks; answers with every label now on it.
    pub async fn add_labels(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
        names: &[&str],
    ) -> Result<Vec<GiteaLabel>, GiteaError> {
        let url = self.repo_url(owner, repo, &["labels"])?;
        let (_, answer) = self.send(Method::GET, url.clone(), None).await?;
        let mut known: Vec<GiteaLabel> = decode(&answer, "the labels")?;
        let mut ids = Vec::with_capacity(names.len());
        for name in names {
            let found = known
                .iter()
                .find(|l| l.name.eq_ignore_ascii_case(name.trim()));
            let id = match found {
                Some(label) => label.id,
                None => {
                    let made = json!({ "name": name.trim(), "color": LABEL_COLOR });
                    let (_, answer) = self.send(Method::POST, url.clone(), Some(&made)).await?;
                    let label: GiteaLabel = decode(&answer, "the new label")?;
                    known.push(label.clone());
                    label.id
                }
            };
            ids.push(id);
        }
        let url = self.repo_url(owner, repo, &["issues", &number.to_string(), "labels"])?;
        let (_, answer) = self
            .send(Method::POST, url, Some(&json!({ "labels": ids })))
            .await?;
        decode(&answer, "the labels of the pull request")
    }
}

impl GiteaPull {
    fn title_is_wip(title: &str) -> bool {
        let title = title.trim_start().to_ascii_uppercase();
        title.starts_with("WIP:") || title.starts_with("[WIP]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pull_reads_from_giteas_shape_and_wip_is_a_draft() {
        let pull: GiteaPull = serde_json::from_value(json!({
            "id": 12, "url": "", "number": 3, "user": { "id": 1, "login": "lumen-executor" },
            "title": "WIP: Fix tab preview", "body": "", "labels": null, "milestone": null,
            "assignee": null, "assignees": null, "state": "open", "is_locked": false,
            "comments": 0, "html_url": "https://gitea.example.com/o/r/pulls/3",
            "mergeable": true, "merged": false, "merged_at": null, "merge_commit_sha": null,
            "base": { "label": "main", "ref": "main", "sha": "aaa", "repo_id": 1 },
            "head": { "label": "executor/g-1", "ref": "executor/g-1", "sha": "bbb", "repo_id": 1 },
            "merge_base": "aaa", "created_at": "2026-03-16T09:00:00+01:00",
            "updated_at": "2026-03-16T09:00:00+01:00", "closed_at": null,
        }))
        .expect("pull");
        assert!(pull.is_draft());
        assert_eq!(pull.head.branch, "executor/g-1");
        assert_eq!(pull.head.sha, "bbb");
        let mut ready = pull.clone();
        ready.title = "Fix tab preview".into();
        assert!(!ready.is_draft());
        ready.draft = Some(true);
        assert!(ready.is_draft());
        let status: GiteaCombinedStatus = serde_json::from_value(json!({
            "state": "failure", "sha": "bbb", "total_count": 1, "commit_url": "", "url": "",
            "repository": null,
            "statuses": [{ "id": 1, "status": "failure", "target_url": "https://ci/1",
                           "description": "1 failed", "url": "", "context": "ui-tests",
                           "creator": null, "created_at": "2026-03-16T09:00:00Z",
                           "updated_at": "2026-03-16T09:00:00Z" }],
        }))
        .expect("status");
        assert_eq!(status.statuses[0].state, "failure");
        assert_eq!(status.statuses[0].context, "ui-tests");
    }
}

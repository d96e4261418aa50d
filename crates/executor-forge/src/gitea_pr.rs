//! Gitea as a forge for the `pr` machine: one repository's draft PRs opened, looked at and
//! written to through the Gitea client ([`executor_http::gitea`]), turned into the same
//! [`PrObservation`] GitHub's look gives.
//!
//! How Gitea's shapes map onto the machine's view, and why:
//!
//! - **Draft**: Gitea's `draft`, else a title starting `WIP:` or `[WIP]`; PRs are opened
//!   with the title `WIP: …`. Executor never removes the prefix: on GitHub too the owner
//!   marks the PR ready, and a PR no longer a draft is the owner's.
//! - **CI** is the head's combined commit status (`GET …/commits/{sha}/status`), one check
//!   per status `context` (Gitea lists the latest status of each): `pending` is a check
//!   still running; `success` green; `failure` and `error` failed; `warning` completed as
//!   neutral (not green for a required check). A status's `description` is the check's
//!   summary, its `target_url` where a human reads it. A `fix_ci` worker gets the failed
//!   contexts, their descriptions and links, and for a failed Gitea Actions job its
//!   failing step and log excerpt where the server serves them ([`crate::gitea_ci_logs`]).
//!   No status at all is "no CI for the head", and nothing can start it (Gitea has no
//!   re-run or dispatch API for statuses): after `ci_start_grace` the owner is asked.
//! - **Review threads**: Gitea's API lists review comments per review, with no thread
//!   object; Gitea itself groups code comments by file and line. So a conversation is the
//!   comments on one line of one file (`path`, and `position`, the new file's line, or
//!   `original_position`, the old file's, for a removed line), oldest first; its id is
//!   `gitea-<first comment id>`; it is resolved when a comment of it has a `resolver`.
//!   Gitea's API does not say whether a comment is outdated, so none is.
//! - **The owner** is the login of the repository's owner (`owner/name`), as executor
//!   @mentions it; a comment carrying executor's marker is never the owner's.
//! - `head_pushed_at` is the PR's `updated_at`, as on GitHub.
//!
//! What it must never do: send the token anywhere (the client alone holds it), or read a
//! comment of executor's own (by its marker) as the owner's or a reviewer's.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use executor_core::merge::{latest_verdicts, MergeMethod, Verdict};
use executor_core::pr::{
    answer_marker, last_ask, CheckConclusion, CheckRun, CheckRunStatus, ObservedComment,
    ObservedThread, Opening, OwnerComment, PrConfig, PrObservation, PrState, EXECUTOR_MARK,
};
use executor_http::gitea::{
    DiffLine, GiteaClient, GiteaComment, GiteaError, GiteaPull, GiteaReview, GiteaReviewComment,
    GiteaStatus, NewGiteaPull,
};

/// The prefix of a review conversation's id.
const THREAD_PREFIX: &str = "gitea-";

/// The Gitea repository runs open their PRs on, and its client.
#[derive(Debug, Clone)]
pub struct GiteaRepo {
    pub client: GiteaClient,
    pub owner: String,
    pub repo: String,
}

impl GiteaRepo {
    pub async fn open_pr_for_head(&self, branch: &str) -> Result<Option<GiteaPull>, GiteaError> {
        self.client
            .open_pr_for_head(&self.owner, &self.repo, branch)
            .await
    }

    /// Opens `opening` with the title `WIP: …` (Gitea's draft).
    pub async fn create_draft_pr(&self, opening: &Opening) -> Result<GiteaPull, GiteaError> {
        let pr = NewGiteaPull {
            title: opening.title.clone(),
            head: opening.head.clone(),
            base: opening.base.clone(),
            body: opening.body.clone(),
        };
        self.client
            .create_draft_pr(&self.owner, &self.repo, &pr)
            .await
    }

    pub async fn add_labels(&self, number: u64, names: &[&str]) -> Result<(), GiteaError> {
        self.client
            .add_labels(&self.owner, &self.repo, number, names)
            .await
            .map(|_| ())
    }

    /// Posts executor's review (`body`, which carries `marker`) unless one with `marker`
    /// is on the PR already: a retry after a lost answer posts nothing.
    pub async fn post_review(
        &self,
        number: u64,
        body: &str,
        marker: &str,
    ) -> Result<(), GiteaError> {
        let posted = self
            .client
            .reviews(&self.owner, &self.repo, number)
            .await?
            .iter()
            .any(|r| r.body.contains(marker));
        if posted {
            return Ok(());
        }
        self.client
            .post_review(&self.owner, &self.repo, number, body)
            .await
            .map(|_| ())
    }

    /// The conversation comments of PR `number`, oldest first.
    pub async fn conversation(&self, number: u64) -> Result<Vec<GiteaComment>, GiteaError> {
        self.client
            .issue_comments(&self.owner, &self.repo, number)
            .await
    }

    pub async fn post_comment(&self, number: u64, body: &str) -> Result<(), GiteaError> {
        self.client
            .comment_issue(&self.owner, &self.repo, number, body)
            .await
            .map(|_| ())
    }

    /// Looks at PR `number` at `now` (see the module notes): the PR, then, while it is
    /// open, the head's statuses, the conversation and the reviews with their comments.
    pub async fn observe(
        &self,
        number: u64,
        config: &PrConfig,
        now: DateTime<Utc>,
        worker_running: bool,
    ) -> Result<PrObservation, GiteaError> {
        let (owner, repo) = (self.owner.as_str(), self.repo.as_str());
        let pr = self.client.get_pr(owner, repo, number).await?;
        let mut obs = PrObservation {
            observed_at: now,
            state: if pr.merged {
                PrState::Merged
            } else if pr.state == "closed" {
                PrState::Closed
            } else {
                PrState::Open
            },
            draft: pr.is_draft(),
            mergeable: pr.mergeable,
            head_sha: pr.head.sha.clone(),
            head_pushed_at: pr.updated_at,
            ci_run_exists: false,
            checks: Vec::new(),
            labels: pr.labels.iter().map(|l| l.name.clone()).collect(),
            threads: Vec::new(),
            owner_comments: Vec::new(),
            worker_running,
            author: pr.user.as_ref().map(|u| u.login.clone()),
            verdicts: Vec::new(),
        };
        if obs.state != PrState::Open {
            return Ok(obs);
        }
        let (status, conversation, (reviews, review_comments)) = tokio::try_join!(
            self.client.combined_status(owner, repo, &pr.head.sha),
            self.client.issue_comments(owner, repo, number),
            self.review_comments(number),
        )?;
        obs.verdicts = verdicts_of(&reviews);
        obs.ci_run_exists = status.total_count > 0 || !status.statuses.is_empty();
        obs.checks = status.statuses.iter().map(to_check).collect();
        crate::gitea_ci_logs::add_job_logs(
            &self.client,
            owner,
            repo,
            &pr.head.sha,
            &mut obs.checks,
        )
        .await;
        obs.threads = threads_of(&review_comments);
        let mut asks: Vec<OwnerComment> = conversation
            .iter()
            .filter(|c| self.is_owners(c.user.as_ref().map(|u| u.login.as_str()), &c.body, config))
            .map(|c| OwnerComment {
                id: c.id,
                created_at: c.created_at.unwrap_or(now),
                on_conversation: true,
                body: c.body.clone(),
            })
            .collect();
        asks.extend(
            review_comments
                .iter()
                .filter(|c| {
                    self.is_owners(c.user.as_ref().map(|u| u.login.as_str()), &c.body, config)
                })
                .map(|c| OwnerComment {
                    id: c.id,
                    created_at: c.created_at.unwrap_or(now),
                    on_conversation: false,
                    body: c.body.clone(),
                }),
        );
        obs.owner_comments = asks;
        Ok(obs)
    }

    /// Every review of PR `number`, and every review comment, oldest first.
    async fn review_comments(
        &self,
        number: u64,
    ) -> Result<(Vec<GiteaReview>, Vec<GiteaReviewComment>), GiteaError> {
        let (owner, repo) = (self.owner.as_str(), self.repo.as_str());
        let mut comments = Vec::new();
        let reviews = self.client.reviews(owner, repo, number).await?;
        for review in &reviews {
            if review.comments_count == 0 {
                continue;
            }
            comments.extend(
                self.client
                    .review_comments(owner, repo, number, review.id)
                    .await?,
            );
        }
        comments.sort_by_key(|c| (c.created_at, c.id));
        Ok((reviews, comments))
    }

    /// Merges PR `number` on `head_sha` (see [`executor_http::gitea::GiteaClient::merge_pr`]).
    pub async fn merge(
        &self,
        number: u64,
        head_sha: &str,
        method: MergeMethod,
        delete_branch: bool,
    ) -> Result<(), GiteaError> {
        self.client
            .merge_pr(
                &self.owner,
                &self.repo,
                number,
                method.as_str(),
                head_sha,
                delete_branch,
            )
            .await
    }

    /// A comment by the repository's owner that is not one of executor's own.
    fn is_owners(&self, login: Option<&str>, body: &str, config: &PrConfig) -> bool {
        let Some(login) = login else {
            return false;
        };
        login.eq_ignore_ascii_case(&self.owner)
            && !body.contains(EXECUTOR_MARK)
            && !config
                .executor_logins
                .iter()
                .any(|l| l.eq_ignore_ascii_case(login))
    }

    /// Answers conversation `thread` of PR `number` with a review comment on its line;
    /// `false` when the PR has no such conversation. A conversation Gitea gives no line
    /// for is answered on the PR's conversation, naming its file. The answer carries a
    /// marker of the conversation, its last ask (its newest comment not executor's) and
    /// the text ([`answer_marker`]): one with that marker already there (posted, its answer
    /// lost) is not posted again, and the same text to a later ask is a new answer.
    pub async fn answer_thread(
        &self,
        number: u64,
        thread: &str,
        answer: &str,
    ) -> Result<bool, GiteaError> {
        let Some(first) = thread
            .strip_prefix(THREAD_PREFIX)
            .and_then(|id| id.parse::<u64>().ok())
        else {
            return Ok(false);
        };
        let (_, comments) = self.review_comments(number).await?;
        let Some(found) = comments.iter().find(|c| c.id == first) else {
            return Ok(false);
        };
        // The conversation: the comments on the same line of the same file, oldest first.
        let conversation: Vec<&GiteaReviewComment> = comments
            .iter()
            .filter(|c| c.path == found.path && c.line() == found.line())
            .collect();
        let ask = last_ask(conversation.iter().map(|c| (c.id, c.body.as_str())))
            .unwrap_or_else(|| first.to_string());
        let marker = answer_marker(thread, &ask, answer);
        let marked = format!("{answer}\n\n{marker}");
        if conversation.iter().any(|c| c.body.contains(&marker)) {
            return Ok(true);
        }
        match found.line() {
            Some(line) => {
                let (owner, repo) = (self.owner.as_str(), self.repo.as_str());
                let at = (found.path.as_str(), line);
                self.client
                    .post_line_comment(owner, repo, number, at, &marked)
                    .await?;
            }
            None => {
                // Answered on the PR's conversation: looked for there.
                let posted = self
                    .conversation(number)
                    .await?
                    .iter()
                    .any(|c| c.body.contains(&marker));
                if !posted {
                    let body = format!("On `{}` (conversation {thread}):\n\n{marked}", found.path);
                    self.post_comment(number, &body).await?;
                }
            }
        }
        Ok(true)
    }

    /// Tells the owner run `run_id` is complete on `head_sha`: a PR comment that
    /// @mentions them, with its marker; nothing when the marker is there already.
    pub async fn notify_complete(
        &self,
        number: u64,
        owner_login: &str,
        run_id: i64,
        head_sha: &str,
    ) -> Result<(), GiteaError> {
        let login = owner_login.trim().trim_start_matches('@');
        let valid = !login.is_empty()
            && login
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            return Err(GiteaError::Settings(format!(
                "cannot @mention {owner_login:?}: not a Gitea login"
            )));
        }
        let marker = crate::github::steps::complete_marker(run_id, head_sha);
        let told = self
            .client
            .issue_comments(&self.owner, &self.repo, number)
            .await?
            .iter()
            .any(|c| c.body.contains(&marker));
        if told {
            return Ok(());
        }
        self.post_comment(number, &complete_comment_body(login, &marker))
            .await
    }
}

/// Each reviewer's latest verdict from Gitea's reviews (in Gitea's order, oldest first): an
/// approval or a request for changes stands until the same reviewer gives another; a
/// dismissed one counts for nothing. A stale approval (given on an older head) keeps its
/// commit, so it does not count for the head.
fn verdicts_of(reviews: &[GiteaReview]) -> Vec<Verdict> {
    latest_verdicts(reviews.iter().filter_map(|review| {
        let user = review.user.as_ref().filter(|u| !u.login.is_empty())?;
        let approved = match review.state.as_str() {
            "APPROVED" => true,
            "REQUEST_CHANGES" => false,
            _ => return None,
        };
        let verdict = (!review.dismissed).then(|| Verdict {
            by: user.login.clone(),
            approved,
            commit: Some(review.commit_id.clone()).filter(|c| !c.is_empty()),
        });
        Some((user.login.clone(), verdict))
    }))
}

/// The text of the completion comment on Gitea: the draft is marked ready by taking the
/// `WIP:` prefix off its title.
pub fn complete_comment_body(owner_login: &str, marker: &str) -> String {
    format!(
        "@{owner_login} this draft PR is ready for you: CI is green, the review passed and \
         no review conversation is waiting. Take `WIP:` off its title and merge it when you \
         are happy, or comment here to send it back for more work.\n\n{marker}"
    )
}

/// One commit status as a check of the machine.
fn to_check(status: &GiteaStatus) -> CheckRun {
    let (run, conclusion) = match status.state.as_str() {
        "success" => (CheckRunStatus::Completed, Some(CheckConclusion::Success)),
        "failure" | "error" => (CheckRunStatus::Completed, Some(CheckConclusion::Failure)),
        "warning" => (CheckRunStatus::Completed, Some(CheckConclusion::Neutral)),
        "pending" => (CheckRunStatus::Pending, None),
        // A state this version does not know: never green.
        _ => (CheckRunStatus::Completed, Some(CheckConclusion::Unknown)),
    };
    let url = Some(status.target_url.clone()).filter(|u| !u.trim().is_empty());
    CheckRun {
        name: status.context.clone(),
        status: run,
        conclusion,
        url: url.clone(),
        run_url: url,
        summary: Some(status.description.clone()).filter(|d| !d.trim().is_empty()),
        failing_step: None,
        log_excerpt: None,
    }
}

/// Review comments (oldest first) grouped into conversations: one per file and line. A
/// thread's `line` is a line of the new file; a conversation on a removed line has none.
fn threads_of(comments: &[GiteaReviewComment]) -> Vec<ObservedThread> {
    let mut threads: Vec<ObservedThread> = Vec::new();
    let mut at: BTreeMap<(String, Option<DiffLine>), usize> = BTreeMap::new();
    for c in comments {
        let line = c.line();
        let key = (c.path.clone(), line);
        let i = *at.entry(key).or_insert_with(|| {
            threads.push(ObservedThread {
                id: format!("{THREAD_PREFIX}{}", c.id),
                path: c.path.clone(),
                line: match line {
                    Some(DiffLine::New(n)) => Some(u32::try_from(n).unwrap_or(u32::MAX)),
                    _ => None,
                },
                is_resolved: false,
                is_outdated: false,
                comments: Vec::new(),
            });
            threads.len() - 1
        });
        let thread = &mut threads[i];
        thread.is_resolved |= c.resolver.is_some();
        thread.comments.push(ObservedComment {
            id: c.id.to_string(),
            author: c.user.as_ref().map(|u| u.login.clone()).unwrap_or_default(),
            body: c.body.clone(),
            created_at: c.created_at.unwrap_or_default(),
        });
    }
    threads
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_gitea_reviewers_latest_verdict_stands_unless_dismissed() {
        let review = |login: &str, state: &str, commit: &str, dismissed: bool| -> GiteaReview {
            serde_json::from_value(json!({
                "id": 1, "user": { "id": 2, "login": login }, "body": "", "state": state,
                "commit_id": commit, "stale": false, "dismissed": dismissed, "comments_count": 0,
            }))
            .expect("a review")
        };
        let reviews = [
            review("ana", "REQUEST_CHANGES", "a1", false),
            review("ana", "APPROVED", "b2", false),
            review("ana", "COMMENT", "c3", false),
            review("bo", "APPROVED", "a1", true),
            review("cy", "PENDING", "b2", false),
        ];
        assert_eq!(
            verdicts_of(&reviews),
            vec![Verdict {
                by: "ana".into(),
                approved: true,
                commit: Some("b2".into()),
            }]
        );
    }

    fn status(state: &str, context: &str) -> GiteaStatus {
        serde_json::from_value(json!({
            "id": 1, "status": state, "context": context, "description": format!("{context} {state}"),
            "target_url": "https://ci.example.com/1", "url": "", "creator": null,
        }))
        .expect("a status")
    }

    #[test]
    fn each_status_state_is_a_check_the_machine_reads() {
        let cases = [
            (
                "success",
                CheckRunStatus::Completed,
                Some(CheckConclusion::Success),
            ),
            (
                "failure",
                CheckRunStatus::Completed,
                Some(CheckConclusion::Failure),
            ),
            (
                "error",
                CheckRunStatus::Completed,
                Some(CheckConclusion::Failure),
            ),
            (
                "warning",
                CheckRunStatus::Completed,
                Some(CheckConclusion::Neutral),
            ),
            ("pending", CheckRunStatus::Pending, None),
            (
                "exploded",
                CheckRunStatus::Completed,
                Some(CheckConclusion::Unknown),
            ),
        ];
        for (state, run, conclusion) in cases {
            let check = to_check(&status(state, "ui-tests"));
            assert_eq!(
                (check.status, check.conclusion),
                (run, conclusion),
                "{state}"
            );
            assert_eq!(check.name, "ui-tests");
            assert_eq!(
                check.summary.as_deref(),
                Some(format!("ui-tests {state}").as_str())
            );
            assert_eq!(check.url.as_deref(), Some("https://ci.example.com/1"));
        }
    }

    fn comment(
        id: u64,
        path: &str,
        position: u64,
        login: &str,
        resolved: bool,
    ) -> GiteaReviewComment {
        serde_json::from_value(json!({
            "id": id, "body": format!("c{id}"), "user": { "id": 1, "login": login },
            "path": path, "position": position,
            "original_position": if position == 0 { 7 } else { 0 },
            "resolver": if resolved { json!({ "id": 2, "login": "mkowalski" }) } else { json!(null) },
            "created_at": "2026-03-16T09:00:00+01:00",
        }))
        .expect("a review comment")
    }

    #[test]
    fn review_comments_on_one_line_are_one_conversation() {
        let threads = threads_of(&[
            comment(10, "src/tab.rs", 3, "mkowalski", false),
            comment(11, "src/tab.rs", 4, "mkowalski", false),
            comment(12, "src/tab.rs", 3, "lumen-executor", false),
            comment(13, "src/old.rs", 0, "mkowalski", true),
        ]);
        let seen: Vec<(&str, Option<u32>, bool, bool, usize)> = threads
            .iter()
            .map(|t| {
                (
                    t.id.as_str(),
                    t.line,
                    t.is_resolved,
                    t.is_outdated,
                    t.comments.len(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("gitea-10", Some(3), false, false, 2),
                ("gitea-11", Some(4), false, false, 1),
                ("gitea-13", None, true, false, 1),
            ]
        );
        assert_eq!(threads[0].comments[1].author, "lumen-executor");
    }
}

//! The one forge a run's PR lives on, as the run engine speaks to it: GitHub or Gitea
//! behind the same few operations (find or open the draft PR of a head, label it, look at
//! it for the `pr` machine, start CI, post a review, answer threads, tell the owner), so
//! the engine carries one `pr` machine ([`executor_core::pr`]) on either.
//!
//! GitHub's side is [`super::github`] unchanged (its observation, steps and caches); Gitea's
//! is [`super::gitea_pr`]. A part of the machine the forge has no API for is said here,
//! per operation, and answered so the machine never repeats it forever (see
//! [`ForgeClient::resolve_threads`], [`ForgeClient::trigger_ci`]).
//!
//! What it must never do: decide a step (the machine does), or let one forge's error pass
//! for another's kind (a transient one is transient, a gone PR is gone, on both).

use chrono::{DateTime, Utc};

use super::gitea_pr::GiteaRepo;
use super::github::{self, steps, GithubClient, GithubError, NewPullRequest};
use executor_core::merge::MergeMethod;
use executor_core::pr::{
    answer_marker, last_ask, Opening, PrConfig, PrObservation, TriggerReason, OWNER_ASK_PREFIX,
};
use executor_http::gitea::GiteaError;

/// A forge's client, bound to the repository runs open PRs on.
#[derive(Debug, Clone)]
pub enum ForgeClient {
    Github(GithubClient),
    Gitea(GiteaRepo),
}

/// A failed forge call, of either forge.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    #[error(transparent)]
    Github(#[from] GithubError),
    #[error(transparent)]
    Gitea(#[from] GiteaError),
}

impl ForgeError {
    /// The same call may succeed later with nothing changed on executor's side.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Github(e) => e.is_transient(),
            Self::Gitea(e) => e.is_transient(),
        }
    }

    /// A 404: the PR (or the repository) is not there.
    pub fn is_not_found(&self) -> bool {
        match self {
            Self::Github(e) => e.is_not_found(),
            Self::Gitea(e) => e.is_not_found(),
        }
    }

    /// When to try again, if the forge said.
    pub fn retry_at(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Self::Github(e) => e.retry_at(now),
            Self::Gitea(GiteaError::RateLimited {
                retry_after: Some(wait),
            }) => Some(executor_http::retry::later(now, *wait)),
            Self::Gitea(_) => None,
        }
    }
}

/// The PR a head has: its number and where a human reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedPr {
    pub number: u64,
    pub html_url: String,
}

/// What the forge said to a merge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeOutcome {
    Merged,
    /// The forge would not merge it (not mergeable, its head moved, a rule of the
    /// repository): its words, for the owner.
    Refused(String),
}

/// One PR a tick looks at (the forge-neutral [`github::Look`]).
pub use super::github::Look;

impl ForgeClient {
    /// The forge's name, as the owner reads it in a log line or a question.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Github(_) => "GitHub",
            Self::Gitea(_) => "Gitea",
        }
    }

    /// Drops cached looks (a push moved a head). Gitea's client caches nothing.
    pub fn expire_cache(&self) {
        if let Self::Github(client) = self {
            client.expire_cache();
        }
    }

    /// The open PR whose head is `branch`, if there is one.
    pub async fn open_pr_for_head(&self, branch: &str) -> Result<Option<OpenedPr>, ForgeError> {
        Ok(match self {
            Self::Github(client) => client.open_pr_for_head(branch).await?.map(|pr| OpenedPr {
                number: pr.number,
                html_url: pr.html_url,
            }),
            Self::Gitea(repo) => repo.open_pr_for_head(branch).await?.map(|pr| OpenedPr {
                number: pr.number,
                html_url: pr.html_url,
            }),
        })
    }

    /// Opens `opening` as a draft PR: GitHub's `draft: true`, Gitea's `WIP: ` title.
    pub async fn create_draft_pr(&self, opening: &Opening) -> Result<OpenedPr, ForgeError> {
        Ok(match self {
            Self::Github(client) => {
                let pr = client
                    .create_draft_pr(&NewPullRequest {
                        title: opening.title.clone(),
                        head: opening.head.clone(),
                        base: opening.base.clone(),
                        body: opening.body.clone(),
                    })
                    .await?;
                OpenedPr {
                    number: pr.number,
                    html_url: pr.html_url,
                }
            }
            Self::Gitea(repo) => {
                let pr = repo.create_draft_pr(opening).await?;
                OpenedPr {
                    number: pr.number,
                    html_url: pr.html_url,
                }
            }
        })
    }

    /// Puts `labels` on PR `number` (a label the repository lacks is made).
    pub async fn add_labels(&self, number: u64, labels: &[String]) -> Result<(), ForgeError> {
        match self {
            Self::Github(client) => {
                steps::add_labels(client, number, labels).await?;
            }
            Self::Gitea(repo) => {
                let names: Vec<&str> = labels.iter().map(String::as_str).collect();
                repo.add_labels(number, &names).await?;
            }
        }
        Ok(())
    }

    /// What the forge last said of its request budgets (GitHub's; Gitea says none).
    pub fn quota(&self) -> Vec<executor_http::github::Quota> {
        match self {
            Self::Github(client) => client.quota(),
            Self::Gitea(_) => Vec::new(),
        }
    }

    /// The observations of `looks`, in their order; an error is that PR's alone.
    pub async fn observe_many(
        &self,
        looks: &[Look<'_>],
        config: &PrConfig,
        now: DateTime<Utc>,
    ) -> Vec<Result<PrObservation, ForgeError>> {
        match self {
            Self::Github(client) => github::observe_many(client, looks, config, now)
                .await
                .into_iter()
                .map(|r| r.map_err(ForgeError::from))
                .collect(),
            Self::Gitea(repo) => {
                let mut observed = Vec::with_capacity(looks.len());
                for look in looks {
                    let obs = repo.observe(look.number, config, now, look.worker_running);
                    observed.push(obs.await.map_err(ForgeError::from));
                }
                observed
            }
        }
    }

    /// Resolves the threads `ids`. Gitea's API cannot resolve a conversation, so there
    /// nothing is done (the engine never asks: `resolve_acknowledged` is off on Gitea).
    pub async fn resolve_threads(&self, ids: &[String]) -> Result<(), ForgeError> {
        match self {
            Self::Github(client) => {
                steps::resolve_threads(client, ids).await?;
            }
            Self::Gitea(_) => {
                tracing::warn!(threads = ?ids, "Gitea's API cannot resolve a review conversation; the reviewer resolves it");
            }
        }
        Ok(())
    }

    /// Starts CI for `head_sha` as fits `obs` (a re-run, the configured workflow); `false`
    /// when nothing can start it. Gitea's CI reports commit statuses and has no API to
    /// start it again, so there it is always `false` (the machine asks the owner if CI does
    /// not appear).
    pub async fn trigger_ci(
        &self,
        obs: &PrObservation,
        reason: &TriggerReason,
        workflow: Option<&str>,
        branch: &str,
        head_sha: &str,
    ) -> Result<bool, ForgeError> {
        match self {
            Self::Github(client) => match steps::choose_ci_trigger(obs, reason, workflow, branch) {
                Some(how) => {
                    steps::trigger_ci(client, head_sha, &how).await?;
                    Ok(true)
                }
                None => Ok(false),
            },
            Self::Gitea(_) => Ok(false),
        }
    }

    /// Posts executor's review of PR `number` (a `COMMENT`, never an approval), once:
    /// `body` ends with [`steps::review_marker`] of its run and head, and a review holding
    /// that marker already on the PR (posted before an answer was lost) is not posted again.
    pub async fn post_review(
        &self,
        number: u64,
        body: &str,
        marker: &str,
    ) -> Result<(), ForgeError> {
        match self {
            Self::Github(client) => {
                steps::post_review(client, number, body, marker).await?;
            }
            Self::Gitea(repo) => {
                repo.post_review(number, body, marker).await?;
            }
        }
        Ok(())
    }

    /// @mentions `owner_login` on PR `number`: run `run_id` is complete on `head_sha`. The
    /// comment carries its marker and is looked for before it is posted again, so the
    /// owner is told once.
    pub async fn notify_complete(
        &self,
        number: u64,
        owner_login: &str,
        run_id: i64,
        head_sha: &str,
    ) -> Result<(), ForgeError> {
        match self {
            Self::Github(client) => {
                steps::notify_complete_comment(client, number, owner_login, run_id, head_sha)
                    .await?;
            }
            Self::Gitea(repo) => {
                repo.notify_complete(number, owner_login, run_id, head_sha)
                    .await?;
            }
        }
        Ok(())
    }

    /// Posts each of `answers` (`(thread, text)`, in order) on PR `number`: an owner's
    /// conversation comment (`comment-<id>`) is answered with a PR comment that links it
    /// (at `pr_url`); a review thread by a reply in it. GitHub takes a reply to the
    /// thread's first comment; Gitea's API has no reply in a conversation, so there the
    /// answer is a review comment on the thread's line, which Gitea shows in that
    /// conversation. Each answer carries its [`answer_marker`], of the thread's last ask,
    /// and is looked for first (in the conversation, or in its thread), so a retry after a
    /// lost answer posts nothing twice and the same text to a later ask is posted anew. Answers the threads the PR does not have
    /// (nothing was posted for them).
    pub async fn answer_threads(
        &self,
        number: u64,
        pr_url: Option<&str>,
        answers: &[(String, String)],
    ) -> Result<Vec<String>, ForgeError> {
        let mut missing = Vec::new();
        let github_threads = match self {
            Self::Github(client) => client.review_threads(number).await?,
            Self::Gitea(_) => Vec::new(),
        };
        for (thread, answer) in answers {
            if let Some(comment) = thread.strip_prefix(OWNER_ASK_PREFIX) {
                let marker = answer_marker(thread, comment, answer);
                let link = pr_url
                    .map(|url| format!("{url}#issuecomment-{comment}"))
                    .unwrap_or_else(|| format!("comment {comment}"));
                let body = format!("On {link}:\n\n{answer}\n\n{marker}");
                self.tell_owner(number, &body, &marker).await?;
                continue;
            }
            let answered = match self {
                Self::Github(client) => {
                    let Some(found) = github_threads.iter().find(|t| &t.id == thread) else {
                        missing.push(thread.clone());
                        continue;
                    };
                    let comments = found.comments.iter();
                    let ask = last_ask(comments.map(|c| (c.id.as_str(), c.body.as_str())))
                        .unwrap_or_default();
                    let marker = answer_marker(thread, &ask, answer);
                    if found.comments.iter().any(|c| c.body.contains(&marker)) {
                        continue;
                    }
                    // GitHub takes replies to a thread's top-level comment only (replies
                    // to replies are not supported): the answer goes to the first comment.
                    match found.comments.first().and_then(|c| c.database_id) {
                        Some(comment) => {
                            let marked = format!("{answer}\n\n{marker}");
                            client
                                .reply_to_review_comment(number, comment, &marked)
                                .await?;
                            true
                        }
                        None => false,
                    }
                }
                Self::Gitea(repo) => repo.answer_thread(number, thread, answer).await?,
            };
            if !answered {
                missing.push(thread.clone());
            }
        }
        Ok(missing)
    }

    /// Merges PR `number` on `head_sha` (the forge refuses if the head moved) by `method`,
    /// then deletes `branch` where asked (on Gitea, the merge itself does). A refusal is an
    /// answer, not an error; a failed branch deletion is logged and no more.
    pub async fn merge(
        &self,
        number: u64,
        head_sha: &str,
        method: MergeMethod,
        delete_branch: Option<&str>,
    ) -> Result<MergeOutcome, ForgeError> {
        let refused = |status: u16| matches!(status, 405 | 409 | 422 | 423);
        match self {
            Self::Github(client) => {
                match client.merge_pr(number, head_sha, method.as_str()).await {
                    Ok(answer) if answer.merged => {}
                    Ok(answer) => return Ok(MergeOutcome::Refused(answer.message)),
                    Err(GithubError::Http { status, message }) if refused(status) => {
                        return Ok(MergeOutcome::Refused(message))
                    }
                    Err(e) => return Err(e.into()),
                }
                if let Some(branch) = delete_branch {
                    if let Err(e) = client.delete_branch(branch).await {
                        tracing::warn!(branch, error = %e, "the merged PR's branch was not deleted");
                    }
                }
                Ok(MergeOutcome::Merged)
            }
            Self::Gitea(repo) => {
                match repo
                    .merge(number, head_sha, method, delete_branch.is_some())
                    .await
                {
                    Ok(()) => Ok(MergeOutcome::Merged),
                    Err(GiteaError::Http { status, message }) if refused(status) => {
                        Ok(MergeOutcome::Refused(message))
                    }
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Posts `body` (which carries `marker`) on PR `number`'s conversation once: nothing
    /// when a comment with `marker` is there already (posted before an answer was lost).
    pub async fn tell_owner(
        &self,
        number: u64,
        body: &str,
        marker: &str,
    ) -> Result<(), ForgeError> {
        match self {
            Self::Github(client) => {
                let posted = client
                    .issue_comments(number)
                    .await?
                    .iter()
                    .any(|c| c.body.contains(marker));
                if !posted {
                    client.post_issue_comment(number, body).await?;
                }
            }
            Self::Gitea(repo) => {
                let posted = repo
                    .conversation(number)
                    .await?
                    .iter()
                    .any(|c| c.body.contains(marker));
                if !posted {
                    repo.post_comment(number, body).await?;
                }
            }
        }
        Ok(())
    }
}

//! The orchestrator's side of the `pr` machine on GitHub: the writes a
//! [`executor_core::pr::PrStep`] asks for, each one function over the shared
//! [`GithubClient`] returning the client's typed errors (a transient one means "try again
//! on a later tick"; the step is simply chosen again then, as every step is safe to
//! repeat).
//!
//! | step | function |
//! |---|---|
//! | (after the branch is pushed) | [`open_draft_pr`] |
//! | `AddLabels` | [`add_labels`] |
//! | `TriggerCi` | [`choose_ci_trigger`], then [`trigger_ci`] |
//! | `ResolveThreads` | [`resolve_threads`] |
//! | a `pr_review` worker's verdict | [`post_review`] (always a `COMMENT` review) |
//! | `Complete` | [`notify_complete_comment`] |
//!
//! What this module must never do: compose what the task or a worker says (titles, bodies
//! and review text come from the caller), approve or request changes (GitHub refuses both
//! on the app's own PR), or run anything a worker asked for without the orchestrator
//! having chosen the step.

use super::observe::{actions_run_id, EXECUTOR_MARKER};
use executor_core::pr::{PrObservation, TriggerReason};
use executor_http::github::types::{
    IssueComment, Label, NewPullRequest, PullRequest, ResolvedThread, Review, ReviewEvent,
};
use executor_http::github::GithubClient;
use executor_http::github::GithubError;

/// Opens the run's draft PR from `head_branch` (already pushed) into `base`.
pub async fn open_draft_pr(
    client: &GithubClient,
    head_branch: &str,
    base: &str,
    title: &str,
    body: &str,
) -> Result<PullRequest, GithubError> {
    client
        .create_draft_pr(&NewPullRequest {
            title: title.to_string(),
            head: head_branch.to_string(),
            base: base.to_string(),
            body: body.to_string(),
        })
        .await
}

/// Adds `labels` to PR `pr` (GitHub creates a label on first use); answers with every
/// label now on the PR.
pub async fn add_labels(
    client: &GithubClient,
    pr: u64,
    labels: &[String],
) -> Result<Vec<Label>, GithubError> {
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    client.add_labels(pr, &labels).await
}

/// How CI is started for a head commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CiTrigger {
    /// Re-run the failed (and cancelled) jobs of this Actions run.
    RerunFailed { run_id: u64 },
    /// A `workflow_dispatch` of `workflow_file` (`ui-tests.yml`) on `git_ref` (the PR's
    /// head branch: GitHub dispatches on a branch or tag, never a bare sha).
    Dispatch {
        workflow_file: String,
        git_ref: String,
    },
}

/// How to carry out `TriggerCi { reason }` for `obs`:
///
/// - checks were cancelled or went stale (`Rerun`): re-run the failed jobs of the Actions
///   run they belong to;
/// - otherwise (no run at all, a required check missing), or when those checks are not
///   Actions jobs: dispatch `workflow_file` on `head_branch`, if one is configured;
/// - with nothing to re-run and no workflow configured: `None`. Nothing can start CI from
///   here; the caller logs that and still remembers the step, so the machine asks the
///   owner after the grace (`CiDidNotStart`, `RequiredCheckMissing`) instead of waiting
///   forever.
pub fn choose_ci_trigger(
    obs: &PrObservation,
    reason: &TriggerReason,
    workflow_file: Option<&str>,
    head_branch: &str,
) -> Option<CiTrigger> {
    if let TriggerReason::Rerun { checks } = reason {
        let run = obs
            .checks
            .iter()
            .filter(|c| checks.contains(&c.name))
            .flat_map(|c| [c.run_url.as_deref(), c.url.as_deref()])
            .flatten()
            .find_map(actions_run_id);
        if let Some(run_id) = run {
            return Some(CiTrigger::RerunFailed { run_id });
        }
    }
    let workflow_file = workflow_file.map(str::trim).filter(|w| !w.is_empty())?;
    Some(CiTrigger::Dispatch {
        workflow_file: workflow_file.to_string(),
        git_ref: head_branch.to_string(),
    })
}

/// Starts CI for `head_sha` as `how` says.
pub async fn trigger_ci(
    client: &GithubClient,
    head_sha: &str,
    how: &CiTrigger,
) -> Result<(), GithubError> {
    tracing::info!(head_sha, trigger = ?how, "triggering CI");
    match how {
        CiTrigger::RerunFailed { run_id } => client.rerun_failed_jobs(*run_id).await,
        CiTrigger::Dispatch {
            workflow_file,
            git_ref,
        } => client.dispatch_workflow(workflow_file, git_ref, None).await,
    }
}

/// Resolves each thread of `ids`, in order; answers with the threads resolved. A thread
/// GitHub no longer has (deleted with its comments) needs no resolving and is skipped, so a
/// `NOT_FOUND` here never reads as the PR being gone. The first other error stops the rest;
/// resolving again next tick is harmless.
pub async fn resolve_threads(
    client: &GithubClient,
    ids: &[String],
) -> Result<Vec<ResolvedThread>, GithubError> {
    let mut resolved = Vec::with_capacity(ids.len());
    for id in ids {
        match client.resolve_review_thread(id).await {
            Ok(thread) => resolved.push(thread),
            Err(error) if error.is_not_found() => {
                tracing::info!(thread = %id, "the review thread is gone; nothing to resolve");
            }
            Err(error) => return Err(error),
        }
    }
    Ok(resolved)
}

/// Posts the `pr_review` worker's review of PR `pr` as a `COMMENT` review: the app cannot
/// approve or request changes on a PR it opened (GitHub answers 422), and the verdict is
/// the executor's to act on, not a merge gate. `body` carries `marker`
/// ([`review_marker`]); the PR's reviews are looked through for it first, so a retry after
/// a lost answer (a 502 after GitHub saved the review) posts nothing (`None`).
pub async fn post_review(
    client: &GithubClient,
    pr: u64,
    body: &str,
    marker: &str,
) -> Result<Option<Review>, GithubError> {
    if client
        .reviews(pr)
        .await?
        .iter()
        .any(|r| r.body.contains(marker))
    {
        return Ok(None);
    }
    client
        .post_review(pr, body, ReviewEvent::Comment)
        .await
        .map(Some)
}

/// The hidden marker of run `run_id`'s review of head `head_sha`, at the end of the
/// review's body: one review per run and head, whatever happens to the answers.
pub fn review_marker(run_id: i64, head_sha: &str) -> String {
    format!("{EXECUTOR_MARKER}run-{run_id}:review:{head_sha} -->")
}

/// Tells the owner run `run_id` is complete: a conversation comment on PR `pr` that
/// @mentions `owner_login` (with or without a leading `@`), so GitHub notifies them. It
/// carries the executor's marker for this run's completion on `head_sha`
/// ([`complete_marker`]), so it is
/// never read back as the owner's comment, and a retry after a failure (a 502 may come
/// after GitHub saved the comment) first looks for it and posts nothing when it is there:
/// the owner is @mentioned once (`None`: it was there already). A login GitHub could not have (empty, spaces) is a
/// settings error, and nothing is posted.
pub async fn notify_complete_comment(
    client: &GithubClient,
    pr: u64,
    owner_login: &str,
    run_id: i64,
    head_sha: &str,
) -> Result<Option<IssueComment>, GithubError> {
    let login = owner_login.trim().trim_start_matches('@');
    let valid = !login.is_empty() && login.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !valid {
        return Err(GithubError::Settings(format!(
            "cannot @mention {owner_login:?}: not a GitHub login"
        )));
    }
    let marker = complete_marker(run_id, head_sha);
    if client
        .issue_comments(pr)
        .await?
        .iter()
        .any(|c| c.body.contains(&marker))
    {
        return Ok(None);
    }
    client
        .post_issue_comment(pr, &complete_comment_body(login, run_id, head_sha))
        .await
        .map(Some)
}

/// The hidden marker of run `run_id`'s completion comment on head `head_sha`: a run sent
/// back by the owner and complete again on a new head tells the owner again.
pub fn complete_marker(run_id: i64, head_sha: &str) -> String {
    format!("{EXECUTOR_MARKER}run-{run_id}:complete:{head_sha} -->")
}

/// The text of [`notify_complete_comment`].
pub fn complete_comment_body(owner_login: &str, run_id: i64, head_sha: &str) -> String {
    format!(
        "@{owner_login} this draft PR is ready for you: CI is green, the review passed and \
         no review thread is waiting. Mark it ready and merge it when you are happy, or \
         comment here to send it back for more work.\n\n{}",
        complete_marker(run_id, head_sha)
    )
}

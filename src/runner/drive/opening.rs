//! Opening a run's draft PR as a durable intent: when a run's verified branch is pushed, the
//! PR it is to open (title, head, base, body) is written into the run's PR memory first,
//! then tried. A GitHub failure leaves the run `in_progress` with its branch pushed and the
//! intent kept; the next PR tick tries again, and after `[forge] max_effect_failures`
//! failures in a row the owner is asked, with the error (an error that cannot pass, such as
//! a 422, asks at once). The run moves to `pr` only once its PR exists and its number is
//! saved.
//!
//! Every try is safe to repeat: it first looks for an open PR of the run's head (GitHub
//! allows one per head) and adopts it, so a create whose answer was lost (a 502 after
//! GitHub made the PR, a crash before the number was saved) never leaves an orphan nor a
//! 422 on every later try. The number is saved the moment it is known, before the labels;
//! labels are a set, and a failed label call is healed by the `pr` machine's own
//! `AddLabels` step.
//!
//! What it must never do: abandon a run for a GitHub failure, create a second PR for a head
//! that has one, or move a run to `pr` before its PR number is stored.

use super::*;
use crate::core::pr::{Opening, PrMemory};
use crate::forge::github::{GithubError, NewPullRequest, PullRequest};

/// Run `run_id`'s PR memory (the default when it has none).
pub(super) async fn memory_of_run(store: &dyn Store, run_id: i64) -> Result<PrMemory> {
    Ok(match store.pr_memory(run_id).await? {
        Some(json) => serde_json::from_str(&json)
            .with_context(|| format!("run {run_id}'s PR memory does not read back"))?,
        None => PrMemory::default(),
    })
}

pub(super) async fn save_memory(
    store: &dyn Store,
    clock: &dyn Clock,
    run_id: i64,
    memory: &PrMemory,
) -> Result<()> {
    store
        .save_pr_memory(run_id, &serde_json::to_string(memory)?, clock.now())
        .await?;
    Ok(())
}

/// Whether run `run_id` waits for its draft PR to be opened (its branch is pushed): the PR
/// tick opens it, and no worker is started for it again.
pub async fn opens_pr(store: &dyn Store, run_id: i64) -> Result<bool> {
    Ok(match store.pr_memory(run_id).await? {
        Some(json) => serde_json::from_str::<PrMemory>(&json)
            .map(|m| m.opening.is_some())
            .unwrap_or(false),
        None => false,
    })
}

/// What one try of opening left.
pub(super) enum Tried {
    /// The PR is open, its number saved, the run in `pr`.
    Opened,
    /// GitHub failed; the run stays `in_progress` with the intent kept. `ask`: the owner
    /// is to be asked now (the failures reached the configured number).
    Failed {
        error: GithubError,
        failures: u32,
        ask: bool,
    },
}

/// Writes `opening` as run `run`'s intent, then tries it once.
pub(super) async fn decide(
    store: &dyn Store,
    clock: &dyn Clock,
    github: &GithubForge,
    run: &mut Run,
    opening: Opening,
) -> Result<Tried> {
    let mut memory = memory_of_run(store, run.id).await?;
    memory.opening = Some(opening);
    save_memory(store, clock, run.id, &memory).await?;
    try_open(store, clock, github, run, memory).await
}

/// One try at the run's PR: adopt or create it, save its number, label it, move the run to
/// `pr`. A GitHub failure is counted in the memory and answered as [`Tried::Failed`]; only
/// a store failure is an error.
pub(super) async fn try_open(
    store: &dyn Store,
    clock: &dyn Clock,
    github: &GithubForge,
    run: &mut Run,
    memory: PrMemory,
) -> Result<Tried> {
    if run.pr_number.is_none() {
        let Some(opening) = memory.opening.clone() else {
            anyhow::bail!("run {} has no PR to open", run.id);
        };
        match find_or_create(github, &opening).await {
            Ok(pr) => {
                run.pr_number = Some(i64::try_from(pr.number).unwrap_or(i64::MAX));
                run.pr_url = Some(pr.html_url.clone());
                run.updated_at = clock.now();
                store.save_run(run).await?;
            }
            Err(error) => {
                // An error that cannot pass by itself (a 422, a 404) is the owner's at once.
                let max = if error.is_transient() {
                    github.max_effect_failures
                } else {
                    1
                };
                let (memory, ask) = memory.effect_failed(max);
                save_memory(store, clock, run.id, &memory).await?;
                return Ok(Tried::Failed {
                    error,
                    failures: memory.effect_failures,
                    ask,
                });
            }
        }
    }
    let number = u64::try_from(run.pr_number.unwrap_or_default()).unwrap_or_default();
    if !github.required_labels.is_empty() {
        let labels: Vec<&str> = github.required_labels.iter().map(String::as_str).collect();
        if let Err(error) = github.client.add_labels(number, &labels).await {
            tracing::warn!(run = run.id, pr = number, %error, "cannot label the draft PR now; the PR tick adds the labels");
        }
    }
    if run.state == RunState::InProgress {
        // The lifecycle hands the run to the PR machine in the same save.
        if let Some(view) = run.lifecycle.as_mut() {
            view.stage = crate::core::lifecycle::Stage::InPr;
        }
        move_run(store, run, RunEvent::PrOpened, clock.now()).await?;
    }
    let mut memory = memory.effect_done();
    memory.opening = None;
    save_memory(store, clock, run.id, &memory).await?;
    Ok(Tried::Opened)
}

/// The open PR of the head, else a new one. A create refused because a PR for the head
/// exists (GitHub's 422) adopts that PR.
async fn find_or_create(
    github: &GithubForge,
    opening: &Opening,
) -> Result<PullRequest, GithubError> {
    if let Some(pr) = github.client.open_pr_for_head(&opening.head).await? {
        tracing::info!(pr = pr.number, head = %opening.head, "adopting the open PR of the run's branch");
        return Ok(pr);
    }
    let created = github
        .client
        .create_draft_pr(&NewPullRequest {
            title: opening.title.clone(),
            head: opening.head.clone(),
            base: opening.base.clone(),
            body: opening.body.clone(),
        })
        .await;
    match created {
        Ok(pr) => Ok(pr),
        Err(error) => match github.client.open_pr_for_head(&opening.head).await {
            Ok(Some(pr)) => Ok(pr),
            _ => Err(error),
        },
    }
}

/// The owner's escalation line for a PR that cannot be opened.
pub(super) fn failing_line(branch: &str, failures: u32, error: &GithubError) -> String {
    format!(
        "[ESCALATE:EffectFailing] cannot open the draft PR of branch {branch} ({failures} failed tries; executor keeps trying): {error}"
    )
}

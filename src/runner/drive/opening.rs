//! Publishing a run's verified change as durable intents: when a run's branch is verified,
//! the commit to push (`push`: the branch and the commit the orchestrator made) and the PR
//! it is to open (title, head, base, body) are written into the run's PR memory first, then
//! tried, the push before the PR. A remote that refuses the push (down, a network error) or
//! a forge failure leaves the run `in_progress` with the intents kept; the next PR tick
//! pushes the recorded commit again (same branch, same commit: idempotent) and opens the PR,
//! and after `[forge] max_effect_failures` failures in a row the owner is asked, with the
//! error (a GitHub error that cannot pass, such as a 422, asks at once). The run moves to
//! `pr` only once its PR exists and its number is saved.
//!
//! Every try is safe to repeat: it first looks for an open PR of the run's head (GitHub
//! allows one per head) and adopts it, so a create whose answer was lost (a 502 after
//! GitHub made the PR, a crash before the number was saved) never leaves an orphan nor a
//! 422 on every later try. The number is saved the moment it is known, before the labels;
//! labels are a set, and a failed label call is healed by the `pr` machine's own
//! `AddLabels` step.
//!
//! What it must never do: abandon a run for a failed push or a forge failure, push
//! anything but the recorded commit, create a second PR for a head that has one, open a PR
//! before its branch is pushed, or move a run to `pr` before its PR number is stored.

use super::RunnerSettings;
use crate::core::clock::Clock;
use crate::core::pr::PrMemory;
use crate::core::record::Run;
use crate::core::run::{RunEvent, RunState};
use crate::forge::{ForgeError, OpenedPr};
use crate::runner::drive::move_run;
use crate::runner::drive::push_recorded;
use crate::runner::drive::Forge;
use crate::store::Store;
use anyhow::{Context, Result};

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

/// Whether run `run_id` waits for its branch to be pushed or its draft PR to be opened:
/// the PR tick does both, and no worker is started for it again.
pub async fn opens_pr(store: &dyn Store, run_id: i64) -> Result<bool> {
    Ok(match store.pr_memory(run_id).await? {
        Some(json) => serde_json::from_str::<PrMemory>(&json)
            .map(|m| m.opening.is_some() || m.push.is_some())
            .unwrap_or(false),
        None => false,
    })
}

/// The outside effect a try failed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Effect {
    /// `git push` of the recorded commit.
    Push,
    /// Finding or creating the PR on GitHub.
    Open,
}

/// What one try of publishing left.
pub(super) enum Tried {
    /// The branch is pushed and the PR open, its number saved, the run in `pr`.
    Opened,
    /// The push or GitHub failed; the run stays `in_progress` with the intents kept.
    /// `ask`: the owner is to be asked now (the failures reached the configured number).
    Failed {
        effect: Effect,
        error: String,
        failures: u32,
        ask: bool,
    },
}

/// One try at what the run still owes of its publishing: the recorded push, when it is
/// owed (marked done as it lands), then the PR. A failure is counted in the memory and
/// answered as [`Tried::Failed`]; only a store failure is an error. `asks`: the owner may
/// be asked on this try (the PR tick's tries; the run's own first try leaves it to them).
pub(super) async fn try_publish(
    store: &dyn Store,
    settings: &RunnerSettings,
    forge: &Forge,
    run: &mut Run,
    mut memory: PrMemory,
    asks: bool,
) -> Result<Tried> {
    let clock = settings.clock.as_ref();
    if let Some(push) = memory.push.clone() {
        if let Err(error) = push_recorded(settings, run, &forge.remote, &push).await {
            // Whatever refused it (the remote down, the network, a rejected ref) is retried
            // like a transient GitHub failure: the owner is asked after as many tries.
            let max = if asks {
                forge.max_effect_failures
            } else {
                u32::MAX
            };
            let (memory, ask) = memory.effect_failed(max);
            save_memory(store, clock, run.id, &memory).await?;
            return Ok(Tried::Failed {
                effect: Effect::Push,
                error: format!("{error:#}"),
                failures: memory.effect_failures,
                ask,
            });
        }
        // The push moved the PR's head: no cached look at it is current any more.
        forge.client.expire_cache();
        memory = memory.push_done();
        save_memory(store, clock, run.id, &memory).await?;
    }
    try_open(store, clock, forge, run, memory, asks).await
}

/// One try at the run's PR: adopt or create it, save its number, label it, move the run to
/// `pr`. A GitHub failure is counted in the memory and answered as [`Tried::Failed`]; only
/// a store failure is an error.
async fn try_open(
    store: &dyn Store,
    clock: &dyn Clock,
    forge: &Forge,
    run: &mut Run,
    memory: PrMemory,
    asks: bool,
) -> Result<Tried> {
    if run.pr_number.is_none() {
        let Some(opening) = memory.opening.clone() else {
            anyhow::bail!("run {} has no PR to open", run.id);
        };
        match find_or_create(forge, &opening).await {
            Ok(pr) => {
                run.pr_number = Some(i64::try_from(pr.number).unwrap_or(i64::MAX));
                run.pr_url = Some(pr.html_url.clone());
                run.updated_at = clock.now();
                store.save_run(run).await?;
            }
            Err(error) => {
                // An error that cannot pass by itself (a 422, a 404) is the owner's at once.
                let max = if !asks {
                    u32::MAX
                } else if error.is_transient() {
                    forge.max_effect_failures
                } else {
                    1
                };
                let (memory, ask) = memory.effect_failed(max);
                save_memory(store, clock, run.id, &memory).await?;
                return Ok(Tried::Failed {
                    effect: Effect::Open,
                    error: error.to_string(),
                    failures: memory.effect_failures,
                    ask,
                });
            }
        }
    }
    let number = u64::try_from(run.pr_number.unwrap_or_default()).unwrap_or_default();
    if !forge.required_labels.is_empty() {
        if let Err(error) = forge
            .client
            .add_labels(number, &forge.required_labels)
            .await
        {
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
/// exists (GitHub's 422, Gitea's 409) adopts that PR.
async fn find_or_create(
    forge: &Forge,
    opening: &crate::core::pr::Opening,
) -> Result<OpenedPr, ForgeError> {
    if let Some(pr) = forge.client.open_pr_for_head(&opening.head).await? {
        tracing::info!(pr = pr.number, head = %opening.head, "adopting the open PR of the run's branch");
        return Ok(pr);
    }
    let created = forge.client.create_draft_pr(opening).await;
    match created {
        Ok(pr) => Ok(pr),
        Err(error) => match forge.client.open_pr_for_head(&opening.head).await {
            Ok(Some(pr)) => Ok(pr),
            _ => Err(error),
        },
    }
}

/// The owner's escalation line for a branch that cannot be pushed or a PR that cannot be
/// opened.
pub(super) fn failing_line(branch: &str, effect: Effect, failures: u32, error: &str) -> String {
    let what = match effect {
        Effect::Push => format!("cannot push branch {branch}"),
        Effect::Open => format!("cannot open the draft PR of branch {branch}"),
    };
    format!(
        "[ESCALATE:EffectFailing] {what} ({failures} failed tries; executor keeps trying): {error}"
    )
}

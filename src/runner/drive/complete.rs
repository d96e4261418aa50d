//! A run's outside effects at its end: the push and the draft PR (as intents, see
//! `opening`), the local completion
//! with its record step and notice, the abandonment.

use super::RunnerSettings;
use super::{conduct, opening, patience};
use crate::core::ending::{Origin, Outcome};
use crate::core::record::Run;
use crate::core::run::{next_state, RunEvent};
use crate::core::task::Task;
use crate::ops::end::{end_run, Ending};
use crate::runner::drive::head_commit;
use crate::runner::drive::orchestrator_git;
use crate::runner::drive::tampered;
use crate::runner::drive::Asked;
use crate::runner::drive::Forge;
use crate::runner::drive::Worked;
use crate::runner::git::Git;
use crate::runner::worktree;
use crate::store::Store;
use anyhow::{Context, Result};
use chrono::Utc;
use std::path::{Path, PathBuf};

/// Pushes the run's branch and opens its draft PR (once: a run that has one keeps it),
/// labels it, and moves the run to `pr`. Both are intents written before they are tried
/// (`push`, `opening` in the run's PR memory), after the check that the repository's git
/// data is as the worker's snapshot left it: a remote that is down or a GitHub failure
/// leaves the run `in_progress`, and the PR tick pushes the recorded commit again and opens
/// the PR later (or asks the owner after `max_effect_failures` tries).
pub(super) async fn open_pr(
    store: &dyn Store,
    forge: &Forge,
    settings: &RunnerSettings,
    task: &Task,
    run: &mut Run,
    wt: &worktree::Worktree,
    worked: &Worked,
) -> Result<Option<Asked>> {
    if settings.worktrees {
        if let Some(asked) = tampered(worked.baseline.as_ref()).await? {
            return Ok(Some(asked));
        }
    }
    let commit = full_head(settings, &wt.path)
        .await
        .with_context(|| format!("cannot read the commit of branch {} to push", wt.branch))?;
    let mut memory = opening::memory_of_run(store, run.id).await?;
    memory.push = Some(crate::core::pr::Push {
        branch: wt.branch.clone(),
        commit,
    });
    if run.pr_number.is_none() {
        memory.opening = Some(opening_of(settings, task, run, wt, worked));
    }
    opening::save_memory(store, settings.clock.as_ref(), run.id, &memory).await?;
    // The owner is asked by the PR tick's tries, so the run never waits on an escalation
    // it opened before it is left to the tick.
    let tried = opening::try_publish(store, settings, forge, run, memory, false).await?;
    if let opening::Tried::Failed {
        effect,
        error,
        failures,
        ..
    } = tried
    {
        tracing::warn!(gid = %task.task_gid, run = run.id, branch = %wt.branch, ?effect, failures, %error, "cannot push the branch or open its draft PR now; the run stays in progress, and the PR tick tries again");
    }
    Ok(None)
}

/// The draft PR a run opens for its verified change.
fn opening_of(
    settings: &RunnerSettings,
    task: &Task,
    run: &Run,
    wt: &worktree::Worktree,
    worked: &Worked,
) -> crate::core::pr::Opening {
    let summary = worked
        .done
        .as_deref()
        .and_then(|line| line.split_once(']').map(|(_, rest)| rest.trim()))
        .unwrap_or("");
    let body = format!(
        "{}\n\n---\nTask `{}` ({}), run {} of executor.{}",
        crate::core::task::body_of(task.description.as_deref().unwrap_or("")).trim(),
        task.task_gid,
        task.source.as_deref().unwrap_or("unknown source"),
        run.id,
        if summary.is_empty() {
            String::new()
        } else {
            format!("\n\nThe worker's summary: {summary}")
        }
    );
    crate::core::pr::Opening {
        title: task.title(),
        head: wt.branch.clone(),
        base: settings.base_branch.clone(),
        body,
    }
}

/// `git push <remote> <commit>:refs/heads/<branch>` of a recorded push, as the
/// orchestrator: the commit it made and checked, whatever the worktree holds now, so a
/// push again (idempotent: same branch, same commit) never sends anything newer. From the
/// run's worktree when it is still there, else from the repository (they share objects).
pub(super) async fn push_recorded(
    settings: &RunnerSettings,
    run: &Run,
    remote: &str,
    push: &crate::core::pr::Push,
) -> Result<()> {
    let worktree = run
        .worktree_path
        .as_deref()
        .map(PathBuf::from)
        .filter(|path| path.exists());
    let git = match &worktree {
        Some(path) => orchestrator_git(settings, path)?,
        None => Git::repository(&settings.repository),
    };
    let remote = remote.to_string();
    let refspec = format!("{}:refs/heads/{}", push.commit, push.branch);
    tokio::task::spawn_blocking(move || git.push(&remote, &refspec))
        .await?
        .with_context(|| format!("cannot push {} to {}", push.commit, push.branch))?;
    Ok(())
}

/// The worktree's `HEAD` commit, in full.
pub(super) async fn full_head(settings: &RunnerSettings, worktree: &Path) -> Option<String> {
    let git = orchestrator_git(settings, worktree).ok()?;
    tokio::task::spawn_blocking(move || {
        let out = git.output(&["rev-parse", "HEAD"]).ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    })
    .await
    .ok()
    .flatten()
}

/// Moves the run by `event` (its state machine, `core::run`) and saves it, as of `now`.
pub(super) async fn move_run(
    store: &dyn Store,
    run: &mut Run,
    event: RunEvent,
    now: chrono::DateTime<Utc>,
) -> Result<()> {
    run.state = next_state(&run.state, event)?;
    run.updated_at = now;
    store.save_run(run).await?;
    Ok(())
}

/// Ends the run by `outcome` through the one ending (`ops::end`): the run, its task's
/// move and the release of `holder`'s lease in one write, tried again while the store is
/// out of reach (`holder: None` keeps the lease, see [`Ending`]). `run` is the run as
/// written.
pub(super) async fn end(
    store: &dyn Store,
    settings: &RunnerSettings,
    run: &mut Run,
    origin: Origin,
    outcome: Outcome,
    holder: Option<&str>,
) -> Result<()> {
    let ending = Ending {
        origin,
        outcome,
        holder,
    };
    let clock = settings.clock.as_ref();
    let ended = patience::durably("the run's ending", run.id, || {
        let mut ending_run = run.clone();
        let ending = &ending;
        async move {
            end_run(store, clock, &mut ending_run, ending).await?;
            Ok(ending_run)
        }
    })
    .await?;
    *run = ended;
    Ok(())
}

/// Abandons the run with `why` (ended by `origin`, giving `holder`'s lease back): its task
/// goes back to the owner, who is told.
pub(super) async fn abandon(
    store: &dyn Store,
    settings: &RunnerSettings,
    run: &mut Run,
    origin: Origin,
    holder: &str,
    why: &str,
) -> Result<()> {
    end(
        store,
        settings,
        run,
        origin,
        Outcome::abandoned(why),
        Some(holder),
    )
    .await?;
    let gid = run.task_gid.clone();
    tracing::error!(gid = %gid, run = run.id, %why, "run abandoned; the task is back for the owner's review");
    settings
        .notices
        .tell_abandoned(
            store,
            crate::core::outbox::Priority::Action,
            &gid,
            run.id,
            why,
        )
        .await;
    Ok(())
}

/// Completes a run on the local forge, its work committed already: a subtask's work goes
/// into its parent's branch first (so the subtasks that depend on it start from it); its
/// carrier then ends the run complete, runs the record step and tells the owner. When the suites fail after that merge, the merge
/// is undone and their failure returned instead.
pub(super) async fn complete_local(
    store: &dyn Store,
    settings: &RunnerSettings,
    task: &Task,
    run: &mut Run,
    wt: &worktree::Worktree,
) -> Result<Option<String>> {
    let gid = task.task_gid.clone();
    if let Some(failed) =
        conduct::merge_into_parent(store, settings, &gid, run.id, &wt.branch).await?
    {
        return Ok(Some(failed));
    }
    // The local forge's "PR" is the commit already made: the carrier ends the run.
    Ok(None)
}

/// The record step for a run that completed in `worktree`.
pub(super) async fn record(
    store: &dyn Store,
    settings: &RunnerSettings,
    task: &Task,
    run: &Run,
    worktree: &Path,
    verification: Vec<String>,
) {
    let commit = if settings.worktrees {
        head_commit(settings, worktree).await
    } else {
        None
    };
    settings
        .recorder
        .record(
            store,
            &settings.notices,
            crate::runner::record::Completion {
                task,
                run,
                commit,
                verification,
                at: settings.clock.now(),
            },
        )
        .await;
}

/// What the local forge's verification checked, for the record.
pub(super) fn verified(settings: &RunnerSettings) -> Vec<String> {
    // `forge.verify` is one command's argv.
    if settings.verify.is_empty() {
        return Vec::new();
    }
    vec![format!("`{}`: passed", settings.verify.join(" "))]
}

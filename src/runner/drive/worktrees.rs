//! Worktrees of runs: made (or reused) for a run, removed once a finished run has kept
//! them long enough.

use super::conduct;
use super::RunnerSettings;
use crate::core::record::Run;
use crate::core::run::RunState;
use crate::core::task::Task;
use crate::runner::worktree;
use crate::store::Store;
use anyhow::Result;
use chrono::Utc;
use std::path::PathBuf;
use std::time::Duration;

pub(super) async fn prepare_worktree(
    store: &dyn Store,
    settings: &RunnerSettings,
    task: &Task,
) -> Result<worktree::Worktree> {
    if !settings.worktrees {
        return Ok(worktree::Worktree {
            path: settings.repository.clone(),
            branch: String::new(),
            reused: true,
            moved_aside: None,
        });
    }
    let branch = worktree::branch_name(&settings.branch_prefix, &task.task_gid, &task.title());
    let (repo, dir, base) = (
        settings.repository.clone(),
        settings.worktrees_dir.clone(),
        conduct::base_for(store, settings, task).await?,
    );
    Ok(
        tokio::task::spawn_blocking(move || worktree::ensure(&repo, &dir, &branch, &base))
            .await??,
    )
}

/// Whether a finished run's worktree has been kept long enough to be removed.
pub fn worktree_expired(run: &Run, now: chrono::DateTime<Utc>, keep: Duration) -> bool {
    let finished = matches!(run.state, RunState::Complete | RunState::Abandoned);
    let ended = run.completed_at.unwrap_or(run.updated_at);
    let keep = chrono::Duration::from_std(keep).unwrap_or(chrono::Duration::MAX);
    finished && run.worktree_path.is_some() && now - ended >= keep
}

/// Removes the worktrees of finished runs kept longer than `keep_worktrees` (the branches
/// stay). Returns how many were removed.
pub async fn clean_worktrees(store: &dyn Store, settings: &RunnerSettings) -> Result<usize> {
    let now = settings.clock.now();
    let mut removed = 0;
    let runs = store.runs(None).await?;
    for run in &runs {
        if !worktree_expired(run, now, settings.keep_worktrees) {
            continue;
        }
        // A later run of the same task works in the same place: its worktree is not ours.
        if runs
            .iter()
            .any(|other| other.id > run.id && other.worktree_path == run.worktree_path)
        {
            continue;
        }
        let Some(path) = run.worktree_path.as_deref().map(PathBuf::from) else {
            continue;
        };
        if !path.exists() {
            continue;
        }
        let repo = settings.repository.clone();
        let target = path.clone();
        match tokio::task::spawn_blocking(move || worktree::remove(&repo, &target)).await? {
            Ok(()) => {
                removed += 1;
                tracing::info!(run = run.id, worktree = %path.display(), "removed a finished run's worktree");
            }
            Err(error) => {
                tracing::warn!(run = run.id, %error, "cannot remove a finished run's worktree")
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed_now() -> chrono::DateTime<Utc> {
        chrono::DateTime::from_timestamp(1_790_000_000, 0).expect("a fixed time")
    }

    fn finished_run(state: RunState, ended_minutes_ago: i64) -> Run {
        let now = fixed_now();
        Run {
            id: 1,
            task_gid: "T-1".into(),
            worktree_path: Some("/w/x".into()),
            branch_name: Some("executor/T-1".into()),
            pr_url: None,
            pr_number: None,
            thread_id: None,
            started_at: None,
            updated_at: now,
            completed_at: Some(now - chrono::Duration::minutes(ended_minutes_ago)),
            state,
            ci_attempts: 0,
            worker_session_id: None,
            worker_last_update: None,
            worker_pid: None,
            worker_stuck_count: 0,
            lifecycle: None,
            lease_epoch: 0,
        }
    }

    #[test]
    fn only_finished_runs_past_the_retention_lose_their_worktree() {
        let hour = Duration::from_secs(3600);
        let now = fixed_now();
        assert!(worktree_expired(
            &finished_run(RunState::Complete, 61),
            now,
            hour
        ));
        assert!(worktree_expired(
            &finished_run(RunState::Abandoned, 61),
            now,
            hour
        ));
        assert!(!worktree_expired(
            &finished_run(RunState::Complete, 59),
            now,
            hour
        ));
        assert!(!worktree_expired(
            &finished_run(RunState::InProgress, 600),
            now,
            hour
        ));
        assert!(!worktree_expired(
            &finished_run(RunState::Pr, 600),
            now,
            hour
        ));
    }
}

//! The owner's `cancel` and `retry`: stop a run now, or start a fresh run of a task whose
//! last run ended.
//!
//! A cancel claims the run's lease whoever holds it, which raises the run's lease epoch:
//! the runner carrying the run sees that within a second, stops its worker and writes
//! nothing more for the run; the cancel then ends the run `abandoned` with the owner's
//! reason and gives the task back to the owner. It never signals a process itself, so it
//! works the same from another host.

use super::*;

/// What `cancel` ended.
#[derive(Debug, Clone)]
pub struct Cancelled {
    pub run: Run,
    /// The runner that carried the run when it was cancelled, if one did.
    pub carried_by: Option<String>,
}

/// Ends run `target` (a run id, or a task gid: its latest run) with `reason`, as `by`.
pub async fn cancel(
    store: &dyn Store,
    notices: &crate::chat::Notices,
    by: &crate::core::lease::Holder,
    target: &str,
    reason: &str,
) -> Result<Cancelled> {
    let mut run = find(store, target).await?;
    anyhow::ensure!(
        run.state.is_active(),
        "run {} of {} is already {}: there is nothing to cancel",
        run.id,
        run.task_gid,
        run.state
    );
    // Claim it from whoever carries it: their next look at the lease finds it gone.
    let carried_by = store.lease(run.id).await?.map(|lease| lease.holder);
    run.lease_epoch = store
        .take_lease(
            run.id,
            &by.id(),
            Utc::now(),
            lease_until(),
            carried_by.as_deref(),
        )
        .await?
        .with_context(|| format!("run {}'s lease changed hands meanwhile; try again", run.id))?;
    let why = format!("cancelled by the owner: {reason}");
    let ended = async {
        run.lifecycle = Some(lifecycle::RunView {
            stage: lifecycle::Stage::Ended { complete: false },
            ended_because: Some(why.clone()),
            ..view_of(&run)
        });
        run.worker_pid = None;
        move_run(store, &mut run, RunEvent::Abandoned).await?;
        let task = store.task(&run.task_gid).await?;
        if task.is_some_and(|t| t.status == QueueStatus::InProgress) {
            queue_ops::apply(
                store,
                &SystemClock,
                &run.task_gid,
                QueueEvent::RunAbandoned,
                "owner",
                Some(why.clone()),
            )
            .await?;
        }
        anyhow::Ok(())
    }
    .await;
    release_run(store, by, run.id).await;
    ended?;
    tracing::info!(gid = %run.task_gid, run = run.id, %why, "run cancelled");
    notices
        .tell(
            store,
            crate::chat::Notice::orchestrator(
                crate::core::outbox::Priority::Info,
                run.task_gid.clone(),
                Some(run.id),
                crate::chat::text::abandoned(notices.routing(), run.id, &run.task_gid, &why),
            ),
        )
        .await;
    Ok(Cancelled { run, carried_by })
}

/// Approves task `gid` again for a fresh run, once its last run has ended.
pub async fn retry(store: &dyn Store, gid: &str) -> Result<queue_ops::QueueMove> {
    let runs = store.runs(Some(gid)).await?;
    let Some(last) = runs.last() else {
        anyhow::bail!("task {gid} has no run yet: `executor go {gid}` starts its first");
    };
    anyhow::ensure!(
        !last.state.is_active(),
        "run {} of {gid} is still {}: `executor cancel {}` stops it first",
        last.id,
        last.state,
        last.id
    );
    let (moved, _) = queue_ops::apply(
        store,
        &SystemClock,
        gid,
        QueueEvent::Retry,
        "owner",
        Some(format!("a fresh run after run {}", last.id)),
    )
    .await?;
    Ok(moved)
}

/// The run `target` names: a run id, or a task gid (its latest run).
async fn find(store: &dyn Store, target: &str) -> Result<Run> {
    if let Ok(id) = target.parse::<i64>() {
        if let Some(run) = store.runs(None).await?.into_iter().find(|r| r.id == id) {
            return Ok(run);
        }
    }
    store
        .runs(Some(target))
        .await?
        .pop()
        .with_context(|| format!("no run and no task with a run is called `{target}`"))
}

/// Whether this runner still holds `run`'s claim (its lease epoch is unchanged).
pub(super) async fn still_ours(store: &dyn Store, run: &Run) -> Result<bool> {
    Ok(store
        .runs(Some(&run.task_gid))
        .await?
        .iter()
        .find(|r| r.id == run.id)
        .is_some_and(|r| r.lease_epoch == run.lease_epoch))
}

//! The owner's `cancel` and `retry`, from the CLI or the chat topic: stop a run now, or
//! start a fresh run of a task whose last run ended.
//!
//! A cancel claims the run's lease whoever holds it, which raises the run's lease epoch:
//! the runner carrying the run sees that within a second, stops its worker and writes
//! nothing more for the run; the cancel then ends the run `abandoned` with the owner's
//! reason and gives the task back to the owner. It never signals a process itself, so it
//! works the same from another host. Telling the owner is the caller's (the CLI tells the
//! chat, the chat answers in its topic).

use crate::core::clock::Clock;
use crate::core::ending::{Origin, Outcome};
use crate::core::lease::Holder;
use crate::core::queue::QueueEvent;
use crate::core::record::Run;
use crate::ops::end::{end_run, Ending};
use crate::ops::queue::{self as queue_ops, QueueMove};
use crate::store::Store;
use anyhow::{Context, Result};

/// Why `cancel` or `retry` did nothing.
#[derive(Debug, thiserror::Error)]
pub enum RunOpError {
    #[error("no run and no task with a run is called `{0}`")]
    NotFound(String),
    /// The run or task is not in a state the command applies to.
    #[error("{0}")]
    Conflict(String),
}

/// How long the cancel holds the run's claim at most (it gives it back at once).
const CLAIM: chrono::Duration = chrono::Duration::seconds(60);

/// What `cancel` ended.
#[derive(Debug, Clone)]
pub struct Cancelled {
    pub run: Run,
    /// The runner that carried the run when it was cancelled, if one did.
    pub carried_by: Option<String>,
    /// Why, as recorded with the run and its task.
    pub why: String,
}

/// Ends run `target` (a run id, or a task gid: its latest run) with `reason`, as `by`.
pub async fn cancel(
    store: &dyn Store,
    clock: &dyn Clock,
    by: &Holder,
    target: &str,
    reason: &str,
) -> Result<Cancelled> {
    let mut run = find(store, target).await?;
    if !run.state.is_active() {
        return Err(RunOpError::Conflict(format!(
            "run {} of {} is already {}: there is nothing to cancel",
            run.id, run.task_gid, run.state
        ))
        .into());
    }
    // Claim it from whoever carries it: their next look at the lease finds it gone.
    let carried_by = store.lease(run.id).await?.map(|lease| lease.holder);
    let now = clock.now();
    run.lease_epoch = store
        .take_lease(run.id, &by.id(), now, now + CLAIM, carried_by.as_deref())
        .await?
        .with_context(|| format!("run {}'s lease changed hands meanwhile; try again", run.id))?;
    let why = format!("{}: {reason}", crate::core::ending::CANCELLED_BY_OWNER);
    let holder = by.id();
    if let Err(error) = end(store, clock, &mut run, &holder, &why).await {
        // Ended or not, the claim goes back; a lease that cannot be given back expires.
        if let Err(error) = store.release_lease(run.id, &holder).await {
            tracing::warn!(run = run.id, %error, "cannot give the cancelled run's lease back; it expires on its own");
        }
        return Err(error);
    }
    tracing::info!(gid = %run.task_gid, run = run.id, %why, "run cancelled");
    Ok(Cancelled {
        run,
        carried_by,
        why,
    })
}

/// Ends the cancelled run through the one ending, under the claim the cancel took.
async fn end(
    store: &dyn Store,
    clock: &dyn Clock,
    run: &mut Run,
    holder: &str,
    why: &str,
) -> Result<()> {
    let ending = Ending {
        origin: Origin::Owner,
        outcome: Outcome::abandoned(why),
        holder: Some(holder),
    };
    end_run(store, clock, run, &ending).await?;
    Ok(())
}

/// Approves task `gid` again for a fresh run, once its last run has ended.
pub async fn retry(store: &dyn Store, clock: &dyn Clock, gid: &str) -> Result<QueueMove> {
    let runs = store.runs(Some(gid)).await?;
    let Some(last) = runs.last() else {
        return Err(RunOpError::Conflict(format!(
            "task {gid} has no run yet: `executor go {gid}` starts its first"
        ))
        .into());
    };
    if last.state.is_active() {
        return Err(RunOpError::Conflict(format!(
            "run {} of {gid} is still {}: `executor cancel {}` stops it first",
            last.id, last.state, last.id
        ))
        .into());
    }
    let (moved, _) = queue_ops::apply(
        store,
        clock,
        gid,
        QueueEvent::Retry,
        "owner",
        Some(format!("a fresh run after run {}", last.id)),
    )
    .await?;
    Ok(moved)
}

/// This process, as a lease names its holder.
pub fn this_process() -> Holder {
    let pid = std::process::id();
    Holder {
        host: gethostname::gethostname().to_string_lossy().into_owned(),
        pid,
        start: crate::supervisor::group::start_time(pid),
    }
}

/// The run `target` names: a run id, or a task gid (its latest run).
async fn find(store: &dyn Store, target: &str) -> Result<Run> {
    if let Ok(id) = target.parse::<i64>() {
        if let Some(run) = store.run(id).await? {
            return Ok(run);
        }
    }
    match store.runs(Some(target)).await?.pop() {
        Some(run) => Ok(run),
        None => Err(RunOpError::NotFound(target.to_string()).into()),
    }
}

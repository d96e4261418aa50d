//! Putting work into the queue and moving it along the queue machine.

use thiserror::Error;

use crate::core::clock::Clock;
use crate::core::queue::{next_status, IllegalQueueMove, QueueEvent};
use crate::core::record::{NewEvent, StatusChange};
use crate::core::task::{NewTask, Task, UpsertOutcome};
use crate::store::{Store, StoreError};

#[derive(Debug, Error)]
pub enum QueueOpError {
    #[error("no task with gid `{0}` (see `executor queue`)")]
    NotFound(String),
    #[error("task `{gid}`: {reason}")]
    Illegal {
        gid: String,
        reason: IllegalQueueMove,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Adds a task, or updates it when its gid is already queued.
pub async fn add(
    store: &dyn Store,
    clock: &dyn Clock,
    new: &NewTask,
    actor: &str,
) -> Result<(Task, UpsertOutcome), QueueOpError> {
    Ok(store.upsert_task(new, actor, clock.now()).await?)
}

/// Applies `event` to task `gid`: the queue machine decides, the store records. A status
/// that changed between the read and the write (another process got there first) is read
/// again and decided again.
pub async fn apply(
    store: &dyn Store,
    clock: &dyn Clock,
    gid: &str,
    event: QueueEvent,
    actor: &str,
    detail: Option<String>,
) -> Result<(QueueMove, Task), QueueOpError> {
    const ATTEMPTS: usize = 3;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let task = store
            .task(gid)
            .await?
            .ok_or_else(|| QueueOpError::NotFound(gid.to_string()))?;
        match try_move(store, clock, &task, event, actor, &detail).await? {
            Moved::Done(done) => return Ok(*done),
            Moved::Conflict(_) if attempt < ATTEMPTS => continue,
            Moved::Conflict(conflict) => return Err(conflict.into()),
        }
    }
}

/// The move the queue machine decides for `event` from `task`'s status as read, to be
/// written only if the task still has that status.
fn change_of(
    task: &Task,
    event: QueueEvent,
    actor: &str,
    detail: &Option<String>,
    clock: &dyn Clock,
) -> Result<StatusChange, QueueOpError> {
    let to = next_status(&task.status, event).map_err(|reason| QueueOpError::Illegal {
        gid: task.task_gid.clone(),
        reason,
    })?;
    Ok(StatusChange {
        task_gid: task.task_gid.clone(),
        from: task.status.clone(),
        to,
        event: NewEvent {
            kind: event.name().to_string(),
            actor: actor.to_string(),
            detail: detail.clone(),
            at: clock.now(),
        },
    })
}

/// A runner's claim of `task` (as read): moved to `in_progress` by the queue machine and
/// given its new run, leased to `holder` until `until`, in one write. `None` when the task
/// moved since it was read (another runner claimed it, or the owner moved it): nothing is
/// written.
pub async fn claim(
    store: &dyn Store,
    clock: &dyn Clock,
    task: &Task,
    actor: &str,
    holder: &str,
    until: chrono::DateTime<chrono::Utc>,
) -> Result<Option<(Task, crate::core::record::Run)>, QueueOpError> {
    let change = change_of(task, QueueEvent::RunStarted, actor, &None, clock)?;
    match store.claim_task(&change, holder, until).await {
        Ok(claimed) => Ok(Some(claimed)),
        Err(StoreError::StatusConflict { .. }) => Ok(None),
        Err(StoreError::TaskNotFound(gid)) => Err(QueueOpError::NotFound(gid)),
        Err(e) => Err(e.into()),
    }
}

/// A carried run's last write: `run` saved, its task (as read in `task`) moved by
/// `event`, and `holder`'s lease of the run released, in one transaction. A task that
/// moved since it was read is read and decided again: then the run is saved first and the
/// task moved after, as [`apply`] moves it. [`StoreError::Fenced`] (through
/// [`QueueOpError::Store`]) when the run's lease is gone: nothing is written.
pub async fn settle_run(
    store: &dyn Store,
    clock: &dyn Clock,
    run: &crate::core::record::Run,
    task: &Task,
    event: QueueEvent,
    actor: &str,
    holder: &str,
) -> Result<Task, QueueOpError> {
    let change = change_of(task, event, actor, &None, clock);
    if let Ok(change) = &change {
        match store.settle_run(run, change, holder).await {
            Ok(task) => return Ok(task),
            Err(StoreError::StatusConflict { .. }) => {}
            Err(StoreError::TaskNotFound(gid)) => return Err(QueueOpError::NotFound(gid)),
            Err(e) => return Err(e.into()),
        }
    }
    store.save_run(run).await?;
    let moved = match apply(store, clock, &task.task_gid, event, actor, None).await {
        Ok((_, moved)) => moved,
        // The task is where the move would take it: an earlier try of this write landed
        // and its answer was lost.
        Err(illegal @ QueueOpError::Illegal { .. }) => {
            match (store.task(&task.task_gid).await?, &change) {
                (Some(now), Ok(change)) if now.status == change.to => now,
                _ => return Err(illegal),
            }
        }
        Err(e) => return Err(e),
    };
    store.release_lease(run.id, holder).await?;
    Ok(moved)
}

/// One try: the move the machine decides from `task`'s status, written only if the task
/// still has that status.
enum Moved {
    Done(Box<(QueueMove, Task)>),
    /// The store's [`StoreError::StatusConflict`].
    Conflict(StoreError),
}

async fn try_move(
    store: &dyn Store,
    clock: &dyn Clock,
    task: &Task,
    event: QueueEvent,
    actor: &str,
    detail: &Option<String>,
) -> Result<Moved, QueueOpError> {
    let change = change_of(task, event, actor, detail, clock)?;
    match store.change_status(&change).await {
        Ok(task) => Ok(Moved::Done(Box::new((
            QueueMove {
                from: change.from,
                to: change.to,
            },
            task,
        )))),
        Err(conflict @ StoreError::StatusConflict { .. }) => Ok(Moved::Conflict(conflict)),
        Err(StoreError::TaskNotFound(gid)) => Err(QueueOpError::NotFound(gid)),
        Err(e) => Err(e.into()),
    }
}

/// The status a task left and the one it reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMove {
    pub from: crate::core::queue::QueueStatus,
    pub to: crate::core::queue::QueueStatus,
}

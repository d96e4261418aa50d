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

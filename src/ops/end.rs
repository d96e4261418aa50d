//! The one operation that ends a run, for every path a run ends by: the local forge, the
//! PR, a dispatched worker, the conductor's parent, the owner's cancel.
//!
//! The core decides the run as ended and its task's move (`core::ending`); the store
//! writes the run, the move and the release of the run's lease as one transaction
//! (`Store::end_run`), so a crash or a fence leaves all of it or none of it. What the
//! ending owes outside (the record step, the owner's notice, a PR comment) is the
//! caller's, after this write: this module never tells anyone anything.

use thiserror::Error;

use crate::core::clock::Clock;
use crate::core::ending::{ended, task_move, Origin, Outcome};
use crate::core::record::{NewEvent, Run, StatusChange};
use crate::core::run::IllegalRunMove;
use crate::core::task::Task;
use crate::store::{Store, StoreError};

/// How a run ends, and whose lease of it the ending gives back.
#[derive(Debug, Clone)]
pub struct Ending<'a> {
    pub origin: Origin,
    pub outcome: Outcome,
    /// The lease holder whose lease the ending gives back (the runner, or the owner's
    /// cancel that claimed it); `None` keeps it, for a caller that owes more under it (the
    /// PR tick, which posts the completion's comment before it lets the run go).
    pub holder: Option<&'a str>,
}

#[derive(Debug, Error)]
pub enum EndError {
    #[error("run {run}: {source}")]
    Illegal {
        run: i64,
        #[source]
        source: IllegalRunMove,
    },
    #[error("run {run} has no task `{gid}`")]
    NoTask { run: i64, gid: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl EndError {
    /// The run's lease is gone: another runner (or the owner's cancel) has the run.
    pub fn is_fenced(&self) -> bool {
        matches!(self, EndError::Store(StoreError::Fenced { .. }))
    }
}

/// Ends `run` by `ending`, in one write: the run as ended, its task moved (from its status
/// as read now, when the queue machine has that move), the lease released. A task that
/// moves between the read and the write is read and decided again. On success `run` is
/// the run as written, and the task is returned when it moved. An ending tried again after
/// it landed lands once: the run is ended already and the task is where it goes.
pub async fn end_run(
    store: &dyn Store,
    clock: &dyn Clock,
    run: &mut Run,
    ending: &Ending<'_>,
) -> Result<Option<Task>, EndError> {
    const ATTEMPTS: usize = 3;
    let now = clock.now();
    let ended = ended(run, &ending.outcome, now).map_err(|source| EndError::Illegal {
        run: run.id,
        source,
    })?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let task = store
            .task(&run.task_gid)
            .await?
            .ok_or_else(|| EndError::NoTask {
                run: run.id,
                gid: run.task_gid.clone(),
            })?;
        let change = task_move(&task.status, &ending.outcome).map(|to| StatusChange {
            task_gid: task.task_gid.clone(),
            from: task.status.clone(),
            to,
            event: NewEvent {
                kind: ending.outcome.task_event().name().to_string(),
                actor: ending.origin.actor().to_string(),
                detail: ending.outcome.detail(),
                at: now,
            },
        });
        match store.end_run(&ended, change.as_ref(), ending.holder).await {
            Ok(moved) => {
                *run = ended;
                return Ok(moved);
            }
            Err(StoreError::StatusConflict { .. }) if attempt < ATTEMPTS => continue,
            Err(error) => return Err(error.into()),
        }
    }
}

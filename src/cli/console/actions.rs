//! The owner's actions from the console (go, skip, retry, cancel, decide): one code path
//! for the JSON API and the pages' forms, through the same operations as the CLI and the
//! chat, each waking the daemon like them. What an action did, or why it did nothing, is a
//! value: the API renders it as JSON with a status code, a page as a sentence.
//!
//! Never a second way to move a task or answer an escalation: every change goes through
//! `ops` and the store's once-only resolution.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::core::clock::{Clock, SystemClock};
use crate::core::queue::QueueEvent;
use crate::core::record::{Decision, Resolved};
use crate::ops::queue::{self as queue_ops, QueueOpError};
use crate::ops::run::RunOpError;
use crate::store::wake::{self, Wake};
use crate::store::Store;

/// Who asks, as the task's history and the escalation's answer name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The owner, on a page or through the JSON API.
    Console,
    /// An MCP client (`executor mcp`).
    Mcp,
}

impl Via {
    fn actor(self) -> &'static str {
        match self {
            Via::Console => "owner",
            Via::Mcp => "mcp",
        }
    }

    fn note(self) -> &'static str {
        match self {
            Via::Console => "from the console",
            Via::Mcp => "from an MCP client",
        }
    }

    fn answered_by(self) -> &'static str {
        match self {
            Via::Console => "owner (console)",
            Via::Mcp => "mcp",
        }
    }
}

/// What an action changed.
#[derive(Debug)]
pub enum Done {
    /// A task moved from one status to another.
    Moved {
        gid: String,
        from: String,
        to: String,
    },
    /// A run was cancelled.
    Cancelled {
        run_id: i64,
        gid: String,
        state: String,
        why: String,
    },
    /// The owner's answer to an escalation was recorded.
    Answered(Box<Decision>),
}

/// Why an action changed nothing.
#[derive(Debug)]
pub enum Refused {
    BadRequest(String),
    /// A form without this console's CSRF token.
    Forbidden(String),
    NotFound(String),
    /// The state is not the one the action answers: a stale or repeated click.
    Conflict(String),
    Unavailable(String),
    Internal(String),
}

pub type Outcome = Result<Done, Refused>;

impl Done {
    /// The API's answer (the documents the API has always sent).
    pub fn to_json(&self) -> Value {
        match self {
            Done::Moved { gid, from, to } => json!({ "task_gid": gid, "from": from, "to": to }),
            Done::Cancelled {
                run_id,
                gid,
                state,
                why,
            } => json!({ "run_id": run_id, "task_gid": gid, "state": state, "why": why }),
            Done::Answered(d) => serde_json::to_value(d).unwrap_or(Value::Null),
        }
    }

    /// The page's sentence.
    pub fn sentence(&self) -> String {
        match self {
            Done::Moved { gid, from, to } => format!("Task {gid} moved from {from} to {to}."),
            Done::Cancelled { run_id, gid, .. } => format!("Run {run_id} of {gid} cancelled."),
            Done::Answered(d) => {
                let answer = d.resolution.as_deref().unwrap_or("answered");
                let verb = if answer == "approve" {
                    "approved"
                } else {
                    "denied"
                };
                format!("Escalation {} {verb}; the run goes on.", d.id)
            }
        }
    }
}

impl Refused {
    pub fn status(&self) -> StatusCode {
        match self {
            Refused::BadRequest(_) => StatusCode::BAD_REQUEST,
            Refused::Forbidden(_) => StatusCode::FORBIDDEN,
            Refused::NotFound(_) => StatusCode::NOT_FOUND,
            Refused::Conflict(_) => StatusCode::CONFLICT,
            Refused::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Refused::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Refused::BadRequest(m)
            | Refused::Forbidden(m)
            | Refused::NotFound(m)
            | Refused::Conflict(m)
            | Refused::Unavailable(m)
            | Refused::Internal(m) => m,
        }
    }

    /// Not found, a conflict with the current state, or the store failing, from the
    /// error's kind.
    pub fn from_error(error: anyhow::Error) -> Self {
        let text = format!("{error:#}");
        match (
            error.downcast_ref::<QueueOpError>(),
            error.downcast_ref::<RunOpError>(),
        ) {
            (Some(QueueOpError::NotFound(_)), _) | (_, Some(RunOpError::NotFound(_))) => {
                Refused::NotFound(text)
            }
            (Some(QueueOpError::Illegal { .. }), _) | (_, Some(RunOpError::Conflict(_))) => {
                Refused::Conflict(text)
            }
            _ if error.downcast_ref::<crate::store::StoreError>().is_some() => {
                Refused::Unavailable(text)
            }
            _ => Refused::Internal(text),
        }
    }
}

async fn owner_move(store: &dyn Store, gid: &str, event: QueueEvent, via: Via) -> Outcome {
    let (step, _) = queue_ops::apply(
        store,
        &SystemClock,
        gid,
        event,
        via.actor(),
        Some(via.note().to_string()),
    )
    .await
    .map_err(|e| Refused::from_error(e.into()))?;
    wake::notify(store, Wake::Queue).await;
    Ok(Done::Moved {
        gid: gid.to_string(),
        from: step.from.to_string(),
        to: step.to.to_string(),
    })
}

/// The owner's go: a run waiting at the integration gate is integrated, as in the CLI;
/// otherwise the task is approved.
pub async fn go(store: &dyn Store, gid: &str, via: Via) -> Outcome {
    let decisions = store
        .decisions(gid)
        .await
        .map_err(|e| Refused::from_error(e.into()))?;
    let gate = decisions
        .into_iter()
        .find(|d| d.is_pending() && d.action == crate::runner::drive::INTEGRATE);
    match gate {
        Some(gate) => decide(store, gate.id, "approve", Some("go"), via).await,
        None => owner_move(store, gid, QueueEvent::Go, via).await,
    }
}

pub async fn skip(store: &dyn Store, gid: &str, via: Via) -> Outcome {
    owner_move(store, gid, QueueEvent::Skip, via).await
}

pub async fn retry(store: &dyn Store, gid: &str) -> Outcome {
    let step = crate::ops::run::retry(store, &SystemClock, gid)
        .await
        .map_err(Refused::from_error)?;
    wake::notify(store, Wake::Queue).await;
    Ok(Done::Moved {
        gid: gid.to_string(),
        from: step.from.to_string(),
        to: step.to.to_string(),
    })
}

pub async fn cancel(store: &dyn Store, target: &str, reason: Option<&str>, via: Via) -> Outcome {
    let unsaid = format!("no reason given ({})", via.note());
    let reason = reason.filter(|r| !r.trim().is_empty()).unwrap_or(&unsaid);
    let done = crate::ops::run::cancel(
        store,
        &SystemClock,
        &crate::ops::run::this_process(),
        target,
        reason,
    )
    .await
    .map_err(Refused::from_error)?;
    wake::notify(store, Wake::Queue).await;
    Ok(Done::Cancelled {
        run_id: done.run.id,
        gid: done.run.task_gid,
        state: done.run.state.as_str().to_string(),
        why: done.why,
    })
}

/// Records the owner's answer to escalation `id`, once: a repeated or stale click changes
/// nothing and says so.
pub async fn decide(
    store: &dyn Store,
    id: i64,
    answer: &str,
    note: Option<&str>,
    via: Via,
) -> Outcome {
    if !matches!(answer, "approve" | "deny") {
        return Err(Refused::BadRequest(
            "`answer` is approve or deny".to_string(),
        ));
    }
    let note = note.filter(|n| !n.trim().is_empty());
    let resolved = store
        .resolve_escalation(id, answer, note, via.answered_by(), SystemClock.now())
        .await
        .map_err(|e| Refused::from_error(e.into()))?;
    match resolved {
        None => Err(Refused::NotFound(format!("no escalation {id}"))),
        Some(Resolved::NotAnEscalation(_)) => Err(Refused::Conflict(format!(
            "decision {id} is not an escalation"
        ))),
        Some(Resolved::AlreadyResolved(d)) => Err(Refused::Conflict(format!(
            "escalation {id} was already answered: {}{}",
            d.resolution.as_deref().unwrap_or("?"),
            d.resolved_by
                .as_deref()
                .map(|by| format!(" by {by}"))
                .unwrap_or_default()
        ))),
        Some(Resolved::Recorded(d)) => {
            wake::notify(store, Wake::Answer).await;
            Ok(Done::Answered(Box::new(d)))
        }
    }
}

//! The other rows the store keeps: runs, the history of a task, decisions, intake errors and
//! component heartbeats. Plain data; field names are column names.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::queue::QueueStatus;
use super::run::RunState;

/// One row of `executor_runs` (docs/design.md §4).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    pub id: i64,
    pub task_gid: String,
    pub worktree_path: Option<String>,
    pub branch_name: Option<String>,
    pub pr_url: Option<String>,
    pub pr_number: Option<i64>,
    pub thread_id: Option<String>,
    #[serde(serialize_with = "crate::time::serde_utc::optional")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub updated_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serde_utc::optional")]
    pub completed_at: Option<DateTime<Utc>>,
    pub state: RunState,
    pub ci_attempts: i64,
    pub worker_session_id: Option<String>,
    #[serde(serialize_with = "crate::time::serde_utc::optional")]
    pub worker_last_update: Option<DateTime<Utc>>,
    pub worker_pid: Option<i64>,
    pub worker_stuck_count: i64,
    /// The run's lifecycle (stage and counters), as the engine stored it; `None` for a run
    /// from before executor kept one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<crate::lifecycle::RunView>,
    /// The epoch of the lease this copy was claimed under: a save of it lands only while
    /// the run's epoch is still this one.
    #[serde(skip)]
    pub lease_epoch: i64,
}

/// One entry of a task's history (`executor_events`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskEvent {
    pub id: i64,
    pub task_gid: String,
    pub run_id: Option<i64>,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub at: DateTime<Utc>,
    /// What happened: `added`, `updated`, or a queue event name (`go`, `skip`, ...).
    pub kind: String,
    pub from_status: Option<String>,
    pub to_status: Option<String>,
    /// Who made it happen: `owner`, `cli`, a source name, `analyzer`, `runner`.
    pub actor: String,
    pub detail: Option<String>,
}

/// An event about to be recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub kind: String,
    pub actor: String,
    pub detail: Option<String>,
    pub at: DateTime<Utc>,
}

/// A status change decided by the queue machine, applied by the store only if the task is
/// still in `from` (compare-and-set), together with its history entry.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusChange {
    pub task_gid: String,
    pub from: QueueStatus,
    pub to: QueueStatus,
    pub event: NewEvent,
}

/// One approve / deny / escalate decision (`executor_decisions`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub id: i64,
    pub task_gid: Option<String>,
    pub run_id: Option<i64>,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub at: DateTime<Utc>,
    pub role: String,
    pub action: String,
    pub decision: String,
    pub rule_id: Option<String>,
    pub detail: Option<String>,
    #[serde(serialize_with = "crate::time::serde_utc::optional")]
    pub resolved_at: Option<DateTime<Utc>>,
    /// The owner's answer to an escalation: `approve` or `deny`.
    pub resolution: Option<String>,
    /// What the owner said with the answer.
    pub resolution_note: Option<String>,
    /// Who answered (`owner`, a chat handle, `cli`).
    pub resolved_by: Option<String>,
    /// When the answer was carried out (the worker resumed or told); set once.
    #[serde(serialize_with = "crate::time::serde_utc::optional")]
    pub applied_at: Option<DateTime<Utc>>,
    /// The agent's tool call the decision answers, when it came from a permission hook.
    pub tool_use_id: Option<String>,
    /// The worker messages that led to the decision: a JSON array, as text (and as that
    /// array in JSON output, never a string inside the JSON).
    #[serde(serialize_with = "embedded_json")]
    pub message_window: Option<String>,
    /// Whether the worker the decision was made for ran inside the wall (docs/design.md
    /// §6 and §11): `None` when not known (decisions recorded before executor kept it, and those
    /// made for no worker: the owner's, the conductor's).
    pub confined: Option<bool>,
}

/// Text that holds JSON, written as that JSON; text that does not parse is written as the
/// string it is, so nothing stored is lost from the output.
fn embedded_json<S: serde::Serializer>(text: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match text
        .as_deref()
        .map(serde_json::from_str::<serde_json::Value>)
    {
        None => s.serialize_none(),
        Some(Ok(value)) => serde::Serialize::serialize(&value, s),
        Some(Err(_)) => s.serialize_some(text),
    }
}

impl Decision {
    /// A decision left to the owner (`decision = 'escalate'`).
    pub fn is_escalation(&self) -> bool {
        self.decision == "escalate"
    }

    /// An escalation the owner has not answered yet.
    pub fn is_pending(&self) -> bool {
        self.is_escalation() && self.resolved_at.is_none()
    }
}

/// What `Store::resolve_escalation` (the store crate) did.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// The answer was recorded; the decision as it now stands.
    Recorded(Decision),
    /// Someone answered first; the decision with their answer, unchanged.
    AlreadyResolved(Decision),
    /// The decision is not an escalation (an approve or a deny); unchanged.
    NotAnEscalation(Decision),
}

/// Who carries a run, until when (`executor_run_leases`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lease {
    pub run_id: i64,
    /// `host:pid:start_time` of the runner process.
    pub holder: String,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub expires_at: DateTime<Utc>,
}

/// A decision about to be recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDecision {
    pub task_gid: Option<String>,
    pub run_id: Option<i64>,
    pub at: DateTime<Utc>,
    pub role: String,
    pub action: String,
    pub decision: String,
    pub rule_id: Option<String>,
    pub detail: Option<String>,
    pub tool_use_id: Option<String>,
    /// A JSON array, as text.
    pub message_window: Option<String>,
    /// Whether the worker ran inside the wall; `None` when no worker's posture applies or it
    /// is not known (see [`Decision::confined`]).
    pub confined: Option<bool>,
}

/// A worker message about to be recorded (`executor_messages`, docs/design.md §5).
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    pub run_id: i64,
    pub task_gid: String,
    pub at: DateTime<Utc>,
    /// Where it came from: `worker`, `orchestrator` or `chat`.
    pub source: String,
    /// `REQUEST`, `STATUS`, `DONE`, `ESCALATE`, `ACKNOWLEDGED`.
    pub tag: String,
    pub kind: String,
    /// The `key=value` pairs: a JSON object, as text.
    pub args: String,
    pub text: String,
    /// The line as it was received.
    pub line: String,
}

/// One recorded worker message (`executor_messages`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredMessage {
    pub id: i64,
    pub run_id: i64,
    pub task_gid: String,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub at: DateTime<Utc>,
    pub source: String,
    pub tag: String,
    pub kind: String,
    /// A JSON object, as text.
    pub args: String,
    pub text: String,
    pub line: String,
}

/// A done task whose text changed since the run that did it (`executor status` lists it
/// with the command to run it again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangedTask {
    pub task_gid: String,
    /// The task's latest run, which worked on the older text.
    pub run_id: i64,
}

/// An input a source could not turn into a task (a malformed plan note), kept until the
/// input is fixed or gone (`executor_intake_errors`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IntakeError {
    pub source: String,
    pub path: String,
    pub reason: String,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub first_seen: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub last_seen: DateTime<Utc>,
}

/// The last sign of life of a long-running component (`executor_heartbeats`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Heartbeat {
    pub component: String,
    pub host: String,
    pub pid: i64,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub started_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub beat_at: DateTime<Utc>,
    /// Set when the component shut down cleanly.
    #[serde(serialize_with = "crate::time::serde_utc::optional")]
    pub stopped_at: Option<DateTime<Utc>>,
}

/// What `executor status` reports, read in one go.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoreSummary {
    /// Tasks per status, in queue order, known statuses always present.
    pub queue: Vec<(QueueStatus, i64)>,
    pub live_workers: i64,
    pub pending_escalations: i64,
    pub intake_errors: Vec<IntakeError>,
    pub heartbeats: Vec<Heartbeat>,
    /// The last error of each component that met one since it started.
    pub component_errors: Vec<ComponentError>,
}

/// The last error a component (`daemon`, `analyzer`) met since it started, with when and
/// how many it has met.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComponentError {
    pub component: String,
    pub host: String,
    pub message: String,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub at: DateTime<Utc>,
    pub count: i64,
}

/// How a worker ended, for its record (`executor_workers.ended_at`, `outcome`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerEnd {
    /// The worker's record.
    pub id: i64,
    pub at: DateTime<Utc>,
    pub outcome: String,
}

/// One worker process (`executor_workers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerRecord {
    pub id: i64,
    pub run_id: i64,
    pub phase: String,
    pub host: String,
    /// Also its process group: every worker leads its own.
    pub pid: i64,
    /// The process's start time (clock ticks since boot), so a reused pid is never taken
    /// for the worker.
    pub start_time: Option<i64>,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub started_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serde_utc::optional")]
    pub ended_at: Option<DateTime<Utc>>,
    pub outcome: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decisions_message_window_is_json_in_json_output() {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let mut decision = Decision {
            id: 1,
            task_gid: None,
            run_id: None,
            at,
            role: "worker".into(),
            action: "needs_decision".into(),
            decision: "escalate".into(),
            rule_id: None,
            detail: None,
            resolved_at: None,
            resolution: None,
            resolution_note: None,
            resolved_by: None,
            applied_at: None,
            tool_use_id: None,
            message_window: Some(r#"[{"line":"[STATUS:x] y"}]"#.into()),
            confined: None,
        };
        let json = serde_json::to_value(&decision).unwrap();
        assert_eq!(json["message_window"][0]["line"], "[STATUS:x] y");
        decision.message_window = Some("not json".into());
        assert_eq!(
            serde_json::to_value(&decision).unwrap()["message_window"],
            "not json"
        );
        decision.message_window = None;
        assert!(serde_json::to_value(&decision).unwrap()["message_window"].is_null());
    }
}

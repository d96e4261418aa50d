//! The row mapping both stores share: how a row of each table becomes the model's type.
//!
//! A backend only says how it reads one cell of a type ([`Cells`]: an integer, a text, a
//! time, …); which column holds which field, and how a stored word becomes the model's
//! enum, is written here once, so a column is added in one place for SQLite and Postgres.
//! The column lists stay with each backend: Postgres casts an adopted database's columns
//! to the types read here, SQLite needs no casts.
//!
//! What it must never do: name a backend, or write anything.

use chrono::{DateTime, Utc};

use executor_core::net_refusals::{NetRefusal, Refused};
use executor_core::outbox::{OutboxBacklog, Outgoing, Priority};
use executor_core::queue::QueueStatus;
use executor_core::record::{
    ComponentError, Decision, Heartbeat, IntakeError, Lease, Run, StoredMessage, TaskEvent,
    WorkerRecord,
};
use executor_core::run::RunState;
use executor_core::spend::{Spend, SpendRow};
use executor_core::task::Task;
use executor_core::tree::{AgentSession, TaskDependency, TaskLink};
use executor_core::usage_limit::AgentPause;

/// One row of a backend, read cell by cell.
pub(crate) trait Cells {
    type Error;
    fn int(&self, index: usize) -> Result<Option<i64>, Self::Error>;
    fn real(&self, index: usize) -> Result<Option<f64>, Self::Error>;
    fn flag(&self, index: usize) -> Result<Option<bool>, Self::Error>;
    fn text(&self, index: usize) -> Result<Option<String>, Self::Error>;
    fn time(&self, index: usize) -> Result<Option<DateTime<Utc>>, Self::Error>;
    /// The error for a cell that holds what its field cannot take (`why`), or nothing
    /// where the field needs a value.
    fn bad(&self, index: usize, why: String) -> Self::Error;

    /// The cell at `index` as the field's type.
    fn get<T: Cell>(&self, index: usize) -> Result<T, Self::Error>
    where
        Self: Sized,
    {
        T::read(self, index)
    }
}

/// A field's type, read from one cell of either backend.
pub(crate) trait Cell: Sized {
    fn read<R: Cells>(row: &R, index: usize) -> Result<Self, R::Error>;
}

/// A cell that must hold a value.
fn needed<R: Cells, T>(row: &R, index: usize, value: Option<T>) -> Result<T, R::Error> {
    value.ok_or_else(|| row.bad(index, "no value".to_string()))
}

macro_rules! cells {
    ($($t:ty => $read:ident),* $(,)?) => {$(
        impl Cell for Option<$t> {
            fn read<R: Cells>(row: &R, index: usize) -> Result<Self, R::Error> {
                row.$read(index)
            }
        }
        impl Cell for $t {
            fn read<R: Cells>(row: &R, index: usize) -> Result<Self, R::Error> {
                let value = row.$read(index)?;
                needed(row, index, value)
            }
        }
    )*};
}

cells!(
    i64 => int,
    f64 => real,
    bool => flag,
    String => text,
    DateTime<Utc> => time,
);

impl Cell for u32 {
    fn read<R: Cells>(row: &R, index: usize) -> Result<Self, R::Error> {
        let value: i64 = row.get(index)?;
        u32::try_from(value).map_err(|_| row.bad(index, format!("{value} is not a count")))
    }
}

pub(crate) fn task<R: Cells>(row: &R) -> Result<Task, R::Error> {
    Ok(Task {
        id: row.get(0)?,
        task_gid: row.get(1)?,
        added_at: row.get(2)?,
        updated_at: row.get(3)?,
        source: row.get(4)?,
        description: row.get(5)?,
        notes: row.get(6)?,
        status: QueueStatus::from_column(row.get::<Option<String>>(7)?.as_deref()),
        priority: row.get(8)?,
        complexity: row.get(9)?,
        feasibility: row.get(10)?,
        analysis_summary: row.get(11)?,
        executor_run_id: row.get(12)?,
    })
}

pub(crate) fn run<R: Cells>(row: &R) -> Result<Run, R::Error> {
    Ok(Run {
        id: row.get(0)?,
        task_gid: row.get(1)?,
        worktree_path: row.get(2)?,
        branch_name: row.get(3)?,
        pr_url: row.get(4)?,
        pr_number: row.get(5)?,
        thread_id: row.get(6)?,
        started_at: row.get(7)?,
        updated_at: row.get(8)?,
        completed_at: row.get(9)?,
        state: RunState::from_column(&row.get::<String>(10)?),
        ci_attempts: row.get(11)?,
        worker_session_id: row.get(12)?,
        worker_last_update: row.get(13)?,
        worker_pid: row.get(14)?,
        worker_stuck_count: row.get(15)?,
        lifecycle: crate::lifecycle_from_column(row.get::<Option<String>>(16)?.as_deref()),
        lease_epoch: row.get(17)?,
    })
}

/// The columns [`spend`] reads, and their tables (the same SQL in both dialects).
pub(crate) const SPEND_SELECT: &str =
    "SELECT w.id, w.run_id, r.task_gid, w.agent, COALESCE(w.ended_at, w.started_at), \
     w.input_tokens, w.output_tokens, w.cached_tokens, w.turns, w.cost_usd, w.cost_priced \
     FROM executor_workers w JOIN executor_runs r ON r.id = w.run_id";

pub(crate) fn spend<R: Cells>(row: &R) -> Result<SpendRow, R::Error> {
    Ok(SpendRow {
        worker_id: row.get(0)?,
        run_id: row.get(1)?,
        task_gid: row.get(2)?,
        agent: row.get(3)?,
        at: row.get(4)?,
        spend: Spend {
            input_tokens: row.get::<Option<i64>>(5)?.unwrap_or(0),
            output_tokens: row.get::<Option<i64>>(6)?.unwrap_or(0),
            cached_tokens: row.get::<Option<i64>>(7)?.unwrap_or(0),
            turns: row.get::<Option<i64>>(8)?.unwrap_or(0),
            cost_usd: row.get(9)?,
            priced: row.get(10)?,
        },
    })
}

pub(crate) const EVENT_COLUMNS: &str =
    "id, task_gid, run_id, at, kind, from_status, to_status, actor, detail";

pub(crate) fn event<R: Cells>(row: &R) -> Result<TaskEvent, R::Error> {
    Ok(TaskEvent {
        id: row.get(0)?,
        task_gid: row.get(1)?,
        run_id: row.get(2)?,
        at: row.get(3)?,
        kind: row.get(4)?,
        from_status: row.get(5)?,
        to_status: row.get(6)?,
        actor: row.get(7)?,
        detail: row.get(8)?,
    })
}

pub(crate) const DECISION_COLUMNS: &str = "id, task_gid, run_id, at, role, action, decision, \
     rule_id, detail, resolved_at, resolution, resolution_note, resolved_by, applied_at, \
     tool_use_id, message_window, confined";

pub(crate) fn decision<R: Cells>(row: &R) -> Result<Decision, R::Error> {
    Ok(Decision {
        id: row.get(0)?,
        task_gid: row.get(1)?,
        run_id: row.get(2)?,
        at: row.get(3)?,
        role: row.get(4)?,
        action: row.get(5)?,
        decision: row.get(6)?,
        rule_id: row.get(7)?,
        detail: row.get(8)?,
        resolved_at: row.get(9)?,
        resolution: row.get(10)?,
        resolution_note: row.get(11)?,
        resolved_by: row.get(12)?,
        applied_at: row.get(13)?,
        tool_use_id: row.get(14)?,
        message_window: row.get(15)?,
        confined: row.get(16)?,
    })
}

pub(crate) const MESSAGE_COLUMNS: &str =
    "id, run_id, task_gid, at, source, tag, kind, args, text, line";

pub(crate) fn message<R: Cells>(row: &R) -> Result<StoredMessage, R::Error> {
    Ok(StoredMessage {
        id: row.get(0)?,
        run_id: row.get(1)?,
        task_gid: row.get(2)?,
        at: row.get(3)?,
        source: row.get(4)?,
        tag: row.get(5)?,
        kind: row.get(6)?,
        args: row.get(7)?,
        text: row.get(8)?,
        line: row.get(9)?,
    })
}

pub(crate) fn outgoing<R: Cells>(row: &R) -> Result<Outgoing, R::Error> {
    let priority: String = row.get(3)?;
    Ok(Outgoing {
        id: row.get(0)?,
        notifier: row.get(1)?,
        persona: row.get(2)?,
        priority: priority
            .parse::<Priority>()
            .map_err(|e| row.bad(3, e.to_string()))?,
        task_gid: row.get(4)?,
        run_id: row.get(5)?,
        body: row.get(6)?,
        created_at: row.get(7)?,
        attempts: row.get(8)?,
        next_attempt_at: row.get(9)?,
        delivered_at: row.get(10)?,
        last_error: row.get(11)?,
        claimed_by: row.get(12)?,
        claimed_until: row.get(13)?,
    })
}

pub(crate) fn link<R: Cells>(row: &R) -> Result<TaskLink, R::Error> {
    Ok(TaskLink {
        task_gid: row.get(0)?,
        parent_gid: row.get(1)?,
        depth: row.get(2)?,
        key: row.get(3)?,
        position: row.get(4)?,
        created_at: row.get(5)?,
    })
}

pub(crate) fn session<R: Cells>(row: &R) -> Result<AgentSession, R::Error> {
    Ok(AgentSession {
        name: row.get(0)?,
        agent: row.get(1)?,
        session_id: row.get(2)?,
        updated_at: row.get(3)?,
    })
}

pub(crate) fn worker<R: Cells>(row: &R) -> Result<WorkerRecord, R::Error> {
    Ok(WorkerRecord {
        id: row.get(0)?,
        run_id: row.get(1)?,
        phase: row.get(2)?,
        host: row.get(3)?,
        pid: row.get(4)?,
        start_time: row.get(5)?,
        started_at: row.get(6)?,
        ended_at: row.get(7)?,
        outcome: row.get(8)?,
    })
}

pub(crate) fn spend_total<R: Cells>(row: &R) -> Result<executor_core::spend::SpendTotal, R::Error> {
    Ok(executor_core::spend::SpendTotal {
        workers: row.get(0)?,
        input_tokens: row.get(1)?,
        output_tokens: row.get(2)?,
        cached_tokens: row.get(3)?,
        turns: row.get(4)?,
        cost_usd: row.get(5)?,
        unpriced_workers: row.get(6)?,
    })
}

pub(crate) fn intake_error<R: Cells>(row: &R) -> Result<IntakeError, R::Error> {
    Ok(IntakeError {
        source: row.get(0)?,
        path: row.get(1)?,
        reason: row.get(2)?,
        first_seen: row.get(3)?,
        last_seen: row.get(4)?,
    })
}

pub(crate) fn outbox_backlog<R: Cells>(row: &R) -> Result<OutboxBacklog, R::Error> {
    Ok(OutboxBacklog {
        notifier: row.get(0)?,
        undelivered: row.get(1)?,
        oldest: row.get(2)?,
        attempts: row.get(3)?,
        last_error: row.get(4)?,
    })
}

pub(crate) fn dependency<R: Cells>(row: &R) -> Result<TaskDependency, R::Error> {
    Ok(TaskDependency {
        task_gid: row.get(0)?,
        depends_on: row.get(1)?,
    })
}

pub(crate) fn pause<R: Cells>(row: &R) -> Result<AgentPause, R::Error> {
    Ok(AgentPause {
        agent: row.get(0)?,
        since: row.get(1)?,
        until: row.get(2)?,
        reason: row.get(3)?,
        run_id: row.get(4)?,
        task_gid: row.get(5)?,
    })
}

/// A row of `executor_net_refusals`, its columns as [`crate::NET_REFUSAL_COLUMNS`] lists.
pub(crate) fn net_refusal<R: Cells>(row: &R) -> Result<NetRefusal, R::Error> {
    let port: i64 = row.get(3)?;
    let count: i64 = row.get(5)?;
    Ok(NetRefusal {
        run_id: row.get(0)?,
        task_gid: row.get(1)?,
        host: row.get(2)?,
        port: u16::try_from(port).map_err(|_| row.bad(3, format!("{port} is not a port")))?,
        kind: Refused::from_column(&row.get::<String>(4)?),
        count: u64::try_from(count).map_err(|_| row.bad(5, format!("{count} is not a count")))?,
        first_at: row.get(6)?,
        last_at: row.get(7)?,
    })
}

pub(crate) fn heartbeat<R: Cells>(row: &R) -> Result<Heartbeat, R::Error> {
    Ok(Heartbeat {
        component: row.get(0)?,
        host: row.get(1)?,
        pid: row.get(2)?,
        started_at: row.get(3)?,
        beat_at: row.get(4)?,
        stopped_at: row.get(5)?,
    })
}

pub(crate) fn component_error<R: Cells>(row: &R) -> Result<ComponentError, R::Error> {
    Ok(ComponentError {
        component: row.get(0)?,
        host: row.get(1)?,
        message: row.get(2)?,
        at: row.get(3)?,
        count: row.get(4)?,
    })
}

pub(crate) const LEASE_COLUMNS: &str = "run_id, holder, expires_at";

pub(crate) fn lease<R: Cells>(row: &R) -> Result<Lease, R::Error> {
    Ok(Lease {
        run_id: row.get(0)?,
        holder: row.get(1)?,
        expires_at: row.get(2)?,
    })
}

/// One value a write binds, for the backend to give in its own type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    Int(Option<i64>),
    Text(Option<&'a str>),
    Time(Option<DateTime<Utc>>),
}

/// The write of a run's row, fenced by its lease epoch; its values are [`run_values`], in
/// order. Placeholders are `$N` (SQLite reads them as `?N`, see [`numbered`]).
pub(crate) const UPDATE_RUN: &str = "UPDATE executor_runs SET worktree_path = $2, \
     branch_name = $3, pr_url = $4, pr_number = $5, thread_id = $6, started_at = $7, \
     updated_at = $8, completed_at = $9, state = $10, ci_attempts = $11, \
     worker_session_id = $12, worker_last_update = $13, worker_pid = $14, \
     worker_stuck_count = $15, lifecycle = $16 WHERE id = $1 AND lease_epoch = $17";

/// What [`UPDATE_RUN`] binds for `r`, `$1` first. The lifecycle column is `lifecycle`, the
/// view written as JSON.
pub(crate) fn run_values<'a>(r: &'a Run, lifecycle: Option<&'a str>) -> [Value<'a>; 17] {
    use Value::{Int, Text, Time};
    [
        Int(Some(r.id)),
        Text(r.worktree_path.as_deref()),
        Text(r.branch_name.as_deref()),
        Text(r.pr_url.as_deref()),
        Int(r.pr_number),
        Text(r.thread_id.as_deref()),
        Time(r.started_at),
        Time(Some(r.updated_at)),
        Time(r.completed_at),
        Text(Some(r.state.as_str())),
        Int(Some(r.ci_attempts)),
        Text(r.worker_session_id.as_deref()),
        Time(r.worker_last_update),
        Int(r.worker_pid),
        Int(Some(r.worker_stuck_count)),
        Text(lifecycle),
        Int(Some(r.lease_epoch)),
    ]
}

/// A statement written with `$N` placeholders, numbered as SQLite reads them (`?N`: a
/// bare `$N` would be a named parameter, numbered by where it first appears).
pub(crate) fn numbered(sql: &str) -> String {
    sql.replace('$', "?")
}

/// The columns of an outcome row, in the order both backends select them: the run's id,
/// task, its task's source, state, start, completion, PR number, its workers' first agent,
/// summed cost, `fix_ci` and `fix_comments` workers, its PR memory, its task's facts, and
/// whether the owner's cancel ended it.
pub(crate) fn outcome<R: Cells>(
    row: &R,
) -> Result<executor_core::analytics::StoredOutcome, R::Error> {
    Ok(executor_core::analytics::StoredOutcome {
        run_id: needed(row, 0, row.int(0)?)?,
        task_gid: needed(row, 1, row.text(1)?)?,
        source: row.text(2)?,
        state: needed(row, 3, row.text(3)?)?,
        started_at: row.time(4)?,
        completed_at: row.time(5)?,
        pr_number: row.int(6)?,
        agent: row.text(7)?,
        cost_usd: row.real(8)?,
        fix_ci_workers: row.int(9)?.unwrap_or(0),
        fix_comments_workers: row.int(10)?.unwrap_or(0),
        pr_memory: row.text(11)?,
        task_facts: row.text(12)?,
        cancelled: row.int(13)?.unwrap_or(0) != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_of_the_run_write_has_its_value() {
        let run = Run {
            id: 1,
            task_gid: "T-1".into(),
            worktree_path: None,
            branch_name: None,
            pr_url: None,
            pr_number: None,
            thread_id: None,
            started_at: None,
            updated_at: DateTime::<Utc>::UNIX_EPOCH,
            completed_at: None,
            state: RunState::Queued,
            ci_attempts: 0,
            worker_session_id: None,
            worker_last_update: None,
            worker_pid: None,
            worker_stuck_count: 0,
            lifecycle: None,
            lease_epoch: 0,
        };
        let values = run_values(&run, None).len();
        let numbers: std::collections::BTreeSet<usize> = UPDATE_RUN
            .split('$')
            .skip(1)
            .map(|rest| {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().expect("a placeholder's number")
            })
            .collect();
        assert_eq!(numbers, (1..=values).collect());
        assert!(!numbered(UPDATE_RUN).contains('$'));
    }
}

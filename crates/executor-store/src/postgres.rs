//! The shared store: Postgres, for a queue that runners on several hosts share.
//!
//! Every read casts its columns to the types this code decodes (`::bigint`, `::text`,
//! `::timestamptz`) and fills the ones it needs with a value when they are NULL, so an
//! adopted database whose owner chose `integer` or `timestamp` for a column, or left one
//! nullable, is read as it is instead of failing to decode. Migrations run under an advisory
//! lock, so runners starting together on several hosts apply each step exactly once.

use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, Row, Transaction};

use super::migrations::{self, Migration};
use super::rows::{
    self, Cells, DECISION_COLUMNS, EVENT_COLUMNS, LEASE_COLUMNS, MESSAGE_COLUMNS, SPEND_SELECT,
};
use super::{check_decomposition, complete_counts, Store, StoreError, StoreResult};
use executor_core::exchange::{Exchanged, NewExchange, RETRY_LOOKBACK};
use executor_core::outbox::{NewOutgoing, OutboxBacklog, Outgoing};
use executor_core::queue::QueueStatus;
use executor_core::record::{
    ChangedTask, Decision, Heartbeat, IntakeError, Lease, NewDecision, NewMessage, Resolved, Run,
    StatusChange, StoreSummary, StoredMessage, TaskEvent, WorkerEnd, WorkerRecord,
};
use executor_core::run::RunState;
use executor_core::task::{Analysis, NewTask, Task, TaskChanges, UpsertOutcome};
use executor_core::tree::{AgentSession, TaskDependency, TaskLink};
use executor_core::usage_limit::AgentPause;

const TASK_COLUMNS: &str = "id::bigint, COALESCE(task_gid::text, ''), \
     COALESCE(added_at::timestamptz, updated_at::timestamptz, 'epoch'::timestamptz), \
     COALESCE(updated_at::timestamptz, added_at::timestamptz, 'epoch'::timestamptz), \
     source::text, description::text, notes::text, status::text, priority::bigint, \
     complexity::text, feasibility::text, analysis_summary::text, executor_run_id::bigint";
const RUN_COLUMNS: &str = "id::bigint, COALESCE(task_gid::text, ''), worktree_path::text, \
     branch_name::text, pr_url::text, pr_number::bigint, thread_id::text, \
     started_at::timestamptz, \
     COALESCE(updated_at::timestamptz, started_at::timestamptz, 'epoch'::timestamptz), \
     completed_at::timestamptz, COALESCE(state::text, ''), COALESCE(ci_attempts::bigint, 0), \
     worker_session_id::text, worker_last_update::timestamptz, worker_pid::bigint, \
     COALESCE(worker_stuck_count::bigint, 0), lifecycle, lease_epoch";
const OUTBOX_COLUMNS: &str = "id, notifier, persona, priority, task_gid, run_id, body, \
     created_at, attempts::bigint, next_attempt_at, delivered_at, last_error, claimed_by, claimed_until";
const LINK_COLUMNS: &str = "task_gid, parent_gid, depth::bigint, key, position::bigint, created_at";

/// Arbitrary, fixed: the advisory lock key under which migrations run ("executor" in ASCII).
const MIGRATION_LOCK_KEY: i64 = 0x6578_6563_7574_6f72;

/// The Postgres implementation of [`Store`].
/// The advisory lock writers of the outbox take in turn (an arbitrary, fixed key: "exec"
/// "outb" in ASCII).
const OUTBOX_WRITE_LOCK: i64 = 0x6578_6563_6f75_7462;

pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects to `url` (with `password` when given) and brings the schema up to date.
    pub async fn connect(url: &str, password: Option<&str>) -> StoreResult<Self> {
        let mut options = PgConnectOptions::from_str(url)?;
        if let Some(password) = password {
            options = options.password(password);
        }
        Self::connect_with(options).await
    }

    /// Connects with ready-made options (tests use this to pick a schema).
    pub async fn connect_with(options: PgConnectOptions) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect_with(options)
            .await?;
        migrate(&pool, migrations::POSTGRES).await?;
        Ok(Self { pool })
    }

    /// The pool, for tests that inspect the database directly.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Up to `limit` tasks of `status` (any with `None`) past `bound` by id: after it,
    /// oldest first, or (`newest`) before it, newest first.
    async fn task_range(
        &self,
        status: Option<&QueueStatus>,
        newest: bool,
        bound: i64,
        limit: u32,
    ) -> StoreResult<Vec<Task>> {
        let (past, order) = if newest { ("<", "DESC") } else { (">", "ASC") };
        let select = format!("SELECT {TASK_COLUMNS} FROM executor_queue WHERE id {past} $1");
        let query = match status {
            None => format!("{select} ORDER BY id {order} LIMIT $2"),
            Some(QueueStatus::Pending) => format!(
                "{select} AND (status IS NULL OR status IN ('', 'pending')) ORDER BY id {order} LIMIT $2"
            ),
            Some(_) => format!("{select} AND status = $3 ORDER BY id {order} LIMIT $2"),
        };
        let mut query = sqlx::query(&query).bind(bound).bind(i64::from(limit));
        if let Some(status) = status.filter(|s| **s != QueueStatus::Pending) {
            query = query.bind(status.as_str());
        }
        let rows = query.fetch_all(&self.pool).await?;
        Ok(rows.iter().map(rows::task).collect::<Result<_, _>>()?)
    }
}

async fn migrate(pool: &PgPool, list: &[Migration]) -> StoreResult<()> {
    let known = migrations::latest(list);
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK_KEY)
        .execute(&mut *tx)
        .await?;
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS executor_schema_migrations (\
            version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    )
    .execute(&mut *tx)
    .await?;
    let current: i64 =
        sqlx::query_scalar("SELECT COALESCE(max(version), 0) FROM executor_schema_migrations")
            .fetch_one(&mut *tx)
            .await?;
    if current > known {
        return Err(StoreError::SchemaTooNew {
            found: current,
            known,
        });
    }
    for migration in list.iter().filter(|m| m.version > current) {
        sqlx::raw_sql(migration.sql)
            .execute(&mut *tx)
            .await
            .map_err(|e| StoreError::Migration {
                version: migration.version,
                name: migration.name,
                message: with_detail(&e),
            })?;
        sqlx::query("INSERT INTO executor_schema_migrations (version, name) VALUES ($1, $2)")
            .bind(migration.version)
            .bind(migration.name)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The error with Postgres's own detail line, which names the row at fault (say, the
/// duplicated `task_gid` that stops the unique index).
fn with_detail(error: &sqlx::Error) -> String {
    let detail = error
        .as_database_error()
        .and_then(|db| db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>())
        .and_then(|pg| pg.detail());
    match detail {
        Some(detail) => format!("{error} ({detail})"),
        None => error.to_string(),
    }
}

/// A Postgres row, read cell by cell for the shared mapping (the column lists cast each
/// cell to the type read here).
impl Cells for PgRow {
    type Error = sqlx::Error;
    fn int(&self, index: usize) -> Result<Option<i64>, sqlx::Error> {
        self.try_get(index)
    }
    fn real(&self, index: usize) -> Result<Option<f64>, sqlx::Error> {
        self.try_get(index)
    }
    fn flag(&self, index: usize) -> Result<Option<bool>, sqlx::Error> {
        self.try_get(index)
    }
    fn text(&self, index: usize) -> Result<Option<String>, sqlx::Error> {
        self.try_get(index)
    }
    fn time(&self, index: usize) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        self.try_get(index)
    }
    fn bad(&self, index: usize, why: String) -> sqlx::Error {
        sqlx::Error::ColumnDecode {
            index: index.to_string(),
            source: why.into(),
        }
    }
}

fn session_from_row(row: &PgRow) -> Result<AgentSession, sqlx::Error> {
    rows::session(row)
}

async fn select_task(
    tx: &mut Transaction<'_, Postgres>,
    gid: &str,
    for_update: bool,
) -> Result<Option<Task>, sqlx::Error> {
    let lock = if for_update { " FOR UPDATE" } else { "" };
    let row = sqlx::query(&format!(
        "SELECT {TASK_COLUMNS} FROM executor_queue WHERE task_gid = $1{lock}"
    ))
    .bind(gid)
    .fetch_optional(&mut **tx)
    .await?;
    row.as_ref().map(rows::task).transpose()
}

/// Writes `r`'s row if its lease epoch is still the stored one; the rows changed (0: the
/// lease is gone, nothing written).
async fn update_run<'e, E: sqlx::PgExecutor<'e>>(e: E, r: &Run) -> Result<u64, sqlx::Error> {
    let lifecycle = crate::lifecycle_column(r.lifecycle.as_ref());
    let mut query = sqlx::query(rows::UPDATE_RUN);
    for value in rows::run_values(r, lifecycle.as_deref()) {
        query = match value {
            rows::Value::Int(n) => query.bind(n),
            rows::Value::Text(t) => query.bind(t),
            rows::Value::Time(at) => query.bind(at),
        };
    }
    Ok(query.execute(e).await?.rows_affected())
}

/// Inserts worker `w`'s start record; its id.
async fn insert_worker<'e, E: sqlx::PgExecutor<'e>>(
    e: E,
    w: &WorkerRecord,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO executor_workers (run_id, phase, host, pid, start_time, started_at) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
    )
    .bind(w.run_id)
    .bind(&w.phase)
    .bind(&w.host)
    .bind(w.pid)
    .bind(w.start_time)
    .bind(w.started_at)
    .fetch_one(e)
    .await
}

/// Records worker `end.id`'s end, unless it is recorded already.
async fn record_end<'e, E: sqlx::PgExecutor<'e>>(e: E, end: &WorkerEnd) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE executor_workers SET ended_at = $2, outcome = $3 WHERE id = $1 AND ended_at IS NULL",
    )
    .bind(end.id)
    .bind(end.at)
    .bind(&end.outcome)
    .execute(e)
    .await?;
    Ok(())
}

/// Moves a task by `change` (checked against the status it is in, the row locked) and
/// records the event; the task as moved. Part of the caller's transaction.
async fn move_task(
    tx: &mut Transaction<'_, Postgres>,
    change: &StatusChange,
) -> Result<Task, StoreError> {
    let stored = select_task(tx, &change.task_gid, true)
        .await?
        .ok_or_else(|| StoreError::TaskNotFound(change.task_gid.clone()))?;
    if stored.status != change.from {
        return Err(StoreError::StatusConflict {
            gid: change.task_gid.clone(),
            expected: change.from.to_string(),
            actual: stored.status.to_string(),
        });
    }
    sqlx::query("UPDATE executor_queue SET status = $2, updated_at = $3 WHERE task_gid = $1")
        .bind(&change.task_gid)
        .bind(change.to.as_str())
        .bind(change.event.at)
        .execute(&mut **tx)
        .await?;
    insert_event(
        tx,
        EventRow {
            gid: &change.task_gid,
            run_id: stored.executor_run_id,
            at: change.event.at,
            kind: &change.event.kind,
            from: Some(change.from.as_str()),
            to: Some(change.to.as_str()),
            actor: &change.event.actor,
            detail: change.event.detail.as_deref(),
        },
    )
    .await?;
    select_task(tx, &change.task_gid, false)
        .await?
        .ok_or_else(|| StoreError::TaskNotFound(change.task_gid.clone()))
}

/// Inserts a `queued` run of task `gid` and links it as the task's run. Part of the
/// caller's transaction.
async fn insert_run(
    tx: &mut Transaction<'_, Postgres>,
    gid: &str,
    at: DateTime<Utc>,
) -> Result<Run, StoreError> {
    let Some(task) = select_task(tx, gid, true).await? else {
        return Err(StoreError::TaskNotFound(gid.to_string()));
    };
    // The text this run is given, kept: the task's own text may be edited later.
    let row = sqlx::query(&format!(
        "INSERT INTO executor_runs (task_gid, started_at, updated_at, state, task_text) \
         VALUES ($1, $2, $2, $3, $4) RETURNING {RUN_COLUMNS}"
    ))
    .bind(gid)
    .bind(at)
    .bind(RunState::Queued.as_str())
    .bind(task.description)
    .fetch_one(&mut **tx)
    .await?;
    let run = rows::run(&row)?;
    sqlx::query(
        "UPDATE executor_queue SET executor_run_id = $2, updated_at = $3 WHERE task_gid = $1",
    )
    .bind(gid)
    .bind(run.id)
    .bind(at)
    .execute(&mut **tx)
    .await?;
    Ok(run)
}

/// Takes run `run_id`'s lease for `holder` if it is free, expired, `holder`'s own or
/// `steal_from`'s; the run's new lease epoch, `None` when another holds it. Part of the
/// caller's transaction.
async fn claim_lease(
    tx: &mut Transaction<'_, Postgres>,
    run_id: i64,
    holder: &str,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
    steal_from: Option<&str>,
) -> Result<Option<i64>, sqlx::Error> {
    let changed = sqlx::query(
        "INSERT INTO executor_run_leases (run_id, holder, expires_at) VALUES ($1, $2, $4) \
         ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at \
         WHERE executor_run_leases.expires_at < $3 \
         OR executor_run_leases.holder = excluded.holder \
         OR executor_run_leases.holder = $5",
    )
    .bind(run_id)
    .bind(holder)
    .bind(now)
    .bind(until)
    .bind(steal_from)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    if changed != 1 {
        return Ok(None);
    }
    // Every claim starts a new epoch: a save by an earlier claimant no longer lands.
    let epoch: Option<i64> = sqlx::query_scalar(
        "UPDATE executor_runs SET lease_epoch = lease_epoch + 1 WHERE id = $1 RETURNING lease_epoch",
    )
    .bind(run_id)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(Some(epoch.unwrap_or(0)))
}

/// Deletes `holder`'s lease of run `run_id`, if it holds it.
/// Writes one decision; the row as recorded.
async fn insert_decision<'e, E: sqlx::PgExecutor<'e>>(
    e: E,
    d: &NewDecision,
) -> StoreResult<Decision> {
    let row = sqlx::query(&format!(
        "INSERT INTO executor_decisions (task_gid, run_id, at, role, action, decision, rule_id, detail, \
         tool_use_id, message_window, confined) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         RETURNING {DECISION_COLUMNS}"
    ))
    .bind(&d.task_gid)
    .bind(d.run_id)
    .bind(d.at)
    .bind(&d.role)
    .bind(&d.action)
    .bind(&d.decision)
    .bind(&d.rule_id)
    .bind(&d.detail)
    .bind(&d.tool_use_id)
    .bind(&d.message_window)
    .bind(d.confined)
    .fetch_one(e)
    .await?;
    Ok(rows::decision(&row)?)
}

/// Writes one message; its id.
async fn insert_message<'e, E: sqlx::PgExecutor<'e>>(
    e: E,
    m: &NewMessage,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO executor_messages (run_id, task_gid, at, source, tag, kind, args, text, line) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
    )
    .bind(m.run_id)
    .bind(&m.task_gid)
    .bind(m.at)
    .bind(&m.source)
    .bind(&m.tag)
    .bind(&m.kind)
    .bind(&m.args)
    .bind(&m.text)
    .bind(&m.line)
    .fetch_one(e)
    .await
}

/// The last `last` messages of a run, oldest first.
async fn last_messages<'e, E: sqlx::PgExecutor<'e>>(
    e: E,
    run_id: i64,
    last: u32,
) -> StoreResult<Vec<StoredMessage>> {
    let rows = sqlx::query(&format!(
        "SELECT {MESSAGE_COLUMNS} FROM (SELECT {MESSAGE_COLUMNS} FROM executor_messages \
         WHERE run_id = $1 ORDER BY id DESC LIMIT $2) AS window_ ORDER BY id"
    ))
    .bind(run_id)
    .bind(i64::from(last))
    .fetch_all(e)
    .await?;
    Ok(rows.iter().map(rows::message).collect::<Result<_, _>>()?)
}

/// Writes outbox rows in order, inside the caller's transaction; their ids.
async fn insert_outgoing(
    tx: &mut Transaction<'_, Postgres>,
    items: &[NewOutgoing],
) -> Result<Vec<i64>, sqlx::Error> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    // Ids come from a sequence before commit: two writers at once could make a later id
    // visible before an earlier one, and the deliverer post them out of order. Writers
    // take turns instead (the lock ends with the transaction).
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(OUTBOX_WRITE_LOCK)
        .execute(&mut **tx)
        .await?;
    let mut ids = Vec::with_capacity(items.len());
    for item in items {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO executor_outbox (notifier, persona, priority, task_gid, run_id, body, \
             created_at, next_attempt_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING id",
        )
        .bind(&item.notifier)
        .bind(&item.persona)
        .bind(item.priority.as_str())
        .bind(&item.task_gid)
        .bind(item.run_id)
        .bind(&item.body)
        .bind(item.created_at)
        .fetch_one(&mut **tx)
        .await?;
        ids.push(id);
    }
    Ok(ids)
}

async fn drop_lease<'e, E: sqlx::PgExecutor<'e>>(
    e: E,
    run_id: i64,
    holder: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM executor_run_leases WHERE run_id = $1 AND holder = $2")
        .bind(run_id)
        .bind(holder)
        .execute(e)
        .await?;
    Ok(())
}

struct EventRow<'a> {
    gid: &'a str,
    run_id: Option<i64>,
    at: DateTime<Utc>,
    kind: &'a str,
    from: Option<&'a str>,
    to: Option<&'a str>,
    actor: &'a str,
    detail: Option<&'a str>,
}

async fn insert_event(
    tx: &mut Transaction<'_, Postgres>,
    event: EventRow<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO executor_events (task_gid, run_id, at, kind, from_status, to_status, actor, detail) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(event.gid)
    .bind(event.run_id)
    .bind(event.at)
    .bind(event.kind)
    .bind(event.from)
    .bind(event.to)
    .bind(event.actor)
    .bind(event.detail)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[async_trait]
impl Store for PgStore {
    async fn upsert_task(
        &self,
        new: &NewTask,
        actor: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<(Task, UpsertOutcome)> {
        let mut tx = self.pool.begin().await?;
        // Insert-if-absent first, so two hosts adding the same gid at once both end up
        // updating one row instead of one of them failing on the unique index.
        let inserted = sqlx::query(
            "INSERT INTO executor_queue (task_gid, added_at, updated_at, source, description, notes, status, priority) \
             VALUES ($1, $2, $2, $3, $4, $5, $6, $7) ON CONFLICT (task_gid) DO NOTHING",
        )
        .bind(&new.task_gid)
        .bind(at)
        .bind(&new.source)
        .bind(&new.description)
        .bind(&new.notes)
        .bind(new.initial_status.as_str())
        .bind(new.priority)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        let outcome = if inserted {
            insert_event(
                &mut tx,
                EventRow {
                    gid: &new.task_gid,
                    run_id: None,
                    at,
                    kind: "added",
                    from: None,
                    to: Some(new.initial_status.as_str()),
                    actor,
                    detail: None,
                },
            )
            .await?;
            UpsertOutcome::Created
        } else {
            let stored = select_task(&mut tx, &new.task_gid, true)
                .await?
                .ok_or_else(|| StoreError::TaskNotFound(new.task_gid.clone()))?;
            let changes = TaskChanges::between(&stored, new);
            if changes.is_empty() {
                UpsertOutcome::Unchanged
            } else {
                sqlx::query(
                    "UPDATE executor_queue SET description = COALESCE($2, description), \
                     notes = COALESCE($3, notes), priority = COALESCE($4, priority), updated_at = $5 \
                     WHERE task_gid = $1",
                )
                .bind(&new.task_gid)
                .bind(&changes.description)
                .bind(&changes.notes)
                .bind(changes.priority)
                .bind(at)
                .execute(&mut *tx)
                .await?;
                let fields = changes.field_names();
                insert_event(
                    &mut tx,
                    EventRow {
                        gid: &new.task_gid,
                        run_id: None,
                        at,
                        kind: "updated",
                        from: None,
                        to: None,
                        actor,
                        detail: Some(&fields),
                    },
                )
                .await?;
                UpsertOutcome::Updated
            }
        };
        let task = select_task(&mut tx, &new.task_gid, false)
            .await?
            .ok_or_else(|| StoreError::TaskNotFound(new.task_gid.clone()))?;
        tx.commit().await?;
        Ok((task, outcome))
    }

    async fn task(&self, gid: &str) -> StoreResult<Option<Task>> {
        let row = sqlx::query(&format!(
            "SELECT {TASK_COLUMNS} FROM executor_queue WHERE task_gid = $1"
        ))
        .bind(gid)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(rows::task).transpose()?)
    }

    async fn tasks_page(
        &self,
        status: Option<&QueueStatus>,
        after_id: i64,
        limit: u32,
    ) -> StoreResult<Vec<Task>> {
        self.task_range(status, false, after_id, limit).await
    }

    async fn change_status(&self, change: &StatusChange) -> StoreResult<Task> {
        let mut tx = self.pool.begin().await?;
        let task = move_task(&mut tx, change).await?;
        tx.commit().await?;
        Ok(task)
    }

    async fn events(&self, gid: &str) -> StoreResult<Vec<TaskEvent>> {
        let rows = sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS} FROM executor_events WHERE task_gid = $1 ORDER BY id"
        ))
        .bind(gid)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(rows::event).collect::<Result<_, _>>()?)
    }

    async fn create_run(&self, gid: &str, at: DateTime<Utc>) -> StoreResult<Run> {
        let mut tx = self.pool.begin().await?;
        let run = insert_run(&mut tx, gid, at).await?;
        tx.commit().await?;
        Ok(run)
    }

    async fn create_leased_run(
        &self,
        gid: &str,
        holder: &str,
        at: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<Run> {
        let mut tx = self.pool.begin().await?;
        let mut run = insert_run(&mut tx, gid, at).await?;
        // A new run's id was never leased: the claim cannot be refused.
        run.lease_epoch = claim_lease(&mut tx, run.id, holder, at, until, None)
            .await?
            .ok_or(StoreError::Fenced { run_id: run.id })?;
        tx.commit().await?;
        Ok(run)
    }

    async fn claim_task(
        &self,
        change: &StatusChange,
        holder: &str,
        until: DateTime<Utc>,
    ) -> StoreResult<(Task, Run)> {
        let mut tx = self.pool.begin().await?;
        move_task(&mut tx, change).await?;
        let at = change.event.at;
        let mut run = insert_run(&mut tx, &change.task_gid, at).await?;
        run.lease_epoch = claim_lease(&mut tx, run.id, holder, at, until, None)
            .await?
            .ok_or(StoreError::Fenced { run_id: run.id })?;
        // The task as it now is: linked to its new run.
        let task = select_task(&mut tx, &change.task_gid, false)
            .await?
            .ok_or_else(|| StoreError::TaskNotFound(change.task_gid.clone()))?;
        tx.commit().await?;
        Ok((task, run))
    }

    async fn end_run(
        &self,
        r: &Run,
        change: Option<&StatusChange>,
        holder: Option<&str>,
    ) -> StoreResult<Option<Task>> {
        let mut tx = self.pool.begin().await?;
        // Rows are locked in the order a claim locks them (lease, run, task): a cancel or
        // a takeover at the same moment waits, it does not deadlock.
        if let Some(holder) = holder {
            drop_lease(&mut *tx, r.id, holder).await?;
        }
        if update_run(&mut *tx, r).await? == 0 {
            return Err(StoreError::Fenced { run_id: r.id });
        }
        let task = match change {
            Some(change) => Some(move_task(&mut tx, change).await?),
            None => None,
        };
        tx.commit().await?;
        Ok(task)
    }

    async fn save_run(&self, r: &Run) -> StoreResult<()> {
        if update_run(&self.pool, r).await? == 0 {
            return Err(StoreError::Fenced { run_id: r.id });
        }
        Ok(())
    }

    async fn runs(&self, gid: Option<&str>) -> StoreResult<Vec<Run>> {
        let rows = match gid {
            Some(gid) => {
                sqlx::query(&format!(
                    "SELECT {RUN_COLUMNS} FROM executor_runs WHERE task_gid = $1 ORDER BY id"
                ))
                .bind(gid)
                .fetch_all(&self.pool)
                .await?
            }
            None => {
                sqlx::query(&format!(
                    "SELECT {RUN_COLUMNS} FROM executor_runs ORDER BY id"
                ))
                .fetch_all(&self.pool)
                .await?
            }
        };
        Ok(rows.iter().map(rows::run).collect::<Result<_, _>>()?)
    }

    async fn run(&self, id: i64) -> StoreResult<Option<Run>> {
        let row = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM executor_runs WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(rows::run).transpose()?)
    }

    async fn runs_page(
        &self,
        states: &[RunState],
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<Run>> {
        let states: Vec<String> = states.iter().map(|s| s.as_str().to_string()).collect();
        let rows = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM executor_runs WHERE id < $1 \
             AND (cardinality($3::text[]) = 0 OR state::text = ANY($3)) ORDER BY id DESC LIMIT $2"
        ))
        .bind(before.unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .bind(states)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(rows::run).collect::<Result<_, _>>()?)
    }

    async fn run_counts(&self) -> StoreResult<Vec<(String, i64)>> {
        Ok(sqlx::query_as(
            "SELECT COALESCE(state::text, ''), count(*)::bigint FROM executor_runs GROUP BY 1 ORDER BY 1",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    async fn tasks_newest(
        &self,
        status: Option<&QueueStatus>,
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<Task>> {
        self.task_range(status, true, before.unwrap_or(i64::MAX), limit)
            .await
    }

    async fn run_task_text(&self, run_id: i64) -> StoreResult<Option<String>> {
        let text: Option<Option<String>> =
            sqlx::query_scalar("SELECT task_text FROM executor_runs WHERE id = $1")
                .bind(run_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(text.flatten())
    }

    async fn changed_since_run(&self) -> StoreResult<Vec<ChangedTask>> {
        // Casts: an adopted owner's table may type these columns its own way.
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT q.task_gid::text, r.id::bigint FROM executor_queue q \
             JOIN executor_runs r ON r.id::bigint = q.executor_run_id::bigint \
             WHERE q.status::text = $1 AND r.task_text IS NOT NULL \
             AND r.task_text IS DISTINCT FROM q.description::text ORDER BY 1",
        )
        .bind(QueueStatus::Done.as_str())
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(task_gid, run_id)| ChangedTask { task_gid, run_id })
            .collect())
    }

    async fn record_worker(&self, w: &WorkerRecord) -> StoreResult<i64> {
        Ok(insert_worker(&self.pool, w).await?)
    }

    async fn record_worker_start(&self, w: &WorkerRecord, r: &Run) -> StoreResult<i64> {
        let mut tx = self.pool.begin().await?;
        let id = insert_worker(&mut *tx, w).await?;
        let changed = update_run(&mut *tx, r).await?;
        tx.commit().await?;
        if changed == 0 {
            return Err(StoreError::Fenced { run_id: r.id });
        }
        Ok(id)
    }

    async fn end_worker(&self, id: i64, at: DateTime<Utc>, outcome: &str) -> StoreResult<()> {
        let end = WorkerEnd {
            id,
            at,
            outcome: outcome.to_string(),
        };
        Ok(record_end(&self.pool, &end).await?)
    }

    async fn save_run_ending_worker(&self, r: &Run, end: &WorkerEnd) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        record_end(&mut *tx, end).await?;
        let changed = update_run(&mut *tx, r).await?;
        tx.commit().await?;
        if changed == 0 {
            return Err(StoreError::Fenced { run_id: r.id });
        }
        Ok(())
    }

    async fn open_workers(&self, host: &str) -> StoreResult<Vec<WorkerRecord>> {
        let rows = sqlx::query(
            "SELECT id, run_id, phase, host, pid, start_time, started_at, ended_at, outcome \
             FROM executor_workers WHERE host = $1 AND ended_at IS NULL ORDER BY id",
        )
        .bind(host)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(rows::worker)
            .collect::<Result<_, sqlx::Error>>()?)
    }

    async fn record_spend(
        &self,
        id: i64,
        agent: &str,
        spend: &executor_core::spend::Spend,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE executor_workers SET agent = $2, input_tokens = $3, output_tokens = $4, \
             cached_tokens = $5, turns = $6, cost_usd = $7, cost_priced = $8 WHERE id = $1",
        )
        .bind(id)
        .bind(agent)
        .bind(spend.input_tokens)
        .bind(spend.output_tokens)
        .bind(spend.cached_tokens)
        .bind(spend.turns)
        .bind(spend.cost_usd)
        .bind(spend.priced)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn spend(&self, gid: Option<&str>) -> StoreResult<Vec<executor_core::spend::SpendRow>> {
        let rows = sqlx::query(&format!(
            "{SPEND_SELECT} WHERE w.agent IS NOT NULL AND ($1::TEXT IS NULL OR r.task_gid = $1) \
             ORDER BY w.id"
        ))
        .bind(gid)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(rows::spend)
            .collect::<Result<_, sqlx::Error>>()?)
    }

    async fn spend_since(
        &self,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<executor_core::spend::SpendRow>> {
        let rows = sqlx::query(&format!(
            "{SPEND_SELECT} WHERE w.agent IS NOT NULL \
             AND (w.ended_at >= $1 OR (w.ended_at IS NULL AND w.started_at >= $1)) ORDER BY w.id"
        ))
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(rows::spend)
            .collect::<Result<_, sqlx::Error>>()?)
    }

    async fn outcomes_since(
        &self,
        since: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<executor_core::analytics::Outcomes> {
        let runs = sqlx::query(
            "SELECT r.id::bigint, r.task_gid, q.source, r.state, r.started_at, r.completed_at, r.pr_number::bigint, \
             (SELECT MIN(w.agent) FROM executor_workers w WHERE w.run_id = r.id), \
             (SELECT SUM(w.cost_usd)::double precision FROM executor_workers w WHERE w.run_id = r.id), \
             (SELECT COUNT(*) FROM executor_workers w WHERE w.run_id = r.id AND w.phase = 'fix_ci'), \
             (SELECT COUNT(*) FROM executor_workers w WHERE w.run_id = r.id AND w.phase = 'fix_comments'), \
             m.memory, f.facts, \
             CASE WHEN r.state = 'abandoned' AND EXISTS (SELECT 1 FROM executor_events e \
               WHERE e.task_gid = r.task_gid AND e.actor = 'owner' AND e.detail LIKE $3 \
               AND e.at >= r.started_at AND e.at <= r.updated_at) THEN 1::bigint ELSE 0::bigint END \
             FROM executor_runs r \
             LEFT JOIN executor_queue q ON q.task_gid = r.task_gid \
             LEFT JOIN executor_pr_memory m ON m.run_id = r.id \
             LEFT JOIN executor_task_facts f ON f.task_gid = r.task_gid \
             WHERE r.started_at >= $1 ORDER BY r.id DESC LIMIT $2",
        )
        .bind(since)
        .bind(i64::from(limit))
        .bind(format!("{}%", executor_core::ending::CANCELLED_BY_OWNER))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(rows::outcome)
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
        let escalations: Vec<(i64, DateTime<Utc>, Option<DateTime<Utc>>)> = sqlx::query_as(
            "SELECT d.run_id::bigint, d.at, d.resolved_at FROM executor_decisions d \
             JOIN executor_runs r ON r.id = d.run_id \
             WHERE d.decision = 'escalate' AND r.started_at >= $1 ORDER BY d.id",
        )
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        let owner_actions: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT r.id::bigint, COUNT(*) FROM executor_runs r \
             JOIN executor_events e ON e.task_gid = r.task_gid \
             AND e.at >= r.started_at AND e.at <= r.updated_at \
             WHERE r.started_at >= $1 AND e.actor = ANY($2) AND NOT (e.kind = ANY($3)) GROUP BY r.id",
        )
        .bind(since)
        .bind(executor_core::analytics::OWNER_ACTORS)
        .bind(executor_core::analytics::PLAIN_EVENTS)
        .fetch_all(&self.pool)
        .await?;
        Ok(executor_core::analytics::Outcomes {
            runs,
            escalations,
            owner_actions,
        })
    }

    async fn spend_of_runs(
        &self,
        run_ids: &[i64],
    ) -> StoreResult<Vec<executor_core::spend::SpendRow>> {
        if run_ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(&format!(
            "{SPEND_SELECT} WHERE w.agent IS NOT NULL AND w.run_id = ANY($1) ORDER BY w.id"
        ))
        .bind(run_ids.to_vec())
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(rows::spend)
            .collect::<Result<_, sqlx::Error>>()?)
    }

    async fn spend_total(&self) -> StoreResult<executor_core::spend::SpendTotal> {
        let row = sqlx::query(
            "SELECT count(*)::bigint, COALESCE(SUM(input_tokens), 0)::bigint, \
             COALESCE(SUM(output_tokens), 0)::bigint, COALESCE(SUM(cached_tokens), 0)::bigint, \
             COALESCE(SUM(turns), 0)::bigint, COALESCE(SUM(cost_usd), 0)::float8, \
             count(*) FILTER (WHERE cost_usd IS NULL)::bigint \
             FROM executor_workers WHERE agent IS NOT NULL",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(rows::spend_total(&row)?)
    }

    async fn record_decision(&self, d: &NewDecision) -> StoreResult<Decision> {
        insert_decision(&self.pool, d).await
    }

    async fn decisions(&self, gid: &str) -> StoreResult<Vec<Decision>> {
        let rows = sqlx::query(&format!(
            "SELECT {DECISION_COLUMNS} FROM executor_decisions WHERE task_gid = $1 ORDER BY id"
        ))
        .bind(gid)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(rows::decision).collect::<Result<_, _>>()?)
    }

    async fn decision(&self, id: i64) -> StoreResult<Option<Decision>> {
        let row = sqlx::query(&format!(
            "SELECT {DECISION_COLUMNS} FROM executor_decisions WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(rows::decision).transpose()?)
    }

    async fn escalations(&self, pending_only: bool) -> StoreResult<Vec<Decision>> {
        let pending = if pending_only {
            " AND resolved_at IS NULL"
        } else {
            ""
        };
        let rows = sqlx::query(&format!(
            "SELECT {DECISION_COLUMNS} FROM executor_decisions \
             WHERE decision = 'escalate'{pending} ORDER BY id"
        ))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(rows::decision).collect::<Result<_, _>>()?)
    }

    async fn answered_escalations(&self) -> StoreResult<Vec<Decision>> {
        let rows = sqlx::query(&format!(
            "SELECT {DECISION_COLUMNS} FROM executor_decisions \
             WHERE decision = 'escalate' AND resolved_at IS NOT NULL AND applied_at IS NULL \
             ORDER BY id"
        ))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(rows::decision).collect::<Result<_, _>>()?)
    }

    async fn run_escalations(&self, run_id: i64) -> StoreResult<Vec<Decision>> {
        let rows = sqlx::query(&format!(
            "SELECT {DECISION_COLUMNS} FROM executor_decisions \
             WHERE run_id = $1 AND decision = 'escalate' ORDER BY id"
        ))
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(rows::decision).collect::<Result<_, _>>()?)
    }

    async fn resolve_escalation(
        &self,
        id: i64,
        resolution: &str,
        note: Option<&str>,
        by: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<Resolved>> {
        // One statement: a concurrent answer waits on the row lock, then finds the row
        // resolved and updates nothing.
        let recorded = sqlx::query(&format!(
            "UPDATE executor_decisions SET resolution = $2, resolution_note = $3, \
             resolved_by = $4, resolved_at = $5 \
             WHERE id = $1 AND decision = 'escalate' AND resolved_at IS NULL \
             RETURNING {DECISION_COLUMNS}"
        ))
        .bind(id)
        .bind(resolution)
        .bind(note)
        .bind(by)
        .bind(at)
        .fetch_optional(&self.pool)
        .await?;
        if let Some(row) = recorded {
            return Ok(Some(Resolved::Recorded(rows::decision(&row)?)));
        }
        // Read after the update, in a statement of its own, so a winner that committed
        // meanwhile is seen with its answer.
        Ok(self.decision(id).await?.map(|decision| {
            if decision.is_escalation() {
                Resolved::AlreadyResolved(decision)
            } else {
                Resolved::NotAnEscalation(decision)
            }
        }))
    }

    async fn apply_escalation(&self, id: i64, at: DateTime<Utc>) -> StoreResult<bool> {
        let changed = sqlx::query(
            "UPDATE executor_decisions SET applied_at = $2 \
             WHERE id = $1 AND decision = 'escalate' AND resolved_at IS NOT NULL \
             AND applied_at IS NULL",
        )
        .bind(id)
        .bind(at)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(changed == 1)
    }

    async fn record_exchange(&self, exchange: NewExchange) -> StoreResult<Exchanged> {
        let run_id = exchange.message.run_id;
        let mut tx = self.pool.begin().await?;
        // A share lock on the run: a takeover raising its epoch waits for this to end.
        let epoch: Option<i64> =
            sqlx::query_scalar("SELECT lease_epoch FROM executor_runs WHERE id = $1 FOR SHARE")
                .bind(run_id)
                .fetch_optional(&mut *tx)
                .await?;
        if epoch != Some(exchange.lease_epoch) {
            return Err(StoreError::Fenced { run_id });
        }
        if exchange.retry {
            let m = &exchange.message;
            let landed: Option<i64> = sqlx::query_scalar(
                "SELECT id FROM (SELECT id, source, at, line FROM executor_messages \
                 WHERE run_id = $1 ORDER BY id DESC LIMIT $2) AS latest \
                 WHERE source = $3 AND at = $4 AND line = $5",
            )
            .bind(run_id)
            .bind(i64::from(RETRY_LOOKBACK))
            .bind(&m.source)
            .bind(m.at)
            .bind(&m.line)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(message_id) = landed {
                return Ok(Exchanged {
                    message_id,
                    request: None,
                    outbox_ids: Vec::new(),
                    landed_before: true,
                });
            }
        }
        let message_id = insert_message(&mut *tx, &exchange.message).await?;
        let mut outbox_ids = insert_outgoing(&mut tx, &exchange.outgoing).await?;
        let request = match &exchange.request {
            None => None,
            Some(request) => {
                let refused = |reason| StoreError::Exchange { run_id, reason };
                let window = match request.window() {
                    0 => Vec::new(),
                    last => last_messages(&mut *tx, run_id, last).await?,
                };
                let recorded =
                    insert_decision(&mut *tx, &request.decision(&window).map_err(refused)?).await?;
                let answer = request.answer(&recorded, &window).map_err(refused)?;
                outbox_ids.extend(insert_outgoing(&mut tx, &answer.outgoing).await?);
                insert_message(&mut *tx, &answer.message).await?;
                Some((recorded, window))
            }
        };
        tx.commit().await?;
        Ok(Exchanged {
            message_id,
            request,
            outbox_ids,
            landed_before: false,
        })
    }

    async fn record_message(&self, m: &NewMessage) -> StoreResult<i64> {
        Ok(insert_message(&self.pool, m).await?)
    }

    async fn messages(&self, run_id: i64, last: u32) -> StoreResult<Vec<StoredMessage>> {
        last_messages(&self.pool, run_id, last).await
    }

    async fn changes_after(
        &self,
        after: &executor_core::changes::Cursor,
        run_id: Option<i64>,
        limit: u32,
    ) -> StoreResult<executor_core::changes::Changes> {
        let limit = i64::from(limit);
        let events = sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS} FROM executor_events WHERE id > $1 ORDER BY id LIMIT $2"
        ))
        .bind(after.event)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let messages = sqlx::query(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM executor_messages \
             WHERE id > $1 AND ($2::BIGINT IS NULL OR run_id = $2) ORDER BY id LIMIT $3"
        ))
        .bind(after.message)
        .bind(run_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let decisions = sqlx::query(&format!(
            "SELECT {DECISION_COLUMNS} FROM executor_decisions WHERE id > $1 ORDER BY id LIMIT $2"
        ))
        .bind(after.decision)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(executor_core::changes::Changes {
            events: events.iter().map(rows::event).collect::<Result<_, _>>()?,
            messages: messages
                .iter()
                .map(rows::message)
                .collect::<Result<_, _>>()?,
            decisions: decisions
                .iter()
                .map(rows::decision)
                .collect::<Result<_, _>>()?,
        })
    }

    async fn change_cursor(&self) -> StoreResult<executor_core::changes::Cursor> {
        let (event, message, decision): (i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT COALESCE(MAX(id), 0) FROM executor_events)::BIGINT, \
             (SELECT COALESCE(MAX(id), 0) FROM executor_messages)::BIGINT, \
             (SELECT COALESCE(MAX(id), 0) FROM executor_decisions)::BIGINT",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(executor_core::changes::Cursor {
            event,
            message,
            decision,
        })
    }

    async fn report_intake_error(
        &self,
        source: &str,
        path: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO executor_intake_errors (source, path, reason, first_seen, last_seen) \
             VALUES ($1, $2, $3, $4, $4) \
             ON CONFLICT (source, path) DO UPDATE SET reason = excluded.reason, last_seen = excluded.last_seen",
        )
        .bind(source)
        .bind(path)
        .bind(reason)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn retain_intake_errors(
        &self,
        source: &str,
        still_failing: &[String],
    ) -> StoreResult<()> {
        sqlx::query(
            "DELETE FROM executor_intake_errors WHERE source = $1 AND NOT (path = ANY($2))",
        )
        .bind(source)
        .bind(still_failing)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn intake_errors(&self) -> StoreResult<Vec<IntakeError>> {
        let rows = sqlx::query(
            "SELECT source, path, reason, first_seen, last_seen FROM executor_intake_errors ORDER BY source, path",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(rows::intake_error)
            .collect::<Result<_, sqlx::Error>>()?)
    }

    async fn beat(&self, hb: &Heartbeat) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO executor_heartbeats (component, host, pid, started_at, beat_at, stopped_at) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (component, host) DO UPDATE SET pid = excluded.pid, started_at = excluded.started_at, \
             beat_at = excluded.beat_at, stopped_at = excluded.stopped_at, \
             last_error = CASE WHEN executor_heartbeats.started_at = excluded.started_at THEN executor_heartbeats.last_error END, \
             last_error_at = CASE WHEN executor_heartbeats.started_at = excluded.started_at THEN executor_heartbeats.last_error_at END, \
             error_count = CASE WHEN executor_heartbeats.started_at = excluded.started_at THEN executor_heartbeats.error_count ELSE 0 END",
        )
        .bind(&hb.component)
        .bind(&hb.host)
        .bind(hb.pid)
        .bind(hb.started_at)
        .bind(hb.beat_at)
        .bind(hb.stopped_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn record_component_error(
        &self,
        component: &str,
        host: &str,
        message: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE executor_heartbeats SET last_error = $3, last_error_at = $4, error_count = error_count + 1 \
             WHERE component = $1 AND host = $2",
        )
        .bind(component)
        .bind(host)
        .bind(message)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn take_lease(
        &self,
        run_id: i64,
        holder: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        steal_from: Option<&str>,
    ) -> StoreResult<Option<i64>> {
        let mut tx = self.pool.begin().await?;
        let epoch = claim_lease(&mut tx, run_id, holder, now, until, steal_from).await?;
        if epoch.is_some() {
            tx.commit().await?;
        }
        Ok(epoch)
    }

    async fn lease(&self, run_id: i64) -> StoreResult<Option<Lease>> {
        let row = sqlx::query(&format!(
            "SELECT {LEASE_COLUMNS} FROM executor_run_leases WHERE run_id = $1"
        ))
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(rows::lease).transpose()?)
    }

    async fn leases(&self, limit: u32) -> StoreResult<Vec<Lease>> {
        let rows = sqlx::query(&format!(
            "SELECT {LEASE_COLUMNS} FROM executor_run_leases ORDER BY run_id LIMIT $1"
        ))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(rows::lease)
            .collect::<Result<_, sqlx::Error>>()?)
    }

    async fn renew_leases(&self, holder: &str, until: DateTime<Utc>) -> StoreResult<Vec<i64>> {
        let mut runs: Vec<i64> = sqlx::query_scalar(
            "UPDATE executor_run_leases SET expires_at = $2 WHERE holder = $1 RETURNING run_id",
        )
        .bind(holder)
        .bind(until)
        .fetch_all(&self.pool)
        .await?;
        runs.sort_unstable();
        Ok(runs)
    }

    async fn release_lease(&self, run_id: i64, holder: &str) -> StoreResult<()> {
        Ok(drop_lease(&self.pool, run_id, holder).await?)
    }

    async fn pr_memory(&self, run_id: i64) -> StoreResult<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT memory FROM executor_pr_memory WHERE run_id = $1")
                .bind(run_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn pr_look(&self, run_id: i64) -> StoreResult<Option<String>> {
        let row: Option<(String,)> =
            sqlx::query_as("SELECT observation FROM executor_pr_looks WHERE run_id = $1")
                .bind(run_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|(look,)| look))
    }

    async fn save_pr_look(&self, run_id: i64, look: &str, at: DateTime<Utc>) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO executor_pr_looks (run_id, observation, observed_at) VALUES ($1, $2, $3) \
             ON CONFLICT (run_id) DO UPDATE SET observation = excluded.observation, observed_at = excluded.observed_at",
        )
        .bind(run_id)
        .bind(look)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn save_pr_memory(
        &self,
        run_id: i64,
        memory: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO executor_pr_memory (run_id, memory, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (run_id) DO UPDATE SET memory = excluded.memory, updated_at = excluded.updated_at",
        )
        .bind(run_id)
        .bind(memory)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn task_facts(&self, gid: &str) -> StoreResult<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT facts FROM executor_task_facts WHERE task_gid = $1")
                .bind(gid)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn save_task_facts(&self, gid: &str, facts: &str, at: DateTime<Utc>) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO executor_task_facts (task_gid, facts, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (task_gid) DO UPDATE SET facts = excluded.facts, updated_at = excluded.updated_at",
        )
        .bind(gid)
        .bind(facts)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn record_analysis(
        &self,
        gid: &str,
        analysis: &Analysis,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE executor_queue SET priority = $1, complexity = $2, feasibility = $3, \
             analysis_summary = $4, \
             notes = CASE WHEN $5::text IS NULL THEN notes \
                          WHEN notes IS NULL OR notes = '' THEN $5::text \
                          ELSE rtrim(notes, E'\\n') || E'\\n' || $5::text END, \
             updated_at = $6 \
             WHERE task_gid = $7 AND (status IS NULL OR status::text IN ('', 'pending'))",
        )
        .bind(analysis.priority)
        .bind(&analysis.complexity)
        .bind(&analysis.feasibility)
        .bind(&analysis.summary)
        .bind(&analysis.append_notes)
        .bind(at)
        .bind(gid)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 && self.task(gid).await?.is_none() {
            return Err(StoreError::TaskNotFound(gid.to_string()));
        }
        Ok(done.rows_affected() > 0)
    }

    async fn source_cursor(&self, source: &str) -> StoreResult<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT cursor FROM executor_source_cursors WHERE source = $1")
                .bind(source)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn save_source_cursor(
        &self,
        source: &str,
        cursor: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO executor_source_cursors (source, cursor, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (source) DO UPDATE SET cursor = excluded.cursor, updated_at = excluded.updated_at",
        )
        .bind(source)
        .bind(cursor)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn enqueue_outgoing(&self, items: &[NewOutgoing]) -> StoreResult<Vec<i64>> {
        let mut tx = self.pool.begin().await?;
        let ids = insert_outgoing(&mut tx, items).await?;
        tx.commit().await?;
        Ok(ids)
    }

    async fn claim_outgoing(
        &self,
        notifier: &str,
        holder: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Outgoing>> {
        let mut tx = self.pool.begin().await?;
        // The head row stays locked until the claim commits: a concurrent caller waits,
        // then reads the claim (or, once delivered, the next head).
        let row = sqlx::query(&format!(
            "SELECT {OUTBOX_COLUMNS} FROM executor_outbox \
             WHERE notifier = $1 AND delivered_at IS NULL ORDER BY id LIMIT 1 FOR UPDATE"
        ))
        .bind(notifier)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Ok(None);
        };
        let head = rows::outgoing(&row)?;
        let held_by_another = head.claimed_until.is_some_and(|until| until > now)
            && head.claimed_by.as_deref() != Some(holder);
        if head.next_attempt_at > now || held_by_another {
            tx.rollback().await?;
            return Ok(None);
        }
        sqlx::query("UPDATE executor_outbox SET claimed_by = $2, claimed_until = $3 WHERE id = $1")
            .bind(head.id)
            .bind(holder)
            .bind(until)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(head))
    }

    async fn take_over_outgoing(
        &self,
        id: i64,
        dead: &str,
        holder: &str,
        until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let changed = sqlx::query(
            "UPDATE executor_outbox SET claimed_by = $3, claimed_until = $4 \
             WHERE id = $1 AND claimed_by = $2 AND delivered_at IS NULL",
        )
        .bind(id)
        .bind(dead)
        .bind(holder)
        .bind(until)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(changed == 1)
    }

    async fn outgoing_delivered(&self, id: i64, at: DateTime<Utc>) -> StoreResult<()> {
        sqlx::query(
            "UPDATE executor_outbox SET delivered_at = $2, claimed_by = NULL, \
             claimed_until = NULL WHERE id = $1",
        )
        .bind(id)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn outgoing_failed(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE executor_outbox SET attempts = attempts + 1, last_error = $2, \
             next_attempt_at = $3, claimed_by = NULL, claimed_until = NULL WHERE id = $1",
        )
        .bind(id)
        .bind(error)
        .bind(next_attempt_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn outbox(
        &self,
        notifier: Option<&str>,
        undelivered_only: bool,
        limit: u32,
    ) -> StoreResult<Vec<Outgoing>> {
        let rows = sqlx::query(&format!(
            "SELECT {OUTBOX_COLUMNS} FROM executor_outbox \
             WHERE ($1::text IS NULL OR notifier = $1) AND (NOT $2 OR delivered_at IS NULL) \
             ORDER BY id LIMIT $3"
        ))
        .bind(notifier)
        .bind(undelivered_only)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(rows::outgoing).collect::<Result<_, _>>()?)
    }

    async fn outbox_backlog(&self) -> StoreResult<Vec<OutboxBacklog>> {
        let rows = sqlx::query(
            "SELECT head.notifier, line.undelivered, head.created_at, head.attempts::bigint, \
             head.last_error \
             FROM (SELECT notifier, count(*) AS undelivered, min(id) AS head_id \
                   FROM executor_outbox WHERE delivered_at IS NULL GROUP BY notifier) AS line \
             JOIN executor_outbox AS head ON head.id = line.head_id \
             ORDER BY head.notifier",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(rows::outbox_backlog)
            .collect::<Result<_, sqlx::Error>>()?)
    }

    async fn claim_chat_message(
        &self,
        chat: &str,
        message_id: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let inserted = sqlx::query(
            "INSERT INTO executor_chat_inbox (chat, message_id, received_at) VALUES ($1, $2, $3) \
             ON CONFLICT (chat, message_id) DO NOTHING",
        )
        .bind(chat)
        .bind(message_id)
        .bind(at)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(inserted == 1)
    }

    async fn release_chat_message(&self, chat: &str, message_id: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM executor_chat_inbox WHERE chat = $1 AND message_id = $2")
            .bind(chat)
            .bind(message_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn link_children(
        &self,
        parent_gid: &str,
        children: &[TaskLink],
        dependencies: &[TaskDependency],
    ) -> StoreResult<()> {
        check_decomposition(parent_gid, children, dependencies)?;
        // Leaving early drops the transaction, which rolls back everything this call wrote.
        let mut tx = self.pool.begin().await?;
        for child in children {
            let inserted = sqlx::query(
                "INSERT INTO executor_task_links (task_gid, parent_gid, depth, key, position, \
                 created_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (task_gid) DO NOTHING",
            )
            .bind(&child.task_gid)
            .bind(&child.parent_gid)
            .bind(i64::from(child.depth))
            .bind(&child.key)
            .bind(i64::from(child.position))
            .bind(child.created_at)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if inserted == 0 {
                return Err(StoreError::AlreadyLinked(child.task_gid.clone()));
            }
        }
        for edge in dependencies {
            sqlx::query(
                "INSERT INTO executor_task_dependencies (task_gid, depends_on) VALUES ($1, $2) \
                 ON CONFLICT (task_gid, depends_on) DO NOTHING",
            )
            .bind(&edge.task_gid)
            .bind(&edge.depends_on)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn task_link(&self, task_gid: &str) -> StoreResult<Option<TaskLink>> {
        let row = sqlx::query(&format!(
            "SELECT {LINK_COLUMNS} FROM executor_task_links WHERE task_gid = $1"
        ))
        .bind(task_gid)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(rows::link).transpose()?)
    }

    async fn children(&self, parent_gid: &str) -> StoreResult<Vec<TaskLink>> {
        let rows = sqlx::query(&format!(
            "SELECT {LINK_COLUMNS} FROM executor_task_links WHERE parent_gid = $1 \
             ORDER BY position, task_gid COLLATE \"C\""
        ))
        .bind(parent_gid)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(rows::link).collect::<Result<_, _>>()?)
    }

    async fn goals(&self, limit: u32) -> StoreResult<Vec<(String, i64)>> {
        Ok(sqlx::query_as(
            "SELECT parent_gid, count(*)::bigint FROM executor_task_links WHERE depth = 1 \
             GROUP BY parent_gid ORDER BY max(created_at) DESC, parent_gid LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    async fn dependencies(&self, task_gid: &str) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT depends_on FROM executor_task_dependencies WHERE task_gid = $1 \
             ORDER BY depends_on COLLATE \"C\"",
        )
        .bind(task_gid)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn dependencies_of_children(&self, parent_gid: &str) -> StoreResult<Vec<TaskDependency>> {
        let rows = sqlx::query(
            "SELECT d.task_gid, d.depends_on FROM executor_task_dependencies AS d \
             JOIN executor_task_links AS l ON l.task_gid = d.task_gid \
             WHERE l.parent_gid = $1 \
             ORDER BY d.task_gid COLLATE \"C\", d.depends_on COLLATE \"C\"",
        )
        .bind(parent_gid)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(rows::dependency)
            .collect::<Result<_, sqlx::Error>>()?)
    }

    async fn unmet_dependencies(&self, task_gid: &str) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT d.depends_on FROM executor_task_dependencies AS d \
             LEFT JOIN executor_queue AS q ON q.task_gid = d.depends_on \
             WHERE d.task_gid = $1 AND q.status::text IS DISTINCT FROM 'done' \
             ORDER BY d.depends_on COLLATE \"C\"",
        )
        .bind(task_gid)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn save_agent_session(&self, session: &AgentSession) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO executor_agent_sessions (name, agent, session_id, updated_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO UPDATE SET agent = excluded.agent, \
             session_id = excluded.session_id, updated_at = excluded.updated_at",
        )
        .bind(&session.name)
        .bind(&session.agent)
        .bind(&session.session_id)
        .bind(session.updated_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn agent_session(&self, name: &str) -> StoreResult<Option<AgentSession>> {
        let row = sqlx::query(
            "SELECT name, agent, session_id, updated_at FROM executor_agent_sessions \
             WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(session_from_row).transpose()?)
    }

    async fn pause_agent(&self, pause: &AgentPause) -> StoreResult<bool> {
        let sql = super::PAUSE_AGENT.replace('?', "$");
        let since: DateTime<Utc> = sqlx::query_scalar(&sql)
            .bind(&pause.agent)
            .bind(pause.since)
            .bind(pause.until)
            .bind(&pause.reason)
            .bind(pause.run_id)
            .bind(&pause.task_gid)
            .fetch_one(&self.pool)
            .await?;
        // Postgres keeps microseconds.
        Ok(since.timestamp_micros() == pause.since.timestamp_micros())
    }

    async fn agent_pauses(&self) -> StoreResult<Vec<AgentPause>> {
        let rows = sqlx::query(
            "SELECT agent, since, until, reason, run_id, task_gid FROM executor_agent_pauses \
             ORDER BY agent COLLATE \"C\"",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(rows::pause)
            .collect::<Result<Vec<_>, sqlx::Error>>()?)
    }

    async fn pause_service(&self, pause: &super::ServicePause) -> StoreResult<()> {
        let sql = super::PAUSE_SERVICE.replace('?', "$");
        sqlx::query(&sql)
            .bind(&pause.service)
            .bind(pause.since)
            .bind(pause.until)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn service_pauses(&self, now: DateTime<Utc>) -> StoreResult<Vec<super::ServicePause>> {
        let rows = sqlx::query(
            "SELECT service, since, until FROM executor_service_pauses \
             WHERE until > $1 ORDER BY service COLLATE \"C\"",
        )
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(super::ServicePause {
                    service: row.try_get(0)?,
                    since: row.try_get(1)?,
                    until: row.try_get(2)?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(Into::into)
    }

    async fn record_net_refusals(
        &self,
        refused: &[executor_core::net_refusals::NetRefusal],
        event: Option<&super::NetRefusalEvent>,
    ) -> StoreResult<()> {
        let sql = super::ADD_NET_REFUSAL.replace('?', "$");
        let mut tx = self.pool.begin().await?;
        for row in refused {
            sqlx::query(&sql)
                .bind(row.run_id)
                .bind(&row.task_gid)
                .bind(&row.host)
                .bind(i64::from(row.port))
                .bind(row.kind.as_str())
                .bind(i64::try_from(row.count).unwrap_or(i64::MAX))
                .bind(row.first_at)
                .bind(row.last_at)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(e) = event {
            insert_event(
                &mut tx,
                EventRow {
                    gid: &e.task_gid,
                    run_id: Some(e.run_id),
                    at: e.event.at,
                    kind: &e.event.kind,
                    from: None,
                    to: None,
                    actor: &e.event.actor,
                    detail: e.event.detail.as_deref(),
                },
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn net_refusals(
        &self,
        gid: &str,
    ) -> StoreResult<Vec<executor_core::net_refusals::NetRefusal>> {
        let rows = sqlx::query(&format!(
            "SELECT {} FROM executor_net_refusals WHERE task_gid = $1 \
             ORDER BY run_id, first_at, host COLLATE \"C\", port",
            super::NET_REFUSAL_COLUMNS
        ))
        .bind(gid)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(rows::net_refusal)
            .collect::<Result<Vec<_>, sqlx::Error>>()?)
    }

    async fn summary(&self) -> StoreResult<StoreSummary> {
        let found: Vec<(QueueStatus, i64)> =
            sqlx::query("SELECT status::text, count(*) FROM executor_queue GROUP BY status")
                .fetch_all(&self.pool)
                .await?
                .iter()
                .map(|row| {
                    Ok((
                        QueueStatus::from_column(row.try_get::<Option<String>, _>(0)?.as_deref()),
                        row.try_get::<i64, _>(1)?,
                    ))
                })
                .collect::<Result<_, sqlx::Error>>()?;
        let live_workers: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM executor_runs WHERE worker_pid IS NOT NULL \
             AND state IN ('queued', 'in_progress', 'pr')",
        )
        .fetch_one(&self.pool)
        .await?;
        let pending_escalations: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM executor_decisions WHERE decision = 'escalate' AND resolved_at IS NULL",
        )
        .fetch_one(&self.pool)
        .await?;
        let heartbeats = sqlx::query(
            "SELECT component, host, pid, started_at, beat_at, stopped_at FROM executor_heartbeats \
             ORDER BY component, host",
        )
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| {
            rows::heartbeat(row)
        })
        .collect::<Result<_, sqlx::Error>>()?;
        let component_errors = sqlx::query(
            "SELECT component, host, last_error, last_error_at, error_count FROM executor_heartbeats \
             WHERE last_error IS NOT NULL ORDER BY component, host",
        )
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| {
            rows::component_error(row)
        })
        .collect::<Result<_, sqlx::Error>>()?;
        Ok(StoreSummary {
            queue: complete_counts(found),
            live_workers,
            pending_escalations,
            intake_errors: self.intake_errors().await?,
            heartbeats,
            component_errors,
        })
    }

    async fn take_delivery(
        &self,
        source: &str,
        delivery: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let inserted = sqlx::query(
            "INSERT INTO executor_webhook_deliveries (source, delivery_id, received_at) \
             VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        )
        .bind(source)
        .bind(delivery)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(inserted.rows_affected() == 1)
    }

    async fn wake(&self, wake: super::wake::Wake) -> StoreResult<()> {
        // Delivered by Postgres to every listener when this statement commits.
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(super::wake::CHANNEL)
            .bind(wake.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn listen_wakes(&self) -> StoreResult<super::wake::Wakes> {
        super::wake::listen_postgres(self.pool.clone()).await
    }

    async fn change_hints(&self) -> StoreResult<super::changed::ChangeHints> {
        super::changed::listen_postgres(self.pool.clone()).await
    }
}

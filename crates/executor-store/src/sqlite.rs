//! The embedded store: one SQLite file in WAL mode.
//!
//! One connection, owned by a thread of its own that takes the store's calls in turn, is
//! plenty for one process (a call is one hop to that thread and one back, never a thread of
//! the blocking pool waiting on a lock); several processes (the daemon and the CLI) share the file through SQLite's
//! own locking, with a busy timeout so that a short write by one never fails the other.
//! Writes take the write lock up front (`BEGIN IMMEDIATE`) so two writers never deadlock.
//! `synchronous = NORMAL` in WAL mode keeps every committed transaction across a crash of
//! any process; a power loss or an OS crash can cost the commits of the last seconds that
//! the OS had not yet written out (never the database's consistency).

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::config::DbConfig;
use rusqlite::types::Type;
use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};

use super::migrations::{self, Migration};
use super::rows::{
    self, Cells, DECISION_COLUMNS, EVENT_COLUMNS, LEASE_COLUMNS, MESSAGE_COLUMNS, SPEND_SELECT,
};
use super::{check_decomposition, complete_counts, Store, StoreError, StoreResult};
use executor_core::exchange::{Exchanged, NewExchange, RETRY_LOOKBACK};
use executor_core::outbox::{NewOutgoing, OutboxBacklog, Outgoing};
use executor_core::queue::QueueStatus;
use executor_core::record::{
    ChangedTask, ComponentError, Decision, Heartbeat, IntakeError, Lease, NewDecision, NewMessage,
    Resolved, Run, StatusChange, StoreSummary, StoredMessage, TaskEvent, WorkerEnd, WorkerRecord,
};
use executor_core::run::RunState;
use executor_core::task::{Analysis, NewTask, Task, TaskChanges, UpsertOutcome};
use executor_core::time;
use executor_core::tree::{AgentSession, TaskDependency, TaskLink};
use executor_core::usage_limit::AgentPause;

const TASK_COLUMNS: &str = "id, task_gid, added_at, updated_at, source, description, notes, \
     status, priority, complexity, feasibility, analysis_summary, executor_run_id";
const RUN_COLUMNS: &str = "id, task_gid, worktree_path, branch_name, pr_url, pr_number, \
     thread_id, started_at, updated_at, completed_at, state, ci_attempts, worker_session_id, \
     worker_last_update, worker_pid, worker_stuck_count, lifecycle, lease_epoch";
const OUTBOX_COLUMNS: &str = "id, notifier, persona, priority, task_gid, run_id, body, \
     created_at, attempts, next_attempt_at, delivered_at, last_error, claimed_by, claimed_until";
const LINK_COLUMNS: &str = "task_gid, parent_gid, depth, key, position, created_at";

/// The SQLite implementation of [`Store`].
pub struct SqliteStore {
    path: PathBuf,
    /// The calls for the connection's thread; dropping the store ends the thread, which
    /// closes the connection.
    calls: mpsc::Sender<Call>,
}

/// One call on the connection, run on its thread.
type Call = Box<dyn FnOnce(&mut Connection) + Send>;

impl SqliteStore {
    /// Opens the database at `path`, creating the file and its parent folder if needed,
    /// and brings its schema up to date.
    pub async fn open(path: &Path) -> StoreResult<Self> {
        let path = path.to_path_buf();
        let opened_path = path.clone();
        let (calls, queue) = mpsc::channel::<Call>();
        let (opened, ready) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("executor-store".into())
            .spawn(move || {
                let mut conn = match open_blocking(&opened_path) {
                    Ok(conn) => {
                        let _ = opened.send(Ok(()));
                        conn
                    }
                    Err(error) => {
                        let _ = opened.send(Err(error));
                        return;
                    }
                };
                while let Ok(call) = queue.recv() {
                    // A call that panics answers its caller with an error (its reply is
                    // dropped); the thread goes on with the next.
                    let _ =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(&mut conn)));
                }
            })
            .map_err(|e| StoreError::Worker(format!("cannot start the store's thread: {e}")))?;
        ready
            .await
            .map_err(|_| StoreError::Worker("the store's thread ended while opening".into()))??;
        Ok(Self { path, calls })
    }

    /// Runs `work` on the connection's thread.
    async fn call<T, F>(&self, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.call_store(move |conn| Ok(work(conn)?)).await
    }

    /// Like [`Self::call`], for work that can fail with a store error of its own.
    async fn call_store<T, F>(&self, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, CallError> + Send + 'static,
    {
        // `EXECUTOR_LOG=executor_store=trace` lists every call, by the method that made it.
        tracing::trace!(call = std::any::type_name::<F>(), "store call");
        let path = self.path.clone();
        let (reply, answer) = tokio::sync::oneshot::channel();
        let call: Call = Box::new(move |conn| {
            let _ = reply.send(work(conn).map_err(|e| e.into_store_error(&path)));
        });
        let lost = || StoreError::Worker("the store's thread dropped the call".into());
        self.calls.send(call).map_err(|_| lost())?;
        answer.await.map_err(|_| lost())?
    }
}

/// An error inside a blocking call: SQLite's own, or one of the store's.
enum CallError {
    Sqlite(rusqlite::Error),
    Store(StoreError),
}

impl CallError {
    fn into_store_error(self, path: &Path) -> StoreError {
        match self {
            CallError::Sqlite(source) => StoreError::Sqlite {
                path: path.to_path_buf(),
                source,
            },
            CallError::Store(error) => error,
        }
    }
}

impl From<rusqlite::Error> for CallError {
    fn from(error: rusqlite::Error) -> Self {
        CallError::Sqlite(error)
    }
}

impl From<StoreError> for CallError {
    fn from(error: StoreError) -> Self {
        CallError::Store(error)
    }
}

fn open_blocking(path: &Path) -> StoreResult<Connection> {
    let sqlite_error = |source| StoreError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| StoreError::Sqlite {
            path: path.to_path_buf(),
            source: rusqlite::Error::InvalidPath(PathBuf::from(format!(
                "{}: cannot create folder: {e}",
                parent.display()
            ))),
        })?;
    }
    let mut conn = Connection::open(path).map_err(sqlite_error)?;
    // Every statement of the store is prepared once per process: rusqlite's default cache
    // of 16 is smaller than the store's set of statements, so a run's calls kept evicting
    // each other and re-parsing their SQL (an eighth of a no-op run's CPU).
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sqlite_error)?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
         PRAGMA mmap_size = 268435456;",
    )
    .map_err(sqlite_error)?;
    keep_wal_between_processes(&conn, path).map_err(sqlite_error)?;
    migrate(&mut conn, migrations::SQLITE).map_err(|e| e.into_store_error(path))?;
    Ok(conn)
}

/// Room for every distinct statement the store prepares (about a hundred), with margin.
const STATEMENT_CACHE: usize = 256;

/// How long a statement waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Past this size the WAL is folded back into the database when a connection opens.
const WAL_FOLD_BYTES: u64 = 512 * 1024;

/// Each CLI command is a short process that is often the database's only connection. Left
/// to the default, every one of them would create the WAL, then checkpoint it into the
/// database and delete it at exit: four fsyncs for one `executor add`. Instead the WAL is
/// left in place at close and folded back (`wal_checkpoint(TRUNCATE)`) once it passes
/// [`WAL_FOLD_BYTES`], so that cost is paid once per few dozen commands. A crash of any
/// process loses nothing (SQLite replays the WAL on the next open); what a power loss can
/// cost is what `synchronous = NORMAL` always risks, the commits not yet written out. A
/// copy of the database must include `executor.db-wal` (or use SQLite's `.backup`).
fn keep_wal_between_processes(conn: &Connection, path: &Path) -> rusqlite::Result<()> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal_len = std::fs::metadata(PathBuf::from(wal))
        .map(|m| m.len())
        .unwrap_or(0);
    if wal_len > WAL_FOLD_BYTES {
        // A TRUNCATE checkpoint waits (busy timeout) for readers to leave the WAL; this one
        // must not: with another process reading, skip it, and a later open folds the WAL.
        conn.busy_timeout(Duration::ZERO)?;
        if let Err(error) = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
            tracing::debug!(%error, "WAL not folded this time");
        }
        conn.busy_timeout(BUSY_TIMEOUT)?;
    }
    Ok(())
}

/// Applies the migrations newer than the database's `user_version`, each in its own
/// transaction taken with the write lock, so two processes opening a new file at once
/// apply each step exactly once.
fn migrate(conn: &mut Connection, list: &[Migration]) -> Result<(), CallError> {
    let known = migrations::latest(list);
    let current: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if current > known {
        return Err(StoreError::SchemaTooNew {
            found: current,
            known,
        }
        .into());
    }
    if current == known {
        return Ok(());
    }
    for migration in list {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let applied: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        if migration.version <= applied {
            continue;
        }
        tx.execute_batch(migration.sql)
            .map_err(|e| StoreError::Migration {
                version: migration.version,
                name: migration.name,
                message: e.to_string(),
            })?;
        tx.execute_batch(&format!("PRAGMA user_version = {}", migration.version))?;
        tx.commit()?;
    }
    Ok(())
}

/// What the outcome figures read of each run started since `?1`, the newest `?2` (the
/// columns of [`rows::outcome`]). The workers are summed per run in one pass over those
/// of the window's runs (their ids are at least the window's first), not once per run.
const OUTCOME_SELECT: &str =
    "SELECT r.id, r.task_gid, q.source, r.state, r.started_at, r.completed_at, r.pr_number, \
     w.agent, w.cost, w.fix_ci, w.fix_comments, m.memory, f.facts, \
     CASE WHEN r.state = 'abandoned' THEN EXISTS (SELECT 1 FROM executor_events e \
       WHERE e.task_gid = r.task_gid AND e.actor = 'owner' AND e.detail LIKE ?3 \
       AND e.at >= r.started_at AND e.at <= r.updated_at) ELSE 0 END \
     FROM executor_runs r \
     LEFT JOIN executor_queue q ON q.task_gid = r.task_gid \
     LEFT JOIN (SELECT run_id, MIN(agent) AS agent, \
                CASE WHEN COUNT(cost_usd) > 0 THEN TOTAL(cost_usd) END AS cost, \
                SUM(phase = 'fix_ci') AS fix_ci, SUM(phase = 'fix_comments') AS fix_comments \
                FROM executor_workers \
                WHERE run_id >= (SELECT MIN(id) FROM executor_runs WHERE started_at >= ?1) \
                GROUP BY run_id) w ON w.run_id = r.id \
     LEFT JOIN executor_pr_memory m ON m.run_id = r.id \
     LEFT JOIN executor_task_facts f ON f.task_gid = r.task_gid \
     WHERE r.started_at >= ?1 ORDER BY r.id DESC LIMIT ?2";

/// `words` as a list of SQL string literals (fixed words of the code, never input).
fn quoted(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| format!("'{w}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A time that must be there.
fn needed_time(row: &Row<'_>, index: usize) -> rusqlite::Result<DateTime<Utc>> {
    ts_opt(row, index)?.ok_or(rusqlite::Error::InvalidColumnType(
        index,
        "a time".into(),
        rusqlite::types::Type::Null,
    ))
}

/// A time as SQLite keeps it (see `core::time`).
fn text(at: &DateTime<Utc>) -> String {
    time::format_utc(at)
}

fn ts_opt(row: &Row<'_>, index: usize) -> rusqlite::Result<Option<DateTime<Utc>>> {
    match row.get_ref(index)?.as_str_or_null()? {
        None => Ok(None),
        Some(value) => time::parse_utc(value).map(Some).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                index,
                Type::Text,
                format!("`{value}` is not a timestamp").into(),
            )
        }),
    }
}

/// A value of a shared write, as SQLite stores it (times as text).
impl rusqlite::ToSql for rows::Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value};
        Ok(match *self {
            rows::Value::Int(n) => ToSqlOutput::Owned(n.map_or(Value::Null, Value::Integer)),
            rows::Value::Text(t) => t.map_or(ToSqlOutput::Owned(Value::Null), |t| {
                ToSqlOutput::Borrowed(t.into())
            }),
            rows::Value::Time(at) => {
                ToSqlOutput::Owned(at.map_or(Value::Null, |at| Value::Text(text(&at))))
            }
        })
    }
}

/// A SQLite row, read cell by cell for the shared mapping (times are stored as text).
impl Cells for Row<'_> {
    type Error = rusqlite::Error;
    fn int(&self, index: usize) -> rusqlite::Result<Option<i64>> {
        self.get(index)
    }
    fn real(&self, index: usize) -> rusqlite::Result<Option<f64>> {
        self.get(index)
    }
    fn flag(&self, index: usize) -> rusqlite::Result<Option<bool>> {
        self.get(index)
    }
    fn text(&self, index: usize) -> rusqlite::Result<Option<String>> {
        self.get(index)
    }
    fn time(&self, index: usize) -> rusqlite::Result<Option<DateTime<Utc>>> {
        ts_opt(self, index)
    }
    fn bad(&self, index: usize, why: String) -> rusqlite::Error {
        rusqlite::Error::FromSqlConversionFailure(index, Type::Text, why.into())
    }
}

fn task_from_row(row: &Row<'_>) -> rusqlite::Result<Task> {
    rows::task(row)
}

fn run_from_row(row: &Row<'_>) -> rusqlite::Result<Run> {
    rows::run(row)
}

/// Up to `limit` tasks of `status` (any with `None`) past `bound` by id: after it, oldest
/// first, or (`newest`) before it, newest first.
fn task_range(
    conn: &Connection,
    status: Option<&QueueStatus>,
    newest: bool,
    bound: i64,
    limit: u32,
) -> rusqlite::Result<Vec<Task>> {
    let (past, order) = if newest { ("<", "DESC") } else { (">", "ASC") };
    let select = format!("SELECT {TASK_COLUMNS} FROM executor_queue WHERE id {past} ?1");
    match status {
        None => conn
            .prepare_cached(&format!("{select} ORDER BY id {order} LIMIT ?2"))?
            .query_map(params![bound, limit], task_from_row)?
            .collect(),
        Some(QueueStatus::Pending) => pending_tasks(conn, newest, bound, limit),
        Some(status) => conn
            .prepare_cached(&format!(
                "{select} AND status = ?3 ORDER BY id {order} LIMIT ?2"
            ))?
            .query_map(params![bound, limit, status.as_str()], task_from_row)?
            .collect(),
    }
}

/// Up to `limit` pending tasks (stored with no status, an empty one or `pending`) past
/// `bound`: the newest below it, or the oldest above it. Each of the three is one index
/// range, merged here: SQLite's plan for the three at once sorts every pending task, which
/// on a large queue costs more than the page.
fn pending_tasks(
    conn: &Connection,
    newest: bool,
    bound: i64,
    limit: u32,
) -> rusqlite::Result<Vec<Task>> {
    let (past, order) = if newest { ("<", "DESC") } else { (">", "ASC") };
    let mut found = Vec::new();
    for status in ["status IS NULL", "status = ''", "status = 'pending'"] {
        let page: Vec<Task> = conn
            .prepare_cached(&format!(
                "SELECT {TASK_COLUMNS} FROM executor_queue WHERE {status} AND id {past} ?1 \
                 ORDER BY id {order} LIMIT ?2"
            ))?
            .query_map(params![bound, limit], task_from_row)?
            .collect::<rusqlite::Result<_>>()?;
        found.extend(page);
    }
    if newest {
        found.sort_by_key(|t| std::cmp::Reverse(t.id));
    } else {
        found.sort_by_key(|t| t.id);
    }
    found.truncate(limit as usize);
    Ok(found)
}

fn spend_from_row(row: &Row<'_>) -> rusqlite::Result<executor_core::spend::SpendRow> {
    rows::spend(row)
}

fn event_from_row(row: &Row<'_>) -> rusqlite::Result<TaskEvent> {
    rows::event(row)
}

/// Writes one decision and reads it back as recorded.
fn insert_decision(conn: &Connection, d: &NewDecision) -> rusqlite::Result<Decision> {
    conn.prepare_cached(
        "INSERT INTO executor_decisions (task_gid, run_id, at, role, action, decision, rule_id, detail, \
         tool_use_id, message_window, confined) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        d.task_gid,
        d.run_id,
        text(&d.at),
        d.role,
        d.action,
        d.decision,
        d.rule_id,
        d.detail,
        d.tool_use_id,
        d.message_window,
        d.confined
    ])?;
    let id = conn.last_insert_rowid();
    conn.prepare_cached(&format!(
        "SELECT {DECISION_COLUMNS} FROM executor_decisions WHERE id = ?1"
    ))?
    .query_row([id], decision_from_row)
}

/// Writes one message; its id.
fn insert_message(conn: &Connection, m: &NewMessage) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO executor_messages (run_id, task_gid, at, source, tag, kind, args, text, line) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        m.run_id,
        m.task_gid,
        text(&m.at),
        m.source,
        m.tag,
        m.kind,
        m.args,
        m.text,
        m.line
    ])?;
    Ok(conn.last_insert_rowid())
}

/// The last `last` messages of a run, oldest first.
fn last_messages(
    conn: &Connection,
    run_id: i64,
    last: u32,
) -> rusqlite::Result<Vec<StoredMessage>> {
    conn.prepare_cached(&format!(
        "SELECT {MESSAGE_COLUMNS} FROM (SELECT {MESSAGE_COLUMNS} FROM executor_messages \
         WHERE run_id = ?1 ORDER BY id DESC LIMIT ?2) ORDER BY id"
    ))?
    .query_map(params![run_id, last], message_from_row)?
    .collect()
}

/// Writes outbox rows in order (inside the caller's transaction); their ids.
fn insert_outgoing(conn: &Connection, items: &[NewOutgoing]) -> rusqlite::Result<Vec<i64>> {
    let mut ids = Vec::with_capacity(items.len());
    for item in items {
        conn.prepare_cached(
            "INSERT INTO executor_outbox (notifier, persona, priority, task_gid, run_id, body, \
             created_at, next_attempt_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
        )?
        .execute(params![
            item.notifier,
            item.persona,
            item.priority.as_str(),
            item.task_gid,
            item.run_id,
            item.body,
            text(&item.created_at)
        ])?;
        ids.push(conn.last_insert_rowid());
    }
    Ok(ids)
}

fn decision_from_row(row: &Row<'_>) -> rusqlite::Result<Decision> {
    rows::decision(row)
}

fn select_decision(conn: &Connection, id: i64) -> rusqlite::Result<Option<Decision>> {
    conn.prepare_cached(&format!(
        "SELECT {DECISION_COLUMNS} FROM executor_decisions WHERE id = ?1"
    ))?
    .query_row([id], decision_from_row)
    .optional()
}

fn message_from_row(row: &Row<'_>) -> rusqlite::Result<StoredMessage> {
    rows::message(row)
}

fn outgoing_from_row(row: &Row<'_>) -> rusqlite::Result<Outgoing> {
    rows::outgoing(row)
}

fn link_from_row(row: &Row<'_>) -> rusqlite::Result<TaskLink> {
    rows::link(row)
}

fn select_task(conn: &Connection, gid: &str) -> rusqlite::Result<Option<Task>> {
    conn.prepare_cached(&format!(
        "SELECT {TASK_COLUMNS} FROM executor_queue WHERE task_gid = ?1"
    ))?
    .query_row([gid], task_from_row)
    .optional()
}

/// Writes `r`'s row if its lease epoch is still the stored one; the rows changed (0: the
/// lease is gone, nothing written).
fn update_run(conn: &Connection, r: &Run) -> rusqlite::Result<usize> {
    let lifecycle = crate::lifecycle_column(r.lifecycle.as_ref());
    conn.prepare_cached(&rows::numbered(rows::UPDATE_RUN))?
        .execute(rusqlite::params_from_iter(rows::run_values(
            r,
            lifecycle.as_deref(),
        )))
}

/// Inserts worker `w`'s start record; its id.
fn insert_worker(conn: &Connection, w: &WorkerRecord) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO executor_workers (run_id, phase, host, pid, start_time, started_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        w.run_id,
        w.phase,
        w.host,
        w.pid,
        w.start_time,
        text(&w.started_at)
    ])?;
    Ok(conn.last_insert_rowid())
}

/// Records worker `end.id`'s end, unless it is recorded already.
fn record_end(conn: &Connection, end: &WorkerEnd) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE executor_workers SET ended_at = ?2, outcome = ?3 WHERE id = ?1 AND ended_at IS NULL",
    )?
    .execute(params![end.id, text(&end.at), end.outcome])?;
    Ok(())
}

/// Moves a task by `change` (checked against the status it is in) and records the event;
/// the task as moved. Part of the caller's transaction.
fn move_task(conn: &Connection, change: &StatusChange) -> Result<Task, CallError> {
    let stored = select_task(conn, &change.task_gid)?
        .ok_or_else(|| StoreError::TaskNotFound(change.task_gid.clone()))?;
    if stored.status != change.from {
        return Err(StoreError::StatusConflict {
            gid: change.task_gid.clone(),
            expected: change.from.to_string(),
            actual: stored.status.to_string(),
        }
        .into());
    }
    conn.prepare_cached(
        "UPDATE executor_queue SET status = ?2, updated_at = ?3 WHERE task_gid = ?1",
    )?
    .execute(params![
        change.task_gid,
        change.to.as_str(),
        text(&change.event.at)
    ])?;
    insert_event(
        conn,
        &change.task_gid,
        stored.executor_run_id,
        change.event.at,
        &change.event.kind,
        Some(change.from.as_str()),
        Some(change.to.as_str()),
        &change.event.actor,
        change.event.detail.as_deref(),
    )?;
    Ok(select_task(conn, &change.task_gid)?
        .ok_or_else(|| StoreError::TaskNotFound(change.task_gid.clone()))?)
}

/// Inserts a `queued` run of task `gid` and links it as the task's run. Part of the
/// caller's transaction.
fn insert_run(conn: &Connection, gid: &str, at: DateTime<Utc>) -> Result<Run, CallError> {
    let Some(task) = select_task(conn, gid)? else {
        return Err(StoreError::TaskNotFound(gid.to_string()).into());
    };
    // The text this run is given, kept: the task's own text may be edited later.
    conn.prepare_cached(
        "INSERT INTO executor_runs (task_gid, started_at, updated_at, state, task_text) \
         VALUES (?1, ?2, ?2, ?3, ?4)",
    )?
    .execute(params![
        gid,
        text(&at),
        RunState::Queued.as_str(),
        task.description
    ])?;
    let run_id = conn.last_insert_rowid();
    conn.prepare_cached(
        "UPDATE executor_queue SET executor_run_id = ?2, updated_at = ?3 WHERE task_gid = ?1",
    )?
    .execute(params![gid, run_id, text(&at)])?;
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM executor_runs WHERE id = ?1"
        ))?
        .query_row([run_id], run_from_row)?)
}

/// Takes run `run_id`'s lease for `holder` if it is free, expired, `holder`'s own or
/// `steal_from`'s; the run's new lease epoch, `None` when another holds it. Part of the
/// caller's transaction.
fn claim_lease(
    conn: &Connection,
    run_id: i64,
    holder: &str,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
    steal_from: Option<&str>,
) -> rusqlite::Result<Option<i64>> {
    let changed = conn
        .prepare_cached(
            "INSERT INTO executor_run_leases (run_id, holder, expires_at) VALUES (?1, ?2, ?4) \
             ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at \
             WHERE executor_run_leases.expires_at < ?3 \
             OR executor_run_leases.holder = excluded.holder \
             OR executor_run_leases.holder = ?5",
        )?
        .execute(params![run_id, holder, text(&now), text(&until), steal_from])?;
    if changed != 1 {
        return Ok(None);
    }
    // Every claim starts a new epoch: a save by an earlier claimant no longer lands.
    let epoch: i64 = conn
        .prepare_cached(
            "UPDATE executor_runs SET lease_epoch = lease_epoch + 1 WHERE id = ?1 RETURNING lease_epoch",
        )?
        .query_row([run_id], |row| row.get(0))
        .optional()?
        .unwrap_or(0);
    Ok(Some(epoch))
}

/// Deletes `holder`'s lease of run `run_id`, if it holds it.
fn drop_lease(conn: &Connection, run_id: i64, holder: &str) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM executor_run_leases WHERE run_id = ?1 AND holder = ?2")?
        .execute(params![run_id, holder])?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn insert_event(
    conn: &Connection,
    gid: &str,
    run_id: Option<i64>,
    at: DateTime<Utc>,
    kind: &str,
    from: Option<&str>,
    to: Option<&str>,
    actor: &str,
    detail: Option<&str>,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO executor_events (task_gid, run_id, at, kind, from_status, to_status, actor, detail) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![gid, run_id, text(&at), kind, from, to, actor, detail])?;
    Ok(())
}

#[async_trait]
impl Store for SqliteStore {
    async fn upsert_task(
        &self,
        new: &NewTask,
        actor: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<(Task, UpsertOutcome)> {
        let new = new.clone();
        let actor = actor.to_string();
        self.call_store(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let outcome = match select_task(&tx, &new.task_gid)? {
                None => {
                    tx.prepare_cached(
                        "INSERT INTO executor_queue (task_gid, added_at, updated_at, source, description, notes, status, priority) \
                         VALUES (?1, ?2, ?2, ?3, ?4, ?5, ?6, ?7)",
                    )?
                    .execute(params![new.task_gid, text(&at), new.source, new.description, new.notes, new.initial_status.as_str(), new.priority])?;
                    let status = new.initial_status.as_str();
                    insert_event(&tx, &new.task_gid, None, at, "added", None, Some(status), &actor, None)?;
                    UpsertOutcome::Created
                }
                Some(stored) => {
                    let changes = TaskChanges::between(&stored, &new);
                    if changes.is_empty() {
                        UpsertOutcome::Unchanged
                    } else {
                        tx.prepare_cached(
                            "UPDATE executor_queue SET description = COALESCE(?2, description), \
                             notes = COALESCE(?3, notes), priority = COALESCE(?4, priority), updated_at = ?5 \
                             WHERE task_gid = ?1",
                        )?
                        .execute(params![new.task_gid, changes.description, changes.notes, changes.priority, text(&at)])?;
                        let fields = changes.field_names();
                        insert_event(&tx, &new.task_gid, None, at, "updated", None, None, &actor, Some(&fields))?;
                        UpsertOutcome::Updated
                    }
                }
            };
            let task = select_task(&tx, &new.task_gid)?
                .ok_or_else(|| StoreError::TaskNotFound(new.task_gid.clone()))?;
            tx.commit()?;
            Ok((task, outcome))
        })
        .await
    }

    async fn task(&self, gid: &str) -> StoreResult<Option<Task>> {
        let gid = gid.to_string();
        self.call(move |conn| select_task(conn, &gid)).await
    }

    async fn tasks_page(
        &self,
        status: Option<&QueueStatus>,
        after_id: i64,
        limit: u32,
    ) -> StoreResult<Vec<Task>> {
        let status = status.cloned();
        self.call(move |conn| task_range(conn, status.as_ref(), false, after_id, limit))
            .await
    }

    async fn change_status(&self, change: &StatusChange) -> StoreResult<Task> {
        let change = change.clone();
        self.call_store(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let task = move_task(&tx, &change)?;
            tx.commit()?;
            Ok(task)
        })
        .await
    }

    async fn events(&self, gid: &str) -> StoreResult<Vec<TaskEvent>> {
        let gid = gid.to_string();
        self.call(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM executor_events WHERE task_gid = ?1 ORDER BY id"
            ))?
            .query_map([gid], event_from_row)?
            .collect()
        })
        .await
    }

    async fn create_run(&self, gid: &str, at: DateTime<Utc>) -> StoreResult<Run> {
        let gid = gid.to_string();
        self.call_store(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let run = insert_run(&tx, &gid, at)?;
            tx.commit()?;
            Ok(run)
        })
        .await
    }

    async fn create_leased_run(
        &self,
        gid: &str,
        holder: &str,
        at: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<Run> {
        let (gid, holder) = (gid.to_string(), holder.to_string());
        self.call_store(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut run = insert_run(&tx, &gid, at)?;
            // A new run's id was never leased: the claim cannot be refused.
            run.lease_epoch = claim_lease(&tx, run.id, &holder, at, until, None)?
                .ok_or(StoreError::Fenced { run_id: run.id })?;
            tx.commit()?;
            Ok(run)
        })
        .await
    }

    async fn claim_task(
        &self,
        change: &StatusChange,
        holder: &str,
        until: DateTime<Utc>,
    ) -> StoreResult<(Task, Run)> {
        let (change, holder) = (change.clone(), holder.to_string());
        self.call_store(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            move_task(&tx, &change)?;
            let at = change.event.at;
            let mut run = insert_run(&tx, &change.task_gid, at)?;
            run.lease_epoch = claim_lease(&tx, run.id, &holder, at, until, None)?
                .ok_or(StoreError::Fenced { run_id: run.id })?;
            // The task as it now is: linked to its new run.
            let task = select_task(&tx, &change.task_gid)?
                .ok_or_else(|| StoreError::TaskNotFound(change.task_gid.clone()))?;
            tx.commit()?;
            Ok((task, run))
        })
        .await
    }

    async fn end_run(
        &self,
        run: &Run,
        change: Option<&StatusChange>,
        holder: Option<&str>,
    ) -> StoreResult<Option<Task>> {
        let (r, change, holder) = (run.clone(), change.cloned(), holder.map(str::to_string));
        self.call_store(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if let Some(holder) = &holder {
                drop_lease(&tx, r.id, holder)?;
            }
            if update_run(&tx, &r)? == 0 {
                return Err(StoreError::Fenced { run_id: r.id }.into());
            }
            let task = change.map(|change| move_task(&tx, &change)).transpose()?;
            tx.commit()?;
            Ok(task)
        })
        .await
    }

    async fn save_run(&self, run: &Run) -> StoreResult<()> {
        let r = run.clone();
        self.call_store(move |conn| {
            if update_run(conn, &r)? == 0 {
                return Err(StoreError::Fenced { run_id: r.id }.into());
            }
            Ok(())
        })
        .await
    }

    async fn runs(&self, gid: Option<&str>) -> StoreResult<Vec<Run>> {
        let gid = gid.map(str::to_string);
        self.call(move |conn| match gid {
            Some(gid) => conn
                .prepare_cached(&format!(
                    "SELECT {RUN_COLUMNS} FROM executor_runs WHERE task_gid = ?1 ORDER BY id"
                ))?
                .query_map([gid], run_from_row)?
                .collect(),
            None => conn
                .prepare_cached(&format!(
                    "SELECT {RUN_COLUMNS} FROM executor_runs ORDER BY id"
                ))?
                .query_map([], run_from_row)?
                .collect(),
        })
        .await
    }

    async fn run(&self, id: i64) -> StoreResult<Option<Run>> {
        self.call(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM executor_runs WHERE id = ?1"
            ))?
            .query_row([id], run_from_row)
            .optional()
        })
        .await
    }

    async fn runs_page(
        &self,
        states: &[RunState],
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<Run>> {
        let states: Vec<String> = states.iter().map(|s| s.as_str().to_string()).collect();
        let before = before.unwrap_or(i64::MAX);
        self.call(move |conn| {
            if states.is_empty() {
                return conn
                    .prepare_cached(&format!(
                        "SELECT {RUN_COLUMNS} FROM executor_runs WHERE id < ?1 ORDER BY id DESC LIMIT ?2"
                    ))?
                    .query_map(params![before, limit], run_from_row)?
                    .collect();
            }
            // One index range per state, merged here: SQLite's plan for `state IN (…)`
            // sorts every matching run to give the newest few.
            let mut found = Vec::new();
            for state in &states {
                let page: Vec<Run> = conn
                    .prepare_cached(&format!(
                        "SELECT {RUN_COLUMNS} FROM executor_runs WHERE state = ?3 AND id < ?1 \
                         ORDER BY id DESC LIMIT ?2"
                    ))?
                    .query_map(params![before, limit, state], run_from_row)?
                    .collect::<rusqlite::Result<_>>()?;
                found.extend(page);
            }
            found.sort_by_key(|r| std::cmp::Reverse(r.id));
            found.truncate(limit as usize);
            Ok(found)
        })
        .await
    }

    async fn run_counts(&self) -> StoreResult<Vec<(String, i64)>> {
        self.call(move |conn| {
            conn.prepare_cached(
                "SELECT state, count(*) FROM executor_runs GROUP BY state ORDER BY state",
            )?
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect()
        })
        .await
    }

    async fn tasks_newest(
        &self,
        status: Option<&QueueStatus>,
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<Task>> {
        let status = status.cloned();
        let before = before.unwrap_or(i64::MAX);
        self.call(move |conn| task_range(conn, status.as_ref(), true, before, limit))
            .await
    }

    async fn run_task_text(&self, run_id: i64) -> StoreResult<Option<String>> {
        self.call(move |conn| {
            conn.prepare_cached("SELECT task_text FROM executor_runs WHERE id = ?1")?
                .query_row([run_id], |row| row.get::<_, Option<String>>(0))
                .optional()
                .map(Option::flatten)
        })
        .await
    }

    async fn changed_since_run(&self) -> StoreResult<Vec<ChangedTask>> {
        self.call(move |conn| {
            conn.prepare_cached(
                "SELECT q.task_gid, r.id FROM executor_queue q \
                 JOIN executor_runs r ON r.id = q.executor_run_id \
                 WHERE q.status = ?1 AND r.task_text IS NOT NULL \
                 AND r.task_text IS NOT q.description ORDER BY q.task_gid",
            )?
            .query_map([QueueStatus::Done.as_str()], |row| {
                Ok(ChangedTask {
                    task_gid: row.get(0)?,
                    run_id: row.get(1)?,
                })
            })?
            .collect()
        })
        .await
    }

    async fn record_worker(&self, worker: &WorkerRecord) -> StoreResult<i64> {
        let w = worker.clone();
        self.call(move |conn| insert_worker(conn, &w)).await
    }

    async fn record_worker_start(&self, worker: &WorkerRecord, run: &Run) -> StoreResult<i64> {
        let (w, r) = (worker.clone(), run.clone());
        self.call_store(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let id = insert_worker(&tx, &w)?;
            let changed = update_run(&tx, &r)?;
            tx.commit()?;
            if changed == 0 {
                return Err(StoreError::Fenced { run_id: r.id }.into());
            }
            Ok(id)
        })
        .await
    }

    async fn end_worker(&self, id: i64, at: DateTime<Utc>, outcome: &str) -> StoreResult<()> {
        let end = WorkerEnd {
            id,
            at,
            outcome: outcome.to_string(),
        };
        self.call(move |conn| record_end(conn, &end)).await
    }

    async fn save_run_ending_worker(&self, run: &Run, end: &WorkerEnd) -> StoreResult<()> {
        let (r, end) = (run.clone(), end.clone());
        self.call_store(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            record_end(&tx, &end)?;
            let changed = update_run(&tx, &r)?;
            tx.commit()?;
            if changed == 0 {
                return Err(StoreError::Fenced { run_id: r.id }.into());
            }
            Ok(())
        })
        .await
    }

    async fn open_workers(&self, host: &str) -> StoreResult<Vec<WorkerRecord>> {
        let host = host.to_string();
        self.call(move |conn| {
            conn.prepare_cached(
                "SELECT id, run_id, phase, host, pid, start_time, started_at, ended_at, outcome \
                 FROM executor_workers WHERE host = ?1 AND ended_at IS NULL ORDER BY id",
            )?
            .query_map([host], |row| rows::worker(row))?
            .collect()
        })
        .await
    }

    async fn record_spend(
        &self,
        id: i64,
        agent: &str,
        spend: &executor_core::spend::Spend,
    ) -> StoreResult<()> {
        let (agent, s) = (agent.to_string(), *spend);
        self.call(move |conn| {
            conn.prepare_cached(
                "UPDATE executor_workers SET agent = ?2, input_tokens = ?3, output_tokens = ?4, \
                 cached_tokens = ?5, turns = ?6, cost_usd = ?7, cost_priced = ?8 WHERE id = ?1",
            )?
            .execute(params![
                id,
                agent,
                s.input_tokens,
                s.output_tokens,
                s.cached_tokens,
                s.turns,
                s.cost_usd,
                s.priced
            ])?;
            Ok(())
        })
        .await
    }

    async fn spend(&self, gid: Option<&str>) -> StoreResult<Vec<executor_core::spend::SpendRow>> {
        let gid = gid.map(str::to_string);
        self.call(move |conn| {
            conn.prepare_cached(&format!(
                "{SPEND_SELECT} WHERE w.agent IS NOT NULL AND (?1 IS NULL OR r.task_gid = ?1) \
                 ORDER BY w.id"
            ))?
            .query_map([gid], spend_from_row)?
            .collect()
        })
        .await
    }

    async fn spend_since(
        &self,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<executor_core::spend::SpendRow>> {
        self.call(move |conn| {
            // Ended since, then still running and started since: each an index range (one
            // query with an OR, or an ORDER BY, is planned as a scan of every worker).
            let mut found = Vec::new();
            for when in [
                "w.ended_at >= ?1",
                "w.ended_at IS NULL AND w.started_at >= ?1",
            ] {
                let rows: Vec<executor_core::spend::SpendRow> = conn
                    .prepare_cached(&format!(
                        "{SPEND_SELECT} WHERE w.agent IS NOT NULL AND {when}"
                    ))?
                    .query_map([text(&since)], spend_from_row)?
                    .collect::<rusqlite::Result<_>>()?;
                found.extend(rows);
            }
            found.sort_by_key(|r| r.worker_id);
            Ok(found)
        })
        .await
    }

    async fn spend_of_runs(
        &self,
        run_ids: &[i64],
    ) -> StoreResult<Vec<executor_core::spend::SpendRow>> {
        if run_ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids = run_ids.to_vec();
        self.call(move |conn| {
            let marks: Vec<String> = (1..=ids.len()).map(|i| format!("?{i}")).collect();
            conn.prepare_cached(&format!(
                "{SPEND_SELECT} WHERE w.agent IS NOT NULL AND w.run_id IN ({}) ORDER BY w.id",
                marks.join(", ")
            ))?
            .query_map(rusqlite::params_from_iter(ids), spend_from_row)?
            .collect()
        })
        .await
    }

    async fn spend_total(&self) -> StoreResult<executor_core::spend::SpendTotal> {
        self.call(move |conn| {
            conn.prepare_cached(
                "SELECT count(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), \
                 COALESCE(SUM(cached_tokens), 0), COALESCE(SUM(turns), 0), TOTAL(cost_usd), \
                 COALESCE(SUM(cost_usd IS NULL), 0) FROM executor_workers WHERE agent IS NOT NULL",
            )?
            .query_row([], |row| {
                rows::spend_total(row)
            })
        })
        .await
    }

    async fn outcomes_since(
        &self,
        since: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<executor_core::analytics::Outcomes> {
        self.call(move |conn| {
            let since = text(&since);
            let runs = conn
                .prepare_cached(OUTCOME_SELECT)?
                .query_map(
                    params![
                        since,
                        limit,
                        format!("{}%", executor_core::ending::CANCELLED_BY_OWNER)
                    ],
                    |row| rows::outcome(row),
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let escalations = conn
                .prepare_cached(
                    "SELECT d.run_id, d.at, d.resolved_at FROM executor_decisions d \
                     JOIN executor_runs r ON r.id = d.run_id \
                     WHERE d.decision = 'escalate' AND r.started_at >= ?1 ORDER BY d.id",
                )?
                .query_map([&since], |row| {
                    Ok((row.get::<_, i64>(0)?, needed_time(row, 1)?, ts_opt(row, 2)?))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let owner_actions = conn
                .prepare_cached(&format!(
                    "SELECT r.id, COUNT(*) FROM executor_runs r \
                     JOIN executor_events e ON e.task_gid = r.task_gid \
                     AND e.at >= r.started_at AND e.at <= r.updated_at \
                     WHERE r.started_at >= ?1 AND e.actor IN ({}) AND e.kind NOT IN ({}) GROUP BY r.id",
                    quoted(executor_core::analytics::OWNER_ACTORS),
                    quoted(executor_core::analytics::PLAIN_EVENTS),
                ))?
                .query_map([&since], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(executor_core::analytics::Outcomes {
                runs,
                escalations,
                owner_actions,
            })
        })
        .await
    }

    async fn record_decision(&self, decision: &NewDecision) -> StoreResult<Decision> {
        let d = decision.clone();
        self.call(move |conn| insert_decision(conn, &d)).await
    }

    async fn decisions(&self, gid: &str) -> StoreResult<Vec<Decision>> {
        let gid = gid.to_string();
        self.call(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {DECISION_COLUMNS} FROM executor_decisions WHERE task_gid = ?1 ORDER BY id"
            ))?
            .query_map([gid], decision_from_row)?
            .collect()
        })
        .await
    }

    async fn decision(&self, id: i64) -> StoreResult<Option<Decision>> {
        self.call(move |conn| select_decision(conn, id)).await
    }

    async fn escalations(&self, pending_only: bool) -> StoreResult<Vec<Decision>> {
        self.call(move |conn| {
            let pending = if pending_only {
                " AND resolved_at IS NULL"
            } else {
                ""
            };
            conn.prepare_cached(&format!(
                "SELECT {DECISION_COLUMNS} FROM executor_decisions \
                 WHERE decision = 'escalate'{pending} ORDER BY id"
            ))?
            .query_map([], decision_from_row)?
            .collect()
        })
        .await
    }

    async fn answered_escalations(&self) -> StoreResult<Vec<Decision>> {
        self.call(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {DECISION_COLUMNS} FROM executor_decisions \
                 WHERE decision = 'escalate' AND resolved_at IS NOT NULL AND applied_at IS NULL \
                 ORDER BY id"
            ))?
            .query_map([], decision_from_row)?
            .collect()
        })
        .await
    }

    async fn run_escalations(&self, run_id: i64) -> StoreResult<Vec<Decision>> {
        self.call(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {DECISION_COLUMNS} FROM executor_decisions \
                 WHERE run_id = ?1 AND decision = 'escalate' ORDER BY id"
            ))?
            .query_map([run_id], decision_from_row)?
            .collect()
        })
        .await
    }

    async fn resolve_escalation(
        &self,
        id: i64,
        resolution: &str,
        note: Option<&str>,
        by: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<Resolved>> {
        let (resolution, note, by) = (
            resolution.to_string(),
            note.map(str::to_string),
            by.to_string(),
        );
        self.call(move |conn| {
            // The write lock up front: the row read back is the one this update left, or
            // the one the winner of a race left.
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let recorded = tx
                .prepare_cached(
                    "UPDATE executor_decisions SET resolution = ?2, resolution_note = ?3, \
                     resolved_by = ?4, resolved_at = ?5 \
                     WHERE id = ?1 AND decision = 'escalate' AND resolved_at IS NULL",
                )?
                .execute(params![id, resolution, note, by, text(&at)])?
                == 1;
            let outcome = select_decision(&tx, id)?.map(|decision| {
                if recorded {
                    Resolved::Recorded(decision)
                } else if decision.is_escalation() {
                    Resolved::AlreadyResolved(decision)
                } else {
                    Resolved::NotAnEscalation(decision)
                }
            });
            tx.commit()?;
            Ok(outcome)
        })
        .await
    }

    async fn apply_escalation(&self, id: i64, at: DateTime<Utc>) -> StoreResult<bool> {
        self.call(move |conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE executor_decisions SET applied_at = ?2 \
                     WHERE id = ?1 AND decision = 'escalate' AND resolved_at IS NOT NULL \
                     AND applied_at IS NULL",
                )?
                .execute(params![id, text(&at)])?;
            Ok(changed == 1)
        })
        .await
    }

    async fn record_exchange(&self, exchange: NewExchange) -> StoreResult<Exchanged> {
        self.call_store(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let run_id = exchange.message.run_id;
            let epoch: Option<i64> = tx
                .prepare_cached("SELECT lease_epoch FROM executor_runs WHERE id = ?1")?
                .query_row([run_id], |row| row.get(0))
                .optional()?;
            if epoch != Some(exchange.lease_epoch) {
                return Err(StoreError::Fenced { run_id }.into());
            }
            if exchange.retry {
                let m = &exchange.message;
                let landed: Option<i64> = tx
                    .prepare_cached(
                        "SELECT id FROM (SELECT id, source, at, line FROM executor_messages \
                         WHERE run_id = ?1 ORDER BY id DESC LIMIT ?2) \
                         WHERE source = ?3 AND at = ?4 AND line = ?5",
                    )?
                    .query_row(
                        params![run_id, RETRY_LOOKBACK, m.source, text(&m.at), m.line],
                        |row| row.get(0),
                    )
                    .optional()?;
                if let Some(message_id) = landed {
                    return Ok(Exchanged {
                        message_id,
                        request: None,
                        outbox_ids: Vec::new(),
                        landed_before: true,
                    });
                }
            }
            let message_id = insert_message(&tx, &exchange.message)?;
            let mut outbox_ids = insert_outgoing(&tx, &exchange.outgoing)?;
            let request = match &exchange.request {
                None => None,
                Some(request) => {
                    let refused = |reason| StoreError::Exchange { run_id, reason };
                    let window = match request.window() {
                        0 => Vec::new(),
                        last => last_messages(&tx, run_id, last)?,
                    };
                    let recorded =
                        insert_decision(&tx, &request.decision(&window).map_err(refused)?)?;
                    let answer = request.answer(&recorded, &window).map_err(refused)?;
                    outbox_ids.extend(insert_outgoing(&tx, &answer.outgoing)?);
                    insert_message(&tx, &answer.message)?;
                    Some((recorded, window))
                }
            };
            tx.commit()?;
            Ok(Exchanged {
                message_id,
                request,
                outbox_ids,
                landed_before: false,
            })
        })
        .await
    }

    async fn record_message(&self, message: &NewMessage) -> StoreResult<i64> {
        let m = message.clone();
        self.call(move |conn| insert_message(conn, &m)).await
    }

    async fn messages(&self, run_id: i64, last: u32) -> StoreResult<Vec<StoredMessage>> {
        self.call(move |conn| last_messages(conn, run_id, last))
            .await
    }

    async fn changes_after(
        &self,
        after: &executor_core::changes::Cursor,
        run_id: Option<i64>,
        limit: u32,
    ) -> StoreResult<executor_core::changes::Changes> {
        let after = *after;
        self.call(move |conn| {
            let events = conn
                .prepare_cached(&format!(
                    "SELECT {EVENT_COLUMNS} FROM executor_events WHERE id > ?1 ORDER BY id LIMIT ?2"
                ))?
                .query_map(params![after.event, limit], event_from_row)?
                .collect::<rusqlite::Result<_>>()?;
            let messages = conn
                .prepare_cached(&format!(
                    "SELECT {MESSAGE_COLUMNS} FROM executor_messages \
                     WHERE id > ?1 AND (?2 IS NULL OR run_id = ?2) ORDER BY id LIMIT ?3"
                ))?
                .query_map(params![after.message, run_id, limit], message_from_row)?
                .collect::<rusqlite::Result<_>>()?;
            let decisions = conn
                .prepare_cached(&format!(
                    "SELECT {DECISION_COLUMNS} FROM executor_decisions WHERE id > ?1 ORDER BY id LIMIT ?2"
                ))?
                .query_map(params![after.decision, limit], decision_from_row)?
                .collect::<rusqlite::Result<_>>()?;
            Ok(executor_core::changes::Changes {
                events,
                messages,
                decisions,
            })
        })
        .await
    }

    async fn change_cursor(&self) -> StoreResult<executor_core::changes::Cursor> {
        self.call(|conn| {
            conn.prepare_cached(
                "SELECT (SELECT COALESCE(MAX(id), 0) FROM executor_events), \
                 (SELECT COALESCE(MAX(id), 0) FROM executor_messages), \
                 (SELECT COALESCE(MAX(id), 0) FROM executor_decisions)",
            )?
            .query_row([], |row| {
                Ok(executor_core::changes::Cursor {
                    event: row.get(0)?,
                    message: row.get(1)?,
                    decision: row.get(2)?,
                })
            })
        })
        .await
    }

    async fn report_intake_error(
        &self,
        source: &str,
        path: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        let (source, path, reason) = (source.to_string(), path.to_string(), reason.to_string());
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT INTO executor_intake_errors (source, path, reason, first_seen, last_seen) \
                 VALUES (?1, ?2, ?3, ?4, ?4) \
                 ON CONFLICT (source, path) DO UPDATE SET reason = excluded.reason, last_seen = excluded.last_seen",
            )?
            .execute(params![source, path, reason, text(&at)])?;
            Ok(())
        })
        .await
    }

    async fn retain_intake_errors(
        &self,
        source: &str,
        still_failing: &[String],
    ) -> StoreResult<()> {
        let source = source.to_string();
        let keep = still_failing.to_vec();
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let stored: Vec<String> = tx
                .prepare_cached("SELECT path FROM executor_intake_errors WHERE source = ?1")?
                .query_map([&source], |row| row.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            for path in stored.iter().filter(|p| !keep.contains(p)) {
                tx.prepare_cached(
                    "DELETE FROM executor_intake_errors WHERE source = ?1 AND path = ?2",
                )?
                .execute(params![source, path])?;
            }
            tx.commit()
        })
        .await
    }

    async fn intake_errors(&self) -> StoreResult<Vec<IntakeError>> {
        self.call(|conn| {
            conn.prepare_cached(
                "SELECT source, path, reason, first_seen, last_seen FROM executor_intake_errors ORDER BY source, path",
            )?
            .query_map([], |row| {
                rows::intake_error(row)
            })?
            .collect()
        })
        .await
    }

    async fn beat(&self, heartbeat: &Heartbeat) -> StoreResult<()> {
        let hb = heartbeat.clone();
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT INTO executor_heartbeats (component, host, pid, started_at, beat_at, stopped_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                 ON CONFLICT (component, host) DO UPDATE SET pid = excluded.pid, started_at = excluded.started_at, \
                 beat_at = excluded.beat_at, stopped_at = excluded.stopped_at, \
                 last_error = CASE WHEN executor_heartbeats.started_at = excluded.started_at THEN executor_heartbeats.last_error END, \
                 last_error_at = CASE WHEN executor_heartbeats.started_at = excluded.started_at THEN executor_heartbeats.last_error_at END, \
                 error_count = CASE WHEN executor_heartbeats.started_at = excluded.started_at THEN executor_heartbeats.error_count ELSE 0 END",
            )?
            .execute(params![hb.component, hb.host, hb.pid, text(&hb.started_at), text(&hb.beat_at), hb.stopped_at.as_ref().map(text)])?;
            Ok(())
        })
        .await
    }

    async fn record_component_error(
        &self,
        component: &str,
        host: &str,
        message: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        let (component, host, message) =
            (component.to_string(), host.to_string(), message.to_string());
        self.call(move |conn| {
            conn.prepare_cached(
                "UPDATE executor_heartbeats SET last_error = ?3, last_error_at = ?4, error_count = error_count + 1 \
                 WHERE component = ?1 AND host = ?2",
            )?
            .execute(params![component, host, message, text(&at)])?;
            Ok(())
        })
        .await
    }

    async fn take_lease(
        &self,
        run_id: i64,
        holder: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        steal_from: Option<&str>,
    ) -> StoreResult<Option<i64>> {
        let (holder, steal_from) = (holder.to_string(), steal_from.map(str::to_string));
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let epoch = claim_lease(&tx, run_id, &holder, now, until, steal_from.as_deref())?;
            if epoch.is_some() {
                tx.commit()?;
            }
            Ok(epoch)
        })
        .await
    }

    async fn lease(&self, run_id: i64) -> StoreResult<Option<Lease>> {
        self.call(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {LEASE_COLUMNS} FROM executor_run_leases WHERE run_id = ?1"
            ))?
            .query_row([run_id], |row| rows::lease(row))
            .optional()
        })
        .await
    }

    async fn leases(&self, limit: u32) -> StoreResult<Vec<Lease>> {
        self.call(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {LEASE_COLUMNS} FROM executor_run_leases ORDER BY run_id LIMIT ?1"
            ))?
            .query_map([limit], |row| rows::lease(row))?
            .collect()
        })
        .await
    }

    async fn renew_leases(&self, holder: &str, until: DateTime<Utc>) -> StoreResult<Vec<i64>> {
        let holder = holder.to_string();
        self.call(move |conn| {
            let mut statement = conn.prepare_cached(
                "UPDATE executor_run_leases SET expires_at = ?2 WHERE holder = ?1 RETURNING run_id",
            )?;
            let mut runs = statement
                .query_map(params![holder, text(&until)], |row| row.get::<_, i64>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            runs.sort_unstable();
            Ok(runs)
        })
        .await
    }

    async fn release_lease(&self, run_id: i64, holder: &str) -> StoreResult<()> {
        let holder = holder.to_string();
        self.call(move |conn| drop_lease(conn, run_id, &holder))
            .await
    }

    async fn pr_memory(&self, run_id: i64) -> StoreResult<Option<String>> {
        self.call(move |conn| {
            conn.prepare_cached("SELECT memory FROM executor_pr_memory WHERE run_id = ?1")?
                .query_row([run_id], |row| row.get(0))
                .optional()
        })
        .await
    }

    async fn save_pr_memory(
        &self,
        run_id: i64,
        memory: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        let memory = memory.to_string();
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT INTO executor_pr_memory (run_id, memory, updated_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (run_id) DO UPDATE SET memory = excluded.memory, updated_at = excluded.updated_at",
            )?
            .execute(params![run_id, memory, text(&at)])?;
            Ok(())
        })
        .await
    }

    async fn pr_look(&self, run_id: i64) -> StoreResult<Option<String>> {
        self.call(move |conn| {
            conn.prepare_cached("SELECT observation FROM executor_pr_looks WHERE run_id = ?1")?
                .query_row([run_id], |row| row.get(0))
                .optional()
        })
        .await
    }

    async fn save_pr_look(&self, run_id: i64, look: &str, at: DateTime<Utc>) -> StoreResult<()> {
        let look = look.to_string();
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT INTO executor_pr_looks (run_id, observation, observed_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (run_id) DO UPDATE SET observation = excluded.observation, observed_at = excluded.observed_at",
            )?
            .execute(params![run_id, look, text(&at)])?;
            Ok(())
        })
        .await
    }

    async fn task_facts(&self, gid: &str) -> StoreResult<Option<String>> {
        let gid = gid.to_string();
        self.call(move |conn| {
            conn.prepare_cached("SELECT facts FROM executor_task_facts WHERE task_gid = ?1")?
                .query_row([gid], |row| row.get(0))
                .optional()
        })
        .await
    }

    async fn save_task_facts(&self, gid: &str, facts: &str, at: DateTime<Utc>) -> StoreResult<()> {
        let (gid, facts) = (gid.to_string(), facts.to_string());
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT INTO executor_task_facts (task_gid, facts, updated_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (task_gid) DO UPDATE SET facts = excluded.facts, updated_at = excluded.updated_at",
            )?
            .execute(params![gid, facts, text(&at)])?;
            Ok(())
        })
        .await
    }

    async fn record_analysis(
        &self,
        gid: &str,
        analysis: &Analysis,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let gid = gid.to_string();
        let analysis = analysis.clone();
        self.call_store(move |conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE executor_queue SET priority = ?1, complexity = ?2, feasibility = ?3, \
                     analysis_summary = ?4, \
                     notes = CASE WHEN ?5 IS NULL THEN notes \
                                  WHEN notes IS NULL OR notes = '' THEN ?5 \
                                  ELSE rtrim(notes, char(10)) || char(10) || ?5 END, \
                     updated_at = ?6 \
                     WHERE task_gid = ?7 AND (status IS NULL OR status IN ('', 'pending'))",
                )?
                .execute(params![
                    analysis.priority,
                    analysis.complexity,
                    analysis.feasibility,
                    analysis.summary,
                    analysis.append_notes,
                    text(&at),
                    gid
                ])?;
            if changed == 0 && select_task(conn, &gid)?.is_none() {
                return Err(StoreError::TaskNotFound(gid).into());
            }
            Ok(changed > 0)
        })
        .await
    }

    async fn source_cursor(&self, source: &str) -> StoreResult<Option<String>> {
        let source = source.to_string();
        self.call(move |conn| {
            conn.prepare_cached("SELECT cursor FROM executor_source_cursors WHERE source = ?1")?
                .query_row([source], |row| row.get(0))
                .optional()
        })
        .await
    }

    async fn save_source_cursor(
        &self,
        source: &str,
        cursor: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        let (source, cursor) = (source.to_string(), cursor.to_string());
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT INTO executor_source_cursors (source, cursor, updated_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (source) DO UPDATE SET cursor = excluded.cursor, updated_at = excluded.updated_at",
            )?
            .execute(params![source, cursor, text(&at)])?;
            Ok(())
        })
        .await
    }

    async fn enqueue_outgoing(&self, items: &[NewOutgoing]) -> StoreResult<Vec<i64>> {
        let items = items.to_vec();
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let ids = insert_outgoing(&tx, &items)?;
            tx.commit()?;
            Ok(ids)
        })
        .await
    }

    async fn claim_outgoing(
        &self,
        notifier: &str,
        holder: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Outgoing>> {
        let (notifier, holder) = (notifier.to_string(), holder.to_string());
        self.call(move |conn| {
            // The write lock up front: no other process reads the head between this read
            // and the claim.
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let head = tx
                .prepare_cached(&format!(
                    "SELECT {OUTBOX_COLUMNS} FROM executor_outbox \
                     WHERE notifier = ?1 AND delivered_at IS NULL ORDER BY id LIMIT 1"
                ))?
                .query_row([&notifier], outgoing_from_row)
                .optional()?;
            let Some(head) = head else {
                return Ok(None);
            };
            let held_by_another = head.claimed_until.is_some_and(|until| until > now)
                && head.claimed_by.as_deref() != Some(holder.as_str());
            if head.next_attempt_at > now || held_by_another {
                return Ok(None);
            }
            tx.prepare_cached(
                "UPDATE executor_outbox SET claimed_by = ?2, claimed_until = ?3 WHERE id = ?1",
            )?
            .execute(params![head.id, holder, text(&until)])?;
            tx.commit()?;
            Ok(Some(head))
        })
        .await
    }

    async fn take_over_outgoing(
        &self,
        id: i64,
        dead: &str,
        holder: &str,
        until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let (dead, holder) = (dead.to_string(), holder.to_string());
        self.call(move |conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE executor_outbox SET claimed_by = ?3, claimed_until = ?4 \
                     WHERE id = ?1 AND claimed_by = ?2 AND delivered_at IS NULL",
                )?
                .execute(params![id, dead, holder, text(&until)])?;
            Ok(changed == 1)
        })
        .await
    }

    async fn outgoing_delivered(&self, id: i64, at: DateTime<Utc>) -> StoreResult<()> {
        self.call(move |conn| {
            conn.prepare_cached(
                "UPDATE executor_outbox SET delivered_at = ?2, claimed_by = NULL, \
                 claimed_until = NULL WHERE id = ?1",
            )?
            .execute(params![id, text(&at)])?;
            Ok(())
        })
        .await
    }

    async fn outgoing_failed(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: DateTime<Utc>,
    ) -> StoreResult<()> {
        let error = error.to_string();
        self.call(move |conn| {
            conn.prepare_cached(
                "UPDATE executor_outbox SET attempts = attempts + 1, last_error = ?2, \
                 next_attempt_at = ?3, claimed_by = NULL, claimed_until = NULL WHERE id = ?1",
            )?
            .execute(params![id, error, text(&next_attempt_at)])?;
            Ok(())
        })
        .await
    }

    async fn outbox(
        &self,
        notifier: Option<&str>,
        undelivered_only: bool,
        limit: u32,
    ) -> StoreResult<Vec<Outgoing>> {
        let notifier = notifier.map(str::to_string);
        self.call(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {OUTBOX_COLUMNS} FROM executor_outbox \
                 WHERE (?1 IS NULL OR notifier = ?1) AND (NOT ?2 OR delivered_at IS NULL) \
                 ORDER BY id LIMIT ?3"
            ))?
            .query_map(
                params![notifier, undelivered_only, limit],
                outgoing_from_row,
            )?
            .collect()
        })
        .await
    }

    async fn outbox_backlog(&self) -> StoreResult<Vec<OutboxBacklog>> {
        self.call(|conn| {
            conn.prepare_cached(
                "SELECT head.notifier, line.undelivered, head.created_at, head.attempts, head.last_error \
                 FROM (SELECT notifier, count(*) AS undelivered, min(id) AS head_id \
                       FROM executor_outbox WHERE delivered_at IS NULL GROUP BY notifier) AS line \
                 JOIN executor_outbox AS head ON head.id = line.head_id \
                 ORDER BY head.notifier",
            )?
            .query_map([], |row| {
                rows::outbox_backlog(row)
            })?
            .collect()
        })
        .await
    }

    async fn claim_chat_message(
        &self,
        chat: &str,
        message_id: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let (chat, message_id) = (chat.to_string(), message_id.to_string());
        self.call(move |conn| {
            let inserted = conn
                .prepare_cached(
                    "INSERT INTO executor_chat_inbox (chat, message_id, received_at) \
                     VALUES (?1, ?2, ?3) ON CONFLICT (chat, message_id) DO NOTHING",
                )?
                .execute(params![chat, message_id, text(&at)])?;
            Ok(inserted == 1)
        })
        .await
    }

    async fn release_chat_message(&self, chat: &str, message_id: &str) -> StoreResult<()> {
        let (chat, message_id) = (chat.to_string(), message_id.to_string());
        self.call(move |conn| {
            conn.prepare_cached(
                "DELETE FROM executor_chat_inbox WHERE chat = ?1 AND message_id = ?2",
            )?
            .execute(params![chat, message_id])?;
            Ok(())
        })
        .await
    }

    async fn link_children(
        &self,
        parent_gid: &str,
        children: &[TaskLink],
        dependencies: &[TaskDependency],
    ) -> StoreResult<()> {
        check_decomposition(parent_gid, children, dependencies)?;
        let (children, dependencies) = (children.to_vec(), dependencies.to_vec());
        self.call_store(move |conn| {
            // Leaving early drops the transaction, which rolls back everything this call wrote.
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            for child in &children {
                let inserted = tx
                    .prepare_cached(&format!(
                        "INSERT INTO executor_task_links ({LINK_COLUMNS}) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (task_gid) DO NOTHING"
                    ))?
                    .execute(params![
                        child.task_gid,
                        child.parent_gid,
                        child.depth,
                        child.key,
                        child.position,
                        text(&child.created_at)
                    ])?;
                if inserted == 0 {
                    return Err(StoreError::AlreadyLinked(child.task_gid.clone()).into());
                }
            }
            for edge in &dependencies {
                tx.prepare_cached(
                    "INSERT INTO executor_task_dependencies (task_gid, depends_on) VALUES (?1, ?2) \
                     ON CONFLICT (task_gid, depends_on) DO NOTHING",
                )?
                .execute(params![edge.task_gid, edge.depends_on])?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn task_link(&self, task_gid: &str) -> StoreResult<Option<TaskLink>> {
        let task_gid = task_gid.to_string();
        self.call(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {LINK_COLUMNS} FROM executor_task_links WHERE task_gid = ?1"
            ))?
            .query_row([task_gid], link_from_row)
            .optional()
        })
        .await
    }

    async fn children(&self, parent_gid: &str) -> StoreResult<Vec<TaskLink>> {
        let parent_gid = parent_gid.to_string();
        self.call(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {LINK_COLUMNS} FROM executor_task_links WHERE parent_gid = ?1 \
                 ORDER BY position, task_gid"
            ))?
            .query_map([parent_gid], link_from_row)?
            .collect()
        })
        .await
    }

    async fn goals(&self, limit: u32) -> StoreResult<Vec<(String, i64)>> {
        self.call(move |conn| {
            conn.prepare_cached(
                "SELECT parent_gid, count(*) FROM executor_task_links WHERE depth = 1 \
                 GROUP BY parent_gid ORDER BY max(created_at) DESC, parent_gid LIMIT ?1",
            )?
            .query_map([limit], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect()
        })
        .await
    }

    async fn dependencies(&self, task_gid: &str) -> StoreResult<Vec<String>> {
        let task_gid = task_gid.to_string();
        self.call(move |conn| {
            conn.prepare_cached(
                "SELECT depends_on FROM executor_task_dependencies WHERE task_gid = ?1 \
                 ORDER BY depends_on",
            )?
            .query_map([task_gid], |row| row.get(0))?
            .collect()
        })
        .await
    }

    async fn dependencies_of_children(&self, parent_gid: &str) -> StoreResult<Vec<TaskDependency>> {
        let parent_gid = parent_gid.to_string();
        self.call(move |conn| {
            conn.prepare_cached(
                "SELECT d.task_gid, d.depends_on FROM executor_task_dependencies AS d \
                 JOIN executor_task_links AS l ON l.task_gid = d.task_gid \
                 WHERE l.parent_gid = ?1 ORDER BY d.task_gid, d.depends_on",
            )?
            .query_map([parent_gid], |row| rows::dependency(row))?
            .collect()
        })
        .await
    }

    async fn unmet_dependencies(&self, task_gid: &str) -> StoreResult<Vec<String>> {
        let task_gid = task_gid.to_string();
        self.call(move |conn| {
            conn.prepare_cached(
                "SELECT d.depends_on FROM executor_task_dependencies AS d \
                 LEFT JOIN executor_queue AS q ON q.task_gid = d.depends_on \
                 WHERE d.task_gid = ?1 AND (q.status IS NULL OR q.status <> 'done') \
                 ORDER BY d.depends_on",
            )?
            .query_map([task_gid], |row| row.get(0))?
            .collect()
        })
        .await
    }

    async fn save_agent_session(&self, session: &AgentSession) -> StoreResult<()> {
        let session = session.clone();
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT INTO executor_agent_sessions (name, agent, session_id, updated_at) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name) DO UPDATE SET agent = excluded.agent, \
                 session_id = excluded.session_id, updated_at = excluded.updated_at",
            )?
            .execute(params![
                session.name,
                session.agent,
                session.session_id,
                text(&session.updated_at)
            ])?;
            Ok(())
        })
        .await
    }

    async fn agent_session(&self, name: &str) -> StoreResult<Option<AgentSession>> {
        let name = name.to_string();
        self.call(move |conn| {
            conn.prepare_cached(
                "SELECT name, agent, session_id, updated_at FROM executor_agent_sessions \
                 WHERE name = ?1",
            )?
            .query_row([name], |row| rows::session(row))
            .optional()
        })
        .await
    }

    async fn pause_agent(&self, pause: &AgentPause) -> StoreResult<bool> {
        let pause = pause.clone();
        self.call(move |conn| {
            let since: String = conn.prepare_cached(super::PAUSE_AGENT)?.query_row(
                params![
                    pause.agent,
                    text(&pause.since),
                    text(&pause.until),
                    pause.reason,
                    pause.run_id,
                    pause.task_gid
                ],
                |row| row.get(0),
            )?;
            Ok(since == text(&pause.since))
        })
        .await
    }

    async fn agent_pauses(&self) -> StoreResult<Vec<AgentPause>> {
        self.call(|conn| {
            conn.prepare_cached(
                "SELECT agent, since, until, reason, run_id, task_gid FROM executor_agent_pauses \
                 ORDER BY agent",
            )?
            .query_map([], |row| rows::pause(row))?
            .collect()
        })
        .await
    }

    async fn pause_service(&self, pause: &super::ServicePause) -> StoreResult<()> {
        let pause = pause.clone();
        self.call(move |conn| {
            conn.prepare_cached(super::PAUSE_SERVICE)?.execute(params![
                pause.service,
                text(&pause.since),
                text(&pause.until)
            ])?;
            Ok(())
        })
        .await
    }

    async fn service_pauses(&self, now: DateTime<Utc>) -> StoreResult<Vec<super::ServicePause>> {
        self.call(move |conn| {
            conn.prepare_cached(
                "SELECT service, since, until FROM executor_service_pauses \
                 WHERE until > ?1 ORDER BY service",
            )?
            .query_map([text(&now)], |row| {
                Ok(super::ServicePause {
                    service: row.get(0)?,
                    since: row.get(1)?,
                    until: row.get(2)?,
                })
            })?
            .collect()
        })
        .await
    }

    async fn record_net_refusals(
        &self,
        refused: &[executor_core::net_refusals::NetRefusal],
        event: Option<&super::NetRefusalEvent>,
    ) -> StoreResult<()> {
        let (refused, event) = (refused.to_vec(), event.cloned());
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            for row in &refused {
                tx.prepare_cached(super::ADD_NET_REFUSAL)?.execute(params![
                    row.run_id,
                    row.task_gid,
                    row.host,
                    i64::from(row.port),
                    row.kind.as_str(),
                    i64::try_from(row.count).unwrap_or(i64::MAX),
                    text(&row.first_at),
                    text(&row.last_at)
                ])?;
            }
            if let Some(e) = &event {
                insert_event(
                    &tx,
                    &e.task_gid,
                    Some(e.run_id),
                    e.event.at,
                    &e.event.kind,
                    None,
                    None,
                    &e.event.actor,
                    e.event.detail.as_deref(),
                )?;
            }
            tx.commit()
        })
        .await
    }

    async fn net_refusals(
        &self,
        gid: &str,
    ) -> StoreResult<Vec<executor_core::net_refusals::NetRefusal>> {
        let gid = gid.to_string();
        self.call(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {} FROM executor_net_refusals WHERE task_gid = ?1 \
                 ORDER BY run_id, first_at, host, port",
                super::NET_REFUSAL_COLUMNS
            ))?
            .query_map([gid], |row| rows::net_refusal(row))?
            .collect()
        })
        .await
    }

    async fn summary(&self) -> StoreResult<StoreSummary> {
        let intake_errors = self.intake_errors().await?;
        let (found, live_workers, pending_escalations, heartbeats, component_errors) = self
            .call(|conn| {
                let found: Vec<(QueueStatus, i64)> = conn
                    .prepare_cached("SELECT status, count(*) FROM executor_queue GROUP BY status")?
                    .query_map([], |row| {
                        Ok((
                            QueueStatus::from_column(row.get_ref(0)?.as_str_or_null()?),
                            row.get(1)?,
                        ))
                    })?
                    .collect::<rusqlite::Result<_>>()?;
                let live: i64 = conn.query_row(
                    "SELECT count(*) FROM executor_runs WHERE worker_pid IS NOT NULL \
                     AND state IN ('queued', 'in_progress', 'pr')",
                    [],
                    |row| row.get(0),
                )?;
                let escalations: i64 = conn.query_row(
                    "SELECT count(*) FROM executor_decisions WHERE decision = 'escalate' AND resolved_at IS NULL",
                    [],
                    |row| row.get(0),
                )?;
                let heartbeats: Vec<Heartbeat> = conn
                    .prepare_cached(
                        "SELECT component, host, pid, started_at, beat_at, stopped_at FROM executor_heartbeats \
                         ORDER BY component, host",
                    )?
                    .query_map([], |row| {
                        rows::heartbeat(row)
                    })?
                    .collect::<rusqlite::Result<_>>()?;
                let errors: Vec<ComponentError> = conn
                    .prepare_cached(
                        "SELECT component, host, last_error, last_error_at, error_count FROM executor_heartbeats \
                         WHERE last_error IS NOT NULL ORDER BY component, host",
                    )?
                    .query_map([], |row| {
                        rows::component_error(row)
                    })?
                    .collect::<rusqlite::Result<_>>()?;
                Ok((found, live, escalations, heartbeats, errors))
            })
            .await?;
        Ok(StoreSummary {
            queue: complete_counts(found),
            live_workers,
            pending_escalations,
            intake_errors,
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
        let (source, delivery) = (source.to_string(), delivery.to_string());
        self.call(move |conn| {
            let inserted = conn
                .prepare_cached(
                    "INSERT INTO executor_webhook_deliveries (source, delivery_id, received_at) \
                     VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                )?
                .execute(params![source, delivery, text(&at)])?;
            Ok(inserted == 1)
        })
        .await
    }

    async fn wake(&self, wake: super::wake::Wake) -> StoreResult<()> {
        super::wake::send_datagram(&self.path, wake)
    }

    async fn listen_wakes(&self) -> StoreResult<super::wake::Wakes> {
        super::wake::listen_socket(&self.path)
    }

    async fn change_hints(&self) -> StoreResult<super::changed::ChangeHints> {
        super::changed::watch_files(&self.path)
    }
}

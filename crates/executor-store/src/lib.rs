//! Durable state: one [`Store`] interface, two implementations.
//!
//! | backend | for | module |
//! |---|---|---|
//! | SQLite | the embedded default: one file, WAL | [`sqlite`] |
//! | Postgres | a queue shared by runners on several hosts | [`postgres`] |
//!
//! Both keep the owner's `executor_queue` and `executor_runs` tables with exactly the columns
//! of docs/design.md §4, and everything else in tables of their own. Migrations only ever add:
//! they never drop, rename or rewrite what is there, so an existing database is adopted in
//! place. The store applies decisions; it never makes them (the state machines in `core` do).

pub mod changed;
pub mod migrations;
pub mod postgres;
mod rows;
pub mod sqlite;
pub mod wake;

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use thiserror::Error;

use executor_core::outbox::{NewOutgoing, OutboxBacklog, Outgoing};
use executor_core::queue::QueueStatus;
use executor_core::record::{
    ChangedTask, Decision, Heartbeat, IntakeError, Lease, NewDecision, NewMessage, Resolved, Run,
    StatusChange, StoreSummary, StoredMessage, TaskEvent, WorkerEnd, WorkerRecord,
};
use executor_core::run::RunState;
use executor_core::task::{Analysis, NewTask, Task, UpsertOutcome};
use executor_core::tree::{AgentSession, TaskDependency, TaskLink};

/// Tasks per page when listing.
pub const TASK_PAGE: u32 = 5_000;

/// The history entry of refusals new to a run ([`Store::record_net_refusals`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NetRefusalEvent {
    pub task_gid: String,
    pub run_id: i64,
    pub event: executor_core::record::NewEvent,
}

/// Adds a refusal row to what its run's row holds: counts summed, the earliest first and
/// the latest last time kept. Written with `?` parameters (Postgres's are `$N`):
/// run_id, task_gid, host, port, kind, count, first_at, last_at.
pub(crate) const ADD_NET_REFUSAL: &str = "INSERT INTO executor_net_refusals \
     (run_id, task_gid, host, port, kind, count, first_at, last_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
     ON CONFLICT (run_id, host, port) DO UPDATE SET \
     count = executor_net_refusals.count + excluded.count, \
     first_at = CASE WHEN excluded.first_at < executor_net_refusals.first_at \
       THEN excluded.first_at ELSE executor_net_refusals.first_at END, \
     last_at = CASE WHEN excluded.last_at > executor_net_refusals.last_at \
       THEN excluded.last_at ELSE executor_net_refusals.last_at END";

/// The columns [`rows::net_refusal`] reads, in its order.
pub(crate) const NET_REFUSAL_COLUMNS: &str =
    "run_id, task_gid, host, port, kind, count, first_at, last_at";

/// Everything that can go wrong in a store.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("no task with gid `{0}`")]
    TaskNotFound(String),
    #[error("task `{gid}` is {actual}, not {expected}: it changed meanwhile, try again")]
    StatusConflict {
        gid: String,
        expected: String,
        actual: String,
    },
    #[error("SQLite database {path}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("Postgres")]
    Postgres(#[from] sqlx::Error),
    #[error("migration {version} ({name}) failed: {message}")]
    Migration {
        version: i64,
        name: &'static str,
        message: String,
    },
    #[error(
        "the database has schema version {found}, newer than this executor knows ({known}); upgrade executor"
    )]
    SchemaTooNew { found: i64, known: i64 },
    #[error(
        "run {run_id}'s lease was taken by another runner: this runner writes nothing more for it"
    )]
    Fenced { run_id: i64 },
    #[error("store worker stopped unexpectedly: {0}")]
    Worker(String),
    #[error("run {run_id}'s request could not be answered, so nothing of its line was written: {reason}")]
    Exchange { run_id: i64, reason: String },
    #[error("task `{0}` already has a parent: a task is linked into one decomposition only")]
    AlreadyLinked(String),
    #[error("decomposition of `{parent}` refused: {reason}")]
    InvalidDecomposition { parent: String, reason: String },
    #[error("cannot watch {path} for changes")]
    ChangeWatch {
        path: PathBuf,
        #[source]
        source: notify::Error,
    },
    #[error("wake-up socket {path}")]
    WakeSocket {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    /// Whether the database refused the values of this one row (Postgres's data
    /// exceptions, class 22: a NUL in text, a value out of range; SQLite's too-big value),
    /// as opposed to being out of reach or broken: the other rows can still be written.
    pub fn is_refused_value(&self) -> bool {
        match self {
            Self::Postgres(sqlx::Error::Database(error)) => {
                error.code().is_some_and(|code| code.starts_with("22"))
            }
            Self::Sqlite {
                source: rusqlite::Error::SqliteFailure(error, _),
                ..
            } => error.code == rusqlite::ErrorCode::TooBig,
            _ => false,
        }
    }

    /// Whether the store is out of reach for a while rather than refusing this write for
    /// good: a read-only or full SQLite file, a busy or locked one, an I/O error; a lost or
    /// refused Postgres connection (classes 08, 53 and 57P: connection, resources, the
    /// server shutting down), a deadlock or serialization failure (40P01, 40001: the
    /// transaction was rolled back whole), a pool that timed out. Such a write is worth
    /// trying again.
    pub fn is_transient(&self) -> bool {
        use rusqlite::ErrorCode;
        match self {
            Self::Sqlite {
                source: rusqlite::Error::SqliteFailure(error, _),
                ..
            } => matches!(
                error.code,
                ErrorCode::ReadOnly
                    | ErrorCode::DiskFull
                    | ErrorCode::DatabaseBusy
                    | ErrorCode::DatabaseLocked
                    | ErrorCode::SystemIoFailure
                    | ErrorCode::CannotOpen
            ),
            // A lost connection, no resources, an operator's shutdown; a deadlock or a
            // serialization failure, where Postgres rolled the whole transaction back and
            // the same transaction again is the documented answer.
            Self::Postgres(sqlx::Error::Database(error)) => error.code().is_some_and(|code| {
                code.starts_with("08")
                    || code.starts_with("53")
                    || code.starts_with("57P")
                    || code == "40P01"
                    || code == "40001"
                    // A database the operator closed to connections for a while
                    // (`ALLOW_CONNECTIONS false`): the same code also names states that
                    // last, so only this message of it is an outage.
                    || (code == "55000" && error.message().contains("not currently accepting connections"))
            }),
            Self::Postgres(
                sqlx::Error::Io(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::Protocol(_)
                | sqlx::Error::Tls(_),
            ) => true,
            _ => false,
        }
    }

    /// The error with its causes, `: `-separated, for a report that names why.
    pub fn with_causes(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Where the state lives, as resolved from `storage.url`. Its `Debug` and
/// [`StorageTarget::display`] never show a password.
#[derive(Clone, PartialEq, Eq)]
pub enum StorageTarget {
    Sqlite(PathBuf),
    /// A `postgres://` URL without a password, and the password from the environment or a
    /// file (never from the config file).
    Postgres {
        url: String,
        password: Option<String>,
    },
}

impl std::fmt::Debug for StorageTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StorageTarget::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            StorageTarget::Postgres { url, password } => f
                .debug_struct("Postgres")
                .field("url", &redact_password(url))
                .field("password", &password.as_ref().map(|_| "***"))
                .finish(),
        }
    }
}

impl StorageTarget {
    /// How the target is shown to the user and the log; never includes a password.
    pub fn display(&self) -> String {
        match self {
            StorageTarget::Sqlite(path) => format!("sqlite://{}", path.display()),
            StorageTarget::Postgres { url, .. } => redact_password(url),
        }
    }
}

/// The connection parameters executor passes on to Postgres. Anything else is refused:
/// the driver would log an unknown parameter with its value, and a misspelt `password`
/// would put the secret in the log.
const PG_PARAMETERS: &[&str] = &[
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

/// What [`check_postgres_url`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckedPgUrl {
    /// A password in the user part or as a `password` parameter.
    pub has_password: bool,
}

/// Checks a `postgres://` URL without ever repeating any part of it in the error (it may
/// carry a secret).
pub fn check_postgres_url(url: &str) -> Result<CheckedPgUrl, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("not a valid Postgres URL ({e})"))?;
    let mut has_password = parsed.password().is_some();
    for (position, (key, _)) in parsed.query_pairs().enumerate() {
        if key == "password" {
            has_password = true;
        } else if !(PG_PARAMETERS.contains(&key.as_ref()) || key.starts_with("options[")) {
            return Err(format!(
                "connection parameter {} is not one executor passes on (known: {})",
                position + 1,
                PG_PARAMETERS.join(", ")
            ));
        }
    }
    sqlx::postgres::PgConnectOptions::from_str(url)
        .map_err(|e| format!("not a valid Postgres URL ({e})"))?;
    Ok(CheckedPgUrl { has_password })
}

/// The URL with any password (user part or parameter) replaced by `***`.
fn redact_password(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return "postgres://(a URL that does not parse)".to_string();
    };
    if parsed.password().is_some() {
        // Fails only for URLs that cannot carry a user part at all.
        let _ = parsed.set_password(Some("***"));
    }
    if parsed.query().is_some() {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(key, value)| {
                let secret = key.eq_ignore_ascii_case("password");
                let value = if secret {
                    "***".to_string()
                } else {
                    value.into_owned()
                };
                (key.into_owned(), value)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string().replace("%2A%2A%2A", "***")
}

/// The one interface to durable state.
#[async_trait]
pub trait Store: Send + Sync {
    /// Creates the task `new.task_gid`, or updates it when it exists (gids are unique).
    /// Records an `added` or `updated` event; an update that changes nothing records none.
    async fn upsert_task(
        &self,
        new: &NewTask,
        actor: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<(Task, UpsertOutcome)>;

    async fn task(&self, gid: &str) -> StoreResult<Option<Task>>;

    /// Up to `limit` tasks whose id is greater than `after_id`, in id order (the order
    /// they were added): all of them or those with `status`. Paging by id keeps a large
    /// listing at constant memory and lets the caller print one page while the next loads.
    async fn tasks_page(
        &self,
        status: Option<&QueueStatus>,
        after_id: i64,
        limit: u32,
    ) -> StoreResult<Vec<Task>>;

    /// Every task (or those with `status`) in the order they were added.
    async fn tasks(&self, status: Option<&QueueStatus>) -> StoreResult<Vec<Task>> {
        let mut all = Vec::new();
        let mut after_id = i64::MIN;
        loop {
            let page = self.tasks_page(status, after_id, TASK_PAGE).await?;
            let last_page = page.len() < TASK_PAGE as usize;
            if let Some(last) = page.last() {
                after_id = last.id;
            }
            all.extend(page);
            if last_page {
                return Ok(all);
            }
        }
    }

    /// Moves a task from `change.from` to `change.to` and records the event, in one
    /// transaction; fails with [`StoreError::StatusConflict`] if it is no longer in `from`.
    async fn change_status(&self, change: &StatusChange) -> StoreResult<Task>;

    /// A task's history, oldest first.
    async fn events(&self, gid: &str) -> StoreResult<Vec<TaskEvent>>;

    /// Creates a `queued` run for a task and links it as the task's `executor_run_id`.
    async fn create_run(&self, gid: &str, at: DateTime<Utc>) -> StoreResult<Run>;

    /// Creates a `queued` run for a task, links it as the task's `executor_run_id` and
    /// gives its lease to `holder` until `until`, in one transaction; the run carries its
    /// first lease epoch.
    async fn create_leased_run(
        &self,
        gid: &str,
        holder: &str,
        at: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<Run>;

    /// [`Self::save_run`] with the end of the run's last worker, in one transaction. The
    /// worker's end is recorded even when the run's lease is gone (then the run's row is
    /// not written and the call fails with [`StoreError::Fenced`]); an end recorded
    /// already is kept.
    async fn save_run_ending_worker(&self, run: &Run, end: &WorkerEnd) -> StoreResult<()>;

    /// A runner's claim of a task: the task moved by `change` as [`Self::change_status`]
    /// moves it (to `in_progress`), and its new run created as [`Self::create_leased_run`]
    /// creates it, in one transaction; the task as moved and its run.
    /// [`StoreError::StatusConflict`] when the task moved since it was read: nothing is
    /// written.
    async fn claim_task(
        &self,
        change: &StatusChange,
        holder: &str,
        until: DateTime<Utc>,
    ) -> StoreResult<(Task, Run)>;

    /// The one write that ends a run, whichever path it ends by (`ops::end`): `run` as
    /// [`Self::save_run`] writes it (ended, as `core::ending` decided), its task moved by
    /// `change` as [`Self::change_status`] moves it (none when the task stays where it
    /// is), and `holder`'s lease of the run released (when one is named), in one
    /// transaction. All or nothing:
    /// [`StoreError::Fenced`] when the run's lease epoch is no longer `run.lease_epoch`
    /// (another claimed the run), [`StoreError::StatusConflict`] when the task moved
    /// since. The task as moved, when it was.
    async fn end_run(
        &self,
        run: &Run,
        change: Option<&StatusChange>,
        holder: Option<&str>,
    ) -> StoreResult<Option<Task>>;

    /// Writes every column of `run` but its id, task and lease epoch (found by id), if the
    /// run's lease epoch is still `run.lease_epoch`; otherwise writes nothing and fails with
    /// [`StoreError::Fenced`]: another runner claimed the run since. The run's state is
    /// decided by the run machine before this is called; the store only records it.
    async fn save_run(&self, run: &Run) -> StoreResult<()>;

    /// Runs, oldest first: all of them or those of one task.
    async fn runs(&self, gid: Option<&str>) -> StoreResult<Vec<Run>>;

    /// Run `id`, if there is one: one indexed read (the console's Run page).
    async fn run(&self, id: i64) -> StoreResult<Option<Run>>;

    /// Up to `limit` runs, newest first (highest id first), with an id below `before` when
    /// given: all of them, or those whose state is one of `states`. A page of a listing
    /// that never reads the whole table.
    async fn runs_page(
        &self,
        states: &[RunState],
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<Run>>;

    /// How many runs are in each state, by state.
    async fn run_counts(&self) -> StoreResult<Vec<(String, i64)>>;

    /// Up to `limit` tasks, newest first (highest id first), with an id below `before`
    /// when given: all of them or those with `status`.
    async fn tasks_newest(
        &self,
        status: Option<&QueueStatus>,
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<Task>>;

    /// The task text run `run_id` was given when it was created; `None` for an unknown run
    /// or one created before executor kept it.
    async fn run_task_text(&self, run_id: i64) -> StoreResult<Option<String>>;

    /// Done tasks whose text differs from what their latest run was given, by gid.
    async fn changed_since_run(&self) -> StoreResult<Vec<ChangedTask>>;

    /// Records a worker that just started; returns its id.
    async fn record_worker(&self, worker: &WorkerRecord) -> StoreResult<i64>;

    /// Records a worker that just started and saves `run` (its pid and last update) in one
    /// transaction; returns the worker's id. The worker is recorded even when the run's
    /// save is fenced (its lease gone), so a recovery still finds and stops it; the call
    /// then fails with [`StoreError::Fenced`], as [`Store::save_run`] does.
    async fn record_worker_start(&self, worker: &WorkerRecord, run: &Run) -> StoreResult<i64>;

    /// Records how worker `id` ended, once: a worker already recorded as ended (stopped at
    /// a takeover, say) keeps its first record.
    async fn end_worker(&self, id: i64, at: DateTime<Utc>, outcome: &str) -> StoreResult<()>;

    /// Workers started on `host` that have no end recorded, oldest first.
    async fn open_workers(&self, host: &str) -> StoreResult<Vec<WorkerRecord>>;

    /// Records what worker `id` spent, as its agent `agent` reported it.
    async fn record_spend(
        &self,
        id: i64,
        agent: &str,
        spend: &executor_core::spend::Spend,
    ) -> StoreResult<()>;

    /// Every worker's recorded spend (of task `gid`'s runs only, when given), oldest first;
    /// workers with nothing recorded are left out.
    async fn spend(&self, gid: Option<&str>) -> StoreResult<Vec<executor_core::spend::SpendRow>>;

    /// The recorded spend of workers that ended at or after `since` (or, still running,
    /// started then), oldest first: a day's spend without reading every worker.
    async fn spend_since(
        &self,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<executor_core::spend::SpendRow>>;

    /// The recorded spend of the workers of runs `run_ids`, oldest first.
    async fn spend_of_runs(
        &self,
        run_ids: &[i64],
    ) -> StoreResult<Vec<executor_core::spend::SpendRow>>;

    /// Every worker's recorded spend summed, in one read.
    async fn spend_total(&self) -> StoreResult<executor_core::spend::SpendTotal>;

    /// The runs started since `since` (the newest `limit`), with what the outcome figures
    /// need of each ([`executor_core::analytics::Outcomes`]).
    async fn outcomes_since(
        &self,
        since: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<executor_core::analytics::Outcomes>;

    /// Records a decision (with the tool call it answers and the message window, if any).
    async fn record_decision(&self, decision: &NewDecision) -> StoreResult<Decision>;

    /// A task's decisions, oldest first.
    async fn decisions(&self, gid: &str) -> StoreResult<Vec<Decision>>;

    /// The decision with this id, if there is one.
    async fn decision(&self, id: i64) -> StoreResult<Option<Decision>>;

    /// Every escalation (`decision = 'escalate'`), or only those not yet resolved when
    /// `pending_only`, oldest first.
    async fn escalations(&self, pending_only: bool) -> StoreResult<Vec<Decision>>;

    /// Escalations the owner answered that no run has taken up yet (`applied_at` unset),
    /// oldest first: what the runner resumes. Read on every daemon heartbeat, so it reads
    /// only those rows.
    async fn answered_escalations(&self) -> StoreResult<Vec<Decision>>;

    /// The escalations of one run, resolved or not, oldest first.
    async fn run_escalations(&self, run_id: i64) -> StoreResult<Vec<Decision>>;

    /// Records the owner's answer (`resolution`: `approve` or `deny`) to escalation `id`,
    /// with an optional note, who gave it and when. `None` if no decision has that id.
    /// The answer is recorded only if the decision is an escalation not yet resolved, by a
    /// compare-and-set in one statement: of two answers given at once exactly one is
    /// [`Resolved::Recorded`], the other gets [`Resolved::AlreadyResolved`] with the
    /// winner's row. A decision that is not an escalation is left as it is
    /// ([`Resolved::NotAnEscalation`]).
    async fn resolve_escalation(
        &self,
        id: i64,
        resolution: &str,
        note: Option<&str>,
        by: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<Resolved>>;

    /// Marks the answer to escalation `id` as carried out at `at`. Sets `applied_at` only if
    /// the escalation is resolved and not yet applied (compare-and-set): true exactly once
    /// across all callers, so one answer is acted on once.
    async fn apply_escalation(&self, id: i64, at: DateTime<Utc>) -> StoreResult<bool>;

    /// Records a worker's line with everything it leads to (its notices; for a request the
    /// decision, the decision's notices and the answer), in one transaction: all of it or
    /// none ([`executor_core::exchange`]). Nothing lands with [`StoreError::Fenced`] when
    /// the run's lease epoch is no longer `exchange.lease_epoch`, nor with
    /// [`StoreError::Exchange`] when the request's rows could not be built.
    async fn record_exchange(
        &self,
        exchange: executor_core::exchange::NewExchange,
    ) -> StoreResult<executor_core::exchange::Exchanged>;

    /// Records a worker message (docs/design.md §5); returns its id.
    async fn record_message(&self, message: &NewMessage) -> StoreResult<i64>;

    /// The last `last` messages of run `run_id`, oldest first: the orchestrator's sliding
    /// window.
    async fn messages(&self, run_id: i64, last: u32) -> StoreResult<Vec<StoredMessage>>;

    /// Records (or refreshes) that `path` of `source` could not be taken in.
    async fn report_intake_error(
        &self,
        source: &str,
        path: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<()>;

    /// Forgets the intake errors of `source` except those for `still_failing` paths.
    async fn retain_intake_errors(&self, source: &str, still_failing: &[String])
        -> StoreResult<()>;

    async fn intake_errors(&self) -> StoreResult<Vec<IntakeError>>;

    /// Records a component's sign of life (insert or replace by component and host).
    async fn beat(&self, heartbeat: &Heartbeat) -> StoreResult<()>;
    /// Records `message` as the last error of `component` on `host` (its heartbeat's row),
    /// counting it; a new start of the component (a new `started_at`) clears them.
    async fn record_component_error(
        &self,
        component: &str,
        host: &str,
        message: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<()>;

    /// Takes run `run_id`'s lease for `holder` until `until`, if it is free: no lease, an
    /// expired one (`expires_at` before `now`), one `holder` already has, or one held by
    /// `steal_from` (a holder the caller found dead). One transaction, so two runners
    /// racing for a run get it once. The run's new lease epoch when `holder` holds it now
    /// (every claim raises it, fencing out the saves of earlier claimants); `None` when
    /// another holds it.
    async fn take_lease(
        &self,
        run_id: i64,
        holder: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        steal_from: Option<&str>,
    ) -> StoreResult<Option<i64>>;

    /// Run `run_id`'s lease, if any (expired or not).
    async fn lease(&self, run_id: i64) -> StoreResult<Option<Lease>>;

    /// Up to `limit` leases (expired or not), by run id.
    async fn leases(&self, limit: u32) -> StoreResult<Vec<Lease>>;

    /// Extends every lease `holder` has to `until`; the runs whose leases they are, by id
    /// (a run another holder took is not among them).
    async fn renew_leases(&self, holder: &str, until: DateTime<Utc>) -> StoreResult<Vec<i64>>;

    /// Gives up run `run_id`'s lease if `holder` has it.
    async fn release_lease(&self, run_id: i64, holder: &str) -> StoreResult<()>;

    /// What run `run_id` remembers between PR ticks (JSON), if anything yet.
    async fn pr_memory(&self, run_id: i64) -> StoreResult<Option<String>>;

    /// Replaces what run `run_id` remembers between PR ticks.
    async fn save_pr_memory(&self, run_id: i64, memory: &str, at: DateTime<Utc>)
        -> StoreResult<()>;

    /// The last look the runner took at run `run_id`'s PR (a
    /// [`executor_core::pr::PrObservation`] as JSON), if it took one.
    async fn pr_look(&self, run_id: i64) -> StoreResult<Option<String>>;

    /// Replaces the last look at run `run_id`'s PR, taken at `at`.
    async fn save_pr_look(&self, run_id: i64, look: &str, at: DateTime<Utc>) -> StoreResult<()>;

    /// What a source knows of task `gid` beyond its text, as JSON
    /// ([`executor_core::facts::TaskFacts`]).
    async fn task_facts(&self, gid: &str) -> StoreResult<Option<String>>;

    /// Replaces the facts of task `gid`.
    async fn save_task_facts(&self, gid: &str, facts: &str, at: DateTime<Utc>) -> StoreResult<()>;

    /// Writes the analyzer's findings on task `gid` (priority, complexity, feasibility,
    /// summary, a line added to its notes) if it is still `pending`; `false` when it is not
    /// (the owner moved it meanwhile: nothing is written). Its status moves through
    /// `change_status`.
    async fn record_analysis(
        &self,
        gid: &str,
        analysis: &Analysis,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Where polled source `source` got to (its own format), if it ever did.
    async fn source_cursor(&self, source: &str) -> StoreResult<Option<String>>;

    async fn save_source_cursor(
        &self,
        source: &str,
        cursor: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<()>;

    /// Writes messages to the outbox, all in one transaction (all or none), and returns
    /// their ids in the order given. Each is first due at its `created_at`.
    async fn enqueue_outgoing(&self, items: &[NewOutgoing]) -> StoreResult<Vec<i64>>;

    /// Takes the next message `notifier` should deliver, for `holder` until `until`.
    ///
    /// Only the head of the notifier's line is considered: its oldest undelivered message
    /// (lowest id). `None` when there is none, when it is not due yet (`next_attempt_at`
    /// after `now`), or when another holder's claim on it is still live (`claimed_until`
    /// after `now`); a later message is never handed out past it, so a notifier delivers in
    /// the order messages were written. Otherwise the head is claimed (or the claim
    /// `holder` already has renewed) and returned, its `claimed_by` and `claimed_until` as
    /// they stood before this claim (a claim never let go: a delivery may have been made).
    /// Atomic: of two callers racing for one head, at most one gets it while the claim is
    /// live.
    async fn claim_outgoing(
        &self,
        notifier: &str,
        holder: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Outgoing>>;

    /// Takes message `id`'s claim over from `dead` (a holder the caller found dead) for
    /// `holder` until `until`, however long `dead`'s claim still had to run. True when
    /// `holder` holds it now; false when `dead` no longer held it (it was let go, delivered
    /// or taken by someone else meanwhile). One statement, so two callers get it once.
    async fn take_over_outgoing(
        &self,
        id: i64,
        dead: &str,
        holder: &str,
        until: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Records that message `id` was delivered at `at`, and lets go of its claim.
    async fn outgoing_delivered(&self, id: i64, at: DateTime<Utc>) -> StoreResult<()>;

    /// Records a failed attempt at message `id`: one more attempt, `error` (redacted by the
    /// caller: never a secret) as its last error, not due again before `next_attempt_at`,
    /// and its claim let go.
    async fn outgoing_failed(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: DateTime<Utc>,
    ) -> StoreResult<()>;

    /// Up to `limit` outbox messages in id order: all notifiers' or `notifier`'s, every one
    /// or only those not yet delivered (for inspection and tests).
    async fn outbox(
        &self,
        notifier: Option<&str>,
        undelivered_only: bool,
        limit: u32,
    ) -> StoreResult<Vec<Outgoing>>;

    /// What each notifier with undelivered messages still has to deliver, by notifier.
    async fn outbox_backlog(&self) -> StoreResult<Vec<OutboxBacklog>>;

    /// Records that chat message `message_id` of `chat` was received at `at`, if it was
    /// not yet. True only for the first caller, however many race: that caller handles the
    /// message, everyone else leaves it alone.
    async fn claim_chat_message(
        &self,
        chat: &str,
        message_id: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Gives back a claim of [`Store::claim_chat_message`] whose handling failed, so the
    /// next read takes the message again.
    async fn release_chat_message(&self, chat: &str, message_id: &str) -> StoreResult<()>;

    /// Stores the decomposition of `parent_gid`: its `children` and the `dependencies` among
    /// them, all in one transaction (a decomposition is stored whole or not at all). Every
    /// child must name `parent_gid` as its parent and every edge must start at one of the
    /// children (its `depends_on` may be any task but itself), else
    /// [`StoreError::InvalidDecomposition`] and nothing is written. A child that is already
    /// linked (here or under another parent) fails the call with
    /// [`StoreError::AlreadyLinked`]; a key used twice among siblings fails it too. Either
    /// way nothing of the call is kept.
    async fn link_children(
        &self,
        parent_gid: &str,
        children: &[TaskLink],
        dependencies: &[TaskDependency],
    ) -> StoreResult<()>;

    /// Task `task_gid`'s own link to its parent, if it was linked as a child.
    async fn task_link(&self, task_gid: &str) -> StoreResult<Option<TaskLink>>;

    /// The children of `parent_gid` (one level down), in the order the planner listed them
    /// (by position).
    async fn children(&self, parent_gid: &str) -> StoreResult<Vec<TaskLink>>;

    /// Up to `limit` goals (tasks decomposed at the top, depth 1), the latest decomposed
    /// first, each with how many children it has.
    async fn goals(&self, limit: u32) -> StoreResult<Vec<(String, i64)>>;

    /// The gids task `task_gid` depends on, sorted.
    async fn dependencies(&self, task_gid: &str) -> StoreResult<Vec<String>>;

    /// Every dependency edge that starts at one of `parent_gid`'s children, in one read,
    /// sorted by (task_gid, depends_on).
    async fn dependencies_of_children(&self, parent_gid: &str) -> StoreResult<Vec<TaskDependency>>;

    /// The gids task `task_gid` depends on whose queue status is not `done` (a task missing
    /// from the queue counts as not done), sorted: empty when it may start. One read.
    async fn unmet_dependencies(&self, task_gid: &str) -> StoreResult<Vec<String>>;

    /// Records agent session `session.name` (insert, or replace by name).
    async fn save_agent_session(&self, session: &AgentSession) -> StoreResult<()>;

    /// The agent session named `name`, if any.
    async fn agent_session(&self, name: &str) -> StoreResult<Option<AgentSession>>;

    /// Pauses `pause.agent` until `pause.until`, in one statement. A pause still in force
    /// at `pause.since` is extended (never shortened) and keeps its start and reason: the
    /// answer is whether this began a new pause (so the owner is told once per pause).
    async fn pause_agent(
        &self,
        pause: &executor_core::usage_limit::AgentPause,
    ) -> StoreResult<bool>;

    /// Every agent's latest pause, ended or not.
    async fn agent_pauses(&self) -> StoreResult<Vec<executor_core::usage_limit::AgentPause>>;

    /// Records that `pause.service` said "not before `pause.until`", replacing its last
    /// pause (the latest answer knows best), so every process of this store waits it out.
    async fn pause_service(&self, pause: &ServicePause) -> StoreResult<()>;

    /// The services whose pause is still in force at `now`, by name.
    async fn service_pauses(&self, now: DateTime<Utc>) -> StoreResult<Vec<ServicePause>>;

    /// Adds `rows` (what the wall refused a worker of run `rows[i].run_id` since its last
    /// write: a count, a first and a last time per host and port) to the run's rows, and
    /// appends `event` to the task's history, in one write.
    async fn record_net_refusals(
        &self,
        rows: &[executor_core::net_refusals::NetRefusal],
        event: Option<&NetRefusalEvent>,
    ) -> StoreResult<()>;

    /// What the wall refused the workers of task `gid`'s runs, by run, host and port.
    async fn net_refusals(
        &self,
        gid: &str,
    ) -> StoreResult<Vec<executor_core::net_refusals::NetRefusal>>;

    /// Everything `executor status` shows, in one read.
    async fn summary(&self) -> StoreResult<StoreSummary>;

    /// Records webhook delivery `delivery` of `source` as taken; false when it was taken
    /// before (the delivery is then ignored), whichever runner took it.
    async fn take_delivery(
        &self,
        source: &str,
        delivery: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Tells the daemons listening on this store that something changed (see [`wake`]).
    /// Nobody listening is not an error; callers that must not fail use [`wake::notify`].
    async fn wake(&self, wake: wake::Wake) -> StoreResult<()>;

    /// The console's live feed: the queue's events, the workers' messages (of run `run_id`
    /// only, when given) and the decisions after `after`, at most `limit` of each, in id
    /// order (see [`executor_core::changes`]).
    async fn changes_after(
        &self,
        after: &executor_core::changes::Cursor,
        run_id: Option<i64>,
        limit: u32,
    ) -> StoreResult<executor_core::changes::Changes>;

    /// The cursor past every row [`Store::changes_after`] reads now.
    async fn change_cursor(&self) -> StoreResult<executor_core::changes::Cursor>;

    /// Starts watching for changes any process or host makes to the store: hints for a
    /// reader that would otherwise poll ([`changed`]).
    async fn change_hints(&self) -> StoreResult<changed::ChangeHints>;

    /// Starts listening for wake-ups; fails when this store cannot be listened on (another
    /// daemon holds the SQLite socket, Postgres refuses the connection).
    async fn listen_wakes(&self) -> StoreResult<wake::Wakes>;
}

/// An outside service that said "not before" (a 429's `Retry-After`): nothing is sent to it
/// before `until`, by any process of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePause {
    /// The service's kind and API URL (`gitea https://gitea.example.com/api/v1/`).
    pub service: String,
    /// When the service said it.
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
}

/// The latest answer replaces the service's last pause. Written with SQLite's `?N`;
/// Postgres takes it with `$N`.
pub(crate) const PAUSE_SERVICE: &str = "INSERT INTO executor_service_pauses \
     (service, since, until) VALUES (?1, ?2, ?3) \
     ON CONFLICT (service) DO UPDATE SET since = excluded.since, until = excluded.until";

/// A pause in force at the new one's start is extended and keeps its start and reason;
/// `since` comes back, so the caller knows which (see [`Store::pause_agent`]). Written with
/// SQLite's `?N`; Postgres takes it with `$N`.
pub(crate) const PAUSE_AGENT: &str = "INSERT INTO executor_agent_pauses \
     (agent, since, until, reason, run_id, task_gid) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
     ON CONFLICT (agent) DO UPDATE SET \
     since = CASE WHEN executor_agent_pauses.until > excluded.since \
       THEN executor_agent_pauses.since ELSE excluded.since END, \
     reason = CASE WHEN executor_agent_pauses.until > excluded.since \
       THEN executor_agent_pauses.reason ELSE excluded.reason END, \
     run_id = CASE WHEN executor_agent_pauses.until > excluded.since \
       THEN executor_agent_pauses.run_id ELSE excluded.run_id END, \
     task_gid = CASE WHEN executor_agent_pauses.until > excluded.since \
       THEN executor_agent_pauses.task_gid ELSE excluded.task_gid END, \
     until = CASE WHEN executor_agent_pauses.until > excluded.until \
       THEN executor_agent_pauses.until ELSE excluded.until END \
     RETURNING since";

/// Opens (creating where needed) and migrates the store at `target`.
pub async fn open(target: &StorageTarget) -> StoreResult<Arc<dyn Store>> {
    match target {
        StorageTarget::Sqlite(path) => Ok(Arc::new(sqlite::SqliteStore::open(path).await?)),
        StorageTarget::Postgres { url, password } => Ok(Arc::new(
            postgres::PgStore::connect(url, password.as_deref()).await?,
        )),
    }
}

/// Queue counts in queue order, with every known status present (zero when absent) and any
/// unknown stored status after them.
pub(crate) fn complete_counts(found: Vec<(QueueStatus, i64)>) -> Vec<(QueueStatus, i64)> {
    let mut counts: Vec<(QueueStatus, i64)> =
        QueueStatus::KNOWN.iter().map(|s| (s.clone(), 0)).collect();
    for (status, n) in found {
        match counts.iter_mut().find(|(s, _)| *s == status) {
            Some(entry) => entry.1 += n,
            None => counts.push((status, n)),
        }
    }
    counts
}

/// Refuses a decomposition the schema cannot catch: a child that names another parent, or an
/// edge that starts at a task that is not one of the children, or a task that depends on
/// itself.
pub(crate) fn check_decomposition(
    parent_gid: &str,
    children: &[TaskLink],
    dependencies: &[TaskDependency],
) -> StoreResult<()> {
    let refuse = |reason: String| StoreError::InvalidDecomposition {
        parent: parent_gid.to_string(),
        reason,
    };
    if let Some(child) = children.iter().find(|c| c.parent_gid != parent_gid) {
        return Err(refuse(format!(
            "child `{}` names `{}` as its parent",
            child.task_gid, child.parent_gid
        )));
    }
    if let Some(edge) = dependencies
        .iter()
        .find(|d| !children.iter().any(|c| c.task_gid == d.task_gid))
    {
        return Err(refuse(format!(
            "dependency `{}` -> `{}` starts at a task that is not one of its children",
            edge.task_gid, edge.depends_on
        )));
    }
    if let Some(edge) = dependencies.iter().find(|d| d.task_gid == d.depends_on) {
        return Err(refuse(format!("`{}` depends on itself", edge.task_gid)));
    }
    Ok(())
}

/// The `lifecycle` column's text for a run's view.
pub(crate) fn lifecycle_column(view: Option<&executor_core::lifecycle::RunView>) -> Option<String> {
    view.and_then(|v| serde_json::to_string(v).ok())
}

/// A run's view from its `lifecycle` column. A view this version cannot read is logged
/// and taken as none (the run is carried on from its state), never an error that would
/// hide the run.
pub(crate) fn lifecycle_from_column(
    text: Option<&str>,
) -> Option<executor_core::lifecycle::RunView> {
    let text = text?;
    match serde_json::from_str(text) {
        Ok(view) => Some(view),
        Err(error) => {
            tracing::warn!(%error, lifecycle = %text, "a run's stored lifecycle cannot be read; it is carried on from its state");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_postgres_password_is_never_displayed() {
        let target = StorageTarget::Postgres {
            url: "postgres://exec:hunter2@db:5432/work?sslmode=require".into(),
            password: Some("other".into()),
        };
        assert_eq!(
            target.display(),
            "postgres://exec:***@db:5432/work?sslmode=require"
        );
        let in_query = StorageTarget::Postgres {
            url: "postgres://exec@db/work?password=hunter2&sslmode=require".into(),
            password: Some("s3cret".into()),
        };
        assert_eq!(
            in_query.display(),
            "postgres://exec@db/work?password=***&sslmode=require"
        );
        let debug = format!("{in_query:?}");
        assert!(
            !debug.contains("hunter2") && !debug.contains("s3cret"),
            "{debug}"
        );
        assert!(
            check_postgres_url("postgres://exec@db/work?password=hunter2")
                .expect("valid")
                .has_password
        );
        assert!(
            check_postgres_url("postgres://exec:hunter2@db/work")
                .expect("valid")
                .has_password
        );
        assert!(
            !check_postgres_url("postgres://exec@db/work?sslmode=require")
                .expect("valid")
                .has_password
        );
        for leaky in [
            "postgres://exec@db/work?Password=hunter2",
            "postgres://exec@db/work?passwrod=hunter2",
            "postgres://exec@db/work?hunter2",
        ] {
            let err = check_postgres_url(leaky).expect_err("unknown parameter");
            assert!(!err.contains("hunter2"), "{err}");
        }
        // A percent-encoded key is the driver's `password` all the same.
        assert!(
            check_postgres_url("postgres://exec@db/work?pass%77ord=hunter2")
                .expect("valid")
                .has_password
        );
        let encoded = StorageTarget::Postgres {
            url: "postgres://exec@db/work?pass%77ord=hunter2".into(),
            password: None,
        };
        assert!(
            !encoded.display().contains("hunter2"),
            "{}",
            encoded.display()
        );
        let plain = StorageTarget::Postgres {
            url: "postgres://exec@db/work".into(),
            password: None,
        };
        assert_eq!(plain.display(), "postgres://exec@db/work");
    }
}

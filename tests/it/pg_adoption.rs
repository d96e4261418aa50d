//! Adopting an owner's existing Postgres tables in place: migrations only add.

use executor::core::queue::QueueStatus;
use executor::core::record::{NewEvent, StatusChange};
use executor::core::run::RunState;
use executor::core::task::{NewTask, UpsertOutcome};
use executor::store::postgres::PgStore;
use executor::store::Store;
use sqlx::Row;

use crate::support::{PgSchema, QUEUE_COLUMNS, RUN_COLUMNS};

/// The owner's tables as they might stand before executor ever ran: older column types,
/// a few of our columns missing, nullable columns holding NULLs, no unique index on
/// `task_gid`, a `user_context` column, and a column of the owner's own.
const OWNER_SCHEMA: &str = r#"
CREATE TABLE executor_queue (
    id SERIAL PRIMARY KEY,
    task_gid TEXT NOT NULL,
    added_at TIMESTAMP DEFAULT now(),
    updated_at TIMESTAMP DEFAULT now(),
    source TEXT,
    description TEXT,
    notes TEXT,
    status TEXT,
    priority INTEGER,
    analysis_summary TEXT,
    user_context TEXT,
    owner_flag TEXT DEFAULT 'mine'
);
CREATE TABLE executor_runs (
    id SERIAL PRIMARY KEY,
    task_gid TEXT NOT NULL,
    branch_name TEXT,
    pr_url TEXT,
    state TEXT,
    ci_attempts INTEGER,
    updated_at TIMESTAMP,
    owner_note TEXT
);
INSERT INTO executor_queue (task_gid, source, description, notes, status, priority, user_context, owner_flag) VALUES
    ('1209876543210987', 'asana', 'Fix tab preview', NULL, NULL, 2, 'Seen on macOS 15 only', 'keep-1'),
    ('1209876543210988', 'asana', 'Speed up startup', 'profiled once', 'awaiting_go', 1, 'owner: try lazy tabs', 'keep-2'),
    ('1209876543210989', 'asana', 'Timeline template', NULL, 'skip', NULL, NULL, 'keep-3'),
    ('1209876543210990', 'asana', 'Parked by hand', NULL, 'parked', NULL, '', 'keep-4');
UPDATE executor_queue SET added_at = NULL, updated_at = NULL WHERE task_gid = '1209876543210989';
INSERT INTO executor_runs (task_gid, branch_name, pr_url, state, ci_attempts, updated_at, owner_note) VALUES
    ('1209876543210988', 'executor/1209876543210988-startup', 'https://github.com/o/r/pull/7', 'pr', 2, now(), 'watch CI'),
    ('1209876543210987', NULL, NULL, NULL, NULL, NULL, 'half-written by hand');
"#;

/// task_gid, owner_flag, user_context, notes.
type QueueRow = (String, Option<String>, Option<String>, Option<String>);

#[tokio::test]
async fn migrations_adopt_existing_tables_keeping_every_row_and_column() {
    let Some(schema) = PgSchema::create("adoption").await else {
        return;
    };
    let admin = schema.admin().await;
    sqlx::raw_sql(OWNER_SCHEMA)
        .execute(&admin)
        .await
        .expect("owner's tables");

    let store = PgStore::connect_with(schema.options())
        .await
        .expect("adopt");

    // Every row and the owner's own columns are still there.
    let rows = sqlx::query(
        "SELECT task_gid, owner_flag, user_context, notes FROM executor_queue ORDER BY id",
    )
    .fetch_all(&admin)
    .await
    .expect("read back");
    let read: Vec<QueueRow> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(
        read,
        [
            (
                "1209876543210987".to_string(),
                Some("keep-1".to_string()),
                Some("Seen on macOS 15 only".to_string()),
                Some("Seen on macOS 15 only".to_string())
            ),
            (
                "1209876543210988".to_string(),
                Some("keep-2".to_string()),
                Some("owner: try lazy tabs".to_string()),
                Some("profiled once\n\nowner: try lazy tabs".to_string())
            ),
            (
                "1209876543210989".to_string(),
                Some("keep-3".to_string()),
                None,
                None
            ),
            (
                "1209876543210990".to_string(),
                Some("keep-4".to_string()),
                Some(String::new()),
                None
            ),
        ]
    );
    let owner_note: Option<String> = sqlx::query_scalar("SELECT owner_note FROM executor_runs")
        .fetch_one(&admin)
        .await
        .expect("owner's run column");
    assert_eq!(owner_note.as_deref(), Some("watch CI"));

    // Every column of docs/design.md §4 now exists.
    for (table, columns) in [
        ("executor_queue", &QUEUE_COLUMNS[..]),
        ("executor_runs", &RUN_COLUMNS[..]),
    ] {
        let present: Vec<String> = sqlx::query_scalar(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = $1",
        )
        .bind(table)
        .fetch_all(&admin)
        .await
        .expect("columns");
        for column in columns {
            assert!(
                present.iter().any(|c| c == column),
                "{table}.{column} missing"
            );
        }
    }

    // The store reads the adopted rows through the owner's column types.
    let tasks = store.tasks(None).await.expect("list adopted");
    assert_eq!(tasks.len(), 4);
    assert_eq!(
        tasks[0].status,
        QueueStatus::Pending,
        "NULL status is pending"
    );
    assert_eq!(tasks[0].priority, Some(2));
    assert_eq!(tasks[1].status, QueueStatus::AwaitingGo);
    assert_eq!(tasks[3].status, QueueStatus::Other("parked".into()));
    assert_eq!(
        tasks[2].added_at,
        chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
        "NULL added_at reads as the epoch"
    );
    let pending = store
        .tasks(Some(&QueueStatus::Pending))
        .await
        .expect("pending");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].task_gid, "1209876543210987");
    let runs = store.runs(Some("1209876543210988")).await.expect("runs");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].state, RunState::Pr);
    assert_eq!(runs[0].ci_attempts, 2);
    let half = store.runs(Some("1209876543210987")).await.expect("runs");
    assert_eq!(half.len(), 1, "a run with NULLs in it is still read");
    assert_eq!(half[0].ci_attempts, 0);
    let unique: bool = sqlx::query_scalar(
        "SELECT indisunique FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
         WHERE c.relname = 'executor_queue_task_gid_key' AND c.relnamespace = current_schema()::regnamespace",
    )
    .fetch_one(&admin)
    .await
    .expect("the migration made task_gid unique");
    assert!(unique);

    // ... and writes to them.
    let moved = store
        .change_status(&StatusChange {
            task_gid: "1209876543210988".into(),
            from: QueueStatus::AwaitingGo,
            to: QueueStatus::Approved,
            event: NewEvent {
                kind: "go".into(),
                actor: "owner".into(),
                detail: None,
                at: chrono::Utc::now(),
            },
        })
        .await
        .expect("go on an adopted task");
    assert_eq!(moved.status, QueueStatus::Approved);
    let (_, outcome) = store
        .upsert_task(
            &NewTask {
                task_gid: "T-new".into(),
                source: "cli".into(),
                description: "# New".into(),
                notes: None,
                priority: Some(3),
                initial_status: QueueStatus::Pending,
            },
            "cli",
            chrono::Utc::now(),
        )
        .await
        .expect("add beside adopted rows");
    assert_eq!(outcome, UpsertOutcome::Created);
    let flag: Option<String> =
        sqlx::query_scalar("SELECT owner_flag FROM executor_queue WHERE task_gid = 'T-new'")
            .fetch_one(&admin)
            .await
            .expect("owner default applies to new rows");
    assert_eq!(flag.as_deref(), Some("mine"));
    store.pool().close().await;

    // A second start applies nothing again: user_context is not carried twice.
    let again = PgStore::connect_with(schema.options())
        .await
        .expect("restart");
    let notes: Option<String> =
        sqlx::query_scalar("SELECT notes FROM executor_queue WHERE task_gid = '1209876543210988'")
            .fetch_one(&admin)
            .await
            .expect("notes");
    assert_eq!(
        notes.as_deref(),
        Some("profiled once\n\nowner: try lazy tabs")
    );
    again.pool().close().await;
    admin.close().await;
    schema.drop().await;
}

#[tokio::test]
async fn two_runners_starting_together_migrate_once() {
    let Some(schema) = PgSchema::create("concurrent_migrate").await else {
        return;
    };
    let (a, b) = tokio::join!(
        PgStore::connect_with(schema.options()),
        PgStore::connect_with(schema.options())
    );
    let a = a.expect("first runner");
    let b = b.expect("second runner");
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM executor_schema_migrations")
        .fetch_one(a.pool())
        .await
        .expect("count");
    assert_eq!(applied, executor::store::migrations::POSTGRES.len() as i64);
    a.pool().close().await;
    b.pool().close().await;
    schema.drop().await;
}

#[tokio::test]
async fn adopting_a_table_with_duplicate_gids_fails_naming_the_duplicate() {
    let Some(schema) = PgSchema::create("duplicate_gids").await else {
        return;
    };
    let admin = schema.admin().await;
    sqlx::raw_sql(
        "CREATE TABLE executor_queue (id SERIAL PRIMARY KEY, task_gid TEXT NOT NULL, status TEXT); \
         INSERT INTO executor_queue (task_gid) VALUES ('T-dup'), ('T-dup'), ('T-ok');",
    )
    .execute(&admin)
    .await
    .expect("owner's table");
    let err = match PgStore::connect_with(schema.options()).await {
        Ok(_) => panic!("duplicate gids cannot get a unique index"),
        Err(err) => err.to_string(),
    };
    assert!(err.contains("T-dup"), "{err}");
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM executor_queue")
        .fetch_one(&admin)
        .await
        .expect("rows");
    assert_eq!(kept, 3, "a failed migration changes nothing");
    admin.close().await;
    schema.drop().await;
}

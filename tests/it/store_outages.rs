//! A running daemon carrying many short runs while its store goes away in the middle:
//! Postgres refusing every connection (30 s, and 90 s: past the runner's 60 s leases), an
//! SQLite database on a full file system (10 s) and made read-only (30 s). Every task is
//! then done once, by one run, no run ever had two live workers, every line a worker
//! printed is stored once and in order, and `executor status` said the store was out of
//! reach while it was, with how many runs waited for it.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::daemon::Daemon;
use crate::engine::{Immutable, SmallDisk};
use crate::runner::workspace;
use crate::support::{eventually, Workspace, PG_ENV};

/// Six tasks, two workers at a time.
const TASKS: usize = 6;
/// Each worker's protocol lines, a second apart.
const STEPS: [&str; 3] = [
    "[STATUS:step] n=1",
    "[STATUS:step] n=2",
    "[STATUS:step] n=3",
];
/// Long enough for every task after the outage on a loaded CI machine.
const ALL_DONE: Duration = Duration::from_secs(180);

/// The workspace: six approved tasks whose workers print [`STEPS`] over two seconds.
fn six_short_tasks(storage_url: &str) -> Workspace {
    let mut ws = workspace(
        &[
            "/bin/sh",
            "-c",
            "echo '[STATUS:step] n=1'; sleep 1; echo '[STATUS:step] n=2'; sleep 1; echo '[STATUS:step] n=3'; echo changed > CHANGED.md; echo '[DONE:implemented] done'",
        ],
        &[],
        "max_workers = 2\n",
    );
    ws.env
        .push(("EXECUTOR_STORAGE_URL".into(), storage_url.to_string()));
    for n in 1..=TASKS {
        let gid = format!("D-{n}");
        ws.ok(&["add", "--title", &format!("Short {gid}"), "--gid", &gid]);
        ws.ok(&["go", &gid]);
    }
    ws
}

/// `executor status --json` while the store is away: the store's account of the outage,
/// as the daemon gives it (from the report, or from the answer that the store did not).
fn outage_said(ws: &Workspace) -> Option<Value> {
    let out = ws.run(&["status", "--json"]);
    let status: Value = serde_json::from_slice(&out.stdout).ok()?;
    let account = status.get("store_outage")?.clone();
    (account["waiting_runs"].as_u64()? >= 1 && account["waiting_writes"].as_u64()? >= 1)
        .then_some(account)
}

/// Waits for the daemon to say, through `status`, that runs wait for the store.
fn status_says_the_store_is_out(ws: &Workspace) {
    let account = eventually(
        Duration::from_secs(25),
        "status saying the store is out",
        || outage_said(ws),
    );
    assert!(account["since"].is_string(), "{account}");
}

/// After the outage: every task done by one complete run, the daemon said the outage's end
/// once, and `lines` (each task's stored step lines, in order) hold every worker's lines
/// whole and once.
fn assert_all_done_once(ws: &Workspace, lines: &dyn Fn(&str) -> Vec<String>) {
    let log = || std::fs::read_to_string(ws.path().join("daemon.log")).unwrap_or_default();
    let gids: Vec<String> = (1..=TASKS).map(|n| format!("D-{n}")).collect();
    let started = Instant::now();
    loop {
        let shown: Vec<serde_json::Value> = gids
            .iter()
            .map(|gid| ws.json(&["show", gid, "--json"]))
            .collect();
        if shown.iter().all(|s| s["task"]["status"] == "done") {
            break;
        }
        assert!(
            started.elapsed() < ALL_DONE,
            "not every task done {ALL_DONE:?} after the outage: {}\n{}",
            shown
                .iter()
                .map(|s| format!(
                    "{} {} runs {}",
                    s["task"]["gid"], s["task"]["status"], s["runs"]
                ))
                .collect::<Vec<_>>()
                .join("\n"),
            log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("every task done {:?} after the outage", started.elapsed());
    for gid in &gids {
        let shown = ws.json(&["show", gid, "--json"]);
        let runs = shown["runs"].as_array().cloned().unwrap_or_default();
        assert_eq!(runs.len(), 1, "one run of {gid}: {shown}\n{}", log());
        assert_eq!(runs[0]["state"], "complete", "{shown}");
        let stored = lines(gid);
        // A run handed back after its worker ended may have its worker started again by
        // recovery: then that second worker's lines follow the first's, whole.
        assert!(
            !stored.is_empty() && stored.chunks(STEPS.len()).all(|worker| worker == STEPS),
            "{gid}'s lines, each worker's whole, once and in order: {stored:?}\n{}",
            log()
        );
    }
    let log = log();
    assert!(log.contains("the store is out of reach"), "{log}");
    assert_eq!(
        log.matches("the store outage is over").count(),
        1,
        "the end said once: {log}"
    );
}

/// A worker's run, when it started and when it ended.
type WorkerSpan = (
    i64,
    chrono::DateTime<chrono::Utc>,
    Option<chrono::DateTime<chrono::Utc>>,
);

/// No run ever had two live workers: each run's workers, oldest first, each ended before
/// the next started. `workers` is (run, started, ended) for every worker.
fn assert_no_overlap(workers: &[WorkerSpan]) {
    for (i, (run, started, _)) in workers.iter().enumerate() {
        for (other, _, ended) in &workers[..i] {
            if other == run {
                let ended = ended
                    .unwrap_or_else(|| panic!("run {run} has a worker never ended: {workers:?}"));
                assert!(
                    ended <= *started,
                    "two live workers of run {run}: {workers:?}"
                );
            }
        }
    }
}

/// One connection to the database at `url`.
async fn connect(url: &str) -> sqlx::PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

/// A Postgres database of the test's own (the outage refuses connections to a whole
/// database), dropped at the end.
struct PgDatabase {
    admin_url: String,
    name: String,
}

impl PgDatabase {
    async fn create(test: &str) -> Option<Self> {
        let Ok(admin_url) = std::env::var(PG_ENV) else {
            eprintln!("skipped: {test} on Postgres ({PG_ENV} is not set)");
            return None;
        };
        let name = format!("executor_{test}_{}", std::process::id());
        let this = Self { admin_url, name };
        let admin = this.admin().await;
        sqlx::query(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            this.name
        ))
        .execute(&admin)
        .await
        .expect("drop an old database");
        sqlx::query(&format!("CREATE DATABASE {}", this.name))
            .execute(&admin)
            .await
            .expect("create the test's database");
        admin.close().await;
        Some(this)
    }

    /// A connection to the server's own test database, outside the one that goes away.
    async fn admin(&self) -> sqlx::PgPool {
        connect(&self.admin_url).await
    }

    /// The database's URL: the server's, naming this database.
    fn url(&self) -> String {
        let (base, query) = match self.admin_url.split_once('?') {
            Some((base, query)) => (base, format!("?{query}")),
            None => (self.admin_url.as_str(), String::new()),
        };
        let server = base.rsplit_once('/').map_or(base, |(server, _)| server);
        format!("{server}/{}{query}", self.name)
    }

    async fn pool(&self) -> sqlx::PgPool {
        connect(&self.url()).await
    }

    /// Every connection to the database refused, those open cut, for `lasting`.
    async fn refuse_connections(&self, lasting: Duration, meanwhile: impl FnOnce()) {
        let admin = self.admin().await;
        sqlx::query(&format!(
            "ALTER DATABASE {} WITH ALLOW_CONNECTIONS false",
            self.name
        ))
        .execute(&admin)
        .await
        .expect("refuse connections");
        let cut: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
        )
        .bind(&self.name)
        .fetch_all(&admin)
        .await
        .expect("cut the open connections");
        assert!(!cut.is_empty(), "the daemon had no connection to cut");
        let until = tokio::time::Instant::now() + lasting;
        tokio::task::block_in_place(meanwhile);
        tokio::time::sleep_until(until).await;
        sqlx::query(&format!(
            "ALTER DATABASE {} WITH ALLOW_CONNECTIONS true",
            self.name
        ))
        .execute(&admin)
        .await
        .expect("allow connections again");
        admin.close().await;
    }

    async fn drop(self) {
        let admin = self.admin().await;
        let _ = sqlx::query(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ))
        .execute(&admin)
        .await;
        admin.close().await;
    }
}

/// The Postgres case: the daemon carrying six short runs, and for `lasting` from its
/// first worker on, the database refusing every connection.
async fn postgres_refusing_connections(test: &str, lasting: Duration) {
    let Some(db) = PgDatabase::create(test).await else {
        return;
    };
    let ws = six_short_tasks(&db.url());
    let daemon = Daemon::start(&ws);
    let pool = db.pool().await;
    tokio::task::block_in_place(|| {
        eventually(Duration::from_secs(60), "a worker running", || {
            let runtime = tokio::runtime::Handle::current();
            let n: i64 = runtime
                .block_on(
                    sqlx::query_scalar("SELECT count(*) FROM executor_workers").fetch_one(&pool),
                )
                .ok()?;
            (n > 0).then_some(())
        })
    });
    pool.close().await;
    db.refuse_connections(lasting, || status_says_the_store_is_out(&ws))
        .await;
    let pool = db.pool().await;
    let runtime = tokio::runtime::Handle::current();
    let lines = |gid: &str| -> Vec<String> {
        runtime
            .block_on(
                sqlx::query_scalar(
                    "SELECT line FROM executor_messages WHERE kind = 'step' AND task_gid = $1 ORDER BY id",
                )
                .bind(gid)
                .fetch_all(&pool),
            )
            .expect("the stored lines")
    };
    tokio::task::block_in_place(|| assert_all_done_once(&ws, &lines));
    let workers: Vec<WorkerSpan> =
        sqlx::query_as("SELECT run_id, started_at, ended_at FROM executor_workers ORDER BY id")
            .fetch_all(&pool)
            .await
            .expect("workers");
    assert_no_overlap(&workers);
    pool.close().await;
    drop(daemon);
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_refusing_connections_for_30_s_strands_no_run_of_the_daemon() {
    postgres_refusing_connections("refused_30s", Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_refusing_connections_past_the_lease_strands_no_run_of_the_daemon() {
    postgres_refusing_connections("refused_90s", Duration::from_secs(90)).await;
}

/// The SQLite cases: the daemon carrying six short runs on the database `db`, and from its
/// first worker on, `outage` taking the store away until it returns (false: this machine
/// cannot, and said so).
fn sqlite_outage(db: &Path, outage: impl FnOnce(&Workspace) -> bool) {
    let ws = six_short_tasks(&format!("sqlite://{}", db.display()));
    let daemon = Daemon::start(&ws);
    let stored = |sql: &str, gid: Option<&str>| -> Vec<String> {
        let conn = rusqlite::Connection::open(db).expect("open the database");
        let mut query = conn.prepare(sql).expect("prepare");
        let params: Vec<&str> = gid.into_iter().collect();
        query
            .query_map(rusqlite::params_from_iter(params), |row| row.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows")
    };
    eventually(Duration::from_secs(60), "a worker running", || {
        (!stored("SELECT CAST(pid AS TEXT) FROM executor_workers", None).is_empty()).then_some(())
    });
    if !outage(&ws) {
        return;
    }
    let lines = |gid: &str| {
        stored(
            "SELECT line FROM executor_messages WHERE kind = 'step' AND task_gid = ?1 ORDER BY id",
            Some(gid),
        )
    };
    assert_all_done_once(&ws, &lines);
    let conn = rusqlite::Connection::open(db).expect("open the database");
    let workers: Vec<WorkerSpan> = conn
        .prepare("SELECT run_id, started_at, ended_at FROM executor_workers ORDER BY id")
        .expect("prepare")
        .query_map([], |row| {
            let started: String = row.get(1)?;
            let ended: Option<String> = row.get(2)?;
            Ok((row.get(0)?, time(&started), ended.as_deref().map(time)))
        })
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_no_overlap(&workers);
    drop(daemon);
}

/// A time as SQLite keeps it.
fn time(text: &str) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("{text:?} is no time: {e}"))
        .with_timezone(&chrono::Utc)
}

#[test]
fn a_full_file_system_for_10_s_strands_no_run_of_the_daemon() {
    let Some(disk) = SmallDisk::mount("16m") else {
        return;
    };
    sqlite_outage(&disk.path().join("executor.db"), |ws| {
        let filler = disk.fill();
        let until = Instant::now() + Duration::from_secs(10);
        status_says_the_store_is_out(ws);
        std::thread::sleep(until.saturating_duration_since(Instant::now()));
        std::fs::remove_file(&filler).expect("free the disk");
        true
    });
}

#[test]
fn a_read_only_database_for_30_s_strands_no_run_of_the_daemon() {
    let data = tempfile::tempdir_in(std::env::temp_dir()).expect("a folder for the database");
    let db = data.path().join("executor.db");
    sqlite_outage(&db, |ws| {
        let files = [db.clone(), data.path().join("executor.db-wal")];
        let Some(frozen) = Immutable::set(&files) else {
            return false;
        };
        let until = Instant::now() + Duration::from_secs(30);
        status_says_the_store_is_out(ws);
        std::thread::sleep(until.saturating_duration_since(Instant::now()));
        drop(frozen);
        true
    });
}

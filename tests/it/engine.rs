//! The run engine's promises across runner processes, with real runners, real workers and
//! the real stores: a restart changes no decision, a back-off holds no worker slot, a
//! runner starting beside a live one leaves its workers alone, and a runner whose lease
//! was taken over (frozen past it) stands down and writes nothing more.

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::Value;

use crate::runner::workspace;
use crate::support::{eventually, PgSchema, Workspace};

const LONG: Duration = Duration::from_secs(90);

/// Every worker record: (run, started, ended, outcome), oldest first.
fn sqlite_workers(db: &Path) -> Vec<(i64, String, Option<String>, Option<String>)> {
    let conn = rusqlite::Connection::open(db).expect("open the database");
    let mut statement = conn
        .prepare("SELECT run_id, started_at, ended_at, outcome FROM executor_workers ORDER BY id")
        .expect("prepare");
    statement
        .query_map([], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

/// The first run's state and stored lifecycle, and how many workers were recorded, read in
/// one transaction (one snapshot of the WAL database).
fn run_and_workers(db: &Path) -> (String, String, usize) {
    let mut conn = rusqlite::Connection::open(db).expect("open the database");
    let tx = conn.transaction().expect("a read transaction");
    let (state, lifecycle): (String, Option<String>) = tx
        .query_row(
            "SELECT state, lifecycle FROM executor_runs ORDER BY id LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap_or_default();
    let workers: i64 = tx
        .query_row("SELECT count(*) FROM executor_workers", [], |row| {
            row.get(0)
        })
        .expect("count the workers");
    (
        state,
        lifecycle.unwrap_or_default(),
        usize::try_from(workers).unwrap_or(0),
    )
}

fn run_of(ws: &Workspace, gid: &str) -> Value {
    ws.json(&["show", gid, "--json"])["runs"][0].clone()
}

fn kill(child: &mut Child, signal: &str) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -{signal}");
}

/// A worker's end is written with its run's next write: every worker of a run that
/// completed, and of one abandoned after its last failed worker, is recorded as ended,
/// with why.
#[test]
fn every_worker_of_a_completed_and_an_abandoned_run_is_recorded_as_ended() {
    let outcomes = |worker: &[&str]| {
        let ws = workspace(worker, &[], "max_worker_attempts = 2\n");
        ws.ok(&["add", "--title", "One task", "--gid", "T-1"]);
        ws.ok(&["go", "T-1"]);
        ws.ok(&["run", "--once"]);
        let state = run_of(&ws, "T-1")["state"].as_str().map(str::to_string);
        let workers = sqlite_workers(&ws.path().join("executor.db"));
        let ended: Vec<(Option<String>, bool)> = workers
            .into_iter()
            .map(|(_, _, ended, outcome)| (outcome, ended.is_some()))
            .collect();
        (state, ended)
    };
    let done = (Some("done".to_string()), true);
    assert_eq!(
        outcomes(&[
            "/bin/sh",
            "-c",
            "echo done > DONE.md; echo '[DONE:implemented] done'"
        ]),
        (Some("complete".to_string()), vec![done])
    );
    let failed = (Some("exited 3 without [DONE]".to_string()), true);
    assert_eq!(
        outcomes(&["/bin/sh", "-c", "exit 3"]),
        (Some("abandoned".to_string()), vec![failed.clone(), failed])
    );
}

#[test]
fn a_runner_killed_during_every_back_off_still_abandons_after_max_worker_attempts() {
    let ws = workspace(
        &["/bin/sh", "-c", "echo '[STATUS:working] trying'; exit 1"],
        &[],
        "max_worker_attempts = 3\nretry_backoff = \"6s\"\n",
    );
    // The workspace's own retry_backoff comes first in the file; this one is the last word.
    // Long enough that a loaded machine's poll still sees the back-off before it ends.
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replace("retry_backoff = \"10ms\"\n", ""));
    ws.ok(&["add", "--title", "Never finishes", "--gid", "T-1"]);
    ws.ok(&["go", "T-1"]);
    let db = ws.path().join("executor.db");
    let mut restarts = 0;
    loop {
        let mut runner = ws
            .command(&["run", "--once"])
            .spawn()
            .expect("start a runner");
        // Wait for the next failed worker and its back-off, or for the end.
        let seen = sqlite_workers(&db).len();
        let ended = eventually(LONG, "a failed worker's back-off or the run's end", || {
            // The stage and the workers from one snapshot of the database: read apart, a
            // back-off seen just before it ended would pass for the next one.
            let (state, lifecycle, workers) = run_and_workers(&db);
            if state == "abandoned" {
                return Some(true);
            }
            let waiting = lifecycle.contains("retry_delay");
            (waiting && workers > seen).then_some(false)
        });
        if ended {
            let _ = runner.wait();
            break;
        }
        // The runner dies during the back-off; the next one takes the run up.
        kill(&mut runner, "KILL");
        let _ = runner.wait();
        restarts += 1;
        assert!(restarts <= 5, "the run never ended: {restarts} restarts");
    }
    let workers = sqlite_workers(&db);
    assert_eq!(
        workers.len(),
        3,
        "exactly max_worker_attempts workers: {workers:?}"
    );
    assert_eq!(restarts, 2, "a restart after the first two failures");
    let run = run_of(&ws, "T-1");
    assert_eq!(run["lifecycle"]["failed_workers"], 3, "{run}");
    assert_eq!(
        ws.json(&["show", "T-1", "--json"])["task"]["status"],
        "for_review"
    );
}

#[test]
fn a_run_waiting_out_its_back_off_holds_no_worker_slot() {
    // One slot. The first task's worker fails and waits a minute before its retry; the
    // second task's worker takes the slot meanwhile and completes.
    let ws = workspace(
        &[
            "/bin/sh",
            "-c",
            "if grep -q FAILS; then exit 1; fi; echo changed > CHANGED.md; echo '[DONE:implemented] fine'",
        ],
        &[],
        "max_workers = 1\n",
    );
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replace("retry_backoff = \"10ms\"", "retry_backoff = \"60s\""));
    ws.ok(&["add", "--title", "This one FAILS", "--gid", "T-1"]);
    ws.ok(&["add", "--title", "This one works", "--gid", "T-2"]);
    ws.ok(&["go", "T-1"]);
    ws.ok(&["go", "T-2"]);
    let mut runner = ws
        .command(&["run", "--once"])
        .spawn()
        .expect("start a runner");
    eventually(LONG, "the second task complete", || {
        (ws.json(&["show", "T-2", "--json"])["task"]["status"] == "done").then_some(())
    });
    let first = run_of(&ws, "T-1");
    kill(&mut runner, "KILL");
    let _ = runner.wait();
    assert_eq!(first["lifecycle"]["stage"], "retry_delay", "{first}");
    assert_eq!(first["lifecycle"]["failed_workers"], 1, "{first}");
}

/// `N` workspaces on one Postgres queue (one schema), each with its own runner.
fn shared_queue<const N: usize>(schema: &PgSchema, worker: &[&str], extra: &str) -> [Workspace; N] {
    std::array::from_fn(|_| {
        let mut ws = workspace(worker, &[], extra);
        ws.env
            .push(("EXECUTOR_STORAGE_URL".into(), schema.url_with_schema()));
        ws
    })
}

async fn pg_workers(
    schema: &PgSchema,
) -> Vec<(
    i64,
    chrono::DateTime<chrono::Utc>,
    Option<chrono::DateTime<chrono::Utc>>,
    Option<String>,
)> {
    let pool = schema.admin().await;
    let rows = sqlx::query_as(
        "SELECT run_id, started_at, ended_at, outcome FROM executor_workers ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .expect("workers");
    pool.close().await;
    rows
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runner_starting_beside_a_live_one_stops_none_of_its_workers() {
    let Some(schema) = PgSchema::create("engine_beside").await else {
        return;
    };
    let [first, second] = shared_queue(
        &schema,
        &[
            "/bin/sh",
            "-c",
            "sleep 6; echo changed > CHANGED.md; echo '[DONE:implemented] slow but sure'",
        ],
        "",
    );
    first.ok(&["add", "--title", "Slow work", "--gid", "T-1"]);
    first.ok(&["go", "T-1"]);
    let mut live = first.command(&["run", "--once"]).spawn().expect("start");
    let (mut tries, runtime) = (0, tokio::runtime::Handle::current());
    tokio::task::block_in_place(|| {
        eventually(LONG, "the first runner's worker", || {
            tries += 1;
            let workers = runtime.block_on(pg_workers(&schema));
            (!workers.is_empty()).then_some(())
        })
    });
    // Three idle runners of the second workspace start (and recover) beside it.
    for _ in 0..3 {
        let out = second.run(&["run", "--once"]);
        crate::support::assert_success(&out, "an idle runner beside a live one");
    }
    let status = tokio::task::block_in_place(|| live.wait()).expect("wait");
    assert!(status.success());
    let workers = pg_workers(&schema).await;
    assert_eq!(workers.len(), 1, "{workers:?}");
    assert_eq!(workers[0].3.as_deref(), Some("done"), "{workers:?}");
    assert_eq!(
        first.json(&["show", "T-1", "--json"])["task"]["status"],
        "done"
    );
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runner_frozen_past_its_lease_stands_down_and_the_run_completes_once() {
    let Some(schema) = PgSchema::create("engine_frozen").await else {
        return;
    };
    let [first, second] = shared_queue(
        &schema,
        &[
            "/bin/sh",
            "-c",
            "sleep 5; echo changed > CHANGED.md; echo '[DONE:implemented] done'",
        ],
        "lease_ttl = \"2s\"\n",
    );
    first.ok(&["add", "--title", "Contested work", "--gid", "T-1"]);
    first.ok(&["go", "T-1"]);
    let mut frozen = first
        .command(&["run", "--once"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start");
    let runtime = tokio::runtime::Handle::current();
    let workers = |at_least: usize| {
        tokio::task::block_in_place(|| {
            eventually(LONG, "a worker record", || {
                let workers = runtime.block_on(pg_workers(&schema));
                (workers.len() >= at_least).then_some(workers)
            })
        })
    };
    workers(1);
    kill(&mut frozen, "STOP");
    // Past the frozen runner's lease: the second runner takes the run over.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut taker = second.command(&["run", "--once"]).spawn().expect("start");
    let taken = workers(2);
    assert!(
        taken[0].2.is_some(),
        "the frozen runner's worker was stopped before the new one started: {taken:?}"
    );
    assert!(taken[0].2.unwrap() <= taken[1].1, "no overlap: {taken:?}");
    kill(&mut frozen, "CONT");
    let out = tokio::task::block_in_place(|| frozen.wait_with_output()).expect("wait");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("stands down"), "{said}");
    assert!(!said.contains("cannot apply"), "{said}");
    let status = tokio::task::block_in_place(|| taker.wait()).expect("wait");
    assert!(status.success());
    let shown = second.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["task"]["status"], "done", "{shown}");
    assert_eq!(shown["runs"][0]["state"], "complete", "{shown}");
    let completions = shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "run_completed")
        .count();
    assert_eq!(completions, 1, "{shown}");
    let workers = pg_workers(&schema).await;
    assert_eq!(workers.len(), 2, "{workers:?}");
    assert!(
        workers[0]
            .3
            .as_deref()
            .is_some_and(|o| o.starts_with("stopped")),
        "the frozen runner's late end did not overwrite the takeover's record: {workers:?}"
    );
    schema.drop().await;
}

#[test]
fn cancel_stops_a_live_worker_gives_the_task_back_and_retry_starts_a_fresh_run() {
    let ws = workspace(
        &[
            "/bin/sh",
            "-c",
            "if [ -e @MARK@ ]; then echo changed > CHANGED.md; echo '[DONE:implemented] quick this time'; else echo '[STATUS:working] slow'; exec sleep 120; fi",
        ],
        &[],
        "",
    );
    let mark = ws.path().join("go-fast");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replace("@MARK@", &mark.display().to_string()));
    ws.ok(&["add", "--title", "Takes too long", "--gid", "T-1"]);
    ws.ok(&["go", "T-1"]);
    let mut runner = ws
        .command(&["run", "--once"])
        .spawn()
        .expect("start a runner");
    let pid = eventually(LONG, "the worker running", || {
        run_of(&ws, "T-1")["worker_pid"].as_i64()
    });

    let said = ws.ok(&["cancel", "T-1", "--reason", "wrong approach"]);
    assert!(said.contains("run 1 of T-1: cancelled"), "{said}");
    let status = eventually(LONG, "the runner to stand down and exit", || {
        runner.try_wait().expect("wait")
    });
    assert!(status.success(), "{status}");
    eventually(LONG, "the worker stopped", || {
        (!Path::new(&format!("/proc/{pid}")).exists()).then_some(())
    });
    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["task"]["status"], "for_review", "{shown}");
    assert_eq!(shown["runs"][0]["state"], "abandoned", "{shown}");
    assert!(
        shown["runs"][0]["lifecycle"]["ended_because"]
            .as_str()
            .is_some_and(|why| why.contains("wrong approach")),
        "{shown}"
    );
    let again = ws.fails_with(1, &["cancel", "1"]);
    assert!(again.contains("already abandoned"), "{again}");

    std::fs::write(&mark, "").expect("mark");
    let said = ws.ok(&["retry", "T-1"]);
    assert!(said.contains("for_review -> approved"), "{said}");
    let out = ws.run(&["run", "--once"]);
    crate::support::assert_success(&out, "the retried run");
    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["task"]["status"], "done", "{shown}");
    assert_eq!(shown["runs"][1]["state"], "complete", "{shown}");
    let busy = ws.fails_with(1, &["retry", "NOPE-1"]);
    assert!(!busy.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_dropping_the_runners_connections_strands_no_run_and_loses_no_worker_line() {
    let Some(schema) = PgSchema::create("engine_outage").await else {
        return;
    };
    let mut ws = workspace(
        &[
            "/bin/sh",
            "-c",
            "for i in $(seq 1 40); do echo \"[STATUS:step] n=$i\"; sleep 1; done; echo changed > CHANGED.md; echo '[DONE:implemented] all steps'",
        ],
        &[],
        "",
    );
    // The runner's connections carry a name of their own, so only they are cut.
    store_named(&mut ws, &schema, "executor_outage");
    ws.ok(&["add", "--title", "Many steps", "--gid", "T-1"]);
    ws.ok(&["go", "T-1"]);
    let mut runner = ws.command(&["run", "--once"]).spawn().expect("start");
    a_worker_running(&schema);
    // For thirty seconds of the worker's forty, every connection the runner has is
    // terminated by the server, again and again.
    let cut = cut_runner_connections(&schema, "executor_outage", Duration::from_secs(30)).await;
    assert!(cut > 0, "no connection of the runner was cut");
    let status = tokio::task::block_in_place(|| runner.wait()).expect("wait");
    assert!(status.success(), "{status}");
    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["task"]["status"], "done", "{shown}");
    let admin = schema.admin().await;
    let steps: Vec<String> =
        sqlx::query_scalar("SELECT line FROM executor_messages WHERE kind = 'step' ORDER BY id")
            .fetch_all(&admin)
            .await
            .expect("messages");
    admin.close().await;
    let expected: Vec<String> = (1..=40).map(|n| format!("[STATUS:step] n={n}")).collect();
    assert_eq!(steps, expected, "every worker line stored, once, in order");
    schema.drop().await;
}

/// Points `ws` at `schema` with its connections named `name`, for [`cut_runner_connections`].
fn store_named(ws: &mut Workspace, schema: &PgSchema, name: &str) {
    ws.env.push((
        "EXECUTOR_STORAGE_URL".into(),
        format!("{}&application_name={name}", schema.url_with_schema()),
    ));
}

/// Waits until a worker is recorded running in `schema`.
fn a_worker_running(schema: &PgSchema) {
    let runtime = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| {
        eventually(LONG, "a worker running", || {
            (!runtime.block_on(pg_workers(schema)).is_empty()).then_some(())
        })
    });
}

/// Cuts every connection named `name` for `lasting`, again and again; how many it cut.
async fn cut_runner_connections(schema: &PgSchema, name: &str, lasting: Duration) -> i64 {
    let admin = schema.admin().await;
    let until = tokio::time::Instant::now() + lasting;
    let mut cut = 0i64;
    while tokio::time::Instant::now() < until {
        let killed: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1 AND pid <> pg_backend_pid()",
        )
        .bind(name)
        .fetch_all(&admin)
        .await
        .expect("terminate");
        cut += killed.len() as i64;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    admin.close().await;
    cut
}

#[tokio::test(flavor = "multi_thread")]
async fn three_runners_one_killed_and_replaced_complete_every_task_once_without_overlap() {
    let Some(schema) = PgSchema::create("engine_three").await else {
        return;
    };
    let [first, second, third] = shared_queue(
        &schema,
        &[
            "/bin/sh",
            "-c",
            "sleep 1.5; echo done > CHANGED.md; echo '[DONE:implemented] done'",
        ],
        "",
    );
    let gids: Vec<String> = (1..=6).map(|n| format!("T-{n}")).collect();
    for gid in &gids {
        first.ok(&["add", "--title", &format!("Work {gid}"), "--gid", gid]);
        first.ok(&["go", gid]);
    }
    let start = |ws: &Workspace| ws.command(&["run", "--once"]).spawn().expect("start");
    let mut runners = vec![start(&first), start(&second), start(&third)];
    // The second runner is killed while one of its workers (running in its workspace's
    // worktree) is live, and while no runner is between claiming a task and moving its
    // new run to `in_progress`, so the kill lands on a live worker: the case this test is
    // about (a run left `queued` is recovered too, by
    // `store_outages::postgres_refusing_connections_for_30_s_strands_no_run_of_the_daemon`'s path).
    let admin = schema.admin().await;
    let doomed = second.path().canonicalize().expect("the second workspace");
    let runtime = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| {
        eventually(LONG, "a live worker of the second runner", || {
            let pids: Vec<i64> = runtime
                .block_on(
                    sqlx::query_scalar("SELECT pid FROM executor_workers WHERE ended_at IS NULL")
                        .fetch_all(&admin),
                )
                .expect("open workers");
            let starting: i64 = runtime
                .block_on(
                    sqlx::query_scalar(
                        "SELECT COUNT(*) FROM executor_queue q WHERE q.status = 'in_progress' \
                         AND NOT EXISTS (SELECT 1 FROM executor_runs r \
                           WHERE r.task_gid = q.task_gid AND r.state = 'in_progress')",
                    )
                    .fetch_one(&admin),
                )
                .expect("runs being started");
            let live = pids.iter().any(|pid| {
                std::fs::read_link(format!("/proc/{pid}/cwd"))
                    .is_ok_and(|cwd| cwd.starts_with(&doomed))
            });
            (live && starting == 0).then_some(())
        })
    });
    admin.close().await;
    kill(&mut runners[1], "KILL");
    let _ = tokio::task::block_in_place(|| runners[1].wait());
    // Its replacement, from the same workspace on the same host, recovers what it left.
    runners.push(start(&second));
    for (n, runner) in runners.iter_mut().enumerate() {
        let status = tokio::task::block_in_place(|| runner.wait()).expect("wait");
        if n != 1 {
            assert!(status.success(), "runner {n}: {status}");
        }
    }

    for gid in &gids {
        let shown = first.json(&["show", gid, "--json"]);
        assert_eq!(shown["task"]["status"], "done", "{shown}");
        let completions = shown["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["kind"] == "run_completed")
            .count();
        assert_eq!(completions, 1, "{gid} completed once: {shown}");
    }
    let workers = pg_workers(&schema).await;
    assert!(
        workers.len() > gids.len(),
        "a worker was replaced: {workers:?}"
    );
    let mut by_run = std::collections::BTreeMap::<i64, Vec<_>>::new();
    for (run, started, ended, outcome) in &workers {
        let ended = ended.unwrap_or_else(|| panic!("run {run}'s worker never ended: {workers:?}"));
        by_run
            .entry(*run)
            .or_default()
            .push((*started, ended, outcome.clone()));
    }
    for (run, mut spans) in by_run {
        spans.sort();
        for pair in spans.windows(2) {
            assert!(
                pair[0].1 <= pair[1].0,
                "two workers of run {run} overlap: {pair:?}"
            );
        }
    }
    schema.drop().await;
}

/// A small tmpfs of the test's own for the database, or `None` (said) where this machine
/// cannot mount one (not root, no mount namespace rights).
pub(crate) struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    pub(crate) fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().expect("a folder for the tmpfs");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match mounted {
            Ok(out) if out.status.success() => Some(Self { dir }),
            Ok(out) => {
                eprintln!(
                    "skipped: cannot mount a small tmpfs here ({}); the full-disk outage is not tried",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                None
            }
            Err(error) => {
                eprintln!("skipped: cannot run mount ({error}); the full-disk outage is not tried");
                None
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the disk to its last byte with one file, and returns it.
    pub(crate) fn fill(&self) -> std::path::PathBuf {
        let filler = self.path().join("filler");
        let mut file = std::fs::File::create(&filler).expect("the filler");
        let block = vec![0u8; 64 * 1024];
        use std::io::Write;
        while file.write_all(&block).is_ok() {}
        let mut byte = [0u8; 1];
        while file.write_all(&byte).is_ok() {
            byte[0] = byte[0].wrapping_add(1);
        }
        let _ = file.sync_all();
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A runner carrying one task whose worker prints 30 `[STATUS:step]` lines over six
/// seconds, its database at `db`: the workspace, the runner, and the file its log goes to.
fn many_steps_runner(db: &Path) -> (Workspace, Child, std::path::PathBuf) {
    let mut ws = workspace(
        &[
            "/bin/sh",
            "-c",
            "for i in $(seq 1 30); do echo \"[STATUS:step] n=$i\"; sleep 0.2; done; echo changed > CHANGED.md; echo '[DONE:implemented] all steps'",
        ],
        &[],
        "",
    );
    ws.env.push((
        "EXECUTOR_STORAGE_URL".into(),
        format!("sqlite://{}", db.display()),
    ));
    ws.ok(&["add", "--title", "Many steps", "--gid", "T-1"]);
    ws.ok(&["go", "T-1"]);
    let log = ws.dir.path().join("runner.log");
    let runner = ws
        .command(&["run", "--once"])
        .stderr(std::fs::File::create(&log).expect("the runner's log"))
        .spawn()
        .expect("start");
    eventually(LONG, "the worker running", || {
        (!sqlite_workers(db).is_empty()).then_some(())
    });
    (ws, runner, log)
}

/// After a store outage in the middle of [`many_steps_runner`]'s worker: the runner met it
/// and waited it out, the run completed, and every worker line is stored once, in order.
fn assert_outage_waited_out(ws: &Workspace, mut runner: Child, log: &Path, db: &Path) {
    let status = runner.wait().expect("wait");
    let log = std::fs::read_to_string(log).expect("the runner's log");
    assert!(status.success(), "{status}\n{log}");
    assert!(log.contains("the store is out of reach"), "{log}");
    // The outage's end is said once, with how long it lasted and what caught up.
    assert_eq!(log.matches("the store outage is over").count(), 1, "{log}");
    assert!(log.contains("caught_up="), "{log}");
    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["task"]["status"], "done", "{shown}");
    assert_eq!(shown["runs"][0]["state"], "complete", "{shown}");
    let conn = rusqlite::Connection::open(db).expect("open the database");
    let steps: Vec<String> = conn
        .prepare("SELECT line FROM executor_messages WHERE kind = 'step' ORDER BY id")
        .expect("prepare")
        .query_map([], |row| row.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    let expected: Vec<String> = (1..=30).map(|n| format!("[STATUS:step] n={n}")).collect();
    assert_eq!(steps, expected, "every worker line stored, once, in order");
}

#[test]
fn a_full_disk_under_the_sqlite_store_strands_no_run_and_loses_no_worker_line() {
    let Some(disk) = SmallDisk::mount("8m") else {
        return;
    };
    let db = disk.path().join("executor.db");
    let (ws, runner, log) = many_steps_runner(&db);
    // For three seconds of the worker's six, the database's disk has not one byte free.
    let filler = disk.fill();
    std::thread::sleep(Duration::from_secs(3));
    std::fs::remove_file(&filler).expect("free the disk");
    assert_outage_waited_out(&ws, runner, &log, &db);
}

/// Marks `files` immutable (`chattr +i`: every write through a descriptor already open
/// fails with `EPERM`, as on a read-only file system) until dropped; `None` (said) where
/// this machine cannot (not root, or a file system without the flag).
pub(crate) struct Immutable {
    files: Vec<std::path::PathBuf>,
}

impl Immutable {
    pub(crate) fn set(files: &[std::path::PathBuf]) -> Option<Self> {
        let set = Command::new("chattr").arg("+i").args(files).output();
        match set {
            Ok(out) if out.status.success() => Some(Self {
                files: files.to_vec(),
            }),
            Ok(out) => {
                eprintln!(
                    "skipped: cannot make the database immutable here ({}); the read-only outage is not tried",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                None
            }
            Err(error) => {
                eprintln!(
                    "skipped: cannot run chattr ({error}); the read-only outage is not tried"
                );
                None
            }
        }
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").args(&self.files).status();
    }
}

/// A claim that fails (the store refusing writes) while a run of the same pass is still
/// being carried stops the claiming, not the run: it is carried to its end in the same
/// process, and the task the claim could not take is taken later.
#[test]
fn a_failed_claim_leaves_the_run_already_claimed_in_the_passs_hands() {
    let data = tempfile::tempdir_in(std::env::temp_dir()).expect("a folder for the database");
    let db = data.path().join("executor.db");
    // One worker at a time, and with a day's budget a task is claimed only once the slot
    // is free: so the second claim comes right after the first worker ended.
    let mut ws = workspace(
        &[
            "/bin/sh",
            "-c",
            "echo changed > CHANGED.md; echo '[DONE:implemented] done'; touch ../../ending; sleep 1.5",
        ],
        &[],
        "max_workers = 1\n\n[budget]\nper_day_usd = 100.0\n",
    );
    ws.env.push((
        "EXECUTOR_STORAGE_URL".into(),
        format!("sqlite://{}", db.display()),
    ));
    for gid in ["T-1", "T-2"] {
        ws.ok(&["add", "--title", &format!("Task {gid}"), "--gid", gid]);
        ws.ok(&["go", gid]);
    }
    let log = ws.dir.path().join("runner.log");
    let mut runner = ws
        .command(&["run", "--once"])
        .stderr(std::fs::File::create(&log).expect("the runner's log"))
        .spawn()
        .expect("start");
    // The first worker said it is done and is about to exit: from now on for four seconds
    // the store takes no write, neither the first run's end nor the second task's claim.
    eventually(LONG, "the first worker ending", || {
        ws.path().join("ending").exists().then_some(())
    });
    let files = [db.clone(), data.path().join("executor.db-wal")];
    let Some(frozen) = Immutable::set(&files) else {
        let _ = runner.wait();
        return;
    };
    std::thread::sleep(Duration::from_secs(4));
    drop(frozen);
    let status = runner.wait().expect("wait");
    let log = std::fs::read_to_string(&log).expect("the runner's log");
    assert!(status.success(), "{status}\n{log}");
    // The run claimed before the failure was carried to its end by this same process.
    let first = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(first["runs"][0]["state"], "complete", "{first}\n{log}");
    assert_eq!(first["task"]["status"], "done", "{first}");
    // The task the failed claim could not take is still there to take, and is taken.
    let second = ws.json(&["show", "T-2", "--json"]);
    if second["task"]["status"] != "done" {
        assert_eq!(second["task"]["status"], "approved", "{second}\n{log}");
        ws.ok(&["run", "--once"]);
    }
    let second = ws.json(&["show", "T-2", "--json"]);
    assert_eq!(second["task"]["status"], "done", "{second}");
    let runs = second["runs"].as_array().cloned().unwrap_or_default();
    assert_eq!(runs.len(), 1, "one run of the second task: {second}");
}

#[test]
fn a_read_only_sqlite_file_strands_no_run_and_loses_no_worker_line() {
    let data = tempfile::tempdir_in(std::env::temp_dir()).expect("a folder for the database");
    let db = data.path().join("executor.db");
    let (ws, mut runner, log) = many_steps_runner(&db);
    // For three seconds of the worker's six, the database and its log take no write.
    let files = [db.clone(), data.path().join("executor.db-wal")];
    let Some(frozen) = Immutable::set(&files) else {
        let _ = runner.wait();
        return;
    };
    std::thread::sleep(Duration::from_secs(3));
    drop(frozen);
    assert_outage_waited_out(&ws, runner, &log, &db);
}

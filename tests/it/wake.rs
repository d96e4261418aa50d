//! Wake-ups: a command typed in another terminal starts the daemon's work at once. Each
//! daemon here has a `loop_sleep` of ten minutes, so its reconciling timer can never be what
//! started the work: without the wake-up, these tests time out.

use std::time::Duration;

use serde_json::Value;

use crate::daemon::Daemon;
use crate::runner::workspace;
use crate::support::{eventually, PgSchema, Workspace};

/// Long enough for a loaded CI machine, far shorter than the daemon's own timer.
const WAIT: Duration = Duration::from_secs(30);

/// The reconciling timer these daemons never reach.
const LONG_SLEEP: &str = "loop_sleep = \"600s\"\n";

const QUICK_WORKER: &str = "echo changed > CHANGED.md; echo '[DONE:implemented] done at once'";

/// The same worker as `escalations.rs`: asks the owner first, then acts on the answer.
const ASKING_WORKER: &str = "prompt=$(cat); \
    if printf '%s' \"$prompt\" | grep -q 'The owner answered your escalation'; then \
      echo changed > CHANGED.md; echo '[DONE:implemented] merged as the owner allowed'; \
    else echo '[STATUS:investigation] ready to merge'; \
      echo '[ESCALATE:needs_decision] may I merge PR 12?'; fi";

fn shown(ws: &Workspace, gid: &str) -> Value {
    ws.json(&["show", gid, "--json"])
}

fn status_of(ws: &Workspace, gid: &str) -> String {
    shown(ws, gid)["task"]["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `executor go` from another process starts the task's worker while the daemon's timers
/// are far away.
fn go_wakes_the_daemon(ws: &Workspace) {
    let daemon = Daemon::start(ws);
    // The add wakes it too, with nothing approved yet (the daemon's analyzer may look at
    // the new task meanwhile; `go` approves it from pending or for_review alike).
    ws.ok(&["add", "--title", "Started by a wake-up", "--gid", "W-1"]);
    ws.ok(&["go", "W-1"]);
    eventually(WAIT, "the worker of W-1 to run to the end", || {
        (status_of(ws, "W-1") == "done").then_some(())
    });
    let log = std::fs::read_to_string(ws.path().join("daemon.log")).expect("daemon log");
    assert!(log.contains("listening for wake-ups"), "{log}");
    drop(daemon);
}

#[test]
fn go_from_another_process_wakes_the_daemon_on_sqlite() {
    let ws = workspace(&["/bin/sh", "-c", QUICK_WORKER], &[], LONG_SLEEP);
    go_wakes_the_daemon(&ws);
}

#[tokio::test]
async fn go_from_another_process_wakes_the_daemon_on_postgres() {
    let Some(schema) = PgSchema::create("wake_go").await else {
        return;
    };
    let mut ws = workspace(&["/bin/sh", "-c", QUICK_WORKER], &[], LONG_SLEEP);
    ws.env
        .push(("EXECUTOR_STORAGE_URL".into(), schema.url_with_schema()));
    go_wakes_the_daemon(&ws);
    let log = std::fs::read_to_string(ws.path().join("daemon.log")).expect("daemon log");
    assert!(log.contains("Postgres channel executor_wake"), "{log}");
    schema.drop().await;
}

#[test]
fn the_owners_answer_resumes_the_run_at_once() {
    let ws = workspace(&["/bin/sh", "-c", ASKING_WORKER], &[], LONG_SLEEP);
    ws.ok(&["add", "--title", "Merge when allowed", "--gid", "E-1"]);
    ws.ok(&["go", "E-1"]);
    // The daemon's first pass takes the approved task; its worker asks the owner.
    let daemon = Daemon::start(&ws);
    let id = eventually(WAIT, "the worker's escalation", || {
        ws.json(&["escalations", "--json"]).as_array()?.first()?["id"].as_i64()
    });
    ws.ok(&["decide", &id.to_string(), "approve"]);
    eventually(WAIT, "the resumed run to finish", || {
        (status_of(&ws, "E-1") == "done").then_some(())
    });
    assert_eq!(
        shown(&ws, "E-1")["runs"].as_array().map(Vec::len),
        Some(1),
        "the same run resumed"
    );
    drop(daemon);
}

#[test]
fn without_a_daemon_a_command_says_nothing_of_wake_ups() {
    let ws = Workspace::init();
    let out = ws.run(&["add", "--title", "Nobody listens", "--gid", "N-1"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("wake"), "{stderr}");
    assert!(
        !ws.path().join("executor.db.wake").exists(),
        "only a daemon makes the socket"
    );
}

#[tokio::test]
async fn a_lost_postgres_listener_is_made_again_and_says_wake_ups_may_be_missed() {
    use executor::store::wake::{Heard, Wake};
    use executor::store::Store;
    let Some(schema) = PgSchema::create("wake_lost").await else {
        return;
    };
    let name = format!("executor_wake_lost_{}", std::process::id());
    let store =
        executor::store::postgres::PgStore::connect_with(schema.options().application_name(&name))
            .await
            .expect("open Postgres");
    let mut wakes = store.listen_wakes().await.expect("listen");
    let admin = schema.admin().await;
    // The listener's connection is dropped by the server, as a restart or a proxy would.
    let ended: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = $1 AND query LIKE 'LISTEN%'",
    )
    .bind(&name)
    .fetch_all(&admin)
    .await
    .expect("terminate the listener");
    assert_eq!(ended, [true], "one listening connection");
    assert_eq!(next(&mut wakes).await, Some(Heard::Reconnected));
    store.wake(Wake::Answer).await.expect("wake");
    loop {
        // Other tests share the database's channel; theirs may come first.
        match next(&mut wakes).await {
            Some(Heard::Wake(Wake::Answer)) => break,
            Some(_) => continue,
            None => panic!("the listener stopped"),
        }
    }
    drop(wakes);
    admin.close().await;
    store.pool().close().await;
    schema.drop().await;
}

/// The next wake-up, within a generous bound (it waits for an event, it does not time it).
async fn next(wakes: &mut executor::store::wake::Wakes) -> Option<executor::store::wake::Heard> {
    tokio::time::timeout(WAIT, wakes.recv())
        .await
        .expect("a wake-up within the bound")
}

//! Asana into the queue through the binary, against the fake Asana: a thousand tasks across
//! three sections taken in by `run --once`, an edit and a completion upstream reflected on
//! the next poll (and only those read again), and a 401 or an unreachable Asana reported in
//! `executor status` while the plans folder keeps working.

use std::time::{Duration, Instant};

use executor::core::clock::{Clock, ManualClock, SystemClock};
use executor::core::facts::TaskFacts;
use executor::ops::source_intake::{Polling, SourceIntake, SourceIntakeError, SourceReport};
use executor::sources::asana::{AsanaClient, AsanaScope};
use executor::store::sqlite::SqliteStore;
use executor::store::Store;

use crate::fake_asana::{FakeAsana, Fault, TaskSeed, TOKEN};
use crate::support::Workspace;

/// A workspace reading `sections` of the fake, with the token in `ASANA_TEST_TOKEN`.
fn asana_workspace(asana_url: &str, sections: &[String], token: &str) -> Workspace {
    let mut ws = Workspace::init();
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    let list = sections
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ");
    ws.write_config(&format!(
        "{config}\n[sources.asana]\napi_url = \"{asana_url}\"\ntoken_env = \"ASANA_TEST_TOKEN\"\nsections = [{list}]\n"
    ));
    ws.env.push(("ASANA_TEST_TOKEN".into(), token.into()));
    ws
}

fn facts(ws: &Workspace, gid: &str) -> TaskFacts {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = SqliteStore::open(&ws.path().join("executor.db"))
            .await
            .expect("open the store");
        let json = store
            .task_facts(gid)
            .await
            .expect("read facts")
            .unwrap_or_else(|| panic!("{gid} has no facts"));
        serde_json::from_str(&json).expect("facts read back")
    })
}

fn run_once(ws: &Workspace) -> (bool, String) {
    let out = ws.run(&["run", "--once"]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_thousand_asana_tasks_come_in_and_upstream_edits_follow() {
    let asana = FakeAsana::start_empty();
    let backlog = asana.seed_sections("Lumen Browser — Backlog", &[400, 300, 300], |i| {
        TaskSeed::numbered(i).tag(if i % 2 == 0 { "macOS" } else { "Windows" })
    });
    let ws = asana_workspace(asana.url().as_str(), &backlog.sections, TOKEN);

    let (ok, stderr) = run_once(&ws);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("asana: 1000 new, 0 updated"), "{stderr}");
    // The long read says how far it got: a line per page.
    let pages = stderr.matches("read a page from Asana").count();
    assert_eq!(pages, 10, "{stderr}");
    let queue = ws.queue();
    assert_eq!(queue.len(), 1000);
    assert!(queue
        .iter()
        .all(|t| t["source"] == "asana" && t["status"] == "pending"));
    let first = &backlog.tasks[0];
    assert_eq!(queue[0]["task_gid"], first.as_str());
    assert_eq!(facts(&ws, first).labels, ["macOS"]);
    assert!(!facts(&ws, first).closed);

    // Nothing changed: the next poll reads nothing new.
    let (ok, stderr) = run_once(&ws);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("asana: 0 new, 0 updated, 0 unchanged"),
        "{stderr}"
    );

    // An edit and a completion upstream are taken in on the next poll.
    asana.set_notes(first, "Now with steps to reproduce.");
    let done = &backlog.tasks[1];
    asana.complete(done);
    let (ok, stderr) = run_once(&ws);
    assert!(ok, "{stderr}");
    // The edit changes the task's description; the completion only its facts.
    assert!(
        stderr.contains("asana: 0 new, 1 updated, 1 unchanged"),
        "{stderr}"
    );
    let shown = ws.json(&["show", first, "--json"]);
    let description = shown["task"]["description"].as_str().unwrap_or("");
    assert!(
        description.contains("Now with steps to reproduce."),
        "{description}"
    );
    assert!(facts(&ws, done).closed, "completed upstream");
    assert!(stderr.contains("1 closed upstream (skipped)"), "{stderr}");
    assert_eq!(ws.queue().len(), 1000, "nothing deleted");
    let shown = ws.json(&["show", done, "--json"]);
    assert_eq!(
        shown["task"]["status"], "skip",
        "nobody works on a done task"
    );
    assert_eq!(shown["facts"]["closed"], true, "{shown}");
    assert!(
        shown["events"].to_string().contains("closed upstream"),
        "{shown}"
    );
}

#[test]
fn a_401_or_an_unreachable_asana_is_reported_and_the_plans_folder_still_works() {
    let asana = FakeAsana::start_empty();
    let backlog = asana.seed_sections("Backlog", &[3], TaskSeed::numbered);
    let mut ws = asana_workspace(asana.url().as_str(), &backlog.sections, "not-the-token");
    // The plan note waits in the queue (this workspace has no repository to work it in).
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replacen(
        "[sources.plans]\n",
        "[sources.plans]\ninitial_status = \"pending\"\n",
        1,
    ));
    std::fs::write(ws.plans().join("note.md"), "# A plan\n\nStill taken in.\n").expect("note");

    let (ok, stderr) = run_once(&ws);
    assert!(!ok, "a source that cannot be read fails the pass: {stderr}");
    assert!(stderr.contains("Not Authorized"), "{stderr}");
    assert!(
        !stderr.contains("not-the-token"),
        "the token is never printed"
    );
    let queue = ws.queue();
    assert_eq!(queue.len(), 1, "the plan note came in: {queue:?}");
    assert_eq!(queue[0]["source"], "plans");
    let status = ws.ok(&["status"]);
    assert!(status.contains("asana"), "{status}");
    assert!(status.contains("Not Authorized"), "{status}");

    // With the right token, the same workspace's error is gone and the tasks come in.
    ws.env = vec![("ASANA_TEST_TOKEN".into(), TOKEN.into())];
    let (ok, stderr) = run_once(&ws);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("asana: 3 new"), "{stderr}");
    let status = ws.ok(&["status"]);
    assert!(status.contains("intake errors: none"), "{status}");

    // Asana unreachable: reported the same way.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = closed.local_addr().expect("address").port();
    drop(closed);
    let ws = asana_workspace(
        &format!("http://127.0.0.1:{port}/api/1.0"),
        &backlog.sections,
        TOKEN,
    );
    let (ok, stderr) = run_once(&ws);
    assert!(!ok, "{stderr}");
    let status = ws.ok(&["status"]);
    assert!(status.contains("asana"), "{status}");
    assert!(
        status.to_lowercase().contains("reach") || status.to_lowercase().contains("connect"),
        "{status}"
    );
}

#[test]
fn without_its_token_the_asana_source_does_not_start() {
    let asana = FakeAsana::start_empty();
    let backlog = asana.seed_sections("Backlog", &[1], TaskSeed::numbered);
    let mut ws = asana_workspace(asana.url().as_str(), &backlog.sections, TOKEN);
    ws.env.clear();
    let stderr = ws.fails_with(2, &["run", "--once"]);
    assert!(stderr.contains("ASANA_TEST_TOKEN"), "{stderr}");
}

/// A source intake of the fake's `sections` in a store of its own, polled on `clock`.
struct Intake {
    runtime: tokio::runtime::Runtime,
    store: SqliteStore,
    source: SourceIntake,
    _dir: tempfile::TempDir,
}

impl Intake {
    fn new(asana: &FakeAsana, sections: &[String], interval: Duration) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let dir = tempfile::tempdir().expect("temp dir");
        let store = runtime
            .block_on(SqliteStore::open(&dir.path().join("executor.db")))
            .expect("store");
        let client = AsanaClient::new(asana.settings()).expect("client");
        let scope = AsanaScope {
            sections: sections.to_vec(),
            ..AsanaScope::default()
        };
        let source = SourceIntake::new(Polling::Asana { client, scope }, interval);
        Self {
            runtime,
            store,
            source,
            _dir: dir,
        }
    }

    fn poll(&mut self, clock: &dyn Clock) -> Result<SourceReport, SourceIntakeError> {
        self.runtime.block_on(self.source.poll(&self.store, clock))
    }

    fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self._dir.path().join("executor.db")).expect("open")
    }
}

#[test]
fn a_rate_limited_source_is_not_due_before_its_retry_after() {
    let asana = FakeAsana::start_empty();
    let backlog = asana.seed_sections("Backlog", &[3], TaskSeed::numbered);
    let mut intake = Intake::new(&asana, &backlog.sections, Duration::from_millis(1));
    asana.fail_next(
        1,
        Fault::RateLimited {
            retry_after: Some(20),
        },
    );
    let error = intake.poll(&SystemClock).expect_err("429");
    assert_eq!(error.wait(), Some(Duration::from_secs(20)));
    // The 1 ms interval passed long ago; the 20 s Asana asked for did not.
    std::thread::sleep(Duration::from_millis(20));
    assert!(!intake.source.due(), "polled again before Retry-After");
    assert!(intake
        .source
        .due_at(Instant::now() + Duration::from_secs(21)));
}

#[test]
fn a_poll_inside_the_cursor_margin_leaves_unchanged_tasks_as_they_were() {
    let asana = FakeAsana::start_empty();
    let backlog = asana.seed_sections("Backlog", &[4], TaskSeed::numbered);
    let mut intake = Intake::new(&asana, &backlog.sections, Duration::from_secs(1));
    // This host's clock a few seconds past the fake's last change: the cursor's margin
    // reaches back over every task, so the next poll reads them all again.
    let clock = ManualClock::new(asana.now() + chrono::Duration::seconds(5));
    let first = intake.poll(&clock).expect("first poll");
    assert_eq!(first.created, 4);
    let written_at = |db: &rusqlite::Connection| -> Vec<(String, String, String)> {
        db.prepare(
            "SELECT q.task_gid, q.updated_at, f.updated_at FROM executor_queue q \
             JOIN executor_task_facts f ON f.task_gid = q.task_gid ORDER BY q.task_gid",
        )
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("query")
        .map(|row| row.expect("row"))
        .collect()
    };
    let before = written_at(&intake.db());
    clock.advance(chrono::Duration::seconds(30));
    let again = intake.poll(&clock).expect("second poll");
    assert_eq!(
        (again.created, again.updated, again.unchanged),
        (0, 0, 4),
        "read again, all unchanged"
    );
    assert_eq!(written_at(&intake.db()), before, "nothing rewritten");
}

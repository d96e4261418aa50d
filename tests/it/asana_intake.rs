//! Asana into the queue through the binary, against the fake Asana: a thousand tasks across
//! three sections taken in by `run --once`, an edit and a completion upstream reflected on
//! the next poll (and only those read again), and a 401 or an unreachable Asana reported in
//! `executor status` while the plans folder keeps working.

use executor::core::facts::TaskFacts;
use executor::store::sqlite::SqliteStore;
use executor::store::Store;

use crate::fake_asana::{FakeAsana, TaskSeed, TOKEN};
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

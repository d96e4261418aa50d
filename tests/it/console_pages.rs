//! The console's pages and live feed over plain HTTP in a running daemon: each page shows
//! what it is for; a form is taken only with the page's CSRF token, once (a stale answer
//! changes nothing and says so); the feed of changes resumes after a reconnect from its
//! `Last-Event-ID` with nothing missed.

use std::io::{BufRead, BufReader, Write};

use serde_json::Value;

use crate::console::{call, console_address, get, pending, post, ASKING_WORKER as ASKING, WAIT};
use crate::daemon::Daemon;
use crate::runner::workspace;
use crate::support::{eventually, Workspace};

/// A workspace whose daemon serves the console on a free port, with task T-1 approved
/// and its worker about to ask the owner.
pub(crate) fn console_workspace(worker: &str) -> Workspace {
    let ws = workspace(&["/bin/sh", "-c", worker], &[], "loop_sleep = \"600s\"\n");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!(
        "{config}\n[web]\nenabled = true\nlisten = \"127.0.0.1:0\"\n"
    ));
    ws.ok(&["add", "--title", "Change the schema", "--gid", "T-1"]);
    ws.ok(&["go", "T-1"]);
    ws
}

fn page(address: &str, path: &str) -> String {
    let (code, body) = call(address, "GET", path, &[], "");
    assert_eq!(code, 200, "GET {path}: {body}");
    body.as_str().expect("a page").to_string()
}

/// The CSRF token a page's forms carry.
pub(crate) fn csrf_of(html: &str) -> String {
    let at = html
        .find("name=\"csrf\" value=\"")
        .expect("a form with a token")
        + 19;
    html[at..].split('"').next().expect("token").to_string()
}

fn form(address: &str, path: &str, body: &str, extra: &[(&str, &str)]) -> (u16, String) {
    let mut headers = vec![("Content-Type", "application/x-www-form-urlencoded")];
    headers.extend_from_slice(extra);
    let (code, body) = call(address, "POST", path, &headers, body);
    (code, body.as_str().map(str::to_string).unwrap_or_default())
}

#[test]
fn the_pages_show_what_needs_the_owner_and_take_a_form_once_with_its_token() {
    let ws = console_workspace(ASKING);
    let _daemon = Daemon::start(&ws);
    let address = console_address(&ws);
    let escalation = eventually(WAIT, "the worker's question", || {
        pending(&address).first().and_then(|e| e["id"].as_i64())
    });
    let run_id = get(&address, "/api/v1/runs")[0]["id"]
        .as_i64()
        .expect("a run");

    let needs = page(&address, "/");
    for shown in [
        "Needs you",
        &format!("id=\"escalation-{escalation}\""),
        "may I change the schema?",
        "/assets/htmx.min.js",
    ] {
        assert!(needs.contains(shown), "{shown} missing from:\n{needs}");
    }
    let runs = page(&address, "/runs");
    assert!(runs.contains(&format!("id=\"run-{run_id}\"")), "{runs}");
    assert!(
        runs.contains(&format!("escalation {escalation}")),
        "waiting-on: {runs}"
    );
    let run = page(&address, &format!("/runs/{run_id}"));
    assert!(
        run.contains("[ESCALATE:needs_decision] may I change the schema?"),
        "{run}"
    );
    let queue = page(&address, "/queue");
    assert!(queue.contains("id=\"task-T-1\""), "{queue}");
    let (code, htmx) = call(&address, "GET", "/assets/htmx.min.js", &[], "");
    assert_eq!(code, 200);
    assert!(htmx
        .as_str()
        .unwrap_or_default()
        .contains("Zero-Clause BSD"));
    let (code, _) = call(&address, "GET", "/assets/nope.js", &[], "");
    assert_eq!(code, 404);

    // Refused, changing nothing: no token, another token, JSON, another site.
    let token = csrf_of(&needs);
    let decide = format!("/actions/escalations/{escalation}/decide");
    let (code, body) = form(&address, &decide, "answer=approve", &[]);
    assert_eq!(code, 403, "{body}");
    let (code, _) = form(&address, &decide, "answer=approve&csrf=0123", &[]);
    assert_eq!(code, 403);
    let with_token = format!("answer=approve&note=fine&csrf={token}");
    let (code, _) = call(
        &address,
        "POST",
        &decide,
        &[("Content-Type", "application/json")],
        &with_token,
    );
    assert_eq!(code, 415);
    let (code, _) = form(
        &address,
        &decide,
        &with_token,
        &[("Origin", "https://evil.example")],
    );
    assert_eq!(code, 403);
    assert_eq!(
        pending(&address).len(),
        1,
        "nothing refused changed anything"
    );

    // Taken once; the repeat says it changed nothing.
    let htmx = [("HX-Request", "true")];
    let (code, body) = form(&address, &decide, &with_token, &htmx);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("approved"), "{body}");
    let (code, body) = form(&address, &decide, &with_token, &htmx);
    assert_eq!(code, 409, "{body}");
    assert!(
        body.contains("Changed nothing") && body.contains("already answered"),
        "{body}"
    );
    let answered = &get(&address, "/api/v1/escalations?all=true")[0];
    assert_eq!(answered["resolution_note"], "fine", "{answered}");
    eventually(WAIT, "the run to complete", || {
        (get(&address, "/api/v1/tasks/T-1")["task"]["status"] == "done").then_some(())
    });
    // A go for a task that is done is stale too; without script the answer is a page.
    let (code, body) = form(
        &address,
        "/actions/tasks/T-1/go",
        &format!("csrf={token}"),
        &[],
    );
    assert_eq!(code, 409, "{body}");
    assert!(
        body.contains("Changed nothing") && body.contains("<html"),
        "{body}"
    );
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
struct Sse {
    id: Option<String>,
    event: String,
    data: Value,
}

/// Reads the feed at `path` (with `Last-Event-ID: resume` when given) until `done` holds
/// for an event; every event read, in order.
fn read_feed(
    address: &str,
    path: &str,
    resume: Option<&str>,
    done: impl Fn(&Sse) -> bool,
) -> Vec<Sse> {
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    // HTTP/1.0: the body is the rest of the connection, not chunked.
    let mut request = format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n");
    if let Some(id) = resume {
        request.push_str(&format!("Last-Event-ID: {id}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).expect("send");
    let mut lines = BufReader::new(stream).lines();
    let status = lines.next().expect("a status line").expect("read");
    assert!(status.contains(" 200 "), "{status}");
    for line in lines.by_ref() {
        if line.expect("read").is_empty() {
            break;
        }
    }
    let mut events = Vec::new();
    let (mut id, mut event, mut data) = (None, String::new(), String::new());
    for line in lines {
        let line = line.expect("the feed to go on");
        if line.is_empty() {
            if !event.is_empty() {
                let sse = Sse {
                    id: id.take(),
                    event: std::mem::take(&mut event),
                    data: serde_json::from_str(&data).unwrap_or(Value::Null),
                };
                let last = done(&sse);
                events.push(sse);
                if last {
                    return events;
                }
            }
            data.clear();
        } else if let Some(v) = line.strip_prefix("id: ") {
            id = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("event: ") {
            event = v.to_string();
        } else if let Some(v) = line.strip_prefix("data: ") {
            data.push_str(v);
        }
    }
    panic!("the feed ended before the awaited event: {events:?}");
}

fn task_done(e: &Sse) -> bool {
    e.event == "task" && e.data["to_status"] == "done"
}

#[test]
fn the_live_feed_sends_changes_in_order_and_resumes_from_the_last_event_id() {
    let ws = console_workspace(ASKING);
    let _daemon = Daemon::start(&ws);
    let address = console_address(&ws);
    let escalation = eventually(WAIT, "the worker's question", || {
        pending(&address).first().and_then(|e| e["id"].as_i64())
    });
    let (code, body) = post(
        &address,
        &format!("/api/v1/escalations/{escalation}/decide"),
        r#"{"answer":"approve"}"#,
    );
    assert_eq!(code, 200, "{body}");

    // Everything from the start, up to the task's completion.
    let all = read_feed(&address, "/api/v1/events?after=0.0.0", None, task_done);
    let kinds: Vec<&str> = all.iter().map(|e| e.event.as_str()).collect();
    for kind in ["task", "line", "decision"] {
        assert!(kinds.contains(&kind), "no {kind} event in {kinds:?}");
    }
    assert!(
        all.iter().any(|e| e.event == "line"
            && e.data["line"] == "[ESCALATE:needs_decision] may I change the schema?"),
        "{all:?}"
    );
    assert!(
        all.iter()
            .any(|e| e.event == "decision" && e.data["id"] == escalation),
        "{all:?}"
    );
    let ids: Vec<String> = all.iter().map(|e| e.id.clone().expect("an id")).collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique, ids, "every event has its own id");

    // A reconnect from the middle gets exactly the rest.
    let middle = all.len() / 2;
    let rest = read_feed(
        &address,
        "/api/v1/events",
        all[middle].id.as_deref(),
        task_done,
    );
    // (A decision is sent as it is when read: its answer may have come since.)
    let key = |e: &Sse| (e.id.clone(), e.event.clone(), e.data["id"].clone());
    assert_eq!(
        rest.iter().map(key).collect::<Vec<_>>(),
        all[middle + 1..].iter().map(key).collect::<Vec<_>>()
    );

    // A feed from a later point hears what happens next, and only that run's lines.
    let run_id = get(&address, "/api/v1/runs")[0]["id"]
        .as_i64()
        .expect("run");
    let since = all.last().and_then(|e| e.id.clone()).expect("an id");
    let address_now = address.clone();
    let listener = std::thread::spawn(move || {
        read_feed(
            &address_now,
            &format!("/api/v1/events?after={since}&run={}", run_id + 1),
            None,
            |e| e.event == "line",
        )
    });
    let (code, body) = post(&address, "/api/v1/tasks/T-1/retry", "{}");
    assert_eq!(code, 200, "{body}");
    let heard = listener.join().expect("the listener");
    assert!(
        heard
            .iter()
            .any(|e| e.event == "task" && e.data["kind"] == "retry"),
        "{heard:?}"
    );
    let line = heard.last().expect("a line");
    assert_eq!(line.data["run_id"], run_id + 1, "{line:?}");
    let (code, _) = call(&address, "GET", "/api/v1/events?after=nope", &[], "");
    assert_eq!(code, 400);
}

/// The feed's reads on one store: each table after its own id, a run's lines only when
/// asked, and a cursor past everything there is.
async fn the_change_feed_reads_each_table_after_its_cursor(store: &dyn executor::store::Store) {
    use executor::core::changes::Cursor;
    use executor::core::queue::QueueStatus;
    use executor::core::record::{NewDecision, NewMessage};
    use executor::core::task::NewTask;
    let at = chrono::Utc::now();
    let task = |gid: &str| NewTask {
        task_gid: gid.to_string(),
        source: "cli".to_string(),
        description: format!("Task {gid}"),
        notes: None,
        priority: None,
        initial_status: QueueStatus::Pending,
    };
    store
        .upsert_task(&task("T-1"), "cli", at)
        .await
        .expect("add");
    store
        .upsert_task(&task("T-2"), "cli", at)
        .await
        .expect("add");
    let one = store.create_run("T-1", at).await.expect("run").id;
    let two = store.create_run("T-2", at).await.expect("run").id;
    for (run_id, gid, n) in [(one, "T-1", 1), (two, "T-2", 2), (one, "T-1", 3)] {
        store
            .record_message(&NewMessage {
                run_id,
                task_gid: gid.into(),
                at,
                source: "worker".into(),
                tag: "STATUS".into(),
                kind: "step".into(),
                args: "{}".into(),
                text: format!("step {n}"),
                line: format!("[STATUS:step] step {n}"),
            })
            .await
            .expect("message");
    }
    let decision = store
        .record_decision(&NewDecision {
            task_gid: Some("T-1".into()),
            run_id: Some(one),
            at,
            role: "worker".into(),
            action: "needs_decision".into(),
            decision: "escalate".into(),
            rule_id: None,
            detail: Some("may I?".into()),
            tool_use_id: None,
            message_window: None,
            confined: None,
        })
        .await
        .expect("decision");

    let all = store
        .changes_after(&Cursor::default(), None, 100)
        .await
        .expect("read");
    assert_eq!(all.events.len(), 2, "{:?}", all.events);
    let texts: Vec<&str> = all.messages.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["step 1", "step 2", "step 3"]);
    assert_eq!(all.decisions.len(), 1);
    let now = store.change_cursor().await.expect("cursor");
    assert_eq!(
        now,
        Cursor {
            event: all.events[1].id,
            message: all.messages[2].id,
            decision: decision.id,
        }
    );
    let after_first = Cursor {
        event: all.events[0].id,
        message: all.messages[0].id,
        decision: decision.id,
    };
    let rest = store
        .changes_after(&after_first, Some(one), 100)
        .await
        .expect("read");
    assert_eq!(rest.events.len(), 1);
    let texts: Vec<&str> = rest.messages.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["step 3"], "only run {one}'s lines after the first");
    assert!(rest.decisions.is_empty());
    let limited = store
        .changes_after(&Cursor::default(), None, 1)
        .await
        .expect("read");
    assert_eq!(limited.messages.len(), 1);
    let past = store.changes_after(&now, None, 100).await.expect("read");
    assert!(past.events.is_empty() && past.messages.is_empty() && past.decisions.is_empty());
}

#[tokio::test]
async fn the_change_feed_reads_each_table_after_its_cursor_on_sqlite() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = executor::store::sqlite::SqliteStore::open(&dir.path().join("executor.db"))
        .await
        .expect("open SQLite");
    the_change_feed_reads_each_table_after_its_cursor(&store).await;
}

#[tokio::test]
async fn the_change_feed_reads_each_table_after_its_cursor_on_postgres() {
    let Some(schema) = crate::support::PgSchema::create("change_feed").await else {
        return;
    };
    let store = executor::store::postgres::PgStore::connect_with(schema.options())
        .await
        .expect("open Postgres");
    the_change_feed_reads_each_table_after_its_cursor(&store).await;
    store.pool().close().await;
    schema.drop().await;
}

fn task_of(gid: &str, title: &str) -> executor::core::task::NewTask {
    executor::core::task::NewTask {
        task_gid: gid.to_string(),
        source: "test".to_string(),
        description: executor::core::task::compose_description(title, "body"),
        notes: None,
        priority: None,
        initial_status: executor::core::queue::QueueStatus::Pending,
    }
}

/// Records a worker of `run_id` that ended at `at` having spent `cost` dollars.
async fn spent(
    store: &dyn executor::store::Store,
    run_id: i64,
    at: chrono::DateTime<chrono::Utc>,
    cost: Option<f64>,
) {
    let worker = executor::core::record::WorkerRecord {
        id: 0,
        run_id,
        phase: "work".to_string(),
        host: "elsewhere".to_string(),
        pid: 1,
        start_time: None,
        started_at: at - chrono::Duration::minutes(1),
        ended_at: None,
        outcome: None,
    };
    let id = store.record_worker(&worker).await.expect("record a worker");
    store.end_worker(id, at, "done").await.expect("end it");
    let spend = executor::core::spend::Spend {
        input_tokens: 100,
        output_tokens: 10,
        cached_tokens: 5,
        turns: 2,
        cost_usd: cost,
        priced: false,
    };
    store
        .record_spend(id, "claude", &spend)
        .await
        .expect("spend");
}

/// The console's bounded reads give what the whole tables hold, page by page.
async fn the_consoles_bounded_reads_agree_with_the_whole_tables(
    store: &dyn executor::store::Store,
) {
    use executor::core::queue::QueueStatus;
    use executor::core::run::RunState;
    let now = chrono::Utc::now();
    for n in 1..=7 {
        store
            .upsert_task(
                &task_of(&format!("B-{n}"), &format!("Task {n}")),
                "test",
                now,
            )
            .await
            .expect("add");
    }
    let mut ids = Vec::new();
    for n in 1..=5 {
        let mut run = store.create_run(&format!("B-{n}"), now).await.expect("run");
        if n <= 3 {
            run.state = RunState::Complete;
            store.save_run(&run).await.expect("save");
        }
        ids.push(run.id);
    }
    // Newest first, paged by `before`, filtered by state.
    let all = store.runs_page(&[], None, 100).await.expect("runs");
    let listed: Vec<i64> = all.iter().map(|r| r.id).collect();
    let mut newest_first = ids.clone();
    newest_first.reverse();
    assert_eq!(listed, newest_first);
    let first = store.runs_page(&[], None, 2).await.expect("page 1");
    let second = store
        .runs_page(&[], Some(first[1].id), 2)
        .await
        .expect("page 2");
    assert_eq!(
        first
            .iter()
            .chain(&second)
            .map(|r| r.id)
            .collect::<Vec<_>>(),
        newest_first[..4]
    );
    let complete = store
        .runs_page(&[executor::core::run::RunState::Complete], None, 100)
        .await
        .expect("complete");
    assert_eq!(complete.len(), 3);
    let live = store
        .runs_page(&executor::core::run::RunState::OPEN, None, 100)
        .await
        .expect("live");
    assert_eq!(
        live.iter().map(|r| r.id).collect::<Vec<_>>(),
        newest_first[..2]
    );
    let counts = store.run_counts().await.expect("counts");
    assert_eq!(
        counts,
        vec![("complete".to_string(), 3), ("queued".to_string(), 2)]
    );
    let one = store.run(ids[0]).await.expect("one run").expect("found");
    assert_eq!(one, store.runs(None).await.expect("runs")[0]);
    assert!(store.run(9_999).await.expect("no run").is_none());

    let newest = store.tasks_newest(None, None, 3).await.expect("tasks");
    let gids: Vec<&str> = newest.iter().map(|t| t.task_gid.as_str()).collect();
    assert_eq!(gids, ["B-7", "B-6", "B-5"]);
    let older = store
        .tasks_newest(Some(&QueueStatus::Pending), Some(newest[2].id), 10)
        .await
        .expect("older");
    assert_eq!(older.len(), 4);

    // Spend: today's from its start, of some runs, and all of it summed.
    spent(store, ids[0], now - chrono::Duration::days(2), Some(1.5)).await;
    spent(store, ids[1], now, Some(0.25)).await;
    spent(store, ids[1], now, None).await;
    let today = store
        .spend_since(now - chrono::Duration::hours(1))
        .await
        .expect("today");
    assert_eq!(today.len(), 2);
    assert!(today.iter().all(|r| r.run_id == ids[1]));
    let of_runs = store.spend_of_runs(&[ids[0]]).await.expect("of a run");
    assert_eq!(of_runs.len(), 1);
    assert!(store.spend_of_runs(&[]).await.expect("of none").is_empty());
    let total = store.spend_total().await.expect("total");
    let whole = executor::core::spend::SpendTotal::of(&store.spend(None).await.expect("all"));
    assert_eq!(total, whole);
    assert_eq!((total.workers, total.unpriced_workers), (3, 1));

    // Leases, the last look at a PR, goals.
    store
        .take_lease(
            ids[3],
            "host:1:1",
            now,
            now + chrono::Duration::hours(1),
            None,
        )
        .await
        .expect("lease");
    let leases = store.leases(10).await.expect("leases");
    assert_eq!(leases.len(), 1);
    assert_eq!(leases[0].holder, "host:1:1");
    assert!(store.pr_look(ids[3]).await.expect("no look").is_none());
    store
        .save_pr_look(ids[3], "{\"a\":1}", now)
        .await
        .expect("keep");
    store
        .save_pr_look(ids[3], "{\"a\":2}", now)
        .await
        .expect("replace");
    assert_eq!(
        store.pr_look(ids[3]).await.expect("look").as_deref(),
        Some("{\"a\":2}")
    );
    let link = |child: &str, key: &str| executor::core::tree::TaskLink {
        task_gid: child.to_string(),
        parent_gid: "B-7".to_string(),
        depth: 1,
        key: key.to_string(),
        position: 0,
        created_at: now,
    };
    store
        .link_children("B-7", &[link("B-6", "A"), link("B-5", "B")], &[])
        .await
        .expect("link");
    assert_eq!(
        store.goals(10).await.expect("goals"),
        vec![("B-7".to_string(), 2)]
    );
}

#[tokio::test]
async fn the_consoles_bounded_reads_agree_with_the_whole_tables_on_sqlite() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = executor::store::sqlite::SqliteStore::open(&dir.path().join("executor.db"))
        .await
        .expect("open SQLite");
    the_consoles_bounded_reads_agree_with_the_whole_tables(&store).await;
}

#[tokio::test]
async fn the_consoles_bounded_reads_agree_with_the_whole_tables_on_postgres() {
    let Some(schema) = crate::support::PgSchema::create("console_reads").await else {
        return;
    };
    let store = executor::store::postgres::PgStore::connect_with(schema.options())
        .await
        .expect("open Postgres");
    the_consoles_bounded_reads_agree_with_the_whole_tables(&store).await;
    store.pool().close().await;
    schema.drop().await;
}

/// One GET; the status code, the headers (lower-cased names) and the body.
fn get_with_headers(address: &str, path: &str) -> (u16, Vec<(String, String)>, String) {
    let mut stream = std::net::TcpStream::connect(address).expect("connect to the console");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut response = String::new();
    std::io::Read::read_to_string(&mut stream, &mut response).expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("a response");
    let mut lines = head.lines();
    let code = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
        .collect();
    (code, headers, body.to_string())
}

/// Follows an API list's `Link: <…>; rel="next"` pages from `first`; every row, in order.
fn every_page(address: &str, first: &str) -> (Vec<Value>, usize) {
    let (mut rows, mut pages, mut next) = (Vec::new(), 0, Some(first.to_string()));
    while let Some(path) = next.take() {
        let (code, headers, body) = get_with_headers(address, &path);
        assert_eq!(code, 200, "GET {path}: {body}");
        let page: Vec<Value> = serde_json::from_str(&body).expect("a JSON array");
        rows.extend(page);
        pages += 1;
        next = headers
            .iter()
            .find(|(k, _)| k == "link")
            .and_then(|(_, v)| v.strip_prefix('<'))
            .and_then(|v| v.split_once(">; rel=\"next\""))
            .map(|(path, _)| path.to_string());
        assert!(pages < 100, "the pages never end");
    }
    (rows, pages)
}

/// A workspace with 60 tasks and 55 finished runs (one with a spend), ready for a daemon.
fn big_workspace() -> (Workspace, Vec<i64>) {
    let ws = console_workspace("cat >/dev/null; echo x > X.md; echo '[DONE:implemented] done'");
    let (runtime, store) = ws.store();
    let ids = runtime.block_on(async {
        use executor::store::Store;
        let now = chrono::Utc::now();
        let mut ids = Vec::new();
        for n in 1..=60 {
            let gid = format!("P-{n}");
            // Done: nothing (the analyzer, a runner) changes them while they are read.
            let mut task = task_of(&gid, &format!("Paged task {n}"));
            task.initial_status = executor::core::queue::QueueStatus::Done;
            store.upsert_task(&task, "test", now).await.expect("add");
            if n <= 55 {
                let mut run = store.create_run(&gid, now).await.expect("run");
                run.state = executor::core::run::RunState::Abandoned;
                store.save_run(&run).await.expect("save");
                ids.push(run.id);
            }
        }
        spent(&store, ids[0], now, Some(0.125)).await;
        ids
    });
    (ws, ids)
}

#[test]
fn the_apis_lists_and_the_pages_come_in_bounded_pages_that_add_up_to_the_whole() {
    let (ws, ids) = big_workspace();
    let _daemon = Daemon::start(&ws);
    let address = console_address(&ws);
    eventually(WAIT, "T-1's run to complete", || {
        (get(&address, "/api/v1/tasks/T-1")["task"]["status"] == "done").then_some(())
    });

    // The API: pages of `limit` with a Link to the next; together, the CLI's document.
    let (tasks, pages) = every_page(&address, "/api/v1/tasks?limit=25");
    assert_eq!(pages, 3, "61 tasks in pages of 25");
    assert!(
        Value::Array(tasks) == ws.json(&["queue", "--json"]),
        "the pages add up to the queue"
    );
    let (runs, pages) = every_page(&address, "/api/v1/runs?limit=20");
    assert!(pages >= 3, "{pages} pages");
    assert!(
        Value::Array(runs.clone()) == ws.json(&["runs", "--json"]),
        "the pages add up to the runs"
    );
    let (done, _) = every_page(&address, "/api/v1/tasks?status=done&limit=7");
    assert_eq!(done.len(), 61);
    // Every run carries what it cost.
    let first = runs
        .iter()
        .find(|r| r["id"] == ids[0])
        .expect("the first run");
    assert_eq!(first["spend"]["cost_usd"], 0.125, "{first}");
    assert_eq!(first["spend"]["workers"], 1);
    let other = runs.iter().find(|r| r["id"] == ids[1]).expect("another");
    assert!(other["spend"].is_null(), "{other}");
    assert_eq!(
        get(&address, &format!("/api/v1/runs/{}", ids[0]))["spend"]["turns"],
        2
    );

    // The pages: the newest, a count, and a link to older ones.
    let queue = page(&address, "/queue");
    assert!(queue.contains("done (61)"), "{queue}");
    assert!(queue.contains("id=\"task-P-60\""), "the newest is shown");
    assert!(
        !queue.contains("id=\"task-P-1\""),
        "the oldest is on a later page"
    );
    let older = queue
        .split("status=done&amp;before=")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a link to older tasks");
    let older = page(&address, &format!("/queue?status=done&before={older}"));
    assert!(older.contains("id=\"task-P-1\""), "{older}");
    let runs_page = page(&address, "/runs");
    assert!(runs_page.contains(&format!("id=\"run-{}\"", ids[54])));
    assert!(!runs_page.contains(&format!("id=\"run-{}\"", ids[0])));
    assert!(
        runs_page.contains("abandoned</a> 55"),
        "the count: {runs_page}"
    );
    assert!(runs_page.contains("id=\"older-runs\""), "{runs_page}");
    let older = page(&address, &format!("/runs?before={}", ids[5]));
    assert!(older.contains(&format!("id=\"run-{}\"", ids[0])), "{older}");
    assert!(older.contains("$0.1250"), "its cost: {older}");
}

#[test]
fn the_run_goal_and_system_pages_show_the_pr_the_diff_the_tree_and_the_system_escaped() {
    let ws = console_workspace(
        "cat >/dev/null; printf 'fn main() {}\\n<script>x</script>\\n' > NEW.rs; echo '[DONE:implemented] done'",
    );
    ws.ok(&[
        "add",
        "--title",
        "<script>alert(1)</script>",
        "--gid",
        "T-2",
    ]);
    ws.ok(&["add", "--title", "Second part", "--gid", "T-3"]);
    let _daemon = Daemon::start(&ws);
    let address = console_address(&ws);
    eventually(WAIT, "the run to complete", || {
        (get(&address, "/api/v1/tasks/T-1")["task"]["status"] == "done").then_some(())
    });
    let run_id = get(&address, "/api/v1/runs")[0]["id"]
        .as_i64()
        .expect("a run");

    // What the runner would have kept: a PR, its last look, a lease, a message waiting.
    let (runtime, store) = ws.store();
    runtime.block_on(async {
        use executor::store::Store;
        let mut run = store.run(run_id).await.expect("read").expect("the run");
        run.pr_number = Some(7);
        run.pr_url = Some("https://github.com/o/r/pull/7".to_string());
        store.save_run(&run).await.expect("save the run");
        let look = serde_json::json!({
            "observed_at": "2026-03-01T09:30:00.000000Z",
            "state": "open", "draft": true, "mergeable": true,
            "head_sha": "9d41c2e0123456789abcdef", "ci_run_exists": true,
            "checks": [{"name": "unit tests", "status": "completed", "conclusion": "failure",
                "url": "javascript:alert(2)", "run_url": "https://github.com/o/r/actions/runs/1",
                "summary": "1 failed, 47 passed", "failing_step": "cargo test",
                "log_excerpt": "test tab_preview ... FAILED <img src=x onerror=alert(3)>"}],
            "labels": ["executor"],
            "threads": [{"id": "T1", "path": "src/lib.rs", "line": 3, "is_resolved": false,
                "is_outdated": false, "comments": [{"id": "C1", "author": "owner",
                "body": "why <b>this</b>?", "created_at": "2026-03-01T09:00:00.000000Z"}]}],
            "owner_comments": []
        });
        let now = chrono::Utc::now();
        store
            .save_pr_look(run_id, &look.to_string(), now)
            .await
            .expect("keep the look");
        let link = |child: &str, key: &str, position: u32| executor::core::tree::TaskLink {
            task_gid: child.to_string(),
            parent_gid: "T-1".to_string(),
            depth: 1,
            key: key.to_string(),
            position,
            created_at: now,
        };
        let waits = executor::core::tree::TaskDependency {
            task_gid: "T-3".to_string(),
            depends_on: "T-2".to_string(),
        };
        store
            .link_children("T-1", &[link("T-2", "A", 0), link("T-3", "B", 1)], &[waits])
            .await
            .expect("link the subtasks");
        store
            .take_lease(
                run_id,
                "far-host:42:7",
                now,
                now + chrono::Duration::hours(1),
                None,
            )
            .await
            .expect("a lease");
        store
            .enqueue_outgoing(&[executor::core::outbox::NewOutgoing {
                notifier: "webhook:ops".to_string(),
                persona: None,
                priority: executor::core::outbox::Priority::Action,
                task_gid: Some("T-1".to_string()),
                run_id: Some(run_id),
                body: "Run done <i>now</i>".to_string(),
                created_at: now,
            }])
            .await
            .expect("a message");
        // What the wall's proxy refused the run's worker.
        store
            .record_net_refusals(
                &[executor::core::net_refusals::NetRefusal {
                    run_id,
                    task_gid: "T-1".to_string(),
                    host: "example.org".to_string(),
                    port: 443,
                    kind: executor::core::net_refusals::Refused::NotAllowed,
                    count: 12,
                    first_at: now,
                    last_at: now,
                }],
                None,
            )
            .await
            .expect("a refusal");
    });
    // Done with the test's own connection.
    drop(store);

    let run = page(&address, &format!("/runs/{run_id}"));
    for shown in [
        "id=\"refused\"",
        "<td>example.org:443</td><td>not allowed</td><td>12</td>",
        "id=\"allow-line\">allow = [&quot;example.org:443&quot;]</code>",
        "id=\"pr\"",
        "id=\"pr-ci\" class=\"ci-failing\">failing",
        "unit tests",
        "failing step: <b>cargo test</b>",
        "FAILED &lt;img src=x onerror=alert(3)&gt;",
        "github.com&#x2f;o&#x2f;r&#x2f;actions&#x2f;runs&#x2f;1\">CI run",
        "1 open, 0 resolved",
        "why &lt;b&gt;this&lt;&#x2f;b&gt;?",
        "id=\"diff-files\"",
        "NEW.rs",
        "&lt;script&gt;x&lt;&#x2f;script&gt;",
        "href=\"/goals/T-1\"",
    ] {
        assert!(
            run.contains(shown),
            "{shown} missing from the Run page:\n{run}"
        );
    }
    assert!(!run.contains("javascript:"), "a javascript: link: {run}");
    assert!(!run.contains("<script>x"), "unescaped: {run}");

    let goal = page(&address, "/goals/T-3");
    for shown in [
        "Goal T-1",
        "id=\"node-T-2\"",
        "id=\"node-T-3\"",
        "waits for T-2",
        "&lt;script&gt;alert(1)&lt;&#x2f;script&gt;",
        &format!("href=\"/runs/{run_id}\""),
    ] {
        assert!(
            goal.contains(shown),
            "{shown} missing from the Goal page:\n{goal}"
        );
    }
    assert!(!goal.contains("<script>alert"), "{goal}");
    let goals = page(&address, "/goals");
    assert!(goals.contains("id=\"goal-T-1\""), "{goals}");
    let (code, _) = call(&address, "GET", "/goals/NOPE", &[], "");
    assert_eq!(code, 404);

    let system = page(&address, "/system");
    for shown in [
        "id=\"hosts\"",
        ">daemon<",
        "far-host:42:7",
        "webhook:ops",
        "Run done &lt;i&gt;now&lt;&#x2f;i&gt;",
        "id=\"confinement\"",
        "Forge: local",
    ] {
        assert!(
            system.contains(shown),
            "{shown} missing from the System page:\n{system}"
        );
    }
    for page_path in ["/", "/runs", "/queue", "/goals", "/system"] {
        let html = page(&address, page_path);
        assert!(html.contains("href=\"/system\""), "the nav on {page_path}");
    }
}

#[test]
fn the_run_page_shows_ci_as_the_last_pr_tick_saw_it_and_the_system_page_githubs_quota() {
    use crate::fake_github::{FakeGithub, TOKEN};
    let github = FakeGithub::start_empty();
    let ws = crate::github_runs::github_workspace(&github, "");
    ws.ok(&["add", "--title", "Fix tab preview", "--gid", "G-2"]);
    ws.ok(&["go", "G-2"]);
    // One pass opens the draft PR on a head whose CI failed, and looks at it.
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run_id = ws.json(&["show", "G-2", "--json"])["runs"][0]["id"]
        .as_i64()
        .expect("a run");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!(
        "{}\n[web]\nlisten = \"127.0.0.1:0\"\n",
        // A pass soon after the start, so the daemon's own client hears from GitHub.
        config.replacen("[runner]\n", "[runner]\nloop_sleep = \"300ms\"\n", 1)
    ));
    let _daemon = Daemon::start(&ws);
    let address = console_address(&ws);

    // What the pass saw, from the store: the failing check, its step and its log's end.
    let run = page(&address, &format!("/runs/{run_id}"));
    for shown in [
        "id=\"pr\"",
        "class=\"ci-failing\"",
        "ui-tests",
        "failing step: <b>Run macOS UI Tests CI</b>",
        "** TEST FAILED **",
        "1 fix_ci worker(s)",
    ] {
        assert!(
            run.contains(shown),
            "{shown} missing from the Run page:\n{run}"
        );
    }
    // The daemon's own forge client tells what GitHub said of its budget.
    let started = std::time::Instant::now();
    let system = loop {
        let system = page(&address, "/system");
        if system.contains("id=\"quota\"") {
            break system;
        }
        assert!(
            started.elapsed() < WAIT,
            "no quota on the System page; the daemon's log:\n{}",
            std::fs::read_to_string(ws.path().join("daemon.log")).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(system.contains("Forge: github"), "{system}");
    assert!(
        system.contains("<td>graphql</td>") || system.contains("<td>rest</td>"),
        "{system}"
    );
    assert!(
        !system.contains(TOKEN) && !run.contains(TOKEN),
        "no token on a page"
    );
}

#[test]
fn the_needs_you_heading_counts_every_waiting_task_when_the_list_is_cut() {
    let ws = console_workspace("cat >/dev/null; echo '[DONE:implemented] done'");
    let (runtime, store) = ws.store();
    runtime.block_on(async {
        use executor::store::Store;
        let now = chrono::Utc::now();
        for n in 1..=105 {
            let mut task = task_of(&format!("W-{n}"), &format!("Waiting task {n}"));
            task.initial_status = executor::core::queue::QueueStatus::ForReview;
            store.upsert_task(&task, "test", now).await.expect("add");
        }
    });
    // Done with the test's own connection.
    drop(store);
    let _daemon = Daemon::start(&ws);
    let address = console_address(&ws);
    let needs = page(&address, "/");
    assert!(
        needs.contains("Tasks waiting for your go (105)"),
        "every waiting task is counted: {needs}"
    );
    assert!(needs.contains("The newest 100 of each status are shown"));
    assert!(needs.contains("id=\"task-W-105\""), "the newest is shown");
    assert!(!needs.contains("id=\"task-W-1\""), "the oldest is not");

    // Fewer than the page shows: the count is the list's, with no note.
    for n in 1..=100 {
        ws.ok(&["skip", &format!("W-{n}")]);
    }
    let needs = page(&address, "/");
    assert!(needs.contains("Tasks waiting for your go (5)"), "{needs}");
    assert!(!needs.contains("The newest 100"));
}

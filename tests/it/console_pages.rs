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

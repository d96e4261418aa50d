//! The console's JSON API in a running daemon: the same documents as `--json`, the owner's
//! actions through the same paths as the CLI (each answer taken once), and requests from
//! another site or for another host refused.

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::Value;

use crate::daemon::Daemon;
use crate::runner::workspace;
use crate::support::{eventually, Workspace};

pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// Asks the owner first; finishes once the owner's answer is in its prompt.
pub(crate) const ASKING_WORKER: &str = "prompt=$(cat); \
    if printf '%s' \"$prompt\" | grep -q 'The owner answered your escalation'; then \
      echo schema > CHANGED.md; echo '[DONE:implemented] done as the owner allowed'; \
    else echo '[ESCALATE:needs_decision] may I change the schema?'; fi";

/// One HTTP/1.1 exchange: the status, the head and the body. A live feed's body is not
/// read (it never ends).
pub(crate) fn exchange(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let mut stream = std::net::TcpStream::connect(address).expect("connect to the console");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {address}\r\n"));
    }
    for (key, value) in headers {
        request.push_str(&format!("{key}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("send");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut buf).expect("read");
        if n == 0 {
            break None;
        }
        got.extend_from_slice(&buf[..n]);
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break Some(at);
        }
    };
    let head_end = head_end.unwrap_or_else(|| panic!("no head: {}", String::from_utf8_lossy(&got)));
    let head = String::from_utf8_lossy(&got[..head_end]).into_owned();
    if !head.to_ascii_lowercase().contains("text/event-stream") {
        stream.read_to_end(&mut got).expect("read the body");
    }
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head}"));
    let body = String::from_utf8_lossy(&got[head_end + 4..]).into_owned();
    (code, head, body)
}

/// One HTTP/1.1 request; the status code and the body (parsed when it is JSON).
pub(crate) fn call(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let (code, _, text) = exchange(address, method, path, headers, body);
    let parsed = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (code, parsed)
}

pub(crate) fn get(address: &str, path: &str) -> Value {
    let (code, body) = call(address, "GET", path, &[], "");
    assert_eq!(code, 200, "GET {path}: {body}");
    body
}

pub(crate) fn post(address: &str, path: &str, body: &str) -> (u16, Value) {
    call(
        address,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        body,
    )
}

pub(crate) fn console_address(ws: &Workspace) -> String {
    crate::daemon::logged_address(ws, "serving the console's JSON API")
}

pub(crate) fn pending(address: &str) -> Vec<Value> {
    get(address, "/api/v1/escalations")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn the_api_serves_the_cli_documents_and_takes_the_owners_actions_once() {
    let ws = workspace(
        &["/bin/sh", "-c", ASKING_WORKER],
        &[],
        "loop_sleep = \"600s\"\n",
    );
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!(
        "{config}\n[web]\nenabled = true\nlisten = \"127.0.0.1:0\"\n"
    ));
    ws.ok(&["add", "--title", "Change the schema", "--gid", "T-1"]);
    ws.ok(&["go", "T-1"]);
    let _daemon = Daemon::start(&ws);
    let address = console_address(&ws);

    let escalation = eventually(WAIT, "the worker's question", || {
        pending(&address).first().and_then(|e| e["id"].as_i64())
    });
    // The same documents as the CLI's --json.
    assert_eq!(
        get(&address, "/api/v1/tasks/T-1"),
        ws.json(&["show", "T-1", "--json"])
    );
    assert_eq!(
        get(&address, "/api/v1/tasks"),
        ws.json(&["queue", "--json"])
    );
    assert_eq!(get(&address, "/api/v1/runs"), ws.json(&["runs", "--json"]));
    assert_eq!(
        get(&address, "/api/v1/escalations"),
        ws.json(&["escalations", "--json"])
    );
    let run_id = get(&address, "/api/v1/runs")[0]["id"]
        .as_i64()
        .expect("a run");
    assert_eq!(
        get(&address, &format!("/api/v1/runs/{run_id}"))["task_gid"],
        "T-1"
    );
    assert!(get(&address, "/api/v1/status")["storage"].is_string());
    let (code, _) = call(&address, "GET", "/api/v1/runs/999", &[], "");
    assert_eq!(code, 404);

    // Refused: another host (a rebinding page), not JSON, another site.
    let decide = format!("/api/v1/escalations/{escalation}/decide");
    let approve = r#"{"answer":"approve","note":"fine"}"#;
    let (code, _) = call(
        &address,
        "POST",
        &decide,
        &[
            ("Host", "evil.example:8450"),
            ("Content-Type", "application/json"),
        ],
        approve,
    );
    assert_eq!(code, 403);
    let (code, _) = call(
        &address,
        "POST",
        &decide,
        &[("Content-Type", "text/plain")],
        approve,
    );
    assert_eq!(code, 415);
    let (code, _) = call(
        &address,
        "POST",
        &decide,
        &[
            ("Content-Type", "application/json"),
            ("Origin", "https://evil.example"),
        ],
        approve,
    );
    assert_eq!(code, 403);
    assert_eq!(
        pending(&address).len(),
        1,
        "nothing refused changed anything"
    );

    // The owner's answer, once; the run resumes and completes.
    let (code, body) = post(&address, &decide, approve);
    assert_eq!(code, 200, "{body}");
    let (code, body) = post(&address, &decide, approve);
    assert_eq!(code, 409, "a repeated click changes nothing: {body}");
    eventually(WAIT, "the run to complete", || {
        (get(&address, "/api/v1/tasks/T-1")["task"]["status"] == "done").then_some(())
    });

    // The counts, in Prometheus's text format.
    let (code, metrics) = call(&address, "GET", "/metrics", &[], "");
    assert_eq!(code, 200);
    let metrics = metrics.as_str().expect("text").to_string();
    for line in [
        "executor_tasks{status=\"done\"} 1",
        "executor_runs{state=\"complete\"} 1",
        "executor_pending_escalations 0",
        "executor_store_up 1",
        "executor_store_down_seconds 0",
        "executor_store_waiting_writes 0",
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }

    // Retry, then cancel the fresh run while it waits on the owner.
    let (code, body) = post(&address, "/api/v1/tasks/T-1/retry", "{}");
    assert_eq!(
        (code, body["to"].as_str()),
        (200, Some("approved")),
        "{body}"
    );
    eventually(WAIT, "the fresh run's question", || {
        (!pending(&address).is_empty()).then_some(())
    });
    let (code, body) = post(
        &address,
        "/api/v1/runs/T-1/cancel",
        r#"{"reason":"enough for today"}"#,
    );
    assert_eq!(code, 200, "{body}");
    let shown = get(&address, "/api/v1/tasks/T-1");
    assert_eq!(shown["task"]["status"], "for_review", "{shown}");
    assert_eq!(shown["runs"][1]["state"], "abandoned", "{shown}");
    let (code, _) = post(&address, "/api/v1/tasks/NOPE/skip", "{}");
    assert_eq!(code, 404);
    let (code, _) = post(&address, "/api/v1/runs/NOPE/cancel", "{}");
    assert_eq!(code, 404);
    let (code, body) = post(&address, "/api/v1/runs/T-1/cancel", "{}");
    assert_eq!(code, 409, "the run ended already: {body}");
}

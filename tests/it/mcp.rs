//! `executor mcp` driven as an MCP client drives it: a real `executor mcp` process over
//! stdio, one JSON-RPC message per line. A task added and approved through its tools is
//! worked by `run --once`, its escalation listed and answered through the tools (once),
//! its log and diff read as resources; a read-only server offers and runs no write tool.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use serde_json::{json, Value};

use crate::runner::workspace;
use crate::support::Workspace;

/// A worker that asks the owner first, and finishes once the answer comes.
const ASKING_WORKER: &str = "prompt=$(cat); \
    if printf '%s' \"$prompt\" | grep -q 'The owner answered your escalation'; then \
      echo changed > CHANGED.md; echo '[DONE:implemented] merged as the owner allowed'; \
    else echo '[STATUS:investigation] ready to merge'; \
      echo '[ESCALATE:needs_decision] may I merge PR 12?'; fi";

/// An MCP client of one `executor mcp` process.
struct Client {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next_id: i64,
}

impl Client {
    fn start(ws: &Workspace, args: &[&str]) -> Self {
        let mut command = ws.command(&[&["mcp"], args].concat());
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start executor mcp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Client {
            child,
            stdin,
            lines,
            next_id: 1,
        }
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").expect("write to the server");
        self.stdin.flush().expect("flush");
    }

    /// The next line of the server's, as JSON (every line must be one).
    fn next(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the server answers within a minute");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"))
    }

    /// Sends a request and gives its answer (its `result`, or its `error`).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = self.next();
        assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
        assert_eq!(answer["id"], id, "an answer to another request: {answer}");
        answer
    }

    /// A tool's result (`isError` false asserted unless `may_fail`).
    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        let result = answer["result"].clone();
        assert_eq!(result["isError"], false, "{tool}: {answer}");
        assert_eq!(result["content"][0]["type"], "text", "{answer}");
        result["structuredContent"].clone()
    }

    fn initialize(&mut self) -> Value {
        let answer = self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "the suite", "version": "1"},
            }),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        answer["result"].clone()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool_names(listed: &Value) -> Vec<String> {
    listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn an_mcp_client_adds_approves_and_answers_and_the_run_completes() {
    let ws = workspace(&["/bin/sh", "-c", ASKING_WORKER], &[], "");
    let mut mcp = Client::start(&ws, &[]);

    // Before `initialize`, only ping is served.
    let early = mcp.request("tools/list", json!({}));
    assert_eq!(early["error"]["code"], -32002, "{early}");
    let init = mcp.initialize();
    assert_eq!(init["protocolVersion"], "2025-06-18");
    assert_eq!(init["serverInfo"]["name"], "executor");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    let names = tool_names(&mcp.request("tools/list", json!({})));
    for tool in [
        "status",
        "add_task",
        "go",
        "list_escalations",
        "answer_escalation",
        "run_log",
    ] {
        assert!(names.iter().any(|n| n == tool), "{tool} missing: {names:?}");
    }

    let added = mcp.call(
        "add_task",
        json!({"title": "Merge when allowed", "gid": "M-1"}),
    );
    assert_eq!(added["task_gid"], "M-1", "{added}");
    let moved = mcp.call("go", json!({"gid": "M-1"}));
    assert_eq!(moved["to"], "approved", "{moved}");
    let shown = mcp.call("show_task", json!({"gid": "M-1"}));
    let actors: Vec<&str> = shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["actor"].as_str())
        .collect();
    assert_eq!(actors, ["mcp", "mcp"], "added and approved by mcp: {shown}");

    // The runner works it until the worker asks.
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let waiting = mcp.call("list_escalations", json!({}));
    let escalations = waiting["escalations"].as_array().expect("escalations");
    assert_eq!(escalations.len(), 1, "{waiting}");
    let id = escalations[0]["id"].as_i64().expect("an id");
    let answered = mcp.call(
        "answer_escalation",
        json!({"id": id, "answer": "approve", "note": "squash it"}),
    );
    assert_eq!(answered["resolved_by"], "mcp", "{answered}");
    // Answered once: a second answer is refused, and says why.
    let again = mcp.request(
        "tools/call",
        json!({"name": "answer_escalation", "arguments": {"id": id, "answer": "deny"}}),
    );
    assert_eq!(again["result"]["isError"], true, "{again}");
    assert!(
        again["result"]["structuredContent"]["error"]
            .as_str()
            .unwrap_or("")
            .contains("already answered"),
        "{again}"
    );

    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = mcp.call("status", json!({}));
    assert_eq!(status["pending_escalations"], 0, "{status}");
    let shown = mcp.call("show_task", json!({"gid": "M-1"}));
    assert_eq!(shown["task"]["status"], "done", "{shown}");
    let run_id = shown["runs"][0]["id"].as_i64().expect("a run");

    let log = mcp.call("run_log", json!({"run": "M-1", "lines": 500}));
    assert!(
        log["log"]
            .as_str()
            .unwrap_or("")
            .contains("may I merge PR 12?"),
        "{log}"
    );
    let listed = mcp.request("resources/list", json!({}));
    let uri = format!("executor://runs/{run_id}/diff");
    assert!(
        listed["result"]["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .any(|r| r["uri"] == uri.as_str()),
        "{listed}"
    );
    let diff = mcp.request("resources/read", json!({"uri": uri}));
    let text = diff["result"]["contents"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("CHANGED.md"), "{diff}");
    let missing = mcp.request("resources/read", json!({"uri": "executor://runs/999/log"}));
    assert!(missing["error"].is_object(), "{missing}");

    // Garbage gets a JSON-RPC error, a notification no answer, and the server goes on.
    mcp.send(&json!("not a message"));
    assert_eq!(mcp.next()["error"]["code"], -32600);
    writeln!(mcp.stdin, "{{broken").expect("write");
    assert_eq!(mcp.next()["error"]["code"], -32700);
    assert_eq!(mcp.request("ping", json!({}))["result"], json!({}));
}

#[test]
fn a_read_only_mcp_server_offers_and_runs_no_write_tool() {
    let ws = workspace(&["/bin/sh", "-c", ASKING_WORKER], &[], "");
    ws.ok(&["add", "--title", "Merge when allowed", "--gid", "R-1"]);
    let mut mcp = Client::start(&ws, &["--read-only"]);
    mcp.initialize();
    let names = tool_names(&mcp.request("tools/list", json!({})));
    assert!(names.iter().any(|n| n == "list_tasks"), "{names:?}");
    for write in [
        "add_task",
        "go",
        "skip",
        "retry",
        "cancel",
        "answer_escalation",
    ] {
        assert!(
            !names.iter().any(|n| n == write),
            "{write} offered: {names:?}"
        );
    }
    let refused = mcp.request(
        "tools/call",
        json!({"name": "go", "arguments": {"gid": "R-1"}}),
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("read-only"),
        "{refused}"
    );
    let tasks = mcp.call("list_tasks", json!({}));
    assert_eq!(tasks["tasks"][0]["task_gid"], "R-1", "{tasks}");
    assert_eq!(
        tasks["tasks"][0]["status"], "pending",
        "not approved: {tasks}"
    );
}

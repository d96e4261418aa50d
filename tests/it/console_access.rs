//! Who may use the console, in a running daemon listening on every address: from loopback
//! no login; from this machine's other address every route needs the token (a page sends
//! the browser to `/login`, the API and the metrics answer 401), the read-only token reads
//! and is refused every POST, a browser logs in once and keeps a cookie that is not the
//! token, and no token is shown anywhere. A console on another address without a token
//! does not start; a port in use is logged and the daemon goes on.

use std::net::IpAddr;

use crate::console::{console_address, exchange};
use crate::console_pages::csrf_of;
use crate::daemon::Daemon;
use crate::runner::workspace;
use crate::support::Workspace;

const FULL: &str = "full-6b1f0c2a9d";
const READ: &str = "read-3e7d91a04c";

/// This machine's address other than loopback (the one its default route leaves by), or
/// `None` after saying why the test cannot run here.
fn other_address() -> Option<IpAddr> {
    let found = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|socket| {
            // A UDP connect sends nothing: it only picks the route and its source address.
            socket.connect("192.0.2.1:9")?;
            socket.local_addr()
        })
        .map(|addr| addr.ip());
    match found {
        Ok(ip) if !ip.is_loopback() && !ip.is_unspecified() => Some(ip),
        other => {
            eprintln!("skipped: this machine has no address but loopback ({other:?})");
            None
        }
    }
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// A daemon serving the console on every address with both tokens, and task T-1 pending.
fn console_on_every_address() -> (Workspace, Daemon, u16) {
    let ws = workspace(&["/bin/true"], &[], "loop_sleep = \"600s\"\n");
    std::fs::write(ws.path().join("console-token"), format!("{FULL}\n")).expect("token");
    std::fs::write(ws.path().join("console-read-token"), READ).expect("token");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!(
        "{config}\n[web]\nlisten = \"0.0.0.0:0\"\ntoken_file = \"console-token\"\nread_only_token_file = \"console-read-token\"\n"
    ));
    ws.ok(&["add", "--title", "Change the schema", "--gid", "T-1"]);
    let daemon = Daemon::start(&ws);
    let bound = console_address(&ws);
    let port = bound
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .expect("a port");
    (ws, daemon, port)
}

const READS: &[&str] = &[
    "/api/v1/status",
    "/api/v1/tasks",
    "/api/v1/tasks/T-1",
    "/api/v1/runs",
    "/api/v1/runs/999",
    "/api/v1/escalations",
    "/api/v1/events",
    "/metrics",
    "/",
    "/runs",
    "/runs/999",
    "/queue",
];

/// Every action, on targets that do not exist: past the door each answers 404 (or 409 for
/// a retry of a task that has no run).
const API_ACTIONS: &[&str] = &[
    "/api/v1/tasks/NOPE/go",
    "/api/v1/tasks/NOPE/skip",
    "/api/v1/tasks/NOPE/retry",
    "/api/v1/runs/NOPE/cancel",
    "/api/v1/escalations/999/decide",
];
const FORM_ACTIONS: &[&str] = &[
    "/actions/tasks/NOPE/skip",
    "/actions/runs/NOPE/cancel",
    "/actions/escalations/999/decide",
];

fn is_page(path: &str) -> bool {
    !path.starts_with("/api/") && path != "/metrics"
}

#[test]
fn every_route_from_another_address_needs_the_token_and_the_read_only_one_cannot_post() {
    let Some(ip) = other_address() else { return };
    let (ws, _daemon, port) = console_on_every_address();
    let remote = format!("{ip}:{port}");
    let bearer = |token: &str| format!("Bearer {token}");
    let (full, read) = (bearer(FULL), bearer(READ));

    for path in READS {
        for auth in [None, Some("Bearer wrong-token")] {
            let headers: Vec<(&str, &str)> =
                auth.map(|a| ("Authorization", a)).into_iter().collect();
            let (code, head, _) = exchange(&remote, "GET", path, &headers, "");
            if is_page(path) {
                assert_eq!(code, 303, "GET {path} without the token: {head}");
                assert_eq!(header(&head, "location"), Some("/login"), "{head}");
            } else {
                assert_eq!(code, 401, "GET {path} without the token: {head}");
                assert!(header(&head, "www-authenticate").is_some_and(|v| v.starts_with("Bearer")));
            }
        }
        for token in [&full, &read] {
            let (code, head, _) = exchange(&remote, "GET", path, &[("Authorization", token)], "");
            let expected = if path.ends_with("/999") { 404 } else { 200 };
            assert_eq!(code, expected, "GET {path} with a token: {head}");
        }
    }

    let csrf = {
        let (code, _, html) = exchange(&remote, "GET", "/queue", &[("Authorization", &full)], "");
        assert_eq!(code, 200);
        csrf_of(&html)
    };
    let form_body = format!("csrf={csrf}&answer=approve");
    let posts = API_ACTIONS
        .iter()
        .map(|p| {
            (
                *p,
                "application/json",
                r#"{"answer":"approve"}"#.to_string(),
            )
        })
        .chain(
            FORM_ACTIONS
                .iter()
                .map(|p| (*p, "application/x-www-form-urlencoded", form_body.clone())),
        );
    for (path, kind, body) in posts {
        let typed = ("Content-Type", kind);
        let (code, head, _) = exchange(&remote, "POST", path, &[typed], &body);
        assert_eq!(code, 401, "POST {path} without the token: {head}");
        let (code, head, _) = exchange(
            &remote,
            "POST",
            path,
            &[typed, ("Authorization", "Bearer wrong-token")],
            &body,
        );
        assert_eq!(code, 401, "POST {path} with a wrong token: {head}");
        let (code, _, answer) = exchange(
            &remote,
            "POST",
            path,
            &[typed, ("Authorization", &read)],
            &body,
        );
        assert_eq!(code, 403, "POST {path} with the read-only token: {answer}");
        assert!(answer.contains("read-only"), "{answer}");
        let (code, _, answer) = exchange(
            &remote,
            "POST",
            path,
            &[typed, ("Authorization", &full)],
            &body,
        );
        assert!(
            matches!(code, 404 | 409),
            "POST {path} with the token reaches the action: {code} {answer}"
        );
    }
    // With the token an action is taken; with the read-only one it was not.
    let json = ("Content-Type", "application/json");
    let before = ws.json(&["show", "T-1", "--json"])["task"]["status"].clone();
    let (code, _, _) = exchange(
        &remote,
        "POST",
        "/api/v1/tasks/T-1/skip",
        &[json, ("Authorization", &read)],
        "{}",
    );
    assert_eq!(code, 403);
    assert_eq!(
        ws.json(&["show", "T-1", "--json"])["task"]["status"],
        before
    );
    let (code, _, answer) = exchange(
        &remote,
        "POST",
        "/api/v1/tasks/T-1/skip",
        &[json, ("Authorization", &full)],
        "{}",
    );
    assert_eq!(code, 200, "{answer}");
    assert_eq!(
        ws.json(&["show", "T-1", "--json"])["task"]["status"],
        "skip"
    );

    // From loopback no login, unless a proxy says it passes on a request from elsewhere.
    let local = format!("127.0.0.1:{port}");
    let (code, _, _) = exchange(&local, "GET", "/api/v1/status", &[], "");
    assert_eq!(code, 200);
    let (code, _, _) = exchange(
        &local,
        "GET",
        "/api/v1/status",
        &[("X-Forwarded-For", "203.0.113.9")],
        "",
    );
    assert_eq!(code, 401);
    let (code, _, _) = exchange(
        &local,
        "GET",
        "/api/v1/status",
        &[("Host", "console.example")],
        "",
    );
    assert_eq!(code, 401, "a name other than loopback's is not loopback");

    // No token is shown by any document, page, metric or log line.
    for path in READS.iter().filter(|p| !p.ends_with("/events")) {
        let (_, head, body) = exchange(&remote, "GET", path, &[("Authorization", &full)], "");
        assert!(
            !body.contains(FULL) && !body.contains(READ),
            "{path} shows a token"
        );
        assert!(
            !head.contains(FULL) && !head.contains(READ),
            "{path} shows a token"
        );
    }
    let log = std::fs::read_to_string(ws.path().join("daemon.log")).expect("log");
    assert!(!log.contains(FULL) && !log.contains(READ), "{log}");
}

#[test]
fn a_browser_from_another_address_logs_in_once_and_keeps_a_cookie_that_is_not_the_token() {
    let Some(ip) = other_address() else { return };
    let (ws, _daemon, port) = console_on_every_address();
    let remote = format!("{ip}:{port}");
    let form = ("Content-Type", "application/x-www-form-urlencoded");

    let (code, _, html) = exchange(&remote, "GET", "/login", &[], "");
    assert_eq!(code, 200);
    assert!(html.contains("type=\"password\" name=\"token\""), "{html}");
    let (code, head, html) = exchange(&remote, "POST", "/login", &[form], "token=guess");
    assert_eq!(code, 401);
    assert!(header(&head, "set-cookie").is_none(), "{head}");
    assert!(html.contains("not one of this console's tokens"), "{html}");
    // A login from another site is refused.
    let (code, _, _) = exchange(
        &remote,
        "POST",
        "/login",
        &[form, ("Origin", "https://evil.example")],
        &format!("token={FULL}"),
    );
    assert_eq!(code, 403);

    let login = |token: &str| {
        let (code, head, _) = exchange(
            &remote,
            "POST",
            "/login",
            &[form],
            &format!("token={token}"),
        );
        assert_eq!(code, 303, "{head}");
        assert_eq!(header(&head, "location"), Some("/"));
        let set = header(&head, "set-cookie").expect("a cookie").to_string();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
        assert!(!set.contains(token), "the cookie is not the token: {set}");
        set.split(';').next().expect("name=value").to_string()
    };
    let cookie = login(FULL);
    let (code, _, html) = exchange(&remote, "GET", "/queue", &[("Cookie", &cookie)], "");
    assert_eq!(code, 200);
    let csrf = csrf_of(&html);
    // The cookie opens the forms, which still need the page's CSRF token.
    let (code, _, _) = exchange(
        &remote,
        "POST",
        "/actions/tasks/T-1/skip",
        &[form, ("Cookie", &cookie)],
        "csrf=",
    );
    assert_eq!(code, 403);
    let read_cookie = login(READ);
    let (code, _, _) = exchange(&remote, "GET", "/", &[("Cookie", &read_cookie)], "");
    assert_eq!(code, 200);
    let body = format!("csrf={csrf}");
    let (code, _, _) = exchange(
        &remote,
        "POST",
        "/actions/tasks/T-1/skip",
        &[form, ("Cookie", &read_cookie)],
        &body,
    );
    assert_eq!(code, 403);
    // The daemon's triage may move the task meanwhile (pending → for_review); the refused
    // post must not have skipped it.
    assert_ne!(
        ws.json(&["show", "T-1", "--json"])["task"]["status"],
        "skip",
        "the read-only cookie skipped the task"
    );
    let (code, _, answer) = exchange(
        &remote,
        "POST",
        "/actions/tasks/T-1/skip",
        &[form, ("Cookie", &cookie)],
        &body,
    );
    assert_eq!(code, 200, "{answer}");
    assert_eq!(
        ws.json(&["show", "T-1", "--json"])["task"]["status"],
        "skip"
    );
    // The token itself is no cookie; logging out forgets the cookie.
    let (code, _, _) = exchange(
        &remote,
        "GET",
        "/",
        &[("Cookie", &format!("executor_console={FULL}"))],
        "",
    );
    assert_eq!(code, 303);
    let (code, head, _) = exchange(&remote, "POST", "/logout", &[form, ("Cookie", &cookie)], "");
    assert_eq!(code, 303);
    assert!(
        header(&head, "set-cookie").is_some_and(|c| c.contains("Max-Age=0")),
        "{head}"
    );
}

#[test]
fn a_console_on_another_address_without_a_token_does_not_start() {
    let ws = workspace(&["/bin/true"], &[], "");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!("{config}\n[web]\nlisten = \"0.0.0.0:0\"\n"));
    let err = ws.fails_with(2, &["daemon"]);
    assert!(err.contains("not a loopback address"), "{err}");
    assert!(err.contains("[web] token_file"), "{err}");
    // A token file that cannot be read is named, and the daemon does not start either.
    ws.write_config(&format!(
        "{config}\n[web]\nlisten = \"0.0.0.0:0\"\ntoken_file = \"missing-token\"\n"
    ));
    let err = ws.fails_with(2, &["daemon"]);
    assert!(
        err.contains("[web] token_file") && err.contains("missing-token"),
        "{err}"
    );
}

#[test]
fn a_port_in_use_is_logged_and_the_daemon_goes_on_without_its_console() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = taken.local_addr().expect("address").port();
    let ws = workspace(&["/bin/true"], &[], "loop_sleep = \"600s\"\n");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!("{config}\n[web]\nlisten = \"127.0.0.1:{port}\"\n"));
    let _daemon = Daemon::start(&ws);
    let log = crate::support::eventually(crate::console::WAIT, "the error in the log", || {
        let log = std::fs::read_to_string(ws.path().join("daemon.log")).ok()?;
        log.contains("cannot listen on").then_some(log)
    });
    assert!(
        log.contains(&format!("127.0.0.1:{port} ([web] listen)")),
        "{log}"
    );
    assert!(!log.contains("serving the console"), "{log}");
    // The daemon goes on.
    let status = ws.json(&["status", "--json"]);
    let daemon = status["components"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["component"] == "daemon"))
        .cloned();
    assert_eq!(
        daemon.map(|d| d["state"].clone()),
        Some("running".into()),
        "{status}"
    );
}

/// An MCP message to the console's `/mcp`, with `headers`; the status and the body.
fn mcp_post(address: &str, headers: &[(&str, &str)], message: &str) -> (u16, serde_json::Value) {
    let mut all = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    all.extend_from_slice(headers);
    let (code, _, body) = exchange(address, "POST", "/mcp", &all, message);
    (
        code,
        serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body)),
    )
}

fn tools_of(answer: &serde_json::Value) -> Vec<String> {
    answer["result"]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn mcp_over_http_needs_the_token_and_a_read_only_one_gets_the_read_tools() {
    let Some(ip) = other_address() else { return };
    let (ws, _daemon, port) = console_on_every_address();
    let remote = format!("{ip}:{port}");
    let (full, read) = (format!("Bearer {FULL}"), format!("Bearer {READ}"));
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

    let (code, _) = mcp_post(&remote, &[], list);
    assert_eq!(code, 401, "no token, no MCP");
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let (code, answer) = mcp_post(&remote, &[("Authorization", &full)], init);
    assert_eq!(code, 200, "{answer}");
    assert_eq!(
        answer["result"]["protocolVersion"], "2025-06-18",
        "{answer}"
    );
    let (code, _) = mcp_post(
        &remote,
        &[("Authorization", &full)],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(code, 202, "a notification is accepted, not answered");

    let (_, answer) = mcp_post(&remote, &[("Authorization", &read)], list);
    let reads = tools_of(&answer);
    assert!(reads.iter().any(|t| t == "show_task"), "{answer}");
    assert!(
        !reads.iter().any(|t| t == "go"),
        "a read-only token offered go: {answer}"
    );
    let go = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"go","arguments":{"gid":"T-1"}}}"#;
    let (_, answer) = mcp_post(&remote, &[("Authorization", &read)], go);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("read-only"),
        "{answer}"
    );
    let status = ws.json(&["show", "T-1", "--json"])["task"]["status"].clone();
    assert!(
        status == "pending" || status == "for_review",
        "the read-only token approved the task: {status}"
    );

    let (_, answer) = mcp_post(&remote, &[("Authorization", &full)], list);
    assert!(tools_of(&answer).iter().any(|t| t == "go"), "{answer}");
    let (_, answer) = mcp_post(&remote, &[("Authorization", &full)], go);
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(
        answer["result"]["structuredContent"]["to"], "approved",
        "{answer}"
    );
    // The daemon, woken, may have taken it already.
    let status = ws.json(&["show", "T-1", "--json"])["task"]["status"].clone();
    assert!(status != "pending" && status != "for_review", "{status}");

    let (code, _) = mcp_post(
        &remote,
        &[
            ("Authorization", &full),
            ("MCP-Protocol-Version", "1999-01-01"),
        ],
        list,
    );
    assert_eq!(code, 400, "an unknown protocol version is refused");
    let (code, _, _) = exchange(&remote, "GET", "/mcp", &[("Authorization", &full)], "");
    assert_eq!(code, 405, "no stream of the server's own");
    // From this machine, no token: the whole server.
    let local = format!("127.0.0.1:{port}");
    let (_, answer) = mcp_post(&local, &[], list);
    assert!(
        tools_of(&answer).iter().any(|t| t == "answer_escalation"),
        "{answer}"
    );
}

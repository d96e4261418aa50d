//! GitHub's webhook deliveries into a running daemon: a signed `check_suite` failure makes
//! the PR look happen now (a `fix_ci` worker starts although the daemon's poll is ten minutes
//! away), a bad signature is refused and changes nothing, and a delivery id is taken once.

use std::io::{Read, Write};
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::daemon::Daemon;
use crate::fake_github::{Ci, FakeGithub, FIRST_HEAD, PR};
use crate::github_runs::waiting_pr;
use crate::support::{eventually, Workspace};

const SECRET: &str = "webhook-test-secret";
const WAIT: Duration = Duration::from_secs(30);

fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// POSTs `body` to the daemon's webhook; returns the status code and the body.
fn deliver(
    address: &str,
    event: &str,
    delivery: &str,
    signature: &str,
    body: &str,
) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(address).expect("connect to the webhook");
    let request = format!(
        "POST /webhooks/github HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         X-GitHub-Event: {event}\r\nX-GitHub-Delivery: {delivery}\r\nX-Hub-Signature-256: {signature}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {response}"));
    let text = response
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    (code, text)
}

/// The address the daemon logged for its webhook.
fn webhook_address(ws: &Workspace) -> String {
    crate::daemon::logged_address(ws, "listening for GitHub webhook deliveries")
}

#[test]
fn a_signed_check_suite_failure_starts_the_fix_ci_worker_at_once_and_is_taken_once() {
    let github = FakeGithub::start_empty();
    let mut ws = waiting_pr(&github);
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    let config = config
        .replacen("[runner]\n", "[runner]\nloop_sleep = \"600s\"\n", 1)
        .replacen(
            "[forge]\n",
            "[forge]\nwebhook_secret_env = \"TEST_WEBHOOK_SECRET\"\n",
            1,
        );
    ws.write_config(&format!("{config}\n[web]\nlisten = \"127.0.0.1:0\"\n"));
    ws.env.push(("TEST_WEBHOOK_SECRET".into(), SECRET.into()));
    let daemon = Daemon::start(&ws);
    let address = webhook_address(&ws);

    // CI on the PR's head turned red.
    github.set_ci(FIRST_HEAD, Ci::Failed);
    let body = serde_json::json!({
        "action": "completed",
        "check_suite": {
            "head_sha": FIRST_HEAD,
            "status": "completed",
            "conclusion": "failure",
            "pull_requests": [{"number": PR}]
        }
    })
    .to_string();

    // A bad signature is refused, and does not take the delivery id.
    let (code, _) = deliver(
        &address,
        "check_suite",
        "D-1",
        &signature("wrong", body.as_bytes()),
        &body,
    );
    assert_eq!(code, 401);
    let (code, _) = deliver(&address, "check_suite", "D-1", "", &body);
    assert_eq!(code, 401, "no signature");

    let good = signature(SECRET, body.as_bytes());
    let (code, text) = deliver(&address, "check_suite", "D-1", &good, &body);
    assert_eq!((code, text.as_str()), (202, "looking"));
    eventually(WAIT, "a fix_ci worker", || {
        ws.path()
            .join("prompts-seen/fix_ci.md")
            .exists()
            .then_some(())
    });

    // The same delivery again is taken once.
    let (code, text) = deliver(&address, "check_suite", "D-1", &good, &body);
    assert_eq!((code, text.as_str()), (200, "delivery already taken"));
    let ping = r#"{"zen":"Keep it logically awesome."}"#;
    let (code, _) = deliver(
        &address,
        "ping",
        "D-2",
        &signature(SECRET, ping.as_bytes()),
        ping,
    );
    assert_eq!(code, 200);
    drop(daemon);
}

/// A measurement, not a test (`cargo test --test it -- --ignored check_suite_delivery`):
/// a signed `check_suite` failure delivery to the `fix_ci` worker's start, in fresh
/// workspaces on the fake GitHub, printed as a table. It lives here rather than in
/// `benches/` because the fake GitHub is this binary's; it runs the debug build.
#[test]
#[ignore = "a measurement; prints a table"]
fn measure_check_suite_delivery_to_fix_ci_worker_started() {
    const ROUNDS: usize = 5;
    let mut samples = Vec::with_capacity(ROUNDS);
    for round in 1..=ROUNDS {
        let github = FakeGithub::start_empty();
        let mut ws = waiting_pr(&github);
        let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
        let config = config
            .replacen("[runner]\n", "[runner]\nloop_sleep = \"600s\"\n", 1)
            .replacen(
                "[forge]\n",
                "[forge]\nwebhook_secret_env = \"TEST_WEBHOOK_SECRET\"\n",
                1,
            );
        ws.write_config(&format!("{config}\n[web]\nlisten = \"127.0.0.1:0\"\n"));
        ws.env.push(("TEST_WEBHOOK_SECRET".into(), SECRET.into()));
        let daemon = Daemon::start(&ws);
        let address = webhook_address(&ws);
        // The daemon's start-up look at the PR (CI still running) is over before CI turns
        // red, so the worker can only come from the delivery.
        std::thread::sleep(Duration::from_secs(2));
        github.set_ci(FIRST_HEAD, Ci::Failed);
        let body = serde_json::json!({
            "action": "completed",
            "check_suite": {
                "head_sha": FIRST_HEAD,
                "status": "completed",
                "conclusion": "failure",
                "pull_requests": [{"number": PR}]
            }
        })
        .to_string();
        let mark = ws.path().join("prompts-seen/fix_ci.md");
        let started = std::time::Instant::now();
        let (code, _) = deliver(
            &address,
            "check_suite",
            &format!("M-{round}"),
            &signature(SECRET, body.as_bytes()),
            &body,
        );
        assert_eq!(code, 202);
        eventually(WAIT, "a fix_ci worker", || mark.exists().then_some(()));
        samples.push(started.elapsed());
        drop(daemon);
    }
    samples.sort();
    let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1000.0);
    let (median, max) = (samples[ROUNDS / 2], samples[ROUNDS - 1]);
    println!("| measurement | n | median | max | target | met |");
    println!("|---|---:|---:|---:|---|---|");
    println!(
        "| daemon: signed GitHub `check_suite` failure delivery to `fix_ci` worker started (debug build) | {ROUNDS} | {} | {} | each ≤ 1 s | {} |",
        ms(median),
        ms(max),
        if max <= Duration::from_secs(1) { "yes" } else { "**no**" }
    );
}

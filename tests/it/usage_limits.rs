//! Usage limits: a stand-in `claude` on `PATH` answers its first start the way Claude Code
//! ends on a plan limit (a `rate_limit_event` rejected with its `resetsAt`, the "You've hit
//! your limit · resets …" error message and result, exit 1) and every later start with the
//! captured transcript. The run pauses without counting a failed worker, no new Claude
//! worker starts before the reset (another task waits too), `status` and the console's
//! Needs-you page say until when, a restart keeps the pause, the owner is told once, and
//! after the reset the interrupted run carries on in its own session and completes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::daemon::Daemon;
use crate::runner::workspace;
use crate::support::{eventually, Workspace};

/// Seconds from the limit until it resets: long enough to look at the pause and restart
/// the daemon inside it.
const RESET_AFTER: u64 = 12;

/// The session the stand-in names when executor chose none.
const SESSION: &str = "5b0c3f9e-usage-limit";

/// A stand-in `claude`: the first start meets the limit, the others do the work. Each
/// start's arguments are a line of `starts`.
fn limited_claude(bin: &Path) -> PathBuf {
    let starts = bin.join("starts");
    let stream = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/agents/claude_stream.jsonl");
    let fake = bin.join("claude");
    std::fs::write(
        &fake,
        format!(
            r#"#!/bin/sh
cat > /dev/null
echo "$*" >> '{starts}'
if [ "$(wc -l < '{starts}')" -eq 1 ]; then
  sid={SESSION}
  while [ $# -gt 0 ]; do [ "$1" = --session-id ] && sid="$2"; shift; done
  reset=$(( $(date +%s) + {RESET_AFTER} ))
  echo '{{"type":"system","subtype":"init","session_id":"'"$sid"'","model":"claude-sonnet-4-5","tools":[]}}'
  echo '{{"type":"rate_limit_event","rate_limit_info":{{"status":"rejected","resetsAt":'"$reset"',"rateLimitType":"five_hour","overageStatus":"rejected","overageDisabledReason":"org_level_disabled","isUsingOverage":false}},"session_id":"'"$sid"'"}}'
  echo '{{"type":"assistant","message":{{"id":"m1","type":"message","role":"assistant","model":"<synthetic>","content":[{{"type":"text","text":"You'"'"'ve hit your limit · resets 3pm (UTC)"}}]}},"session_id":"'"$sid"'","error":"rate_limit"}}'
  echo '{{"type":"result","subtype":"success","is_error":true,"duration_ms":120,"num_turns":1,"result":"You'"'"'ve hit your limit · resets 3pm (UTC)","stop_reason":"stop_sequence","session_id":"'"$sid"'","total_cost_usd":0,"usage":{{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}},"permission_denials":[]}}'
  exit 1
fi
echo done > CHANGED.md
cat '{stream}'
"#,
            starts = starts.display(),
            stream = stream.display()
        ),
    )
    .expect("write the stand-in agent");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    starts
}

fn starts(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

fn claude_workspace(bin: &Path) -> Workspace {
    // One worker at a time: the second task is readied while the first works, and must
    // not start its worker inside the pause.
    let mut ws = workspace(
        &["unused"],
        &[],
        "max_workers = 1\nloop_sleep = \"200ms\"\n",
    );
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!(
        "{}\n[web]\nlisten = \"127.0.0.1:0\"\n",
        config.replace(
            "kind = \"command\"",
            "kind = \"claude\"\nusage_limit_backoff = \"1h\""
        )
    ));
    ws.env
        .push(("PATH".into(), format!("{}:/usr/bin:/bin", bin.display())));
    ws
}

fn session_of(start: &str) -> Option<&str> {
    let mut words = start.split_whitespace();
    words.find(|w| *w == "--session-id")?;
    words.next()
}

fn run_of(shown: &Value) -> &Value {
    &shown["runs"][0]
}

#[test]
fn a_usage_limit_pauses_the_agent_until_its_reset_and_the_run_resumes_in_its_session() {
    let bin = tempfile::tempdir().expect("temp dir");
    let started = limited_claude(bin.path());
    let ws = claude_workspace(bin.path());
    for gid in ["U-1", "U-2"] {
        ws.ok(&["add", "--title", "Change something", "--gid", gid]);
        ws.ok(&["go", gid]);
    }
    let daemon = Daemon::start(&ws);

    // The first worker meets the limit: the agent is paused until the reset it gave.
    let status = eventually(Duration::from_secs(30), "the pause in status", || {
        let status = ws.json(&["status", "--json"]);
        status["agents_paused"].as_array()?.first()?;
        Some(status)
    });
    let pause = &status["agents_paused"][0];
    assert_eq!(pause["agent"], "claude", "{status}");
    let until = pause["until"].as_str().expect("an end").to_string();
    let reason = pause["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("claude hit its usage limit")
            && reason.contains("You've hit your limit · resets 3pm (UTC)"),
        "{pause}"
    );
    // The end is the reset the agent gave (seconds from now), not the hour of back-off.
    let end = chrono::DateTime::parse_from_rfc3339(&until).expect("a time");
    let left = end.signed_duration_since(chrono::Utc::now()).num_seconds();
    assert!(
        (0..=RESET_AFTER as i64).contains(&left),
        "{left}s left: {pause}"
    );
    let text = ws.ok(&["status"]);
    assert!(
        text.contains("dispatch PAUSED for claude: no claude worker starts until"),
        "{text}"
    );
    let first = starts(&started);
    assert_eq!(
        first.len(),
        1,
        "no worker starts inside the pause: {first:?}"
    );
    // The session executor chose, else the one the agent named.
    let session = session_of(&first[0]).unwrap_or(SESSION).to_string();

    // The run waits, holding no slot, with no failed attempt counted.
    let shown = ws.json(&["show", "U-1", "--json"]);
    let run = run_of(&shown);
    assert_eq!(run["state"], "in_progress", "{shown}");
    assert_eq!(run["lifecycle"]["stage"], "usage_limit", "{run}");
    assert_eq!(run["lifecycle"]["failed_workers"], 0, "{run}");
    let runs = ws.ok(&["runs"]);
    assert!(runs.contains("usage limit: resumes at"), "{runs}");

    // The console's first page says so.
    let address = crate::console::console_address(&ws);
    let (code, page) = crate::console::call(&address, "GET", "/", &[], "");
    assert_eq!(code, 200);
    let page = page.as_str().unwrap_or_default().to_string();
    assert!(
        page.contains("Usage limit: no claude worker starts until"),
        "{page}"
    );

    // The owner was told once, however many workers wait.
    let log = std::fs::read_to_string(ws.path().join("daemon.log")).unwrap_or_default();
    assert_eq!(log.matches("Usage limit: ").count(), 1, "{log}");

    // A restart keeps the pause: the new daemon starts no worker before the reset either.
    daemon.signal("-TERM");
    daemon.wait();
    let daemon = Daemon::start(&ws);
    let status = ws.json(&["status", "--json"]);
    if chrono::Utc::now() < end {
        assert_eq!(
            status["agents_paused"][0]["until"],
            until.as_str(),
            "{status}"
        );
        assert_eq!(starts(&started).len(), 1, "no worker inside the pause");
    }

    // After the reset the interrupted run carries on in its session; both tasks complete.
    eventually(Duration::from_secs(90), "both runs to complete", || {
        ["U-1", "U-2"]
            .iter()
            .all(|gid| run_of(&ws.json(&["show", gid, "--json"]))["state"] == "complete")
            .then_some(())
    });
    let all = starts(&started);
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(
        all[1..]
            .iter()
            .any(|s| s.contains(&format!("--resume {session}"))),
        "the run resumed its own session: {all:?}"
    );
    let ended = chrono::Utc::now();
    assert!(ended >= end, "nothing ran before the reset");
    let shown = ws.json(&["show", "U-1", "--json"]);
    assert_eq!(run_of(&shown)["lifecycle"]["failed_workers"], 0, "{shown}");
    let status = ws.json(&["status", "--json"]);
    assert!(status.get("agents_paused").is_none(), "{status}");

    // Nor again after the restart (the pause was stored, so it is not new).
    drop(daemon);
    let log = std::fs::read_to_string(ws.path().join("daemon.log")).unwrap_or_default();
    assert_eq!(log.matches("Usage limit: ").count(), 0, "{log}");
}

//! The owner's loop: a worker escalates, the run waits holding no slot, the owner sees the
//! question with `executor escalations` and answers with `executor decide`, exactly once,
//! and the run resumes with the answer (the real Claude CLI's `defer` is in `real_runs.rs`).

use crate::runner::workspace;
use crate::support::Workspace;

/// A worker that asks the owner first, and acts on the answer its resume prompt carries.
const ASKING_WORKER: &str = "prompt=$(cat); \
    if printf '%s' \"$prompt\" | grep -q 'The owner answered your escalation'; then \
      if printf '%s' \"$prompt\" | grep -q ': approve\\.'; then \
        echo changed > CHANGED.md; echo '[DONE:implemented] merged as the owner allowed'; \
      else echo changed > CHANGED.md; echo '[DONE:implemented] left unmerged as the owner said'; fi; \
    else echo '[STATUS:investigation] ready to merge'; \
      echo '[ESCALATE:needs_decision] may I merge PR 12?'; fi";

fn asking_workspace() -> Workspace {
    let ws = workspace(&["/bin/sh", "-c", ASKING_WORKER], &[], "");
    ws.ok(&["add", "--title", "Merge when allowed", "--gid", "E-1"]);
    ws.ok(&["go", "E-1"]);
    ws
}

fn escalation_id(ws: &Workspace) -> i64 {
    let listed = ws.json(&["escalations", "--json"]);
    let all = listed.as_array().expect("an array");
    assert_eq!(all.len(), 1, "{listed}");
    all[0]["id"].as_i64().expect("an id")
}

#[test]
fn an_escalation_waits_for_the_owner_and_the_run_resumes_with_the_approval() {
    let ws = asking_workspace();
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("waiting for the owner (escalation"),
        "{stderr}"
    );

    // Waiting, holding no worker: the task is still in progress, no worker is alive.
    let shown = ws.json(&["show", "E-1", "--json"]);
    assert_eq!(shown["task"]["status"], "in_progress");
    assert_eq!(shown["runs"][0]["state"], "in_progress");
    assert!(shown["runs"][0]["worker_pid"].is_null());
    let status = ws.json(&["status", "--json"]);
    assert_eq!(status["pending_escalations"], 1, "{status}");

    let id = escalation_id(&ws);
    let listing = ws.ok(&["escalations"]);
    assert!(listing.contains("may I merge PR 12?"), "{listing}");
    assert!(
        listing.contains(&format!("executor decide {id} approve|deny")),
        "{listing}"
    );

    let answered = ws.ok(&["decide", &id.to_string(), "approve", "--note", "squash it"]);
    assert!(answered.contains("approve recorded"), "{answered}");
    let again = ws.ok(&["decide", &id.to_string(), "deny"]);
    assert!(again.contains("already answered: approve"), "{again}");
    assert!(again.contains("nothing changed"), "{again}");

    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let shown = ws.json(&["show", "E-1", "--json"]);
    assert_eq!(shown["task"]["status"], "done", "{stderr}");
    assert_eq!(shown["runs"].as_array().map(Vec::len), Some(1), "one run");
    assert_eq!(shown["runs"][0]["state"], "complete");
    let escalation = &ws.json(&["escalations", "--all", "--json"])[0];
    assert_eq!(escalation["resolution"], "approve");
    assert_eq!(escalation["resolution_note"], "squash it");
    assert!(!escalation["applied_at"].is_null(), "{escalation}");

    // The resume worker was told the answer and the note.
    let logs = std::fs::read_dir(ws.path().join("logs/E-1"))
        .expect("logs")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("in_progress_"))
        .count();
    assert_eq!(logs, 2, "one resume worker (.md and .jsonl)");
    let status = ws.json(&["status", "--json"]);
    assert_eq!(
        status["pending_escalations"],
        0,
        "{status} {}",
        ws.json(&["escalations", "--all", "--json"])
    );

    // A third run --once finds nothing left to do.
    let out = ws.run(&["run", "--once"]);
    assert!(out.status.success());
    assert_eq!(
        ws.json(&["show", "E-1", "--json"])["runs"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}

#[test]
fn a_denied_escalation_is_told_to_the_worker() {
    let ws = asking_workspace();
    ws.ok(&["run", "--once"]);
    let id = escalation_id(&ws);
    ws.ok(&["decide", &id.to_string(), "deny", "--note", "not this week"]);
    let out = ws.run(&["run", "--once"]);
    assert!(out.status.success());
    let record_dir = ws.path().join("logs/E-1/run-1");
    let results: Vec<String> = std::fs::read_dir(&record_dir)
        .expect("records")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| std::fs::read_to_string(e.path().join("result.json")).ok())
        .collect();
    assert!(
        results
            .iter()
            .any(|r| r.contains("left unmerged as the owner said")),
        "{results:?}"
    );
}

#[test]
fn deciding_what_is_not_an_open_question_is_refused() {
    let ws = asking_workspace();
    let err = ws.fails_with(2, &["decide", "99", "approve"]);
    assert!(err.contains("no escalation 99"), "{err}");
    let listing = ws.ok(&["escalations"]);
    assert!(listing.contains("no escalation waits for you"), "{listing}");
}

#[test]
fn worker_requests_are_decided_by_the_contract_and_stored_with_the_messages() {
    // The worker asks for a push of main (denied), a push of its own branch (approved) and
    // a merge (escalated, without stopping the run); a malformed line is skipped; then it
    // is done. Its second phase is never needed.
    let worker = "cat >/dev/null; \
        echo '[STATUS:investigation] looking'; \
        echo '[REQUEST:push_branch] branch=main'; \
        echo \"[REQUEST:push_branch] branch=$(git rev-parse --abbrev-ref HEAD)\"; \
        echo '[REQUEST:merge_pr] pr=12 when green'; \
        echo '[DONE:Bad-Kind] not a message'; \
        echo '```'; echo changed > CHANGED.md; echo '[DONE:implemented] inside a code block: not a message'; echo '```'; \
        echo 'change' > change.txt; \
        echo changed > CHANGED.md; echo '[DONE:implemented] asked and done'";
    let ws = workspace(&["/bin/sh", "-c", worker], &[], "");
    ws.ok(&["add", "--title", "Ask things", "--gid", "Q-1"]);
    ws.ok(&["go", "Q-1"]);
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let shown = ws.json(&["show", "Q-1", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "complete", "{shown}");
    let lines: Vec<&str> = shown["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["line"].as_str())
        .collect();
    assert_eq!(
        lines.first(),
        Some(&"[STATUS:investigation] looking"),
        "{lines:?}"
    );
    assert_eq!(
        lines.last(),
        Some(&"[DONE:implemented] asked and done"),
        "{lines:?}"
    );
    assert!(!shown["runs"][0]["worker_last_update"].is_null());
    let decisions: Vec<(String, String, String)> = shown["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .map(|d| {
            (
                d["action"].as_str().unwrap_or("").to_string(),
                d["decision"].as_str().unwrap_or("").to_string(),
                d["rule_id"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(decisions.len(), 3, "{decisions:?}");
    assert_eq!(
        decisions[0],
        (
            "push_branch".into(),
            "deny".into(),
            "push-other-branch".into()
        )
    );
    assert_eq!(decisions[1].1, "approve", "{decisions:?}");
    assert_eq!(
        decisions[2],
        ("merge_pr".into(), "escalate".into(), "merge".into())
    );
    // The workspace runs its workers with the sandbox off: each request was judged, and
    // recorded, unconfined.
    assert!(
        shown["decisions"]
            .as_array()
            .expect("decisions")
            .iter()
            .all(|d| d["confined"] == serde_json::Value::Bool(false)),
        "{shown}"
    );

    // The merge waits for the owner, with the run's messages as its window.
    let pending = ws.json(&["escalations", "--json"]);
    let window = pending[0]["message_window"].to_string();
    assert!(pending[0]["message_window"].is_array(), "{window}");
    assert!(
        window.contains("[STATUS:investigation] looking"),
        "{window}"
    );
    let listing = ws.ok(&["escalations"]);
    assert!(
        listing.contains("[REQUEST:push_branch] branch=main"),
        "{listing}"
    );
    assert!(
        listing.contains("[STATUS:request_denied] request=push_branch"),
        "the orchestrator's answers are in the window: {listing}"
    );
    assert!(!listing.contains("inside a code block"), "{listing}");

    // The malformed line is in the readable log as skipped.
    let md = std::fs::read_dir(ws.path().join("logs/Q-1"))
        .expect("logs")
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().ends_with(".md"))
        .map(|e| std::fs::read_to_string(e.path()).expect("read"))
        .expect("a phase log");
    assert!(md.contains("skipped a malformed message"), "{md}");
}

#[test]
fn protocol_parse_prints_one_json_object_per_message() {
    let ws = Workspace::init();
    let mut child = crate::support::executor(ws.path())
        .args(["protocol", "parse"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(
            b"hello\n[REQUEST:run_tests] scheme=\"macOS UI Tests CI\" please\n[STATUS:pr_open] PR #1234\n[DONE:x] a=\"unterminated\n[ACKNOWLEDGED: won't fix, out of scope]\n",
        )
        .expect("write");
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON per line"))
        .collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert_eq!(lines[0]["tag"], "REQUEST");
    assert_eq!(lines[0]["args"]["scheme"], "macOS UI Tests CI");
    assert_eq!(lines[0]["text"], "please");
    assert_eq!(lines[2]["tag"], "ACKNOWLEDGED");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line 4"), "the bad line is named: {stderr}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "malformed input is reported in the exit code"
    );
}

/// A worker that escalates, and, run as the model judge (the same command, with the judge's
/// prompt), answers `verdict`.
fn judged_workspace(verdict: &str) -> Workspace {
    // The prompt is read once, so the asking part works on the same `$prompt`.
    let asking = ASKING_WORKER.replacen("prompt=$(cat); ", "", 1);
    let worker = format!(
        "prompt=$(cat); \
         if printf '%s' \"$prompt\" | grep -q 'A request waits for the owner'; then \
           echo '{verdict}'; exit 0; fi; {asking}"
    );
    let ws = workspace(&["/bin/sh", "-c", &worker], &[], "");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!(
        "{config}\n[policy]\nask_model_first = [\"needs_decision\"]\njudge_timeout = \"30s\"\n"
    ));
    ws.ok(&["add", "--title", "Merge when allowed", "--gid", "E-1"]);
    ws.ok(&["go", "E-1"]);
    ws
}

#[test]
fn the_model_judge_may_deny_an_escalation_and_the_run_goes_on_with_the_denial() {
    let ws = judged_workspace("[DONE:deny] the PR has no review yet");
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let escalation = &ws.json(&["escalations", "--all", "--json"])[0];
    assert_eq!(escalation["resolution"], "deny", "{escalation}");
    assert_eq!(escalation["resolved_by"], "model judge");
    assert_eq!(escalation["resolution_note"], "the PR has no review yet");
    let shown = ws.json(&["show", "E-1", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "complete", "{stderr}");
}

#[test]
fn the_model_judge_can_never_approve() {
    let ws = judged_workspace("[DONE:approve] looks fine to me");
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("waiting for the owner"), "{stderr}");
    let pending = ws.json(&["escalations", "--json"]);
    assert_eq!(pending.as_array().map(Vec::len), Some(1), "{pending}");
    assert!(pending[0]["resolution"].is_null());
}

#[test]
fn a_worker_that_keeps_asking_after_the_judges_denials_reaches_the_owner() {
    // This worker ignores the answer and asks again every time.
    let worker = "prompt=$(cat); \
        if printf '%s' \"$prompt\" | grep -q 'A request waits for the owner'; then \
          echo '[DONE:deny] no'; exit 0; fi; \
        echo '[ESCALATE:needs_decision] may I merge PR 12?'";
    let ws = workspace(&["/bin/sh", "-c", worker], &[], "");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!(
        "{config}\n[policy]\nask_model_first = [\"needs_decision\"]\n"
    ));
    ws.ok(&["add", "--title", "Insist", "--gid", "E-2"]);
    ws.ok(&["go", "E-2"]);
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = ws.json(&["escalations", "--all", "--json"]);
    let all = all.as_array().expect("escalations");
    assert_eq!(
        all.len(),
        3,
        "two denied by the judge, the third waits: {all:?}"
    );
    assert!(all[..2].iter().all(|e| e["resolved_by"] == "model judge"));
    assert!(all[2]["resolution"].is_null());
}

/// `--limit N` keeps the newest N escalations, still oldest first; 0 is refused.
#[test]
fn escalations_are_limited_to_the_newest() {
    let ws = asking_workspace();
    ws.ok(&[
        "add",
        "--title",
        "Merge the other when allowed",
        "--gid",
        "E-2",
    ]);
    ws.ok(&["go", "E-2"]);
    ws.ok(&["run", "--once"]);
    let ids = |args: &[&str]| -> Vec<i64> {
        let mut all = vec!["escalations", "--json"];
        all.extend_from_slice(args);
        ws.json(&all)
            .as_array()
            .expect("an array")
            .iter()
            .map(|e| e["id"].as_i64().expect("an id"))
            .collect()
    };
    let every = ids(&[]);
    assert_eq!(every.len(), 2, "{every:?}");
    assert!(every[0] < every[1], "oldest first: {every:?}");
    assert_eq!(ids(&["--limit", "1"]), every[1..], "the newest one");
    assert_eq!(
        ids(&["--all", "--limit", "5"]),
        every,
        "fewer than the limit: all"
    );
    let listing = ws.ok(&["escalations", "--limit", "1"]);
    assert_eq!(listing.matches("executor decide").count(), 1, "{listing}");
    let err = ws.fails_with(2, &["escalations", "--limit", "0"]);
    assert!(err.contains("--limit"), "{err}");
}

//! `executor hook claude` as Claude Code runs it: hook JSON on stdin (in the shape of
//! `shared/fixtures/agents/hook_inputs.jsonl`), one JSON answer on stdout, the decision
//! recorded with the run. The real CLI consulting it is in `real_runs.rs`.

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

use serde_json::{json, Value};

use crate::support::Workspace;

/// Runs the hook for run 1 of `ws`, worktree `worktree`, branch `executor/T-1`.
fn hook(ws: &Workspace, worktree: &Path, input: &[u8]) -> Output {
    let mut child = crate::support::executor(ws.path())
        .args(["hook", "claude", "--config"])
        .arg(ws.path().join("executor.toml"))
        .args(["--run", "1", "--worktree"])
        .arg(worktree)
        .args(["--branch", "executor/T-1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the hook");
    // The hook stops reading past its limit, so writing oversized input may fail: that is
    // its answer to judge, not an error here.
    let _ = child.stdin.take().expect("stdin").write_all(input);
    child.wait_with_output().expect("the hook's output")
}

fn answer(out: &Output) -> (String, String) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).expect("one JSON answer");
    let specific = &answer["hookSpecificOutput"];
    assert_eq!(specific["hookEventName"], "PreToolUse");
    (
        specific["permissionDecision"]
            .as_str()
            .expect("decision")
            .into(),
        specific["permissionDecisionReason"]
            .as_str()
            .expect("reason")
            .into(),
    )
}

fn bash(command: &str, cwd: &Path) -> Vec<u8> {
    json!({
        "session_id": "7817711f-9a75-4be4-9372-239a3eb8cfd9",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "a command"},
        "tool_use_id": "toolu_a12361d8164343ada3ac759f"
    })
    .to_string()
    .into_bytes()
}

#[test]
fn the_hook_answers_by_the_worker_contract_and_records_each_decision() {
    let ws = Workspace::init();
    ws.ok(&["add", "--title", "Hooked", "--gid", "T-1"]);
    let worktree = ws.path().join("wt");
    std::fs::create_dir_all(&worktree).expect("mkdir");

    let (decision, reason) = answer(&hook(
        &ws,
        &worktree,
        &bash("git push origin main", &worktree),
    ));
    assert_eq!(decision, "deny");
    assert!(reason.contains("push-other-branch"), "{reason}");

    let (decision, _) = answer(&hook(
        &ws,
        &worktree,
        &bash("git push origin executor/T-1", &worktree),
    ));
    assert_eq!(decision, "allow");

    let (decision, reason) = answer(&hook(
        &ws,
        &worktree,
        &bash("cargo test && gh pr merge 12 --squash", &worktree),
    ));
    assert_eq!(
        decision, "defer",
        "an escalation parks the call for the owner, never lets it through"
    );
    assert!(reason.contains("owner"), "{reason}");

    let (decision, _) = answer(&hook(&ws, &worktree, b"{not json"));
    assert_eq!(decision, "deny", "input it cannot read is never allowed");

    // No run 1 exists in this workspace's store, so the decisions have no task; they are
    // still recorded, with the run they name.
    let db = rusqlite::Connection::open(ws.path().join("executor.db")).expect("open");
    let mut rows = db
        .prepare("SELECT decision, rule_id, run_id FROM executor_decisions ORDER BY id")
        .expect("prepare");
    let recorded: Vec<(String, Option<String>, Option<i64>)> = rows
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(
        recorded.len(),
        3,
        "unreadable input is refused, not judged: {recorded:?}"
    );
    assert_eq!(recorded[0].0, "deny");
    assert_eq!(recorded[0].1.as_deref(), Some("push-other-branch"));
    assert_eq!(recorded[1].0, "approve");
    assert_eq!(recorded[2].0, "escalate");
    assert!(recorded.iter().all(|r| r.2 == Some(1)));
}

#[test]
fn a_broken_contract_denies_everything_and_says_why() {
    let ws = Workspace::init();
    let contract = ws.path().join("roles/worker-policy.json");
    std::fs::write(&contract, "{\"contract_version\": 1,\n \"rules\": [}\n").expect("write");
    let worktree = ws.path().join("wt");
    std::fs::create_dir_all(&worktree).expect("mkdir");
    let (decision, reason) = answer(&hook(&ws, &worktree, &bash("ls", &worktree)));
    assert_eq!(decision, "deny");
    assert!(
        reason.contains("worker-policy.json") && reason.contains(":2"),
        "the reason names the file and line: {reason}"
    );
}

#[test]
fn a_missing_contract_denies_everything_and_names_the_file() {
    let ws = Workspace::init();
    let contract = ws.path().join("roles/worker-policy.json");
    std::fs::remove_file(&contract).expect("remove the contract");
    let worktree = ws.path().join("wt");
    std::fs::create_dir_all(&worktree).expect("mkdir");
    let (decision, reason) = answer(&hook(&ws, &worktree, &bash("ls", &worktree)));
    assert_eq!(decision, "deny", "no built-in contract stands in: {reason}");
    assert!(
        reason.contains("worker-policy.json") && reason.contains("does not exist"),
        "the reason names the missing file: {reason}"
    );
}

#[test]
fn oversized_input_is_refused_not_judged() {
    let ws = Workspace::init();
    let worktree = ws.path().join("wt");
    std::fs::create_dir_all(&worktree).expect("mkdir");
    let huge = bash(&"x".repeat(5 * 1024 * 1024), &worktree);
    let (decision, reason) = answer(&hook(&ws, &worktree, &huge));
    assert_eq!(decision, "deny");
    assert!(reason.contains("too large"), "{reason}");
}

#[test]
fn the_hook_answers_while_the_database_is_locked_and_says_what_it_could_not_record() {
    let ws = Workspace::init();
    let worktree = ws.path().join("wt");
    std::fs::create_dir_all(&worktree).expect("mkdir");
    // Another process holds the write lock for as long as this test runs.
    let holder = rusqlite::Connection::open(ws.path().join("executor.db")).expect("open");
    holder
        .execute_batch("BEGIN EXCLUSIVE;")
        .expect("take the write lock");

    let out = hook(&ws, &worktree, &bash("git push origin main", &worktree));
    let (decision, reason) = answer(&out);
    assert_eq!(decision, "deny");
    assert!(reason.contains("push-other-branch"), "{reason}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not recorded"), "{stderr}");

    // The hook was done while the lock was still held: it never waited for it.
    holder.execute_batch("COMMIT;").expect("release");
}

#[tokio::test]
async fn a_hook_run_by_hand_outside_the_wall_records_its_decisions_unconfined() {
    let ws = Workspace::init();
    ws.ok(&["add", "--title", "Hooked", "--gid", "T-1"]);
    {
        // Run 1 of T-1, so the hook's decisions are the task's and `show` lists them.
        let store = executor::store::sqlite::SqliteStore::open(&ws.path().join("executor.db"))
            .await
            .expect("open");
        let run = executor::store::Store::create_run(&store, "T-1", chrono::Utc::now())
            .await
            .expect("run");
        assert_eq!(run.id, 1);
    }
    let worktree = ws.path().join("wt");
    std::fs::create_dir_all(&worktree).expect("mkdir");
    let (decision, _) = answer(&hook(
        &ws,
        &worktree,
        &bash("git push origin main", &worktree),
    ));
    assert_eq!(decision, "deny");
    let (decision, _) = answer(&hook(
        &ws,
        &worktree,
        &bash("cargo test && gh pr merge 12 --squash", &worktree),
    ));
    assert_eq!(decision, "defer");

    let shown = ws.json(&["show", "T-1", "--json"]);
    let decisions = shown["decisions"].as_array().expect("decisions");
    let recorded: Vec<(&str, &Value)> = decisions
        .iter()
        .map(|d| (d["decision"].as_str().unwrap_or(""), &d["confined"]))
        .collect();
    assert_eq!(
        recorded,
        [
            ("deny", &Value::Bool(false)),
            ("escalate", &Value::Bool(false))
        ],
        "{shown}"
    );
    let human = ws.ok(&["show", "T-1"]);
    assert!(
        human.contains("worker (unconfined) push_branch -> deny"),
        "{human}"
    );

    let escalations = ws.json(&["escalations", "--json"]);
    let escalations = escalations.as_array().expect("escalations");
    assert_eq!(escalations.len(), 1, "{escalations:?}");
    assert_eq!(escalations[0]["confined"], Value::Bool(false));
    let human = ws.ok(&["escalations"]);
    assert!(human.contains("the worker ran unconfined"), "{human}");
}

//! `executor dispatch TASK.json`: a conductor worker task file runs one worker to a run
//! record (`patch.diff`, `result.json`, `stderr.txt`), with the file's tools, timeout and
//! named session; malformed files are refused naming the field.

use std::path::Path;

use serde_json::Value;

use crate::runner::workspace;
use crate::support::Workspace;

const TEMPLATE: &str = r#"{"taskVersion": 1, "id": "t-worker-alpha", "prompt": "Write alpha.txt, then say done.", "workspace": "alpha", "capabilities": {"tools": ["read", "write", "edit", "bash"]}, "session": "worker-1", "timeoutSeconds": 600}"#;

/// Writes alpha.txt (or sleeps when told to), notes its session and tools, says done.
fn worker(notes: &Path) -> String {
    format!(
        r#"prompt=$(cat); echo "session=$EXECUTOR_SESSION_ID tools=$EXECUTOR_TOOLS" >> '{}'
if printf '%s' "$prompt" | grep -q 'sleep'; then sleep 30; fi
echo 'alpha' > alpha.txt; echo 'a note on stderr' >&2
echo '[DONE:implemented] wrote alpha.txt'"#,
        notes.display()
    )
}

fn dispatch_workspace() -> (Workspace, tempfile::TempDir) {
    let notes = tempfile::tempdir().expect("temp dir");
    let script = worker(&notes.path().join("notes.log"));
    let ws = workspace(&["/bin/sh", "-c", &script], &[], "");
    (ws, notes)
}

fn write(ws: &Workspace, name: &str, text: &str) -> String {
    let path = ws.path().join(name);
    std::fs::write(&path, text).expect("write the task file");
    path.display().to_string()
}

#[test]
fn the_template_runs_to_a_patch_a_result_and_stderr_and_the_session_carries_over() {
    let (ws, notes) = dispatch_workspace();
    let file = write(&ws, "task.json", TEMPLATE);
    let shown: Value = ws.json(&["dispatch", &file, "--json"]);
    assert_eq!(shown["done"], true, "{shown}");
    assert_eq!(shown["task_gid"], "t-worker-alpha");
    let record = Path::new(shown["record"].as_str().expect("record"));
    let patch = std::fs::read_to_string(record.join("patch.diff")).expect("patch.diff");
    assert!(
        patch.contains("+++ b/alpha.txt") && patch.contains("+alpha"),
        "{patch}"
    );
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(record.join("result.json")).expect("result.json"),
    )
    .expect("JSON");
    assert_eq!(result["done"], "[DONE:implemented] wrote alpha.txt");
    let stderr = std::fs::read_to_string(record.join("stderr.txt")).expect("stderr.txt");
    assert!(stderr.contains("a note on stderr"), "{stderr}");
    // The worktree is named by the file's workspace.
    assert!(
        shown["record"]
            .as_str()
            .is_some_and(|r| r.contains("t-worker-alpha")),
        "{shown}"
    );
    let run = &ws.json(&["show", "t-worker-alpha", "--json"])["runs"][0];
    assert!(
        run["branch_name"]
            .as_str()
            .is_some_and(|b| b.ends_with("alpha")),
        "{run}"
    );

    // The next round: its own id, the same session.
    let second = TEMPLATE
        .replace("t-worker-alpha", "t-worker-alpha-2")
        .replace(r#"["read", "write", "edit", "bash"]"#, r#"["read"]"#);
    let file = write(&ws, "task2.json", &second);
    let again: Value = ws.json(&["dispatch", &file, "--json"]);
    assert_eq!(again["done"], true, "{again}");
    assert_eq!(again["session_id"], shown["session_id"], "one session");
    let noted = std::fs::read_to_string(notes.path().join("notes.log")).expect("notes");
    let lines: Vec<&str> = noted.lines().collect();
    assert_eq!(lines.len(), 2, "{noted}");
    let session = shown["session_id"].as_str().expect("a session id");
    assert_eq!(
        lines[0],
        format!("session={session} tools=read,write,edit,bash")
    );
    assert_eq!(lines[1], format!("session={session} tools=read"));

    // A worker task id runs once.
    let err = ws.fails_with(2, &["dispatch", &file]);
    assert!(err.contains("give the next round its own id"), "{err}");
}

#[test]
fn the_files_timeout_is_the_hard_timeout() {
    let (ws, _notes) = dispatch_workspace();
    let slow = TEMPLATE
        .replace("Write alpha.txt", "sleep, then write alpha.txt")
        .replace("600", "1");
    let file = write(&ws, "slow.json", &slow);
    let err = ws.fails_with(1, &["dispatch", &file]);
    assert!(err.contains("hard timeout"), "{err}");
}

#[test]
fn malformed_task_files_are_refused_naming_the_field() {
    let (ws, _notes) = dispatch_workspace();
    let cases = [
        (
            TEMPLATE.replace(r#""taskVersion": 1"#, r#""taskVersion": 2"#),
            "taskVersion",
        ),
        (
            TEMPLATE.replace(r#""bash"]"#, r#""browse"]"#),
            "capabilities.tools[3]",
        ),
        (
            TEMPLATE.replace(r#""prompt": "Write alpha.txt, then say done.", "#, ""),
            "prompt",
        ),
        (TEMPLATE.replace("600", "0"), "timeoutSeconds"),
        (TEMPLATE.replace(r#""alpha""#, r#""../alpha""#), "workspace"),
        (TEMPLATE.replace(r#""session""#, r#""sesion""#), "sesion"),
    ];
    for (i, (text, field)) in cases.iter().enumerate() {
        let file = write(&ws, &format!("bad-{i}.json"), text);
        let err = ws.fails_with(2, &["dispatch", &file]);
        assert!(err.contains(&format!("`{field}`")), "{field}: {err}");
        assert!(err.contains(&file), "the file is named: {err}");
    }
    assert!(ws.queue().is_empty(), "nothing was queued");
}

#[test]
fn the_conductors_contract_decides_whether_a_worker_is_dispatched() {
    let (ws, notes) = dispatch_workspace();
    let policy = ws.path().join("roles/conductor-policy.json");
    let text = std::fs::read_to_string(&policy).expect("init wrote the conductor contract");
    let denied = text.replace(
        r#""action": "dispatch_worker", "decision": "approve""#,
        r#""action": "dispatch_worker", "decision": "deny""#,
    );
    assert_ne!(denied, text, "the dispatch rule was found");
    std::fs::write(&policy, denied).expect("write");
    let file = write(&ws, "task.json", TEMPLATE);
    let err = ws.fails_with(1, &["dispatch", &file]);
    assert!(
        err.contains("does not approve dispatching t-worker-alpha"),
        "{err}"
    );
    assert!(!notes.path().join("notes.log").exists(), "no worker ran");
}

#[test]
fn a_paused_agent_is_not_dispatched_and_says_until_when() {
    let (ws, notes) = dispatch_workspace();
    let (runtime, store) = ws.store();
    let until = chrono::Utc::now() + chrono::Duration::hours(2);
    runtime.block_on(async {
        use executor::store::Store;
        let pause = executor::core::usage_limit::AgentPause {
            agent: "command".into(),
            since: chrono::Utc::now(),
            until,
            reason: "command hit its usage limit".into(),
            run_id: None,
            task_gid: None,
        };
        store.pause_agent(&pause).await.expect("pause");
    });
    // Done with the test's own connection.
    drop(store);
    let file = write(&ws, "task.json", TEMPLATE);
    let err = ws.fails_with(1, &["dispatch", &file]);
    assert!(
        err.contains("t-worker-alpha is not dispatched: no command worker starts until")
            && err.contains(&until.format("%Y-%m-%d %H:%M:%S").to_string()),
        "{err}"
    );
    assert!(!notes.path().join("notes.log").exists(), "no worker ran");
    let shown = ws.json(&["queue", "--json"]);
    assert!(
        !shown.to_string().contains("t-worker-alpha"),
        "nothing recorded: {shown}"
    );
}

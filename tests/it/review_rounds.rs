//! Review rounds before integration: a diff rejected twice and accepted the third time, the
//! author always in its one session; integration then waits for the owner's `executor go`
//! unless the conductor's contract approves it; what the reviewer changes is never integrated.

use std::path::Path;

use crate::runner::workspace;
use crate::support::Workspace;

/// The reviewer rejects the first two rounds with a finding; the author notes its session
/// and what it was told, adds a line and is done.
fn script(dir: &Path) -> String {
    let dir = dir.display();
    format!(
        r#"prompt=$(cat); dir='{dir}'
if printf '%s' "$prompt" | grep -q 'Review a pull request'; then
  n=$(cat "$dir/reviews" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$dir/reviews"
  echo 'a reviewer edit' > reviewer_edit.txt; echo 'tampered' >> alpha.txt
  if [ "$n" -lt 3 ]; then
    echo "[STATUS:finding] path=alpha.txt severity=blocker round $n: say more"
    echo '[DONE:changes_requested] one blocker'
  else echo '[DONE:review_green] good now'; fi
  exit 0
fi
echo "$EXECUTOR_SESSION_ID" >> "$dir/sessions"
printf '%s' "$prompt" > "$dir/prompt-$(wc -l < "$dir/sessions" | tr -d ' ')"
echo more >> alpha.txt
echo '[DONE:implemented] alpha'"#
    )
}

fn review_workspace() -> (Workspace, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = workspace(
        &["/bin/sh", "-c", &script(dir.path())],
        &["true"],
        "\n[conductor]\nreview_rounds = 3\n",
    );
    (ws, dir)
}

fn read(dir: &tempfile::TempDir, name: &str) -> Vec<String> {
    std::fs::read_to_string(dir.path().join(name))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_diff_rejected_twice_is_accepted_the_third_time_in_one_session_and_waits_for_go() {
    let (ws, dir) = review_workspace();
    ws.ok(&["add", "--title", "Alpha", "--gid", "R-1"]);
    ws.ok(&["go", "R-1"]);
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");

    // Three author rounds, one session; told the findings of rounds 1 and 2.
    let sessions = read(&dir, "sessions");
    assert_eq!(sessions.len(), 3, "{sessions:?} {stderr}");
    assert!(
        sessions.iter().all(|s| s == &sessions[0] && !s.is_empty()),
        "{sessions:?}"
    );
    // Rounds 2 and 3 were told the findings of the review before them.
    let prompt = |n: u32| {
        std::fs::read_to_string(dir.path().join(format!("prompt-{n}"))).unwrap_or_default()
    };
    assert!(!prompt(1).contains("Your patch had these problems"));
    for (n, round) in [(2, 1), (3, 2)] {
        let text = prompt(n);
        let told = text
            .split(&format!(
                "Your patch had these problems (review round {round} of 3)"
            ))
            .nth(1)
            .unwrap_or_else(|| panic!("author prompt {n} carries review {round}: {text}"));
        assert!(told.contains(&format!("round {round}: say more")), "{text}");
    }
    assert_eq!(read(&dir, "reviews"), ["3"]);
    let shown = ws.json(&["show", "R-1", "--json"]);
    let rounds: Vec<String> = shown["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|m| m["kind"] == "review_round")
        .filter_map(|m| m["line"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        rounds,
        [
            "[STATUS:review_round] round=1 verdict=changes_requested 1 finding(s)",
            "[STATUS:review_round] round=2 verdict=changes_requested 1 finding(s)",
            "[STATUS:review_round] round=3 verdict=accepted 0 finding(s)",
        ],
        "{shown}"
    );

    // The owner's table escalates integration: the run waits, holding no worker.
    assert_eq!(shown["task"]["status"], "in_progress");
    let waiting = ws.json(&["escalations", "--json"]);
    assert_eq!(waiting[0]["action"], "integrate", "{waiting}");
    let said = ws.ok(&["go", "R-1"]);
    assert!(said.contains("approve recorded"), "{said}");
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = ws.json(&["show", "R-1", "--json"]);
    assert_eq!(shown["task"]["status"], "done", "{shown}");
    assert_eq!(shown["runs"][0]["state"], "complete");
    assert_eq!(read(&dir, "sessions").len(), 3, "no worker after the go");
    let branch = shown["runs"][0]["branch_name"].as_str().expect("branch");
    let alpha = crate::support::git(
        &ws.path().join("repo"),
        &["show", &format!("{branch}:alpha.txt")],
    );
    assert_eq!(
        alpha, "more\nmore\nmore",
        "the reviewer's edits were thrown away"
    );
    let files = crate::support::git(&ws.path().join("repo"), &["ls-tree", "--name-only", branch]);
    assert!(!files.contains("reviewer_edit.txt"), "{files}");
}

#[test]
fn where_the_contract_approves_integration_the_run_completes_without_the_owner() {
    let (ws, dir) = review_workspace();
    let policy = ws.path().join("roles/conductor-policy.json");
    let text = std::fs::read_to_string(&policy).expect("init wrote the conductor contract");
    let auto = text.replace(
        r#""action": "integrate", "decision": "escalate""#,
        r#""action": "integrate", "decision": "approve""#,
    );
    assert_ne!(auto, text, "the integrate rule was found");
    std::fs::write(&policy, auto).expect("write");
    ws.ok(&["add", "--title", "Alpha", "--gid", "R-2"]);
    ws.ok(&["go", "R-2"]);
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = ws.json(&["show", "R-2", "--json"]);
    assert_eq!(shown["task"]["status"], "done", "{shown}");
    assert_eq!(read(&dir, "reviews"), ["3"]);
    assert!(ws
        .json(&["escalations", "--json"])
        .as_array()
        .is_some_and(Vec::is_empty));
}

//! The conductor end to end, through the binary with a scripted planner and workers: a goal
//! split into three subtasks (B after A) runs A and C side by side, B only after A and on
//! top of A's work, and completes when all three have; a subtask that fails every retry is
//! split smaller and the smaller ones complete; the depth cap stops the splitting.

use std::path::Path;

use serde_json::Value;

use crate::runner::workspace;
use crate::support::Workspace;

/// The planner writes its plan (a second, smaller one when told why it splits again); the
/// workers log their start and end, leave a file behind, and end done — except the one for
/// "Stubborn piece", which always fails, and "Part beta", which needs alpha's file.
fn script(log: &Path) -> String {
    let log = log.display();
    format!(
        r#"prompt=$(cat); log='{log}'
has() {{ printf '%s' "$prompt" | grep -q "$1"; }}
if has 'Plan a task as subtasks'; then
  if has 'Why it is split' && has 'Hopeless goal'; then
    printf '%s' '{{}}' > .executor-plan.json
  elif has 'Why it is split'; then
    printf '%s' '{{"subtasks":[{{"key":"s1","title":"Small piece one"}},{{"key":"s2","title":"Small piece two","depends_on":["s1"]}}]}}' > .executor-plan.json
  elif has 'Hopeless goal'; then
    printf '%s' '{{"subtasks":[{{"key":"H","title":"Stubborn piece"}}]}}' > .executor-plan.json
  elif has 'Dependent goal'; then
    printf '%s' '{{"subtasks":[{{"key":"H","title":"Stubborn piece"}},{{"key":"B","title":"Part after","depends_on":["H"]}}]}}' > .executor-plan.json
  elif has 'Asking goal' && ! has 'The owner answered your escalation'; then
    echo '[ESCALATE:unclear] which part first?'; exit 0
  elif has 'Asking goal'; then
    printf '%s' '{{"subtasks":[{{"key":"A","title":"Part alpha"}}]}}' > .executor-plan.json
  elif has 'Guarded goal'; then
    printf '%s' '{{"subtasks":[{{"key":"G","title":"Guarded piece"}}]}}' > .executor-plan.json
  elif has 'Shaky goal'; then
    printf '%s' '{{"subtasks":[{{"key":"A","title":"Part alpha"}},{{"key":"H","title":"Stubborn piece"}}]}}' > .executor-plan.json
  else
    printf '%s' '{{"subtasks":[{{"key":"A","title":"Part alpha","files":["alpha.txt"],"acceptance":["alpha.txt exists"]}},{{"key":"B","title":"Part beta","depends_on":["A"]}},{{"key":"C","title":"Part gamma"}}]}}' > .executor-plan.json
  fi
  echo '[DONE:decomposed] planned'; exit 0
fi
if has 'Guarded piece'; then
  touch .child_marker
  if has 'the suites failed there'; then rm -f bad.txt; echo fixed > guarded.txt; else echo bad > bad.txt; fi
  echo '[DONE:implemented] guarded'; exit 0
fi
if has 'Part after'; then
  if [ -f Small_piece_one.txt ] && [ -f Small_piece_two.txt ]; then echo after > after.txt; echo '[DONE:implemented] after'; exit 0; fi
  echo 'the split piece is missing'; exit 1
fi
for name in 'Part alpha' 'Part beta' 'Part gamma' 'Stubborn piece' 'Small piece one' 'Small piece two'; do
  if has "$name"; then me=$name; fi
done
echo "start $me $(date +%s%N)" >> "$log"
sleep 0.3
if [ "$me" = 'Stubborn piece' ]; then echo "end $me $(date +%s%N)" >> "$log"; exit 1; fi
if [ "$me" = 'Part beta' ] && [ ! -f Part_alpha.txt ]; then echo "end $me $(date +%s%N)" >> "$log"; echo 'Part_alpha.txt is missing'; exit 1; fi
echo "$me" > "$(printf '%s' "$me" | tr ' ' _).txt"
echo "end $me $(date +%s%N)" >> "$log"
echo "[DONE:implemented] $me""#
    )
}

fn conductor_workspace(extra: &str) -> (Workspace, tempfile::TempDir) {
    verified_workspace(&[], extra)
}

fn verified_workspace(verify: &[&str], extra: &str) -> (Workspace, tempfile::TempDir) {
    let logs = tempfile::tempdir().expect("temp dir");
    let script = script(&logs.path().join("workers.log"));
    let ws = workspace(
        &["/bin/sh", "-c", &script],
        verify,
        &format!("max_workers = 2\nmax_worker_attempts = 2\n{extra}"),
    );
    (ws, logs)
}

/// A workspace (see [`conductor_workspace`]) whose goal `title` (`gid`) went through one
/// `run --once`, which succeeded; its stderr.
fn run_goal(extra: &str, title: &str, gid: &str) -> (Workspace, tempfile::TempDir, String) {
    let (ws, logs) = conductor_workspace(extra);
    ws.ok(&["add", "--title", title, "--gid", gid, "--goal"]);
    ws.ok(&["go", gid]);
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (ws, logs, stderr)
}

/// The goal `gid`'s branch and the files on it.
fn goal_branch_files(ws: &Workspace, gid: &str) -> (String, String) {
    let branch = ws.json(&["show", gid, "--json"])["runs"][0]["branch_name"]
        .as_str()
        .expect("the goal's branch")
        .to_string();
    let files = crate::support::git(
        &ws.path().join("repo"),
        &["ls-tree", "--name-only", &branch],
    );
    (branch, files)
}

/// (name, start ns, end ns) of every worker, from the log.
fn intervals(logs: &tempfile::TempDir) -> Vec<(String, u128, u128)> {
    let text = std::fs::read_to_string(logs.path().join("workers.log")).unwrap_or_default();
    let mut starts: Vec<(String, u128)> = Vec::new();
    let mut done = Vec::new();
    for line in text.lines() {
        let mut parts = line.rsplitn(2, ' ');
        let (Some(at), Some(rest)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(at) = at.parse::<u128>() else { continue };
        if let Some(name) = rest.strip_prefix("start ") {
            starts.push((name.to_string(), at));
        } else if let Some(name) = rest.strip_prefix("end ") {
            if let Some(i) = starts.iter().position(|(n, _)| n == name) {
                let (name, start) = starts.remove(i);
                done.push((name, start, at));
            }
        }
    }
    done
}

fn status(ws: &Workspace, gid: &str) -> String {
    ws.json(&["show", gid, "--json"])["task"]["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_goal_is_split_into_three_subtasks_that_run_in_dependency_order_and_complete_it() {
    let (ws, logs) = conductor_workspace("");
    ws.ok(&[
        "add",
        "--title",
        "Build the feature",
        "--gid",
        "G-1",
        "--goal",
    ]);
    ws.ok(&["go", "G-1"]);
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");

    for gid in ["G-1", "G-1.a", "G-1.b", "G-1.c"] {
        assert_eq!(status(&ws, gid), "done", "{gid}: {stderr}");
    }
    let tree = ws.json(&["tree", "G-1", "--json"]);
    let children = tree["children"].as_array().cloned().unwrap_or_default();
    let keys: Vec<&str> = children.iter().filter_map(|c| c["key"].as_str()).collect();
    assert_eq!(keys, ["A", "B", "C"], "{tree}");
    assert_eq!(children[1]["depends_on"], serde_json::json!(["G-1.a"]));
    assert_eq!(tree["run_state"], "complete");
    let printed = ws.ok(&["tree", "G-1"]);
    assert!(
        printed.starts_with("G-1  Build the feature  [done, run complete]"),
        "{printed}"
    );
    assert!(
        printed.contains("├─ G-1.a  Part alpha  [done, run complete]"),
        "{printed}"
    );
    assert!(
        printed.contains("└─ G-1.c  Part gamma  [done, run complete]"),
        "{printed}"
    );

    // B started only after A ended; never more than two workers at once; A and C were
    // running side by side.
    let ran = intervals(&logs);
    let find = |name: &str| {
        ran.iter()
            .find(|(n, _, _)| n == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} never ran: {ran:?}"))
    };
    let (a, b, c) = (find("Part alpha"), find("Part beta"), find("Part gamma"));
    assert!(b.1 >= a.2, "B started before A ended: {ran:?}");
    assert!(a.1 < c.2 && c.1 < a.2, "A and C overlapped: {ran:?}");
    for (name, start, _) in &ran {
        let running = ran
            .iter()
            .filter(|(_, s, e)| s <= start && start < e)
            .count();
        assert!(
            running <= 2,
            "{running} workers at once when {name} started: {ran:?}"
        );
    }

    // The parent's branch holds every subtask's work, B on top of A's.
    let (branch, files) = goal_branch_files(&ws, "G-1");
    for file in ["Part_alpha.txt", "Part_beta.txt", "Part_gamma.txt"] {
        assert!(files.contains(file), "{file} on {branch}: {files}");
    }
}

#[test]
fn a_subtask_that_always_fails_is_split_smaller_and_the_smaller_ones_complete() {
    let (ws, logs, stderr) = run_goal("", "Shaky goal", "G-2");
    assert_eq!(status(&ws, "G-2.h"), "done", "{stderr}");
    assert_eq!(status(&ws, "G-2"), "done", "{stderr}");
    let tree = ws.json(&["tree", "G-2", "--json"]);
    let stubborn = &tree["children"][1];
    assert_eq!(stubborn["task_gid"], "G-2.h");
    let smaller: Vec<&str> = stubborn["children"]
        .as_array()
        .map(|c| c.iter().filter_map(|n| n["task_gid"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(smaller, ["G-2.h.s1", "G-2.h.s2"], "{tree}");
    assert_eq!(stubborn["children"][0]["depth"], 2);
    let failures = intervals(&logs)
        .iter()
        .filter(|(n, _, _)| n == "Stubborn piece")
        .count();
    assert_eq!(failures, 2, "tried max_worker_attempts times, then split");
}

#[test]
fn the_depth_cap_stops_the_splitting_and_the_owner_is_told() {
    let (ws, _logs, stderr) = run_goal("\n[conductor]\nmax_depth = 1\n", "Shaky goal", "G-3");
    let shown = ws.json(&["show", "G-3", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "abandoned", "{shown}");
    assert!(
        stderr.contains("subtask `G-3.h` failed every retry at the depth cap (1)"),
        "{stderr}"
    );
    let tree: Value = ws.json(&["tree", "G-3", "--json"]);
    assert_eq!(
        tree["children"][1]["children"],
        serde_json::json!([]),
        "not split: {tree}"
    );
    assert_eq!(status(&ws, "G-3.a"), "done");
}

#[test]
fn a_merge_into_the_parent_that_fails_the_suites_is_undone_and_the_worker_fixes_it() {
    // The suite fails wherever bad.txt is, except in the subtask's own worktree (marked by
    // an ignored file): it passes there, and fails once merged into the parent's branch.
    let (ws, _logs) = verified_workspace(
        &["sh", "-c", "test ! -f bad.txt || test -f .child_marker"],
        "",
    );
    let exclude = ws.path().join("repo/.git/info/exclude");
    std::fs::create_dir_all(exclude.parent().expect("info")).expect("mkdir");
    std::fs::write(&exclude, ".child_marker\n").expect("exclude");
    ws.ok(&["add", "--title", "Guarded goal", "--gid", "G-4", "--goal"]);
    ws.ok(&["go", "G-4"]);
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("the suites failed after merging into the parent's branch"),
        "{stderr}"
    );
    assert_eq!(status(&ws, "G-4.g"), "done", "{stderr}");
    assert_eq!(status(&ws, "G-4"), "done", "{stderr}");
    let (_, files) = goal_branch_files(&ws, "G-4");
    assert!(files.contains("guarded.txt"), "{files}");
    assert!(
        !files.contains("bad.txt"),
        "the failing merge was undone: {files}"
    );
}

#[test]
fn a_planner_that_asks_the_owner_plans_with_the_answer() {
    let (ws, _logs) = conductor_workspace("");
    ws.ok(&["add", "--title", "Asking goal", "--gid", "G-5", "--goal"]);
    ws.ok(&["go", "G-5"]);
    ws.ok(&["run", "--once"]);
    let listed = ws.json(&["escalations", "--json"]);
    let id = listed[0]["id"].as_i64().expect("the planner's question");
    assert_eq!(listed[0]["action"], "unclear");
    ws.ok(&[
        "decide",
        &id.to_string(),
        "approve",
        "--note",
        "alpha first",
    ]);
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The planner (not a worker doing the whole goal) took the answer and planned.
    assert_eq!(status(&ws, "G-5.a"), "done", "{stderr}");
    assert_eq!(status(&ws, "G-5"), "done", "{stderr}");
}

#[test]
fn a_split_whose_planner_fails_gives_up_instead_of_splitting_again() {
    let (ws, _logs, stderr) = run_goal("\n[conductor]\nmax_depth = 3\n", "Hopeless goal", "G-6");
    let shown = ws.json(&["show", "G-6", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "abandoned", "{stderr}");
    // Split once (its planner failed twice), never again.
    let h_runs = ws.json(&["show", "G-6.h", "--json"])["runs"]
        .as_array()
        .map(Vec::len)
        .unwrap_or_default();
    assert_eq!(h_runs, 2, "one worker run, one split attempt: {stderr}");
    assert_eq!(
        ws.json(&["tree", "G-6", "--json"])["children"][0]["children"],
        serde_json::json!([])
    );
}

#[test]
fn a_subtask_that_depends_on_a_split_one_starts_from_its_merged_work() {
    let (ws, _logs, stderr) = run_goal("", "Dependent goal", "G-7");
    assert_eq!(
        status(&ws, "G-7.b"),
        "done",
        "B found the split piece's files: {stderr}"
    );
    assert_eq!(status(&ws, "G-7"), "done", "{stderr}");
    let (_, files) = goal_branch_files(&ws, "G-7");
    for file in ["Small_piece_one.txt", "Small_piece_two.txt", "after.txt"] {
        assert!(files.contains(file), "{file}: {files}");
    }
}

#[test]
fn a_parent_that_gives_up_skips_the_subtasks_that_had_not_started() {
    let (ws, _logs, stderr) = run_goal("\n[conductor]\nmax_depth = 1\n", "Dependent goal", "G-8");
    assert_eq!(
        ws.json(&["show", "G-8", "--json"])["runs"][0]["state"],
        "abandoned",
        "{stderr}"
    );
    assert_eq!(
        status(&ws, "G-8.b"),
        "skip",
        "B waited for H and will not start: {stderr}"
    );
    assert!(
        ws.json(&["show", "G-8.b", "--json"])["runs"]
            .as_array()
            .is_some_and(Vec::is_empty),
        "B never ran"
    );
}

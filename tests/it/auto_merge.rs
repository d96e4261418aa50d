//! Auto-merge end to end on the fake GitHub (`[forge] auto_merge`): a complete run's PR is
//! merged by executor once it is ready, green, reviewed and approved by someone else, once;
//! until then the owner is told once per head what holds it; a merge whose answer is lost
//! is never sent for a merged PR again.

use crate::fake_github::{Ci, FakeGithub, Fault, FIRST_HEAD, OWNER, PR};
use crate::github_runs::github_workspace;
use crate::support::Workspace;

const AUTO_MERGE: &str = "auto_merge = { enabled = true, method = \"squash\" }\n";
const HELD: &str = "auto-merge is holding this PR";

/// A workspace whose run `M-1` is complete on a draft PR with green CI on [`FIRST_HEAD`].
fn complete_run(github: &FakeGithub) -> Workspace {
    github.set_ci(FIRST_HEAD, Ci::Success);
    let ws = github_workspace(github, AUTO_MERGE);
    ws.ok(&["add", "--title", "Fix tab preview", "--gid", "M-1"]);
    ws.ok(&["go", "M-1"]);
    for _ in 0..4 {
        pass(&ws);
        if state(&ws) == "complete" {
            return ws;
        }
    }
    panic!("the run did not complete: {}", ws.ok(&["show", "M-1"]));
}

fn pass(ws: &Workspace) -> String {
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

fn state(ws: &Workspace) -> String {
    ws.json(&["show", "M-1", "--json"])["runs"][0]["state"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The comments on the PR that tell the owner auto-merge holds it.
fn held_notes(github: &FakeGithub) -> Vec<String> {
    github
        .issue_comments(PR)
        .iter()
        .filter_map(|c| c["body"].as_str())
        .filter(|b| b.contains(HELD))
        .map(String::from)
        .collect()
}

#[test]
fn a_ready_green_approved_pr_is_merged_once_and_its_branch_deleted() {
    let github = FakeGithub::start_empty();
    let ws = complete_run(&github);
    // Complete, but a draft nobody approved: held, and the owner is told why, once.
    pass(&ws);
    pass(&ws);
    let notes = held_notes(&github);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains(&format!("@{OWNER}")), "{}", notes[0]);
    assert!(notes[0].contains("draft"), "{}", notes[0]);
    assert!(notes[0].contains("nobody but its author"), "{}", notes[0]);
    assert!(github.merges().is_empty());

    github.set_draft(PR, false);
    github.review_as(PR, "tkowalczyk", "APPROVED");
    pass(&ws);
    assert_eq!(
        github.merges(),
        vec![(PR, FIRST_HEAD.to_string(), "squash".to_string())]
    );
    let branch = ws.json(&["show", "M-1", "--json"])["runs"][0]["branch_name"]
        .as_str()
        .expect("a branch")
        .to_string();
    assert_eq!(github.deleted_branches(), vec![branch]);
    pass(&ws);
    pass(&ws);
    assert_eq!(github.merges().len(), 1, "merged once");
    assert_eq!(github.count("PUT", "/merge"), 1);
    let shown = ws.json(&["show", "M-1", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "complete", "{shown}");
    assert_eq!(shown["task"]["status"], "done", "{shown}");
    assert_eq!(held_notes(&github).len(), 1);
}

#[test]
fn a_draft_unapproved_conflicting_or_red_pr_is_not_merged_and_the_owner_is_told_once() {
    let github = FakeGithub::start_empty();
    let ws = complete_run(&github);
    pass(&ws);
    // Ready, but nobody approved it.
    github.set_draft(PR, false);
    pass(&ws);
    // Approved by the PR's own author only (the owner's token opened it): no one else's.
    github.review_as(PR, "lumen-executor[bot]", "APPROVED");
    pass(&ws);
    // Approved, but it conflicts with its base.
    github.review_as(PR, "tkowalczyk", "APPROVED");
    github.set_mergeable(PR, false);
    pass(&ws);
    // Mergeable again, but CI turned red on the head.
    github.set_mergeable(PR, true);
    github.set_ci(FIRST_HEAD, Ci::Failed);
    pass(&ws);
    // A reviewer asks for changes after all, with CI green again.
    github.set_ci(FIRST_HEAD, Ci::Success);
    github.review_as(PR, "tkowalczyk", "CHANGES_REQUESTED");
    pass(&ws);
    assert!(github.merges().is_empty(), "{:?}", github.merges());
    assert_eq!(github.count("PUT", "/merge"), 0);
    assert_eq!(held_notes(&github).len(), 1, "told once for the head");
    assert_eq!(state(&ws), "complete");
}

#[test]
fn a_merge_whose_answer_is_lost_is_not_sent_again_for_the_merged_head() {
    let github = FakeGithub::start_empty();
    let ws = complete_run(&github);
    github.set_draft(PR, false);
    github.review_as(PR, "tkowalczyk", "APPROVED");
    // The first merge request never reaches GitHub; the second is carried out, and its
    // answer is lost (a 502 from in front of GitHub).
    // Either failure is the tick's (the run waits for the next one), and says so.
    let failing = |ws: &Workspace| {
        let out = ws.run(&["run", "--once"]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(stderr.contains("502"), "{stderr}");
    };
    github.fail_route("PUT", "/merge", 1, Fault::Status(502));
    failing(&ws);
    assert!(github.merges().is_empty());
    github.fail_route("PUT", "/merge", 1, Fault::AfterApplying(502));
    failing(&ws);
    assert_eq!(github.merges().len(), 1);
    // A new process (as after a crash) finds the merge kept but unanswered, and the PR
    // merged: nothing is sent again.
    pass(&ws);
    pass(&ws);
    assert_eq!(github.merges().len(), 1, "{:?}", github.merges());
    assert_eq!(github.count("PUT", "/merge"), 2);
    let shown = ws.json(&["show", "M-1", "--json"]);
    assert_eq!(shown["task"]["status"], "done", "{shown}");
}

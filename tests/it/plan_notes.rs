//! Plan notes as an owner writes them: a draft stays out of the queue until its
//! `status: draft` line goes, a run keeps the text it was given, and a done note edited
//! afterwards is listed by `status` with the command that runs it again.

use crate::support::Workspace;

#[test]
fn a_draft_note_waits_and_a_done_note_edited_later_is_offered_again() {
    let ws = Workspace::init();
    let draft = ws.plans().join("half.md");
    std::fs::write(
        &draft,
        "---\nstatus: draft\ngid: D-1\n---\n# Half an idea\n",
    )
    .expect("write");
    let note = ws.plans().join("fix.md");
    std::fs::write(
        &note,
        "---\ngid: T-1\n---\n# Fix the tab\n\nThe preview sticks.\n",
    )
    .expect("write");

    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("drafts") && stderr.contains("D-1"),
        "{stderr}"
    );
    let gids: Vec<String> = ws
        .queue()
        .iter()
        .filter_map(|t| t["task_gid"].as_str().map(str::to_string))
        .collect();
    assert_eq!(gids, ["T-1"], "the draft is not in the queue");

    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["task"]["status"], "done", "{stderr}");
    let given = "# Fix the tab\n\nThe preview sticks.";
    assert_eq!(shown["worked_on"]["task_text"], given);
    assert_eq!(shown["worked_on"]["changed_since"], false);
    let status = ws.json(&["status", "--json"]);
    assert_eq!(status["changed_since_run"], serde_json::json!([]));

    // The owner edits the done note: the run still shows what it worked on.
    std::fs::write(
        &note,
        "---\ngid: T-1\n---\n# Fix the tab\n\nAnd the tooltip.\n",
    )
    .expect("edit");
    ws.ok(&["run", "--once"]);
    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["task"]["status"], "done");
    assert_eq!(shown["worked_on"]["task_text"], given);
    assert_eq!(shown["worked_on"]["changed_since"], true);
    let human = ws.ok(&["show", "T-1"]);
    assert!(
        human.contains("worked on an earlier text") && human.contains("The preview sticks."),
        "{human}"
    );
    let status = ws.json(&["status", "--json"]);
    let changed = status["changed_since_run"].as_array().expect("a list");
    assert_eq!(changed.len(), 1, "{status}");
    assert_eq!(changed[0]["task_gid"], "T-1");
    assert_eq!(changed[0]["run_id"], shown["runs"][0]["id"]);
    let human = ws.ok(&["status"]);
    assert!(human.contains("`executor retry T-1`"), "{human}");

    // The command it names works, and the task is no longer listed once it runs again.
    ws.ok(&["retry", "T-1"]);
    ws.ok(&["run", "--once"]);
    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["task"]["status"], "done");
    assert_eq!(shown["worked_on"]["changed_since"], false);
    assert_eq!(
        shown["worked_on"]["task_text"],
        "# Fix the tab\n\nAnd the tooltip."
    );
    assert_eq!(
        ws.json(&["status", "--json"])["changed_since_run"],
        serde_json::json!([])
    );

    // Removing the draft line takes the note in.
    std::fs::write(&draft, "---\ngid: D-1\n---\n# Half an idea, finished\n").expect("write");
    ws.ok(&["run", "--once"]);
    assert!(
        ws.queue().iter().any(|t| t["task_gid"] == "D-1"),
        "the note is taken in once it is no draft"
    );
}

//! GitHub issues into the queue through the binary, against the fake GitHub: the labelled
//! issues of a repository taken in by `run --once` (others and pull requests left out), an
//! edit and a closing upstream reflected on the next poll, and a bad token reported while
//! the plans folder keeps working.

use executor::core::facts::TaskFacts;
use executor::store::sqlite::SqliteStore;
use executor::store::Store;

use crate::fake_github::{FakeGithub, OWNER, REPO, TOKEN};
use crate::support::Workspace;

fn issues_workspace(github: &FakeGithub, token: &str) -> Workspace {
    let mut ws = Workspace::init();
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    let config = config.replacen(
        "[forge]\n",
        &format!(
            "[forge]\napi_url = \"{}\"\ntoken_env = \"TEST_GITHUB_TOKEN\"\n",
            github.url()
        ),
        1,
    );
    ws.write_config(&format!(
        "{config}\n[sources.github_issues]\nrepositories = [\"{OWNER}/{REPO}\"]\nlabels = [\"executor\", \"agent-ok\"]\n"
    ));
    ws.env.push(("TEST_GITHUB_TOKEN".into(), token.into()));
    ws
}

fn facts(ws: &Workspace, gid: &str) -> TaskFacts {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = SqliteStore::open(&ws.path().join("executor.db"))
            .await
            .expect("open the store");
        let json = store
            .task_facts(gid)
            .await
            .expect("read facts")
            .unwrap_or_else(|| panic!("{gid} has no facts"));
        serde_json::from_str(&json).expect("facts read back")
    })
}

fn gid(number: u64) -> String {
    format!("gh:{OWNER}:{REPO}#{number}")
}

#[test]
fn labelled_issues_come_in_and_upstream_edits_and_closings_follow() {
    let github = FakeGithub::start_empty();
    let one = github.add_issue(
        "Tab preview sticks",
        "Steps: hover.",
        &["executor"],
        Some(OWNER),
    );
    let two = github.add_issue("Menu bar flicker", "", &["agent-ok", "bug"], None);
    let both = github.add_issue("Both labels", "Body.", &["executor", "agent-ok"], None);
    let other = github.add_issue("Not for agents", "Body.", &["bug"], None);
    let ws = issues_workspace(&github, TOKEN);

    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let source = format!("github:{OWNER}/{REPO}: 3 new");
    assert!(stderr.contains(&source), "{stderr}");
    let queue = ws.queue();
    let gids: Vec<&str> = queue
        .iter()
        .filter_map(|t| t["task_gid"].as_str())
        .collect();
    for number in [one, two, both] {
        assert!(gids.contains(&gid(number).as_str()), "{gids:?}");
    }
    assert!(!gids.contains(&gid(other).as_str()));
    let first = ws.json(&["show", &gid(one), "--json"]);
    assert_eq!(first["task"]["source"], "github");
    assert_eq!(first["task"]["status"], "pending");
    assert_eq!(
        first["task"]["description"],
        "# Tab preview sticks\n\nSteps: hover."
    );
    let seen = facts(&ws, &gid(one));
    assert_eq!(seen.labels, ["executor"]);
    assert_eq!(
        seen.assignee.as_deref(),
        Some(OWNER),
        "the login; its id is beside it"
    );
    assert!(!seen.closed);

    // An edit and a closing upstream come in on the next poll.
    github.edit_issue_body(one, "Steps: hover, then leave the strip.");
    github.close_issue(two);
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let shown = ws.json(&["show", &gid(one), "--json"]);
    assert_eq!(
        shown["task"]["description"],
        "# Tab preview sticks\n\nSteps: hover, then leave the strip."
    );
    assert!(facts(&ws, &gid(two)).closed, "closed upstream");
    assert_eq!(ws.queue().len(), 3, "nothing deleted");
}

#[test]
fn a_bad_github_token_is_reported_and_the_plans_folder_still_works() {
    let github = FakeGithub::start_empty();
    github.add_issue("Tab preview sticks", "", &["executor"], None);
    let ws = issues_workspace(&github, "not-the-token");
    std::fs::write(ws.plans().join("note.md"), "# A plan\n").expect("note");
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{stderr}");
    assert!(!stderr.contains("not-the-token"), "{stderr}");
    assert_eq!(ws.queue().len(), 1, "the plan note came in");
    let status = ws.ok(&["status"]);
    assert!(
        status.contains(&format!("github:{OWNER}/{REPO}")),
        "{status}"
    );
    assert!(status.contains("401"), "{status}");
}

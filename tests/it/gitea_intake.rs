//! Gitea issues into the queue through the binary, against the fake Gitea: the labelled
//! issues of a repository taken in by `run --once` (others and pull requests left out), an
//! edit and a closing upstream reflected on the next poll, and a bad token reported as an
//! intake error while the plans folder keeps working.

use executor::core::facts::TaskFacts;
use executor::store::sqlite::SqliteStore;
use executor::store::Store;

use crate::fake_gitea::{FakeGitea, Fault, IssueSeed, OWNER, REPO, TOKEN};
use crate::support::Workspace;

fn gitea_workspace(gitea: &FakeGitea, token: &str) -> Workspace {
    let mut ws = Workspace::init();
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!(
        "{config}\n[sources.gitea_issues]\napi_url = \"{}\"\ntoken_env = \"TEST_GITEA_TOKEN\"\nrepositories = [\"{OWNER}/{REPO}\"]\nlabels = [\"executor\", \"agent-ok\"]\n",
        gitea.url()
    ));
    ws.env.push(("TEST_GITEA_TOKEN".into(), token.into()));
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
    format!("gitea:{OWNER}:{REPO}#{number}")
}

#[test]
fn labelled_gitea_issues_come_in_and_upstream_edits_and_closings_follow() {
    let gitea = FakeGitea::start();
    let one = gitea.add_issue_in(
        OWNER,
        REPO,
        IssueSeed::new("Tab preview sticks", "Steps: hover.", &["executor"]).assignee(OWNER),
    );
    let two = gitea.add_issue("Menu bar flicker", "", &["agent-ok", "bug"]);
    let both = gitea.add_issue("Both labels", "Body.", &["executor", "agent-ok"]);
    let other = gitea.add_issue("Not for agents", "Body.", &["bug"]);
    let pull = gitea.add_issue_in(
        OWNER,
        REPO,
        IssueSeed::new("Fix the strip", "", &["executor"]).pull(),
    );
    let ws = gitea_workspace(&gitea, TOKEN);

    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("gitea:{OWNER}/{REPO}: 3 new")),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN), "{stderr}");
    let queue = ws.queue();
    let gids: Vec<&str> = queue
        .iter()
        .filter_map(|t| t["task_gid"].as_str())
        .collect();
    for number in [one, two, both] {
        assert!(gids.contains(&gid(number).as_str()), "{gids:?}");
    }
    for number in [other, pull] {
        assert!(!gids.contains(&gid(number).as_str()), "{gids:?}");
    }
    let first = ws.json(&["show", &gid(one), "--json"]);
    assert_eq!(first["task"]["source"], "gitea");
    assert_eq!(first["task"]["status"], "pending");
    assert_eq!(
        first["task"]["description"],
        "# Tab preview sticks\n\nSteps: hover."
    );
    let seen = facts(&ws, &gid(one));
    assert_eq!(seen.labels, ["executor"]);
    assert_eq!(seen.assignee.as_deref(), Some(OWNER));
    assert_eq!(seen.assignee_id.as_deref(), Some("3"));
    assert_eq!(seen.location.as_deref(), Some("mkowalski/lumen-browser"));
    assert_eq!(
        seen.url,
        Some(format!(
            "{}/{OWNER}/{REPO}/issues/{one}",
            gitea.url().origin().ascii_serialization()
        ))
    );
    assert!(!seen.closed);

    // An edit and a closing upstream come in on the next poll.
    gitea.edit_body(one, "Steps: hover, then leave the strip.");
    gitea.close(two);
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
    // The second poll asked only for what changed.
    let last = gitea.requests().pop().expect("a request");
    assert_eq!(last.param("state").as_deref(), Some("all"));
    assert!(last.param("since").is_some(), "{}", last.query);
}

#[test]
fn an_issue_closed_before_it_was_ever_seen_never_enters_the_queue() {
    let gitea = FakeGitea::start();
    let open = gitea.add_issue("Tab preview sticks", "Steps.", &["executor"]);
    let closed = gitea.add_issue("Done before we looked", "Old.", &["executor"]);
    gitea.close(closed);
    let ws = gitea_workspace(&gitea, TOKEN);
    let run = |ws: &Workspace| {
        let out = ws.run(&["run", "--once"]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        stderr
    };
    let gids = |ws: &Workspace| -> Vec<String> {
        ws.queue()
            .iter()
            .filter_map(|t| t["task_gid"].as_str().map(str::to_owned))
            .collect()
    };
    run(&ws);
    assert_eq!(gids(&ws), [gid(open)]);

    // Touched later, still closed: a read of closed and open changes brings it, and it
    // stays out; the poll says so.
    gitea.edit_body(closed, "Old, with a late note.");
    let stderr = run(&ws);
    assert!(
        stderr.contains("1 closed before first seen (left out)"),
        "{stderr}"
    );
    assert_eq!(gids(&ws), [gid(open)], "the closed issue was queued");
    let last = gitea.requests().pop().expect("a request");
    assert_eq!(last.param("state").as_deref(), Some("all"));

    // One closed after it came in is skipped before any run, as before.
    gitea.close(open);
    let stderr = run(&ws);
    assert!(stderr.contains("1 closed upstream (skipped)"), "{stderr}");
    let shown = ws.json(&["show", &gid(open), "--json"]);
    assert_eq!(shown["task"]["status"], "skip", "{shown}");
}

#[test]
fn a_bad_gitea_token_is_an_intake_error_and_the_plans_folder_still_works() {
    let gitea = FakeGitea::start();
    gitea.add_issue("Tab preview sticks", "", &["executor"]);
    let ws = gitea_workspace(&gitea, "not-the-token");
    std::fs::write(ws.plans().join("note.md"), "# A plan\n").expect("note");
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{stderr}");
    assert!(!stderr.contains("not-the-token"), "{stderr}");
    assert_eq!(ws.queue().len(), 1, "the plan note came in");
    let status = ws.ok(&["status"]);
    assert!(
        status.contains(&format!("gitea:{OWNER}/{REPO}")),
        "{status}"
    );
    assert!(status.contains("401"), "{status}");
    assert!(status.contains("token is required"), "{status}");
    assert!(!status.contains("not-the-token"), "{status}");
    assert!(gitea.requests().iter().all(|r| r.status == 401));
}

#[test]
fn a_missing_gitea_token_stops_the_run_naming_the_variable() {
    let gitea = FakeGitea::start();
    let mut ws = gitea_workspace(&gitea, TOKEN);
    ws.env.clear();
    let stderr = ws.fails_with(2, &["run", "--once"]);
    assert!(stderr.contains("TEST_GITEA_TOKEN"), "{stderr}");
    assert!(gitea.requests().is_empty());
}

#[test]
fn a_run_once_inside_a_stored_retry_after_sends_nothing_to_gitea_and_a_later_one_takes_the_issues_in(
) {
    let gitea = FakeGitea::start();
    gitea.add_issue("Tab preview sticks", "", &["executor"]);
    let ws = gitea_workspace(&gitea, TOKEN);
    gitea.fail_next(1, Fault::RateLimited { retry_after: 10 });

    let limited_at = std::time::Instant::now();
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "a wait asked for is no failure: {stderr}"
    );
    assert!(stderr.contains("skipped"), "{stderr}");
    assert!(ws.queue().is_empty(), "nothing read yet");
    let sent = gitea.requests().len();
    assert_eq!(gitea.requests()[sent - 1].status, 429);

    // A second process, started inside the wait: it learns the wait from the store and
    // sends nothing.
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("skipped"), "{stderr}");
    assert_eq!(
        gitea.requests().len(),
        sent,
        "a run --once inside the stored wait called Gitea: {:?}",
        gitea.requests().last()
    );

    // Past the wait, the issue comes in.
    let over = limited_at + std::time::Duration::from_secs(11);
    std::thread::sleep(over.saturating_duration_since(std::time::Instant::now()));
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("gitea:{OWNER}/{REPO}: 1 new")),
        "{stderr}"
    );
    assert_eq!(ws.queue().len(), 1);
}

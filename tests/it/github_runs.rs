//! The GitHub forge from the runner's side: a worker's finished change is committed by the
//! orchestrator, pushed to the repository's remote and opened as a labelled draft PR on
//! (the fake) GitHub, and the run moves to `pr`. The token stays with the orchestrator.

use crate::fake_github::{FakeGithub, OWNER, PR, REPO, TOKEN};
use crate::runner::{workspace, EXAMPLE_WORKER};
use crate::support::git;

#[test]
fn a_finished_run_is_pushed_and_opened_as_a_labelled_draft_pr() {
    let github = FakeGithub::start_empty();
    // The worker writes down the environment it was given.
    let worker = format!("env > worker-env.txt; exec {EXAMPLE_WORKER}");
    let mut ws = workspace(&["/bin/sh", "-c", &worker], &[], "");
    let remote = ws.path().join("remote.git");
    git(
        ws.path(),
        &["init", "-q", "--bare", remote.to_str().expect("utf-8 path")],
    );
    git(
        &ws.path().join("repo"),
        &[
            "remote",
            "add",
            "origin",
            remote.to_str().expect("utf-8 path"),
        ],
    );
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    let config = config.replacen(
        "[forge]\n",
        &format!(
            "[forge]\nkind = \"github\"\ngithub_repository = \"{OWNER}/{REPO}\"\napi_url = \"{}\"\ntoken_env = \"TEST_GITHUB_TOKEN\"\nrequired_labels = [\"executor\", \"ai-generated\"]\n",
            github.url()
        ),
        1,
    );
    ws.write_config(&config);
    ws.env.push(("TEST_GITHUB_TOKEN".into(), TOKEN.into()));
    ws.ok(&[
        "add",
        "--title",
        "Fix tab preview",
        "--gid",
        "G-1",
        "--description",
        "The preview sticks.",
    ]);
    ws.ok(&["go", "G-1"]);

    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains(TOKEN), "the token is never logged");

    let shown = ws.json(&["show", "G-1", "--json"]);
    let run = &shown["runs"][0];
    assert_eq!(run["state"], "pr", "{stderr}");
    assert_eq!(run["pr_number"], PR);
    assert_eq!(shown["task"]["status"], "in_progress");
    let branch = run["branch_name"].as_str().expect("a branch");

    // The branch is on the remote, with the orchestrator's commit of the worker's change.
    let pushed = git(&remote, &["log", "-1", "--format=%s", branch]);
    assert!(pushed.contains("Fix tab preview"), "{pushed}");
    git(
        &remote,
        &["cat-file", "-e", &format!("{branch}:EXECUTOR_EXAMPLE.md")],
    );

    // A draft PR with the task's title and body, and the labels.
    let pr = github.pr(PR).expect("the PR");
    assert_eq!(pr["draft"], true);
    assert_eq!(pr["title"], "Fix tab preview");
    assert_eq!(pr["head"]["ref"], branch, "{pr}");
    assert!(
        pr["body"]
            .as_str()
            .unwrap_or("")
            .contains("The preview sticks."),
        "{pr}"
    );
    assert_eq!(github.labels(PR), ["executor", "ai-generated"]);

    // The token reached GitHub only as the Authorization header, and no worker.
    for request in github.requests() {
        assert!(!request.body.contains(TOKEN) && !request.path.contains(TOKEN));
    }
    let worktree = run["worktree_path"].as_str().expect("a worktree");
    let env = std::fs::read_to_string(std::path::Path::new(worktree).join("worker-env.txt"))
        .unwrap_or_default();
    let committed = git(&remote, &["show", &format!("{branch}:worker-env.txt")]);
    for seen in [env, committed] {
        assert!(!seen.contains(TOKEN), "the worker never sees the token");
        assert!(!seen.contains("TEST_GITHUB_TOKEN"));
    }
    let bytes = std::fs::read(ws.path().join("executor.db")).expect("read the database");
    assert!(
        !String::from_utf8_lossy(&bytes).contains(TOKEN),
        "the token is in no database row"
    );
}

#[test]
fn without_its_token_the_github_runner_does_not_start() {
    let github = FakeGithub::start_empty();
    let ws = workspace(&[EXAMPLE_WORKER], &[], "");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replacen(
        "[forge]\n",
        &format!(
            "[forge]\nkind = \"github\"\ngithub_repository = \"{OWNER}/{REPO}\"\napi_url = \"{}\"\ntoken_env = \"UNSET_TEST_GITHUB_TOKEN\"\n",
            github.url()
        ),
        1,
    ));
    let err = ws.fails_with(2, &["run", "--once"]);
    assert!(err.contains("UNSET_TEST_GITHUB_TOKEN"), "{err}");
}

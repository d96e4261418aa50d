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
    let ws = github_workspace_with(
        &github,
        &worker,
        "required_labels = [\"executor\", \"ai-generated\"]\n",
    );
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
    let remote = ws.path().join("remote.git");
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

/// A workspace on the GitHub forge (the fake at `github`), with a bare repository as the
/// remote and a worker that answers each phase's prompt, keeping each prompt in
/// `prompts-seen/`; `forge_extra` adds lines to `[forge]`.
fn github_workspace(github: &FakeGithub, forge_extra: &str) -> crate::support::Workspace {
    let kept = "prompts-seen";
    let worker = format!(
        "prompt=$(cat); mkdir -p ../../{kept}; \
         case \"$prompt\" in \
           *'# Make CI green'*) printf '%s' \"$prompt\" > ../../{kept}/fix_ci.md; \
              echo fixed >> ci-fix.txt; echo '[DONE:ci_fixed] fixed the UI test';; \
           *'# Address review comments'*) printf '%s' \"$prompt\" > ../../{kept}/fix_comments.md; \
              echo addressed >> comments.txt; \
              t=$(printf '%s' \"$prompt\" | grep -o 'PRRT_[A-Za-z0-9_-]*' | head -n 1); \
              echo \"[STATUS:thread_acknowledged] thread=$t reason=\\\"out of scope\\\" not for this task\"; \
              echo '[DONE:comments_addressed] answered the thread';; \
           *'# Review a pull request'*) printf '%s' \"$prompt\" > ../../{kept}/review.md; \
              echo '[DONE:review_green] a clean change';; \
           *) echo hello > greeting.txt; echo '[DONE:implemented] wrote the greeting';; \
         esac"
    );
    github_workspace_with(github, &worker, forge_extra)
}

/// A workspace on the GitHub forge (the fake at `github`) running `worker` (a shell
/// script), with a bare repository as the remote and the fake's token in the environment.
fn github_workspace_with(
    github: &FakeGithub,
    worker: &str,
    forge_extra: &str,
) -> crate::support::Workspace {
    let mut ws = workspace(&["/bin/sh", "-c", worker], &[], "");
    let remote = ws.path().join("remote.git");
    let remote_path = remote.to_str().expect("utf-8 path");
    git(ws.path(), &["init", "-q", "--bare", remote_path]);
    git(
        &ws.path().join("repo"),
        &["remote", "add", "origin", remote_path],
    );
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replacen(
        "[forge]\n",
        &format!(
            "[forge]\nkind = \"github\"\ngithub_repository = \"{OWNER}/{REPO}\"\napi_url = \"{}\"\ntoken_env = \"TEST_GITHUB_TOKEN\"\n{forge_extra}",
            github.url()
        ),
        1,
    ));
    ws.env.push(("TEST_GITHUB_TOKEN".into(), TOKEN.into()));
    ws
}

#[test]
fn a_pr_goes_from_red_ci_through_fix_ci_and_review_to_complete_with_the_owner_told() {
    use crate::fake_github::{FIRST_HEAD, FIX_HEAD};
    let github = FakeGithub::start_empty();
    let ws = github_workspace(&github, "");
    ws.ok(&["add", "--title", "Fix tab preview", "--gid", "G-2"]);
    ws.ok(&["go", "G-2"]);
    let run_once = || {
        let out = ws.run(&["run", "--once"]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        stderr
    };
    let run = || ws.json(&["show", "G-2", "--json"])["runs"][0].clone();

    // The draft PR is opened on the head whose CI (the fixtures') failed; the same pass's
    // look at it starts a fix_ci worker with the failed checks, the failing step and the
    // log excerpt, and its fix is committed and pushed.
    let stderr = run_once();
    assert_eq!(run()["state"], "pr", "{stderr}");
    assert_eq!(github.pr(PR).expect("the PR")["head"]["sha"], FIRST_HEAD);
    let fix_ci = std::fs::read_to_string(ws.path().join("prompts-seen/fix_ci.md"))
        .unwrap_or_else(|e| panic!("no fix_ci worker ran ({e}): {stderr}"));
    for expected in ["ui-tests", "Run macOS UI Tests CI", "** TEST FAILED **"] {
        assert!(
            fix_ci.contains(expected),
            "{expected} not in the fix_ci prompt:\n{fix_ci}"
        );
    }
    assert!(!fix_ci.contains(TOKEN), "the token is in no prompt");
    assert_eq!(run()["ci_attempts"], 1);
    let branch = run()["branch_name"].as_str().expect("a branch").to_string();
    let remote = ws.path().join("remote.git");
    git(
        &remote,
        &["cat-file", "-e", &format!("{branch}:ci-fix.txt")],
    );

    // CI green on the fix, no threads: the review worker; its verdict is posted.
    github.set_pr_head(PR, FIX_HEAD);
    run_once();
    assert!(
        ws.path().join("prompts-seen/review.md").exists(),
        "a review worker ran"
    );
    let reviews = github.reviews();
    assert_eq!(reviews.len(), 1, "{reviews:?}");

    // Green, reviewed, nothing unresolved: complete, and the owner is @mentioned.
    run_once();
    let shown = ws.json(&["show", "G-2", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "complete", "{shown}");
    assert_eq!(shown["task"]["status"], "done");
    let comments = github.issue_comments(PR);
    assert!(
        comments.iter().any(|c| c["body"]
            .as_str()
            .unwrap_or("")
            .contains(&format!("@{OWNER}"))),
        "{comments:?}"
    );

    // A last look finds nothing new to do.
    run_once();
    assert_eq!(run()["state"], "complete");

    // The owner comments on the complete draft PR: back to `pr`, then (nothing else
    // changed: CI green, reviewed, nothing unresolved) complete again, the owner told again.
    github.add_owner_comment(PR, "One more look at the tab bar, please.");
    let mentions = |github: &FakeGithub| {
        github
            .issue_comments(PR)
            .iter()
            .filter(|c| {
                c["body"]
                    .as_str()
                    .unwrap_or("")
                    .contains(&format!("@{OWNER}"))
            })
            .count()
    };
    assert_eq!(mentions(&github), 1);
    run_once();
    assert_eq!(run()["state"], "pr", "back to pr on the owner's comment");
    run_once();
    assert_eq!(run()["state"], "complete");
    assert_eq!(mentions(&github), 2);
    assert_eq!(
        ws.json(&["show", "G-2", "--json"])["task"]["status"],
        "done"
    );
}

/// A workspace whose one run `G-3` has just opened its draft PR, on a head whose CI is
/// still running (so the run waits).
fn waiting_pr(github: &FakeGithub) -> crate::support::Workspace {
    use crate::fake_github::{Ci, FIRST_HEAD};
    github.set_ci(FIRST_HEAD, Ci::InProgress);
    let ws = github_workspace(github, "");
    ws.ok(&["add", "--title", "Fix tab preview", "--gid", "G-3"]);
    ws.ok(&["go", "G-3"]);
    ws.ok(&["run", "--once"]);
    assert_eq!(
        ws.json(&["show", "G-3", "--json"])["runs"][0]["state"],
        "pr"
    );
    ws
}

#[test]
fn rate_limits_and_server_errors_make_the_run_wait_without_losing_anything() {
    use crate::fake_github::{Ci, Fault, FIRST_HEAD};
    let github = FakeGithub::start_empty();
    let ws = waiting_pr(&github);
    for fault in [
        Fault::PrimaryRateLimit,
        Fault::SecondaryLimit {
            status: 429,
            retry_after: Some(1),
        },
        Fault::Status(502),
    ] {
        github.fail_next(1, fault);
        let out = ws.run(&["run", "--once"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shown = ws.json(&["show", "G-3", "--json"]);
        assert_eq!(shown["runs"][0]["state"], "pr", "{shown}");
        assert_eq!(shown["task"]["status"], "in_progress");
    }
    // Once GitHub answers again, the run goes on from where it was.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    github.set_ci(FIRST_HEAD, Ci::Failed);
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        ws.json(&["show", "G-3", "--json"])["runs"][0]["ci_attempts"],
        1
    );
}

/// What happens to a PR on GitHub's side, done to the fake.
type PrEnd = fn(&FakeGithub);

#[test]
fn the_end_of_a_pr_ends_its_run_deleted_closed_or_merged() {
    let ends: [(&str, PrEnd, &str, &str); 3] = [
        (
            "deleted under the run",
            |g| g.delete_pr(PR),
            "abandoned",
            "for_review",
        ),
        (
            "closed without a merge",
            |g| g.close_pr(PR),
            "abandoned",
            "for_review",
        ),
        ("merged", |g| g.merge_pr(PR), "complete", "done"),
    ];
    for (what, end, state, status) in ends {
        let github = FakeGithub::start_empty();
        let ws = waiting_pr(&github);
        end(&github);
        let out = ws.run(&["run", "--once"]);
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shown = ws.json(&["show", "G-3", "--json"]);
        assert_eq!(shown["runs"][0]["state"], state, "{what}: {shown}");
        assert_eq!(shown["task"]["status"], status, "{what}");
    }
}

/// The fixtures' three review threads: resolved, acknowledged, and one that needs work.
fn fixture_threads() -> Vec<serde_json::Value> {
    let mut threads = crate::fake_github::fixture_json("graphql_review_threads.json");
    threads["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"]
        .take()
        .as_array()
        .cloned()
        .expect("thread nodes")
}

#[test]
fn unresolved_review_threads_get_a_fix_comments_worker_with_exactly_those_threads() {
    use crate::fake_github::FIX_HEAD;
    let github = FakeGithub::start_empty();
    let ws = github_workspace(&github, "");
    ws.ok(&["add", "--title", "Fix tab preview", "--gid", "G-4"]);
    ws.ok(&["go", "G-4"]);
    ws.ok(&["run", "--once"]);

    // CI green on the fix; the fixtures' three threads: one resolved, one acknowledged, one
    // that needs work.
    github.set_pr_head(PR, FIX_HEAD);
    let nodes = fixture_threads();
    github.set_threads(PR, nodes.clone());
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let prompt = std::fs::read_to_string(ws.path().join("prompts-seen/fix_comments.md"))
        .unwrap_or_else(|e| panic!("no fix_comments worker ({e}): {stderr}"));
    let needs_work = nodes
        .iter()
        .find(|t| {
            t["isResolved"] == false
                && !t["comments"]["nodes"]
                    .as_array()
                    .and_then(|c| c.last())
                    .and_then(|c| c["body"].as_str())
                    .unwrap_or("")
                    .starts_with("[ACKNOWLEDGED:")
        })
        .expect("a thread that needs work");
    let acknowledged = nodes
        .iter()
        .find(|t| t["isResolved"] == false && t["id"] != needs_work["id"])
        .expect("the acknowledged thread");
    let first_body = |t: &serde_json::Value| {
        t["comments"]["nodes"][0]["body"]
            .as_str()
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    };
    assert!(prompt.contains(&first_body(needs_work)), "{prompt}");
    assert!(!prompt.contains(&first_body(acknowledged)), "{prompt}");
    let branch = ws.json(&["show", "G-4", "--json"])["runs"][0]["branch_name"]
        .as_str()
        .expect("a branch")
        .to_string();
    git(
        &ws.path().join("remote.git"),
        &["cat-file", "-e", &format!("{branch}:comments.txt")],
    );

    // The worker acknowledged the thread; executor answered it on the PR for the worker.
    let answered = github
        .threads(PR)
        .into_iter()
        .find(|t| t["id"] == needs_work["id"])
        .expect("the thread");
    let last = answered["comments"]["nodes"]
        .as_array()
        .and_then(|c| c.last())
        .and_then(|c| c["body"].as_str())
        .unwrap_or("")
        .to_string();
    assert_eq!(last, "[ACKNOWLEDGED: out of scope: not for this task]");

    // So the threads are not sent again: the next look starts the review instead.
    std::fs::remove_file(ws.path().join("prompts-seen/fix_comments.md")).expect("rm");
    ws.ok(&["run", "--once"]);
    assert!(!ws.path().join("prompts-seen/fix_comments.md").exists());
    assert!(ws.path().join("prompts-seen/review.md").exists());
}

#[test]
fn a_head_without_ci_gets_the_configured_workflow_dispatched() {
    let github = FakeGithub::start_empty();
    let ws = github_workspace(
        &github,
        "ci_workflow = \"ci.yml\"\nci_start_grace = \"0s\"\n",
    );
    ws.ok(&["add", "--title", "Fix tab preview", "--gid", "G-5"]);
    ws.ok(&["go", "G-5"]);
    ws.ok(&["run", "--once"]);
    // The PR moves to a head GitHub has no check runs for.
    github.set_pr_head(PR, "1111111111111111111111111111111111111111");
    ws.ok(&["run", "--once"]);
    let dispatches = github.dispatches();
    assert_eq!(dispatches.len(), 1, "{dispatches:?}");
    let branch = ws.json(&["show", "G-5", "--json"])["runs"][0]["branch_name"]
        .as_str()
        .expect("a branch")
        .to_string();
    assert_eq!(dispatches[0].git_ref, branch, "{dispatches:?}");
    assert_eq!(dispatches[0].workflow, "ci.yml");
}

#[test]
fn acknowledged_threads_are_resolved_when_configured() {
    use crate::fake_github::FIX_HEAD;
    let github = FakeGithub::start_empty();
    let ws = github_workspace(&github, "resolve_acknowledged = true\n");
    ws.ok(&["add", "--title", "Fix tab preview", "--gid", "G-6"]);
    ws.ok(&["go", "G-6"]);
    ws.ok(&["run", "--once"]);
    github.set_pr_head(PR, FIX_HEAD);
    github.set_threads(PR, fixture_threads());
    ws.ok(&["run", "--once"]);
    let still_open: Vec<String> = github
        .threads(PR)
        .iter()
        .filter(|t| t["isResolved"] == false)
        .filter_map(|t| t["id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        still_open.len(),
        1,
        "only the thread that needs work is left: {still_open:?}"
    );
}

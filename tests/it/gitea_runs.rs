//! Gitea as a forge from the runner's side: `forge.kind = "gitea"` pushes a finished run's
//! branch to the remote and opens it on (the fake) Gitea as a labelled `WIP:` PR, then the
//! same `pr` machine as on GitHub carries it: CI from the head's commit statuses (a
//! `fix_ci` worker on red), review conversations to a `fix_comments` worker (answered on
//! their line), executor's review, and completion with the owner @mentioned once. The
//! token stays with the orchestrator.

use crate::fake_gitea::{ActionsApi, FakeGitea, Fault, BOT, OWNER, REPO, TOKEN};
use crate::runner::workspace;
use crate::support::git;

/// A workspace on the Gitea forge (the fake at `gitea`, serving the bare repository the
/// runs push to) whose worker answers each phase's prompt, keeping each prompt in
/// `prompts-seen/`.
fn gitea_workspace(gitea: &FakeGitea, forge_extra: &str) -> crate::support::Workspace {
    let kept = "prompts-seen";
    let worker = format!(
        "prompt=$(cat); mkdir -p ../../{kept}; \
         case \"$prompt\" in \
           *'# Make CI green'*) printf '%s' \"$prompt\" > ../../{kept}/fix_ci.md; \
              echo fixed >> ci-fix.txt; echo '[DONE:ci_fixed] fixed the UI test';; \
           *'# Address review comments'*) printf '%s' \"$prompt\" > ../../{kept}/fix_comments.md; \
              echo addressed >> comments.txt; \
              t=$(printf '%s' \"$prompt\" | grep -o 'gitea-[0-9]*' | head -n 1); \
              echo \"[STATUS:thread_acknowledged] thread=$t reason=\\\"out of scope\\\" not for this task\"; \
              echo '[DONE:comments_addressed] answered the conversation';; \
           *'# Review a pull request'*) printf '%s' \"$prompt\" > ../../{kept}/review.md; \
              echo '[DONE:review_green] a clean change';; \
           *) env > worker-env.txt; echo hello > greeting.txt; \
              echo '[DONE:implemented] wrote the greeting';; \
         esac"
    );
    let mut ws = workspace(&["/bin/sh", "-c", &worker], &[], "");
    let remote = ws.path().join("remote.git");
    let remote_path = remote.to_str().expect("utf-8 path");
    git(ws.path(), &["init", "-q", "--bare", remote_path]);
    git(
        &ws.path().join("repo"),
        &["remote", "add", "origin", remote_path],
    );
    gitea.serve_git(&remote);
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replacen(
        "[forge]\n",
        &format!(
            "[forge]\nkind = \"gitea\"\ngitea_repository = \"{OWNER}/{REPO}\"\napi_url = \"{}\"\ntoken_env = \"TEST_GITEA_TOKEN\"\n{forge_extra}",
            gitea.url()
        ),
        1,
    ));
    ws.env.push(("TEST_GITEA_TOKEN".into(), TOKEN.into()));
    ws
}

/// A failed Actions job's log as act_runner writes it (the fake stamps each line).
const ACTIONS_LOG: &str = "ci/ui-tests(version:v0.2.11) received task 131 of job ui-tests\n\
workflow prepared\n\
⭐ Run Main Run ci/ui-tests\n\
Failing tests:\n\
\tTabPreviewUITests.testPreviewDismissesOnMouseExit()\n\
** TEST FAILED **\n\
exitcode '65': failure\n\
❌  Failure - Main Run ci/ui-tests\n\
🏁  Job failed";

fn run_once(ws: &crate::support::Workspace) -> String {
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains(TOKEN), "the token is never logged");
    stderr
}

#[test]
fn a_gitea_run_is_pushed_opened_as_a_wip_pr_fixed_on_red_statuses_reviewed_and_completed() {
    let gitea = FakeGitea::start();
    let ws = gitea_workspace(
        &gitea,
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
    let run = || ws.json(&["show", "G-1", "--json"])["runs"][0].clone();
    let remote = ws.path().join("remote.git");

    // Pushed, and opened as a labelled draft: Gitea's draft is the `WIP: ` title.
    let stderr = run_once(&ws);
    assert_eq!(run()["state"], "pr", "{stderr}");
    let number = run()["pr_number"].as_u64().expect("a PR number");
    let branch = run()["branch_name"].as_str().expect("a branch").to_string();
    let pulls = gitea.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    let pr = &pulls[0];
    assert_eq!(pr["number"], number);
    assert_eq!(pr["title"], "WIP: Fix tab preview");
    assert_eq!(pr["draft"], true);
    assert_eq!(pr["head"]["ref"], branch.as_str());
    assert!(
        pr["body"]
            .as_str()
            .unwrap_or("")
            .contains("The preview sticks."),
        "{pr}"
    );
    let labels: Vec<&str> = pr["labels"]
        .as_array()
        .expect("labels")
        .iter()
        .filter_map(|l| l["name"].as_str())
        .collect();
    assert_eq!(labels, ["executor", "ai-generated"]);
    assert_eq!(run()["pr_url"], pr["html_url"]);
    let first = gitea.head_sha(number).expect("a head");
    assert_eq!(first, git(&remote, &["rev-parse", &branch]).trim());
    git(
        &remote,
        &["cat-file", "-e", &format!("{branch}:greeting.txt")],
    );

    // CI (the head's commit statuses) fails, on Gitea Actions and on a second CI: a
    // fix_ci worker with both failed contexts, each with its description and its own link,
    // whose fix is committed and pushed.
    gitea.set_status(&first, "ci/ui-tests", "failure");
    gitea.set_job_log(&first, "ci/ui-tests", ACTIONS_LOG);
    gitea.set_status(&first, "ci/lint", "success");
    let woodpecker = "https://woodpecker.example/repos/7/pipeline/31";
    gitea.set_status_at(&first, "woodpecker/lint", "error", Some(woodpecker));
    let stderr = run_once(&ws);
    let fix_ci = std::fs::read_to_string(ws.path().join("prompts-seen/fix_ci.md"))
        .unwrap_or_else(|e| panic!("no fix_ci worker ran ({e}): {stderr}"));
    assert!(fix_ci.contains("ci/ui-tests"), "{fix_ci}");
    assert!(
        fix_ci.contains("ci/ui-tests: failure"),
        "the status's description: {fix_ci}"
    );
    assert!(
        fix_ci.contains(&format!("woodpecker/lint: error ({woodpecker})")),
        "the second CI's context with its link: {fix_ci}"
    );
    let actions_link = format!(
        "{}/{OWNER}/{REPO}/actions/runs/",
        gitea.url().origin().ascii_serialization()
    );
    assert!(
        fix_ci
            .lines()
            .any(|l| l.starts_with("- `ci/ui-tests`") && l.contains(&actions_link)),
        "the Actions context with its link: {fix_ci}"
    );
    assert!(
        fix_ci.contains("TabPreviewUITests.testPreviewDismissesOnMouseExit()")
            && fix_ci.contains("❌  Failure - Main Run ci/ui-tests"),
        "the Actions job's log, cut around its failure: {fix_ci}"
    );
    assert!(
        fix_ci.contains("- Failing step: `Run ci/ui-tests`"),
        "the failing step: {fix_ci}"
    );
    assert!(!fix_ci.contains(TOKEN), "the token is in no prompt");
    assert_eq!(run()["ci_attempts"], 1);
    let fixed = gitea.head_sha(number).expect("a head");
    assert_ne!(fixed, first, "the fix was pushed: {stderr}");
    git(
        &remote,
        &["cat-file", "-e", &format!("{branch}:ci-fix.txt")],
    );

    // Still pending on the fix: nothing is started.
    gitea.set_status(&fixed, "ci/ui-tests", "pending");
    run_once(&ws);
    assert!(!ws.path().join("prompts-seen/review.md").exists());
    assert_eq!(gitea.head_sha(number).as_deref(), Some(fixed.as_str()));

    // Green, and the owner asks for a change on a line: a fix_comments worker gets the
    // conversation; its acknowledgement is posted on the same line (Gitea shows it in that
    // conversation), so the conversation asks for no more work.
    gitea.set_status(&fixed, "ci/ui-tests", "success");
    gitea.add_review(
        number,
        OWNER,
        "REQUEST_CHANGES",
        "Name it hello.txt",
        "greeting.txt",
    );
    let stderr = run_once(&ws);
    let fix_comments = std::fs::read_to_string(ws.path().join("prompts-seen/fix_comments.md"))
        .unwrap_or_else(|e| panic!("no fix_comments worker ran ({e}): {stderr}"));
    assert!(fix_comments.contains("Name it hello.txt"), "{fix_comments}");
    let comments = gitea.review_comments(number);
    let answer = comments.last().expect("an answer");
    assert_eq!(answer["user"]["login"], BOT, "{comments:?}");
    assert_eq!(answer["path"], "greeting.txt");
    assert_eq!(answer["position"], 1, "on the conversation's line");
    assert!(
        answer["body"]
            .as_str()
            .unwrap_or("")
            .starts_with("[ACKNOWLEDGED: out of scope: not for this task]"),
        "{answer}"
    );

    // Green on the new head, nothing waiting: executor's review, posted as a COMMENT.
    // Gitea stores it, and a proxy loses the answer to a 502.
    let head = gitea.head_sha(number).expect("a head");
    gitea.set_status(&head, "ci/ui-tests", "success");
    gitea.set_status(&head, "ci/lint", "success");
    gitea.fail_route("POST", "/reviews", 1, Fault::AfterApplying(502));
    let stderr = run_once(&ws);
    assert!(
        ws.path().join("prompts-seen/review.md").exists(),
        "a review worker ran: {stderr}"
    );
    // The next tick finds the review by its marker on the PR and posts nothing again.
    run_once(&ws);
    let stored: Vec<_> = gitea
        .reviews(number)
        .into_iter()
        .filter(|r| {
            r["body"]
                .as_str()
                .unwrap_or("")
                .contains("executor's review: green")
        })
        .collect();
    assert_eq!(stored.len(), 1, "{stored:?}");
    let posted: Vec<_> = gitea
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/reviews"))
        .filter(|r| r.body.contains("executor's review: green"))
        .collect();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert!(posted[0].body.contains("\"COMMENT\""), "{}", posted[0].body);

    // Complete: the task done, and the owner @mentioned once on the PR. The PR stays a
    // draft: the owner takes `WIP:` off when they are happy, as they mark it ready on GitHub.
    let stderr = run_once(&ws);
    let shown = ws.json(&["show", "G-1", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "complete", "{stderr}\n{shown}");
    assert_eq!(shown["task"]["status"], "done");
    run_once(&ws);
    assert_eq!(run()["state"], "complete");
    let told: Vec<_> = gitea
        .comments(number)
        .into_iter()
        .filter(|c| {
            c["body"]
                .as_str()
                .unwrap_or("")
                .contains(&format!("@{OWNER} this draft PR is ready"))
        })
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(gitea.pulls()[0]["title"], "WIP: Fix tab preview");

    // Someone else's comment is not the owner's: the run stays complete.
    gitea.comment_as(number, "passer-by", "Nice!");
    run_once(&ws);
    assert_eq!(run()["state"], "complete");

    // The owner comments on the complete draft: the run is back in `pr`, and the comment
    // goes to a fix_comments worker.
    gitea.comment_as(number, OWNER, "Please also say hello in French.");
    let stderr = run_once(&ws);
    assert_eq!(run()["state"], "pr", "{stderr}");
    let stderr = run_once(&ws);
    let fix_comments = std::fs::read_to_string(ws.path().join("prompts-seen/fix_comments.md"))
        .expect("the fix_comments prompt");
    assert!(
        fix_comments.contains("Please also say hello in French."),
        "{stderr}\n{fix_comments}"
    );

    // The token reached Gitea only as the Authorization header, and no worker or row.
    for request in gitea.requests() {
        assert!(!request.body.contains(TOKEN) && !request.path.contains(TOKEN));
    }
    let env = git(&remote, &["show", &format!("{branch}:worker-env.txt")]);
    assert!(!env.contains(TOKEN) && !env.contains("TEST_GITEA_TOKEN"));
    let bytes = std::fs::read(ws.path().join("executor.db")).expect("read the database");
    assert!(!String::from_utf8_lossy(&bytes).contains(TOKEN));
}

#[test]
fn a_gitea_failure_while_opening_leaves_the_run_for_the_next_tick_which_opens_its_pr() {
    let gitea = FakeGitea::start();
    let ws = gitea_workspace(&gitea, "");
    ws.ok(&["add", "--title", "Fix tab preview", "--gid", "G-2"]);
    ws.ok(&["go", "G-2"]);
    // The run's own try and the PR tick's in the same pass both meet a 502.
    gitea.fail_next_matching("/pulls", 2, Fault::Status(502));
    let stderr = run_once(&ws);
    let shown = ws.json(&["show", "G-2", "--json"]);
    assert_eq!(
        shown["runs"][0]["state"], "in_progress",
        "{stderr}\n{shown}"
    );
    assert!(gitea.pulls().is_empty());
    // The branch was pushed before the PR was tried: the next tick only opens it.
    let branch = shown["runs"][0]["branch_name"].as_str().expect("a branch");
    git(&ws.path().join("remote.git"), &["rev-parse", branch]);

    let stderr = run_once(&ws);
    let shown = ws.json(&["show", "G-2", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "pr", "{stderr}\n{shown}");
    assert_eq!(gitea.pulls().len(), 1, "one PR, however many tries");
}

/// What happens to a PR on Gitea's side, done to the fake.
type PrEnd = fn(&FakeGitea, u64);

#[test]
fn the_end_of_a_gitea_pr_ends_its_run_deleted_closed_or_merged() {
    let ends: [(&str, PrEnd, &str, &str); 3] = [
        ("deleted", |g, n| g.delete_pr(n), "abandoned", "for_review"),
        (
            "closed without a merge",
            |g, n| g.close(n),
            "abandoned",
            "for_review",
        ),
        ("merged", |g, n| g.merge_pr(n), "complete", "done"),
    ];
    for (what, end, state, status) in ends {
        let gitea = FakeGitea::start();
        let ws = gitea_workspace(&gitea, "");
        ws.ok(&["add", "--title", "Fix tab preview", "--gid", "G-3"]);
        ws.ok(&["go", "G-3"]);
        run_once(&ws);
        let shown = ws.json(&["show", "G-3", "--json"]);
        assert_eq!(shown["runs"][0]["state"], "pr", "{what}: {shown}");
        let number = shown["runs"][0]["pr_number"].as_u64().expect("a PR");
        end(&gitea, number);
        let stderr = run_once(&ws);
        let shown = ws.json(&["show", "G-3", "--json"]);
        assert_eq!(
            shown["runs"][0]["state"], state,
            "{what}: {stderr}\n{shown}"
        );
        assert_eq!(shown["task"]["status"], status, "{what}");
    }
}

#[test]
fn a_gitea_forge_needs_its_repository_and_api_url_and_its_token() {
    let gitea = FakeGitea::start();
    let ws = workspace(&["/bin/true"], &[], "");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    let with = |forge: &str| config.replacen("[forge]\n", &format!("[forge]\n{forge}"), 1);

    ws.write_config(&with("kind = \"gitea\"\n"));
    let err = ws.fails_with(2, &["run", "--once"]);
    assert!(err.contains("forge.gitea_repository"), "{err}");

    ws.write_config(&with(&format!(
        "kind = \"gitea\"\ngitea_repository = \"{OWNER}/{REPO}\"\n"
    )));
    let err = ws.fails_with(2, &["run", "--once"]);
    assert!(err.contains("forge.api_url"), "{err}");

    // Without token_env, the token is GITEA_TOKEN's; unset, the runner does not start.
    ws.write_config(&with(&format!(
        "kind = \"gitea\"\ngitea_repository = \"{OWNER}/{REPO}\"\napi_url = \"{}\"\n",
        gitea.url()
    )));
    let out = ws
        .command(&["run", "--once"])
        .env_remove("GITEA_TOKEN")
        .output()
        .expect("run executor");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("GITEA_TOKEN"), "{err}");
}

#[test]
fn on_a_gitea_that_serves_no_job_log_the_fix_ci_worker_gets_the_links_and_nothing_fails() {
    // Gitea 1.25 that lost the log (404 on the log), and 1.24 (no runs API: 404 there).
    for api in [
        ActionsApi {
            runs: true,
            logs: false,
        },
        ActionsApi {
            runs: false,
            logs: true,
        },
    ] {
        let gitea = FakeGitea::start();
        gitea.serve_actions(api);
        let ws = gitea_workspace(&gitea, "");
        ws.ok(&["add", "--title", "Fix tab preview", "--gid", "G-1"]);
        ws.ok(&["go", "G-1"]);
        run_once(&ws);
        let run = ws.json(&["show", "G-1", "--json"])["runs"][0].clone();
        let number = run["pr_number"].as_u64().expect("a PR number");
        let head = gitea.head_sha(number).expect("a head");
        gitea.set_status(&head, "ci/ui-tests", "failure");
        gitea.set_job_log(&head, "ci/ui-tests", ACTIONS_LOG);

        let stderr = run_once(&ws);
        let fix_ci = std::fs::read_to_string(ws.path().join("prompts-seen/fix_ci.md"))
            .unwrap_or_else(|e| panic!("{api:?}: no fix_ci worker ran ({e}): {stderr}"));
        let actions_link = format!(
            "{}/{OWNER}/{REPO}/actions/runs/1/jobs/0",
            gitea.url().origin().ascii_serialization()
        );
        assert!(
            fix_ci.contains(&actions_link),
            "{api:?}: where the log is: {fix_ci}"
        );
        assert!(
            !fix_ci.contains("TEST FAILED"),
            "{api:?}: no log was served: {fix_ci}"
        );
        let refused: Vec<String> = gitea
            .requests()
            .iter()
            .filter(|r| r.path.contains("/actions/") && r.status == 404)
            .map(|r| r.path.clone())
            .collect();
        assert!(!refused.is_empty(), "{api:?}: the log was asked for");
    }
}

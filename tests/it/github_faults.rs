//! GitHub failing in the middle of executor's normal flow, against the fake GitHub with a
//! fault on one route: nothing is abandoned for a 5xx, no PR is orphaned, the owner's
//! @mention and the record step happen once, one `fix_ci` worker per failed head, replies
//! go to a thread's top-level comment, and a review verdict is posted once, by one review
//! worker; a remote that refuses the push keeps the run, and the tick pushes the recorded
//! commit later.

use crate::fake_github::{Ci, FakeGithub, Fault, FIRST_HEAD, OWNER, PR, REPO, TOKEN};
use crate::runner::workspace;
use crate::support::{git, Workspace};

/// Each phase appends its name to `phases.log` (so a test counts workers), then does its
/// part: the implementation writes a file, `fix_ci` commits a fix, `fix_comments` fixes the
/// first thread it is given, the review is green.
const WORKER: &str = "prompt=$(cat); \
    case \"$prompt\" in \
      *'# Make CI green'*) echo fix_ci >> ../../phases.log; \
         echo fixed >> ci-fix.txt; echo '[DONE:ci_fixed] fixed the UI test';; \
      *'# Address review comments'*) echo fix_comments >> ../../phases.log; \
         echo addressed >> comments.txt; \
         t=$(printf '%s' \"$prompt\" | grep -o 'PRRT_[A-Za-z0-9_-]*' | head -n 1); \
         echo \"[STATUS:thread_fixed] thread=$t the area is reset first\"; \
         echo '[DONE:comments_addressed] fixed the thread';; \
      *'# Review a pull request'*) echo review >> ../../phases.log; \
         echo '[DONE:review_green] a clean change';; \
      *) echo implement >> ../../phases.log; echo hello > greeting.txt; \
         echo '[DONE:implemented] wrote the greeting';; \
    esac";

/// A GitHub-forge workspace on `github` with a bare remote, the record step's build log,
/// and `forge_extra` in `[forge]`; task `G-1` approved.
fn faults_workspace(github: &FakeGithub, forge_extra: &str) -> Workspace {
    faults_workspace_with(WORKER, github, forge_extra)
}

/// [`faults_workspace`] with another worker script.
fn faults_workspace_with(worker: &str, github: &FakeGithub, forge_extra: &str) -> Workspace {
    let mut ws = workspace(
        &["/bin/sh", "-c", worker],
        &[],
        "\n[conductor]\nbuild_log = \"BUILD_LOG.md\"\n",
    );
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
    ws.ok(&["add", "--title", "Fix tab preview", "--gid", "G-1"]);
    ws.ok(&["go", "G-1"]);
    ws
}

fn pass(ws: &Workspace) -> String {
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

fn shown(ws: &Workspace) -> serde_json::Value {
    ws.json(&["show", "G-1", "--json"])
}

/// How many workers of `phase` ran.
fn workers(ws: &Workspace, phase: &str) -> usize {
    std::fs::read_to_string(ws.path().join("phases.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == phase)
        .count()
}

/// A run's branch and worktree, as `show --json` gives them.
fn branch_and_worktree(run: &serde_json::Value) -> (String, std::path::PathBuf) {
    let branch = run["branch_name"].as_str().expect("a branch").to_string();
    let worktree = run["worktree_path"].as_str().expect("a worktree").into();
    (branch, worktree)
}

fn mentions(github: &FakeGithub) -> usize {
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
}

/// The record step's entries for run `run`.
fn recorded(ws: &Workspace) -> usize {
    std::fs::read_to_string(ws.path().join("BUILD_LOG.md"))
        .unwrap_or_default()
        .matches("`G-1`")
        .count()
}

#[test]
fn a_502_on_opening_the_pr_keeps_the_run_and_a_later_pass_opens_it() {
    let github = FakeGithub::start_empty();
    github.set_ci(FIRST_HEAD, Ci::InProgress);
    let ws = faults_workspace(&github, "");
    // The run's own try and the same pass's PR tick both meet the 502.
    github.fail_route("POST", "/pulls", 2, Fault::Status(502));
    let stderr = pass(&ws);
    let now = shown(&ws);
    assert_eq!(now["runs"][0]["state"], "in_progress", "{stderr}");
    assert_eq!(now["runs"][0]["pr_number"], serde_json::Value::Null);
    assert_eq!(now["task"]["status"], "in_progress");
    let branch = now["runs"][0]["branch_name"]
        .as_str()
        .expect("a branch")
        .to_string();
    git(
        &ws.path().join("remote.git"),
        &["cat-file", "-e", &format!("{branch}:greeting.txt")],
    );

    // The next pass opens it; no worker ran again, one PR exists.
    let stderr = pass(&ws);
    let now = shown(&ws);
    assert_eq!(now["runs"][0]["state"], "pr", "{stderr}");
    assert_eq!(now["runs"][0]["pr_number"], PR);
    assert_eq!(workers(&ws, "implement"), 1);
    assert_eq!(github.count("POST", "/pulls"), 3);
    assert!(github.pr(PR + 1).is_none());
}

#[test]
fn a_remote_that_refuses_the_push_keeps_the_run_and_the_tick_pushes_and_opens_the_pr_once() {
    let github = FakeGithub::start_empty();
    github.set_ci(FIRST_HEAD, Ci::InProgress);
    let ws = faults_workspace(&github, "max_effect_failures = 3\n");
    // The remote is gone: every push fails (the run's own, then each tick's).
    let remote = ws.path().join("remote.git");
    let away = ws.path().join("remote.git.away");
    std::fs::rename(&remote, &away).expect("move the remote away");
    let stderr = pass(&ws);
    let now = shown(&ws);
    assert_eq!(now["runs"][0]["state"], "in_progress", "{stderr}");
    assert_eq!(now["task"]["status"], "in_progress", "{stderr}");
    assert_eq!(now["runs"][0]["pr_number"], serde_json::Value::Null);
    assert_eq!(
        github.count("POST", "/pulls"),
        0,
        "no PR before its branch is pushed"
    );
    let asked = ws.json(&["escalations", "--json"]);
    assert_eq!(asked.as_array().expect("escalations").len(), 0, "{asked}");

    // The third failed try in a row asks the owner, once; the run still waits on the push.
    pass(&ws);
    pass(&ws);
    let now = shown(&ws);
    assert_eq!(now["runs"][0]["state"], "in_progress", "{now}");
    let asked = ws.json(&["escalations", "--json"]);
    let asked = asked.as_array().expect("escalations");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let text = asked[0].to_string();
    assert!(text.contains("cannot push branch"), "{text}");

    // The worker's worktree moves on after the orchestrator's commit: a push again sends
    // the recorded commit, not the worktree's newer one.
    let (branch, worktree) = branch_and_worktree(&now["runs"][0]);
    let recorded = git(&worktree, &["rev-parse", "HEAD"]).trim().to_string();
    std::fs::write(worktree.join("stray.txt"), "not the orchestrator's").expect("stray file");
    git(&worktree, &["add", "stray.txt"]);
    git(
        &worktree,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "stray",
        ],
    );

    // The remote is back: the next tick pushes and opens the PR, once; no worker again.
    std::fs::rename(&away, &remote).expect("move the remote back");
    let stderr = pass(&ws);
    let now = shown(&ws);
    assert_eq!(now["runs"][0]["state"], "pr", "{stderr}");
    assert_eq!(now["runs"][0]["pr_number"], PR);
    assert_eq!(github.count("POST", "/pulls"), 1);
    assert!(github.pr(PR + 1).is_none());
    assert_eq!(workers(&ws, "implement"), 1);
    let pushed = git(&remote, &["rev-parse", &format!("refs/heads/{branch}")]);
    assert_eq!(
        pushed.trim(),
        recorded,
        "the recorded commit is what was pushed"
    );
    git(
        &remote,
        &["cat-file", "-e", &format!("{branch}:greeting.txt")],
    );
    pass(&ws);
    assert_eq!(github.count("POST", "/pulls"), 1);
    assert_eq!(shown(&ws)["runs"][0]["state"], "pr");
}

#[test]
fn a_pr_that_keeps_failing_asks_the_owner_once_and_is_never_abandoned() {
    let github = FakeGithub::start_empty();
    github.set_ci(FIRST_HEAD, Ci::InProgress);
    let ws = faults_workspace(&github, "max_effect_failures = 2\n");
    github.fail_route("POST", "/pulls", 10, Fault::Status(502));
    for _ in 0..3 {
        pass(&ws);
    }
    let now = shown(&ws);
    assert_eq!(now["runs"][0]["state"], "in_progress", "{now}");
    assert_eq!(now["task"]["status"], "in_progress");
    let asked = ws.json(&["escalations", "--json"]);
    let asked = asked.as_array().expect("escalations");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let text = asked[0].to_string();
    assert!(text.contains("cannot open the draft PR"), "{text}");
    assert!(text.contains("502"), "{text}");
    assert_eq!(workers(&ws, "implement"), 1);
}

#[test]
fn a_create_whose_answer_was_lost_or_a_failed_label_call_leaves_no_orphan_pr() {
    // GitHub made the PR, then a 502 came back: the run adopts it.
    let github = FakeGithub::start_empty();
    github.set_ci(FIRST_HEAD, Ci::InProgress);
    let ws = faults_workspace(&github, "required_labels = [\"executor\"]\n");
    github.fail_route("POST", "/pulls", 1, Fault::AfterApplying(502));
    let stderr = pass(&ws);
    assert_eq!(shown(&ws)["runs"][0]["state"], "pr", "{stderr}");
    assert_eq!(shown(&ws)["runs"][0]["pr_number"], PR);
    assert_eq!(github.count("POST", "/pulls"), 1);
    assert!(github.pr(PR + 1).is_none());
    assert_eq!(github.labels(PR), ["executor"]);

    // The labels call fails after the create: the number is saved, the labels come later.
    let github = FakeGithub::start_empty();
    github.set_ci(FIRST_HEAD, Ci::InProgress);
    let ws = faults_workspace(&github, "required_labels = [\"executor\"]\n");
    github.fail_route("POST", "/labels", 1, Fault::Status(502));
    let stderr = pass(&ws);
    assert_eq!(shown(&ws)["runs"][0]["state"], "pr", "{stderr}");
    assert_eq!(shown(&ws)["runs"][0]["pr_number"], PR);
    pass(&ws);
    assert_eq!(github.labels(PR), ["executor"]);
    assert_eq!(github.count("POST", "/pulls"), 1);
    assert_eq!(shown(&ws)["task"]["status"], "in_progress");
}

#[test]
fn the_owner_is_mentioned_and_the_run_recorded_once_after_a_502_on_the_comment() {
    let github = FakeGithub::start_empty();
    github.set_ci(FIRST_HEAD, Ci::Success);
    let ws = faults_workspace(&github, "");
    // PR opened, CI green, reviewed.
    pass(&ws);
    assert_eq!(workers(&ws, "review"), 1);
    assert_eq!(github.reviews().len(), 1);

    // The comment is saved by GitHub, but a 502 comes back.
    github.fail_route(
        "POST",
        &format!("/issues/{PR}/comments"),
        1,
        Fault::AfterApplying(502),
    );
    let stderr = pass(&ws);
    let now = shown(&ws);
    assert_eq!(now["runs"][0]["state"], "complete", "{stderr}");
    assert_eq!(now["task"]["status"], "done");
    assert_eq!(recorded(&ws), 0, "the record step waits for the comment");

    // The retry finds the comment by its marker: one @mention, one record.
    for _ in 0..2 {
        pass(&ws);
        assert_eq!(mentions(&github), 1);
        assert_eq!(recorded(&ws), 1);
    }
    assert_eq!(github.count("POST", &format!("/issues/{PR}/comments")), 1);
    assert_eq!(shown(&ws)["runs"][0]["state"], "complete");
}

#[test]
fn one_fix_ci_worker_per_failed_head() {
    let github = FakeGithub::start_empty();
    let ws = faults_workspace(&github, "");
    // CI failed on the first head: one fix_ci worker, pushed.
    let stderr = pass(&ws);
    assert_eq!(workers(&ws, "fix_ci"), 1, "{stderr}");
    // GitHub still shows the failed head (it has not caught up with the push): no second.
    for _ in 0..3 {
        pass(&ws);
    }
    assert_eq!(workers(&ws, "fix_ci"), 1);
    let now = shown(&ws);
    assert_eq!(now["runs"][0]["ci_attempts"], 1, "{now}");
    assert_eq!(now["runs"][0]["state"], "pr");
    let asked = ws.json(&["escalations", "--json"]);
    assert_eq!(asked.as_array().map(Vec::len), Some(0), "{asked}");
}

#[test]
fn a_502_on_the_review_keeps_the_verdict_and_posts_it_once() {
    let github = FakeGithub::start_empty();
    github.set_ci(FIRST_HEAD, Ci::Success);
    let ws = faults_workspace(&github, "");
    github.fail_route(
        "POST",
        &format!("/pulls/{PR}/reviews"),
        1,
        Fault::Status(502),
    );
    pass(&ws);
    assert_eq!(workers(&ws, "review"), 1);
    assert!(github.reviews().is_empty());

    // The kept verdict is posted; no second review worker.
    pass(&ws);
    assert_eq!(workers(&ws, "review"), 1);
    assert_eq!(github.reviews().len(), 1);
    assert!(github.reviews()[0]
        .body
        .starts_with("executor's review: green"));

    // Then complete, the owner told once.
    pass(&ws);
    assert_eq!(shown(&ws)["runs"][0]["state"], "complete");
    assert_eq!(mentions(&github), 1);
    assert_eq!(github.reviews().len(), 1);
}

#[test]
fn a_fixed_thread_with_a_reply_is_answered_on_its_top_level_comment() {
    let github = FakeGithub::start_empty();
    github.set_ci(FIRST_HEAD, Ci::Success);
    // The fixtures' thread that needs work, with a reviewer's follow-up reply.
    let mut threads = crate::fake_github::fixture_json("graphql_review_threads.json");
    let nodes = threads["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"].take();
    let mut thread = nodes
        .as_array()
        .and_then(|n| n.last())
        .cloned()
        .expect("a thread");
    let first = thread["comments"]["nodes"][0].clone();
    let top = first["databaseId"].as_u64().expect("a comment id");
    let mut follow_up = first.clone();
    follow_up["id"] = serde_json::json!("PRRC_followup");
    follow_up["databaseId"] = serde_json::json!(top + 1000);
    follow_up["body"] = serde_json::json!("Also: the hover state sticks too.");
    let comments = thread["comments"]["nodes"]
        .as_array_mut()
        .expect("comments");
    comments.truncate(1);
    comments.push(follow_up);
    let thread_id = thread["id"].as_str().expect("an id").to_string();
    let ws = faults_workspace(&github, "");
    github.set_threads(PR, vec![thread]);

    let stderr = pass(&ws);
    assert_eq!(workers(&ws, "fix_comments"), 1, "{stderr}");
    let replies: Vec<_> = github
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/replies"))
        .collect();
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(
        replies[0].path,
        format!("/repos/{OWNER}/{REPO}/pulls/{PR}/comments/{top}/replies")
    );
    assert_eq!(replies[0].status, 201);
    let answered = github
        .threads(PR)
        .into_iter()
        .find(|t| t["id"] == thread_id.as_str())
        .expect("the thread");
    assert_eq!(
        answered["comments"]["nodes"].as_array().map(Vec::len),
        Some(3)
    );
}

/// The replies to the PR after `POST …/replies` answered 201.
fn replies_posted(github: &FakeGithub) -> usize {
    github
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/replies") && r.status == 201)
        .count()
}

#[test]
fn a_502_on_a_threads_reply_posts_it_once_later_and_works_the_thread_once() {
    let github = FakeGithub::start_empty();
    github.set_ci(FIRST_HEAD, Ci::Success);
    let ws = faults_workspace(&github, "");
    github.set_threads(PR, fixture_threads_needing_work());
    github.fail_route("POST", "/replies", 1, Fault::Status(502));

    // The fix is worked, committed and pushed; its reply meets the 502 and stays owed.
    let stderr = pass(&ws);
    assert_eq!(workers(&ws, "fix_comments"), 1, "{stderr}");
    assert_eq!(replies_posted(&github), 0, "{stderr}");
    let run = &shown(&ws)["runs"][0];
    assert_eq!(run["state"], "pr", "{run}");

    // The next look posts the owed reply before anything else: once, and the thread is
    // not worked again.
    let stderr = pass(&ws);
    assert_eq!(replies_posted(&github), 1, "{stderr}");
    pass(&ws);
    assert_eq!(replies_posted(&github), 1);
    assert_eq!(workers(&ws, "fix_comments"), 1);
}

/// The fixtures' review thread that needs work (the last of `graphql_review_threads.json`).
fn fixture_threads_needing_work() -> Vec<serde_json::Value> {
    let mut threads = crate::fake_github::fixture_json("graphql_review_threads.json");
    let nodes = threads["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"].take();
    vec![nodes
        .as_array()
        .and_then(|n| n.last())
        .cloned()
        .expect("a thread")]
}

#[test]
fn a_merged_pr_is_recorded_and_told_once() {
    let github = FakeGithub::start_empty();
    github.set_ci(FIRST_HEAD, Ci::InProgress);
    let ws = faults_workspace(&github, "");
    pass(&ws);
    assert_eq!(shown(&ws)["runs"][0]["state"], "pr");
    github.merge_pr(PR);
    for _ in 0..2 {
        pass(&ws);
        let now = shown(&ws);
        assert_eq!(now["runs"][0]["state"], "complete", "{now}");
        assert_eq!(now["task"]["status"], "done");
        assert_eq!(recorded(&ws), 1);
    }
    // The owner merged it: no @mention on the PR.
    assert_eq!(mentions(&github), 0);
}

/// A `fix_ci` worker that says it started (`fix-started` in the workspace) and waits for
/// `go-on` before it ends, so a test can take the remote away while it works.
const WAITING_FIX: &str = "prompt=$(cat); \
    case \"$prompt\" in \
      *'# Make CI green'*) echo fix_ci >> ../../phases.log; \
         echo fixed >> ci-fix.txt; touch ../../fix-started; \
         while [ ! -f ../../go-on ]; do sleep 0.05; done; \
         echo '[DONE:ci_fixed] fixed the UI test';; \
      *) echo implement >> ../../phases.log; echo hello > greeting.txt; \
         echo '[DONE:implemented] wrote the greeting';; \
    esac";

#[test]
fn a_fix_whose_push_fails_is_pushed_by_a_later_tick_and_never_worked_again() {
    let github = FakeGithub::start_empty();
    let ws = faults_workspace_with(WAITING_FIX, &github, "max_effect_failures = 2\n");
    let remote = ws.path().join("remote.git");
    let away = ws.path().join("remote.git.away");
    // The first pass opens the PR, sees CI red and starts the fix; the remote goes away
    // while the fix works, so its push fails.
    let stderr = std::thread::scope(|scope| {
        let first = scope.spawn(|| pass(&ws));
        let started = ws.path().join("fix-started");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !started.exists() {
            assert!(
                std::time::Instant::now() < deadline && !first.is_finished(),
                "the fix_ci worker never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::fs::rename(&remote, &away).expect("move the remote away");
        std::fs::write(ws.path().join("go-on"), "").expect("go on");
        first.join().expect("the first pass")
    });
    assert_eq!(workers(&ws, "fix_ci"), 1, "{stderr}");
    let now = shown(&ws);
    assert_eq!(now["runs"][0]["state"], "pr", "{stderr}");
    let (branch, worktree) = branch_and_worktree(&now["runs"][0]);
    let fix = git(&worktree, &["rev-parse", "HEAD"]).trim().to_string();

    // Still gone: the next tick pushes again (no second worker) and, at the second failure
    // in a row, asks the owner once.
    pass(&ws);
    pass(&ws);
    assert_eq!(workers(&ws, "fix_ci"), 1);
    let asked = ws.json(&["escalations", "--json"]);
    let asked = asked.as_array().expect("escalations");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].to_string().contains("cannot push branch"),
        "{asked:?}"
    );

    // Back: the owed fix is pushed, the same commit, and no worker works it again.
    std::fs::rename(&away, &remote).expect("move the remote back");
    let stderr = pass(&ws);
    let pushed = git(&remote, &["rev-parse", &format!("refs/heads/{branch}")]);
    assert_eq!(pushed.trim(), fix, "{stderr}");
    git(
        &remote,
        &["cat-file", "-e", &format!("{branch}:ci-fix.txt")],
    );
    pass(&ws);
    assert_eq!(workers(&ws, "fix_ci"), 1);
    assert_eq!(shown(&ws)["runs"][0]["state"], "pr");
}

/// A `fix_ci` worker whose first try meets its agent's usage limit (`resets_in_seconds`),
/// then fixes.
const LIMITED_FIX: &str = "prompt=$(cat); \
    case \"$prompt\" in \
      *'# Make CI green'*) echo fix_ci >> ../../phases.log; \
         if [ ! -f ../../limited ]; then touch ../../limited; \
           echo '{\"error\":{\"type\":\"usage_limit_reached\",\"resets_in_seconds\":3}}' >&2; exit 1; fi; \
         echo fixed >> ci-fix.txt; echo '[DONE:ci_fixed] fixed the UI test';; \
      *) echo implement >> ../../phases.log; echo hello > greeting.txt; \
         echo '[DONE:implemented] wrote the greeting';; \
    esac";

#[test]
fn a_prs_next_worker_waits_out_its_agents_usage_limit() {
    let github = FakeGithub::start_empty();
    let ws = faults_workspace_with(LIMITED_FIX, &github, "");
    // CI is red on the first head: the fix meets the limit, which pauses the agent.
    let stderr = pass(&ws);
    assert_eq!(workers(&ws, "fix_ci"), 1, "{stderr}");
    let status = ws.json(&["status", "--json"]);
    assert_eq!(
        status["agents_paused"].as_array().map(Vec::len),
        Some(1),
        "{status}"
    );
    // Inside the pause no look at the PR starts another.
    pass(&ws);
    pass(&ws);
    assert_eq!(workers(&ws, "fix_ci"), 1);
    // After the reset the next look fixes it.
    std::thread::sleep(std::time::Duration::from_secs(4));
    let stderr = pass(&ws);
    assert_eq!(workers(&ws, "fix_ci"), 2, "{stderr}");
    // The worker the limit stopped spent no attempt.
    assert_eq!(shown(&ws)["runs"][0]["ci_attempts"], 1, "{stderr}");
    let branch = shown(&ws)["runs"][0]["branch_name"]
        .as_str()
        .expect("a branch")
        .to_string();
    git(
        &ws.path().join("remote.git"),
        &["cat-file", "-e", &format!("{branch}:ci-fix.txt")],
    );
}

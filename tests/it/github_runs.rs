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
pub(crate) fn github_workspace(
    github: &FakeGithub,
    forge_extra: &str,
) -> crate::support::Workspace {
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
}

/// A workspace whose one run `G-3` has just opened its draft PR, on a head whose CI is
/// still running (so the run waits).
pub(crate) fn waiting_pr(github: &FakeGithub) -> crate::support::Workspace {
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
    // A GraphQL `errors` answer that names none of the PRs (the fixture's `NOT_FOUND` on
    // another field) is not a gone PR: the run stays, and the pass reports the error.
    github.fail_next(1, Fault::GraphQlErrors);
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("Could not resolve to a PullRequest"),
        "{stderr}"
    );
    let shown = ws.json(&["show", "G-3", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "pr", "{shown}");
    assert_eq!(shown["task"]["status"], "in_progress");

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

/// A merged PR can change no more: once its run is complete and owes nothing, no later
/// tick takes its lease or asks GitHub about it (the batch holds only live PRs).
#[test]
fn a_merged_pr_whose_run_owes_nothing_is_looked_at_no_more() {
    let github = FakeGithub::start_empty();
    let ws = waiting_pr(&github);
    github.merge_pr(PR);
    for _ in 0..2 {
        let out = ws.run(&["run", "--once"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let shown = ws.json(&["show", "G-3", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "complete", "{shown}");
    let before = github.requests().len();
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let number = PR.to_string();
    let asked: Vec<String> = github.requests()[before..]
        .iter()
        .filter(|r| r.path.contains(&number) || r.body.contains(&number))
        .map(|r| format!("{} {} {}", r.method, r.path, r.body))
        .collect();
    assert!(
        asked.is_empty(),
        "the merged PR was looked at again: {asked:#?}"
    );
}

/// The PR numbers a batched GraphQL look asked about (its `$nN` variables).
fn graphql_numbers(body: &str) -> Vec<u64> {
    let Ok(request) = serde_json::from_str::<serde_json::Value>(body) else {
        return Vec::new();
    };
    request["variables"]
        .as_object()
        .map(|vars| {
            vars.iter()
                .filter(|(name, _)| name.starts_with('n'))
                .filter_map(|(_, n)| n.as_u64())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_thousand_merged_prs_leave_the_tick_and_only_the_live_one_is_asked_about() {
    use executor::core::pr::{PrMemory, Stage};
    use executor::core::queue::QueueStatus;
    use executor::core::run::RunState;
    use executor::core::task::NewTask;
    use executor::store::Store;
    const MERGED: u64 = 1_000;
    let github = FakeGithub::start_empty();
    let ws = waiting_pr(&github);

    // A thousand runs completed by their merged PRs, owing nothing, as a long-lived
    // store holds them.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let merged_numbers: Vec<u64> = runtime.block_on(async {
        let store = executor::store::sqlite::SqliteStore::open(&ws.path().join("executor.db"))
            .await
            .expect("open the store");
        let now = chrono::Utc::now();
        let memory = serde_json::to_string(&PrMemory {
            merged: true,
            stage: Stage::Complete,
            ..PrMemory::default()
        })
        .expect("memory as JSON");
        let mut numbers = Vec::new();
        for n in 0..MERGED {
            let gid = format!("M-{n}");
            store
                .upsert_task(
                    &NewTask {
                        task_gid: gid.clone(),
                        source: "cli".into(),
                        description: format!("# Merged {n}"),
                        notes: None,
                        priority: None,
                        initial_status: QueueStatus::Done,
                    },
                    "cli",
                    now,
                )
                .await
                .expect("a done task");
            let mut run = store
                .create_leased_run(&gid, "seed:1:1", now, now)
                .await
                .expect("a run");
            let number = 5_000 + n;
            run.state = RunState::Complete;
            run.pr_number = Some(number as i64);
            run.pr_url = Some(format!("https://github.com/{OWNER}/{REPO}/pull/{number}"));
            run.completed_at = Some(now);
            store
                .end_run(&run, None, Some("seed:1:1"))
                .await
                .expect("completed");
            store
                .save_pr_memory(run.id, &memory, now)
                .await
                .expect("its memory");
            numbers.push(number);
        }
        numbers
    });

    // Each tick, in a fresh process that knows nothing of the last, asks about the live
    // PR only.
    for tick in 0..2 {
        let before = github.requests().len();
        crate::support::assert_success(&ws.run(&["run", "--once"]), "a tick's run --once");
        let requests = github.requests();
        let asked: Vec<u64> = requests[before..]
            .iter()
            .flat_map(|r| graphql_numbers(&r.body))
            .collect();
        assert_eq!(asked, [PR], "tick {tick} asked about {asked:?}");
        let by_path: Vec<&str> = requests[before..]
            .iter()
            .map(|r| r.path.as_str())
            .filter(|path| {
                merged_numbers.iter().any(|n| {
                    path.contains(&format!("/pulls/{n}")) || path.contains(&format!("/issues/{n}"))
                })
            })
            .collect();
        assert!(
            by_path.is_empty(),
            "tick {tick} asked REST about merged PRs: {by_path:?}"
        );
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
    assert_eq!(
        last.lines().next(),
        Some("[ACKNOWLEDGED: out of scope: not for this task]"),
        "{last}"
    );
    assert!(last.contains("<!-- executor:acknowledged -->"), "{last}");

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

/// A worker for the whole life of a PR, keeping every prompt it is given as
/// `prompts-seen/<phase>-<n>.md` (`n` counts that phase's workers from 1), so a second
/// `fix_comments` can be told from the first. Its first `fix_comments` fixes the first
/// thread it is given; a later one acknowledges it as out of scope and changes nothing.
const LIFECYCLE_WORKER: &str = r##"prompt=$(cat); seen=../../prompts-seen; mkdir -p "$seen"
keep() { n=1; while [ -e "$seen/$1-$n.md" ]; do n=$((n+1)); done; printf '%s' "$prompt" > "$seen/$1-$n.md"; }
case "$prompt" in
  *'# Make CI green'*) keep fix_ci; echo fixed >> ci-fix.txt
    echo '[DONE:ci_fixed] fixed the UI test';;
  *'# Address review comments'*) keep fix_comments
    t=$(printf '%s' "$prompt" | grep -o 'Thread `PRRT_[A-Za-z0-9_-]*' | head -n 1 | cut -c9-)
    if [ "$n" = 1 ]; then
      echo removed >> comments.txt
      echo "[STATUS:thread_fixed] thread=$t the old tracking area is removed first"
      echo '[DONE:comments_addressed] 1 fixed, 0 acknowledged'
    elif [ "$n" = 2 ]; then
      echo "[STATUS:thread_acknowledged] thread=$t reason=\"out of scope\" the pinned-tab flicker is another bug"
      echo '[DONE:comments_addressed] 0 fixed, 1 acknowledged'
    else
      c=$(printf '%s' "$prompt" | grep -o 'Thread `comment-[0-9]*' | head -n 1 | cut -c9-)
      echo "looked again" >> comments.txt
      echo "[STATUS:thread_fixed] thread=$c the tab bar hover is checked again"
      echo '[DONE:comments_addressed] 1 fixed, 0 acknowledged'
    fi;;
  *'# Review a pull request'*) keep review; echo '[DONE:review_green] a clean change';;
  *) keep implement; echo hello > greeting.txt; echo '[DONE:implemented] wrote the greeting';;
esac"##;

#[test]
fn a_run_goes_from_push_to_complete_and_back_on_the_owners_comment() {
    use crate::fake_github::{Ci, FIRST_HEAD, FIX_HEAD, RUN_ID};
    let github = FakeGithub::start_empty();
    github.set_ci(FIRST_HEAD, Ci::InProgress);
    let ws = github_workspace_with(
        &github,
        LIFECYCLE_WORKER,
        "required_labels = [\"executor\", \"ai-generated\"]\nrequired_checks = [\"ui-tests\"]\n",
    );
    ws.ok(&["add", "--title", "Fix tab preview", "--gid", "G-7"]);
    ws.ok(&["go", "G-7"]);
    let run_once = || {
        let out = ws.run(&["run", "--once"]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        assert!(!stderr.contains(TOKEN), "the token is never logged");
        stderr
    };
    let shown = || ws.json(&["show", "G-7", "--json"]);
    let run = || shown()["runs"][0].clone();
    let kept = ws.path().join("prompts-seen");
    // Every prompt a worker was given so far, by name: which phases ran, in order of name.
    let seen = || {
        let mut names: Vec<String> = std::fs::read_dir(&kept)
            .map(|dir| {
                dir.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let prompt = |name: &str| {
        std::fs::read_to_string(kept.join(name))
            .unwrap_or_else(|e| panic!("no {name} ({e}); kept: {:?}", seen()))
    };
    let remote = ws.path().join("remote.git");
    let mentions = || {
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

    // 1. The worker's change is pushed and opened as a draft PR with the required labels;
    // CI on its head is still running, so the same pass's look at it starts nobody.
    let stderr = run_once();
    assert_eq!(run()["state"], "pr", "{stderr}");
    assert_eq!(run()["pr_number"], PR);
    assert_eq!(seen(), ["implement-1.md"], "{stderr}");
    let branch = run()["branch_name"].as_str().expect("a branch").to_string();
    git(
        &remote,
        &["cat-file", "-e", &format!("{branch}:greeting.txt")],
    );
    let pr = github.pr(PR).expect("the PR");
    assert_eq!(pr["draft"], true, "{pr}");
    assert_eq!(pr["head"]["ref"], branch.as_str(), "{pr}");
    assert_eq!(pr["head"]["sha"], FIRST_HEAD);
    assert_eq!(github.labels(PR), ["executor", "ai-generated"]);

    // 2. CI still in progress: the next look starts no worker either.
    let stderr = run_once();
    assert_eq!(seen(), ["implement-1.md"], "{stderr}");
    assert_eq!(run()["state"], "pr");
    assert_eq!(run()["ci_attempts"], 0);

    // 3. CI failed: a fix_ci worker told the failed check, the failing step, the end of its
    // log and the run's page; its fix is committed and pushed.
    github.set_ci(FIRST_HEAD, Ci::Failed);
    let stderr = run_once();
    assert_eq!(seen(), ["fix_ci-1.md", "implement-1.md"], "{stderr}");
    let fix_ci = prompt("fix_ci-1.md");
    for expected in [
        "- `ui-tests`".to_string(),
        "** TEST FAILED **".to_string(),
        format!("- CI run: https://github.com/{OWNER}/{REPO}/actions/runs/{RUN_ID}"),
        "fix attempt 1".to_string(),
    ] {
        assert!(
            fix_ci.contains(&expected),
            "{expected} not in the fix_ci prompt:\n{fix_ci}"
        );
    }
    let failing_step = fix_ci
        .lines()
        .find(|l| l.starts_with("- Failing step: "))
        .unwrap_or_else(|| panic!("no failing step in the fix_ci prompt:\n{fix_ci}"));
    assert!(
        failing_step.contains("Run macOS UI Tests CI"),
        "{failing_step}"
    );
    assert_eq!(run()["ci_attempts"], 1);
    assert_eq!(run()["state"], "pr");
    git(
        &remote,
        &["cat-file", "-e", &format!("{branch}:ci-fix.txt")],
    );

    // 4. CI green on the fix, and one unresolved thread by the owner: a fix_comments worker
    // given exactly that thread. It fixes it; the fix is pushed.
    let nodes = fixture_threads();
    let last_body = |t: &serde_json::Value| {
        t["comments"]["nodes"]
            .as_array()
            .and_then(|c| c.last())
            .and_then(|c| c["body"].as_str())
            .unwrap_or("")
            .to_string()
    };
    let first = nodes
        .iter()
        .find(|t| t["isResolved"] == false && !last_body(t).starts_with("[ACKNOWLEDGED:"))
        .expect("a thread that needs work")
        .clone();
    let first_id = first["id"].as_str().expect("an id").to_string();
    github.set_pr_head(PR, FIX_HEAD);
    github.set_ci(FIX_HEAD, Ci::Success);
    github.set_threads(PR, vec![first.clone()]);
    let stderr = run_once();
    assert_eq!(
        seen(),
        ["fix_ci-1.md", "fix_comments-1.md", "implement-1.md"],
        "{stderr}"
    );
    let fix_comments = prompt("fix_comments-1.md");
    let thread_in = |prompt: &str, thread: &serde_json::Value| {
        let heading = format!(
            "`{}`, line {}",
            thread["path"].as_str().expect("a path"),
            thread["line"].as_u64().expect("a line")
        );
        let id = format!("Thread `{}`", thread["id"].as_str().expect("an id"));
        let body = thread["comments"]["nodes"][0]["body"]
            .as_str()
            .expect("a comment")
            .to_string();
        let author = format!(
            "**{}** wrote:",
            thread["comments"]["nodes"][0]["author"]["login"]
                .as_str()
                .expect("an author")
        );
        [heading, id, body, author]
            .iter()
            .all(|expected| prompt.contains(expected.as_str()))
    };
    assert!(thread_in(&fix_comments, &first), "{fix_comments}");
    assert_eq!(
        fix_comments.matches("Thread `PRRT_").count(),
        1,
        "{fix_comments}"
    );
    assert!(
        fix_comments.contains("Reviewers left 1 unresolved thread(s)"),
        "{fix_comments}"
    );
    git(
        &remote,
        &["cat-file", "-e", &format!("{branch}:comments.txt")],
    );
    // executor told the thread's reviewer it was fixed, in the thread.
    let fixed_reply = github
        .threads(PR)
        .into_iter()
        .find(|t| t["id"] == first_id.as_str())
        .map(|t| last_body(&t))
        .unwrap_or_default();
    assert!(
        fixed_reply.starts_with(&format!(
            "Fixed on `{branch}`: the old tracking area is removed first"
        )),
        "{fixed_reply}"
    );
    assert!(
        fixed_reply.contains("<!-- executor:fixed -->"),
        "{fixed_reply}"
    );
    // The push is the PR's new head, green; the fixed thread, still open, is not sent again
    // (executor's own reply does not make it a new thread set).
    let fixed_head = git(&remote, &["rev-parse", &branch]);
    github.set_pr_head(PR, &fixed_head);
    github.set_ci(&fixed_head, Ci::Success);
    let stderr = run_once();
    assert_eq!(
        seen(),
        ["fix_ci-1.md", "fix_comments-1.md", "implement-1.md"],
        "the thread already sent starts nobody: {stderr}"
    );

    // 5. The owner resolves the fixed thread and opens a second one: a second fix_comments
    // worker, given only the new thread, acknowledges it; executor answers the thread with
    // `[ACKNOWLEDGED: …]` on GitHub for it.
    let mut resolved = first.clone();
    resolved["isResolved"] = serde_json::json!(true);
    let mut second = nodes
        .iter()
        .find(|t| t["isResolved"] == false && t["id"] != first["id"])
        .expect("a second open thread")
        .clone();
    // Only the owner's comment: the fixture's thread already holds an answer.
    second["comments"]["nodes"]
        .as_array_mut()
        .expect("comments")
        .truncate(1);
    let second_id = second["id"].as_str().expect("an id").to_string();
    let second_comment = second["comments"]["nodes"][0]["databaseId"]
        .as_u64()
        .expect("a comment id");
    github.set_threads(PR, vec![resolved, second.clone()]);
    let stderr = run_once();
    assert_eq!(
        seen(),
        [
            "fix_ci-1.md",
            "fix_comments-1.md",
            "fix_comments-2.md",
            "implement-1.md"
        ],
        "{stderr}"
    );
    let fix_comments = prompt("fix_comments-2.md");
    assert!(thread_in(&fix_comments, &second), "{fix_comments}");
    assert!(
        !fix_comments.contains(&format!("Thread `{first_id}`")),
        "the resolved thread is not sent: {fix_comments}"
    );
    assert!(!fix_comments.contains(&last_body(&first)), "{fix_comments}");
    assert_eq!(
        fix_comments.matches("Thread `PRRT_").count(),
        1,
        "{fix_comments}"
    );
    let threads = github.threads(PR);
    let answered = threads
        .iter()
        .find(|t| t["id"] == second_id.as_str())
        .expect("the second thread");
    let replies = answered["comments"]["nodes"].as_array().expect("comments");
    assert_eq!(replies.len(), 2, "{answered}");
    let reply = replies[1]["body"].as_str().unwrap_or("");
    assert_eq!(
        reply.lines().next(),
        Some("[ACKNOWLEDGED: out of scope: the pinned-tab flicker is another bug]"),
        "{reply}"
    );
    let untouched = threads
        .iter()
        .find(|t| t["id"] == first_id.as_str())
        .expect("the first thread");
    assert_eq!(
        untouched["comments"]["nodes"].as_array().map(Vec::len),
        Some(1),
        "the resolved thread (as the test set it) gets no answer: {untouched}"
    );
    // The answer went to the REST replies endpoint of the thread's (owner's) comment.
    let replies_path =
        format!("/repos/{OWNER}/{REPO}/pulls/{PR}/comments/{second_comment}/replies");
    let posted: Vec<_> = github
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.contains("/replies"))
        .collect();
    assert_eq!(
        posted.len(),
        2,
        "the fixed reply, then this one: {posted:?}"
    );
    assert_eq!(posted[1].path, replies_path);
    // Acknowledging changed nothing: no commit, the branch (and so the head) stays.
    assert_eq!(git(&remote, &["rev-parse", &branch]), fixed_head);

    // 6. Nothing left to fix: a pr_review worker, told the branch, the base and the required
    // check's result; its verdict is posted as a comment review.
    let stderr = run_once();
    assert_eq!(
        seen(),
        [
            "fix_ci-1.md",
            "fix_comments-1.md",
            "fix_comments-2.md",
            "implement-1.md",
            "review-1.md"
        ],
        "{stderr}"
    );
    let review = prompt("review-1.md");
    for expected in [
        format!("Review the change on `{branch}`"),
        "against\n`main`".to_string(),
        format!("https://github.com/{OWNER}/{REPO}/pull/{PR}"),
        "- `ui-tests`: success".to_string(),
    ] {
        assert!(
            review.contains(&expected),
            "{expected:?} not in the review prompt:\n{review}"
        );
    }
    let reviews = github.reviews();
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    assert_eq!(reviews[0].number, PR);
    assert_eq!(reviews[0].event, "COMMENT");
    assert!(
        reviews[0].body.contains("green") && reviews[0].body.contains("a clean change"),
        "{reviews:?}"
    );
    assert_eq!(run()["state"], "pr");
    assert_eq!(mentions(), 0);

    // 7. Green, reviewed, nothing unresolved: complete, the task done, the owner @mentioned.
    let stderr = run_once();
    let after_review = seen();
    assert_eq!(after_review.len(), 5, "no worker: {stderr}");
    let now = shown();
    assert_eq!(now["runs"][0]["state"], "complete", "{now}");
    assert_eq!(now["task"]["status"], "done");
    assert_eq!(mentions(), 1, "{:?}", github.issue_comments(PR));

    // 8. The owner comments on the complete draft PR: back to `pr`. The next look gives
    // the comment to a fix_comments worker, whose change is pushed and answered on the PR;
    // the new head is reviewed; complete again, and the owner told again.
    github.add_owner_comment(PR, "One more look at the tab bar, please.");
    let owner_comment = github
        .issue_comments(PR)
        .last()
        .and_then(|c| c["id"].as_u64())
        .expect("the owner's comment");
    let stderr = run_once();
    assert_eq!(
        run()["state"],
        "pr",
        "back to pr on the owner's comment: {stderr}"
    );
    assert_eq!(seen(), after_review, "{stderr}");
    let stderr = run_once();
    let fix_comments = prompt("fix_comments-3.md");
    for expected in [
        "The owner's comment on the pull request".to_string(),
        format!("Thread `comment-{owner_comment}`"),
        "One more look at the tab bar, please.".to_string(),
        "Reviewers left 1 unresolved".to_string(),
    ] {
        assert!(
            fix_comments.contains(&expected),
            "{expected:?} not in the fix_comments prompt:\n{fix_comments}\n{stderr}"
        );
    }
    assert_eq!(
        fix_comments.matches("Thread `").count(),
        1,
        "{fix_comments}"
    );
    git(
        &remote,
        &["cat-file", "-e", &format!("{branch}:comments.txt")],
    );
    let answered = github
        .issue_comments(PR)
        .iter()
        .filter_map(|c| c["body"].as_str().map(str::to_owned))
        .find(|b| b.contains(&format!("#issuecomment-{owner_comment}")))
        .expect("the owner's comment answered on the PR");
    assert!(
        answered.contains("the tab bar hover is checked again"),
        "{answered}"
    );
    let head = git(&remote, &["rev-parse", &branch]);
    assert_ne!(head, fixed_head, "the change is pushed");
    github.set_pr_head(PR, &head);
    github.set_ci(&head, Ci::Success);
    let stderr = run_once();
    assert!(
        seen().contains(&"review-2.md".to_string()),
        "the new head is reviewed: {stderr}"
    );
    assert_eq!(github.reviews().len(), 2);
    let stderr = run_once();
    let now = shown();
    assert_eq!(now["runs"][0]["state"], "complete", "{stderr}");
    assert_eq!(now["task"]["status"], "done");
    assert_eq!(mentions(), 2, "{:?}", github.issue_comments(PR));
    assert_eq!(seen().len(), 7, "{:?}", seen());

    // The token is in no prompt any worker was given.
    for name in seen() {
        assert!(!prompt(&name).contains(TOKEN), "the token is in {name}");
    }
}

//! The run loop on the local forge, end to end with real git and real worker processes:
//! plan note, worktree, worker, verification (red first, then a fix_ci worker makes it
//! green), the orchestrator's commit, and the run complete.

use std::path::Path;

use serde_json::Value;

use crate::support::{git, Workspace};

pub(crate) const EXAMPLE_WORKER: &str = env!("CARGO_BIN_EXE_executor-example-worker");

/// A workspace whose runner works on `repo/` (one commit on main) with `worker` and
/// `verify`.
pub(crate) fn workspace(worker: &[&str], verify: &[&str], extra: &str) -> Workspace {
    let ws = Workspace::init();
    let repo = ws.path().join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    crate::support::init_repo(&repo);
    let list = |items: &[&str]| {
        items
            .iter()
            .map(|i| format!("{i:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    ws.write_config(&format!(
        "[storage]\nurl = \"sqlite://executor.db\"\n\n[runner]\nrepository = \"repo\"\nretry_backoff = \"10ms\"\nstop_grace = \"200ms\"\n{extra}\n[agent]\nkind = \"command\"\ncommand = [{}]\n\n[forge]\nverify = [{}]\n",
        list(worker),
        list(verify)
    ));
    ws
}

fn runs(ws: &Workspace, gid: &str) -> Vec<Value> {
    ws.json(&["show", gid, "--json"])["runs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_plan_note_goes_through_red_verification_and_a_fix_ci_worker_to_complete() {
    let mark = tempfile::tempdir().expect("temp dir");
    let mark = mark.path().join("verified-once");
    let verify_script = format!(
        "if [ -f '{m}' ]; then test -f EXECUTOR_EXAMPLE.md && echo 'all green'; else touch '{m}'; echo 'test tab_preview failed'; exit 1; fi",
        m = mark.display()
    );
    let ws = workspace(&[EXAMPLE_WORKER], &["/bin/sh", "-c", &verify_script], "");
    std::fs::write(
        ws.plans().join("tab.md"),
        "---\ngid: T-1\n---\n# Fix tab preview\n\nThe preview sticks.\n",
    )
    .expect("write note");

    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");

    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["task"]["status"], "done", "{stderr}");
    let run = &shown["runs"][0];
    assert_eq!(run["state"], "complete");
    assert_eq!(run["ci_attempts"], 1, "one red verification");
    assert!(run["completed_at"].is_string());
    assert_eq!(run["worker_pid"], Value::Null, "no worker is left running");
    let branch = run["branch_name"].as_str().expect("branch").to_string();
    assert_eq!(branch, "executor/T-1-fix-tab-preview");

    // The orchestrator committed the worker's change on the run's branch.
    let repo = ws.path().join("repo");
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%an", &branch]),
        "executor"
    );
    let files = git(&repo, &["show", "--name-only", "--format=", &branch]);
    assert_eq!(files, "EXECUTOR_EXAMPLE.md");
    let content = git(&repo, &["show", &format!("{branch}:EXECUTOR_EXAMPLE.md")]);
    assert!(
        content.contains("Another pass after a failed verification"),
        "{content}"
    );
    assert_eq!(
        git(&repo, &["rev-parse", "main"]),
        git(&repo, &["rev-parse", &format!("{branch}~1")])
    );

    // Each phase left its readable log and raw transcript.
    let logs: Vec<String> = std::fs::read_dir(ws.path().join("logs/T-1"))
        .expect("logs")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    for prefix in ["queued_", "fix_ci_", "verify_"] {
        for ext in [".md", ".jsonl"] {
            assert!(
                logs.iter()
                    .any(|l| l.starts_with(prefix) && l.ends_with(ext)),
                "{prefix}*{ext} missing from {logs:?}"
            );
        }
    }
    let fix_log = logs
        .iter()
        .find(|l| l.starts_with("fix_ci_") && l.ends_with(".md"))
        .expect("fix_ci log");
    let fix_log = std::fs::read_to_string(ws.path().join("logs/T-1").join(fix_log)).expect("read");
    assert!(fix_log.contains("[DONE:implemented]"), "{fix_log}");

    // `logs` says why verification failed, in the order the workers ran.
    let printed = ws.ok(&["logs", "1"]);
    assert!(
        printed.contains("verification failed (exit 1)")
            && printed.contains("test tab_preview failed"),
        "{printed}"
    );
    assert!(
        printed.contains("verification passed (exit 0)"),
        "{printed}"
    );
    let order: Vec<usize> = ["queued_", "verify_", "fix_ci_"]
        .iter()
        .map(|name| printed.find(name).expect("each phase's log"))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{printed}");

    // Each worker left its run record: the patch and how it ended.
    let record = ws.path().join("logs/T-1/run-1");
    let first = record.join("1-queued");
    let patch = std::fs::read_to_string(first.join("patch.diff")).expect("patch.diff");
    assert!(patch.contains("+++ b/EXECUTOR_EXAMPLE.md"), "{patch}");
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(first.join("result.json")).expect("result.json"),
    )
    .expect("result.json is JSON");
    assert_eq!(result["phase"], "queued");
    assert_eq!(result["exit_code"], 0);
    assert!(result["done"]
        .as_str()
        .is_some_and(|d| d.starts_with("[DONE:implemented]")));
    // The example's worker says nothing on stderr, so it leaves no `stderr.txt`.
    assert!(!first.join("stderr.txt").exists());
    let second = std::fs::read_to_string(record.join("2-fix_ci/patch.diff")).expect("fix_ci patch");
    assert!(
        second.contains("Another pass after a failed verification"),
        "{second}"
    );

    // Each verification's process was recorded like a worker's, and ended.
    let db = rusqlite::Connection::open(ws.path().join("executor.db")).expect("open");
    let verifications: Vec<(Option<String>, Option<String>)> = db
        .prepare(
            "SELECT ended_at, outcome FROM executor_workers WHERE phase = 'verify' ORDER BY id",
        )
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(verifications.len(), 2, "{verifications:?}");
    assert!(verifications.iter().all(|(ended, _)| ended.is_some()));
    assert_eq!(verifications[0].1.as_deref(), Some("failed"));
    assert_eq!(verifications[1].1.as_deref(), Some("passed"));

    // Nothing left to do: a second pass does nothing.
    let again = ws.run(&["run", "--once"]);
    assert!(again.status.success());
    assert_eq!(runs(&ws, "T-1").len(), 1);
}

#[test]
fn a_worker_that_never_reports_done_is_retried_then_abandoned_to_the_owner() {
    let ws = workspace(
        &["/bin/sh", "-c", "echo '[STATUS:working] on it'; exit 0"],
        &[],
        "max_worker_attempts = 2\n",
    );
    ws.ok(&["add", "--title", "Never finishes", "--gid", "T-2"]);
    ws.ok(&["go", "T-2"]);
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = ws.json(&["show", "T-2", "--json"]);
    assert_eq!(shown["task"]["status"], "for_review");
    assert_eq!(shown["runs"][0]["state"], "abandoned");
    let history: Vec<&str> = shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert_eq!(history, ["added", "go", "run_started", "run_abandoned"]);
    let logs = std::fs::read_dir(ws.path().join("logs/T-2"))
        .expect("logs")
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .count();
    assert_eq!(logs, 4, "two workers, a .md and a .jsonl each");
    let records = std::fs::read_dir(ws.path().join("logs/T-2/run-1"))
        .expect("run records")
        .count();
    assert_eq!(records, 2, "one run record per worker");
}

#[test]
fn a_silent_worker_counts_as_stuck() {
    let ws = workspace(
        &["/bin/sh", "-c", "sleep 30"],
        &[],
        "max_worker_attempts = 1\nno_output_timeout = \"300ms\"\n",
    );
    ws.ok(&["add", "--title", "Silent", "--gid", "T-3"]);
    ws.ok(&["go", "T-3"]);
    ws.ok(&["run", "--once"]);
    let run = &runs(&ws, "T-3")[0];
    assert_eq!(run["state"], "abandoned");
    assert_eq!(run["worker_stuck_count"], 1);
}

#[test]
fn without_a_git_repository_the_runner_says_which_path_it_wanted_and_starts_nothing() {
    let ws = Workspace::init();
    ws.write_config("[runner]\nrepository = \"nowhere\"\n\n[agent]\nkind = \"example\"\n");
    ws.ok(&["add", "--title", "A", "--gid", "T-4"]);
    ws.ok(&["go", "T-4"]);
    let stderr = ws.fails_with(2, &["run", "--once"]);
    assert!(
        stderr.contains("nowhere") && stderr.contains("not a git repository"),
        "{stderr}"
    );
    let shown = ws.json(&["show", "T-4", "--json"]);
    assert_eq!(shown["task"]["status"], "approved");
    assert_eq!(shown["runs"], serde_json::json!([]));
}

#[test]
fn the_example_workspace_runs_the_whole_loop_with_the_bundled_worker() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = crate::support::executor(dir.path())
        .args(["init", "demo", "--example"])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("init");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let demo = dir.path().join("demo");
    let out = crate::support::executor(&demo)
        .args(["run", "--once"])
        // No agent CLI on this PATH: the example workspace names the bundled worker.
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("executor-example-worker"), "{stderr}");
    let show = crate::support::executor(&demo)
        .args(["show", "EXAMPLE-1", "--json"])
        .output()
        .expect("show");
    let shown: Value = serde_json::from_slice(&show.stdout).expect("json");
    assert_eq!(shown["task"]["status"], "done");
    assert_eq!(shown["runs"][0]["state"], "complete");
    let branch = shown["runs"][0]["branch_name"].as_str().expect("branch");
    let files = git(
        &demo.join("example-repo"),
        &["show", "--name-only", "--format=", branch],
    );
    assert_eq!(files, "EXECUTOR_EXAMPLE.md");
}

#[test]
fn without_worktrees_workers_run_in_a_plain_folder_that_need_not_be_a_repository() {
    let ws = workspace(
        &[
            "/bin/sh",
            "-c",
            "pwd > where.txt; echo '[DONE:implemented] noted'",
        ],
        &[],
        "worktrees = false\n",
    );
    // The folder workers run in is no repository at all.
    std::fs::remove_dir_all(ws.path().join("repo/.git")).expect("remove .git");
    ws.ok(&["add", "--title", "Note where", "--gid", "T-1"]);
    ws.ok(&["go", "T-1"]);
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(runs(&ws, "T-1")[0]["state"], "complete");
    assert!(ws.path().join("repo/where.txt").exists());
    let doctor = ws.ok(&["doctor"]);
    assert!(doctor.contains("runner.worktrees = false"), "{doctor}");
}

#[test]
fn a_worker_that_finds_no_change_needed_completes_with_its_reason_and_without_one_asks() {
    let ws = workspace(
        &[
            "/bin/sh",
            "-c",
            "case \"$(cat)\" in *Reasoned*) echo '[DONE:no_change] the README already says it';; *) echo '[DONE:no_change]';; esac",
        ],
        &["true"],
        "",
    );
    ws.ok(&[
        "add",
        "--title",
        "Reasoned: say it in the README",
        "--gid",
        "T-1",
    ]);
    ws.ok(&[
        "add",
        "--title",
        "Silent: say it in the README",
        "--gid",
        "T-2",
    ]);
    ws.ok(&["go", "T-1"]);
    ws.ok(&["go", "T-2"]);
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // With its reason: complete, nothing committed, the reason among the run's messages.
    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["task"]["status"], "done", "{shown}");
    assert_eq!(shown["runs"][0]["state"], "complete", "{shown}");
    assert!(
        shown["messages"]
            .to_string()
            .contains("the README already says it"),
        "{shown}"
    );
    // Without one: no answer, so the owner is asked as for any unchanged branch.
    let silent = ws.json(&["show", "T-2", "--json"]);
    assert_ne!(silent["task"]["status"], "done", "{silent}");
    let asked = ws.json(&["escalations", "--json"]);
    let asked = asked.as_array().expect("a list");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["action"], "no_change", "{asked:?}");
    assert_eq!(asked[0]["task_gid"], "T-2", "{asked:?}");
}

#[test]
fn a_worker_that_changed_nothing_asks_the_owner_instead_of_completing() {
    let ws = workspace(
        &[
            "/bin/sh",
            "-c",
            "echo '[DONE:implemented] all done, trust me'",
        ],
        &["true"],
        "",
    );
    std::fs::write(
        ws.plans().join("idle.md"),
        "---\ngid: T-1\n---\n# Change something\n\nIt needs a change.\n",
    )
    .expect("write note");
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_ne!(shown["task"]["status"], "done", "{shown}");
    assert_ne!(shown["runs"][0]["state"], "complete", "{shown}");
    let asked = ws.json(&["escalations", "--json"]);
    assert_eq!(asked[0]["action"], "no_change", "{asked}");
    let detail = asked[0]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("the worker changed nothing"), "{asked}");

    // Where a person looks, the run says it waits on the owner, and for which question.
    let escalation = asked[0]["id"].as_i64().expect("an id");
    let waiting = format!("waiting: escalation {escalation}");
    let queue = ws.ok(&["queue"]);
    assert!(queue.contains(&waiting), "{queue}");
    let listed = ws.ok(&["runs"]);
    assert!(listed.contains(&waiting), "{listed}");
    let shown = ws.ok(&["show", "T-1"]);
    assert!(shown.contains(&waiting), "{shown}");
    assert_eq!(
        ws.json(&["runs", "--json"])[0]["lifecycle"]["stage"],
        "waiting_on_owner"
    );
    // `logs` takes the task's gid, and says what the run waits for.
    let out = ws.run(&["logs", "T-1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("queued_"));
    assert!(
        stderr.contains(&format!("waiting on the owner: escalation {escalation}")),
        "{stderr}"
    );
    let unknown = ws.fails_with(2, &["logs", "EXAMPLE-1"]);
    assert!(unknown.contains("give a run id or a task gid"), "{unknown}");
}

#[test]
fn the_orchestrators_commit_is_authored_by_the_repositorys_own_user() {
    let ws = workspace(&[EXAMPLE_WORKER], &["true"], "");
    let repo = ws.path().join("repo");
    git(&repo, &["config", "user.name", "Repo Owner"]);
    git(&repo, &["config", "user.email", "repo-owner@example.com"]);
    std::fs::write(
        ws.plans().join("mine.md"),
        "---\ngid: T-1\n---\n# Write it\n\nAs me.\n",
    )
    .expect("write note");
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "complete", "{shown}");
    let branch = shown["runs"][0]["branch_name"].as_str().expect("branch");
    assert_eq!(
        git(
            &repo,
            &["log", "-1", "--format=%an <%ae> / %cn <%ce>", branch]
        ),
        "Repo Owner <repo-owner@example.com> / Repo Owner <repo-owner@example.com>"
    );
}

#[test]
fn a_configured_commit_author_signs_the_commit_with_the_runs_trailer() {
    let ws = workspace(
        &[EXAMPLE_WORKER],
        &["true"],
        "commit_author = \"Ada Lovelace <ada@example.com>\"\n",
    );
    let repo = ws.path().join("repo");
    git(&repo, &["config", "user.name", "Repo Owner"]);
    git(&repo, &["config", "user.email", "repo-owner@example.com"]);
    std::fs::write(
        ws.plans().join("mine.md"),
        "---\ngid: T-1\n---\n# Write it\n",
    )
    .expect("note");
    ws.ok(&["run", "--once"]);
    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "complete", "{shown}");
    let run = shown["runs"][0]["id"].as_i64().expect("run id");
    let branch = shown["runs"][0]["branch_name"].as_str().expect("branch");
    assert_eq!(
        git(
            &repo,
            &["log", "-1", "--format=%an <%ae> / %cn <%ce>", branch]
        ),
        "Ada Lovelace <ada@example.com> / Ada Lovelace <ada@example.com>"
    );
    assert_eq!(
        git(
            &repo,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Executor-Run,valueonly)",
                branch
            ]
        ),
        run.to_string()
    );
    // A malformed author is refused where it is written.
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replace("Ada Lovelace <ada@example.com>", "Ada"));
    let stderr = ws.fails_with(2, &["queue"]);
    assert!(stderr.contains("runner.commit_author"), "{stderr}");
}

#[test]
fn auto_with_no_agent_cli_refuses_to_run_and_leaves_the_task_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = tempfile::tempdir().expect("home");
    let out = crate::support::executor(dir.path())
        .args(["init", "."])
        .output()
        .expect("init");
    assert!(out.status.success());
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    crate::support::init_repo(&repo);
    let config = dir.path().join("executor.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replacen("# repository = \".\"", "repository = \"repo\"", 1),
    )
    .expect("config");
    let run = |args: &[&str]| {
        crate::support::executor(dir.path())
            .args(args)
            // A service's bare PATH, and a HOME with no agent installed in it.
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", home.path())
            .output()
            .expect("executor")
    };
    assert!(run(&["add", "--title", "Real work", "--gid", "T-1"])
        .status
        .success());
    assert!(run(&["go", "T-1"]).status.success());
    for command in [&["run", "--once"][..], &["daemon"][..]] {
        let out = run(command);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {stderr}");
        assert!(
            stderr.contains("agent.kind") && stderr.contains("PATH=/usr/bin:/bin"),
            "{stderr}"
        );
        assert!(stderr.contains(".local/bin"), "{stderr}");
    }
    let show: Value =
        serde_json::from_slice(&run(&["show", "T-1", "--json"]).stdout).expect("json");
    assert_eq!(show["task"]["status"], "approved", "{show}");
    assert_eq!(show["runs"].as_array().map(Vec::len), Some(0), "{show}");
}

#[test]
fn the_daemon_runs_a_note_dropped_into_the_plans_folder_to_complete() {
    let ws = workspace(
        &[EXAMPLE_WORKER],
        &["/bin/sh", "-c", "test -s EXECUTOR_EXAMPLE.md"],
        "",
    );
    let daemon = crate::daemon::Daemon::start(&ws);
    std::fs::write(
        ws.plans().join("live.md"),
        "---\ngid: L-1\n---\n# Live task\n",
    )
    .expect("write note");
    let done = |gid: &str| {
        ws.queue()
            .iter()
            .any(|t| t["task_gid"] == gid && t["status"] == "done")
            .then_some(())
    };
    crate::support::eventually(std::time::Duration::from_secs(30), "the note's run", || {
        done("L-1")
    });
    let run = &runs(&ws, "L-1")[0];
    assert_eq!(run["state"], "complete");

    // An `executor go` from another process is picked up too.
    ws.ok(&["add", "--title", "Approved by hand", "--gid", "L-2"]);
    ws.ok(&["go", "L-2"]);
    crate::support::eventually(std::time::Duration::from_secs(30), "the second run", || {
        done("L-2")
    });
    drop(daemon);
}

#[test]
fn a_task_approved_while_a_long_run_works_takes_the_free_slot_at_once() {
    let release = tempfile::tempdir().expect("temp dir");
    let marker = release.path().join("release");
    let worker = format!(
        "if grep -q 'Hold the slot'; then \
           while [ ! -f '{}' ]; do echo '[STATUS:waiting] holding'; sleep 0.2; done; \
         fi; echo done > CHANGED.md; echo '[DONE:implemented] ok'",
        marker.display()
    );
    let ws = workspace(&["/bin/sh", "-c", &worker], &[], "max_workers = 2\n");
    let daemon = crate::daemon::Daemon::start(&ws);
    ws.ok(&["add", "--title", "Hold the slot", "--gid", "H-1"]);
    ws.ok(&["go", "H-1"]);
    crate::support::eventually(std::time::Duration::from_secs(30), "H-1 working", || {
        runs(&ws, "H-1").first()?["worker_pid"].as_u64()
    });

    ws.ok(&["add", "--title", "Quick one", "--gid", "Q-1"]);
    ws.ok(&["go", "Q-1"]);
    let status = |gid: &str| {
        ws.queue()
            .into_iter()
            .find(|t| t["task_gid"] == gid)
            .map(|t| t["status"].as_str().unwrap_or("").to_string())
    };
    crate::support::eventually(std::time::Duration::from_secs(30), "Q-1 done", || {
        (status("Q-1")? == "done").then_some(())
    });
    assert_eq!(
        status("H-1").as_deref(),
        Some("in_progress"),
        "Q-1 did not wait for the long run"
    );

    std::fs::write(&marker, "").expect("release H-1");
    crate::support::eventually(std::time::Duration::from_secs(30), "H-1 done", || {
        (status("H-1")? == "done").then_some(())
    });
    drop(daemon);
}

#[test]
fn kill_9_of_the_runner_with_two_workers_running_is_recovered_on_restart() {
    // Each run first earns both counters, so the restart has something to keep: a silent
    // worker (stopped by the watchdog: stuck count 1), a resume worker whose change fails
    // verification once (ci_attempts 1), then a fix_ci worker still working when its
    // runner is killed; the worker after the restart finishes. The long worker ignores
    // SIGPIPE, so only its keeper can end it when its reader (the killed runner) is gone.
    let worker = "if [ ! -f .silent ]; then touch .silent; sleep 300; \
                  elif [ ! -f .first-done ]; then touch .first-done; echo '[DONE:implemented] first try'; \
                  elif [ ! -f .long ]; then touch .long; trap '' PIPE; \
                    while true; do echo '[STATUS:working] a long job' 2>/dev/null; sleep 0.2; done; \
                  else echo '[DONE:ci_fixed] resumed and finished'; fi";
    let verify = "if [ -f .verified-once ]; then exit 0; else touch .verified-once; exit 1; fi";
    let ws = workspace(
        &["/bin/sh", "-c", worker],
        &["/bin/sh", "-c", verify],
        "no_output_timeout = \"1s\"\n",
    );
    for gid in ["K-1", "K-2"] {
        ws.ok(&["add", "--title", &format!("Long job {gid}"), "--gid", gid]);
        ws.ok(&["go", gid]);
    }
    let daemon = crate::daemon::Daemon::start(&ws);
    let pids: Vec<u32> = crate::support::eventually(
        std::time::Duration::from_secs(60),
        "two live fix_ci workers, each run with both counters at 1",
        || {
            let pids: Vec<u32> = ["K-1", "K-2"]
                .iter()
                .filter_map(|gid| {
                    let run = runs(&ws, gid).first()?.clone();
                    let counted = run["worker_stuck_count"] == 1 && run["ci_attempts"] == 1;
                    let long = Path::new(run["worktree_path"].as_str()?)
                        .join(".long")
                        .exists();
                    if !(counted && long) {
                        return None;
                    }
                    run["worker_pid"].as_u64()
                })
                .filter_map(|pid| u32::try_from(pid).ok())
                .collect();
            (pids.len() == 2).then_some(pids)
        },
    );
    daemon.signal("-KILL");
    assert!(!daemon.wait().success());
    // The runner's end of each keeper's heartbeat closed with it: the keeper ends its
    // worker at once, before any other runner could take the run over.
    for pid in &pids {
        crate::support::eventually(
            std::time::Duration::from_secs(10),
            "the worker ended by its keeper once its runner is gone",
            || {
                executor::supervisor::group::members(*pid)
                    .is_empty()
                    .then_some(())
            },
        );
    }

    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("recovered run"), "{stderr}");
    for pid in &pids {
        crate::support::eventually(
            std::time::Duration::from_secs(10),
            "the leftover group gone",
            || {
                executor::supervisor::group::members(*pid)
                    .is_empty()
                    .then_some(())
            },
        );
    }
    for gid in ["K-1", "K-2"] {
        let shown = ws.json(&["show", gid, "--json"]);
        assert_eq!(shown["task"]["status"], "done", "{gid}: {stderr}");
        let runs = shown["runs"].as_array().expect("runs");
        assert_eq!(
            runs.len(),
            1,
            "{gid}: the same run continued, none started twice"
        );
        assert_eq!(runs[0]["state"], "complete");
        assert_eq!(
            runs[0]["ci_attempts"], 1,
            "{gid}: the counter survived the kill"
        );
        assert_eq!(
            runs[0]["worker_stuck_count"], 1,
            "{gid}: the counter survived the kill"
        );
    }
    let logs: Vec<String> = std::fs::read_dir(ws.path().join("logs/K-1"))
        .expect("logs")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    assert!(
        logs.iter().any(|l| l.starts_with("in_progress_")),
        "a resume worker ran: {logs:?}"
    );
}

#[test]
fn the_worker_cap_is_never_exceeded() {
    let shared = tempfile::tempdir().expect("temp dir");
    let worker = format!(
        "d='{d}'; touch \"$d/$$\"; ls \"$d\" | grep -v log | wc -l >> \"$d/log\"; sleep 0.4; rm \"$d/$$\"; echo done > CHANGED.md; echo '[DONE:implemented] ok'",
        d = shared.path().display()
    );
    let ws = workspace(&["/bin/sh", "-c", &worker], &[], "max_workers = 2\n");
    for n in 0..5 {
        let gid = format!("C-{n}");
        ws.ok(&["add", "--title", &format!("Task {n}"), "--gid", &gid]);
        ws.ok(&["go", &gid]);
    }
    ws.ok(&["run", "--once"]);
    let counts: Vec<u32> = std::fs::read_to_string(shared.path().join("log"))
        .expect("log")
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_eq!(counts.len(), 5, "every task had its worker: {counts:?}");
    assert!(
        counts.iter().all(|c| *c <= 2),
        "at most two at once: {counts:?}"
    );
    assert!(counts.contains(&2), "two did run side by side: {counts:?}");
    for n in 0..5 {
        assert_eq!(runs(&ws, &format!("C-{n}"))[0]["state"], "complete");
    }
}

#[test]
fn two_one_shots_started_together_exactly_one_works() {
    let ws = workspace(
        &["/bin/sh", "-c", "sleep 1; echo '[DONE:implemented] ok'"],
        &[],
        "",
    );
    ws.ok(&["add", "--title", "Slow", "--gid", "S-1"]);
    ws.ok(&["go", "S-1"]);
    let a = ws
        .command(&["run", "--once"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("a");
    let b = ws
        .command(&["run", "--once"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("b");
    let outputs = [
        a.wait_with_output().expect("a"),
        b.wait_with_output().expect("b"),
    ];
    let worked = outputs.iter().filter(|o| o.status.success()).count();
    let refused: Vec<String> = outputs
        .iter()
        .filter(|o| o.status.code() == Some(1))
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .collect();
    assert_eq!(worked, 1, "exactly one works");
    assert_eq!(refused.len(), 1);
    assert!(
        refused[0].contains("another executor runner holds"),
        "{}",
        refused[0]
    );
    assert_eq!(runs(&ws, "S-1").len(), 1);
}

/// The captured Claude Code stream-json transcript of a run that ends in `[DONE:pr_ready]`.
const CLAUDE_STREAM: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/fixtures/agents/claude_stream.jsonl"
);

#[test]
fn a_claude_worker_is_read_through_its_stream_json_and_its_session_is_kept() {
    // A stand-in `claude` on PATH that answers with the captured transcript.
    let bin = tempfile::tempdir().expect("temp dir");
    let args_log = bin.path().join("args.log");
    let fake = bin.path().join("claude");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho \"$@\" >> '{log}'\ncat > /dev/null\necho done > CHANGED.md\ncat '{stream}'\n",
            log = args_log.display(),
            stream = CLAUDE_STREAM
        ),
    )
    .expect("write fake claude");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");

    let mut ws = workspace(&["unused"], &[], "");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replace("kind = \"command\"", "kind = \"claude\""));
    ws.env.push((
        "PATH".into(),
        format!("{}:/usr/bin:/bin", bin.path().display()),
    ));
    ws.ok(&["add", "--title", "Through Claude", "--gid", "A-1"]);
    ws.ok(&["go", "A-1"]);
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");

    let run = &runs(&ws, "A-1")[0];
    assert_eq!(run["state"], "complete", "{stderr}");
    assert_eq!(
        run["worker_session_id"],
        "e7a20cf3-356f-457c-a24a-f92b77635de2"
    );
    let args = std::fs::read_to_string(&args_log).expect("claude was run");
    assert!(
        args.contains("-p") && args.contains("--output-format stream-json"),
        "{args}"
    );
    assert!(args.contains("--verbose"), "{args}");
}

#[test]
fn a_finished_runs_worktree_is_removed_after_the_retention_and_its_branch_kept() {
    let ws = workspace(&[EXAMPLE_WORKER], &[], "keep_worktrees = \"0s\"\n");
    ws.ok(&["add", "--title", "Short lived", "--gid", "R-1"]);
    ws.ok(&["go", "R-1"]);
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("removed 1 finished run worktree"),
        "{stderr}"
    );
    let run = &runs(&ws, "R-1")[0];
    let path = run["worktree_path"].as_str().expect("recorded");
    assert!(!Path::new(path).exists(), "{path} is gone");
    let branch = run["branch_name"].as_str().expect("branch");
    git(
        &ws.path().join("repo"),
        &["show-ref", "--verify", &format!("refs/heads/{branch}")],
    );
}

#[test]
fn finished_worktrees_are_kept_within_the_retention() {
    let ws = workspace(&[EXAMPLE_WORKER], &[], "");
    ws.ok(&["add", "--title", "Kept", "--gid", "R-2"]);
    ws.ok(&["go", "R-2"]);
    ws.ok(&["run", "--once"]);
    let run = &runs(&ws, "R-2")[0];
    assert!(Path::new(run["worktree_path"].as_str().expect("recorded")).exists());
}

#[test]
fn a_missing_base_branch_or_verify_program_stops_the_run_before_any_task_changes() {
    for (extra, verify, fault) in [
        ("base_branch = \"develop\"\n", "/bin/true", "develop"),
        ("", "no-such-verify-program-9", "no-such-verify-program-9"),
    ] {
        let ws = workspace(&[EXAMPLE_WORKER], &[verify], extra);
        ws.ok(&["add", "--title", "Bad base", "--gid", "B-1"]);
        ws.ok(&["go", "B-1"]);
        let stderr = ws.fails_with(2, &["run", "--once"]);
        assert!(stderr.contains(fault), "{stderr}");
        let shown = ws.json(&["show", "B-1", "--json"]);
        assert_eq!(shown["task"]["status"], "approved", "{stderr}");
        assert_eq!(shown["runs"], serde_json::json!([]), "{stderr}");
    }
}

#[test]
fn stopping_the_daemon_leaves_no_worker_process_behind() {
    let ws = workspace(&["/bin/sh", "-c", "sleep 300 & sleep 300"], &[], "");
    ws.ok(&["add", "--title", "Long", "--gid", "D-1"]);
    ws.ok(&["go", "D-1"]);
    let daemon = crate::daemon::Daemon::start(&ws);
    let pid =
        crate::support::eventually(std::time::Duration::from_secs(30), "a live worker", || {
            runs(&ws, "D-1").first()?["worker_pid"]
                .as_u64()
                .and_then(|p| u32::try_from(p).ok())
        });
    assert!(!executor::supervisor::group::members(pid).is_empty());
    daemon.signal("-TERM");
    assert!(daemon.wait().success());
    crate::support::eventually(
        std::time::Duration::from_secs(10),
        "the worker's group gone",
        || {
            executor::supervisor::group::members(pid)
                .is_empty()
                .then_some(())
        },
    );
}

#[test]
fn a_run_another_runner_holds_the_lease_of_is_left_alone_until_the_lease_expires() {
    let worker = "if [ -f .started-once ]; then echo '[DONE:implemented] finished'; \
                  else touch .started-once; echo '[STATUS:working] a long job'; \
                    while true; do sleep 0.2; echo '[STATUS:working] still'; done; fi";
    let ws = workspace(&["/bin/sh", "-c", worker], &[], "");
    ws.ok(&["add", "--title", "Shared queue", "--gid", "S-1"]);
    ws.ok(&["go", "S-1"]);
    let daemon = crate::daemon::Daemon::start(&ws);
    crate::support::eventually(std::time::Duration::from_secs(30), "a live worker", || {
        runs(&ws, "S-1").first()?["worker_pid"].as_u64()
    });
    daemon.signal("-KILL");
    assert!(!daemon.wait().success());

    // As if a runner on another host had picked the run up meanwhile.
    let db = rusqlite::Connection::open(ws.path().join("executor.db")).expect("open");
    let changed = db
        .execute(
            "UPDATE executor_run_leases SET holder = 'other-host:4242:1', \
             expires_at = '2999-01-01T00:00:00.000000Z'",
            [],
        )
        .expect("hand the lease over");
    assert_eq!(changed, 1, "the daemon's run had a lease");
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("another runner carries this run"),
        "{stderr}"
    );
    let run = &runs(&ws, "S-1")[0];
    assert_eq!(run["state"], "in_progress", "left alone: {stderr}");

    // Once the other runner's lease has expired, the run is this runner's to finish.
    db.execute(
        "UPDATE executor_run_leases SET expires_at = '2000-01-01T00:00:00.000000Z'",
        [],
    )
    .expect("expire the lease");
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let shown = ws.json(&["show", "S-1", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "complete", "{stderr}");
    assert_eq!(shown["runs"].as_array().map(Vec::len), Some(1));
}

/// Claude Code's stream-json of a session a model API error ended (`api_error_status` 400).
const CLAUDE_API_ERROR_STREAM: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/fixtures/agents/claude_api_error_stream.jsonl"
);

/// A workspace whose worker is a stand-in `claude` printing the API error transcript with
/// `status`, exiting 1 as Claude Code does, and counting its runs in `calls`.
fn claude_api_error_workspace(status: u16, bin: &Path) -> Workspace {
    let stream = std::fs::read_to_string(CLAUDE_API_ERROR_STREAM)
        .expect("fixture")
        .replace(
            "\"api_error_status\":400",
            &format!("\"api_error_status\":{status}"),
        )
        .replace("API Error: 400", &format!("API Error: {status}"));
    std::fs::write(bin.join("stream.jsonl"), stream).expect("write stream");
    let fake = bin.join("claude");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho run >> '{calls}'\ncat > /dev/null\ncat '{stream}'\nexit 1\n",
            calls = bin.join("calls").display(),
            stream = bin.join("stream.jsonl").display()
        ),
    )
    .expect("write fake claude");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut ws = workspace(&["unused"], &[], "max_worker_attempts = 3\n");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replace("kind = \"command\"", "kind = \"claude\""));
    ws.env
        .push(("PATH".into(), format!("{}:/usr/bin:/bin", bin.display())));
    ws
}

#[test]
fn a_model_api_error_is_the_runs_reason_and_a_refused_request_is_not_retried() {
    for (status, workers) in [(400, 1), (529, 3)] {
        let bin = tempfile::tempdir().expect("temp dir");
        let ws = claude_api_error_workspace(status, bin.path());
        ws.ok(&["add", "--title", "Through a failing API", "--gid", "E-1"]);
        ws.ok(&["go", "E-1"]);
        let out = ws.run(&["run", "--once"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let calls = std::fs::read_to_string(bin.path().join("calls")).expect("claude ran");
        assert_eq!(calls.lines().count(), workers, "{status}: {stderr}");
        let shown = ws.json(&["show", "E-1", "--json"]);
        assert_eq!(shown["runs"][0]["state"], "abandoned", "{status}");
        let said = format!(
            "the model API answered {status}: API Error: {status} fake: scripted invalid request"
        );
        assert!(shown.to_string().contains(&said), "{status}: {shown}");
        let db = rusqlite::Connection::open(ws.path().join("executor.db")).expect("open");
        let outcomes: Vec<String> = db
            .prepare("SELECT outcome FROM executor_workers ORDER BY id")
            .expect("query")
            .query_map([], |row| row.get(0))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("outcomes");
        assert_eq!(outcomes.len(), workers);
        assert!(
            outcomes
                .iter()
                .all(|o| o.starts_with(&said) && o.contains("exited 1")),
            "{outcomes:?}"
        );
    }
}

#[test]
fn a_missing_agent_or_verify_program_stops_the_runner_before_it_claims_anything() {
    let cases: [(&[&str], &[&str], &str); 3] = [
        (
            &["/nonexistent/agent-worker"],
            &["true"],
            "/nonexistent/agent-worker",
        ),
        // A path relative to the worktree is looked for in the repository it checks out.
        (&["scripts/worker.sh"], &["true"], "scripts/worker.sh"),
        (
            &[EXAMPLE_WORKER],
            &["/nonexistent/verify-suite"],
            "/nonexistent/verify-suite",
        ),
    ];
    for (worker, verify, named) in cases {
        let ws = workspace(worker, verify, "");
        ws.ok(&["add", "--title", "Real work", "--gid", "T-1"]);
        ws.ok(&["go", "T-1"]);
        for command in [&["run", "--once"][..], &["daemon"][..]] {
            let out = ws.run(command);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command:?}: {stderr}");
            assert!(
                stderr.contains(named),
                "{command:?} names {named}: {stderr}"
            );
        }
        let shown = ws.json(&["show", "T-1", "--json"]);
        assert_eq!(shown["task"]["status"], "approved", "{shown}");
        assert_eq!(runs(&ws, "T-1").len(), 0, "nothing was claimed: {shown}");
    }
}

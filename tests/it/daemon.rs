//! `executor daemon`: the plans folder watched live, and nothing acknowledged lost when the
//! process is killed.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::{eventually, Workspace};

/// Long enough for a loaded CI machine; the bench measures how fast it really is.
const WAIT: Duration = Duration::from_secs(30);

pub(crate) struct Daemon {
    child: Child,
}

/// The `address=` of the first line of the daemon's log (`daemon.log`) that says `marker`.
pub(crate) fn logged_address(ws: &Workspace, marker: &str) -> String {
    eventually(WAIT, marker, || {
        let log = std::fs::read_to_string(ws.path().join("daemon.log")).ok()?;
        let line = log.lines().find(|l| l.contains(marker))?;
        line.split_whitespace()
            .find_map(|w| w.strip_prefix("address="))
            .map(str::to_string)
    })
}

impl Daemon {
    pub(crate) fn start(ws: &Workspace) -> Self {
        let log = std::fs::File::create(ws.path().join("daemon.log")).expect("daemon log");
        let child = ws
            .command(&["daemon"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("start daemon");
        let daemon = Self { child };
        let pid = daemon.pid();
        eventually(WAIT, "the daemon to report running", || {
            let status = ws.json(&["status", "--json"]);
            status["components"]
                .as_array()?
                .iter()
                .find(|c| c["component"] == "daemon" && c["state"] == "running" && c["pid"] == pid)
                .map(|_| ())
        });
        daemon
    }

    fn pid(&self) -> i64 {
        i64::from(self.child.id())
    }

    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} failed");
    }

    pub(crate) fn wait(mut self) -> std::process::ExitStatus {
        let status = eventually(WAIT, "the daemon to exit", || {
            self.child.try_wait().ok().flatten()
        });
        std::mem::forget(self);
        status
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn gids(ws: &Workspace) -> Vec<String> {
    ws.queue()
        .iter()
        .filter_map(|t| t["task_gid"].as_str().map(str::to_string))
        .collect()
}

fn task(ws: &Workspace, gid: &str) -> Option<Value> {
    ws.queue().into_iter().find(|t| t["task_gid"] == gid)
}

#[test]
fn daemon_takes_in_new_notes_and_reports_the_malformed_one_untouched() {
    let ws = Workspace::init();
    let daemon = Daemon::start(&ws);

    std::fs::write(
        ws.plans().join("tab-preview.md"),
        "---\ntitle: Fix tab preview\npriority: 1\ngid: T-7\nowner_area: tabs\n---\nThe preview sticks after closing a tab.\n",
    )
    .expect("write note");
    std::fs::write(
        ws.plans().join("Speed up startup.md"),
        "Profile the cold start.\n",
    )
    .expect("write note");
    let malformed: &[u8] = b"---\ntitle: \"unterminated\npriority: 3\n---\nbody \xff\n";
    std::fs::write(ws.plans().join("broken.md"), malformed).expect("write note");

    eventually(WAIT, "two tasks from the notes", || {
        (gids(&ws).len() == 2).then_some(())
    });
    let errors = eventually(WAIT, "one reported intake error", || {
        let status = ws.json(&["status", "--json"]);
        let errors = status["intake_errors"].as_array()?.clone();
        (errors.len() == 1).then_some(errors)
    });
    assert!(
        errors[0]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("broken.md")),
        "{errors:?}"
    );
    assert_eq!(
        std::fs::read(ws.plans().join("broken.md")).expect("read"),
        malformed
    );
    let log = std::fs::read_to_string(ws.path().join("daemon.log")).expect("daemon log");
    assert!(
        log.lines()
            .any(|l| l.contains("not taken in") && l.contains("broken.md")),
        "the malformed note is reported in the log:\n{log}"
    );

    let t7 = task(&ws, "T-7").expect("front matter task");
    // Entered approved (the daemon may be working on it by now).
    assert_eq!(
        ws.json(&["show", "T-7", "--json"])["events"][0]["to_status"],
        "approved"
    );
    assert_eq!(t7["priority"], 1);
    assert_eq!(t7["notes"], "owner_area: tabs");
    let derived = gids(&ws)
        .into_iter()
        .find(|g| g != "T-7")
        .expect("derived gid");
    assert!(derived.starts_with("plan-speed-up-startup-"), "{derived}");

    // Editing a note updates its task; deleting it keeps the task.
    std::fs::write(
        ws.plans().join("tab-preview.md"),
        "---\ntitle: Fix tab preview\npriority: 1\ngid: T-7\nowner_area: tabs\n---\nAlso on pinned tabs.\n",
    )
    .expect("edit note");
    eventually(WAIT, "the edit to reach the task", || {
        let description = task(&ws, "T-7")?["description"].as_str()?.to_string();
        description.contains("pinned tabs").then_some(())
    });
    std::fs::remove_file(ws.plans().join("tab-preview.md")).expect("delete note");
    std::fs::write(ws.plans().join("later.md"), "# Later\n").expect("write note");
    eventually(WAIT, "the note written after the delete", || {
        (gids(&ws).len() == 3).then_some(())
    });
    assert!(
        task(&ws, "T-7").is_some(),
        "deleting a note must not delete its task"
    );

    // A clean stop is recorded.
    daemon.signal("-TERM");
    let exit = daemon.wait();
    assert!(exit.success(), "daemon exited with {exit:?}");
    let status = ws.json(&["status", "--json"]);
    assert_eq!(status["components"][0]["state"], "stopped");
}

/// The gids the daemon logged as added (it logs only after the commit).
fn logged_additions(ws: &Workspace) -> Vec<String> {
    let log = std::fs::read_to_string(ws.path().join("daemon.log")).unwrap_or_default();
    log.lines()
        .filter(|line| line.contains("plan note added to the queue"))
        .filter_map(|line| {
            line.split_whitespace()
                .find_map(|word| word.strip_prefix("gid="))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn kill_9_in_the_middle_of_a_burst_loses_nothing_that_was_acknowledged() {
    const NOTES: usize = 300;
    const CLI_ADDS: usize = 20;
    let ws = Workspace::init();
    let daemon = Daemon::start(&ws);

    // Notes arrive in a burst while the CLI adds tasks of its own on the same database.
    let plans = ws.plans();
    let writer = std::thread::spawn(move || {
        for n in 0..NOTES {
            std::fs::write(
                plans.join(format!("note-{n:03}.md")),
                format!("# Note {n}\n"),
            )
            .expect("write note");
        }
    });
    let mut printed = Vec::new();
    for n in 0..CLI_ADDS {
        let gid = ws.ok(&["add", "--title", &format!("CLI task {n}")]);
        printed.push(gid.trim().to_string());
    }
    eventually(WAIT, "the daemon to be part way through the burst", || {
        (logged_additions(&ws).len() >= 20).then_some(())
    });
    daemon.signal("-KILL");
    assert!(!daemon.wait().success());
    writer.join().expect("note writer");

    // Everything acknowledged before the kill is there, with its history.
    let acknowledged = logged_additions(&ws);
    let queue = ws.queue();
    let stored: std::collections::HashSet<&str> = queue
        .iter()
        .filter_map(|t| t["task_gid"].as_str())
        .collect();
    for gid in acknowledged.iter().chain(&printed) {
        assert!(
            stored.contains(gid.as_str()),
            "{gid} was acknowledged but is gone"
        );
    }
    let sample = &acknowledged[acknowledged.len() - 1];
    let shown = ws.json(&["show", sample, "--json"]);
    assert_eq!(shown["events"][0]["kind"], "added", "{shown}");

    // A restart takes in the rest of the burst and a note written while it was down.
    std::fs::write(
        ws.plans().join("while-down.md"),
        "# Written while the daemon was down\n",
    )
    .expect("write note");
    let restarted = Daemon::start(&ws);
    let expected = NOTES + 1 + CLI_ADDS;
    eventually(WAIT, "every note and CLI task", || {
        (gids(&ws).len() == expected).then_some(())
    });
    let all = gids(&ws);
    let unique: std::collections::HashSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), expected, "no task was taken in twice");
    drop(restarted);
}

#[test]
fn one_runner_at_a_time_and_a_crashed_one_never_blocks() {
    let ws = Workspace::init();
    let daemon = Daemon::start(&ws);
    let pid = daemon.pid().to_string();

    // A second daemon and a cron one-shot both exit at once, naming the holder.
    let second = ws.run(&["daemon"]);
    assert_eq!(second.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(&pid) && stderr.contains("runner"),
        "{stderr}"
    );
    let once = ws.run(&["run", "--once"]);
    assert_eq!(once.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&once.stderr).contains(&pid));

    // Killed without a chance to clean up, the holder leaves nothing that blocks.
    daemon.signal("-KILL");
    assert!(!daemon.wait().success());
    ws.ok(&["run", "--once"]);
}

#[test]
fn a_runner_without_a_worker_contract_refuses_to_start_and_says_init_writes_it() {
    let ws = Workspace::init();
    std::fs::remove_file(ws.path().join("roles/worker-policy.json")).expect("remove it");
    let err = ws.fails_with(2, &["run", "--once"]);
    assert!(
        err.contains("roles/worker-policy.json") && err.contains("executor init"),
        "{err}"
    );
}

#[test]
fn a_broken_contract_edit_keeps_the_last_good_one_and_a_bad_contract_stops_the_start() {
    let ws = Workspace::init();
    let contract = ws.path().join("roles/worker-policy.json");
    let good = std::fs::read_to_string(&contract).expect("the contract init wrote");
    let daemon = Daemon::start(&ws);
    std::fs::write(&contract, "{\"contract_version\": 1,\n \"rules\": [}\n").expect("break it");
    let log = ws.path().join("daemon.log");
    eventually(WAIT, "the daemon to report the broken edit", || {
        let text = std::fs::read_to_string(&log).ok()?;
        text.contains("the last good one stays in force")
            .then_some(())
    });
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(
        text.contains("worker-policy.json:2"),
        "names file and line: {text}"
    );
    drop(daemon);

    // A daemon does not start with it.
    let err = ws.fails_with(2, &["daemon"]);
    assert!(err.contains("worker-policy.json:2"), "{err}");
    std::fs::write(&contract, good).expect("fix it");
}

#[test]
fn a_note_saved_in_two_writes_is_taken_in_once_with_its_whole_text() {
    let ws = Workspace::init();
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replacen(
        "path = \"plans\"\n",
        "path = \"plans\"\nsettle = \"1s\"\n",
        1,
    ));
    let daemon = Daemon::start(&ws);

    // An editor's first write lands, then the rest well inside the settle time; the first
    // part alone is a whole note that would be taken in if it were read.
    use std::io::Write;
    let mut note = std::fs::File::create(ws.plans().join("half.md")).expect("create note");
    note.write_all(b"---\ngid: S-1\n---\n# Saved in two writes\n\nThe first half.\n")
        .expect("first write");
    note.sync_all().expect("sync");
    std::thread::sleep(Duration::from_millis(300));
    note.write_all(b"And the second half.\n")
        .expect("second write");
    drop(note);

    let shown = eventually(WAIT, "the note's task", || {
        let out = ws.run(&["show", "S-1", "--json"]);
        out.status
            .success()
            .then(|| serde_json::from_slice::<Value>(&out.stdout).ok())
            .flatten()
    });
    let description = shown["task"]["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("The first half.") && description.contains("And the second half."),
        "{shown}"
    );
    let intake: Vec<&str> = shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .filter(|kind| matches!(*kind, "added" | "updated"))
        .collect();
    assert_eq!(intake, ["added"], "taken in once: {shown}");
    drop(daemon);
}

#[test]
fn an_analyzer_that_cannot_be_built_after_start_is_logged_and_the_daemon_goes_on() {
    let ws = crate::runner::workspace(&[crate::runner::EXAMPLE_WORKER], &["true"], "");
    // Another analyzer holds the lock at start, so this daemon builds its own later.
    let held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(ws.path().join("analyzer.lock"))
        .expect("open the lock");
    held.try_lock().expect("hold the analyzer's lock");
    let daemon = Daemon::start(&ws);
    // Meanwhile the owner saves a prompt that does not compile, then the other one ends.
    std::fs::create_dir_all(ws.path().join("prompts")).expect("mkdir");
    std::fs::write(
        ws.path().join("prompts").join("executor-analyzer.md"),
        "Triage {{ task.title\n",
    )
    .expect("write the prompt");
    held.unlock().expect("release the lock");
    drop(held);
    let log = || std::fs::read_to_string(ws.path().join("daemon.log")).unwrap_or_default();
    eventually(
        WAIT,
        "the daemon to say the analyzer cannot be built",
        || log().contains("cannot build the analyzer").then_some(()),
    );
    // Still running, and still doing its work: a plan note goes through.
    std::fs::write(
        ws.plans().join("go.md"),
        "---\ngid: A-1\n---\n# Still taken in\n",
    )
    .expect("write note");
    eventually(WAIT, "the note to be taken in", || {
        task(&ws, "A-1").map(|_| ())
    });
    let mut daemon = daemon;
    assert!(
        daemon.child.try_wait().expect("try_wait").is_none(),
        "{}",
        log()
    );
    assert_eq!(
        log().matches("cannot build the analyzer").count(),
        1,
        "said once: {}",
        log()
    );
}

#[test]
fn status_shows_the_daemons_last_error_with_its_time_and_count() {
    let ws = Workspace::init();
    let _daemon = Daemon::start(&ws);
    // The repository goes away under the running daemon: its next pass cannot make a
    // worktree and fails as a whole.
    std::fs::rename(ws.path().join(".git"), ws.path().join(".git-away")).expect("move .git");
    ws.ok(&["add", "--title", "Needs a repository", "--gid", "T-1"]);
    ws.ok(&["go", "T-1"]);
    let error = eventually(WAIT, "the daemon's last error in status", || {
        let status = ws.json(&["status", "--json"]);
        status["components"]
            .as_array()?
            .iter()
            .find(|c| c["component"] == "daemon")
            .and_then(|c| c["last_error"].as_object().cloned())
    });
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("runner pass failed"), "{error:?}");
    assert!(message.contains("not a git repository"), "{error:?}");
    assert!(
        error["count"].as_i64().unwrap_or_default() >= 1,
        "{error:?}"
    );
    assert!(error["at"].is_string(), "{error:?}");
    let text = ws.ok(&["status"]);
    assert!(
        text.contains("last error") && text.contains("not a git repository"),
        "{text}"
    );
}

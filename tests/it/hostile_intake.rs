//! Hostile input, through the binary: a config error never prints a secret; one bad plan
//! note or import line (a NUL byte, which Postgres cannot store) is named and skipped while
//! everything else is taken in and the approved work runs, on SQLite and on Postgres alike;
//! titles are capped, committed whatever their length and printed escaped; gids the branch
//! cannot hold as they are still get a branch of their own.

use crate::runner::{workspace, EXAMPLE_WORKER};
use crate::support::{PgSchema, Workspace};

/// A runner workspace, on Postgres when `schema` is given.
fn runner_workspace(schema: Option<&PgSchema>) -> Workspace {
    let mut ws = workspace(&[EXAMPLE_WORKER], &["true"], "");
    if let Some(schema) = schema {
        ws.env
            .push(("EXECUTOR_STORAGE_URL".into(), schema.url_with_schema()));
    }
    ws
}

fn status_of(ws: &Workspace, gid: &str) -> String {
    ws.json(&["show", gid, "--json"])["task"]["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn a_nul_byte_in_one_note_blocks_nothing_else(ws: &Workspace) {
    ws.ok(&["add", "--title", "From the CLI", "--gid", "X-1"]);
    ws.ok(&["go", "X-1"]);
    let plans = ws.plans();
    std::fs::write(plans.join("a.md"), "---\ngid: A-1\n---\n# Before it\n").expect("write");
    std::fs::write(
        plans.join("b.md"),
        b"---\ngid: B-1\n---\n# Poisoned\n\nline three\x00\n".as_slice(),
    )
    .expect("write");
    std::fs::write(plans.join("c.md"), "---\ngid: C-1\n---\n# After it\n").expect("write");

    let stderr = ws.fails_with(1, &["run", "--once"]);
    assert!(
        stderr.contains("b.md: the note holds a NUL byte on line 6"),
        "{stderr}"
    );
    assert!(stderr.contains("1 plan note(s) not taken in"), "{stderr}");
    let gids: Vec<String> = ws
        .queue()
        .iter()
        .filter_map(|t| t["task_gid"].as_str().map(str::to_string))
        .collect();
    assert_eq!(gids, ["X-1", "A-1", "C-1"], "{stderr}");
    for gid in ["X-1", "A-1", "C-1"] {
        assert_eq!(status_of(ws, gid), "done", "{gid} ran: {stderr}");
    }
    let status = ws.json(&["status", "--json"]);
    let errors = status["intake_errors"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(errors.len(), 1, "{status}");
    assert!(errors[0]["path"]
        .as_str()
        .is_some_and(|p| p.ends_with("b.md")));
}

fn a_nul_in_one_import_line_blocks_nothing_else(ws: &Workspace) {
    let file = ws.path().join("tasks.jsonl");
    std::fs::write(
        &file,
        "{\"gid\":\"I-1\",\"title\":\"One\"}\n\
         {\"gid\":\"I-2\",\"title\":\"Two\",\"body\":\"poison \\u0000 here\"}\n\
         {\"gid\":\"I-3\",\"title\":\"Three\"}\n",
    )
    .expect("write");
    let stderr = ws.fails_with(2, &["import", "tasks.jsonl"]);
    assert!(
        stderr.contains("tasks.jsonl line 2: `body` holds a NUL character"),
        "{stderr}"
    );
    assert!(stderr.contains("1 line(s)"), "{stderr}");
    let gids: Vec<String> = ws
        .queue()
        .iter()
        .filter_map(|t| t["task_gid"].as_str().map(str::to_string))
        .collect();
    assert_eq!(gids, ["I-1", "I-3"], "{stderr}");
}

#[test]
fn a_nul_byte_in_one_plan_note_on_sqlite() {
    a_nul_byte_in_one_note_blocks_nothing_else(&runner_workspace(None));
}

#[test]
fn a_nul_in_one_import_line_on_sqlite() {
    a_nul_in_one_import_line_blocks_nothing_else(&runner_workspace(None));
}

#[tokio::test]
async fn a_nul_byte_in_one_plan_note_on_postgres() {
    let Some(schema) = PgSchema::create("nul_note").await else {
        return;
    };
    let ws = runner_workspace(Some(&schema));
    tokio::task::spawn_blocking(move || a_nul_byte_in_one_note_blocks_nothing_else(&ws))
        .await
        .expect("the test ran");
    schema.drop().await;
}

#[tokio::test]
async fn a_nul_in_one_import_line_on_postgres() {
    let Some(schema) = PgSchema::create("nul_import").await else {
        return;
    };
    let ws = runner_workspace(Some(&schema));
    tokio::task::spawn_blocking(move || a_nul_in_one_import_line_blocks_nothing_else(&ws))
        .await
        .expect("the test ran");
    schema.drop().await;
}

#[test]
fn a_config_error_on_a_line_with_a_secret_never_prints_the_secret() {
    let ws = Workspace::init();
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    for line in [
        "token = \"FAKEtok3nVALUE9\" trailing",
        "webhook = { name = \"ops\", url = \"https://hooks.example/FAKEtok3nVALUE9\" ",
        "password = \"FAKEtok3nVALUE9",
    ] {
        ws.write_config(&format!("{config}\n[extra]\n{line}\n"));
        let stderr = ws.fails_with(2, &["status"]);
        assert!(!stderr.contains("FAKEtok3nVALUE9"), "{line}: {stderr}");
        assert!(stderr.contains("***"), "{line}: {stderr}");
        assert!(stderr.contains("executor.toml"), "{line}: {stderr}");
    }
}

#[test]
fn a_reserved_source_is_refused_at_intake_naming_the_note_line_or_flag() {
    // What `executor dispatch` marks its own tasks with is among the reserved.
    assert!(executor::core::task::RESERVED_SOURCES.contains(&executor::runner::drive::DISPATCH));
    let ws = runner_workspace(None);
    std::fs::write(
        ws.plans().join("sneaky.md"),
        "---\ngid: R-1\nsource: dispatch\n---\n# Approved, never run\n",
    )
    .expect("write");
    std::fs::write(ws.plans().join("fine.md"), "---\ngid: R-2\n---\n# Fine\n").expect("write");
    let stderr = ws.fails_with(1, &["run", "--once"]);
    assert!(
        stderr.contains("sneaky.md: front matter `source`: `dispatch` is reserved"),
        "{stderr}"
    );
    let gids: Vec<String> = ws
        .queue()
        .iter()
        .filter_map(|t| t["task_gid"].as_str().map(str::to_string))
        .collect();
    assert_eq!(gids, ["R-2"], "{stderr}");

    std::fs::write(
        ws.path().join("tasks.jsonl"),
        "{\"gid\":\"I-1\",\"title\":\"One\",\"source\":\"dispatch\"}\n{\"gid\":\"I-2\",\"title\":\"Two\"}\n",
    )
    .expect("write");
    let stderr = ws.fails_with(2, &["import", "tasks.jsonl"]);
    assert!(
        stderr.contains("tasks.jsonl line 1: `source`: `dispatch` is reserved"),
        "{stderr}"
    );
    let stderr = ws.fails_with(
        2,
        &[
            "add",
            "--title",
            "X",
            "--gid",
            "X-1",
            "--source",
            "conductor",
        ],
    );
    assert!(
        stderr.contains("--source: `conductor` is reserved"),
        "{stderr}"
    );
}

#[test]
fn a_plan_note_linked_to_the_environment_is_reported_and_never_read() {
    let mut ws = runner_workspace(None);
    ws.env
        .push(("EXECUTOR_TEST_CANARY".into(), "CANARYvalue4711".into()));
    std::os::unix::fs::symlink("/proc/self/environ", ws.plans().join("env.md")).expect("link");
    std::fs::write(
        ws.plans().join("real.md"),
        "---\ngid: P-1\n---\n# Real work\n",
    )
    .expect("write");
    let stderr = ws.fails_with(1, &["run", "--once"]);
    assert!(
        stderr.contains("env.md: a symbolic link to /proc/"),
        "{stderr}"
    );
    assert!(stderr.contains("outside the plans folder"), "{stderr}");
    let queue = ws.queue();
    assert_eq!(queue.len(), 1, "{queue:?}");
    assert_eq!(queue[0]["task_gid"], "P-1");
    assert!(!ws.ok(&["queue", "--json"]).contains("CANARYvalue4711"));
    assert_eq!(status_of(&ws, "P-1"), "done", "{stderr}");
}

#[test]
fn a_title_over_the_cap_is_refused_at_every_intake_naming_the_cap() {
    let ws = runner_workspace(None);
    let long = "x".repeat(executor::core::task::MAX_TITLE_CHARS + 1);
    let stderr = ws.fails_with(2, &["add", "--title", &long, "--gid", "L-1"]);
    assert!(
        stderr.contains("--title: the title is 513 characters long; at most 512"),
        "{stderr}"
    );
    std::fs::write(
        ws.path().join("tasks.jsonl"),
        format!(
            "{{\"gid\":\"L-2\",\"title\":\"{long}\"}}\n{{\"gid\":\"L-3\",\"title\":\"Short\"}}\n"
        ),
    )
    .expect("write");
    let stderr = ws.fails_with(2, &["import", "tasks.jsonl"]);
    assert!(
        stderr.contains("tasks.jsonl line 1: `title`: the title is 513 characters long"),
        "{stderr}"
    );
    std::fs::write(
        ws.plans().join("long.md"),
        format!("---\ngid: L-4\n---\n# {long}\n"),
    )
    .expect("write");
    let stderr = ws.fails_with(1, &["run", "--once"]);
    assert!(
        stderr.contains("long.md: the title is 513 characters long"),
        "{stderr}"
    );
    let gids: Vec<String> = ws
        .queue()
        .iter()
        .filter_map(|t| t["task_gid"].as_str().map(str::to_string))
        .collect();
    assert_eq!(gids, ["L-3"], "{stderr}");
}

#[test]
fn a_title_longer_than_one_argument_may_be_is_still_committed() {
    let ws = runner_workspace(None);
    ws.ok(&["add", "--title", "Short for now", "--gid", "H-1"]);
    ws.ok(&["go", "H-1"]);
    // Past every intake's cap, as a task stored before the cap (or by hand) may be: more
    // than the 128 KiB Linux allows one argument.
    let huge = format!("# Huge {}", "y".repeat(300_000));
    let db = rusqlite::Connection::open(ws.path().join("executor.db")).expect("open");
    db.execute(
        "UPDATE executor_queue SET description = ?1 WHERE task_gid = 'H-1'",
        [&huge],
    )
    .expect("update");
    drop(db);
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{}",
        &stderr[..stderr.len().min(4000)]
    );
    assert_eq!(status_of(&ws, "H-1"), "done");
    let repo = ws.path().join("repo");
    let subject = crate::support::git(&repo, &["log", "-1", "--format=%s", "--all"]);
    assert!(
        subject.starts_with("Huge yyy"),
        "{}",
        &subject[..40.min(subject.len())]
    );
    assert!(subject.trim_end().len() > 200_000);
}

#[test]
fn gids_differing_only_in_characters_a_branch_drops_get_their_own_branches() {
    let ws = runner_workspace(None);
    for gid in ["T:1", "T#1"] {
        ws.ok(&["add", "--title", "Same title", "--gid", gid]);
        ws.ok(&["go", gid]);
    }
    ws.ok(&["run", "--once"]);
    let paths: Vec<String> = ["T:1", "T#1"]
        .iter()
        .map(|gid| {
            assert_eq!(status_of(&ws, gid), "done", "{gid}");
            ws.json(&["show", gid, "--json"])["runs"][0]["worktree_path"]
                .as_str()
                .expect("a worktree")
                .to_string()
        })
        .collect();
    assert_ne!(paths[0], paths[1]);
    let branches = crate::support::git(&ws.path().join("repo"), &["branch", "--list"]);
    assert_eq!(branches.matches("same-title").count(), 2, "{branches}");
}

#[test]
fn hidden_characters_in_a_title_are_printed_escaped() {
    let ws = runner_workspace(None);
    ws.ok(&[
        "add",
        "--title",
        "Fix \u{1b}[31mred\u{202e}txt.exe\u{200b} now",
        "--gid",
        "E-1",
    ]);
    for args in [&["queue"][..], &["show", "E-1"][..]] {
        let shown = ws.ok(args);
        assert!(
            shown.contains("Fix \\u{001b}[31mred\\u{202e}txt.exe\\u{200b} now"),
            "{args:?}: {shown:?}"
        );
        assert!(!shown.contains('\u{1b}') && !shown.contains('\u{202e}'));
    }
    assert_eq!(
        ws.json(&["show", "E-1", "--json"])["task"]["description"],
        "# Fix \u{1b}[31mred\u{202e}txt.exe\u{200b} now",
        "JSON keeps the title as given"
    );
}

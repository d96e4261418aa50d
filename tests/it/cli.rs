//! The command line, as the owner uses it: the real binary in a temp workspace.

use serde_json::Value;

use crate::support::{executor, PgSchema, Workspace, QUEUE_COLUMNS};

#[test]
fn init_add_queue_go_show_walks_a_task_through_the_queue() {
    let ws = Workspace::init();
    let queued_prompt = ws.path().join("prompts/executor-worker-queued.md");
    assert!(
        std::fs::read_to_string(&queued_prompt)
            .expect("the queued-phase prompt is written")
            .contains("_protocol.md"),
        "the phase prompt includes the shared protocol section"
    );
    for made in [
        "executor.toml",
        "roles/worker-policy.json",
        "roles/conductor-policy.json",
        "prompts",
        "plans",
        "executor.db",
    ] {
        assert!(ws.path().join(made).exists(), "init did not make {made}");
    }
    let printed = ws.ok(&["add", "--title", "Fix tab preview", "--gid", "T-1"]);
    assert_eq!(printed.trim(), "T-1");

    let queue = ws.queue();
    assert_eq!(queue.len(), 1);
    assert_eq!(queue[0]["task_gid"], "T-1");
    assert_eq!(queue[0]["status"], "pending");
    assert_eq!(queue[0]["source"], "cli");
    assert_eq!(queue[0]["description"], "# Fix tab preview");

    let moved = ws.ok(&["go", "T-1"]);
    assert_eq!(moved.trim(), "T-1: pending -> approved");
    assert_eq!(ws.queue()[0]["status"], "approved");

    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["task"]["status"], "approved");
    let events = shown["events"].as_array().expect("events");
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(kinds, ["added", "go"]);
    assert_eq!(events[1]["from_status"], "pending");
    assert_eq!(events[1]["to_status"], "approved");
    assert_eq!(events[1]["actor"], "owner");
    assert_eq!(shown["runs"], Value::Array(vec![]));
    assert_eq!(shown["decisions"], Value::Array(vec![]));

    let human = ws.ok(&["show", "T-1"]);
    assert!(human.contains("pending -> approved"), "{human}");
}

#[test]
fn queue_json_carries_exactly_the_owners_columns() {
    let ws = Workspace::init();
    ws.ok(&[
        "add",
        "--title",
        "A",
        "--gid",
        "T-1",
        "--priority",
        "2",
        "--description",
        "body",
    ]);
    let task = ws.queue().remove(0);
    let mut keys: Vec<&str> = task
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    let mut expected = QUEUE_COLUMNS;
    expected.sort_unstable();
    assert_eq!(keys, expected);
    assert_eq!(task["priority"], 2);
    assert_eq!(task["description"], "# A\n\nbody");
}

#[test]
fn adding_the_same_gid_twice_updates_the_task() {
    let ws = Workspace::init();
    ws.ok(&["add", "--title", "First", "--gid", "T-1"]);
    ws.ok(&["go", "T-1"]);
    let out = ws.run(&[
        "add",
        "--title",
        "First, reworded",
        "--gid",
        "T-1",
        "--priority",
        "5",
    ]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("updated the existing task T-1"));
    let queue = ws.queue();
    assert_eq!(queue.len(), 1);
    assert_eq!(queue[0]["description"], "# First, reworded");
    assert_eq!(queue[0]["priority"], 5);
    assert_eq!(
        queue[0]["status"], "approved",
        "re-adding never moves the status"
    );

    ws.ok(&[
        "add",
        "--title",
        "With a body",
        "--gid",
        "T-2",
        "--description",
        "Keep me.",
    ]);
    ws.ok(&[
        "add",
        "--title",
        "Retitled",
        "--gid",
        "T-2",
        "--priority",
        "1",
    ]);
    let t2 = ws
        .queue()
        .into_iter()
        .find(|t| t["task_gid"] == "T-2")
        .expect("T-2");
    assert_eq!(
        t2["description"], "# Retitled\n\nKeep me.",
        "no --description keeps the body"
    );
}

#[test]
fn add_without_gid_generates_a_readable_unique_one() {
    let ws = Workspace::init();
    let a = ws.ok(&["add", "--title", "Speed up startup"]);
    let b = ws.ok(&["add", "--title", "Speed up startup"]);
    assert!(a.trim().starts_with("cli-speed-up-startup-"), "{a}");
    assert_ne!(a, b);
    assert_eq!(ws.queue().len(), 2);
}

#[test]
fn skip_records_the_reason_and_go_overrules_it() {
    let ws = Workspace::init();
    ws.ok(&["add", "--title", "A", "--gid", "T-1"]);
    assert_eq!(
        ws.ok(&["skip", "T-1", "--reason", "not now"]).trim(),
        "T-1: pending -> skip"
    );
    assert_eq!(ws.ok(&["go", "T-1"]).trim(), "T-1: skip -> approved");
    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["events"][1]["detail"], "not now");
}

#[test]
fn queue_filters_by_status() {
    let ws = Workspace::init();
    ws.ok(&["add", "--title", "A", "--gid", "T-1"]);
    ws.ok(&["add", "--title", "B", "--gid", "T-2"]);
    ws.ok(&["go", "T-2"]);
    let approved = ws.json(&["queue", "--status", "approved", "--json"]);
    let gids: Vec<&str> = approved
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|t| t["task_gid"].as_str())
        .collect();
    assert_eq!(gids, ["T-2"]);
    let table = ws.ok(&["queue"]);
    assert!(
        table.lines().next().is_some_and(|h| h.starts_with("GID")),
        "{table}"
    );
    assert!(table.contains("T-1") && table.contains("T-2"), "{table}");
}

#[test]
fn bad_usage_and_bad_input_exit_2_naming_the_culprit() {
    let ws = Workspace::init();
    ws.ok(&["add", "--title", "Done soon", "--gid", "T-1"]);

    let stderr = ws.fails_with(2, &["queue", "--colour"]);
    assert!(stderr.contains("--colour"), "{stderr}");

    let stderr = ws.fails_with(2, &["go", "T-404"]);
    assert!(stderr.contains("T-404"), "{stderr}");

    let stderr = ws.fails_with(2, &["add", "--title", "  "]);
    assert!(stderr.contains("--title"), "{stderr}");

    let stderr = ws.fails_with(2, &["add", "--title", "x", "--gid", "a/b"]);
    assert!(
        stderr.contains("--gid") && stderr.contains("a/b"),
        "{stderr}"
    );

    let stderr = ws.fails_with(2, &["queue", "--status", "finished"]);
    assert!(
        stderr.contains("finished") && stderr.contains("awaiting_go"),
        "{stderr}"
    );

    ws.ok(&["go", "T-1"]);
    let stderr = ws.fails_with(2, &["go", "T-1"]);
    assert!(
        stderr.contains("T-1") && stderr.contains("approved"),
        "{stderr}"
    );

    ws.fails_with(2, &["frobnicate"]);
}

#[test]
fn a_misspelt_config_key_is_named_with_file_and_line() {
    let ws = Workspace::init();
    ws.write_config("[storage]\nurl = \"sqlite://executor.db\"\n\n[runner]\nmax_wrokers = 3\n");
    let stderr = ws.fails_with(2, &["queue"]);
    assert!(stderr.contains("executor.toml"), "{stderr}");
    assert!(stderr.contains("line 5"), "{stderr}");
    assert!(stderr.contains("max_wrokers"), "{stderr}");
}

#[test]
fn an_unknown_storage_scheme_is_named_with_its_line() {
    let ws = Workspace::init();
    ws.write_config("[storage]\nurl = \"mongodb://localhost/q\"\n");
    let stderr = ws.fails_with(2, &["status"]);
    assert!(stderr.contains("line 2, `storage.url`"), "{stderr}");
    assert!(stderr.contains("mongodb"), "{stderr}");
}

#[test]
fn a_password_in_the_config_file_is_refused_without_echoing_it() {
    let ws = Workspace::init();
    ws.write_config("[storage]\nurl = \"postgres://nobody:hunter2@127.0.0.1:5432/test\"\n");
    let stderr = ws.fails_with(2, &["queue"]);
    assert!(stderr.contains("line 2, `storage.url`"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

#[test]
fn a_missing_config_says_how_to_make_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = executor(dir.path()).args(["queue"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("executor init"), "{stderr}");
}

#[test]
fn the_config_can_be_named_by_flag_or_environment_from_anywhere() {
    let ws = Workspace::init();
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let config = ws.path().join("executor.toml");
    let config = config.to_str().expect("utf-8 path");
    let out = executor(elsewhere.path())
        .args([
            "--config", config, "add", "--title", "By flag", "--gid", "F-1",
        ])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = executor(elsewhere.path())
        .env("EXECUTOR_CONFIG", config)
        .args(["add", "--title", "By env", "--gid", "E-1"])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        ws.queue().len(),
        2,
        "both landed in the workspace's own database"
    );
    assert!(!elsewhere.path().join("executor.db").exists());
}

#[test]
fn init_twice_keeps_what_is_there() {
    let ws = Workspace::init();
    ws.write_config("[storage]\nurl = \"sqlite://state/queue.db\"\n");
    let out = ws.ok(&["init", "."]);
    assert!(out.contains("kept     executor.toml"), "{out}");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("read");
    assert!(config.contains("state/queue.db"));
    assert!(ws.path().join("state/queue.db").exists());
}

/// `run --once` with a note that cannot be taken in: the others are taken in (and worked
/// on), the broken one is named, and the exit is 1.
fn run_once_naming_the_broken_note(ws: &Workspace) {
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("broken.md"), "{stderr}");
}

/// The status `gid` entered the queue with.
fn entered_as(ws: &Workspace, gid: &str) -> Value {
    ws.json(&["show", gid, "--json"])["events"][0]["to_status"].clone()
}

#[test]
fn run_once_takes_in_the_plans_folder_and_reports_a_malformed_note_untouched() {
    let ws = Workspace::init();
    std::fs::write(
        ws.plans().join("fix-tab.md"),
        "---\ntitle: Fix tab preview\npriority: 2\ngid: T-9\n---\nThe preview sticks.\n",
    )
    .expect("write note");
    let broken: &[u8] = b"---\ntitle: [oops\n---\nbody\n";
    std::fs::write(ws.plans().join("broken.md"), broken).expect("write note");

    run_once_naming_the_broken_note(&ws);
    let queue = ws.queue();
    assert_eq!(queue.len(), 1);
    assert_eq!(queue[0]["task_gid"], "T-9");
    assert_eq!(
        entered_as(&ws, "T-9"),
        "approved",
        "the owner's notes enter approved"
    );
    assert_eq!(queue[0]["source"], "plans");

    let status = ws.json(&["status", "--json"]);
    let errors = status["intake_errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1);
    assert!(errors[0]["path"]
        .as_str()
        .is_some_and(|p| p.ends_with("broken.md")));
    assert!(
        errors[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("YAML")),
        "{errors:?}"
    );
    assert_eq!(
        std::fs::read(ws.plans().join("broken.md")).expect("read"),
        broken
    );

    std::fs::write(ws.plans().join("broken.md"), "# Fixed now\n").expect("fix note");
    ws.ok(&["run", "--once"]);
    assert_eq!(ws.queue().len(), 2);
    let status = ws.json(&["status", "--json"]);
    assert_eq!(status["intake_errors"], Value::Array(vec![]));
}

#[test]
fn status_shows_the_queue_and_that_no_daemon_ran() {
    let ws = Workspace::init();
    ws.ok(&["add", "--title", "A", "--gid", "T-1"]);
    let status = ws.json(&["status", "--json"]);
    assert_eq!(status["queue"]["pending"], 1);
    assert_eq!(status["queue"]["approved"], 0);
    assert_eq!(status["live_workers"], 0);
    assert_eq!(status["pending_escalations"], 0);
    assert_eq!(status["components"], Value::Array(vec![]));
    let human = ws.ok(&["status"]);
    assert!(human.contains("daemon:  never started"), "{human}");
}

#[tokio::test]
async fn the_same_commands_work_on_postgres() {
    let Some(schema) = PgSchema::create("cli_postgres").await else {
        return;
    };
    let url = schema.url_with_schema();
    let mut ws = Workspace::init();
    ws.env.push(("EXECUTOR_STORAGE_URL".into(), url));
    ws.ok(&["add", "--title", "Fix tab preview", "--gid", "T-1"]);
    ws.ok(&["add", "--title", "Fix tab preview again", "--gid", "T-1"]);
    ws.ok(&["go", "T-1"]);
    let queue = ws.queue();
    assert_eq!(queue.len(), 1);
    assert_eq!(queue[0]["status"], "approved");
    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["events"].as_array().map(Vec::len), Some(3));
    let status = ws.json(&["status", "--json"]);
    assert!(status["storage"]
        .as_str()
        .is_some_and(|s| s.starts_with("postgres://")));

    schema.drop().await;
}

#[tokio::test]
async fn queue_json_lists_a_queue_longer_than_one_page_in_order() {
    let ws = Workspace::init();
    let total = executor::store::TASK_PAGE as usize * 2 + 7;
    {
        let store = executor::store::sqlite::SqliteStore::open(&ws.path().join("executor.db"))
            .await
            .expect("open");
        let at = chrono::Utc::now();
        for n in 0..total {
            let new = executor::core::task::NewTask {
                task_gid: format!("Q-{n}"),
                source: "bulk".into(),
                description: format!("# Task {n}"),
                notes: None,
                priority: None,
                initial_status: executor::core::queue::QueueStatus::Pending,
            };
            executor::store::Store::upsert_task(&store, &new, "bulk", at)
                .await
                .expect("add");
        }
    }
    let queue = ws.queue();
    assert_eq!(queue.len(), total);
    for (n, task) in queue.iter().enumerate() {
        assert_eq!(task["task_gid"], format!("Q-{n}"));
    }
    let approved = ws.json(&["queue", "--status", "approved", "--json"]);
    assert_eq!(approved, Value::Array(vec![]));
}

#[test]
fn service_install_prints_and_writes_the_definitions() {
    let ws = Workspace::init();
    let config = ws.path().join("executor.toml");
    let unit = ws.ok(&["service", "install", "--systemd"]);
    assert!(unit.contains("ExecStart="), "{unit}");
    assert!(
        unit.contains(&format!("--config {} daemon", config.display())),
        "{unit}"
    );
    let cron = ws.ok(&["service", "install", "--cron"]);
    assert!(cron.starts_with("*/5 * * * * "), "{cron}");
    assert!(cron.contains("run --once"), "{cron}");

    let home = tempfile::tempdir().expect("temp home");
    let out = ws
        .command(&["service", "install", "--systemd", "--write"])
        .env("HOME", home.path())
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let units = || -> Vec<std::path::PathBuf> {
        let mut found: Vec<_> = std::fs::read_dir(home.path().join(".config/systemd/user"))
            .expect("unit folder")
            .map(|e| e.expect("entry").path())
            .collect();
        found.sort();
        found
    };
    let written = units();
    assert_eq!(written.len(), 1, "{written:?}");
    let name = written[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with("executor-") && name.ends_with(".service"),
        "{name}"
    );
    assert_eq!(std::fs::read_to_string(&written[0]).expect("unit"), unit);
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains(&format!("systemctl --user enable --now {name}")));

    // A second workspace installs a unit of its own beside the first.
    let other = Workspace::init();
    let out = other
        .command(&["service", "install", "--systemd", "--write"])
        .env("HOME", home.path())
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(units().len(), 2);

    ws.fails_with(2, &["service", "install", "--systemd", "--cron"]);
}

#[test]
fn init_names_a_prompt_override_that_does_not_load() {
    let ws = Workspace::init();
    std::fs::write(
        ws.path().join("prompts/executor-worker-queued.md"),
        "Work on {{ task.nmae }}\n",
    )
    .expect("write override");
    let stderr = ws.fails_with(2, &["init", "."]);
    assert!(stderr.contains("executor-worker-queued.md"), "{stderr}");
    assert!(stderr.contains("task.nmae"), "{stderr}");
}

/// The headings of the README and of every page in `docs/`, without their `#`s.
fn readme_headings() -> Vec<String> {
    crate::docs::pages()
        .iter()
        .flat_map(|(_, text)| {
            text.lines()
                .filter(|l| l.starts_with('#') && l.trim_start_matches('#').starts_with(' '))
                .map(|l| l.trim_start_matches('#').trim().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn every_readme_section_the_help_and_the_config_template_name_exists() {
    let headings = readme_headings();
    let ws = Workspace::init();
    let template = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    let mut texts = vec![template];
    for command in [
        "import",
        "daemon",
        "run",
        "analyze",
        "reanalyze",
        "status",
        "service",
    ] {
        let help = ws.ok(&[command, "--help"]);
        texts.push(help.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    let mut named = 0;
    for text in &texts {
        for reference in text.split("docs: ").skip(1) {
            // `"Asana", "GitHub issues"`: each quoted name up to the closing parenthesis.
            let list = reference.split(')').next().unwrap_or_default();
            for name in list.split('"').skip(1).step_by(2) {
                named += 1;
                assert!(
                    headings.iter().any(|h| h == name
                        || h.starts_with(&format!("{name}:"))
                        || h.starts_with(&format!("{name} "))),
                    "no page of docs/ has a section `{name}`: {headings:?}"
                );
            }
        }
    }
    assert!(named >= 6, "the references were found: {named}");
}

#[test]
fn the_daemons_help_says_what_it_does() {
    let ws = Workspace::init();
    let help = ws.ok(&["daemon", "--help"]);
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for part in [
        "plans folder",
        "polled sources",
        "analyze",
        "run approved",
        "chat",
    ] {
        assert!(help.contains(part), "{part}: {help}");
    }
}

#[test]
fn no_text_says_allowed_tools_skip_the_hook() {
    // The hook judges every tool call, pre-approved or not (the safer behaviour).
    let ws = Workspace::init();
    let template = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    let docs: String = crate::docs::pages()
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    for (name, text) in [("the config template", &template), ("the docs", &docs)] {
        // Comment markers and line breaks apart, as a reader reads it.
        let text = text
            .replace('#', " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(!text.contains("skip the hook"), "{name}");
        let line = text
            .split("allowed_tools")
            .nth(1)
            .unwrap_or_default()
            .chars()
            .take(120)
            .collect::<String>();
        assert!(
            line.contains("the hook still judges every call"),
            "{name}: {line}"
        );
    }
}

#[test]
fn init_inside_a_repository_keeps_its_files_out_of_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    crate::support::init_repo(dir.path());
    std::fs::write(dir.path().join(".gitignore"), "target/\n").expect("owner's ignore");
    crate::support::git(dir.path(), &["add", ".gitignore"]);
    let out = crate::support::executor(dir.path())
        .args(["init", "."])
        .output()
        .expect("init");
    crate::support::assert_success(&out, "init");
    let ws = Workspace {
        dir,
        env: Vec::new(),
    };
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replacen("# kind = \"auto\"", "kind = \"example\"", 1));
    ws.ok(&["add", "--title", "Write it", "--gid", "G-1"]);
    ws.ok(&["go", "G-1"]);
    ws.ok(&["run", "--once"]);
    let ignore = std::fs::read_to_string(ws.path().join(".gitignore")).expect("ignore");
    assert!(
        ignore.starts_with("target/\n"),
        "the owner's lines stay: {ignore}"
    );
    // After a whole run, executor's files (config, database, logs, worktrees, lock) are all
    // ignored: only the owner's edited .gitignore shows.
    assert_eq!(
        crate::support::git(ws.path(), &["status", "--porcelain"]),
        "AM .gitignore"
    );
    ws.ok(&["init", "."]);
    assert_eq!(
        std::fs::read_to_string(ws.path().join(".gitignore")).unwrap(),
        ignore,
        "a second init adds nothing"
    );
}

#[test]
fn completions_and_the_man_page_come_from_the_argument_table() {
    let ws = Workspace::init();
    let bash = ws.ok(&["completions", "bash"]);
    for word in ["doctor", "service", "uninstall", "--offline", "completions"] {
        assert!(bash.contains(word), "{word} in the bash completions");
    }
    assert!(ws.ok(&["completions", "zsh"]).contains("#compdef executor"));
    ws.fails_with(2, &["completions", "tcsh"]);
    let man = ws.ok(&["man"]);
    assert!(man.contains(".TH executor 1"), "{man}");
    assert!(man.contains("doctor"), "{man}");
    let version = ws.ok(&["--version"]);
    let commit = version
        .trim()
        .strip_prefix(concat!("executor ", env!("CARGO_PKG_VERSION"), " ("))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{version}"));
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{version}"
    );
}

#[test]
fn tables_show_times_in_the_owners_zone_to_the_second() {
    if !std::path::Path::new("/usr/share/zoneinfo/Asia/Kolkata").exists() {
        eprintln!("skipped: no time zone database (/usr/share/zoneinfo) on this machine");
        return;
    }
    let ws = Workspace::init();
    ws.ok(&["add", "--title", "A", "--gid", "Z-1"]);
    let added = |tz: &str| -> chrono::NaiveDateTime {
        let out = ws
            .command(&["show", "Z-1"])
            .env("TZ", tz)
            .output()
            .expect("show");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("added "))
            .unwrap_or_else(|| panic!("{text}"));
        let stamp: String = line.chars().take(19).collect();
        chrono::NaiveDateTime::parse_from_str(&stamp, "%Y-%m-%d %H:%M:%S")
            .unwrap_or_else(|e| panic!("{stamp}: {e}"))
    };
    let utc = added("UTC");
    let india = added("Asia/Kolkata");
    assert_eq!(india - utc, chrono::Duration::minutes(330));
    let json = ws.json(&["show", "Z-1", "--json"]);
    assert!(
        json["task"]["added_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{json}"
    );
}

//! `executor import` and `executor reanalyze` through the binary: a bulk load of JSON lines
//! (a bad line named and skipped, the rest taken in), and re-analysis of 924 skipped tasks
//! after a rule filter changed, with `--dry-run` first.

use crate::support::Workspace;
use executor::core::clock::SystemClock;
use executor::core::queue::{QueueEvent, Verdict};
use executor::core::task::Analysis;
use executor::ops::queue as queue_ops;
use executor::store::sqlite::SqliteStore;
use executor::store::Store;

/// 1,000 tasks: 600 with a Figma link, 324 Windows ones, 76 plain macOS ones.
fn thousand_tasks() -> String {
    (0..1000)
        .map(|i| {
            let (body, label) = match i {
                0..600 => (format!("Icons: https://www.figma.com/file/{i}"), "macOS"),
                600..924 => ("Windows installer".to_string(), "Windows"),
                _ => ("Tab strip".to_string(), "macOS"),
            };
            serde_json::json!({
                "gid": format!("A-{i}"), "title": format!("Task {i}"), "body": body,
                "source": "asana", "facts": { "labels": [label] },
            })
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn count(ws: &Workspace, status: &str) -> usize {
    ws.queue().iter().filter(|t| t["status"] == status).count()
}

#[test]
fn an_import_takes_every_good_line_and_names_the_bad_ones() {
    let ws = Workspace::init();
    let file = ws.path().join("tasks.jsonl");
    std::fs::write(
        &file,
        "{\"gid\":\"I-1\",\"title\":\"One\",\"body\":\"First.\",\"priority\":2}\n\
         \n\
         {\"gid\":\"I-2\",\"title\":\"Two\",\"colour\":\"red\"}\n\
         not json at all\n\
         {\"gid\":\"I-3\",\"title\":\"Three\",\"source\":\"asana\",\"facts\":{\"labels\":[\"macOS\"]}}\n",
    )
    .expect("write");
    // Line 6 is not UTF-8; line 7 is a good task after it.
    let mut bytes = std::fs::read(&file).expect("read");
    bytes.extend_from_slice(
        b"{\"gid\":\"I-4\",\"title\":\"\xff\"}\n{\"gid\":\"I-5\",\"title\":\"Five\"}\n",
    );
    std::fs::write(&file, bytes).expect("write");
    let stderr = ws.fails_with(2, &["import", "tasks.jsonl"]);
    assert!(stderr.contains("tasks.jsonl line 3: "), "{stderr}");
    assert!(stderr.contains("colour"), "{stderr}");
    assert!(stderr.contains("tasks.jsonl line 4: "), "{stderr}");
    assert!(stderr.contains("tasks.jsonl line 6: not UTF-8"), "{stderr}");
    assert!(stderr.contains("3 line(s)"), "{stderr}");
    let queue = ws.queue();
    let gids: Vec<&str> = queue
        .iter()
        .filter_map(|t| t["task_gid"].as_str())
        .collect();
    assert_eq!(gids, ["I-1", "I-3", "I-5"]);
    assert!(queue.iter().all(|t| t["status"] == "pending"));
    assert_eq!(queue[0]["source"], "import");
    assert_eq!(queue[0]["priority"], 2);
    assert_eq!(queue[1]["source"], "asana");

    // Importing again updates in place.
    std::fs::write(&file, "{\"gid\":\"I-1\",\"title\":\"One, renamed\"}\n").expect("write");
    let out = ws.ok(&["import", "tasks.jsonl"]);
    assert!(out.contains("0 new, 1 updated"), "{out}");
    assert_eq!(ws.queue().len(), 3);
}

#[test]
fn skipped_tasks_the_changed_rules_let_through_go_back_to_pending_after_a_dry_run() {
    let ws = Workspace::init();
    std::fs::write(ws.path().join("tasks.jsonl"), thousand_tasks()).expect("write");
    let out = ws.run(&["import", "tasks.jsonl"]);
    crate::support::assert_success(&out, "import");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("import: 1000 lines read"), "{stderr}");

    // The first 924 were skipped by the analyzer under the old rules.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = SqliteStore::open(&ws.path().join("executor.db"))
            .await
            .expect("open the workspace's store");
        for i in 0..924 {
            let gid = format!("A-{i}");
            store
                .record_analysis(
                    &gid,
                    &Analysis {
                        summary: Some("skipped by rule `figma`: design work".into()),
                        ..Analysis::default()
                    },
                    chrono::Utc::now(),
                )
                .await
                .expect("summary");
            queue_ops::apply(
                &store,
                &SystemClock,
                &gid,
                QueueEvent::Analyzed(Verdict::Skip),
                "analyzer",
                Some("skipped by rule `figma`: design work".into()),
            )
            .await
            .expect("skip");
        }
        // The owner skipped one more themselves: that decision stands.
        queue_ops::apply(
            &store,
            &SystemClock,
            "A-999",
            QueueEvent::Skip,
            "owner",
            Some("not now".into()),
        )
        .await
        .expect("the owner's skip");
    });
    assert_eq!(count(&ws, "skip"), 925);

    // The Figma rule is dropped; only Windows tasks are still skipped.
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replacen(
        "\n[agent]\n",
        "\n[[analyzer.rules]]\nid = \"not-macos\"\nreason = \"not a macOS task\"\nwhen = { not = { label = \"macOS\" } }\n\n[agent]\n",
        1,
    ));

    let dry = ws.ok(&["reanalyze", "--status", "skip", "--dry-run"]);
    assert!(
        dry.contains(
            "dry run: of 924 `skip` task(s), 600 would go back to pending and 324 stay skipped"
        ),
        "{dry}"
    );
    assert!(dry.contains("still skipped by `not-macos`: 324"), "{dry}");
    assert!(dry.contains("back to pending: A-0"), "{dry}");
    assert!(dry.contains("… and 580 more"), "{dry}");
    assert!(
        dry.contains("left as they are: 1 skipped by the owner or the model"),
        "{dry}"
    );
    assert_eq!(count(&ws, "skip"), 925, "a dry run moves nothing");

    let out = ws.run(&["reanalyze", "--status", "skip"]);
    crate::support::assert_success(&out, "reanalyze");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("of 924 `skip` task(s), 600 went back to pending and 324 stay skipped"),
        "{stdout}"
    );
    assert!(
        stderr.contains("reanalyze: 900 of 924 looked at"),
        "{stderr}"
    );
    assert_eq!(count(&ws, "skip"), 325, "the owner's skip stands");
    assert_eq!(count(&ws, "pending"), 675);
    let history = ws.json(&["show", "A-0", "--json"]);
    assert!(
        history.to_string().contains("reanalyze"),
        "the move is in the task's history: {history}"
    );

    // Nothing left to move; another source has none; only skip can be reanalyzed.
    let again = ws.ok(&["reanalyze", "--status", "skip", "--source", "asana"]);
    assert!(again.contains("0 went back"), "{again}");
    let none = ws.ok(&["reanalyze", "--status", "skip", "--source", "github"]);
    assert!(none.contains("of 0 `skip` task(s) from `github`"), "{none}");
    let stderr = ws.fails_with(2, &["reanalyze", "--status", "done"]);
    assert!(stderr.contains("only `skip` tasks"), "{stderr}");
}

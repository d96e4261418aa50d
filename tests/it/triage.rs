//! The analyzer end to end through the binary: 1,000 tasks from the fake Asana across three
//! sections (and one imported raw-feedback task); `executor analyze --once` skips, by the
//! owner's five rules, exactly the tasks each rule names, with the rule recorded, and never
//! calls the agent for them; the rest are triaged by a scripted agent returning structured
//! answers, and the one that answers garbage twice ends `for_review` with the error noted.

use crate::fake_asana::{FakeAsana, TaskSeed, OWNER_GID, TOKEN};
use crate::support::Workspace;

/// The scripted model: counts its calls, answers garbage for task 8, else a verdict by the
/// task's number.
const MODEL: &str = r#"prompt=$(cat); echo x >> CALLS_FILE
n=$(printf '%s' "$prompt" | grep -o 'Generated task [0-9]*' | head -n 1 | grep -o '[0-9]*$')
if [ "$n" = 8 ]; then echo 'Looks fine to me, no JSON today.'; exit 0; fi
case $((n % 3)) in 0) s=awaiting_go;; 1) s=for_review;; *) s=skip;; esac
printf '```json\n{"status":"%s","priority":2,"complexity":"small","feasibility":"high","analysis_summary":"task %s: %s"}\n```\n' "$s" "$n" "$s""#;

/// What task `i` of the backlog is, by `i % 10`: which rule skips it, or the model.
fn seed(i: usize) -> TaskSeed {
    let task = TaskSeed::numbered(i);
    match i % 10 {
        1 => TaskSeed::new(
            &format!("Generated task {i}"),
            "Timeline: Q3\nProject Advisor: Ana",
        )
        .tag("macOS"),
        2 => TaskSeed::new(
            &format!("Generated task {i}"),
            "Icons: https://www.figma.com/file/abc",
        )
        .tag("macOS"),
        3 => task.tag("macOS").completed(),
        4 => task
            .tag("macOS")
            .assignee("1201999999999999", "Someone Else"),
        8 => task.tag("macOS").assignee(OWNER_GID, "Marek Kowalski"),
        _ => task.tag("Windows"),
    }
}

fn rule_for(i: usize) -> Option<&'static str> {
    match i % 10 {
        1 => Some("project-template"),
        2 => Some("figma"),
        3 | 4 => Some("closed-or-someone-elses"),
        8 => None,
        _ => Some("not-macos"),
    }
}

#[test]
fn the_owners_rules_skip_exactly_their_tasks_and_the_model_triages_the_rest() {
    let asana = FakeAsana::start_empty();
    let backlog = asana.seed_sections("Lumen Browser — Backlog", &[400, 300, 300], seed);
    let mut ws = Workspace::init();
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    let sections = backlog
        .sections
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let rules = executor::core::filter::OWNER_RULES_TOML.replace("[[rules]]", "[[analyzer.rules]]");
    let calls_file = ws.path().join("model-calls");
    let model =
        serde_json::to_string(&MODEL.replace("CALLS_FILE", &format!("'{}'", calls_file.display())))
            .expect("quoted");
    let config = config
        // The workspace names the example worker; this one's model replaces it.
        .replacen("kind = \"example\"", "# kind = \"example\"", 1)
        .replacen(
            "\n[agent]\n",
            &format!("\n{rules}\n[agent]\nkind = \"command\"\ncommand = [\"/bin/sh\", \"-c\", {model}]\n"),
            1,
        )
        .replacen("[analyzer]\n", "[analyzer]\nhard_timeout = \"1m\"\n", 1);
    ws.write_config(&format!(
        "{config}\n[sources.asana]\napi_url = \"{}\"\ntoken_env = \"ASANA_TEST_TOKEN\"\nsections = [{sections}]\ninclude_completed = true\n",
        asana.url()
    ));
    ws.env.push(("ASANA_TEST_TOKEN".into(), TOKEN.into()));

    // The tasks come in; one raw-feedback task is imported beside them.
    let out = ws.run(&["run", "--once"]);
    crate::support::assert_success(&out, "run --once");
    std::fs::write(
        ws.path().join("feedback.jsonl"),
        "{\"gid\":\"F-1\",\"title\":\"it crashes on macOS\",\"source\":\"user_feedback_raw\"}\n",
    )
    .expect("write");
    ws.ok(&["import", "feedback.jsonl"]);
    assert_eq!(ws.queue().len(), 1001);

    let out = ws.run(&["analyze", "--once"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("analyzed 1001: 901 skipped by rules"),
        "{stdout}"
    );
    assert!(stdout.contains("rule `not-macos`: 500"), "{stdout}");
    assert!(stdout.contains("rule `raw-feedback`: 1"), "{stdout}");
    assert!(stdout.contains("1 failed (for review)"), "{stdout}");

    // Every task where it belongs, the rule named on each skipped one.
    let queue = ws.queue();
    assert!(
        queue.iter().all(|t| t["status"] != "pending"),
        "none left pending"
    );
    for (i, gid) in backlog.tasks.iter().enumerate() {
        let task = queue
            .iter()
            .find(|t| t["task_gid"] == gid.as_str())
            .unwrap_or_else(|| panic!("task {i} is queued"));
        let summary = task["analysis_summary"].as_str().unwrap_or("");
        match rule_for(i) {
            Some(rule) => {
                assert_eq!(task["status"], "skip", "task {i}");
                assert!(
                    summary.contains(&format!("`{rule}`")),
                    "task {i}: {summary}"
                );
            }
            None if i == 8 => {
                assert_eq!(task["status"], "for_review", "task 8");
                let notes = task["notes"].as_str().unwrap_or("");
                assert!(notes.contains("the analysis failed 2 times"), "{notes}");
            }
            None => {
                let expected = ["awaiting_go", "for_review", "skip"][i % 3];
                assert_eq!(task["status"], expected, "task {i}");
                assert_eq!(summary, format!("task {i}: {expected}"));
                assert_eq!(task["complexity"], "small");
                assert_eq!(task["priority"], 2);
            }
        }
    }
    let feedback = queue
        .iter()
        .find(|t| t["task_gid"] == "F-1")
        .expect("the imported task");
    assert_eq!(feedback["status"], "skip");

    // The model was asked about the 100 tasks no rule skipped, and twice about task 8.
    let calls = std::fs::read_to_string(&calls_file).unwrap_or_default();
    assert_eq!(calls.lines().count(), 101, "agent calls");

    // A second pass finds nothing to do.
    let again = ws.ok(&["analyze", "--once"]);
    assert!(again.contains("analyzed 0"), "{again}");
    // `executor status` says the analyzer ran and stopped.
    let status = ws.json(&["status", "--json"]);
    let analyzer = status["components"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["component"] == "analyzer"))
        .cloned()
        .unwrap_or_else(|| panic!("no analyzer in {status}"));
    assert_eq!(analyzer["state"], "stopped", "{analyzer}");
}

#[test]
fn the_analyzer_runs_beside_a_runner_but_not_beside_another_analyzer() {
    let ws = Workspace::init();
    ws.ok(&["add", "--title", "Something", "--gid", "P-1"]);
    let lock = |name: &str| {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(ws.path().join(name))
            .expect("open the lock file");
        file.try_lock().expect("take the lock");
        file
    };

    let runner = lock("runner.lock");
    let analyzer = lock("analyzer.lock");
    let stderr = ws.fails_with(1, &["analyze", "--once"]);
    assert!(
        stderr.contains("another executor analyzer holds"),
        "{stderr}"
    );
    assert_eq!(ws.queue()[0]["status"], "pending");
    drop(analyzer);

    // With only the runner's lock held, the analyzer works (the bundled example worker is
    // no analyst: it sends the task to the owner, saying so).
    ws.ok(&["analyze", "--once"]);
    let task = &ws.queue()[0];
    assert_eq!(task["status"], "for_review", "{task}");
    let summary = task["analysis_summary"].as_str().unwrap_or("");
    assert!(summary.contains("bundled example worker"), "{summary}");
    drop(runner);
}

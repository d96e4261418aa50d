//! `executor runs` and `executor logs RUN`: the runs, newest first, and one run's work logs.

use crate::runner::workspace;

#[test]
fn runs_are_listed_and_a_runs_work_logs_are_printed() {
    let ws = workspace(
        &[
            "/bin/sh",
            "-c",
            "cat >/dev/null; echo 'looking at it'; echo changed > CHANGED.md; echo '[DONE:implemented] done'",
        ],
        &[],
        "",
    );
    ws.ok(&["add", "--title", "First", "--gid", "L-1"]);
    ws.ok(&["add", "--title", "Second", "--gid", "L-2"]);
    ws.ok(&["go", "L-1"]);
    ws.ok(&["run", "--once"]);
    ws.ok(&["go", "L-2"]);
    ws.ok(&["run", "--once"]);

    let runs = ws.json(&["runs", "--json"]);
    let listed: Vec<(&str, &str)> = runs
        .as_array()
        .expect("an array")
        .iter()
        .map(|r| {
            (
                r["task_gid"].as_str().unwrap_or_default(),
                r["state"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [("L-2", "complete"), ("L-1", "complete")],
        "newest first"
    );
    let table = ws.ok(&["runs"]);
    assert!(
        table.contains("RUN") && table.contains("L-1") && table.contains("complete"),
        "{table}"
    );
    assert_eq!(ws.ok(&["runs", "--state", "abandoned"]).trim(), "no runs");
    // A narrow terminal: every line fits it, the branch cut with an ellipsis.
    let out = ws
        .command(&["runs"])
        .env("COLUMNS", "110")
        .output()
        .expect("runs");
    let narrow = String::from_utf8_lossy(&out.stdout).into_owned();
    for line in narrow.lines() {
        assert!(line.chars().count() <= 110, "{line:?} in\n{narrow}");
    }
    assert!(narrow.contains('…'), "{narrow}");

    let id = runs[1]["id"].as_i64().expect("L-1's run").to_string();
    let logs = ws.ok(&["logs", &id]);
    assert!(
        logs.contains("==> ") && logs.contains("/L-1/queued_"),
        "{logs}"
    );
    assert!(
        logs.contains("[DONE:implemented] done") && logs.contains("worker ended: done"),
        "{logs}"
    );
    assert!(!logs.contains("/L-2/"), "only this run's logs: {logs}");
    // Following a run that has ended prints it and returns.
    let followed = ws.ok(&["logs", "-f", &id]);
    assert_eq!(followed, logs);
    let err = ws.fails_with(2, &["logs", "999"]);
    assert!(err.contains("no run 999"), "{err}");
}

/// `--limit` and `--before` page through the runs, newest first; the table says how to see
/// the next page; a state that is no run state is refused with the ones that are.
#[test]
fn runs_are_paged_with_limit_and_before() {
    let ws = workspace(
        &[
            "/bin/sh",
            "-c",
            "echo changed > CHANGED.md; echo '[DONE:implemented] done'",
        ],
        &[],
        "",
    );
    for n in 1..=3 {
        let gid = format!("P-{n}");
        ws.ok(&["add", "--title", &format!("Task {n}"), "--gid", &gid]);
        ws.ok(&["go", &gid]);
        ws.ok(&["run", "--once"]);
    }
    let ids = |args: &[&str]| -> Vec<i64> {
        let mut all = vec!["runs", "--json"];
        all.extend_from_slice(args);
        ws.json(&all)
            .as_array()
            .expect("an array")
            .iter()
            .map(|r| r["id"].as_i64().expect("an id"))
            .collect()
    };
    let every = ids(&[]);
    assert_eq!(every.len(), 3, "{every:?}");
    let first = ids(&["--limit", "2"]);
    assert_eq!(first, every[..2], "the newest two");
    let before = first[1].to_string();
    assert_eq!(
        ids(&["--limit", "2", "--before", &before]),
        every[2..],
        "then the last"
    );
    assert_eq!(
        ids(&["--before", &before]),
        every[2..],
        "older than a run, no limit"
    );
    assert_eq!(ids(&["--state", "complete", "--limit", "1"]), every[..1]);

    let table = ws.ok(&["runs", "--limit", "2"]);
    assert!(
        table.contains(&format!("executor runs --limit 2 --before {before}")),
        "{table}"
    );
    assert!(
        !ws.ok(&["runs", "--limit", "3"]).contains("--before"),
        "a page with nothing after it points nowhere"
    );
    let err = ws.fails_with(2, &["runs", "--state", "done"]);
    assert!(err.contains("done") && err.contains("complete"), "{err}");
    let err = ws.fails_with(2, &["runs", "--limit", "0"]);
    assert!(err.contains("--limit"), "{err}");
}

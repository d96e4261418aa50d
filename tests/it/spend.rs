//! What workers spent, read from their agents' own result events: a stand-in `claude`,
//! `codex` or `pi` on `PATH` answers with the captured transcript of the real CLI, and
//! `show`, `runs`, `status` and the metrics give that worker's tokens, turns and cost,
//! summed per run, task, day and agent (Codex's cost priced by `[spend.prices.codex]`).

use std::path::PathBuf;

use serde_json::Value;

use crate::daemon::Daemon;
use crate::runner::workspace;
use crate::support::Workspace;

fn transcript(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A workspace whose agent `kind` is a stand-in that prints `stream`, with two tasks
/// approved.
fn agent_workspace(kind: &str, stream: PathBuf, extra: &str) -> (Workspace, tempfile::TempDir) {
    let bin = tempfile::tempdir().expect("temp dir");
    let fake = bin.path().join(kind);
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\ncat > /dev/null\necho done > CHANGED.md\ncat '{}'\n",
            stream.display()
        ),
    )
    .expect("write the stand-in agent");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut ws = workspace(&["unused"], &[], "");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!(
        "{}\n{extra}",
        config.replace("kind = \"command\"", &format!("kind = \"{kind}\""))
    ));
    ws.env.push((
        "PATH".into(),
        format!("{}:/usr/bin:/bin", bin.path().display()),
    ));
    for gid in ["S-1", "S-2"] {
        ws.ok(&["add", "--title", "Spend something", "--gid", gid]);
        ws.ok(&["go", gid]);
    }
    for _ in 0..2 {
        let out = ws.run(&["run", "--once"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (ws, bin)
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-9)
}

/// One worker's spend as `show` and `status` sum it, for each of the two tasks.
fn assert_spent(ws: &Workspace, agent: &str, tokens: (i64, i64, i64), turns: i64, cost: f64) {
    for gid in ["S-1", "S-2"] {
        let shown = ws.json(&["show", gid, "--json"]);
        assert_eq!(shown["runs"][0]["state"], "complete", "{shown}");
        let run_id = shown["runs"][0]["id"].as_i64().expect("a run").to_string();
        let total = &shown["spend"]["total"];
        assert_eq!(total["workers"], 1, "{shown}");
        assert_eq!(total["input_tokens"], tokens.0, "{total}");
        assert_eq!(total["output_tokens"], tokens.1, "{total}");
        assert_eq!(total["cached_tokens"], tokens.2, "{total}");
        assert_eq!(total["turns"], turns, "{total}");
        assert!(close(&total["cost_usd"], cost), "{total}");
        assert_eq!(total["unpriced_workers"], 0, "{total}");
        assert_eq!(&shown["spend"]["by_run"][&run_id], total, "{shown}");
        assert_eq!(&shown["spend"]["by_agent"][agent], total, "{shown}");
        let text = ws.ok(&["show", gid]);
        assert!(text.contains(&format!("spend: ${cost:.4}")), "{text}");
    }
    let status = ws.json(&["status", "--json"]);
    let spend = &status["spend"];
    for total in [&spend["total"], &spend["today"], &spend["by_agent"][agent]] {
        assert_eq!(total["workers"], 2, "{spend}");
        assert_eq!(total["input_tokens"], 2 * tokens.0, "{spend}");
        assert_eq!(total["output_tokens"], 2 * tokens.1, "{spend}");
        assert_eq!(total["turns"], 2 * turns, "{spend}");
        assert!(close(&total["cost_usd"], 2.0 * cost), "{spend}");
    }
    assert_eq!(
        &spend["by_day"][spend["day"].as_str().expect("a day")],
        &spend["today"]
    );
    let runs = ws.ok(&["runs"]);
    assert!(
        runs.lines().next().is_some_and(|l| l.contains("COST")),
        "{runs}"
    );
    assert_eq!(runs.matches(&format!("${cost:.4} ")).count(), 2, "{runs}");
    let status = ws.ok(&["status"]);
    assert!(
        status.contains(&format!(
            "spend today ({}): ${:.4}",
            spend["day"].as_str().unwrap_or(""),
            2.0 * cost
        )),
        "{status}"
    );
}

#[test]
fn a_claude_workers_usage_and_cost_are_summed_per_run_task_day_and_agent() {
    let (ws, _bin) = agent_workspace(
        "claude",
        transcript("../shared/fixtures/agents/claude_stream.jsonl"),
        "",
    );
    // The result event: usage 200 in, 40 out, 2 turns, total_cost_usd 0.0016.
    assert_spent(&ws, "claude", (200, 40, 0), 2, 0.0016);

    // The metrics say the same, by agent.
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!("{config}\n[web]\nlisten = \"127.0.0.1:0\"\n"));
    let _daemon = Daemon::start(&ws);
    let address = crate::console::console_address(&ws);
    let (code, metrics) = crate::console::call(&address, "GET", "/metrics", &[], "");
    assert_eq!(code, 200);
    let metrics = metrics.as_str().expect("text").to_string();
    assert!(
        metrics.contains("executor_spend_usd_total{agent=\"claude\"} 0.0032"),
        "{metrics}"
    );
    assert!(
        metrics.contains("executor_tokens_total{agent=\"claude\",kind=\"input\"} 400"),
        "{metrics}"
    );
    assert!(
        metrics.contains("executor_turns_total{agent=\"claude\"} 4"),
        "{metrics}"
    );
    // The console's Runs page shows each run's cost.
    let (code, page) = crate::console::call(&address, "GET", "/runs", &[], "");
    assert_eq!(code, 200);
    assert_eq!(
        page.as_str().unwrap_or("").matches(">$0.0016</td>").count(),
        2,
        "{page}"
    );
}

#[test]
fn a_codex_workers_tokens_are_priced_by_the_price_table() {
    let (ws, _bin) = agent_workspace(
        "codex",
        transcript("../shared/fixtures/agents/codex_exec.jsonl"),
        "[spend.prices.codex]\ninput_per_mtok = 1.25\ncached_input_per_mtok = 0.125\noutput_per_mtok = 10.0\n",
    );
    // turn.completed: 200 in, 40 out, no cost: 200 × 1.25/M + 40 × 10/M = $0.00065.
    assert_spent(&ws, "codex", (200, 40, 0), 1, 0.00065);
}

#[test]
fn a_codex_worker_without_a_price_has_tokens_but_no_cost() {
    let (ws, _bin) = agent_workspace(
        "codex",
        transcript("../shared/fixtures/agents/codex_exec.jsonl"),
        "",
    );
    let shown = ws.json(&["show", "S-1", "--json"]);
    let total = &shown["spend"]["total"];
    assert_eq!(
        (
            total["input_tokens"].as_i64(),
            total["unpriced_workers"].as_i64()
        ),
        (Some(200), Some(1)),
        "{total}"
    );
    assert!(close(&total["cost_usd"], 0.0), "{total}");
    let runs = ws.ok(&["runs"]);
    assert_eq!(runs.matches("$0.0000+").count(), 2, "{runs}");
}

#[test]
fn a_pi_workers_usage_and_cost_are_summed_over_its_turns() {
    let (ws, _bin) = agent_workspace("pi", transcript("tests/fixtures/pi/pi_json.jsonl"), "");
    // agent_end: two assistant messages of 100 in and 20 out each, cost 0 (a local model).
    assert_spent(&ws, "pi", (200, 40, 0), 2, 0.0);
}

/// A stand-in `claude` that answers with the captured transcript, without its `[DONE]` line
/// the first `undone` times; each start is counted in `starts`.
fn counting_claude(bin: &std::path::Path, undone: u32) -> PathBuf {
    let starts = bin.join("starts");
    let stream = transcript("../shared/fixtures/agents/claude_stream.jsonl");
    let fake = bin.join("claude");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\ncat > /dev/null\necho start >> '{starts}'\necho done > CHANGED.md\n\
             if [ \"$(wc -l < '{starts}')\" -le {undone} ]; then sed 's/\\[DONE:pr_ready\\]/(not yet)/g' '{stream}'; else cat '{stream}'; fi\n",
            starts = starts.display(),
            stream = stream.display()
        ),
    )
    .expect("write the stand-in agent");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    starts
}

fn claude_workspace(bin: &std::path::Path, runner: &str, extra: &str) -> Workspace {
    let mut ws = workspace(&["unused"], &[], runner);
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!(
        "{}\n{extra}",
        config.replace("kind = \"command\"", "kind = \"claude\"")
    ));
    ws.env
        .push(("PATH".into(), format!("{}:/usr/bin:/bin", bin.display())));
    ws
}

fn starts(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

#[test]
fn a_run_over_its_tasks_budget_starts_no_new_worker_and_asks_the_owner() {
    let bin = tempfile::tempdir().expect("temp dir");
    let started = counting_claude(bin.path(), 1);
    // One worker costs $0.0016: the first leaves the task over its $0.001.
    let ws = claude_workspace(bin.path(), "", "[budget]\nper_task_usd = 0.001\n");
    ws.ok(&["add", "--title", "Spend something", "--gid", "B-1"]);
    ws.ok(&["go", "B-1"]);
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(starts(&started), 1, "no second worker over the budget");
    let pending = ws.json(&["escalations", "--json"]);
    let asked = pending
        .as_array()
        .and_then(|e| e.iter().find(|e| e["action"] == "budget"))
        .cloned()
        .unwrap_or_else(|| panic!("a budget escalation: {pending}"));
    let detail = asked["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("per_task_usd = 0.001"), "{detail}");
    let shown = ws.json(&["show", "B-1", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "in_progress", "{shown}");

    // The owner lets it go on: one more worker starts, says [DONE], the run completes.
    let id = asked["id"].as_i64().expect("an id").to_string();
    ws.ok(&["decide", &id, "approve"]);
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(starts(&started), 2);
    let shown = ws.json(&["show", "B-1", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "complete", "{shown}");
    assert_eq!(shown["spend"]["total"]["workers"], 2, "{shown}");
}

#[test]
fn over_the_days_budget_no_new_task_is_taken_and_status_says_until_when() {
    let bin = tempfile::tempdir().expect("temp dir");
    let started = counting_claude(bin.path(), 0);
    let ws = claude_workspace(
        bin.path(),
        "max_workers = 1\n",
        "[budget]\nper_day_usd = 0.001\n",
    );
    for gid in ["D-1", "D-2"] {
        ws.ok(&["add", "--title", "Spend something", "--gid", gid]);
        ws.ok(&["go", gid]);
    }
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert_eq!(starts(&started), 1, "{stderr}");
    assert_eq!(
        stderr.matches("No new task is taken").count(),
        1,
        "the owner is told once: {stderr}"
    );
    let statuses: Vec<Value> = ["D-1", "D-2"]
        .iter()
        .map(|gid| ws.json(&["show", gid, "--json"])["task"]["status"].clone())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| *s == "approved").count(),
        1,
        "one task waits: {statuses:?}"
    );
    let status = ws.json(&["status", "--json"]);
    let paused = &status["dispatch_paused"];
    assert_eq!(paused["over"], "per_day_usd", "{status}");
    assert!(close(&paused["spent"], 0.0016), "{paused}");
    let tomorrow = (chrono::Utc::now() + chrono::Duration::days(1))
        .format("%Y-%m-%d")
        .to_string();
    assert!(
        paused["resumes_at"]
            .as_str()
            .is_some_and(|at| at.starts_with(&tomorrow)),
        "{paused}"
    );
    let text = ws.ok(&["status"]);
    assert!(
        text.contains(
            "dispatch PAUSED: today's workers spent $0.0016, over [budget] per_day_usd = 0.001"
        ),
        "{text}"
    );
    // The console's first page says so.
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!("{config}\n[web]\nlisten = \"127.0.0.1:0\"\n"));
    let _daemon = Daemon::start(&ws);
    let address = crate::console::console_address(&ws);
    let (code, page) = crate::console::call(&address, "GET", "/", &[], "");
    assert_eq!(code, 200);
    let page = page.as_str().unwrap_or_default().to_string();
    assert!(
        page.contains("No new task is taken: today&#x27;s workers spent $0.0016"),
        "{page}"
    );
    assert_eq!(starts(&started), 1, "the daemon takes no new task either");
}

#[test]
fn a_budget_question_denied_ends_the_run_without_another_worker() {
    let bin = tempfile::tempdir().expect("temp dir");
    let started = counting_claude(bin.path(), 1);
    let ws = claude_workspace(bin.path(), "", "[budget]\nper_task_tokens = 100\n");
    ws.ok(&["add", "--title", "Spend something", "--gid", "B-2"]);
    ws.ok(&["go", "B-2"]);
    ws.ok(&["run", "--once"]);
    let pending = ws.json(&["escalations", "--json"]);
    let asked = pending
        .as_array()
        .and_then(|e| e.iter().find(|e| e["action"] == "budget"))
        .cloned()
        .unwrap_or_else(|| panic!("a budget escalation: {pending}"));
    assert!(
        asked["detail"]
            .as_str()
            .is_some_and(|d| d.contains("240 tokens, over [budget] per_task_tokens = 100")),
        "{asked}"
    );
    let id = asked["id"].as_i64().expect("an id").to_string();
    ws.ok(&["decide", &id, "deny"]);
    ws.ok(&["run", "--once"]);
    assert_eq!(starts(&started), 1, "no worker after the owner said no");
    let shown = ws.json(&["show", "B-2", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "abandoned", "{shown}");
    assert_eq!(shown["task"]["status"], "for_review", "{shown}");
    let history = shown["events"].to_string();
    assert!(history.contains("more than its task's budget"), "{history}");
}

#[test]
fn a_pr_worker_over_its_tasks_budget_asks_once_and_starts_after_the_owners_yes() {
    use crate::fake_github::{Ci, FakeGithub, FIRST_HEAD};
    let github = FakeGithub::start_empty();
    let ws = crate::github_runs::waiting_pr(&github);
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!("{config}\n[budget]\nper_task_tokens = 100\n"));
    // The task's first worker used 500 tokens, recorded as an agent's usage is.
    let run_id = ws.json(&["show", "G-3", "--json"])["runs"][0]["id"]
        .as_i64()
        .expect("a run id");
    let at = (chrono::Utc::now() - chrono::Duration::minutes(5))
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let db = rusqlite::Connection::open(ws.path().join("executor.db")).expect("open");
    db.execute(
        "INSERT INTO executor_workers (run_id, phase, host, pid, started_at, ended_at, outcome, \
         agent, input_tokens, output_tokens) VALUES (?1, 'queued', 'here', 1, ?2, ?2, 'done', \
         'claude', 500, 0)",
        rusqlite::params![run_id, at],
    )
    .expect("a worker's usage");
    let budget_questions = || {
        let pending = ws.json(&["escalations", "--json"]);
        pending
            .as_array()
            .map(|e| {
                e.iter()
                    .filter(|e| e["action"] == "budget")
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    };
    let fix_ci = ws.path().join("prompts-seen/fix_ci.md");

    // CI fails: the fix_ci worker the PR needs does not start; the owner is asked, once.
    github.set_ci(FIRST_HEAD, Ci::Failed);
    for _ in 0..2 {
        let out = ws.run(&["run", "--once"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!fix_ci.exists(), "no PR worker over the budget");
    }
    let asked: Vec<Value> = budget_questions();
    assert_eq!(asked.len(), 1, "asked once: {asked:?}");
    let detail = asked[0]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("500 tokens, over [budget] per_task_tokens = 100"),
        "{detail}"
    );
    assert_eq!(
        ws.json(&["show", "G-3", "--json"])["runs"][0]["state"],
        "pr"
    );

    // Yes: the fix_ci worker starts.
    let id = asked[0]["id"].as_i64().expect("an id").to_string();
    ws.ok(&["decide", &id, "approve"]);
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(fix_ci.exists(), "the owner let one more worker start");
}

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

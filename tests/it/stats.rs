//! `executor stats` and `/api/v1/analytics` over a real store: runs worked by `run --once`
//! (one completed, one abandoned, one escalated and answered) counted as the figures
//! define them, the same document from the CLI and the console.

use crate::console::{console_address, get};
use crate::daemon::Daemon;
use crate::runner::workspace;

/// Completes `D-*` tasks, fails `F-*` ones, and asks the owner once for `E-*` ones.
pub(crate) const WORKER: &str = "prompt=$(cat); \
    case \"$prompt\" in \
      *'The owner answered your escalation'*) echo done > CHANGED.md; echo '[DONE:implemented] done';; \
      *E-1*) echo '[ESCALATE:needs_decision] may I?';; \
      *F-1*) exit 3;; \
      *) echo done > CHANGED.md; echo '[DONE:implemented] done';; \
    esac";

/// A workspace whose three runs ended one each way: `D-1` completed, `F-1` abandoned,
/// `E-1` completed after an escalation the owner answered.
pub(crate) fn three_runs_worked() -> crate::support::Workspace {
    let ws = workspace(
        &["/bin/sh", "-c", WORKER],
        &[],
        "max_worker_attempts = 1\nloop_sleep = \"600s\"\n",
    );
    for gid in ["D-1", "F-1", "E-1"] {
        ws.ok(&["add", "--title", &format!("Task {gid}"), "--gid", gid]);
        ws.ok(&["go", gid]);
    }
    ws.run(&["run", "--once"]);
    let id = ws.json(&["escalations", "--json"])[0]["id"]
        .as_i64()
        .expect("E-1 asked");
    ws.ok(&["decide", &id.to_string(), "approve"]);
    ws.run(&["run", "--once"]);
    ws
}

#[test]
fn stats_count_the_runs_as_the_figures_define_them_in_the_cli_and_the_api() {
    let ws = three_runs_worked();

    let report = ws.json(&["stats", "--json"]);
    let all = &report["all"];
    assert_eq!(all["started"], 3, "{report}");
    assert_eq!(all["completed"], 2, "{report}");
    assert_eq!(all["abandoned"], 1, "{report}");
    assert_eq!(all["clean_success"], 1, "E-1 escalated: {report}");
    assert_eq!(all["escalations"], 1, "{report}");
    assert_eq!(all["escalation_answer"]["n"], 1, "{report}");
    assert!(
        all["time_to_complete"]["median_s"].as_f64().is_some(),
        "{report}"
    );
    assert_eq!(all["small_sample"], true);
    assert_eq!(report["by_source"]["cli"]["started"], 3, "{report}");
    assert_eq!(report["days"], 30);
    let table = ws.ok(&["stats"]);
    assert!(table.contains("runs started since"), "{table}");
    assert!(table.contains("source cli"), "{table}");
    assert!(table.contains("small sample"), "{table}");

    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!(
        "{config}\n[web]\nenabled = true\nlisten = \"127.0.0.1:0\"\n"
    ));
    let _daemon = Daemon::start(&ws);
    let served = get(&console_address(&ws), "/api/v1/analytics?days=30");
    assert_eq!(served["all"], report["all"], "{served}");
    assert_eq!(served["by_agent"], report["by_agent"], "{served}");
    // The last day's figures in the scrape.
    let (code, metrics) = crate::console::call(&console_address(&ws), "GET", "/metrics", &[], "");
    assert_eq!(code, 200);
    let metrics = metrics.as_str().unwrap_or_default().to_string();
    for line in [
        "executor_outcome_runs_24h{ending=\"completed\"} 2",
        "executor_outcome_runs_24h{ending=\"abandoned\"} 1",
        "executor_outcome_clean_24h 1",
    ] {
        assert!(metrics.contains(line), "{line} missing: {metrics}");
    }
    assert!(
        metrics.contains("executor_outcome_success_ratio_24h 0.66"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("executor_outcome_cost_per_merged_usd_24h"),
        "no PR merged, no cost per merged PR: {metrics}"
    );
}

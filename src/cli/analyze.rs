//! `executor analyze --once`: the analyzer over every pending task, one at a time, until
//! none is left (rule filters first, then the configured agent), under the workspace's
//! analyzer lock (`analyzer.lock`), so it runs beside a runner but never beside another
//! analyzer. The daemon runs the same pass whenever pending tasks are waiting.
//!
//! What it must never do: hand an agent this process's secrets (its environment is the
//! workers' allowlist), or run two analyzers on one queue.

use std::sync::Arc;

use anyhow::{Context, Result};

use crate::analyzer::{AnalyzeReport, Analyzer, PromptTemplate, PROMPT_FILE};
use crate::config::Settings;
use crate::core::clock::Clock;
use crate::core::watchdog::Limits;
use crate::store::Store;

/// The analyzer's lock file, beside the config file.
pub const ANALYZER_LOCK: &str = "analyzer.lock";

/// The analyzer as the config describes it: the `[agent]`, `[analyzer]` rules and limits,
/// the prompt (`prompts/executor-analyzer.md` when the owner wrote one), logs under the
/// runner's `logs_dir`.
pub fn build(settings: &Settings, store: Arc<dyn Store>) -> Result<Analyzer> {
    let adapter = super::agent_adapter(settings)?;
    let filters = settings.raw.analyzer.filters()?;
    let prompt = PromptTemplate::load(Some(&settings.root.join("prompts").join(PROMPT_FILE)))?;
    let limits = Limits {
        no_output: settings.raw.analyzer.no_output_timeout,
        hard: settings.raw.analyzer.hard_timeout,
    };
    let allowed: Vec<String> = settings
        .raw
        .agent
        .env
        .iter()
        .map(|name| name.get_ref().clone())
        .collect();
    let env = crate::runner::drive::agent_env(&adapter, &allowed);
    Ok(Analyzer::new(
        store,
        adapter,
        filters,
        prompt,
        limits,
        settings.raw.runner.stop_grace,
        settings.root.join(&settings.raw.runner.logs_dir),
        env,
    )
    .with_wall(super::wall(settings)?))
}

pub async fn run_once(settings: &Settings, store: Arc<dyn Store>) -> Result<()> {
    let _lock = super::lock::acquire_as(&settings.root.join(ANALYZER_LOCK), "analyzer")?;
    let analyzer = build(settings, Arc::clone(&store))?;
    // `executor status` shows this pass as the analyzer while it runs, stopped after.
    let clock = crate::core::clock::SystemClock;
    let now = clock.now();
    let mut heartbeat = crate::core::record::Heartbeat {
        component: "analyzer".to_string(),
        host: gethostname::gethostname().to_string_lossy().into_owned(),
        pid: i64::from(std::process::id()),
        started_at: now,
        beat_at: now,
        stopped_at: None,
    };
    if let Err(error) = store.beat(&heartbeat).await {
        eprintln!("warning: cannot record the analyzer's heartbeat: {error}");
    }
    let analyzed = analyzer
        .analyze_pending(|analyzed| eprintln!("{}", analyzed.describe()))
        .await;
    heartbeat.beat_at = clock.now();
    heartbeat.stopped_at = Some(heartbeat.beat_at);
    if let Err(error) = store.beat(&heartbeat).await {
        eprintln!("warning: cannot record the analyzer's stop: {error}");
    }
    let report = analyzed.context("the analyzer stopped")?;
    print_report(&report);
    if !report.errors.is_empty() {
        anyhow::bail!(
            "{} task(s) could not be analyzed and stay pending: {}",
            report.errors.len(),
            report
                .errors
                .iter()
                .map(|e| format!("{}: {}", e.task_gid, e.error))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(())
}

fn print_report(report: &AnalyzeReport) {
    let skipped: u64 = report.skipped_by_rule.values().sum();
    println!(
        "analyzed {}: {} skipped by rules, {} for review, {} awaiting go, {} skipped by the model, {} failed (for review)",
        report.analyzed(),
        skipped,
        report.verdicts.for_review,
        report.verdicts.awaiting_go,
        report.verdicts.skip,
        report.analysis_failed
    );
    for (rule, count) in &report.skipped_by_rule {
        println!("  rule `{rule}`: {count}");
    }
}

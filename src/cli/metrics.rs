//! `GET /metrics` on `[web] listen`: executor's state in the Prometheus text format, read
//! from the store at each scrape (so every runner of a shared queue reports the same
//! numbers, and nothing is counted twice in memory).
//!
//! Only counts go out: never a task's text, a message or a secret.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::store::Store;

/// The route (the console names it, to leave it out of its page rules).
pub use super::console::METRICS as PATH;

pub fn router(store: Arc<dyn Store>, access: Arc<super::console::access::Access>) -> Router {
    Router::new()
        .route(PATH, get(scrape))
        .layer(axum::middleware::from_fn_with_state(
            access,
            super::console::guard,
        ))
        .with_state(store)
}

type Labelled = Family<Vec<(String, String)>, Gauge>;

fn labelled(registry: &mut Registry, name: &str, help: &str) -> Labelled {
    let family = Labelled::default();
    registry.register(name, help, family.clone());
    family
}

fn single(registry: &mut Registry, name: &str, help: &str, value: i64) {
    let gauge = Gauge::<i64>::default();
    gauge.set(value);
    registry.register(name, help, gauge);
}

fn label(key: &str, value: &str) -> Vec<(String, String)> {
    vec![(key.to_string(), value.to_string())]
}

/// Whether the store is in reach, as this process's waiting writes found it
/// (`runner::store_health`), and, when it is not, since when and how many writes wait.
fn store_health(registry: &mut Registry, reached: bool) {
    let outage = crate::runner::store_health::this_process().outage();
    let up = reached && outage.is_none();
    single(
        registry,
        "store_up",
        "Whether the store is in reach (0 while writes wait for it)",
        i64::from(up),
    );
    let (down_for, waiting, runs) = match &outage {
        Some(o) => (
            (chrono::Utc::now() - o.since).num_seconds().max(0),
            i64::try_from(o.waiting()).unwrap_or(i64::MAX),
            i64::try_from(o.runs_waiting()).unwrap_or(i64::MAX),
        ),
        None => (0, 0, 0),
    };
    single(
        registry,
        "store_down_seconds",
        "How long the writes of this process have been waiting for the store (0 when none)",
        down_for,
    );
    single(
        registry,
        "store_waiting_writes",
        "Writes of runs waiting for the store now",
        waiting,
    );
    single(
        registry,
        "store_waiting_runs",
        "Runs with a write waiting for the store now",
        runs,
    );
}

/// Only the store's health, for a scrape the store could not answer.
fn health_only() -> anyhow::Result<String> {
    let mut registry = Registry::with_prefix("executor");
    store_health(&mut registry, false);
    let mut text = String::new();
    encode(&mut text, &registry)?;
    Ok(text)
}

/// The registry as the store has it now.
pub async fn gather(store: &dyn Store) -> anyhow::Result<String> {
    let summary = store.summary().await?;
    // Counted by state, and only the live runs read (for their stages): a scrape costs the
    // same on a store of ten runs or of ten thousand.
    let run_counts = store.run_counts().await?;
    let live = store
        .runs_page(&crate::core::run::RunState::OPEN, None, u32::MAX)
        .await?;
    let outbox = store.outbox_backlog().await?;
    let mut registry = Registry::with_prefix("executor");
    store_health(&mut registry, true);
    let tasks = labelled(&mut registry, "tasks", "Tasks in the queue, by status");
    for (status, count) in &summary.queue {
        tasks
            .get_or_create(&label("status", status.as_str()))
            .set(*count);
    }
    let by_state = labelled(&mut registry, "runs", "Runs, by state");
    let by_stage = labelled(
        &mut registry,
        "runs_by_stage",
        "Active runs, by the stage of their lifecycle",
    );
    for state in crate::core::run::RunState::KNOWN {
        by_state
            .get_or_create(&label("state", state.as_str()))
            .set(0);
    }
    for (state, count) in &run_counts {
        by_state.get_or_create(&label("state", state)).set(*count);
    }
    for run in live.iter().filter(|r| r.state.is_active()) {
        let stage = run.lifecycle.as_ref().map_or("unknown", |v| v.stage_name());
        by_stage.get_or_create(&label("stage", stage)).inc();
    }
    single(
        &mut registry,
        "live_workers",
        "Worker processes recorded as running",
        summary.live_workers,
    );
    single(
        &mut registry,
        "pending_escalations",
        "Questions waiting for the owner",
        summary.pending_escalations,
    );
    single(
        &mut registry,
        "intake_errors",
        "Source items that could not be taken in",
        i64::try_from(summary.intake_errors.len()).unwrap_or(i64::MAX),
    );
    let waiting = labelled(
        &mut registry,
        "outbox_undelivered",
        "Messages waiting for their notifier, by notifier",
    );
    for line in &outbox {
        waiting
            .get_or_create(&label("notifier", &line.notifier))
            .set(line.undelivered);
    }
    spend(&mut registry, &store.spend(None).await?);
    let day = crate::ops::analytics::report(store, chrono::Utc::now(), 1).await?;
    outcomes(&mut registry, &day.figures.all);
    let mut text = String::new();
    encode(&mut text, &registry)?;
    Ok(text)
}

/// The outcome figures of the runs started in the last 24 hours ([`crate::ops::analytics`]):
/// how they ended, and the rates where they have a denominator (a rate with none is left
/// out rather than said as 0).
fn outcomes(registry: &mut Registry, all: &crate::core::analytics::Figures) {
    use prometheus_client::metrics::gauge::Gauge as FloatGauge;
    use std::sync::atomic::AtomicU64;
    let ended = labelled(
        registry,
        "outcome_runs_24h",
        "Runs started in the last 24 hours, by how they ended (open: not yet)",
    );
    for (ending, n) in [
        ("completed", all.completed),
        ("abandoned", all.abandoned),
        ("cancelled", all.cancelled),
        ("open", all.open),
    ] {
        ended
            .get_or_create(&label("ending", ending))
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
    single(
        registry,
        "outcome_clean_24h",
        "Runs started in the last 24 hours that completed with no escalation and no owner action beyond go",
        i64::try_from(all.clean_success).unwrap_or(i64::MAX),
    );
    for (name, help, value) in [
        (
            "outcome_success_ratio_24h",
            "Completed runs over ended ones, of those started in the last 24 hours",
            all.success_rate,
        ),
        (
            "outcome_cost_per_completed_usd_24h",
            "Every run's cost over the completed runs, of those started in the last 24 hours",
            all.cost_per_completed_usd,
        ),
        (
            "outcome_cost_per_merged_usd_24h",
            "Every run's cost over the merged PRs, of the runs started in the last 24 hours",
            all.cost_per_merged_usd,
        ),
    ] {
        if let Some(value) = value {
            let gauge = FloatGauge::<f64, AtomicU64>::default();
            gauge.set(value);
            registry.register(name, help, gauge);
        }
    }
}

/// What the workers spent, by agent: counters, as spend only grows.
fn spend(registry: &mut Registry, rows: &[crate::core::spend::SpendRow]) {
    use prometheus_client::metrics::counter::Counter;
    use std::sync::atomic::AtomicU64;
    let dollars = Family::<Vec<(String, String)>, Counter<f64, AtomicU64>>::default();
    registry.register(
        "spend_usd",
        "What the workers cost in US dollars (as their agents reported it, or priced by [spend.prices]), by agent",
        dollars.clone(),
    );
    let tokens = Family::<Vec<(String, String)>, Counter>::default();
    registry.register(
        "tokens",
        "Tokens the workers used, by agent and kind (input, output, cached)",
        tokens.clone(),
    );
    let turns = Family::<Vec<(String, String)>, Counter>::default();
    registry.register(
        "turns",
        "Model turns the workers took, by agent",
        turns.clone(),
    );
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    for (agent, total) in crate::core::spend::by(rows, |r| r.agent.clone()) {
        dollars
            .get_or_create(&label("agent", &agent))
            .inc_by(total.cost_usd);
        for (kind, n) in [
            ("input", total.input_tokens),
            ("output", total.output_tokens),
            ("cached", total.cached_tokens),
        ] {
            tokens
                .get_or_create(&vec![
                    ("agent".to_string(), agent.clone()),
                    ("kind".to_string(), kind.to_string()),
                ])
                .inc_by(count(n));
        }
        turns
            .get_or_create(&label("agent", &agent))
            .inc_by(count(total.turns));
    }
}

async fn scrape(State(store): State<Arc<dyn Store>>) -> Response {
    // A store that cannot answer the scrape still lets it say so: `executor_store_up 0`.
    let gathered = match gather(store.as_ref()).await {
        Ok(text) => Ok(text),
        Err(error) => {
            tracing::warn!(
                error = format!("{error:#}"),
                "/metrics cannot read the store; it says only that"
            );
            health_only()
        }
    };
    match gathered {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{error:#}")).into_response(),
    }
}

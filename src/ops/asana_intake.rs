//! Taking Asana into the queue: one poll of the configured scope (only what changed since
//! the stored cursor), each task upserted with its facts, the cursor moved on.
//!
//! A failed poll (a 401, Asana unreachable, a rate limit) is recorded as an intake error of
//! source `asana` (shown by `executor status`) and logged; it moves no cursor and touches
//! no task, so the next poll reads the same changes again. The next successful poll clears
//! the error. Other sources never wait on it.
//!
//! What it must never do: move the cursor past changes it did not take in, or delete a
//! task because Asana no longer lists it (completed upstream is a fact, not a deletion).

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::core::clock::Clock;
use crate::core::task::UpsertOutcome;
use crate::sources::asana::{self, AsanaClient, AsanaError, AsanaScope};
use crate::store::{Store, StoreError};

/// The intake error's "path" for the whole source.
const WHOLE_SOURCE: &str = "asana";

/// What one poll did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AsanaReport {
    pub created: usize,
    pub updated: usize,
    pub unchanged: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum AsanaIntakeError {
    #[error("Asana: {0}")]
    Asana(#[from] AsanaError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write a task's facts: {0}")]
    Facts(#[from] serde_json::Error),
}

/// The Asana intake of one process: when it last polled, and what.
pub struct AsanaIntake {
    client: AsanaClient,
    scope: AsanaScope,
    interval: Duration,
    last_poll: Option<Instant>,
}

impl AsanaIntake {
    pub fn new(client: AsanaClient, scope: AsanaScope, interval: Duration) -> Self {
        Self {
            client,
            scope,
            interval,
            last_poll: None,
        }
    }

    /// Whether the poll interval has passed since the last poll (always, before the first).
    pub fn due(&self) -> bool {
        self.last_poll
            .is_none_or(|last| last.elapsed() >= self.interval)
    }

    /// Polls once; see the module notes for what a failure does.
    pub async fn poll(
        &mut self,
        store: &dyn Store,
        clock: &dyn Clock,
    ) -> Result<AsanaReport, AsanaIntakeError> {
        self.last_poll = Some(Instant::now());
        let since: Option<DateTime<Utc>> = store
            .source_cursor(asana::SOURCE)
            .await?
            .and_then(|text| DateTime::parse_from_rfc3339(&text).ok())
            .map(|at| at.with_timezone(&Utc));
        let polled = match asana::poll(&self.client, &self.scope, since).await {
            Ok(polled) => polled,
            Err(error) => {
                tracing::warn!(%error, "cannot read Asana; its tasks wait for the next poll");
                store
                    .report_intake_error(
                        asana::SOURCE,
                        WHOLE_SOURCE,
                        &error.to_string(),
                        clock.now(),
                    )
                    .await?;
                return Err(error.into());
            }
        };
        let mut report = AsanaReport::default();
        for (task, facts) in &polled.tasks {
            let at = clock.now();
            let (_, outcome) = store.upsert_task(task, asana::SOURCE, at).await?;
            store
                .save_task_facts(&task.task_gid, &serde_json::to_string(facts)?, at)
                .await?;
            match outcome {
                UpsertOutcome::Created => report.created += 1,
                UpsertOutcome::Updated => report.updated += 1,
                UpsertOutcome::Unchanged => report.unchanged += 1,
            }
        }
        if let Some(next) = polled.next_since(since) {
            store
                .save_source_cursor(
                    asana::SOURCE,
                    &next.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                    clock.now(),
                )
                .await?;
        }
        store.retain_intake_errors(asana::SOURCE, &[]).await?;
        tracing::info!(
            new = report.created,
            updated = report.updated,
            unchanged = report.unchanged,
            "Asana polled"
        );
        Ok(report)
    }
}

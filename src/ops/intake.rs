//! Taking the plans folder into the queue.
//!
//! Every scan reads the whole folder, but a note whose bytes did not change since the last
//! scan of this process costs no write. A note that cannot be read stays exactly as it is;
//! it is recorded as an intake error (shown by `executor status`) until it is fixed or
//! removed, and the other notes are taken in all the same: one bad note (a NUL byte, a value
//! the database refuses) never blocks the rest. Deleting a note never deletes its task.
//! A draft (`status: draft` in its front matter) is not taken in, and a task made from an
//! earlier version of it is left as it was, until the owner removes that line.

use std::collections::{HashMap, HashSet};

use crate::config::PlansSettings;
use crate::core::clock::Clock;
use crate::core::task::{NewTask, UpsertOutcome};
use crate::sources::plans;
use crate::store::{Store, StoreError};

/// What one scan did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IngestReport {
    pub created: Vec<String>,
    pub updated: Vec<String>,
    pub unchanged: usize,
    /// Gids of the notes left out because they are drafts.
    pub drafts: Vec<String>,
    /// Notes not taken in: (path, reason).
    pub errors: Vec<(String, String)>,
}

/// What the last scan saw of one note.
#[derive(Debug, Clone)]
struct Seen {
    fingerprint: String,
    outcome: Result<String, String>,
}

/// The plans-folder intake of one process, remembering what it already took in.
pub struct PlansIntake {
    settings: PlansSettings,
    seen: HashMap<String, Seen>,
}

impl PlansIntake {
    pub fn new(settings: PlansSettings) -> Self {
        Self {
            settings,
            seen: HashMap::new(),
        }
    }

    pub fn dir(&self) -> &std::path::Path {
        &self.settings.dir
    }

    /// How long a note must go unwritten before the daemon takes it in.
    pub fn settle(&self) -> std::time::Duration {
        self.settings.settle
    }

    /// Scans the folder once and brings the queue and the intake errors in line with it.
    pub async fn ingest(
        &mut self,
        store: &dyn Store,
        clock: &dyn Clock,
    ) -> Result<IngestReport, IntakeError> {
        self.ingest_settled(store, clock, &HashSet::new()).await
    }

    /// Like [`Self::ingest`], leaving the notes at `settling` (absolute paths still being
    /// written) exactly as the last scan saw them: they are taken in once they settle.
    pub async fn ingest_settled(
        &mut self,
        store: &dyn Store,
        clock: &dyn Clock,
        settling: &HashSet<std::path::PathBuf>,
    ) -> Result<IngestReport, IntakeError> {
        let dir = self.settings.dir.clone();
        let scanned = match tokio::task::spawn_blocking(move || plans::scan(&dir))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|scan| scan)
        {
            Ok(scanned) => scanned,
            Err(error) => {
                let folder = self.settings.dir.display().to_string();
                let reason = format!("cannot list the plans folder: {error}");
                store
                    .report_intake_error(plans::SOURCE, &folder, &reason, clock.now())
                    .await?;
                return Err(IntakeError::Scan(error));
            }
        };

        let mut report = IngestReport::default();
        let mut gid_owner: HashMap<String, String> = HashMap::new();
        let mut seen_now = HashMap::new();
        for scanned_note in scanned {
            if settling.contains(&scanned_note.path) {
                if let Some(previous) = self.seen.get(&scanned_note.relative_path) {
                    match &previous.outcome {
                        Ok(gid) => {
                            gid_owner.insert(gid.clone(), scanned_note.relative_path.clone());
                        }
                        // Its reported error stays reported until it is taken in again.
                        Err(reason) => report
                            .errors
                            .push((scanned_note.path.display().to_string(), reason.clone())),
                    }
                    seen_now.insert(scanned_note.relative_path.clone(), previous.clone());
                }
                continue;
            }
            let mut refused: Option<String> = None;
            let display_path = scanned_note.path.display().to_string();
            let previous = self.seen.get(&scanned_note.relative_path);
            let unchanged_bytes =
                previous.is_some_and(|seen| seen.fingerprint == scanned_note.fingerprint);
            let outcome: Result<String, String> = match scanned_note.note {
                Err(error) => Err(error.to_string()),
                Ok(note) => match gid_owner.get(&note.gid) {
                    Some(other) => Err(format!(
                        "front matter `gid`: `{}` is already the gid of {other}",
                        note.gid
                    )),
                    None => {
                        gid_owner.insert(note.gid.clone(), scanned_note.relative_path.clone());
                        let taken_in_before = unchanged_bytes
                            && previous
                                .is_some_and(|seen| seen.outcome.as_ref().ok() == Some(&note.gid));
                        let gid = note.gid.clone();
                        if note.draft {
                            if !unchanged_bytes {
                                tracing::info!(%gid, path = %display_path, "plan note is a draft: left out until its `status: draft` line is removed");
                            }
                            report.drafts.push(gid.clone());
                        } else if taken_in_before {
                            report.unchanged += 1;
                        } else {
                            refused = self
                                .take_in(store, clock, note, &display_path, &mut report)
                                .await?;
                        }
                        match refused.take() {
                            Some(reason) => Err(reason),
                            None => Ok(gid),
                        }
                    }
                },
            };
            if let Err(reason) = &outcome {
                let already_reported = unchanged_bytes
                    && previous.is_some_and(|seen| seen.outcome.as_ref().err() == Some(reason));
                if !already_reported {
                    tracing::warn!(path = %display_path, %reason, "plan note not taken in; left untouched");
                    store
                        .report_intake_error(plans::SOURCE, &display_path, reason, clock.now())
                        .await?;
                }
                report.errors.push((display_path.clone(), reason.clone()));
            }
            seen_now.insert(
                scanned_note.relative_path,
                Seen {
                    fingerprint: scanned_note.fingerprint,
                    outcome,
                },
            );
        }
        let failing: Vec<String> = report.errors.iter().map(|(p, _)| p.clone()).collect();
        store.retain_intake_errors(plans::SOURCE, &failing).await?;
        self.seen = seen_now;
        Ok(report)
    }
}

impl PlansIntake {
    /// Writes one readable note's task; `Some(reason)` if the database refused its values
    /// (this note's fault, not the store's: the other notes go on).
    async fn take_in(
        &self,
        store: &dyn Store,
        clock: &dyn Clock,
        note: plans::PlanNote,
        display_path: &str,
        report: &mut IngestReport,
    ) -> Result<Option<String>, IntakeError> {
        let gid = note.gid.clone();
        let new = NewTask {
            task_gid: note.gid,
            source: note.source.unwrap_or_else(|| plans::SOURCE.to_string()),
            description: note.description,
            notes: note.notes,
            priority: note.priority,
            initial_status: self.settings.initial_status.clone(),
        };
        match store.upsert_task(&new, plans::SOURCE, clock.now()).await {
            Ok((_, UpsertOutcome::Created)) => {
                tracing::info!(%gid, path = %display_path, "plan note added to the queue");
                report.created.push(gid);
            }
            Ok((_, UpsertOutcome::Updated)) => {
                tracing::info!(%gid, path = %display_path, "plan note updated its task");
                report.updated.push(gid);
            }
            Ok((_, UpsertOutcome::Unchanged)) => report.unchanged += 1,
            Err(error) if error.is_refused_value() => {
                return Ok(Some(format!(
                    "the database refused it: {}",
                    error.with_causes()
                )));
            }
            Err(error) => return Err(error.into()),
        }
        Ok(None)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    #[error("cannot read the plans folder")]
    Scan(#[source] std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

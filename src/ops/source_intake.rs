//! Taking a polled source (Asana, the GitHub or Gitea issues of one repository) into the
//! queue: one poll of the configured scope (only what changed since the stored cursor), each
//! task upserted with its facts, the cursor moved on.
//!
//! A failed poll (a 401, the service unreachable, a rate limit) is recorded as an intake
//! error of that source (shown by `executor status`) and logged; it moves no cursor and
//! touches no task, so the next poll reads the same changes again. The next successful poll
//! clears the error. Other sources never wait on it. A source that asked for a wait (a 429's
//! `Retry-After`) is not due again before the wait is over, whatever its poll interval.
//! A task that comes again unchanged (a poll inside the cursor's margin reads the last
//! poll's changes again) writes nothing: neither its row nor its facts.
//!
//! What it must never do: move the cursor past changes it did not take in, or delete a
//! task because the source no longer lists it (closed upstream is a fact, not a deletion).

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::core::clock::Clock;
use crate::core::facts::TaskFacts;
use crate::core::task::{NewTask, UpsertOutcome};
use crate::forge::gitea::{GiteaClient, GiteaError};
use crate::forge::github::{GithubClient, GithubError};
use crate::sources::asana::{self, AsanaClient, AsanaError, AsanaScope};
use crate::sources::gitea_issues::{self, GiteaIssuesScope};
use crate::sources::github_issues::{self, GithubIssuesScope};
use crate::store::{Store, StoreError};

/// How far the cursor stays behind the start of the poll that set it: for the clocks of
/// this host and the source's to differ, and for GitHub's and Gitea's whole seconds.
const CURSOR_MARGIN_SECS: i64 = 60;

/// The longest wait a source's answer is believed: a far-off `Retry-After` must not stop
/// the source for days.
const MAX_SOURCE_WAIT: Duration = Duration::from_secs(60 * 60);

/// What one poll did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SourceReport {
    pub created: usize,
    pub updated: usize,
    pub unchanged: usize,
    /// Tasks closed upstream before any run started, now skipped.
    pub closed: usize,
    /// Issues (tasks) already closed when they were first seen, left out of the queue as
    /// the first read leaves them out (unless the scope takes closed ones in).
    pub closed_unseen: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum SourceIntakeError {
    #[error("Asana: {0}")]
    Asana(#[from] AsanaError),
    #[error("GitHub issues: {0}")]
    Github(#[from] GithubError),
    #[error("Gitea issues: {0}")]
    Gitea(#[from] GiteaError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write a task's facts: {0}")]
    Facts(#[from] serde_json::Error),
}

impl SourceIntakeError {
    /// How long the source asked not to be called (a 429's `Retry-After`), capped at
    /// [`MAX_SOURCE_WAIT`].
    pub fn wait(&self) -> Option<Duration> {
        match self {
            Self::Asana(AsanaError::RateLimited { retry_after }) => {
                Some((*retry_after).min(MAX_SOURCE_WAIT))
            }
            Self::Gitea(GiteaError::RateLimited {
                retry_after: Some(retry_after),
            }) => Some((*retry_after).min(MAX_SOURCE_WAIT)),
            // GitHub's limits: a secondary limit's Retry-After, or the primary budget's
            // reset (5xx and timeouts are tried on the next poll, as they are elsewhere).
            Self::Github(
                error @ (GithubError::SecondaryLimit { .. } | GithubError::RateLimited { .. }),
            ) => {
                let now = chrono::Utc::now();
                let at = error.retry_at(now)?;
                Some((at - now).to_std().unwrap_or_default().min(MAX_SOURCE_WAIT))
            }
            _ => None,
        }
    }
}

/// A task closed or completed upstream (seen open before) that no run has started (pending, for review,
/// awaiting a go, approved) is skipped, with the source named in its history, so nobody
/// works on something already done. One with a run keeps it: the owner decides. Answers 1
/// when it skipped the task.
async fn close_if_not_started(
    store: &dyn Store,
    clock: &dyn Clock,
    gid: &str,
    source: &str,
) -> Result<usize, SourceIntakeError> {
    use crate::core::queue::{QueueEvent, QueueStatus};
    let Some(task) = store.task(gid).await? else {
        return Ok(0);
    };
    let not_started = matches!(
        task.status,
        QueueStatus::Pending
            | QueueStatus::ForReview
            | QueueStatus::AwaitingGo
            | QueueStatus::Approved
    );
    if !not_started {
        return Ok(0);
    }
    match crate::ops::queue::apply(
        store,
        clock,
        gid,
        QueueEvent::Skip,
        source,
        Some("closed upstream".into()),
    )
    .await
    {
        Ok(_) => {
            tracing::info!(%gid, %source, "closed upstream before any run: skipped");
            Ok(1)
        }
        // It moved meanwhile (a runner took it): left to the owner.
        Err(error) => {
            tracing::info!(%gid, %error, "closed upstream, but it moved meanwhile; left as it is");
            Ok(0)
        }
    }
}

/// What is read, and how.
pub enum Polling {
    Asana {
        client: AsanaClient,
        scope: AsanaScope,
    },
    /// The issues of the client's repository.
    GithubIssues {
        client: GithubClient,
        scope: GithubIssuesScope,
    },
    /// The issues of `owner/repo` on the client's Gitea.
    GiteaIssues {
        client: GiteaClient,
        owner: String,
        repo: String,
        scope: GiteaIssuesScope,
    },
}

impl Polling {
    /// Whether issues or tasks already closed when first seen come into the queue
    /// (`include_closed`, Asana's `include_completed`).
    fn takes_closed(&self) -> bool {
        match self {
            Polling::Asana { scope, .. } => scope.include_completed,
            Polling::GithubIssues { scope, .. } => scope.include_closed,
            Polling::GiteaIssues { scope, .. } => scope.include_closed,
        }
    }
}

/// One polled source's intake in this process: when it last polled, and what.
pub struct SourceIntake {
    polling: Polling,
    /// The cursor's key and the intake errors' source: `asana`, `github:owner/name`,
    /// `gitea:owner/name`.
    key: String,
    interval: Duration,
    last_poll: Option<Instant>,
    /// Not polled before this: the source asked for a wait.
    not_before: Option<Instant>,
}

impl SourceIntake {
    pub fn new(polling: Polling, interval: Duration) -> Self {
        let key = match &polling {
            Polling::Asana { .. } => asana::SOURCE.to_string(),
            Polling::GithubIssues { client, .. } => {
                let (owner, repo) = client.repository();
                format!("{}:{owner}/{repo}", github_issues::SOURCE)
            }
            Polling::GiteaIssues { owner, repo, .. } => {
                format!("{}:{owner}/{repo}", gitea_issues::SOURCE)
            }
        };
        Self {
            polling,
            key,
            interval,
            last_poll: None,
            not_before: None,
        }
    }

    /// `asana`, `github:owner/name` or `gitea:owner/name`.
    pub fn name(&self) -> &str {
        &self.key
    }

    /// Whether the poll interval has passed since the last poll (always, before the first)
    /// and the wait the source asked for, if any, is over.
    pub fn due(&self) -> bool {
        self.due_at(Instant::now())
    }

    /// [`SourceIntake::due`] at `now`.
    pub fn due_at(&self, now: Instant) -> bool {
        let interval_passed = self
            .last_poll
            .is_none_or(|last| now.saturating_duration_since(last) >= self.interval);
        interval_passed && self.not_before.is_none_or(|until| now >= until)
    }

    /// Polls once; see the module notes for what a failure does.
    pub async fn poll(
        &mut self,
        store: &dyn Store,
        clock: &dyn Clock,
    ) -> Result<SourceReport, SourceIntakeError> {
        self.last_poll = Some(Instant::now());
        self.not_before = None;
        let started = clock.now();
        let since: Option<DateTime<Utc>> = store
            .source_cursor(&self.key)
            .await?
            .and_then(|text| DateTime::parse_from_rfc3339(&text).ok())
            .map(|at| at.with_timezone(&Utc));
        let polled = match self.read(since).await {
            Ok(polled) => polled,
            Err(error) => {
                if let Some(wait) = error.wait() {
                    self.not_before = Instant::now().checked_add(wait);
                    tracing::warn!(source = %self.key, %error, wait = ?wait, "the source asked for a wait; it is not polled before it is over");
                }
                tracing::warn!(source = %self.key, %error, "cannot read the source; its tasks wait for the next poll");
                store
                    .report_intake_error(&self.key, &self.key, &error.to_string(), clock.now())
                    .await?;
                return Err(error);
            }
        };
        let (tasks, next) = polled;
        let mut report = SourceReport::default();
        for (task, facts) in &tasks {
            let at = clock.now();
            // Whether it was known open before: a closing is a change seen, not a task
            // that came in closed (those go through the analyzer's rules).
            let stored = store.task_facts(&task.task_gid).await?;
            let was_open = stored
                .as_deref()
                .and_then(|json| serde_json::from_str::<TaskFacts>(json).ok())
                .is_some_and(|before| !before.closed);
            // Closed before it was ever seen open: a later read (which takes closings)
            // brought it, but the first read left such issues out, and so does this one.
            if facts.closed
                && stored.is_none()
                && !self.polling.takes_closed()
                && store.task(&task.task_gid).await?.is_none()
            {
                tracing::debug!(gid = %task.task_gid, source = %self.key, "closed before it was ever seen open: left out");
                report.closed_unseen += 1;
                continue;
            }
            let (_, outcome) = store.upsert_task(task, &task.source, at).await?;
            let facts_json = serde_json::to_string(facts)?;
            // Read again unchanged (inside the cursor's margin): its facts keep their time.
            if stored.as_deref() != Some(facts_json.as_str()) {
                store
                    .save_task_facts(&task.task_gid, &facts_json, at)
                    .await?;
            }
            match outcome {
                UpsertOutcome::Created => report.created += 1,
                UpsertOutcome::Updated => report.updated += 1,
                UpsertOutcome::Unchanged => report.unchanged += 1,
            }
            if facts.closed && was_open {
                report.closed +=
                    close_if_not_started(store, clock, &task.task_gid, &self.key).await?;
            }
        }
        // A change made while this poll was reading (to a page or scope it had read
        // already) is newer than the poll's start, but may be older than the newest change
        // it saw: so the cursor never passes the poll's start (less a margin). What comes
        // again next time upserts as unchanged.
        let start_bound = started - chrono::Duration::seconds(CURSOR_MARGIN_SECS);
        let next = next.map(|newest| newest.min(start_bound)).max(since);
        if let Some(next) = next {
            store
                .save_source_cursor(
                    &self.key,
                    &next.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                    clock.now(),
                )
                .await?;
        }
        store.retain_intake_errors(&self.key, &[]).await?;
        tracing::info!(
            source = %self.key,
            new = report.created,
            updated = report.updated,
            unchanged = report.unchanged,
            closed = report.closed,
            closed_unseen = report.closed_unseen,
            "source polled"
        );
        Ok(report)
    }

    /// The tasks changed since `since`, and the newest change among them.
    async fn read(
        &self,
        since: Option<DateTime<Utc>>,
    ) -> Result<(Vec<(NewTask, TaskFacts)>, Option<DateTime<Utc>>), SourceIntakeError> {
        Ok(match &self.polling {
            Polling::Asana { client, scope } => {
                let polled = asana::poll(client, scope, since).await?;
                (polled.tasks, polled.newest_change)
            }
            Polling::GithubIssues { client, scope } => {
                let polled = github_issues::poll(client, scope, since).await?;
                (polled.tasks, polled.newest_change)
            }
            Polling::GiteaIssues {
                client,
                owner,
                repo,
                scope,
            } => {
                let polled = gitea_issues::poll(client, owner, repo, scope, since).await?;
                (polled.tasks, polled.newest_change)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intake(interval: Duration) -> SourceIntake {
        let settings =
            crate::sources::asana::AsanaSettings::new(crate::forge::github::Secret::new("unused"));
        let client = AsanaClient::new(settings).expect("client");
        let scope = AsanaScope {
            projects: vec!["1".into()],
            ..AsanaScope::default()
        };
        SourceIntake::new(Polling::Asana { client, scope }, interval)
    }

    #[test]
    fn a_source_is_due_after_its_interval_and_never_before_the_wait_it_asked_for() {
        let start = Instant::now();
        let second = Duration::from_secs(1);
        let mut source = intake(5 * second);
        assert!(source.due_at(start), "before the first poll");
        source.last_poll = Some(start);
        assert!(!source.due_at(start + 4 * second));
        assert!(source.due_at(start + 5 * second));
        // A 429 asked for 20 s: the 5 s interval does not make it due sooner.
        source.not_before = Some(start + 20 * second);
        assert!(!source.due_at(start + 5 * second));
        assert!(!source.due_at(start + 19 * second));
        assert!(source.due_at(start + 20 * second));
    }

    #[test]
    fn only_a_rate_limit_asks_for_a_wait_and_a_huge_one_is_capped() {
        let limited = |secs| {
            SourceIntakeError::Asana(AsanaError::RateLimited {
                retry_after: Duration::from_secs(secs),
            })
        };
        assert_eq!(limited(20).wait(), Some(Duration::from_secs(20)));
        assert_eq!(limited(u64::MAX).wait(), Some(MAX_SOURCE_WAIT));
        let down = SourceIntakeError::Asana(AsanaError::Unreachable {
            message: "refused".into(),
        });
        assert_eq!(down.wait(), None);
    }
}

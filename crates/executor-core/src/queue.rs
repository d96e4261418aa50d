//! The queue state machine (`executor_queue.status`), docs/design.md §3:
//!
//! ```text
//! pending --analyzer--> for_review | awaiting_go | skip
//! for_review --owner review--> awaiting_go --owner go--> approved --runner--> in_progress --> done
//! skip --reanalyze--> pending
//! ```
//!
//! The owner may also say "go" to a task the analyzer has not seen yet or has skipped (the
//! owner overrules), and "skip" to anything not yet being worked on. A run that is abandoned
//! hands its task back to the owner (`for_review`). [`next_status`] is the whole machine.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// Where a task stands. `NULL` in the database reads as [`QueueStatus::Pending`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueStatus {
    Pending,
    ForReview,
    AwaitingGo,
    Approved,
    InProgress,
    Done,
    Skip,
    /// A value this version does not know, kept as found (an adopted database may hold
    /// statuses of its own). No transition leaves it.
    Other(String),
}

impl QueueStatus {
    /// Every status this version knows, in queue order.
    pub const KNOWN: [QueueStatus; 7] = [
        QueueStatus::Pending,
        QueueStatus::ForReview,
        QueueStatus::AwaitingGo,
        QueueStatus::Approved,
        QueueStatus::InProgress,
        QueueStatus::Done,
        QueueStatus::Skip,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            QueueStatus::Pending => "pending",
            QueueStatus::ForReview => "for_review",
            QueueStatus::AwaitingGo => "awaiting_go",
            QueueStatus::Approved => "approved",
            QueueStatus::InProgress => "in_progress",
            QueueStatus::Done => "done",
            QueueStatus::Skip => "skip",
            QueueStatus::Other(other) => other,
        }
    }

    /// Reads a stored column value; `None` and the empty string are `pending`.
    pub fn from_column(value: Option<&str>) -> Self {
        match value {
            None => QueueStatus::Pending,
            Some(text) => QueueStatus::parse_lenient(text),
        }
    }

    fn parse_lenient(text: &str) -> Self {
        match text {
            "" | "pending" => QueueStatus::Pending,
            "for_review" => QueueStatus::ForReview,
            "awaiting_go" => QueueStatus::AwaitingGo,
            "approved" => QueueStatus::Approved,
            "in_progress" => QueueStatus::InProgress,
            "done" => QueueStatus::Done,
            "skip" => QueueStatus::Skip,
            other => QueueStatus::Other(other.to_string()),
        }
    }

    /// The names a user may type, for error messages.
    pub fn known_names() -> String {
        Self::KNOWN
            .iter()
            .map(QueueStatus::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Parsing user input is strict: an unknown status is an error, not [`QueueStatus::Other`].
impl FromStr for QueueStatus {
    type Err = UnknownStatus;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match QueueStatus::parse_lenient(text.trim()) {
            QueueStatus::Other(other) => Err(UnknownStatus(other)),
            known => Ok(known),
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
#[error("unknown queue status `{0}` (known: {known})", known = QueueStatus::known_names())]
pub struct UnknownStatus(pub String);

impl fmt::Display for QueueStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for QueueStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for QueueStatus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Option::<String>::deserialize(deserializer)?;
        Ok(QueueStatus::from_column(text.as_deref()))
    }
}

/// The analyzer's verdict on a pending task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    ForReview,
    AwaitingGo,
    Skip,
}

/// Something that happens to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueEvent {
    /// The analyzer triaged a pending task.
    Analyzed(Verdict),
    /// The owner reviewed the analysis and wants to be asked for a go.
    Reviewed,
    /// The owner's "go".
    Go,
    /// The owner's rejection.
    Skip,
    /// The runner created a run for the task.
    RunStarted,
    /// The task's run completed.
    RunCompleted,
    /// The task's run was abandoned; the owner decides what next.
    RunAbandoned,
    /// The task is put back in front of the analyzer.
    Reanalyze,
    /// The owner asks for a fresh run of a task whose last run ended.
    Retry,
}

impl QueueEvent {
    /// The name recorded in the event history.
    pub fn name(self) -> &'static str {
        match self {
            QueueEvent::Analyzed(_) => "analyzed",
            QueueEvent::Reviewed => "reviewed",
            QueueEvent::Go => "go",
            QueueEvent::Skip => "skip",
            QueueEvent::RunStarted => "run_started",
            QueueEvent::RunCompleted => "run_completed",
            QueueEvent::RunAbandoned => "run_abandoned",
            QueueEvent::Reanalyze => "reanalyze",
            QueueEvent::Retry => "retry",
        }
    }

    /// The statuses this event may leave from.
    pub fn allowed_from(self) -> &'static [QueueStatus] {
        use QueueStatus::*;
        match self {
            QueueEvent::Analyzed(_) => &[Pending],
            QueueEvent::Reviewed => &[ForReview],
            QueueEvent::Go => &[Pending, ForReview, AwaitingGo, Skip],
            QueueEvent::Skip => &[Pending, ForReview, AwaitingGo, Approved],
            QueueEvent::RunStarted => &[Approved],
            QueueEvent::RunCompleted => &[InProgress],
            QueueEvent::RunAbandoned => &[InProgress],
            QueueEvent::Reanalyze => &[Skip],
            QueueEvent::Retry => &[Done, ForReview],
        }
    }

    fn target(self) -> QueueStatus {
        match self {
            QueueEvent::Analyzed(Verdict::ForReview) => QueueStatus::ForReview,
            QueueEvent::Analyzed(Verdict::AwaitingGo) => QueueStatus::AwaitingGo,
            QueueEvent::Analyzed(Verdict::Skip) | QueueEvent::Skip => QueueStatus::Skip,
            QueueEvent::Reviewed => QueueStatus::AwaitingGo,
            QueueEvent::Go => QueueStatus::Approved,
            QueueEvent::RunStarted => QueueStatus::InProgress,
            QueueEvent::RunCompleted => QueueStatus::Done,
            QueueEvent::RunAbandoned => QueueStatus::ForReview,
            QueueEvent::Reanalyze => QueueStatus::Pending,
            QueueEvent::Retry => QueueStatus::Approved,
        }
    }
}

/// A move the queue machine does not allow.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("cannot apply `{event}` to a task that is {from} (allowed from: {allowed})")]
pub struct IllegalQueueMove {
    pub from: QueueStatus,
    pub event: &'static str,
    pub allowed: String,
}

/// The queue machine: the status `event` moves a task in `from` to, or why it cannot.
pub fn next_status(from: &QueueStatus, event: QueueEvent) -> Result<QueueStatus, IllegalQueueMove> {
    let allowed = event.allowed_from();
    if allowed.contains(from) {
        Ok(event.target())
    } else {
        Err(IllegalQueueMove {
            from: from.clone(),
            event: event.name(),
            allowed: allowed
                .iter()
                .map(QueueStatus::as_str)
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::QueueStatus::*;
    use super::*;

    const ALL_EVENTS: [QueueEvent; 11] = [
        QueueEvent::Analyzed(Verdict::ForReview),
        QueueEvent::Analyzed(Verdict::AwaitingGo),
        QueueEvent::Analyzed(Verdict::Skip),
        QueueEvent::Reviewed,
        QueueEvent::Go,
        QueueEvent::Skip,
        QueueEvent::RunStarted,
        QueueEvent::RunCompleted,
        QueueEvent::RunAbandoned,
        QueueEvent::Reanalyze,
        QueueEvent::Retry,
    ];

    /// Every legal move, written out by hand from docs/design.md §3.
    const LEGAL: [(QueueStatus, QueueEvent, QueueStatus); 18] = [
        (Pending, QueueEvent::Analyzed(Verdict::ForReview), ForReview),
        (
            Pending,
            QueueEvent::Analyzed(Verdict::AwaitingGo),
            AwaitingGo,
        ),
        (Pending, QueueEvent::Analyzed(Verdict::Skip), Skip),
        (ForReview, QueueEvent::Reviewed, AwaitingGo),
        (Pending, QueueEvent::Go, Approved),
        (ForReview, QueueEvent::Go, Approved),
        (AwaitingGo, QueueEvent::Go, Approved),
        (Skip, QueueEvent::Go, Approved),
        (Pending, QueueEvent::Skip, Skip),
        (ForReview, QueueEvent::Skip, Skip),
        (AwaitingGo, QueueEvent::Skip, Skip),
        (Approved, QueueEvent::Skip, Skip),
        (Approved, QueueEvent::RunStarted, InProgress),
        (InProgress, QueueEvent::RunCompleted, Done),
        (InProgress, QueueEvent::RunAbandoned, ForReview),
        (Skip, QueueEvent::Reanalyze, Pending),
        (Done, QueueEvent::Retry, Approved),
        (ForReview, QueueEvent::Retry, Approved),
    ];

    #[test]
    fn every_legal_move_reaches_its_target() {
        for (from, event, to) in LEGAL {
            assert_eq!(next_status(&from, event), Ok(to), "{from} + {event:?}");
        }
    }

    #[test]
    fn every_other_move_is_refused_with_the_allowed_sources() {
        for from in QueueStatus::KNOWN {
            for event in ALL_EVENTS {
                if LEGAL.iter().any(|(f, e, _)| *f == from && *e == event) {
                    continue;
                }
                let err = next_status(&from, event).expect_err("illegal move accepted");
                assert_eq!(err.from, from);
                assert!(!err.allowed.is_empty());
            }
        }
    }

    #[test]
    fn done_is_final_and_go_on_it_says_why() {
        let err = next_status(&Done, QueueEvent::Go).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot apply `go` to a task that is done (allowed from: pending, for_review, awaiting_go, skip)"
        );
    }

    #[test]
    fn unknown_stored_status_is_kept_and_never_moves() {
        let odd = QueueStatus::from_column(Some("parked"));
        assert_eq!(odd, Other("parked".into()));
        assert_eq!(odd.as_str(), "parked");
        for event in ALL_EVENTS {
            assert!(next_status(&odd, event).is_err());
        }
    }

    #[test]
    fn null_and_pending_are_the_same_status() {
        assert_eq!(QueueStatus::from_column(None), Pending);
        assert_eq!(QueueStatus::from_column(Some("")), Pending);
        assert_eq!("pending".parse::<QueueStatus>(), Ok(Pending));
    }

    #[test]
    fn user_input_status_is_strict() {
        assert_eq!("awaiting_go".parse::<QueueStatus>(), Ok(AwaitingGo));
        let err = "awaiting".parse::<QueueStatus>().unwrap_err();
        assert!(err.to_string().contains("awaiting_go"), "{err}");
    }
}

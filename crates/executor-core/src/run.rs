//! The run state machine (`executor_runs.state`), docs/design.md §3:
//!
//! ```text
//! queued -> in_progress -> pr -> complete
//!    any -> abandoned            complete (draft PR) + new owner comment -> pr
//! ```
//!
//! Which worker phase runs inside `pr` (fix_ci, fix_comments, pr_review) is decided by the
//! PR machine, not here; this machine only knows the run's coarse state.

use std::fmt;

use serde::{Serialize, Serializer};
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RunState {
    Queued,
    InProgress,
    Pr,
    Complete,
    Abandoned,
    /// A stored value this version does not know; kept as found, never moved.
    Other(String),
}

impl RunState {
    pub const KNOWN: [RunState; 5] = [
        RunState::Queued,
        RunState::InProgress,
        RunState::Pr,
        RunState::Complete,
        RunState::Abandoned,
    ];

    /// The states of a run not ended: what a runner, the chat and the console look at live.
    pub const OPEN: [RunState; 3] = [RunState::Queued, RunState::InProgress, RunState::Pr];
    /// The states a run ends in.
    pub const ENDED: [RunState; 2] = [RunState::Complete, RunState::Abandoned];

    pub fn as_str(&self) -> &str {
        match self {
            RunState::Queued => "queued",
            RunState::InProgress => "in_progress",
            RunState::Pr => "pr",
            RunState::Complete => "complete",
            RunState::Abandoned => "abandoned",
            RunState::Other(other) => other,
        }
    }

    pub fn from_column(value: &str) -> Self {
        match value {
            "queued" => RunState::Queued,
            "in_progress" => RunState::InProgress,
            "pr" => RunState::Pr,
            "complete" => RunState::Complete,
            "abandoned" => RunState::Abandoned,
            other => RunState::Other(other.to_string()),
        }
    }

    /// True while the run can still produce work (it is neither complete nor abandoned).
    pub fn is_active(&self) -> bool {
        matches!(self, RunState::Queued | RunState::InProgress | RunState::Pr)
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for RunState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Something that happens to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEvent {
    /// The first worker of the run started.
    WorkerStarted,
    /// The run's draft PR exists; from now on the orchestrator drives it.
    PrOpened,
    /// CI green, review green, nothing unresolved.
    Completed,
    /// Given up: retries exhausted, owner's decision, PR closed.
    Abandoned,
    /// The owner commented on the complete draft PR.
    OwnerCommented,
}

impl RunEvent {
    pub fn name(self) -> &'static str {
        match self {
            RunEvent::WorkerStarted => "worker_started",
            RunEvent::PrOpened => "pr_opened",
            RunEvent::Completed => "completed",
            RunEvent::Abandoned => "abandoned",
            RunEvent::OwnerCommented => "owner_commented",
        }
    }

    pub fn allowed_from(self) -> &'static [RunState] {
        use RunState::*;
        match self {
            RunEvent::WorkerStarted => &[Queued],
            RunEvent::PrOpened => &[InProgress],
            RunEvent::Completed => &[Pr],
            RunEvent::Abandoned => &[Queued, InProgress, Pr, Complete],
            RunEvent::OwnerCommented => &[Complete],
        }
    }

    fn target(self) -> RunState {
        match self {
            RunEvent::WorkerStarted => RunState::InProgress,
            RunEvent::PrOpened => RunState::Pr,
            RunEvent::Completed => RunState::Complete,
            RunEvent::Abandoned => RunState::Abandoned,
            RunEvent::OwnerCommented => RunState::Pr,
        }
    }
}

#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("cannot apply `{event}` to a run that is {from} (allowed from: {allowed})")]
pub struct IllegalRunMove {
    pub from: RunState,
    pub event: &'static str,
    pub allowed: String,
}

/// The run machine: the state `event` moves a run in `from` to, or why it cannot.
pub fn next_state(from: &RunState, event: RunEvent) -> Result<RunState, IllegalRunMove> {
    let allowed = event.allowed_from();
    if allowed.contains(from) {
        Ok(event.target())
    } else {
        Err(IllegalRunMove {
            from: from.clone(),
            event: event.name(),
            allowed: allowed
                .iter()
                .map(RunState::as_str)
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::RunState::*;
    use super::*;

    const ALL_EVENTS: [RunEvent; 5] = [
        RunEvent::WorkerStarted,
        RunEvent::PrOpened,
        RunEvent::Completed,
        RunEvent::Abandoned,
        RunEvent::OwnerCommented,
    ];

    const LEGAL: [(RunState, RunEvent, RunState); 8] = [
        (Queued, RunEvent::WorkerStarted, InProgress),
        (InProgress, RunEvent::PrOpened, Pr),
        (Pr, RunEvent::Completed, Complete),
        (Complete, RunEvent::OwnerCommented, Pr),
        (Queued, RunEvent::Abandoned, Abandoned),
        (InProgress, RunEvent::Abandoned, Abandoned),
        (Pr, RunEvent::Abandoned, Abandoned),
        (Complete, RunEvent::Abandoned, Abandoned),
    ];

    #[test]
    fn every_legal_move_reaches_its_target() {
        for (from, event, to) in LEGAL {
            assert_eq!(next_state(&from, event), Ok(to), "{from} + {event:?}");
        }
    }

    #[test]
    fn every_other_move_is_refused() {
        for from in RunState::KNOWN {
            for event in ALL_EVENTS {
                if LEGAL.iter().any(|(f, e, _)| *f == from && *e == event) {
                    continue;
                }
                let err = next_state(&from, event).expect_err("illegal move accepted");
                assert_eq!(err.from, from);
            }
        }
    }

    #[test]
    fn abandoned_is_final() {
        for event in ALL_EVENTS {
            assert!(next_state(&Abandoned, event).is_err(), "{event:?}");
        }
        assert!(!Abandoned.is_active());
        assert!(Pr.is_active());
    }

    #[test]
    fn a_pr_cannot_complete_before_it_exists() {
        let err = next_state(&InProgress, RunEvent::Completed).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot apply `completed` to a run that is in_progress (allowed from: pr)"
        );
    }

    #[test]
    fn unknown_stored_state_is_kept() {
        assert_eq!(RunState::from_column("paused"), Other("paused".into()));
        assert_eq!(RunState::from_column("pr"), Pr);
    }
}

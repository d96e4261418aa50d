//! How a run ends, decided: the one shape every ending takes, whichever path the run came
//! by (docs/design.md §10, "One ending").
//!
//! A run ends complete or abandoned. Its record as ended (state, lifecycle stage, times)
//! and the move its task makes are decided here from the run and the task as read; the
//! store writes both, and the release of the run's lease, in one transaction
//! (`Store::end_run`). Nothing here reads a clock or a store.

use chrono::{DateTime, Utc};

use crate::lifecycle::{RunView, Stage};
use crate::queue::{next_status, QueueEvent, QueueStatus};
use crate::record::Run;
use crate::run::{next_state, IllegalRunMove, RunEvent, RunState};

/// How the owner's `cancel` begins the reason it ends a run with (`abandoned`): what the
/// outcome figures tell a cancelled run from an abandoned one by.
pub const CANCELLED_BY_OWNER: &str = "cancelled by the owner";

/// The path a run ends by; it names the actor of its task's move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A run carried to its end on this machine (the local forge, or a failed worker).
    Local,
    /// A run whose PR was looked at: green and reviewed, merged, closed or gone.
    Pr,
    /// A run of one dispatched worker (`executor dispatch`).
    Dispatch,
    /// A parent task's run, ended by the conductor once its subtasks are.
    Conductor,
    /// The owner's `cancel`.
    Owner,
}

impl Origin {
    /// Who the task's history says moved it.
    pub fn actor(self) -> &'static str {
        match self {
            Origin::Local | Origin::Pr => "runner",
            Origin::Dispatch => "dispatch",
            Origin::Conductor => "conductor",
            Origin::Owner => "owner",
        }
    }

    pub const ALL: [Origin; 5] = [
        Origin::Local,
        Origin::Pr,
        Origin::Dispatch,
        Origin::Conductor,
        Origin::Owner,
    ];
}

/// How the run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Completed {
        /// Said in the task's history (`all 3 subtasks complete`).
        detail: Option<String>,
    },
    Abandoned {
        why: String,
    },
}

impl Outcome {
    pub fn completed() -> Self {
        Outcome::Completed { detail: None }
    }

    pub fn abandoned(why: impl Into<String>) -> Self {
        Outcome::Abandoned { why: why.into() }
    }

    /// The task's queue event.
    pub fn task_event(&self) -> QueueEvent {
        match self {
            Outcome::Completed { .. } => QueueEvent::RunCompleted,
            Outcome::Abandoned { .. } => QueueEvent::RunAbandoned,
        }
    }

    /// What the task's history says of it.
    pub fn detail(&self) -> Option<String> {
        match self {
            Outcome::Completed { detail } => detail.clone(),
            Outcome::Abandoned { why } => Some(why.clone()),
        }
    }

    fn complete(&self) -> bool {
        matches!(self, Outcome::Completed { .. })
    }
}

/// `run` as ended by `outcome` at `now`: its state moved by the run machine (a run that
/// completes without a PR of its own, on the local forge, by dispatch or as a parent,
/// passes through `pr` in the same step), its lifecycle at `ended`, its worker gone. A run
/// already in the state the outcome leads to is ended again as it is (an ending tried
/// again after its answer was lost); its completion time is kept.
pub fn ended(run: &Run, outcome: &Outcome, now: DateTime<Utc>) -> Result<Run, IllegalRunMove> {
    let mut ended = run.clone();
    ended.state = match (outcome, &run.state) {
        (Outcome::Completed { .. }, RunState::Complete)
        | (Outcome::Abandoned { .. }, RunState::Abandoned) => run.state.clone(),
        (Outcome::Completed { .. }, RunState::InProgress) => next_state(
            &next_state(&run.state, RunEvent::PrOpened)?,
            RunEvent::Completed,
        )?,
        (Outcome::Completed { .. }, state) => next_state(state, RunEvent::Completed)?,
        (Outcome::Abandoned { .. }, state) => next_state(state, RunEvent::Abandoned)?,
    };
    let complete = outcome.complete();
    if complete && ended.completed_at.is_none() {
        ended.completed_at = Some(now);
    }
    ended.updated_at = now;
    ended.worker_pid = None;
    let view = run.lifecycle.clone().unwrap_or_default();
    ended.lifecycle = Some(RunView {
        stage: Stage::Ended { complete },
        ended_because: match outcome {
            Outcome::Abandoned { why } => Some(why.clone()),
            Outcome::Completed { .. } => None,
        },
        ..view
    });
    Ok(ended)
}

/// Where the task goes when its run ends by `outcome`, from `status` as read: `None` when
/// the queue machine has no such move from there (the task is `done` already, after a PR
/// run completed again; or the owner moved it meanwhile, and it stays where they put it).
pub fn task_move(status: &QueueStatus, outcome: &Outcome) -> Option<QueueStatus> {
    next_status(status, outcome.task_event()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(minute: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 2, 10, minute, 0).unwrap()
    }

    fn run(state: RunState) -> Run {
        Run {
            id: 7,
            task_gid: "T-1".into(),
            worktree_path: None,
            branch_name: None,
            pr_url: None,
            pr_number: None,
            thread_id: None,
            started_at: Some(at(0)),
            updated_at: at(0),
            completed_at: None,
            state,
            ci_attempts: 1,
            worker_session_id: None,
            worker_last_update: None,
            worker_pid: Some(42),
            worker_stuck_count: 0,
            lifecycle: Some(RunView {
                stage: Stage::InPr,
                ci_attempts: 1,
                ..RunView::default()
            }),
            lease_epoch: 3,
        }
    }

    /// One row per way in: the state the run is in, the outcome, the state it ends in.
    #[test]
    fn every_way_in_ends_in_one_state() {
        use RunState::*;
        let abandoned = Outcome::abandoned("its PR was closed without a merge");
        let rows: &[(RunState, &Outcome, Option<RunState>)] = &[
            (InProgress, &Outcome::completed(), Some(Complete)),
            (Pr, &Outcome::completed(), Some(Complete)),
            (Complete, &Outcome::completed(), Some(Complete)),
            (Queued, &Outcome::completed(), None),
            (Abandoned, &Outcome::completed(), None),
            (Queued, &abandoned, Some(Abandoned)),
            (InProgress, &abandoned, Some(Abandoned)),
            (Pr, &abandoned, Some(Abandoned)),
            (Complete, &abandoned, Some(Abandoned)),
            (Abandoned, &abandoned, Some(Abandoned)),
        ];
        for (from, outcome, to) in rows {
            let got = ended(&run(from.clone()), outcome, at(5))
                .ok()
                .map(|r| r.state);
            assert_eq!(&got, to, "{from:?} by {outcome:?}");
        }
    }

    #[test]
    fn an_ended_run_says_so_in_its_lifecycle_and_keeps_its_counters() {
        let done = ended(&run(RunState::Pr), &Outcome::completed(), at(5)).expect("legal");
        let view = done.lifecycle.expect("a view");
        assert_eq!(view.stage, Stage::Ended { complete: true });
        assert_eq!((view.ci_attempts, view.ended_because), (1, None));
        assert_eq!((done.completed_at, done.updated_at), (Some(at(5)), at(5)));
        assert_eq!(done.worker_pid, None);
        assert_eq!(
            done.lease_epoch, 3,
            "written under the lease it was read with"
        );

        let gone = ended(
            &run(RunState::InProgress),
            &Outcome::abandoned("why"),
            at(5),
        )
        .expect("legal");
        let view = gone.lifecycle.expect("a view");
        assert_eq!(view.stage, Stage::Ended { complete: false });
        assert_eq!(view.ended_because.as_deref(), Some("why"));
        assert_eq!(gone.completed_at, None);
    }

    #[test]
    fn an_ending_tried_again_keeps_the_first_completion_time() {
        let once = ended(&run(RunState::Pr), &Outcome::completed(), at(5)).expect("legal");
        let twice = ended(&once, &Outcome::completed(), at(9)).expect("again");
        assert_eq!(twice.completed_at, Some(at(5)));
    }

    #[test]
    fn the_task_moves_only_where_the_queue_machine_allows() {
        use QueueStatus::*;
        let done = Outcome::completed();
        let gone = Outcome::abandoned("why");
        assert_eq!(task_move(&InProgress, &done), Some(Done));
        assert_eq!(task_move(&InProgress, &gone), Some(ForReview));
        assert_eq!(task_move(&Done, &done), None, "done already");
        assert_eq!(task_move(&ForReview, &gone), None, "the owner has it");
    }

    #[test]
    fn each_origin_names_its_actor() {
        let actors: Vec<_> = Origin::ALL.iter().map(|o| o.actor()).collect();
        assert_eq!(
            actors,
            ["runner", "runner", "dispatch", "conductor", "owner"]
        );
    }
}

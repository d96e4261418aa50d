//! What a decomposed task does next, given where its children stand. Pure.
//!
//! - Every child done: the parent completes.
//! - A child whose run was abandoned because its workers failed every retry, and that was
//!   never split, is split into smaller children while its depth is under the cap. A child
//!   abandoned for any other reason (the owner or the contract refused it, its planner
//!   failed, its own split failed) or at the cap makes the parent give up; the owner is told.
//! - Otherwise the parent waits: children run as their dependencies complete.
//!
//! What it must never do: split a child twice, or past the depth cap.

use crate::core::queue::QueueStatus;
use crate::core::run::RunState;

/// One child, as the conductor sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildState {
    pub gid: String,
    pub status: QueueStatus,
    /// 1 for a goal's children.
    pub depth: u32,
    /// The state of its latest run, if it had one.
    pub last_run: Option<RunState>,
    /// Whether it was split into children of its own already.
    pub split: bool,
    /// Whether a split was tried for it before (it carries a goal label): a child is split
    /// at most once.
    pub tried_split: bool,
    /// Whether its last run was abandoned because its workers failed (rather than by the
    /// owner's or the contract's refusal, or a planner's failure).
    pub workers_failed: bool,
}

/// The parent's next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParentStep {
    /// Children are still to run or running.
    Wait,
    /// Every child is done.
    Complete,
    /// Split this child into smaller ones.
    Split { child: String },
    /// A child failed at the depth cap: no more splitting.
    GiveUp { child: String },
}

/// See the module docs. `max_depth` is the deepest a child may be (a goal's children are at
/// depth 1).
pub fn next(children: &[ChildState], max_depth: u32) -> ParentStep {
    if !children.is_empty() && children.iter().all(|c| c.status == QueueStatus::Done) {
        return ParentStep::Complete;
    }
    let failed = children
        .iter()
        .find(|c| c.last_run == Some(RunState::Abandoned) && c.status == QueueStatus::ForReview);
    match failed {
        Some(child)
            if !child.split
                && !child.tried_split
                && child.workers_failed
                && child.depth < max_depth =>
        {
            ParentStep::Split {
                child: child.gid.clone(),
            }
        }
        // Split already, refused by the owner or the contract, or at the cap: no more
        // splitting; the owner decides.
        Some(child) => ParentStep::GiveUp {
            child: child.gid.clone(),
        },
        None => ParentStep::Wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(gid: &str, status: QueueStatus, last_run: Option<RunState>) -> ChildState {
        ChildState {
            gid: gid.into(),
            status,
            depth: 1,
            last_run,
            split: false,
            tried_split: false,
            workers_failed: true,
        }
    }

    #[test]
    fn all_done_completes_and_anything_else_waits() {
        let done = child("g.a", QueueStatus::Done, Some(RunState::Complete));
        let running = child("g.b", QueueStatus::InProgress, Some(RunState::InProgress));
        let waiting = child("g.c", QueueStatus::Approved, None);
        assert_eq!(next(&[done.clone(), done.clone()], 2), ParentStep::Complete);
        assert_eq!(next(&[done.clone(), running], 2), ParentStep::Wait);
        assert_eq!(next(&[done, waiting], 2), ParentStep::Wait);
        assert_eq!(next(&[], 2), ParentStep::Wait);
    }

    #[test]
    fn a_failed_child_is_split_under_the_cap_and_given_up_at_it() {
        let failed = child("g.a", QueueStatus::ForReview, Some(RunState::Abandoned));
        assert_eq!(
            next(std::slice::from_ref(&failed), 2),
            ParentStep::Split {
                child: "g.a".into()
            }
        );
        let deep = ChildState {
            depth: 2,
            ..failed.clone()
        };
        assert_eq!(
            next(&[deep], 2),
            ParentStep::GiveUp {
                child: "g.a".into()
            }
        );
        // Split already: its own children carry on.
        let split = ChildState {
            split: true,
            status: QueueStatus::InProgress,
            ..failed.clone()
        };
        assert_eq!(next(std::slice::from_ref(&split), 2), ParentStep::Wait);
        // ... and when that split fails in the end, the parent gives up.
        let split_failed = ChildState {
            status: QueueStatus::ForReview,
            last_run: Some(RunState::Abandoned),
            ..split
        };
        assert_eq!(
            next(&[split_failed], 2),
            ParentStep::GiveUp {
                child: "g.a".into()
            }
        );
    }

    #[test]
    fn a_child_is_split_at_most_once_and_only_when_its_workers_failed() {
        let failed = child("g.a", QueueStatus::ForReview, Some(RunState::Abandoned));
        // Its planner failed after a split was tried: no second split.
        let tried = ChildState {
            tried_split: true,
            ..failed.clone()
        };
        assert_eq!(
            next(&[tried], 3),
            ParentStep::GiveUp {
                child: "g.a".into()
            }
        );
        // The owner declined it: that is no reason to split it.
        let declined = ChildState {
            workers_failed: false,
            ..failed
        };
        assert_eq!(
            next(&[declined], 3),
            ParentStep::GiveUp {
                child: "g.a".into()
            }
        );
    }

    #[test]
    fn a_child_the_owner_moved_on_is_not_split() {
        // The owner skipped it: the parent waits for the owner, nothing is split.
        let skipped = child("g.a", QueueStatus::Skip, Some(RunState::Abandoned));
        assert_eq!(next(&[skipped], 2), ParentStep::Wait);
    }
}

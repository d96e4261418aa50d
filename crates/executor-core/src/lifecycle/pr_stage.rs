//! The run's PR stage as rows of the lifecycle table: one look at the run's PR, with the
//! facts the edge gathered beside it, decides the stage's one action.
//!
//! The PR's own table (what to do on a PR as the forge shows it: labels, CI, threads, the
//! review, completion) is [`crate::pr::next_pr_step`]; these rows put it in the run's life.
//! In order, the first that applies wins:
//!
//! 1. Effects the run owes come before anything new is decided: a completion's (its move,
//!    the owner's @mention, the record step and the notice), a fix's push, a fix's answers
//!    to its threads.
//! 2. A PR gone from the forge ends the run; a forge that cannot answer now leaves it for
//!    the next look.
//! 3. The PR machine's step. A step that starts a worker waits while the agent is paused at
//!    its usage limit (no attempt is spent), and asks the owner once the task's budget is
//!    spent (the answer lets one more worker start, or ends the run).
//! 4. A merged PR, or a complete one, ends the run complete; a PR closed unmerged ends it
//!    abandoned; the owner's comment on a complete draft brings it back to the PR stage.
//!
//! Pure, like the rest of the lifecycle: the look, the memory and the facts come in, the
//! action goes out. What it must never do: ask the forge, the store or the clock itself.

use chrono::{DateTime, Utc};

use super::{end, Action, Ask, RunView, Stage};
use crate::pr::{next_pr_step, remember, PrConfig, PrMemory, PrObservation, PrStep};

/// Why a run ends whose PR was closed without a merge.
pub const CLOSED_UNMERGED: &str = "its PR was closed without a merge";
/// Why a run ends when the owner will not let it spend more than its task's budget.
pub const BUDGET_REFUSED: &str = "the owner would not let it spend more than its task's budget";

/// One look at the run's PR, and what the edge knows beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct PrLook {
    pub seen: Seen,
    /// The PR machine's memory of the run, as stored between looks.
    pub memory: PrMemory,
    pub config: PrConfig,
    /// The agent is paused at its usage limit until then.
    pub paused_until: Option<DateTime<Utc>>,
    /// The task's budget, as it stands for the run's next worker.
    pub budget: Budget,
}

/// What the forge answered when asked for the run's PR.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    Pr(PrObservation),
    /// The PR is gone (a 404 the forge confirmed); `forge` names it for the owner.
    Gone {
        forge: String,
    },
    /// The forge cannot answer now (a rate limit, a 5xx, a timeout).
    Unavailable,
}

/// The task's budget as the run's next worker meets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Budget {
    /// Within its caps (or none is set), or the owner let one more worker start.
    Within,
    /// Spent, and the owner has not been asked: `why` says by how much.
    Over { why: String },
    /// Spent, and the owner's answer is awaited.
    Asked,
    /// Spent, and the owner said no.
    Refused,
}

/// What the edge does on the run's PR.
// It travels boxed whole (`Action::Pr`), so its small variants cost nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum PrAction {
    /// Perform what the run's completion still owes, in order.
    Settle,
    /// Push the fix the memory owes, then post the answers it owes.
    Push,
    /// Post the thread answers the memory owes.
    Answer,
    /// Take the PR machine's `step` on `obs`; `after` is the memory once it is taken.
    Step {
        step: PrStep,
        obs: PrObservation,
        after: PrMemory,
    },
}

/// The view of a run whose PR is watched: in its PR, or (`complete`) ended complete with
/// its PR still watched for the owner's comments, whatever stage an older executor stored.
pub fn watched(view: RunView, complete: bool) -> RunView {
    RunView {
        stage: if complete {
            Stage::Ended { complete: true }
        } else {
            Stage::InPr
        },
        ..view
    }
}

/// The PR stage's row for one look (see the module notes for the order).
pub(super) fn looked(next: &mut RunView, look: PrLook) -> Action {
    let PrLook {
        seen,
        memory,
        config,
        paused_until,
        budget,
    } = look;
    if memory.completion.is_some() {
        return Action::Pr(Box::new(PrAction::Settle));
    }
    if memory.push.is_some() {
        return Action::Pr(Box::new(PrAction::Push));
    }
    if !memory.answers.is_empty() {
        return Action::Pr(Box::new(PrAction::Answer));
    }
    let obs = match seen {
        Seen::Pr(obs) => obs,
        Seen::Gone { forge } => return end(next, format!("its PR is gone from {forge}")),
        Seen::Unavailable => return Action::Wait,
    };
    let step = next_pr_step(&obs, &memory, &config);
    if starts_worker(&step) {
        if let Some(until) = paused_until {
            return Action::WaitUntil(until);
        }
        match budget {
            Budget::Within => {}
            Budget::Over { why } => {
                return Action::AskOwner {
                    ask: Ask::Budget { why },
                    commit_first: false,
                }
            }
            Budget::Asked => return Action::Wait,
            Budget::Refused => return end(next, BUDGET_REFUSED.to_string()),
        }
    }
    match &step {
        PrStep::Closed => return end(next, CLOSED_UNMERGED.to_string()),
        PrStep::Merged | PrStep::Complete { .. } => {
            next.stage = Stage::Ended { complete: true };
        }
        PrStep::BackToPr { .. } => next.stage = Stage::InPr,
        _ => {}
    }
    let after = remember(&memory, &step, &obs);
    Action::Pr(Box::new(PrAction::Step { step, obs, after }))
}

/// Whether the PR machine's step starts a worker.
fn starts_worker(step: &PrStep) -> bool {
    matches!(
        step,
        PrStep::SpawnFixCi { .. } | PrStep::SpawnFixComments { .. } | PrStep::SpawnReview { .. }
    )
}

//! Phase prompts: the text a worker is started with, one template per phase
//! (docs/design.md §2), rendered with minijinja.
//!
//! | phase | file | the worker is told to |
//! |---|---|---|
//! | `queued` | `executor-worker-queued.md` | start the task |
//! | `in_progress` | `executor-worker-inprogress.md` | resume after an interruption, from the recent messages |
//! | `fix_ci` | `executor-worker-fix-ci.md` | make CI green: failed checks, failing step, log excerpt, run URL |
//! | `fix_comments` | `executor-worker-fix-comments.md` | address exactly the unresolved review threads given |
//! | `pr_review` | `executor-worker-pr-review.md` | review the change with the project's rules and required checks |
//! | `decompose` | `executor-conductor-decompose.md` | split a goal into subtasks, each specified completely, written as a plan file |
//!
//! The six include three partials: `_task.md` (the task and the worktree), `_messages.md`
//! (the recent message window) and `_protocol.md`, which teaches every worker the message
//! format of docs/design.md §5 and that it never pushes, opens PRs or uses credentials.
//!
//! **Overrides.** [`PromptSet::load`] takes each file from the owner's `prompts/` folder when
//! it is there and from the built-in copy otherwise; `executor init` writes the built-in
//! copies there ([`builtin_files`]). Extra partials of the owner's (`prompts/_*.md`) are
//! loaded too, so an override can `{% include "_house_rules.md" %}`.
//!
//! **Strict.** Templates render with [`UndefinedBehavior::Strict`](minijinja::UndefinedBehavior)
//! and are checked when they are loaded, not when a worker is about to start: every
//! attribute chain they name must exist in [`PromptContext`], and every phase template must
//! render against a complete and a minimal example context. A misspelt variable fails the
//! load with a [`PromptError`] naming the file, the line and the variable.
//!
//! Blocks trim their own line (`trim_blocks`, `lstrip_blocks`), nothing is HTML-escaped, a
//! trailing newline is kept. Two filters help with markdown: `fence` wraps text in a code
//! fence longer than any backtick run inside it, `blockquote` prefixes every line with `> `.
//!
//! No line of a rendered prompt starts with a protocol tag: examples are shown in inline
//! code, so a prompt echoed to a worker's output is never taken for the worker's message.

mod context;
mod error;
pub(crate) mod set;
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use context::{
    CheckStatus, CiFailure, ConductorInputs, FailedCheck, PromptContext, PromptMessage,
    ReviewComment, ReviewInputs, ReviewThread, RunContext, TaskContext,
};
pub use error::{Location, PromptError};
pub use set::{Origin, PromptSet};

/// What a worker is spawned for (docs/design.md §2), as far as it has a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Queued,
    InProgress,
    FixCi,
    FixComments,
    PrReview,
    /// The conductor's planner: split a task into subtasks.
    Decompose,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Phase::Queued,
        Phase::InProgress,
        Phase::FixCi,
        Phase::FixComments,
        Phase::PrReview,
        Phase::Decompose,
    ];

    /// The owner's word for the phase (the `{phase}` of a work log's file name).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Queued => "queued",
            Phase::InProgress => "in_progress",
            Phase::FixCi => "fix_ci",
            Phase::FixComments => "fix_comments",
            Phase::PrReview => "pr_review",
            Phase::Decompose => "decompose",
        }
    }

    /// The template's file name under `prompts/`.
    pub fn file_name(self) -> &'static str {
        match self {
            Phase::Queued => "executor-worker-queued.md",
            Phase::InProgress => "executor-worker-inprogress.md",
            Phase::FixCi => "executor-worker-fix-ci.md",
            Phase::FixComments => "executor-worker-fix-comments.md",
            Phase::PrReview => "executor-worker-pr-review.md",
            Phase::Decompose => "executor-conductor-decompose.md",
        }
    }

    /// The `[DONE:kind]` kinds the built-in prompt of this phase asks the worker to end
    /// with. Any phase may end with an `[ESCALATE:kind]` instead.
    pub fn done_kinds(self) -> &'static [&'static str] {
        match self {
            Phase::Queued | Phase::InProgress => &["implemented"],
            Phase::FixCi => &["ci_fixed"],
            Phase::FixComments => &["comments_addressed"],
            Phase::PrReview => &["review_green", "changes_requested"],
            Phase::Decompose => &["decomposed"],
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Phase {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Phase::ALL
            .into_iter()
            .find(|phase| phase.as_str() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = Phase::ALL.iter().map(|p| p.as_str()).collect();
                format!("unknown phase `{s}`, expected one of {}", known.join(", "))
            })
    }
}

/// The shared partials, included by the phase templates.
pub const PARTIALS: [&str; 3] = ["_task.md", "_messages.md", "_protocol.md"];

static BUILTIN_FILES: [(&str, &str); 9] = [
    (
        "executor-worker-queued.md",
        include_str!("../assets/prompts/executor-worker-queued.md"),
    ),
    (
        "executor-worker-inprogress.md",
        include_str!("../assets/prompts/executor-worker-inprogress.md"),
    ),
    (
        "executor-worker-fix-ci.md",
        include_str!("../assets/prompts/executor-worker-fix-ci.md"),
    ),
    (
        "executor-worker-fix-comments.md",
        include_str!("../assets/prompts/executor-worker-fix-comments.md"),
    ),
    (
        "executor-worker-pr-review.md",
        include_str!("../assets/prompts/executor-worker-pr-review.md"),
    ),
    (
        "executor-conductor-decompose.md",
        include_str!("../assets/prompts/executor-conductor-decompose.md"),
    ),
    ("_task.md", include_str!("../assets/prompts/_task.md")),
    (
        "_messages.md",
        include_str!("../assets/prompts/_messages.md"),
    ),
    (
        "_protocol.md",
        include_str!("../assets/prompts/_protocol.md"),
    ),
];

/// Every built-in prompt file as (file name, contents): the six phase templates and their
/// partials. `executor init` writes these into `prompts/`.
pub fn builtin_files() -> &'static [(&'static str, &'static str)] {
    &BUILTIN_FILES
}

/// The built-in contents of one file, if it is one of [`builtin_files`].
pub fn builtin_file(name: &str) -> Option<&'static str> {
    BUILTIN_FILES
        .iter()
        .find(|(file, _)| *file == name)
        .map(|(_, text)| *text)
}

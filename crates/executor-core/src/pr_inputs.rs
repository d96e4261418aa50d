//! What the `pr` state machine ([`super::pr`]) hands a PR-phase worker: the failed checks
//! of a `fix_ci` worker, the review threads of a `fix_comments` worker, the rules and
//! required checks of a `pr_review` worker. The machine decides them; the prompts
//! (`executor::prompts`) render them, so these types live here and the prompts import them,
//! never the other way round.
//!
//! Plain data: nothing here does I/O or knows a template.

use serde::{Deserialize, Serialize};

/// What failed on CI, as the `fix_ci` worker is told it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CiFailure {
    pub checks: Vec<FailedCheck>,
    /// The step (or, on the local forge, the verification command) that failed.
    pub failing_step: Option<String>,
    /// The end of the failing step's log.
    pub log_excerpt: String,
    pub run_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedCheck {
    pub name: String,
    /// The check's own one-line summary, e.g. "1 failed, 47 passed".
    pub summary: Option<String>,
    /// Where a human reads this check (a check run's details, a commit status's target):
    /// each failed check keeps its own, as two CIs report two places.
    #[serde(default)]
    pub url: Option<String>,
}

/// One unresolved review thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewThread {
    /// The forge's thread id; the worker names it in `thread=` of its answers.
    pub id: String,
    pub path: String,
    /// `None` when the thread is outdated (the line it was on has changed).
    pub line: Option<u32>,
    pub comments: Vec<ReviewComment>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewComment {
    pub author: String,
    pub body: String,
}

/// What the `pr_review` worker reviews against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewInputs {
    /// Files of the worktree holding the project's rules (AGENTS.md, CONTRIBUTING.md, ...);
    /// empty: the worker finds them itself.
    pub rules_files: Vec<String>,
    pub required_checks: Vec<CheckStatus>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckStatus {
    pub name: String,
    /// The forge's word: `success`, `failure`, `pending`, ...
    pub conclusion: String,
}

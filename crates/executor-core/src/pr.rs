//! The `pr` state machine, docs/design.md §3: what the orchestrator does next for a run whose
//! change is a pull request, decided from one look at the PR.
//!
//! Theory of operation: on every tick the caller (the forge side of the runner) fetches a
//! [`PrObservation`] of the run's PR, loads the run's [`PrMemory`], and asks
//! [`next_pr_step`] for exactly one [`PrStep`]. It carries the step out (add labels, trigger
//! CI, spawn a `fix_ci` / `fix_comments` / `pr_review` worker, mark the run complete, ...),
//! then stores [`remember`]`(memory, step, observation)` as the new memory. The outcome of a
//! `pr_review` worker is stored with [`PrMemory::record_review`] when that worker ends, before
//! its review is posted ([`PrStep::PostReview`] posts a kept verdict again). The
//! whole table of the design is [`next_pr_step`]; its priority order is written at the top
//! of that function and tested row by row below.
//!
//! What this module must never do: I/O of any kind, read the clock (the observation carries
//! its own `observed_at`), know how GitHub is spoken to (the observation is built by the
//! caller from whatever forge answers), or keep state outside [`PrMemory`]. Anything that
//! is not a plain computation over the three arguments belongs to the caller.
//!
//! Decisions, and why:
//!
//! - **One step per tick.** Every step is cheap to repeat and the next tick sees its effect
//!   (labels present, a thread resolved, CI queued), so the machine never has to reason about
//!   two actions in flight. Workers are the expensive steps; they are only ever chosen when
//!   nothing cheaper is pending.
//! - **A deleted PR is the caller's.** A PR that cannot be fetched (404, GraphQL
//!   `NOT_FOUND`) yields no observation at all, so it cannot be decided here: the caller
//!   abandons the run (after making sure the 404 is not a transient error).
//! - **CI is judged by check runs, never by the combined status** (which reads `pending` on
//!   Actions-only repositories). All checks must have completed before CI is judged, so a
//!   `fix_ci` worker sees every failure at once and never races a run still in flight.
//! - **Green** is: every check completed as `success`, `neutral` or `skipped`, and every
//!   required check present and `success` (a skipped UI test suite has verified nothing).
//!   A missing required check means not green: CI is triggered for it (it may be a
//!   `workflow_dispatch`-only workflow), and if it still does not appear the owner is asked.
//! - **`cancelled` and `stale`** are not the code's fault: CI is triggered again, once per
//!   head. **`action_required`** needs a human (a workflow waiting for approval): escalate.
//! - **Triggering CI is guarded by time**: nothing is triggered within `ci_start_grace` of
//!   the head being pushed or of the last trigger (GitHub needs a moment to register the
//!   push's own runs, and a second trigger would start a duplicate run), and CI is triggered
//!   at most once per head; after that the owner is asked.
//! - **Which threads need work**: unresolved ones whose last comment does not start with an
//!   `[ACKNOWLEDGED: …]` marker (read by [`crate::protocol::parse_line`], the same grammar as
//!   everywhere else: a malformed marker is not an acknowledgement, so the thread is sent
//!   rather than silently dropped). **Outdated threads are included**: "outdated" only says
//!   the lines under the comment changed, not that the point was addressed; the worker gets
//!   them with `line: None`, as the prompt type expects.
//! - **The fingerprint ignores the executor's own comments.** It is built from each thread's
//!   id and the id of its last comment written by someone other than the executor. A
//!   `fix_comments` worker answers the threads it fixed ("Fixed in 9d41c2e"); if those replies
//!   changed the fingerprint, every answer would send the same threads again. A new reply by
//!   a reviewer does change it. A set is "already sent" when every (thread, last reply) pair
//!   of it was in the remembered set, not only when it is equal: a thread acknowledged or
//!   resolved since must not cause the rest to be sent again.
//! - **Acknowledged threads are resolved as a step of their own** (`resolve_acknowledged`),
//!   early in the order: it is one cheap call, and an acknowledged thread never blocks
//!   anything whether resolved or not.
//! - **Escalations are sent once per head and reason**; after that the run waits for the
//!   owner (a push, a raised cap in [`PrMemory::max_ci_attempts`], a review thread).
//! - **One `fix_ci` worker per failed head.** The attempt is tied to the head it was made
//!   for ([`PrMemory::ci_fix`], remembered before the worker starts). A look that still shows
//!   that head (GitHub has not caught up with the push, or an answer from before it) waits
//!   while the fix's own commit is not yet the head; a worker that pushed nothing for the
//!   head (or was cut off by a crash) is the owner's, once. A worker that ended without
//!   `[DONE]` unties the head (the caller clears it), so the next tick may try again within
//!   `max_ci_attempts`.
//! - **A review verdict is kept before it is posted.** [`PrMemory::record_review`] stores it
//!   unposted; [`PrStep::PostReview`] posts a kept verdict again, so a failed post never
//!   costs a second review worker.
//! - **A completion owes its effects.** [`remember`] of `Complete` (or `Merged` from `pr`)
//!   writes [`PrMemory::completion`]: the @mention (not for a merge: the owner merged it),
//!   then the record step. The caller performs them in that order and marks each done; the
//!   comment's marker lets a retry find a comment whose answer was lost.
//! - **Failed writes are counted, not fatal.** [`PrMemory::effect_failed`] counts failures
//!   in a row and says when to ask the owner (once per streak, at `max_failures`);
//!   [`PrMemory::effect_done`] ends the streak.
//! - **Mergeability never blocks.** `mergeable: null` is GitHub still computing it; a
//!   conflict is the owner's call. Either is reported in [`PrStep::Complete`] so the owner's
//!   notification can say so.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::pr_inputs::{
    CheckStatus, CiFailure, FailedCheck, ReviewComment, ReviewInputs, ReviewThread,
};
use super::run::{RunEvent, RunState};
use crate::merge::{AutoMerge, MergeAttempt, MergeMethod, Verdict};
use crate::protocol::{parse_line, Parsed};

// ---------------------------------------------------------------------------------------
// What the orchestrator saw
// ---------------------------------------------------------------------------------------

/// One look at a run's PR, built by the caller on one tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrObservation {
    /// When the look was taken; the only "now" this machine knows.
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub observed_at: DateTime<Utc>,
    pub state: PrState,
    pub draft: bool,
    /// `None`: the forge has not computed it yet (GitHub's `mergeable: null`).
    pub mergeable: Option<bool>,
    pub head_sha: String,
    /// When the orchestrator pushed the current head, if it knows; CI is not triggered
    /// within `ci_start_grace` of it.
    #[serde(default, serialize_with = "crate::time::serde_utc::optional")]
    pub head_pushed_at: Option<DateTime<Utc>>,
    /// Whether any CI run (an Actions workflow run, a check suite) exists for the head
    /// commit, even one that has not created its check runs yet.
    pub ci_run_exists: bool,
    /// Every check run for the head commit (all pages; the latest per name).
    pub checks: Vec<CheckRun>,
    /// The labels on the PR now.
    pub labels: Vec<String>,
    /// Every review thread of the PR, resolved ones included, each with all its comments.
    pub threads: Vec<ObservedThread>,
    /// Every comment the owner wrote on the PR (conversation comments, review comments and
    /// review bodies), oldest or newest first: order does not matter.
    pub owner_comments: Vec<OwnerComment>,
    /// A worker of this run is alive (the caller normally does not ask then).
    #[serde(default)]
    pub worker_running: bool,
    /// The PR's author, when the caller read it (auto-merge counts no approval of theirs).
    #[serde(default)]
    pub author: Option<String>,
    /// Each reviewer's latest approval or request for changes, when the caller read them
    /// (it does for a complete run under auto-merge).
    #[serde(default)]
    pub verdicts: Vec<Verdict>,
}

/// GitHub's `state` plus `merged`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrState {
    Open,
    Closed,
    Merged,
}

/// One check run of the head commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRun {
    pub name: String,
    pub status: CheckRunStatus,
    /// `None` until the check completed.
    pub conclusion: Option<CheckConclusion>,
    /// Where a human reads the check (`details_url`, else `html_url`).
    #[serde(default)]
    pub url: Option<String>,
    /// The CI run the check belongs to (an Actions run's page), when the caller knows it.
    #[serde(default)]
    pub run_url: Option<String>,
    /// The check's one-line summary (`output.title`), e.g. "1 failed, 47 passed".
    #[serde(default)]
    pub summary: Option<String>,
    /// For a failed check: the job step that failed, if the caller fetched the job.
    #[serde(default)]
    pub failing_step: Option<String>,
    /// For a failed check: the end of the failing step's log, if the caller fetched it.
    #[serde(default)]
    pub log_excerpt: Option<String>,
}

/// A check run's `status`. Anything but `completed` means still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckRunStatus {
    Queued,
    InProgress,
    Completed,
    Waiting,
    Requested,
    Pending,
    /// A value this version does not know; read as still running.
    #[serde(other)]
    Unknown,
}

/// A completed check run's `conclusion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckConclusion {
    Success,
    Failure,
    Neutral,
    Cancelled,
    Skipped,
    TimedOut,
    ActionRequired,
    Stale,
    /// A value this version does not know; read as a failure (never as green).
    #[serde(other)]
    Unknown,
}

impl CheckConclusion {
    /// The forge's word.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckConclusion::Success => "success",
            CheckConclusion::Failure => "failure",
            CheckConclusion::Neutral => "neutral",
            CheckConclusion::Cancelled => "cancelled",
            CheckConclusion::Skipped => "skipped",
            CheckConclusion::TimedOut => "timed_out",
            CheckConclusion::ActionRequired => "action_required",
            CheckConclusion::Stale => "stale",
            CheckConclusion::Unknown => "unknown",
        }
    }
}

/// One review thread as the forge shows it (GraphQL `PullRequestReviewThread`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedThread {
    pub id: String,
    pub path: String,
    /// `None` when the thread is outdated.
    pub line: Option<u32>,
    pub is_resolved: bool,
    pub is_outdated: bool,
    /// All of the thread's comments, oldest first.
    pub comments: Vec<ObservedComment>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedComment {
    pub id: String,
    /// The author's login as the forge shows it (`lumen-executor` or `lumen-executor[bot]`).
    pub author: String,
    pub body: String,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub created_at: DateTime<Utc>,
}

/// A comment the owner wrote on the PR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerComment {
    /// The forge's numeric id (REST `id`; GraphQL `databaseId`).
    pub id: u64,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub created_at: DateTime<Utc>,
    /// On the PR's conversation (an issue comment), not in a review thread: no thread
    /// carries it to a worker, so the machine does (see [`PrMemory::owner_asks`]).
    #[serde(default)]
    pub on_conversation: bool,
    #[serde(default)]
    pub body: String,
}

/// Whether the PR can be merged, as far as the forge has worked it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mergeability {
    Mergeable,
    Conflicting,
    /// The forge has not computed it yet; not a reason to wait.
    NotComputed,
}

impl PrObservation {
    pub fn mergeability(&self) -> Mergeability {
        match self.mergeable {
            Some(true) => Mergeability::Mergeable,
            Some(false) => Mergeability::Conflicting,
            None => Mergeability::NotComputed,
        }
    }
}

// ---------------------------------------------------------------------------------------
// What the run remembers, and what the config says
// ---------------------------------------------------------------------------------------

/// What a run remembers between ticks; stored as JSON with the run.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PrMemory {
    pub stage: Stage,
    /// `fix_ci` workers started for this run.
    pub ci_attempts: u32,
    /// A cap for this run only, overriding the config's (the owner raises it to let an
    /// escalated run go on).
    pub max_ci_attempts: Option<u32>,
    /// The thread set last sent to a `fix_comments` worker.
    pub sent_threads: Option<ThreadFingerprint>,
    /// The last `pr_review` outcome, for the head it reviewed.
    pub review: Option<ReviewRecord>,
    /// The newest owner comment known when the run last completed or went back to `pr`.
    pub last_owner_comment: Option<OwnerComment>,
    /// The last time CI was triggered, and for which head.
    pub ci_triggered: Option<CiTriggered>,
    /// The last escalation, so it is sent once per head and reason.
    pub escalated: Option<Escalated>,
    /// The owner's conversation comments that sent the complete run back to `pr`, for the
    /// next `fix_comments` worker; emptied when one is sent.
    pub owner_asks: Vec<OwnerComment>,
    /// The run's verified commit to push to its branch, decided before the push and kept
    /// until the push lands (a remote that is down leaves it here for the next tick, which
    /// pushes it again before it opens the PR).
    pub push: Option<Push>,
    /// The draft PR this run opens, decided with its push and kept until the PR is open (a
    /// transient error leaves it here for the next tick).
    pub opening: Option<Opening>,
    /// What the run's completion still owes the outside world (the owner's @mention on
    /// the PR, the record step and the owner's notice), set with the decision to complete
    /// and emptied as each lands.
    pub completion: Option<Completion>,
    /// The `fix_ci` worker started for a failed head: one per head, whatever the ticks see.
    pub ci_fix: Option<CiFix>,
    /// Transient failures in a row of the outside effect being tried now (opening the PR,
    /// the completion comment, posting a review); reset when one lands.
    pub effect_failures: u32,
    /// The owner was asked about those failures (once per streak).
    pub effect_escalated: bool,
    /// What a `fix_comments` worker answered its threads, owed to the PR: posted only once
    /// the fix's push landed (a reply never says "fixed" before the fix is on the branch),
    /// each leaving the list as it is posted, so a failed reply is posted again by a later
    /// tick and no other worker is started meanwhile.
    pub answers: Vec<ThreadAnswer>,
    /// The PR was merged: it can change no more (a merged PR is never reopened), so once
    /// the completion owes nothing, no tick looks at it again.
    pub merged: bool,
    /// The merge auto-merge decided, kept before it is sent ([`crate::merge`]).
    pub merge: Option<MergeAttempt>,
    /// The head the owner was last told auto-merge holds (told once per head).
    pub merge_told: Option<String>,
}

impl PrMemory {
    /// Nothing more can happen to this run's PR, and nothing is owed for it: a tick need
    /// not look at the PR again.
    pub fn settled(&self) -> bool {
        self.merged && self.stage == Stage::Complete && self.completion.is_none()
    }
}

/// One reply owed to a PR thread (or to an owner's conversation comment, `comment-<id>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadAnswer {
    pub thread: String,
    pub text: String,
}

/// A push the orchestrator owes: `git push <remote> <commit>:refs/heads/<branch>`. The
/// commit is the one the orchestrator made (checked against the worker's snapshot before
/// it was recorded), so a push again pushes that commit and nothing newer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Push {
    /// The run's branch on the remote.
    pub branch: String,
    /// The full commit id pushed to it.
    pub commit: String,
}

/// A draft PR to open: what `POST /pulls` is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Opening {
    pub title: String,
    /// The run's branch.
    pub head: String,
    pub base: String,
    pub body: String,
}

/// The completion's effects still owed. Each is done at most once: the comment carries a
/// marker a retry looks for first, and the record step is marked done right after it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Completion {
    /// The head the run completed on (the record step's commit).
    pub head_sha: String,
    /// The @mention comment on the PR is still to be posted.
    pub comment: bool,
    /// The record step and the owner's notice are still to be done.
    pub record: bool,
    /// The PR was merged (rather than found complete): the owner merged it, so no @mention.
    pub merged: bool,
}

/// The one completion effect to do next, in order: the comment, then the record step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owed {
    Comment,
    Record,
}

impl Completion {
    pub fn next(&self) -> Option<Owed> {
        if self.comment {
            Some(Owed::Comment)
        } else if self.record {
            Some(Owed::Record)
        } else {
            None
        }
    }
}

/// The `fix_ci` worker made for a head, and what it pushed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CiFix {
    /// The failed head the worker was started for.
    pub head_sha: String,
    /// The commit its fix was pushed as; `None` while it works, or when it pushed nothing.
    pub pushed: Option<String>,
}

/// The run state while this machine drives it: the two [`RunState`]s it moves between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    #[default]
    Pr,
    Complete,
}

impl Stage {
    pub fn run_state(self) -> RunState {
        match self {
            Stage::Pr => RunState::Pr,
            Stage::Complete => RunState::Complete,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewRecord {
    pub head_sha: String,
    pub passed: bool,
    /// The review is on the PR. A verdict whose post failed is kept and posted again,
    /// never reviewed again. (Records from before this field were posted.)
    #[serde(default = "posted_before")]
    pub posted: bool,
    /// The review's text, as it is posted.
    #[serde(default)]
    pub body: String,
}

fn posted_before() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CiTriggered {
    pub head_sha: String,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Escalated {
    pub head_sha: String,
    pub kind: EscalationKind,
}

impl PrMemory {
    /// The memory after a `pr_review` worker ended with a verdict on `head_sha`, whose
    /// review `body` is still to be posted.
    pub fn record_review(&self, head_sha: &str, passed: bool, body: &str) -> PrMemory {
        PrMemory {
            review: Some(ReviewRecord {
                head_sha: head_sha.to_string(),
                passed,
                posted: false,
                body: body.to_string(),
            }),
            ..self.clone()
        }
    }

    /// The memory after the recorded review was posted.
    pub fn review_posted(&self) -> PrMemory {
        let mut next = self.clone();
        if let Some(review) = next.review.as_mut() {
            review.posted = true;
        }
        next
    }

    /// The memory after an outside effect failed for a reason that may pass (a 5xx, a
    /// timeout, a rate limit), and whether the owner is to be asked now: once, when the
    /// streak reaches `max_failures`.
    pub fn effect_failed(&self, max_failures: u32) -> (PrMemory, bool) {
        let mut next = self.clone();
        next.effect_failures = self.effect_failures.saturating_add(1);
        let ask = !self.effect_escalated && next.effect_failures >= max_failures.max(1);
        if ask {
            next.effect_escalated = true;
        }
        (next, ask)
    }

    /// The memory after the owed push landed: none owed, the failure streak over.
    pub fn push_done(&self) -> PrMemory {
        PrMemory {
            push: None,
            ..self.effect_done()
        }
    }

    /// The memory after an outside effect landed: the failure streak is over.
    pub fn effect_done(&self) -> PrMemory {
        PrMemory {
            effect_failures: 0,
            effect_escalated: false,
            ..self.clone()
        }
    }
}

/// The configured rules of the `pr` machine (built by the config module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrConfig {
    /// Check names that must conclude `success` before a review can pass.
    pub required_checks: Vec<String>,
    /// Labels every draft PR carries (compared without case, as GitHub does).
    pub required_labels: Vec<String>,
    /// `fix_ci` workers a run may start before the owner is asked.
    pub max_ci_attempts: u32,
    /// Resolve threads whose last comment is `[ACKNOWLEDGED: …]`.
    pub resolve_acknowledged: bool,
    /// The executor's own logins (its App bot), with or without `[bot]`.
    pub executor_logins: Vec<String>,
    /// What a `pr_review` worker reviews against (AGENTS.md, CONTRIBUTING.md, ...).
    pub review_rules_files: Vec<String>,
    /// How long CI may take to appear after a push or a trigger.
    pub ci_start_grace: Duration,
    /// `[forge] auto_merge`, when enabled.
    pub auto_merge: Option<AutoMerge>,
}

impl Default for PrConfig {
    fn default() -> Self {
        PrConfig {
            required_checks: Vec::new(),
            required_labels: Vec::new(),
            max_ci_attempts: 3,
            resolve_acknowledged: false,
            executor_logins: Vec::new(),
            review_rules_files: Vec::new(),
            ci_start_grace: Duration::minutes(5),
            auto_merge: None,
        }
    }
}

// ---------------------------------------------------------------------------------------
// What to do
// ---------------------------------------------------------------------------------------

/// The one thing to do on this tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum PrStep {
    /// Merged by a human: the run is complete (if it is not already) and its task `done`.
    Merged,
    /// Closed unmerged by a human: the run is abandoned.
    Closed,
    /// The owner commented on the complete draft PR: the run goes back to `pr`. The ids are
    /// the new comments, for the next worker's message window.
    BackToPr { comment_ids: Vec<u64> },
    /// Add these required labels to the draft PR.
    AddLabels { labels: Vec<String> },
    /// Resolve these acknowledged threads.
    ResolveThreads { thread_ids: Vec<String> },
    /// Trigger CI for the head commit (rerun or `workflow_dispatch`, as configured).
    TriggerCi {
        head_sha: String,
        reason: TriggerReason,
    },
    /// Nothing to do on this tick.
    Wait { reason: WaitReason },
    /// Spawn a `fix_ci` worker.
    SpawnFixCi {
        attempt: u32,
        max_attempts: u32,
        failure: CiFailure,
    },
    /// Spawn a `fix_comments` worker with exactly these threads.
    SpawnFixComments {
        threads: Vec<ReviewThread>,
        fingerprint: ThreadFingerprint,
    },
    /// Spawn a `pr_review` worker.
    SpawnReview { inputs: ReviewInputs },
    /// Post the review a `pr_review` worker already gave this head (its first post failed).
    PostReview { head_sha: String, body: String },
    /// CI green, review passed, nothing unresolved: the run is complete; @mention the owner
    /// (saying whether the PR can be merged).
    Complete { mergeable: Mergeability },
    /// Ask the owner; the run waits for them.
    Escalate {
        kind: EscalationKind,
        detail: String,
    },
    /// Auto-merge: merge the complete run's PR on this head (kept before it is sent).
    Merge {
        head_sha: String,
        method: MergeMethod,
        delete_branch: bool,
    },
    /// Auto-merge holds the complete run's PR: tell the owner why (once per head).
    MergeHeld {
        head_sha: String,
        /// The forge refused the merge executor sent (told apart from holding).
        #[serde(default)]
        refused: bool,
        reasons: Vec<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum TriggerReason {
    /// No CI run exists for the head commit.
    NoRun,
    /// Everything completed, but these required checks never reported.
    MissingRequired { checks: Vec<String> },
    /// These checks were cancelled or went stale.
    Rerun { checks: Vec<String> },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum WaitReason {
    /// A worker of the run is alive.
    WorkerRunning,
    /// CI was pushed or triggered a moment ago and has not shown up yet.
    CiStarting,
    /// These checks have not completed.
    CiRunning { checks: Vec<String> },
    /// These threads were already sent to a `fix_comments` worker; a reviewer's reply,
    /// a resolution or a new thread moves on.
    ThreadsAlreadySent { thread_ids: Vec<String> },
    /// The owner was asked; nothing changed since.
    Escalated { kind: EscalationKind },
    /// The run is complete; waiting for the owner to merge, close or comment.
    AwaitingOwner,
    /// A `fix_ci` worker pushed its fix of the failed head; GitHub does not show the new
    /// head yet.
    CiFixPushed { pushed: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EscalationKind {
    /// CI failed again after `max_ci_attempts` `fix_ci` workers.
    CiAttemptsExhausted,
    /// CI was triggered for the head and still did not run.
    CiDidNotStart,
    /// A required check was triggered for and still did not report.
    RequiredCheckMissing,
    /// Checks were re-run and were cancelled again.
    CiCancelled,
    /// A check waits for a human (`action_required`).
    CiNeedsApproval,
    /// A required check completed without running (`skipped`, `neutral`).
    RequiredCheckNotRun,
    /// The review of this head did not pass and left nothing to fix.
    ReviewNotPassed,
    /// A `fix_ci` worker was run for the failed head and pushed no fix.
    CiFixPushedNothing,
    /// An outside effect (opening the PR, a comment, a review) kept failing.
    EffectFailing,
}

/// The thread set sent to a `fix_comments` worker: sorted `thread@comment` entries, where
/// `comment` is the thread's last comment not written by the executor (empty if none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ThreadFingerprint(pub String);

impl ThreadFingerprint {
    fn entries(&self) -> BTreeSet<&str> {
        self.0
            .split(',')
            .filter(|entry| !entry.is_empty())
            .collect()
    }

    /// Every entry of `self` was in `sent`: nothing new to send.
    pub fn already_in(&self, sent: &ThreadFingerprint) -> bool {
        self.entries().is_subset(&sent.entries())
    }
}

impl PrStep {
    /// The run machine's event for this step from `stage`, if the run's state moves.
    pub fn run_event(&self, stage: Stage) -> Option<RunEvent> {
        match (self, stage) {
            (PrStep::Merged, Stage::Pr) | (PrStep::Complete { .. }, Stage::Pr) => {
                Some(RunEvent::Completed)
            }
            (PrStep::Closed, _) => Some(RunEvent::Abandoned),
            (PrStep::BackToPr { .. }, Stage::Complete) => Some(RunEvent::OwnerCommented),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------
// The machine
// ---------------------------------------------------------------------------------------

/// The `pr` machine: the one step to take for `obs`.
///
/// Priority order (the first that applies wins):
///
/// 1. PR merged → [`PrStep::Merged`]; closed unmerged → [`PrStep::Closed`] (any stage).
/// 2. Run complete: a new owner comment on the draft PR → [`PrStep::BackToPr`]; otherwise
///    wait for the owner.
/// 3. Required labels missing on a draft → [`PrStep::AddLabels`].
/// 4. `resolve_acknowledged` and acknowledged threads still unresolved →
///    [`PrStep::ResolveThreads`].
/// 5. A worker of the run is alive → wait.
/// 6. No CI run for the head → trigger it (after the grace; once per head, then escalate).
/// 7. Any check not completed → wait.
/// 8. A check failed → `fix_ci` worker, or escalate past the cap; never a second one for
///    the head a fix was made for (wait for the pushed fix, or escalate if none was pushed).
/// 9. Checks cancelled or stale → trigger CI again (once per head, then escalate).
/// 10. A check needs approval (`action_required`) → escalate.
/// 11. A required check missing → trigger CI (once per head, then escalate); one that
///     completed without running → escalate.
/// 12. Threads needing work → `fix_comments` worker with exactly those, unless that set was
///     already sent (then wait).
/// 13. No review of this head → `pr_review` worker; a verdict kept but not posted →
///     [`PrStep::PostReview`]; review passed → [`PrStep::Complete`]; review failed with
///     nothing left to fix → escalate.
pub fn next_pr_step(obs: &PrObservation, memory: &PrMemory, config: &PrConfig) -> PrStep {
    match obs.state {
        PrState::Merged => return PrStep::Merged,
        PrState::Closed => return PrStep::Closed,
        PrState::Open => {}
    }

    if memory.stage == Stage::Complete {
        let new = new_owner_comments(obs, memory);
        // The table moves only a *draft* back: a PR the owner marked ready is theirs.
        if obs.draft && !new.is_empty() {
            return PrStep::BackToPr { comment_ids: new };
        }
        if let Some(auto) = &config.auto_merge {
            if let Some(step) = auto_merge_step(obs, memory, config, auto) {
                return step;
            }
        }
        return PrStep::Wait {
            reason: WaitReason::AwaitingOwner,
        };
    }

    if obs.draft {
        let missing = missing_labels(obs, config);
        if !missing.is_empty() {
            return PrStep::AddLabels { labels: missing };
        }
    }

    if config.resolve_acknowledged {
        let acknowledged: Vec<String> = obs
            .threads
            .iter()
            .filter(|t| !t.is_resolved && is_acknowledged(t))
            .map(|t| t.id.clone())
            .collect();
        if !acknowledged.is_empty() {
            return PrStep::ResolveThreads {
                thread_ids: acknowledged,
            };
        }
    }

    if obs.worker_running {
        return PrStep::Wait {
            reason: WaitReason::WorkerRunning,
        };
    }

    if let Some(step) = ci_step(obs, memory, config) {
        return step;
    }

    let threads = threads_needing_work(obs);
    let fingerprint = fingerprint(&threads, config);
    let already_sent = !threads.is_empty()
        && memory
            .sent_threads
            .as_ref()
            .is_some_and(|sent| fingerprint.already_in(sent));
    let mut to_send: Vec<ReviewThread> = Vec::new();
    if !already_sent {
        to_send.extend(threads.iter().map(|t| to_review_thread(t)));
    }
    to_send.extend(memory.owner_asks.iter().map(owner_ask_thread));
    if !to_send.is_empty() {
        return PrStep::SpawnFixComments {
            threads: to_send,
            fingerprint: if already_sent || threads.is_empty() {
                memory.sent_threads.clone().unwrap_or(fingerprint)
            } else {
                fingerprint
            },
        };
    }
    if already_sent {
        return PrStep::Wait {
            reason: WaitReason::ThreadsAlreadySent {
                thread_ids: threads.iter().map(|t| t.id.clone()).collect(),
            },
        };
    }

    match memory
        .review
        .as_ref()
        .filter(|r| r.head_sha == obs.head_sha)
    {
        None => PrStep::SpawnReview {
            inputs: ReviewInputs {
                rules_files: config.review_rules_files.clone(),
                required_checks: required_statuses(obs, config),
            },
        },
        Some(review) if !review.posted => PrStep::PostReview {
            head_sha: review.head_sha.clone(),
            body: review.body.clone(),
        },
        Some(review) if review.passed => PrStep::Complete {
            mergeable: obs.mergeability(),
        },
        Some(_) => escalate_once(
            obs,
            memory,
            EscalationKind::ReviewNotPassed,
            "the review of this head did not pass and left no thread to fix".to_string(),
        ),
    }
}

/// Auto-merge's step on a complete run's PR, if it has one ([`crate::merge::gate`]).
fn auto_merge_step(
    obs: &PrObservation,
    memory: &PrMemory,
    config: &PrConfig,
    auto: &AutoMerge,
) -> Option<PrStep> {
    let look = crate::merge::Look {
        head_sha: &obs.head_sha,
        draft: obs.draft,
        mergeable: obs.mergeable,
        ci_green: ci_step(obs, memory, config).is_none(),
        reviewed_head: memory
            .review
            .as_ref()
            .filter(|r| r.passed)
            .map(|r| r.head_sha.as_str()),
        author: obs.author.as_deref(),
        verdicts: &obs.verdicts,
        executor_logins: &config.executor_logins,
    };
    match crate::merge::gate(&look, memory.merge.as_ref(), auto) {
        crate::merge::Gate::Merge => Some(PrStep::Merge {
            head_sha: obs.head_sha.clone(),
            method: auto.method,
            delete_branch: auto.delete_branch,
        }),
        crate::merge::Gate::Hold(reasons)
            if memory.merge_told
                != Some(merge_told_key(&obs.head_sha, refused_on(obs, memory))) =>
        {
            Some(PrStep::MergeHeld {
                head_sha: obs.head_sha.clone(),
                refused: refused_on(obs, memory),
                reasons,
            })
        }
        crate::merge::Gate::Hold(_) | crate::merge::Gate::Wait => None,
    }
}

/// The forge refused the merge executor sent for the look's head.
fn refused_on(obs: &PrObservation, memory: &PrMemory) -> bool {
    memory
        .merge
        .as_ref()
        .is_some_and(|m| m.head_sha == obs.head_sha && m.refused.is_some())
}

/// What the owner was told of auto-merge on a head: that it holds (the head), or, once
/// the forge refused the merge, that too (`refused:` and the head): each once.
fn merge_told_key(head_sha: &str, refused: bool) -> String {
    if refused {
        format!("refused:{head_sha}")
    } else {
        head_sha.to_string()
    }
}

/// The memory after `step` (chosen for `obs`) was carried out.
pub fn remember(memory: &PrMemory, step: &PrStep, obs: &PrObservation) -> PrMemory {
    let mut next = memory.clone();
    match step {
        PrStep::Merged | PrStep::Complete { .. } => {
            // The completion's effects are owed from the moment it is decided; a run that
            // was complete already (merged later) owes nothing more.
            if memory.stage == Stage::Pr {
                let merged = matches!(step, PrStep::Merged);
                next.completion = Some(Completion {
                    head_sha: obs.head_sha.clone(),
                    comment: !merged,
                    record: true,
                    merged,
                });
            }
            next.stage = Stage::Complete;
            next.merged |= matches!(step, PrStep::Merged);
            next.last_owner_comment = newest_owner_comment(obs, memory);
        }
        PrStep::PostReview { .. } => next = next.review_posted(),
        PrStep::BackToPr { comment_ids } => {
            next.stage = Stage::Pr;
            next.last_owner_comment = newest_owner_comment(obs, memory);
            next.owner_asks.extend(
                obs.owner_comments
                    .iter()
                    .filter(|c| c.on_conversation && comment_ids.contains(&c.id))
                    .cloned(),
            );
        }
        PrStep::TriggerCi { head_sha, .. } => {
            next.ci_triggered = Some(CiTriggered {
                head_sha: head_sha.clone(),
                at: obs.observed_at,
            });
        }
        PrStep::SpawnFixCi { .. } => {
            next.ci_attempts += 1;
            next.ci_fix = Some(CiFix {
                head_sha: obs.head_sha.clone(),
                pushed: None,
            });
        }
        PrStep::SpawnFixComments { fingerprint, .. } => {
            next.sent_threads = Some(fingerprint.clone());
            next.owner_asks.clear();
        }
        PrStep::Escalate { kind, .. } => {
            next.escalated = Some(Escalated {
                head_sha: obs.head_sha.clone(),
                kind: *kind,
            });
        }
        PrStep::Merge { head_sha, .. } => {
            if next.merge.as_ref().map(|m| &m.head_sha) != Some(head_sha) {
                next.merge = Some(MergeAttempt {
                    head_sha: head_sha.clone(),
                    done: false,
                    refused: None,
                });
            }
        }
        PrStep::MergeHeld {
            head_sha, refused, ..
        } => next.merge_told = Some(merge_told_key(head_sha, *refused)),
        PrStep::Closed
        | PrStep::AddLabels { .. }
        | PrStep::ResolveThreads { .. }
        | PrStep::Wait { .. }
        | PrStep::SpawnReview { .. } => {}
    }
    next
}

/// The fingerprint of a thread set (see the module notes on what it covers).
pub fn fingerprint(threads: &[&ObservedThread], config: &PrConfig) -> ThreadFingerprint {
    let mut entries: Vec<String> = threads
        .iter()
        .map(|thread| {
            let last_foreign = thread
                .comments
                .iter()
                .rev()
                .find(|c| !is_executor(&c.author, config) && !c.body.contains(EXECUTOR_MARK))
                .map_or("", |c| c.id.as_str());
            format!("{}@{}", thread.id, last_foreign)
        })
        .collect();
    entries.sort();
    entries.dedup();
    ThreadFingerprint(entries.join(","))
}

/// Unresolved threads whose last comment is not an acknowledgement, in forge order.
pub fn threads_needing_work(obs: &PrObservation) -> Vec<&ObservedThread> {
    obs.threads
        .iter()
        .filter(|t| !t.is_resolved && !t.comments.is_empty() && !is_acknowledged(t))
        .collect()
}

// ---------------------------------------------------------------------------------------
// CI
// ---------------------------------------------------------------------------------------

/// Rows 6 to 11: a step when CI is not green, `None` when it is.
fn ci_step(obs: &PrObservation, memory: &PrMemory, config: &PrConfig) -> Option<PrStep> {
    if !obs.ci_run_exists && obs.checks.is_empty() {
        return Some(start_ci(obs, memory, config, TriggerReason::NoRun));
    }

    // A completed check without a conclusion is a read between the two fields being set.
    let running: Vec<String> = obs
        .checks
        .iter()
        .filter(|c| c.status != CheckRunStatus::Completed || c.conclusion.is_none())
        .map(|c| c.name.clone())
        .collect();
    if !running.is_empty() || obs.checks.is_empty() {
        return Some(PrStep::Wait {
            reason: WaitReason::CiRunning { checks: running },
        });
    }

    let with = |wanted: &[CheckConclusion]| -> Vec<&CheckRun> {
        obs.checks
            .iter()
            .filter(|c| c.conclusion.is_some_and(|x| wanted.contains(&x)))
            .collect()
    };
    let names = |checks: &[&CheckRun]| checks.iter().map(|c| c.name.clone()).collect::<Vec<_>>();

    let failed = with(&[
        CheckConclusion::Failure,
        CheckConclusion::TimedOut,
        CheckConclusion::Unknown,
    ]);
    if !failed.is_empty() {
        // One `fix_ci` worker per failed head: a look that still shows the head a fix was
        // made for (GitHub not caught up, or a cached answer) starts no second one.
        if let Some(fix) = memory
            .ci_fix
            .as_ref()
            .filter(|f| f.head_sha == obs.head_sha)
        {
            return Some(match &fix.pushed {
                Some(pushed) if *pushed != obs.head_sha => PrStep::Wait {
                    reason: WaitReason::CiFixPushed {
                        pushed: pushed.clone(),
                    },
                },
                _ => escalate_once(
                    obs,
                    memory,
                    EscalationKind::CiFixPushedNothing,
                    format!(
                        "a fix_ci worker was run for head {} and pushed no fix; CI still fails ({})",
                        obs.head_sha,
                        names(&failed).join(", ")
                    ),
                ),
            });
        }
        let max = memory.max_ci_attempts.unwrap_or(config.max_ci_attempts);
        if memory.ci_attempts >= max {
            let detail = format!(
                "CI still fails ({}) after {} fix_ci workers",
                names(&failed).join(", "),
                memory.ci_attempts
            );
            return Some(escalate_once(
                obs,
                memory,
                EscalationKind::CiAttemptsExhausted,
                detail,
            ));
        }
        return Some(PrStep::SpawnFixCi {
            attempt: memory.ci_attempts + 1,
            max_attempts: max,
            failure: ci_failure(&failed),
        });
    }

    let cancelled = with(&[CheckConclusion::Cancelled, CheckConclusion::Stale]);
    if !cancelled.is_empty() {
        let reason = TriggerReason::Rerun {
            checks: names(&cancelled),
        };
        return Some(start_ci(obs, memory, config, reason));
    }

    let approval = with(&[CheckConclusion::ActionRequired]);
    if !approval.is_empty() {
        let detail = format!("waiting for approval: {}", names(&approval).join(", "));
        return Some(escalate_once(
            obs,
            memory,
            EscalationKind::CiNeedsApproval,
            detail,
        ));
    }

    let missing: Vec<String> = config
        .required_checks
        .iter()
        .filter(|name| !obs.checks.iter().any(|c| &c.name == *name))
        .cloned()
        .collect();
    if !missing.is_empty() {
        let reason = TriggerReason::MissingRequired { checks: missing };
        return Some(start_ci(obs, memory, config, reason));
    }

    let not_run: Vec<String> = obs
        .checks
        .iter()
        .filter(|c| config.required_checks.contains(&c.name))
        .filter(|c| c.conclusion != Some(CheckConclusion::Success))
        .map(|c| c.name.clone())
        .collect();
    if !not_run.is_empty() {
        let detail = format!("required checks did not run: {}", not_run.join(", "));
        return Some(escalate_once(
            obs,
            memory,
            EscalationKind::RequiredCheckNotRun,
            detail,
        ));
    }
    None
}

/// Trigger CI, unless the push or the last trigger was a moment ago (wait), or it was
/// already triggered for this head (escalate: triggering again would only repeat it).
fn start_ci(
    obs: &PrObservation,
    memory: &PrMemory,
    config: &PrConfig,
    reason: TriggerReason,
) -> PrStep {
    let triggered_here = memory
        .ci_triggered
        .as_ref()
        .filter(|t| t.head_sha == obs.head_sha);
    let since = obs.head_pushed_at.max(triggered_here.map(|t| t.at));
    if since.is_some_and(|at| obs.observed_at - at < config.ci_start_grace) {
        return PrStep::Wait {
            reason: WaitReason::CiStarting,
        };
    }
    if triggered_here.is_none() {
        return PrStep::TriggerCi {
            head_sha: obs.head_sha.clone(),
            reason,
        };
    }
    let (kind, detail) = match reason {
        TriggerReason::NoRun => (
            EscalationKind::CiDidNotStart,
            "CI was triggered for this head and no run appeared".to_string(),
        ),
        TriggerReason::MissingRequired { checks } => (
            EscalationKind::RequiredCheckMissing,
            format!(
                "CI was triggered and these required checks never reported: {}",
                checks.join(", ")
            ),
        ),
        TriggerReason::Rerun { checks } => (
            EscalationKind::CiCancelled,
            format!("re-run and cancelled again: {}", checks.join(", ")),
        ),
    };
    escalate_once(obs, memory, kind, detail)
}

fn ci_failure(failed: &[&CheckRun]) -> CiFailure {
    let steps: Vec<(&str, &str)> = failed
        .iter()
        .filter_map(|c| c.failing_step.as_deref().map(|s| (c.name.as_str(), s)))
        .collect();
    // A report and the job it reports on name the same step: said once.
    let all_same = steps.windows(2).all(|pair| pair[0].1 == pair[1].1);
    let failing_step = match steps.as_slice() {
        [] => None,
        [(_, step), ..] if all_same => Some((*step).to_string()),
        many => Some(
            many.iter()
                .map(|(name, step)| format!("{name}: {step}"))
                .collect::<Vec<_>>()
                .join("; "),
        ),
    };
    // A Checks-API report and the Actions job it reports on point at the same log: the
    // excerpt is given once.
    let mut excerpts: Vec<(&str, &str)> = Vec::new();
    for check in failed {
        if let Some(text) = check.log_excerpt.as_deref() {
            if !excerpts.iter().any(|(_, seen)| *seen == text) {
                excerpts.push((check.name.as_str(), text));
            }
        }
    }
    let log_excerpt = match excerpts.as_slice() {
        [] => String::new(),
        [(_, text)] => (*text).to_string(),
        many => many
            .iter()
            .map(|(name, text)| format!("--- {name} ---\n{text}"))
            .collect::<Vec<_>>()
            .join("\n"),
    };
    CiFailure {
        checks: failed
            .iter()
            .map(|c| FailedCheck {
                name: c.name.clone(),
                summary: c.summary.clone(),
                url: c.url.clone(),
            })
            .collect(),
        failing_step,
        log_excerpt,
        run_url: failed
            .iter()
            .find_map(|c| c.run_url.clone().or_else(|| c.url.clone())),
    }
}

fn required_statuses(obs: &PrObservation, config: &PrConfig) -> Vec<CheckStatus> {
    config
        .required_checks
        .iter()
        .map(|name| CheckStatus {
            name: name.clone(),
            conclusion: obs
                .checks
                .iter()
                .find(|c| &c.name == name)
                .and_then(|c| c.conclusion)
                .map_or("pending", CheckConclusion::as_str)
                .to_string(),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Small judgements
// ---------------------------------------------------------------------------------------

fn escalate_once(
    obs: &PrObservation,
    memory: &PrMemory,
    kind: EscalationKind,
    detail: String,
) -> PrStep {
    let already = memory
        .escalated
        .as_ref()
        .is_some_and(|e| e.head_sha == obs.head_sha && e.kind == kind);
    if already {
        PrStep::Wait {
            reason: WaitReason::Escalated { kind },
        }
    } else {
        PrStep::Escalate { kind, detail }
    }
}

fn missing_labels(obs: &PrObservation, config: &PrConfig) -> Vec<String> {
    config
        .required_labels
        .iter()
        .filter(|wanted| !obs.labels.iter().any(|l| l.eq_ignore_ascii_case(wanted)))
        .cloned()
        .collect()
}

fn is_acknowledged(thread: &ObservedThread) -> bool {
    thread.comments.last().is_some_and(|c| {
        let first_line = c.body.lines().next().unwrap_or("");
        matches!(parse_line(first_line), Ok(Some(Parsed::Acknowledged(_))))
    })
}

/// GitHub shows an App's login as `name[bot]` over REST and `name` over GraphQL.
fn is_executor(author: &str, config: &PrConfig) -> bool {
    let bare = |login: &str| login.strip_suffix("[bot]").unwrap_or(login).to_string();
    let author = bare(author);
    config
        .executor_logins
        .iter()
        .any(|login| bare(login).eq_ignore_ascii_case(&author))
}

fn comment_key(c: &OwnerComment) -> (DateTime<Utc>, u64) {
    (c.created_at, c.id)
}

/// Owner comments newer than the last one seen, oldest first. Ordered by the forge's own
/// time and id, never by the local clock.
fn new_owner_comments(obs: &PrObservation, memory: &PrMemory) -> Vec<u64> {
    let seen = memory.last_owner_comment.as_ref().map(comment_key);
    let mut new: Vec<&OwnerComment> = obs
        .owner_comments
        .iter()
        .filter(|c| seen.is_none_or(|seen| comment_key(c) > seen))
        .collect();
    new.sort_by_key(|c| comment_key(c));
    new.into_iter().map(|c| c.id).collect()
}

fn newest_owner_comment(obs: &PrObservation, memory: &PrMemory) -> Option<OwnerComment> {
    obs.owner_comments
        .iter()
        .chain(memory.last_owner_comment.as_ref())
        .max_by_key(|c| comment_key(c))
        .cloned()
}

/// The hidden mark executor puts in every comment it writes on a forge
/// (`<!-- executor:kind -->`), so its own replies are known whatever login posted them.
pub const EXECUTOR_MARK: &str = "<!-- executor:";

/// The hidden mark of executor's answer `answer` to thread `thread` (a review thread, or an
/// owner's comment as `comment-<id>`) as last asked by comment `ask` ([`last_ask`]): the
/// answer's post carries it, so a retry after a lost answer finds it there and posts
/// nothing, while the same text to a later ask is marked anew.
pub fn answer_marker(thread: &str, ask: &str, answer: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{thread}\n{ask}\n{answer}").as_bytes());
    let short: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{EXECUTOR_MARK}answer:{short} -->")
}

/// The id of a thread's newest comment that is not executor's (`comments`, oldest first,
/// as `(id, body)`): the ask an answer answers.
pub fn last_ask<'a, Id: ToString>(
    comments: impl DoubleEndedIterator<Item = (Id, &'a str)>,
) -> Option<String> {
    comments
        .rev()
        .find(|(_, body)| !body.contains(EXECUTOR_MARK))
        .map(|(id, _)| id.to_string())
}

/// The prefix of the id under which an owner's conversation comment is sent to a
/// `fix_comments` worker as a thread of its own (`comment-<id>`).
pub const OWNER_ASK_PREFIX: &str = "comment-";

/// An owner's conversation comment as a `fix_comments` thread: no path, no line.
fn owner_ask_thread(comment: &OwnerComment) -> ReviewThread {
    ReviewThread {
        id: format!("{OWNER_ASK_PREFIX}{}", comment.id),
        path: String::new(),
        line: None,
        comments: vec![ReviewComment {
            author: "the owner".into(),
            body: comment.body.clone(),
        }],
    }
}

fn to_review_thread(thread: &ObservedThread) -> ReviewThread {
    ReviewThread {
        id: thread.id.clone(),
        path: thread.path.clone(),
        line: if thread.is_outdated {
            None
        } else {
            thread.line
        },
        comments: thread
            .comments
            .iter()
            .map(|c| ReviewComment {
                author: c.author.clone(),
                body: c.body.clone(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    //! Observations are built from the shapes of `shared/fixtures/http/github/`: PR #1234 of
    //! `mkowalski/lumen-browser`, first head `4be1f0c…`, fix head `9d41c2e…`, the check runs
    //! `build`, `ui-tests` and the Checks-API report, the three GraphQL review threads.

    use super::*;
    use chrono::TimeZone;

    const HEAD: &str = "4be1f0c7d93a2e58b6f1c40a7d2e9b3f58c61a07";
    const FIX_HEAD: &str = "9d41c2e8a7f36b05c1d9e2a4f8b7c6d5e3a2b1f0";
    const REPORT: &str = "Xcode test report (macOS UI Tests CI)";
    const JOB_URL: &str =
        "https://github.com/mkowalski/lumen-browser/actions/runs/34712098321/job/103651827391";
    const RUN_URL: &str = "https://github.com/mkowalski/lumen-browser/actions/runs/34712098321";
    const EXCERPT: &str = "LumenUITests/TabPreviewUITests.swift:58: XCTAssertFalse failed\n\
                           ** TEST FAILED **\n##[error]Process completed with exit code 65.";

    fn at(hour: u32, minute: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 16, hour, minute, 0)
            .single()
            .expect("a valid time")
    }

    fn config() -> PrConfig {
        PrConfig {
            required_checks: vec![REPORT.into()],
            required_labels: vec!["executor".into(), "ai-generated".into()],
            max_ci_attempts: 3,
            resolve_acknowledged: false,
            executor_logins: vec!["lumen-executor[bot]".into()],
            review_rules_files: vec!["AGENTS.md".into()],
            ci_start_grace: Duration::minutes(5),
            auto_merge: None,
        }
    }

    fn check(name: &str, status: CheckRunStatus, conclusion: Option<CheckConclusion>) -> CheckRun {
        CheckRun {
            name: name.into(),
            status,
            conclusion,
            url: Some(JOB_URL.into()),
            run_url: None,
            summary: None,
            failing_step: None,
            log_excerpt: None,
        }
    }

    fn done(name: &str, conclusion: CheckConclusion) -> CheckRun {
        check(name, CheckRunStatus::Completed, Some(conclusion))
    }

    /// `check_runs_success.json`.
    fn green_checks() -> Vec<CheckRun> {
        vec![
            done(REPORT, CheckConclusion::Success),
            done("ui-tests", CheckConclusion::Success),
            done("build", CheckConclusion::Success),
        ]
    }

    /// `check_runs_in_progress.json`.
    fn running_checks() -> Vec<CheckRun> {
        vec![
            check("build", CheckRunStatus::InProgress, None),
            check("ui-tests", CheckRunStatus::Queued, None),
        ]
    }

    /// `check_runs_failed.json`, with the job step and log the caller fetched from
    /// `actions_run_jobs.json` and the job's log (the report points at the same job).
    fn failed_checks() -> Vec<CheckRun> {
        let failed = |name: &str, summary: Option<&str>| CheckRun {
            summary: summary.map(String::from),
            url: Some(format!("https://ci.example/{name}")),
            failing_step: Some("Run macOS UI Tests CI".into()),
            log_excerpt: Some(EXCERPT.into()),
            run_url: Some(RUN_URL.into()),
            ..done(name, CheckConclusion::Failure)
        };
        vec![
            failed(REPORT, Some("macOS UI Tests CI: 1 failed, 47 passed")),
            failed("ui-tests", None),
            done("build", CheckConclusion::Success),
        ]
    }

    fn comment(id: &str, author: &str, body: &str, minute: u32) -> ObservedComment {
        ObservedComment {
            id: id.into(),
            author: author.into(),
            body: body.into(),
            created_at: at(10, minute),
        }
    }

    fn thread(id: &str, line: u32, comments: Vec<ObservedComment>) -> ObservedThread {
        ObservedThread {
            id: id.into(),
            path: "Lumen/TabBar/TabBarView.swift".into(),
            line: Some(line),
            is_resolved: false,
            is_outdated: false,
            comments,
        }
    }

    /// Thread 1 of `graphql_review_threads.json`: resolved and outdated.
    fn resolved_thread() -> ObservedThread {
        ObservedThread {
            path: "Lumen/TabBar/TabPreviewController.swift".into(),
            line: None,
            is_resolved: true,
            is_outdated: true,
            ..thread(
                "PRRT_kwDOMGtpR85h4h4u",
                0,
                vec![
                    comment(
                        "PRRC_kwDOMGtpR86u7VfW",
                        "mkowalski",
                        "guard on `isPresented`.",
                        0,
                    ),
                    comment(
                        "PRRC_kwDOMGtpR86u7m8J",
                        "lumen-executor",
                        "Fixed in 9d41c2e.",
                        9,
                    ),
                ],
            )
        }
    }

    /// Thread 2: unresolved, last comment `[ACKNOWLEDGED: out of scope]`.
    fn acknowledged_thread() -> ObservedThread {
        thread(
            "PRRT_kwDOMGtpR85h4iBh",
            142,
            vec![
                comment(
                    "PRRC_kwDOMGtpR86u7cHx",
                    "mkowalski",
                    "Fix the pinned tabs too?",
                    2,
                ),
                comment(
                    "PRRC_kwDOMGtpR86u7w1m",
                    "lumen-executor",
                    "[ACKNOWLEDGED: out of scope] A separate bug; filed as its own task.",
                    14,
                ),
            ],
        )
    }

    /// Thread 3: unresolved, needs work.
    fn open_thread() -> ObservedThread {
        thread(
            "PRRT_kwDOMGtpR85h4iMD",
            88,
            vec![comment(
                "PRRC_kwDOMGtpR86u7982",
                "mkowalski",
                "The `NSTrackingArea` is never removed.",
                21,
            )],
        )
    }

    fn fixture_threads() -> Vec<ObservedThread> {
        vec![resolved_thread(), acknowledged_thread(), open_thread()]
    }

    /// `pulls_get_open_draft.json` on the fix head, CI green, labels present, no threads.
    fn open_draft() -> PrObservation {
        PrObservation {
            observed_at: at(10, 30),
            state: PrState::Open,
            draft: true,
            mergeable: Some(true),
            head_sha: FIX_HEAD.into(),
            head_pushed_at: Some(at(9, 50)),
            ci_run_exists: true,
            checks: green_checks(),
            labels: vec!["executor".into(), "ai-generated".into()],
            threads: Vec::new(),
            owner_comments: Vec::new(),
            worker_running: false,
            author: Some("lumen-executor".into()),
            verdicts: Vec::new(),
        }
    }

    fn reviewed(head: &str) -> PrMemory {
        PrMemory::default()
            .record_review(head, true, "")
            .review_posted()
    }

    fn owner_comment(id: u64, hour: u32, minute: u32) -> OwnerComment {
        OwnerComment {
            id,
            created_at: at(hour, minute),
            on_conversation: true,
            body: format!("Owner comment {id}: one more look, please."),
        }
    }

    fn step(obs: &PrObservation, memory: &PrMemory) -> PrStep {
        next_pr_step(obs, memory, &config())
    }

    fn sent_thread_ids(step: &PrStep) -> Vec<&str> {
        match step {
            PrStep::SpawnFixComments { threads, .. } => {
                threads.iter().map(|t| t.id.as_str()).collect()
            }
            other => panic!("expected fix_comments, got {other:?}"),
        }
    }

    // --- the rows of the table -------------------------------------------------------

    #[test]
    fn ci_still_running_does_nothing() {
        let obs = PrObservation {
            checks: running_checks(),
            ..open_draft()
        };
        assert_eq!(
            step(&obs, &PrMemory::default()),
            PrStep::Wait {
                reason: WaitReason::CiRunning {
                    checks: vec!["build".into(), "ui-tests".into()]
                }
            }
        );
    }

    #[test]
    fn a_ci_run_without_check_runs_yet_is_running() {
        let obs = PrObservation {
            checks: Vec::new(),
            ..open_draft()
        };
        assert_eq!(
            step(&obs, &PrMemory::default()),
            PrStep::Wait {
                reason: WaitReason::CiRunning { checks: Vec::new() }
            }
        );
    }

    #[test]
    fn ci_failed_spawns_fix_ci_with_checks_step_excerpt_and_run_url() {
        let obs = PrObservation {
            head_sha: HEAD.into(),
            checks: failed_checks(),
            ..open_draft()
        };
        let memory = PrMemory::default();
        let got = step(&obs, &memory);
        let PrStep::SpawnFixCi {
            attempt,
            max_attempts,
            failure,
        } = &got
        else {
            panic!("expected fix_ci, got {got:?}");
        };
        assert_eq!((*attempt, *max_attempts), (1, 3));
        assert_eq!(
            failure.checks,
            vec![
                FailedCheck {
                    name: REPORT.into(),
                    summary: Some("macOS UI Tests CI: 1 failed, 47 passed".into()),
                    url: Some(format!("https://ci.example/{REPORT}")),
                },
                FailedCheck {
                    name: "ui-tests".into(),
                    summary: None,
                    url: Some("https://ci.example/ui-tests".into()),
                },
            ]
        );
        assert_eq!(
            failure.failing_step.as_deref(),
            Some("Run macOS UI Tests CI"),
            "the report and its job name the same step: said once"
        );
        assert_eq!(
            failure.log_excerpt, EXCERPT,
            "the shared job log is given once"
        );
        assert_eq!(failure.run_url.as_deref(), Some(RUN_URL));
        assert_eq!(remember(&memory, &got, &obs).ci_attempts, 1);
    }

    #[test]
    fn ci_failed_past_the_cap_escalates_once_per_head() {
        let obs = PrObservation {
            head_sha: HEAD.into(),
            checks: failed_checks(),
            ..open_draft()
        };
        let memory = PrMemory {
            ci_attempts: 3,
            ..PrMemory::default()
        };
        let got = step(&obs, &memory);
        assert!(
            matches!(
                &got,
                PrStep::Escalate { kind: EscalationKind::CiAttemptsExhausted, detail }
                    if detail.contains("ui-tests") && detail.contains("after 3")
            ),
            "{got:?}"
        );
        let memory = remember(&memory, &got, &obs);
        assert_eq!(
            step(&obs, &memory),
            PrStep::Wait {
                reason: WaitReason::Escalated {
                    kind: EscalationKind::CiAttemptsExhausted
                }
            },
            "the owner is asked once, not on every tick"
        );
        let other_head = PrObservation {
            head_sha: "0000000000000000000000000000000000000000".into(),
            ..obs
        };
        assert!(matches!(
            step(&other_head, &memory),
            PrStep::Escalate { .. }
        ));
    }

    #[test]
    fn a_cap_raised_for_the_run_lets_it_go_on() {
        let obs = PrObservation {
            checks: failed_checks(),
            ..open_draft()
        };
        let memory = PrMemory {
            ci_attempts: 3,
            max_ci_attempts: Some(5),
            ..PrMemory::default()
        };
        assert!(matches!(
            step(&obs, &memory),
            PrStep::SpawnFixCi {
                attempt: 4,
                max_attempts: 5,
                ..
            }
        ));
    }

    #[test]
    fn unacknowledged_threads_spawn_fix_comments_with_exactly_those() {
        let obs = PrObservation {
            threads: fixture_threads(),
            ..open_draft()
        };
        let got = step(&obs, &PrMemory::default());
        assert_eq!(sent_thread_ids(&got), ["PRRT_kwDOMGtpR85h4iMD"]);
        let PrStep::SpawnFixComments {
            threads,
            fingerprint,
        } = &got
        else {
            unreachable!()
        };
        assert_eq!(
            threads[0],
            ReviewThread {
                id: "PRRT_kwDOMGtpR85h4iMD".into(),
                path: "Lumen/TabBar/TabBarView.swift".into(),
                line: Some(88),
                comments: vec![ReviewComment {
                    author: "mkowalski".into(),
                    body: "The `NSTrackingArea` is never removed.".into(),
                }],
            }
        );
        assert_eq!(fingerprint.0, "PRRT_kwDOMGtpR85h4iMD@PRRC_kwDOMGtpR86u7982");
    }

    #[test]
    fn acknowledged_threads_are_not_sent_but_a_malformed_marker_is() {
        let obs = PrObservation {
            threads: vec![resolved_thread(), acknowledged_thread()],
            ..open_draft()
        };
        assert!(matches!(
            step(&obs, &PrMemory::default()),
            PrStep::SpawnReview { .. }
        ));

        let mut broken = acknowledged_thread();
        broken.comments[1].body = "[ACKNOWLEDGED: out of scope, no closing bracket".into();
        let obs = PrObservation {
            threads: vec![broken],
            ..open_draft()
        };
        assert_eq!(
            sent_thread_ids(&step(&obs, &PrMemory::default())),
            ["PRRT_kwDOMGtpR85h4iBh"]
        );
    }

    #[test]
    fn outdated_unresolved_threads_are_sent_without_a_line() {
        let mut outdated = open_thread();
        outdated.is_outdated = true;
        let obs = PrObservation {
            threads: vec![outdated],
            ..open_draft()
        };
        let PrStep::SpawnFixComments { threads, .. } = step(&obs, &PrMemory::default()) else {
            panic!("outdated threads are sent");
        };
        assert_eq!(threads[0].line, None);
    }

    #[test]
    fn the_same_thread_set_is_not_sent_twice() {
        let obs = PrObservation {
            threads: fixture_threads(),
            ..open_draft()
        };
        let first = step(&obs, &PrMemory::default());
        let memory = remember(&PrMemory::default(), &first, &obs);
        assert_eq!(
            step(&obs, &memory),
            PrStep::Wait {
                reason: WaitReason::ThreadsAlreadySent {
                    thread_ids: vec!["PRRT_kwDOMGtpR85h4iMD".into()]
                }
            }
        );
    }

    #[test]
    fn a_reviewer_reply_changes_the_fingerprint_and_the_thread_is_sent_again() {
        let mut obs = PrObservation {
            threads: fixture_threads(),
            ..open_draft()
        };
        let first = step(&obs, &PrMemory::default());
        let memory = remember(&PrMemory::default(), &first, &obs);
        obs.threads[2].comments.push(comment(
            "PRRC_reply",
            "mkowalski",
            "Also on the tab strip.",
            40,
        ));
        let second = step(&obs, &memory);
        assert_eq!(sent_thread_ids(&second), ["PRRT_kwDOMGtpR85h4iMD"]);
        assert_ne!(
            Some(&first),
            Some(&second),
            "the new reply is in the fingerprint and the thread"
        );
    }

    #[test]
    fn the_executors_own_reply_does_not_send_the_thread_again() {
        let mut obs = PrObservation {
            threads: fixture_threads(),
            ..open_draft()
        };
        let first = step(&obs, &PrMemory::default());
        let memory = remember(&PrMemory::default(), &first, &obs);
        // REST shows the App as `lumen-executor[bot]`, GraphQL as `lumen-executor`.
        obs.threads[2].comments.push(comment(
            "PRRC_fixed",
            "lumen-executor",
            "Fixed in 9d41c2e.",
            45,
        ));
        assert!(matches!(
            step(&obs, &memory),
            PrStep::Wait {
                reason: WaitReason::ThreadsAlreadySent { .. }
            }
        ));
    }

    #[test]
    fn a_thread_acknowledged_since_does_not_send_the_rest_again() {
        let mut other = open_thread();
        other.id = "PRRT_other".into();
        other.comments[0].id = "PRRC_other".into();
        let mut obs = PrObservation {
            threads: vec![open_thread(), other],
            ..open_draft()
        };
        let first = step(&obs, &PrMemory::default());
        assert_eq!(sent_thread_ids(&first).len(), 2);
        let memory = remember(&PrMemory::default(), &first, &obs);
        obs.threads[1].comments.push(comment(
            "PRRC_ack",
            "lumen-executor",
            "[ACKNOWLEDGED: won't fix]",
            50,
        ));
        assert!(matches!(
            step(&obs, &memory),
            PrStep::Wait {
                reason: WaitReason::ThreadsAlreadySent { .. }
            }
        ));
    }

    #[test]
    fn a_new_thread_sends_the_whole_open_set() {
        let mut obs = PrObservation {
            threads: vec![open_thread()],
            ..open_draft()
        };
        let first = step(&obs, &PrMemory::default());
        let memory = remember(&PrMemory::default(), &first, &obs);
        let mut new = open_thread();
        new.id = "PRRT_new".into();
        new.comments[0].id = "PRRC_new".into();
        obs.threads.push(new);
        assert_eq!(
            sent_thread_ids(&step(&obs, &memory)),
            ["PRRT_kwDOMGtpR85h4iMD", "PRRT_new"]
        );
    }

    #[test]
    fn the_fingerprint_does_not_depend_on_thread_order() {
        let threads = fixture_threads();
        let forward: Vec<&ObservedThread> = threads.iter().collect();
        let backward: Vec<&ObservedThread> = threads.iter().rev().collect();
        assert_eq!(
            fingerprint(&forward, &config()),
            fingerprint(&backward, &config())
        );
    }

    #[test]
    fn required_labels_missing_on_a_draft_are_added() {
        let obs = PrObservation {
            labels: vec!["Executor".into()],
            ..open_draft()
        };
        assert_eq!(
            step(&obs, &PrMemory::default()),
            PrStep::AddLabels {
                labels: vec!["ai-generated".into()]
            }
        );
        let ready = PrObservation {
            draft: false,
            ..obs
        };
        assert!(
            matches!(
                step(&ready, &PrMemory::default()),
                PrStep::SpawnReview { .. }
            ),
            "labels are only added to drafts"
        );
    }

    #[test]
    fn no_ci_run_for_the_head_triggers_it() {
        let obs = PrObservation {
            ci_run_exists: false,
            checks: Vec::new(),
            ..open_draft()
        };
        let got = step(&obs, &PrMemory::default());
        assert_eq!(
            got,
            PrStep::TriggerCi {
                head_sha: FIX_HEAD.into(),
                reason: TriggerReason::NoRun
            }
        );
        let memory = remember(&PrMemory::default(), &got, &obs);
        assert_eq!(
            memory.ci_triggered,
            Some(CiTriggered {
                head_sha: FIX_HEAD.into(),
                at: at(10, 30)
            })
        );

        let soon = PrObservation {
            observed_at: at(10, 32),
            ..obs.clone()
        };
        assert_eq!(
            step(&soon, &memory),
            PrStep::Wait {
                reason: WaitReason::CiStarting
            },
            "no second trigger while the first may still be registering"
        );
        let later = PrObservation {
            observed_at: at(10, 40),
            ..obs
        };
        assert!(matches!(
            step(&later, &memory),
            PrStep::Escalate {
                kind: EscalationKind::CiDidNotStart,
                ..
            }
        ));
    }

    #[test]
    fn ci_is_not_triggered_right_after_a_push() {
        let obs = PrObservation {
            ci_run_exists: false,
            checks: Vec::new(),
            head_pushed_at: Some(at(10, 29)),
            ..open_draft()
        };
        assert_eq!(
            step(&obs, &PrMemory::default()),
            PrStep::Wait {
                reason: WaitReason::CiStarting
            }
        );
    }

    #[test]
    fn green_and_unreviewed_spawns_a_review_with_the_required_checks() {
        assert_eq!(
            step(&open_draft(), &PrMemory::default()),
            PrStep::SpawnReview {
                inputs: ReviewInputs {
                    rules_files: vec!["AGENTS.md".into()],
                    required_checks: vec![CheckStatus {
                        name: REPORT.into(),
                        conclusion: "success".into()
                    }],
                }
            }
        );
    }

    #[test]
    fn a_missing_required_check_keeps_the_review_from_starting() {
        let obs = PrObservation {
            checks: vec![
                done("ui-tests", CheckConclusion::Success),
                done("build", CheckConclusion::Success),
            ],
            ..open_draft()
        };
        assert_eq!(
            step(&obs, &PrMemory::default()),
            PrStep::TriggerCi {
                head_sha: FIX_HEAD.into(),
                reason: TriggerReason::MissingRequired {
                    checks: vec![REPORT.into()]
                }
            }
        );
        let memory = PrMemory {
            ci_triggered: Some(CiTriggered {
                head_sha: FIX_HEAD.into(),
                at: at(10, 0),
            }),
            ..PrMemory::default()
        };
        assert!(matches!(
            step(&obs, &memory),
            PrStep::Escalate {
                kind: EscalationKind::RequiredCheckMissing,
                ..
            }
        ));
    }

    #[test]
    fn a_skipped_required_check_is_not_green() {
        let mut obs = open_draft();
        obs.checks[0] = done(REPORT, CheckConclusion::Skipped);
        assert!(matches!(
            step(&obs, &PrMemory::default()),
            PrStep::Escalate {
                kind: EscalationKind::RequiredCheckNotRun,
                ..
            }
        ));
        // A skipped check that is not required is fine.
        let mut obs = open_draft();
        obs.checks[2] = done("build", CheckConclusion::Skipped);
        assert!(matches!(
            step(&obs, &PrMemory::default()),
            PrStep::SpawnReview { .. }
        ));
    }

    #[test]
    fn review_passed_ci_green_nothing_unresolved_completes() {
        let obs = PrObservation {
            threads: vec![resolved_thread(), acknowledged_thread()],
            ..open_draft()
        };
        let got = step(&obs, &reviewed(FIX_HEAD));
        assert_eq!(
            got,
            PrStep::Complete {
                mergeable: Mergeability::Mergeable
            }
        );
        assert_eq!(got.run_event(Stage::Pr), Some(RunEvent::Completed));
        assert_eq!(
            remember(&reviewed(FIX_HEAD), &got, &obs).stage,
            Stage::Complete
        );
    }

    #[test]
    fn a_review_of_an_older_head_does_not_count() {
        assert!(matches!(
            step(&open_draft(), &reviewed(HEAD)),
            PrStep::SpawnReview { .. }
        ));
    }

    #[test]
    fn a_failed_review_with_nothing_left_to_fix_escalates() {
        let memory = PrMemory::default()
            .record_review(FIX_HEAD, false, "")
            .review_posted();
        assert!(matches!(
            step(&open_draft(), &memory),
            PrStep::Escalate {
                kind: EscalationKind::ReviewNotPassed,
                ..
            }
        ));
    }

    #[test]
    fn an_owner_comment_on_a_complete_draft_goes_back_to_pr() {
        let mut obs = PrObservation {
            owner_comments: vec![owner_comment(4061238457, 10, 5)],
            ..open_draft()
        };
        let complete = step(&obs, &reviewed(FIX_HEAD));
        let memory = remember(&reviewed(FIX_HEAD), &complete, &obs);
        assert_eq!(
            memory.last_owner_comment,
            Some(owner_comment(4061238457, 10, 5))
        );

        // The comment seen at completion is old: nothing happens.
        assert_eq!(
            step(&obs, &memory),
            PrStep::Wait {
                reason: WaitReason::AwaitingOwner
            }
        );

        obs.owner_comments.push(owner_comment(4061400000, 11, 0));
        let back = step(&obs, &memory);
        assert_eq!(
            back,
            PrStep::BackToPr {
                comment_ids: vec![4061400000]
            }
        );
        assert_eq!(
            back.run_event(Stage::Complete),
            Some(RunEvent::OwnerCommented)
        );
        let memory = remember(&memory, &back, &obs);
        assert_eq!(memory.stage, Stage::Pr);
        assert_eq!(
            memory.last_owner_comment,
            Some(owner_comment(4061400000, 11, 0))
        );

        // Back in `pr`, the owner's comment goes to a fix_comments worker, once.
        assert_eq!(memory.owner_asks, vec![owner_comment(4061400000, 11, 0)]);
        let PrStep::SpawnFixComments { threads, .. } = step(&obs, &memory) else {
            panic!("a fix_comments worker for the owner's comment");
        };
        assert_eq!(
            threads,
            vec![ReviewThread {
                id: "comment-4061400000".into(),
                path: String::new(),
                line: None,
                comments: vec![ReviewComment {
                    author: "the owner".into(),
                    body: "Owner comment 4061400000: one more look, please.".into(),
                }],
            }]
        );
        let sent = remember(&memory, &step(&obs, &memory), &obs);
        assert!(sent.owner_asks.is_empty());
        assert!(matches!(step(&obs, &sent), PrStep::Complete { .. }));
    }

    #[test]
    fn an_owner_review_comment_is_left_to_its_thread() {
        let mut comment = owner_comment(4061400000, 11, 0);
        comment.on_conversation = false;
        let obs = PrObservation {
            owner_comments: vec![comment],
            ..open_draft()
        };
        let memory = PrMemory {
            stage: Stage::Complete,
            ..reviewed(FIX_HEAD)
        };
        let back = step(&obs, &memory);
        assert!(matches!(back, PrStep::BackToPr { .. }));
        assert!(remember(&memory, &back, &obs).owner_asks.is_empty());
    }

    #[test]
    fn any_owner_comment_counts_when_none_was_there_at_completion() {
        let memory = PrMemory {
            stage: Stage::Complete,
            ..reviewed(FIX_HEAD)
        };
        let obs = PrObservation {
            owner_comments: vec![owner_comment(7, 11, 0)],
            ..open_draft()
        };
        assert_eq!(
            step(&obs, &memory),
            PrStep::BackToPr {
                comment_ids: vec![7]
            }
        );
    }

    #[test]
    fn an_owner_comment_on_a_complete_ready_pr_is_left_to_the_owner() {
        let memory = PrMemory {
            stage: Stage::Complete,
            ..reviewed(FIX_HEAD)
        };
        let obs = PrObservation {
            draft: false,
            owner_comments: vec![owner_comment(7, 11, 0)],
            ..open_draft()
        };
        assert_eq!(
            step(&obs, &memory),
            PrStep::Wait {
                reason: WaitReason::AwaitingOwner
            }
        );
    }

    #[test]
    fn merged_is_done_and_closed_is_abandoned_in_either_stage() {
        for stage in [Stage::Pr, Stage::Complete] {
            let memory = PrMemory {
                stage,
                ..PrMemory::default()
            };
            let merged = PrObservation {
                state: PrState::Merged,
                draft: false,
                checks: failed_checks(),
                ..open_draft()
            };
            assert_eq!(step(&merged, &memory), PrStep::Merged);
            let closed = PrObservation {
                state: PrState::Closed,
                worker_running: true,
                ..open_draft()
            };
            assert_eq!(step(&closed, &memory), PrStep::Closed);
            assert_eq!(PrStep::Closed.run_event(stage), Some(RunEvent::Abandoned));
        }
        assert_eq!(
            PrStep::Merged.run_event(Stage::Pr),
            Some(RunEvent::Completed)
        );
        assert_eq!(PrStep::Merged.run_event(Stage::Complete), None);
    }

    // --- priorities and the rest -----------------------------------------------------

    #[test]
    fn a_ci_failure_is_fixed_before_review_threads() {
        let obs = PrObservation {
            checks: failed_checks(),
            threads: fixture_threads(),
            ..open_draft()
        };
        assert!(matches!(
            step(&obs, &PrMemory::default()),
            PrStep::SpawnFixCi { .. }
        ));
    }

    #[test]
    fn running_ci_is_waited_for_before_review_threads() {
        let obs = PrObservation {
            checks: running_checks(),
            threads: fixture_threads(),
            ..open_draft()
        };
        assert!(matches!(
            step(&obs, &PrMemory::default()),
            PrStep::Wait {
                reason: WaitReason::CiRunning { .. }
            }
        ));
    }

    #[test]
    fn labels_come_before_ci() {
        let obs = PrObservation {
            labels: Vec::new(),
            checks: failed_checks(),
            ..open_draft()
        };
        assert!(matches!(
            step(&obs, &PrMemory::default()),
            PrStep::AddLabels { .. }
        ));
    }

    #[test]
    fn mergeable_not_computed_blocks_nothing_and_is_reported() {
        let obs = PrObservation {
            mergeable: None,
            ..open_draft()
        };
        assert!(matches!(
            step(&obs, &PrMemory::default()),
            PrStep::SpawnReview { .. }
        ));
        assert_eq!(
            step(&obs, &reviewed(FIX_HEAD)),
            PrStep::Complete {
                mergeable: Mergeability::NotComputed
            }
        );
    }

    #[test]
    fn acknowledged_threads_are_resolved_when_configured() {
        let obs = PrObservation {
            threads: fixture_threads(),
            ..open_draft()
        };
        let resolving = PrConfig {
            resolve_acknowledged: true,
            ..config()
        };
        assert_eq!(
            next_pr_step(&obs, &PrMemory::default(), &resolving),
            PrStep::ResolveThreads {
                thread_ids: vec!["PRRT_kwDOMGtpR85h4iBh".into()]
            }
        );
        assert!(matches!(
            step(&obs, &PrMemory::default()),
            PrStep::SpawnFixComments { .. }
        ));
    }

    #[test]
    fn cancelled_checks_are_run_again_once() {
        let mut obs = open_draft();
        obs.checks[1] = done("ui-tests", CheckConclusion::Cancelled);
        let got = step(&obs, &PrMemory::default());
        assert_eq!(
            got,
            PrStep::TriggerCi {
                head_sha: FIX_HEAD.into(),
                reason: TriggerReason::Rerun {
                    checks: vec!["ui-tests".into()]
                }
            }
        );
        let memory = remember(&PrMemory::default(), &got, &obs);
        let later = PrObservation {
            observed_at: at(11, 0),
            ..obs
        };
        assert!(matches!(
            step(&later, &memory),
            PrStep::Escalate {
                kind: EscalationKind::CiCancelled,
                ..
            }
        ));
    }

    #[test]
    fn a_check_waiting_for_approval_escalates() {
        let mut obs = open_draft();
        obs.checks[1] = done("ui-tests", CheckConclusion::ActionRequired);
        assert!(matches!(
            step(&obs, &PrMemory::default()),
            PrStep::Escalate {
                kind: EscalationKind::CiNeedsApproval,
                ..
            }
        ));
    }

    #[test]
    fn a_live_worker_is_waited_for() {
        let obs = PrObservation {
            worker_running: true,
            checks: failed_checks(),
            ..open_draft()
        };
        assert_eq!(
            step(&obs, &PrMemory::default()),
            PrStep::Wait {
                reason: WaitReason::WorkerRunning
            }
        );
    }

    #[test]
    fn unknown_forge_values_are_never_green() {
        let status: CheckRunStatus = serde_json::from_str("\"on_hold\"").expect("parses");
        assert_eq!(status, CheckRunStatus::Unknown);
        let conclusion: CheckConclusion =
            serde_json::from_str("\"startup_failure\"").expect("parses");
        assert_eq!(conclusion, CheckConclusion::Unknown);
        let mut obs = open_draft();
        obs.checks[2] = done("build", conclusion);
        assert!(matches!(
            step(&obs, &PrMemory::default()),
            PrStep::SpawnFixCi { .. }
        ));
    }

    #[test]
    fn memory_and_observation_round_trip_through_json() {
        let memory = PrMemory {
            stage: Stage::Complete,
            ci_attempts: 2,
            max_ci_attempts: Some(4),
            sent_threads: Some(ThreadFingerprint("PRRT_a@PRRC_b".into())),
            review: Some(ReviewRecord {
                head_sha: FIX_HEAD.into(),
                passed: true,
                posted: false,
                body: "executor's review: green".into(),
            }),
            last_owner_comment: Some(owner_comment(4061238457, 10, 5)),
            ci_triggered: Some(CiTriggered {
                head_sha: HEAD.into(),
                at: at(9, 14),
            }),
            escalated: Some(Escalated {
                head_sha: HEAD.into(),
                kind: EscalationKind::CiAttemptsExhausted,
            }),
            owner_asks: vec![owner_comment(4061400000, 11, 0)],
            answers: vec![ThreadAnswer {
                thread: "PRRT_kwDOKlNJ6M5oJxOG".into(),
                text: "Fixed on `fix/tab-preview-stuck`: reset first".into(),
            }],
            merged: true,
            merge: Some(MergeAttempt {
                head_sha: FIX_HEAD.into(),
                done: false,
                refused: Some("Head branch was modified".into()),
            }),
            merge_told: Some(HEAD.into()),
            push: Some(Push {
                branch: "fix/tab-preview-stuck".into(),
                commit: HEAD.into(),
            }),
            opening: Some(Opening {
                title: "Fix tab preview".into(),
                head: "fix/tab-preview-stuck".into(),
                base: "main".into(),
                body: "The preview sticks.".into(),
            }),
            completion: Some(Completion {
                head_sha: FIX_HEAD.into(),
                comment: true,
                record: true,
                merged: false,
            }),
            ci_fix: Some(CiFix {
                head_sha: HEAD.into(),
                pushed: Some(FIX_HEAD.into()),
            }),
            effect_failures: 2,
            effect_escalated: true,
        };
        let json = serde_json::to_string(&memory).expect("serialises");
        assert!(json.contains("\"stage\":\"complete\""), "{json}");
        assert!(json.contains("2026-03-16T09:14:00.000000Z"), "{json}");
        assert_eq!(
            serde_json::from_str::<PrMemory>(&json).expect("parses"),
            memory
        );
        assert_eq!(
            serde_json::from_str::<PrMemory>("{}").expect("an empty memory parses"),
            PrMemory::default()
        );

        let obs = PrObservation {
            threads: fixture_threads(),
            checks: failed_checks(),
            mergeable: None,
            owner_comments: vec![owner_comment(4061238457, 10, 5)],
            ..open_draft()
        };
        let json = serde_json::to_string(&obs).expect("serialises");
        assert!(json.contains("\"mergeable\":null"), "{json}");
        assert_eq!(
            serde_json::from_str::<PrObservation>(&json).expect("parses"),
            obs
        );
    }

    /// The acceptance story of issue 5, tick by tick, memory carried through `remember`.
    #[test]
    fn a_run_walks_from_draft_to_complete_and_back() {
        let mut memory = PrMemory::default();
        let tick = |obs: &PrObservation, memory: &mut PrMemory| {
            let got = step(obs, memory);
            *memory = remember(memory, &got, obs);
            got
        };

        let mut obs = PrObservation {
            head_sha: HEAD.into(),
            labels: Vec::new(),
            checks: running_checks(),
            head_pushed_at: Some(at(9, 14)),
            ..open_draft()
        };
        assert!(matches!(tick(&obs, &mut memory), PrStep::AddLabels { .. }));
        obs.labels = config().required_labels;
        assert!(matches!(tick(&obs, &mut memory), PrStep::Wait { .. }));
        obs.checks = failed_checks();
        assert!(matches!(
            tick(&obs, &mut memory),
            PrStep::SpawnFixCi { attempt: 1, .. }
        ));

        obs.head_sha = FIX_HEAD.into();
        obs.checks = green_checks();
        obs.threads = vec![open_thread()];
        assert!(matches!(
            tick(&obs, &mut memory),
            PrStep::SpawnFixComments { .. }
        ));
        obs.threads = vec![resolved_thread(), acknowledged_thread()];
        assert!(matches!(
            tick(&obs, &mut memory),
            PrStep::SpawnReview { .. }
        ));
        memory = memory.record_review(FIX_HEAD, true, "").review_posted();
        assert!(matches!(tick(&obs, &mut memory), PrStep::Complete { .. }));
        assert!(matches!(tick(&obs, &mut memory), PrStep::Wait { .. }));

        // The owner's comment: back to `pr`, a fix_comments worker with it, a review of
        // the new head, complete again.
        obs.owner_comments = vec![owner_comment(9, 11, 0)];
        assert!(matches!(tick(&obs, &mut memory), PrStep::BackToPr { .. }));
        assert!(matches!(
            tick(&obs, &mut memory),
            PrStep::SpawnFixComments { .. }
        ));
        obs.head_sha = "after-the-owners-comment".into();
        assert!(matches!(
            tick(&obs, &mut memory),
            PrStep::SpawnReview { .. }
        ));
        memory = memory
            .record_review("after-the-owners-comment", true, "")
            .review_posted();
        assert!(matches!(tick(&obs, &mut memory), PrStep::Complete { .. }));
        assert_eq!(memory.stage, Stage::Complete);
        assert_eq!(memory.ci_attempts, 1);
    }

    // ----- outside effects: one fix per head, kept verdicts, owed completions -----

    fn failed_on(head: &str) -> PrObservation {
        PrObservation {
            head_sha: head.into(),
            checks: failed_checks(),
            ..open_draft()
        }
    }

    #[test]
    fn a_fix_ci_worker_is_tied_to_the_head_it_was_started_for() {
        let obs = failed_on(HEAD);
        let first = step(&obs, &PrMemory::default());
        assert!(
            matches!(first, PrStep::SpawnFixCi { attempt: 1, .. }),
            "{first:?}"
        );
        let mut memory = remember(&PrMemory::default(), &first, &obs);
        assert_eq!(
            memory.ci_fix,
            Some(CiFix {
                head_sha: HEAD.into(),
                pushed: None
            })
        );

        // Its fix pushed, but the look still shows the old head (GitHub not caught up, a
        // cached answer): no second worker for that head.
        memory.ci_fix = Some(CiFix {
            head_sha: HEAD.into(),
            pushed: Some(FIX_HEAD.into()),
        });
        assert_eq!(
            step(&obs, &memory),
            PrStep::Wait {
                reason: WaitReason::CiFixPushed {
                    pushed: FIX_HEAD.into()
                }
            }
        );

        // The fix's own head failing is a new head: the next attempt.
        assert!(matches!(
            step(&failed_on(FIX_HEAD), &memory),
            PrStep::SpawnFixCi { attempt: 2, .. }
        ));

        // A worker that pushed nothing for the head: the owner is asked, once.
        memory.ci_fix = Some(CiFix {
            head_sha: HEAD.into(),
            pushed: None,
        });
        let asked = step(&obs, &memory);
        assert!(
            matches!(
                asked,
                PrStep::Escalate {
                    kind: EscalationKind::CiFixPushedNothing,
                    ..
                }
            ),
            "{asked:?}"
        );
        let memory = remember(&memory, &asked, &obs);
        assert!(matches!(step(&obs, &memory), PrStep::Wait { .. }));
    }

    #[test]
    fn a_verdict_whose_post_failed_is_posted_again_and_never_reviewed_again() {
        let obs = open_draft();
        let memory = PrMemory::default().record_review(FIX_HEAD, true, "executor's review: green");
        let post = step(&obs, &memory);
        assert_eq!(
            post,
            PrStep::PostReview {
                head_sha: FIX_HEAD.into(),
                body: "executor's review: green".into()
            }
        );
        let memory = remember(&memory, &post, &obs);
        assert!(memory.review.as_ref().is_some_and(|r| r.posted));
        assert!(matches!(step(&obs, &memory), PrStep::Complete { .. }));
        // A record from before `posted` existed was posted.
        let old: ReviewRecord =
            serde_json::from_str(&format!(r#"{{"head_sha":"{FIX_HEAD}","passed":true}}"#))
                .expect("an old record");
        assert!(old.posted);
    }

    #[test]
    fn completing_owes_the_comment_then_the_record_and_a_merge_owes_the_record_only() {
        let obs = open_draft();
        let memory = reviewed(FIX_HEAD);
        let complete = step(&obs, &memory);
        let after = remember(&memory, &complete, &obs);
        let owed = after.completion.clone().expect("owed effects");
        assert_eq!(
            (owed.comment, owed.record, owed.merged),
            (true, true, false)
        );
        assert_eq!(owed.head_sha, FIX_HEAD);
        assert_eq!(owed.next(), Some(Owed::Comment));
        let commented = Completion {
            comment: false,
            ..owed
        };
        assert_eq!(commented.next(), Some(Owed::Record));
        assert_eq!(
            Completion {
                record: false,
                ..commented
            }
            .next(),
            None
        );

        let merged = PrObservation {
            state: PrState::Merged,
            ..open_draft()
        };
        let after = remember(&PrMemory::default(), &PrStep::Merged, &merged);
        let owed = after.completion.clone().expect("owed effects");
        assert_eq!(
            (owed.comment, owed.record, owed.merged),
            (false, true, true)
        );

        assert!(after.merged && !after.settled(), "its completion is owed");
        let done = PrMemory {
            completion: None,
            ..after
        };
        assert!(
            done.settled(),
            "a merged PR with nothing owed is looked at no more"
        );

        // Merged after it was complete: nothing more is owed, and it is settled at once.
        let complete = PrMemory {
            stage: Stage::Complete,
            ..PrMemory::default()
        };
        let later = remember(&complete, &PrStep::Merged, &merged);
        assert_eq!(later.completion, None);
        assert!(later.settled());
        // Completed unmerged: the owner may still comment or merge.
        let unmerged = remember(
            &PrMemory::default(),
            &PrStep::Complete {
                mergeable: open_draft().mergeability(),
            },
            &open_draft(),
        );
        assert!(!PrMemory {
            completion: None,
            ..unmerged
        }
        .settled());
    }

    #[test]
    fn transient_failures_ask_the_owner_once_per_streak() {
        let table: [(u32, bool, u32, bool, bool); 5] = [
            // failures before, escalated before, max -> failures after, ask, escalated after
            (0, false, 5, false, false),
            (3, false, 5, false, false),
            (4, false, 5, true, true),
            (5, true, 5, false, true),
            (0, false, 1, true, true),
        ];
        for (before, escalated, max, ask, escalated_after) in
            table.map(|(b, e, m, a, ea)| (b, e, m, a, ea))
        {
            let memory = PrMemory {
                effect_failures: before,
                effect_escalated: escalated,
                ..PrMemory::default()
            };
            let (next, asked) = memory.effect_failed(max);
            assert_eq!(next.effect_failures, before + 1);
            assert_eq!(asked, ask, "{before} failures, max {max}");
            assert_eq!(next.effect_escalated, escalated_after);
            let done = next.effect_done();
            assert_eq!((done.effect_failures, done.effect_escalated), (0, false));
        }
    }

    #[test]
    fn a_landed_push_is_owed_no_more_and_ends_the_failure_streak() {
        let owed = PrMemory {
            push: Some(Push {
                branch: "executor/g-1".to_string(),
                commit: "a".repeat(40),
            }),
            opening: Some(Opening {
                title: "t".to_string(),
                head: "executor/g-1".to_string(),
                base: "main".to_string(),
                body: String::new(),
            }),
            effect_failures: 3,
            effect_escalated: true,
            ..PrMemory::default()
        };
        let done = owed.push_done();
        assert_eq!(done.push, None);
        assert_eq!((done.effect_failures, done.effect_escalated), (0, false));
        // The PR is still to be opened after the push.
        assert_eq!(done.opening, owed.opening);
        // A memory stored before pushes were kept reads back with none owed.
        let old: PrMemory = serde_json::from_str(r#"{"stage":"pr","opening":null}"#)
            .expect("an older memory reads back");
        assert_eq!(old.push, None);
        // The intent survives the store's round trip.
        let json = serde_json::to_string(&owed).expect("memory to JSON");
        let back: PrMemory = serde_json::from_str(&json).expect("memory from JSON");
        assert_eq!(back, owed);
    }

    #[test]
    fn an_answer_is_marked_by_its_thread_its_ask_and_its_text() {
        let marker = answer_marker("PRRT_1", "c1", "Fixed it.");
        assert_eq!(marker, answer_marker("PRRT_1", "c1", "Fixed it."));
        assert_ne!(marker, answer_marker("PRRT_2", "c1", "Fixed it."));
        assert_ne!(
            marker,
            answer_marker("PRRT_1", "c2", "Fixed it."),
            "a later ask"
        );
        assert_ne!(marker, answer_marker("PRRT_1", "c1", "Fixed it again."));
        let ours = format!("Fixed it.\n\n{marker}");
        let asked = [(1, "Please fix."), (2, ours.as_str())];
        assert_eq!(last_ask(asked.into_iter()), Some("1".to_string()));
        let again = [(1, "Please fix."), (2, ours.as_str()), (3, "Still broken.")];
        assert_eq!(last_ask(again.into_iter()), Some("3".to_string()));
        assert_eq!(last_ask([(9, ours.as_str())].into_iter()), None);
    }

    #[test]
    fn auto_merge_merges_a_complete_ready_approved_head_once_and_tells_the_owner_once_otherwise() {
        let auto = AutoMerge {
            method: MergeMethod::Squash,
            require_approval: true,
            delete_branch: true,
        };
        let config = PrConfig {
            auto_merge: Some(auto),
            ..config()
        };
        let complete = PrMemory {
            stage: Stage::Complete,
            ..reviewed(FIX_HEAD)
        };
        // Still a draft and unapproved: held, said once for the head.
        let draft = open_draft();
        let held = next_pr_step(&draft, &complete, &config);
        let PrStep::MergeHeld {
            head_sha, reasons, ..
        } = &held
        else {
            panic!("not held: {held:?}");
        };
        assert_eq!(head_sha, FIX_HEAD);
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        let told = remember(&complete, &held, &draft);
        assert!(matches!(
            next_pr_step(&draft, &told, &config),
            PrStep::Wait {
                reason: WaitReason::AwaitingOwner
            }
        ));
        // Marked ready and approved on the head by a reviewer: merged, and the merge is
        // kept before it is sent; until the forge answers, the same head is merged again.
        let ready = PrObservation {
            draft: false,
            verdicts: vec![Verdict {
                by: "reviewer".into(),
                approved: true,
                commit: Some(FIX_HEAD.into()),
            }],
            ..open_draft()
        };
        let merge = next_pr_step(&ready, &told, &config);
        assert_eq!(
            merge,
            PrStep::Merge {
                head_sha: FIX_HEAD.into(),
                method: MergeMethod::Squash,
                delete_branch: true,
            }
        );
        let sent = remember(&told, &merge, &ready);
        assert_eq!(sent.merge.as_ref().map(|m| m.done), Some(false));
        assert_eq!(next_pr_step(&ready, &sent, &config), merge);
        let mut done = sent.clone();
        if let Some(m) = done.merge.as_mut() {
            m.done = true;
        }
        assert!(matches!(
            next_pr_step(&ready, &done, &config),
            PrStep::Wait { .. }
        ));
        // Merged on the forge: the run's PR is done, whatever was kept.
        let merged = PrObservation {
            state: PrState::Merged,
            ..ready.clone()
        };
        assert_eq!(next_pr_step(&merged, &sent, &config), PrStep::Merged);
        // Without auto-merge, a ready approved PR is the owner's to merge.
        assert!(matches!(
            next_pr_step(&ready, &told, &super::tests::config()),
            PrStep::Wait {
                reason: WaitReason::AwaitingOwner
            }
        ));
    }
}

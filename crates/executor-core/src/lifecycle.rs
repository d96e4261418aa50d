//! The run's whole life, decided: what a run does next, given what just happened to it
//! (docs/design.md §10), from its first worker through its PR to its end.
//!
//! `decide(view, event, rules, now)` returns the run's next view and the one action the
//! edge performs next; the edge answers with the event that action produced. The view is
//! stored whole with the run (`executor_runs.lifecycle`), so a runner that restarts picks
//! the run up at the same stage with the same counters: a restart changes no decision.
//!
//! Once the run's draft PR is open (`Stage::InPr`) every look at the PR is an event of its
//! own ([`Event::PrLooked`]); its rows ([`pr_stage`]) put the PR machine's step
//! (`core::pr`) in the run's life: owed effects first, the usage limit and the budget
//! before any worker, the run's end when the PR is merged, complete or closed.
//!
//! Pure: no I/O, no clock (the caller says what time it is), no randomness (the back-off's
//! jitter is a function of the run and the attempt).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub mod pr_stage;
pub use pr_stage::{Budget, PrAction, PrLook, Seen};

/// What kind of worker the run starts next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Work {
    /// The run's first worker (the `queued` prompt).
    Start,
    /// A worker that carries on (`in_progress`): after a failed worker, a review's
    /// findings, the owner's answer or an interrupted runner.
    Resume,
    /// A worker that fixes a failed verification (`fix_ci`).
    FixCi,
}

/// Where the run is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum Stage {
    /// A worker of this kind runs, or is about to.
    Working { work: Work },
    /// Waiting out the back-off after a failed worker; holds no worker slot.
    RetryDelay { until: DateTime<Utc> },
    /// The agent's usage limit stopped the worker (or kept it from starting): waiting for
    /// the limit to reset, holding no worker slot, then `work` carries on (in the worker's
    /// session where it had one). Not a failed worker.
    UsageLimit { until: DateTime<Utc>, work: Work },
    /// The worker said `[DONE:…]`; the verification command runs.
    Verifying,
    /// Verified; the reviewer judges the diff (round N, from 1).
    Reviewing { round: u32 },
    /// Verified (and reviewed): the orchestrator commits, then opens the PR or completes.
    Integrating,
    /// A question is with the owner; the answer moves the run on.
    WaitingOnOwner { escalation: i64 },
    /// The branch is pushed and the draft PR is an intent GitHub has not taken yet; the
    /// PR tick opens it (and asks the owner if it keeps failing).
    OpeningPr,
    /// The draft PR is open; the PR machine drives the run from here.
    InPr,
    /// The run is over.
    Ended { complete: bool },
}

/// A verification that failed, as the next `fix_ci` worker is told it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub summary: Option<String>,
    pub excerpt: String,
}

/// The run's lifecycle as stored: its stage, every counter that decides, and what the next
/// worker is told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunView {
    #[serde(flatten)]
    pub stage: Stage,
    /// Workers that ended without `[DONE:…]` (against `max_worker_attempts`).
    #[serde(default)]
    pub failed_workers: u32,
    /// Failed verifications and failed integrations (against `max_ci_attempts`).
    #[serde(default)]
    pub ci_attempts: u32,
    /// Workers the no-output watchdog stopped.
    #[serde(default)]
    pub stuck: u32,
    /// Review rounds that rejected the diff (against `review_rounds`).
    #[serde(default)]
    pub review_rejections: u32,
    /// Why the next worker starts (shown in its prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The failure the next `fix_ci` worker fixes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// Why the run ended, when it ended without completing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_because: Option<String>,
}

impl Default for RunView {
    fn default() -> Self {
        Self {
            stage: Stage::Working { work: Work::Start },
            failed_workers: 0,
            ci_attempts: 0,
            stuck: 0,
            review_rejections: 0,
            reason: None,
            failure: None,
            ended_because: None,
        }
    }
}

impl RunView {
    /// The stage's name, as `show` and the console print it.
    pub fn stage_name(&self) -> &'static str {
        match self.stage {
            Stage::Working { .. } => "working",
            Stage::RetryDelay { .. } => "retry_delay",
            Stage::UsageLimit { .. } => "usage_limit",
            Stage::Verifying => "verifying",
            Stage::Reviewing { .. } => "reviewing",
            Stage::Integrating => "integrating",
            Stage::WaitingOnOwner { .. } => "waiting_on_owner",
            Stage::OpeningPr => "opening_pr",
            Stage::InPr => "in_pr",
            Stage::Ended { .. } => "ended",
        }
    }
}

/// How the review gate's contract answers a reviewed diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Approve,
    Deny,
    Escalate,
}

/// What the owner's answer says to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Carry on with a worker, told the answer.
    Continue { reason: String },
    /// Integrate the reviewed diff as it is.
    Integrate,
    /// Do not integrate it: the run ends.
    Decline,
    /// The owner said no to what the run asked (another worker over the task's budget):
    /// the run ends, for `why`.
    Stop { why: String },
}

/// Whether a worker that ended on a model API error of HTTP `status` is worth trying again.
/// The request itself was refused (400 bad request, 401 invalid key, 403 not allowed, 404
/// unknown model, 413 too large): the next worker sends the same and is refused the same.
/// A rate limit, an overload, a server error or a timeout passes, so those are retried.
pub fn retryable_api_status(status: Option<u16>) -> bool {
    !matches!(status, Some(400 | 401 | 403 | 404 | 413))
}

/// Something that happened to the run.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A runner takes the run up at its stored stage (a new run, or one carried on).
    Begin,
    /// A runner takes up a run another runner left (it stopped or died); a worker it was
    /// running is gone, and what that worker did since it started is not known.
    Resumed { reason: String },
    /// The worker ended.
    WorkerEnded {
        done: bool,
        /// It left a question for the owner (`[ESCALATE:…]`, a parked tool call, or a
        /// repository whose git data changed).
        asked: bool,
        no_output: bool,
        /// Another worker may fare better. False when the model's API refused the request
        /// itself (a bad request, an invalid key: see [`retryable_api_status`]): every
        /// retry would be refused the same way, so the run ends at once.
        retryable: bool,
        why: String,
        /// The agent's usage limit stopped it (see [`Limited`]).
        limited: Option<Limited>,
    },
    /// The back-off (or the usage limit) is over.
    RetryDue,
    /// The verification ran.
    Verified { failure: Option<Failure> },
    /// The reviewer accepted the diff; the gate says whether to integrate.
    ReviewAccepted { gate: Gate },
    /// The reviewer rejected the diff.
    ReviewRejected { findings: String },
    /// The review itself left a question with the owner (escalation opened).
    ReviewAsked { escalation: i64 },
    /// Committed and completed on the local forge.
    Completed,
    /// Committed and pushed; the draft PR is open.
    PrOpened,
    /// Committed and pushed; opening the draft PR failed for now and is left to the PR
    /// tick, which tries again.
    PrPending,
    /// Integrating failed in a way a worker can fix (the parent's suites failed).
    IntegrationFailed { reason: String },
    /// Integrating stopped for the owner (the repository's git data changed).
    IntegrationAsked,
    /// The escalation the last action asked for is open.
    Escalated { escalation: i64 },
    /// The owner answered the run's escalation.
    Answered(Answer),
    /// The owner cancelled the run.
    Cancelled { reason: String },
    /// The task's workers spent its budget, so the worker (or reviewer) the last action
    /// would start does not start; `why` says by how much.
    OverBudget { why: String },
    /// The run's PR was looked at (see [`pr_stage`]).
    PrLooked(Box<PrLook>),
}

/// A worker stopped by its agent's usage limit, or not started because the agent is
/// paused until its limit resets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    /// When the limit resets (the agent's word, or the configured back-off).
    pub until: DateTime<Utc>,
    /// The run has an agent session to carry on in.
    pub session: bool,
    /// A worker ran and met the limit; false: none started, the agent was paused already
    /// (the next worker is then told what this one would have been).
    pub ran: bool,
}

/// What the edge does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Start a worker (holding a slot while it lives). `attempt` is shown in its prompt.
    StartWorker {
        work: Work,
        attempt: u32,
    },
    /// Hold no slot until then, then answer `RetryDue`.
    WaitUntil(DateTime<Utc>),
    Verify,
    Review {
        round: u32,
    },
    /// Commit (unless the repository's git data changed), then open the PR or complete.
    Integrate,
    /// Open the escalation for what is asked (commit first, when `commit_first`), then
    /// answer `Escalated`.
    AskOwner {
        ask: Ask,
        commit_first: bool,
    },
    /// End the run abandoned, with the reason; the task goes back to the owner.
    Abandon {
        reason: String,
    },
    /// Nothing to do until an outside event (the owner, the PR).
    Wait,
    /// Act on the run's PR (see [`pr_stage`]).
    Pr(Box<PrAction>),
}

/// What the owner is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// What the last worker (or the orchestrator's git check) left for the owner.
    Worker,
    /// The review rejected the diff every round.
    ReviewExhausted { rejections: u32, findings: String },
    /// The reviewed diff waits for the owner's go.
    Integrate,
    /// The task's budget is spent: may the run start one more worker? (`why` says by how
    /// much; no is [`Answer::Stop`].)
    Budget { why: String },
}

/// The limits the owner configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    pub max_worker_attempts: u32,
    pub max_ci_attempts: u32,
    /// Review rounds before integrating (0: no review).
    pub review_rounds: u32,
    pub retry_base: Duration,
    /// The run, for the back-off's jitter.
    pub run_id: i64,
}

#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("a run that is {stage} cannot take `{event}`")]
pub struct Unexpected {
    pub stage: &'static str,
    pub event: String,
}

/// Why a run is abandoned when verification keeps failing.
pub const VERIFICATION_KEPT_FAILING: &str = "verification kept failing";
/// Why a run is abandoned when the owner declines to integrate it.
pub const DECLINED_BY_OWNER: &str = "the owner declined to integrate it";
/// Why a run is abandoned when the conductor's contract denies integrating it.
pub const DENIED_BY_CONTRACT: &str = "the conductor's contract denies integrating it";

/// The run's next view and action after `event`.
pub fn decide(
    view: &RunView,
    event: Event,
    rules: &Rules,
    now: DateTime<Utc>,
) -> Result<(RunView, Action), Unexpected> {
    let mut next = view.clone();
    let unexpected = |event: &Event| Unexpected {
        stage: view.stage_name(),
        event: format!("{event:?}"),
    };
    if let Stage::Ended { complete } = view.stage {
        return match event {
            Event::Begin | Event::Resumed { .. } | Event::Cancelled { .. } => {
                Ok((next, Action::Wait))
            }
            // A complete run's PR is still watched for the owner's comments.
            Event::PrLooked(look) if complete => {
                let action = pr_stage::looked(&mut next, *look);
                Ok((next, action))
            }
            other => Err(unexpected(&other)),
        };
    }
    let action = match (&view.stage, event) {
        (_, Event::Cancelled { reason }) => end(&mut next, reason),
        (_, Event::Begin) => resume_at_stage(&mut next, now),
        (_, Event::Resumed { reason }) => resumed(&mut next, reason, now),
        (
            Stage::Working { .. },
            Event::WorkerEnded {
                done,
                asked,
                no_output,
                retryable,
                why,
                limited,
            },
        ) => {
            if no_output {
                next.stuck += 1;
            }
            let working = match view.stage {
                Stage::Working { work } => work,
                _ => Work::Resume,
            };
            if let (false, false, Some(limited)) = (asked, done, &limited) {
                limit_reached(&mut next, working, limited, why)
            } else if asked {
                Action::AskOwner {
                    ask: Ask::Worker,
                    commit_first: false,
                }
            } else if done {
                next.stage = Stage::Verifying;
                next.reason = None;
                Action::Verify
            } else {
                worker_failed(&mut next, rules, now, retryable, why)
            }
        }
        (Stage::RetryDelay { until }, Event::RetryDue) => {
            if now < *until {
                Action::WaitUntil(*until)
            } else {
                start(&mut next, Work::Resume)
            }
        }
        (Stage::UsageLimit { until, work }, Event::RetryDue) => {
            if now < *until {
                Action::WaitUntil(*until)
            } else {
                start(&mut next, *work)
            }
        }
        (Stage::Verifying, Event::Verified { failure }) => verified(&mut next, rules, failure),
        (Stage::Reviewing { .. }, Event::ReviewAccepted { gate }) => match gate {
            Gate::Approve => {
                next.stage = Stage::Integrating;
                Action::Integrate
            }
            Gate::Deny => end(&mut next, DENIED_BY_CONTRACT.to_string()),
            Gate::Escalate => Action::AskOwner {
                ask: Ask::Integrate,
                commit_first: true,
            },
        },
        (Stage::Reviewing { round }, Event::ReviewRejected { findings }) => {
            rejected(&mut next, rules, *round, findings)
        }
        (Stage::Reviewing { .. }, Event::ReviewAsked { escalation }) => {
            next.stage = Stage::WaitingOnOwner { escalation };
            Action::Wait
        }
        (Stage::Integrating, Event::Completed) => {
            next.stage = Stage::Ended { complete: true };
            Action::Wait
        }
        (Stage::Integrating, Event::PrPending) => {
            next.stage = Stage::OpeningPr;
            Action::Wait
        }
        (Stage::InPr, Event::PrLooked(look)) => pr_stage::looked(&mut next, *look),
        (Stage::Working { .. } | Stage::Reviewing { .. }, Event::OverBudget { why }) => {
            Action::AskOwner {
                ask: Ask::Budget { why },
                commit_first: false,
            }
        }
        (Stage::Integrating | Stage::OpeningPr | Stage::InPr, Event::PrOpened) => {
            next.stage = Stage::InPr;
            Action::Wait
        }
        (Stage::Integrating, Event::IntegrationFailed { reason }) => {
            next.ci_attempts += 1;
            if next.ci_attempts > rules.max_ci_attempts {
                end(&mut next, reason)
            } else {
                continue_with(&mut next, reason)
            }
        }
        (Stage::Integrating, Event::IntegrationAsked) => Action::AskOwner {
            ask: Ask::Worker,
            commit_first: false,
        },
        (
            Stage::Working { .. } | Stage::Reviewing { .. } | Stage::Integrating,
            Event::Escalated { escalation },
        ) => {
            next.stage = Stage::WaitingOnOwner { escalation };
            Action::Wait
        }
        (Stage::WaitingOnOwner { .. }, Event::Answered(answer)) => match answer {
            Answer::Continue { reason } => continue_with(&mut next, reason),
            Answer::Integrate => {
                next.stage = Stage::Integrating;
                Action::Integrate
            }
            Answer::Decline => end(&mut next, DECLINED_BY_OWNER.to_string()),
            Answer::Stop { why } => end(&mut next, why),
        },
        (_, other) => return Err(unexpected(&other)),
    };
    Ok((next, action))
}

/// A runner takes the run up after another left it (`reason` says why).
fn resumed(next: &mut RunView, reason: String, now: DateTime<Utc>) -> Action {
    match next.stage.clone() {
        Stage::Working { work } => {
            next.reason = Some(reason);
            let work = match work {
                Work::Start => Work::Resume,
                other => other,
            };
            start(next, work)
        }
        // What the worker did is not checked yet, and the snapshot of the repository from
        // before it is gone with the runner: a new worker carries on, so nothing unchecked
        // is verified, committed or pushed.
        Stage::Verifying | Stage::Reviewing { .. } | Stage::Integrating => {
            next.reason = Some(reason);
            start(next, Work::Resume)
        }
        _ => resume_at_stage(next, now),
    }
}

/// A resume worker, told `reason` (the owner's answer, why integration failed).
fn continue_with(next: &mut RunView, reason: String) -> Action {
    next.reason = Some(reason);
    next.failure = None;
    start(next, Work::Resume)
}

/// A worker ended without `[DONE:…]` and without a question: another after a back-off,
/// or the end once attempts are spent or the failure is one no retry mends.
fn worker_failed(
    next: &mut RunView,
    rules: &Rules,
    now: DateTime<Utc>,
    retryable: bool,
    why: String,
) -> Action {
    next.failed_workers += 1;
    if !retryable || next.failed_workers >= rules.max_worker_attempts {
        return end(next, why);
    }
    let until = now + chrono_of(backoff(rules, next.failed_workers));
    next.stage = Stage::RetryDelay { until };
    next.reason = Some(why);
    next.failure = None;
    Action::WaitUntil(until)
}

/// The agent's usage limit stopped the worker: no failed attempt; the run waits for the
/// reset, then the same kind of work carries on (a first worker that had a session
/// continues it, so it resumes rather than starts over).
fn limit_reached(next: &mut RunView, work: Work, limited: &Limited, why: String) -> Action {
    let work = match work {
        Work::Start if limited.session => Work::Resume,
        other => other,
    };
    next.stage = Stage::UsageLimit {
        until: limited.until,
        work,
    };
    if limited.ran {
        next.reason = Some(format!(
            "The last worker stopped at the agent's usage limit ({why}); the limit has reset: carry on where it stopped."
        ));
    }
    Action::WaitUntil(limited.until)
}

/// The verification's verdict: on to review (or integration), or a `fix_ci` worker with
/// the failure, until the attempts are spent.
fn verified(next: &mut RunView, rules: &Rules, failure: Option<Failure>) -> Action {
    let Some(failure) = failure else {
        if rules.review_rounds > 0 {
            let round = next.review_rejections + 1;
            next.stage = Stage::Reviewing { round };
            return Action::Review { round };
        }
        next.stage = Stage::Integrating;
        return Action::Integrate;
    };
    next.ci_attempts += 1;
    if next.ci_attempts > rules.max_ci_attempts {
        return end(next, VERIFICATION_KEPT_FAILING.to_string());
    }
    next.failure = Some(failure);
    next.reason = None;
    start(next, Work::FixCi)
}

/// The review rejected the diff: the worker fixes the findings, or the owner decides once
/// the rounds are spent.
fn rejected(next: &mut RunView, rules: &Rules, round: u32, findings: String) -> Action {
    next.review_rejections += 1;
    let max = rules.review_rounds;
    if next.review_rejections >= max {
        return Action::AskOwner {
            ask: Ask::ReviewExhausted {
                rejections: next.review_rejections,
                findings,
            },
            commit_first: true,
        };
    }
    next.reason = Some(format!(
        "Your patch had these problems (review round {round} of {max}); fix them, then end with [DONE:implemented] again:\n{findings}"
    ));
    next.failure = None;
    start(next, Work::Resume)
}

/// The action a run at its stored stage needs when a runner takes it up.
fn resume_at_stage(next: &mut RunView, now: DateTime<Utc>) -> Action {
    match next.stage.clone() {
        Stage::Working { work } => start(next, work),
        Stage::RetryDelay { until } if now < until => Action::WaitUntil(until),
        Stage::RetryDelay { .. } => start(next, Work::Resume),
        Stage::UsageLimit { until, .. } if now < until => Action::WaitUntil(until),
        Stage::UsageLimit { work, .. } => start(next, work),
        Stage::Verifying => Action::Verify,
        Stage::Reviewing { round } => Action::Review { round },
        Stage::Integrating => Action::Integrate,
        Stage::WaitingOnOwner { .. } | Stage::OpeningPr | Stage::InPr | Stage::Ended { .. } => {
            Action::Wait
        }
    }
}

fn start(next: &mut RunView, work: Work) -> Action {
    next.stage = Stage::Working { work };
    let attempt = match work {
        Work::FixCi => next.ci_attempts,
        Work::Start | Work::Resume => next.failed_workers + 1,
    };
    Action::StartWorker { work, attempt }
}

fn end(next: &mut RunView, reason: String) -> Action {
    next.stage = Stage::Ended { complete: false };
    next.ended_because = Some(reason.clone());
    Action::Abandon { reason }
}

/// The wait before retry `n` (from 1): `base · 2^(n-1)`, capped at a minute, plus up to a
/// quarter of it as jitter (a function of the run and `n`), so runs that failed together
/// do not retry together.
pub fn backoff(rules: &Rules, n: u32) -> Duration {
    let exponential = rules
        .retry_base
        .saturating_mul(1u32 << n.saturating_sub(1).min(16));
    let capped = exponential.min(Duration::from_secs(60));
    let quarter = capped.as_millis() as u64 / 4;
    if quarter == 0 {
        return capped;
    }
    // A fixed mix of the run id and the attempt (splitmix64's finaliser).
    let mut x = (rules.run_id as u64) ^ (u64::from(n) << 32);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    capped + Duration::from_millis(x % quarter)
}

fn chrono_of(wait: Duration) -> chrono::Duration {
    chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::seconds(60))
}

#[cfg(test)]
mod tests;

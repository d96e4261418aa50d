//! One row per transition of the lifecycle table, plus the properties that make a restart
//! change no decision.

use super::*;
use chrono::TimeZone;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).unwrap()
}

fn rules() -> Rules {
    Rules {
        max_worker_attempts: 3,
        max_ci_attempts: 2,
        review_rounds: 0,
        retry_base: Duration::from_secs(2),
        run_id: 7,
    }
}

fn reviewing_rules() -> Rules {
    Rules {
        review_rounds: 2,
        ..rules()
    }
}

fn at(stage: Stage) -> RunView {
    RunView {
        stage,
        ..RunView::default()
    }
}

fn working(work: Work) -> RunView {
    at(Stage::Working { work })
}

fn failed(why: &str) -> Event {
    Event::WorkerEnded {
        done: false,
        asked: false,
        no_output: false,
        retryable: true,
        why: why.to_string(),
        limited: None,
    }
}

fn done() -> Event {
    Event::WorkerEnded {
        done: true,
        asked: false,
        no_output: false,
        retryable: true,
        why: "done".to_string(),
        limited: None,
    }
}

fn failure() -> Failure {
    Failure {
        summary: Some("1 failed".to_string()),
        excerpt: "assertion failed".to_string(),
    }
}

fn step(view: &RunView, event: Event, rules: &Rules) -> (RunView, Action) {
    decide(view, event, rules, t0()).expect("a legal event")
}

#[test]
fn a_new_run_starts_its_first_worker() {
    let (view, action) = step(&RunView::default(), Event::Begin, &rules());
    assert_eq!(view.stage, Stage::Working { work: Work::Start });
    assert_eq!(
        action,
        Action::StartWorker {
            work: Work::Start,
            attempt: 1
        }
    );
}

#[test]
fn a_worker_that_says_done_is_verified() {
    let (view, action) = step(&working(Work::Start), done(), &rules());
    assert_eq!(view.stage, Stage::Verifying);
    assert_eq!(action, Action::Verify);
}

#[test]
fn a_worker_that_asks_goes_to_the_owner_and_waits_once_the_escalation_is_open() {
    let asked = Event::WorkerEnded {
        done: false,
        asked: true,
        no_output: false,
        retryable: true,
        why: "the worker escalated".to_string(),
        limited: None,
    };
    let (view, action) = step(&working(Work::Resume), asked, &rules());
    assert_eq!(
        action,
        Action::AskOwner {
            ask: Ask::Worker,
            commit_first: false
        }
    );
    assert_eq!(view.failed_workers, 0, "a question is not a failure");
    let (view, action) = step(&view, Event::Escalated { escalation: 4 }, &rules());
    assert_eq!(view.stage, Stage::WaitingOnOwner { escalation: 4 });
    assert_eq!(action, Action::Wait);
}

#[test]
fn a_failed_worker_waits_out_a_back_off_holding_no_slot() {
    let (view, action) = step(&working(Work::Start), failed("exited 1"), &rules());
    let until = t0() + chrono_of(backoff(&rules(), 1));
    assert_eq!(view.stage, Stage::RetryDelay { until });
    assert_eq!(action, Action::WaitUntil(until));
    assert_eq!(view.failed_workers, 1);
    assert_eq!(view.reason.as_deref(), Some("exited 1"));
}

#[test]
fn the_last_allowed_failed_worker_abandons_the_run() {
    let view = RunView {
        failed_workers: 2,
        ..working(Work::Resume)
    };
    let (view, action) = step(&view, failed("hard timeout"), &rules());
    assert_eq!(view.stage, Stage::Ended { complete: false });
    assert_eq!(
        action,
        Action::Abandon {
            reason: "hard timeout".to_string()
        }
    );
    assert_eq!(view.failed_workers, 3);
}

#[test]
fn a_worker_the_model_api_refused_abandons_the_run_at_once() {
    let refused = Event::WorkerEnded {
        done: false,
        asked: false,
        no_output: false,
        retryable: false,
        why: "the model API answered 401".to_string(),
        limited: None,
    };
    let (view, action) = step(&working(Work::Start), refused, &rules());
    assert_eq!(view.stage, Stage::Ended { complete: false });
    assert_eq!(
        action,
        Action::Abandon {
            reason: "the model API answered 401".to_string()
        }
    );
    assert_eq!(view.failed_workers, 1);
}

#[test]
fn only_a_refused_request_is_not_worth_another_worker() {
    for status in [400, 401, 403, 404, 413] {
        assert!(!retryable_api_status(Some(status)), "{status}");
    }
    for status in [
        None,
        Some(408),
        Some(409),
        Some(429),
        Some(500),
        Some(503),
        Some(529),
    ] {
        assert!(retryable_api_status(status), "{status:?}");
    }
}

#[test]
fn a_silent_worker_counts_as_stuck() {
    let silent = Event::WorkerEnded {
        done: false,
        asked: false,
        no_output: true,
        retryable: true,
        why: "no output for too long".to_string(),
        limited: None,
    };
    let (view, _) = step(&working(Work::Start), silent, &rules());
    assert_eq!(view.stuck, 1);
}

#[test]
fn the_retry_waits_until_its_time_then_resumes() {
    let until = t0() + chrono::Duration::seconds(5);
    let view = RunView {
        failed_workers: 1,
        ..at(Stage::RetryDelay { until })
    };
    let (same, action) = step(&view, Event::RetryDue, &rules());
    assert_eq!(action, Action::WaitUntil(until));
    assert_eq!(same, view);
    let (view, action) = decide(&view, Event::RetryDue, &rules(), until).unwrap();
    assert_eq!(view.stage, Stage::Working { work: Work::Resume });
    assert_eq!(
        action,
        Action::StartWorker {
            work: Work::Resume,
            attempt: 2
        }
    );
}

#[test]
fn a_runner_taking_up_a_run_in_back_off_waits_for_the_same_time() {
    let until = t0() + chrono::Duration::seconds(5);
    let view = at(Stage::RetryDelay { until });
    let (_, action) = step(
        &view,
        Event::Resumed {
            reason: "runner restarted".to_string(),
        },
        &rules(),
    );
    assert_eq!(action, Action::WaitUntil(until));
}

#[test]
fn a_verified_change_is_integrated_or_reviewed() {
    let (view, action) = step(
        &at(Stage::Verifying),
        Event::Verified { failure: None },
        &rules(),
    );
    assert_eq!(
        (view.stage, action),
        (Stage::Integrating, Action::Integrate)
    );
    let (view, action) = step(
        &at(Stage::Verifying),
        Event::Verified { failure: None },
        &reviewing_rules(),
    );
    assert_eq!(
        (view.stage, action),
        (Stage::Reviewing { round: 1 }, Action::Review { round: 1 })
    );
}

#[test]
fn a_failed_verification_starts_a_fix_ci_worker_with_the_failure() {
    let (view, action) = step(
        &at(Stage::Verifying),
        Event::Verified {
            failure: Some(failure()),
        },
        &rules(),
    );
    assert_eq!(view.ci_attempts, 1);
    assert_eq!(view.failure, Some(failure()));
    assert_eq!(
        action,
        Action::StartWorker {
            work: Work::FixCi,
            attempt: 1
        }
    );
}

#[test]
fn verification_failing_past_the_cap_abandons() {
    let view = RunView {
        ci_attempts: 2,
        ..at(Stage::Verifying)
    };
    let (view, action) = step(
        &view,
        Event::Verified {
            failure: Some(failure()),
        },
        &rules(),
    );
    assert_eq!(view.stage, Stage::Ended { complete: false });
    assert_eq!(
        action,
        Action::Abandon {
            reason: VERIFICATION_KEPT_FAILING.to_string()
        }
    );
}

#[test]
fn the_gate_answers_an_accepted_review() {
    let reviewing = at(Stage::Reviewing { round: 1 });
    let cases = [
        (Gate::Approve, Action::Integrate),
        (
            Gate::Deny,
            Action::Abandon {
                reason: DENIED_BY_CONTRACT.to_string(),
            },
        ),
        (
            Gate::Escalate,
            Action::AskOwner {
                ask: Ask::Integrate,
                commit_first: true,
            },
        ),
    ];
    for (gate, expected) in cases {
        let (_, action) = step(
            &reviewing,
            Event::ReviewAccepted { gate },
            &reviewing_rules(),
        );
        assert_eq!(action, expected, "{gate:?}");
    }
}

#[test]
fn a_rejected_review_goes_back_to_a_worker_until_the_rounds_run_out() {
    let (view, action) = step(
        &at(Stage::Reviewing { round: 1 }),
        Event::ReviewRejected {
            findings: "no test".to_string(),
        },
        &reviewing_rules(),
    );
    assert_eq!(view.review_rejections, 1);
    assert!(view.reason.as_deref().unwrap().contains("no test"));
    assert_eq!(
        action,
        Action::StartWorker {
            work: Work::Resume,
            attempt: 1
        }
    );
    let view = RunView {
        review_rejections: 1,
        ..at(Stage::Reviewing { round: 2 })
    };
    let (view, action) = step(
        &view,
        Event::ReviewRejected {
            findings: "still no test".to_string(),
        },
        &reviewing_rules(),
    );
    assert_eq!(
        action,
        Action::AskOwner {
            ask: Ask::ReviewExhausted {
                rejections: 2,
                findings: "still no test".to_string()
            },
            commit_first: true
        }
    );
    let (view, _) = step(
        &view,
        Event::Escalated { escalation: 9 },
        &reviewing_rules(),
    );
    assert_eq!(view.stage, Stage::WaitingOnOwner { escalation: 9 });
}

#[test]
fn a_review_that_asks_waits_on_the_owner() {
    let (view, action) = step(
        &at(Stage::Reviewing { round: 1 }),
        Event::ReviewAsked { escalation: 3 },
        &reviewing_rules(),
    );
    assert_eq!(view.stage, Stage::WaitingOnOwner { escalation: 3 });
    assert_eq!(action, Action::Wait);
}

#[test]
fn integrating_completes_opens_the_pr_retries_or_asks() {
    let integrating = at(Stage::Integrating);
    let (view, action) = step(&integrating, Event::Completed, &rules());
    assert_eq!(
        (view.stage, action),
        (Stage::Ended { complete: true }, Action::Wait)
    );
    let (view, action) = step(&integrating, Event::PrOpened, &rules());
    assert_eq!((view.stage, action), (Stage::InPr, Action::Wait));
    let (view, action) = step(&integrating, Event::PrPending, &rules());
    assert_eq!(
        (view.stage.clone(), action),
        (Stage::OpeningPr, Action::Wait)
    );
    let (_, action) = step(
        &view,
        Event::Resumed {
            reason: "restart".to_string(),
        },
        &rules(),
    );
    assert_eq!(action, Action::Wait, "the PR tick opens it, not a worker");
    let failed = Event::IntegrationFailed {
        reason: "the parent's suites failed".to_string(),
    };
    let (view, action) = step(&integrating, failed.clone(), &rules());
    assert_eq!(view.ci_attempts, 1);
    assert_eq!(
        action,
        Action::StartWorker {
            work: Work::Resume,
            attempt: 1
        }
    );
    let spent = RunView {
        ci_attempts: 2,
        ..integrating.clone()
    };
    let (_, action) = step(&spent, failed, &rules());
    assert_eq!(
        action,
        Action::Abandon {
            reason: "the parent's suites failed".to_string()
        }
    );
    let (_, action) = step(&integrating, Event::IntegrationAsked, &rules());
    assert_eq!(
        action,
        Action::AskOwner {
            ask: Ask::Worker,
            commit_first: false
        }
    );
}

#[test]
fn the_owners_answer_moves_a_waiting_run_on() {
    let waiting = at(Stage::WaitingOnOwner { escalation: 2 });
    let (view, action) = step(
        &waiting,
        Event::Answered(Answer::Continue {
            reason: "approved".to_string(),
        }),
        &rules(),
    );
    assert_eq!(view.reason.as_deref(), Some("approved"));
    assert_eq!(
        action,
        Action::StartWorker {
            work: Work::Resume,
            attempt: 1
        }
    );
    let (view, action) = step(&waiting, Event::Answered(Answer::Integrate), &rules());
    assert_eq!(
        (view.stage, action),
        (Stage::Integrating, Action::Integrate)
    );
    let (_, action) = step(&waiting, Event::Answered(Answer::Decline), &rules());
    assert_eq!(
        action,
        Action::Abandon {
            reason: DECLINED_BY_OWNER.to_string()
        }
    );
    let why = "the owner would not spend more on it".to_string();
    let (_, action) = step(
        &waiting,
        Event::Answered(Answer::Stop { why: why.clone() }),
        &rules(),
    );
    assert_eq!(action, Action::Abandon { reason: why });
}

#[test]
fn cancel_ends_a_run_at_every_stage_but_the_end() {
    let stages = [
        Stage::Working { work: Work::Start },
        Stage::RetryDelay { until: t0() },
        Stage::Verifying,
        Stage::Reviewing { round: 1 },
        Stage::Integrating,
        Stage::WaitingOnOwner { escalation: 1 },
        Stage::OpeningPr,
        Stage::InPr,
    ];
    for stage in stages {
        let (view, action) = step(
            &at(stage.clone()),
            Event::Cancelled {
                reason: "cancelled by the owner".to_string(),
            },
            &rules(),
        );
        assert_eq!(view.stage, Stage::Ended { complete: false }, "{stage:?}");
        assert_eq!(
            view.ended_because.as_deref(),
            Some("cancelled by the owner")
        );
        assert!(matches!(action, Action::Abandon { .. }), "{stage:?}");
    }
    let ended = at(Stage::Ended { complete: true });
    let (view, action) = step(
        &ended,
        Event::Cancelled {
            reason: "late".to_string(),
        },
        &rules(),
    );
    assert_eq!((view, action), (ended, Action::Wait));
}

#[test]
fn a_runner_taking_up_a_run_carries_it_on_from_its_stage() {
    let resumed = || Event::Resumed {
        reason: "the runner stopped".to_string(),
    };
    let (view, action) = step(&working(Work::Start), resumed(), &rules());
    assert_eq!(view.reason.as_deref(), Some("the runner stopped"));
    assert_eq!(
        action,
        Action::StartWorker {
            work: Work::Resume,
            attempt: 1
        }
    );
    let fixing = RunView {
        ci_attempts: 1,
        failure: Some(failure()),
        ..working(Work::FixCi)
    };
    let (view, action) = step(&fixing, resumed(), &rules());
    assert_eq!(
        view.failure,
        Some(failure()),
        "the fix_ci worker is told the failure again"
    );
    assert_eq!(
        action,
        Action::StartWorker {
            work: Work::FixCi,
            attempt: 1
        }
    );
    for unchecked in [
        Stage::Verifying,
        Stage::Reviewing { round: 1 },
        Stage::Integrating,
    ] {
        let (view, action) = step(&at(unchecked.clone()), resumed(), &rules());
        assert_eq!(
            view.stage,
            Stage::Working { work: Work::Resume },
            "{unchecked:?}"
        );
        assert!(matches!(action, Action::StartWorker { .. }));
    }
    for waiting in [Stage::WaitingOnOwner { escalation: 1 }, Stage::InPr] {
        let (_, action) = step(&at(waiting), resumed(), &rules());
        assert_eq!(action, Action::Wait);
    }
}

#[test]
fn the_same_runner_beginning_again_repeats_the_stage() {
    for (stage, expected) in [
        (Stage::Verifying, Action::Verify),
        (Stage::Reviewing { round: 2 }, Action::Review { round: 2 }),
        (Stage::Integrating, Action::Integrate),
        (Stage::WaitingOnOwner { escalation: 1 }, Action::Wait),
    ] {
        let (_, action) = step(&at(stage), Event::Begin, &reviewing_rules());
        assert_eq!(action, expected);
    }
}

#[test]
fn events_that_do_not_belong_to_the_stage_are_refused() {
    let refused = [
        (at(Stage::Verifying), done()),
        (working(Work::Start), Event::Verified { failure: None }),
        (at(Stage::InPr), Event::RetryDue),
        (at(Stage::Ended { complete: true }), done()),
        (at(Stage::Integrating), Event::Answered(Answer::Integrate)),
    ];
    for (view, event) in refused {
        let err = decide(&view, event.clone(), &rules(), t0()).expect_err("refused");
        assert_eq!(err.stage, view.stage_name(), "{event:?}");
    }
}

/// The view as the store keeps it: through JSON text.
fn stored(view: &RunView) -> RunView {
    serde_json::from_str(&serde_json::to_string(view).unwrap()).unwrap()
}

#[test]
fn a_runner_restarted_after_every_failed_worker_still_stops_at_the_cap() {
    let rules = rules();
    let mut view = RunView::default();
    let mut now = t0();
    let mut workers = 0;
    let mut event = Event::Begin;
    loop {
        let (next, action) = decide(&stored(&view), event, &rules, now).unwrap();
        view = next;
        event = match action {
            Action::StartWorker { .. } => {
                workers += 1;
                failed("exited 1")
            }
            // The runner dies during every back-off; the next one takes the run up.
            Action::WaitUntil(until) => {
                now = until;
                Event::Resumed {
                    reason: "the runner died".to_string(),
                }
            }
            Action::Abandon { .. } => break,
            other => panic!("unexpected {other:?}"),
        };
        assert!(workers <= 10, "the run never ended");
    }
    assert_eq!(workers, rules.max_worker_attempts);
}

#[test]
fn review_rejections_survive_a_restart() {
    let rules = reviewing_rules();
    let mut view = RunView::default();
    let mut reviews = 0;
    let mut event = Event::Begin;
    loop {
        let (next, action) = decide(&stored(&view), event, &rules, t0()).unwrap();
        view = next;
        event = match action {
            Action::StartWorker { .. } => done(),
            Action::Verify => Event::Verified { failure: None },
            Action::Review { .. } => {
                reviews += 1;
                Event::ReviewRejected {
                    findings: "no".to_string(),
                }
            }
            Action::AskOwner { .. } => break,
            other => panic!("unexpected {other:?}"),
        };
        assert!(reviews <= 10);
    }
    assert_eq!(reviews, rules.review_rounds);
}

#[test]
fn the_stored_view_reads_back_the_same_and_names_its_stage() {
    let view = RunView {
        failed_workers: 2,
        reason: Some("exited 1".to_string()),
        ..at(Stage::RetryDelay { until: t0() })
    };
    let text = serde_json::to_string(&view).unwrap();
    assert!(text.contains("\"stage\":\"retry_delay\""), "{text}");
    assert_eq!(stored(&view), view);
}

#[test]
fn backoff_doubles_is_capped_and_jittered_within_a_quarter() {
    let rules = Rules {
        retry_base: Duration::from_secs(10),
        ..rules()
    };
    for n in 1..=8 {
        let wait = backoff(&rules, n);
        let base = Duration::from_secs(10 * (1 << (n - 1))).min(Duration::from_secs(60));
        assert!(wait >= base && wait <= base + base / 4, "{n}: {wait:?}");
        assert_eq!(
            wait,
            backoff(&rules, n),
            "the same run and attempt wait the same"
        );
    }
    let other = Rules { run_id: 8, ..rules };
    assert!((1..=8).any(|n| backoff(&rules, n) != backoff(&other, n)));
}

fn limited(until: DateTime<Utc>, session: bool) -> Event {
    Event::WorkerEnded {
        done: false,
        asked: false,
        no_output: false,
        retryable: true,
        why: "claude hit its usage limit".to_string(),
        limited: Some(Limited {
            until,
            session,
            ran: session,
        }),
    }
}

#[test]
fn a_usage_limit_is_no_failed_attempt_and_the_work_carries_on_after_the_reset() {
    let until = t0() + chrono::Duration::hours(2);
    let rules = Rules {
        max_worker_attempts: 1,
        ..rules()
    };
    // Even with one attempt allowed, the limit ends nothing: the run waits for the reset.
    let (view, action) = step(&working(Work::Start), limited(until, true), &rules);
    assert_eq!(action, Action::WaitUntil(until));
    assert_eq!(
        view.stage,
        Stage::UsageLimit {
            until,
            work: Work::Resume
        }
    );
    assert_eq!(view.failed_workers, 0);
    assert_eq!(view.stage_name(), "usage_limit");
    assert!(view
        .reason
        .as_deref()
        .is_some_and(|r| r.contains("usage limit")));
    // Too early: still waiting, also for a runner that takes the run up.
    let (_, early) = decide(&view, Event::RetryDue, &rules, t0()).unwrap();
    assert_eq!(early, Action::WaitUntil(until));
    let (_, begun) = decide(&view, Event::Begin, &rules, t0()).unwrap();
    assert_eq!(begun, Action::WaitUntil(until));
    // Reset: the session carries on.
    let (after, action) = decide(&view, Event::RetryDue, &rules, until).unwrap();
    assert_eq!(
        action,
        Action::StartWorker {
            work: Work::Resume,
            attempt: 1
        }
    );
    assert_eq!(after.stage, Stage::Working { work: Work::Resume });
    // A worker kept from starting (no session) starts as it would have, told what it
    // would have been told.
    let told = RunView {
        reason: Some("The owner answered: go on".into()),
        ..working(Work::Start)
    };
    let (view, _) = step(&told, limited(until, false), &rules);
    assert_eq!(
        view.stage,
        Stage::UsageLimit {
            until,
            work: Work::Start
        }
    );
    assert_eq!(view.reason.as_deref(), Some("The owner answered: go on"));
    // A worker that said [DONE] or asked is not held by a limit it met afterwards.
    let mut done = limited(until, true);
    if let Event::WorkerEnded { done: d, .. } = &mut done {
        *d = true;
    }
    let (view, action) = step(&working(Work::Resume), done, &rules);
    assert_eq!((view.stage, action), (Stage::Verifying, Action::Verify));
}

// The budget stop: a worker (or reviewer) the task's spent budget keeps from starting.

#[test]
fn a_spent_budget_asks_the_owner_before_another_worker_and_no_ends_the_run() {
    let why = "its workers spent $0.0016, over [budget] per_task_usd = 0.001".to_string();
    for view in [working(Work::Resume), at(Stage::Reviewing { round: 1 })] {
        let (asking, action) = step(&view, Event::OverBudget { why: why.clone() }, &rules());
        assert_eq!(
            action,
            Action::AskOwner {
                ask: Ask::Budget { why: why.clone() },
                commit_first: false
            }
        );
        assert_eq!(asking.failed_workers, 0, "no worker ran, none failed");
        let (waiting, action) = step(&asking, Event::Escalated { escalation: 4 }, &rules());
        assert_eq!(waiting.stage, Stage::WaitingOnOwner { escalation: 4 });
        assert_eq!(action, Action::Wait);
        let stop = Answer::Stop {
            why: pr_stage::BUDGET_REFUSED.to_string(),
        };
        let (ended, action) = step(&waiting, Event::Answered(stop), &rules());
        assert_eq!(ended.stage, Stage::Ended { complete: false });
        assert_eq!(
            action,
            Action::Abandon {
                reason: pr_stage::BUDGET_REFUSED.to_string()
            }
        );
    }
    // Yes lets one more worker start.
    let (_, action) = step(
        &at(Stage::WaitingOnOwner { escalation: 4 }),
        Event::Answered(Answer::Continue {
            reason: "The owner approved".into(),
        }),
        &rules(),
    );
    assert!(matches!(action, Action::StartWorker { .. }), "{action:?}");
}

// The PR stage: one look at the run's PR, decided as a row of the same table.

mod pr_rows {
    use super::*;
    use crate::pr::{
        CheckConclusion, CheckRun, CheckRunStatus, Completion, ObservedComment, ObservedThread,
        OwnerComment, PrConfig, PrMemory, PrObservation, PrState, PrStep, Push, ReviewRecord,
    };

    const HEAD: &str = "4be1f0c7d93a2e58b6f1c40a7d2e9b3f58c61a07";

    fn check(conclusion: CheckConclusion) -> CheckRun {
        CheckRun {
            name: "build".into(),
            status: CheckRunStatus::Completed,
            conclusion: Some(conclusion),
            url: None,
            run_url: None,
            summary: Some("1 failed, 47 passed".into()),
            failing_step: None,
            log_excerpt: None,
        }
    }

    fn pr(conclusion: CheckConclusion) -> PrObservation {
        PrObservation {
            observed_at: t0(),
            state: PrState::Open,
            draft: true,
            mergeable: Some(true),
            head_sha: HEAD.into(),
            head_pushed_at: None,
            ci_run_exists: true,
            checks: vec![check(conclusion)],
            labels: Vec::new(),
            threads: Vec::new(),
            owner_comments: Vec::new(),
            worker_running: false,
            author: None,
            verdicts: Vec::new(),
        }
    }

    fn reviewed() -> PrMemory {
        PrMemory {
            review: Some(ReviewRecord {
                head_sha: HEAD.into(),
                passed: true,
                body: "executor's review: green".into(),
                posted: true,
            }),
            ..PrMemory::default()
        }
    }

    fn look(seen: Seen, memory: PrMemory) -> PrLook {
        PrLook {
            seen,
            memory,
            config: PrConfig::default(),
            paused_until: None,
            budget: Budget::Within,
        }
    }

    fn looked(view: &RunView, look: PrLook) -> (RunView, Action) {
        step(view, Event::PrLooked(Box::new(look)), &rules())
    }

    fn in_pr() -> RunView {
        at(Stage::InPr)
    }

    /// The PR machine's step of an action, and the memory after it.
    fn taken(action: &Action) -> (PrStep, PrMemory) {
        match action {
            Action::Pr(act) => match act.as_ref() {
                PrAction::Step { step, after, .. } => (step.clone(), after.clone()),
                other => panic!("a step, not {other:?}"),
            },
            other => panic!("a PR action, not {other:?}"),
        }
    }

    #[test]
    fn ci_red_starts_a_fix_ci_worker_tied_to_the_head() {
        let (view, action) = looked(
            &in_pr(),
            look(Seen::Pr(pr(CheckConclusion::Failure)), PrMemory::default()),
        );
        assert_eq!(view.stage, Stage::InPr);
        let (step, after) = taken(&action);
        assert!(
            matches!(step, PrStep::SpawnFixCi { attempt: 1, .. }),
            "{step:?}"
        );
        assert_eq!(after.ci_attempts, 1);
        assert_eq!(after.ci_fix.map(|f| f.head_sha), Some(HEAD.to_string()));
    }

    #[test]
    fn unresolved_threads_start_a_fix_comments_worker() {
        let mut obs = pr(CheckConclusion::Success);
        obs.threads = vec![ObservedThread {
            id: "PRRT_kwDOLumen1".into(),
            path: "src/tab.rs".into(),
            line: Some(58),
            is_resolved: false,
            is_outdated: false,
            comments: vec![ObservedComment {
                id: "PRRC_1".into(),
                author: "mkowalski".into(),
                body: "This leaks the preview".into(),
                created_at: t0(),
            }],
        }];
        let (view, action) = looked(&in_pr(), look(Seen::Pr(obs), reviewed()));
        assert_eq!(view.stage, Stage::InPr);
        let (step, after) = taken(&action);
        assert!(matches!(step, PrStep::SpawnFixComments { .. }), "{step:?}");
        assert!(
            after.sent_threads.is_some(),
            "the threads are remembered as sent"
        );
    }

    #[test]
    fn green_is_reviewed_then_completes_the_run() {
        let green = || Seen::Pr(pr(CheckConclusion::Success));
        let (view, action) = looked(&in_pr(), look(green(), PrMemory::default()));
        assert_eq!(view.stage, Stage::InPr);
        assert!(matches!(taken(&action).0, PrStep::SpawnReview { .. }));
        let (view, action) = looked(&in_pr(), look(green(), reviewed()));
        assert_eq!(view.stage, Stage::Ended { complete: true });
        let (step, after) = taken(&action);
        assert!(matches!(step, PrStep::Complete { .. }), "{step:?}");
        assert!(
            after.completion.is_some(),
            "the completion's effects are owed"
        );
    }

    #[test]
    fn the_owners_comment_on_a_complete_draft_brings_the_run_back() {
        let mut obs = pr(CheckConclusion::Success);
        obs.owner_comments = vec![OwnerComment {
            id: 91,
            created_at: t0(),
            on_conversation: true,
            body: "Please also handle the empty tab".into(),
        }];
        let memory = PrMemory {
            stage: crate::pr::Stage::Complete,
            ..reviewed()
        };
        let complete = at(Stage::Ended { complete: true });
        let (view, action) = looked(&complete, look(Seen::Pr(obs), memory.clone()));
        assert_eq!(view.stage, Stage::InPr);
        assert!(matches!(taken(&action).0, PrStep::BackToPr { .. }));
        // Without a new comment the complete run stays ended, waiting for the owner.
        let quiet = look(Seen::Pr(pr(CheckConclusion::Success)), memory);
        let (view, action) = looked(&complete, quiet);
        assert_eq!(view.stage, Stage::Ended { complete: true });
        assert!(matches!(taken(&action).0, PrStep::Wait { .. }));
    }

    #[test]
    fn a_pr_closed_unmerged_or_gone_ends_the_run_and_a_silent_forge_waits() {
        let mut closed = pr(CheckConclusion::Success);
        closed.state = PrState::Closed;
        let (view, action) = looked(&in_pr(), look(Seen::Pr(closed), PrMemory::default()));
        assert_eq!(view.stage, Stage::Ended { complete: false });
        assert_eq!(
            view.ended_because.as_deref(),
            Some(pr_stage::CLOSED_UNMERGED)
        );
        assert!(matches!(action, Action::Abandon { .. }));
        let gone = Seen::Gone {
            forge: "GitHub".into(),
        };
        let (view, action) = looked(&in_pr(), look(gone, PrMemory::default()));
        assert_eq!(view.stage, Stage::Ended { complete: false });
        assert_eq!(
            action,
            Action::Abandon {
                reason: "its PR is gone from GitHub".into()
            }
        );
        let (view, action) = looked(&in_pr(), look(Seen::Unavailable, PrMemory::default()));
        assert_eq!((view.stage, action), (Stage::InPr, Action::Wait));
    }

    #[test]
    fn owed_effects_come_before_any_new_step() {
        let mut merged = pr(CheckConclusion::Success);
        merged.state = PrState::Merged;
        let owes = |memory: PrMemory| looked(&in_pr(), look(Seen::Pr(merged.clone()), memory)).1;
        let completion = PrMemory {
            completion: Some(Completion {
                head_sha: HEAD.into(),
                comment: true,
                record: true,
                merged: false,
            }),
            ..PrMemory::default()
        };
        assert_eq!(owes(completion), Action::Pr(Box::new(PrAction::Settle)));
        let push = PrMemory {
            push: Some(Push {
                branch: "executor/T-1".into(),
                commit: HEAD.into(),
            }),
            ..PrMemory::default()
        };
        assert_eq!(owes(push), Action::Pr(Box::new(PrAction::Push)));
        let answers = PrMemory {
            answers: vec![crate::pr::ThreadAnswer {
                thread: "PRRT_kwDOLumen1".into(),
                text: "Fixed".into(),
            }],
            ..PrMemory::default()
        };
        assert_eq!(owes(answers), Action::Pr(Box::new(PrAction::Answer)));
    }

    #[test]
    fn the_usage_limit_pauses_a_pr_worker_and_nothing_else() {
        let until = t0() + chrono::Duration::hours(1);
        let paused = |seen| PrLook {
            paused_until: Some(until),
            ..look(seen, PrMemory::default())
        };
        let (view, action) = looked(&in_pr(), paused(Seen::Pr(pr(CheckConclusion::Failure))));
        assert_eq!(action, Action::WaitUntil(until));
        assert_eq!(view, in_pr(), "no attempt is spent while paused");
        // A step that starts no worker is taken all the same.
        let mut unlabelled = pr(CheckConclusion::Failure);
        unlabelled.labels.clear();
        let labelled = PrLook {
            config: PrConfig {
                required_labels: vec!["executor".into()],
                ..PrConfig::default()
            },
            ..paused(Seen::Pr(unlabelled))
        };
        let (_, action) = looked(&in_pr(), labelled);
        assert!(matches!(taken(&action).0, PrStep::AddLabels { .. }));
    }

    #[test]
    fn a_spent_budget_stops_a_pr_worker_asks_once_and_no_ends_the_run() {
        let red = || Seen::Pr(pr(CheckConclusion::Failure));
        let with = |budget| PrLook {
            budget,
            ..look(red(), PrMemory::default())
        };
        let why = "its workers used 240 tokens, over [budget] per_task_tokens = 100";
        let (view, action) = looked(&in_pr(), with(Budget::Over { why: why.into() }));
        assert_eq!(view, in_pr());
        assert_eq!(
            action,
            Action::AskOwner {
                ask: Ask::Budget { why: why.into() },
                commit_first: false
            }
        );
        let (view, action) = looked(&in_pr(), with(Budget::Asked));
        assert_eq!((view, action), (in_pr(), Action::Wait));
        let (view, action) = looked(&in_pr(), with(Budget::Refused));
        assert_eq!(view.stage, Stage::Ended { complete: false });
        assert!(matches!(action, Action::Abandon { .. }));
        let (_, action) = looked(&in_pr(), with(Budget::Within));
        assert!(matches!(taken(&action).0, PrStep::SpawnFixCi { .. }));
    }

    #[test]
    fn a_run_not_in_its_pr_stage_refuses_a_look() {
        let event = Event::PrLooked(Box::new(look(Seen::Unavailable, PrMemory::default())));
        for view in [working(Work::Start), at(Stage::Ended { complete: false })] {
            assert!(decide(&view, event.clone(), &rules(), t0()).is_err());
        }
    }
}

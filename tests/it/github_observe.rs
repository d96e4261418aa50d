//! The PR observation and the orchestrator's steps against the fake GitHub: the fixtures'
//! story told one stage at a time (CI in progress, CI failed, CI green with review threads,
//! the threads already sent, nothing left, merged), each observation handed to the real
//! `pr` machine; a deleted PR; what a second look costs; and each step's write as the fake
//! records it.

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use executor::core::clock::ManualClock;
use executor::core::pr::{
    next_pr_step, remember, CheckConclusion, CheckRunStatus, PrConfig, PrMemory, PrObservation,
    PrState, PrStep, TriggerReason, WaitReason,
};
use executor::forge::github::steps::{self, CiTrigger};
use executor::forge::github::{observe, ClientOptions, GithubClient, GithubError};
use serde_json::json;

use crate::fake_github::{
    Ci, FakeGithub, Fault, FAILED_JOB, FIRST_HEAD, FIX_HEAD, OWNER, PR, RUN_ID,
};

const REPORT: &str = "Xcode test report (macOS UI Tests CI)";
const NEEDS_WORK: &str = "PRRT_kwDOMGtpR85h4iMD";
const ACKNOWLEDGED: &str = "PRRT_kwDOMGtpR85h4iBh";
const BRANCH: &str = "fix/tab-preview-stuck";

/// 2026-03-16T11:00:00Z: after every fixture timestamp, so the CI start grace has passed.
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 16, 11, 0, 0)
        .single()
        .expect("a valid time")
}

fn config() -> PrConfig {
    PrConfig {
        required_checks: vec![REPORT.into()],
        required_labels: vec!["executor".into(), "ai-generated".into()],
        executor_logins: vec!["lumen-executor[bot]".into()],
        review_rules_files: vec!["AGENTS.md".into()],
        ..PrConfig::default()
    }
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    client: GithubClient,
    clock: Arc<ManualClock>,
    fake: FakeGithub,
}

impl Harness {
    /// The fixtures' PR #1234 with its required labels already on it.
    fn story() -> Self {
        let fake = FakeGithub::start();
        fake.add_label(PR, "executor");
        fake.add_label(PR, "ai-generated");
        Self::on(fake)
    }

    fn on(fake: FakeGithub) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("client runtime");
        let clock = Arc::new(ManualClock::new(now()));
        let client =
            GithubClient::with_options(fake.settings(), ClientOptions::default(), clock.clone())
                .expect("client");
        Self {
            runtime,
            client,
            clock,
            fake,
        }
    }

    fn run<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    fn observe(&self, memory: &PrMemory, worker_running: bool) -> PrObservation {
        self.try_observe(memory, worker_running).expect("observe")
    }

    fn try_observe(
        &self,
        memory: &PrMemory,
        worker_running: bool,
    ) -> Result<PrObservation, GithubError> {
        self.run(observe(
            &self.client,
            PR,
            &config(),
            memory,
            now(),
            worker_running,
        ))
    }

    /// Past the client's 10 s cache TTL, so a change on the fake's side is seen.
    fn next_tick(&self) {
        self.clock.advance(Duration::seconds(11));
    }

    fn requests_to(&self, part: &str) -> usize {
        self.fake
            .requests()
            .iter()
            .filter(|r| r.path.contains(part))
            .count()
    }
}

#[test]
fn ci_in_progress_is_waited_for_without_reading_any_job_or_log() {
    let h = Harness::story();
    h.fake.set_ci(FIRST_HEAD, Ci::InProgress);
    let obs = h.observe(&PrMemory::default(), false);

    assert_eq!(obs.state, PrState::Open);
    assert!(obs.draft);
    assert_eq!(obs.mergeable, Some(true));
    assert_eq!(obs.head_sha, FIRST_HEAD);
    assert_eq!(obs.labels, ["executor", "ai-generated"]);
    assert!(obs.ci_run_exists);
    let checks: Vec<_> = obs
        .checks
        .iter()
        .map(|c| (c.name.as_str(), c.status, c.conclusion))
        .collect();
    assert_eq!(
        checks,
        [
            ("build", CheckRunStatus::InProgress, None),
            ("ui-tests", CheckRunStatus::Queued, None),
        ]
    );
    assert_eq!(
        obs.head_pushed_at,
        Some(
            Utc.with_ymd_and_hms(2026, 3, 16, 9, 14, 31)
                .single()
                .expect("time")
        )
    );

    let step = next_pr_step(&obs, &PrMemory::default(), &config());
    assert!(
        matches!(&step, PrStep::Wait { reason: WaitReason::CiRunning { checks } } if checks == &["build", "ui-tests"]),
        "{step:?}"
    );
    assert_eq!(h.requests_to("/actions/"), 0);
}

#[test]
fn failed_ci_gives_a_fix_ci_worker_the_checks_the_step_and_the_log() {
    let h = Harness::story();
    let memory = PrMemory::default();
    let obs = h.observe(&memory, false);

    let failed: Vec<_> = obs
        .checks
        .iter()
        .filter(|c| c.conclusion == Some(CheckConclusion::Failure))
        .collect();
    assert_eq!(failed.len(), 2);
    for check in &failed {
        assert_eq!(check.failing_step.as_deref(), Some("Run macOS UI Tests CI"));
        assert!(check
            .log_excerpt
            .as_deref()
            .is_some_and(|log| log.contains("** TEST FAILED **")));
        assert_eq!(
            check.run_url.as_deref(),
            Some("https://github.com/mkowalski/lumen-browser/actions/runs/34712098321")
        );
    }
    let build = obs
        .checks
        .iter()
        .find(|c| c.name == "build")
        .expect("build");
    assert_eq!(
        (build.failing_step.as_ref(), build.log_excerpt.as_ref()),
        (None, None)
    );

    let PrStep::SpawnFixCi {
        attempt,
        max_attempts,
        failure,
    } = next_pr_step(&obs, &memory, &config())
    else {
        panic!("not a fix_ci worker");
    };
    assert_eq!((attempt, max_attempts), (1, 3));
    let names: Vec<&str> = failure.checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, [REPORT, "ui-tests"]);
    assert_eq!(
        failure.checks[0].summary.as_deref(),
        Some("macOS UI Tests CI: 1 failed, 47 passed")
    );
    assert!(failure
        .failing_step
        .as_deref()
        .is_some_and(|s| s.contains("Run macOS UI Tests CI")));
    assert!(failure.log_excerpt.contains("** TEST FAILED **"));
    assert!(failure
        .log_excerpt
        .contains("XCTAssertFalse failed - Tab preview still visible"));
    assert_eq!(
        failure.run_url.as_deref(),
        Some("https://github.com/mkowalski/lumen-browser/actions/runs/34712098321")
    );

    // Both failed checks point at the same job: one jobs list, one log.
    assert_eq!(h.requests_to(&format!("/actions/runs/{RUN_ID}/jobs")), 1);
    assert_eq!(
        h.requests_to(&format!("/actions/jobs/{FAILED_JOB}/logs")),
        1
    );
    assert_eq!(h.requests_to("/_logs/"), 1);
}

#[test]
fn failed_ci_whose_run_and_log_are_gone_is_still_a_fix_ci_worker_not_a_deleted_pr() {
    let h = Harness::story();
    let runs: Vec<_> = Ci::Failed
        .runs(FIRST_HEAD)
        .into_iter()
        .map(|run| {
            let text = run
                .to_string()
                .replace(&RUN_ID.to_string(), "1")
                .replace(&FAILED_JOB.to_string(), "2");
            serde_json::from_str(&text).expect("check run")
        })
        .collect();
    h.fake.set_check_runs(FIRST_HEAD, runs);
    let obs = h.observe(&PrMemory::default(), false);
    assert!(obs.checks.iter().all(|c| c.log_excerpt.is_none()));
    let PrStep::SpawnFixCi { failure, .. } = next_pr_step(&obs, &PrMemory::default(), &config())
    else {
        panic!("not a fix_ci worker");
    };
    assert_eq!(failure.checks.len(), 2);
    assert_eq!(failure.failing_step, None);
    assert!(failure.log_excerpt.is_empty());
    assert!(failure
        .run_url
        .is_some_and(|u| u.ends_with("/actions/runs/1")));
}

#[test]
fn a_rate_limit_on_the_log_is_the_callers_to_wait_out() {
    let h = Harness::story();
    h.fake
        .fail_next_matching("/logs", 1, crate::fake_github::Fault::PrimaryRateLimit);
    let error = h
        .try_observe(&PrMemory::default(), false)
        .expect_err("rate limited");
    assert!(error.is_transient(), "{error:?}");
    assert!(!error.is_not_found());
}

#[test]
fn green_ci_sends_exactly_the_thread_that_needs_work_once() {
    let h = Harness::story();
    h.fake.set_pr_head(PR, FIX_HEAD);
    let memory = PrMemory::default();
    let obs = h.observe(&memory, false);
    assert_eq!(obs.head_sha, FIX_HEAD);
    assert_eq!(obs.threads.len(), 3);
    let acknowledged = obs
        .threads
        .iter()
        .find(|t| t.id == ACKNOWLEDGED)
        .expect("acknowledged thread");
    assert_eq!(acknowledged.line, Some(142));
    assert_eq!(acknowledged.comments[1].author, "lumen-executor");
    assert_eq!(
        h.requests_to("/actions/"),
        0,
        "no log read when CI is green"
    );

    let step = next_pr_step(&obs, &memory, &config());
    let PrStep::SpawnFixComments { threads, .. } = &step else {
        panic!("not a fix_comments worker: {step:?}");
    };
    let ids: Vec<&str> = threads.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, [NEEDS_WORK]);
    assert_eq!(threads[0].path, "Lumen/TabBar/TabBarView.swift");
    assert_eq!(threads[0].line, Some(88));
    assert_eq!(threads[0].comments.len(), 1);
    assert_eq!(threads[0].comments[0].author, "mkowalski");
    assert!(threads[0].comments[0].body.contains("NSTrackingArea"));

    // Remembered: the same set is not sent again, on this tick or the next.
    let memory = remember(&memory, &step, &obs);
    let again = h.observe(&memory, false);
    let step = next_pr_step(&again, &memory, &config());
    assert!(
        matches!(&step, PrStep::Wait { reason: WaitReason::ThreadsAlreadySent { thread_ids } } if thread_ids == &[NEEDS_WORK]),
        "{step:?}"
    );
    h.next_tick();
    let later = h.observe(&memory, false);
    assert!(matches!(
        next_pr_step(&later, &memory, &config()),
        PrStep::Wait {
            reason: WaitReason::ThreadsAlreadySent { .. }
        }
    ));
}

#[test]
fn green_ci_with_no_threads_asks_for_a_review_then_merged_ends_the_run() {
    let h = Harness::story();
    h.fake.set_pr_head(PR, FIX_HEAD);
    h.fake.set_threads(PR, Vec::new());
    let obs = h.observe(&PrMemory::default(), false);
    assert!(obs.threads.is_empty());
    let step = next_pr_step(&obs, &PrMemory::default(), &config());
    let PrStep::SpawnReview { inputs } = &step else {
        panic!("not a review worker: {step:?}");
    };
    assert_eq!(inputs.rules_files, ["AGENTS.md"]);
    assert_eq!(inputs.required_checks.len(), 1);
    assert_eq!(
        (
            inputs.required_checks[0].name.as_str(),
            inputs.required_checks[0].conclusion.as_str()
        ),
        (REPORT, "success")
    );

    h.fake.merge_pr(PR);
    h.next_tick();
    let before = h.fake.requests().len();
    let obs = h.observe(&PrMemory::default(), false);
    assert_eq!(obs.state, PrState::Merged);
    assert_eq!(
        next_pr_step(&obs, &PrMemory::default(), &config()),
        PrStep::Merged
    );
    assert_eq!(
        h.fake.requests().len() - before,
        1,
        "a merged PR is read from the PR alone"
    );

    let h = Harness::story();
    h.fake.close_pr(PR);
    let obs = h.observe(&PrMemory::default(), false);
    assert_eq!(obs.state, PrState::Closed);
    assert_eq!(
        next_pr_step(&obs, &PrMemory::default(), &config()),
        PrStep::Closed
    );
}

#[test]
fn owner_comments_are_the_owners_conversation_and_review_comments_only() {
    let h = Harness::story();
    let obs = h.observe(&PrMemory::default(), true);
    let ids: Vec<u64> = obs.owner_comments.iter().map(|c| c.id).collect();
    // The owner's conversation comment and review comment; not the bot's status comment
    // nor its `[ACKNOWLEDGED: …]` reply.
    assert_eq!(ids, [4061238457, 2934817265]);
    assert!(obs.worker_running);
    // A worker is running: nothing for it to be told, so no log is read.
    assert_eq!(h.requests_to("/actions/"), 0);
}

#[test]
fn a_deleted_pr_is_not_found() {
    let h = Harness::story();
    h.fake.delete_pr(PR);
    let error = h
        .try_observe(&PrMemory::default(), false)
        .expect_err("deleted");
    assert!(error.is_not_found(), "{error:?}");
    assert!(matches!(error, GithubError::NotFound { .. }), "{error:?}");
    assert!(!error.is_transient());
}

#[test]
fn a_second_look_within_the_cache_ttl_costs_no_request() {
    for ci in [Ci::InProgress, Ci::Success] {
        let h = Harness::story();
        h.fake.set_ci(FIRST_HEAD, ci);
        let first = h.observe(&PrMemory::default(), false);
        let sent = h.client.requests_sent();
        assert_eq!(sent, 5, "PR, check runs, threads, two comment lists");
        let second = h.observe(&PrMemory::default(), false);
        assert_eq!(h.client.requests_sent(), sent, "{ci:?}");
        assert_eq!(first, second);
    }

    // Failed CI: the logs are read for the tick that spawns the worker; the next look,
    // with the step remembered and the worker running, reads nothing.
    let h = Harness::story();
    let memory = PrMemory::default();
    let obs = h.observe(&memory, false);
    let step = next_pr_step(&obs, &memory, &config());
    assert!(matches!(step, PrStep::SpawnFixCi { .. }));
    let memory = remember(&memory, &step, &obs);
    let sent = h.client.requests_sent();
    assert_eq!(
        sent,
        5 + 1 + 2,
        "plus one jobs list and the log (302 and blob)"
    );
    let again = h.observe(&memory, true);
    assert_eq!(h.client.requests_sent(), sent);
    assert_eq!(
        next_pr_step(&again, &memory, &config()),
        PrStep::Wait {
            reason: WaitReason::WorkerRunning
        }
    );
}

// ----- steps -----

#[test]
fn a_draft_pr_is_opened_with_the_callers_title_and_body_then_labelled() {
    let fake = FakeGithub::start_empty();
    fake.set_branch_head(BRANCH, FIRST_HEAD);
    let h = Harness::on(fake);
    let pr = h
        .run(steps::open_draft_pr(
            &h.client,
            BRANCH,
            "main",
            "Fix tab preview stuck after pointer leaves the tab strip",
            "Task: https://app.asana.com/0/1/2\n\nThe preview now closes on mouseExited.",
        ))
        .expect("open");
    assert!(pr.draft);
    assert_eq!(pr.number, PR);
    assert_eq!(
        pr.title,
        "Fix tab preview stuck after pointer leaves the tab strip"
    );
    assert!(pr.body.as_deref().is_some_and(|b| b.contains("asana.com")));
    let held = h.fake.pr(PR).expect("the fake holds the PR");
    assert_eq!(held["draft"], true);
    assert_eq!(held["head"]["ref"], BRANCH);
    assert_eq!(held["base"]["ref"], "main");

    // The machine asks for the labels; the step adds them; the next look has them.
    let obs = h.observe(&PrMemory::default(), false);
    let step = next_pr_step(&obs, &PrMemory::default(), &config());
    let PrStep::AddLabels { labels } = &step else {
        panic!("not labels: {step:?}");
    };
    let now_on = h
        .run(steps::add_labels(&h.client, PR, labels))
        .expect("labels");
    let names: Vec<&str> = now_on.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["executor", "ai-generated"]);
    assert_eq!(h.fake.labels(PR), ["executor", "ai-generated"]);
    let obs = h.observe(&PrMemory::default(), false);
    assert_eq!(obs.labels, ["executor", "ai-generated"]);
}

#[test]
fn ci_is_triggered_by_a_rerun_of_the_failed_run_or_a_dispatch() {
    let h = Harness::story();
    let mut obs = h.observe(&PrMemory::default(), true);
    for check in &mut obs.checks {
        if check.name == "ui-tests" {
            check.conclusion = Some(CheckConclusion::Cancelled);
        }
    }
    let rerun = TriggerReason::Rerun {
        checks: vec!["ui-tests".into()],
    };
    let how = steps::choose_ci_trigger(&obs, &rerun, None, BRANCH).expect("a rerun");
    assert_eq!(how, CiTrigger::RerunFailed { run_id: RUN_ID });
    h.run(steps::trigger_ci(&h.client, FIRST_HEAD, &how))
        .expect("rerun");
    assert_eq!(h.fake.reruns(), [RUN_ID]);

    let no_run = TriggerReason::NoRun;
    assert_eq!(
        steps::choose_ci_trigger(&obs, &no_run, None, BRANCH),
        None,
        "nothing to re-run and no workflow configured"
    );
    let how =
        steps::choose_ci_trigger(&obs, &no_run, Some("ui-tests.yml"), BRANCH).expect("a dispatch");
    assert_eq!(
        how,
        CiTrigger::Dispatch {
            workflow_file: "ui-tests.yml".into(),
            git_ref: BRANCH.into(),
        }
    );
    h.run(steps::trigger_ci(&h.client, FIRST_HEAD, &how))
        .expect("dispatch");
    let dispatches = h.fake.dispatches();
    assert_eq!(dispatches.len(), 1);
    assert_eq!(
        (
            dispatches[0].workflow.as_str(),
            dispatches[0].git_ref.as_str()
        ),
        ("ui-tests.yml", BRANCH)
    );
    assert_eq!(dispatches[0].inputs, json!(null));
}

#[test]
fn acknowledged_threads_are_resolved_and_a_gone_thread_is_skipped() {
    let h = Harness::story();
    h.fake.set_pr_head(PR, FIX_HEAD);
    let config = PrConfig {
        resolve_acknowledged: true,
        ..config()
    };
    let obs = h
        .run(observe(
            &h.client,
            PR,
            &config,
            &PrMemory::default(),
            now(),
            false,
        ))
        .expect("observe");
    let step = next_pr_step(&obs, &PrMemory::default(), &config);
    let PrStep::ResolveThreads { thread_ids } = &step else {
        panic!("not a resolve: {step:?}");
    };
    assert_eq!(thread_ids, &[ACKNOWLEDGED]);
    let mut ids = thread_ids.clone();
    ids.push("PRRT_gone".into());
    let resolved = h
        .run(steps::resolve_threads(&h.client, &ids))
        .expect("resolve");
    assert_eq!(resolved.len(), 1);
    assert!(resolved[0].is_resolved && resolved[0].id == ACKNOWLEDGED);
    assert_eq!(h.fake.threads(PR)[1]["isResolved"], true);

    // The write expired the cache: the same tick sees it, and moves on to the real work.
    let obs = h
        .run(observe(
            &h.client,
            PR,
            &config,
            &PrMemory::default(),
            now(),
            false,
        ))
        .expect("observe");
    assert!(matches!(
        next_pr_step(&obs, &PrMemory::default(), &config),
        PrStep::SpawnFixComments { .. }
    ));
}

#[test]
fn the_review_is_a_comment_and_completion_mentions_the_owner() {
    let h = Harness::story();
    let marker = steps::review_marker(42, FIX_HEAD);
    let body = format!("Reviewed against AGENTS.md: the fix is scoped and tested.\n\n{marker}");
    // GitHub saves the review, and the answer is lost to a 502 in front of it.
    h.fake
        .fail_route("POST", "/reviews", 1, Fault::AfterApplying(502));
    assert!(h
        .run(steps::post_review(&h.client, PR, &body, &marker))
        .is_err());
    // Tried again, the review is found by its marker and not posted twice.
    let again = h
        .run(steps::post_review(&h.client, PR, &body, &marker))
        .expect("review");
    assert!(again.is_none(), "posted again: {again:?}");
    let reviews = h.fake.reviews();
    assert_eq!(reviews.len(), 1);
    assert_eq!(reviews[0].event, "COMMENT");
    assert_eq!(reviews[0].body, body);
    assert_eq!(reviews[0].json["state"], "COMMENTED");
    // Another head's review is another review.
    let next = steps::review_marker(42, "f".repeat(40).as_str());
    let posted = h
        .run(steps::post_review(
            &h.client,
            PR,
            &format!("again\n\n{next}"),
            &next,
        ))
        .expect("review")
        .expect("posted");
    assert_eq!(posted.state, "COMMENTED");
    assert_eq!(h.fake.reviews().len(), 2);

    let comment = h
        .run(steps::notify_complete_comment(
            &h.client,
            PR,
            "@mkowalski",
            42,
            FIX_HEAD,
        ))
        .expect("notify")
        .expect("posted");
    assert!(
        comment.body.starts_with(&format!("@{OWNER} ")),
        "{}",
        comment.body
    );
    let posted = h.fake.issue_comments(PR);
    let last = posted.last().expect("a comment");
    assert!(last["body"]
        .as_str()
        .is_some_and(|b| b.contains(&format!("@{OWNER}"))));

    // Told again (a retry after a failure that came after GitHub saved it): the marker is
    // found and nothing more is posted.
    let again = h
        .run(steps::notify_complete_comment(
            &h.client,
            PR,
            "@mkowalski",
            42,
            FIX_HEAD,
        ))
        .expect("notify again");
    assert_eq!(again, None);
    assert_eq!(h.fake.issue_comments(PR).len(), posted.len());

    // The notification is never read back as an owner comment.
    let obs = h.observe(&PrMemory::default(), true);
    assert!(!obs.owner_comments.iter().any(|c| c.id == comment.id));

    let error = h
        .run(steps::notify_complete_comment(
            &h.client, PR, "  ", 42, FIX_HEAD,
        ))
        .expect_err("no login");
    assert!(matches!(error, GithubError::Settings(_)), "{error:?}");
    assert_eq!(h.fake.issue_comments(PR).len(), posted.len());
}

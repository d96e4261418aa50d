//! The GitHub client against the fake GitHub: every operation reads the fixtures' shapes,
//! the caches save requests, and each failure GitHub can give comes back as its typed error
//! without the token anywhere but the `Authorization` header.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use executor::core::clock::{Clock, ManualClock};
use executor::forge::github::{
    CheckConclusion, CheckStatus, ClientOptions, GithubClient, GithubError, GithubSettings,
    LogExcerptOptions, NewPullRequest, ReviewEvent, Secret,
};

use crate::fake_github::{
    Ci, FakeGithub, Fault, BOT_LOGIN, FAILED_JOB, FIRST_HEAD, FIXTURE_RESET, FIX_HEAD, PR, RUN_ID,
    TOKEN,
};

/// 2026-03-16T09:00:00Z: the morning of the fixtures' story, before the rate-limit reset.
fn start_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 16, 9, 0, 0)
        .single()
        .expect("start time")
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    client: GithubClient,
    clock: Arc<ManualClock>,
}

impl Harness {
    fn new(settings: GithubSettings) -> Self {
        Self::with_options(settings, ClientOptions::default())
    }

    fn with_options(settings: GithubSettings, options: ClientOptions) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("client runtime");
        let clock = Arc::new(ManualClock::new(start_time()));
        let client = GithubClient::with_options(settings, options, clock.clone()).expect("client");
        Self {
            runtime,
            client,
            clock,
        }
    }

    fn run<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Past the response cache's 10 s TTL: the next tick.
    fn next_tick(&self) {
        self.clock.advance(chrono::Duration::seconds(11));
    }
}

fn new_pr() -> NewPullRequest {
    NewPullRequest {
        title: "Fix tab preview stuck after pointer leaves the tab strip".into(),
        head: "fix/tab-preview-stuck".into(),
        base: "main".into(),
        body: "Asana: https://app.asana.com/1/1201987654321098/project/1209512345678901/task/1209876543210987".into(),
    }
}

#[test]
fn a_created_draft_pr_has_mergeable_null_until_github_computes_it() {
    let fake = FakeGithub::start_empty();
    fake.set_mergeable_after_gets(2);
    fake.set_branch_head("fix/tab-preview-stuck", FIX_HEAD);
    let h = Harness::new(fake.settings());

    let pr = h.run(h.client.create_draft_pr(&new_pr())).expect("create");
    assert_eq!(pr.number, PR);
    assert!(pr.draft);
    assert_eq!(pr.mergeable, None);
    assert_eq!(pr.mergeable_state.as_deref(), Some("unknown"));
    assert!(pr.labels.is_empty());
    assert_eq!(pr.head.branch, "fix/tab-preview-stuck");
    assert_eq!(pr.head.sha, FIX_HEAD);
    assert_eq!(pr.user.login, BOT_LOGIN);
    assert_eq!(pr.user.kind, "Bot");
    let create = &fake.requests()[0];
    assert_eq!(
        (create.method.as_str(), create.path.as_str()),
        ("POST", "/repos/mkowalski/lumen-browser/pulls")
    );
    let sent: serde_json::Value = serde_json::from_str(&create.body).expect("create body");
    assert_eq!(sent["draft"], true);
    assert_eq!(sent["head"], "fix/tab-preview-stuck");
    assert_eq!(sent["base"], "main");

    for _ in 0..2 {
        h.next_tick();
        let pr = h.run(h.client.get_pr(PR)).expect("get");
        assert_eq!(pr.mergeable, None);
    }
    h.next_tick();
    let pr = h.run(h.client.get_pr(PR)).expect("get");
    assert_eq!(pr.mergeable, Some(true));
    assert_eq!(pr.mergeable_state.as_deref(), Some("draft"));
}

#[test]
fn labels_are_added_and_the_answer_lists_every_label_on_the_pr() {
    let fake = FakeGithub::start();
    let h = Harness::new(fake.settings());
    let labels = h
        .run(h.client.add_labels(PR, &["executor"]))
        .expect("labels");
    assert_eq!(labels.len(), 1);
    assert_eq!(labels[0].name, "executor");
    assert_eq!(labels[0].color, "5319e7");
    let labels = h
        .run(h.client.add_labels(PR, &["ai-generated", "needs-owner"]))
        .expect("labels");
    let names: Vec<&str> = labels.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["executor", "ai-generated", "needs-owner"]);
    assert_eq!(fake.labels(PR), names);
}

#[test]
fn check_runs_are_gathered_over_every_page() {
    let fake = FakeGithub::start();
    fake.set_max_per_page(2);
    let h = Harness::new(fake.settings());
    let runs = h.run(h.client.check_runs(FIRST_HEAD)).expect("check runs");
    assert_eq!(runs.total_count, 3);
    let names: Vec<&str> = runs.runs.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["Xcode test report (macOS UI Tests CI)", "ui-tests", "build"]
    );
    let pages: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/check-runs"))
        .map(|r| r.query.clone())
        .collect();
    assert_eq!(pages, ["per_page=100", "per_page=2&page=2"]);

    let report = &runs.runs[0];
    assert_eq!(report.conclusion, Some(CheckConclusion::Failure));
    assert!(report
        .output
        .text
        .as_deref()
        .is_some_and(|t| t.contains("XCTAssertFalse")));
    let ui = &runs.runs[1];
    assert_eq!(ui.status, CheckStatus::Completed);
    assert_eq!(ui.output.text, None);
    assert_eq!(ui.actions_job(), Some((RUN_ID, FAILED_JOB)));
    assert_eq!(runs.runs[2].conclusion, Some(CheckConclusion::Success));

    // Five runs over pages of two: three pages.
    let mut many = Ci::Failed.runs(FIX_HEAD);
    many.extend(Ci::InProgress.runs(FIX_HEAD));
    fake.set_check_runs(FIX_HEAD, many);
    let runs = h.run(h.client.check_runs(FIX_HEAD)).expect("check runs");
    assert_eq!((runs.total_count, runs.runs.len()), (5, 5));
}

#[test]
fn check_runs_in_progress_and_green_read_as_such() {
    let fake = FakeGithub::start();
    let sha = "1111111111111111111111111111111111111111";
    fake.set_ci(sha, Ci::InProgress);
    let h = Harness::new(fake.settings());
    let runs = h.run(h.client.check_runs(sha)).expect("check runs");
    let states: Vec<_> = runs.runs.iter().map(|r| (r.status, r.conclusion)).collect();
    assert_eq!(
        states,
        [(CheckStatus::InProgress, None), (CheckStatus::Queued, None)]
    );
    assert!(runs.runs.iter().all(|r| r.head_sha == sha));

    let green = h.run(h.client.check_runs(FIX_HEAD)).expect("check runs");
    assert_eq!(green.runs.len(), 3);
    assert!(green
        .runs
        .iter()
        .all(|r| r.conclusion == Some(CheckConclusion::Success)));

    let none = h
        .run(
            h.client
                .check_runs("2222222222222222222222222222222222222222"),
        )
        .expect("check runs");
    assert_eq!((none.total_count, none.runs.len()), (0, 0));
}

#[test]
fn the_combined_status_is_pending_with_or_without_legacy_statuses() {
    let fake = FakeGithub::start();
    let h = Harness::new(fake.settings());
    let status = h.run(h.client.combined_status(FIRST_HEAD)).expect("status");
    assert_eq!((status.state.as_str(), status.total_count), ("pending", 1));
    assert_eq!(status.statuses[0].context, "lumen-ci/device-farm");
    let status = h.run(h.client.combined_status(FIX_HEAD)).expect("status");
    assert_eq!((status.state.as_str(), status.total_count), ("pending", 0));
    assert_eq!(status.sha, FIX_HEAD);
}

#[test]
fn comments_read_with_their_authors_and_replies() {
    let fake = FakeGithub::start();
    let h = Harness::new(fake.settings());
    let comments = h.run(h.client.issue_comments(PR)).expect("issue comments");
    assert_eq!(comments.len(), 2);
    assert_eq!(comments[0].author_association, "OWNER");
    assert_eq!(
        comments[0].user.as_ref().map(|u| u.login.as_str()),
        Some("mkowalski")
    );
    assert!(comments[0].performed_via_github_app.is_none());
    assert_eq!(
        comments[1]
            .performed_via_github_app
            .as_ref()
            .and_then(|a| a.slug.as_deref()),
        Some("lumen-executor")
    );

    let review = h
        .run(h.client.review_comments(PR))
        .expect("review comments");
    assert_eq!(review.len(), 2);
    assert_eq!(review[0].in_reply_to_id, None);
    assert_eq!(review[1].in_reply_to_id, Some(review[0].id));
    assert_eq!(review[1].line, Some(142));
    assert!(review[1].body.starts_with("[ACKNOWLEDGED: out of scope]"));
}

#[test]
fn review_threads_follow_graphql_cursors_to_the_last_page() {
    let fake = FakeGithub::start();
    fake.set_threads_page_size(1);
    let h = Harness::new(fake.settings());
    let threads = h.run(h.client.review_threads(PR)).expect("threads");
    assert_eq!(threads.len(), 3);
    assert!(threads[0].is_resolved && threads[0].is_outdated);
    assert_eq!(threads[0].line, None);
    let acknowledged = &threads[1];
    assert!(!acknowledged.is_resolved);
    assert_eq!(acknowledged.line, Some(142));
    let last = acknowledged.last_comment().expect("last comment");
    assert!(last.body.starts_with("[ACKNOWLEDGED:"));
    assert_eq!(
        last.author.as_ref().map(|a| a.login.as_str()),
        Some("lumen-executor")
    );
    assert_eq!(last.database_id, Some(2934902118));
    assert_eq!(threads[2].comments.len(), 1);

    let afters: Vec<serde_json::Value> = fake
        .requests()
        .iter()
        .filter(|r| r.path == "/graphql")
        .map(|r| {
            let body: serde_json::Value = serde_json::from_str(&r.body).expect("graphql body");
            body["variables"]["after"].clone()
        })
        .collect();
    assert_eq!(afters.len(), 3);
    assert!(afters[0].is_null());
    assert!(afters[1].is_string() && afters[2].is_string() && afters[1] != afters[2]);
}

#[test]
fn a_resolved_thread_shows_resolved_on_the_next_read() {
    let fake = FakeGithub::start();
    let h = Harness::new(fake.settings());
    let threads = h.run(h.client.review_threads(PR)).expect("threads");
    let open = &threads[2];
    assert!(!open.is_resolved);
    let resolved = h
        .run(h.client.resolve_review_thread(&open.id))
        .expect("resolve");
    assert_eq!(resolved.id, open.id);
    assert!(resolved.is_resolved);
    // Same tick: the mutation made the cached threads stale.
    let threads = h.run(h.client.review_threads(PR)).expect("threads");
    assert!(threads[2].is_resolved);
    assert_eq!(fake.threads(PR)[2]["isResolved"], true);

    let error = h
        .run(h.client.resolve_review_thread("PRRT_unknown"))
        .expect_err("unknown thread");
    assert!(error.is_not_found(), "{error:?}");
}

#[test]
fn a_failed_job_gives_its_step_and_a_log_excerpt_fetched_without_the_token() {
    let fake = FakeGithub::start();
    let h = Harness::new(fake.settings());
    let jobs = h.run(h.client.run_jobs(RUN_ID)).expect("jobs");
    assert_eq!(jobs.len(), 2);
    let failed = jobs
        .iter()
        .find(|j| j.conclusion == Some(CheckConclusion::Failure))
        .expect("failed job");
    assert_eq!(failed.id, FAILED_JOB);
    assert_eq!(failed.name, "ui-tests");
    let step = failed.failed_step().expect("failed step");
    assert_eq!(
        (step.number, step.name.as_str()),
        (5, "Run macOS UI Tests CI")
    );

    let excerpt = h
        .run(
            h.client
                .job_log_excerpt(FAILED_JOB, LogExcerptOptions::default()),
        )
        .expect("log excerpt");
    assert!(excerpt.around_error);
    let text = excerpt.text();
    assert!(
        text.contains("XCTAssertFalse failed - Tab preview still visible"),
        "{text}"
    );
    assert!(text.contains("** TEST FAILED **"));
    assert!(text.contains("##[error]Process completed with exit code 65."));
    assert!(
        !text.contains("2026-03-16T09:31:05.0472118Z"),
        "timestamps stripped"
    );

    let requests = fake.requests();
    let api = requests
        .iter()
        .find(|r| {
            r.path
                .ends_with(&format!("/actions/jobs/{FAILED_JOB}/logs"))
        })
        .expect("log request");
    assert_eq!(api.status, 302);
    let blob = requests
        .iter()
        .find(|r| r.path.starts_with("/_logs/"))
        .expect("redirect followed");
    assert_eq!(blob.authorization, None);
    assert_eq!(blob.status, 200);

    let missing = h.run(h.client.job_log(1)).expect_err("no such job");
    assert!(
        matches!(missing, GithubError::NotFound { .. }),
        "{missing:?}"
    );
}

#[test]
fn ci_is_triggered_by_a_rerun_of_failed_jobs_or_a_workflow_dispatch() {
    let fake = FakeGithub::start();
    let h = Harness::new(fake.settings());
    h.run(h.client.rerun_failed_jobs(RUN_ID)).expect("rerun");
    assert_eq!(fake.reruns(), [RUN_ID]);
    let mut inputs = serde_json::Map::new();
    inputs.insert("suite".into(), "ui".into());
    h.run(
        h.client
            .dispatch_workflow("ui-tests.yml", "fix/tab-preview-stuck", Some(&inputs)),
    )
    .expect("dispatch");
    let dispatches = fake.dispatches();
    assert_eq!(dispatches.len(), 1);
    assert_eq!(dispatches[0].workflow, "ui-tests.yml");
    assert_eq!(dispatches[0].git_ref, "fix/tab-preview-stuck");
    assert_eq!(dispatches[0].inputs["suite"], "ui");
}

#[test]
fn reviews_and_comments_are_posted_and_the_app_cannot_approve_its_own_pr() {
    let fake = FakeGithub::start();
    let h = Harness::new(fake.settings());
    let review = h
        .run(
            h.client
                .post_review(PR, "Looks right; one nit inline.", ReviewEvent::Comment),
        )
        .expect("review");
    assert_eq!(review.state, "COMMENTED");
    assert_eq!(review.body, "Looks right; one nit inline.");
    let error = h
        .run(h.client.post_review(PR, "LGTM", ReviewEvent::Approve))
        .expect_err("own PR");
    assert!(
        matches!(&error, GithubError::Http { status: 422, .. }),
        "{error:?}"
    );
    assert_eq!(fake.reviews().len(), 1);
    assert_eq!(fake.reviews()[0].event, "COMMENT");

    let comment = h
        .run(h.client.post_issue_comment(PR, "@mkowalski ready for you"))
        .expect("comment");
    assert_eq!(comment.body, "@mkowalski ready for you");
    assert_eq!(
        comment.user.as_ref().map(|u| u.login.as_str()),
        Some(BOT_LOGIN)
    );
    assert_eq!(fake.issue_comments(PR).len(), 3);
    // The write made the cached list stale: the new comment shows in the same tick.
    let comments = h.run(h.client.issue_comments(PR)).expect("comments");
    assert_eq!(comments.len(), 3);
}

#[test]
fn an_unchanged_resource_is_revalidated_with_its_etag_and_served_from_cache() {
    let fake = FakeGithub::start();
    let h = Harness::new(fake.settings());
    let first = h.run(h.client.get_pr(PR)).expect("get");
    let bytes = h.client.bytes_received();
    assert!(bytes > 1000);
    h.next_tick();
    let second = h.run(h.client.get_pr(PR)).expect("get");
    assert_eq!(first, second);
    assert_eq!(h.client.requests_sent(), 2);
    assert_eq!(h.client.bytes_received(), bytes, "a 304 has no body");

    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let etag = requests[0].header("if-none-match");
    assert_eq!(etag, None);
    assert!(requests[1]
        .header("if-none-match")
        .is_some_and(|e| e.starts_with("W/\"")));
    assert_eq!(requests[1].status, 304);
    assert_eq!(fake.rate_used(), 1, "a 304 is not counted");

    // A change on GitHub's side gives a new ETag and the new body.
    fake.add_label(PR, "executor");
    h.next_tick();
    let third = h.run(h.client.get_pr(PR)).expect("get");
    assert_eq!(third.labels.len(), 1);
    assert_eq!(fake.requests()[2].status, 200);
}

#[test]
fn lookups_within_one_tick_share_one_request() {
    let fake = FakeGithub::start();
    let h = Harness::new(fake.settings());
    for _ in 0..20 {
        let pr = h.run(h.client.get_pr(PR)).expect("get");
        assert_eq!(pr.number, PR);
        let runs = h.run(h.client.check_runs(FIRST_HEAD)).expect("check runs");
        assert_eq!(runs.runs.len(), 3);
        let threads = h.run(h.client.review_threads(PR)).expect("threads");
        assert_eq!(threads.len(), 3);
    }
    assert_eq!(h.client.requests_sent(), 3);
    assert_eq!(fake.requests().len(), 3);

    // The next tick: one conditional request each for REST (304s), one query for GraphQL.
    h.next_tick();
    for _ in 0..20 {
        h.run(h.client.get_pr(PR)).expect("get");
        h.run(h.client.check_runs(FIRST_HEAD)).expect("check runs");
        h.run(h.client.review_threads(PR)).expect("threads");
    }
    assert_eq!(h.client.requests_sent(), 6);
    let statuses: Vec<u16> = fake.requests()[3..].iter().map(|r| r.status).collect();
    assert_eq!(statuses, [304, 304, 200]);
}

#[test]
fn a_primary_rate_limit_gives_the_reset_time_and_holds_rest_calls_until_then() {
    let fake = FakeGithub::start();
    fake.fail_next(1, Fault::PrimaryRateLimit);
    let h = Harness::new(fake.settings());
    let error = h
        .run(h.client.check_runs(FIRST_HEAD))
        .expect_err("rate limited");
    let reset = Utc.timestamp_opt(FIXTURE_RESET, 0).single().expect("reset");
    assert_eq!(reset.to_rfc3339(), "2026-03-16T12:00:00+00:00");
    assert!(
        matches!(error, GithubError::RateLimited { reset_at } if reset_at == reset),
        "{error:?}"
    );
    assert!(error.is_transient());
    assert_eq!(error.retry_at(h.clock.now()), Some(reset));
    let fake_response = &fake.requests()[0];
    assert_eq!(fake_response.status, 403);

    // Until the reset, REST calls fail at once without reaching GitHub…
    h.next_tick();
    let held = h.run(h.client.get_pr(PR)).expect_err("held");
    assert!(matches!(held, GithubError::RateLimited { .. }), "{held:?}");
    assert_eq!(fake.requests().len(), 1);
    // …while GraphQL, a separate bucket, goes on.
    h.run(h.client.review_threads(PR)).expect("graphql");

    h.clock.advance(chrono::Duration::hours(3));
    let pr = h.run(h.client.get_pr(PR)).expect("after the reset");
    assert_eq!(pr.number, PR);
    let runs = h
        .run(h.client.check_runs(FIRST_HEAD))
        .expect("after the reset");
    assert_eq!(runs.runs.len(), 3);
}

#[test]
fn a_secondary_limit_gives_retry_after_and_holds_every_call_that_long() {
    let fake = FakeGithub::start();
    fake.fail_next(
        1,
        Fault::SecondaryLimit {
            status: 403,
            retry_after: Some(60),
        },
    );
    let h = Harness::new(fake.settings());
    let error = h
        .run(h.client.post_issue_comment(PR, "[STATUS:fix_ci] working"))
        .expect_err("secondary");
    assert!(
        matches!(error, GithubError::SecondaryLimit { retry_after } if retry_after == Duration::from_secs(60)),
        "{error:?}"
    );
    assert_eq!(
        error.retry_at(h.clock.now()),
        Some(start_time() + chrono::Duration::seconds(60))
    );
    assert!(fake.issue_comments(PR).len() == 2, "nothing was posted");

    h.clock.advance(chrono::Duration::seconds(30));
    let held = h.run(h.client.review_threads(PR)).expect_err("held");
    assert!(
        matches!(held, GithubError::SecondaryLimit { retry_after } if retry_after == Duration::from_secs(30)),
        "{held:?}"
    );
    assert_eq!(fake.requests().len(), 1);
    h.clock.advance(chrono::Duration::seconds(31));
    h.run(h.client.post_issue_comment(PR, "[STATUS:fix_ci] working"))
        .expect("after retry-after");

    // A 429 without retry-after: at least a minute.
    fake.fail_next(
        1,
        Fault::SecondaryLimit {
            status: 429,
            retry_after: None,
        },
    );
    let error = h.run(h.client.get_pr(PR)).expect_err("secondary");
    assert!(
        matches!(error, GithubError::SecondaryLimit { retry_after } if retry_after == Duration::from_secs(60)),
        "{error:?}"
    );
}

#[test]
fn a_502_is_a_transient_server_error_and_the_next_call_succeeds() {
    let fake = FakeGithub::start();
    fake.fail_next(1, Fault::Status(502));
    let h = Harness::new(fake.settings());
    let error = h.run(h.client.get_pr(PR)).expect_err("502");
    assert!(
        matches!(error, GithubError::Server { status: 502 }),
        "{error:?}"
    );
    assert!(error.is_transient());
    assert_eq!(error.retry_at(h.clock.now()), Some(h.clock.now()));
    let pr = h.run(h.client.get_pr(PR)).expect("next call");
    assert_eq!(pr.number, PR);
}

#[test]
fn graphql_errors_in_a_200_are_graphql_errors() {
    let fake = FakeGithub::start();
    fake.fail_next_matching("/graphql", 1, Fault::GraphQlErrors);
    let h = Harness::new(fake.settings());
    let error = h.run(h.client.review_threads(PR)).expect_err("errors");
    let GithubError::GraphQl { errors } = &error else {
        panic!("not a GraphQL error: {error:?}");
    };
    assert_eq!(errors[0].kind.as_deref(), Some("NOT_FOUND"));
    assert_eq!(
        errors[0].path,
        [
            serde_json::json!("repository"),
            serde_json::json!("pullRequest")
        ]
    );
    assert!(error.is_not_found());
    assert!(!error.is_transient());
    assert_eq!(fake.requests()[0].status, 200);
    // Errors are not cached: the next read asks again and gets the threads.
    assert_eq!(
        h.run(h.client.review_threads(PR)).expect("threads").len(),
        3
    );
}

#[test]
fn a_pr_deleted_under_the_run_is_not_found() {
    let fake = FakeGithub::start();
    fake.delete_pr(PR);
    let h = Harness::new(fake.settings());
    let error = h.run(h.client.get_pr(PR)).expect_err("deleted");
    assert!(
        matches!(&error, GithubError::NotFound { path } if path.ends_with("/pulls/1234")),
        "{error:?}"
    );
    assert!(!error.is_transient());
    assert_eq!(error.retry_at(h.clock.now()), None);
    let error = h.run(h.client.review_threads(PR)).expect_err("deleted");
    assert!(error.is_not_found(), "{error:?}");
    let error = h.run(h.client.issue_comments(PR)).expect_err("deleted");
    assert!(error.is_not_found(), "{error:?}");
}

#[test]
fn a_slow_answer_is_a_timeout() {
    let fake = FakeGithub::start();
    fake.fail_next(1, Fault::Delay(Duration::from_secs(3)));
    let options = ClientOptions {
        timeout: Duration::from_millis(300),
        ..ClientOptions::default()
    };
    let h = Harness::with_options(fake.settings(), options);
    let error = h.run(h.client.get_pr(PR)).expect_err("timeout");
    assert!(matches!(error, GithubError::Timeout), "{error:?}");
    assert!(error.is_transient());
}

#[test]
fn a_wrong_token_is_refused_with_401() {
    let fake = FakeGithub::start();
    let mut settings = fake.settings();
    settings.token = Secret::new("ghs_wrong");
    let h = Harness::new(settings);
    let error = h.run(h.client.get_pr(PR)).expect_err("401");
    assert!(
        matches!(&error, GithubError::Http { status: 401, message } if message == "Bad credentials"),
        "{error:?}"
    );
}

#[test]
fn the_token_travels_only_in_the_authorization_header() {
    let fake = FakeGithub::start();
    let settings = fake.settings();
    let h = Harness::new(settings.clone());
    let mut shown = vec![format!("{settings:?}"), format!("{:?}", h.client)];
    let mut note = |result: Result<(), GithubError>| {
        if let Err(error) = result {
            shown.push(format!("{error} / {error:?}"));
        }
    };

    note(
        h.run(h.client.create_draft_pr(&NewPullRequest {
            head: "fix/other".into(),
            ..new_pr()
        }))
        .map(drop),
    );
    note(h.run(h.client.add_labels(PR, &["executor"])).map(drop));
    note(h.run(h.client.post_issue_comment(PR, "hello")).map(drop));
    note(h.run(h.client.job_log(FAILED_JOB)).map(drop));
    note(
        h.run(h.client.post_review(PR, "LGTM", ReviewEvent::Approve))
            .map(drop),
    );
    for fault in [
        Fault::PrimaryRateLimitUntil(0),
        Fault::SecondaryLimit {
            status: 429,
            retry_after: Some(0),
        },
        Fault::Status(502),
        Fault::GraphQlErrors,
    ] {
        fake.fail_next(1, fault);
        note(h.run(h.client.review_threads(PR)).map(drop));
        h.next_tick();
    }
    fake.delete_pr(PR);
    note(h.run(h.client.get_pr(PR)).map(drop));
    assert!(shown.len() >= 8, "{shown:#?}");
    for text in &shown {
        assert!(!text.contains(TOKEN), "the token leaked: {text}");
    }

    let requests = fake.requests();
    assert!(requests.len() >= 10);
    for request in &requests {
        let everything_else = format!(
            "{} {} {} {:?}",
            request.path, request.query, request.body, request.headers
        );
        assert!(
            !everything_else.contains(TOKEN),
            "the token leaked: {request:?}"
        );
        if request.path.starts_with("/_logs/") {
            assert_eq!(request.authorization, None);
        } else {
            assert_eq!(
                request.authorization.as_deref(),
                Some(format!("Bearer {TOKEN}").as_str())
            );
            assert_eq!(
                request.header("accept"),
                Some("application/vnd.github+json")
            );
            assert_eq!(request.header("x-github-api-version"), Some("2022-11-28"));
            assert!(request
                .header("user-agent")
                .is_some_and(|ua| ua.starts_with("executor/")));
        }
    }
}

#[test]
fn an_unreachable_github_is_a_transient_transport_error() {
    let port = std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let settings = GithubSettings {
        api_base: url::Url::parse(&format!("http://127.0.0.1:{port}/")).expect("url"),
        owner: "mkowalski".into(),
        repo: "lumen-browser".into(),
        token: Secret::new(TOKEN),
    };
    let h = Harness::new(settings);
    let error = h.run(h.client.get_pr(PR)).expect_err("refused");
    assert!(
        matches!(&error, GithubError::Transport { message } if message.to_lowercase().contains("refused")),
        "{error:?}"
    );
    assert!(error.is_transient());
    assert!(!format!("{error:?}").contains(TOKEN));
}

#[test]
fn a_huge_retry_after_or_rate_limit_reset_is_capped_and_never_panics() {
    let day = chrono::Duration::hours(24);
    for retry_after in [99_999_999_999, u64::MAX] {
        let fake = FakeGithub::start();
        fake.fail_next(
            1,
            Fault::SecondaryLimit {
                status: 403,
                retry_after: Some(retry_after),
            },
        );
        let h = Harness::new(fake.settings());
        let error = h.run(h.client.get_pr(PR)).expect_err("limited");
        assert!(error.is_transient(), "{error:?}");
        let at = error.retry_at(h.clock.now()).expect("a time to retry");
        assert_eq!(at, start_time() + day, "{error:?}");
        // Held, without reaching GitHub, until the cap and no longer.
        h.clock.advance(chrono::Duration::hours(1));
        let held = h.run(h.client.get_pr(PR)).expect_err("held");
        assert_eq!(held.retry_at(h.clock.now()), Some(start_time() + day));
        assert_eq!(fake.requests().len(), 1);
        h.clock.advance(day);
        h.run(h.client.get_pr(PR)).expect("after the cap");
    }

    // A reset thousands of years (or past any calendar) away is held a day at most.
    for reset in [99_999_999_999_i64, i64::MAX] {
        let fake = FakeGithub::start();
        fake.fail_next(1, Fault::PrimaryRateLimitUntil(reset));
        let h = Harness::new(fake.settings());
        let error = h.run(h.client.get_pr(PR)).expect_err("limited");
        assert!(error.is_transient(), "{error:?}");
        assert_eq!(
            error.retry_at(h.clock.now()),
            Some(start_time() + day),
            "{error:?}"
        );
        h.clock.advance(day + chrono::Duration::seconds(1));
        h.run(h.client.get_pr(PR)).expect("after the cap");
    }
}

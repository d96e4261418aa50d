//! Many PRs looked at together against the fake GitHub: what a tick over many open PRs
//! costs in requests, that the batched look sees what the one-PR look sees, and how an
//! error about one PR, about the repository or about the whole request reaches each PR.

use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use executor::core::clock::ManualClock;
use executor::core::pr::{PrConfig, PrMemory, PrObservation};
use executor::forge::github::{
    observe, observe_many, ClientOptions, GithubClient, GithubError, GithubSettings, Look,
    NewPullRequest, PRS_PER_QUERY,
};

use crate::fake_github::{Ci, FakeGithub, Fault, FIRST_HEAD, FIX_HEAD, OWNER, PR};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 16, 11, 0, 0)
        .single()
        .expect("a valid time")
}

fn config() -> PrConfig {
    PrConfig {
        executor_logins: vec!["lumen-executor[bot]".into()],
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
    fn on(fake: FakeGithub) -> Self {
        Self::with_settings(fake.settings(), fake)
    }

    fn with_settings(settings: GithubSettings, fake: FakeGithub) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("client runtime");
        let clock = Arc::new(ManualClock::new(now()));
        let client = GithubClient::with_options(settings, ClientOptions::default(), clock.clone())
            .expect("client");
        Self {
            runtime,
            client,
            clock,
            fake,
        }
    }

    /// `count` open draft PRs, each on its own head with CI running; their numbers.
    fn open_prs(&self, count: u64) -> Vec<u64> {
        let mut numbers = Vec::new();
        for n in 0..count {
            let pr = self
                .runtime
                .block_on(self.client.create_draft_pr(&NewPullRequest {
                    title: format!("Task {n}"),
                    head: format!("executor/T-{n}"),
                    base: "main".into(),
                    body: String::new(),
                }))
                .expect("open a PR on the fake");
            let sha = format!("{:040x}", n + 1);
            self.fake.set_pr_head(pr.number, &sha);
            self.fake.set_ci(&sha, Ci::InProgress);
            numbers.push(pr.number);
        }
        numbers
    }

    fn look_at(&self, numbers: &[u64]) -> Vec<Result<PrObservation, GithubError>> {
        let memory = PrMemory::default();
        let looks: Vec<Look<'_>> = numbers
            .iter()
            .map(|number| Look {
                number: *number,
                memory: &memory,
                worker_running: false,
            })
            .collect();
        self.runtime
            .block_on(observe_many(&self.client, &looks, &config(), now()))
    }

    fn graphql_requests(&self) -> usize {
        self.fake
            .requests()
            .iter()
            .filter(|r| r.path == "/graphql")
            .count()
    }
}

#[test]
fn a_tick_over_many_prs_costs_one_request_per_twenty_and_none_within_the_ttl() {
    let h = Harness::on(FakeGithub::start_empty());
    let numbers = h.open_prs(45);
    let before = h.client.requests_sent();
    let seen = h.look_at(&numbers);
    let sent = h.client.requests_sent() - before;
    assert_eq!(
        sent,
        45_u64.div_ceil(PRS_PER_QUERY as u64),
        "three queries for 45 PRs"
    );
    assert_eq!(seen.len(), 45);
    for (number, obs) in numbers.iter().zip(&seen) {
        let obs = obs.as_ref().unwrap_or_else(|e| panic!("PR {number}: {e}"));
        assert_eq!(obs.checks.len(), 2, "PR {number}: the fixture's two checks");
        assert!(obs.ci_run_exists);
    }

    // Within the TTL the same look is free; after it, the same three queries again.
    let again = h.look_at(&numbers);
    assert_eq!(h.client.requests_sent() - before, sent);
    assert_eq!(
        seen.iter().map(|r| r.as_ref().ok()).collect::<Vec<_>>(),
        again.iter().map(|r| r.as_ref().ok()).collect::<Vec<_>>()
    );
    h.clock.advance(Duration::seconds(11));
    h.look_at(&numbers);
    assert_eq!(h.client.requests_sent() - before, 2 * sent);
}

#[test]
fn the_batched_look_sees_what_the_one_pr_look_sees() {
    for ci in [Ci::InProgress, Ci::Failed, Ci::Success] {
        let h = Harness::on(FakeGithub::start());
        h.fake.set_ci(FIRST_HEAD, ci);
        h.fake
            .add_owner_comment(PR, "Please also check the pinned tabs.");
        let memory = PrMemory::default();
        let one = h
            .runtime
            .block_on(observe(&h.client, PR, &config(), &memory, now(), false))
            .expect("the one-PR look");
        let many = h
            .look_at(&[PR])
            .pop()
            .expect("one answer")
            .expect("the batched look");
        assert_eq!(many.state, one.state, "{ci:?}");
        assert_eq!(many.draft, one.draft);
        assert_eq!(many.mergeable, one.mergeable);
        assert_eq!(many.head_sha, one.head_sha);
        assert_eq!(many.labels, one.labels);
        assert_eq!(many.checks, one.checks, "{ci:?}: checks, steps and logs");
        assert_eq!(many.threads, one.threads);
        // The fixtures' REST review comments are a sample of the threads' comments, so the
        // batched look (which reads the owner's review comments from the threads) sees those
        // and the rest of the owner's thread comments.
        let owner_thread_comments: Vec<u64> = h
            .fake
            .threads(PR)
            .iter()
            .flat_map(|t| {
                t["comments"]["nodes"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter(|c| c["author"]["login"] == OWNER)
            .filter_map(|c| c["databaseId"].as_u64())
            .collect();
        let owner_many = many.owner_comments.clone();
        for comment in &one.owner_comments {
            assert!(
                owner_many.contains(comment),
                "{comment:?} in {owner_many:?}"
            );
        }
        for comment in &owner_many {
            assert!(
                one.owner_comments.contains(comment) || owner_thread_comments.contains(&comment.id),
                "{comment:?} is not the owner's"
            );
        }
        assert!(!owner_many.is_empty());
    }
}

#[test]
fn a_deleted_pr_among_many_is_gone_alone() {
    let h = Harness::on(FakeGithub::start_empty());
    let numbers = h.open_prs(3);
    h.fake.delete_pr(numbers[1]);
    let seen = h.look_at(&numbers);
    assert!(seen[0].is_ok(), "{:?}", seen[0]);
    let gone = seen[1].as_ref().expect_err("deleted");
    assert!(gone.is_not_found(), "{gone:?}");
    assert!(seen[2].is_ok(), "{:?}", seen[2]);
    assert_eq!(h.graphql_requests(), 1);
}

#[test]
fn a_repository_the_token_cannot_see_ends_no_pr() {
    let fake = FakeGithub::start_empty();
    let numbers = {
        let h = Harness::on(FakeGithub::start_empty());
        h.open_prs(2)
    };
    let mut settings = fake.settings();
    settings.repo = "not-this-one".into();
    let h = Harness::with_settings(settings, fake);
    for seen in h.look_at(&numbers) {
        let error = seen.expect_err("no such repository");
        assert!(!error.is_not_found(), "{error:?} must not end the run");
        assert!(error.to_string().contains("NOT_FOUND"), "{error}");
    }
}

#[test]
fn a_graphql_errors_answer_or_a_failed_request_reaches_every_pr_and_ends_none() {
    let faults = [
        Fault::GraphQlErrors,
        Fault::Status(502),
        Fault::SecondaryLimit {
            status: 429,
            retry_after: Some(30),
        },
    ];
    for fault in faults {
        let h = Harness::on(FakeGithub::start_empty());
        let numbers = h.open_prs(2);
        h.fake.fail_next(1, fault.clone());
        for seen in h.look_at(&numbers) {
            let error = seen.expect_err("the request failed");
            assert!(!error.is_not_found(), "{fault:?}: {error:?}");
        }
        // The next tick sees every PR again.
        h.clock.advance(Duration::seconds(61));
        for seen in h.look_at(&numbers) {
            seen.unwrap_or_else(|e| panic!("{fault:?}, then: {e}"));
        }
    }
}

#[test]
fn a_pr_with_more_checks_or_threads_than_one_query_reads_is_read_whole() {
    let h = Harness::on(FakeGithub::start());
    h.fake.set_pr_head(PR, FIX_HEAD);
    h.fake.set_threads_page_size(2);
    let before = h.client.requests_sent();
    let obs = h.look_at(&[PR]).pop().expect("one answer").expect("the PR");
    assert_eq!(obs.threads.len(), 3, "all of the fixtures' threads");
    let sent = h.client.requests_sent() - before;
    assert!(sent > 1, "the batch, then the PR alone: {sent}");

    let h = Harness::on(FakeGithub::start());
    h.fake.set_max_per_page(1);
    let obs = h.look_at(&[PR]).pop().expect("one answer").expect("the PR");
    assert_eq!(obs.checks.len(), 3, "all of the failed head's checks");
}

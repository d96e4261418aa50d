//! GitHub issues as a work source against the fake GitHub: labelled issues read over every
//! page, pull requests and unlabelled issues left out, any of the labels, conversion to a
//! queue task with its facts, incremental polls with `since`, closings, `304`s that cost no
//! rate, and failures as typed errors.

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use executor::core::clock::ManualClock;
use executor::core::facts::TaskFacts;
use executor::core::queue::QueueStatus;
use executor::forge::github::{
    ClientOptions, GithubClient, GithubError, GithubSettings, IssueQuery, IssueStateFilter, Secret,
};
use executor::sources::github_issues::{poll, GithubIssuesScope, Polled, SOURCE};

use crate::fake_github::{FakeGithub, Fault, ISSUES_EPOCH, OWNER, PR, REPO, TOKEN};

struct Harness {
    runtime: tokio::runtime::Runtime,
    client: GithubClient,
    clock: Arc<ManualClock>,
}

impl Harness {
    fn new(settings: GithubSettings) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("client runtime");
        let start = Utc
            .with_ymd_and_hms(2026, 3, 16, 9, 0, 0)
            .single()
            .expect("start time");
        let clock = Arc::new(ManualClock::new(start));
        let client = GithubClient::with_options(settings, ClientOptions::default(), clock.clone())
            .expect("client");
        Self {
            runtime,
            client,
            clock,
        }
    }

    fn run<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    fn poll(
        &self,
        scope: &GithubIssuesScope,
        since: Option<DateTime<Utc>>,
    ) -> Result<Polled, GithubError> {
        self.run(poll(&self.client, scope, since))
    }

    /// Past the response cache's 10 s TTL: the next poll asks GitHub again.
    fn next_tick(&self) {
        self.clock.advance(Duration::seconds(11));
    }
}

fn labels(names: &[&str]) -> GithubIssuesScope {
    GithubIssuesScope {
        labels: names.iter().map(|n| (*n).to_owned()).collect(),
        include_closed: false,
    }
}

fn numbers(polled: &Polled) -> Vec<String> {
    polled
        .tasks
        .iter()
        .map(|(t, _)| t.task_gid.clone())
        .collect()
}

fn gid(number: u64) -> String {
    format!("gh:{OWNER}:{REPO}#{number}")
}

/// The fake's issue clock after `changes` changes.
fn issue_time(changes: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(ISSUES_EPOCH)
        .expect("epoch")
        .with_timezone(&Utc)
        + Duration::seconds(changes)
}

/// The queries of the issue-list requests so far.
fn issue_queries(fake: &FakeGithub) -> Vec<String> {
    fake.requests()
        .iter()
        .filter(|r| r.path == format!("/repos/{OWNER}/{REPO}/issues"))
        .map(|r| r.query.clone())
        .collect()
}

#[test]
fn a_labelled_set_is_read_over_every_page_and_unlabelled_issues_stay_out() {
    let fake = FakeGithub::start_empty();
    fake.set_max_per_page(2);
    let mut labelled = Vec::new();
    for i in 0..5 {
        if i == 2 {
            fake.add_issue("Unlabelled", "", &[], None);
            fake.add_issue("Another label", "", &["wontfix"], None);
        }
        labelled.push(fake.add_issue(&format!("Labelled {i}"), "Body.", &["executor"], None));
    }
    let h = Harness::new(fake.settings());

    let polled = h.poll(&labels(&["executor"]), None).expect("poll");
    let expected: Vec<String> = labelled.iter().map(|n| gid(*n)).collect();
    assert_eq!(numbers(&polled), expected, "oldest change first, each once");
    assert_eq!(polled.newest_change, Some(issue_time(7)));

    let queries = issue_queries(&fake);
    assert_eq!(
        queries.len(),
        3,
        "five issues over pages of two: {queries:?}"
    );
    assert_eq!(
        queries[0],
        "state=open&labels=executor&per_page=100&sort=updated&direction=asc"
    );
    for (i, page) in queries[1..].iter().enumerate() {
        assert!(
            page.contains("labels=executor")
                && page.contains("state=open")
                && page.ends_with(&format!("per_page=2&page={}", i + 2)),
            "{page}"
        );
    }
    assert_eq!(h.client.requests_sent(), 3);
}

#[test]
fn pull_requests_in_the_issue_list_are_left_out() {
    let fake = FakeGithub::start();
    fake.add_label(PR, "executor");
    let issue = fake.add_issue("Tab preview stuck", "", &["executor"], None);
    let h = Harness::new(fake.settings());

    // GitHub's answer holds the PR, marked by its `pull_request` key.
    let raw: Vec<serde_json::Value> = h.run(async {
        reqwest::Client::new()
            .get(format!(
                "{}repos/{OWNER}/{REPO}/issues?labels=executor",
                fake.url()
            ))
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("user-agent", "test")
            .send()
            .await
            .expect("raw list")
            .json()
            .await
            .expect("raw list body")
    });
    let marked: Vec<(u64, bool)> = raw
        .iter()
        .map(|item| {
            (
                item["number"].as_u64().unwrap_or(0),
                item.get("pull_request").is_some(),
            )
        })
        .collect();
    assert_eq!(marked, [(PR, true), (issue, false)]);

    let query = IssueQuery {
        labels: vec!["executor".into()],
        ..IssueQuery::default()
    };
    let listed = h.run(h.client.list_issues(&query)).expect("list");
    let listed: Vec<u64> = listed.iter().map(|i| i.number).collect();
    assert_eq!(listed, [issue]);
    let polled = h.poll(&labels(&["executor"]), None).expect("poll");
    assert_eq!(numbers(&polled), [gid(issue)]);
}

#[test]
fn an_issue_carrying_any_of_the_labels_comes_and_comes_once() {
    let fake = FakeGithub::start_empty();
    let both = fake.add_issue("Both", "", &["executor", "agent"], None);
    let first = fake.add_issue("First only", "", &["executor"], None);
    let second = fake.add_issue("Second only", "", &["Agent"], None);
    fake.add_issue("Neither", "", &["wontfix"], None);
    let h = Harness::new(fake.settings());

    let polled = h
        .poll(&labels(&["executor", "agent", "EXECUTOR"]), None)
        .expect("poll");
    assert_eq!(numbers(&polled), [gid(both), gid(first), gid(second)]);
    let queries = issue_queries(&fake);
    assert_eq!(
        queries.len(),
        2,
        "one request per label, repeats asked once"
    );
    assert!(queries[0].contains("labels=executor&"), "{}", queries[0]);
    assert!(queries[1].contains("labels=agent&"), "{}", queries[1]);
}

#[test]
fn an_issue_converts_to_a_pending_task_with_its_gid_description_and_facts() {
    let fake = FakeGithub::start_empty();
    let number = fake.add_issue(
        "Reader mode drops srcset-only images",
        "Open a page whose images have only `srcset`.\r\n\r\nThey are missing in reader mode.",
        &["executor", "macOS"],
        Some(OWNER),
    );
    let h = Harness::new(fake.settings());

    let polled = h.poll(&labels(&["executor"]), None).expect("poll");
    assert_eq!(polled.tasks.len(), 1);
    let (task, facts) = &polled.tasks[0];
    assert_eq!(task.task_gid, "gh:mkowalski:lumen-browser#1");
    assert_eq!(number, 1);
    assert_eq!(task.source, SOURCE);
    assert_eq!(task.initial_status, QueueStatus::Pending);
    assert_eq!(
        task.description,
        "# Reader mode drops srcset-only images\n\n\
         Open a page whose images have only `srcset`.\r\n\r\nThey are missing in reader mode."
    );
    assert_eq!(
        *facts,
        TaskFacts {
            assignee: Some(OWNER.into()),
            assignee_id: Some("5120387".into()),
            closed: false,
            labels: vec!["executor".into(), "macOS".into()],
            location: Some(format!("{OWNER}/{REPO}")),
            url: Some(format!("https://github.com/{OWNER}/{REPO}/issues/1")),
            modified_at: Some(issue_time(1)),
        }
    );
}

#[test]
fn an_incremental_poll_after_an_edit_returns_only_that_issue() {
    let fake = FakeGithub::start_empty();
    let scope = labels(&["executor"]);
    let numbers_added: Vec<u64> = (0..3)
        .map(|i| fake.add_issue(&format!("Issue {i}"), "First text.", &["executor"], None))
        .collect();
    let h = Harness::new(fake.settings());
    let first = h.poll(&scope, None).expect("first poll");
    assert_eq!(first.tasks.len(), 3);
    let since = first.next_since(None);
    assert_eq!(since, Some(issue_time(3)));

    fake.edit_issue_body(numbers_added[1], "Second text.");
    h.next_tick();
    let second = h.poll(&scope, since).expect("second poll");
    assert_eq!(numbers(&second), [gid(numbers_added[1])]);
    assert!(second.tasks[0].0.description.ends_with("\n\nSecond text."));
    assert_eq!(second.next_since(since), Some(issue_time(4)));
    let last = issue_queries(&fake).pop().unwrap_or_default();
    assert_eq!(
        last,
        "state=all&labels=executor&since=2026-03-16T08%3A00%3A03Z&per_page=100&sort=updated&direction=asc"
    );
}

#[test]
fn a_closed_issue_comes_back_closed_and_the_first_read_takes_closed_ones_only_when_asked() {
    let fake = FakeGithub::start_empty();
    let done = fake.add_issue("Done long ago", "", &["executor"], None);
    fake.close_issue(done);
    let open = fake.add_issue("Still open", "", &["executor"], None);
    let h = Harness::new(fake.settings());

    let first = h.poll(&labels(&["executor"]), None).expect("first poll");
    assert_eq!(numbers(&first), [gid(open)]);
    let with_closed = GithubIssuesScope {
        include_closed: true,
        ..labels(&["executor"])
    };
    let everything = h.poll(&with_closed, None).expect("first poll, closed too");
    assert_eq!(numbers(&everything), [gid(done), gid(open)]);
    assert!(everything.tasks[0].1.closed);

    fake.close_issue(open);
    h.next_tick();
    let since = first.next_since(None);
    let later = h.poll(&labels(&["executor"]), since).expect("later poll");
    assert_eq!(numbers(&later), [gid(open)]);
    assert!(later.tasks[0].1.closed, "closed upstream comes back closed");
    assert_eq!(
        fake.issue(open).expect("issue")["state_reason"],
        "completed"
    );
}

#[test]
fn an_unchanged_poll_is_answered_304_and_costs_no_rate() {
    let fake = FakeGithub::start_empty();
    fake.set_max_per_page(2);
    for i in 0..3 {
        fake.add_issue(&format!("Issue {i}"), "", &["executor"], None);
    }
    let scope = labels(&["executor"]);
    let h = Harness::new(fake.settings());
    let first = h.poll(&scope, None).expect("first poll");
    let since = first.next_since(None);
    let second = h.poll(&scope, since).expect("second poll");
    assert!(second.tasks.is_empty());
    let rate = fake.rate_used();
    let bytes = h.client.bytes_received();
    let sent = h.client.requests_sent();

    // Within the TTL nothing is sent at all.
    let third = h
        .poll(&scope, second.next_since(since))
        .expect("third poll");
    assert!(third.tasks.is_empty());
    assert_eq!(h.client.requests_sent(), sent);

    // The next tick revalidates: a 304, not counted, no body.
    h.next_tick();
    let fourth = h
        .poll(&scope, second.next_since(since))
        .expect("fourth poll");
    assert!(fourth.tasks.is_empty());
    assert_eq!(h.client.requests_sent(), sent + 1);
    assert_eq!(fake.requests().last().map(|r| r.status), Some(304));
    assert_eq!(fake.rate_used(), rate, "a 304 is not counted");
    assert_eq!(h.client.bytes_received(), bytes);

    // The same for a first read over two pages: two 304s, the same tasks.
    let again = h.poll(&scope, None).expect("first read again");
    assert_eq!(again, first);
    let statuses: Vec<u16> = fake
        .requests()
        .iter()
        .rev()
        .take(2)
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [304, 304]);
    assert_eq!(fake.rate_used(), rate);
}

#[test]
fn a_wrong_token_is_401_and_a_repository_not_there_is_404() {
    let fake = FakeGithub::start_empty();
    fake.add_issue("Issue", "", &["executor"], None);
    let scope = labels(&["executor"]);

    let mut settings = fake.settings();
    settings.token = Secret::new("ghs_wrong");
    let h = Harness::new(settings);
    let error = h.poll(&scope, None).expect_err("401");
    assert!(
        matches!(&error, GithubError::Http { status: 401, message } if message == "Bad credentials"),
        "{error:?}"
    );
    assert!(!error.is_transient());

    let mut settings = fake.settings();
    settings.repo = "no-such-repo".into();
    let h = Harness::new(settings);
    let error = h.poll(&scope, None).expect_err("404");
    assert!(
        matches!(&error, GithubError::NotFound { path } if path == "/repos/mkowalski/no-such-repo/issues"),
        "{error:?}"
    );
    assert!(error.is_not_found());
}

#[test]
fn a_poll_failing_on_any_label_fails_whole_and_may_be_retried() {
    let fake = FakeGithub::start_empty();
    fake.add_issue("Issue", "", &["executor", "agent"], None);
    fake.fail_next_matching("/issues", 1, Fault::Status(502));
    let h = Harness::new(fake.settings());
    let scope = labels(&["executor", "agent"]);
    let error = h.poll(&scope, None).expect_err("502");
    assert!(
        matches!(error, GithubError::Server { status: 502 }),
        "{error:?}"
    );
    assert!(error.is_transient());
    let polled = h.poll(&scope, None).expect("retry");
    assert_eq!(polled.tasks.len(), 1);
}

#[test]
fn a_scope_without_labels_is_refused_before_any_request() {
    let fake = FakeGithub::start_empty();
    let h = Harness::new(fake.settings());
    let error = h.poll(&labels(&[]), None).expect_err("no labels");
    assert!(matches!(error, GithubError::Settings(_)), "{error:?}");
    let query = IssueQuery {
        state: IssueStateFilter::All,
        labels: vec!["a,b".into()],
        since: None,
    };
    let error = h.run(h.client.list_issues(&query)).expect_err("comma");
    assert!(matches!(error, GithubError::Settings(_)), "{error:?}");
    assert!(fake.requests().is_empty());
}

//! The issue Source port's conformance cases, run against every labelled-issues adapter
//! (GitHub issues and Gitea issues, each against its fake) through the intake the binary
//! polls ([`SourceIntake`]) into a real SQLite store: labelled issues come in once (others
//! and pull requests left out), an edit upstream is taken on the next poll, an issue closed
//! before it was ever seen open never enters the queue, one closed after intake has its
//! task skipped, a 429's `Retry-After` keeps the source from being polled before it ends,
//! and a 5xx loses nothing (the next poll takes the issues in).
//!
//! A new adapter joins by implementing [`Adapter`] for its fake and being listed in
//! [`adapters`].

use std::time::{Duration, Instant};

use executor::core::clock::SystemClock;
use executor::core::queue::QueueStatus;
use executor::ops::source_intake::{Polling, SourceIntake, SourceReport};
use executor::sources::labelled_issues::IssueLabels;
use executor::store::sqlite::SqliteStore;
use executor::store::Store;

use crate::{fake_gitea, fake_github};

/// What a case needs of an adapter's fake.
trait Adapter {
    fn name(&self) -> &'static str;
    /// The intake of the fake's repository, taking issues labelled `executor`.
    fn intake(&self) -> SourceIntake;
    /// A new open issue carrying `labels`; answers its number.
    fn add_issue(&self, title: &str, labels: &[&str]) -> u64;
    /// A new open pull request labelled `executor`.
    fn add_pull(&self, title: &str);
    fn close(&self, number: u64);
    fn edit_body(&self, number: u64, body: &str);
    fn rate_limit_next(&self, seconds: u64);
    fn fail_next_with_502(&self);
    fn requests_sent(&self) -> usize;
    fn gid(&self, number: u64) -> String;
}

fn scope() -> IssueLabels {
    IssueLabels {
        labels: vec!["executor".into()],
        include_closed: false,
    }
}

struct Github(fake_github::FakeGithub);

impl Adapter for Github {
    fn name(&self) -> &'static str {
        "GitHub issues"
    }
    fn intake(&self) -> SourceIntake {
        // No response cache: polls of a case follow each other within its 10 s, which in
        // use only delays an edit by at most that.
        let options = executor::forge::github::ClientOptions {
            cache_ttl: Duration::ZERO,
            ..Default::default()
        };
        let clock = std::sync::Arc::new(SystemClock);
        let client =
            executor::forge::github::GithubClient::with_options(self.0.settings(), options, clock)
                .expect("client");
        SourceIntake::new(
            Polling::GithubIssues {
                client,
                scope: scope(),
            },
            Duration::from_millis(1),
        )
    }
    fn add_issue(&self, title: &str, labels: &[&str]) -> u64 {
        self.0.add_issue(title, "Steps: hover.", labels, None)
    }
    fn add_pull(&self, title: &str) {
        // Opened as a run opens one, then labelled: GitHub's issues list shows it too.
        let client = executor::forge::github::GithubClient::new(self.0.settings()).expect("client");
        let pr = executor::forge::github::NewPullRequest {
            title: title.into(),
            head: "executor/pull".into(),
            base: "main".into(),
            body: String::new(),
        };
        let opened = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(client.create_draft_pr(&pr))
            .expect("a PR");
        self.0.add_label(opened.number, "executor");
    }
    fn close(&self, number: u64) {
        self.0.close_issue(number);
    }
    fn edit_body(&self, number: u64, body: &str) {
        self.0.edit_issue_body(number, body);
    }
    fn rate_limit_next(&self, seconds: u64) {
        self.0.fail_next(
            1,
            fake_github::Fault::SecondaryLimit {
                status: 429,
                retry_after: Some(seconds),
            },
        );
    }
    fn fail_next_with_502(&self) {
        self.0.fail_next(1, fake_github::Fault::Status(502));
    }
    fn requests_sent(&self) -> usize {
        self.0.requests().len()
    }
    fn gid(&self, number: u64) -> String {
        executor::sources::github_issues::task_gid(
            &format!("{}/{}", fake_github::OWNER, fake_github::REPO),
            number,
        )
    }
}

struct Gitea(fake_gitea::FakeGitea);

impl Adapter for Gitea {
    fn name(&self) -> &'static str {
        "Gitea issues"
    }
    fn intake(&self) -> SourceIntake {
        SourceIntake::new(
            Polling::GiteaIssues {
                client: self.0.client(),
                owner: fake_gitea::OWNER.into(),
                repo: fake_gitea::REPO.into(),
                scope: scope(),
            },
            Duration::from_millis(1),
        )
    }
    fn add_issue(&self, title: &str, labels: &[&str]) -> u64 {
        self.0.add_issue(title, "Steps: hover.", labels)
    }
    fn add_pull(&self, title: &str) {
        self.0.add_issue_in(
            fake_gitea::OWNER,
            fake_gitea::REPO,
            fake_gitea::IssueSeed::new(title, "", &["executor"]).pull(),
        );
    }
    fn close(&self, number: u64) {
        self.0.close(number);
    }
    fn edit_body(&self, number: u64, body: &str) {
        self.0.edit_body(number, body);
    }
    fn rate_limit_next(&self, seconds: u64) {
        self.0.fail_next(
            1,
            fake_gitea::Fault::RateLimited {
                retry_after: seconds,
            },
        );
    }
    fn fail_next_with_502(&self) {
        self.0.fail_next(1, fake_gitea::Fault::Status(502));
    }
    fn requests_sent(&self) -> usize {
        self.0.requests().len()
    }
    fn gid(&self, number: u64) -> String {
        executor::sources::gitea_issues::task_gid(
            &format!("{}/{}", fake_gitea::OWNER, fake_gitea::REPO),
            number,
        )
    }
}

/// Every adapter of the port, each on a fresh fake.
fn adapters() -> Vec<Box<dyn Adapter>> {
    vec![
        Box::new(Github(fake_github::FakeGithub::start_empty())),
        Box::new(Gitea(fake_gitea::FakeGitea::start())),
    ]
}

/// An intake polling into its own SQLite store.
struct Intake {
    runtime: tokio::runtime::Runtime,
    store: SqliteStore,
    source: SourceIntake,
    name: &'static str,
    _dir: tempfile::TempDir,
}

impl Intake {
    fn of(adapter: &dyn Adapter) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let dir = tempfile::tempdir().expect("temp dir");
        let store = runtime
            .block_on(SqliteStore::open(&dir.path().join("executor.db")))
            .expect("store");
        Self {
            runtime,
            store,
            source: adapter.intake(),
            name: adapter.name(),
            _dir: dir,
        }
    }

    fn poll(&mut self) -> SourceReport {
        let name = self.name;
        self.runtime
            .block_on(self.source.poll(&self.store, &SystemClock))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn status(&self, gid: &str) -> Option<QueueStatus> {
        self.runtime
            .block_on(self.store.task(gid))
            .expect("read the task")
            .map(|t| t.status)
    }
}

#[test]
fn labelled_issues_come_in_once_and_an_edit_is_taken_on_the_next_poll() {
    for fake in adapters() {
        let wanted = fake.add_issue("Tab preview sticks", &["executor", "bug"]);
        let other = fake.add_issue("Not for agents", &["bug"]);
        fake.add_pull("Fix the strip");
        let mut intake = Intake::of(fake.as_ref());
        let first = intake.poll();
        assert_eq!(first.created, 1, "{}: {first:?}", fake.name());
        assert_eq!(
            intake.status(&fake.gid(wanted)),
            Some(QueueStatus::Pending),
            "{}",
            fake.name()
        );
        assert_eq!(intake.status(&fake.gid(other)), None, "{}", fake.name());

        let again = intake.poll();
        assert_eq!(again.created, 0, "{}: {again:?}", fake.name());

        fake.edit_body(wanted, "Steps: hover, then leave.");
        let edited = intake.poll();
        assert_eq!(edited.updated, 1, "{}: {edited:?}", fake.name());
        let task = intake
            .runtime
            .block_on(intake.store.task(&fake.gid(wanted)))
            .expect("read")
            .expect("the task");
        let description = task.description.unwrap_or_default();
        assert!(
            description.contains("then leave"),
            "{}: {description}",
            fake.name()
        );
    }
}

#[test]
fn an_issue_closed_before_it_was_seen_never_comes_in_and_one_closed_after_is_skipped() {
    for fake in adapters() {
        let seen = fake.add_issue("Seen open", &["executor"]);
        let closed_early = fake.add_issue("Closed early", &["executor"]);
        fake.close(closed_early);
        let mut intake = Intake::of(fake.as_ref());
        intake.poll();
        // Touched later (a comment, an edit): the incremental read brings it back, closed.
        fake.edit_body(closed_early, "Done elsewhere.");
        fake.close(seen);
        let report = intake.poll();
        assert_eq!(
            intake.status(&fake.gid(closed_early)),
            None,
            "{}: {report:?}",
            fake.name()
        );
        assert_eq!(
            intake.status(&fake.gid(seen)),
            Some(QueueStatus::Skip),
            "{}: {report:?}",
            fake.name()
        );
        assert_eq!(report.closed, 1, "{}: {report:?}", fake.name());
    }
}

#[test]
fn a_429_keeps_the_source_unpolled_until_its_retry_after_ends() {
    for fake in adapters() {
        fake.add_issue("Tab preview sticks", &["executor"]);
        let mut intake = Intake::of(fake.as_ref());
        fake.rate_limit_next(20);
        let error = intake
            .runtime
            .block_on(intake.source.poll(&intake.store, &SystemClock))
            .expect_err("429");
        let wait = error
            .wait()
            .unwrap_or_else(|| panic!("{}: no wait said: {error}", fake.name()));
        assert!(
            wait >= Duration::from_secs(19) && wait <= Duration::from_secs(20),
            "{}: {wait:?}",
            fake.name()
        );
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !intake.source.due(),
            "{}: due again within the wait",
            fake.name()
        );
        assert!(intake
            .source
            .due_at(Instant::now() + Duration::from_secs(21)));
        // Polled anyway (a caller that does not ask whether it is due): nothing is sent.
        let sent = fake.requests_sent();
        let again = intake
            .runtime
            .block_on(intake.source.poll(&intake.store, &SystemClock));
        assert!(again.is_err(), "{}: polled within the wait", fake.name());
        assert_eq!(
            fake.requests_sent(),
            sent,
            "{}: a request went out within the wait",
            fake.name()
        );
    }
}

#[test]
fn a_5xx_loses_nothing_the_next_poll_takes_the_issues_in() {
    for fake in adapters() {
        let number = fake.add_issue("Tab preview sticks", &["executor"]);
        let mut intake = Intake::of(fake.as_ref());
        fake.fail_next_with_502();
        let failed = intake
            .runtime
            .block_on(intake.source.poll(&intake.store, &SystemClock));
        assert!(failed.is_err(), "{}: {failed:?}", fake.name());
        assert_eq!(intake.status(&fake.gid(number)), None, "{}", fake.name());
        let report = intake.poll();
        assert_eq!(report.created, 1, "{}: {report:?}", fake.name());
    }
}

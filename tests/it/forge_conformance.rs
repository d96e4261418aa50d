//! The Forge port's conformance cases, run against every adapter (GitHub and Gitea, each
//! against its fake), so what the `pr` machine relies on holds for each by construction:
//! a draft PR opened once even when the create's answer is lost (the open PR of the head
//! is adopted), labels put on once, executor's review, the owner's @mention and an answer
//! to the owner each posted once when the answer to the post is lost after the forge
//! stored it, a 429's `Retry-After` obeyed (nothing sent within the wait, and the
//! error says when to come back), and auto-merge's part: a ready PR's author and approvals
//! read, a merge naming a moved head refused, and one whose answer is lost merged once.
//!
//! A new adapter joins by implementing [`Adapter`] for its fake and being listed in
//! [`adapters`].

use std::time::Duration;

use chrono::Utc;
use executor::core::merge::{AutoMerge, MergeMethod};
use executor::core::pr::{
    Opening, PrConfig, PrMemory, PrObservation, PrState, Stage, OWNER_ASK_PREFIX,
};
use executor::forge::gitea_pr::GiteaRepo;
use executor::forge::{ForgeClient, ForgeError, MergeOutcome};
use serde_json::Value;

use crate::{fake_gitea, fake_github};

/// What a case needs of an adapter's fake, beside the client of the port.
trait Adapter {
    fn name(&self) -> &'static str;
    fn forge(&self) -> ForgeClient;
    /// The repository's owner, as executor @mentions them.
    fn owner(&self) -> &'static str;
    /// The next `method` request whose path ends with `path_end` is carried out, then
    /// answered `502` (the answer lost in front of the forge).
    fn lose_next_answer(&self, method: &str, path_end: &str);
    /// The next request is answered `429` with `Retry-After: seconds`.
    fn rate_limit_next(&self, seconds: u64);
    fn requests_sent(&self) -> usize;
    /// Every PR (open or not) whose head is `branch`.
    fn prs_of_head(&self, branch: &str) -> Vec<Value>;
    fn labels(&self, number: u64) -> Vec<String>;
    /// The bodies of the reviews on PR `number`.
    fn review_bodies(&self, number: u64) -> Vec<String>;
    /// The bodies of the conversation comments on PR `number`.
    fn comment_bodies(&self, number: u64) -> Vec<String>;
    /// A conversation comment by the owner; answers its id.
    fn owner_comments(&self, number: u64, body: &str) -> u64;
    /// A review thread the owner opened on a line of PR `number`; answers its id.
    fn owner_opens_thread(&self, number: u64, body: &str) -> String;
    /// The owner asks again in review thread `thread`.
    fn owner_asks_again(&self, number: u64, thread: &str, body: &str);
    /// The next answer in a review thread is carried out, then answered `502`.
    fn lose_next_thread_answer(&self);
    /// The bodies of the comments of review thread `thread`, oldest first.
    fn thread_bodies(&self, number: u64, thread: &str) -> Vec<String>;
    /// PR `number` out of draft, as its author marks it.
    fn mark_ready(&self, number: u64);
    /// `login` approves PR `number`'s head.
    fn approve(&self, number: u64, login: &str);
    /// The next merge request is carried out, then answered `502`.
    fn lose_next_merge_answer(&self);
    /// Each merge the forge performed of PR `number`: (head, method).
    fn merges(&self, number: u64) -> Vec<(String, String)>;
}

struct Github(fake_github::FakeGithub);

impl Adapter for Github {
    fn name(&self) -> &'static str {
        "GitHub"
    }
    fn forge(&self) -> ForgeClient {
        ForgeClient::Github(
            executor::forge::github::GithubClient::new(self.0.settings()).expect("client"),
        )
    }
    fn owner(&self) -> &'static str {
        fake_github::OWNER
    }
    fn lose_next_answer(&self, method: &str, path_end: &str) {
        self.0
            .fail_route(method, path_end, 1, fake_github::Fault::AfterApplying(502));
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
    fn requests_sent(&self) -> usize {
        self.0.requests().len()
    }
    fn prs_of_head(&self, branch: &str) -> Vec<Value> {
        self.0
            .pulls()
            .into_iter()
            .filter(|p| p["head"]["ref"] == branch)
            .collect()
    }
    fn labels(&self, number: u64) -> Vec<String> {
        self.0.labels(number)
    }
    fn review_bodies(&self, number: u64) -> Vec<String> {
        self.0
            .reviews()
            .into_iter()
            .filter(|r| r.number == number)
            .map(|r| r.body)
            .collect()
    }
    fn comment_bodies(&self, number: u64) -> Vec<String> {
        bodies(&self.0.issue_comments(number))
    }
    fn owner_comments(&self, number: u64, body: &str) -> u64 {
        self.0.add_owner_comment(number, body);
        last_id(&self.0.issue_comments(number))
    }
    fn owner_opens_thread(&self, number: u64, body: &str) -> String {
        // The fixtures' unresolved thread, as the owner's on this PR.
        let mut threads = fake_github::fixture_json("graphql_review_threads.json");
        let nodes = threads["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"].take();
        let mut thread = nodes
            .as_array()
            .and_then(|n| n.iter().find(|t| t["isResolved"] == false).cloned())
            .expect("the fixtures hold an open thread");
        let first = thread["comments"]["nodes"][0].clone();
        thread["comments"]["nodes"] = serde_json::json!([first]);
        thread["comments"]["nodes"][0]["body"] = serde_json::json!(body);
        let id = thread["id"].as_str().expect("an id").to_string();
        self.0.set_threads(number, vec![thread]);
        id
    }
    fn lose_next_thread_answer(&self) {
        self.lose_next_answer("POST", "/replies");
    }
    fn owner_asks_again(&self, number: u64, thread: &str, body: &str) {
        let mut threads = self.0.threads(number);
        for t in threads.iter_mut().filter(|t| t["id"] == thread) {
            if let Some(nodes) = t["comments"]["nodes"].as_array_mut() {
                let mut ask = nodes[0].clone();
                ask["id"] = serde_json::json!("PRRC_again");
                ask["databaseId"] = serde_json::json!(4_000_000_001u64);
                ask["body"] = serde_json::json!(body);
                nodes.push(ask);
            }
        }
        self.0.set_threads(number, threads);
    }
    fn thread_bodies(&self, number: u64, thread: &str) -> Vec<String> {
        self.0
            .threads(number)
            .iter()
            .find(|t| t["id"] == thread)
            .and_then(|t| t["comments"]["nodes"].as_array().map(|c| bodies(c)))
            .unwrap_or_default()
    }
    fn mark_ready(&self, number: u64) {
        self.0.set_draft(number, false);
    }
    fn approve(&self, number: u64, login: &str) {
        self.0.review_as(number, login, "APPROVED");
    }
    fn lose_next_merge_answer(&self) {
        self.lose_next_answer("PUT", "/merge");
    }
    fn merges(&self, number: u64) -> Vec<(String, String)> {
        self.0
            .merges()
            .into_iter()
            .filter(|(n, _, _)| *n == number)
            .map(|(_, head, method)| (head, method))
            .collect()
    }
}

struct Gitea(fake_gitea::FakeGitea);

impl Adapter for Gitea {
    fn name(&self) -> &'static str {
        "Gitea"
    }
    fn forge(&self) -> ForgeClient {
        ForgeClient::Gitea(GiteaRepo {
            client: self.0.client(),
            owner: fake_gitea::OWNER.into(),
            repo: fake_gitea::REPO.into(),
        })
    }
    fn owner(&self) -> &'static str {
        fake_gitea::OWNER
    }
    fn lose_next_answer(&self, method: &str, path_end: &str) {
        self.0
            .fail_route(method, path_end, 1, fake_gitea::Fault::AfterApplying(502));
    }
    fn rate_limit_next(&self, seconds: u64) {
        self.0.fail_next(
            1,
            fake_gitea::Fault::RateLimited {
                retry_after: seconds,
            },
        );
    }
    fn requests_sent(&self) -> usize {
        self.0.requests().len()
    }
    fn prs_of_head(&self, branch: &str) -> Vec<Value> {
        self.0
            .pulls()
            .into_iter()
            .filter(|p| p["head"]["ref"] == branch)
            .collect()
    }
    fn labels(&self, number: u64) -> Vec<String> {
        self.0
            .issue(number)
            .and_then(|i| {
                i["labels"].as_array().map(|labels| {
                    labels
                        .iter()
                        .filter_map(|l| l["name"].as_str().map(str::to_owned))
                        .collect()
                })
            })
            .unwrap_or_default()
    }
    fn review_bodies(&self, number: u64) -> Vec<String> {
        bodies(&self.0.reviews(number))
    }
    fn comment_bodies(&self, number: u64) -> Vec<String> {
        bodies(&self.0.comments(number))
    }
    fn owner_comments(&self, number: u64, body: &str) -> u64 {
        self.0.comment_as(number, fake_gitea::OWNER, body);
        last_id(&self.0.comments(number))
    }
    fn owner_opens_thread(&self, number: u64, body: &str) -> String {
        self.0.add_review(
            number,
            fake_gitea::OWNER,
            "REQUEST_CHANGES",
            body,
            "greeting.txt",
        );
        format!("gitea-{}", last_id(&self.0.review_comments(number)))
    }
    fn lose_next_thread_answer(&self) {
        // Gitea's answer on a line is a review with that comment.
        self.lose_next_answer("POST", "/reviews");
    }
    fn owner_asks_again(&self, number: u64, _thread: &str, body: &str) {
        self.0.add_review(
            number,
            fake_gitea::OWNER,
            "REQUEST_CHANGES",
            body,
            "greeting.txt",
        );
    }
    fn thread_bodies(&self, number: u64, _thread: &str) -> Vec<String> {
        // The case's PR has one conversation: every review comment is in it.
        bodies(&self.0.review_comments(number))
    }
    fn mark_ready(&self, number: u64) {
        self.0.mark_ready(number);
    }
    fn approve(&self, number: u64, login: &str) {
        self.0
            .add_review(number, login, "APPROVED", "Looks good.", "greeting.txt");
    }
    fn lose_next_merge_answer(&self) {
        self.lose_next_answer("POST", "/merge");
    }
    fn merges(&self, number: u64) -> Vec<(String, String)> {
        self.0
            .merged_as(number)
            .map(|(head, how, _)| (head, how))
            .into_iter()
            .collect()
    }
}

fn bodies(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .filter_map(|c| c["body"].as_str().map(str::to_owned))
        .collect()
}

fn last_id(items: &[Value]) -> u64 {
    items
        .last()
        .and_then(|c| c["id"].as_u64())
        .expect("the comment was made")
}

/// Every adapter of the port, each on a fresh fake.
fn adapters() -> Vec<Box<dyn Adapter>> {
    vec![
        Box::new(Github(fake_github::FakeGithub::start_empty())),
        Box::new(Gitea(fake_gitea::FakeGitea::start())),
    ]
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

const BRANCH: &str = "executor/g-1-fix-tab-preview";

fn opening() -> Opening {
    Opening {
        title: "Fix tab preview".into(),
        head: BRANCH.into(),
        base: "main".into(),
        body: "The preview sticks.".into(),
    }
}

/// Opens the case's PR, as the engine does: the open PR of the head if there is one, else
/// a new draft; a lost answer is healed by looking for the head's PR again.
async fn open(forge: &ForgeClient) -> u64 {
    for _ in 0..3 {
        if let Some(pr) = forge.open_pr_for_head(BRANCH).await.expect("look") {
            return pr.number;
        }
        match forge.create_draft_pr(&opening()).await {
            Ok(pr) => return pr.number,
            Err(error) => assert!(error.is_transient(), "{error}"),
        }
    }
    panic!("no PR after three tries");
}

/// `post` until it succeeds (at most three tries); every failure must be transient.
async fn until_done<F, Fut>(name: &str, mut post: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), ForgeError>>,
{
    for _ in 0..3 {
        match post().await {
            Ok(()) => return,
            Err(error) => assert!(error.is_transient(), "{name}: {error}"),
        }
    }
    panic!("{name}: not done after three tries");
}

#[test]
fn a_draft_pr_whose_create_answer_is_lost_is_opened_once() {
    for fake in adapters() {
        let forge = fake.forge();
        fake.lose_next_answer("POST", "/pulls");
        let number = block_on(open(&forge));
        let prs = fake.prs_of_head(BRANCH);
        assert_eq!(prs.len(), 1, "{}: {prs:?}", fake.name());
        assert_eq!(prs[0]["number"], number, "{}", fake.name());
        assert_eq!(
            block_on(forge.open_pr_for_head(BRANCH))
                .expect("look")
                .map(|p| p.number),
            Some(number),
            "{}",
            fake.name()
        );
    }
}

#[test]
fn labels_whose_answer_is_lost_are_on_the_pr_once_each() {
    for fake in adapters() {
        let forge = fake.forge();
        let number = block_on(open(&forge));
        let labels = vec!["executor".to_string(), "ai-generated".to_string()];
        fake.lose_next_answer("POST", &format!("/issues/{number}/labels"));
        block_on(until_done(fake.name(), || {
            forge.add_labels(number, &labels)
        }));
        let mut on = fake.labels(number);
        on.sort();
        assert_eq!(on, ["ai-generated", "executor"], "{}", fake.name());
    }
}

#[test]
fn a_review_whose_answer_is_lost_is_on_the_pr_once() {
    for fake in adapters() {
        let forge = fake.forge();
        let number = block_on(open(&forge));
        let marker = executor::forge::github::steps::review_marker(7, "4be1f0c");
        let body = format!("A clean change.\n\n{marker}");
        fake.lose_next_answer("POST", "/reviews");
        block_on(until_done(fake.name(), || {
            forge.post_review(number, &body, &marker)
        }));
        let reviews = fake.review_bodies(number);
        let ours = reviews.iter().filter(|b| b.contains(&marker)).count();
        assert_eq!(ours, 1, "{}: {reviews:?}", fake.name());
    }
}

#[test]
fn the_owner_is_told_once_when_the_answer_to_the_mention_is_lost() {
    for fake in adapters() {
        let forge = fake.forge();
        let number = block_on(open(&forge));
        fake.lose_next_answer("POST", "/comments");
        block_on(until_done(fake.name(), || {
            forge.notify_complete(number, fake.owner(), 7, "4be1f0c")
        }));
        let comments = fake.comment_bodies(number);
        let mentions = comments
            .iter()
            .filter(|b| b.contains(&format!("@{}", fake.owner())))
            .count();
        assert_eq!(mentions, 1, "{}: {comments:?}", fake.name());
    }
}

#[test]
fn an_answer_to_the_owner_whose_answer_is_lost_is_posted_once() {
    for fake in adapters() {
        let forge = fake.forge();
        let number = block_on(open(&forge));
        let asked = fake.owner_comments(number, "Please also cover the tab strip.");
        let answers = vec![(
            format!("{OWNER_ASK_PREFIX}{asked}"),
            "Covered: the strip has its own test now.".to_string(),
        )];
        fake.lose_next_answer("POST", "/comments");
        block_on(until_done(fake.name(), || async {
            let missing = forge.answer_threads(number, None, &answers).await?;
            assert!(missing.is_empty(), "{missing:?}");
            Ok(())
        }));
        let comments = fake.comment_bodies(number);
        let answered = comments
            .iter()
            .filter(|b| b.contains("Covered: the strip has its own test now."))
            .count();
        assert_eq!(answered, 1, "{}: {comments:?}", fake.name());
    }
}

#[test]
fn a_429_s_retry_after_is_obeyed_and_said() {
    for fake in adapters() {
        let forge = fake.forge();
        fake.rate_limit_next(30);
        let before = Utc::now();
        let error = block_on(forge.open_pr_for_head(BRANCH)).expect_err("429");
        assert!(error.is_transient(), "{}: {error}", fake.name());
        let at = error
            .retry_at(before)
            .unwrap_or_else(|| panic!("{}: no time to come back: {error}", fake.name()));
        let wait = (at - before).to_std().unwrap_or_default();
        assert!(
            wait >= Duration::from_secs(29) && wait <= Duration::from_secs(31),
            "{}: {wait:?}",
            fake.name()
        );
        let sent = fake.requests_sent();
        let again = block_on(forge.open_pr_for_head(BRANCH)).expect_err("within the wait");
        assert!(again.is_transient(), "{}: {again}", fake.name());
        assert_eq!(
            fake.requests_sent(),
            sent,
            "{}: a request went out within the wait",
            fake.name()
        );
    }
}

#[test]
fn an_answer_in_a_review_thread_whose_answer_is_lost_is_posted_once() {
    for fake in adapters() {
        let forge = fake.forge();
        let number = block_on(open(&forge));
        let thread = fake.owner_opens_thread(number, "Name it hello.txt");
        let answers = vec![(thread.clone(), "Renamed it.".to_string())];
        fake.lose_next_thread_answer();
        block_on(until_done(fake.name(), || async {
            let missing = forge.answer_threads(number, None, &answers).await?;
            assert!(missing.is_empty(), "{missing:?}");
            Ok(())
        }));
        let said = fake.thread_bodies(number, &thread);
        let answered = said.iter().filter(|b| b.contains("Renamed it.")).count();
        assert_eq!(answered, 1, "{}: {said:?}", fake.name());

        // The owner asks again: the same text is a new answer, posted once more.
        fake.owner_asks_again(number, &thread, "Still not renamed.");
        // A fix's push comes between two answers, and it expires what the client read.
        forge.expire_cache();
        block_on(until_done(fake.name(), || async {
            forge
                .answer_threads(number, None, &answers)
                .await
                .map(|_| ())
        }));
        let said = fake.thread_bodies(number, &thread);
        let answered = said.iter().filter(|b| b.contains("Renamed it.")).count();
        assert_eq!(answered, 2, "{}: {said:?}", fake.name());
    }
}

/// The PR as the `pr` machine sees it, looked at as a complete run's under auto-merge.
fn complete_look(forge: &ForgeClient, number: u64) -> PrObservation {
    let config = PrConfig {
        auto_merge: Some(AutoMerge {
            method: MergeMethod::Squash,
            require_approval: true,
            delete_branch: true,
        }),
        ..PrConfig::default()
    };
    let memory = PrMemory {
        stage: Stage::Complete,
        ..PrMemory::default()
    };
    let looks = [executor::forge::Look {
        number,
        memory: &memory,
        worker_running: false,
    }];
    block_on(forge.observe_many(&looks, &config, Utc::now()))
        .pop()
        .expect("one look")
        .expect("the PR")
}

#[test]
fn an_approved_ready_pr_is_merged_once_on_its_head_and_a_moved_head_is_refused() {
    for fake in adapters() {
        let name = fake.name();
        let forge = fake.forge();
        let number = block_on(open(&forge));
        fake.mark_ready(number);
        fake.approve(number, "tkowalczyk");
        let obs = complete_look(&forge, number);
        assert!(!obs.draft, "{name}");
        assert!(
            obs.author.as_deref().is_some_and(|a| a != "tkowalczyk"),
            "{name}: the author is read: {:?}",
            obs.author
        );
        assert!(
            obs.verdicts.iter().any(|v| v.by == "tkowalczyk"
                && v.approved
                && v.commit.as_deref() == Some(obs.head_sha.as_str())),
            "{name}: {:?}",
            obs.verdicts
        );
        let moved = block_on(forge.merge(
            number,
            "0000000000000000000000000000000000000000",
            MergeMethod::Squash,
            None,
        ))
        .expect("an answer");
        assert!(
            matches!(moved, MergeOutcome::Refused(_)),
            "{name}: {moved:?}"
        );
        fake.lose_next_merge_answer();
        let lost = block_on(forge.merge(number, &obs.head_sha, MergeMethod::Squash, Some(BRANCH)));
        assert!(
            lost.as_ref().is_err_and(ForgeError::is_transient),
            "{name}: {lost:?}"
        );
        // The next look sees it merged, so the machine sends nothing again.
        assert_eq!(
            complete_look(&forge, number).state,
            PrState::Merged,
            "{name}"
        );
        assert_eq!(
            fake.merges(number),
            vec![(obs.head_sha.clone(), "squash".to_string())],
            "{name}"
        );
    }
}

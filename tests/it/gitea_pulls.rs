//! The Gitea client's pull-request side against the fake Gitea speaking Gitea's shapes: a
//! draft is opened by the `WIP:` title prefix (Gitea has no draft flag), the open PR of a
//! head is found again, CI is read from commit statuses, labels are named and made as
//! needed, reviews and their comments are read, and executor's review is a comment.

use std::future::Future;

use executor::http::gitea::NewGiteaPull;

use crate::fake_gitea::{FakeGitea, OWNER, REPO};

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

fn opening() -> NewGiteaPull {
    NewGiteaPull {
        title: "Fix tab preview".into(),
        head: "executor/g-1".into(),
        base: "main".into(),
        body: "Task `G-1`".into(),
    }
}

#[test]
fn a_draft_pr_is_opened_by_its_wip_title_and_found_again_by_its_head() {
    let fake = FakeGitea::start();
    let client = fake.client();
    let pr = block_on(client.create_draft_pr(OWNER, REPO, &opening())).expect("created");
    assert_eq!(pr.title, "WIP: Fix tab preview");
    assert!(pr.is_draft());
    assert_eq!(pr.head.branch, "executor/g-1");
    let sent = fake
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path.ends_with("/pulls"))
        .expect("the create");
    assert!(!sent.body.contains("draft"), "{}", sent.body);

    let found = block_on(client.open_pr_for_head(OWNER, REPO, "executor/g-1")).expect("list");
    assert_eq!(found.map(|p| p.number), Some(pr.number));
    assert_eq!(
        block_on(client.open_pr_for_head(OWNER, REPO, "executor/other")).expect("list"),
        None
    );
    // A second PR of the same head is refused by Gitea, never opened twice.
    let again = block_on(client.create_draft_pr(OWNER, REPO, &opening())).expect_err("409");
    assert_eq!(again.status(), Some(409), "{again}");
    assert_eq!(fake.pulls().len(), 1);
}

#[test]
fn ci_is_read_from_commit_statuses() {
    let fake = FakeGitea::start();
    let client = fake.client();
    let pr = block_on(client.create_draft_pr(OWNER, REPO, &opening())).expect("created");
    let sha = pr.head.sha.clone();
    let none = block_on(client.combined_status(OWNER, REPO, &sha)).expect("status");
    assert_eq!((none.state.as_str(), none.total_count), ("pending", 0));
    fake.set_status(&sha, "ui-tests", "pending");
    fake.set_status(&sha, "lint", "success");
    let pending = block_on(client.combined_status(OWNER, REPO, &sha)).expect("status");
    assert_eq!(pending.state, "pending");
    fake.set_status(&sha, "ui-tests", "failure");
    let failed = block_on(client.combined_status(OWNER, REPO, &sha)).expect("status");
    assert_eq!(failed.state, "failure");
    let ui = failed
        .statuses
        .iter()
        .find(|s| s.context == "ui-tests")
        .expect("ui-tests");
    assert_eq!(ui.state, "failure");
    assert!(
        ui.target_url.contains("/actions/runs/"),
        "{}",
        ui.target_url
    );
}

#[test]
fn labels_are_named_and_made_when_the_repository_lacks_them() {
    let fake = FakeGitea::start();
    let client = fake.client();
    let pr = block_on(client.create_draft_pr(OWNER, REPO, &opening())).expect("created");
    let labels = block_on(client.add_labels(OWNER, REPO, pr.number, &["executor", "needs-review"]))
        .expect("labels");
    let names: Vec<&str> = labels.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["executor", "needs-review"]);
    // Again: nothing new is made, nothing doubled.
    let labels = block_on(client.add_labels(OWNER, REPO, pr.number, &["executor"])).expect("again");
    assert_eq!(labels.len(), 2);
    let made = fake
        .requests()
        .iter()
        .filter(|r| {
            r.method == "POST" && r.path.ends_with("/labels") && !r.path.contains("/issues/")
        })
        .count();
    assert_eq!(made, 2);
}

#[test]
fn reviews_and_their_comments_are_read_and_executors_review_is_a_comment() {
    let fake = FakeGitea::start();
    let client = fake.client();
    let pr = block_on(client.create_draft_pr(OWNER, REPO, &opening())).expect("created");
    fake.add_review(
        pr.number,
        "mkowalski",
        "REQUEST_CHANGES",
        "reset the area first",
        "src/tab.rs",
    );
    let reviews = block_on(client.reviews(OWNER, REPO, pr.number)).expect("reviews");
    assert_eq!(reviews.len(), 1);
    assert_eq!(reviews[0].state, "REQUEST_CHANGES");
    let comments =
        block_on(client.review_comments(OWNER, REPO, pr.number, reviews[0].id)).expect("comments");
    assert_eq!(comments[0].body, "reset the area first");
    assert_eq!(comments[0].path, "src/tab.rs");
    assert!(comments[0].resolver.is_none());

    let posted = block_on(client.post_review(OWNER, REPO, pr.number, "executor's review: green"))
        .expect("post");
    assert_eq!(posted.state, "COMMENT");
    assert_eq!(
        block_on(client.reviews(OWNER, REPO, pr.number))
            .expect("reviews")
            .len(),
        2
    );
}

//! The Gitea client and the Gitea issues source against the fake Gitea: every page read by
//! the documented query with the token in its header only, the labels filter checked
//! (Gitea's drops unknown names), pull requests left out, `since`, closing and commenting,
//! failures as typed errors, and the token in no error.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use executor::forge::gitea::{
    GiteaClient, GiteaError, GiteaIssueQuery, GiteaIssueState, GiteaOptions, GiteaStateFilter,
};
use executor::forge::github::Secret;
use executor::sources::gitea_issues::{poll, GiteaIssuesScope, Polled, SOURCE};

use crate::fake_gitea::{
    FakeGitea, Fault, IssueSeed, API_PATH, BOT, ISSUES_EPOCH, OWNER, REPO, TOKEN,
};

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

fn query(labels: &[&str]) -> GiteaIssueQuery {
    GiteaIssueQuery {
        labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        ..GiteaIssueQuery::default()
    }
}

fn list(client: &GiteaClient, query: &GiteaIssueQuery) -> Result<Vec<u64>, GiteaError> {
    let issues = block_on(client.list_issues(OWNER, REPO, query))?;
    Ok(issues.iter().map(|i| i.number).collect())
}

/// The fake's clock after `changes` changes.
fn issue_time(changes: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(ISSUES_EPOCH)
        .expect("epoch")
        .with_timezone(&Utc)
        + chrono::Duration::seconds(changes)
}

fn list_requests(fake: &FakeGitea) -> Vec<crate::fake_gitea::Recorded> {
    fake.requests()
        .into_iter()
        .filter(|r| r.path == format!("{API_PATH}/repos/{OWNER}/{REPO}/issues"))
        .collect()
}

fn scope(labels: &[&str]) -> GiteaIssuesScope {
    GiteaIssuesScope {
        labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        include_closed: false,
    }
}

fn gids(polled: &Polled) -> Vec<String> {
    polled
        .tasks
        .iter()
        .map(|(t, _)| t.task_gid.clone())
        .collect()
}

fn gid(number: u64) -> String {
    format!("gitea:{OWNER}:{REPO}#{number}")
}

#[test]
fn every_page_is_read_with_the_documented_query_and_the_token_only_in_its_header() {
    let fake = FakeGitea::start();
    fake.set_max_response_items(3);
    let mut labelled = Vec::new();
    for i in 0..7 {
        if i == 3 {
            fake.add_issue("Unlabelled", "", &[]);
        }
        labelled.push(fake.add_issue(&format!("Labelled {i}"), "Body.", &["executor"]));
    }
    let client = fake.client();

    let listed = list(&client, &query(&["executor"])).expect("list");
    assert_eq!(listed, labelled, "oldest change first, each once");

    let requests = list_requests(&fake);
    assert_eq!(requests.len(), 3, "seven issues over pages of three");
    for (i, request) in requests.iter().enumerate() {
        assert_eq!(
            request.query,
            format!(
                "state=open&type=issues&labels=executor&page={}&limit=50",
                i + 1
            )
        );
        assert_eq!(request.method, "GET");
        assert_eq!(
            request.authorization.as_deref(),
            Some(format!("token {TOKEN}").as_str())
        );
    }
    for request in fake.requests() {
        assert!(!request.query.contains(TOKEN) && !request.body.contains(TOKEN));
        assert!(request.headers.iter().all(|(_, v)| !v.contains(TOKEN)));
    }
}

#[test]
fn pages_are_read_by_number_when_links_name_another_host() {
    let fake = FakeGitea::start();
    fake.set_max_response_items(2);
    // Gitea builds `Link` on its ROOT_URL, the proxy's public name here.
    fake.set_app_url("https://gitea.example.invalid/");
    let numbers: Vec<u64> = (0..5)
        .map(|i| fake.add_issue(&format!("Issue {i}"), "", &["executor"]))
        .collect();
    let listed = list(&fake.client(), &query(&["executor"])).expect("list");
    assert_eq!(listed, numbers);
    assert_eq!(list_requests(&fake).len(), 3);
}

#[test]
fn an_issue_opened_while_pages_are_read_moves_none_out_and_none_comes_twice() {
    let fake = FakeGitea::start();
    fake.set_max_response_items(2);
    let numbers: Vec<u64> = (0..4)
        .map(|i| fake.add_issue(&format!("Issue {i}"), "", &["executor"]))
        .collect();
    // Newest created first: page one is [4, 3]; then an issue is opened, which pushes the
    // others one place down, so page two is [3, 2] and page three [1].
    fake.open_issue_after_next_list(IssueSeed::new("Opened meanwhile", "", &["executor"]));
    let client = fake.client();
    assert_eq!(list(&client, &query(&["executor"])).expect("list"), numbers);
    assert_eq!(list_requests(&fake).len(), 3);
    let mut now = numbers.clone();
    now.push(5);
    assert_eq!(list(&client, &query(&["executor"])).expect("list"), now);
}

#[test]
fn only_issues_carrying_an_asked_label_come_back() {
    let fake = FakeGitea::start();
    let both = fake.add_issue("Both", "", &["executor", "agent-ok"]);
    let first = fake.add_issue("First only", "", &["executor"]);
    fake.add_issue("Neither", "", &["wontfix"]);
    let client = fake.client();

    assert_eq!(
        list(&client, &query(&["executor"])).expect("list"),
        [both, first]
    );
    // Gitea's `labels=a,b` wants both.
    assert_eq!(
        list(&client, &query(&["executor", "agent-ok"])).expect("list"),
        [both]
    );
    // A label the repository does not have is dropped by Gitea, which then lists every
    // issue; none carries it, so none comes back.
    assert_eq!(
        list(&client, &query(&["no-such-label"])).expect("list"),
        Vec::<u64>::new()
    );
    let unfiltered = list_requests(&fake).pop().expect("the last list");
    assert_eq!(unfiltered.param("labels").as_deref(), Some("no-such-label"));

    let error = list(&client, &query(&["a,b"])).expect_err("a comma");
    assert!(matches!(error, GiteaError::Settings(_)), "{error:?}");
}

#[test]
fn pull_requests_are_left_out() {
    let fake = FakeGitea::start();
    fake.add_issue_in(
        OWNER,
        REPO,
        IssueSeed::new("Fix the tab strip", "", &["executor"]).pull(),
    );
    let issue = fake.add_issue("Tab preview sticks", "", &["executor"]);
    let client = fake.client();
    assert_eq!(list(&client, &query(&["executor"])).expect("list"), [issue]);
    let request = list_requests(&fake).pop().expect("a list");
    assert_eq!(request.param("type").as_deref(), Some("issues"));
}

#[test]
fn since_and_state_go_to_gitea_and_closed_issues_come_with_all() {
    let fake = FakeGitea::start();
    let one = fake.add_issue("One", "", &["executor"]);
    let two = fake.add_issue("Two", "", &["executor"]);
    let three = fake.add_issue_in(
        OWNER,
        REPO,
        IssueSeed::new("Three", "", &["executor"]).closed(),
    );
    let client = fake.client();
    assert_eq!(
        list(&client, &query(&["executor"])).expect("open"),
        [one, two]
    );

    let cursor = fake.now();
    fake.edit_body(one, "Edited.");
    fake.close(two);
    let changed = GiteaIssueQuery {
        labels: vec!["executor".into()],
        state: GiteaStateFilter::All,
        since: Some(cursor + chrono::Duration::milliseconds(500)),
    };
    let issues = block_on(client.list_issues(OWNER, REPO, &changed)).expect("since");
    let numbers: Vec<u64> = issues.iter().map(|i| i.number).collect();
    // Gitea's `since` is inclusive and in whole seconds: the issue changed in the cursor's
    // second comes too (the source leaves it out).
    assert_eq!(numbers, [three, one, two]);
    assert_eq!(issues[1].body, "Edited.");
    assert_eq!(issues[2].state, GiteaIssueState::Closed);
    assert_eq!(issues[2].closed_at, Some(issue_time(5)));
    let request = list_requests(&fake).pop().expect("a list");
    assert_eq!(request.param("state").as_deref(), Some("all"));
    assert_eq!(
        request.param("since"),
        Some(cursor.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        "whole seconds, a fraction dropped"
    );
    let closed = GiteaIssueQuery {
        state: GiteaStateFilter::Closed,
        ..query(&["executor"])
    };
    assert_eq!(list(&client, &closed).expect("closed"), [three, two]);
}

#[test]
fn closing_an_issue_closes_it_once_and_says_so() {
    let fake = FakeGitea::start();
    let number = fake.add_issue("Tab preview sticks", "", &["executor"]);
    let client = fake.client();
    let closed = block_on(client.close_issue(OWNER, REPO, number)).expect("close");
    assert_eq!(closed.number, number);
    assert_eq!(closed.state, GiteaIssueState::Closed);
    assert_eq!(closed.closed_at, Some(closed.updated_at));
    assert!(closed.updated_at > issue_time(1), "the closing is a change");
    let upstream = fake.issue(number).expect("issue");
    assert_eq!(upstream["state"], "closed");

    let patch = fake
        .requests()
        .into_iter()
        .find(|r| r.method == "PATCH")
        .expect("a PATCH");
    assert_eq!(
        patch.path,
        format!("{API_PATH}/repos/{OWNER}/{REPO}/issues/{number}")
    );
    assert_eq!(patch.status, 201);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&patch.body).expect("JSON body"),
        serde_json::json!({ "state": "closed" })
    );
    assert!(patch
        .headers
        .iter()
        .any(|(n, v)| n == "content-type" && v.starts_with("application/json")));

    // Closing again is no error and no change.
    let again = block_on(client.close_issue(OWNER, REPO, number)).expect("close again");
    assert_eq!(again.updated_at, closed.updated_at);
    let missing = block_on(client.close_issue(OWNER, REPO, 999)).expect_err("no such issue");
    assert!(missing.is_not_found(), "{missing:?}");
}

#[test]
fn a_comment_is_posted_and_its_id_answered() {
    let fake = FakeGitea::start();
    let number = fake.add_issue("Tab preview sticks", "", &["executor"]);
    let client = fake.client();
    let body = "Fixed in executor/tab-preview (draft PR #14).\n\n`cargo test` is green.";
    let id = block_on(client.comment_issue(OWNER, REPO, number, body)).expect("comment");
    let comments = fake.comments(number);
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0]["id"], id);
    assert_eq!(comments[0]["body"], body);
    assert_eq!(comments[0]["user"]["login"], BOT);

    let empty = block_on(client.comment_issue(OWNER, REPO, number, "")).expect_err("empty");
    assert_eq!(empty.status(), Some(422), "{empty}");
    assert!(!empty.is_transient());
    let missing = block_on(client.comment_issue(OWNER, REPO, 999, "x")).expect_err("missing");
    assert!(missing.is_not_found(), "{missing:?}");
    assert_eq!(fake.comments(number).len(), 1);
}

#[test]
fn failures_are_typed_errors_that_say_whether_they_pass() {
    let fake = FakeGitea::start();
    fake.add_issue("Tab preview sticks", "", &["executor"]);
    let client = fake.client();
    let executor = query(&["executor"]);

    let wrong = GiteaClient::new(
        fake.url(),
        Secret::new("not-the-token"),
        GiteaOptions::default(),
    )
    .expect("client");
    let error = list(&wrong, &executor).expect_err("401");
    assert_eq!(error.to_string(), "Gitea answered 401: token is required");
    assert_eq!(error.status(), Some(401));
    assert!(!error.is_transient() && !error.is_not_found());

    let error = block_on(client.list_issues(OWNER, "no-such-repo", &executor)).expect_err("404");
    assert!(error.is_not_found() && !error.is_transient(), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("/repos/mkowalski/no-such-repo/issues"),
        "{error}"
    );

    fake.fail_next(1, Fault::Status(500));
    let error = list(&client, &executor).expect_err("500");
    assert!(
        matches!(error, GiteaError::Server { status: 500 }),
        "{error:?}"
    );
    assert!(error.is_transient());

    fake.fail_next(1, Fault::Status(403));
    let error = block_on(client.close_issue(OWNER, REPO, 1)).expect_err("403");
    assert_eq!(error.status(), Some(403));
    assert!(!error.is_transient());

    // A 429's `Retry-After` is taken at its word: nothing goes to Gitea before it is over,
    // by this client, a clone of it or any other client of this Gitea in the process, and
    // a caller meanwhile is told how long is left.
    let clock = std::sync::Arc::new(executor::core::clock::ManualClock::new(Utc::now()));
    let limited = fake.client_with(GiteaOptions {
        clock: clock.clone(),
        ..GiteaOptions::default()
    });
    fake.fail_next(1, Fault::RateLimited { retry_after: 30 });
    let error = list(&limited, &executor).expect_err("429");
    assert!(
        matches!(error, GiteaError::RateLimited { retry_after: Some(wait) } if wait == Duration::from_secs(30)),
        "{error:?}"
    );
    assert!(error.is_transient());
    let sent = fake.requests().len();
    clock.advance(chrono::Duration::seconds(10));
    let error = list(&limited.clone(), &executor).expect_err("still limited");
    assert!(
        matches!(error, GiteaError::RateLimited { retry_after: Some(wait) } if wait == Duration::from_secs(20)),
        "{error:?}"
    );
    let another = fake.client_with(GiteaOptions {
        clock: clock.clone(),
        ..GiteaOptions::default()
    });
    let error = list(&another, &executor).expect_err("another client, still limited");
    assert!(
        matches!(error, GiteaError::RateLimited { retry_after: Some(wait) } if wait == Duration::from_secs(20)),
        "{error:?}"
    );
    assert_eq!(
        fake.requests().len(),
        sent,
        "a request went out within the wait"
    );
    clock.advance(chrono::Duration::seconds(21));
    list(&limited, &executor).expect("the wait is over");
    assert!(fake.requests().len() > sent);

    fake.fail_next(1, Fault::NotJson);
    let error = list(&client, &executor).expect_err("not JSON");
    assert!(matches!(error, GiteaError::Decode { .. }), "{error:?}");

    let impatient = fake.client_with(GiteaOptions {
        timeout: Duration::from_millis(200),
        ..GiteaOptions::default()
    });
    fake.fail_next(1, Fault::Delay(Duration::from_secs(2)));
    let error = list(&impatient, &executor).expect_err("timeout");
    assert!(matches!(error, GiteaError::Timeout), "{error:?}");
    assert!(error.is_transient());

    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let nowhere = GiteaClient::new(
        url::Url::parse(&format!("http://127.0.0.1:{closed_port}/api/v1")).expect("url"),
        Secret::new(TOKEN),
        GiteaOptions::default(),
    )
    .expect("client");
    let error = list(&nowhere, &executor).expect_err("refused");
    assert!(matches!(error, GiteaError::Transport { .. }), "{error:?}");
    assert!(error.is_transient());

    // The fake still works after all that.
    assert_eq!(list(&client, &executor).expect("list").len(), 1);
}

#[test]
fn the_token_is_in_no_error_and_no_debug() {
    let fake = FakeGitea::start();
    let number = fake.add_issue("Tab preview sticks", "", &["executor"]);
    let client = fake.client();
    assert!(!format!("{client:?}").contains(TOKEN));
    fake.fail_next(3, Fault::EchoAuthorization);
    let errors = [
        list(&client, &query(&["executor"])).expect_err("echo"),
        block_on(client.close_issue(OWNER, REPO, number)).expect_err("echo"),
        block_on(client.comment_issue(OWNER, REPO, number, "x")).expect_err("echo"),
    ];
    for error in errors {
        let shown = format!("{error} {error:?}");
        assert!(shown.contains("Authorization: token ***"), "{shown}");
        assert!(!shown.contains(TOKEN), "{shown}");
    }
}

#[test]
fn a_server_that_never_stops_paging_is_cut_off() {
    let fake = FakeGitea::start();
    fake.add_issue("Tab preview sticks", "", &["executor"]);
    fake.set_endless_pages(true);
    let client = fake.client_with(GiteaOptions {
        max_pages: 4,
        ..GiteaOptions::default()
    });
    let error = list(&client, &query(&["executor"])).expect_err("endless");
    assert!(
        matches!(error, GiteaError::TooManyPages { pages: 4, .. }),
        "{error:?}"
    );
    assert_eq!(list_requests(&fake).len(), 4);
}

#[test]
fn a_poll_takes_any_of_the_labels_once_each_and_then_only_changes() {
    let fake = FakeGitea::start();
    fake.add_issue_in(
        OWNER,
        REPO,
        IssueSeed::new("Closed before", "", &["executor"]).closed(),
    );
    let both = fake.add_issue("Both", "", &["executor", "agent-ok"]);
    let first = fake.add_issue("First only", "Steps.", &["executor"]);
    let second = fake.add_issue("Second only", "", &["agent-ok"]);
    fake.add_issue("Neither", "", &["wontfix"]);
    let client = fake.client();
    let labels = scope(&["executor", "agent-ok", "EXECUTOR"]);

    let polled = block_on(poll(&client, OWNER, REPO, &labels, None)).expect("poll");
    assert_eq!(gids(&polled), [gid(both), gid(first), gid(second)]);
    assert!(polled.tasks.iter().all(|(t, _)| t.source == SOURCE));
    assert_eq!(polled.newest_change, Some(issue_time(4)));
    let asked: Vec<Option<String>> = list_requests(&fake)
        .iter()
        .map(|r| r.param("labels"))
        .collect();
    assert_eq!(
        asked,
        [Some("executor".into()), Some("agent-ok".into())],
        "one label a request, each once"
    );

    let since = polled.newest_change;
    let nothing = block_on(poll(&client, OWNER, REPO, &labels, since)).expect("unchanged");
    assert!(nothing.tasks.is_empty());
    assert_eq!(nothing.next_since(since), since);

    fake.edit_body(first, "Steps, edited.");
    fake.close(second);
    fake.add_label(both, "wontfix");
    let changed = block_on(poll(&client, OWNER, REPO, &labels, since)).expect("changes");
    // In the order read: `executor`'s issues (oldest change first), then `agent-ok`'s.
    assert_eq!(gids(&changed), [gid(first), gid(both), gid(second)]);
    let (task, _) = &changed.tasks[0];
    assert_eq!(task.description, "# First only\n\nSteps, edited.");
    let (_, facts) = &changed.tasks[1];
    assert_eq!(facts.labels, ["executor", "agent-ok", "wontfix"]);
    let (_, facts) = &changed.tasks[2];
    assert!(facts.closed);
    assert_eq!(facts.location.as_deref(), Some("mkowalski/lumen-browser"));
    assert!(list_requests(&fake)
        .iter()
        .rev()
        .take(2)
        .all(|r| r.param("state").as_deref() == Some("all") && r.param("since").is_some()));
}

#[test]
fn a_failed_label_fails_the_whole_poll() {
    let fake = FakeGitea::start();
    fake.add_issue("Both", "", &["executor", "agent-ok"]);
    let client = fake.client();
    fake.fail_next_matching("/issues", 1, Fault::Status(502));
    let error = block_on(poll(
        &client,
        OWNER,
        REPO,
        &scope(&["agent-ok", "executor"]),
        None,
    ))
    .expect_err("the first label failed");
    assert!(error.is_transient(), "{error:?}");
}

//! The Asana source against the fake Asana: full reads with offset pagination, conversion
//! of the fixtures' task, incremental polls with `modified_since`, each failure Asana can
//! give as its typed error without the token anywhere but the `Authorization` header, and a
//! comment posted as a story.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use executor::core::queue::QueueStatus;
use executor::sources::asana::{
    poll, AsanaClient, AsanaError, AsanaOptions, AsanaScope, AsanaSettings, Polled, Secret,
    TASK_OPT_FIELDS,
};

use crate::fake_asana::{
    fixture_json, FakeAsana, Fault, TaskSeed, API_PATH, ME_GID, ME_NAME, OWNER_GID, PROJECT,
    PROJECT_NAME, SECTION_IN_PROGRESS, TASK, TOKEN, WORKSPACE,
};

struct Harness {
    runtime: tokio::runtime::Runtime,
    client: AsanaClient,
}

impl Harness {
    fn new(settings: AsanaSettings) -> Self {
        Self::with_options(settings, AsanaOptions::default())
    }

    fn with_options(settings: AsanaSettings, options: AsanaOptions) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("client runtime");
        let client = AsanaClient::with_options(settings, options).expect("client");
        Self { runtime, client }
    }

    fn run<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    fn poll(&self, scope: &AsanaScope, since: Option<DateTime<Utc>>) -> Result<Polled, AsanaError> {
        self.run(poll(&self.client, scope, since))
    }
}

fn sections(gids: &[String]) -> AsanaScope {
    AsanaScope {
        sections: gids.to_vec(),
        ..AsanaScope::default()
    }
}

fn projects(gids: &[&str]) -> AsanaScope {
    AsanaScope {
        projects: gids.iter().map(|g| (*g).to_owned()).collect(),
        ..AsanaScope::default()
    }
}

fn gids(polled: &Polled) -> Vec<String> {
    polled
        .tasks
        .iter()
        .map(|(t, _)| t.task_gid.clone())
        .collect()
}

#[test]
fn a_thousand_tasks_across_three_sections_are_read_in_full_ten_requests_per_thousand() {
    let fake = FakeAsana::start_empty();
    let backlog = fake.seed_sections("Big backlog", &[400, 300, 300], TaskSeed::numbered);
    let h = Harness::new(fake.settings());

    let polled = h
        .poll(&sections(&backlog.sections), None)
        .expect("full read");
    assert_eq!(gids(&polled), backlog.tasks, "every task once, in order");
    assert_eq!(polled.newest_change, Some(fake.now()));
    let (last, _) = &polled.tasks[999];
    assert_eq!(
        last.description,
        "# Generated task 999\n\nNotes of generated task 999."
    );

    let requests = fake.requests();
    assert_eq!(requests.len(), 10, "4 + 3 + 3 pages of 100");
    for (section, pages) in backlog.sections.iter().zip([4, 3, 3]) {
        let path = format!("{API_PATH}/sections/{section}/tasks");
        let of_section: Vec<_> = requests.iter().filter(|r| r.path == path).collect();
        assert_eq!(of_section.len(), pages, "{path}");
        assert_eq!(of_section[0].param("offset"), None);
        assert!(of_section[1..].iter().all(|r| r.param("offset").is_some()));
    }
    for request in &requests {
        assert_eq!(request.status, 200);
        assert_eq!(request.param("limit").as_deref(), Some("100"));
        assert_eq!(
            request.param("opt_fields").as_deref(),
            Some(TASK_OPT_FIELDS)
        );
        assert_eq!(request.param("completed_since").as_deref(), Some("now"));
        assert_eq!(request.param("modified_since"), None);
    }

    // The whole project is the same thousand, also ten pages.
    let polled = h
        .poll(&projects(&[&backlog.project]), None)
        .expect("project read");
    assert_eq!(polled.tasks.len(), 1000);
    assert_eq!(fake.requests().len(), 20);
}

#[test]
fn the_fixture_task_becomes_a_pending_task_with_its_facts() {
    let fake = FakeAsana::start();
    let h = Harness::new(fake.settings());

    let polled = h.poll(&projects(&[PROJECT]), None).expect("read");
    assert_eq!(
        gids(&polled),
        ["1209876543210987", "1209876543211002", "1209876543211015"]
    );
    let (task, facts) = polled
        .tasks
        .iter()
        .find(|(t, _)| t.task_gid == TASK)
        .expect("the fixtures' task");
    assert_eq!(task.source, "asana");
    assert_eq!(task.initial_status, QueueStatus::Pending);
    assert!(
        task.description.starts_with(
            "# Tab preview stuck after pointer leaves tab strip\n\nTab preview stays visible after the pointer leaves the tab strip."
        ),
        "{}",
        task.description
    );
    let expected = fixture_json("task.json")["data"].take();
    assert_eq!(facts.assignee.as_deref(), Some("Marek Kowalski"));
    assert_eq!(facts.assignee_id.as_deref(), Some(OWNER_GID));
    assert!(!facts.closed);
    assert_eq!(facts.labels, ["macOS"]);
    assert_eq!(
        facts.location.as_deref(),
        Some(format!("{PROJECT_NAME} / In progress").as_str())
    );
    assert_eq!(facts.url.as_deref(), expected["permalink_url"].as_str());
    assert_eq!(
        facts
            .modified_at
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        expected["modified_at"].as_str().map(str::to_owned)
    );
    assert_eq!(
        polled.newest_change,
        polled.tasks.iter().filter_map(|(_, f)| f.modified_at).max()
    );
}

#[test]
fn an_incremental_poll_returns_only_the_edited_task() {
    let fake = FakeAsana::start_empty();
    let backlog = fake.seed_sections("Backlog", &[120, 80], TaskSeed::numbered);
    let scope = sections(&backlog.sections);
    let h = Harness::new(fake.settings());

    let first = h.poll(&scope, None).expect("first poll");
    assert_eq!(first.tasks.len(), 200);
    let since = first.next_since(None).expect("a newest change");
    let before = fake.requests().len();

    let edited = &backlog.tasks[150];
    fake.rename(edited, "Generated task 150, clarified");
    let second = h.poll(&scope, Some(since)).expect("incremental poll");
    assert_eq!(gids(&second), std::slice::from_ref(edited));
    assert!(second.tasks[0]
        .0
        .description
        .starts_with("# Generated task 150, clarified\n\n"));
    assert_eq!(second.newest_change, Some(fake.now()));

    // Asana filters by modified_since on GET /tasks only: one call per section, there.
    let requests = &fake.requests()[before..];
    assert_eq!(requests.len(), 2);
    for (request, section) in requests.iter().zip(&backlog.sections) {
        assert_eq!(request.path, format!("{API_PATH}/tasks"));
        assert_eq!(request.param("section").as_ref(), Some(section));
        assert_eq!(
            request.param("modified_since"),
            Some(since.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        );
        assert_eq!(request.param("completed_since"), None);
    }

    // Nothing changed since: nothing comes, and `since` stays.
    let since = second.next_since(Some(since));
    let third = h.poll(&scope, since).expect("quiet poll");
    assert!(third.tasks.is_empty(), "{:?}", gids(&third));
    assert_eq!(third.next_since(since), since);

    // An edit of the notes alone is a change too.
    fake.set_notes(&backlog.tasks[5], "Only on macOS 15.");
    let fourth = h.poll(&scope, since).expect("poll after a notes edit");
    assert_eq!(gids(&fourth), std::slice::from_ref(&backlog.tasks[5]));
    assert_eq!(
        fourth.tasks[0].0.description,
        "# Generated task 5\n\nOnly on macOS 15."
    );
}

#[test]
fn a_task_completed_upstream_comes_back_closed() {
    let fake = FakeAsana::start_empty();
    let backlog = fake.seed_sections("Backlog", &[30], TaskSeed::numbered);
    let scope = sections(&backlog.sections);
    let h = Harness::new(fake.settings());

    let first = h.poll(&scope, None).expect("first poll");
    assert!(first.tasks.iter().all(|(_, facts)| !facts.closed));
    fake.complete(&backlog.tasks[3]);

    let second = h
        .poll(&scope, first.next_since(None))
        .expect("incremental poll");
    assert_eq!(gids(&second), [backlog.tasks[3].clone()]);
    assert!(second.tasks[0].1.closed);
}

#[test]
fn the_first_read_leaves_out_completed_tasks_unless_asked() {
    let fake = FakeAsana::start_empty();
    let backlog = fake.seed_sections("Backlog", &[40], |i| {
        let seed = TaskSeed::numbered(i).tag("macOS");
        if i % 4 == 0 {
            seed.completed()
        } else {
            seed
        }
    });
    let h = Harness::new(fake.settings());

    let open = h.poll(&sections(&backlog.sections), None).expect("read");
    assert_eq!(open.tasks.len(), 30);
    assert!(open.tasks.iter().all(|(_, f)| f.labels == ["macOS"]));

    let scope = AsanaScope {
        include_completed: true,
        ..sections(&backlog.sections)
    };
    let all = h.poll(&scope, None).expect("read with completed");
    assert_eq!(all.tasks.len(), 40);
    assert_eq!(all.tasks.iter().filter(|(_, f)| f.closed).count(), 10);
}

#[test]
fn a_task_in_two_scopes_comes_once() {
    let fake = FakeAsana::start();
    let roadmap = fake.add_project("Roadmap");
    let q2 = fake.add_section(&roadmap, "Q2");
    fake.add_to_section(TASK, &q2);
    let h = Harness::new(fake.settings());

    let scope = AsanaScope {
        projects: vec![PROJECT.into()],
        sections: vec![q2.clone(), SECTION_IN_PROGRESS.into()],
        ..AsanaScope::default()
    };
    let polled = h.poll(&scope, None).expect("read");
    assert_eq!(
        gids(&polled),
        ["1209876543210987", "1209876543211002", "1209876543211015"]
    );
    // Located where it was first read from.
    assert_eq!(
        polled.tasks[0].1.location.as_deref(),
        Some(format!("{PROJECT_NAME} / In progress").as_str())
    );
    let only_q2 = h.poll(&sections(&[q2]), None).expect("read Q2");
    assert_eq!(only_q2.tasks[0].1.location.as_deref(), Some("Roadmap / Q2"));
}

#[test]
fn my_tasks_are_the_tasks_assigned_to_the_tokens_user_in_the_workspace() {
    let fake = FakeAsana::start();
    let mine = fake.add_task(
        SECTION_IN_PROGRESS,
        TaskSeed::new("Triage crash reports", "From the nightly channel.")
            .assignee(ME_GID, ME_NAME),
    );
    let h = Harness::new(fake.settings());

    let scope = AsanaScope {
        my_tasks_workspace: Some(WORKSPACE.into()),
        ..AsanaScope::default()
    };
    let polled = h.poll(&scope, None).expect("My Tasks");
    assert_eq!(gids(&polled), [mine]);
    assert_eq!(polled.tasks[0].1.assignee.as_deref(), Some(ME_NAME));
    let request = fake.requests().pop().expect("a request");
    assert_eq!(request.path, format!("{API_PATH}/tasks"));
    assert_eq!(request.param("assignee").as_deref(), Some("me"));
    assert_eq!(request.param("workspace").as_deref(), Some(WORKSPACE));
}

#[test]
fn a_bad_token_is_unauthorized_with_asanas_message_and_never_the_token() {
    let fake = FakeAsana::start();
    let wrong = "2/1209511000000042/1213900000000001:WRONGtokenVALUE";
    let h = Harness::new(AsanaSettings {
        api_base: fake.url(),
        token: Secret::new(wrong),
    });

    let error = h.poll(&projects(&[PROJECT]), None).expect_err("401");
    match &error {
        AsanaError::Unauthorized { message } => assert_eq!(message, "Not Authorized"),
        other => panic!("{other:?}"),
    }
    let shown = format!("{error} {error:?} {:?}", h.client);
    assert!(shown.contains("Not Authorized"), "{shown}");
    assert!(!shown.contains("WRONGtokenVALUE"), "{shown}");
    assert!(!error.is_transient());
    let request = fake.requests().pop().expect("a request");
    assert_eq!(request.status, 401);
    assert_eq!(request.authorization, Some(format!("Bearer {wrong}")));
}

#[test]
fn a_rate_limit_is_rate_limited_with_the_wait() {
    let fake = FakeAsana::start();
    fake.fail_next(
        1,
        Fault::RateLimited {
            retry_after: Some(30),
        },
    );
    let h = Harness::new(fake.settings());

    let error = h.poll(&projects(&[PROJECT]), None).expect_err("429");
    assert!(
        matches!(error, AsanaError::RateLimited { retry_after } if retry_after == Duration::from_secs(30)),
        "{error:?}"
    );
    let now = Utc::now();
    assert_eq!(
        error.retry_at(now),
        Some(now + chrono::Duration::seconds(30))
    );
    // The limit passed: the same poll goes through.
    assert_eq!(
        h.poll(&projects(&[PROJECT]), None)
            .expect("read")
            .tasks
            .len(),
        3
    );
}

#[test]
fn a_failure_in_a_later_scope_fails_the_whole_poll() {
    let fake = FakeAsana::start();
    fake.fail_next_matching("/sections/", 1, Fault::Status(503));
    let h = Harness::new(fake.settings());

    let scope = AsanaScope {
        projects: vec![PROJECT.into()],
        sections: vec![SECTION_IN_PROGRESS.into()],
        ..AsanaScope::default()
    };
    let error = h.poll(&scope, None).expect_err("503 on the section");
    match &error {
        AsanaError::Server { status, phrase, .. } => {
            assert_eq!(*status, 503);
            assert!(phrase.is_some());
        }
        other => panic!("{other:?}"),
    }
    assert!(error.is_transient());
}

#[test]
fn an_unreachable_base_url_is_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    drop(listener);
    let h = Harness::new(AsanaSettings {
        api_base: url::Url::parse(&format!("http://{addr}/api/1.0")).expect("url"),
        token: Secret::new(TOKEN),
    });
    let error = h.poll(&projects(&[PROJECT]), None).expect_err("refused");
    assert!(matches!(error, AsanaError::Unreachable { .. }), "{error:?}");
    assert!(error.is_transient());
    assert!(!format!("{error} {error:?}").contains("FAKEasanaPATsecret"));

    // A server that does not answer in time is unreachable too.
    let fake = FakeAsana::start();
    fake.fail_next(1, Fault::Delay(Duration::from_secs(2)));
    let h = Harness::with_options(
        fake.settings(),
        AsanaOptions {
            timeout: Duration::from_millis(200),
            ..AsanaOptions::default()
        },
    );
    let error = h.poll(&projects(&[PROJECT]), None).expect_err("timeout");
    match &error {
        AsanaError::Unreachable { message } => assert!(message.contains("no answer"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_answer_that_is_not_json_is_a_decode_error_naming_what() {
    let fake = FakeAsana::start();
    fake.fail_next(1, Fault::NotJson);
    let h = Harness::new(fake.settings());
    let error = h.poll(&projects(&[PROJECT]), None).expect_err("not JSON");
    match &error {
        AsanaError::Decode { what, .. } => {
            assert_eq!(what, &format!("the tasks of project {PROJECT}"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unknown_project_is_not_found() {
    let fake = FakeAsana::start();
    let h = Harness::new(fake.settings());
    let error = h
        .poll(&projects(&["1209512345670000"]), None)
        .expect_err("404");
    match &error {
        AsanaError::NotFound { path, message } => {
            assert_eq!(path, "/projects/1209512345670000/tasks");
            assert!(message.contains("Unknown object"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_list_that_never_ends_is_stopped() {
    let fake = FakeAsana::start_empty();
    let backlog = fake.seed_sections("Backlog", &[100], TaskSeed::numbered);
    let small_pages = AsanaOptions {
        page_size: 10,
        max_pages: 3,
        ..AsanaOptions::default()
    };
    let h = Harness::with_options(fake.settings(), small_pages);
    let error = h
        .poll(&sections(&backlog.sections), None)
        .expect_err("too many pages");
    match &error {
        AsanaError::Paging { reason, .. } => assert!(reason.contains("more than 3"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(fake.requests().len(), 3);

    fake.set_endless_pages(true);
    let h = Harness::new(fake.settings());
    let before = fake.requests().len();
    let error = h
        .poll(&sections(&backlog.sections), None)
        .expect_err("an offset that comes back");
    match &error {
        AsanaError::Paging { reason, .. } => assert!(reason.contains("same offset"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(fake.requests().len() - before, 2);
}

#[test]
fn a_comment_is_posted_as_a_story_and_moves_the_task() {
    let fake = FakeAsana::start();
    let h = Harness::new(fake.settings());
    let first = h.poll(&projects(&[PROJECT]), None).expect("read");

    let text = "Draft PR opened: https://github.com/mkowalski/lumen-browser/pull/1234 (run 42). CI is running.";
    let story = h
        .run(h.client.add_comment(TASK, text))
        .expect("comment posted");
    assert_eq!(story.text, text);
    assert_eq!(story.kind.as_deref(), Some("comment"));
    assert_eq!(story.resource_subtype.as_deref(), Some("comment_added"));
    assert_eq!(story.target.as_ref().map(|t| t.gid.as_str()), Some(TASK));
    assert_eq!(
        story.created_by.as_ref().and_then(|u| u.name.as_deref()),
        Some(ME_NAME)
    );

    let stories = fake.stories(TASK);
    assert_eq!(stories.len(), 1);
    assert_eq!(stories[0]["text"], text);
    let request = fake.requests().pop().expect("a request");
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, format!("{API_PATH}/tasks/{TASK}/stories"));
    assert_eq!(request.status, 201);
    let body: serde_json::Value = serde_json::from_str(&request.body).expect("JSON body");
    assert_eq!(body, serde_json::json!({ "data": { "text": text } }));

    // Asana counts a new story as a change to the task: it comes back in the next poll.
    let next = h
        .poll(&projects(&[PROJECT]), first.next_since(None))
        .expect("incremental poll");
    assert_eq!(gids(&next), [TASK]);
    assert_eq!(
        fake.task(TASK).expect("task")["modified_at"],
        story
            .created_at
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .expect("created_at")
            .as_str()
    );
}

#[test]
fn the_token_goes_only_in_the_authorization_header() {
    let fake = FakeAsana::start_empty();
    let backlog = fake.seed_sections("Backlog", &[250], TaskSeed::numbered);
    let h = Harness::new(fake.settings());
    let scope = AsanaScope {
        projects: vec![backlog.project.clone()],
        sections: backlog.sections.clone(),
        my_tasks_workspace: Some(WORKSPACE.into()),
        include_completed: false,
    };
    let polled = h.poll(&scope, None).expect("read");
    assert_eq!(polled.tasks.len(), 250);
    h.run(h.client.add_comment(&backlog.tasks[0], "Picked up."))
        .expect("comment");

    let requests = fake.requests();
    assert_eq!(requests.len(), 3 + 3 + 1 + 1);
    for request in requests {
        assert_eq!(request.authorization, Some(format!("Bearer {TOKEN}")));
        let elsewhere = format!(
            "{} {} {} {:?}",
            request.path, request.query, request.body, request.headers
        );
        assert!(!elsewhere.contains("FAKEasanaPATsecret"), "{elsewhere}");
    }
}

#[test]
fn the_fake_holds_a_client_to_what_each_endpoint_offers() {
    let fake = FakeAsana::start();
    let h = Harness::new(fake.settings());
    let base = fake.url();
    let get = |path_and_query: &str| {
        let url = format!("{base}{path_and_query}");
        h.run(async {
            let response = reqwest::Client::new()
                .get(&url)
                .bearer_auth(TOKEN)
                .send()
                .await
                .expect("answer");
            let status = response.status().as_u16();
            let body: serde_json::Value = response.json().await.expect("JSON");
            (status, body)
        })
    };
    let since = "modified_since=2026-03-16T00:00:00.000Z";
    let (status, body) = get(&format!("/projects/{PROJECT}/tasks?limit=10&{since}"));
    assert_eq!(status, 400, "{body}");
    assert!(body["errors"][0]["message"]
        .as_str()
        .is_some_and(|m| m.contains("modified_since")));
    assert_eq!(
        get(&format!("/tasks?project={PROJECT}&limit=10&{since}")).0,
        200
    );
    assert_eq!(get(&format!("/projects/{PROJECT}/tasks?limit=101")).0, 400);
    assert_eq!(
        get(&format!("/projects/{PROJECT}/tasks?opt_fields=nmae")).0,
        400
    );
    assert_eq!(get("/tasks?limit=10").0, 400);

    // An offset goes back only with the query it came from.
    let (_, page) = get(&format!(
        "/projects/{PROJECT}/tasks?limit=1&opt_fields=name"
    ));
    assert_eq!(
        page["data"][0],
        serde_json::json!({"gid": TASK, "name": "Tab preview stuck after pointer leaves tab strip"})
    );
    let offset = page["next_page"]["offset"]
        .as_str()
        .expect("an offset")
        .to_owned();
    assert_eq!(
        page["next_page"]["path"],
        format!("/projects/{PROJECT}/tasks?limit=1&offset={offset}").as_str()
    );
    let same = format!("/projects/{PROJECT}/tasks?limit=1&opt_fields=name&offset={offset}");
    assert_eq!(get(&same).1["data"][0]["gid"], "1209876543211002");
    let other = format!("/projects/{PROJECT}/tasks?limit=2&offset={offset}");
    assert_eq!(get(&other).0, 400);
}

#[test]
fn an_offset_that_expires_mid_list_reads_the_list_again_once() {
    let fake = FakeAsana::start_empty();
    let backlog = fake.seed_sections("Big backlog", &[250], TaskSeed::numbered);
    let h = Harness::new(fake.settings());
    fake.expire_offsets_at_the_next_pages(1);
    let polled = h
        .poll(&sections(&backlog.sections), None)
        .expect("read again from the start");
    assert_eq!(gids(&polled), backlog.tasks, "every task once, in order");
    let statuses: Vec<(u16, bool)> = fake
        .requests()
        .iter()
        .map(|r| (r.status, r.param("offset").is_some()))
        .collect();
    assert_eq!(
        statuses,
        [
            (200, false),
            (400, true),
            (200, false),
            (200, true),
            (200, true)
        ]
    );
    // Expired again on the second read: once is the limit, the poll fails.
    fake.expire_offsets_at_the_next_pages(2);
    let error = h
        .poll(&sections(&backlog.sections), None)
        .map(|_| ())
        .expect_err("expired twice in one read");
    assert!(error.is_expired_offset(), "{error}");
}

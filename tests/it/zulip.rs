//! The Zulip client against the fake Zulip: a post read back in the topic window (as
//! `subject`), the window's size, the mention format, each failure as its typed error
//! (a named 4xx, 429 with its wait, 5xx, unreachable, an expired event queue), messages
//! received through an event queue, and the API key in no error, `Debug` or URL. Then the
//! fake's own behaviours the chat tests lean on: several bots, each post stored as from its
//! bot; a Zulip that is down; someone else posting; a topic's messages read directly; the
//! events long poll (a message that arrives while it waits, a heartbeat after the wait,
//! `dont_block`); and the outgoing-webhook payload in the fixture's shape.

use std::future::Future;
use std::time::{Duration, Instant};

use executor::chat::zulip::{
    mention, EventQueue, ZulipClient, ZulipError, ZulipEvent, ZulipOptions, ZulipSettings,
};
use executor::forge::github::Secret;

use crate::fake_zulip::{
    fixture_json, FakeZulip, Fault, API_KEY, BOT_EMAIL, BOT_ID, BOT_NAME, FIRST_ADDED_BOT_ID,
    OWNER_EMAIL, OWNER_ID, OWNER_NAME, STREAM, TOPIC,
};

struct Harness {
    runtime: tokio::runtime::Runtime,
    client: ZulipClient,
}

impl Harness {
    fn new(settings: ZulipSettings) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("client runtime");
        let options = ZulipOptions {
            timeout: Duration::from_secs(5),
            events_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            ..ZulipOptions::default()
        };
        let client = ZulipClient::with_options(settings, options).expect("client");
        Self { runtime, client }
    }

    fn run<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

/// The key is in no printed form of the error.
fn assert_no_key(error: &ZulipError) {
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains(API_KEY), "{shown}");
}

#[test]
fn a_post_comes_back_in_the_topic_window_as_subject() {
    let fake = FakeZulip::start();
    let h = Harness::new(fake.settings());
    let content = format!("{} reply `approve 18` or `deny 18`.", mention(OWNER_NAME));
    let id = h
        .run(h.client.post_to_topic(STREAM, TOPIC, &content))
        .expect("post");
    assert_eq!(id, 48217);

    let window = h
        .run(h.client.topic_window(STREAM, TOPIC, 20))
        .expect("window");
    assert_eq!(window.len(), 5, "the fixtures' four and the post");
    let last = window.last().expect("a message");
    assert_eq!(last.id, id);
    assert_eq!(last.subject, TOPIC);
    assert_eq!(last.content, content);
    assert_eq!(last.sender_id, BOT_ID);
    assert_eq!(last.stream(), Some(STREAM));
    assert_eq!(window[3].content, "approve 17");

    let requests = fake.requests();
    let post = &requests[0];
    assert_eq!(
        (post.method.as_str(), post.path.as_str()),
        ("POST", "/api/v1/messages")
    );
    assert_eq!(post.param("type").as_deref(), Some("stream"));
    assert_eq!(post.param("to").as_deref(), Some(STREAM));
    assert_eq!(post.param("topic").as_deref(), Some(TOPIC));
    let get = &requests[1];
    assert_eq!(get.param("anchor").as_deref(), Some("newest"));
    assert_eq!(get.param("num_before").as_deref(), Some("20"));
    assert_eq!(get.param("num_after").as_deref(), Some("0"));
    assert_eq!(get.param("apply_markdown").as_deref(), Some("false"));
    let narrow: serde_json::Value =
        serde_json::from_str(&get.param("narrow").expect("narrow")).expect("narrow JSON");
    assert_eq!(
        narrow,
        serde_json::json!([
            {"operator": "channel", "operand": STREAM},
            {"operator": "topic", "operand": TOPIC},
        ])
    );
    // The key travels only in the Authorization header.
    for request in &requests {
        assert!(request
            .authorization
            .as_deref()
            .is_some_and(|a| a.starts_with("Basic ")));
        assert!(!request.query.contains(API_KEY) && !request.body.contains(API_KEY));
    }
}

#[test]
fn the_window_keeps_the_last_n_messages_oldest_first() {
    let fake = FakeZulip::start();
    let h = Harness::new(fake.settings());
    for i in 0..5 {
        h.run(
            h.client
                .post_to_topic(STREAM, TOPIC, &format!("[STATUS:step] {i}")),
        )
        .expect("post");
    }
    h.run(h.client.post_to_topic(STREAM, "another topic", "elsewhere"))
        .expect("post");
    let window = h
        .run(h.client.topic_window(STREAM, TOPIC, 3))
        .expect("window");
    let contents: Vec<&str> = window.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(
        contents,
        ["[STATUS:step] 2", "[STATUS:step] 3", "[STATUS:step] 4"]
    );
    assert!(window.iter().all(|m| m.subject == TOPIC));
}

#[test]
fn a_mention_is_the_full_name_in_bold() {
    assert_eq!(mention("Marek Kowalski"), "@**Marek Kowalski**");
}

#[test]
fn a_missing_stream_is_named() {
    let fake = FakeZulip::start();
    let h = Harness::new(fake.settings());
    let error = h
        .run(h.client.post_to_topic("executr", TOPIC, "hello"))
        .expect_err("no such stream");
    match &error {
        ZulipError::Api {
            status,
            code,
            message,
            ..
        } => {
            assert_eq!(*status, 400);
            assert_eq!(code, "STREAM_DOES_NOT_EXIST");
            assert!(message.contains("executr"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        error.to_string().contains("STREAM_DOES_NOT_EXIST"),
        "{error}"
    );
    assert!(!error.is_transient());
    assert_no_key(&error);
}

#[test]
fn a_429_is_rate_limited_with_the_wait() {
    let fake = FakeZulip::start();
    let h = Harness::new(fake.settings());
    fake.fail_next(
        Fault::RateLimited {
            retry_after: 28.706807374954224,
        },
        1,
    );
    let error = h
        .run(h.client.post_to_topic(STREAM, TOPIC, "hello"))
        .expect_err("rate limited");
    match error {
        ZulipError::RateLimited { retry_after } => {
            assert!(
                (retry_after.as_secs_f64() - 28.7068).abs() < 0.001,
                "{retry_after:?}"
            );
        }
        ref other => panic!("{other:?}"),
    }
    assert!(error.is_transient());
    assert_no_key(&error);
    // Until the wait is over the client does not call again: it answers for Zulip.
    let again = h
        .run(h.client.post_to_topic(STREAM, TOPIC, "hello"))
        .expect_err("still waiting");
    assert!(
        matches!(again, ZulipError::RateLimited { retry_after } if retry_after.as_secs_f64() <= 28.71 && retry_after.as_secs() >= 20),
        "{again:?}"
    );
    let statuses: Vec<u16> = fake.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [429], "no request while the budget is spent");
}

#[test]
fn a_500_is_a_server_error_for_the_next_n_requests() {
    let fake = FakeZulip::start();
    let h = Harness::new(fake.settings());
    fake.fail_next(Fault::Status(500), 2);
    for _ in 0..2 {
        let error = h
            .run(h.client.topic_window(STREAM, TOPIC, 20))
            .expect_err("server error");
        assert!(
            matches!(error, ZulipError::Server { status: 500, .. }),
            "{error:?}"
        );
        assert!(error.is_transient());
        assert_no_key(&error);
    }
    assert_eq!(
        h.run(h.client.topic_window(STREAM, TOPIC, 20))
            .expect("window")
            .len(),
        4
    );
}

#[test]
fn a_site_that_does_not_answer_is_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let h = Harness::new(ZulipSettings {
        site: url::Url::parse(&format!("http://{addr}")).expect("url"),
        bot_email: BOT_EMAIL.into(),
        api_key: Secret::new(API_KEY),
    });
    let error = h
        .run(h.client.post_to_topic(STREAM, TOPIC, "hello"))
        .expect_err("nobody listens");
    assert!(matches!(error, ZulipError::Unreachable { .. }), "{error:?}");
    assert!(error.is_transient());
    assert_no_key(&error);
}

#[test]
fn a_wrong_key_is_refused_without_showing_it() {
    let fake = FakeZulip::start();
    let h = Harness::new(ZulipSettings {
        api_key: Secret::new("wrongZulipKeyValue77"),
        ..fake.settings()
    });
    let error = h
        .run(h.client.topic_window(STREAM, TOPIC, 20))
        .expect_err("wrong key");
    assert!(
        matches!(&error, ZulipError::Api { status: 401, .. }),
        "{error:?}"
    );
    let shown = format!("{error} {error:?} {:?}", h.client);
    assert!(!shown.contains("wrongZulipKeyValue77"), "{shown}");
}

#[test]
fn an_event_queue_delivers_posted_messages() {
    let fake = FakeZulip::start();
    let h = Harness::new(fake.settings());
    let queue = h.run(h.client.register_queue(STREAM)).expect("register");
    assert_eq!(queue.last_event_id, -1);
    let register = &fake.requests()[0];
    assert_eq!(register.path, "/api/v1/register");
    assert_eq!(
        register.param("event_types").as_deref(),
        Some(r#"["message"]"#)
    );
    assert_eq!(
        register.param("narrow").as_deref(),
        Some(r#"[["channel","executor"]]"#)
    );

    let posted = h
        .run(
            h.client
                .post_to_topic(STREAM, TOPIC, "[STATUS:build] green"),
        )
        .expect("post");
    let owner = fake.post_as_owner(STREAM, TOPIC, "approve 18");
    let events = h
        .run(h.client.events(&queue, queue.last_event_id))
        .expect("events");
    let messages: Vec<(u64, u64, &str)> = events
        .iter()
        .filter_map(|e| match e {
            ZulipEvent::Message { message, .. } => {
                Some((message.id, message.sender_id, message.content.as_str()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        messages,
        [
            (posted, BOT_ID, "[STATUS:build] green"),
            (owner, OWNER_ID, "approve 18")
        ]
    );
    // Acknowledged events do not come again; with nothing new, a heartbeat.
    let last = events.iter().map(ZulipEvent::id).max().expect("ids");
    let again = h.run(h.client.events(&queue, last)).expect("events");
    assert!(
        matches!(again.as_slice(), [ZulipEvent::Heartbeat { id }] if *id > last),
        "{again:?}"
    );
}

#[test]
fn an_expired_queue_is_its_own_error() {
    let fake = FakeZulip::start();
    let h = Harness::new(fake.settings());
    let queue = h.run(h.client.register_queue(STREAM)).expect("register");
    fake.expire_queues();
    let error = h
        .run(h.client.events(&queue, queue.last_event_id))
        .expect_err("expired");
    assert!(
        matches!(&error, ZulipError::QueueExpired { queue_id } if *queue_id == queue.queue_id),
        "{error:?}"
    );
    assert_no_key(&error);
    // Registering again works, and so does a queue id the fake never made.
    let fresh = h
        .run(h.client.register_queue(STREAM))
        .expect("register again");
    assert_ne!(fresh.queue_id, queue.queue_id);
    h.run(h.client.events(&fresh, fresh.last_event_id))
        .expect("events on the new queue");
    let unknown = EventQueue {
        queue_id: "nope".into(),
        last_event_id: -1,
    };
    assert!(matches!(
        h.run(h.client.events(&unknown, -1)),
        Err(ZulipError::QueueExpired { .. })
    ));
}

#[test]
fn the_key_is_in_no_debug_output() {
    let fake = FakeZulip::start();
    let settings = fake.settings();
    let h = Harness::new(settings.clone());
    let shown = format!("{settings:?} {:?}", h.client);
    assert!(!shown.contains(API_KEY), "{shown}");
    assert!(shown.contains(BOT_EMAIL), "{shown}");
}

const WORKER_EMAIL: &str = "worker-7-bot@lumen.zulipchat.com";
const WORKER_KEY: &str = "FAKEworkerKEY7e3a90c1d2";
const WORKER_NAME: &str = "Worker 7";

#[test]
fn a_second_bot_posts_under_its_own_name() {
    let fake = FakeZulip::start();
    let worker_id = fake.add_bot(WORKER_EMAIL, WORKER_KEY, WORKER_NAME);
    assert_eq!(worker_id, FIRST_ADDED_BOT_ID);
    assert_eq!(
        fake.add_bot(
            "worker-8-bot@lumen.zulipchat.com",
            "FAKEworkerKEY8",
            "Worker 8"
        ),
        FIRST_ADDED_BOT_ID + 1
    );
    let worker = Harness::new(fake.bot_settings(WORKER_EMAIL, WORKER_KEY));
    let orchestrator = Harness::new(fake.settings());
    let from_worker = worker
        .run(
            worker
                .client
                .post_to_topic(STREAM, TOPIC, "[STATUS:build] green"),
        )
        .expect("the worker posts");
    let from_orchestrator = orchestrator
        .run(orchestrator.client.post_to_topic(STREAM, TOPIC, "noted"))
        .expect("the default bot still posts");

    let window = worker
        .run(worker.client.topic_window(STREAM, TOPIC, 2))
        .expect("window");
    let senders: Vec<(u64, u64, &str, &str)> = window
        .iter()
        .map(|m| {
            (
                m.id,
                m.sender_id,
                m.sender_email.as_str(),
                m.sender_full_name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        senders,
        [
            (from_worker, worker_id, WORKER_EMAIL, WORKER_NAME),
            (from_orchestrator, BOT_ID, BOT_EMAIL, BOT_NAME),
        ]
    );

    // One bot's key does not open another's account, and an unknown key opens none.
    for (email, key) in [
        (BOT_EMAIL, WORKER_KEY),
        (WORKER_EMAIL, API_KEY),
        (WORKER_EMAIL, "wrongWorkerKey"),
    ] {
        let h = Harness::new(fake.bot_settings(email, key));
        let error = h
            .run(h.client.post_to_topic(STREAM, TOPIC, "hello"))
            .expect_err("refused");
        assert!(
            matches!(&error, ZulipError::Api { status: 401, .. }),
            "{email}: {error:?}"
        );
    }
    assert_eq!(
        fake.messages(STREAM, TOPIC).len(),
        6,
        "nothing stored on a 401"
    );
}

#[test]
fn a_zulip_that_is_down_answers_every_request_with_its_status() {
    let fake = FakeZulip::start();
    let h = Harness::new(fake.settings());
    fake.set_down(Some(503));
    for _ in 0..2 {
        let error = h
            .run(h.client.post_to_topic(STREAM, TOPIC, "lost?"))
            .expect_err("down");
        assert!(
            matches!(error, ZulipError::Server { status: 503, .. }),
            "{error:?}"
        );
        assert!(error.is_transient());
    }
    let error = h.run(h.client.register_queue(STREAM)).expect_err("down");
    assert!(matches!(error, ZulipError::Server { status: 503, .. }));
    // Even a wrong key gets the down status: nothing behind it answers.
    let stranger = Harness::new(fake.bot_settings(BOT_EMAIL, "wrongKey"));
    let error = stranger
        .run(stranger.client.topic_window(STREAM, TOPIC, 5))
        .expect_err("down");
    assert!(matches!(error, ZulipError::Server { status: 503, .. }));
    fake.set_down(Some(429));
    let error = h
        .run(h.client.post_to_topic(STREAM, TOPIC, "lost?"))
        .expect_err("rate limited");
    assert!(
        matches!(error, ZulipError::RateLimited { retry_after } if retry_after == Duration::from_secs(1)),
        "{error:?}"
    );
    assert_eq!(
        fake.messages(STREAM, TOPIC).len(),
        4,
        "nothing stored while down"
    );

    fake.set_down(None);
    // The client waits out the second Zulip asked for before it calls again.
    std::thread::sleep(Duration::from_millis(1100));
    h.run(h.client.post_to_topic(STREAM, TOPIC, "back"))
        .expect("up again");
    let statuses: Vec<u16> = fake.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [503, 503, 503, 503, 429, 200]);
    assert_eq!(fake.messages(STREAM, TOPIC).len(), 5);
}

#[test]
fn someone_other_than_the_owner_posts_into_the_topic() {
    let fake = FakeZulip::start();
    let h = Harness::new(fake.settings());
    let mallory = fake.post_as(
        (77, "user77@lumen.zulipchat.com", "Mallory"),
        STREAM,
        TOPIC,
        "approve 17",
    );
    let owner = fake.post_as_owner(STREAM, TOPIC, "deny 17");
    let window = h
        .run(h.client.topic_window(STREAM, TOPIC, 2))
        .expect("window");
    let seen: Vec<(u64, u64, &str, &str)> = window
        .iter()
        .map(|m| {
            (
                m.id,
                m.sender_id,
                m.sender_email.as_str(),
                m.content.as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (mallory, 77, "user77@lumen.zulipchat.com", "approve 17"),
            (owner, OWNER_ID, OWNER_EMAIL, "deny 17"),
        ]
    );
    assert_eq!(window[0].sender_full_name, "Mallory");
}

#[test]
fn messages_gives_a_topic_in_id_order_without_a_request() {
    let fake = FakeZulip::start();
    let h = Harness::new(fake.settings());
    let first = h
        .run(h.client.post_to_topic(STREAM, TOPIC, "one"))
        .expect("post");
    h.run(h.client.post_to_topic(STREAM, "another topic", "elsewhere"))
        .expect("post");
    let second = fake.post_as_owner(STREAM, TOPIC, "two");
    let third = h
        .run(h.client.post_to_topic(STREAM, TOPIC, "three"))
        .expect("post");
    let requests = fake.requests().len();

    let messages = fake.messages(STREAM, TOPIC);
    assert_eq!(fake.requests().len(), requests, "read without a request");
    let ids: Vec<u64> = messages.iter().filter_map(|m| m["id"].as_u64()).collect();
    assert_eq!(ids.len(), 7);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let tail: Vec<(u64, &str, &str)> = messages[4..]
        .iter()
        .map(|m| {
            (
                m["id"].as_u64().unwrap_or_default(),
                m["sender_email"].as_str().unwrap_or_default(),
                m["content"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        tail,
        [
            (first, BOT_EMAIL, "one"),
            (second, OWNER_EMAIL, "two"),
            (third, BOT_EMAIL, "three"),
        ]
    );
    assert_eq!(messages[0]["subject"], TOPIC);
    let other = fake.messages(STREAM, "another topic");
    assert_eq!(other.len(), 1);
    assert_eq!(other[0]["content"], "elsewhere");
    assert!(fake.messages("nowhere", TOPIC).is_empty());
}

#[test]
fn an_events_poll_waits_for_a_message_and_gets_it() {
    let fake = FakeZulip::start();
    fake.set_events_wait(Duration::from_secs(4));
    let h = Harness::new(fake.settings());
    let queue = h.run(h.client.register_queue(STREAM)).expect("register");
    let started = Instant::now();
    let (events, posted) = h.run(async {
        tokio::join!(h.client.events(&queue, queue.last_event_id), async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            fake.post_as_owner(STREAM, TOPIC, "approve 18")
        })
    });
    let elapsed = started.elapsed();
    let events = events.expect("events");
    assert!(
        elapsed >= Duration::from_millis(250) && elapsed < Duration::from_secs(3),
        "answered when the message came: {elapsed:?}"
    );
    match events.as_slice() {
        [ZulipEvent::Message { message, .. }] => {
            assert_eq!(message.id, posted);
            assert_eq!(message.sender_id, OWNER_ID);
            assert_eq!(message.content, "approve 18");
        }
        other => panic!("{other:?}"),
    }
    // A post through the API wakes a waiting poll too.
    let last = events[0].id();
    let (events, posted) = h.run(async {
        tokio::join!(h.client.events(&queue, last), async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            h.client.post_to_topic(STREAM, TOPIC, "noted").await
        })
    });
    let posted = posted.expect("post");
    assert!(
        matches!(events.expect("events").as_slice(), [ZulipEvent::Message { message, .. }] if message.id == posted)
    );
}

#[test]
fn an_events_poll_with_nothing_new_answers_a_heartbeat_after_the_wait() {
    let fake = FakeZulip::start();
    fake.set_events_wait(Duration::from_millis(400));
    let h = Harness::new(fake.settings());
    let queue = h.run(h.client.register_queue(STREAM)).expect("register");
    let started = Instant::now();
    let events = h
        .run(h.client.events(&queue, queue.last_event_id))
        .expect("events");
    let elapsed = started.elapsed();
    assert!(
        matches!(events.as_slice(), [ZulipEvent::Heartbeat { .. }]),
        "{events:?}"
    );
    assert!(
        elapsed >= Duration::from_millis(350) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
    // Expiring the queue ends a waiting poll with BAD_EVENT_QUEUE_ID at once.
    fake.set_events_wait(Duration::from_secs(4));
    let started = Instant::now();
    let (result, ()) = h.run(async {
        tokio::join!(h.client.events(&queue, events[0].id()), async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            fake.expire_queues();
        })
    });
    assert!(
        matches!(result, Err(ZulipError::QueueExpired { .. })),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    // So does a Zulip going down.
    let fresh = h.run(h.client.register_queue(STREAM)).expect("register");
    let (result, ()) = h.run(async {
        tokio::join!(h.client.events(&fresh, -1), async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            fake.set_down(Some(502));
        })
    });
    assert!(
        matches!(result, Err(ZulipError::Server { status: 502, .. })),
        "{result:?}"
    );
}

#[test]
fn dont_block_answers_at_once() {
    let fake = FakeZulip::start();
    fake.set_events_wait(Duration::from_secs(5));
    let h = Harness::new(fake.settings());
    let queue = h.run(h.client.register_queue(STREAM)).expect("register");
    let poll = |last: i64| {
        let url = format!(
            "{}api/v1/events?queue_id={}&last_event_id={last}&dont_block=true",
            fake.site(),
            queue.queue_id
        );
        h.run(async {
            let response = reqwest::Client::new()
                .get(url)
                .basic_auth(BOT_EMAIL, Some(API_KEY))
                .send()
                .await
                .expect("answer");
            assert_eq!(response.status().as_u16(), 200);
            response.json::<serde_json::Value>().await.expect("JSON")
        })
    };
    let started = Instant::now();
    let empty = poll(-1);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(empty["events"], serde_json::json!([]));
    let posted = fake.post_as_owner(STREAM, TOPIC, "approve 19");
    let full = poll(-1);
    assert_eq!(full["events"][0]["type"], "message");
    assert_eq!(full["events"][0]["message"]["id"], posted);
}

#[test]
fn the_outgoing_webhook_payload_has_the_fixture_shape() {
    let fake = FakeZulip::start();
    let h = Harness::new(fake.settings());
    // Two posts first, so the owner's mention gets the fixture's id, 48219.
    for text in ["[STATUS:build] green", "[STATUS:tests] running"] {
        h.run(h.client.post_to_topic(STREAM, TOPIC, text))
            .expect("post");
    }
    let id = fake.post_as_owner(STREAM, TOPIC, "@**Executor** status");
    assert_eq!(id, 48219);
    let token = "kq8Zy3xW0vR7pN2mL5tH9jB4cD6fG1sA";
    let payload = fake.outgoing_webhook_payload(id, token);

    let mut expected = fixture_json("outgoing_webhook_payload.json");
    // Only the clock differs from the fixture's story.
    let timestamp = payload["message"]["timestamp"].clone();
    assert!(
        timestamp.as_i64().is_some_and(|t| t > 1_773_654_500),
        "{timestamp}"
    );
    expected["message"]["timestamp"] = timestamp;
    assert_eq!(payload, expected);
    // Same keys in the same order, at both levels.
    assert_eq!(
        serde_json::to_string(&payload).expect("JSON"),
        serde_json::to_string(&expected).expect("JSON")
    );

    // Addressed to the bot it mentions.
    let worker_id = fake.add_bot(WORKER_EMAIL, WORKER_KEY, WORKER_NAME);
    let id = fake.post_as_owner(STREAM, TOPIC, "@**Worker 7** what now? <b>&</b>");
    let payload = fake.outgoing_webhook_payload(id, token);
    assert_eq!(payload["bot_email"], WORKER_EMAIL);
    assert_eq!(payload["bot_full_name"], WORKER_NAME);
    assert_eq!(payload["trigger"], "mention");
    assert_eq!(payload["token"], token);
    assert_eq!(payload["data"], "@**Worker 7** what now? <b>&</b>");
    assert_eq!(
        payload["message"]["rendered_content"],
        format!(
            "<p><span class=\"user-mention\" data-user-id=\"{worker_id}\">@Worker 7</span> what now? &lt;b&gt;&amp;&lt;/b&gt;</p>"
        )
    );
}

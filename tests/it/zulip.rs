//! The Zulip client against the fake Zulip: a post read back in the topic window (as
//! `subject`), the window's size, the mention format, each failure as its typed error
//! (a named 4xx, 429 with its wait, 5xx, unreachable, an expired event queue), messages
//! received through an event queue, and the API key in no error, `Debug` or URL.

use std::future::Future;
use std::time::Duration;

use executor::chat::zulip::{
    mention, EventQueue, ZulipClient, ZulipError, ZulipEvent, ZulipOptions, ZulipSettings,
};
use executor::forge::github::Secret;

use crate::fake_zulip::{
    FakeZulip, Fault, API_KEY, BOT_EMAIL, BOT_ID, OWNER_ID, OWNER_NAME, STREAM, TOPIC,
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
    // The fault was for one request only.
    h.run(h.client.post_to_topic(STREAM, TOPIC, "hello"))
        .expect("post after the wait");
    let statuses: Vec<u16> = fake.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [429, 200]);
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

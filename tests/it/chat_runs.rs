//! Chat end to end, through the binary and the fake Zulip: a worker's escalation reaches the
//! owner as an @mention in the topic, the owner answers there (and only the owner counts),
//! the run resumes; two personas on one bot refuse to start; a Zulip that is down loses
//! nothing and delays nothing else, across a daemon restart; an expired event queue misses
//! no reply; the outgoing webhook checks its token; webhooks get what their priorities say.

use std::time::Duration;

use serde_json::Value;

use crate::daemon::Daemon;
use crate::fake_webhook::FakeWebhook;
use crate::fake_zulip::{FakeZulip, Fault, API_KEY, BOT_EMAIL, OWNER_EMAIL, OWNER_NAME, STREAM};
use crate::runner::workspace;
use crate::support::{eventually, Workspace};

const TOPIC: &str = "executor";
const WORKER_BOT: &str = "executor-worker-bot@lumen.zulipchat.com";
const WORKER_KEY: &str = "FAKEworkerKEY5d1c88a0e4";
const WORKER_NAME: &str = "Executor worker";
const WAIT: Duration = Duration::from_secs(60);

/// Asks the owner before merging; merges or not as the resume prompt says.
const MERGING_WORKER: &str = "prompt=$(cat); \
    if printf '%s' \"$prompt\" | grep -q 'The owner answered your escalation'; then \
      if printf '%s' \"$prompt\" | grep -q ': approve\\.'; then \
        echo changed > CHANGED.md; echo '[DONE:implemented] merged as the owner allowed'; \
      else echo changed > CHANGED.md; echo '[DONE:implemented] left unmerged as the owner said'; fi; \
    else echo '[STATUS:investigation] ready to merge'; \
      echo '[ESCALATE:merge_pr] pr=12 may I merge PR 12?'; fi";

/// The `[chat]` sections for `fake`, the owner being the fixtures' Marek.
fn chat_config(fake: &FakeZulip, extra: &str) -> String {
    format!(
        r#"
[chat]
retry_base = "100ms"
retry_max = "1s"

[chat.owner]
name = "{OWNER_NAME}"
email = "{OWNER_EMAIL}"

[chat.zulip]
site = "{site}"
stream = "{STREAM}"
topic = "{TOPIC}"
{extra}

[chat.personas.orchestrator]
name = "Executor"
email = "{BOT_EMAIL}"
key_env = "ZULIP_ORCHESTRATOR_KEY"

[chat.personas.worker]
name = "{WORKER_NAME}"
email_env = "ZULIP_WORKER_EMAIL"
key_env = "ZULIP_WORKER_KEY"
"#,
        site = fake.site()
    )
}

fn chat_workspace(fake: &FakeZulip, worker: &str, zulip_extra: &str, extra: &str) -> Workspace {
    fake.add_bot(WORKER_BOT, WORKER_KEY, WORKER_NAME);
    let mut ws = workspace(
        &["/bin/sh", "-c", worker],
        &[],
        &format!("{}{extra}", chat_config(fake, zulip_extra)),
    );
    ws.env.extend([
        ("ZULIP_ORCHESTRATOR_KEY".to_string(), API_KEY.to_string()),
        ("ZULIP_WORKER_EMAIL".to_string(), WORKER_BOT.to_string()),
        ("ZULIP_WORKER_KEY".to_string(), WORKER_KEY.to_string()),
    ]);
    ws
}

/// The topic's messages: (sender email, content without executor's hidden mark), oldest
/// first.
fn topic(fake: &FakeZulip) -> Vec<(String, String)> {
    fake.messages(STREAM, TOPIC)
        .iter()
        .map(|m| {
            (
                m["sender_email"].as_str().unwrap_or_default().to_string(),
                executor::core::outbox::without_post_mark(
                    m["content"].as_str().unwrap_or_default(),
                )
                .to_string(),
            )
        })
        .collect()
}

fn escalation_id(ws: &Workspace) -> i64 {
    let listed = ws.json(&["escalations", "--json"]);
    listed[0]["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no open escalation: {listed}"))
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_escalation_is_answered_in_the_topic_by_the_owner_only_and_exactly_once() {
    let fake = FakeZulip::start();
    let ws = chat_workspace(&fake, MERGING_WORKER, "", "");
    ws.ok(&["add", "--title", "Merge when allowed", "--gid", "T-123"]);
    ws.ok(&["go", "T-123"]);
    let out = ws.run(&["run", "--once"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let id = escalation_id(&ws);

    // The worker's lines under the worker's bot, then the orchestrator's @mention with the
    // window and the answer syntax.
    let said = topic(&fake);
    let worker_lines: Vec<&String> = said
        .iter()
        .filter(|(from, _)| from == WORKER_BOT)
        .map(|(_, text)| text)
        .collect();
    assert_eq!(worker_lines.len(), 2, "{said:#?}");
    assert!(worker_lines[0].contains("[STATUS:investigation] ready to merge"));
    assert!(worker_lines[1].contains("[ESCALATE:merge_pr] pr=12 may I merge PR 12?"));
    let (from, mention) = said.last().expect("the escalation");
    assert_eq!(from, BOT_EMAIL);
    assert!(
        mention.starts_with(&format!("@**{OWNER_NAME}** escalation **{id}**")),
        "{mention}"
    );
    assert!(mention.contains("merge_pr"), "{mention}");
    assert!(
        mention.contains("worker [STATUS:investigation] ready to merge"),
        "the window: {mention}"
    );
    assert!(
        mention.contains(&format!("`approve {id}`")) && mention.contains(&format!("`deny {id} ")),
        "{mention}"
    );

    // Someone else answers first, then the owner, twice.
    fake.post_as(
        (77, "mallory@lumen.zulipchat.com", "Mallory"),
        STREAM,
        TOPIC,
        &format!("approve {id}"),
    );
    fake.post_as_owner(STREAM, TOPIC, &format!("approve {id} squash it"));
    fake.post_as_owner(STREAM, TOPIC, &format!("approve {id}"));
    let out = ws.run(&["run", "--once"]);
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("not the owner") && stderr.contains("mallory@lumen.zulipchat.com"),
        "the non-owner's command is logged: {stderr}"
    );

    let shown = ws.json(&["show", "T-123", "--json"]);
    assert_eq!(shown["task"]["status"], "done", "{stderr}");
    assert_eq!(shown["runs"][0]["state"], "complete");
    let escalation = &ws.json(&["escalations", "--all", "--json"])[0];
    assert_eq!(escalation["resolution"], "approve");
    assert_eq!(escalation["resolution_note"], "squash it");
    assert_eq!(
        escalation["resolved_by"],
        format!("{OWNER_NAME} (zulip)").as_str()
    );
    let results = result_files(&ws, "T-123");
    assert!(
        results
            .iter()
            .any(|r| r.contains("merged as the owner allowed")),
        "the worker resumed with the approval: {results:?}"
    );

    // Acknowledged once, the second answer said to change nothing, Mallory not answered.
    let said = topic(&fake);
    let answers: Vec<&String> = said
        .iter()
        .filter(|(from, text)| from == BOT_EMAIL && text.contains(&format!("scalation {id}")))
        .map(|(_, text)| text)
        .collect();
    assert!(
        answers
            .iter()
            .any(|t| t.contains(&format!("Escalation {id}: approve recorded"))),
        "{said:#?}"
    );
    assert_eq!(
        answers
            .iter()
            .filter(|t| t.contains("already answered") && t.contains("nothing changed"))
            .count(),
        1,
        "{said:#?}"
    );
    assert_eq!(
        said.iter()
            .filter(|(from, _)| from == BOT_EMAIL)
            .filter(|(_, t)| t.contains("approve recorded"))
            .count(),
        1,
        "{said:#?}"
    );
    // The resumed worker's DONE is mirrored too, and the owner is told the run is done.
    assert!(said
        .iter()
        .any(|(from, t)| from == WORKER_BOT && t.contains("[DONE:implemented] merged")));
    assert!(said
        .iter()
        .any(|(from, t)| from == BOT_EMAIL && t.contains("**complete**")));

    // The topic's history from before executor's first read was never taken as answers.
    let again = ws.run(&["run", "--once"]);
    assert!(again.status.success());
    assert_eq!(topic(&fake).len(), said.len(), "a quiet run posts nothing");
}

fn result_files(ws: &Workspace, gid: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(runs) = std::fs::read_dir(ws.path().join("logs").join(gid)) else {
        return found;
    };
    for run in runs.filter_map(|e| e.ok()).filter(|e| e.path().is_dir()) {
        let Ok(records) = std::fs::read_dir(run.path()) else {
            continue;
        };
        for record in records.filter_map(|e| e.ok()) {
            if let Ok(text) = std::fs::read_to_string(record.path().join("result.json")) {
                found.push(text);
            }
        }
    }
    found
}

#[test]
fn the_owners_other_words_are_a_note_on_the_run_and_go_starts_a_task() {
    let fake = FakeZulip::start();
    let ws = chat_workspace(&fake, MERGING_WORKER, "", "");
    ws.ok(&["add", "--title", "Merge when allowed", "--gid", "T-1"]);
    ws.ok(&["add", "--title", "Later", "--gid", "T-2"]);
    ws.ok(&["skip", "T-2"]);
    ws.ok(&["go", "T-1"]);
    ws.ok(&["run", "--once"]);
    let run_id = ws.json(&["show", "T-1", "--json"])["runs"][0]["id"]
        .as_i64()
        .expect("a run");
    fake.post_as_owner(STREAM, TOPIC, "use a squash merge, please");
    // Another bot's line in the worker format, naming the run, is read back into it.
    fake.post_as(
        (55, "ci-bot@lumen.zulipchat.com", "CI bot"),
        STREAM,
        TOPIC,
        &format!("[STATUS:ci_green] run={run_id} all checks passed"),
    );
    fake.post_as_owner(STREAM, TOPIC, "@**Executor** go T-2");
    let out = ws.run(&["run", "--once"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let shown = ws.json(&["show", "T-1", "--json"]);
    let messages = shown["messages"].as_array().cloned().unwrap_or_default();
    assert!(
        messages
            .iter()
            .any(|m| m["source"] == "owner" && m["text"] == "use a squash merge, please"),
        "{shown}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m["source"] == "chat:CI bot" && m["kind"] == "ci_green"),
        "{shown}"
    );
    let t2 = ws.json(&["show", "T-2", "--json"]);
    assert_ne!(t2["task"]["status"], "skip", "{t2}");
    let said = topic(&fake);
    assert!(
        said.iter().any(|(_, t)| t.contains("Noted on run")),
        "{said:#?}"
    );
    assert!(
        said.iter()
            .any(|(_, t)| t.contains("`T-2`: skip → approved")),
        "{said:#?}"
    );
}

#[test]
fn two_personas_on_one_bot_refuse_to_start_naming_both() {
    let fake = FakeZulip::start();
    let mut ws = chat_workspace(&fake, MERGING_WORKER, "", "");
    ws.env.retain(|(k, _)| k != "ZULIP_WORKER_EMAIL");
    ws.env
        .push(("ZULIP_WORKER_EMAIL".to_string(), BOT_EMAIL.to_string()));
    for command in [&["run", "--once"][..], &["daemon"][..]] {
        let err = ws.fails_with(2, command);
        assert!(
            err.contains("`orchestrator` and `worker` share one bot credential"),
            "{command:?}: {err}"
        );
    }
    // The same key under two emails is one credential too.
    ws.env
        .retain(|(k, _)| k != "ZULIP_WORKER_EMAIL" && k != "ZULIP_WORKER_KEY");
    ws.env.extend([
        ("ZULIP_WORKER_EMAIL".to_string(), WORKER_BOT.to_string()),
        ("ZULIP_WORKER_KEY".to_string(), API_KEY.to_string()),
    ]);
    let err = ws.fails_with(2, &["run", "--once"]);
    assert!(err.contains("the same API key"), "{err}");
    assert!(!err.contains(API_KEY), "the key is never printed: {err}");
}

/// Says five steps and is done.
const STEPPING_WORKER: &str =
    "cat >/dev/null; for n in 1 2 3 4 5; do echo \"[STATUS:step] n=$n\"; done; \
    echo changed > CHANGED.md; echo '[DONE:implemented] all five'";

#[test]
fn a_zulip_that_is_down_loses_nothing_and_the_messages_arrive_in_order_after_a_restart() {
    let fake = FakeZulip::start();
    let ws = chat_workspace(&fake, STEPPING_WORKER, "", "");
    // A first task while Zulip is up: executor has spoken in the topic before the outage.
    ws.ok(&["add", "--title", "Warm up", "--gid", "S-0"]);
    ws.ok(&["go", "S-0"]);
    ws.ok(&["run", "--once"]);
    assert!(!topic(&fake).is_empty());
    let before = topic(&fake).len();

    fake.set_down(Some(500));
    ws.ok(&["add", "--title", "Five steps", "--gid", "S-1"]);
    ws.ok(&["go", "S-1"]);
    // The runner works on while Zulip is down; what it said waits in the outbox.
    let out = ws.run(&["run", "--once"]);
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("cannot be reached"), "{stderr}");
    assert_eq!(
        ws.json(&["show", "S-1", "--json"])["task"]["status"],
        "done"
    );
    let waiting = outbox_waiting(&ws);
    assert!(waiting >= 7, "5 steps, DONE, complete: {waiting}");
    assert_eq!(topic(&fake).len(), before);

    // A daemon that starts while Zulip is still down keeps them through its restart.
    let daemon = Daemon::start(&ws);
    std::thread::sleep(Duration::from_millis(1500));
    drop(daemon);
    assert_eq!(
        outbox_waiting(&ws),
        waiting,
        "nothing lost or sent while down"
    );
    let failed_posts = fake
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/messages"))
        .filter(|r| r.status == 500)
        .count();
    assert!(failed_posts >= 2, "the daemon kept trying: {failed_posts}");
    // The owner writes while Zulip cannot be read by executor.
    fake.post_as_owner(STREAM, TOPIC, "written during the outage");

    fake.set_down(None);
    let _daemon = Daemon::start(&ws);
    let said = eventually(WAIT, "the outbox to drain into the topic", || {
        let said = topic(&fake);
        (outbox_waiting(&ws) == 0 && said.iter().any(|(_, t)| t.contains("Noted"))).then_some(said)
    });
    let steps: Vec<String> = said[before..]
        .iter()
        .filter_map(|(_, t)| t.lines().find(|l| l.starts_with("[STATUS:step]")))
        .map(str::to_string)
        .collect();
    assert_eq!(
        steps,
        (1..=5)
            .map(|n| format!("[STATUS:step] n={n}"))
            .collect::<Vec<_>>(),
        "in order, once each: {said:#?}"
    );
    let position = |needle: &str| {
        said[before..]
            .iter()
            .position(|(_, t)| t.contains(needle))
            .unwrap_or_else(|| panic!("{needle} in {said:#?}"))
    };
    assert!(position("[DONE:implemented] all five") < position("`S-1` is **complete**"));
    // The owner's words from the outage were read once Zulip was back, and answered.
    assert_eq!(
        said.iter().filter(|(_, t)| t.starts_with("Noted")).count(),
        1,
        "{said:#?}"
    );
}

fn outbox_waiting(ws: &Workspace) -> i64 {
    ws.json(&["status", "--json"])["outbox"]
        .as_array()
        .map(|rows| rows.iter().filter_map(|r| r["undelivered"].as_i64()).sum())
        .unwrap_or_default()
}

#[test]
fn an_expired_event_queue_is_registered_again_and_no_reply_is_missed() {
    let fake = FakeZulip::start();
    let ws = chat_workspace(&fake, MERGING_WORKER, "", "");
    ws.ok(&["add", "--title", "Merge when allowed", "--gid", "Q-1"]);
    let _daemon = Daemon::start(&ws);
    ws.ok(&["go", "Q-1"]);
    let id = eventually(WAIT, "the escalation in the topic", || {
        topic(&fake)
            .iter()
            .any(|(_, t)| t.contains("escalation **"))
            .then(|| escalation_id(&ws))
    });
    let registered = || {
        fake.requests()
            .iter()
            .filter(|r| r.path.ends_with("/register") && r.status == 200)
            .count()
    };
    assert!(registered() >= 1);
    // The queue dies, and no new one can be made until the owner has answered: the answer
    // reaches no queue, only the read of the topic after the next registration.
    fake.set_register_down(Some(500));
    fake.expire_queues();
    fake.post_as_owner(STREAM, TOPIC, &format!("approve {id}"));
    let failed_registers = || {
        fake.requests()
            .iter()
            .filter(|r| r.path.ends_with("/register") && r.status == 500)
            .count()
    };
    eventually(WAIT, "a registration to fail", || {
        (failed_registers() >= 1).then_some(())
    });
    fake.set_register_down(None);
    eventually(WAIT, "the run to complete on the approval", || {
        (ws.json(&["show", "Q-1", "--json"])["task"]["status"] == "done").then_some(())
    });
    assert!(registered() >= 2, "a new queue was registered");
    let escalation = &ws.json(&["escalations", "--all", "--json"])[0];
    assert_eq!(escalation["resolution"], "approve");
    let said = eventually(WAIT, "the acknowledgement", || {
        let said = topic(&fake);
        said.iter()
            .any(|(_, t)| t.contains(&format!("Escalation {id}: approve recorded")))
            .then_some(said)
    });
    assert_eq!(
        said.iter()
            .filter(|(_, t)| t.contains("approve recorded"))
            .count(),
        1
    );
}

#[test]
fn the_outgoing_webhook_takes_the_owners_answer_and_refuses_a_wrong_token() {
    let fake = FakeZulip::start();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let mut ws = chat_workspace(
        &fake,
        MERGING_WORKER,
        &format!("receive = \"webhook\"\nwebhook_listen = \"127.0.0.1:{port}\""),
        "",
    );
    let token = "kq8Zy3xW0vR7pN2mL5tH9jB4cD6fG1sA";
    ws.env
        .push(("ZULIP_WEBHOOK_TOKEN".to_string(), token.to_string()));
    ws.ok(&["add", "--title", "Merge when allowed", "--gid", "W-1"]);
    ws.ok(&["go", "W-1"]);
    ws.ok(&["run", "--once"]);
    let id = escalation_id(&ws);
    let reads = || {
        fake.requests()
            .iter()
            .filter(|r| r.method == "GET" && r.path.ends_with("/messages"))
            .count()
    };
    let before = reads();
    let _daemon = Daemon::start(&ws);
    // The daemon reads the topic once as it starts; the owner speaks after that read, so
    // only the webhook (or the next read, a minute later) can bring the answer.
    eventually(WAIT, "the daemon's first read of the topic", || {
        (reads() > before).then_some(())
    });
    let message = fake.post_as_owner(STREAM, TOPIC, &format!("@**Executor** approve {id}"));
    let url = format!("http://127.0.0.1:{port}/zulip");
    let post = |payload: &Value| {
        eventually(WAIT, "the webhook endpoint to answer", || {
            post_json(&url, payload)
        })
    };
    let (wrong, _) = post(&fake.outgoing_webhook_payload(message, "not-the-token"));
    assert_eq!(wrong, 401);
    assert_eq!(
        ws.json(&["escalations", "--json"]).as_array().map(Vec::len),
        Some(1),
        "a wrong token changes nothing"
    );
    let (status, body) = post(&fake.outgoing_webhook_payload(message, token));
    assert_eq!(status, 200);
    let body: Value = serde_json::from_str(&body).expect("JSON answer");
    assert_eq!(body["response_not_required"], true);
    eventually(WAIT, "the run to complete on the approval", || {
        (ws.json(&["show", "W-1", "--json"])["task"]["status"] == "done").then_some(())
    });
    // Delivered twice (Zulip retries a webhook that timed out): taken once.
    let (again, _) = post(&fake.outgoing_webhook_payload(message, token));
    assert_eq!(again, 200);
    let said = eventually(WAIT, "the acknowledgement", || {
        let said = topic(&fake);
        said.iter()
            .any(|(_, t)| t.contains("approve recorded"))
            .then_some(said)
    });
    assert!(!said.iter().any(|(_, t)| t.contains("already answered")));
}

#[test]
fn webhooks_get_the_priorities_they_ask_for_and_retry_until_delivered() {
    let hook = FakeWebhook::start();
    let slack = FakeWebhook::start();
    let mut ws = workspace(
        &["/bin/sh", "-c", MERGING_WORKER],
        &[],
        r#"
[chat]
retry_base = "100ms"
retry_max = "1s"

[[chat.webhooks]]
name = "ops"
kind = "json"
url_env = "EXECUTOR_OPS_WEBHOOK_URL"
priorities = ["urgent"]

[[chat.webhooks]]
name = "team"
kind = "slack"
url_env = "SLACK_TEAM_WEBHOOK_URL"
priorities = ["urgent", "action", "info"]
"#,
    );
    ws.env.extend([
        (
            "EXECUTOR_OPS_WEBHOOK_URL".to_string(),
            hook.url("/hooks/ops-secret-path"),
        ),
        (
            "SLACK_TEAM_WEBHOOK_URL".to_string(),
            slack.url("/services/T0/B0/slack-secret"),
        ),
    ]);
    ws.ok(&["add", "--title", "Merge when allowed", "--gid", "H-1"]);
    ws.ok(&["go", "H-1"]);
    hook.set_status(Some(503));
    let out = ws.run(&["run", "--once"]);
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("ops-secret-path"), "{stderr}");
    assert!(!stderr.contains("slack-secret"), "{stderr}");
    assert_eq!(outbox_waiting(&ws), 1, "the urgent one waits for ops");
    let posted = slack.received();
    assert_eq!(posted.len(), 3, "two worker lines and the escalation");
    assert!(posted.iter().all(|p| p.json()["text"].is_string()));

    hook.set_status(None);
    std::thread::sleep(Duration::from_millis(1100));
    ws.ok(&["run", "--once"]);
    let got = hook.received();
    let delivered: Vec<Value> = got
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| r.json())
        .collect();
    assert_eq!(
        delivered.len(),
        1,
        "only the urgent escalation: {delivered:?}"
    );
    assert_eq!(delivered[0]["priority"], "urgent");
    assert!(delivered[0]["text"]
        .as_str()
        .is_some_and(|t| t.contains("escalation **")));
    assert_eq!(delivered[0]["task_gid"], "H-1");
    assert_eq!(outbox_waiting(&ws), 0);
}

/// POSTs `payload` as JSON; the status and body, or `None` when nothing answered.
fn post_json(url: &str, payload: &Value) -> Option<(u16, String)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    runtime.block_on(async {
        let answer = reqwest::Client::new()
            .post(url)
            .json(payload)
            .send()
            .await
            .ok()?;
        let status = answer.status().as_u16();
        Some((status, answer.text().await.ok()?))
    })
}

#[test]
fn an_answer_is_taken_even_when_the_very_first_read_of_the_topic_failed() {
    let fake = FakeZulip::start();
    let ws = chat_workspace(&fake, MERGING_WORKER, "", "");
    ws.ok(&["add", "--title", "Merge when allowed", "--gid", "F-1"]);
    ws.ok(&["go", "F-1"]);
    // The first requests of the first run (the owner's lookup, then its read of the topic)
    // fail; the posts work.
    fake.fail_next(Fault::Status(500), 2);
    let out = ws.run(&["run", "--once"]);
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("cannot read the chat topic"), "{stderr}");
    let id = escalation_id(&ws);
    assert!(topic(&fake)
        .iter()
        .any(|(_, t)| t.contains("escalation **")));
    fake.post_as_owner(STREAM, TOPIC, &format!("approve {id}"));
    let out = ws.run(&["run", "--once"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(
        ws.json(&["show", "F-1", "--json"])["task"]["status"],
        "done",
        "the approval after the failed first read was taken"
    );
}

/// Plants, on the head of the Zulip outbox, the claim of a process of this host that is
/// gone (as a `kill -9` mid-post leaves it), running for an hour still; with `posted`, that
/// process's post of the row is in the topic too. The head's outbox id.
fn plant_dead_claim(fake: &FakeZulip, ws: &Workspace, posted: bool) -> i64 {
    let mut gone = std::process::Command::new("true").spawn().expect("spawn");
    let pid = gone.id();
    gone.wait().expect("wait");
    let db = rusqlite::Connection::open(ws.path().join("executor.db")).expect("open");
    let (id, body, persona): (i64, String, Option<String>) = db
        .query_row(
            "SELECT id, body, persona FROM executor_outbox WHERE notifier = 'zulip' \
             AND delivered_at IS NULL ORDER BY id LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("a message waits");
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let until =
        executor::core::time::format_utc(&(chrono::Utc::now() + chrono::Duration::hours(1)));
    db.execute(
        // Due: the dead process claimed it when its attempt was due.
        "UPDATE executor_outbox SET claimed_by = ?2, claimed_until = ?3, \
         next_attempt_at = created_at WHERE id = ?1",
        rusqlite::params![id, format!("{host}:{pid}:4242"), until],
    )
    .expect("plant the claim");
    if posted {
        let sender = if persona.as_deref() == Some("worker") {
            (
                crate::fake_zulip::FIRST_ADDED_BOT_ID,
                WORKER_BOT,
                WORKER_NAME,
            )
        } else {
            (crate::fake_zulip::BOT_ID, BOT_EMAIL, "Executor")
        };
        let content = format!("{body}{}", executor::core::outbox::post_mark(id));
        fake.post_as(sender, STREAM, TOPIC, &content);
    }
    id
}

/// How many posts in the topic carry outbox row `id`'s mark.
fn posts_of(fake: &FakeZulip, id: i64) -> usize {
    marks(fake).iter().filter(|m| **m == id).count()
}

/// The outbox ids the topic's posts carry, oldest first.
fn marks(fake: &FakeZulip) -> Vec<i64> {
    fake.messages(STREAM, TOPIC)
        .iter()
        .filter_map(|m| executor::core::outbox::find_post_mark(m["content"].as_str()?))
        .collect()
}

#[test]
fn a_message_claimed_by_a_dead_process_is_taken_over_at_once_and_never_posted_twice() {
    let fake = FakeZulip::start();
    let ws = chat_workspace(&fake, STEPPING_WORKER, "", "");
    fake.set_down(Some(500));
    ws.ok(&["add", "--title", "Five steps", "--gid", "S-1"]);
    ws.ok(&["go", "S-1"]);
    ws.ok(&["run", "--once"]);
    assert!(outbox_waiting(&ws) >= 2);
    fake.set_down(None);

    // Killed right after its post went out: the post is found and not made again.
    let posted = plant_dead_claim(&fake, &ws, true);
    // Killed before its post went out: the row is posted, once.
    let out = ws.run(&["run", "--once"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(outbox_waiting(&ws), 0, "{}", stderr_of(&out));
    assert_eq!(posts_of(&fake, posted), 1, "{:#?}", topic(&fake));

    fake.set_down(Some(500));
    ws.ok(&["add", "--title", "Five more", "--gid", "S-2"]);
    ws.ok(&["go", "S-2"]);
    ws.ok(&["run", "--once"]);
    fake.set_down(None);
    let unsent = plant_dead_claim(&fake, &ws, false);
    let out = ws.run(&["run", "--once"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(outbox_waiting(&ws), 0, "{}", stderr_of(&out));
    assert_eq!(posts_of(&fake, unsent), 1, "{:#?}", topic(&fake));
    // Every row went out once.
    let marks = marks(&fake);
    let mut unique = marks.clone();
    unique.dedup();
    assert_eq!(marks, unique, "{:#?}", topic(&fake));
}

/// A chat workspace whose `[chat.owner]` gives `owner_line` instead of the API email.
fn owner_workspace(fake: &FakeZulip, owner_line: &str) -> Workspace {
    let ws = chat_workspace(fake, STEPPING_WORKER, "", "");
    let config = ws.path().join("executor.toml");
    let text = std::fs::read_to_string(&config).expect("read config");
    ws.write_config(&text.replace(&format!("email = \"{OWNER_EMAIL}\""), owner_line));
    ws
}

#[test]
fn an_owner_given_by_a_hidden_real_address_is_found_and_recognised_by_user_id() {
    let fake = FakeZulip::start();
    let ws = owner_workspace(
        &fake,
        &format!("email = \"{}\"", crate::fake_zulip::OWNER_DELIVERY_EMAIL),
    );
    // Executor speaks in the topic first: what the owner says after it counts.
    ws.ok(&["add", "--title", "Warm up", "--gid", "T-1"]);
    ws.ok(&["go", "T-1"]);
    ws.ok(&["run", "--once"]);
    ws.ok(&["add", "--title", "Later", "--gid", "T-2"]);
    ws.ok(&["skip", "T-2"]);
    // Zulip shows the owner as `user8@…`, never as the address in the config.
    fake.post_as_owner(STREAM, TOPIC, "go T-2");
    let out = ws.run(&["run", "--once"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let t2 = ws.json(&["show", "T-2", "--json"]);
    assert_ne!(t2["task"]["status"], "skip", "the owner's go counted: {t2}");
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.method == "GET" && r.path == "/api/v1/users"),
        "looked up among all users"
    );
}

#[test]
fn an_owner_nobody_in_zulip_has_refuses_the_start_and_says_to_set_user_id() {
    let fake = FakeZulip::start();
    let ws = owner_workspace(&fake, "email = \"nobody@lumen.example\"");
    for command in [&["run", "--once"][..], &["daemon"][..]] {
        let err = ws.fails_with(2, command);
        assert!(err.contains("nobody@lumen.example"), "{command:?}: {err}");
        assert!(err.contains("user_id"), "{command:?}: {err}");
    }
    // With the user id given, nothing is looked up and the start goes on.
    let ws = owner_workspace(
        &fake,
        &format!(
            "email = \"nobody@lumen.example\"\nuser_id = {}",
            crate::fake_zulip::OWNER_ID
        ),
    );
    ws.ok(&["run", "--once"]);
}

#[test]
fn the_owner_cancels_a_waiting_run_and_retries_its_task_from_the_topic() {
    let fake = FakeZulip::start();
    let ws = chat_workspace(&fake, MERGING_WORKER, "", "");
    ws.ok(&["add", "--title", "Merge when allowed", "--gid", "T-1"]);
    ws.ok(&["go", "T-1"]);
    // The run waits on the owner's answer about merging.
    ws.ok(&["run", "--once"]);
    let run_id = ws.json(&["show", "T-1", "--json"])["runs"][0]["id"]
        .as_i64()
        .expect("a run");
    // Someone else's cancel is not the owner's.
    fake.post_as(
        (55, "ci-bot@lumen.zulipchat.com", "CI bot"),
        STREAM,
        TOPIC,
        &format!("cancel {run_id}"),
    );
    fake.post_as_owner(
        STREAM,
        TOPIC,
        &format!("cancel {run_id} not needed after all"),
    );
    let out = ws.run(&["run", "--once"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "abandoned", "{shown}");
    assert_eq!(shown["task"]["status"], "for_review", "{shown}");
    assert!(
        shown["runs"][0]["lifecycle"]["ended_because"]
            .as_str()
            .is_some_and(|why| why.contains("not needed after all")),
        "{shown}"
    );
    fake.post_as_owner(STREAM, TOPIC, "retry T-1");
    let out = ws.run(&["run", "--once"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let shown = ws.json(&["show", "T-1", "--json"]);
    assert_eq!(shown["runs"].as_array().map(Vec::len), Some(2), "{shown}");
    let said = topic(&fake);
    assert!(
        said.iter()
            .any(|(_, t)| t.contains(&format!("Run {run_id} of `T-1` is cancelled"))),
        "{said:#?}"
    );
    assert!(
        said.iter()
            .any(|(_, t)| t.contains("`T-1`: for_review → approved")),
        "{said:#?}"
    );
}

//! What executor does with a message someone posted in its topic. Each message is taken
//! exactly once (claimed by its Zulip id in the store before anything is done), however it
//! arrived: the event queue, the outgoing webhook, or the catch-up read of the topic's
//! window after a queue expired or the process restarted.
//!
//! - executor's own bots: skipped.
//! - the owner (matched by user id or email): `approve N`, `deny N reason`, `go GID`,
//!   `skip GID` are applied and answered in the topic; a second answer to the same
//!   escalation changes nothing and says so. Anything else becomes a note on a run: the
//!   run the owner's latest open escalation belongs to, else the most recently active run.
//! - anyone else: a line in the worker message format that names its run (`run=N` or
//!   `run_id=N`) is read back through the same parser and stored with that run; a command
//!   is ignored and logged, because only the owner decides.
//!
//! What it must never do: apply a decision that did not come from the owner, or apply one
//! twice.

use std::sync::Arc;

use crate::chat::answer::{self, OwnerReply};
use crate::chat::notices::{Notices, Persona, ZULIP};
use crate::chat::zulip::ZulipMessage;
use crate::core::clock::Clock;
use crate::core::outbox::{NewOutgoing, Priority};
use crate::core::queue::QueueEvent;
use crate::core::record::{NewMessage, Resolved};
use crate::core::run::RunState;
use crate::store::{Store, StoreResult};

/// Who the owner is in chat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatOwner {
    pub name: String,
    pub email: Option<String>,
    pub user_id: Option<u64>,
}

impl ChatOwner {
    /// Whether `message` was sent by the owner: by user id when it is known (an email may
    /// be hidden or changed), by the email only when it is not.
    pub fn sent(&self, message: &ZulipMessage) -> bool {
        match self.user_id {
            Some(id) => id == message.sender_id,
            None => self
                .email
                .as_deref()
                .is_some_and(|e| e.eq_ignore_ascii_case(&message.sender_email)),
        }
    }
}

/// The key of a topic for claims and for its read cursor (Zulip's topics are the same
/// whatever their case).
pub fn topic_key(stream: &str, topic: &str) -> String {
    format!("zulip:{}/{}", stream, topic.to_lowercase())
}

/// What [`Inbox::take`] made of one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Taken before (by id): nothing done.
    Duplicate,
    /// Posted by one of executor's own bots, or outside the topic.
    NotForUs,
    /// The owner's answer, applied or refused; the text of the reply in the topic.
    Answered(String),
    /// The owner's note, stored with this run.
    Noted { run_id: Option<i64> },
    /// Someone else's worker-format lines, stored with this run.
    ReadBack { run_id: i64, lines: usize },
    /// Someone else's message with nothing executor reads in it, or a command from them.
    Ignored,
}

/// The topic's reader.
#[derive(Clone, Debug)]
pub struct Inbox {
    pub owner: ChatOwner,
    /// executor's own bots.
    pub own_emails: Vec<String>,
    pub stream: String,
    pub topic: String,
    pub notices: Notices,
    /// When messages are claimed, answers recorded and escalations resolved.
    pub clock: Arc<dyn Clock>,
}

impl Inbox {
    /// The key of this topic for claims and for the read cursor.
    pub fn key(&self) -> String {
        topic_key(&self.stream, &self.topic)
    }

    /// Whether `message` belongs to the topic and is not executor's own.
    fn for_us(&self, message: &ZulipMessage) -> bool {
        message.stream() == Some(self.stream.as_str())
            && message.subject.to_lowercase() == self.topic.to_lowercase()
            && !self
                .own_emails
                .iter()
                .any(|e| e.eq_ignore_ascii_case(&message.sender_email))
    }

    /// Takes one message (see the module docs).
    pub async fn take(&self, store: &dyn Store, message: &ZulipMessage) -> StoreResult<Taken> {
        if !self.for_us(message) {
            return Ok(Taken::NotForUs);
        }
        if !store
            .claim_chat_message(&self.key(), &message.id.to_string(), self.clock.now())
            .await?
        {
            return Ok(Taken::Duplicate);
        }
        let taken = if self.owner.sent(message) {
            self.owner_said(store, message).await
        } else {
            self.someone_else_said(store, message).await
        };
        if taken.is_err() {
            // Not done after all: the next read takes it again. (What was done before the
            // failure is safe to repeat: an answer is recorded once by the store.)
            if let Err(error) = store
                .release_chat_message(&self.key(), &message.id.to_string())
                .await
            {
                tracing::error!(%error, message = message.id, "cannot give back a chat message whose handling failed; it is lost");
            }
        }
        taken
    }

    async fn owner_said(&self, store: &dyn Store, message: &ZulipMessage) -> StoreResult<Taken> {
        let by = format!("{} (zulip)", self.owner.name);
        let reply = answer::parse(&message.content);
        let text = match reply {
            OwnerReply::Approve { escalation, note } => {
                self.resolve(store, escalation, "approve", note.as_deref(), &by)
                    .await?
            }
            OwnerReply::Deny { escalation, reason } => {
                self.resolve(store, escalation, "deny", reason.as_deref(), &by)
                    .await?
            }
            OwnerReply::Go { gid } => self.owner_move(store, &gid, QueueEvent::Go).await,
            OwnerReply::Skip { gid } => self.owner_move(store, &gid, QueueEvent::Skip).await,
            OwnerReply::Cancel { target, reason } => {
                let reason = reason.unwrap_or_else(|| "no reason given (from chat)".to_string());
                match crate::ops::run::cancel(
                    store,
                    self.clock.as_ref(),
                    &crate::ops::run::this_process(),
                    &target,
                    &reason,
                )
                .await
                {
                    Ok(done) => format!(
                        "Run {} of `{}` is cancelled; the task is back for your review (`retry {}` starts a fresh run).",
                        done.run.id, done.run.task_gid, done.run.task_gid
                    ),
                    Err(error) => format!("`cancel {target}` did nothing: {error:#}."),
                }
            }
            OwnerReply::Retry { gid } => {
                match crate::ops::run::retry(store, self.clock.as_ref(), &gid).await {
                    Ok(moved) => {
                        crate::store::wake::notify(store, crate::store::wake::Wake::Queue).await;
                        format!(
                            "`{gid}`: {} → {}; a fresh run starts when a runner takes it.",
                            moved.from, moved.to
                        )
                    }
                    Err(error) => format!("`retry {gid}` did nothing: {error:#}."),
                }
            }
            OwnerReply::Note(note) => {
                let run = self.note_run(store).await?;
                let text = match &run {
                    Some((run_id, gid)) => {
                        store
                            .record_message(&NewMessage {
                                run_id: *run_id,
                                task_gid: gid.clone(),
                                at: self.clock.now(),
                                source: "owner".to_string(),
                                tag: "NOTE".to_string(),
                                kind: "owner".to_string(),
                                args: "{}".to_string(),
                                text: note.clone(),
                                line: format!("(the owner) {note}"),
                            })
                            .await?;
                        tracing::info!(gid = %gid, run = run_id, "the owner's note from chat is stored with the run");
                        format!("Noted on run {run_id} of `{gid}`; its next worker reads it.")
                    }
                    None => {
                        tracing::info!(note = %note, "the owner wrote in the topic, but no run is open to keep it with");
                        "Noted, but no run is open to keep it with. Answers: `approve N`, `deny N <reason>`, `go <task>`, `skip <task>`, `cancel <run> <reason>`, `retry <task>`.".to_string()
                    }
                };
                self.reply(store, &text, run.as_ref().map(|(id, _)| *id))
                    .await;
                return Ok(Taken::Noted {
                    run_id: run.map(|(id, _)| id),
                });
            }
        };
        self.reply(store, &text, None).await;
        Ok(Taken::Answered(text))
    }

    async fn resolve(
        &self,
        store: &dyn Store,
        id: i64,
        resolution: &str,
        note: Option<&str>,
        by: &str,
    ) -> StoreResult<String> {
        Ok(
            match store
                .resolve_escalation(id, resolution, note, by, self.clock.now())
                .await?
            {
                None => format!("There is no escalation {id}; nothing changed."),
                Some(Resolved::NotAnEscalation(d)) => format!(
                    "Decision {id} is not an escalation (it was decided `{}` by rule {}); nothing changed.",
                    d.decision,
                    d.rule_id.as_deref().unwrap_or("(default)")
                ),
                Some(Resolved::AlreadyResolved(d)) => format!(
                    "Escalation {id} was already answered: {} by {}; nothing changed.",
                    d.resolution.as_deref().unwrap_or("?"),
                    d.resolved_by.as_deref().unwrap_or("?")
                ),
                Some(Resolved::Recorded(d)) => {
                    tracing::info!(escalation = id, %resolution, gid = d.task_gid.as_deref().unwrap_or("-"), "the owner answered an escalation in chat");
                    crate::store::wake::notify(store, crate::store::wake::Wake::Answer).await;
                    format!(
                        "Escalation {id}: {resolution} recorded. Run {} of `{}` resumes with it.",
                        d.run_id.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
                        d.task_gid.as_deref().unwrap_or("?")
                    )
                }
            },
        )
    }

    async fn owner_move(&self, store: &dyn Store, gid: &str, event: QueueEvent) -> String {
        let what = event.name();
        match crate::ops::queue::apply(
            store,
            self.clock.as_ref(),
            gid,
            event,
            "owner",
            Some("from chat".to_string()),
        )
        .await
        {
            Ok((moved, _)) => {
                crate::store::wake::notify(store, crate::store::wake::Wake::Queue).await;
                format!("`{gid}`: {} → {}.", moved.from, moved.to)
            }
            Err(error) => format!("`{what} {gid}` did nothing: {error}."),
        }
    }

    /// The run an owner's note belongs to: that of the latest open escalation, else the
    /// most recently updated live run.
    async fn note_run(&self, store: &dyn Store) -> StoreResult<Option<(i64, String)>> {
        let open = store.escalations(true).await?;
        if let Some(e) = open
            .iter()
            .filter(|e| e.run_id.is_some())
            .max_by_key(|e| e.id)
        {
            if let (Some(run), Some(gid)) = (e.run_id, e.task_gid.clone()) {
                return Ok(Some((run, gid)));
            }
        }
        // The live runs alone: an index range each, not every run ever made.
        let live = [RunState::InProgress, RunState::Pr];
        let runs = store.runs_page(&live, None, u32::MAX).await?;
        Ok(runs
            .into_iter()
            .max_by_key(|r| (r.updated_at, r.id))
            .map(|r| (r.id, r.task_gid)))
    }

    async fn someone_else_said(
        &self,
        store: &dyn Store,
        message: &ZulipMessage,
    ) -> StoreResult<Taken> {
        if !matches!(answer::parse(&message.content), OwnerReply::Note(_)) {
            tracing::warn!(sender = %message.sender_email, message = message.id, content = %message.content, "a command in the topic from someone who is not the owner was ignored");
            return Ok(Taken::Ignored);
        }
        let mut stored = 0;
        let mut run_of_message = None;
        for parsed in crate::protocol::messages_in(&message.content) {
            let Ok(line) = parsed else {
                continue;
            };
            let run_id = line
                .arg("run")
                .or_else(|| line.arg("run_id"))
                .and_then(|v| v.parse::<i64>().ok());
            let Some(run_id) = run_id else {
                continue;
            };
            let Some(run) = store.run(run_id).await? else {
                continue;
            };
            let args: serde_json::Map<String, serde_json::Value> = line
                .args
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect();
            store
                .record_message(&NewMessage {
                    run_id,
                    task_gid: run.task_gid.clone(),
                    at: self.clock.now(),
                    source: format!("chat:{}", message.sender_full_name),
                    tag: line.tag.as_str().to_string(),
                    kind: line.kind.clone(),
                    args: serde_json::Value::Object(args).to_string(),
                    text: line.text.clone(),
                    line: line.to_line(),
                })
                .await?;
            stored += 1;
            run_of_message = Some(run_id);
        }
        match run_of_message {
            Some(run_id) => Ok(Taken::ReadBack {
                run_id,
                lines: stored,
            }),
            None => {
                tracing::debug!(sender = %message.sender_email, message = message.id, "a message in the topic with nothing for executor");
                Ok(Taken::Ignored)
            }
        }
    }

    /// Answers in the topic, as the orchestrator.
    async fn reply(&self, store: &dyn Store, text: &str, run_id: Option<i64>) {
        self.notices
            .send(
                store,
                &[NewOutgoing {
                    notifier: ZULIP.to_string(),
                    persona: Some(Persona::Orchestrator.as_str().to_string()),
                    priority: Priority::Info,
                    task_gid: None,
                    run_id,
                    body: text.to_string(),
                    created_at: self.clock.now(),
                }],
            )
            .await;
    }
}

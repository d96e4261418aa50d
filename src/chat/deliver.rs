//! Delivers the outbox: each notifier's rows strictly in the order they were stored, one at
//! a time. A row that fails stays at the head of its notifier with a later
//! `next_attempt_at` (doubling from `retry_base` up to `retry_max`, or the server's
//! `Retry-After` when longer), so nothing behind it overtakes it and nothing is lost, across
//! restarts too. Rows are claimed with a lease, so two processes sharing a Postgres outbox
//! never post the same row at once; the claim of a process on this host that is gone (a
//! `kill -9`, a crash) is taken over at once. Every Zulip post carries its row's hidden mark
//! ([`crate::core::outbox::post_mark`]); before posting a row whose claim was never let go
//! (the process may have posted it and died before recording so), the topic is searched
//! for that mark, and a post found there counts as the delivery: nothing is posted twice.
//!
//! What it must never do: drop a row because its notifier failed, or put a credential in
//! the store or the log (errors come from the clients, which leave keys and URLs out).

use std::time::Duration;

use crate::chat::inbox::topic_key;
use crate::chat::notices::{Persona, ZULIP};
use crate::chat::webhook::{WebhookNotice, WebhookNotifier};
use crate::chat::zulip::ZulipClient;
use crate::core::lease::Holder;
use crate::core::outbox::{dead_claim, find_post_mark, post_mark, retry_delay, Outgoing};
use crate::store::{Store, StoreResult};

/// How long a claimed row is held before another process may take it (a post that hangs
/// longer than this is cut off by the client's own timeout first).
const CLAIM: Duration = Duration::from_secs(120);

/// Refusals (4xx) after which a message is dropped rather than block its notifier.
pub const MAX_REFUSALS: i64 = 10;

/// How many of the topic's latest messages are searched for an earlier post of a row
/// whose delivery was never recorded (the crash was moments ago; the post is recent).
const LOOK_BACK: u32 = 100;

/// The Zulip topic and the bots that post into it.
#[derive(Clone, Debug)]
pub struct ZulipTopic {
    pub stream: String,
    pub topic: String,
    pub orchestrator: ZulipClient,
    /// The worker persona's own bot; without one, worker lines go out under the
    /// orchestrator's bot with `worker_name` in front.
    pub worker: Option<ZulipClient>,
    pub worker_name: String,
}

/// Everything that delivers outbox rows.
#[derive(Clone, Debug)]
pub struct Deliverer {
    pub zulip: Option<ZulipTopic>,
    pub webhooks: Vec<WebhookNotifier>,
    pub retry_base: Duration,
    pub retry_max: Duration,
    /// Who claims rows: this process (host, pid and start time).
    pub holder: Holder,
    /// When rows are claimed, delivered and due again.
    pub clock: std::sync::Arc<dyn crate::core::clock::Clock>,
}

/// What one delivery pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Delivered {
    pub sent: usize,
    /// Notifiers whose head row failed this pass (they wait for its next attempt).
    pub failing: Vec<String>,
}

/// Why one row was not delivered: the message to keep, and the wait the server asked for.
struct Failure {
    message: String,
    transient: bool,
    retry_after: Option<Duration>,
}

/// The outbox name of webhook `name`.
pub fn webhook_notifier(name: &str) -> String {
    format!("webhook:{name}")
}

impl Deliverer {
    /// Every notifier this process delivers.
    pub fn notifiers(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        if self.zulip.is_some() {
            names.push(ZULIP.to_string());
        }
        names.extend(self.webhooks.iter().map(|w| webhook_notifier(w.name())));
        names
    }

    /// Sends every row that is due, notifier by notifier, in order; stops a notifier at its
    /// first failure. Errors are the store's only.
    pub async fn deliver_due(&self, store: &dyn Store) -> StoreResult<Delivered> {
        let mut report = Delivered::default();
        for notifier in self.notifiers() {
            loop {
                let Some(row) = self.claim(store, &notifier).await? else {
                    break;
                };
                if row.claimed_by.is_some() && notifier == ZULIP {
                    // Claimed before and never let go: the holder may have posted it.
                    match self.find_earlier_post(&row).await {
                        Ok(Some(posted)) => {
                            tracing::info!(outbox = row.id, zulip_message = posted, "a message claimed by a process that stopped was already in the topic; counted as delivered, not posted again");
                            store.outgoing_delivered(row.id, self.clock.now()).await?;
                            report.sent += 1;
                            continue;
                        }
                        Ok(None) => {}
                        Err(error) => {
                            // Not knowing, posting could post it twice: the claim stays
                            // ours, so the next pass looks again before it posts.
                            tracing::warn!(outbox = row.id, %error, "cannot read the topic to see whether a message was posted before a crash; it waits");
                            report.failing.push(notifier.clone());
                            break;
                        }
                    }
                }
                match self.send(&notifier, &row).await {
                    Ok(posted) => {
                        store.outgoing_delivered(row.id, self.clock.now()).await?;
                        report.sent += 1;
                        if let (Some(id), Some(zulip)) = (posted, &self.zulip) {
                            self.note_first_post(store, zulip, id).await?;
                        }
                    }
                    Err(failure) if !failure.transient && row.attempts + 1 >= MAX_REFUSALS => {
                        // Refused again and again (a 4xx): retrying cannot help, and every
                        // message behind it would wait forever.
                        tracing::error!(notifier = %notifier, outbox = row.id, error = %failure.message, body = %row.body, "a message was refused {MAX_REFUSALS} times and is dropped; the ones after it go on");
                        store
                            .outgoing_failed(
                                row.id,
                                &format!(
                                    "dropped after {MAX_REFUSALS} refusals: {}",
                                    failure.message
                                ),
                                self.clock.now(),
                            )
                            .await?;
                        store.outgoing_delivered(row.id, self.clock.now()).await?;
                    }
                    Err(failure) => {
                        let failures = u32::try_from(row.attempts + 1).unwrap_or(u32::MAX);
                        let mut wait = retry_delay(failures, self.retry_base, self.retry_max);
                        if let Some(asked) = failure.retry_after {
                            wait = wait.max(asked);
                        }
                        let next =
                            self.clock.now() + chrono::Duration::from_std(wait).unwrap_or_default();
                        if failure.transient {
                            tracing::warn!(notifier = %notifier, outbox = row.id, attempts = failures, retry_in = ?wait, error = %failure.message, "a message could not be delivered; it is kept and tried again, and the ones after it wait");
                        } else {
                            tracing::error!(notifier = %notifier, outbox = row.id, attempts = failures, retry_in = ?wait, error = %failure.message, "a message was refused; it is kept and tried again until the notifier's settings are fixed");
                        }
                        store
                            .outgoing_failed(row.id, &failure.message, next)
                            .await?;
                        report.failing.push(notifier.clone());
                        break;
                    }
                }
            }
        }
        Ok(report)
    }

    /// Claims the head of `notifier`'s line; first takes it over from a process on this
    /// host that claimed it and is gone, rather than wait for that claim to run out.
    async fn claim(&self, store: &dyn Store, notifier: &str) -> StoreResult<Option<Outgoing>> {
        let now = self.clock.now();
        let until = now + chrono::Duration::from_std(CLAIM).unwrap_or_default();
        let me = self.holder.id();
        if let Some(row) = store.claim_outgoing(notifier, &me, until, now).await? {
            return Ok(Some(row));
        }
        let head = store.outbox(Some(notifier), true, 1).await?;
        let Some(dead) = head
            .first()
            .and_then(|head| dead_claim(head, &self.holder, now, alive))
        else {
            return Ok(None);
        };
        let Some(head) = head.first() else {
            return Ok(None);
        };
        if store.take_over_outgoing(head.id, &dead, &me, until).await? {
            tracing::info!(outbox = head.id, from = %dead, "took over a message claimed by a process that is gone");
        }
        store.claim_outgoing(notifier, &me, until, now).await
    }

    /// Executor's own post of `row` among the topic's latest messages, by its hidden mark
    /// and its bot: the message id if it was posted.
    async fn find_earlier_post(
        &self,
        row: &Outgoing,
    ) -> Result<Option<u64>, crate::chat::zulip::ZulipError> {
        let Some(zulip) = &self.zulip else {
            return Ok(None);
        };
        let client = self.zulip_client(zulip, row);
        let recent = client
            .topic_window(&zulip.stream, &zulip.topic, LOOK_BACK)
            .await?;
        Ok(recent
            .iter()
            .rev()
            .find(|m| {
                m.sender_email.eq_ignore_ascii_case(client.bot_email())
                    && find_post_mark(&m.content) == Some(row.id)
            })
            .map(|m| m.id))
    }

    /// The bot that posts `row`.
    fn zulip_client<'a>(&self, zulip: &'a ZulipTopic, row: &Outgoing) -> &'a ZulipClient {
        let worker = row.persona.as_deref() == Some(Persona::Worker.as_str());
        match (&zulip.worker, worker) {
            (Some(bot), true) => bot,
            _ => &zulip.orchestrator,
        }
    }

    /// Before executor's first post in a topic it never read, the topic's read cursor is
    /// set just below that post: every answer to it is taken, nothing said before is.
    async fn note_first_post(
        &self,
        store: &dyn Store,
        zulip: &ZulipTopic,
        posted: u64,
    ) -> StoreResult<()> {
        let key = topic_key(&zulip.stream, &zulip.topic);
        if store.source_cursor(&key).await?.is_none() {
            store
                .save_source_cursor(
                    &key,
                    &posted.saturating_sub(1).to_string(),
                    self.clock.now(),
                )
                .await?;
        }
        Ok(())
    }

    /// Sends one row; for a Zulip post, the new message's id.
    async fn send(&self, notifier: &str, row: &Outgoing) -> Result<Option<u64>, Failure> {
        if notifier == ZULIP {
            let Some(zulip) = &self.zulip else {
                return Err(Failure {
                    message: "Zulip is not configured".into(),
                    transient: false,
                    retry_after: None,
                });
            };
            let worker = row.persona.as_deref() == Some(Persona::Worker.as_str());
            let client = self.zulip_client(zulip, row);
            let mark = post_mark(row.id);
            let body = match (&zulip.worker, worker) {
                (None, true) => format!("**{}** · {}{mark}", zulip.worker_name, row.body),
                _ => format!("{}{mark}", row.body),
            };
            return match client
                .post_to_topic(&zulip.stream, &zulip.topic, &body)
                .await
            {
                Ok(id) => Ok(Some(id)),
                // Zulip said yes but its answer could not be read: the post was made, and
                // sending it again would post it twice.
                Err(crate::chat::zulip::ZulipError::Decode { what, .. }) => {
                    tracing::warn!(outbox = row.id, %what, "Zulip took a post but its answer was unreadable; counted as delivered");
                    Ok(None)
                }
                Err(error) => Err(Failure {
                    transient: error.is_transient(),
                    retry_after: match &error {
                        crate::chat::zulip::ZulipError::RateLimited { retry_after } => {
                            Some(*retry_after)
                        }
                        _ => None,
                    },
                    message: error.to_string(),
                }),
            };
        }
        let Some(hook) = self
            .webhooks
            .iter()
            .find(|w| webhook_notifier(w.name()) == notifier)
        else {
            return Err(Failure {
                message: format!("no notifier named {notifier} is configured"),
                transient: false,
                retry_after: None,
            });
        };
        let notice = WebhookNotice {
            id: row.id,
            priority: row.priority.as_str(),
            text: &row.body,
            task_gid: row.task_gid.as_deref(),
            run_id: row.run_id,
            persona: row.persona.as_deref(),
            created_at: row.created_at,
        };
        hook.deliver(&notice)
            .await
            .map(|()| None)
            .map_err(|error| Failure {
                transient: error.is_transient(),
                retry_after: match &error {
                    crate::chat::webhook::WebhookError::RateLimited { retry_after, .. } => {
                        Some(*retry_after)
                    }
                    _ => None,
                },
                message: error.to_string(),
            })
    }
}

/// Whether `holder`, a process on this host, still runs: the same pid with the same start
/// time (a reused pid has another).
fn alive(holder: &Holder) -> bool {
    holder.start.is_some() && crate::supervisor::group::start_time(holder.pid) == holder.start
}

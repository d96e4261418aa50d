//! How the owner's replies reach the [`Inbox`]: a catch-up read of the topic's recent
//! window (at start, after every new event queue, and once per `run --once`), the event
//! queue's long poll, and Zulip's outgoing webhook. The read cursor (the highest message id
//! seen) lives in the store, so a restart neither misses a reply nor reads old history as
//! new: the very first read takes nothing and only notes where the topic stands (the
//! deliverer notes it too, just before executor's first post there).
//!
//! When the queue expires (`BAD_EVENT_QUEUE_ID`) a new one is registered and the window is
//! read again, so a reply sent while no queue was listening is still taken. Every message is
//! taken at most once whichever way it came (the inbox claims it by id).
//!
//! What it must never do: give up. A Zulip that is down is retried with backoff forever;
//! only the process's shutdown ends the loop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::chat::inbox::{Inbox, Taken};
use crate::chat::zulip::{ZulipClient, ZulipError, ZulipEvent, ZulipMessage};
use crate::core::outbox::retry_delay;
use crate::core::secret::Secret;
use crate::store::Store;

/// How many of the topic's latest messages a catch-up reads.
pub const CATCH_UP: u32 = 100;

/// Reads the topic for the inbox.
#[derive(Clone, Debug)]
pub struct Receiver {
    /// The orchestrator's bot.
    pub client: ZulipClient,
    pub inbox: Inbox,
    pub retry_base: Duration,
    pub retry_max: Duration,
}

/// Why a catch-up did not finish.
#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    #[error(transparent)]
    Zulip(#[from] ZulipError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl Receiver {
    async fn cursor(&self, store: &dyn Store) -> Result<Option<u64>, ReceiveError> {
        Ok(store
            .source_cursor(&self.inbox.key())
            .await?
            .and_then(|c| c.parse::<u64>().ok()))
    }

    async fn advance(&self, store: &dyn Store, to: u64) -> Result<(), ReceiveError> {
        if self.cursor(store).await?.is_none_or(|c| to > c) {
            store
                .save_source_cursor(&self.inbox.key(), &to.to_string(), self.inbox.clock.now())
                .await?;
        }
        Ok(())
    }

    /// Takes every message of the topic after the cursor, reading forward page by page, so
    /// a reply is found however much was said after it. Without a cursor (executor never
    /// read the topic, and never posted there: the deliverer sets the cursor at its first
    /// post), the cursor is set to the newest message and nothing is taken: what was said
    /// before executor came is nobody's answer. The number of messages taken.
    pub async fn catch_up(&self, store: &dyn Store) -> Result<usize, ReceiveError> {
        let (stream, topic) = (&self.inbox.stream, &self.inbox.topic);
        let Some(mut after) = self.cursor(store).await? else {
            let newest = self
                .client
                .topic_window(stream, topic, 1)
                .await?
                .iter()
                .map(|m| m.id)
                .max()
                .unwrap_or(0);
            self.advance(store, newest).await?;
            return Ok(0);
        };
        let mut taken = 0;
        loop {
            let (page, newest) = self
                .client
                .topic_after(stream, topic, after, CATCH_UP)
                .await?;
            for message in &page {
                // A message that cannot be taken stops the catch-up below it: the cursor
                // stays there and the next catch-up tries it again.
                if self.take(store, message).await? {
                    taken += 1;
                }
                after = after.max(message.id);
            }
            if newest || page.is_empty() {
                return Ok(taken);
            }
        }
    }

    /// Takes one message and moves the cursor past it; whether it was new.
    async fn take(&self, store: &dyn Store, message: &ZulipMessage) -> Result<bool, ReceiveError> {
        let taken = self.inbox.take(store, message).await?;
        tracing::debug!(message = message.id, ?taken, "a message in the topic");
        self.advance(store, message.id).await?;
        Ok(!matches!(taken, Taken::Duplicate | Taken::NotForUs))
    }

    /// The event-queue loop: runs until the task is aborted.
    pub async fn listen(&self, store: Arc<dyn Store>) {
        let mut failures: u32 = 0;
        loop {
            let queue = match self.client.register_queue(&self.inbox.stream).await {
                Ok(queue) => queue,
                Err(error) => {
                    failures = failures.saturating_add(1);
                    let wait = wait_after(&error, failures, self.retry_base, self.retry_max);
                    tracing::warn!(%error, retry_in = ?wait, "cannot register a Zulip event queue; the owner's replies wait");
                    tokio::time::sleep(wait).await;
                    continue;
                }
            };
            tracing::info!(queue = %queue.queue_id, "listening to the Zulip topic");
            // What was said while no queue listened (before the first one, or after the
            // last one expired) is in the window.
            if let Err(error) = self.catch_up(store.as_ref()).await {
                tracing::warn!(%error, "cannot read the topic's recent messages; the queue goes on");
            }
            let mut last = queue.last_event_id;
            loop {
                match self.client.events(&queue, last).await {
                    Ok(events) => {
                        failures = 0;
                        let mut failed = false;
                        for event in events {
                            last = last.max(event.id());
                            if let ZulipEvent::Message { message, .. } = event {
                                if let Err(error) = self.take(store.as_ref(), &message).await {
                                    // The cursor stays below it; a new queue's catch-up
                                    // reads it again.
                                    tracing::error!(%error, message = message.id, "cannot take a message from the topic; reading the topic again");
                                    failed = true;
                                    break;
                                }
                            }
                        }
                        if failed {
                            tokio::time::sleep(self.retry_base).await;
                            break;
                        }
                    }
                    Err(ZulipError::QueueExpired { .. }) => {
                        tracing::info!(queue = %queue.queue_id, "the Zulip event queue expired; registering a new one");
                        break;
                    }
                    Err(error) => {
                        failures = failures.saturating_add(1);
                        let wait = wait_after(&error, failures, self.retry_base, self.retry_max);
                        tracing::warn!(%error, retry_in = ?wait, "cannot read the Zulip event queue");
                        tokio::time::sleep(wait).await;
                        if !error.is_transient() {
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// The wait after the `failures`th failure in a row: Zulip's `Retry-After` when it gave
/// one, else the doubling backoff.
fn wait_after(error: &ZulipError, failures: u32, base: Duration, max: Duration) -> Duration {
    match error {
        ZulipError::RateLimited { retry_after } => *retry_after,
        _ => retry_delay(failures, base, max),
    }
}

/// The body Zulip's outgoing webhook posts (the fields executor reads).
#[derive(serde::Deserialize)]
struct OutgoingWebhook {
    token: String,
    message: ZulipMessage,
}

/// Serves Zulip's outgoing webhook at `POST /zulip` on `listen`: a request whose `token`
/// is not the configured one gets 401 and is logged (without the token); a good one is
/// taken by the inbox and answered `{"response_not_required": true}` (executor answers in
/// the topic through the outbox instead). Returns the bound address and the server task.
pub async fn serve_outgoing_webhook(
    listen: SocketAddr,
    token: Secret,
    receiver: Receiver,
    store: Arc<dyn Store>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    use axum::http::StatusCode;
    use axum::routing::post;

    struct Endpoint {
        token: Secret,
        receiver: Receiver,
        store: Arc<dyn Store>,
    }
    let endpoint = Arc::new(Endpoint {
        token,
        receiver,
        store,
    });
    let handler = |axum::extract::State(endpoint): axum::extract::State<Arc<Endpoint>>,
                   body: axum::body::Bytes| async move {
        let payload: OutgoingWebhook = match serde_json::from_slice(&body) {
            Ok(payload) => payload,
            Err(error) => {
                tracing::warn!(%error, "the outgoing webhook got a body it cannot read");
                return (StatusCode::BAD_REQUEST, "unreadable payload".to_string());
            }
        };
        if !same_secret(payload.token.as_bytes(), endpoint.token.expose().as_bytes()) {
            tracing::warn!(
                sender = %payload.message.sender_email,
                message = payload.message.id,
                "the outgoing webhook got a request with a wrong token; ignored"
            );
            return (StatusCode::UNAUTHORIZED, "bad token".to_string());
        }
        // The cursor is left to the catch-up, which reads every message of the topic in
        // order: a webhook only brings the ones that mention the bot.
        match endpoint
            .receiver
            .inbox
            .take(endpoint.store.as_ref(), &payload.message)
            .await
        {
            Ok(_) => (
                StatusCode::OK,
                r#"{"response_not_required":true}"#.to_string(),
            ),
            Err(error) => {
                tracing::error!(%error, message = payload.message.id, "cannot take a message from the outgoing webhook; the next catch-up reads it again");
                (StatusCode::SERVICE_UNAVAILABLE, "try again".to_string())
            }
        }
    };
    let app = axum::Router::new()
        .route("/zulip", post(handler))
        .with_state(endpoint);
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "the outgoing webhook endpoint stopped");
        }
    });
    Ok((bound, task))
}

/// Compares two secrets in time that does not depend on where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"ab"));
        assert!(!same_secret(b"", b"a"));
    }

    #[test]
    fn a_rate_limit_waits_as_long_as_zulip_asks() {
        let base = Duration::from_secs(1);
        let max = Duration::from_secs(60);
        let limited = ZulipError::RateLimited {
            retry_after: Duration::from_secs(7),
        };
        assert_eq!(wait_after(&limited, 1, base, max), Duration::from_secs(7));
        let down = ZulipError::Unreachable {
            message: "refused".into(),
        };
        assert_eq!(wait_after(&down, 1, base, max), base);
        assert_eq!(wait_after(&down, 3, base, max), base * 4);
        assert_eq!(wait_after(&down, 30, base, max), max);
    }
}

//! `GET /api/v1/events`: the store's changes as server-sent events (docs/design.md §12):
//! `task` (a task moved), `line` (a worker's line) and `decision` (a decision was made,
//! an escalation among them), each with the JSON document of its row and an id, the
//! [`Cursor`] just past it. A client that reconnects sends that id as `Last-Event-ID`
//! and gets everything after it, so nothing is missed; `?after=CURSOR` starts a fresh
//! client at a point (a page gives the cursor it was rendered at), and with neither the
//! feed starts now. `?run=ID` keeps only that run's lines.
//!
//! The feed reads the store (every runner of a shared queue writes there), right after the
//! store hints that it changed (`store::changed`: a write by any process or host), and on
//! a slow timer besides, in case a hint was lost; where the store gives no hints it polls
//! briefly. It never writes.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::sync::watch;

use super::Console;
use crate::core::changes::{self, Change, Cursor};
use crate::store::Store;

/// How often the feed looks for new rows where the store gives no change hints: short, so a
/// worker's line reaches the page at once; each look is three indexed reads.
const POLL: Duration = Duration::from_millis(100);
/// How often it looks when hints come: only for a hint that was lost.
const HINTED_POLL: Duration = Duration::from_secs(2);
/// After the store failed, the feed waits this long before it reads again.
const BACK_OFF: Duration = Duration::from_secs(2);
/// Rows of each table taken in one read.
const BATCH: u32 = 200;

#[derive(Deserialize)]
pub(super) struct EventsQuery {
    after: Option<String>,
    run: Option<i64>,
}

pub(super) async fn stream(
    State(c): State<Console>,
    headers: HeaderMap,
    Query(q): Query<EventsQuery>,
) -> Response {
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .or(q.after.as_deref());
    let from = match resume {
        Some(text) => match text.parse::<Cursor>() {
            Ok(cursor) => cursor,
            Err(error) => return super::refuse(StatusCode::BAD_REQUEST, &error.to_string()),
        },
        None => match c.store.change_cursor().await {
            Ok(cursor) => cursor,
            Err(error) => return super::failed(error.into()),
        },
    };
    let hints = c.change_hints().await;
    let feed = Feed {
        store: c.store,
        cursor: from,
        run: q.run,
        ready: VecDeque::new(),
        hints,
    };
    let events = futures_util::stream::unfold(feed, |mut feed| async move {
        let event = feed.next().await;
        Some((Ok::<_, Infallible>(event), feed))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

struct Feed {
    store: Arc<dyn Store>,
    cursor: Cursor,
    run: Option<i64>,
    ready: VecDeque<Event>,
    /// The store's change hints; `None` where it gives none (or they stopped).
    hints: Option<watch::Receiver<u64>>,
}

impl Feed {
    /// The next event, waiting for one to happen.
    async fn next(&mut self) -> Event {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return event;
            }
            // Marked seen before the read: a write after this point hints again, so a line
            // written while the read runs is not left for the timer.
            if let Some(hints) = &mut self.hints {
                hints.borrow_and_update();
            }
            match self
                .store
                .changes_after(&self.cursor, self.run, BATCH)
                .await
            {
                Ok(found) => {
                    for (cursor, change) in changes::ordered(self.cursor, found) {
                        self.cursor = cursor;
                        self.ready.push_back(event_of(cursor, &change));
                    }
                    if self.ready.is_empty() {
                        self.wait().await;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "the console's live feed cannot read the store; trying again");
                    tokio::time::sleep(BACK_OFF).await;
                    // Said without an id, so a reconnect still resumes from the last change.
                    return Event::default()
                        .event("unavailable")
                        .data(error.to_string());
                }
            }
        }
    }
}

impl Feed {
    /// Until the store hints at a change (or the slow timer), or for the short poll where
    /// no hints come.
    async fn wait(&mut self) {
        let Some(hints) = &mut self.hints else {
            tokio::time::sleep(POLL).await;
            return;
        };
        if let Ok(Err(_)) = tokio::time::timeout(HINTED_POLL, hints.changed()).await {
            tracing::debug!("the store's change hints stopped; the live feed polls");
            self.hints = None;
        }
    }
}

fn event_of(cursor: Cursor, change: &Change) -> Event {
    let data = match change {
        Change::Task(e) => serde_json::to_string(e),
        Change::Line(m) => serde_json::to_string(m),
        Change::Decision(d) => serde_json::to_string(d),
    }
    .unwrap_or_else(|_| "{}".to_string());
    Event::default()
        .id(cursor.to_string())
        .event(change.name())
        .data(data)
}

//! What the runner tells the owner, and where each notice goes. A notice has a priority
//! (urgent: an escalation; action: the owner has something to do; info: progress) and a
//! persona (the orchestrator, or the worker whose lines are mirrored). [`Routing`] turns it
//! into one outbox row per notifier whose priorities include it; the log notifier writes at
//! once. Delivery happens elsewhere ([`super::deliver`]), so telling never waits on a chat
//! server, and a server that is down loses nothing.
//!
//! What it must never do: fail the runner. A notice that cannot be stored is logged.

use std::sync::Arc;

use crate::core::clock::{Clock, SystemClock};
use crate::core::outbox::{NewOutgoing, Priority};
use crate::store::Store;

pub use super::notice::{Notice, Persona, Routing, ZULIP};

/// The runner's handle for telling the owner: cheap to clone.
#[derive(Clone)]
pub struct Notices {
    routing: Arc<Routing>,
    /// Woken when rows were added, so a waiting deliverer starts at once.
    wake: Arc<tokio::sync::Notify>,
    /// When a notice is routed (quiet hours) and stamped.
    clock: Arc<dyn Clock>,
}

impl Default for Notices {
    fn default() -> Self {
        Self::new(Routing::default())
    }
}

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notices")
            .field("routing", &self.routing)
            .finish()
    }
}

impl Notices {
    pub fn new(routing: Routing) -> Self {
        Self::with_clock(routing, Arc::new(SystemClock))
    }

    pub fn with_clock(routing: Routing, clock: Arc<dyn Clock>) -> Self {
        Self {
            routing: Arc::new(routing),
            wake: Arc::default(),
            clock,
        }
    }

    pub fn routing(&self) -> &Routing {
        &self.routing
    }

    /// Notified whenever [`Notices::tell`] stored rows.
    pub fn wake(&self) -> Arc<tokio::sync::Notify> {
        Arc::clone(&self.wake)
    }

    /// Tells the owner that run `run_id` of `gid` completed (with its PR, when it has one):
    /// the one notice every way a run completes sends.
    pub async fn tell_completed(
        &self,
        store: &dyn Store,
        gid: &str,
        run_id: i64,
        pr_url: Option<&str>,
    ) {
        let body = super::text::completed(run_id, gid, pr_url);
        self.tell(
            store,
            Notice::orchestrator(Priority::Action, gid.to_string(), Some(run_id), body),
        )
        .await;
    }

    /// Tells the owner that run `run_id` of `gid` was abandoned, and why.
    pub async fn tell_abandoned(
        &self,
        store: &dyn Store,
        priority: Priority,
        gid: &str,
        run_id: i64,
        why: &str,
    ) {
        let body = super::text::abandoned(&self.routing, run_id, gid, why);
        self.tell(
            store,
            Notice::orchestrator(priority, gid.to_string(), Some(run_id), body),
        )
        .await;
    }

    /// Logs `notice` when the log takes its priority, and stores it for every other
    /// notifier that does. Never fails: a store error is logged.
    pub async fn tell(&self, store: &dyn Store, notice: Notice) {
        self.log(&notice);
        self.send(store, &self.rows(&notice)).await;
    }

    /// Writes `notice` to the log, when the log takes its priority: the log's half of
    /// [`Self::tell`], for a notice whose rows were stored by another write.
    pub fn log(&self, notice: &Notice) {
        if self.routing.logs(notice) {
            let gid = notice.task_gid.as_deref().unwrap_or("-");
            let run = notice.run_id.unwrap_or_default();
            match notice.priority {
                Priority::Urgent => {
                    tracing::warn!(gid = %gid, run, priority = "urgent", "{}", notice.body)
                }
                Priority::Action | Priority::Info => {
                    tracing::info!(gid = %gid, run, priority = %notice.priority, "{}", notice.body)
                }
            }
        }
    }

    /// The outbox rows of `notice`, one per notifier that takes it, stamped now: the
    /// store's half of [`Self::tell`], for a write that stores them with other rows
    /// (then [`Self::stored`]).
    pub fn rows(&self, notice: &Notice) -> Vec<NewOutgoing> {
        self.routing.route(notice, self.clock.now())
    }

    /// Says that rows of [`Self::rows`] were stored, so a waiting deliverer starts.
    pub fn stored(&self) {
        self.wake.notify_one();
    }

    /// Stores rows meant for one notifier only (an answer in the topic, say).
    pub async fn send(&self, store: &dyn Store, rows: &[NewOutgoing]) {
        if rows.is_empty() {
            return;
        }
        match store.enqueue_outgoing(rows).await {
            Ok(_) => self.stored(),
            Err(error) => {
                tracing::error!(%error, notifiers = ?rows.iter().map(|r| r.notifier.as_str()).collect::<Vec<_>>(), "cannot store an outgoing message; it is lost: {}", rows[0].body)
            }
        }
    }

    /// Whether Zulip is one of the notifiers.
    pub fn has_zulip(&self) -> bool {
        self.routing.targets.iter().any(|(n, _)| n == ZULIP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed_now() -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::from_timestamp(1_790_000_000, 0).expect("a fixed time")
    }

    fn notice(priority: Priority) -> Notice {
        Notice {
            priority,
            persona: Persona::Worker,
            task_gid: Some("T-1".into()),
            run_id: Some(4),
            body: "[STATUS:x] y".into(),
        }
    }

    #[test]
    fn a_notice_goes_to_every_notifier_that_takes_its_priority() {
        let routing = Routing {
            log: vec![Priority::Urgent],
            targets: vec![
                (
                    ZULIP.into(),
                    vec![Priority::Urgent, Priority::Action, Priority::Info],
                ),
                ("webhook:ops".into(), vec![Priority::Urgent]),
            ],
            owner: None,
        };
        let at = fixed_now();
        let info = routing.route(&notice(Priority::Info), at);
        assert_eq!(
            info.iter().map(|r| r.notifier.as_str()).collect::<Vec<_>>(),
            ["zulip"]
        );
        assert_eq!(info[0].persona.as_deref(), Some("worker"));
        assert_eq!(info[0].run_id, Some(4));
        assert_eq!(info[0].created_at, at);
        let urgent = routing.route(&notice(Priority::Urgent), at);
        assert_eq!(
            urgent
                .iter()
                .map(|r| r.notifier.as_str())
                .collect::<Vec<_>>(),
            ["zulip", "webhook:ops"]
        );
        assert!(routing.logs(&notice(Priority::Urgent)));
        assert!(!routing.logs(&notice(Priority::Info)));
    }

    #[test]
    fn by_default_only_the_log_hears_what_needs_the_owner() {
        let routing = Routing::default();
        assert!(routing
            .route(&notice(Priority::Urgent), fixed_now())
            .is_empty());
        assert!(routing.logs(&notice(Priority::Action)));
        assert!(!routing.logs(&notice(Priority::Info)));
        assert!(!routing.has_targets());
    }
}

//! The System page (`/system`): the hosts executor runs on (each component's heartbeat and
//! its last error), the runs' leases and who holds them, the outbox (what waits for which
//! notifier, and why it has not gone), the forge's remaining request quota as the
//! daemon's forge client last heard it (GitHub's `x-ratelimit-*` headers), and the wall workers run behind (as `executor status` says it).
//!
//! What it must never do: show a secret (an outbox error is redacted by its notifier before
//! it is stored; no token or password is read here), change anything, or probe the wall on
//! every request (a probe starts a process: it is done once per console).

use axum::extract::State;
use axum::response::Response;
use minijinja::context;

use super::pages::{feed, page, unavailable};
use super::Console;
use crate::core::clock::Clock;

/// Leases and outbox messages the page lists at most.
const LEASES_SHOWN: u32 = 200;
const OUTBOX_SHOWN: u32 = 50;
/// The start of an outbox message the page shows.
const BODY_CHARS: usize = 300;

fn local(at: &chrono::DateTime<chrono::Utc>) -> String {
    super::super::runs::local_time(at)
}

pub(super) async fn page_of(c: &Console) -> Response {
    let events = feed(c, None).await;
    let store = c.store.as_ref();
    let read = async {
        let summary = store.summary().await?;
        let leases = store.leases(LEASES_SHOWN).await?;
        let backlog = store.outbox_backlog().await?;
        let waiting = store.outbox(None, true, OUTBOX_SHOWN).await?;
        Ok::<_, crate::store::StoreError>((summary, leases, backlog, waiting))
    };
    let (summary, leases, backlog, waiting) = match read.await {
        Ok(read) => read,
        Err(error) => return unavailable(error),
    };
    let now = crate::core::clock::SystemClock.now();
    let settings = std::sync::Arc::clone(&c.settings);
    let confinement = c
        .confinement
        .get_or_init(|| async move {
            tokio::task::spawn_blocking(move || super::super::confinement(&settings))
                .await
                .unwrap_or_else(|error| super::super::output::Confinement {
                    confined: false,
                    mode: "unknown",
                    network: "unknown",
                    detail: format!("the wall could not be probed: {error}"),
                    layers: Vec::new(),
                    memory: super::super::output::MemoryLimit {
                        limited: false,
                        max_bytes: None,
                        detail: "unknown".to_string(),
                    },
                    processes: super::super::output::ProcessLimit {
                        capped: false,
                        mechanism: "none",
                        max: None,
                        detail: "unknown".to_string(),
                    },
                })
        })
        .await;
    let hosts: Vec<_> = summary
        .heartbeats
        .iter()
        .map(|h| {
            let error = summary
                .component_errors
                .iter()
                .find(|e| e.component == h.component && e.host == h.host)
                .map(|e| context! { message => &e.message, at => local(&e.at), count => e.count });
            context! { component => &h.component, host => &h.host, pid => h.pid,
            started => local(&h.started_at), beat => local(&h.beat_at),
            stopped => h.stopped_at.as_ref().map(local), error }
        })
        .collect();
    let leases: Vec<_> = leases
        .iter()
        .map(|l| {
            context! { run_id => l.run_id, holder => &l.holder, expires => local(&l.expires_at),
            expired => l.expires_at < now }
        })
        .collect();
    let backlog: Vec<_> = backlog
        .iter()
        .map(|b| {
            context! { notifier => &b.notifier, undelivered => b.undelivered,
            oldest => b.oldest.as_ref().map(local), attempts => b.attempts,
            last_error => &b.last_error }
        })
        .collect();
    let waiting: Vec<_> = waiting
        .iter()
        .map(|m| {
            let body: String = m.body.chars().take(BODY_CHARS).collect();
            let cut = m.body.chars().nth(BODY_CHARS).is_some();
            context! { id => m.id, notifier => &m.notifier, persona => &m.persona,
            priority => format!("{:?}", m.priority).to_lowercase(), task_gid => &m.task_gid,
            run_id => m.run_id, created => local(&m.created_at), attempts => m.attempts,
            next => local(&m.next_attempt_at), last_error => &m.last_error, body, cut }
        })
        .collect();
    let forge = match c.settings.raw.forge.kind {
        crate::config::ForgeKind::Local => "local",
        crate::config::ForgeKind::Github => "github",
        crate::config::ForgeKind::Gitea => "gitea",
    };
    let quota: Vec<_> = c
        .forge
        .as_ref()
        .map(crate::forge::ForgeClient::quota)
        .unwrap_or_default()
        .iter()
        .map(|q| {
            context! { bucket => q.bucket, remaining => q.remaining,
            reset => q.reset_at.as_ref().map(local), seen => local(&q.seen_at) }
        })
        .collect();
    page(
        c,
        "system.html",
        context! { title => "System", path => "/system", csrf => &*c.csrf, events, hosts,
        leases, backlog, waiting, confinement, forge, quota,
        live_workers => summary.live_workers },
    )
}

pub(super) async fn show(State(c): State<Console>) -> Response {
    page_of(&c).await
}

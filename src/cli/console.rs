//! The owner's console, first part: the JSON API under `/api/v1/` on `[web] listen`
//! (DESIGN section 12). The documents are the ones the CLI prints with `--json`, built by
//! the same functions; the actions (go, skip, decide, cancel, retry) take the same paths as
//! the CLI and the chat, and wake the daemon like them.
//!
//! It is served on loopback only and answers only requests that name a loopback host
//! (a page on another site that rebinds its name to 127.0.0.1 is refused) and, for an
//! action, that come as JSON from no other origin (a browser sends a cross-site JSON POST
//! only after a preflight, which is never allowed). It must never serve a non-loopback
//! address: that needs a login, which is not built yet.

use std::sync::Arc;

use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::config::Settings;
use crate::core::clock::SystemClock;
use crate::core::queue::{QueueEvent, QueueStatus};
use crate::core::record::Resolved;
use crate::ops::queue::{self as queue_ops, QueueOpError};
use crate::store::wake::{self, Wake};
use crate::store::Store;

/// The API's root.
pub const API: &str = "/api/v1";

#[derive(Clone)]
struct Console {
    settings: Arc<Settings>,
    store: Arc<dyn Store>,
}

/// Whether `listen` is a loopback address, the only kind the console serves.
pub fn is_loopback(listen: &str) -> bool {
    listen
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|addr| addr.ip().is_loopback())
        || listen.starts_with("localhost:")
}

/// The console's routes.
pub fn router(settings: Arc<Settings>, store: Arc<dyn Store>) -> Router {
    Router::new()
        .route(&format!("{API}/status"), get(status))
        .route(&format!("{API}/tasks"), get(tasks))
        .route(&format!("{API}/tasks/{{gid}}"), get(task))
        .route(&format!("{API}/tasks/{{gid}}/go"), post(go))
        .route(&format!("{API}/tasks/{{gid}}/skip"), post(skip))
        .route(&format!("{API}/tasks/{{gid}}/retry"), post(retry))
        .route(&format!("{API}/runs"), get(runs))
        .route(&format!("{API}/runs/{{id}}"), get(run))
        .route(&format!("{API}/runs/{{target}}/cancel"), post(cancel))
        .route(&format!("{API}/escalations"), get(escalations))
        .route(&format!("{API}/escalations/{{id}}/decide"), post(decide))
        .layer(middleware::from_fn(guard))
        .with_state(Console { settings, store })
}

/// Refuses a request that names a host other than loopback, and an action that is not
/// JSON or comes from another origin.
pub(super) async fn guard(request: Request, next: Next) -> Response {
    let headers = request.headers();
    if !host_is_loopback(headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "the console answers only requests for a loopback host (localhost, 127.0.0.1, [::1])",
        );
    }
    if request.method() == Method::POST {
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !json {
            return refuse(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "an action is a POST with Content-Type: application/json",
            );
        }
        let cross_site = headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == "cross-site");
        let foreign_origin = headers
            .get(header::ORIGIN)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|origin| !origin_is_loopback(origin));
        if cross_site || foreign_origin {
            return refuse(
                StatusCode::FORBIDDEN,
                "an action from another site is refused",
            );
        }
    }
    next.run(request).await
}

fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    };
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
}

fn origin_is_loopback(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let mut headers = HeaderMap::new();
    match rest.parse() {
        Ok(value) => {
            headers.insert(header::HOST, value);
            host_is_loopback(&headers)
        }
        Err(_) => false,
    }
}

fn refuse(status: StatusCode, why: &str) -> Response {
    (status, Json(json!({ "error": why }))).into_response()
}

/// An error as the API answers it: not found, a conflict with the current state, or the
/// store failing.
fn failed(error: anyhow::Error) -> Response {
    use crate::ops::run::RunOpError;
    let status = match (
        error.downcast_ref::<QueueOpError>(),
        error.downcast_ref::<RunOpError>(),
    ) {
        (Some(QueueOpError::NotFound(_)), _) | (_, Some(RunOpError::NotFound(_))) => {
            StatusCode::NOT_FOUND
        }
        (Some(QueueOpError::Illegal { .. }), _) | (_, Some(RunOpError::Conflict(_))) => {
            StatusCode::CONFLICT
        }
        _ if error.downcast_ref::<crate::store::StoreError>().is_some() => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    refuse(status, &format!("{error:#}"))
}

fn document<T: serde::Serialize>(value: anyhow::Result<T>) -> Response {
    match value {
        Ok(value) => Json(value).into_response(),
        Err(error) => failed(error),
    }
}

async fn status(State(c): State<Console>) -> Response {
    document(super::status_report(&c.settings, c.store.as_ref()).await)
}

#[derive(Deserialize)]
struct TasksQuery {
    status: Option<String>,
}

async fn tasks(State(c): State<Console>, Query(q): Query<TasksQuery>) -> Response {
    let status = match q.status.as_deref().map(str::parse::<QueueStatus>) {
        None => None,
        Some(Ok(status)) => Some(status),
        Some(Err(_)) => return refuse(StatusCode::BAD_REQUEST, "unknown `status`"),
    };
    document(c.store.tasks(status.as_ref()).await.map_err(Into::into))
}

async fn task(State(c): State<Console>, Path(gid): Path<String>) -> Response {
    document(super::shown_task(c.store.as_ref(), &gid).await)
}

#[derive(Deserialize)]
struct RunsQuery {
    state: Option<String>,
}

async fn runs(State(c): State<Console>, Query(q): Query<RunsQuery>) -> Response {
    document(
        async {
            let mut runs = c.store.runs(None).await?;
            if let Some(state) = &q.state {
                runs.retain(|r| r.state.as_str() == state);
            }
            runs.sort_by_key(|r| std::cmp::Reverse(r.id));
            Ok(runs)
        }
        .await,
    )
}

async fn run(State(c): State<Console>, Path(id): Path<i64>) -> Response {
    match c.store.runs(None).await {
        Ok(runs) => match runs.into_iter().find(|r| r.id == id) {
            Some(run) => Json(run).into_response(),
            None => refuse(StatusCode::NOT_FOUND, &format!("no run {id}")),
        },
        Err(error) => failed(error.into()),
    }
}

#[derive(Deserialize)]
struct EscalationsQuery {
    #[serde(default)]
    all: bool,
}

async fn escalations(State(c): State<Console>, Query(q): Query<EscalationsQuery>) -> Response {
    document(c.store.escalations(!q.all).await.map_err(Into::into))
}

/// What an action changed, for its answer.
fn moved(gid: &str, from: impl std::fmt::Display, to: impl std::fmt::Display) -> Response {
    Json(json!({ "task_gid": gid, "from": from.to_string(), "to": to.to_string() })).into_response()
}

async fn owner_move(c: &Console, gid: &str, event: QueueEvent) -> Response {
    match queue_ops::apply(
        c.store.as_ref(),
        &SystemClock,
        gid,
        event,
        "owner",
        Some("from the console".to_string()),
    )
    .await
    {
        Ok((step, _)) => {
            wake::notify(c.store.as_ref(), Wake::Queue).await;
            moved(gid, step.from, step.to)
        }
        Err(error) => failed(error.into()),
    }
}

async fn go(State(c): State<Console>, Path(gid): Path<String>) -> Response {
    // A run waiting at the integration gate is integrated by the owner's go, as in the CLI.
    let gate = match c.store.decisions(&gid).await {
        Ok(decisions) => decisions
            .into_iter()
            .find(|d| d.is_pending() && d.action == crate::runner::drive::INTEGRATE),
        Err(error) => return failed(error.into()),
    };
    match gate {
        Some(gate) => answer(&c, gate.id, "approve", Some("go")).await,
        None => owner_move(&c, &gid, QueueEvent::Go).await,
    }
}

async fn skip(State(c): State<Console>, Path(gid): Path<String>) -> Response {
    owner_move(&c, &gid, QueueEvent::Skip).await
}

async fn retry(State(c): State<Console>, Path(gid): Path<String>) -> Response {
    match crate::ops::run::retry(c.store.as_ref(), &gid).await {
        Ok(step) => {
            wake::notify(c.store.as_ref(), Wake::Queue).await;
            moved(&gid, step.from, step.to)
        }
        Err(error) => failed(error),
    }
}

#[derive(Deserialize, Default)]
struct CancelBody {
    reason: Option<String>,
}

async fn cancel(
    State(c): State<Console>,
    Path(target): Path<String>,
    body: Option<Json<CancelBody>>,
) -> Response {
    let reason = body
        .and_then(|Json(b)| b.reason)
        .unwrap_or_else(|| "no reason given (from the console)".to_string());
    match crate::ops::run::cancel(
        c.store.as_ref(),
        &crate::ops::run::this_process(),
        &target,
        &reason,
    )
    .await
    {
        Ok(done) => {
            wake::notify(c.store.as_ref(), Wake::Queue).await;
            Json(json!({
                "run_id": done.run.id,
                "task_gid": done.run.task_gid,
                "state": done.run.state.as_str(),
                "why": done.why,
            }))
            .into_response()
        }
        Err(error) => failed(error),
    }
}

#[derive(Deserialize)]
struct DecideBody {
    answer: String,
    note: Option<String>,
}

async fn decide(
    State(c): State<Console>,
    Path(id): Path<i64>,
    Json(body): Json<DecideBody>,
) -> Response {
    if !matches!(body.answer.as_str(), "approve" | "deny") {
        return refuse(StatusCode::BAD_REQUEST, "`answer` is approve or deny");
    }
    answer(&c, id, &body.answer, body.note.as_deref()).await
}

/// Records the owner's answer to escalation `id`, once: a repeated or stale click changes
/// nothing and says so.
async fn answer(c: &Console, id: i64, resolution: &str, note: Option<&str>) -> Response {
    let resolved = c
        .store
        .resolve_escalation(id, resolution, note, "owner (console)", chrono::Utc::now())
        .await;
    match resolved {
        Err(error) => failed(error.into()),
        Ok(None) => refuse(StatusCode::NOT_FOUND, &format!("no escalation {id}")),
        Ok(Some(Resolved::NotAnEscalation(_))) => refuse(
            StatusCode::CONFLICT,
            &format!("decision {id} is not an escalation"),
        ),
        Ok(Some(Resolved::AlreadyResolved(d))) => refuse(
            StatusCode::CONFLICT,
            &format!(
                "escalation {id} was already answered: {}",
                d.resolution.as_deref().unwrap_or("?")
            ),
        ),
        Ok(Some(Resolved::Recorded(d))) => {
            wake::notify(c.store.as_ref(), Wake::Answer).await;
            Json(d).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_host(host: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, host.parse().unwrap());
        headers
    }

    #[test]
    fn only_loopback_hosts_and_origins_are_answered() {
        for host in [
            "localhost:8450",
            "127.0.0.1:8450",
            "[::1]:8450",
            "localhost",
        ] {
            assert!(host_is_loopback(&with_host(host)), "{host}");
        }
        for host in [
            "evil.example:8450",
            "127.0.0.1.evil.example",
            "10.0.0.2:8450",
        ] {
            assert!(!host_is_loopback(&with_host(host)), "{host}");
        }
        assert!(!host_is_loopback(&HeaderMap::new()));
        assert!(origin_is_loopback("http://localhost:8450"));
        assert!(!origin_is_loopback("https://evil.example"));
        assert!(!origin_is_loopback("null"));
    }

    #[test]
    fn the_console_serves_loopback_addresses_only() {
        assert!(is_loopback("127.0.0.1:8450"));
        assert!(is_loopback("[::1]:0"));
        assert!(is_loopback("localhost:8450"));
        assert!(!is_loopback("0.0.0.0:8450"));
        assert!(!is_loopback("192.168.1.4:8450"));
    }
}

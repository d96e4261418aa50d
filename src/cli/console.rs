//! The owner's console (docs/design.md §12) on `[web] listen`: the JSON API under
//! `/api/v1/` (the documents the CLI prints with `--json`, built by the same functions),
//! the pages rendered on the server ([`pages`]), and the live feed of changes as
//! server-sent events ([`events`]). Every owner action, from the API or a page's form, goes
//! through [`actions`]: the same paths as the CLI and the chat.
//!
//! Who may use it is [`access`]'s one rule: a request from loopback needs no login, any
//! other a token (`[web] token_file` / `token_env`, or the read-only kind, which may not
//! POST); a browser logs in once at `/login` and keeps an HttpOnly cookie. A request from
//! loopback must also name a loopback host (a page on another site that rebinds its name
//! to 127.0.0.1 is not loopback). An API action must come as JSON from no other origin (a
//! browser sends a cross-site JSON POST only after a preflight, which is never allowed); a
//! page's form must come from no other origin and carry the page's CSRF token. It must
//! never show a token: not in a page, a document, a metric or a log line.

pub mod access;
pub(crate) mod actions;
pub(crate) mod diff;
mod events;
mod insights;
mod pages;
mod pr_view;
mod system;

use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::config::Settings;
use crate::core::queue::QueueStatus;
use crate::store::Store;
use access::{Access, Asked, Denied, Grant};

/// The API's root.
pub const API: &str = "/api/v1";
/// Where the Prometheus scrape is served (`super::metrics`).
pub const METRICS: &str = "/metrics";

/// Where the pages' forms post.
pub const ACTIONS: &str = "/actions";

/// Where an MCP client posts its messages (MCP's streamable HTTP transport).
pub const MCP: &str = "/mcp";

/// Where a browser from another machine gives its token.
pub const LOGIN: &str = "/login";

/// Where it forgets it.
pub const LOGOUT: &str = "/logout";

#[derive(Clone)]
struct Console {
    settings: Arc<Settings>,
    store: Arc<dyn Store>,
    /// This process's CSRF token: in every page, required with every form.
    csrf: Arc<str>,
    pages: Arc<pages::Templates>,
    access: Arc<Access>,
    /// The wall as this machine gives it, probed once (a probe starts a process): the
    /// System page shows it.
    confinement: Arc<tokio::sync::OnceCell<super::output::Confinement>>,
    /// The daemon's own forge client, asked only what it last heard of the request quota
    /// (it never calls the forge for a page).
    forge: Option<crate::forge::ForgeClient>,
    /// The store's change hints, started by the first live feed and shared by every one
    /// (`None` when the store cannot give them: the feeds poll).
    hints: Arc<tokio::sync::OnceCell<Option<crate::store::changed::ChangeHints>>>,
}

impl Console {
    /// A receiver of the store's change hints, for one live feed.
    async fn change_hints(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.hints
            .get_or_init(|| async {
                match self.store.change_hints().await {
                    Ok(hints) => Some(hints),
                    Err(error) => {
                        tracing::warn!(
                            error = format!("{:#}", anyhow::Error::from(error)),
                            "the store gives the console no change hints; its live feeds poll"
                        );
                        None
                    }
                }
            })
            .await
            .as_ref()
            .map(crate::store::changed::ChangeHints::subscribe)
    }
}

/// Whether `listen` is a loopback address, the only kind the console serves without a
/// token.
pub fn is_loopback(listen: &str) -> bool {
    listen
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|addr| addr.ip().is_loopback())
        || listen.starts_with("localhost:")
}

/// The console's routes: the API, the live feed, the pages and their forms.
pub fn router(
    settings: Arc<Settings>,
    store: Arc<dyn Store>,
    access: Arc<Access>,
    forge: Option<crate::forge::ForgeClient>,
) -> Router {
    let console = Console {
        settings,
        store,
        csrf: pages::new_csrf_token().into(),
        pages: Arc::new(pages::Templates::load()),
        access: Arc::clone(&access),
        confinement: Arc::default(),
        forge,
        hints: Arc::default(),
    };
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
        .route(&format!("{API}/events"), get(events::stream))
        .route(&format!("{API}/analytics"), get(analytics))
        .route(MCP, post(mcp).get(mcp_stream))
        .merge(pages::routes())
        .route("/system", get(system::show))
        .route("/insights", get(insights::show))
        .layer(middleware::from_fn_with_state(access, guard))
        .with_state(console)
}

/// Lets a request in as [`access::decide`] says, then refuses an API action that is not
/// JSON, a form that is not a form, and either from another origin.
pub(super) async fn guard(
    State(access): State<Arc<Access>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let path = request.uri().path();
    // An MCP client posts its reads too: a read-only grant reaches `/mcp`, which then
    // offers the read tools alone.
    let reads = matches!(*request.method(), Method::GET | Method::HEAD) || path == MCP;
    let asked = Asked {
        peer: request
            .extensions()
            .get::<ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0),
        loopback_host: host_is_loopback(headers),
        forwarded: headers.contains_key(header::FORWARDED)
            || headers.contains_key("x-forwarded-for"),
        bearer: header_text(headers, header::AUTHORIZATION).and_then(access::bearer),
        cookie: header_text(headers, header::COOKIE).and_then(access::session_cookie),
        reads,
    };
    // The login page and the assets it needs are open to all: they show nothing.
    let open = path == LOGIN || path == LOGOUT || path.starts_with("/assets/");
    let grant = match access::decide(&access, &asked) {
        Ok(grant) => Some(grant),
        Err(_) if open => None,
        Err(denied) => return denied_answer(denied, path, reads),
    };
    if request.method() == Method::POST {
        let form = path.starts_with(ACTIONS) || open;
        let (wanted, what) = if form {
            (
                "application/x-www-form-urlencoded",
                "a form is a POST with Content-Type: application/x-www-form-urlencoded",
            )
        } else {
            (
                "application/json",
                "an action is a POST with Content-Type: application/json",
            )
        };
        let typed =
            header_text(headers, header::CONTENT_TYPE).is_some_and(|v| v.starts_with(wanted));
        if !typed {
            return refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, what);
        }
        let cross_site = header_text(headers, "sec-fetch-site").is_some_and(|v| v == "cross-site");
        let local = grant == Some(Grant::Local);
        let foreign_origin = header_text(headers, header::ORIGIN).is_some_and(|origin| {
            if local {
                !origin_is_loopback(origin)
            } else {
                !origin_is_host(origin, header_text(headers, header::HOST))
            }
        });
        if cross_site || foreign_origin {
            return refuse(
                StatusCode::FORBIDDEN,
                "an action from another site is refused",
            );
        }
    }
    let mut request = request;
    if let Some(grant) = grant {
        request.extensions_mut().insert(grant);
    }
    next.run(request).await
}

/// `POST /mcp`: one MCP message, answered as JSON (`202` for a notification).
async fn mcp(
    State(c): State<Console>,
    grant: Option<axum::Extension<Grant>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    if let Some(version) = header_text(&headers, "mcp-protocol-version") {
        if !super::mcp::speaks(version) {
            return refuse(
                StatusCode::BAD_REQUEST,
                "this MCP-Protocol-Version is not one executor speaks",
            );
        }
    }
    let read_only = !matches!(grant.map(|g| g.0), Some(Grant::Local) | Some(Grant::Full));
    match super::mcp::answer_http(&c.settings, Arc::clone(&c.store), read_only, &body).await {
        Some(answer) => Json(answer).into_response(),
        None => StatusCode::ACCEPTED.into_response(),
    }
}

/// `GET /mcp`: no stream of the server's own messages is offered (it sends none).
async fn mcp_stream() -> Response {
    refuse(
        StatusCode::METHOD_NOT_ALLOWED,
        "executor's MCP endpoint takes POSTs only; it sends no messages of its own",
    )
}

fn header_text(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The answer to a request [`access::decide`] did not let in: a page asks a browser to log
/// in, the API and the metrics say what is missing.
fn denied_answer(denied: Denied, path: &str, reads: bool) -> Response {
    match denied {
        Denied::NotLoopback => refuse(
            StatusCode::FORBIDDEN,
            "the console answers only requests for a loopback host (localhost, 127.0.0.1, [::1]); \
             set [web] token_file or token_env to let other machines in with a token",
        ),
        Denied::ReadOnly => refuse(
            StatusCode::FORBIDDEN,
            "a read-only token reads only: this action needs the console's token",
        ),
        Denied::NoToken => {
            let page = reads && !path.starts_with(API) && path != METRICS && path != MCP;
            if page {
                return (
                    StatusCode::SEE_OTHER,
                    [
                        (header::LOCATION, LOGIN),
                        (header::CACHE_CONTROL, "no-store"),
                    ],
                )
                    .into_response();
            }
            let mut answer = refuse(
                StatusCode::UNAUTHORIZED,
                "this needs the console's token: Authorization: Bearer <token>",
            );
            answer.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer realm=\"executor\""),
            );
            answer
        }
    }
}

/// Whether `origin` is the site the request was sent to (scheme aside).
fn origin_is_host(origin: &str, host: Option<&str>) -> bool {
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    matches!((rest, host), (Some(rest), Some(host)) if rest.eq_ignore_ascii_case(host))
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
    let refused = actions::Refused::from_error(error);
    refuse(refused.status(), refused.message())
}

fn document<T: serde::Serialize>(value: anyhow::Result<T>) -> Response {
    match value {
        Ok(value) => Json(value).into_response(),
        Err(error) => failed(error),
    }
}

#[derive(Deserialize)]
struct AnalyticsQuery {
    days: Option<u32>,
}

/// `GET /api/v1/analytics?days=N`: the document of `executor stats --json`.
async fn analytics(State(c): State<Console>, Query(q): Query<AnalyticsQuery>) -> Response {
    use crate::core::clock::Clock;
    let days = q.days.unwrap_or(crate::ops::analytics::DEFAULT_DAYS);
    let now = crate::core::clock::SystemClock.now();
    match crate::ops::analytics::report(c.store.as_ref(), now, days).await {
        Ok(report) => Json(report).into_response(),
        Err(error) => failed(error.into()),
    }
}

async fn status(State(c): State<Console>) -> Response {
    document(super::status_report(&c.settings, c.store.as_ref()).await)
}

/// How many rows a list of the API gives when `limit` is not said, and at most.
pub const DEFAULT_LIMIT: u32 = 200;
pub const MAX_LIMIT: u32 = 1000;

/// A page of a list: `limit` rows (at most [`MAX_LIMIT`]) after a cursor.
fn limit_of(asked: Option<u32>) -> u32 {
    asked.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT)
}

/// A list as the API answers it: the same JSON array as `--json`, and when more rows
/// follow, a `Link: <next page>; rel="next"` header (RFC 8288) to them.
fn listed<T: serde::Serialize>(rows: &[T], next: Option<String>) -> Response {
    let mut answer = Json(rows).into_response();
    if let Some(next) = next {
        if let Ok(value) = header::HeaderValue::from_str(&format!("<{next}>; rel=\"next\"")) {
            answer.headers_mut().insert(header::LINK, value);
        }
    }
    answer
}

#[derive(Deserialize)]
struct TasksQuery {
    status: Option<String>,
    /// Tasks added after the one with this id (the order of `executor queue --json`).
    after: Option<i64>,
    limit: Option<u32>,
}

async fn tasks(State(c): State<Console>, Query(q): Query<TasksQuery>) -> Response {
    let status = match q.status.as_deref().map(str::parse::<QueueStatus>) {
        None => None,
        Some(Ok(status)) => Some(status),
        Some(Err(_)) => return refuse(StatusCode::BAD_REQUEST, "unknown `status`"),
    };
    let limit = limit_of(q.limit);
    // One row more than asked says whether a next page exists.
    let mut found = match c
        .store
        .tasks_page(status.as_ref(), q.after.unwrap_or(i64::MIN), limit + 1)
        .await
    {
        Ok(found) => found,
        Err(error) => return failed(error.into()),
    };
    let more = found.len() > limit as usize;
    found.truncate(limit as usize);
    let next = more.then(|| found.last()).flatten().map(|last| {
        let status = q
            .status
            .as_deref()
            .map(|s| format!("status={}&", url_part(s)))
            .unwrap_or_default();
        format!("{API}/tasks?{status}after={}&limit={limit}", last.id)
    });
    listed(&found, next)
}

/// `text` as a part of a URL's query.
fn url_part(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

async fn task(State(c): State<Console>, Path(gid): Path<String>) -> Response {
    document(super::shown_task(c.store.as_ref(), &gid).await)
}

#[derive(Deserialize)]
struct RunsQuery {
    state: Option<String>,
    /// Runs older than the one with this id (the order of `executor runs --json`: newest
    /// first).
    before: Option<i64>,
    limit: Option<u32>,
}

async fn runs(State(c): State<Console>, Query(q): Query<RunsQuery>) -> Response {
    let limit = limit_of(q.limit);
    let states: Vec<crate::core::run::RunState> = q
        .state
        .as_deref()
        .map(crate::core::run::RunState::from_column)
        .into_iter()
        .collect();
    let read = async {
        let mut runs = c.store.runs_page(&states, q.before, limit + 1).await?;
        let more = runs.len() > limit as usize;
        runs.truncate(limit as usize);
        let ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
        let spent = c.store.spend_of_runs(&ids).await?;
        Ok::<_, crate::store::StoreError>((runs, spent, more))
    };
    let (runs, spent, more) = match read.await {
        Ok(read) => read,
        Err(error) => return failed(error.into()),
    };
    let next = more.then(|| runs.last()).flatten().map(|last| {
        let state = q
            .state
            .as_deref()
            .map(|s| format!("state={}&", url_part(s)))
            .unwrap_or_default();
        format!("{API}/runs?{state}before={}&limit={limit}", last.id)
    });
    listed(&super::runs::documents(&runs, &spent), next)
}

async fn run(State(c): State<Console>, Path(id): Path<i64>) -> Response {
    let read = async {
        let run = c.store.run(id).await?;
        let spent = c.store.spend_of_runs(&[id]).await?;
        Ok::<_, crate::store::StoreError>((run, spent))
    };
    match read.await {
        Ok((Some(run), spent)) => {
            let run = [run];
            let documents = super::runs::documents(&run, &spent);
            Json(&documents[0]).into_response()
        }
        Ok((None, _)) => refuse(StatusCode::NOT_FOUND, &format!("no run {id}")),
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

fn acted(outcome: actions::Outcome) -> Response {
    match outcome {
        Ok(done) => Json(done.to_json()).into_response(),
        Err(refused) => refuse(refused.status(), refused.message()),
    }
}

async fn go(State(c): State<Console>, Path(gid): Path<String>) -> Response {
    acted(actions::go(c.store.as_ref(), &gid, actions::Via::Console).await)
}

async fn skip(State(c): State<Console>, Path(gid): Path<String>) -> Response {
    acted(actions::skip(c.store.as_ref(), &gid, actions::Via::Console).await)
}

async fn retry(State(c): State<Console>, Path(gid): Path<String>) -> Response {
    acted(actions::retry(c.store.as_ref(), &gid).await)
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
    let reason = body.and_then(|Json(b)| b.reason);
    acted(
        actions::cancel(
            c.store.as_ref(),
            &target,
            reason.as_deref(),
            actions::Via::Console,
        )
        .await,
    )
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
    acted(
        actions::decide(
            c.store.as_ref(),
            id,
            &body.answer,
            body.note.as_deref(),
            actions::Via::Console,
        )
        .await,
    )
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

//! The console's pages, rendered on the server from minijinja templates built into the
//! binary, with htmx and a few lines of the console's own script served from the binary
//! too (no CDN, no build step): *Needs you* (`/`), *Runs* (`/runs`), *Run* (`/runs/{id}`:
//! the worker's lines, the PR with CI and review, the diff), *Queue* (`/queue`), *Goal*
//! (`/goals/{gid}`: the subtask tree) and *System* (`/system`, in [`super::system`]).
//! Every list is bounded: the newest rows, a count, and a link to older ones, so a page
//! costs the same on a store of a hundred tasks or of a hundred thousand. Their forms
//! post to `/actions/…`, through the same
//! [`actions`](super::actions) as the JSON API, each with the process's CSRF token and the
//! id it answers in its path.
//!
//! What a page must never do: change anything on a GET, take a form without its token, or
//! show a task's or worker's text unescaped (the templates escape every value).

use std::path::Path as FsPath;

use axum::extract::{Form, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use minijinja::{context, Environment};
use serde::{Deserialize, Serialize};

use super::actions::{self, Outcome};
use super::Console;
use crate::core::queue::QueueStatus;
use crate::core::record::Decision;
use crate::core::record::Run;
use crate::core::run::RunState;
use crate::core::spend::SpendTotal;

/// The templates and assets, built into the binary.
const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("templates/base.html")),
    ("needs.html", include_str!("templates/needs.html")),
    ("runs.html", include_str!("templates/runs.html")),
    ("run.html", include_str!("templates/run.html")),
    ("queue.html", include_str!("templates/queue.html")),
    ("goal.html", include_str!("templates/goal.html")),
    ("goals.html", include_str!("templates/goals.html")),
    ("system.html", include_str!("templates/system.html")),
    ("insights.html", include_str!("templates/insights.html")),
    ("notice.html", include_str!("templates/notice.html")),
    ("login.html", include_str!("templates/login.html")),
];
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "htmx.min.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/htmx.min.js"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/console.js"),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    ),
];

/// How much of a worker's log or a run record's file a page shows (the end of it).
const TAIL_BYTES: usize = 64 * 1024;

/// Live runs the Runs page lists at most, and finished ones per page.
const LIVE_SHOWN: u32 = 200;
const FINISHED_SHOWN: u32 = 50;

/// Tasks of each status the Queue page lists (and per page of one status), and of each
/// waiting status the Needs-you page lists.
const QUEUE_SHOWN: u32 = 50;
const QUEUE_PAGE: u32 = 200;
const NEEDS_SHOWN: u32 = 100;

/// How long the Run page waits for git to give the run's diff.
const DIFF_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

pub(super) struct Templates {
    env: Environment<'static>,
}

impl Templates {
    pub(super) fn load() -> Self {
        let mut env = Environment::new();
        for (name, source) in TEMPLATES {
            // The templates are part of the binary: one that does not parse fails every
            // test that renders a page, so this cannot reach an owner.
            if let Err(error) = env.add_template(name, source) {
                tracing::error!(%error, template = name, "a console template does not parse");
            }
        }
        Templates { env }
    }

    fn render(&self, name: &str, ctx: minijinja::Value) -> Result<String, minijinja::Error> {
        self.env.get_template(name)?.render(ctx)
    }
}

/// A fresh random token for this process's forms.
pub(super) fn new_csrf_token() -> String {
    let mut bytes = [0u8; 24];
    if let Err(error) = getrandom::getrandom(&mut bytes) {
        // No randomness means no token anyone could guess either: refuse every form.
        tracing::error!(%error, "no randomness for the console's CSRF token; its forms are refused");
        return String::new();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/", get(needs))
        .route("/runs", get(runs))
        .route("/runs/{id}", get(run))
        .route("/queue", get(queue))
        .route("/goals", get(goals))
        .route("/goals/{gid}", get(goal))
        .route("/assets/{name}", get(asset))
        .route(super::LOGIN, get(login_page).post(login))
        .route(super::LOGOUT, post(logout))
        .route(
            &format!("{}/escalations/{{id}}/decide", super::ACTIONS),
            post(decide),
        )
        .route(
            &format!("{}/tasks/{{gid}}/{{verb}}", super::ACTIONS),
            post(task_action),
        )
        .route(
            &format!("{}/runs/{{target}}/cancel", super::ACTIONS),
            post(cancel),
        )
}

async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, kind, body)) => (
            [
                (header::CONTENT_TYPE, *kind),
                (header::CACHE_CONTROL, "max-age=3600"),
            ],
            *body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}

/// A page, or the reason it could not be made.
pub(super) fn page(c: &Console, name: &str, ctx: minijinja::Value) -> Response {
    match c.pages.render(name, ctx) {
        Ok(html) => Html(html).into_response(),
        Err(error) => {
            tracing::error!(%error, template = name, "cannot render a console page");
            (StatusCode::INTERNAL_SERVER_ERROR, format!("{error:#}")).into_response()
        }
    }
}

pub(super) fn unavailable(error: impl std::fmt::Display) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("the store cannot be read: {error}"),
    )
        .into_response()
}

/// An escalation as a page shows it.
#[derive(Serialize)]
struct EscalationView {
    id: i64,
    task_gid: Option<String>,
    run_id: Option<i64>,
    at: String,
    action: String,
    rule: Option<String>,
    question: Option<String>,
    window: Vec<String>,
}

impl EscalationView {
    fn of(d: &Decision) -> Self {
        let window = d
            .message_window
            .as_deref()
            .and_then(|w| serde_json::from_str::<Vec<serde_json::Value>>(w).ok())
            .unwrap_or_default()
            .iter()
            .filter_map(|m| m["line"].as_str().map(str::to_string))
            .collect();
        EscalationView {
            id: d.id,
            task_gid: d.task_gid.clone(),
            run_id: d.run_id,
            at: super::super::runs::local_time(&d.at),
            action: d.action.clone(),
            rule: d.rule_id.clone(),
            question: d.detail.clone(),
            window,
        }
    }
}

/// A task as a page shows it.
#[derive(Serialize)]
struct TaskView {
    gid: String,
    title: String,
    status: String,
    priority: Option<i64>,
    updated: String,
    run_id: Option<i64>,
}

impl TaskView {
    fn of(t: &crate::core::task::Task) -> Self {
        TaskView {
            gid: t.task_gid.clone(),
            title: t.title(),
            status: t.status.as_str().to_string(),
            priority: t.priority,
            updated: super::super::runs::local_time(&t.updated_at),
            run_id: t.executor_run_id,
        }
    }
}

/// A run as a page shows it.
#[derive(Serialize)]
struct RunView {
    id: i64,
    task_gid: String,
    state: String,
    stage: String,
    active: bool,
    worker: String,
    elapsed: String,
    waiting_on: Option<i64>,
    pr_url: Option<String>,
    pr_number: Option<i64>,
    branch: Option<String>,
    ci_attempts: i64,
    updated: String,
    /// What its workers cost (`-` before any reported a spend).
    cost: String,
    /// Their tokens and turns, in a line.
    spent: Option<String>,
}

impl RunView {
    fn of(c: &Console, run: &Run, spend: Option<&SpendTotal>) -> Self {
        use crate::core::clock::Clock;
        let now = crate::core::clock::SystemClock.now();
        let started = run.started_at.unwrap_or(run.updated_at);
        let ended = run
            .completed_at
            .or((!run.state.is_active()).then_some(run.updated_at));
        let seconds = (ended.unwrap_or(now) - started).num_seconds().max(0);
        let kind = format!("{:?}", c.settings.raw.agent.kind).to_lowercase();
        let worker = match run.worker_pid.filter(|_| run.state.is_active()) {
            Some(pid) => format!("{kind} (pid {pid})"),
            None => "-".to_string(),
        };
        RunView {
            id: run.id,
            task_gid: run.task_gid.clone(),
            state: run.state.as_str().to_string(),
            stage: super::super::runs::stage(run),
            active: run.state.is_active(),
            worker,
            elapsed: elapsed(seconds),
            waiting_on: super::super::runs::waiting_on(run),
            pr_url: run.pr_url.clone(),
            pr_number: run.pr_number,
            branch: run.branch_name.clone(),
            ci_attempts: run.ci_attempts,
            updated: super::super::runs::local_time(&run.updated_at),
            cost: spend.map_or_else(|| "-".to_string(), super::super::runs::cost),
            spent: spend.map(SpendTotal::line),
        }
    }
}

/// A duration as a person reads it: `2h 5m`, `4m 10s`, `12s`.
fn elapsed(seconds: i64) -> String {
    let (h, m, s) = (seconds / 3600, seconds % 3600 / 60, seconds % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m {s}s"),
        _ => format!("{h}h {m}m"),
    }
}

/// The live feed's starting point for a page: right after what the page shows.
pub(super) async fn feed(c: &Console, run: Option<i64>) -> String {
    let cursor = c.store.change_cursor().await.unwrap_or_default();
    match run {
        Some(id) => format!("{}/events?after={cursor}&run={id}", super::API),
        None => format!("{}/events?after={cursor}", super::API),
    }
}

async fn needs(State(c): State<Console>) -> Response {
    // The feed's cursor is read first, so nothing that happens while the page is read
    // is missed by it.
    let events = feed(&c, None).await;
    let escalations = match c.store.escalations(true).await {
        Ok(found) => found,
        Err(error) => return unavailable(error),
    };
    let mut waiting = Vec::new();
    let mut cut = false;
    let statuses = [QueueStatus::ForReview, QueueStatus::AwaitingGo];
    for status in &statuses {
        match c.store.tasks_newest(Some(status), None, NEEDS_SHOWN).await {
            Ok(tasks) => {
                cut |= tasks.len() >= NEEDS_SHOWN as usize;
                waiting.extend(tasks.iter().map(TaskView::of));
            }
            Err(error) => return unavailable(error),
        }
    }
    // The heading counts every waiting task, not only the newest shown: counted only when
    // the list was cut, so the common page reads no counts.
    let waiting_total = if cut {
        match c.store.summary().await {
            Ok(summary) => summary
                .queue
                .iter()
                .filter(|(status, _)| statuses.contains(status))
                .map(|(_, n)| *n)
                .sum::<i64>(),
            Err(error) => return unavailable(error),
        }
    } else {
        waiting.len() as i64
    };
    let escalations: Vec<EscalationView> = escalations.iter().map(EscalationView::of).collect();
    let now = crate::core::clock::Clock::now(&crate::core::clock::SystemClock);
    let (rows, total) = match day_spend(&c, now).await {
        Ok(read) => read,
        Err(error) => return unavailable(error),
    };
    let mut report = crate::core::spend::SpendReport::of(
        &rows,
        now,
        super::super::spend_day_offset(&c.settings),
    );
    report.total = total;
    // The day's budget spent: the owner sees why nothing new starts.
    let paused = c
        .settings
        .raw
        .budget
        .day_over(&rows, now)
        .map(|o| o.sentence());
    // An agent paused at its usage limit: the owner sees until when.
    let agents_paused: Vec<String> = match super::super::paused_agents(c.store.as_ref(), now).await
    {
        Ok(pauses) => pauses.iter().map(|p| p.sentence()).collect(),
        Err(error) => return unavailable(error),
    };
    let spend = context! { day => &report.day, today => report.today.line(),
    all => (report.total.workers > 0).then(|| report.total.line()), paused, agents_paused };
    page(
        &c,
        "needs.html",
        context! { title => "Needs you", path => "/", csrf => &*c.csrf, events,
        escalations, tasks => waiting, waiting_total, shown_per_status => NEEDS_SHOWN, cut, spend },
    )
}

/// Today's workers' spend (from the budget day's start) and all workers' spend summed:
/// what a page says of spend, without reading every worker.
pub(super) async fn day_spend(
    c: &Console,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(Vec<crate::core::spend::SpendRow>, SpendTotal), crate::store::StoreError> {
    let day_start = c.settings.raw.budget.next_day(now) - chrono::Duration::days(1);
    let rows = c.store.spend_since(day_start).await?;
    let total = c.store.spend_total().await?;
    Ok((rows, total))
}

#[derive(Deserialize)]
struct RunsPageQuery {
    state: Option<String>,
    before: Option<i64>,
}

async fn runs(State(c): State<Console>, Query(q): Query<RunsPageQuery>) -> Response {
    let events = feed(&c, None).await;
    let finished_states: Vec<RunState> = match q.state.as_deref() {
        Some(state) => vec![RunState::from_column(state)],
        None => RunState::ENDED.to_vec(),
    };
    let read = async {
        let live = c.store.runs_page(&RunState::OPEN, None, LIVE_SHOWN).await?;
        let finished = c
            .store
            .runs_page(&finished_states, q.before, FINISHED_SHOWN + 1)
            .await?;
        let counts = c.store.run_counts().await?;
        let ids: Vec<i64> = live.iter().chain(&finished).map(|r| r.id).collect();
        let spent = c.store.spend_of_runs(&ids).await?;
        Ok::<_, crate::store::StoreError>((live, finished, counts, spent))
    };
    let (live, mut finished, counts, spent) = match read.await {
        Ok(read) => read,
        Err(error) => return unavailable(error),
    };
    let spent = crate::core::spend::by(&spent, |r| r.run_id);
    let more = finished.len() > FINISHED_SHOWN as usize;
    finished.truncate(FINISHED_SHOWN as usize);
    let live_count: i64 = counts
        .iter()
        .filter(|(s, _)| RunState::OPEN.contains(&RunState::from_column(s)))
        .map(|(_, n)| n)
        .sum();
    let older = more.then(|| finished.last()).flatten().map(|last| {
        let state = q
            .state
            .as_deref()
            .map(|s| format!("state={}&", super::url_part(s)))
            .unwrap_or_default();
        format!("/runs?{state}before={}", last.id)
    });
    let view = |runs: &[Run]| -> Vec<RunView> {
        runs.iter()
            .map(|r| RunView::of(&c, r, spent.get(&r.id)))
            .collect()
    };
    let counts: Vec<_> = counts
        .iter()
        .map(|(state, n)| context! { state, n })
        .collect();
    page(
        &c,
        "runs.html",
        context! { title => "Runs", path => "/runs", csrf => &*c.csrf, events,
        live => view(&live), live_count, finished => view(&finished), counts, older,
        state => q.state, paged => q.before.is_some() },
    )
}

/// One file of a run as the Run page shows it: its name and its end.
#[derive(Serialize)]
struct FileView {
    name: String,
    text: String,
    cut: bool,
}

fn tail_of(path: &FsPath, name: String) -> Option<FileView> {
    let bytes = std::fs::read(path).ok()?;
    let cut = bytes.len() > TAIL_BYTES;
    let start = bytes.len().saturating_sub(TAIL_BYTES);
    Some(FileView {
        name,
        text: String::from_utf8_lossy(&bytes[start..]).into_owned(),
        cut,
    })
}

/// The run's records (`logs/<gid>/run-<id>/<n>-<phase>/`): each worker's result, stderr and
/// patch, in the order the workers ran.
fn run_records(logs_dir: &FsPath, run: &Run) -> Vec<(String, Vec<FileView>)> {
    let dir = logs_dir.join(&run.task_gid).join(format!("run-{}", run.id));
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut records: Vec<_> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    // `<n>-<phase>`: ordered by n.
    records.sort_by_key(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.split('-').next())
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(u32::MAX)
    });
    records
        .iter()
        .map(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let files = ["result.json", "stderr.txt", "patch.diff"]
                .iter()
                .filter_map(|f| tail_of(&p.join(f), (*f).to_string()))
                .collect();
            (name, files)
        })
        .collect()
}

/// The PR section of the Run page: the runner's last look at the PR and the `pr`
/// machine's memory, as kept in the store.
async fn pr_section(c: &Console, run: &Run) -> Option<super::pr_view::PrView> {
    run.pr_number?;
    let look = match c.store.pr_look(run.id).await {
        Ok(look) => look?,
        Err(error) => {
            tracing::warn!(%error, run = run.id, "cannot read the last look at a run's PR");
            return None;
        }
    };
    let look: crate::core::pr::PrObservation = serde_json::from_str(&look).ok()?;
    let memory = c
        .store
        .pr_memory(run.id)
        .await
        .ok()
        .flatten()
        .and_then(|m| serde_json::from_str::<crate::core::pr::PrMemory>(&m).ok());
    Some(super::pr_view::of(&look, memory.as_ref()))
}

/// The run's diff against the base branch, or why there is none, read off the page's
/// thread and given up after [`DIFF_WAIT`].
async fn diff_section(c: &Console, run: &Run) -> Result<super::diff::DiffView, String> {
    let Some(branch) = run.branch_name.clone() else {
        return Err("the run has no branch of its own (yet)".to_string());
    };
    let repo = c.settings.root.join(&c.settings.raw.runner.repository);
    let base = c.settings.raw.runner.base_branch.clone();
    let read = tokio::task::spawn_blocking(move || super::diff::read(&repo, &base, &branch));
    match tokio::time::timeout(DIFF_WAIT, read).await {
        Ok(Ok(diff)) => diff,
        Ok(Err(error)) => Err(format!("the diff could not be read: {error}")),
        Err(_) => Err(format!(
            "git took more than {} s to give the diff",
            DIFF_WAIT.as_secs()
        )),
    }
}

async fn run(State(c): State<Console>, Path(id): Path<i64>) -> Response {
    let events = feed(&c, Some(id)).await;
    let found = match c.store.run(id).await {
        Ok(Some(run)) => run,
        Ok(None) => return (StatusCode::NOT_FOUND, format!("no run {id}")).into_response(),
        Err(error) => return unavailable(error),
    };
    let (messages, decisions, task, task_runs, refused) = match tokio::try_join!(
        c.store.messages(id, 1000),
        c.store.decisions(&found.task_gid),
        c.store.task(&found.task_gid),
        c.store.runs(Some(&found.task_gid)),
        c.store.net_refusals(&found.task_gid),
    ) {
        Ok(read) => read,
        Err(error) => return unavailable(error),
    };
    let next_start = super::super::runs::find_run(&task_runs, &id.to_string())
        .and_then(|(_, next_start)| next_start);
    let logs_dir = c.settings.root.join(&c.settings.raw.runner.logs_dir);
    let output: Vec<FileView> = super::super::runs::run_logs(&logs_dir, &found, next_start)
        .iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            tail_of(p, name)
        })
        .collect();
    let decisions: Vec<_> = decisions
        .iter()
        .filter(|d| d.run_id == Some(id))
        .map(|d| {
            context! { id => d.id, at => super::super::runs::local_time(&d.at), role => &d.role,
            action => &d.action, decision => &d.decision, rule => &d.rule_id,
            detail => &d.detail, resolution => &d.resolution,
            pending => d.is_pending() }
        })
        .collect();
    let lines: Vec<_> = messages
        .iter()
        .map(|m| context! { id => m.id, line => &m.line, source => &m.source })
        .collect();
    let refused: Vec<_> = refused.into_iter().filter(|r| r.run_id == id).collect();
    let allow_line = crate::core::net_refusals::allow_line(
        &super::super::configured_allow(&c.settings),
        &refused,
    );
    let refused: Vec<_> = refused
        .iter()
        .map(|r| {
            context! { target => r.target().to_string(), kind => r.kind.as_str(), count => r.count,
            first => super::super::runs::local_time(&r.first_at),
            last => super::super::runs::local_time(&r.last_at) }
        })
        .collect();
    let records = run_records(&logs_dir, &found);
    let spent = match c.store.spend_of_runs(&[id]).await {
        Ok(rows) => crate::core::spend::by(&rows, |r| r.run_id).remove(&id),
        Err(error) => return unavailable(error),
    };
    let pr = pr_section(&c, &found).await;
    let (diff, no_diff) = match diff_section(&c, &found).await {
        Ok(diff) => (Some(diff), None),
        Err(why) => (None, Some(why)),
    };
    page(
        &c,
        "run.html",
        context! { title => format!("Run {id}"), path => format!("/runs/{id}"),
        csrf => &*c.csrf, events, run => RunView::of(&c, &found, spent.as_ref()),
        task => task.as_ref().map(TaskView::of), lines, output, decisions, refused, allow_line,
        pr, diff, no_diff,
        records => records.into_iter()
            .map(|(name, files)| context! { name, files }).collect::<Vec<_>>() },
    )
}

#[derive(Deserialize)]
struct QueuePageQuery {
    status: Option<String>,
    before: Option<i64>,
}

async fn queue(State(c): State<Console>, Query(q): Query<QueuePageQuery>) -> Response {
    let events = feed(&c, None).await;
    let one: Option<QueueStatus> = match q.status.as_deref().map(str::parse) {
        None => None,
        Some(Ok(status)) => Some(status),
        Some(Err(_)) => return (StatusCode::BAD_REQUEST, "unknown status").into_response(),
    };
    let counts = match c.store.summary().await {
        Ok(summary) => summary.queue,
        Err(error) => return unavailable(error),
    };
    let (statuses, shown): (Vec<QueueStatus>, u32) = match &one {
        Some(status) => (vec![status.clone()], QUEUE_PAGE),
        None => (QueueStatus::KNOWN.to_vec(), QUEUE_SHOWN),
    };
    let mut groups = Vec::new();
    for status in statuses {
        let count = counts
            .iter()
            .find(|(s, _)| *s == status)
            .map_or(0, |(_, n)| *n);
        let mut tasks = if count == 0 {
            Vec::new()
        } else {
            match c
                .store
                .tasks_newest(Some(&status), q.before, shown + 1)
                .await
            {
                Ok(tasks) => tasks,
                Err(error) => return unavailable(error),
            }
        };
        let more = tasks.len() > shown as usize;
        tasks.truncate(shown as usize);
        let older = more
            .then(|| tasks.last())
            .flatten()
            .map(|last| format!("/queue?status={}&before={}", status.as_str(), last.id));
        let of: Vec<TaskView> = tasks.iter().map(TaskView::of).collect();
        groups.push(context! { status => status.as_str(), count, tasks => of, older });
    }
    page(
        &c,
        "queue.html",
        context! { title => "Queue", path => "/queue", csrf => &*c.csrf, events, groups,
        one => q.status },
    )
}

/// Goals the Goals page lists at most.
const GOALS_SHOWN: u32 = 100;

/// The latest goals the conductor split into subtasks, each linking to its tree.
async fn goals(State(c): State<Console>) -> Response {
    let events = feed(&c, None).await;
    let found = match c.store.goals(GOALS_SHOWN).await {
        Ok(found) => found,
        Err(error) => return unavailable(error),
    };
    let mut goals = Vec::with_capacity(found.len());
    for (gid, children) in found {
        let task = match c.store.task(&gid).await {
            Ok(task) => task,
            Err(error) => return unavailable(error),
        };
        goals.push(context! { gid, children,
        title => task.as_ref().map(|t| t.title()), status => task.as_ref().map(|t| t.status.to_string()) });
    }
    page(
        &c,
        "goals.html",
        context! { title => "Goals", path => "/goals", csrf => &*c.csrf, events, goals },
    )
}

/// A node of a goal's tree as the Goal page shows it.
#[derive(Serialize)]
struct NodeView {
    gid: String,
    title: String,
    status: String,
    run_state: Option<String>,
    run_id: Option<i64>,
    key: Option<String>,
    depends_on: Vec<String>,
    waits_for: Vec<String>,
    children: Vec<NodeView>,
}

impl NodeView {
    fn of(node: super::super::tree::Node) -> Self {
        NodeView {
            gid: node.task_gid,
            title: node.title,
            status: node.status,
            run_state: node.run_state,
            run_id: node.run_id,
            key: node.key,
            depends_on: node.depends_on,
            waits_for: node.waits_for,
            children: node.children.into_iter().map(NodeView::of).collect(),
        }
    }
}

/// The goal a task belongs to, as its tree: every subtask with its status, its latest run
/// and what it waits for.
async fn goal(State(c): State<Console>, Path(gid): Path<String>) -> Response {
    let events = feed(&c, None).await;
    let store = c.store.as_ref();
    let tree = async {
        let top = super::super::tree::goal_of(store, &gid).await?;
        super::super::tree::of(store, &top).await
    };
    let root = match tree.await {
        Ok(root) => NodeView::of(root),
        Err(error) => {
            return match error.downcast_ref::<crate::ops::queue::QueueOpError>() {
                Some(crate::ops::queue::QueueOpError::NotFound(_)) => {
                    (StatusCode::NOT_FOUND, format!("no task {gid}")).into_response()
                }
                _ => unavailable(format!("{error:#}")),
            }
        }
    };
    page(
        &c,
        "goal.html",
        context! { title => format!("Goal {}", root.gid), path => format!("/goals/{gid}"),
        csrf => &*c.csrf, events, root, here => gid },
    )
}

async fn login_page(State(c): State<Console>) -> Response {
    page(&c, "login.html", context! { refused => false })
}

#[derive(Deserialize)]
struct LoginForm {
    #[serde(default)]
    token: String,
}

/// Takes a token and gives the browser the cookie made from it: HttpOnly (no script reads
/// it), SameSite=Strict (no other site's page sends it), Secure behind an HTTPS proxy.
async fn login(
    State(c): State<Console>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let cookie = c
        .access
        .token_grant(form.token.trim())
        .and_then(|grant| c.access.cookie_for(grant));
    let Some(value) = cookie else {
        let mut answer = page(&c, "login.html", context! { refused => true });
        *answer.status_mut() = StatusCode::UNAUTHORIZED;
        return answer;
    };
    let secure = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"));
    let cookie = format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Strict{}",
        super::access::COOKIE,
        if secure { "; Secure" } else { "" }
    );
    (
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, cookie),
            (header::LOCATION, "/".to_string()),
        ],
    )
        .into_response()
}

async fn logout() -> Response {
    let cookie = format!(
        "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        super::access::COOKIE
    );
    (
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, cookie),
            (header::LOCATION, super::LOGIN.to_string()),
        ],
    )
        .into_response()
}

/// Every form's fields; each action reads the ones it takes.
#[derive(Deserialize)]
struct ActionForm {
    #[serde(default)]
    csrf: String,
    answer: Option<String>,
    note: Option<String>,
    reason: Option<String>,
}

/// Whether `given` is this process's token, compared in constant time.
fn token_matches(expected: &str, given: &str) -> bool {
    if expected.is_empty() || expected.len() != given.len() {
        return false;
    }
    expected
        .bytes()
        .zip(given.bytes())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// What a form's post answers: the notice alone for htmx (which puts it at the top of the
/// page), a whole page for a browser without script.
fn answered(c: &Console, headers: &HeaderMap, outcome: Outcome) -> Response {
    let (status, ok, text) = match &outcome {
        Ok(done) => (StatusCode::OK, true, done.sentence()),
        Err(refused) => (
            refused.status(),
            false,
            format!("Changed nothing: {}", refused.message()),
        ),
    };
    let notice = context! { ok, text };
    let htmx = headers.contains_key("hx-request");
    let name = if htmx { "notice.html" } else { "base.html" };
    let ctx = if htmx {
        notice
    } else {
        context! { title => "Done", path => "/", csrf => &*c.csrf, notice }
    };
    match c.pages.render(name, ctx) {
        Ok(html) => (
            status,
            // Every open part of the page reads the store again.
            [("hx-trigger", "executor:changed")],
            Html(html),
        )
            .into_response(),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{error:#}")).into_response(),
    }
}

fn forged(c: &Console, headers: &HeaderMap) -> Response {
    let refused = actions::Refused::Forbidden(
        "the form's CSRF token is missing or not this console's: reload the page".to_string(),
    );
    answered(c, headers, Err(refused))
}

async fn decide(
    State(c): State<Console>,
    Path(id): Path<i64>,
    headers: HeaderMap,
    Form(form): Form<ActionForm>,
) -> Response {
    if !token_matches(&c.csrf, &form.csrf) {
        return forged(&c, &headers);
    }
    let answer = form.answer.as_deref().unwrap_or_default();
    let outcome = actions::decide(
        c.store.as_ref(),
        id,
        answer,
        form.note.as_deref(),
        actions::Via::Console,
    )
    .await;
    answered(&c, &headers, outcome)
}

async fn task_action(
    State(c): State<Console>,
    Path((gid, verb)): Path<(String, String)>,
    headers: HeaderMap,
    Form(form): Form<ActionForm>,
) -> Response {
    if !token_matches(&c.csrf, &form.csrf) {
        return forged(&c, &headers);
    }
    let store = c.store.as_ref();
    let outcome = match verb.as_str() {
        "go" => actions::go(store, &gid, actions::Via::Console).await,
        "skip" => actions::skip(store, &gid, actions::Via::Console).await,
        "retry" => actions::retry(store, &gid).await,
        "cancel" => {
            actions::cancel(store, &gid, form.reason.as_deref(), actions::Via::Console).await
        }
        _ => Err(actions::Refused::NotFound(format!("no action {verb}"))),
    };
    answered(&c, &headers, outcome)
}

async fn cancel(
    State(c): State<Console>,
    Path(target): Path<String>,
    headers: HeaderMap,
    Form(form): Form<ActionForm>,
) -> Response {
    if !token_matches(&c.csrf, &form.csrf) {
        return forged(&c, &headers);
    }
    let outcome = actions::cancel(
        c.store.as_ref(),
        &target,
        form.reason.as_deref(),
        actions::Via::Console,
    )
    .await;
    answered(&c, &headers, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_parses_and_escapes_what_it_shows() {
        let templates = Templates::load();
        for (name, _) in TEMPLATES {
            assert!(templates.env.get_template(name).is_ok(), "{name}");
        }
        let html = templates
            .render(
                "notice.html",
                context! { ok => false, text => "<script>alert(1)</script>" },
            )
            .unwrap();
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
    }

    #[test]
    fn only_this_processs_token_opens_a_form() {
        let token = new_csrf_token();
        assert_eq!(token.len(), 48);
        assert_ne!(token, new_csrf_token());
        assert!(token_matches(&token, &token.clone()));
        assert!(!token_matches(&token, ""));
        assert!(!token_matches(&token, &token[1..]));
        assert!(!token_matches("", ""));
        let mut other = token.clone().into_bytes();
        other[0] = if other[0] == b'a' { b'b' } else { b'a' };
        assert!(!token_matches(&token, &String::from_utf8(other).unwrap()));
    }
}

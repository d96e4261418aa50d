//! What each tool of `executor mcp` does ([`super::tools`] lists them): reads as the CLI's
//! `--json` documents, writes through the console's actions as `mcp`, and the run
//! resources (a run's diff and its work logs) read as the console's Run page reads them.
//!
//! What it must never do: print to standard output, or give a write a path past the
//! actions (every move of a task and every answer goes through them once).

use std::sync::Arc;

use serde_json::{json, Value};

use super::super::console::actions::{self, Via};
use crate::config::Settings;
use crate::core::clock::SystemClock;
use crate::core::queue::QueueStatus;
use crate::store::Store;

/// The most of a run's work logs a resource or a log tail gives, from the end.
pub const MAX_LOG_BYTES: usize = 256 * 1024;

/// What a tool call needs.
pub struct Ctx<'a> {
    pub settings: &'a Settings,
    pub store: Arc<dyn Store>,
}

/// A tool that ran and said no (a bad argument, nothing found, a conflict): the client's
/// model reads why. A failure of the store is one too: the call may be tried again.
#[derive(Debug)]
pub struct Refusal(pub String);

impl From<anyhow::Error> for Refusal {
    fn from(error: anyhow::Error) -> Self {
        Refusal(format!("{error:#}"))
    }
}

impl From<crate::store::StoreError> for Refusal {
    fn from(error: crate::store::StoreError) -> Self {
        Refusal(error.to_string())
    }
}

fn text<'v>(args: &'v Value, name: &str) -> Result<&'v str, Refusal> {
    args.get(name)
        .and_then(Value::as_str)
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| Refusal(format!("`{name}` is required, as a string")))
}

fn optional_text<'v>(args: &'v Value, name: &str) -> Result<Option<&'v str>, Refusal> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(t)) => Ok(Some(t)),
        Some(_) => Err(Refusal(format!("`{name}` is a string"))),
    }
}

/// The count argument `name` (`default` when absent, at most `max`).
fn count(args: &Value, name: &str, default: u32, max: u32) -> Result<u32, Refusal> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .filter(|n| *n >= 1)
            .map(|n| n.min(u64::from(max)) as u32)
            .ok_or_else(|| Refusal(format!("`{name}` is a whole number of at least 1"))),
    }
}

fn done(outcome: actions::Outcome) -> Result<Value, Refusal> {
    outcome
        .map(|d| d.to_json())
        .map_err(|r| Refusal(r.message().to_string()))
}

/// Runs tool `name` with `args`.
pub async fn call(ctx: &Ctx<'_>, name: &str, args: &Value) -> Result<Value, Refusal> {
    let store = ctx.store.as_ref();
    match name {
        "status" => {
            let report = super::super::status_report(ctx.settings, store).await?;
            Ok(serde_json::to_value(report).map_err(anyhow::Error::from)?)
        }
        "list_tasks" => {
            let status = match optional_text(args, "status")? {
                None => None,
                Some(s) => Some(
                    s.parse::<QueueStatus>()
                        .map_err(|_| Refusal(format!("no status `{s}`")))?,
                ),
            };
            let tasks = store
                .tasks_page(status.as_ref(), i64::MIN, count(args, "limit", 200, 1000)?)
                .await?;
            Ok(json!({ "tasks": tasks }))
        }
        "show_task" => {
            let shown = super::super::shown_task(store, text(args, "gid")?).await?;
            Ok(serde_json::to_value(shown).map_err(anyhow::Error::from)?)
        }
        "list_runs" => {
            let states: Vec<crate::core::run::RunState> = optional_text(args, "state")?
                .map(crate::core::run::RunState::from_column)
                .into_iter()
                .collect();
            let runs = store
                .runs_page(&states, None, count(args, "limit", 50, 1000)?)
                .await?;
            let ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
            let spent = store.spend_of_runs(&ids).await?;
            let documents = super::super::runs::documents(&runs, &spent);
            Ok(json!({ "runs": documents }))
        }
        "run_log" => {
            let (run, log) = run_log(ctx, text(args, "run")?).await?;
            let lines = count(args, "lines", 100, 2000)? as usize;
            let all: Vec<&str> = log.lines().collect();
            let tail = all[all.len().saturating_sub(lines)..].join("\n");
            Ok(json!({ "run_id": run.id, "task_gid": run.task_gid, "log": tail }))
        }
        "list_escalations" => {
            let all = args.get("all").and_then(Value::as_bool).unwrap_or(false);
            Ok(json!({ "escalations": store.escalations(!all).await? }))
        }
        "add_task" => add_task(ctx, args).await,
        "go" => done(actions::go(store, text(args, "gid")?, Via::Mcp).await),
        "skip" => done(actions::skip(store, text(args, "gid")?, Via::Mcp).await),
        "retry" => done(actions::retry(store, text(args, "gid")?).await),
        "cancel" => done(
            actions::cancel(
                store,
                text(args, "target")?,
                optional_text(args, "reason")?,
                Via::Mcp,
            )
            .await,
        ),
        "answer_escalation" => {
            let id = args
                .get("id")
                .and_then(Value::as_i64)
                .ok_or_else(|| Refusal("`id` is required, as a whole number".into()))?;
            let answer = text(args, "answer")?;
            let note = optional_text(args, "note")?;
            done(actions::decide(store, id, answer, note, Via::Mcp).await)
        }
        other => Err(Refusal(format!("no tool `{other}`"))),
    }
}

async fn add_task(ctx: &Ctx<'_>, args: &Value) -> Result<Value, Refusal> {
    let priority = match args.get("priority") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_i64()
                .ok_or_else(|| Refusal("`priority` is a whole number".into()))?,
        ),
    };
    let add = super::super::AddArgs {
        title: text(args, "title")?.to_string(),
        description: optional_text(args, "description")?.map(str::to_string),
        gid: optional_text(args, "gid")?.map(str::to_string),
        source: "mcp".to_string(),
        priority,
        goal: args.get("goal").and_then(Value::as_bool).unwrap_or(false),
    };
    let goal_label = ctx.settings.raw.conductor.goal_labels.first().cloned();
    let (task, outcome) =
        super::super::add_task(ctx.store.as_ref(), &SystemClock, add, goal_label, "mcp").await?;
    crate::store::wake::notify(ctx.store.as_ref(), crate::store::wake::Wake::Queue).await;
    Ok(json!({
        "task_gid": task.task_gid,
        "status": task.status,
        "outcome": format!("{outcome:?}").to_lowercase(),
    }))
}

/// The run `target` names (a run id, or a task gid for its latest run) and its work logs,
/// the last [`MAX_LOG_BYTES`] of them.
async fn run_log(
    ctx: &Ctx<'_>,
    target: &str,
) -> Result<(crate::core::record::Run, String), Refusal> {
    let runs = ctx.store.runs(None).await?;
    let Some((run, next_start)) = super::super::runs::find_run(&runs, target) else {
        return Err(Refusal(format!(
            "no run {target}, and no task {target} with a run"
        )));
    };
    let logs_dir = ctx.settings.root.join(&ctx.settings.raw.runner.logs_dir);
    let mut log = String::new();
    for path in super::super::runs::run_logs(&logs_dir, &run, next_start) {
        if let Ok(text) = std::fs::read_to_string(&path) {
            log.push_str(&format!("==> {} <==\n", path.display()));
            log.push_str(&text);
            if !log.ends_with('\n') {
                log.push('\n');
            }
        }
    }
    if log.len() > MAX_LOG_BYTES {
        let mut from = log.len() - MAX_LOG_BYTES;
        while !log.is_char_boundary(from) {
            from += 1;
        }
        log = log.split_off(from);
    }
    Ok((run, log))
}

/// The run resources: `executor://runs/{id}/diff` and `executor://runs/{id}/log`.
pub const DIFF_TEMPLATE: &str = "executor://runs/{id}/diff";
pub const LOG_TEMPLATE: &str = "executor://runs/{id}/log";

/// `resources/list`: the diff and the log of the newest runs.
pub async fn resources(ctx: &Ctx<'_>) -> Result<Value, Refusal> {
    let runs = ctx.store.runs_page(&[], None, 20).await?;
    let mut listed = Vec::new();
    for run in &runs {
        listed.push(json!({
            "uri": format!("executor://runs/{}/diff", run.id),
            "name": format!("run-{}-diff", run.id),
            "title": format!("Run {} of {}: its diff", run.id, run.task_gid),
            "mimeType": "text/x-diff",
        }));
        listed.push(json!({
            "uri": format!("executor://runs/{}/log", run.id),
            "name": format!("run-{}-log", run.id),
            "title": format!("Run {} of {}: its work logs", run.id, run.task_gid),
            "mimeType": "text/markdown",
        }));
    }
    Ok(json!({ "resources": listed }))
}

/// `resources/templates/list`.
pub fn templates() -> Value {
    json!({ "resourceTemplates": [
        { "uriTemplate": DIFF_TEMPLATE, "name": "run-diff", "title": "A run's diff against the base branch", "mimeType": "text/x-diff" },
        { "uriTemplate": LOG_TEMPLATE, "name": "run-log", "title": "A run's work logs (the agent's turns)", "mimeType": "text/markdown" },
    ]})
}

/// `resources/read` of `uri`.
pub async fn read(ctx: &Ctx<'_>, uri: &str) -> Result<Value, Refusal> {
    let unknown = || Refusal(format!("no resource {uri}"));
    let rest = uri.strip_prefix("executor://runs/").ok_or_else(unknown)?;
    let (id, kind) = rest.split_once('/').ok_or_else(unknown)?;
    let id: i64 = id.parse().map_err(|_| unknown())?;
    let (mime, text) = match kind {
        "log" => ("text/markdown", run_log(ctx, &id.to_string()).await?.1),
        "diff" => ("text/x-diff", diff(ctx, id).await?),
        _ => return Err(unknown()),
    };
    Ok(json!({ "contents": [{ "uri": uri, "mimeType": mime, "text": text }] }))
}

/// Run `id`'s diff against the base branch, as its Run page reads it.
async fn diff(ctx: &Ctx<'_>, id: i64) -> Result<String, Refusal> {
    let run = ctx
        .store
        .run(id)
        .await?
        .ok_or_else(|| Refusal(format!("no run {id}")))?;
    let Some(branch) = run.branch_name else {
        return Err(Refusal(format!("run {id} has no branch of its own (yet)")));
    };
    let repo = ctx.settings.root.join(&ctx.settings.raw.runner.repository);
    let base = ctx.settings.raw.runner.base_branch.clone();
    let view = tokio::task::spawn_blocking(move || {
        super::super::console::diff::read(&repo, &base, &branch)
    })
    .await
    .map_err(|e| Refusal(format!("the diff could not be read: {e}")))?
    .map_err(Refusal)?;
    let mut text = String::new();
    for file in &view.files {
        for line in &file.lines {
            text.push_str(&line.text);
            text.push('\n');
        }
    }
    if view.cut {
        text.push_str("… (cut: the diff is longer than a resource gives)\n");
    }
    Ok(text)
}

//! What the CLI prints: JSON documents whose field names are the column names, and plain
//! text for people. Output goes through a buffered writer; a closed pipe
//! (`executor queue | head`) ends the output quietly instead of panicking.

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::Settings;
use crate::core::queue::QueueStatus;
use crate::core::record::{Decision, Heartbeat, IntakeError, Run, StoreSummary, TaskEvent};
use crate::core::task::Task;
use crate::ops::intake::IngestReport;
use crate::store::{Store, TASK_PAGE};

/// A heartbeat older than this means the component is gone (it beats every 5 s).
const STALE_AFTER_SECS: i64 = 20;

/// `executor show`: the task and everything recorded about it.
#[derive(Debug, Serialize)]
pub struct ShownTask {
    pub task: Task,
    /// What its source knows of it beyond its text (assignee, closed upstream, labels, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub facts: Option<crate::core::facts::TaskFacts>,
    pub runs: Vec<Run>,
    pub events: Vec<TaskEvent>,
    pub decisions: Vec<Decision>,
    /// What the wall's proxy refused the workers of its runs: one row per run, host and
    /// port, with how many times and when first and last.
    pub net_refusals: Vec<crate::core::net_refusals::NetRefusal>,
    /// The latest run's recent messages, oldest first.
    pub messages: Vec<crate::core::record::StoredMessage>,
    /// The text the latest run was given; absent before it has a run, or for a run from
    /// before executor kept it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worked_on: Option<WorkedOn>,
    /// What its workers spent, in all and by run.
    pub spend: crate::core::spend::TaskSpend,
}

/// The task text a run was given, and whether the task's text changed since.
#[derive(Debug, Serialize)]
pub struct WorkedOn {
    pub run_id: i64,
    pub task_text: String,
    pub changed_since: bool,
}

/// `executor status`.
#[derive(Debug, Serialize)]
pub struct StatusReport {
    pub config: String,
    pub storage: String,
    pub components: Vec<ComponentState>,
    pub queue: serde_json::Map<String, serde_json::Value>,
    pub live_workers: i64,
    pub pending_escalations: i64,
    pub intake_errors: Vec<IntakeError>,
    /// Done tasks whose text changed since the run that did them.
    pub changed_since_run: Vec<crate::core::record::ChangedTask>,
    /// Chat messages not delivered yet, per notifier.
    pub outbox: Vec<crate::core::outbox::OutboxBacklog>,
    /// Whether workers run inside the wall, and why not.
    pub confinement: Confinement,
    /// What the workers spent: today, by day, by agent.
    pub spend: crate::core::spend::SpendReport,
    /// Why no new task is taken today (`[budget] per_day_usd`), and when that ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch_paused: Option<crate::core::budget::Over>,
    /// Agents whose workers wait for their usage limit to reset, and until when.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub agents_paused: Vec<crate::core::usage_limit::AgentPause>,
    /// The runner's writes waiting for the store (its own account: a store refusing writes
    /// may still answer this command's reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_outage: Option<crate::runner::store_health::OutageAccount>,
}

/// `executor status` when the store cannot answer it: what the runner's account says.
#[derive(Debug, Serialize)]
pub struct UnreachableStatus {
    pub config: String,
    pub storage: String,
    /// Always false: the store did not answer.
    pub store_reachable: bool,
    pub error: String,
    pub store_outage: Option<crate::runner::store_health::OutageAccount>,
}

/// The wall as this workspace's config gets it on this machine (probed now).
#[derive(Debug, Serialize)]
pub struct Confinement {
    pub confined: bool,
    /// `[sandbox] mode` (or `EXECUTOR_SANDBOX_MODE`).
    pub mode: &'static str,
    pub network: &'static str,
    /// One line: the wall, or why there is none.
    pub detail: String,
    /// The layers each worker is held by, outermost first (`bubblewrap`, `landlock ABI 7`,
    /// `seccomp`, `keeper`); empty where the runner will not start.
    pub layers: Vec<String>,
    /// Whether confined workers' memory is limited (`[sandbox] max_memory`), or why not.
    pub memory: MemoryLimit,
    /// What holds each worker to `[sandbox] max_processes`, or why nothing does.
    pub processes: ProcessLimit,
}

#[derive(Debug, Serialize)]
pub struct ProcessLimit {
    pub capped: bool,
    /// `cgroup pids`, `rlimit` or `none`.
    pub mechanism: &'static str,
    pub max: Option<u64>,
    pub detail: String,
}

#[derive(Debug, Serialize)]
pub struct MemoryLimit {
    pub limited: bool,
    pub max_bytes: Option<u64>,
    pub detail: String,
}

#[derive(Debug, Serialize)]
pub struct ComponentState {
    #[serde(flatten)]
    pub heartbeat: Heartbeat,
    /// `running`, `stopped` or `not_responding`.
    pub state: &'static str,
    /// The last error it met since it started (`null`: none).
    pub last_error: Option<crate::core::record::ComponentError>,
}

impl StatusReport {
    pub fn new(
        settings: &Settings,
        summary: StoreSummary,
        outbox: Vec<crate::core::outbox::OutboxBacklog>,
        confinement: Confinement,
        now: DateTime<Utc>,
    ) -> Self {
        let errors = summary.component_errors;
        let components = summary
            .heartbeats
            .into_iter()
            .map(|heartbeat| {
                let state = if heartbeat.stopped_at.is_some() {
                    "stopped"
                } else if (now - heartbeat.beat_at).num_seconds() > STALE_AFTER_SECS {
                    "not_responding"
                } else {
                    "running"
                };
                let last_error = errors
                    .iter()
                    .find(|e| e.component == heartbeat.component && e.host == heartbeat.host)
                    .cloned();
                ComponentState {
                    heartbeat,
                    state,
                    last_error,
                }
            })
            .collect();
        let queue = summary
            .queue
            .into_iter()
            .map(|(status, n)| (status.to_string(), serde_json::Value::from(n)))
            .collect();
        Self {
            config: settings.path.display().to_string(),
            storage: settings.storage.display(),
            components,
            queue,
            live_workers: summary.live_workers,
            pending_escalations: summary.pending_escalations,
            intake_errors: summary.intake_errors,
            changed_since_run: Vec::new(),
            outbox,
            confinement,
            spend: crate::core::spend::SpendReport::default(),
            dispatch_paused: None,
            agents_paused: Vec::new(),
            store_outage: None,
        }
    }
}

fn finish(result: io::Result<()>) -> Result<()> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// `bytes` on stdout as they are; a reader that stops early (`| head`) is no error.
pub fn print_bytes(bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut out = io::stdout().lock();
    finish(out.write_all(bytes).and_then(|()| out.flush()))
}

pub fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let written = serde_json::to_writer(&mut out, value)
        .map_err(io::Error::from)
        .and_then(|()| writeln!(out))
        .and_then(|()| out.flush());
    finish(written)
}

/// Prints the tasks as one JSON array, a page at a time: while one page is written, the
/// next one loads on the store's thread, and memory stays flat however long the queue.
pub async fn print_queue_json(store: Arc<dyn Store>, status: Option<QueueStatus>) -> Result<()> {
    let fetch = |after_id: i64| {
        let store = Arc::clone(&store);
        let status = status.clone();
        tokio::spawn(async move { store.tasks_page(status.as_ref(), after_id, TASK_PAGE).await })
    };
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut next = Some(fetch(i64::MIN));
    let mut written: io::Result<()> = Ok(());
    let mut first = true;
    while let Some(loading) = next.take() {
        let page = match loading
            .await
            .map_err(anyhow::Error::from)
            .and_then(|page| Ok(page?))
        {
            Ok(page) => page,
            Err(error) => {
                // Whatever is still buffered is dropped unwritten: a failed listing prints
                // as little as possible of a document it cannot finish.
                let _ = out.into_parts();
                return Err(error);
            }
        };
        if let (true, Some(last)) = (page.len() == TASK_PAGE as usize, page.last()) {
            next = Some(fetch(last.id));
            // Let the fetch start before this page is written.
            tokio::task::yield_now().await;
        }
        for task in &page {
            let separator: &[u8] = if first { b"[" } else { b"," };
            first = false;
            written = written
                .and_then(|()| out.write_all(separator))
                .and_then(|()| serde_json::to_writer(&mut out, task).map_err(io::Error::from));
            if written.is_err() {
                // A closed pipe: nothing more will be read.
                next = None;
                break;
            }
        }
    }
    let closing: &[u8] = if first { b"[]\n" } else { b"]\n" };
    finish(
        written
            .and_then(|()| out.write_all(closing))
            .and_then(|()| out.flush()),
    )
}

/// The terminal's width as `COLUMNS` says, for tables that cut their last column to fit;
/// `None` (no cut) when it is unset or not a number.
pub fn columns() -> Option<usize> {
    std::env::var("COLUMNS")
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|n| *n > 0)
}

/// `text` cut to `width` characters, the cut marked with `…`.
pub fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    format!("{kept}…")
}

/// `executor queue`: one line per task. `waiting` maps a task gid to the escalation its
/// run waits on, shown instead of `in_progress`; titles are cut to `columns`.
pub fn print_queue(
    tasks: &[Task],
    waiting: &std::collections::HashMap<String, i64>,
    columns: Option<usize>,
) -> Result<()> {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    finish((|| {
        if tasks.is_empty() {
            writeln!(
                out,
                "the queue is empty (add work with `executor add --title ...`)"
            )?;
            return out.flush();
        }
        let gid_width = tasks
            .iter()
            .map(|t| t.task_gid.len())
            .max()
            .unwrap_or(3)
            .max(3);
        let source_width = tasks
            .iter()
            .map(|t| t.source.as_deref().unwrap_or("-").len())
            .max()
            .unwrap_or(6)
            .max(6);
        let status_of = |task: &Task| match waiting.get(&task.task_gid) {
            Some(escalation) => format!("waiting: escalation {escalation}"),
            None => task.status.as_str().to_string(),
        };
        let status_width = tasks
            .iter()
            .map(|t| status_of(t).len())
            .max()
            .unwrap_or(11)
            .max(11);
        writeln!(
            out,
            "{:gid_width$}  {:status_width$}  {:>4}  {:source_width$}  TITLE",
            "GID", "STATUS", "PRI", "SOURCE"
        )?;
        let title_width = columns.map(|c| {
            c.saturating_sub(gid_width + status_width + 4 + source_width + 8)
                .max(8)
        });
        for task in tasks {
            let priority = task.priority.map(|p| p.to_string()).unwrap_or_default();
            let title = task.title();
            writeln!(
                out,
                "{:gid_width$}  {:status_width$}  {:>4}  {:source_width$}  {}",
                task.task_gid,
                status_of(task),
                priority,
                task.source.as_deref().unwrap_or("-"),
                title_width.map_or_else(|| printable(&title), |w| fit(&printable(&title), w))
            )?;
        }
        out.flush()
    })())
}

/// `text` as a terminal shows it faithfully: control characters, bidi overrides and
/// zero-width characters are written as `\u{…}` escapes. A title comes from outside; left
/// raw, such characters could move the cursor, reorder the line or hide text in a table.
pub fn printable(text: &str) -> String {
    escaped(text, false)
}

/// Like [`printable`] for text of many lines (a description, notes): its line breaks and
/// tabs stay as they are.
pub fn printable_text(text: &str) -> String {
    escaped(text, true)
}

fn escaped(text: &str, keep_lines: bool) -> String {
    let hidden = |c: char| {
        (c.is_control() && !(keep_lines && matches!(c, '\n' | '\t')))
            || matches!(
                c,
                '\u{200B}'..='\u{200F}'
                    | '\u{202A}'..='\u{202E}'
                    | '\u{2060}'..='\u{2069}'
                    | '\u{061C}'
                    | '\u{180E}'
                    | '\u{FEFF}'
            )
    };
    if !text.chars().any(hidden) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if hidden(c) {
                format!("\\u{{{:04x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// What follows a decision's role in `show`: the worker's posture when it ran outside the
/// wall. A confined worker is the normal case, and a decision from before executor kept the
/// posture (or one made for no worker) has none to show.
fn unconfined_mark(confined: Option<bool>) -> &'static str {
    match confined {
        Some(false) => " (unconfined)",
        Some(true) | None => "",
    }
}

/// Tables show times in the owner's own time zone, to the second (`--json` keeps UTC).
fn when(at: &DateTime<Utc>) -> String {
    super::shown::local_time(at)
}

/// The `network refused` lines of `show`: each run's refusals, and the allow line that
/// would permit them (`configured`: the owner's allow entries, kept in it).
fn write_net_refusals(
    out: &mut impl Write,
    refused: &[crate::core::net_refusals::NetRefusal],
    configured: &[String],
) -> io::Result<()> {
    if refused.is_empty() {
        return Ok(());
    }
    writeln!(out, "network refused (the wall's proxy):")?;
    for row in refused {
        writeln!(
            out,
            "  run #{}  {}  first {}  last {}",
            row.run_id,
            printable(&row.line()),
            when(&row.first_at),
            when(&row.last_at)
        )?;
    }
    if let Some(line) = crate::core::net_refusals::allow_line(configured, refused) {
        writeln!(out, "  to allow it, set in [sandbox]: {}", printable(&line))?;
    }
    Ok(())
}

pub fn print_task(shown: &ShownTask, configured_allow: &[String]) -> Result<()> {
    let task = &shown.task;
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    finish((|| {
        writeln!(out, "{}  {}", task.task_gid, printable(&task.title()))?;
        writeln!(
            out,
            "status: {}   priority: {}   source: {}",
            task.status,
            task.priority
                .map(|p| p.to_string())
                .unwrap_or_else(|| "-".into()),
            task.source.as_deref().unwrap_or("-")
        )?;
        writeln!(
            out,
            "added {}   updated {}",
            when(&task.added_at),
            when(&task.updated_at)
        )?;
        if let Some(facts) = &shown.facts {
            let mut known: Vec<String> = Vec::new();
            if let Some(assignee) = facts.assignee.as_ref().or(facts.assignee_id.as_ref()) {
                known.push(format!("assignee {assignee}"));
            }
            if facts.closed {
                known.push("closed upstream".into());
            }
            if !facts.labels.is_empty() {
                known.push(format!("labels {}", facts.labels.join(", ")));
            }
            if let Some(url) = &facts.url {
                known.push(url.clone());
            }
            if !known.is_empty() {
                writeln!(out, "upstream: {}", known.join("   "))?;
            }
        }
        for (label, value) in [
            ("complexity", &task.complexity),
            ("feasibility", &task.feasibility),
            ("analysis", &task.analysis_summary),
        ] {
            if let Some(value) = value {
                writeln!(out, "{label}: {value}")?;
            }
        }
        if let Some(description) = &task.description {
            writeln!(out, "\n{}", printable_text(description))?;
        }
        if let Some(notes) = &task.notes {
            writeln!(out, "\nnotes:\n{}", printable_text(notes))?;
        }
        writeln!(out)?;
        if shown.runs.is_empty() {
            writeln!(out, "runs: none")?;
        } else {
            writeln!(out, "runs:")?;
            for run in &shown.runs {
                writeln!(
                    out,
                    "  #{}  {} ({})  branch {}  PR {}  updated {}",
                    run.id,
                    run.state,
                    super::shown::stage(run),
                    run.branch_name.as_deref().unwrap_or("-"),
                    run.pr_url.as_deref().unwrap_or("-"),
                    when(&run.updated_at)
                )?;
                if let Some(spent) = shown.spend.by_run.get(&run.id) {
                    writeln!(out, "        spent {}", spent.line())?;
                }
            }
        }
        if shown.spend.total.workers > 0 {
            writeln!(out, "spend: {}", shown.spend.total.line())?;
        }
        write_net_refusals(&mut out, &shown.net_refusals, configured_allow)?;
        if let Some(worked_on) = &shown.worked_on {
            if worked_on.changed_since {
                writeln!(
                    out,
                    "run #{} worked on an earlier text (changed since; `executor retry {}` runs it again):\n{}",
                    worked_on.run_id,
                    task.task_gid,
                    printable_text(&worked_on.task_text)
                )?;
            } else {
                writeln!(out, "run #{} worked on the text above", worked_on.run_id)?;
            }
        }
        writeln!(out, "history:")?;
        for event in &shown.events {
            let moved = match (&event.from_status, &event.to_status) {
                (Some(from), Some(to)) => format!("{from} -> {to}"),
                (None, Some(to)) => format!("-> {to}"),
                _ => String::new(),
            };
            writeln!(
                out,
                "  {}  {:14} {:26} by {}{}",
                when(&event.at),
                event.kind,
                moved,
                event.actor,
                event
                    .detail
                    .as_deref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            )?;
        }
        if !shown.messages.is_empty() {
            writeln!(out, "recent messages (latest run):")?;
            for message in &shown.messages {
                writeln!(
                    out,
                    "  {}  {}: {}",
                    when(&message.at),
                    message.source,
                    message.line
                )?;
            }
        }
        if shown.decisions.is_empty() {
            writeln!(out, "decisions: none")?;
        } else {
            writeln!(out, "decisions:")?;
            for d in &shown.decisions {
                writeln!(
                    out,
                    "  {}  {}{} {} -> {} (rule {}){}",
                    when(&d.at),
                    d.role,
                    unconfined_mark(d.confined),
                    d.action,
                    d.decision,
                    d.rule_id.as_deref().unwrap_or("default"),
                    d.resolution
                        .as_deref()
                        .map(|r| format!(", owner: {r}"))
                        .unwrap_or_default()
                )?;
            }
        }
        out.flush()
    })())
}

/// The store's outage as the runner tells it, in one line.
fn outage_line(account: &crate::runner::store_health::OutageAccount) -> String {
    format!(
        "out of reach for the runner (pid {}) since {}: {} {} of {} {} waiting for it",
        account.pid,
        when(&account.since),
        account.waiting_writes,
        if account.waiting_writes == 1 {
            "write"
        } else {
            "writes"
        },
        account.waiting_runs,
        if account.waiting_runs == 1 {
            "run"
        } else {
            "runs"
        },
    )
}

pub fn print_unreachable(status: &UnreachableStatus) -> Result<()> {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    finish((|| {
        writeln!(out, "config:  {}", status.config)?;
        writeln!(out, "storage: {}", status.storage)?;
        writeln!(out, "store:   does not answer: {}", status.error)?;
        match &status.store_outage {
            Some(account) => writeln!(out, "runner:  {}", outage_line(account))?,
            None => writeln!(out, "runner:  no runner here is waiting for the store")?,
        }
        out.flush()
    })())
}

pub fn print_status(report: &StatusReport) -> Result<()> {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    finish((|| {
        writeln!(out, "config:  {}", report.config)?;
        writeln!(out, "storage: {}", report.storage)?;
        if let Some(account) = &report.store_outage {
            writeln!(out, "store:   {}", outage_line(account))?;
        }
        if report.components.is_empty() {
            writeln!(out, "daemon:  never started")?;
        }
        for c in &report.components {
            let hb = &c.heartbeat;
            let detail = match c.state {
                "running" => format!(
                    "running on {} (pid {}) since {}",
                    hb.host,
                    hb.pid,
                    when(&hb.started_at)
                ),
                "stopped" => format!(
                    "stopped on {} at {}",
                    hb.host,
                    hb.stopped_at.as_ref().map(when).unwrap_or_default()
                ),
                _ => format!(
                    "not responding on {} (pid {}): last heartbeat {}",
                    hb.host,
                    hb.pid,
                    when(&hb.beat_at)
                ),
            };
            writeln!(out, "{}:  {detail}", hb.component)?;
            if let Some(error) = &c.last_error {
                writeln!(
                    out,
                    "  last error {} ({} since it started): {}",
                    when(&error.at),
                    match error.count {
                        1 => "once".to_string(),
                        n => format!("{n} times"),
                    },
                    error.message
                )?;
            }
        }
        let queue = report
            .queue
            .iter()
            .map(|(status, n)| format!("{status} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        writeln!(out, "queue:   {queue}")?;
        writeln!(out, "live workers: {}", report.live_workers)?;
        if report.confinement.confined {
            writeln!(out, "workers: {}", report.confinement.detail)?;
            let processes = &report.confinement.processes;
            writeln!(out, "processes: {}", processes.detail)?;
            let memory = &report.confinement.memory;
            if memory.limited {
                writeln!(out, "memory:  {}", memory.detail)?;
            } else {
                writeln!(out, "memory:  not limited ({})", memory.detail)?;
            }
        } else {
            writeln!(out, "workers: UNCONFINED ({})", report.confinement.detail)?;
        }
        let spend = &report.spend;
        writeln!(out, "spend today ({}): {}", spend.day, spend.today.line())?;
        if spend.total.workers > 0 {
            writeln!(out, "spend in all: {}", spend.total.line())?;
            for (agent, total) in &spend.by_agent {
                writeln!(out, "  {agent}: {}", total.line())?;
            }
        }
        if let Some(over) = &report.dispatch_paused {
            writeln!(out, "dispatch PAUSED: {}", over.sentence())?;
        }
        for pause in &report.agents_paused {
            writeln!(
                out,
                "dispatch PAUSED for {}: {}",
                pause.agent,
                pause.sentence()
            )?;
        }
        writeln!(out, "pending escalations: {}", report.pending_escalations)?;
        if report.intake_errors.is_empty() {
            writeln!(out, "intake errors: none")?;
        } else {
            writeln!(out, "intake errors ({}):", report.intake_errors.len())?;
            for e in &report.intake_errors {
                writeln!(
                    out,
                    "  {}: {} (since {})",
                    e.path,
                    e.reason,
                    when(&e.first_seen)
                )?;
            }
        }
        if !report.changed_since_run.is_empty() {
            writeln!(
                out,
                "done, but changed since ({}):",
                report.changed_since_run.len()
            )?;
            for c in &report.changed_since_run {
                writeln!(
                    out,
                    "  {}: its text changed after run {}; `executor retry {}` runs it again",
                    c.task_gid, c.run_id, c.task_gid
                )?;
            }
        }
        if report.outbox.is_empty() {
            writeln!(out, "chat outbox: nothing waiting")?;
        } else {
            for b in &report.outbox {
                writeln!(
                    out,
                    "chat outbox: {} message(s) waiting for {} since {}{}",
                    b.undelivered,
                    b.notifier,
                    b.oldest.as_ref().map(when).unwrap_or_default(),
                    b.last_error
                        .as_deref()
                        .map(|e| format!(" (tried {} time(s): {e})", b.attempts))
                        .unwrap_or_default()
                )?;
            }
        }
        out.flush()
    })())
}

pub fn print_ingest(dir: &Path, report: &IngestReport) {
    eprintln!(
        "plans {}: {} new, {} updated, {} unchanged, {} not taken in",
        dir.display(),
        report.created.len(),
        report.updated.len(),
        report.unchanged,
        report.errors.len()
    );
    for (path, reason) in &report.errors {
        eprintln!("  {path}: {reason} (left untouched)");
    }
    if !report.drafts.is_empty() {
        eprintln!(
            "  drafts, left out until their `status: draft` line is removed: {}",
            report.drafts.join(", ")
        );
    }
}

/// `executor escalations`: each question with the run's recent messages and the command
/// that answers it. `windows[i]` is the message window of `escalations[i]`'s run.
pub fn print_escalations(
    escalations: &[crate::core::record::Decision],
    windows: &[Vec<crate::core::record::StoredMessage>],
) -> Result<()> {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    finish((|| {
        if escalations.is_empty() {
            writeln!(out, "no escalation waits for you")?;
            return out.flush();
        }
        for (escalation, window) in escalations.iter().zip(windows) {
            writeln!(
                out,
                "escalation {}  {}  task {}  run {}",
                escalation.id,
                when(&escalation.at),
                escalation.task_gid.as_deref().unwrap_or("-"),
                escalation
                    .run_id
                    .map(|r| r.to_string())
                    .unwrap_or_else(|| "-".into()),
            )?;
            writeln!(
                out,
                "  asks: {}{}",
                escalation.action,
                escalation
                    .detail
                    .as_deref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            )?;
            if let Some(rule) = &escalation.rule_id {
                writeln!(out, "  rule: {rule}")?;
            }
            if escalation.confined == Some(false) {
                writeln!(out, "  the worker ran unconfined (outside the wall)")?;
            }
            if !window.is_empty() {
                writeln!(out, "  recent messages:")?;
                for message in window {
                    writeln!(out, "    {}", message.line)?;
                }
            }
            match (&escalation.resolution, &escalation.resolved_at) {
                (Some(answer), Some(at)) => writeln!(
                    out,
                    "  answered: {answer} at {}{}{}",
                    when(at),
                    escalation
                        .resolution_note
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default(),
                    if escalation.applied_at.is_some() {
                        ", the run has resumed"
                    } else {
                        ", the run resumes on the next pass"
                    }
                )?,
                _ => writeln!(
                    out,
                    "  answer: executor decide {} approve|deny [--note \"...\"]",
                    escalation.id
                )?,
            }
            writeln!(out)?;
        }
        out.flush()
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_characters_are_escaped_and_the_rest_is_left_alone() {
        assert_eq!(printable("Fix tab — préview #12"), "Fix tab — préview #12");
        assert_eq!(
            printable("a\u{1b}[2Jb\u{202e}c\u{2066}d\u{200b}e\u{feff}f\ng"),
            "a\\u{001b}[2Jb\\u{202e}c\\u{2066}d\\u{200b}e\\u{feff}f\\u{000a}g"
        );
        assert_eq!(printable_text("one\n\ttwo\r"), "one\n\ttwo\\u{000d}");
    }

    #[test]
    fn a_title_is_cut_to_the_width_with_an_ellipsis() {
        assert_eq!(fit("Fix tab preview", 20), "Fix tab preview");
        assert_eq!(fit("Fix tab preview", 8), "Fix tab…");
        assert_eq!(fit("Größenänderung", 5), "Größ…");
        assert_eq!(fit("abc", 0), "…");
    }
}

//! [`Analyzer`]: takes pending tasks one at a time through the rule filters and, when no
//! rule skips them, through one agent call, and moves each to `for_review`, `awaiting_go`
//! or `skip` with its findings recorded.
//!
//! One task ([`Analyzer::analyze_one`]):
//! 1. its facts are read (absent or unreadable: none, with a warning for unreadable);
//! 2. a rule that matches skips it: the rule's id and reason are its summary and the
//!    event's detail, and no model is called;
//! 3. otherwise the agent is asked, with no tools, in an empty folder of its own, under the
//!    analyzer's limits; an unusable answer (or a stopped or failed agent) is asked once
//!    more, with the reason; a second failure sends the task to `for_review` with the error
//!    appended to its notes;
//! 4. the findings are written and the status moved (`analyzed` event, actor `analyzer`),
//!    after reading the task again: a task that left `pending` meanwhile (the owner said go)
//!    is left as it is, and notes are appended to as they are then, not as they were.
//!
//! An agent that cannot be started at all (a wrong program) is an error of the analyzer,
//! not of the task: the task stays `pending`, and [`Analyzer::analyze_pending`] stops its
//! pass there instead of sending every task to the owner.
//!
//! Each call's raw output goes to `{work_dir}/{gid}/analysis_{stamp}.jsonl`; its working
//! folder, `{work_dir}/{gid}/analysis_{stamp}_{attempt}/`, is removed afterwards.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

use super::answer::{self, excerpt, read_triage, AnswerError, Triage};
use super::prompt::PromptTemplate;
use crate::agents::{Adapter, AgentEvent, Invocation};
use crate::core::clock::{Clock, SystemClock};
use crate::core::facts::TaskFacts;
use crate::core::filter::{Candidate, Filters};
use crate::core::queue::{QueueEvent, QueueStatus, Verdict};
use crate::core::task::{Analysis, Task};
use crate::core::watchdog::{Limits, StopReason};
use crate::ops::queue::apply;
use crate::store::Store;
use crate::supervisor::{self, Stream, SupervisorError, WorkerEvent, WorkerSpec};

/// The actor of the analyzer's queue events.
pub const ACTOR: &str = "analyzer";

/// How many times the agent is asked about one task.
pub const ATTEMPTS: u32 = 2;

/// The analyzer's limits by default (docs/design.md §3): 5 min without output, 15 min in all.
pub const DEFAULT_LIMITS: Limits = Limits {
    no_output: Duration::from_secs(5 * 60),
    hard: Duration::from_secs(15 * 60),
};

/// Longest output line kept from the agent.
const MAX_LINE: usize = 1024 * 1024;

/// Stderr lines kept to explain a failed agent.
const STDERR_TAIL: usize = 5;

/// Pending tasks read at a time by [`Analyzer::analyze_pending`].
const PAGE: u32 = 100;

const SYSTEM_PROMPT: &str = "You triage one task for the owner of a software project. You \
     have no tools. Answer with the JSON object the prompt asks for, in a fenced json block, \
     and nothing after it.";

/// How one task came out. Serialised as `{"task_gid": …, "outcome": "triaged", …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Analyzed {
    #[serde(rename = "task_gid")]
    pub gid: String,
    #[serde(flatten)]
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// A rule skipped it; no model was called.
    SkippedByRule { rule: String, reason: String },
    /// The model's verdict, with what it found.
    Triaged(Triage),
    /// The agent gave no usable answer twice: sent to `for_review`, the error in its notes.
    Failed { error: String },
}

impl Analyzed {
    /// The status the task was moved to.
    pub fn status(&self) -> QueueStatus {
        match &self.outcome {
            Outcome::SkippedByRule { .. } => QueueStatus::Skip,
            Outcome::Triaged(triage) => verdict_status(triage.verdict),
            Outcome::Failed { .. } => QueueStatus::ForReview,
        }
    }

    /// One line for a progress listing: `T-1 → skip (rule `figma`: design work)`.
    pub fn describe(&self) -> String {
        let why = match &self.outcome {
            Outcome::SkippedByRule { rule, reason } => format!("rule `{rule}`: {reason}"),
            Outcome::Triaged(triage) => excerpt(&triage.summary),
            Outcome::Failed { error } => format!("analysis failed: {}", excerpt(error)),
        };
        format!("{} → {} ({why})", self.gid, self.status())
    }
}

/// What a pass over the pending tasks did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AnalyzeReport {
    /// Tasks skipped by a rule, by rule id.
    pub skipped_by_rule: BTreeMap<String, u64>,
    /// The model's verdicts.
    pub verdicts: VerdictCounts,
    /// Tasks sent to `for_review` because the agent gave no usable answer twice.
    pub analysis_failed: u64,
    /// Tasks left `pending` because they could not be analyzed or moved; not retried in the
    /// same pass.
    pub errors: Vec<TaskError>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct VerdictCounts {
    pub for_review: u64,
    pub awaiting_go: u64,
    pub skip: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskError {
    pub task_gid: String,
    pub error: String,
}

impl AnalyzeReport {
    /// Counts one analyzed task.
    pub fn record(&mut self, analyzed: &Analyzed) {
        match &analyzed.outcome {
            Outcome::SkippedByRule { rule, .. } => {
                *self.skipped_by_rule.entry(rule.clone()).or_default() += 1;
            }
            Outcome::Triaged(triage) => match triage.verdict {
                Verdict::ForReview => self.verdicts.for_review += 1,
                Verdict::AwaitingGo => self.verdicts.awaiting_go += 1,
                Verdict::Skip => self.verdicts.skip += 1,
            },
            Outcome::Failed { .. } => self.analysis_failed += 1,
        }
    }

    /// Tasks moved out of `pending`.
    pub fn analyzed(&self) -> u64 {
        self.skipped_by_rule.values().sum::<u64>()
            + self.verdicts.for_review
            + self.verdicts.awaiting_go
            + self.verdicts.skip
            + self.analysis_failed
    }
}

/// The agent could not be started at all: a problem of the analyzer's setup, not of a task.
#[derive(Debug, Error)]
#[error("cannot start the analyzer's agent ({agent})")]
pub struct AgentUnavailable {
    pub agent: &'static str,
    #[source]
    pub source: SupervisorError,
}

/// Why one ask of the agent gave no triage.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
enum AttemptError {
    #[error("the agent was stopped: {0}")]
    Stopped(&'static str),
    #[error("the agent failed: {0}")]
    Failed(String),
    #[error(transparent)]
    Answer(#[from] AnswerError),
}

/// The analyzer: its store, agent, rules, prompt and limits.
pub struct Analyzer {
    store: Arc<dyn Store>,
    adapter: Adapter,
    filters: Filters,
    prompt: PromptTemplate,
    limits: Limits,
    grace: Duration,
    work_dir: PathBuf,
    env: HashMap<String, String>,
    clock: Arc<dyn Clock>,
    wall: Arc<crate::sandbox::Wall>,
}

impl Analyzer {
    /// `env` is the agent's whole environment (nothing else is inherited; the adapter's
    /// fixed, non-secret settings are added where `env` does not set them). `work_dir` holds
    /// each task's transcripts and the agent's empty working folders.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Arc<dyn Store>,
        adapter: Adapter,
        filters: Filters,
        prompt: PromptTemplate,
        limits: Limits,
        grace: Duration,
        work_dir: PathBuf,
        env: HashMap<String, String>,
    ) -> Self {
        let mut env = env;
        for (key, value) in adapter.fixed_env() {
            env.entry((*key).to_string())
                .or_insert_with(|| (*value).to_string());
        }
        Analyzer {
            store,
            adapter,
            filters,
            prompt,
            limits,
            grace,
            wall: Arc::new(crate::sandbox::Wall::off(work_dir.join(".homes"))),
            work_dir,
            env,
            clock: Arc::new(SystemClock),
        }
    }

    /// Runs the triage agent inside `wall` (the default: unconfined, `[sandbox] mode = "off"`).
    pub fn with_wall(mut self, wall: Arc<crate::sandbox::Wall>) -> Self {
        self.wall = wall;
        self
    }

    /// The same analyzer with `clock` for the times it records.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Analyzes `task` (which must be `pending`) and moves it. An error leaves the task as
    /// it was: it was not pending, the store failed, or the agent could not be started
    /// ([`AgentUnavailable`]).
    pub async fn analyze_one(&self, task: &Task) -> Result<Analyzed> {
        let gid = task.task_gid.as_str();
        if task.status != QueueStatus::Pending {
            anyhow::bail!(
                "task `{gid}` is {}, not pending: only pending tasks are analyzed",
                task.status
            );
        }
        let facts = self.facts(gid).await?;
        let candidate = Candidate {
            source: task.source.as_deref().unwrap_or(""),
            text: task.description.as_deref().unwrap_or(""),
            facts: &facts,
        };
        if let Some(skip) = self.filters.judge(candidate) {
            let described = skip.describe();
            self.conclude(gid, Verdict::Skip, Some(described.clone()), |task| {
                Analysis {
                    summary: Some(described.clone()),
                    ..kept(task)
                }
            })
            .await?;
            tracing::info!(gid, rule = %skip.rule, "skipped by rule; no model asked");
            return Ok(Analyzed {
                gid: gid.to_string(),
                outcome: Outcome::SkippedByRule {
                    rule: skip.rule,
                    reason: skip.reason,
                },
            });
        }

        let prompt = self
            .prompt
            .render(task, &facts)
            .with_context(|| format!("cannot render the analysis prompt for task `{gid}`"))?;
        let mut transcript = Transcript::create(&self.work_dir, gid, &self.clock);
        let mut errors: Vec<AttemptError> = Vec::new();
        for attempt in 1..=ATTEMPTS {
            let asked = match errors.last() {
                None => prompt.clone(),
                Some(error) => retry_prompt(&prompt, error),
            };
            match self.ask(gid, &asked, attempt, &mut transcript).await? {
                Ok(triage) => {
                    let detail = format!("{}: {}", self.adapter.name(), excerpt(&triage.summary));
                    self.conclude(gid, triage.verdict, Some(detail), |task| {
                        let kept = kept(task);
                        Analysis {
                            priority: triage.priority.or(kept.priority),
                            complexity: triage.complexity.clone().or(kept.complexity),
                            feasibility: triage.feasibility.clone().or(kept.feasibility),
                            summary: Some(triage.summary.clone()),
                            append_notes: None,
                        }
                    })
                    .await?;
                    tracing::info!(gid, verdict = ?triage.verdict, attempt, "analyzed");
                    return Ok(Analyzed {
                        gid: gid.to_string(),
                        outcome: Outcome::Triaged(triage),
                    });
                }
                Err(error) => {
                    tracing::warn!(
                        gid,
                        attempt,
                        %error,
                        "the analyzer's agent gave no usable answer"
                    );
                    errors.push(error);
                }
            }
        }

        let error = errors
            .last()
            .map(ToString::to_string)
            .unwrap_or_else(|| "no attempt was made".to_string());
        let all: Vec<String> = errors
            .iter()
            .enumerate()
            .map(|(i, e)| format!("{}) {e}", i + 1))
            .collect();
        let line = format!(
            "[analyzer {}] the analysis failed {} times: {}",
            crate::core::time::format_utc(&self.clock.now()),
            errors.len(),
            all.join("; ")
        );
        self.conclude(
            gid,
            Verdict::ForReview,
            Some(format!("analysis failed: {}", excerpt(&error))),
            |task| Analysis {
                summary: Some(
                    "The analysis failed: the agent gave no usable answer (the error is \
                         in the notes). Please triage this task yourself."
                        .to_string(),
                ),
                append_notes: Some(line.clone()),
                ..kept(task)
            },
        )
        .await?;
        Ok(Analyzed {
            gid: gid.to_string(),
            outcome: Outcome::Failed { error },
        })
    }

    /// Analyzes pending tasks one at a time, oldest first, reading the pending list again
    /// after each, until none is left (tasks that came in meanwhile included). A task that
    /// cannot be analyzed or moved is reported in [`AnalyzeReport::errors`] and not tried
    /// again in the same pass, so the pass ends. `progress` hears each task moved.
    ///
    /// Fails, ending the pass, when the store cannot list tasks or the agent cannot be
    /// started at all ([`AgentUnavailable`]: every other task would fail the same way).
    pub async fn analyze_pending(
        &self,
        mut progress: impl FnMut(&Analyzed),
    ) -> Result<AnalyzeReport> {
        let mut report = AnalyzeReport::default();
        let mut tried: HashSet<String> = HashSet::new();
        while let Some(task) = self.next_pending(&tried).await? {
            tried.insert(task.task_gid.clone());
            match self.analyze_one(&task).await {
                Ok(analyzed) => {
                    report.record(&analyzed);
                    progress(&analyzed);
                }
                Err(error) if error.downcast_ref::<AgentUnavailable>().is_some() => {
                    return Err(error.context(format!(
                        "the analysis pass stopped at task `{}`",
                        task.task_gid
                    )));
                }
                Err(error) => {
                    let error = format!("{error:#}");
                    tracing::warn!(
                        gid = %task.task_gid,
                        %error,
                        "task not analyzed; left pending"
                    );
                    report.errors.push(TaskError {
                        task_gid: task.task_gid.clone(),
                        error,
                    });
                }
            }
        }
        Ok(report)
    }

    /// The oldest pending task not yet tried in this pass.
    async fn next_pending(&self, tried: &HashSet<String>) -> Result<Option<Task>> {
        let mut after_id = i64::MIN;
        loop {
            let page = self
                .store
                .tasks_page(Some(&QueueStatus::Pending), after_id, PAGE)
                .await
                .context("cannot list the pending tasks")?;
            let full = page.len() == PAGE as usize;
            let Some(last) = page.last() else {
                return Ok(None);
            };
            after_id = last.id;
            if let Some(task) = page.into_iter().find(|t| !tried.contains(&t.task_gid)) {
                return Ok(Some(task));
            }
            if !full {
                return Ok(None);
            }
        }
    }

    /// The task's facts; none when the source gave none or they cannot be read.
    async fn facts(&self, gid: &str) -> Result<TaskFacts> {
        let stored = self
            .store
            .task_facts(gid)
            .await
            .with_context(|| format!("cannot read the facts of task `{gid}`"))?;
        Ok(match stored {
            None => TaskFacts::default(),
            Some(json) => serde_json::from_str(&json).unwrap_or_else(|error| {
                tracing::warn!(
                    gid,
                    %error,
                    "the task's stored facts are unreadable; analyzing it without them"
                );
                TaskFacts::default()
            }),
        })
    }

    /// Writes the findings `analysis` makes of the task as it is now, and moves it by
    /// `verdict`, if it is still pending.
    async fn conclude(
        &self,
        gid: &str,
        verdict: Verdict,
        detail: Option<String>,
        analysis: impl FnOnce(&Task) -> Analysis,
    ) -> Result<()> {
        let store = self.store.as_ref();
        let now = store
            .task(gid)
            .await
            .with_context(|| format!("cannot read task `{gid}`"))?
            .with_context(|| format!("task `{gid}` is gone"))?;
        if now.status != QueueStatus::Pending {
            anyhow::bail!(
                "task `{gid}` became {} during its analysis; left as it is",
                now.status
            );
        }
        let analysis = analysis(&now);
        // Written only while the task is still pending, in one statement: an owner's `go`
        // between the read above and here is never overwritten.
        let written = store
            .record_analysis(gid, &analysis, self.clock.now())
            .await
            .with_context(|| format!("cannot record the analysis of task `{gid}`"))?;
        if !written {
            anyhow::bail!("task `{gid}` left pending during its analysis; left as it is");
        }
        apply(
            store,
            self.clock.as_ref(),
            gid,
            QueueEvent::Analyzed(verdict),
            ACTOR,
            detail,
        )
        .await
        .with_context(|| format!("cannot move task `{gid}` to {}", verdict_status(verdict)))?;
        Ok(())
    }

    /// Asks the agent once. The outer error is the analyzer's (no folder, no agent); the
    /// inner one is the attempt's.
    async fn ask(
        &self,
        gid: &str,
        prompt: &str,
        attempt: u32,
        transcript: &mut Transcript,
    ) -> Result<Result<Triage, AttemptError>> {
        let folder = WorkFolder::create(&transcript.dir, &transcript.stem, attempt)?;
        let invocation = Invocation {
            append_system_prompt: Some(SYSTEM_PROMPT.to_string()),
            confined: self.wall.is_confined(),
            ..Invocation::default()
        };
        let schema = answer::schema();
        let spec = WorkerSpec {
            argv: self.adapter.answer_only_argv(&invocation, Some(&schema)),
            cwd: folder.path.clone(),
            env: self.env.clone(),
            stdin: Some(prompt.as_bytes().to_vec()),
            limits: self.limits,
            grace: self.grace,
            max_line: MAX_LINE,
            os_limits: None,
            kept: false,
            heartbeat: None,
        };
        let place = crate::sandbox::Place {
            worktree: folder.path.clone(),
            read_only_worktree: false,
            git_common_dir: None,
            home: format!("analysis-{}", crate::core::gid::short_hash(gid)),
            agent: self.adapter.family(),
            read_only: Vec::new(),
            read_write: Vec::new(),
            loopback_ports: Vec::new(),
            label: format!("the analysis of {gid}"),
        };
        let enclosed = self.wall.enclose(spec, &place)?;
        let (spec, _gate) = (enclosed.spec, enclosed.gate);
        let mut texts: Vec<String> = Vec::new();
        let mut structured: Option<Value> = None;
        let mut agent_error: Option<String> = None;
        let mut reported: Vec<String> = Vec::new();
        let mut stderr: VecDeque<String> = VecDeque::new();
        let adapter = &self.adapter;
        let outcome = supervisor::supervise(
            spec,
            |event| {
                let WorkerEvent::Line { stream, line } = event else {
                    return false;
                };
                let text = line.text();
                transcript.raw(attempt, stream, &text);
                if stream == Stream::Stderr {
                    if !text.trim().is_empty() {
                        if stderr.len() == STDERR_TAIL {
                            stderr.pop_front();
                        }
                        stderr.push_back(text);
                    }
                    return false;
                }
                let events = adapter.parse_line(&text);
                for event in &events {
                    match event {
                        AgentEvent::AssistantText { text } => texts.push(text.clone()),
                        AgentEvent::Failed { message } => reported.push(message.clone()),
                        AgentEvent::Finished(finished) => {
                            if finished.structured_output.is_some() {
                                structured = finished.structured_output.clone();
                            }
                            if finished.is_error {
                                let mut why = finished
                                    .reason
                                    .clone()
                                    .unwrap_or_else(|| "it reported an error".to_string());
                                if !finished.errors.is_empty() {
                                    why = format!("{why}: {}", finished.errors.join("; "));
                                }
                                agent_error = Some(why);
                            }
                        }
                        _ => {}
                    }
                }
                events.iter().any(AgentEvent::is_meaningful)
            },
            None,
        )
        .await;
        drop(folder);
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(source @ (SupervisorError::Spawn { .. } | SupervisorError::EmptyCommand)) => {
                return Err(AgentUnavailable {
                    agent: self.adapter.name(),
                    source,
                }
                .into())
            }
            Err(error) => {
                return Ok(Err(AttemptError::Failed(format!(
                    "{:#}",
                    anyhow::Error::new(error)
                ))))
            }
        };
        tracing::debug!(gid, attempt, ?outcome, "the analyzer's agent ended");
        if let Some(stopped) = outcome.stopped {
            return Ok(Err(AttemptError::Stopped(match stopped {
                StopReason::NoOutput => "no output for the analyzer's no-output limit",
                StopReason::HardTimeout => "it ran past the analyzer's hard timeout",
                StopReason::Requested => "a stop was requested",
                StopReason::ProcessCap => {
                    "it tried to start more processes than [sandbox] max_processes allows"
                }
                StopReason::DiskBudget => "it wrote more than [sandbox] max_disk allows",
            })));
        }
        let stderr_note = || {
            if stderr.is_empty() {
                String::new()
            } else {
                let joined: Vec<&str> = stderr.iter().map(String::as_str).collect();
                format!("; stderr: {}", excerpt(&joined.join(" | ")))
            }
        };
        if let Some(why) = agent_error {
            return Ok(Err(AttemptError::Failed(format!("{why}{}", stderr_note()))));
        }
        if !outcome.succeeded() {
            let how = match (outcome.exit_code, outcome.signal) {
                (Some(code), _) => format!("it exited with status {code}"),
                (None, Some(signal)) => format!("it died of signal {signal}"),
                (None, None) => "it ended abnormally".to_string(),
            };
            let reported = if reported.is_empty() {
                String::new()
            } else {
                format!(" ({})", excerpt(&reported.join("; ")))
            };
            return Ok(Err(AttemptError::Failed(format!(
                "{how}{reported}{}",
                stderr_note()
            ))));
        }
        Ok(read_triage(structured.as_ref(), texts.iter().map(String::as_str)).map_err(Into::into))
    }
}

/// The status `verdict` moves a task to.
fn verdict_status(verdict: Verdict) -> QueueStatus {
    match verdict {
        Verdict::ForReview => QueueStatus::ForReview,
        Verdict::AwaitingGo => QueueStatus::AwaitingGo,
        Verdict::Skip => QueueStatus::Skip,
    }
}

/// The task's findings as they are (nothing replaced, notes untouched).
fn kept(task: &Task) -> Analysis {
    Analysis {
        priority: task.priority,
        complexity: task.complexity.clone(),
        feasibility: task.feasibility.clone(),
        summary: task.analysis_summary.clone(),
        append_notes: None,
    }
}

/// The prompt asked again after an unusable answer.
fn retry_prompt(prompt: &str, error: &AttemptError) -> String {
    format!(
        "{}\n\n## Your previous answer could not be used\n\n{error}\n\nAnswer again: only the \
         JSON object, in a fenced json block, with the fields and values asked for above.\n",
        prompt.trim_end()
    )
}

/// A folder name for task `gid`: the gid itself when it is a valid one (no separators),
/// else a digest of it.
fn folder_name(gid: &str) -> String {
    match crate::core::gid::validate(gid) {
        Ok(valid) => valid.to_string(),
        Err(_) => format!("task-{}", crate::core::gid::short_hash(gid)),
    }
}

/// The raw output of one task's analysis, one JSON line per output line. Written on a best
/// effort: a transcript that cannot be written is logged once and left.
struct Transcript {
    dir: PathBuf,
    stem: String,
    file: Option<std::fs::File>,
    /// The analyzer's clock, for each line's time.
    clock: Arc<dyn Clock>,
}

impl Transcript {
    fn create(work_dir: &Path, gid: &str, clock: &Arc<dyn Clock>) -> Self {
        let at = clock.now();
        let dir = work_dir.join(folder_name(gid));
        let stem = format!("analysis_{}", at.format("%Y-%m-%d-%H-%M-%S"));
        let path = dir.join(format!("{stem}.jsonl"));
        let file = std::fs::create_dir_all(&dir)
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
            })
            .map_err(|error| {
                tracing::warn!(
                    path = %path.display(),
                    %error,
                    "cannot write the analysis transcript"
                );
            })
            .ok();
        Transcript {
            dir,
            stem,
            file,
            clock: Arc::clone(clock),
        }
    }

    fn raw(&mut self, attempt: u32, stream: Stream, line: &str) {
        if let Some(file) = self.file.as_mut() {
            let record = serde_json::json!({
                "at": crate::core::time::format_utc(&self.clock.now()),
                "attempt": attempt,
                "stream": stream,
                "line": line,
            });
            if let Err(error) = writeln!(file, "{record}") {
                tracing::warn!(%error, "cannot write the analysis transcript; going on without it");
                self.file = None;
            }
        }
    }
}

/// The agent's working folder: created empty for one attempt (never one that was there
/// before), removed when dropped.
struct WorkFolder {
    path: PathBuf,
}

impl WorkFolder {
    fn create(dir: &Path, stem: &str, attempt: u32) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for n in 0..100u32 {
            let name = if n == 0 {
                format!("{stem}_{attempt}")
            } else {
                format!("{stem}_{attempt}-{n}")
            };
            let path = dir.join(name);
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(WorkFolder { path }),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(error) => {
                    return Err(error).with_context(|| format!("cannot create {}", path.display()))
                }
            }
        }
        anyhow::bail!("cannot create a fresh working folder in {}", dir.display())
    }
}

/// Removed however the attempt ends, a cancelled one included.
impl Drop for WorkFolder {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(
                path = %self.path.display(),
                %error,
                "cannot remove the analyzer's working folder"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analyzed(outcome: Outcome) -> Analyzed {
        Analyzed {
            gid: "T-1".into(),
            outcome,
        }
    }

    fn triage(verdict: Verdict) -> Triage {
        Triage {
            verdict,
            priority: Some(2),
            complexity: None,
            feasibility: None,
            summary: "why".into(),
        }
    }

    /// Compiles only if the daemon can run the analyzer on a tokio task.
    #[allow(dead_code)]
    fn the_analyzer_can_be_spawned(analyzer: Arc<Analyzer>, task: Task) {
        fn spawnable<T: Send + 'static>(_: &T) {}
        fn shared<T: Send + Sync>(_: &T) {}
        shared(&*analyzer);
        let one = {
            let analyzer = analyzer.clone();
            async move { analyzer.analyze_one(&task).await }
        };
        spawnable(&one);
        let pass = async move { analyzer.analyze_pending(|_| {}).await };
        spawnable(&pass);
    }

    #[test]
    fn the_report_counts_rules_verdicts_and_failures() {
        let mut report = AnalyzeReport::default();
        for outcome in [
            Outcome::SkippedByRule {
                rule: "figma".into(),
                reason: "design".into(),
            },
            Outcome::SkippedByRule {
                rule: "figma".into(),
                reason: "design".into(),
            },
            Outcome::SkippedByRule {
                rule: "closed".into(),
                reason: "closed".into(),
            },
            Outcome::Triaged(triage(Verdict::AwaitingGo)),
            Outcome::Triaged(triage(Verdict::Skip)),
            Outcome::Triaged(triage(Verdict::ForReview)),
            Outcome::Triaged(triage(Verdict::ForReview)),
            Outcome::Failed {
                error: "garbage".into(),
            },
        ] {
            report.record(&analyzed(outcome));
        }
        assert_eq!(report.skipped_by_rule["figma"], 2);
        assert_eq!(report.skipped_by_rule["closed"], 1);
        assert_eq!(
            report.verdicts,
            VerdictCounts {
                for_review: 2,
                awaiting_go: 1,
                skip: 1
            }
        );
        assert_eq!(report.analysis_failed, 1);
        assert_eq!(report.analyzed(), 8);
        let json = serde_json::to_value(&report).expect("serialises");
        assert_eq!(json["skipped_by_rule"]["figma"], 2);
        assert_eq!(json["verdicts"]["awaiting_go"], 1);
    }

    #[test]
    fn each_outcome_names_the_status_it_moved_to() {
        let rule = analyzed(Outcome::SkippedByRule {
            rule: "figma".into(),
            reason: "design work".into(),
        });
        assert_eq!(rule.status(), QueueStatus::Skip);
        assert_eq!(rule.describe(), "T-1 → skip (rule `figma`: design work)");
        assert_eq!(
            analyzed(Outcome::Triaged(triage(Verdict::AwaitingGo))).status(),
            QueueStatus::AwaitingGo
        );
        let failed = analyzed(Outcome::Failed {
            error: "no JSON".into(),
        });
        assert_eq!(failed.status(), QueueStatus::ForReview);
        assert!(failed.describe().contains("analysis failed: no JSON"));

        assert_eq!(
            serde_json::to_value(&rule).expect("serialises"),
            serde_json::json!({"task_gid": "T-1", "outcome": "skipped_by_rule", "rule": "figma", "reason": "design work"})
        );
        let triaged = serde_json::to_value(analyzed(Outcome::Triaged(triage(Verdict::Skip))))
            .expect("serialises");
        assert_eq!(triaged["outcome"], "triaged");
        assert_eq!(triaged["status"], "skip");
        assert_eq!(triaged["analysis_summary"], "why");
        assert_eq!(
            serde_json::to_value(&failed).expect("serialises")["error"],
            "no JSON"
        );
    }

    #[test]
    fn the_retry_prompt_says_what_was_wrong() {
        let error = AttemptError::Answer(AnswerError::Missing {
            field: "analysis_summary",
        });
        let text = retry_prompt("Triage this.\n", &error);
        assert!(text.starts_with("Triage this.\n\n## Your previous answer"));
        assert!(text.contains("no `analysis_summary`"), "{text}");
    }

    #[test]
    fn folder_names_never_leave_the_work_folder() {
        assert_eq!(folder_name("T-1"), "T-1");
        assert_eq!(folder_name("1209876543210"), "1209876543210");
        for bad in ["../x", "a/b", "..", ""] {
            let name = folder_name(bad);
            assert!(name.starts_with("task-") && !name.contains('/'), "{name}");
        }
    }

    #[test]
    fn a_work_folder_is_new_and_removed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let first = WorkFolder::create(dir.path(), "analysis_x", 1).expect("create");
        let second = WorkFolder::create(dir.path(), "analysis_x", 1).expect("create");
        assert_ne!(first.path, second.path);
        assert_eq!(std::fs::read_dir(&first.path).expect("read").count(), 0);
        let path = first.path.clone();
        drop(first);
        assert!(!path.exists());
        drop(second);
    }
}

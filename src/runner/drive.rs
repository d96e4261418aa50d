//! The run loop of the local forge: an approved task becomes a run; the run gets a worktree
//! and a worker; a worker that reports `[DONE:…]` has its change verified by the configured
//! command; a green verification is committed on the run's branch by the orchestrator (the
//! worker never commits or pushes) and completes the run; a red one starts a `fix_ci`
//! worker with the failing output, up to `max_ci_attempts`. A worker that ends without
//! `[DONE:…]` is retried as a resume worker after a capped, jittered backoff; past the cap
//! the run is abandoned and its task goes back to the owner (`for_review`).
//!
//! What to do next is decided by the state machines in `core`; this module carries it out.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use chrono::Utc;
use tokio::sync::Semaphore;

use crate::agents::Adapter;
use crate::core::clock::{Clock, SystemClock};
use crate::core::lifecycle;
use crate::core::queue::{QueueEvent, QueueStatus};
use crate::core::record::{Run, WorkerRecord};
use crate::core::run::{next_state, RunEvent, RunState};
use crate::core::task::Task;
use crate::core::watchdog::{Limits, StopReason};
use crate::ops::queue as queue_ops;
use crate::prompts::{
    CiFailure, FailedCheck, Phase, PromptContext, PromptSet, RunContext, TaskContext,
};
use crate::protocol::Tag;
use crate::runner::git::{self, Baseline, Git};
use crate::runner::worktree;
use crate::store::Store;
use crate::supervisor::{self, Stream, WorkerEvent, WorkerSpec};

mod claim;
mod conduct;
mod dispatch;
mod opening;
mod patience;
mod pr_tick;
mod review;
pub use conduct::tick_parents;
pub use dispatch::{agent_tools, dispatch, Dispatched};
pub use pr_tick::tick_prs;
pub use review::INTEGRATE;

/// How the runner works, resolved from the config.
#[derive(Debug, Clone)]
pub struct RunnerSettings {
    pub repository: PathBuf,
    /// Who the orchestrator's commits are by ([`git::owner_identity`]).
    pub commit_author: git::Identity,
    pub base_branch: String,
    pub branch_prefix: String,
    pub worktrees_dir: PathBuf,
    pub logs_dir: PathBuf,
    pub max_workers: usize,
    pub limits: Limits,
    pub grace: Duration,
    /// The verification command (empty: nothing to verify).
    pub verify: Vec<String>,
    pub max_ci_attempts: u32,
    /// Workers a run may start that end without `[DONE:…]`.
    pub max_worker_attempts: u32,
    /// The first retry waits about this long; each next one twice as long, up to a minute.
    pub retry_base: Duration,
    /// How long a finished run's worktree is kept.
    pub keep_worktrees: Duration,
    /// What every worker's agent is started with, beyond its prompt.
    pub agent: AgentOptions,
    /// The worker contract (`roles/worker-policy.json`) that decides `[REQUEST:…]` lines;
    /// `None`: requests are stored, not decided.
    pub worker_contract: Option<crate::runner::contract::ContractCell>,
    /// The GitHub forge (`[forge] kind = "github"`): a finished run's branch is pushed and
    /// a draft PR opened; `None` on the local forge.
    pub github: Option<GithubForge>,
    /// The model judge, when the owner asked for one (`[policy] ask_model_first`).
    pub judge: Option<crate::runner::judge::JudgeSettings>,
    /// Each run works in its own worktree and branch (`runner.worktrees`). Off, workers run
    /// in the repository folder itself and nothing is committed: for work that changes no
    /// files, or agents that manage their own checkouts.
    pub worktrees: bool,
    /// Where the owner is told what happens (the log, the chat topic, webhooks).
    pub notices: crate::chat::Notices,
    /// How many of a run's latest messages an escalation and the model judge see.
    pub window: u32,
    /// Goals and subtasks, review rounds, the record step (`[conductor]`).
    pub conductor: crate::config::conductor::ConductorSection,
    /// The record step, run when a run completes.
    pub recorder: Arc<crate::runner::record::Recorder>,
    /// The wall every worker runs inside (or the reason it runs unconfined).
    pub wall: Arc<crate::sandbox::Wall>,
    /// The repository's common git folder, which a confined worker reads but cannot write.
    pub git_common_dir: Option<PathBuf>,
    /// The name of every worker's private home in the wall; `None`: one per run
    /// (`run-N`). A dispatched task naming an agent session sets it, so the session's
    /// files are found by the next task naming it.
    pub home: Option<String>,
}

impl RunnerSettings {
    /// Where a worker of run `run_id` works, for the wall.
    fn place(
        &self,
        run_id: i64,
        cwd: &Path,
        adapter: Option<&Adapter>,
        label: String,
        read_only: Vec<PathBuf>,
    ) -> crate::sandbox::Place {
        crate::sandbox::Place {
            worktree: cwd.to_path_buf(),
            read_only_worktree: false,
            git_common_dir: self.git_common_dir.clone(),
            home: self.home.clone().unwrap_or_else(|| format!("run-{run_id}")),
            agent: adapter.map_or(crate::sandbox::AgentFamily::Command, Adapter::family),
            read_only,
            read_write: Vec::new(),
            label,
        }
    }
}

/// The `[agent]` settings a worker is started with.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// Names of variables copied from executor's environment into each worker's (never one
    /// of executor's own secrets: the config refuses those).
    pub env: Vec<String>,
    pub model: Option<String>,
    pub allowed_tools: Vec<String>,
    pub max_turns: Option<u32>,
    /// The whole set of tools a worker has, in the agent's names (see
    /// [`crate::agents::Invocation::tools`]); `None` normally, set by `executor dispatch`.
    pub tools: Option<Vec<String>>,
    /// Claude: decide every tool call with `executor hook claude` (the settings file names
    /// this binary and the config, so the hook finds the run's store and contract).
    pub hook: Option<HookTarget>,
}

/// The GitHub side of a run: the client (it alone holds the token; no worker ever sees
/// it) and where branches go.
#[derive(Debug, Clone)]
pub struct GithubForge {
    pub client: crate::forge::github::GithubClient,
    /// The git remote run branches are pushed to.
    pub remote: String,
    /// Labels every draft PR gets.
    pub required_labels: Vec<String>,
    /// Checks that must be green before a review and before completion.
    pub required_checks: Vec<String>,
    /// Resolve threads whose last comment is `[ACKNOWLEDGED: …]`.
    pub resolve_acknowledged: bool,
    /// Who is @mentioned when a run completes.
    pub owner_login: String,
    /// The workflow dispatched when a head has no CI at all.
    pub ci_workflow: Option<String>,
    pub ci_start_grace: Duration,
    /// Failures in a row of an outside effect (opening the PR, the completion comment, a
    /// review) before the owner is asked; executor keeps trying after.
    pub max_effect_failures: u32,
}

/// Where `executor hook claude` is: the binary and the config it reads.
#[derive(Debug, Clone)]
pub struct HookTarget {
    pub executor: PathBuf,
    pub config: PathBuf,
}

/// Appended to a Claude worker's system prompt: the phase prompt teaches the format in full,
/// this keeps it in view however long the session grows.
const SYSTEM_REMINDER: &str = "You are a worker of executor. Report to it with message \
lines exactly as your instructions describe ([STATUS:kind], [REQUEST:kind], [DONE:kind], \
[ESCALATE:kind] at the start of a line). End every phase with one [DONE:kind] or \
[ESCALATE:kind] line.";

/// What a pass did: the runs that ended, and why the others failed (each failed run was
/// abandoned where the store allowed it).
#[derive(Debug, Default)]
pub struct Passed {
    pub results: Vec<RunResult>,
    pub failed: Vec<String>,
}

/// Everything a runner pass needs, cheap to clone into each run it starts. Every run
/// holds one of `slots` while it lives, so however many passes share this, the cap on live
/// workers holds.
#[derive(Clone)]
pub struct Runner {
    pub store: Arc<dyn Store>,
    pub adapter: Adapter,
    pub prompts: Arc<PromptSet>,
    pub settings: Arc<RunnerSettings>,
    pub slots: Arc<Semaphore>,
    /// Passes now taking approved tasks (see [`Runner::is_claiming`]).
    pub claiming: Arc<std::sync::atomic::AtomicUsize>,
    /// This runner process, as run leases name it.
    pub holder: Arc<crate::core::lease::Holder>,
}

/// How long a run's lease lasts without renewal; [`keep_leases`] renews it three times in
/// that span while the runner lives.
pub const LEASE_TTL: Duration = Duration::from_secs(60);

/// This process's lease span (`[runner] lease_ttl`): one per process, set when its runner
/// is built; [`LEASE_TTL`] until then.
static LEASE_SPAN: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();

/// Sets this process's lease span (the first call wins).
pub fn set_lease_ttl(ttl: Duration) {
    let _ = LEASE_SPAN.set(ttl.max(Duration::from_secs(1)));
}

fn lease_ttl() -> Duration {
    LEASE_SPAN.get().copied().unwrap_or(LEASE_TTL)
}

/// The holder of this process's leases.
pub fn this_runner() -> crate::core::lease::Holder {
    let pid = std::process::id();
    crate::core::lease::Holder {
        host: host(),
        pid,
        start: supervisor::group::start_time(pid),
    }
}

/// Renews this runner's leases until the task is dropped; a renewal that fails is logged
/// and tried again at the next beat (the lease lasts three beats).
pub async fn keep_leases(store: Arc<dyn Store>, holder: Arc<crate::core::lease::Holder>) {
    let id = holder.id();
    let mut beat = tokio::time::interval(lease_ttl() / 3);
    loop {
        beat.tick().await;
        if let Err(error) = store.renew_leases(&id, lease_until()).await {
            tracing::warn!(%error, "cannot renew this runner's run leases");
        }
    }
}

fn lease_until() -> chrono::DateTime<Utc> {
    Utc::now() + chrono::Duration::from_std(lease_ttl()).unwrap_or(chrono::Duration::seconds(60))
}

/// Takes run `run_id`'s lease for this runner if no live runner holds it (see
/// [`crate::core::lease::claim`]): the lease epoch every save of the run is then fenced
/// by; `None`, after saying who holds it, when a live runner does.
async fn take_run(
    store: &dyn Store,
    holder: &crate::core::lease::Holder,
    run_id: i64,
) -> Result<Option<i64>> {
    use crate::core::lease::{claim, Claim};
    let lease = store.lease(run_id).await?;
    let now = Utc::now();
    let alive = |h: &crate::core::lease::Holder| {
        h.start.is_some() && supervisor::group::start_time(h.pid) == h.start
    };
    let steal = match claim(lease.as_ref(), holder, now, alive) {
        Claim::Take => None,
        Claim::TakeOver { from } => Some(from),
        Claim::Held { holder, until } => {
            tracing::info!(run = run_id, %holder, until = %until, "another runner carries this run; leaving it");
            return Ok(None);
        }
    };
    Ok(store
        .take_lease(run_id, &holder.id(), now, lease_until(), steal.as_deref())
        .await?)
}

/// Gives a run's lease back once this runner stops carrying it (best effort: an unreleased
/// lease expires).
async fn release_run(store: &dyn Store, holder: &crate::core::lease::Holder, run_id: i64) {
    if let Err(error) = store.release_lease(run_id, &holder.id()).await {
        tracing::warn!(run = run_id, %error, "cannot release the run's lease; it expires on its own");
    }
}

impl Runner {
    /// Whether a pass is still taking approved tasks: it will take a newly approved one as
    /// soon as a slot is free, so no new pass is needed for it.
    pub fn is_claiming(&self) -> bool {
        self.claiming.load(std::sync::atomic::Ordering::SeqCst) > 0
    }
}

/// Counts a pass as claiming while it lives.
struct Claiming(Arc<std::sync::atomic::AtomicUsize>);

impl Claiming {
    fn new(count: &Arc<std::sync::atomic::AtomicUsize>) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self(Arc::clone(count))
    }
}

impl Drop for Claiming {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// How one run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResult {
    pub task_gid: String,
    pub run_id: i64,
    pub state: RunState,
    pub ci_attempts: i64,
    /// The escalation the run waits on (it holds no worker slot meanwhile).
    pub waiting_on: Option<i64>,
}

/// How often a runner looks whether its claim on a run it carries still holds (a cancel
/// or a takeover raises the run's lease epoch): a worker of a run claimed elsewhere is
/// stopped within this.
const CLAIM_CHECK: Duration = Duration::from_secs(1);

/// Longest output line kept from a worker.
const MAX_LINE: usize = 1024 * 1024;
/// Lines of verification output a `fix_ci` worker is shown.
const EXCERPT_LINES: usize = 60;

/// Takes approved tasks one at a time, each as soon as a worker slot is free, and drives
/// each to `complete` or `abandoned`; returns when none is left approved and its runs have
/// ended. The list is read again for every free slot, so a task approved meanwhile is taken
/// by the pass already running. A run holds one of `slots` while it lives, so however many
/// passes run at once the cap on live workers holds; a task two passes (or two runners)
/// both see is claimed by one only (the queue move to `in_progress` is compare-and-set).
pub async fn run_approved(runner: &Runner) -> Result<Passed> {
    let Runner {
        store, settings, ..
    } = runner;
    let claiming = Claiming::new(&runner.claiming);
    if store
        .tasks_page(Some(&QueueStatus::Approved), i64::MIN, 1)
        .await?
        .is_empty()
    {
        return Ok(Passed::default());
    }
    if settings.worktrees && !settings.repository.join(".git").exists() {
        anyhow::bail!(
            "runner.repository {} is not a git repository (the runs' worktrees are made from it)",
            settings.repository.display()
        );
    }
    let mut runs = tokio::task::JoinSet::new();
    loop {
        let permit = Arc::clone(&runner.slots).acquire_owned().await?;
        let Some(task) = claim_next(store.as_ref()).await? else {
            break;
        };
        let r = runner.clone();
        runs.spawn(async move {
            let gid = task.task_gid.clone();
            drive(&r, task, permit)
                .await
                .with_context(|| format!("run of task {gid}"))
        });
    }
    drop(claiming);
    Ok(collect(runs, "a run failed").await)
}

/// Claims the oldest approved task (moves it to `in_progress`); `None` when no approved
/// task is left. A task another runner claimed first is skipped.
async fn claim_next(store: &dyn Store) -> Result<Option<Task>> {
    const PAGE: u32 = 16;
    let clock = SystemClock;
    let mut after = i64::MIN;
    loop {
        let page = store
            .tasks_page(Some(&QueueStatus::Approved), after, PAGE)
            .await?;
        let Some(last) = page.last() else {
            return Ok(None);
        };
        after = last.id;
        for task in page {
            // A dispatched worker task is run by its `executor dispatch` alone.
            if task.source.as_deref() == Some(DISPATCH) {
                continue;
            }
            // A subtask starts only when the subtasks it depends on are complete.
            let unmet = store.unmet_dependencies(&task.task_gid).await?;
            if !unmet.is_empty() {
                tracing::debug!(gid = %task.task_gid, waits_for = ?unmet, "a subtask waits for its dependencies");
                continue;
            }
            match queue_ops::apply(
                store,
                &clock,
                &task.task_gid,
                QueueEvent::RunStarted,
                "runner",
                None,
            )
            .await
            {
                Ok(_) => return Ok(Some(task)),
                Err(queue_ops::QueueOpError::Illegal { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Carries one claimed task (already `in_progress`) through a new run; `slot` is the
/// worker slot its first worker takes. `None` when another runner claimed the run
/// meanwhile (this one stood down).
async fn drive(
    runner: &Runner,
    task: Task,
    slot: tokio::sync::OwnedSemaphorePermit,
) -> Result<Option<RunResult>> {
    let (store, adapter, prompts, settings) = (
        runner.store.as_ref(),
        &runner.adapter,
        runner.prompts.as_ref(),
        runner.settings.as_ref(),
    );
    let clock = SystemClock;
    let gid = task.task_gid.clone();
    let mut run = store.create_run(&gid, clock.now()).await?;
    let run_id = run.id;
    // A new run is nobody else's; the lease tells other runners so.
    run.lease_epoch = store
        .take_lease(
            run_id,
            &runner.holder.id(),
            clock.now(),
            lease_until(),
            None,
        )
        .await?
        .context("another runner holds the lease of a run just created")?;
    let started = async {
        let mut run = run;
        let wt = prepare_worktree(store, settings, &task).await?;
        tracing::info!(gid = %gid, run = run.id, branch = %wt.branch, worktree = %wt.path.display(), "run started");
        if settings.worktrees {
            run.worktree_path = Some(wt.path.display().to_string());
            run.branch_name = Some(wt.branch.clone());
        }
        move_run(store, &mut run, RunEvent::WorkerStarted).await?;
        if conduct::needs_split(store, settings, &task).await? {
            let _planner = slot;
            return conduct::decompose(store, adapter, prompts, settings, task, run, wt, None)
                .await;
        }
        run.lifecycle = Some(lifecycle::RunView::default());
        let start = Start {
            slot: Some(slot),
            ..Start::new(lifecycle::Event::Begin)
        };
        carry(runner, task, run, wt, start).await
    }
    .await;
    release_run(store, &runner.holder, run_id).await;
    settle(store, &runner.settings.notices, run_id, &gid, started).await
}

/// How a carried run's pass ends: a run another runner claimed meanwhile is left to it
/// (`None`, nothing written); one that failed for a reason no worker can fix is abandoned.
async fn settle(
    store: &dyn Store,
    notices: &crate::chat::Notices,
    run_id: i64,
    gid: &str,
    carried: Result<RunResult>,
) -> Result<Option<RunResult>> {
    match carried {
        Ok(result) => Ok(Some(result)),
        Err(error) if fenced(&error) => {
            tracing::warn!(gid = %gid, run = run_id, "the run was claimed elsewhere (the owner cancelled it, or another runner took it over); this runner stopped its worker and stands down");
            Ok(None)
        }
        Err(error) => {
            give_up(store, notices, run_id, gid, &format!("{error:#}")).await;
            Err(error)
        }
    }
}

/// A run that failed for a reason no worker can fix (its worktree cannot be made, its
/// verification cannot start, the store failed) is abandoned rather than left looking
/// alive; best effort, since the store itself may be what failed.
async fn give_up(
    store: &dyn Store,
    notices: &crate::chat::Notices,
    run_id: i64,
    gid: &str,
    why: &str,
) {
    let Ok(runs) = store.runs(Some(gid)).await else {
        return;
    };
    let Some(mut run) = runs.into_iter().find(|r| r.id == run_id) else {
        return;
    };
    if run.state.is_active() {
        if let Err(error) = abandon(store, notices, &mut run, gid, why).await {
            tracing::error!(gid = %gid, run = run_id, error = format!("{error:#}"), "cannot abandon a failed run");
        }
    }
}

async fn prepare_worktree(
    store: &dyn Store,
    settings: &RunnerSettings,
    task: &Task,
) -> Result<worktree::Worktree> {
    if !settings.worktrees {
        return Ok(worktree::Worktree {
            path: settings.repository.clone(),
            branch: String::new(),
            reused: true,
            moved_aside: None,
        });
    }
    let branch = worktree::branch_name(&settings.branch_prefix, &task.task_gid, &task.title());
    let (repo, dir, base) = (
        settings.repository.clone(),
        settings.worktrees_dir.clone(),
        conduct::base_for(store, settings, task).await?,
    );
    Ok(
        tokio::task::spawn_blocking(move || worktree::ensure(&repo, &dir, &branch, &base))
            .await??,
    )
}

/// Where [`carry`] starts a run's next worker.
/// How a runner takes a run up.
struct Start {
    /// The lifecycle event the run is carried on from.
    event: lifecycle::Event,
    /// Continue the agent's session with no new prompt: the agent re-asks about the tool
    /// call it parked (its hook now finds the owner's answer).
    continue_parked: bool,
    /// A worker slot already taken for the run's next worker.
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Start {
    fn new(event: lifecycle::Event) -> Self {
        Self {
            event,
            continue_parked: false,
            slot: None,
        }
    }

    /// What the next worker (or a goal's planner) is told about why it starts.
    fn reason(&self) -> Option<String> {
        match &self.event {
            lifecycle::Event::Resumed { reason }
            | lifecycle::Event::Answered(lifecycle::Answer::Continue { reason }) => {
                Some(reason.clone())
            }
            _ => None,
        }
    }
}

/// Whether `error` says the run's lease was claimed by another runner: this runner then
/// writes nothing more for the run (not even its abandonment).
fn fenced(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<crate::store::StoreError>(),
            Some(crate::store::StoreError::Fenced { .. })
        )
    })
}

/// The source of tasks `executor dispatch` creates.
pub const DISPATCH: &str = "dispatch";

pub use lifecycle::{DECLINED_BY_OWNER, DENIED_BY_CONTRACT};

/// How many of a run's latest messages an escalation shows the owner.
pub const MESSAGE_WINDOW: u32 = 20;

/// Opens the escalation for what a worker left to the owner (or finds the one its hook
/// already opened for a parked tool call), tells the owner, and returns its id.
async fn open_escalation(
    store: &dyn Store,
    adapter: &Adapter,
    settings: &RunnerSettings,
    run: &Run,
    gid: &str,
    asked: &Asked,
) -> Result<i64> {
    let window = store.messages(run.id, settings.window).await?;
    let window_json = serde_json::to_string(&window)?;
    let existing = match asked {
        Asked::DeferredTool(tool) => store
            .run_escalations(run.id)
            .await?
            .into_iter()
            .find(|e| e.is_pending() && e.tool_use_id.as_deref() == Some(tool.id.as_str())),
        Asked::Message(_) => None,
    };
    let escalation = match existing {
        Some(found) => found,
        None => {
            let (action, detail, tool_use_id) = match asked {
                Asked::Message(line) => (escalation_kind(line).to_string(), line.clone(), None),
                Asked::DeferredTool(tool) => (
                    format!("tool:{}", tool.name),
                    serde_json::json!({"tool_name": tool.name, "tool_input": tool.input})
                        .to_string(),
                    Some(tool.id.clone()),
                ),
            };
            store
                .record_decision(&crate::core::record::NewDecision {
                    task_gid: Some(gid.to_string()),
                    run_id: Some(run.id),
                    at: Utc::now(),
                    role: "worker".to_string(),
                    action,
                    decision: "escalate".to_string(),
                    rule_id: None,
                    detail: Some(detail),
                    tool_use_id,
                    message_window: Some(window_json),
                    // The run's worker ran in this pass, enclosed by this process's wall,
                    // which confines every worker or none.
                    confined: Some(settings.wall.is_confined()),
                })
                .await?
        }
    };
    if let Some(judge) = settings.judge.as_ref().filter(|j| j.wants(&escalation)) {
        if judged_deny(store, adapter, settings, judge, gid, &escalation, &window).await {
            return Ok(escalation.id);
        }
    }
    settings
        .notices
        .tell(
            store,
            crate::chat::text::escalation(settings.notices.routing(), &escalation, &window),
        )
        .await;
    Ok(escalation.id)
}

/// Who the judge's answers are recorded as.
const JUDGE: &str = "model judge";

/// Denials by the judge a run may get before its questions go to the owner directly.
const MAX_JUDGE_DENIALS: usize = 2;

/// Asks the model judge about `escalation`; true when it denied it (recorded as the
/// answer, so the run resumes with the denial). A judge that fails leaves the question to
/// the owner.
async fn judged_deny(
    store: &dyn Store,
    adapter: &Adapter,
    settings: &RunnerSettings,
    judge: &crate::runner::judge::JudgeSettings,
    gid: &str,
    escalation: &crate::core::record::Decision,
    window: &[crate::core::record::StoredMessage],
) -> bool {
    use crate::runner::judge::{self, Verdict};
    // A worker that keeps asking after the judge's denials gets the owner, not a loop.
    let denied_before = match escalation.run_id {
        Some(run_id) => store
            .run_escalations(run_id)
            .await
            .map(|all| {
                all.iter()
                    .filter(|e| e.resolved_by.as_deref() == Some(JUDGE))
                    .count()
            })
            .unwrap_or(usize::MAX),
        None => 0,
    };
    if denied_before >= MAX_JUDGE_DENIALS {
        tracing::info!(gid = %gid, escalation = escalation.id, "the model judge already denied this run's questions {MAX_JUDGE_DENIALS} times; the owner decides");
        return false;
    }
    let dir = settings
        .logs_dir
        .join(gid)
        .join(format!("judge-{}", escalation.id));
    let verdict = match judge::prompt(escalation, window) {
        Ok(prompt) => {
            judge::ask(
                adapter,
                judge,
                worker_env(adapter, settings),
                &dir,
                prompt,
                &settings.wall,
                format!("judge-{}", escalation.id),
            )
            .await
        }
        Err(error) => Err(error),
    };
    match verdict {
        Ok(Verdict::Deny(reason)) => {
            match store
                .resolve_escalation(escalation.id, "deny", Some(&reason), JUDGE, Utc::now())
                .await
            {
                Ok(_) => {
                    tracing::info!(gid = %gid, escalation = escalation.id, %reason, "the model judge denied the escalation; the run resumes with the denial");
                    settings
                        .notices
                        .tell(
                            store,
                            crate::chat::Notice::orchestrator(
                                crate::core::outbox::Priority::Info,
                                gid.to_string(),
                                escalation.run_id,
                                format!(
                                    "The model judge denied escalation {} (`{}`): {reason}",
                                    escalation.id, escalation.action
                                ),
                            ),
                        )
                        .await;
                    true
                }
                Err(error) => {
                    tracing::error!(gid = %gid, escalation = escalation.id, %error, "cannot record the judge's denial; the owner decides");
                    false
                }
            }
        }
        Ok(Verdict::LeaveToOwner(why)) => {
            tracing::info!(gid = %gid, escalation = escalation.id, %why, "the model judge left the escalation to the owner");
            false
        }
        Err(error) => {
            tracing::warn!(gid = %gid, escalation = escalation.id, error = format!("{error:#}"), "the model judge failed; the owner decides");
            false
        }
    }
}

/// The environment every agent process starts with: nothing inherited but `PATH`, `HOME`,
/// `LANG`, `TERM`, `TMPDIR`, the variables `agent.env` names, and the adapter's fixed ones.
fn worker_env(adapter: &Adapter, settings: &RunnerSettings) -> HashMap<String, String> {
    agent_env(adapter, &settings.agent.env)
}

/// The environment an agent process gets: a few basics, the variables `[agent] env`
/// names, and the adapter's own settings. Nothing else of this process's environment (its
/// tokens above all) reaches it.
pub fn agent_env(adapter: &Adapter, allowed: &[String]) -> HashMap<String, String> {
    let mut env: HashMap<String, String> = HashMap::new();
    for key in ["PATH", "HOME", "LANG", "TERM", "TMPDIR"] {
        if let Ok(value) = std::env::var(key) {
            env.insert(key.to_string(), value);
        }
    }
    for key in allowed {
        if let Ok(value) = std::env::var(key) {
            env.insert(key.clone(), value);
        }
    }
    for (key, value) in adapter.fixed_env() {
        env.insert((*key).to_string(), (*value).to_string());
    }
    env
}

/// `needs_decision` of `[ESCALATE:needs_decision] …`.
fn escalation_kind(line: &str) -> &str {
    line.strip_prefix("[ESCALATE:")
        .and_then(|rest| rest.split_once(']'))
        .map(|(kind, _)| kind)
        .unwrap_or("escalate")
}

/// Resumes every run whose escalation the owner has answered, each exactly once (the
/// store's compare-and-set on `applied_at`), as soon as a worker slot is free.
pub async fn resume_decided(runner: &Runner) -> Result<Passed> {
    let store = runner.store.as_ref();
    let mut runs = tokio::task::JoinSet::new();
    for escalation in store.answered_escalations().await? {
        let Some(run_id) = escalation.run_id else {
            continue;
        };
        let Some(gid) = escalation.task_gid.clone() else {
            continue;
        };
        let Some(mut run) = store
            .runs(Some(&gid))
            .await?
            .into_iter()
            .find(|r| r.id == run_id)
        else {
            continue;
        };
        if run.state != RunState::InProgress {
            continue;
        }
        let Some(task) = store.task(&gid).await? else {
            continue;
        };
        let permit = Arc::clone(&runner.slots).acquire_owned().await?;
        let Some(epoch) = take_run(store, &runner.holder, run_id).await? else {
            continue;
        };
        run.lease_epoch = epoch;
        if !store.apply_escalation(escalation.id, Utc::now()).await? {
            release_run(store, &runner.holder, run_id).await;
            continue;
        }
        let resolution = escalation.resolution.clone().unwrap_or_default();
        let note = escalation
            .resolution_note
            .as_deref()
            .map(|n| format!(" Their note: {n}"))
            .unwrap_or_default();
        tracing::info!(gid = %gid, run = run_id, escalation = escalation.id, %resolution, "resuming a run with the owner's decision");
        let parked = escalation.tool_use_id.is_some()
            && run.worker_session_id.is_some()
            && matches!(runner.adapter, Adapter::Claude { .. });
        let gate =
            [review::INTEGRATE, review::REVIEW_EXHAUSTED].contains(&escalation.action.as_str());
        let answer = match (gate, escalation.resolution.as_deref()) {
            (true, Some("approve")) => lifecycle::Answer::Integrate,
            (true, _) => lifecycle::Answer::Decline,
            (false, _) => lifecycle::Answer::Continue {
                reason: format!(
                    "The owner answered your escalation ({}: {}): {resolution}.{note}",
                    escalation.action,
                    escalation.detail.as_deref().unwrap_or("")
                ),
            },
        };
        // The answer is what the run waits on, whatever stage an older executor (or the
        // hook, for a parked tool call) left in its view.
        run.lifecycle = Some(lifecycle::RunView {
            stage: lifecycle::Stage::WaitingOnOwner {
                escalation: escalation.id,
            },
            ..view_of(&run)
        });
        let start = Start {
            event: lifecycle::Event::Answered(answer),
            continue_parked: parked,
            slot: Some(permit),
        };
        runs.spawn(continue_run(
            runner.clone(),
            task,
            run,
            start,
            "resumed run",
        ));
    }
    Ok(collect(runs, "a resumed run failed").await)
}

/// Carries an existing run on from `start` in its worktree (its lease already taken).
/// `what` names the task in errors.
async fn continue_run(
    r: Runner,
    task: Task,
    run: Run,
    mut start: Start,
    what: &'static str,
) -> Result<Option<RunResult>> {
    let gid = task.task_gid.clone();
    let run_id = run.id;
    let carried = async {
        let wt = prepare_worktree(r.store.as_ref(), &r.settings, &task).await?;
        // A goal still to be split goes back to its planner (told the owner's answer, or
        // why it stopped), never to a worker that would do the whole goal at once.
        if conduct::needs_split(r.store.as_ref(), &r.settings, &task).await? {
            let _planner = match start.slot.take() {
                Some(held) => held,
                None => Arc::clone(&r.slots).acquire_owned().await?,
            };
            return conduct::decompose(
                r.store.as_ref(),
                &r.adapter,
                &r.prompts,
                &r.settings,
                task,
                run,
                wt,
                start.reason(),
            )
            .await;
        }
        carry(&r, task, run, wt, start).await
    }
    .await;
    release_run(r.store.as_ref(), &r.holder, run_id).await;
    settle(r.store.as_ref(), &r.settings.notices, run_id, &gid, carried)
        .await
        .with_context(|| format!("{what} of task {gid}"))
}

/// Pushes the run's branch and opens its draft PR (once: a run that has one keeps it),
/// labels it, and moves the run to `pr`. The PR is an intent written before it is sent
/// (`opening`): a GitHub failure leaves the run `in_progress` with its branch pushed, and
/// the PR tick opens it later (or asks the owner after `max_effect_failures` tries).
async fn open_pr(
    store: &dyn Store,
    github: &GithubForge,
    settings: &RunnerSettings,
    task: &Task,
    run: &mut Run,
    wt: &worktree::Worktree,
    worked: &Worked,
) -> Result<Option<Asked>> {
    if let Some(asked) = push(settings, &wt.path, &github.remote, &wt.branch, worked).await? {
        return Ok(Some(asked));
    }
    // The push moved the PR's head: no cached look at it is current any more.
    github.client.expire_cache();
    let tried = if run.pr_number.is_none() {
        let summary = worked
            .done
            .as_deref()
            .and_then(|line| line.split_once(']').map(|(_, rest)| rest.trim()))
            .unwrap_or("");
        let body = format!(
            "{}\n\n---\nTask `{}` ({}), run {} of executor.{}",
            crate::core::task::body_of(task.description.as_deref().unwrap_or("")).trim(),
            task.task_gid,
            task.source.as_deref().unwrap_or("unknown source"),
            run.id,
            if summary.is_empty() {
                String::new()
            } else {
                format!("\n\nThe worker's summary: {summary}")
            }
        );
        let opening = crate::core::pr::Opening {
            title: task.title(),
            head: wt.branch.clone(),
            base: settings.base_branch.clone(),
            body,
        };
        opening::decide(store, github, run, opening).await?
    } else {
        let memory = opening::memory_of_run(store, run.id).await?;
        opening::try_open(store, github, run, memory).await?
    };
    if let opening::Tried::Failed {
        error, failures, ..
    } = tried
    {
        tracing::warn!(gid = %task.task_gid, run = run.id, branch = %wt.branch, failures, %error, "cannot open the draft PR now; the run stays in progress with its branch pushed, and the PR tick tries again");
    }
    Ok(None)
}

/// `git push <remote> HEAD:refs/heads/<branch>` from the worktree, as the orchestrator (its
/// credentials come from the owner's git setup; the worker never pushes). Nothing is
/// pushed when the repository's git data changed since `worked`'s worker started: the
/// escalation for the owner instead.
async fn push(
    settings: &RunnerSettings,
    worktree: &Path,
    remote: &str,
    branch: &str,
    worked: &Worked,
) -> Result<Option<Asked>> {
    if settings.worktrees {
        if let Some(asked) = tampered(worked.baseline.as_ref()).await? {
            return Ok(Some(asked));
        }
    }
    let git = orchestrator_git(settings, worktree)?;
    let (remote, refspec) = (remote.to_string(), format!("HEAD:refs/heads/{branch}"));
    tokio::task::spawn_blocking(move || git.push(&remote, &refspec))
        .await?
        .with_context(|| format!("cannot push {branch}"))?;
    Ok(None)
}

/// Whether some run waits only for a free slot to take the owner's answer.
pub async fn has_decided(store: &dyn Store) -> Result<bool> {
    Ok(store
        .answered_escalations()
        .await?
        .iter()
        .any(|e| e.run_id.is_some()))
}

/// The owner's limits, as the lifecycle of run `run_id` judges by them.
fn rules(settings: &RunnerSettings, run_id: i64) -> lifecycle::Rules {
    lifecycle::Rules {
        max_worker_attempts: settings.max_worker_attempts,
        max_ci_attempts: settings.max_ci_attempts,
        // On GitHub the PR's own review (`pr_review`) is the review.
        review_rounds: if settings.github.is_none() {
            settings.conductor.review_rounds
        } else {
            0
        },
        retry_base: settings.retry_base,
        run_id,
    }
}

/// The phase (and prompt) of a worker the lifecycle starts.
fn phase_of(work: lifecycle::Work) -> Phase {
    match work {
        lifecycle::Work::Start => Phase::Queued,
        lifecycle::Work::Resume => Phase::InProgress,
        lifecycle::Work::FixCi => Phase::FixCi,
    }
}

/// The view of a run from before executor kept one: working, with the counters its
/// columns hold.
fn view_of(run: &Run) -> lifecycle::RunView {
    run.lifecycle.clone().unwrap_or_else(|| lifecycle::RunView {
        stage: lifecycle::Stage::Working {
            work: lifecycle::Work::Resume,
        },
        ci_attempts: u32::try_from(run.ci_attempts).unwrap_or(0),
        stuck: u32::try_from(run.worker_stuck_count).unwrap_or(0),
        ..lifecycle::RunView::default()
    })
}

/// A run being carried: what its actions need between one step and the next.
struct Carried<'a> {
    r: &'a Runner,
    task: Task,
    run: Run,
    wt: worktree::Worktree,
    /// A worker slot taken for the next worker (the run's first, or a resumed one's).
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
    continue_parked: bool,
    /// The last worker, whose snapshot of the repository the orchestrator checks before
    /// it commits.
    worked: Option<Worked>,
    /// What the last worker (or the orchestrator's check) left for the owner.
    asked: Option<Asked>,
    waiting_on: Option<i64>,
}

/// Carries a claimed run from `start` by its lifecycle: the lifecycle decides each next
/// action (`core::lifecycle`), the view is stored, the action is performed here, and its
/// outcome is the next event. Returns when the run ends or waits on something outside (the
/// owner, its PR). A worker holds one of the runner's slots only while it lives.
async fn carry(
    r: &Runner,
    task: Task,
    run: Run,
    wt: worktree::Worktree,
    start: Start,
) -> Result<RunResult> {
    let rules = rules(&r.settings, run.id);
    let mut event = start.event;
    let mut c = Carried {
        r,
        task,
        run,
        wt,
        slot: start.slot,
        continue_parked: start.continue_parked,
        worked: None,
        asked: None,
        waiting_on: None,
    };
    loop {
        let (view, action) = lifecycle::decide(&view_of(&c.run), event, &rules, Utc::now())?;
        tracing::debug!(gid = %c.task.task_gid, run = c.run.id, stage = view.stage_name(), ?action, "lifecycle");
        c.save(view).await?;
        event = match action {
            lifecycle::Action::StartWorker { work, attempt } => {
                c.start_worker(work, attempt).await?
            }
            lifecycle::Action::WaitUntil(until) => c.wait_until(until).await?,
            lifecycle::Action::Verify => c.verify().await?,
            lifecycle::Action::Review { round } => c.review(round).await?,
            lifecycle::Action::Integrate => c.integrate().await?,
            lifecycle::Action::AskOwner { ask, commit_first } => {
                c.ask_owner(ask, commit_first).await?
            }
            lifecycle::Action::Abandon { reason } => {
                let gid = c.task.task_gid.clone();
                abandon(
                    c.r.store.as_ref(),
                    &c.r.settings.notices,
                    &mut c.run,
                    &gid,
                    &reason,
                )
                .await?;
                break;
            }
            lifecycle::Action::Wait => break,
        };
    }
    Ok(RunResult {
        task_gid: c.task.task_gid,
        run_id: c.run.id,
        state: c.run.state.clone(),
        ci_attempts: c.run.ci_attempts,
        waiting_on: c.waiting_on,
    })
}

/// The lifecycle's event for a worker that ended.
fn ended(worked: &Worked) -> lifecycle::Event {
    lifecycle::Event::WorkerEnded {
        done: worked.done.is_some(),
        asked: worked.asked.is_some(),
        no_output: worked.stopped == Some(StopReason::NoOutput),
        // A model API that refused the request refuses the next worker too.
        retryable: lifecycle::retryable_api_status(
            worked.result["agent_result"]["api_error_status"]
                .as_u64()
                .and_then(|status| u16::try_from(status).ok()),
        ),
        why: worked.why.clone(),
    }
}

impl Carried<'_> {
    /// Stores the run with its new lifecycle `view` (and the owner's columns it mirrors).
    async fn save(&mut self, view: lifecycle::RunView) -> Result<()> {
        self.run.ci_attempts = i64::from(view.ci_attempts);
        self.run.worker_stuck_count = i64::from(view.stuck);
        self.run.lifecycle = Some(view);
        self.run.updated_at = Utc::now();
        let (store, run) = (self.r.store.as_ref(), &self.run);
        patience::durably("the run's lifecycle", run.id, || async {
            Ok(store.save_run(run).await?)
        })
        .await
    }

    /// The slot held for the next worker, or a free one (waited for).
    async fn slot(&mut self) -> Result<tokio::sync::OwnedSemaphorePermit> {
        Ok(match self.slot.take() {
            Some(held) => held,
            None => Arc::clone(&self.r.slots).acquire_owned().await?,
        })
    }

    async fn start_worker(
        &mut self,
        work: lifecycle::Work,
        attempt: u32,
    ) -> Result<lifecycle::Event> {
        let slot = self.slot().await?;
        let (r, gid, phase) = (self.r, self.task.task_gid.clone(), phase_of(work));
        let prompt = if std::mem::take(&mut self.continue_parked) {
            String::new()
        } else {
            prompt_for(r, &self.task, &self.run, &self.wt, phase, attempt).await?
        };
        let done = self::work(
            r.store.as_ref(),
            &r.adapter,
            &r.settings,
            &mut self.run,
            &gid,
            phase,
            &self.wt.path,
            prompt,
        )
        .await?;
        drop(slot);
        write_run_record(&r.settings, &gid, self.run.id, phase, &self.wt.path, &done).await?;
        if done.done.is_none() && done.asked.is_none() {
            tracing::warn!(gid = %gid, run = self.run.id, why = %done.why, "worker ended without [DONE]");
        }
        let event = ended(&done);
        self.asked = done.asked.clone();
        self.worked = Some(done);
        Ok(event)
    }

    /// Waits out a back-off holding no slot, in short steps, so a cancel (or a takeover)
    /// is noticed within a second.
    async fn wait_until(&mut self, until: chrono::DateTime<Utc>) -> Result<lifecycle::Event> {
        tracing::info!(gid = %self.task.task_gid, run = self.run.id, until = %until, "waiting before the next worker (holding no worker slot)");
        drop(self.slot.take());
        loop {
            let left = (until - Utc::now()).to_std().unwrap_or_default();
            if left.is_zero() {
                return Ok(lifecycle::Event::RetryDue);
            }
            tokio::time::sleep(left.min(CLAIM_CHECK)).await;
            if !claim::still_ours(self.r.store.as_ref(), &self.run).await? {
                return Err(crate::store::StoreError::Fenced {
                    run_id: self.run.id,
                }
                .into());
            }
        }
    }

    async fn verify(&mut self) -> Result<lifecycle::Event> {
        let (r, gid) = (self.r, &self.task.task_gid);
        let verdict = verify(
            r.store.as_ref(),
            &r.settings,
            self.run.id,
            gid,
            &self.wt.path,
        )
        .await?;
        if !verdict.passed {
            tracing::warn!(gid = %gid, run = self.run.id, "verification failed");
        }
        Ok(lifecycle::Event::Verified {
            failure: (!verdict.passed).then_some(lifecycle::Failure {
                summary: verdict.summary,
                excerpt: verdict.excerpt,
            }),
        })
    }

    async fn review(&mut self, round: u32) -> Result<lifecycle::Event> {
        let slot = self.slot().await?;
        let r = self.r;
        let reviewed = review::review(
            r.store.as_ref(),
            &r.adapter,
            &r.prompts,
            &r.settings,
            &self.task,
            &mut self.run,
            &self.wt,
            round,
            self.worked.as_ref().and_then(|w| w.baseline.as_ref()),
        )
        .await?;
        drop(slot);
        Ok(match reviewed {
            review::Reviewed::Accepted => lifecycle::Event::ReviewAccepted {
                gate: match review::integration(&r.settings, &self.task.task_gid, &self.run) {
                    crate::policy::Decision::Approve => lifecycle::Gate::Approve,
                    crate::policy::Decision::Deny => lifecycle::Gate::Deny,
                    crate::policy::Decision::Escalate => lifecycle::Gate::Escalate,
                },
            },
            review::Reviewed::Rejected(findings) => lifecycle::Event::ReviewRejected { findings },
            review::Reviewed::Asked(escalation) => {
                self.waiting_on = Some(escalation);
                lifecycle::Event::ReviewAsked { escalation }
            }
        })
    }

    async fn integrate(&mut self) -> Result<lifecycle::Event> {
        let r = self.r;
        let (event, stopped) = integrate(
            r.store.as_ref(),
            &r.settings,
            &self.task,
            &mut self.run,
            &self.wt,
            self.worked.as_ref(),
        )
        .await?;
        if stopped.is_some() {
            self.asked = stopped;
        }
        Ok(event)
    }

    /// Opens the escalation for `ask` (committing the reviewed change first when
    /// `commit_first`, unless the repository's git data changed: then that is asked).
    async fn ask_owner(
        &mut self,
        ask: lifecycle::Ask,
        commit_first: bool,
    ) -> Result<lifecycle::Event> {
        let (r, gid) = (self.r, self.task.task_gid.clone());
        let mut question = match ask {
            lifecycle::Ask::Worker => self
                .asked
                .take()
                .context("the lifecycle asks the owner about a worker's question that is gone")?,
            lifecycle::Ask::ReviewExhausted {
                rejections,
                findings,
            } => Asked::Message(format!(
                "[ESCALATE:{}] the review rejected the diff {rejections} time(s); approve integrates it as it is, deny abandons it. The last findings: {}",
                review::REVIEW_EXHAUSTED,
                findings.replace('\n', " ")
            )),
            lifecycle::Ask::Integrate => Asked::Message(format!(
                "[ESCALATE:{}] the reviewed diff of run {} is ready to integrate; `executor go {gid}` integrates it",
                review::INTEGRATE,
                self.run.id
            )),
        };
        if commit_first && r.settings.worktrees {
            let baseline = self.worked.as_ref().and_then(|w| w.baseline.as_ref());
            if let Some(stopped) = commit_checked(
                &r.settings,
                &self.wt.path,
                &self.task,
                self.run.id,
                baseline,
            )
            .await?
            {
                question = stopped;
            }
        }
        let escalation = open_escalation(
            r.store.as_ref(),
            &r.adapter,
            &r.settings,
            &self.run,
            &gid,
            &question,
        )
        .await?;
        self.waiting_on = Some(escalation);
        Ok(lifecycle::Event::Escalated { escalation })
    }
}

/// The prompt of a `phase` worker of the run, with the lifecycle's reason and failure.
async fn prompt_for(
    r: &Runner,
    task: &Task,
    run: &Run,
    wt: &worktree::Worktree,
    phase: Phase,
    attempt: u32,
) -> Result<String> {
    let settings = r.settings.as_ref();
    let view = view_of(run);
    let mut ctx = PromptContext::new(
        phase,
        TaskContext::from_task(task),
        RunContext {
            id: run.id,
            branch: wt.branch.clone(),
            base_branch: settings.base_branch.clone(),
            worktree: wt.path.display().to_string(),
            pr_url: None,
            pr_number: None,
            ci_attempts: run.ci_attempts,
            worker_stuck_count: run.worker_stuck_count,
        },
    );
    ctx.attempt = attempt;
    ctx.ci = view.failure.map(|failure| CiFailure {
        checks: vec![FailedCheck {
            name: "verify".to_string(),
            summary: failure.summary,
        }],
        failing_step: Some(settings.verify.join(" ")),
        log_excerpt: failure.excerpt,
        run_url: None,
    });
    ctx.resume_reason = view.reason;
    ctx.messages = r
        .store
        .messages(run.id, settings.window)
        .await?
        .into_iter()
        .map(|m| crate::prompts::PromptMessage {
            at: m.at,
            from: m.source,
            text: m.line,
        })
        .collect();
    Ok(r.prompts.render(phase, &ctx)?)
}

/// Commits the verified (and reviewed) change, then opens its PR or completes the run on
/// the local forge; the event for the lifecycle, and what stopped it for the owner.
async fn integrate(
    store: &dyn Store,
    settings: &RunnerSettings,
    task: &Task,
    run: &mut Run,
    wt: &worktree::Worktree,
    worked: Option<&Worked>,
) -> Result<(lifecycle::Event, Option<Asked>)> {
    // Without a worker of this pass the change was committed before the owner was asked
    // (the review gate); nothing newer is committed without a snapshot to check against.
    if let (true, Some(worked)) = (settings.worktrees, worked) {
        if let Some(asked) = commit(settings, &wt.path, task, run.id, worked).await? {
            return Ok((lifecycle::Event::IntegrationAsked, Some(asked)));
        }
    }
    if let Some(asked) = unchanged(store, settings, task, wt).await? {
        return Ok((lifecycle::Event::IntegrationAsked, Some(asked)));
    }
    if let Some(github) = &settings.github {
        let worked = worked.context("a PR is opened only for a worker's verified change")?;
        if let Some(asked) = open_pr(store, github, settings, task, run, wt, worked).await? {
            return Ok((lifecycle::Event::IntegrationAsked, Some(asked)));
        }
        // Opened, or left to the PR tick as an intent GitHub has not taken yet.
        return Ok(if run.state == RunState::Pr {
            (lifecycle::Event::PrOpened, None)
        } else {
            (lifecycle::Event::PrPending, None)
        });
    }
    Ok(
        match complete_local(store, settings, task, run, wt).await? {
            None => (lifecycle::Event::Completed, None),
            // Merged into the parent, the suites failed: undone, back to the worker (and its
            // review), counted like a failed verification.
            Some(reason) => (lifecycle::Event::IntegrationFailed { reason }, None),
        },
    )
}

/// The kind of the escalation a run whose branch carries no change opens.
pub const NO_CHANGE: &str = "no_change";

/// The owner's question when the run's branch has no commit beyond its base after the
/// commit step: a worker that changed nothing did not do the task, so the run never
/// completes as done on its own word. Without worktrees there is no branch to look at.
async fn unchanged(
    store: &dyn Store,
    settings: &RunnerSettings,
    task: &Task,
    wt: &worktree::Worktree,
) -> Result<Option<Asked>> {
    if !settings.worktrees {
        return Ok(None);
    }
    let base = conduct::base_for(store, settings, task).await?;
    let git = orchestrator_git(settings, &wt.path)?;
    let probe = base.clone();
    let ahead = tokio::task::spawn_blocking(move || git.commits_ahead(&probe)).await??;
    Ok((ahead == 0).then(|| {
        Asked::Message(format!(
            "[ESCALATE:{NO_CHANGE}] the worker changed nothing: branch {} is the same as {base}. Answer with what it should do (its next worker reads it), or `executor cancel {}` to abandon the run.",
            wt.branch, task.task_gid
        ))
    }))
}

/// Whether a finished run's worktree has been kept long enough to be removed.
pub fn worktree_expired(run: &Run, now: chrono::DateTime<Utc>, keep: Duration) -> bool {
    let finished = matches!(run.state, RunState::Complete | RunState::Abandoned);
    let ended = run.completed_at.unwrap_or(run.updated_at);
    let keep = chrono::Duration::from_std(keep).unwrap_or(chrono::Duration::MAX);
    finished && run.worktree_path.is_some() && now - ended >= keep
}

/// Removes the worktrees of finished runs kept longer than `keep_worktrees` (the branches
/// stay). Returns how many were removed.
pub async fn clean_worktrees(store: &dyn Store, settings: &RunnerSettings) -> Result<usize> {
    let now = Utc::now();
    let mut removed = 0;
    let runs = store.runs(None).await?;
    for run in &runs {
        if !worktree_expired(run, now, settings.keep_worktrees) {
            continue;
        }
        // A later run of the same task works in the same place: its worktree is not ours.
        if runs
            .iter()
            .any(|other| other.id > run.id && other.worktree_path == run.worktree_path)
        {
            continue;
        }
        let Some(path) = run.worktree_path.as_deref().map(PathBuf::from) else {
            continue;
        };
        if !path.exists() {
            continue;
        }
        let repo = settings.repository.clone();
        let target = path.clone();
        match tokio::task::spawn_blocking(move || worktree::remove(&repo, &target)).await? {
            Ok(()) => {
                removed += 1;
                tracing::info!(run = run.id, worktree = %path.display(), "removed a finished run's worktree");
            }
            Err(error) => {
                tracing::warn!(run = run.id, %error, "cannot remove a finished run's worktree")
            }
        }
    }
    Ok(removed)
}

/// This machine's name, as worker records carry it.
pub fn host() -> String {
    gethostname::gethostname().to_string_lossy().into_owned()
}

/// Reconciles what a runner that died (killed, crashed, the machine rebooted, or frozen
/// past its lease) left behind on this host. Only runs whose lease is free, expired or
/// held by a dead runner are touched, and only the workers recorded for them: each still
/// alive (the same pid *and* start time: a reused pid is never touched) is stopped with
/// its whole group; a live runner's workers and runs are left alone. Each such run left
/// `in_progress` is then claimed (a new lease epoch, so the runner that left it writes
/// nothing more) and carried on from its stored stage in its worktree. Call it at start,
/// with the runner lock held, before any new run starts.
pub async fn recover(runner: &Runner) -> Result<Passed> {
    let Runner {
        store, settings, ..
    } = runner;
    for worker in store.open_workers(&host()).await? {
        if carried_by_live_runner(store.as_ref(), &runner.holder, worker.run_id).await? {
            continue;
        }
        let Ok(pid) = u32::try_from(worker.pid) else {
            continue;
        };
        let outcome = if stop_recorded(&worker, settings.grace).await {
            tracing::warn!(
                run = worker.run_id,
                pid,
                "stopped a worker a previous runner left running"
            );
            "stopped at recovery: its runner had died or lost its lease"
        } else {
            "gone when its runner was recovered"
        };
        store.end_worker(worker.id, Utc::now(), outcome).await?;
    }

    let mut runs = tokio::task::JoinSet::new();
    for mut run in store.runs(None).await? {
        if run.state != RunState::InProgress {
            continue;
        }
        let Some(task) = store.task(&run.task_gid).await? else {
            continue;
        };
        if task.status != QueueStatus::InProgress {
            continue;
        }
        // A parent waits for its subtasks, holding no worker.
        if conduct::is_waiting_parent(store.as_ref(), &task.task_gid).await? {
            continue;
        }
        // This runner's own runs are carried already.
        if store
            .lease(run.id)
            .await?
            .is_some_and(|lease| lease.holder == runner.holder.id())
        {
            continue;
        }
        // A dispatched worker runs with its task file's tools and timeout, which only its
        // `executor dispatch` knows: an interrupted one ends here, to be dispatched again.
        if task.source.as_deref() == Some(DISPATCH) {
            if take_run(store.as_ref(), &runner.holder, run.id)
                .await?
                .is_some()
            {
                give_up(
                    store.as_ref(),
                    &settings.notices,
                    run.id,
                    &task.task_gid,
                    "its executor dispatch was interrupted; dispatch the task file again",
                )
                .await;
                release_run(store.as_ref(), &runner.holder, run.id).await;
            }
            continue;
        }
        // A run waiting for the owner is not stranded: the answer resumes it.
        if store
            .run_escalations(run.id)
            .await?
            .iter()
            .any(|e| e.applied_at.is_none())
        {
            continue;
        }
        // A run whose pushed branch waits for its draft PR is the PR tick's, not a worker's.
        if opening::opens_pr(store.as_ref(), run.id).await? {
            continue;
        }
        // On a shared queue another host's runner may be carrying it right now.
        let Some(epoch) = take_run(store.as_ref(), &runner.holder, run.id).await? else {
            continue;
        };
        run.lease_epoch = epoch;
        // A worker of a runner frozen past its lease was left running: gone before this
        // runner starts one in the same worktree.
        for worker in store.open_workers(&host()).await? {
            if worker.run_id == run.id {
                stop_recorded(&worker, settings.grace).await;
                store
                    .end_worker(
                        worker.id,
                        Utc::now(),
                        "stopped: its runner's lease was taken over",
                    )
                    .await?;
            }
        }
        tracing::info!(gid = %task.task_gid, run = run.id, stage = view_of(&run).stage_name(), "carrying on a run its runner left");
        let start = Start::new(lifecycle::Event::Resumed {
            reason: "the runner stopped while this run's worker was working".to_string(),
        });
        runs.spawn(continue_run(runner.clone(), task, run, start, "recovery"));
    }
    Ok(collect(runs, "a recovered run failed").await)
}

/// Whether a live runner other than `me` holds run `run_id`'s lease (its workers are its
/// own business).
async fn carried_by_live_runner(
    store: &dyn Store,
    me: &crate::core::lease::Holder,
    run_id: i64,
) -> Result<bool> {
    use crate::core::lease::{claim, Claim};
    let lease = store.lease(run_id).await?;
    if lease.as_ref().is_some_and(|l| l.holder == me.id()) {
        return Ok(true);
    }
    let alive = |h: &crate::core::lease::Holder| {
        h.start.is_some() && supervisor::group::start_time(h.pid) == h.start
    };
    Ok(matches!(
        claim(lease.as_ref(), me, Utc::now(), alive),
        Claim::Held { .. }
    ))
}

/// Stops a recorded worker's group if the worker (same pid and start time) or members of
/// its group still live; true when something was stopped.
async fn stop_recorded(worker: &WorkerRecord, grace: Duration) -> bool {
    let Ok(pid) = u32::try_from(worker.pid) else {
        return false;
    };
    // Never a group that is not a worker's: 0 is the caller's own, 1 is init's.
    if pid <= 1 {
        return false;
    }
    let alive = supervisor::group::start_time(pid).and_then(|t| i64::try_from(t).ok());
    let leader_is_ours = alive.is_some() && alive == worker.start_time;
    // A dead leader's group id stays taken while any member lives, so members of group
    // `pid` are still the worker's children.
    let children_left = alive.is_none() && !supervisor::group::members(pid).is_empty();
    if leader_is_ours || children_left {
        stop_leftover(pid, grace).await;
        true
    } else {
        false
    }
}

/// Waits for every run of a pass. A run that failed or panicked is counted, never allowed
/// to cut the others short.
async fn collect(
    mut runs: tokio::task::JoinSet<Result<Option<RunResult>>>,
    what: &'static str,
) -> Passed {
    let mut passed = Passed::default();
    while let Some(joined) = runs.join_next().await {
        match joined.map_err(anyhow::Error::from).and_then(|run| run) {
            Ok(Some(result)) => passed.results.push(result),
            Ok(None) => {}
            Err(error) => {
                tracing::error!(error = format!("{error:#}"), "{what}");
                passed.failed.push(format!("{error:#}"));
            }
        }
    }
    passed
}

/// TERM to a leftover worker's group, up to `grace` for it to go, then KILL.
async fn stop_leftover(pgid: u32, grace: Duration) {
    use nix::sys::signal::Signal;
    let _ = supervisor::group::signal_group(pgid, Signal::SIGTERM);
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline {
        if supervisor::group::members(pgid).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = supervisor::group::signal_group(pgid, Signal::SIGKILL);
}

async fn move_run(store: &dyn Store, run: &mut Run, event: RunEvent) -> Result<()> {
    run.state = next_state(&run.state, event)?;
    run.updated_at = Utc::now();
    store.save_run(run).await?;
    Ok(())
}

async fn abandon(
    store: &dyn Store,
    notices: &crate::chat::Notices,
    run: &mut Run,
    gid: &str,
    why: &str,
) -> Result<()> {
    move_run(store, run, RunEvent::Abandoned).await?;
    queue_ops::apply(
        store,
        &SystemClock,
        gid,
        QueueEvent::RunAbandoned,
        "runner",
        Some(why.to_string()),
    )
    .await?;
    tracing::error!(gid = %gid, run = run.id, %why, "run abandoned; the task is back for the owner's review");
    notices
        .tell_abandoned(
            store,
            crate::core::outbox::Priority::Action,
            gid,
            run.id,
            why,
        )
        .await;
    Ok(())
}

/// What a worker left for the owner to decide.
#[derive(Debug, Clone)]
enum Asked {
    /// An `[ESCALATE:kind] …` line.
    Message(String),
    /// A tool call the agent parked for a decision (Claude's `defer`).
    DeferredTool(crate::agents::ToolUse),
}

/// What one worker did.
struct Worked {
    done: Option<String>,
    asked: Option<Asked>,
    stopped: Option<StopReason>,
    why: String,
    /// The worker's record, as `result.json` keeps it.
    result: serde_json::Value,
    /// The last of the worker's stderr.
    stderr: Vec<String>,
    /// The repository as it was when the worker started (`None` without worktrees):
    /// what the orchestrator checks before it commits or pushes.
    baseline: Option<Baseline>,
    /// The repository's git data changed while the worker ran: the orchestrator runs no
    /// git in the worktree and the run waits for the owner (`asked` says why).
    tampered: bool,
}

/// Bytes of a worker's stderr kept for its run record (the newest).
const STDERR_BYTES: usize = 256 * 1024;

#[allow(clippy::too_many_arguments)]
async fn work(
    store: &dyn Store,
    adapter: &Adapter,
    settings: &RunnerSettings,
    run: &mut Run,
    gid: &str,
    phase: Phase,
    worktree: &Path,
    prompt: String,
) -> Result<Worked> {
    let logs = PhaseLog::create(&settings.logs_dir, gid, phase.as_str())?;
    // The repository as it is before the worker can touch it: the orchestrator compares
    // against it before it runs its own git in the worktree again.
    let baseline = if settings.worktrees {
        let (repo, tree, protected) = (
            settings.repository.clone(),
            worktree.to_path_buf(),
            vec![settings.base_branch.clone()],
        );
        Some(
            tokio::task::spawn_blocking(move || Baseline::take(&repo, &tree, &protected))
                .await?
                .context("cannot take a snapshot of the repository before the worker")?,
        )
    } else {
        None
    };
    let mut env = worker_env(adapter, settings);
    // A reviewer works in a session of its own and never takes the run's: the author's
    // session is the one later rounds continue.
    let keeps_session = phase != Phase::PrReview;
    // Any command gets executor's session id, so a program that keeps state between
    // rounds can key it (the same id when a later phase continues the session), and the
    // tool set it may use.
    if let Adapter::Command { .. } = adapter {
        let id = match (&run.worker_session_id, phase) {
            (Some(id), Phase::InProgress | Phase::FixCi | Phase::FixComments) => id.clone(),
            _ => format!(
                "cmd-{}",
                crate::core::gid::short_hash(&format!(
                    "{gid}\n{}\n{}\n{}",
                    run.id,
                    Utc::now().timestamp_nanos_opt().unwrap_or_default(),
                    std::process::id()
                ))
            ),
        };
        env.insert("EXECUTOR_SESSION_ID".to_string(), id.clone());
        if let Some(tools) = &settings.agent.tools {
            env.insert("EXECUTOR_TOOLS".to_string(), tools.join(","));
        }
        if keeps_session && run.worker_session_id.as_deref() != Some(id.as_str()) {
            run.worker_session_id = Some(id);
            run.updated_at = Utc::now();
            store.save_run(run).await?;
        }
    }
    // The contract this worker is judged by, fixed for its whole life (a reload applies to
    // the next worker).
    let contract = settings.worker_contract.as_ref().map(|cell| cell.current());
    // Inside the wall the hook cannot see the workspace: it asks the runner through a
    // socket of this worker's, and the runner judges and records the call.
    let relay = match (&settings.agent.hook, adapter) {
        (Some(_), Adapter::Claude { .. }) if settings.wall.is_confined() => {
            Some(HookRelay::open()?)
        }
        _ => None,
    };
    let hook_settings = match (&settings.agent.hook, adapter) {
        (Some(hook), Adapter::Claude { .. }) => Some(write_hook_settings(
            settings,
            hook,
            gid,
            run,
            worktree,
            contract.as_deref(),
            relay.as_ref().map(|r| r.socket.as_path()),
        )?),
        _ => None,
    };
    // A later phase continues the agent's own session where the agent can resume one, so
    // it keeps what it learnt; otherwise every worker starts fresh from its prompt.
    let invocation = crate::agents::Invocation {
        session: match (&run.worker_session_id, phase) {
            (Some(id), Phase::InProgress | Phase::FixCi | Phase::FixComments)
                if adapter.supports_resume() =>
            {
                crate::agents::Session::Resume { id: id.clone() }
            }
            _ => crate::agents::Session::New { id: None },
        },
        settings: hook_settings.clone(),
        allowed_tools: settings.agent.allowed_tools.clone(),
        append_system_prompt: Some(SYSTEM_REMINDER.to_string()),
        model: settings.agent.model.clone(),
        max_turns: settings.agent.max_turns,
        tools: settings.agent.tools.clone(),
        confined: settings.wall.is_confined(),
    };
    let spec = WorkerSpec {
        argv: adapter.argv(&invocation),
        cwd: worktree.to_path_buf(),
        env,
        // An empty prompt continues a session as it stands (Claude re-asks its hook about
        // the tool call it parked); the agent then reads no prompt at all.
        stdin: (!prompt.is_empty()).then(|| prompt.into_bytes()),
        limits: settings.limits,
        grace: settings.grace,
        max_line: MAX_LINE,
        os_limits: None,
    };
    let mut place = settings.place(
        run.id,
        worktree,
        Some(adapter),
        format!("run {} ({})", run.id, phase.as_str()),
        hook_settings
            .iter()
            .filter_map(|p| p.parent().map(Path::to_path_buf))
            .collect(),
    );
    place
        .read_write
        .extend(relay.as_ref().map(|r| r.dir.clone()));
    place.read_only_worktree = invocation.read_only();
    let enclosed = settings.wall.enclose(spec, &place)?;
    let (run_id_for_relay, branch_for_relay) = (run.id, run.branch_name.clone());
    let relay_served = async {
        match (relay, &hook_settings) {
            (Some(mut relay), Some(settings_file)) => {
                let contract_copy = settings_file.with_file_name("worker-policy.json");
                let Some(listener) = relay.listener.take() else {
                    return std::future::pending::<()>().await;
                };
                crate::cli::hook::serve_relay(
                    listener,
                    store,
                    crate::cli::hook::HookRun {
                        config: PathBuf::new(),
                        run_id: run_id_for_relay,
                        worktree: worktree.to_path_buf(),
                        branch: branch_for_relay,
                        contract: contract_copy.exists().then_some(contract_copy),
                        relay: None,
                    },
                )
                .await
            }
            _ => std::future::pending::<()>().await,
        }
    };
    tokio::pin!(relay_served);
    let (spec, confined, _gate) = (enclosed.spec, enclosed.confined, enclosed.gate);
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
    // The agent's session id is saved the moment it is known, so a worker killed with its
    // runner can still be resumed in its own session.
    let (session_tx, mut session_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    // Worker messages are stored (and requests decided) as they come, not at the end, so
    // the owner sees them while the worker works.
    let (message_tx, mut message_rx) =
        tokio::sync::mpsc::unbounded_channel::<(String, crate::protocol::Message)>();
    let run_id = run.id;
    let mut scanner = crate::protocol::Scanner::new();
    let scope = crate::policy::Scope::new(worktree.to_path_buf(), run.branch_name.as_deref())
        .with_confined(confined);
    let mut done = None;
    let mut escalated = None;
    let mut worker_id = None;
    let mut session_id = None;
    let mut finished: Option<crate::agents::Finished> = None;
    let mut stderr = crate::supervisor::tail::Tail::new(STDERR_BYTES);
    let mut logs_ok = logs;
    let outcome = {
        let supervised = supervisor::supervise(
            spec,
            |event| match event {
                WorkerEvent::Started { pid, start_time } => {
                    let _ = started_tx.send((pid, start_time));
                    false
                }
                WorkerEvent::Line { stream, line } => {
                    let text = line.text();
                    logs_ok.raw(stream, &text);
                    if stream == Stream::Stderr {
                        stderr.push(text);
                        return false;
                    }
                    let events = adapter.parse_line(&text);
                    for event in &events {
                        if let crate::agents::AgentEvent::Finished(end) = event {
                            finished = Some(end.as_ref().clone());
                        }
                        if let crate::agents::AgentEvent::SessionStarted {
                            session_id: id, ..
                        } = event
                        {
                            session_id = Some(id.clone());
                            let _ = session_tx.send(id.clone());
                        }
                        let crate::agents::AgentEvent::AssistantText { text } = event else {
                            continue;
                        };
                        // An agent's text block is a whole message of its own: a code fence
                        // never runs from one into the next. A plain command's lines are one
                        // text, so its fences span lines.
                        if !matches!(adapter, Adapter::Command { .. }) {
                            scanner = crate::protocol::Scanner::new();
                        }
                        for line in text.split('\n') {
                            let line = line.strip_suffix('\r').unwrap_or(line);
                            match scanner.line(line) {
                                Ok(Some(crate::protocol::Parsed::Message(message))) => {
                                    logs_ok.message(line);
                                    match message.tag {
                                        Tag::Done => done = Some(line.to_string()),
                                        Tag::Escalate => escalated = Some(line.to_string()),
                                        Tag::Request | Tag::Status => {}
                                    }
                                    let _ = message_tx.send((line.to_string(), message));
                                }
                                Ok(_) => {}
                                Err(error) => {
                                    logs_ok.message(&format!(
                                        "skipped a malformed message ({error}): {line}"
                                    ));
                                    tracing::warn!(gid = %gid, run = run_id, %error, %line, "a malformed worker message was skipped");
                                }
                            }
                        }
                    }
                    events.iter().any(|e| e.is_meaningful())
                }
            },
            None,
        );
        tokio::pin!(supervised);
        let mut claim_check = tokio::time::interval(CLAIM_CHECK);
        claim_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                outcome = &mut supervised => break outcome?,
                _ = claim_check.tick() => {
                    // Claimed elsewhere (the owner's cancel, a runner that took it over):
                    // the worker is stopped as the supervisor is dropped, nothing more is
                    // written for the run.
                    // A store out of reach says nothing about the claim: look again later.
                    if let Ok(false) = claim::still_ours(store, run).await {
                        tracing::warn!(gid = %gid, run = run.id, "the run was claimed elsewhere; stopping its worker");
                        return Err(crate::store::StoreError::Fenced { run_id: run.id }.into());
                    }
                }
                () = &mut relay_served => {}
                Some((line, message)) = message_rx.recv() => {
                    patience::durably("a worker message", run_id, || {
                        take_message(store, settings, contract.as_deref(), run, gid, &scope, (&line, &message))
                    })
                    .await?;
                    // A milestone is a sign of life the owner can see in `show`.
                    if message.tag == Tag::Status {
                        run.worker_last_update = Some(Utc::now());
                        run.updated_at = Utc::now();
                        patience::durably("the run", run_id, || async { Ok(store.save_run(run).await?) }).await?;
                    }
                }
                Some(id) = session_rx.recv() => {
                    if keeps_session && run.worker_session_id.as_deref() != Some(id.as_str()) {
                        run.worker_session_id = Some(id);
                        run.updated_at = Utc::now();
                        patience::durably("the run", run_id, || async { Ok(store.save_run(run).await?) }).await?;
                    }
                }
                Some((pid, start_time)) = started_rx.recv() => {
                    let record = WorkerRecord {
                        id: 0,
                        run_id: run.id,
                        phase: phase.as_str().to_string(),
                        host: host(),
                        pid: i64::from(pid),
                        start_time: start_time.and_then(|t| i64::try_from(t).ok()),
                        started_at: Utc::now(),
                        ended_at: None,
                        outcome: None,
                    };
                    worker_id = Some(patience::durably("the worker's record", run_id, || async {
                        Ok(store.record_worker(&record).await?)
                    })
                    .await?);
                    run.worker_pid = Some(i64::from(pid));
                    run.worker_last_update = Some(Utc::now());
                    run.updated_at = Utc::now();
                    patience::durably("the run", run_id, || async { Ok(store.save_run(run).await?) }).await?;
                }
            }
        }
    };
    while let Ok((line, message)) = message_rx.try_recv() {
        patience::durably("a worker message", run_id, || {
            take_message(
                store,
                settings,
                contract.as_deref(),
                run,
                gid,
                &scope,
                (&line, &message),
            )
        })
        .await?;
    }
    run.worker_pid = None;
    run.worker_last_update = Some(Utc::now());
    if keeps_session && session_id.is_some() {
        run.worker_session_id = session_id;
    }
    let deferred = finished.as_ref().and_then(|f| f.deferred_tool.as_ref());
    let api_error = finished.as_ref().and_then(|f| f.api_error());
    let why = match (&done, &escalated, outcome.stopped) {
        (Some(_), _, _) => "done".to_string(),
        (None, _, None) if deferred.is_some() => format!(
            "the agent parked a tool call for the owner: {}",
            deferred.map(|t| t.name.as_str()).unwrap_or_default()
        ),
        (None, Some(line), _) => format!("the worker escalated: {line}"),
        (None, None, Some(StopReason::NoOutput)) => "no output for too long".to_string(),
        (None, None, Some(StopReason::HardTimeout)) => "hard timeout".to_string(),
        (None, None, Some(StopReason::Requested)) => "stopped on request".to_string(),
        (None, None, None) => match (outcome.exit_code, outcome.signal) {
            // A model API error is the cause; the exit code is only its consequence.
            (Some(code), _) if api_error.is_some() => format!(
                "{} (the worker exited {code} without [DONE])",
                api_error.unwrap_or_default()
            ),
            (None, _) if api_error.is_some() => api_error.unwrap_or_default(),
            (Some(code), _) => format!("exited {code} without [DONE]"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            (None, None) => "ended without [DONE]".to_string(),
        },
    };
    logs_ok.message(&format!("worker ended: {why}"));
    if let Some(id) = worker_id {
        let at = Utc::now();
        patience::durably("the worker's end", run_id, || async {
            Ok(store.end_worker(id, at, &why).await?)
        })
        .await?;
    }
    let result = serde_json::json!({
        "run_id": run.id,
        "task_gid": gid,
        "phase": phase.as_str(),
        "agent": adapter.name(),
        "confined": confined,
        "wall": settings.wall.describe(),
        "session_id": run.worker_session_id,
        "done": done,
        "escalated": escalated,
        "why": why,
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        "stopped": outcome.stopped,
        "killed": outcome.killed,
        "lines": outcome.lines,
        "truncated_lines": outcome.truncated_lines,
        "agent_result": finished,
    });
    let mut asked = match (
        &done,
        finished.as_ref().and_then(|f| f.deferred_tool.clone()),
        &escalated,
    ) {
        (Some(_), _, _) => None,
        (None, Some(tool), _) => Some(Asked::DeferredTool(tool)),
        (None, None, Some(line)) => Some(Asked::Message(line.clone())),
        (None, None, None) => None,
    };
    // Whatever the worker said, a repository it tampered with goes to the owner, before
    // any git of the orchestrator's runs in it again.
    let (mut done, mut why, mut tampered) = (done, why, false);
    if let Some(found) = tampered_since(baseline.as_ref()).await? {
        tracing::warn!(gid = %gid, run = run.id, changes = %found.1, "the repository's git data changed while the worker ran; nothing is committed");
        logs_ok.message(&format!("the repository's git data changed: {}", found.1));
        (done, asked, why, tampered) = (
            None,
            Some(found.0),
            format!("the repository's git data changed: {}", found.1),
            true,
        );
    }
    Ok(Worked {
        done,
        asked,
        stopped: outcome.stopped,
        why,
        result,
        stderr: stderr.into_lines(),
        baseline,
        tampered,
    })
}

/// Stores one worker message with its run; a `[REQUEST:…]` is decided by the worker
/// contract there and then, the decision recorded (an escalation when the contract says
/// so) and written back into the run's messages, where the worker's next prompt shows it.
async fn take_message(
    store: &dyn Store,
    settings: &RunnerSettings,
    contract: Option<&crate::runner::contract::LoadedContract>,
    run: &Run,
    gid: &str,
    scope: &crate::policy::Scope,
    (line, message): (&str, &crate::protocol::Message),
) -> Result<()> {
    let args: serde_json::Map<String, serde_json::Value> = message
        .args
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    store
        .record_message(&crate::core::record::NewMessage {
            run_id: run.id,
            task_gid: gid.to_string(),
            at: Utc::now(),
            source: "worker".to_string(),
            tag: message.tag.as_str().to_string(),
            kind: message.kind.clone(),
            args: serde_json::Value::Object(args).to_string(),
            text: message.text.clone(),
            line: line.to_string(),
        })
        .await?;
    settings
        .notices
        .tell(
            store,
            crate::chat::Notice {
                priority: crate::core::outbox::Priority::Info,
                persona: crate::chat::Persona::Worker,
                task_gid: Some(gid.to_string()),
                run_id: Some(run.id),
                body: crate::chat::text::mirrored(run.id, gid, line),
            },
        )
        .await;
    let (Some(action), Some(contract)) = (message.to_action(), contract) else {
        return Ok(());
    };
    let (_, verdict) = crate::policy::judge(
        &contract.contract,
        &crate::policy::Input::Request(&action),
        scope,
    );
    let decision = match verdict.decision {
        crate::policy::Decision::Approve => "approve",
        crate::policy::Decision::Deny => "deny",
        crate::policy::Decision::Escalate => "escalate",
    };
    let rule = verdict
        .rule_id
        .clone()
        .unwrap_or_else(|| "(default)".to_string());
    let shown = if decision == "escalate" {
        store.messages(run.id, settings.window).await?
    } else {
        Vec::new()
    };
    let window = if decision == "escalate" {
        Some(serde_json::to_string(&shown)?)
    } else {
        None
    };
    let recorded = store
        .record_decision(&crate::core::record::NewDecision {
            task_gid: Some(gid.to_string()),
            run_id: Some(run.id),
            at: Utc::now(),
            role: "worker".to_string(),
            action: action.kind.clone(),
            decision: decision.to_string(),
            rule_id: verdict.rule_id.clone(),
            detail: Some(line.to_string()),
            tool_use_id: None,
            message_window: window,
            // The posture the request was judged in: the worker's own.
            confined: Some(scope.confined),
        })
        .await?;
    let kind = match verdict.decision {
        crate::policy::Decision::Approve => "request_approved",
        crate::policy::Decision::Deny => "request_denied",
        crate::policy::Decision::Escalate => "request_escalated",
    };
    let answer = match verdict.decision {
        crate::policy::Decision::Escalate => format!(
            "[STATUS:{kind}] request={} escalation={} The owner decides this one (rule {rule}: {}); carry on without it meanwhile.",
            action.kind, recorded.id, verdict.why
        ),
        _ => format!(
            "[STATUS:{kind}] request={} rule={rule} {}",
            action.kind, verdict.why
        ),
    };
    tracing::info!(gid = %gid, run = run.id, request = %action, %decision, %rule, "decided a worker request");
    let notice = match verdict.decision {
        crate::policy::Decision::Escalate => {
            crate::chat::text::escalation(settings.notices.routing(), &recorded, &shown)
        }
        _ => crate::chat::Notice::orchestrator(
            crate::core::outbox::Priority::Info,
            gid.to_string(),
            Some(run.id),
            crate::chat::text::decided(run.id, &action.kind, decision, &rule, &verdict.why),
        ),
    };
    settings.notices.tell(store, notice).await;
    store
        .record_message(&crate::core::record::NewMessage {
            run_id: run.id,
            task_gid: gid.to_string(),
            at: Utc::now(),
            source: "orchestrator".to_string(),
            tag: "STATUS".to_string(),
            kind: kind.to_string(),
            args: serde_json::json!({ "request": action.kind, "rule": rule }).to_string(),
            text: verdict.why.clone(),
            line: answer,
        })
        .await?;
    Ok(())
}

/// Completes a run on the local forge, its work committed already: a subtask's work goes
/// into its parent's branch first (so the subtasks that depend on it start from it), then
/// the run and its task are complete, the record step runs and the owner is told. When the
/// suites fail after that merge, the merge is undone and their failure returned instead.
async fn complete_local(
    store: &dyn Store,
    settings: &RunnerSettings,
    task: &Task,
    run: &mut Run,
    wt: &worktree::Worktree,
) -> Result<Option<String>> {
    let gid = task.task_gid.clone();
    if let Some(failed) =
        conduct::merge_into_parent(store, settings, &gid, run.id, &wt.branch).await?
    {
        return Ok(Some(failed));
    }
    move_run(store, run, RunEvent::PrOpened).await?;
    run.completed_at = Some(Utc::now());
    move_run(store, run, RunEvent::Completed).await?;
    queue_ops::apply(
        store,
        &SystemClock,
        &gid,
        QueueEvent::RunCompleted,
        "runner",
        None,
    )
    .await?;
    tracing::info!(gid = %gid, run = run.id, ci_attempts = run.ci_attempts, "run complete");
    record(store, settings, task, run, &wt.path, verified(settings)).await;
    settings
        .notices
        .tell_completed(store, &gid, run.id, None)
        .await;
    Ok(None)
}

/// The record step for a run that completed in `worktree`.
async fn record(
    store: &dyn Store,
    settings: &RunnerSettings,
    task: &Task,
    run: &Run,
    worktree: &Path,
    verification: Vec<String>,
) {
    let commit = if settings.worktrees {
        head_commit(settings, worktree).await
    } else {
        None
    };
    settings
        .recorder
        .record(
            store,
            &settings.notices,
            crate::runner::record::Completion {
                task,
                run,
                commit,
                verification,
            },
        )
        .await;
}

/// What the local forge's verification checked, for the record.
fn verified(settings: &RunnerSettings) -> Vec<String> {
    // `forge.verify` is one command's argv.
    if settings.verify.is_empty() {
        return Vec::new();
    }
    vec![format!("`{}`: passed", settings.verify.join(" "))]
}

/// Throws away what is not committed in `worktree`: changes and untracked files (ignored
/// ones stay).
async fn discard_uncommitted(settings: &RunnerSettings, worktree: &Path) -> Result<()> {
    let git = orchestrator_git(settings, worktree)?;
    let worktree = worktree.to_path_buf();
    tokio::task::spawn_blocking(move || -> Result<()> {
        for args in [&["reset", "--hard", "-q"][..], &["clean", "-fdq"][..]] {
            let out = git.output(args)?;
            anyhow::ensure!(
                out.status.success(),
                "git {} in {} failed: {}",
                args.join(" "),
                worktree.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    })
    .await?
}

/// The short id of the commit checked out in `worktree`.
async fn head_commit(settings: &RunnerSettings, worktree: &Path) -> Option<String> {
    let git = orchestrator_git(settings, worktree).ok()?;
    tokio::task::spawn_blocking(move || {
        let out = git.output(&["rev-parse", "--short=12", "HEAD"]).ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    })
    .await
    .ok()
    .flatten()
}

/// The socket a confined Claude worker's hook asks the runner through, in a short folder
/// of its own (a socket path holds at most 107 bytes), removed with the worker.
struct HookRelay {
    dir: PathBuf,
    socket: PathBuf,
    listener: Option<tokio::net::UnixListener>,
}

impl HookRelay {
    fn open() -> Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "executor-hook-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let socket = dir.join("hook.sock");
        let listener = tokio::net::UnixListener::bind(&socket)
            .with_context(|| format!("cannot listen on {}", socket.display()))?;
        Ok(HookRelay {
            dir,
            socket,
            listener: Some(listener),
        })
    }
}

impl Drop for HookRelay {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Writes the Claude settings file that installs executor's PreToolUse hook for run
/// `run_id`, beside the run's records, and returns its path.
fn write_hook_settings(
    settings: &RunnerSettings,
    hook: &HookTarget,
    gid: &str,
    run: &Run,
    worktree: &Path,
    contract: Option<&crate::runner::contract::LoadedContract>,
    relay: Option<&Path>,
) -> Result<PathBuf> {
    let dir = settings.logs_dir.join(gid).join(format!("run-{}", run.id));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join("claude-settings.json");
    // The hook reads the contract the runner validated, not the owner's file, which may
    // be mid-edit (or broken) while the worker runs.
    let contract_path = match contract {
        Some(contract) => {
            let snapshot = dir.join("worker-policy.json");
            std::fs::write(&snapshot, &contract.text)
                .with_context(|| format!("cannot write {}", snapshot.display()))?;
            Some(snapshot)
        }
        None => None,
    };
    let command = crate::agents::claude::hook_command(
        &hook.executor,
        &hook.config,
        run.id,
        worktree,
        run.branch_name.as_deref(),
        contract_path.as_deref(),
        relay,
    );
    let text = serde_json::to_string_pretty(&crate::agents::claude::hook_settings(&command))?;
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Writes the run record of one worker: what it changed (`patch.diff`, against the
/// branch's last commit, new files included), how it ended (`result.json`) and what it
/// said on stderr (`stderr.txt`), under `logs/<gid>/run-<id>/<n>-<phase>/`, n counting
/// the run's workers from 1.
async fn write_run_record(
    settings: &RunnerSettings,
    gid: &str,
    run_id: i64,
    phase: Phase,
    worktree: &Path,
    worked: &Worked,
) -> Result<PathBuf> {
    let run_dir = settings.logs_dir.join(gid).join(format!("run-{run_id}"));
    // Numbered by what is already there, so a run resumed by a later runner never
    // overwrites an earlier worker's record.
    let sequence = std::fs::read_dir(&run_dir)
        .map(|entries| {
            entries
                .filter(|e| e.as_ref().is_ok_and(|e| e.path().is_dir()))
                .count()
        })
        .unwrap_or(0)
        + 1;
    let dir = run_dir.join(format!("{sequence}-{}", phase.as_str()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // Without a worktree there is no branch of the run's own to diff against; in a
    // repository the worker tampered with, the orchestrator runs no git at all.
    let git = (settings.worktrees && !worked.tampered)
        .then(|| orchestrator_git(settings, worktree))
        .transpose()?;
    let patch = tokio::task::spawn_blocking(move || -> Result<Vec<u8>> {
        let Some(git) = git else {
            return Ok(Vec::new());
        };
        let git = |args: &[&str]| {
            git.output(args)
                .with_context(|| format!("cannot run git {}", args.join(" ")))
        };
        // Stage everything (new files too) so the patch is the whole change; the commit
        // that may follow stages the same.
        let added = git(&["add", "-A"])?;
        anyhow::ensure!(
            added.status.success(),
            "git add failed: {}",
            String::from_utf8_lossy(&added.stderr)
        );
        let diff = git(&[
            "diff",
            "--cached",
            "--binary",
            git::NO_DIFF_PROGRAMS[0],
            git::NO_DIFF_PROGRAMS[1],
            "HEAD",
        ])?;
        anyhow::ensure!(
            diff.status.success(),
            "git diff failed: {}",
            String::from_utf8_lossy(&diff.stderr)
        );
        Ok(diff.stdout)
    })
    .await??;
    let write = |name: &str, bytes: &[u8]| {
        std::fs::write(dir.join(name), bytes)
            .with_context(|| format!("cannot write {}", dir.join(name).display()))
    };
    if settings.worktrees {
        write("patch.diff", &patch)?;
    }
    write(
        "result.json",
        serde_json::to_string_pretty(&worked.result)?.as_bytes(),
    )?;
    let mut stderr = worked.stderr.join("\n");
    if !stderr.is_empty() {
        stderr.push('\n');
    }
    write("stderr.txt", stderr.as_bytes())?;
    Ok(dir)
}

/// The verification's verdict.
struct Verdict {
    passed: bool,
    summary: Option<String>,
    excerpt: String,
}

/// Runs the verification command in the worktree. Its process is recorded like a worker's
/// (phase `verify`), so a runner killed meanwhile leaves nothing that recovery misses.
async fn verify(
    store: &dyn Store,
    settings: &RunnerSettings,
    run_id: i64,
    gid: &str,
    worktree: &Path,
) -> Result<Verdict> {
    if settings.verify.is_empty() {
        return Ok(Verdict {
            passed: true,
            summary: None,
            excerpt: String::new(),
        });
    }
    let mut log = PhaseLog::create(&settings.logs_dir, gid, "verify")?;
    let mut env: HashMap<String, String> = HashMap::new();
    for key in ["PATH", "HOME", "LANG", "TMPDIR"] {
        if let Ok(value) = std::env::var(key) {
            env.insert(key.to_string(), value);
        }
    }
    let spec = WorkerSpec {
        argv: settings.verify.clone(),
        cwd: worktree.to_path_buf(),
        env,
        stdin: None,
        limits: Limits {
            no_output: settings.limits.hard,
            hard: settings.limits.hard,
        },
        grace: settings.grace,
        max_line: MAX_LINE,
        os_limits: None,
    };
    let place = settings.place(
        run_id,
        worktree,
        None,
        format!("run {run_id} (verify)"),
        Vec::new(),
    );
    let enclosed = settings.wall.enclose(spec, &place)?;
    let (spec, _gate) = (enclosed.spec, enclosed.gate);
    let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut record = None;
    let outcome = {
        let supervised = supervisor::supervise(
            spec,
            |event| {
                match event {
                    WorkerEvent::Started { pid, start_time } => {
                        let _ = started_tx.send((pid, start_time));
                    }
                    WorkerEvent::Line { stream, line } => {
                        let text = line.text();
                        log.raw(stream, &text);
                        if tail.len() == EXCERPT_LINES {
                            tail.pop_front();
                        }
                        tail.push_back(text);
                    }
                }
                true
            },
            None,
        );
        tokio::pin!(supervised);
        loop {
            tokio::select! {
                outcome = &mut supervised => break outcome?,
                Some((pid, start_time)) = started_rx.recv() => {
                    record = Some(store.record_worker(&WorkerRecord {
                        id: 0,
                        run_id,
                        phase: "verify".to_string(),
                        host: host(),
                        pid: i64::from(pid),
                        start_time: start_time.and_then(|t| i64::try_from(t).ok()),
                        started_at: Utc::now(),
                        ended_at: None,
                        outcome: None,
                    }).await?);
                }
            }
        }
    };
    let passed = outcome.succeeded();
    if let Some(id) = record {
        let ended = if passed { "passed" } else { "failed" };
        store.end_worker(id, Utc::now(), ended).await?;
    }
    log.message(&verify_note(&outcome, &tail));
    Ok(Verdict {
        passed,
        summary: tail.back().cloned(),
        excerpt: tail.into_iter().collect::<Vec<_>>().join("\n"),
    })
}

/// Lines of a failed verification's output the work log shows.
const VERIFY_LOG_LINES: usize = 20;

/// The work log's word on a verification: how it ended (`exit 1`, a signal, stopped) and,
/// when it failed, its last lines, so `executor logs` says why without the raw `.jsonl`.
fn verify_note(outcome: &supervisor::Outcome, tail: &std::collections::VecDeque<String>) -> String {
    let ended = match (outcome.stopped.as_ref(), outcome.exit_code, outcome.signal) {
        (Some(crate::core::watchdog::StopReason::HardTimeout), _, _) => {
            "stopped at the hard timeout".to_string()
        }
        (Some(crate::core::watchdog::StopReason::NoOutput), _, _) => {
            "stopped: no output for too long".to_string()
        }
        (Some(crate::core::watchdog::StopReason::Requested), _, _) => "stopped".to_string(),
        (None, Some(code), _) => format!("exit {code}"),
        (None, None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None, None) => "no exit status".to_string(),
    };
    if outcome.succeeded() {
        return format!("verification passed ({ended})");
    }
    let skip = tail.len().saturating_sub(VERIFY_LOG_LINES);
    let last: Vec<&str> = tail.iter().skip(skip).map(String::as_str).collect();
    if last.is_empty() {
        format!("verification failed ({ended}), with no output")
    } else {
        format!(
            "verification failed ({ended}); its last {} line(s):\n\n```text\n{}\n```",
            last.len(),
            last.join("\n")
        )
    }
}

/// Git as the orchestrator runs it for `worktree` (see [`crate::runner::git`]): in a run's
/// worktree, its git folders named from executor's own record (refused when its `.git`
/// pointer names anything else); the repository folder itself when runs share it.
fn orchestrator_git(settings: &RunnerSettings, worktree: &Path) -> Result<Git> {
    if settings.worktrees {
        Ok(Git::worktree(&settings.repository, worktree)?)
    } else {
        Ok(Git::repository(worktree))
    }
}

/// The kind of the escalation a tampered repository opens.
pub const GIT_TAMPERED: &str = "git_tampered";

/// The escalation for a repository whose git data changed since `baseline`, with the
/// changes for the log; `None` when nothing changed. No baseline, no check: only a run
/// without worktrees has none, and it commits nothing.
async fn tampered_since(baseline: Option<&Baseline>) -> Result<Option<(Asked, String)>> {
    let Some(baseline) = baseline.cloned() else {
        return Ok(None);
    };
    let changes = tokio::task::spawn_blocking(move || baseline.changes())
        .await?
        .context("cannot check the repository's git data")?;
    if changes.is_empty() {
        return Ok(None);
    }
    let described = git::describe(&changes);
    Ok(Some((
        Asked::Message(format!(
            "[ESCALATE:{GIT_TAMPERED}] the repository's git data changed while the worker ran, so executor committed and pushed nothing: {described}. Put the repository right, then answer to resume the run."
        )),
        described,
    )))
}

/// The escalation before a commit or a push: the repository must be as it was when the
/// worker started. Fails closed: without a baseline nothing is committed.
async fn tampered(baseline: Option<&Baseline>) -> Result<Option<Asked>> {
    anyhow::ensure!(
        baseline.is_some(),
        "no snapshot of the repository from before the worker; executor commits and pushes nothing without one"
    );
    Ok(tampered_since(baseline).await?.map(|(asked, _)| asked))
}

/// Commits the worktree's changes on the run's branch as the orchestrator, unless the
/// repository's git data changed since `worked`'s worker started: then nothing is
/// committed and the escalation for the owner is returned.
async fn commit(
    settings: &RunnerSettings,
    worktree: &Path,
    task: &Task,
    run_id: i64,
    worked: &Worked,
) -> Result<Option<Asked>> {
    commit_checked(settings, worktree, task, run_id, worked.baseline.as_ref()).await
}

/// [`commit`], against `baseline`.
async fn commit_checked(
    settings: &RunnerSettings,
    worktree: &Path,
    task: &Task,
    run_id: i64,
    baseline: Option<&Baseline>,
) -> Result<Option<Asked>> {
    if let Some(asked) = tampered(baseline).await? {
        return Ok(Some(asked));
    }
    let git = orchestrator_git(settings, worktree)?;
    let message = git::commit_message(&task.title(), run_id, &task.task_gid);
    let name = format!("user.name={}", settings.commit_author.name);
    let email = format!("user.email={}", settings.commit_author.email);
    tokio::task::spawn_blocking(move || -> Result<()> {
        let git = |args: &[&str]| -> Result<std::process::Output> {
            let args: Vec<&str> = ["-c", name.as_str(), "-c", email.as_str()]
                .iter()
                .chain(args)
                .copied()
                .collect();
            git.output(&args)
                .with_context(|| format!("cannot run git {}", args.join(" ")))
        };
        let added = git(&["add", "-A"])?;
        anyhow::ensure!(
            added.status.success(),
            "git add failed: {}",
            String::from_utf8_lossy(&added.stderr)
        );
        let staged = git(&[
            "diff",
            "--cached",
            "--quiet",
            git::NO_DIFF_PROGRAMS[0],
            git::NO_DIFF_PROGRAMS[1],
        ])?;
        if staged.status.success() {
            tracing::info!("the worker changed nothing; nothing to commit");
            return Ok(());
        }
        // The message goes through a file: a title on the command line can pass the
        // system's limit on one argument ("argument list too long"). It lives outside the
        // worktree, so `git add -A` never stages it. Created new (never through a link
        // planted at its name) under a name hard to guess ahead.
        let unguessable = format!("{}{:?}", std::process::id(), std::time::SystemTime::now());
        let file = std::env::temp_dir().join(format!(
            "executor-commit-{run_id}-{}.txt",
            crate::core::gid::short_hash(&unguessable)
        ));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&file)
            .and_then(|mut opened| opened.write_all(message.as_bytes()))
            .with_context(|| format!("cannot write the commit message to {}", file.display()))?;
        let path = file.to_string_lossy().into_owned();
        let committed = git(&["commit", "-q", "--no-verify", "-F", &path]);
        let _ = std::fs::remove_file(&file);
        let committed = committed?;
        anyhow::ensure!(
            committed.status.success(),
            "git commit failed: {}",
            String::from_utf8_lossy(&committed.stderr)
        );
        Ok(())
    })
    .await??;
    Ok(None)
}

/// `logs/{task_gid}/{phase}_{YYYY-MM-DD-HH-MM-SS-mmm}.md` (readable) beside `.jsonl` (raw).
/// The milliseconds keep two workers of one second in files of their own, and let `logs`
/// list them in the order they started.
struct PhaseLog {
    md: Option<std::fs::File>,
    jsonl: Option<std::fs::File>,
}

impl PhaseLog {
    fn create(logs_dir: &Path, gid: &str, phase: &str) -> Result<Self> {
        let dir = logs_dir.join(gid);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let stamp = Utc::now().format("%Y-%m-%d-%H-%M-%S-%3f");
        let base = dir.join(format!("{phase}_{stamp}"));
        let open = |ext: &str| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(base.with_extension(ext))
        };
        let mut md = open("md").with_context(|| format!("cannot write {}.md", base.display()))?;
        let jsonl =
            open("jsonl").with_context(|| format!("cannot write {}.jsonl", base.display()))?;
        let _ = writeln!(md, "# {gid} · {phase} · {stamp}\n");
        Ok(Self {
            md: Some(md),
            jsonl: Some(jsonl),
        })
    }

    fn raw(&mut self, stream: Stream, line: &str) {
        if let Some(file) = self.jsonl.as_mut() {
            let record = serde_json::json!({"at": crate::core::time::format_utc(&Utc::now()), "stream": stream, "line": line});
            if writeln!(file, "{record}").is_err() {
                self.jsonl = None;
            }
        }
    }

    fn message(&mut self, text: &str) {
        if let Some(file) = self.md.as_mut() {
            let at = Utc::now().format("%H:%M:%S");
            if writeln!(file, "- {at} {text}").is_err() {
                self.md = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished_run(state: RunState, ended_minutes_ago: i64) -> Run {
        let now = Utc::now();
        Run {
            id: 1,
            task_gid: "T-1".into(),
            worktree_path: Some("/w/x".into()),
            branch_name: Some("executor/T-1".into()),
            pr_url: None,
            pr_number: None,
            thread_id: None,
            started_at: None,
            updated_at: now,
            completed_at: Some(now - chrono::Duration::minutes(ended_minutes_ago)),
            state,
            ci_attempts: 0,
            worker_session_id: None,
            worker_last_update: None,
            worker_pid: None,
            worker_stuck_count: 0,
            lifecycle: None,
            lease_epoch: 0,
        }
    }

    #[test]
    fn only_finished_runs_past_the_retention_lose_their_worktree() {
        let hour = Duration::from_secs(3600);
        let now = Utc::now();
        assert!(worktree_expired(
            &finished_run(RunState::Complete, 61),
            now,
            hour
        ));
        assert!(worktree_expired(
            &finished_run(RunState::Abandoned, 61),
            now,
            hour
        ));
        assert!(!worktree_expired(
            &finished_run(RunState::Complete, 59),
            now,
            hour
        ));
        assert!(!worktree_expired(
            &finished_run(RunState::InProgress, 600),
            now,
            hour
        ));
        assert!(!worktree_expired(
            &finished_run(RunState::Pr, 600),
            now,
            hour
        ));
    }
}

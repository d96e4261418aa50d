//! The run engine's edge: it carries runs by their lifecycle (`core::lifecycle`, a pure
//! machine) and performs what the machine decides, one action at a time, each outcome fed
//! back as the next event. An approved task becomes a run with a worktree and a worker; a
//! worker that reports `[DONE:…]` has its change verified, reviewed where the owner asked,
//! committed by the orchestrator (never by the worker) and integrated: a draft PR on a
//! forge, or completion on the local forge. Runs are claimed through fenced leases, so two
//! runners never carry one run, and a worker holds a slot only while it lives.
//!
//! This module and its children decide nothing of a run's course themselves: every choice
//! of what comes next is the lifecycle's or the PR machine's (`core::pr`).
//!
//! - [`pass`]: taking approved tasks and answered escalations up; [`carry`]: the
//!   decide–save–perform loop; [`worker`] and [`messages`]: one worker and its lines;
//!   [`verify`], [`commit`], [`complete`]: the steps after a worker; [`recover`] and
//!   [`lease`]: what a dead runner left; [`pr_tick`], [`opening`], [`review`]: the PR.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::agents::Adapter;
use crate::core::clock::Clock;
use crate::core::lifecycle;
use crate::core::run::RunState;
use crate::core::watchdog::Limits;
use crate::prompts::PromptSet;
use crate::runner::git::{self};
use crate::store::Store;

mod carry;
mod commit;
mod complete;
mod escalate;
mod forge;
mod launch;
mod lease;
mod limits;
mod messages;
mod pass;
mod phase_log;
mod recover;
mod refusals;
mod run_record;
mod spent;
mod verify;
mod watch;
mod worker;
mod worktrees;
pub use carry::NO_CHANGE;
use carry::{carry, run_context, view_of, Start};
pub use commit::GIT_TAMPERED;
use commit::{
    commit, commit_checked, discard_uncommitted, head_commit, orchestrator_git, tampered,
    tampered_since,
};
use complete::{
    abandon, complete_local, end, full_head, move_run, open_pr, push_recorded, record, verified,
};
use escalate::open_escalation;
pub use escalate::MESSAGE_WINDOW;
pub use forge::Forge;
use launch::{baseline, environment, launch, HookRelay, Launch};
use lease::{carried_by_live_runner, lease_until, release_run, take_run};
pub use lease::{host, keep_leases, set_lease_ttl, this_runner, LeaseBeat, LEASE_TTL};
use messages::take_message;
use pass::{collect, continue_run, fenced, give_up};
pub use pass::{has_decided, resume_decided, run_approved};
use phase_log::PhaseLog;
pub use recover::recover;

/// Whether `error` says the store is out of reach for a while (a pass that failed so is
/// tried again, not counted as a failure while the store may come back).
pub fn store_out_of_reach(error: &anyhow::Error) -> bool {
    patience::transient(error)
}
pub use refusals::NET_REFUSED;
use refusals::{Refusals, Refused};
use run_record::write_run_record;
pub use spent::BUDGET;
use verify::verify;
use watch::{watch, Said, Watched};
pub use worker::agent_env;
use worker::{
    run_worker, work, worker_env, Asked, Worked, WorkerRun, MAX_LINE, STDERR_BYTES, SYSTEM_REMINDER,
};
use worktrees::prepare_worktree;
pub use worktrees::{clean_worktrees, worktree_expired};
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
    /// The forge with PRs (`[forge] kind = "github"` or `"gitea"`): a finished run's branch
    /// is pushed and a draft PR opened; `None` on the local forge.
    pub forge: Option<Forge>,
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
    /// What "now" is for the engine: the system clock, or a test's manual one. Every time
    /// the engine stores or decides by comes from it.
    pub clock: Arc<dyn Clock>,
    /// `[budget]`: the caps checked before a worker starts and before a task is taken.
    pub budget: crate::core::budget::Budget,
    /// This runner's lease renewals, beaten to each worker's keeper.
    pub lease_beat: Arc<LeaseBeat>,
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
            loopback_ports: Vec::new(),
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
    /// `[spend.prices]`: what a worker's tokens cost when its agent reports no cost.
    pub prices: std::collections::BTreeMap<String, crate::core::spend::Prices>,
    /// `[agent] usage_limit_backoff`: the pause after a usage limit that gave no reset.
    pub usage_limit_backoff: Duration,
}

/// Where `executor hook claude` is: the binary and the config it reads.
#[derive(Debug, Clone)]
pub struct HookTarget {
    pub executor: PathBuf,
    pub config: PathBuf,
}

/// What a pass did: the runs that ended, why the others failed (each failed run was
/// abandoned where the store allowed it), and the runs handed back because the store went
/// out of reach while they were carried (recovery carries them on once it is back).
#[derive(Debug, Default)]
pub struct Passed {
    pub results: Vec<RunResult>,
    pub failed: Vec<String>,
    pub handed_back: Vec<i64>,
}

/// A run this runner stopped carrying because the store was out of reach: not a failure of
/// the run, which is left `in_progress` for recovery (never abandoned for an outage).
#[derive(Debug, thiserror::Error)]
#[error("run {run_id} was handed back for recovery: the store was out of reach ({why})")]
pub struct HandedBack {
    pub run_id: i64,
    pub why: String,
}

/// Everything a runner pass needs, cheap to clone into each run it starts. Every run
/// holds one of `slots` while its worker lives, so however many passes share this, the
/// cap on live workers holds. A pass readies at most as many runs again ahead of a free
/// slot (`readying`: claimed, its worktree made, its prompt written), so a slot that
/// frees starts the next worker at once instead of claiming and preparing first.
#[derive(Clone)]
pub struct Runner {
    pub store: Arc<dyn Store>,
    pub adapter: Adapter,
    pub prompts: Arc<PromptSet>,
    pub settings: Arc<RunnerSettings>,
    pub slots: Arc<Semaphore>,
    /// Runs readied ahead of a free slot (as many permits as `slots`).
    pub readying: Arc<Semaphore>,
    /// Passes now taking approved tasks (see [`Runner::is_claiming`]).
    pub claiming: Arc<std::sync::atomic::AtomicUsize>,
    /// This runner process, as run leases name it.
    pub holder: Arc<crate::core::lease::Holder>,
    /// Runs whose PR is settled (merged, nothing owed): no tick of this process takes
    /// their lease or reads them again.
    pub settled_prs: Arc<std::sync::Mutex<std::collections::HashSet<i64>>>,
    /// Runs this process stopped carrying whose lease it could not give back (the store was
    /// out of reach): the lease renewal still covers them, so nobody else takes them up.
    /// Recovery gives them back first, then carries them on.
    pub left: Arc<std::sync::Mutex<std::collections::HashSet<i64>>>,
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
    /// The run's last write released this runner's lease of it already.
    pub lease_released: bool,
}

/// How often a runner looks whether its claim on a run it carries still holds (a cancel
/// or a takeover raises the run's lease epoch): a worker of a run claimed elsewhere is
/// stopped within this.
const CLAIM_CHECK: Duration = Duration::from_secs(1);

/// The source of tasks `executor dispatch` creates.
pub const DISPATCH: &str = "dispatch";

pub use lifecycle::{DECLINED_BY_OWNER, DENIED_BY_CONTRACT};

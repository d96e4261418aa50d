//! `executor.toml`: reading, validating and resolving the configuration.
//!
//! Parsing is strict: an unknown key or a value of the wrong type is an error that names the
//! file, the line and the key, and nothing starts on a config that does not validate.
//! Relative paths are resolved against the folder that holds the config file, so the same
//! workspace behaves the same from any working directory. Secrets are never read from here:
//! they come from the environment or from files this config names.

pub mod chat;
pub mod conductor;
pub mod gitea;
mod redact;
pub mod sandbox;
mod template;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use thiserror::Error;
use toml::Spanned;

use crate::core::queue::QueueStatus;
use crate::store::StorageTarget;

pub use chat::ChatSection;
pub use sandbox::{SandboxMode, SandboxNetwork, SandboxSection};
pub use template::TEMPLATE;

/// The default config file name, looked up in the current folder.
pub const FILE_NAME: &str = "executor.toml";

/// Environment variable that overrides `storage.url` (it may carry a password).
pub const STORAGE_URL_ENV: &str = "EXECUTOR_STORAGE_URL";

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}, line {line}, `{key}`: {message}")]
    Invalid {
        path: PathBuf,
        line: usize,
        key: &'static str,
        message: String,
    },
    #[error("{origin}: {message}")]
    InvalidEnv {
        origin: &'static str,
        message: String,
    },
}

/// The whole file. Every section may be left out; every key has a default.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub storage: StorageSection,
    #[serde(default)]
    pub runner: RunnerSection,
    #[serde(default)]
    pub analyzer: AnalyzerSection,
    #[serde(default)]
    pub agent: AgentSection,
    #[serde(default)]
    pub forge: ForgeSection,
    #[serde(default)]
    pub sources: SourcesSection,
    #[serde(default)]
    pub chat: ChatSection,
    #[serde(default)]
    pub web: WebSection,
    #[serde(default)]
    pub policy: PolicySection,
    #[serde(default)]
    pub conductor: conductor::ConductorSection,
    #[serde(default)]
    pub sandbox: SandboxSection,
    #[serde(default)]
    pub spend: SpendSection,
    #[serde(default)]
    pub budget: crate::core::budget::Budget,
}

impl Config {
    /// Every file the config names that holds a secret (tokens, keys, passwords, webhook
    /// URLs), as written (relative to the config's folder): the wall covers them where a
    /// worker could otherwise read them.
    pub fn secret_files(&self) -> Vec<&Path> {
        let chat = &self.chat;
        let sources = &self.sources;
        [
            self.storage.password_file.as_deref(),
            self.forge.token_file.as_deref(),
            self.forge.webhook_secret_file.as_deref(),
            self.web.token_file.as_deref(),
            self.web.read_only_token_file.as_deref(),
            sources.asana.as_ref().and_then(|a| a.token_file.as_deref()),
            sources
                .gitea_issues
                .as_ref()
                .and_then(|g| g.token_file.as_deref()),
            chat.zulip
                .as_ref()
                .and_then(|z| z.webhook_token_file.as_deref()),
        ]
        .into_iter()
        .flatten()
        .chain(chat.personas.values().filter_map(|p| p.key_file.as_deref()))
        .chain(chat.webhooks.iter().filter_map(|w| w.url_file.as_deref()))
        .collect()
    }
}

/// `[spend]`: how a worker's cost is known when its agent reports none.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpendSection {
    /// US dollars per million tokens, by agent (`codex`, which reports no cost; a price for
    /// an agent that reports its own cost is used only when a result lacks one).
    #[serde(default)]
    pub prices: std::collections::BTreeMap<String, crate::core::spend::Prices>,
}

/// `[policy]`: how escalations are handled before the owner sees them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySection {
    /// Escalations a model judge looks at first (action kinds, escalation kinds or rule
    /// ids); it may deny them or leave them to the owner, never approve.
    #[serde(default)]
    pub ask_model_first: Vec<String>,
    /// How long the judge may take (no-output and hard limit alike).
    #[serde(default = "default_judge_timeout", with = "humantime_serde")]
    pub judge_timeout: Duration,
}

fn default_judge_timeout() -> Duration {
    Duration::from_secs(5 * 60)
}

impl Default for PolicySection {
    fn default() -> Self {
        Self {
            ask_model_first: Vec::new(),
            judge_timeout: default_judge_timeout(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSection {
    /// `sqlite://PATH` (relative to the config file) or `postgres://user@host/db`.
    #[serde(default = "default_storage_url")]
    pub url: Spanned<String>,
    /// A file holding the Postgres password (instead of `PGPASSWORD`).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
}

impl Default for StorageSection {
    fn default() -> Self {
        Self {
            url: default_storage_url(),
            password_file: None,
        }
    }
}

fn default_storage_url() -> Spanned<String> {
    Spanned::new(0..0, "sqlite://executor.db".to_string())
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerSection {
    /// Live worker processes at most, per runner.
    #[serde(default = "default_max_workers")]
    pub max_workers: u32,
    #[serde(default = "default_loop_sleep", with = "humantime_serde")]
    pub loop_sleep: Duration,
    #[serde(default = "default_no_output_timeout", with = "humantime_serde")]
    pub no_output_timeout: Duration,
    #[serde(default = "default_hard_timeout", with = "humantime_serde")]
    pub hard_timeout: Duration,
    /// The repository workers change (relative to the config file).
    #[serde(default = "default_repository")]
    pub repository: PathBuf,
    #[serde(default = "default_base_branch")]
    pub base_branch: String,
    #[serde(default = "default_branch_prefix")]
    pub branch_prefix: String,
    #[serde(default = "default_worktrees_dir")]
    pub worktrees_dir: PathBuf,
    #[serde(default = "default_logs_dir")]
    pub logs_dir: PathBuf,
    /// Between TERM and KILL when a worker is stopped.
    #[serde(default = "default_stop_grace", with = "humantime_serde")]
    pub stop_grace: Duration,
    /// The first wait before a failed worker is retried (it doubles, up to a minute).
    #[serde(default = "default_retry_backoff", with = "humantime_serde")]
    pub retry_backoff: Duration,
    /// How long a runner's claim on a run lasts without renewal (renewed three times in
    /// that span): after it, another runner may take the run over. Shorter finds a frozen
    /// or lost runner sooner; longer rides out longer store outages.
    #[serde(default = "default_lease_ttl", with = "humantime_serde")]
    pub lease_ttl: Duration,
    /// Workers a run may start that end without `[DONE:…]` before it is abandoned.
    #[serde(default = "default_max_worker_attempts")]
    pub max_worker_attempts: u32,
    /// How long a finished run's worktree is kept (its branch always stays); "0s" removes
    /// it as soon as the run ends.
    #[serde(default = "default_keep_worktrees", with = "humantime_serde")]
    pub keep_worktrees: Duration,
    /// Each run in its own worktree and branch; off, workers run in `repository` itself and
    /// nothing is committed.
    #[serde(default = "default_true")]
    pub worktrees: bool,
    /// Who the runs' commits are by, `Name <email>`; unset: the repository's own
    /// `user.name` and `user.email`.
    #[serde(default)]
    pub commit_author: Option<String>,
}

fn default_keep_worktrees() -> Duration {
    Duration::from_secs(7 * 24 * 60 * 60)
}

fn default_stop_grace() -> Duration {
    Duration::from_secs(10)
}
fn default_retry_backoff() -> Duration {
    Duration::from_secs(5)
}
fn default_lease_ttl() -> Duration {
    Duration::from_secs(60)
}
fn default_max_worker_attempts() -> u32 {
    3
}

impl Default for RunnerSection {
    fn default() -> Self {
        Self {
            max_workers: default_max_workers(),
            loop_sleep: default_loop_sleep(),
            no_output_timeout: default_no_output_timeout(),
            hard_timeout: default_hard_timeout(),
            repository: default_repository(),
            base_branch: default_base_branch(),
            branch_prefix: default_branch_prefix(),
            worktrees_dir: default_worktrees_dir(),
            logs_dir: default_logs_dir(),
            stop_grace: default_stop_grace(),
            retry_backoff: default_retry_backoff(),
            lease_ttl: default_lease_ttl(),
            max_worker_attempts: default_max_worker_attempts(),
            keep_worktrees: default_keep_worktrees(),
            worktrees: true,
            commit_author: None,
        }
    }
}

fn default_max_workers() -> u32 {
    2
}
fn default_loop_sleep() -> Duration {
    Duration::from_secs(60)
}
fn default_no_output_timeout() -> Duration {
    Duration::from_secs(30 * 60)
}
fn default_hard_timeout() -> Duration {
    Duration::from_secs(3 * 60 * 60)
}
fn default_repository() -> PathBuf {
    PathBuf::from(".")
}
fn default_base_branch() -> String {
    "main".to_string()
}
fn default_branch_prefix() -> String {
    "executor/".to_string()
}
fn default_worktrees_dir() -> PathBuf {
    PathBuf::from("worktrees")
}
fn default_logs_dir() -> PathBuf {
    PathBuf::from("logs")
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalyzerSection {
    #[serde(default = "default_analyzer_no_output", with = "humantime_serde")]
    pub no_output_timeout: Duration,
    #[serde(default = "default_analyzer_hard", with = "humantime_serde")]
    pub hard_timeout: Duration,
    /// The sources whose tasks are analyzed at all; left out, every source qualifies.
    #[serde(default)]
    pub qualifying_sources: Option<Vec<String>>,
    /// The owner in the sources' assignee fields (ids or names), for `assigned_to_other`.
    #[serde(default)]
    pub owner: Vec<String>,
    /// The rule filters, in order (`core::filter`).
    #[serde(default)]
    pub rules: Vec<crate::core::filter::RuleSpec>,
}

impl Default for AnalyzerSection {
    fn default() -> Self {
        Self {
            no_output_timeout: default_analyzer_no_output(),
            hard_timeout: default_analyzer_hard(),
            qualifying_sources: None,
            owner: Vec::new(),
            rules: Vec::new(),
        }
    }
}

impl AnalyzerSection {
    /// The rule filters as written.
    pub fn filter_spec(&self) -> crate::core::filter::FilterSpec {
        crate::core::filter::FilterSpec {
            qualifying_sources: self.qualifying_sources.clone(),
            owner: self.owner.clone(),
            rules: self.rules.clone(),
        }
    }

    /// The rule filters, compiled (checked when the config loads).
    pub fn filters(
        &self,
    ) -> Result<crate::core::filter::Filters, crate::core::filter::FilterError> {
        crate::core::filter::Filters::compile(&self.filter_spec())
    }
}

fn default_analyzer_no_output() -> Duration {
    Duration::from_secs(5 * 60)
}
fn default_analyzer_hard() -> Duration {
    Duration::from_secs(15 * 60)
}

/// Which agent CLI workers run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentKind {
    /// Claude Code if installed, else Codex, else pi; none found is an error.
    #[default]
    Auto,
    Claude,
    Codex,
    Pi,
    Command,
    /// The bundled example worker (`init --example`): writes EXECUTOR_EXAMPLE.md, no real work.
    Example,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    #[serde(default)]
    pub kind: AgentKind,
    /// argv of the worker when `kind = "command"`.
    #[serde(default)]
    pub command: Vec<String>,
    /// The agent CLI (`claude`, `codex` or `pi`) when it is not on `PATH` under its own name.
    #[serde(default)]
    pub program: Option<PathBuf>,
    /// The model the agent is asked to use (its own default when unset).
    #[serde(default)]
    pub model: Option<String>,
    /// Claude: tools allowed without asking the hook (`--allowedTools`). pi: the only tools
    /// the worker has (`--tools`).
    #[serde(default)]
    pub allowed_tools: Vec<String>,
    /// Claude: `--max-turns`.
    #[serde(default)]
    pub max_turns: Option<u32>,
    /// Names of environment variables handed to every worker from executor's own
    /// environment: the agent's own settings and model credentials (for example
    /// `ANTHROPIC_API_KEY`, `CLAUDE_CONFIG_DIR`, `CODEX_HOME`). executor's own secrets are
    /// refused here.
    #[serde(default)]
    pub env: Vec<toml::Spanned<String>>,
    /// Claude: every tool call is decided by `executor hook claude` and the worker policy.
    #[serde(default = "default_true")]
    pub hooks: bool,
    /// How long the agent's workers pause after it reports a usage limit without saying
    /// when the limit resets (a reset it gives is waited for instead).
    #[serde(default = "default_usage_limit_backoff", with = "humantime_serde")]
    pub usage_limit_backoff: Duration,
}

fn default_usage_limit_backoff() -> Duration {
    Duration::from_secs(30 * 60)
}

impl AgentSection {
    /// What the agent adapter is chosen from: its own settings type, so `agents` never
    /// reads the config's.
    pub fn adapter_settings(&self) -> crate::agents::AgentSettings {
        use crate::agents::AgentKind as Kind;
        crate::agents::AgentSettings {
            kind: match self.kind {
                AgentKind::Auto => Kind::Auto,
                AgentKind::Claude => Kind::Claude,
                AgentKind::Codex => Kind::Codex,
                AgentKind::Pi => Kind::Pi,
                AgentKind::Command => Kind::Command,
                AgentKind::Example => Kind::Example,
            },
            command: self.command.clone(),
            program: self.program.clone(),
        }
    }
}

impl Default for AgentSection {
    fn default() -> Self {
        Self {
            kind: AgentKind::default(),
            command: Vec::new(),
            program: None,
            model: None,
            allowed_tools: Vec::new(),
            max_turns: None,
            env: Vec::new(),
            hooks: true,
            usage_limit_backoff: default_usage_limit_backoff(),
        }
    }
}

/// Whether `name` is one of executor's own secrets, which never reach a worker: the forge
/// and chat tokens, the store's password, executor's own settings.
pub fn is_orchestrator_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    const EXACT: [&str; 6] = [
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITEA_TOKEN",
        "PGPASSWORD",
        "DATABASE_URL",
        "ASANA_TOKEN",
    ];
    const PREFIXES: [&str; 5] = ["EXECUTOR_", "ZULIP_", "ASANA_", "SLACK_", "GITHUB_"];
    EXACT.contains(&upper.as_str()) || PREFIXES.iter().any(|p| upper.starts_with(p))
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForgeKind {
    /// Git only; CI is a configured command.
    #[default]
    Local,
    Github,
    Gitea,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgeSection {
    #[serde(default)]
    pub kind: ForgeKind,
    /// The local forge's CI: the command run in a run's worktree once its worker is done
    /// (empty: nothing to verify).
    #[serde(default)]
    pub verify: Vec<String>,
    /// Verification failures a run may have (each answered by a `fix_ci` worker).
    #[serde(default = "default_max_ci_attempts")]
    pub max_ci_attempts: u32,
    /// GitHub: `owner/name` of the repository `runner.repository` is a clone of.
    #[serde(default)]
    pub github_repository: Option<Spanned<String>>,
    /// Gitea: `owner/name` of the repository `runner.repository` is a clone of.
    #[serde(default)]
    pub gitea_repository: Option<Spanned<String>>,
    /// GitHub's API (GitHub Enterprise: `https://HOST/api/v3`); on Gitea, its API
    /// (`https://HOST/api/v1`), which must be given.
    #[serde(default = "default_github_api")]
    pub api_url: Spanned<String>,
    /// The environment variable that holds the forge token (left out: `GITHUB_TOKEN`, on
    /// Gitea `GITEA_TOKEN`; see [`ForgeSection::token_variable`]).
    #[serde(default = "default_token_env")]
    pub token_env: Spanned<String>,
    /// Or a file holding it (relative to this file); wins over `token_env`.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// The git remote run branches are pushed to.
    #[serde(default = "default_remote")]
    pub remote: String,
    /// Checks that must be green before a review and before `complete`.
    #[serde(default)]
    pub required_checks: Vec<String>,
    /// Labels every draft PR must carry.
    #[serde(default)]
    pub required_labels: Vec<String>,
    /// Resolve review threads whose last comment is `[ACKNOWLEDGED: …]`.
    #[serde(default)]
    pub resolve_acknowledged: bool,
    /// The workflow file started with `workflow_dispatch` when a head has no CI at all.
    #[serde(default)]
    pub ci_workflow: Option<String>,
    /// How long CI may take to show up after a push or a trigger before executor acts.
    #[serde(default = "default_ci_start_grace", with = "humantime_serde")]
    pub ci_start_grace: Duration,
    /// Failures in a row of a GitHub write (opening the PR, the completion comment, a
    /// review) before the owner is asked; executor keeps trying after.
    #[serde(default = "default_max_effect_failures")]
    pub max_effect_failures: u32,
    /// The environment variable holding GitHub's webhook secret; with it (or the file) the
    /// daemon takes webhook deliveries on `[web] listen`.
    #[serde(default)]
    pub webhook_secret_env: Option<String>,
    /// Or a file holding it (relative to this file); wins over `webhook_secret_env`.
    #[serde(default)]
    pub webhook_secret_file: Option<PathBuf>,
    /// How often the open PRs are polled while webhooks come in (the poll then only
    /// reconciles what a delivery missed: GitHub never redelivers on its own).
    #[serde(default = "default_webhook_poll", with = "humantime_serde")]
    pub webhook_poll: Duration,
    /// executor merges a complete run's PR itself once it is ready, green, reviewed and
    /// approved (off by default).
    #[serde(default)]
    pub auto_merge: AutoMergeSection,
}

/// `[forge] auto_merge = { enabled, method, require_approval, delete_branch }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutoMergeSection {
    #[serde(default)]
    pub enabled: bool,
    /// `merge`, `squash` (the default) or `rebase`.
    #[serde(default = "default_merge_method")]
    pub method: Spanned<String>,
    /// An approval of the head by someone other than the PR's author is needed.
    #[serde(default = "yes")]
    pub require_approval: bool,
    /// The run's branch is deleted once its PR is merged.
    #[serde(default = "yes")]
    pub delete_branch: bool,
}

impl Default for AutoMergeSection {
    fn default() -> Self {
        Self {
            enabled: false,
            method: default_merge_method(),
            require_approval: true,
            delete_branch: true,
        }
    }
}

impl AutoMergeSection {
    /// The settings the `pr` machine takes, when enabled (the method was checked on load).
    pub fn settings(&self) -> Option<crate::core::merge::AutoMerge> {
        self.enabled.then(|| crate::core::merge::AutoMerge {
            method: crate::core::merge::MergeMethod::parse(self.method.get_ref())
                .unwrap_or(crate::core::merge::MergeMethod::Squash),
            require_approval: self.require_approval,
            delete_branch: self.delete_branch,
        })
    }
}

fn default_merge_method() -> Spanned<String> {
    Spanned::new(0..0, "squash".to_string())
}

fn yes() -> bool {
    true
}

impl ForgeSection {
    /// The variable holding the forge token: `token_env`, or when it is left out, the
    /// forge's own (`GITEA_TOKEN` on Gitea, `GITHUB_TOKEN` otherwise).
    pub fn token_variable(&self) -> &str {
        let left_out = self.token_env.span() == (0..0);
        if left_out && self.kind == ForgeKind::Gitea {
            gitea::DEFAULT_TOKEN_ENV
        } else {
            self.token_env.get_ref()
        }
    }

    /// The forge's repository, `(owner, name)`: `github_repository` on GitHub,
    /// `gitea_repository` on Gitea; `None` on the local forge or when it is not owner/name.
    pub fn repository(&self) -> Option<(&str, &str)> {
        let named = match self.kind {
            ForgeKind::Github => self.github_repository.as_ref(),
            ForgeKind::Gitea => self.gitea_repository.as_ref(),
            ForgeKind::Local => None,
        }?;
        named
            .get_ref()
            .split_once('/')
            .filter(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'))
    }
}

/// `forge.kind = "gitea"` needs the repository's `owner/name` and Gitea's API URL (the
/// default `api_url` is GitHub's, never a Gitea's).
fn validate_gitea_forge(forge: &ForgeSection, path: &Path, text: &str) -> Result<(), ConfigError> {
    let Some(repo) = &forge.gitea_repository else {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line_of_key(text, "kind"),
            key: "forge.gitea_repository",
            message: "forge.kind = \"gitea\" needs gitea_repository = \"owner/name\"".to_string(),
        });
    };
    let invalid = |key, span, message| invalid_at(path, text, key, span, message);
    if forge.repository().is_none() {
        return Err(invalid(
            "forge.gitea_repository",
            repo.span(),
            format!("`{}` is not owner/name", repo.get_ref()),
        ));
    }
    if forge.api_url.span() == (0..0) {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line_of_key(text, "kind"),
            key: "forge.api_url",
            message: "forge.kind = \"gitea\" needs api_url = \"https://HOST/api/v1\"".to_string(),
        });
    }
    if url::Url::parse(forge.api_url.get_ref()).is_err() {
        return Err(invalid(
            "forge.api_url",
            forge.api_url.span(),
            format!("`{}` is not a URL", forge.api_url.get_ref()),
        ));
    }
    Ok(())
}

fn default_max_effect_failures() -> u32 {
    5
}

fn default_webhook_poll() -> Duration {
    Duration::from_secs(10 * 60)
}

fn default_ci_start_grace() -> Duration {
    Duration::from_secs(5 * 60)
}

fn default_github_api() -> Spanned<String> {
    Spanned::new(0..0, "https://api.github.com".to_string())
}

fn default_token_env() -> Spanned<String> {
    Spanned::new(0..0, "GITHUB_TOKEN".to_string())
}

fn default_remote() -> String {
    "origin".to_string()
}

fn default_max_ci_attempts() -> u32 {
    3
}

impl Default for ForgeSection {
    fn default() -> Self {
        Self {
            kind: ForgeKind::default(),
            verify: Vec::new(),
            max_ci_attempts: default_max_ci_attempts(),
            github_repository: None,
            gitea_repository: None,
            api_url: default_github_api(),
            token_env: default_token_env(),
            token_file: None,
            remote: default_remote(),
            required_checks: Vec::new(),
            required_labels: Vec::new(),
            resolve_acknowledged: false,
            ci_workflow: None,
            ci_start_grace: default_ci_start_grace(),
            max_effect_failures: default_max_effect_failures(),
            webhook_secret_env: None,
            webhook_secret_file: None,
            webhook_poll: default_webhook_poll(),
            auto_merge: AutoMergeSection::default(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcesSection {
    #[serde(default)]
    pub plans: PlansSource,
    /// Asana, polled; left out, Asana is not read.
    #[serde(default)]
    pub asana: Option<AsanaSource>,
    /// GitHub issues by label, polled; left out, no issues are read.
    #[serde(default)]
    pub github_issues: Option<GithubIssuesSource>,
    /// Gitea issues by label, polled; left out, no Gitea issues are read.
    #[serde(default)]
    pub gitea_issues: Option<gitea::GiteaIssuesSource>,
}

/// `[sources.github_issues]`: the repositories whose labelled issues are work, read with
/// the forge's token and API URL (`[forge]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GithubIssuesSource {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// `owner/name` each; left out, `forge.github_repository`.
    #[serde(default)]
    pub repositories: Vec<Spanned<String>>,
    /// An issue carrying any one of these labels is read.
    pub labels: Vec<String>,
    /// Whether the first read takes issues closed already.
    #[serde(default)]
    pub include_closed: bool,
    #[serde(default = "default_asana_poll", with = "humantime_serde")]
    pub poll_interval: Duration,
}

impl GithubIssuesSource {
    pub fn scope(&self) -> Result<crate::sources::github_issues::GithubIssuesScope, String> {
        let scope = crate::sources::github_issues::GithubIssuesScope {
            labels: self.labels.clone(),
            include_closed: self.include_closed,
        };
        if let Some(problem) = scope.problem("GitHub") {
            return Err(problem);
        }
        Ok(scope)
    }
}

/// `[sources.asana]`: the projects, sections and My Tasks to read, and how often.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AsanaSource {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The variable holding the personal access token.
    #[serde(default = "default_asana_token_env")]
    pub token_env: Spanned<String>,
    /// Or a file holding it (relative to this file); wins over `token_env`.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    #[serde(default = "default_asana_api_url")]
    pub api_url: Spanned<String>,
    #[serde(default = "default_asana_poll", with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Project gids: every task of each.
    #[serde(default)]
    pub projects: Option<toml::Value>,
    /// Section gids: every task of each.
    #[serde(default)]
    pub sections: Option<toml::Value>,
    /// The token owner's My Tasks in this workspace.
    #[serde(default)]
    pub my_tasks_workspace: Option<toml::Value>,
    /// Whether the first read takes tasks completed already.
    #[serde(default)]
    pub include_completed: bool,
}

impl AsanaSource {
    /// The scope, as the Asana source reads it.
    pub fn scope(&self) -> Result<crate::sources::asana::AsanaScope, String> {
        let mut table = toml::Table::new();
        for (key, value) in [
            ("projects", &self.projects),
            ("sections", &self.sections),
            ("my_tasks_workspace", &self.my_tasks_workspace),
        ] {
            if let Some(value) = value {
                table.insert(key.to_string(), value.clone());
            }
        }
        table.insert(
            "include_completed".to_string(),
            toml::Value::Boolean(self.include_completed),
        );
        let scope: crate::sources::asana::AsanaScope = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| e.message().to_string())?;
        scope.validate().map_err(|e| e.to_string())?;
        Ok(scope)
    }
}

fn default_asana_token_env() -> Spanned<String> {
    Spanned::new(0..0, "ASANA_TOKEN".to_string())
}
fn default_asana_api_url() -> Spanned<String> {
    Spanned::new(0..0, crate::sources::asana::DEFAULT_API_BASE.to_string())
}
fn default_asana_poll() -> Duration {
    Duration::from_secs(5 * 60)
}

/// The folder of markdown notes, one task per note.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlansSource {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The folder (relative to the config file).
    #[serde(default = "default_plans_path")]
    pub path: PathBuf,
    /// `approved` (the owner wrote these notes) or `pending` (send them to the analyzer).
    #[serde(default = "default_plans_status")]
    pub initial_status: Spanned<String>,
    /// How long a note must go without a write before it is taken in, so an editor's
    /// first write of a half-saved note is never taken for the whole note.
    #[serde(default = "default_plans_settle", with = "humantime_serde")]
    pub settle: Duration,
}

impl Default for PlansSource {
    fn default() -> Self {
        Self {
            enabled: true,
            path: default_plans_path(),
            initial_status: default_plans_status(),
            settle: default_plans_settle(),
        }
    }
}

fn default_plans_settle() -> Duration {
    Duration::from_millis(300)
}

fn default_true() -> bool {
    true
}
fn default_plans_path() -> PathBuf {
    PathBuf::from("plans")
}
fn default_plans_status() -> Spanned<String> {
    Spanned::new(0..0, "approved".to_string())
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSection {
    /// Whether the daemon serves the console (on by default; loopback needs no login).
    #[serde(default = "default_true")]
    pub enabled: bool,
    #[serde(default = "default_listen")]
    pub listen: String,
    /// The file holding the console's token (relative to this file); wins over
    /// `token_env`. Needed for a `listen` other than loopback.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Or the environment variable holding it.
    #[serde(default)]
    pub token_env: Option<String>,
    /// A token that may read every page, document and metric but change nothing.
    #[serde(default)]
    pub read_only_token_file: Option<PathBuf>,
    #[serde(default)]
    pub read_only_token_env: Option<String>,
}

impl Default for WebSection {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: default_listen(),
            token_file: None,
            token_env: None,
            read_only_token_file: None,
            read_only_token_env: None,
        }
    }
}

impl WebSection {
    /// Whether any console token is configured (without reading it).
    pub fn has_token(&self) -> bool {
        self.token_file.is_some()
            || self.token_env.is_some()
            || self.read_only_token_file.is_some()
            || self.read_only_token_env.is_some()
    }
}

fn default_listen() -> String {
    "127.0.0.1:8450".to_string()
}

/// A validated configuration with every path made absolute.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The config file this came from.
    pub path: PathBuf,
    /// The folder that relative paths are resolved against.
    pub root: PathBuf,
    pub storage: StorageTarget,
    pub plans: Option<PlansSettings>,
    pub raw: Config,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlansSettings {
    pub dir: PathBuf,
    pub initial_status: QueueStatus,
    pub settle: Duration,
}

/// Where the process environment may weigh in; passed in so tests do not touch the real one.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub storage_url: Option<String>,
    pub pg_password: Option<String>,
}

impl Env {
    pub fn from_process() -> Self {
        Self {
            storage_url: std::env::var(STORAGE_URL_ENV)
                .ok()
                .filter(|v| !v.is_empty()),
            pg_password: std::env::var("PGPASSWORD").ok().filter(|v| !v.is_empty()),
        }
    }
}

/// Reads and validates the config file at `path`.
pub fn load(path: &Path, env: &Env) -> Result<Settings, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &text, env)
}

/// Validates `text`, the contents of the config file at `path`.
pub fn parse(path: &Path, text: &str, env: &Env) -> Result<Settings, ConfigError> {
    let raw: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        // toml quotes the line it stopped on: a secret written there is not repeated.
        message: redact::redact(e.to_string().trim_end(), text),
    })?;
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let root = absolute
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let invalid = |key, span, message| invalid_at(path, text, key, span, message);

    let storage = storage_of(&raw, path, text, &root, env)?;
    validate_durations(&raw, path, text)?;
    validate_runner_and_agent(&raw, path, text)?;
    validate_forge(&raw, path, text)?;
    validate_sources(&raw, path, text)?;
    validate_sections(&raw, path, text)?;

    let plans_cfg = &raw.sources.plans;
    let initial_status = match plans_cfg.initial_status.get_ref().as_str() {
        "approved" => QueueStatus::Approved,
        "pending" => QueueStatus::Pending,
        other => {
            return Err(invalid(
                "sources.plans.initial_status",
                plans_cfg.initial_status.span(),
                format!("`{other}` is not allowed (use \"approved\" or \"pending\")"),
            ))
        }
    };
    let plans = plans_cfg.enabled.then(|| PlansSettings {
        dir: root.join(&plans_cfg.path),
        initial_status,
        settle: plans_cfg.settle,
    });

    Ok(Settings {
        path: absolute,
        root,
        storage,
        plans,
        raw,
    })
}

/// The error for `key`, whose value sits at `span` of the config's `text`.
fn invalid_at(
    path: &Path,
    text: &str,
    key: &'static str,
    span: std::ops::Range<usize>,
    message: String,
) -> ConfigError {
    ConfigError::Invalid {
        path: path.to_path_buf(),
        line: line_of(text, span.start),
        key,
        message,
    }
}

/// Where the store is: `EXECUTOR_STORAGE_URL` or `storage.url`, with the Postgres password
/// from `storage.password_file` when the URL has none.
fn storage_of(
    raw: &Config,
    path: &Path,
    text: &str,
    root: &Path,
    env: &Env,
) -> Result<StorageTarget, ConfigError> {
    let invalid = |key, span, message| invalid_at(path, text, key, span, message);
    let storage = match &env.storage_url {
        Some(url) => {
            storage_target(url, root, env, true).map_err(|message| ConfigError::InvalidEnv {
                origin: STORAGE_URL_ENV,
                message,
            })?
        }
        None => storage_target(raw.storage.url.get_ref(), root, env, false)
            .map_err(|message| invalid("storage.url", raw.storage.url.span(), message))?,
    };
    let storage = match (storage, &raw.storage.password_file) {
        (
            StorageTarget::Postgres {
                url,
                password: None,
            },
            Some(file),
        ) => {
            let file = root.join(file);
            let password = std::fs::read_to_string(&file).map_err(|e| ConfigError::Invalid {
                path: path.to_path_buf(),
                line: line_of_key(text, "password_file"),
                key: "storage.password_file",
                message: format!("cannot read {}: {e}", file.display()),
            })?;
            StorageTarget::Postgres {
                url,
                password: Some(password.trim_end_matches(['\n', '\r']).to_string()),
            }
        }
        (storage, _) => storage,
    };
    Ok(storage)
}

/// The durations that must be longer than zero.
fn validate_durations(raw: &Config, path: &Path, text: &str) -> Result<(), ConfigError> {
    let durations = [
        ("runner.loop_sleep", "loop_sleep", raw.runner.loop_sleep),
        (
            "agent.usage_limit_backoff",
            "usage_limit_backoff",
            raw.agent.usage_limit_backoff,
        ),
        (
            "runner.no_output_timeout",
            "no_output_timeout",
            raw.runner.no_output_timeout,
        ),
        (
            "runner.hard_timeout",
            "hard_timeout",
            raw.runner.hard_timeout,
        ),
        (
            "analyzer.no_output_timeout",
            "no_output_timeout",
            raw.analyzer.no_output_timeout,
        ),
        (
            "analyzer.hard_timeout",
            "hard_timeout",
            raw.analyzer.hard_timeout,
        ),
        (
            "policy.judge_timeout",
            "judge_timeout",
            raw.policy.judge_timeout,
        ),
    ];
    if let Some((key, name, _)) = durations.iter().find(|(_, _, d)| d.is_zero()) {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line_of_key(text, name),
            key,
            message: "must be longer than zero".to_string(),
        });
    }
    Ok(())
}

/// The analyzer's rules, the agent's turns and the variables it may be given, the runner's author and cap.
fn validate_runner_and_agent(raw: &Config, path: &Path, text: &str) -> Result<(), ConfigError> {
    let invalid = |key, span, message| invalid_at(path, text, key, span, message);
    if let Err(error) = raw.analyzer.filters() {
        use crate::core::filter::FilterError;
        let line = match &error {
            FilterError::BadRegex { rule, .. } | FilterError::DuplicateId { rule } => {
                line_of_rule(text, rule)
            }
            FilterError::EmptyId => line_of_key(text, "rules"),
        };
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            line,
            key: "analyzer.rules",
            message: error.to_string(),
        });
    }

    if raw.agent.max_turns == Some(0) {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line_of_key(text, "max_turns"),
            key: "agent.max_turns",
            message: "must be at least 1 (leave it out for no cap)".to_string(),
        });
    }

    if let Some(author) = &raw.runner.commit_author {
        if crate::core::identity::Identity::parse(author).is_none() {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: line_of_key(text, "commit_author"),
                key: "runner.commit_author",
                message: format!("`{author}` is not `Name <email>`"),
            });
        }
    }

    if raw.runner.max_workers == 0 {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line_of_key(text, "max_workers"),
            key: "runner.max_workers",
            message: "must be at least 1".to_string(),
        });
    }

    for name in &raw.agent.env {
        let valid = !name.get_ref().is_empty()
            && name
                .get_ref()
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.get_ref().as_bytes()[0].is_ascii_digit();
        if !valid {
            return Err(invalid(
                "agent.env",
                name.span(),
                format!("`{}` is not an environment variable name", name.get_ref()),
            ));
        }
        if is_orchestrator_secret(name.get_ref()) {
            return Err(invalid(
                "agent.env",
                name.span(),
                format!(
                    "`{}` is one of executor's own secrets and never reaches a worker",
                    name.get_ref()
                ),
            ));
        }
    }
    Ok(())
}

/// The forge: GitHub's repository and API URL, Gitea's section, its token kept from workers.
fn validate_forge(raw: &Config, path: &Path, text: &str) -> Result<(), ConfigError> {
    let invalid = |key, span, message| invalid_at(path, text, key, span, message);
    let forge = &raw.forge;
    if forge.kind == ForgeKind::Github {
        match &forge.github_repository {
            None => {
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    line: line_of_key(text, "kind"),
                    key: "forge.github_repository",
                    message: "forge.kind = \"github\" needs github_repository = \"owner/name\""
                        .to_string(),
                })
            }
            Some(repo) => {
                let valid = repo
                    .get_ref()
                    .split_once('/')
                    .is_some_and(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'));
                if !valid {
                    return Err(invalid(
                        "forge.github_repository",
                        repo.span(),
                        format!("`{}` is not owner/name", repo.get_ref()),
                    ));
                }
            }
        }
        if url::Url::parse(forge.api_url.get_ref()).is_err() {
            return Err(invalid(
                "forge.api_url",
                forge.api_url.span(),
                format!("`{}` is not a URL", forge.api_url.get_ref()),
            ));
        }
    }
    if forge.kind == ForgeKind::Gitea {
        validate_gitea_forge(forge, path, text)?;
    }
    let method = &forge.auto_merge.method;
    if crate::core::merge::MergeMethod::parse(method.get_ref()).is_none() {
        return Err(invalid(
            "forge.auto_merge.method",
            method.span(),
            format!(
                "`{}` is not a merge method: merge, squash or rebase",
                method.get_ref()
            ),
        ));
    }
    if forge.auto_merge.enabled && forge.kind == ForgeKind::Local {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line_of_key(text, "auto_merge"),
            key: "forge.auto_merge",
            message: "auto_merge merges PRs, and forge.kind = \"local\" opens none: set kind to github or gitea"
                .to_string(),
        });
    }
    if let Some(name) = raw
        .agent
        .env
        .iter()
        .find(|name| name.get_ref() == forge.token_variable())
    {
        return Err(invalid(
            "agent.env",
            name.span(),
            format!(
                "`{}` holds the forge token (forge.token_env), which never reaches a worker",
                forge.token_variable()
            ),
        ));
    }
    Ok(())
}

/// The polled sources: Asana, GitHub issues, Gitea issues.
fn validate_sources(raw: &Config, path: &Path, text: &str) -> Result<(), ConfigError> {
    let invalid = |key, span, message| invalid_at(path, text, key, span, message);
    if let Some(asana) = &raw.sources.asana {
        if let Err(message) = asana.scope() {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: line_of_section(text, "[sources.asana]"),
                key: "sources.asana",
                message,
            });
        }
        if url::Url::parse(asana.api_url.get_ref()).is_err() {
            return Err(invalid(
                "sources.asana.api_url",
                asana.api_url.span(),
                format!("`{}` is not a URL", asana.api_url.get_ref()),
            ));
        }
        if asana.poll_interval.is_zero() {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: line_of_key(text, "poll_interval"),
                key: "sources.asana.poll_interval",
                message: "must be longer than zero".to_string(),
            });
        }
        if let Some(name) = raw
            .agent
            .env
            .iter()
            .find(|name| name.get_ref() == asana.token_env.get_ref())
        {
            return Err(invalid(
                "agent.env",
                name.span(),
                format!(
                    "`{}` holds the Asana token (sources.asana.token_env), which never reaches a worker",
                    asana.token_env.get_ref()
                ),
            ));
        }
    }

    if let Some(issues) = &raw.sources.github_issues {
        let section = line_of_section(text, "[sources.github_issues]");
        let invalid_here = |message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            line: section,
            key: "sources.github_issues",
            message,
        };
        issues.scope().map_err(invalid_here)?;
        if issues.poll_interval.is_zero() {
            return Err(invalid_here(
                "poll_interval must be longer than zero".into(),
            ));
        }
        for repository in &issues.repositories {
            let valid = repository
                .get_ref()
                .split_once('/')
                .is_some_and(|(o, r)| !o.is_empty() && !r.is_empty() && !r.contains('/'));
            if !valid {
                return Err(invalid(
                    "sources.github_issues.repositories",
                    repository.span(),
                    format!("`{}` is not owner/name", repository.get_ref()),
                ));
            }
        }
        if issues.repositories.is_empty() && raw.forge.github_repository.is_none() {
            return Err(invalid_here(
                "name the repositories, or set forge.github_repository".into(),
            ));
        }
    }

    if let Some(section) = &raw.sources.gitea_issues {
        gitea::validate(section, &raw.agent.env, path, text)?;
    }
    Ok(())
}

/// The conductor, the wall, chat and its credentials, spend prices.
fn validate_sections(raw: &Config, path: &Path, text: &str) -> Result<(), ConfigError> {
    let invalid = |key, span, message| invalid_at(path, text, key, span, message);
    if let Err((key, message)) = conductor::validate(&raw.conductor) {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line_of_section(text, "[conductor]"),
            key,
            message,
        });
    }
    if let Err((key, message)) = sandbox::validate(&raw.sandbox) {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line_of_key(text, key.rsplit('.').next().unwrap_or(key))
                .max(line_of_section(text, "[sandbox]")),
            key,
            message,
        });
    }
    if let Err((key, message, anchor)) = chat::validate(&raw.chat) {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line_of_section(text, &anchor).max(line_of_key(text, &anchor)),
            key,
            message,
        });
    }
    // Every variable holding a chat credential: bot keys and emails, webhook URLs (Slack's
    // carry a token), the outgoing webhook's token.
    let chat_secrets: Vec<&String> = raw
        .chat
        .personas
        .values()
        .flat_map(|p| [p.key_env.as_ref(), p.email_env.as_ref()])
        .chain(raw.chat.webhooks.iter().map(|w| w.url_env.as_ref()))
        .chain(raw.chat.zulip.iter().map(|z| Some(&z.webhook_token_env)))
        // The console's tokens are the owner's keys to it: never a worker's.
        .chain([
            raw.web.token_env.as_ref(),
            raw.web.read_only_token_env.as_ref(),
        ])
        .flatten()
        .collect();
    {
        if let Some(name) = raw
            .agent
            .env
            .iter()
            .find(|name| chat_secrets.contains(&name.get_ref()))
        {
            return Err(invalid(
                "agent.env",
                name.span(),
                format!(
                    "`{}` holds a chat or console credential (a bot key, a webhook URL or token), which never reaches a worker",
                    name.get_ref()
                ),
            ));
        }
    }

    if let Some(agent) = raw
        .spend
        .prices
        .keys()
        .find(|k| !matches!(k.as_str(), "claude" | "codex" | "pi" | "command"))
    {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line_of_section(text, &format!("[spend.prices.{agent}]")),
            key: "spend.prices",
            message: format!("`{agent}` is not an agent (claude, codex, pi or command)"),
        });
    }
    Ok(())
}

/// Resolves a storage URL. `from_env` allows a password in it (the environment may hold
/// secrets; the config file may not).
fn storage_target(
    url: &str,
    root: &Path,
    env: &Env,
    from_env: bool,
) -> Result<StorageTarget, String> {
    let url = url.trim();
    let Some((scheme, rest)) = url.split_once("://") else {
        // The value may hold a secret (a connection string, say): never echo it.
        return Err(
            "not a storage URL (expected sqlite://PATH or postgres://USER@HOST/DB)".to_string(),
        );
    };
    match scheme {
        "sqlite" => {
            if rest.is_empty() {
                return Err("sqlite:// needs a file path, e.g. sqlite://executor.db".into());
            }
            Ok(StorageTarget::Sqlite(root.join(rest)))
        }
        "postgres" | "postgresql" => {
            let checked = crate::store::check_postgres_url(url)?;
            if !from_env && checked.has_password {
                return Err(format!(
                    "the URL carries a password; keep secrets out of the config file (use PGPASSWORD, storage.password_file or {STORAGE_URL_ENV})"
                ));
            }
            Ok(StorageTarget::Postgres {
                url: url.to_string(),
                password: env.pg_password.clone(),
            })
        }
        other => Err(format!(
            "unknown scheme `{other}` (expected sqlite:// or postgres://)"
        )),
    }
}

/// 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map(|before| before.matches('\n').count() + 1)
        .unwrap_or(1)
}

/// 1-based line where `key` is set, or 1 when it is not in the text.
fn line_of_key(text: &str, key: &str) -> usize {
    text.lines()
        .position(|line| {
            let line = line.trim_start();
            line.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|index| index + 1)
        .unwrap_or(1)
}

/// The line of a `[section]` header (1 when it is not there).
fn line_of_section(text: &str, header: &str) -> usize {
    text.lines()
        .position(|line| line.trim() == header)
        .map(|index| index + 1)
        .unwrap_or(1)
}

/// The line of `id = "<rule>"` (the last one, for a rule id given twice).
fn line_of_rule(text: &str, rule: &str) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let line = line.trim_start();
            line.strip_prefix("id")
                .map(str::trim_start)
                .and_then(|rest| rest.strip_prefix('='))
                .is_some_and(|value| value.trim().trim_matches(['"', '\'']) == rule)
        })
        .map(|(index, _)| index + 1)
        .last()
        .unwrap_or(1)
}

#[cfg(test)]
mod tests;

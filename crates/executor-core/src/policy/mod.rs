//! The policy engine: role contracts (docs/design.md §6) and the classification of the agents'
//! tool calls into the actions those contracts judge.
//!
//! Theory of operation: every request a worker makes reaches this module as one of three
//! inputs — a `[REQUEST:kind] key=value…` message, a Claude Code PreToolUse hook, a Codex
//! approval — and is turned into a list of [`Action`]s (kind + string arguments). A role
//! [`Contract`] decides each action with its first matching rule (or its default), and a list
//! is judged by its most severe verdict (deny > escalate > approve). Anything that cannot be
//! read (oversized, not UTF-8, unbalanced quotes, an unexpanded `$VAR` where a command name or
//! a path should be) becomes the action [`UNCLASSIFIABLE`], which no contract can approve.
//!
//! # The posture
//!
//! The classifier answers "understood" only for what it can see through completely: a
//! program in its table, with flags its option spec knows, running nothing it does not see.
//! What it cannot see through is named for what it is — `run_unknown`, `run_inline_code`,
//! `run_indirect`, `run_script`, `git_admin`, `system_service` — never approved by the
//! classifier itself. The contract decides those by [`Scope::confined`]: for an unconfined
//! worker (the strict posture, and the default of [`Scope::new`]) the built-in contract
//! escalates them; inside the wall (docs/design.md §11) its rules with `"confined": true`
//! approve what the wall contains. Pushes, PRs, merges, comments, the network and writes
//! outside the worktree keep their own rules in both postures, and reads of secret places
//! become `read_secret` ([`classify::mark_secrets`]), which the built-in contract denies.
//!
//! | file | holds | must never |
//! |---|---|---|
//! | `contract.rs` | the contract format: parse, validate strictly, compile; [`Contract::load`] | touch the filesystem outside `load` |
//! | `decide.rs` | rule matching: [`Contract::decide`], [`Contract::decide_all`] | allocate per rule, do I/O |
//! | `classify.rs` | hook JSON, Codex approvals and shell commands → actions | panic on outside data, approve anything itself |
//! | `classify/programs.rs` | the program → handler table, option specs, wrappers, interpreters, secret places, risky variables | guess whether a flag takes a value |
//! | `classify/git.rs` | git's global options and subcommand table | take an unknown subcommand (an alias) for a known one |
//! | `classify/options.rs` | reading a command line by its option spec | fail: an unknown flag is reported, its neighbours stay operands |
//! | `shell.rs` | splitting a shell command into simple commands (quotes, `&&`, `$(…)`, …) | run or expand anything |
//! | `paths.rs` | lexical path normalisation; [`resolve_on_disk`], the one filesystem look-up | decide anything |
//!
//! # The contract's condition language
//!
//! A rule is `{ "id", "action", "when"?, "decision", "why", "notify"? }`. `action` is an
//! action kind or `*` (any). `when` maps a condition to a value; all conditions must hold:
//!
//! | condition | value | holds when |
//! |---|---|---|
//! | `branch` | `"$run_branch"` | the `branch` argument equals the run's own branch (never when the run has none) |
//! | `branch` | a glob (`executor/*`) | the `branch` argument matches (`*` also matches `/`) |
//! | `path` | `"inside_worktree"` / `"outside_worktree"` | the `path` argument, resolved (`..`, symlinks), is inside / outside the run's worktree; `~…` is outside; an unresolved path is neither |
//! | `path` | a glob | the resolved `path` argument matches |
//! | `command` | a regex | it matches somewhere in the `command` argument |
//! | `target`, and the other known arguments (see [`contract::KNOWN_ARGS`]), or `arg:NAME` for any other | a string: exact, or a glob if it has `*?[{` | the argument is present and matches |
//! | any of them | `true` / `false` | the argument is the string `"true"` / `"false"` |
//! | any of them | `null` | the argument is absent |
//! | `confined` | `true` / `false` | the worker runs inside / outside the wall ([`Scope::confined`]); not an argument of the action |
//! | `process_cap` | `true` / `false` | the kernel holds the worker to `[sandbox] max_processes` ([`Scope::process_cap`]); not an argument of the action |
//! | `network` | a name or a glob (`none`, `allowlist`, `host`) | the wall's network is known ([`Scope::network`]) and its name matches; not an argument of the action |
//! | `url` | `"within_reach"` | the worker could reach the `url` argument's host through the wall's network by itself ([`WallNetwork::reaches`]) |
//!
//! A missing argument fails every condition except `null` (and `confined`, `process_cap`
//! and `network`, which test the scope).

/// The built-in worker contract: what `executor init` writes to `roles/worker-policy.json`.
pub const WORKER_CONTRACT: &str = include_str!("../../roles/worker-policy.json");
/// The built-in conductor contract (`roles/conductor-policy.json`).
pub const CONDUCTOR_CONTRACT: &str = include_str!("../../roles/conductor-policy.json");

pub mod classify;
pub mod contract;
pub mod decide;
pub mod paths;
pub mod shell;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use classify::{ChangeKind, CodexApproval};
pub use contract::{Contract, ContractError};
pub use paths::resolve_on_disk;

/// The action kind for input that cannot be judged. [`Contract::decide`] never approves it,
/// whatever the contract says.
pub const UNCLASSIFIABLE: &str = "unclassifiable";

/// One thing a worker wants to do, in the owner's words: `push_branch branch=executor/x`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Action {
    pub kind: String,
    pub args: BTreeMap<String, String>,
}

impl Action {
    pub fn new(kind: impl Into<String>) -> Self {
        Action {
            kind: kind.into(),
            args: BTreeMap::new(),
        }
    }

    /// Adds an argument (builder style).
    pub fn with(mut self, key: &str, value: impl Into<String>) -> Self {
        self.args.insert(key.to_string(), value.into());
        self
    }

    /// A `[REQUEST:kind] key=value…` message: the kind is the action, the pairs its arguments.
    pub fn from_request<K, V>(kind: &str, args: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        Action {
            kind: kind.to_string(),
            args: args
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// An action no contract can approve; `reason` says why it could not be judged.
    pub fn unclassifiable(reason: impl Into<String>) -> Self {
        Action::new(UNCLASSIFIABLE).with("reason", reason)
    }

    pub fn arg(&self, key: &str) -> Option<&str> {
        self.args.get(key).map(String::as_str)
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.kind)?;
        for (k, v) in &self.args {
            write!(f, " {k}={v:?}")?;
        }
        Ok(())
    }
}

/// What a decision is taken for: the run's worktree, its own branch, and whether the worker
/// runs inside the wall of docs/design.md §11.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The run's worktree, absolute. Use [`Scope::on_disk`] to resolve its symlinks once, so
    /// that paths resolved on disk compare with it.
    pub worktree: PathBuf,
    /// The run's own branch (`executor/…`), if it has one yet.
    pub run_branch: Option<String>,
    /// The worker runs confined (bubblewrap: read-only system, only its worktree writable, no
    /// host processes, no network). `false`, the strict posture, unless a caller says so:
    /// what the classifier cannot see through is then escalated rather than approved.
    pub confined: bool,
    /// The kernel holds the worker to `[sandbox] max_processes` (a `pids` cgroup of its
    /// own, or `RLIMIT_NPROC` for an owner who is not root). `false` unless a caller says
    /// so: a command that can start processes without bound is then escalated.
    pub process_cap: bool,
    /// The branch the worktree has checked out, read on disk by [`Scope::on_disk`] (`None`:
    /// not read, detached, or unreadable). `git push origin HEAD` pushes the run's own
    /// branch only when this is it.
    pub head_branch: Option<String>,
    /// The repository's base branch (`[runner] base_branch`), if the caller knows it: a
    /// git command that checks it out or moves it is not the worker's (`main` and `master`
    /// are treated so whatever this says).
    pub base_branch: Option<String>,
    /// What the wall lets the worker reach (`[sandbox] network` and its allowlist); `None`
    /// when the worker is not confined or the caller does not say. WebFetch and WebSearch
    /// are approved only where the worker could reach the host anyway.
    pub network: Option<WallNetwork>,
}

/// The network a confined worker has, as the wall made it (docs/confinement.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WallNetwork {
    /// `none`: no route out.
    None,
    /// `allowlist`: these remote hosts, each `host:port` in its one spelling (lowercase, no
    /// trailing dot, IP addresses canonical), or `*.domain:port` for the names under it.
    Allowlist(Vec<String>),
    /// `host`: the host's network, unfiltered.
    Host,
}

impl WallNetwork {
    /// The name `[sandbox] network` gives it, which the contract's `network` condition tests.
    pub fn as_str(&self) -> &'static str {
        match self {
            WallNetwork::None => "none",
            WallNetwork::Allowlist(_) => "allowlist",
            WallNetwork::Host => "host",
        }
    }

    /// Whether a worker could reach `url` through this network by itself: any http(s) host
    /// under `host`, one on the list (same port) under `allowlist`, never this machine.
    pub fn reaches(&self, url: &str) -> bool {
        let Ok(url) = url::Url::parse(url) else {
            return false;
        };
        if !matches!(url.scheme(), "http" | "https") {
            return false;
        }
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return false;
        };
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        if is_this_machine(&host) {
            return false;
        }
        match self {
            WallNetwork::None => false,
            WallNetwork::Host => true,
            WallNetwork::Allowlist(hosts) => hosts.iter().any(|entry| {
                let Some((allowed, allowed_port)) = entry.rsplit_once(':') else {
                    return false;
                };
                allowed_port.parse::<u16>().ok() == Some(port)
                    && (allowed == host
                        || allowed
                            .strip_prefix("*.")
                            .is_some_and(|domain| host.ends_with(&format!(".{domain}"))))
            }),
        }
    }
}

/// Loopback and unspecified addresses and `localhost` names: the wall forwards some of this
/// machine's ports, but a web tool is never let through to them by the policy.
fn is_this_machine(host: &str) -> bool {
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback() || ip.is_unspecified(),
        Err(_) => host == "localhost" || host.ends_with(".localhost"),
    }
}

impl Scope {
    /// An unconfined scope (the strict posture); see [`Scope::with_confined`].
    pub fn new(worktree: impl Into<PathBuf>, run_branch: Option<&str>) -> Self {
        Scope {
            worktree: worktree.into(),
            run_branch: run_branch.map(str::to_string),
            confined: false,
            process_cap: false,
            head_branch: None,
            base_branch: None,
            network: None,
        }
    }

    /// The same scope, for a repository whose base branch is `base`.
    pub fn with_base_branch(mut self, base: Option<&str>) -> Scope {
        self.base_branch = base.map(str::to_string);
        self
    }

    /// The same scope, for a worker the wall gives `network` (`None`: not said).
    pub fn with_network(mut self, network: Option<WallNetwork>) -> Scope {
        self.network = network;
        self
    }

    /// The same scope, for a worker the kernel holds to its process cap (`true`) or not.
    pub fn with_process_cap(mut self, capped: bool) -> Scope {
        self.process_cap = capped;
        self
    }

    /// The same scope, for a worker inside (`true`) or outside (`false`) the wall.
    pub fn with_confined(mut self, confined: bool) -> Scope {
        self.confined = confined;
        self
    }

    /// The same scope with the worktree's symlinks resolved and its checked-out branch
    /// read (reads the filesystem).
    pub fn on_disk(&self) -> Scope {
        let worktree = resolve_on_disk(&self.worktree);
        Scope {
            head_branch: paths::checked_out_branch(&worktree),
            worktree,
            run_branch: self.run_branch.clone(),
            base_branch: self.base_branch.clone(),
            confined: self.confined,
            process_cap: self.process_cap,
            network: self.network.clone(),
        }
    }
}

/// A rule's decision, ordered by severity: `Approve < Escalate < Deny`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approve,
    Escalate,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Escalate => "escalate",
            Decision::Deny => "deny",
        }
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The answer to an action (or a list of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    /// The rule that decided; `None` when the contract's default did (or nothing was judged).
    pub rule_id: Option<String>,
    pub why: String,
    /// The owner is told even when the decision needs no answer from them.
    pub notify: bool,
}

/// The three entry points of docs/design.md §6, as one input.
#[derive(Debug, Clone)]
pub enum Input<'a> {
    /// A `[REQUEST:kind] key=value…` message, already parsed.
    Request(&'a Action),
    /// The JSON a Claude Code PreToolUse hook reads on stdin, as bytes (may be anything).
    ClaudeHook(&'a [u8]),
    /// A Codex approval request.
    Codex(&'a CodexApproval),
}

/// Classifies `input`, resolves its paths on disk and decides it: what the hook handler and
/// the message loop call. This reads the filesystem (symlinks); everything it calls besides
/// [`resolve_on_disk`] is pure. Returns the actions too, so the caller can record them.
pub fn judge(contract: &Contract, input: &Input<'_>, scope: &Scope) -> (Vec<Action>, Verdict) {
    let scope = scope.on_disk();
    let mut actions = match input {
        Input::Request(action) => vec![(*action).clone()],
        Input::ClaudeHook(bytes) => classify::claude_hook(bytes, &scope),
        Input::Codex(approval) => classify::codex(approval, &scope),
    };
    paths::resolve_actions(&mut actions, &scope.worktree);
    classify::mark_secrets(&mut actions, &scope.worktree);
    let verdict = contract.decide_all(&actions, &scope);
    (actions, verdict)
}

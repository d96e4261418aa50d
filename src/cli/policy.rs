//! `executor policy check`: asks the role contracts what they would decide about one action,
//! without a worker, so the owner can test a rule before trusting it with a run.
//!
//! It reads the contract files only; it never records a decision (nothing was asked).

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::BadInput;
use crate::config::Settings;
use crate::policy::{self, Action, Contract, Input, Scope};

/// The contract of `role`, relative to the config file's folder.
pub fn contract_path(settings: &Settings, role: &str) -> PathBuf {
    settings
        .root
        .join("roles")
        .join(format!("{role}-policy.json"))
}

/// What `policy check` is asked about.
#[derive(Debug, Clone)]
pub enum Checked {
    /// An action kind, with the `key=value` arguments beside it.
    Action(String),
    /// A shell command, judged as the hook judges a Claude Code Bash call in the worktree.
    Bash(String),
}

/// The worker a decision is checked for: inside the wall or not, held to its process cap
/// or not.
#[derive(Debug, Clone, Copy, Default)]
pub struct Posture {
    pub confined: bool,
    pub process_cap: bool,
}

/// Prints the decision, the rule and why, for `what` (with `args`, `key=value` each, for an
/// action), as for a worker in `posture` (by default the strict one: unconfined, uncapped).
pub fn check(
    settings: &Settings,
    role: &str,
    what: &Checked,
    args: &[String],
    worktree: Option<&Path>,
    branch: Option<&str>,
    posture: Posture,
) -> Result<()> {
    let Posture {
        confined,
        process_cap,
    } = posture;
    let mut parsed = Action::new(match what {
        Checked::Action(action) => action.as_str(),
        Checked::Bash(_) => "",
    });
    for arg in args {
        let Some((key, value)) = arg.split_once('=') else {
            return Err(BadInput(format!(
                "`{arg}` is not key=value (for example branch=executor/T-1)"
            ))
            .into());
        };
        if key.is_empty() {
            return Err(BadInput(format!("`{arg}` has no key before the `=`")).into());
        }
        parsed = parsed.with(key, value);
    }
    if matches!(what, Checked::Bash(_)) && !args.is_empty() {
        return Err(BadInput("arguments go with --action, not --bash".into()).into());
    }
    let path = contract_path(settings, role);
    if !path.exists() {
        return Err(BadInput(format!(
            "no contract for role `{role}`: {} does not exist (roles are worker and conductor; executor init writes them)",
            path.display()
        ))
        .into());
    }
    let contract = Contract::load(&path).map_err(|e| BadInput(e.to_string()))?;
    let worktree = worktree
        .map(Path::to_path_buf)
        .unwrap_or_else(|| settings.root.join("worktrees").join("check"));
    let scope = Scope::new(&worktree, branch)
        .with_confined(confined)
        .with_process_cap(process_cap)
        .with_base_branch(Some(&settings.raw.runner.base_branch));
    let hook_input;
    let input = match what {
        Checked::Action(_) => Input::Request(&parsed),
        Checked::Bash(command) => {
            hook_input = serde_json::json!({
                "hook_event_name": "PreToolUse",
                "tool_name": "Bash",
                "tool_input": { "command": command },
                "cwd": worktree,
            })
            .to_string();
            Input::ClaudeHook(hook_input.as_bytes())
        }
    };
    let (actions, verdict) = policy::judge(&contract, &input, &scope);
    let rule = verdict.rule_id.as_deref().unwrap_or("(default)");
    let posture = match (confined, process_cap) {
        (true, true) => "confined, process cap",
        (true, false) => "confined",
        (false, true) => "unconfined, process cap",
        (false, false) => "unconfined",
    };
    println!(
        "{}\trule {rule}\t{}\t({posture})",
        verdict.decision, verdict.why
    );
    if matches!(what, Checked::Bash(_)) {
        // What the command was classified into: the reason behind the decision.
        for action in &actions {
            println!("\t{action}");
        }
    }
    Ok(())
}

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

/// Prints the decision, the rule and why, for `action` with `args` (`key=value` each).
pub fn check(
    settings: &Settings,
    role: &str,
    action: &str,
    args: &[String],
    worktree: Option<&Path>,
    branch: Option<&str>,
) -> Result<()> {
    let mut parsed = Action::new(action);
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
    let path = contract_path(settings, role);
    if !path.exists() {
        return Err(BadInput(format!(
            "no contract for role `{role}`: {} does not exist (roles are worker and conductor)",
            path.display()
        ))
        .into());
    }
    let contract = Contract::load(&path).map_err(|e| BadInput(e.to_string()))?;
    let worktree = worktree
        .map(Path::to_path_buf)
        .unwrap_or_else(|| settings.root.join("worktrees").join("check"));
    let scope = Scope::new(worktree, branch);
    let (_, verdict) = policy::judge(&contract, &Input::Request(&parsed), &scope);
    let decision = match verdict.decision {
        policy::Decision::Approve => "approve",
        policy::Decision::Deny => "deny",
        policy::Decision::Escalate => "escalate",
    };
    let rule = verdict.rule_id.as_deref().unwrap_or("(default)");
    println!("{decision}\trule {rule}\t{}", verdict.why);
    Ok(())
}

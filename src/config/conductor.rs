//! `[conductor]`: goals split into subtasks, review rounds before integration, and the
//! record step.
//!
//! What it must never do: hold a secret (the record step uses the forge's and the sources'
//! own credentials).

use std::path::PathBuf;

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConductorSection {
    /// A task carrying one of these labels (in its facts: a GitHub or Gitea label, an Asana
    /// tag, `executor add --goal`) is split by a planner before any worker starts on it.
    #[serde(default = "default_goal_labels")]
    pub goal_labels: Vec<String>,
    /// The deepest a subtask may be (a goal's subtasks are at depth 1); a subtask that fails
    /// every retry is split again while it is shallower than this.
    #[serde(default = "default_max_depth")]
    pub max_depth: u32,
    /// Review rounds a run's diff gets before integration (0: none).
    #[serde(default)]
    pub review_rounds: u32,
    /// The build log the record step appends to (relative to this file); unset: none.
    #[serde(default)]
    pub build_log: Option<PathBuf>,
}

impl Default for ConductorSection {
    fn default() -> Self {
        Self {
            goal_labels: default_goal_labels(),
            max_depth: default_max_depth(),
            review_rounds: 0,
            build_log: None,
        }
    }
}

fn default_goal_labels() -> Vec<String> {
    vec!["goal".to_string()]
}

fn default_max_depth() -> u32 {
    2
}

/// Checks what the types cannot: `Err((key, message))`.
pub fn validate(section: &ConductorSection) -> Result<(), (&'static str, String)> {
    if section.max_depth == 0 || section.max_depth > 5 {
        return Err(("conductor.max_depth", "must be 1 to 5".into()));
    }
    if section.review_rounds > 10 {
        return Err(("conductor.review_rounds", "must be 0 to 10".into()));
    }
    if section.goal_labels.iter().any(|l| l.trim().is_empty()) {
        return Err(("conductor.goal_labels", "holds an empty label".into()));
    }
    Ok(())
}

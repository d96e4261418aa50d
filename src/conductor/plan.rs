//! The planner's answer in the `decompose` phase: the subtasks a task is split into, each
//! small enough to specify completely in one prompt, with the dependencies between them.
//! The planner writes it as JSON to [`PLAN_FILE`] at the root of its worktree:
//!
//! ```json
//! {"subtasks": [
//!   {"key": "A", "title": "…", "description": "…", "files": ["src/a.rs"],
//!    "acceptance": ["…"], "style": ["…"], "checks": ["cargo test a"], "depends_on": []}
//! ]}
//! ```
//!
//! Pure: [`parse`] checks the text and names the field at fault; nothing is created here.
//!
//! What it must never do: accept a plan that could never finish (a dependency on an unknown
//! key, a cycle, no subtasks) or whose keys could not name a task.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Where the planner writes its plan, relative to its worktree.
pub const PLAN_FILE: &str = ".executor-plan.json";

/// Subtasks one plan may hold at most.
pub const MAX_SUBTASKS: usize = 20;

/// One subtask as the planner specified it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subtask {
    /// Short and unique in the plan: `[A-Za-z0-9_-]{1,16}`; the child's gid ends with it.
    pub key: String,
    pub title: String,
    #[serde(default)]
    pub description: String,
    /// The files it may touch.
    #[serde(default)]
    pub files: Vec<String>,
    /// What must be true when it is done.
    #[serde(default)]
    pub acceptance: Vec<String>,
    /// Style constraints to follow.
    #[serde(default)]
    pub style: Vec<String>,
    /// Commands the worker can run to check its own work.
    #[serde(default)]
    pub checks: Vec<String>,
    /// Keys of the subtasks that must be complete first.
    #[serde(default)]
    pub depends_on: Vec<String>,
}

impl Subtask {
    /// The child task's description: everything a worker needs, in one prompt.
    pub fn description(&self, parent_title: &str) -> String {
        let mut out = format!("{}\n\nPart of: {parent_title}\n", self.title.trim());
        if !self.description.trim().is_empty() {
            out.push('\n');
            out.push_str(self.description.trim());
            out.push('\n');
        }
        let mut list = |heading: &str, items: &[String], code: bool| {
            if items.is_empty() {
                return;
            }
            out.push_str(&format!("\n{heading}:\n"));
            for item in items {
                if code {
                    out.push_str(&format!("- `{}`\n", item.trim()));
                } else {
                    out.push_str(&format!("- {}\n", item.trim()));
                }
            }
        };
        list("Files", &self.files, true);
        list("Acceptance criteria", &self.acceptance, false);
        list("Style constraints", &self.style, false);
        list("Self-checks to run", &self.checks, true);
        out
    }
}

/// A whole plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub subtasks: Vec<Subtask>,
}

/// Why a plan was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlanError {
    #[error("the plan is not valid JSON of the expected shape at `{field}`: {message}")]
    Shape { field: String, message: String },
    #[error("the plan's `{field}` {message}")]
    Field { field: String, message: String },
}

fn field(field: impl Into<String>, message: impl Into<String>) -> PlanError {
    PlanError::Field {
        field: field.into(),
        message: message.into(),
    }
}

/// Reads and checks a plan.
pub fn parse(text: &str) -> Result<Plan, PlanError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let plan: Plan =
        serde_path_to_error::deserialize(&mut deserializer).map_err(|e| PlanError::Shape {
            field: e.path().to_string(),
            message: e.inner().to_string(),
        })?;
    if plan.subtasks.is_empty() {
        return Err(field(
            "subtasks",
            "is empty: a plan has at least one subtask",
        ));
    }
    if plan.subtasks.len() > MAX_SUBTASKS {
        return Err(field(
            "subtasks",
            format!(
                "has {} entries; at most {MAX_SUBTASKS}",
                plan.subtasks.len()
            ),
        ));
    }
    let mut keys = BTreeSet::new();
    for (i, subtask) in plan.subtasks.iter().enumerate() {
        let key = &subtask.key;
        let valid = !key.is_empty()
            && key.len() <= 16
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(field(
                format!("subtasks[{i}].key"),
                format!("`{key}` is not 1 to 16 letters, digits, `_` or `-`"),
            ));
        }
        if !keys.insert(key.to_ascii_lowercase()) {
            return Err(field(
                format!("subtasks[{i}].key"),
                format!("`{key}` is used twice"),
            ));
        }
        if subtask.title.trim().is_empty() {
            return Err(field(format!("subtasks[{i}].title"), "is empty"));
        }
    }
    for (i, subtask) in plan.subtasks.iter().enumerate() {
        for (j, on) in subtask.depends_on.iter().enumerate() {
            if !keys.contains(&on.to_ascii_lowercase()) {
                return Err(field(
                    format!("subtasks[{i}].depends_on[{j}]"),
                    format!("names `{on}`, which is no subtask of this plan"),
                ));
            }
            if on.eq_ignore_ascii_case(&subtask.key) {
                return Err(field(
                    format!("subtasks[{i}].depends_on[{j}]"),
                    "names the subtask itself",
                ));
            }
        }
    }
    if let Some(key) = cycle(&plan) {
        return Err(field(
            "subtasks",
            format!("depend on each other in a cycle through `{key}`"),
        ));
    }
    Ok(plan)
}

/// A key on a dependency cycle, if there is one (Kahn's algorithm: what never becomes free
/// is on or behind a cycle).
fn cycle(plan: &Plan) -> Option<String> {
    let lower = |s: &str| s.to_ascii_lowercase();
    let mut waiting: BTreeMap<String, BTreeSet<String>> = plan
        .subtasks
        .iter()
        .map(|s| {
            (
                lower(&s.key),
                s.depends_on.iter().map(|d| lower(d)).collect(),
            )
        })
        .collect();
    loop {
        let free: Vec<String> = waiting
            .iter()
            .filter(|(_, on)| on.is_empty())
            .map(|(k, _)| k.clone())
            .collect();
        if free.is_empty() {
            return waiting.keys().next().cloned();
        }
        for key in &free {
            waiting.remove(key);
        }
        if waiting.is_empty() {
            return None;
        }
        for on in waiting.values_mut() {
            for key in &free {
                on.remove(key);
            }
        }
    }
}

/// The gid of the child `key` of `parent`.
pub fn child_gid(parent: &str, key: &str) -> String {
    format!("{parent}.{}", key.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const THREE: &str = r#"{"subtasks": [
        {"key": "A", "title": "Parser", "files": ["src/a.rs"], "acceptance": ["parses"], "checks": ["cargo test a"]},
        {"key": "B", "title": "Uses the parser", "depends_on": ["A"]},
        {"key": "C", "title": "Docs", "style": ["short sentences"]}
    ]}"#;

    #[test]
    fn a_plan_of_three_with_one_edge() {
        let plan = parse(THREE).expect("valid");
        assert_eq!(plan.subtasks.len(), 3);
        assert_eq!(plan.subtasks[1].depends_on, ["A"]);
        let text = plan.subtasks[0].description("The goal");
        assert!(text.starts_with("Parser\n\nPart of: The goal\n"), "{text}");
        assert!(text.contains("Files:\n- `src/a.rs`\n"), "{text}");
        assert!(text.contains("Acceptance criteria:\n- parses\n"), "{text}");
        assert!(
            text.contains("Self-checks to run:\n- `cargo test a`\n"),
            "{text}"
        );
        assert_eq!(child_gid("G-1", "A"), "G-1.a");
        assert!(crate::core::gid::validate(&child_gid("G-1", "x_y-2")).is_ok());
    }

    #[test]
    fn a_bad_plan_names_its_field() {
        let cases = [
            ("{}", "subtasks"),
            (r#"{"subtasks": []}"#, "subtasks"),
            (r#"{"subtasks": [{"key": "A"}]}"#, "subtasks[0]"),
            (
                r#"{"subtasks": [{"key": "A", "title": "x", "size": 3}]}"#,
                "subtasks[0]",
            ),
            (
                r#"{"subtasks": [{"key": "a b", "title": "x"}]}"#,
                "subtasks[0].key",
            ),
            (
                r#"{"subtasks": [{"key": "A", "title": "x"}, {"key": "a", "title": "y"}]}"#,
                "subtasks[1].key",
            ),
            (
                r#"{"subtasks": [{"key": "A", "title": " "}]}"#,
                "subtasks[0].title",
            ),
            (
                r#"{"subtasks": [{"key": "A", "title": "x", "depends_on": ["Z"]}]}"#,
                "subtasks[0].depends_on[0]",
            ),
            (
                r#"{"subtasks": [{"key": "A", "title": "x", "depends_on": ["A"]}]}"#,
                "subtasks[0].depends_on[0]",
            ),
            ("not json", ""),
        ];
        for (text, at) in cases {
            let error = parse(text).expect_err(text).to_string();
            assert!(error.contains(&format!("`{at}")), "{text}: {error}");
        }
    }

    #[test]
    fn a_cycle_is_refused() {
        let text = r#"{"subtasks": [
            {"key": "A", "title": "a", "depends_on": ["C"]},
            {"key": "B", "title": "b", "depends_on": ["A"]},
            {"key": "C", "title": "c", "depends_on": ["B"]},
            {"key": "D", "title": "d"}
        ]}"#;
        let error = parse(text).expect_err("cycle").to_string();
        assert!(error.contains("cycle"), "{error}");
    }
}

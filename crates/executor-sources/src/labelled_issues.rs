//! What the forges' issues share as work sources ([`super::github_issues`],
//! [`super::gitea_issues`]): the labels an issue is read by ([`IssueLabels`]), the task gid
//! of an issue ([`task_gid`]), and the [`Collector`] that gathers one poll's answers (one
//! request per label, merged by issue number, the newest change kept).
//!
//! What it must never do: I/O. The forge modules ask their forges; this only decides.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer};

use executor_core::facts::TaskFacts;
use executor_core::gid;
use executor_core::task::NewTask;

use super::Polled;

/// Which issues to read, as written in the config:
///
/// ```toml
/// labels = ["executor", "good-for-agent"]
/// include_closed = false
/// ```
///
/// An issue is read when it carries any one of `labels`. Unknown keys are refused, so embed
/// this as a table of its own rather than flattened into one with other keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssueLabels {
    /// Required and not empty. Names are trimmed; they are matched ignoring case.
    #[serde(deserialize_with = "label_list")]
    pub labels: Vec<String>,
    /// Whether the first read (a poll without `since`) takes issues already closed. Off, a
    /// repository's closed history stays out of the queue; later polls always take
    /// closings, so a queued issue closed upstream comes back with `closed = true`.
    #[serde(default)]
    pub include_closed: bool,
}

impl IssueLabels {
    /// Why these labels cannot be asked of `forge` (`GitHub`, `Gitea`): none at all, an
    /// empty one, or one holding a comma (the forges' label filter is a comma list).
    pub fn problem(&self, forge: &str) -> Option<String> {
        if self.labels.is_empty() {
            return Some(format!("no labels to read {forge} issues by"));
        }
        for label in &self.labels {
            if label.trim().is_empty() {
                return Some(format!("an empty label among the {forge} issue labels"));
            }
            if label.contains(',') {
                return Some(format!(
                    "the label `{label}` holds a comma, which {forge}'s labels filter cannot ask for"
                ));
            }
        }
        None
    }

    /// The labels to ask for, each once (ignoring case), in config order.
    pub fn labels_to_ask(&self) -> Vec<&str> {
        let mut seen: Vec<String> = Vec::new();
        let mut labels = Vec::new();
        for label in &self.labels {
            let label = label.trim();
            let folded = label.to_lowercase();
            if !seen.contains(&folded) {
                seen.push(folded);
                labels.push(label);
            }
        }
        labels
    }
}

fn label_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    let labels = Vec::<String>::deserialize(deserializer)?;
    Ok(labels.into_iter().map(|l| l.trim().to_owned()).collect())
}

/// The task gid of issue `number` of `repo_full_name` (`owner/repo`):
/// `{prefix}:{owner}:{repo}#{number}` in lower case (forge names are case-insensitive, so a
/// config that changes case keeps the same tasks; they hold neither `:` nor `#`, so the
/// form is unambiguous), or `{prefix}:{hash}#{number}` when that is no valid gid (over 128
/// characters, say). Always a valid gid.
pub fn task_gid(prefix: &str, repo_full_name: &str, number: u64) -> String {
    let folded = repo_full_name.trim().to_lowercase();
    let readable = match folded.split_once('/') {
        Some((owner, repo)) => format!("{prefix}:{owner}:{repo}#{number}"),
        None => format!("{prefix}:{folded}#{number}"),
    };
    if gid::validate(&readable) == Ok(readable.as_str()) {
        readable
    } else {
        format!("{prefix}:{}#{number}", gid::short_hash(&folded))
    }
}

/// An issue as a forge lists it, as far as the [`Collector`] looks.
pub trait LabelledIssue {
    fn number(&self) -> u64;
    fn updated_at(&self) -> DateTime<Utc>;
    /// Forges list pull requests among issues; they never become tasks.
    fn is_pull_request(&self) -> bool;
    fn label_names(&self) -> Vec<&str>;
}

/// Gathers the issues of one poll: each number once, the newest change kept.
pub struct Collector<'a, I> {
    since: Option<DateTime<Utc>>,
    /// The scope's labels, lower case.
    wanted: Vec<String>,
    convert: &'a (dyn Fn(&I) -> (NewTask, TaskFacts) + Sync),
    tasks: Vec<(NewTask, TaskFacts)>,
    index: HashMap<u64, usize>,
    newest: Option<DateTime<Utc>>,
}

impl<'a, I: LabelledIssue> Collector<'a, I> {
    /// Keeps issues changed after `since` that carry one of `wanted`, as `convert` makes them.
    pub fn new(
        since: Option<DateTime<Utc>>,
        wanted: &[&str],
        convert: &'a (dyn Fn(&I) -> (NewTask, TaskFacts) + Sync),
    ) -> Self {
        Self {
            since,
            wanted: wanted.iter().map(|l| l.to_lowercase()).collect(),
            convert,
            tasks: Vec::new(),
            index: HashMap::new(),
            newest: None,
        }
    }

    pub fn add_all(&mut self, issues: &[I]) {
        for issue in issues {
            self.add(issue);
        }
    }

    fn add(&mut self, issue: &I) {
        if issue.is_pull_request() {
            return;
        }
        if self.since.is_some_and(|since| issue.updated_at() <= since) {
            return;
        }
        // The forge answered a label query, so the label should be there; checked anyway,
        // so the source's promise does not rest on the server's filter.
        let carries_one = issue
            .label_names()
            .iter()
            .any(|name| self.wanted.contains(&name.to_lowercase()));
        if !carries_one {
            tracing::debug!(
                number = issue.number(),
                "an issue without any of the labels is left out"
            );
            return;
        }
        self.newest = self.newest.max(Some(issue.updated_at()));
        let converted = (self.convert)(issue);
        match self.index.entry(issue.number()) {
            Entry::Vacant(slot) => {
                slot.insert(self.tasks.len());
                self.tasks.push(converted);
            }
            Entry::Occupied(slot) => {
                let kept = &mut self.tasks[*slot.get()];
                if converted.1.modified_at > kept.1.modified_at {
                    // Read again after a change: the newer copy wins, the place stays.
                    *kept = converted;
                }
            }
        }
    }

    pub fn finish(self) -> Polled {
        Polled {
            tasks: self.tasks,
            newest_change: self.newest,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gid_is_readable_and_falls_back_to_a_hash() {
        assert_eq!(task_gid("gh", "Owner/Repo", 7), "gh:owner:repo#7");
        let long = format!("o/{}", "r".repeat(200));
        let hashed = task_gid("gitea", &long, 7);
        assert!(
            hashed.starts_with("gitea:") && hashed.ends_with("#7"),
            "{hashed}"
        );
        assert!(gid::validate(&hashed).is_ok());
    }

    #[test]
    fn the_labels_name_the_forge_in_what_is_wrong() {
        let labels = |names: &[&str]| IssueLabels {
            labels: names.iter().map(|n| n.to_string()).collect(),
            include_closed: false,
        };
        assert_eq!(labels(&["a"]).problem("Gitea"), None);
        assert_eq!(
            labels(&[]).problem("GitHub").as_deref(),
            Some("no labels to read GitHub issues by")
        );
        assert!(labels(&["a,b"])
            .problem("Gitea")
            .is_some_and(|p| p.contains("Gitea's labels filter")));
    }
}

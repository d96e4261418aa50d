//! Gitea issues as a work source: the issues of a Gitea repository that carry one of the
//! configured labels become [`NewTask`]s (status `pending`: they go through the analyzer)
//! with their [`TaskFacts`] (assignee, closed, labels, repository, link, last change). Pull
//! requests never become tasks.
//!
//! Theory of operation, as for GitHub issues ([`super::github_issues`]). [`poll`] asks
//! [`GiteaClient::list_issues`] once per configured label and gathers the answers, each
//! issue once, with the newest `updated_at` it saw; the caller upserts the tasks and passes
//! that time back as the next poll's `since`. The first poll (no `since`) reads open issues
//! only, unless [`GiteaIssuesScope::include_closed`]; later polls read open and closed
//! issues changed since then, so an issue closed upstream comes back with `closed = true`.
//! A poll that fails for any label fails whole, so `since` never moves past issues not read.
//! Gitea lists newest created first and pages by position: an issue opened during a read
//! only repeats one already read, but one that loses its label (or is deleted) during a read
//! can move an older one past a page boundary, unread until it changes again.
//!
//! Label semantics: any of them. Gitea's `labels=a,b` matches issues carrying all of them
//! (though documented as "any"), and drops names the repository has no label for, so each
//! label is asked for on its own, the client keeps only issues that carry an asked label,
//! and the answers are merged by issue number.
//!
//! Task gids: `gitea:{owner}:{repo}#{number}`, owner and repository in lower case (Gitea
//! names are case-insensitive). Gitea names hold neither `:` nor `#`, so the form is
//! unambiguous; when it is not a valid gid (over 128 characters, say) it is
//! `gitea:{hash}#{number}`, the hash of the lower-case `owner/repo` ([`gid::short_hash`]).
//!
//! What it must never do: write to the store (the caller does), write to Gitea, or take a
//! pull request for an issue.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer};

use crate::core::facts::TaskFacts;
use crate::core::gid;
use crate::core::queue::QueueStatus;
use crate::core::task::{compose_description, NewTask};
use crate::forge::gitea::{
    GiteaClient, GiteaError, GiteaIssue, GiteaIssueQuery, GiteaIssueState, GiteaStateFilter,
};

pub use super::Polled;

/// The source name of tasks from Gitea issues.
pub const SOURCE: &str = "gitea";

/// Which issues to read: those carrying any one of `labels`. Unknown keys are refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GiteaIssuesScope {
    /// Required and not empty. Names are trimmed; they are matched ignoring case.
    #[serde(deserialize_with = "label_list")]
    pub labels: Vec<String>,
    /// Whether the first read (a poll without `since`) takes issues already closed. Later
    /// polls always take closings.
    #[serde(default)]
    pub include_closed: bool,
}

impl GiteaIssuesScope {
    /// At least one label, none empty, none holding a comma (Gitea's filter is a comma
    /// list, so such a label cannot be asked for).
    pub fn validate(&self) -> Result<(), GiteaError> {
        if self.labels.is_empty() {
            return Err(GiteaError::Settings(
                "no labels to read Gitea issues by".into(),
            ));
        }
        for label in &self.labels {
            if label.trim().is_empty() {
                return Err(GiteaError::Settings(
                    "an empty label among the Gitea issue labels".into(),
                ));
            }
            if label.contains(',') {
                return Err(GiteaError::Settings(format!(
                    "the label `{label}` holds a comma, which Gitea's labels filter cannot ask for"
                )));
            }
        }
        Ok(())
    }

    /// The labels to ask for, each once (ignoring case), in config order.
    fn labels_to_ask(&self) -> Vec<&str> {
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

/// Reads every label of `scope` in `owner/repo` once. With `since`, only issues updated
/// after it come (closed ones included); without, every open issue (closed ones too with
/// [`GiteaIssuesScope::include_closed`]).
///
/// Gitea's `since` is "updated at or after", in whole seconds; an issue whose `updated_at`
/// is not after `since` is left out here, as the poll that returned `since` saw it.
pub async fn poll(
    client: &GiteaClient,
    owner: &str,
    repo: &str,
    scope: &GiteaIssuesScope,
    since: Option<DateTime<Utc>>,
) -> Result<Polled, GiteaError> {
    scope.validate()?;
    let repo_full_name = format!("{owner}/{repo}");
    let state = if since.is_some() || scope.include_closed {
        GiteaStateFilter::All
    } else {
        GiteaStateFilter::Open
    };
    let wanted = scope.labels_to_ask();
    let mut collector = Collector::new(since, &repo_full_name, &wanted);
    for label in &wanted {
        let query = GiteaIssueQuery {
            labels: vec![(*label).to_owned()],
            state,
            since,
        };
        let issues = client.list_issues(owner, repo, &query).await?;
        collector.add_all(&issues);
    }
    Ok(collector.finish())
}

/// A Gitea issue as a queue task and its facts. `repo_full_name` is `owner/repo`, the
/// repository it was read from.
pub fn convert(issue: &GiteaIssue, repo_full_name: &str) -> (NewTask, TaskFacts) {
    let title = match issue.title.trim() {
        "" => format!("Gitea issue #{}", issue.number),
        title => title.to_owned(),
    };
    let new = NewTask {
        task_gid: task_gid(repo_full_name, issue.number),
        source: SOURCE.to_owned(),
        description: compose_description(&title, &issue.body),
        // The owner's context, not the issue's text; `None` leaves whatever is stored.
        notes: None,
        priority: None,
        initial_status: QueueStatus::Pending,
    };
    let assignee = issue.first_assignee().filter(|a| !a.login.is_empty());
    let facts = TaskFacts {
        assignee: assignee.map(|a| a.login.clone()),
        assignee_id: assignee.map(|a| a.id.to_string()),
        closed: issue.state == GiteaIssueState::Closed,
        labels: issue.label_names().map(str::to_owned).collect(),
        location: Some(repo_full_name.to_owned()),
        url: (!issue.html_url.is_empty()).then(|| issue.html_url.clone()),
        modified_at: Some(issue.updated_at),
    };
    (new, facts)
}

/// The task gid of issue `number` of `repo_full_name` (`owner/repo`); see the module notes
/// for the form and its fallback. Always a valid gid.
pub fn task_gid(repo_full_name: &str, number: u64) -> String {
    let folded = repo_full_name.trim().to_lowercase();
    let readable = match folded.split_once('/') {
        Some((owner, repo)) => format!("gitea:{owner}:{repo}#{number}"),
        None => format!("gitea:{folded}#{number}"),
    };
    if gid::validate(&readable) == Ok(readable.as_str()) {
        readable
    } else {
        format!("gitea:{}#{number}", gid::short_hash(&folded))
    }
}

/// Gathers the issues of one poll: each number once, the newest change kept.
struct Collector<'a> {
    since: Option<DateTime<Utc>>,
    repo_full_name: &'a str,
    /// The scope's labels, lower case.
    wanted: Vec<String>,
    tasks: Vec<(NewTask, TaskFacts)>,
    index: HashMap<u64, usize>,
    newest: Option<DateTime<Utc>>,
}

impl<'a> Collector<'a> {
    fn new(since: Option<DateTime<Utc>>, repo_full_name: &'a str, wanted: &[&str]) -> Self {
        Self {
            since,
            repo_full_name,
            wanted: wanted.iter().map(|l| l.to_lowercase()).collect(),
            tasks: Vec::new(),
            index: HashMap::new(),
            newest: None,
        }
    }

    fn add_all(&mut self, issues: &[GiteaIssue]) {
        for issue in issues {
            self.add(issue);
        }
    }

    fn add(&mut self, issue: &GiteaIssue) {
        if issue.is_pull_request() {
            return;
        }
        if self.since.is_some_and(|since| issue.updated_at <= since) {
            return;
        }
        let carries_one = issue
            .label_names()
            .any(|name| self.wanted.contains(&name.to_lowercase()));
        if !carries_one {
            tracing::debug!(
                number = issue.number,
                "a Gitea issue without any of the labels is left out"
            );
            return;
        }
        self.newest = self.newest.max(Some(issue.updated_at));
        let converted = convert(issue, self.repo_full_name);
        match self.index.entry(issue.number) {
            Entry::Vacant(slot) => {
                slot.insert(self.tasks.len());
                self.tasks.push(converted);
            }
            Entry::Occupied(slot) => {
                let kept = &mut self.tasks[*slot.get()];
                if converted.1.modified_at > kept.1.modified_at {
                    *kept = converted;
                }
            }
        }
    }

    fn finish(self) -> Polled {
        Polled {
            tasks: self.tasks,
            newest_change: self.newest,
        }
    }
}

fn label_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    let labels = Vec::<String>::deserialize(deserializer)?;
    Ok(labels.into_iter().map(|l| l.trim().to_owned()).collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const REPO: &str = "mkowalski/lumen-browser";

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("timestamp")
            .with_timezone(&Utc)
    }

    fn issue(number: u64, updated: &str, labels: &[&str]) -> GiteaIssue {
        serde_json::from_value(json!({
            "id": 4000 + number, "number": number,
            "title": format!("Issue {number}"), "body": "Steps to reproduce.",
            "state": "open",
            "labels": labels.iter().enumerate()
                .map(|(i, name)| json!({ "id": i + 1, "name": name })).collect::<Vec<_>>(),
            "assignee": null, "assignees": null,
            "user": { "id": 3, "login": "mkowalski" },
            "html_url": format!("https://gitea.example.com/{REPO}/issues/{number}"),
            "created_at": "2026-03-16T08:00:00+01:00", "updated_at": updated, "closed_at": null,
            "pull_request": null,
        }))
        .expect("issue")
    }

    #[test]
    fn an_issue_becomes_a_pending_gitea_task_with_its_facts() {
        let mut issue = issue(812, "2026-03-16T10:00:00+01:00", &["executor", "macOS"]);
        issue.title = "  Reader mode drops srcset-only images ".into();
        issue.body = "\nOpen a page with srcset only.\n".into();
        issue.state = GiteaIssueState::Closed;
        issue.assignees = vec![crate::forge::gitea::GiteaUser {
            id: 3,
            login: "mkowalski".into(),
        }];
        let (task, facts) = convert(&issue, REPO);
        assert_eq!(task.task_gid, "gitea:mkowalski:lumen-browser#812");
        assert_eq!(task.source, "gitea");
        assert_eq!(task.initial_status, QueueStatus::Pending);
        assert_eq!((task.notes, task.priority), (None, None));
        assert_eq!(
            task.description,
            "# Reader mode drops srcset-only images\n\nOpen a page with srcset only."
        );
        assert_eq!(
            facts,
            TaskFacts {
                assignee: Some("mkowalski".into()),
                assignee_id: Some("3".into()),
                closed: true,
                labels: vec!["executor".into(), "macOS".into()],
                location: Some(REPO.into()),
                url: Some("https://gitea.example.com/mkowalski/lumen-browser/issues/812".into()),
                modified_at: Some(at("2026-03-16T09:00:00Z")),
            }
        );
    }

    #[test]
    fn an_untitled_issue_without_a_body_still_has_a_title() {
        let mut issue = issue(7, "2026-03-16T09:00:00Z", &["executor"]);
        issue.title = " ".into();
        issue.body = String::new();
        let (task, facts) = convert(&issue, REPO);
        assert_eq!(task.description, "# Gitea issue #7");
        assert!(!facts.closed);
        assert_eq!(facts.assignee, None);
    }

    #[test]
    fn task_gids_are_valid_stable_and_fall_back_to_a_hash() {
        assert_eq!(
            task_gid("MKowalski/Lumen-Browser", 12),
            "gitea:mkowalski:lumen-browser#12"
        );
        assert_eq!(task_gid("org/site.io", 3), "gitea:org:site.io#3");
        let long = format!("{}/{}", "o".repeat(40), "r".repeat(100));
        let odd = "owner/repo with space";
        for repo in [long.as_str(), odd] {
            let gid = task_gid(repo, 4711);
            assert_eq!(gid::validate(&gid), Ok(gid.as_str()), "{gid}");
            assert!(gid.starts_with("gitea:") && gid.ends_with("#4711"), "{gid}");
            assert_eq!(gid, task_gid(&repo.to_uppercase(), 4711));
        }
        assert_ne!(task_gid(&long, 1), task_gid(odd, 1));
        assert_ne!(
            task_gid(REPO, 1),
            crate::sources::github_issues::task_gid(REPO, 1)
        );
    }

    #[test]
    fn an_issue_under_two_labels_comes_once_as_last_updated() {
        let mut collector = Collector::new(None, REPO, &["executor", "Agent"]);
        collector.add_all(&[
            issue(1, "2026-03-16T09:00:00Z", &["executor"]),
            issue(2, "2026-03-16T09:01:00Z", &["executor", "agent"]),
        ]);
        let mut renamed = issue(2, "2026-03-16T09:05:00Z", &["executor", "agent"]);
        renamed.title = "Issue 2, renamed meanwhile".into();
        collector.add_all(&[renamed, issue(3, "2026-03-16T08:00:00Z", &["AGENT"])]);
        let polled = collector.finish();
        let described: Vec<(&str, &str)> = polled
            .tasks
            .iter()
            .map(|(t, _)| (t.task_gid.as_str(), t.description.as_str()))
            .collect();
        assert_eq!(
            described,
            [
                (
                    "gitea:mkowalski:lumen-browser#1",
                    "# Issue 1\n\nSteps to reproduce."
                ),
                (
                    "gitea:mkowalski:lumen-browser#2",
                    "# Issue 2, renamed meanwhile\n\nSteps to reproduce."
                ),
                (
                    "gitea:mkowalski:lumen-browser#3",
                    "# Issue 3\n\nSteps to reproduce."
                ),
            ]
        );
        assert_eq!(polled.newest_change, Some(at("2026-03-16T09:05:00Z")));
    }

    #[test]
    fn since_pull_requests_and_unlabelled_issues_are_left_out() {
        let since = at("2026-03-16T09:00:00Z");
        let mut collector = Collector::new(Some(since), REPO, &["executor"]);
        let mut pr = issue(4, "2026-03-16T09:10:00Z", &["executor"]);
        pr.pull_request = Some(Default::default());
        collector.add_all(&[
            issue(1, "2026-03-16T09:00:00Z", &["executor"]),
            issue(2, "2026-03-16T10:00:01+01:00", &["executor"]),
            issue(3, "2026-03-16T09:20:00Z", &["wontfix"]),
            pr,
        ]);
        let polled = collector.finish();
        assert_eq!(polled.tasks.len(), 1);
        assert_eq!(
            polled.tasks[0].0.task_gid,
            "gitea:mkowalski:lumen-browser#2"
        );
        assert_eq!(
            polled.next_since(Some(since)),
            Some(at("2026-03-16T09:00:01Z"))
        );
    }

    #[test]
    fn the_scope_refuses_what_cannot_be_asked_for_and_asks_each_label_once() {
        let scope: GiteaIssuesScope = toml::from_str(
            r#"
            labels = [" executor ", "Agent", "EXECUTOR"]
            include_closed = true
            "#,
        )
        .expect("scope");
        assert!(scope.validate().is_ok());
        assert!(scope.include_closed);
        assert_eq!(scope.labels_to_ask(), ["executor", "Agent"]);
        let typo = toml::from_str::<GiteaIssuesScope>("labels = [\"x\"]\nlabel = \"y\"")
            .expect_err("unknown key");
        assert!(typo.to_string().contains("label"), "{typo}");
        for labels in [vec![], vec![" ".to_owned()], vec!["a,b".to_owned()]] {
            let scope = GiteaIssuesScope {
                labels,
                include_closed: false,
            };
            let error = scope.validate().expect_err("invalid labels");
            assert!(matches!(error, GiteaError::Settings(_)), "{error:?}");
        }
    }
}

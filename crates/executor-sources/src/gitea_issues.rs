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

use chrono::{DateTime, Utc};

use executor_core::facts::TaskFacts;
use executor_core::queue::QueueStatus;
use executor_core::task::{compose_description, NewTask};
use executor_http::gitea::{
    GiteaClient, GiteaError, GiteaIssue, GiteaIssueQuery, GiteaIssueState, GiteaStateFilter,
};

use super::labelled_issues::{self, Collector, IssueLabels, LabelledIssue};
pub use super::Polled;

/// The source name of tasks from Gitea issues.
pub const SOURCE: &str = "gitea";

/// Which issues to read: those carrying any one of the labels (see [`IssueLabels`]).
pub type GiteaIssuesScope = IssueLabels;

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
    if let Some(problem) = scope.problem("Gitea") {
        return Err(GiteaError::Settings(problem));
    }
    let repo_full_name = format!("{owner}/{repo}");
    let state = if since.is_some() || scope.include_closed {
        GiteaStateFilter::All
    } else {
        GiteaStateFilter::Open
    };
    let wanted = scope.labels_to_ask();
    let convert = |issue: &_| convert(issue, &repo_full_name);
    let mut collector = Collector::new(since, &wanted, &convert);
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
        title => executor_core::task::capped_title(title),
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
    labelled_issues::task_gid("gitea", repo_full_name, number)
}

impl LabelledIssue for GiteaIssue {
    fn number(&self) -> u64 {
        self.number
    }
    fn updated_at(&self) -> DateTime<Utc> {
        self.updated_at
    }
    fn is_pull_request(&self) -> bool {
        GiteaIssue::is_pull_request(self)
    }
    fn label_names(&self) -> Vec<&str> {
        GiteaIssue::label_names(self).collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use executor_core::gid;

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
        issue.assignees = vec![executor_http::gitea::GiteaUser {
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
        assert_ne!(task_gid(REPO, 1), crate::github_issues::task_gid(REPO, 1));
    }

    #[test]
    fn an_issue_under_two_labels_comes_once_as_last_updated() {
        let convert = |issue: &GiteaIssue| convert(issue, REPO);
        let mut collector = Collector::new(None, &["executor", "Agent"], &convert);
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
        let convert = |issue: &GiteaIssue| convert(issue, REPO);
        let mut collector = Collector::new(Some(since), &["executor"], &convert);
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
        assert_eq!(scope.problem("Gitea"), None);
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
            assert!(scope.problem("Gitea").is_some(), "{scope:?}");
        }
    }
}

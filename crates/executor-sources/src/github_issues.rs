//! GitHub issues as a work source: the issues of the client's repository that carry one of
//! the configured labels become [`NewTask`]s (status `pending`: they go through the
//! analyzer) with their [`TaskFacts`] (assignee, closed, labels, repository, link, last
//! change). Pull requests, which GitHub lists among the issues, never become tasks.
//!
//! Theory of operation. [`poll`] asks [`GithubClient::list_issues`] once per configured
//! label and gathers the answers, each issue once, with the newest `updated_at` it saw. The
//! caller upserts the tasks and passes that time back as the next poll's `since`. The first
//! poll (no `since`) reads open issues only, unless [`GithubIssuesScope::include_closed`];
//! later polls read open and closed issues changed since then, so an issue closed upstream
//! comes back with `closed = true`. A poll that fails for any label fails whole, so `since`
//! never moves past issues not read. An unchanged poll repeats the same URLs, which the
//! client revalidates with their ETags: `304`s, which GitHub does not count against the rate
//! limit.
//!
//! Label semantics: any of them. GitHub's `labels=a,b` filter means "all of a and b", so
//! each label is asked for on its own and the answers are merged by issue number; one
//! label costs one request per page and poll, three labels three.
//!
//! Task gids: `gh:{owner}:{repo}#{number}`, owner and repository in lower case (GitHub
//! names are case-insensitive, so a config that changes case keeps the same tasks). A gid
//! may not hold `/` (it names a folder), and GitHub names hold neither `:` nor `#`, so the
//! form is unambiguous. When that form is not a valid gid (over 128 characters, or a name
//! with characters a gid refuses) it is `gh:{hash}#{number}`, the hash of the lower-case
//! `owner/repo` ([`gid::short_hash`]): stable, if less readable.
//!
//! What it must never do: write to the store (the caller does), write to GitHub, or take a
//! pull request for an issue.

use chrono::{DateTime, Utc};

use executor_core::facts::TaskFacts;
use executor_core::queue::QueueStatus;
use executor_core::task::{compose_description, NewTask};
use executor_http::github::{
    GithubClient, GithubError, Issue, IssueQuery, IssueState, IssueStateFilter,
};

/// The source name of tasks from GitHub issues.
pub const SOURCE: &str = "github";

/// Which issues to read: those carrying any one of the labels (see [`IssueLabels`]).
pub type GithubIssuesScope = IssueLabels;

use super::labelled_issues::{self, Collector, IssueLabels, LabelledIssue};
pub use super::Polled;

/// Reads every label once. With `since`, only issues updated after it come (closed ones
/// included); without, every open issue (closed ones too with
/// [`GithubIssuesScope::include_closed`]).
///
/// GitHub's `since` is "updated at or after"; an issue whose `updated_at` is not after
/// `since` is left out here, as the poll that returned `since` saw it. GitHub's times are
/// whole seconds, so an issue changed in the same second as the newest one seen, but after
/// that poll read it, is missed (until it changes again). A caller that cannot accept that
/// passes a `since` a few seconds earlier than [`Polled::next_since`]: the issues of those
/// seconds come again and upsert as unchanged.
pub async fn poll(
    client: &GithubClient,
    scope: &GithubIssuesScope,
    since: Option<DateTime<Utc>>,
) -> Result<Polled, GithubError> {
    if let Some(problem) = scope.problem("GitHub") {
        return Err(GithubError::Settings(problem));
    }
    let (owner, repo) = client.repository();
    let repo_full_name = format!("{owner}/{repo}");
    let state = if since.is_some() || scope.include_closed {
        IssueStateFilter::All
    } else {
        IssueStateFilter::Open
    };
    let wanted = scope.labels_to_ask();
    let convert = |issue: &_| convert(issue, &repo_full_name);
    let mut collector = Collector::new(since, &wanted, &convert);
    for label in &wanted {
        let query = IssueQuery {
            state,
            labels: vec![(*label).to_owned()],
            since,
        };
        let issues = client.list_issues(&query).await?;
        collector.add_all(&issues);
    }
    Ok(collector.finish())
}

/// A GitHub issue as a queue task and its facts. `repo_full_name` is `owner/repo`, the
/// repository it was read from.
pub fn convert(issue: &Issue, repo_full_name: &str) -> (NewTask, TaskFacts) {
    let title = match issue.title.trim() {
        "" => format!("GitHub issue #{}", issue.number),
        title => executor_core::task::capped_title(title),
    };
    let new = NewTask {
        task_gid: task_gid(repo_full_name, issue.number),
        source: SOURCE.to_owned(),
        description: compose_description(&title, issue.body.as_deref().unwrap_or("")),
        // The queue's `notes` column is the owner's context, not the issue's text (that is
        // the description's body); `None` leaves whatever is stored.
        notes: None,
        priority: None,
        initial_status: QueueStatus::Pending,
    };
    let facts = TaskFacts {
        assignee: issue.assignee.as_ref().map(|a| a.login.clone()),
        assignee_id: issue.assignee.as_ref().map(|a| a.id.to_string()),
        closed: issue.state == IssueState::Closed,
        labels: issue.label_names().map(str::to_owned).collect(),
        location: Some(repo_full_name.to_owned()),
        url: Some(issue.html_url.clone()),
        modified_at: Some(issue.updated_at),
    };
    (new, facts)
}

/// The task gid of issue `number` of `repo_full_name` (`owner/repo`); see the module notes
/// for the form and its fallback. Always a valid gid.
pub fn task_gid(repo_full_name: &str, number: u64) -> String {
    labelled_issues::task_gid("gh", repo_full_name, number)
}

impl LabelledIssue for Issue {
    fn number(&self) -> u64 {
        self.number
    }
    fn updated_at(&self) -> DateTime<Utc> {
        self.updated_at
    }
    fn is_pull_request(&self) -> bool {
        Issue::is_pull_request(self)
    }
    fn label_names(&self) -> Vec<&str> {
        Issue::label_names(self).collect()
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

    fn issue(number: u64, updated: &str, labels: &[&str]) -> Issue {
        serde_json::from_value(json!({
            "id": 2_900_000_000u64 + number, "node_id": format!("I_fake{number}"),
            "number": number, "title": format!("Issue {number}"), "body": "Steps to reproduce.",
            "state": "open", "state_reason": null,
            "labels": labels.iter().map(|name| json!({ "name": name })).collect::<Vec<_>>(),
            "assignee": null, "assignees": [],
            "user": { "login": "mkowalski", "id": 5120387, "type": "User" },
            "html_url": format!("https://github.com/{REPO}/issues/{number}"),
            "created_at": "2026-03-16T08:00:00Z", "updated_at": updated, "closed_at": null,
        }))
        .expect("issue")
    }

    #[test]
    fn an_issue_becomes_a_pending_github_task_with_its_facts() {
        let mut issue = issue(812, "2026-03-16T09:00:00Z", &["executor", "macOS"]);
        issue.title = "  Reader mode drops srcset-only images ".into();
        issue.body = Some("\nOpen a page with srcset only.\n".into());
        issue.state = IssueState::Closed;
        issue.assignee = Some(executor_http::github::User {
            login: "mkowalski".into(),
            id: 5120387,
            kind: "User".into(),
        });
        let (task, facts) = convert(&issue, REPO);
        assert_eq!(task.task_gid, "gh:mkowalski:lumen-browser#812");
        assert_eq!(task.source, "github");
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
                assignee_id: Some("5120387".into()),
                closed: true,
                labels: vec!["executor".into(), "macOS".into()],
                location: Some(REPO.into()),
                url: Some("https://github.com/mkowalski/lumen-browser/issues/812".into()),
                modified_at: Some(at("2026-03-16T09:00:00Z")),
            }
        );
    }

    #[test]
    fn an_untitled_issue_without_a_body_still_has_a_title() {
        let mut issue = issue(7, "2026-03-16T09:00:00Z", &["executor"]);
        issue.title = " ".into();
        issue.body = None;
        let (task, facts) = convert(&issue, REPO);
        assert_eq!(task.description, "# GitHub issue #7");
        assert!(!facts.closed);
        assert_eq!(facts.assignee, None);
    }

    #[test]
    fn task_gids_are_valid_stable_and_fall_back_to_a_hash() {
        let cases = [
            (
                "mkowalski/lumen-browser",
                12,
                "gh:mkowalski:lumen-browser#12",
            ),
            (
                "MKowalski/Lumen-Browser",
                12,
                "gh:mkowalski:lumen-browser#12",
            ),
            ("octo-org/site.github.io", 3, "gh:octo-org:site.github.io#3"),
        ];
        for (repo, number, expected) in cases {
            assert_eq!(task_gid(repo, number), expected);
        }
        let long = format!("{}/{}", "o".repeat(39), "r".repeat(100));
        let odd = "owner/repo with space";
        for repo in [long.as_str(), odd] {
            let gid = task_gid(repo, 4711);
            assert_eq!(gid::validate(&gid), Ok(gid.as_str()), "{gid}");
            assert!(gid.starts_with("gh:") && gid.ends_with("#4711"), "{gid}");
            assert_eq!(gid, task_gid(&repo.to_uppercase(), 4711));
        }
        assert_ne!(task_gid(&long, 1), task_gid(odd, 1));
    }

    #[test]
    fn an_issue_under_two_labels_comes_once_as_last_updated() {
        let convert = |issue: &Issue| convert(issue, REPO);
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
                    "gh:mkowalski:lumen-browser#1",
                    "# Issue 1\n\nSteps to reproduce."
                ),
                (
                    "gh:mkowalski:lumen-browser#2",
                    "# Issue 2, renamed meanwhile\n\nSteps to reproduce."
                ),
                (
                    "gh:mkowalski:lumen-browser#3",
                    "# Issue 3\n\nSteps to reproduce."
                ),
            ]
        );
        assert_eq!(polled.newest_change, Some(at("2026-03-16T09:05:00Z")));
    }

    #[test]
    fn since_pull_requests_and_unlabelled_issues_are_left_out() {
        let since = at("2026-03-16T09:00:00Z");
        let convert = |issue: &Issue| convert(issue, REPO);
        let mut collector = Collector::new(Some(since), &["executor"], &convert);
        let mut pr = issue(4, "2026-03-16T09:10:00Z", &["executor"]);
        pr.pull_request = Some(Default::default());
        collector.add_all(&[
            issue(1, "2026-03-16T09:00:00Z", &["executor"]),
            issue(2, "2026-03-16T09:00:01Z", &["executor"]),
            issue(3, "2026-03-16T09:20:00Z", &["wontfix"]),
            pr,
        ]);
        let polled = collector.finish();
        assert_eq!(polled.tasks.len(), 1);
        assert_eq!(polled.tasks[0].0.task_gid, "gh:mkowalski:lumen-browser#2");
        assert_eq!(
            polled.next_since(Some(since)),
            Some(at("2026-03-16T09:00:01Z"))
        );
        assert_eq!(Polled::default().next_since(Some(since)), Some(since));
        assert_eq!(Polled::default().next_since(None), None);
    }

    #[test]
    fn the_scope_reads_from_toml_and_refuses_what_cannot_be_asked_for() {
        let scope: GithubIssuesScope = toml::from_str(
            r#"
            labels = [" executor ", "good first agent task"]
            include_closed = true
            "#,
        )
        .expect("scope");
        assert_eq!(
            scope,
            GithubIssuesScope {
                labels: vec!["executor".into(), "good first agent task".into()],
                include_closed: true,
            }
        );
        assert_eq!(scope.problem("GitHub"), None);

        let missing = toml::from_str::<GithubIssuesScope>("include_closed = true")
            .expect_err("labels are required");
        assert!(missing.to_string().contains("labels"), "{missing}");
        let typo = toml::from_str::<GithubIssuesScope>(
            r#"labels = ["x"]
label = "y""#,
        )
        .expect_err("unknown key");
        assert!(typo.to_string().contains("label"), "{typo}");

        let invalid = [
            vec![],
            vec!["executor".to_owned(), " ".to_owned()],
            vec!["a,b".to_owned()],
        ];
        for labels in invalid {
            let scope = GithubIssuesScope {
                labels,
                include_closed: false,
            };
            assert!(scope.problem("GitHub").is_some(), "{scope:?}");
        }
    }

    #[test]
    fn each_label_is_asked_for_once_ignoring_case() {
        let scope = GithubIssuesScope {
            labels: vec!["executor".into(), "Agent".into(), "EXECUTOR".into()],
            include_closed: false,
        };
        assert_eq!(scope.labels_to_ask(), ["executor", "Agent"]);
    }
}

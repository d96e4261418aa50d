//! Asana as a work source: the tasks of configured projects, sections and the token owner's
//! My Tasks become [`NewTask`]s (status `pending`: they go through the analyzer) with their
//! [`TaskFacts`] (assignee, completed, tags, project and section, link, last change).
//!
//! | file | holds |
//! |---|---|
//! | `client.rs` | [`AsanaClient`]: auth, timeouts, offset pagination with a guard, the calls |
//! | `types.rs` | the response shapes ([`AsanaTask`], [`AsanaStory`]) and the `opt_fields` asked for |
//! | `error.rs` | [`AsanaError`]: what went wrong, whether it passes, and when to try again |
//! | this file | [`AsanaScope`] (what to read, as configured), [`convert`] and [`poll`] |
//!
//! Theory of operation. [`poll`] reads every scope in turn (projects, then sections, then
//! My Tasks) and hands back the tasks, each once, with the newest `modified_at` it saw. The
//! caller upserts them and passes that time back as the next poll's `since`; a poll with a
//! `since` asks Asana only for tasks modified since then (`modified_since`, which Asana
//! offers on `GET /tasks` only, so the client reads projects and sections there). A poll
//! that fails in any scope fails whole, so `since` never moves past tasks not read.
//!
//! What it must never do: write to the store (the caller does), write to Asana except
//! through [`AsanaClient::add_comment`] when asked, or put the token anywhere but the
//! `Authorization` header (see `client.rs`).

mod client;
mod error;
mod types;

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer};

pub use self::client::{AsanaClient, AsanaOptions, AsanaSettings, TaskQuery, DEFAULT_API_BASE};
pub use self::error::{AsanaError, DEFAULT_RETRY_AFTER};
pub use self::types::{
    AsanaRef, AsanaStory, AsanaTask, Membership, MAX_PAGE_SIZE, TASK_OPT_FIELDS,
};
pub use executor_http::{Secret, SecretError};

use executor_core::facts::TaskFacts;
use executor_core::gid;
use executor_core::queue::QueueStatus;
use executor_core::task::{compose_description, NewTask};

/// The source name of tasks from Asana.
pub const SOURCE: &str = "asana";

/// What to read from Asana, as written in the config:
///
/// ```toml
/// projects = ["1209512345678901"]
/// sections = ["1209512345678905"]
/// my_tasks_workspace = "1201987654321098"
/// include_completed = false
/// ```
///
/// gids may be written as strings or as numbers. Unknown keys are refused, so embed this
/// as a table of its own rather than flattened into one with other keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AsanaScope {
    /// Every task of these projects.
    #[serde(default, deserialize_with = "gid_list")]
    pub projects: Vec<String>,
    /// Every task of these sections (of any project).
    #[serde(default, deserialize_with = "gid_list")]
    pub sections: Vec<String>,
    /// The token owner's My Tasks in this workspace (tasks assigned to them).
    #[serde(default, deserialize_with = "optional_gid")]
    pub my_tasks_workspace: Option<String>,
    /// Whether the first read (a poll without `since`) takes tasks already completed. Off,
    /// a project's years of done tasks stay out of the queue; later polls always take
    /// completions, so a queued task completed upstream comes back with `closed = true`.
    #[serde(default)]
    pub include_completed: bool,
}

impl AsanaScope {
    /// Every gid is a number, and there is something to read.
    pub fn validate(&self) -> Result<(), AsanaError> {
        for project in &self.projects {
            client::check_gid("project", project)?;
        }
        for section in &self.sections {
            client::check_gid("section", section)?;
        }
        if let Some(workspace) = &self.my_tasks_workspace {
            client::check_gid("workspace", workspace)?;
        }
        if self.is_empty() {
            return Err(AsanaError::Settings(
                "no projects, sections or my_tasks_workspace to read".into(),
            ));
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.projects.is_empty() && self.sections.is_empty() && self.my_tasks_workspace.is_none()
    }
}

pub use super::Polled;

/// Reads every scope once. With `since`, only tasks modified after it come (completed ones
/// included); without, every task (completed ones only with
/// [`AsanaScope::include_completed`]).
///
/// A task whose `modified_at` is not after `since` is left out: the poll that returned
/// `since` saw it. A task changed while this poll is between scopes, in a scope already
/// read, is missed if a later scope returns a change newer than it; a caller that cannot
/// accept that passes a `since` some seconds earlier (repeats upsert as unchanged).
pub async fn poll(
    client: &AsanaClient,
    scope: &AsanaScope,
    since: Option<DateTime<Utc>>,
) -> Result<Polled, AsanaError> {
    scope.validate()?;
    let query = match since {
        Some(since) => TaskQuery::modified_since(since),
        None => TaskQuery {
            modified_since: None,
            incomplete_only: !scope.include_completed,
        },
    };
    let mut collector = Collector::new(since);
    for project in &scope.projects {
        let tasks = client.project_tasks(project, &query).await?;
        collector.add_all(&tasks, Some(project));
    }
    for section in &scope.sections {
        let tasks = client.section_tasks(section, &query).await?;
        collector.add_all(&tasks, Some(section));
    }
    if let Some(workspace) = &scope.my_tasks_workspace {
        let tasks = client.my_tasks(workspace, &query).await?;
        collector.add_all(&tasks, None);
    }
    Ok(collector.finish())
}

/// An Asana task as a queue task and its facts. `read_from` is the project or section it
/// was read from: that membership names its location (else the first one with names).
pub fn convert(task: &AsanaTask, read_from: Option<&str>) -> (NewTask, TaskFacts) {
    let title = match task.name.trim() {
        "" => format!("Asana task {}", task.gid),
        name => executor_core::task::capped_title(name),
    };
    let new = NewTask {
        task_gid: task.gid.clone(),
        source: SOURCE.to_owned(),
        description: compose_description(&title, &task.notes),
        // The queue's `notes` column is the owner's context, not Asana's notes (those are
        // the description's body); `None` leaves whatever is stored.
        notes: None,
        priority: None,
        initial_status: QueueStatus::Pending,
    };
    let preferred = read_from
        .and_then(|gid| task.memberships.iter().find(|m| m.is_in(gid)))
        .and_then(Membership::label);
    let location = preferred.or_else(|| task.memberships.iter().find_map(Membership::label));
    let facts = TaskFacts {
        assignee: task.assignee.as_ref().and_then(|a| a.name.clone()),
        assignee_id: task.assignee.as_ref().map(|a| a.gid.clone()),
        closed: task.completed,
        labels: task
            .tags
            .iter()
            .filter_map(|t| t.name.as_deref())
            .filter(|n| !n.trim().is_empty())
            .map(str::to_owned)
            .collect(),
        location,
        url: task.permalink_url.clone(),
        modified_at: task.modified_at,
    };
    (new, facts)
}

/// Gathers the tasks of one poll: each gid once, the newest change kept.
struct Collector {
    since: Option<DateTime<Utc>>,
    tasks: Vec<(NewTask, TaskFacts)>,
    index: HashMap<String, usize>,
    newest: Option<DateTime<Utc>>,
}

impl Collector {
    fn new(since: Option<DateTime<Utc>>) -> Self {
        Self {
            since,
            tasks: Vec::new(),
            index: HashMap::new(),
            newest: None,
        }
    }

    fn add_all(&mut self, tasks: &[AsanaTask], read_from: Option<&str>) {
        for task in tasks {
            self.add(task, read_from);
        }
    }

    fn add(&mut self, task: &AsanaTask, read_from: Option<&str>) {
        if let Err(e) = gid::validate(&task.gid) {
            tracing::warn!(error = %e, "an Asana task with an unusable gid is left out");
            return;
        }
        if let (Some(since), Some(modified)) = (self.since, task.modified_at) {
            if modified <= since {
                return;
            }
        }
        self.newest = self.newest.max(task.modified_at);
        let converted = convert(task, read_from);
        match self.index.entry(task.gid.clone()) {
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

    fn finish(self) -> Polled {
        Polled {
            tasks: self.tasks,
            newest_change: self.newest,
        }
    }
}

/// A gid in the config, as a string or as a TOML integer.
#[derive(Deserialize)]
#[serde(untagged)]
enum GidText {
    Text(String),
    Number(u64),
}

impl GidText {
    fn into_string(self) -> String {
        match self {
            Self::Text(text) => text.trim().to_owned(),
            Self::Number(number) => number.to_string(),
        }
    }
}

fn gid_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    let gids = Vec::<GidText>::deserialize(deserializer)?;
    Ok(gids.into_iter().map(GidText::into_string).collect())
}

fn optional_gid<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<GidText>::deserialize(deserializer)?.map(GidText::into_string))
}

#[cfg(test)]
mod tests {
    use serde::de::DeserializeOwned;

    use super::*;

    fn fixture<T: DeserializeOwned>(name: &str) -> T {
        let path = format!(
            "{}/../../../shared/fixtures/http/asana/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("cannot parse {path}: {e}"))
    }

    fn fixture_task() -> AsanaTask {
        fixture::<types::Envelope<AsanaTask>>("task.json").data
    }

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("timestamp")
            .with_timezone(&Utc)
    }

    #[test]
    fn the_fixture_task_becomes_a_pending_asana_task_with_its_facts() {
        let (task, facts) = convert(&fixture_task(), None);
        assert_eq!(task.task_gid, "1209876543210987");
        assert_eq!(task.source, "asana");
        assert_eq!(task.initial_status, QueueStatus::Pending);
        assert_eq!(task.notes, None);
        assert_eq!(task.priority, None);
        assert!(
            task.description.starts_with(
                "# Tab preview stuck after pointer leaves tab strip\n\nTab preview stays visible"
            ),
            "{}",
            task.description
        );
        assert!(task.description.ends_with("covers it."));
        assert_eq!(
            facts,
            TaskFacts {
                assignee: Some("Marek Kowalski".into()),
                assignee_id: Some("1201987654320001".into()),
                closed: false,
                labels: vec!["macOS".into()],
                location: Some("Lumen Browser — Backlog / In progress".into()),
                url: Some(
                    "https://app.asana.com/1/1201987654321098/project/1209512345678901/task/1209876543210987"
                        .into()
                ),
                modified_at: Some(at("2026-03-16T09:14:35.118Z")),
            }
        );
    }

    #[test]
    fn a_trimmed_list_record_converts_with_what_it_has() {
        // project_tasks.json asked for memberships.section.name only, no tags.
        let page: types::Page<AsanaTask> = fixture("project_tasks.json");
        assert_eq!(page.data.len(), 3);
        assert!(page.next_page.is_some());
        let (task, facts) = convert(&page.data[1], Some("1209512345678901"));
        assert_eq!(task.task_gid, "1209876543211002");
        assert!(task
            .description
            .starts_with("# Reader mode drops srcset-only images\n\n"));
        assert_eq!(facts.assignee, None);
        assert_eq!(facts.assignee_id, None);
        assert_eq!(facts.location.as_deref(), Some("Ready for executor"));
        assert!(facts.labels.is_empty());
    }

    #[test]
    fn the_location_is_the_membership_read_from() {
        let mut task = fixture_task();
        task.memberships.push(Membership {
            project: Some(AsanaRef {
                gid: "77".into(),
                name: Some("Roadmap".into()),
            }),
            section: Some(AsanaRef {
                gid: "78".into(),
                name: Some("Q2".into()),
            }),
        });
        let location = |from| convert(&task, from).1.location;
        assert_eq!(location(Some("78")).as_deref(), Some("Roadmap / Q2"));
        assert_eq!(location(Some("77")).as_deref(), Some("Roadmap / Q2"));
        assert_eq!(
            location(None).as_deref(),
            Some("Lumen Browser — Backlog / In progress")
        );
    }

    #[test]
    fn a_completed_untitled_task_is_closed_and_still_has_a_title() {
        let task = AsanaTask {
            gid: "42".into(),
            completed: true,
            ..AsanaTask::default()
        };
        let (new, facts) = convert(&task, None);
        assert_eq!(new.description, "# Asana task 42");
        assert!(facts.closed);
        assert_eq!(facts.location, None);
    }

    fn task(gid: &str, modified: &str, name: &str) -> AsanaTask {
        AsanaTask {
            gid: gid.into(),
            name: name.into(),
            modified_at: Some(at(modified)),
            ..AsanaTask::default()
        }
    }

    #[test]
    fn a_task_in_two_scopes_comes_once_as_last_changed() {
        let mut collector = Collector::new(None);
        collector.add_all(
            &[
                task("1", "2026-03-16T09:00:00Z", "one"),
                task("2", "2026-03-16T09:01:00Z", "two"),
            ],
            Some("10"),
        );
        collector.add_all(
            &[
                task("2", "2026-03-16T09:05:00Z", "two, renamed meanwhile"),
                task("3", "2026-03-16T08:00:00Z", "three"),
                task("1", "2026-03-16T09:00:00Z", "one, same time"),
            ],
            Some("20"),
        );
        let polled = collector.finish();
        let described: Vec<(&str, &str)> = polled
            .tasks
            .iter()
            .map(|(t, _)| (t.task_gid.as_str(), t.description.as_str()))
            .collect();
        assert_eq!(
            described,
            [
                ("1", "# one"),
                ("2", "# two, renamed meanwhile"),
                ("3", "# three")
            ]
        );
        assert_eq!(polled.newest_change, Some(at("2026-03-16T09:05:00Z")));
    }

    #[test]
    fn since_leaves_out_what_the_last_poll_saw() {
        let since = at("2026-03-16T09:00:00Z");
        let mut collector = Collector::new(Some(since));
        collector.add_all(
            &[
                task("1", "2026-03-16T09:00:00Z", "seen"),
                task("2", "2026-03-16T09:00:00.001Z", "new"),
                task("bad/gid", "2026-03-16T10:00:00Z", "unusable"),
            ],
            None,
        );
        let polled = collector.finish();
        assert_eq!(polled.tasks.len(), 1);
        assert_eq!(polled.tasks[0].0.task_gid, "2");
        assert_eq!(
            polled.next_since(Some(since)),
            Some(at("2026-03-16T09:00:00.001Z"))
        );
        assert_eq!(Polled::default().next_since(Some(since)), Some(since));
        assert_eq!(Polled::default().next_since(None), None);
    }

    #[test]
    fn the_scope_reads_from_toml_with_gids_as_strings_or_numbers() {
        let scope: AsanaScope = toml::from_str(
            r#"
            projects = ["1209512345678901", 1209512345678902]
            sections = [" 1209512345678905 "]
            my_tasks_workspace = 1201987654321098
            "#,
        )
        .expect("scope");
        assert_eq!(
            scope,
            AsanaScope {
                projects: vec!["1209512345678901".into(), "1209512345678902".into()],
                sections: vec!["1209512345678905".into()],
                my_tasks_workspace: Some("1201987654321098".into()),
                include_completed: false,
            }
        );
        assert!(scope.validate().is_ok());

        let typo = toml::from_str::<AsanaScope>(r#"project = ["1"]"#).expect_err("unknown key");
        assert!(typo.to_string().contains("project"), "{typo}");
        let empty = AsanaScope::default();
        assert!(matches!(empty.validate(), Err(AsanaError::Settings(_))));
        let bad = AsanaScope {
            sections: vec!["Ready for executor".into()],
            ..AsanaScope::default()
        };
        let error = bad.validate().expect_err("a name, not a gid");
        assert!(error.to_string().contains("Ready for executor"), "{error}");
    }
}

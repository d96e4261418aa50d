//! A task: one row of `executor_queue`, and what a source hands in to create or update one.
//!
//! The owner's table has no title column, so a task's description is markdown whose first
//! line is its title as a heading; [`compose_description`] writes that shape and
//! [`title_of`] reads it back (from any description, whatever its shape).

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::queue::QueueStatus;

/// One row of `executor_queue`. Field names are the column names of docs/design.md §4.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Task {
    pub id: i64,
    pub task_gid: String,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub added_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub updated_at: DateTime<Utc>,
    pub source: Option<String>,
    pub description: Option<String>,
    pub notes: Option<String>,
    pub status: QueueStatus,
    pub priority: Option<i64>,
    pub complexity: Option<String>,
    pub feasibility: Option<String>,
    pub analysis_summary: Option<String>,
    pub executor_run_id: Option<i64>,
}

impl Task {
    pub fn title(&self) -> String {
        title_of(self.description.as_deref().unwrap_or(""))
    }
}

/// What a source hands in. Adding a gid that exists updates that task instead (the fields
/// given here replace the stored ones; `None` leaves a field as it is; status never moves).
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    pub task_gid: String,
    pub source: String,
    pub description: String,
    pub notes: Option<String>,
    pub priority: Option<i64>,
    /// The status a task enters with when it is new: `pending` for everything that goes
    /// through the analyzer, `approved` for a source the owner configured as pre-approved.
    pub initial_status: QueueStatus,
}

/// What the analyzer found about a task, written beside its status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Analysis {
    pub priority: Option<i64>,
    pub complexity: Option<String>,
    pub feasibility: Option<String>,
    pub summary: Option<String>,
    /// Added to the end of the task's notes, on a line of its own, when `Some` (the notes
    /// as they are in the database at that moment: nothing the owner wrote is lost).
    pub append_notes: Option<String>,
}

/// What an upsert did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UpsertOutcome {
    Created,
    Updated,
    Unchanged,
}

/// The fields of a stored task that an upsert of `new` would change; empty when nothing
/// would. The store applies exactly this, so both backends agree on what "changed" means.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskChanges {
    pub description: Option<String>,
    pub notes: Option<String>,
    pub priority: Option<i64>,
}

impl TaskChanges {
    pub fn between(stored: &Task, new: &NewTask) -> Self {
        let differs = |stored: &Option<String>, new: &str| stored.as_deref() != Some(new);
        TaskChanges {
            description: differs(&stored.description, &new.description)
                .then(|| new.description.clone()),
            notes: new
                .notes
                .as_ref()
                .filter(|notes| differs(&stored.notes, notes))
                .cloned(),
            priority: new.priority.filter(|p| stored.priority != Some(*p)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.description.is_none() && self.notes.is_none() && self.priority.is_none()
    }

    /// The changed field names, for the history entry.
    pub fn field_names(&self) -> String {
        let mut names = Vec::new();
        if self.description.is_some() {
            names.push("description");
        }
        if self.notes.is_some() {
            names.push("notes");
        }
        if self.priority.is_some() {
            names.push("priority");
        }
        names.join(", ")
    }
}

/// The longest title a task may have, in characters. A title names a branch, a commit and
/// a line of every table; a longer one is refused where the owner gives it (`add`,
/// `import`, a plan note) and cut where a tracker hands it in ([`capped_title`]).
pub const MAX_TITLE_CHARS: usize = 512;

/// Why `title` is too long to be a task's title, if it is.
pub fn title_too_long(title: &str) -> Option<String> {
    let chars = title.trim().chars().count();
    (chars > MAX_TITLE_CHARS).then(|| {
        format!(
            "the title is {chars} characters long; at most {MAX_TITLE_CHARS} are allowed (put the rest in the body)"
        )
    })
}

/// `title` cut to [`MAX_TITLE_CHARS`] (ending with `…` when cut), for sources whose items
/// are taken in whatever their length: the tracker keeps the whole title.
pub fn capped_title(title: &str) -> String {
    let title = title.trim();
    if title.chars().count() <= MAX_TITLE_CHARS {
        return title.to_string();
    }
    let mut cut: String = title.chars().take(MAX_TITLE_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Sources executor gives its own tasks and treats apart: `dispatch` (run by its
/// `executor dispatch` alone, never by the run loop) and `conductor` (a goal's subtasks).
/// A task taken in from outside may not claim one: it would be queued and never run.
pub const RESERVED_SOURCES: [&str; 2] = ["dispatch", "conductor"];

/// Why `source` may not be given to a task from outside, if it may not.
pub fn reserved_source(source: &str) -> Option<String> {
    let source = source.trim();
    RESERVED_SOURCES
        .iter()
        .any(|reserved| reserved.eq_ignore_ascii_case(source))
        .then(|| {
            format!(
                "`{source}` is reserved for executor's own tasks (reserved: {}); name another source",
                RESERVED_SOURCES.join(", ")
            )
        })
}

/// The description of a task titled `title` with body `body`.
pub fn compose_description(title: &str, body: &str) -> String {
    let title = title.trim();
    let body = body.trim();
    if body.is_empty() {
        format!("# {title}")
    } else {
        format!("# {title}\n\n{body}")
    }
}

/// The title of a description: its first non-empty line, without a heading marker.
pub fn title_of(description: &str) -> String {
    description
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .map(|line| line.trim_start_matches('#').trim().to_string())
        .unwrap_or_default()
}

/// The body of a description: everything after its title line.
pub fn body_of(description: &str) -> &str {
    let trimmed = description.trim_start();
    match trimmed.split_once('\n') {
        Some((_, body)) => body.trim(),
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_longer_than_the_cap_are_refused_or_cut() {
        let at_cap = "é".repeat(MAX_TITLE_CHARS);
        assert_eq!(title_too_long(&at_cap), None);
        assert_eq!(capped_title(&at_cap), at_cap);
        let over = "x".repeat(MAX_TITLE_CHARS + 1);
        let why = title_too_long(&over).expect("refused");
        assert!(
            why.contains("513 characters") && why.contains("512"),
            "{why}"
        );
        let cut = capped_title(&over);
        assert_eq!(cut.chars().count(), MAX_TITLE_CHARS);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn reserved_sources_are_refused_whatever_their_case() {
        for source in ["dispatch", " Dispatch ", "conductor"] {
            let why = reserved_source(source).expect(source);
            assert!(why.contains("reserved"), "{why}");
        }
        for source in ["plans", "asana", "dispatcher", "obsidian"] {
            assert_eq!(reserved_source(source), None, "{source}");
        }
    }

    #[test]
    fn title_round_trips_through_the_description() {
        let description = compose_description("Fix tab preview", "It sticks.\n");
        assert_eq!(description, "# Fix tab preview\n\nIt sticks.");
        assert_eq!(title_of(&description), "Fix tab preview");
        assert_eq!(compose_description(" Only a title ", ""), "# Only a title");
    }

    fn stored(description: &str, notes: Option<&str>, priority: Option<i64>) -> Task {
        let at = chrono::DateTime::<Utc>::UNIX_EPOCH;
        Task {
            id: 1,
            task_gid: "T-1".into(),
            added_at: at,
            updated_at: at,
            source: Some("cli".into()),
            description: Some(description.into()),
            notes: notes.map(str::to_string),
            status: QueueStatus::Approved,
            priority,
            complexity: None,
            feasibility: None,
            analysis_summary: None,
            executor_run_id: None,
        }
    }

    fn new_task(description: &str, notes: Option<&str>, priority: Option<i64>) -> NewTask {
        NewTask {
            task_gid: "T-1".into(),
            source: "plans".into(),
            description: description.into(),
            notes: notes.map(str::to_string),
            priority,
            initial_status: QueueStatus::Pending,
        }
    }

    #[test]
    fn an_identical_upsert_changes_nothing() {
        let changes = TaskChanges::between(
            &stored("# A", Some("n"), Some(2)),
            &new_task("# A", Some("n"), Some(2)),
        );
        assert!(changes.is_empty(), "{changes:?}");
    }

    #[test]
    fn absent_notes_and_priority_leave_the_stored_ones() {
        let changes = TaskChanges::between(
            &stored("# A", Some("n"), Some(2)),
            &new_task("# B", None, None),
        );
        assert_eq!(
            changes,
            TaskChanges {
                description: Some("# B".into()),
                notes: None,
                priority: None
            }
        );
        assert_eq!(changes.field_names(), "description");
    }

    #[test]
    fn every_changed_field_is_named() {
        let changes = TaskChanges::between(
            &stored("# A", None, None),
            &new_task("# A", Some("n"), Some(1)),
        );
        assert_eq!(changes.field_names(), "notes, priority");
    }

    #[test]
    fn body_of_drops_only_the_title_line() {
        assert_eq!(
            body_of("# Title\n\nLine one\nLine two\n"),
            "Line one\nLine two"
        );
        assert_eq!(body_of("# Only a title"), "");
        assert_eq!(
            compose_description("New title", body_of("# Old\n\nKept body")),
            "# New title\n\nKept body"
        );
    }

    #[test]
    fn title_of_a_foreign_description_is_its_first_line() {
        assert_eq!(title_of("\n\nPlain first line\nmore"), "Plain first line");
        assert_eq!(title_of(""), "");
    }
}

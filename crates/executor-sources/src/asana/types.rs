//! Asana's request and response shapes, as much of them as executor reads.
//!
//! Checked against `../shared/fixtures/http/asana/` (Asana's OpenAPI description, op
//! `getTasksForProject`, `TaskResponse`, `createStoryForTask`, the error schema). Every
//! body comes wrapped in `{"data": …}`; lists add `next_page`. gids are strings. A record
//! holds `gid` plus exactly the fields asked for in `opt_fields`, so every other field here
//! is optional and a `null` reads as empty.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer};

/// The task fields a poll asks for (`opt_fields`). `assignee.name` answers `{gid, name}`;
/// `memberships.project.name` and `memberships.section.name` answer
/// `[{project: {gid, name}, section: {gid, name}}]`; `tags.name` answers `[{gid, name}]`.
pub const TASK_OPT_FIELDS: &str = "name,notes,completed,assignee,assignee.name,\
memberships.project.name,memberships.section.name,modified_at,permalink_url,tags.name";

/// The most a list page may hold; Asana refuses a `limit` outside 1–100.
pub const MAX_PAGE_SIZE: u32 = 100;

/// One task as a list or `GET /tasks/{gid}` answers it with [`TASK_OPT_FIELDS`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct AsanaTask {
    pub gid: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// Plain text (Asana keeps rich text apart, in `html_notes`, which is not asked for).
    #[serde(default, deserialize_with = "null_as_default")]
    pub notes: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub completed: bool,
    #[serde(default)]
    pub assignee: Option<AsanaRef>,
    /// The projects the task is in, each with its section there (a task may be in several).
    #[serde(default, deserialize_with = "null_as_default")]
    pub memberships: Vec<Membership>,
    #[serde(default)]
    pub modified_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub permalink_url: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub tags: Vec<AsanaRef>,
}

/// A compact record: a user, a tag, a project or a section. `name` is there when asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct AsanaRef {
    pub gid: String,
    #[serde(default)]
    pub name: Option<String>,
}

/// One project a task is in, and its section there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Membership {
    #[serde(default)]
    pub project: Option<AsanaRef>,
    #[serde(default)]
    pub section: Option<AsanaRef>,
}

impl Membership {
    /// `Project / Section`, or whichever of the two names is known.
    pub fn label(&self) -> Option<String> {
        let name = |r: &Option<AsanaRef>| {
            r.as_ref()
                .and_then(|r| r.name.as_deref())
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
        };
        match (name(&self.project), name(&self.section)) {
            (Some(project), Some(section)) => Some(format!("{project} / {section}")),
            (Some(one), None) | (None, Some(one)) => Some(one),
            (None, None) => None,
        }
    }

    /// Whether this membership is in the project or the section `gid`.
    pub fn is_in(&self, gid: &str) -> bool {
        let is = |r: &Option<AsanaRef>| r.as_ref().is_some_and(|r| r.gid == gid);
        is(&self.project) || is(&self.section)
    }
}

/// A story (a comment, here) as `POST /tasks/{gid}/stories` answers it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct AsanaStory {
    pub gid: String,
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub created_by: Option<AsanaRef>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub text: String,
    /// `comment` for a comment.
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// `comment_added` for a comment.
    #[serde(default)]
    pub resource_subtype: Option<String>,
    /// The task it is on.
    #[serde(default)]
    pub target: Option<AsanaRef>,
}

/// `{"data": …}` around a single record.
#[derive(Debug, Deserialize)]
pub struct Envelope<T> {
    pub data: T,
}

/// One page of a list: `{"data": [...], "next_page": {offset, path, uri} | null}`.
#[derive(Debug, Deserialize)]
pub struct Page<T> {
    pub data: Vec<T>,
    /// Absent when the call was not paginated (no `limit`), `null` on the last page.
    #[serde(default)]
    pub next_page: Option<NextPage>,
}

/// Where the next page is. Only `offset` is used: the client sends it back with its own
/// query, so `path` and `uri` (which name the host) are never followed.
#[derive(Debug, Deserialize)]
pub struct NextPage {
    pub offset: String,
}

/// Asana's error body: `{"errors": [{message, help, phrase?}]}`.
#[derive(Debug, Default, Deserialize)]
pub struct ErrorBody {
    #[serde(default)]
    pub errors: Vec<ErrorEntry>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ErrorEntry {
    #[serde(default)]
    pub message: Option<String>,
    /// On 500s: a phrase Asana support can look the incident up by.
    #[serde(default)]
    pub phrase: Option<String>,
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trimmed_record_reads_with_only_its_gid() {
        let task: AsanaTask = serde_json::from_str(r#"{"gid":"1"}"#).expect("decode");
        assert_eq!(task.gid, "1");
        assert!(task.memberships.is_empty() && task.tags.is_empty());
        let nulls: AsanaTask = serde_json::from_str(
            r#"{"gid":"2","name":null,"notes":null,"completed":null,"memberships":null,"tags":null,"assignee":null}"#,
        )
        .expect("decode nulls");
        assert_eq!(nulls.name, "");
        assert!(!nulls.completed);
    }

    #[test]
    fn a_membership_is_labelled_by_what_is_known() {
        let named = |gid: &str, name: Option<&str>| {
            Some(AsanaRef {
                gid: gid.into(),
                name: name.map(str::to_owned),
            })
        };
        let both = Membership {
            project: named("1", Some("Backlog")),
            section: named("2", Some("Ready")),
        };
        assert_eq!(both.label().as_deref(), Some("Backlog / Ready"));
        assert!(both.is_in("1") && both.is_in("2") && !both.is_in("3"));
        let section_only = Membership {
            project: None,
            section: named("2", Some("Ready")),
        };
        assert_eq!(section_only.label().as_deref(), Some("Ready"));
        let unnamed = Membership {
            project: named("1", None),
            section: named("2", Some("  ")),
        };
        assert_eq!(unnamed.label(), None);
    }
}

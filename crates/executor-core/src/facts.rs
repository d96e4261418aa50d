//! What a source knows about a task beyond its text: who it is assigned to, whether it is
//! closed upstream, its tags or labels, where it sits, its link and when it last changed.
//! The analyzer's rule filters judge a task by these; the queue row itself keeps only the
//! owner's columns (docs/design.md §4), so the facts are stored beside it.
//!
//! Pure data: nothing here reads a source or the store.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Unknown fields are refused, so a misspelt fact in an import (`label` for `labels`) is
/// an error naming it rather than a fact silently missing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskFacts {
    /// The assignee's display name, as the source shows it.
    pub assignee: Option<String>,
    /// The assignee's id in the source (an Asana user gid, a GitHub user id; the GitHub
    /// login is in `assignee`).
    pub assignee_id: Option<String>,
    /// Completed (Asana) or closed (GitHub, Gitea) upstream.
    pub closed: bool,
    /// Tags (Asana) or labels (GitHub), as named upstream.
    pub labels: Vec<String>,
    /// The project and section, or the repository, it was read from.
    pub location: Option<String>,
    /// Its page upstream.
    pub url: Option<String>,
    /// When it last changed upstream.
    #[serde(serialize_with = "crate::time::serde_utc::optional")]
    pub modified_at: Option<DateTime<Utc>>,
}

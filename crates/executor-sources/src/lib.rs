//! Where work comes from. Each source turns what the owner keeps elsewhere into
//! [`NewTask`](executor_core::task::NewTask)s; the queue itself lives in the store.
//!
//! | source | module |
//! |---|---|
//! | a folder of markdown notes (an Obsidian vault subfolder, say) | [`plans`] |
//! | Asana: projects, sections and the owner's My Tasks, polled | [`asana`] |
//! | GitHub issues: the client's repository's issues carrying any of the configured labels, polled | [`github_issues`] |
//! | Gitea issues: the configured repositories' issues carrying any of the configured labels, polled | [`gitea_issues`] |
//! | the command line (`executor add`) | `cli` |
//!
//! A source never modifies, moves or deletes what it reads: a note it cannot take in is
//! reported and left exactly as it is.

pub mod asana;
pub mod gitea_issues;
pub mod github_issues;
pub mod labelled_issues;
pub mod plans;

use chrono::{DateTime, Utc};

use executor_core::facts::TaskFacts;
use executor_core::task::NewTask;

/// What one poll of a polled source (Asana, GitHub or Gitea issues) read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Polled {
    /// Each task once (one read twice, through two scopes or labels, comes once, as most
    /// recently changed), in the order first read.
    pub tasks: Vec<(NewTask, TaskFacts)>,
    /// The newest change upstream (`modified_at`, `updated_at`) among `tasks`; `None`
    /// when nothing came.
    pub newest_change: Option<DateTime<Utc>>,
}

impl Polled {
    /// The next poll's `since`: the newest change seen, never earlier than `previous`.
    pub fn next_since(&self, previous: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
        self.newest_change.max(previous)
    }
}

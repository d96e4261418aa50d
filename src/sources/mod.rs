//! Where work comes from. Each source turns what the owner keeps elsewhere into
//! [`NewTask`](crate::core::task::NewTask)s; the queue itself lives in the store.
//!
//! | source | module |
//! |---|---|
//! | a folder of markdown notes (an Obsidian vault subfolder, say) | [`plans`] |
//! | Asana: projects, sections and the owner's My Tasks, polled | [`asana`] |
//! | GitHub issues: the client's repository's issues carrying any of the configured labels, polled | [`github_issues`] |
//! | the command line (`executor add`) | `cli` |
//!
//! A source never modifies, moves or deletes what it reads: a note it cannot take in is
//! reported and left exactly as it is.

pub mod asana;
pub mod github_issues;
pub mod plans;

//! The forge: the code host where the owner's work lives and where every run ends as a pull
//! request: GitHub ([`github`]) or Gitea ([`gitea_pr`], over the client [`gitea`] the issue
//! source shares), behind the one [`ForgeClient`] the run engine speaks to.
//!
//! Everything here runs in the orchestrator, on requests the policy approved. What it must
//! never do: hand its token to a worker, write it to a log line, an error, a prompt or the
//! store, or send it anywhere but the configured API host.

/// The Gitea API client lives with the HTTP layer (the issue source shares it).
pub use executor_http::gitea;
pub mod client;
pub mod gitea_ci_logs;
pub mod gitea_pr;
pub mod github;

pub use client::{ForgeClient, ForgeError, Look, MergeOutcome, OpenedPr};

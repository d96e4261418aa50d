//! The forge side of a run (GitHub or Gitea): the client and the settings the PR steps read.

use std::time::Duration;

/// The forge side of a run: the client (it alone holds the token; no worker ever sees
/// it) and where branches go.
#[derive(Debug, Clone)]
pub struct Forge {
    pub client: crate::forge::ForgeClient,
    /// The git remote run branches are pushed to.
    pub remote: String,
    /// Labels every draft PR gets.
    pub required_labels: Vec<String>,
    /// Checks that must be green before a review and before completion.
    pub required_checks: Vec<String>,
    /// Resolve threads whose last comment is `[ACKNOWLEDGED: …]` (GitHub only: Gitea's API
    /// cannot resolve a conversation).
    pub resolve_acknowledged: bool,
    /// Who is @mentioned when a run completes.
    pub owner_login: String,
    /// The workflow dispatched when a head has no CI at all (GitHub only).
    pub ci_workflow: Option<String>,
    pub ci_start_grace: Duration,
    /// Failures in a row of an outside effect (opening the PR, the completion comment, a
    /// review) before the owner is asked; executor keeps trying after.
    pub max_effect_failures: u32,
    /// `[forge] auto_merge`, when enabled.
    pub auto_merge: Option<crate::core::merge::AutoMerge>,
}

impl Forge {
    /// Whether this is GitHub (whose webhooks the daemon takes).
    pub fn is_github(&self) -> bool {
        matches!(self.client, crate::forge::ForgeClient::Github(_))
    }
}

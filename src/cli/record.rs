//! The record step as the configuration builds it: the build log, the conductor's contract
//! (`roles/conductor-policy.json`, or the built-in one), and a client for each source whose
//! tasks it updates, with the sources' own tokens.
//!
//! What it must never do: start with a contract that does not validate or a configured
//! source without its token (both are bad input, exit 2, named); nor hold a token anywhere
//! but in the clients.

use crate::http::secret::ReadSecret as _;
use anyhow::{Context, Result};

use super::BadInput;
use crate::config::Settings;
use crate::runner::record::{GiteaIssues, Recorder};

/// The built-in conductor contract, used when the workspace has none.
const CONDUCTOR_POLICY: &str = crate::policy::CONDUCTOR_CONTRACT;

/// The record step for `settings`. A source that is not configured is not updated (the
/// record step says so in the log when one of its tasks completes).
pub(crate) fn recorder(settings: &Settings) -> Result<Recorder> {
    let build_log = settings
        .raw
        .conductor
        .build_log
        .as_ref()
        .map(|p| settings.root.join(p));
    let contract = crate::runner::contract::ContractCell::load_or_builtin(
        &super::policy::contract_path(settings, "conductor"),
        "built-in conductor-policy.json",
        CONDUCTOR_POLICY,
    )
    .map_err(|e| BadInput(e.to_string()))?;
    Ok(Recorder {
        build_log,
        contract: Some(contract),
        github: github(settings)?,
        gitea: gitea(settings)?,
        asana: asana(settings)?,
    })
}

/// A GitHub client for each repository of `[sources.github_issues]` (its `repositories`,
/// or `forge.github_repository`).
fn github(settings: &Settings) -> Result<Option<Vec<crate::forge::github::GithubClient>>> {
    let Some(issues) = settings
        .raw
        .sources
        .github_issues
        .as_ref()
        .filter(|i| i.enabled)
    else {
        return Ok(None);
    };
    let repositories: Vec<String> = if issues.repositories.is_empty() {
        settings
            .raw
            .forge
            .github_repository
            .iter()
            .map(|r| r.get_ref().clone())
            .collect()
    } else {
        issues
            .repositories
            .iter()
            .map(|r| r.get_ref().clone())
            .collect()
    };
    let clients = repositories
        .iter()
        .map(|repository| super::github_client(settings, repository))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(clients))
}

/// The Gitea client of `[sources.gitea_issues]` and its repositories.
fn gitea(settings: &Settings) -> Result<Option<GiteaIssues>> {
    use crate::forge::gitea::{GiteaClient, GiteaOptions};
    let Some(gitea) = settings
        .raw
        .sources
        .gitea_issues
        .as_ref()
        .filter(|g| g.enabled)
    else {
        return Ok(None);
    };
    let token = gitea
        .token(&settings.root)
        .map_err(|e| BadInput(format!("the Gitea token: {e}")))?;
    let api_url = gitea
        .api_url()
        .map_err(|e| BadInput(format!("sources.gitea_issues.api_url: {e}")))?;
    let client = GiteaClient::new(api_url, token, GiteaOptions::default())
        .context("cannot set up the Gitea client")?;
    Ok(Some(GiteaIssues {
        client,
        repositories: gitea
            .repositories()
            .into_iter()
            .map(|(owner, repo)| format!("{owner}/{repo}"))
            .collect(),
    }))
}

/// The Asana client of `[sources.asana]`.
fn asana(settings: &Settings) -> Result<Option<crate::sources::asana::AsanaClient>> {
    use crate::sources::asana::{AsanaClient, AsanaSettings, Secret};
    let Some(asana) = settings.raw.sources.asana.as_ref().filter(|a| a.enabled) else {
        return Ok(None);
    };
    let token = match &asana.token_file {
        Some(file) => Secret::from_file(&settings.root.join(file)),
        None => Secret::from_env(asana.token_env.get_ref()),
    }
    .map_err(|e| BadInput(format!("the Asana token: {e}")))?;
    let api_base = url::Url::parse(asana.api_url.get_ref())
        .map_err(|e| BadInput(format!("sources.asana.api_url: {e}")))?;
    let client = AsanaClient::new(AsanaSettings { api_base, token })
        .context("cannot set up the Asana client")?;
    Ok(Some(client))
}

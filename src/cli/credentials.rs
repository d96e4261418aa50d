//! The credentials a workspace's config names (forge, sources, chat), where each is read
//! from, and the one cheap authenticated call that proves it works: GitHub `GET /user`,
//! Gitea `GET /user`, Asana `GET /users/me`, Zulip `GET /users/me`. `executor doctor` checks
//! them; `executor service install` names their variables in the environment file.
//!
//! What it must never do: print, log or return a secret's value (errors name the variable
//! or the file, and an HTTP failure only its status), or call anything that changes state.

use crate::http::secret::ReadSecret as _;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::{ForgeKind, Settings};
use crate::forge::github::{Secret, SecretError};

/// Where a secret is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    Env(String),
    File(PathBuf),
}

impl Origin {
    fn read(&self) -> Result<Secret, SecretError> {
        match self {
            Origin::Env(var) => Secret::from_env(var),
            Origin::File(path) => Secret::from_file(path),
        }
    }
}

/// The call that proves a credential, against the service's API base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Probe {
    Github {
        api: String,
    },
    Gitea {
        api: String,
    },
    Asana {
        api: String,
    },
    /// A Zulip bot: basic auth with its email (already resolved, when it could be).
    Zulip {
        site: String,
        email: Option<String>,
    },
    /// Present is all that can be told without sending something (a webhook URL).
    None,
}

/// One configured secret.
#[derive(Debug, Clone)]
pub(crate) struct Credential {
    /// What it is for, as a doctor line names it: `GitHub token`, `chat persona worker`.
    pub what: String,
    pub origin: Origin,
    pub probe: Probe,
}

fn origin(settings: &Settings, file: Option<&PathBuf>, var: &str) -> Origin {
    match file {
        Some(file) => Origin::File(settings.root.join(file)),
        None => Origin::Env(var.to_string()),
    }
}

/// Every secret the config names, in config order.
pub(crate) fn configured(settings: &Settings) -> Vec<Credential> {
    let raw = &settings.raw;
    let mut out = Vec::new();
    let forge = &raw.forge;
    let github_issues = raw
        .sources
        .github_issues
        .as_ref()
        .is_some_and(|s| s.enabled);
    let forge_origin = origin(settings, forge.token_file.as_ref(), forge.token_variable());
    match forge.kind {
        ForgeKind::Github => out.push(Credential {
            what: "GitHub token".into(),
            origin: forge_origin,
            probe: Probe::Github {
                api: forge.api_url.get_ref().clone(),
            },
        }),
        ForgeKind::Gitea => out.push(Credential {
            what: "Gitea token".into(),
            origin: forge_origin,
            probe: Probe::Gitea {
                api: forge.api_url.get_ref().clone(),
            },
        }),
        ForgeKind::Local if github_issues => out.push(Credential {
            what: "GitHub token (issues)".into(),
            origin: forge_origin,
            probe: Probe::Github {
                api: forge.api_url.get_ref().clone(),
            },
        }),
        ForgeKind::Local => {}
    }
    if let Some(asana) = raw.sources.asana.as_ref().filter(|a| a.enabled) {
        out.push(Credential {
            what: "Asana token".into(),
            origin: origin(
                settings,
                asana.token_file.as_ref(),
                asana.token_env.get_ref(),
            ),
            probe: Probe::Asana {
                api: asana.api_url.get_ref().clone(),
            },
        });
    }
    if let Some(gitea) = raw.sources.gitea_issues.as_ref().filter(|g| g.enabled) {
        out.push(Credential {
            what: "Gitea token (issues)".into(),
            origin: origin(
                settings,
                gitea.token_file.as_ref(),
                gitea.token_env.get_ref(),
            ),
            probe: Probe::Gitea {
                api: gitea.api_url.get_ref().clone(),
            },
        });
    }
    let chat = &raw.chat;
    if let Some(zulip) = &chat.zulip {
        for (name, persona) in &chat.personas {
            let Some(key) = persona
                .key_file
                .as_ref()
                .map(|f| Origin::File(settings.root.join(f)))
                .or_else(|| persona.key_env.clone().map(Origin::Env))
            else {
                continue;
            };
            let email = persona.email.clone().or_else(|| {
                persona
                    .email_env
                    .as_ref()
                    .and_then(|v| std::env::var(v).ok())
                    .filter(|v| !v.trim().is_empty())
            });
            out.push(Credential {
                what: format!("chat persona {name}"),
                origin: key,
                probe: Probe::Zulip {
                    site: zulip.site.get_ref().clone(),
                    email: email.map(|e| e.trim().to_string()),
                },
            });
        }
        if zulip.receive == crate::config::chat::Receive::Webhook {
            out.push(Credential {
                what: "Zulip webhook token".into(),
                origin: origin(
                    settings,
                    zulip.webhook_token_file.as_ref(),
                    &zulip.webhook_token_env,
                ),
                probe: Probe::None,
            });
        }
    }
    for hook in &chat.webhooks {
        let Some(url) = hook
            .url_file
            .as_ref()
            .map(|f| Origin::File(settings.root.join(f)))
            .or_else(|| hook.url_env.clone().map(Origin::Env))
        else {
            continue;
        };
        out.push(Credential {
            what: format!("chat webhook {}", hook.name.get_ref()),
            origin: url,
            probe: Probe::None,
        });
    }
    out
}

/// The environment variables the config reads secrets (and bot emails) from, and those it
/// hands the agent: what the service's environment file should hold.
pub(crate) fn variables(settings: &Settings) -> Vec<String> {
    let mut names: Vec<String> = configured(settings)
        .into_iter()
        .filter_map(|c| match c.origin {
            Origin::Env(var) => Some(var),
            Origin::File(_) => None,
        })
        .collect();
    for persona in settings.raw.chat.personas.values() {
        names.extend(persona.email_env.clone());
    }
    names.extend(settings.raw.agent.env.iter().map(|v| v.get_ref().clone()));
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

/// How a credential came out: `Ok(detail)` or `Err(what is wrong and the fix)`.
pub(crate) async fn check(credential: &Credential, offline: bool) -> Result<String, String> {
    let where_from = match &credential.origin {
        Origin::Env(var) => format!("${var}"),
        Origin::File(path) => path.display().to_string(),
    };
    let secret = credential
        .origin
        .read()
        .map_err(|e| match &credential.origin {
            Origin::Env(var) => {
                format!("{e}: set {var} (for the service: in its environment file)")
            }
            Origin::File(_) => format!("{e}: put the secret in that file"),
        })?;
    if offline || credential.probe == Probe::None {
        return Ok(format!("present ({where_from})"));
    }
    match probe(&credential.probe, &secret).await {
        Ok(who) => Ok(format!("{where_from} works: {who}")),
        Err(why) => Err(format!("{where_from}: {why}")),
    }
}

/// How long one probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The one authenticated read; who the service says the credential belongs to.
async fn probe(probe: &Probe, secret: &Secret) -> Result<String, String> {
    use crate::http::client::{self, HttpOptions};
    let options = HttpOptions {
        timeout: Some(PROBE_TIMEOUT),
        user_agent: format!("{} (doctor)", crate::http::USER_AGENT),
        ..HttpOptions::default()
    };
    // The shared layer's client: its timeouts, no redirects (one could carry the credential
    // to a host nobody configured), and the credential in a header no `Debug` prints.
    let client = client::build(&options, reqwest::header::HeaderMap::new())?;
    let authorization =
        |value: String| client::authorization(&value).map_err(|e| format!("{e}: make a new one"));
    let join = |base: &str, path: &str| format!("{}/{path}", base.trim_end_matches('/'));
    let (request, name_field) = match probe {
        Probe::Github { api } => (
            client
                .get(join(api, "user"))
                .header(
                    reqwest::header::AUTHORIZATION,
                    authorization(format!("Bearer {}", secret.expose()))?,
                )
                .header("Accept", "application/vnd.github+json"),
            "/login",
        ),
        Probe::Gitea { api } => (
            client.get(join(api, "user")).header(
                reqwest::header::AUTHORIZATION,
                authorization(format!("token {}", secret.expose()))?,
            ),
            "/login",
        ),
        Probe::Asana { api } => (
            client.get(join(api, "users/me")).header(
                reqwest::header::AUTHORIZATION,
                authorization(format!("Bearer {}", secret.expose()))?,
            ),
            "/data/name",
        ),
        Probe::Zulip { site, email } => {
            let Some(email) = email else {
                return Err("the bot has no email (set email or email_env)".into());
            };
            (
                // reqwest marks a basic credential sensitive itself.
                client
                    .get(join(site, "api/v1/users/me"))
                    .basic_auth(email, Some(secret.expose())),
                "/full_name",
            )
        }
        Probe::None => return Ok("present".into()),
    };
    let response = request.send().await.map_err(|e| {
        // reqwest's message names the URL, never the headers.
        format!("cannot reach the service ({e}); check the API URL or the network, or run `executor doctor --offline`")
    })?;
    let status = response.status();
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        return Err(format!(
            "refused (HTTP {status}): the credential is wrong, expired or lacks access; make a new one"
        ));
    }
    if !status.is_success() {
        return Err(format!("HTTP {status} from the service"));
    }
    let body: serde_json::Value = response
        .json()
        .await
        .map_err(|_| format!("HTTP {status} but the answer is not JSON: is the API URL right?"))?;
    Ok(match body.pointer(name_field).and_then(|v| v.as_str()) {
        Some(name) => format!("authenticated as {name}"),
        None => "authenticated".into(),
    })
}

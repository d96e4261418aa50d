//! Builds chat from `[chat]`: the routing (no secrets needed, so every command can tell),
//! and, for the runner and the daemon, the deliverer and the receiver with the personas'
//! credentials read from the environment or their files. Start-up refuses two personas that
//! share one bot: the topic could not tell the orchestrator's decisions from a worker's
//! lines. An owner given by `email` alone is looked up in Zulip at start, and recognised by
//! user id from then on (realms that hide real addresses show them as `userN@…`); one that
//! cannot be found refuses the start.
//!
//! What it must never do: put a credential in an error message.

use crate::http::secret::ReadSecret as _;
use std::net::SocketAddr;

use anyhow::{Context, Result};

use super::BadInput;
use crate::chat::deliver::{webhook_notifier, Deliverer, ZulipTopic};
use crate::chat::inbox::{ChatOwner, Inbox};
use crate::chat::notices::{Notices, Routing, ZULIP};
use crate::chat::receive::Receiver;
use crate::chat::webhook::{WebhookKind, WebhookNotifier};
use crate::chat::zulip::{ZulipClient, ZulipSettings};
use crate::config::chat::{PersonaSection, Receive, WebhookKindSection};
use crate::config::Settings;
use crate::forge::github::Secret;

/// Where each priority goes, from the config alone.
pub(crate) fn routing(settings: &Settings) -> Routing {
    let chat = &settings.raw.chat;
    let mut targets = Vec::new();
    if let Some(zulip) = &chat.zulip {
        targets.push((ZULIP.to_string(), zulip.priorities.clone()));
    }
    for hook in &chat.webhooks {
        targets.push((
            webhook_notifier(hook.name.get_ref()),
            hook.priorities.clone(),
        ));
    }
    Routing {
        log: chat.log.priorities.clone(),
        targets,
        owner: chat.owner.as_ref().map(|o| o.name.clone()),
    }
}

/// Chat as the runner and the daemon use it.
pub(crate) struct ChatParts {
    pub notices: Notices,
    pub deliverer: Option<Deliverer>,
    pub receiver: Option<Receiver>,
    pub receive: Receive,
    /// The outgoing webhook's address and token, with `receive = "webhook"`.
    pub webhook: Option<(SocketAddr, Secret)>,
}

/// The Zulip user id of the owner configured by `email`. Nobody with that address: bad
/// input naming `user_id` as the fix. Zulip out of reach for now: `None` with a warning,
/// and the owner is recognised by the email meanwhile.
async fn owner_user_id(client: &ZulipClient, email: &str) -> Result<Option<u64>> {
    match client.user_id_of(email).await {
        Ok(Some(id)) => Ok(Some(id)),
        Ok(None) => Err(BadInput(format!(
            "[chat.owner] email `{email}`: no Zulip user the orchestrator's bot can see has \
             that address (a realm that hides addresses shows them as `userN@…`); set \
             [chat.owner] user_id to the owner's Zulip user id (their profile shows it)"
        ))
        .into()),
        Err(error) if error.is_transient() => {
            tracing::warn!(%error, "cannot look the owner up in Zulip now; the owner is recognised by [chat.owner] email until the next start (set [chat.owner] user_id to not depend on it)");
            Ok(None)
        }
        Err(error) => Err(BadInput(format!(
            "[chat.owner] email `{email}`: cannot look the owner up in Zulip ({error}); set \
             [chat.owner] user_id to the owner's Zulip user id"
        ))
        .into()),
    }
}

/// One persona's bot.
struct Bot {
    persona: String,
    email: String,
    key: Secret,
}

fn read_bot(settings: &Settings, persona: &str, section: &PersonaSection) -> Result<Bot> {
    let email = match (&section.email, &section.email_env) {
        (Some(email), _) => email.clone(),
        (None, Some(var)) => std::env::var(var)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| {
                BadInput(format!(
                    "chat persona `{persona}`: the environment variable {var} (email_env) is not set"
                ))
            })?,
        (None, None) => {
            return Err(BadInput(format!("chat persona `{persona}` has no email")).into())
        }
    };
    let key = match (&section.key_file, &section.key_env) {
        (Some(file), _) => Secret::from_file(&settings.root.join(file)),
        (None, Some(var)) => Secret::from_env(var),
        (None, None) => {
            return Err(BadInput(format!("chat persona `{persona}` has no API key")).into())
        }
    }
    .map_err(|e| BadInput(format!("chat persona `{persona}`: {e}")))?;
    Ok(Bot {
        persona: persona.to_string(),
        email: email.trim().to_string(),
        key,
    })
}

/// Every Zulip persona's bot, read, and refused when two are one bot (`executor doctor`).
pub(crate) fn distinct_personas(settings: &Settings) -> Result<()> {
    let bots = settings
        .raw
        .chat
        .personas
        .iter()
        .map(|(name, section)| read_bot(settings, name, section))
        .collect::<Result<Vec<_>>>()?;
    distinct(&bots)
}

/// Refuses two personas with one bot (the same email or the same API key).
fn distinct(bots: &[Bot]) -> Result<()> {
    for (i, a) in bots.iter().enumerate() {
        for b in &bots[i + 1..] {
            let same = if a.email.eq_ignore_ascii_case(&b.email) {
                Some("bot email")
            } else if a.key.expose() == b.key.expose() {
                Some("API key")
            } else {
                None
            };
            if let Some(what) = same {
                return Err(BadInput(format!(
                    "chat personas `{}` and `{}` share one bot credential (the same {what}); give each persona its own Zulip bot",
                    a.persona, b.persona
                ))
                .into());
            }
        }
    }
    Ok(())
}

/// Reads the credentials and builds the deliverer and the receiver.
/// `notices` is the runner's, so what it stores wakes this deliverer.
pub(crate) async fn build(settings: &Settings, notices: Notices) -> Result<ChatParts> {
    let chat = &settings.raw.chat;
    let holder = crate::runner::drive::this_runner();
    let mut webhooks = Vec::new();
    for hook in &chat.webhooks {
        let name = hook.name.get_ref();
        let url = match (&hook.url_file, &hook.url_env) {
            (Some(file), _) => Secret::from_file(&settings.root.join(file)),
            (None, Some(var)) => Secret::from_env(var),
            (None, None) => return Err(BadInput(format!("webhook `{name}` has no URL")).into()),
        }
        .map_err(|e| BadInput(format!("chat webhook `{name}`: {e}")))?;
        let kind = match hook.kind {
            WebhookKindSection::Json => WebhookKind::Json,
            WebhookKindSection::Slack => WebhookKind::Slack,
        };
        webhooks.push(
            WebhookNotifier::new(name, kind, url, std::time::Duration::from_secs(30))
                .map_err(|e| BadInput(format!("chat webhook `{name}`: {e}")))?,
        );
    }
    let Some(zulip) = &chat.zulip else {
        let deliverer = (!webhooks.is_empty()).then(|| Deliverer {
            zulip: None,
            webhooks,
            retry_base: chat.retry_base,
            retry_max: chat.retry_max,
            holder,
            clock: std::sync::Arc::new(crate::core::clock::SystemClock),
        });
        return Ok(ChatParts {
            notices,
            deliverer,
            receiver: None,
            receive: Receive::None,
            webhook: None,
        });
    };
    let bots = chat
        .personas
        .iter()
        .map(|(name, section)| read_bot(settings, name, section))
        .collect::<Result<Vec<_>>>()?;
    distinct(&bots)?;
    let site = url::Url::parse(zulip.site.get_ref())
        .with_context(|| format!("chat.zulip.site `{}`", zulip.site.get_ref()))?;
    let client_of = |persona: &str| -> Result<Option<ZulipClient>> {
        let Some(bot) = bots.iter().find(|b| b.persona == persona) else {
            return Ok(None);
        };
        let client = ZulipClient::new(ZulipSettings {
            site: site.clone(),
            bot_email: bot.email.clone(),
            api_key: bot.key.clone(),
        })
        .map_err(|e| BadInput(format!("chat persona `{persona}`: {e}")))?;
        Ok(Some(client))
    };
    let orchestrator = client_of("orchestrator")?
        .ok_or_else(|| BadInput("[chat.zulip] needs [chat.personas.orchestrator]".to_string()))?;
    let worker = client_of("worker")?;
    let worker_name = chat
        .personas
        .get("worker")
        .map(|p| p.name.clone())
        .unwrap_or_else(|| "worker".to_string());
    let owner = chat
        .owner
        .as_ref()
        .ok_or_else(|| BadInput("[chat.zulip] needs [chat.owner]".to_string()))?;
    let user_id = match (owner.user_id, &owner.email) {
        (Some(id), _) => Some(id),
        (None, Some(email)) => owner_user_id(&orchestrator, email).await?,
        (None, None) => None,
    };
    let inbox = Inbox {
        owner: ChatOwner {
            name: owner.name.clone(),
            email: owner.email.clone(),
            user_id,
        },
        own_emails: bots.iter().map(|b| b.email.clone()).collect(),
        stream: zulip.stream.clone(),
        topic: zulip.topic.clone(),
        notices: notices.clone(),
        clock: std::sync::Arc::new(crate::core::clock::SystemClock),
    };
    let webhook = match zulip.receive {
        Receive::Webhook => {
            let listen: SocketAddr = zulip.webhook_listen.parse().map_err(|_| {
                BadInput(format!(
                    "chat.zulip.webhook_listen `{}` is not an address:port",
                    zulip.webhook_listen
                ))
            })?;
            let token = match &zulip.webhook_token_file {
                Some(file) => Secret::from_file(&settings.root.join(file)),
                None => Secret::from_env(&zulip.webhook_token_env),
            }
            .map_err(|e| BadInput(format!("chat.zulip outgoing webhook token: {e}")))?;
            Some((listen, token))
        }
        Receive::Events | Receive::None => None,
    };
    Ok(ChatParts {
        deliverer: Some(Deliverer {
            zulip: Some(ZulipTopic {
                stream: zulip.stream.clone(),
                topic: zulip.topic.clone(),
                orchestrator: orchestrator.clone(),
                worker,
                worker_name,
            }),
            webhooks,
            retry_base: chat.retry_base,
            retry_max: chat.retry_max,
            holder,
            clock: std::sync::Arc::new(crate::core::clock::SystemClock),
        }),
        receiver: Some(Receiver {
            client: orchestrator,
            inbox,
            retry_base: chat.retry_base,
            retry_max: chat.retry_max,
        }),
        receive: zulip.receive,
        webhook,
        notices,
    })
}

//! `[chat]`: who the owner is, the Zulip topic and its two personas, the other notifiers
//! (JSON and Slack-compatible webhooks, the log) with the priorities each one is sent, and
//! the outbox's retry timing.
//!
//! What it must never do: hold a secret. Bot API keys, webhook URLs and the outgoing
//! webhook's token are named here by an environment variable or a file, and read at start.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::core::outbox::Priority;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatSection {
    /// The owner: the one person whose answers in chat count.
    #[serde(default)]
    pub owner: Option<ChatOwner>,
    /// Messages of a run that an escalation and the model judge see.
    #[serde(default = "default_window")]
    pub window: u32,
    /// The first wait before a failed delivery is tried again; it doubles up to `retry_max`.
    #[serde(default = "default_retry_base", with = "humantime_serde")]
    pub retry_base: Duration,
    #[serde(default = "default_retry_max", with = "humantime_serde")]
    pub retry_max: Duration,
    #[serde(default)]
    pub zulip: Option<ZulipChat>,
    /// `orchestrator` and `worker`: each its own bot.
    #[serde(default)]
    pub personas: BTreeMap<String, PersonaSection>,
    #[serde(default)]
    pub webhooks: Vec<WebhookSection>,
    #[serde(default)]
    pub log: LogNotifierSection,
}

impl Default for ChatSection {
    fn default() -> Self {
        Self {
            owner: None,
            window: default_window(),
            retry_base: default_retry_base(),
            retry_max: default_retry_max(),
            zulip: None,
            personas: BTreeMap::new(),
            webhooks: Vec::new(),
            log: LogNotifierSection::default(),
        }
    }
}

fn default_window() -> u32 {
    20
}
fn default_retry_base() -> Duration {
    Duration::from_secs(5)
}
fn default_retry_max() -> Duration {
    Duration::from_secs(5 * 60)
}

/// The owner as chat knows them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatOwner {
    /// Their full name, for `@**Full Name**`.
    pub name: String,
    /// Their chat email and/or user id: a message counts as theirs when either matches.
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub user_id: Option<u64>,
}

/// How the owner's replies reach executor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Receive {
    /// The event queue's long poll (`register`, `events`), started by the daemon.
    #[default]
    Events,
    /// Zulip's outgoing webhook posts to `webhook_listen` (the owner mentions the bot).
    Webhook,
    /// Replies are not read; the owner answers with `executor decide`.
    None,
}

/// `[chat.zulip]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZulipChat {
    /// The realm's address, such as `https://lumen.zulipchat.com`.
    pub site: Spanned<String>,
    pub stream: String,
    #[serde(default = "default_topic")]
    pub topic: String,
    #[serde(default = "all_priorities")]
    pub priorities: Vec<Priority>,
    #[serde(default)]
    pub receive: Receive,
    /// Where the outgoing-webhook endpoint listens (`receive = "webhook"`).
    #[serde(default = "default_webhook_listen")]
    pub webhook_listen: String,
    /// The variable holding the outgoing webhook's token, or a file holding it.
    #[serde(default = "default_webhook_token_env")]
    pub webhook_token_env: String,
    #[serde(default)]
    pub webhook_token_file: Option<PathBuf>,
}

fn default_topic() -> String {
    "executor".to_string()
}
fn default_webhook_listen() -> String {
    "127.0.0.1:8451".to_string()
}
fn default_webhook_token_env() -> String {
    "ZULIP_WEBHOOK_TOKEN".to_string()
}
fn all_priorities() -> Vec<Priority> {
    vec![Priority::Urgent, Priority::Action, Priority::Info]
}
fn needs_owner() -> Vec<Priority> {
    vec![Priority::Urgent, Priority::Action]
}

/// `[chat.personas.NAME]`: one bot.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonaSection {
    /// The name it goes by in the topic.
    pub name: String,
    /// The bot's email, or the variable holding it.
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub email_env: Option<String>,
    /// The variable holding the bot's API key, or a file holding it (wins).
    #[serde(default)]
    pub key_env: Option<String>,
    #[serde(default)]
    pub key_file: Option<PathBuf>,
}

/// The kind of a `[[chat.webhooks]]` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookKindSection {
    Json,
    Slack,
}

/// `[[chat.webhooks]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSection {
    pub name: Spanned<String>,
    pub kind: WebhookKindSection,
    /// The variable holding the URL (it is a secret: Slack's carry a token), or a file.
    #[serde(default)]
    pub url_env: Option<String>,
    #[serde(default)]
    pub url_file: Option<PathBuf>,
    #[serde(default = "needs_owner")]
    pub priorities: Vec<Priority>,
}

/// `[chat.log]`: the log is always a notifier.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogNotifierSection {
    #[serde(default = "needs_owner")]
    pub priorities: Vec<Priority>,
}

impl Default for LogNotifierSection {
    fn default() -> Self {
        Self {
            priorities: needs_owner(),
        }
    }
}

/// The two personas executor speaks as.
pub const PERSONAS: [&str; 2] = ["orchestrator", "worker"];

/// Checks what the types cannot: `Err((key, message, anchor))`, where `anchor` is text to
/// find the line by.
pub fn validate(chat: &ChatSection) -> Result<(), (&'static str, String, String)> {
    if chat.window == 0 {
        return Err(("chat.window", "must be at least 1".into(), "window".into()));
    }
    if chat.retry_base.is_zero() || chat.retry_max < chat.retry_base {
        return Err((
            "chat.retry_base",
            "must be longer than zero and no longer than retry_max".into(),
            "retry_base".into(),
        ));
    }
    for (name, persona) in &chat.personas {
        if !PERSONAS.contains(&name.as_str()) {
            return Err((
                "chat.personas",
                format!("`{name}` is not a persona (use orchestrator or worker)"),
                format!("[chat.personas.{name}]"),
            ));
        }
        if persona.email.is_some() == persona.email_env.is_some() {
            return Err((
                "chat.personas",
                format!("persona `{name}`: set exactly one of email and email_env"),
                format!("[chat.personas.{name}]"),
            ));
        }
        if persona.key_env.is_none() && persona.key_file.is_none() {
            return Err((
                "chat.personas",
                format!("persona `{name}`: name its API key with key_env or key_file"),
                format!("[chat.personas.{name}]"),
            ));
        }
    }
    if let Some(zulip) = &chat.zulip {
        match url::Url::parse(zulip.site.get_ref()) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => {}
            _ => {
                return Err((
                    "chat.zulip.site",
                    format!("`{}` is not an http(s) URL", zulip.site.get_ref()),
                    "site".into(),
                ))
            }
        }
        if !chat.personas.contains_key("orchestrator") {
            return Err((
                "chat.personas",
                "[chat.zulip] needs [chat.personas.orchestrator] (and may have worker)".into(),
                "[chat.zulip]".into(),
            ));
        }
        if chat.owner.is_none() {
            return Err((
                "chat.owner",
                "[chat.zulip] needs [chat.owner] (name, and email or user_id)".into(),
                "[chat.zulip]".into(),
            ));
        }
        if zulip.receive == Receive::Webhook
            && zulip
                .webhook_listen
                .parse::<std::net::SocketAddr>()
                .is_err()
        {
            return Err((
                "chat.zulip.webhook_listen",
                format!("`{}` is not an address:port", zulip.webhook_listen),
                "webhook_listen".into(),
            ));
        }
    }
    if let Some(owner) = &chat.owner {
        if owner.email.is_none() && owner.user_id.is_none() {
            return Err((
                "chat.owner",
                "name the owner's email or user_id, so only their answers count".into(),
                "[chat.owner]".into(),
            ));
        }
    }
    let mut seen: Vec<&str> = Vec::new();
    for hook in &chat.webhooks {
        let name = hook.name.get_ref().as_str();
        if name.is_empty() || seen.contains(&name) {
            return Err((
                "chat.webhooks.name",
                format!("`{name}` is empty or used twice"),
                "[[chat.webhooks]]".into(),
            ));
        }
        seen.push(name);
        if hook.url_env.is_none() && hook.url_file.is_none() {
            return Err((
                "chat.webhooks",
                format!("webhook `{name}`: name its URL with url_env or url_file"),
                "[[chat.webhooks]]".into(),
            ));
        }
    }
    Ok(())
}

//! Chat with the owner. For now only the thin Zulip client ([`zulip`]): post to a topic, read
//! the recent window of a topic, and receive replies through Zulip's event queue. Personas,
//! the topic as a channel, owner answers and the other notifiers build on it later.
//!
//! What it must never do: print, log or put in a URL or an error a bot's API key.

pub mod webhook;
pub mod zulip;

pub use zulip::{
    mention, EventQueue, ZulipClient, ZulipError, ZulipEvent, ZulipMessage, ZulipOptions,
    ZulipSettings,
};
pub use webhook::{WebhookError, WebhookKind, WebhookNotice, WebhookNotifier};

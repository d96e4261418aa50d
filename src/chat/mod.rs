//! Chat with the owner. The runner tells ([`notices`]): each notice is routed by priority
//! to the log at once and, through the durable outbox, to the Zulip topic (under the
//! orchestrator's or the worker's persona) and to JSON or Slack-compatible webhooks;
//! [`deliver`] sends the outbox in order with backoff. The owner answers in the topic:
//! [`receive`] reads it (event queue, outgoing webhook, catch-up of the recent window) and
//! [`inbox`] applies what the owner said ([`answer`]) exactly once.
//!
//! What it must never do: print, log, store or put in a URL or an error a bot's API key, a
//! webhook's URL or the outgoing webhook's token.

pub mod answer;
pub mod deliver;
pub mod inbox;
pub mod notice;
pub mod notices;
pub mod receive;
pub mod text;
pub mod webhook;
pub mod zulip;

pub use notices::{Notice, Notices, Persona, Routing};
pub use webhook::{WebhookError, WebhookKind, WebhookNotice, WebhookNotifier};
pub use zulip::{
    mention, EventQueue, ZulipClient, ZulipError, ZulipEvent, ZulipMessage, ZulipOptions,
    ZulipSettings,
};

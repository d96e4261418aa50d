//! The one HTTP layer of executor (docs/design.md §7): what every client of an outside
//! service (GitHub, Gitea, Asana, Zulip, the outgoing webhooks) is built from, so each
//! client is only its service's rules and operations.
//!
//! | file | holds |
//! |---|---|
//! | `client.rs` | the `reqwest` client: timeouts, user agent, no redirects; the base URL checked; the credential as a sensitive header |
//! | `answer.rs` | one exchange: transport failures typed ([`Transport`]), the body read, statuses sorted ([`Class`]), messages shortened, bodies decoded saying where they broke |
//! | `retry.rs` | `Retry-After` in seconds and HTTP dates, rate-limit resets, every wait capped at [`retry::MAX_WAIT`] |
//! | `gate.rs` | [`RateGate`]: nothing is sent to a limited service until its limit lifts |
//! | `pauses.rs` | one gate per service for the whole process, seeded from and kept in a [`pauses::PauseLedger`] (the store), so later processes wait a limit out too |
//! | `redact.rs` | [`Redactor`]: secrets cut out of every text that goes into an error |
//! | `secret.rs` | reading a [`Secret`] from the environment or a file |
//! | `github/` | the GitHub API client (REST, GraphQL, caches, rate limits), shared by the forge and the issue source |
//! | `gitea.rs` | the Gitea API client, shared by the forge and the issue source |
//!
//! What it must never do: follow a redirect, put a credential anywhere but the header of a
//! request to the configured host (for a webhook, the URL that is the credential), let a
//! secret into an error, a `Debug` print or a tracing field, or let a service's answer
//! panic the process (a wait past any calendar is cut to a day).

pub mod answer;
pub mod client;
pub mod gate;
pub mod gitea;
pub mod github;
pub mod pauses;
pub mod redact;
pub mod retry;
pub mod secret;

pub use answer::{decode, exchange, message_of, shorten, Answer, Class, Transport, Undecodable};
pub use client::{HttpOptions, USER_AGENT};
pub use gate::RateGate;
pub use redact::Redactor;
pub use secret::{Secret, SecretError};

//! `executor` runs an autonomous team of coding agents on its owner's repositories.
//!
//! The crate follows the parts of the design (docs/design.md §7). Some parts are crates of
//! their own, re-exported here under their module names: `executor-core` as [`core`],
//! [`policy`] and [`protocol`]; `executor-store`, `executor-http`, `executor-forge` and
//! `executor-sources` as [`store`], [`http`], [`forge`] and [`sources`]:
//!
//! | module | holds | may depend on |
//! |---|---|---|
//! | [`core`] (`executor-core`) | types, queue, lifecycle and PR machines, gids, the clock | nothing with I/O (the crate graph holds it) |
//! | [`store`] | the store interface; SQLite and Postgres; migrations | core |
//! | [`agents`] | one adapter per agent CLI: argv, output normalised into `AgentEvent`s | core |
//! | [`runner`] | runs: git worktrees and branches (the run loop builds on it) | core |
//! | [`supervisor`] | one worker process: its group, output lines, watchdog, stop | core |
//! | [`sources`] | the plans folder, Asana, GitHub and Gitea issues | core, http |
//! | [`analyzer`] | triage of pending tasks: rule filters, then an agent's structured answer | core, store, agents, supervisor |
//! | [`protocol`] | worker messages (`[REQUEST:kind] key=value …`): the line parser, JSON form, requests as policy actions | policy (its `Action`) |
//! | [`policy`] | role contracts; tool calls and requests classified into actions and decided | nothing (its only I/O: reading a contract, resolving symlinks) |
//! | [`ops`] | operations that read, decide with the core, and write | core, store, sources |
//! | [`http`] | the one HTTP layer: client builder, `Retry-After`, rate gates, redaction; the GitHub and Gitea API clients | core |
//! | [`forge`] | GitHub and Gitea as forges: what a PR tick reads, the orchestrator's PR operations | core, http |
//! | [`chat`] | telling the owner: notices routed by priority through the durable outbox to the log, the Zulip topic (two personas) and webhooks; the owner's answers read back from the topic (event queue, outgoing webhook) and applied once | core, store, protocol, http |
//! | [`config`] | `executor.toml`: strict parsing, validation, paths | core, store |
//! | [`sandbox`] | the wall: bubblewrap, private homes, workers' cgroups, the network proxy, the macOS profile | core, supervisor |
//! | [`prompts`] | the phase prompt templates: strict loading and rendering | core |
//! | [`conductor`] | goals split into subtasks, worker task files | core |
//! | [`web`] | the console's pages and API handlers | core, store |
//! | [`cli`] | the `executor` command: arguments, output, the daemon's wiring | everything |

pub mod agents;
pub mod analyzer;
pub mod chat;
pub mod cli;
pub mod conductor;
pub mod config;
pub mod ops;
pub mod prompts;
pub mod runner;
pub mod sandbox;
pub mod supervisor;
pub mod web;

// The pure core is a crate of its own (`crates/executor-core`); its modules keep their
// paths here, so `executor::core::…`, `executor::policy::…` and `executor::protocol::…` name
// what they always did.
pub use executor_core as core;
pub use executor_core::{policy, protocol};
pub use executor_forge as forge;
pub use executor_http as http;
pub use executor_sources as sources;
pub use executor_store as store;

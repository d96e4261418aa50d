//! A worker's message line and everything it leads to, as one write (`Store::record_exchange`
//! in the store crate): the line itself, the notices that mirror it and, for a
//! `[REQUEST:…]`, the decision, the notices that tell it and the answer written back into
//! the run's messages. All of it lands, or none of it does: a write tried again after the
//! store failed halfway cannot leave a line twice or a decision without its answer.
//!
//! The rows that depend on the decision as recorded (its id is in the answer and in the
//! owner's notice) are built inside the store's transaction by a [`DecidedRequest`], from
//! the row the store just wrote, so nothing is written with a placeholder that a worker's
//! own text could imitate.
//!
//! What it must never do: I/O. A [`DecidedRequest`] runs inside the store's transaction,
//! on the store's own thread; it computes rows from its arguments and nothing else.

use super::outbox::NewOutgoing;
use super::record::{Decision, NewDecision, NewMessage, StoredMessage};

/// What [`NewExchange`] writes, in this order, in one transaction.
pub struct NewExchange {
    /// The run's lease epoch as its writer holds it: when another runner has claimed the
    /// run since, nothing of the exchange lands (the store's `Fenced`).
    pub lease_epoch: i64,
    /// The worker's line.
    pub message: NewMessage,
    /// The notices that mirror the line, one row per notifier.
    pub outgoing: Vec<NewOutgoing>,
    /// For a `[REQUEST:…]`: how it was decided.
    pub request: Option<std::sync::Arc<dyn DecidedRequest>>,
    /// A try after one that failed: that one may have landed with its answer lost (a
    /// connection cut after the commit). The store first looks for its line among the
    /// run's latest, at the same moment from the same source, and writes nothing again
    /// when it is there ([`Exchanged::landed_before`]).
    pub retry: bool,
}

/// A request decided by the contract, whose rows the store builds in its transaction.
pub trait DecidedRequest: Send + Sync {
    /// How many of the run's latest messages (the line just written among them) the
    /// decision shows the owner; 0 for none.
    fn window(&self) -> u32;

    /// The decision to record, given that window (empty when [`Self::window`] is 0).
    fn decision(&self, window: &[StoredMessage]) -> Result<NewDecision, String>;

    /// What follows from the decision as the store recorded it.
    fn answer(
        &self,
        recorded: &Decision,
        window: &[StoredMessage],
    ) -> Result<RequestAnswer, String>;
}

/// The rows a recorded decision leads to.
pub struct RequestAnswer {
    /// The notices that tell the owner, one row per notifier.
    pub outgoing: Vec<NewOutgoing>,
    /// The orchestrator's answer, written into the run's messages.
    pub message: NewMessage,
}

/// What a landed exchange wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchanged {
    /// The id of the worker's line.
    pub message_id: i64,
    /// The decision as recorded and the window it showed, for a request.
    pub request: Option<(Decision, Vec<StoredMessage>)>,
    /// The outbox rows written (the line's notices, then the decision's).
    pub outbox_ids: Vec<i64>,
    /// A retry found its line already stored: nothing was written now.
    pub landed_before: bool,
}

/// How many of a run's latest lines a retry looks through for its own.
pub const RETRY_LOOKBACK: u32 = 16;

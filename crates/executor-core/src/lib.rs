//! The pure heart of executor: the words of the domain (task, run, event, decision), the
//! queue and run state machines, and the clock they are judged by.
//!
//! Nothing in here performs I/O, spawns, sleeps or reads the system clock directly; every
//! function is a plain computation over its arguments, so all of it is unit-tested without
//! processes, network or database. Modules at the edge (store, sources, cli) call into it.

pub mod analytics;
pub mod budget;
pub mod changes;
pub mod clock;
pub mod ending;
pub mod exchange;
pub mod facts;
pub mod filter;
pub mod gid;
pub mod identity;
pub mod lease;
pub mod lifecycle;
pub mod merge;
pub mod net_refusals;
pub mod outbox;
pub mod policy;
pub mod pr;
pub mod pr_inputs;
pub mod protocol;
pub mod queue;
pub mod record;
pub mod run;
pub mod secret;
pub mod settle;
pub mod spend;
pub mod task;
pub mod time;
pub mod tree;
pub mod usage_limit;
pub mod watchdog;

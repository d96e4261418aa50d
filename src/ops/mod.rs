//! Operations: each one reads what it needs from the store, asks the pure core what to do,
//! and applies the answer. This is where deciding meets doing; nothing here parses
//! arguments or prints (that is the CLI's job).

pub mod analytics;
pub mod end;
pub mod intake;
pub mod queue;
pub mod run;
pub mod service_pauses;
pub mod source_intake;

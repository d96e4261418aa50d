//! The conductor protocol's pure parts: how a goal becomes subtasks and how their progress
//! decides the parent's next step, and the worker task files `executor dispatch` reads.
//! Running workers, storing children and merging branches happen in the runner
//! (`runner::drive::conduct`).
//!
//! What it must never do: I/O. Everything here is a function of its arguments.

pub mod plan;
pub mod progress;
pub mod worker_task;

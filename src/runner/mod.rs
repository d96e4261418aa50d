//! The runner: turns approved tasks into runs, and runs into supervised workers in their
//! own git worktrees. So far it holds the worktree handling; the loop that drives runs
//! through their phases builds on it.

pub mod contract;
pub mod drive;
pub mod engine;
pub mod git;
pub mod judge;
pub mod record;
pub mod store_health;
pub mod worktree;

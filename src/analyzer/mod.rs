//! The analyzer (docs/design.md §3): triages every `pending` task into `for_review`,
//! `awaiting_go` or `skip`, first by the owner's rule filters ([`crate::core::filter`]), then,
//! for what no rule skips, by one call to a coding agent that reads the task and answers
//! with a JSON verdict.
//!
//! | module | holds |
//! |---|---|
//! | [`prompt`] | the analysis prompt: a strict template, built in or the owner's `prompts/executor-analyzer.md` |
//! | [`answer`] | reading and checking the agent's answer (pure) |
//! | [`engine`] | [`Analyzer`]: one task, or every pending one, through rules, agent, store |
//!
//! What it must never do:
//! - call a model for a task a rule skips (the rules exist so no model is paid for it);
//! - lose the owner's notes: a failure's error is appended to them, on a line of its own,
//!   to the notes as they are when it is written;
//! - move a task that is no longer `pending` (the owner may say go while it is analyzed);
//! - give its agent tools, credentials or a folder with anything in it: the agent reads the
//!   task on stdin and answers, in an empty folder of its own, with the environment it is
//!   given and nothing inherited.

pub mod answer;
pub mod engine;
pub mod prompt;

pub use answer::{verdict_name, AnswerError, Triage};
pub use engine::{
    AgentUnavailable, AnalyzeReport, Analyzed, Analyzer, Outcome, TaskError, VerdictCounts, ACTOR,
    ATTEMPTS, DEFAULT_LIMITS,
};
pub use prompt::{PromptTemplate, BUILTIN_PROMPT, PROMPT_FILE};

//! Errors of loading and rendering phase prompts. Each names the file it is about and, where
//! minijinja or the check knows it, the line.

use std::fmt;
use std::path::PathBuf;

use thiserror::Error;

use super::Phase;

/// A place in a prompt file: an override's path, or `built-in NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    pub line: Option<usize>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}, line {line}", self.file),
            None => f.write_str(&self.file),
        }
    }
}

#[derive(Debug, Error)]
pub enum PromptError {
    #[error("cannot read prompt template {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{at}: template syntax error: {detail}")]
    Syntax { at: Location, detail: String },
    /// A variable (or attribute) the context does not have: caught when the template is
    /// loaded, never rendered as an empty string.
    #[error("{at}: unknown variable `{variable}`{detail}")]
    UnknownVariable {
        at: Location,
        variable: String,
        /// What would have been valid, or when the value is missing; starts with a space.
        detail: String,
    },
    #[error("{at}: {detail}")]
    Template { at: Location, detail: String },
    #[error("the {phase} prompt needs {input}, and the context has none")]
    MissingInput { phase: Phase, input: &'static str },
    #[error("asked for the {asked} prompt with a context for the {context} phase")]
    PhaseMismatch { asked: Phase, context: Phase },
}

impl PromptError {
    /// The file and line at fault, for the errors that have one.
    pub fn location(&self) -> Option<&Location> {
        match self {
            PromptError::Syntax { at, .. }
            | PromptError::UnknownVariable { at, .. }
            | PromptError::Template { at, .. } => Some(at),
            _ => None,
        }
    }
}

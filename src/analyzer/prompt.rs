//! The analysis prompt: one strict minijinja template, rendered for one task.
//!
//! Built in as `src/assets/prompts/executor-analyzer.md`; the owner overrides it with a file
//! of the same name in the workspace's `prompts/` folder ([`PromptTemplate::load`]). Like
//! the phase prompts ([`crate::prompts`]), it is checked when it is loaded, not when a task
//! is about to be analyzed: a syntax error, or a variable the context does not have, fails
//! the load with a [`PromptError`] naming the file and the line. It renders in strict mode,
//! with nothing HTML-escaped, and with a `fence` filter for text that may hold backticks.

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use minijinja::{AutoEscape, Environment, ErrorKind, UndefinedBehavior};
use serde::Serialize;

use crate::core::facts::TaskFacts;
use crate::core::task::{body_of, Task};
use crate::prompts::set::{line_of, unknown_part};
use crate::prompts::{Location, PromptError};

/// The template's file name, under the workspace's `prompts/` folder.
pub const PROMPT_FILE: &str = "executor-analyzer.md";

/// The built-in template (what `executor init` may write as the owner's starting copy).
pub const BUILTIN_PROMPT: &str = include_str!("../assets/prompts/executor-analyzer.md");

/// What the template is rendered with. Field names are the template's variable names;
/// every field is always present (absent is `none`, empty is `[]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnalysisContext {
    pub task: TaskVars,
    pub facts: FactVars,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskVars {
    pub gid: String,
    pub title: String,
    /// The description without its title line; `None` when there is nothing more.
    pub description: Option<String>,
    pub source: Option<String>,
    /// The owner's notes.
    pub notes: Option<String>,
    /// The priority the source gave, if any.
    pub priority: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FactVars {
    pub assignee: Option<String>,
    pub labels: Vec<String>,
    pub location: Option<String>,
    pub url: Option<String>,
    pub closed: bool,
}

impl AnalysisContext {
    pub fn new(task: &Task, facts: &TaskFacts) -> Self {
        let nonempty = |text: Option<&str>| {
            text.map(str::trim)
                .filter(|text| !text.is_empty())
                .map(str::to_string)
        };
        AnalysisContext {
            task: TaskVars {
                gid: task.task_gid.clone(),
                title: task.title(),
                description: nonempty(task.description.as_deref().map(body_of)),
                source: nonempty(task.source.as_deref()),
                notes: nonempty(task.notes.as_deref()),
                priority: task.priority,
            },
            facts: FactVars {
                assignee: nonempty(facts.assignee.as_deref())
                    .or_else(|| nonempty(facts.assignee_id.as_deref())),
                labels: facts.labels.clone(),
                location: nonempty(facts.location.as_deref()),
                url: nonempty(facts.url.as_deref()),
                closed: facts.closed,
            },
        }
    }

    /// Every variable set, for the load-time check.
    fn example() -> Self {
        AnalysisContext {
            task: TaskVars {
                gid: "1209876543210".into(),
                title: "Fix the tab preview that sticks".into(),
                description: Some("The preview stays after ```the``` tab closes.".into()),
                source: Some("asana".into()),
                notes: Some("area: browser".into()),
                priority: Some(2),
            },
            facts: FactVars {
                assignee: Some("Marek Kowalski".into()),
                labels: vec!["macOS".into(), "bug".into()],
                location: Some("Browser / Backlog".into()),
                url: Some("https://app.asana.com/0/1/1209876543210".into()),
                closed: true,
            },
        }
    }

    /// Every optional variable absent, for the load-time check.
    fn minimal() -> Self {
        AnalysisContext {
            task: TaskVars {
                gid: "T-1".into(),
                title: String::new(),
                description: None,
                source: None,
                notes: None,
                priority: None,
            },
            facts: FactVars {
                assignee: None,
                labels: Vec::new(),
                location: None,
                url: None,
                closed: false,
            },
        }
    }
}

/// The analysis prompt, loaded and checked.
pub struct PromptTemplate {
    env: Environment<'static>,
    /// The owner's file, or `None` for the built-in.
    path: Option<PathBuf>,
}

impl fmt::Debug for PromptTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PromptTemplate")
            .field("origin", &self.origin())
            .finish()
    }
}

impl PromptTemplate {
    /// The built-in template.
    pub fn builtin() -> Result<Self, PromptError> {
        PromptTemplate::from_text(BUILTIN_PROMPT.to_string(), None)
    }

    /// The owner's template at `override_path` when that file exists, else the built-in.
    /// A file that is there but cannot be read (or is not UTF-8) is an error, never silently
    /// replaced by the built-in.
    pub fn load(override_path: Option<&Path>) -> Result<Self, PromptError> {
        let Some(path) = override_path else {
            return PromptTemplate::builtin();
        };
        let read_error = |source| PromptError::Read {
            path: path.to_path_buf(),
            source,
        };
        match std::fs::read(path) {
            Ok(bytes) => {
                let text = String::from_utf8(bytes).map_err(|_| {
                    read_error(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "the file is not UTF-8",
                    ))
                })?;
                PromptTemplate::from_text(text, Some(path.to_path_buf()))
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => PromptTemplate::builtin(),
            Err(error) => Err(read_error(error)),
        }
    }

    /// Where the template came from: the owner's file, or `built-in executor-analyzer.md`.
    pub fn origin(&self) -> String {
        match &self.path {
            Some(path) => path.display().to_string(),
            None => format!("built-in {PROMPT_FILE}"),
        }
    }

    /// The prompt for `task`, with what its source knows of it.
    pub fn render(&self, task: &Task, facts: &TaskFacts) -> Result<String, PromptError> {
        self.render_context(&AnalysisContext::new(task, facts))
    }

    pub fn render_context(&self, context: &AnalysisContext) -> Result<String, PromptError> {
        self.env
            .get_template(PROMPT_FILE)
            .and_then(|template| template.render(context))
            .map_err(|error| self.error(&error))
    }

    fn from_text(text: String, path: Option<PathBuf>) -> Result<Self, PromptError> {
        let mut template = PromptTemplate {
            env: environment(),
            path,
        };
        if let Err(error) = template.env.add_template_owned(PROMPT_FILE, text) {
            return Err(template.error(&error));
        }
        template.check_variables()?;
        template.render_context(&AnalysisContext::example())?;
        template
            .render_context(&AnalysisContext::minimal())
            .map_err(|error| {
                with_note(
                    error,
                    " (it can be none or empty for some tasks: test it with `{% if %}` first)",
                )
            })?;
        Ok(template)
    }

    /// Every attribute chain the template names (`task.title`) must exist in the context,
    /// whichever branch it sits in.
    fn check_variables(&self) -> Result<(), PromptError> {
        let schema = serde_json::to_value(AnalysisContext::example()).map_err(|error| {
            PromptError::Template {
                at: self.location(None),
                detail: format!("the analysis context does not serialise: {error}"),
            }
        })?;
        let template = self
            .env
            .get_template(PROMPT_FILE)
            .map_err(|error| self.error(&error))?;
        let globals: BTreeSet<String> = self.env.globals().map(|(name, _)| name.into()).collect();
        let mut variables: Vec<String> = template.undeclared_variables(true).into_iter().collect();
        variables.sort();
        for variable in variables {
            if let Some((unknown, known)) = unknown_part(&schema, &globals, &variable) {
                return Err(PromptError::UnknownVariable {
                    at: self.location(line_of(template.source(), &variable)),
                    variable: unknown,
                    detail: format!(" ({known})"),
                });
            }
        }
        Ok(())
    }

    fn location(&self, line: Option<usize>) -> Location {
        Location {
            file: self.origin(),
            line,
        }
    }

    fn error(&self, error: &minijinja::Error) -> PromptError {
        let at = self.location(error.line());
        match error.kind() {
            ErrorKind::SyntaxError => PromptError::Syntax {
                at,
                detail: error.detail().unwrap_or("invalid syntax").to_string(),
            },
            ErrorKind::UndefinedError => {
                let expression = error
                    .range()
                    .zip(error.template_source())
                    .and_then(|(range, source)| source.get(range))
                    .map(|text| text.trim().to_string())
                    .filter(|text| !text.is_empty());
                match expression {
                    Some(variable) => PromptError::UnknownVariable {
                        at,
                        variable,
                        detail: String::new(),
                    },
                    None => PromptError::Template {
                        at,
                        detail: error.kind().to_string(),
                    },
                }
            }
            kind => PromptError::Template {
                at,
                detail: match error.detail() {
                    Some(detail) => format!("{kind}: {detail}"),
                    None => kind.to_string(),
                },
            },
        }
    }
}

/// `error` with `note` added to its detail, where it has one.
fn with_note(error: PromptError, note: &str) -> PromptError {
    match error {
        PromptError::UnknownVariable {
            at,
            variable,
            detail,
        } => PromptError::UnknownVariable {
            at,
            variable,
            detail: format!("{detail}{note}"),
        },
        PromptError::Template { at, detail } => PromptError::Template {
            at,
            detail: format!("{detail}{note}"),
        },
        other => other,
    }
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(true);
    // Spans for error messages, in release builds too.
    env.set_debug(true);
    // A none printed as `none` would reach the model; printing one is an error instead, so
    // the load-time render with a minimal context finds it.
    env.set_formatter(|out, state, value| {
        if value.is_none() {
            return Err(minijinja::Error::new(
                ErrorKind::InvalidOperation,
                NONE_PRINTED,
            ));
        }
        minijinja::escape_formatter(out, state, value)
    });
    env.add_filter("fence", fence);
    env
}

const NONE_PRINTED: &str = "a value that is none was printed";

/// `text` in a fenced code block whose fence is longer than any backtick run inside it, so
/// a task's own code blocks cannot close it.
fn fence(value: minijinja::Value) -> Result<String, minijinja::Error> {
    if value.is_none() {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            NONE_PRINTED,
        ));
    }
    let Some(text) = value.as_str() else {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            "`fence` takes text",
        ));
    };
    Ok(fence_text(text))
}

fn fence_text(text: &str) -> String {
    crate::prompts::set::fence(text.to_string(), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::queue::QueueStatus;
    use chrono::{DateTime, Utc};

    fn task(description: &str, notes: Option<&str>) -> Task {
        Task {
            id: 1,
            task_gid: "T-7".into(),
            added_at: DateTime::<Utc>::UNIX_EPOCH,
            updated_at: DateTime::<Utc>::UNIX_EPOCH,
            source: Some("github".into()),
            description: Some(description.into()),
            notes: notes.map(str::to_string),
            status: QueueStatus::Pending,
            priority: None,
            complexity: None,
            feasibility: None,
            analysis_summary: None,
            executor_run_id: None,
        }
    }

    fn write(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join(PROMPT_FILE);
        std::fs::write(&path, text).expect("write");
        path
    }

    #[test]
    fn the_builtin_prompt_carries_the_task_its_facts_and_the_answer_format() {
        let template = PromptTemplate::builtin().expect("the built-in loads");
        let facts = TaskFacts {
            assignee: Some("Marek".into()),
            labels: vec!["macOS".into(), "bug".into()],
            location: Some("Browser / Backlog".into()),
            url: Some("https://github.com/o/r/issues/7".into()),
            ..TaskFacts::default()
        };
        let text = template
            .render(
                &task(
                    "# Fix tab preview\n\nIt sticks.\n```\ncode\n```",
                    Some("ask Ana"),
                ),
                &facts,
            )
            .expect("renders");
        for expected in [
            "Title: Fix tab preview",
            "Task id: T-7",
            "Source: github",
            "Assignee: Marek",
            "Labels: macOS, bug",
            "Location: Browser / Backlog",
            "Link: https://github.com/o/r/issues/7",
            "It sticks.",
            "ask Ana",
            "awaiting_go",
            "for_review",
            "```json",
            "analysis_summary",
        ] {
            assert!(text.contains(expected), "{expected} missing from:\n{text}");
        }
        // The task's own fence is inside a longer one.
        assert!(text.contains("````\nIt sticks."), "{text}");
        assert!(!text.contains("Priority given by the source"), "{text}");
        // No line starts with a worker-message tag.
        assert!(!text.lines().any(crate::agents::is_protocol_line), "{text}");
    }

    #[test]
    fn a_task_with_only_a_title_renders() {
        let template = PromptTemplate::builtin().expect("the built-in loads");
        let text = template
            .render(&task("# Only a title", None), &TaskFacts::default())
            .expect("renders");
        assert!(text.contains("no description beyond its title"), "{text}");
        assert!(!text.contains("Assignee:"), "{text}");
    }

    #[test]
    fn an_override_file_replaces_the_builtin_and_a_missing_one_does_not() {
        let dir = tempfile::tempdir().expect("temp dir");
        let missing = dir.path().join(PROMPT_FILE);
        let builtin = PromptTemplate::load(Some(&missing)).expect("built-in");
        assert_eq!(builtin.origin(), "built-in executor-analyzer.md");
        assert_eq!(
            PromptTemplate::load(None).expect("built-in").origin(),
            builtin.origin()
        );

        let path = write(
            dir.path(),
            "Triage {{ task.gid }} ({{ facts.labels | join(',') }}): {{ task.title }}\n",
        );
        let owner = PromptTemplate::load(Some(&path)).expect("the override loads");
        assert_eq!(owner.origin(), path.display().to_string());
        let facts = TaskFacts {
            labels: vec!["a".into(), "b".into()],
            ..TaskFacts::default()
        };
        assert_eq!(
            owner
                .render(&task("# Hello", None), &facts)
                .expect("renders"),
            "Triage T-7 (a,b): Hello\n"
        );
    }

    #[test]
    fn a_syntax_error_names_the_file_and_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = write(dir.path(), "line one\n{% if task.title %}\nno end\n");
        let error = PromptTemplate::load(Some(&path)).unwrap_err();
        assert!(matches!(error, PromptError::Syntax { .. }), "{error:?}");
        let message = error.to_string();
        assert!(
            message.starts_with(&path.display().to_string()),
            "{message}"
        );
        assert!(message.contains("line "), "{message}");
    }

    #[test]
    fn an_unknown_variable_fails_the_load_with_its_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = write(
            dir.path(),
            "ok {{ task.title }}\n{% if facts.closed %}\n{{ task.titel }}\n{% endif %}\n",
        );
        let error = PromptTemplate::load(Some(&path)).unwrap_err();
        match &error {
            PromptError::UnknownVariable {
                at,
                variable,
                detail,
            } => {
                assert_eq!(variable, "task.titel");
                assert_eq!(at.line, Some(3));
                assert_eq!(at.file, path.display().to_string());
                assert!(detail.contains("title"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
        let path = write(dir.path(), "{{ verdict }}\n");
        match PromptTemplate::load(Some(&path)).unwrap_err() {
            PromptError::UnknownVariable { variable, at, .. } => {
                assert_eq!(variable, "verdict");
                assert_eq!(at.line, Some(1));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_value_that_can_be_none_used_without_a_test_fails_the_load() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = write(dir.path(), "Title\n\n{{ task.description | fence }}\n");
        let error = PromptTemplate::load(Some(&path)).unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with(&path.display().to_string()),
            "{message}"
        );
        assert!(message.contains("line 3"), "{message}");
        assert!(message.contains("{% if %}"), "{message}");
        // Printed as it is, too.
        let path = write(dir.path(), "{{ task.title }}\n{{ facts.url }}\n");
        let message = PromptTemplate::load(Some(&path)).unwrap_err().to_string();
        assert!(message.contains("line 2"), "{message}");
        assert!(message.contains("none was printed"), "{message}");
        // Guarded, it loads.
        let path = write(dir.path(), "{% if facts.url %}{{ facts.url }}{% endif %}\n");
        assert!(PromptTemplate::load(Some(&path)).is_ok());
    }

    #[test]
    fn an_unreadable_override_is_an_error_not_the_builtin() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(PROMPT_FILE);
        std::fs::write(&path, [0xff, 0xfe, 0x00]).expect("write");
        assert!(matches!(
            PromptTemplate::load(Some(&path)),
            Err(PromptError::Read { .. })
        ));
        // A folder where the file should be.
        let folder = dir.path().join("folder.md");
        std::fs::create_dir(&folder).expect("mkdir");
        assert!(matches!(
            PromptTemplate::load(Some(&folder)),
            Err(PromptError::Read { .. })
        ));
    }

    #[test]
    fn fences_outgrow_the_backticks_inside() {
        assert_eq!(fence_text("a"), "```\na\n```");
        assert_eq!(fence_text("x ```` y"), "`````\nx ```` y\n`````");
    }
}

//! [`PromptSet`]: the phase templates of one workspace, loaded, checked and ready to render.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use minijinja::{AutoEscape, Environment, ErrorKind, UndefinedBehavior};

use super::context::PromptContext;
use super::error::{Location, PromptError};
use super::{builtin_files, Phase};

/// Where a template came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    BuiltIn,
    /// The owner's override.
    File(PathBuf),
}

impl Origin {
    fn describe(&self, name: &str) -> String {
        match self {
            Origin::BuiltIn => format!("built-in {name}"),
            Origin::File(path) => path.display().to_string(),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::BuiltIn => f.write_str("built-in"),
            Origin::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// The phase templates and their partials, each from the owner's `prompts/` folder or
/// built in; every one checked in strict mode when loaded.
#[derive(Debug)]
pub struct PromptSet {
    env: Environment<'static>,
    origins: BTreeMap<String, Origin>,
}

impl PromptSet {
    /// The built-in templates only.
    pub fn builtin() -> Result<Self, PromptError> {
        let files = builtin_files()
            .iter()
            .map(|(name, text)| (name.to_string(), text.to_string(), Origin::BuiltIn))
            .collect();
        PromptSet::from_files(files)
    }

    /// The templates of the `prompts/` folder `dir`: each built-in file that is there is
    /// replaced by the owner's copy, and the owner's extra partials (`_*.md`) are added. A
    /// missing folder means every template is built in; a file that is there but cannot be
    /// read (or is not UTF-8) is an error, never silently replaced by the built-in.
    pub fn load(dir: &Path) -> Result<Self, PromptError> {
        let mut files = Vec::new();
        for (name, text) in builtin_files() {
            let path = dir.join(name);
            match read_template(&path)? {
                Some(owner) => files.push((name.to_string(), owner, Origin::File(path))),
                None => files.push((name.to_string(), text.to_string(), Origin::BuiltIn)),
            }
        }
        for (name, path) in extra_partials(dir)? {
            if let Some(text) = read_template(&path)? {
                files.push((name, text, Origin::File(path)));
            }
        }
        PromptSet::from_files(files)
    }

    /// The prompt of `phase`, rendered with `context` (whose phase must be `phase`, and
    /// which must carry the phase's input: `ci` for `fix_ci`, at least one review thread
    /// for `fix_comments`, `review` for `pr_review`).
    pub fn render(&self, phase: Phase, context: &PromptContext) -> Result<String, PromptError> {
        if context.phase != phase {
            return Err(PromptError::PhaseMismatch {
                asked: phase,
                context: context.phase,
            });
        }
        if let Some(input) = context.missing_input(phase) {
            return Err(PromptError::MissingInput { phase, input });
        }
        self.render_unchecked(phase, context)
            .map_err(|err| self.error(err, phase.file_name(), ""))
    }

    /// Where the file `name` (a phase's [`Phase::file_name`] or a partial) came from.
    pub fn origin(&self, name: &str) -> Option<&Origin> {
        self.origins.get(name)
    }

    /// Every loaded file with its origin, by name.
    pub fn origins(&self) -> impl Iterator<Item = (&str, &Origin)> {
        self.origins
            .iter()
            .map(|(name, origin)| (name.as_str(), origin))
    }

    fn from_files(files: Vec<(String, String, Origin)>) -> Result<Self, PromptError> {
        let mut set = PromptSet {
            env: environment(),
            origins: BTreeMap::new(),
        };
        for (name, text, origin) in files {
            set.origins.insert(name.clone(), origin);
            if let Err(err) = set.env.add_template_owned(name.clone(), text) {
                return Err(set.error(err, &name, ""));
            }
        }
        set.check_variables()?;
        set.check_renders()?;
        Ok(set)
    }

    fn render_unchecked(
        &self,
        phase: Phase,
        context: &PromptContext,
    ) -> Result<String, minijinja::Error> {
        self.env.get_template(phase.file_name())?.render(context)
    }

    /// Every attribute chain a template names from the context (`task.title`) must exist in
    /// the context, whichever branch of the template it sits in.
    fn check_variables(&self) -> Result<(), PromptError> {
        let schema = serde_json::to_value(PromptContext::example(Phase::Queued))
            .expect("the prompt context serialises");
        let globals: BTreeSet<String> = self.env.globals().map(|(name, _)| name.into()).collect();
        for name in self.origins.keys() {
            let template = self
                .env
                .get_template(name)
                .map_err(|err| self.error(err, name, ""))?;
            let mut variables: Vec<String> =
                template.undeclared_variables(true).into_iter().collect();
            variables.sort();
            for variable in variables {
                if let Some((unknown, known)) = unknown_part(&schema, &globals, &variable) {
                    return Err(PromptError::UnknownVariable {
                        at: Location {
                            file: self.describe(name),
                            line: line_of(template.source(), &variable),
                        },
                        detail: format!(" ({known})"),
                        variable: unknown,
                    });
                }
            }
        }
        Ok(())
    }

    /// Every phase template renders with a complete and with a minimal context: this finds
    /// what the static check cannot (a loop variable's misspelt field, a filter misused, an
    /// include that does not exist, a value used without `{% if %}` that can be none).
    fn check_renders(&self) -> Result<(), PromptError> {
        for phase in Phase::ALL {
            self.render_unchecked(phase, &PromptContext::example(phase))
                .map_err(|err| self.error(err, phase.file_name(), ""))?;
            self.render_unchecked(phase, &PromptContext::minimal(phase))
                .map_err(|err| {
                    let note = format!(
                        " (it can be none or empty in a {phase} prompt: test it with \
                         `{{% if %}}` first)"
                    );
                    self.error(err, phase.file_name(), &note)
                })?;
        }
        Ok(())
    }

    fn describe(&self, name: &str) -> String {
        match self.origins.get(name) {
            Some(origin) => origin.describe(name),
            None => name.to_string(),
        }
    }

    /// A minijinja error as a [`PromptError`], located in the file minijinja names (an
    /// include's, when the error is in one) or else `fallback`.
    fn error(&self, err: minijinja::Error, fallback: &str, note: &str) -> PromptError {
        // An error inside an include comes wrapped in "could not render include": the
        // innermost minijinja error is the one with the file and line at fault.
        let mut err = &err;
        while let Some(inner) = std::error::Error::source(err)
            .and_then(|source| source.downcast_ref::<minijinja::Error>())
        {
            err = inner;
        }
        let at = Location {
            file: self.describe(err.name().unwrap_or(fallback)),
            line: err.line(),
        };
        let detail = match err.detail() {
            Some(detail) => format!("{}: {detail}", err.kind()),
            None => err.kind().to_string(),
        };
        match err.kind() {
            ErrorKind::SyntaxError => PromptError::Syntax {
                at,
                detail: err.detail().unwrap_or("invalid syntax").to_string(),
            },
            ErrorKind::UndefinedError => {
                let expression = err
                    .range()
                    .zip(err.template_source())
                    .and_then(|(range, source)| source.get(range))
                    .map(|text| text.trim().to_string())
                    .filter(|text| !text.is_empty());
                match expression {
                    Some(variable) => PromptError::UnknownVariable {
                        at,
                        variable,
                        detail: note.to_string(),
                    },
                    None => PromptError::Template {
                        at,
                        detail: format!("{detail}{note}"),
                    },
                }
            }
            _ => PromptError::Template { at, detail },
        }
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
    env.add_filter("fence", fence);
    env.add_filter("blockquote", blockquote);
    env
}

/// A template file's text; `None` when it does not exist.
fn read_template(path: &Path) -> Result<Option<String>, PromptError> {
    let read_error = |source| PromptError::Read {
        path: path.to_path_buf(),
        source,
    };
    match fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            read_error(io::Error::new(
                io::ErrorKind::InvalidData,
                "the file is not UTF-8",
            ))
        }),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(read_error(err)),
    }
}

/// The owner's own partials in `dir`: `_*.md` files that are not built-in names, by name.
fn extra_partials(dir: &Path) -> Result<Vec<(String, PathBuf)>, PromptError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(PromptError::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut partials = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| PromptError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let builtin = builtin_files().iter().any(|(file, _)| *file == name);
        if name.starts_with('_') && name.ends_with(".md") && !builtin {
            partials.push((name, entry.path()));
        }
    }
    partials.sort();
    Ok(partials)
}

/// If `variable` (`task.title`, as minijinja reports a nested lookup) leaves the context's
/// shape, the unknown part (`task.nmae`) and what is known at that point. Lookups on a
/// string or a list (`task.title.upper`) are left to the render check.
pub(crate) fn unknown_part(
    schema: &serde_json::Value,
    globals: &BTreeSet<String>,
    variable: &str,
) -> Option<(String, String)> {
    let mut parts = variable.split('.');
    let first = parts.next()?;
    let mut current = match schema.get(first) {
        Some(value) => value,
        None if globals.contains(first) => return None,
        None => {
            let known = keys(schema);
            return Some((first.to_string(), format!("the variables are: {known}")));
        }
    };
    let mut path = first.to_string();
    for part in parts {
        let serde_json::Value::Object(fields) = current else {
            return None;
        };
        match fields.get(part) {
            Some(value) => {
                path = format!("{path}.{part}");
                current = value;
            }
            None => {
                let known = keys(current);
                return Some((format!("{path}.{part}"), format!("`{path}` has: {known}")));
            }
        }
    }
    None
}

fn keys(value: &serde_json::Value) -> String {
    let mut keys: Vec<&str> = value
        .as_object()
        .map(|fields| fields.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    keys.join(", ")
}

/// The line of the first use of `variable` inside a `{{ }}` or `{% %}` tag of `source`.
pub(crate) fn line_of(source: &str, variable: &str) -> Option<usize> {
    let is_name = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(found) = source[from..].find(variable) {
        let start = from + found;
        let end = start + variable.len();
        from = start + 1;
        let before = source[..start].chars().next_back();
        let after = source[end..].chars().next();
        if before.is_some_and(|c| is_name(c) || c == '.') || after.is_some_and(is_name) {
            continue;
        }
        let opened = ["{{", "{%"]
            .iter()
            .filter_map(|tag| source[..start].rfind(tag))
            .max();
        let closed = ["}}", "%}", "#}"]
            .iter()
            .filter_map(|tag| source[..start].rfind(tag))
            .max();
        if opened.is_some_and(|open| closed.is_none_or(|close| close < open)) {
            return Some(source[..start].matches('\n').count() + 1);
        }
    }
    None
}

/// `text` in a fenced code block whose fence is longer than any backtick run inside it.
pub(crate) fn fence(text: String, lang: Option<String>) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let marker = "`".repeat((longest + 1).max(3));
    let lang = lang.unwrap_or_default();
    let body = text.trim_matches('\n');
    if body.is_empty() {
        format!("{marker}{lang}\n{marker}")
    } else {
        format!("{marker}{lang}\n{body}\n{marker}")
    }
}

/// `text` as a markdown block quote.
pub(super) fn blockquote(text: String) -> String {
    text.trim_matches('\n')
        .lines()
        .map(|line| {
            if line.trim().is_empty() {
                ">".to_string()
            } else {
                format!("> {line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

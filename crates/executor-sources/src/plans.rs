//! The plans folder: one task per markdown note.
//!
//! A note may open with YAML front matter between `---` lines. `title`, `priority`, `source`
//! and `gid` are read from it; every other key is kept, as YAML, in the task's `notes`.
//! Without a `gid` the task's gid is derived from the note's path, so it is stable across
//! edits and restarts. A note whose front matter says `status: draft` is read but marked a
//! draft: the intake leaves it out of the queue until the owner removes that line.
//! [`parse_note`] is pure; [`scan`] only reads files, never writes them.

use std::path::{Path, PathBuf};

use serde_yaml_ng::{Mapping, Value};
use thiserror::Error;

use executor_core::gid::{self, GidError};
use executor_core::task::{compose_description, title_of};

/// The source name of tasks from the plans folder (unless a note names another).
pub const SOURCE: &str = "plans";

/// A note read successfully.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanNote {
    pub gid: String,
    pub title: String,
    pub priority: Option<i64>,
    pub source: Option<String>,
    pub description: String,
    /// The front matter keys this version does not use, as YAML.
    pub notes: Option<String>,
    /// `status: draft` in the front matter: still being written, not to be taken in.
    pub draft: bool,
}

/// Why a note was not taken in. The note itself is left untouched.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum NoteError {
    #[error("cannot read the note: {0}")]
    Unreadable(String),
    #[error("the file name is not UTF-8; rename the note")]
    NameNotUtf8,
    #[error("not UTF-8 text (invalid byte at offset {0})")]
    NotUtf8(usize),
    #[error("the note is empty")]
    Empty,
    #[error("the note holds a NUL byte on line {0}, which the database cannot store; remove it")]
    NulByte(usize),
    #[error("front matter opened with `---` on line 1 is never closed by a `---` line")]
    UnclosedFrontMatter,
    #[error("front matter is not valid YAML: {0}")]
    BadYaml(String),
    #[error("front matter must be `key: value` lines, not a {0}")]
    NotAMapping(&'static str),
    #[error("front matter `{key}` must be {expected}")]
    BadField {
        key: &'static str,
        expected: &'static str,
    },
    #[error("front matter `gid`: {0}")]
    BadGid(GidError),
    #[error("front matter `source`: {0}")]
    ReservedSource(String),
    #[error("{0}")]
    TitleTooLong(String),
    #[error("a symbolic link to {0}, outside the plans folder: not followed")]
    LinkLeavesFolder(String),
    #[error("a symbolic link to {0}, which cannot be followed (missing or unreadable)")]
    LinkBroken(String),
}

/// Reads one note. `relative_path` is its path inside the plans folder, with `/` separators.
pub fn parse_note(relative_path: &str, bytes: &[u8]) -> Result<PlanNote, NoteError> {
    let text = std::str::from_utf8(bytes).map_err(|e| NoteError::NotUtf8(e.valid_up_to()))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if let Some(at) = text.find('\0') {
        // Postgres refuses NUL in text; SQLite would keep it. Refused the same on both.
        return Err(NoteError::NulByte(text[..at].matches('\n').count() + 1));
    }
    if text.trim().is_empty() {
        return Err(NoteError::Empty);
    }
    let (front, body) = split_front_matter(text)?;
    let mut fields = match front {
        None => Mapping::new(),
        Some(yaml) => match serde_yaml_ng::from_str::<Value>(yaml) {
            Ok(Value::Mapping(mapping)) => mapping,
            Ok(Value::Null) => Mapping::new(),
            Ok(other) => return Err(NoteError::NotAMapping(kind_of(&other))),
            Err(e) => return Err(NoteError::BadYaml(e.to_string())),
        },
    };

    let draft = take_draft(&mut fields);
    let title = take_string(&mut fields, "title")?;
    let source = take_string(&mut fields, "source")?;
    if let Some(why) = source
        .as_deref()
        .and_then(executor_core::task::reserved_source)
    {
        return Err(NoteError::ReservedSource(why));
    }
    let priority = match fields.shift_remove("priority") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(n.as_i64().ok_or(NoteError::BadField {
            key: "priority",
            expected: "a whole number",
        })?),
        Some(_) => {
            return Err(NoteError::BadField {
                key: "priority",
                expected: "a whole number",
            })
        }
    };
    let gid = match fields.shift_remove("gid") {
        None | Some(Value::Null) => gid::for_plan_note(relative_path),
        Some(Value::String(s)) => gid::validate(&s).map_err(NoteError::BadGid)?.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => {
            return Err(NoteError::BadField {
                key: "gid",
                expected: "a string or a number",
            })
        }
    };

    let body = body.trim();
    let heading = body
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .filter(|line| line.starts_with("# "))
        .map(|_| title_of(body));
    let (title, description) = match (title, heading) {
        (Some(title), Some(heading)) if title == heading => (title, body.to_string()),
        (Some(title), _) => {
            let description = compose_description(&title, body);
            (title, description)
        }
        (None, Some(heading)) => (heading, body.to_string()),
        (None, None) => {
            let title = file_stem(relative_path);
            let description = compose_description(&title, body);
            (title, description)
        }
    };
    if let Some(why) = executor_core::task::title_too_long(&title) {
        return Err(NoteError::TitleTooLong(why));
    }

    let notes = if fields.is_empty() {
        None
    } else {
        Some(
            serde_yaml_ng::to_string(&Value::Mapping(fields))
                .map_err(|e| NoteError::BadYaml(e.to_string()))?
                .trim_end()
                .to_string(),
        )
    };

    Ok(PlanNote {
        gid,
        title,
        priority,
        source,
        description,
        notes,
        draft,
    })
}

/// Whether `status` says `draft` (any case); only then is the key taken out of the front
/// matter. Any other `status` (an Obsidian workflow's own `todo`, `done`, …) stays in the
/// task's notes as before.
fn take_draft(fields: &mut Mapping) -> bool {
    let is_draft = matches!(
        fields.get("status"),
        Some(Value::String(s)) if s.trim().eq_ignore_ascii_case("draft")
    );
    if is_draft {
        fields.shift_remove("status");
    }
    is_draft
}

/// Splits `---\nYAML\n---\nbody`; a text without an opening `---` line is all body.
fn split_front_matter(text: &str) -> Result<(Option<&str>, &str), NoteError> {
    let first_line_end = text.find('\n').unwrap_or(text.len());
    if text[..first_line_end].trim_end() != "---" {
        return Ok((None, text));
    }
    let rest = &text[(first_line_end + 1).min(text.len())..];
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare == "---" || bare == "..." {
            return Ok((Some(&rest[..offset]), &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err(NoteError::UnclosedFrontMatter)
}

fn take_string(fields: &mut Mapping, key: &'static str) -> Result<Option<String>, NoteError> {
    match fields.shift_remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(NoteError::BadField {
            key,
            expected: "text",
        }),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Sequence(_) => "list",
        Value::String(_) => "plain text",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        _ => "value of another kind",
    }
}

fn fingerprint(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn file_stem(relative_path: &str) -> String {
    let name = relative_path.rsplit('/').next().unwrap_or(relative_path);
    name.strip_suffix(".md").unwrap_or(name).to_string()
}

/// One note found in the folder.
#[derive(Debug)]
pub struct ScannedNote {
    /// Path inside the plans folder, `/`-separated.
    pub relative_path: String,
    pub path: PathBuf,
    /// A hash of the bytes read, so callers can skip notes that did not change.
    pub fingerprint: String,
    pub note: Result<PlanNote, NoteError>,
}

/// Reads every `.md` note under `dir` (recursively, skipping hidden files and folders such
/// as `.obsidian`), sorted by path. A symbolic link is followed only to a note inside the
/// folder; one that leads outside it is returned as a note with its reason, unread. A missing folder reads as empty; a folder that cannot be
/// listed is an error. A subfolder that cannot be listed, or a note whose name is not
/// UTF-8, is returned as a note with its reason, so it is reported instead of skipped.
pub fn scan(dir: &Path) -> std::io::Result<Vec<ScannedNote>> {
    let mut found = Vec::new();
    if dir.is_dir() {
        let entries = std::fs::read_dir(dir)?;
        // Where the folder really is, for telling a link that stays inside from one that
        // leaves (the folder itself may be reached through a link).
        let real_root = std::fs::canonicalize(dir)?;
        walk(dir, &real_root, entries, &mut found);
    }
    found.sort_by(|a, b| a.relative_path.cmp(&b.relative_path));
    Ok(found)
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

fn unreadable(root: &Path, path: &Path, error: NoteError) -> ScannedNote {
    ScannedNote {
        relative_path: relative(root, path),
        path: path.to_path_buf(),
        fingerprint: String::new(),
        note: Err(error),
    }
}

/// Why the symbolic link `path` is not followed: it leads outside `real_root`, or nowhere
/// it can tell. A link leaving the folder is never followed, so a note cannot make a task of
/// `/proc/self/environ` or a file in the owner's home.
fn link_outside(path: &Path, real_root: &Path) -> Option<NoteError> {
    match std::fs::canonicalize(path) {
        Ok(target) if target.starts_with(real_root) => None,
        Ok(target) => Some(NoteError::LinkLeavesFolder(target.display().to_string())),
        Err(_) => Some(NoteError::LinkBroken(
            std::fs::read_link(path)
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "an unreadable target".into()),
        )),
    }
}

fn walk(root: &Path, real_root: &Path, entries: std::fs::ReadDir, found: &mut Vec<ScannedNote>) {
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            // The folder changed under us; the next scan reads it again.
            Err(_) => continue,
        };
        let path = entry.path();
        let os_name = entry.file_name();
        let lossy_name = os_name.to_string_lossy();
        if lossy_name.starts_with('.') {
            continue;
        }
        let file_type = match entry.file_type() {
            Ok(file_type) => file_type,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                found.push(unreadable(
                    root,
                    &path,
                    NoteError::Unreadable(e.to_string()),
                ));
                continue;
            }
        };
        if file_type.is_symlink() {
            if let Some(why) = link_outside(&path, real_root) {
                // Only what would have been read is worth a report: a note, a folder.
                if lossy_name.to_ascii_lowercase().ends_with(".md") || path.is_dir() {
                    found.push(unreadable(root, &path, why));
                }
                continue;
            }
            // A link to a folder inside is not walked: what it leads to is walked already.
            if path.is_dir() {
                continue;
            }
        }
        if file_type.is_dir() {
            match std::fs::read_dir(&path) {
                Ok(entries) => walk(root, real_root, entries, found),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => found.push(unreadable(
                    root,
                    &path,
                    NoteError::Unreadable(format!("cannot list this folder: {e}")),
                )),
            }
            continue;
        }
        if !lossy_name.to_ascii_lowercase().ends_with(".md") {
            continue;
        }
        if os_name.to_str().is_none() {
            found.push(unreadable(root, &path, NoteError::NameNotUtf8));
            continue;
        }
        let relative_path = relative(root, &path);
        let (fingerprint, note) = match std::fs::read(&path) {
            Ok(bytes) => (fingerprint(&bytes), parse_note(&relative_path, &bytes)),
            // Gone between listing and reading (an editor's atomic save): skip it;
            // the next scan sees the new file.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => (String::new(), Err(NoteError::Unreadable(e.to_string()))),
        };
        found.push(ScannedNote {
            relative_path,
            path,
            fingerprint,
            note,
        });
    }
}

#[cfg(test)]
mod tests;

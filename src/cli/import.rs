//! `executor import FILE`: a bulk load of tasks from JSON lines, one task per line:
//!
//! ```json
//! {"gid": "1209876543210987", "title": "Tab preview stuck", "body": "Steps: …", "source": "asana",
//!  "priority": 2, "notes": "…", "facts": {"assignee_id": "1201987654320001", "labels": ["macOS"]}}
//! ```
//!
//! `gid` and `title` are required; `source` defaults to `import`. A gid already queued is
//! updated (its status never moves); a new task enters `pending`, for the analyzer. A line
//! that cannot be read is named (file and line, and the field) and skipped; every other line
//! is still taken in, and the command then fails with exit code 2.
//!
//! What it must never do: stop half-way on one bad line, or change a task's status.

use std::io::BufRead;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Deserialize;

use super::BadInput;
use crate::core::clock::Clock;
use crate::core::facts::TaskFacts;
use crate::core::gid;
use crate::core::queue::QueueStatus;
use crate::core::task::{compose_description, NewTask, UpsertOutcome};
use crate::store::Store;

/// The source of an imported task that names none.
pub const SOURCE: &str = "import";

/// How often a long import says how far it got.
const PROGRESS_EVERY: usize = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    gid: String,
    title: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    priority: Option<i64>,
    #[serde(default)]
    notes: Option<String>,
    #[serde(default)]
    facts: Option<TaskFacts>,
}

#[derive(Debug, Default)]
struct Counts {
    created: usize,
    updated: usize,
    unchanged: usize,
    rejected: usize,
}

pub async fn run(store: &dyn Store, clock: &dyn Clock, file: &Path) -> Result<()> {
    let opened = std::fs::File::open(file)
        .map_err(|e| BadInput(format!("cannot open {}: {e}", file.display())))?;
    let reader = std::io::BufReader::new(opened);
    let mut counts = Counts::default();
    for (index, bytes) in reader.split(b'\n').enumerate() {
        let number = index + 1;
        let bytes =
            bytes.with_context(|| format!("cannot read {} line {number}", file.display()))?;
        // A line that is not UTF-8 is one bad line, not the end of the import.
        let read = match std::str::from_utf8(&bytes) {
            Ok(line) if line.trim().is_empty() => continue,
            Ok(line) => read_line(line.trim_end_matches('\r')),
            Err(e) => Err(format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.valid_up_to()
            )),
        };
        let read = match read {
            Ok((new, facts)) => match store.upsert_task(&new, "import", clock.now()).await {
                Ok((_, outcome)) => Ok((new, facts, outcome)),
                // This line's values, not the store: the other lines go on.
                Err(error) if error.is_refused_value() => {
                    Err(format!("the database refused it: {}", error.with_causes()))
                }
                Err(error) => return Err(error.into()),
            },
            Err(why) => Err(why),
        };
        match read {
            Ok((new, facts, outcome)) => {
                if let Some(facts) = facts {
                    store
                        .save_task_facts(
                            &new.task_gid,
                            &serde_json::to_string(&facts)?,
                            clock.now(),
                        )
                        .await?;
                }
                match outcome {
                    UpsertOutcome::Created => counts.created += 1,
                    UpsertOutcome::Updated => counts.updated += 1,
                    UpsertOutcome::Unchanged => counts.unchanged += 1,
                }
            }
            Err(why) => {
                counts.rejected += 1;
                eprintln!("{} line {number}: {why}; skipped", file.display());
            }
        }
        if number % PROGRESS_EVERY == 0 {
            eprintln!("import: {number} lines read");
        }
    }
    println!(
        "imported {}: {} new, {} updated, {} unchanged, {} rejected",
        file.display(),
        counts.created,
        counts.updated,
        counts.unchanged,
        counts.rejected
    );
    if counts.rejected > 0 {
        return Err(BadInput(format!(
            "{} line(s) of {} could not be imported (named above); the rest were",
            counts.rejected,
            file.display()
        ))
        .into());
    }
    Ok(())
}

/// One line as a task and its facts, or why not (naming the field).
fn read_line(text: &str) -> Result<(NewTask, Option<TaskFacts>), String> {
    let line: Line = serde_json::from_str(text).map_err(|e| format!("not a task: {e}"))?;

    // Postgres refuses NUL in text (SQLite would keep it): refused the same on both.
    for (field, value) in [
        ("title", Some(line.title.as_str())),
        ("body", line.body.as_deref()),
        ("notes", line.notes.as_deref()),
        ("source", line.source.as_deref()),
    ] {
        if value.is_some_and(|v| v.contains('\0')) {
            return Err(format!(
                "`{field}` holds a NUL character (\\u0000), which the database cannot store"
            ));
        }
    }
    let gid = gid::validate(&line.gid).map_err(|e| format!("`gid`: {e}"))?;
    let title = line.title.trim();
    if title.is_empty() || title.contains('\n') {
        return Err("`title` must be one non-empty line".into());
    }
    if let Some(why) = crate::core::task::title_too_long(title) {
        return Err(format!("`title`: {why}"));
    }
    let source = line.source.as_deref().map(str::trim).unwrap_or(SOURCE);
    if source.is_empty() {
        return Err("`source` must not be empty".into());
    }
    if let Some(why) = crate::core::task::reserved_source(source) {
        return Err(format!("`source`: {why}"));
    }
    Ok((
        NewTask {
            task_gid: gid.to_string(),
            source: source.to_string(),
            description: compose_description(title, line.body.as_deref().unwrap_or("")),
            notes: line.notes,
            priority: line.priority,
            initial_status: QueueStatus::Pending,
        },
        line.facts,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_becomes_a_task_and_its_facts() {
        let (task, facts) = read_line(
            r#"{"gid":"1209876543210987","title":"Tab preview stuck","body":"Steps: hover.","source":"asana","priority":2,"facts":{"labels":["macOS"],"closed":false}}"#,
        )
        .expect("a task");
        assert_eq!(task.task_gid, "1209876543210987");
        assert_eq!(task.source, "asana");
        assert_eq!(task.description, "# Tab preview stuck\n\nSteps: hover.");
        assert_eq!(task.priority, Some(2));
        assert_eq!(task.initial_status, QueueStatus::Pending);
        assert_eq!(facts.expect("facts").labels, ["macOS"]);

        let (task, facts) = read_line(r#"{"gid":"T-1","title":"A"}"#).expect("a task");
        assert_eq!(task.source, SOURCE);
        assert_eq!(facts, None);
    }

    #[test]
    fn a_bad_line_names_what_is_wrong() {
        let cases = [
            (r#"{"title":"A"}"#, "gid"),
            (r#"{"gid":"T-1","title":"A","colour":"red"}"#, "colour"),
            (r#"{"gid":"T-1","title":" "}"#, "title"),
            (r#"{"gid":"bad gid with spaces","title":"A"}"#, "gid"),
            (
                r#"{"gid":"T-1","title":"A","priority":"high"}"#,
                "invalid type",
            ),
            ("not json", "not a task"),
            (
                r#"{"gid":"T-1","title":"A","source":"dispatch"}"#,
                "`source`: `dispatch` is reserved",
            ),
            (
                r#"{"gid":"T-1","title":"A","body":"x\u0000y"}"#,
                "`body` holds a NUL",
            ),
            (
                r#"{"gid":"T-1","title":"A","facts":{"label":["macOS"]}}"#,
                "label",
            ),
        ];
        for (line, named) in cases {
            let why = read_line(line).expect_err(line);
            assert!(why.contains(named), "{line}: {why}");
        }
    }
}

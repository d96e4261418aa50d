//! The work log of one worker: readable `.md` beside the raw `.jsonl`, per phase.

use crate::core::clock::Clock;
use crate::supervisor::Stream;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// `logs/{task_gid}/{phase}_{YYYY-MM-DD-HH-MM-SS-mmm}.md` (readable) beside `.jsonl` (raw).
/// The milliseconds keep two workers of one second in files of their own, and let `logs`
/// list them in the order they started.
pub(super) struct PhaseLog {
    pub(super) md: Option<std::fs::File>,
    pub(super) jsonl: Option<std::fs::File>,
    clock: Arc<dyn Clock>,
}

impl PhaseLog {
    pub(super) fn create(
        logs_dir: &Path,
        gid: &str,
        phase: &str,
        clock: &Arc<dyn Clock>,
    ) -> Result<Self> {
        let dir = logs_dir.join(gid);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let stamp = clock.now().format("%Y-%m-%d-%H-%M-%S-%3f");
        let base = dir.join(format!("{phase}_{stamp}"));
        let open = |ext: &str| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(base.with_extension(ext))
        };
        let mut md = open("md").with_context(|| format!("cannot write {}.md", base.display()))?;
        let jsonl =
            open("jsonl").with_context(|| format!("cannot write {}.jsonl", base.display()))?;
        let _ = writeln!(md, "# {gid} · {phase} · {stamp}\n");
        Ok(Self {
            md: Some(md),
            jsonl: Some(jsonl),
            clock: Arc::clone(clock),
        })
    }

    pub(super) fn raw(&mut self, stream: Stream, line: &str) {
        /// One line of the `.jsonl`, serialized as it is (no JSON tree built per line).
        #[derive(serde::Serialize)]
        struct Raw<'a> {
            at: String,
            stream: Stream,
            line: &'a str,
        }
        if let Some(file) = self.jsonl.as_mut() {
            let record = Raw {
                at: crate::core::time::format_utc(&self.clock.now()),
                stream,
                line,
            };
            let mut bytes = match serde_json::to_vec(&record) {
                Ok(bytes) => bytes,
                Err(_) => return,
            };
            bytes.push(b'\n');
            // One write per line, so a reader never sees half of one.
            if file.write_all(&bytes).is_err() {
                self.jsonl = None;
            }
        }
    }

    pub(super) fn message(&mut self, text: &str) {
        if let Some(file) = self.md.as_mut() {
            let at = self.clock.now().format("%H:%M:%S");
            if writeln!(file, "- {at} {text}").is_err() {
                self.md = None;
            }
        }
    }
}

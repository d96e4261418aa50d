//! The local forge's verification: the configured command run in the worktree, inside the
//! wall, recorded like a worker.

use super::RunnerSettings;
use crate::core::record::WorkerRecord;
use crate::core::watchdog::Limits;
use crate::runner::drive::host;
use crate::runner::drive::PhaseLog;
use crate::runner::drive::MAX_LINE;
use crate::store::Store;
use crate::supervisor::{self, WorkerEvent, WorkerSpec};
use anyhow::Result;
use std::collections::HashMap;
use std::path::Path;

/// Lines of verification output a `fix_ci` worker is shown.
pub(super) const EXCERPT_LINES: usize = 60;

/// The verification's verdict.
pub(super) struct Verdict {
    pub(super) passed: bool,
    pub(super) summary: Option<String>,
    pub(super) excerpt: String,
}

/// Runs the verification command in the worktree. Its process is recorded like a worker's
/// (phase `verify`), so a runner killed meanwhile leaves nothing that recovery misses.
pub(super) async fn verify(
    store: &dyn Store,
    settings: &RunnerSettings,
    run_id: i64,
    gid: &str,
    worktree: &Path,
) -> Result<Verdict> {
    if settings.verify.is_empty() {
        return Ok(Verdict {
            passed: true,
            summary: None,
            excerpt: String::new(),
        });
    }
    let mut log = PhaseLog::create(&settings.logs_dir, gid, "verify", &settings.clock)?;
    let mut env: HashMap<String, String> = HashMap::new();
    for key in ["PATH", "HOME", "LANG", "TMPDIR"] {
        if let Ok(value) = std::env::var(key) {
            env.insert(key.to_string(), value);
        }
    }
    let spec = WorkerSpec {
        argv: settings.verify.clone(),
        cwd: worktree.to_path_buf(),
        env,
        stdin: None,
        limits: Limits {
            no_output: settings.limits.hard,
            hard: settings.limits.hard,
        },
        grace: settings.grace,
        max_line: MAX_LINE,
        os_limits: None,
        kept: false,
        heartbeat: settings.lease_beat.heartbeat(run_id),
    };
    let place = settings.place(
        run_id,
        worktree,
        None,
        format!("run {run_id} (verify)"),
        Vec::new(),
    );
    let enclosed = settings.wall.enclose(spec, &place)?;
    let (spec, _gate) = (enclosed.spec, enclosed.gate);
    let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut record = None;
    let outcome = {
        let supervised = supervisor::supervise(
            spec,
            |event| {
                match event {
                    WorkerEvent::Started { pid, start_time } => {
                        let _ = started_tx.send((pid, start_time));
                    }
                    WorkerEvent::Line { stream, line } => {
                        let text = line.text();
                        log.raw(stream, &text);
                        if tail.len() == EXCERPT_LINES {
                            tail.pop_front();
                        }
                        tail.push_back(text);
                    }
                }
                true
            },
            None,
        );
        tokio::pin!(supervised);
        loop {
            // The start is looked at first: a command that ends at once has its start and
            // its end ready together, and its record must not be skipped.
            tokio::select! {
                biased;
                Some((pid, start_time)) = started_rx.recv() => {
                    record = Some(store.record_worker(&WorkerRecord {
                        id: 0,
                        run_id,
                        phase: "verify".to_string(),
                        host: host(),
                        pid: i64::from(pid),
                        start_time: start_time.and_then(|t| i64::try_from(t).ok()),
                        started_at: settings.clock.now(),
                        ended_at: None,
                        outcome: None,
                    }).await?);
                }
                outcome = &mut supervised => break outcome?,
            }
        }
    };
    let passed = outcome.succeeded();
    if let Some(id) = record {
        let ended = if passed { "passed" } else { "failed" };
        store.end_worker(id, settings.clock.now(), ended).await?;
    }
    log.message(&verify_note(&outcome, &tail));
    Ok(Verdict {
        passed,
        summary: tail.back().cloned(),
        excerpt: tail.into_iter().collect::<Vec<_>>().join("\n"),
    })
}

/// Lines of a failed verification's output the work log shows.
pub(super) const VERIFY_LOG_LINES: usize = 20;

/// The work log's word on a verification: how it ended (`exit 1`, a signal, stopped) and,
/// when it failed, its last lines, so `executor logs` says why without the raw `.jsonl`.
pub(super) fn verify_note(
    outcome: &supervisor::Outcome,
    tail: &std::collections::VecDeque<String>,
) -> String {
    let ended = match (outcome.stopped.as_ref(), outcome.exit_code, outcome.signal) {
        (Some(crate::core::watchdog::StopReason::HardTimeout), _, _) => {
            "stopped at the hard timeout".to_string()
        }
        (Some(crate::core::watchdog::StopReason::NoOutput), _, _) => {
            "stopped: no output for too long".to_string()
        }
        (Some(crate::core::watchdog::StopReason::Requested), _, _) => "stopped".to_string(),
        (Some(crate::core::watchdog::StopReason::ProcessCap), _, _) => {
            "stopped at its process cap ([sandbox] max_processes)".to_string()
        }
        (Some(crate::core::watchdog::StopReason::DiskBudget), _, _) => {
            "stopped past its disk budget ([sandbox] max_disk)".to_string()
        }
        (None, Some(code), _) => format!("exit {code}"),
        (None, None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None, None) => "no exit status".to_string(),
    };
    if outcome.succeeded() {
        return format!("verification passed ({ended})");
    }
    let skip = tail.len().saturating_sub(VERIFY_LOG_LINES);
    let last: Vec<&str> = tail.iter().skip(skip).map(String::as_str).collect();
    if last.is_empty() {
        format!("verification failed ({ended}), with no output")
    } else {
        format!(
            "verification failed ({ended}); its last {} line(s):\n\n```text\n{}\n```",
            last.len(),
            last.join("\n")
        )
    }
}

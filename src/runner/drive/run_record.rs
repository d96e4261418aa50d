//! A worker's run record on disk: what it changed (`patch.diff`), how it ended
//! (`result.json`) and what it said on stderr (`stderr.txt`, when it said anything).

use super::RunnerSettings;
use crate::prompts::Phase;
use crate::runner::drive::orchestrator_git;
use crate::runner::drive::Worked;
use crate::runner::git::{self, Git};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Writes the run record of one worker: what it changed (`patch.diff`, against the
/// branch's last commit, new files included), how it ended (`result.json`) and what it
/// said on stderr (`stderr.txt`, only when it said something), under `logs/<gid>/run-<id>/<n>-<phase>/`, n counting
/// the run's workers from 1.
pub(super) async fn write_run_record(
    settings: &RunnerSettings,
    gid: &str,
    run_id: i64,
    phase: Phase,
    worktree: &Path,
    worked: &Worked,
) -> Result<PathBuf> {
    let run_dir = settings.logs_dir.join(gid).join(format!("run-{run_id}"));
    // Numbered by what is already there, so a run resumed by a later runner never
    // overwrites an earlier worker's record.
    let sequence = std::fs::read_dir(&run_dir)
        .map(|entries| {
            entries
                .filter(|e| e.as_ref().is_ok_and(|e| e.path().is_dir()))
                .count()
        })
        .unwrap_or(0)
        + 1;
    let dir = run_dir.join(format!("{sequence}-{}", phase.as_str()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // Without a worktree there is no branch of the run's own to diff against; in a
    // repository the worker tampered with, the orchestrator runs no git at all.
    let git = (settings.worktrees && !worked.tampered)
        .then(|| orchestrator_git(settings, worktree))
        .transpose()?;
    let patch = match git {
        // No hop to the blocking pool for a record with no patch to make.
        None => Vec::new(),
        Some(git) => patch_of(git).await?,
    };
    let write = |name: &str, bytes: &[u8]| {
        std::fs::write(dir.join(name), bytes)
            .with_context(|| format!("cannot write {}", dir.join(name).display()))
    };
    if settings.worktrees {
        write("patch.diff", &patch)?;
    }
    write(
        "result.json",
        serde_json::to_string_pretty(&worked.result)?.as_bytes(),
    )?;
    // Only a worker that said something on stderr leaves `stderr.txt`: a file made per
    // worker costs every run an inode, the dearest part of a short run's record.
    if !worked.stderr.is_empty() {
        let mut stderr = worked.stderr.join("\n");
        stderr.push('\n');
        write("stderr.txt", stderr.as_bytes())?;
    }
    Ok(dir)
}

/// The worktree's whole change (new files too) against the branch's last commit, staged
/// first so the commit that may follow stages the same.
async fn patch_of(git: Git) -> Result<Vec<u8>> {
    tokio::task::spawn_blocking(move || -> Result<Vec<u8>> {
        let git = |args: &[&str]| {
            git.output(args)
                .with_context(|| format!("cannot run git {}", args.join(" ")))
        };
        // Stage everything (new files too) so the patch is the whole change; the commit
        // that may follow stages the same.
        let added = git(&["add", "-A"])?;
        anyhow::ensure!(
            added.status.success(),
            "git add failed: {}",
            String::from_utf8_lossy(&added.stderr)
        );
        let diff = git(&[
            "diff",
            "--cached",
            "--binary",
            git::NO_DIFF_PROGRAMS[0],
            git::NO_DIFF_PROGRAMS[1],
            "HEAD",
        ])?;
        anyhow::ensure!(
            diff.status.success(),
            "git diff failed: {}",
            String::from_utf8_lossy(&diff.stderr)
        );
        Ok(diff.stdout)
    })
    .await?
}

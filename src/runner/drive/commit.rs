//! The orchestrator's git in a run's worktree: nothing is committed or pushed in a
//! repository whose git data changed since the worker started.

use super::RunnerSettings;
use crate::core::task::Task;
use crate::runner::drive::Asked;
use crate::runner::drive::Worked;
use crate::runner::git::{self, Baseline, Git};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

/// Throws away what is not committed in `worktree`: changes and untracked files (ignored
/// ones stay).
pub(super) async fn discard_uncommitted(settings: &RunnerSettings, worktree: &Path) -> Result<()> {
    let git = orchestrator_git(settings, worktree)?;
    let worktree = worktree.to_path_buf();
    tokio::task::spawn_blocking(move || -> Result<()> {
        for args in [&["reset", "--hard", "-q"][..], &["clean", "-fdq"][..]] {
            let out = git.output(args)?;
            anyhow::ensure!(
                out.status.success(),
                "git {} in {} failed: {}",
                args.join(" "),
                worktree.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    })
    .await?
}

/// The short id of the commit checked out in `worktree`.
pub(super) async fn head_commit(settings: &RunnerSettings, worktree: &Path) -> Option<String> {
    let git = orchestrator_git(settings, worktree).ok()?;
    tokio::task::spawn_blocking(move || {
        let out = git.output(&["rev-parse", "--short=12", "HEAD"]).ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    })
    .await
    .ok()
    .flatten()
}

/// Git as the orchestrator runs it for `worktree` (see [`crate::runner::git`]): in a run's
/// worktree, its git folders named from executor's own record (refused when its `.git`
/// pointer names anything else); the repository folder itself when runs share it.
pub(super) fn orchestrator_git(settings: &RunnerSettings, worktree: &Path) -> Result<Git> {
    if settings.worktrees {
        Ok(Git::worktree(&settings.repository, worktree)?)
    } else {
        Ok(Git::repository(worktree))
    }
}

/// The kind of the escalation a tampered repository opens.
pub const GIT_TAMPERED: &str = "git_tampered";

/// The escalation for a repository whose git data changed since `baseline`, with the
/// changes for the log; `None` when nothing changed. No baseline, no check: only a run
/// without worktrees has none, and it commits nothing.
pub(super) async fn tampered_since(baseline: Option<&Baseline>) -> Result<Option<(Asked, String)>> {
    let Some(baseline) = baseline.cloned() else {
        return Ok(None);
    };
    let changes = tokio::task::spawn_blocking(move || baseline.changes())
        .await?
        .context("cannot check the repository's git data")?;
    if changes.is_empty() {
        return Ok(None);
    }
    let described = git::describe(&changes);
    Ok(Some((
        Asked::Message(format!(
            "[ESCALATE:{GIT_TAMPERED}] the repository's git data changed while the worker ran, so executor committed and pushed nothing: {described}. Put the repository right, then answer to resume the run."
        )),
        described,
    )))
}

/// The escalation before a commit or a push: the repository must be as it was when the
/// worker started. Fails closed: without a baseline nothing is committed.
pub(super) async fn tampered(baseline: Option<&Baseline>) -> Result<Option<Asked>> {
    anyhow::ensure!(
        baseline.is_some(),
        "no snapshot of the repository from before the worker; executor commits and pushes nothing without one"
    );
    Ok(tampered_since(baseline).await?.map(|(asked, _)| asked))
}

/// Commits the worktree's changes on the run's branch as the orchestrator, unless the
/// repository's git data changed since `worked`'s worker started: then nothing is
/// committed and the escalation for the owner is returned.
pub(super) async fn commit(
    settings: &RunnerSettings,
    worktree: &Path,
    task: &Task,
    run_id: i64,
    worked: &Worked,
) -> Result<Option<Asked>> {
    commit_checked(settings, worktree, task, run_id, worked.baseline.as_ref()).await
}

/// [`commit`], against `baseline`.
pub(super) async fn commit_checked(
    settings: &RunnerSettings,
    worktree: &Path,
    task: &Task,
    run_id: i64,
    baseline: Option<&Baseline>,
) -> Result<Option<Asked>> {
    if let Some(asked) = tampered(baseline).await? {
        return Ok(Some(asked));
    }
    let git = orchestrator_git(settings, worktree)?;
    let message = git::commit_message(&task.title(), run_id, &task.task_gid);
    let name = format!("user.name={}", settings.commit_author.name);
    let email = format!("user.email={}", settings.commit_author.email);
    tokio::task::spawn_blocking(move || -> Result<()> {
        let git = |args: &[&str]| -> Result<std::process::Output> {
            let args: Vec<&str> = ["-c", name.as_str(), "-c", email.as_str()]
                .iter()
                .chain(args)
                .copied()
                .collect();
            git.output(&args)
                .with_context(|| format!("cannot run git {}", args.join(" ")))
        };
        let added = git(&["add", "-A"])?;
        anyhow::ensure!(
            added.status.success(),
            "git add failed: {}",
            String::from_utf8_lossy(&added.stderr)
        );
        let staged = git(&[
            "diff",
            "--cached",
            "--quiet",
            git::NO_DIFF_PROGRAMS[0],
            git::NO_DIFF_PROGRAMS[1],
        ])?;
        if staged.status.success() {
            tracing::info!("the worker changed nothing; nothing to commit");
            return Ok(());
        }
        // The message goes through a file: a title on the command line can pass the
        // system's limit on one argument ("argument list too long"). It lives outside the
        // worktree, so `git add -A` never stages it. Created new (never through a link
        // planted at its name) under a name hard to guess ahead.
        let unguessable = format!("{}{:?}", std::process::id(), std::time::SystemTime::now());
        let file = std::env::temp_dir().join(format!(
            "executor-commit-{run_id}-{}.txt",
            crate::core::gid::short_hash(&unguessable)
        ));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&file)
            .and_then(|mut opened| opened.write_all(message.as_bytes()))
            .with_context(|| format!("cannot write the commit message to {}", file.display()))?;
        let path = file.to_string_lossy().into_owned();
        let committed = git(&["commit", "-q", "--no-verify", "-F", &path]);
        let _ = std::fs::remove_file(&file);
        let committed = committed?;
        anyhow::ensure!(
            committed.status.success(),
            "git commit failed: {}",
            String::from_utf8_lossy(&committed.stderr)
        );
        Ok(())
    })
    .await??;
    Ok(None)
}

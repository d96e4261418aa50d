//! Git worktrees for runs: one branch and one working directory per run, created from the
//! configured base branch, found again after a crash, and removed when a run is done.
//!
//! Everything goes through the real `git` command line as the orchestrator runs it
//! ([`crate::runner::git`]): the repository's configuration applies, but none of its hooks,
//! filters or drivers run (a worker may have planted them). Nothing here ever deletes a directory that git does not
//! know as one of its worktrees: a stray directory in the way is moved aside, not removed.

use std::fs::File;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::core::gid;
use crate::runner::git::{Git, GitError};

#[derive(Debug, Error)]
pub enum WorktreeError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("cannot prepare {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The run's branch: `<prefix><gid>-<slug of the title>`, a valid git ref name.
///
/// A gid the branch cannot hold as it is (`gh:lumen#12`) is written with `-` for what it
/// drops, followed by a short hash of the whole gid: `T:1` and `T#1` would otherwise share
/// one branch and one worktree (and both commit there).
pub fn branch_name(prefix: &str, task_gid: &str, title: &str) -> String {
    // Gids may hold `:` or `#`; refs may not hold `:`, and `#` reads badly in a shell.
    let written: String = task_gid
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = written.trim_matches(['-', '.']);
    let gid = if trimmed == task_gid {
        trimmed.to_string()
    } else if trimmed.is_empty() {
        gid::short_hash(task_gid)
    } else {
        format!("{trimmed}-{}", gid::short_hash(task_gid))
    };
    let slug = gid::slug(title, 40);
    if slug.is_empty() {
        format!("{prefix}{gid}")
    } else {
        format!("{prefix}{gid}-{slug}")
    }
}

/// Where the worktree of `branch` lives under `worktrees_dir`.
pub fn path_for(worktrees_dir: &Path, branch: &str) -> PathBuf {
    worktrees_dir.join(branch.replace('/', "-"))
}

/// A worktree ready for a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
    /// It was already there (a resumed run or a crashed runner's leftover).
    pub reused: bool,
    /// A directory that was in the way and was moved here.
    pub moved_aside: Option<PathBuf>,
}

/// Makes sure `branch` has a worktree: reuses the one git already has for it, or creates
/// it at `path_for(worktrees_dir, branch)` from `base` (creating the branch if it does not
/// exist). Creation holds the repository's worktree lock (see [`lock_repository`]).
pub fn ensure(
    repo: &Path,
    worktrees_dir: &Path,
    branch: &str,
    base: &str,
) -> Result<Worktree, WorktreeError> {
    std::fs::create_dir_all(worktrees_dir).map_err(|source| WorktreeError::Io {
        path: worktrees_dir.to_path_buf(),
        source,
    })?;
    let path = path_for(worktrees_dir, branch);
    let _lock = lock_repository(repo, worktrees_dir)?;

    // Forget worktrees whose directories are gone (a crashed run's, deleted by hand).
    git(repo, &["worktree", "prune"])?;
    if let Some(existing) = registered(repo)?
        .into_iter()
        .find(|w| w.branch.as_deref() == Some(branch))
    {
        return Ok(Worktree {
            path: existing.path,
            branch: branch.to_string(),
            reused: true,
            moved_aside: None,
        });
    }

    let moved_aside = if path.exists() {
        let aside = aside_path(&path);
        std::fs::rename(&path, &aside).map_err(|source| WorktreeError::Io {
            path: path.clone(),
            source,
        })?;
        tracing::warn!(from = %path.display(), to = %aside.display(), "moved a stray directory out of a worktree's way");
        Some(aside)
    } else {
        None
    };

    let path_text = path.to_string_lossy().into_owned();
    if branch_exists(repo, branch)? {
        git(repo, &["worktree", "add", &path_text, branch])?;
    } else {
        git(repo, &["worktree", "add", "-b", branch, &path_text, base])?;
    }
    Ok(Worktree {
        path,
        branch: branch.to_string(),
        reused: false,
        moved_aside,
    })
}

/// Removes a run's worktree (the branch stays). A worktree that is already gone is fine.
pub fn remove(repo: &Path, path: &Path) -> Result<(), WorktreeError> {
    let _lock = lock_repository(repo, path.parent().unwrap_or(path))?;
    let path_text = path.to_string_lossy().into_owned();
    let known = registered(repo)?.iter().any(|w| w.path == path);
    if known {
        git(repo, &["worktree", "remove", "--force", &path_text])?;
    }
    git(repo, &["worktree", "prune"])?;
    Ok(())
}

/// Holds the lock on `repo`'s worktree list until dropped. Every runner and process that
/// adds, prunes or removes worktrees of one repository takes it first: `git worktree
/// prune` run while another `git worktree add` is half done takes the new worktree for a
/// stale one and deletes its metadata. The lock file is in the repository's git folder (in
/// `fallback` when `.git` is not a folder), so runners with different worktree folders
/// still share it.
pub fn lock_repository(repo: &Path, fallback: &Path) -> Result<File, WorktreeError> {
    let git_dir = repo.join(".git");
    let lock_path = if git_dir.is_dir() {
        git_dir.join("executor-worktrees.lock")
    } else {
        fallback.join(".executor-worktrees.lock")
    };
    let lock = File::create(&lock_path).map_err(|source| WorktreeError::Io {
        path: lock_path.clone(),
        source,
    })?;
    lock.lock().map_err(|source| WorktreeError::Io {
        path: lock_path.clone(),
        source,
    })?;
    Ok(lock)
}

/// One entry of `git worktree list --porcelain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub path: PathBuf,
    /// `None` for a detached HEAD.
    pub branch: Option<String>,
}

/// The worktrees git knows for `repo`.
pub fn registered(repo: &Path) -> Result<Vec<Registered>, WorktreeError> {
    let listing = git(repo, &["worktree", "list", "--porcelain"])?;
    Ok(parse_porcelain(&listing))
}

fn parse_porcelain(listing: &str) -> Vec<Registered> {
    let mut found = Vec::new();
    for block in listing.split("\n\n") {
        let mut path = None;
        let mut branch = None;
        for line in block.lines() {
            if let Some(p) = line.strip_prefix("worktree ") {
                path = Some(PathBuf::from(p));
            } else if let Some(b) = line.strip_prefix("branch ") {
                branch = Some(b.strip_prefix("refs/heads/").unwrap_or(b).to_string());
            }
        }
        if let Some(path) = path {
            found.push(Registered { path, branch });
        }
    }
    found
}

fn branch_exists(repo: &Path, branch: &str) -> Result<bool, WorktreeError> {
    let reference = format!("refs/heads/{branch}");
    let output = run(repo, &["show-ref", "--verify", "--quiet", &reference])?;
    Ok(output.status.success())
}

/// The first free `PATH.stale-N`: numbered, not stamped, so the name is the same
/// whatever the clock says (the folder's own times tell when it was moved).
fn aside_path(path: &Path) -> PathBuf {
    let mut n = 1;
    loop {
        let candidate = PathBuf::from(format!("{}.stale-{n}", path.display()));
        if !candidate.exists() {
            return candidate;
        }
        n += 1;
    }
}

/// Runs `git args…` in `repo` as the orchestrator, whatever its exit status.
fn run(repo: &Path, args: &[&str]) -> Result<std::process::Output, WorktreeError> {
    Ok(Git::repository(repo).output(args)?)
}

/// Runs `git args…` in `repo` as the orchestrator and returns its stdout, or its stderr
/// as the error.
fn git(repo: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    Ok(Git::repository(repo).run(args)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_are_valid_refs_that_read_well() {
        assert_eq!(
            branch_name("executor/", "T-1", "Fix tab preview"),
            "executor/T-1-fix-tab-preview"
        );
        assert_eq!(
            branch_name("executor/", "gh:lumen#12", "Crash on start!"),
            format!(
                "executor/gh-lumen-12-{}-crash-on-start",
                gid::short_hash("gh:lumen#12")
            )
        );
        assert_eq!(
            branch_name("x/", "1209876543210987", "???"),
            "x/1209876543210987"
        );
    }

    #[test]
    fn gids_that_differ_only_in_dropped_characters_get_their_own_branch() {
        let names: Vec<String> = ["T:1", "T#1", "T-1", "-T-1", "T-1.", ":", "#"]
            .iter()
            .map(|gid| branch_name("executor/", gid, "Same title"))
            .collect();
        let distinct: std::collections::HashSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
        let paths: std::collections::HashSet<PathBuf> =
            names.iter().map(|b| path_for(Path::new("/w"), b)).collect();
        assert_eq!(paths.len(), names.len(), "{names:?}");
        assert_eq!(
            names[2], "executor/T-1-same-title",
            "a plain gid keeps its name"
        );
    }

    #[test]
    fn porcelain_listing_is_read_with_detached_heads() {
        let listing = "worktree /repo\nHEAD abc\nbranch refs/heads/main\n\nworktree /wt/a\nHEAD def\ndetached\n\nworktree /wt/b\nHEAD 123\nbranch refs/heads/executor/T-1-x\n";
        assert_eq!(
            parse_porcelain(listing),
            vec![
                Registered {
                    path: "/repo".into(),
                    branch: Some("main".into())
                },
                Registered {
                    path: "/wt/a".into(),
                    branch: None
                },
                Registered {
                    path: "/wt/b".into(),
                    branch: Some("executor/T-1-x".into())
                },
            ]
        );
    }
}

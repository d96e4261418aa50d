//! Run worktrees on a real git repository: created from the base branch, found again after
//! a crash, never destroying a directory git does not own.

use executor::runner::worktree::{self, branch_name};

use crate::support::git;

/// A repository with one commit on `main`.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(dir.path(), &["config", "user.email", "owner@example.com"]);
    git(dir.path(), &["config", "user.name", "Owner"]);
    std::fs::write(dir.path().join("README.md"), "hello\n").expect("write");
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "-q", "-m", "first"]);
    dir
}

#[test]
fn a_run_gets_its_own_branch_and_worktree_from_the_base() {
    let repo = repo();
    let worktrees = tempfile::tempdir().expect("temp dir");
    let branch = branch_name("executor/", "T-1", "Fix tab preview");
    let wt = worktree::ensure(repo.path(), worktrees.path(), &branch, "main").expect("ensure");
    assert!(!wt.reused);
    assert!(wt.path.join("README.md").exists());
    assert_eq!(
        git(&wt.path, &["rev-parse", "--abbrev-ref", "HEAD"]),
        branch
    );
    assert_eq!(
        git(&wt.path, &["rev-parse", "HEAD"]),
        git(repo.path(), &["rev-parse", "main"])
    );

    // Asking again (a resumed run, a restarted runner) finds the same worktree.
    let again = worktree::ensure(repo.path(), worktrees.path(), &branch, "main").expect("again");
    assert!(again.reused);
    assert_eq!(again.path, wt.path);
}

#[test]
fn a_worktree_deleted_under_a_crashed_run_is_made_again_on_its_branch() {
    let repo = repo();
    let worktrees = tempfile::tempdir().expect("temp dir");
    let branch = branch_name("executor/", "T-2", "Speed up");
    let wt = worktree::ensure(repo.path(), worktrees.path(), &branch, "main").expect("ensure");
    std::fs::write(wt.path.join("work.txt"), "progress\n").expect("write");
    git(&wt.path, &["add", "."]);
    git(&wt.path, &["commit", "-q", "-m", "progress"]);
    let progress = git(&wt.path, &["rev-parse", "HEAD"]);
    std::fs::remove_dir_all(&wt.path).expect("the directory vanishes");

    let again = worktree::ensure(repo.path(), worktrees.path(), &branch, "main").expect("again");
    assert!(!again.reused);
    assert_eq!(
        git(&again.path, &["rev-parse", "HEAD"]),
        progress,
        "the branch's work is kept"
    );
}

#[test]
fn a_stray_directory_in_the_way_is_moved_aside_not_deleted() {
    let repo = repo();
    let worktrees = tempfile::tempdir().expect("temp dir");
    let branch = branch_name("executor/", "T-3", "Stray");
    let path = worktree::path_for(worktrees.path(), &branch);
    std::fs::create_dir_all(&path).expect("mkdir");
    std::fs::write(path.join("precious.txt"), "keep me\n").expect("write");

    let wt = worktree::ensure(repo.path(), worktrees.path(), &branch, "main").expect("ensure");
    let aside = wt.moved_aside.expect("moved aside");
    assert_eq!(
        std::fs::read_to_string(aside.join("precious.txt")).expect("kept"),
        "keep me\n"
    );
    assert!(wt.path.join("README.md").exists());
}

#[test]
fn a_branch_already_checked_out_elsewhere_is_reused_where_it_is() {
    let repo = repo();
    let worktrees = tempfile::tempdir().expect("temp dir");
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let branch = branch_name("executor/", "T-4", "Elsewhere");
    let other = elsewhere.path().join("by-hand");
    git(
        repo.path(),
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            &branch,
            other.to_str().expect("utf-8"),
            "main",
        ],
    );
    let wt = worktree::ensure(repo.path(), worktrees.path(), &branch, "main").expect("ensure");
    assert!(wt.reused);
    assert_eq!(
        std::fs::canonicalize(&wt.path).expect("path"),
        std::fs::canonicalize(&other).expect("path")
    );
}

#[test]
fn removing_a_worktree_keeps_its_branch() {
    let repo = repo();
    let worktrees = tempfile::tempdir().expect("temp dir");
    let branch = branch_name("executor/", "T-5", "Done");
    let wt = worktree::ensure(repo.path(), worktrees.path(), &branch, "main").expect("ensure");
    worktree::remove(repo.path(), &wt.path).expect("remove");
    assert!(!wt.path.exists());
    git(
        repo.path(),
        &["show-ref", "--verify", &format!("refs/heads/{branch}")],
    );
    worktree::remove(repo.path(), &wt.path).expect("removing twice is fine");
}

#[test]
fn an_unknown_base_branch_is_an_error_naming_it() {
    let repo = repo();
    let worktrees = tempfile::tempdir().expect("temp dir");
    let err = worktree::ensure(repo.path(), worktrees.path(), "executor/T-6", "develop")
        .expect_err("no such base");
    assert!(err.to_string().contains("develop"), "{err}");
}

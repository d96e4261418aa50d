//! The orchestrator's git against a worker that runs unconfined as the owner's user: each
//! attack is made by a real command worker, and its effect is checked from outside once the
//! run has ended. `main` never moves by the orchestrator's hand, nothing a worker planted
//! runs inside the orchestrator's git, the run waits for the owner with the change named,
//! and the next run of the same repository still works.
//!
//! The tests look at the repository only with git commands that run no hook or filter
//! (`rev-parse`, `log`, `show` of commits), so a marker can only come from executor.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::runner::workspace;
use crate::support::{git, Workspace};

/// A worker that attacks when its task's title says `ATTACK` (the prompt carries the
/// title), and otherwise just changes a file; either way it reports done.
fn worker(attack: &str) -> String {
    format!(
        "prompt=$(cat); case \"$prompt\" in *ATTACK*) {attack} ;; esac; \
         echo \"work of $$\" > \"work-$$.txt\"; echo '[DONE:implemented] changed a file'"
    )
}

struct Attacked {
    ws: Workspace,
    repo: PathBuf,
    markers: tempfile::TempDir,
    main_before: String,
}

impl Attacked {
    fn marker(&self, name: &str) -> PathBuf {
        self.markers.path().join(name)
    }

    /// The markers anything of executor's wrote.
    fn markers_written(&self) -> Vec<String> {
        std::fs::read_dir(self.markers.path())
            .expect("markers dir")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect()
    }

    fn main(&self) -> String {
        git(&self.repo, &["rev-parse", "refs/heads/main"])
    }
}

/// Runs one attacking task (`A-1`) to its end. `attack` is shell run in the worktree, with
/// `$REPO` the main repository and `$MARK` the folder markers go to.
fn attacked(attack: &str) -> Attacked {
    let markers = tempfile::tempdir().expect("temp dir");
    let ws = workspace(&["/bin/sh", "-c", &worker(attack)], &[], "");
    let repo = ws.path().join("repo").canonicalize().expect("repo path");
    let env = format!(
        "export REPO='{}' MARK='{}';",
        repo.display(),
        markers.path().display()
    );
    // The attack needs its paths; the config names the worker's argv, so write it again.
    ws.write_config(
        &std::fs::read_to_string(ws.path().join("executor.toml"))
            .expect("config")
            .replace("prompt=$(cat);", &format!("{env} prompt=$(cat);")),
    );
    let main_before = git(&repo, &["rev-parse", "refs/heads/main"]);
    ws.ok(&["add", "--title", "ATTACK the repository", "--gid", "A-1"]);
    ws.ok(&["go", "A-1"]);
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Attacked {
        ws,
        repo,
        markers,
        main_before,
    }
}

/// The run escalated (it did not complete) with one `git_tampered` question naming
/// every one of `named`.
fn assert_escalated(a: &Attacked, named: &[&str]) {
    let shown = a.ws.json(&["show", "A-1", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "in_progress", "{shown}");
    assert_eq!(shown["task"]["status"], "in_progress", "{shown}");
    let listed = a.ws.json(&["escalations", "--json"]);
    let all = listed.as_array().expect("an array");
    assert_eq!(all.len(), 1, "{listed}");
    assert_eq!(all[0]["action"], "git_tampered", "{listed}");
    let detail = all[0]["detail"].as_str().expect("a detail");
    for name in named {
        assert!(detail.contains(name), "{name:?} not in {detail}");
    }
    assert!(detail.contains("committed and pushed nothing"), "{detail}");
}

/// Nothing was committed by the orchestrator anywhere: no commit of executor's on any
/// branch.
fn assert_nothing_committed(a: &Attacked) {
    let authors = git(&a.repo, &["log", "--all", "--format=%an"]);
    assert!(!authors.contains("executor"), "{authors}");
}

/// A second, ordinary task in the same repository runs to completion, its commit made by
/// executor on its own branch, and `main` is where it was.
fn assert_next_run_works(a: &Attacked, main: &str) {
    a.ws.ok(&["add", "--title", "Ordinary work", "--gid", "N-1"]);
    a.ws.ok(&["go", "N-1"]);
    let out = a.ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let shown = a.ws.json(&["show", "N-1", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "complete", "{stderr}\n{shown}");
    let branch = shown["runs"][0]["branch_name"]
        .as_str()
        .expect("a branch")
        .to_string();
    assert_eq!(
        git(&a.repo, &["log", "-1", "--format=%an", &branch]),
        "executor"
    );
    assert_eq!(git(&a.repo, &["rev-parse", &format!("{branch}~1")]), main);
    assert_eq!(a.main(), main, "main never moves");
}

fn hook(dir: &Path, name: &str, marker: &Path) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\ntouch '{}'\n", marker.display()))
        .expect("write hook");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn a_rewritten_git_pointer_is_never_followed_and_the_run_escalates() {
    // The worker points its worktree at the main repository: the orchestrator's commit
    // would land on `main` if it followed the pointer.
    let a = attacked("printf 'gitdir: %s\\n' \"$REPO/.git\" > .git");
    assert_escalated(&a, &["the worktree's `.git` pointer was rewritten"]);
    assert_eq!(a.main(), a.main_before, "main never moved");
    assert_nothing_committed(&a);
    // Nothing was staged in the main repository's index either.
    assert_eq!(
        git(&a.repo, &["diff", "--cached", "--name-only"]),
        "",
        "the main index is untouched"
    );
    assert!(a.markers_written().is_empty());
    assert_next_run_works(&a, &a.main_before);
}

#[test]
fn hooks_planted_in_the_shared_git_folder_never_run_in_the_orchestrators_git() {
    let a = attacked(
        "for h in post-checkout pre-commit post-commit; do \
           printf '#!/bin/sh\\ntouch \"%s/%s\"\\n' \"$MARK\" \"$h\" > \"$REPO/.git/hooks/$h\"; \
           chmod +x \"$REPO/.git/hooks/$h\"; done",
    );
    assert_escalated(
        &a,
        &[
            "`.git/hooks/post-checkout` was added",
            "`.git/hooks/pre-commit` was added",
            "`.git/hooks/post-commit` was added",
        ],
    );
    assert_eq!(a.main(), a.main_before);
    assert_nothing_committed(&a);
    // The next run's `git worktree add` (post-checkout) and commit (post-commit) run none
    // of them.
    assert_next_run_works(&a, &a.main_before);
    assert!(
        a.markers_written().is_empty(),
        "a planted hook ran: {:?}",
        a.markers_written()
    );
    assert!(a.repo.join(".git/hooks/post-checkout").exists());
}

#[test]
fn a_planted_clean_filter_never_runs_in_the_orchestrators_git() {
    // A filter defined in the repository's config, applied by the worktree's
    // `.gitattributes` and, for every later checkout, by `info/attributes`.
    let a = attacked(
        "git config filter.evil.clean \"touch '$MARK/clean'; cat\"; \
         git config filter.evil.smudge \"touch '$MARK/smudge'; cat\"; \
         git config filter.evil.required true; \
         printf '* filter=evil\\n' > .gitattributes; \
         mkdir -p \"$REPO/.git/info\"; printf '* filter=evil\\n' > \"$REPO/.git/info/attributes\"",
    );
    assert_escalated(
        &a,
        &[
            "`.git/config` was changed",
            "`.git/info/attributes` was added",
            "`.gitattributes` was added",
        ],
    );
    assert_eq!(a.main(), a.main_before);
    assert_nothing_committed(&a);
    assert!(a.markers_written().is_empty(), "{:?}", a.markers_written());
    // The filter is still configured and applies to every file: the next run's checkout
    // (smudge) and `git add -A` (clean) still run nothing of it.
    assert_next_run_works(&a, &a.main_before);
    assert!(
        a.markers_written().is_empty(),
        "a planted filter ran: {:?}",
        a.markers_written()
    );
    assert!(!a.marker("clean").exists() && !a.marker("smudge").exists());
}

#[test]
fn a_base_branch_the_worker_moves_is_reported_and_nothing_is_committed() {
    let a = attacked(
        "evil=$(git -c user.name=w -c user.email=w@example.com commit-tree 'HEAD^{tree}' -p HEAD -m evil); \
         git update-ref refs/heads/main \"$evil\"",
    );
    assert_escalated(&a, &["`refs/heads/main` moved"]);
    let moved = a.main();
    assert_ne!(moved, a.main_before, "the worker itself moved main");
    assert_eq!(
        git(&a.repo, &["log", "-1", "--format=%s", "refs/heads/main"]),
        "evil",
        "main is where the worker put it, nothing of executor's on top"
    );
    assert_nothing_committed(&a);
    // Once the owner put `main` back, the next run starts from it.
    git(&a.repo, &["update-ref", "refs/heads/main", &a.main_before]);
    assert_next_run_works(&a, &a.main_before);
}

#[test]
fn a_base_branch_moved_and_then_packed_is_reported_too() {
    // After `pack-refs` the moved `main` is only in `packed-refs`.
    let a = attacked(
        "evil=$(git -c user.name=w -c user.email=w@example.com commit-tree 'HEAD^{tree}' -p HEAD -m evil); \
         git update-ref refs/heads/main \"$evil\"; git pack-refs --all",
    );
    assert!(!a.repo.join(".git/refs/heads/main").exists());
    assert_escalated(&a, &["`refs/heads/main` moved"]);
    assert_nothing_committed(&a);
}

#[test]
fn a_worker_that_leaves_the_repository_alone_is_committed_as_before() {
    let a = attacked(":");
    let shown = a.ws.json(&["show", "A-1", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "complete", "{shown}");
    let listed = a.ws.json(&["escalations", "--json"]);
    assert_eq!(listed, Value::Array(Vec::new()));
    assert_eq!(a.main(), a.main_before);
}

#[test]
fn the_orchestrators_worktree_add_runs_no_planted_hook() {
    let repo = tempfile::tempdir().expect("temp dir");
    crate::support::init_repo(repo.path());
    let markers = tempfile::tempdir().expect("temp dir");
    let marker = markers.path().join("post-checkout");
    hook(&repo.path().join(".git/hooks"), "post-checkout", &marker);
    let worktrees = tempfile::tempdir().expect("temp dir");
    let wt =
        executor::runner::worktree::ensure(repo.path(), worktrees.path(), "executor/x", "main")
            .expect("ensure");
    assert!(wt.path.join("README.md").exists());
    assert!(!marker.exists(), "the planted post-checkout ran");
}

#[test]
fn the_orchestrators_git_inherits_no_git_setting_from_executors_environment() {
    // Settings a worker could leave in the environment of a process that starts executor:
    // an author, and config given through `GIT_CONFIG_COUNT`.
    let ws = workspace(&["/bin/sh", "-c", &worker(":")], &[], "");
    let repo = ws.path().join("repo");
    ws.ok(&["add", "--title", "Ordinary work", "--gid", "N-1"]);
    ws.ok(&["go", "N-1"]);
    let out = ws
        .command(&["run", "--once"])
        .env("GIT_AUTHOR_NAME", "leaked")
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "i18n.commitEncoding")
        .env("GIT_CONFIG_VALUE_0", "ISO-8859-1")
        .env("GIT_CONFIG_PARAMETERS", "'user.email'='leaked@example.com'")
        .output()
        .expect("run executor");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = ws.json(&["show", "N-1", "--json"]);
    assert_eq!(shown["runs"][0]["state"], "complete", "{shown}");
    let branch = shown["runs"][0]["branch_name"].as_str().expect("a branch");
    let commit = git(&repo, &["cat-file", "-p", branch]);
    assert!(
        commit.contains("author executor <executor@localhost>"),
        "{commit}"
    );
    assert!(!commit.contains("encoding"), "{commit}");
}

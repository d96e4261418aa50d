//! Git as the orchestrator runs it: the one place executor starts `git` for its own work
//! (worktrees, the run record's patch, commits, merges, pushes), and the integrity check
//! that keeps a worker from turning that git against the owner.
//!
//! A worker runs under the owner's user and can write the repository's git data. Executor's
//! own git therefore never trusts what that data says it should run or where it should go:
//!
//! - it runs no hooks (`core.hooksPath=/dev/null`: no file can ever be created under it,
//!   and git says nothing about hooks it cannot find), no filesystem monitor, no clean,
//!   smudge or process filter and no merge driver the repository configures (each one
//!   found in the configuration is overridden on the command line, which always wins), no
//!   external diff or textconv (callers that diff pass [`NO_DIFF_PROGRAMS`]), no signing
//!   program, no `ext::` transport, no submodule recursion;
//! - it reads neither the global nor the system configuration and inherits nothing of
//!   executor's environment but `PATH`, `LANG` and `LC_ALL`; its `HOME` is an empty
//!   folder of executor's own, so nothing under the owner's home (a global attributes
//!   or ignore file) applies either;
//! - in a run's worktree it names `GIT_DIR`, `GIT_COMMON_DIR` and `GIT_WORK_TREE` itself,
//!   from the admin folder the repository's `worktrees/*/gitdir` records for that path:
//!   it never reads the worktree's `.git` file to find its repository, and refuses to run
//!   when that file names anything else ([`GitError::PointerRewritten`]).
//!
//! The one exception is `git push` ([`Git::push`]): it needs the owner's credentials, and an
//! https credential helper lives in the owner's global (or, on macOS, the system)
//! configuration. A push alone reads those, with the owner's `HOME`, `XDG_CONFIG_HOME` and
//! `SSH_AUTH_SOCK`; everything else above still holds for it (hooks off included). The
//! global configuration files are part of the [`Snapshot`], so a worker that edits them
//! before a push is caught like one that edits the repository's.
//!
//! What the overrides cannot cover (a changed remote URL, a rewritten `HEAD`, a moved base
//! branch, a new `core.sshCommand`) the integrity check does: [`Baseline::take`] before a
//! worker starts, [`Baseline::changes`] before anything is committed or pushed. The
//! snapshot is plain data and [`changes`] a pure function; only taking one reads files.
//!
//! This module must never run git with the worker's view of the repository: no inherited
//! `GIT_*` variable, no `GIT_CONFIG_COUNT`/`GIT_CONFIG_PARAMETERS`, no discovery through a
//! worktree's `.git` file. It never writes to the repository's git data itself.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum GitError {
    #[error("cannot run git {args}")]
    Spawn {
        args: String,
        #[source]
        source: std::io::Error,
    },
    #[error("git {args} failed: {stderr}")]
    Failed { args: String, stderr: String },
    #[error("cannot read {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{repo} is not a git repository executor can find the git data of")]
    NotARepository { repo: PathBuf },
    #[error("{worktree} is not a worktree of the repository in {common} (no worktrees/*/gitdir names it)")]
    NotAWorktree { worktree: PathBuf, common: PathBuf },
    #[error("the `.git` pointer of {worktree} no longer names its admin folder {admin} ({found})")]
    PointerRewritten {
        worktree: PathBuf,
        admin: PathBuf,
        found: String,
    },
    #[error("executor's own git home {path} is not an empty folder of this user's ({why})")]
    Home { path: PathBuf, why: String },
}

impl GitError {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| GitError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Flags every diff executor makes passes: a repository's `diff.external`, external diff
/// drivers and textconv programs run nothing.
pub const NO_DIFF_PROGRAMS: [&str; 2] = ["--no-ext-diff", "--no-textconv"];

/// Settings on every command line, where they outrank anything the repository configures.
const HARDENED: [&str; 7] = [
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "push.gpgSign=false",
    "submodule.recurse=false",
    "protocol.ext.allow=never",
];

/// A run's worktree as executor's own record places it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunTree {
    /// The repository's common git folder (`<repo>/.git`).
    pub common: PathBuf,
    /// The worktree's admin folder, `<common>/worktrees/<id>`.
    pub admin: PathBuf,
    /// The worktree itself.
    pub work_tree: PathBuf,
}

impl RunTree {
    /// Finds `worktree`'s admin folder in `repo`'s common git folder, from the `gitdir`
    /// files git keeps there, never from the worktree's own `.git` file. Does not check
    /// that file (see [`RunTree::check_pointer`]).
    pub fn locate(repo: &Path, worktree: &Path) -> Result<Self, GitError> {
        let common = common_dir(repo)?;
        let wanted = worktree.canonicalize().map_err(GitError::io(worktree))?;
        let admins = common.join("worktrees");
        let entries = std::fs::read_dir(&admins).map_err(|_| GitError::NotAWorktree {
            worktree: worktree.to_path_buf(),
            common: common.clone(),
        })?;
        for entry in entries.flatten() {
            let admin = entry.path();
            let Ok(gitdir) = std::fs::read_to_string(admin.join("gitdir")) else {
                continue;
            };
            // `gitdir` names `<worktree>/.git`, absolute or relative to the admin folder.
            let named = admin.join(gitdir.trim());
            let Some(parent) = named.parent() else {
                continue;
            };
            if parent.canonicalize().ok().as_deref() == Some(wanted.as_path()) {
                return Ok(Self {
                    common,
                    admin,
                    work_tree: wanted,
                });
            }
        }
        Err(GitError::NotAWorktree {
            worktree: worktree.to_path_buf(),
            common,
        })
    }

    /// `locate`, then refuses a worktree whose `.git` file names anything but its admin
    /// folder: a worker that rewrote it meant some git to follow it.
    pub fn open(repo: &Path, worktree: &Path) -> Result<Self, GitError> {
        let tree = Self::locate(repo, worktree)?;
        tree.check_pointer()?;
        Ok(tree)
    }

    /// Whether the worktree's `.git` is a plain file naming this admin folder.
    pub fn check_pointer(&self) -> Result<(), GitError> {
        let pointer = self.work_tree.join(".git");
        let rewritten = |found: String| GitError::PointerRewritten {
            worktree: self.work_tree.clone(),
            admin: self.admin.clone(),
            found,
        };
        let meta = std::fs::symlink_metadata(&pointer)
            .map_err(|error| rewritten(format!("it cannot be read: {error}")))?;
        if !meta.is_file() {
            return Err(rewritten("it is not a plain file".to_string()));
        }
        let text = std::fs::read_to_string(&pointer)
            .map_err(|error| rewritten(format!("it cannot be read: {error}")))?;
        let Some(named) = text.trim_end().strip_prefix("gitdir: ") else {
            return Err(rewritten(format!("it says {:?}", text.trim())));
        };
        let named_path = self.work_tree.join(named);
        let same = match (named_path.canonicalize(), self.admin.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if same {
            Ok(())
        } else {
            Err(rewritten(format!("it names {named}")))
        }
    }
}

/// The common git folder of the repository checked out at `repo`.
fn common_dir(repo: &Path) -> Result<PathBuf, GitError> {
    let dot_git = repo.join(".git");
    if dot_git.is_dir() {
        return dot_git.canonicalize().map_err(GitError::io(&dot_git));
    }
    // The owner's repository folder is itself a linked worktree or a bare repository:
    // ask git, in that folder (the owner's own checkout, not a run's).
    let text = Git::repository(repo)
        .run(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .map_err(|_| GitError::NotARepository {
            repo: repo.to_path_buf(),
        })?;
    PathBuf::from(text.trim())
        .canonicalize()
        .map_err(|_| GitError::NotARepository {
            repo: repo.to_path_buf(),
        })
}

/// Where a command runs.
#[derive(Debug, Clone)]
enum Place {
    /// The owner's repository folder (worktree bookkeeping, refs).
    Repository(PathBuf),
    /// A run's worktree, located by executor.
    Worktree(RunTree),
}

/// A git command line as the orchestrator runs it (see the module comment).
#[derive(Debug, Clone)]
pub struct Git {
    place: Place,
}

impl Git {
    /// Git in the owner's repository folder `repo`.
    pub fn repository(repo: &Path) -> Self {
        Self {
            place: Place::Repository(repo.to_path_buf()),
        }
    }

    /// Git in the run worktree `worktree` of `repo`, its git folders named explicitly;
    /// refused when the worktree's `.git` pointer was rewritten.
    pub fn worktree(repo: &Path, worktree: &Path) -> Result<Self, GitError> {
        Ok(Self {
            place: Place::Worktree(RunTree::open(repo, worktree)?),
        })
    }

    /// Runs `git args…`, whatever its exit status.
    pub fn output(&self, args: &[&str]) -> Result<Output, GitError> {
        let mut command = self.command(false)?;
        let neutral = self.neutralizers()?;
        command.args(neutral.iter().flat_map(|n| ["-c", n.as_str()]));
        command.args(args);
        command.output().map_err(|source| GitError::Spawn {
            args: args.join(" "),
            source,
        })
    }

    /// Runs `git args…` and returns its stdout, or its stderr as the error.
    pub fn run(&self, args: &[&str]) -> Result<String, GitError> {
        let output = self.output(args)?;
        checked(args, output)
    }

    /// How many commits `HEAD` has that `base` has not: 0 when the run's branch carries no
    /// change of its own.
    pub fn commits_ahead(&self, base: &str) -> Result<u64, GitError> {
        let range = format!("{base}..HEAD");
        let args = ["rev-list", "--count", range.as_str(), "--"];
        let counted = self.run(&args)?;
        counted.trim().parse().map_err(|_| GitError::Failed {
            args: args.join(" "),
            stderr: format!("not a count: {counted:?}"),
        })
    }

    /// `git push --quiet <remote> <refspec>`: the one command that reads the owner's
    /// global and system configuration and gets the owner's `HOME` and `SSH_AUTH_SOCK`,
    /// for the credentials (see the module comment). Hooks, filters and the rest stay off.
    pub fn push(&self, remote: &str, refspec: &str) -> Result<(), GitError> {
        let args = ["push", "--quiet", remote, refspec];
        let mut command = self.command(true)?;
        let neutral = self.neutralizers()?;
        command.args(neutral.iter().flat_map(|n| ["-c", n.as_str()]));
        command.args(args);
        let output = command.output().map_err(|source| GitError::Spawn {
            args: args.join(" "),
            source,
        })?;
        checked(&args, output).map(|_| ())
    }

    /// The hardened command line, before its arguments.
    fn command(&self, pushing: bool) -> Result<Command, GitError> {
        let mut command = Command::new("git");
        command.env_clear();
        for key in ["PATH", "LANG", "LC_ALL"] {
            if let Some(value) = std::env::var_os(key) {
                command.env(key, value);
            }
        }
        command
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_TERMINAL_PROMPT", "0");
        if pushing {
            for key in ["HOME", "XDG_CONFIG_HOME", "SSH_AUTH_SOCK"] {
                if let Some(value) = std::env::var_os(key) {
                    command.env(key, value);
                }
            }
        } else {
            command
                .env("HOME", own_home()?)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1");
        }
        match &self.place {
            Place::Repository(repo) => {
                command.arg("-C").arg(repo);
            }
            Place::Worktree(tree) => {
                command
                    .arg("-C")
                    .arg(&tree.work_tree)
                    .env("GIT_DIR", &tree.admin)
                    .env("GIT_COMMON_DIR", &tree.common)
                    .env("GIT_WORK_TREE", &tree.work_tree);
            }
        }
        command.args(HARDENED.iter().flat_map(|setting| ["-c", setting]));
        Ok(command)
    }

    /// `-c` settings that switch off every filter and merge driver the repository's
    /// configuration defines: drivers have names of the repository's choosing, so they are
    /// read from the configuration itself (which runs nothing) before each command.
    fn neutralizers(&self) -> Result<Vec<String>, GitError> {
        let args = ["config", "--name-only", "--list"];
        let output =
            self.command(false)?
                .args(args)
                .output()
                .map_err(|source| GitError::Spawn {
                    args: args.join(" "),
                    source,
                })?;
        // An empty configuration lists nothing and exits 0; anything else is an error.
        let listing = checked(&args, output)?;
        Ok(neutralizers(&listing))
    }
}

fn checked(args: &[&str], output: Output) -> Result<String, GitError> {
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(GitError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

/// The overrides for the drivers a `git config --name-only --list` listing defines. An
/// empty `clean`, `smudge` and `process` is a filter that does nothing (and not required,
/// so a "failed" filter does not stop the command); a merge driver becomes `false`, a
/// conflict the orchestrator reports rather than a program it runs.
fn neutralizers(listing: &str) -> Vec<String> {
    let mut filters = std::collections::BTreeSet::new();
    let mut merges = std::collections::BTreeSet::new();
    for name in listing.lines() {
        // Sections and keys come lowercased; the driver's name (the subsection) as written.
        if let Some(rest) = name.strip_prefix("filter.") {
            if let Some((driver, _key)) = rest.rsplit_once('.') {
                filters.insert(driver.to_string());
            }
        } else if let Some(rest) = name.strip_prefix("merge.") {
            if let Some((driver, _key)) = rest.rsplit_once('.') {
                merges.insert(driver.to_string());
            }
        }
    }
    let mut settings = Vec::new();
    for driver in filters {
        for key in ["clean", "smudge", "process"] {
            settings.push(format!("filter.{driver}.{key}="));
        }
        settings.push(format!("filter.{driver}.required=false"));
    }
    for driver in merges {
        settings.push(format!("merge.{driver}.driver=false"));
    }
    settings
}

/// The `HOME` of executor's own git: an empty folder only this user can write, made on
/// demand beside the system's temporary files and refused if anything is in it.
fn own_home() -> Result<PathBuf, GitError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let uid = nix::unistd::getuid().as_raw();
    let path = std::env::temp_dir().join(format!("executor-git-home-{uid}"));
    let refused = |why: String| GitError::Home {
        path: path.clone(),
        why,
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&path) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(refused(format!("cannot create it: {error}"))),
    }
    let meta =
        std::fs::symlink_metadata(&path).map_err(|e| refused(format!("cannot read it: {e}")))?;
    if !meta.is_dir() {
        return Err(refused("it is not a folder".to_string()));
    }
    if meta.uid() != uid {
        return Err(refused(format!("it belongs to user {}", meta.uid())));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(refused("others may write in it".to_string()));
    }
    let mut entries =
        std::fs::read_dir(&path).map_err(|e| refused(format!("cannot list it: {e}")))?;
    if let Some(Ok(entry)) = entries.next() {
        return Err(refused(format!(
            "it holds {}",
            entry.file_name().to_string_lossy()
        )));
    }
    Ok(path)
}

/// One thing the integrity check watches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Watched {
    /// A file of the repository's git data or git setup, by the name the owner knows it
    /// by (`.git/config`, `.git/hooks/post-checkout`, `.gitattributes`, `~/.gitconfig`).
    File(String),
    /// The worktree's `.git` file.
    Pointer,
    /// A branch no worker may move, by its full name (`refs/heads/main`).
    Ref(String),
}

/// How a watched thing differs between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Added(Watched),
    Removed(Watched),
    Changed(Watched),
    /// The worktree's `.git` pointer does not name the admin folder executor found for
    /// it (whenever that happened).
    ForeignPointer(String),
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Added(Watched::File(name)) => write!(f, "`{name}` was added"),
            Change::Removed(Watched::File(name)) => write!(f, "`{name}` was removed"),
            Change::Changed(Watched::File(name)) => write!(f, "`{name}` was changed"),
            Change::Added(Watched::Pointer) => write!(f, "the worktree's `.git` pointer appeared"),
            Change::Removed(Watched::Pointer) => {
                write!(f, "the worktree's `.git` pointer was removed")
            }
            Change::Changed(Watched::Pointer) => {
                write!(f, "the worktree's `.git` pointer was rewritten")
            }
            Change::Added(Watched::Ref(name)) => write!(f, "`{name}` was created"),
            Change::Removed(Watched::Ref(name)) => write!(f, "`{name}` was deleted"),
            Change::Changed(Watched::Ref(name)) => write!(f, "`{name}` moved"),
            Change::ForeignPointer(why) => {
                write!(
                    f,
                    "the worktree's `.git` pointer is not the one executor made ({why})"
                )
            }
        }
    }
}

/// What the integrity check saw: each watched thing present, with a digest of its content
/// (a ref: the commit it names). Absent things are not in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub seen: BTreeMap<Watched, String>,
}

impl Snapshot {
    /// A snapshot of `seen` (for tests and the edge that reads the files).
    pub fn of(seen: impl IntoIterator<Item = (Watched, String)>) -> Self {
        Self {
            seen: seen.into_iter().collect(),
        }
    }
}

/// Everything that differs from `before` in `after`, in the order of [`Watched`].
pub fn changes(before: &Snapshot, after: &Snapshot) -> Vec<Change> {
    let mut found = Vec::new();
    for (item, digest) in &before.seen {
        match after.seen.get(item) {
            None => found.push(Change::Removed(item.clone())),
            Some(now) if now != digest => found.push(Change::Changed(item.clone())),
            Some(_) => {}
        }
    }
    for item in after.seen.keys() {
        if !before.seen.contains_key(item) {
            found.push(Change::Added(item.clone()));
        }
    }
    found.sort_by(|a, b| key(a).cmp(&key(b)));
    found
}

fn key(change: &Change) -> Option<&Watched> {
    match change {
        Change::Added(w) | Change::Removed(w) | Change::Changed(w) => Some(w),
        Change::ForeignPointer(_) => None,
    }
}

/// `changes` for the owner: "a; b; c".
pub fn describe(changes: &[Change]) -> String {
    changes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The repository as it was before a worker started in a run's worktree, and where to look
/// again: the admin folder found then, not one found later through what the worker left.
#[derive(Debug, Clone)]
pub struct Baseline {
    tree: RunTree,
    protected: Vec<String>,
    snapshot: Snapshot,
}

impl Baseline {
    /// Takes the snapshot of `repo`'s git data as seen from the run worktree `worktree`,
    /// watching the branches `protected` (short names, like `main`).
    pub fn take(repo: &Path, worktree: &Path, protected: &[String]) -> Result<Self, GitError> {
        let tree = RunTree::locate(repo, worktree)?;
        let snapshot = take(&tree, protected)?;
        Ok(Self {
            tree,
            protected: protected.to_vec(),
            snapshot,
        })
    }

    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// What changed since the baseline, and whether the worktree's `.git` pointer still
    /// names its admin folder; empty when the orchestrator may go on.
    pub fn changes(&self) -> Result<Vec<Change>, GitError> {
        let mut found = changes(&self.snapshot, &take(&self.tree, &self.protected)?);
        let pointer_changed = found.iter().any(|c| key(c) == Some(&Watched::Pointer));
        if let Err(GitError::PointerRewritten { found: why, .. }) = self.tree.check_pointer() {
            // A pointer that was foreign before the worker started is reported too.
            if !pointer_changed {
                found.push(Change::ForeignPointer(why));
            }
        }
        Ok(found)
    }
}

/// Reads what [`Snapshot`] holds for `tree`.
fn take(tree: &RunTree, protected: &[String]) -> Result<Snapshot, GitError> {
    let mut seen = BTreeMap::new();
    let common_label = |rel: &str| format!(".git/{rel}");
    let admin_rel = tree
        .admin
        .strip_prefix(&tree.common)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| tree.admin.to_string_lossy().into_owned());
    for rel in ["config", "config.worktree", "info/attributes"] {
        if let Some(digest) = digest_of(&tree.common.join(rel))? {
            seen.insert(Watched::File(common_label(rel)), digest);
        }
    }
    for name in ["HEAD", "commondir", "gitdir", "config.worktree"] {
        if let Some(digest) = digest_of(&tree.admin.join(name))? {
            seen.insert(
                Watched::File(common_label(&format!("{admin_rel}/{name}"))),
                digest,
            );
        }
    }
    let hooks = tree.common.join("hooks");
    if let Ok(entries) = std::fs::read_dir(&hooks) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(digest) = digest_of(&entry.path())? {
                seen.insert(
                    Watched::File(common_label(&format!("hooks/{name}"))),
                    digest,
                );
            }
        }
    }
    if let Some(digest) = digest_of(&tree.work_tree.join(".git"))? {
        seen.insert(Watched::Pointer, digest);
    }
    let mut attributes = Vec::new();
    find_attributes(&tree.work_tree, &mut attributes);
    for path in attributes {
        if let Some(digest) = digest_of(&path)? {
            let rel = path
                .strip_prefix(&tree.work_tree)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            seen.insert(Watched::File(rel), digest);
        }
    }
    // A push reads the owner's global configuration; a worker that edits it is caught.
    for (label, path) in global_configs() {
        if let Some(digest) = digest_of(&path)? {
            seen.insert(Watched::File(label), digest);
        }
    }
    let packed = std::fs::read_to_string(tree.common.join("packed-refs")).unwrap_or_default();
    for branch in protected {
        let name = format!("refs/heads/{branch}");
        if let Some(target) = ref_target(&tree.common, &name, &packed)? {
            seen.insert(Watched::Ref(name), target);
        }
    }
    Ok(Snapshot { seen })
}

/// The owner's global configuration files, by the names the owner knows them by.
fn global_configs() -> Vec<(String, PathBuf)> {
    let mut found = Vec::new();
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        found.push(("~/.gitconfig".to_string(), home.join(".gitconfig")));
        match std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from) {
            Some(xdg) if xdg.is_absolute() => found.push((
                format!("{}/git/config", xdg.display()),
                xdg.join("git/config"),
            )),
            _ => found.push((
                "~/.config/git/config".to_string(),
                home.join(".config/git/config"),
            )),
        }
    }
    found
}

/// The commit `name` names: the loose ref, else its line in `packed-refs`, else `None`.
fn ref_target(common: &Path, name: &str, packed: &str) -> Result<Option<String>, GitError> {
    let loose = common.join(name);
    match std::fs::read_to_string(&loose) {
        Ok(text) => return Ok(Some(text.trim().to_string())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        // A folder where the ref should be (or an unreadable file) is a change in itself.
        Err(error) => return Ok(Some(format!("unreadable: {}", error.kind()))),
    }
    Ok(packed.lines().find_map(|line| {
        let (sha, refname) = line.split_once(' ')?;
        (refname == name).then(|| sha.to_string())
    }))
}

/// Every `.gitattributes` under `dir`, not descending into `.git` entries or symlinks.
fn find_attributes(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name == ".git" {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if name == ".gitattributes" {
            found.push(entry.path());
        } else if kind.is_dir() {
            find_attributes(&entry.path(), found);
        }
    }
}

/// A digest of what is at `path` (without following a symlink), `None` when nothing is.
fn digest_of(path: &Path) -> Result<Option<String>, GitError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(GitError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let mut hasher = Sha256::new();
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).map_err(GitError::io(path))?;
        hasher.update(b"symlink\0");
        hasher.update(target.as_os_str().as_encoded_bytes());
    } else if meta.is_dir() {
        hasher.update(b"directory\0");
    } else {
        use std::os::unix::fs::PermissionsExt;
        // The mode counts: `chmod +x` makes a planted file a hook.
        hasher.update(format!("file {:o}\0", meta.permissions().mode()).as_bytes());
        hasher.update(std::fs::read(path).map_err(GitError::io(path))?);
    }
    Ok(Some(format!("{:x}", hasher.finalize())))
}

pub use crate::core::identity::Identity;

/// The message of a run's commit: the task's title, then the trailers that say executor
/// made it and for which run (`git log --format=%(trailers)` reads them).
pub fn commit_message(title: &str, run_id: i64, task_gid: &str) -> String {
    format!("{title}\n\nExecutor-Run: {run_id}\nExecutor-Task: {task_gid}\n")
}

/// Who the runs' commits are by: `[runner] commit_author` when set, else the owner as the
/// repository names them ([`owner_identity`]).
pub fn commit_author(configured: Option<&str>, repo: &Path) -> Identity {
    configured
        .and_then(Identity::parse)
        .unwrap_or_else(|| owner_identity(repo))
}

/// The owner's commit identity: `user.name` and `user.email` as git itself reads them for
/// `repo` (its own configuration, then the owner's global and the system one), read once
/// when the runner starts, before any worker could touch them. A name or an email that is
/// missing, empty or holds control characters makes executor's own identity the answer.
pub fn owner_identity(repo: &Path) -> Identity {
    identity_with(repo, |_| {})
}

fn identity_with(repo: &Path, configure: impl Fn(&mut Command)) -> Identity {
    let read = |key: &str| -> Option<String> {
        let mut command = Command::new("git");
        command.arg("-C").arg(repo).args(["config", "--get", key]);
        configure(&mut command);
        let output = command.output().ok()?;
        let value = String::from_utf8(output.stdout).ok()?;
        let value = value.trim_end_matches('\n');
        (output.status.success()
            && !value.trim().is_empty()
            && !value.chars().any(char::is_control))
        .then(|| value.to_string())
    };
    match (read("user.name"), read("user.email")) {
        (Some(name), Some(email)) => Identity { name, email },
        _ => Identity::executor(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str) -> Watched {
        Watched::File(name.to_string())
    }

    fn base() -> Snapshot {
        Snapshot::of([
            (file(".git/config"), "c1".to_string()),
            (file(".git/hooks/pre-commit.sample"), "s1".to_string()),
            (file(".git/worktrees/x/HEAD"), "h1".to_string()),
            (Watched::Pointer, "p1".to_string()),
            (
                Watched::Ref("refs/heads/main".to_string()),
                "abc".to_string(),
            ),
        ])
    }

    fn with(mut snapshot: Snapshot, item: Watched, digest: Option<&str>) -> Snapshot {
        match digest {
            Some(d) => snapshot.seen.insert(item, d.to_string()),
            None => snapshot.seen.remove(&item),
        };
        snapshot
    }

    #[test]
    fn an_unchanged_repository_has_no_changes() {
        assert_eq!(changes(&base(), &base()), Vec::new());
    }

    #[test]
    fn each_change_is_named_the_way_the_owner_reads_it() {
        let rows: Vec<(Snapshot, &str)> = vec![
            (
                with(base(), file(".git/hooks/post-checkout"), Some("x")),
                "`.git/hooks/post-checkout` was added",
            ),
            (
                with(base(), file(".git/hooks/pre-commit.sample"), None),
                "`.git/hooks/pre-commit.sample` was removed",
            ),
            (
                with(base(), file(".git/config"), Some("c2")),
                "`.git/config` was changed",
            ),
            (
                with(base(), Watched::Pointer, Some("p2")),
                "the worktree's `.git` pointer was rewritten",
            ),
            (
                with(base(), Watched::Pointer, None),
                "the worktree's `.git` pointer was removed",
            ),
            (
                with(base(), Watched::Ref("refs/heads/main".into()), Some("def")),
                "`refs/heads/main` moved",
            ),
            (
                with(base(), Watched::Ref("refs/heads/main".into()), None),
                "`refs/heads/main` was deleted",
            ),
            (
                with(base(), file(".gitattributes"), Some("a")),
                "`.gitattributes` was added",
            ),
        ];
        for (after, expected) in rows {
            assert_eq!(describe(&changes(&base(), &after)), expected);
        }
    }

    #[test]
    fn several_changes_are_all_reported_in_a_stable_order() {
        let after = with(
            with(
                with(base(), file(".git/config"), Some("c2")),
                Watched::Ref("refs/heads/main".into()),
                Some("def"),
            ),
            file(".git/hooks/post-checkout"),
            Some("x"),
        );
        assert_eq!(
            describe(&changes(&base(), &after)),
            "`.git/config` was changed; `.git/hooks/post-checkout` was added; `refs/heads/main` moved"
        );
    }

    #[test]
    fn a_ref_created_where_there_was_none_is_a_change() {
        let before = with(base(), Watched::Ref("refs/heads/main".into()), None);
        assert_eq!(
            changes(&before, &base()),
            vec![Change::Added(Watched::Ref("refs/heads/main".into()))]
        );
    }

    #[test]
    fn every_filter_and_merge_driver_the_configuration_names_is_switched_off() {
        let listing = "core.bare\nfilter.lfs.clean\nfilter.lfs.smudge\nfilter.My.Odd.process\nmerge.ours.driver\nuser.name\n";
        assert_eq!(
            neutralizers(listing),
            vec![
                "filter.My.Odd.clean=",
                "filter.My.Odd.smudge=",
                "filter.My.Odd.process=",
                "filter.My.Odd.required=false",
                "filter.lfs.clean=",
                "filter.lfs.smudge=",
                "filter.lfs.process=",
                "filter.lfs.required=false",
                "merge.ours.driver=false",
            ]
        );
        assert!(neutralizers("core.bare\nuser.name\n").is_empty());
    }

    #[test]
    fn packed_refs_are_read_when_the_ref_is_not_loose() {
        let dir = std::env::temp_dir().join(format!("executor-git-test-{}", std::process::id()));
        let packed = "# pack-refs with: peeled fully-peeled sorted\nabc123 refs/heads/main\n^def456\n111 refs/heads/other\n";
        assert_eq!(
            ref_target(&dir, "refs/heads/main", packed).ok().flatten(),
            Some("abc123".to_string())
        );
        assert_eq!(
            ref_target(&dir, "refs/heads/gone", packed).ok().flatten(),
            None
        );
    }

    #[test]
    fn a_configured_author_is_name_and_email_and_the_message_carries_the_run() {
        assert_eq!(
            Identity::parse(" Ada Lovelace <ada@example.com> "),
            Some(Identity {
                name: "Ada Lovelace".into(),
                email: "ada@example.com".into()
            })
        );
        for bad in [
            "Ada",
            "<ada@example.com>",
            "Ada <>",
            "Ada <a@b",
            "A\nB <a@b>",
            "A <a<b>",
        ] {
            assert_eq!(Identity::parse(bad), None, "{bad:?}");
        }
        let message = commit_message("Fix the tab", 42, "T-1");
        assert_eq!(
            message,
            "Fix the tab\n\nExecutor-Run: 42\nExecutor-Task: T-1\n"
        );
    }

    #[test]
    fn commits_are_authored_by_the_owner_as_git_knows_them() {
        let home = tempfile::tempdir().unwrap();
        let repo = tempfile::tempdir().unwrap();
        let isolated = |command: &mut Command| {
            command
                .env("HOME", home.path())
                .env("XDG_CONFIG_HOME", home.path())
                .env("GIT_CONFIG_NOSYSTEM", "1");
        };
        let git = |args: &[&str]| {
            let mut command = Command::new("git");
            command.arg("-C").arg(repo.path()).args(args);
            isolated(&mut command);
            assert!(command.status().unwrap().success(), "{args:?}");
        };
        git(&["init", "-q"]);
        // Nobody named anywhere: executor's own.
        assert_eq!(identity_with(repo.path(), isolated), Identity::executor());
        // The owner's global configuration.
        std::fs::write(
            home.path().join(".gitconfig"),
            "[user]\n\tname = Global Owner\n\temail = global@example.com\n",
        )
        .unwrap();
        assert_eq!(
            identity_with(repo.path(), isolated),
            Identity {
                name: "Global Owner".into(),
                email: "global@example.com".into()
            }
        );
        // The repository's own wins, as it does for git.
        git(&["config", "user.name", "Repo Owner"]);
        git(&["config", "user.email", "repo@example.com"]);
        assert_eq!(
            identity_with(repo.path(), isolated),
            Identity {
                name: "Repo Owner".into(),
                email: "repo@example.com".into()
            }
        );
        // No repository there (the runner then stops, naming it): executor's own, no error.
        let missing = repo.path().join("nowhere");
        assert_eq!(identity_with(&missing, isolated), Identity::executor());
    }
}

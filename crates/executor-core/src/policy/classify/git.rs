//! git: its global options and the subcommand table.
//!
//! git is a program runner as much as a version control tool: `-c` and `GIT_*` variables set
//! any config (an alias, a hook path, `core.sshCommand`, `core.fsmonitor`), and subcommands
//! such as `rebase --exec`, `bisect run` and `submodule foreach` run commands. So only what is
//! in [`GIT_SUBCOMMANDS`], with no config set on the command line, is understood; an unknown
//! subcommand may be an alias (`help.autocorrect` included) and is `run_unknown`.

use super::{fetch, operands, option_value, Classifier, Mods};
use crate::policy::shell::Word;
use crate::policy::Action;

/// What a git subcommand does, as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Git {
    /// Reads the repository only.
    ReadOnly,
    /// Changes the worktree, the index or the run's own branches: local and reviewed.
    Local,
    /// Talks to a remote: `fetch_url` (data in, and a remote name or URL out).
    Network,
    /// Changes refs, config or objects shared with the owner's repository, or runs programs:
    /// `git_admin`.
    Admin,
    /// Hands out credentials: `read_secret`.
    Secret,
    /// Has its own handler below.
    Own,
}

/// git subcommands → what they do. A subcommand not here is not understood (an alias, a
/// plugin `git-foo` on the PATH).
#[rustfmt::skip]
pub(super) const GIT_SUBCOMMANDS: &[(&[&str], Git)] = &[
    (&["status", "diff", "log", "show", "rev-parse", "ls-files", "ls-tree", "blame", "grep",
       "describe", "shortlog", "cat-file", "rev-list", "show-ref", "for-each-ref", "merge-base",
       "name-rev", "whatchanged", "count-objects", "fsck", "version", "var", "check-ignore",
       "diff-tree", "diff-files", "diff-index", "check-attr", "cherry", "range-diff",
       "show-branch", "annotate", "verify-commit", "verify-tag", "help"], Git::ReadOnly),
    (&["add", "commit", "checkout", "switch", "restore", "reset", "rm", "mv", "merge",
       "cherry-pick", "revert", "stash", "tag", "branch", "init", "clean", "am", "apply",
       "sparse-checkout", "update-index", "read-tree", "write-tree", "commit-tree", "hash-object",
       "mktree", "merge-file", "merge-tree", "mktag", "citool", "rerere", "restore", "prune",
       "repack", "pack-refs", "maintenance", "stage", "unpack-objects", "pack-objects",
       "index-pack", "checkout-index"], Git::Local),
    (&["fetch", "pull", "ls-remote", "remote-https", "fetch-pack"], Git::Network),
    (&["update-ref", "symbolic-ref", "gc", "filter-branch", "filter-repo", "replace", "notes",
       "fsmonitor--daemon", "hook", "mergetool", "difftool", "instaweb", "submodule",
       "subtree", "lfs", "worktree", "config"], Git::Admin),
    (&["credential", "credential-store", "credential-cache", "credential-osxkeychain",
       "credential-manager"], Git::Secret),
    (&["push", "remote", "clone", "rebase", "bisect", "reflog", "archive", "bundle",
       "format-patch", "send-email", "request-pull", "http-push", "svn", "p4", "daemon",
       "imap-send", "upload-pack", "receive-pack", "shell"], Git::Own),
];

fn kind_of(sub: &str) -> Option<Git> {
    GIT_SUBCOMMANDS
        .iter()
        .find(|(names, _)| names.contains(&sub))
        .map(|(_, kind)| *kind)
}

/// After this subcommand `HEAD` may be another branch (or another repository's).
fn changes_head(sub: &str) -> bool {
    matches!(
        sub,
        "checkout"
            | "switch"
            | "rebase"
            | "branch"
            | "worktree"
            | "bisect"
            | "init"
            | "clone"
            | "stash"
            | "am"
            | "symbolic-ref"
            | "pull"
    )
}

/// `git_admin` for `text`: it changes git's configuration, shared refs or objects, or runs
/// a program.
fn git_admin(text: &str, reason: &str) -> Action {
    Action::new("git_admin")
        .with("command", text)
        .with("reason", reason)
}

/// An ordinary git command that changes the run's own worktree.
fn git_local(text: &str) -> Action {
    Action::new("run_command")
        .with("command", text)
        .with("program", "git")
}

impl Classifier {
    pub(super) fn git(&mut self, args: &[Word], text: &str) {
        let admin = |reason: &str| git_admin(text, reason);
        let Some((i, elsewhere)) = self.git_globals(args, text) else {
            return;
        };
        let readonly_action = || {
            Action::new("run_command")
                .with("command", text)
                .with("program", "git")
                .with("readonly", "true")
        };
        let local_action = || git_local(text);
        let Some(sub) = args.get(i) else {
            self.push(readonly_action());
            return;
        };
        if sub.dynamic {
            self.push(Action::unclassifiable(format!(
                "git subcommand known only at run time: {}",
                sub.text
            )));
            return;
        }
        let rest = &args[i + 1..];
        self.git_elsewhere = !elsewhere.is_empty();
        self.protect_branches(&sub.text, rest, text);
        let has = |names: &[&str]| {
            rest.iter().any(|w| {
                names.iter().any(|n| {
                    w.text == *n
                        || (n.starts_with("--") && w.text.starts_with(&format!("{n}=")))
                        || (!n.starts_with("--") && n.len() == 2 && w.text.starts_with(n))
                })
            })
        };
        self.git_output_options(&sub.text, rest);
        // Options that run a program.
        if has(&[
            "--upload-pack",
            "--receive-pack",
            "--exec",
            "--ext-diff",
            "--open-files-in-pager",
        ]) || sub.text == "grep" && has(&["-O"])
            || sub.text == "rebase" && has(&["-x"])
        {
            self.push(admin("this git option runs a program"));
        }
        let sub_text = sub.text.as_str();
        let mut readonly = false;
        match kind_of(sub_text) {
            None => self.push(
                Action::new("run_unknown")
                    .with("command", text)
                    .with("program", "git")
                    .with(
                        "reason",
                        format!("git {sub_text} is not a known subcommand (an alias or a plugin)"),
                    ),
            ),
            Some(Git::ReadOnly) => readonly = true,
            Some(Git::Local) => {
                if sub_text == "apply"
                    && rest
                        .iter()
                        .any(|w| w.text == "--unsafe-paths" || w.text.starts_with("--directory"))
                {
                    self.unknown_modification("git apply outside the repository");
                }
                if matches!(sub_text, "apply" | "am") {
                    self.git_apply(sub_text, rest);
                }
                if sub_text == "init" {
                    self.git_init(rest, text);
                }
                // Branch and tag listings read only.
                if matches!(sub_text, "branch" | "tag" | "stash")
                    && (rest.is_empty()
                        || rest.iter().all(|w| {
                            matches!(
                                w.text.as_str(),
                                "-a" | "-r"
                                    | "-l"
                                    | "--list"
                                    | "-v"
                                    | "-vv"
                                    | "--all"
                                    | "--show-current"
                                    | "list"
                                    | "show"
                            ) || w.text.starts_with("--sort")
                                || w.text.starts_with("--format")
                                || w.text.starts_with("--contains")
                        }))
                {
                    readonly = true;
                } else {
                    self.push(local_action());
                }
            }
            Some(Git::Network) => {
                let remote = operands(rest, &["--depth", "-j", "--jobs", "-o", "--upload-pack"])
                    .first()
                    .map(|w| w.text.clone())
                    .unwrap_or_default();
                self.push(fetch(&remote).with("program", "git"));
                if sub_text == "pull" {
                    self.push(local_action());
                } else {
                    readonly = true;
                }
            }
            Some(Git::Admin) => match sub_text {
                "worktree" => self.git_worktree(rest, text),
                "config" => self.git_config(rest, text),
                _ => self.push(admin(&format!(
                    "git {sub_text} changes shared refs, config or objects, or runs programs"
                ))),
            },
            Some(Git::Secret) => self.push(
                Action::new("read_secret")
                    .with("path", format!("git {sub_text}"))
                    .with("program", "git"),
            ),
            Some(Git::Own) => readonly = self.git_own(sub_text, rest, text),
        }
        if readonly {
            self.push(readonly_action());
        } else {
            for d in &elsewhere {
                self.path_action("modify_files", d);
            }
        }
        for d in &elsewhere {
            self.path_action("read_files", d);
        }
        self.branch_may_change |= changes_head(sub_text) || !elsewhere.is_empty();
    }

    /// `git_admin` when the command checks out or moves a protected branch.
    fn protect_branches(&mut self, sub: &str, rest: &[Word], text: &str) {
        if let Some(branch) = self.names_protected(sub, rest) {
            self.push(git_admin(
                text,
                &format!("git {sub} checks out or moves {branch}, a branch the owner's repository shares with every worktree"),
            ));
        }
    }

    /// The protected branch (the base branch, `main`, `master`) a git command checks out or
    /// moves: `checkout main`, `switch -C main`, `worktree add DIR main`, `branch -f main`,
    /// `rebase X main`. Naming it to read or to start from is not moving it (`log main`,
    /// `switch -c new main`, `checkout main -- file`, `merge main`).
    fn names_protected(&self, sub: &str, rest: &[Word]) -> Option<String> {
        let protected = |w: &Word| {
            let name = w.text.strip_prefix("refs/heads/").unwrap_or(&w.text);
            (!w.dynamic && self.protected.iter().any(|p| p == name)).then(|| name.to_string())
        };
        let value = |names: &[&str]| option_value(rest, names);
        let has = |names: &[&str]| rest.iter().any(|w| names.contains(&w.text.as_str()));
        match sub {
            "checkout" | "switch" => {
                let (create, force_create) = if sub == "checkout" {
                    (&["-b"][..], &["-B", "--orphan"][..])
                } else {
                    (
                        &["-c", "--create"][..],
                        &["-C", "--force-create", "--orphan"][..],
                    )
                };
                if let Some(b) = value(force_create).as_ref().and_then(protected) {
                    return Some(b);
                }
                if value(create).is_some() || has(&["--detach", "-d", "--"]) {
                    return None;
                }
                let ops = operands(rest, &["-b", "-B", "-c", "-C", "--orphan", "--conflict"]);
                match ops.as_slice() {
                    [one] => protected(one),
                    _ => None,
                }
            }
            "worktree" if rest.first().is_some_and(|w| w.text == "add") => {
                let rest = &rest[1..];
                if let Some(b) = option_value(rest, &["-B"]).as_ref().and_then(protected) {
                    return Some(b);
                }
                if option_value(rest, &["-b"]).is_some()
                    || rest.iter().any(|w| w.text == "--detach" || w.text == "-d")
                {
                    return None;
                }
                operands(rest, &["-b", "-B", "--reason", "--orphan"])
                    .get(1)
                    .and_then(protected)
            }
            "branch" => {
                let listing = rest.iter().any(|w| {
                    let t = w.text.as_str();
                    matches!(
                        t,
                        "-l" | "--list" | "-a" | "--all" | "-r" | "--remotes" | "--show-current"
                    ) || [
                        "--contains",
                        "--no-contains",
                        "--merged",
                        "--no-merged",
                        "--points-at",
                    ]
                    .iter()
                    .any(|o| t == *o || t.starts_with(&format!("{o}=")))
                });
                if listing {
                    return None;
                }
                operands(
                    rest,
                    &[
                        "-u",
                        "--set-upstream-to",
                        "--format",
                        "--sort",
                        "--column",
                        "-t",
                        "--track",
                    ],
                )
                .iter()
                .find_map(protected)
            }
            "rebase" => {
                let ops = operands(
                    rest,
                    &[
                        "--onto",
                        "-s",
                        "--strategy",
                        "-X",
                        "--strategy-option",
                        "-x",
                        "--exec",
                    ],
                );
                if ops.len() >= 2 {
                    ops.last().and_then(protected)
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// Options that write a file wherever they are told, on many subcommands (`--output`,
    /// and `-o` where it names a file): judged as writes there.
    fn git_output_options(&mut self, sub: &str, rest: &[Word]) {
        // Options that write a file wherever they are told, on many subcommands.
        for out in [
            option_value(rest, &["--output"]),
            option_value(rest, &["-o"])
                .filter(|_| matches!(sub, "archive" | "format-patch" | "diff" | "log")),
        ]
        .into_iter()
        .flatten()
        {
            self.path_action("modify_files", &out);
        }
    }

    /// git's global options before the subcommand: the places they point at (`-C`,
    /// `--git-dir`, …) and where the subcommand starts; `None` when the call cannot be
    /// classified (an alias defined on the command line).
    fn git_globals(&mut self, args: &[Word], text: &str) -> Option<(usize, Vec<Word>)> {
        let admin = |reason: &str| git_admin(text, reason);
        // Global options before the subcommand; -C points elsewhere.
        let mut i = 0;
        let mut elsewhere: Vec<Word> = Vec::new();
        while i < args.len() {
            let w = &args[i];
            let t = w.text.as_str();
            match t {
                "-C" => {
                    if let Some(d) = args.get(i + 1) {
                        elsewhere.push(d.clone());
                    }
                    i += 2;
                }
                "-c" | "--config-env" => {
                    if args
                        .get(i + 1)
                        .is_some_and(|v| v.text.to_ascii_lowercase().starts_with("alias."))
                    {
                        self.push(Action::unclassifiable(
                            "git with an alias defined on the command line",
                        ));
                        return None;
                    }
                    // Any config can name a program: core.sshCommand, core.pager, a filter.
                    self.push(admin("git -c sets configuration on the command line"));
                    i += 2;
                }
                "--git-dir" | "--work-tree" | "--exec-path" | "--namespace" | "--super-prefix" => {
                    self.push(admin(&format!(
                        "git {t} points git at other data or programs"
                    )));
                    if let Some(d) = args.get(i + 1) {
                        elsewhere.push(d.clone());
                    }
                    i += 2;
                }
                _ if t.starts_with("--git-dir=")
                    || t.starts_with("--work-tree=")
                    || t.starts_with("--exec-path")
                    || t.starts_with("--config-env=")
                    || t.starts_with("--namespace=") =>
                {
                    self.push(admin(&format!(
                        "git {t} points git at other data or programs"
                    )));
                    let v = t.split_once('=').map(|x| x.1).unwrap_or_default();
                    elsewhere.push(Word {
                        text: v.to_string(),
                        ..w.clone()
                    });
                    i += 1;
                }
                "-p"
                | "--paginate"
                | "-P"
                | "--no-pager"
                | "--no-replace-objects"
                | "--bare"
                | "--literal-pathspecs"
                | "--glob-pathspecs"
                | "--noglob-pathspecs"
                | "--icase-pathspecs"
                | "--no-optional-locks"
                | "--version"
                | "--help" => i += 1,
                _ if t.starts_with('-') => {
                    self.push(
                        Action::new("run_unknown")
                            .with("command", text)
                            .with("program", "git")
                            .with("reason", format!("the git option {t} is not known")),
                    );
                    i += 1;
                }
                _ => break,
            }
        }
        Some((i, elsewhere))
    }

    /// The subcommands whose forms the classifier reads one by one (push, remote, clone,
    /// rebase, bisect, reflog, archive, bundle, format-patch); whether the call only reads.
    fn git_own(&mut self, sub_text: &str, rest: &[Word], text: &str) -> bool {
        let admin = |reason: &str| git_admin(text, reason);
        let local_action = || git_local(text);
        let has = |names: &[&str]| {
            rest.iter().any(|w| {
                names.iter().any(|n| {
                    w.text == *n
                        || (n.starts_with("--") && w.text.starts_with(&format!("{n}=")))
                        || (!n.starts_with("--") && n.len() == 2 && w.text.starts_with(n))
                })
            })
        };
        let mut readonly = false;
        match sub_text {
            "push" => self.git_push(rest),
            "remote" => match rest.first().map(|w| w.text.as_str()) {
                Some(
                    "add" | "set-url" | "rename" | "remove" | "rm" | "set-head" | "set-branches",
                ) => self.push(Action::new("configure_remote").with("command", text)),
                Some("update" | "prune" | "show") => self.push(fetch("").with("program", "git")),
                _ => readonly = true,
            },
            "clone" => self.git_clone(rest),
            "rebase" => {
                if has(&["--exec", "-x", "-i", "--interactive"]) {
                    self.push(admin("git rebase --exec or -i runs commands"));
                }
                self.push(local_action());
            }
            "bisect" => {
                if rest.first().is_some_and(|w| w.text == "run") {
                    self.push(
                        Action::new("run_indirect")
                            .with("command", text)
                            .with("program", "git")
                            .with("reason", "git bisect run runs a command at each step"),
                    );
                    let inner = rest.get(1..).unwrap_or_default();
                    self.wrapped(
                        inner,
                        &crate::policy::shell::SimpleCommand::default(),
                        Mods::default(),
                    );
                }
                self.push(local_action());
            }
            "reflog" => match rest.first().map(|w| w.text.as_str()) {
                Some("expire" | "delete") => {
                    self.push(admin("git reflog expire or delete drops history"))
                }
                _ => readonly = true,
            },
            "archive" => {
                if has(&["--remote"]) {
                    self.push(fetch("").with("program", "git"));
                }
                if option_value(rest, &["-o", "--output"]).is_none() {
                    readonly = true; // to stdout
                } else {
                    self.push(local_action());
                }
            }
            "bundle" => {
                if let Some(file) = rest
                    .get(1)
                    .filter(|_| rest.first().is_some_and(|w| w.text == "create"))
                {
                    self.path_action("modify_files", file);
                }
                self.push(local_action());
            }
            "format-patch" => {
                if option_value(rest, &["-o", "--output-directory"]).is_none()
                    && !has(&["--stdout"])
                {
                    // The patches are written into the current directory.
                    let here = Word {
                        text: ".".into(),
                        dynamic: false,
                        quoted: false,
                        ..Default::default()
                    };
                    self.path_action("modify_files", &here);
                } else if let Some(dir) = option_value(rest, &["-o", "--output-directory"]) {
                    self.path_action("modify_files", &dir);
                }
                self.push(local_action());
            }
            _ => self.push(Action::new("remote_access").with("program", "git")),
        }
        readonly
    }

    /// `git apply` / `git am`: the patch's files are written (see [`super::patch`]), unless
    /// it only reports (`--check`, `--stat`, …). A patch in a file is not read here.
    fn git_apply(&mut self, sub: &str, rest: &[Word]) {
        let reports = |t: &str| matches!(t, "--check" | "--stat" | "--numstat" | "--summary");
        if sub == "apply"
            && rest.iter().any(|w| reports(&w.text))
            && !rest.iter().any(|w| w.text == "--apply")
        {
            return;
        }
        if matches!(
            rest.first().map(|w| w.text.as_str()),
            Some("--abort" | "--quit" | "--skip" | "--show-current-patch")
        ) {
            return;
        }
        let strip = option_value(rest, &["-p"]).and_then(|w| w.text.parse::<usize>().ok());
        let files = operands(
            rest,
            &[
                "-p",
                "-C",
                "--exclude",
                "--include",
                "--directory",
                "--whitespace",
            ],
        );
        let input = if files.is_empty() || files.iter().all(|w| w.text == "-") {
            self.input.clone()
        } else {
            None
        };
        self.patch_writes(
            input.as_deref(),
            Some(strip.unwrap_or(1)),
            &format!("git {sub}"),
        );
    }

    /// `git init DIR` makes (or re-makes) a repository there: a write there (and at its
    /// separate git folder); a template installs hooks.
    fn git_init(&mut self, rest: &[Word], text: &str) {
        let ops = operands(
            rest,
            &[
                "-b",
                "--initial-branch",
                "--template",
                "--separate-git-dir",
                "--object-format",
                "--ref-format",
            ],
        );
        for dir in &ops {
            self.path_action("modify_files", dir);
        }
        if let Some(dir) = option_value(rest, &["--separate-git-dir"]) {
            self.path_action("modify_files", &dir);
        }
        if rest.iter().any(|w| w.text.starts_with("--template")) {
            self.push(git_admin(text, "git init --template installs hooks"));
        }
    }

    /// `git worktree add`: a new worktree (and a folder written); the rest changes the
    /// repository's shared list of worktrees.
    fn git_worktree(&mut self, rest: &[Word], text: &str) {
        let verb = rest.first().map(|w| w.text.as_str()).unwrap_or("list");
        let ops = operands(
            rest.get(1..).unwrap_or_default(),
            &["-b", "-B", "--reason", "--orphan"],
        );
        match verb {
            "add" => {
                let mut a = Action::new("create_worktree");
                if let Some(b) = option_value(rest, &["-b", "-B"]).or_else(|| ops.get(1).cloned()) {
                    if !b.dynamic {
                        a.args.insert("branch".into(), b.text.clone());
                    }
                }
                self.push(a);
                match ops.first() {
                    Some(p) => self.path_action("modify_files", p),
                    None => self.unknown_modification("git worktree add without a path"),
                }
            }
            "list" => self.push(
                Action::new("run_command")
                    .with("command", text)
                    .with("program", "git")
                    .with("readonly", "true"),
            ),
            _ => {
                self.modify_operands(ops, Mods::default());
                self.push(Action::new("git_admin").with("command", text).with(
                    "reason",
                    format!("git worktree {verb} changes the shared list of worktrees"),
                ));
            }
        }
    }

    /// `git config`: reading is fine; writing any key can name a program to run.
    fn git_config(&mut self, rest: &[Word], text: &str) {
        let reading = rest.iter().any(|w| {
            matches!(
                w.text.as_str(),
                "--get"
                    | "--get-all"
                    | "--get-regexp"
                    | "--list"
                    | "-l"
                    | "--show-origin"
                    | "get"
                    | "list"
            )
        });
        let ops = operands(rest, &["-f", "--file", "--type", "--default", "--blob"]);
        let writing = ops.len() >= 2
            || rest.iter().any(|w| {
                w.text.starts_with("--unset")
                    || w.text.starts_with("--add")
                    || w.text.starts_with("--replace")
                    || w.text.starts_with("--rename-section")
                    || w.text.starts_with("--remove-section")
                    || w.text == "--edit"
                    || w.text == "-e"
                    || matches!(w.text.as_str(), "set" | "unset" | "edit")
            });
        if let Some(file) = option_value(rest, &["-f", "--file"]) {
            self.path_action(
                if writing {
                    "modify_files"
                } else {
                    "read_files"
                },
                &file,
            );
        }
        if reading || !writing {
            self.push(
                Action::new("run_command")
                    .with("command", text)
                    .with("program", "git")
                    .with("readonly", "true"),
            );
            return;
        }
        let key = ops
            .first()
            .map(|w| w.text.to_ascii_lowercase())
            .unwrap_or_default();
        if key.starts_with("remote.") || key.starts_with("url.") {
            self.push(Action::new("configure_remote").with("command", text));
        }
        if rest
            .iter()
            .any(|w| w.text == "--global" || w.text == "--system")
        {
            let home = if rest.iter().any(|w| w.text == "--system") {
                "/etc/gitconfig"
            } else {
                "~/.gitconfig"
            };
            self.push(Action::new("modify_files").with("path", home));
        }
        self.push(Action::new("git_admin").with("command", text).with(
            "reason",
            "git config writes configuration, which can name programs to run",
        ));
    }

    fn git_clone(&mut self, rest: &[Word]) {
        let ops = operands(
            rest,
            &[
                "-b",
                "--branch",
                "-o",
                "--origin",
                "--depth",
                "-c",
                "--config",
                "--reference",
                "-j",
                "--jobs",
                "--separate-git-dir",
                "--template",
                "-u",
                "--upload-pack",
                "--filter",
            ],
        );
        if rest.iter().any(|w| {
            w.text == "-c" || w.text.starts_with("--config") || w.text.starts_with("--template")
        }) {
            self.push(Action::new("git_admin").with("command", "git clone").with(
                "reason",
                "git clone --config or --template sets configuration or hooks",
            ));
        }
        let url = ops.first().map(|w| w.text.clone()).unwrap_or_default();
        self.push(fetch(&url).with("program", "git"));
        match ops.get(1) {
            Some(dir) => self.path_action("modify_files", dir),
            None => {
                let base = url
                    .trim_end_matches('/')
                    .rsplit(['/', ':'])
                    .next()
                    .unwrap_or("repo")
                    .trim_end_matches(".git")
                    .to_string();
                self.path_action(
                    "modify_files",
                    &Word {
                        text: base,
                        dynamic: false,
                        quoted: true,
                        ..Default::default()
                    },
                );
            }
        }
    }
}

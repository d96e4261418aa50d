//! The bubblewrap command line of a confined worker, as a pure function of a [`Plan`]: which
//! namespaces, which paths are hidden, which are bound back read-only or read-write.
//!
//! Mount order is what makes the wall: bubblewrap applies its mounts in the order given, a
//! later one on top of an earlier one. The system is bound read-only first, the places that
//! hold secrets or other runs' work are covered with empty tmpfs, and only then are the
//! worker's own paths bound back, shallowest first, so a path bound deep inside a hidden
//! folder (the worktree inside the workspace) shows through while its siblings do not.
//!
//! What it must never do: bind anything read-write that the plan does not name, or let a
//! path in the plan become a bubblewrap option (every path is one argument of its own).

use std::path::{Path, PathBuf};

/// What a confined worker sees and shares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Covered with an empty tmpfs (after the read-only system).
    pub hidden: Vec<PathBuf>,
    /// Bound read-only at the same path (on top of the hidden ones).
    pub read_only: Vec<PathBuf>,
    /// Bound read-write at the same path.
    pub read_write: Vec<PathBuf>,
    /// Files of executor's inside a read-write place (the config and the database, when
    /// the repository is the workspace and worktrees are off): covered with an empty,
    /// read-only `/dev/null` after the binds.
    pub masked_files: Vec<PathBuf>,
    /// A network namespace of its own (no interface but loopback).
    pub own_network: bool,
    /// The worker's working directory.
    pub cwd: PathBuf,
    /// The size of the worker's private `/tmp` tmpfs in bytes (`None`: the kernel's
    /// default, half the memory).
    pub tmp_size: Option<u64>,
}

/// The hidden places that need a tmpfs of their own: one inside another hidden place is
/// covered already, unless a bind re-exposes the place around it. Each mount costs the
/// worker's start a fraction of a millisecond.
pub fn needed_covers(
    hidden: Vec<PathBuf>,
    read_only: &[PathBuf],
    read_write: &[PathBuf],
) -> Vec<PathBuf> {
    let binds: Vec<&PathBuf> = read_only.iter().chain(read_write).collect();
    let covered = |p: &PathBuf| {
        hidden.iter().any(|outer| {
            outer != p
                && p.starts_with(outer)
                // A bind at the outer place itself re-exposes it as well: the place
                // is then bound, not hidden (see `ordered`).
                && !binds
                    .iter()
                    .any(|b| b.starts_with(outer) && p.starts_with(b))
        })
    };
    let mut kept: Vec<PathBuf> = hidden.iter().filter(|p| !covered(p)).cloned().collect();
    kept.sort();
    kept.dedup();
    kept
}

/// How one path is mounted; the order of the variants is the order at equal depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Mount {
    Hide,
    ReadOnly,
    ReadWrite,
    Mask,
}

/// `bwrap` and its options up to and including `--`; the worker's argv follows.
pub fn argv(bwrap: &Path, plan: &Plan) -> Vec<String> {
    let mut out: Vec<String> = vec![bwrap.to_string_lossy().into_owned()];
    let flag = |out: &mut Vec<String>, f: &str| out.push(f.to_string());
    // No `--new-session`: the supervisor takes the worker's controlling terminal away
    // between fork and exec (`TIOCNOTTY`), which is what a new session is for here, and a
    // new session costs every start a scheduler autogroup.
    for f in [
        "--die-with-parent",
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ] {
        flag(&mut out, f);
    }
    if plan.own_network {
        flag(&mut out, "--unshare-net");
    }
    for f in ["--hostname", "executor-worker"] {
        flag(&mut out, f);
    }
    for f in ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"] {
        flag(&mut out, f);
    }
    for (path, mount) in ordered(plan) {
        let p = path.to_string_lossy().into_owned();
        match mount {
            Mount::Hide => {
                if let (Some(size), true) = (plan.tmp_size, path == Path::new("/tmp")) {
                    out.extend(["--size".to_string(), size.to_string()]);
                }
                out.extend(["--tmpfs".to_string(), p]);
            }
            Mount::ReadOnly => out.extend(["--ro-bind".to_string(), p.clone(), p]),
            Mount::ReadWrite => out.extend(["--bind".to_string(), p.clone(), p]),
            Mount::Mask => out.extend(["--ro-bind".to_string(), "/dev/null".to_string(), p]),
        }
    }
    out.extend([
        "--chdir".to_string(),
        plan.cwd.to_string_lossy().into_owned(),
        "--".to_string(),
    ]);
    out
}

/// Every mount of the plan, shallowest first; at equal depth hiding comes before binding,
/// and a path named twice keeps its strongest mount only (read-write over read-only).
fn ordered(plan: &Plan) -> Vec<(PathBuf, Mount)> {
    let mut all: Vec<(PathBuf, Mount)> = Vec::new();
    let named = plan
        .hidden
        .iter()
        .map(|p| (p, Mount::Hide))
        .chain(plan.read_only.iter().map(|p| (p, Mount::ReadOnly)))
        .chain(plan.read_write.iter().map(|p| (p, Mount::ReadWrite)))
        .chain(plan.masked_files.iter().map(|p| (p, Mount::Mask)));
    for (path, mount) in named {
        // `/` itself is the read-only system; hiding it would hide everything.
        if path.parent().is_none() {
            continue;
        }
        match all.iter_mut().find(|(p, _)| p == path) {
            Some(existing) => existing.1 = existing.1.max(mount),
            None => all.push((path.clone(), mount)),
        }
    }
    all.sort_by(|(a, ma), (b, mb)| {
        a.components()
            .count()
            .cmp(&b.components().count())
            .then(ma.cmp(mb))
            .then(a.cmp(b))
    });
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            hidden: vec!["/home".into(), "/home/o/ws".into(), "/tmp".into()],
            read_only: vec!["/home/o/repo/.git".into(), "/home/o/bin".into()],
            read_write: vec!["/home/o/ws/worktrees/run-1".into()],
            own_network: true,
            cwd: "/home/o/ws/worktrees/run-1".into(),
            masked_files: Vec::new(),
            tmp_size: None,
        }
    }

    #[test]
    fn the_private_tmp_is_sized_by_the_disk_budget_and_no_other_cover_is() {
        let mut p = plan();
        p.tmp_size = Some(24 << 20);
        let argv = argv(Path::new("/usr/bin/bwrap"), &p);
        position(&argv, &["--size", "25165824", "--tmpfs", "/tmp"]);
        assert_eq!(argv.iter().filter(|a| *a == "--size").count(), 1);
    }

    fn position(argv: &[String], window: &[&str]) -> usize {
        argv.windows(window.len())
            .position(|w| w.iter().zip(window).all(|(a, b)| a == b))
            .unwrap_or_else(|| panic!("{window:?} not in {argv:?}"))
    }

    #[test]
    fn every_namespace_is_new_and_the_wall_dies_with_its_parent() {
        let argv = argv(Path::new("/usr/bin/bwrap"), &plan());
        for f in [
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--unshare-net",
            "--die-with-parent",
        ] {
            assert!(argv.iter().any(|a| a == f), "{f} missing from {argv:?}");
        }
        assert!(!argv.iter().any(|a| a == "--new-session"), "{argv:?}");
        assert_eq!(argv.last().map(String::as_str), Some("--"));
        let host = Plan {
            own_network: false,
            ..plan()
        };
        assert!(!super::argv(Path::new("bwrap"), &host)
            .iter()
            .any(|a| a == "--unshare-net"));
    }

    #[test]
    fn the_system_is_read_only_then_hidden_then_the_worker_paths_show_through() {
        let argv = argv(Path::new("bwrap"), &plan());
        let root = position(&argv, &["--ro-bind", "/", "/"]);
        let home = position(&argv, &["--tmpfs", "/home"]);
        let ws = position(&argv, &["--tmpfs", "/home/o/ws"]);
        let git = position(
            &argv,
            &["--ro-bind", "/home/o/repo/.git", "/home/o/repo/.git"],
        );
        let wt = position(
            &argv,
            &[
                "--bind",
                "/home/o/ws/worktrees/run-1",
                "/home/o/ws/worktrees/run-1",
            ],
        );
        assert!(root < home && home < ws && ws < wt && home < git);
        position(&argv, &["--chdir", "/home/o/ws/worktrees/run-1", "--"]);
    }

    #[test]
    fn a_path_named_twice_keeps_its_strongest_mount_and_root_is_never_hidden() {
        let p = Plan {
            hidden: vec!["/".into(), "/data".into()],
            read_only: vec!["/data".into()],
            read_write: vec!["/data".into()],
            own_network: false,
            cwd: "/data".into(),
            masked_files: Vec::new(),
            tmp_size: None,
        };
        assert_eq!(
            ordered(&p),
            vec![(PathBuf::from("/data"), Mount::ReadWrite)]
        );
    }

    #[test]
    fn a_hidden_place_inside_another_needs_no_tmpfs_unless_a_bind_reexposes_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().to_path_buf();
        let ws = root.join("ws");
        for d in [ws.join("worktrees/run-1"), ws.join("logs")] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(root.join("secret"), "s").expect("write");
        std::fs::write(ws.join("logs/run.md"), "log").expect("write");
        let kept = needed_covers(
            vec![root.clone(), ws.clone(), ws.join("logs")],
            &[],
            &[ws.join("worktrees/run-1")],
        );
        assert_eq!(kept, vec![root.clone()]);
        // A read-write bind of the workspace shows its logs again: they need their own.
        let kept = needed_covers(
            vec![root.clone(), ws.join("logs")],
            &[],
            std::slice::from_ref(&ws),
        );
        assert_eq!(kept, vec![root.clone(), ws.join("logs")]);
        // So does one at the hidden place itself (the repository is the workspace and
        // the worker runs in it): its logs stay covered.
        let kept = needed_covers(
            vec![ws.clone(), ws.join("logs")],
            &[],
            std::slice::from_ref(&ws),
        );
        assert_eq!(kept, vec![ws.clone(), ws.join("logs")]);
    }

    #[test]
    fn executors_files_inside_a_read_write_place_are_covered_after_it() {
        let p = Plan {
            hidden: vec!["/w/logs".into()],
            read_write: vec!["/w".into()],
            masked_files: vec!["/w/executor.db".into(), "/w/executor.toml".into()],
            cwd: "/w".into(),
            ..Plan::default()
        };
        let argv = argv(Path::new("bwrap"), &p);
        let bound = position(&argv, &["--bind", "/w", "/w"]);
        let logs = position(&argv, &["--tmpfs", "/w/logs"]);
        let db = position(&argv, &["--ro-bind", "/dev/null", "/w/executor.db"]);
        let config = position(&argv, &["--ro-bind", "/dev/null", "/w/executor.toml"]);
        assert!(bound < logs && bound < db && bound < config, "{argv:?}");
    }

    #[test]
    fn odd_paths_stay_single_arguments() {
        let p = Plan {
            read_write: vec!["/w/--bind x".into()],
            cwd: "/w/--bind x".into(),
            ..Plan::default()
        };
        let argv = argv(Path::new("bwrap"), &p);
        position(&argv, &["--bind", "/w/--bind x", "/w/--bind x"]);
    }
}

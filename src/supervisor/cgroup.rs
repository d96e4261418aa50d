//! Cgroups for workers: the kernel's own caps on a worker's processes (`pids.max`, from
//! `[sandbox] max_processes`) and memory (`memory.max`, from `[sandbox] max_memory`). They
//! hold for every owner, root included, where `RLIMIT_NPROC` does not (the kernel never
//! applies it to root). Each worker gets a cgroup of its own; the supervisor moves the
//! worker into it between fork and exec, so every process the worker starts is counted,
//! and empties and removes it when the worker is gone.
//!
//! Theory of operation. [`facts`] reads, without changing anything, where this process
//! sits in the cgroup trees, and [`decide`] (pure) says for one controller whether worker
//! cgroups can be made in the v2 tree:
//! - its own cgroup already hands the controller to its children (listed in
//!   `cgroup.subtree_control`) and is writable: workers' cgroups go under it;
//! - its own cgroup has the controller (`cgroup.controllers`), is writable, and holds no
//!   other process (a delegated cgroup, systemd's `Delegate=yes`): the runner first moves
//!   itself into a leaf of its own ([`RUNNER_LEAF`]), since cgroup v2 lets a cgroup hand a
//!   controller down only when it holds no process itself, then enables the controller;
//! - it sits in that leaf already (an earlier executor made it): workers go beside it;
//! - otherwise that controller is not to be had in v2, and the reason is what `doctor` and
//!   `status` show (cgroup v1 only, controller not delegated, not writable, other processes
//!   there).
//!
//! The process cap also works on a cgroup v1 `pids` hierarchy (hybrid hosts, older
//! distributions, containers run as root): workers' cgroups go under this process's own
//! cgroup there when it is writable ([`v1_pids_base`]). Memory is limited on v2 only.
//!
//! What it must never do: change a cgroup while only surveying (`doctor` and `status`
//! survey), move a process other than executor's own and its workers, kill a process that
//! is not in a worker's cgroup, or report a cap that does not hold.

use std::path::{Path, PathBuf};

/// The leaf the runner moves itself into before it hands controllers down.
pub const RUNNER_LEAF: &str = "executor-runner";
/// How the cgroups of workers are named: `executor-worker-PID-N`.
pub const WORKER_PREFIX: &str = "executor-worker-";

/// What was read of this process's place in the cgroup tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// Its cgroup v2 folder (the cgroup2 mount joined with `/proc/self/cgroup`'s `0::` path).
    pub own: Option<PathBuf>,
    /// Where a cgroup v1 hierarchy holds the memory controller, if one does.
    pub v1_memory: Option<PathBuf>,
    /// This process's cgroup in a v1 `pids` hierarchy, if one is mounted.
    pub v1_pids: Option<PathBuf>,
    /// Whether this user may make cgroups in `v1_pids` and move processes into them.
    pub v1_pids_writable: bool,
    /// `cgroup.controllers` and `cgroup.subtree_control` of `own`.
    pub controllers: Vec<String>,
    pub subtree_control: Vec<String>,
    /// Whether this user may make cgroups in `own` and move processes into them.
    pub writable: bool,
    /// The processes in `own` (`cgroup.procs`).
    pub procs: Vec<u32>,
    /// The same, of `own`'s parent, for the runner's leaf.
    pub parent_subtree_control: Vec<String>,
    pub parent_writable: bool,
    /// This process.
    pub pid: u32,
}

/// Where workers' cgroups can go, or why nowhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Under `base`, as it is.
    Ready {
        base: PathBuf,
    },
    /// Under `base`, once the runner moved itself into `base/RUNNER_LEAF` and enabled the
    /// controller in `base/cgroup.subtree_control`.
    Enable {
        base: PathBuf,
    },
    Unavailable {
        why: String,
    },
}

fn has(list: &[String], controller: &str) -> bool {
    list.iter().any(|c| c == controller)
}

/// Decides from `facts` alone where workers' cgroups with `controller` (`memory`, `pids`)
/// can go in the v2 tree.
pub fn decide(facts: &Facts, controller: &str) -> Decision {
    let v1 = match controller {
        "memory" => facts.v1_memory.as_ref().map(|p| {
            format!(
                " (the memory controller is on cgroup v1, {}, which executor does not use for memory)",
                p.display()
            )
        }),
        _ => None,
    }
    .unwrap_or_default();
    let has_it = |list: &[String]| has(list, controller);
    let Some(own) = &facts.own else {
        return Decision::Unavailable {
            why: format!("this process is in no cgroup v2 hierarchy{v1}"),
        };
    };
    let leaf = own.file_name().is_some_and(|n| n == RUNNER_LEAF);
    if leaf && has_it(&facts.parent_subtree_control) && facts.parent_writable {
        if let Some(parent) = own.parent() {
            return Decision::Ready {
                base: parent.to_path_buf(),
            };
        }
    }
    if has_it(&facts.subtree_control) {
        return if facts.writable {
            Decision::Ready { base: own.clone() }
        } else {
            Decision::Unavailable {
                why: format!("{} is not writable by this user", own.display()),
            }
        };
    }
    if !has_it(&facts.controllers) {
        return Decision::Unavailable {
            why: format!(
                "the {controller} controller is not delegated to {} (its cgroup.controllers: {}){v1}",
                own.display(),
                if facts.controllers.is_empty() {
                    "none".to_string()
                } else {
                    facts.controllers.join(" ")
                }
            ),
        };
    }
    if !facts.writable {
        return Decision::Unavailable {
            why: format!(
                "{} is not writable by this user (run executor in a delegated cgroup: a systemd unit with Delegate=yes)",
                own.display()
            ),
        };
    }
    let others = facts.procs.iter().filter(|&&p| p != facts.pid).count();
    if others > 0 {
        return Decision::Unavailable {
            why: format!(
                "{} holds {others} other process(es), so it cannot hand the {controller} controller down (cgroup v2 allows that only to a cgroup without processes); run executor in a cgroup of its own (systemd: Delegate=yes)",
                own.display()
            ),
        };
    }
    Decision::Enable { base: own.clone() }
}

/// The `0::PATH` line of `/proc/PID/cgroup` text.
fn v2_path(proc_cgroup: &str) -> Option<&str> {
    proc_cgroup.lines().find_map(|l| l.strip_prefix("0::"))
}

/// The path of the `N:CONTROLLERS:PATH` line of `/proc/PID/cgroup` text whose controller
/// list holds `controller` (a v1 hierarchy).
fn v1_path<'t>(proc_cgroup: &'t str, controller: &str) -> Option<&'t str> {
    proc_cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then_some(path)
    })
}

/// `mount` joined with a cgroup path (`/` is the mount itself).
fn under(mount: PathBuf, path: &str) -> PathBuf {
    match path.trim_start_matches('/') {
        "" => mount,
        rel => mount.join(rel),
    }
}

/// The mount point of the filesystem of type `fstype` in `/proc/PID/mountinfo` text whose
/// super options contain `option` (any, when empty).
fn mount_of(mountinfo: &str, fstype: &str, option: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mount = left.split_whitespace().nth(4)?;
        let mut right = right.split_whitespace();
        let (kind, _source, supers) = (right.next()?, right.next()?, right.next().unwrap_or(""));
        (kind == fstype && (option.is_empty() || supers.split(',').any(|o| o == option)))
            .then(|| PathBuf::from(mount))
    })
}

fn words(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

fn writable(dir: &Path) -> bool {
    use nix::unistd::{access, AccessFlags};
    access(dir, AccessFlags::W_OK | AccessFlags::X_OK).is_ok()
        && access(&dir.join("cgroup.procs"), AccessFlags::W_OK).is_ok()
}

/// Reads the facts from `/proc/self/cgroup` and `/proc/self/mountinfo` text (passed in, so
/// a test can point them at a fake tree) and the cgroup files they lead to.
pub fn facts(proc_cgroup: &str, mountinfo: &str, pid: u32) -> Facts {
    let own = match (v2_path(proc_cgroup), mount_of(mountinfo, "cgroup2", "")) {
        (Some(path), Some(mount)) => Some(under(mount, path)),
        _ => None,
    };
    let v1_pids = match (
        v1_path(proc_cgroup, "pids"),
        mount_of(mountinfo, "cgroup", "pids"),
    ) {
        (Some(path), Some(mount)) => Some(under(mount, path)),
        _ => None,
    };
    let mut f = Facts {
        v1_memory: mount_of(mountinfo, "cgroup", "memory"),
        v1_pids_writable: v1_pids.as_deref().is_some_and(writable),
        v1_pids,
        pid,
        ..Facts::default()
    };
    if let Some(own) = &own {
        f.controllers = words(&own.join("cgroup.controllers"));
        f.subtree_control = words(&own.join("cgroup.subtree_control"));
        f.writable = writable(own);
        f.procs = std::fs::read_to_string(own.join("cgroup.procs"))
            .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default();
        if let Some(parent) = own.parent() {
            f.parent_subtree_control = words(&parent.join("cgroup.subtree_control"));
            f.parent_writable = writable(parent);
        }
    }
    f.own = own;
    f
}

/// The facts of this process, changing nothing (`None` off Linux).
pub fn own_facts() -> Option<Facts> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    Some(facts(
        &read("/proc/self/cgroup"),
        &read("/proc/self/mountinfo"),
        std::process::id(),
    ))
}

/// The v2 decision for `controller` in this process, changing nothing.
pub fn survey(controller: &str) -> Decision {
    match own_facts() {
        Some(f) => decide(&f, controller),
        None => Decision::Unavailable {
            why: "cgroups are Linux only".to_string(),
        },
    }
}

/// Where workers' `pids` cgroups can go in a v1 hierarchy: this process's own cgroup
/// there, when it is writable (v1 has no rule against a cgroup holding processes and
/// children both, so nothing moves); or why not.
pub fn v1_pids_base(facts: &Facts) -> Result<PathBuf, String> {
    match &facts.v1_pids {
        None => Err("no cgroup v1 pids hierarchy is mounted".to_string()),
        Some(dir) if facts.v1_pids_writable => Ok(dir.clone()),
        Some(dir) => Err(format!(
            "the cgroup v1 pids hierarchy ({}) is not writable by this user",
            dir.display()
        )),
    }
}

/// Removes the empty workers' cgroups an earlier runner left under `base`.
pub fn sweep(base: &Path) {
    if let Ok(entries) = std::fs::read_dir(base) {
        for entry in entries.flatten() {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(WORKER_PREFIX)
            {
                // Only an empty cgroup can be removed: a live worker's stays.
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }
}

/// Carries out `decision` for `controllers`: for [`Decision::Enable`], moves this process
/// into its leaf and hands each controller down. Returns the base for workers' cgroups,
/// after removing the empty ones an earlier runner left.
pub fn establish(decision: &Decision, controllers: &[&str]) -> Result<PathBuf, String> {
    let base = match decision {
        Decision::Unavailable { why } => return Err(why.clone()),
        Decision::Ready { base } => base.clone(),
        Decision::Enable { base } => {
            let leaf = base.join(RUNNER_LEAF);
            let step = |what: &str, r: std::io::Result<()>| {
                r.map_err(|e| format!("cannot {what} in {}: {e}", base.display()))
            };
            if !leaf.is_dir() {
                step("make the runner's leaf cgroup", std::fs::create_dir(&leaf))?;
            }
            step(
                "move the runner into its leaf cgroup",
                std::fs::write(leaf.join("cgroup.procs"), "0"),
            )?;
            for controller in controllers {
                step(
                    &format!("enable the {controller} controller"),
                    std::fs::write(
                        base.join("cgroup.subtree_control"),
                        format!("+{controller}"),
                    ),
                )?;
            }
            base.clone()
        }
    };
    sweep(&base);
    Ok(base)
}

/// What one worker's cgroup holds it to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caps {
    /// `memory.max`, in bytes (and no swap beyond).
    pub memory: Option<u64>,
    /// `pids.max`: processes and threads at most.
    pub pids: Option<u64>,
}

/// Makes a worker's cgroup under `base` with `caps` written into it; on any failure the
/// folder is removed again and nothing is left behind.
pub fn worker(base: &Path, caps: Caps) -> std::io::Result<PathBuf> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // The name is this process's id and a count; a folder of that name can be left by a
    // process that died with the same id (ids are reused). An empty one is removed (a cgroup
    // with a live process in it cannot be); one that stays is passed over for the next count.
    let mut tries = 0;
    let dir = loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("{WORKER_PREFIX}{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => break dir,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 16 => {
                tries += 1;
                if std::fs::remove_dir(&dir).is_ok() && std::fs::create_dir(&dir).is_ok() {
                    break dir;
                }
            }
            Err(e) => return Err(e),
        }
    };
    let written = (|| {
        if let Some(pids) = caps.pids {
            std::fs::write(dir.join("pids.max"), pids.to_string())?;
        }
        if let Some(bytes) = caps.memory {
            std::fs::write(dir.join("memory.max"), bytes.to_string())?;
            // Without swap accounting the file is missing; memory.max holds all the same.
            let _ = std::fs::write(dir.join("memory.swap.max"), "0");
        }
        std::io::Result::Ok(())
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_dir(&dir);
        return Err(e);
    }
    Ok(dir)
}

/// How many times a fork in the cgroup at `dir` failed at its `pids.max` (the `max` line
/// of `pids.events`, on v1 and v2 alike); 0 where the file cannot be read.
pub fn cap_hits(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("pids.events"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("max "))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The processes in the cgroup at `dir` (`cgroup.procs`; host pids).
fn procs(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Empties a worker's cgroup and removes it: whatever is left is killed (`cgroup.kill` on
/// v2; on v1, which has none, every process listed in `cgroup.procs`, again until none is
/// left, since a process can fork while its siblings die), then the folder is removed,
/// waiting a little for the kernel to let go.
pub async fn remove(dir: &Path) {
    let _ = std::fs::write(dir.join("cgroup.kill"), "1");
    for _ in 0..100 {
        for pid in procs(dir) {
            if pid > 1 {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    }
    tracing::warn!(cgroup = %dir.display(), "a worker's cgroup is still busy; the next runner start removes it");
}

/// The machine's memory, from `/proc/meminfo`.
pub fn total_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake cgroup2 mount in a tempdir: `own` with the given files, its parent too.
    struct Tree {
        _dir: tempfile::TempDir,
        mount: PathBuf,
    }

    impl Tree {
        fn new() -> Tree {
            let dir = tempfile::tempdir().expect("tmp");
            let mount = dir.path().join("cgroup");
            Tree { _dir: dir, mount }
        }

        fn cgroup(&self, path: &str, controllers: &str, subtree: &str, procs: &str) -> PathBuf {
            let dir = self.mount.join(path.trim_start_matches('/'));
            std::fs::create_dir_all(&dir).expect("mkdir");
            for (file, text) in [
                ("cgroup.controllers", controllers),
                ("cgroup.subtree_control", subtree),
                ("cgroup.procs", procs),
            ] {
                std::fs::write(dir.join(file), text).expect("write");
            }
            dir
        }

        fn mountinfo(&self, v1_memory: bool) -> String {
            let mut text = format!(
                "30 24 0:26 / {} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
                self.mount.display()
            );
            if v1_memory {
                text.push_str(
                    "35 25 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n",
                );
            }
            text
        }
    }

    const SERVICE: &str = "/user.slice/user@1000.service/app.slice/executor.service";

    #[test]
    fn a_delegated_cgroup_holding_only_executor_is_enabled() {
        let tree = Tree::new();
        tree.cgroup(
            "/user.slice/user@1000.service/app.slice",
            "cpu memory pids",
            "memory pids",
            "",
        );
        let own = tree.cgroup(SERVICE, "cpu memory pids", "", "4242\n");
        let f = facts(&format!("0::{SERVICE}\n"), &tree.mountinfo(false), 4242);
        assert_eq!(f.own.as_deref(), Some(own.as_path()));
        assert_eq!(f.procs, [4242]);
        assert_eq!(decide(&f, "memory"), Decision::Enable { base: own.clone() });
        // Another process there: the controller cannot be handed down.
        let f = facts(&format!("0::{SERVICE}\n"), &tree.mountinfo(false), 7);
        assert!(
            matches!(decide(&f, "memory"), Decision::Unavailable { why } if why.contains("1 other process")),
        );
    }

    #[test]
    fn a_cgroup_that_hands_memory_down_already_is_ready() {
        let tree = Tree::new();
        let own = tree.cgroup("/", "cpu memory", "cpu memory", "1\n2\n");
        let f = facts("0::/\n", &tree.mountinfo(false), 2);
        assert_eq!(decide(&f, "memory"), Decision::Ready { base: own });
    }

    #[test]
    fn a_runner_in_its_leaf_puts_workers_beside_it() {
        let tree = Tree::new();
        let base = tree.cgroup(SERVICE, "memory pids", "memory", "");
        tree.cgroup(
            &format!("{SERVICE}/{RUNNER_LEAF}"),
            "memory",
            "",
            "4242\n9\n",
        );
        let f = facts(
            &format!("0::{SERVICE}/{RUNNER_LEAF}\n"),
            &tree.mountinfo(false),
            9,
        );
        assert_eq!(decide(&f, "memory"), Decision::Ready { base });
    }

    #[test]
    fn cgroup_v1_only_and_an_undelegated_controller_say_why() {
        let tree = Tree::new();
        // This machine's shape: a hybrid mount whose v2 part has no controller, memory on v1.
        tree.cgroup("/", "", "", "1\n");
        let f = facts("4:memory:/process_api/x\n0::/\n", &tree.mountinfo(true), 1);
        let Decision::Unavailable { why } = decide(&f, "memory") else {
            panic!("no controller, no limit");
        };
        assert!(why.contains("not delegated"), "{why}");
        assert!(why.contains("cgroup v1, /sys/fs/cgroup/memory"), "{why}");
        // No v2 hierarchy at all.
        let v1_only = "35 25 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let Decision::Unavailable { why } = decide(&facts("4:memory:/x\n", v1_only, 1), "memory")
        else {
            panic!("no v2, no limit");
        };
        assert!(
            why.contains("no cgroup v2") && why.contains("cgroup v1"),
            "{why}"
        );
    }

    #[test]
    fn an_unwritable_cgroup_is_not_used() {
        let f = Facts {
            own: Some(PathBuf::from("/sys/fs/cgroup/user.slice")),
            controllers: vec!["memory".into()],
            subtree_control: vec!["memory".into()],
            writable: false,
            pid: 1,
            ..Facts::default()
        };
        assert!(
            matches!(decide(&f, "memory"), Decision::Unavailable { why } if why.contains("not writable"))
        );
        let f = Facts {
            subtree_control: Vec::new(),
            ..f
        };
        assert!(
            matches!(decide(&f, "memory"), Decision::Unavailable { why } if why.contains("Delegate=yes"))
        );
    }

    #[test]
    fn establishing_moves_the_runner_and_enables_memory_then_workers_get_their_limit() {
        // On a fake tree the kernel's files are plain files: what is written is what the
        // kernel would be asked.
        let tree = Tree::new();
        let own = tree.cgroup(SERVICE, "memory", "", "4242\n");
        std::fs::create_dir_all(own.join(RUNNER_LEAF)).expect("mkdir");
        std::fs::create_dir_all(own.join(format!("{WORKER_PREFIX}1-0"))).expect("stale");
        let base =
            establish(&Decision::Enable { base: own.clone() }, &["memory"]).expect("established");
        assert_eq!(base, own);
        assert_eq!(
            std::fs::read_to_string(own.join(RUNNER_LEAF).join("cgroup.procs")).expect("procs"),
            "0"
        );
        assert_eq!(
            std::fs::read_to_string(own.join("cgroup.subtree_control")).expect("control"),
            "+memory"
        );
        assert!(
            !own.join(format!("{WORKER_PREFIX}1-0")).exists(),
            "a stale empty cgroup is removed"
        );
        let worker = worker(
            &base,
            Caps {
                memory: Some(512 << 20),
                pids: Some(64),
            },
        )
        .expect("worker cgroup");
        assert_eq!(
            std::fs::read_to_string(worker.join("pids.max")).expect("pids"),
            "64"
        );
        assert_eq!(
            std::fs::read_to_string(worker.join("memory.max")).expect("max"),
            (512u64 << 20).to_string()
        );
        assert!(establish(&Decision::Unavailable { why: "no".into() }, &["memory"]).is_err());
    }

    #[test]
    fn a_v1_pids_hierarchy_is_found_for_the_process_cap() {
        let dir = tempfile::tempdir().expect("tmp");
        let pids = dir.path().join("pids");
        std::fs::create_dir_all(pids.join("ci/job")).expect("mkdir");
        std::fs::write(pids.join("ci/job/cgroup.procs"), "").expect("procs");
        let mountinfo = format!(
            "40 25 0:35 / {} rw,relatime - cgroup cgroup rw,pids\n",
            pids.display()
        );
        let f = facts("8:pids:/ci/job\n0::/\n", &mountinfo, 1);
        assert_eq!(f.v1_pids.as_deref(), Some(pids.join("ci/job").as_path()));
        assert_eq!(v1_pids_base(&f), Ok(pids.join("ci/job")));
        let not_writable = Facts {
            v1_pids_writable: false,
            ..f
        };
        assert!(v1_pids_base(&not_writable).is_err_and(|why| why.contains("not writable")));
        let none = facts("0::/\n", "", 1);
        assert!(v1_pids_base(&none).is_err_and(|why| why.contains("no cgroup v1 pids")));
        assert!(matches!(
            decide(&none, "pids"),
            Decision::Unavailable { .. }
        ));
    }

    #[test]
    fn cap_hits_are_read_from_pids_events() {
        let dir = tempfile::tempdir().expect("tmp");
        assert_eq!(cap_hits(dir.path()), 0, "no file, no hit");
        std::fs::write(dir.path().join("pids.events"), "max 17\n").expect("events");
        assert_eq!(cap_hits(dir.path()), 17);
    }
}

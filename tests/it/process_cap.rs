//! `[sandbox] max_processes` holds for every owner: a worker that tries to start twice its
//! cap of sleeping processes starts at most the cap, is stopped with the cap named in its
//! run, and leaves nothing behind; with the wall and without, as root (where the kernel
//! never applies `RLIMIT_NPROC`) and as an unprivileged user. Processes are counted from
//! outside by a marker in their command line, so other tests running meanwhile do not
//! count. Where this host offers no cgroup to cap a worker with, the tests say so and skip;
//! in CI (root, a writable cgroup hierarchy) they run.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{confined, Workspace};

/// The cap the tests set: the least the config allows.
const CAP: usize = 16;

/// A worker script (for bash, which waits and tries again when a fork is refused, so the
/// processes it started stay to be counted): in a worktree whose path holds `STORM` it
/// starts `tries` sleeping processes marked with `marker`, then waits; elsewhere it
/// finishes at once.
fn storm_script(marker: &str, tries: usize) -> String {
    format!(
        r#"case "$PWD" in
*STORM*)
  i=0
  while [ $i -lt {tries} ]; do
    sleep {marker} 2>/dev/null &
    i=$((i+1))
  done
  wait ;;
*) sleep 1; echo ordinary > ORDINARY.txt; echo "[DONE:implemented] an ordinary run" ;;
esac
"#
    )
}

/// A `sleep` operand no other test uses: seconds with a fraction unique to the test.
fn marker(n: u32) -> String {
    format!("600.{}{n:03}", std::process::id() % 100_000)
}

/// The live `sleep MARKER` processes: the shell's own command line holds the marker too,
/// and a zombie's is empty.
fn count(marker: &str) -> usize {
    let sleep = format!("sleep {marker} ");
    crate::confinement::processes_with(marker)
        .iter()
        .filter(|cmdline| **cmdline == sleep)
        .count()
}

/// Counts the marked processes every few milliseconds until dropped; the most seen at once.
struct Watcher {
    most: Arc<AtomicUsize>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watcher {
    fn start(marker: &str) -> Watcher {
        let most = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let (m, d, marker) = (most.clone(), done.clone(), marker.to_string());
        let thread = std::thread::spawn(move || {
            while !d.load(Ordering::Relaxed) {
                m.fetch_max(count(&marker), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Watcher {
            most,
            done,
            thread: Some(thread),
        }
    }

    fn most(mut self) -> usize {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.most.load(Ordering::Relaxed)
    }
}

/// A workspace whose worker is the storm script, capped at [`CAP`] and trying twice as
/// many, one attempt per run. A storm the cap fails to stop ends at the hard timeout, so a
/// broken cap fails the test (too many processes counted) rather than hang it.
fn storm_workspace(marker: &str, extra_runner: &str) -> Workspace {
    storm_workspace_sized(marker, extra_runner, CAP, 2 * CAP, "20s")
}

/// The same with `cap` as `[sandbox] max_processes`, `tries` sleeping processes and the
/// worker's `hard_timeout`.
fn storm_workspace_sized(
    marker: &str,
    extra_runner: &str,
    cap: usize,
    tries: usize,
    hard_timeout: &str,
) -> Workspace {
    let ws = crate::runner::workspace(
        &["/bin/bash", "-c", &storm_script(marker, tries)],
        &[],
        &format!("max_worker_attempts = 1\nhard_timeout = \"{hard_timeout}\"\n{extra_runner}"),
    );
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!("{config}\n[sandbox]\nmax_processes = {cap}\n"));
    ws
}

fn note(ws: &Workspace, gid: &str) {
    std::fs::write(
        ws.plans().join(format!("{gid}.md")),
        format!("---\ngid: {gid}\n---\n# Task {gid}\n"),
    )
    .expect("note");
}

/// What `status --json` says holds workers to their process cap in `ws` under `mode`.
fn mechanism(ws: &Workspace, mode: Option<&str>) -> serde_json::Value {
    let mut cmd = ws.command(&["status", "--json"]);
    match mode {
        Some(mode) => cmd.env(crate::support::SANDBOX_MODE_ENV, mode),
        None => confined(&mut cmd),
    };
    let out = cmd.output().expect("status");
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    status["confinement"]["processes"].clone()
}

/// Whether this host gives workers a pids cgroup in `ws` under `mode`; `false` (with the
/// reason printed) skips. In CI, run as root on a host with a writable cgroup hierarchy,
/// it must.
fn cgroup_cap(ws: &Workspace, mode: Option<&str>) -> bool {
    let found = mechanism(ws, mode);
    if found["mechanism"] == "cgroup pids" {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none() || !nix::unistd::geteuid().is_root(),
        "CI runs as root with a writable cgroup hierarchy, so a pids cgroup must cap workers: {found}"
    );
    eprintln!("SKIPPED: no pids cgroup caps workers here: {found}");
    false
}

/// The storm's run: abandoned, its worker stopped at the cap, said in `show`.
fn assert_stopped_at_the_cap(ws: &Workspace, gid: &str) {
    let shown = ws.json(&["show", gid, "--json"]);
    let run = &shown["runs"][0];
    assert_eq!(run["state"], "abandoned", "{shown:#}");
    let text = shown.to_string();
    assert!(
        text.contains("process cap") && text.contains("max_processes"),
        "the cap is not named in the run: {shown:#}"
    );
    let out = ws.run(&["show", gid]);
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(human.contains("process cap"), "{human}");
}

/// Runs the storm in `ws` with `cmd` prepared by the caller; returns the most marked
/// processes seen at once, after checking none is left.
fn storm(marker: &str, mut cmd: std::process::Command) -> (usize, std::process::Output) {
    let watcher = Watcher::start(marker);
    let out = cmd.output().expect("run executor");
    let most = watcher.most();
    // The worker's cgroup is emptied when it is gone: nothing of the storm outlives it.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(count(marker), 0, "processes of the storm outlived its run");
    (most, out)
}

fn assert_held(most: usize, out: &std::process::Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(most >= 1, "the storm started nothing: {stderr}");
    assert!(
        most <= CAP,
        "{most} processes started under a cap of {CAP}: {stderr}"
    );
}

#[test]
fn a_confined_worker_starts_no_more_processes_than_its_cap() {
    if !crate::confinement::wall_works() {
        return;
    }
    let marker = marker(1);
    let ws = storm_workspace(&marker, "");
    if !cgroup_cap(&ws, None) {
        return;
    }
    note(&ws, "STORM-1");
    let mut cmd = ws.command(&["run", "--once"]);
    confined(&mut cmd);
    let (most, out) = storm(&marker, cmd);
    assert_held(most, &out);
    assert_stopped_at_the_cap(&ws, "STORM-1");
}

#[test]
fn an_unconfined_worker_starts_no_more_processes_than_its_cap() {
    let marker = marker(2);
    let ws = storm_workspace(&marker, "");
    if !cgroup_cap(&ws, Some("off")) {
        return;
    }
    note(&ws, "STORM-1");
    let (most, out) = storm(&marker, ws.command(&["run", "--once"]));
    assert_held(most, &out);
    assert_stopped_at_the_cap(&ws, "STORM-1");
}

#[test]
fn a_fork_storm_stops_at_the_cap_while_the_other_runs_finish() {
    let marker = marker(3);
    let ws = storm_workspace(&marker, "max_workers = 3\n");
    if !cgroup_cap(&ws, Some("off")) {
        return;
    }
    for gid in ["STORM-1", "N-1", "N-2"] {
        note(&ws, gid);
    }
    let (most, out) = storm(&marker, ws.command(&["run", "--once"]));
    assert_held(most, &out);
    assert_stopped_at_the_cap(&ws, "STORM-1");
    for gid in ["N-1", "N-2"] {
        let shown = ws.json(&["show", gid, "--json"]);
        assert_eq!(shown["runs"][0]["state"], "complete", "{gid}: {shown:#}");
    }
}

/// A v1 `pids` cgroup handed to `nobody` (what a delegation does), removed when dropped.
struct Delegated {
    dir: std::path::PathBuf,
}

impl Delegated {
    /// Under this process's own v1 pids cgroup, when one is mounted and writable (root).
    fn make() -> Option<Delegated> {
        let facts = executor::sandbox::cgroup::own_facts()?;
        let base = executor::sandbox::cgroup::v1_pids_base(&facts).ok()?;
        let dir = base.join(format!("executor-test-delegated-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let status = std::process::Command::new("chown")
            .args(["-R", "nobody:nogroup"])
            .arg(&dir)
            .status()
            .ok()?;
        status.success().then_some(Delegated { dir })
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        // Whatever is left there is a test's; the folder goes once it is empty.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `executor run --once` in `ws` as `nobody`, the workspace handed to it, started inside
/// `cgroup` when one is given (its `cgroup.procs`, joined before the exec).
fn as_nobody(ws: &Workspace, cgroup: Option<&Path>, mode: Option<&str>) -> std::process::Command {
    crate::support::hand_over(ws.path(), "nobody:nogroup");
    let join = cgroup
        .map(|dir| format!("echo $$ > '{}/cgroup.procs' && ", dir.display()))
        .unwrap_or_default();
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(format!(
            "{join}exec setpriv --reuid=nobody --regid=nogroup --clear-groups -- \"$@\""
        ))
        .arg("sh")
        .args([crate::support::BIN, "run", "--once"])
        .current_dir(ws.path())
        .env("HOME", ws.path())
        .env_remove("EXECUTOR_CONFIG");
    match mode {
        Some(mode) => cmd.env(crate::support::SANDBOX_MODE_ENV, mode),
        None => cmd.env_remove(crate::support::SANDBOX_MODE_ENV),
    };
    cmd
}

fn back_to_root(ws: &Workspace) {
    crate::support::hand_over(ws.path(), "root:root");
}

#[test]
fn an_unprivileged_owners_worker_is_held_to_its_cap_in_a_delegated_cgroup_walled_or_not() {
    if !nix::unistd::geteuid().is_root() {
        // Not root, the other tests here are this case already.
        eprintln!("SKIPPED: not root; the tests above run as this unprivileged user");
        return;
    }
    if !crate::confinement::wall_works() {
        return;
    }
    let Some(delegated) = Delegated::make() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root with a writable cgroup v1 pids hierarchy"
        );
        eprintln!("SKIPPED: no writable cgroup v1 pids hierarchy to delegate here");
        return;
    };
    // With the wall (the config's `auto`) and without it.
    for (n, mode) in [(4, None), (6, Some("off"))] {
        let marker = marker(n);
        let ws = storm_workspace(&marker, "");
        note(&ws, "STORM-1");
        let (most, out) = storm(&marker, as_nobody(&ws, Some(&delegated.dir), mode));
        back_to_root(&ws);
        assert_held(most, &out);
        assert_stopped_at_the_cap(&ws, "STORM-1");
    }
}

#[test]
fn an_unprivileged_owners_confined_worker_is_held_by_rlimit_without_a_cgroup() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: not root; the tests above run as this unprivileged user");
        return;
    }
    if !crate::confinement::wall_works() {
        return;
    }
    // RLIMIT_NPROC counts every process of the user, executor's own threads included, so
    // the cap here is larger than the runner's share of it.
    let marker = marker(5);
    // The storm waits for its sleeps, which fail to fork past the cap (no cgroup to stop it
    // at once); the hard timeout, kept short here, ends the run.
    let ws = storm_workspace_sized(&marker, "", 4 * CAP, 128, "3s");
    // A pids hierarchy nobody cannot write: the wall's rlimit is what holds.
    note(&ws, "STORM-1");
    let watcher = Watcher::start(&marker);
    let mut cmd = as_nobody(&ws, None, None);
    let out = cmd.output().expect("run executor");
    let most = watcher.most();
    back_to_root(&ws);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(most >= 1, "the storm started nothing: {stderr}");
    assert!(
        most <= 4 * CAP,
        "{most} processes started under an RLIMIT_NPROC of {}: {stderr}",
        4 * CAP
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(count(&marker), 0, "processes of the storm outlived its run");
}

#[test]
fn doctor_and_status_name_what_caps_a_workers_processes() {
    let ws = Workspace::init();
    let found = mechanism(&ws, None);
    let mechanism = found["mechanism"]
        .as_str()
        .expect("a mechanism")
        .to_string();
    assert!(
        ["cgroup pids", "rlimit", "none"].contains(&mechanism.as_str()),
        "{found}"
    );
    let out = confined(&mut ws.command(&["doctor", "--json"]))
        .output()
        .expect("doctor");
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let check = checks
        .as_array()
        .and_then(|c| c.iter().find(|c| c["check"] == "processes").cloned())
        .unwrap_or_else(|| panic!("no processes check in {checks}"));
    let detail = check["detail"].as_str().unwrap_or_default();
    assert!(detail.starts_with(&format!("{mechanism}: ")), "{check}");
    if mechanism == "none" {
        assert_eq!(check["level"], "warn", "{check}");
        assert!(detail.contains("Delegate=yes"), "the fix is named: {check}");
    } else {
        assert_eq!(check["level"], "ok", "{check}");
        assert_eq!(found["max"], 4096, "the shipped default: {found}");
    }
    let out = confined(&mut ws.command(&["status"]))
        .output()
        .expect("status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\nprocesses: "), "{text}");
    // Root on this host, the wall's line says which cap holds.
    if nix::unistd::geteuid().is_root() && mechanism == "cgroup pids" {
        assert!(
            text.contains("processes capped at 4096 by cgroup v"),
            "{text}"
        );
    }
}

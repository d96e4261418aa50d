//! A worker never outlives its runner's lease: two runners on one Postgres, their host
//! names different, one frozen (`SIGSTOP`) past its lease while its worker runs. The
//! frozen runner's worker must be gone before the other host starts one for the run.
//! Workers run unconfined here (the keeper holds the heartbeat in every posture; the
//! confined path is the same keeper inside the wall).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{eventually, PgSchema, Workspace};

/// The pids of the processes `/proc` lists whose folder (`/proc/PID`) passes `keep`.
pub(crate) fn pids_where(keep: impl Fn(&std::path::Path) -> bool) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            keep(&e.path()).then_some(pid)
        })
        .collect()
}

/// The pids of the live `sleep MARKER` processes (the workers' long job), from `/proc`.
pub(crate) fn sleepers(marker: &str) -> Vec<u32> {
    pids_where(|proc| {
        let Ok(cmdline) = std::fs::read(proc.join("cmdline")) else {
            return false;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let Ok(stat) = std::fs::read_to_string(proc.join("stat")) else {
            return false;
        };
        let zombie = stat
            .rsplit_once(')')
            .is_none_or(|(_, rest)| rest.trim_start().starts_with('Z'));
        text.trim_end() == format!("sleep {marker}") && !zombie
    })
}

/// A daemon of `ws`, its output in `log`, killed (and continued first) when dropped.
struct Runner(Child);

impl Runner {
    fn start(mut command: Command, log: &std::path::Path) -> Self {
        let file = std::fs::File::create(log).expect("log");
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .expect("start a daemon");
        Runner(child)
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.0.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {signal}");
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.id().to_string()])
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn workspace_on(pg: &PgSchema, repo: Option<&std::path::Path>, worker: &str) -> Workspace {
    let mut ws = crate::runner::workspace(
        &["/bin/sh", "-c", worker],
        &[],
        "lease_ttl = \"3s\"\nloop_sleep = \"200ms\"\n",
    );
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!("{config}\n[web]\nenabled = false\n"));
    if let Some(repo) = repo {
        let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
        ws.write_config(&config.replace(
            "repository = \"repo\"",
            &format!("repository = {:?}", repo.display().to_string()),
        ));
    }
    ws.env
        .push(("EXECUTOR_STORAGE_URL".to_string(), pg.url_with_schema()));
    ws
}

#[test]
fn a_frozen_runners_worker_is_gone_before_another_host_starts_one_for_its_run() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let Some(pg) = runtime.block_on(PgSchema::create("frozen_runner")) else {
        return;
    };
    let marker = format!("302.{}", std::process::id());
    let worker = format!("sleep {marker}; echo '[DONE:implemented] slept'");
    let a = workspace_on(&pg, None, &worker);
    let b = workspace_on(&pg, Some(&a.path().join("repo")), &worker);
    a.ok(&["add", "--title", "A long job", "--gid", "F-1"]);
    a.ok(&["go", "F-1"]);

    let runner_a = Runner::start(a.command(&["daemon"]), &a.path().join("daemon.log"));
    let first = eventually(Duration::from_secs(60), "runner A's worker", || {
        let pids = sleepers(&marker);
        (pids.len() == 1).then(|| pids[0])
    });
    runner_a.signal("-STOP");
    let frozen_at = Instant::now();

    // Runner B, on a host of another name (a UTS namespace of its own), starts once A's
    // lease has lapsed: it recovers the run and starts a worker for it.
    let start_b = || {
        let inner = b.command(&["daemon"]);
        let mut command = Command::new("unshare");
        command
            .args([
                "--uts",
                "sh",
                "-c",
                "hostname executor-host-b && exec \"$@\"",
                "sh",
            ])
            .arg(inner.get_program())
            .args(inner.get_args())
            .current_dir(b.path());
        for (key, value) in inner.get_envs() {
            match value {
                Some(v) => command.env(key, v),
                None => command.env_remove(key),
            };
        }
        Runner::start(command, &b.path().join("daemon.log"))
    };
    let mut runner_b = None;
    // Watch every few milliseconds: at no moment two workers of the run, and the first
    // gone before the second appears.
    let mut first_gone_at = None;
    let second = loop {
        let pids = sleepers(&marker);
        assert!(pids.len() <= 1, "two live workers of one run: {pids:?}");
        if !pids.contains(&first) && first_gone_at.is_none() {
            first_gone_at = Some(frozen_at.elapsed());
        }
        if let Some(&other) = pids.iter().find(|p| **p != first) {
            break other;
        }
        if runner_b.is_none() && frozen_at.elapsed() > Duration::from_millis(3500) {
            runner_b = Some(start_b());
        }
        assert!(
            frozen_at.elapsed() < Duration::from_secs(90),
            "host B never took the run over; its log:\n{}",
            std::fs::read_to_string(b.path().join("daemon.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let gone = first_gone_at.expect("the frozen runner's worker ended first");
    assert!(
        gone < Duration::from_secs(3),
        "the frozen runner's worker lived {gone:?}, past its 3 s lease"
    );
    assert_ne!(second, first);
    drop(runner_b);
    drop(runner_a);
    runtime.block_on(pg.drop());
}

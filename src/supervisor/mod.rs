//! The supervisor: runs one worker process and watches it until it is gone.
//!
//! Theory of operation. A worker is spawned as the leader of a new process group, with
//! stdout and stderr piped and read line by line (see [`lines`]). Every line is handed to
//! the caller, who says whether it was meaningful (the agent adapter knows: an assistant
//! message is, a keep-alive is not); meaningful lines reset the no-output watchdog. The
//! watchdog and the hard timeout are decided by [`crate::core::watchdog`]. Stopping is
//! always the same: TERM to the whole group, a grace period, then KILL to the whole group.
//! When the worker exits on its own, the rest of its group is killed too, so a grandchild
//! that kept the pipes open cannot keep the worker "running" or outlive it.
//!
//! It must never leave a process of a worker's group behind, never block on a worker's
//! output, and never hold more than a bounded part of one output line in memory.

pub mod cgroup;
pub mod disk;
pub mod group;
pub mod heartbeat;
pub mod lines;
pub mod program;
pub mod tail;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde::Serialize;
use thiserror::Error;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::core::watchdog::{self, Limits, StopReason};
use lines::Line;

/// What to run and under which limits.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The worker's whole environment: nothing is inherited, so no secret of the
    /// orchestrator reaches it unless put here.
    pub env: HashMap<String, String>,
    /// Written to the worker's stdin, which is then closed.
    pub stdin: Option<Vec<u8>>,
    pub limits: Limits,
    /// Between TERM and KILL.
    pub grace: Duration,
    /// Longest line kept; the rest of a longer line is dropped (and the line marked).
    pub max_line: usize,
    /// Limits the kernel holds the worker to (set by the wall, see `crate::sandbox`).
    pub os_limits: Option<OsLimits>,
    /// The argv starts with the worker's keeper (set by the wall): it can hold a
    /// heartbeat.
    pub kept: bool,
    /// The runner's lease beat, for a kept worker that must not outlive the lease.
    pub heartbeat: Option<Heartbeat>,
}

/// The runner's heartbeat to a worker's keeper (see `crate::sandbox::keeper`).
#[derive(Debug, Clone)]
pub struct Heartbeat {
    /// When this runner last renewed its leases; each change is a beat.
    pub renewed: tokio::sync::watch::Receiver<Instant>,
    /// How long after a renewal the keeper stops the worker if no other came.
    pub patience: Duration,
}

/// Resource limits set in the worker's process before it runs its program; everything it
/// starts inherits them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsLimits {
    /// Resource limits of the worker's process (confined workers).
    pub rlimits: Option<Rlimits>,
    /// Cgroups of the worker's own, their caps set (see [`cgroup`]): the
    /// worker enters each before it runs its program, and each is emptied and removed when
    /// the worker is gone.
    pub cgroups: Vec<PathBuf>,
    /// The one of `cgroups` whose `pids.max` caps the worker's processes: a fork refused
    /// there stops the worker ([`StopReason::ProcessCap`]).
    pub pids_cgroup: Option<PathBuf>,
    /// The worker gives up its controlling terminal (a confined worker: see
    /// [`set_os_limits`]); an unconfined one shares the owner's, as any program would.
    pub detach_terminal: bool,
    /// What the worker may write in its places (watched while it runs, see [`disk`]).
    pub disk: Option<disk::DiskBudget>,
}

/// The rlimits a confined worker runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rlimits {
    /// `RLIMIT_NPROC`: processes of the worker's user (never applied to root); `None` where
    /// a `pids` cgroup holds the worker, which counts its own processes alone.
    pub max_processes: Option<u64>,
    /// `RLIMIT_FSIZE`: the largest file it may write, in bytes.
    pub max_file_size: u64,
}

/// How often a worker's `pids.events` is read for a refused fork.
const CAP_CHECK: Duration = Duration::from_millis(250);

impl WorkerSpec {
    /// A spec with nothing but `argv`: no environment, the current folder, no limits.
    pub fn for_test(argv: Vec<String>) -> Self {
        WorkerSpec {
            argv,
            cwd: PathBuf::from("."),
            env: HashMap::new(),
            stdin: None,
            limits: Limits {
                no_output: Duration::from_secs(3600),
                hard: Duration::from_secs(3600),
            },
            grace: Duration::from_secs(1),
            max_line: 1024 * 1024,
            os_limits: None,
            kept: false,
            heartbeat: None,
        }
    }
}

/// Which pipe a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What the caller hears while the worker runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerEvent {
    /// The worker runs: its pid (also its process group) and start time, to persist.
    Started {
        pid: u32,
        start_time: Option<u64>,
    },
    Line {
        stream: Stream,
        line: Line,
    },
}

/// How a worker ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub pid: u32,
    /// The exit code, when it exited rather than died of a signal.
    pub exit_code: Option<i32>,
    /// The signal it died of.
    pub signal: Option<i32>,
    /// Set when the supervisor stopped it.
    pub stopped: Option<StopReason>,
    /// It needed KILL (it ignored TERM for the whole grace period).
    pub killed: bool,
    pub lines: u64,
    pub truncated_lines: u64,
    /// What it had written when it was stopped past its disk budget.
    pub disk_used: Option<u64>,
}

impl Outcome {
    /// Exited by itself with status 0.
    pub fn succeeded(&self) -> bool {
        self.stopped.is_none() && self.exit_code == Some(0)
    }
}

#[derive(Debug, Error)]
pub enum SupervisorError {
    #[error("the worker command is empty")]
    EmptyCommand,
    #[error("cannot start `{program}`")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot wait for worker {pid}")]
    Wait {
        pid: u32,
        #[source]
        source: std::io::Error,
    },
}

/// Whether a line counts for the no-output watchdog.
pub type Meaningful = bool;

/// How long output still in the pipes is read after the worker's group is gone.
const DRAIN: Duration = Duration::from_secs(2);

/// Runs the worker in `spec` to its end. `on_event` hears every event and says whether a
/// line was meaningful; `stop` asks for a stop (TERM, grace, KILL) from outside.
pub async fn supervise<F>(
    spec: WorkerSpec,
    mut on_event: F,
    stop: Option<oneshot::Receiver<()>>,
) -> Result<Outcome, SupervisorError>
where
    F: FnMut(WorkerEvent) -> Meaningful,
{
    let (program, mut command) = command_for(&spec)?;
    let OsLimits {
        cgroups,
        pids_cgroup,
        disk,
        ..
    } = spec.os_limits.clone().unwrap_or_default();
    let beat = give_heartbeat(&spec, &mut command, &program)?;
    let mut child = spawn_limited(&mut command, &program, spec.os_limits.as_ref()).await?;
    // The keeper holds the read end now; the runner's beats go to the write end until the
    // worker is gone (the end closes with this task, which the keeper hears as EOF).
    let _beating = beat.map(|b| b.start());
    // A pid of 0 recorded for the worker would later make recovery signal group 0: the
    // runner's own. `id()` is `None` only for a child already reaped, which this one cannot be.
    let Some(pid) = child.id() else {
        return Err(SupervisorError::Spawn {
            program: program.clone(),
            source: std::io::Error::other("the worker has no process id"),
        });
    };
    // If this future is dropped midway (a shutdown, a failed caller), the whole group goes,
    // not only its leader (which is all `kill_on_drop` reaches).
    let mut group_guard = GroupGuard { pgid: Some(pid) };
    on_event(WorkerEvent::Started {
        pid,
        start_time: group::start_time(pid),
    });

    if let (Some(input), Some(mut pipe)) = (spec.stdin.clone(), child.stdin.take()) {
        // A worker that never reads its stdin must not block us: write on the side.
        tokio::spawn(async move {
            let _ = pipe.write_all(&input).await;
        });
    }

    let (mut lines_rx, readers) = read_output(&mut child, spec.max_line);

    let started = Instant::now();
    let mut last_meaningful = started;
    let mut outcome = Outcome {
        pid,
        exit_code: None,
        signal: None,
        stopped: None,
        killed: false,
        lines: 0,
        truncated_lines: 0,
        disk_used: None,
    };
    // A stop that can never come when none was given (or its sender went away).
    let stop_requested = async move {
        let asked = match stop {
            Some(receiver) => receiver.await.is_ok(),
            None => false,
        };
        if !asked {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(stop_requested);
    let cap_hit = cap_hit(pids_cgroup.clone());
    tokio::pin!(cap_hit);
    let disk_full = disk_full(disk);
    tokio::pin!(disk_full);
    let mut hear = |outcome: &mut Outcome, stream: Stream, line: Line| -> Meaningful {
        outcome.lines += 1;
        outcome.truncated_lines += u64::from(line.truncated);
        on_event(WorkerEvent::Line { stream, line })
    };

    let status = loop {
        let now = Instant::now();
        let wait = watchdog::next_check_in(spec.limits, now - started, now - last_meaningful);
        tokio::select! {
            status = child.wait() => {
                break status.map_err(|source| SupervisorError::Wait { pid, source })?;
            }
            Some((stream, line)) = lines_rx.recv() => {
                if hear(&mut outcome, stream, line) {
                    last_meaningful = Instant::now();
                }
            }
            _ = tokio::time::sleep(wait) => {
                let now = Instant::now();
                if let Some(reason) = watchdog::check(spec.limits, now - started, now - last_meaningful) {
                    // Lines waiting to be heard were printed during the silence: the
                    // caller was not listening (its store write waited out an outage), the
                    // worker was not silent. They are heard before the silence is judged.
                    if reason == StopReason::NoOutput && !lines_rx.is_empty() {
                        continue;
                    }
                    outcome.stopped = Some(reason);
                    break terminate(&mut child, pid, spec.grace, &mut outcome).await?;
                }
            }
            () = &mut stop_requested => {
                outcome.stopped = Some(StopReason::Requested);
                break terminate(&mut child, pid, spec.grace, &mut outcome).await?;
            }
            () = &mut cap_hit => {
                outcome.stopped = Some(StopReason::ProcessCap);
                break terminate(&mut child, pid, spec.grace, &mut outcome).await?;
            }
            used = &mut disk_full => {
                outcome.stopped = Some(StopReason::DiskBudget);
                outcome.disk_used = Some(used);
                break terminate(&mut child, pid, spec.grace, &mut outcome).await?;
            }
        }
    };

    // Whatever the worker left in its group goes with it.
    let _ = group::signal_group(pid, Signal::SIGKILL);
    group_guard.pgid = None;
    let drain_until = Instant::now() + DRAIN;
    loop {
        tokio::select! {
            next = lines_rx.recv() => match next {
                Some((stream, line)) => { hear(&mut outcome, stream, line); }
                None => break,
            },
            _ = tokio::time::sleep_until(drain_until) => break,
        }
    }
    for reader in readers {
        reader.abort();
    }
    if let Some(dir) = &pids_cgroup {
        // A refused fork at the very end (after the last check) still counts.
        if outcome.stopped.is_none() && cgroup::cap_hits(dir) > 0 {
            outcome.stopped = Some(StopReason::ProcessCap);
        }
    }
    for dir in &cgroups {
        cgroup::remove(dir).await;
    }

    use std::os::unix::process::ExitStatusExt;
    outcome.exit_code = status.code();
    outcome.signal = status.signal();
    Ok(outcome)
}

/// Resolves when a fork was refused at the process cap: never ordinary work, and a worker
/// stuck at its cap would spin there until its timeout, so it is stopped at once.
async fn cap_hit(pids_cgroup: Option<PathBuf>) {
    match &pids_cgroup {
        Some(dir) => loop {
            tokio::time::sleep(CAP_CHECK).await;
            if cgroup::cap_hits(dir) > 0 {
                break;
            }
        },
        None => std::future::pending::<()>().await,
    }
}

/// Resolves, with what was written, when the worker passed its disk budget.
async fn disk_full(budget: Option<disk::DiskBudget>) -> u64 {
    match budget {
        Some(budget) => disk::exceeded(budget).await,
        None => std::future::pending::<u64>().await,
    }
}

/// The runner's heartbeat for a kept worker (see [`heartbeat`]); none for any other.
fn give_heartbeat(
    spec: &WorkerSpec,
    command: &mut Command,
    program: &str,
) -> Result<Option<heartbeat::Given>, SupervisorError> {
    match (&spec.heartbeat, spec.kept) {
        (Some(beat), true) => {
            heartbeat::give(command, beat)
                .map(Some)
                .map_err(|source| SupervisorError::Spawn {
                    program: program.to_string(),
                    source,
                })
        }
        _ => Ok(None),
    }
}

/// The worker's command as `spec` says: its argv, folder and whole environment, stdin piped
/// only when there is input, output piped, a process group of its own. Returns the program
/// too, for errors.
fn command_for(spec: &WorkerSpec) -> Result<(String, Command), SupervisorError> {
    let (program, args) = spec
        .argv
        .split_first()
        .ok_or(SupervisorError::EmptyCommand)?;
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(&spec.env)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    Ok((program.clone(), command))
}

/// Spawns `command` under `limits`; a worker that cannot start leaves no cgroup behind.
async fn spawn_limited(
    command: &mut Command,
    program: &str,
    limits: Option<&OsLimits>,
) -> Result<Child, SupervisorError> {
    if let Some(limits) = limits {
        set_os_limits(command, limits)?;
    }
    match command.spawn() {
        Ok(child) => Ok(child),
        Err(source) => {
            for dir in limits.iter().flat_map(|l| &l.cgroups) {
                cgroup::remove(dir).await;
            }
            Err(SupervisorError::Spawn {
                program: program.to_string(),
                source,
            })
        }
    }
}

/// Readers of the worker's stdout and stderr, line by line into one channel (bounded, so a
/// flood waits for the supervisor rather than filling memory).
fn read_output(
    child: &mut Child,
    max_line: usize,
) -> (
    mpsc::Receiver<(Stream, Line)>,
    Vec<tokio::task::JoinHandle<()>>,
) {
    let (lines_tx, lines_rx) = mpsc::channel::<(Stream, Line)>(1024);
    let mut readers = Vec::new();
    for (stream, pipe) in [
        (Stream::Stdout, child.stdout.take().map(either_left)),
        (Stream::Stderr, child.stderr.take().map(either_right)),
    ] {
        let Some(pipe) = pipe else { continue };
        let tx = lines_tx.clone();
        let cap = max_line;
        readers.push(tokio::spawn(async move {
            let _ = lines::read_lines(BufReader::new(pipe), cap, stream, tx).await;
        }));
    }
    drop(lines_tx);
    (lines_rx, readers)
}

/// Has the worker set `limits` on itself between fork and exec: its rlimits, its entry
/// into its cgroup (so nothing it starts is outside it), and no controlling terminal (so
/// nothing it starts can open `/dev/tty` to read the owner's keys or type into the
/// owner's shell with `TIOCSTI`). Giving the terminal up is what bubblewrap's
/// `--new-session` would do, without a new session's scheduler autogroup (about 3 ms of
/// every start); the worker is in a process group of its own either way.
fn set_os_limits(command: &mut Command, limits: &OsLimits) -> Result<(), SupervisorError> {
    let rlimits = limits.rlimits;
    let detach_terminal = limits.detach_terminal;
    let procs = limits
        .cgroups
        .iter()
        .map(|dir| {
            use std::os::unix::ffi::OsStrExt;
            let path = dir.join("cgroup.procs");
            std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
                SupervisorError::Spawn {
                    program: path.display().to_string(),
                    source: std::io::Error::other("a cgroup path with a NUL byte"),
                }
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    // SAFETY: between fork and exec only async-signal-safe calls are allowed; setrlimit,
    // open, write and close are plain system calls, and nothing here allocates (the paths
    // were made before the fork).
    unsafe {
        command.pre_exec(move || {
            use nix::sys::resource::{setrlimit, Resource};
            if let Some(Rlimits {
                max_processes,
                max_file_size,
            }) = rlimits
            {
                if let Some(n) = max_processes {
                    setrlimit(Resource::RLIMIT_NPROC, n, n).map_err(std::io::Error::from)?;
                }
                setrlimit(Resource::RLIMIT_FSIZE, max_file_size, max_file_size)
                    .map_err(std::io::Error::from)?;
            }
            for procs in &procs {
                use nix::fcntl::{open, OFlag};
                // "0" is the writing process itself.
                let fd = open(
                    procs.as_c_str(),
                    OFlag::O_WRONLY | OFlag::O_CLOEXEC,
                    nix::sys::stat::Mode::empty(),
                )
                .map_err(std::io::Error::from)?;
                nix::unistd::write(&fd, b"0").map_err(std::io::Error::from)?;
            }
            if detach_terminal {
                give_up_terminal();
            }
            Ok(())
        });
    }
    Ok(())
}

/// Detaches the calling process from its controlling terminal, if it has one (`TIOCNOTTY`
/// on `/dev/tty`; for a process that leads no session this clears its terminal only).
/// Async-signal-safe: `open`, `ioctl` and `close`, nothing allocated. Without a terminal
/// the open fails and there is nothing to do.
fn give_up_terminal() {
    use nix::libc;
    // SAFETY: plain system calls on a NUL-terminated constant and the descriptor opened here.
    unsafe {
        let fd = libc::open(
            c"/dev/tty".as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if fd >= 0 {
            libc::ioctl(fd, libc::TIOCNOTTY);
            libc::close(fd);
        }
    }
}

/// Kills a worker's whole group when dropped while still armed.
struct GroupGuard {
    pgid: Option<u32>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            let _ = group::signal_group(pgid, Signal::SIGKILL);
        }
    }
}

/// TERM to the group, up to `grace` for the leader to exit, then KILL to the group.
async fn terminate(
    child: &mut Child,
    pid: u32,
    grace: Duration,
    outcome: &mut Outcome,
) -> Result<std::process::ExitStatus, SupervisorError> {
    let _ = group::signal_group(pid, Signal::SIGTERM);
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status.map_err(|source| SupervisorError::Wait { pid, source }),
        Err(_) => {
            outcome.killed = true;
            let _ = group::signal_group(pid, Signal::SIGKILL);
            child
                .wait()
                .await
                .map_err(|source| SupervisorError::Wait { pid, source })
        }
    }
}

/// stdout and stderr have different types; readers take either.
type Pipe = tokio_either::Either;

fn either_left(out: tokio::process::ChildStdout) -> Pipe {
    tokio_either::Either::Out(out)
}

fn either_right(err: tokio::process::ChildStderr) -> Pipe {
    tokio_either::Either::Err(err)
}

mod tokio_either {
    //! One reader type over a child's stdout or stderr.
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::{AsyncRead, ReadBuf};
    use tokio::process::{ChildStderr, ChildStdout};

    pub enum Either {
        Out(ChildStdout),
        Err(ChildStderr),
    }

    impl AsyncRead for Either {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            match self.get_mut() {
                Either::Out(out) => Pin::new(out).poll_read(cx, buf),
                Either::Err(err) => Pin::new(err).poll_read(cx, buf),
            }
        }
    }
}

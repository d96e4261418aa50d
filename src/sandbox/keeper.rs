//! `executor sandbox-keep`: the worker's keeper, a small single-threaded process between
//! the runner (or the wall's bridge) and the worker's program.
//!
//! - It is the subreaper of everything the worker starts, so a `setsid` or double-forked
//!   child still ends with the worker: when the worker's program exits, whatever it left
//!   is killed before the keeper exits with the program's own status.
//! - It holds the runner's heartbeat (a pipe on [`BEAT_FD`], described by [`BEAT_VAR`]):
//!   the runner beats after each renewal of its run leases. When the beat is silent for
//!   longer than the lease allows (a runner frozen by `SIGSTOP`, a store gone), or the
//!   pipe closes (the runner died), the keeper stops the worker's whole tree before
//!   another runner may take the run over.
//! - With `--seal`, it seals the worker's process ([`super::seal`]) between fork and exec.
//!
//! It runs outside the seal and outside the worker's Landlock domain, so the worker can
//! neither signal nor trace it.
//!
//! What it must never do: outlive its worker, leave a process of the worker behind when it
//! exits, or pass the heartbeat to the worker.

use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use super::seal::Seal;

pub use crate::supervisor::heartbeat::{Beat, BEAT_FD, BEAT_VAR};

/// The status the keeper exits with when it stopped the worker for a silent runner.
pub const SILENT_RUNNER_EXIT: i32 = 125;

/// The keeper's command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Between the TERM the keeper hears and its KILL of what is left.
    pub grace: Duration,
    pub seal: Option<Seal>,
    pub argv: Vec<String>,
}

impl Options {
    /// `sandbox-keep` and its options up to and including `--`.
    pub fn to_args(&self, executor: &str) -> Vec<String> {
        let mut out = vec![
            executor.to_string(),
            "sandbox-keep".to_string(),
            "--grace".to_string(),
            self.grace.as_millis().to_string(),
        ];
        if let Some(seal) = &self.seal {
            out.push("--seal".to_string());
            out.extend(seal.to_args());
        }
        out.push("--".to_string());
        out
    }

    /// Reads the arguments after `sandbox-keep`.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
        let mut options = Options {
            grace: Duration::from_secs(5),
            ..Options::default()
        };
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            match flag.as_str() {
                "--" => {
                    options.argv = args.collect();
                    break;
                }
                "--grace" => {
                    let ms = args
                        .next()
                        .and_then(|v| v.parse::<u64>().ok())
                        .ok_or("--grace needs milliseconds")?;
                    options.grace = Duration::from_millis(ms);
                }
                "--seal" => options.seal = Some(options.seal.take().unwrap_or_default()),
                _ => {
                    let seal = options.seal.get_or_insert_with(Seal::default);
                    if !seal.parse_arg(&flag, &mut || args.next())? {
                        return Err(format!("unknown option `{flag}`"));
                    }
                }
            }
        }
        if options.argv.is_empty() {
            return Err("no command to run after `--`".to_string());
        }
        Ok(options)
    }
}

/// When the runner's silence becomes too long: pure, so its rule is tested alone.
#[derive(Debug, Clone, Copy)]
pub struct Patience {
    beat: Beat,
    deadline: Instant,
}

impl Patience {
    pub fn new(beat: Beat, now: Instant) -> Self {
        Patience {
            beat,
            deadline: now + beat.first,
        }
    }

    /// A beat came, saying `left` of the patience is left (never more than the whole).
    pub fn heard(&mut self, now: Instant, left: Duration) {
        self.deadline = now + left.min(self.beat.patience);
    }

    /// How long until the silence is too long (zero: it is).
    pub fn left(&self, now: Instant) -> Duration {
        self.deadline.saturating_duration_since(now)
    }
}

/// Runs the keeper; returns its exit status (the worker's, or 128 + its signal).
#[cfg(target_os = "linux")]
pub fn run(options: Options) -> i32 {
    match linux::keep(options) {
        Ok(code) => code,
        Err(why) => {
            eprintln!("executor sandbox-keep: {why}");
            126
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub fn run(options: Options) -> i32 {
    let Some((program, args)) = options.argv.split_first() else {
        return 126;
    };
    match std::process::Command::new(program).args(args).status() {
        Ok(status) => status.code().unwrap_or(128),
        Err(e) => {
            eprintln!("executor sandbox-keep: cannot start `{program}`: {e}");
            127
        }
    }
}

/// Borrows a raw descriptor the process was given.
fn borrowed(fd: RawFd) -> BorrowedFd<'static> {
    // SAFETY: the descriptor was inherited and stays open for the keeper's whole life.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    use nix::errno::Errno;
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use nix::sys::signal::{kill, SigSet, Signal};
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    use nix::unistd::Pid;

    use super::{borrowed, AsFd, Beat, Options, Patience, BEAT_VAR, SILENT_RUNNER_EXIT};

    pub(super) fn keep(options: Options) -> Result<i32, String> {
        let beat = match std::env::var(BEAT_VAR) {
            Ok(text) => Some(Beat::parse(&text)?),
            Err(_) => None,
        };
        if let Some(beat) = beat {
            // The worker must not hold (or beat) the runner's pipe.
            nix::fcntl::fcntl(
                borrowed(beat.fd),
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
            )
            .map_err(|e| format!("the heartbeat descriptor {}: {e}", beat.fd))?;
        }
        nix::sys::prctl::set_child_subreaper(true)
            .map_err(|e| format!("cannot become the worker's subreaper: {e}"))?;
        let mut signals = SigSet::empty();
        for s in [
            Signal::SIGCHLD,
            Signal::SIGTERM,
            Signal::SIGINT,
            Signal::SIGHUP,
        ] {
            signals.add(s);
        }
        signals
            .thread_block()
            .map_err(|e| format!("cannot block signals: {e}"))?;
        let signal_fd =
            SignalFd::with_flags(&signals, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
                .map_err(|e| format!("cannot read signals: {e}"))?;
        let mut sealed = match &options.seal {
            Some(seal) => Some(super::super::seal::prepare(seal)?),
            None => None,
        };
        let (program, args) = options
            .argv
            .split_first()
            .ok_or("no command to run after `--`")?;
        let mut command = std::process::Command::new(program);
        command.args(args).env_remove(BEAT_VAR);
        // SAFETY: the keeper is single-threaded, so nothing is held locked across the
        // fork; the child only restores its signal mask, seals itself and execs.
        unsafe {
            command.pre_exec(move || {
                signals.thread_unblock().map_err(std::io::Error::from)?;
                if let Some(prepared) = sealed.as_mut() {
                    prepared.enforce()?;
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start `{program}`: {e}"))?;
        let main = Pid::from_raw(i32::try_from(child.id()).map_err(|_| "a pid out of range")?);
        // The child is reaped by `waitpid` below, not through `child`.
        std::mem::forget(child);
        let watched = watch(main, beat, &signal_fd, options.grace);
        if watched.is_err() {
            // Whatever went wrong, the worker does not outlive its keeper.
            end_all(Signal::SIGKILL, main);
        }
        watched
    }

    /// Waits for the worker's program, the runner's beats and the signals the keeper hears;
    /// ends the worker's whole tree once its program is gone or the runner is silent.
    fn watch(
        main: Pid,
        beat: Option<Beat>,
        signal_fd: &SignalFd,
        grace: Duration,
    ) -> Result<i32, String> {
        let mut patience = beat.map(|b| Patience::new(b, Instant::now()));
        let mut kill_at: Option<Instant> = None;
        loop {
            let now = Instant::now();
            let mut wait = Duration::from_secs(3600);
            if let Some(p) = &patience {
                wait = wait.min(p.left(now));
            }
            if let Some(at) = kill_at {
                wait = wait.min(at.saturating_duration_since(now));
            }
            if wait.is_zero() {
                if kill_at.is_some_and(|at| at <= now) {
                    // The grace is over: everything goes, and the program's own status
                    // (or its KILL) is the keeper's.
                    return Ok(end_all(Signal::SIGKILL, main).unwrap_or(128 + 9));
                }
                eprintln!(
                    "executor sandbox-keep: no word from the runner for {:?}; its lease on this run may lapse, so the worker is stopped",
                    beat.map(|b| b.patience).unwrap_or_default()
                );
                end_all(Signal::SIGKILL, main);
                return Ok(SILENT_RUNNER_EXIT);
            }
            let timeout = PollTimeout::try_from(wait.as_millis().min(60_000) as i32 + 1)
                .unwrap_or(PollTimeout::MAX);
            let beat_fd = beat.map(|b| borrowed(b.fd));
            let mut fds = vec![PollFd::new(signal_fd.as_fd(), PollFlags::POLLIN)];
            if let Some(fd) = beat_fd {
                fds.push(PollFd::new(fd, PollFlags::POLLIN));
            }
            match poll(&mut fds, timeout) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(format!("poll: {e}")),
            }
            let beat_ready = fds
                .get(1)
                .and_then(|f| f.revents())
                .is_some_and(|r| !r.is_empty());
            if let (true, Some(fd), Some(p)) = (beat_ready, beat_fd, patience.as_mut()) {
                let mut buf = [0u8; 64];
                match nix::unistd::read(fd, &mut buf) {
                    Ok(0) => {
                        // The runner's end closed: it is gone, and so is its lease.
                        end_all(Signal::SIGKILL, main);
                        return Ok(SILENT_RUNNER_EXIT);
                    }
                    Ok(n) => {
                        if let Some(left) = crate::supervisor::heartbeat::last_beat(&buf[..n]) {
                            p.heard(Instant::now(), left);
                        }
                    }
                    Err(Errno::EINTR | Errno::EAGAIN) => {}
                    Err(e) => return Err(format!("the heartbeat: {e}")),
                }
            }
            while let Ok(Some(info)) = signal_fd.read_signal() {
                let signal = Signal::try_from(info.ssi_signo as i32).ok();
                if matches!(
                    signal,
                    Some(Signal::SIGTERM | Signal::SIGINT | Signal::SIGHUP)
                ) && kill_at.is_none()
                {
                    // The worker's process group heard it too; what left the group
                    // (a new session) hears it now, and all of it is killed after the
                    // grace the supervisor gives.
                    signal_children(Signal::SIGTERM);
                    kill_at = Some(Instant::now() + grace.saturating_sub(grace / 5));
                }
            }
            if let Some(code) = reap(main) {
                end_all(Signal::SIGKILL, main);
                return Ok(code);
            }
        }
    }

    /// Reaps every child that ended; the main program's status when it is one of them.
    fn reap(main: Pid) -> Option<i32> {
        let mut ended = None;
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == main => ended = Some(code),
                Ok(WaitStatus::Signaled(pid, signal, _)) if pid == main => {
                    ended = Some(128 + signal as i32)
                }
                Ok(WaitStatus::StillAlive) | Err(_) => return ended,
                Ok(_) => {}
            }
        }
    }

    /// The keeper's children now (orphans of the worker's tree come to it).
    fn children() -> Vec<Pid> {
        let me = std::process::id();
        let listed = std::fs::read_to_string(format!("/proc/self/task/{me}/children"));
        match listed {
            Ok(text) => text
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
                .map(Pid::from_raw)
                .collect(),
            Err(_) => scan_children(me),
        }
    }

    /// Children by their `stat` lines, where the kernel has no `children` file.
    fn scan_children(me: u32) -> Vec<Pid> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|s| {
                        let after = s.rsplit_once(')')?.1;
                        after.split_whitespace().nth(1)?.parse::<u32>().ok()
                    })
                    == Some(me)
            })
            .map(Pid::from_raw)
            .collect()
    }

    fn signal_children(signal: Signal) {
        for child in children() {
            let _ = kill(child, signal);
        }
    }

    /// Kills the whole tree: every child, then those that come to the keeper as their
    /// parents die, until none is left (bounded, for a tree that forks as fast as it dies;
    /// the process cap bounds it too).
    /// Returns the main program's status when it is reaped here.
    fn end_all(signal: Signal, main: Pid) -> Option<i32> {
        let mut ended = None;
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            let now = children();
            for child in &now {
                let _ = kill(*child, signal);
            }
            loop {
                match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::StillAlive) => break,
                    Ok(WaitStatus::Exited(pid, code)) if pid == main => ended = Some(code),
                    Ok(WaitStatus::Signaled(pid, s, _)) if pid == main => {
                        ended = Some(128 + s as i32)
                    }
                    Ok(_) => continue,
                    Err(Errno::ECHILD) => return ended,
                    Err(_) => break,
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keepers_command_line_round_trips() {
        let options = Options {
            grace: Duration::from_millis(1500),
            seal: Some(Seal {
                read: vec!["/".into()],
                write: vec!["/wt".into()],
                tcp_ports: None,
                no_udp: false,
                no_unix: false,
                drop_capabilities: false,
            }),
            argv: vec!["sh".into(), "-c".into(), "--seal".into()],
        };
        let mut args = options.to_args("/bin/executor");
        args.extend(options.argv.clone());
        assert_eq!(&args[..2], ["/bin/executor", "sandbox-keep"]);
        assert_eq!(Options::parse(args.into_iter().skip(2)), Ok(options));
    }

    #[test]
    fn an_empty_seal_is_still_a_seal_and_no_command_is_an_error() {
        let parsed = Options::parse(["--seal", "--", "true"].map(String::from)).unwrap();
        assert_eq!(parsed.seal, Some(Seal::default()));
        assert!(Options::parse(["--seal".to_string()]).is_err());
        assert!(Options::parse(["--bogus", "--", "x"].map(String::from)).is_err());
    }

    #[test]
    fn the_beat_variable_round_trips_and_bad_ones_are_named() {
        let beat = Beat {
            fd: 3,
            patience: Duration::from_millis(50_000),
            first: Duration::from_millis(41_250),
        };
        assert_eq!(Beat::parse(&beat.to_var()), Ok(beat));
        assert!(Beat::parse("3,1000").unwrap_err().contains(BEAT_VAR));
        assert!(Beat::parse("3,x,1").is_err());
    }

    #[test]
    fn patience_counts_the_first_silence_from_the_last_renewal_then_each_beat() {
        let t0 = Instant::now();
        let beat = Beat {
            fd: 3,
            patience: Duration::from_secs(50),
            first: Duration::from_secs(10),
        };
        let mut p = Patience::new(beat, t0);
        assert_eq!(p.left(t0), Duration::from_secs(10));
        assert_eq!(p.left(t0 + Duration::from_secs(11)), Duration::ZERO);
        p.heard(t0 + Duration::from_secs(5), Duration::from_secs(50));
        assert_eq!(p.left(t0 + Duration::from_secs(5)), Duration::from_secs(50));
        // A renewal slow to land leaves less; a beat never gives more than the whole.
        p.heard(t0 + Duration::from_secs(6), Duration::from_secs(20));
        assert_eq!(p.left(t0 + Duration::from_secs(6)), Duration::from_secs(20));
        p.heard(t0 + Duration::from_secs(7), Duration::from_secs(500));
        assert_eq!(p.left(t0 + Duration::from_secs(7)), Duration::from_secs(50));
    }
}

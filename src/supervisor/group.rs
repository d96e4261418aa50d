//! Process groups: every worker leads a group of its own, so one signal reaches the worker
//! and everything it started. Identity is (pgid, start time), never a name: a pid that was
//! reused by an unrelated process has another start time and is left alone.

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// Sends `signal` to every process of group `pgid`. A group that is already gone is fine.
///
/// Groups 0 and 1 are refused (`EINVAL`), whoever asks: `killpg(0)` is the caller's own
/// group (the runner itself) and group 1 is init's. No worker ever leads either, so such a
/// value is a record gone wrong, never a worker to stop.
pub fn signal_group(pgid: u32, signal: Signal) -> Result<(), Errno> {
    if pgid <= 1 {
        return Err(Errno::EINVAL);
    }
    let Ok(raw) = i32::try_from(pgid) else {
        return Err(Errno::EINVAL);
    };
    match killpg(Pid::from_raw(raw), signal) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The start time of process `pid` in clock ticks since boot (`/proc/PID/stat`, field 22),
/// or `None` where there is no such process or no `/proc`.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_field(&stat, 22)
}

/// The live processes whose group is `pgid` (from `/proc`; zombies, already dead and only
/// waiting to be reaped, are not counted; empty where there is no `/proc`). Empty for
/// groups 0 (the kernel's threads) and 1 (init's), which no worker leads.
pub fn members(pgid: u32) -> Vec<u32> {
    if pgid <= 1 {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let zombie = stat
                .rfind(')')
                .and_then(|end| stat[end + 1..].split_whitespace().next())
                == Some("Z");
            !zombie && stat_field(&stat, 5) == Some(u64::from(pgid))
        })
        .collect()
}

/// Field `n` (1-based, as `man 5 proc` counts) of a `/proc/PID/stat` line. The command
/// name (field 2) may hold spaces and parentheses, so counting starts after its last `)`.
fn stat_field(stat: &str, n: usize) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name
        .split_whitespace()
        .nth(n.checked_sub(3)?)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat = "4242 (my (odd) worker) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(stat_field(stat, 4), Some(1), "ppid");
        assert_eq!(stat_field(stat, 5), Some(4242), "pgrp");
        assert_eq!(stat_field(stat, 22), Some(987654), "starttime");
        assert_eq!(stat_field("garbage", 22), None);
    }

    #[test]
    fn groups_zero_and_one_are_never_signalled() {
        // SIGCONT is harmless to this test's own group (0) should it ever be sent.
        assert_eq!(signal_group(0, Signal::SIGCONT), Err(Errno::EINVAL));
        assert_eq!(signal_group(1, Signal::SIGCONT), Err(Errno::EINVAL));
        assert_eq!(signal_group(u32::MAX, Signal::SIGCONT), Err(Errno::EINVAL));
        assert!(members(0).is_empty() && members(1).is_empty());
        let own = nix::unistd::getpgrp().as_raw() as u32;
        assert_eq!(signal_group(own, Signal::SIGCONT), Ok(()));
    }

    #[test]
    fn this_process_has_a_start_time_and_a_group() {
        let me = std::process::id();
        assert!(start_time(me).is_some());
        let pgid = nix::unistd::getpgrp().as_raw() as u32;
        assert!(members(pgid).contains(&me));
    }
}

//! The runner's side of a keeper's heartbeat: a pipe whose read end the keeper is given on
//! [`BEAT_FD`], and a task that writes a beat to it after each renewal of the lease of the
//! worker's run (see `crate::sandbox::keeper` for the other side). A beat is what is left
//! of the keeper's patience, counted from the start of the renewal (the lease runs from
//! there): four bytes, milliseconds, little-endian, so a renewal that was slow to land, or
//! a beat read late, never lets the worker outlive the lease.
//!
//! What it must never do: beat for a lease that was not renewed, or leave the pipe's read
//! end open in the runner (the keeper must hear EOF when the runner's end goes).

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::time::Duration;

use tokio::process::Command;
use tokio::time::Instant;

use super::Heartbeat;

/// The file descriptor the heartbeat's read end is given on.
pub const BEAT_FD: std::os::fd::RawFd = 3;
/// `FD,PATIENCE_MS,FIRST_MS`: the heartbeat's descriptor, how long a silence may last, and
/// how long the first may (the lease was renewed a while before the worker started).
pub const BEAT_VAR: &str = "EXECUTOR_KEEPER_BEAT";
/// The heartbeat the keeper holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Beat {
    pub fd: std::os::fd::RawFd,
    pub patience: Duration,
    pub first: Duration,
}

impl Beat {
    /// The value of [`BEAT_VAR`].
    pub fn to_var(self) -> String {
        format!(
            "{},{},{}",
            self.fd,
            self.patience.as_millis(),
            self.first.as_millis()
        )
    }

    pub fn parse(text: &str) -> Result<Beat, String> {
        let parts: Vec<&str> = text.split(',').collect();
        let [fd, patience, first] = parts.as_slice() else {
            return Err(format!(
                "{BEAT_VAR}=`{text}` is not FD,PATIENCE_MS,FIRST_MS"
            ));
        };
        let number = |t: &str| {
            t.parse::<u64>()
                .map_err(|_| format!("{BEAT_VAR}: `{t}` is not a number"))
        };
        Ok(Beat {
            fd: std::os::fd::RawFd::try_from(number(fd)?)
                .map_err(|_| format!("{BEAT_VAR}: bad fd {fd}"))?,
            patience: Duration::from_millis(number(patience)?),
            first: Duration::from_millis(number(first)?),
        })
    }
}

/// A heartbeat given to a command not yet spawned.
pub struct Given {
    /// The read end, open until the child is spawned (it has its own copy then).
    read: OwnedFd,
    write: OwnedFd,
    renewed: tokio::sync::watch::Receiver<Instant>,
    patience: Duration,
}

/// Gives `command` the heartbeat's read end on [`BEAT_FD`] and its patience in
/// [`BEAT_VAR`]; the first silence allowed is what is left of the patience since the last
/// renewal.
pub fn give(command: &mut Command, heartbeat: &Heartbeat) -> std::io::Result<Given> {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let since = heartbeat.renewed.borrow().elapsed();
    let beat = Beat {
        fd: BEAT_FD,
        patience: heartbeat.patience,
        first: heartbeat.patience.saturating_sub(since),
    };
    command.env(BEAT_VAR, beat.to_var());
    let raw = read.as_raw_fd();
    // SAFETY: dup2 and fcntl are async-signal-safe system calls on descriptors that stay
    // open until the spawn returns (`read` is dropped after it, in the parent).
    unsafe {
        command.as_std_mut().pre_exec(move || {
            use nix::libc;
            if raw == BEAT_FD {
                // dup2 onto itself would keep FD_CLOEXEC.
                if libc::fcntl(raw, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(raw, BEAT_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(Given {
        read,
        write,
        renewed: heartbeat.renewed.clone(),
        patience: heartbeat.patience,
    })
}

/// Beats until dropped.
pub struct Beating(tokio::task::JoinHandle<()>);

impl Drop for Beating {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Given {
    /// Closes this process's copy of the read end (the child has its own) and beats on
    /// each renewal.
    pub fn start(self) -> Beating {
        let Given {
            read,
            write,
            mut renewed,
            patience,
        } = self;
        drop(read);
        let pipe = std::fs::File::from(write);
        Beating(tokio::spawn(async move {
            use std::io::Write as _;
            let mut pipe = pipe;
            while renewed.changed().await.is_ok() {
                let left = patience.saturating_sub(renewed.borrow_and_update().elapsed());
                // Four bytes into a pipe the keeper drains: one write, whole, never blocking.
                if pipe.write_all(&encode(left)).is_err() {
                    return;
                }
            }
            // The lease keeper is gone: no more beats, and the keeper's patience runs out.
            std::future::pending::<()>().await;
        }))
    }
}

/// The length of one beat on the pipe.
pub const BEAT_LEN: usize = 4;

/// A beat: `left` of the patience, in milliseconds.
pub fn encode(left: Duration) -> [u8; BEAT_LEN] {
    u32::try_from(left.as_millis())
        .unwrap_or(u32::MAX)
        .to_le_bytes()
}

/// The last whole beat in `bytes` (what one read of the pipe returned), if any.
pub fn last_beat(bytes: &[u8]) -> Option<Duration> {
    let whole = bytes.len() / BEAT_LEN * BEAT_LEN;
    let last: [u8; BEAT_LEN] = bytes
        .get(whole.checked_sub(BEAT_LEN)?..whole)?
        .try_into()
        .ok()?;
    Some(Duration::from_millis(u64::from(u32::from_le_bytes(last))))
}

/// How long a keeper waits after a renewal: the lease's span less a margin (a sixth of it,
/// at least a second), so the worker is gone before another runner may take the run.
pub fn patience(lease_ttl: Duration) -> Duration {
    let margin = (lease_ttl / 6).max(Duration::from_secs(1));
    lease_ttl
        .saturating_sub(margin)
        .max(Duration::from_millis(500))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_beat_says_what_is_left_and_the_last_whole_one_counts() {
        let mut bytes = encode(Duration::from_millis(49_000)).to_vec();
        bytes.extend(encode(Duration::from_millis(12_345)));
        assert_eq!(last_beat(&bytes), Some(Duration::from_millis(12_345)));
        bytes.push(7);
        assert_eq!(last_beat(&bytes), Some(Duration::from_millis(12_345)));
        assert_eq!(last_beat(&[1, 2]), None);
        assert_eq!(last_beat(&encode(Duration::ZERO)), Some(Duration::ZERO));
    }

    #[test]
    fn the_keeper_waits_the_lease_less_a_margin() {
        assert_eq!(patience(Duration::from_secs(60)), Duration::from_secs(50));
        assert_eq!(patience(Duration::from_secs(3)), Duration::from_secs(2));
        assert_eq!(patience(Duration::from_secs(1)), Duration::from_millis(500));
    }
}

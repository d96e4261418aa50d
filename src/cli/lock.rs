//! The runner's lock: one runner per workspace at a time, whether it is `executor run
//! --once` from cron or the runner inside `executor daemon`. It is an OS file lock
//! (`flock`), held for the process's lifetime and released by the kernel when the process
//! ends however it ends, so a crashed runner never blocks the next one. The holder writes
//! its pid into the file so a second copy can say who holds it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

#[derive(Debug, Error)]
pub enum LockError {
    #[error("another executor {role} holds {path} (pid {holder}); this one exits")]
    Held {
        role: &'static str,
        path: PathBuf,
        holder: String,
    },
    #[error("cannot use the lock file {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Held while alive; dropping it (or the process ending) releases the lock.
#[derive(Debug)]
pub struct RunnerLock {
    _file: File,
}

/// Takes the runner's lock at `path` without waiting.
pub fn acquire(path: &Path) -> Result<RunnerLock, LockError> {
    acquire_as(path, "runner")
}

/// Takes the lock at `path` for `role` (`runner`, `analyzer`) without waiting.
pub fn acquire_as(path: &Path, role: &'static str) -> Result<RunnerLock, LockError> {
    let io = |source| LockError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(LockError::Held {
                role,
                path: path.to_path_buf(),
                holder: if holder.is_empty() {
                    "unknown".to_string()
                } else {
                    holder.to_string()
                },
            });
        }
        Err(TryLockError::Error(source)) => return Err(io(source)),
    }
    file.set_len(0).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    writeln!(file, "{}", std::process::id()).map_err(io)?;
    file.flush().map_err(io)?;
    Ok(RunnerLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runner.lock");
        let first = acquire(&path).expect("first");
        let err = acquire(&path).expect_err("second");
        let message = err.to_string();
        assert!(
            message.contains(&std::process::id().to_string()),
            "{message}"
        );
        drop(first);
        acquire(&path).expect("free again once released");
    }
}

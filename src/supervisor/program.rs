//! Finding a worker's program on a `PATH`, as `execvp` would: the first executable file of
//! that name in an absolute folder. The supervisor, the wall and the agents' adapters all
//! ask it, so it lives below them. It reads the file system and decides nothing else.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The first executable file called `name` in the folders of `path`.
pub fn find_program(name: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .filter(|folder| folder.is_absolute())
        .map(|folder| folder.join(name))
        .find(|candidate| is_executable(candidate))
}

/// Whether `path` is a file some user may execute.
pub fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

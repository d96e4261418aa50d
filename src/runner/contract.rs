//! The worker contract as a runner holds it: loaded and validated when the runner starts
//! (a contract that does not validate stops it), reloaded when the file changes, and
//! written out for each worker, so the worker's hook judges by exactly the contract the
//! runner validated.
//!
//! What it must never do: replace a good contract with one that failed to load. A reload
//! that fails keeps the last good contract and says why (the file, line and field).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use crate::policy::{Contract, ContractError};

/// A validated contract with the text it was read from.
#[derive(Debug)]
pub struct LoadedContract {
    pub text: String,
    pub contract: Contract,
}

/// What a reload found.
#[derive(Debug)]
pub enum Reload {
    Unchanged,
    Reloaded,
    /// The file changed but does not validate: the last good contract stays.
    KeptLastGood(ContractError),
}

/// The current worker contract, shared by every run of a runner.
#[derive(Debug, Clone)]
pub struct ContractCell {
    /// The owner's file; `None` only for a conductor contract built in (see
    /// [`ContractCell::load_or_builtin`]).
    path: Option<PathBuf>,
    current: Arc<RwLock<Arc<LoadedContract>>>,
    /// The file's modification time when it was last read.
    seen: Arc<Mutex<Option<SystemTime>>>,
}

impl ContractCell {
    /// Loads the owner's contract at `path`. A missing file is [`ContractError::Missing`]
    /// (naming the file and `executor init`): a runner never falls back to the built-in
    /// contract for its workers, so that what judges them is always the file the owner sees.
    pub fn load(path: &Path) -> Result<Self, ContractError> {
        if !path.exists() {
            return Err(ContractError::Missing {
                file: path.display().to_string(),
            });
        }
        let seen = modified(path);
        let loaded = read(path)?;
        Ok(Self::holding(Some(path.to_path_buf()), loaded, seen))
    }

    /// Loads `path`, or `builtin` (named `builtin_name` in errors) when there is no file: only
    /// for the conductor's contract, which judges executor's own record step rather than a
    /// worker, and which workspaces made before it existed do not have.
    pub fn load_or_builtin(
        path: &Path,
        builtin_name: &str,
        builtin: &str,
    ) -> Result<Self, ContractError> {
        if path.exists() {
            return Self::load(path);
        }
        let contract = Contract::parse(builtin_name, builtin)?;
        Ok(Self::holding(
            None,
            LoadedContract {
                text: builtin.to_string(),
                contract,
            },
            None,
        ))
    }

    fn holding(path: Option<PathBuf>, loaded: LoadedContract, seen: Option<SystemTime>) -> Self {
        Self {
            path,
            current: Arc::new(RwLock::new(Arc::new(loaded))),
            seen: Arc::new(Mutex::new(seen)),
        }
    }

    /// The contract now in force.
    pub fn current(&self) -> Arc<LoadedContract> {
        let guard = self.current.read().unwrap_or_else(|e| e.into_inner());
        Arc::clone(&guard)
    }

    /// Reads the file again if it changed since it was last read.
    pub fn reload_if_changed(&self) -> Reload {
        let Some(path) = &self.path else {
            return Reload::Unchanged;
        };
        let now = modified(path);
        {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if *seen == now {
                return Reload::Unchanged;
            }
            *seen = now;
        }
        match read(path) {
            Ok(loaded) => {
                let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
                *current = Arc::new(loaded);
                Reload::Reloaded
            }
            Err(error) => Reload::KeptLastGood(error),
        }
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    path.metadata().and_then(|m| m.modified()).ok()
}

fn read(path: &Path) -> Result<LoadedContract, ContractError> {
    let text = std::fs::read_to_string(path).map_err(|source| ContractError::Read {
        file: path.display().to_string(),
        source,
    })?;
    let contract = Contract::parse(&path.display().to_string(), &text)?;
    Ok(LoadedContract { text, contract })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"contract_version": 1, "role": "worker", "default": "escalate", "rules": [
        {"id": "tests", "action": "run_tests", "decision": "approve", "why": "safe"}
    ]}"#;
    const OTHER: &str = r#"{"contract_version": 1, "role": "worker", "default": "escalate", "rules": [
        {"id": "tests", "action": "run_tests", "decision": "deny", "why": "not today"}
    ]}"#;

    fn decide(cell: &ContractCell) -> crate::policy::Decision {
        let scope = crate::policy::Scope::new("/w", None);
        cell.current()
            .contract
            .decide(&crate::policy::Action::new("run_tests"), &scope)
            .decision
    }

    /// Writes `text` with a modification time `step` seconds after the epoch, so a change
    /// is seen however coarse the file system's clock is.
    fn write(path: &Path, text: &str, step: u64) {
        std::fs::write(path, text).expect("write");
        let file = std::fs::File::options()
            .write(true)
            .open(path)
            .expect("open");
        file.set_modified(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(step))
            .expect("set mtime");
    }

    #[test]
    fn a_broken_edit_keeps_the_last_good_contract_and_a_fixed_one_replaces_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("worker-policy.json");
        write(&path, GOOD, 1);
        let cell = ContractCell::load(&path).expect("loads");
        assert_eq!(decide(&cell), crate::policy::Decision::Approve);
        assert!(matches!(cell.reload_if_changed(), Reload::Unchanged));

        write(&path, "{ \"contract_version\": 1,\n  \"rules\": [ }", 2);
        match cell.reload_if_changed() {
            Reload::KeptLastGood(error) => {
                let text = error.to_string();
                assert!(text.contains("worker-policy.json:2"), "{text}");
            }
            other => panic!("expected the last good contract kept, got {other:?}"),
        }
        assert_eq!(decide(&cell), crate::policy::Decision::Approve);

        write(&path, OTHER, 3);
        assert!(matches!(cell.reload_if_changed(), Reload::Reloaded));
        assert_eq!(decide(&cell), crate::policy::Decision::Deny);
        assert!(cell.current().text.contains("not today"));
    }

    #[test]
    fn without_a_file_the_worker_contract_refuses_naming_the_file_and_init() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("roles/worker-policy.json");
        let error = ContractCell::load(&missing).expect_err("no file, no contract");
        let text = error.to_string();
        assert!(matches!(error, ContractError::Missing { .. }), "{text}");
        assert!(text.contains("roles/worker-policy.json"), "{text}");
        assert!(text.contains("executor init"), "{text}");
    }

    #[test]
    fn the_conductor_may_use_its_built_in_contract_when_it_has_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cell = ContractCell::load_or_builtin(&dir.path().join("none.json"), "built-in", GOOD)
            .expect("built-in loads");
        assert_eq!(decide(&cell), crate::policy::Decision::Approve);
        assert!(matches!(cell.reload_if_changed(), Reload::Unchanged));
    }
}

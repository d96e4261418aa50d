//! Whether this process finds its store in reach: marked by the writes that wait an outage
//! out (`drive::patience`), read by `/metrics` and said in the log once per outage (when it
//! began; when it ended, how long it lasted and how many writes caught up). Process-wide,
//! since every run of a process shares its one store.
//!
//! The account is also written to a file beside the runner's lock while writes wait, so
//! `executor status` in another process can say it when the store cannot.
//!
//! What it must never do: decide anything, or make a write wait. It only remembers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// An outage as this process sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outage {
    /// When the first write found the store out of reach.
    pub since: DateTime<Utc>,
    /// Writes that waited and landed since the outage began.
    pub caught_up: usize,
    /// The runs whose writes wait now, each with how many.
    pub runs: BTreeMap<i64, usize>,
}

impl Outage {
    /// How many writes wait for the store now.
    pub fn waiting(&self) -> usize {
        self.runs.values().sum()
    }

    /// How many runs wait on the store now.
    pub fn runs_waiting(&self) -> usize {
        self.runs.len()
    }
}

/// The account of an outage another process can read (`executor status`, which cannot ask
/// the store): written beside the runner's lock while writes wait, removed when none do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutageAccount {
    pub since: DateTime<Utc>,
    pub waiting_writes: usize,
    pub waiting_runs: usize,
    /// The process whose writes wait, and its start time (a pid reused by another
    /// process is not taken for it).
    pub pid: u32,
    pub start_time: Option<u64>,
}

/// The account file's name, in the workspace's folder.
pub const ACCOUNT_FILE: &str = "store-outage.json";

/// The process's account: `None` while the store answers.
#[derive(Debug, Default)]
pub struct StoreHealth {
    outage: Mutex<Option<Outage>>,
    /// Where the account is written for other processes, once a runner says so.
    mirror: std::sync::OnceLock<PathBuf>,
}

/// What a change of the account asks the log to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    /// The first write of an outage failed.
    Began,
    /// The last waiting write landed: the outage is over.
    Ended(Outage),
    Nothing,
}

impl StoreHealth {
    /// Writes the account to `file` from now on, for `executor status` to read (the
    /// runner's folder: the daemon's and `run --once`'s).
    pub fn mirror_to(&self, file: PathBuf) {
        let _ = self.mirror.set(file);
    }

    /// A write of run `run_id` found the store out of reach at `now` (its first failure:
    /// each write is counted once however often it is tried).
    pub fn write_waits(&self, now: DateTime<Utc>, run_id: i64) -> Said {
        let mut outage = self.lock();
        let said = match outage.as_mut() {
            Some(o) => {
                *o.runs.entry(run_id).or_default() += 1;
                Said::Nothing
            }
            None => {
                *outage = Some(Outage {
                    since: now,
                    caught_up: 0,
                    runs: BTreeMap::from([(run_id, 1)]),
                });
                Said::Began
            }
        };
        self.mirror(outage.as_ref());
        said
    }

    /// A write of run `run_id` that waited landed: when it was the last one waiting, the
    /// outage is over.
    pub fn write_landed(&self, run_id: i64) -> Said {
        let mut outage = self.lock();
        let Some(o) = outage.as_mut() else {
            return Said::Nothing;
        };
        o.caught_up += 1;
        let said = if Self::one_less(o, run_id) {
            outage.take().map_or(Said::Nothing, Said::Ended)
        } else {
            Said::Nothing
        };
        self.mirror(outage.as_ref());
        said
    }

    /// A write of run `run_id` that waited was given up (the store refused it for good,
    /// or patience ran out): it waits no more.
    pub fn write_gave_up(&self, run_id: i64) {
        let mut outage = self.lock();
        if let Some(o) = outage.as_mut() {
            if Self::one_less(o, run_id) {
                *outage = None;
            }
        }
        self.mirror(outage.as_ref());
    }

    /// One write of `run_id` waits no more; true when none waits at all.
    fn one_less(o: &mut Outage, run_id: i64) -> bool {
        if let Some(n) = o.runs.get_mut(&run_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                o.runs.remove(&run_id);
            }
        }
        o.runs.is_empty()
    }

    /// The outage going on, if any.
    pub fn outage(&self) -> Option<Outage> {
        self.lock().clone()
    }

    /// Writes the account for other processes, or removes it when there is no outage. A
    /// file that cannot be written (the same full disk) is only not there: this never
    /// makes a write wait longer.
    fn mirror(&self, outage: Option<&Outage>) {
        let Some(file) = self.mirror.get() else {
            return;
        };
        match outage {
            None => {
                let _ = std::fs::remove_file(file);
            }
            Some(o) => {
                let pid = std::process::id();
                let account = OutageAccount {
                    since: o.since,
                    waiting_writes: o.waiting(),
                    waiting_runs: o.runs_waiting(),
                    pid,
                    start_time: crate::supervisor::group::start_time(pid),
                };
                let Ok(text) = serde_json::to_vec(&account) else {
                    return;
                };
                // Whole or not at all: a reader never sees half an account.
                let part = file.with_extension("json.part");
                if std::fs::write(&part, text).is_ok() {
                    let _ = std::fs::rename(&part, file);
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Outage>> {
        self.outage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The outage account in `file`, if its process still lives; a dead process's account
/// says nothing about the store now.
pub fn read_account(file: &Path) -> Option<OutageAccount> {
    let text = std::fs::read(file).ok()?;
    let account: OutageAccount = serde_json::from_slice(&text).ok()?;
    let alive = crate::supervisor::group::start_time(account.pid);
    (alive.is_some() && alive == account.start_time).then_some(account)
}

/// This process's account.
pub fn this_process() -> &'static StoreHealth {
    static HEALTH: std::sync::OnceLock<StoreHealth> = std::sync::OnceLock::new();
    HEALTH.get_or_init(StoreHealth::default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 4, 9, 0, 0)
            .single()
            .expect("time")
    }

    #[test]
    fn an_outage_begins_with_its_first_waiting_write_and_ends_with_its_last() {
        let health = StoreHealth::default();
        assert_eq!(health.write_waits(at(), 1), Said::Began);
        assert_eq!(
            health.write_waits(at() + chrono::Duration::seconds(5), 1),
            Said::Nothing
        );
        assert_eq!(health.write_waits(at(), 2), Said::Nothing);
        let outage = health.outage().expect("an outage");
        assert_eq!(
            (outage.since, outage.waiting(), outage.caught_up),
            (at(), 3, 0)
        );
        assert_eq!(
            outage.runs_waiting(),
            2,
            "two runs wait, one with two writes"
        );
        assert_eq!(health.write_landed(2), Said::Nothing, "two still wait");
        assert_eq!(health.outage().map(|o| o.runs_waiting()), Some(1));
        assert_eq!(health.write_landed(1), Said::Nothing, "one still waits");
        assert_eq!(
            health.write_landed(1),
            Said::Ended(Outage {
                since: at(),
                caught_up: 3,
                runs: BTreeMap::new(),
            })
        );
        assert_eq!(health.outage(), None);
        assert_eq!(
            health.write_landed(1),
            Said::Nothing,
            "no outage, nothing to end"
        );
        // A write given up waits no more; the outage ends with the last one waiting.
        assert_eq!(health.write_waits(at(), 4), Said::Began);
        health.write_gave_up(4);
        assert_eq!(health.outage(), None);
    }

    #[test]
    fn the_account_is_there_for_other_processes_while_writes_wait_and_gone_after() {
        let dir = tempfile::tempdir().expect("a folder");
        let file = dir.path().join(ACCOUNT_FILE);
        let health = StoreHealth::default();
        health.mirror_to(file.clone());
        assert_eq!(read_account(&file), None, "no outage, no account");
        health.write_waits(at(), 7);
        health.write_waits(at(), 8);
        let account = read_account(&file).expect("the account of a live process");
        assert_eq!(
            (account.since, account.waiting_writes, account.waiting_runs),
            (at(), 2, 2)
        );
        assert_eq!(account.pid, std::process::id());
        health.write_landed(7);
        assert_eq!(read_account(&file).map(|a| a.waiting_runs), Some(1));
        health.write_landed(8);
        assert!(!file.exists(), "the outage is over: the account is gone");
        // An account left by a process that is gone says nothing.
        let stale = OutageAccount {
            start_time: Some(1),
            ..account
        };
        std::fs::write(&file, serde_json::to_vec(&stale).expect("json")).expect("write");
        assert_eq!(read_account(&file), None);
    }
}

//! Whether this process finds its store in reach: marked by the writes that wait an outage
//! out (`drive::patience`), read by `/metrics` and said in the log once per outage (when it
//! began; when it ended, how long it lasted and how many writes caught up). Process-wide,
//! since every run of a process shares its one store.
//!
//! What it must never do: decide anything, or make a write wait. It only remembers.

use std::sync::Mutex;

use chrono::{DateTime, Utc};

/// An outage as this process sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outage {
    /// When the first write found the store out of reach.
    pub since: DateTime<Utc>,
    /// Writes waiting for the store now.
    pub waiting: usize,
    /// Writes that waited and landed since the outage began.
    pub caught_up: usize,
}

/// The process's account: `None` while the store answers.
#[derive(Debug, Default)]
pub struct StoreHealth {
    outage: Mutex<Option<Outage>>,
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
    /// A write found the store out of reach at `now` (its first failure: each write is
    /// counted once however often it is tried).
    pub fn write_waits(&self, now: DateTime<Utc>) -> Said {
        let mut outage = self.lock();
        match outage.as_mut() {
            Some(o) => {
                o.waiting += 1;
                Said::Nothing
            }
            None => {
                *outage = Some(Outage {
                    since: now,
                    waiting: 1,
                    caught_up: 0,
                });
                Said::Began
            }
        }
    }

    /// A write that waited landed: when it was the last one waiting, the outage is over.
    pub fn write_landed(&self) -> Said {
        let mut outage = self.lock();
        let Some(o) = outage.as_mut() else {
            return Said::Nothing;
        };
        o.waiting = o.waiting.saturating_sub(1);
        o.caught_up += 1;
        if o.waiting > 0 {
            return Said::Nothing;
        }
        outage.take().map_or(Said::Nothing, Said::Ended)
    }

    /// A write that waited was given up (the store refused it for good, or patience ran
    /// out): it waits no more.
    pub fn write_gave_up(&self) {
        let mut outage = self.lock();
        if let Some(o) = outage.as_mut() {
            o.waiting = o.waiting.saturating_sub(1);
            if o.waiting == 0 {
                *outage = None;
            }
        }
    }

    /// The outage going on, if any.
    pub fn outage(&self) -> Option<Outage> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Outage>> {
        self.outage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
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

    #[test]
    fn an_outage_begins_with_its_first_waiting_write_and_ends_with_its_last() {
        let health = StoreHealth::default();
        let at = Utc
            .with_ymd_and_hms(2026, 12, 4, 9, 0, 0)
            .single()
            .expect("time");
        assert_eq!(health.write_waits(at), Said::Began);
        assert_eq!(
            health.write_waits(at + chrono::Duration::seconds(5)),
            Said::Nothing
        );
        assert_eq!(
            health.outage(),
            Some(Outage {
                since: at,
                waiting: 2,
                caught_up: 0
            })
        );
        assert_eq!(health.write_landed(), Said::Nothing, "one still waits");
        assert_eq!(
            health.write_landed(),
            Said::Ended(Outage {
                since: at,
                waiting: 0,
                caught_up: 2
            })
        );
        assert_eq!(health.outage(), None);
        assert_eq!(
            health.write_landed(),
            Said::Nothing,
            "no outage, nothing to end"
        );
        // A write given up waits no more; the outage ends with the last one waiting.
        assert_eq!(health.write_waits(at), Said::Began);
        health.write_gave_up();
        assert_eq!(health.outage(), None);
    }
}

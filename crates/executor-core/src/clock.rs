//! "Now", injectable. Production code asks a [`Clock`]; tests hand in a [`ManualClock`] and
//! move it by hand, so no test depends on how fast the machine is.

use std::sync::Mutex;

use chrono::{DateTime, Duration, FixedOffset, Utc};

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;

    /// The machine's offset from UTC now: agents print clock times ("resets 3pm") in it.
    /// UTC unless the clock knows better.
    fn local_offset(&self) -> FixedOffset {
        FixedOffset::east_opt(0).expect("UTC is an offset")
    }
}

/// The real wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn local_offset(&self) -> FixedOffset {
        *chrono::Local::now().offset()
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let start = DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
            .expect("valid timestamp")
            .with_timezone(&Utc);
        let clock = ManualClock::new(start);
        assert_eq!(clock.now(), start);
        clock.advance(Duration::seconds(90));
        assert_eq!(clock.now(), start + Duration::seconds(90));
    }
}

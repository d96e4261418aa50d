//! A rate gate: after a service said "not before T" (a 429's `Retry-After`, a spent budget
//! until its reset), the client sends nothing more to it until T, and answers at once with
//! why. So fifty callers do not hit a limited service fifty times (which can get an
//! integration banned). The moment is always capped (see [`super::retry`]).

use std::sync::Mutex;

use chrono::{DateTime, Utc};

use super::retry;

/// Shut until a moment, with why (`W`: the client's own account of the limit). Shared by
/// every clone of a client.
#[derive(Debug)]
pub struct RateGate<W> {
    shut: Mutex<Option<(DateTime<Utc>, W)>>,
}

impl<W> Default for RateGate<W> {
    fn default() -> Self {
        Self {
            shut: Mutex::new(None),
        }
    }
}

impl<W: Clone> RateGate<W> {
    /// Shuts the gate until `until` (at most [`retry::MAX_WAIT`] after `now`), replacing
    /// whatever it was shut for: the latest answer knows best.
    pub fn shut(&self, until: DateTime<Utc>, why: W, now: DateTime<Utc>) {
        let until = retry::capped(until, now);
        let mut shut = self.lock();
        *shut = Some((until, why));
    }

    /// Opens the gate (a later answer says the budget is back).
    pub fn open(&self) {
        *self.lock() = None;
    }

    /// Until when the gate is shut, and why; `None` (and the gate opened) once `now` has
    /// reached that moment.
    pub fn check(&self, now: DateTime<Utc>) -> Option<(DateTime<Utc>, W)> {
        let mut shut = self.lock();
        match &*shut {
            Some((until, why)) if *until > now => Some((*until, why.clone())),
            Some(_) => {
                *shut = None;
                None
            }
            None => None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(DateTime<Utc>, W)>> {
        // Nothing panics while holding it; a poisoned one still holds whole data.
        self.shut.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_holds_until_its_moment_and_never_past_the_cap() {
        let now = DateTime::parse_from_rfc3339("2026-03-16T09:00:00Z")
            .expect("time")
            .with_timezone(&Utc);
        let gate = RateGate::default();
        assert_eq!(gate.check(now), None);
        gate.shut(now + chrono::Duration::seconds(30), "retry-after", now);
        assert_eq!(
            gate.check(now + chrono::Duration::seconds(29)),
            Some((now + chrono::Duration::seconds(30), "retry-after"))
        );
        assert_eq!(gate.check(now + chrono::Duration::seconds(30)), None);
        assert_eq!(gate.check(now), None, "opened once passed");

        gate.shut(DateTime::<Utc>::MAX_UTC, "reset", now);
        let (until, _) = gate.check(now).expect("shut");
        assert_eq!(until, now + chrono::Duration::hours(24));
        gate.open();
        assert_eq!(gate.check(now), None);
    }
}

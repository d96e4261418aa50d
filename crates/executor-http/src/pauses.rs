//! The "not before" of each outside service, for the whole process and past it.
//!
//! A rate limit belongs to the service, not to one client value: every client of one
//! service in this process (the forge's, the issue source's, the record step's) shares one
//! [`RateGate`], found by the service's name (its kind and API URL). The binary seeds the
//! gates at start from what its store kept and sets a [`PauseLedger`] that stores each new
//! pause, so a later process (`run --once` from cron) waits out a limit an earlier one met.
//!
//! What it must never do: hold a request on the ledger for long (the ledger is given
//! [`RECORD_TIMEOUT`]), or let a ledger's failure fail the call that met the limit.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::RateGate;

/// The longest a request that met a limit waits for its pause to be kept.
pub const RECORD_TIMEOUT: Duration = Duration::from_secs(2);

/// Where pauses are kept past this process (the binary's store).
pub trait PauseLedger: Send + Sync {
    /// Keeps `service`'s pause, said at `since`, until `until`. Failures are the
    /// ledger's to report: the caller goes on either way.
    fn record(
        &self,
        service: String,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

#[derive(Default)]
struct Book {
    gates: Mutex<HashMap<String, Arc<RateGate<()>>>>,
    ledger: Mutex<Option<Arc<dyn PauseLedger>>>,
}

fn book() -> &'static Book {
    static BOOK: OnceLock<Book> = OnceLock::new();
    BOOK.get_or_init(Book::default)
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Nothing panics while holding these; a poisoned one still holds whole data.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The gate of `service` in this process, made on first use.
pub fn gate(service: &str) -> Arc<RateGate<()>> {
    locked(&book().gates)
        .entry(service.to_owned())
        .or_default()
        .clone()
}

/// Shuts `service`'s gate until `until` (a pause an earlier process met, read back from
/// the ledger's store), unless that moment has passed.
pub fn seed(service: &str, until: DateTime<Utc>, now: DateTime<Utc>) {
    if until > now {
        gate(service).shut(until, (), now);
    }
}

/// Sets where every later pause is kept (replacing any earlier ledger).
pub fn set_ledger(ledger: Arc<dyn PauseLedger>) {
    *locked(&book().ledger) = Some(ledger);
}

/// Shuts `service`'s gate until `until` and hands the pause to the ledger, if one is set,
/// waiting for it at most [`RECORD_TIMEOUT`].
pub async fn pause(service: &str, until: DateTime<Utc>, now: DateTime<Utc>) {
    // The ledger keeps the moment as the gate does: capped.
    let until = crate::retry::capped(until, now);
    gate(service).shut(until, (), now);
    let ledger = locked(&book().ledger).clone();
    if let Some(ledger) = ledger {
        let kept = ledger.record(service.to_owned(), now, until);
        if tokio::time::timeout(RECORD_TIMEOUT, kept).await.is_err() {
            tracing::warn!(
                service,
                "cannot keep the service's pause in time; a later process may call it before {until}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Kept(Mutex<Vec<(String, DateTime<Utc>)>>);

    impl PauseLedger for Kept {
        fn record(
            &self,
            service: String,
            _since: DateTime<Utc>,
            until: DateTime<Utc>,
        ) -> Pin<Box<dyn Future<Output = ()> + Send>> {
            locked(&self.0).push((service, until));
            Box::pin(async {})
        }
    }

    #[tokio::test]
    async fn one_gate_per_service_seeded_and_kept_by_the_ledger() {
        let now = DateTime::parse_from_rfc3339("2026-03-16T09:00:00Z")
            .expect("time")
            .with_timezone(&Utc);
        let (a, b) = ("test-a http://a.example/", "test-b http://b.example/");
        seed(a, now + chrono::Duration::seconds(5), now);
        seed(b, now - chrono::Duration::seconds(5), now);
        assert_eq!(
            gate(a).check(now).map(|(until, ())| until),
            Some(now + chrono::Duration::seconds(5)),
            "every client of a finds it shut"
        );
        assert_eq!(gate(b).check(now), None, "an ended pause is not seeded");

        let kept = Arc::new(Kept(Mutex::new(Vec::new())));
        set_ledger(kept.clone());
        pause(b, DateTime::<Utc>::MAX_UTC, now).await;
        let day = now + chrono::Duration::hours(24);
        assert_eq!(gate(b).check(now).map(|(until, ())| until), Some(day));
        assert!(
            locked(&kept.0).contains(&(b.to_owned(), day)),
            "the ledger keeps the capped moment"
        );
    }
}

//! The store writes a run cannot do without, tried again while the store is out of reach
//! (a full disk, a read-only file, Postgres restarting or dropping connections), so an
//! outage delays a run instead of stranding it. While a write waits, its worker is not
//! stopped: its output waits in the pipe and the runner's channel, and is stored once the
//! store is back.
//!
//! It must never retry a write the store refused for good (a bad value, a fenced save):
//! those go back to the caller at once.

use std::future::Future;

use crate::ops::queue as queue_ops;
use anyhow::Result;
use std::time::Duration;

/// How long a write is tried again before the run gives up on the store.
const PATIENCE: Duration = Duration::from_secs(15 * 60);
/// The longest wait between two tries.
const MAX_WAIT: Duration = Duration::from_secs(5);

/// The store's errors in `error`'s chain, those a queue operation and a run's ending carry
/// included: `QueueOpError::Store` and `EndError::Store` are transparent, so their store
/// error is no cause of its own in the chain.
pub(super) fn store_errors(
    error: &anyhow::Error,
) -> impl Iterator<Item = &crate::store::StoreError> {
    error.chain().filter_map(|cause| {
        cause
            .downcast_ref::<crate::store::StoreError>()
            .or_else(|| match cause.downcast_ref::<queue_ops::QueueOpError>() {
                Some(queue_ops::QueueOpError::Store(inner)) => Some(inner),
                _ => None,
            })
            .or_else(|| match cause.downcast_ref::<crate::ops::end::EndError>() {
                Some(crate::ops::end::EndError::Store(inner)) => Some(inner),
                _ => None,
            })
    })
}

/// Whether `error` says the store is out of reach for a while.
pub(super) fn transient(error: &anyhow::Error) -> bool {
    store_errors(error).any(crate::store::StoreError::is_transient)
}

/// `op`, tried again with a growing wait while it fails because the store is out of
/// reach, for up to [`PATIENCE`]; `what` names the write in the log.
pub(super) async fn durably<T, F, Fut>(what: &str, run_id: i64, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    use crate::runner::store_health::{this_process, Said};
    let started = tokio::time::Instant::now();
    let mut wait = Duration::from_millis(100);
    let mut failures = 0u32;
    loop {
        match op().await {
            Ok(value) => {
                if failures > 0 {
                    tracing::info!(
                        run = run_id,
                        what,
                        failures,
                        "the store is back; the run goes on"
                    );
                    if let Said::Ended(outage) = this_process().write_landed(run_id) {
                        let lasted = chrono::Utc::now() - outage.since;
                        tracing::warn!(
                            since = %outage.since,
                            lasted_s = lasted.num_seconds(),
                            caught_up = outage.caught_up,
                            "the store outage is over: every write that waited for it landed"
                        );
                    }
                }
                return Ok(value);
            }
            Err(error) if transient(&error) && started.elapsed() < PATIENCE => {
                failures += 1;
                if failures == 1 {
                    tracing::warn!(
                        run = run_id,
                        what,
                        error = format!("{error:#}"),
                        "the store is out of reach; trying again (the worker goes on)"
                    );
                    if this_process().write_waits(chrono::Utc::now(), run_id) == Said::Began {
                        tracing::error!(error = format!("{error:#}"), "the store is out of reach: runs wait for it (/metrics says since when)");
                    }
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(MAX_WAIT);
            }
            Err(error) => {
                if failures > 0 {
                    this_process().write_gave_up(run_id);
                }
                return Err(error);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// What SQLite answers a write to a read-only database (or a full disk: `DiskFull`).
    fn refused(code: std::ffi::c_int) -> anyhow::Error {
        crate::store::StoreError::Sqlite {
            path: PathBuf::from("executor.db"),
            source: rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None),
        }
        .into()
    }

    #[test]
    fn a_store_error_inside_a_queue_operations_error_is_seen() {
        let fenced_move: anyhow::Error =
            queue_ops::QueueOpError::Store(crate::store::StoreError::Fenced { run_id: 7 }).into();
        assert!(super::super::fenced(&fenced_move));
        let refused_move: anyhow::Error = queue_ops::QueueOpError::Store(
            match refused(rusqlite::ffi::SQLITE_READONLY).downcast::<crate::store::StoreError>() {
                Ok(error) => error,
                Err(other) => panic!("not a store error: {other}"),
            },
        )
        .into();
        assert!(transient(&refused_move));
        assert!(!super::super::fenced(&refused_move));
        let other: anyhow::Error = queue_ops::QueueOpError::NotFound("T-1".into()).into();
        assert!(!transient(&other) && !super::super::fenced(&other));
        // A run's ending carries its store error the same way, under context.
        let refused_end: anyhow::Error = crate::ops::end::EndError::Store(
            match refused(rusqlite::ffi::SQLITE_FULL).downcast::<crate::store::StoreError>() {
                Ok(error) => error,
                Err(other) => panic!("not a store error: {other}"),
            },
        )
        .into();
        let refused_end = refused_end.context("run of task T-1");
        assert!(transient(&refused_end));
    }

    #[tokio::test]
    async fn a_store_refusing_writes_for_a_while_delays_the_write_and_loses_nothing() {
        for code in [rusqlite::ffi::SQLITE_READONLY, rusqlite::ffi::SQLITE_FULL] {
            let tries = AtomicU32::new(0);
            let written = durably("a worker message", 1, || async {
                match tries.fetch_add(1, Ordering::SeqCst) {
                    0..=2 => Err(refused(code)),
                    n => Ok(n),
                }
            })
            .await
            .expect("written once the store takes writes again");
            assert_eq!(written, 3, "tried until the store took it, then not again");
            assert_eq!(tries.load(Ordering::SeqCst), 4);
        }
    }

    #[tokio::test]
    async fn a_write_the_store_refuses_for_good_goes_back_at_once() {
        let tries = AtomicU32::new(0);
        let fenced = durably("the run", 7, || async {
            tries.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(crate::store::StoreError::Fenced { run_id: 7 }.into())
        })
        .await;
        assert!(fenced.is_err());
        assert_eq!(
            tries.load(Ordering::SeqCst),
            1,
            "a fenced save is never retried"
        );
        let tries = AtomicU32::new(0);
        let bad = durably("the run", 7, || async {
            tries.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(refused(rusqlite::ffi::SQLITE_CONSTRAINT))
        })
        .await;
        assert!(bad.is_err());
        assert_eq!(tries.load(Ordering::SeqCst), 1, "a constraint is no outage");
    }
}

//! The store writes a run cannot do without, tried again while the store is out of reach
//! (a full disk, a read-only file, Postgres restarting or dropping connections), so an
//! outage delays a run instead of stranding it. While a write waits, its worker is not
//! stopped: its output waits in the pipe and the runner's channel, and is stored once the
//! store is back.
//!
//! It must never retry a write the store refused for good (a bad value, a fenced save):
//! those go back to the caller at once.

use std::future::Future;

use super::*;

/// How long a write is tried again before the run gives up on the store.
const PATIENCE: Duration = Duration::from_secs(15 * 60);
/// The longest wait between two tries.
const MAX_WAIT: Duration = Duration::from_secs(5);

/// Whether `error` says the store is out of reach for a while.
fn transient(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<crate::store::StoreError>()
            .is_some_and(crate::store::StoreError::is_transient)
    })
}

/// `op`, tried again with a growing wait while it fails because the store is out of
/// reach, for up to [`PATIENCE`]; `what` names the write in the log.
pub(super) async fn durably<T, F, Fut>(what: &str, run_id: i64, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
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
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(MAX_WAIT);
            }
            Err(error) => return Err(error),
        }
    }
}

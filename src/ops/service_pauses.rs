//! The store as the HTTP layer's pause ledger ([`crate::http::pauses`]): at a runner's
//! start the pauses still in force are read back into this process's gates, and every new
//! one (a 429's `Retry-After`) is kept, so a `run --once` started inside the wait sends
//! nothing to that service until it ends.
//!
//! What it must never do: fail a runner's start or a request because the store cannot
//! keep or give a pause (the limit is then met again at worst, as before it was kept).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::http::pauses::{self, PauseLedger};
use crate::store::{ServicePause, Store};

struct StoreLedger(Arc<dyn Store>);

impl PauseLedger for StoreLedger {
    fn record(
        &self,
        service: String,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let store = self.0.clone();
        Box::pin(async move {
            let pause = ServicePause {
                service,
                since,
                until,
            };
            match store.pause_service(&pause).await {
                Ok(()) => {
                    tracing::info!(service = pause.service, %until, "service paused until its limit lifts")
                }
                Err(error) => {
                    tracing::warn!(service = pause.service, %error, "cannot keep the service's pause")
                }
            }
        })
    }
}

/// Seeds this process's gates from the pauses `store` keeps that are still in force at
/// `now`, and keeps every later one there. Answers how many were seeded.
pub async fn install(store: Arc<dyn Store>, now: DateTime<Utc>) -> usize {
    let seeded = match store.service_pauses(now).await {
        Ok(kept) => {
            for pause in &kept {
                pauses::seed(&pause.service, pause.until, now);
                tracing::info!(service = pause.service, until = %pause.until, "a service is still rate limiting: nothing is sent to it before then");
            }
            kept.len()
        }
        Err(error) => {
            tracing::warn!(%error, "cannot read the services' pauses; a limit met before may be met again");
            0
        }
    };
    pauses::set_ledger(Arc::new(StoreLedger(store)));
    seeded
}

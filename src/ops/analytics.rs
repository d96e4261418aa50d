//! The outcome figures of the runs started in a window of days ([`crate::core::analytics`]
//! computes them), as `executor stats`, the console's `/api/v1/analytics` and its Insights
//! read them: one read of the store, bounded to the newest [`MAX_RUNS`] runs of the window.
//!
//! What it must never do: read more than [`MAX_RUNS`] runs, or hide that it cut the
//! window (`cut` says so).

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::core::analytics::{compute, facts_of, Analytics};
use crate::store::{Store, StoreResult};

/// The most runs one report reads (the newest of its window).
pub const MAX_RUNS: u32 = 100_000;

/// The window a report covers when none is asked for.
pub const DEFAULT_DAYS: u32 = 30;

/// The figures of one window.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Runs started at or after this time.
    pub since: DateTime<Utc>,
    pub days: u32,
    /// The window held more runs than [`MAX_RUNS`]: its oldest were left out.
    pub cut: bool,
    #[serde(flatten)]
    pub figures: Analytics,
}

/// The report of the `days` before `now`.
pub async fn report(store: &dyn Store, now: DateTime<Utc>, days: u32) -> StoreResult<Report> {
    let days = days.clamp(1, 3650);
    let since = now - Duration::days(i64::from(days));
    let mut outcomes = store.outcomes_since(since, MAX_RUNS + 1).await?;
    let cut = outcomes.runs.len() > MAX_RUNS as usize;
    outcomes.runs.truncate(MAX_RUNS as usize);
    Ok(Report {
        since,
        days,
        cut,
        figures: compute(&facts_of(&outcomes)),
    })
}

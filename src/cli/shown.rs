//! How a time and a run's stage read to a person: the one wording the CLI's tables, the
//! console's pages and the JSON-less outputs share.
//!
//! What it must never do: read a store or print; these are pure renderings.

use chrono::{DateTime, Utc};

use crate::core::record::Run;

/// A time as the person at this terminal reads it: local, to the second.
pub(crate) fn local_time(at: &DateTime<Utc>) -> String {
    at.with_timezone(&chrono::Local)
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// Where the run is, as a person reads it: `waiting: escalation N` for a question with the
/// owner, else the lifecycle stage's name; `-` for a run from before stages were kept.
pub(crate) fn stage(run: &Run) -> String {
    use crate::core::lifecycle::Stage;
    match run.lifecycle.as_ref() {
        Some(view) => match &view.stage {
            Stage::WaitingOnOwner { escalation } => format!("waiting: escalation {escalation}"),
            Stage::RetryDelay { until } => format!("retry at {}", local_time(until)),
            Stage::UsageLimit { until, .. } => {
                format!("usage limit: resumes at {}", local_time(until))
            }
            Stage::Reviewing { round } => format!("reviewing (round {round})"),
            _ => view.stage_name().to_string(),
        },
        None => "-".to_string(),
    }
}

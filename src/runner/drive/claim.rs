//! Whether this runner still holds the claim on a run it carries: the owner's cancel
//! (`ops::run`) and a takeover both raise the run's lease epoch, and a runner that finds
//! it raised stops the run's worker and writes nothing more for it.

use crate::core::record::Run;
use crate::store::Store;
use anyhow::Result;

/// Whether this runner still holds `run`'s claim (its lease epoch is unchanged).
pub(super) async fn still_ours(store: &dyn Store, run: &Run) -> Result<bool> {
    Ok(store
        .runs(Some(&run.task_gid))
        .await?
        .iter()
        .find(|r| r.id == run.id)
        .is_some_and(|r| r.lease_epoch == run.lease_epoch))
}

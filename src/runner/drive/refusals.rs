//! The wall's network refusals at the edge. The worker's gate reports each `CONNECT` its
//! proxy refuses into a tally ([`crate::core::net_refusals`] decides what is written when,
//! and what is new to the run); this module reads the run's refusals so far, writes the
//! tally while the worker runs (coalesced, every few seconds at most) and once more at its
//! end, and tells the owner once of each host and port new to the run, with the `[sandbox]
//! allow` line that would permit it. Each write of new ones appends a `net_refused` entry
//! to the task's history, which `show` and the console's live feed show.
//!
//! What can be seen is what passes through the proxy: a worker connecting straight to a
//! loopback port that is not forwarded is refused by its own network namespace, which
//! tells no one, so that is not recorded.
//!
//! What it must never do: write once per refusal, fail or stop the worker because a write
//! failed (a write that failed goes with the next), or keep anything of a request but its
//! host and port.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::core::net_refusals::{self, NetRefusal, Tally, Target, Write};
use crate::core::record::{NewEvent, Run};
use crate::runner::drive::WorkerRun;
use crate::sandbox::proxy::{NetGate, Refusal};
use crate::store::NetRefusalEvent;

/// The history entry's kind for refusals new to a run.
pub const NET_REFUSED: &str = "net_refused";

/// One worker's refusals, from its start to its end.
pub(super) struct Refusals {
    run_id: i64,
    gid: String,
    tally: Arc<Mutex<Tally>>,
    /// The owner's `[sandbox] allow` entries, which an allow line keeps.
    configured: Vec<String>,
}

/// What the wall refused a worker, when it ended.
#[derive(Debug, Default)]
pub(super) struct Refused {
    /// One row per host and port, its whole count.
    pub(super) rows: Vec<NetRefusal>,
    /// Refusals past the run's cap of hosts and ports, which no row holds.
    pub(super) past_cap: u64,
}

fn held(tally: &Mutex<Tally>) -> MutexGuard<'_, Tally> {
    // A panic while the lock was held leaves a tally that is still whole: counts only.
    tally
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Refusals {
    /// Starts tallying what `gate` refuses the worker of `run` (before the worker starts, so
    /// nothing it does goes unreported). `None` without a gate: the worker has no proxy.
    pub(super) async fn watch(
        w: &WorkerRun<'_>,
        run: &Run,
        gate: Option<&NetGate>,
    ) -> Option<Refusals> {
        let gate = gate?;
        // What the run was refused before is not new: its owner was told. A store out of
        // reach only risks telling again.
        let recorded: Vec<Target> = match w.store.net_refusals(w.gid).await {
            Ok(rows) => rows
                .iter()
                .filter(|r| r.run_id == run.id)
                .map(NetRefusal::target)
                .collect(),
            Err(error) => {
                tracing::warn!(gid = %w.gid, run = run.id, %error, "cannot read the run's network refusals; a refusal may be told again");
                Vec::new()
            }
        };
        let tally = Arc::new(Mutex::new(Tally::new(run.id, w.gid, recorded)));
        let (counted, clock) = (tally.clone(), w.settings.clock.clone());
        gate.report_refusals(Arc::new(move |refusal: Refusal| {
            let target = Target {
                host: refusal.target.host,
                port: refusal.target.port,
            };
            held(&counted).refused(target, refusal.why, clock.now());
        }));
        Some(Refusals {
            run_id: run.id,
            gid: w.gid.to_string(),
            tally,
            configured: w
                .settings
                .wall
                .allow()
                .iter()
                .map(ToString::to_string)
                .collect(),
        })
    }

    /// Writes what the tally says is due now, if anything: tried once, a write the store
    /// did not take is held for the next (the worker goes on meanwhile).
    pub(super) async fn write_due(&self, w: &WorkerRun<'_>) {
        let due = held(&self.tally).take(w.settings.clock.now(), false);
        let Some(write) = due else {
            return;
        };
        let event = self.event(w, &write);
        match w
            .store
            .record_net_refusals(&write.rows, event.as_ref())
            .await
        {
            Ok(()) => self.tell(w, &write.new).await,
            Err(error) => {
                tracing::warn!(gid = %self.gid, run = self.run_id, %error, "cannot record the wall's network refusals; they go with the next write");
                held(&self.tally).restore(write);
            }
        }
    }

    /// The worker ended: writes what is pending (waiting for a store out of reach, as the
    /// worker's own end does), and says what it was refused.
    pub(super) async fn end(self, w: &WorkerRun<'_>) -> Refused {
        let last = held(&self.tally).take(w.settings.clock.now(), true);
        if let Some(write) = last {
            let event = self.event(w, &write);
            let written = super::patience::durably("the network refusals", self.run_id, || async {
                Ok(w.store
                    .record_net_refusals(&write.rows, event.as_ref())
                    .await?)
            })
            .await;
            match written {
                Ok(()) => self.tell(w, &write.new).await,
                Err(error) => {
                    tracing::error!(gid = %self.gid, run = self.run_id, error = format!("{error:#}"), "cannot record the wall's network refusals; they are lost")
                }
            }
        }
        let tally = held(&self.tally);
        if tally.past_cap() > 0 {
            tracing::warn!(gid = %self.gid, run = self.run_id, refused = tally.past_cap(), max = net_refusals::MAX_TARGETS, "the wall refused more hosts and ports than are recorded for one run; the rest were only counted");
        }
        Refused {
            rows: tally.this_worker(),
            past_cap: tally.past_cap(),
        }
    }

    /// The history entry of what is new in `write`, if anything is.
    fn event(&self, w: &WorkerRun<'_>, write: &Write) -> Option<NetRefusalEvent> {
        (!write.new.is_empty()).then(|| NetRefusalEvent {
            task_gid: self.gid.clone(),
            run_id: self.run_id,
            event: NewEvent {
                kind: NET_REFUSED.to_string(),
                actor: "runner".to_string(),
                detail: Some(net_refusals::sentence(&self.configured, &write.new)),
                at: w.settings.clock.now(),
            },
        })
    }

    /// Tells the owner of refusals `new` to the run, once they are recorded.
    async fn tell(&self, w: &WorkerRun<'_>, new: &[NetRefusal]) {
        for row in new {
            tracing::warn!(gid = %self.gid, run = self.run_id, target = %row.target(), why = row.kind.as_str(), "the wall refused the worker's network");
        }
        if !new.is_empty() {
            let body =
                crate::chat::text::net_refused(self.run_id, &self.gid, new, &self.configured);
            let notice = crate::chat::Notice::orchestrator(
                crate::core::outbox::Priority::Action,
                self.gid.clone(),
                Some(self.run_id),
                body,
            );
            w.settings.notices.tell(w.store, notice).await;
        }
    }
}

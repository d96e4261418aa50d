//! Run leases: this runner's claim on the runs it carries, taken, renewed and given back.
//! A claim is fenced by the run's lease epoch; this module never decides what a run does.

use crate::core::clock::Clock;
use crate::store::Store;
use crate::supervisor::{self};
use anyhow::Result;
use chrono::Utc;
use std::sync::Arc;
use std::time::Duration;

/// How long a run's lease lasts without renewal; [`keep_leases`] renews it three times in
/// that span while the runner lives.
pub const LEASE_TTL: Duration = Duration::from_secs(60);

/// This process's lease span (`[runner] lease_ttl`): one per process, set when its runner
/// is built; [`LEASE_TTL`] until then.
pub(super) static LEASE_SPAN: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();

/// Sets this process's lease span (the first call wins).
pub fn set_lease_ttl(ttl: Duration) {
    let _ = LEASE_SPAN.set(ttl.max(Duration::from_secs(1)));
}

pub(super) fn lease_ttl() -> Duration {
    LEASE_SPAN.get().copied().unwrap_or(LEASE_TTL)
}

/// The holder of this process's leases.
pub fn this_runner() -> crate::core::lease::Holder {
    let pid = std::process::id();
    crate::core::lease::Holder {
        host: host(),
        pid,
        start: supervisor::group::start_time(pid),
    }
}

/// This runner's lease renewals, as the heartbeat its workers' keepers hold (see
/// `crate::sandbox::keeper`): each worker's beats only while [`keep_leases`] runs and
/// renews the lease of that worker's own run.
#[derive(Debug)]
pub struct LeaseBeat {
    /// The last renewal that landed, of any lease: a new worker's first silence counts
    /// from it (its run's lease was taken or renewed no earlier).
    renewed: tokio::sync::watch::Sender<tokio::time::Instant>,
    /// Each run with a worker that holds a heartbeat: its own renewals.
    runs: std::sync::Mutex<
        std::collections::HashMap<i64, tokio::sync::watch::Sender<tokio::time::Instant>>,
    >,
    kept: std::sync::atomic::AtomicBool,
    /// A worker about to start asks [`keep_leases`] for a renewal now.
    wanted: tokio::sync::Notify,
}

impl LeaseBeat {
    pub fn new() -> Arc<Self> {
        Arc::new(LeaseBeat {
            renewed: tokio::sync::watch::Sender::new(tokio::time::Instant::now()),
            runs: std::sync::Mutex::new(std::collections::HashMap::new()),
            kept: std::sync::atomic::AtomicBool::new(false),
            wanted: tokio::sync::Notify::new(),
        })
    }

    /// Whether a renewal began within `max_age` (asking the lease keeper for one now when
    /// the last is older, and waiting up to `wait` for it). A worker starts only on a
    /// fresh lease: its keeper's patience counts from the last renewal, so a worker
    /// started while renewals fail (the store just back from an outage longer than the
    /// lease) would be stopped at once for a silence that is not its own. True where no
    /// lease keeper runs (no heartbeat either).
    pub async fn fresh(&self, max_age: Duration, wait: Duration) -> bool {
        if !self.kept.load(std::sync::atomic::Ordering::SeqCst) {
            return true;
        }
        let asked = tokio::time::Instant::now();
        let young = |at: &tokio::time::Instant| asked.saturating_duration_since(*at) <= max_age;
        let mut renewed = self.renewed.subscribe();
        if young(&renewed.borrow()) {
            return true;
        }
        self.wanted.notify_one();
        let landed = tokio::time::timeout(wait, renewed.wait_for(young))
            .await
            .is_ok_and(|r| r.is_ok());
        landed
    }

    /// The heartbeat for a worker of run `run_id` started now: `None` where no lease
    /// keeper runs (a worker of a runner that holds no lease must not be stopped for a
    /// silence nobody breaks).
    pub fn heartbeat(&self, run_id: i64) -> Option<crate::supervisor::Heartbeat> {
        if !self.kept.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        let mut runs = self
            .runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let last = *self.renewed.borrow();
        let renewed = runs
            .entry(run_id)
            .or_insert_with(|| tokio::sync::watch::Sender::new(last))
            .subscribe();
        Some(crate::supervisor::Heartbeat {
            renewed,
            patience: crate::supervisor::heartbeat::patience(lease_ttl()),
        })
    }

    /// A renewal that began at `started` landed for the leases of `renewed` (by run id):
    /// a beat to their workers, and none to a worker whose run's lease another runner took.
    fn beat(&self, started: tokio::time::Instant, renewed: &[i64]) {
        self.renewed.send_replace(started);
        let mut runs = self
            .runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        runs.retain(|_, sender| !sender.is_closed());
        for run in renewed {
            if let Some(sender) = runs.get(run) {
                sender.send_replace(started);
            }
        }
    }
}

/// Renews this runner's leases until the task is dropped; a renewal that fails is logged
/// and tried again at the next beat (the lease lasts three beats). Each renewal that
/// lands is a beat to the keepers of the workers whose runs' leases it renewed; while
/// renewals fail, none is, so a worker is stopped before its lease can lapse.
pub async fn keep_leases(
    store: Arc<dyn Store>,
    holder: Arc<crate::core::lease::Holder>,
    clock: Arc<dyn Clock>,
    beat: Arc<LeaseBeat>,
) {
    struct Kept(Arc<LeaseBeat>);
    impl Drop for Kept {
        fn drop(&mut self) {
            self.0
                .kept
                .store(false, std::sync::atomic::Ordering::SeqCst);
        }
    }
    beat.kept.store(true, std::sync::atomic::Ordering::SeqCst);
    let kept = Kept(beat);
    let id = holder.id();
    let mut tick = tokio::time::interval(lease_ttl() / 3);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = kept.0.wanted.notified() => {}
        }
        let started = tokio::time::Instant::now();
        match store.renew_leases(&id, lease_until(clock.now())).await {
            // The lease runs from before the write, so the beat says so.
            Ok(renewed) => kept.0.beat(started, &renewed),
            Err(error) => tracing::warn!(%error, "cannot renew this runner's run leases"),
        }
    }
}

/// When a lease taken or renewed at `now` ends.
pub(super) fn lease_until(now: chrono::DateTime<Utc>) -> chrono::DateTime<Utc> {
    now + chrono::Duration::from_std(lease_ttl()).unwrap_or(chrono::Duration::seconds(60))
}

/// Takes run `run_id`'s lease for this runner if no live runner holds it (see
/// [`crate::core::lease::claim`]): the lease epoch every save of the run is then fenced
/// by; `None`, after saying who holds it, when a live runner does.
pub(super) async fn take_run(
    store: &dyn Store,
    holder: &crate::core::lease::Holder,
    clock: &dyn Clock,
    run_id: i64,
) -> Result<Option<i64>> {
    use crate::core::lease::{claim, Claim};
    let lease = store.lease(run_id).await?;
    let now = clock.now();
    let alive = |h: &crate::core::lease::Holder| {
        h.start.is_some() && supervisor::group::start_time(h.pid) == h.start
    };
    let steal = match claim(lease.as_ref(), holder, now, alive) {
        Claim::Take => None,
        Claim::TakeOver { from } => Some(from),
        Claim::Held { holder, until } => {
            tracing::info!(run = run_id, %holder, until = %until, "another runner carries this run; leaving it");
            return Ok(None);
        }
    };
    Ok(store
        .take_lease(
            run_id,
            &holder.id(),
            now,
            lease_until(now),
            steal.as_deref(),
        )
        .await?)
}

/// Gives a run's lease back once this runner stops carrying it (best effort: an unreleased
/// lease expires).
pub(super) async fn release_run(
    store: &dyn Store,
    holder: &crate::core::lease::Holder,
    run_id: i64,
) {
    if let Err(error) = store.release_lease(run_id, &holder.id()).await {
        tracing::warn!(run = run_id, %error, "cannot release the run's lease; it expires on its own");
    }
}

impl super::Runner {
    /// Gives run `run_id`'s lease back as this process stops carrying it. When the store
    /// cannot take that now, the run is remembered in [`super::Runner::left`]: this
    /// runner's renewals would otherwise keep it leased, and nobody would take it up.
    pub(super) async fn let_go(&self, run_id: i64) {
        if let Err(error) = self.store.release_lease(run_id, &self.holder.id()).await {
            tracing::warn!(run = run_id, %error, "cannot give the run's lease back; recovery gives it back and carries the run on");
            self.left_runs().insert(run_id);
        }
    }

    /// Gives back the leases [`Self::let_go`] could not, as far as the store takes them now;
    /// the runs given back are free for recovery to carry on. Returns the runs still left
    /// (the store refused again): the pass reports them as handed back, so that recovery
    /// stays due and gives them back at its next look instead of leaving them leased to a
    /// runner that no longer carries them.
    pub(super) async fn give_back_left(&self) -> Vec<i64> {
        let left: Vec<i64> = self.left_runs().iter().copied().collect();
        let mut still_left = Vec::new();
        for run_id in left {
            match self.store.release_lease(run_id, &self.holder.id()).await {
                Ok(()) => {
                    self.left_runs().remove(&run_id);
                }
                Err(error) => {
                    tracing::warn!(run = run_id, %error, "cannot give the run's lease back yet");
                    still_left.push(run_id);
                }
            }
        }
        still_left
    }

    fn left_runs(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<i64>> {
        self.left
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// This machine's name, as worker records carry it.
pub fn host() -> String {
    gethostname::gethostname().to_string_lossy().into_owned()
}

/// Whether a live runner other than `me` holds run `run_id`'s lease (its workers are its
/// own business).
pub(super) async fn carried_by_live_runner(
    store: &dyn Store,
    me: &crate::core::lease::Holder,
    now: chrono::DateTime<Utc>,
    run_id: i64,
) -> Result<bool> {
    use crate::core::lease::{claim, Claim};
    let lease = store.lease(run_id).await?;
    if lease.as_ref().is_some_and(|l| l.holder == me.id()) {
        return Ok(true);
    }
    let alive = |h: &crate::core::lease::Holder| {
        h.start.is_some() && supervisor::group::start_time(h.pid) == h.start
    };
    Ok(matches!(
        claim(lease.as_ref(), me, now, alive),
        Claim::Held { .. }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_worker_starts_only_on_a_fresh_lease_and_asks_for_one_when_the_last_is_old() {
        let beat = LeaseBeat::new();
        let ms = Duration::from_millis;
        assert!(
            beat.fresh(ms(0), ms(10)).await,
            "no lease keeper: nothing to wait for"
        );
        beat.kept.store(true, std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(ms(30)).await;
        // Renewals do not land (nobody beats): not fresh once the wait is over.
        assert!(!beat.fresh(ms(5), ms(50)).await);
        // A keeper that renews when asked: fresh.
        let keeper = {
            let beat = beat.clone();
            tokio::spawn(async move {
                loop {
                    beat.wanted.notified().await;
                    beat.beat(tokio::time::Instant::now(), &[]);
                }
            })
        };
        assert!(beat.fresh(ms(5), Duration::from_secs(30)).await);
        keeper.abort();
    }

    #[test]
    fn a_renewal_beats_only_the_workers_of_the_runs_it_renewed() {
        let beat = LeaseBeat::new();
        assert!(beat.heartbeat(1).is_none(), "no lease keeper, no heartbeat");
        beat.kept.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut kept = beat.heartbeat(1).expect("a heartbeat").renewed;
        let taken = beat.heartbeat(2).expect("a heartbeat").renewed;
        let at = tokio::time::Instant::now();
        // Run 2's lease went to another runner: this runner's renewal no longer covers it.
        beat.beat(at, &[1, 3]);
        assert!(kept.has_changed().expect("open"));
        assert_eq!(*kept.borrow_and_update(), at);
        assert!(!taken.has_changed().expect("open"), "a lost run was beaten");
        // A worker started later counts its first silence from the last renewal.
        let later = beat.heartbeat(4).expect("a heartbeat").renewed;
        assert_eq!(*later.borrow(), at);
        // A worker's end lets its run's sender go at the next renewal.
        drop((taken, later));
        beat.beat(at, &[1]);
        let runs = beat.runs.lock().expect("lock");
        assert!(!runs.contains_key(&2) && !runs.contains_key(&4), "{runs:?}");
        assert!(runs.contains_key(&1));
    }
}

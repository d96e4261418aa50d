//! The run engine's scheduler: one loop for the daemon and for `run --once` alike (docs/design.md
//! §10). It starts the passes that carry runs (recovery, approved tasks, answered
//! escalations, PR looks) as work appears, each on a task of its own, and hears each one
//! end. The daemon feeds it wake-ups, timers and webhook deliveries and runs until it is
//! stopped; `run --once` feeds it nothing more and stops by the exit rule of docs/design.md
//! §3: no live workers and nothing actionable left.
//!
//! What a run does next is never decided here: passes carry runs by their lifecycle
//! (`core::lifecycle`) and the PR machine (`core::pr`). This module only decides *when* to
//! look, and never holds a worker slot itself.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::core::queue::QueueStatus;
use crate::runner::drive::{self, Passed, Runner};

/// Which kind of pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    /// What a runner that died left, carried on.
    Recovery,
    /// Approved tasks, each taken as a slot frees.
    Approved,
    /// Runs whose escalation the owner answered.
    Resumed,
    /// One look at every open PR.
    PrLook,
}

/// What the scheduler hears.
#[derive(Debug)]
pub enum Note {
    /// A pass ended, with what its runs did (or why it failed as a whole).
    Ended {
        kind: PassKind,
        passed: anyhow::Result<Passed>,
    },
    /// Something outside the passes (a source poll, the analyzer) may have approved work.
    NewWork,
}

/// What a look at this process's own work did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Looked {
    /// A parent of subtasks moved (merged, split or completed).
    pub parents_moved: bool,
    /// The owner's answers to the record step taken.
    pub record_answers: usize,
}

/// Starts passes as work appears and hears them end. Only live workers hold slots (the
/// runner's semaphore); a pass waiting on its runs takes nothing new, so another starts
/// beside it when approved work comes, and the cap still holds.
pub struct Scheduler {
    runner: Runner,
    /// Every pass started, so stopping the scheduler stops their workers.
    passes: Vec<JoinHandle<()>>,
    pr_look: Option<JoinHandle<()>>,
    /// Passes started whose end has not been heard yet.
    running: usize,
    /// A wake-up left to a pass that was still claiming: it may have been past its last
    /// look, so approved tasks are looked at again when it ends.
    deferred: bool,
    /// A PR look asked for while one was going: another follows it.
    pr_again: bool,
    /// A pass failed (the store out of reach, a run that could not be carried): the next
    /// full look runs recovery, which carries on every run left without a runner, as at
    /// start but without a restart.
    recover_due: bool,
    /// A recovery started because one was due is going: if it fails, it is due again.
    recovering: bool,
    last_pr_look: Option<Instant>,
    /// Each pass over approved tasks ends by removing worktrees past their retention (the
    /// daemon's way); off, the caller cleans them once at its end (`run --once`'s way).
    clean_after_passes: bool,
    tx: mpsc::UnboundedSender<Note>,
    rx: mpsc::UnboundedReceiver<Note>,
}

impl Scheduler {
    pub fn new(runner: Runner) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            runner,
            passes: Vec::new(),
            pr_look: None,
            running: 0,
            deferred: false,
            pr_again: false,
            recover_due: false,
            recovering: false,
            last_pr_look: None,
            clean_after_passes: true,
            tx,
            rx,
        }
    }

    /// A scheduler whose passes leave finished worktrees for the caller to clean.
    pub fn cleaning_at_the_end(runner: Runner) -> Self {
        Self {
            clean_after_passes: false,
            ..Self::new(runner)
        }
    }

    /// Where background work outside the passes says new work may be approved.
    pub fn sender(&self) -> mpsc::UnboundedSender<Note> {
        self.tx.clone()
    }

    /// The first pass: what a previous runner left is reconciled, then approved tasks.
    pub fn start(&mut self) {
        self.start_pass(true);
    }

    /// Whether recovery is to run at the next full look (a pass failed or handed runs back).
    pub fn recovery_due(&self) -> bool {
        self.recover_due
    }

    /// Whether a pass or a PR look is still going.
    pub fn busy(&self) -> bool {
        self.running > 0
    }

    /// The next thing heard. Never ends: the scheduler holds a sender itself.
    pub async fn next(&mut self) -> Note {
        match self.rx.recv().await {
            Some(note) => note,
            None => std::future::pending().await,
        }
    }

    /// Takes what was heard into account: a pass that ended may leave approved work to
    /// look at, a PR look that ended may have another asked for meanwhile.
    pub async fn heard(&mut self, note: &Note) {
        let look = match note {
            Note::Ended { kind, passed } => {
                self.running = self.running.saturating_sub(1);
                let was_due = *kind == PassKind::Recovery && std::mem::take(&mut self.recovering);
                self.recover_due |= recovery_due_after(*kind, passed, was_due);
                match kind {
                    PassKind::PrLook => {
                        if std::mem::take(&mut self.pr_again) {
                            self.look_at_prs(true);
                        }
                        false
                    }
                    PassKind::Approved => std::mem::take(&mut self.deferred),
                    PassKind::Recovery | PassKind::Resumed => false,
                }
            }
            Note::NewWork => true,
        };
        if look {
            self.claim_waiting().await;
        }
    }

    /// The full look: parents and the record step, the owner's answers, approved tasks.
    pub async fn wake(&mut self) -> Looked {
        let looked = self.look_in_process().await;
        if std::mem::take(&mut self.recover_due) {
            self.start_recovery();
        }
        // An owner's answer resumes its run whatever else is going on (each answer is
        // taken exactly once, so a second pass looking at it does no harm).
        match drive::has_decided(self.runner.store.as_ref()).await {
            Ok(true) => self.start_resume_pass(),
            Ok(false) => {}
            Err(error) => tracing::warn!(%error, "cannot look for answered escalations"),
        }
        self.claim_waiting().await;
        looked
    }

    /// What only this process's own runs change: parents of subtasks and the record step.
    /// A subtask made ready is claimed at once.
    pub async fn look_in_process(&mut self) -> Looked {
        // Parents waiting for their subtasks: merge what completed, split what failed,
        // complete what is whole.
        let moved = match drive::tick_parents(&self.runner).await {
            Ok(moved) => moved,
            Err(error) => {
                tracing::warn!(
                    error = format!("{error:#}"),
                    "cannot look at the parents of subtasks"
                );
                false
            }
        };
        // The owner's answers to the record step's escalations (its runs are complete, so
        // nothing resumes them), each carried out once.
        let settings = &self.runner.settings;
        let record_answers = match settings
            .recorder
            .apply_decided(
                self.runner.store.as_ref(),
                &settings.notices,
                settings.clock.now(),
            )
            .await
        {
            Ok(taken) => taken,
            Err(error) => {
                tracing::warn!(%error, "cannot take the owner's answers to the record step");
                0
            }
        };
        if moved {
            self.claim_waiting().await;
        }
        Looked {
            parents_moved: moved,
            record_answers,
        }
    }

    /// Looks at approved tasks again if a wake-up was left to a pass that was ending.
    pub async fn retry_deferred(&mut self) {
        if std::mem::take(&mut self.deferred) {
            self.claim_waiting().await;
        }
    }

    /// Starts a pass when approved work is waiting and no pass is taking tasks. A pass still
    /// taking tasks is left to take it (and looked after when it ends).
    pub async fn claim_waiting(&mut self) {
        self.passes.retain(|p| !p.is_finished());
        if self.runner.is_claiming() {
            self.deferred = true;
            return;
        }
        match self
            .runner
            .store
            .tasks_page(Some(&QueueStatus::Approved), i64::MIN, 1)
            .await
        {
            Ok(waiting) if waiting.is_empty() => {}
            Ok(_) => self.start_pass(false),
            Err(error) => tracing::warn!(%error, "cannot look for approved tasks"),
        }
    }

    /// Whether the open PRs are due a look: always without webhooks, else once `every`
    /// has passed since the last (the poll only reconciles what a delivery missed).
    pub fn pr_look_due(&self, webhooks: bool, every: Duration) -> bool {
        !webhooks || self.last_pr_look.is_none_or(|at| at.elapsed() >= every)
    }

    /// Looks at the open PRs, unless a look is going (then another follows it when `again`
    /// asks). `fresh`: something changed on the forge, so its cached answers are dropped.
    pub fn look_at_prs(&mut self, fresh: bool) {
        let Some(forge) = &self.runner.settings.forge else {
            return;
        };
        if self.pr_look.as_ref().is_some_and(|t| !t.is_finished()) {
            self.pr_again |= fresh;
            return;
        }
        if fresh {
            forge.client.expire_cache();
        }
        self.last_pr_look = Some(Instant::now());
        let runner = self.runner.clone();
        self.pr_look = Some(self.spawn(
            PassKind::PrLook,
            async move { drive::tick_prs(&runner).await },
        ));
    }

    /// Whether this scheduler looks at PRs at all (a forge with PRs is configured).
    pub fn has_prs(&self) -> bool {
        self.runner.settings.forge.is_some()
    }

    /// Stops every pass: their workers are killed with their processes, and their runs
    /// stay `in_progress` for the recovery of the next start.
    pub fn stop(&mut self) {
        if let Some(look) = self.pr_look.take() {
            look.abort();
        }
        for pass in self.passes.drain(..) {
            pass.abort();
        }
    }

    /// Recovery alone, after a pass failed: what no live runner carries is carried on (this
    /// runner's own runs in flight are left to their passes).
    fn start_recovery(&mut self) {
        self.recovering = true;
        let runner = self.runner.clone();
        let pass = self.spawn(
            PassKind::Recovery,
            async move { drive::recover(&runner).await },
        );
        self.passes.push(pass);
    }

    fn start_resume_pass(&mut self) {
        let runner = self.runner.clone();
        let pass = self.spawn(PassKind::Resumed, async move {
            drive::resume_decided(&runner).await
        });
        self.passes.push(pass);
    }

    /// A pass over approved tasks (after recovery when `recover`), then retention.
    fn start_pass(&mut self, recover: bool) {
        let runner = self.runner.clone();
        let tx = self.tx.clone();
        let clean = self.clean_after_passes;
        if recover {
            // Recovery reports on its own; the approved tasks' pass follows it.
            self.running += 1;
        }
        let pass = self.spawn(PassKind::Approved, async move {
            if recover {
                let passed = drive::recover(&runner).await;
                let _ = tx.send(Note::Ended {
                    kind: PassKind::Recovery,
                    passed,
                });
            }
            let passed = drive::run_approved(&runner).await;
            if !clean {
                return passed;
            }
            if let Err(error) =
                drive::clean_worktrees(runner.store.as_ref(), &runner.settings).await
            {
                tracing::warn!(
                    error = format!("{error:#}"),
                    "cannot clean finished worktrees"
                );
            }
            passed
        });
        self.passes.push(pass);
    }

    /// Runs `pass` on a task of its own; its end is heard as [`Note::Ended`].
    fn spawn(
        &mut self,
        kind: PassKind,
        pass: impl std::future::Future<Output = anyhow::Result<Passed>> + Send + 'static,
    ) -> JoinHandle<()> {
        self.running += 1;
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let passed = pass.await;
            let _ = tx.send(Note::Ended { kind, passed });
        })
    }
}

/// Whether the end of a pass of `kind` makes recovery due at the next full look: every
/// run the pass held back (handed back, or left by a failure) is then reread from the
/// store and carried on from its stored stage, as at start. `was_due`: the pass was a
/// recovery started because one was due, which stays due until it carries its runs on.
/// The recovery at start that fails for another reason than the store (not a repository)
/// reports for itself and is not tried again at each look.
pub fn recovery_due_after(kind: PassKind, passed: &anyhow::Result<Passed>, was_due: bool) -> bool {
    match (kind, passed) {
        (PassKind::PrLook, _) => false,
        (_, Ok(passed)) if !passed.handed_back.is_empty() => true,
        (PassKind::Recovery, Ok(_)) => false,
        (PassKind::Recovery, Err(error)) => was_due || drive::store_out_of_reach(error),
        (PassKind::Approved | PassKind::Resumed, Ok(passed)) => !passed.failed.is_empty(),
        (PassKind::Approved | PassKind::Resumed, Err(_)) => true,
    }
}

/// Logs what a pass did (the daemon's account of [`Note::Ended`]).
pub fn log_ended(kind: PassKind, passed: &anyhow::Result<Passed>) {
    let what = match kind {
        PassKind::Recovery => "recovered run ended",
        PassKind::Approved => "run ended",
        PassKind::Resumed => "resumed run ended",
        PassKind::PrLook => "PR step taken",
    };
    match passed {
        Ok(passed) => {
            for result in &passed.results {
                tracing::info!(gid = %result.task_gid, run = result.run_id, state = %result.state, waiting_on = ?result.waiting_on, "{what}");
            }
        }
        Err(error) => {
            tracing::error!(error = format!("{error:#}"), "{}", failed_pass(kind));
        }
    }
}

/// What failed, in words, when a pass of `kind` failed as a whole.
pub fn failed_pass(kind: PassKind) -> &'static str {
    match kind {
        PassKind::Recovery => "recovery failed",
        PassKind::Approved => "runner pass failed",
        PassKind::Resumed => "resuming answered runs failed",
        PassKind::PrLook => "the PR tick failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a pass meets when its store refuses writes (a read-only file).
    fn store_refused() -> anyhow::Error {
        anyhow::Error::from(crate::store::StoreError::Sqlite {
            path: std::path::PathBuf::from("executor.db"),
            source: rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY),
                None,
            ),
        })
        .context("claiming the next approved task")
    }

    fn passed(handed_back: &[i64], failed: &[&str]) -> anyhow::Result<Passed> {
        Ok(Passed {
            results: Vec::new(),
            failed: failed.iter().map(|f| f.to_string()).collect(),
            handed_back: handed_back.to_vec(),
        })
    }

    #[test]
    fn a_pass_whose_store_call_fails_leaves_its_runs_to_recovery_at_the_next_look() {
        for kind in [PassKind::Approved, PassKind::Resumed] {
            // Failed as a whole: whatever runs it held are reread and carried on.
            assert!(recovery_due_after(kind, &Err(store_refused()), false));
            // Runs handed back because a step met the outage.
            assert!(recovery_due_after(kind, &passed(&[3, 4], &[]), false));
            // A run that failed on its own.
            assert!(recovery_due_after(
                kind,
                &passed(&[], &["T-1: boom"]),
                false
            ));
            // Everything carried to an end: nothing is left for recovery.
            assert!(!recovery_due_after(kind, &passed(&[], &[]), false));
        }
        // A recovery that met the outage, at start or because it was due, is due again.
        assert!(recovery_due_after(
            PassKind::Recovery,
            &Err(store_refused()),
            false
        ));
        assert!(recovery_due_after(
            PassKind::Recovery,
            &passed(&[9], &[]),
            false
        ));
        assert!(recovery_due_after(
            PassKind::Recovery,
            &Err(anyhow::anyhow!("not a git repository")),
            true
        ));
        // The recovery at start failing for another reason reports for itself.
        assert!(!recovery_due_after(
            PassKind::Recovery,
            &Err(anyhow::anyhow!("not a git repository")),
            false
        ));
        assert!(!recovery_due_after(
            PassKind::Recovery,
            &passed(&[], &[]),
            true
        ));
        // A PR look carries no run of a worker's: its runs stay where they are stored.
        assert!(!recovery_due_after(
            PassKind::PrLook,
            &Err(store_refused()),
            false
        ));
    }
}

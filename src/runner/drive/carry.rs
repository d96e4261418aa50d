//! Carrying a run by its lifecycle: `core::lifecycle` decides each next action, the view
//! is stored, the action is performed here and its outcome is the next event. Nothing here
//! decides what comes next.

use super::{claim, commit, conduct, limits, patience, review, spent, verify};
use super::{RunResult, Runner, RunnerSettings, CLAIM_CHECK};
use crate::core::ending::{Origin, Outcome};
use crate::core::lifecycle;
use crate::core::record::Run;
use crate::core::run::RunState;
use crate::core::task::Task;
use crate::core::watchdog::StopReason;
use crate::prompts::{CiFailure, FailedCheck, Phase, PromptContext, RunContext, TaskContext};
use crate::runner::drive::abandon;
use crate::runner::drive::commit_checked;
use crate::runner::drive::complete_local;
use crate::runner::drive::end;
use crate::runner::drive::fenced;
use crate::runner::drive::open_escalation;
use crate::runner::drive::open_pr;
use crate::runner::drive::orchestrator_git;
use crate::runner::drive::record;
use crate::runner::drive::run_worker;
use crate::runner::drive::verified;
use crate::runner::drive::write_run_record;
use crate::runner::drive::Asked;
use crate::runner::drive::Worked;
use crate::runner::drive::WorkerRun;
use crate::runner::worktree;
use crate::store::Store;
use anyhow::{Context, Result};
use chrono::Utc;
use std::sync::Arc;

/// Where [`carry`] starts a run's next worker.
/// How a runner takes a run up.
pub(super) struct Start {
    /// The lifecycle event the run is carried on from.
    pub(super) event: lifecycle::Event,
    /// Continue the agent's session with no new prompt: the agent re-asks about the tool
    /// call it parked (its hook now finds the owner's answer).
    pub(super) continue_parked: bool,
    /// A worker slot already taken for the run's next worker.
    pub(super) slot: Option<tokio::sync::OwnedSemaphorePermit>,
    /// The run's place among those readied ahead of a free slot (see [`Runner`]), given
    /// up when its first worker takes a slot.
    pub(super) readied: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Start {
    pub(super) fn new(event: lifecycle::Event) -> Self {
        Self {
            event,
            continue_parked: false,
            slot: None,
            readied: None,
        }
    }

    /// What the next worker (or a goal's planner) is told about why it starts.
    pub(super) fn reason(&self) -> Option<String> {
        match &self.event {
            lifecycle::Event::Resumed { reason }
            | lifecycle::Event::Answered(lifecycle::Answer::Continue { reason }) => {
                Some(reason.clone())
            }
            _ => None,
        }
    }
}

/// The owner's limits, as the lifecycle of run `run_id` judges by them.
pub(super) fn rules(settings: &RunnerSettings, run_id: i64) -> lifecycle::Rules {
    lifecycle::Rules {
        max_worker_attempts: settings.max_worker_attempts,
        max_ci_attempts: settings.max_ci_attempts,
        // On a forge with PRs the PR's own review (`pr_review`) is the review.
        review_rounds: if settings.forge.is_none() {
            settings.conductor.review_rounds
        } else {
            0
        },
        retry_base: settings.retry_base,
        run_id,
    }
}

/// The phase (and prompt) of a worker the lifecycle starts.
pub(super) fn phase_of(work: lifecycle::Work) -> Phase {
    match work {
        lifecycle::Work::Start => Phase::Queued,
        lifecycle::Work::Resume => Phase::InProgress,
        lifecycle::Work::FixCi => Phase::FixCi,
    }
}

/// The view of a run from before executor kept one: working, with the counters its
/// columns hold.
pub(super) fn view_of(run: &Run) -> lifecycle::RunView {
    run.lifecycle.clone().unwrap_or_else(|| lifecycle::RunView {
        stage: lifecycle::Stage::Working {
            work: lifecycle::Work::Resume,
        },
        ci_attempts: u32::try_from(run.ci_attempts).unwrap_or(0),
        stuck: u32::try_from(run.worker_stuck_count).unwrap_or(0),
        ..lifecycle::RunView::default()
    })
}

/// A run being carried: what its actions need between one step and the next.
pub(super) struct Carried<'a> {
    pub(super) r: &'a Runner,
    pub(super) task: Task,
    pub(super) run: Run,
    pub(super) wt: worktree::Worktree,
    /// A worker slot taken for the next worker (the run's first, or a resumed one's).
    pub(super) slot: Option<tokio::sync::OwnedSemaphorePermit>,
    /// Held until the run's first worker has a slot (see [`Start::readied`]).
    pub(super) readied: Option<tokio::sync::OwnedSemaphorePermit>,
    pub(super) continue_parked: bool,
    /// The last worker, whose snapshot of the repository the orchestrator checks before
    /// it commits.
    pub(super) worked: Option<Worked>,
    /// What the last worker (or the orchestrator's check) left for the owner.
    pub(super) asked: Option<Asked>,
    pub(super) waiting_on: Option<i64>,
    pub(super) lease_released: bool,
    /// The last worker's end, recorded with the run's next write.
    pub(super) ended: Option<crate::core::record::WorkerEnd>,
}

/// Carries a claimed run from `start` by its lifecycle: the lifecycle decides each next
/// action (`core::lifecycle`), the view is stored, the action is performed here, and its
/// outcome is the next event. Returns when the run ends or waits on something outside (the
/// owner, its PR). A worker holds one of the runner's slots only while it lives.
pub(super) async fn carry(
    r: &Runner,
    task: Task,
    run: Run,
    wt: worktree::Worktree,
    start: Start,
) -> Result<RunResult> {
    let rules = rules(&r.settings, run.id);
    let mut c = Carried {
        r,
        task,
        run,
        wt,
        slot: start.slot,
        readied: start.readied,
        continue_parked: start.continue_parked,
        worked: None,
        asked: None,
        waiting_on: None,
        lease_released: false,
        ended: None,
    };
    let carried = steps(&mut c, &rules, start.event).await;
    // A worker's end no write took (the run failed, or was claimed elsewhere) is
    // recorded alone.
    let ended = c.end_recorded().await;
    carried.and(ended)?;
    Ok(RunResult {
        task_gid: c.task.task_gid,
        run_id: c.run.id,
        state: c.run.state.clone(),
        ci_attempts: c.run.ci_attempts,
        waiting_on: c.waiting_on,
        lease_released: c.lease_released,
    })
}

/// The lifecycle's steps of a carried run from `event` until it ends or waits.
async fn steps(
    c: &mut Carried<'_>,
    rules: &lifecycle::Rules,
    mut event: lifecycle::Event,
) -> Result<()> {
    let r = c.r;
    loop {
        let completed = matches!(event, lifecycle::Event::Completed);
        let (view, action) =
            lifecycle::decide(&view_of(&c.run), event, rules, r.settings.clock.now())?;
        tracing::debug!(gid = %c.task.task_gid, run = c.run.id, stage = view.stage_name(), ?action, "lifecycle");
        // A local completion (moved in memory by the integration) is written with its last
        // view, its task's move and its lease's release; the record step and the notice
        // follow it.
        if completed {
            c.complete(view).await?;
        } else if written_before(&action, !r.settings.verify.is_empty()) {
            c.save(view).await?;
        } else {
            c.hold(view);
        }
        event = match action {
            lifecycle::Action::StartWorker { work, attempt } => {
                c.start_worker(work, attempt).await?
            }
            lifecycle::Action::WaitUntil(until) => c.wait_until(until).await?,
            lifecycle::Action::Verify => c.verify().await?,
            lifecycle::Action::Review { round } => c.review(round).await?,
            lifecycle::Action::Integrate => c.integrate().await?,
            lifecycle::Action::AskOwner { ask, commit_first } => {
                c.ask_owner(ask, commit_first).await?
            }
            lifecycle::Action::Abandon { reason } => {
                c.end_recorded().await?;
                let holder = c.r.holder.id();
                let (store, settings) = (c.r.store.as_ref(), c.r.settings.as_ref());
                abandon(store, settings, &mut c.run, Origin::Local, &holder, &reason).await?;
                c.lease_released = true;
                return Ok(());
            }
            lifecycle::Action::Wait => return Ok(()),
            lifecycle::Action::Pr(_) => {
                anyhow::bail!(
                    "run {} is carried locally; its PR is the PR tick's",
                    c.run.id
                )
            }
        };
    }
}

/// The lifecycle's event for a worker that ended. `session`: the run has an agent
/// session a later worker continues.
pub(super) fn ended(worked: &Worked, session: bool) -> lifecycle::Event {
    lifecycle::Event::WorkerEnded {
        done: worked.done.is_some(),
        asked: worked.asked.is_some(),
        no_output: worked.stopped == Some(StopReason::NoOutput),
        // A model API that refused the request refuses the next worker too.
        retryable: lifecycle::retryable_api_status(
            worked.result["agent_result"]["api_error_status"]
                .as_u64()
                .and_then(|status| u16::try_from(status).ok()),
        ),
        why: worked.why.clone(),
        limited: worked.limited.map(|until| lifecycle::Limited {
            until,
            session,
            ran: true,
        }),
    }
}

/// Whether the run's new view is written before `action` is done. Verification with no
/// command runs nothing and ends at once, so its view is written with the decision that
/// follows: a crash in between leaves the run as the worker's end found it, which recovery
/// takes up the same way.
fn written_before(action: &lifecycle::Action, verify_command: bool) -> bool {
    // An abandonment's view is written by the ending itself, in its one write.
    !matches!(action, lifecycle::Action::Verify if !verify_command)
        && !matches!(action, lifecycle::Action::Abandon { .. })
}

impl Carried<'_> {
    /// The run's new lifecycle `view` (and the owner's columns it mirrors), in memory only.
    pub(super) fn hold(&mut self, view: lifecycle::RunView) {
        self.run.ci_attempts = i64::from(view.ci_attempts);
        self.run.worker_stuck_count = i64::from(view.stuck);
        self.run.lifecycle = Some(view);
        self.run.updated_at = self.r.settings.clock.now();
    }

    /// Stores the run with its new lifecycle `view` (and the owner's columns it mirrors),
    /// and the last worker's end if it is not recorded yet: one write.
    pub(super) async fn save(&mut self, view: lifecycle::RunView) -> Result<()> {
        self.hold(view);
        let (store, run) = (self.r.store.as_ref(), &self.run);
        let end = self.ended.take();
        let saved = patience::durably("the run's lifecycle", run.id, || async {
            match &end {
                Some(end) => store.save_run_ending_worker(run, end).await?,
                None => store.save_run(run).await?,
            }
            Ok(())
        })
        .await;
        // A fenced write recorded the worker's end all the same; any other failure did not.
        if saved.as_ref().is_err_and(|error| !fenced(error)) {
            self.ended = end;
        }
        saved
    }

    /// Records the last worker's end on its own, if no write of the run took it yet.
    pub(super) async fn end_recorded(&mut self) -> Result<()> {
        let Some(end) = self.ended.take() else {
            return Ok(());
        };
        let store = self.r.store.as_ref();
        patience::durably("the worker's end", self.run.id, || async {
            Ok(store.end_worker(end.id, end.at, &end.outcome).await?)
        })
        .await
    }

    /// Completes the run on the local forge with its last lifecycle `view`: the run, its
    /// task's move to `done` and the release of its lease are one write; the record step
    /// and the owner's notice come after it.
    async fn complete(&mut self, view: lifecycle::RunView) -> Result<()> {
        self.end_recorded().await?;
        self.hold(view);
        let (r, gid) = (self.r, self.task.task_gid.clone());
        let (store, settings, holder) = (r.store.as_ref(), r.settings.as_ref(), r.holder.id());
        end(
            store,
            settings,
            &mut self.run,
            Origin::Local,
            Outcome::completed(),
            Some(&holder),
        )
        .await?;
        let (run, task) = (&self.run, &self.task);
        self.lease_released = true;
        tracing::info!(gid = %gid, run = run.id, ci_attempts = run.ci_attempts, "run complete");
        record(
            store,
            settings,
            task,
            run,
            &self.wt.path,
            verified(settings),
        )
        .await;
        settings
            .notices
            .tell_completed(store, &gid, run.id, None)
            .await;
        Ok(())
    }

    /// The slot held for the next worker, or a free one (waited for). A readied run gives
    /// its place up once it has one, so the pass readies the next.
    pub(super) async fn slot(&mut self) -> Result<tokio::sync::OwnedSemaphorePermit> {
        let slot = match self.slot.take() {
            Some(held) => held,
            None => Arc::clone(&self.r.slots).acquire_owned().await?,
        };
        drop(self.readied.take());
        Ok(slot)
    }

    pub(super) async fn start_worker(
        &mut self,
        work: lifecycle::Work,
        attempt: u32,
    ) -> Result<lifecycle::Event> {
        let (r, gid, phase) = (self.r, self.task.task_gid.clone(), phase_of(work));
        if let Some(event) = self.over_budget().await? {
            return Ok(event);
        }
        // Written before the slot is taken: a slot is for a live worker.
        let prompt = if self.continue_parked {
            String::new()
        } else {
            prompt_for(r, &self.task, &self.run, &self.wt, phase, attempt).await?
        };
        let slot = self.slot().await?;
        // The agent is paused at its usage limit: no worker starts before the reset, and
        // the run waits for it like the worker that met the limit, its slot given back.
        // Looked at once the slot is held: the worker that met the limit stored the pause
        // before it gave its slot up.
        if let Some(pause) = limits::paused(r.store.as_ref(), &r.settings, r.adapter.name()).await?
        {
            drop(slot);
            tracing::info!(gid = %gid, run = self.run.id, until = %pause.until, "no worker starts: {}", pause.sentence());
            let session = self.run.worker_session_id.is_some() && r.adapter.supports_resume();
            return Ok(lifecycle::Event::WorkerEnded {
                done: false,
                asked: false,
                no_output: false,
                retryable: true,
                why: pause.sentence(),
                limited: Some(lifecycle::Limited {
                    until: pause.until,
                    session,
                    ran: false,
                }),
            });
        }
        self.continue_parked = false;
        // The worker's end is written with the run's next lifecycle step: one write.
        let worker = WorkerRun {
            store: r.store.as_ref(),
            adapter: &r.adapter,
            settings: &r.settings,
            gid: &gid,
            phase,
            worktree: &self.wt.path,
            end_later: true,
        };
        let mut done = run_worker(worker, &mut self.run, prompt).await?;
        drop(slot);
        self.ended = done.end.take();
        write_run_record(&r.settings, &gid, self.run.id, phase, &self.wt.path, &done).await?;
        if done.done.is_none() && done.asked.is_none() {
            tracing::warn!(gid = %gid, run = self.run.id, why = %done.why, "worker ended without [DONE]");
        }
        let session = self.run.worker_session_id.is_some() && r.adapter.supports_resume();
        let event = ended(&done, session);
        self.asked = done.asked.clone();
        self.worked = Some(done);
        Ok(event)
    }

    /// Waits out a back-off holding no slot, in short steps, so a cancel (or a takeover)
    /// is noticed within a second.
    pub(super) async fn wait_until(
        &mut self,
        until: chrono::DateTime<Utc>,
    ) -> Result<lifecycle::Event> {
        tracing::info!(gid = %self.task.task_gid, run = self.run.id, until = %until, "waiting before the next worker (holding no worker slot)");
        drop(self.slot.take());
        loop {
            let left = (until - self.r.settings.clock.now())
                .to_std()
                .unwrap_or_default();
            if left.is_zero() {
                return Ok(lifecycle::Event::RetryDue);
            }
            tokio::time::sleep(left.min(CLAIM_CHECK)).await;
            if !claim::still_ours(self.r.store.as_ref(), &self.run).await? {
                return Err(crate::store::StoreError::Fenced {
                    run_id: self.run.id,
                }
                .into());
            }
        }
    }

    pub(super) async fn verify(&mut self) -> Result<lifecycle::Event> {
        let (r, gid) = (self.r, &self.task.task_gid);
        let verdict = verify(
            r.store.as_ref(),
            &r.settings,
            self.run.id,
            gid,
            &self.wt.path,
        )
        .await?;
        if !verdict.passed {
            tracing::warn!(gid = %gid, run = self.run.id, "verification failed");
        }
        Ok(lifecycle::Event::Verified {
            failure: (!verdict.passed).then_some(lifecycle::Failure {
                summary: verdict.summary,
                excerpt: verdict.excerpt,
            }),
        })
    }

    /// The lifecycle's event when the task's budget is spent and the owner has not let
    /// the run start another worker: no worker (nor reviewer) starts.
    async fn over_budget(&self) -> Result<Option<lifecycle::Event>> {
        let (r, gid) = (self.r, &self.task.task_gid);
        let over = spent::over(r.store.as_ref(), &r.settings, gid, &self.run).await?;
        Ok(over.map(|over| {
            let why = over.sentence();
            tracing::warn!(gid = %gid, run = self.run.id, "no new worker: {why}");
            lifecycle::Event::OverBudget { why }
        }))
    }

    pub(super) async fn review(&mut self, round: u32) -> Result<lifecycle::Event> {
        if let Some(event) = self.over_budget().await? {
            return Ok(event);
        }
        let slot = self.slot().await?;
        let r = self.r;
        let reviewed = review::review(
            r.store.as_ref(),
            &r.adapter,
            &r.prompts,
            &r.settings,
            &self.task,
            &mut self.run,
            &self.wt,
            round,
            self.worked.as_ref().and_then(|w| w.baseline.as_ref()),
        )
        .await?;
        drop(slot);
        Ok(match reviewed {
            review::Reviewed::Accepted => lifecycle::Event::ReviewAccepted {
                gate: match review::integration(&r.settings, &self.task.task_gid, &self.run) {
                    crate::policy::Decision::Approve => lifecycle::Gate::Approve,
                    crate::policy::Decision::Deny => lifecycle::Gate::Deny,
                    crate::policy::Decision::Escalate => lifecycle::Gate::Escalate,
                },
            },
            review::Reviewed::Rejected(findings) => lifecycle::Event::ReviewRejected { findings },
            review::Reviewed::Asked(escalation) => {
                self.waiting_on = Some(escalation);
                lifecycle::Event::ReviewAsked { escalation }
            }
        })
    }

    pub(super) async fn integrate(&mut self) -> Result<lifecycle::Event> {
        let r = self.r;
        let (event, stopped) = integrate(
            r.store.as_ref(),
            &r.settings,
            &self.task,
            &mut self.run,
            &self.wt,
            self.worked.as_ref(),
        )
        .await?;
        if stopped.is_some() {
            self.asked = stopped;
        }
        Ok(event)
    }

    /// Opens the escalation for `ask` (committing the reviewed change first when
    /// `commit_first`, unless the repository's git data changed: then that is asked).
    pub(super) async fn ask_owner(
        &mut self,
        ask: lifecycle::Ask,
        commit_first: bool,
    ) -> Result<lifecycle::Event> {
        let (r, gid) = (self.r, self.task.task_gid.clone());
        let mut question = match ask {
            lifecycle::Ask::Worker => self
                .asked
                .take()
                .context("the lifecycle asks the owner about a worker's question that is gone")?,
            lifecycle::Ask::ReviewExhausted {
                rejections,
                findings,
            } => Asked::Message(format!(
                "[ESCALATE:{}] the review rejected the diff {rejections} time(s); approve integrates it as it is, deny abandons it. The last findings: {}",
                review::REVIEW_EXHAUSTED,
                findings.replace('\n', " ")
            )),
            lifecycle::Ask::Integrate => Asked::Message(format!(
                "[ESCALATE:{}] the reviewed diff of run {} is ready to integrate; `executor go {gid}` integrates it",
                review::INTEGRATE,
                self.run.id
            )),
            lifecycle::Ask::Budget { why } => spent::question(&gid, self.run.id, &why),
        };
        if commit_first && r.settings.worktrees {
            let baseline = self.worked.as_ref().and_then(|w| w.baseline.as_ref());
            if let Some(stopped) = commit_checked(
                &r.settings,
                &self.wt.path,
                &self.task,
                self.run.id,
                baseline,
            )
            .await?
            {
                question = stopped;
            }
        }
        let escalation = open_escalation(
            r.store.as_ref(),
            &r.adapter,
            &r.settings,
            &self.run,
            &gid,
            &question,
        )
        .await?;
        self.waiting_on = Some(escalation);
        Ok(lifecycle::Event::Escalated { escalation })
    }
}

/// What a worker's prompt says of its run: where it works and how it stands (no PR: the
/// PR steps add their own).
pub(super) fn run_context(
    settings: &RunnerSettings,
    run: &Run,
    wt: &worktree::Worktree,
) -> RunContext {
    RunContext {
        id: run.id,
        branch: wt.branch.clone(),
        base_branch: settings.base_branch.clone(),
        worktree: wt.path.display().to_string(),
        pr_url: None,
        pr_number: None,
        ci_attempts: run.ci_attempts,
        worker_stuck_count: run.worker_stuck_count,
    }
}

/// The prompt of a `phase` worker of the run, with the lifecycle's reason and failure.
pub(super) async fn prompt_for(
    r: &Runner,
    task: &Task,
    run: &Run,
    wt: &worktree::Worktree,
    phase: Phase,
    attempt: u32,
) -> Result<String> {
    let settings = r.settings.as_ref();
    let view = view_of(run);
    let mut ctx = PromptContext::new(
        phase,
        TaskContext::from_task(task),
        run_context(settings, run, wt),
    );
    ctx.attempt = attempt;
    ctx.ci = view.failure.map(|failure| CiFailure {
        checks: vec![FailedCheck {
            name: "verify".to_string(),
            summary: failure.summary,
            url: None,
        }],
        failing_step: Some(settings.verify.join(" ")),
        log_excerpt: failure.excerpt,
        run_url: None,
    });
    ctx.resume_reason = view.reason;
    ctx.messages = r
        .store
        .messages(run.id, settings.window)
        .await?
        .into_iter()
        .map(|m| crate::prompts::PromptMessage {
            at: m.at,
            from: m.source,
            text: m.line,
        })
        .collect();
    Ok(r.prompts.render(phase, &ctx)?)
}

/// Commits the verified (and reviewed) change, then opens its PR or completes the run on
/// the local forge (in memory: [`Carried::complete`] writes it with the lifecycle's next
/// view); the event for the lifecycle, and what stopped it for the owner.
pub(super) async fn integrate(
    store: &dyn Store,
    settings: &RunnerSettings,
    task: &Task,
    run: &mut Run,
    wt: &worktree::Worktree,
    worked: Option<&Worked>,
) -> Result<(lifecycle::Event, Option<Asked>)> {
    // Without a worker of this pass the change was committed before the owner was asked
    // (the review gate); nothing newer is committed without a snapshot to check against.
    if let (true, Some(worked)) = (settings.worktrees, worked) {
        if let Some(asked) = commit(settings, &wt.path, task, run.id, worked).await? {
            return Ok((lifecycle::Event::IntegrationAsked, Some(asked)));
        }
    }
    if let Some(asked) = unchanged(store, settings, task, wt).await? {
        let Some(why) = worked.and_then(no_change_needed) else {
            return Ok((lifecycle::Event::IntegrationAsked, Some(asked)));
        };
        // The worker said no change was needed, and why: the run completes on that word,
        // with nothing to push and no PR to open. Its line is in the run's messages.
        tracing::info!(gid = %task.task_gid, run = run.id, %why, "the worker found no change needed; the run completes without one");
    } else if let Some(forge) = &settings.forge {
        let worked = worked.context("a PR is opened only for a worker's verified change")?;
        if let Some(asked) = open_pr(store, forge, settings, task, run, wt, worked).await? {
            return Ok((lifecycle::Event::IntegrationAsked, Some(asked)));
        }
        // Opened, or left to the PR tick as an intent the forge has not taken yet.
        return Ok(if run.state == RunState::Pr {
            (lifecycle::Event::PrOpened, None)
        } else {
            (lifecycle::Event::PrPending, None)
        });
    }
    Ok(
        match complete_local(store, settings, task, run, wt).await? {
            None => (lifecycle::Event::Completed, None),
            // Merged into the parent, the suites failed: undone, back to the worker (and its
            // review), counted like a failed verification.
            Some(reason) => (lifecycle::Event::IntegrationFailed { reason }, None),
        },
    )
}

/// The kind of the escalation a run whose branch carries no change opens, and the
/// `[DONE:…]` kind of a worker that found no change needed.
pub const NO_CHANGE: &str = "no_change";

/// The reason a worker gave for ending with `[DONE:no_change] reason`; `None` for any other
/// end, or for that kind without a reason (which is no answer: the owner is asked).
pub(super) fn no_change_needed(worked: &Worked) -> Option<String> {
    let line = worked.done.as_deref()?.trim_start();
    let (kind, reason) = line.strip_prefix("[DONE:")?.split_once(']')?;
    let reason = reason.trim();
    (kind == NO_CHANGE && !reason.is_empty()).then(|| reason.to_string())
}

/// The owner's question when the run's branch has no commit beyond its base after the
/// commit step: a worker that changed nothing did not do the task, so the run never
/// completes as done on its own word. Without worktrees there is no branch to look at.
pub(super) async fn unchanged(
    store: &dyn Store,
    settings: &RunnerSettings,
    task: &Task,
    wt: &worktree::Worktree,
) -> Result<Option<Asked>> {
    if !settings.worktrees {
        return Ok(None);
    }
    let base = conduct::base_for(store, settings, task).await?;
    let git = orchestrator_git(settings, &wt.path)?;
    let probe = base.clone();
    let ahead = tokio::task::spawn_blocking(move || git.commits_ahead(&probe)).await??;
    Ok((ahead == 0).then(|| {
        Asked::Message(format!(
            "[ESCALATE:{NO_CHANGE}] the worker changed nothing: branch {} is the same as {base}. Answer with what it should do (its next worker reads it), or `executor cancel {}` to abandon the run.",
            wt.branch, task.task_gid
        ))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_verification_with_nothing_to_run_is_not_written_first() {
        assert!(!written_before(&lifecycle::Action::Verify, false));
        assert!(written_before(&lifecycle::Action::Verify, true));
        let start = lifecycle::Action::StartWorker {
            work: lifecycle::Work::Start,
            attempt: 1,
        };
        for verify_command in [false, true] {
            assert!(written_before(&start, verify_command));
            assert!(written_before(
                &lifecycle::Action::Integrate,
                verify_command
            ));
            assert!(written_before(&lifecycle::Action::Wait, verify_command));
        }
    }
}

//! Passes: taking approved tasks and answered escalations up as worker slots free, each
//! run carried on its own task; a pass never holds a slot for a run that waits.

use super::{carry, conduct, limits, patience, review, spent};
use super::{Passed, RunResult, Runner, RunnerSettings, DISPATCH};
use crate::agents::Adapter;
use crate::core::ending::Origin;
use crate::core::lifecycle;
use crate::core::queue::QueueStatus;
use crate::core::record::Run;
use crate::core::run::{next_state, RunEvent, RunState};
use crate::core::task::Task;
use crate::ops::queue as queue_ops;
use crate::runner::drive::abandon;
use crate::runner::drive::lease_until;
use crate::runner::drive::prepare_worktree;
use crate::runner::drive::release_run;
use crate::runner::drive::take_run;
use crate::runner::drive::view_of;
use crate::runner::drive::Start;
use crate::store::Store;
use anyhow::{Context, Result};
use std::sync::Arc;

impl Runner {
    /// Whether a pass is still taking approved tasks: it will take a newly approved one as
    /// soon as a slot is free, so no new pass is needed for it.
    pub fn is_claiming(&self) -> bool {
        self.claiming.load(std::sync::atomic::Ordering::SeqCst) > 0
    }
}

/// Counts a pass as claiming while it lives.
pub(super) struct Claiming(Arc<std::sync::atomic::AtomicUsize>);

impl Claiming {
    pub(super) fn new(count: &Arc<std::sync::atomic::AtomicUsize>) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self(Arc::clone(count))
    }
}

impl Drop for Claiming {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Takes approved tasks one at a time, each as soon as a worker slot is free, and drives
/// each to `complete` or `abandoned`; returns when none is left approved and its runs have
/// ended. The list is read again for every free slot, so a task approved meanwhile is taken
/// by the pass already running. A run holds one of `slots` while it lives, so however many
/// passes run at once the cap on live workers holds; a task two passes (or two runners)
/// both see is claimed by one only (the queue move to `in_progress` is compare-and-set).
pub async fn run_approved(runner: &Runner) -> Result<Passed> {
    let Runner {
        store, settings, ..
    } = runner;
    let claiming = Claiming::new(&runner.claiming);
    if store
        .tasks_page(Some(&QueueStatus::Approved), i64::MIN, 1)
        .await?
        .is_empty()
    {
        return Ok(Passed::default());
    }
    if settings.worktrees && !settings.repository.join(".git").exists() {
        anyhow::bail!(
            "runner.repository {} is not a git repository (the runs' worktrees are made from it)",
            settings.repository.display()
        );
    }
    let mut runs = tokio::task::JoinSet::new();
    // A claim that fails (the store out of reach) ends the claiming, never the runs already
    // claimed: they are carried to their end before the pass answers, so none is dropped
    // half-way with its lease still renewed by this runner.
    let claimed = loop {
        let next = async {
            // A day's budget is judged by the spend of every worker that ended: with one
            // set, a run is claimed only once a slot is free, so the last worker's spend
            // is known.
            let place = if settings.budget.per_day_usd.is_some() {
                Place::Slot(Arc::clone(&runner.slots).acquire_owned().await?)
            } else {
                Place::Readied(Arc::clone(&runner.readying).acquire_owned().await?)
            };
            if let Some(over) = day_budget_spent(store.as_ref(), settings).await? {
                tell_paused(store.as_ref(), settings, &over).await;
                return Ok(None);
            }
            // The agent is paused at its usage limit: no task is taken for it until the
            // reset (the owner was told when the pause began).
            if let Some(pause) =
                limits::paused(store.as_ref(), settings, runner.adapter.name()).await?
            {
                tracing::info!(until = %pause.until, "no new task is taken: {}", pause.sentence());
                return Ok(None);
            }
            anyhow::Ok(claim_next(runner).await?.map(|claimed| (claimed, place)))
        }
        .await;
        let ((task, run), place) = match next {
            Ok(Some(next)) => next,
            Ok(None) => break Ok(()),
            Err(error) => break Err(error),
        };
        let r = runner.clone();
        runs.spawn(async move {
            let gid = task.task_gid.clone();
            drive(&r, task, run, place)
                .await
                .with_context(|| format!("run of task {gid}"))
        });
    };
    drop(claiming);
    let passed = collect(runs, "a run failed").await;
    match claimed {
        Ok(()) => Ok(passed),
        // Said after the claimed runs ended, with what they did: nothing of theirs is lost.
        Err(error) if passed.results.is_empty() && passed.failed.is_empty() => Err(error),
        // The task it could not claim stays approved for the next pass: no run failed.
        Err(error) => {
            tracing::error!(error = format!("{error:#}"), "cannot claim the next task; the runs already claimed were carried on, and the task waits for the next pass");
            Ok(passed)
        }
    }
}

/// Whether today's workers spent the day's budget (`[budget] per_day_usd`): then no new
/// task is taken until the next budget day.
pub(super) async fn day_budget_spent(
    store: &dyn Store,
    settings: &RunnerSettings,
) -> Result<Option<crate::core::budget::Over>> {
    if settings.budget.per_day_usd.is_none() {
        return Ok(None);
    }
    let rows = store.spend(None).await?;
    Ok(settings.budget.day_over(&rows, settings.clock.now()))
}

/// The budget day the owner was last told dispatch pauses for, so a pass that finds the
/// day spent again tells nobody twice.
static PAUSE_TOLD: std::sync::Mutex<Option<chrono::DateTime<chrono::Utc>>> =
    std::sync::Mutex::new(None);

/// Says, once per budget day, that no new task is taken until the next one.
async fn tell_paused(
    store: &dyn Store,
    settings: &RunnerSettings,
    over: &crate::core::budget::Over,
) {
    let resumes = match over {
        crate::core::budget::Over::PerDayUsd { resumes_at, .. } => *resumes_at,
        _ => return,
    };
    let first = {
        let mut told = PAUSE_TOLD.lock().unwrap_or_else(|e| e.into_inner());
        let first = *told != Some(resumes);
        *told = Some(resumes);
        first
    };
    if !first {
        tracing::debug!("no new task is taken: {}", over.sentence());
        return;
    }
    let notice = crate::chat::Notice {
        priority: crate::core::outbox::Priority::Action,
        persona: crate::chat::Persona::Orchestrator,
        task_gid: None,
        run_id: None,
        body: format!(
            "No new task is taken: {}. Raise `[budget] per_day_usd` to go on today.",
            over.sentence()
        ),
    };
    settings.notices.tell(store, notice).await;
}

/// Claims the oldest approved task: moves it to `in_progress` and creates its run, leased
/// to this runner, in one write. `None` when no approved task is left. A task another
/// runner claimed first (or the owner moved) since the page was read is skipped.
pub(super) async fn claim_next(runner: &Runner) -> Result<Option<(Task, Run)>> {
    let (store, clock) = (runner.store.as_ref(), runner.settings.clock.as_ref());
    // Most claims take the first approved task: a short page, read again when it is all
    // waiting subtasks or taken.
    const PAGE: u32 = 4;
    let mut after = i64::MIN;
    loop {
        let page = store
            .tasks_page(Some(&QueueStatus::Approved), after, PAGE)
            .await?;
        let Some(last) = page.last() else {
            return Ok(None);
        };
        after = last.id;
        for task in page {
            // A dispatched worker task is run by its `executor dispatch` alone.
            if task.source.as_deref() == Some(DISPATCH) {
                continue;
            }
            // A subtask starts only when the subtasks it depends on are complete.
            let unmet = store.unmet_dependencies(&task.task_gid).await?;
            if !unmet.is_empty() {
                tracing::debug!(gid = %task.task_gid, waits_for = ?unmet, "a subtask waits for its dependencies");
                continue;
            }
            // The page's row is current enough to decide on: the write lands only if the
            // task has not moved since.
            let holder = runner.holder.id();
            let until = lease_until(clock.now());
            match queue_ops::claim(store, clock, &task, "runner", &holder, until).await {
                Ok(Some(claimed)) => return Ok(Some(claimed)),
                Ok(None) | Err(queue_ops::QueueOpError::Illegal { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Where a claimed run stands until its first worker (or planner) has a slot.
pub(super) enum Place {
    /// Among the runs readied ahead of a free slot; given up once it has one.
    Readied(tokio::sync::OwnedSemaphorePermit),
    /// Holding the slot its first worker takes.
    Slot(tokio::sync::OwnedSemaphorePermit),
}

/// Carries one claimed task (already `in_progress`) through its new `run` (leased to this
/// runner) from its `place`. `None` when another runner claimed the run meanwhile (this one
/// stood down).
pub(super) async fn drive(
    runner: &Runner,
    task: Task,
    run: Run,
    place: Place,
) -> Result<Option<RunResult>> {
    let (store, settings) = (runner.store.as_ref(), runner.settings.as_ref());
    let gid = task.task_gid.clone();
    let run_id = run.id;
    let started = async {
        let mut run = run;
        let wt = prepare_worktree(store, settings, &task).await?;
        tracing::info!(gid = %gid, run = run.id, branch = %wt.branch, worktree = %wt.path.display(), "run started");
        if settings.worktrees {
            run.worktree_path = Some(wt.path.display().to_string());
            run.branch_name = Some(wt.branch.clone());
        }
        // The move is saved with the run's first lifecycle decision (one write, not two);
        // a planner's run is saved at once, its loop saves only at its milestones.
        run.state = next_state(&run.state, RunEvent::WorkerStarted)?;
        run.updated_at = settings.clock.now();
        if conduct::needs_split(store, settings, &task).await? {
            store.save_run(&run).await?;
            let _planner = match place {
                Place::Slot(slot) => slot,
                Place::Readied(readied) => {
                    let slot = Arc::clone(&runner.slots).acquire_owned().await?;
                    drop(readied);
                    slot
                }
            };
            return conduct::decompose(runner, task, run, wt, None).await;
        }
        run.lifecycle = Some(lifecycle::RunView::default());
        let (slot, readied) = match place {
            Place::Slot(slot) => (Some(slot), None),
            Place::Readied(readied) => (None, Some(readied)),
        };
        let start = Start {
            slot,
            readied,
            ..Start::new(lifecycle::Event::Begin)
        };
        carry(runner, task, run, wt, start).await
    }
    .await;
    if !matches!(&started, Ok(result) if result.lease_released) {
        runner.let_go(run_id).await;
    }
    settle(runner, run_id, &gid, started).await
}

/// How a carried run's pass ends: a run another runner claimed meanwhile is left to it
/// (`None`, nothing written); one that failed for a reason no worker can fix is abandoned.
pub(super) async fn settle(
    runner: &Runner,
    run_id: i64,
    gid: &str,
    carried: Result<RunResult>,
) -> Result<Option<RunResult>> {
    match carried {
        Ok(result) => Ok(Some(result)),
        Err(error) if fenced(&error) => {
            tracing::warn!(gid = %gid, run = run_id, "the run was claimed elsewhere (the owner cancelled it, or another runner took it over); this runner stopped its worker and stands down");
            Ok(None)
        }
        // Handed back already (its worker could not start on a fresh lease): recovery's.
        Err(error) if handed_back(&error).is_some() => {
            tracing::warn!(gid = %gid, run = run_id, error = format!("{error:#}"), "the run goes back for recovery");
            Err(error)
        }
        // An outage is no reason to abandon a run: it stays `in_progress`, and recovery
        // carries it on from its stored stage once the store is back.
        Err(error) if patience::transient(&error) => {
            tracing::warn!(gid = %gid, run = run_id, error = format!("{error:#}"), "the store went out of reach while carrying the run; recovery carries it on once the store is back");
            Err(super::HandedBack {
                run_id,
                why: format!("{error:#}"),
            }
            .into())
        }
        Err(error) => {
            give_up(runner, run_id, gid, Origin::Local, &format!("{error:#}")).await;
            Err(error)
        }
    }
}

/// A run that failed for a reason no worker can fix (its worktree cannot be made, its
/// verification cannot start, the store failed) is abandoned rather than left looking
/// alive; best effort, since the store itself may be what failed.
pub(super) async fn give_up(runner: &Runner, run_id: i64, gid: &str, origin: Origin, why: &str) {
    let (store, settings) = (runner.store.as_ref(), runner.settings.as_ref());
    let Ok(runs) = store.runs(Some(gid)).await else {
        return;
    };
    let Some(mut run) = runs.into_iter().find(|r| r.id == run_id) else {
        return;
    };
    if run.state.is_active() {
        let holder = runner.holder.id();
        if let Err(error) = abandon(store, settings, &mut run, origin, &holder, why).await {
            tracing::error!(gid = %gid, run = run_id, error = format!("{error:#}"), "cannot abandon a failed run");
        }
    }
}

/// Whether `error` says the run's lease was claimed by another runner: this runner then
/// writes nothing more for the run (not even its abandonment).
pub(super) fn fenced(error: &anyhow::Error) -> bool {
    patience::store_errors(error)
        .any(|cause| matches!(cause, crate::store::StoreError::Fenced { .. }))
}

/// Resumes every run whose escalation the owner has answered, each exactly once (the
/// store's compare-and-set on `applied_at`), as soon as a worker slot is free.
pub async fn resume_decided(runner: &Runner) -> Result<Passed> {
    let store = runner.store.as_ref();
    let mut runs = tokio::task::JoinSet::new();
    for escalation in store.answered_escalations().await? {
        let Some(run_id) = escalation.run_id else {
            continue;
        };
        let Some(gid) = escalation.task_gid.clone() else {
            continue;
        };
        let Some(mut run) = store
            .runs(Some(&gid))
            .await?
            .into_iter()
            .find(|r| r.id == run_id)
        else {
            continue;
        };
        if run.state != RunState::InProgress {
            continue;
        }
        let Some(task) = store.task(&gid).await? else {
            continue;
        };
        let permit = Arc::clone(&runner.slots).acquire_owned().await?;
        let Some(epoch) = take_run(
            store,
            &runner.holder,
            runner.settings.clock.as_ref(),
            run_id,
        )
        .await?
        else {
            continue;
        };
        run.lease_epoch = epoch;
        if !store
            .apply_escalation(escalation.id, runner.settings.clock.now())
            .await?
        {
            release_run(store, &runner.holder, run_id).await;
            continue;
        }
        let resolution = escalation.resolution.clone().unwrap_or_default();
        let note = escalation
            .resolution_note
            .as_deref()
            .map(|n| format!(" Their note: {n}"))
            .unwrap_or_default();
        tracing::info!(gid = %gid, run = run_id, escalation = escalation.id, %resolution, "resuming a run with the owner's decision");
        let parked = escalation.tool_use_id.is_some()
            && run.worker_session_id.is_some()
            && matches!(runner.adapter, Adapter::Claude { .. });
        let gate =
            [review::INTEGRATE, review::REVIEW_EXHAUSTED].contains(&escalation.action.as_str());
        let budget = escalation.action == spent::BUDGET;
        let answer = match (gate, budget, escalation.resolution.as_deref()) {
            (true, _, Some("approve")) => lifecycle::Answer::Integrate,
            (true, _, _) => lifecycle::Answer::Decline,
            (false, true, Some("deny")) => lifecycle::Answer::Stop {
                why: lifecycle::pr_stage::BUDGET_REFUSED.to_string(),
            },
            (false, _, _) => lifecycle::Answer::Continue {
                reason: format!(
                    "The owner answered your escalation ({}: {}): {resolution}.{note}",
                    escalation.action,
                    escalation.detail.as_deref().unwrap_or("")
                ),
            },
        };
        // The answer is what the run waits on, whatever stage an older executor (or the
        // hook, for a parked tool call) left in its view.
        run.lifecycle = Some(lifecycle::RunView {
            stage: lifecycle::Stage::WaitingOnOwner {
                escalation: escalation.id,
            },
            ..view_of(&run)
        });
        let start = Start {
            event: lifecycle::Event::Answered(answer),
            continue_parked: parked,
            slot: Some(permit),
            readied: None,
        };
        runs.spawn(continue_run(
            runner.clone(),
            task,
            run,
            start,
            "resumed run",
        ));
    }
    Ok(collect(runs, "a resumed run failed").await)
}

/// Carries an existing run on from `start` in its worktree (its lease already taken).
/// `what` names the task in errors.
pub(super) async fn continue_run(
    r: Runner,
    task: Task,
    run: Run,
    mut start: Start,
    what: &'static str,
) -> Result<Option<RunResult>> {
    let gid = task.task_gid.clone();
    let run_id = run.id;
    let carried = async {
        let mut run = run;
        let wt = prepare_worktree(r.store.as_ref(), &r.settings, &task).await?;
        // A run that never started (recovered `queued`) is told its worktree now.
        if r.settings.worktrees && run.worktree_path.is_none() {
            run.worktree_path = Some(wt.path.display().to_string());
            run.branch_name = Some(wt.branch.clone());
        }
        // A goal still to be split goes back to its planner (told the owner's answer, or
        // why it stopped), never to a worker that would do the whole goal at once.
        if conduct::needs_split(r.store.as_ref(), &r.settings, &task).await? {
            let _planner = match start.slot.take() {
                Some(held) => held,
                None => Arc::clone(&r.slots).acquire_owned().await?,
            };
            return conduct::decompose(&r, task, run, wt, start.reason()).await;
        }
        carry(&r, task, run, wt, start).await
    }
    .await;
    if !matches!(&carried, Ok(result) if result.lease_released) {
        r.let_go(run_id).await;
    }
    settle(&r, run_id, &gid, carried)
        .await
        .with_context(|| format!("{what} of task {gid}"))
}

/// The run `error` says was handed back for recovery, if it says so.
fn handed_back(error: &anyhow::Error) -> Option<i64> {
    error
        .chain()
        .find_map(|cause| cause.downcast_ref::<super::HandedBack>())
        .map(|back| back.run_id)
}

/// Whether some run waits only for a free slot to take the owner's answer.
pub async fn has_decided(store: &dyn Store) -> Result<bool> {
    Ok(store
        .answered_escalations()
        .await?
        .iter()
        .any(|e| e.run_id.is_some()))
}

/// Waits for every run of a pass. A run that failed or panicked is counted, never allowed
/// to cut the others short.
pub(super) async fn collect(
    mut runs: tokio::task::JoinSet<Result<Option<RunResult>>>,
    what: &'static str,
) -> Passed {
    let mut passed = Passed::default();
    while let Some(joined) = runs.join_next().await {
        match joined.map_err(anyhow::Error::from).and_then(|run| run) {
            Ok(Some(result)) => passed.results.push(result),
            Ok(None) => {}
            Err(error) if handed_back(&error).is_some() => {
                passed.handed_back.extend(handed_back(&error));
            }
            Err(error) => {
                tracing::error!(error = format!("{error:#}"), "{what}");
                passed.failed.push(format!("{error:#}"));
            }
        }
    }
    passed
}

//! Recovery: what a dead or frozen runner left behind on this host, stopped and carried on.
//! A live runner's runs and workers are never touched.

use super::{conduct, opening};
use super::{Passed, Runner, DISPATCH};
use crate::core::ending::Origin;
use crate::core::lifecycle;
use crate::core::queue::QueueStatus;
use crate::core::record::WorkerRecord;
use crate::core::run::{next_state, RunEvent, RunState};
use crate::runner::drive::carried_by_live_runner;
use crate::runner::drive::collect;
use crate::runner::drive::continue_run;
use crate::runner::drive::give_up;
use crate::runner::drive::host;
use crate::runner::drive::release_run;
use crate::runner::drive::take_run;
use crate::runner::drive::view_of;
use crate::runner::drive::Start;
use crate::supervisor::{self};
use anyhow::Result;
use std::time::Duration;

/// Reconciles what a runner that died (killed, crashed, the machine rebooted, or frozen
/// past its lease) left behind on this host. Only runs whose lease is free, expired or
/// held by a dead runner are touched, and only the workers recorded for them: each still
/// alive (the same pid *and* start time: a reused pid is never touched) is stopped with
/// its whole group; a live runner's workers and runs are left alone. Each such run left
/// `in_progress` is then claimed (a new lease epoch, so the runner that left it writes
/// nothing more) and carried on from its stored stage in its worktree. Call it at start,
/// with the runner lock held, before any new run starts.
pub async fn recover(runner: &Runner) -> Result<Passed> {
    let Runner {
        store, settings, ..
    } = runner;
    stop_left_workers(runner).await?;
    // Runs this process stopped carrying while the store was out of reach are given back
    // first, so they are carried on below like any other run left behind. Those the store
    // still refuses keep this pass's recovery due (reported as handed back).
    let still_left = runner.give_back_left().await;
    let mut runs = tokio::task::JoinSet::new();
    // The runs in progress alone (an index range, not every run ever made), oldest first,
    // and those claimed but not started yet (`queued`: their runner stopped, or the store
    // went out of reach, while it made the worktree).
    let mut open = store
        .runs_page(&[RunState::Queued, RunState::InProgress], None, u32::MAX)
        .await?;
    open.reverse();
    for mut run in open {
        let Some(task) = store.task(&run.task_gid).await? else {
            continue;
        };
        if task.status != QueueStatus::InProgress {
            continue;
        }
        // A parent waits for its subtasks, holding no worker.
        if conduct::is_waiting_parent(store.as_ref(), &task.task_gid).await? {
            continue;
        }
        // This runner's own runs are carried already.
        if store
            .lease(run.id)
            .await?
            .is_some_and(|lease| lease.holder == runner.holder.id())
        {
            continue;
        }
        // A dispatched worker runs with its task file's tools and timeout, which only its
        // `executor dispatch` knows: an interrupted one ends here, to be dispatched again.
        if task.source.as_deref() == Some(DISPATCH) {
            if take_run(
                store.as_ref(),
                &runner.holder,
                runner.settings.clock.as_ref(),
                run.id,
            )
            .await?
            .is_some()
            {
                give_up(
                    runner,
                    run.id,
                    &task.task_gid,
                    Origin::Dispatch,
                    "its executor dispatch was interrupted; dispatch the task file again",
                )
                .await;
                release_run(store.as_ref(), &runner.holder, run.id).await;
            }
            continue;
        }
        // A run waiting for the owner is not stranded: the answer resumes it.
        if store
            .run_escalations(run.id)
            .await?
            .iter()
            .any(|e| e.applied_at.is_none())
        {
            continue;
        }
        // A run whose pushed branch waits for its draft PR is the PR tick's, not a worker's.
        if opening::opens_pr(store.as_ref(), run.id).await? {
            continue;
        }
        // On a shared queue another host's runner may be carrying it right now.
        let Some(epoch) = take_run(
            store.as_ref(),
            &runner.holder,
            runner.settings.clock.as_ref(),
            run.id,
        )
        .await?
        else {
            continue;
        };
        run.lease_epoch = epoch;
        // A worker of a runner frozen past its lease was left running: gone before this
        // runner starts one in the same worktree.
        for worker in store.open_workers(&host()).await? {
            if worker.run_id == run.id {
                stop_recorded(&worker, settings.grace).await;
                store
                    .end_worker(
                        worker.id,
                        settings.clock.now(),
                        "stopped: its runner's lease was taken over",
                    )
                    .await?;
            }
        }
        tracing::info!(gid = %task.task_gid, run = run.id, stage = view_of(&run).stage_name(), "carrying on a run its runner left");
        let start = if run.state == RunState::Queued {
            // Never started: it starts now, as a claimed run does (its move saved with its
            // first lifecycle decision).
            run.state = next_state(&run.state, RunEvent::WorkerStarted)?;
            run.updated_at = settings.clock.now();
            run.lifecycle = Some(lifecycle::RunView::default());
            Start::new(lifecycle::Event::Begin)
        } else {
            Start::new(lifecycle::Event::Resumed {
                reason: "the runner stopped while this run's worker was working".to_string(),
            })
        };
        runs.spawn(continue_run(runner.clone(), task, run, start, "recovery"));
    }
    let mut passed = collect(runs, "a recovered run failed").await;
    passed.handed_back.extend(still_left);
    Ok(passed)
}

/// Stops every worker recorded on this host whose runner is gone (dead, or its lease
/// expired or taken), with its whole group, and records its end; a live runner's workers
/// are left alone.
async fn stop_left_workers(runner: &Runner) -> Result<()> {
    let Runner {
        store, settings, ..
    } = runner;
    for worker in store.open_workers(&host()).await? {
        if carried_by_live_runner(
            store.as_ref(),
            &runner.holder,
            settings.clock.now(),
            worker.run_id,
        )
        .await?
        {
            continue;
        }
        let Ok(pid) = u32::try_from(worker.pid) else {
            continue;
        };
        let outcome = if stop_recorded(&worker, settings.grace).await {
            tracing::warn!(
                run = worker.run_id,
                pid,
                "stopped a worker a previous runner left running"
            );
            "stopped at recovery: its runner had died or lost its lease"
        } else {
            "gone when its runner was recovered"
        };
        store
            .end_worker(worker.id, settings.clock.now(), outcome)
            .await?;
    }
    Ok(())
}

/// Stops a recorded worker's group if the worker (same pid and start time) or members of
/// its group still live; true when something was stopped.
pub(super) async fn stop_recorded(worker: &WorkerRecord, grace: Duration) -> bool {
    let Ok(pid) = u32::try_from(worker.pid) else {
        return false;
    };
    // Never a group that is not a worker's: 0 is the caller's own, 1 is init's.
    if pid <= 1 {
        return false;
    }
    let alive = supervisor::group::start_time(pid).and_then(|t| i64::try_from(t).ok());
    let leader_is_ours = alive.is_some() && alive == worker.start_time;
    // A dead leader's group id stays taken while any member lives, so members of group
    // `pid` are still the worker's children.
    let children_left = alive.is_none() && !supervisor::group::members(pid).is_empty();
    if leader_is_ours || children_left {
        stop_leftover(pid, grace).await;
        true
    } else {
        false
    }
}

/// TERM to a leftover worker's group, up to `grace` for it to go, then KILL.
pub(super) async fn stop_leftover(pgid: u32, grace: Duration) {
    use nix::sys::signal::Signal;
    let _ = supervisor::group::signal_group(pgid, Signal::SIGTERM);
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline {
        if supervisor::group::members(pgid).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = supervisor::group::signal_group(pgid, Signal::SIGKILL);
}

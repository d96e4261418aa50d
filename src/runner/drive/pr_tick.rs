//! The `pr` loop: on every tick, each run whose draft PR is open (or complete, for the
//! owner's comments) is looked at on its forge (GitHub or Gitea, through
//! [`crate::forge::ForgeClient`]); the look, with the facts gathered beside it (the
//! machine's memory, the agent's pause, the task's budget), is one event of the run's
//! lifecycle, whose PR stage (`core::lifecycle::pr_stage`, around the `pr` machine) decides
//! the one action, and this module carries it out: labels, a CI trigger, resolving acknowledged
//! threads, a `fix_ci`, `fix_comments` or `pr_review` worker (whose change the orchestrator
//! commits and pushes), completion with the owner told, the end of a merged or closed PR,
//! or an escalation. The machine's memory is kept in the store between ticks.
//!
//! Outside effects are written before they are performed and marked done after, in the
//! run's PR memory, so a failure or a crash between the two is healed by the next tick:
//! a run whose branch waits for its push or its PR has it pushed and opened (`opening`); a
//! review verdict is kept by head and posted again rather than reviewed again; a `fix_ci`
//! worker is tied to the head it was made for. A completion is decided first (the run `complete`, its
//! task `done`, with the completion's effects owed in the memory), then each owed effect
//! is performed and marked done: the owner's @mention on the PR (found by its marker
//! before it is posted again), then the record step and the owner's notice. So the owner
//! is told once, and the run never says the owner was told before the comment landed.
//!
//! What it must never do: let a forge failure lose a run's state. A rate limit, a 5xx or a
//! timeout leaves the run as it was for a later tick (after `max_effect_failures` failed
//! writes in a row the owner is asked, once); only a PR that is gone ends the run.

use super::carry::rules;
use super::{commit, limits, opening, spent};
use super::{Passed, RunResult, Runner, RunnerSettings};
use crate::core::ending::{Origin, Outcome};
use crate::core::lifecycle;
use crate::core::pr::{PrConfig, PrMemory, PrObservation, PrStep, Stage, ThreadAnswer};
use crate::core::queue::QueueStatus;
use crate::core::record::Run;
use crate::core::run::{RunEvent, RunState};
use crate::core::task::Task;
use crate::forge::{ForgeError, Look, MergeOutcome};
use crate::prompts::{Phase, PromptContext, RunContext, TaskContext};
use crate::runner::drive::abandon;
use crate::runner::drive::end;
use crate::runner::drive::full_head;
use crate::runner::drive::move_run;
use crate::runner::drive::open_escalation;
use crate::runner::drive::prepare_worktree;
use crate::runner::drive::push_recorded;
use crate::runner::drive::release_run;
use crate::runner::drive::run_context;
use crate::runner::drive::take_run;
use crate::runner::drive::tampered;
use crate::runner::drive::view_of;
use crate::runner::drive::work;
use crate::runner::drive::write_run_record;
use crate::runner::drive::Asked;
use crate::runner::drive::Forge;
use crate::runner::drive::Worked;
use crate::runner::drive::MESSAGE_WINDOW;
use crate::store::Store;
use anyhow::Result;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Looks at every run with an open (or complete, draft) PR once and takes its next step.
/// Runs another runner holds are left to it. All PRs are read together (a few GraphQL
/// requests for the lot); the steps then run side by side, as many at once as the runner
/// has worker slots (a step that spawns a worker also waits for a slot).
pub async fn tick_prs(runner: &Runner) -> Result<Passed> {
    let Some(forge) = runner.settings.forge.clone() else {
        return Ok(Passed::default());
    };
    let store = runner.store.as_ref();
    let config = pr_config(&runner.settings, &forge);
    let mut passed = Passed::default();

    let mut taken: Vec<(Run, PrMemory)> = Vec::new();
    for mut run in store.runs(None).await? {
        // A run whose branch is pushed and whose PR is still to be opened.
        if run.state == RunState::InProgress
            && run.branch_name.is_some()
            && opening::opens_pr(store, run.id).await?
        {
            if let Some(epoch) = take_run(
                store,
                &runner.holder,
                runner.settings.clock.as_ref(),
                run.id,
            )
            .await?
            {
                run.lease_epoch = epoch;
                let (gid, run_id) = (run.task_gid.clone(), run.id);
                let opened = open_one(runner, &forge, run).await;
                release_run(store, &runner.holder, run_id).await;
                match opened {
                    Ok(Some(result)) => passed.results.push(result),
                    Ok(None) => {}
                    Err(error) => passed.failed.push(format!("{gid}: {error:#}")),
                }
            }
            continue;
        }
        let watched =
            run.pr_number.is_some() && matches!(run.state, RunState::Pr | RunState::Complete);
        if !watched || runner.is_settled(run.id) {
            continue;
        }
        // A completed run whose merged PR owes nothing leaves the batch on its memory alone,
        // with no lease taken: a restarted daemon does not write once per finished PR.
        if run.state == RunState::Complete
            && memory_of(store, &run).await.is_ok_and(|m| m.settled())
        {
            runner.settle(run.id);
            continue;
        }
        let Some(epoch) = take_run(
            store,
            &runner.holder,
            runner.settings.clock.as_ref(),
            run.id,
        )
        .await?
        else {
            continue;
        };
        run.lease_epoch = epoch;
        match memory_of(store, &run).await {
            // A merged PR with nothing owed can change no more: it leaves the batch.
            Ok(memory) if memory.settled() && run.state == RunState::Complete => {
                release_run(store, &runner.holder, run.id).await;
                runner.settle(run.id);
            }
            Ok(memory) => taken.push((run, memory)),
            Err(error) => {
                release_run(store, &runner.holder, run.id).await;
                passed.failed.push(format!("{}: {error:#}", run.task_gid));
            }
        }
    }
    if taken.is_empty() {
        return Ok(passed);
    }

    let looks: Vec<Look<'_>> = taken
        .iter()
        .map(|(run, memory)| Look {
            number: pr_number(run),
            memory,
            worker_running: false,
        })
        .collect();
    let observed = forge
        .client
        .observe_many(&looks, &config, runner.settings.clock.now())
        .await;
    drop(looks);

    // The agent's pause at its usage limit, one fact for every run of this tick.
    let paused_until = limits::paused(store, &runner.settings, runner.adapter.name())
        .await?
        .map(|pause| pause.until);
    let parallel = Arc::new(Semaphore::new(runner.settings.max_workers.max(1)));
    let mut steps = tokio::task::JoinSet::new();
    for ((run, memory), observed) in taken.into_iter().zip(observed) {
        let (runner, forge, config, parallel) = (
            runner.clone(),
            forge.clone(),
            config.clone(),
            Arc::clone(&parallel),
        );
        steps.spawn(async move {
            let _turn = parallel.acquire_owned().await;
            let (gid, run_id) = (run.task_gid.clone(), run.id);
            let step_runner = runner.clone();
            let ticked = contained(async move {
                tick_one(
                    &step_runner,
                    &forge,
                    &config,
                    run,
                    memory,
                    observed,
                    paused_until,
                )
                .await
            })
            .await;
            release_run(runner.store.as_ref(), &runner.holder, run_id).await;
            (gid, run_id, ticked)
        });
    }
    while let Some(joined) = steps.join_next().await {
        // Every step is `contained`, so only a panic outside one (in the release) lands here.
        let (gid, run_id, ticked) = match joined {
            Ok(step) => step,
            Err(error) => {
                tracing::error!(error = %error, "a PR step failed outside its run");
                passed.failed.push(format!("a PR step: {error}"));
                continue;
            }
        };
        match ticked {
            Ok(Some(result)) => passed.results.push(result),
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(gid = %gid, run = run_id, error = format!("{error:#}"), "the PR tick failed; the run waits for the next one");
                passed.failed.push(format!("{gid}: {error:#}"));
            }
        }
    }
    passed.results.sort_by_key(|r| r.run_id);
    Ok(passed)
}

impl Runner {
    /// Whether run `run_id`'s PR is known settled in this process.
    fn is_settled(&self, run_id: i64) -> bool {
        self.settled_prs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(&run_id)
    }

    fn settle(&self, run_id: i64) {
        self.settled_prs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(run_id);
    }
}

/// Runs one run's PR step on a task of its own, so a panic in it (a bug met by one PR's
/// odd state) fails that run's step, said as an error, and never its siblings' or the loop.
async fn contained<T: Send + 'static>(
    step: impl std::future::Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    match tokio::spawn(step).await {
        Ok(done) => done,
        Err(error) if error.is_panic() => {
            let payload = error.into_panic();
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            Err(anyhow::anyhow!("the PR step panicked: {what}"))
        }
        Err(error) => Err(anyhow::anyhow!("the PR step was cancelled: {error}")),
    }
}

fn pr_number(run: &Run) -> u64 {
    u64::try_from(run.pr_number.unwrap_or_default()).unwrap_or_default()
}

/// Pushes the recorded commit of a run that still owes its push, then tries to open its
/// PR; `Some` when the run moved to `pr` or the owner was asked.
async fn open_one(runner: &Runner, forge: &Forge, mut run: Run) -> Result<Option<RunResult>> {
    let store = runner.store.as_ref();
    let settings = runner.settings.as_ref();
    let memory = opening::memory_of_run(store, run.id).await?;
    match opening::try_publish(store, settings, forge, &mut run, memory, true).await? {
        opening::Tried::Opened => {
            tracing::info!(gid = %run.task_gid, run = run.id, pr = run.pr_url.as_deref().unwrap_or(""), forge = forge.client.name(), "draft PR open; the run continues on the forge");
            Ok(Some(result_of(&run, None)))
        }
        opening::Tried::Failed {
            effect,
            error,
            failures,
            ask,
        } => {
            tracing::warn!(gid = %run.task_gid, run = run.id, ?effect, failures, %error, "cannot push the branch or open its draft PR now; the next tick tries again");
            if !ask {
                return Ok(None);
            }
            let branch = run.branch_name.clone().unwrap_or_default();
            let line = opening::failing_line(&branch, effect, failures, &error);
            let id = open_escalation(
                store,
                &runner.adapter,
                settings,
                &run,
                &run.task_gid.clone(),
                &Asked::Message(line),
            )
            .await?;
            Ok(Some(result_of(&run, Some(id))))
        }
    }
}

/// The `pr` machine's memory of a run, as the store keeps it between ticks.
async fn memory_of(store: &dyn Store, run: &Run) -> Result<PrMemory> {
    let mut memory = opening::memory_of_run(store, run.id).await?;
    if run.state == RunState::Complete {
        memory.stage = Stage::Complete;
    }
    Ok(memory)
}

/// The `pr` machine's settings, from the config.
fn pr_config(settings: &RunnerSettings, forge: &Forge) -> PrConfig {
    PrConfig {
        required_checks: forge.required_checks.clone(),
        required_labels: forge.required_labels.clone(),
        max_ci_attempts: settings.max_ci_attempts,
        resolve_acknowledged: forge.resolve_acknowledged,
        ci_start_grace: chrono::Duration::from_std(forge.ci_start_grace)
            .unwrap_or(chrono::Duration::minutes(5)),
        auto_merge: forge.auto_merge.clone(),
        ..PrConfig::default()
    }
}

/// One run's look at its PR, decided by the run's lifecycle (its PR stage's rows,
/// `core::lifecycle::pr_stage`) and carried out here; `Some` when the run moved (a worker
/// ran, or its state changed).
async fn tick_one(
    runner: &Runner,
    forge: &Forge,
    config: &PrConfig,
    mut run: Run,
    memory: PrMemory,
    observed: Result<PrObservation, ForgeError>,
    paused_until: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<Option<RunResult>> {
    let store = runner.store.as_ref();
    let settings = runner.settings.as_ref();
    let gid = run.task_gid.clone();
    let Some(task) = store.task(&gid).await? else {
        anyhow::bail!("run {} has no task {gid}", run.id);
    };
    let look = lifecycle::PrLook {
        seen: seen(runner, forge, &run, observed).await?,
        memory: memory.clone(),
        config: config.clone(),
        paused_until,
        budget: spent::of_pr_run(store, settings, &gid, &run).await?,
    };
    let (view, action) = lifecycle::decide(
        &pr_view(&run),
        lifecycle::Event::PrLooked(Box::new(look)),
        &rules(settings, run.id),
        settings.clock.now(),
    )?;
    match action {
        lifecycle::Action::Pr(act) => match *act {
            lifecycle::PrAction::Settle => {
                let (_, settled) = settle_completion(runner, forge, &mut run, memory).await?;
                Ok(settled)
            }
            // A fix's push that did not land yet, then its answers: before anything else is
            // decided (the look was taken before the push), so no other worker starts on
            // threads already answered.
            lifecycle::PrAction::Push => {
                let mut memory = memory;
                let escalated = push_owed(runner, forge, &run, &mut memory).await?;
                if escalated.is_none() && memory.push.is_none() {
                    answers_owed(runner, forge, &run, memory).await?;
                }
                Ok(escalated.map(|id| result_of(&run, Some(id))))
            }
            lifecycle::PrAction::Answer => {
                answers_owed(runner, forge, &run, memory).await?;
                Ok(None)
            }
            lifecycle::PrAction::Step { step, obs, after } => {
                let taken = Taken {
                    memory,
                    step,
                    obs,
                    after,
                };
                take_step(runner, forge, run, task, view, taken).await
            }
        },
        lifecycle::Action::Abandon { reason } => {
            let holder = runner.holder.id();
            abandon(store, settings, &mut run, Origin::Pr, &holder, &reason).await?;
            Ok(Some(result_of(&run, None)))
        }
        lifecycle::Action::AskOwner {
            ask: lifecycle::Ask::Budget { why },
            ..
        } => {
            tracing::warn!(gid = %gid, run = run.id, "no new PR worker: {why}");
            let question = spent::question(&gid, run.id, &why);
            let id =
                open_escalation(store, &runner.adapter, settings, &run, &gid, &question).await?;
            Ok(Some(result_of(&run, Some(id))))
        }
        lifecycle::Action::WaitUntil(until) => {
            tracing::info!(gid = %gid, run = run.id, until = %until, "the PR's next worker waits for its agent's usage limit to reset");
            Ok(None)
        }
        lifecycle::Action::Wait => Ok(None),
        other => anyhow::bail!("run {} in its PR stage cannot {other:?}", run.id),
    }
}

/// The run's lifecycle view in its PR stage (see [`lifecycle::pr_stage::watched`]).
fn pr_view(run: &Run) -> lifecycle::RunView {
    lifecycle::pr_stage::watched(view_of(run), run.state == RunState::Complete)
}

/// The PR machine's step as the lifecycle decided it: the memory before and after, and
/// the look it was decided on.
struct Taken {
    memory: PrMemory,
    step: PrStep,
    obs: PrObservation,
    after: PrMemory,
}

/// Carries out the PR machine's step (labels, CI, threads, a worker, completion, the
/// owner's comment, an escalation) and saves the memory after it.
async fn take_step(
    runner: &Runner,
    forge: &Forge,
    mut run: Run,
    task: Task,
    view: lifecycle::RunView,
    taken: Taken,
) -> Result<Option<RunResult>> {
    let store = runner.store.as_ref();
    let settings = runner.settings.as_ref();
    let gid = run.task_gid.clone();
    let pr = pr_number(&run);
    let Taken {
        memory,
        step,
        obs,
        mut after,
    } = taken;
    tracing::info!(gid = %gid, run = run.id, step = ?step, "PR tick");
    let mut moved = false;
    match &step {
        // A closed PR is decided as the run's end (`Action::Abandon`), never as a step.
        PrStep::Wait { .. } | PrStep::Closed => {}
        PrStep::AddLabels { labels } => {
            forge.client.add_labels(pr, labels).await?;
        }
        PrStep::ResolveThreads { thread_ids } => {
            forge.client.resolve_threads(thread_ids).await?;
        }
        PrStep::TriggerCi { head_sha, reason } => {
            trigger_ci(forge, &run, &obs, head_sha, reason).await?;
        }
        PrStep::SpawnFixCi {
            attempt, failure, ..
        } => {
            let fix = (*attempt, failure.clone());
            after = fix_ci(runner, forge, &task, &mut run, after, &obs.head_sha, fix).await?;
            moved = true;
        }
        PrStep::SpawnFixComments { threads, .. } => {
            let threads = threads.clone();
            let before = store.messages(run.id, 1).await?.last().map_or(0, |m| m.id);
            pr_worker(
                runner,
                forge,
                &task,
                &mut run,
                &mut after,
                Phase::FixComments,
                |ctx| ctx.review_threads = threads,
            )
            .await?;
            // Decided and kept first; posted once the fix is on the branch (a push still
            // owed is pushed by the next tick, which then posts them).
            after.answers = thread_answers(store, &run, before).await?;
            opening::save_memory(store, settings.clock.as_ref(), run.id, &after).await?;
            if after.push.is_none() {
                after = answers_owed(runner, forge, &run, after).await?;
            }
            moved = true;
        }
        PrStep::SpawnReview { inputs } => {
            let inputs = inputs.clone();
            after = review_pr(runner, forge, &task, &mut run, after, &obs.head_sha, inputs).await?;
            moved = true;
        }
        PrStep::PostReview { body, .. } => {
            // `remember` marked it posted; it is only once the post lands.
            let kept = memory.clone();
            after = post_kept_review(runner, forge, &run, kept, body).await?;
        }
        PrStep::Complete { .. } | PrStep::Merged => {
            if run.state == RunState::Pr {
                // Decided first (the effects it owes are in `after.completion`), then the
                // effects, each marked done as it lands.
                opening::save_memory(store, settings.clock.as_ref(), run.id, &after).await?;
                complete_run(runner, &mut run).await?;
                settle_completion(runner, forge, &mut run, after).await?;
                return Ok(Some(result_of(&run, None)));
            }
            moved = matches!(step, PrStep::Merged);
        }
        PrStep::BackToPr { .. } => {
            run.lifecycle = Some(view);
            move_run(
                store,
                &mut run,
                RunEvent::OwnerCommented,
                settings.clock.now(),
            )
            .await?;
            moved = true;
        }
        PrStep::Merge {
            head_sha,
            method,
            delete_branch,
        } => {
            // Decided and kept first: a crash before the forge's answer sends it again,
            // for this head only, and a merged PR is seen as merged before that.
            opening::save_memory(store, settings.clock.as_ref(), run.id, &after).await?;
            let branch = run.branch_name.clone().filter(|_| *delete_branch);
            let outcome = forge
                .client
                .merge(pr, head_sha, *method, branch.as_deref())
                .await?;
            after = merge_answered(&run, after, outcome);
            moved = true;
        }
        PrStep::MergeHeld {
            head_sha,
            reasons,
            refused,
        } => {
            let (body, marker) =
                merge_held_comment(&forge.owner_login, run.id, head_sha, *refused, reasons);
            forge.client.tell_owner(pr, &body, &marker).await?;
        }
        PrStep::Escalate { kind, detail } => {
            let line = format!("[ESCALATE:{kind:?}] {detail}");
            let id = open_escalation(
                store,
                &runner.adapter,
                settings,
                &run,
                &gid,
                &Asked::Message(line),
            )
            .await?;
            opening::save_memory(store, settings.clock.as_ref(), run.id, &after).await?;
            return Ok(Some(result_of(&run, Some(id))));
        }
    }
    opening::save_memory(store, settings.clock.as_ref(), run.id, &after).await?;
    Ok(moved.then(|| result_of(&run, None)))
}

/// The memory once the forge answered the merge `after` keeps.
fn merge_answered(run: &Run, mut after: PrMemory, outcome: MergeOutcome) -> PrMemory {
    if let Some(attempt) = after.merge.as_mut() {
        match outcome {
            MergeOutcome::Merged => {
                tracing::info!(gid = %run.task_gid, run = run.id, head = %attempt.head_sha, "auto-merge: the PR is merged");
                attempt.done = true;
            }
            MergeOutcome::Refused(why) => {
                tracing::warn!(gid = %run.task_gid, run = run.id, head = %attempt.head_sha, why = %why, "auto-merge: the forge refused the merge; the owner is told");
                attempt.refused = Some(why);
            }
        }
    }
    after
}

/// The comment that tells the owner what holds auto-merge on `head_sha`, and its marker
/// (one comment per run and head).
fn merge_held_comment(
    owner_login: &str,
    run_id: i64,
    head_sha: &str,
    refused: bool,
    reasons: &[String],
) -> (String, String) {
    let kind = if refused {
        "merge-refused"
    } else {
        "merge-held"
    };
    let marker = format!(
        "{}run-{run_id}:{kind}:{head_sha} -->",
        crate::core::pr::EXECUTOR_MARK
    );
    let short = crate::core::merge::short(head_sha);
    let list: Vec<String> = reasons.iter().map(|r| format!("- {r}")).collect();
    let body = format!(
        "@{} auto-merge is holding this PR at {short}:\n\n{}\n\nexecutor merges it once none of these holds (a merge the forge refused is not sent again for this head: push a new head or merge it yourself).\n\n{marker}",
        owner_login.trim_start_matches('@'),
        list.join("\n")
    );
    (body, marker)
}

/// Starts CI for `head_sha` the way that fits what GitHub shows (a re-run of the failed
/// jobs, or the configured workflow dispatched); nothing when neither is possible (the
/// owner is asked by the machine if CI does not appear).
async fn trigger_ci(
    forge: &Forge,
    run: &Run,
    obs: &PrObservation,
    head_sha: &str,
    reason: &crate::core::pr::TriggerReason,
) -> Result<()> {
    let branch = run.branch_name.clone().unwrap_or_default();
    let workflow = forge.ci_workflow.as_deref();
    match forge
        .client
        .trigger_ci(obs, reason, workflow, &branch, head_sha)
        .await?
    {
        true => {}
        false => {
            tracing::warn!(gid = %run.task_gid, run = run.id, "CI is missing for the head and executor cannot start it (no failed run to re-run); the owner is asked if it does not appear")
        }
    }
    Ok(())
}

/// What the forge answered for the run's PR, as the lifecycle reads it: a PR gone from
/// the forge, one it cannot show now (a 5xx, a rate limit, a timeout), or the PR; any other
/// failure is the step's error. A look is kept for the console's Run page, which never asks
/// the forge itself; one that cannot be kept costs the page its PR section, never the step.
async fn seen(
    runner: &Runner,
    forge: &Forge,
    run: &Run,
    observed: Result<PrObservation, ForgeError>,
) -> Result<lifecycle::Seen> {
    let (store, settings) = (runner.store.as_ref(), runner.settings.as_ref());
    let gid = &run.task_gid;
    match observed {
        Ok(obs) => {
            match serde_json::to_string(&obs) {
                Ok(look) => {
                    if let Err(error) = store.save_pr_look(run.id, &look, obs.observed_at).await {
                        tracing::warn!(gid = %gid, run = run.id, %error, "cannot keep the look at the run's PR for the console");
                    }
                }
                Err(error) => {
                    tracing::warn!(gid = %gid, run = run.id, %error, "cannot write the look at the run's PR as JSON")
                }
            }
            Ok(lifecycle::Seen::Pr(obs))
        }
        Err(error) if error.is_not_found() => Ok(lifecycle::Seen::Gone {
            forge: forge.client.name().to_string(),
        }),
        Err(error) if error.is_transient() => {
            tracing::info!(gid = %gid, run = run.id, %error, retry_at = ?error.retry_at(settings.clock.now()), forge = forge.client.name(), "the forge cannot answer now; the run waits");
            Ok(lifecycle::Seen::Unavailable)
        }
        Err(error) => Err(error.into()),
    }
}

/// Starts the `fix_ci` worker of attempt `fix.0` on the failed head `head_sha` (failure
/// `fix.1`), tied to that head in the memory before it starts, so no later tick (nor a
/// crash and a restart) starts a second one for it. Answers the memory after the worker:
/// the fix and the commit it pushed, or no fix when the worker ended without one (the head
/// may be tried again, within `max_ci_attempts`).
async fn fix_ci(
    runner: &Runner,
    forge: &Forge,
    task: &Task,
    run: &mut Run,
    mut after: PrMemory,
    head_sha: &str,
    (attempt, failure): (u32, crate::prompts::CiFailure),
) -> Result<PrMemory> {
    let store = runner.store.as_ref();
    // Before the attempt is recorded: a worker that cannot start on a fresh lease must not
    // leave a fix "tried for this head" behind.
    super::worker::fresh_lease(&runner.settings, run.id).await?;
    run.ci_attempts = i64::from(attempt);
    store.save_run(run).await?;
    opening::save_memory(store, runner.settings.clock.as_ref(), run.id, &after).await?;
    let (worked, pushed) = pr_worker(runner, forge, task, run, &mut after, Phase::FixCi, |ctx| {
        ctx.ci = Some(failure);
    })
    .await?;
    after.ci_fix = worked.done.as_ref().map(|_| crate::core::pr::CiFix {
        head_sha: head_sha.to_string(),
        pushed,
    });
    // A worker stopped by its agent's usage limit spent no attempt: the first look after
    // the reset starts the same attempt again.
    if worked.limited.is_some() {
        after.ci_attempts = attempt.saturating_sub(1);
        run.ci_attempts = i64::from(after.ci_attempts);
        store.save_run(run).await?;
    }
    Ok(after)
}

/// Starts the `pr_review` worker on `head_sha`; its verdict is kept in the memory before
/// it is posted (a failed post is posted again by a later tick, never reviewed again).
/// Answers the memory after the post.
async fn review_pr(
    runner: &Runner,
    forge: &Forge,
    task: &Task,
    run: &mut Run,
    mut after: PrMemory,
    head_sha: &str,
    inputs: crate::prompts::ReviewInputs,
) -> Result<PrMemory> {
    let (worked, _) = pr_worker(
        runner,
        forge,
        task,
        run,
        &mut after,
        Phase::PrReview,
        |ctx| {
            ctx.review = Some(inputs);
        },
    )
    .await?;
    let Some(done) = &worked.done else {
        return Ok(after);
    };
    let passed = done.starts_with("[DONE:review_green]");
    let summary = done
        .split_once(']')
        .map(|(_, rest)| rest.trim())
        .unwrap_or_default();
    let body = format!(
        "executor's review: {}\n\n{summary}\n\n{}",
        if passed { "green" } else { "changes requested" },
        crate::forge::github::review_marker(run.id, head_sha)
    );
    after = after.record_review(head_sha, passed, &body);
    let clock = runner.settings.clock.as_ref();
    opening::save_memory(runner.store.as_ref(), clock, run.id, &after).await?;
    post_kept_review(runner, forge, run, after, &body).await
}

/// The run `complete` and its task `done`, through the one ending; the tick keeps the
/// run's lease until its step is over (a run back in `pr` after the owner's comment
/// completes again; its task is `done` already).
async fn complete_run(runner: &Runner, run: &mut Run) -> Result<()> {
    let (store, settings) = (runner.store.as_ref(), runner.settings.as_ref());
    end(store, settings, run, Origin::Pr, Outcome::completed(), None).await
}

/// Posts the review kept in `memory` (`body`); answers the memory after: posted, or the
/// failure counted (and the owner asked once the failures reach `max_effect_failures`).
async fn post_kept_review(
    runner: &Runner,
    forge: &Forge,
    run: &Run,
    memory: PrMemory,
    body: &str,
) -> Result<PrMemory> {
    // Kept reviews from before reviews carried their marker get it now.
    let head = memory.review.as_ref().map_or("", |r| r.head_sha.as_str());
    let marker = crate::forge::github::review_marker(run.id, head);
    let body = if body.contains(&marker) {
        body.to_string()
    } else {
        format!("{body}\n\n{marker}")
    };
    match forge
        .client
        .post_review(pr_number(run), &body, &marker)
        .await
    {
        Ok(_) => Ok(memory.review_posted().effect_done()),
        Err(error) => {
            let memory =
                effect_failed(runner, forge, run, memory, "post the review", &error).await?;
            Ok(memory)
        }
    }
}

/// Counts a failed outside effect in `memory` and saves it; asks the owner (once) when the
/// failures in a row reach `max_effect_failures` (at once for an error that cannot pass).
async fn effect_failed(
    runner: &Runner,
    forge: &Forge,
    run: &Run,
    memory: PrMemory,
    what: &str,
    error: &ForgeError,
) -> Result<PrMemory> {
    let max = if error.is_transient() {
        forge.max_effect_failures
    } else {
        1
    };
    let (memory, ask) = memory.effect_failed(max);
    tracing::warn!(gid = %run.task_gid, run = run.id, failures = memory.effect_failures, %error, "cannot {what} now; the next tick tries again");
    opening::save_memory(
        runner.store.as_ref(),
        runner.settings.clock.as_ref(),
        run.id,
        &memory,
    )
    .await?;
    if ask {
        let line = format!(
            "[ESCALATE:EffectFailing] cannot {what} on PR {} ({} failed tries; executor keeps trying): {error}",
            run.pr_url.as_deref().unwrap_or(""),
            memory.effect_failures
        );
        open_escalation(
            runner.store.as_ref(),
            &runner.adapter,
            &runner.settings,
            run,
            &run.task_gid,
            &Asked::Message(line),
        )
        .await?;
    }
    Ok(memory)
}

/// Performs what the run's completion still owes, in order, each marked done in the memory
/// as it lands: the run and task moved (if a crash came between the decision and the move),
/// the owner's @mention on the PR (not for a merged PR: the owner merged it), then the
/// record step and the owner's notice. A failed comment stops here for the next tick.
/// Answers the memory after, and `Some` when the run moved.
async fn settle_completion(
    runner: &Runner,
    forge: &Forge,
    run: &mut Run,
    mut memory: PrMemory,
) -> Result<(PrMemory, Option<RunResult>)> {
    use crate::core::pr::Owed;
    let store = runner.store.as_ref();
    let settings = runner.settings.as_ref();
    let gid = run.task_gid.clone();
    let Some(task) = store.task(&gid).await? else {
        anyhow::bail!("run {} has no task {gid}", run.id);
    };
    let mut moved = None;
    if run.state == RunState::Pr || task.status == QueueStatus::InProgress {
        complete_run(runner, run).await?;
        moved = Some(result_of(run, None));
    }
    while let Some(owed) = memory.completion.as_ref().and_then(|c| c.next()) {
        let Some(completion) = memory.completion.clone() else {
            break;
        };
        match owed {
            Owed::Comment => {
                let told = forge
                    .client
                    .notify_complete(
                        pr_number(run),
                        &forge.owner_login,
                        run.id,
                        &completion.head_sha,
                    )
                    .await;
                if let Err(error) = told {
                    let memory =
                        effect_failed(runner, forge, run, memory, "@mention the owner", &error)
                            .await?;
                    return Ok((memory, moved));
                }
                tracing::info!(gid = %gid, run = run.id, pr = run.pr_url.as_deref().unwrap_or(""), "run complete: CI green, reviewed, nothing unresolved; the owner was told on the PR");
                memory = memory.effect_done();
                memory.completion = Some(crate::core::pr::Completion {
                    comment: false,
                    ..completion
                });
            }
            Owed::Record => {
                if let Some(task) = store.task(&gid).await? {
                    let verification = if completion.merged {
                        if forge.is_github() {
                            "merged on GitHub"
                        } else {
                            "merged on Gitea"
                        }
                    } else {
                        "CI green, reviewed, no thread unresolved"
                    };
                    settings
                        .recorder
                        .record(
                            store,
                            &settings.notices,
                            crate::runner::record::Completion {
                                task: &task,
                                run,
                                commit: Some(completion.head_sha.clone()),
                                verification: vec![verification.into()],
                                at: settings.clock.now(),
                            },
                        )
                        .await;
                }
                settings
                    .notices
                    .tell_completed(store, &gid, run.id, run.pr_url.as_deref())
                    .await;
                if completion.merged {
                    tracing::info!(gid = %gid, run = run.id, pr = run.pr_url.as_deref().unwrap_or(""), "run complete: its PR was merged");
                }
                memory.completion = None;
            }
        }
        opening::save_memory(store, settings.clock.as_ref(), run.id, &memory).await?;
        moved = Some(result_of(run, None));
    }
    if memory
        .completion
        .as_ref()
        .is_some_and(|c| c.next().is_none())
    {
        memory.completion = None;
        opening::save_memory(store, settings.clock.as_ref(), run.id, &memory).await?;
    }
    Ok((memory, moved))
}

/// Answers on the PR, for the worker, each thread it took up (its
/// `[STATUS:thread_fixed|thread_acknowledged] thread=<id> …` lines written after message
/// `after`): an acknowledged thread gets an `[ACKNOWLEDGED: …]` reply, so it no longer asks
/// for work; a fixed one a reply saying so, so its reviewer can resolve it. The owner's
/// conversation comment (`comment-<id>`) is answered with a PR comment that links it. Every
/// answer carries executor's mark, so it is never read back as someone else's.
/// What the run's worker said of its threads after message `after` (`[STATUS:thread_fixed]`
/// and `[STATUS:thread_acknowledged]` naming a thread), as the replies they become.
async fn thread_answers(store: &dyn Store, run: &Run, after: i64) -> Result<Vec<ThreadAnswer>> {
    use crate::core::pr::EXECUTOR_MARK;
    let branch = run.branch_name.clone().unwrap_or_default();
    Ok(store
        .messages(run.id, MESSAGE_WINDOW * 10)
        .await?
        .into_iter()
        .filter(|m| m.id > after && m.source == "worker" && m.tag == "STATUS")
        .filter_map(|m| {
            let args: serde_json::Value = serde_json::from_str(&m.args).ok()?;
            let thread = args["thread"].as_str()?.to_string();
            let text = m.text.trim();
            let text = match m.kind.as_str() {
                "thread_acknowledged" => {
                    let why = match (args["reason"].as_str(), text) {
                        (Some(reason), "") => reason.to_string(),
                        (Some(reason), text) => format!("{reason}: {text}"),
                        (None, text) => text.to_string(),
                    };
                    format!("[ACKNOWLEDGED: {why}]\n\n{EXECUTOR_MARK}acknowledged -->")
                }
                "thread_fixed" => {
                    format!("Fixed on `{branch}`: {text}\n\n{EXECUTOR_MARK}fixed -->")
                }
                _ => return None,
            };
            Some(ThreadAnswer { thread, text })
        })
        .collect())
}

/// Posts the answers `memory` owes, in order, each taken off the list (and the list saved)
/// as it lands; a failure stops there, counted (the owner asked once the failures reach
/// `max_effect_failures`), for the next tick. Answers the memory after.
async fn answers_owed(
    runner: &Runner,
    forge: &Forge,
    run: &Run,
    mut memory: PrMemory,
) -> Result<PrMemory> {
    let store = runner.store.as_ref();
    let clock = runner.settings.clock.as_ref();
    while let Some(answer) = memory.answers.first().cloned() {
        let one = [(answer.thread.clone(), answer.text.clone())];
        match forge
            .client
            .answer_threads(pr_number(run), run.pr_url.as_deref(), &one)
            .await
        {
            Ok(missing) => {
                for thread in missing {
                    tracing::warn!(run = run.id, %thread, "the worker answered a thread the PR does not have; nothing to reply to")
                }
                memory.answers.remove(0);
                memory = memory.effect_done();
                opening::save_memory(store, clock, run.id, &memory).await?;
            }
            Err(error) => {
                return effect_failed(runner, forge, run, memory, "answer a review thread", &error)
                    .await;
            }
        }
    }
    Ok(memory)
}

fn result_of(run: &Run, waiting_on: Option<i64>) -> RunResult {
    RunResult {
        task_gid: run.task_gid.clone(),
        run_id: run.id,
        state: run.state.clone(),
        ci_attempts: run.ci_attempts,
        waiting_on,
        lease_released: false,
    }
}

/// Runs one worker of a PR phase in the run's worktree (holding a worker slot), then
/// commits what it changed (a review changes nothing) and owes its push: the push is
/// written into `memory` (and saved) before it is tried, so a push that fails is pushed
/// again by a later tick, never worked again. Answers what the worker did and the commit
/// it made, if it made one; a push that lands expires the client's cached looks, so the
/// next look at the PR sees the new head.
async fn pr_worker(
    runner: &Runner,
    forge: &Forge,
    task: &Task,
    run: &mut Run,
    memory: &mut PrMemory,
    phase: Phase,
    fill: impl FnOnce(&mut PromptContext),
) -> Result<(Worked, Option<String>)> {
    let _slot = Arc::clone(&runner.slots).acquire_owned().await?;
    let store = runner.store.as_ref();
    let settings = runner.settings.as_ref();
    let gid = task.task_gid.clone();
    let wt = prepare_worktree(store, settings, task).await?;
    let mut ctx = PromptContext::new(
        phase,
        TaskContext::from_task(task),
        RunContext {
            pr_url: run.pr_url.clone(),
            pr_number: run.pr_number,
            ..run_context(settings, run, &wt)
        },
    );
    ctx.attempt = match phase {
        Phase::FixCi => u32::try_from(run.ci_attempts).unwrap_or(u32::MAX),
        _ => 1,
    };
    if phase == Phase::FixCi {
        ctx.max_attempts = Some(settings.max_ci_attempts);
    }
    ctx.messages = store
        .messages(run.id, MESSAGE_WINDOW)
        .await?
        .into_iter()
        .map(|m| crate::prompts::PromptMessage {
            at: m.at,
            from: m.source,
            text: m.line,
        })
        .collect();
    fill(&mut ctx);
    let prompt = runner.prompts.render(phase, &ctx)?;
    let worked = work(
        store,
        &runner.adapter,
        settings,
        run,
        &gid,
        phase,
        &wt.path,
        prompt,
    )
    .await?;
    write_run_record(settings, &gid, run.id, phase, &wt.path, &worked).await?;
    let mut pushed = None;
    if worked.done.is_some() && phase != Phase::PrReview {
        let before = full_head(settings, &wt.path).await;
        let asked = match commit(settings, &wt.path, task, run.id, &worked).await? {
            Some(asked) => Some(asked),
            None if settings.worktrees => tampered(worked.baseline.as_ref()).await?,
            None => None,
        };
        match asked {
            Some(asked) => {
                open_escalation(store, &runner.adapter, settings, run, &gid, &asked).await?;
            }
            None => {
                let after = full_head(settings, &wt.path).await;
                // A worker that changed nothing has nothing new to push.
                pushed = after.filter(|head| Some(head) != before.as_ref());
                if let Some(commit) = &pushed {
                    memory.push = Some(crate::core::pr::Push {
                        branch: wt.branch.clone(),
                        commit: commit.clone(),
                    });
                    opening::save_memory(store, settings.clock.as_ref(), run.id, memory).await?;
                    push_owed(runner, forge, run, memory).await?;
                }
            }
        }
    }
    // The worker tampered with the repository: nothing was committed or pushed; the owner
    // is asked.
    if let (true, Some(asked)) = (worked.tampered, &worked.asked) {
        open_escalation(store, &runner.adapter, settings, run, &gid, asked).await?;
    }
    if worked.done.is_none() {
        tracing::warn!(gid = %gid, run = run.id, phase = phase.as_str(), why = %worked.why, "a PR worker ended without [DONE]; the next tick looks again");
    }
    Ok((worked, pushed))
}

/// One try at the push `memory` owes: marked done (and saved) as it lands; a failure is
/// counted in the memory and, after `[forge] max_effect_failures` in a row, the owner is
/// asked once (the escalation's id is answered). Only a store failure is an error.
async fn push_owed(
    runner: &Runner,
    forge: &Forge,
    run: &Run,
    memory: &mut PrMemory,
) -> Result<Option<i64>> {
    let store = runner.store.as_ref();
    let settings = runner.settings.as_ref();
    let clock = settings.clock.as_ref();
    let Some(push) = memory.push.clone() else {
        return Ok(None);
    };
    match push_recorded(settings, run, &forge.remote, &push).await {
        Ok(()) => {
            forge.client.expire_cache();
            *memory = memory.push_done();
            opening::save_memory(store, clock, run.id, memory).await?;
            Ok(None)
        }
        Err(error) => {
            let (failed, ask) = memory.effect_failed(forge.max_effect_failures);
            *memory = failed;
            opening::save_memory(store, clock, run.id, memory).await?;
            let error = format!("{error:#}");
            tracing::warn!(gid = %run.task_gid, run = run.id, failures = memory.effect_failures, %error, "cannot push the fix now; the next tick pushes it again");
            if !ask {
                return Ok(None);
            }
            let line = opening::failing_line(
                &push.branch,
                opening::Effect::Push,
                memory.effect_failures,
                &error,
            );
            let id = open_escalation(
                store,
                &runner.adapter,
                settings,
                run,
                &run.task_gid,
                &Asked::Message(line),
            )
            .await?;
            Ok(Some(id))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::contained;

    #[tokio::test]
    async fn a_panicking_step_is_an_error_of_its_own_and_its_siblings_finish() {
        let mut steps = tokio::task::JoinSet::new();
        for n in 0..3u32 {
            steps.spawn(async move {
                let done = contained(async move {
                    if n == 1 {
                        panic!("odd PR state {n}");
                    }
                    Ok(n)
                })
                .await;
                (n, done)
            });
        }
        let mut seen = Vec::new();
        while let Some(joined) = steps.join_next().await {
            let (n, done) = joined.expect("a step never takes the loop down");
            seen.push((n, done.map_err(|e| e.to_string())));
        }
        seen.sort_by_key(|(n, _)| *n);
        assert_eq!(
            seen,
            [
                (0, Ok(0)),
                (1, Err("the PR step panicked: odd PR state 1".to_string())),
                (2, Ok(2)),
            ]
        );
    }
}

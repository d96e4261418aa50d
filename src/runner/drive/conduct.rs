//! The conductor in the run loop: a goal (a task with one of `conductor.goal_labels`) is
//! first split by a planner worker (`decompose` phase) into child tasks with dependency
//! edges; children run as their dependencies complete, each from the parent's branch, and a
//! child that completes is merged into the parent's branch, so a later child builds on it;
//! the parent completes when every child has. A child whose worker failed every retry is
//! split again, smaller, down to `conductor.max_depth`; past it, the parent gives up and the
//! owner is told. Each step is decided by [`crate::conductor::progress::next`].
//!
//! What it must never do: start a child before the children it depends on are done, or
//! leave a waiting parent looking stranded (recovery skips a run whose task has children).

use super::{spent, verify};
use super::{RunResult, Runner, RunnerSettings, DECLINED_BY_OWNER, DENIED_BY_CONTRACT};
use crate::conductor::plan::{self, Plan, PLAN_FILE};
use crate::conductor::progress::{self, ChildState, ParentStep};
use crate::core::ending::{Origin, Outcome};
use crate::core::facts::TaskFacts;
use crate::core::queue::{QueueEvent, QueueStatus};
use crate::core::record::Run;
use crate::core::run::RunState;
use crate::core::task::Task;
use crate::core::tree::{TaskDependency, TaskLink};
use crate::ops::queue as queue_ops;
use crate::prompts::{Phase, PromptContext, PromptSet, TaskContext};
use crate::runner::drive::abandon;
use crate::runner::drive::discard_uncommitted;
use crate::runner::drive::end;
use crate::runner::drive::head_commit;
use crate::runner::drive::open_escalation;
use crate::runner::drive::orchestrator_git;
use crate::runner::drive::record;
use crate::runner::drive::release_run;
use crate::runner::drive::run_context;
use crate::runner::drive::take_run;
use crate::runner::drive::work;
use crate::runner::drive::write_run_record;
use crate::runner::worktree;
use crate::store::Store;
use anyhow::{Context, Result};
use std::path::PathBuf;

/// Whether `task` is a goal still to be split: it carries a goal label and has no children.
pub(super) async fn needs_split(
    store: &dyn Store,
    settings: &RunnerSettings,
    task: &Task,
) -> Result<bool> {
    Ok(has_goal_label(store, settings, &task.task_gid).await?
        && store.children(&task.task_gid).await?.is_empty())
}

/// The branch a task's worktree starts from: its parent's run branch (so a child builds on
/// the children merged before it), else the base branch.
pub(super) async fn base_for(
    store: &dyn Store,
    settings: &RunnerSettings,
    task: &Task,
) -> Result<String> {
    if let Some(link) = store.task_link(&task.task_gid).await? {
        let branch = store
            .runs(Some(&link.parent_gid))
            .await?
            .into_iter()
            .rev()
            .find_map(|r| r.branch_name);
        if let Some(branch) = branch {
            return Ok(branch);
        }
    }
    Ok(settings.base_branch.clone())
}

/// Runs the planner on `task` in its run's worktree and stores the children it plans. A
/// plan that is missing or does not validate is asked for again (the planner is told what
/// was wrong), up to the worker-attempt cap; then the run is abandoned. `told` is what the
/// first planner is told (the owner's answer to an earlier planner's question).
#[allow(clippy::too_many_arguments)]
pub(super) async fn decompose(
    runner: &Runner,
    task: Task,
    mut run: Run,
    wt: worktree::Worktree,
    told: Option<String>,
) -> Result<RunResult> {
    let (store, adapter, prompts, settings) = (
        runner.store.as_ref(),
        &runner.adapter,
        runner.prompts.as_ref(),
        runner.settings.as_ref(),
    );
    let gid = task.task_gid.clone();
    let link = store.task_link(&gid).await?;
    let depth = link.as_ref().map(|l| l.depth).unwrap_or(0) + 1;
    let split_reason = match &link {
        Some(_) => last_abandon_reason(store, &gid).await?,
        None => None,
    };
    // What the planner is told first: the owner's answer to its question, or why its
    // last planner stopped.
    let mut problem: Option<String> = told;
    // A subtask split after its workers failed starts its planner from a clean worktree:
    // what the failed attempts left must not reach its children's merges.
    if link.is_some() && settings.worktrees {
        discard_uncommitted(settings, &wt.path).await?;
    }
    for attempt in 1..=settings.max_worker_attempts {
        let planner = Planner {
            attempt,
            depth,
            problem: problem.clone(),
            split_reason: split_reason.clone(),
        };
        let prompt = planner.prompt(prompts, settings, &task, &run, &wt)?;
        let plan_path = wt.path.join(PLAN_FILE);
        let _ = std::fs::remove_file(&plan_path);
        // Outside the lifecycle, the budget is looked at here: a worker over it asks the
        // owner instead of starting.
        let worked = match spent::over(store, settings, &gid, &run).await? {
            Some(over) => spent::not_started(&run, &gid, &over),
            None => {
                work(
                    store,
                    adapter,
                    settings,
                    &mut run,
                    &gid,
                    Phase::Decompose,
                    &wt.path,
                    prompt,
                )
                .await?
            }
        };
        let planned = std::fs::read_to_string(&plan_path);
        // The plan is the orchestrator's input, never part of the change.
        let _ = std::fs::remove_file(&plan_path);
        write_run_record(settings, &gid, run.id, Phase::Decompose, &wt.path, &worked).await?;
        if let Some(asked) = &worked.asked {
            run.updated_at = settings.clock.now();
            store.save_run(&run).await?;
            let escalation = open_escalation(store, adapter, settings, &run, &gid, asked).await?;
            return Ok(result_of(&run, Some(escalation)));
        }
        let parsed = match planned {
            Ok(text) => plan::parse(&text).map_err(|e| e.to_string()),
            Err(_) if worked.done.is_none() => {
                Err(format!("the planner ended without a plan: {}", worked.why))
            }
            Err(error) => Err(format!("no plan in {PLAN_FILE}: {error}")),
        };
        match parsed {
            Ok(plan) => {
                // The planner writes the plan and nothing else: whatever else it left is
                // thrown away, so its subtasks are merged into a clean branch.
                if settings.worktrees {
                    discard_uncommitted(settings, &wt.path).await?;
                }
                store_children(store, settings, &task, depth, &plan).await?;
                tracing::info!(gid = %gid, run = run.id, subtasks = plan.subtasks.len(), depth, "split into subtasks; they run as their dependencies complete");
                tell_split(store, settings, &gid, run.id, &plan).await;
                return Ok(result_of(&run, None));
            }
            Err(why) => {
                tracing::warn!(gid = %gid, run = run.id, attempt, %why, "the planner's plan was refused");
                problem = Some(format!("your plan was refused: {why}. Write it again."));
            }
        }
    }
    let why = problem.unwrap_or_else(|| "the planner made no plan".into());
    let holder = runner.holder.id();
    abandon(store, settings, &mut run, Origin::Conductor, &holder, &why).await?;
    Ok(result_of(&run, None))
}

/// How a carried run stands when its pass lets it go.
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

/// One planner's round: which attempt, how deep the goal is, and what it is told.
struct Planner {
    attempt: u32,
    depth: u32,
    /// The owner's answer, or why the last plan was refused.
    problem: Option<String>,
    /// Why this subtask is split again (its workers failed).
    split_reason: Option<String>,
}

impl Planner {
    fn prompt(
        &self,
        prompts: &PromptSet,
        settings: &RunnerSettings,
        task: &Task,
        run: &Run,
        wt: &worktree::Worktree,
    ) -> Result<String> {
        let mut ctx = PromptContext::new(
            Phase::Decompose,
            TaskContext::from_task(task),
            run_context(settings, run, wt),
        );
        ctx.attempt = self.attempt;
        ctx.max_attempts = Some(settings.max_worker_attempts);
        ctx.resume_reason = self.problem.clone();
        ctx.conductor = Some(crate::prompts::ConductorInputs {
            plan_file: PLAN_FILE.to_string(),
            depth: self.depth,
            max_depth: settings.conductor.max_depth,
            max_subtasks: plan::MAX_SUBTASKS as u32,
            split_reason: self.split_reason.clone(),
        });
        Ok(prompts.render(Phase::Decompose, &ctx)?)
    }
}

/// Tells the owner what the goal was split into.
async fn tell_split(
    store: &dyn Store,
    settings: &RunnerSettings,
    gid: &str,
    run_id: i64,
    plan: &Plan,
) {
    let parts = plan
        .subtasks
        .iter()
        .map(|s| format!("`{}` {}", plan::child_gid(gid, &s.key), s.title))
        .collect::<Vec<_>>()
        .join("; ");
    settings
        .notices
        .tell(
            store,
            crate::chat::Notice::orchestrator(
                crate::core::outbox::Priority::Info,
                gid.to_string(),
                Some(run_id),
                format!(
                    "`{gid}` is split into {} subtask(s): {parts}",
                    plan.subtasks.len()
                ),
            ),
        )
        .await;
}

/// Links the children first (all or nothing), then creates their tasks, approved: the
/// owner's go for the goal is the go for its parts.
async fn store_children(
    store: &dyn Store,
    settings: &RunnerSettings,
    parent: &Task,
    depth: u32,
    plan: &Plan,
) -> Result<()> {
    let now = settings.clock.now();
    let gid = &parent.task_gid;
    let links: Vec<TaskLink> = plan
        .subtasks
        .iter()
        .enumerate()
        .map(|(i, s)| TaskLink {
            task_gid: plan::child_gid(gid, &s.key),
            parent_gid: gid.clone(),
            depth,
            key: s.key.clone(),
            position: i as u32,
            created_at: now,
        })
        .collect();
    let key_gid = |key: &str| {
        plan.subtasks
            .iter()
            .find(|s| s.key.eq_ignore_ascii_case(key))
            .map(|s| plan::child_gid(gid, &s.key))
            .unwrap_or_else(|| plan::child_gid(gid, key))
    };
    let dependencies: Vec<TaskDependency> = plan
        .subtasks
        .iter()
        .flat_map(|s| {
            s.depends_on.iter().map(|on| TaskDependency {
                task_gid: plan::child_gid(gid, &s.key),
                depends_on: key_gid(on),
            })
        })
        .collect();
    for link in &links {
        crate::core::gid::validate(&link.task_gid)
            .map_err(|e| anyhow::anyhow!("subtask `{}`: {e}", link.key))?;
    }
    store.link_children(gid, &links, &dependencies).await?;
    for subtask in &plan.subtasks {
        let child = plan::child_gid(gid, &subtask.key);
        store
            .upsert_task(
                &crate::core::task::NewTask {
                    task_gid: child,
                    source: "conductor".to_string(),
                    description: subtask.description(&parent.title()),
                    notes: None,
                    priority: parent.priority,
                    initial_status: QueueStatus::Approved,
                },
                "conductor",
                now,
            )
            .await?;
    }
    Ok(())
}

/// Why `gid`'s last run was abandoned, from its history.
async fn last_abandon_reason(store: &dyn Store, gid: &str) -> Result<Option<String>> {
    Ok(store
        .events(gid)
        .await?
        .into_iter()
        .rev()
        .find(|e| e.kind == QueueEvent::RunAbandoned.name())
        .and_then(|e| e.detail))
}

/// Whether a task has children (its run waits for them and must not be taken for stranded).
pub(super) async fn is_waiting_parent(store: &dyn Store, gid: &str) -> Result<bool> {
    Ok(!store.children(gid).await?.is_empty())
}

/// Looks at every parent waiting for its children and takes its next step: merges the
/// children that completed into its branch, splits a failed child, completes or gives up.
/// Whether anything moved (so `run --once` knows to go round again).
pub async fn tick_parents(runner: &Runner) -> Result<bool> {
    let store = runner.store.as_ref();
    let settings = runner.settings.as_ref();
    let mut moved = false;
    // The runs in progress alone (an index range, not every run ever made), oldest first.
    let mut open = store
        .runs_page(&[RunState::InProgress], None, u32::MAX)
        .await?;
    open.reverse();
    for run in open {
        // Most runs have no subtasks: that is asked first, so an idle daemon over many open
        // runs makes one read per run each pass rather than two.
        let links = store.children(&run.task_gid).await?;
        if links.is_empty() {
            continue;
        }
        let Some(task) = store.task(&run.task_gid).await? else {
            continue;
        };
        if task.status != QueueStatus::InProgress {
            continue;
        }
        // The parent's run is taken for its step, so two runners never end it twice.
        let (clock, run_id) = (settings.clock.as_ref(), run.id);
        let Some(epoch) = take_run(store, &runner.holder, clock, run_id).await? else {
            continue;
        };
        let run = Run {
            lease_epoch: epoch,
            ..run
        };
        let holder = runner.holder.id();
        match tick_parent(store, settings, &holder, &task, run, &links).await {
            Ok(step_moved) => moved |= step_moved,
            Err(error) => {
                tracing::error!(gid = %task.task_gid, error = format!("{error:#}"), "cannot take a parent task's next step")
            }
        }
        release_run(store, &runner.holder, run_id).await;
    }
    Ok(moved)
}

async fn tick_parent(
    store: &dyn Store,
    settings: &RunnerSettings,
    holder: &str,
    task: &Task,
    run: Run,
    links: &[TaskLink],
) -> Result<bool> {
    let gid = task.task_gid.clone();
    let Some(children) = children_of(store, settings, &gid, &run, links).await? else {
        return Ok(false);
    };
    match progress::next(&children, settings.conductor.max_depth) {
        ParentStep::Wait => Ok(false),
        ParentStep::Complete => {
            complete_parent(store, settings, holder, task, run, children.len()).await
        }
        ParentStep::Split { child } => {
            mark_goal(store, settings, &child).await?;
            queue_ops::apply(
                store,
                settings.clock.as_ref(),
                &child,
                QueueEvent::Go,
                "conductor",
                Some("its worker failed every retry: split into smaller subtasks".into()),
            )
            .await?;
            tracing::warn!(gid = %gid, %child, "a subtask failed every retry; it is split into smaller ones");
            Ok(true)
        }
        ParentStep::GiveUp { child } => {
            give_up_parent(store, settings, holder, run, &children, &child).await
        }
    }
}

/// The parent's subtasks as the progress rule reads them, the completed ones merged into
/// the parent's branch; `None` while one is linked but not created yet.
async fn children_of(
    store: &dyn Store,
    settings: &RunnerSettings,
    gid: &str,
    run: &Run,
    links: &[TaskLink],
) -> Result<Option<Vec<ChildState>>> {
    let mut children = Vec::with_capacity(links.len());
    for link in links {
        let Some(child) = store.task(&link.task_gid).await? else {
            // Linked but not created yet (a planner's children are linked first): wait.
            tracing::warn!(gid = %gid, child = %link.task_gid, "a subtask is linked but has no task yet");
            return Ok(None);
        };
        let runs = store.runs(Some(&link.task_gid)).await?;
        let last = runs.last();
        if child.status == QueueStatus::Done {
            if let Some(branch) = last.and_then(|r| r.branch_name.clone()) {
                merge_child(settings, run, &link.task_gid, &branch).await?;
            }
        }
        let refused = last_abandon_reason(store, &link.task_gid)
            .await?
            .is_some_and(|why| REFUSALS.contains(&why.as_str()));
        children.push(ChildState {
            gid: link.task_gid.clone(),
            status: child.status.clone(),
            depth: link.depth,
            last_run: last.map(|r| r.state.clone()),
            split: !store.children(&link.task_gid).await?.is_empty(),
            tried_split: has_goal_label(store, settings, &link.task_gid).await?,
            workers_failed: !refused,
        });
    }
    Ok(Some(children))
}

/// Every subtask is complete: the parent's own branch goes into its parent (a split
/// subtask is a parent too), then the run completes, is recorded and told.
async fn complete_parent(
    store: &dyn Store,
    settings: &RunnerSettings,
    holder: &str,
    task: &Task,
    mut run: Run,
    subtasks: usize,
) -> Result<bool> {
    let gid = task.task_gid.clone();
    if let Some(branch) = run.branch_name.clone() {
        if let Some(failed) = merge_into_parent(store, settings, &gid, run.id, &branch).await? {
            abandon(
                store,
                settings,
                &mut run,
                Origin::Conductor,
                holder,
                &failed,
            )
            .await?;
            return Ok(true);
        }
    }
    let outcome = Outcome::Completed {
        detail: Some(format!("all {subtasks} subtasks complete")),
    };
    end(
        store,
        settings,
        &mut run,
        Origin::Conductor,
        outcome,
        Some(holder),
    )
    .await?;
    tracing::info!(gid = %gid, run = run.id, subtasks, "every subtask is complete; the parent completes");
    let path = run
        .worktree_path
        .as_deref()
        .map(PathBuf::from)
        .unwrap_or_else(|| settings.repository.clone());
    let verification = vec![format!("all {subtasks} subtasks complete and merged")];
    record(store, settings, task, &run, &path, verification).await;
    settings
        .notices
        .tell_completed(store, &gid, run.id, None)
        .await;
    Ok(true)
}

/// A subtask failed for good: its siblings that have not started never will, and the
/// parent's run is abandoned with why.
async fn give_up_parent(
    store: &dyn Store,
    settings: &RunnerSettings,
    holder: &str,
    mut run: Run,
    children: &[ChildState],
    child: &str,
) -> Result<bool> {
    let gid = run.task_gid.clone();
    let at_cap = children.iter().any(|c| {
        c.gid == child
            && c.workers_failed
            && !c.split
            && !c.tried_split
            && c.depth >= settings.conductor.max_depth
    });
    let why = if at_cap {
        format!(
            "subtask `{child}` failed every retry at the depth cap ({})",
            settings.conductor.max_depth
        )
    } else {
        format!(
            "subtask `{child}` was abandoned ({}) and is not split again",
            last_abandon_reason(store, child)
                .await?
                .unwrap_or_else(|| "no reason recorded".into())
        )
    };
    // Its siblings that have not started will not: the parent is given up.
    for sibling in children
        .iter()
        .filter(|c| c.gid != child && c.status == QueueStatus::Approved)
    {
        queue_ops::apply(
            store,
            settings.clock.as_ref(),
            &sibling.gid,
            QueueEvent::Skip,
            "conductor",
            Some(format!("its parent {gid} was given up")),
        )
        .await?;
    }
    abandon(store, settings, &mut run, Origin::Conductor, holder, &why).await?;
    Ok(true)
}

/// Abandonment reasons that are a refusal, not a failure: such a subtask is never split.
const REFUSALS: [&str; 2] = [DECLINED_BY_OWNER, DENIED_BY_CONTRACT];

/// Whether `gid` carries one of the goal labels.
async fn has_goal_label(store: &dyn Store, settings: &RunnerSettings, gid: &str) -> Result<bool> {
    let labels = match store.task_facts(gid).await? {
        Some(text) => serde_json::from_str::<TaskFacts>(&text)
            .map(|f| f.labels)
            .unwrap_or_default(),
        None => Vec::new(),
    };
    Ok(labels.iter().any(|label| {
        settings
            .conductor
            .goal_labels
            .iter()
            .any(|g| g.eq_ignore_ascii_case(label))
    }))
}

/// Gives `gid` the first goal label, so its next run splits it.
async fn mark_goal(store: &dyn Store, settings: &RunnerSettings, gid: &str) -> Result<()> {
    let mut facts = match store.task_facts(gid).await? {
        Some(text) => serde_json::from_str::<TaskFacts>(&text).unwrap_or_default(),
        None => TaskFacts::default(),
    };
    let label = settings
        .conductor
        .goal_labels
        .first()
        .cloned()
        .unwrap_or_else(|| "goal".into());
    if !facts.labels.iter().any(|l| l.eq_ignore_ascii_case(&label)) {
        facts.labels.push(label);
    }
    store
        .save_task_facts(gid, &serde_json::to_string(&facts)?, settings.clock.now())
        .await?;
    Ok(())
}

/// Holds the merge lock of `parent` until dropped (a file lock, so runners in other
/// processes wait too).
async fn lock_parent(settings: &RunnerSettings, parent: &str) -> Result<std::fs::File> {
    let path = settings.worktrees_dir.join(format!(
        ".merge-{}.lock",
        crate::core::gid::slug(parent, 64)
    ));
    tokio::task::spawn_blocking(move || -> Result<std::fs::File> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::File::create(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        file.lock()
            .with_context(|| format!("cannot lock {}", path.display()))?;
        Ok(file)
    })
    .await?
}

/// Merges the branch of subtask `gid` (run `run_id`) into its parent's branch, when it is a
/// subtask, and runs the suites there: a merge the suites fail is reverted, and the suites'
/// failure returned, for the subtask's worker to fix.
pub(super) async fn merge_into_parent(
    store: &dyn Store,
    settings: &RunnerSettings,
    gid: &str,
    run_id: i64,
    branch: &str,
) -> Result<Option<String>> {
    let Some(link) = store.task_link(gid).await? else {
        return Ok(None);
    };
    let Some(parent_run) = store.runs(Some(&link.parent_gid)).await?.into_iter().last() else {
        return Ok(None);
    };
    let Some(path) = parent_run.worktree_path.as_deref().map(PathBuf::from) else {
        return Ok(None);
    };
    if !settings.worktrees {
        return Ok(None);
    }
    // One subtask at a time merges into a parent and is checked there: a sibling's merge
    // must neither land between this merge and its suites nor be undone with it.
    let _parent_lock = lock_parent(settings, &link.parent_gid).await?;
    let before = head_commit(settings, &path)
        .await
        .ok_or_else(|| anyhow::anyhow!("cannot read the head of {}", path.display()))?;
    if !merge_child(settings, &parent_run, gid, branch).await? {
        return Ok(None);
    }
    let verdict = verify(store, settings, run_id, gid, &path).await?;
    if verdict.passed {
        return Ok(None);
    }
    let git = orchestrator_git(settings, &path)?;
    tokio::task::spawn_blocking(move || -> Result<()> {
        let out = git.output(&["reset", "--hard", &before])?;
        anyhow::ensure!(
            out.status.success(),
            "cannot revert the merge: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(())
    })
    .await??;
    tracing::warn!(gid = %gid, parent = %link.parent_gid, "the suites failed after merging into the parent's branch; the merge is reverted");
    Ok(Some(format!(
        "After your change was merged into the parent task's branch, the suites failed there, so the merge was undone: {}\n{}",
        verdict.summary.unwrap_or_default(),
        verdict.excerpt
    )))
}

/// Merges a completed child's branch into the parent's branch, in the parent's worktree,
/// unless it is in already; whether it merged now.
async fn merge_child(
    settings: &RunnerSettings,
    parent: &Run,
    child: &str,
    branch: &str,
) -> Result<bool> {
    let Some(path) = parent.worktree_path.clone() else {
        return Ok(false);
    };
    if !settings.worktrees {
        return Ok(false);
    }
    let worktree = PathBuf::from(path);
    let branch = branch.to_string();
    let child = child.to_string();
    let (repo, worktrees_dir) = (settings.repository.clone(), settings.worktrees_dir.clone());
    let git = orchestrator_git(settings, &worktree)?;
    let merged_now = tokio::task::spawn_blocking(move || -> Result<bool> {
        // Sibling subtasks that complete together merge one at a time (a second merge in
        // the same worktree would find the first one's MERGE_HEAD).
        let _lock = worktree::lock_repository(&repo, &worktrees_dir)?;
        let merged = git.output(&["merge-base", "--is-ancestor", &branch, "HEAD"])?;
        if merged.status.success() {
            return Ok(false);
        }
        let out = git.output(&[
            "-c",
            "user.name=executor",
            "-c",
            "user.email=executor@localhost",
            "merge",
            "--no-ff",
            "--no-edit",
            "-m",
            &format!("Merge subtask {child}"),
            &branch,
        ])?;
        if !out.status.success() {
            let _ = git.output(&["merge", "--abort"]);
            anyhow::bail!(
                "merging subtask {child} ({branch}) into the parent's branch failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(true)
    })
    .await??;
    Ok(merged_now)
}

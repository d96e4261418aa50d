//! `executor dispatch TASK.json`: one worker from a conductor's worker task file, run now.
//! The file's prompt goes to the agent as it is, `capabilities.tools` becomes the agent's
//! tool set, `timeoutSeconds` its hard timeout, and `session` names an agent session kept
//! in the store, so the next task file naming it continues the same session (a review round
//! after a rejected diff). The run record is the worker's whole output: `patch.diff`,
//! `result.json` and, when it wrote to stderr, `stderr.txt`.
//!
//! What it must never do: run a worker outside its worktree, or with more tools than the
//! file grants.

use super::{limits, spent};
use super::{Runner, RunnerSettings, DISPATCH};
use crate::agents::Adapter;
use crate::conductor::worker_task::{Tool, WorkerTask};
use crate::core::ending::{Origin, Outcome};
use crate::core::queue::{QueueEvent, QueueStatus};
use crate::core::record::Run;
use crate::core::run::RunEvent;
use crate::core::task::NewTask;
use crate::core::tree::AgentSession;
use crate::ops::queue as queue_ops;
use crate::prompts::Phase;
use crate::runner::drive::end;
use crate::runner::drive::give_up;
use crate::runner::drive::lease_until;
use crate::runner::drive::move_run;
use crate::runner::drive::release_run;
use crate::runner::drive::work;
use crate::runner::drive::write_run_record;
use crate::runner::worktree;
use anyhow::{Context, Result};
use std::path::PathBuf;

/// What one dispatch did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Dispatched {
    pub task_gid: String,
    pub run_id: i64,
    /// The run record: `patch.diff`, `result.json`, `stderr.txt` (when the worker wrote to
    /// stderr).
    pub record: PathBuf,
    /// The worker ended with `[DONE:…]`.
    pub done: bool,
    pub why: String,
    /// The agent session it ran in (kept under the file's `session` name).
    pub session_id: Option<String>,
}

/// The tool set `tools` means to `adapter`, in its own names.
pub fn agent_tools(adapter: &Adapter, tools: &[Tool]) -> Vec<String> {
    let names: Vec<&str> = match adapter {
        Adapter::Claude { .. } => tools
            .iter()
            .flat_map(|t| t.claude_tools())
            .copied()
            .collect(),
        Adapter::Pi { .. } => tools.iter().flat_map(|t| t.pi_tools()).copied().collect(),
        Adapter::Codex { .. } | Adapter::Command { .. } => {
            tools.iter().map(|t| t.as_str()).collect()
        }
    };
    names.into_iter().map(str::to_string).collect()
}

/// Runs the worker `file` describes, in the worktree named by its `workspace`.
pub async fn dispatch(runner: &Runner, file: &WorkerTask) -> Result<Dispatched> {
    let store = runner.store.as_ref();
    let adapter = &runner.adapter;
    let gid = file.id.clone();
    let mut settings = runner.settings.as_ref().clone();
    settings.limits.hard = file.timeout;
    settings.limits.no_output = settings.limits.no_output.min(file.timeout);
    settings.agent.tools = Some(agent_tools(adapter, &file.tools));
    // A named session outlives its run: the agent's session files live in the worker's
    // private home, so every task file naming the session works in the same one.
    if let Some(name) = &file.session {
        settings.home = Some(format!("session-{name}"));
    }

    approved_by_contract(runner, &settings, file)?;
    // The agent is paused at its usage limit: its worker would meet the limit at once.
    // Nothing is started or recorded; the same file can be dispatched after the reset.
    if let Some(pause) = limits::paused(store, &settings, adapter.name()).await? {
        anyhow::bail!("{gid} is not dispatched: {}", pause.sentence());
    }
    let mut run = start_run(runner, file).await?;
    anyhow::ensure!(
        settings.worktrees,
        "executor dispatch needs runner.worktrees: a worker task runs in the worktree its file names"
    );
    let carried = carry_dispatched(runner, &settings, file, &mut run).await;
    if let Err(error) = &carried {
        let why = format!("{error:#}");
        give_up(runner, run.id, &gid, Origin::Dispatch, &why).await;
    }
    release_run(store, &runner.holder, run.id).await;
    carried
}

/// The conductor's contract decides whether this worker may be dispatched at all.
fn approved_by_contract(
    runner: &Runner,
    settings: &RunnerSettings,
    file: &WorkerTask,
) -> Result<()> {
    let gid = &file.id;
    if let Some(contract) = runner
        .settings
        .recorder
        .contract
        .as_ref()
        .map(|c| c.current())
    {
        let tools: Vec<&str> = file.tools.iter().map(|t| t.as_str()).collect();
        let tools = tools.join(",");
        let action = crate::policy::Action::from_request(
            "dispatch_worker",
            [
                ("task", gid.as_str()),
                ("workspace", file.workspace.as_str()),
                ("tools", tools.as_str()),
            ],
        );
        let scope = crate::policy::Scope::new(settings.repository.clone(), None);
        let (_, verdict) = crate::policy::judge(
            &contract.contract,
            &crate::policy::Input::Request(&action),
            &scope,
        );
        match verdict.decision {
            crate::policy::Decision::Approve => {}
            decision => anyhow::bail!(
                "the conductor's contract does not approve dispatching {gid} ({decision:?} by rule {}: {})",
                verdict.rule_id.as_deref().unwrap_or("(default)"),
                verdict.why
            ),
        }
    }
    Ok(())
}

/// The worker task's task (approved, then started) and its run, leased to this runner.
async fn start_run(runner: &Runner, file: &WorkerTask) -> Result<Run> {
    let store = runner.store.as_ref();
    let clock = runner.settings.clock.as_ref();
    let gid = file.id.clone();
    let (task, _) = queue_ops::add(
        store,
        clock,
        &NewTask {
            task_gid: gid.clone(),
            source: DISPATCH.to_string(),
            description: format!("Worker task {gid} in workspace {}", file.workspace),
            notes: None,
            priority: None,
            initial_status: QueueStatus::Approved,
        },
        "dispatch",
    )
    .await?;
    if task.status == QueueStatus::ForReview {
        queue_ops::apply(store, clock, &gid, QueueEvent::Go, "dispatch", None).await?;
    }
    queue_ops::apply(store, clock, &gid, QueueEvent::RunStarted, "dispatch", None)
        .await
        .with_context(|| format!("task {gid} cannot start again (a worker task id runs once; give the next round its own id and the same session)"))?;
    Ok(store
        .create_leased_run(
            &gid,
            &runner.holder.id(),
            clock.now(),
            lease_until(clock.now()),
        )
        .await?)
}

/// Runs the dispatched worker in its workspace's worktree and ends the run by what it
/// said.
async fn carry_dispatched(
    runner: &Runner,
    settings: &RunnerSettings,
    file: &WorkerTask,
    run: &mut Run,
) -> Result<Dispatched> {
    let (store, adapter, gid) = (runner.store.as_ref(), &runner.adapter, file.id.clone());
    {
        let wt = if settings.worktrees {
            let branch = format!("{}{}", settings.branch_prefix, file.workspace);
            let (repo, dir, base) = (
                settings.repository.clone(),
                settings.worktrees_dir.clone(),
                settings.base_branch.clone(),
            );
            tokio::task::spawn_blocking(move || worktree::ensure(&repo, &dir, &branch, &base))
                .await??
        } else {
            worktree::Worktree {
                path: settings.repository.clone(),
                branch: String::new(),
                reused: true,
                moved_aside: None,
            }
        };
        if settings.worktrees {
            run.worktree_path = Some(wt.path.display().to_string());
            run.branch_name = Some(wt.branch.clone());
        }
        move_run(store, run, RunEvent::WorkerStarted, settings.clock.now()).await?;
        // A named session the agent can continue is continued (the worker keeps what it
        // learnt in the earlier rounds).
        let earlier = match &file.session {
            Some(name) => store
                .agent_session(name)
                .await?
                .filter(|s| s.agent == adapter.name()),
            None => None,
        };
        let phase = match earlier {
            Some(session) => {
                run.worker_session_id = Some(session.session_id);
                store.save_run(run).await?;
                Phase::InProgress
            }
            None => Phase::Queued,
        };
        // Outside the lifecycle, the budget is looked at here: a worker over it asks the
        // owner instead of starting.
        let worked = match spent::over(store, settings, &gid, run).await? {
            Some(over) => spent::not_started(run, &gid, &over),
            None => {
                work(
                    store,
                    adapter,
                    settings,
                    run,
                    &gid,
                    phase,
                    &wt.path,
                    file.prompt.clone(),
                )
                .await?
            }
        };
        let record = write_run_record(settings, &gid, run.id, phase, &wt.path, &worked).await?;
        if let (Some(name), Some(id)) = (&file.session, &run.worker_session_id) {
            store
                .save_agent_session(&AgentSession {
                    name: name.clone(),
                    agent: adapter.name().to_string(),
                    session_id: id.clone(),
                    updated_at: settings.clock.now(),
                })
                .await?;
        }
        let done = worked.done.is_some();
        end_run(runner, settings, run, done, &worked.why).await?;
        Ok(Dispatched {
            task_gid: gid.clone(),
            run_id: run.id,
            record,
            done,
            why: worked.why,
            session_id: run.worker_session_id.clone(),
        })
    }
}

/// A dispatched run ends with its one worker: complete when it said `[DONE:…]`, else
/// abandoned with why.
async fn end_run(
    runner: &Runner,
    settings: &RunnerSettings,
    run: &mut Run,
    done: bool,
    why: &str,
) -> Result<()> {
    let outcome = if done {
        Outcome::completed()
    } else {
        Outcome::abandoned(why)
    };
    let store = runner.store.as_ref();
    end(
        store,
        settings,
        run,
        Origin::Dispatch,
        outcome,
        Some(&runner.holder.id()),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::Invocation;

    fn argv_with(adapter: &Adapter, tools: &[Tool]) -> Vec<String> {
        adapter.argv(&Invocation {
            tools: Some(agent_tools(adapter, tools)),
            ..Invocation::default()
        })
    }

    fn after<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
        argv.iter()
            .position(|a| a == flag)
            .and_then(|i| argv.get(i + 1))
            .map(String::as_str)
    }

    #[test]
    fn the_files_tools_are_the_whole_tool_set_each_agent_gets() {
        let claude = Adapter::Claude {
            program: "claude".into(),
        };
        let argv = argv_with(&claude, &[Tool::Read, Tool::Bash]);
        assert_eq!(after(&argv, "--tools"), Some("Read,Grep,Glob,Bash"));

        let pi = Adapter::Pi {
            program: "pi".into(),
        };
        let argv = argv_with(&pi, &[Tool::Read, Tool::Edit]);
        assert_eq!(after(&argv, "--tools"), Some("read,grep,find,ls,edit"));

        let codex = Adapter::Codex {
            program: "codex".into(),
        };
        let read_only = argv_with(&codex, &[Tool::Read]);
        assert_eq!(after(&read_only, "-c"), Some("sandbox_mode=\"read-only\""));
        let writes = argv_with(&codex, &[Tool::Read, Tool::Write]);
        assert_eq!(after(&writes, "-c"), None);
        let resumed = codex.argv(&Invocation {
            session: crate::agents::Session::Resume { id: "t1".into() },
            tools: Some(agent_tools(&codex, &[Tool::Read])),
            ..Invocation::default()
        });
        assert_eq!(
            resumed[1..5],
            ["exec", "-c", "sandbox_mode=\"read-only\"", "resume"],
            "the override comes before resume: {resumed:?}"
        );
        // Inside the wall Codex's own sandbox is off, read-only or not: the wall holds it.
        for tools in [&[Tool::Read][..], &[Tool::Read, Tool::Write][..]] {
            let confined = codex.argv(&Invocation {
                tools: Some(agent_tools(&codex, tools)),
                confined: true,
                ..Invocation::default()
            });
            assert_eq!(
                after(&confined, "-c"),
                Some("sandbox_mode=\"danger-full-access\"")
            );
        }
        assert!(Invocation {
            tools: Some(agent_tools(&codex, &[Tool::Read])),
            ..Invocation::default()
        }
        .read_only());
        assert!(!Invocation::default().read_only());
    }
}

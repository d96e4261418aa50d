//! Review rounds and the integration gate of the conductor protocol (on with
//! `conductor.review_rounds > 0`, on the local forge). A run whose verification passed is
//! reviewed before it is integrated: the mechanical gates (the `forge.verify` suites) have
//! run already, then a review worker (`pr_review` phase, its own session) reads the diff.
//! Its findings go back to the author's own session ("your patch had these problems"), for
//! up to `review_rounds` rounds; each round is recorded as a message on the run. An accepted
//! diff is integrated only if `roles/conductor-policy.json` approves `integrate`; where it
//! escalates, the run waits for the owner's `executor go` (or `executor decide`).
//!
//! What it must never do: let the reviewer's session replace the author's, integrate what
//! the reviewer changed (the author's work is committed before each review and the
//! reviewer's edits are thrown away after), or integrate without the contract's approval or
//! the owner's.

use super::RunnerSettings;
use crate::agents::Adapter;
use crate::core::record::Run;
use crate::core::task::Task;
use crate::prompts::{Phase, PromptContext, PromptSet, TaskContext};
use crate::runner::drive::commit_checked;
use crate::runner::drive::discard_uncommitted;
use crate::runner::drive::open_escalation;
use crate::runner::drive::run_context;
use crate::runner::drive::work;
use crate::runner::drive::write_run_record;
use crate::runner::git::Baseline;
use crate::runner::worktree;
use crate::store::Store;
use anyhow::Result;
use std::path::PathBuf;

/// A review's outcome.
pub(super) enum Reviewed {
    Accepted,
    /// The findings, as the author is told them.
    Rejected(String),
    /// The reviewer asked the owner something; the run waits on this escalation.
    Asked(i64),
}

/// The escalation action that holds a run for the owner's go before integration.
pub const INTEGRATE: &str = "integrate";

/// The escalation action of a run whose review rounds ran out: approve integrates the diff
/// as it is, deny abandons the run.
pub const REVIEW_EXHAUSTED: &str = "review_rounds_exhausted";

/// Runs review round `round` on the run's worktree; `baseline` is the repository as the
/// author's worker found it, checked before the author's work is committed.
#[allow(clippy::too_many_arguments)]
pub(super) async fn review(
    store: &dyn Store,
    adapter: &Adapter,
    prompts: &PromptSet,
    settings: &RunnerSettings,
    task: &Task,
    run: &mut Run,
    wt: &worktree::Worktree,
    round: u32,
    baseline: Option<&Baseline>,
) -> Result<Reviewed> {
    let gid = task.task_gid.clone();
    let mut ctx = PromptContext::new(
        Phase::PrReview,
        TaskContext::from_task(task),
        run_context(settings, run, wt),
    );
    ctx.attempt = round;
    ctx.max_attempts = Some(settings.conductor.review_rounds);
    ctx.review = Some(crate::prompts::ReviewInputs {
        rules_files: Vec::new(),
        // The mechanical gate ran first and passed.
        required_checks: (!settings.verify.is_empty())
            .then(|| crate::prompts::CheckStatus {
                name: settings.verify.join(" "),
                conclusion: "success".into(),
            })
            .into_iter()
            .collect(),
    });
    let prompt = prompts.render(Phase::PrReview, &ctx)?;
    // What is reviewed is committed first, so whatever the reviewer itself changes can be
    // thrown away after: only the author's work is ever integrated.
    if settings.worktrees {
        if let Some(asked) = commit_checked(settings, &wt.path, task, run.id, baseline).await? {
            let escalation = open_escalation(store, adapter, settings, run, &gid, &asked).await?;
            return Ok(Reviewed::Asked(escalation));
        }
    }
    // The reviewer works in a session of its own; the author's is kept for the next round.
    let author = run.worker_session_id.clone();
    let started = settings.clock.now();
    let worked = work(
        store,
        adapter,
        settings,
        run,
        &gid,
        Phase::PrReview,
        &wt.path,
        prompt,
    )
    .await?;
    write_run_record(settings, &gid, run.id, Phase::PrReview, &wt.path, &worked).await?;
    // A reviewer that tampered with the repository gets no git of the orchestrator's.
    if settings.worktrees && !worked.tampered {
        discard_uncommitted(settings, &wt.path).await?;
    }
    run.worker_session_id = author;
    run.updated_at = settings.clock.now();
    store.save_run(run).await?;
    if let Some(asked) = &worked.asked {
        let escalation = open_escalation(store, adapter, settings, run, &gid, asked).await?;
        return Ok(Reviewed::Asked(escalation));
    }
    let findings: Vec<String> = store
        .messages(run.id, 500)
        .await?
        .into_iter()
        .filter(|m| m.at >= started && m.source == "worker" && m.kind == "finding")
        .map(|m| format!("- {}", m.line.trim_start_matches("[STATUS:finding]").trim()))
        .collect();
    let accepted = worked
        .done
        .as_deref()
        .is_some_and(|d| d.starts_with("[DONE:review_green]"));
    let verdict = if accepted {
        "accepted"
    } else {
        "changes_requested"
    };
    store
        .record_message(&crate::core::record::NewMessage {
            run_id: run.id,
            task_gid: gid.clone(),
            at: settings.clock.now(),
            source: "orchestrator".to_string(),
            tag: "STATUS".to_string(),
            kind: "review_round".to_string(),
            args: serde_json::json!({"round": round, "verdict": verdict}).to_string(),
            text: format!("{} finding(s)", findings.len()),
            line: format!(
                "[STATUS:review_round] round={round} verdict={verdict} {} finding(s)",
                findings.len()
            ),
        })
        .await?;
    tracing::info!(gid = %gid, run = run.id, round, verdict, findings = findings.len(), "review round");
    if accepted {
        return Ok(Reviewed::Accepted);
    }
    let mut told = findings.join("\n");
    match &worked.done {
        Some(done) => told.push_str(&format!("\nThe reviewer's verdict: {done}")),
        None => told.push_str(&format!(
            "\nThe reviewer ended without a verdict: {}",
            worked.why
        )),
    }
    Ok(Reviewed::Rejected(told))
}

/// What the conductor's contract says about integrating `run`: approve, deny or escalate.
pub(super) fn integration(
    settings: &RunnerSettings,
    gid: &str,
    run: &Run,
) -> crate::policy::Decision {
    let Some(contract) = settings.recorder.contract.as_ref().map(|c| c.current()) else {
        return crate::policy::Decision::Escalate;
    };
    let action = crate::policy::Action::from_request(
        INTEGRATE,
        [
            ("task", gid),
            ("branch", run.branch_name.as_deref().unwrap_or("")),
        ],
    );
    let scope = crate::policy::Scope::new(
        run.worktree_path
            .as_deref()
            .map(PathBuf::from)
            .unwrap_or_else(|| settings.repository.clone()),
        run.branch_name.as_deref(),
    );
    let (_, verdict) = crate::policy::judge(
        &contract.contract,
        &crate::policy::Input::Request(&action),
        &scope,
    );
    verdict.decision
}

//! `executor reanalyze --status skip [--source S] [--dry-run]`: after the rule filters
//! changed, puts back to `pending` the tasks a rule skipped (of that source) that the
//! current filters let through, so the analyzer looks at them again; the ones a rule still
//! skips stay, and the rule is named. Tasks the owner or the model skipped are left as
//! they are. `--dry-run` shows the plan and changes nothing.
//!
//! What it must never do: move a task the current rules still skip, or move anything on a
//! dry run.

use std::collections::BTreeMap;

use anyhow::Result;

use super::BadInput;
use crate::core::clock::SystemClock;
use crate::core::facts::TaskFacts;
use crate::core::filter::{Candidate, Filters};
use crate::core::queue::{QueueEvent, QueueStatus};
use crate::ops::queue as queue_ops;
use crate::store::Store;

/// How the summary of a task a rule skipped starts ([`crate::core::filter::Skip::describe`]).
const SKIPPED_BY_RULE: &str = "skipped by rule `";

/// How often a long pass says how far it got.
const PROGRESS_EVERY: usize = 100;
/// How many of the tasks to move a dry run names.
const SHOWN: usize = 20;

pub async fn run(
    store: &dyn Store,
    filters: &Filters,
    status: QueueStatus,
    source: Option<&str>,
    dry_run: bool,
) -> Result<()> {
    if !QueueEvent::Reanalyze.allowed_from().contains(&status) {
        return Err(BadInput(format!(
            "only `skip` tasks can be reanalyzed, not `{status}` ones"
        ))
        .into());
    }
    let tasks: Vec<_> = store
        .tasks(Some(&status))
        .await?
        .into_iter()
        .filter(|t| source.is_none_or(|s| t.source.as_deref() == Some(s)))
        .collect();
    // Only tasks a rule skipped: the owner's own `executor skip` and the model's verdicts
    // stand (moving them would undo a decision, or pay the model again).
    let (tasks, decided): (Vec<_>, Vec<_>) = tasks.into_iter().partition(|t| {
        t.analysis_summary
            .as_deref()
            .is_some_and(|s| s.starts_with(SKIPPED_BY_RULE))
    });
    let total = tasks.len();
    let mut back: Vec<String> = Vec::new();
    let mut still: BTreeMap<String, usize> = BTreeMap::new();
    let mut failed = 0;
    for (index, task) in tasks.iter().enumerate() {
        let facts: TaskFacts = match store.task_facts(&task.task_gid).await? {
            Some(json) => serde_json::from_str(&json).unwrap_or_else(|error| {
                tracing::warn!(gid = %task.task_gid, %error, "unreadable task facts; judged without them");
                TaskFacts::default()
            }),
            None => TaskFacts::default(),
        };
        let skip = filters.judge(Candidate {
            source: task.source.as_deref().unwrap_or(""),
            text: task.description.as_deref().unwrap_or(""),
            facts: &facts,
        });
        match skip {
            Some(skip) => *still.entry(skip.rule).or_default() += 1,
            None if dry_run => back.push(task.task_gid.clone()),
            None => {
                let moved = queue_ops::apply(
                    store,
                    &SystemClock,
                    &task.task_gid,
                    QueueEvent::Reanalyze,
                    "owner",
                    Some("reanalyze: the current rules let it through".into()),
                )
                .await;
                match moved {
                    Ok(_) => back.push(task.task_gid.clone()),
                    Err(error) => {
                        failed += 1;
                        eprintln!("{}: {error}", task.task_gid);
                    }
                }
            }
        }
        let done = index + 1;
        if done % PROGRESS_EVERY == 0 && done < total {
            eprintln!("reanalyze: {done} of {total} looked at");
        }
    }

    let scope = match source {
        Some(source) => format!("{total} `{status}` task(s) from `{source}`"),
        None => format!("{total} `{status}` task(s)"),
    };
    if dry_run {
        println!(
            "dry run: of {scope}, {} would go back to pending and {} stay skipped",
            back.len(),
            total - back.len()
        );
        for gid in back.iter().take(SHOWN) {
            println!("  back to pending: {gid}");
        }
        if back.len() > SHOWN {
            println!("  … and {} more", back.len() - SHOWN);
        }
    } else {
        println!(
            "of {scope}, {} went back to pending and {} stay skipped",
            back.len(),
            total - back.len() - failed
        );
    }
    for (rule, count) in &still {
        println!("  still skipped by `{rule}`: {count}");
    }
    if !decided.is_empty() {
        println!(
            "  left as they are: {} skipped by the owner or the model (not by a rule)",
            decided.len()
        );
    }
    if failed > 0 {
        anyhow::bail!("{failed} task(s) could not be moved (named above; they changed meanwhile)");
    }
    Ok(())
}

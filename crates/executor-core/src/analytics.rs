//! Outcome analytics: whether executor is worth its cost. From one row of facts per run
//! ([`RunFacts`], read from the store by the caller), the figures per group (all runs, and
//! per day of start, agent, source and label): runs started and how they ended, the PR
//! funnel, clean successes, time to complete, fix rounds, cost per completed run and per
//! merged PR, escalations and how long their answers took.
//!
//! Definitions, so a figure means one thing:
//! - **completed**: the run's state is `complete` (its PR merged, or ready for the owner);
//!   **abandoned** as its state, and **cancelled** an abandoned run the owner's `cancel`
//!   ended ([`StoredOutcome::cancelled`]); the others are still open.
//! - **funnel**: PR opened (the run has a PR number) → CI green (executor's review ran,
//!   which it does only on a green head, or the run completed) → review passed (executor's
//!   review passed) → merged.
//! - **clean success**: completed with no escalation and no owner action on its task while
//!   it ran (its start to its last update) beyond adding the task, `go` and the merge. The
//!   owner's PR comments are not task events, so one that sent the PR back is not counted.
//! - **time to complete**: from the run's start to its completion, completed runs only.
//! - **cost per completed run**: every run's cost in the group over its completed runs
//!   (the failed runs' cost is part of what a success cost); per merged PR likewise.
//!
//! A group of fewer than [`SMALL_SAMPLE`] runs says so (`small_sample`): its rates are
//! anecdotes, not figures.
//!
//! What it must never do: read the store or the clock (it is pure), or divide by zero
//! (a rate with no denominator is `None`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

/// Below this many runs a group's figures are marked as a small sample.
pub const SMALL_SAMPLE: usize = 20;

/// What the store knows of one run, for the figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFacts {
    pub run_id: i64,
    pub task_gid: String,
    /// The task's source (`cli`, `plans`, `github`, …).
    pub source: String,
    /// The task's labels (from its source's facts).
    pub labels: Vec<String>,
    /// The run's agent: the first in name order its workers said (a run rarely has two).
    pub agent: Option<String>,
    /// The run's state, as stored (`complete`, `abandoned`, `cancelled`, …).
    pub state: String,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub pr_opened: bool,
    pub ci_green: bool,
    pub review_passed: bool,
    pub merged: bool,
    pub fix_ci_rounds: u32,
    pub fix_comments_rounds: u32,
    /// The run's workers' cost, where any said one.
    pub cost_usd: Option<f64>,
    /// Each escalation of the run: when it was asked, and when answered.
    pub escalations: Vec<Asked>,
    /// The owner's actions on the task beyond adding it, `go` and the merge.
    pub owner_actions: u32,
}

/// One run as the store reads it for the figures: its row, its task's source, its
/// workers' agent, cost and fix rounds, and its PR memory and task facts as stored (JSON),
/// which [`RunFacts::from_stored`] reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoredOutcome {
    pub run_id: i64,
    pub task_gid: String,
    pub source: Option<String>,
    pub state: String,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub pr_number: Option<i64>,
    pub agent: Option<String>,
    pub cost_usd: Option<f64>,
    pub fix_ci_workers: i64,
    pub fix_comments_workers: i64,
    pub pr_memory: Option<String>,
    pub task_facts: Option<String>,
    /// An `abandoned` run the owner's `cancel` ended (its task's history says so).
    pub cancelled: bool,
}

/// One escalation: when it was asked, and when answered.
pub type Asked = (DateTime<Utc>, Option<DateTime<Utc>>);

/// What the store gives for the figures of the runs started since a time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcomes {
    pub runs: Vec<StoredOutcome>,
    /// Each escalation of those runs: the run, when asked, when answered.
    pub escalations: Vec<(i64, DateTime<Utc>, Option<DateTime<Utc>>)>,
    /// Per run: the owner's actions on its task while it ran (from its start to its last
    /// update), beyond adding the task and `go` ([`OWNER_ACTORS`]).
    pub owner_actions: Vec<(i64, i64)>,
}

/// The actors whose events are the owner's own (the CLI, the console, an MCP client).
pub const OWNER_ACTORS: &[&str] = &["owner", "cli", "mcp"];

/// The owner's events that are no extra action: adding the task, retitling it, and `go`.
pub const PLAIN_EVENTS: &[&str] = &["added", "updated", "go"];

impl RunFacts {
    /// The facts of `stored`, with its escalations and the owner's actions on its task.
    pub fn from_stored(
        stored: &StoredOutcome,
        escalations: Vec<Asked>,
        owner_actions: u32,
    ) -> Self {
        let memory: Option<crate::pr::PrMemory> = stored
            .pr_memory
            .as_deref()
            .and_then(|m| serde_json::from_str(m).ok());
        let facts: Option<crate::facts::TaskFacts> = stored
            .task_facts
            .as_deref()
            .and_then(|f| serde_json::from_str(f).ok());
        let review = memory.as_ref().and_then(|m| m.review.as_ref());
        RunFacts {
            run_id: stored.run_id,
            task_gid: stored.task_gid.clone(),
            source: stored.source.clone().unwrap_or_else(|| "unknown".into()),
            labels: facts.map(|f| f.labels).unwrap_or_default(),
            agent: stored.agent.clone(),
            // The store keeps a cancelled run `abandoned`; the figures tell them apart.
            state: if stored.cancelled && stored.state == "abandoned" {
                "cancelled".to_string()
            } else {
                stored.state.clone()
            },
            started_at: stored.started_at,
            completed_at: stored.completed_at,
            pr_opened: stored.pr_number.is_some(),
            ci_green: review.is_some(),
            review_passed: review.is_some_and(|r| r.passed),
            merged: memory.as_ref().is_some_and(|m| m.merged),
            fix_ci_rounds: u32::try_from(stored.fix_ci_workers).unwrap_or(0),
            fix_comments_rounds: u32::try_from(stored.fix_comments_workers).unwrap_or(0),
            cost_usd: stored.cost_usd,
            escalations,
            owner_actions,
        }
    }
}

/// The facts of every run of `outcomes`.
pub fn facts_of(outcomes: &Outcomes) -> Vec<RunFacts> {
    let mut asked: BTreeMap<i64, Vec<Asked>> = BTreeMap::new();
    for (run, at, answered) in &outcomes.escalations {
        asked.entry(*run).or_default().push((*at, *answered));
    }
    let acted: BTreeMap<i64, i64> = outcomes.owner_actions.iter().copied().collect();
    outcomes
        .runs
        .iter()
        .map(|stored| {
            let owner = acted.get(&stored.run_id).copied().unwrap_or(0);
            RunFacts::from_stored(
                stored,
                asked.remove(&stored.run_id).unwrap_or_default(),
                u32::try_from(owner).unwrap_or(u32::MAX),
            )
        })
        .collect()
}

/// A median and a 95th percentile, in seconds, over `n` values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spread {
    pub n: usize,
    pub median_s: Option<f64>,
    pub p95_s: Option<f64>,
}

/// The funnel of a group's runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Funnel {
    pub pr_opened: usize,
    pub ci_green: usize,
    pub review_passed: usize,
    pub merged: usize,
}

/// One group's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Figures {
    pub started: usize,
    pub completed: usize,
    pub abandoned: usize,
    pub cancelled: usize,
    /// Neither completed, abandoned nor cancelled yet.
    pub open: usize,
    pub funnel: Funnel,
    pub clean_success: usize,
    /// Completed runs over ended ones (completed, abandoned, cancelled).
    pub success_rate: Option<f64>,
    pub time_to_complete: Spread,
    pub fix_ci_rounds_per_run: Option<f64>,
    pub fix_comments_rounds_per_run: Option<f64>,
    pub cost_usd: f64,
    pub cost_per_completed_usd: Option<f64>,
    pub cost_per_merged_usd: Option<f64>,
    pub escalations: usize,
    pub escalations_per_run: Option<f64>,
    pub escalation_answer: Spread,
    pub small_sample: bool,
}

/// The figures of every group.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Analytics {
    pub all: Figures,
    /// By the UTC day of the run's start (`YYYY-MM-DD`; runs never started are left out).
    pub by_day: BTreeMap<String, Figures>,
    /// By agent (`unknown` where no worker said one).
    pub by_agent: BTreeMap<String, Figures>,
    pub by_source: BTreeMap<String, Figures>,
    /// By label: a run of a task with two labels counts in both.
    pub by_label: BTreeMap<String, Figures>,
}

/// The figures of `runs`.
pub fn compute(runs: &[RunFacts]) -> Analytics {
    let mut groups: [BTreeMap<String, Vec<&RunFacts>>; 4] = Default::default();
    for run in runs {
        if let Some(started) = run.started_at {
            push(&mut groups[0], started.format("%Y-%m-%d").to_string(), run);
        }
        let agent = run.agent.clone().unwrap_or_else(|| "unknown".to_string());
        push(&mut groups[1], agent, run);
        push(&mut groups[2], run.source.clone(), run);
        for label in &run.labels {
            push(&mut groups[3], label.to_lowercase(), run);
        }
    }
    let [by_day, by_agent, by_source, by_label] = groups.map(|g| {
        g.into_iter()
            .map(|(key, runs)| (key, figures(&runs)))
            .collect::<BTreeMap<_, _>>()
    });
    let all: Vec<&RunFacts> = runs.iter().collect();
    Analytics {
        all: figures(&all),
        by_day,
        by_agent,
        by_source,
        by_label,
    }
}

fn push<'a>(group: &mut BTreeMap<String, Vec<&'a RunFacts>>, key: String, run: &'a RunFacts) {
    group.entry(key).or_default().push(run);
}

fn ratio(over: f64, under: usize) -> Option<f64> {
    (under > 0).then(|| over / under as f64)
}

/// The figures of one group.
fn figures(runs: &[&RunFacts]) -> Figures {
    let count = |state: &str| runs.iter().filter(|r| r.state == state).count();
    let (completed, abandoned, cancelled) =
        (count("complete"), count("abandoned"), count("cancelled"));
    let ended = completed + abandoned + cancelled;
    let funnel = Funnel {
        pr_opened: runs.iter().filter(|r| r.pr_opened).count(),
        ci_green: runs
            .iter()
            .filter(|r| r.pr_opened && (r.ci_green || r.state == "complete"))
            .count(),
        review_passed: runs
            .iter()
            .filter(|r| r.pr_opened && r.review_passed)
            .count(),
        merged: runs.iter().filter(|r| r.merged).count(),
    };
    let completing: Vec<f64> = runs
        .iter()
        .filter(|r| r.state == "complete")
        .filter_map(|r| Some((r.completed_at? - r.started_at?).num_milliseconds() as f64 / 1000.0))
        .filter(|s| *s >= 0.0)
        .collect();
    let answers: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.escalations.iter())
        .filter_map(|(asked, answered)| {
            Some((answered.as_ref().copied()? - *asked).num_milliseconds() as f64 / 1000.0)
        })
        .filter(|s| *s >= 0.0)
        .collect();
    // Folded from +0.0 (an empty `sum` of floats is -0.0); no cost said by any run is no
    // cost per anything, rather than a free one.
    let costs: Vec<f64> = runs.iter().filter_map(|r| r.cost_usd).collect();
    let cost = costs.iter().fold(0.0, |a, c| a + c);
    let priced = |under: usize| {
        if costs.is_empty() {
            None
        } else {
            ratio(cost, under)
        }
    };
    let escalations: usize = runs.iter().map(|r| r.escalations.len()).sum();
    let rounds =
        |f: fn(&RunFacts) -> u32| ratio(runs.iter().map(|r| f64::from(f(r))).sum(), runs.len());
    Figures {
        started: runs.len(),
        completed,
        abandoned,
        cancelled,
        open: runs.len() - ended,
        funnel,
        clean_success: runs
            .iter()
            .filter(|r| r.state == "complete" && r.escalations.is_empty() && r.owner_actions == 0)
            .count(),
        success_rate: ratio(completed as f64, ended),
        time_to_complete: spread(completing),
        fix_ci_rounds_per_run: rounds(|r| r.fix_ci_rounds),
        fix_comments_rounds_per_run: rounds(|r| r.fix_comments_rounds),
        cost_usd: cost,
        cost_per_completed_usd: priced(completed),
        cost_per_merged_usd: priced(funnel.merged),
        escalations,
        escalations_per_run: ratio(escalations as f64, runs.len()),
        escalation_answer: spread(answers),
        small_sample: runs.len() < SMALL_SAMPLE,
    }
}

/// The median and the 95th percentile (nearest rank) of `values`.
fn spread(mut values: Vec<f64>) -> Spread {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let rank = |p: f64| -> Option<f64> {
        if n == 0 {
            return None;
        }
        let at = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
        Some(values[at])
    };
    let median = match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    };
    Spread {
        n,
        median_s: median,
        p95_s: rank(0.95),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(day: u32, hour: u32, minute: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, day, hour, minute, 0)
            .single()
            .expect("a time")
    }

    /// Four runs, figures worked out by hand below.
    fn seeded() -> Vec<RunFacts> {
        vec![
            // Merged, clean: 30 min, $2.
            RunFacts {
                run_id: 1,
                source: "github".into(),
                labels: vec!["bug".into()],
                agent: Some("claude".into()),
                state: "complete".into(),
                started_at: Some(at(1, 10, 0)),
                completed_at: Some(at(1, 10, 30)),
                pr_opened: true,
                ci_green: true,
                review_passed: true,
                merged: true,
                fix_ci_rounds: 1,
                cost_usd: Some(2.0),
                ..RunFacts::default()
            },
            // Complete, one escalation answered after 10 min: 90 min, $4.
            RunFacts {
                run_id: 2,
                source: "github".into(),
                labels: vec!["bug".into(), "ui".into()],
                agent: Some("claude".into()),
                state: "complete".into(),
                started_at: Some(at(1, 12, 0)),
                completed_at: Some(at(1, 13, 30)),
                pr_opened: true,
                ci_green: true,
                review_passed: true,
                fix_ci_rounds: 2,
                fix_comments_rounds: 1,
                cost_usd: Some(4.0),
                escalations: vec![(at(1, 12, 10), Some(at(1, 12, 20)))],
                ..RunFacts::default()
            },
            // Abandoned after a red PR, $3, an unanswered escalation.
            RunFacts {
                run_id: 3,
                source: "plans".into(),
                agent: Some("codex".into()),
                state: "abandoned".into(),
                started_at: Some(at(2, 9, 0)),
                pr_opened: true,
                fix_ci_rounds: 3,
                cost_usd: Some(3.0),
                escalations: vec![(at(2, 9, 30), None)],
                ..RunFacts::default()
            },
            // Still working, no cost said yet; retried by the owner once.
            RunFacts {
                run_id: 4,
                source: "plans".into(),
                state: "in_progress".into(),
                started_at: Some(at(2, 11, 0)),
                owner_actions: 1,
                ..RunFacts::default()
            },
        ]
    }

    #[test]
    fn every_figure_matches_the_hand_computed_one() {
        let a = compute(&seeded());
        let all = &a.all;
        assert_eq!(
            (
                all.started,
                all.completed,
                all.abandoned,
                all.cancelled,
                all.open
            ),
            (4, 2, 1, 0, 1)
        );
        assert_eq!(
            all.funnel,
            Funnel {
                pr_opened: 3,
                ci_green: 2,
                review_passed: 2,
                merged: 1
            }
        );
        assert_eq!(all.clean_success, 1, "run 2 escalated");
        assert_eq!(all.success_rate, Some(2.0 / 3.0));
        // 30 and 90 minutes: the median is their mean, the p95 the larger.
        assert_eq!(all.time_to_complete.n, 2);
        assert_eq!(all.time_to_complete.median_s, Some(3600.0));
        assert_eq!(all.time_to_complete.p95_s, Some(5400.0));
        assert_eq!(all.fix_ci_rounds_per_run, Some(6.0 / 4.0));
        assert_eq!(all.fix_comments_rounds_per_run, Some(1.0 / 4.0));
        assert_eq!(all.cost_usd, 9.0);
        assert_eq!(all.cost_per_completed_usd, Some(4.5));
        assert_eq!(all.cost_per_merged_usd, Some(9.0));
        assert_eq!(all.escalations, 2);
        assert_eq!(all.escalations_per_run, Some(0.5));
        assert_eq!(all.escalation_answer.n, 1);
        assert_eq!(all.escalation_answer.median_s, Some(600.0));
        assert!(all.small_sample);

        assert_eq!(
            a.by_day.keys().collect::<Vec<_>>(),
            ["2026-11-01", "2026-11-02"]
        );
        assert_eq!(a.by_day["2026-11-01"].completed, 2);
        assert_eq!(a.by_day["2026-11-02"].success_rate, Some(0.0));
        assert_eq!(a.by_agent["claude"].cost_per_completed_usd, Some(3.0));
        assert_eq!(a.by_agent["unknown"].started, 1);
        assert_eq!(a.by_source["plans"].abandoned, 1);
        assert_eq!(a.by_label["bug"].started, 2);
        assert_eq!(a.by_label["ui"].clean_success, 0);
    }

    #[test]
    fn an_empty_group_divides_nothing() {
        let a = compute(&[]);
        assert_eq!(a.all.started, 0);
        assert_eq!(a.all.success_rate, None);
        assert_eq!(a.all.cost_per_merged_usd, None);
        assert!(a.all.cost_usd.is_sign_positive(), "no -0.0");
        let unpriced = compute(&[RunFacts {
            state: "complete".into(),
            ..RunFacts::default()
        }]);
        assert_eq!(
            unpriced.all.cost_per_completed_usd, None,
            "no cost said, none computed"
        );
        assert_eq!(a.all.time_to_complete.median_s, None);
        assert!(a.by_day.is_empty());
    }
}

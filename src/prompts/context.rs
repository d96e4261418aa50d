//! What a phase prompt is rendered with. Field names are the template's variable names.
//!
//! Every field is always present when serialised (an absent value is `none`, an empty list
//! is `[]`), so a strict template can test any of them with `{% if %}` in every phase.

use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use super::Phase;
use crate::core::task::{body_of, Task};

/// The `pr` machine's inputs to a PR-phase worker are core types; the prompts render them.
pub use crate::core::pr_inputs::{
    CheckStatus, CiFailure, FailedCheck, ReviewComment, ReviewInputs, ReviewThread,
};

/// The variables of one phase prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptContext {
    pub task: TaskContext,
    pub run: RunContext,
    pub phase: Phase,
    /// Which worker of this phase this is, from 1 (for `fix_ci`: the CI fix attempt).
    pub attempt: u32,
    /// The cap on `attempt`, when there is one.
    pub max_attempts: Option<u32>,
    /// Why the previous worker stopped (`in_progress`): "no output for 30 min", ...
    pub resume_reason: Option<String>,
    /// The recent message window (docs/design.md §5), oldest first.
    pub messages: Vec<PromptMessage>,
    /// `fix_ci`'s input: what failed.
    pub ci: Option<CiFailure>,
    /// `fix_comments`' input: exactly the threads to address.
    pub review_threads: Vec<ReviewThread>,
    /// `pr_review`'s input: the project's rules and required checks.
    pub review: Option<ReviewInputs>,
    /// `decompose`'s input: where the plan goes and how deep the split is.
    pub conductor: Option<ConductorInputs>,
}

/// What the conductor's planner is told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConductorInputs {
    /// The file (relative to the worktree) the plan is written to.
    pub plan_file: String,
    /// How deep the subtasks will be (1: a goal's subtasks).
    pub depth: u32,
    pub max_depth: u32,
    pub max_subtasks: u32,
    /// Why this task is split again: its worker failed every retry with this.
    pub split_reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskContext {
    pub gid: String,
    pub title: String,
    /// The task's description without its title line; `None` when there is nothing more.
    pub description: Option<String>,
    pub priority: Option<i64>,
    pub source: Option<String>,
    /// The owner's notes (for a plan note: its other front-matter keys, as YAML).
    pub notes: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunContext {
    pub id: i64,
    pub branch: String,
    /// The branch the run's branch was made from, and is reviewed against.
    pub base_branch: String,
    /// The worktree's absolute path: the worker's working directory.
    pub worktree: String,
    pub pr_url: Option<String>,
    pub pr_number: Option<i64>,
    pub ci_attempts: i64,
    pub worker_stuck_count: i64,
}

/// One message of the window: a protocol line from a worker, or a line of the chat topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptMessage {
    #[serde(serialize_with = "crate::core::time::serde_utc::required")]
    pub at: DateTime<Utc>,
    /// Who wrote it: `worker`, `orchestrator`, `owner`, a chat user name.
    pub from: String,
    /// The line as written, e.g. `[STATUS:testing] Running the UI tests`.
    pub text: String,
}

impl TaskContext {
    /// The prompt's view of a stored task.
    pub fn from_task(task: &Task) -> Self {
        let body = body_of(task.description.as_deref().unwrap_or(""));
        TaskContext {
            gid: task.task_gid.clone(),
            title: task.title(),
            description: (!body.is_empty()).then(|| body.to_string()),
            priority: task.priority,
            source: task.source.clone(),
            notes: task.notes.clone().filter(|notes| !notes.trim().is_empty()),
        }
    }
}

impl PromptContext {
    /// A context for a first worker of `phase`: attempt 1, no messages, no phase inputs.
    pub fn new(phase: Phase, task: TaskContext, run: RunContext) -> Self {
        PromptContext {
            task,
            run,
            phase,
            attempt: 1,
            max_attempts: None,
            resume_reason: None,
            messages: Vec::new(),
            ci: None,
            review_threads: Vec::new(),
            review: None,
            conductor: None,
        }
    }

    /// The phase input `phase` cannot do without, if this context lacks it.
    pub fn missing_input(&self, phase: Phase) -> Option<&'static str> {
        match phase {
            Phase::FixCi if self.ci.is_none() => Some("the CI failure (`ci`)"),
            Phase::FixComments if self.review_threads.is_empty() => {
                Some("at least one review thread (`review_threads`)")
            }
            Phase::PrReview if self.review.is_none() => Some("the review inputs (`review`)"),
            Phase::Decompose if self.conductor.is_none() => {
                Some("the conductor's inputs (`conductor`)")
            }
            _ => None,
        }
    }

    /// A complete example for `phase`: every optional value present, every list non-empty.
    /// Templates are checked against it when they are loaded.
    pub fn example(phase: Phase) -> Self {
        let at = |minute| {
            Utc.with_ymd_and_hms(2026, 3, 16, 9, minute, 0)
                .single()
                .expect("a valid time")
        };
        PromptContext {
            task: TaskContext {
                gid: "T-7".into(),
                title: "Fix tab preview".into(),
                description: Some("The preview sticks after the pointer leaves the tab.".into()),
                priority: Some(2),
                source: Some("plans".into()),
                notes: Some("area: tabs".into()),
            },
            run: RunContext {
                id: 42,
                branch: "executor/T-7-fix-tab-preview".into(),
                base_branch: "main".into(),
                worktree: "/srv/executor/worktrees/T-7-fix-tab-preview".into(),
                pr_url: Some("https://github.com/o/r/pull/1234".into()),
                pr_number: Some(1234),
                ci_attempts: 1,
                worker_stuck_count: 1,
            },
            phase,
            attempt: 2,
            max_attempts: Some(3),
            resume_reason: Some("no output for 30 min; the watchdog stopped it".into()),
            messages: vec![
                PromptMessage {
                    at: at(10),
                    from: "worker".into(),
                    text: "[STATUS:investigation] Reproduced in TabPreviewUITests".into(),
                },
                PromptMessage {
                    at: at(20),
                    from: "owner".into(),
                    text: "Keep the hover delay as it is.".into(),
                },
            ],
            ci: Some(CiFailure {
                checks: vec![FailedCheck {
                    name: "Xcode test report (macOS UI Tests CI)".into(),
                    summary: Some("1 failed, 47 passed".into()),
                    url: None,
                }],
                failing_step: Some("Run UI tests".into()),
                log_excerpt: "TabPreviewUITests.swift:58: XCTAssertFalse failed".into(),
                run_url: Some("https://github.com/o/r/actions/runs/34712098321".into()),
            }),
            review_threads: vec![ReviewThread {
                id: "PRRT_kwDOMGtpR85h4iMD".into(),
                path: "Lumen/TabBar/TabBarView.swift".into(),
                line: Some(88),
                comments: vec![ReviewComment {
                    author: "mkowalski".into(),
                    body: "Guard on `isPresented` here.".into(),
                }],
            }],
            review: Some(ReviewInputs {
                rules_files: vec!["AGENTS.md".into()],
                required_checks: vec![CheckStatus {
                    name: "macOS UI Tests CI".into(),
                    conclusion: "success".into(),
                }],
            }),
            conductor: Some(ConductorInputs {
                plan_file: ".executor-plan.json".into(),
                depth: 2,
                max_depth: 2,
                max_subtasks: 20,
                split_reason: Some("exited 1 without [DONE]".into()),
            }),
        }
    }

    /// The least `phase` can be rendered with: every optional value absent, every list
    /// empty, except the phase's own input (which is minimal too).
    pub(crate) fn minimal(phase: Phase) -> Self {
        let full = PromptContext::example(phase);
        let mut context = PromptContext::new(
            phase,
            TaskContext {
                gid: full.task.gid,
                title: full.task.title,
                description: None,
                priority: None,
                source: None,
                notes: None,
            },
            RunContext {
                pr_url: None,
                pr_number: None,
                ci_attempts: 0,
                worker_stuck_count: 0,
                ..full.run
            },
        );
        match phase {
            Phase::Queued | Phase::InProgress => {}
            Phase::FixCi => {
                context.ci = Some(CiFailure {
                    checks: Vec::new(),
                    failing_step: None,
                    log_excerpt: String::new(),
                    run_url: None,
                })
            }
            Phase::FixComments => {
                context.review_threads = vec![ReviewThread {
                    id: "thread".into(),
                    path: "file".into(),
                    line: None,
                    comments: Vec::new(),
                }]
            }
            Phase::PrReview => {
                context.review = Some(ReviewInputs {
                    rules_files: Vec::new(),
                    required_checks: Vec::new(),
                })
            }
            Phase::Decompose => {
                context.conductor = Some(ConductorInputs {
                    plan_file: ".executor-plan.json".into(),
                    depth: 1,
                    max_depth: 1,
                    max_subtasks: 1,
                    split_reason: None,
                })
            }
        }
        context
    }
}

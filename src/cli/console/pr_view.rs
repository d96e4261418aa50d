//! A run's PR as its Run page shows it: CI (each check, the failing step and the end of
//! its log, with links), the review threads and the review verdict, made from what the
//! runner already keeps, its last look at the PR (`executor_pr_looks`, written on every PR
//! tick) and the `pr` machine's memory. A page never asks the forge itself.
//!
//! What it must never do: link to anything but an `http(s)` address (a check's details
//! link is any app's to set), or hand a page an unbounded text.

use serde::Serialize;

use super::super::runs::local_time;
use crate::core::pr::{
    CheckConclusion, CheckRun, CheckRunStatus, ObservedThread, PrMemory, PrObservation, PrState,
};

/// The most of a failed step's log, or of a review comment, a page shows (the end of a log,
/// the start of a comment).
const TEXT_BYTES: usize = 8 * 1024;

/// The most threads a page lists.
const MAX_THREADS: usize = 50;

#[derive(Debug, Serialize)]
pub struct CheckView {
    pub name: String,
    /// `success`, `failure`, …, or the status of one not completed (`in_progress`).
    pub state: String,
    /// `ok`, `failed` or `running`: how the page colours it.
    pub class: &'static str,
    pub url: Option<String>,
    pub run_url: Option<String>,
    pub summary: Option<String>,
    pub failing_step: Option<String>,
    pub log_excerpt: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct ThreadView {
    pub path: String,
    pub line: Option<u32>,
    pub outdated: bool,
    pub comments: usize,
    pub last_author: String,
    pub last_body: String,
}

#[derive(Debug, Serialize)]
pub struct PrView {
    pub observed_at: String,
    pub state: &'static str,
    pub draft: bool,
    /// `mergeable`, `conflicting` or `not computed yet`.
    pub mergeable: &'static str,
    pub head: String,
    pub labels: Vec<String>,
    /// `green`, `failing`, `running` or `no checks`.
    pub ci: &'static str,
    pub checks: Vec<CheckView>,
    pub threads_open: usize,
    pub threads_resolved: usize,
    /// The open threads (at most [`MAX_THREADS`]).
    pub threads: Vec<ThreadView>,
    /// The last `pr_review` verdict: `passed` or `asked for changes`, and its head.
    pub review: Option<String>,
    pub ci_fixes: u32,
    /// What the owner was last asked about this PR, and for which head.
    pub escalated: Option<String>,
}

/// An address a page may link to: `http(s)` only.
pub fn safe_url(url: Option<&str>) -> Option<String> {
    url.filter(|u| u.starts_with("https://") || u.starts_with("http://"))
        .map(str::to_string)
}

fn short_sha(sha: &str) -> String {
    sha.chars().take(10).collect()
}

/// The end of `text`, at most [`TEXT_BYTES`] (on a character boundary).
fn tail(text: &str) -> String {
    let mut start = text.len().saturating_sub(TEXT_BYTES);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

/// The start of `text`, at most [`TEXT_BYTES`].
fn head(text: &str) -> String {
    let mut end = text.len().min(TEXT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

fn check_view(check: &CheckRun) -> CheckView {
    let (state, class) = match (check.status, check.conclusion) {
        (CheckRunStatus::Completed, Some(conclusion)) => {
            let class = match conclusion {
                CheckConclusion::Success | CheckConclusion::Neutral | CheckConclusion::Skipped => {
                    "ok"
                }
                _ => "failed",
            };
            (conclusion.as_str().to_string(), class)
        }
        (status, _) => (
            serde_json::to_value(status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "running".to_string()),
            "running",
        ),
    };
    CheckView {
        name: check.name.clone(),
        state,
        class,
        url: safe_url(check.url.as_deref()),
        run_url: safe_url(check.run_url.as_deref()),
        summary: check.summary.clone(),
        failing_step: check.failing_step.clone(),
        log_excerpt: check.log_excerpt.as_deref().map(tail),
    }
}

fn thread_view(thread: &ObservedThread) -> ThreadView {
    let last = thread.comments.last();
    ThreadView {
        path: thread.path.clone(),
        line: thread.line,
        outdated: thread.is_outdated,
        comments: thread.comments.len(),
        last_author: last.map(|c| c.author.clone()).unwrap_or_default(),
        last_body: last.map(|c| head(&c.body)).unwrap_or_default(),
    }
}

/// The PR as the last look saw it, with what the memory adds; `None` before any look.
pub fn of(look: &PrObservation, memory: Option<&PrMemory>) -> PrView {
    let checks: Vec<CheckView> = look.checks.iter().map(check_view).collect();
    let ci = if checks.is_empty() {
        "no checks"
    } else if checks.iter().any(|c| c.class == "failed") {
        "failing"
    } else if checks.iter().any(|c| c.class == "running") {
        "running"
    } else {
        "green"
    };
    let open: Vec<&ObservedThread> = look.threads.iter().filter(|t| !t.is_resolved).collect();
    PrView {
        observed_at: local_time(&look.observed_at),
        state: match look.state {
            PrState::Open => "open",
            PrState::Closed => "closed",
            PrState::Merged => "merged",
        },
        draft: look.draft,
        mergeable: match look.mergeable {
            Some(true) => "mergeable",
            Some(false) => "conflicting",
            None => "not computed yet",
        },
        head: short_sha(&look.head_sha),
        labels: look.labels.clone(),
        ci,
        checks,
        threads_open: open.len(),
        threads_resolved: look.threads.len() - open.len(),
        threads: open
            .iter()
            .take(MAX_THREADS)
            .map(|t| thread_view(t))
            .collect(),
        review: memory.and_then(|m| m.review.as_ref()).map(|r| {
            let verdict = if r.passed {
                "passed"
            } else {
                "asked for changes"
            };
            format!("{verdict} on {}", short_sha(&r.head_sha))
        }),
        ci_fixes: memory.map_or(0, |m| m.ci_attempts),
        escalated: memory.and_then(|m| m.escalated.as_ref()).map(|e| {
            let kind = serde_json::to_value(e.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| format!("{:?}", e.kind));
            format!("{kind} on {}", short_sha(&e.head_sha))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look() -> PrObservation {
        serde_json::from_value(serde_json::json!({
            "observed_at": "2026-03-01T09:30:00.000000Z",
            "state": "open", "draft": true, "mergeable": null,
            "head_sha": "9d41c2e0123456789abcdef", "ci_run_exists": true,
            "checks": [
                {"name": "test", "status": "completed", "conclusion": "failure",
                 "url": "javascript:alert(1)", "run_url": "https://github.com/o/r/actions/runs/1",
                 "summary": "1 failed, 47 passed", "failing_step": "cargo test",
                 "log_excerpt": "x".repeat(20_000)},
                {"name": "lint", "status": "in_progress", "conclusion": null},
                {"name": "fmt", "status": "completed", "conclusion": "success"}
            ],
            "labels": ["executor"],
            "threads": [
                {"id": "T1", "path": "src/lib.rs", "line": 3, "is_resolved": false, "is_outdated": false,
                 "comments": [{"id": "C1", "author": "owner", "body": "why?", "created_at": "2026-03-01T09:00:00.000000Z"}]},
                {"id": "T2", "path": "a.rs", "line": null, "is_resolved": true, "is_outdated": true, "comments": []}
            ],
            "owner_comments": []
        }))
        .expect("an observation")
    }

    #[test]
    fn the_pr_view_says_what_failed_where_with_safe_links_and_bounded_text() {
        let view = of(&look(), None);
        assert_eq!(view.ci, "failing");
        assert_eq!(view.mergeable, "not computed yet");
        assert_eq!(view.head, "9d41c2e012");
        let test = &view.checks[0];
        assert_eq!((test.state.as_str(), test.class), ("failure", "failed"));
        assert_eq!(test.url, None, "a javascript: link is never shown");
        assert_eq!(
            test.run_url.as_deref(),
            Some("https://github.com/o/r/actions/runs/1")
        );
        assert_eq!(test.failing_step.as_deref(), Some("cargo test"));
        assert_eq!(test.log_excerpt.as_ref().map(String::len), Some(TEXT_BYTES));
        assert_eq!(
            (view.checks[1].state.as_str(), view.checks[1].class),
            ("in_progress", "running")
        );
        assert_eq!((view.threads_open, view.threads_resolved), (1, 1));
        assert_eq!(view.threads[0].last_body, "why?");
    }
}

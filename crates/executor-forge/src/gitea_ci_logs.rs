//! The log of each failed Gitea Actions job, for the `fix_ci` worker: a failed commit
//! status of Gitea Actions links to its job's page (`…/actions/runs/{run}/jobs/{job}`);
//! the head's workflow runs and their jobs say which job that page is (its `html_url`), and
//! the job's log is cut as GitHub's is ([`LogExcerpt`]: the lines above the failure, or
//! the tail) with the failing step named.
//!
//! A server without the Actions runs API (before Gitea 1.25) answers `404`, and so does
//! one that lost the log: the check keeps its link, which the prompt gives instead. No
//! failure here fails the look: the worker then has the links, as on an older Gitea.
//!
//! What it must never do: fetch a URL from an answer (only API routes built from the
//! repository get the token), or keep the look waiting on logs for statuses of other CIs.

use std::collections::BTreeMap;

use executor_core::pr::{CheckConclusion, CheckRun};
use executor_http::gitea::{GiteaActionJob, GiteaClient, GiteaError};
use executor_http::github::{LogExcerpt, LogExcerptOptions};

/// Fills in `failing_step` and `log_excerpt` of each failed check of `checks` that links
/// to a Gitea Actions job of commit `sha`, as far as the server serves them.
pub async fn add_job_logs(
    client: &GiteaClient,
    owner: &str,
    repo: &str,
    sha: &str,
    checks: &mut [CheckRun],
) {
    let wanted: Vec<usize> = checks
        .iter()
        .enumerate()
        .filter(|(_, c)| is_failed_actions_job(c))
        .map(|(i, _)| i)
        .collect();
    if wanted.is_empty() {
        return;
    }
    let jobs = match jobs_of_commit(client, owner, repo, sha).await {
        Ok(jobs) => jobs,
        Err(error) => {
            said_no_logs(&error);
            return;
        }
    };
    let by_page: BTreeMap<&str, &GiteaActionJob> = jobs
        .iter()
        .map(|j| (j.html_url.trim_end_matches('/'), j))
        .collect();
    for i in wanted {
        let Some(page) = checks[i].url.as_deref().map(|u| u.trim_end_matches('/')) else {
            continue;
        };
        let Some(job) = by_page.get(page) else {
            tracing::debug!(page, "no job of the head's workflow runs has this page");
            continue;
        };
        checks[i].failing_step = job.failed_step().map(|s| s.name.clone());
        match client.action_job_log(owner, repo, job.id).await {
            Ok(log) => {
                let options = LogExcerptOptions::default();
                let excerpt = LogExcerpt::from_log(
                    &log,
                    options.before_error,
                    options.after_error,
                    options.tail,
                );
                let text = excerpt.text();
                if !text.trim().is_empty() {
                    checks[i].log_excerpt = Some(text);
                }
            }
            Err(error) => said_no_logs(&error),
        }
    }
}

/// A failed check whose page is a job of Gitea Actions.
fn is_failed_actions_job(check: &CheckRun) -> bool {
    matches!(check.conclusion, Some(CheckConclusion::Failure))
        && check
            .url
            .as_deref()
            .is_some_and(|u| u.contains("/actions/runs/") && u.contains("/jobs/"))
}

/// Every job of every workflow run of commit `sha`.
async fn jobs_of_commit(
    client: &GiteaClient,
    owner: &str,
    repo: &str,
    sha: &str,
) -> Result<Vec<GiteaActionJob>, GiteaError> {
    let mut jobs = Vec::new();
    for run in client.action_runs_of_commit(owner, repo, sha).await? {
        jobs.extend(client.action_run_jobs(owner, repo, run.id).await?);
    }
    Ok(jobs)
}

fn said_no_logs(error: &GiteaError) {
    match error {
        GiteaError::NotFound { .. } => tracing::debug!(
            %error,
            "this Gitea serves no Actions runs or log here (before 1.25, or the log is gone); the fix_ci worker gets the statuses' links"
        ),
        _ => tracing::warn!(
            %error,
            "cannot read the failed Actions job's log; the fix_ci worker gets the statuses' links"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use executor_core::pr::CheckRunStatus;

    fn check(url: &str, conclusion: CheckConclusion) -> CheckRun {
        CheckRun {
            name: "ci / ui-tests (pull_request)".into(),
            status: CheckRunStatus::Completed,
            conclusion: Some(conclusion),
            url: Some(url.into()),
            run_url: Some(url.into()),
            summary: None,
            failing_step: None,
            log_excerpt: None,
        }
    }

    #[test]
    fn only_failed_checks_that_link_to_an_actions_job_want_its_log() {
        let job = "https://gitea.example/o/r/actions/runs/7/jobs/1";
        assert!(is_failed_actions_job(&check(job, CheckConclusion::Failure)));
        assert!(!is_failed_actions_job(&check(
            job,
            CheckConclusion::Success
        )));
        assert!(!is_failed_actions_job(&check(
            "https://woodpecker.example/repos/7/pipeline/31",
            CheckConclusion::Failure
        )));
        assert!(!is_failed_actions_job(&check(
            "https://gitea.example/o/r/actions/runs/7",
            CheckConclusion::Failure
        )));
    }

    #[test]
    fn act_runner_s_failure_line_centres_the_excerpt() {
        let log = include_str!("../../../tests/fixtures/gitea/actions_job_log.txt");
        let excerpt = LogExcerpt::from_log(log, 3, 1, 60);
        assert!(excerpt.around_error, "{excerpt:?}");
        assert_eq!(
            excerpt.lines,
            [
                "\tTabPreviewUITests.testPreviewDismissesOnMouseExit()",
                "** TEST FAILED **",
                "exitcode '65': failure",
                "❌  Failure - Main Run tests",
                "🏁  Job failed",
            ]
        );
    }
}

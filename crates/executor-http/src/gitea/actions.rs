//! Gitea Actions, as far as a `fix_ci` worker needs it: the workflow runs of a commit, a
//! run's jobs, and a job's log.
//!
//! What Gitea serves (go-gitea/gitea: `modules/structs/repo_actions.go`,
//! `routers/api/v1/repo/action.go`, `routers/common/actions.go`):
//!
//! - `GET /repos/{o}/{r}/actions/runs?head_sha=…` (Gitea 1.25): `{workflow_runs: [{id,
//!   run_number, head_sha, status, conclusion, html_url, …}], total_count}`.
//! - `GET /repos/{o}/{r}/actions/runs/{run_id}/jobs` (1.25): `{jobs: [{id, run_id, name,
//!   status, conclusion, html_url, steps: [{name, number, status, conclusion}]}],
//!   total_count}`. A job's `html_url` is the page its commit status links to
//!   (`…/actions/runs/{run}/jobs/{job}`), which is how a status finds its job.
//! - `GET /repos/{o}/{r}/actions/jobs/{job_id}/logs` (1.24): the job's whole log as text,
//!   one `<UTC time> <line>` per line; `404` when the log is gone.
//!
//! An older server answers `404` on these routes ([`GiteaError::NotFound`]): the caller
//! falls back to the statuses' links.
//!
//! What it must never do: follow a job's `html_url` or any other URL from an answer (only
//! the API URL it was given gets the token).

use reqwest::Method;
use serde::Deserialize;

use super::{decode, null_as_default, GiteaClient, GiteaError, MAX_PAGE_SIZE};

/// A workflow run (`ActionWorkflowRun`), the fields executor reads.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GiteaActionRun {
    pub id: u64,
    #[serde(default)]
    pub run_number: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub head_sha: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub html_url: String,
}

/// A job of a workflow run (`ActionWorkflowJob`), the fields executor reads.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GiteaActionJob {
    pub id: u64,
    #[serde(default)]
    pub run_id: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// `queued`, `in_progress`, `completed`, …
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: String,
    /// Once completed: `success`, `failure`, `cancelled`, `skipped`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub conclusion: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub html_url: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub steps: Vec<GiteaActionStep>,
}

/// A step of a job (`ActionWorkflowStep`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GiteaActionStep {
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(default)]
    pub number: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub conclusion: String,
}

impl GiteaActionJob {
    /// The first step that failed, if any.
    pub fn failed_step(&self) -> Option<&GiteaActionStep> {
        self.steps.iter().find(|s| s.conclusion == "failure")
    }
}

#[derive(Deserialize)]
struct RunsPage {
    #[serde(default, deserialize_with = "null_as_default")]
    workflow_runs: Vec<GiteaActionRun>,
}

#[derive(Deserialize)]
struct JobsPage {
    #[serde(default, deserialize_with = "null_as_default")]
    jobs: Vec<GiteaActionJob>,
}

impl GiteaClient {
    /// The workflow runs of commit `sha` (the newest page: a commit rarely has more).
    pub async fn action_runs_of_commit(
        &self,
        owner: &str,
        repo: &str,
        sha: &str,
    ) -> Result<Vec<GiteaActionRun>, GiteaError> {
        let mut url = self.repo_url(owner, repo, &["actions", "runs"])?;
        url.query_pairs_mut()
            .append_pair("head_sha", sha)
            .append_pair("limit", &MAX_PAGE_SIZE.to_string());
        let (_, answer) = self.send(Method::GET, url, None).await?;
        let page: RunsPage = decode(&answer, "the workflow runs")?;
        // A server that ignores the filter lists every run: only this commit's are kept.
        Ok(page
            .workflow_runs
            .into_iter()
            .filter(|r| r.head_sha.is_empty() || r.head_sha == sha)
            .collect())
    }

    /// The jobs of workflow run `run_id`.
    pub async fn action_run_jobs(
        &self,
        owner: &str,
        repo: &str,
        run_id: u64,
    ) -> Result<Vec<GiteaActionJob>, GiteaError> {
        let id = run_id.to_string();
        let mut url = self.repo_url(owner, repo, &["actions", "runs", &id, "jobs"])?;
        url.query_pairs_mut()
            .append_pair("limit", &MAX_PAGE_SIZE.to_string());
        let (_, answer) = self.send(Method::GET, url, None).await?;
        let page: JobsPage = decode(&answer, "the run's jobs")?;
        Ok(page.jobs)
    }

    /// Job `job_id`'s whole log.
    pub async fn action_job_log(
        &self,
        owner: &str,
        repo: &str,
        job_id: u64,
    ) -> Result<String, GiteaError> {
        let id = job_id.to_string();
        let url = self.repo_url(owner, repo, &["actions", "jobs", &id, "logs"])?;
        let (_, answer) = self.send(Method::GET, url, None).await?;
        Ok(String::from_utf8_lossy(&answer).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNS: &str = include_str!("../../../../tests/fixtures/gitea/actions_runs.json");
    const JOBS: &str = include_str!("../../../../tests/fixtures/gitea/actions_run_jobs.json");

    #[test]
    fn gitea_s_workflow_runs_and_jobs_read_as_swagger_shapes_them() {
        let runs: RunsPage = decode(RUNS.as_bytes(), "runs").expect("runs");
        assert_eq!(runs.workflow_runs.len(), 1);
        let run = &runs.workflow_runs[0];
        assert_eq!((run.id, run.run_number), (41, 7));
        assert_eq!(run.head_sha, "8c0e1d5f3a9b2e7c6d4f1a0b9e8d7c6b5a4f3e2d");

        let jobs: JobsPage = decode(JOBS.as_bytes(), "jobs").expect("jobs");
        assert_eq!(jobs.jobs.len(), 2);
        let failed = &jobs.jobs[1];
        assert_eq!(failed.conclusion, "failure");
        assert!(failed.html_url.ends_with("/actions/runs/7/jobs/1"));
        assert_eq!(
            failed.failed_step().map(|s| s.name.as_str()),
            Some("Run tests")
        );
        assert!(jobs.jobs[0].failed_step().is_none());
    }
}

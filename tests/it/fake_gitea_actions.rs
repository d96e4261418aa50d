//! The fake Gitea's Actions, in the shapes of `tests/fixtures/gitea` (Gitea's swagger,
//! `modules/structs/repo_actions.go`): a status set as Gitea Actions posts it
//! ([`FakeGitea::set_status`]) belongs to a job of the commit's workflow run, and links to
//! the job's page (`/{o}/{r}/actions/runs/{run_number}/jobs/{index}`), which is the job's
//! `html_url`. `GET /actions/runs?head_sha=` lists the runs (Gitea 1.25), `GET
//! /actions/runs/{id}/jobs` a run's jobs (1.25), `GET /actions/jobs/{id}/logs` a job's log as
//! text, one `<UTC time> <line>` per line (1.24).
//!
//! [`FakeGitea::serve_actions`] makes it an older server: without the runs API (before
//! 1.25) or without logs too, whose routes then answer `404`, as such a server does.

use serde_json::{json, Value};

use super::*;

/// One workflow run of a commit.
pub(super) struct FakeActionRun {
    id: u64,
    number: u64,
    sha: String,
    /// By index, as the job pages number them.
    jobs: Vec<FakeJob>,
}

struct FakeJob {
    id: u64,
    name: String,
    /// The commit status state: `pending`, `success`, `failure`, `error`.
    state: String,
    log: String,
}

/// What Actions API the fake serves.
#[derive(Clone, Copy, Debug)]
pub struct ActionsApi {
    /// The runs and jobs lists (Gitea 1.25).
    pub runs: bool,
    /// A job's log (Gitea 1.24).
    pub logs: bool,
}

impl Default for ActionsApi {
    fn default() -> Self {
        Self {
            runs: true,
            logs: true,
        }
    }
}

impl FakeGitea {
    /// Serves `api` of Gitea Actions (everything, unless a test says otherwise).
    pub fn serve_actions(&self, api: ActionsApi) {
        self.shared.state().actions_api = api;
    }

    /// The log of the Actions job that reports `context` on commit `sha` (lines without
    /// times; the fake stamps them).
    pub fn set_job_log(&self, sha: &str, context: &str, log: &str) {
        let mut data = self.shared.state();
        let stamp = gitea_log_time(data.now);
        let repo = data.repo_mut(OWNER, REPO);
        if let Some(job) = repo
            .action_runs
            .iter_mut()
            .filter(|r| r.sha == sha)
            .flat_map(|r| r.jobs.iter_mut())
            .find(|j| j.name == context)
        {
            job.log = log.lines().map(|l| format!("{stamp} {l}\n")).collect();
        }
    }
}

/// The page of the Actions job that reports `context` on `sha` in `state`, made (with its
/// run) on first use.
pub(super) fn job_page(
    state_data: &mut StateData,
    base: &str,
    sha: &str,
    context: &str,
    state: &str,
) -> String {
    let run_id = state_data.new_id();
    let job_id = state_data.new_id();
    let stamp = gitea_log_time(state_data.now);
    let repo = state_data.repo_mut(OWNER, REPO);
    let number = repo.action_runs.len() as u64 + 1;
    if !repo.action_runs.iter().any(|r| r.sha == sha) {
        repo.action_runs.push(FakeActionRun {
            id: run_id,
            number,
            sha: sha.to_owned(),
            jobs: Vec::new(),
        });
    }
    let Some(run) = repo.action_runs.iter_mut().find(|r| r.sha == sha) else {
        return String::new();
    };
    let index = match run.jobs.iter().position(|j| j.name == context) {
        Some(at) => {
            run.jobs[at].state = state.to_owned();
            at
        }
        None => {
            run.jobs.push(FakeJob {
                id: job_id,
                name: context.to_owned(),
                state: state.to_owned(),
                log: format!("{stamp} ⭐ Run Main {context}\n{stamp} {context}: {state}\n"),
            });
            run.jobs.len() - 1
        }
    };
    format!(
        "{base}/{OWNER}/{REPO}/actions/runs/{}/jobs/{index}",
        run.number
    )
}

/// The time at the head of a log line, as Gitea writes it.
fn gitea_log_time(time: DateTime<Utc>) -> String {
    // Seven digits of the second, as Gitea writes them (chrono has no `%.7f`).
    let tenths_of_micros = time.timestamp_subsec_nanos() / 100;
    format!(
        "{}.{tenths_of_micros:07}Z",
        time.format("%Y-%m-%dT%H:%M:%S")
    )
}

/// The Actions routes (`rest` below `/repos/{o}/{r}`), or `None` for another route.
pub(super) fn route(
    state: &StateData,
    base: &str,
    key: &(String, String),
    method: &Method,
    rest: &[&str],
    pairs: &[(String, String)],
) -> Option<Reply> {
    let api = state.actions_api;
    let repo = &state.repos[key];
    let number = |text: &str| text.parse::<u64>().ok();
    let reply = match (method.clone(), rest) {
        (Method::GET, ["actions", "runs"]) if api.runs => {
            let sha = pairs.iter().find(|(k, _)| k == "head_sha").map(|(_, v)| v);
            let runs: Vec<Value> = repo
                .action_runs
                .iter()
                .rev()
                .filter(|r| sha.is_none_or(|s| *s == r.sha))
                .map(|r| run_json(base, r))
                .collect();
            Reply::json(
                200,
                &json!({ "workflow_runs": runs, "total_count": runs.len() }),
            )
        }
        (Method::GET, ["actions", "runs", id, "jobs"]) if api.runs => {
            match repo.action_runs.iter().find(|r| number(id) == Some(r.id)) {
                Some(run) => {
                    let jobs: Vec<Value> = run
                        .jobs
                        .iter()
                        .enumerate()
                        .map(|(i, j)| job_json(base, run, i, j))
                        .collect();
                    Reply::json(200, &json!({ "jobs": jobs, "total_count": jobs.len() }))
                }
                None => Reply::not_found(base),
            }
        }
        (Method::GET, ["actions", "jobs", id, "logs"]) if api.logs => {
            match repo
                .action_runs
                .iter()
                .flat_map(|r| r.jobs.iter())
                .find(|j| number(id) == Some(j.id))
            {
                Some(job) => Reply {
                    status: 200,
                    headers: vec![("content-type".into(), "text/plain; charset=utf-8".into())],
                    body: job.log.clone().into_bytes(),
                },
                None => Reply::not_found(base),
            }
        }
        (_, ["actions", ..]) => Reply::not_found(base),
        _ => return None,
    };
    Some(reply)
}

fn conclusion(state: &str) -> (&'static str, &'static str) {
    match state {
        "success" => ("completed", "success"),
        "failure" | "error" => ("completed", "failure"),
        _ => ("in_progress", ""),
    }
}

fn run_json(base: &str, run: &FakeActionRun) -> Value {
    let failed = run.jobs.iter().any(|j| conclusion(&j.state).1 == "failure");
    let done = run
        .jobs
        .iter()
        .all(|j| conclusion(&j.state).0 == "completed");
    json!({
        "id": run.id,
        "url": format!("{base}{API_PATH}/repos/{OWNER}/{REPO}/actions/runs/{}", run.id),
        "html_url": format!("{base}/{OWNER}/{REPO}/actions/runs/{}", run.number),
        "display_title": "", "path": "ci.yml@refs/heads/main", "event": "pull_request",
        "run_attempt": 1, "run_number": run.number, "head_sha": run.sha, "head_branch": "",
        "status": if done { "completed" } else { "in_progress" },
        "conclusion": if !done { "" } else if failed { "failure" } else { "success" },
        "actor": user_json(base, BOT), "trigger_actor": user_json(base, BOT),
        "repository": null, "head_repository": null, "repository_id": 1,
        "started_at": "2026-03-16T09:29:51+01:00", "completed_at": "2026-03-16T09:31:16+01:00",
    })
}

fn job_json(base: &str, run: &FakeActionRun, index: usize, job: &FakeJob) -> Value {
    let (status, conclusion) = conclusion(&job.state);
    let step = |name: &str, number: u64, conclusion: &str| {
        json!({"name": name, "number": number, "status": status, "conclusion": conclusion,
               "started_at": "2026-03-16T09:29:52+01:00", "completed_at": "2026-03-16T09:31:05+01:00"})
    };
    json!({
        "id": job.id,
        "url": format!("{base}{API_PATH}/repos/{OWNER}/{REPO}/actions/jobs/{}", job.id),
        "html_url": format!("{base}/{OWNER}/{REPO}/actions/runs/{}/jobs/{index}", run.number),
        "run_id": run.id,
        "run_url": format!("{base}{API_PATH}/repos/{OWNER}/{REPO}/actions/runs/{}", run.id),
        "name": job.name, "labels": ["ubuntu-latest"], "run_attempt": 1,
        "head_sha": run.sha, "head_branch": "", "status": status, "conclusion": conclusion,
        "runner_id": 1, "runner_name": "runner-1",
        "steps": [step("Set up job", 0, "success"), step(&format!("Run {}", job.name), 1, conclusion)],
        "created_at": "2026-03-16T09:29:51+01:00", "started_at": "2026-03-16T09:29:52+01:00",
        "completed_at": "2026-03-16T09:31:16+01:00",
    })
}

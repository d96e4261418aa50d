//! Looks at a run's pull request on GitHub: [`observe_many`] and [`observe`] turn the
//! client's answers into the [`PrObservation`] the pure `pr` machine ([`executor_core::pr`])
//! decides from.
//!
//! Theory of operation. A tick looks at every open PR with [`observe_many`]: one GraphQL
//! request per twenty PRs ([`super::batch`]) reads state, head, labels, checks, threads and
//! comments of all of them. A PR with more checks or threads than that request reads is
//! looked at alone with [`observe`], which reads five resources through the shared
//! [`GithubClient`] (the PR, then at once the head commit's check runs (every page), the
//! review threads (GraphQL, every page), the conversation comments and the review
//! comments). Everything goes through the client's caches, so a second look within its TTL
//! costs no request. Nothing is cached here.
//!
//! Failed-CI details (the failing job step and a log excerpt, from the Actions jobs and logs
//! endpoints) cost one request per Actions run plus two per failed job (the log API answers
//! a redirect), and job logs are not cached by the client. So they are fetched only when
//! the machine, asked about the observation without them, would spawn a `fix_ci` worker:
//! the details change what that worker is told, never which step is chosen. Once the runner
//! has remembered that step, the worker runs (`worker_running`) and the next looks fetch
//! nothing more; a head gets its logs read again only if a `fix_ci` worker ended without
//! pushing and the next attempt needs them.
//!
//! Decisions, and why:
//!
//! - **A deleted PR** (REST 404, GraphQL `NOT_FOUND`) comes back as the client's error
//!   unchanged: [`GithubError::is_not_found`] is how the runner knows to abandon the run. A
//!   404 anywhere else (an Actions run or a log that expired) must not look like that, so
//!   those are dropped (the worker gets the check names and run URL without the log);
//!   transient errors on them are returned, and the run waits for a later tick.
//! - **A merged or closed PR** is observed from the PR alone: the machine decides from its
//!   state before anything else, and a failing read of checks or threads must not delay
//!   the end of the run. Its checks, threads and comments are left empty.
//! - **`head_pushed_at`** is the PR's `updated_at`. The client has no call for the head
//!   commit's date, and a push always moves `updated_at`, so it is never earlier than the
//!   push: the CI start grace counted from it is never shorter than the real one (only
//!   longer when the PR was touched since, which delays a trigger and never duplicates
//!   one). A runner that records its own push time may put that in instead.
//! - **`ci_run_exists`** is "the head commit has a check run". The client reads no check
//!   suites or workflow runs by commit; the gap between a push and its first check run is
//!   what the machine's `ci_start_grace` covers. Legacy commit statuses are not read: the
//!   machine judges CI by check runs only.
//! - **Checks** keep GitHub's order; when a name appears twice (a re-run), the newest run
//!   (latest `started_at`, then highest id) stands for it. `startup_failure` reads as a
//!   failure, a conclusion this version does not know as `unknown` (never green).
//! - **The owner** is whoever GitHub marks `author_association == "OWNER"` on a
//!   conversation or review comment: GitHub's own word for the repository's owner, with no
//!   login to configure. Left out even then: comments by the executor's logins, posted
//!   through a GitHub App, or carrying the executor's `<!-- executor:` marker, so an
//!   executor running with its owner's token never reads its own status comments as the
//!   owner's. Not covered: review bodies (the client lists no reviews) and repositories
//!   of an organisation, where nobody is `OWNER`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};

use super::batch::{PrSnapshot, SnapshotState};
use executor_core::pr::{
    next_pr_step, CheckConclusion, CheckRun, CheckRunStatus, ObservedComment, ObservedThread,
    OwnerComment, PrConfig, PrMemory, PrObservation, PrState, PrStep,
};
use executor_http::github::types::{self, PullRequest};
use executor_http::github::GithubError;
use executor_http::github::{GithubClient, LogExcerptOptions};

/// The marker the executor puts in the comments it posts (see [`super::steps`]).
pub const EXECUTOR_MARKER: &str = executor_core::pr::EXECUTOR_MARK;

/// The login GitHub shows for a deleted account.
const GHOST: &str = "ghost";

/// One PR for [`observe_many`] to look at, with what the runner knows of it.
#[derive(Clone, Copy, Debug)]
pub struct Look<'a> {
    pub number: u64,
    pub memory: &'a PrMemory,
    pub worker_running: bool,
}

/// The observations of many PRs, in the order of `looks`: one GraphQL request per
/// [`super::PRS_PER_QUERY`] PRs ([`GithubClient::pull_requests`]), plus, for a PR with
/// more checks or threads than that request reads, the one-PR look ([`observe`]), and for
/// a PR that is to get a `fix_ci` worker, its jobs and logs. An error is that PR's alone
/// unless it is [`GithubError::Shared`].
pub async fn observe_many(
    client: &GithubClient,
    looks: &[Look<'_>],
    config: &PrConfig,
    now: DateTime<Utc>,
) -> Vec<Result<PrObservation, GithubError>> {
    let numbers: Vec<u64> = looks.iter().map(|l| l.number).collect();
    let snapshots = super::batch::pull_requests(client, &numbers).await;
    let mut observed = Vec::with_capacity(looks.len());
    for (look, (_, snapshot)) in looks.iter().zip(snapshots) {
        let result = match snapshot {
            Ok(pr) if pr.checks_complete && pr.threads_complete => {
                from_snapshot(client, pr, look, config, now).await
            }
            Ok(_) => {
                observe(
                    client,
                    look.number,
                    config,
                    look.memory,
                    now,
                    look.worker_running,
                )
                .await
            }
            Err(error) => Err(error),
        };
        observed.push(result);
    }
    observed
}

async fn from_snapshot(
    client: &GithubClient,
    pr: PrSnapshot,
    look: &Look<'_>,
    config: &PrConfig,
    now: DateTime<Utc>,
) -> Result<PrObservation, GithubError> {
    let mut obs = PrObservation {
        observed_at: now,
        state: match pr.state {
            SnapshotState::Open => PrState::Open,
            SnapshotState::Closed => PrState::Closed,
            SnapshotState::Merged => PrState::Merged,
        },
        draft: pr.draft,
        mergeable: pr.mergeable,
        head_sha: pr.head_sha,
        head_pushed_at: Some(pr.updated_at),
        ci_run_exists: false,
        checks: Vec::new(),
        labels: pr.labels,
        threads: Vec::new(),
        owner_comments: Vec::new(),
        worker_running: look.worker_running,
        author: pr.author,
        verdicts: pr.verdicts,
    };
    if obs.state != PrState::Open {
        return Ok(obs);
    }
    let conversation = pr.comments.iter().filter_map(|c| {
        Some(Authored {
            id: c.database_id?,
            login: c.author.as_ref().map(|a| a.login.as_str()),
            via_app: c.author.as_ref().and_then(|a| a.kind.as_deref()) == Some("Bot"),
            association: &c.author_association,
            body: &c.body,
            created_at: c.created_at,
            on_conversation: true,
        })
    });
    let review = pr.threads.iter().flat_map(|t| &t.comments).filter_map(|c| {
        Some(Authored {
            id: c.database_id?,
            login: c.author.as_ref().map(|a| a.login.as_str()),
            via_app: c.author.as_ref().and_then(|a| a.kind.as_deref()) == Some("Bot"),
            association: c.author_association.as_deref().unwrap_or(""),
            body: &c.body,
            created_at: c.created_at,
            on_conversation: false,
        })
    });
    obs.owner_comments = owner_comments(conversation.chain(review), config);
    obs.ci_run_exists = !pr.check_runs.is_empty();
    obs.threads = pr.threads.into_iter().map(to_thread).collect();
    with_checks(client, obs, pr.check_runs, look.memory, config).await
}

/// Builds the observation of PR `pr_number` at `now` from one request per resource (see
/// the module notes). `config` and `memory` only decide whether failed-CI details are
/// worth fetching; `worker_running` is passed through.
pub async fn observe(
    client: &GithubClient,
    pr_number: u64,
    config: &PrConfig,
    memory: &PrMemory,
    now: DateTime<Utc>,
    worker_running: bool,
) -> Result<PrObservation, GithubError> {
    let pr = client.get_pr(pr_number).await?;
    let mut obs = PrObservation {
        observed_at: now,
        state: pr_state(&pr),
        draft: pr.draft,
        mergeable: pr.mergeable,
        head_sha: pr.head.sha.clone(),
        head_pushed_at: Some(pr.updated_at),
        ci_run_exists: false,
        checks: Vec::new(),
        labels: pr.labels.iter().map(|l| l.name.clone()).collect(),
        threads: Vec::new(),
        owner_comments: Vec::new(),
        worker_running,
        author: Some(pr.user.login.clone()),
        verdicts: Vec::new(),
    };
    if obs.state != PrState::Open {
        return Ok(obs);
    }
    // Reviewers' verdicts matter only to auto-merge, which looks at complete runs alone:
    // one more request then, none otherwise.
    if config.auto_merge.is_some() && memory.stage == executor_core::pr::Stage::Complete {
        obs.verdicts = verdicts_of(&client.reviews(pr_number).await?);
    }

    let (check_runs, threads, issue_comments, review_comments) = tokio::try_join!(
        client.check_runs(&pr.head.sha),
        client.review_threads(pr_number),
        client.issue_comments(pr_number),
        client.review_comments(pr_number),
    )?;

    obs.ci_run_exists = check_runs.total_count > 0 || !check_runs.runs.is_empty();
    obs.threads = threads.into_iter().map(to_thread).collect();
    let conversation = issue_comments.iter().map(|c| Authored {
        id: c.id,
        login: c.user.as_ref().map(|u| u.login.as_str()),
        via_app: c.performed_via_github_app.is_some(),
        association: &c.author_association,
        body: &c.body,
        created_at: c.created_at,
        on_conversation: true,
    });
    let review = review_comments.iter().map(|c| Authored {
        id: c.id,
        login: c.user.as_ref().map(|u| u.login.as_str()),
        via_app: false,
        association: &c.author_association,
        body: &c.body,
        created_at: c.created_at,
        on_conversation: false,
    });
    obs.owner_comments = owner_comments(conversation.chain(review), config);
    with_checks(client, obs, check_runs.runs, memory, config).await
}

/// Puts the head's checks into `obs`, with the failing steps and log excerpts when the
/// machine would send a `fix_ci` worker.
async fn with_checks(
    client: &GithubClient,
    mut obs: PrObservation,
    check_runs: Vec<types::CheckRun>,
    memory: &PrMemory,
    config: &PrConfig,
) -> Result<PrObservation, GithubError> {
    let checks = latest_per_name(check_runs);
    obs.checks = checks.iter().map(to_check).collect();
    if matches!(
        next_pr_step(&obs, memory, config),
        PrStep::SpawnFixCi { .. }
    ) {
        add_failure_details(client, &checks, &mut obs.checks).await?;
    }
    Ok(obs)
}

/// Each reviewer's latest verdict from GitHub's reviews (oldest first): an approval or a
/// request for changes stands until the same reviewer gives another, or it is dismissed.
/// Comments alone change nothing, as on GitHub.
pub fn verdicts_of(reviews: &[types::Review]) -> Vec<executor_core::merge::Verdict> {
    executor_core::merge::latest_verdicts(reviews.iter().filter_map(|review| {
        let user = review.user.as_ref()?;
        // Only those who can write to the repository count, as `writersOnly` in GraphQL:
        // anyone may review a public repository's PR.
        if !matches!(
            review.author_association.as_str(),
            "OWNER" | "MEMBER" | "COLLABORATOR"
        ) {
            return None;
        }
        let verdict = match review.state.as_str() {
            "APPROVED" => Some(true),
            "CHANGES_REQUESTED" => Some(false),
            "DISMISSED" => None,
            _ => return None,
        };
        let verdict = verdict.map(|approved| executor_core::merge::Verdict {
            by: user.login.clone(),
            approved,
            commit: review.commit_id.clone(),
        });
        Some((user.login.clone(), verdict))
    }))
}

fn pr_state(pr: &PullRequest) -> PrState {
    if pr.merged || pr.merged_at.is_some() {
        PrState::Merged
    } else if pr.state == "closed" {
        PrState::Closed
    } else {
        PrState::Open
    }
}

// ----- checks -----

/// GitHub's order, one run per name: the newest where a name repeats.
fn latest_per_name(runs: Vec<types::CheckRun>) -> Vec<types::CheckRun> {
    let mut kept: Vec<types::CheckRun> = Vec::with_capacity(runs.len());
    let mut at: HashMap<String, usize> = HashMap::new();
    for run in runs {
        match at.get(&run.name) {
            Some(&i) => {
                let newer = (run.started_at, run.id) > (kept[i].started_at, kept[i].id);
                if newer {
                    kept[i] = run;
                }
            }
            None => {
                at.insert(run.name.clone(), kept.len());
                kept.push(run);
            }
        }
    }
    kept
}

fn to_check(run: &types::CheckRun) -> CheckRun {
    let url = run.details_url.clone().or_else(|| run.html_url.clone());
    let run_url = [run.details_url.as_deref(), run.html_url.as_deref()]
        .into_iter()
        .flatten()
        .find_map(actions_run_page);
    CheckRun {
        name: run.name.clone(),
        status: status(run.status),
        conclusion: run.conclusion.map(conclusion),
        url,
        run_url,
        summary: run.output.title.clone().filter(|t| !t.trim().is_empty()),
        failing_step: None,
        log_excerpt: None,
    }
}

fn status(status: types::CheckStatus) -> CheckRunStatus {
    match status {
        types::CheckStatus::Queued => CheckRunStatus::Queued,
        types::CheckStatus::InProgress => CheckRunStatus::InProgress,
        types::CheckStatus::Completed => CheckRunStatus::Completed,
        types::CheckStatus::Waiting => CheckRunStatus::Waiting,
        types::CheckStatus::Requested => CheckRunStatus::Requested,
        types::CheckStatus::Pending => CheckRunStatus::Pending,
        types::CheckStatus::Other => CheckRunStatus::Unknown,
    }
}

fn conclusion(conclusion: types::CheckConclusion) -> CheckConclusion {
    match conclusion {
        types::CheckConclusion::Success => CheckConclusion::Success,
        types::CheckConclusion::Failure | types::CheckConclusion::StartupFailure => {
            CheckConclusion::Failure
        }
        types::CheckConclusion::Neutral => CheckConclusion::Neutral,
        types::CheckConclusion::Cancelled => CheckConclusion::Cancelled,
        types::CheckConclusion::Skipped => CheckConclusion::Skipped,
        types::CheckConclusion::TimedOut => CheckConclusion::TimedOut,
        types::CheckConclusion::ActionRequired => CheckConclusion::ActionRequired,
        types::CheckConclusion::Stale => CheckConclusion::Stale,
        types::CheckConclusion::Other => CheckConclusion::Unknown,
    }
}

/// What the machine counts as a failed check (the conclusions a `fix_ci` worker gets).
fn is_failure(conclusion: Option<CheckConclusion>) -> bool {
    matches!(
        conclusion,
        Some(CheckConclusion::Failure | CheckConclusion::TimedOut | CheckConclusion::Unknown)
    )
}

/// `https://github.com/o/r/actions/runs/1` from any URL under that run (a job's page).
pub fn actions_run_page(url: &str) -> Option<String> {
    let (before, _) = url.split_once("/actions/runs/")?;
    let id = actions_run_id(url)?;
    Some(format!("{before}/actions/runs/{id}"))
}

/// The Actions run id in a URL under `/actions/runs/{id}`.
pub fn actions_run_id(url: &str) -> Option<u64> {
    let (_, after) = url.split_once("/actions/runs/")?;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Fills in the failing step and log excerpt of each failed check that is an Actions job
/// (or points at one, like a test report published by the job). `raw` and `checks` are
/// parallel.
async fn add_failure_details(
    client: &GithubClient,
    raw: &[types::CheckRun],
    checks: &mut [CheckRun],
) -> Result<(), GithubError> {
    let jobs_of_failed: Vec<Option<(u64, u64)>> = raw
        .iter()
        .zip(checks.iter())
        .map(|(run, check)| {
            is_failure(check.conclusion)
                .then(|| run.actions_job())
                .flatten()
        })
        .collect();
    let run_ids: BTreeSet<u64> = jobs_of_failed.iter().flatten().map(|(r, _)| *r).collect();
    let job_ids: BTreeSet<u64> = jobs_of_failed.iter().flatten().map(|(_, j)| *j).collect();
    if job_ids.is_empty() {
        return Ok(());
    }

    let mut steps: BTreeMap<u64, String> = BTreeMap::new();
    for run_id in run_ids {
        if let Some(jobs) = tolerated(client.run_jobs(run_id).await, "the run's jobs")? {
            for job in jobs {
                if let Some(step) = job.failed_step() {
                    steps.insert(job.id, step.name.clone());
                }
            }
        }
    }
    let mut logs: BTreeMap<u64, String> = BTreeMap::new();
    for job_id in job_ids {
        let excerpt = client
            .job_log_excerpt(job_id, LogExcerptOptions::default())
            .await;
        if let Some(excerpt) = tolerated(excerpt, "the job's log")? {
            let text = excerpt.text();
            if !text.trim().is_empty() {
                logs.insert(job_id, text);
            }
        }
    }

    for (check, job) in checks.iter_mut().zip(jobs_of_failed) {
        if let Some((_, job_id)) = job {
            check.failing_step = steps.get(&job_id).cloned();
            check.log_excerpt = logs.get(&job_id).cloned();
        }
    }
    Ok(())
}

/// A transient failure is the caller's (the run waits for a later tick); any other (a run
/// or log expired or gone, no permission) only costs the worker that detail.
fn tolerated<T>(result: Result<T, GithubError>, what: &str) -> Result<Option<T>, GithubError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(error) if error.is_transient() => Err(error),
        Err(error) => {
            tracing::warn!(%error, "cannot read {what} of a failed check; going on without");
            Ok(None)
        }
    }
}

// ----- threads and comments -----

fn to_thread(thread: types::ReviewThread) -> ObservedThread {
    ObservedThread {
        id: thread.id,
        path: thread.path,
        line: thread.line.and_then(|l| u32::try_from(l).ok()),
        is_resolved: thread.is_resolved,
        is_outdated: thread.is_outdated,
        comments: thread
            .comments
            .into_iter()
            .map(|c| ObservedComment {
                id: c.id,
                author: c.author.map_or_else(|| GHOST.to_string(), |a| a.login),
                body: c.body,
                created_at: c.created_at,
            })
            .collect(),
    }
}

/// A comment from either list, as far as telling the owner's apart needs.
struct Authored<'a> {
    id: u64,
    login: Option<&'a str>,
    /// Posted by an app (`performed_via_github_app` over REST, a `Bot` author over GraphQL).
    via_app: bool,
    association: &'a str,
    body: &'a str,
    created_at: DateTime<Utc>,
    /// From the conversation, not a review thread.
    on_conversation: bool,
}

fn owner_comments<'a>(
    comments: impl Iterator<Item = Authored<'a>>,
    config: &PrConfig,
) -> Vec<OwnerComment> {
    comments
        .filter(|c| {
            c.association == "OWNER"
                && !c.via_app
                && !c.login.is_some_and(|l| is_executor(l, config))
                && !c.body.contains(EXECUTOR_MARKER)
        })
        .map(|c| OwnerComment {
            id: c.id,
            created_at: c.created_at,
            on_conversation: c.on_conversation,
            body: c.body.to_owned(),
        })
        .collect()
}

/// GitHub shows an App's login as `name[bot]` over REST and `name` over GraphQL.
fn is_executor(login: &str, config: &PrConfig) -> bool {
    let bare = |l: &str| l.strip_suffix("[bot]").unwrap_or(l).to_ascii_lowercase();
    let login = bare(login);
    config.executor_logins.iter().any(|l| bare(l) == login)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reviewers_latest_verdict_stands_and_a_dismissal_or_comment_changes_nothing_else() {
        let review = |login: &str, state: &str, commit: &str| -> types::Review {
            serde_json::from_value(serde_json::json!({
                "id": 1, "state": state, "body": "", "html_url": "https://github.com/x",
                "user": { "login": login, "id": 7, "type": "User" }, "commit_id": commit,
                "author_association": if login == "cy" { "NONE" } else { "COLLABORATOR" },
            }))
            .expect("a review")
        };
        let reviews = [
            review("ana", "CHANGES_REQUESTED", "a1"),
            review("ana", "APPROVED", "b2"),
            review("ana", "COMMENTED", "c3"),
            review("bo", "APPROVED", "a1"),
            review("bo", "DISMISSED", "a1"),
            review("cy", "APPROVED", "b2"),
        ];
        let verdicts = verdicts_of(&reviews);
        assert_eq!(
            verdicts,
            vec![executor_core::merge::Verdict {
                by: "ana".into(),
                approved: true,
                commit: Some("b2".into()),
            }]
        );
    }

    #[test]
    fn an_actions_run_is_found_under_a_job_url() {
        let job =
            "https://github.com/mkowalski/lumen-browser/actions/runs/34712098321/job/103651827391";
        assert_eq!(actions_run_id(job), Some(34712098321));
        assert_eq!(
            actions_run_page(job).as_deref(),
            Some("https://github.com/mkowalski/lumen-browser/actions/runs/34712098321")
        );
        let other = "https://ci.example.com/builds/7";
        assert_eq!(actions_run_id(other), None);
        assert_eq!(actions_run_page(other), None);
        assert_eq!(actions_run_page("https://x/actions/runs/abc"), None);
    }

    #[test]
    fn the_executor_is_known_with_or_without_bot() {
        let config = PrConfig {
            executor_logins: vec!["lumen-executor[bot]".into()],
            ..PrConfig::default()
        };
        assert!(is_executor("lumen-executor", &config));
        assert!(is_executor("Lumen-Executor[bot]", &config));
        assert!(!is_executor("mkowalski", &config));
    }
}

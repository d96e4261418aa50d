//! The record step of the conductor protocol: when a run completes, an entry is appended to
//! the configured build log (what, which run, which commit, how it was verified), and the
//! task's source is brought up to date through the conductor's contract.
//!
//! Theory of operation. A completed task that came from a source the record step can update
//! ([`origin`]) becomes one action for the conductor contract (`roles/conductor-policy.json`):
//!
//! | task | action |
//! |---|---|
//! | GitHub issue `gh:owner:repo#N` | `close_issue target=github repository=owner/repo number=N` |
//! | Gitea issue `gitea:owner:repo#N` | `close_issue target=gitea repository=owner/repo number=N` |
//! | Asana task | `post_comment target=tracker task=GID` (the comment's text beside it) |
//!
//! The contract decides it: approve, it is done now; deny, nothing is done; escalate, an
//! escalation (role `conductor`) is recorded and the owner told, and
//! [`Recorder::apply_decided`] carries out the owner's answer later, exactly once. Every
//! decision is recorded with the run; the outcome is a line of the build log entry. A task
//! from a source that is not configured (or from none the record step knows) is left as it
//! is, with a log line.
//!
//! What it must never do: fail or hold up the run it records. Every failure here is logged
//! and told to the owner; the run stays complete.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use chrono::{DateTime, Utc};

use crate::chat::Notices;
use crate::core::outbox::Priority;
use crate::core::record::{Decision as Recorded, NewDecision, Run};
use crate::core::task::Task;
use crate::forge::gitea::GiteaClient;
use crate::forge::github::GithubClient;
use crate::policy::{Action, Decision};
use crate::runner::contract::{ContractCell, Reload};
use crate::sources::asana::AsanaClient;
use crate::store::{Store, StoreResult};

/// The role the record step's decisions are recorded under.
pub const ROLE: &str = "conductor";
/// The actions the record step owns: escalations of these, by [`ROLE`], are answered
/// through [`Recorder::apply_decided`].
pub const ACTIONS: [&str; 2] = ["close_issue", "post_comment"];

/// What the record step knows how to do.
#[derive(Debug, Default)]
pub struct Recorder {
    /// The build log file; `None`: no build log.
    pub build_log: Option<PathBuf>,
    /// The conductor's contract, which decides every source update; `None`: sources are
    /// never updated.
    pub contract: Option<ContractCell>,
    /// `[sources.github_issues]`: a client for each repository it reads; `None`: not
    /// configured.
    pub github: Option<Vec<GithubClient>>,
    /// `[sources.gitea_issues]`; `None`: not configured.
    pub gitea: Option<GiteaIssues>,
    /// `[sources.asana]`; `None`: not configured.
    pub asana: Option<AsanaClient>,
}

/// The Gitea client and the repositories (`owner/name`) the source reads.
#[derive(Debug, Clone)]
pub struct GiteaIssues {
    pub client: GiteaClient,
    pub repositories: Vec<String>,
}

/// A completed run, as the record step sees it.
#[derive(Debug, Clone)]
pub struct Completion<'a> {
    pub task: &'a Task,
    pub run: &'a Run,
    /// The commit the run's work ends at, when it has one.
    pub commit: Option<String>,
    /// How it was verified: one line per check, e.g. "`cargo test`: passed".
    pub verification: Vec<String>,
    /// When the run completed, by the engine's clock.
    pub at: DateTime<Utc>,
}

/// Where a task came from, as far as the record step can update it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Issue `number` of the GitHub repository `owner/name`.
    Github { repository: String, number: u64 },
    /// Issue `number` of the Gitea repository `owner/name`.
    Gitea { repository: String, number: u64 },
    /// An Asana task.
    Asana { task: String },
}

impl Origin {
    /// The action the conductor contract decides for this source's update.
    pub fn action(&self) -> Action {
        match self {
            Origin::Github { repository, number } => Action::from_request(
                "close_issue",
                [
                    ("target", "github".to_string()),
                    ("repository", repository.clone()),
                    ("number", number.to_string()),
                ],
            ),
            Origin::Gitea { repository, number } => Action::from_request(
                "close_issue",
                [
                    ("target", "gitea".to_string()),
                    ("repository", repository.clone()),
                    ("number", number.to_string()),
                ],
            ),
            Origin::Asana { task } => Action::from_request(
                "post_comment",
                [("target", "tracker".to_string()), ("task", task.clone())],
            ),
        }
    }

    /// The configuration section that must be there for this update.
    fn section(&self) -> &'static str {
        match self {
            Origin::Github { .. } => "[sources.github_issues]",
            Origin::Gitea { .. } => "[sources.gitea_issues]",
            Origin::Asana { .. } => "[sources.asana]",
        }
    }
}

/// Where task `gid` from `source` came from. `repositories` are the `owner/name`s the
/// configured issue sources read: an issue's repository is the one among them whose gid
/// form matches (so the hash form of a long name is found too, and the configured spelling
/// kept), else the one the readable gid names. `None`: not from a source the record step
/// updates (a plan note, a subtask, a gid that is not the source's form).
pub fn origin(gid: &str, source: Option<&str>, repositories: &[String]) -> Option<Origin> {
    match source? {
        crate::sources::github_issues::SOURCE => {
            let (repository, number) = issue_of(
                gid,
                "gh:",
                repositories,
                crate::sources::github_issues::task_gid,
            )?;
            Some(Origin::Github { repository, number })
        }
        crate::sources::gitea_issues::SOURCE => {
            let (repository, number) = issue_of(
                gid,
                "gitea:",
                repositories,
                crate::sources::gitea_issues::task_gid,
            )?;
            Some(Origin::Gitea { repository, number })
        }
        crate::sources::asana::SOURCE => {
            (!gid.is_empty() && gid.bytes().all(|b| b.is_ascii_digit())).then(|| Origin::Asana {
                task: gid.to_string(),
            })
        }
        _ => None,
    }
}

/// `(owner/name, number)` of an issue gid `{prefix}{owner}:{name}#{number}` (or the hash
/// form, when one of `repositories` gives it).
fn issue_of(
    gid: &str,
    prefix: &str,
    repositories: &[String],
    task_gid: fn(&str, u64) -> String,
) -> Option<(String, u64)> {
    let (path, number) = gid.strip_prefix(prefix)?.rsplit_once('#')?;
    let number: u64 = number.parse().ok()?;
    if let Some(known) = repositories
        .iter()
        .find(|r| task_gid(r.as_str(), number) == gid)
    {
        return Some((known.trim().to_string(), number));
    }
    let (owner, name) = path.split_once(':')?;
    let repository = format!("{owner}/{name}");
    (task_gid(&repository, number) == gid).then_some((repository, number))
}

/// What an escalated (or decided) source update holds: the action, and the comment's text
/// when it is one. Recorded as the decision's `detail`, as JSON.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Update {
    pub action: String,
    pub args: BTreeMap<String, String>,
    /// What will be posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl Update {
    fn new(action: &Action, text: Option<String>) -> Self {
        Self {
            action: action.kind.clone(),
            args: action.args.clone(),
            text,
        }
    }

    fn arg(&self, key: &str) -> &str {
        self.args.get(key).map(String::as_str).unwrap_or("")
    }

    /// "close gitea:o:r#4", "comment on Asana task 12": what it does, for the log and the owner.
    fn describe(&self, gid: &str) -> String {
        match (self.action.as_str(), self.arg("target")) {
            ("post_comment", "tracker") => format!("comment on Asana task {}", self.arg("task")),
            ("close_issue", _) => format!("close {gid}"),
            (action, target) => format!("{action} ({target})"),
        }
    }
}

impl Recorder {
    /// Records `done`. Never fails: what cannot be done is logged and told.
    pub async fn record(&self, store: &dyn Store, notices: &Notices, done: Completion<'_>) {
        let source = self.update_source(store, notices, &done).await;
        if let Some(path) = &self.build_log {
            if let Err(error) = append(path, &entry(&done, source.as_deref())) {
                tracing::error!(gid = %done.task.task_gid, run = done.run.id, log = %path.display(), %error, "cannot append to the build log");
            }
        }
    }

    /// Carries out the owner's answers to the record step's escalations, each exactly once
    /// (the store's compare-and-set on `applied_at`): approved, it is done now; denied,
    /// nothing is done. Each outcome is logged and noted in the build log. Answers the
    /// number of escalations taken.
    pub async fn apply_decided(
        &self,
        store: &dyn Store,
        notices: &Notices,
        now: DateTime<Utc>,
    ) -> StoreResult<usize> {
        let mut taken = 0;
        for escalation in store.answered_escalations().await? {
            if escalation.role != ROLE || !ACTIONS.contains(&escalation.action.as_str()) {
                continue;
            }
            if !store.apply_escalation(escalation.id, now).await? {
                continue;
            }
            taken += 1;
            let outcome = self.carry_out_answer(notices, store, &escalation).await;
            if let Some(path) = &self.build_log {
                if let Err(error) = append(path, &follow_up(&escalation, &outcome, now)) {
                    tracing::error!(escalation = escalation.id, log = %path.display(), %error, "cannot append to the build log");
                }
            }
        }
        Ok(taken)
    }

    /// What the owner's answer to `escalation` led to, as a build log line.
    async fn carry_out_answer(
        &self,
        notices: &Notices,
        store: &dyn Store,
        escalation: &Recorded,
    ) -> String {
        let gid = escalation.task_gid.as_deref().unwrap_or("?");
        let note = escalation
            .resolution_note
            .as_deref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        let update: Update = match escalation
            .detail
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
        {
            Ok(Some(update)) => update,
            Ok(None) | Err(_) => {
                tracing::error!(gid = %gid, escalation = escalation.id, "the escalation's detail is not a source update; nothing is done");
                return format!(
                    "escalation {}: its detail is not a source update; nothing done",
                    escalation.id
                );
            }
        };
        let what = update.describe(gid);
        if escalation.resolution.as_deref() != Some("approve") {
            tracing::info!(gid = %gid, escalation = escalation.id, "the owner denied the record step's {what}; nothing is done");
            return format!(
                "not done: the owner denied `{what}` (escalation {}){note}",
                escalation.id
            );
        }
        match self.carry_out(&update, gid).await {
            Ok(done) => {
                tracing::info!(gid = %gid, escalation = escalation.id, "{done}, as the owner approved");
                format!(
                    "{done}, as the owner approved (escalation {}){note}",
                    escalation.id
                )
            }
            Err(error) => {
                self.failed(store, notices, gid, escalation.run_id, &what, &error)
                    .await;
                format!("cannot {what}: {error}")
            }
        }
    }

    /// Brings the source of `done` up to date as the contract decides; the outcome, as a
    /// build log line (`None`: nothing to update).
    async fn update_source(
        &self,
        store: &dyn Store,
        notices: &Notices,
        done: &Completion<'_>,
    ) -> Option<String> {
        let task = done.task;
        let gid = task.task_gid.as_str();
        let origin = origin(gid, task.source.as_deref(), &self.repositories())?;
        if !self.configured(&origin) {
            tracing::info!(gid = %gid, "{} is not configured: the task's source is not updated", origin.section());
            return Some(format!(
                "not updated: {} is not configured",
                origin.section()
            ));
        }
        let Some(contract) = &self.contract else {
            tracing::info!(gid = %gid, "no conductor contract: the task's source is not updated");
            return Some("not updated: no conductor contract".to_string());
        };
        match contract.reload_if_changed() {
            Reload::KeptLastGood(error) => {
                tracing::warn!(%error, "the edited conductor contract does not validate; the last good one decides")
            }
            Reload::Reloaded => tracing::info!("the conductor contract was edited; it is reloaded"),
            Reload::Unchanged => {}
        }
        let action = origin.action();
        let text = matches!(origin, Origin::Asana { .. }).then(|| comment_text(done));
        let update = Update::new(&action, text);
        let scope = crate::policy::Scope::new(
            done.run.worktree_path.as_deref().unwrap_or("."),
            done.run.branch_name.as_deref(),
        );
        let (_, verdict) = crate::policy::judge(
            &contract.current().contract,
            &crate::policy::Input::Request(&action),
            &scope,
        );
        let rule = verdict
            .rule_id
            .clone()
            .unwrap_or_else(|| "(default)".to_string());
        let what = update.describe(gid);
        tracing::info!(gid = %gid, run = done.run.id, action = %action, decision = %verdict.decision, %rule, "the record step's source update was decided");
        let recorded = match store
            .record_decision(&NewDecision {
                task_gid: Some(gid.to_string()),
                run_id: Some(done.run.id),
                at: done.at,
                role: ROLE.to_string(),
                action: action.kind.clone(),
                decision: verdict.decision.as_str().to_string(),
                rule_id: verdict.rule_id.clone(),
                detail: Some(serde_json::to_string(&update).unwrap_or_default()),
                tool_use_id: None,
                message_window: None,
                // The orchestrator's own step after the worker ended: no worker's posture
                // applies to it.
                confined: None,
            })
            .await
        {
            Ok(recorded) => Some(recorded),
            Err(error) => {
                tracing::error!(gid = %gid, run = done.run.id, %error, "cannot record the record step's decision");
                None
            }
        };
        match verdict.decision {
            Decision::Approve => match self.carry_out(&update, gid).await {
                Ok(done_text) => {
                    tracing::info!(gid = %gid, run = done.run.id, "{done_text}");
                    Some(done_text)
                }
                Err(error) => {
                    self.failed(store, notices, gid, Some(done.run.id), &what, &error)
                        .await;
                    Some(format!("cannot {what}: {error}"))
                }
            },
            Decision::Deny => {
                tracing::info!(gid = %gid, run = done.run.id, %rule, "the conductor contract denies the record step's {what}; nothing is done");
                Some(format!(
                    "not done: rule {rule} denies `{what}` ({})",
                    verdict.why
                ))
            }
            Decision::Escalate => match recorded {
                Some(escalation) => {
                    notices
                        .tell(
                            store,
                            crate::chat::text::escalation(notices.routing(), &escalation, &[]),
                        )
                        .await;
                    Some(format!(
                        "`{what}` waits for the owner (escalation {}: `executor decide {} approve|deny`)",
                        escalation.id, escalation.id
                    ))
                }
                None => {
                    let error = "the escalation could not be recorded".to_string();
                    self.failed(store, notices, gid, Some(done.run.id), &what, &error)
                        .await;
                    Some(format!("cannot {what}: {error}"))
                }
            },
        }
    }

    /// Does `update` now: what was done, or why it could not be.
    async fn carry_out(&self, update: &Update, gid: &str) -> Result<String, String> {
        match (update.action.as_str(), update.arg("target")) {
            ("close_issue", "github") => {
                let number = issue_number(update)?;
                let repository = update.arg("repository");
                let client = self
                    .github
                    .as_deref()
                    .ok_or("[sources.github_issues] is not configured")?
                    .iter()
                    .find(|c| {
                        let (owner, repo) = c.repository();
                        format!("{owner}/{repo}").eq_ignore_ascii_case(repository)
                    })
                    .ok_or_else(|| {
                        format!(
                            "{repository} is not among the repositories of [sources.github_issues]"
                        )
                    })?;
                client
                    .close_issue(number)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(format!("closed {gid}"))
            }
            ("close_issue", "gitea") => {
                let number = issue_number(update)?;
                let gitea = self
                    .gitea
                    .as_ref()
                    .ok_or("[sources.gitea_issues] is not configured")?;
                let (owner, repo) = update
                    .arg("repository")
                    .split_once('/')
                    .ok_or("the repository is not owner/name")?;
                gitea
                    .client
                    .close_issue(owner, repo, number)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(format!("closed {gid}"))
            }
            ("post_comment", "tracker") => {
                let asana = self
                    .asana
                    .as_ref()
                    .ok_or("[sources.asana] is not configured")?;
                let task = update.arg("task");
                let text = update.text.as_deref().unwrap_or_default();
                asana
                    .add_comment(task, text)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(format!("commented on Asana task {task}"))
            }
            (action, target) => Err(format!(
                "the record step does not know how to {action} on {target:?}"
            )),
        }
    }

    /// Logs a failed source update and tells the owner; the run stays complete.
    async fn failed(
        &self,
        store: &dyn Store,
        notices: &Notices,
        gid: &str,
        run_id: Option<i64>,
        what: &str,
        error: &str,
    ) {
        tracing::error!(gid = %gid, run = run_id, %error, "the record step cannot {what}");
        let run = run_id.map(|r| format!("run {r} of ")).unwrap_or_default();
        notices
            .tell(
                store,
                crate::chat::Notice {
                    priority: Priority::Action,
                    persona: crate::chat::Persona::Orchestrator,
                    task_gid: Some(gid.to_string()),
                    run_id,
                    body: format!(
                        "The record step of {run}`{gid}` could not {what}: {error}. The run stays complete; do it by hand if it should be done."
                    ),
                },
            )
            .await;
    }

    /// The repositories the configured issue sources read.
    fn repositories(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .github
            .iter()
            .flatten()
            .map(|c| {
                let (owner, repo) = c.repository();
                format!("{owner}/{repo}")
            })
            .collect();
        if let Some(gitea) = &self.gitea {
            all.extend(gitea.repositories.iter().cloned());
        }
        all
    }

    fn configured(&self, origin: &Origin) -> bool {
        match origin {
            Origin::Github { .. } => self.github.is_some(),
            Origin::Gitea { .. } => self.gitea.is_some(),
            Origin::Asana { .. } => self.asana.is_some(),
        }
    }
}

fn issue_number(update: &Update) -> Result<u64, String> {
    update
        .arg("number")
        .parse()
        .map_err(|_| format!("`{}` is not an issue number", update.arg("number")))
}

/// The comment posted on an Asana task whose run completed (plain text).
pub fn comment_text(done: &Completion<'_>) -> String {
    let mut text = format!("executor completed this task: run {}", done.run.id);
    if let Some(branch) = &done.run.branch_name {
        text.push_str(&format!(", branch {branch}"));
    }
    if let Some(commit) = &done.commit {
        text.push_str(&format!(", commit {commit}"));
    }
    if let Some(url) = &done.run.pr_url {
        text.push_str(&format!(", {url}"));
    }
    text.push('.');
    if !done.verification.is_empty() {
        let checks: Vec<String> = done
            .verification
            .iter()
            .map(|line| line.replace('`', ""))
            .collect();
        text.push_str(&format!(" Verification: {}.", checks.join("; ")));
    }
    text
}

/// The build log's entry for `done` (Markdown); `source`: what became of the task's source.
pub fn entry(done: &Completion<'_>, source: Option<&str>) -> String {
    let mut out = format!(
        "\n## {} · `{}` · {}\n\n- run {}",
        crate::core::time::format_utc(&done.at),
        done.task.task_gid,
        done.task.title(),
        done.run.id
    );
    if let Some(branch) = &done.run.branch_name {
        out.push_str(&format!(", branch `{branch}`"));
    }
    if let Some(commit) = &done.commit {
        out.push_str(&format!(", commit `{commit}`"));
    }
    if let Some(url) = &done.run.pr_url {
        out.push_str(&format!(", {url}"));
    }
    out.push('\n');
    if done.verification.is_empty() {
        out.push_str("- verification: none configured\n");
    } else {
        for line in &done.verification {
            out.push_str(&format!("- verification: {line}\n"));
        }
    }
    if let Some(source) = source {
        out.push_str(&format!("- source: {source}\n"));
    }
    out
}

/// The build log's note of what the owner's answer to `escalation` led to.
fn follow_up(escalation: &Recorded, outcome: &str, at: DateTime<Utc>) -> String {
    format!(
        "\n## {} · `{}` · source update\n\n- run {}, escalation {}\n- source: {outcome}\n",
        crate::core::time::format_utc(&at),
        escalation.task_gid.as_deref().unwrap_or("?"),
        escalation
            .run_id
            .map(|r| r.to_string())
            .unwrap_or_else(|| "?".into()),
        escalation.id
    )
}

fn append(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let new = !path.exists();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    if new {
        file.write_all(b"# Build log\n")?;
    }
    file.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::queue::QueueStatus;
    use crate::core::run::RunState;

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-03-04T05:06:07Z")
            .expect("a fixed time")
            .with_timezone(&Utc)
    }

    fn task(gid: &str, source: &str, title: &str) -> Task {
        Task {
            id: 1,
            task_gid: gid.to_string(),
            added_at: at(),
            updated_at: at(),
            source: Some(source.to_string()),
            description: Some(format!("# {title}\n\nBody.")),
            notes: None,
            status: QueueStatus::Done,
            priority: None,
            complexity: None,
            feasibility: None,
            analysis_summary: None,
            executor_run_id: Some(7),
        }
    }

    fn run() -> Run {
        Run {
            id: 7,
            task_gid: "x".into(),
            worktree_path: None,
            branch_name: Some("executor/x-fix".into()),
            pr_url: None,
            pr_number: None,
            thread_id: None,
            started_at: None,
            updated_at: at(),
            completed_at: Some(at()),
            state: RunState::Complete,
            ci_attempts: 0,
            worker_session_id: None,
            worker_last_update: None,
            worker_pid: None,
            worker_stuck_count: 0,
            lifecycle: None,
            lease_epoch: 0,
        }
    }

    #[test]
    fn issue_gids_map_to_closing_the_issue_and_asana_tasks_to_a_tracker_comment() {
        let none: Vec<String> = Vec::new();
        let github = origin("gh:mkowalski:lumen-browser#812", Some("github"), &none)
            .expect("a GitHub issue");
        assert_eq!(
            github,
            Origin::Github {
                repository: "mkowalski/lumen-browser".into(),
                number: 812
            }
        );
        assert_eq!(
            github.action().to_string(),
            r#"close_issue number="812" repository="mkowalski/lumen-browser" target="github""#
        );
        let gitea = origin("gitea:o:r#4", Some("gitea"), &none).expect("a Gitea issue");
        assert_eq!(
            gitea.action(),
            Action::new("close_issue")
                .with("target", "gitea")
                .with("repository", "o/r")
                .with("number", "4")
        );
        let asana = origin("1209876543210987", Some("asana"), &none).expect("an Asana task");
        assert_eq!(
            asana.action(),
            Action::new("post_comment")
                .with("target", "tracker")
                .with("task", "1209876543210987")
        );
    }

    #[test]
    fn the_built_in_conductor_contract_closes_issues_and_escalates_tracker_comments() {
        let contract = crate::policy::Contract::parse(
            "conductor-policy.json",
            crate::policy::CONDUCTOR_CONTRACT,
        )
        .expect("the built-in contract parses");
        let scope = crate::policy::Scope::new("/w", Some("executor/x"));
        let decide = |origin: Origin| {
            let action = origin.action();
            let (_, verdict) =
                crate::policy::judge(&contract, &crate::policy::Input::Request(&action), &scope);
            (verdict.decision, verdict.rule_id)
        };
        for origin in [
            Origin::Github {
                repository: "o/r".into(),
                number: 1,
            },
            Origin::Gitea {
                repository: "o/r".into(),
                number: 1,
            },
        ] {
            assert_eq!(
                decide(origin),
                (Decision::Approve, Some("close-issue".to_string()))
            );
        }
        assert_eq!(
            decide(Origin::Asana { task: "12".into() }),
            (Decision::Escalate, Some("tracker-comment".to_string()))
        );
    }

    #[test]
    fn the_configured_spelling_and_the_hash_form_are_found_among_the_repositories() {
        let configured = vec!["MKowalski/Lumen-Browser".to_string()];
        assert_eq!(
            origin(
                "gitea:mkowalski:lumen-browser#3",
                Some("gitea"),
                &configured
            ),
            Some(Origin::Gitea {
                repository: "MKowalski/Lumen-Browser".into(),
                number: 3
            })
        );
        let long = format!("owner/{}", "n".repeat(130));
        let gid = crate::sources::github_issues::task_gid(&long, 9);
        assert!(gid.starts_with("gh:") && !gid.contains("owner:"), "{gid}");
        assert_eq!(origin(&gid, Some("github"), &[]), None, "unknown hash");
        assert_eq!(
            origin(&gid, Some("github"), std::slice::from_ref(&long)),
            Some(Origin::Github {
                repository: long.clone(),
                number: 9
            })
        );
    }

    #[test]
    fn other_tasks_and_malformed_gids_have_no_source_update() {
        let none: Vec<String> = Vec::new();
        for (gid, source) in [
            ("T-1", "plans"),
            ("G-1.a", "conductor"),
            ("1209876543210987", "plans"),
            ("gh:o:r#4", "plans"),
            ("gh:o:r#x", "github"),
            ("gh:o:r", "github"),
            ("gitea:o:r#4", "github"),
            ("gh:o:r#4", "gitea"),
            ("not-a-number", "asana"),
        ] {
            assert_eq!(
                origin(gid, Some(source), &none),
                None,
                "{gid} from {source}"
            );
        }
        assert_eq!(origin("gh:o:r#4", None, &none), None);
    }

    #[test]
    fn the_entry_names_the_task_run_commit_verification_and_source() {
        let task = task("gitea:o:r#4", "gitea", "Fix the tab strip");
        let run = run();
        let done = Completion {
            task: &task,
            run: &run,
            commit: Some("0123456789ab".into()),
            verification: vec!["`cargo test`: passed".into()],
            at: at(),
        };
        let text = entry(&done, Some("closed gitea:o:r#4"));
        assert!(text.starts_with("\n## "), "{text}");
        assert!(
            text.contains("· `gitea:o:r#4` · Fix the tab strip\n"),
            "{text}"
        );
        assert!(
            text.contains("- run 7, branch `executor/x-fix`, commit `0123456789ab`\n"),
            "{text}"
        );
        assert!(
            text.contains("- verification: `cargo test`: passed\n"),
            "{text}"
        );
        assert!(text.ends_with("- source: closed gitea:o:r#4\n"), "{text}");

        let bare = Completion {
            verification: Vec::new(),
            commit: None,
            ..done
        };
        let text = entry(&bare, None);
        assert!(
            text.contains("- run 7, branch `executor/x-fix`\n"),
            "{text}"
        );
        assert!(text.contains("- verification: none configured\n"), "{text}");
        assert!(!text.contains("- source:"), "{text}");
    }

    #[test]
    fn the_comment_says_which_run_and_commit_in_plain_text() {
        let task = task("1209876543210987", "asana", "Tab preview");
        let run = run();
        let done = Completion {
            task: &task,
            run: &run,
            commit: Some("0123456789ab".into()),
            verification: vec!["`true`: passed".into()],
            at: at(),
        };
        assert_eq!(
            comment_text(&done),
            "executor completed this task: run 7, branch executor/x-fix, commit 0123456789ab. Verification: true: passed."
        );
    }

    #[test]
    fn an_update_reads_back_from_its_detail() {
        let action = Origin::Asana { task: "12".into() }.action();
        let update = Update::new(&action, Some("done".into()));
        let detail = serde_json::to_string(&update).expect("serialises");
        assert_eq!(
            detail,
            r#"{"action":"post_comment","args":{"target":"tracker","task":"12"},"text":"done"}"#
        );
        let back: Update = serde_json::from_str(&detail).expect("reads back");
        assert_eq!(back, update);
        assert_eq!(back.describe("12"), "comment on Asana task 12");
        let close = Update::new(
            &Origin::Gitea {
                repository: "o/r".into(),
                number: 4,
            }
            .action(),
            None,
        );
        assert_eq!(close.describe("gitea:o:r#4"), "close gitea:o:r#4");
        assert!(!serde_json::to_string(&close)
            .expect("serialises")
            .contains("text"));
    }
}

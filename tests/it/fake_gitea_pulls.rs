//! The fake Gitea's pull requests, in the shapes of Gitea's swagger (`PullRequest`,
//! `CombinedStatus`, `CommitStatus`, `PullReview`, `PullReviewComment`, `Label`) as
//! `crates/executor-http/src/gitea/pulls.rs` notes them: `POST`/`GET /pulls` (a title starting `WIP:` or
//! `[WIP]` is a draft; a second open PR of one head is a `409`, as Gitea refuses it),
//! `GET /pulls/{n}`, `GET /commits/{ref}/status` (Gitea's combined state: `failure` or
//! `error` wins, then `pending`, then `success`; no status at all is `pending`), `GET`/`POST
//! /pulls/{n}/reviews`, `GET /pulls/{n}/reviews/{id}/comments`, `GET`/`POST /labels` and
//! `POST /issues/{n}/labels` (label ids only, as older servers take them).
//!
//! With git data ([`FakeGitea::serve_git`], a bare repository the runner pushes to), a PR's
//! head is its branch's tip there, read on every answer (so a push moves it, as on Gitea),
//! and a PR whose head branch is not there is refused with a `404`, as Gitea refuses it.
//! Without, the head is a sha made from the branch name. A review posted with `comments`
//! (`[{path, body, new_position}]`) carries those comments, on their lines.

use serde_json::{json, Value};

use super::*;

impl FakeGitea {
    /// The repository `OWNER/REPO` has its git data in the bare repository `git_dir`.
    pub fn serve_git(&self, git_dir: &std::path::Path) {
        self.shared.state().repo_mut(OWNER, REPO).git_dir = Some(git_dir.to_path_buf());
    }

    /// The head sha of PR `number` as Gitea shows it now.
    pub fn head_sha(&self, number: u64) -> Option<String> {
        let mut data = self.shared.state();
        let repo = data.repo_mut(OWNER, REPO);
        let pull = repo.pulls.get(&number)?;
        Some(current_head(repo, pull))
    }

    /// A comment by `login` on the conversation of issue or PR `number`.
    pub fn comment_as(&self, number: u64, login: &str, body: &str) {
        let mut data = self.shared.state();
        let at = data.tick();
        let id = data.new_id();
        let base = self.shared.base.clone();
        let repo = data.repo_mut(OWNER, REPO);
        let Some(issue) = repo.issues.get_mut(&number) else {
            return;
        };
        issue.comments.push(json!({
            "id": id,
            "html_url": format!("{base}/{OWNER}/{REPO}/pulls/{number}#issuecomment-{id}"),
            "pull_request_url": format!("{base}/{OWNER}/{REPO}/pulls/{number}"),
            "issue_url": "", "user": user_json(&base, login), "original_author": "",
            "original_author_id": 0, "body": body, "assets": [],
            "created_at": gitea_time(at), "updated_at": gitea_time(at),
        }));
        issue.updated_at = at;
    }

    /// PR `number` merged on Gitea: `merged`, and closed, as Gitea shows a merged PR.
    pub fn merge_pr(&self, number: u64) {
        let mut data = self.shared.state();
        let at = data.tick();
        let repo = data.repo_mut(OWNER, REPO);
        if let (Some(pull), Some(issue)) =
            (repo.pulls.get_mut(&number), repo.issues.get_mut(&number))
        {
            pull.merged = true;
            issue.closed = true;
            issue.closed_at = Some(at);
            issue.updated_at = at;
        }
    }

    /// PR `number` out of draft: its `WIP:` taken off, as its author does.
    pub fn mark_ready(&self, number: u64) {
        let mut data = self.shared.state();
        let at = data.tick();
        let repo = data.repo_mut(OWNER, REPO);
        if let Some(issue) = repo.issues.get_mut(&number) {
            let title = issue.title.clone();
            let bare = title
                .strip_prefix("WIP:")
                .or_else(|| title.strip_prefix("[WIP]"))
                .unwrap_or(&title);
            issue.title = bare.trim_start().to_string();
            issue.updated_at = at;
        }
    }

    /// How PR `number` was merged through the API: (head, `Do`, branch deleted).
    pub fn merged_as(&self, number: u64) -> Option<(String, String, bool)> {
        let mut data = self.shared.state();
        let repo = data.repo_mut(OWNER, REPO);
        repo.pulls.get(&number).and_then(|p| p.merged_as.clone())
    }

    /// PR `number` deleted by an administrator (Gitea can delete an issue or a PR): every
    /// call about it answers `404`.
    pub fn delete_pr(&self, number: u64) {
        let mut data = self.shared.state();
        let repo = data.repo_mut(OWNER, REPO);
        repo.pulls.remove(&number);
        repo.issues.remove(&number);
    }

    /// Every review comment of PR `number`, in the order they were made.
    pub fn review_comments(&self, number: u64) -> Vec<Value> {
        let mut data = self.shared.state();
        let repo = data.repo_mut(OWNER, REPO);
        repo.pulls
            .get(&number)
            .map(|p| p.reviews.iter().flat_map(|(_, c)| c.clone()).collect())
            .unwrap_or_default()
    }

    /// Sets the status `context` of commit `sha` to `state` (`pending`, `success`,
    /// `failure`, `error`), as a CI would post it.
    pub fn set_status(&self, sha: &str, context: &str, state: &str) {
        self.set_status_at(sha, context, state, None);
    }

    /// [`Self::set_status`] by a CI of its own, whose page for it is `target_url` (when
    /// `None`, Gitea Actions: the page of the commit's job that reports `context`).
    pub fn set_status_at(&self, sha: &str, context: &str, state: &str, target_url: Option<&str>) {
        let mut data = self.shared.state();
        let at = data.tick();
        let id = data.new_id();
        let base = self.shared.base.clone();
        let target_url = match target_url {
            Some(url) => url.to_owned(),
            None => super::actions::job_page(&mut data, &base, sha, context, state),
        };
        let repo = data.repo_mut(OWNER, REPO);
        let statuses = repo.statuses.entry(sha.to_owned()).or_default();
        statuses.retain(|s| s["context"] != context);
        statuses.push(json!({
            "id": id, "status": state, "context": context,
            "target_url": target_url,
            "description": format!("{context}: {state}"), "url": "",
            "creator": user_json(&base, "ci-bot"),
            "created_at": gitea_time(at), "updated_at": gitea_time(at),
        }));
    }

    /// The PRs of `OWNER/REPO` as `GET /pulls?state=all` would list them.
    pub fn pulls(&self) -> Vec<Value> {
        let mut data = self.shared.state();
        let base = self.shared.base.clone();
        data.repo_mut(OWNER, REPO);
        let key = (OWNER.to_lowercase(), REPO.to_lowercase());
        let repo = &data.repos[&key];
        repo.pulls
            .keys()
            .filter_map(|n| pull_json(&base, OWNER, REPO, repo, *n))
            .collect()
    }

    /// A review by `login` on PR `number` with one comment on `path` (`state`:
    /// `COMMENT`, `REQUEST_CHANGES`, …).
    /// The reviews PR `number` holds, as Gitea lists them.
    pub fn reviews(&self, number: u64) -> Vec<Value> {
        let mut data = self.shared.state();
        let repo = data.repo_mut(OWNER, REPO);
        repo.pulls
            .get(&number)
            .map(|p| p.reviews.iter().map(|(r, _)| r.clone()).collect())
            .unwrap_or_default()
    }

    pub fn add_review(&self, number: u64, login: &str, state: &str, comment: &str, path: &str) {
        let mut data = self.shared.state();
        let at = data.tick();
        let (review_id, comment_id) = (data.new_id(), data.new_id());
        let base = self.shared.base.clone();
        let repo = data.repo_mut(OWNER, REPO);
        let Some(pull) = repo.pulls.get_mut(&number) else {
            return;
        };
        let head = current_head_of(repo.git_dir.as_deref(), pull);
        let review = review_json(&base, review_id, login, state, "", &head, 1, at);
        let comment = json!({
            "id": comment_id, "body": comment, "user": user_json(&base, login),
            "resolver": null, "pull_request_review_id": review_id, "path": path,
            "commit_id": head, "original_commit_id": head,
            "diff_hunk": "@@ -1 +1 @@", "position": 1, "original_position": 0,
            "created_at": gitea_time(at), "updated_at": gitea_time(at),
            "html_url": format!("{base}/{OWNER}/{REPO}/pulls/{number}#issuecomment-{comment_id}"),
            "pull_request_url": format!("{base}/{OWNER}/{REPO}/pulls/{number}"),
        });
        pull.reviews.push((review, vec![comment]));
    }
}

#[allow(clippy::too_many_arguments)]
fn review_json(
    base: &str,
    id: u64,
    login: &str,
    state: &str,
    body: &str,
    commit: &str,
    comments: usize,
    at: DateTime<Utc>,
) -> Value {
    json!({
        "id": id, "user": user_json(base, login), "team": null, "state": state,
        "body": body, "commit_id": commit, "stale": false, "official": false,
        "dismissed": false, "comments_count": comments, "submitted_at": gitea_time(at),
        "updated_at": gitea_time(at),
        "html_url": format!("{base}/{OWNER}/{REPO}/pulls#pullrequestreview-{id}"),
        "pull_request_url": "",
    })
}

fn pull_json(base: &str, owner: &str, name: &str, repo: &FakeRepo, number: u64) -> Option<Value> {
    let issue = repo.issues.get(&number)?;
    let pull = repo.pulls.get(&number)?;
    let as_issue = issue_json(base, owner, name, repo, issue);
    let branch = |branch: &str, sha: &str| {
        json!({ "label": branch, "ref": branch, "sha": sha, "repo_id": repo.id,
                "repo": as_issue["repository"].clone() })
    };
    let title = issue.title.to_ascii_uppercase();
    Some(json!({
        "id": issue.id, "url": as_issue["url"], "number": number,
        "user": user_json(base, BOT), "title": issue.title, "body": issue.body,
        "labels": as_issue["labels"], "milestone": null, "assignee": null, "assignees": null,
        "requested_reviewers": null, "state": as_issue["state"], "draft":
            title.starts_with("WIP:") || title.starts_with("[WIP]"),
        "is_locked": false, "comments": issue.comments.len(),
        "html_url": format!("{base}/{owner}/{name}/pulls/{number}"),
        "diff_url": format!("{base}/{owner}/{name}/pulls/{number}.diff"),
        "patch_url": format!("{base}/{owner}/{name}/pulls/{number}.patch"),
        "mergeable": true, "merged": pull.merged, "merged_at": null,
        "merge_commit_sha": null, "merged_by": null, "allow_maintainer_edit": false,
        "base": branch(&pull.base, "0000000000000000000000000000000000000000"),
        "head": branch(&pull.head, &current_head(repo, pull)), "merge_base": "",
        "due_date": null, "created_at": as_issue["created_at"],
        "updated_at": as_issue["updated_at"], "closed_at": as_issue["closed_at"],
        "pin_order": 0,
    }))
}

/// The head of `pull` now: its branch's tip in the repository's git data, if it has some.
fn current_head(repo: &FakeRepo, pull: &FakePull) -> String {
    current_head_of(repo.git_dir.as_deref(), pull)
}

fn current_head_of(git_dir: Option<&std::path::Path>, pull: &FakePull) -> String {
    match git_dir {
        Some(dir) => branch_tip(dir, &pull.head).unwrap_or_else(|| pull.head_sha.clone()),
        None => pull.head_sha.clone(),
    }
}

/// The tip of `branch` in the bare repository `git_dir`.
fn branch_tip(git_dir: &std::path::Path, branch: &str) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("refs/heads/{branch}"))
        .output()
        .ok()?;
    let sha = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !sha.is_empty()).then_some(sha)
}

fn combined_state(statuses: &[Value]) -> &'static str {
    let states: Vec<&str> = statuses
        .iter()
        .filter_map(|s| s["status"].as_str())
        .collect();
    if states.is_empty()
        || states.contains(&"pending") && !states.iter().any(|s| matches!(*s, "failure" | "error"))
    {
        return "pending";
    }
    if states.iter().any(|s| matches!(*s, "failure" | "error")) {
        "failure"
    } else {
        "success"
    }
}

/// `POST …/pulls/{n}/merge` (`MergePullRequestOption`), as Gitea answers it: `405` for a PR
/// that is merged or closed already or still work in progress, `409` when
/// `head_commit_id` is not the head, else `200` with no body and the PR merged.
fn merge_pull(
    state: &mut StateData,
    base: &str,
    key: &(String, String),
    number: u64,
    body: &[u8],
) -> Reply {
    let Ok(form) = serde_json::from_slice::<Value>(body) else {
        return Reply::error(base, 422, "invalid MergePullRequestOption");
    };
    let at = state.tick();
    let repo = state.repos.get_mut(key).expect("the repository");
    let head = match repo.pulls.get(&number) {
        Some(pull) => current_head(repo, pull),
        None => return Reply::not_found(base),
    };
    let Some(issue) = repo.issues.get_mut(&number) else {
        return Reply::not_found(base);
    };
    let title = issue.title.to_ascii_uppercase();
    let pull = repo.pulls.get_mut(&number).expect("the pull");
    if pull.merged || issue.closed {
        return Reply::error(base, 405, "The PR is already merged or closed");
    }
    if title.starts_with("WIP:") || title.starts_with("[WIP]") {
        return Reply::error(base, 405, "The pull request is work in progress");
    }
    let wanted = form["head_commit_id"].as_str().unwrap_or("");
    if !wanted.is_empty() && wanted != head {
        return Reply::error(base, 409, "head out of date");
    }
    let how = form["Do"].as_str().unwrap_or("").to_string();
    if !matches!(how.as_str(), "merge" | "rebase" | "rebase-merge" | "squash") {
        return Reply::error(base, 422, "Do: not a merge style");
    }
    let delete = form["delete_branch_after_merge"].as_bool().unwrap_or(false);
    pull.merged = true;
    pull.merged_as = Some((head, how, delete));
    issue.closed = true;
    issue.closed_at = Some(at);
    issue.updated_at = at;
    Reply {
        status: 200,
        headers: Vec::new(),
        body: Vec::new(),
    }
}

/// The routes below `/repos/{o}/{r}/` the issue routes do not answer.
pub(super) fn route(
    state: &mut StateData,
    base: &str,
    key: &(String, String),
    method: &Method,
    rest: &[&str],
    _pairs: &[(String, String)],
    body: &[u8],
) -> Reply {
    let (owner, name) = (OWNER, REPO);
    let number = |text: &str| text.parse::<u64>().ok();
    match (method.clone(), rest) {
        (Method::POST, ["pulls"]) => create_pull(state, base, key, body),
        (Method::GET, ["pulls"]) => {
            let repo = &state.repos[key];
            let open: Vec<Value> = repo
                .pulls
                .keys()
                .filter(|n| repo.issues.get(n).is_some_and(|i| !i.closed))
                .filter_map(|n| pull_json(base, owner, name, repo, *n))
                .collect();
            Reply::json(200, &Value::Array(open))
        }
        (Method::GET, ["pulls", n]) => {
            match number(n).and_then(|n| pull_json(base, owner, name, &state.repos[key], n)) {
                Some(pull) => Reply::json(200, &pull),
                None => Reply::not_found(base),
            }
        }
        (Method::GET, ["commits", sha, "status"]) => {
            let statuses = state.repos[key]
                .statuses
                .get(*sha)
                .cloned()
                .unwrap_or_default();
            Reply::json(
                200,
                &json!({
                    "state": combined_state(&statuses), "sha": sha, "total_count": statuses.len(),
                    "statuses": statuses, "repository": null, "commit_url": "", "url": "",
                }),
            )
        }
        (Method::GET, ["pulls", n, "reviews"]) => {
            match number(n).and_then(|n| state.repos[key].pulls.get(&n)) {
                Some(pull) => Reply::json(
                    200,
                    &Value::Array(pull.reviews.iter().map(|(r, _)| r.clone()).collect()),
                ),
                None => Reply::not_found(base),
            }
        }
        (Method::GET, ["pulls", n, "reviews", id, "comments"]) => {
            let found = number(n)
                .and_then(|n| state.repos[key].pulls.get(&n))
                .and_then(|p| {
                    p.reviews
                        .iter()
                        .find(|(r, _)| Some(r["id"].as_u64().unwrap_or(0)) == number(id))
                });
            match found {
                Some((_, comments)) => Reply::json(200, &Value::Array(comments.clone())),
                None => Reply::not_found(base),
            }
        }
        (Method::POST, ["pulls", n, "merge"]) => match number(n) {
            Some(n) => merge_pull(state, base, key, n, body),
            None => Reply::not_found(base),
        },
        (Method::POST, ["pulls", n, "reviews"]) => match number(n) {
            Some(n) => create_review(state, base, key, n, body),
            None => Reply::not_found(base),
        },
        (Method::GET, ["labels"]) => {
            let labels: Vec<Value> = state.repos[key]
                .labels
                .iter()
                .map(|(id, name)| label_json(*id, name))
                .collect();
            Reply::json(200, &Value::Array(labels))
        }
        (Method::POST, ["labels"]) => {
            let Ok(form) = serde_json::from_slice::<Value>(body) else {
                return Reply::error(base, 422, "invalid JSON body");
            };
            let (Some(label), Some(_color)) = (form["name"].as_str(), form["color"].as_str())
            else {
                return Reply::error(base, 422, "[Name Color]: Required");
            };
            let id = state.label_id(owner, name, label);
            Reply::json(201, &label_json(id, label))
        }
        (Method::POST, ["issues", n, "labels"]) => match number(n) {
            Some(n) => add_labels(state, base, key, n, body),
            None => Reply::not_found(base),
        },
        _ => Reply::not_found(base),
    }
}

fn label_json(id: u64, name: &str) -> Value {
    json!({ "id": id, "name": name, "exclusive": false, "is_archived": false,
            "color": "5319e7", "description": "", "url": "" })
}

fn create_pull(state: &mut StateData, base: &str, key: &(String, String), body: &[u8]) -> Reply {
    let Ok(form) = serde_json::from_slice::<Value>(body) else {
        return Reply::error(base, 422, "invalid JSON body");
    };
    let field = |name: &str| form[name].as_str().map(str::to_owned);
    let (Some(head), Some(base_branch), Some(title)) =
        (field("head"), field("base"), field("title"))
    else {
        return Reply::error(base, 422, "[Head Base Title]: Required");
    };
    if form.get("draft").is_some() {
        return Reply::error(base, 422, "unknown field draft: Gitea has none");
    }
    let repo = &state.repos[key];
    if let Some(dir) = &repo.git_dir {
        if branch_tip(dir, &head).is_none() {
            return Reply::error(base, 404, &format!("The head branch {head} does not exist"));
        }
    }
    let taken = repo
        .pulls
        .iter()
        .any(|(n, p)| p.head == head && repo.issues.get(n).is_some_and(|i| !i.closed));
    if taken {
        return Reply::error(base, 409, "pull request already exists for these targets");
    }
    let seed = IssueSeed {
        title,
        body: field("body").unwrap_or_default(),
        labels: Vec::new(),
        assignees: Vec::new(),
        closed: false,
        pull: true,
    };
    let number = add_issue(state, OWNER, REPO, seed);
    let head_sha = head_sha_of(&head);
    state.repo_mut(OWNER, REPO).pulls.insert(
        number,
        FakePull {
            head,
            head_sha,
            base: base_branch,
            merged: false,
            merged_as: None,
            reviews: Vec::new(),
        },
    );
    match pull_json(base, OWNER, REPO, &state.repos[key], number) {
        Some(pull) => Reply::json(201, &pull),
        None => Reply::not_found(base),
    }
}

/// The sha the fake gives a branch's head (the fake holds no git data).
fn head_sha_of(branch: &str) -> String {
    let mut sum: u64 = 1469598103934665603;
    for b in branch.bytes() {
        sum = (sum ^ u64::from(b)).wrapping_mul(1099511628211);
    }
    format!("{sum:016x}{sum:016x}{:08x}", sum as u32)
}

fn create_review(
    state: &mut StateData,
    base: &str,
    key: &(String, String),
    number: u64,
    body: &[u8],
) -> Reply {
    let Ok(form) = serde_json::from_slice::<Value>(body) else {
        return Reply::error(base, 422, "invalid JSON body");
    };
    let event = form["event"].as_str().unwrap_or("");
    let state_name = match event {
        "COMMENT" => "COMMENT",
        "APPROVED" => "APPROVED",
        "REQUEST_CHANGES" => "REQUEST_CHANGES",
        _ => return Reply::error(base, 422, "unknown review event"),
    };
    let at = state.tick();
    let id = state.new_id();
    let text = form["body"].as_str().unwrap_or("");
    // `(path, new line, old line, body)`: Gitea takes the new line, else the old one.
    let lines: Vec<(String, u64, u64, String)> = form["comments"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|c| {
                    (
                        c["path"].as_str().unwrap_or("").to_owned(),
                        c["new_position"].as_u64().unwrap_or(0),
                        c["old_position"].as_u64().unwrap_or(0),
                        c["body"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if lines
        .iter()
        .any(|(path, new, old, body)| path.is_empty() || *new + *old == 0 || body.is_empty())
    {
        return Reply::error(base, 422, "a review comment needs path, body and a line");
    }
    let ids: Vec<u64> = lines.iter().map(|_| state.new_id()).collect();
    let Some(repo) = state.repos.get_mut(key) else {
        return Reply::not_found(base);
    };
    let Some(pull) = repo.pulls.get_mut(&number) else {
        return Reply::not_found(base);
    };
    let head = current_head_of(repo.git_dir.as_deref(), pull);
    let comments: Vec<Value> = lines
        .iter()
        .zip(&ids)
        .map(|((path, new, old, body), comment_id)| {
            let old = if *new > 0 { 0 } else { *old };
            json!({
                "id": comment_id, "body": body, "user": user_json(base, BOT),
                "resolver": null, "pull_request_review_id": id, "path": path,
                "commit_id": head, "original_commit_id": head,
                "diff_hunk": "@@ -1 +1 @@", "position": new, "original_position": old,
                "created_at": gitea_time(at), "updated_at": gitea_time(at),
                "html_url": format!("{base}/{OWNER}/{REPO}/pulls/{number}#issuecomment-{comment_id}"),
                "pull_request_url": format!("{base}/{OWNER}/{REPO}/pulls/{number}"),
            })
        })
        .collect();
    let review = review_json(base, id, BOT, state_name, text, &head, comments.len(), at);
    pull.reviews.push((review.clone(), comments));
    Reply::json(200, &review)
}

fn add_labels(
    state: &mut StateData,
    base: &str,
    key: &(String, String),
    number: u64,
    body: &[u8],
) -> Reply {
    let Ok(form) = serde_json::from_slice::<Value>(body) else {
        return Reply::error(base, 422, "invalid JSON body");
    };
    let Some(ids) = form["labels"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect::<Vec<_>>())
    else {
        return Reply::error(base, 422, "[Labels]: Required");
    };
    let at = state.tick();
    let repo = state.repos.get_mut(key).expect("checked");
    if ids
        .iter()
        .any(|id| !repo.labels.iter().any(|(l, _)| l == id))
    {
        return Reply::error(base, 422, "label does not exist");
    }
    let Some(issue) = repo.issues.get_mut(&number) else {
        return Reply::not_found(base);
    };
    for id in ids {
        if !issue.labels.contains(&id) {
            issue.labels.push(id);
        }
    }
    issue.updated_at = at;
    let labels: Vec<Value> = issue
        .labels
        .iter()
        .filter_map(|id| repo.labels.iter().find(|(l, _)| l == id))
        .map(|(id, name)| label_json(*id, name))
        .collect();
    Reply::json(200, &Value::Array(labels))
}

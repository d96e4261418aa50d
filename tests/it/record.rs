//! The record step through the binary: a task from an issue source, taken in by `run --once`,
//! approved and worked by a command worker to completion, leaves its entry in the build log
//! and gets its issue closed on the fake Gitea or the fake GitHub; an Asana task's comment
//! waits for the owner and is posted exactly once after `executor decide … approve`; a deny
//! rule in the conductor contract leaves the issue open, and the entry says so.

use serde_json::Value;

use crate::fake_asana::{FakeAsana, TaskSeed, TOKEN as ASANA_TOKEN};
use crate::fake_gitea::{FakeGitea, OWNER, REPO, TOKEN as GITEA_TOKEN};
use crate::fake_github::{FakeGithub, BOT_LOGIN, TOKEN as GITHUB_TOKEN};
use crate::runner::{workspace, EXAMPLE_WORKER};
use crate::support::{git, Workspace};

/// A workspace whose runner works on `repo/` with the example worker, verification `true`
/// and the build log `BUILD_LOG.md`, plus `sections` (appended to the config).
fn record_workspace(sections: &str) -> Workspace {
    let ws = workspace(&[EXAMPLE_WORKER], &["true"], "");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!(
        "{config}\n[conductor]\nbuild_log = \"BUILD_LOG.md\"\n{sections}"
    ));
    ws
}

fn gitea_workspace(gitea: &FakeGitea) -> Workspace {
    let mut ws = record_workspace(&format!(
        "\n[sources.gitea_issues]\napi_url = \"{}\"\ntoken_env = \"TEST_GITEA_TOKEN\"\nrepositories = [\"{OWNER}/{REPO}\"]\nlabels = [\"executor\"]\n",
        gitea.url()
    ));
    ws.env.push(("TEST_GITEA_TOKEN".into(), GITEA_TOKEN.into()));
    ws
}

/// `run --once`, asserted to succeed; its stderr.
fn run_once(ws: &Workspace) -> String {
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// Takes the source's task in, approves it and works it to completion: the `show --json`
/// of the task afterwards, and the last pass's stderr.
fn take_in_and_work(ws: &Workspace, gid: &str) -> (Value, String) {
    run_once(ws);
    ws.ok(&["go", gid]);
    let stderr = run_once(ws);
    let shown = ws.json(&["show", gid, "--json"]);
    assert_eq!(shown["task"]["status"], "done", "{stderr}");
    assert_eq!(shown["runs"][0]["state"], "complete", "{stderr}");
    (shown, stderr)
}

fn build_log(ws: &Workspace) -> String {
    std::fs::read_to_string(ws.path().join("BUILD_LOG.md")).expect("the build log")
}

/// The short commit the run's branch ends at, as the entry names it.
fn run_commit(ws: &Workspace, shown: &Value) -> String {
    let branch = shown["runs"][0]["branch_name"].as_str().expect("a branch");
    git(
        &ws.path().join("repo"),
        &["rev-parse", "--short=12", branch],
    )
}

/// The record step's decisions on the task (role `conductor`).
fn conductor_decisions(shown: &Value) -> Vec<Value> {
    shown["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .filter(|d| d["role"] == "conductor")
        .cloned()
        .collect()
}

#[test]
fn a_completed_gitea_issue_task_is_logged_and_its_issue_closed() {
    let gitea = FakeGitea::start();
    let number = gitea.add_issue("Tab preview sticks", "Steps: hover.", &["executor"]);
    let ws = gitea_workspace(&gitea);
    let gid = format!("gitea:{OWNER}:{REPO}#{number}");

    let (shown, _) = take_in_and_work(&ws, &gid);

    let log = build_log(&ws);
    assert!(log.starts_with("# Build log\n"), "{log}");
    assert!(
        log.contains(&format!("· `{gid}` · Tab preview sticks\n")),
        "{log}"
    );
    let run = shown["runs"][0]["id"].as_i64().expect("run id");
    let commit = run_commit(&ws, &shown);
    assert!(log.contains(&format!("- run {run}, branch `")), "{log}");
    assert!(log.contains(&format!(", commit `{commit}`")), "{log}");
    assert!(log.contains("- verification: `true`: passed\n"), "{log}");
    assert!(log.contains(&format!("- source: closed {gid}\n")), "{log}");

    let issue = gitea.issue(number).expect("the issue");
    assert_eq!(issue["state"], "closed", "{issue}");
    let patches: Vec<_> = gitea
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert_eq!(patches.len(), 1, "{patches:?}");
    assert!(patches[0]
        .path
        .ends_with(&format!("/repos/{OWNER}/{REPO}/issues/{number}")));
    let body: Value = serde_json::from_str(&patches[0].body).expect("a JSON body");
    assert_eq!(body, serde_json::json!({ "state": "closed" }));

    let decisions = conductor_decisions(&shown);
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(decisions[0]["action"], "close_issue");
    assert_eq!(decisions[0]["decision"], "approve");
    assert_eq!(decisions[0]["rule_id"], "close-issue");
    assert_eq!(decisions[0]["run_id"], run);
}

#[test]
fn a_completed_github_issue_task_is_logged_and_its_issue_closed() {
    let github = FakeGithub::start_empty();
    let number = github.add_issue("Menu bar flicker", "It flickers.", &["executor"], None);
    let ws = workspace(&[EXAMPLE_WORKER], &["true"], "");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    let config = config.replacen(
        "[forge]\n",
        &format!(
            "[forge]\napi_url = \"{}\"\ntoken_env = \"TEST_GITHUB_TOKEN\"\n",
            github.url()
        ),
        1,
    );
    ws.write_config(&format!(
        "{config}\n[conductor]\nbuild_log = \"BUILD_LOG.md\"\n\n[sources.github_issues]\nrepositories = [\"{}/{}\"]\nlabels = [\"executor\"]\n",
        crate::fake_github::OWNER,
        crate::fake_github::REPO
    ));
    let mut ws = ws;
    ws.env
        .push(("TEST_GITHUB_TOKEN".into(), GITHUB_TOKEN.into()));
    let gid = format!(
        "gh:{}:{}#{number}",
        crate::fake_github::OWNER,
        crate::fake_github::REPO
    );

    let (shown, _) = take_in_and_work(&ws, &gid);

    let log = build_log(&ws);
    assert!(
        log.contains(&format!("· `{gid}` · Menu bar flicker\n")),
        "{log}"
    );
    assert!(
        log.contains(&format!(", commit `{}`", run_commit(&ws, &shown))),
        "{log}"
    );
    assert!(log.contains("- verification: `true`: passed\n"), "{log}");
    assert!(log.contains(&format!("- source: closed {gid}\n")), "{log}");

    let issue = github.issue(number).expect("the issue");
    assert_eq!(issue["state"], "closed", "{issue}");
    assert_eq!(issue["state_reason"], "completed", "{issue}");
    assert_eq!(issue["closed_by"]["login"], BOT_LOGIN, "{issue}");
    let patches: Vec<_> = github
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert_eq!(patches.len(), 1, "{patches:?}");
    let body: Value = serde_json::from_str(&patches[0].body).expect("a JSON body");
    assert_eq!(body, serde_json::json!({ "state": "closed" }));
    assert_eq!(
        conductor_decisions(&shown)[0]["decision"],
        "approve",
        "{shown}"
    );
}

#[test]
fn an_asana_comment_waits_for_the_owner_and_is_posted_once_when_approved() {
    let asana = FakeAsana::start_empty();
    let backlog = asana.seed_sections("Backlog", &[1], TaskSeed::numbered);
    let sections = backlog
        .sections
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let mut ws = record_workspace(&format!(
        "\n[sources.asana]\napi_url = \"{}\"\ntoken_env = \"ASANA_TEST_TOKEN\"\nsections = [{sections}]\n",
        asana.url()
    ));
    ws.env.push(("ASANA_TEST_TOKEN".into(), ASANA_TOKEN.into()));
    let gid = backlog.tasks[0].clone();

    let (shown, _) = take_in_and_work(&ws, &gid);
    let run = shown["runs"][0]["id"].as_i64().expect("run id");

    // Nothing posted yet: the owner's table escalates a tracker comment.
    assert!(asana.stories(&gid).is_empty());
    let pending = ws.json(&["escalations", "--json"]);
    let pending = pending.as_array().expect("a list");
    assert_eq!(pending.len(), 1, "{pending:?}");
    let escalation = &pending[0];
    assert_eq!(escalation["role"], "conductor");
    assert_eq!(escalation["action"], "post_comment");
    assert_eq!(escalation["rule_id"], "tracker-comment");
    assert_eq!(escalation["task_gid"], gid.as_str());
    assert_eq!(escalation["run_id"], run);
    let detail: Value =
        serde_json::from_str(escalation["detail"].as_str().expect("a detail")).expect("JSON");
    assert_eq!(detail["args"]["target"], "tracker");
    assert_eq!(detail["args"]["task"], gid.as_str());
    let text = detail["text"]
        .as_str()
        .expect("the comment's text")
        .to_string();
    assert!(
        text.starts_with(&format!("executor completed this task: run {run}")),
        "{text}"
    );
    let id = escalation["id"].as_i64().expect("an id").to_string();
    let log = build_log(&ws);
    assert!(
        log.contains(&format!(
            "- source: `comment on Asana task {gid}` waits for the owner (escalation {id}"
        )),
        "{log}"
    );

    ws.ok(&["decide", &id, "approve"]);
    let stderr = run_once(&ws);
    assert!(
        stderr.contains("record step: took the owner's answer to 1 escalation(s)"),
        "{stderr}"
    );
    let stories = asana.stories(&gid);
    assert_eq!(stories.len(), 1, "{stories:?}");
    assert_eq!(stories[0]["text"], text.as_str());
    let log = build_log(&ws);
    assert!(
        log.contains(&format!(
            "- source: commented on Asana task {gid}, as the owner approved (escalation {id})"
        )),
        "{log}"
    );
    assert!(ws
        .json(&["escalations", "--json"])
        .as_array()
        .expect("a list")
        .is_empty());

    // Taken once: another pass posts nothing more.
    let stderr = run_once(&ws);
    assert!(!stderr.contains("record step: took"), "{stderr}");
    assert_eq!(asana.stories(&gid).len(), 1);
    let posts = asana
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/stories"))
        .count();
    assert_eq!(posts, 1);
    assert_eq!(
        ws.json(&["show", &gid, "--json"])["runs"][0]["state"],
        "complete"
    );
}

#[test]
fn a_deny_rule_for_close_issue_leaves_the_issue_open_and_the_entry_says_so() {
    let gitea = FakeGitea::start();
    let number = gitea.add_issue("Tab preview sticks", "", &["executor"]);
    let ws = gitea_workspace(&gitea);
    let policy = ws.path().join("roles/conductor-policy.json");
    let contract = std::fs::read_to_string(&policy).expect("the conductor contract");
    let approve = r#""action": "close_issue", "decision": "approve", "why": "the work is integrated; closing its issue is reversible""#;
    assert!(contract.contains(approve), "{contract}");
    std::fs::write(
        &policy,
        contract.replace(
            approve,
            r#""action": "close_issue", "decision": "deny", "why": "the owner closes issues""#,
        ),
    )
    .expect("write the contract");
    let gid = format!("gitea:{OWNER}:{REPO}#{number}");

    let (shown, _) = take_in_and_work(&ws, &gid);

    assert_eq!(gitea.issue(number).expect("the issue")["state"], "open");
    assert!(gitea.requests().iter().all(|r| r.method != "PATCH"));
    let log = build_log(&ws);
    assert!(
        log.contains(&format!(
            "- source: not done: rule close-issue denies `close {gid}` (the owner closes issues)\n"
        )),
        "{log}"
    );
    let decisions = conductor_decisions(&shown);
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(decisions[0]["decision"], "deny");
    assert!(ws
        .json(&["escalations", "--json"])
        .as_array()
        .expect("a list")
        .is_empty());
}

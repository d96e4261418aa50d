//! The policy's acceptance tests: the owner's table (docs/design.md §6) through every entry
//! point, the adversarial set in `testdata/adversarial.jsonl`, never-panic properties, and the
//! decision rate.
//!
//! Each adversarial line holds one input (`request`, `hook`, `raw_hook` or `codex`), the run's
//! branch and the expected decision. `$WT` is the run's worktree and `$ROOT` the folder around
//! it, laid out on disk in a tempdir: `$ROOT/outside/`, `$WT/src/`, `$WT/sub/`, and symlinks
//! `$WT/escape -> $ROOT/outside`, `$WT/dangling -> $ROOT/outside/new` (which does not exist),
//! `$WT/sub/up -> ../..`. In text, `<BIG>` becomes 70,000 characters and `<FF>` the byte 0xFF.
//! A line with `"confined": true` is judged as for a worker inside the wall; the others in
//! the strict (unconfined) posture.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;

const WORKER: &str = crate::policy::WORKER_CONTRACT;

fn worker() -> Contract {
    Contract::parse("roles/worker-policy.json", WORKER).unwrap_or_else(|e| panic!("{e}"))
}

/// One parsed worker contract for the property tests (thousands of cases).
fn shared_worker() -> &'static Contract {
    static C: std::sync::OnceLock<Contract> = std::sync::OnceLock::new();
    C.get_or_init(worker)
}

/// The tempdir layout described above; returns (root, worktree), symlinks resolved.
fn layout() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = resolve_on_disk(dir.path());
    let wt = root.join("wt");
    for d in [wt.join("src"), wt.join("sub"), root.join("outside")] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::os::unix::fs::symlink(root.join("outside"), wt.join("escape")).expect("symlink");
    std::os::unix::fs::symlink(root.join("outside/new"), wt.join("dangling")).expect("symlink");
    std::os::unix::fs::symlink("../..", wt.join("sub/up")).expect("symlink");
    // A linked worktree with the run's branch checked out, as the runner makes it.
    let git_dir = root.join("repo.git/worktrees/wt");
    std::fs::create_dir_all(&git_dir).expect("mkdir");
    std::fs::write(git_dir.join("HEAD"), "ref: refs/heads/executor/run-1\n").expect("HEAD");
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", git_dir.display())).expect(".git");
    (dir, root, wt)
}

fn hook(tool: &str, input: Value, cwd: &Path) -> Vec<u8> {
    let v = json!({
        "session_id": "s", "hook_event_name": "PreToolUse", "tool_name": tool,
        "tool_input": input, "cwd": cwd, "tool_use_id": "toolu_1"
    });
    serde_json::to_vec(&v).expect("json")
}

fn bash(cmd: &str, cwd: &Path) -> Vec<u8> {
    hook("Bash", json!({ "command": cmd }), cwd)
}

fn exec(argv: &[&str]) -> CodexApproval {
    CodexApproval::Exec {
        command: argv.iter().map(|s| s.to_string()).collect(),
        cwd: None,
    }
}

/// Decides one input for the run `executor/run-1` in a fresh layout.
struct Table {
    _dir: tempfile::TempDir,
    wt: PathBuf,
    contract: Contract,
}

impl Table {
    fn new() -> Self {
        let (dir, _root, wt) = layout();
        Table {
            _dir: dir,
            wt,
            contract: worker(),
        }
    }

    fn scope(&self) -> Scope {
        Scope::new(&self.wt, Some("executor/run-1"))
    }

    fn judge(&self, input: Input<'_>) -> Verdict {
        judge(&self.contract, &input, &self.scope()).1
    }

    fn request(&self, kind: &str, args: &[(&str, &str)]) -> Verdict {
        let a = Action::from_request(kind, args.iter().copied());
        self.judge(Input::Request(&a))
    }

    fn hook(&self, bytes: &[u8]) -> Verdict {
        self.judge(Input::ClaudeHook(bytes))
    }

    fn codex(&self, approval: &CodexApproval) -> Verdict {
        self.judge(Input::Codex(approval))
    }
}

fn assert_verdict(v: &Verdict, decision: Decision, rule: &str) {
    assert_eq!(
        (v.decision, v.rule_id.as_deref()),
        (decision, Some(rule)),
        "{v:?}"
    );
}

// ---- the owner's table, one test per row, through every entry point ----

#[test]
fn table_create_worktree_is_approved() {
    let t = Table::new();
    assert_verdict(
        &t.request("create_worktree", &[("branch", "executor/run-1")]),
        Decision::Approve,
        "worktree-create",
    );
    // From a shell the new worktree's folder is also a write, judged by where it lands.
    let v = t.hook(&bash(
        "git worktree add .worktrees/x -b executor/run-1-b",
        &t.wt,
    ));
    assert_eq!(v.decision, Decision::Approve, "{v:?}");
    let v = t.codex(&exec(&["git", "worktree", "add", ".worktrees/x"]));
    assert_eq!(v.decision, Decision::Approve, "{v:?}");
}

#[test]
fn table_build_and_tests_are_approved() {
    let t = Table::new();
    assert_verdict(&t.request("run_build", &[]), Decision::Approve, "build");
    assert_verdict(
        &t.request("run_tests", &[("scheme", "macOS UI Tests CI")]),
        Decision::Approve,
        "tests",
    );
    assert_verdict(
        &t.hook(&bash("cargo build --release", &t.wt)),
        Decision::Approve,
        "build",
    );
    assert_verdict(
        &t.hook(&bash("cargo test --lib", &t.wt)),
        Decision::Approve,
        "tests",
    );
    assert_verdict(
        &t.codex(&exec(&["/bin/bash", "-lc", "npm run build"])),
        Decision::Approve,
        "build",
    );
    assert_verdict(
        &t.codex(&exec(&["pytest", "-q"])),
        Decision::Approve,
        "tests",
    );
}

#[test]
fn table_draft_pr_is_approved() {
    let t = Table::new();
    assert_verdict(
        &t.request("open_draft_pr", &[]),
        Decision::Approve,
        "draft-pr",
    );
    assert_verdict(
        &t.hook(&bash("gh pr create --draft --title x --body y", &t.wt)),
        Decision::Approve,
        "draft-pr",
    );
    assert_verdict(
        &t.codex(&exec(&["gh", "pr", "create", "-d", "--fill"])),
        Decision::Approve,
        "draft-pr",
    );
}

#[test]
fn table_push_only_the_runs_own_branch() {
    let t = Table::new();
    assert_verdict(
        &t.request("push_branch", &[("branch", "executor/run-1")]),
        Decision::Approve,
        "push-own-branch-default-remote",
    );
    assert_verdict(
        &t.request("push_branch", &[("branch", "main")]),
        Decision::Deny,
        "push-other-branch",
    );
    assert_verdict(
        &t.hook(&bash("git push origin executor/run-1", &t.wt)),
        Decision::Approve,
        "push-own-branch",
    );
    assert_verdict(
        &t.hook(&bash("git push origin main", &t.wt)),
        Decision::Deny,
        "push-other-branch",
    );
    assert_verdict(
        &t.codex(&exec(&["git", "push", "-u", "origin", "executor/run-1"])),
        Decision::Approve,
        "push-own-branch",
    );
    assert_verdict(
        &t.codex(&exec(&["git", "push", "origin", "executor/run-2"])),
        Decision::Deny,
        "push-other-branch",
    );
}

#[test]
fn table_tracker_comment_escalates() {
    let t = Table::new();
    assert_verdict(
        &t.request("post_comment", &[("target", "tracker")]),
        Decision::Escalate,
        "tracker-comment",
    );
    let v = t.hook(&hook(
        "mcp__asana__asana_create_task_story",
        json!({"task_id": "1", "text": "hi"}),
        &t.wt,
    ));
    assert_verdict(&v, Decision::Escalate, "tracker-comment");
    let v = t.codex(&exec(&[
        "curl",
        "-X",
        "POST",
        "https://app.asana.com/api/1.0/tasks/1/stories",
        "-d",
        "text=hi",
    ]));
    assert_verdict(&v, Decision::Escalate, "tracker-comment");
}

#[test]
fn table_merge_always_escalates() {
    let t = Table::new();
    assert_verdict(
        &t.request("merge_pr", &[("pr", "12")]),
        Decision::Escalate,
        "merge",
    );
    assert_verdict(
        &t.hook(&bash("gh pr merge 12 --squash", &t.wt)),
        Decision::Escalate,
        "merge",
    );
    assert_verdict(
        &t.codex(&exec(&["gh", "pr", "merge", "12"])),
        Decision::Escalate,
        "merge",
    );
}

#[test]
fn table_modifying_files_outside_the_worktree_is_denied() {
    let t = Table::new();
    assert_verdict(
        &t.request("modify_files", &[("path", "../elsewhere/file")]),
        Decision::Deny,
        "outside-worktree",
    );
    let v = t.hook(&hook(
        "Edit",
        json!({"file_path": "../elsewhere/file", "old_string": "a", "new_string": "b"}),
        &t.wt,
    ));
    assert_verdict(&v, Decision::Deny, "outside-worktree");
    let v = t.codex(&CodexApproval::Patch {
        changes: vec![(PathBuf::from("/etc/passwd"), ChangeKind::Update)],
    });
    assert_verdict(&v, Decision::Deny, "outside-worktree");
    // And inside is fine.
    let v = t.hook(&hook(
        "Write",
        json!({"file_path": t.wt.join("src/a.rs"), "content": ""}),
        &t.wt,
    ));
    assert_verdict(&v, Decision::Approve, "inside-worktree");
}

#[test]
fn table_scope_expansion_is_denied_and_notifies() {
    // Only a worker message names a scope expansion: no tool call is one.
    let t = Table::new();
    let v = t.request("scope_expansion", &[]);
    assert_verdict(&v, Decision::Deny, "scope-expansion");
    assert!(v.notify);
}

// ---- the adversarial set ----

fn fill(text: &str, root: &Path, wt: &Path) -> String {
    text.replace("$WT", &wt.to_string_lossy())
        .replace("$ROOT", &root.to_string_lossy())
        .replace("<BIG>", &"a".repeat(70_000))
}

fn decide_case(line: &Value, contract: &Contract, root: &Path, wt: &Path) -> Verdict {
    let branch = line["run_branch"].as_str();
    let confined = line["confined"].as_bool().unwrap_or(false);
    let scope = Scope::new(wt, branch).with_confined(confined);
    if let Some(r) = line.get("request") {
        let args: Vec<(String, String)> = r["args"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), fill(v.as_str().unwrap_or_default(), root, wt)))
                    .collect()
            })
            .unwrap_or_default();
        let a = Action::from_request(r["kind"].as_str().unwrap_or_default(), args);
        return judge(contract, &Input::Request(&a), &scope).1;
    }
    if let Some(h) = line.get("hook") {
        let text = fill(&h.to_string(), root, wt);
        return judge(contract, &Input::ClaudeHook(text.as_bytes()), &scope).1;
    }
    if let Some(raw) = line.get("raw_hook").and_then(Value::as_str) {
        let text = fill(raw, root, wt);
        let mut bytes = Vec::new();
        for (i, part) in text.split("<FF>").enumerate() {
            if i > 0 {
                bytes.push(0xFF);
            }
            bytes.extend_from_slice(part.as_bytes());
        }
        return judge(contract, &Input::ClaudeHook(&bytes), &scope).1;
    }
    if let Some(c) = line.get("codex") {
        let text = fill(&c.to_string(), root, wt);
        let approval =
            CodexApproval::from_json(text.as_bytes()).unwrap_or_else(|e| panic!("{e}: {text}"));
        return judge(contract, &Input::Codex(&approval), &scope).1;
    }
    panic!("a case without an input: {line}");
}

#[test]
fn adversarial_requests_get_no_wrong_decision() {
    let (_dir, root, wt) = layout();
    let contract = worker();
    let data = include_str!("testdata/adversarial.jsonl");
    let mut failures = Vec::new();
    let mut count = 0;
    for (n, line) in data.lines().enumerate() {
        let line: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        let expect = match line["expect"].as_str() {
            Some("approve") => Decision::Approve,
            Some("escalate") => Decision::Escalate,
            Some("deny") => Decision::Deny,
            other => panic!("line {}: expect {other:?}", n + 1),
        };
        let first = decide_case(&line, &contract, &root, &wt);
        let again = decide_case(&line, &contract, &root, &wt);
        // Shown with --nocapture: which rule decided each case.
        println!(
            "{:>3} {:<9} {:<32} {}",
            n + 1,
            first.decision,
            first.rule_id.as_deref().unwrap_or("(default)"),
            line["name"]
        );
        assert_eq!(first, again, "line {}: unstable", n + 1);
        if first.decision != expect {
            let wrong_approval = if first.decision == Decision::Approve {
                "WRONG APPROVAL "
            } else {
                ""
            };
            failures.push(format!(
                "line {} {:?}: {wrong_approval}expected {expect}, got {} ({:?}: {})",
                n + 1,
                line["name"].as_str().unwrap_or_default(),
                first.decision,
                first.rule_id,
                first.why
            ));
        }
        count += 1;
    }
    assert!(
        count >= 60,
        "the set must hold at least 60 requests, has {count}"
    );
    assert!(
        failures.is_empty(),
        "{} of {count} wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---- commands that can start processes without bound ----

#[test]
fn a_fork_bomb_or_a_backgrounding_loop_is_approved_only_inside_the_wall_with_the_cap_held() {
    let t = Table::new();
    let storms = [
        ":(){ :|:& };:",
        "bomb() { bomb | bomb & }; bomb",
        "function f { f | f & }; f",
        "while true; do sleep 1000 & done",
        "for i in $(seq 1 100000); do sleep 1000 & done",
    ];
    let postures = [
        (false, false, Decision::Escalate),
        (false, true, Decision::Escalate),
        (true, false, Decision::Escalate),
        (true, true, Decision::Approve),
    ];
    for storm in storms {
        for (confined, capped, want) in postures {
            let scope = t.scope().with_confined(confined).with_process_cap(capped);
            let (actions, v) = judge(&t.contract, &Input::ClaudeHook(&bash(storm, &t.wt)), &scope);
            assert!(
                actions.iter().any(|a| a.kind == "spawn_unbounded"),
                "{storm}: {actions:?}"
            );
            assert_eq!(
                v.decision, want,
                "{storm} (confined {confined}, cap {capped}): {v:?}"
            );
        }
    }
    // A bounded background job stays an everyday command in the strict posture.
    let v = t.hook(&bash("cargo build --release & wait", &t.wt));
    assert_eq!(v.decision, Decision::Approve, "{v:?}");
}

// ---- HEAD, the base branch, the web tools ----

#[test]
fn pushing_head_pushes_the_runs_branch_only_while_it_is_checked_out_here() {
    let t = Table::new();
    for cmd in ["git push origin HEAD", "git push -u origin HEAD"] {
        assert_verdict(
            &t.hook(&bash(cmd, &t.wt)),
            Decision::Approve,
            "push-own-branch",
        );
    }
    let v = t.hook(&bash("cd src && git push origin HEAD", &t.wt));
    assert_eq!(v.decision, Decision::Approve, "{v:?}");
    for cmd in [
        "git switch -c other && git push origin HEAD",
        "cd /tmp && git push origin HEAD",
        "git -C ../other push origin HEAD",
        "git push origin HEAD:main",
    ] {
        let v = t.hook(&bash(cmd, &t.wt));
        assert_ne!(v.decision, Decision::Approve, "{cmd}: {v:?}");
    }
    // Another branch checked out: HEAD is not the run's.
    let head = t.wt.join("../repo.git/worktrees/wt/HEAD");
    std::fs::write(&head, "ref: refs/heads/main\n").expect("HEAD");
    let v = t.hook(&bash("git push origin HEAD", &t.wt));
    assert_verdict(&v, Decision::Escalate, "push-unknown-branch");
}

#[test]
fn the_base_branch_of_the_scope_is_protected_like_main() {
    let t = Table::new();
    let scope = t.scope().with_base_branch(Some("develop"));
    let (_, v) = judge(
        &t.contract,
        &Input::ClaudeHook(&bash("git checkout develop", &t.wt)),
        &scope,
    );
    assert_verdict(&v, Decision::Escalate, "git-admin");
    let (_, v) = judge(
        &t.contract,
        &Input::ClaudeHook(&bash("git checkout develop", &t.wt)),
        &t.scope(),
    );
    assert_eq!(v.decision, Decision::Approve, "{v:?}");
    let v = t.hook(&bash("git checkout main", &t.wt));
    assert_verdict(&v, Decision::Escalate, "git-admin");
}

#[test]
fn web_tools_follow_the_walls_network() {
    let t = Table::new();
    let fetch = |url: &str| hook("WebFetch", json!({"url": url, "prompt": "x"}), &t.wt);
    let search = hook("WebSearch", json!({"query": "rust"}), &t.wt);
    let allow = WallNetwork::Allowlist(vec!["docs.rs:443".into(), "*.github.com:443".into()]);
    let walled = |n: Option<WallNetwork>| t.scope().with_confined(true).with_network(n);
    let decide =
        |bytes: &[u8], scope: &Scope| judge(&t.contract, &Input::ClaudeHook(bytes), scope).1;
    let on_list = fetch("https://docs.rs/serde");
    assert_verdict(
        &decide(&on_list, &walled(Some(allow.clone()))),
        Decision::Approve,
        "web-fetch-within-reach",
    );
    assert_verdict(
        &decide(
            &fetch("https://api.github.com/x"),
            &walled(Some(allow.clone())),
        ),
        Decision::Approve,
        "web-fetch-within-reach",
    );
    for (bytes, scope) in [
        (fetch("https://x.example/?d=1"), walled(Some(allow.clone()))),
        (fetch("http://docs.rs/serde"), walled(Some(allow.clone()))),
        (fetch("https://127.0.0.1/"), walled(Some(WallNetwork::Host))),
        (on_list.clone(), walled(Some(WallNetwork::None))),
        (on_list.clone(), walled(None)),
        // Unconfined, nothing but the policy stands between the worker and the network.
        (on_list.clone(), t.scope().with_network(Some(allow.clone()))),
        (on_list.clone(), t.scope()),
    ] {
        assert_verdict(&decide(&bytes, &scope), Decision::Escalate, "fetch");
    }
    assert_verdict(
        &decide(
            &fetch("https://x.example/"),
            &walled(Some(WallNetwork::Host)),
        ),
        Decision::Approve,
        "web-fetch-within-reach",
    );
    assert_verdict(
        &decide(&search, &walled(Some(allow))),
        Decision::Approve,
        "web-search-confined",
    );
    assert_verdict(
        &decide(&search, &walled(Some(WallNetwork::Host))),
        Decision::Approve,
        "web-search-confined",
    );
    for scope in [walled(Some(WallNetwork::None)), walled(None), t.scope()] {
        assert_verdict(&decide(&search, &scope), Decision::Escalate, "fetch");
    }
}

// ---- the posture: hostile and everyday corpora ----

/// A corpus line (`testdata/hostile.jsonl`, `testdata/everyday.jsonl`) as hook input:
/// `bash` for a Bash call, or `tool` with its `input`.
fn corpus_hook(line: &Value, root: &Path, wt: &Path) -> Vec<u8> {
    let (tool, input) = match line.get("bash").and_then(Value::as_str) {
        Some(cmd) => ("Bash", json!({ "command": fill(cmd, root, wt) })),
        None => {
            let input = fill(&line["input"].to_string(), root, wt);
            (
                line["tool"].as_str().unwrap_or_default(),
                serde_json::from_str(&input).unwrap_or(Value::Null),
            )
        }
    };
    hook(tool, input, wt)
}

fn corpus(text: &str) -> Vec<Value> {
    text.lines()
        .enumerate()
        .map(|(n, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("line {}: {e}", n + 1)))
        .collect()
}

/// Judges every line of `lines` with the built-in contract; returns (line, verdict).
fn judge_corpus(lines: &[Value], confined: bool) -> Vec<(Value, Verdict)> {
    let (_dir, root, wt) = layout();
    std::fs::create_dir_all(root.join("workspace")).expect("mkdir");
    let contract = worker();
    let scope = Scope::new(&wt, Some("executor/run-1")).with_confined(confined);
    lines
        .iter()
        .map(|line| {
            let bytes = corpus_hook(line, &root, &wt);
            let (_, v) = judge(&contract, &Input::ClaudeHook(&bytes), &scope);
            (line.clone(), v)
        })
        .collect()
}

fn approved_names(judged: &[(Value, Verdict)], which: impl Fn(&Value) -> bool) -> Vec<String> {
    judged
        .iter()
        .filter(|(line, v)| v.decision == Decision::Approve && which(line))
        .map(|(line, v)| {
            format!(
                "[{}] {} (rule {})",
                line["class"].as_str().unwrap_or_default(),
                line["name"].as_str().unwrap_or_default(),
                v.rule_id.as_deref().unwrap_or("(default)")
            )
        })
        .collect()
}

const HOSTILE: &str = include_str!("testdata/hostile.jsonl");
const EVERYDAY: &str = include_str!("testdata/everyday.jsonl");

/// The classes of point 2 of issue 14, part 5, and of issue 28 item 7 (from "fed program"
/// on): each must be in the hostile corpus.
const HOSTILE_CLASSES: &[&str] = &[
    "unknown program",
    "inline code",
    "indirection",
    "written and run",
    "git config or env",
    "git subcommand",
    "wrapper",
    "option specs",
    "specials and exfiltration",
    "secret read",
    "push merge pr comment network",
    "fed program",
    "reader paths",
    "git outside or base",
    "symlink patch",
    "environment dump",
    "process storm",
];

#[test]
fn hostile_calls_are_never_approved_for_an_unconfined_worker() {
    let lines = corpus(HOSTILE);
    assert!(lines.len() >= 260, "the corpus has {} calls", lines.len());
    for class in HOSTILE_CLASSES {
        assert!(
            lines.iter().any(|l| l["class"] == *class),
            "no call of the class {class}"
        );
    }
    let judged = judge_corpus(&lines, false);
    let approved = approved_names(&judged, |_| true);
    println!(
        "hostile, unconfined: {} calls, {} approved",
        lines.len(),
        approved.len()
    );
    assert!(
        approved.is_empty(),
        "{} of {} hostile calls approved:\n{}",
        approved.len(),
        lines.len(),
        approved.join("\n")
    );
    // Secret reads are denied, not merely escalated.
    let escalated_secrets: Vec<&str> = judged
        .iter()
        .filter(|(l, v)| l["class"] == "secret read" && v.decision != Decision::Deny)
        .map(|(l, _)| l["name"].as_str().unwrap_or_default())
        .collect();
    assert!(
        escalated_secrets.is_empty(),
        "secret reads not denied: {escalated_secrets:?}"
    );
}

#[test]
fn inside_the_wall_secrets_pushes_merges_and_the_network_keep_their_rules() {
    let lines = corpus(HOSTILE);
    let judged = judge_corpus(&lines, true);
    // `walled: false`: what the wall does not contain (secrets, pushes, merges, PRs,
    // comments, the network, services outliving the worker) is never approved.
    let approved = approved_names(&judged, |l| l["walled"] == false);
    let contained = approved_names(&judged, |l| l["walled"] == true).len();
    println!(
        "hostile, confined: {} calls, {contained} contained ones approved, {} others approved",
        lines.len(),
        approved.len()
    );
    assert!(
        approved.is_empty(),
        "approved inside the wall though it reaches past it:\n{}",
        approved.join("\n")
    );
    for (l, v) in &judged {
        if l["class"] == "secret read" {
            assert_eq!(v.decision, Decision::Deny, "{}", l["name"]);
        }
    }
}

#[test]
fn everyday_commands_are_approved_for_an_unconfined_worker() {
    let lines = corpus(EVERYDAY);
    assert!(lines.len() >= 125, "the corpus has {} calls", lines.len());
    let judged = judge_corpus(&lines, false);
    let not_approved: Vec<String> = judged
        .iter()
        .filter(|(_, v)| v.decision != Decision::Approve)
        .map(|(l, v)| {
            format!(
                "{} {} (rule {}: {})",
                v.decision,
                l["name"].as_str().unwrap_or_default(),
                v.rule_id.as_deref().unwrap_or("(default)"),
                v.why
            )
        })
        .collect();
    let escalated = judged
        .iter()
        .filter(|(_, v)| v.decision == Decision::Escalate)
        .count();
    let denied = judged
        .iter()
        .filter(|(_, v)| v.decision == Decision::Deny)
        .count();
    let rate = escalated as f64 / lines.len() as f64;
    println!(
        "everyday, unconfined: {} calls, {escalated} escalated ({:.1}%), {denied} denied\n{}",
        lines.len(),
        rate * 100.0,
        not_approved.join("\n")
    );
    assert_eq!(denied, 0, "{}", not_approved.join("\n"));
    assert!(
        rate <= 0.03,
        "{:.1}% escalated:\n{}",
        rate * 100.0,
        not_approved.join("\n")
    );
    // Inside the wall nothing everyday is worse.
    let confined = judge_corpus(&lines, true);
    for ((l, strict), (_, walled)) in judged.iter().zip(&confined) {
        assert!(walled.decision <= strict.decision, "{}", l["name"]);
    }
}

// ---- never panic ----

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn classify_and_decide_never_panic_on_any_command(cmd in "\\PC{0,200}") {
        let contract = shared_worker();
        let scope = Scope::new("/w/run", Some("executor/run-1"));
        let actions = classify::shell_command(&cmd, Path::new("/w/run"));
        let _ = contract.decide_all(&actions, &scope);
        let bytes = bash(&cmd, Path::new("/w/run"));
        let _ = contract.decide_all(&classify::claude_hook(&bytes, &scope), &scope);
    }

    #[test]
    fn shell_like_text_never_panics(cmd in "[a-z $(){}<>|&;'\"`\\\\\n#=*~./-]{0,120}") {
        let actions = classify::shell_command(&cmd, Path::new("/w/run"));
        let _ = shared_worker().decide_all(&actions, &Scope::new("/w/run", None));
    }

    #[test]
    fn arbitrary_bytes_as_hook_input_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let scope = Scope::new("/w/run", None);
        let _ = shared_worker().decide_all(&classify::claude_hook(&bytes, &scope), &scope);
    }

    #[test]
    fn nothing_unclassifiable_is_ever_approved(reason in "\\PC{0,40}") {
        let v = shared_worker().decide(&Action::unclassifiable(reason), &Scope::new("/w/run", None));
        prop_assert_ne!(v.decision, Decision::Approve);
    }
}

// ---- speed ----

/// Decisions per second over typical requests; the target is above 500,000 on one core in a
/// release build (`cargo test --release --lib policy::tests::decision_rate -- --ignored
/// --nocapture`).
#[test]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
fn decision_rate() {
    let contract = worker();
    let scope = Scope::new("/w/run", Some("executor/run-1"));
    let requests = [
        Action::new("run_tests"),
        Action::new("push_branch")
            .with("branch", "executor/run-1")
            .with("remote", "origin"),
        Action::new("push_branch")
            .with("branch", "main")
            .with("remote", "origin"),
        Action::new("modify_files").with("path", "/w/run/src/lib.rs"),
        Action::new("read_files").with("path", "/etc/passwd"),
        Action::new("run_command")
            .with("command", "ls -la")
            .with("program", "ls")
            .with("readonly", "true"),
        Action::new("merge_pr").with("pr", "1"),
        Action::new("launch_rocket"),
    ];
    let n = 100_000;
    let start = std::time::Instant::now();
    let mut approved = 0usize;
    for i in 0..n {
        if contract
            .decide(&requests[i % requests.len()], &scope)
            .decision
            == Decision::Approve
        {
            approved += 1;
        }
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    println!("| decisions | {n} | {rate:.0}/s | approved {approved} |");
    let shells = [
        "cargo test && git push origin executor/run-1",
        "echo hi > out.txt",
        "gh pr merge 1",
    ];
    let start = std::time::Instant::now();
    for i in 0..n {
        let actions = classify::shell_command(shells[i % shells.len()], Path::new("/w/run"));
        let _ = contract.decide_all(&actions, &scope);
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    println!("| classify + decide (shell) | {n} | {rate:.0}/s |");
}

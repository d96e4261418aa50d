//! Real agent CLIs as executor's workers: `executor run --once` starts the real Claude Code
//! and Codex (pinned, from `.ci/install-agent-clis`) in a run's worktree, against the
//! scripted model server, and carries the run to `complete`: the adapter's command line,
//! the worker's environment (`agent.env`), the stream reading, the session kept and
//! resumed, and Claude's PreToolUse hook installed by the adapter and consulted.
//!
//! Every worker here runs inside the wall (`[sandbox] mode = "required"` where bubblewrap
//! works, as in CI): its config folder copied into a private home, the scripted model
//! server reached through the loopback port `[sandbox] allow` forwards.
//!
//! Without the CLIs these tests say they skipped; in CI they must run.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::model_server::{ModelServer, Turn};
use crate::real_agents::agent_cli;
use crate::support::{git, Workspace};

/// A workspace whose runner uses `agent` (`claude` or `codex`, at `cli`) against `server`,
/// with one approved task `R-1`. Its agent has a fresh HOME, config folder and TMPDIR of
/// its own, all inside the workspace.
fn agent_workspace(
    kind: &str,
    cli: &Path,
    server: &ModelServer,
    agent_extra: &str,
    runner_extra: &str,
) -> Workspace {
    let mut ws = crate::runner::workspace(&["/bin/true"], &[], runner_extra);
    let dir = |name: &str| {
        let path = ws.path().join(name);
        std::fs::create_dir_all(&path).expect("mkdir");
        path
    };
    let (home, config, tmp) = (dir("agent-home"), dir("agent-config"), dir("agent-tmp"));
    let mode = if crate::confinement::wall_works() {
        "required"
    } else {
        "off"
    };
    let mut env: Vec<(String, String)> = vec![
        ("HOME".into(), home.display().to_string()),
        ("TMPDIR".into(), tmp.display().to_string()),
        (crate::support::SANDBOX_MODE_ENV.into(), mode.into()),
    ];
    let passed: Vec<&str> = match kind {
        "claude" => {
            env.push(("CLAUDE_CONFIG_DIR".into(), config.display().to_string()));
            env.extend(
                server
                    .claude_env()
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v)),
            );
            vec![
                "CLAUDE_CONFIG_DIR",
                "ANTHROPIC_BASE_URL",
                "ANTHROPIC_API_KEY",
                "CLAUDE_CODE_MAX_RETRIES",
            ]
        }
        "pi" => {
            crate::real_agents::pi_config(server, &config);
            env.push(("PI_CODING_AGENT_DIR".into(), config.display().to_string()));
            env.push((
                crate::real_agents::PI_KEY_ENV.into(),
                crate::real_agents::PI_KEY.into(),
            ));
            vec!["PI_CODING_AGENT_DIR", crate::real_agents::PI_KEY_ENV]
        }
        _ => {
            std::fs::write(config.join("config.toml"), server.codex_config())
                .expect("write config.toml");
            env.push(("CODEX_HOME".into(), config.display().to_string()));
            env.extend(
                server
                    .codex_env()
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v)),
            );
            vec!["CODEX_HOME", crate::model_server::CODEX_KEY_ENV]
        }
    };
    ws.env = env;
    let text = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    let agent = format!(
        "[agent]\nkind = \"{kind}\"\nprogram = \"{}\"\nenv = {:?}\n{agent_extra}\n",
        cli.display(),
        passed
    );
    let start = text.find("[agent]").expect("an [agent] section");
    let end = text[start..]
        .find("\n[forge]")
        .map_or(text.len(), |i| start + i + 1);
    let port = server
        .url()
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string();
    let text = format!(
        "{}{agent}{}\n[sandbox]\nallow = [\"127.0.0.1:{port}\"]\n",
        &text[..start],
        &text[end..]
    );
    ws.write_config(&text);
    ws.ok(&["add", "--title", "Write the greeting", "--gid", "R-1"]);
    ws.ok(&["go", "R-1"]);
    ws
}

fn only_run(ws: &Workspace) -> Value {
    let shown = ws.json(&["show", "R-1", "--json"]);
    let runs = shown["runs"].as_array().expect("runs").clone();
    assert_eq!(runs.len(), 1, "one run: {shown}");
    runs[0].clone()
}

/// The `result.json` of each worker of run `run_id`, in order.
fn results(ws: &Workspace, run_id: i64) -> Vec<Value> {
    let dir = ws.path().join(format!("logs/R-1/run-{run_id}"));
    let mut records: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.is_dir())
        .collect();
    records.sort_by_key(|p| {
        p.file_name()
            .and_then(|n| n.to_str()?.split('-').next()?.parse::<u32>().ok())
            .unwrap_or(0)
    });
    records
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p.join("result.json")).expect("result.json");
            serde_json::from_str(&text).expect("result.json is JSON")
        })
        .collect()
}

/// The file the worker wrote, as committed on the run's branch by the orchestrator.
fn committed(ws: &Workspace, branch: &str, file: &str) -> String {
    git(
        &ws.path().join("repo"),
        &["show", &format!("{branch}:{file}")],
    )
}

fn run_once(ws: &Workspace) -> String {
    let out = ws.run(&["run", "--once"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "run --once failed: {stderr}");
    stderr
}

#[test]
fn claude_code_works_a_task_to_complete_as_an_executor_worker() {
    let Some(cli) = agent_cli("claude") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::bash("echo hello > greeting.txt"),
        Turn::text("[STATUS:implemented] wrote greeting.txt\n[DONE:implemented] greeting written"),
    ]);
    let ws = agent_workspace(
        "claude",
        &cli,
        &server,
        "hooks = false\nallowed_tools = [\"Bash\"]",
        "",
    );
    let stderr = run_once(&ws);

    let run = only_run(&ws);
    assert_eq!(run["state"], "complete", "{stderr}");
    let branch = run["branch_name"].as_str().expect("a branch");
    assert_eq!(committed(&ws, branch, "greeting.txt"), "hello");
    let session = run["worker_session_id"]
        .as_str()
        .expect("the session is kept");
    let worker = &results(&ws, run["id"].as_i64().expect("id"))[0];
    assert_eq!(worker["agent"], "claude");
    assert_eq!(
        worker["confined"],
        crate::confinement::wall_works(),
        "{worker}"
    );
    assert_eq!(worker["session_id"], session);
    assert_eq!(
        worker["done"], "[DONE:implemented] greeting written",
        "{worker}"
    );
    let result = &worker["agent_result"];
    assert_eq!(result["is_error"], false, "{worker}");
    assert_eq!(result["session_id"], session);
    assert!(result["num_turns"].as_u64() >= Some(2), "{result}");
    assert!(result["total_cost_usd"].is_number(), "{result}");

    // The model saw the phase prompt, the message format in its system prompt, and the
    // command's result.
    let requests = server.model_requests();
    let first = serde_json::to_string(&requests[0].body).expect("json");
    assert!(
        first.contains("Write the greeting"),
        "the task reached the model"
    );
    assert!(
        first.contains("[DONE:kind]"),
        "the message format reminder is there"
    );
    assert!(
        requests.iter().any(|r| !r.tool_results().is_empty()),
        "the Bash result went back to the model"
    );
}

#[test]
fn a_claude_workers_background_command_ends_with_the_worker() {
    let Some(cli) = agent_cli("claude") else {
        return;
    };
    // Claude's Bash tool starts each command in a session of its own: a `cmd &` (a dev
    // server) outlives the worker unless the wall ends it.
    let server = ModelServer::start(vec![
        Turn::bash("sh -c 'sleep 300; : CLAUDE-BG-MARKER-9' > /dev/null 2>&1 &"),
        Turn::bash("echo hello > greeting.txt"),
        Turn::text("[DONE:implemented] greeting written, server left running"),
    ]);
    let ws = agent_workspace(
        "claude",
        &cli,
        &server,
        "hooks = false\nallowed_tools = [\"Bash\"]",
        "",
    );
    let stderr = run_once(&ws);
    let run = only_run(&ws);
    assert_eq!(run["state"], "complete", "{stderr}");
    if !crate::confinement::wall_works() {
        return;
    }
    let worker = &results(&ws, run["id"].as_i64().expect("id"))[0];
    assert_eq!(worker["confined"], true, "{worker}");
    std::thread::sleep(std::time::Duration::from_secs(1));
    let left = crate::confinement::processes_with("CLAUDE-BG-MARKER-9");
    assert!(
        left.is_empty(),
        "the background command outlived its worker: {left:?}"
    );
}

#[test]
fn pi_works_a_task_to_complete_as_an_executor_worker() {
    let Some(cli) = agent_cli("pi") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::bash("echo hello > greeting.txt"),
        Turn::text("[DONE:implemented] greeting written"),
    ]);
    let ws = agent_workspace(
        "pi",
        &cli,
        &server,
        &format!("model = {:?}", crate::real_agents::PI_MODEL),
        "",
    );
    let stderr = run_once(&ws);
    let run = only_run(&ws);
    assert_eq!(run["state"], "complete", "{stderr}");
    let branch = run["branch_name"].as_str().expect("a branch");
    assert_eq!(committed(&ws, branch, "greeting.txt"), "hello");
    let worker = &results(&ws, run["id"].as_i64().expect("id"))[0];
    assert_eq!(worker["agent"], "pi");
    assert_eq!(
        worker["confined"],
        crate::confinement::wall_works(),
        "{worker}"
    );
}

#[test]
fn a_claude_worker_stopped_by_the_watchdog_is_resumed_in_its_own_session() {
    let Some(cli) = agent_cli("claude") else {
        return;
    };
    // The first worker's command outlives the no-output limit: the watchdog stops it. The
    // resume worker continues the same session, so the model sees its earlier turn and
    // answers with the script's next one.
    // Claude Code refuses a bare `sleep 300`, hence perl. On resume it closes the
    // interrupted turn with an assistant message of its own ("No response requested."),
    // which the server counts as the second turn: the resumed worker gets the third.
    let server = ModelServer::start(vec![
        Turn::bash("echo hello > greeting.txt && perl -e 'sleep 300'"),
        Turn::text("[ESCALATE:unclear] not expected: Claude's own closing message is this turn"),
        Turn::text("[DONE:implemented] resumed where I was"),
    ]);
    let ws = agent_workspace(
        "claude",
        &cli,
        &server,
        "hooks = false\nallowed_tools = [\"Bash\"]",
        // Long enough for Claude Code (a node program) to start and speak on a busy
        // machine; the resumed worker's start is watched by the same limit.
        "no_output_timeout = \"6s\"\n",
    );
    let stderr = run_once(&ws);

    let run = only_run(&ws);
    assert_eq!(run["state"], "complete", "{stderr}");
    let workers = results(&ws, run["id"].as_i64().expect("id"));
    assert_eq!(run["worker_stuck_count"], 1);
    assert_eq!(workers.len(), 2, "{workers:?}");
    assert_eq!(workers[0]["stopped"], "no_output", "{}", workers[0]);
    assert_eq!(workers[1]["session_id"], workers[0]["session_id"]);
    assert_eq!(workers[1]["done"], "[DONE:implemented] resumed where I was");
    let last = server.model_requests().pop().expect("a request");
    assert!(
        last.body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "assistant")),
        "the resumed session carried the earlier turn"
    );
}

#[test]
fn codex_works_a_task_to_complete_as_an_executor_worker() {
    let Some(cli) = agent_cli("codex") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::bash("echo hello > greeting.txt"),
        Turn::text("[DONE:implemented] greeting written"),
    ]);
    let ws = agent_workspace("codex", &cli, &server, "", "");
    let stderr = run_once(&ws);

    let run = only_run(&ws);
    assert_eq!(run["state"], "complete", "{stderr}");
    let branch = run["branch_name"].as_str().expect("a branch");
    assert_eq!(committed(&ws, branch, "greeting.txt"), "hello");
    let worker = &results(&ws, run["id"].as_i64().expect("id"))[0];
    assert_eq!(worker["agent"], "codex");
    assert_eq!(
        worker["confined"],
        crate::confinement::wall_works(),
        "{worker}"
    );
    assert_eq!(worker["done"], "[DONE:implemented] greeting written");
    assert_eq!(worker["session_id"], run["worker_session_id"]);
    assert_eq!(worker["agent_result"]["is_error"], false, "{worker}");
}

#[test]
fn codex_reaches_the_loopback_provider_of_its_own_config_with_no_allow_line() {
    let Some(cli) = agent_cli("codex") else {
        return;
    };
    if !crate::confinement::wall_works() {
        eprintln!("skipped: the wall cannot run here, so there is no allowlist to test");
        return;
    }
    let server = ModelServer::start(vec![
        Turn::bash("echo hello > greeting.txt"),
        Turn::text("[DONE:implemented] greeting written"),
    ]);
    // A Codex that cannot reach its provider keeps reconnecting: the hard timeout makes
    // that a failed run here rather than a test that never ends.
    let ws = agent_workspace("codex", &cli, &server, "", "hard_timeout = \"90s\"\n");
    // Nothing names the model server but Codex's own config.toml.
    let text = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    let start = text.find("\n[sandbox]\nallow = ").expect("the allow line");
    ws.write_config(&text[..start]);
    let codex_config = std::fs::read_to_string(ws.path().join("agent-config/config.toml"));
    assert!(
        codex_config.is_ok_and(|c| c.contains("[model_providers.scripted]")),
        "the provider is in Codex's config"
    );
    let stderr = run_once(&ws);
    let run = only_run(&ws);
    assert_eq!(run["state"], "complete", "{stderr}");
    let worker = &results(&ws, run["id"].as_i64().expect("id"))[0];
    assert_eq!(worker["confined"], true, "{worker}");
    let branch = run["branch_name"].as_str().expect("a branch");
    assert_eq!(committed(&ws, branch, "greeting.txt"), "hello");
}

#[test]
fn a_codex_worker_stopped_by_the_watchdog_is_resumed_in_its_own_thread() {
    let Some(cli) = agent_cli("codex") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::bash("echo hello > greeting.txt; sleep 300"),
        Turn::text("[DONE:implemented] resumed where I was"),
    ]);
    let ws = agent_workspace("codex", &cli, &server, "", "no_output_timeout = \"6s\"\n");
    let stderr = run_once(&ws);

    let run = only_run(&ws);
    assert_eq!(run["state"], "complete", "{stderr}");
    assert_eq!(run["worker_stuck_count"], 1);
    let workers = results(&ws, run["id"].as_i64().expect("id"));
    assert_eq!(workers.len(), 2, "{workers:?}");
    assert_eq!(workers[1]["session_id"], workers[0]["session_id"]);
    assert_eq!(workers[1]["done"], "[DONE:implemented] resumed where I was");
}

#[test]
fn claude_consults_executors_hook_which_denies_a_push_to_main_and_allows_the_work() {
    let Some(cli) = agent_cli("claude") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::bash("git push origin main"),
        Turn::bash("echo hello > greeting.txt"),
        Turn::text("[DONE:implemented] greeting written; the push was refused"),
    ]);
    // No allowed tools: every call goes through the hook, which the adapter installs.
    let ws = agent_workspace("claude", &cli, &server, "", "");
    let stderr = run_once(&ws);

    let run = only_run(&ws);
    assert_eq!(run["state"], "complete", "{stderr}");
    let branch = run["branch_name"].as_str().expect("a branch");
    assert_eq!(committed(&ws, branch, "greeting.txt"), "hello");

    // The denial's reason reached the model as the push's tool result.
    let results: Vec<String> = server
        .model_requests()
        .iter()
        .flat_map(|r| r.tool_results())
        .collect();
    assert!(
        results
            .iter()
            .any(|r| r.contains("executor policy: denied by rule push-other-branch")),
        "{results:#?}"
    );

    // Both calls were decided by the worker contract and recorded with the run.
    let shown = ws.json(&["show", "R-1", "--json"]);
    let decisions = shown["decisions"].as_array().expect("decisions");
    let summary: Vec<(String, String)> = decisions
        .iter()
        .map(|d| {
            (
                d["decision"].as_str().unwrap_or("").to_string(),
                d["rule_id"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(
        summary.contains(&("deny".into(), "push-other-branch".into())),
        "{summary:?}"
    );
    assert!(
        summary.iter().any(|(d, _)| d == "approve"),
        "the write was approved: {summary:?}"
    );
    assert!(decisions.iter().all(|d| d["run_id"] == run["id"]));
}

/// Unconfined too, Claude's hook is a thin client of the runner's relay: the runner judges
/// each call in the strict posture and records it as unconfined.
#[test]
fn unconfined_claudes_hook_asks_the_runner_which_judges_it_strictly() {
    let Some(cli) = agent_cli("claude") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::bash("git push origin main"),
        Turn::bash("echo hello > greeting.txt"),
        Turn::text("[DONE:implemented] greeting written; the push was refused"),
    ]);
    let mut ws = agent_workspace("claude", &cli, &server, "", "");
    for (key, value) in &mut ws.env {
        if key == crate::support::SANDBOX_MODE_ENV {
            *value = "off".to_string();
        }
    }
    let stderr = run_once(&ws);
    let run = only_run(&ws);
    assert_eq!(run["state"], "complete", "{stderr}");
    let shown = ws.json(&["show", "R-1", "--json"]);
    let decisions = shown["decisions"].as_array().expect("decisions");
    let denied = decisions
        .iter()
        .find(|d| d["rule_id"] == "push-other-branch")
        .unwrap_or_else(|| panic!("the push was not judged: {shown}"));
    assert_eq!(denied["decision"], "deny", "{denied}");
    assert!(
        decisions
            .iter()
            .all(|d| d["confined"] == Value::Bool(false)),
        "{shown}"
    );
    // The hook's command line names the runner's relay, so it read no config or store.
    let settings = std::fs::read_to_string(
        ws.path()
            .join(format!("logs/R-1/run-{}/claude-settings.json", run["id"])),
    )
    .expect("the hook's settings");
    assert!(settings.contains("--relay"), "{settings}");
    assert!(
        settings.contains("executor-hook' --config") || settings.contains("executor-hook --config"),
        "the small hook: {settings}"
    );
}

/// Where bubblewrap cannot run, the seal alone walls Claude: it may open no socket named
/// in the file system, so its hook asks the runner over a loopback port the seal opens
/// for it, and the runner judges and records each call as inside bubblewrap.
#[test]
fn sealed_without_bubblewrap_claudes_hook_asks_the_runner_over_loopback() {
    let Some(cli) = agent_cli("claude") else {
        return;
    };
    if !crate::confinement::landlock_walls() {
        return;
    }
    let server = ModelServer::start(vec![
        Turn::bash("git push origin main"),
        Turn::bash("echo hello > greeting.txt"),
        Turn::text("[DONE:implemented] greeting written; the push was refused"),
    ]);
    let ws = agent_workspace("claude", &cli, &server, "", "");
    let out = crate::support::without_user_namespaces(&ws.command(&["run", "--once"]))
        .output()
        .expect("run under unshare");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("WITHOUT bubblewrap"), "{stderr}");

    let run = only_run(&ws);
    assert_eq!(run["state"], "complete", "{stderr}");
    let branch = run["branch_name"].as_str().expect("a branch");
    assert_eq!(committed(&ws, branch, "greeting.txt"), "hello");
    let shown = ws.json(&["show", "R-1", "--json"]);
    let decisions = shown["decisions"].as_array().expect("decisions");
    let denied = decisions
        .iter()
        .find(|d| d["rule_id"] == "push-other-branch")
        .unwrap_or_else(|| panic!("the push was not judged by the runner: {shown}"));
    assert_eq!(denied["decision"], "deny", "{denied}");
    assert_eq!(denied["confined"], Value::Bool(true), "{denied}");
    assert!(
        decisions.iter().any(|d| d["decision"] == "approve"),
        "{shown}"
    );
}

#[test]
fn a_merge_is_deferred_by_the_hook_escalated_approved_and_resumed_in_the_same_session() {
    let Some(cli) = agent_cli("claude") else {
        return;
    };
    // `gh` is not there (or not logged in) in a test: the fallback leaves a file, proof that
    // the call ran once the owner allowed it.
    let server = ModelServer::start(vec![
        Turn::bash("gh pr merge 12 --squash || echo merged > merged.txt"),
        Turn::text("[DONE:implemented] merged as allowed"),
    ]);
    let ws = agent_workspace("claude", &cli, &server, "", "");
    let stderr = run_once(&ws);
    assert!(
        stderr.contains("waiting for the owner (escalation"),
        "{stderr}"
    );
    let run = only_run(&ws);
    assert_eq!(run["state"], "in_progress");
    let session = run["worker_session_id"]
        .as_str()
        .expect("a session")
        .to_string();
    let first = &results(&ws, run["id"].as_i64().expect("id"))[0];
    assert_eq!(
        first["agent_result"]["stop_reason"], "tool_deferred",
        "{first}"
    );

    let pending = ws.json(&["escalations", "--json"]);
    let escalation = &pending[0];
    assert_eq!(escalation["rule_id"], "merge", "{pending}");
    assert!(escalation["tool_use_id"].is_string(), "{pending}");
    let id = escalation["id"].as_i64().expect("id").to_string();
    ws.ok(&["decide", &id, "approve"]);

    let stderr = run_once(&ws);
    let run = only_run(&ws);
    assert_eq!(run["state"], "complete", "{stderr}");
    assert_eq!(
        run["worker_session_id"],
        session.as_str(),
        "the same session"
    );
    let branch = run["branch_name"].as_str().expect("a branch");
    assert_eq!(committed(&ws, branch, "merged.txt"), "merged");
    let workers = results(&ws, run["id"].as_i64().expect("id"));
    assert_eq!(workers.len(), 2, "{workers:?}");
    assert_eq!(workers[1]["done"], "[DONE:implemented] merged as allowed");
}

#[test]
fn claude_dispatched_twice_in_one_named_session_gets_only_the_files_tools() {
    let Some(cli) = agent_cli("claude") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::text("[DONE:implemented] first round"),
        Turn::text("[DONE:implemented] second round"),
    ]);
    let ws = agent_workspace("claude", &cli, &server, "hooks = false", "");
    let task = |id: &str| {
        format!(
            r#"{{"taskVersion": 1, "id": "{id}", "prompt": "Read the README, then say done.", "workspace": "alpha", "capabilities": {{"tools": ["read"]}}, "session": "worker-1", "timeoutSeconds": 600}}"#
        )
    };
    let mut sessions = Vec::new();
    for id in ["t-worker-alpha", "t-worker-alpha-2"] {
        let file = ws.path().join(format!("{id}.json"));
        std::fs::write(&file, task(id)).expect("write the task file");
        let shown = ws.json(&["dispatch", &file.display().to_string(), "--json"]);
        assert_eq!(shown["done"], true, "{shown}");
        sessions.push(shown["session_id"].as_str().map(str::to_string));
    }
    assert!(sessions[0].is_some(), "{sessions:?}");
    assert_eq!(sessions[0], sessions[1], "one session across the rounds");
    let requests = server.model_requests();
    let last = requests.last().expect("a request");
    // The second round continued the first one's conversation...
    assert!(
        last.body["messages"].as_array().is_some_and(|m| m
            .iter()
            .any(|m| m["role"] == "assistant" && m.to_string().contains("first round"))),
        "{}",
        last.body["messages"]
    );
    // ... and the model was offered the read tools and nothing else.
    for request in &requests {
        let mut tools: Vec<&str> = request.body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    // Claude Code's own placeholder, which can never be called.
                    .filter(|t| t["defer_loading"] != true)
                    .filter_map(|t| t["name"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        tools.sort_unstable();
        assert_eq!(tools, ["Glob", "Grep", "Read"], "{}", request.body["tools"]);
    }
}

#[test]
fn a_read_only_codex_worker_reads_inside_the_wall_and_cannot_write() {
    let Some(cli) = agent_cli("codex") else {
        return;
    };
    // A task file with read tools only: unconfined, Codex runs its own read-only sandbox;
    // inside the wall that sandbox (a nested bubblewrap) cannot start, so the adapter
    // switches it off and the wall binds the worktree read-only instead.
    let server = ModelServer::start(vec![
        Turn::bash("cat README.md"),
        Turn::bash("echo x > written.txt"),
        Turn::text("[DONE:implemented] read the README"),
    ]);
    let ws = agent_workspace("codex", &cli, &server, "", "");
    let file = ws.path().join("t-worker-reader.json");
    std::fs::write(
        &file,
        r#"{"taskVersion": 1, "id": "t-worker-reader", "prompt": "Read the README, then say done.", "workspace": "alpha", "capabilities": {"tools": ["read"]}, "timeoutSeconds": 600}"#,
    )
    .expect("write the task file");
    let shown = ws.json(&["dispatch", &file.display().to_string(), "--json"]);
    assert_eq!(shown["done"], true, "{shown}");
    let results: Vec<String> = server
        .model_requests()
        .iter()
        .flat_map(|r| r.tool_results())
        .collect();
    assert!(
        results.iter().any(|r| r.contains("project")),
        "the command's output did not come back: {results:#?}"
    );
    if crate::confinement::wall_works() {
        assert!(
            results.iter().any(|r| r.contains("Read-only file system")),
            "the write was not refused: {results:#?}"
        );
    }
}

#[test]
fn claude_review_rounds_keep_the_author_in_one_session_and_the_reviewer_in_another() {
    let Some(cli) = agent_cli("claude") else {
        return;
    };
    // The server picks a reply by how many assistant turns the conversation holds, so every
    // fresh session (the author's first round, each reviewer) gets the first reply, and only
    // the author's resumed session gets the second: the reviewer rejects every round.
    let server = ModelServer::start(vec![
        Turn::text(
            "[STATUS:finding] path=README.md severity=blocker say more\n[DONE:changes_requested] one blocker",
        ),
        Turn::text("[DONE:implemented] second version"),
    ]);
    let ws = agent_workspace(
        "claude",
        &cli,
        &server,
        "hooks = false",
        "\n[conductor]\nreview_rounds = 2\n",
    );
    let stderr = run_once(&ws);
    let run = only_run(&ws);
    let workers = results(&ws, run["id"].as_i64().expect("id"));
    let phases: Vec<&str> = workers.iter().filter_map(|w| w["phase"].as_str()).collect();
    assert_eq!(
        phases,
        ["queued", "pr_review", "in_progress", "pr_review"],
        "{stderr}"
    );
    // The author's two rounds are one session; each reviewer's is its own.
    let session = |i: usize| workers[i]["agent_result"]["session_id"].clone();
    assert!(session(0).is_string(), "{}", workers[0]);
    assert_eq!(session(2), session(0), "the author continued its session");
    assert_ne!(session(1), session(0), "the reviewer had its own");
    assert_ne!(session(3), session(0), "the reviewer had its own");
    // The author's second round continued its conversation and was told the finding.
    let resumed = server
        .model_requests()
        .into_iter()
        .find(|r| {
            r.body["messages"]
                .to_string()
                .contains("review round 1 of 2")
        })
        .expect("the author's second round");
    let text = resumed.body["messages"].to_string();
    assert!(text.contains("say more"), "{text}");
    assert!(
        resumed.body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "assistant")),
        "the resumed session carried the first round"
    );
    // Rejected twice with two rounds allowed: the owner decides.
    assert_eq!(
        ws.json(&["escalations", "--json"])[0]["action"],
        "review_rounds_exhausted"
    );
}

#[test]
fn a_claude_worker_at_its_usage_limit_waits_for_the_reset_and_resumes_its_session() {
    let Some(cli) = agent_cli("claude") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::bash("echo hello > greeting.txt"),
        Turn::text("[DONE:implemented] greeting written"),
    ]);
    // The request carrying the command's result is refused once, as the API refuses an
    // account over its limit (429, `retry-after: 2`); with CLAUDE_CODE_MAX_RETRIES=0
    // Claude Code gives up at once and the worker ends on it. It prints "API Error:
    // Request rejected (429) · …" without the retry-after, so the back-off decides.
    server.limit_turn(1, 1, 2);
    let ws = agent_workspace(
        "claude",
        &cli,
        &server,
        "hooks = false\nallowed_tools = [\"Bash\"]\nusage_limit_backoff = \"2s\"",
        "",
    );
    let started = std::time::Instant::now();
    let stderr = run_once(&ws);

    let run = only_run(&ws);
    assert_eq!(run["state"], "complete", "{stderr}");
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(2),
        "{stderr}"
    );
    let branch = run["branch_name"].as_str().expect("a branch");
    assert_eq!(committed(&ws, branch, "greeting.txt"), "hello");
    // The limit is no failed attempt; the second worker carried on in the first's session.
    assert_eq!(run["lifecycle"]["failed_workers"], 0, "{run}");
    let workers = results(&ws, run["id"].as_i64().expect("id"));
    assert_eq!(workers.len(), 2, "{workers:?}");
    let limited = &workers[0];
    assert_eq!(limited["usage_limit"]["agent"], "claude", "{limited}");
    assert_eq!(
        limited["agent_result"]["api_error_status"], 429,
        "{limited}"
    );
    assert!(limited["done"].is_null(), "{limited}");
    assert_eq!(
        workers[1]["session_id"], limited["session_id"],
        "{workers:?}"
    );
    assert!(
        workers[1]["done"]
            .as_str()
            .is_some_and(|d| d.starts_with("[DONE:implemented]")),
        "{workers:?}"
    );
    let served: Vec<_> = server
        .requests()
        .into_iter()
        .map(|r| r.served)
        .filter(|s| *s != crate::model_server::Served::Auxiliary)
        .collect();
    assert_eq!(
        served.first(),
        Some(&crate::model_server::Served::Turn(0)),
        "{served:?}"
    );
    assert_eq!(
        served.get(1),
        Some(&crate::model_server::Served::UsageLimit(1)),
        "{served:?}"
    );
    // The owner was told once.
    assert_eq!(stderr.matches("Usage limit: ").count(), 1, "{stderr}");
}

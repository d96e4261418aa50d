//! The real Claude Code, Codex and pi CLIs, run against the scripted model server: proof
//! that the server speaks what these versions expect, and a record of the exact environment
//! and arguments each needs to run offline. Claude Code and Codex run directly (not through
//! executor); pi runs with its adapter's command line and its output goes through the
//! adapter, since nothing else here runs the real pi.
//!
//! The CLIs come from `.ci/install-agent-clis`. Without them these tests say they skipped,
//! except in CI, where they must be there.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use executor::agents::{Adapter, AgentEvent, Invocation, Session, Summary};

use crate::model_server::{ModelServer, Served, Turn};

/// The variable naming a folder that holds the agent CLIs, instead of the installed ones.
pub const AGENT_CLIS_ENV: &str = "EXECUTOR_TEST_AGENT_CLIS";

/// The agent CLI `name` (`claude`, `codex`, `pi`), or `None` after saying the calling test
/// skipped; in CI (`CI` set) a missing CLI fails the test instead.
pub fn agent_cli(name: &str) -> Option<PathBuf> {
    let path = match std::env::var_os(AGENT_CLIS_ENV) {
        Some(dir) => PathBuf::from(dir).join(name),
        None => {
            let installed = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/agent-clis");
            // pi has an npm prefix of its own there (see .ci/install-agent-clis).
            let prefix = if name == "pi" {
                installed.join("pi")
            } else {
                installed
            };
            prefix.join("node_modules/.bin").join(name)
        }
    };
    if path.is_file() {
        return Some(path);
    }
    // The test harness names each test's thread after the test.
    let current = std::thread::current();
    let test = current.name().unwrap_or("a test");
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: no {name} CLI at {}: in CI the agent CLIs must be installed by \
         .ci/install-agent-clis before the tests run",
        path.display()
    );
    // Written past the test harness's capture so a skip is always visible.
    let _ = writeln!(
        std::io::stderr(),
        "skipped: {test}: {name} CLI not installed (run .ci/install-agent-clis)"
    );
    None
}

/// Far above the second or so a run takes; only there so a hung CLI fails the test.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// Fresh folders for one agent session: nothing may come from the machine's real HOME.
struct AgentDirs {
    _root: tempfile::TempDir,
    home: PathBuf,
    /// `CLAUDE_CONFIG_DIR`, `CODEX_HOME` or `PI_CODING_AGENT_DIR`; outside `tmp`, as Codex
    /// needs.
    config: PathBuf,
    tmp: PathBuf,
    /// The working directory: empty, and in no git repository.
    work: PathBuf,
}

impl AgentDirs {
    fn new() -> Self {
        let root = tempfile::tempdir().expect("temp dir");
        let dir = |name: &str| {
            let path = root.path().join(name);
            std::fs::create_dir(&path).expect("create agent dir");
            path
        };
        Self {
            home: dir("home"),
            config: dir("config"),
            tmp: dir("tmp"),
            work: dir("work"),
            _root: root,
        }
    }

    /// A command with only PATH from this process's environment.
    fn command(&self, cli: &Path) -> Command {
        let mut cmd = Command::new(cli);
        cmd.current_dir(&self.work)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("TMPDIR", &self.tmp);
        cmd
    }
}

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Run {
    /// The JSON lines of stdout (the CLIs print nothing else there).
    fn events(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}\n{self}"))
            })
            .collect()
    }

    fn assert_exit(&self, code: i32) {
        assert_eq!(self.status.code(), Some(code), "{self}");
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?} after {:?}\nstdout:\n{}\nstderr:\n{}",
            self.status.code(),
            self.elapsed,
            self.stdout,
            self.stderr
        )
    }
}

/// Runs `cmd` with `stdin` (None: `/dev/null`), killing it past [`RUN_LIMIT`].
fn run(mut cmd: Command, stdin: Option<&str>) -> Run {
    let start = Instant::now();
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn the agent CLI");
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes()).expect("write the prompt");
        // Dropping the pipe closes it: the CLI reads the prompt to EOF.
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the agent CLI") {
            break status;
        }
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the agent CLI ran past {RUN_LIMIT:?}\nstdout:\n{}\nstderr:\n{}",
                stdout.join().unwrap_or_default(),
                stderr.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Run {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
        elapsed: start.elapsed(),
    }
}

/// Reads a pipe to its end on a thread, so a full pipe never blocks the CLI.
fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn file(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("read {name}: {e}"))
}

fn served(server: &ModelServer) -> Vec<Served> {
    server.requests().into_iter().map(|r| r.served).collect()
}

// ---- Claude Code ----

/// `claude -p` in stream-json with Bash pre-approved, the prompt on stdin.
fn claude(cli: &Path, server: &ModelServer, dirs: &AgentDirs, args: &[&str], prompt: &str) -> Run {
    let mut cmd = dirs.command(cli);
    cmd.env("CLAUDE_CONFIG_DIR", &dirs.config)
        .envs(server.claude_env())
        .args([
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--allowedTools",
            "Bash",
        ])
        .args(args);
    run(cmd, Some(prompt))
}

/// The one `result` event of a Claude run.
fn claude_result(run: &Run) -> Value {
    let results: Vec<Value> = run
        .events()
        .into_iter()
        .filter(|e| e["type"] == "result")
        .collect();
    assert_eq!(results.len(), 1, "one result event expected\n{run}");
    results[0].clone()
}

#[test]
fn claude_runs_a_bash_command_and_finishes_against_the_model_server() {
    let Some(cli) = agent_cli("claude") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::bash("echo hello > out.txt"),
        Turn::text("[DONE:implemented] wrote out.txt"),
    ]);
    let dirs = AgentDirs::new();

    let run = claude(&cli, &server, &dirs, &[], "Write hello to out.txt.");

    run.assert_exit(0);
    assert_eq!(file(&dirs.work, "out.txt"), "hello\n");
    let result = claude_result(&run);
    assert_eq!(result["is_error"], false, "{run}");
    let text = result["result"].as_str().unwrap_or_default();
    assert!(text.contains("[DONE:implemented]"), "{run}");
    // Only the agent loop's two calls: no side call, nothing the server does not serve.
    assert_eq!(served(&server), [Served::Turn(0), Served::Turn(1)]);
    let requests = server.model_requests();
    assert!(requests[0].tool_results().is_empty());
    assert_eq!(
        requests[1].tool_results().len(),
        1,
        "the Bash result went back"
    );
    assert!(requests[0]
        .user_texts()
        .iter()
        .any(|t| t.contains("Write hello to out.txt.")));
}

#[test]
fn claude_resume_sends_the_earlier_session_and_gets_the_next_turn() {
    let Some(cli) = agent_cli("claude") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::Bash {
            command: "echo hello > out.txt".into(),
            text_before: Some("Writing the file.".into()),
        },
        Turn::text("[DONE:implemented] wrote out.txt"),
        Turn::text("[DONE:implemented] resumed"),
    ]);
    let dirs = AgentDirs::new();
    let session = "5c1d3a8e-0f4b-4c2a-9d6e-7b8a9c0d1e2f";

    let first = claude(
        &cli,
        &server,
        &dirs,
        &["--session-id", session],
        "Write hello to out.txt.",
    );
    first.assert_exit(0);
    assert_eq!(claude_result(&first)["session_id"], session);

    let second = claude(
        &cli,
        &server,
        &dirs,
        &["--resume", session],
        "Say so again.",
    );
    second.assert_exit(0);
    let result = claude_result(&second);
    assert_eq!(result["session_id"], session, "{second}");
    assert_eq!(result["is_error"], false, "{second}");
    assert_eq!(result["result"], "[DONE:implemented] resumed", "{second}");

    assert_eq!(
        served(&server),
        [Served::Turn(0), Served::Turn(1), Served::Turn(2)]
    );
    let resumed = &server.model_requests()[2];
    let prompts = resumed.user_texts();
    assert!(prompts
        .iter()
        .any(|t| t.contains("Write hello to out.txt.")));
    assert!(prompts.iter().any(|t| t.contains("Say so again.")));
    assert_eq!(
        resumed.tool_results().len(),
        1,
        "the first session's Bash result"
    );
}

#[test]
fn claude_reports_a_scripted_api_error() {
    let Some(cli) = agent_cli("claude") else {
        return;
    };
    for status in [400, 529] {
        let server = ModelServer::start(vec![Turn::ApiError(status)]);
        let dirs = AgentDirs::new();

        let run = claude(&cli, &server, &dirs, &[], "Anything.");

        run.assert_exit(1);
        let result = claude_result(&run);
        assert_eq!(result["is_error"], true, "{run}");
        assert_eq!(result["terminal_reason"], "api_error", "{run}");
        assert_eq!(result["api_error_status"], status, "{run}");
        let served = served(&server);
        // A 400 makes Claude Code ask again with fewer beta features (2.1.332: six
        // requests in all); each lands on the same turn. A 529 is not retried at all with
        // CLAUDE_CODE_MAX_RETRIES=0.
        assert!(served.iter().all(|s| *s == Served::Turn(0)), "{served:?}");
        if status == 529 {
            assert_eq!(served.len(), 1);
        }
    }
}

// ---- Codex ----

/// `codex exec --json` with `CODEX_HOME` holding the server's config and stdin at
/// `/dev/null` (it reads stdin to EOF even when the prompt is an argument).
fn codex(cli: &Path, server: &ModelServer, dirs: &AgentDirs, args: &[&str]) -> Run {
    let config = dirs.config.join("config.toml");
    if !config.exists() {
        std::fs::write(&config, server.codex_config()).expect("write config.toml");
    }
    let mut cmd = dirs.command(cli);
    cmd.env("CODEX_HOME", &dirs.config)
        .envs(server.codex_env())
        .arg("exec")
        .args(args);
    run(cmd, None)
}

/// The text of the last `agent_message`, which is a Codex run's outcome.
fn codex_last_message(run: &Run) -> String {
    run.events()
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "agent_message")
        .filter_map(|e| e["item"]["text"].as_str().map(str::to_owned))
        .next_back()
        .unwrap_or_else(|| panic!("no agent_message\n{run}"))
}

fn codex_thread_id(run: &Run) -> String {
    let events = run.events();
    let started = events.first().unwrap_or_else(|| panic!("no events\n{run}"));
    assert_eq!(started["type"], "thread.started", "{run}");
    started["thread_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no thread_id\n{run}"))
        .to_owned()
}

fn assert_turn_completed(run: &Run) {
    let events = run.events();
    let last = events.last().unwrap_or_else(|| panic!("no events\n{run}"));
    assert_eq!(last["type"], "turn.completed", "{run}");
}

#[test]
fn codex_runs_a_bash_command_and_finishes_against_the_model_server() {
    let Some(cli) = agent_cli("codex") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::bash("echo hello > out.txt"),
        Turn::text("[DONE:implemented] wrote out.txt"),
    ]);
    let dirs = AgentDirs::new();

    let run = codex(
        &cli,
        &server,
        &dirs,
        &["--json", "--skip-git-repo-check", "Write hello to out.txt."],
    );

    run.assert_exit(0);
    assert_eq!(file(&dirs.work, "out.txt"), "hello\n");
    assert_turn_completed(&run);
    assert!(
        codex_last_message(&run).contains("[DONE:implemented]"),
        "{run}"
    );
    let command = run
        .events()
        .into_iter()
        .find(|e| e["type"] == "item.completed" && e["item"]["type"] == "command_execution")
        .unwrap_or_else(|| panic!("no command_execution\n{run}"));
    assert_eq!(command["item"]["exit_code"], 0, "{run}");
    assert_eq!(served(&server), [Served::Turn(0), Served::Turn(1)]);
    let requests = server.model_requests();
    assert!(requests[0].tool_results().is_empty());
    let results = requests[1].tool_results();
    assert_eq!(results.len(), 1, "the exec_command result went back");
    assert!(results[0].contains("exited with code 0"), "{results:?}");
}

#[test]
fn codex_exec_resume_sends_the_earlier_thread_and_gets_the_next_turn() {
    let Some(cli) = agent_cli("codex") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::Bash {
            command: "echo hello > out.txt".into(),
            text_before: Some("Writing the file.".into()),
        },
        Turn::text("[DONE:implemented] wrote out.txt"),
        Turn::text("[DONE:implemented] resumed"),
    ]);
    let dirs = AgentDirs::new();

    let first = codex(
        &cli,
        &server,
        &dirs,
        &["--json", "--skip-git-repo-check", "Write hello to out.txt."],
    );
    first.assert_exit(0);
    let thread = codex_thread_id(&first);

    let second = codex(
        &cli,
        &server,
        &dirs,
        &[
            "resume",
            &thread,
            "--json",
            "--skip-git-repo-check",
            "Say so again.",
        ],
    );
    second.assert_exit(0);
    assert_eq!(codex_thread_id(&second), thread);
    assert_turn_completed(&second);
    assert_eq!(codex_last_message(&second), "[DONE:implemented] resumed");

    assert_eq!(
        served(&server),
        [Served::Turn(0), Served::Turn(1), Served::Turn(2)]
    );
    let resumed = &server.model_requests()[2];
    let prompts = resumed.user_texts();
    assert!(prompts
        .iter()
        .any(|t| t.contains("Write hello to out.txt.")));
    assert!(prompts.iter().any(|t| t.contains("Say so again.")));
    assert_eq!(
        resumed.tool_results().len(),
        1,
        "the first run's command output"
    );
}

#[test]
fn codex_reports_a_scripted_api_error() {
    let Some(cli) = agent_cli("codex") else {
        return;
    };
    for status in [400, 500] {
        let server = ModelServer::start(vec![Turn::ApiError(status)]);
        let dirs = AgentDirs::new();

        let run = codex(
            &cli,
            &server,
            &dirs,
            &["--json", "--skip-git-repo-check", "Anything."],
        );

        run.assert_exit(1);
        let events = run.events();
        let last = events.last().unwrap_or_else(|| panic!("no events\n{run}"));
        assert_eq!(last["type"], "turn.failed", "{run}");
        // With the config's retry limits of 0, a 5xx is not retried either.
        assert_eq!(served(&server), [Served::Turn(0)], "{run}");
    }
}

// ---- pi ----

/// The key pi sends; the server accepts any. Shaped like an Anthropic OAuth token on
/// purpose: with one, pi 0.73.1's Anthropic provider names its tools as Claude Code does (its
/// `bash` goes out as `Bash`, and a `Bash` call comes back to `bash`), so the script's `Bash`
/// turns run pi's own shell tool.
pub(crate) const PI_KEY: &str = "sk-ant-oat-scripted-test-key";

/// The variable the provider in [`pi_config`] reads its key from.
pub(crate) const PI_KEY_ENV: &str = "SCRIPTED_MODEL_KEY";

/// The model of [`pi_config`], as `--model` names it.
pub(crate) const PI_MODEL: &str = "scripted/scripted-model";

/// Writes pi's configuration into `dir`, its `PI_CODING_AGENT_DIR`: `models.json` adds a
/// provider `scripted` on the server's Anthropic Messages API; `settings.json` turns off pi's
/// retries and its SDK's (a retry would get the same scripted turn; pi's own are 2 s, 4 s,
/// 8 s apart, and its SDK tries each three times).
pub(crate) fn pi_config(server: &ModelServer, dir: &Path) {
    let models = serde_json::json!({
        "providers": {
            "scripted": {
                "baseUrl": server.url(),
                "api": "anthropic-messages",
                "apiKey": PI_KEY_ENV,
                "models": [{"id": "scripted-model"}],
            }
        }
    });
    std::fs::write(dir.join("models.json"), models.to_string()).expect("write models.json");
    let settings = r#"{"retry": {"enabled": false, "provider": {"maxRetries": 0}}}"#;
    std::fs::write(dir.join("settings.json"), settings).expect("write settings.json");
}

/// pi as executor runs it: the adapter's command line and fixed environment, the prompt on
/// stdin, and its stdout read by the adapter into a [`Summary`].
fn pi(
    cli: &Path,
    server: &ModelServer,
    dirs: &AgentDirs,
    session: Session,
    prompt: &str,
) -> (Run, Summary) {
    pi_config(server, &dirs.config);
    let adapter = Adapter::Pi {
        program: cli.to_path_buf(),
    };
    let argv = adapter.argv(&Invocation {
        session,
        model: Some(PI_MODEL.to_owned()),
        ..Invocation::default()
    });
    let mut cmd = dirs.command(cli);
    cmd.args(&argv[1..])
        .envs(adapter.fixed_env().iter().copied())
        .env("PI_CODING_AGENT_DIR", &dirs.config)
        .env(PI_KEY_ENV, PI_KEY);
    let run = run(cmd, Some(prompt));
    let mut summary = Summary::default();
    for line in run.stdout.lines() {
        for event in adapter.parse_line(line) {
            assert_ne!(
                event,
                AgentEvent::Other {
                    kind: "not_json".into()
                },
                "{run}"
            );
            summary.observe(&event);
        }
    }
    (run, summary)
}

/// The `type` of each event pi printed, in order.
fn pi_event_types(run: &Run) -> Vec<String> {
    run.events()
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn pi_runs_a_bash_command_and_finishes_against_the_model_server() {
    let Some(cli) = agent_cli("pi") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::Bash {
            command: "echo hello > out.txt".into(),
            text_before: Some("Writing the file.".into()),
        },
        Turn::text("Wrote it.\n[STATUS:wrote] out.txt\n[DONE:implemented] wrote out.txt"),
    ]);
    let dirs = AgentDirs::new();

    let (run, summary) = pi(
        &cli,
        &server,
        &dirs,
        Session::default(),
        "Write hello to out.txt.",
    );

    run.assert_exit(0);
    assert_eq!(file(&dirs.work, "out.txt"), "hello\n");
    let types = pi_event_types(&run);
    assert_eq!(types.first().map(String::as_str), Some("session"), "{run}");
    assert_eq!(types.last().map(String::as_str), Some("agent_end"), "{run}");
    assert!(summary.succeeded(), "{run}");
    assert!(summary.session_id.is_some(), "{run}");
    assert_eq!((summary.tool_calls, summary.failed_tool_results), (1, 0));
    let done = summary.finished.as_ref().expect("a finished event");
    assert_eq!(done.num_turns, Some(2));
    assert_eq!(done.stop_reason.as_deref(), Some("stop"));
    assert!(
        summary
            .final_text()
            .is_some_and(|t| t.ends_with("[DONE:implemented] wrote out.txt")),
        "{run}"
    );
    assert_eq!(served(&server), [Served::Turn(0), Served::Turn(1)]);
    let requests = server.model_requests();
    assert!(requests[0].tool_results().is_empty());
    assert_eq!(
        requests[1].tool_results(),
        ["(no output)"],
        "the bash result went back"
    );
    assert!(requests[0]
        .user_texts()
        .iter()
        .any(|t| t.contains("Write hello to out.txt.")));
}

#[test]
fn pi_resume_sends_the_earlier_session_and_gets_the_next_turn() {
    let Some(cli) = agent_cli("pi") else {
        return;
    };
    let server = ModelServer::start(vec![
        Turn::Bash {
            command: "echo hello > out.txt".into(),
            text_before: Some("Writing the file.".into()),
        },
        Turn::text("[DONE:implemented] wrote out.txt"),
        Turn::text("[DONE:implemented] resumed"),
    ]);
    let dirs = AgentDirs::new();

    let (first, summary) = pi(
        &cli,
        &server,
        &dirs,
        Session::default(),
        "Write hello to out.txt.",
    );
    first.assert_exit(0);
    let session = summary.session_id.clone().expect("pi names its session");

    let (second, resumed) = pi(
        &cli,
        &server,
        &dirs,
        Session::Resume {
            id: session.clone(),
        },
        "Say so again.",
    );
    second.assert_exit(0);
    assert_eq!(
        resumed.session_id.as_deref(),
        Some(session.as_str()),
        "{second}"
    );
    assert!(resumed.succeeded(), "{second}");
    assert_eq!(resumed.final_text(), Some("[DONE:implemented] resumed"));

    assert_eq!(
        served(&server),
        [Served::Turn(0), Served::Turn(1), Served::Turn(2)]
    );
    let again = &server.model_requests()[2];
    let prompts = again.user_texts();
    assert!(prompts
        .iter()
        .any(|t| t.contains("Write hello to out.txt.")));
    assert!(prompts.iter().any(|t| t.contains("Say so again.")));
    assert_eq!(again.tool_results().len(), 1, "the first run's bash result");
}

#[test]
fn pi_reports_a_scripted_api_error_but_exits_0() {
    let Some(cli) = agent_cli("pi") else {
        return;
    };
    for status in [400, 500] {
        let server = ModelServer::start(vec![Turn::ApiError(status)]);
        let dirs = AgentDirs::new();

        let (run, summary) = pi(&cli, &server, &dirs, Session::default(), "Anything.");

        // pi 0.73.1 exits 0 in JSON mode whatever the model said: the verdict is the stream's.
        run.assert_exit(0);
        assert!(!summary.succeeded(), "{run}");
        let done = summary.finished.as_ref().expect("a finished event");
        assert!(done.is_error);
        assert_eq!(done.stop_reason.as_deref(), Some("error"));
        assert_eq!(done.api_error_status, Some(status), "{run}");
        assert_eq!(summary.failures.len(), 1, "{run}");
        assert!(summary.failures[0].contains("scripted error"), "{run}");
        assert_eq!(served(&server), [Served::Turn(0)], "{run}");
    }
}

//! Agent adapters: one per agent CLI a worker can run (Claude Code, Codex, pi, any
//! command), behind one interface, chosen per config (`[agent] kind`).
//!
//! An adapter knows three things about its CLI: the command line that starts or resumes a
//! worker ([`Adapter::argv`]; the prompt always goes on stdin), the non-secret settings it
//! runs with ([`Adapter::fixed_env`]), and how to read its output: each stdout line becomes
//! zero or more [`AgentEvent`]s ([`Adapter::parse_line`]), the one event type the rest of
//! executor uses (the watchdog asks [`AgentEvent::is_meaningful`], the runner reads worker
//! messages from [`AgentEvent::protocol_lines`] and the verdict from [`Summary`]).
//!
//! What an adapter must never do:
//! - hold or read credentials, or pass the orchestrator's environment on: the worker's whole
//!   environment is built by the runner (see [`crate::supervisor::WorkerSpec::env`]); an
//!   adapter only adds [`Adapter::fixed_env`], none of it secret;
//! - fail a run over output it does not understand: an unknown event type, a line that is not
//!   JSON, a truncated line all become [`AgentEvent::Other`] (the raw line stays in the
//!   transcript), never a panic or an error;
//! - spawn anything: it builds argv and reads lines; the supervisor runs the process.
//!
//! Facts about the CLIs' output are in `shared/fixtures/agents/README.md` (pi's in
//! `tests/fixtures/pi/README.md`), and the tests of each adapter read those captured
//! transcripts.

pub mod claude;
pub mod codex;
pub mod command;
pub mod event;
pub mod pi;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde_json::Value;
use thiserror::Error;

pub use event::{is_protocol_line, AgentEvent, Finished, Summary, ToolUse, Usage};

/// The [`AgentEvent::Other`] kind of an output line that is not JSON (from an adapter that
/// expects JSON).
pub const NOT_JSON: &str = "not_json";

#[derive(Debug, Error, PartialEq, Eq)]
pub enum AgentError {
    #[error("agent.kind = \"{kind}\", but `{program}` is not an executable (looked for on PATH, or at agent.program)")]
    NotFound { kind: &'static str, program: String },
    #[error("agent.kind = \"command\" needs agent.command, the worker's argv")]
    EmptyCommand,
    #[error("agent.kind = \"{kind}\" is not supported yet")]
    Unsupported { kind: &'static str },
    #[error("agent.kind = \"auto\" found no agent CLI: looked for `claude`, `codex` and `pi` in {path}; install Claude Code (`npm install -g @anthropic-ai/claude-code`), Codex (`npm install -g @openai/codex`) or pi (`npm install -g @mariozechner/pi-coding-agent`), or name one with agent.kind and agent.program (agent.kind = \"example\" runs the bundled example worker, which does no real work)")]
    NoAgent { path: String },
}

/// Which agent session a worker runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Session {
    /// A new session; `id` is the id executor chose, where the agent lets it choose (Claude's
    /// `--session-id`, a UUID). Otherwise the agent names it in
    /// [`AgentEvent::SessionStarted`].
    New { id: Option<String> },
    /// Continue this session (the id from [`AgentEvent::SessionStarted`] or [`Summary`]).
    Resume { id: String },
}

impl Default for Session {
    fn default() -> Self {
        Session::New { id: None }
    }
}

/// What one worker is started with, beyond its prompt. Each adapter uses what its CLI
/// supports and ignores the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invocation {
    pub session: Session,
    /// Claude: the settings file installing the hook (see [`claude::hook_settings`]).
    pub settings: Option<PathBuf>,
    /// Claude: tools allowed without asking (`--allowedTools`). pi: the only tools it has
    /// (`--tools`, see [`pi::tool_list`]).
    pub allowed_tools: Vec<String>,
    /// Claude and pi: appended to the system prompt (the worker message format).
    pub append_system_prompt: Option<String>,
    /// Claude, pi, and Codex on a new session.
    pub model: Option<String>,
    /// Claude: `--max-turns`.
    pub max_turns: Option<u32>,
    /// The whole set of tools the worker has (a worker task file's `capabilities.tools`),
    /// in the agent's own names: Claude `--tools`, pi `--tools` (instead of
    /// `allowed_tools`); Codex, which has no tool list, runs `--sandbox read-only` when the
    /// set holds none of `write`, `edit` and `bash`. `None`: the agent's usual tools.
    pub tools: Option<Vec<String>>,
    /// The worker runs inside executor's wall, which replaces the agent's own sandbox:
    /// Codex's (bubblewrap too) cannot start nested, so it is switched off, and a read-only
    /// tool set gets a read-only worktree from the wall instead (see [`Invocation::read_only`]).
    pub confined: bool,
}

impl Invocation {
    /// The tool set holds none of `write`, `edit` and `bash`: the worker only reads.
    pub fn read_only(&self) -> bool {
        self.tools.as_ref().is_some_and(|tools| {
            !tools
                .iter()
                .any(|t| matches!(t.to_ascii_lowercase().as_str(), "write" | "edit" | "bash"))
        })
    }
}

/// Which agent CLI workers run (the config's `[agent] kind`, converted by the config layer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AgentKind {
    /// Claude Code if installed, else Codex, else pi; none found is an error.
    #[default]
    Auto,
    Claude,
    Codex,
    Pi,
    Command,
    /// The bundled example worker: writes EXECUTOR_EXAMPLE.md, no real work.
    Example,
}

/// What an adapter is chosen from: the adapter's own settings, so this module never reads
/// the config's types (the config layer builds these from `[agent]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentSettings {
    pub kind: AgentKind,
    /// argv of the worker when `kind` is `Command`.
    pub command: Vec<String>,
    /// The agent CLI when it is not on `PATH` under its own name.
    pub program: Option<PathBuf>,
}

/// One agent CLI, ready to start workers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adapter {
    /// Claude Code at `program`.
    Claude { program: PathBuf },
    /// Codex at `program`.
    Codex { program: PathBuf },
    /// pi at `program`.
    Pi { program: PathBuf },
    /// Any program; `argv` is its whole command line.
    Command { argv: Vec<String> },
}

impl Adapter {
    /// `claude`, `codex`, `pi` or `command`, for logs and the run record.
    pub fn name(&self) -> &'static str {
        match self {
            Adapter::Claude { .. } => "claude",
            Adapter::Codex { .. } => "codex",
            Adapter::Pi { .. } => "pi",
            Adapter::Command { .. } => "command",
        }
    }

    /// What a worker spent, from its result event: tokens normalised as
    /// [`crate::core::spend`] says (Codex counts cached tokens in its `input_tokens`, the
    /// others do not), turns (a Codex process is one turn), and the agent's own cost.
    pub fn spend(&self, finished: &Finished) -> crate::core::spend::Spend {
        let usage = finished.usage.unwrap_or_default();
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let codex = matches!(self, Adapter::Codex { .. });
        let fresh = if codex {
            usage
                .input_tokens
                .saturating_sub(usage.cache_read_input_tokens)
        } else {
            usage
                .input_tokens
                .saturating_add(usage.cache_creation_input_tokens)
        };
        let turns = match finished.num_turns {
            Some(turns) => i64::from(turns),
            None if codex => 1,
            None => 0,
        };
        crate::core::spend::Spend {
            input_tokens: count(fresh),
            output_tokens: count(usage.output_tokens),
            cached_tokens: count(usage.cache_read_input_tokens),
            turns,
            // A cost that is not a number of dollars is no cost at all.
            cost_usd: finished
                .total_cost_usd
                .filter(|c| c.is_finite() && *c >= 0.0),
            priced: false,
        }
    }

    /// Which agent this is, for the wall (where its configuration lives, its model API).
    pub fn family(&self) -> crate::sandbox::AgentFamily {
        match self {
            Adapter::Claude { .. } => crate::sandbox::AgentFamily::Claude,
            Adapter::Codex { .. } => crate::sandbox::AgentFamily::Codex,
            Adapter::Pi { .. } => crate::sandbox::AgentFamily::Pi,
            Adapter::Command { .. } => crate::sandbox::AgentFamily::Command,
        }
    }

    /// The worker's command line. The prompt is not in it: it goes on the worker's stdin.
    pub fn argv(&self, invocation: &Invocation) -> Vec<String> {
        match self {
            Adapter::Claude { program } => claude::argv(program, invocation),
            Adapter::Codex { program } => codex::argv(program, invocation),
            Adapter::Pi { program } => pi::argv(program, invocation),
            Adapter::Command { argv } => command::argv(argv),
        }
    }

    /// The command line of a call that only answers (the analyzer's): [`Adapter::argv`]
    /// with no tools, and the final answer asked for in the shape of the JSON Schema
    /// `schema` where the CLI can (Claude: see [`claude::answer_only_args`]; it arrives as
    /// [`Finished::structured_output`]; pi: see [`pi::answer_only_argv`], no tools). Other
    /// agents get their usual argv; all but Claude's prompt must ask for the shape in words.
    pub fn answer_only_argv(&self, invocation: &Invocation, schema: Option<&Value>) -> Vec<String> {
        match self {
            Adapter::Claude { .. } => {
                let mut argv = self.argv(invocation);
                argv.extend(claude::answer_only_args(schema));
                argv
            }
            Adapter::Pi { program } => pi::answer_only_argv(program, invocation),
            Adapter::Codex { .. } | Adapter::Command { .. } => self.argv(invocation),
        }
    }

    /// The events one stdout line means. Never fails; stderr is not parsed (it is kept in
    /// the transcript only).
    pub fn parse_line(&self, line: &str) -> Vec<AgentEvent> {
        match self {
            Adapter::Claude { .. } => claude::parse_line(line),
            Adapter::Codex { .. } => codex::parse_line(line),
            Adapter::Pi { .. } => pi::parse_line(line),
            Adapter::Command { .. } => command::parse_line(line),
        }
    }

    /// Whether a later worker can continue this one's session ([`Session::Resume`]).
    pub fn supports_resume(&self) -> bool {
        matches!(
            self,
            Adapter::Claude { .. } | Adapter::Codex { .. } | Adapter::Pi { .. }
        )
    }

    /// Whether executor can choose a new session's id ([`Session::New`] with an id), so it
    /// can be recorded before the worker starts.
    pub fn chooses_session_id(&self) -> bool {
        matches!(self, Adapter::Claude { .. })
    }

    /// Environment variables this agent always runs with. None is a secret; the runner adds
    /// `HOME`, `PATH` and whatever else it decides the worker gets.
    pub fn fixed_env(&self) -> &'static [(&'static str, &'static str)] {
        match self {
            Adapter::Claude { .. } => &claude::FIXED_ENV,
            Adapter::Pi { .. } => &pi::FIXED_ENV,
            Adapter::Codex { .. } | Adapter::Command { .. } => &[],
        }
    }
}

/// Folders agent CLIs' installers put them in, searched after `PATH`: a service (cron, the
/// printed systemd and launchd units) runs without the owner's login `PATH`, so `claude`
/// in `~/.local/bin` would otherwise not be seen. `~` ones only with a `home`.
const USUAL_HOME_FOLDERS: [&str; 4] =
    [".local/bin", ".npm-global/bin", ".bun/bin", ".claude/local"];
const USUAL_FOLDERS: [&str; 2] = ["/usr/local/bin", "/opt/homebrew/bin"];

/// `path` with the usual install folders of agent CLIs after it (those not in it already),
/// the `PATH` agents are looked for on.
pub fn agent_search_path(path: Option<&OsStr>, home: Option<&Path>) -> std::ffi::OsString {
    let mut folders: Vec<PathBuf> = path
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    let home_folders = home
        .filter(|home| home.is_absolute())
        .into_iter()
        .flat_map(|home| USUAL_HOME_FOLDERS.iter().map(move |f| home.join(f)));
    for folder in home_folders.chain(USUAL_FOLDERS.iter().map(PathBuf::from)) {
        if !folders.contains(&folder) {
            folders.push(folder);
        }
    }
    // A folder holding the separator cannot be joined; it is dropped rather than fail.
    let joinable: Vec<PathBuf> = folders
        .into_iter()
        .filter(|f| std::env::join_paths([f]).is_ok())
        .collect();
    std::env::join_paths(joinable).unwrap_or_default()
}

/// The adapter `[agent]` asks for. `auto` takes Claude Code if `claude` is on `path`, else
/// Codex if `codex` is, else pi if `pi` is, else fails: it never falls back to the example
/// worker, which would mark real tasks done. Only `example` runs the bundled example
/// worker at `example_worker`. `path` is the
/// `PATH` to search (the orchestrator's, passed in so this stays testable); programs are
/// resolved to absolute paths, since a worker's environment is built from scratch.
pub fn for_config(
    section: &AgentSettings,
    example_worker: &Path,
    path: Option<&OsStr>,
) -> Result<Adapter, AgentError> {
    let found = |kind: &'static str, program: &str| {
        find_program(program, path).ok_or_else(|| AgentError::NotFound {
            kind,
            program: program.to_string(),
        })
    };
    // `agent.program` names the CLI when it is not on PATH under its usual name: a path is
    // taken as it is (it must be an executable file), a bare name is looked up.
    let configured = |kind: &'static str, default: &str| match &section.program {
        Some(program) if program.components().count() > 1 || program.is_absolute() => {
            if is_executable(program) {
                Ok(program.clone())
            } else {
                Err(AgentError::NotFound {
                    kind,
                    program: program.display().to_string(),
                })
            }
        }
        Some(program) => found(kind, &program.to_string_lossy()),
        None => found(kind, default),
    };
    match section.kind {
        AgentKind::Auto => Ok(if let Some(program) = find_program(claude::PROGRAM, path) {
            Adapter::Claude { program }
        } else if let Some(program) = find_program(codex::PROGRAM, path) {
            Adapter::Codex { program }
        } else if let Some(program) = find_program(pi::PROGRAM, path) {
            Adapter::Pi { program }
        } else {
            return Err(AgentError::NoAgent {
                path: match path {
                    Some(path) if !path.is_empty() => {
                        format!("PATH={}", path.to_string_lossy())
                    }
                    _ => "an empty PATH".to_string(),
                },
            });
        }),
        AgentKind::Example => Ok(Adapter::Command {
            argv: vec![example_worker.to_string_lossy().into_owned()],
        }),
        AgentKind::Claude => Ok(Adapter::Claude {
            program: configured("claude", claude::PROGRAM)?,
        }),
        AgentKind::Codex => Ok(Adapter::Codex {
            program: configured("codex", codex::PROGRAM)?,
        }),
        AgentKind::Pi => Ok(Adapter::Pi {
            program: configured("pi", pi::PROGRAM)?,
        }),
        AgentKind::Command => {
            let (program, args) = section
                .command
                .split_first()
                .ok_or(AgentError::EmptyCommand)?;
            if program.is_empty() {
                return Err(AgentError::EmptyCommand);
            }
            // A bare name is looked up now, an absolute path must be an executable now; a
            // relative path is the worktree's (the runner's pre-flight looks for it in the
            // repository).
            let program = if Path::new(program).is_absolute() {
                if !is_executable(Path::new(program)) {
                    return Err(AgentError::NotFound {
                        kind: "command",
                        program: program.clone(),
                    });
                }
                program.clone()
            } else if program.contains('/') {
                program.clone()
            } else {
                found("command", program)?.to_string_lossy().into_owned()
            };
            let mut argv = vec![program];
            argv.extend(args.iter().cloned());
            Ok(Adapter::Command { argv })
        }
    }
}

pub use crate::supervisor::program::{find_program, is_executable};

/// A line of a JSON-lines stream as JSON; a blank line is no event, a line that is not JSON
/// is one [`AgentEvent::Other`] (logged, never fatal).
pub(crate) fn parse_json_line(line: &str) -> Result<Value, Vec<AgentEvent>> {
    let line = line.trim();
    if line.is_empty() {
        return Err(Vec::new());
    }
    serde_json::from_str(line).map_err(|error| {
        tracing::debug!(
            %error,
            line = %event::excerpt(line, 200),
            "agent output line is not JSON; kept in the transcript, ignored"
        );
        vec![AgentEvent::other(NOT_JSON)]
    })
}

/// A captured agent transcript from `../shared/fixtures/agents/` (beside the crate, as
/// CI lays it out).
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../shared/fixtures/agents/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn finished_of(adapter: &Adapter, line: &str) -> Finished {
        adapter
            .parse_line(line)
            .into_iter()
            .find_map(|e| match e {
                AgentEvent::Finished(f) => Some(*f),
                _ => None,
            })
            .expect("a result event")
    }

    #[test]
    fn a_workers_spend_counts_cached_tokens_once_whichever_agent_reported_them() {
        let claude = Adapter::Claude {
            program: "claude".into(),
        };
        let codex = Adapter::Codex {
            program: "codex".into(),
        };
        // The captured transcripts' result events.
        let result = fixture("claude_stream.jsonl")
            .lines()
            .find(|l| l.contains("\"type\":\"result\""))
            .expect("a result")
            .to_string();
        let spend = claude.spend(&finished_of(&claude, &result));
        assert_eq!(
            (spend.input_tokens, spend.output_tokens, spend.turns),
            (200, 40, 2)
        );
        assert_eq!(spend.cost_usd, Some(0.0016));
        // Claude's input_tokens leave out the cache; what it wrote to the cache was read fresh.
        let cached = result
            .replace(
                "\"cache_creation_input_tokens\":0",
                "\"cache_creation_input_tokens\":50",
            )
            .replace(
                "\"cache_read_input_tokens\":0",
                "\"cache_read_input_tokens\":900",
            );
        let spend = claude.spend(&finished_of(&claude, &cached));
        assert_eq!((spend.input_tokens, spend.cached_tokens), (250, 900));
        // Codex's input_tokens hold its cached ones; it reports no cost and one turn.
        let line = r#"{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":1000,"cache_write_input_tokens":0,"output_tokens":40,"reasoning_output_tokens":0}}"#;
        let spend = codex.spend(&finished_of(&codex, line));
        assert_eq!(
            (spend.input_tokens, spend.cached_tokens, spend.turns),
            (200, 1000, 1)
        );
        assert_eq!(spend.cost_usd, None);
    }
    use std::ffi::OsString;
    use std::fs;

    fn section(kind: AgentKind, command: &[&str]) -> AgentSettings {
        AgentSettings {
            kind,
            command: command.iter().map(|s| s.to_string()).collect(),
            ..AgentSettings::default()
        }
    }

    fn install(folder: &Path, name: &str, mode: u32) -> PathBuf {
        let program = folder.join(name);
        fs::write(&program, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&program, fs::Permissions::from_mode(mode)).unwrap();
        program
    }

    fn path_of(folders: &[&Path]) -> OsString {
        std::env::join_paths(folders).unwrap()
    }

    const EXAMPLE: &str = "/opt/executor/example-worker.sh";

    #[test]
    fn auto_prefers_claude_then_codex_then_pi_and_never_the_example_worker() {
        let one = tempfile::tempdir().unwrap();
        let two = tempfile::tempdir().unwrap();
        let empty = tempfile::tempdir().unwrap();
        let codex = install(one.path(), "codex", 0o755);
        let claude = install(two.path(), "claude", 0o755);
        let auto = section(AgentKind::Auto, &[]);
        let example = Path::new(EXAMPLE);

        let both = path_of(&[one.path(), two.path()]);
        assert_eq!(
            for_config(&auto, example, Some(&both)),
            Ok(Adapter::Claude { program: claude })
        );
        let codex_only = path_of(&[empty.path(), one.path()]);
        assert_eq!(
            for_config(&auto, example, Some(&codex_only)),
            Ok(Adapter::Codex { program: codex })
        );
        let neither = path_of(&[empty.path()]);
        let none = for_config(&auto, example, Some(&neither)).unwrap_err();
        assert_eq!(
            none,
            AgentError::NoAgent {
                path: format!("PATH={}", empty.path().display())
            }
        );
        assert!(none.to_string().contains("agent.kind"), "{none}");
        assert_eq!(
            for_config(&auto, example, None),
            Err(AgentError::NoAgent {
                path: "an empty PATH".into()
            })
        );
        // Only a workspace that asks for it runs the example worker.
        assert_eq!(
            for_config(&section(AgentKind::Example, &[]), example, Some(&neither)),
            Ok(Adapter::Command {
                argv: vec![EXAMPLE.to_string()]
            })
        );
    }

    #[test]
    fn agents_are_looked_for_in_their_usual_install_folders_after_path() {
        let home = Path::new("/home/owner");
        let searched =
            agent_search_path(Some(OsStr::new("/usr/bin:/bin:/usr/local/bin")), Some(home));
        let folders: Vec<PathBuf> = std::env::split_paths(&searched).collect();
        assert_eq!(
            folders,
            [
                "/usr/bin",
                "/bin",
                "/usr/local/bin",
                "/home/owner/.local/bin",
                "/home/owner/.npm-global/bin",
                "/home/owner/.bun/bin",
                "/home/owner/.claude/local",
                "/opt/homebrew/bin",
            ]
            .map(PathBuf::from)
        );
        // No HOME (or a relative one): only the fixed folders.
        let bare: Vec<PathBuf> =
            std::env::split_paths(&agent_search_path(None, Some(Path::new("rel")))).collect();
        assert_eq!(
            bare,
            ["/usr/local/bin", "/opt/homebrew/bin"].map(PathBuf::from)
        );
        // A `claude` in ~/.local/bin is found by a service with a bare PATH.
        let home = tempfile::tempdir().unwrap();
        fs::create_dir_all(home.path().join(".local/bin")).unwrap();
        let claude = install(&home.path().join(".local/bin"), "claude", 0o755);
        let path = agent_search_path(Some(OsStr::new("/usr/bin:/bin")), Some(home.path()));
        assert_eq!(
            for_config(
                &section(AgentKind::Auto, &[]),
                Path::new(EXAMPLE),
                Some(&path)
            ),
            Ok(Adapter::Claude { program: claude })
        );
    }

    #[test]
    fn a_file_that_is_not_executable_or_a_folder_is_not_a_program() {
        let folder = tempfile::tempdir().unwrap();
        install(folder.path(), "claude", 0o644);
        fs::create_dir(folder.path().join("codex")).unwrap();
        let path = path_of(&[folder.path()]);
        assert_eq!(find_program("claude", Some(&path)), None);
        assert_eq!(find_program("codex", Some(&path)), None);
        assert_eq!(
            for_config(
                &section(AgentKind::Claude, &[]),
                Path::new(EXAMPLE),
                Some(&path)
            ),
            Err(AgentError::NotFound {
                kind: "claude",
                program: "claude".into()
            })
        );
    }

    #[test]
    fn a_command_worker_runs_its_argv_with_a_bare_name_resolved() {
        let folder = tempfile::tempdir().unwrap();
        let python = install(folder.path(), "python3", 0o755);
        let path = path_of(&[folder.path()]);
        let example = Path::new(EXAMPLE);
        let adapter = for_config(
            &section(AgentKind::Command, &["python3", "worker.py", "--fast"]),
            example,
            Some(&path),
        )
        .unwrap();
        let expected = vec![
            python.to_string_lossy().into_owned(),
            "worker.py".to_string(),
            "--fast".to_string(),
        ];
        assert_eq!(adapter.argv(&Invocation::default()), expected);
        assert!(!adapter.supports_resume());
        let by_path = for_config(
            &section(AgentKind::Command, &["./bin/worker"]),
            example,
            None,
        )
        .unwrap();
        assert_eq!(by_path.argv(&Invocation::default()), ["./bin/worker"]);
        assert_eq!(
            for_config(&section(AgentKind::Command, &[]), example, Some(&path)),
            Err(AgentError::EmptyCommand)
        );
    }

    #[test]
    fn pi_is_found_on_path_or_at_agent_program() {
        let folder = tempfile::tempdir().unwrap();
        let empty = tempfile::tempdir().unwrap();
        let pi = install(folder.path(), "pi", 0o755);
        let example = Path::new(EXAMPLE);
        let kind = section(AgentKind::Pi, &[]);
        assert_eq!(
            for_config(&kind, example, Some(&path_of(&[folder.path()]))),
            Ok(Adapter::Pi {
                program: pi.clone()
            })
        );
        assert_eq!(
            for_config(&kind, example, Some(&path_of(&[empty.path()]))),
            Err(AgentError::NotFound {
                kind: "pi",
                program: "pi".into()
            })
        );
        let at_program = AgentSettings {
            program: Some(pi.clone()),
            ..kind
        };
        assert_eq!(
            for_config(&at_program, example, None),
            Ok(Adapter::Pi { program: pi })
        );
        // auto takes pi after Claude Code and Codex, before the example worker.
        assert_eq!(
            for_config(
                &section(AgentKind::Auto, &[]),
                example,
                Some(&path_of(&[folder.path()]))
            ),
            Ok(Adapter::Pi {
                program: folder.path().join("pi")
            })
        );
        install(folder.path(), "codex", 0o755);
        assert!(matches!(
            for_config(
                &section(AgentKind::Auto, &[]),
                example,
                Some(&path_of(&[folder.path()]))
            ),
            Ok(Adapter::Codex { .. })
        ));
    }

    #[test]
    fn each_adapter_reads_its_own_output() {
        let claude = Adapter::Claude {
            program: "/bin/claude".into(),
        };
        let codex = Adapter::Codex {
            program: "/bin/codex".into(),
        };
        let command = Adapter::Command {
            argv: vec!["w".into()],
        };
        let pi = Adapter::Pi {
            program: "/bin/pi".into(),
        };
        let init = r#"{"type":"system","subtype":"init","session_id":"s1"}"#;
        assert!(matches!(
            &claude.parse_line(init)[0],
            AgentEvent::SessionStarted { session_id, .. } if session_id == "s1"
        ));
        let thread = r#"{"type":"thread.started","thread_id":"t1"}"#;
        assert!(matches!(
            &codex.parse_line(thread)[0],
            AgentEvent::SessionStarted { session_id, .. } if session_id == "t1"
        ));
        let header = r#"{"type":"session","version":3,"id":"p1","timestamp":"t","cwd":"/w"}"#;
        assert!(matches!(
            &pi.parse_line(header)[0],
            AgentEvent::SessionStarted { session_id, .. } if session_id == "p1"
        ));
        assert_eq!(
            claude.parse_line(header),
            vec![AgentEvent::other("session")]
        );
        assert_eq!(
            claude.parse_line("[DONE:pr_ready]"),
            vec![AgentEvent::other(NOT_JSON)]
        );
        assert_eq!(
            command.parse_line("[DONE:pr_ready]")[0].protocol_lines(),
            vec!["[DONE:pr_ready]"]
        );
        assert_eq!(
            (claude.name(), codex.name(), pi.name(), command.name()),
            ("claude", "codex", "pi", "command")
        );
        assert!(claude.supports_resume() && codex.supports_resume() && pi.supports_resume());
        assert!(claude.chooses_session_id() && !codex.chooses_session_id());
        assert!(!pi.chooses_session_id());
        assert!(pi.fixed_env().contains(&("PI_OFFLINE", "1")));
        assert!(claude
            .fixed_env()
            .contains(&("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")));
        assert!(codex.fixed_env().is_empty());
        assert_eq!(
            claude.argv(&Invocation::default())[..2],
            ["/bin/claude", "-p"]
        );
        assert_eq!(codex.argv(&Invocation::default()).last().unwrap(), "-");
        assert_eq!(
            pi.argv(&Invocation::default()),
            ["/bin/pi", "--print", "--mode", "json"]
        );
    }

    #[test]
    fn claude_answers_without_tools_in_a_schema_pi_without_tools() {
        let schema = serde_json::json!({"type": "object"});
        let claude = Adapter::Claude {
            program: "/bin/claude".into(),
        };
        let argv = claude.answer_only_argv(&Invocation::default(), Some(&schema));
        assert_eq!(
            argv[argv.len() - 4..],
            ["--tools", "", "--json-schema", r#"{"type":"object"}"#]
        );
        for other in [
            Adapter::Codex {
                program: "/bin/codex".into(),
            },
            Adapter::Command {
                argv: vec!["w".into()],
            },
        ] {
            assert_eq!(
                other.answer_only_argv(&Invocation::default(), Some(&schema)),
                other.argv(&Invocation::default())
            );
        }
        let pi = Adapter::Pi {
            program: "/bin/pi".into(),
        };
        let with_tools = Invocation {
            allowed_tools: vec!["read".into()],
            ..Invocation::default()
        };
        assert_eq!(
            pi.answer_only_argv(&with_tools, Some(&schema)),
            ["/bin/pi", "--print", "--mode", "json", "--no-tools"]
        );
    }

    #[test]
    fn no_adapter_passes_secrets_in_its_environment() {
        for adapter in [
            Adapter::Claude {
                program: "c".into(),
            },
            Adapter::Codex {
                program: "c".into(),
            },
            Adapter::Pi {
                program: "c".into(),
            },
            Adapter::Command {
                argv: vec!["c".into()],
            },
        ] {
            for (key, _) in adapter.fixed_env() {
                let key = key.to_ascii_uppercase();
                assert!(
                    !["KEY", "TOKEN", "SECRET", "PASSWORD"]
                        .iter()
                        .any(|word| key.contains(word)),
                    "{key}"
                );
            }
        }
    }
}

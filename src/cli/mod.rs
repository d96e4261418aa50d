//! The `executor` command: argument parsing, output, exit codes, and the wiring of the
//! long-running daemon. Everything that decides lives in `core`; everything that stores
//! lives in `store`; this module only connects them to a terminal.
//!
//! Exit codes (docs/design.md §9): 0 done, 1 failure, 2 bad usage or bad input.

use crate::http::secret::ReadSecret as _;
mod analyze;
mod chat;
mod console;
mod credentials;
mod daemon;
pub(crate) mod doctor;
pub(crate) mod hook;
#[doc(hidden)]
pub mod hook_client;
/// The runner's end of the hook's relay, for benches that time the hook's round trip.
pub use hook::{serve_relay, HookRun, RelayListener};
mod import;
mod init;
mod lock;
mod mcp;
mod metrics;
mod output;
mod policy;
mod protocol;
#[cfg(test)]
mod readme_commands;
mod reanalyze;
mod record;
mod runs;
mod service;
mod service_setup;
mod shown;
mod stats;
mod tree;

/// The runner's lock file, beside the config file.
const RUNNER_LOCK: &str = "runner.lock";

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use thiserror::Error;

use crate::config::{self, ConfigError, Env, Settings};
use crate::core::clock::{Clock, SystemClock};
use crate::core::gid::{self, GidError};
use crate::core::queue::{QueueEvent, QueueStatus, UnknownStatus};
use crate::core::task::{body_of, compose_description, NewTask, UpsertOutcome};
use crate::ops::intake::PlansIntake;
use crate::ops::queue::{self as queue_ops, QueueOpError};
use crate::store::{self, Store};

#[derive(Debug, Parser)]
#[command(
    name = "executor",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("EXECUTOR_COMMIT"), ")"),
    about = "Runs an autonomous team of coding agents on your repositories",
    propagate_version = true
)]
pub struct Cli {
    /// The config file [default: ./executor.toml]
    #[arg(long, global = true, env = "EXECUTOR_CONFIG", value_name = "PATH")]
    config: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write executor.toml, roles/, prompts/, a plans folder and an empty SQLite database
    Init {
        /// Where to create the workspace
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Also make a throwaway git repository and one plan note for it, so that
        /// `executor run --once` shows the whole loop
        #[arg(long)]
        example: bool,
    },
    /// Enqueue a task (or update it, when its gid is already queued); prints its task_gid
    Add(AddArgs),
    /// List tasks
    Queue {
        /// Only tasks with this status
        #[arg(long, value_parser = parse_status)]
        status: Option<QueueStatus>,
        /// One JSON document on stdout
        #[arg(long)]
        json: bool,
    },
    /// One task with its runs, history and decisions
    Show {
        gid: String,
        #[arg(long)]
        json: bool,
    },
    /// Run one worker now from a conductor worker task file (taskVersion 1)
    Dispatch {
        /// The worker task file (JSON)
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Every run, newest first: state, task, branch or PR
    Runs {
        /// Only runs in this state
        #[arg(long, value_parser = ["queued", "in_progress", "pr", "complete", "abandoned"])]
        state: Option<String>,
        /// At most this many runs, the newest (the table says how to see the next ones)
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        limit: Option<u32>,
        /// Only runs older than run BEFORE (with `--limit`: the next page)
        #[arg(long, value_name = "RUN")]
        before: Option<i64>,
        #[arg(long)]
        json: bool,
    },
    /// One run's work logs, in order
    Logs {
        /// A run id, or a task gid (its latest run)
        run: String,
        /// Keep printing as the run's workers write, until the run ends
        #[arg(short, long)]
        follow: bool,
    },
    /// A task and its subtasks, as a tree with their states
    Tree {
        gid: String,
        #[arg(long)]
        json: bool,
    },
    /// The owner's approval: the task may be worked on
    Go { gid: String },
    /// The owner stops a run now: its worker is stopped (by whichever runner carries it,
    /// within a second), the run ends abandoned with the reason, the task goes back to the
    /// owner (`for_review`)
    Cancel {
        /// A run id, or a task gid (its latest run)
        target: String,
        /// Why, kept with the run and told in chat
        #[arg(long)]
        reason: Option<String>,
    },
    /// A fresh run of a task whose last run ended (complete or abandoned): the task is
    /// approved again and the runner takes it
    Retry { gid: String },
    /// The owner's rejection: the task is skipped
    Skip {
        gid: String,
        /// Why, kept in the task's history
        #[arg(long)]
        reason: Option<String>,
    },
    /// Checks before any work: the agent CLI and its login, git, the repository and its
    /// base branch, the verify command, the store, the confinement, every configured token,
    /// the chat personas, the service; each line ok, warn or FAIL with the fix (exit 1 when
    /// any failed)
    Doctor {
        #[arg(long)]
        json: bool,
        /// Check that tokens are present without calling the forge, the sources or chat
        #[arg(long)]
        offline: bool,
    },
    /// Outcomes of the runs started in the last days: success, the PR funnel, time and
    /// cost per completed run and merged PR, escalations; per agent, source and label
    Stats {
        /// How many days back
        #[arg(long, default_value_t = crate::ops::analytics::DEFAULT_DAYS)]
        days: u32,
        #[arg(long)]
        json: bool,
    },
    /// Serve the Model Context Protocol over stdio, for Claude Code or any MCP client
    /// (`claude mcp add executor -- executor mcp`)
    Mcp {
        /// Offer the read tools only (status, tasks, runs, logs, escalations)
        #[arg(long)]
        read_only: bool,
    },
    /// Health: daemon, queue, live workers, pending escalations, intake errors
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Take in the sources, work until nothing is actionable, then exit (for cron)
    Run {
        /// Required: one pass, then exit (`executor daemon` is the long-running form)
        #[arg(long, required = true)]
        once: bool,
    },
    /// Run in the foreground until stopped: take in the plans folder (watched) and the
    /// polled sources, analyze pending tasks, run approved ones and tend their PRs, and talk
    /// with the owner in chat
    Daemon,
    /// Keep executor running under systemd, launchd or cron
    Service {
        #[command(subcommand)]
        action: ServiceAction,
    },
    /// Take in tasks from a JSON lines file, one task per line (docs: "Analyzer: rule
    /// filters, importing, re-analysis")
    Import {
        /// The file: {"gid": …, "title": …, "body"?, "source"?, "priority"?, "notes"?, "facts"?} per line
        file: PathBuf,
    },
    /// Triage every pending task (rule filters, then the agent), then exit
    Analyze {
        /// Required: one pass until no pending task is left (the daemon analyzes on its own)
        #[arg(long, required = true)]
        once: bool,
    },
    /// Put back to pending the skipped tasks the current rule filters let through
    Reanalyze {
        /// The tasks to look at: skip
        #[arg(long, value_parser = parse_status)]
        status: QueueStatus,
        /// Only tasks from this source
        #[arg(long)]
        source: Option<String>,
        /// Show what would happen; change nothing
        #[arg(long)]
        dry_run: bool,
    },
    /// Questions waiting for the owner (escalations), with the command that answers each
    Escalations {
        /// Answered ones too
        #[arg(long)]
        all: bool,
        /// The newest this many alone (still oldest first)
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        limit: Option<u32>,
        #[arg(long)]
        json: bool,
    },
    /// The owner's answer to an escalation: the run resumes with it
    Decide {
        /// The escalation's id (`executor escalations` lists them)
        id: i64,
        #[arg(value_enum)]
        answer: Answer,
        /// Told to the worker with the answer
        #[arg(long)]
        note: Option<String>,
    },
    /// Worker messages: `protocol parse` reads lines on stdin and prints one JSON object per message
    Protocol {
        #[command(subcommand)]
        action: ProtocolAction,
    },
    /// Ask the role contracts (roles/*-policy.json) what they decide about an action
    Policy {
        #[command(subcommand)]
        action: PolicyAction,
    },
    /// An agent's permission hook (the runner installs it; not for use by hand)
    Hook {
        #[command(subcommand)]
        agent: HookAgent,
    },
    /// Print the shell completion script for SHELL (bash, zsh, fish, elvish, powershell),
    /// e.g. `executor completions bash > ~/.local/share/bash-completion/completions/executor`
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), e.g. `executor man > ~/.local/share/man/man1/executor.1`
    Man,
    /// Before every worker: its keeper (subreaper, the runner's heartbeat, the seal); the
    /// runner starts it, not for use by hand
    #[command(hide = true)]
    SandboxKeep {
        /// The keeper's options, `--`, and the worker's argv (read before this parser: see
        /// `crate::sandbox::keeper`)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Inside a worker's wall: pass the wall's loopback ports to executor's sockets and run
    /// the worker (the runner starts it; not for use by hand)
    #[command(hide = true)]
    SandboxBridge {
        /// PORT=SOCKET: listen on 127.0.0.1:PORT, pass each connection to SOCKET
        #[arg(long)]
        listen: Vec<String>,
        /// The worker's argv
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
enum ProtocolAction {
    /// Lines on stdin; one JSON object per recognised message on stdout; malformed lines
    /// are named on stderr and skipped (exit 1 if there were any)
    Parse,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Answer {
    Approve,
    Deny,
}

#[derive(Debug, Subcommand)]
enum PolicyAction {
    /// Print the decision (approve, deny, escalate), the rule and why
    Check {
        /// The contract: worker or conductor
        #[arg(long, default_value = "worker")]
        role: String,
        /// The action, as in `[REQUEST:<action>]`: push_branch, merge_pr, modify_files, ...
        #[arg(long, required_unless_present = "bash", conflicts_with = "bash")]
        action: Option<String>,
        /// Instead of an action: a shell command, classified as the hook classifies a Bash call
        #[arg(long)]
        bash: Option<String>,
        /// Decide as for a confined worker (inside the wall) [default: unconfined, the strict posture]
        #[arg(long)]
        confined: bool,
        /// Decide as for a worker the kernel holds to `[sandbox] max_processes` (a pids cgroup) [default: not held]
        #[arg(long)]
        process_cap: bool,
        /// The action's arguments, key=value each: branch=main path=../x
        args: Vec<String>,
        /// The run's worktree that paths are judged against [default: worktrees/check]
        #[arg(long)]
        worktree: Option<PathBuf>,
        /// The run's own branch, for rules on `$run_branch`
        #[arg(long)]
        branch: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum HookAgent {
    /// Claude Code's PreToolUse hook: hook JSON on stdin, the decision on stdout
    Claude {
        /// The run whose worker asks
        #[arg(long)]
        run: i64,
        /// The run's worktree (paths outside it are outside the worker's scope)
        #[arg(long)]
        worktree: PathBuf,
        /// The run's own branch
        #[arg(long)]
        branch: Option<String>,
        /// The contract to judge by (the runner's validated copy) [default: roles/worker-policy.json]
        #[arg(long)]
        contract: Option<PathBuf>,
        /// Inside the wall: where the orchestrator judges and records each call (a socket's
        /// absolute path, or tcp:PORT on 127.0.0.1)
        #[arg(long, value_parser = crate::agents::claude::RelayAddress::parse)]
        relay: Option<crate::agents::claude::RelayAddress>,
    },
}

#[derive(Debug, Subcommand)]
enum ServiceAction {
    /// Print this workspace's service definition (and, with --write, install it and leave
    /// an environment file for your secrets)
    Install {
        #[command(flatten)]
        manager: ManagerArgs,
        /// Also install it: the unit or agent file where the manager looks, or the line in
        /// your crontab
        #[arg(long)]
        write: bool,
    },
    /// Stop this workspace's service and remove its definition (the environment file and
    /// the logs stay)
    Uninstall {
        #[command(flatten)]
        manager: ManagerArgs,
    },
}

#[derive(Debug, Args)]
struct ManagerArgs {
    /// A systemd user unit running the daemon (the default on Linux)
    #[arg(long, conflicts_with_all = ["launchd", "cron"])]
    systemd: bool,
    /// A launchd user agent running the daemon (the default on macOS)
    #[arg(long, conflicts_with = "cron")]
    launchd: bool,
    /// A crontab line running `run --once` every five minutes
    #[arg(long)]
    cron: bool,
}

impl ManagerArgs {
    fn manager(&self) -> service::Manager {
        match (self.systemd, self.launchd, self.cron) {
            (true, _, _) => service::Manager::Systemd,
            (_, true, _) => service::Manager::Launchd,
            (_, _, true) => service::Manager::Cron,
            _ => service::Manager::native(),
        }
    }
}

#[derive(Debug, Args)]
struct AddArgs {
    /// The task's title (its description's first line)
    #[arg(long)]
    title: String,
    /// Markdown body of the task
    #[arg(long)]
    description: Option<String>,
    /// The task's unique id [default: generated]
    #[arg(long)]
    gid: Option<String>,
    /// Where the task came from
    #[arg(long, default_value = "cli")]
    source: String,
    /// Priority, a whole number (kept as given; sources and the analyzer set it too)
    #[arg(long, allow_negative_numbers = true)]
    priority: Option<i64>,
    /// A goal: a planner splits it into subtasks first (it gets the first of
    /// `conductor.goal_labels`)
    #[arg(long)]
    goal: bool,
}

fn parse_status(text: &str) -> Result<QueueStatus, UnknownStatus> {
    text.parse()
}

/// A request the user can fix: exit code 2.
#[derive(Debug, Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// Runs the command line and turns the outcome into an exit code.
pub fn main() -> ExitCode {
    // Before any secret is read: no other process of this user may read this one's
    // memory or environment (`/proc/PID/environ`, ptrace). See the README's threat model.
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_dumpable(false);
    // The keeper starts before every worker: it skips the command line's parser.
    let mut args = std::env::args();
    if args.nth(1).as_deref() == Some("sandbox-keep") {
        return match crate::sandbox::keeper::Options::parse(args) {
            Ok(options) => {
                ExitCode::from(u8::try_from(crate::sandbox::keeper::run(options)).unwrap_or(1))
            }
            Err(why) => {
                eprintln!("error: sandbox-keep: {why}");
                ExitCode::from(2)
            }
        };
    }
    // Claude waits on its hook before every tool call: a walled hook is a thin client of
    // the runner's relay and skips the parser too.
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if let [hook, claude, rest @ ..] = argv.as_slice() {
        if let Some(run) = (hook == "hook" && claude == "claude")
            .then(|| hook_client::parse(rest))
            .flatten()
        {
            let code = hook_client::answer(&run, hook_client::judged_here);
            return ExitCode::from(u8::try_from(code).unwrap_or(1));
        }
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() { 2 } else { 0 };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    if let Command::SandboxBridge { listen, argv } = cli.command {
        return sandbox_bridge(&listen, argv);
    }
    let long_running = matches!(
        cli.command,
        Command::Daemon | Command::Run { .. } | Command::Analyze { .. }
    );
    init_tracing(long_running);
    // The runner and the daemon carry several runs at once: their tasks share the
    // machine's cores. A short command is one task and starts fastest on one thread.
    let mut builder = if long_running {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(exit_code(&error))
        }
    }
}

/// `executor sandbox-bridge`: exits with the worker's own code.
fn sandbox_bridge(listen: &[String], argv: Vec<String>) -> ExitCode {
    let listen = match listen
        .iter()
        .map(|l| crate::sandbox::bridge::parse_listen(l))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(listen) => listen,
        Err(why) => {
            eprintln!("error: sandbox-bridge --listen: {why}");
            return ExitCode::from(2);
        }
    };
    match crate::sandbox::bridge::run(listen, argv) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(error) => {
            eprintln!("error: sandbox-bridge: {error}");
            ExitCode::from(1)
        }
    }
}

/// 2 when the user asked for something impossible or gave bad input, else 1.
fn exit_code(error: &anyhow::Error) -> u8 {
    let bad_input = error.chain().any(|cause| {
        cause.is::<BadInput>()
            || cause.is::<ConfigError>()
            || cause.is::<GidError>()
            || cause.is::<crate::prompts::PromptError>()
            || cause.is::<crate::agents::AgentError>()
            || matches!(
                cause.downcast_ref::<QueueOpError>(),
                Some(QueueOpError::NotFound(_) | QueueOpError::Illegal { .. })
            )
    });
    if bad_input {
        2
    } else {
        1
    }
}

/// Colours only on a terminal, and never when `NO_COLOR` is set to anything but the empty
/// string (<https://no-color.org>).
fn use_color(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

fn init_tracing(long_running: bool) {
    use tracing_subscriber::EnvFilter;
    let default = if long_running { "info" } else { "warn" };
    let filter =
        EnvFilter::try_from_env("EXECUTOR_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(use_color(
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
            std::env::var_os("NO_COLOR").as_deref(),
        ))
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

async fn dispatch(cli: Cli) -> Result<()> {
    let config_path = cli.config.clone();
    match cli.command {
        Command::Init { dir, example } => init::run(&dir, example).await,
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut text = Vec::new();
            clap_complete::generate(shell, &mut command, "executor", &mut text);
            output::print_bytes(&text)
        }
        Command::Man => {
            let mut text = Vec::new();
            clap_mangen::Man::new(<Cli as clap::CommandFactory>::command())
                .render(&mut text)
                .context("cannot render the man page")?;
            output::print_bytes(&text)
        }
        Command::Protocol {
            action: ProtocolAction::Parse,
        } => {
            let stats = protocol::parse_stream(
                std::io::stdin().lock(),
                std::io::stdout().lock(),
                std::io::stderr().lock(),
            )
            .context("cannot read stdin or write stdout")?;
            if stats.malformed > 0 {
                anyhow::bail!(
                    "{} malformed message line(s) skipped (named above)",
                    stats.malformed
                );
            }
            Ok(())
        }
        Command::Policy {
            action:
                PolicyAction::Check {
                    role,
                    action,
                    bash,
                    confined,
                    process_cap,
                    args,
                    worktree,
                    branch,
                },
        } => {
            let settings = load_settings(config_path.as_deref())?;
            let what = match (action, bash) {
                (_, Some(command)) => policy::Checked::Bash(command),
                (Some(action), None) => policy::Checked::Action(action),
                (None, None) => {
                    return Err(BadInput("give --action or --bash".into()).into());
                }
            };
            policy::check(
                &settings,
                &role,
                &what,
                &args,
                worktree.as_deref(),
                branch.as_deref(),
                policy::Posture {
                    confined,
                    process_cap,
                },
            )
        }
        Command::Hook {
            agent:
                HookAgent::Claude {
                    run,
                    worktree,
                    branch,
                    contract,
                    relay,
                },
        } => {
            hook::claude(hook::HookRun {
                config: config_path.unwrap_or_else(|| PathBuf::from(config::FILE_NAME)),
                run_id: run,
                worktree,
                branch,
                contract,
                relay,
                process_cap: false,
                confined: false,
                // Read from the config when the hook judges by itself; inside the wall the
                // orchestrator's relay knows them, and this side's fallback does without.
                base_branch: None,
                network: None,
            })
            .await
        }
        Command::Service { action } => {
            let settings = load_settings(config_path.as_deref())?;
            match action {
                ServiceAction::Install { manager, write } => {
                    service_setup::install(&settings, manager.manager(), write)
                }
                ServiceAction::Uninstall { manager } => {
                    service_setup::uninstall(&settings, manager.manager())
                }
            }
        }
        command => {
            let settings = load_settings(config_path.as_deref())?;
            let store = match store::open(&settings.storage).await {
                Ok(store) => store,
                Err(error) => {
                    let error = anyhow::Error::from(error)
                        .context(format!("cannot open {}", settings.storage.display()));
                    return Err(match command {
                        Command::Status { json } => unreachable_status(&settings, json, error),
                        _ => error,
                    });
                }
            };
            run_command(command, &settings, store).await
        }
    }
}

fn load_settings(explicit: Option<&Path>) -> Result<Settings> {
    let path = match explicit {
        Some(path) => path.to_path_buf(),
        None => {
            let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
            find_config(&here).ok_or_else(|| {
                BadInput(format!(
                    "no {} in {} or any folder above it: run `executor init` there, or pass --config PATH (or set EXECUTOR_CONFIG)",
                    config::FILE_NAME,
                    here.display()
                ))
            })?
        }
    };
    Ok(config::load(&path, &Env::from_process())?)
}

/// The workspace a command run from `start` (or a folder inside it) belongs to: the
/// nearest `executor.toml` in `start` or a folder above it, as git finds its repository.
fn find_config(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|folder| folder.join(config::FILE_NAME))
        .find(|candidate| candidate.is_file())
}

async fn run_command(command: Command, settings: &Settings, store: Arc<dyn Store>) -> Result<()> {
    let wake = wakes(&command);
    let shared = Arc::clone(&store);
    let done = carry_out(command, settings, store).await;
    // Told only after the change committed; a daemon that is not listening finds the change
    // on its next pass.
    if let (Ok(()), Some(wake)) = (&done, wake) {
        crate::store::wake::notify(shared.as_ref(), wake).await;
    }
    done
}

/// The wake-up a command sends a running daemon when it succeeds: those that change the
/// queue or answer an escalation.
fn wakes(command: &Command) -> Option<crate::store::wake::Wake> {
    use crate::store::wake::Wake;
    match command {
        Command::Add(_)
        | Command::Go { .. }
        | Command::Skip { .. }
        | Command::Import { .. }
        | Command::Cancel { .. }
        | Command::Retry { .. } => Some(Wake::Queue),
        Command::Reanalyze { dry_run, .. } => (!dry_run).then_some(Wake::Queue),
        Command::Decide { .. } => Some(Wake::Answer),
        _ => None,
    }
}

async fn carry_out(command: Command, settings: &Settings, store: Arc<dyn Store>) -> Result<()> {
    let clock = SystemClock;
    let shared = store;
    let store = shared.as_ref();
    match command {
        Command::Init { .. }
        | Command::Service { .. }
        | Command::Hook { .. }
        | Command::SandboxBridge { .. }
        | Command::SandboxKeep { .. }
        | Command::Policy { .. }
        | Command::Completions { .. }
        | Command::Man
        | Command::Protocol { .. } => unreachable_init(),
        Command::Add(args) => {
            let goal_label = settings.raw.conductor.goal_labels.first().cloned();
            add(store, &clock, args, goal_label).await
        }
        Command::Queue { status, json: true } => {
            output::print_queue_json(Arc::clone(&shared), status).await
        }
        Command::Queue {
            status,
            json: false,
        } => print_queue_table(store, status.as_ref()).await,
        Command::Tree { gid, json } => tree::print(store, &gid, json).await,
        Command::Runs {
            state,
            limit,
            before,
            json,
        } => {
            let page = runs::Page {
                state: state.as_deref(),
                limit,
                before,
            };
            runs::list(store, &page, json).await
        }
        Command::Logs { run, follow } => {
            let logs_dir = settings.root.join(&settings.raw.runner.logs_dir);
            runs::logs(store, &logs_dir, &run, follow).await
        }
        Command::Dispatch { file, json } => {
            dispatch_file(settings, Arc::clone(&shared), &file, json).await
        }
        Command::Show { gid, json } => {
            let shown = shown_task(store, &gid).await?;
            if json {
                output::print_json(&shown)
            } else {
                output::print_task(&shown, &configured_allow(settings))
            }
        }
        Command::Go { gid } => {
            if go_integrates(settings, store, &gid).await? {
                return Ok(());
            }
            owner_move(store, &clock, &gid, QueueEvent::Go, None).await
        }
        Command::Skip { gid, reason } => {
            owner_move(store, &clock, &gid, QueueEvent::Skip, reason).await
        }
        Command::Cancel { target, reason } => {
            cancel(settings, store, &clock, &target, reason.as_deref()).await
        }
        Command::Retry { gid } => {
            let moved = crate::ops::run::retry(store, &clock, &gid).await?;
            println!(
                "{gid}: {} -> {} (a fresh run starts when a runner takes it)",
                moved.from, moved.to
            );
            Ok(())
        }
        Command::Import { file } => import::run(store, &clock, &file).await,
        Command::Reanalyze {
            status,
            source,
            dry_run,
        } => {
            let filters = settings.raw.analyzer.filters()?;
            reanalyze::run(store, &filters, status, source.as_deref(), dry_run).await
        }
        Command::Escalations { all, limit, json } => {
            print_escalations(store, all, limit, json).await
        }
        Command::Decide { id, answer, note } => {
            decide(settings, store, id, answer, note.as_deref()).await
        }
        Command::Doctor { json, offline } => {
            let checks = doctor::checks(settings, store, offline).await;
            let healthy = if json {
                output::print_json(&checks)?;
                checks.iter().all(|c| c.level != doctor::Level::Fail)
            } else {
                doctor::print(&checks)
            };
            anyhow::ensure!(healthy, "executor doctor: a check failed (see above)");
            Ok(())
        }
        Command::Status { json } => match status_report(settings, store).await {
            Ok(report) if json => output::print_json(&report),
            Ok(report) => output::print_status(&report),
            Err(error) => Err(unreachable_status(settings, json, error)),
        },
        Command::Stats { days, json } => {
            let report = crate::ops::analytics::report(store, clock.now(), days).await?;
            if json {
                output::print_json(&report)
            } else {
                stats::print(&report)
            }
        }
        Command::Mcp { read_only } => mcp::serve(settings, Arc::clone(&shared), read_only).await,
        Command::Analyze { .. } => analyze::run_once(settings, Arc::clone(&shared)).await,
        Command::Run { .. } => {
            let _lock = lock::acquire(&settings.root.join(RUNNER_LOCK))?;
            account_outages(settings);
            crate::ops::service_pauses::install(Arc::clone(&shared), clock.now()).await;
            run_once(settings, Arc::clone(&shared), &clock).await
        }
        Command::Daemon => {
            let _lock = lock::acquire(&settings.root.join(RUNNER_LOCK))?;
            account_outages(settings);
            crate::ops::service_pauses::install(Arc::clone(&shared), clock.now()).await;
            daemon::run(settings, Arc::clone(&shared), &clock).await
        }
    }
}

/// The runner (holding the lock) gives its store outages' account to `executor status`:
/// one left by a runner that died goes first.
fn account_outages(settings: &Settings) {
    let file = outage_account_file(settings);
    let _ = std::fs::remove_file(&file);
    crate::runner::store_health::this_process().mirror_to(file);
}

/// Where the runner of this workspace writes its outage account.
fn outage_account_file(settings: &Settings) -> std::path::PathBuf {
    settings
        .root
        .join(crate::runner::store_health::ACCOUNT_FILE)
}

fn unreachable_init() -> Result<()> {
    Err(anyhow::anyhow!(
        "init, service, policy and hook are handled before the store is opened"
    ))
}

/// `executor queue` as a table: each task with what its open run waits on.
async fn print_queue_table(store: &dyn Store, status: Option<&QueueStatus>) -> Result<()> {
    // A run waits on the owner only while it is not ended: those runs alone are read (a
    // state this version does not know is not one of them). Oldest first, so a task's
    // newest waiting run is the one kept.
    let waiting = store
        .runs_page(&crate::core::run::RunState::OPEN, None, u32::MAX)
        .await?
        .iter()
        .rev()
        .filter_map(|run| Some((run.task_gid.clone(), runs::waiting_on(run)?)))
        .collect();
    output::print_queue(&store.tasks(status).await?, &waiting, output::columns())
}

/// `executor cancel`: the run stopped and abandoned, the owner told.
async fn cancel(
    settings: &Settings,
    store: &dyn Store,
    clock: &SystemClock,
    target: &str,
    reason: Option<&str>,
) -> Result<()> {
    let cancelled = crate::ops::run::cancel(
        store,
        clock,
        &crate::runner::drive::this_runner(),
        target,
        reason.unwrap_or("no reason given"),
    )
    .await?;
    let run = &cancelled.run;
    let notices = crate::chat::Notices::new(chat::routing(settings));
    notices
        .tell_abandoned(
            store,
            crate::core::outbox::Priority::Info,
            &run.task_gid,
            run.id,
            &cancelled.why,
        )
        .await;
    match &cancelled.carried_by {
        Some(holder) => println!(
            "run {} of {}: cancelled; its runner ({holder}) stops its worker within a second",
            run.id, run.task_gid
        ),
        None => println!("run {} of {}: cancelled", run.id, run.task_gid),
    }
    Ok(())
}

/// `executor escalations`: the newest `limit` (oldest first), each with its run's window.
async fn print_escalations(
    store: &dyn Store,
    all: bool,
    limit: Option<u32>,
    json: bool,
) -> Result<()> {
    let mut escalations = store.escalations(!all).await?;
    // Oldest first, the newest `limit` kept: each shown one reads its run's last
    // messages, so a long history is not read message by message.
    if let Some(limit) = limit {
        let older = escalations.len().saturating_sub(limit as usize);
        escalations.drain(..older);
    }
    if json {
        output::print_json(&escalations)
    } else {
        let mut windows = Vec::with_capacity(escalations.len());
        for escalation in &escalations {
            windows.push(match escalation.run_id {
                Some(run) => {
                    store
                        .messages(run, crate::runner::drive::MESSAGE_WINDOW)
                        .await?
                }
                None => Vec::new(),
            });
        }
        output::print_escalations(&escalations, &windows)
    }
}

async fn add(
    store: &dyn Store,
    clock: &SystemClock,
    args: AddArgs,
    goal_label: Option<String>,
) -> Result<()> {
    let (task, outcome) = add_task(store, clock, args, goal_label, "cli").await?;
    match outcome {
        UpsertOutcome::Created => {}
        UpsertOutcome::Updated => eprintln!("updated the existing task {}", task.task_gid),
        UpsertOutcome::Unchanged => eprintln!("task {} is already queued as given", task.task_gid),
    }
    println!("{}", task.task_gid);
    Ok(())
}

/// Adds (or retitles) the task `args` says, recorded as added by `actor`: `executor add`
/// and the MCP tool alike. A bad title, source or gid is [`BadInput`].
async fn add_task(
    store: &dyn Store,
    clock: &SystemClock,
    args: AddArgs,
    goal_label: Option<String>,
    actor: &str,
) -> Result<(crate::core::task::Task, UpsertOutcome)> {
    let title = args.title.trim();
    if title.is_empty() {
        return Err(BadInput("--title must not be empty".into()).into());
    }
    if title.contains('\n') {
        return Err(
            BadInput("--title must be one line (put the rest in --description)".into()).into(),
        );
    }
    if let Some(why) = crate::core::task::title_too_long(title) {
        return Err(BadInput(format!("--title: {why}")).into());
    }
    let source = args.source.trim();
    if source.is_empty() {
        return Err(BadInput("--source must not be empty".into()).into());
    }
    if let Some(why) = crate::core::task::reserved_source(source) {
        return Err(BadInput(format!("--source: {why}")).into());
    }
    let task_gid = match &args.gid {
        Some(given) => gid::validate(given)
            .map_err(|e| BadInput(format!("--gid: {e}")))?
            .to_string(),
        None => generated_gid(title, clock),
    };
    // Re-adding a gid without --description retitles the task and keeps its body.
    let body = match &args.description {
        Some(description) => description.clone(),
        None => store
            .task(&task_gid)
            .await?
            .and_then(|task| task.description)
            .map(|description| body_of(&description).to_string())
            .unwrap_or_default(),
    };
    let new = NewTask {
        task_gid,
        source: source.to_string(),
        description: compose_description(title, &body),
        notes: None,
        priority: args.priority,
        initial_status: QueueStatus::Pending,
    };
    let (task, outcome) = queue_ops::add(store, clock, &new, actor).await?;
    if args.goal {
        let mut facts: crate::core::facts::TaskFacts =
            match store.task_facts(&task.task_gid).await? {
                Some(text) => serde_json::from_str(&text).unwrap_or_default(),
                None => Default::default(),
            };
        let label = goal_label.unwrap_or_else(|| "goal".to_string());
        if !facts.labels.iter().any(|l| l.eq_ignore_ascii_case(&label)) {
            facts.labels.push(label);
        }
        store
            .save_task_facts(&task.task_gid, &serde_json::to_string(&facts)?, clock.now())
            .await?;
    }
    Ok((task, outcome))
}

/// `cli-<slug>-<hash>`: readable, and unique because the hash covers the time and pid.
fn generated_gid(title: &str, clock: &SystemClock) -> String {
    let now = clock.now();
    let seed = format!(
        "{title}\n{}\n{}",
        now.timestamp_nanos_opt().unwrap_or_default(),
        std::process::id()
    );
    let slug = gid::slug(title, 32);
    if slug.is_empty() {
        format!("cli-{}", gid::short_hash(&seed))
    } else {
        format!("cli-{slug}-{}", gid::short_hash(&seed))
    }
}

/// Records the owner's answer to escalation `id`, exactly once: a second answer changes
/// nothing and says so.
/// `executor show GID`'s document (also the console's `GET /api/v1/tasks/GID`).
pub(crate) async fn shown_task(store: &dyn Store, gid: &str) -> Result<output::ShownTask> {
    let task = store
        .task(gid)
        .await?
        .ok_or_else(|| QueueOpError::NotFound(gid.to_string()))?;
    let runs = store.runs(Some(gid)).await?;
    let events = store.events(gid).await?;
    let decisions = store.decisions(gid).await?;
    let net_refusals = store.net_refusals(gid).await?;
    let messages = match runs.last() {
        Some(run) => {
            store
                .messages(run.id, crate::runner::drive::MESSAGE_WINDOW)
                .await?
        }
        None => Vec::new(),
    };
    let facts = match store.task_facts(gid).await? {
        Some(json) => serde_json::from_str(&json).ok(),
        None => None,
    };
    let worked_on = match runs.last() {
        Some(run) => store
            .run_task_text(run.id)
            .await?
            .map(|task_text| output::WorkedOn {
                run_id: run.id,
                changed_since: task.description.as_deref() != Some(task_text.as_str()),
                task_text,
            }),
        None => None,
    };
    Ok(output::ShownTask {
        task,
        facts,
        runs,
        events,
        decisions,
        net_refusals,
        messages,
        worked_on,
        spend: crate::core::spend::TaskSpend::of(&store.spend(Some(gid)).await?),
    })
}

/// Where a spend day begins, from UTC midnight.
pub(crate) fn spend_day_offset(settings: &Settings) -> chrono::FixedOffset {
    settings.raw.budget.day_offset
}

/// `executor status`'s document (also the console's `GET /api/v1/status`).
pub(crate) async fn status_report(
    settings: &Settings,
    store: &dyn Store,
) -> Result<output::StatusReport> {
    let mut summary = store.summary().await?;
    // Workers recorded as started count only while their process lives: a runner that
    // was killed leaves its workers' records open.
    let host = crate::runner::drive::host();
    summary.live_workers =
        runs::live_workers(&store.open_workers(&host).await?, runs::process_alive);
    let outbox = store.outbox_backlog().await?;
    let now = SystemClock.now();
    let mut report =
        output::StatusReport::new(settings, summary, outbox, confinement(settings), now);
    report.changed_since_run = store.changed_since_run().await?;
    let spent = store.spend(None).await?;
    report.spend = crate::core::spend::SpendReport::of(&spent, now, spend_day_offset(settings));
    report.dispatch_paused = settings.raw.budget.day_over(&spent, now);
    report.agents_paused = paused_agents(store, now).await?;
    report.store_outage = crate::runner::store_health::read_account(&outage_account_file(settings));
    Ok(report)
}

/// `executor status` when the store does not answer: says so, with the runner's account of
/// the outage, and fails with the store's error.
fn unreachable_status(settings: &Settings, json: bool, error: anyhow::Error) -> anyhow::Error {
    let status = output::UnreachableStatus {
        config: settings.path.display().to_string(),
        storage: settings.storage.display(),
        store_reachable: false,
        error: format!("{error:#}"),
        store_outage: crate::runner::store_health::read_account(&outage_account_file(settings)),
    };
    let printed = if json {
        output::print_json(&status)
    } else {
        output::print_unreachable(&status)
    };
    match printed {
        Ok(()) => error.context("the store does not answer"),
        Err(print) => print.context(format!("{error:#}")),
    }
}

/// The agents whose workers wait for a usage limit's reset at `now`.
pub(crate) async fn paused_agents(
    store: &dyn Store,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<crate::core::usage_limit::AgentPause>> {
    Ok(store
        .agent_pauses()
        .await?
        .into_iter()
        .filter(|p| p.until > now)
        .collect())
}

async fn decide(
    settings: &Settings,
    store: &dyn Store,
    id: i64,
    answer: Answer,
    note: Option<&str>,
) -> Result<()> {
    use crate::core::record::Resolved;
    let resolution = match answer {
        Answer::Approve => "approve",
        Answer::Deny => "deny",
    };
    let by = format!("{} (cli)", whoami());
    match store
        .resolve_escalation(id, resolution, note, &by, SystemClock.now())
        .await?
    {
        None => Err(BadInput(format!(
            "no escalation {id} (`executor escalations --all` lists them)"
        ))
        .into()),
        Some(Resolved::NotAnEscalation(d)) => Err(BadInput(format!(
            "decision {id} is not an escalation: it was decided `{}` by rule {} and needs no answer",
            d.decision,
            d.rule_id.as_deref().unwrap_or("(default)")
        ))
        .into()),
        Some(Resolved::AlreadyResolved(d)) => {
            println!(
                "escalation {id} was already answered: {} at {}; nothing changed",
                d.resolution.as_deref().unwrap_or("?"),
                d.resolved_at
                    .map(|t| runs::local_time(&t))
                    .unwrap_or_default()
            );
            Ok(())
        }
        Some(Resolved::Recorded(d)) => {
            let run = d
                .run_id
                .map(|r| format!(" run {r}"))
                .unwrap_or_default();
            println!(
                "escalation {id}: {resolution} recorded;{run} of {} resumes with it on the runner's next pass",
                d.task_gid.as_deref().unwrap_or("?")
            );
            // The topic hears the owner's answer too, under the orchestrator's persona; the
            // runner delivers it.
            crate::chat::Notices::new(chat::routing(settings))
                .tell(
                    store,
                    crate::chat::Notice {
                        priority: crate::core::outbox::Priority::Info,
                        persona: crate::chat::Persona::Orchestrator,
                        task_gid: d.task_gid.clone(),
                        run_id: d.run_id,
                        body: format!(
                            "Escalation {id}: {resolution} recorded by {by}{}.",
                            note.map(|n| format!(" ({n})")).unwrap_or_default()
                        ),
                    },
                )
                .await;
            Ok(())
        }
    }
}

/// `executor go GID` on a run waiting at the integration gate answers that gate (approve);
/// false when there is no such gate open for `gid`.
async fn go_integrates(settings: &Settings, store: &dyn Store, gid: &str) -> Result<bool> {
    let waiting = store
        .decisions(gid)
        .await?
        .into_iter()
        .find(|d| d.is_pending() && d.action == crate::runner::drive::INTEGRATE);
    let Some(gate) = waiting else {
        return Ok(false);
    };
    decide(settings, store, gate.id, Answer::Approve, Some("go")).await?;
    Ok(true)
}

/// Who answers from this terminal, for the record.
fn whoami() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "owner".to_string())
}

async fn owner_move(
    store: &dyn Store,
    clock: &SystemClock,
    gid: &str,
    event: QueueEvent,
    detail: Option<String>,
) -> Result<()> {
    let (moved, task) = queue_ops::apply(store, clock, gid, event, "owner", detail).await?;
    println!("{}: {} -> {}", task.task_gid, moved.from, moved.to);
    Ok(())
}

async fn run_once(settings: &Settings, store: Arc<dyn Store>, clock: &SystemClock) -> Result<()> {
    doctor::preflight(settings)?;
    let runner = build_runner(settings, Arc::clone(&store))?;
    let chat = chat::build(settings, runner.settings.notices.clone()).await?;
    // The owner's replies since the last run, first, so an answer resumes its run now.
    if let (Some(receiver), false) = (
        &chat.receiver,
        chat.receive == crate::config::chat::Receive::None,
    ) {
        match receiver.catch_up(store.as_ref()).await {
            Ok(0) => {}
            Ok(n) => eprintln!("chat: took {n} new message(s) from the topic"),
            Err(error) => {
                eprintln!("warning: cannot read the chat topic ({error}); the owner's replies wait for the next run")
            }
        }
    }
    let mut sources = source_intakes(settings)?;
    // Notes not taken in: named now, the approved work runs all the same, exit 1 at the end.
    let mut not_taken_in = 0;
    if let Some(plans) = &settings.plans {
        let mut intake = PlansIntake::new(plans.clone());
        let report = intake.ingest(store.as_ref(), clock).await?;
        output::print_ingest(intake.dir(), &report);
        not_taken_in = report.errors.len();
    }
    // A source that cannot be read is reported (here, in the log and in `executor status`)
    // and the pass goes on with the others.
    let mut source_failures: Vec<String> = Vec::new();
    for source in &mut sources {
        match source.poll(store.as_ref(), clock).await {
            Ok(report) => eprintln!(
                "{}: {} new, {} updated, {} unchanged, {} closed upstream (skipped), {} closed before first seen (left out)",
                source.name(),
                report.created,
                report.updated,
                report.unchanged,
                report.closed,
                report.closed_unseen
            ),
            Err(error) => match error.wait() {
                // The service asked for a wait (a 429's Retry-After, kept past this
                // process): honoured, not a failure; a later run takes the source in.
                Some(wait) => eprintln!(
                    "{}: skipped: the service asked not to be called for {} s more ({error}); a later run takes it in",
                    source.name(),
                    wait.as_secs().max(1)
                ),
                None => {
                    eprintln!("{}: {error}; the other sources go on", source.name());
                    source_failures.push(format!("{}: {error}", source.name()));
                }
            },
        }
    }
    let _leases = LeaseKeeper::start(&runner);
    let mut failed = source_failures;
    let approved = runner.store.tasks(Some(&QueueStatus::Approved)).await?;
    if approved.is_empty() {
        eprintln!("no approved task to work on");
    } else {
        eprintln!(
            "{} approved task(s); workers: {} (at most {} at a time)",
            approved.len(),
            runner.adapter.argv(&Default::default()).join(" "),
            settings.raw.runner.max_workers
        );
    }
    work_until_idle(&runner, &mut failed).await;
    clean_worktrees(runner.store.as_ref(), &runner.settings).await;
    if let Some(deliverer) = &chat.deliverer {
        deliver_chat(deliverer, runner.store.as_ref()).await;
    }
    if not_taken_in > 0 {
        let runs = match failed.len() {
            0 => String::new(),
            n => format!("; {n} run(s) failed: {}", failed.join("; ")),
        };
        return Err(anyhow::anyhow!(
            "{not_taken_in} plan note(s) not taken in (named above, and in `executor status`){runs}"
        ));
    }
    fail_if_any(failed)
}

/// How long `run --once` keeps trying recovery for runs handed back in an outage.
const RECOVERY_PATIENCE: std::time::Duration = std::time::Duration::from_secs(15 * 60);
/// The wait between two tries.
const RECOVERY_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// The daemon's scheduler with the exit rule of `run --once`: recovery first, then every
/// pass work brings (subtasks made ready as the ones they depend on complete, parents,
/// the owner's answers, the record step's), one look at the open PRs once nothing else is
/// going, and out when no worker lives and nothing actionable is left. An answer given
/// while this runs is taken too; a run that escalates again waits for the next answer.
async fn work_until_idle(runner: &crate::runner::drive::Runner, failed: &mut Vec<String>) {
    use crate::runner::engine::{Note, PassKind, Scheduler};
    let mut engine = Scheduler::cleaning_at_the_end(runner.clone());
    engine.start();
    let mut looked_at_prs = !engine.has_prs();
    // Whether the last round did something (a run ended or failed, a parent moved): only
    // then can another look find new work. An approved task nobody can take yet (it waits
    // for its dependencies) is no work.
    // The first look is due whatever the first pass did (answers may wait for it).
    let mut progressed = true;
    // Runs handed back while the store was out of reach are carried on by recovery in this
    // same run, tried again while the store stays away, for as long as a write waits for it.
    let mut recovery_since: Option<std::time::Instant> = None;
    loop {
        if !engine.busy() && !progressed && engine.recovery_due() {
            let since = *recovery_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() < RECOVERY_PATIENCE {
                tokio::time::sleep(RECOVERY_RETRY).await;
                progressed = true;
            }
        }
        if !engine.busy() && std::mem::take(&mut progressed) {
            let looked = engine.wake().await;
            if looked.record_answers > 0 {
                eprintln!(
                    "record step: took the owner's answer to {} escalation(s)",
                    looked.record_answers
                );
            }
            progressed = looked.parents_moved;
        }
        if !engine.busy() && !looked_at_prs {
            // A run waiting for CI or for the owner is not actionable: it waits for the
            // next run.
            engine.look_at_prs(false);
            looked_at_prs = true;
        }
        if !engine.busy() && !progressed {
            return;
        }
        if !engine.busy() {
            // A parent moved: look again before going.
            continue;
        }
        let note = engine.next().await;
        engine.heard(&note).await;
        if let Note::Ended { kind, passed } = &note {
            match passed {
                Ok(passed) => {
                    progressed |= !passed.results.is_empty()
                        || !passed.failed.is_empty()
                        || !passed.handed_back.is_empty();
                    if *kind == PassKind::Recovery && passed.handed_back.is_empty() {
                        recovery_since = None;
                    }
                    if *kind == PassKind::Recovery && !passed.results.is_empty() {
                        eprint!("recovered ");
                    }
                    print_results(&passed.results);
                    failed.extend(passed.failed.iter().cloned());
                }
                // A pass that failed as a whole (the repository is not one, the store is
                // gone) did nothing: no progress, and said once however often it is met. A
                // recovery that failed is tried again (above) before it counts.
                Err(error) => {
                    let waited = engine.recovery_due()
                        && crate::runner::drive::store_out_of_reach(error)
                        && recovery_since.is_none_or(|since| since.elapsed() < RECOVERY_PATIENCE);
                    let retried = waited
                        || (*kind == PassKind::Recovery
                            && engine.recovery_due()
                            && recovery_since
                                .is_none_or(|since| since.elapsed() < RECOVERY_PATIENCE));
                    let error = format!("{error:#}");
                    if !retried && !failed.contains(&error) {
                        failed.push(error);
                    }
                }
            }
        }
    }
}

/// `executor dispatch FILE`: a malformed file is bad input naming the field (exit 2); a
/// worker that ends without `[DONE:…]` is a failure (exit 1), its record kept all the same.
async fn dispatch_file(
    settings: &Settings,
    store: Arc<dyn Store>,
    file: &Path,
    json: bool,
) -> Result<()> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| BadInput(format!("cannot read {}: {e}", file.display())))?;
    let task = crate::conductor::worker_task::parse(&file.display().to_string(), &text)
        .map_err(|e| BadInput(e.to_string()))?;
    if !settings.raw.runner.worktrees {
        return Err(BadInput(
            "executor dispatch needs runner.worktrees = true: a worker task runs in the worktree its file names".into(),
        )
        .into());
    }
    let runner = build_runner(settings, store)?;
    let _leases = LeaseKeeper::start(&runner);
    let dispatched = crate::runner::drive::dispatch(&runner, &task).await?;
    if json {
        output::print_json(&dispatched)?;
    } else {
        println!("{}", dispatched.record.display());
    }
    eprintln!(
        "run {} of {}: {} (record: {})",
        dispatched.run_id,
        dispatched.task_gid,
        dispatched.why,
        dispatched.record.display()
    );
    if dispatched.done {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "the worker of {} ended without [DONE]: {}",
            dispatched.task_gid,
            dispatched.why
        ))
    }
}

/// Sends what this run told the owner (and whatever earlier runs could not). A notifier
/// that is down keeps its messages for the next run; that is no failure of this one.
async fn deliver_chat(deliverer: &crate::chat::deliver::Deliverer, store: &dyn Store) {
    match deliverer.deliver_due(store).await {
        Ok(report) => {
            if report.sent > 0 {
                eprintln!("chat: delivered {} message(s)", report.sent);
            }
            if !report.failing.is_empty() {
                let waiting = store
                    .outbox_backlog()
                    .await
                    .map(|b| b.iter().map(|n| n.undelivered).sum::<i64>())
                    .unwrap_or_default();
                eprintln!(
                    "warning: chat: {} cannot be reached; {waiting} message(s) are kept and sent in order later (`executor status` shows them)",
                    report.failing.join(", ")
                );
            }
        }
        Err(error) => eprintln!("warning: cannot read the outbox: {error}"),
    }
}

fn print_results(results: &[crate::runner::drive::RunResult]) {
    for result in results {
        match result.waiting_on {
            Some(escalation) => eprintln!(
                "run {} of {}: waiting for the owner (escalation {escalation}: `executor escalations` shows it, `executor decide {escalation} approve|deny` answers it)",
                result.run_id, result.task_gid
            ),
            None => eprintln!(
                "run {} of {}: {} (verification failures: {})",
                result.run_id, result.task_gid, result.state, result.ci_attempts
            ),
        }
    }
}

/// Renews the runner's run leases while it lives (see [`crate::runner::drive::keep_leases`]).
pub(crate) struct LeaseKeeper(tokio::task::JoinHandle<()>);

impl LeaseKeeper {
    pub(crate) fn start(runner: &crate::runner::drive::Runner) -> Self {
        Self(tokio::spawn(crate::runner::drive::keep_leases(
            Arc::clone(&runner.store),
            Arc::clone(&runner.holder),
            Arc::clone(&runner.settings.clock),
            Arc::clone(&runner.settings.lease_beat),
        )))
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The runner `run --once` and the daemon share: agent, prompts (checked as they load),
/// settings and the worker cap.
pub(crate) fn build_runner(
    settings: &Settings,
    store: Arc<dyn Store>,
) -> Result<crate::runner::drive::Runner> {
    Ok(crate::runner::drive::Runner {
        store,
        adapter: agent_adapter(settings)?,
        prompts: Arc::new(crate::prompts::PromptSet::load(
            &settings.root.join("prompts"),
        )?),
        settings: Arc::new(runner_settings(settings)?),
        slots: Arc::new(tokio::sync::Semaphore::new(
            settings.raw.runner.max_workers as usize,
        )),
        readying: Arc::new(tokio::sync::Semaphore::new(
            settings.raw.runner.max_workers as usize,
        )),
        claiming: Arc::default(),
        settled_prs: Arc::default(),
        left: Arc::default(),
        holder: Arc::new(crate::runner::drive::this_runner()),
    })
}

/// Exit 1 when a run failed (it was abandoned where possible; the log has the details).
fn fail_if_any(failed: Vec<String>) -> Result<()> {
    match failed.len() {
        0 => Ok(()),
        n => Err(anyhow::anyhow!("{n} run(s) failed: {}", failed.join("; "))),
    }
}

async fn clean_worktrees(store: &dyn Store, settings: &crate::runner::drive::RunnerSettings) {
    match crate::runner::drive::clean_worktrees(store, settings).await {
        Ok(0) => {}
        Ok(n) => eprintln!("removed {n} finished run worktree(s) past runner.keep_worktrees"),
        Err(error) => eprintln!("warning: cannot clean finished worktrees: {error:#}"),
    }
}

/// The agent `[agent]` names, looked for on `PATH` and then in the usual install folders
/// (a service runs without the owner's login `PATH`); `example` is the bundled example
/// worker installed beside this binary.
pub(crate) fn agent_adapter(settings: &Settings) -> Result<crate::agents::Adapter> {
    let exe = std::env::current_exe().context("cannot tell where this executor binary is")?;
    let example = exe.with_file_name(if cfg!(windows) {
        "executor-example-worker.exe"
    } else {
        "executor-example-worker"
    });
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let path =
        crate::agents::agent_search_path(std::env::var_os("PATH").as_deref(), home.as_deref());
    // A relative `agent.program` path is relative to the config file, like every path there.
    let mut section = settings.raw.agent.adapter_settings();
    if let Some(program) = &section.program {
        if program.components().count() > 1 && program.is_relative() {
            section.program = Some(settings.root.join(program));
        }
    }
    Ok(crate::agents::for_config(&section, &example, Some(&path))?)
}

/// The polled sources the config enables: Asana (`[sources.asana]`) and the labelled
/// issues of each repository of `[sources.github_issues]`. A missing token is bad input
/// (exit 2), named by its variable or file.
pub(crate) fn source_intakes(
    settings: &Settings,
) -> Result<Vec<crate::ops::source_intake::SourceIntake>> {
    use crate::ops::source_intake::{Polling, SourceIntake};
    let mut intakes = Vec::new();
    if let Some(asana) = settings.raw.sources.asana.as_ref().filter(|a| a.enabled) {
        use crate::sources::asana::{AsanaClient, AsanaSettings, Secret};
        let token = match &asana.token_file {
            Some(file) => Secret::from_file(&settings.root.join(file)),
            None => Secret::from_env(asana.token_env.get_ref()),
        }
        .map_err(|e| BadInput(format!("the Asana token: {e}")))?;
        let api_base = url::Url::parse(asana.api_url.get_ref())
            .map_err(|e| BadInput(format!("sources.asana.api_url: {e}")))?;
        let client = AsanaClient::new(AsanaSettings { api_base, token })
            .context("cannot set up the Asana client")?;
        let scope = asana.scope().map_err(BadInput)?;
        intakes.push(SourceIntake::new(
            Polling::Asana { client, scope },
            asana.poll_interval,
        ));
    }
    if let Some(issues) = settings
        .raw
        .sources
        .github_issues
        .as_ref()
        .filter(|i| i.enabled)
    {
        let scope = issues.scope().map_err(BadInput)?;
        let repositories: Vec<String> = if issues.repositories.is_empty() {
            settings
                .raw
                .forge
                .github_repository
                .iter()
                .map(|r| r.get_ref().clone())
                .collect()
        } else {
            issues
                .repositories
                .iter()
                .map(|r| r.get_ref().clone())
                .collect()
        };
        for repository in repositories {
            let client = github_client(settings, &repository)?;
            intakes.push(SourceIntake::new(
                Polling::GithubIssues {
                    client,
                    scope: scope.clone(),
                },
                issues.poll_interval,
            ));
        }
    }
    if let Some(gitea) = settings
        .raw
        .sources
        .gitea_issues
        .as_ref()
        .filter(|g| g.enabled)
    {
        use crate::forge::gitea::{GiteaClient, GiteaOptions};
        let token = gitea
            .token(&settings.root)
            .map_err(|e| BadInput(format!("the Gitea token: {e}")))?;
        let api_url = gitea
            .api_url()
            .map_err(|e| BadInput(format!("sources.gitea_issues.api_url: {e}")))?;
        let client = GiteaClient::new(api_url, token, GiteaOptions::default())
            .context("cannot set up the Gitea client")?;
        let scope = gitea.scope().map_err(BadInput)?;
        for (owner, repo) in gitea.repositories() {
            intakes.push(SourceIntake::new(
                Polling::GiteaIssues {
                    client: client.clone(),
                    owner,
                    repo,
                    scope: scope.clone(),
                },
                gitea.poll_interval,
            ));
        }
    }
    Ok(intakes)
}

/// A GitHub client for `owner/name`, with the forge's token and API URL.
fn github_client(
    settings: &Settings,
    repository: &str,
) -> Result<crate::forge::github::GithubClient> {
    use crate::forge::github::{GithubClient, GithubSettings, Secret};
    let forge = &settings.raw.forge;
    let Some((owner, repo)) = repository.split_once('/') else {
        return Err(BadInput(format!("`{repository}` is not owner/name")).into());
    };
    let token = match &forge.token_file {
        Some(file) => Secret::from_file(&settings.root.join(file)),
        None => Secret::from_env(forge.token_env.get_ref()),
    }
    .map_err(|e| BadInput(format!("the GitHub token: {e}")))?;
    let mut api_base = url::Url::parse(forge.api_url.get_ref())
        .map_err(|e| BadInput(format!("forge.api_url: {e}")))?;
    if !api_base.path().ends_with('/') {
        let path = format!("{}/", api_base.path());
        api_base.set_path(&path);
    }
    GithubClient::new(GithubSettings {
        api_base,
        owner: owner.to_string(),
        repo: repo.to_string(),
        token,
    })
    .context("cannot set up the GitHub client")
}

/// The forge's client, when `[forge] kind = "github"` or `"gitea"`: the token from
/// `forge.token_file` or the variable `forge.token_env`. A missing token stops the runner
/// before it starts.
fn pr_forge(settings: &Settings) -> Result<Option<crate::runner::drive::Forge>> {
    use crate::forge::ForgeClient;
    let forge = &settings.raw.forge;
    let client = match forge.kind {
        config::ForgeKind::Local => return Ok(None),
        config::ForgeKind::Github => {
            let Some((owner, repo)) = forge
                .github_repository
                .as_ref()
                .and_then(|r| r.get_ref().split_once('/'))
            else {
                return Err(BadInput("forge.github_repository must be owner/name".into()).into());
            };
            ForgeClient::Github(github_client(settings, &format!("{owner}/{repo}"))?)
        }
        config::ForgeKind::Gitea => ForgeClient::Gitea(gitea_repo(settings)?),
    };
    let Some((owner, _)) = forge.repository() else {
        return Err(BadInput("the forge's repository must be owner/name".into()).into());
    };
    let gitea = matches!(client, ForgeClient::Gitea(_));
    if gitea && forge.resolve_acknowledged {
        tracing::warn!("forge.resolve_acknowledged is set, but Gitea's API cannot resolve a review conversation; acknowledged ones stay open for their reviewer");
    }
    Ok(Some(crate::runner::drive::Forge {
        client,
        remote: forge.remote.clone(),
        required_labels: forge.required_labels.clone(),
        required_checks: forge.required_checks.clone(),
        resolve_acknowledged: forge.resolve_acknowledged && !gitea,
        owner_login: owner.to_string(),
        ci_workflow: forge.ci_workflow.clone(),
        ci_start_grace: forge.ci_start_grace,
        max_effect_failures: forge.max_effect_failures.max(1),
        auto_merge: forge.auto_merge.settings(),
    }))
}

/// The Gitea repository of `[forge] kind = "gitea"`, its client with the forge's token.
fn gitea_repo(settings: &Settings) -> Result<crate::forge::gitea_pr::GiteaRepo> {
    use crate::forge::gitea::{GiteaClient, GiteaOptions};
    use crate::forge::github::Secret;
    let forge = &settings.raw.forge;
    let Some((owner, repo)) = forge.repository() else {
        return Err(BadInput("forge.gitea_repository must be owner/name".into()).into());
    };
    let token = match &forge.token_file {
        Some(file) => Secret::from_file(&settings.root.join(file)),
        None => Secret::from_env(forge.token_variable()),
    }
    .map_err(|e| BadInput(format!("the Gitea token: {e}")))?;
    let api_url = url::Url::parse(forge.api_url.get_ref())
        .map_err(|e| BadInput(format!("forge.api_url: {e}")))?;
    let client = GiteaClient::new(api_url, token, GiteaOptions::default())
        .context("cannot set up the Gitea client")?;
    Ok(crate::forge::gitea_pr::GiteaRepo {
        client,
        owner: owner.to_string(),
        repo: repo.to_string(),
    })
}

/// The worker contract the runner decides requests by: `roles/worker-policy.json`. A
/// contract that is missing or does not validate stops the runner before it starts anything.
fn load_worker_contract(settings: &Settings) -> Result<crate::runner::contract::ContractCell> {
    crate::runner::contract::ContractCell::load(&policy::contract_path(settings, "worker"))
        .map_err(|e| BadInput(e.to_string()).into())
}

/// Overrides `[sandbox] mode` (`auto`, `required`, `off`).
pub const SANDBOX_MODE_ENV: &str = "EXECUTOR_SANDBOX_MODE";

/// The wall of this process, settled once (the probe runs bubblewrap): `[sandbox] mode =
/// "required"` without a working wall is bad input, and executor does not start.
pub(crate) fn wall(settings: &Settings) -> Result<Arc<crate::sandbox::Wall>> {
    static WALL: std::sync::OnceLock<Arc<crate::sandbox::Wall>> = std::sync::OnceLock::new();
    if let Some(wall) = WALL.get() {
        return Ok(wall.clone());
    }
    let wall = Arc::new(
        crate::sandbox::Wall::establish(wall_settings(settings)?)
            .map_err(|e| BadInput(e.to_string()))?,
    );
    match wall.posture() {
        crate::sandbox::Posture::Confined { .. } => {
            tracing::info!(wall = %wall.describe(), "workers run confined")
        }
        crate::sandbox::Posture::Sealed { .. } => tracing::warn!(
            wall = %wall.describe(),
            "workers run confined by Landlock and seccomp WITHOUT bubblewrap: /proc is not hidden, process ids are shared, /tmp is a folder of each run's home"
        ),
        crate::sandbox::Posture::Unconfined { why } => tracing::warn!(
            %why,
            "workers run UNCONFINED: the policy judges their tool calls strictly, but nothing walls them in"
        ),
    }
    Ok(WALL.get_or_init(|| wall).clone())
}

/// What `status` says of the wall: probed now, the way the runner would at its start.
pub(crate) fn confinement(settings: &Settings) -> output::Confinement {
    let resolved = wall_settings(settings);
    let (mode, network) = match &resolved {
        Ok(s) => (s.mode.as_str(), s.network.as_str()),
        Err(_) => (
            settings.raw.sandbox.mode.as_str(),
            settings.raw.sandbox.network.as_str(),
        ),
    };
    let wall = resolved.and_then(|s| {
        crate::sandbox::Wall::establish(s).map_err(|e| anyhow::Error::new(BadInput(e.to_string())))
    });
    match wall {
        Ok(wall) => output::Confinement {
            confined: wall.is_confined(),
            mode,
            network,
            detail: match wall.posture() {
                crate::sandbox::Posture::Confined { .. }
                | crate::sandbox::Posture::Sealed { .. } => wall.describe(),
                crate::sandbox::Posture::Unconfined { why } => why.clone(),
            },
            layers: wall.layers(),
            memory: match wall.memory() {
                crate::sandbox::MemoryPosture::Limited { bytes, base } => output::MemoryLimit {
                    limited: true,
                    max_bytes: Some(bytes),
                    detail: format!(
                        "each confined worker at most {} MiB (a cgroup v2 of its own under {})",
                        bytes >> 20,
                        base.display()
                    ),
                },
                crate::sandbox::MemoryPosture::Unlimited { why } => output::MemoryLimit {
                    limited: false,
                    max_bytes: None,
                    detail: why,
                },
            },
            processes: {
                let cap = wall.process_cap();
                output::ProcessLimit {
                    capped: cap.holds(),
                    mechanism: cap.mechanism(),
                    max: cap.holds().then_some(settings.raw.sandbox.max_processes),
                    detail: cap.sentence(),
                }
            },
        },
        Err(error) => output::Confinement {
            confined: false,
            mode,
            network,
            detail: format!("the runner will not start: {error:#}"),
            layers: Vec::new(),
            memory: output::MemoryLimit {
                limited: false,
                max_bytes: None,
                detail: "the runner will not start".to_string(),
            },
            processes: output::ProcessLimit {
                capped: false,
                mechanism: "none",
                max: None,
                detail: "the runner will not start".to_string(),
            },
        },
    }
}

/// The owner's `[sandbox] allow` entries in their one spelling, as the runner keeps them
/// in an allow line (an entry the config would refuse is left out).
pub(crate) fn configured_allow(settings: &Settings) -> Vec<String> {
    settings
        .raw
        .sandbox
        .allow
        .iter()
        .filter_map(|entry| config::sandbox::parse_host_port(entry).ok())
        .map(|entry| entry.to_string())
        .collect()
}

/// `[sandbox]` with its paths made absolute (`~/` is the owner's home).
fn wall_settings(settings: &Settings) -> Result<crate::sandbox::WallSettings> {
    let section = &settings.raw.sandbox;
    let runner = &settings.raw.runner;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let resolve = |p: &Path| -> PathBuf {
        match (p.strip_prefix("~"), &home) {
            (Ok(rest), Some(home)) => home.join(rest),
            _ => settings.root.join(p),
        }
    };
    let mut hidden = vec![
        settings.root.clone(),
        settings.root.join(&runner.worktrees_dir),
        settings.root.join(&runner.logs_dir),
        settings.root.join(&runner.repository),
    ];
    if let Some(plans) = &settings.plans {
        hidden.push(plans.dir.clone());
    }
    // Named as well as the workspace around them: with worktrees off the worker's
    // read-write place can be the workspace itself, and these are covered again in it.
    for own in ["roles", "prompts", ".executor"] {
        hidden.push(settings.root.join(own));
    }
    let mut masked_files = vec![settings.path.clone()];
    masked_files.extend(settings.raw.secret_files().iter().map(|p| resolve(p)));
    if let crate::store::StorageTarget::Sqlite(path) = &settings.storage {
        hidden.extend(path.parent().map(Path::to_path_buf));
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            masked_files.push(PathBuf::from(name));
        }
    }
    // The variable wins over the file, so one run can be tried with or without the wall.
    let mode = match std::env::var(SANDBOX_MODE_ENV) {
        Ok(value) if !value.is_empty() => match value.as_str() {
            "auto" => config::SandboxMode::Auto,
            "required" => config::SandboxMode::Required,
            "off" => config::SandboxMode::Off,
            other => {
                return Err(BadInput(format!(
                    "{SANDBOX_MODE_ENV} = `{other}`: it is auto, required or off"
                ))
                .into())
            }
        },
        _ => section.mode,
    };
    Ok(crate::sandbox::WallSettings {
        mode,
        minimum: section.minimum,
        network: section.network,
        allow: section
            .allow
            .iter()
            .map(|a| config::sandbox::parse_host_port(a))
            .collect::<Result<_, _>>()
            .map_err(|e| BadInput(format!("sandbox.allow: {e}")))?,
        read_only: section.read_only.iter().map(|p| resolve(p)).collect(),
        read_write: section.read_write.iter().map(|p| resolve(p)).collect(),
        agent_config: section.agent_config.as_deref().map(resolve),
        max_processes: section.max_processes,
        max_file_size: config::sandbox::parse_size(&section.max_file_size)
            .map_err(|e| BadInput(format!("sandbox.max_file_size: {e}")))?,
        max_memory: config::sandbox::parse_memory(&section.max_memory)
            .map_err(|e| BadInput(format!("sandbox.max_memory: {e}")))?
            .bytes(crate::sandbox::cgroup::total_memory()),
        max_disk: config::sandbox::parse_disk(&section.max_disk, free_space(&settings.root))
            .map_err(|e| BadInput(format!("sandbox.max_disk: {e}")))?,
        bwrap: section.bwrap.as_deref().map(resolve),
        hidden,
        masked_files,
        homes_dir: settings.root.join(".executor").join("homes"),
        executor: std::env::current_exe().context("cannot tell where this executor binary is")?,
        keeper: true,
    })
}

/// The bytes free to this user on the file system holding `path`.
// The field types are u32 or u64 by platform; `from` is needed where they are u32.
#[allow(clippy::useless_conversion)]
fn free_space(path: &Path) -> Option<u64> {
    let stat = nix::sys::statvfs::statvfs(path).ok()?;
    Some(u64::from(stat.blocks_available()).saturating_mul(u64::from(stat.fragment_size())))
}

/// The repository's common git folder (`.git` of the main checkout), as git names it.
fn git_common_dir(repository: &Path) -> Option<PathBuf> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repository)
        .args(["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .env_clear()
        .envs(std::env::vars().filter(|(k, _)| k == "PATH"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

fn runner_settings(settings: &Settings) -> Result<crate::runner::drive::RunnerSettings> {
    let runner = &settings.raw.runner;
    crate::runner::drive::set_lease_ttl(runner.lease_ttl);
    let agent = &settings.raw.agent;
    let hook = if agent.hooks {
        Some(crate::runner::drive::HookTarget {
            executor: std::env::current_exe()
                .context("cannot tell where this executor binary is")?,
            config: settings.path.clone(),
        })
    } else {
        None
    };
    let repository = settings.root.join(&runner.repository);
    // One clock for the engine and the notices it sends (quiet hours, stamps).
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    Ok(crate::runner::drive::RunnerSettings {
        commit_author: crate::runner::git::commit_author(
            settings.raw.runner.commit_author.as_deref(),
            &repository,
        ),
        repository,
        base_branch: runner.base_branch.clone(),
        branch_prefix: runner.branch_prefix.clone(),
        worktrees_dir: settings.root.join(&runner.worktrees_dir),
        logs_dir: settings.root.join(&runner.logs_dir),
        max_workers: runner.max_workers as usize,
        limits: crate::core::watchdog::Limits {
            no_output: runner.no_output_timeout,
            hard: runner.hard_timeout,
        },
        grace: runner.stop_grace,
        verify: settings.raw.forge.verify.clone(),
        max_ci_attempts: settings.raw.forge.max_ci_attempts,
        max_worker_attempts: runner.max_worker_attempts.max(1),
        retry_base: runner.retry_backoff,
        keep_worktrees: runner.keep_worktrees,
        worktrees: runner.worktrees,
        worker_contract: Some(load_worker_contract(settings)?),
        notices: crate::chat::Notices::with_clock(chat::routing(settings), Arc::clone(&clock)),
        window: settings.raw.chat.window,
        conductor: crate::config::conductor::ConductorSection {
            build_log: settings
                .raw
                .conductor
                .build_log
                .as_ref()
                .map(|p| settings.root.join(p)),
            ..settings.raw.conductor.clone()
        },
        recorder: Arc::new(record::recorder(settings)?),
        wall: wall(settings)?,
        git_common_dir: git_common_dir(&settings.root.join(&runner.repository)),
        home: None,
        clock,
        forge: pr_forge(settings)?,
        judge: (!settings.raw.policy.ask_model_first.is_empty()).then(|| {
            crate::runner::judge::JudgeSettings {
                ask_first: settings.raw.policy.ask_model_first.clone(),
                limits: crate::core::watchdog::Limits {
                    no_output: settings.raw.policy.judge_timeout,
                    hard: settings.raw.policy.judge_timeout,
                },
                grace: runner.stop_grace,
            }
        }),
        agent: crate::runner::drive::AgentOptions {
            env: agent
                .env
                .iter()
                .map(|name| name.get_ref().clone())
                .collect(),
            model: agent.model.clone(),
            allowed_tools: agent.allowed_tools.clone(),
            max_turns: agent.max_turns,
            tools: None,
            hook,
            prices: settings.raw.spend.prices.clone(),
            usage_limit_backoff: agent.usage_limit_backoff,
        },
        budget: settings.raw.budget,
        lease_beat: crate::runner::drive::LeaseBeat::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_and_never_with_no_color() {
        use std::ffi::OsStr;
        assert!(use_color(true, None));
        assert!(use_color(true, Some(OsStr::new(""))));
        assert!(!use_color(true, Some(OsStr::new("1"))));
        assert!(!use_color(false, None));
    }

    #[test]
    fn the_workspace_is_found_from_a_folder_inside_it() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("plans/sub");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(find_config(&deep), None);
        std::fs::write(dir.path().join(config::FILE_NAME), "").unwrap();
        assert_eq!(find_config(&deep), Some(dir.path().join(config::FILE_NAME)));
        // A folder called executor.toml is no workspace.
        std::fs::create_dir_all(deep.join(config::FILE_NAME)).unwrap();
        assert_eq!(find_config(&deep), Some(dir.path().join(config::FILE_NAME)));
    }
}

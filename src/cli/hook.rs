//! `executor hook claude`: Claude Code's PreToolUse hook. Claude runs it before every tool
//! call of a worker (the runner installs it with `--settings`); it reads the hook's JSON on
//! stdin, judges the call by the worker contract (`roles/worker-policy.json`) and answers
//! in Claude Code's hook output format on stdout: `allow`, or `deny` with a reason the
//! model can act on.
//!
//! An escalation (a call the owner must decide, such as `gh pr merge`) is answered with
//! `defer`: Claude stops without running it and the session waits; the decision is recorded
//! as an escalation with the call's `tool_use_id`. When the owner has answered and the
//! runner resumes the session, Claude asks again about the same call, and this hook answers
//! with the owner's decision.
//!
//! What it must never do:
//! - let a call through when it cannot judge it: an unreadable config or contract, input
//!   it cannot parse, all answer `deny` with the reason;
//! - wait on the database to answer: the decision needs only the contract and the run's
//!   worktree and branch (both in the hook's own command line, written by the runner, so
//!   nothing the worker does can change them); recording it has a short deadline, and a
//!   record that misses it is reported on stderr, never a reason to hold the agent;
//! - print anything but the one JSON answer on stdout.

use std::io::{Read, Write};
use std::net::Shutdown;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::agents::claude::RelayAddress;
use crate::config;
use crate::core::clock::{Clock, SystemClock};
use crate::core::record::NewDecision;
use crate::policy::{self, Contract, Decision, Input, Scope, Verdict};
use crate::store::Store;

/// Hook input beyond this is not read: a tool call that large is not judged, it is denied.
pub(super) const MAX_INPUT: u64 = 4 * 1024 * 1024;

/// How long recording a decision may take before the answer goes out without it.
const RECORD_DEADLINE: Duration = Duration::from_secs(2);

/// The contract a worker is judged by, relative to the config file's folder.
pub const WORKER_CONTRACT: &str = "roles/worker-policy.json";

/// Most of a tool input kept in the decision's record.
const DETAIL_MAX: usize = 2_000;

/// Who the hook serves: written into the hook's command line by the runner.
#[derive(Debug, Clone)]
pub struct HookRun {
    pub config: PathBuf,
    pub run_id: i64,
    pub worktree: PathBuf,
    pub branch: Option<String>,
    /// The contract to judge by; `None`: the workspace's `roles/worker-policy.json`.
    pub contract: Option<PathBuf>,
    /// Inside the wall: where the orchestrator judges and records each call (the
    /// workspace, its config and its store are out of the worker's sight).
    pub relay: Option<RelayAddress>,
    /// The kernel holds the worker to its process cap (known to the orchestrator, which
    /// made the worker's cgroup; never claimed by the worker's own side).
    pub process_cap: bool,
    /// The repository's base branch (`[runner] base_branch`): a command that checks it out
    /// or moves it is asked about. `None`: not known here (`main` and `master` still are).
    pub base_branch: Option<String>,
    /// The worker is inside the wall: known only to the orchestrator that made it (the
    /// hook's own side never claims it, and judges in the strict posture).
    pub confined: bool,
    /// What the wall's network reaches, known to the orchestrator that made it; `None`
    /// (unconfined, or not known): WebFetch and WebSearch are escalated.
    pub network: Option<policy::WallNetwork>,
}

/// Reads the hook input on stdin, prints the answer on stdout, then records the decision
/// (within [`RECORD_DEADLINE`]) and exits: Claude waits for the process, so a store call
/// still blocked on a busy database must not keep it alive. Always exits 0 with an answer,
/// unless stdout itself cannot be written.
pub async fn claude(run: HookRun) -> Result<()> {
    let mut input = Vec::new();
    let read = std::io::stdin().take(MAX_INPUT + 1).read_to_end(&mut input);
    let answer = match read {
        Err(error) => Answer::deny(format!(
            "executor could not read this tool call ({error}); it was not run"
        )),
        Ok(_) if input.len() as u64 > MAX_INPUT => Answer::deny(
            "this tool call is too large for executor to judge (over 4 MiB); it was not run"
                .to_string(),
        ),
        Ok(_) => match &run.relay {
            Some(relay) => match asked(relay, &input) {
                Ok(answer) => answer,
                Err(why) => {
                    eprintln!("executor hook: {why}");
                    fallback(&run, &input).await
                }
            },
            None => judge_and_record(&run, &input).await,
        },
    };
    std::process::exit(match write_answer(&answer) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("executor hook: cannot write the answer: {error}");
            1
        }
    })
}

fn write_answer(answer: &Answer) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", answer.to_json())?;
    out.flush()
}

async fn judge_and_record(run: &HookRun, input: &[u8]) -> Answer {
    if let Err(error) = serde_json::from_slice::<Value>(input) {
        return Answer::deny(format!(
            "executor could not read this tool call ({error}); it was not run"
        ));
    }
    let settings = match config::load(&run.config, &config::Env::from_process()) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("executor hook: {error}");
            return Answer::deny(format!(
                "executor cannot read its config ({error}); no tool call is allowed until it is fixed"
            ));
        }
    };
    let contract_path = run
        .contract
        .clone()
        .unwrap_or_else(|| settings.root.join(WORKER_CONTRACT));
    let contract = match load_contract(&contract_path) {
        Ok(contract) => contract,
        Err(error) => {
            eprintln!("executor hook: {error:#}");
            return Answer::deny(format!(
                "executor cannot read the worker policy ({error:#}); no tool call is allowed until it is fixed"
            ));
        }
    };
    // The store answers within the deadline or not at all: the decision never waits on it.
    let store =
        match tokio::time::timeout(RECORD_DEADLINE, crate::store::open(&settings.storage)).await {
            Ok(Ok(store)) => Some(store),
            Ok(Err(error)) => {
                eprintln!(
                    "executor hook: cannot open {}: {error}",
                    settings.storage.display()
                );
                None
            }
            Err(_) => {
                eprintln!(
                    "executor hook: {} did not answer within {RECORD_DEADLINE:?}",
                    settings.storage.display()
                );
                None
            }
        };
    // The hook beside an unconfined worker reads the base branch from the config it loaded.
    let run = &HookRun {
        base_branch: run
            .base_branch
            .clone()
            .or_else(|| Some(settings.raw.runner.base_branch.clone())),
        ..run.clone()
    };
    let (answer, record) = decide(store.as_deref(), &contract, run, input, false).await;
    let Some(record) = record else {
        return answer;
    };
    let Some(store) = store else {
        eprintln!("executor hook: the decision was not recorded: no store");
        return answer;
    };
    // The answer goes out first: recording it must not delay the agent.
    if let Err(error) = write_answer(&answer) {
        eprintln!("executor hook: cannot write the answer: {error}");
        std::process::exit(1);
    }
    match tokio::time::timeout(RECORD_DEADLINE, record_decision(store.as_ref(), record)).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => eprintln!("executor hook: the decision was not recorded: {error:#}"),
        Err(_) => eprintln!(
            "executor hook: the decision was not recorded: the store did not answer within {RECORD_DEADLINE:?}"
        ),
    }
    std::process::exit(0)
}

/// The `tool_use_id` of a hook input, if it has one.
fn tool_use_id(input: &[u8]) -> Option<String> {
    serde_json::from_slice::<Value>(input).ok().and_then(|v| {
        v.get("tool_use_id")
            .and_then(Value::as_str)
            .map(str::to_string)
    })
}

/// The answer to one tool call: the owner's, when they already answered this call, else the
/// contract's. Returns the decision to record too (`None` for the owner's answer, which is
/// on record already). `confined` says whether the worker runs inside the wall.
pub async fn decide(
    store: Option<&dyn Store>,
    contract: &Contract,
    run: &HookRun,
    input: &[u8],
    confined: bool,
) -> (Answer, Option<NewDecision>) {
    let tool_use_id = tool_use_id(input);
    // A call the owner already answered (the session resumed after a `defer`).
    if let (Some(store), Some(id)) = (store, &tool_use_id) {
        match tokio::time::timeout(RECORD_DEADLINE, owner_answer(store, run.run_id, id)).await {
            Ok(Ok(Some(answer))) => return (answer, None),
            Ok(Ok(None)) => {}
            Ok(Err(error)) => {
                eprintln!("executor hook: cannot read the owner's answers: {error:#}")
            }
            Err(_) => eprintln!("executor hook: the owner's answers could not be read in time"),
        }
    }

    let scope = Scope::new(run.worktree.clone(), run.branch.as_deref())
        .with_confined(confined)
        .with_process_cap(run.process_cap)
        .with_base_branch(run.base_branch.as_deref())
        .with_network(run.network.clone())
        .on_disk();
    let (actions, verdict) = policy::judge(contract, &Input::ClaudeHook(input), &scope);
    let answer = Answer::from_verdict(&verdict, &actions);

    let record = NewDecision {
        task_gid: None,
        run_id: Some(run.run_id),
        at: SystemClock.now(),
        role: "worker".to_string(),
        action: actions
            .iter()
            .map(|a| a.kind.as_str())
            .collect::<Vec<_>>()
            .join(","),
        decision: decision_word(verdict.decision).to_string(),
        rule_id: verdict.rule_id.clone(),
        detail: Some(detail(input, &actions, &verdict, confined)),
        tool_use_id,
        message_window: None,
        // The posture the call was judged in: true when the relay decides for a worker
        // inside the wall, false when the hook runs beside an unconfined one.
        confined: Some(confined),
    };
    (answer, Some(record))
}

/// The orchestrator is gone or silent: the contract copy the runner wrote judges the call
/// here, and what would wait for the owner is denied with the reason (nothing is
/// recorded). Judged in the strict posture unless the runner said the worker is walled.
pub(super) async fn fallback(run: &HookRun, input: &[u8]) -> Answer {
    let Some(path) = &run.contract else {
        return Answer::deny("executor could not judge this tool call (the orchestrator did not answer, and no contract copy is at hand); it was not run. Try again.".to_string());
    };
    match load_contract(path) {
        Ok(contract) => {
            let (answer, _) = decide(None, &contract, run, input, run.confined).await;
            if answer.kind == Kind::Defer {
                Answer::deny(format!("{} The orchestrator did not answer in time to ask the owner; it was not run. Try again later, or end this phase with an [ESCALATE:blocked] line.", answer.reason))
            } else {
                answer
            }
        }
        Err(error) => Answer::deny(format!(
            "executor cannot read the worker policy ({error:#}); no tool call is allowed until it is fixed"
        )),
    }
}

/// A connection of the relay, either kind (the orchestrator's side).
trait Duplex: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Duplex for T {}

/// The orchestrator's end of a relay.
#[derive(Debug)]
pub enum RelayListener {
    Socket(tokio::net::UnixListener),
    Loopback(tokio::net::TcpListener),
}

impl RelayListener {
    async fn accept(&self) -> std::io::Result<Box<dyn Duplex>> {
        Ok(match self {
            RelayListener::Socket(l) => Box::new(l.accept().await?.0),
            RelayListener::Loopback(l) => Box::new(l.accept().await?.0),
        })
    }
}

/// The orchestrator's side of the relay: answers each call on `listener` for `run`,
/// judged by the contract at `run.contract`, and records it in `store`, one call at a
/// time (Claude asks about one tool call at a time). Never returns: it ends when dropped,
/// with the worker.
pub async fn serve_relay(listener: RelayListener, store: &dyn Store, run: HookRun) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // The copy is the runner's, written before the worker started and never changed while
    // it runs: read once, not per call.
    let contract = run.contract.as_deref().map(load_contract);
    // The calls of this run parked for the owner (by `tool_use_id`): only those can have
    // the owner's answer, so only those are looked up in the store before the answer
    // (`None`: not known, every call is).
    let mut parked: Option<std::collections::HashSet<String>> = match store
        .run_escalations(run.run_id)
        .await
    {
        Ok(escalations) => Some(
            escalations
                .into_iter()
                .filter_map(|e| e.tool_use_id)
                .collect(),
        ),
        Err(error) => {
            tracing::warn!(run = run.run_id, %error, "cannot read the run's escalations; each call asks the store");
            None
        }
    };
    // The run's task, for each record (one read, not one per call).
    let task_gid = store
        .run(run.run_id)
        .await
        .ok()
        .flatten()
        .map(|r| r.task_gid);
    loop {
        let Ok(mut stream) = listener.accept().await else {
            continue;
        };
        let mut input = Vec::new();
        let mut limited = (&mut stream).take(MAX_INPUT + 1);
        let read = limited.read_to_end(&mut input);
        if !matches!(tokio::time::timeout(RECORD_DEADLINE, read).await, Ok(Ok(_))) {
            continue;
        }
        let (answer, record) = if input.len() as u64 > MAX_INPUT {
            (
                Answer::deny(
                    "this tool call is too large for executor to judge (over 4 MiB); it was not run"
                        .to_string(),
                ),
                None,
            )
        } else {
            match &contract {
                Some(Ok(contract)) => {
                    let id = tool_use_id(&input);
                    let may_be_answered = match (&parked, &id) {
                        (Some(parked), Some(id)) => parked.contains(id),
                        (None, _) => true,
                        (Some(_), None) => false,
                    };
                    let asked = may_be_answered.then_some(store);
                    let decided = decide(asked, contract, &run, &input, run.confined).await;
                    if let (Some(parked), Some(id), Kind::Defer) =
                        (parked.as_mut(), id, decided.0.kind)
                    {
                        parked.insert(id);
                    }
                    decided
                }
                Some(Err(error)) => (
                    Answer::deny(format!("executor cannot read the worker policy ({error:#}); no tool call is allowed until it is fixed")),
                    None,
                ),
                None => (
                    Answer::deny(
                        "executor has no worker policy for this run; no tool call is allowed"
                            .to_string(),
                    ),
                    None,
                ),
            }
        };
        let _ = stream
            .write_all(answer.to_json().to_string().as_bytes())
            .await;
        let _ = stream.shutdown().await;
        if let Some(record) = record {
            let record = NewDecision {
                task_gid: record.task_gid.or_else(|| task_gid.clone()),
                ..record
            };
            if let Err(error) = record_decision(store, record).await {
                tracing::warn!(
                    run = run.run_id,
                    error = format!("{error:#}"),
                    "a hook decision was not recorded"
                );
            }
        }
    }
}

/// The owner's contract. A missing file is an error naming it, never a silent fallback to
/// the built-in contract: the owner may have loosened or tightened theirs, and judging by
/// another one than they wrote would be a guess (the caller denies).
fn load_contract(path: &Path) -> Result<Contract> {
    if !path.exists() {
        anyhow::bail!(
            "{} does not exist (executor init writes it)",
            path.display()
        );
    }
    Ok(Contract::load(path)?)
}

/// The owner's answer to an escalation of this run about the tool call `tool_use_id`.
async fn owner_answer(store: &dyn Store, run_id: i64, tool_use_id: &str) -> Result<Option<Answer>> {
    let answered = store
        .run_escalations(run_id)
        .await?
        .into_iter()
        .filter(|e| e.tool_use_id.as_deref() == Some(tool_use_id))
        .find_map(|e| Some((e.resolution.clone()?, e.resolution_note.clone())));
    Ok(answered.map(|(resolution, note)| {
        let note = note.map(|n| format!(" Their note: {n}")).unwrap_or_default();
        if resolution == "approve" {
            Answer {
                kind: Kind::Allow,
                reason: format!("executor: approved by the owner.{note}"),
            }
        } else {
            Answer::deny(format!(
                "executor: the owner denied this call; do not retry it. Continue without it, or end this phase with an [ESCALATE:blocked] line saying what you need.{note}"
            ))
        }
    }))
}

async fn record_decision(store: &dyn Store, record: NewDecision) -> Result<()> {
    // The task of the run, so `executor show <gid>` lists the decision.
    // One indexed read where the caller does not know it.
    let task_gid = match (record.task_gid.clone(), record.run_id) {
        (Some(gid), _) => Some(gid),
        (None, Some(id)) => store.run(id).await?.map(|r| r.task_gid),
        (None, None) => None,
    };
    store
        .record_decision(&NewDecision { task_gid, ..record })
        .await
        .context("cannot record the decision")?;
    Ok(())
}

fn decision_word(decision: Decision) -> &'static str {
    match decision {
        Decision::Approve => "approve",
        Decision::Deny => "deny",
        Decision::Escalate => "escalate",
    }
}

/// What the record keeps of the call: the tool, its input (cut short), the actions and why.
fn detail(input: &[u8], actions: &[policy::Action], verdict: &Verdict, confined: bool) -> String {
    let parsed: Value = serde_json::from_slice(input).unwrap_or(Value::Null);
    let mut tool_input = parsed
        .get("tool_input")
        .map(Value::to_string)
        .unwrap_or_default();
    if tool_input.len() > DETAIL_MAX {
        let mut cut = DETAIL_MAX;
        while !tool_input.is_char_boundary(cut) {
            cut -= 1;
        }
        tool_input.truncate(cut);
        tool_input.push('…');
    }
    json!({
        "via": "claude_hook",
        "tool_name": parsed.get("tool_name"),
        "tool_use_id": parsed.get("tool_use_id"),
        "tool_input": tool_input,
        "actions": actions.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "why": verdict.why,
        "confined": confined,
    })
    .to_string()
}

/// The hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    kind: Kind,
    reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Allow,
    Deny,
    /// Stop without running the call; the session is resumed once the owner answers.
    Defer,
}

impl Answer {
    /// Reads an answer in Claude Code's hook output format (what [`Answer::to_json`]
    /// writes); anything else is a deny.
    pub fn from_json(value: &Value) -> Self {
        let out = &value["hookSpecificOutput"];
        let reason = out["permissionDecisionReason"]
            .as_str()
            .unwrap_or("executor: no reason given")
            .to_string();
        match out["permissionDecision"].as_str() {
            Some("allow") => Self {
                kind: Kind::Allow,
                reason,
            },
            Some("defer") => Self {
                kind: Kind::Defer,
                reason,
            },
            _ => Self::deny(reason),
        }
    }

    pub fn deny(reason: String) -> Self {
        Self {
            kind: Kind::Deny,
            reason,
        }
    }

    fn from_verdict(verdict: &Verdict, actions: &[policy::Action]) -> Self {
        let rule = verdict.rule_id.as_deref().unwrap_or("the default");
        let what = actions
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        match verdict.decision {
            Decision::Approve => Self {
                kind: Kind::Allow,
                reason: format!("executor policy: approved by rule {rule} ({})", verdict.why),
            },
            Decision::Deny => Self::deny(format!(
                "executor policy: denied by rule {rule}: {}. The call ({what}) was not run; do not retry it. Continue without it, or end this phase with an [ESCALATE:blocked] line saying what you need.",
                verdict.why
            )),
            Decision::Escalate => Self {
                kind: Kind::Defer,
                reason: format!(
                    "executor policy: this needs the owner's decision (rule {rule}: {}). The call ({what}) waits for the owner.",
                    verdict.why
                ),
            },
        }
    }

    /// Claude Code's PreToolUse hook output.
    pub fn to_json(&self) -> Value {
        json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": match self.kind {
                    Kind::Allow => "allow",
                    Kind::Deny => "deny",
                    Kind::Defer => "defer",
                },
                "permissionDecisionReason": self.reason,
            }
        })
    }
}

/// How long the hook waits for the orchestrator's answer before it judges the call by the
/// contract copy itself (Claude Code gives a hook 60 s).
pub(super) const RELAY_DEADLINE: Duration = Duration::from_secs(20);

/// The orchestrator's answer to `input` through `relay`, within [`RELAY_DEADLINE`].
pub(super) fn asked(relay: &RelayAddress, input: &[u8]) -> Result<Answer, String> {
    let until = Instant::now() + RELAY_DEADLINE;
    let bytes = match relay {
        RelayAddress::Socket(path) => std::os::unix::net::UnixStream::connect(path)
            .map_err(|e| format!("cannot reach the orchestrator at {}: {e}", path.display()))
            .and_then(|s| exchange(s, input, until)),
        RelayAddress::Loopback(port) => std::net::TcpStream::connect_timeout(
            &(std::net::Ipv4Addr::LOCALHOST, *port).into(),
            RELAY_DEADLINE,
        )
        .map_err(|e| format!("cannot reach the orchestrator on port {port}: {e}"))
        .and_then(|s| exchange(s, input, until)),
    }?;
    let value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("the orchestrator's answer is not JSON: {e}"))?;
    Ok(Answer::from_json(&value))
}

/// A connection the relay speaks over.
trait Connection: Read + Write {
    fn timeouts(&self, left: Duration) -> std::io::Result<()>;
    fn end_writing(&self) -> std::io::Result<()>;
}

impl Connection for std::os::unix::net::UnixStream {
    fn timeouts(&self, left: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(left))?;
        self.set_write_timeout(Some(left))
    }
    fn end_writing(&self) -> std::io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
}

impl Connection for std::net::TcpStream {
    fn timeouts(&self, left: Duration) -> std::io::Result<()> {
        self.set_nodelay(true)?;
        self.set_read_timeout(Some(left))?;
        self.set_write_timeout(Some(left))
    }
    fn end_writing(&self) -> std::io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
}

/// Writes the call, ends the writing side, and reads the answer to its end, all before
/// `until` (each read is given what is left of it).
fn exchange(mut stream: impl Connection, input: &[u8], until: Instant) -> Result<Vec<u8>, String> {
    let late = || format!("the orchestrator did not answer within {RELAY_DEADLINE:?}");
    let left = |until: Instant| {
        let left = until.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    };
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => late(),
        _ => format!("the orchestrator's relay failed: {e}"),
    };
    stream.timeouts(left(until).ok_or_else(late)?).map_err(io)?;
    stream.write_all(input).map_err(io)?;
    stream.end_writing().map_err(io)?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        stream.timeouts(left(until).ok_or_else(late)?).map_err(io)?;
        match stream.read(&mut buf) {
            Ok(0) => return Ok(answer),
            Ok(n) if (answer.len() + n) as u64 > MAX_INPUT => {
                return Err("the orchestrator's answer is too large".to_string())
            }
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(decision: Decision, rule: Option<&str>) -> Verdict {
        Verdict {
            decision,
            rule_id: rule.map(str::to_string),
            why: "because".to_string(),
            notify: false,
        }
    }

    #[test]
    fn answers_are_in_claude_codes_hook_output_format() {
        let allow = Answer::from_verdict(&verdict(Decision::Approve, Some("tests")), &[]);
        let json = allow.to_json();
        assert_eq!(json["hookSpecificOutput"]["hookEventName"], "PreToolUse");
        assert_eq!(json["hookSpecificOutput"]["permissionDecision"], "allow");

        let action = policy::Action::new("push_branch").with("branch", "main");
        let deny = Answer::from_verdict(
            &verdict(Decision::Deny, Some("push-other-branch")),
            std::slice::from_ref(&action),
        )
        .to_json();
        assert_eq!(deny["hookSpecificOutput"]["permissionDecision"], "deny");
        let reason = deny["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .expect("a reason");
        assert!(reason.contains("push-other-branch"), "{reason}");
        assert!(reason.contains("branch=\"main\""), "{reason}");

        let escalated =
            Answer::from_verdict(&verdict(Decision::Escalate, None), &[action]).to_json();
        assert_eq!(
            escalated["hookSpecificOutput"]["permissionDecision"],
            "defer"
        );
        let reason = escalated["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .expect("a reason");
        assert!(reason.contains("owner"), "{reason}");
        assert!(reason.contains("the default"), "{reason}");
    }

    #[test]
    fn a_long_tool_input_is_cut_in_the_record_at_a_character_boundary() {
        let input = json!({"tool_name": "Bash", "tool_input": {"command": "é".repeat(5_000)}});
        let text = detail(
            input.to_string().as_bytes(),
            &[],
            &verdict(Decision::Approve, None),
            false,
        );
        let record: Value = serde_json::from_str(&text).expect("JSON");
        let kept = record["tool_input"].as_str().expect("kept");
        assert!(kept.len() <= DETAIL_MAX + '…'.len_utf8(), "{}", kept.len());
        assert!(kept.ends_with('…'));
        assert_eq!(record["tool_name"], "Bash");
    }
}

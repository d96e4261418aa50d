//! The hook as a thin client: `executor-hook … --relay R` (or `executor hook claude …
//! --relay R`) sends the hook's input to the orchestrator's relay and prints its answer.
//! Claude Code waits on it before every tool call, so it starts before any command-line
//! parser, tracing set-up or async runtime, reads no config, contract or store, and judges
//! nothing itself unless the orchestrator is gone or silent (then the caller's fallback
//! does, failing closed: [`super::hook::fallback`] in `executor`, that same `executor` run
//! by `executor-hook`).
//!
//! What it must never do: wait past the relay's deadline (`hook::RELAY_DEADLINE`) for the orchestrator, or print anything
//! but the one JSON answer on stdout.

use std::io::{Read, Write};
use std::path::PathBuf;

use crate::agents::claude::RelayAddress;

pub use super::hook::{Answer, HookRun};

use super::hook::{asked, MAX_INPUT};

/// The hook's command line after `hook claude`, when it names a relay and nothing this
/// path does not know (anything else goes to the full parser, which explains it).
pub fn parse(args: &[String]) -> Option<HookRun> {
    let mut run = HookRun {
        config: PathBuf::new(),
        run_id: 0,
        worktree: PathBuf::new(),
        branch: None,
        contract: None,
        relay: None,
        confined: false,
        process_cap: false,
        base_branch: None,
        network: None,
    };
    let (mut id, mut worktree) = (None, None);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next()?;
        match flag.as_str() {
            "--config" => run.config = PathBuf::from(value),
            "--run" => id = Some(value.parse().ok()?),
            "--worktree" => worktree = Some(PathBuf::from(value)),
            "--branch" => run.branch = Some(value.clone()),
            "--contract" => run.contract = Some(PathBuf::from(value)),
            "--relay" => run.relay = Some(RelayAddress::parse(value).ok()?),
            _ => return None,
        }
    }
    run.run_id = id?;
    run.worktree = worktree?;
    run.relay.as_ref()?;
    Some(run)
}

/// Answers one tool call through `run`'s relay: reads stdin, asks, prints the answer;
/// when the relay cannot answer, `fallback` judges the call. Returns the exit status (0
/// with an answer; 1 when stdout cannot be written).
pub fn answer(run: &HookRun, fallback: impl FnOnce(&HookRun, &[u8]) -> Answer) -> i32 {
    let mut input = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(MAX_INPUT + 1)
        .read_to_end(&mut input);
    let answer = match read {
        Err(error) => Answer::deny(format!(
            "executor could not read this tool call ({error}); it was not run"
        )),
        Ok(_) if input.len() as u64 > MAX_INPUT => Answer::deny(
            "this tool call is too large for executor to judge (over 4 MiB); it was not run"
                .to_string(),
        ),
        Ok(_) => match run.relay.as_ref().map(|relay| asked(relay, &input)) {
            Some(Ok(answer)) => answer,
            Some(Err(why)) => {
                eprintln!("executor hook: {why}");
                fallback(run, &input)
            }
            None => fallback(run, &input),
        },
    };
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{}", answer.to_json()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("executor hook: cannot write the answer: {error}");
            1
        }
    }
}

/// The orchestrator is gone or silent: the contract copy judges, on a runtime made only now.
pub fn judged_here(run: &HookRun, input: &[u8]) -> Answer {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(super::hook::fallback(run, input)),
        Err(error) => Answer::deny(format!(
            "executor could not judge this tool call ({error}); it was not run. Try again."
        )),
    }
}

/// The hook's command line after `hook claude`, for the full `executor` to judge a call
/// the relay could not answer.
pub fn to_args(run: &HookRun) -> Vec<String> {
    let mut out = vec![
        "--config".to_string(),
        run.config.to_string_lossy().into_owned(),
        "--run".to_string(),
        run.run_id.to_string(),
        "--worktree".to_string(),
        run.worktree.to_string_lossy().into_owned(),
    ];
    if let Some(branch) = &run.branch {
        out.extend(["--branch".to_string(), branch.clone()]);
    }
    if let Some(contract) = &run.contract {
        out.extend([
            "--contract".to_string(),
            contract.to_string_lossy().into_owned(),
        ]);
    }
    if let Some(relay) = &run.relay {
        out.extend(["--relay".to_string(), relay.to_arg()]);
    }
    out
}

/// The answer of `program hook claude` (the full `executor`) to `input`, for
/// `executor-hook` when the relay cannot answer: it judges by the contract copy.
pub fn asked_executor(program: &std::path::Path, run: &HookRun, input: &[u8]) -> Answer {
    let child = std::process::Command::new(program)
        .args(["hook", "claude"])
        .args(to_args(&HookRun {
            // Straight to the contract copy: the relay just failed.
            relay: Some(RelayAddress::Socket(PathBuf::from("/dev/null/gone"))),
            ..run.clone()
        }))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn();
    let output = child.and_then(|mut child| {
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(input)?;
        }
        child.wait_with_output()
    });
    match output.map(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout)) {
        Ok(Ok(value)) => Answer::from_json(&value),
        Ok(Err(error)) => Answer::deny(format!(
            "executor could not judge this tool call (its answer was not JSON: {error}); it was not run. Try again."
        )),
        Err(error) => Answer::deny(format!(
            "executor could not judge this tool call (cannot run {}: {error}); it was not run. Try again.",
            program.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn the_fast_path_takes_the_runners_command_line_and_nothing_else() {
        let run = parse(&args(
            "--config /c.toml --run 17 --worktree /w --branch executor/T-1 --contract /l/p.json --relay tcp:4100",
        ))
        .expect("the runner's own command line");
        assert_eq!(run.run_id, 17);
        assert_eq!(run.worktree, PathBuf::from("/w"));
        assert_eq!(run.branch.as_deref(), Some("executor/T-1"));
        assert_eq!(run.relay, Some(RelayAddress::Loopback(4100)));
        assert!(!run.confined, "the hook's side never claims the wall");
        // No relay, an unknown flag, a missing value or a bad number: the full parser.
        assert_eq!(
            parse(&to_args(&run)).map(|back| to_args(&back)),
            Some(to_args(&run))
        );
        for other in [
            "--config /c.toml --run 17 --worktree /w",
            "--run 17 --worktree /w --relay /s --verbose x",
            "--run 17 --worktree /w --relay",
            "--run x --worktree /w --relay /s",
            "--worktree /w --relay /s",
        ] {
            assert!(parse(&args(other)).is_none(), "{other}");
        }
    }
}

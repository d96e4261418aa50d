//! `executor-hook`: Claude Code's PreToolUse hook for executor's workers, as small as it can
//! be, since Claude waits on it before every tool call. It takes the command line of
//! `executor hook claude` (written by the runner into the worker's settings), sends the
//! call to the runner's relay and prints the runner's answer. It links none of executor's
//! engine: when the relay cannot answer, or the command line is not a relay's, the full
//! `executor` beside it judges the call (see docs/policy.md, "How the hook asks").

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

use executor::cli::hook_client;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let executor = std::env::current_exe()
        .map(|me| me.with_file_name("executor"))
        .unwrap_or_else(|_| PathBuf::from("executor"));
    let Some(run) = hook_client::parse(&args) else {
        // Not a relay's command line: the full hook reads it (and explains what is wrong).
        let error = std::process::Command::new(&executor)
            .args(["hook", "claude"])
            .args(&args)
            .exec();
        eprintln!("executor-hook: cannot run {}: {error}", executor.display());
        return ExitCode::from(1);
    };
    let code = hook_client::answer(&run, |run, input| {
        hook_client::asked_executor(&executor, run, input)
    });
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

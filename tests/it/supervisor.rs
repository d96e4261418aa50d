//! The supervisor against deliberately misbehaving worker programs: each ends in the
//! documented state, and no process of the worker's group is left behind.

use std::collections::HashMap;
use std::time::Duration;

use executor::core::watchdog::{Limits, StopReason};
use executor::supervisor::{self, group, Outcome, Stream, WorkerEvent, WorkerSpec};
use tokio::sync::oneshot;

use crate::support::eventually;

fn spec(script: &str, no_output: Duration, hard: Duration) -> WorkerSpec {
    WorkerSpec {
        argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
        cwd: std::env::temp_dir(),
        env: HashMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]),
        stdin: None,
        limits: Limits { no_output, hard },
        grace: Duration::from_millis(500),
        max_line: 1024 * 1024,
        os_limits: None,
        kept: false,
        heartbeat: None,
    }
}

const LONG: Duration = Duration::from_secs(60);

/// Runs `spec`, every line meaningful, and returns the outcome and the lines.
async fn run(
    spec: WorkerSpec,
    stop: Option<oneshot::Receiver<()>>,
) -> (Outcome, Vec<(Stream, String, bool)>) {
    let mut lines = Vec::new();
    let outcome = supervisor::supervise(
        spec,
        |event| {
            if let WorkerEvent::Line { stream, line } = event {
                lines.push((stream, line.text(), line.truncated));
            }
            true
        },
        stop,
    )
    .await
    .expect("supervise");
    (outcome, lines)
}

fn assert_group_gone(outcome: &Outcome) {
    eventually(
        Duration::from_secs(10),
        "the worker's group to be gone",
        || group::members(outcome.pid).is_empty().then_some(()),
    );
}

#[tokio::test]
async fn a_silent_worker_is_stopped_by_the_watchdog() {
    let (outcome, _) = run(spec("sleep 30", Duration::from_millis(300), LONG), None).await;
    assert_eq!(outcome.stopped, Some(StopReason::NoOutput));
    assert_eq!(outcome.signal, Some(15), "TERM was enough");
    assert!(!outcome.killed);
    assert!(!outcome.succeeded());
    assert_group_gone(&outcome);
}

/// A caller that stops listening for a while (its store write waits out an outage) leaves
/// the worker's lines waiting: they are heard before its silence is judged, so a worker
/// that kept printing is not stopped for a silence that was the caller's.
#[tokio::test]
async fn lines_printed_while_the_caller_was_not_listening_are_no_silence() {
    let spec = spec(
        "for i in $(seq 1 60); do echo \"line $i\"; sleep 0.1; done",
        Duration::from_secs(1),
        LONG,
    );
    let heard = std::sync::atomic::AtomicUsize::new(0);
    let supervised = supervisor::supervise(
        spec,
        |event| {
            if matches!(event, WorkerEvent::Line { .. }) {
                heard.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            true
        },
        None,
    );
    tokio::pin!(supervised);
    // Three times: listened to for a moment, then not polled at all for longer than the
    // watchdog's limit (each time the silence's timer and the waiting lines are both due).
    for _ in 0..3 {
        tokio::select! {
            _ = &mut supervised => panic!("the worker ended while it still had lines to print"),
            () = tokio::time::sleep(Duration::from_millis(300)) => {}
        }
        // The runtime goes on (the pipes' readers too), only the supervisor is not polled.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    let outcome = supervised.await.expect("supervise");
    assert_eq!(outcome.stopped, None, "{outcome:?}");
    assert!(outcome.succeeded(), "{outcome:?}");
    assert_eq!(
        heard.load(std::sync::atomic::Ordering::Relaxed),
        60,
        "every line heard"
    );
}

#[tokio::test]
async fn a_worker_that_never_ends_meets_the_hard_timeout() {
    let script = "while true; do echo tick; sleep 0.05; done";
    let (outcome, lines) = run(spec(script, LONG, Duration::from_millis(600)), None).await;
    assert_eq!(outcome.stopped, Some(StopReason::HardTimeout));
    assert!(lines.len() > 2, "it was talking all along: {}", lines.len());
    assert_group_gone(&outcome);
}

#[tokio::test]
async fn a_worker_that_ignores_term_is_killed_after_the_grace_period() {
    let script = "trap '' TERM; echo started; while true; do sleep 0.1; done";
    let (outcome, lines) = run(spec(script, Duration::from_millis(400), LONG), None).await;
    assert_eq!(outcome.stopped, Some(StopReason::NoOutput));
    assert!(outcome.killed, "{outcome:?}");
    assert_eq!(outcome.signal, Some(9));
    assert_eq!(lines[0].1, "started");
    assert_group_gone(&outcome);
}

#[tokio::test]
async fn a_grandchild_holding_the_pipes_does_not_keep_the_worker_alive() {
    let script = "(sleep 60 &); echo parent done; exit 0";
    let (outcome, lines) = run(spec(script, LONG, LONG), None).await;
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(outcome.stopped, None);
    assert!(outcome.succeeded());
    assert_eq!(lines, [(Stream::Stdout, "parent done".to_string(), false)]);
    assert_group_gone(&outcome);
}

#[tokio::test]
async fn a_worker_that_crashes_is_reported_with_its_signal() {
    let (outcome, lines) = run(spec("echo working; kill -SEGV $$", LONG, LONG), None).await;
    assert_eq!(outcome.signal, Some(11));
    assert_eq!(outcome.exit_code, None);
    assert_eq!(outcome.stopped, None);
    assert_eq!(lines.len(), 1);
    assert_group_gone(&outcome);
}

#[tokio::test]
async fn invalid_utf8_and_a_50_mb_line_are_survived() {
    let script = "printf 'ok \\377\\376\\n'; head -c 52428800 /dev/zero | tr '\\0' x; echo; echo after >&2; echo last";
    let (outcome, lines) = run(spec(script, LONG, LONG), None).await;
    assert!(outcome.succeeded(), "{outcome:?}");
    assert_eq!(outcome.truncated_lines, 1);
    let stdout: Vec<&(Stream, String, bool)> =
        lines.iter().filter(|l| l.0 == Stream::Stdout).collect();
    assert_eq!(stdout.len(), 3);
    assert_eq!(stdout[0].1, "ok \u{fffd}\u{fffd}");
    assert_eq!(
        stdout[1].1.len(),
        1024 * 1024,
        "the long line is cut at the cap"
    );
    assert!(stdout[1].2);
    assert_eq!(stdout[2].1, "last");
    assert!(lines.contains(&(Stream::Stderr, "after".to_string(), false)));
}

#[tokio::test]
async fn a_requested_stop_terms_the_group() {
    let (tx, rx) = oneshot::channel();
    let worker = tokio::spawn(run(spec("echo up; sleep 30", LONG, LONG), Some(rx)));
    tokio::time::sleep(Duration::from_millis(200)).await;
    tx.send(()).expect("supervisor listening");
    let (outcome, _) = worker.await.expect("join");
    assert_eq!(outcome.stopped, Some(StopReason::Requested));
    assert_group_gone(&outcome);
}

#[tokio::test]
async fn the_worker_inherits_no_environment() {
    let mut spec = spec("env", LONG, LONG);
    spec.argv = vec!["/usr/bin/env".into()];
    spec.env = HashMap::from([("ONLY_THIS".to_string(), "1".to_string())]);
    let (outcome, lines) = run(spec, None).await;
    assert!(outcome.succeeded());
    let texts: Vec<&str> = lines.iter().map(|l| l.1.as_str()).collect();
    assert_eq!(
        texts,
        ["ONLY_THIS=1"],
        "nothing of the orchestrator's environment leaks in"
    );
}

#[tokio::test]
async fn stdin_is_delivered_and_only_meaningful_lines_feed_the_watchdog() {
    let mut spec = spec(
        "cat; while true; do echo keepalive; sleep 0.05; done",
        Duration::from_millis(500),
        LONG,
    );
    spec.stdin = Some(b"[STATUS:start] go\n".to_vec());
    let mut seen = Vec::new();
    let outcome = supervisor::supervise(
        spec,
        |event| match event {
            WorkerEvent::Line { line, .. } => {
                let text = line.text();
                let meaningful = text.starts_with('[');
                seen.push(text);
                meaningful
            }
            WorkerEvent::Started { .. } => false,
        },
        None,
    )
    .await
    .expect("supervise");
    assert_eq!(seen[0], "[STATUS:start] go");
    assert_eq!(
        outcome.stopped,
        Some(StopReason::NoOutput),
        "keep-alives do not count as output"
    );
    assert_group_gone(&outcome);
}

#[tokio::test]
async fn a_missing_program_is_an_error_naming_it() {
    let mut spec = spec("", LONG, LONG);
    spec.argv = vec!["/nonexistent/agent".into()];
    let err = supervisor::supervise(spec, |_| true, None)
        .await
        .expect_err("cannot spawn");
    assert!(err.to_string().contains("/nonexistent/agent"), "{err}");
}

/// `script` under the real keeper (`executor sandbox-keep`), holding a heartbeat of
/// `patience` from `renewed`.
fn kept(
    script: &str,
    renewed: tokio::sync::watch::Receiver<tokio::time::Instant>,
    patience: Duration,
) -> WorkerSpec {
    let mut spec = spec(script, LONG, LONG);
    let mut argv: Vec<String> = [
        env!("CARGO_BIN_EXE_executor"),
        "sandbox-keep",
        "--grace",
        "500",
        "--",
    ]
    .map(String::from)
    .to_vec();
    argv.append(&mut spec.argv);
    spec.argv = argv;
    spec.kept = true;
    spec.heartbeat = Some(supervisor::Heartbeat { renewed, patience });
    spec
}

fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

#[tokio::test]
async fn a_kept_worker_whose_runner_falls_silent_is_stopped_with_what_left_its_group() {
    let dir = tempfile::tempdir().expect("tmp");
    let pid_file = dir.path().join("escaped");
    let script = format!(
        "setsid sleep 300 & echo $! > {}; echo \"beat=$EXECUTOR_KEEPER_BEAT\"; sleep 300",
        pid_file.display()
    );
    // A runner frozen (or its store gone) renews nothing: no beat ever comes.
    let (_renewals, renewed) = tokio::sync::watch::channel(tokio::time::Instant::now());
    let started = std::time::Instant::now();
    let (outcome, lines) = run(kept(&script, renewed, Duration::from_millis(800)), None).await;
    assert_eq!(
        outcome.exit_code,
        Some(executor::sandbox::keeper::SILENT_RUNNER_EXIT),
        "{outcome:?} {lines:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "stopped by the keeper, not a timeout"
    );
    assert!(
        lines.iter().any(|(_, l, _)| l == "beat="),
        "the heartbeat's variable never reaches the worker: {lines:?}"
    );
    assert!(lines
        .iter()
        .any(|(s, l, _)| *s == Stream::Stderr && l.contains("no word from the runner")));
    let escaped = std::fs::read_to_string(&pid_file).expect("pid file");
    let escaped = escaped.trim();
    eventually(
        Duration::from_secs(10),
        "the setsid child to be gone",
        || (!alive(escaped)).then_some(()),
    );
    assert_group_gone(&outcome);
}

#[tokio::test]
async fn a_kept_worker_of_a_runner_that_keeps_renewing_runs_to_its_end() {
    let (renewals, renewed) = tokio::sync::watch::channel(tokio::time::Instant::now());
    let beating = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            renewals.send_replace(tokio::time::Instant::now());
        }
    });
    let script = "sleep 2; echo done";
    let (outcome, lines) = run(kept(script, renewed, Duration::from_millis(700)), None).await;
    beating.abort();
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?} {lines:?}");
    assert_eq!(lines, [(Stream::Stdout, "done".to_string(), false)]);
}

#[tokio::test]
async fn a_kept_worker_ends_with_everything_it_started_even_outside_its_group() {
    let dir = tempfile::tempdir().expect("tmp");
    let pid_file = dir.path().join("escaped");
    let script = format!(
        "setsid sleep 300 & echo $! > {}; echo started",
        pid_file.display()
    );
    let mut spec = kept(
        &script,
        tokio::sync::watch::channel(tokio::time::Instant::now()).1,
        LONG,
    );
    spec.heartbeat = None;
    let (outcome, _) = run(spec, None).await;
    assert_eq!(outcome.exit_code, Some(0));
    let escaped = std::fs::read_to_string(&pid_file).expect("pid file");
    let escaped = escaped.trim();
    assert!(!escaped.is_empty());
    eventually(
        Duration::from_secs(10),
        "the setsid child to be gone",
        || (!alive(escaped)).then_some(()),
    );
}

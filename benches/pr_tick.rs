//! One `pr` tick over 50 open PRs against the fake GitHub (in this process, on its own
//! thread), printed as a markdown table: HTTP requests per tick and the orchestrator's own
//! CPU time per tick (the tick runs on this thread; the fake's work is on its thread and
//! not counted, nor is time spent waiting on the network).
//!
//! Run with `cargo bench --bench pr_tick`. Four ticks are measured: the first (nothing
//! cached), a second one right after (within the client's cache TTL), one after the cache
//! expired with nothing changed, and one after five PRs' CI failed (their jobs and logs are
//! read for the `fix_ci` workers). The target: no more requests than open PRs plus one per
//! changed PR, and under 100 ms of orchestrator CPU per tick.

#[allow(dead_code)]
#[path = "../tests/it/fake_github.rs"]
mod fake_github;
#[allow(dead_code)]
#[path = "../tests/it/fake_server.rs"]
mod fake_server;

use std::time::{Duration, Instant};

use executor::core::pr::{next_pr_step, PrConfig, PrMemory, PrStep};
use executor::forge::github::{observe_many, GithubClient, Look, NewPullRequest};
use fake_github::{Ci, FakeGithub};

const PRS: u64 = 50;
/// PRs whose CI fails before the last tick.
const CHANGED: u64 = 5;
const CPU_TARGET: Duration = Duration::from_millis(100);

fn thread_cpu() -> Duration {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .expect("this thread's CPU clock");
    Duration::new(ts.tv_sec() as u64, ts.tv_nsec() as u32)
}

fn main() {
    let github = FakeGithub::start_empty();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let client = GithubClient::new(github.settings()).expect("a client of the fake");
    let config = PrConfig::default();
    let memory = PrMemory::default();

    // 50 open draft PRs, each on its own head with CI still running.
    let numbers: Vec<u64> = runtime.block_on(async {
        let mut numbers = Vec::new();
        for n in 0..PRS {
            let pr = client
                .create_draft_pr(&NewPullRequest {
                    title: format!("Task {n}"),
                    head: format!("executor/T-{n}"),
                    base: "main".into(),
                    body: String::new(),
                })
                .await
                .expect("open a PR on the fake");
            numbers.push(pr.number);
        }
        numbers
    });
    for (n, number) in numbers.iter().enumerate() {
        let sha = format!("{:040x}", n + 1);
        github.set_pr_head(*number, &sha);
        github.set_ci(&sha, Ci::InProgress);
    }

    // `changed`: PRs whose CI turned red since the last tick; each costs its jobs and log.
    let tick = |label: &str, changed: u64| {
        let before = client.requests_sent();
        let cpu = thread_cpu();
        let wall = Instant::now();
        let (waits, fix_ci) = runtime.block_on(async {
            let looks: Vec<Look<'_>> = numbers
                .iter()
                .map(|number| Look {
                    number: *number,
                    memory: &memory,
                    worker_running: false,
                })
                .collect();
            let observed = observe_many(&client, &looks, &config, chrono::Utc::now()).await;
            let (mut waits, mut fix_ci) = (0, 0);
            for obs in observed {
                match next_pr_step(&obs.expect("observe a PR"), &memory, &config) {
                    PrStep::Wait { .. } => waits += 1,
                    PrStep::SpawnFixCi { .. } => fix_ci += 1,
                    other => panic!("unexpected step {other:?}"),
                }
            }
            (waits, fix_ci)
        });
        assert_eq!((waits, fix_ci), (PRS - changed, changed));
        Row {
            label: label.to_string(),
            changed,
            requests: client.requests_sent() - before,
            cpu: thread_cpu() - cpu,
            wall: wall.elapsed(),
        }
    };
    let mut rows = vec![
        tick("first tick (nothing cached)", 0),
        tick("second tick (within the cache TTL)", 0),
    ];
    client.expire_cache();
    rows.push(tick("tick after the cache expired, nothing changed", 0));
    for (n, number) in numbers.iter().take(CHANGED as usize).enumerate() {
        let sha = format!("{:040x}", 1000 + n);
        github.set_pr_head(*number, &sha);
        github.set_ci(&sha, Ci::Failed);
    }
    client.expire_cache();
    rows.push(tick(
        "tick after 5 PRs' CI failed (their jobs and logs read)",
        CHANGED,
    ));

    println!(
        "| tick over {PRS} open PRs | HTTP requests | target | orchestrator CPU | target | wall |"
    );
    println!("|---|---:|---|---:|---|---:|");
    for row in &rows {
        let budget = PRS + row.changed;
        println!(
            "| {} | {} | {} | {:.1} ms | {} | {:.1} ms |",
            row.label,
            row.requests,
            if row.requests <= budget {
                format!("met (≤ {budget})")
            } else {
                format!("**not met** (≤ {budget})")
            },
            row.cpu.as_secs_f64() * 1000.0,
            if row.cpu < CPU_TARGET {
                "met (< 100 ms)"
            } else {
                "**not met** (< 100 ms)"
            },
            row.wall.as_secs_f64() * 1000.0
        );
    }
}

struct Row {
    label: String,
    changed: u64,
    requests: u64,
    cpu: Duration,
    wall: Duration,
}

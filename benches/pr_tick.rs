//! One `pr` tick over 50 open PRs against the fake GitHub (in this process, on its own
//! thread), printed as a markdown table: HTTP requests per tick and the orchestrator's own
//! CPU time per tick (the tick runs on this thread; the fake's work is on its thread and
//! not counted, nor is time spent waiting on the network).
//!
//! Run with `cargo bench --bench pr_tick`. Three ticks are measured: the first (nothing
//! cached), a second one right after (within the client's cache TTL), and one after the
//! cache expired (answered with ETags: unchanged resources come back as 304s).

#[allow(dead_code)]
#[path = "../tests/it/fake_github.rs"]
mod fake_github;

use std::time::{Duration, Instant};

use executor::core::pr::{next_pr_step, PrConfig, PrMemory, PrStep};
use executor::forge::github::{observe, GithubClient, NewPullRequest};
use fake_github::{Ci, FakeGithub};

const PRS: u64 = 50;
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

    let tick = |label: &str| {
        let before = client.requests_sent();
        let cpu = thread_cpu();
        let wall = Instant::now();
        let waits = runtime.block_on(async {
            let mut waits = 0;
            for number in &numbers {
                let obs = observe(
                    &client,
                    *number,
                    &config,
                    &memory,
                    chrono::Utc::now(),
                    false,
                )
                .await
                .expect("observe a PR");
                if matches!(next_pr_step(&obs, &memory, &config), PrStep::Wait { .. }) {
                    waits += 1;
                }
            }
            waits
        });
        let row = (
            label.to_string(),
            client.requests_sent() - before,
            thread_cpu() - cpu,
            wall.elapsed(),
        );
        assert_eq!(waits, PRS, "every PR waits for its CI");
        row
    };
    let rows = vec![
        tick("first tick (nothing cached)"),
        tick("second tick (within the cache TTL)"),
        {
            client.expire_cache();
            tick("tick after the cache expired (ETags: 304s)")
        },
    ];

    println!("| tick over {PRS} open PRs (CI running, nothing changed) | HTTP requests | target | orchestrator CPU | target | wall |");
    println!("|---|---:|---|---:|---|---:|");
    for (label, requests, cpu, wall) in &rows {
        println!(
            "| {label} | {requests} | {} | {:.1} ms | {} | {:.1} ms |",
            if *requests <= PRS {
                "met (≤ open PRs)"
            } else {
                "**not met** (≤ open PRs)"
            },
            cpu.as_secs_f64() * 1000.0,
            if *cpu < CPU_TARGET {
                "met (< 100 ms)"
            } else {
                "**not met** (< 100 ms)"
            },
            wall.as_secs_f64() * 1000.0
        );
    }
}

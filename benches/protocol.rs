//! Worker messages and their decisions, timed in-process and printed as a markdown table.
//!
//! Run with `cargo bench --bench protocol`. Two measurements (issue 4's benchmark line):
//!
//! 1. parser throughput: [`protocol::scan`] over a ~100 MB transcript generated in memory —
//!    mostly plain agent output and stream-JSON lines, with code fences and, here and there,
//!    worker messages with quoted values and escapes (and a few malformed ones);
//! 2. policy decisions per second: 100,000 `[REQUEST:…]` lines (push own / other branch,
//!    run tests, merge, modify files inside / outside the worktree) parsed, turned into
//!    actions and decided by the built-in worker contract, on one core.
//!
//! Each is run for several rounds; the table shows the median round and the slowest. The
//! notes add the per-line path `executor protocol parse` takes, decisions alone, and
//! decisions through `policy::judge` (which resolves paths on disk).

use std::hint::black_box;
use std::process::Command;
use std::time::Instant;

use executor::policy::{self, Action, Contract, Decision, Input, Scope};
use executor::protocol::{self, Parsed, Scanner};

const TRANSCRIPT_BYTES: usize = 100_000_000;
const PARSER_ROUNDS: usize = 5;
const PARSER_TARGET_MB_S: f64 = 200.0;

const REQUESTS: usize = 100_000;
const POLICY_ROUNDS: usize = 7;
const POLICY_TARGET_PER_S: f64 = 500_000.0;

const WORKER_CONTRACT: &str = executor::policy::WORKER_CONTRACT;

/// One row of the table, its numbers already formatted (so rows of other units fit).
struct Row {
    name: String,
    n: usize,
    median: String,
    worst: String,
    target: String,
    met: bool,
}

fn main() {
    let bench_started = Instant::now();
    let rustc = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
        .arg("-V")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown (rustc -V failed)".to_string());
    let nproc = std::thread::available_parallelism()
        .map(|n| n.get().to_string())
        .unwrap_or_else(|e| format!("unknown ({e})"));

    let mut rows = Vec::new();
    let mut notes = Vec::new();

    let (parser_rows, parser_notes) = parser();
    rows.extend(parser_rows);
    notes.extend(parser_notes);

    let (policy_rows, policy_notes) = decisions();
    rows.extend(policy_rows);
    notes.extend(policy_notes);

    println!(
        "machine: {nproc} CPUs (available_parallelism), {rustc}; every measurement on one thread"
    );
    println!();
    println!("| measurement | n | median | worst | target | met |");
    println!("|---|---:|---:|---:|---|---|");
    for row in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            row.name,
            row.n,
            row.median,
            row.worst,
            row.target,
            if row.met { "yes" } else { "**no**" }
        );
    }
    println!();
    for note in &notes {
        println!("- {note}");
    }
    println!(
        "- whole bench: {:.1} s",
        bench_started.elapsed().as_secs_f64()
    );
}

// ------------------------------------------------------------------------- the parser

fn parser() -> (Vec<Row>, Vec<String>) {
    let started = Instant::now();
    let transcript = Transcript::generate(TRANSCRIPT_BYTES);
    let text = &transcript.text;
    let mut notes = vec![format!(
        "transcript: {:.1} MB, {} lines ({} plain, {} JSON, {} in code fences, {} messages, {} malformed message lines), generated in {:.1} s.",
        text.len() as f64 / 1e6,
        transcript.lines,
        transcript.plain,
        transcript.json,
        transcript.fenced,
        transcript.messages,
        transcript.malformed,
        started.elapsed().as_secs_f64()
    )];

    // `scan` over the whole text: fences followed, every message line parsed.
    let mut rates = Vec::with_capacity(PARSER_ROUNDS);
    for _ in 0..PARSER_ROUNDS {
        let started = Instant::now();
        let (mut messages, mut malformed) = (0usize, 0usize);
        for found in protocol::scan(black_box(text)) {
            match found.parsed {
                Ok(Parsed::Message(m)) => {
                    black_box(&m);
                    messages += 1;
                }
                Ok(Parsed::Acknowledged(_)) => {}
                Err(e) => {
                    black_box(&e);
                    malformed += 1;
                }
            }
        }
        let elapsed = started.elapsed();
        assert_eq!(
            (messages, malformed),
            (transcript.messages, transcript.malformed),
            "the scan found other messages than were written"
        );
        rates.push(text.len() as f64 / 1e6 / elapsed.as_secs_f64());
    }
    let median = median(&rates);
    let rows = vec![Row {
        name: format!(
            "parser: `protocol::scan` over a {:.0} MB mixed transcript",
            text.len() as f64 / 1e6
        ),
        n: PARSER_ROUNDS,
        median: format!("{median:.0} MB/s"),
        worst: format!("{:.0} MB/s", min(&rates)),
        target: format!("> {PARSER_TARGET_MB_S:.0} MB/s"),
        met: median > PARSER_TARGET_MB_S,
    }];

    // The path of `executor protocol parse`: bytes split on `\n`, one `Scanner::line_bytes`
    // each (no JSON printing).
    let bytes = text.as_bytes();
    let started = Instant::now();
    let mut scanner = Scanner::new();
    let mut messages = 0usize;
    for line in bytes.split(|b| *b == b'\n') {
        if let Ok(Some(Parsed::Message(m))) = scanner.line_bytes(black_box(line)) {
            black_box(&m);
            messages += 1;
        }
    }
    let elapsed = started.elapsed();
    assert_eq!(messages, transcript.messages);
    notes.push(format!(
        "line by line over bytes (`Scanner::line_bytes`, what `executor protocol parse` does before printing): {:.0} MB/s, one round.",
        bytes.len() as f64 / 1e6 / elapsed.as_secs_f64()
    ));

    // The message lines alone: what parsing costs when a line is a message.
    let message_lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            protocol::parse_line(l)
                .map(|p| p.is_some())
                .unwrap_or(false)
        })
        .collect();
    let message_bytes: usize = message_lines.iter().map(|l| l.len() + 1).sum();
    let started = Instant::now();
    for line in &message_lines {
        let _ = black_box(protocol::parse_line(black_box(line)));
    }
    let elapsed = started.elapsed();
    notes.push(format!(
        "message lines alone ({} lines, {:.1} MB, the messages in the fences included): {:.0} MB/s, {:.0} ns per message.",
        message_lines.len(),
        message_bytes as f64 / 1e6,
        message_bytes as f64 / 1e6 / elapsed.as_secs_f64(),
        elapsed.as_nanos() as f64 / message_lines.len() as f64
    ));
    (rows, notes)
}

/// A deterministic pseudo-random transcript (xorshift), and what it holds.
struct Transcript {
    text: String,
    lines: usize,
    plain: usize,
    json: usize,
    fenced: usize,
    /// Well-formed worker messages outside fences: what `scan` must find.
    messages: usize,
    malformed: usize,
}

const PLAIN: &[&str] = &[
    "Reading src/ui/TabPreview.swift to understand how the hover state is reset.",
    "  The preview stays open because `onHover(false)` is never delivered after a drag.",
    "- [x] reproduce the bug in a unit test",
    "- [ ] fix the state machine; then run the whole UI suite",
    "Running: cargo test --workspace -- --nocapture 2>&1 | tail -n 50",
    "test tabs::preview::hover_resets_after_drag ... ok",
    "error[E0308]: mismatched types: expected `Option<usize>`, found `usize`",
    "[note] this is the agent's own bracketed remark, not a message",
    "    at TabBar.swift:212 (closure #1 in TabBar.body.getter)",
    "I will write [DONE:pr_ready] once CI is green.",
    "",
    "> quoted from the review: please split this function",
];

const MESSAGES: &[&str] = &[
    "[STATUS:investigation] Reproduced the bug in a unit test",
    "[REQUEST:run_tests] scheme=\"macOS UI Tests CI\" filter=\"TabPreview \\\"hover\\\" cases\" needs the simulator",
    "[REQUEST:push_branch] branch=executor/fix-tab-preview-stuck",
    "  [STATUS:tests] passed=412 failed=0 duration=\"3 min 12 s\" all green",
    "[ESCALATE:scope_expansion] Found an unrelated crash in TabBar.swift (see notes/crash.md)",
    "[REQUEST:open_draft_pr] title=\"Fix the stuck tab preview after a drag\" body=\"Closes #1234; the \\\\ path is C:\\\\x\"",
    "[STATUS:progress] who=\"José 日本\" step=3/5 🦀 fertig übermorgen",
    "[DONE:pr_ready] CI green, no comments",
];

const MALFORMED: &[&str] = &[
    "[DONE:Pr-Ready] capitals and a dash",
    "[REQUEST:run_tests] scheme=\"macOS UI Tests CI",
    "[STATUS:x]no space",
];

impl Transcript {
    fn generate(size: usize) -> Transcript {
        let mut t = Transcript {
            text: String::with_capacity(size + 4096),
            lines: 0,
            plain: 0,
            json: 0,
            fenced: 0,
            messages: 0,
            malformed: 0,
        };
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        let mut n = 0u64;
        while t.text.len() < size {
            n += 1;
            let roll = rng.next() % 1000;
            match roll {
                0..=579 => {
                    let line = PLAIN[(rng.next() % PLAIN.len() as u64) as usize];
                    t.push(line);
                    t.plain += 1;
                }
                580..=939 => {
                    let text = PLAIN[(rng.next() % PLAIN.len() as u64) as usize];
                    let line = if roll < 800 {
                        format!(
                            r#"{{"type":"assistant","message":{{"id":"msg_{n:016x}","type":"message","role":"assistant","content":[{{"type":"text","text":{}}}]}},"session_id":"5f0c8a0e-2b7d-4c1e-9a43-{n:012x}"}}"#,
                            serde_json::Value::String(text.to_string())
                        )
                    } else {
                        format!(
                            r#"{{"type":"user","message":{{"role":"user","content":[{{"tool_use_id":"toolu_{n:x}","type":"tool_result","content":"{}","is_error":false}}]}}}}"#,
                            "test tabs::preview::case ... ok\\n".repeat(1 + (n % 12) as usize)
                        )
                    };
                    t.push(&line);
                    t.json += 1;
                }
                940..=959 => {
                    t.push("```text");
                    t.fenced += 1;
                    for _ in 0..(1 + rng.next() % 6) {
                        let line = if rng.next().is_multiple_of(3) {
                            MESSAGES[(rng.next() % MESSAGES.len() as u64) as usize]
                        } else {
                            PLAIN[(rng.next() % PLAIN.len() as u64) as usize]
                        };
                        t.push(line);
                        t.fenced += 1;
                    }
                    t.push("```");
                    t.fenced += 1;
                }
                960..=997 => {
                    t.push(MESSAGES[(rng.next() % MESSAGES.len() as u64) as usize]);
                    t.messages += 1;
                }
                _ => {
                    t.push(MALFORMED[(rng.next() % MALFORMED.len() as u64) as usize]);
                    t.malformed += 1;
                }
            }
        }
        t
    }

    fn push(&mut self, line: &str) {
        self.text.push_str(line);
        self.text.push('\n');
        self.lines += 1;
    }
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

// ------------------------------------------------------------------------- decisions

/// The request lines of the mix, and the decision the worker contract must give each.
const REQUEST_MIX: &[(&str, Decision)] = &[
    ("[REQUEST:push_branch] branch=executor/run-1", Decision::Approve),
    (
        "[REQUEST:push_branch] branch=executor/run-1 remote=origin ready for review",
        Decision::Approve,
    ),
    ("[REQUEST:push_branch] branch=executor/run-2 remote=origin", Decision::Deny),
    ("[REQUEST:push_branch] branch=main force=true", Decision::Deny),
    (
        "[REQUEST:run_tests] scheme=\"macOS UI Tests CI\" filter=\"TabPreview \\\"hover\\\" cases\" needs the simulator",
        Decision::Approve,
    ),
    ("[REQUEST:merge_pr] pr=1234", Decision::Escalate),
    ("[REQUEST:modify_files] path=src/ui/TabPreview.swift", Decision::Approve),
    ("[REQUEST:modify_files] path=/w/run/Sources/App/Main.swift", Decision::Approve),
    ("[REQUEST:modify_files] path=../run-2/src/main.rs", Decision::Deny),
    ("[REQUEST:modify_files] path=\"/etc/ssh/sshd_config\"", Decision::Deny),
];

fn decisions() -> (Vec<Row>, Vec<String>) {
    let contract = Contract::parse("worker-policy.json", WORKER_CONTRACT)
        .unwrap_or_else(|e| panic!("the built-in worker contract does not parse: {e}"));
    let scope = Scope::new("/w/run", Some("executor/run-1"));
    let lines: Vec<&str> = (0..REQUESTS)
        .map(|i| REQUEST_MIX[i % REQUEST_MIX.len()].0)
        .collect();
    for (line, want) in REQUEST_MIX {
        let action = request(line);
        let verdict = contract.decide(&action, &scope);
        assert_eq!(verdict.decision, *want, "{line}: {verdict:?}");
    }

    // Line to decision: parse, to_action, decide.
    let mut rates = Vec::with_capacity(POLICY_ROUNDS);
    for _ in 0..POLICY_ROUNDS {
        let started = Instant::now();
        let mut approved = 0usize;
        for line in &lines {
            let action = request(black_box(line));
            let verdict = contract.decide(&action, &scope);
            approved += usize::from(verdict.decision == Decision::Approve);
        }
        let elapsed = started.elapsed();
        black_box(approved);
        rates.push(REQUESTS as f64 / elapsed.as_secs_f64());
    }
    let median_rate = median(&rates);
    let rows = vec![Row {
        name: format!(
            "decisions: {REQUESTS} `[REQUEST:…]` lines parsed and decided by the worker contract"
        ),
        n: POLICY_ROUNDS,
        median: format!("{median_rate:.0}/s"),
        worst: format!("{:.0}/s", min(&rates)),
        target: format!("> {POLICY_TARGET_PER_S:.0}/s"),
        met: median_rate > POLICY_TARGET_PER_S,
    }];

    // Decisions alone, over actions parsed beforehand.
    let actions: Vec<Action> = lines.iter().map(|l| request(l)).collect();
    let started = Instant::now();
    for action in &actions {
        black_box(contract.decide(black_box(action), &scope));
    }
    let decide_only = REQUESTS as f64 / started.elapsed().as_secs_f64();

    // Through `policy::judge`, as the message loop will call it: the worktree and every
    // path argument resolved on disk (a real temporary worktree).
    let root = tempfile::tempdir().expect("cannot create a temporary worktree");
    let worktree = root.path().join("run");
    std::fs::create_dir_all(worktree.join("src/ui")).expect("create the worktree");
    let disk_scope = Scope::new(&worktree, Some("executor/run-1"));
    let judged = REQUESTS / 10;
    let started = Instant::now();
    for action in actions.iter().take(judged) {
        black_box(policy::judge(
            &contract,
            &Input::Request(action),
            &disk_scope,
        ));
    }
    let judge_rate = judged as f64 / started.elapsed().as_secs_f64();

    let notes = vec![
        format!(
            "decisions: the mix is {} request lines in turn ({}); every one's decision is checked against the contract first.",
            REQUEST_MIX.len(),
            "own-branch pushes, another run's branch, `main` with force, quoted run_tests, merge_pr, modify_files inside and outside"
        ),
        format!("`Contract::decide` alone over parsed actions: {decide_only:.0}/s, one round."),
        format!(
            "`policy::judge` (resolves the worktree and path arguments on disk, the filesystem in the loop): {judge_rate:.0}/s over {judged} requests, one round."
        ),
    ];
    (rows, notes)
}

fn request(line: &str) -> Action {
    match protocol::parse_line(line) {
        Ok(Some(Parsed::Message(m))) => m
            .to_action()
            .unwrap_or_else(|| panic!("{line} is not a request")),
        other => panic!("{line} does not parse: {other:?}"),
    }
}

// ------------------------------------------------------------------------- statistics

fn median(samples: &[f64]) -> f64 {
    assert!(!samples.is_empty(), "no samples");
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

fn min(samples: &[f64]) -> f64 {
    samples.iter().copied().fold(f64::INFINITY, f64::min)
}

//! End-to-end timings of the `executor` binary on SQLite, printed as a markdown table.
//!
//! Run with `cargo bench --bench cli`. Three measurements, each in a fresh temporary
//! workspace made by `executor init`:
//!
//! 1. `executor add` wall time per process, 10,000 sequential spawns;
//! 2. `executor queue --json` over 100,000 tasks, 10 spawns;
//! 3. how long the daemon takes to put a new plans-folder note into the queue, 20 notes;
//! 4. an idle `executor run --once` over that queue;
//! 5. the supervisor reading 50 flooding workers;
//! 6. dispatch: 200 runs of a no-op worker (cap 2, worktrees off) against `xargs -P2`
//!    running the same no-op 200 times, and pueue with `parallel 2` where it is installed,
//!    in alternating rounds so all three see the same machine.
//!
//! 7. the wall: spawn to a worker's first line, confined (bubblewrap, with and without the
//!    network bridge) and not; and the dispatch of item 6 with every worker confined.
//! 8. wake-ups: a plan note saved, `executor go` and `executor decide` from another process,
//!    each to the start of its worker (`-- wake` alone; Postgres too when
//!    `EXECUTOR_TEST_PG` is set).
//! 9. an idle daemon over 1,000 runs waiting for the owner: its CPU time over 20 s
//!    (`-- idle` alone).
//! 10. the console of a daemon over 100,000 tasks and 10,000 runs: each page and each API
//!     list (p95), a worker's line to an open live feed (p50), and the CPU an open page's
//!     feed adds to the idle daemon over 10 s (`-- console` alone; `EXECUTOR_BENCH_TASKS`
//!     and `EXECUTOR_BENCH_RUNS` make the store smaller for a quick look).
//!
//! Every timing is spawn-to-exit (or write-to-row) wall time from `std::time::Instant`.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use executor::core::queue::QueueStatus;
use executor::core::task::{compose_description, NewTask};
use executor::store::sqlite::SqliteStore;
use executor::store::Store;
use rusqlite::{params, Connection, OpenFlags};

/// The binary cargo built for this bench (bench profile, so optimised).
const BIN: &str = env!("CARGO_BIN_EXE_executor");

const ADD_RUNS: usize = 10_000;
const ADD_RUNS_WITH_DAEMON: usize = 2_000;
const ADD_TARGET: Duration = Duration::from_millis(5);

const QUEUE_TASKS: usize = 100_000;
const QUEUE_RUNS: usize = 10;
const QUEUE_TARGET: Duration = Duration::from_millis(300);

const IDLE_RUNS: usize = 30;
const IDLE_TARGET: Duration = Duration::from_millis(30);

const FLOOD_WORKERS: usize = 50;
const FLOOD_SECONDS: u64 = 5;
const FLOOD_LINES_PER_SECOND: u64 = 10_000;

const NOTES: usize = 20;
const NOTE_TARGET: Duration = Duration::from_secs(1);
const NOTE_POLL: Duration = Duration::from_millis(10);
const NOTE_GIVE_UP: Duration = Duration::from_secs(30);
const DAEMON_START_GIVE_UP: Duration = Duration::from_secs(30);

/// One row of the table.
struct Row {
    name: String,
    samples: Vec<Duration>,
    target: String,
    met: bool,
}

fn main() {
    let bench_started = Instant::now();
    let bin = Path::new(BIN);
    assert!(
        bin.is_file(),
        "CARGO_BIN_EXE_executor points to {}, which is not a file",
        bin.display()
    );

    let nproc = std::thread::available_parallelism()
        .map(|n| n.get().to_string())
        .unwrap_or_else(|e| format!("unknown ({e})"));
    let rustc = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
        .arg("-V")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown (rustc -V failed)".to_string());

    let root = tempfile::tempdir().expect("cannot create a temporary folder for the workspaces");
    let mut rows = Vec::new();
    let mut notes = Vec::new();

    // `cargo bench --bench cli -- hook` runs the hook round trip alone.
    if std::env::args().skip(1).any(|arg| arg == "hook") {
        let rows = vec![
            hook_relay_round_trip(&root.path().join("hook-relay")),
            hook_round_trip(&root.path().join("hook")),
        ];
        print_table(&nproc, &rustc, &rows, &[], bench_started);
        return;
    }
    // `cargo bench --bench cli -- wall` runs the wall's start cost alone.
    if std::env::args().skip(1).any(|arg| arg == "wall") {
        let (rows, notes) = wall_start(&root.path().join("wall"));
        print_table(&nproc, &rustc, &rows, &notes, bench_started);
        return;
    }
    // `cargo bench --bench cli -- wake` runs the wake-up series alone.
    if std::env::args().skip(1).any(|arg| arg == "wake") {
        let (rows, notes) = wake_ups(&root.path().join("wake"));
        print_table(&nproc, &rustc, &rows, &notes, bench_started);
        return;
    }
    // `cargo bench --bench cli -- idle` runs the idle daemon's CPU alone.
    if std::env::args().skip(1).any(|arg| arg == "idle") {
        let (rows, notes) = idle_daemon(&root.path().join("idle"));
        print_table(&nproc, &rustc, &rows, &notes, bench_started);
        return;
    }
    // `cargo bench --bench cli -- console` runs the console's timings alone.
    if std::env::args().skip(1).any(|arg| arg == "console") {
        let (rows, notes) = console(&root.path().join("console"));
        print_table(&nproc, &rustc, &rows, &notes, bench_started);
        return;
    }
    // `cargo bench --bench cli -- analytics` runs the outcome figures' timing alone.
    if std::env::args().skip(1).any(|arg| arg == "analytics") {
        let (rows, notes) = analytics(&root.path().join("analytics"));
        print_table(&nproc, &rustc, &rows, &notes, bench_started);
        return;
    }
    // `cargo bench --bench cli -- dispatch` runs the dispatch comparison alone.
    if std::env::args().skip(1).any(|arg| arg == "dispatch") {
        let (rows, notes) = dispatch(&root.path().join("dispatch"));
        print_table(&nproc, &rustc, &rows, &notes, bench_started);
        return;
    }

    // 1. `executor add`, one process per task.
    let config = init_workspace(&root.path().join("add"));
    let started = Instant::now();
    let adds = timed_adds(&config, 1..=ADD_RUNS);
    let total = started.elapsed();
    let slowest = adds
        .iter()
        .enumerate()
        .max_by_key(|(_, d)| **d)
        .map(|(i, _)| i + 1)
        .expect("no samples");
    notes.push(format!(
        "`executor add`: {ADD_RUNS} sequential processes took {} in all ({:.0} adds/s); p99 {}, {} over 50 ms, the slowest was add #{slowest}.",
        seconds(total),
        ADD_RUNS as f64 / total.as_secs_f64(),
        millis(percentile(&adds, 99)),
        adds.iter().filter(|d| **d > Duration::from_millis(50)).count()
    ));
    let stored = count_tasks(&db_path(&config));
    assert_eq!(
        stored, ADD_RUNS as i64,
        "the add workspace holds {stored} tasks"
    );
    rows.push(Row {
        name: "`executor add` (one process, empty to 10k tasks)".into(),
        met: median(&adds) < ADD_TARGET,
        samples: adds,
        target: "median < 5 ms".into(),
    });

    // 1b. The same with a daemon holding the database open, as in a deployment: the CLI
    // process is then not the database's last connection, so SQLite does not checkpoint
    // and delete the WAL at its exit.
    let daemon = Daemon::start(&config, &root.path().join("add-daemon.log"));
    wait_for_daemon(&config);
    let held = timed_adds(&config, ADD_RUNS + 1..=ADD_RUNS + ADD_RUNS_WITH_DAEMON);
    drop(daemon);
    rows.push(Row {
        name: "`executor add` with the daemon running (10k to 12k tasks)".into(),
        met: median(&held) < ADD_TARGET,
        samples: held,
        target: "median < 5 ms".into(),
    });

    // 2. `executor queue --json` over 100,000 tasks.
    let config = init_workspace(&root.path().join("queue"));
    let queue_config = config.clone();
    let fill = fill_queue(&db_path(&config), QUEUE_TASKS);
    notes.push(fill);
    let mut warmup = executor(&config);
    warmup.args(["queue", "--json"]);
    let output = warmup.output().expect("cannot spawn executor queue --json");
    expect_success(&output, "executor queue --json");
    let parsed: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("executor queue --json printed invalid JSON");
    let listed = parsed
        .as_array()
        .expect("executor queue --json did not print a JSON array")
        .len();
    assert_eq!(
        listed, QUEUE_TASKS,
        "executor queue --json listed {listed} tasks"
    );
    let mut queues = Vec::with_capacity(QUEUE_RUNS);
    let mut size = 0;
    for _ in 0..QUEUE_RUNS {
        let (elapsed, bytes) = timed_queue_json(&config);
        queues.push(elapsed);
        size = bytes;
    }
    notes.push(format!(
        "`executor queue --json`: {} bytes of output ({:.1} MB, {} bytes per task); the JSON parses and lists {listed} tasks.",
        size,
        size as f64 / 1_000_000.0,
        size / QUEUE_TASKS as u64
    ));
    rows.push(Row {
        name: "`executor queue --json` (100k tasks)".into(),
        met: median(&queues) < QUEUE_TARGET,
        samples: queues,
        target: "median < 300 ms".into(),
    });

    // 3. Plans-folder intake by the daemon.
    let dir = root.path().join("daemon");
    let config = init_workspace(&dir);
    let db = db_path(&config);
    let daemon_log = dir.join("daemon.log");
    let daemon = Daemon::start(&config, &daemon_log);
    let waited = wait_for_daemon(&config);
    notes.push(format!(
        "daemon: `executor status --json` showed it running {} after the spawn.",
        millis(waited)
    ));
    let reader = Connection::open_with_flags(
        &db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .unwrap_or_else(|e| panic!("cannot open {} read-only: {e}", db.display()));
    let mut intakes = Vec::with_capacity(NOTES);
    for n in 1..=NOTES {
        let path = dir.join("plans").join(format!("note-{n}.md"));
        let description = format!("# Note {n}\n\nbody");
        let started = Instant::now();
        std::fs::write(&path, &description)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        loop {
            let found: bool = reader
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM executor_queue WHERE description = ?1)",
                    params![description],
                    |row| row.get(0),
                )
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", db.display()));
            if found {
                intakes.push(started.elapsed());
                break;
            }
            assert!(
                started.elapsed() < NOTE_GIVE_UP,
                "the daemon did not take in {} within {}; its log is {}",
                path.display(),
                seconds(NOTE_GIVE_UP),
                daemon_log.display()
            );
            std::thread::sleep(NOTE_POLL);
        }
    }
    drop(reader);
    drop(daemon);
    rows.push(Row {
        name: "daemon: new plan note to queued task".into(),
        met: max(&intakes) < NOTE_TARGET,
        samples: intakes,
        target: "each < 1 s".into(),
    });

    // 4. An idle one-shot: nothing approved, nothing to recover, in the 100k-task queue.
    let mut idle = Vec::with_capacity(IDLE_RUNS);
    for _ in 0..IDLE_RUNS {
        let mut command = executor(&queue_config);
        command.args(["run", "--once"]);
        let (elapsed, output) = timed_output(&mut command);
        expect_success(&output, "executor run --once (idle)");
        idle.push(elapsed);
    }
    rows.push(Row {
        name: "idle `executor run --once` (100k tasks, none approved)".into(),
        met: median(&idle) < IDLE_TARGET,
        samples: idle,
        target: "median < 30 ms".into(),
    });

    // 5. The supervisor under a flood: many workers, each printing 10,000 lines a second.
    let (row, note) = supervise_flood();
    rows.push(row);
    notes.push(note);

    // 6. Claude's hook: process start to answer, as Claude runs it before every tool call.
    rows.push(hook_relay_round_trip(&root.path().join("hook-relay")));
    rows.push(hook_round_trip(&root.path().join("hook")));

    // 7. Dispatch: 200 no-op runs, side by side with `xargs -P2` and pueue.
    let (dispatch_rows, dispatch_notes) = dispatch(&root.path().join("dispatch"));
    rows.extend(dispatch_rows);
    notes.extend(dispatch_notes);

    // 8. Wake-ups: a note saved, `go` and `decide` from another process, to the worker.
    let (wake_rows, wake_notes) = wake_ups(&root.path().join("wake"));
    rows.extend(wake_rows);
    notes.extend(wake_notes);

    // 9. An idle daemon over 1,000 runs waiting for the owner.
    let (idle_rows, idle_notes) = idle_daemon(&root.path().join("idle"));
    rows.extend(idle_rows);
    notes.extend(idle_notes);

    // 10. The console over 100,000 tasks and 10,000 runs.
    let (console_rows, console_notes) = console(&root.path().join("console"));
    rows.extend(console_rows);
    notes.extend(console_notes);

    // 11. The wall's start cost per worker.
    let (wall_rows, wall_notes) = wall_start(&root.path().join("wall"));
    rows.extend(wall_rows);
    notes.extend(wall_notes);

    print_table(&nproc, &rustc, &rows, &notes, bench_started);
}

fn print_table(nproc: &str, rustc: &str, rows: &[Row], notes: &[String], bench_started: Instant) {
    println!("machine: {nproc} CPUs (available_parallelism), {rustc}");
    println!("binary: {BIN}");
    println!();
    println!("| measurement | n | median | p95 | max | target | met |");
    println!("|---|---:|---:|---:|---:|---|---|");
    for row in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.name,
            row.samples.len(),
            millis(median(&row.samples)),
            millis(percentile(&row.samples, 95)),
            millis(max(&row.samples)),
            row.target,
            if row.met { "yes" } else { "**no**" }
        );
    }
    println!();
    for note in notes {
        println!("- {note}");
    }
    println!("- whole bench: {}", seconds(bench_started.elapsed()));
}

/// Supervises `FLOOD_WORKERS` workers that each print `FLOOD_LINES_PER_SECOND` lines a
/// second for `FLOOD_SECONDS`, on one current-thread runtime as the runner uses, and
/// measures this process's CPU time (the workers' own is theirs, not counted).
fn supervise_flood() -> (Row, String) {
    use executor::core::watchdog::Limits;
    use executor::supervisor::{self, WorkerEvent, WorkerSpec};
    let script = format!(
        "$| = 0; for my $s (1..{FLOOD_SECONDS}) {{ for my $i (1..{FLOOD_LINES_PER_SECOND}) {{ print \"[STATUS:tick] line $i of second $s\\n\" }} STDOUT->flush(); select(undef, undef, undef, 1) }}"
    );
    let spec = WorkerSpec {
        argv: vec!["perl".into(), "-e".into(), script],
        cwd: std::env::temp_dir(),
        env: std::collections::HashMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]),
        stdin: None,
        limits: Limits {
            no_output: Duration::from_secs(60),
            hard: Duration::from_secs(120),
        },
        grace: Duration::from_secs(1),
        max_line: 1024 * 1024,
        os_limits: None,
        kept: false,
        heartbeat: None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot start a tokio runtime for the flood");
    let cpu_before = own_cpu();
    let started = Instant::now();
    let lines: u64 = runtime.block_on(async {
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..FLOOD_WORKERS {
            let spec = spec.clone();
            workers.spawn(async move {
                let mut seen = 0u64;
                let outcome = supervisor::supervise(
                    spec,
                    |event| {
                        if let WorkerEvent::Line { line, .. } = event {
                            seen += u64::from(line.bytes.starts_with(b"[STATUS:tick]"));
                        }
                        true
                    },
                    None,
                )
                .await
                .expect("supervise a flooding worker");
                assert!(outcome.succeeded(), "a flooding worker failed: {outcome:?}");
                seen
            });
        }
        let mut total = 0;
        while let Some(seen) = workers.join_next().await {
            total += seen.expect("join a flooding worker");
        }
        total
    });
    let wall = started.elapsed();
    let cpu = own_cpu().saturating_sub(cpu_before);
    let share = cpu.as_secs_f64() / wall.as_secs_f64();
    let expected = FLOOD_WORKERS as u64 * FLOOD_SECONDS * FLOOD_LINES_PER_SECOND;
    let row = Row {
        name: format!(
            "supervisor: {FLOOD_WORKERS} workers × {FLOOD_LINES_PER_SECOND} lines/s for {FLOOD_SECONDS} s: {lines} of {expected} lines, runner CPU {:.0}% of a core",
            share * 100.0
        ),
        met: lines == expected && share < 0.5,
        samples: vec![wall],
        target: "no line lost, CPU < 50%".into(),
    };
    let note = format!(
        "supervisor flood: {lines} lines in {} wall, {} of this process's CPU ({:.0}% of one core).",
        seconds(wall),
        seconds(cpu),
        share * 100.0
    );
    (row, note)
}

/// This process's user + system CPU time so far (`/proc/self/stat`, in clock ticks of
/// 1/100 s on Linux).
fn own_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("read /proc/self/stat");
    let after_name = &stat[stat.rfind(')').expect("stat has a command name") + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |n: usize| fields[n - 3].parse::<u64>().expect("a tick count");
    Duration::from_millis((ticks(14) + ticks(15)) * 10)
}

/// A command running the bench's binary on `config`, with no configuration from the
/// environment leaking in.
fn executor(config: &Path) -> Command {
    let mut command = Command::new(BIN);
    command
        .arg("--config")
        .arg(config)
        .env_remove("EXECUTOR_CONFIG")
        .env_remove("EXECUTOR_STORAGE_URL")
        .env_remove("EXECUTOR_LOG")
        .stdin(Stdio::null());
    command
}

/// `executor init DIR`; returns the config file it wrote.
fn init_workspace(dir: &Path) -> PathBuf {
    let output = Command::new(BIN)
        .arg("init")
        .arg(dir)
        .env_remove("EXECUTOR_CONFIG")
        .env_remove("EXECUTOR_STORAGE_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot spawn {BIN} init: {e}"));
    expect_success(&output, &format!("executor init {}", dir.display()));
    let config = dir.join("executor.toml");
    assert!(
        config.is_file(),
        "executor init did not write {}",
        config.display()
    );
    config
}

/// The SQLite file of a workspace made by `executor init` (the template's default url).
fn db_path(config: &Path) -> PathBuf {
    let db = config
        .parent()
        .expect("a config file always has a parent folder")
        .join("executor.db");
    assert!(
        db.is_file(),
        "expected the workspace's database at {}",
        db.display()
    );
    db
}

/// Runs `executor add` once per number in `range`, sequentially; one wall time each.
fn timed_adds(config: &Path, range: std::ops::RangeInclusive<usize>) -> Vec<Duration> {
    range
        .map(|n| {
            let title = format!("Task {n}");
            let gid = format!("B-{n}");
            let mut command = executor(config);
            command.args(["add", "--title", &title, "--gid", &gid]);
            let (elapsed, output) = timed_output(&mut command);
            expect_success(&output, &format!("executor add --gid {gid}"));
            elapsed
        })
        .collect()
}

fn timed_output(command: &mut Command) -> (Duration, Output) {
    let started = Instant::now();
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot spawn {command:?}: {e}"));
    (started.elapsed(), output)
}

fn expect_success(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    );
}

/// One timed `executor queue --json`, its stdout read to the end through a pipe and
/// discarded; returns the time and the number of bytes.
fn timed_queue_json(config: &Path) -> (Duration, u64) {
    let mut command = executor(config);
    command
        .args(["queue", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command.spawn().expect("cannot spawn executor queue --json");
    let mut stdout = child.stdout.take().expect("stdout was piped");
    let bytes = io::copy(&mut stdout, &mut io::sink()).expect("cannot read the queue's stdout");
    let status = child.wait().expect("cannot wait for executor queue --json");
    let elapsed = started.elapsed();
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    assert!(
        status.success(),
        "executor queue --json failed ({status}): {}",
        stderr.trim()
    );
    (elapsed, bytes)
}

fn count_tasks(db: &Path) -> i64 {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|e| panic!("cannot open {} read-only: {e}", db.display()));
    conn.query_row("SELECT count(*) FROM executor_queue", [], |row| row.get(0))
        .unwrap_or_else(|e| panic!("cannot count the tasks in {}: {e}", db.display()))
}

/// Fills the database at `db` (schema already made by `executor init`) with `total`
/// pending tasks through the store, the way every other writer does. Returns a line saying
/// how long it took.
fn fill_queue(db: &Path, total: usize) -> String {
    fill_queue_with(db, total, |_| QueueStatus::Pending)
}

/// [`fill_queue`], task `n` with status `status_of(n)`.
fn fill_queue_with(db: &Path, total: usize, status_of: impl Fn(usize) -> QueueStatus) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot start a tokio runtime to fill the queue");
    let task = |n: usize| NewTask {
        task_gid: format!("Q-{n}"),
        source: "bench".to_string(),
        description: compose_description(&format!("Queued task {n}"), "A task for the bench."),
        notes: None,
        priority: Some((n % 5) as i64),
        initial_status: status_of(n),
    };

    let started = Instant::now();
    let store = runtime
        .block_on(SqliteStore::open(db))
        .unwrap_or_else(|e| panic!("cannot open the store {}: {e}", db.display()));
    runtime.block_on(async {
        for n in 1..=total {
            store
                .upsert_task(&task(n), "bench", chrono::Utc::now())
                .await
                .unwrap_or_else(|e| panic!("upsert of task {n} failed: {e}"));
        }
    });
    let elapsed = started.elapsed();
    drop(store);
    drop(runtime);
    let stored = count_tasks(db);
    assert_eq!(
        stored, total as i64,
        "the queue workspace holds {stored} tasks"
    );
    format!(
        "queue fill: {total} tasks through `Store::upsert_task` in {} ({} per row).",
        seconds(elapsed),
        micros(elapsed / total as u32)
    )
}

/// The daemon child process; killed when dropped, so a failed bench leaves none behind.
struct Daemon(Child);

impl Daemon {
    /// A daemon of `config`, its log in `log`, its workers unconfined (the benches that
    /// start a daemon measure the daemon, not the wall).
    fn start(config: &Path, log: &Path) -> Self {
        Self::start_on(config, log, None)
    }

    /// [`Daemon::start`] on `storage` (a Postgres URL) if given.
    fn start_on(config: &Path, log: &Path, storage: Option<&str>) -> Self {
        let log_file = std::fs::File::create(log)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
        let mut command = executor(config);
        command
            .arg("daemon")
            .env(SANDBOX_MODE_ENV, "off")
            .stdout(Stdio::null())
            .stderr(log_file);
        if let Some(url) = storage {
            command.env("EXECUTOR_STORAGE_URL", url);
        }
        Daemon(command.spawn().expect("cannot spawn executor daemon"))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls `executor status --json` until component "daemon" is "running"; returns how long
/// that took.
fn wait_for_daemon(config: &Path) -> Duration {
    let started = Instant::now();
    loop {
        let output = executor(config)
            .args(["status", "--json"])
            .output()
            .expect("cannot spawn executor status --json");
        expect_success(&output, "executor status --json");
        let status: serde_json::Value = serde_json::from_slice(&output.stdout)
            .expect("executor status --json printed invalid JSON");
        let running = status["components"]
            .as_array()
            .expect("executor status --json has no `components` array")
            .iter()
            .any(|c| c["component"] == "daemon" && c["state"] == "running");
        if running {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < DAEMON_START_GIVE_UP,
            "the daemon was not running after {}",
            seconds(DAEMON_START_GIVE_UP)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sorted(samples: &[Duration]) -> Vec<Duration> {
    assert!(!samples.is_empty(), "no samples");
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    sorted
}

fn median(samples: &[Duration]) -> Duration {
    let sorted = sorted(samples);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2
    } else {
        sorted[mid]
    }
}

/// Nearest-rank percentile.
fn percentile(samples: &[Duration], p: usize) -> Duration {
    let sorted = sorted(samples);
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

fn max(samples: &[Duration]) -> Duration {
    samples.iter().copied().max().expect("no samples")
}

fn millis(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1_000_000.0)
}

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

const DISPATCH_RUNS: usize = 200;
/// Inodes a no-op run makes: its task's log folder, the phase log's `.md` and `.jsonl`, the
/// run record's two folders and `result.json`.
const INODES_PER_RUN: u32 = 6;
/// Folders and files the file system probe makes (a third of them folders, as a run).
const PROBE_INODES: u32 = 300;
/// Above this an inode costs more than this file system's usual: see [`inode_note`].
const SLOW_INODE: Duration = Duration::from_micros(50);

/// What one new inode costs in `dir` now: [`PROBE_INODES`] folders and empty files made
/// there, the time over their number. Kept (not deleted), so the probe itself leaves no
/// deleted inodes behind.
fn inode_cost(dir: &Path) -> Duration {
    std::fs::create_dir_all(dir).expect("create the file system probe's folder");
    let started = Instant::now();
    for n in 0..PROBE_INODES {
        let path = dir.join(n.to_string());
        if n % 3 == 0 {
            std::fs::create_dir(&path).expect("probe: make a folder");
        } else {
            std::fs::File::create(&path).expect("probe: make a file");
        }
    }
    started.elapsed() / PROBE_INODES
}

/// The file system's cost per inode before and after the rounds, and a warning when it is
/// slow: on ext4 without a journal, a new inode skips every inode of its group deleted in
/// about the last minute (reading each one's inode block), so right after a mass deletion
/// (a test suite, a build, an earlier bench's folder) each of a run's inodes can cost a
/// hundred times its usual while the floor, which makes no file, pays nothing.
fn inode_note(before: Duration, after: Duration) -> String {
    let slow = before.max(after) > SLOW_INODE;
    format!(
        "file system: a new inode took {} before the rounds and {} after (a no-op run makes {INODES_PER_RUN}){}",
        micros(before),
        micros(after),
        if slow {
            ": SLOWER than this file system's usual, as right after a mass deletion on ext4 without a journal; the dispatch rows are pessimistic, run the bench again a few minutes after the last large deletion."
        } else {
            "."
        }
    )
}
const DISPATCH_ROUNDS: usize = 7;
/// The no-op worker: it says it is done and exits.
const NO_OP: [&str; 2] = ["/bin/echo", "[DONE:implemented] nothing to do"];

/// 200 approved tasks run by `executor run --once` with a no-op worker, two at a time,
/// worktrees off, against the floor (`xargs -P2` spawning the same no-op 200 times) and
/// pueue's dispatch of the same 200 commands with `parallel 2`. Rounds alternate so the
/// three share the machine's moods; each executor round starts from a copy of the same
/// freshly filled database and an empty logs folder.
fn dispatch(dir: &Path) -> (Vec<Row>, Vec<String>) {
    let config = init_workspace(dir);
    let text = std::fs::read_to_string(&config).expect("read the dispatch config");
    let text = text
        .replacen(
            "[runner]\n",
            "[runner]\nmax_workers = 2\nworktrees = false\nretry_backoff = \"10ms\"\n",
            1,
        )
        .replacen(
            "[agent]\n",
            &format!(
                "[agent]\nkind = \"command\"\ncommand = [\"{}\", \"{}\"]\n",
                NO_OP[0], NO_OP[1]
            ),
            1,
        );
    std::fs::write(&config, text).expect("write the dispatch config");
    let db = db_path(&config);
    fill_approved(&db, DISPATCH_RUNS);
    // The store leaves its WAL in place on close; fold it in so one file is the whole
    // database to copy.
    Connection::open(&db)
        .and_then(|conn| conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);"))
        .unwrap_or_else(|e| panic!("cannot checkpoint {}: {e}", db.display()));
    let template = dir.join("approved.db");
    std::fs::copy(&db, &template).expect("keep a copy of the filled database");

    let probe_before = inode_cost(&dir.join("inode-probe-before"));
    let pueue = Pueue::start(&dir.join("pueue"));
    let bwrap = wall_program();
    let wall = bwrap.is_some();
    let (mut ours, mut floor, mut theirs) = (Vec::new(), Vec::new(), Vec::new());
    let (mut confined, mut wall_floor) = (Vec::new(), Vec::new());
    for round in 0..DISPATCH_ROUNDS {
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(db.with_file_name(format!("executor.db{suffix}")));
        }
        std::fs::copy(&template, &db).expect("restore the filled database");
        // The last round's logs are moved aside, not deleted: on ext4, a burst of deleted
        // inodes slows the next file creations, which would charge the bench's own cleanup
        // to the next round. The temporary folder goes at the end.
        if dir.join("logs").exists() {
            std::fs::rename(dir.join("logs"), dir.join(format!("logs-{round}")))
                .expect("move the last round's logs aside");
        }
        let mut command = executor(&config);
        command.args(["run", "--once"]).env(SANDBOX_MODE_ENV, "off");
        let (elapsed, output) = timed_output(&mut command);
        expect_success(&output, "executor run --once (200 no-op runs)");
        let done = count_status(&db, "done");
        assert_eq!(
            done, DISPATCH_RUNS as i64,
            "only {done} of {DISPATCH_RUNS} runs completed"
        );
        ours.push(elapsed);

        if wall {
            for suffix in ["-wal", "-shm"] {
                let _ = std::fs::remove_file(db.with_file_name(format!("executor.db{suffix}")));
            }
            std::fs::copy(&template, &db).expect("restore the filled database");
            if dir.join("logs").exists() {
                std::fs::rename(dir.join("logs"), dir.join(format!("logs-confined-{round}")))
                    .expect("move the last round's logs aside");
            }
            let mut command = executor(&config);
            command
                .args(["run", "--once"])
                .env(SANDBOX_MODE_ENV, "required");
            let (elapsed, output) = timed_output(&mut command);
            expect_success(&output, "executor run --once (200 confined no-op runs)");
            assert_eq!(count_status(&db, "done"), DISPATCH_RUNS as i64);
            confined.push(elapsed);
        }

        let mut xargs = Command::new("sh");
        xargs.arg("-c").arg(format!(
            "seq {DISPATCH_RUNS} | xargs -P2 -I{{}} {} '{}' >/dev/null",
            NO_OP[0], NO_OP[1]
        ));
        let (elapsed, output) = timed_output(&mut xargs);
        expect_success(&output, "xargs -P2");
        floor.push(elapsed);

        // The same no-ops, each in the least wall bubblewrap makes: what confining costs
        // before executor adds anything of its own.
        if let Some(bwrap) = &bwrap {
            let mut walled = Command::new("xargs");
            walled
                .args(["-P2", "-I{}"])
                .args(least_wall(bwrap))
                .args(NO_OP)
                .stdin(Stdio::piped())
                .stdout(Stdio::null());
            let started = Instant::now();
            let mut child = walled.spawn().expect("spawn xargs -P2 bwrap");
            {
                use std::io::Write;
                let mut input = child.stdin.take().expect("xargs' stdin");
                let lines: String = (1..=DISPATCH_RUNS).map(|n| format!("{n}\n")).collect();
                input
                    .write_all(lines.as_bytes())
                    .expect("feed xargs its lines");
            }
            let status = child.wait().expect("wait for xargs -P2 bwrap");
            assert!(status.success(), "xargs -P2 bwrap failed: {status}");
            wall_floor.push(started.elapsed());
        }

        if let Some(pueue) = &pueue {
            theirs.push(pueue.dispatch(DISPATCH_RUNS));
        }
    }
    let probe_after = inode_cost(&dir.join("inode-probe-after"));
    let floor_median = median(&floor);
    let ratio = median(&ours).as_secs_f64() / floor_median.as_secs_f64();
    let mut rows = vec![
        Row {
            name: format!(
                "dispatch: {DISPATCH_RUNS} no-op runs, `executor run --once`, cap 2, worktrees off ({ratio:.1}x the floor)"
            ),
            met: ratio <= 2.5,
            samples: ours.clone(),
            target: "within 2.5x of xargs".into(),
        },
        Row {
            name: format!("dispatch floor: `xargs -P2`, the same no-op {DISPATCH_RUNS} times"),
            met: true,
            samples: floor,
            target: "(the floor)".into(),
        },
    ];
    let mut notes = vec![format!(
        "dispatch: each executor round starts {DISPATCH_RUNS} runs from approved tasks and ends with every task `done`: {} per run including its store writes, phase log and run record (the workspace is in {}).",
        micros(median(&ours) / DISPATCH_RUNS as u32),
        dir.display()
    )];
    notes.push(inode_note(probe_before, probe_after));
    if wall {
        let walled = median(&confined).as_secs_f64() / median(&ours).as_secs_f64();
        let confined_median = median(&confined);
        let least = median(&wall_floor);
        rows.push(Row {
            name: format!(
                "dispatch confined: the same {DISPATCH_RUNS} no-op runs, every worker in the wall ({walled:.2}x unconfined)"
            ),
            met: walled <= 2.0,
            samples: confined,
            target: "within 2x of unconfined".into(),
        });
        rows.push(Row {
            name: format!(
                "wall floor: `xargs -P2` of the same no-op {DISPATCH_RUNS} times, each in the least bubblewrap wall ({:.2}x the xargs floor)",
                least.as_secs_f64() / floor_median.as_secs_f64()
            ),
            met: true,
            samples: wall_floor,
            target: "(the wall's floor)".into(),
        });
        let least_cost = least.saturating_sub(floor_median);
        let our_cost = confined_median.saturating_sub(median(&ours));
        notes.push(format!(
            "wall floor: bubblewrap alone (the worker's namespaces, `/` read-only, a fresh `/proc`, `/dev` and `/tmp`; no home, covers or binds) adds {} to xargs' {DISPATCH_RUNS} starts; the wall adds {} to executor's unconfined dispatch, {} of it executor's own (the private home, the covers and binds of its plan, a fork instead of a spawn for the rlimits). Within 2x of unconfined needs the wall to add at most the unconfined dispatch itself ({}): {}.",
            millis(least_cost),
            millis(our_cost),
            millis(our_cost.saturating_sub(least_cost)),
            millis(median(&ours)),
            if least_cost > median(&ours) {
                "bubblewrap's own floor is above that here, so no bubblewrap wall meets it on this machine"
            } else {
                "bubblewrap's own floor is below that here"
            }
        ));
    }
    match &pueue {
        Some(pueue) => {
            let speedup = median(&theirs).as_secs_f64() / median(&ours).as_secs_f64();
            rows.push(Row {
                name: format!(
                    "dispatch: pueue {} `parallel 2`, the same {DISPATCH_RUNS} no-ops (executor {speedup:.1}x faster)",
                    pueue.version
                ),
                met: speedup >= 10.0,
                samples: theirs,
                target: "executor at least 10x faster".into(),
            });
            notes.push("pueue: each round `pueue add`s the 200 commands (one client process each) and `pueue wait`s for them; its daemon runs with its own config and state in the bench's folder.".into());
        }
        None => notes.push(
            "pueue: not installed (`pueue` and `pueued` are not on PATH), so its column is missing; `cargo install pueue --locked` adds it.".into(),
        ),
    }
    (rows, notes)
}

/// The variable that overrides `[sandbox] mode` for one command.
const SANDBOX_MODE_ENV: &str = "EXECUTOR_SANDBOX_MODE";
const WALL_STARTS: usize = 200;
const WALL_TARGET: Duration = Duration::from_millis(20);

/// Whether bubblewrap confines here (else the wall's rows are left out, and say so).
fn wall_available() -> bool {
    wall_program().is_some()
}

/// The bubblewrap that confines here, if one does.
fn wall_program() -> Option<PathBuf> {
    match executor::sandbox::probe::probe(None) {
        executor::sandbox::probe::Probed::Works { program } => Some(program),
        executor::sandbox::probe::Probed::Unavailable { .. } => None,
    }
}

/// The least a bubblewrap wall can be for a worker: the worker's own namespaces and
/// system mounts, as the wall's command line makes them, a private `/tmp`, and nothing of
/// executor's own (no home, no covers, no binds); `bwrap` and its options up to `--`.
fn least_wall(bwrap: &Path) -> Vec<String> {
    use executor::sandbox::bwrap::{argv, Plan};
    argv(
        bwrap,
        &Plan {
            hidden: vec![PathBuf::from("/tmp")],
            own_network: true,
            cwd: PathBuf::from("/"),
            ..Plan::default()
        },
    )
}

/// Spawn to a worker's first output line, as the runner starts it: unconfined, and inside
/// the wall with the network off and with the allowlist (the bridge and executor's proxy).
fn wall_start(dir: &Path) -> (Vec<Row>, Vec<String>) {
    use executor::config::{SandboxMode, SandboxNetwork};
    use executor::sandbox::{AgentFamily, Place, Wall, WallSettings};
    use executor::supervisor::{self, WorkerEvent, WorkerSpec};
    if !wall_available() {
        return (
            Vec::new(),
            vec!["wall: bubblewrap cannot confine a process on this machine, so the wall's rows are missing".into()],
        );
    }
    let worktree = dir.join("worktree");
    std::fs::create_dir_all(&worktree).expect("mkdir");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // The network gate's listeners are tokio's: enclosing needs the runtime entered.
    let _entered = runtime.enter();
    let echo = executor::agents::find_program("echo", std::env::var_os("PATH").as_deref())
        .expect("echo on PATH");
    let mut rows = Vec::new();
    let mut medians = Vec::new();
    for (label, mode, network) in [
        ("unconfined", SandboxMode::Off, SandboxNetwork::None),
        (
            "confined, network none",
            SandboxMode::Required,
            SandboxNetwork::None,
        ),
        (
            "confined, network allowlist (bridge and proxy)",
            SandboxMode::Required,
            SandboxNetwork::Allowlist,
        ),
    ] {
        let mut settings = WallSettings::off(dir.join("homes"));
        settings.mode = mode;
        settings.network = network;
        // One forwarded loopback port, so the allowlist row starts the bridge and the proxy
        // (an allowlist that allows nothing is the network `none`).
        settings.allow = vec![
            executor::config::sandbox::parse_host_port("127.0.0.1:11434").expect("a host and port"),
        ];
        settings.executor = PathBuf::from(BIN);
        settings.hidden = vec![dir.to_path_buf()];
        let wall = Wall::establish(settings).expect("the wall");
        let place = Place {
            worktree: worktree.clone(),
            read_only_worktree: false,
            git_common_dir: None,
            home: "run-1".into(),
            agent: AgentFamily::Command,
            read_only: Vec::new(),
            read_write: Vec::new(),
            loopback_ports: Vec::new(),
            label: "bench".into(),
        };
        let mut samples = Vec::with_capacity(WALL_STARTS);
        for _ in 0..WALL_STARTS {
            let mut spec = WorkerSpec::for_test(vec![
                echo.display().to_string(),
                "[STATUS:started] first instruction".into(),
            ]);
            spec.cwd = worktree.clone();
            spec.env
                .insert("PATH".into(), std::env::var("PATH").unwrap_or_default());
            let started = Instant::now();
            let enclosed = wall.enclose(spec, &place).expect("enclose");
            let first = runtime.block_on(async {
                let mut first = None;
                supervisor::supervise(
                    enclosed.spec,
                    |event| {
                        if matches!(event, WorkerEvent::Line { .. }) && first.is_none() {
                            first = Some(started.elapsed());
                        }
                        true
                    },
                    None,
                )
                .await
                .expect("the worker ran");
                first.expect("the worker printed its line")
            });
            drop(enclosed.gate);
            samples.push(first);
        }
        medians.push(median(&samples));
        let confined = mode != SandboxMode::Off;
        rows.push(Row {
            name: format!("wall: spawn to the worker's first line, {label}"),
            met: !confined || median(&samples) <= WALL_TARGET,
            samples,
            target: if confined {
                format!("median ≤ {} ms", WALL_TARGET.as_millis())
            } else {
                "(the floor)".into()
            },
        });
    }
    let note = format!(
        "wall: each start encloses the spec (the private home, the mount plan, for the allowlist the proxy's sockets), starts bwrap and waits for the worker's first stdout line; the wall adds {} (network none) and {} (allowlist) to the {} of an unconfined start.",
        millis(medians[1].saturating_sub(medians[0])),
        millis(medians[2].saturating_sub(medians[0])),
        millis(medians[0])
    );
    (rows, vec![note])
}

/// `total` approved tasks, written through the store as any source would.
fn fill_approved(db: &Path, total: usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot start a tokio runtime to fill the queue");
    runtime.block_on(async {
        let store = SqliteStore::open(db)
            .await
            .unwrap_or_else(|e| panic!("cannot open the store {}: {e}", db.display()));
        for n in 1..=total {
            let task = NewTask {
                task_gid: format!("N-{n}"),
                source: "bench".to_string(),
                description: compose_description(&format!("No-op {n}"), "Nothing to do."),
                notes: None,
                priority: None,
                initial_status: QueueStatus::Approved,
            };
            store
                .upsert_task(&task, "bench", chrono::Utc::now())
                .await
                .unwrap_or_else(|e| panic!("upsert of task {n} failed: {e}"));
        }
    });
}

fn count_status(db: &Path, status: &str) -> i64 {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", db.display()));
    conn.query_row(
        "SELECT COUNT(*) FROM executor_queue WHERE status = ?1",
        params![status],
        |row| row.get(0),
    )
    .unwrap_or_else(|e| panic!("cannot count tasks in {}: {e}", db.display()))
}

/// A pueue daemon of the bench's own (config, state and socket in `dir`), when pueue is
/// installed.
struct Pueue {
    config: PathBuf,
    daemon: Child,
    version: String,
}

impl Pueue {
    fn start(dir: &Path) -> Option<Self> {
        let version = Command::new("pueue").arg("--version").output().ok()?;
        if !version.status.success() {
            return None;
        }
        let version = String::from_utf8_lossy(&version.stdout)
            .trim()
            .trim_start_matches("Pueue client ")
            .trim_start_matches("pueue ")
            .to_string();
        std::fs::create_dir_all(dir).expect("create the pueue folder");
        let config = dir.join("pueue.yml");
        std::fs::write(
            &config,
            format!(
                "shared:\n  pueue_directory: {0}\n  runtime_directory: {0}\n  use_unix_socket: true\n  unix_socket_path: {0}/pueue.socket\n",
                dir.display()
            ),
        )
        .expect("write the pueue config");
        let daemon = Command::new("pueued")
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let pueue = Self {
            config,
            daemon,
            version,
        };
        let started = Instant::now();
        while !pueue.client(&["status"]).status.success() {
            assert!(
                started.elapsed() < DAEMON_START_GIVE_UP,
                "pueued did not answer"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        expect_success(&pueue.client(&["parallel", "2"]), "pueue parallel 2");
        Some(pueue)
    }

    fn client(&self, args: &[&str]) -> Output {
        Command::new("pueue")
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("cannot spawn pueue")
    }

    /// Adds `n` no-op commands and waits for all of them; the time from the first add to
    /// the end of the wait.
    fn dispatch(&self, n: usize) -> Duration {
        expect_success(&self.client(&["clean"]), "pueue clean");
        let started = Instant::now();
        for _ in 0..n {
            expect_success(
                &self.client(&["add", "--", NO_OP[0], NO_OP[1]]),
                "pueue add",
            );
        }
        expect_success(&self.client(&["wait"]), "pueue wait");
        started.elapsed()
    }
}

impl Drop for Pueue {
    fn drop(&mut self) {
        let _ = self.client(&["shutdown"]);
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

const HOOK_CALLS: usize = 200;
const HOOK_TARGET: Duration = Duration::from_millis(20);

/// `executor hook claude` as Claude Code runs it: spawn, hook JSON on stdin, the answer on
/// stdout, the decision recorded in the workspace's SQLite store. Alternates an allowed
/// and a denied Bash call.
fn hook_round_trip(dir: &Path) -> Row {
    use std::io::Write;
    let config = init_workspace(dir);
    let worktree = dir.join("worktree");
    std::fs::create_dir_all(&worktree).expect("create the hook's worktree");
    let input = |command: &str| {
        serde_json::json!({
            "session_id": "7817711f-9a75-4be4-9372-239a3eb8cfd9",
            "cwd": worktree,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "tool_use_id": "toolu_bench"
        })
        .to_string()
    };
    let inputs = [
        (input("cargo test --workspace"), "allow"),
        (input("git push origin main"), "deny"),
    ];
    let mut samples = Vec::with_capacity(HOOK_CALLS);
    for n in 0..HOOK_CALLS {
        let (input, expected) = &inputs[n % inputs.len()];
        let started = Instant::now();
        let mut child = Command::new(BIN)
            .args(["hook", "claude", "--config"])
            .arg(&config)
            .args(["--run", "1", "--worktree"])
            .arg(&worktree)
            .args(["--branch", "executor/T-1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn executor hook claude");
        child
            .stdin
            .take()
            .expect("the hook's stdin")
            .write_all(input.as_bytes())
            .expect("write the hook input");
        let output = child.wait_with_output().expect("the hook's answer");
        samples.push(started.elapsed());
        expect_success(&output, "executor hook claude");
        let answer: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("the hook printed JSON");
        assert_eq!(
            answer["hookSpecificOutput"]["permissionDecision"], *expected,
            "{answer}"
        );
    }
    Row {
        name: format!("`executor hook claude` round trip (spawn to answer, decision recorded), {HOOK_CALLS} calls"),
        met: median(&samples) < HOOK_TARGET,
        samples,
        target: "median < 20 ms".into(),
    }
}

const RELAY_CALLS: usize = 1000;
const RELAY_MEDIAN: Duration = Duration::from_millis(2);
const RELAY_MAX: Duration = Duration::from_millis(10);

/// The hook as every Claude worker runs it: `executor-hook … --relay SOCKET`, the small
/// client of the runner installed beside `executor`, which holds the contract and the store already, judges the call
/// and records it (here a relay served in this process, on a SQLite store of its own).
/// Spawn to answer; inside the wall the hook is a child of the walled agent, so the wall
/// adds no step to this path.
fn hook_relay_round_trip(dir: &Path) -> Row {
    use std::io::Write;
    let config = init_workspace(dir);
    let worktree = dir.join("worktree");
    std::fs::create_dir_all(&worktree).expect("create the hook's worktree");
    let contract = dir.join("roles/worker-policy.json");
    let socket = dir.join("hook.sock");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime for the relay");
    let store = runtime
        .block_on(executor::store::sqlite::SqliteStore::open(
            &dir.join("relay.db"),
        ))
        .expect("the relay's store");
    let listener = {
        let _entered = runtime.enter();
        tokio::net::UnixListener::bind(&socket).expect("bind the relay")
    };
    let run = executor::cli::HookRun {
        config: config.clone(),
        run_id: 1,
        worktree: worktree.clone(),
        branch: Some("executor/T-1".into()),
        contract: Some(contract.clone()),
        relay: None,
        confined: true,
        process_cap: true,
        base_branch: Some("main".into()),
        network: None,
    };
    runtime.spawn(async move {
        executor::cli::serve_relay(executor::cli::RelayListener::Socket(listener), &store, run)
            .await;
    });
    let input = |command: &str| {
        serde_json::json!({
            "session_id": "7817711f-9a75-4be4-9372-239a3eb8cfd9",
            "cwd": worktree,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "tool_use_id": "toolu_bench"
        })
        .to_string()
    };
    let inputs = [
        (input("cargo test --workspace"), "allow"),
        (input("git push origin main"), "deny"),
    ];
    let mut samples = Vec::with_capacity(RELAY_CALLS);
    for n in 0..RELAY_CALLS {
        let (input, expected) = &inputs[n % inputs.len()];
        let started = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_executor-hook"))
            .arg("--config")
            .arg(&config)
            .args(["--run", "1", "--worktree"])
            .arg(&worktree)
            .args(["--branch", "executor/T-1", "--contract"])
            .arg(&contract)
            .arg("--relay")
            .arg(&socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn executor hook claude");
        child
            .stdin
            .take()
            .expect("the hook's stdin")
            .write_all(input.as_bytes())
            .expect("write the hook input");
        let output = child.wait_with_output().expect("the hook's answer");
        samples.push(started.elapsed());
        expect_success(&output, "executor hook claude --relay");
        assert!(
            output.stderr.is_empty(),
            "the hook judged by itself: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let answer: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("the hook printed JSON");
        assert_eq!(
            answer["hookSpecificOutput"]["permissionDecision"], *expected,
            "{answer}"
        );
    }
    let max = samples.iter().max().copied().unwrap_or_default();
    let floor = spawn_floor(inputs[0].0.as_bytes());
    let share = median(&samples).saturating_sub(median(&floor));
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Row {
        name: format!(
            "`executor-hook --relay` round trip (spawn to answer, judged and recorded by the runner), {RELAY_CALLS} calls; spawning `cat` the same way: median {:.2} ms in this run, the hook's own share {:.2} ms",
            ms(median(&floor)),
            ms(share)
        ),
        met: median(&samples) <= RELAY_MEDIAN && max <= RELAY_MAX,
        samples,
        target: "median ≤ 2 ms, max ≤ 10 ms".into(),
    }
}

/// The floor of a hook's round trip: `cat` spawned the way Claude spawns its hook, the
/// same input on stdin and its echo read back, [`RELAY_CALLS`] times.
fn spawn_floor(input: &[u8]) -> Vec<Duration> {
    use std::io::Write;
    (0..RELAY_CALLS)
        .map(|_| {
            let started = Instant::now();
            let mut child = Command::new("cat")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn cat");
            child
                .stdin
                .take()
                .expect("cat's stdin")
                .write_all(input)
                .expect("write to cat");
            let output = child.wait_with_output().expect("cat's output");
            assert_eq!(output.stdout, input);
            started.elapsed()
        })
        .collect()
}

const WAKE_NOTES: usize = 10;
const WAKE_GOS: usize = 10;
const WAKE_DECIDES: usize = 5;
const WAKE_SETTLE: Duration = Duration::from_millis(300);
const WAKE_GIVE_UP: Duration = Duration::from_secs(30);
const WAKE_POLL: Duration = Duration::from_millis(1);

/// The worker of the wake-up series: it marks its start in `marks/` (named by the task's
/// title in its prompt), asks the owner when the title says so, and on the resume marks that.
fn wake_worker(marks: &Path) -> String {
    let marks = marks.display();
    format!(
        "prompt=$(cat); n=$(printf '%s' \"$prompt\" | grep -o 'benchtask[a-z]*[0-9]*' | head -1); \
         if printf '%s' \"$prompt\" | grep -q 'The owner answered your escalation'; then \
           : > '{marks}'/resumed-$n; echo '[DONE:implemented] resumed'; \
         elif [ \"${{n#benchtaskask}}\" != \"$n\" ]; then \
           : > '{marks}'/$n; echo '[ESCALATE:needs_decision] may I?'; \
         else : > '{marks}'/$n; echo '[DONE:implemented] ok'; fi"
    )
}

/// A workspace whose daemon never reaches its own timer (`loop_sleep` of ten minutes), so
/// every start below comes from a wake-up or the plans watcher.
fn wake_workspace(dir: &Path) -> (PathBuf, PathBuf) {
    let config = init_workspace(dir);
    let marks = dir.join("marks");
    std::fs::create_dir_all(&marks).expect("mkdir marks");
    let worker = wake_worker(&marks);
    let text = std::fs::read_to_string(&config).expect("read the config");
    let text = text
        .replacen(
            "[runner]\n",
            "[runner]\nmax_workers = 2\nworktrees = false\nloop_sleep = \"600s\"\n",
            1,
        )
        .replacen(
            "[agent]\n",
            &format!(
                "[agent]\nkind = \"command\"\ncommand = [\"/bin/sh\", \"-c\", {}]\n",
                serde_json::to_string(&worker).expect("a JSON string is a TOML string")
            ),
            1,
        );
    std::fs::write(&config, text).expect("write the config");
    (config, marks)
}

/// Waits for `mark` to appear; how long since `started`.
fn wait_for_mark(mark: &Path, started: Instant, log: &Path) -> Duration {
    loop {
        if mark.exists() {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < WAKE_GIVE_UP,
            "no worker made {} within {}; the daemon's log is {}",
            mark.display(),
            seconds(WAKE_GIVE_UP),
            log.display()
        );
        std::thread::sleep(WAKE_POLL);
    }
}

fn wake_cli(config: &Path, storage: Option<&str>, args: &[&str]) -> Output {
    let mut command = executor(config);
    command.args(args);
    if let Some(url) = storage {
        command.env("EXECUTOR_STORAGE_URL", url);
    }
    let output = command.output().expect("cannot spawn executor");
    expect_success(&output, &format!("executor {}", args.join(" ")));
    output
}

/// `executor go` from another process to the worker's start.
fn timed_gos(config: &Path, marks: &Path, log: &Path, storage: Option<&str>) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(WAKE_GOS);
    for n in 1..=WAKE_GOS {
        let title = format!("benchtaskgo{n}");
        let gid = format!("GO-{n}");
        wake_cli(config, storage, &["add", "--title", &title, "--gid", &gid]);
        let started = Instant::now();
        wake_cli(config, storage, &["go", &gid]);
        samples.push(wait_for_mark(&marks.join(&title), started, log));
    }
    samples
}

/// A fresh schema on the bench's Postgres (`EXECUTOR_TEST_PG`), as a URL the binary takes.
fn bench_schema() -> Option<String> {
    let url = std::env::var("EXECUTOR_TEST_PG").ok()?;
    let name = format!("executor_bench_wake_{}", std::process::id());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(&url)
            .await
            .unwrap_or_else(|e| panic!("EXECUTOR_TEST_PG is set but unreachable: {e}"));
        sqlx::query(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
            .execute(&pool)
            .await
            .expect("drop an old bench schema");
        sqlx::query(&format!("CREATE SCHEMA {name}"))
            .execute(&pool)
            .await
            .expect("create the bench schema");
        pool.close().await;
    });
    let separator = if url.contains('?') { '&' } else { '?' };
    Some(format!("{url}{separator}options=-csearch_path%3D{name}"))
}

/// Wake-ups: a plan note saved, `executor go` and `executor decide` from another process, each
/// to the start of the worker it brings.
fn wake_ups(dir: &Path) -> (Vec<Row>, Vec<String>) {
    let mut rows = Vec::new();
    let mut notes = Vec::new();

    // SQLite: notes, then `go`, then `decide`, on one daemon.
    let (config, marks) = wake_workspace(&dir.join("sqlite"));
    let log = dir.join("sqlite-daemon.log");
    let daemon = Daemon::start_on(&config, &log, None);
    wait_for_daemon(&config);
    let plans = config.parent().expect("workspace").join("plans");
    let mut saved = Vec::with_capacity(WAKE_NOTES);
    for n in 1..=WAKE_NOTES {
        let title = format!("benchtasknote{n}");
        let started = Instant::now();
        std::fs::write(plans.join(format!("{title}.md")), format!("# {title}\n"))
            .expect("write a note");
        let elapsed = wait_for_mark(&marks.join(&title), started, &log);
        saved.push(elapsed.saturating_sub(WAKE_SETTLE));
    }
    rows.push(Row {
        name: "daemon: plan note saved to worker started, after the 300 ms settle time".into(),
        met: median(&saved) <= Duration::from_millis(50),
        samples: saved,
        target: "median ≤ 50 ms".into(),
    });
    let gos = timed_gos(&config, &marks, &log, None);
    rows.push(Row {
        name: "daemon (SQLite): `executor go` from another process to worker started".into(),
        met: median(&gos) <= Duration::from_millis(100),
        samples: gos,
        target: "median ≤ 100 ms".into(),
    });
    let mut decides = Vec::with_capacity(WAKE_DECIDES);
    for n in 1..=WAKE_DECIDES {
        let title = format!("benchtaskask{n}");
        let gid = format!("ASK-{n}");
        wake_cli(&config, None, &["add", "--title", &title, "--gid", &gid]);
        let started = Instant::now();
        wake_cli(&config, None, &["go", &gid]);
        wait_for_mark(&marks.join(&title), started, &log);
        let id = loop {
            let listed = wake_cli(&config, None, &["escalations", "--json"]);
            let listed: serde_json::Value =
                serde_json::from_slice(&listed.stdout).expect("escalations --json");
            let open = listed
                .as_array()
                .and_then(|all| all.iter().find(|e| e["task_gid"] == gid.as_str()))
                .and_then(|e| e["id"].as_i64());
            if let Some(id) = open {
                break id;
            }
            assert!(started.elapsed() < WAKE_GIVE_UP, "no escalation for {gid}");
            std::thread::sleep(Duration::from_millis(5));
        };
        let started = Instant::now();
        wake_cli(&config, None, &["decide", &id.to_string(), "approve"]);
        decides.push(wait_for_mark(
            &marks.join(format!("resumed-{title}")),
            started,
            &log,
        ));
    }
    drop(daemon);
    rows.push(Row {
        name: "daemon (SQLite): `executor decide` to the resumed worker started".into(),
        met: median(&decides) <= Duration::from_millis(200),
        samples: decides,
        target: "median ≤ 200 ms".into(),
    });

    // Postgres, when the bench has one.
    match bench_schema() {
        Some(url) => {
            let (config, marks) = wake_workspace(&dir.join("postgres"));
            let log = dir.join("postgres-daemon.log");
            let daemon = Daemon::start_on(&config, &log, Some(&url));
            // Running once its heartbeat is in the shared store.
            let started = Instant::now();
            loop {
                let status = wake_cli(&config, Some(&url), &["status", "--json"]);
                let status: serde_json::Value =
                    serde_json::from_slice(&status.stdout).expect("status --json");
                let running = status["components"].as_array().is_some_and(|all| {
                    all.iter()
                        .any(|c| c["component"] == "daemon" && c["state"] == "running")
                });
                if running {
                    break;
                }
                assert!(
                    started.elapsed() < DAEMON_START_GIVE_UP,
                    "no daemon on Postgres"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let gos = timed_gos(&config, &marks, &log, Some(&url));
            drop(daemon);
            rows.push(Row {
                name: "daemon (Postgres): `executor go` from another process to worker started"
                    .into(),
                met: median(&gos) <= Duration::from_millis(100),
                samples: gos,
                target: "median ≤ 100 ms".into(),
            });
        }
        None => notes.push(
            "wake-ups on Postgres: EXECUTOR_TEST_PG is not set, so that row is missing".into(),
        ),
    }
    notes.push(format!(
        "wake-ups: each daemon has `loop_sleep = \"600s\"`, so no start came from its timer; a worker's start is the file its first shell command makes; the note row subtracts the {} settle time from write-to-start.",
        millis(WAKE_SETTLE)
    ));
    (rows, notes)
}

const IDLE_OPEN_RUNS: usize = 1_000;
const IDLE_SETTLE: Duration = Duration::from_secs(5);
const IDLE_WINDOW: Duration = Duration::from_secs(20);
/// At most 1% of one core.
const IDLE_CPU_TARGET: f64 = 0.01;

/// A process's user plus system CPU time, from `/proc/<pid>/stat` (fields 14 and 15, in
/// clock ticks; Linux's `USER_HZ` is 100 on every architecture the project builds for).
fn process_cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|e| panic!("cannot read /proc/{pid}/stat: {e}"));
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let after = &stat[stat.rfind(')').expect("a stat line names its command") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (the state), so utime (14) and stime (15) are 11 and 12.
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_millis(ticks * 10)
}

/// 1,000 runs whose workers asked the owner a question (each waits for an answer, holding
/// no worker), then a daemon with the default settings over them: its CPU time over 20 s
/// once its start has settled.
fn idle_daemon(dir: &Path) -> (Vec<Row>, Vec<String>) {
    let config = init_workspace(dir);
    let text = std::fs::read_to_string(&config).expect("read the idle config");
    let text = text
        .replacen("[runner]\n", "[runner]\nmax_workers = 2\nworktrees = false\n", 1)
        .replacen(
            "[agent]\n",
            "[agent]\nkind = \"command\"\ncommand = [\"/bin/echo\", \"[ESCALATE:needs_decision] may I?\"]\n",
            1,
        );
    std::fs::write(&config, text).expect("write the idle config");
    let db = db_path(&config);
    fill_approved(&db, IDLE_OPEN_RUNS);
    let mut command = executor(&config);
    command.args(["run", "--once"]).env(SANDBOX_MODE_ENV, "off");
    let (filled, output) = timed_output(&mut command);
    expect_success(&output, "executor run --once (1,000 escalating runs)");
    let listed = executor(&config)
        .args(["escalations", "--json"])
        .output()
        .expect("cannot spawn executor escalations --json");
    expect_success(&listed, "executor escalations --json");
    let listed: serde_json::Value =
        serde_json::from_slice(&listed.stdout).expect("escalations --json printed invalid JSON");
    let waiting = listed.as_array().map_or(0, Vec::len) as i64;
    assert_eq!(
        waiting, IDLE_OPEN_RUNS as i64,
        "{waiting} of {IDLE_OPEN_RUNS} runs wait for the owner"
    );

    let log = dir.join("idle-daemon.log");
    let daemon = Daemon::start(&config, &log);
    wait_for_daemon(&config);
    std::thread::sleep(IDLE_SETTLE);
    let pid = daemon.0.id();
    let (cpu_before, wall_before) = (process_cpu(pid), Instant::now());
    std::thread::sleep(IDLE_WINDOW);
    let (cpu, wall) = (process_cpu(pid) - cpu_before, wall_before.elapsed());
    drop(daemon);
    let share = cpu.as_secs_f64() / wall.as_secs_f64();
    let rows = vec![Row {
        name: format!(
            "idle daemon over {IDLE_OPEN_RUNS} runs waiting for the owner: CPU time over {} ({:.2}% of a core)",
            seconds(wall),
            share * 100.0
        ),
        met: share <= IDLE_CPU_TARGET,
        samples: vec![cpu],
        target: "≤ 1% of a core".into(),
    }];
    let notes = vec![format!(
        "idle daemon: {IDLE_OPEN_RUNS} approved tasks run by `executor run --once` with a worker that escalates ({} for all), then `executor daemon` with the default `loop_sleep`; utime + stime from /proc/<pid>/stat ({}-ms ticks) over {} after {} of settling past `status` showing it running.",
        seconds(filled),
        10,
        seconds(IDLE_WINDOW),
        seconds(IDLE_SETTLE)
    )];
    (rows, notes)
}

const CONSOLE_TASKS: usize = 100_000;
const CONSOLE_RUNS: usize = 10_000;
const CONSOLE_SAMPLES: usize = 40;
const CONSOLE_LINES: usize = 40;
const PAGE_TARGET: Duration = Duration::from_millis(50);
const LIST_TARGET: Duration = Duration::from_millis(30);
const LINE_TARGET: Duration = Duration::from_millis(20);
const CONSOLE_IDLE_WINDOW: Duration = Duration::from_secs(10);
const CONSOLE_CPU_TARGET: f64 = 0.01;

/// A count from the environment (for a quick look at a smaller store), else `default`.
fn sized(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One `GET` over a fresh loopback connection, as a browser's first request; the status
/// code and the body's length.
fn console_get(address: &str, path: &str) -> (u16, usize) {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(address)
        .unwrap_or_else(|e| panic!("cannot connect to the console at {address}: {e}"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .expect("send a request to the console");
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .expect("read the console's answer");
    let code = String::from_utf8_lossy(&response[..response.len().min(16)])
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, response.len())
}

/// The console's address, from the daemon's log line that says where it serves.
fn console_address(log: &Path) -> String {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let found = text
            .lines()
            .filter(|l| l.contains("serving the console's JSON API"))
            .find_map(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix("address="))
                    .map(|a| a.trim_matches(|c: char| !c.is_ascii_graphic()).to_string())
            });
        if let Some(address) = found {
            return address;
        }
        assert!(
            started.elapsed() < DAEMON_START_GIVE_UP,
            "the daemon said nowhere where its console is; its log is {}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The runs of the console's store: `runs` finished runs on the first tasks, each with a
/// branch and one worker whose spend is recorded (a tenth of them today).
fn fill_runs(db: &Path, runs: usize) -> (String, i64) {
    use executor::core::record::WorkerRecord;
    use executor::core::run::RunState;
    use executor::core::spend::Spend;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot start a tokio runtime to fill the runs");
    let started = Instant::now();
    let last = runtime.block_on(async {
        let store = SqliteStore::open(db)
            .await
            .unwrap_or_else(|e| panic!("cannot open the store {}: {e}", db.display()));
        let now = chrono::Utc::now();
        let mut last = 0;
        for n in 1..=runs {
            let at = now - chrono::Duration::minutes((runs - n) as i64);
            let mut run = store
                .create_run(&format!("Q-{n}"), at)
                .await
                .unwrap_or_else(|e| panic!("run of task {n} failed: {e}"));
            run.state = if n % 10 == 0 {
                RunState::Abandoned
            } else {
                RunState::Complete
            };
            run.branch_name = Some(format!("executor/Q-{n}-queued-task"));
            run.started_at = Some(at - chrono::Duration::seconds(90));
            run.completed_at = Some(at);
            store.save_run(&run).await.expect("save a run");
            let worker = WorkerRecord {
                id: 0,
                run_id: run.id,
                phase: "work".to_string(),
                host: "bench".to_string(),
                pid: 1,
                start_time: None,
                started_at: at,
                ended_at: None,
                outcome: None,
            };
            let id = store.record_worker(&worker).await.expect("a worker");
            store.end_worker(id, at, "done").await.expect("its end");
            let spend = Spend {
                input_tokens: 12_000,
                output_tokens: 800,
                cached_tokens: 40_000,
                turns: 9,
                cost_usd: Some(0.042),
                priced: false,
            };
            store
                .record_spend(id, "claude", &spend)
                .await
                .expect("its spend");
            last = run.id;
        }
        last
    });
    let elapsed = started.elapsed();
    (
        format!(
            "console store: {runs} finished runs, each with a worker and its spend, through the store in {}.",
            seconds(elapsed)
        ),
        last,
    )
}

/// A workspace whose daemon serves the console on a free port, with no worktrees and a
/// no-op command agent (nothing for it to work on but what a bench adds).
fn console_workspace(dir: &Path) -> PathBuf {
    let config = init_workspace(dir);
    let text = std::fs::read_to_string(&config).expect("read the console config");
    let text = text
        .replacen("[web]\n", "[web]\nlisten = \"127.0.0.1:0\"\n", 1)
        .replacen("[runner]\n", "[runner]\nworktrees = false\n", 1)
        .replacen(
            "[agent]\n",
            "[agent]\nkind = \"command\"\ncommand = [\"/bin/echo\", \"[DONE:implemented] nothing\"]\n",
            1,
        );
    std::fs::write(&config, text).expect("write the console config");
    config
}

/// `samples` timed `GET path`s over fresh connections after `warm` untimed ones, each a
/// 200 (else the daemon's `log` is named); the times and the last answer's size.
fn timed_gets(
    address: &str,
    path: &str,
    warm: usize,
    samples: usize,
    log: &Path,
) -> (Vec<Duration>, usize) {
    for _ in 0..warm {
        console_get(address, path);
    }
    let mut times = Vec::with_capacity(samples);
    let mut size = 0;
    for _ in 0..samples {
        let started = Instant::now();
        let (code, bytes) = console_get(address, path);
        times.push(started.elapsed());
        assert_eq!(
            code,
            200,
            "GET {path} answered {code}; the log is {}",
            log.display()
        );
        size = bytes;
    }
    (times, size)
}

/// How many runs the outcome figures are timed over, and their target.
const ANALYTICS_RUNS: usize = 100_000;
const ANALYTICS_SAMPLES: usize = 20;
const ANALYTICS_TARGET: Duration = Duration::from_millis(100);

/// `GET /api/v1/analytics` of a daemon over 100,000 finished runs (each with a worker and
/// its spend), every one in the window: the figures' one read and their computation.
fn analytics(dir: &Path) -> (Vec<Row>, Vec<String>) {
    let runs = sized("EXECUTOR_BENCH_ANALYTICS_RUNS", ANALYTICS_RUNS);
    let config = console_workspace(dir);
    let db = db_path(&config);
    let mut notes = vec![fill_queue_with(&db, runs, |_| QueueStatus::Done)];
    let (note, _) = fill_runs(&db, runs);
    notes.push(note);
    let log = dir.join("analytics-daemon.log");
    let _daemon = Daemon::start(&config, &log);
    wait_for_daemon(&config);
    let address = console_address(&log);
    let path = "/api/v1/analytics?days=3650";
    let (samples, size) = timed_gets(&address, path, 2, ANALYTICS_SAMPLES, &log);
    let row = Row {
        name: format!(
            "console API `/api/v1/analytics` over {runs} finished runs, all in the window ({} KB)",
            size / 1024
        ),
        met: percentile(&samples, 95) <= ANALYTICS_TARGET,
        samples,
        target: format!("p95 ≤ {} ms", ANALYTICS_TARGET.as_millis()),
    };
    (vec![row], notes)
}

/// The console of a daemon over a store of 100,000 tasks (most done, the rest skipped or
/// waiting for the owner: nothing for the daemon to take) and 10,000 finished runs: every
/// page and API list timed over fresh connections, a worker's line written to the store
/// timed to an open live feed, and the CPU an open page's feed adds to the idle daemon.
fn console(dir: &Path) -> (Vec<Row>, Vec<String>) {
    let tasks = sized("EXECUTOR_BENCH_TASKS", CONSOLE_TASKS);
    let run_count = sized("EXECUTOR_BENCH_RUNS", CONSOLE_RUNS).min(tasks);
    let config = console_workspace(dir);
    let db = db_path(&config);
    let mut notes = vec![fill_queue_with(&db, tasks, |n| match n % 10 {
        0 => QueueStatus::ForReview,
        1 => QueueStatus::AwaitingGo,
        2 => QueueStatus::Skip,
        _ => QueueStatus::Done,
    })];
    let (note, last_run) = fill_runs(&db, run_count);
    notes.push(note);

    let log = dir.join("console-daemon.log");
    let daemon = Daemon::start(&config, &log);
    let mut daemon = daemon;
    std::thread::sleep(Duration::from_millis(500));
    if let Ok(Some(status)) = daemon.0.try_wait() {
        panic!(
            "the console's daemon stopped ({status}): {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    wait_for_daemon(&config);
    let address = console_address(&log);
    let mut rows = Vec::new();
    let pages = [
        ("Needs you `/`".to_string(), "/".to_string()),
        ("Runs `/runs`".to_string(), "/runs".to_string()),
        ("Queue `/queue`".to_string(), "/queue".to_string()),
        ("Run `/runs/{id}`".to_string(), format!("/runs/{last_run}")),
        ("Goals `/goals`".to_string(), "/goals".to_string()),
        ("System `/system`".to_string(), "/system".to_string()),
    ];
    let lists = [
        ("`/api/v1/tasks`".to_string(), "/api/v1/tasks".to_string()),
        (
            "`/api/v1/tasks?status=done`".to_string(),
            "/api/v1/tasks?status=done".to_string(),
        ),
        ("`/api/v1/runs`".to_string(), "/api/v1/runs".to_string()),
        (
            "`/api/v1/runs?state=complete&before=…`".to_string(),
            format!("/api/v1/runs?state=complete&before={}", last_run / 2),
        ),
        (
            "`/api/v1/escalations`".to_string(),
            "/api/v1/escalations".to_string(),
        ),
    ];
    let scale = format!("{tasks} tasks, {run_count} runs");
    for (kind, list, target) in [
        ("page", &pages[..], PAGE_TARGET),
        ("API list", &lists[..], LIST_TARGET),
    ] {
        for (name, path) in list {
            // The first requests warm the store's caches and probe the wall (System).
            let (samples, size) = timed_gets(&address, path, 3, CONSOLE_SAMPLES, &log);
            rows.push(Row {
                name: format!("console {kind} {name} ({scale}, {} KB)", size / 1024),
                met: percentile(&samples, 95) <= target,
                samples,
                target: format!("p95 ≤ {} ms", target.as_millis()),
            });
        }
    }

    // A worker's line, written to the store as a runner writes it, to an open feed.
    let (lines, feed_note) = line_latency(&db, &address, last_run);
    rows.push(Row {
        name: "console live feed: a worker's line to an open `/api/v1/events` (p50 in the median column)".into(),
        met: median(&lines) <= LINE_TARGET,
        samples: lines,
        target: format!("p50 ≤ {} ms", LINE_TARGET.as_millis()),
    });
    notes.push(feed_note);

    // The idle daemon's CPU without a page open, then with one page's live feed open.
    let pid = daemon.0.id();
    let share = |window: Duration| {
        let (cpu_before, wall_before) = (process_cpu(pid), Instant::now());
        std::thread::sleep(window);
        let (cpu, wall) = (process_cpu(pid) - cpu_before, wall_before.elapsed());
        (cpu, cpu.as_secs_f64() / wall.as_secs_f64())
    };
    let (_, closed) = share(CONSOLE_IDLE_WINDOW);
    let feed = open_feed(&address, &format!("/api/v1/events?run={last_run}"));
    let (open_cpu, open) = share(CONSOLE_IDLE_WINDOW);
    drop(feed);
    drop(daemon);
    let added = (open - closed).max(0.0);
    rows.push(Row {
        name: format!(
            "idle console: CPU an open page's live feed adds to the daemon over {} ({:.2}% of a core; {:.2}% with it, {:.2}% without)",
            seconds(CONSOLE_IDLE_WINDOW),
            added * 100.0,
            open * 100.0,
            closed * 100.0
        ),
        met: added <= CONSOLE_CPU_TARGET,
        samples: vec![open_cpu],
        target: "≤ 1% of a core".into(),
    });
    notes.push(format!(
        "console: each page and list over a fresh loopback connection ({CONSOLE_SAMPLES} samples after 3 warm-ups, the whole answer read); the daemon's utime + stime from /proc/<pid>/stat over {} with no page open, then {} with one live feed open.",
        seconds(CONSOLE_IDLE_WINDOW),
        seconds(CONSOLE_IDLE_WINDOW)
    ));
    (rows, notes)
}

/// An open live feed: the connection, and a thread reading its events into a channel.
struct Feed {
    _stream: std::net::TcpStream,
    lines: std::sync::mpsc::Receiver<(Instant, String)>,
}

fn open_feed(address: &str, path: &str) -> Feed {
    use std::io::{BufRead, Write};
    let mut stream = std::net::TcpStream::connect(address)
        .unwrap_or_else(|e| panic!("cannot connect to the console at {address}: {e}"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .expect("open the live feed");
    let reader = stream.try_clone().expect("a second handle on the feed");
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in io::BufReader::new(reader).lines() {
            let Ok(line) = line else { return };
            if send.send((Instant::now(), line)).is_err() {
                return;
            }
        }
    });
    Feed {
        _stream: stream,
        lines,
    }
}

/// Writes `CONSOLE_LINES` worker lines of run `run_id` to the store, one at a time, each
/// timed from its write to its `line` event on an open feed.
fn line_latency(db: &Path, address: &str, run_id: i64) -> (Vec<Duration>, String) {
    use executor::core::record::NewMessage;
    let feed = open_feed(address, &format!("/api/v1/events?run={run_id}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot start a tokio runtime to write lines");
    let store = runtime
        .block_on(SqliteStore::open(db))
        .unwrap_or_else(|e| panic!("cannot open the store {}: {e}", db.display()));
    // The feed is open once its first keep-alive or event could come; give it a moment.
    std::thread::sleep(Duration::from_millis(300));
    let mut samples = Vec::with_capacity(CONSOLE_LINES);
    for n in 0..CONSOLE_LINES {
        let marker = format!("bench line {n} of the console");
        let message = NewMessage {
            run_id,
            task_gid: format!("Q-{run_id}"),
            at: chrono::Utc::now(),
            source: "worker".to_string(),
            tag: "STATUS".to_string(),
            kind: "investigation".to_string(),
            args: "{}".to_string(),
            text: marker.clone(),
            line: format!("[STATUS:investigation] {marker}"),
        };
        let written = Instant::now();
        runtime
            .block_on(store.record_message(&message))
            .expect("write a worker's line");
        loop {
            let (at, line) = feed
                .lines
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("the feed did not send {marker:?} within 10 s"));
            if line.starts_with("data:") && line.contains(&marker) {
                samples.push(at.saturating_duration_since(written));
                break;
            }
        }
        // Apart, so each line is a write of its own (and lands at any point of a fallback
        // poll where the store gives no change hints).
        std::thread::sleep(Duration::from_millis(37));
    }
    let note = format!(
        "console live feed: {CONSOLE_LINES} lines written through `Store::record_message` from another process, each timed to its `data:` line on one open `/api/v1/events?run=…` (p95 {}).",
        millis(percentile(&samples, 95))
    );
    (samples, note)
}

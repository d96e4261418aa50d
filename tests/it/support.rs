//! Helpers shared by the integration tests: workspaces, running the binary, Postgres schemas.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::str::FromStr;

/// The columns of `executor_queue` and `executor_runs`, as docs/design.md §4 names them.
pub const QUEUE_COLUMNS: [&str; 13] = [
    "id",
    "task_gid",
    "added_at",
    "updated_at",
    "source",
    "description",
    "notes",
    "status",
    "priority",
    "complexity",
    "feasibility",
    "analysis_summary",
    "executor_run_id",
];
pub const RUN_COLUMNS: [&str; 16] = [
    "id",
    "task_gid",
    "worktree_path",
    "branch_name",
    "pr_url",
    "pr_number",
    "thread_id",
    "started_at",
    "updated_at",
    "completed_at",
    "state",
    "ci_attempts",
    "worker_session_id",
    "worker_last_update",
    "worker_pid",
    "worker_stuck_count",
];

pub const BIN: &str = env!("CARGO_BIN_EXE_executor");

/// The environment variable naming the test Postgres server. Unset: the Postgres tests say
/// they skipped. Set: they must pass, and an unreachable server fails them.
pub const PG_ENV: &str = "EXECUTOR_TEST_PG";

/// The variable that overrides `[sandbox] mode`.
pub const SANDBOX_MODE_ENV: &str = "EXECUTOR_SANDBOX_MODE";

/// A command for the binary with no inherited executor settings. Its workers run
/// unconfined (`EXECUTOR_SANDBOX_MODE=off`): most tests watch a worker through files it
/// writes outside its worktree, which the wall forbids. The wall has tests of its own
/// (`confinement.rs`, the real-agent tier), which take it back with [`confined`].
pub fn executor(dir: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir)
        .env(SANDBOX_MODE_ENV, "off")
        .env_remove("EXECUTOR_CONFIG")
        .env_remove("EXECUTOR_STORAGE_URL")
        .env_remove("EXECUTOR_LOG")
        .env_remove("PGPASSWORD")
        // The machine's own git identity stays out: commits are by the test repository's
        // `user.name`, else executor's own.
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1");
    cmd
}

/// `cmd` with the workers inside the wall, as `[sandbox]` in the config says (the default:
/// `auto`).
pub fn confined(cmd: &mut Command) -> &mut Command {
    cmd.env_remove(SANDBOX_MODE_ENV)
}

/// `inner` (a command of the binary, its environment and folder kept) run where no user
/// namespace can be made, so bubblewrap cannot run: inside one of its own whose
/// `max_user_namespaces` is 0, as a container or AppArmor's `restrict_unprivileged_userns`
/// leaves executor. `[sandbox] mode` as the workspace says (`auto`: the seal alone).
pub fn without_user_namespaces(inner: &Command) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "sh", "-c"])
        .arg("echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"")
        .arg("sh")
        .arg(inner.get_program())
        .args(inner.get_args());
    if let Some(dir) = inner.get_current_dir() {
        cmd.current_dir(dir);
    }
    for (key, value) in inner.get_envs() {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    cmd.env_remove(SANDBOX_MODE_ENV);
    cmd
}

/// A temp folder initialised with `executor init`.
pub struct Workspace {
    pub dir: tempfile::TempDir,
    pub env: Vec<(String, String)>,
}

impl Workspace {
    /// The workspace's SQLite store, opened on a runtime of its own, for a test that reads
    /// or writes it directly (`runtime.block_on(async { … })`).
    pub fn store(
        &self,
    ) -> (
        tokio::runtime::Runtime,
        executor::store::sqlite::SqliteStore,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let store = runtime
            .block_on(executor::store::sqlite::SqliteStore::open(
                &self.path().join("executor.db"),
            ))
            .expect("open the workspace's store");
        (runtime, store)
    }

    pub fn init() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = executor(dir.path())
            .args(["init", "."])
            .output()
            .expect("run executor init");
        assert_success(&out, "executor init");
        // `repository = "."`: the workspace is the repository workers change, so `run --once`
        // and the daemon pass their check of it before starting.
        init_repo(dir.path());
        // Most tests watch the bundled example worker; `auto` never runs it, so it is named.
        let config = dir.path().join("executor.toml");
        let text = std::fs::read_to_string(&config).expect("read config");
        std::fs::write(
            &config,
            text.replacen("# kind = \"auto\"", "kind = \"example\"", 1),
        )
        .expect("write config");
        Self {
            dir,
            env: Vec::new(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn plans(&self) -> PathBuf {
        self.path().join("plans")
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = executor(self.path());
        cmd.args(args);
        for (key, value) in &self.env {
            cmd.env(key, value);
        }
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run executor")
    }

    /// Runs and asserts exit 0; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_success(&out, &args.join(" "));
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let stdout = self.ok(args);
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?}: bad JSON {e}: {stdout}"))
    }

    /// Runs and asserts the exit code; returns stderr.
    pub fn fails_with(&self, code: i32, args: &[&str]) -> String {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            out.status.code(),
            Some(code),
            "{args:?}: expected exit {code}; stderr: {stderr}"
        );
        stderr
    }

    pub fn queue(&self) -> Vec<Value> {
        match self.json(&["queue", "--json"]) {
            Value::Array(tasks) => tasks,
            other => panic!("queue --json is not an array: {other}"),
        }
    }

    pub fn write_config(&self, text: &str) {
        std::fs::write(self.path().join("executor.toml"), text).expect("write config");
    }
}

/// Makes `dir` a git repository on `main` with one commit (a README) by the owner.
pub fn init_repo(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("README.md"), "project\n").expect("write");
    git(dir, &["add", "."]);
    git(
        dir,
        &[
            "-c",
            "user.name=Owner",
            "-c",
            "user.email=o@example.com",
            "commit",
            "-q",
            "-m",
            "first",
        ],
    );
}

/// Runs `git -C dir args…`, asserts it worked, returns its trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub fn assert_success(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} exited {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Polls `check` until it returns `Some`, for at most `limit` (a generous bound: this
/// waits for an event, it does not measure how fast it came).
pub fn eventually<T>(limit: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A fresh schema on the test Postgres server, or `None` (after saying so) when
/// `EXECUTOR_TEST_PG` is unset. Panics when it is set and the server cannot be reached.
pub struct PgSchema {
    pub url: String,
    pub name: String,
}

impl PgSchema {
    pub async fn create(test: &str) -> Option<Self> {
        let Ok(url) = std::env::var(PG_ENV) else {
            // Written past the test harness's capture so a skip is always visible.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "skipped: {test} on Postgres ({PG_ENV} is not set)"
            );
            return None;
        };
        let name = format!(
            "executor_test_{}_{}_{}",
            test.chars().take(30).collect::<String>(),
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or_default()
        )
        .to_lowercase();
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(10))
            .connect(&url)
            .await
            .unwrap_or_else(|e| panic!("{PG_ENV}={url} is set but Postgres is unreachable: {e}"));
        sqlx::query(&format!("CREATE SCHEMA {name}"))
            .execute(&pool)
            .await
            .expect("create test schema");
        pool.close().await;
        Some(Self { url, name })
    }

    /// Connect options that put everything in this schema.
    pub fn options(&self) -> PgConnectOptions {
        PgConnectOptions::from_str(&self.url)
            .expect("EXECUTOR_TEST_PG is a valid URL")
            .options([("search_path", self.name.as_str())])
    }

    /// A one-connection pool in this schema, for setting up and inspecting tables by hand.
    pub async fn admin(&self) -> sqlx::PgPool {
        PgPoolOptions::new()
            .max_connections(1)
            .connect_with(self.options())
            .await
            .expect("connect to the test schema")
    }

    /// The same, as a URL the binary accepts.
    pub fn url_with_schema(&self) -> String {
        let separator = if self.url.contains('?') { '&' } else { '?' };
        format!(
            "{}{separator}options=-csearch_path%3D{}",
            self.url, self.name
        )
    }

    pub async fn drop(self) {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .connect(&self.url)
            .await
            .expect("reconnect to drop the test schema");
        sqlx::query(&format!("DROP SCHEMA {} CASCADE", self.name))
            .execute(&pool)
            .await
            .expect("drop test schema");
        pool.close().await;
    }
}

/// Hands `path` and everything under it to `owner` (`user:group`), as a test running as
/// root does to run executor as an unprivileged user, and back to `root:root` after.
pub fn hand_over(path: &Path, owner: &str) {
    let status = Command::new("chown")
        .args(["-R", owner])
        .arg(path)
        .status()
        .expect("chown");
    assert!(status.success(), "chown -R {owner} {}", path.display());
}

/// Every `.rs` file under `folder`, at any depth, appended to `found`.
pub fn rust_files(folder: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// Runs each named `async fn case(store: &dyn Store)` of the calling module once on a
/// fresh SQLite file and once on a fresh Postgres schema (skipped, and said so, where
/// `EXECUTOR_TEST_PG` is not set). The calling module imports `SqliteStore`, `PgStore` and
/// `PgSchema`.
macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $case() {
                    let dir = tempfile::tempdir().expect("temp dir");
                    let store = super::SqliteStore::open(&dir.path().join("executor.db"))
                        .await
                        .expect("open SQLite");
                    super::$case(&store).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $case() {
                    let Some(schema) = super::PgSchema::create(stringify!($case)).await else {
                        return;
                    };
                    let store = super::PgStore::connect_with(schema.options())
                        .await
                        .expect("open Postgres");
                    super::$case(&store).await;
                    store.pool().close().await;
                    schema.drop().await;
                }
            )*
        }
    };
}
pub(crate) use conformance;

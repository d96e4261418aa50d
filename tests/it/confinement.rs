//! The wall (docs/design.md §11), tried by a worker that attacks on purpose: a real command
//! worker runs every trick inside `bwrap`, and each effect is checked from outside after
//! the run ends. Where this machine cannot run bubblewrap the tests say so and skip; with
//! `CI` set they fail instead, since CI installs it.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{confined, git, without_user_namespaces, Workspace};

/// Writes a plan note for task `gid` and runs `executor run --once` on it (the wall as
/// the workspace's config says); asserts it worked and returns its stderr.
fn run_note(ws: &Workspace, gid: &str) -> String {
    std::fs::write(
        ws.plans().join(format!("{gid}.md")),
        format!("---\ngid: {gid}\n---\n# Task {gid}\n"),
    )
    .expect("note");
    let out = run_once(ws);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// `executor run --once` with the wall as the workspace's config says.
fn run_once(ws: &Workspace) -> std::process::Output {
    confined(&mut ws.command(&["run", "--once"]))
        .output()
        .expect("run executor")
}

/// The two walls a worker may be held by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// bubblewrap, with the seal as a second layer.
    Bubblewrap,
    /// The seal alone, where no user namespace can be made.
    SealAlone,
}

/// The walls this machine can put up (each missing one says it skipped; CI has both).
fn walls() -> Vec<Held> {
    let mut out = Vec::new();
    if wall_works() {
        out.push(Held::Bubblewrap);
    }
    if landlock_walls() {
        out.push(Held::SealAlone);
    }
    out
}

/// `executor run --once`, its workers held by `held`.
fn run_once_in(ws: &Workspace, held: Held) -> std::process::Output {
    match held {
        Held::Bubblewrap => run_once(ws),
        Held::SealAlone => {
            let out = without_user_namespaces(&ws.command(&["run", "--once"]))
                .output()
                .expect("run executor under unshare");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("WITHOUT bubblewrap"),
                "not sealed: {stderr}"
            );
            out
        }
    }
}

/// Whether bubblewrap can confine a process here; `false` (with the reason printed) skips.
pub(crate) fn wall_works() -> bool {
    let out = std::process::Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--unshare-all",
            "--die-with-parent",
            "--",
            "true",
        ])
        .output();
    let works = out.as_ref().is_ok_and(|o| o.status.success());
    if !works {
        let why = match &out {
            Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
            Err(e) => e.to_string(),
        };
        assert!(
            std::env::var_os("CI").is_none(),
            "bubblewrap must work in CI (.ci/run installs it): {why}"
        );
        eprintln!("SKIPPED: bubblewrap cannot confine a process here: {why}");
    }
    works
}

/// A loopback listener that counts the connections it accepts and answers `pong`.
struct Listener {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

fn listener() -> Listener {
    let socket = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = socket.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in socket.incoming() {
            let Ok(mut stream) = stream else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 64];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"pong\n");
        }
    });
    Listener { port, accepted }
}

/// The processes whose command line holds `marker` (from `/proc`).
pub(crate) fn processes_with(marker: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            text.contains(marker).then_some(text)
        })
        .collect()
}

/// A workspace whose repository is `repo/` and whose worker is `script` (run by `sh`).
fn attack_workspace(script: &str, extra: &str) -> Workspace {
    crate::runner::workspace(&["/bin/sh", "-c", script], &[], extra)
}

/// Sets the worker of `ws` to `shell -c script` (for scripts that name the workspace).
fn set_worker(ws: &Workspace, shell: &str, script: &str, more: &str) {
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    let config = config.replace(
        "command = [\"/bin/sh\", \"-c\", \"true\"]",
        &format!("command = [{shell:?}, \"-c\", {script:?}]"),
    );
    assert!(
        config.contains(shell),
        "the worker was not replaced: {config}"
    );
    ws.write_config(&(config + more));
}

struct Outside {
    dir: tempfile::TempDir,
}

impl Outside {
    fn new() -> Self {
        Outside {
            dir: tempfile::tempdir_in(std::env::temp_dir()).expect("tmp"),
        }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The file `name` on the run's branch, if it is there.
fn on_branch(repo: &Path, branch: &str, name: &str) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["show", &format!("{branch}:{name}")])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn run_branch(ws: &Workspace, gid: &str) -> String {
    ws.json(&["show", gid, "--json"])["runs"][0]["branch_name"]
        .as_str()
        .expect("a run with a branch")
        .to_string()
}

#[test]
fn a_confined_worker_reaches_no_secret_no_path_outside_and_no_host_process() {
    if !wall_works() {
        return;
    }
    let outside = Outside::new();
    let owner_home = outside.path().join("home");
    std::fs::create_dir_all(owner_home.join(".ssh")).expect("mkdir");
    std::fs::write(owner_home.join(".ssh/id_rsa"), "SSH-KEY-MARKER-41\n").expect("key");
    let target = outside.path().join("target");
    std::fs::create_dir_all(&target).expect("mkdir");
    let script = format!(
        r#"mkdir -p out
cat '{home}/.ssh/id_rsa' > out/ssh.txt 2>&1
cat /proc/*/environ 2>/dev/null | tr '\0' '\n' > out/environ.txt
ls /proc | grep -c '^[0-9]' > out/processes.txt
echo x > '{target}/absolute' 2>/dev/null; echo "absolute $?" >> out/writes.txt
echo x > ../../../../../../../../{target_rel}/relative 2>/dev/null; echo "relative $?" >> out/writes.txt
ln -s '{target}' escape && echo x > escape/through-link 2>/dev/null; echo "link $?" >> out/writes.txt
rm -f escape
echo "[DONE:implemented] tried"
"#,
        home = owner_home.display(),
        target = target.display(),
        target_rel = target.display().to_string().trim_start_matches('/'),
    );
    let ws = attack_workspace(&script, "");
    std::fs::write(ws.plans().join("a.md"), "---\ngid: A-1\n---\n# Attack\n").expect("note");
    let out = confined(&mut ws.command(&["run", "--once"]))
        .env("HOME", &owner_home)
        .env("EXECUTOR_TEST_RUNNER_SECRET", "RUNNER-ENV-MARKER-77")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("workers run confined"), "{stderr}");
    let repo = ws.path().join("repo");
    let branch = run_branch(&ws, "A-1");

    let ssh = on_branch(&repo, &branch, "out/ssh.txt").expect("the worker's report");
    assert!(!ssh.contains("SSH-KEY-MARKER-41"), "the key leaked: {ssh}");
    let environ = on_branch(&repo, &branch, "out/environ.txt").expect("report");
    assert!(
        !environ.contains("RUNNER-ENV-MARKER-77"),
        "the runner's environment leaked"
    );
    let processes: usize = on_branch(&repo, &branch, "out/processes.txt")
        .expect("report")
        .trim()
        .parse()
        .expect("a count");
    assert!(
        processes < 10,
        "the worker sees {processes} processes: not its own namespace"
    );
    let writes = on_branch(&repo, &branch, "out/writes.txt").expect("report");
    for (line, name) in [
        ("absolute", "absolute"),
        ("relative", "relative"),
        ("link", "through-link"),
    ] {
        assert!(!target.join(name).exists(), "{name} was written outside");
        assert!(
            writes
                .lines()
                .any(|l| l.starts_with(line) && !l.ends_with(" 0")),
            "{line}: {writes}"
        );
    }
    let record = std::fs::read_to_string(
        std::fs::read_dir(ws.path().join("logs/A-1/run-1"))
            .expect("records")
            .filter_map(Result::ok)
            .find(|e| e.path().join("result.json").exists())
            .expect("a worker record")
            .path()
            .join("result.json"),
    )
    .expect("result.json");
    assert!(record.contains("\"confined\": true"), "{record}");
}

#[test]
fn a_confined_workers_requests_are_recorded_confined() {
    if !wall_works() {
        return;
    }
    let script = "echo '[REQUEST:run_tests] scheme=all'; echo '[DONE:implemented] asked'";
    let ws = attack_workspace(script, "");
    run_note(&ws, "R-1");
    let shown = ws.json(&["show", "R-1", "--json"]);
    let asked: Vec<&serde_json::Value> = shown["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .filter(|d| d["action"] == "run_tests")
        .collect();
    assert_eq!(asked.len(), 1, "{shown}");
    assert_eq!(asked[0]["decision"], "approve", "{shown}");
    assert_eq!(
        asked[0]["confined"],
        serde_json::Value::Bool(true),
        "{shown}"
    );
    let human = ws.ok(&["show", "R-1"]);
    assert!(!human.contains("(unconfined)"), "{human}");
}

#[test]
fn a_confined_workers_daemons_end_with_it() {
    if !wall_works() {
        return;
    }
    let script = r#"setsid sh -c 'sleep 300 # SETSID-MARKER-5' >/dev/null 2>&1 < /dev/null &
(sh -c 'sleep 300 # DOUBLEFORK-MARKER-5' >/dev/null 2>&1 < /dev/null &) &
nohup sh -c 'sleep 300 # NOHUP-MARKER-5' >/dev/null 2>&1 < /dev/null &
sleep 0.3
echo "[DONE:implemented] left daemons"
"#;
    let ws = attack_workspace(script, "");
    run_note(&ws, "D-1");
    std::thread::sleep(Duration::from_secs(1));
    for marker in ["SETSID-MARKER-5", "DOUBLEFORK-MARKER-5", "NOHUP-MARKER-5"] {
        let left = processes_with(marker);
        assert!(left.is_empty(), "{marker} outlived its worker: {left:?}");
    }
}

#[test]
fn a_confined_worker_cannot_move_main_plant_git_config_or_steer_executor() {
    for held in walls() {
        cannot_move_main_plant_git_config_or_steer_executor(held);
    }
}

fn cannot_move_main_plant_git_config_or_steer_executor(held: Held) {
    let outside = Outside::new();
    let marker = outside.path().join("hook-ran");
    let script = format!(
        r#"mkdir -p out
common=$(git rev-parse --git-common-dir)
git update-ref refs/heads/main HEAD 2>/dev/null; echo "update-ref $?" >> out/git.txt
printf '#!/bin/sh\ntouch {marker}\n' > "$common/hooks/post-checkout" 2>/dev/null; echo "hook $?" >> out/git.txt
git config core.fsmonitor 'touch {marker}' 2>/dev/null; echo "fsmonitor $?" >> out/git.txt
git config filter.evil.clean 'touch {marker}; cat' 2>/dev/null; echo "filter $?" >> out/git.txt
git worktree add -f .wt main 2>/dev/null; echo "worktree $?" >> out/git.txt
'{exe}' --config '{ws}/executor.toml' go OTHER-1 > out/go.txt 2>&1; echo "go $?" >> out/git.txt
printf -- '---\ngid: EVIL-1\n---\n# Evil\n' > '{ws}/plans/evil.md' 2>/dev/null; echo "note $?" >> out/git.txt
echo "[DONE:implemented] tried git"
"#,
        marker = marker.display(),
        exe = crate::support::BIN,
        ws = "WORKSPACE",
    );
    let ws = attack_workspace("true", "");
    let script = script.replace("WORKSPACE", &ws.path().display().to_string());
    set_worker(&ws, "/bin/sh", &script, "");
    ws.ok(&["add", "--title", "Other", "--gid", "OTHER-1"]);
    std::fs::write(ws.plans().join("g.md"), "---\ngid: G-1\n---\n# Git\n").expect("note");
    let repo = ws.path().join("repo");
    let main_before = git(&repo, &["rev-parse", "main"]);

    let out = run_once_in(&ws, held);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{held:?}: {stderr}");
    assert_eq!(
        git(&repo, &["rev-parse", "main"]),
        main_before,
        "main moved"
    );
    assert!(
        !marker.exists(),
        "{held:?}: a planted hook, filter or fsmonitor ran"
    );
    assert!(!repo.join(".git/hooks/post-checkout").exists());
    let config = std::fs::read_to_string(repo.join(".git/config")).expect("config");
    assert!(
        !config.contains("evil") && !config.contains("fsmonitor"),
        "{config}"
    );
    assert!(
        !ws.plans().join("evil.md").exists(),
        "the worker wrote a plan note"
    );
    let queue = ws.queue();
    let other = queue
        .iter()
        .find(|t| t["task_gid"] == "OTHER-1")
        .expect("OTHER-1");
    assert_ne!(other["status"], "approved", "the worker approved a task");
    assert!(queue.iter().all(|t| t["task_gid"] != "EVIL-1"));
    let branch = run_branch(&ws, "G-1");
    let report = on_branch(&repo, &branch, "out/git.txt").expect("report");
    // The note is written into the wall's own empty plans folder, which is not the
    // workspace's (checked above); everything else fails outright.
    for attempt in [
        "update-ref",
        "hook",
        "fsmonitor",
        "filter",
        "worktree",
        "go",
    ] {
        assert!(
            report
                .lines()
                .any(|l| l.starts_with(attempt) && !l.ends_with(" 0")),
            "{held:?}: {attempt} succeeded inside the wall: {report}"
        );
    }
    // The worktree the worker tried to add is not in git's list.
    let worktrees = git(&repo, &["worktree", "list", "--porcelain"]);
    assert!(!worktrees.contains(".wt"), "{worktrees}");
}

#[test]
fn a_confined_worker_cannot_write_into_another_live_runs_worktree() {
    for held in walls() {
        cannot_write_into_another_live_runs_worktree(held);
    }
}

fn cannot_write_into_another_live_runs_worktree(held: Held) {
    // Two runs at once: the victim sleeps while the attacker writes everywhere it can
    // name under the worktrees folder.
    let script = r#"case "$PWD" in
*VICTIM*) sleep 2; echo mine > MINE.txt; echo "[DONE:implemented] victim" ;;
*) sleep 0.5
   for d in ../*/; do echo planted > "$d/PLANTED.txt" 2>/dev/null; done
   echo "[DONE:implemented] attacker" ;;
esac
"#;
    let ws = attack_workspace(script, "max_workers = 2\n");
    std::fs::write(
        ws.plans().join("v.md"),
        "---\ngid: VICTIM-1\n---\n# Victim\n",
    )
    .expect("note");
    std::fs::write(
        ws.plans().join("X-1.md"),
        "---\ngid: X-1\n---\n# Task X-1\n",
    )
    .expect("note");
    let out = run_once_in(&ws, held);
    assert!(
        out.status.success(),
        "{held:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let repo = ws.path().join("repo");
    let victim = run_branch(&ws, "VICTIM-1");
    assert_eq!(
        ws.json(&["show", "VICTIM-1", "--json"])["task"]["status"],
        "done",
        "the victim's run completes"
    );
    assert_eq!(
        on_branch(&repo, &victim, "PLANTED.txt"),
        None,
        "{held:?}: planted in the victim's commit"
    );
}

#[test]
fn a_confined_worker_reaches_allowed_loopback_ports_only() {
    if !wall_works() {
        return;
    }
    let allowed = listener();
    let forbidden = listener();
    let script = format!(
        r#"mkdir -p out
if exec 3<>/dev/tcp/127.0.0.1/{ok}; then echo ping >&3; read -r line <&3; echo "$line" > out/allowed.txt; exec 3>&-; fi
if exec 4<>/dev/tcp/127.0.0.1/{no}; then echo "connected" > out/forbidden.txt; exec 4>&-; else echo refused > out/forbidden.txt; fi
if exec 5<>/dev/tcp/127.0.0.1/3128; then printf 'CONNECT 127.0.0.1:{no} HTTP/1.1\r\n\r\n' >&5; read -r status <&5; echo "$status" > out/proxy.txt; exec 5>&-; fi
echo "[DONE:implemented] tried the network"
"#,
        ok = allowed.port,
        no = forbidden.port
    );
    let ws = attack_workspace("true", "");
    set_worker(
        &ws,
        "/bin/bash",
        &script,
        &format!("\n[sandbox]\nallow = [\"127.0.0.1:{}\"]\n", allowed.port),
    );
    run_note(&ws, "N-1");
    let repo = ws.path().join("repo");
    let branch = run_branch(&ws, "N-1");
    assert_eq!(
        on_branch(&repo, &branch, "out/allowed.txt").as_deref(),
        Some("pong\n"),
        "the allowed port did not answer"
    );
    assert_eq!(
        on_branch(&repo, &branch, "out/forbidden.txt").as_deref(),
        Some("refused\n")
    );
    let proxy = on_branch(&repo, &branch, "out/proxy.txt").unwrap_or_default();
    assert!(
        proxy.contains("403"),
        "the proxy let loopback through: {proxy}"
    );
    assert_eq!(
        forbidden.accepted.load(Ordering::SeqCst),
        0,
        "the host listener not in allow got a connection"
    );
    assert!(allowed.accepted.load(Ordering::SeqCst) >= 1);
}

#[test]
fn a_refused_connect_is_recorded_with_its_run_and_told_once_with_the_allow_line() {
    if !wall_works() {
        return;
    }
    let hook = crate::fake_webhook::FakeWebhook::start();
    // A port of this machine the worker asks the proxy for; nothing may ever reach it.
    let local = listener();
    // A worker that keeps asking the proxy for hosts it may not reach, as an agent whose
    // requests are refused retries them: five times example.org, twice a host port.
    let script = format!(
        r#"mkdir -p out
port=${{HTTPS_PROXY##*:}}
ask() {{
  exec 3<>/dev/tcp/127.0.0.1/$port || exit 3
  printf 'CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic c2VjcmV0LXRva2Vu\r\n\r\n' "$1" "$1" >&3
  read -r status <&3
  echo "$1 $status" >> out/statuses.txt
  exec 3>&-
}}
for i in 1 2 3 4 5; do ask example.org:443; done
ask 127.0.0.1:{local}
ask localhost:{local}
echo "[DONE:implemented] tried the network"
"#,
        local = local.port
    );
    let mut ws = attack_workspace("true", "");
    set_worker(
        &ws,
        "/bin/bash",
        &script,
        r#"
[sandbox]
allow = ["allowed.example:443"]

[[chat.webhooks]]
name = "owner"
kind = "json"
url_env = "EXECUTOR_OWNER_WEBHOOK_URL"
priorities = ["action"]
"#,
    );
    ws.env.push((
        "EXECUTOR_OWNER_WEBHOOK_URL".to_string(),
        hook.url("/hooks/owner"),
    ));
    run_note(&ws, "N-9");
    let repo = ws.path().join("repo");
    let branch = run_branch(&ws, "N-9");
    let statuses = on_branch(&repo, &branch, "out/statuses.txt").unwrap_or_default();
    assert_eq!(statuses.matches("403").count(), 7, "{statuses}");
    assert_eq!(local.accepted.load(Ordering::SeqCst), 0);

    // Recorded with the run: one row per host and port, counted.
    let shown = ws.json(&["show", "N-9", "--json"]);
    let run_id = shown["runs"][0]["id"].as_i64().expect("a run");
    let refused = shown["net_refusals"].as_array().expect("net_refusals");
    let row = |host: &str| {
        refused
            .iter()
            .find(|r| r["host"] == host)
            .unwrap_or_else(|| panic!("no {host} in {refused:?}"))
    };
    assert_eq!(refused.len(), 3, "{refused:?}");
    let example = row("example.org");
    assert_eq!(
        (&example["port"], &example["count"], &example["kind"]),
        (&443.into(), &5.into(), &"not_allowed".into())
    );
    assert_eq!(example["run_id"], run_id);
    assert!(example["first_at"].is_string() && example["last_at"].is_string());
    assert_eq!(row("127.0.0.1")["kind"], "loopback");
    assert_eq!(row("localhost")["count"], 1);
    let text = serde_json::to_string(&shown).expect("json");
    assert!(
        !text.contains("c2VjcmV0"),
        "nothing of the request but host and port"
    );

    // One history entry, with the allow line.
    let line = format!(
        r#"allow = ["allowed.example:443", "example.org:443", "127.0.0.1:{}"]"#,
        local.port
    );
    let entries: Vec<&serde_json::Value> = shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "net_refused")
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(
        entries[0]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("CONNECT example.org:443 (5 times)") && d.contains(&line)),
        "{entries:?}"
    );
    let plain = ws.ok(&["show", "N-9"]);
    assert!(plain.contains("network refused"), "{plain}");
    assert!(plain.contains(&line), "{plain}");

    // Exactly one notice to the owner, naming the line.
    let told: Vec<String> = hook
        .received()
        .iter()
        .filter_map(|r| r.json()["text"].as_str().map(str::to_string))
        .filter(|t| t.contains("refused"))
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].contains(&line), "{}", told[0]);
    assert!(!told[0].contains("c2VjcmV0"));
}

#[test]
fn a_worker_that_only_reports_reconnecting_is_stopped_as_stuck_naming_the_refusal() {
    if !wall_works() {
        return;
    }
    // What a Codex with no route does, through a plain command: it asks the proxy for its
    // host, is refused, and prints that it is reconnecting, on and on.
    let script = r#"port=${HTTPS_PROXY##*:}
echo "starting"
while true; do
  if exec 3<>/dev/tcp/127.0.0.1/$port; then
    printf 'CONNECT models.example.net:443 HTTP/1.1

' >&3
    read -r status <&3
    exec 3>&-
  fi
  echo "Reconnecting... waiting for network (Connection failed: $status)"
  sleep 0.3
done
"#;
    let ws = crate::runner::workspace(
        &["/bin/sh", "-c", "true"],
        &[],
        // The hard timeout ends it, failing the test, if its lines kept the watchdog fed.
        "no_output_timeout = \"3s\"\nhard_timeout = \"30s\"\nmax_worker_attempts = 1\n",
    );
    set_worker(
        &ws,
        "/bin/bash",
        script,
        "\n[sandbox]\nallow = [\"allowed.example:443\"]\n",
    );
    let started = std::time::Instant::now();
    run_note(&ws, "N-10");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the no-output watchdog did not stop it"
    );
    let shown = ws.json(&["show", "N-10", "--json"]);
    let run = &shown["runs"][0];
    assert_eq!(run["state"], "abandoned", "{shown}");
    assert_eq!(run["worker_stuck_count"], 1, "{shown}");
    let run_id = run["id"].as_i64().expect("a run");
    let dir = ws.path().join(format!("logs/N-10/run-{run_id}"));
    let record = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| Some(e.ok()?.path().join("result.json")))
        .find(|p| p.is_file())
        .expect("the worker's result.json");
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record).expect("read")).expect("json");
    assert_eq!(result["stopped"], "no_output", "{result}");
    let why = result["why"].as_str().unwrap_or_default();
    assert!(
        why.starts_with("no output for too long: the agent only reported retrying its network ("),
        "{why}"
    );
    assert!(
        why.contains(r#"allow = ["allowed.example:443", "models.example.net:443"]"#),
        "{why}"
    );
    assert!(
        result["net_refused"][0]["count"].as_u64().unwrap_or(0) >= 2,
        "{result}"
    );
    // The run's end says it too.
    let ended = serde_json::to_string(&shown["events"]).expect("json");
    assert!(ended.contains("models.example.net:443"), "{ended}");
}

#[test]
fn sandbox_required_without_a_wall_refuses_to_start_and_says_why() {
    let ws = attack_workspace("true", "");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config")
        + "\n[sandbox]\nmode = \"required\"\nbwrap = \"/nonexistent/bwrap\"\n";
    ws.write_config(&config);
    std::fs::write(ws.plans().join("r.md"), "---\ngid: R-1\n---\n# R\n").expect("note");
    let out = run_once(&ws);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("mode = \"required\""), "{stderr}");
    assert!(stderr.contains("/nonexistent/bwrap"), "{stderr}");
}

#[test]
fn sandbox_off_runs_unconfined_and_says_so() {
    let ws = attack_workspace("echo '[DONE:implemented] ok'", "");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config")
        + "\n[sandbox]\nmode = \"off\"\n";
    ws.write_config(&config);
    let stderr = run_note(&ws, "O-1");
    assert!(stderr.contains("UNCONFINED"), "{stderr}");
}

#[test]
fn status_says_whether_workers_are_confined_and_why_not() {
    let ws = Workspace::init();
    let out = confined(&mut ws.command(&["status", "--json"]))
        .output()
        .expect("status");
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["confinement"]["mode"], "auto");
    assert_eq!(report["confinement"]["network"], "allowlist");
    assert_eq!(report["confinement"]["confined"], wall_works());

    let off = ws.ok(&["status"]);
    assert!(
        off.contains("workers: UNCONFINED ([sandbox] mode = \"off\")"),
        "{off}"
    );
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replacen(
        "\n[sandbox]\n",
        "\n[sandbox]\nmode = \"required\"\nbwrap = \"/nonexistent/bwrap\"\n",
        1,
    ));
    let out = confined(&mut ws.command(&["status"]))
        .output()
        .expect("status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("workers: UNCONFINED (the runner will not start")
            && text.contains("/nonexistent/bwrap"),
        "{text}"
    );
}

/// `executor run --once` in `ws` as an unprivileged user: root (as CI runs) may read any
/// process's `/proc/PID/environ` whatever it does, so the owner's case is tried as
/// `nobody` with the workspace handed to it. Not root: as the user itself.
fn run_once_unprivileged(ws: &Workspace, env: &[(&str, &str)]) -> std::process::Output {
    let root = nix::unistd::geteuid().is_root();
    let mut cmd = if root {
        crate::support::hand_over(ws.path(), "nobody:nogroup");
        let mut cmd = std::process::Command::new("setpriv");
        cmd.args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "--",
            crate::support::BIN,
        ]);
        cmd
    } else {
        std::process::Command::new(crate::support::BIN)
    };
    cmd.current_dir(ws.path())
        .args(["run", "--once"])
        .env("HOME", ws.path())
        .env(crate::support::SANDBOX_MODE_ENV, "off")
        .env_remove("EXECUTOR_CONFIG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run executor");
    if root {
        // Back to the test's own user, so its git reads the repository without complaint.
        crate::support::hand_over(ws.path(), "root:root");
    }
    out
}

#[test]
fn an_unconfined_worker_cannot_read_the_runners_environment() {
    let script = r#"mkdir -p out
cat /proc/$PPID/environ > out/parent.txt 2>&1 || echo "refused $?" >> out/parent.txt
for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f" 2>/dev/null; done > out/all.txt
echo "[DONE:implemented] tried"
"#;
    let ws = attack_workspace(script, "");
    std::fs::write(ws.plans().join("e.md"), "---\ngid: E-1\n---\n# Environ\n").expect("note");
    let out = run_once_unprivileged(
        &ws,
        &[("EXECUTOR_TEST_RUNNER_SECRET", "RUNNER-ENV-MARKER-88")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("UNCONFINED"), "{stderr}");
    let repo = ws.path().join("repo");
    let branch = run_branch(&ws, "E-1");
    let parent = on_branch(&repo, &branch, "out/parent.txt").expect("report");
    assert!(
        parent.contains("refused"),
        "the runner's environ was readable: {parent}"
    );
    let all = on_branch(&repo, &branch, "out/all.txt").expect("report");
    assert!(
        !all.contains("RUNNER-ENV-MARKER-88") && !parent.contains("RUNNER-ENV-MARKER-88"),
        "the runner's secret leaked to an unconfined worker"
    );
}

/// The hook as it runs inside the wall: no config, the contract copy and a relay socket;
/// `executor hook claude`, or with `thin` the small `executor-hook` the runner installs.
fn relayed_hook(ws: &Workspace, relay: &Path, command: &str) -> (String, String) {
    relayed_hook_by(ws, relay, command, false)
}

fn relayed_hook_by(ws: &Workspace, relay: &Path, command: &str, thin: bool) -> (String, String) {
    use std::process::Stdio;
    let worktree = ws.path().join("repo");
    let input = serde_json::json!({
        "session_id": "7817711f-9a75-4be4-9372-239a3eb8cfd9",
        "cwd": worktree,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "a command"},
        "tool_use_id": "toolu_01",
    });
    let mut hook = if thin {
        std::process::Command::new(env!("CARGO_BIN_EXE_executor-hook"))
    } else {
        let mut full = std::process::Command::new(crate::support::BIN);
        full.args(["hook", "claude"]);
        full
    };
    let mut child = hook
        .current_dir(std::env::temp_dir())
        .args(["--run", "1", "--worktree"])
        .arg(&worktree)
        .args(["--branch", "executor/T-1", "--contract"])
        .arg(ws.path().join("roles/worker-policy.json"))
        .arg("--relay")
        .arg(relay)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the hook");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.to_string().as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("the hook's output");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON answer");
    let specific = &answer["hookSpecificOutput"];
    (
        specific["permissionDecision"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        specific["permissionDecisionReason"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

#[test]
fn the_hook_in_the_wall_judges_by_its_contract_copy_when_the_runner_is_gone() {
    let ws = crate::runner::workspace(&["/bin/true"], &[], "");
    let gone = ws.path().join("no-runner.sock");
    // The small hook hands the call to the full executor beside it, which judges the same.
    for thin in [false, true] {
        let (decision, reason) = relayed_hook_by(&ws, &gone, "cargo test", thin);
        assert_eq!(decision, "allow", "thin {thin}: {reason}");
        let (decision, reason) = relayed_hook_by(&ws, &gone, "git push origin main", thin);
        assert_eq!(decision, "deny", "thin {thin}: {reason}");
        // What would wait for the owner cannot be parked without the runner: denied, saying so.
        let (decision, reason) = relayed_hook_by(&ws, &gone, "gh pr merge 7", thin);
        assert_eq!(decision, "deny", "thin {thin}: {reason}");
        assert!(reason.contains("did not answer in time"), "{reason}");
    }
}

#[test]
fn the_hook_in_the_wall_answers_within_its_deadline_when_the_runner_hangs() {
    let ws = crate::runner::workspace(&["/bin/true"], &[], "");
    let socket = ws.path().join("slow.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
    // Accepts and never answers, for longer than Claude Code waits for a hook: without its
    // own deadline the hook would still be waiting when the assertion below looks.
    let held = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().take(1) {
            held.push(stream);
            std::thread::sleep(Duration::from_secs(120));
        }
    });
    let started = std::time::Instant::now();
    let (decision, reason) = relayed_hook(&ws, &socket, "git push origin main");
    assert_eq!(decision, "deny", "{reason}");
    assert!(
        started.elapsed() < Duration::from_secs(55),
        "Claude Code gives a hook 60 s"
    );
    drop(held);
}

#[test]
fn a_worker_flooding_stderr_with_huge_lines_leaves_a_bounded_record() {
    let script = "perl -e 'print STDERR \"x\" x 1048576, \"\\n\" for 1..300'; echo '[DONE:implemented] flooded'";
    let ws = attack_workspace(script, "");
    std::fs::write(ws.plans().join("f.md"), "---\ngid: F-1\n---\n# Flood\n").expect("note");
    let out = ws.run(&["run", "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record = std::fs::read_dir(ws.path().join("logs/F-1/run-1"))
        .expect("records")
        .filter_map(Result::ok)
        .map(|e| e.path().join("stderr.txt"))
        .find(|p| p.exists())
        .expect("stderr.txt");
    let size = std::fs::metadata(&record).expect("size").len();
    assert!(size > 0 && size <= 512 * 1024, "stderr.txt is {size} bytes");
}

#[test]
fn the_bundled_example_runs_where_bubblewrap_cannot() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = crate::support::executor(dir.path())
        .args(["init", "--example", "."])
        .output()
        .expect("init");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config_path = dir.path().join("executor.toml");
    let config = std::fs::read_to_string(&config_path).expect("config");
    std::fs::write(
        &config_path,
        config.replacen(
            "\n[sandbox]\n",
            "\n[sandbox]\nbwrap = \"/nonexistent/bwrap\"\n",
            1,
        ),
    )
    .expect("write");
    let out = confined(crate::support::executor(dir.path()).args(["run", "--once"]))
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Sealed by Landlock where the kernel has it (ABI 6: the network and signals too), else
    // unconfined; either way it says why bubblewrap is not the wall.
    let expected = if executor::sandbox::seal::landlock_abi() >= 6 {
        "WITHOUT bubblewrap"
    } else {
        "UNCONFINED"
    };
    assert!(
        stderr.contains(expected) && stderr.contains("/nonexistent/bwrap"),
        "{stderr}"
    );
    let shown = crate::support::executor(dir.path())
        .args(["show", "EXAMPLE-1", "--json"])
        .output()
        .expect("show");
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    assert_eq!(shown["runs"][0]["state"], "complete", "{stderr}");
}

#[test]
fn a_worker_cannot_write_a_file_past_max_file_size() {
    if !wall_works() {
        return;
    }
    let script = r#"mkdir -p out
head -c 3145728 /dev/zero > big.bin 2>/dev/null; echo "big $?" > out/fsize.txt
head -c 1024 /dev/zero > small.bin; echo "small $?" >> out/fsize.txt
rm -f big.bin
echo "[DONE:implemented] tried"
"#;
    let ws = attack_workspace(script, "");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&(config + "\n[sandbox]\nmax_file_size = \"1M\"\n"));
    run_note(&ws, "S-1");
    let repo = ws.path().join("repo");
    let report = on_branch(&repo, &run_branch(&ws, "S-1"), "out/fsize.txt").expect("report");
    assert!(report.contains("small 0"), "{report}");
    assert!(
        !report.contains("big 0"),
        "a 3 MiB file was written under a 1 MiB cap: {report}"
    );
}

#[test]
fn doctor_and_status_say_whether_workers_memory_is_limited() {
    if !wall_works() {
        return;
    }
    let ws = Workspace::init();
    // What this machine allows, surveyed the way the runner does (the child executor sits
    // in this process's cgroup). Here (cgroup v1 for memory) it is the "not limited" path.
    let survey = executor::sandbox::cgroup::survey("memory");
    let status = |ws: &Workspace| -> serde_json::Value {
        let out = confined(&mut ws.command(&["status", "--json"]))
            .output()
            .expect("status");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("json")
    };
    let doctor_memory = |ws: &Workspace| -> serde_json::Value {
        let out = confined(&mut ws.command(&["doctor", "--json"]))
            .output()
            .expect("doctor");
        let checks: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        checks
            .as_array()
            .and_then(|c| c.iter().find(|c| c["check"] == "memory").cloned())
            .unwrap_or_else(|| panic!("no memory check in {checks}"))
    };
    let memory = status(&ws)["confinement"]["memory"].clone();
    let doctor = doctor_memory(&ws);
    match &survey {
        executor::sandbox::cgroup::Decision::Unavailable { why } => {
            println!("memory is not limited on this machine: {why}");
            assert_eq!(memory["limited"], false, "{memory}");
            assert_eq!(memory["detail"], why.as_str(), "{memory}");
            assert_eq!(doctor["level"], "warn", "{doctor}");
            let detail = doctor["detail"].as_str().unwrap_or_default();
            assert!(
                detail.starts_with("workers' memory is not limited: ") && detail.contains(why),
                "{doctor}"
            );
        }
        executor::sandbox::cgroup::Decision::Ready { .. }
        | executor::sandbox::cgroup::Decision::Enable { .. } => {
            assert_eq!(memory["limited"], true, "{memory}");
            assert!(
                memory["max_bytes"].as_u64().is_some_and(|b| b > 0),
                "{memory}"
            );
            assert_eq!(doctor["level"], "ok", "{doctor}");
        }
    }
    // `none` asks for no limit, and says so whatever the machine allows.
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replacen("\n[sandbox]\n", "\n[sandbox]\nmax_memory = \"none\"\n", 1));
    let memory = status(&ws)["confinement"]["memory"].clone();
    assert_eq!(memory["limited"], false, "{memory}");
    assert_eq!(
        memory["detail"], "[sandbox] max_memory = \"none\"",
        "{memory}"
    );
    // A value that is not a limit refuses to start, naming the key.
    ws.write_config(&config.replacen("\n[sandbox]\n", "\n[sandbox]\nmax_memory = \"lots\"\n", 1));
    let out = confined(&mut ws.command(&["status"]))
        .output()
        .expect("status");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("sandbox.max_memory"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `executor run --once` started on a terminal of its own (a pty `script` makes its
/// controlling terminal), as when the owner types it; `mode` is `[sandbox] mode`.
/// With `sealed`, no user namespace can be made under it (the seal alone walls workers).
fn run_once_on_a_terminal(ws: &Workspace, mode: &str, sealed: bool) -> std::process::Output {
    let run = format!("exec {} run --once", crate::support::BIN);
    let inner = if sealed {
        format!("exec unshare --user --map-root-user sh -c 'echo 0 > /proc/sys/user/max_user_namespaces && {run}'")
    } else {
        run
    };
    let mut cmd = std::process::Command::new("script");
    cmd.args(["-qec", &inner])
        .arg("/dev/null")
        .current_dir(ws.path())
        .env(crate::support::SANDBOX_MODE_ENV, mode)
        .env_remove("EXECUTOR_CONFIG")
        .env_remove("EXECUTOR_STORAGE_URL")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(std::process::Stdio::null());
    cmd.output().expect("run executor under script")
}

#[test]
fn a_confined_worker_has_no_terminal_to_type_into() {
    if !wall_works() {
        return;
    }
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "`script` (util-linux) must be there in CI"
        );
        eprintln!("SKIPPED: no `script` to give the runner a terminal");
        return;
    }
    // Opening /dev/tty reaches the controlling terminal, whatever the worker's stdio: the
    // way to type into the owner's shell (TIOCSTI) or read what the owner types.
    let script = r#"if (: < /dev/tty) 2>/dev/null; then echo reached > tty.txt; else echo none > tty.txt; fi
echo "[DONE:implemented] looked for a terminal""#;
    let mut tries = vec![
        ("off", "TTY-1", "reached", false),
        ("required", "TTY-2", "none", false),
    ];
    if landlock_walls() {
        tries.push(("auto", "TTY-3", "none", true));
    }
    for (mode, gid, expected, sealed) in tries {
        let ws = attack_workspace(script, "");
        std::fs::write(
            ws.plans().join(format!("{gid}.md")),
            format!("---\ngid: {gid}\n---\n# Task {gid}\n"),
        )
        .expect("note");
        let out = run_once_on_a_terminal(&ws, mode, sealed);
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{said}");
        let branch = run_branch(&ws, gid);
        let found = on_branch(&ws.path().join("repo"), &branch, "tty.txt");
        // Unconfined, the worker shares the runner's terminal: this shows the test's
        // terminal is real. In the wall it has none.
        assert_eq!(
            found.as_deref().map(str::trim),
            Some(expected),
            "mode {mode}: {said}"
        );
    }
}

/// With worktrees off the worker runs in `runner.repository` itself, and when that is the
/// workspace its read-write place holds executor's own files: the wall covers them again.
#[test]
fn a_confined_worker_in_the_workspace_itself_reaches_none_of_executors_files() {
    if !wall_works() {
        return;
    }
    let ws = Workspace::init();
    std::fs::create_dir_all(ws.path().join("secrets")).expect("mkdir");
    std::fs::write(ws.path().join("secrets/web-token"), "WEB-TOKEN-MARKER-93\n").expect("token");
    let script = r##"try() { name=$1; shift; "$@" 2>/dev/null; echo "$name $?" >> report.txt; }
try config sh -c 'echo "[runner]" >> executor.toml'
try db sh -c 'echo garbage >> executor.db'
try db-wal sh -c 'echo garbage >> executor.db-wal'
cat executor.toml executor.db secrets/web-token > seen.txt 2>&1
try roles sh -c 'echo evil > roles/worker-policy.json'
try prompts sh -c 'echo evil > prompts/_task.md'
try logs sh -c 'mkdir -p logs && echo evil > logs/planted.txt'
try homes sh -c 'mkdir -p .executor/homes/other && echo evil > .executor/homes/other/planted.txt'
try plans sh -c 'echo "# evil" > plans/evil.md'
echo "[DONE:implemented] tried the workspace"
"##;
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    let config = config
        .replacen(
            "kind = \"example\"",
            &format!("kind = \"command\"\ncommand = [\"/bin/sh\", \"-c\", {script:?}]"),
            1,
        )
        .replacen("[runner]\n", "[runner]\nworktrees = false\n", 1)
        .replacen("[web]\n", "[web]\ntoken_file = \"secrets/web-token\"\n", 1);
    assert!(
        config.contains("worktrees = false") && config.contains("token_file"),
        "{config}"
    );
    ws.write_config(&config);
    let config_before = std::fs::read(ws.path().join("executor.toml")).expect("config");
    let roles_before = std::fs::read(ws.path().join("roles/worker-policy.json")).expect("role");
    let prompt_before = std::fs::read(ws.path().join("prompts/_task.md")).expect("prompt");
    ws.ok(&["add", "--title", "Workspace", "--gid", "W-1"]);
    ws.ok(&["go", "W-1"]);

    let out = run_once(&ws);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("workers run confined"), "{stderr}");
    let report = std::fs::read_to_string(ws.path().join("report.txt")).expect("report");
    for attempt in ["config", "db", "db-wal"] {
        assert!(
            report
                .lines()
                .any(|l| l.starts_with(&format!("{attempt} ")) && !l.ends_with(" 0")),
            "{attempt} was written: {report}"
        );
    }
    let seen = std::fs::read_to_string(ws.path().join("seen.txt")).expect("seen");
    assert!(
        !seen.contains("WEB-TOKEN-MARKER-93")
            && !seen.contains("[storage]")
            && !seen.contains("SQLite"),
        "the worker read executor's files: {seen}"
    );
    assert_eq!(
        std::fs::read(ws.path().join("executor.toml")).expect("config"),
        config_before
    );
    assert_eq!(
        std::fs::read(ws.path().join("roles/worker-policy.json")).expect("role"),
        roles_before
    );
    assert_eq!(
        std::fs::read(ws.path().join("prompts/_task.md")).expect("prompt"),
        prompt_before
    );
    assert!(!ws.path().join("logs/planted.txt").exists());
    assert!(!ws.path().join(".executor/homes/other").exists());
    assert!(!ws.plans().join("evil.md").exists());
    // The store took no garbage: the run and its task are read back whole.
    assert_eq!(
        ws.json(&["show", "W-1", "--json"])["task"]["status"],
        "done"
    );
}

/// Probes the seal's kernel limits from inside a worker: ptrace of itself, io_uring, a UDP
/// socket, each `name ok` or `name refused`.
const SEAL_PROBES: &str = r#"/usr/bin/python3 - <<'PY' > out/probes.txt 2>&1
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
print("ptrace", "ok" if libc.ptrace(0, 0, 0, 0) == 0 else "refused")
params = ctypes.create_string_buffer(120)
print("io_uring", "ok" if libc.syscall(425, 4, params) >= 0 else "refused")
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", 9))
    print("udp ok")
except OSError:
    print("udp refused")
# SCTP and Multipath TCP, which Landlock's TCP rules do not see: refused (EPERM), where
# a kernel without the protocol says so itself.
for name, family, kind, proto in (("sctp", socket.AF_INET, socket.SOCK_STREAM, 132),
                                  ("mptcp", socket.AF_INET, socket.SOCK_STREAM, 262),
                                  ("smc", 43, socket.SOCK_STREAM, 0),
                                  ("smc-ip", socket.AF_INET6, socket.SOCK_STREAM, 256),
                                  ("dccp", socket.AF_INET, 6, 33)):
    try:
        socket.socket(family, kind, proto)
        print(name, "ok")
    except OSError as e:
        print(name, "refused" if e.errno == 1 else "unsupported")
# getpid by its x32 number: refused (EPERM), where a kernel without x32 says ENOSYS.
r = libc.syscall(0x40000000 | 39)
print("x32", "refused" if r == -1 and ctypes.get_errno() == 1 else "ok %d %d" % (r, ctypes.get_errno()))
PY
"#;

/// Whether the kernel's Landlock can wall a worker without bubblewrap (ABI 6: the network
/// too); `false` (with the reason printed) skips, and fails in CI.
pub(crate) fn landlock_walls() -> bool {
    let abi = executor::sandbox::seal::landlock_abi();
    if abi < 6 {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI's kernel must have Landlock ABI 6 or later, it has {abi}"
        );
        eprintln!("SKIPPED: the kernel's Landlock is ABI {abi}; a wall without bubblewrap needs 6");
        return false;
    }
    true
}

#[test]
fn inside_bubblewrap_the_seal_is_a_second_layer() {
    if !wall_works() || !landlock_walls() {
        return;
    }
    // bubblewrap alone would let these through: its covers of /run and /home are writable
    // tmpfs, and it leaves ptrace, io_uring and datagram sockets to the kernel.
    let script = format!(
        r#"mkdir -p out
{SEAL_PROBES}
echo x > /run/planted 2>/dev/null; echo "run $?" >> out/writes.txt
echo x > /home/planted 2>/dev/null; echo "home $?" >> out/writes.txt
echo x > /tmp/own 2>/dev/null; echo "tmp $?" >> out/writes.txt
echo "[DONE:implemented] tried"
"#
    );
    let ws = attack_workspace(&script, "");
    let stderr = run_note(&ws, "L-1");
    assert!(stderr.contains("landlock ABI"), "{stderr}");
    let repo = ws.path().join("repo");
    let branch = run_branch(&ws, "L-1");
    let probes = on_branch(&repo, &branch, "out/probes.txt").expect("probes");
    for name in ["ptrace", "io_uring", "x32"] {
        assert!(probes.contains(&format!("{name} refused")), "{probes}");
    }
    // The wall's own loopback has no route out; datagrams there are harmless, and allowed.
    let writes = on_branch(&repo, &branch, "out/writes.txt").expect("writes");
    assert!(
        writes.contains("run 1") || writes.contains("run 2"),
        "{writes}"
    );
    assert!(
        writes.contains("home 1") || writes.contains("home 2"),
        "{writes}"
    );
    assert!(
        writes.contains("tmp 0"),
        "its own /tmp stays writable: {writes}"
    );
}

#[test]
fn where_user_namespaces_are_refused_the_seal_alone_walls_the_worker() {
    if !landlock_walls() {
        return;
    }
    let outside = Outside::new();
    let owner_home = outside.path().join("home");
    std::fs::create_dir_all(owner_home.join(".ssh")).expect("mkdir");
    std::fs::write(owner_home.join(".ssh/id_rsa"), "SSH-KEY-MARKER-52\n").expect("key");
    let target = outside.path().join("target");
    std::fs::create_dir_all(&target).expect("mkdir");
    let listening = listener();
    // A host socket named in the file system (a container runtime's, the session bus):
    // Landlock hides no path from connect, the seal refuses the socket itself.
    let host_socket = outside.path().join("host.sock");
    let unix = std::os::unix::net::UnixListener::bind(&host_socket).expect("bind a host socket");
    unix.set_nonblocking(true).expect("nonblocking");
    let mut bystander = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .expect("a process of the host");
    let marker = format!("301.{}", std::process::id());
    let script = format!(
        r#"mkdir -p out
{SEAL_PROBES}
cat '{home}/.ssh/id_rsa' > out/ssh.txt 2>&1
cat '{ws}/executor.toml' > out/config.txt 2>&1
cat /proc/$PPID/environ > out/environ.txt 2>&1
echo x > '{target}/absolute' 2>/dev/null; echo "absolute $?" >> out/writes.txt
echo x > "$TMPDIR/own" 2>/dev/null; echo "tmpdir $?" >> out/writes.txt
kill -9 {bystander} 2>/dev/null; echo "kill $?" > out/kill.txt
(sleep {marker} &)
setsid sleep {marker} &
/usr/bin/python3 -c "import socket; s=socket.create_connection(('127.0.0.1', {port}), 2); print('tcp ok')" > out/tcp.txt 2>&1 || echo "tcp refused" >> out/tcp.txt
/usr/bin/python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('{host_socket}'); print('unix ok')" > out/unix.txt 2>&1 || echo "unix refused" >> out/unix.txt
/usr/bin/python3 -c "import socket; a,b=socket.socketpair(); a.send(b'x'); print('pair', b.recv(1))" > out/pair.txt 2>&1
echo "[DONE:implemented] tried"
"#,
        host_socket = host_socket.display(),
        home = owner_home.display(),
        ws = "WORKSPACE",
        target = target.display(),
        bystander = bystander.id(),
        port = listening.port,
    );
    let ws = attack_workspace("true", "");
    set_worker(
        &ws,
        "/bin/sh",
        &script.replace("WORKSPACE", &ws.path().display().to_string()),
        "",
    );
    std::fs::write(ws.plans().join("s.md"), "---\ngid: S-1\n---\n# Sealed\n").expect("note");
    // Inside a user namespace that may make none of its own, bubblewrap cannot run: the
    // machine a container or AppArmor's restrict_unprivileged_userns gives executor.
    let mut cmd = without_user_namespaces(&ws.command(&["run", "--once"]));
    cmd.env("HOME", &owner_home)
        .env("EXECUTOR_TEST_RUNNER_SECRET", "RUNNER-ENV-MARKER-53");
    let out = cmd.output().expect("run under unshare");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let bystander_lived = bystander.try_wait().expect("wait").is_none();
    let _ = bystander.kill();
    let _ = bystander.wait();
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("WITHOUT bubblewrap"), "{stderr}");
    let repo = ws.path().join("repo");
    let branch = run_branch(&ws, "S-1");
    let read = |name: &str| on_branch(&repo, &branch, name).unwrap_or_default();
    assert!(
        !read("out/ssh.txt").contains("SSH-KEY-MARKER-52"),
        "the key leaked"
    );
    assert!(
        !read("out/config.txt").contains("[sandbox]"),
        "executor's workspace was readable: {}",
        read("out/config.txt")
    );
    assert!(!read("out/environ.txt").contains("RUNNER-ENV-MARKER-53"));
    let writes = read("out/writes.txt");
    assert!(
        !target.join("absolute").exists(),
        "written outside: {writes}"
    );
    assert!(writes.contains("tmpdir 0"), "{writes}");
    assert!(
        read("out/kill.txt").contains("kill 1"),
        "{}",
        read("out/kill.txt")
    );
    assert!(bystander_lived, "the worker killed a process of the host");
    let probes = read("out/probes.txt");
    for name in ["ptrace", "io_uring", "udp", "x32"] {
        assert!(probes.contains(&format!("{name} refused")), "{probes}");
    }
    // The filter answers before the kernel looks for the protocol: refused whether or not
    // this kernel has SCTP or Multipath TCP.
    for name in ["sctp", "mptcp", "smc", "smc-ip", "dccp"] {
        assert!(probes.contains(&format!("{name} refused")), "{probes}");
    }
    assert!(
        read("out/tcp.txt").contains("tcp refused"),
        "{}",
        read("out/tcp.txt")
    );
    assert_eq!(listening.accepted.load(Ordering::SeqCst), 0);
    let unix_said = read("out/unix.txt");
    assert!(unix_said.contains("unix refused"), "{unix_said}");
    assert!(
        matches!(unix.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the worker reached a host socket: {unix_said}"
    );
    // A pair of connected sockets (Python's, Node's child pipes) still works.
    assert!(
        read("out/pair.txt").contains("pair b'x'"),
        "{}",
        read("out/pair.txt")
    );
    crate::support::eventually(Duration::from_secs(10), "the worker's daemons gone", || {
        processes_with(&marker).is_empty().then_some(())
    });
}

#[test]
fn a_worker_writing_past_max_disk_is_stopped_and_the_run_asks_the_owner() {
    if !wall_works() {
        return;
    }
    // One file may not pass the budget (the kernel refuses it at once), the private /tmp is
    // a tmpfs of the budget's size, and many small files are stopped by the measure.
    let script = r#"mkdir -p out
head -c 40000000 /dev/zero > one-big.bin 2>/dev/null; echo "one-big $?" > out/disk.txt
rm -f one-big.bin
head -c 40000000 /dev/zero > /tmp/big.bin 2>/dev/null; echo "tmp $?" >> out/disk.txt
rm -f /tmp/big.bin
git add out/disk.txt 2>/dev/null
i=0; while [ $i -lt 400 ]; do head -c 1048576 /dev/zero > "many-$i.bin"; i=$((i+1)); sleep 0.02; done
echo "[DONE:implemented] wrote 400 MiB"
"#;
    let ws = attack_workspace(script, "");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&(config + "\n[sandbox]\nmax_disk = \"24M\"\n"));
    std::fs::write(ws.plans().join("d.md"), "---\ngid: D-1\n---\n# Disk\n").expect("note");
    let out = run_once(&ws);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let shown = ws.json(&["show", "D-1", "--json"]);
    let run = &shown["runs"][0];
    assert_ne!(run["state"], "complete", "{shown}");
    let listing = ws.ok(&["escalations"]);
    assert!(
        listing.contains("disk_budget") && listing.contains("max_disk"),
        "the run asks the owner, saying why: {listing}\n{stderr}"
    );
    let worktree = Path::new(run["worktree_path"].as_str().expect("worktree"));
    let report = std::fs::read_to_string(worktree.join("out/disk.txt")).expect("report");
    assert!(
        !report.contains("one-big 0"),
        "a 40 MB file under a 24 MiB budget: {report}"
    );
    assert!(
        !report.contains("tmp 0"),
        "40 MB in a /tmp of 24 MiB: {report}"
    );
    let written = executor::supervisor::disk::used(&[worktree.to_path_buf()]);
    // The measure runs every half second; the worker writes about 1 MiB each 20 ms, so
    // what passes the budget is what it wrote between two measures.
    assert!(
        written < (24 << 20) + (40 << 20),
        "it went on writing past its budget: {} MiB",
        written >> 20
    );
    let many = std::fs::read_dir(worktree)
        .expect("worktree")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("many-"))
        .count();
    assert!((20..400).contains(&many), "stopped partway: {many} files");
}

/// The pid namespace of process `pid`, as `/proc` names it.
fn pid_namespace(pid: u32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
}

/// The processes whose environment holds the runner's heartbeat (`EXECUTOR_KEEPER_BEAT`).
fn heartbeat_holders() -> Vec<u32> {
    let var = format!("{}=", executor::sandbox::keeper::BEAT_VAR);
    crate::keeper::pids_where(|proc| {
        std::fs::read(proc.join("environ")).is_ok_and(|environ| {
            environ
                .split(|b| *b == 0)
                .any(|entry| entry.starts_with(var.as_bytes()))
        })
    })
}

#[test]
fn a_confined_worker_cannot_stop_the_keeper_that_holds_its_runners_heartbeat() {
    if !wall_works() {
        return;
    }
    // The worker stops every process it can see but itself, then sleeps. The keeper that
    // holds the heartbeat must not be among them: outside the wall's pid namespace below
    // Landlock ABI 6, beside a worker whose domain cannot signal it from ABI 6.
    let marker = format!("303.{}", std::process::id());
    let ws = attack_workspace(
        &format!(
            "for p in /proc/[0-9]*; do n=${{p#/proc/}}; [ \"$n\" = \"$$\" ] || kill -STOP \"$n\" 2>/dev/null; done; sleep {marker}; echo '[DONE:implemented] slept'"
        ),
        "",
    );
    std::fs::write(ws.plans().join("k.md"), "---\ngid: K-1\n---\n# Keep\n").expect("note");
    let mut runner = confined(&mut ws.command(&["run", "--once"]))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run executor");
    let worker = crate::support::eventually(Duration::from_secs(60), "the worker's sleep", || {
        crate::keeper::sleepers(&marker).first().copied()
    });
    let inside = pid_namespace(worker).expect("the worker's pid namespace");
    let holders = heartbeat_holders();
    assert!(
        !holders.is_empty(),
        "no process holds the runner's heartbeat"
    );
    for pid in &holders {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().chars().next());
        assert_ne!(
            state,
            Some(Some('T')),
            "the worker stopped the heartbeat's keeper {pid}"
        );
        if executor::sandbox::seal::landlock_abi() < 6 {
            assert_ne!(
                pid_namespace(*pid).as_ref(),
                Some(&inside),
                "below Landlock ABI 6 the heartbeat is held inside the worker's pid namespace"
            );
        }
    }
    // The runner gone, its heartbeat's end closes: the keeper ends the wall.
    runner.kill().expect("kill the runner");
    runner.wait().expect("reap the runner");
    crate::support::eventually(Duration::from_secs(30), "the worker gone", || {
        crate::keeper::sleepers(&marker).is_empty().then_some(())
    });
}

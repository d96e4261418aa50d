//! `executor service install`: the definitions as printed are what the service managers
//! accept (systemd-analyze verifies the unit, a plist parser reads the launchd agent, a
//! shell runs the crontab line's command as cron would), and each starts executor with the
//! install's `PATH`, the owner's environment file, and a log; a bad-input exit is not
//! retried.

use std::path::Path;
use std::process::Command;

use crate::support::{assert_success, Workspace};

/// A workspace whose agent CLI lives in a folder of its own (`agent-bin/claude`), off the
/// `PATH` the service is installed from.
fn workspace() -> Workspace {
    let ws = Workspace::init();
    let bin = ws.path().join("agent-bin");
    std::fs::create_dir(&bin).expect("agent-bin");
    std::fs::write(bin.join("claude"), "#!/bin/sh\necho '1.0 (Claude Code)'\n").expect("claude");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("claude"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replacen(
        "kind = \"example\"",
        &format!(
            "kind = \"claude\"\nprogram = \"{}\"",
            bin.join("claude").display()
        ),
        1,
    ));
    ws
}

/// The `PATH` the definitions carry: the agent's folder, then the install's `PATH`.
fn service_path(ws: &Workspace) -> String {
    format!(
        "{}:/opt/agent-cli/bin:/usr/bin:/bin",
        ws.path().join("agent-bin").display()
    )
}

/// `service install --MANAGER`, from a `PATH` without the agent's folder.
fn install(ws: &Workspace, manager: &str) -> String {
    let out = ws
        .command(&["service", "install", manager])
        .env("PATH", "/opt/agent-cli/bin:/usr/bin:/bin")
        .output()
        .expect("service install");
    assert_success(&out, "service install");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A stand-in for executor that records what it was started with, then exits `code`.
fn recorder(dir: &Path, code: i32) -> std::path::PathBuf {
    let script = dir.join("fake-executor");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n{{ echo \"args=$*\"; echo \"path=$PATH\"; echo \"secret=$SERVICE_TEST_SECRET\"; }} > \"$(dirname \"$0\")/started\"\necho 'the log line'\nexit {code}\n"
        ),
    )
    .expect("write recorder");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script
}

fn env_file(ws: &Workspace) {
    std::fs::write(
        ws.path().join("executor.env"),
        "# a comment\nSERVICE_TEST_SECRET=s3cret-value\n",
    )
    .expect("env file");
}

#[test]
fn the_systemd_unit_is_verified_by_systemd_analyze() {
    let ws = workspace();
    let unit = install(&ws, "--systemd");
    assert!(unit.contains("RestartPreventExitStatus=2\n"), "{unit}");
    // Workers' cgroups (the process cap, the memory limit) go under the unit's own.
    assert!(unit.contains("\nDelegate=yes\n"), "{unit}");
    assert!(!unit.contains("network-online"), "{unit}");
    assert!(
        unit.contains(&format!("Environment=PATH={}\n", service_path(&ws))),
        "{unit}"
    );
    let env_file = ws.path().join("executor.env");
    assert!(
        unit.contains(&format!("EnvironmentFile=-{}\n", env_file.display())),
        "{unit}"
    );
    let Ok(analyze) = which("systemd-analyze") else {
        eprintln!("skipped: systemd-analyze is not installed here (.ci/run installs systemd)");
        return;
    };
    let dir = tempfile::tempdir().expect("temp");
    let name = unit_name(ws.path());
    let file = dir.path().join(&name);
    std::fs::write(&file, &unit).expect("write unit");
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).expect("runtime dir");
    let out = Command::new(analyze)
        .args(["--user", "verify"])
        .arg(&file)
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .expect("systemd-analyze");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("Failed to initialize manager") {
        eprintln!("skipped: systemd-analyze cannot run here: {stderr}");
        return;
    }
    assert!(out.status.success(), "systemd-analyze verify: {stderr}");
    // It exits 0 on keys it ignores; every complaint names the file.
    assert!(!stderr.contains(&name), "systemd-analyze verify: {stderr}");
}

fn unit_name(workspace: &Path) -> String {
    let folder = workspace.file_name().unwrap().to_string_lossy();
    let cleaned: String = folder
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("executor-{}.service", cleaned.trim_matches(['-', '.']))
}

fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .ok_or(())
}

#[test]
fn the_launchd_agent_parses_and_starts_executor_with_path_secrets_and_log() {
    let ws = workspace();
    let text = install(&ws, "--launchd");
    let agent: plist::Dictionary = plist::from_bytes(text.as_bytes()).expect("a valid plist");
    let label = agent
        .get("Label")
        .and_then(|v| v.as_string())
        .expect("Label");
    assert!(label.starts_with("dev.executor."), "{label}");
    let path = agent
        .get("EnvironmentVariables")
        .and_then(|v| v.as_dictionary())
        .and_then(|d| d.get("PATH"))
        .and_then(|v| v.as_string())
        .expect("PATH");
    assert_eq!(path, service_path(&ws));
    let log = agent
        .get("StandardOutPath")
        .and_then(|v| v.as_string())
        .expect("log");
    assert!(log.ends_with("logs/daemon.log"), "{log}");
    let args: Vec<String> = agent
        .get("ProgramArguments")
        .and_then(|v| v.as_array())
        .expect("ProgramArguments")
        .iter()
        .map(|v| v.as_string().expect("a string").to_string())
        .collect();
    // As launchd would start it (its own empty environment and PATH), with executor
    // swapped for a recorder.
    env_file(&ws);
    for (code, expected) in [(0, 0), (2, 0), (1, 1)] {
        let fake = recorder(ws.path(), code);
        let exe = std::env::var("CARGO_BIN_EXE_executor").unwrap_or_default();
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                if *a == exe || a.ends_with("/executor") {
                    fake.display().to_string()
                } else {
                    a.clone()
                }
            })
            .collect();
        let out = Command::new(&args[0])
            .args(&args[1..])
            .env_clear()
            .env("PATH", path)
            .output()
            .expect("run the agent's program");
        assert_eq!(out.status.code(), Some(expected), "exit {code}: {out:?}");
        let started = std::fs::read_to_string(ws.path().join("started")).expect("started");
        assert!(started.contains("args=--config "), "{started}");
        let tail = format!(
            "executor.toml daemon\npath={}\nsecret=s3cret-value\n",
            service_path(&ws)
        );
        assert!(started.ends_with(&tail), "{started}");
    }
}

#[test]
fn the_crontab_line_runs_the_one_shot_as_cron_would() {
    let ws = workspace();
    let line = install(&ws, "--cron");
    let fields: Vec<&str> = line.splitn(6, ' ').collect();
    assert_eq!(fields.len(), 6, "{line}");
    assert_eq!(&fields[..5], ["*/5", "*", "*", "*", "*"], "{line}");
    for field in &fields[..5] {
        assert!(
            field
                .chars()
                .all(|c| c.is_ascii_digit() || "*/,-".contains(c)),
            "a cron field: {field}"
        );
    }
    let command = fields[5].trim_end();
    assert!(!command.contains('\n'), "one line: {line}");
    assert!(
        command.ends_with(&format!(
            "# {}",
            unit_name(ws.path()).trim_end_matches(".service")
        )),
        "{command}"
    );
    env_file(&ws);
    std::fs::create_dir_all(ws.path().join("logs")).expect("logs");
    let fake = recorder(ws.path(), 2);
    let exe = env!("CARGO_BIN_EXE_executor");
    let command = command.replace(exe, &fake.display().to_string());
    assert!(command.contains(&fake.display().to_string()), "{command}");
    // cron: /bin/sh -c with a bare environment.
    let out = Command::new("/bin/sh")
        .args(["-c", &command])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("sh");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let started = std::fs::read_to_string(ws.path().join("started")).expect("started");
    let tail = format!(
        "executor.toml run --once\npath={}\nsecret=s3cret-value\n",
        service_path(&ws)
    );
    assert!(started.ends_with(&tail), "{started}");
    let log = std::fs::read_to_string(ws.path().join("logs/cron.log")).expect("cron log");
    assert_eq!(log, "the log line\n");
}

#[test]
fn install_write_leaves_a_private_env_file_and_uninstall_removes_the_unit() {
    let ws = workspace();
    let home = tempfile::tempdir().expect("home");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replacen("# env = []  ", "env = [\"ANTHROPIC_API_KEY\"]  ", 1));
    let run = |args: &[&str]| {
        let out = ws
            .command(args)
            .env("HOME", home.path())
            .env("PATH", "/usr/bin:/bin")
            .output()
            .expect("executor");
        assert_success(&out, &args.join(" "));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let said = run(&["service", "install", "--systemd", "--write"]);
    let unit = home
        .path()
        .join(".config/systemd/user")
        .join(unit_name(ws.path()));
    assert!(unit.is_file(), "{said}");
    assert!(said.contains("loginctl enable-linger"), "{said}");
    let env = ws.path().join("executor.env");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&env)
        .expect("env file")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let template = std::fs::read_to_string(&env).expect("read env");
    assert!(template.contains("# ANTHROPIC_API_KEY=\n"), "{template}");
    // The owner's secrets are never overwritten.
    std::fs::write(&env, "ANTHROPIC_API_KEY=mine\n").expect("fill");
    run(&["service", "install", "--systemd", "--write"]);
    assert_eq!(
        std::fs::read_to_string(&env).unwrap(),
        "ANTHROPIC_API_KEY=mine\n"
    );
    let doctor = ws
        .command(&["doctor", "--offline"])
        .env("HOME", home.path())
        .output()
        .expect("doctor");
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains(&format!("service      installed: {}", unit.display())),
        "{report}"
    );
    let said = run(&["service", "uninstall", "--systemd"]);
    assert!(!unit.exists(), "{said}");
    assert!(env.exists(), "the secrets stay");
    let doctor = ws
        .command(&["doctor", "--offline"])
        .env("HOME", home.path())
        .output()
        .expect("doctor");
    assert!(
        String::from_utf8_lossy(&doctor.stdout).contains("service      not installed"),
        "{doctor:?}"
    );
}

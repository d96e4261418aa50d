//! `executor service install` and `uninstall`: the definitions that keep executor running,
//! for systemd (a user unit running the daemon), launchd (a user agent running the daemon)
//! and cron (a one-shot every five minutes), each named after its workspace so two
//! workspaces never overwrite each other. A service manager starts executor without the
//! owner's login environment, so each definition carries the `PATH` of the install (with
//! the agent CLI's folder) and reads the owner's secrets from the workspace's environment
//! file, never from the definition itself.
//!
//! What it must never do: write a secret into a definition, or restart executor after a
//! bad-input exit (2: a config or token the owner has to fix), which would only repeat it.
//! The text of each definition is made here, purely; the commands that install it live in
//! the CLI beside it.

use std::path::{Path, PathBuf};

/// Which service manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    Systemd,
    Launchd,
    Cron,
}

impl Manager {
    /// The usual one on this platform.
    pub fn native() -> Self {
        if cfg!(target_os = "macos") {
            Manager::Launchd
        } else {
            Manager::Systemd
        }
    }
}

/// The environment file beside the config: the owner's secrets, one `NAME=value` a line.
pub const ENV_FILE: &str = "executor.env";

/// Everything a definition says.
#[derive(Debug, Clone)]
pub struct Service {
    pub exe: PathBuf,
    pub config: PathBuf,
    /// The workspace's name in unit names, labels and markers ([`workspace_name`]).
    pub workspace: String,
    /// The `PATH` executor and its workers run with ([`service_path`]).
    pub path: String,
    /// The owner's secrets ([`ENV_FILE`]).
    pub env_file: PathBuf,
    /// Where the daemon's (or the one-shot's) output goes.
    pub log: PathBuf,
}

impl Service {
    fn dir(&self) -> &Path {
        self.config.parent().unwrap_or(Path::new("/"))
    }
}

/// The workspace's name: its folder's name, with anything but letters, digits, `-`, `_`
/// and `.` made `-` (systemd unit names and launchd labels allow no more).
pub fn workspace_name(config: &Path) -> String {
    let folder = config
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
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
    let cleaned = cleaned.trim_matches(|c| c == '-' || c == '.').to_string();
    if cleaned.is_empty() {
        "workspace".to_string()
    } else {
        cleaned
    }
}

/// `executor-WORKSPACE.service`.
pub fn unit_name(workspace: &str) -> String {
    format!("executor-{workspace}.service")
}

/// `dev.executor.WORKSPACE`.
pub fn launchd_label(workspace: &str) -> String {
    format!("dev.executor.{workspace}")
}

/// The comment that ends this workspace's crontab line: `# executor-WORKSPACE`.
pub fn cron_marker(workspace: &str) -> String {
    format!("# executor-{workspace}")
}

/// The `PATH` a definition carries: the agent CLI's folder first (when it is not on the
/// `PATH` already), then the install's `PATH` without relative or repeated folders, or the
/// system's usual folders when there is none.
pub fn service_path(install_path: Option<&str>, agent_dir: Option<&Path>) -> String {
    let mut folders: Vec<String> = Vec::new();
    let mut add = |folder: &str| {
        if folder.starts_with('/') && !folders.iter().any(|f| f == folder) {
            folders.push(folder.to_string());
        }
    };
    let install = install_path.filter(|p| !p.trim().is_empty());
    let on_path =
        |dir: &str| install.is_some_and(|p| p.split(':').any(|f| f.trim_end_matches('/') == dir));
    if let Some(dir) = agent_dir.map(|d| d.display().to_string()) {
        if !on_path(dir.trim_end_matches('/')) {
            add(&dir);
        }
    }
    for folder in install.unwrap_or("/usr/local/bin:/usr/bin:/bin").split(':') {
        add(folder);
    }
    folders.join(":")
}

/// The systemd user unit that runs the daemon. Exit 2 (bad input) is not restarted; user
/// units have no `network-online.target`, so none is waited for (executor retries the
/// network on its own). `Delegate=yes` hands the unit's cgroup to executor, which gives
/// each worker a cgroup of its own under it (the process cap and the memory limit).
pub fn systemd_unit(service: &Service) -> String {
    format!(
        "[Unit]\n\
         Description=executor ({workspace}): autonomous coding agents on your repositories\n\
         \n\
         [Service]\n\
         Type=simple\n\
         Environment={path}\n\
         EnvironmentFile=-{env_file}\n\
         ExecStart={exe} --config {config} daemon\n\
         WorkingDirectory={dir}\n\
         Restart=on-failure\n\
         RestartSec=10\n\
         RestartPreventExitStatus=2\n\
         KillMode=mixed\n\
         Delegate=yes\n\
         TimeoutStopSec=60\n\
         StandardOutput=append:{log}\n\
         StandardError=append:{log}\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        workspace = service.workspace,
        path = systemd_quote(&format!("PATH={}", service.path)),
        env_file = systemd_quote(&service.env_file.display().to_string()),
        exe = systemd_quote(&service.exe.display().to_string()),
        config = systemd_quote(&service.config.display().to_string()),
        dir = systemd_quote(&service.dir().display().to_string()),
        // `append:` takes the rest of the line as the path, unquoted.
        log = systemd_escape(&service.log.display().to_string()),
    )
}

/// The shell program the launchd agent and the crontab line run: the environment file's
/// variables exported (when the file is there), then executor. Its arguments: the file,
/// executor, the config, then executor's command. A bad-input exit (2) is turned into 0 so
/// launchd's `KeepAlive` does not restart it; the log keeps the error.
const WRAPPER: &str = r#"set -a; [ ! -f "$1" ] || . "$1"; set +a; exe=$2; config=$3; shift 3; "$exe" --config "$config" "$@"; code=$?; [ "$code" -ne 2 ] || exit 0; exit "$code""#;

/// The launchd agent that runs the daemon.
pub fn launchd_plist(service: &Service) -> String {
    let args = [
        "/bin/sh",
        "-c",
        WRAPPER,
        "executor-service",
        &service.env_file.display().to_string(),
        &service.exe.display().to_string(),
        &service.config.display().to_string(),
        "daemon",
    ]
    .iter()
    .map(|a| format!("    <string>{}</string>\n", xml_escape(a)))
    .collect::<String>();
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>Label</key><string>{label}</string>
  <key>ProgramArguments</key>
  <array>
{args}  </array>
  <key>EnvironmentVariables</key>
  <dict>
    <key>PATH</key><string>{path}</string>
  </dict>
  <key>WorkingDirectory</key><string>{dir}</string>
  <key>RunAtLoad</key><true/>
  <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>
  <key>ThrottleInterval</key><integer>10</integer>
  <key>StandardOutPath</key><string>{log}</string>
  <key>StandardErrorPath</key><string>{log}</string>
</dict>
</plist>
"#,
        label = xml_escape(&launchd_label(&service.workspace)),
        path = xml_escape(&service.path),
        dir = xml_escape(&service.dir().display().to_string()),
        log = xml_escape(&service.log.display().to_string()),
    )
}

/// The crontab line for the one-shot runner, every five minutes, ending in the
/// workspace's marker so `install` replaces and `uninstall` removes exactly this line.
pub fn crontab_line(service: &Service) -> String {
    let command = [
        format!("PATH={}", shell_quote(&service.path)),
        "/bin/sh".to_string(),
        "-c".to_string(),
        shell_quote(WRAPPER),
        "executor-service".to_string(),
        shell_quote(&service.env_file.display().to_string()),
        shell_quote(&service.exe.display().to_string()),
        shell_quote(&service.config.display().to_string()),
        "run".to_string(),
        "--once".to_string(),
        ">>".to_string(),
        shell_quote(&service.log.display().to_string()),
        "2>&1".to_string(),
    ]
    .join(" ");
    // cron turns an unescaped `%` into a newline.
    format!(
        "*/5 * * * * {} {}\n",
        command.replace('%', "\\%"),
        cron_marker(&service.workspace)
    )
}

/// `existing` (a crontab) with this workspace's line in place of any earlier one.
pub fn crontab_with(existing: &str, line: &str, workspace: &str) -> String {
    let mut out = crontab_without(existing, workspace);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(line);
    out
}

/// `existing` (a crontab) without this workspace's line.
pub fn crontab_without(existing: &str, workspace: &str) -> String {
    let marker = cron_marker(workspace);
    existing
        .split_inclusive('\n')
        .filter(|l| !l.trim_end().ends_with(&marker))
        .collect()
}

/// Where `install --write` puts the definition, under `home` (cron: in the crontab).
pub fn install_path(manager: Manager, home: &Path, workspace: &str) -> Option<PathBuf> {
    match manager {
        Manager::Systemd => Some(home.join(".config/systemd/user").join(unit_name(workspace))),
        Manager::Launchd => Some(
            home.join("Library/LaunchAgents")
                .join(format!("{}.plist", launchd_label(workspace))),
        ),
        Manager::Cron => None,
    }
}

/// What the owner runs next to start it, and what keeps it running.
pub fn next_step(manager: Manager, workspace: &str, written: Option<&Path>) -> String {
    match manager {
        Manager::Systemd => {
            let unit = unit_name(workspace);
            let save = match written {
                Some(_) => String::new(),
                None => format!("save it as ~/.config/systemd/user/{unit}, then "),
            };
            format!(
                "{save}systemctl --user daemon-reload && systemctl --user enable --now {unit}\n\
                 to keep it running while you are logged out: loginctl enable-linger \"$USER\"\n\
                 its log: journalctl --user -u {unit}, and the file named in StandardOutput"
            )
        }
        Manager::Launchd => {
            let file = written.map(|p| p.display().to_string()).unwrap_or_else(|| {
                format!("~/Library/LaunchAgents/{}.plist", launchd_label(workspace))
            });
            let save = if written.is_some() {
                String::new()
            } else {
                format!("save it as {file}, then ")
            };
            format!("{save}launchctl bootstrap gui/$(id -u) {file}")
        }
        Manager::Cron => match written {
            Some(_) => "cron runs it every five minutes; `crontab -l` shows the line".to_string(),
            None => "add the line with `crontab -e` (or run this again with --write)".to_string(),
        },
    }
}

/// The environment file `install --write` leaves for the owner to fill (mode 0600), naming
/// the variables this workspace's config reads.
pub fn env_file_template(variables: &[String]) -> String {
    let mut text = String::from(
        "# executor's secrets for the service manager: NAME=value, one a line.\n\
         # Keep this file private (chmod 600 executor.env); never commit it.\n",
    );
    if variables.is_empty() {
        text.push_str("# This workspace's config names no secret yet.\n");
    }
    for name in variables {
        text.push_str(&format!("# {name}=\n"));
    }
    text
}

/// A systemd value: quoted when it holds a space, a quote or a backslash; `%` doubled
/// (systemd's specifier sign).
fn systemd_quote(text: &str) -> String {
    let text = text.replace('%', "%%");
    if text.contains([' ', '"', '\\', '\'']) {
        format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        text
    }
}

/// A systemd path that is taken unquoted: `%` doubled, spaces and backslashes escaped.
fn systemd_escape(text: &str) -> String {
    text.replace('%', "%%")
        .replace('\\', "\\\\")
        .replace(' ', "\\x20")
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:".contains(c))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(dir: &str) -> Service {
        Service {
            exe: PathBuf::from("/usr/bin/executor"),
            config: PathBuf::from(format!("{dir}/executor.toml")),
            workspace: workspace_name(Path::new(&format!("{dir}/executor.toml"))),
            path: "/home/o/.local/bin:/usr/bin:/bin".to_string(),
            env_file: PathBuf::from(format!("{dir}/executor.env")),
            log: PathBuf::from(format!("{dir}/logs/daemon.log")),
        }
    }

    #[test]
    fn the_systemd_unit_runs_the_daemon_with_path_secrets_and_no_restart_on_bad_input() {
        let unit = systemd_unit(&service("/home/o/ws"));
        for line in [
            "ExecStart=/usr/bin/executor --config /home/o/ws/executor.toml daemon\n",
            "WorkingDirectory=/home/o/ws\n",
            "Environment=PATH=/home/o/.local/bin:/usr/bin:/bin\n",
            "EnvironmentFile=-/home/o/ws/executor.env\n",
            "RestartPreventExitStatus=2\n",
            "StandardOutput=append:/home/o/ws/logs/daemon.log\n",
            "Description=executor (ws): ",
        ] {
            assert!(unit.contains(line), "{line} in {unit}");
        }
        assert!(!unit.contains("network-online"), "{unit}");
        let mut spaced = service("/opt/my ws");
        spaced.exe = PathBuf::from("/opt/my tools/executor");
        let unit = systemd_unit(&spaced);
        assert!(
            unit.contains(
                "ExecStart=\"/opt/my tools/executor\" --config \"/opt/my ws/executor.toml\""
            ),
            "{unit}"
        );
        assert!(
            unit.contains("append:/opt/my\\x20ws/logs/daemon.log"),
            "{unit}"
        );
        assert_eq!(spaced.workspace, "my-ws");
    }

    #[test]
    fn each_workspace_has_its_own_name() {
        assert_eq!(
            workspace_name(Path::new("/home/o/R&D work/executor.toml")),
            "R-D-work"
        );
        assert_eq!(workspace_name(Path::new("/executor.toml")), "workspace");
        let home = Path::new("/home/o");
        assert_ne!(
            install_path(Manager::Systemd, home, "a"),
            install_path(Manager::Systemd, home, "b")
        );
        assert_eq!(
            install_path(Manager::Launchd, home, "a").unwrap(),
            home.join("Library/LaunchAgents/dev.executor.a.plist")
        );
    }

    #[test]
    fn the_agent_folder_joins_the_path_once() {
        assert_eq!(
            service_path(
                Some("/usr/bin:bin:/bin:/usr/bin"),
                Some(Path::new("/home/o/.local/bin"))
            ),
            "/home/o/.local/bin:/usr/bin:/bin"
        );
        assert_eq!(
            service_path(
                Some("/usr/bin:/home/o/.local/bin"),
                Some(Path::new("/home/o/.local/bin"))
            ),
            "/usr/bin:/home/o/.local/bin"
        );
        assert_eq!(service_path(None, None), "/usr/local/bin:/usr/bin:/bin");
    }

    #[test]
    fn the_launchd_agent_escapes_its_paths_and_carries_the_path() {
        let mut odd = service("/Users/o/R&D");
        odd.path = "/opt/homebrew/bin:/usr/bin".into();
        let plist = launchd_plist(&odd);
        assert!(plist.contains("<string>/Users/o/R&amp;D/executor.toml</string>"));
        assert!(plist.contains("<key>PATH</key><string>/opt/homebrew/bin:/usr/bin</string>"));
        assert!(plist.contains("<string>dev.executor.R-D</string>"));
        assert!(!plist.contains("R&D"));
    }

    #[test]
    fn the_crontab_keeps_one_line_per_workspace() {
        let line = crontab_line(&service("/home/o/ws"));
        assert!(line.starts_with("*/5 * * * * PATH=/home/o/.local/bin:/usr/bin:/bin /bin/sh -c "));
        assert!(line.trim_end().ends_with("# executor-ws"), "{line}");
        let other = "0 * * * * backup\n";
        let once = crontab_with(other, &line, "ws");
        let twice = crontab_with(&once, &line, "ws");
        assert_eq!(once, twice);
        assert_eq!(once, format!("{other}{line}"));
        assert_eq!(crontab_without(&twice, "ws"), other);
        assert_eq!(crontab_with("0 * * * * backup", &line, "ws"), once);
        let mut percent = service("/home/o/50%");
        percent.workspace = "p".into();
        assert!(crontab_line(&percent).contains("/home/o/50\\%/executor.toml"));
    }
}

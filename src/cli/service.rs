//! `executor service install`: the definitions that keep executor running, for systemd
//! (a user unit running the daemon), launchd (a user agent running the daemon) and cron (a
//! one-shot every few minutes). Each is printed; with `--write` the systemd unit and the
//! launchd agent are also written where their service manager looks. Enabling them stays
//! the owner's step, printed as the next command.

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

/// The systemd user unit that runs the daemon.
pub fn systemd_unit(exe: &Path, config: &Path) -> String {
    format!(
        "[Unit]\n\
         Description=executor: autonomous coding agents on your repositories\n\
         After=network-online.target\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={exe} --config {config} daemon\n\
         WorkingDirectory={dir}\n\
         Restart=on-failure\n\
         RestartSec=10\n\
         KillMode=mixed\n\
         TimeoutStopSec=60\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        exe = systemd_quote(exe),
        config = systemd_quote(config),
        dir = systemd_quote(config.parent().unwrap_or(Path::new("/"))),
    )
}

/// The launchd agent that runs the daemon.
pub fn launchd_plist(exe: &Path, config: &Path, log: &Path) -> String {
    let dir = config.parent().unwrap_or(Path::new("/"));
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>Label</key><string>dev.executor.daemon</string>
  <key>ProgramArguments</key>
  <array>
    <string>{exe}</string>
    <string>--config</string>
    <string>{config}</string>
    <string>daemon</string>
  </array>
  <key>WorkingDirectory</key><string>{dir}</string>
  <key>RunAtLoad</key><true/>
  <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>
  <key>StandardErrorPath</key><string>{log}</string>
</dict>
</plist>
"#,
        exe = xml_escape(&exe.display().to_string()),
        config = xml_escape(&config.display().to_string()),
        dir = xml_escape(&dir.display().to_string()),
        log = xml_escape(&log.display().to_string()),
    )
}

/// The crontab line for the one-shot runner, every five minutes.
pub fn crontab_line(exe: &Path, config: &Path, log: &Path) -> String {
    format!(
        "*/5 * * * * {} --config {} run --once >> {} 2>&1\n",
        shell_quote(&exe.display().to_string()),
        shell_quote(&config.display().to_string()),
        shell_quote(&log.display().to_string()),
    )
}

/// Where `--write` puts the definition, under `home`.
pub fn install_path(manager: Manager, home: &Path) -> Option<PathBuf> {
    match manager {
        Manager::Systemd => Some(home.join(".config/systemd/user/executor.service")),
        Manager::Launchd => Some(home.join("Library/LaunchAgents/dev.executor.daemon.plist")),
        Manager::Cron => None,
    }
}

/// What the owner runs next to start it.
pub fn next_step(manager: Manager, written: Option<&Path>) -> String {
    match (manager, written) {
        (Manager::Systemd, _) => {
            "systemctl --user daemon-reload && systemctl --user enable --now executor.service"
                .to_string()
        }
        (Manager::Launchd, Some(path)) => format!("launchctl load -w {}", path.display()),
        (Manager::Launchd, None) => {
            "save it as ~/Library/LaunchAgents/dev.executor.daemon.plist, then launchctl load -w that file"
                .to_string()
        }
        (Manager::Cron, _) => "add the line with `crontab -e`".to_string(),
    }
}

fn systemd_quote(path: &Path) -> String {
    let text = path.display().to_string();
    if text.contains([' ', '"', '\\']) {
        format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        text
    }
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn shell_quote(text: &str) -> String {
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_systemd_unit_runs_the_daemon_with_this_config() {
        let unit = systemd_unit(
            Path::new("/usr/bin/executor"),
            Path::new("/home/o/ws/executor.toml"),
        );
        assert!(
            unit.contains("ExecStart=/usr/bin/executor --config /home/o/ws/executor.toml daemon\n")
        );
        assert!(unit.contains("WorkingDirectory=/home/o/ws\n"));
        assert!(unit.contains("Restart=on-failure"));
        let spaced = systemd_unit(
            Path::new("/opt/my tools/executor"),
            Path::new("/ws/executor.toml"),
        );
        assert!(
            spaced.contains("ExecStart=\"/opt/my tools/executor\" --config"),
            "{spaced}"
        );
    }

    #[test]
    fn the_launchd_agent_escapes_its_paths() {
        let plist = launchd_plist(
            Path::new("/Users/o/bin/executor"),
            Path::new("/Users/o/R&D/executor.toml"),
            Path::new("/Users/o/R&D/logs/daemon.log"),
        );
        assert!(plist.contains("<string>/Users/o/R&amp;D/executor.toml</string>"));
        assert!(plist.contains("<string>daemon</string>"));
        assert!(!plist.contains("R&D"));
    }

    #[test]
    fn the_crontab_line_runs_the_one_shot_and_quotes_odd_paths() {
        let line = crontab_line(
            Path::new("/usr/bin/executor"),
            Path::new("/home/o/my ws/executor.toml"),
            Path::new("/home/o/my ws/logs/cron.log"),
        );
        assert_eq!(
            line,
            "*/5 * * * * /usr/bin/executor --config '/home/o/my ws/executor.toml' run --once >> '/home/o/my ws/logs/cron.log' 2>&1\n"
        );
    }
}

//! `executor service install` and `executor service uninstall`: puts this workspace's
//! definition ([`super::service`]) where its service manager looks, leaves an environment
//! file for the owner's secrets, and takes it all away again. Starting and stopping stay
//! the service manager's: install prints the command that starts it; uninstall stops it
//! first where the manager's command is at hand.
//!
//! What it must never do: overwrite the owner's environment file (it holds their secrets),
//! or touch another workspace's definition or another line of the crontab.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use super::service::{self, Manager, Service};
use super::BadInput;
use crate::config::Settings;

/// The definition of this workspace's service, with the `PATH` of this process and the
/// agent CLI's folder.
pub(crate) fn describe(settings: &Settings, manager: Manager) -> Result<Service> {
    let exe = std::env::current_exe().context("cannot tell where this executor binary is")?;
    let logs = settings.root.join(&settings.raw.runner.logs_dir);
    let agent_dir = super::agent_adapter(settings).ok().and_then(|adapter| {
        let argv = adapter.argv(&crate::agents::Invocation::default());
        let program = PathBuf::from(argv.first()?);
        program
            .is_absolute()
            .then(|| program.parent().map(Path::to_path_buf))
            .flatten()
    });
    let path = std::env::var("PATH").ok();
    Ok(Service {
        exe,
        config: settings.path.clone(),
        workspace: service::workspace_name(&settings.path),
        path: service::service_path(path.as_deref(), agent_dir.as_deref()),
        env_file: settings.root.join(service::ENV_FILE),
        log: logs.join(match manager {
            Manager::Cron => "cron.log",
            _ => "daemon.log",
        }),
    })
}

fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| BadInput("installing a service needs HOME to be set".into()).into())
}

/// `service install`: prints the definition; with `write`, installs it too.
pub(crate) fn install(settings: &Settings, manager: Manager, write: bool) -> Result<()> {
    let described = describe(settings, manager)?;
    let definition = match manager {
        Manager::Systemd => service::systemd_unit(&described),
        Manager::Launchd => service::launchd_plist(&described),
        Manager::Cron => service::crontab_line(&described),
    };
    let mut written = None;
    if write {
        if let Some(logs) = described.log.parent() {
            std::fs::create_dir_all(logs)
                .with_context(|| format!("cannot create {}", logs.display()))?;
        }
        write_env_file(settings, &described.env_file)?;
        match service::install_path(manager, &home()?, &described.workspace) {
            Some(path) => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .with_context(|| format!("cannot create {}", parent.display()))?;
                }
                std::fs::write(&path, &definition)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                eprintln!("wrote {}", path.display());
                written = Some(path);
            }
            None => {
                let existing = crontab_list()?;
                crontab_replace(&service::crontab_with(
                    &existing,
                    &definition,
                    &described.workspace,
                ))?;
                eprintln!("added the line to your crontab");
                written = Some(PathBuf::from("crontab"));
            }
        }
    }
    print!("{definition}");
    eprintln!(
        "secrets: {} (NAME=value lines; chmod 600 it), read at each start",
        described.env_file.display()
    );
    eprintln!("logs: {}", described.log.display());
    eprintln!(
        "next: {}",
        service::next_step(manager, &described.workspace, written.as_deref())
    );
    Ok(())
}

/// The environment file, made owner-only with the config's variables named, when there is
/// none yet; an existing one is the owner's and is kept as it is.
fn write_env_file(settings: &Settings, path: &Path) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
    match opened {
        Ok(mut file) => {
            let names = super::credentials::variables(settings);
            file.write_all(service::env_file_template(&names).as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {} (mode 0600): fill in your secrets", path.display());
            Ok(())
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0);
            if mode & 0o077 != 0 {
                eprintln!(
                    "warning: {} can be read by others (mode {mode:o}): chmod 600 it",
                    path.display()
                );
            }
            Ok(())
        }
        Err(error) => Err(error).with_context(|| format!("cannot create {}", path.display())),
    }
}

/// `service uninstall`: stops this workspace's service where the manager's command is at
/// hand, and removes its definition. The environment file and the logs stay.
pub(crate) fn uninstall(settings: &Settings, manager: Manager) -> Result<()> {
    let workspace = service::workspace_name(&settings.path);
    match service::install_path(manager, &home()?, &workspace) {
        Some(path) => {
            let stop: Vec<String> = match manager {
                Manager::Systemd => ["systemctl", "--user", "disable", "--now"]
                    .iter()
                    .map(|s| s.to_string())
                    .chain([service::unit_name(&workspace)])
                    .collect(),
                _ => vec![
                    "launchctl".into(),
                    "bootout".into(),
                    format!(
                        "gui/{}/{}",
                        nix::unistd::getuid(),
                        service::launchd_label(&workspace)
                    ),
                ],
            };
            if path.exists() {
                run_quietly(&stop);
                std::fs::remove_file(&path)
                    .with_context(|| format!("cannot remove {}", path.display()))?;
                eprintln!("removed {}", path.display());
                if manager == Manager::Systemd {
                    run_quietly(&["systemctl", "--user", "daemon-reload"].map(String::from));
                }
            } else {
                eprintln!("nothing to remove: {} is not there", path.display());
            }
        }
        None => {
            let existing = crontab_list()?;
            let kept = service::crontab_without(&existing, &workspace);
            if kept == existing {
                eprintln!("nothing to remove: no line of this workspace in your crontab");
            } else {
                crontab_replace(&kept)?;
                eprintln!("removed this workspace's line from your crontab");
            }
        }
    }
    Ok(())
}

/// Where this workspace's service is installed, if it is: the native manager's file, or a
/// crontab line.
pub(crate) fn installed(settings: &Settings) -> Option<String> {
    let workspace = service::workspace_name(&settings.path);
    let home = home().ok()?;
    for manager in [Manager::native(), Manager::Cron] {
        match service::install_path(manager, &home, &workspace) {
            Some(path) if path.is_file() => return Some(path.display().to_string()),
            Some(_) => {}
            None => {
                let marker = service::cron_marker(&workspace);
                let crontab = crontab_list().ok()?;
                if crontab.lines().any(|l| l.trim_end().ends_with(&marker)) {
                    return Some("crontab".to_string());
                }
            }
        }
    }
    None
}

/// A stop command's outcome is told, not required: the service may not be running.
fn run_quietly(argv: &[String]) {
    let Some((program, args)) = argv.split_first() else {
        return;
    };
    match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => eprintln!("ran {}", argv.join(" ")),
        Ok(out) => eprintln!(
            "{} did not succeed ({}); removing the definition all the same",
            argv.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(_) => eprintln!("{program} is not here; removing the definition all the same"),
    }
}

/// The owner's crontab (empty when they have none).
fn crontab_list() -> Result<String> {
    let out = Command::new("crontab")
        .arg("-l")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| BadInput(format!("cannot run crontab ({e}): install cron")))?;
    // `crontab -l` fails with "no crontab for USER" when there is none.
    Ok(if out.status.success() {
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        String::new()
    })
}

fn crontab_replace(text: &str) -> Result<()> {
    use std::io::Write;
    let mut child = Command::new("crontab")
        .arg("-")
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| BadInput(format!("cannot run crontab ({e}): install cron")))?;
    child
        .stdin
        .take()
        .context("crontab's stdin")?
        .write_all(text.as_bytes())
        .context("cannot write to crontab")?;
    let status = child.wait().context("crontab")?;
    anyhow::ensure!(status.success(), "crontab - failed ({status})");
    Ok(())
}

//! Whether the wall can be had on this machine: found by running it once, the way a worker
//! will run, and, when that fails, by reading why (bubblewrap missing, user namespaces
//! switched off by a sysctl or by AppArmor).
//!
//! What it must never do: call the wall working without having run it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::bwrap::{self, Plan};

/// The answer of [`probe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probed {
    /// bubblewrap ran a program with every namespace of a worker (on macOS:
    /// `sandbox-exec` ran one under a profile).
    Works { program: PathBuf },
    /// It cannot be had; the text says why and what to do.
    Unavailable { why: String },
}

/// How long the probe may take before it counts as failed.
const PROBE_LIMIT: Duration = Duration::from_secs(10);

/// Runs `true` inside the wall. `bwrap` is the configured program, or `None` for `bwrap` on
/// `PATH`.
pub fn probe(bwrap: Option<&Path>) -> Probed {
    if cfg!(target_os = "macos") {
        return probe_sandbox_exec(Path::new(SANDBOX_EXEC));
    }
    if !cfg!(target_os = "linux") {
        return Probed::Unavailable {
            why:
                "the wall is bubblewrap on Linux and sandbox-exec on macOS; this system has neither"
                    .to_string(),
        };
    }
    let program = match bwrap {
        Some(path) => path.to_path_buf(),
        None => match crate::supervisor::program::find_program("bwrap", std::env::var_os("PATH").as_deref()) {
            Some(path) => path,
            None => {
                return Probed::Unavailable {
                    why: "bubblewrap (`bwrap`) is not installed: `apt-get install bubblewrap` (Debian, Ubuntu), `dnf install bubblewrap` (Fedora), `pacman -S bubblewrap` (Arch)".to_string(),
                }
            }
        },
    };
    let Some(truth) =
        crate::supervisor::program::find_program("true", std::env::var_os("PATH").as_deref())
    else {
        return Probed::Unavailable {
            why: "no `true` on PATH to probe the wall with".to_string(),
        };
    };
    let plan = Plan {
        hidden: vec![PathBuf::from("/tmp")],
        own_network: true,
        cwd: PathBuf::from("/"),
        ..Plan::default()
    };
    let mut argv = bwrap::argv(&program, &plan);
    argv.push(truth.to_string_lossy().into_owned());
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            return Probed::Unavailable {
                why: format!("cannot run {}: {e}", program.display()),
            }
        }
    };
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < PROBE_LIMIT => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Probed::Unavailable {
                    why: format!(
                        "{} did not answer within {PROBE_LIMIT:?}",
                        program.display()
                    ),
                };
            }
        }
    };
    if status.success() {
        return Probed::Works { program };
    }
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut stderr);
    }
    Probed::Unavailable {
        why: diagnose(stderr.trim(), &read_sysctls()),
    }
}

/// Where macOS keeps `sandbox-exec`.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// Runs `true` under a profile that allows everything: whether `sandbox-exec` works.
fn probe_sandbox_exec(program: &Path) -> Probed {
    if !program.exists() {
        return Probed::Unavailable {
            why: format!("{} is not there", program.display()),
        };
    }
    let ran = Command::new(program)
        .args(["-p", "(version 1)(allow default)", "--", "/usr/bin/true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match ran {
        Ok(status) if status.success() => Probed::Works {
            program: program.to_path_buf(),
        },
        Ok(status) => Probed::Unavailable {
            why: format!("{} could not run a program ({status})", program.display()),
        },
        Err(e) => Probed::Unavailable {
            why: format!("cannot run {}: {e}", program.display()),
        },
    }
}

/// The kernel settings that switch unprivileged user namespaces off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sysctls {
    /// `kernel.unprivileged_userns_clone` (Debian's and Ubuntu's older kernels).
    pub unprivileged_userns_clone: Option<String>,
    /// `user.max_user_namespaces`.
    pub max_user_namespaces: Option<String>,
    /// `kernel.apparmor_restrict_unprivileged_userns` (Ubuntu 23.10 and later).
    pub apparmor_restrict: Option<String>,
}

fn read_sysctls() -> Sysctls {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    Sysctls {
        unprivileged_userns_clone: read("/proc/sys/kernel/unprivileged_userns_clone"),
        max_user_namespaces: read("/proc/sys/user/max_user_namespaces"),
        apparmor_restrict: read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
    }
}

/// Why the wall failed, from bubblewrap's own words and the kernel's settings.
pub fn diagnose(stderr: &str, sysctls: &Sysctls) -> String {
    let said = if stderr.is_empty() {
        String::new()
    } else {
        format!(" (bwrap: {stderr})")
    };
    if sysctls.unprivileged_userns_clone.as_deref() == Some("0") {
        return format!("user namespaces are disabled: kernel.unprivileged_userns_clone = 0; `sysctl -w kernel.unprivileged_userns_clone=1` allows them{said}");
    }
    if sysctls.max_user_namespaces.as_deref() == Some("0") {
        return format!("user namespaces are disabled: user.max_user_namespaces = 0; `sysctl -w user.max_user_namespaces=10000` allows them{said}");
    }
    if sysctls.apparmor_restrict.as_deref() == Some("1") {
        return format!("AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1): give bwrap an AppArmor profile that allows `userns`, or set the sysctl to 0{said}");
    }
    format!("bubblewrap could not start a confined process{said}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_way_user_namespaces_are_switched_off_is_named() {
        let off = Sysctls {
            unprivileged_userns_clone: Some("0".into()),
            ..Sysctls::default()
        };
        assert!(diagnose("setting up uid map: Permission denied", &off)
            .contains("kernel.unprivileged_userns_clone = 0"));
        let none = Sysctls {
            max_user_namespaces: Some("0".into()),
            ..Sysctls::default()
        };
        assert!(diagnose("", &none).contains("user.max_user_namespaces = 0"));
        let apparmor = Sysctls {
            apparmor_restrict: Some("1".into()),
            max_user_namespaces: Some("63000".into()),
            ..Sysctls::default()
        };
        assert!(diagnose("", &apparmor).contains("AppArmor"));
        assert!(diagnose("Can't mount proc", &Sysctls::default()).contains("Can't mount proc"));
    }

    #[test]
    fn a_missing_program_is_reported_with_how_to_install_it() {
        match probe(Some(Path::new("/nonexistent/bwrap"))) {
            Probed::Unavailable { why } => assert!(why.contains("/nonexistent/bwrap"), "{why}"),
            Probed::Works { .. } => panic!("a missing bwrap cannot work"),
        }
        match probe_sandbox_exec(Path::new("/nonexistent/sandbox-exec")) {
            Probed::Unavailable { why } => assert!(why.contains("is not there"), "{why}"),
            Probed::Works { .. } => panic!("a missing sandbox-exec cannot work"),
        }
    }
}

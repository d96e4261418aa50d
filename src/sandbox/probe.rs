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

/// How long one try of the probe may take before it counts as failed: a slow file system
/// must not stall start-up. A try that ran out of time is tried once more (a loaded machine
/// can be slow once), so the probe takes at most twice this.
pub const PROBE_LIMIT: Duration = Duration::from_millis(500);

/// Where distributions install bubblewrap; their AppArmor profile for it applies to this
/// path only, so it is preferred to another `bwrap` on `PATH`.
pub const DISTRIBUTION_BWRAP: &str = "/usr/bin/bwrap";

/// The bubblewrap to probe: `preferred` when it is there, else `bwrap` on `path`.
pub fn bwrap_program(preferred: &Path, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    if crate::supervisor::program::is_executable(preferred) {
        return Some(preferred.to_path_buf());
    }
    crate::supervisor::program::find_program("bwrap", path)
}

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
        None => match bwrap_program(Path::new(DISTRIBUTION_BWRAP), std::env::var_os("PATH").as_deref()) {
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
    match run_once(&argv, &program) {
        Tried::OutOfTime => match run_once(&argv, &program) {
            Tried::OutOfTime => Probed::Unavailable {
                why: format!(
                    "{} did not answer within {PROBE_LIMIT:?}, twice: a slow file system or a stuck bwrap",
                    program.display()
                ),
            },
            Tried::Done(probed) => probed,
        },
        Tried::Done(probed) => probed,
    }
}

/// One try of the probe.
enum Tried {
    Done(Probed),
    OutOfTime,
}

/// Runs the probe's `argv` once, within [`PROBE_LIMIT`].
fn run_once(argv: &[String], program: &Path) -> Tried {
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            return Tried::Done(Probed::Unavailable {
                why: format!("cannot run {}: {e}", program.display()),
            })
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
                return Tried::OutOfTime;
            }
        }
    };
    if status.success() {
        return Tried::Done(Probed::Works {
            program: program.to_path_buf(),
        });
    }
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut stderr);
    }
    Tried::Done(Probed::Unavailable {
        why: diagnose(stderr.trim(), &read_sysctls()),
    })
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
    let known: [(&[&str], &str); 4] = [
        (
            &["Can't mount proc"],
            "bubblewrap cannot mount a /proc of its own here: this is a container whose /proc is masked (Docker's default); run executor outside the container, or start the container with `--security-opt systempaths=unconfined`",
        ),
        (
            &["Failed to make / slave"],
            "bubblewrap cannot change mount propagation here: this is a container that refuses it (Docker's default seccomp profile, or a read-only root); run executor outside the container, or start it with `--security-opt seccomp=unconfined`",
        ),
        (
            &["loopback: Failed RTM_NEWADDR"],
            "bubblewrap cannot bring up the loopback of a network namespace here (a container runtime such as gVisor, or a kernel without it): the allowlist needs one; run executor outside the container, or set [sandbox] network = \"host\" knowing it lets workers reach any host",
        ),
        (
            &[
                "setting up uid map",
                "No permissions to creat",
                "Creating new namespace failed",
                "Operation not permitted",
            ],
            "unprivileged user namespaces are refused here (a container's seccomp profile, a sysctl, or a security module): allow them, or run executor where they are allowed",
        ),
    ];
    for (words, sentence) in known {
        if words.iter().any(|w| stderr.contains(w)) {
            return format!("{sentence}{said}");
        }
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
    fn each_known_failure_of_bubblewrap_is_a_sentence_saying_what_to_do() {
        let none = Sysctls::default();
        for (said, sentence) in [
            ("bwrap: Can't mount proc on /newroot/proc: Operation not permitted", "a /proc of its own"),
            ("bwrap: Failed to make / slave: Permission denied", "mount propagation"),
            ("bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted", "loopback of a network namespace"),
            ("bwrap: setting up uid map: Permission denied", "user namespaces are refused"),
            ("bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces", "user namespaces are refused"),
            ("bwrap: Creating new namespace failed: Operation not permitted", "user namespaces are refused"),
        ] {
            let why = diagnose(said, &none);
            assert!(why.contains(sentence), "{said}: {why}");
            assert!(why.contains(said), "bubblewrap's own words are kept: {why}");
        }
        assert!(diagnose("something else", &none).starts_with("bubblewrap could not start"));
    }

    #[test]
    fn the_distributions_bwrap_is_preferred_to_another_on_path() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let (usr, other) = (dir.path().join("usr"), dir.path().join("other"));
        for folder in [&usr, &other] {
            std::fs::create_dir_all(folder).expect("mkdir");
            let bwrap = folder.join("bwrap");
            std::fs::write(&bwrap, "#!/bin/sh\n").expect("write");
            std::fs::set_permissions(&bwrap, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
        }
        let path = std::ffi::OsString::from(other.as_os_str());
        assert_eq!(
            bwrap_program(&usr.join("bwrap"), Some(&path)),
            Some(usr.join("bwrap"))
        );
        let gone = dir.path().join("gone/bwrap");
        assert_eq!(bwrap_program(&gone, Some(&path)), Some(other.join("bwrap")));
    }

    #[test]
    fn a_probe_that_does_not_answer_in_time_is_a_wall_that_cannot_be_had() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let slow = dir.path().join("bwrap");
        std::fs::write(&slow, "#!/bin/sh\nexec sleep 30\n").expect("write");
        std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        match probe(Some(&slow)) {
            Probed::Unavailable { why } => {
                assert!(why.contains("did not answer within 500ms, twice"), "{why}")
            }
            Probed::Works { .. } => panic!("a bwrap that never answers does not work"),
        }
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

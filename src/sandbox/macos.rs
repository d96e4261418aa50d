//! The macOS wall: a `sandbox-exec` profile (Apple's Sandbox Profile Language) generated per
//! worker, to the same effect as the Linux wall as far as the platform allows: reads
//! anywhere but the hidden places, writes only to the worktree, the worker's home and its
//! tmp, network only to executor's proxy on loopback.
//!
//! What it cannot give (and the README says): a process namespace of its own (a daemon a
//! worker starts is ended by killing the worker's process group, not by the kernel), and
//! a hidden place is unreadable rather than absent. The profile and the command line are
//! generated and unit tested here (and in `super`'s tests, on Linux); neither is run by
//! the test suite, which runs on Linux.
//!
//! What it must never do: put a path into the profile unquoted (every path is a string
//! literal with `\` and `"` escaped), or allow a write the plan does not name.

use std::path::PathBuf;

/// What the profile allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    /// Unreadable (the owner's home, executor's workspace, other runs' worktrees).
    pub hidden: Vec<PathBuf>,
    /// Readable again inside a hidden place (the repository's git data, a toolchain).
    pub read_only: Vec<PathBuf>,
    /// Writable (the worktree, the worker's home and tmp).
    pub read_write: Vec<PathBuf>,
    /// Executor's own places inside a writable one (the workspace's database, config,
    /// logs when the worker runs in the workspace): denied again after the writes, and
    /// the writable places inside them allowed once more after that.
    pub masked: Vec<PathBuf>,
    /// The loopback port of executor's proxy (`None`: no network at all).
    pub proxy_port: Option<u16>,
    /// Loopback ports forwarded to local model servers.
    pub loopback_ports: Vec<u16>,
    /// The host's network, unfiltered (`[sandbox] network = "host"`).
    pub host_network: bool,
}

fn literal(path: &std::path::Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `sandbox-exec -p PROFILE -- argv`: the worker's command line on macOS.
pub fn argv(sandbox_exec: &std::path::Path, p: &Profile, worker: Vec<String>) -> Vec<String> {
    let mut out = vec![
        sandbox_exec.to_string_lossy().into_owned(),
        "-p".to_string(),
        profile(p),
        "--".to_string(),
    ];
    out.extend(worker);
    out
}

/// The profile text for `sandbox-exec -p`.
pub fn profile(p: &Profile) -> String {
    let mut out = String::from("(version 1)\n(deny default)\n");
    // Processes, signals to its own, the system's read-only parts, sysctls for runtimes.
    out.push_str(
        "(allow process-exec)\n(allow process-fork)\n(allow signal (target same-sandbox))\n\
         (allow sysctl-read)\n(allow mach-lookup)\n(allow ipc-posix-shm)\n\
         (allow file-read*)\n(allow file-write-data (literal \"/dev/null\") (literal \"/dev/zero\") (regex #\"^/dev/tty\") (regex #\"^/dev/fd/\"))\n",
    );
    for path in &p.hidden {
        out.push_str(&format!("(deny file-read* (subpath {}))\n", literal(path)));
    }
    for path in &p.read_only {
        out.push_str(&format!("(allow file-read* (subpath {}))\n", literal(path)));
    }
    for path in &p.read_write {
        out.push_str(&format!(
            "(allow file-read* file-write* (subpath {}))\n",
            literal(path)
        ));
    }
    // A later rule wins in SBPL.
    for path in &p.masked {
        out.push_str(&format!(
            "(deny file-read* file-write* (subpath {}))\n",
            literal(path)
        ));
    }
    for path in p
        .read_write
        .iter()
        .filter(|rw| p.masked.iter().any(|m| rw.starts_with(m) && *rw != m))
    {
        out.push_str(&format!(
            "(allow file-read* file-write* (subpath {}))\n",
            literal(path)
        ));
    }
    if p.host_network {
        out.push_str("(allow network*)\n");
    } else {
        for port in p.proxy_port.iter().chain(&p.loopback_ports) {
            out.push_str(&format!(
                "(allow network-outbound (remote ip \"localhost:{port}\"))\n"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Profile {
        Profile {
            hidden: vec!["/Users/o".into(), "/Users/o/ws".into()],
            read_only: vec!["/Users/o/repo/.git".into()],
            read_write: vec![
                "/Users/o/ws/worktrees/run-1".into(),
                "/private/tmp/w1".into(),
            ],
            proxy_port: Some(3128),
            loopback_ports: vec![11434],
            host_network: false,
            masked: Vec::new(),
        }
    }

    #[test]
    fn everything_is_denied_first_and_writes_go_only_where_named() {
        let text = profile(&sample());
        assert!(text.starts_with("(version 1)\n(deny default)\n"));
        assert!(text.contains("(deny file-read* (subpath \"/Users/o\"))"));
        assert!(text.contains("(allow file-read* (subpath \"/Users/o/repo/.git\"))"));
        assert!(text
            .contains("(allow file-read* file-write* (subpath \"/Users/o/ws/worktrees/run-1\"))"));
        let writes: Vec<&str> = text.lines().filter(|l| l.contains("file-write*")).collect();
        assert_eq!(writes.len(), 2, "{writes:?}");
        // A later rule wins in SBPL: the worktree's allow comes after the home's deny.
        let deny = text.find("(deny file-read* (subpath \"/Users/o\"))");
        let allow = text.find("(subpath \"/Users/o/ws/worktrees/run-1\")");
        assert!(deny < allow);
    }

    #[test]
    fn the_network_is_the_proxy_and_forwarded_ports_only() {
        let text = profile(&sample());
        assert!(text.contains("(allow network-outbound (remote ip \"localhost:3128\"))"));
        assert!(text.contains("(allow network-outbound (remote ip \"localhost:11434\"))"));
        assert!(!text.contains("(allow network*)"));
        let none = profile(&Profile {
            proxy_port: None,
            loopback_ports: Vec::new(),
            ..sample()
        });
        assert!(!none.contains("network"));
        let host = profile(&Profile {
            host_network: true,
            ..sample()
        });
        assert!(host.contains("(allow network*)"));
    }

    #[test]
    fn paths_are_quoted_string_literals() {
        let text = profile(&Profile {
            read_write: vec![PathBuf::from("/w/a\"b\\c)) (allow default")],
            ..Profile::default()
        });
        assert!(text.contains("(subpath \"/w/a\\\"b\\\\c)) (allow default\")"));
        assert!(!text.contains("\n(allow default"));
    }

    #[test]
    fn executors_places_inside_a_writable_one_are_denied_again_and_the_home_allowed_after() {
        let p = Profile {
            hidden: vec!["/Users/o".into()],
            read_write: vec![
                "/Users/o/ws".into(),
                "/Users/o/ws/.executor/homes/run-1".into(),
            ],
            masked: vec![
                "/Users/o/ws/executor.db".into(),
                "/Users/o/ws/.executor".into(),
            ],
            ..Profile::default()
        };
        let text = profile(&p);
        let allow_ws = text
            .find("(allow file-read* file-write* (subpath \"/Users/o/ws\"))")
            .expect("the workspace is writable");
        let deny_db = text
            .find("(deny file-read* file-write* (subpath \"/Users/o/ws/executor.db\"))")
            .expect("the database is denied");
        let deny_own = text
            .find("(deny file-read* file-write* (subpath \"/Users/o/ws/.executor\"))")
            .expect("executor's folder is denied");
        let home = "(allow file-read* file-write* (subpath \"/Users/o/ws/.executor/homes/run-1\"))";
        let allow_home = text.rfind(home).expect("the home is writable");
        assert!(
            allow_ws < deny_db && allow_ws < deny_own && deny_own < allow_home,
            "{text}"
        );
    }
}

//! `[sandbox]`: the wall every worker runs inside (docs/design.md §11): whether it is
//! required, what network a worker reaches, which extra paths it sees, and its limits.
//!
//! What it must never do: widen the wall silently. An entry that cannot be read (a host
//! without a port, a size that is not a size) refuses to start, naming the key.

use std::path::PathBuf;

use serde::Deserialize;

pub use crate::sandbox::settings::{
    parse_host_port, HostPort, SandboxMinimum, SandboxMode, SandboxNetwork,
};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    #[serde(default)]
    pub mode: SandboxMode,
    /// The least wall `mode = "required"` accepts: `bubblewrap`, or `landlock` (the seal
    /// alone, where bubblewrap cannot run).
    #[serde(default)]
    pub minimum: SandboxMinimum,
    #[serde(default)]
    pub network: SandboxNetwork,
    /// `host:port` a worker may reach through the proxy, beside the agent's model API.
    /// `127.0.0.1:PORT` (or `localhost:PORT`) forwards that loopback port of the host into
    /// the wall: a local model server.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Extra paths a worker sees read-only (a toolchain under the home directory:
    /// `~/.cargo`, `~/.rustup`); relative to the config file, `~/` is the owner's home.
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Extra paths a worker may write (a shared build cache), same forms.
    #[serde(default)]
    pub read_write: Vec<PathBuf>,
    /// A folder copied into each run's private home as the agent's configuration (Claude
    /// Code's `CLAUDE_CONFIG_DIR`, Codex's `CODEX_HOME`, pi's agent folder): its login,
    /// settings and skills. Unset: the folder named by the agent's variable in
    /// `[agent] env`, if any; else the agent starts with an empty configuration.
    #[serde(default)]
    pub agent_config: Option<PathBuf>,
    /// Processes of the worker's user at most (`RLIMIT_NPROC`).
    #[serde(default = "default_max_processes")]
    pub max_processes: u64,
    /// Largest file a worker may write: bytes, or a number with K, M, G (binary).
    #[serde(default = "default_max_file_size")]
    pub max_file_size: String,
    /// Memory of each confined worker at most (everything it starts counted): a size
    /// (`8G`), a share of the machine's memory (`50%`), or `none`. Held through a cgroup v2
    /// of the worker's own where this process may make one (see `crate::sandbox::cgroup`).
    #[serde(default = "default_max_memory")]
    pub max_memory: String,
    /// Everything one run's worker writes at most (its worktree, its home, its `/tmp`): a
    /// size (`20G`), a share of the space free where the worktrees are when the runner
    /// starts (`25%`, the default, at most [`MAX_DISK_SHARE_CAP`]), or `none`.
    #[serde(default = "default_max_disk")]
    pub max_disk: String,
    /// The bubblewrap program (default: `bwrap` on `PATH`).
    #[serde(default)]
    pub bwrap: Option<PathBuf>,
}

fn default_max_processes() -> u64 {
    4096
}

fn default_max_file_size() -> String {
    "4G".to_string()
}

fn default_max_memory() -> String {
    "50%".to_string()
}

fn default_max_disk() -> String {
    "25%".to_string()
}

/// A share of the free space is at most this much (32 GiB): a budget, not a reservation.
pub const MAX_DISK_SHARE_CAP: u64 = 32 << 30;

/// The disk budget in bytes (`None`: none): `text` as `[sandbox] max_disk` reads, with
/// `free` bytes free where the worktrees are.
pub fn parse_disk(text: &str, free: Option<u64>) -> Result<Option<u64>, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    if let Some(share) = t.strip_suffix('%') {
        return match share.trim().parse::<u8>() {
            Ok(p) if (1..=100).contains(&p) => Ok(free
                .map(|f| ((u128::from(f) * u128::from(p) / 100) as u64).min(MAX_DISK_SHARE_CAP))),
            _ => Err(format!(
                "`{text}` is not a share of the free space (1% to 100%)"
            )),
        };
    }
    match parse_size(t) {
        Ok(b) if b >= 16 << 20 => Ok(Some(b)),
        Ok(_) => Err(format!(
            "`{text}` is too little for any worktree; at least 16M"
        )),
        Err(_) => Err(format!(
            "`{text}` is not a disk budget (a size such as 20G, a share such as 25%, or none)"
        )),
    }
}

/// `[sandbox] max_memory` read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryLimit {
    None,
    Bytes(u64),
    /// Percent of the machine's memory, 1 to 100.
    Share(u8),
}

impl MemoryLimit {
    /// The limit in bytes on a machine with `total` bytes of memory (`None`: no limit, or
    /// a share of a total that is not known).
    pub fn bytes(self, total: Option<u64>) -> Option<u64> {
        match self {
            MemoryLimit::None => None,
            MemoryLimit::Bytes(b) => Some(b),
            MemoryLimit::Share(p) => total.map(|t| (u128::from(t) * u128::from(p) / 100) as u64),
        }
    }
}

/// Reads `none`, a size, or `N%`.
pub fn parse_memory(text: &str) -> Result<MemoryLimit, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(MemoryLimit::None);
    }
    if let Some(share) = t.strip_suffix('%') {
        return match share.trim().parse::<u8>() {
            Ok(p) if (1..=100).contains(&p) => Ok(MemoryLimit::Share(p)),
            _ => Err(format!(
                "`{text}` is not a share of the memory (1% to 100%)"
            )),
        };
    }
    match parse_size(t) {
        Ok(b) if b >= 64 << 20 => Ok(MemoryLimit::Bytes(b)),
        Ok(_) => Err(format!(
            "`{text}` is too little for any agent; at least 64M"
        )),
        Err(_) => Err(format!(
            "`{text}` is not a memory limit (a size such as 8G, a share such as 50%, or none)"
        )),
    }
}

impl Default for SandboxSection {
    fn default() -> Self {
        Self {
            mode: SandboxMode::default(),
            minimum: SandboxMinimum::default(),
            network: SandboxNetwork::default(),
            allow: Vec::new(),
            read_only: Vec::new(),
            read_write: Vec::new(),
            agent_config: None,
            max_processes: default_max_processes(),
            max_file_size: default_max_file_size(),
            max_memory: default_max_memory(),
            max_disk: default_max_disk(),
            bwrap: None,
        }
    }
}

/// Reads a size: `4096`, `512K`, `100M`, `4G` (binary units; a trailing `B` or `iB` is
/// allowed).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (number, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => (&t[..at], &t[at..]),
        None => (t, ""),
    };
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => {
            return Err(format!(
                "`{text}` is not a size (bytes, or a number with K, M, G)"
            ))
        }
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size (bytes, or a number with K, M, G)"))?;
    n.checked_mul(1u64 << shift)
        .filter(|&bytes| bytes > 0)
        .ok_or_else(|| format!("`{text}` is not a size this machine can use"))
}

/// Checks what serde cannot: every `allow` entry and the size. Returns the key at fault.
pub fn validate(section: &SandboxSection) -> Result<(), (&'static str, String)> {
    for entry in &section.allow {
        parse_host_port(entry).map_err(|message| ("sandbox.allow", message))?;
    }
    parse_size(&section.max_file_size).map_err(|message| ("sandbox.max_file_size", message))?;
    parse_memory(&section.max_memory).map_err(|message| ("sandbox.max_memory", message))?;
    parse_disk(&section.max_disk, Some(1 << 40))
        .map_err(|message| ("sandbox.max_disk", message))?;
    if section.max_processes < 16 {
        return Err((
            "sandbox.max_processes",
            format!(
                "{} is too few for any agent (it starts a shell, a runtime and its tools); at least 16",
                section.max_processes
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_ports_are_read_with_ipv6_and_case() {
        assert_eq!(
            parse_host_port("API.Anthropic.com:443"),
            Ok(HostPort {
                host: "api.anthropic.com".into(),
                port: 443
            })
        );
        assert!(parse_host_port("[::1]:8080").is_ok_and(|h| h.is_loopback()));
        assert!(parse_host_port("127.0.0.1:11434").is_ok_and(|h| h.is_loopback()));
        assert!(parse_host_port("example.com").is_err());
        assert!(parse_host_port("example.com:http").is_err());
        assert!(parse_host_port(":80").is_err());
        assert!(parse_host_port("a:0").is_err());
    }

    #[test]
    fn sizes_take_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512K"), Ok(512 * 1024));
        assert_eq!(parse_size("100MiB"), Ok(100 << 20));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert!(parse_size("4X").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn memory_is_a_size_a_share_or_none() {
        assert_eq!(parse_memory("none"), Ok(MemoryLimit::None));
        assert_eq!(parse_memory("8G"), Ok(MemoryLimit::Bytes(8 << 30)));
        assert_eq!(parse_memory("50%"), Ok(MemoryLimit::Share(50)));
        assert!(parse_memory("0%").is_err());
        assert!(parse_memory("150%").is_err());
        assert!(parse_memory("1M").is_err(), "too little to start an agent");
        assert!(parse_memory("lots").is_err());
        assert_eq!(MemoryLimit::Share(50).bytes(Some(8 << 30)), Some(4 << 30));
        assert_eq!(MemoryLimit::Share(50).bytes(None), None);
        assert_eq!(MemoryLimit::None.bytes(Some(1)), None);
        assert_eq!(
            SandboxSection::default().max_memory,
            "50%",
            "the default holds a runaway worker to half the machine"
        );
    }
}

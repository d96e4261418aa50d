//! The wall's own settings types: its mode, its network, an allowed host and port. The
//! config reads `[sandbox]` into them (`crate::config::sandbox`); the wall needs nothing
//! else of the config, so it does not depend on it.

use serde::{Deserialize, Serialize};

/// `[sandbox] mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Confine where the wall works; otherwise run unconfined, strictly judged, and say so.
    #[default]
    Auto,
    /// Refuse to start without the wall.
    Required,
    /// Never confine (the orchestrator's own git hygiene still holds).
    Off,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Auto => "auto",
            SandboxMode::Required => "required",
            SandboxMode::Off => "off",
        }
    }
}

/// `[sandbox] minimum`: the least wall `required` accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMinimum {
    /// bubblewrap (with the seal inside it where the kernel has Landlock).
    #[default]
    Bubblewrap,
    /// The seal alone (Landlock, seccomp and the keeper), where bubblewrap cannot run.
    Landlock,
}

impl SandboxMinimum {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMinimum::Bubblewrap => "bubblewrap",
            SandboxMinimum::Landlock => "landlock",
        }
    }
}

/// `[sandbox] network`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxNetwork {
    /// No route out but the orchestrator's proxy, for the hosts in `allow`.
    #[default]
    Allowlist,
    /// No network at all (loopback inside the wall only).
    None,
    /// The host's network, unfiltered.
    Host,
}

impl SandboxNetwork {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxNetwork::Allowlist => "allowlist",
            SandboxNetwork::None => "none",
            SandboxNetwork::Host => "host",
        }
    }
}

/// One `allow` entry: a host and a port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

impl HostPort {
    /// This machine (`127.0.0.1` in any spelling, `::1`, `localhost`): a port of the host
    /// forwarded into the wall, never reached through the proxy.
    pub fn is_loopback(&self) -> bool {
        super::host::is_loopback(&self.host)
    }
}

impl std::fmt::Display for HostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Reads `host:port` (`[::1]:80` for IPv6); the host in its one spelling
/// ([`super::host::canonical`]).
pub fn parse_host_port(text: &str) -> Result<HostPort, String> {
    let text = text.trim();
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("`{text}` is not host:port"))?;
    let host = super::host::canonical(host);
    if host.is_empty() || host.contains(['/', ' ', '@', '[', ']']) {
        return Err(format!("`{text}` is not host:port"));
    }
    let port: u16 = port
        .parse()
        .map_err(|_| format!("`{text}`: `{port}` is not a port"))?;
    if port == 0 {
        return Err(format!("`{text}`: port 0 is not a port"));
    }
    Ok(HostPort { host, port })
}

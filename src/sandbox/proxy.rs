//! The orchestrator's side of a confined worker's network: unix sockets in a folder only
//! that worker sees, behind which executor connects out on the worker's behalf.
//!
//! - `proxy.sock` speaks HTTP `CONNECT host:port`: the tunnel is opened only to a host and
//!   port on the allowlist, anything else is answered `403` and logged;
//! - `fwd-PORT.sock` is a loopback port of the host (a local model server) forwarded into
//!   the wall, one per allowed `127.0.0.1:PORT`.
//!
//! Inside the wall the worker has no network interface but its own loopback; the bridge
//! (see [`super::bridge`]) listens there and passes each connection to these sockets. So
//! nothing the worker does reaches a host or port executor did not allow, the host's other
//! loopback listeners included.
//!
//! What it must never do: open a connection the allowlist does not name, read more than a
//! bounded request head, or outlive the worker (dropping [`NetGate`] stops it all).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::task::JoinHandle;

use super::settings::HostPort;

/// Longest `CONNECT` request head read.
const MAX_HEAD: usize = 16 * 1024;
/// How long a client may take to send its request head, and executor to connect out.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// The listeners of one worker's network; they stop when this is dropped.
#[derive(Debug)]
pub struct NetGate {
    dir: PathBuf,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for NetGate {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        if !self.dir.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The socket of the proxy in `dir`.
pub fn proxy_socket(dir: &Path) -> PathBuf {
    dir.join("proxy.sock")
}

/// The socket forwarding loopback port `port` in `dir`.
pub fn forward_socket(dir: &Path, port: u16) -> PathBuf {
    dir.join(format!("fwd-{port}.sock"))
}

impl NetGate {
    /// Starts the proxy for `allow` (remote hosts) and one forward per loopback port, in
    /// `dir` (created, owner-only). `label` names the worker in log lines.
    pub fn start(
        dir: &Path,
        allow: Vec<HostPort>,
        forwards: &[u16],
        label: String,
    ) -> std::io::Result<NetGate> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let mut gate = NetGate {
            dir: dir.to_path_buf(),
            tasks: Vec::new(),
        };
        let proxy = UnixListener::bind(proxy_socket(dir))?;
        let allow = std::sync::Arc::new(allow);
        let proxy_label = label.clone();
        gate.tasks.push(tokio::spawn(async move {
            loop {
                let Ok((client, _)) = proxy.accept().await else {
                    return;
                };
                let allow = allow.clone();
                let label = proxy_label.clone();
                tokio::spawn(async move {
                    if let Err(error) = tunnel(client, &allow, &label).await {
                        tracing::debug!(worker = %label, %error, "a proxied connection ended with an error");
                    }
                });
            }
        }));
        for &port in forwards {
            let listener = UnixListener::bind(forward_socket(dir, port))?;
            let label = label.clone();
            gate.tasks.push(tokio::spawn(async move {
                loop {
                    let Ok((mut client, _)) = listener.accept().await else {
                        return;
                    };
                    let label = label.clone();
                    tokio::spawn(async move {
                        match TcpStream::connect(("127.0.0.1", port)).await {
                            Ok(mut upstream) => {
                                let _ =
                                    tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                            }
                            Err(error) => {
                                tracing::debug!(worker = %label, port, %error, "the forwarded loopback port did not answer")
                            }
                        }
                    });
                }
            }));
        }
        Ok(gate)
    }

    /// The proxy alone, on a loopback TCP port of the host (the macOS wall, which has no
    /// network namespace to put a bridge in; its profile lets the worker reach this port
    /// only). Returns the gate and its port.
    pub fn start_tcp(allow: Vec<HostPort>, label: String) -> std::io::Result<(NetGate, u16)> {
        let proxy = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        proxy.set_nonblocking(true)?;
        let port = proxy.local_addr()?.port();
        let proxy = TcpListener::from_std(proxy)?;
        let allow = std::sync::Arc::new(allow);
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = proxy.accept().await else {
                    return;
                };
                let (allow, label) = (allow.clone(), label.clone());
                tokio::spawn(async move {
                    if let Err(error) = tunnel(client, &allow, &label).await {
                        tracing::debug!(worker = %label, %error, "a proxied connection ended with an error");
                    }
                });
            }
        });
        let gate = NetGate {
            dir: PathBuf::new(),
            tasks: vec![task],
        };
        Ok((gate, port))
    }
}

/// What a request head asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    Connect(HostPort),
    /// Anything but `CONNECT host:port`: the method, or why it could not be read.
    Other(String),
}

/// Reads the request line of `head`.
pub fn read_request(head: &str) -> Asked {
    let line = head.lines().next().unwrap_or_default();
    let mut parts = line.split_whitespace();
    match (parts.next(), parts.next(), parts.next()) {
        (Some(method), Some(target), Some(version))
            if method.eq_ignore_ascii_case("CONNECT") && version.starts_with("HTTP/1.") =>
        {
            match super::settings::parse_host_port(target) {
                Ok(hp) => Asked::Connect(hp),
                Err(why) => Asked::Other(why),
            }
        }
        (Some(method), _, _) => Asked::Other(method.to_string()),
        _ => Asked::Other("an empty request".to_string()),
    }
}

/// Whether `asked` is on `allow`: the same host and port, or a `*.domain` entry for a host
/// under that domain, both in their one spelling. This machine is never reached this way
/// (only forwards reach its loopback ports).
pub fn allowed(allow: &[HostPort], asked: &HostPort) -> bool {
    if super::host::is_local(&asked.host) {
        return false;
    }
    allow.iter().any(|entry| {
        entry.port == asked.port
            && (entry.host == asked.host
                || entry
                    .host
                    .strip_prefix("*.")
                    .is_some_and(|domain| asked.host.ends_with(&format!(".{domain}"))))
    })
}

async fn tunnel<S>(mut client: S, allow: &[HostPort], label: &str) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(head) => head?,
        Err(_) => return Ok(()),
    };
    let asked = match read_request(&head) {
        Asked::Connect(hp) => hp,
        Asked::Other(what) => {
            tracing::warn!(worker = %label, request = %what, "the sandbox proxy refused a request that is not CONNECT");
            client
                .write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .await?;
            return Ok(());
        }
    };
    if !allowed(allow, &asked) {
        tracing::warn!(worker = %label, target = %asked, "the sandbox proxy refused a host that is not allowed ([sandbox] allow)");
        client
            .write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await?;
        return Ok(());
    }
    let upstream = tokio::time::timeout(HEAD_TIMEOUT, dial(&asked)).await;
    let mut upstream = match upstream {
        Ok(Ok(stream)) => stream,
        failed => {
            if let Ok(Err(error)) = failed {
                tracing::warn!(worker = %label, target = %asked, %error, "the sandbox proxy cannot reach an allowed host");
            }
            client
                .write_all(
                    b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await?;
            return Ok(());
        }
    };
    tracing::debug!(worker = %label, target = %asked, "the sandbox proxy opened a tunnel");
    client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// Connects to `asked`, its canonical name resolved once here and only the addresses
/// [`dialable`] keeps dialled, so no name reaches this machine.
async fn dial(asked: &HostPort) -> std::io::Result<TcpStream> {
    let resolved = tokio::net::lookup_host((asked.host.as_str(), asked.port)).await?;
    let addresses = dialable(asked, resolved);
    if addresses.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{asked} resolves only to addresses of this machine or its link"),
        ));
    }
    TcpStream::connect(&addresses[..]).await
}

/// The resolved addresses of `asked` the proxy may dial: never this machine's (a name that
/// resolves to loopback reaches no port of the host), and a link-local one (a cloud's
/// metadata service) only when `asked` is that very address.
pub fn dialable(
    asked: &HostPort,
    resolved: impl IntoIterator<Item = SocketAddr>,
) -> Vec<SocketAddr> {
    let literal = super::host::address(&asked.host);
    resolved
        .into_iter()
        .filter(|addr| {
            let ip = addr.ip();
            let link_local = match ip {
                std::net::IpAddr::V4(v4) => v4.is_link_local(),
                std::net::IpAddr::V6(v6) => v6.is_unicast_link_local(),
            };
            !(ip.is_loopback() || ip.is_unspecified() || (link_local && literal != Some(ip)))
        })
        .collect()
}

/// Reads up to the blank line that ends a request head, byte by byte so nothing of the
/// tunnelled stream after it is consumed.
async fn read_head<S: AsyncRead + Unpin>(client: &mut S) -> std::io::Result<String> {
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while head.len() < MAX_HEAD {
        if client.read(&mut byte).await? == 0 {
            break;
        }
        head.push(byte[0]);
        if head.ends_with(b"\r\n\r\n") || head.ends_with(b"\n\n") {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(host: &str, port: u16) -> HostPort {
        HostPort {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn only_connect_to_a_host_and_port_is_read() {
        assert_eq!(
            read_request("CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: x\r\n\r\n"),
            Asked::Connect(hp("api.anthropic.com", 443))
        );
        assert_eq!(
            read_request("GET http://example.com/ HTTP/1.1\r\n\r\n"),
            Asked::Other("GET".into())
        );
        assert!(matches!(
            read_request("CONNECT example.com HTTP/1.1\r\n\r\n"),
            Asked::Other(_)
        ));
        assert!(matches!(read_request(""), Asked::Other(_)));
    }

    #[test]
    fn the_allowlist_matches_host_and_port_and_never_loopback() {
        let allow = vec![hp("api.anthropic.com", 443), hp("*.openai.com", 443)];
        assert!(allowed(&allow, &hp("api.anthropic.com", 443)));
        assert!(!allowed(&allow, &hp("api.anthropic.com", 80)));
        assert!(allowed(&allow, &hp("api.openai.com", 443)));
        assert!(!allowed(&allow, &hp("openai.com.evil.net", 443)));
        assert!(!allowed(&allow, &hp("evilopenai.com", 443)));
        assert!(!allowed(&[hp("127.0.0.1", 5432)], &hp("127.0.0.1", 5432)));
        assert!(!allowed(&allow, &hp("localhost", 443)));
    }

    #[test]
    fn a_host_is_judged_in_its_one_spelling() {
        let allow = vec![hp("api.anthropic.com", 443), hp("*.openai.com", 443)];
        let asked = |target: &str| match read_request(&format!("CONNECT {target} HTTP/1.1\r\n\r\n"))
        {
            Asked::Connect(hp) => hp,
            Asked::Other(why) => panic!("{target}: {why}"),
        };
        // A trailing dot and mixed case are the same host.
        assert!(allowed(&allow, &asked("api.anthropic.com.:443")));
        assert!(allowed(&allow, &asked("API.Anthropic.COM:443")));
        assert!(allowed(&allow, &asked("Api.OpenAI.com.:443")));
        // A non-default port is another entry.
        assert!(!allowed(&allow, &asked("api.anthropic.com:8443")));
        // This machine, however spelled, is never reached through the proxy, even when
        // the allowlist names it.
        let local = vec![hp("127.0.0.1", 5432), hp("::1", 5432)];
        for target in [
            "127.0.0.1:5432",
            "127.1:5432",
            "0x7f.0.0.1:5432",
            "0177.0.0.1:5432",
            "2130706433:5432",
            "[::1]:5432",
            "::1:5432",
            "[0:0:0:0:0:0:0:1]:5432",
            "[::ffff:127.0.0.1]:5432",
            "0.0.0.0:5432",
            "LOCALHOST.:5432",
        ] {
            let hp = asked(target);
            assert!(!allowed(&local, &hp), "{target} as {hp}");
        }
        // IPv6 is written back bracketed.
        assert_eq!(asked("[2001:DB8::1]:443").to_string(), "[2001:db8::1]:443");
    }

    #[test]
    fn an_allowed_name_never_dials_this_machine_or_its_link() {
        let addr = |text: &str| text.parse::<SocketAddr>().expect("an address");
        let name = hp("models.example.com", 443);
        let resolved = [
            addr("127.0.0.1:443"),
            addr("[::1]:443"),
            addr("0.0.0.0:443"),
            addr("169.254.169.254:443"),
            addr("[fe80::1]:443"),
            addr("93.184.216.34:443"),
        ];
        assert_eq!(dialable(&name, resolved), [addr("93.184.216.34:443")]);
        let metadata = hp("169.254.169.254", 80);
        assert_eq!(
            dialable(&metadata, [addr("169.254.169.254:80")]),
            [addr("169.254.169.254:80")],
            "an address the owner allowed as itself is dialled"
        );
    }

    #[tokio::test]
    async fn the_tcp_proxy_refuses_what_is_not_allowed_connect() {
        let (gate, port) = NetGate::start_tcp(vec![hp("api.anthropic.com", 443)], "t".into())
            .expect("the proxy listens");
        let ask = |request: &'static str| async move {
            let mut stream = TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect");
            stream.write_all(request.as_bytes()).await.expect("send");
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.expect("answer");
            answer
        };
        assert!(ask("CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 403"));
        assert!(ask("CONNECT 127.0.0.1:22 HTTP/1.1\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 403"));
        assert!(ask("GET http://api.anthropic.com/ HTTP/1.1\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 405"));
        drop(gate);
    }
}

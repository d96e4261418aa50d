//! The orchestrator's side of a confined worker's network: unix sockets in a folder only
//! that worker sees, behind which executor connects out on the worker's behalf.
//!
//! - `proxy.sock` speaks HTTP `CONNECT host:port`: the tunnel is opened only to a host and
//!   port on the allowlist, anything else is answered `403`, logged, and reported to the
//!   gate's [`RefusalSink`] (its host and port only), which records it with the run;
//! - `fwd-PORT.sock` is a loopback port of the host (a local model server) forwarded into
//!   the wall, one per allowed `127.0.0.1:PORT`.
//!
//! Inside the wall the worker has no network interface but its own loopback; the bridge
//! (see [`super::bridge`]) listens there and passes each connection to these sockets. So
//! nothing the worker does reaches a host or port executor did not allow, the host's other
//! loopback listeners included.
//!
//! What it must never do: open a connection the allowlist does not name, read more than a
//! bounded request head, report anything of a request but its host and port, or outlive
//! the worker (dropping [`NetGate`] stops it all).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::task::JoinHandle;

use super::settings::HostPort;
use crate::core::net_refusals::Refused;

/// Longest `CONNECT` request head read.
const MAX_HEAD: usize = 16 * 1024;
/// How long a client may take to send its request head, and executor to connect out.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// The listeners of one worker's network; they stop when this is dropped.
#[derive(Debug)]
pub struct NetGate {
    dir: PathBuf,
    tasks: Vec<JoinHandle<()>>,
    /// Where the proxy reports what it refuses, once the worker's runner says.
    report: Arc<Report>,
}

/// One `CONNECT` the proxy refused: the host and port asked for, in their one spelling
/// (nothing else of the request), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub target: HostPort,
    pub why: Refused,
}

/// Takes each refusal as it happens, on the proxy's task: it must be quick and must not
/// block (the runner's tally counts it; the store is written elsewhere, coalesced).
pub type RefusalSink = Arc<dyn Fn(Refusal) + Send + Sync>;

/// The sink of one gate, set at most once (before the worker starts, so nothing it does
/// goes unreported); without one a refusal is only logged.
#[derive(Default)]
struct Report(OnceLock<RefusalSink>);

impl std::fmt::Debug for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Report")
            .field("sink", &self.0.get().is_some())
            .finish()
    }
}

impl Report {
    /// Reports `refusal`, or logs it where no sink takes it. A sink's refusals are logged
    /// by whoever keeps them, once per host and port: a worker retrying in a loop must not
    /// flood the log either.
    fn refused(&self, refusal: Refusal, label: &str) {
        match self.0.get() {
            Some(sink) => {
                tracing::debug!(worker = %label, target = %refusal.target, "the sandbox proxy refused a host that is not allowed ([sandbox] allow)");
                sink(refusal);
            }
            None => {
                tracing::warn!(worker = %label, target = %refusal.target, "the sandbox proxy refused a host that is not allowed ([sandbox] allow)")
            }
        }
    }
}

/// What the proxy of one gate judges by.
#[derive(Debug)]
struct Rules {
    allow: Vec<HostPort>,
    /// The loopback ports forwarded into the wall: asked for through the proxy they are
    /// refused all the same, but a refusal says the worker should connect directly.
    forwards: Vec<u16>,
    label: String,
    report: Arc<Report>,
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
            report: Arc::default(),
        };
        let proxy = UnixListener::bind(proxy_socket(dir))?;
        let rules = Arc::new(Rules {
            allow,
            forwards: forwards.to_vec(),
            label: label.clone(),
            report: gate.report.clone(),
        });
        gate.tasks.push(tokio::spawn(async move {
            loop {
                let Ok((client, _)) = proxy.accept().await else {
                    return;
                };
                let rules = rules.clone();
                tokio::spawn(async move {
                    if let Err(error) = tunnel(client, &rules).await {
                        tracing::debug!(worker = %rules.label, %error, "a proxied connection ended with an error");
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
        let report: Arc<Report> = Arc::default();
        // The macOS wall forwards loopback ports by its profile, not through this gate.
        let rules = Arc::new(Rules {
            allow,
            forwards: Vec::new(),
            label,
            report: report.clone(),
        });
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = proxy.accept().await else {
                    return;
                };
                let rules = rules.clone();
                tokio::spawn(async move {
                    if let Err(error) = tunnel(client, &rules).await {
                        tracing::debug!(worker = %rules.label, %error, "a proxied connection ended with an error");
                    }
                });
            }
        });
        let gate = NetGate {
            dir: PathBuf::new(),
            tasks: vec![task],
            report,
        };
        Ok((gate, port))
    }

    /// Reports every `CONNECT` this gate's proxy refuses from now on to `sink`. Set once,
    /// before the worker starts; a second sink is ignored.
    pub fn report_refusals(&self, sink: RefusalSink) {
        if self.report.0.set(sink).is_err() {
            tracing::debug!("the gate reports its refusals to a sink already");
        }
    }
}

/// Why `asked` is refused, when it is: this machine (never reached through the proxy; a
/// port forwarded into the wall is reached directly), or a host no entry names.
pub fn refusal(allow: &[HostPort], forwards: &[u16], asked: &HostPort) -> Option<Refused> {
    if super::host::is_local(&asked.host) {
        return Some(if forwards.contains(&asked.port) {
            Refused::LoopbackForwarded
        } else {
            Refused::Loopback
        });
    }
    (!allowed(allow, asked)).then_some(Refused::NotAllowed)
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

async fn tunnel<S>(mut client: S, rules: &Rules) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let label = rules.label.as_str();
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
    if let Some(why) = refusal(&rules.allow, &rules.forwards, &asked) {
        rules.report.refused(
            Refusal {
                target: asked.clone(),
                why,
            },
            label,
        );
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

    #[test]
    fn a_refusal_says_why_and_a_forwarded_port_is_told_apart() {
        let allow = vec![hp("api.anthropic.com", 443)];
        let forwards = [4000];
        assert_eq!(
            refusal(&allow, &forwards, &hp("api.anthropic.com", 443)),
            None
        );
        assert_eq!(
            refusal(&allow, &forwards, &hp("example.org", 443)),
            Some(Refused::NotAllowed)
        );
        assert_eq!(
            refusal(&allow, &forwards, &hp("127.0.0.1", 5432)),
            Some(Refused::Loopback)
        );
        assert_eq!(
            refusal(&allow, &forwards, &hp("localhost", 4000)),
            Some(Refused::LoopbackForwarded)
        );
    }

    #[tokio::test]
    async fn each_refused_connect_is_reported_with_its_host_and_port_only() {
        let (gate, port) = NetGate::start_tcp(vec![hp("api.anthropic.com", 443)], "t".into())
            .expect("the proxy listens");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        gate.report_refusals(Arc::new(move |refusal| {
            let _ = tx.send(refusal);
        }));
        for request in [
            "CONNECT Example.ORG.:443 HTTP/1.1\r\nProxy-Authorization: Basic c2VjcmV0\r\n\r\n",
            "CONNECT 127.1:22 HTTP/1.1\r\n\r\n",
            "GET http://example.org/ HTTP/1.1\r\n\r\n",
        ] {
            let mut stream = TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect");
            stream.write_all(request.as_bytes()).await.expect("send");
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.expect("answer");
        }
        drop(gate);
        // Each refusal is reported before its 403 is written, so all are in by now.
        let mut reported = Vec::new();
        while let Ok(refusal) = rx.try_recv() {
            reported.push(refusal);
        }
        assert_eq!(
            reported,
            [
                Refusal {
                    target: hp("example.org", 443),
                    why: Refused::NotAllowed
                },
                Refusal {
                    target: hp("127.0.0.1", 22),
                    why: Refused::Loopback
                },
            ],
            "a plain HTTP request is refused without a host and port to report"
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

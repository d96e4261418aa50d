//! `executor sandbox-bridge`: the first program inside a confined worker's wall when its
//! network is the allowlist. It listens on the wall's own loopback (the proxy's port and
//! each forwarded port), passes every connection to the orchestrator's unix socket for it
//! (see [`super::proxy`]), and runs the worker's argv as its child, ending with it.
//!
//! What it must never do: connect anywhere but the sockets it was given, or keep the wall
//! alive after the worker's command ended (its exit ends the wall's process namespace, and
//! with it everything the worker started).

use std::path::PathBuf;

use tokio::net::{TcpListener, UnixStream};

/// One `PORT=SOCKET` of the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listen {
    pub port: u16,
    pub socket: PathBuf,
}

/// Reads `PORT=SOCKET`.
pub fn parse_listen(text: &str) -> Result<Listen, String> {
    let (port, socket) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not PORT=SOCKET"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("`{port}` is not a port"))?;
    Ok(Listen {
        port,
        socket: PathBuf::from(socket),
    })
}

/// Listens, runs `argv`, and returns its exit code (128 + the signal it died of).
pub fn run(listen: Vec<Listen>, argv: Vec<String>) -> std::io::Result<i32> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    runtime.block_on(async move {
        for Listen { port, socket } in listen {
            let listener = TcpListener::bind(("127.0.0.1", port)).await?;
            tokio::spawn(async move {
                loop {
                    let Ok((mut inside, _)) = listener.accept().await else {
                        return;
                    };
                    let socket = socket.clone();
                    tokio::spawn(async move {
                        if let Ok(mut outside) = UnixStream::connect(&socket).await {
                            let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
                        }
                    });
                }
            });
        }
        let (program, args) = argv.split_first().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command to run")
        })?;
        let mut child = tokio::process::Command::new(program).args(args).spawn()?;
        let status = child.wait().await?;
        use std::os::unix::process::ExitStatusExt;
        Ok(status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_entries_are_a_port_and_a_socket() {
        assert_eq!(
            parse_listen("3128=/tmp/x/proxy.sock"),
            Ok(Listen {
                port: 3128,
                socket: "/tmp/x/proxy.sock".into()
            })
        );
        assert!(parse_listen("3128").is_err());
        assert!(parse_listen("http=/x").is_err());
    }
}

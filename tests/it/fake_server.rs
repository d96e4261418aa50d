//! What the fake HTTP servers share: their start-up (an axum router served on 127.0.0.1, a
//! port of the system's choosing, by a thread of its own with a current-thread tokio
//! runtime, until the [`FakeServer`] is dropped, which stops the server and joins the
//! thread), and the rules by which a test injects a fault into their next requests
//! ([`FaultRule`]).
//!
//! What it must never do: reach the network (it listens on 127.0.0.1 and opens nothing).

use std::future::IntoFuture;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::thread::JoinHandle;

use axum::Router;
use tokio::sync::oneshot;

/// A running server; it stops when dropped.
pub struct FakeServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeServer {
    /// Serves `router`; `name` (e.g. `Zulip`) names the thread and the panics.
    pub fn start(name: &str, router: Router) -> Self {
        let (listener, addr) = bind(name);
        Self::serve(name, listener, addr, router)
    }

    /// Serves `router` with the state `state` makes from the server's base URL
    /// (`http://127.0.0.1:PORT`, for a fake that writes its own URLs into its answers), and
    /// gives that state back too.
    pub fn start_with<S>(name: &str, router: Router<S>, state: impl FnOnce(&str) -> S) -> (Self, S)
    where
        S: Clone + Send + Sync + 'static,
    {
        let (listener, addr) = bind(name);
        let state = state(&format!("http://{addr}"));
        let server = Self::serve(name, listener, addr, router.with_state(state.clone()));
        (server, state)
    }

    fn serve(name: &str, listener: TcpListener, addr: SocketAddr, app: Router) -> Self {
        let label = name.to_owned();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("fake-{}-{}", name.to_lowercase(), addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap_or_else(|e| panic!("fake {label} runtime: {e}"));
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener)
                        .unwrap_or_else(|e| panic!("fake {label} listener: {e}"));
                    // Not graceful: a client's keep-alive connection must not hold the test.
                    tokio::select! {
                        _ = axum::serve(listener, app).into_future() => {}
                        _ = stopped => {}
                    }
                });
            })
            .unwrap_or_else(|e| panic!("spawn the fake {name} thread: {e}"));
        Self {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`, no slash after it.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A non-blocking listener on a free port of 127.0.0.1, and its address.
fn bind(name: &str) -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap_or_else(|e| panic!("bind the fake {name} on loopback: {e}"));
    listener
        .set_nonblocking(true)
        .unwrap_or_else(|e| panic!("make the fake {name}'s socket non-blocking: {e}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("fake {name} address: {e}"));
    (listener, addr)
}

/// One fault to serve instead of an answer: to the next request whose path contains a part
/// (any request when none), or to the next of one method whose path ends with a route's end.
pub struct FaultRule<F> {
    pub fault: F,
    path: Option<String>,
    /// Set for a route's fault: then `path` is the end of the route's path.
    method: Option<axum::http::Method>,
}

impl<F> FaultRule<F> {
    /// For the next request whose path contains `part` (any, when `None`).
    pub fn matching(fault: F, part: Option<String>) -> Self {
        Self {
            fault,
            path: part,
            method: None,
        }
    }

    /// For the next `method` request whose path ends with `path_end`.
    pub fn route(fault: F, method: axum::http::Method, path_end: &str) -> Self {
        Self {
            fault,
            path: Some(path_end.to_owned()),
            method: Some(method),
        }
    }

    fn applies(&self, method: &axum::http::Method, path: &str) -> bool {
        match &self.method {
            Some(route) => {
                route == method && self.path.as_deref().is_some_and(|end| path.ends_with(end))
            }
            None => self.path.as_deref().is_none_or(|part| path.contains(part)),
        }
    }

    /// The first rule of `rules` that applies to this request, taken out of the line.
    pub fn take(
        rules: &mut std::collections::VecDeque<Self>,
        method: &axum::http::Method,
        path: &str,
    ) -> Option<F> {
        let at = rules.iter().position(|rule| rule.applies(method, path))?;
        rules.remove(at).map(|rule| rule.fault)
    }
}

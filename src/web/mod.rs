//! executor's own HTTP server, on `[web] listen`: GitHub's webhook deliveries
//! (`POST /webhooks/github`, see [`github_webhook`]) and the owner's console
//! (`crate::cli::console`).
//!
//! The server only receives and hands on: it never runs a worker or calls a forge itself,
//! so a slow or hostile sender can hold up nothing but its own request.

pub mod github_webhook;

use std::net::SocketAddr;

/// Serves `app` on `listen` until the task is aborted; returns the address bound (a port 0
/// is given one by the system) and the task.
pub async fn serve(
    listen: &str,
    app: axum::Router,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        // The peer's address goes with each request: the console lets loopback in without
        // a token and nothing else.
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "the web server stopped");
        }
    });
    Ok((bound, task))
}

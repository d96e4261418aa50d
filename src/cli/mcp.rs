//! `executor mcp`: executor as a Model Context Protocol server over stdio, for Claude Code
//! (`claude mcp add executor -- executor mcp`) or any MCP client. One JSON-RPC message per
//! line on standard input, one answer per request on standard output, logs on standard
//! error. It offers the tools of [`tools`] (the queue, the runs, their logs, the
//! escalations, and the owner's moves) and, as resources, each run's diff and work logs.
//!
//! The server is as trusted as the shell that started it: stdio reaches only the process
//! that spawned it. `--read-only` offers the read tools alone, and refuses the others. The
//! console serves the same at `POST /mcp` ([`answer_http`]), behind its access rule: a
//! read-only token gets the read tools alone.
//!
//! What it must never do: write anything but protocol messages to standard output, answer
//! a notification, or run a write tool when read-only.

mod calls;
mod protocol;
mod tools;

use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::config::Settings;
use crate::store::Store;
use protocol::Incoming;

/// What the server tells a client about itself at `initialize`.
const INSTRUCTIONS: &str = "executor runs coding agents on the owner's repositories. Tasks come \
in as pending, are triaged, and run once the owner says go. Use list_tasks and show_task to see \
the queue, go to approve a task, list_escalations and answer_escalation for questions a run \
waits on, and run_log or the executor://runs/{id}/log resource to read what a worker did.";

/// The longest line taken from the client; a longer one is refused, not read.
const MAX_LINE: usize = 4 * 1024 * 1024;

/// One server's state.
struct Server<'a> {
    ctx: calls::Ctx<'a>,
    read_only: bool,
    initialized: bool,
}

/// The answer to one message over HTTP (the console's `POST /mcp`, MCP's streamable HTTP
/// transport without sessions): every message is taken as from an initialized client,
/// and `read_only` comes from the console's grant. `None` for a notification or a
/// response (the console answers `202 Accepted`).
pub(crate) async fn answer_http(
    settings: &Settings,
    store: Arc<dyn Store>,
    read_only: bool,
    body: &str,
) -> Option<Value> {
    let mut server = Server {
        ctx: calls::Ctx { settings, store },
        read_only,
        initialized: true,
    };
    // A body is one message: a line break inside it is JSON's whitespace.
    server.answer(&body.replace(['\r', '\n'], " ")).await
}

/// Whether an `MCP-Protocol-Version` header names a version this server speaks.
pub(crate) fn speaks(version: &str) -> bool {
    protocol::VERSIONS.contains(&version)
}

/// Serves MCP on stdin and stdout until the client closes stdin.
pub async fn serve(
    settings: &Settings,
    store: Arc<dyn Store>,
    read_only: bool,
) -> anyhow::Result<()> {
    let mut server = Server {
        ctx: calls::Ctx { settings, store },
        read_only,
        initialized: false,
    };
    let mut input = BufReader::new(tokio::io::stdin());
    let mut output = tokio::io::stdout();
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut input)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 {
            return Ok(());
        }
        let answer = if line.len() > MAX_LINE && !line.ends_with(b"\n") {
            // Skip the rest of the line it was cut from.
            let mut rest = Vec::new();
            input.read_until(b'\n', &mut rest).await?;
            Some(protocol::error(
                Value::Null,
                protocol::INVALID_REQUEST,
                "a message longer than 4 MiB",
            ))
        } else {
            server.answer(&String::from_utf8_lossy(&line)).await
        };
        if let Some(answer) = answer {
            let mut text = answer.to_string();
            text.push('\n');
            output.write_all(text.as_bytes()).await?;
            output.flush().await?;
        }
    }
}

impl Server<'_> {
    /// The answer to one line, if it is a request (or unreadable).
    async fn answer(&mut self, line: &str) -> Option<Value> {
        match protocol::parse(line) {
            Incoming::Ignored => None,
            Incoming::Notification { method } => {
                if method == "notifications/initialized" {
                    self.initialized = true;
                }
                None
            }
            Incoming::Bad { id, code, message } => Some(protocol::error(id, code, &message)),
            Incoming::Request { id, method, params } => {
                Some(self.request(id, &method, &params).await)
            }
        }
    }

    async fn request(&mut self, id: Value, method: &str, params: &Value) -> Value {
        match method {
            "initialize" => {
                let asked = params.get("protocolVersion").and_then(Value::as_str);
                // A client that starts using the server before its `initialized` notice is
                // served all the same.
                self.initialized = true;
                protocol::result(
                    id,
                    protocol::initialized(protocol::negotiate(asked), INSTRUCTIONS),
                )
            }
            "ping" => protocol::result(id, json!({})),
            _ if !self.initialized => protocol::error(
                id,
                protocol::NOT_INITIALIZED,
                "the server is not initialized: send `initialize` first",
            ),
            "tools/list" => protocol::result(id, tools::listed(self.read_only)),
            "tools/call" => self.call(id, params).await,
            "resources/list" => match calls::resources(&self.ctx).await {
                Ok(listed) => protocol::result(id, listed),
                Err(refusal) => protocol::error(id, protocol::INTERNAL_ERROR, &refusal.0),
            },
            "resources/templates/list" => protocol::result(id, calls::templates()),
            "resources/read" => {
                let Some(uri) = params.get("uri").and_then(Value::as_str) else {
                    return protocol::error(id, protocol::INVALID_PARAMS, "`uri` is required");
                };
                match calls::read(&self.ctx, uri).await {
                    Ok(read) => protocol::result(id, read),
                    // MCP's code for a resource that is not there.
                    Err(refusal) => protocol::error(id, -32002, &refusal.0),
                }
            }
            other => protocol::error(
                id,
                protocol::METHOD_NOT_FOUND,
                &format!("no method `{other}`"),
            ),
        }
    }

    async fn call(&self, id: Value, params: &Value) -> Value {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return protocol::error(id, protocol::INVALID_PARAMS, "`name` is required");
        };
        // Absent or null: no arguments.
        let args = match params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(args) => args.clone(),
        };
        if !args.is_object() {
            return protocol::error(id, protocol::INVALID_PARAMS, "`arguments` is an object");
        }
        if tools::find(name, self.read_only).is_none() {
            let why = if tools::find(name, false).is_some() {
                format!(
                    "`{name}` writes, and this server is read-only (`executor mcp --read-only`)"
                )
            } else {
                format!("no tool `{name}`")
            };
            return protocol::error(id, protocol::INVALID_PARAMS, &why);
        }
        tracing::info!(tool = name, "an MCP client calls a tool");
        let answer = match calls::call(&self.ctx, name, &args).await {
            Ok(value) => protocol::tool_result(value, false),
            Err(refusal) => protocol::tool_result(json!({ "error": refusal.0 }), true),
        };
        protocol::result(id, answer)
    }
}

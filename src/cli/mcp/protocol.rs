//! The Model Context Protocol's wire, as `executor mcp` speaks it over stdio: one JSON-RPC
//! 2.0 message per line (no batches, which the protocol dropped in 2025-06-18), the
//! version agreed at `initialize`, and the answers built here. Pure: no I/O, no store.
//!
//! What it must never do: answer a notification (JSON-RPC forbids it), or take a line it
//! cannot read for a request (it answers a parse error with a null id, as JSON-RPC says).

use serde_json::{json, Value};

/// The protocol versions this server speaks, newest first.
pub const VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// JSON-RPC's error codes, and MCP's for a request before `initialize`.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const NOT_INITIALIZED: i64 = -32002;

/// One line from the client.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    /// A request: it gets exactly one answer with its `id`.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A notification (no `id`): never answered.
    Notification { method: String },
    /// An answer to a request of the server's (it sends none), or a blank line: ignored.
    Ignored,
    /// Not a message this server can take: answered with this error.
    Bad {
        id: Value,
        code: i64,
        message: String,
    },
}

/// Reads one line of the client's.
pub fn parse(line: &str) -> Incoming {
    if line.trim().is_empty() {
        return Incoming::Ignored;
    }
    let value: Value = match serde_json::from_str(line) {
        Ok(value) => value,
        Err(e) => {
            return Incoming::Bad {
                id: Value::Null,
                code: PARSE_ERROR,
                message: format!("not JSON: {e}"),
            }
        }
    };
    let Some(object) = value.as_object() else {
        return Incoming::Bad {
            id: Value::Null,
            code: INVALID_REQUEST,
            message: "a message is one JSON object (batches are not part of MCP)".into(),
        };
    };
    let id = object.get("id").cloned();
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Incoming::Bad {
            id: id.unwrap_or(Value::Null),
            code: INVALID_REQUEST,
            message: "`jsonrpc` must be \"2.0\"".into(),
        };
    }
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        // A result or an error: an answer to the server, which asks nothing.
        return Incoming::Ignored;
    };
    let params = object.get("params").cloned().unwrap_or(json!({}));
    match id {
        None => Incoming::Notification {
            method: method.to_owned(),
        },
        Some(id) if id.is_string() || id.is_number() => Incoming::Request {
            id,
            method: method.to_owned(),
            params,
        },
        Some(id) => Incoming::Bad {
            id: Value::Null,
            code: INVALID_REQUEST,
            message: format!("an id is a string or a number, not {id}"),
        },
    }
}

/// The version to speak: the client's when this server knows it, else the newest.
pub fn negotiate(asked: Option<&str>) -> &'static str {
    VERSIONS
        .iter()
        .find(|v| Some(**v) == asked)
        .copied()
        .unwrap_or(VERSIONS[0])
}

/// The answer to `initialize`: the version, what this server offers, and who it is.
pub fn initialized(version: &str, instructions: &str) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": { "listChanged": false },
            "resources": { "subscribe": false, "listChanged": false },
        },
        "serverInfo": {
            "name": "executor",
            "title": "executor",
            "version": env!("CARGO_PKG_VERSION"),
        },
        "instructions": instructions,
    })
}

/// A request's successful answer.
pub fn result(id: Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// A request's failed answer.
pub fn error(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// A tool call's result: `value` as text for the model and as structured content (an
/// object, as MCP requires: anything else is wrapped as `{"result": …}`); `is_error` says
/// the tool ran and refused or failed (the model may read why and try otherwise).
pub fn tool_result(value: Value, is_error: bool) -> Value {
    let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
    let structured = if value.is_object() {
        value
    } else {
        json!({ "result": value })
    };
    json!({
        "content": [{ "type": "text", "text": text }],
        "structuredContent": structured,
        "isError": is_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_as_requests_notifications_or_errors() {
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
            Incoming::Request {
                id: json!(1),
                method: "tools/list".into(),
                params: json!({})
            }
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Incoming::Notification {
                method: "notifications/initialized".into()
            }
        );
        assert_eq!(parse("  "), Incoming::Ignored);
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#),
            Incoming::Ignored
        );
        let bad = |line: &str| match parse(line) {
            Incoming::Bad { code, id, .. } => (code, id),
            other => panic!("{line}: {other:?}"),
        };
        assert_eq!(bad("{not json"), (PARSE_ERROR, Value::Null));
        assert_eq!(bad("[]"), (INVALID_REQUEST, Value::Null));
        assert_eq!(
            bad(r#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#),
            (INVALID_REQUEST, json!(4))
        );
        assert_eq!(
            bad(r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#),
            (INVALID_REQUEST, Value::Null)
        );
    }

    #[test]
    fn the_version_is_the_clients_when_known_else_the_newest() {
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("2099-01-01")), VERSIONS[0]);
        assert_eq!(negotiate(None), VERSIONS[0]);
    }

    #[test]
    fn a_tool_result_is_text_and_an_object() {
        let listed = tool_result(json!([1, 2]), false);
        assert_eq!(listed["structuredContent"], json!({"result": [1, 2]}));
        assert_eq!(listed["content"][0]["type"], "text");
        assert_eq!(listed["isError"], false);
        let refused = tool_result(json!({"error": "no"}), true);
        assert_eq!(refused["structuredContent"]["error"], "no");
        assert_eq!(refused["isError"], true);
    }
}

//! The tools `executor mcp` offers, each with its JSON Schema, and whether it writes. The
//! read tools read the store as the CLI's `--json` documents do; the write tools go
//! through the console's actions ([`super::super::console`]), so an MCP client moves a
//! task or answers an escalation the one way the CLI, the console and the chat do, and
//! is recorded as `mcp`.
//!
//! What it must never do: list or run a write tool for a read-only server, or print to
//! standard output (the protocol's channel).

use serde_json::{json, Value};

/// One tool as `tools/list` gives it.
pub struct Tool {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub input: fn() -> Value,
    pub writes: bool,
}

fn gid_only() -> Value {
    json!({
        "type": "object",
        "properties": { "gid": { "type": "string", "description": "The task's gid" } },
        "required": ["gid"],
        "additionalProperties": false,
    })
}

fn nothing() -> Value {
    json!({ "type": "object", "properties": {}, "additionalProperties": false })
}

/// Every tool, reads first.
pub const TOOLS: &[Tool] = &[
    Tool {
        name: "status",
        title: "Status",
        description: "Executor's health: the daemon, the queue by status, live workers, pending escalations, intake errors and the store.",
        input: nothing,
        writes: false,
    },
    Tool {
        name: "list_tasks",
        title: "List tasks",
        description: "Tasks of the queue in the order they were added, optionally of one status (pending, for_review, approved, in_progress, blocked, done, skip, failed).",
        input: || {
            json!({
                "type": "object",
                "properties": {
                    "status": { "type": "string" },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 1000 },
                },
                "additionalProperties": false,
            })
        },
        writes: false,
    },
    Tool {
        name: "show_task",
        title: "Show a task",
        description: "One task with its runs, decisions, escalations and history.",
        input: gid_only,
        writes: false,
    },
    Tool {
        name: "list_runs",
        title: "List runs",
        description: "Runs, newest first, optionally in one state (queued, in_progress, pr, complete, abandoned: a cancelled run is abandoned), with their spend.",
        input: || {
            json!({
                "type": "object",
                "properties": {
                    "state": { "type": "string" },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 1000 },
                },
                "additionalProperties": false,
            })
        },
        writes: false,
    },
    Tool {
        name: "run_log",
        title: "A run's log tail",
        description: "The last lines of a run's work logs (a run id, or a task gid for its latest run).",
        input: || {
            json!({
                "type": "object",
                "properties": {
                    "run": { "type": "string", "description": "A run id or a task gid" },
                    "lines": { "type": "integer", "minimum": 1, "maximum": 2000 },
                },
                "required": ["run"],
                "additionalProperties": false,
            })
        },
        writes: false,
    },
    Tool {
        name: "list_escalations",
        title: "List escalations",
        description: "The questions waiting for the owner (with `all`, the answered ones too).",
        input: || {
            json!({
                "type": "object",
                "properties": { "all": { "type": "boolean" } },
                "additionalProperties": false,
            })
        },
        writes: false,
    },
    Tool {
        name: "add_task",
        title: "Add a task",
        description: "Adds a task to the queue as pending (the analyzer triages it); a gid already queued is retitled.",
        input: || {
            json!({
                "type": "object",
                "properties": {
                    "title": { "type": "string" },
                    "description": { "type": "string", "description": "Markdown body" },
                    "gid": { "type": "string" },
                    "priority": { "type": "integer" },
                    "goal": { "type": "boolean", "description": "A goal a planner splits first" },
                },
                "required": ["title"],
                "additionalProperties": false,
            })
        },
        writes: true,
    },
    Tool {
        name: "go",
        title: "Approve a task",
        description: "The owner's go: the task is approved for a worker (a run waiting at the integration gate is integrated).",
        input: gid_only,
        writes: true,
    },
    Tool {
        name: "skip",
        title: "Skip a task",
        description: "Skips the task: no run starts for it.",
        input: gid_only,
        writes: true,
    },
    Tool {
        name: "retry",
        title: "Retry a task",
        description: "Sends a failed, abandoned or cancelled task back for a fresh run.",
        input: gid_only,
        writes: true,
    },
    Tool {
        name: "cancel",
        title: "Cancel a run",
        description: "Stops a task's open run (a run id or a task gid) and abandons it.",
        input: || {
            json!({
                "type": "object",
                "properties": {
                    "target": { "type": "string", "description": "A run id or a task gid" },
                    "reason": { "type": "string" },
                },
                "required": ["target"],
                "additionalProperties": false,
            })
        },
        writes: true,
    },
    Tool {
        name: "answer_escalation",
        title: "Answer an escalation",
        description: "Approves or denies a waiting escalation, once; the run goes on.",
        input: || {
            json!({
                "type": "object",
                "properties": {
                    "id": { "type": "integer" },
                    "answer": { "type": "string", "enum": ["approve", "deny"] },
                    "note": { "type": "string" },
                },
                "required": ["id", "answer"],
                "additionalProperties": false,
            })
        },
        writes: true,
    },
];

/// The tools a server offers: all of them, or the read ones for a read-only server.
pub fn offered(read_only: bool) -> impl Iterator<Item = &'static Tool> {
    TOOLS.iter().filter(move |t| !(read_only && t.writes))
}

/// `tools/list`'s answer.
pub fn listed(read_only: bool) -> Value {
    let tools: Vec<Value> = offered(read_only)
        .map(|t| {
            json!({
                "name": t.name,
                "title": t.title,
                "description": t.description,
                "inputSchema": (t.input)(),
                "annotations": {
                    "readOnlyHint": !t.writes,
                    "destructiveHint": t.writes && matches!(t.name, "skip" | "cancel"),
                    "idempotentHint": !t.writes,
                    "openWorldHint": false,
                },
            })
        })
        .collect();
    json!({ "tools": tools })
}

/// The tool `name`, if this server offers it.
pub fn find(name: &str, read_only: bool) -> Option<&'static Tool> {
    offered(read_only).find(|t| t.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_only_server_offers_no_write_tool() {
        let all: Vec<&str> = offered(false).map(|t| t.name).collect();
        let reads: Vec<&str> = offered(true).map(|t| t.name).collect();
        assert!(all.contains(&"go") && all.contains(&"answer_escalation"));
        assert!(!reads.contains(&"go") && !reads.contains(&"add_task"));
        assert!(reads.contains(&"status") && reads.contains(&"run_log"));
        assert!(find("go", true).is_none());
        assert!(find("go", false).is_some());
    }

    #[test]
    fn every_tool_has_an_object_schema_and_a_unique_name() {
        let mut names = std::collections::HashSet::new();
        for tool in TOOLS {
            assert!(names.insert(tool.name), "{} twice", tool.name);
            let schema = (tool.input)();
            assert_eq!(schema["type"], "object", "{}", tool.name);
        }
    }
}

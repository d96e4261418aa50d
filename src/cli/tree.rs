//! `executor tree GID`: a task and its subtasks (as the conductor split them), each with its
//! status, its latest run's state and what it waits for.
//!
//! What it must never do: change anything.

use anyhow::Result;
use serde::Serialize;

use crate::ops::queue::QueueOpError;
use crate::store::Store;

/// One node of the tree, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct Node {
    pub task_gid: String,
    pub title: String,
    pub status: String,
    /// The latest run's state, if the task was ever run.
    pub run_state: Option<String>,
    /// The latest run's id.
    pub run_id: Option<i64>,
    /// The planner's key for it, for a subtask.
    pub key: Option<String>,
    pub depth: u32,
    /// The subtasks it depends on.
    pub depends_on: Vec<String>,
    /// Those of them not complete yet.
    pub waits_for: Vec<String>,
    pub children: Vec<Node>,
}

/// Deepest tree printed; the conductor's own cap is far below it.
const MAX_DEPTH: u32 = 16;

/// The tree under `gid`: the task, its subtasks and theirs.
pub(crate) async fn of(store: &dyn Store, gid: &str) -> Result<Node> {
    node(store, gid, 0).await
}

/// The goal `gid` belongs to: the task at the top of its parents (itself when it has none).
pub(crate) async fn goal_of(store: &dyn Store, gid: &str) -> Result<String> {
    let mut top = gid.to_string();
    for _ in 0..MAX_DEPTH {
        match store.task_link(&top).await? {
            Some(link) => top = link.parent_gid,
            None => break,
        }
    }
    Ok(top)
}

async fn node(store: &dyn Store, gid: &str, depth: u32) -> Result<Node> {
    let task = store
        .task(gid)
        .await?
        .ok_or_else(|| QueueOpError::NotFound(gid.to_string()))?;
    let latest = store.runs(Some(gid)).await?.pop();
    let link = store.task_link(gid).await?;
    let mut children = Vec::new();
    if depth < MAX_DEPTH {
        for child in store.children(gid).await? {
            children.push(Box::pin(node(store, &child.task_gid, depth + 1)).await?);
        }
    }
    Ok(Node {
        task_gid: task.task_gid.clone(),
        title: task.title(),
        status: task.status.to_string(),
        run_state: latest.as_ref().map(|r| r.state.to_string()),
        run_id: latest.map(|r| r.id),
        key: link.as_ref().map(|l| l.key.clone()),
        depth: link.map(|l| l.depth).unwrap_or(0),
        depends_on: store.dependencies(gid).await?,
        waits_for: store.unmet_dependencies(gid).await?,
        children,
    })
}

/// Prints the tree under `gid`.
pub async fn print(store: &dyn Store, gid: &str, json: bool) -> Result<()> {
    let root = node(store, gid, 0).await?;
    if json {
        return super::output::print_json(&root);
    }
    let mut out = String::new();
    render(&root, "", true, true, &mut out);
    print!("{out}");
    Ok(())
}

fn render(node: &Node, prefix: &str, last: bool, root: bool, out: &mut String) {
    let branch = if root {
        ""
    } else if last {
        "└─ "
    } else {
        "├─ "
    };
    let run = node
        .run_state
        .as_deref()
        .map(|s| format!(", run {s}"))
        .unwrap_or_default();
    let waits = if node.waits_for.is_empty() {
        String::new()
    } else {
        format!(", waits for {}", node.waits_for.join(", "))
    };
    out.push_str(&format!(
        "{prefix}{branch}{}  {}  [{}{run}{waits}]\n",
        node.task_gid,
        crate::cli::output::printable(&node.title),
        node.status
    ));
    let child_prefix = if root {
        String::new()
    } else if last {
        format!("{prefix}   ")
    } else {
        format!("{prefix}│  ")
    };
    for (i, child) in node.children.iter().enumerate() {
        render(
            child,
            &child_prefix,
            i + 1 == node.children.len(),
            false,
            out,
        );
    }
}

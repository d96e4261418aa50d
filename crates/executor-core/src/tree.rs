//! The conductor's tree, as data: a goal task decomposed into child tasks (which may be
//! decomposed in turn), the dependency edges that say which child may start only after
//! another is complete, and the named agent sessions a conductor keeps across review rounds
//! (a worker task file's `session`), so the same agent picks up where it left off.
//!
//! Pure types: nothing here performs I/O or reads the clock; the store keeps the rows
//! (`executor_task_links`, `executor_task_dependencies`, `executor_agent_sessions`,
//! migration 9) and the conductor decides what they say.
//!
//! What it must never do: decide anything. A link or an edge records the planner's
//! decomposition as given; whether a child may start is read from the queue statuses of what
//! it depends on, never from here. A session holds an agent's session id only, never a
//! credential, a transcript or a prompt.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// One child's place in its parent's decomposition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TaskLink {
    pub task_gid: String,
    pub parent_gid: String,
    /// 1 for a goal's children, 2 for a child's children…
    pub depth: u32,
    /// The planner's short key for it ("A", "B") — unique among siblings.
    pub key: String,
    /// The order the planner listed it in (0-based).
    pub position: u32,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub created_at: DateTime<Utc>,
}

/// `task_gid` may start only when `depends_on` is complete.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TaskDependency {
    pub task_gid: String,
    pub depends_on: String,
}

/// A named agent session kept across rounds (a worker task file's `session`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AgentSession {
    pub name: String,
    /// Which agent it belongs to: `claude`, `codex`, `pi` or `command`.
    pub agent: String,
    /// The agent's own id for the session, to resume it.
    pub session_id: String,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub updated_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn times_serialize_the_way_every_other_record_does() {
        let at = Utc
            .with_ymd_and_hms(2026, 3, 1, 9, 30, 0)
            .single()
            .expect("valid time");
        let link = TaskLink {
            task_gid: "G-1.A".into(),
            parent_gid: "G-1".into(),
            depth: 1,
            key: "A".into(),
            position: 0,
            created_at: at,
        };
        let json = serde_json::to_value(&link).expect("serialize");
        assert_eq!(json["created_at"], crate::time::format_utc(&at));
        assert_eq!(json["depth"], 1);
        let session = AgentSession {
            name: "reviewer".into(),
            agent: "claude".into(),
            session_id: "s-1".into(),
            updated_at: at,
        };
        let json = serde_json::to_value(&session).expect("serialize");
        assert_eq!(json["updated_at"], crate::time::format_utc(&at));
    }
}

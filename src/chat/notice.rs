//! A notice and where it goes: who it is posted as ([`Persona`]), what it says
//! ([`Notice`]), and the owner's routing of each priority to the notifiers
//! ([`Routing`]). The runner's handle that writes notices to the outbox is
//! [`super::notices`]; the words of each are [`super::text`].
//!
//! What it must never do: store or send anything; these are values.

use chrono::Utc;

use crate::core::outbox::{NewOutgoing, Priority};

/// Who a message is posted as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persona {
    Orchestrator,
    Worker,
}

impl Persona {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Orchestrator => "orchestrator",
            Self::Worker => "worker",
        }
    }
}

/// One thing to tell the owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub priority: Priority,
    pub persona: Persona,
    pub task_gid: Option<String>,
    pub run_id: Option<i64>,
    /// Markdown.
    pub body: String,
}

impl Notice {
    /// A notice from the orchestrator about task `gid` (and run `run_id`).
    pub fn orchestrator(
        priority: Priority,
        gid: impl Into<String>,
        run_id: Option<i64>,
        body: impl Into<String>,
    ) -> Self {
        Self {
            priority,
            persona: Persona::Orchestrator,
            task_gid: Some(gid.into()),
            run_id,
            body: body.into(),
        }
    }
}

/// The notifier that posts to the Zulip topic.
pub const ZULIP: &str = "zulip";

/// Which notifiers get which priorities. Pure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routing {
    /// Priorities the log writes.
    pub log: Vec<Priority>,
    /// Outbox notifiers (`zulip`, `webhook:NAME`) and the priorities each is sent.
    pub targets: Vec<(String, Vec<Priority>)>,
    /// The owner's full name, for `@**mentions**` in what needs them.
    pub owner: Option<String>,
}

impl Default for Routing {
    /// The log only, for what needs the owner.
    fn default() -> Self {
        Self {
            log: vec![Priority::Urgent, Priority::Action],
            targets: Vec::new(),
            owner: None,
        }
    }
}

impl Routing {
    /// The outbox rows for `notice`, one per notifier it is routed to.
    pub fn route(&self, notice: &Notice, at: chrono::DateTime<Utc>) -> Vec<NewOutgoing> {
        self.targets
            .iter()
            .filter(|(_, priorities)| priorities.contains(&notice.priority))
            .map(|(notifier, _)| NewOutgoing {
                notifier: notifier.clone(),
                persona: Some(notice.persona.as_str().to_string()),
                priority: notice.priority,
                task_gid: notice.task_gid.clone(),
                run_id: notice.run_id,
                body: notice.body.clone(),
                created_at: at,
            })
            .collect()
    }

    /// Whether the log writes `notice`.
    pub fn logs(&self, notice: &Notice) -> bool {
        self.log.contains(&notice.priority)
    }

    /// Whether any notifier but the log is configured.
    pub fn has_targets(&self) -> bool {
        !self.targets.is_empty()
    }
}

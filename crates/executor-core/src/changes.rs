//! What changed in the store since a point, for the console's live updates
//! (docs/design.md §12): the queue's events, the workers' messages and the decisions, each an append-only
//! table with its own increasing id. A [`Cursor`] holds one id per table, so "everything
//! after this cursor" is exact and can be resumed after a reconnect (it is the SSE event id).
//!
//! Pure: the store reads the rows; this module only orders them and moves the cursor.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};

use super::record::{Decision, StoredMessage, TaskEvent};

/// The last id seen of each table: events, messages, decisions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    pub event: i64,
    pub message: i64,
    pub decision: i64,
}

/// A cursor that is not three dot-separated ids.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("not a change cursor (three ids, `EVENT.MESSAGE.DECISION`): {0:?}")]
pub struct BadCursor(pub String);

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.event, self.message, self.decision)
    }
}

impl FromStr for Cursor {
    type Err = BadCursor;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadCursor(text.to_string());
        let mut ids = text.trim().split('.').map(|p| p.parse::<i64>());
        let (Some(Ok(event)), Some(Ok(message)), Some(Ok(decision)), None) =
            (ids.next(), ids.next(), ids.next(), ids.next())
        else {
            return Err(bad());
        };
        if event < 0 || message < 0 || decision < 0 {
            return Err(bad());
        }
        Ok(Cursor {
            event,
            message,
            decision,
        })
    }
}

/// The rows after a cursor, as the store read them (each in id order).
#[derive(Debug, Clone, Default)]
pub struct Changes {
    pub events: Vec<TaskEvent>,
    pub messages: Vec<StoredMessage>,
    pub decisions: Vec<Decision>,
}

/// One change, as the console sends it.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A task moved (or was added or updated).
    Task(TaskEvent),
    /// A worker's line.
    Line(StoredMessage),
    /// A decision was made (an escalation waits for the owner when `decision` is `escalate`).
    Decision(Decision),
}

impl Change {
    pub fn at(&self) -> DateTime<Utc> {
        match self {
            Change::Task(e) => e.at,
            Change::Line(m) => m.at,
            Change::Decision(d) => d.at,
        }
    }

    /// The SSE event name.
    pub fn name(&self) -> &'static str {
        match self {
            Change::Task(_) => "task",
            Change::Line(_) => "line",
            Change::Decision(_) => "decision",
        }
    }
}

/// The changes in the order they happened (by time, ties in table order), each with the
/// cursor that resumes right after it. Every row read is sent, so the final cursor is past
/// every row of `changes`, whatever the order.
pub fn ordered(from: Cursor, changes: Changes) -> Vec<(Cursor, Change)> {
    let mut all: Vec<Change> = changes
        .events
        .into_iter()
        .map(Change::Task)
        .chain(changes.messages.into_iter().map(Change::Line))
        .chain(changes.decisions.into_iter().map(Change::Decision))
        .collect();
    // A stable sort keeps each table's id order among equal times.
    all.sort_by_key(Change::at);
    let mut cursor = from;
    all.into_iter()
        .map(|change| {
            match &change {
                Change::Task(e) => cursor.event = cursor.event.max(e.id),
                Change::Line(m) => cursor.message = cursor.message.max(m.id),
                Change::Decision(d) => cursor.decision = cursor.decision.max(d.id),
            }
            (cursor, change)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(secs: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 1, 10, 0, secs).unwrap()
    }

    fn event(id: i64, secs: u32) -> TaskEvent {
        TaskEvent {
            id,
            task_gid: "T-1".into(),
            run_id: Some(1),
            at: at(secs),
            kind: "go".into(),
            from_status: Some("for_review".into()),
            to_status: Some("approved".into()),
            actor: "owner".into(),
            detail: None,
        }
    }

    fn line(id: i64, secs: u32) -> StoredMessage {
        StoredMessage {
            id,
            run_id: 1,
            task_gid: "T-1".into(),
            at: at(secs),
            source: "worker".into(),
            tag: "STATUS".into(),
            kind: "working".into(),
            args: "{}".into(),
            text: format!("line {id}"),
            line: format!("[STATUS:working] line {id}"),
        }
    }

    #[test]
    fn a_cursor_reads_back_what_it_writes_and_refuses_anything_else() {
        let cursor = Cursor {
            event: 12,
            message: 340,
            decision: 7,
        };
        assert_eq!(cursor.to_string(), "12.340.7");
        assert_eq!("12.340.7".parse::<Cursor>(), Ok(cursor));
        for bad in ["", "1.2", "1.2.3.4", "a.b.c", "1.-2.3", "1..3"] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn changes_come_in_time_order_each_with_the_cursor_past_it() {
        let from = Cursor {
            event: 4,
            message: 9,
            decision: 2,
        };
        let changes = Changes {
            events: vec![event(5, 2)],
            messages: vec![line(10, 1), line(11, 3)],
            decisions: vec![],
        };
        let out = ordered(from, changes);
        let ids: Vec<String> = out.iter().map(|(c, _)| c.to_string()).collect();
        assert_eq!(ids, ["4.10.2", "5.10.2", "5.11.2"]);
        let names: Vec<&str> = out.iter().map(|(_, c)| c.name()).collect();
        assert_eq!(names, ["line", "task", "line"]);
    }

    #[test]
    fn lines_of_one_instant_keep_their_id_order() {
        let changes = Changes {
            messages: vec![line(1, 5), line(2, 5), line(3, 5)],
            ..Changes::default()
        };
        let out = ordered(Cursor::default(), changes);
        let ids: Vec<i64> = out.iter().map(|(c, _)| c.message).collect();
        assert_eq!(ids, [1, 2, 3]);
    }
}

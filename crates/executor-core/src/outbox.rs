//! The outbox, as data: messages for the owner (Zulip posts, webhook and other notifier
//! calls) written to the store first and delivered from there, so a message survives a
//! crash, a restart or a chat service that is down, and each notifier delivers its messages
//! one at a time in the order they were written. Beside it the backoff between attempts.
//!
//! Pure types and arithmetic: nothing here performs I/O or reads the clock; the store keeps
//! the rows (`executor_outbox`, migration 8) and the notifiers deliver them.
//!
//! What it must never do: hold a secret. A body is the message text only, never a token, a
//! webhook URL or a header; a recorded error is the caller's redacted summary of what went
//! wrong, never a raw response or request that could carry a credential.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How much a message matters to the owner, which decides how loudly a notifier passes it on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// Something is broken or waiting on the owner right now.
    Urgent,
    /// The owner has something to do (an escalation to answer, a PR to review).
    Action,
    /// For the record; nothing to do.
    Info,
}

impl Priority {
    pub const ALL: [Priority; 3] = [Priority::Urgent, Priority::Action, Priority::Info];

    /// The name as stored and written in the config: `urgent`, `action` or `info`.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Urgent => "urgent",
            Priority::Action => "action",
            Priority::Info => "info",
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Priority {
    type Err = UnknownPriority;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        Priority::ALL
            .into_iter()
            .find(|p| p.as_str() == text)
            .ok_or_else(|| UnknownPriority(text.to_string()))
    }
}

/// A priority name that is not one of the three.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("unknown priority `{0}` (known: urgent, action, info)")]
pub struct UnknownPriority(pub String);

/// A message about to be written to the outbox.
#[derive(Clone, Debug, PartialEq)]
pub struct NewOutgoing {
    /// Which notifier delivers it: `zulip`, `webhook:ops`, `slack:team`, ...
    pub notifier: String,
    /// Who speaks, for Zulip posts: `orchestrator` or `worker`.
    pub persona: Option<String>,
    pub priority: Priority,
    pub task_gid: Option<String>,
    pub run_id: Option<i64>,
    /// The message text (Markdown). Never a secret.
    pub body: String,
    /// When it was written; also when its first attempt is due.
    pub created_at: DateTime<Utc>,
}

/// One row of the outbox (`executor_outbox`), delivered or not.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outgoing {
    pub id: i64,
    pub notifier: String,
    pub persona: Option<String>,
    pub priority: Priority,
    pub task_gid: Option<String>,
    pub run_id: Option<i64>,
    pub body: String,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub created_at: DateTime<Utc>,
    /// Failed attempts so far.
    pub attempts: i64,
    /// Not tried again before this.
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub next_attempt_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serde_utc::optional")]
    pub delivered_at: Option<DateTime<Utc>>,
    /// What went wrong the last time (redacted by the notifier).
    pub last_error: Option<String>,
    /// Who claimed it for delivery and has not let go yet (`host:pid:start`, see
    /// [`crate::lease::Holder`]), as the row stood when it was read: a claim never let
    /// go means a delivery may have been made that was never recorded.
    pub claimed_by: Option<String>,
    #[serde(serialize_with = "crate::time::serde_utc::optional")]
    pub claimed_until: Option<DateTime<Utc>>,
}

/// What one notifier still has to deliver, for `executor status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OutboxBacklog {
    pub notifier: String,
    /// Messages not delivered yet.
    pub undelivered: i64,
    /// When the oldest of them (the head of the line) was written.
    #[serde(serialize_with = "crate::time::serde_utc::optional")]
    pub oldest: Option<DateTime<Utc>>,
    /// Failed attempts of the oldest.
    pub attempts: i64,
    /// The last error of the oldest.
    pub last_error: Option<String>,
}

/// The wait before attempt `failures + 1` after `failures` failed ones: `base * 2^(failures
/// - 1)`, capped at `max`: `base`, `2 * base`, `4 * base`, ... No wait when nothing failed yet.
/// Saturates at `max` for any `failures`, however large; never overflows.
pub fn retry_delay(failures: u32, base: Duration, max: Duration) -> Duration {
    let mut delay = if failures == 0 { Duration::ZERO } else { base };
    // At most ~95 rounds: a non-zero delay passes any `max` after that many doublings.
    for _ in 1..failures {
        if delay >= max || delay.is_zero() {
            break;
        }
        delay = delay.saturating_mul(2);
    }
    delay.min(max)
}

/// The invisible mark around an outbox id in a post: U+2063 (invisible separator) on both
/// sides, the id's bits between them as U+200B (0) and U+200C (1), zero-width characters
/// Zulip keeps in the raw Markdown and shows as nothing.
const MARK_EDGE: char = '\u{2063}';
const MARK_ZERO: char = '\u{200B}';
const MARK_ONE: char = '\u{200C}';

/// The hidden mark executor appends to its post of outbox row `id`, so that after a crash
/// between posting and recording it the post can be found in the topic
/// ([`find_post_mark`]) instead of being made a second time.
pub fn post_mark(id: i64) -> String {
    let bits = format!("{:b}", id.max(0));
    let mut mark = String::with_capacity(bits.len() * 3 + 6);
    mark.push(MARK_EDGE);
    mark.extend(
        bits.chars()
            .map(|b| if b == '1' { MARK_ONE } else { MARK_ZERO }),
    );
    mark.push(MARK_EDGE);
    mark
}

/// The outbox id a post's raw text carries in its hidden mark, if it carries one (the last,
/// should there be several).
pub fn find_post_mark(content: &str) -> Option<i64> {
    let (before, _) = content.rsplit_once(MARK_EDGE)?;
    let (_, bits) = before.rsplit_once(MARK_EDGE)?;
    if bits.is_empty() || bits.chars().count() > 63 {
        return None;
    }
    bits.chars().try_fold(0i64, |id, c| match c {
        MARK_ZERO => Some(id << 1),
        MARK_ONE => Some((id << 1) | 1),
        _ => None,
    })
}

/// `content` without the hidden mark at its end, if it has one.
pub fn without_post_mark(content: &str) -> &str {
    let Some(body) = content.strip_suffix(MARK_EDGE) else {
        return content;
    };
    match body.rsplit_once(MARK_EDGE) {
        Some((text, bits)) if bits.chars().all(|c| c == MARK_ZERO || c == MARK_ONE) => text,
        _ => content,
    }
}

/// Whether the claim on outbox row `head` belongs to a process on this host that is gone,
/// so `me` may take it over at once instead of waiting for it to run out: the same rule as
/// a run's lease ([`crate::lease::claim`]). The dead holder's id when so; `None` for
/// no claim, an expired one, ours, a live holder's, or another host's.
pub fn dead_claim(
    head: &Outgoing,
    me: &crate::lease::Holder,
    now: DateTime<Utc>,
    alive: impl Fn(&crate::lease::Holder) -> bool,
) -> Option<String> {
    let (Some(holder), Some(until)) = (&head.claimed_by, head.claimed_until) else {
        return None;
    };
    let lease = crate::record::Lease {
        run_id: head.id,
        holder: holder.clone(),
        expires_at: until,
    };
    match crate::lease::claim(Some(&lease), me, now, alive) {
        crate::lease::Claim::TakeOver { from } => Some(from),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::Holder;
    use chrono::TimeZone;

    #[test]
    fn a_post_mark_is_invisible_and_read_back() {
        for id in [0, 1, 2, 7, 48_217, i64::MAX] {
            let mark = post_mark(id);
            assert!(mark
                .chars()
                .all(|c| !c.is_alphanumeric() && !c.is_whitespace()));
            assert_eq!(
                find_post_mark(&format!("**Executor** · done{mark}")),
                Some(id)
            );
        }
        assert_eq!(find_post_mark("no mark here"), None);
        assert_eq!(without_post_mark(&format!("done{}", post_mark(5))), "done");
        assert_eq!(without_post_mark("done"), "done");
        assert_eq!(find_post_mark("\u{2063}\u{2063}"), None);
        assert_eq!(find_post_mark("\u{2063}x\u{2063}"), None);
        // The last mark counts: a quoted earlier post does not hide this one's.
        let text = format!("> quoted{}\n\nnew{}", post_mark(3), post_mark(9));
        assert_eq!(find_post_mark(&text), Some(9));
    }

    fn row(claimed_by: Option<&str>, until: i64) -> Outgoing {
        let at = |s: i64| {
            Utc.timestamp_opt(1_800_000_000 + s, 0)
                .single()
                .expect("time")
        };
        Outgoing {
            id: 4,
            notifier: "zulip".into(),
            persona: None,
            priority: Priority::Info,
            task_gid: None,
            run_id: None,
            body: "hi".into(),
            created_at: at(0),
            attempts: 0,
            next_attempt_at: at(0),
            delivered_at: None,
            last_error: None,
            claimed_by: claimed_by.map(str::to_string),
            claimed_until: claimed_by.map(|_| at(until)),
        }
    }

    #[test]
    fn only_a_dead_holder_on_this_host_loses_its_claim_at_once() {
        let now = Utc.timestamp_opt(1_800_000_000, 0).single().expect("time");
        let me = Holder {
            host: "build-1".into(),
            pid: 100,
            start: Some(5),
        };
        let dead = |h: &Holder| h.pid != 200;
        assert_eq!(
            dead_claim(&row(Some("build-1:200:7"), 120), &me, now, dead),
            Some("build-1:200:7".into())
        );
        // Alive, another host, expired, ours or none: nothing to take over.
        let live = |_: &Holder| true;
        assert_eq!(
            dead_claim(&row(Some("build-1:200:7"), 120), &me, now, live),
            None
        );
        assert_eq!(
            dead_claim(&row(Some("build-2:200:7"), 120), &me, now, dead),
            None
        );
        assert_eq!(
            dead_claim(&row(Some("build-1:200:7"), -1), &me, now, dead),
            None
        );
        assert_eq!(dead_claim(&row(Some(&me.id()), 120), &me, now, dead), None);
        assert_eq!(dead_claim(&row(None, 0), &me, now, dead), None);
    }

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn retry_delay_doubles_from_the_base() {
        let delays: Vec<u64> = (1..=6)
            .map(|n| retry_delay(n, 5 * SEC, 3600 * SEC).as_secs())
            .collect();
        assert_eq!(delays, [5, 10, 20, 40, 80, 160]);
        assert_eq!(retry_delay(0, 5 * SEC, 3600 * SEC), Duration::ZERO);
    }

    #[test]
    fn retry_delay_is_capped() {
        assert_eq!(retry_delay(5, 10 * SEC, 60 * SEC), 60 * SEC);
        assert_eq!(retry_delay(3, 10 * SEC, 40 * SEC), 40 * SEC);
        assert_eq!(retry_delay(4, 10 * SEC, 40 * SEC), 40 * SEC);
    }

    #[test]
    fn retry_delay_saturates_for_huge_counts() {
        let max = 15 * 60 * SEC;
        for n in [31, 32, 33, 64, 1_000, u32::MAX] {
            assert_eq!(retry_delay(n, 30 * SEC, max), max, "{n}");
        }
        assert_eq!(
            retry_delay(u32::MAX, Duration::MAX, Duration::MAX),
            Duration::MAX
        );
        assert_eq!(retry_delay(u32::MAX, Duration::ZERO, max), Duration::ZERO);
        // A tiny base still doubles its way up, past 2^32 of itself.
        let nanos = Duration::from_nanos(1);
        assert_eq!(retry_delay(34, nanos, max), Duration::from_nanos(1 << 33));
        assert_eq!(retry_delay(u32::MAX, nanos, max), max);
    }

    #[test]
    fn priority_round_trips() {
        for priority in Priority::ALL {
            assert_eq!(priority.as_str().parse::<Priority>(), Ok(priority));
            assert_eq!(priority.to_string(), priority.as_str());
            let json = serde_json::to_string(&priority).expect("serialize");
            assert_eq!(json, format!("\"{}\"", priority.as_str()));
            let back: Priority = serde_json::from_str(&json).expect("deserialize");
            assert_eq!(back, priority);
        }
        assert_eq!(" urgent ".parse::<Priority>(), Ok(Priority::Urgent));
    }

    #[test]
    fn a_bad_priority_is_named_with_the_allowed_ones() {
        let err = "loud".parse::<Priority>().expect_err("not a priority");
        assert_eq!(err, UnknownPriority("loud".into()));
        let message = err.to_string();
        for part in ["loud", "urgent", "action", "info"] {
            assert!(message.contains(part), "{message}");
        }
        assert!("Urgent".parse::<Priority>().is_err(), "case matters");
        assert!(serde_json::from_str::<Priority>("\"loud\"").is_err());
    }
}

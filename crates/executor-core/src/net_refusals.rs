//! Network refusals: every connection the wall's proxy refused a worker, kept with its run
//! as one row per host and port (how many times, first and last), and the pure choices
//! around them: when a worker's tally is written (coalesced: a worker retrying in a loop
//! asks for a write every few seconds, never one per refusal), which refusals are new to
//! the run (the owner is told of each once), and the `[sandbox] allow` line that would
//! permit them.
//!
//! The proxy (the edge) reports each refusal as it happens; [`Tally`] holds them; the edge
//! asks it for a [`Write`] on its own clock and performs it (docs/design.md §11).
//!
//! What it must never do: keep anything of a request but its host and port (no path,
//! header or credential reaches here), grow without bound, or ask for a write per refusal.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

/// How long refusals are gathered before they are written: a worker hammering a refused
/// host costs one write every few seconds however fast it retries, and the owner hears of
/// a burst of refusals (an agent trying each of its hosts in turn) in one notice.
pub const WRITE_EVERY: Duration = Duration::seconds(5);

/// The most hosts and ports recorded for one run; refusals of any further one are only
/// counted ([`Tally::past_cap`]), so a worker scanning ports cannot fill the store.
pub const MAX_TARGETS: usize = 64;

/// Why the proxy refused a `CONNECT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Refused {
    /// A host and port no allow entry names.
    NotAllowed,
    /// A port of this machine, which the proxy never reaches, and which is not forwarded
    /// into the wall either (an allow entry `127.0.0.1:PORT` forwards it).
    Loopback,
    /// A port of this machine that is forwarded into the wall already, asked for through
    /// the proxy instead of directly: the worker's client ignores `NO_PROXY`. No allow
    /// line changes that.
    LoopbackForwarded,
}

impl Refused {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::NotAllowed => "not_allowed",
            Refused::Loopback => "loopback",
            Refused::LoopbackForwarded => "loopback_forwarded",
        }
    }

    /// Reads the stored word; a word this version does not know is read as `not_allowed`,
    /// the refusal an allow entry answers.
    pub fn from_column(word: &str) -> Self {
        match word {
            "loopback" => Refused::Loopback,
            "loopback_forwarded" => Refused::LoopbackForwarded,
            _ => Refused::NotAllowed,
        }
    }
}

/// A host and port as the proxy judged it: the host in its one spelling.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fmt_host_port(f, &self.host, self.port)
    }
}

fn fmt_host_port(f: &mut std::fmt::Formatter<'_>, host: &str, port: u16) -> std::fmt::Result {
    // An IPv6 address is written bracketed, as an allow entry takes it.
    if host.contains(':') {
        write!(f, "[{host}]:{port}")
    } else {
        write!(f, "{host}:{port}")
    }
}

/// One row of `executor_net_refusals`: what the wall refused the workers of one run, for
/// one host and port. In a [`Write`] the count and times are those since the last write,
/// which the store adds to the row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetRefusal {
    pub run_id: i64,
    pub task_gid: String,
    pub host: String,
    pub port: u16,
    pub kind: Refused,
    pub count: u64,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub first_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub last_at: DateTime<Utc>,
}

impl NetRefusal {
    pub fn target(&self) -> Target {
        Target {
            host: self.host.clone(),
            port: self.port,
        }
    }

    /// `CONNECT example.org:443 (12 times)`.
    pub fn line(&self) -> String {
        let times = match self.count {
            1 => "once".to_string(),
            n => format!("{n} times"),
        };
        let how = match self.kind {
            Refused::NotAllowed => "",
            Refused::Loopback => ", a port of this machine",
            Refused::LoopbackForwarded => {
                ", a forwarded port of this machine asked for through the proxy"
            }
        };
        format!("CONNECT {} ({times}{how})", self.target())
    }
}

/// What the wall refused one target since the last write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counted {
    kind: Refused,
    count: u64,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
}

impl Counted {
    fn add(&mut self, at: DateTime<Utc>) {
        self.count = self.count.saturating_add(1);
        self.first = self.first.min(at);
        self.last = self.last.max(at);
    }
}

/// One worker's refusals, held between writes.
#[derive(Debug, Clone)]
pub struct Tally {
    run_id: i64,
    task_gid: String,
    /// The run's targets the store holds already (from earlier workers, or this one's
    /// earlier writes): the owner was told of them.
    recorded: BTreeSet<Target>,
    /// Refusals since the last write.
    pending: BTreeMap<Target, Counted>,
    /// Everything this worker was refused, for its end.
    worker: BTreeMap<Target, Counted>,
    /// Refusals of targets past [`MAX_TARGETS`]: counted, never recorded one by one.
    past_cap: u64,
}

/// A write the tally asks for: `rows` added to the run's rows, and `new`, the rows the run
/// had none of before (the owner is told of those, once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub rows: Vec<NetRefusal>,
    pub new: Vec<NetRefusal>,
}

impl Tally {
    /// The tally of a worker of run `run_id` (task `task_gid`), whose run has `recorded`
    /// refused already.
    pub fn new(
        run_id: i64,
        task_gid: impl Into<String>,
        recorded: impl IntoIterator<Item = Target>,
    ) -> Self {
        Self {
            run_id,
            task_gid: task_gid.into(),
            recorded: recorded.into_iter().collect(),
            pending: BTreeMap::new(),
            worker: BTreeMap::new(),
            past_cap: 0,
        }
    }

    /// The proxy refused `target` at `at`.
    pub fn refused(&mut self, target: Target, kind: Refused, at: DateTime<Utc>) {
        let known = self.recorded.contains(&target) || self.pending.contains_key(&target);
        if !known && self.recorded.len() + self.new_pending() >= MAX_TARGETS {
            self.past_cap = self.past_cap.saturating_add(1);
            return;
        }
        let fresh = Counted {
            kind,
            count: 1,
            first: at,
            last: at,
        };
        for counts in [&mut self.pending, &mut self.worker] {
            counts
                .entry(target.clone())
                .and_modify(|c| c.add(at))
                .or_insert(fresh);
        }
    }

    /// Pending targets the run has no row of yet.
    fn new_pending(&self) -> usize {
        self.pending
            .keys()
            .filter(|t| !self.recorded.contains(t))
            .count()
    }

    /// The write due at `now`, if one is: the oldest refusal not written yet is at least
    /// [`WRITE_EVERY`] old. `ending`: the worker ended, and what is pending is written
    /// whatever the time.
    pub fn take(&mut self, now: DateTime<Utc>, ending: bool) -> Option<Write> {
        let oldest = self.pending.values().map(|c| c.first).min()?;
        if !(ending || now - oldest >= WRITE_EVERY) {
            return None;
        }
        let mut rows: Vec<NetRefusal> = std::mem::take(&mut self.pending)
            .into_iter()
            .map(|(target, counted)| self.row(target, counted))
            .collect();
        // In the order they happened, as the owner reads them.
        rows.sort_by_key(|row| (row.first_at, row.target()));
        let new: Vec<NetRefusal> = rows
            .iter()
            .filter(|row| !self.recorded.contains(&row.target()))
            .cloned()
            .collect();
        self.recorded.extend(new.iter().map(NetRefusal::target));
        Some(Write { rows, new })
    }

    /// A write that could not be stored, held again, so its refusals go with the next.
    pub fn restore(&mut self, write: Write) {
        for row in write.new {
            self.recorded.remove(&row.target());
        }
        for row in write.rows {
            let counted = Counted {
                kind: row.kind,
                count: row.count,
                first: row.first_at,
                last: row.last_at,
            };
            self.pending
                .entry(row.target())
                .and_modify(|c| {
                    c.count = c.count.saturating_add(counted.count);
                    c.first = c.first.min(counted.first);
                    c.last = c.last.max(counted.last);
                })
                .or_insert(counted);
        }
    }

    /// Everything this worker was refused, one row per target.
    pub fn this_worker(&self) -> Vec<NetRefusal> {
        let mut rows: Vec<NetRefusal> = self
            .worker
            .iter()
            .map(|(target, counted)| self.row(target.clone(), *counted))
            .collect();
        rows.sort_by_key(|row| (row.first_at, row.target()));
        rows
    }

    /// Refusals of targets past [`MAX_TARGETS`], which no row holds.
    pub fn past_cap(&self) -> u64 {
        self.past_cap
    }

    fn row(&self, target: Target, counted: Counted) -> NetRefusal {
        NetRefusal {
            run_id: self.run_id,
            task_gid: self.task_gid.clone(),
            host: target.host,
            port: target.port,
            kind: counted.kind,
            count: counted.count,
            first_at: counted.first,
            last_at: counted.last,
        }
    }
}

/// The allow entry that would permit `row`: the host and port itself; `127.0.0.1:PORT` for
/// a port of this machine (an entry the wall forwards into the worker's loopback, which
/// the worker reaches directly, not through the proxy); none for a port forwarded already.
pub fn allow_entry(row: &NetRefusal) -> Option<String> {
    match row.kind {
        Refused::NotAllowed => Some(row.target().to_string()),
        Refused::Loopback => Some(format!("127.0.0.1:{}", row.port)),
        Refused::LoopbackForwarded => None,
    }
}

/// The `[sandbox] allow` line that would permit `refused`, keeping the owner's `configured`
/// entries first, as the config file takes it: `allow = ["pypi.org:443", "example.org:443"]`.
/// `None` when no entry would change anything.
pub fn allow_line<'a>(
    configured: &[String],
    refused: impl IntoIterator<Item = &'a NetRefusal>,
) -> Option<String> {
    let mut added: Vec<String> = Vec::new();
    for entry in refused.into_iter().filter_map(allow_entry) {
        if !configured.contains(&entry) && !added.contains(&entry) {
            added.push(entry);
        }
    }
    if added.is_empty() {
        return None;
    }
    let entries: Vec<String> = configured
        .iter()
        .chain(&added)
        // A TOML basic string: a host never holds a quote or a backslash, but an entry
        // that did would still be written as one string.
        .map(|entry| format!("\"{}\"", entry.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    Some(format!("allow = [{}]", entries.join(", ")))
}

/// What the owner is told of `refused` (the run's new refusals), in one sentence with the
/// allow line: `the wall refused the worker's network: CONNECT example.org:443 (3 times);
/// to allow it, set in [sandbox]: allow = ["example.org:443"]`.
pub fn sentence(configured: &[String], refused: &[NetRefusal]) -> String {
    let what: Vec<String> = refused.iter().map(NetRefusal::line).collect();
    let mut text = format!("the wall refused the worker's network: {}", what.join(", "));
    if let Some(line) = allow_line(configured, refused) {
        text.push_str(&format!("; to allow it, set in [sandbox]: {line}"));
    }
    if refused
        .iter()
        .any(|row| row.kind == Refused::LoopbackForwarded)
    {
        text.push_str(
            "; a forwarded port is reached directly at 127.0.0.1, not through the proxy \
             (the worker's client ignores NO_PROXY)",
        );
    }
    text
}

/// What a worker the watchdog stopped was doing instead of its work, as far as its network
/// tells: the retries of its model API that were all it reported since its last work
/// (`retries` of them, the last saying `last`), and what the wall refused it. `None` when
/// neither says anything.
pub fn stalled(
    retries: u64,
    last: Option<&str>,
    refused: &[NetRefusal],
    configured: &[String],
) -> Option<String> {
    let retried = (retries > 0).then(|| {
        let times = if retries == 1 {
            "once".to_string()
        } else {
            format!("{retries} times")
        };
        match last {
            Some(last) => {
                format!("the agent only reported retrying its network ({times}; the last: {last})")
            }
            None => format!("the agent only reported retrying its network ({times})"),
        }
    });
    let refused = (!refused.is_empty()).then(|| sentence(configured, refused));
    match (retried, refused) {
        (Some(retried), Some(refused)) => Some(format!("{retried}, and {refused}")),
        (one, other) => one.or(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_790_000_000 + secs, 0).expect("a time")
    }

    fn target(host: &str, port: u16) -> Target {
        Target {
            host: host.into(),
            port,
        }
    }

    fn tally() -> Tally {
        Tally::new(7, "T-1", [])
    }

    #[test]
    fn nothing_refused_asks_for_no_write() {
        assert_eq!(tally().take(at(0), true), None);
    }

    #[test]
    fn refusals_are_gathered_for_a_few_seconds_then_written_as_new() {
        let mut t = tally();
        t.refused(target("example.org", 443), Refused::NotAllowed, at(0));
        assert_eq!(t.take(at(4), false), None);
        let write = t.take(at(5), false).expect("a write");
        assert_eq!(write.rows.len(), 1);
        assert_eq!(write.new, write.rows);
        let row = &write.rows[0];
        assert_eq!(
            (row.run_id, row.task_gid.as_str(), row.count),
            (7, "T-1", 1)
        );
        assert_eq!((row.first_at, row.last_at), (at(0), at(0)));
    }

    #[test]
    fn a_worker_retrying_in_a_loop_is_written_every_few_seconds_and_told_once() {
        let mut t = tally();
        let (mut writes, mut told) = (0, 0);
        // 10,000 refusals over 20 seconds, the edge looking every second.
        for second in 0..20 {
            for _ in 0..500 {
                t.refused(target("example.org", 443), Refused::NotAllowed, at(second));
            }
            if let Some(write) = t.take(at(second), false) {
                writes += 1;
                told += write.new.len();
                assert_eq!(write.rows.len(), 1);
            }
        }
        let last = t
            .take(at(20), true)
            .expect("the end writes what is pending");
        assert!(last.new.is_empty(), "told once");
        assert_eq!(writes, 3, "seconds 5, 11 and 17");
        assert_eq!(told, 1);
        let whole = t.this_worker();
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].count, 10_000);
        assert_eq!((whole[0].first_at, whole[0].last_at), (at(0), at(19)));
    }

    #[test]
    fn within_the_interval_nothing_is_written_until_the_worker_ends() {
        let mut t = tally();
        t.refused(target("a.example", 443), Refused::NotAllowed, at(0));
        assert!(t.take(at(5), false).is_some());
        t.refused(target("a.example", 443), Refused::NotAllowed, at(6));
        t.refused(target("b.example", 443), Refused::NotAllowed, at(7));
        assert_eq!(t.take(at(8), false), None);
        let end = t.take(at(8), true).expect("the end");
        assert_eq!(
            end.rows.iter().map(|r| r.host.as_str()).collect::<Vec<_>>(),
            ["a.example", "b.example"],
            "in the order they happened"
        );
        assert_eq!(
            end.new.iter().map(|r| r.host.as_str()).collect::<Vec<_>>(),
            ["b.example"]
        );
    }

    #[test]
    fn what_an_earlier_worker_of_the_run_was_refused_is_not_new() {
        let mut t = Tally::new(7, "T-1", [target("example.org", 443)]);
        t.refused(target("example.org", 443), Refused::NotAllowed, at(0));
        let write = t.take(at(0), true).expect("a write");
        assert_eq!(write.rows.len(), 1, "the count is still added");
        assert!(write.new.is_empty());
    }

    #[test]
    fn targets_past_the_cap_are_only_counted() {
        let mut t = tally();
        for port in 1..=(MAX_TARGETS as u16 + 10) {
            t.refused(target("scan.example", port), Refused::NotAllowed, at(0));
        }
        // A target held already is still counted past the cap.
        t.refused(target("scan.example", 1), Refused::NotAllowed, at(1));
        let write = t.take(at(1), true).expect("a write");
        assert_eq!(write.rows.len(), MAX_TARGETS);
        assert_eq!(t.past_cap(), 10);
        assert_eq!(write.rows[0].count, 2);
        t.refused(target("other.example", 443), Refused::NotAllowed, at(2));
        assert_eq!(t.past_cap(), 11, "the run's rows count toward the cap");
    }

    #[test]
    fn a_write_that_failed_goes_with_the_next() {
        let mut t = tally();
        t.refused(target("example.org", 443), Refused::NotAllowed, at(0));
        let failed = t.take(at(5), false).expect("a write");
        t.restore(failed);
        // Held again, it is due at once: its refusals are old enough.
        t.refused(target("example.org", 443), Refused::NotAllowed, at(6));
        let write = t.take(at(6), false).expect("a write");
        assert_eq!(write.rows[0].count, 2);
        assert_eq!(
            (write.rows[0].first_at, write.rows[0].last_at),
            (at(0), at(6))
        );
        assert_eq!(write.new.len(), 1, "still new: the owner was not told");
    }

    fn row(host: &str, port: u16, kind: Refused, count: u64) -> NetRefusal {
        NetRefusal {
            run_id: 7,
            task_gid: "T-1".into(),
            host: host.into(),
            port,
            kind,
            count,
            first_at: at(0),
            last_at: at(0),
        }
    }

    #[test]
    fn the_allow_line_keeps_the_owners_entries_and_adds_what_was_refused() {
        let refused = [
            row("example.org", 443, Refused::NotAllowed, 3),
            row("localhost", 5432, Refused::Loopback, 1),
            row("127.0.0.1", 4000, Refused::LoopbackForwarded, 1),
            row("2001:db8::1", 443, Refused::NotAllowed, 1),
            row("pypi.org", 443, Refused::NotAllowed, 1),
        ];
        let configured = vec!["pypi.org:443".to_string()];
        assert_eq!(
            allow_line(&configured, &refused).as_deref(),
            Some(
                r#"allow = ["pypi.org:443", "example.org:443", "127.0.0.1:5432", "[2001:db8::1]:443"]"#
            )
        );
        assert_eq!(
            allow_line(&[], &refused[..1]).as_deref(),
            Some(r#"allow = ["example.org:443"]"#)
        );
        assert_eq!(allow_line(&[], &refused[2..3]), None);
    }

    #[test]
    fn the_allow_line_is_what_the_config_reads() {
        let line =
            allow_line(&[], &[row("example.org", 443, Refused::NotAllowed, 1)]).expect("a line");
        let value: toml::Value = toml::from_str(&line).expect("TOML");
        assert_eq!(value["allow"][0].as_str(), Some("example.org:443"));
    }

    #[test]
    fn the_sentence_names_each_refusal_and_the_line() {
        let text = sentence(&[], &[row("example.org", 443, Refused::NotAllowed, 3)]);
        assert_eq!(
            text,
            r#"the wall refused the worker's network: CONNECT example.org:443 (3 times); to allow it, set in [sandbox]: allow = ["example.org:443"]"#
        );
        let forwarded = sentence(
            &["127.0.0.1:4000".into()],
            &[row("127.0.0.1", 4000, Refused::LoopbackForwarded, 1)],
        );
        assert!(!forwarded.contains("allow ="), "{forwarded}");
        assert!(forwarded.contains("NO_PROXY"), "{forwarded}");
        assert!(forwarded.contains("(once, a forwarded port"), "{forwarded}");
    }

    #[test]
    fn a_stalled_worker_is_said_to_have_only_retried_and_been_refused() {
        let refused = [row("example.org", 443, Refused::NotAllowed, 12)];
        assert_eq!(
            stalled(
                9,
                Some("Reconnecting... waiting for network"),
                &refused,
                &[]
            )
            .as_deref(),
            Some(
                r#"the agent only reported retrying its network (9 times; the last: Reconnecting... waiting for network), and the wall refused the worker's network: CONNECT example.org:443 (12 times); to allow it, set in [sandbox]: allow = ["example.org:443"]"#
            )
        );
        assert_eq!(
            stalled(1, None, &[], &[]).as_deref(),
            Some("the agent only reported retrying its network (once)")
        );
        assert!(stalled(0, None, &refused, &[]).is_some_and(|t| t.starts_with("the wall refused")));
        assert_eq!(stalled(0, Some("x"), &[], &[]), None);
    }

    #[test]
    fn the_stored_word_reads_back() {
        for kind in [
            Refused::NotAllowed,
            Refused::Loopback,
            Refused::LoopbackForwarded,
        ] {
            assert_eq!(Refused::from_column(kind.as_str()), kind);
        }
    }
}

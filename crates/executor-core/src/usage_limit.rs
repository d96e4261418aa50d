//! Usage limits: whether a worker ended because its agent's plan or API allowance ran out
//! (Claude Code's "usage limit reached … resets …", Codex's `usage_limit_reached`, a model
//! API's 429), and when the allowance comes back. A worker that ended so did not fail: the
//! run waits for the reset and carries on in its session, and no new worker of that agent
//! starts before it (the pause, [`AgentPause`], is stored so a restart keeps it).
//!
//! Pure: the caller says what time it is, and in which offset from UTC the agent's clock
//! times ("resets 3pm", "try again at 7:58 PM") are written (the agents print them in the
//! machine's local time). What it must never do: take a worker's own words (its result text
//! on a success, its assistant text) for a limit, or pause without an end.

use std::sync::OnceLock;

use chrono::{DateTime, Duration, FixedOffset, NaiveDate, NaiveTime, TimeZone, Utc};
use regex::Regex;
use serde::Serialize;

/// What a worker's end says, as far as limits go.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Signals<'a> {
    /// The HTTP status of the model API error that ended it (Claude's `api_error_status`).
    pub api_status: Option<u16>,
    /// The agent said in a structured event that a limit refused it (Claude's
    /// `rate_limit_event` with `status: "rejected"`).
    pub rejected: bool,
    /// The reset the agent gave in a structured field, in seconds since the epoch
    /// (Claude's `rate_limit_info.resetsAt`).
    pub reported_reset: Option<i64>,
    /// The agent's error words: its result text when it ended in error, its error events,
    /// the last of its stderr.
    pub texts: Vec<&'a str>,
}

/// A worker's agent hit a limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageLimit {
    /// `claude`, `codex`, `pi` or `command`.
    pub agent: String,
    /// When the agent said its allowance comes back; `None` when it did not say.
    #[serde(serialize_with = "crate::time::serde_utc::optional")]
    pub resets_at: Option<DateTime<Utc>>,
    /// The agent's own words (one line, at most 300 characters).
    pub message: String,
}

/// The longest pause a reset may ask for (a weekly limit, and a day to spare): a reset
/// further out is taken as misread.
pub const LONGEST_PAUSE_DAYS: i64 = 8;

impl UsageLimit {
    /// When the run may go on: the agent's reset, else `backoff` from `now` (also when the
    /// reset given is already past, which a stale message says).
    pub fn until(&self, backoff: std::time::Duration, now: DateTime<Utc>) -> DateTime<Utc> {
        let backoff = Duration::from_std(backoff).unwrap_or(Duration::minutes(30));
        match self.resets_at {
            Some(at) if at > now => at.min(now + Duration::days(LONGEST_PAUSE_DAYS)),
            _ => now + backoff,
        }
    }

    /// The owner's sentence: `claude hit its usage limit ("…")`.
    pub fn sentence(&self) -> String {
        if self.message.is_empty() {
            format!("{} hit its usage limit", self.agent)
        } else {
            format!("{} hit its usage limit (\"{}\")", self.agent, self.message)
        }
    }
}

/// A stored pause of one agent's workers: none starts before `until`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentPause {
    pub agent: String,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub since: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub until: DateTime<Utc>,
    /// Why, in the owner's words ([`UsageLimit::sentence`]).
    pub reason: String,
    /// The run whose worker met the limit.
    pub run_id: Option<i64>,
    pub task_gid: Option<String>,
}

impl AgentPause {
    /// The owner's sentence, with the end.
    pub fn sentence(&self) -> String {
        format!(
            "no {} worker starts until {} UTC: {}",
            self.agent,
            self.until.format("%Y-%m-%d %H:%M:%S"),
            self.reason
        )
    }
}

/// The pause of `agent` in force at `now`, among `pauses`.
pub fn in_force<'a>(
    pauses: &'a [AgentPause],
    agent: &str,
    now: DateTime<Utc>,
) -> Option<&'a AgentPause> {
    pauses
        .iter()
        .filter(|p| p.agent == agent && p.until > now)
        .max_by_key(|p| p.until)
}

fn regex(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("static regex"))
}

/// Words that say a plan or API limit refused the agent, as the CLIs print them.
fn limit_words() -> &'static Regex {
    static CELL: OnceLock<Regex> = OnceLock::new();
    regex(
        &CELL,
        r"(?i)usage[ _]limit|hit your (?:usage )?limit|(?:session|5-hour|weekly|daily|opus|sonnet) limit reached|limit reached\s*[∙·•|]|out of extra usage|rate[ _]limit[ _](?:error|exceeded|reached)|too many requests|(?:http|status|error|code)\W{0,3}429\b|\(429\)|^\s*429 ",
    )
}

/// Whether the worker's end says a limit stopped it, and when it resets.
pub fn detect(
    agent: &str,
    signals: &Signals<'_>,
    now: DateTime<Utc>,
    local: FixedOffset,
) -> Option<UsageLimit> {
    let worded = signals.texts.iter().find(|t| limit_words().is_match(t));
    let limited = signals.rejected || signals.api_status == Some(429) || worded.is_some();
    if !limited {
        return None;
    }
    let resets_at = signals
        .reported_reset
        .and_then(epoch)
        .or_else(|| signals.texts.iter().find_map(|t| reset_in(t, now, local)));
    let message = worded
        .or_else(|| signals.texts.iter().find(|t| !t.trim().is_empty()))
        .map(|t| one_line(t))
        .unwrap_or_default();
    Some(UsageLimit {
        agent: agent.to_string(),
        resets_at,
        message,
    })
}

fn one_line(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| limit_words().is_match(l))
        .or_else(|| text.lines().find(|l| !l.trim().is_empty()))
        .unwrap_or("")
        .trim();
    if line.chars().count() > 300 {
        format!("{}…", line.chars().take(299).collect::<String>())
    } else {
        line.to_string()
    }
}

fn epoch(seconds: i64) -> Option<DateTime<Utc>> {
    // Milliseconds, where an agent gives them.
    let seconds = if seconds > 100_000_000_000 {
        seconds / 1000
    } else {
        seconds
    };
    Utc.timestamp_opt(seconds, 0).single()
}

/// The reset one text names: an epoch (`…limit reached|1762952400`, `"resets_at":…`), a
/// wait (`"resets_in_seconds":…`, `retry-after: 30`, `try again in 2 days 3 hours`), or a
/// clock time (`resets 3pm`, `try again at 7:58 PM`, `try again at Aug 20, 2026, 7:38 AM`).
pub fn reset_in(text: &str, now: DateTime<Utc>, local: FixedOffset) -> Option<DateTime<Utc>> {
    static EPOCH: OnceLock<Regex> = OnceLock::new();
    static SECONDS: OnceLock<Regex> = OnceLock::new();
    static WAIT: OnceLock<Regex> = OnceLock::new();
    let epoch_re = regex(
        &EPOCH,
        r#"(?i)(?:limit reached\|(\d{9,13})\b|"?resets_?at"?\s*[:=]\s*"?(\d{9,13})\b)"#,
    );
    if let Some(at) = epoch_re.captures(text).and_then(|c| {
        c.get(1)
            .or_else(|| c.get(2))
            .and_then(|m| m.as_str().parse::<i64>().ok())
            .and_then(epoch)
    }) {
        return Some(at);
    }
    let seconds_re = regex(
        &SECONDS,
        r#"(?i)(?:"?resets_in_seconds"?|retry[-_]after(?:[-_]seconds)?|x-ratelimit-reset)"?\s*[:=]?\s*"?(\d{1,9})\b"#,
    );
    if let Some(n) = seconds_re
        .captures(text)
        .and_then(|c| c.get(1)?.as_str().parse::<i64>().ok())
    {
        return Some(now + Duration::seconds(n));
    }
    let wait_re = regex(
        &WAIT,
        r"(?i)(?:try again|retry|resets?) in ((?:\d+\s*(?:days?|hours?|hrs?|minutes?|mins?|seconds?|secs?|[dhms])\b[\s,]*(?:and\s+)?)+)",
    );
    if let Some(wait) = wait_re.captures(text).and_then(|c| c.get(1)) {
        if let Some(d) = wait_of(wait.as_str()) {
            return Some(now + d);
        }
    }
    clock_time(text, now, local)
}

fn wait_of(text: &str) -> Option<Duration> {
    static PART: OnceLock<Regex> = OnceLock::new();
    let part = regex(
        &PART,
        r"(?i)(\d+)\s*(days?|hours?|hrs?|minutes?|mins?|seconds?|secs?|[dhms])\b",
    );
    let mut total = Duration::zero();
    for c in part.captures_iter(text) {
        let n: i64 = c.get(1)?.as_str().parse().ok()?;
        let unit = c.get(2)?.as_str().to_ascii_lowercase();
        total += match unit.chars().next()? {
            'd' => Duration::days(n),
            'h' => Duration::hours(n),
            'm' => Duration::minutes(n),
            _ => Duration::seconds(n),
        };
    }
    (total > Duration::zero()).then_some(total)
}

/// `resets 3pm (Europe/Warsaw)`, `reset at 5pm`, `try again at 7:58 PM`, `try again at Aug
/// 20, 2026, 7:38 AM`: the next such time after `now` (or that date's). A time named in
/// UTC is read in UTC, any other in `local` (the agent prints the machine's zone).
fn clock_time(text: &str, now: DateTime<Utc>, local: FixedOffset) -> Option<DateTime<Utc>> {
    static CLOCK: OnceLock<Regex> = OnceLock::new();
    let re = regex(
        &CLOCK,
        r"(?i)(?:resets?|reset at|try again at|available again at)\s+(?:at\s+)?(?:(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?P<day>\d{1,2}),?\s+(?P<year>\d{4}),?\s+)?(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ampm>[ap]\.?\s?m\.?)?(?:\s*\((?P<tz>[^)]*)\)|\s+(?P<utc>UTC|GMT)\b)?",
    );
    let c = re.captures(text)?;
    let minute: u32 = c.name("m").map_or(Some(0), |m| m.as_str().parse().ok())?;
    let ampm = c
        .name("ampm")
        .map(|m| m.as_str().to_ascii_lowercase().starts_with('p'));
    // A bare number is no time ("resets 5"): a clock time has a colon or am/pm.
    if ampm.is_none() && c.name("m").is_none() {
        return None;
    }
    let mut hour: u32 = c.name("h")?.as_str().parse().ok()?;
    match ampm {
        Some(pm) if (1..=12).contains(&hour) => {
            hour %= 12;
            if pm {
                hour += 12;
            }
        }
        Some(_) => return None,
        None if hour > 23 => return None,
        None => {}
    }
    let time = NaiveTime::from_hms_opt(hour, minute, 0)?;
    let zone = c
        .name("tz")
        .or_else(|| c.name("utc"))
        .map(|z| z.as_str().trim().to_ascii_uppercase());
    let offset = match zone.as_deref() {
        Some("UTC" | "GMT" | "ETC/UTC" | "ETC/GMT" | "Z") => FixedOffset::east_opt(0)?,
        _ => local,
    };
    if let (Some(mon), Some(day), Some(year)) = (c.name("mon"), c.name("day"), c.name("year")) {
        let month = month_of(mon.as_str())?;
        let date = NaiveDate::from_ymd_opt(
            year.as_str().parse().ok()?,
            month,
            day.as_str().parse().ok()?,
        )?;
        return offset
            .from_local_datetime(&date.and_time(time))
            .single()
            .map(|t| t.with_timezone(&Utc));
    }
    let today = now.with_timezone(&offset).date_naive();
    for date in [today, today.succ_opt()?] {
        let at = offset
            .from_local_datetime(&date.and_time(time))
            .single()?
            .with_timezone(&Utc);
        if at > now {
            return Some(at);
        }
    }
    None
}

fn month_of(name: &str) -> Option<u32> {
    let months = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let name = name.to_ascii_lowercase();
    months
        .iter()
        .position(|m| name.starts_with(m))
        .and_then(|i| u32::try_from(i + 1).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("a time")
            .with_timezone(&Utc)
    }

    fn utc() -> FixedOffset {
        FixedOffset::east_opt(0).expect("utc")
    }

    /// 2026-12-01 21:30 UTC.
    fn now() -> DateTime<Utc> {
        at("2026-12-01T21:30:00Z")
    }

    fn words(texts: &[&'static str]) -> Signals<'static> {
        Signals {
            texts: texts.to_vec(),
            ..Signals::default()
        }
    }

    fn detected(signals: &Signals<'_>) -> Option<UsageLimit> {
        detect("claude", signals, now(), utc())
    }

    #[test]
    fn claudes_epoch_form_gives_its_reset() {
        let limit = detected(&words(&["Claude AI usage limit reached|1762952400"])).unwrap();
        assert_eq!(limit.resets_at, Some(at("2025-11-12T13:00:00Z")));
        assert_eq!(limit.message, "Claude AI usage limit reached|1762952400");
    }

    #[test]
    fn claudes_rejected_rate_limit_event_gives_its_reset() {
        let signals = Signals {
            rejected: true,
            reported_reset: Some(1_796_163_000),
            texts: vec!["You've hit your limit · resets 2pm (Asia/Shanghai)"],
            ..Signals::default()
        };
        let limit = detected(&signals).unwrap();
        assert_eq!(limit.resets_at, Some(at("2026-12-01T22:10:00Z")));
        assert!(
            limit.sentence().contains("You've hit your limit"),
            "{limit:?}"
        );
    }

    #[test]
    fn claudes_clock_time_forms_are_the_next_such_time() {
        // "5-hour limit reached ∙ resets 3pm": 3pm today is past, so tomorrow's.
        let limit = detected(&words(&["5-hour limit reached ∙ resets 3pm"])).unwrap();
        assert_eq!(limit.resets_at, Some(at("2026-12-02T15:00:00Z")));
        let limit = detected(&words(&["Session limit reached ∙ resets 10:30pm"])).unwrap();
        assert_eq!(limit.resets_at, Some(at("2026-12-01T22:30:00Z")));
        // In the machine's zone unless said in UTC.
        let plus2 = FixedOffset::east_opt(2 * 3600).unwrap();
        let text = "Claude usage limit reached. Your limit will reset at 5am (Europe/Warsaw).";
        let limit = detect("claude", &words(&[text]), now(), plus2).unwrap();
        assert_eq!(limit.resets_at, Some(at("2026-12-02T03:00:00Z")));
        let limit = detect(
            "claude",
            &words(&["You've hit your limit · resets 11pm (UTC)"]),
            now(),
            plus2,
        )
        .unwrap();
        assert_eq!(limit.resets_at, Some(at("2026-12-01T23:00:00Z")));
    }

    #[test]
    fn a_claude_429_result_is_a_limit_without_a_reset() {
        let signals = Signals {
            api_status: Some(429),
            texts: vec![
                r#"API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit. Please try again later."}}"#,
            ],
            ..Signals::default()
        };
        let limit = detected(&signals).unwrap();
        assert_eq!(limit.resets_at, None);
        assert!(limit.message.starts_with("API Error: 429"), "{limit:?}");
        // With no reset the configured back-off decides.
        let backoff = std::time::Duration::from_secs(1800);
        assert_eq!(limit.until(backoff, now()), at("2026-12-01T22:00:00Z"));
    }

    #[test]
    fn claude_codes_rejected_request_is_a_limit_without_a_reset() {
        // What Claude Code 2.1.332 ends with on a 429 (its `result`, `api_error_status`).
        let signals = Signals {
            api_status: Some(429),
            texts: vec!["API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later."],
            ..Signals::default()
        };
        let limit = detected(&signals).unwrap();
        assert_eq!(limit.resets_at, None);
        assert!(limit
            .message
            .starts_with("API Error: Request rejected (429)"));
        // The words alone say so too.
        assert!(detected(&Signals {
            api_status: None,
            ..signals
        })
        .is_some());
    }

    #[test]
    fn codexs_shapes_give_their_resets() {
        let body = r#"usage_limit_reached: The usage limit has been reached {"type":"usage_limit_reached","plan_type":"plus","resets_at":1796165400,"resets_in_seconds":13872}"#;
        let limit = detect("codex", &words(&[body]), now(), utc()).unwrap();
        assert_eq!(limit.resets_at, Some(at("2026-12-01T22:50:00Z")));
        let relative = r#"{"error":{"type":"usage_limit_reached","resets_in_seconds":600}}"#;
        let limit = detect("codex", &words(&[relative]), now(), utc()).unwrap();
        assert_eq!(limit.resets_at, Some(now() + Duration::seconds(600)));
        let words_in = "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 2 days 17 hours 14 minutes.";
        let limit = detect("codex", &words(&[words_in]), now(), utc()).unwrap();
        assert_eq!(
            limit.resets_at,
            Some(now() + Duration::days(2) + Duration::hours(17) + Duration::minutes(14))
        );
        let words_at = "You've hit your usage limit. Upgrade to Pro or try again at 7:58 PM.";
        let limit = detect("codex", &words(&[words_at]), now(), utc()).unwrap();
        assert_eq!(limit.resets_at, Some(at("2026-12-02T19:58:00Z")));
        let dated = "You've hit your usage limit. Upgrade your plan to continue, or try again at Dec 20, 2026, 7:38 AM.";
        let limit = detect("codex", &words(&[dated]), now(), utc()).unwrap();
        assert_eq!(limit.resets_at, Some(at("2026-12-20T07:38:00Z")));
    }

    #[test]
    fn a_429_with_retry_after_waits_that_long() {
        let text = "HTTP 429 Too Many Requests; retry-after: 45";
        let limit = detect("pi", &words(&[text]), now(), utc()).unwrap();
        assert_eq!(limit.resets_at, Some(now() + Duration::seconds(45)));
    }

    #[test]
    fn ordinary_failures_are_no_limit() {
        assert_eq!(
            detected(&words(&["exited 1", "the model API answered 401"])),
            None
        );
        assert_eq!(detected(&Signals::default()), None);
        let signals = Signals {
            api_status: Some(529),
            texts: vec!["Overloaded"],
            ..Signals::default()
        };
        assert_eq!(detected(&signals), None);
        // A 429 that is not a status is no limit.
        assert_eq!(
            detected(&words(&["processed 429 files", "line 429: x"])),
            None
        );
        assert!(detected(&words(&["429 slow down"])).is_some());
        assert!(detected(&words(&["Error: status code 429"])).is_some());
        // "resets 5" is no clock time; the back-off decides.
        let limit = detected(&words(&["usage limit reached, resets 5"])).unwrap();
        assert_eq!(limit.resets_at, None);
    }

    #[test]
    fn a_past_or_far_reset_is_not_taken_as_it_is() {
        let backoff = std::time::Duration::from_secs(60);
        let stale = UsageLimit {
            agent: "claude".into(),
            resets_at: Some(now() - Duration::hours(1)),
            message: String::new(),
        };
        assert_eq!(stale.until(backoff, now()), now() + Duration::seconds(60));
        let far = UsageLimit {
            resets_at: Some(now() + Duration::days(40)),
            ..stale
        };
        assert_eq!(
            far.until(backoff, now()),
            now() + Duration::days(LONGEST_PAUSE_DAYS)
        );
    }

    #[test]
    fn the_pause_in_force_is_the_latest_unexpired_one_of_that_agent() {
        let pause = |agent: &str, until| AgentPause {
            agent: agent.into(),
            since: now(),
            until,
            reason: "r".into(),
            run_id: None,
            task_gid: None,
        };
        let pauses = vec![
            pause("claude", now() - Duration::minutes(1)),
            pause("codex", now() + Duration::hours(1)),
            pause("claude", now() + Duration::minutes(5)),
        ];
        assert_eq!(
            in_force(&pauses, "claude", now()).map(|p| p.until),
            Some(now() + Duration::minutes(5))
        );
        assert_eq!(in_force(&pauses, "pi", now()), None);
        assert!(in_force(&pauses, "claude", now() + Duration::minutes(5)).is_none());
    }
}

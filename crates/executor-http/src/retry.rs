//! When an outside service says to come back: `Retry-After` (delay-seconds or an HTTP
//! date, RFC 9110 section 10.2.3) and rate-limit reset times (UNIX seconds), read into
//! waits and moments that are always within [`MAX_WAIT`] of now.
//!
//! Why the cap: a service, a proxy or a clock far off can say "in 3000 years" (or a number
//! past any calendar). Taken as it is, such a value overflows the time arithmetic (chrono
//! panics on a `DateTime` past its range) or silences a client for good. A day is longer
//! than any real rate-limit window, so a capped wait never cuts a real one short.
//!
//! Pure functions of the header text and `now`; nothing here sleeps or reads the clock.

use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use reqwest::header::{HeaderMap, RETRY_AFTER};

/// The longest any service can make a client wait.
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 60 * 60);

/// `now + wait`, with `wait` cut to [`MAX_WAIT`]: never overflows.
pub fn later(now: DateTime<Utc>, wait: Duration) -> DateTime<Utc> {
    let wait = wait.min(MAX_WAIT);
    // MAX_WAIT fits a chrono duration, and a day past any real `now` is in range.
    chrono::Duration::from_std(wait)
        .ok()
        .and_then(|wait| now.checked_add_signed(wait))
        .unwrap_or(now)
}

/// `at`, brought within [`MAX_WAIT`] of `now` (a moment in the past stays as it is).
pub fn capped(at: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    at.min(later(now, MAX_WAIT))
}

/// How long from `now` until `at` (zero when it has passed), at most [`MAX_WAIT`].
pub fn until(at: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (at - now).to_std().unwrap_or_default().min(MAX_WAIT)
}

/// The `Retry-After` header of an answer, as a wait from `now`: see [`parse_retry_after`].
pub fn retry_after(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?;
    parse_retry_after(text, now)
}

/// A `Retry-After` value as a wait from `now`, at most [`MAX_WAIT`]: delay-seconds (a
/// fraction is kept; some services send one), or an HTTP date in any of the three forms
/// HTTP allows (a date passed is a wait of zero). `None` when it is neither, or negative.
pub fn parse_retry_after(text: &str, now: DateTime<Utc>) -> Option<Duration> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        if !seconds.is_finite() || seconds < 0.0 {
            return None;
        }
        // `try_from_secs_f64` fails only past `Duration`'s range: that is "very long".
        let wait = Duration::try_from_secs_f64(seconds).unwrap_or(MAX_WAIT);
        return Some(wait.min(MAX_WAIT));
    }
    let at = http_date(text)?;
    Some(until(at, now))
}

/// A reset time given as UNIX seconds (`X-RateLimit-Reset`; a fraction is allowed), at
/// most [`MAX_WAIT`] after `now`. `None` when it is not a number.
pub fn reset_at(text: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let seconds = text.trim().parse::<f64>().ok().filter(|s| s.is_finite())?;
    let latest = later(now, MAX_WAIT);
    if seconds >= latest.timestamp() as f64 {
        return Some(latest);
    }
    // Below the cap, so within chrono's range; a reset before 1970 is "already passed".
    let whole = seconds.floor();
    let nanos = ((seconds - whole) * 1e9) as u32;
    Some(
        Utc.timestamp_opt(whole.max(0.0) as i64, nanos)
            .single()
            .unwrap_or(now),
    )
}

/// An HTTP date: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), or the obsolete RFC 850
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`) forms.
pub fn http_date(text: &str) -> Option<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc2822(text) {
        return Some(at.with_timezone(&Utc));
    }
    ["%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"]
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
        .map(|naive| naive.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("timestamp")
            .with_timezone(&Utc)
    }

    #[test]
    fn retry_after_reads_seconds_and_every_http_date_form() {
        let now = at("1994-11-06T08:49:00Z");
        let cases: Vec<(&str, Option<Duration>)> = vec![
            ("2", Some(Duration::from_secs(2))),
            (" 120 ", Some(Duration::from_secs(120))),
            ("1.5", Some(Duration::from_millis(1500))),
            (
                "Sun, 06 Nov 1994 08:49:37 GMT",
                Some(Duration::from_secs(37)),
            ),
            (
                "Sunday, 06-Nov-94 08:49:37 GMT",
                Some(Duration::from_secs(37)),
            ),
            ("Sun Nov  6 08:49:37 1994", Some(Duration::from_secs(37))),
            // A date passed: go now.
            ("Sun, 06 Nov 1994 08:00:00 GMT", Some(Duration::ZERO)),
            ("-3", None),
            ("soon", None),
            ("NaN", None),
            ("", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_retry_after(text, now), expected, "{text:?}");
        }
    }

    #[test]
    fn huge_values_are_capped_and_never_overflow() {
        let now = at("2026-03-16T09:00:00Z");
        let day = now + chrono::Duration::hours(24);
        for text in [
            "99999999999",
            "18446744073709551615",
            "1e300",
            "inf",
            "Fri, 31 Dec 9999 23:59:59 GMT",
        ] {
            let wait = parse_retry_after(text, now);
            assert!(wait.is_none() || wait == Some(MAX_WAIT), "{text}: {wait:?}");
        }
        assert_eq!(later(now, Duration::from_secs(u64::MAX)), day);
        assert_eq!(later(now, Duration::MAX), day);
        for text in [
            "99999999999",
            "9223372036854775807",
            "1e300",
            "99999999999.5",
        ] {
            assert_eq!(reset_at(text, now), Some(day), "{text}");
        }
        assert_eq!(reset_at("-1e300", now), Some(at("1970-01-01T00:00:00Z")));
        assert_eq!(reset_at("soon", now), None);
        assert_eq!(capped(DateTime::<Utc>::MAX_UTC, now), day);
        assert_eq!(until(DateTime::<Utc>::MAX_UTC, now), MAX_WAIT);
        assert_eq!(until(DateTime::<Utc>::MIN_UTC, now), Duration::ZERO);
    }

    #[test]
    fn a_reset_within_the_cap_is_kept_to_the_fraction() {
        let now = at("2026-03-16T09:00:00Z");
        assert_eq!(
            reset_at("1773662400", now),
            Some(at("2026-03-16T12:00:00Z"))
        );
        assert_eq!(
            reset_at("1773662400.5", now),
            Some(at("2026-03-16T12:00:00.5Z"))
        );
    }
}

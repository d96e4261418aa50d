//! Timestamps as text: one fixed RFC 3339 shape, `2026-11-29T08:00:41.693431Z` (UTC,
//! microseconds), used wherever a time is written as text (the SQLite columns, JSON
//! output). Microseconds because that is what Postgres keeps: both backends then give back
//! exactly the same instant. Formatting and the parse of the fixed shape are hand-written
//! because listing 100,000 tasks formats and parses 200,000 of them.

use chrono::{DateTime, Datelike, NaiveDate, SecondsFormat, Timelike, Utc};

const LEN: usize = 27;

/// `dt` as `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
pub fn format_utc(dt: &DateTime<Utc>) -> String {
    let year = dt.year();
    if !(0..=9999).contains(&year) {
        return dt.to_rfc3339_opts(SecondsFormat::Micros, true);
    }
    let mut buf = *b"0000-00-00T00:00:00.000000Z";
    put_digits(&mut buf[0..4], year as u32);
    put_digits(&mut buf[5..7], dt.month());
    put_digits(&mut buf[8..10], dt.day());
    put_digits(&mut buf[11..13], dt.hour());
    put_digits(&mut buf[14..16], dt.minute());
    put_digits(&mut buf[17..19], dt.second());
    // A leap second shows as nanosecond >= 1e9; keep it inside the field.
    put_digits(&mut buf[20..26], (dt.nanosecond() / 1_000).min(999_999));
    buf.iter().map(|&b| b as char).collect()
}

fn put_digits(slot: &mut [u8], mut value: u32) {
    for byte in slot.iter_mut().rev() {
        *byte = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// Reads the shape [`format_utc`] writes, or any other RFC 3339 time (a space instead of
/// the `T` included); `None` for anything else.
pub fn parse_utc(text: &str) -> Option<DateTime<Utc>> {
    parse_fixed(text.as_bytes()).or_else(|| {
        DateTime::parse_from_rfc3339(text)
            .or_else(|_| DateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f%:z"))
            .ok()
            .map(|dt| dt.with_timezone(&Utc))
    })
}

fn parse_fixed(b: &[u8]) -> Option<DateTime<Utc>> {
    if b.len() != LEN
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || b[26] != b'Z'
    {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<u32> {
        b[range].iter().try_fold(0u32, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
        })
    };
    NaiveDate::from_ymd_opt(num(0..4)? as i32, num(5..7)?, num(8..10)?)?
        .and_hms_micro_opt(num(11..13)?, num(14..16)?, num(17..19)?, num(20..26)?)
        .map(|naive| naive.and_utc())
}

/// `#[serde(serialize_with = ...)]` helpers, so JSON carries the same shape.
pub mod serde_utc {
    use chrono::{DateTime, Utc};
    use serde::Serializer;

    pub fn required<S: Serializer>(dt: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_utc(dt))
    }

    pub fn optional<S: Serializer>(dt: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
        match dt {
            Some(dt) => s.serialize_str(&super::format_utc(dt)),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn formats_the_fixed_shape_and_reads_it_back() {
        let dt = Utc
            .with_ymd_and_hms(2026, 11, 29, 8, 0, 41)
            .single()
            .expect("valid")
            + chrono::Duration::nanoseconds(693_431_200);
        let text = format_utc(&dt);
        assert_eq!(text, "2026-11-29T08:00:41.693431Z");
        let back = parse_utc(&text).expect("parses");
        assert_eq!(
            back,
            dt - chrono::Duration::nanoseconds(200),
            "truncated to micros"
        );
        assert_eq!(format_utc(&back), text);
    }

    #[test]
    fn agrees_with_chrono_on_many_instants() {
        let start = Utc
            .with_ymd_and_hms(1999, 12, 31, 23, 59, 59)
            .single()
            .expect("valid");
        for step in 0..2_000i64 {
            let dt = start + chrono::Duration::microseconds(step * 7_919_113_337);
            let ours = format_utc(&dt);
            assert_eq!(ours, dt.to_rfc3339_opts(SecondsFormat::Micros, true));
            assert_eq!(parse_utc(&ours), Some(dt));
        }
    }

    #[test]
    fn reads_other_rfc3339_shapes() {
        let expected = Utc
            .with_ymd_and_hms(2026, 1, 2, 3, 4, 5)
            .single()
            .expect("valid");
        assert_eq!(parse_utc("2026-01-02T03:04:05Z"), Some(expected));
        assert_eq!(parse_utc("2026-01-02T04:04:05+01:00"), Some(expected));
        assert_eq!(parse_utc("2026-01-02 03:04:05.000+00:00"), Some(expected));
    }

    #[test]
    fn refuses_what_is_not_a_time() {
        for bad in [
            "",
            "yesterday",
            "2026-13-02T03:04:05.000000Z",
            "2026-01-02T03:04:05.00000xZ",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
    }
}

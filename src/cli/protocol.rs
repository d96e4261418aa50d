//! `executor protocol parse`: reads lines on stdin and prints one JSON object per worker
//! message (or `[ACKNOWLEDGED: …]` marker) on stdout, one per line, in the form of
//! [`crate::protocol::Message`]'s serialisation. Lines that are not messages are skipped;
//! lines inside fenced code blocks too (as [`crate::protocol::Scanner`] does); a line that
//! starts like a message but is malformed is reported on the diagnostics stream with its
//! line number and the reason, and counted.
//!
//! What it must never do: stop on bad input (non-UTF-8 bytes, a malformed message, an
//! endless line are counted and skipped, never an error), or print anything on stdout but
//! one JSON object per line.

use std::io::{self, BufRead, Write};

use crate::protocol::{Parsed, Scanner};

/// Lines longer than this are skipped unread (counted as `too_long`): a message is one
/// short line, and the reader must not hold an endless line in memory.
pub const MAX_LINE: usize = 1024 * 1024;

/// What a run of [`parse_stream`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Lines read.
    pub lines: u64,
    /// `[REQUEST:…]`, `[STATUS:…]`, `[DONE:…]` and `[ESCALATE:…]` lines printed.
    pub messages: u64,
    /// `[ACKNOWLEDGED: …]` markers printed.
    pub acknowledgements: u64,
    /// Lines that started like a message but were not one (reported on diagnostics).
    pub malformed: u64,
    /// Lines over [`MAX_LINE`] bytes, skipped.
    pub too_long: u64,
}

/// Reads `input` to its end and prints each recognised message as one JSON object per line
/// on `out`; each malformed message line gets one line on `diagnostics`
/// (`line 3: column 7: expected …; skipped`). Errors are only those of reading `input` or
/// writing `out` / `diagnostics`.
///
/// The CLI calls it as `parse_stream(io::stdin().lock(), io::stdout().lock(),
/// io::stderr().lock())`.
pub fn parse_stream(
    mut input: impl BufRead,
    mut out: impl Write,
    mut diagnostics: impl Write,
) -> io::Result<Stats> {
    let mut stats = Stats::default();
    let mut scanner = Scanner::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let (read, complete) = read_line(&mut input, &mut line)?;
        if read == 0 {
            break;
        }
        stats.lines += 1;
        if !complete {
            stats.too_long += 1;
            writeln!(
                diagnostics,
                "line {}: longer than {MAX_LINE} bytes; skipped",
                stats.lines
            )?;
            continue;
        }
        match scanner.line_bytes(&line) {
            Ok(None) => {}
            Ok(Some(parsed)) => {
                match &parsed {
                    Parsed::Message(_) => stats.messages += 1,
                    Parsed::Acknowledged(_) => stats.acknowledgements += 1,
                }
                serde_json::to_writer(&mut out, &parsed).map_err(io::Error::other)?;
                out.write_all(b"\n")?;
            }
            Err(e) => {
                stats.malformed += 1;
                writeln!(diagnostics, "line {}: {e}; skipped", stats.lines)?;
            }
        }
    }
    out.flush()?;
    Ok(stats)
}

/// Reads one line (with its `\n`) into `buf`, keeping at most [`MAX_LINE`] bytes of it and
/// discarding the rest. Returns the bytes consumed and whether the line fit.
fn read_line(input: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<(usize, bool)> {
    let mut consumed = 0;
    let mut complete = true;
    loop {
        let available = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok((consumed, complete));
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        if complete && buf.len() + chunk.len() <= MAX_LINE + 1 {
            buf.extend_from_slice(chunk);
        } else {
            complete = false;
            buf.clear();
        }
        let n = chunk.len();
        input.consume(n);
        consumed += n;
        if done {
            return Ok((consumed, complete));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &[u8]) -> (String, String, Stats) {
        let (mut out, mut diag) = (Vec::new(), Vec::new());
        let stats = parse_stream(input, &mut out, &mut diag).expect("in-memory I/O");
        (
            String::from_utf8(out).expect("JSON is UTF-8"),
            String::from_utf8(diag).expect("diagnostics are UTF-8"),
            stats,
        )
    }

    #[test]
    fn prints_one_json_object_per_message_and_skips_the_rest() {
        let input = b"plain output\n\xff\xfe binary\n[REQUEST:push_branch] branch=executor/x now\n```\n[DONE:x] in a fence\n```\n[DONE:Bad]\n[ACKNOWLEDGED: ok]\n{\"type\":\"assistant\"}\n[STATUS:tests] green";
        let (out, diag, stats) = run(input);
        assert_eq!(
            out,
            "{\"tag\":\"REQUEST\",\"kind\":\"push_branch\",\"args\":{\"branch\":\"executor/x\"},\"text\":\"now\"}\n\
             {\"tag\":\"ACKNOWLEDGED\",\"text\":\"ok\"}\n\
             {\"tag\":\"STATUS\",\"kind\":\"tests\",\"args\":{},\"text\":\"green\"}\n"
        );
        assert_eq!(
            diag,
            "line 7: column 7: expected a snake_case kind character ([a-z0-9_]) or `]`, found `B`; skipped\n"
        );
        assert_eq!(
            stats,
            Stats {
                lines: 10,
                messages: 2,
                acknowledgements: 1,
                malformed: 1,
                too_long: 0
            }
        );
    }

    #[test]
    fn an_endless_line_is_skipped_and_the_next_one_read() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\n[DONE:x]\n");
        let (out, _, stats) = run(&input);
        assert_eq!(stats.too_long, 1);
        assert_eq!(stats.messages, 1);
        assert_eq!(out.lines().count(), 1);
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_read() {
        let mut input = b"[DONE:x] ".to_vec();
        input.resize(MAX_LINE, b'a');
        input.push(b'\n');
        let (_, _, stats) = run(&input);
        assert_eq!((stats.messages, stats.too_long), (1, 0));
    }
}

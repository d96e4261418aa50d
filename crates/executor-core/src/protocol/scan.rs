//! Messages inside a block of text (an assistant message, a PR comment, a stream of output
//! lines): every line that starts like a message, outside fenced code blocks.

use super::parse::{message_start, skip_blanks, strip_eol, Start};
use super::{parse_bytes, parse_line, Message, ParseError, Parsed};

/// Reads lines one at a time, remembering whether they are inside a fenced code block.
/// What [`scan`] uses, for callers that get their lines one by one (a stream on stdin).
#[derive(Debug, Clone, Default)]
pub struct Scanner {
    /// The open fence: its character (`` ` `` or `~`) and length.
    fence: Option<(u8, usize)>,
}

impl Scanner {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the lines read so far left a fenced code block open.
    pub fn in_fence(&self) -> bool {
        self.fence.is_some()
    }

    /// The next line: `Ok(None)` when it is not a message, or is inside (or opens or closes)
    /// a code fence; otherwise [`parse_line`]'s answer.
    pub fn line(&mut self, line: &str) -> Result<Option<Parsed>, ParseError> {
        if self.fenced(line.as_bytes()) {
            return Ok(None);
        }
        parse_line(line)
    }

    /// [`Scanner::line`] for raw bytes (see [`parse_bytes`]).
    pub fn line_bytes(&mut self, line: &[u8]) -> Result<Option<Parsed>, ParseError> {
        if self.fenced(line) {
            return Ok(None);
        }
        parse_bytes(line)
    }

    /// Follows the fences; true when the line belongs to one (opener, body or closer).
    fn fenced(&mut self, line: &[u8]) -> bool {
        let line = strip_eol(line);
        let i = skip_blanks(line, 0);
        let Some(&c) = line.get(i) else {
            return self.fence.is_some();
        };
        let run = |ch: u8| line[i..].iter().take_while(|&&b| b == ch).count();
        match self.fence {
            Some((ch, len)) => {
                if c == ch {
                    let n = run(ch);
                    if n >= len && skip_blanks(line, i + n) == line.len() {
                        self.fence = None;
                    }
                }
                true
            }
            None => {
                if c == b'`' || c == b'~' {
                    let n = run(c);
                    // As in CommonMark, a backtick fence's info string holds no backtick:
                    // "```x```" is inline code, not a fence.
                    let inline = c == b'`' && line[i + n..].contains(&b'`');
                    if n >= 3 && !inline {
                        self.fence = Some((c, n));
                        return true;
                    }
                }
                false
            }
        }
    }
}

/// A line of a text block that starts like a message, with what it parsed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located<'a> {
    /// 1-based.
    pub line_number: usize,
    /// The line, without its line break.
    pub line: &'a str,
    pub parsed: Result<Parsed, ParseError>,
}

/// Every line of `text` that starts like a message or an `[ACKNOWLEDGED: …]` marker, outside
/// fenced code blocks, in order, parsed. Lines are split on `\n` (a `\r` before it is
/// dropped).
pub fn scan(text: &str) -> impl Iterator<Item = Located<'_>> {
    let mut scanner = Scanner::new();
    text.split('\n').enumerate().filter_map(move |(n, line)| {
        let line = line.strip_suffix('\r').unwrap_or(line);
        // Most lines are neither fences nor messages: decide that before anything else.
        let first = line.as_bytes().get(skip_blanks(line.as_bytes(), 0));
        if scanner.fence.is_none()
            && !matches!(first, Some(b'`' | b'~'))
            && message_start(line.as_bytes()).is_none()
        {
            return None;
        }
        scanner.line(line).transpose().map(|parsed| Located {
            line_number: n + 1,
            line,
            parsed,
        })
    })
}

/// The worker messages in `text` (an assistant message may hold several), outside fenced
/// code blocks, in order; a line that starts like a message but is malformed is an `Err`.
/// `[ACKNOWLEDGED: …]` markers, well-formed or not, are left out (see [`scan`] for them and for line numbers).
pub fn messages_in(text: &str) -> impl Iterator<Item = Result<Message, ParseError>> + '_ {
    scan(text).filter_map(|found| match found.parsed {
        Ok(Parsed::Message(m)) => Some(Ok(m)),
        Ok(Parsed::Acknowledged(_)) => None,
        Err(e) => match message_start(found.line.as_bytes()) {
            Some((Start::Acknowledged, _)) => None,
            _ => Some(Err(e)),
        },
    })
}

//! One line in, a [`Parsed`] value or a [`ParseError`] out: a single forward pass over the
//! bytes (the structure is all ASCII, so every slice taken falls on a UTF-8 boundary).

use std::collections::HashSet;

use super::{Acknowledged, FoundChar, Message, ParseError, ParseErrorKind, Parsed, Tag};

/// Above this many pairs the duplicate-key check switches from a scan of the keys so far to
/// a hash set, so a line of a million distinct keys stays linear.
const LINEAR_KEY_CHECK: usize = 16;

/// What a line starts like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Start {
    Message(Tag),
    Acknowledged,
}

/// Parses one line. `Ok(None)` when it does not start like a message (the usual case, decided
/// after the leading blanks and at most 15 bytes); a trailing `\n`, `\r\n` or `\r` is dropped.
pub fn parse_line(line: &str) -> Result<Option<Parsed>, ParseError> {
    let line = strip_eol_str(line);
    match message_start(line.as_bytes()) {
        None => Ok(None),
        Some((start, at)) => parse_from(line, start, at).map(Some),
    }
}

/// [`parse_line`] for raw output, which may not be UTF-8. A line that does not start like a
/// message is `Ok(None)` whatever its bytes; a message line must be UTF-8 throughout.
pub fn parse_bytes(line: &[u8]) -> Result<Option<Parsed>, ParseError> {
    let line = strip_eol(line);
    let Some((start, at)) = message_start(line) else {
        return Ok(None);
    };
    let text = std::str::from_utf8(line).map_err(|e| {
        let bad = e.valid_up_to();
        ParseError {
            column: bad + 1,
            kind: ParseErrorKind::NotUtf8 {
                byte: line.get(bad).copied().unwrap_or(0),
            },
        }
    })?;
    parse_from(text, start, at).map(Some)
}

pub(super) fn strip_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn strip_eol_str(line: &str) -> &str {
    let line = line.strip_suffix('\n').unwrap_or(line);
    line.strip_suffix('\r').unwrap_or(line)
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

pub(super) fn skip_blanks(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_blank(b[i]) {
        i += 1;
    }
    i
}

fn is_kind_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// What the line starts like (after blanks), and the offset just past the prefix's `:`.
pub(super) fn message_start(b: &[u8]) -> Option<(Start, usize)> {
    let open = skip_blanks(b, 0);
    if b.get(open) != Some(&b'[') {
        return None;
    }
    let rest = &b[open + 1..];
    let (start, prefix): (Start, &[u8]) = match rest.first()? {
        b'R' => (Start::Message(Tag::Request), b"REQUEST:"),
        b'S' => (Start::Message(Tag::Status), b"STATUS:"),
        b'D' => (Start::Message(Tag::Done), b"DONE:"),
        b'E' => (Start::Message(Tag::Escalate), b"ESCALATE:"),
        b'A' => (Start::Acknowledged, b"ACKNOWLEDGED:"),
        _ => return None,
    };
    rest.starts_with(prefix)
        .then_some((start, open + 1 + prefix.len()))
}

fn error(at: usize, kind: ParseErrorKind) -> ParseError {
    ParseError {
        column: at + 1,
        kind,
    }
}

/// The character at byte `at` of `line` (a boundary: every caller stops on an ASCII byte or
/// right after one).
fn found(line: &str, at: usize) -> FoundChar {
    FoundChar(
        line.get(at..)
            .and_then(|rest| rest.chars().next())
            .unwrap_or(char::REPLACEMENT_CHARACTER),
    )
}

fn trim_blanks_end(s: &str) -> &str {
    s.trim_end_matches([' ', '\t'])
}

/// Parses a line already known to start like a message, from `at` (just past `TAG:`).
fn parse_from(line: &str, start: Start, at: usize) -> Result<Parsed, ParseError> {
    if let Some(p) = line.bytes().position(|b| b == b'\n' || b == b'\r') {
        return Err(error(p, ParseErrorKind::LineBreak));
    }
    match start {
        Start::Acknowledged => acknowledged(line, at).map(Parsed::Acknowledged),
        Start::Message(tag) => message(line, tag, at).map(Parsed::Message),
    }
}

fn acknowledged(line: &str, at: usize) -> Result<Acknowledged, ParseError> {
    let rest = &line[at..];
    match rest.rfind(']') {
        None => Err(error(line.len(), ParseErrorKind::MissingBracket)),
        Some(close) => Ok(Acknowledged {
            text: rest[..close].trim_matches([' ', '\t']).to_string(),
        }),
    }
}

fn message(line: &str, tag: Tag, at: usize) -> Result<Message, ParseError> {
    let b = line.as_bytes();
    let n = b.len();

    let mut i = at;
    while i < n && is_kind_byte(b[i]) {
        i += 1;
    }
    if i == n {
        return Err(error(n, ParseErrorKind::MissingBracket));
    }
    if b[i] != b']' {
        return Err(error(
            i,
            ParseErrorKind::BadKind {
                found: found(line, i),
            },
        ));
    }
    if i == at {
        return Err(error(i, ParseErrorKind::EmptyKind));
    }
    let kind = &line[at..i];
    i += 1;
    if i < n && !is_blank(b[i]) {
        return Err(error(
            i,
            ParseErrorKind::NoSpaceAfterTag {
                found: found(line, i),
            },
        ));
    }

    let mut args: Vec<(&str, String)> = Vec::new();
    let mut seen: Option<HashSet<&str>> = None;
    let mut text = "";
    loop {
        i = skip_blanks(b, i);
        if i == n {
            break;
        }
        let token = i;
        let mut j = i;
        while j < n && is_key_byte(b[j]) {
            j += 1;
        }
        if j == token || j == n || b[j] != b'=' {
            text = trim_blanks_end(&line[token..]);
            break;
        }
        let key = &line[token..j];
        let (value, end) = if b.get(j + 1) == Some(&b'"') {
            quoted(line, j + 1, key)?
        } else {
            bare(line, j + 1, key)?
        };
        let duplicate = match &mut seen {
            Some(set) => !set.insert(key),
            None => {
                let duplicate = args.iter().any(|(k, _)| *k == key);
                if args.len() >= LINEAR_KEY_CHECK {
                    let mut set: HashSet<&str> = args.iter().map(|(k, _)| *k).collect();
                    set.insert(key);
                    seen = Some(set);
                }
                duplicate
            }
        };
        if duplicate {
            return Err(error(
                token,
                ParseErrorKind::DuplicateKey {
                    key: key.to_string(),
                },
            ));
        }
        args.push((key, value));
        i = end;
    }

    Ok(Message {
        tag,
        kind: kind.to_string(),
        args: args.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        text: text.to_string(),
    })
}

/// A quoted value whose `"` is at `open`: the unescaped value and the offset past the
/// closing quote.
fn quoted(line: &str, open: usize, key: &str) -> Result<(String, usize), ParseError> {
    let b = line.as_bytes();
    let n = b.len();
    let mut value = String::new();
    let mut segment = open + 1;
    let mut k = open + 1;
    loop {
        while k < n && b[k] != b'"' && b[k] != b'\\' {
            k += 1;
        }
        if k == n {
            return Err(error(
                open,
                ParseErrorKind::UnterminatedQuote {
                    key: key.to_string(),
                },
            ));
        }
        if b[k] == b'"' {
            value.push_str(&line[segment..k]);
            k += 1;
            break;
        }
        // A backslash: `\"` and `\\` keep the second character; any other is kept as is.
        match b.get(k + 1) {
            Some(b'"' | b'\\') => {
                value.push_str(&line[segment..k]);
                segment = k + 1;
                k += 2;
            }
            _ => k += 1,
        }
    }
    if k < n && !is_blank(b[k]) {
        return Err(error(
            k,
            ParseErrorKind::NoSpaceAfterQuote {
                key: key.to_string(),
                found: found(line, k),
            },
        ));
    }
    Ok((value, k))
}

/// An unquoted value starting at `from`: up to the next blank or the end of the line.
fn bare(line: &str, from: usize, key: &str) -> Result<(String, usize), ParseError> {
    let b = line.as_bytes();
    let mut k = from;
    while k < b.len() && !is_blank(b[k]) {
        if b[k] == b'"' {
            return Err(error(
                k,
                ParseErrorKind::QuoteInBareValue {
                    key: key.to_string(),
                },
            ));
        }
        k += 1;
    }
    Ok((line[from..k].to_string(), k))
}

//! Worker messages (docs/design.md §5): the one-line `[TAG:kind] key=value … free text`
//! messages a worker writes, and the `[ACKNOWLEDGED: text]` marker of PR comments, read by a
//! hand-written scanner with no model involved.
//!
//! Theory of operation: [`parse_line`] (or [`parse_bytes`] for raw output) looks at one line.
//! A line that does not start like a message is `Ok(None)`, at the cost of a few byte
//! compares: almost every line of a transcript is that. A line that starts like one (one of
//! the prefixes `[REQUEST:`, `[STATUS:`, `[DONE:`, `[ESCALATE:`, `[ACKNOWLEDGED:` after
//! optional blanks) is either a [`Parsed`] value or a [`ParseError`] naming the column and
//! what was expected there, so the caller can log "garbage line skipped" with a reason or
//! tell the worker. [`scan`] and [`messages_in`] do the same over a block of text (an
//! assistant message holds several lines), skipping fenced code blocks; [`Scanner`] is the
//! same, fed one line at a time.
//!
//! What this module must never do: panic, guess, or take more than linear time, whatever the
//! input (one pass over the bytes, no regex, no backtracking; a duplicate-key check that
//! stays linear); decide anything (a request becomes a [`crate::policy::Action`] through
//! [`Message::to_action`]; the policy engine judges it); do I/O.
//!
//! # The grammar
//!
//! ```text
//! line     = blank* ( message | ack ) EOL
//! message  = "[" tag ":" kind "]" ( blank+ pair )* ( blank+ text )? blank*
//! tag      = "REQUEST" | "STATUS" | "DONE" | "ESCALATE"
//! kind     = [a-z0-9_]+
//! pair     = key "=" ( bare | quoted )          (followed by a blank or the end)
//! key      = [A-Za-z0-9_]+
//! bare     = any bytes but blanks and `"`, possibly empty
//! quoted   = `"` ( `\"` | `\\` | `\` other | any but `"` and `\` )* `"`
//! text     = the rest of the line from the first token that is not a pair
//! ack      = "[ACKNOWLEDGED:" text-up-to-the-last-"]" "]" anything
//! blank    = space | tab
//! ```
//!
//! Decisions, and why:
//!
//! - **Leading blanks are allowed** (spaces and tabs only). The prompt asks for messages "at
//!   the very start of the line", but agents indent them under a heading or inside their own
//!   layout, and nothing but blanks before the `[` means nothing can make the line a
//!   quotation. Anything else before the `[` — a list bullet `- `, a quote `> `, a backtick —
//!   makes it not a message: that is the agent writing *about* a message ("I will send
//!   `[DONE:x]` when…"), which must never be acted on. `executor::agents::event::is_protocol_line`
//!   also trims blanks (any Unicode whitespace, where this accepts spaces and tabs).
//! - **The tag is exact** (capitals, one of four, then `:`): `[request:x]` or `[INFO:x]` is an
//!   ordinary line, not an error, because nothing says the agent meant a message.
//! - **The kind is strict**: `[a-z0-9_]+`, nothing else, no spaces; a capital or a `-` is an
//!   error, not normalised. The kind is what the policy matches and what the record shows;
//!   quietly turning `Push-Branch` into `push_branch` would make two spellings one request.
//!   The error tells the worker what to fix.
//! - **`]` must be followed by a blank or the end of the line**, and a closing quote too:
//!   `[DONE:x]text` or `key="a"b` is an error rather than a guess about where a token ends.
//! - **Pairs end at the first token that is not `key=value`** (a token is a run of
//!   non-blanks; it is a pair when it starts with `[A-Za-z0-9_]+=`). A bare value may hold
//!   `=` (`a=b=c` is `a` = `b=c`) and backslashes (taken literally), but not `"`: `title=a"b`
//!   is an error. A bare value may be empty (`branch=`), which the policy then judges.
//! - **Escapes in quoted values**: `\"` is `"`, `\\` is `\`, and any other `\x` is kept as
//!   the two characters `\x` (so `\n` stays a backslash and an `n`: a message is one line
//!   and never carries a line break). A quote left open at the end of the line is an error.
//! - **Duplicate keys are rejected** (an error naming the key). `branch=executor/x
//!   branch=main` is ambiguous: whichever copy the orchestrator used, the policy might have
//!   judged the other. So [`Message::args`] has unique keys in the order written, and the
//!   JSON form prints them as an object without losing anything.
//! - **The free text** runs from the first non-pair token to the end of the line, trailing
//!   blanks trimmed. `[REQUEST:post_comment] target=tracker "Fixed in #12"` has the text
//!   `"Fixed in #12"`, quotes included.
//! - **One line**: a trailing `\n`, `\r\n` or `\r` is dropped; a line break anywhere else in
//!   a message line is an error (callers split lines; a message never spans two).
//! - **UTF-8**: values and text may hold any UTF-8. [`parse_bytes`] takes raw bytes: a line
//!   that is not a message is `Ok(None)` whatever its encoding; a message line that is not
//!   UTF-8 is an error at the first bad byte, never repaired (a repaired value is not what
//!   the worker wrote).
//! - **`[ACKNOWLEDGED: text]`**: the text is everything up to the *last* `]` of the line,
//!   blanks trimmed (so it may hold brackets: `[ACKNOWLEDGED: done [see #3]]`); whatever
//!   follows that `]` is not part of the marker and is dropped. No `]` is an error.
//! - **Columns** in errors are 1-based byte offsets in the line as given.
//! - **Fenced code blocks** (a line starting, after blanks, with three or more backticks or
//!   tildes, up to a line with at least as many of the same character and nothing else) hold
//!   no messages, for [`scan`], [`messages_in`] and [`Scanner`]: the prompt tells workers to
//!   write messages outside code blocks, and an example inside one is not a request. As in
//!   CommonMark, a fence never closed runs to the end of the text. Indented code blocks are
//!   not recognised: an indented message is a message (see the first point).

mod parse;
mod scan;

#[cfg(test)]
mod tests;

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};
use thiserror::Error;

use crate::policy::Action;

pub use parse::{parse_bytes, parse_line};
pub use scan::{messages_in, scan, Located, Scanner};

/// The four tags of a worker message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Tag {
    /// Asks for something the worker must not or cannot do itself; decided by the policy.
    Request,
    /// A milestone, for the owner to follow the work.
    Status,
    /// The phase's work is finished.
    Done,
    /// A decision that belongs to the owner, or the worker cannot go on.
    Escalate,
}

impl Tag {
    pub const ALL: [Tag; 4] = [Tag::Request, Tag::Status, Tag::Done, Tag::Escalate];

    /// The tag as written: `REQUEST`, `STATUS`, `DONE`, `ESCALATE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Tag::Request => "REQUEST",
            Tag::Status => "STATUS",
            Tag::Done => "DONE",
            Tag::Escalate => "ESCALATE",
        }
    }
}

impl std::fmt::Display for Tag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One worker message: `[TAG:kind] key=value … free text`.
///
/// Its JSON form (what `executor protocol parse` prints) is
/// `{"tag":"REQUEST","kind":"push_branch","args":{"branch":"executor/x"},"text":"…"}`, with
/// the arguments as an object in the order written (keys are unique: see the module notes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub tag: Tag,
    /// snake_case: `[a-z0-9_]+`.
    pub kind: String,
    /// The `key=value` pairs in the order written; keys are unique and `[A-Za-z0-9_]+`;
    /// values unquoted and unescaped.
    pub args: Vec<(String, String)>,
    /// The free text after the pairs, trailing blanks trimmed; may be empty.
    pub text: String,
}

impl Message {
    /// The value of argument `key`, if given.
    pub fn arg(&self, key: &str) -> Option<&str> {
        self.args
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The policy action a `[REQUEST:kind] key=value…` message asks for: the kind is the
    /// action, the pairs its arguments (the free text is the worker's explanation and is
    /// not judged). `None` for the other tags.
    pub fn to_action(&self) -> Option<Action> {
        (self.tag == Tag::Request).then(|| {
            Action::from_request(
                &self.kind,
                self.args.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            )
        })
    }

    /// The message as one line, in canonical form: one space between parts, a value quoted
    /// (with `\"` and `\\`) when it is empty or holds a blank, `"`, `=` or `\`.
    ///
    /// For every message [`parse_line`] returns, `parse_line(&m.to_line())` gives `m` back.
    /// A message built by hand round-trips too if it could have been parsed: its kind and
    /// keys in the grammar, keys unique, no line break anywhere, and its text trimmed and
    /// not starting with a `key=value` token (which would be read as a pair).
    pub fn to_line(&self) -> String {
        let mut line = String::with_capacity(
            self.kind.len()
                + self.text.len()
                + self
                    .args
                    .iter()
                    .map(|(k, v)| k.len() + v.len() + 4)
                    .sum::<usize>()
                + 16,
        );
        line.push('[');
        line.push_str(self.tag.as_str());
        line.push(':');
        line.push_str(&self.kind);
        line.push(']');
        for (key, value) in &self.args {
            line.push(' ');
            line.push_str(key);
            line.push('=');
            push_value(&mut line, value);
        }
        if !self.text.is_empty() {
            line.push(' ');
            line.push_str(&self.text);
        }
        line
    }
}

impl std::fmt::Display for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_line())
    }
}

fn push_value(line: &mut String, value: &str) {
    let needs_quotes = value.is_empty()
        || value
            .bytes()
            .any(|b| matches!(b, b' ' | b'\t' | b'"' | b'=' | b'\\'));
    if !needs_quotes {
        line.push_str(value);
        return;
    }
    line.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            line.push('\\');
        }
        line.push(c);
    }
    line.push('"');
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Args<'a>(&'a [(String, String)]);
        impl Serialize for Args<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(self.0.len()))?;
                for (k, v) in self.0 {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
        let mut s = serializer.serialize_struct("Message", 4)?;
        s.serialize_field("tag", &self.tag)?;
        s.serialize_field("kind", &self.kind)?;
        s.serialize_field("args", &Args(&self.args))?;
        s.serialize_field("text", &self.text)?;
        s.end()
    }
}

/// The PR-comment marker `[ACKNOWLEDGED: text]`: a review thread answered and resolved.
///
/// JSON form: `{"tag":"ACKNOWLEDGED","text":"won't fix, out of scope"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledged {
    /// What was inside the brackets, blanks trimmed; may be empty.
    pub text: String,
}

impl Acknowledged {
    /// `[ACKNOWLEDGED: text]` (or `[ACKNOWLEDGED:]` for an empty text); parses back to the
    /// same marker when the text has no line break and no leading or trailing blanks.
    pub fn to_line(&self) -> String {
        if self.text.is_empty() {
            "[ACKNOWLEDGED:]".to_string()
        } else {
            format!("[ACKNOWLEDGED: {}]", self.text)
        }
    }
}

impl Serialize for Acknowledged {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Acknowledged", 2)?;
        s.serialize_field("tag", "ACKNOWLEDGED")?;
        s.serialize_field("text", &self.text)?;
        s.end()
    }
}

/// What a line that starts like a message turned out to be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Parsed {
    Message(Message),
    Acknowledged(Acknowledged),
}

impl Parsed {
    pub fn to_line(&self) -> String {
        match self {
            Parsed::Message(m) => m.to_line(),
            Parsed::Acknowledged(a) => a.to_line(),
        }
    }

    /// The worker message, if this is one.
    pub fn into_message(self) -> Option<Message> {
        match self {
            Parsed::Message(m) => Some(m),
            Parsed::Acknowledged(_) => None,
        }
    }
}

/// A line that starts like a message but is not one: where, and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("column {column}: {kind}")]
pub struct ParseError {
    /// 1-based byte offset in the line as given (leading blanks counted).
    pub column: usize,
    pub kind: ParseErrorKind,
}

/// Why a message line was rejected. The texts say what was expected, so they can be shown
/// to the worker as they are.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseErrorKind {
    #[error("expected a snake_case kind character ([a-z0-9_]) or `]`, found {found}")]
    BadKind { found: FoundChar },
    #[error("expected a kind ([a-z0-9_]+) before `]`")]
    EmptyKind,
    #[error("expected `]` to close the tag, found the end of the line")]
    MissingBracket,
    #[error("expected a space or the end of the line after `]`, found {found}")]
    NoSpaceAfterTag { found: FoundChar },
    #[error(
        "expected a closing `\"` for the value of `{key}` (opened here), found the end of the line"
    )]
    UnterminatedQuote { key: String },
    #[error(
        "expected a space or the end of the line after the quoted value of `{key}`, found {found}"
    )]
    NoSpaceAfterQuote { key: String, found: FoundChar },
    #[error("expected no `\"` inside the unquoted value of `{key}` (quote the whole value: {key}=\"…\")")]
    QuoteInBareValue { key: String },
    #[error("expected each key once, found a second `{key}`")]
    DuplicateKey { key: String },
    #[error("expected one line, found a line break inside the message")]
    LineBreak,
    #[error("expected UTF-8, found the byte {byte:#04x}")]
    NotUtf8 { byte: u8 },
}

/// The character an error found where it expected something else, as the error shows it: quoted and escaped (`` `P` ``, `` `\t` ``).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoundChar(pub char);

impl std::fmt::Display for FoundChar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            ' ' => f.write_str("a space"),
            c => write!(f, "`{}`", c.escape_debug()),
        }
    }
}

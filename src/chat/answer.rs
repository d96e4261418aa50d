//! What the owner says in the chat topic, read into a command: `approve 17`, `deny 17 not
//! now`, `go T-123`, `skip T-123`, `cancel 4 [reason]`, `retry T-123`; anything else is a
//! note for a run. Pure: no I/O, no
//! store, no idea who is allowed to say it (the caller checks the sender first).
//!
//! Leading mentions (`@**Executor**`, `@_**Executor**`) are dropped, because an outgoing
//! webhook only hears messages that mention its bot. Words are matched without regard to
//! case, and an escalation id may carry a `#`.
//!
//! What it must never do: read a command out of the middle of a sentence. "please approve
//! 17 later" is a note, not an approval.

/// One owner message, understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnerReply {
    /// `approve N [note]`.
    Approve {
        escalation: i64,
        note: Option<String>,
    },
    /// `deny N [reason]`.
    Deny {
        escalation: i64,
        reason: Option<String>,
    },
    /// `go GID`: the owner's go for a task.
    Go { gid: String },
    /// `skip GID`: the owner's rejection of a task.
    Skip { gid: String },
    /// `cancel RUN|GID [reason]`: stop a run now.
    Cancel {
        target: String,
        reason: Option<String>,
    },
    /// `retry GID`: a fresh run of a task whose last run ended.
    Retry { gid: String },
    /// Anything else, kept as it was written (mentions dropped).
    Note(String),
}

/// The answer syntax, as the escalation message shows it.
pub fn syntax(escalation: i64) -> String {
    format!("`approve {escalation}` or `deny {escalation} <reason>`")
}

/// Reads `content`, a message's raw Markdown.
pub fn parse(content: &str) -> OwnerReply {
    let text = strip_mentions(content.trim());
    let (word, rest) = split_word(text);
    let word = word.to_ascii_lowercase();
    match word.as_str() {
        "approve" | "deny" => {
            let (id, rest) = split_word(rest);
            let Some(escalation) = id
                .strip_prefix('#')
                .unwrap_or(id)
                .parse::<i64>()
                .ok()
                .filter(|n| *n > 0)
            else {
                return OwnerReply::Note(text.to_string());
            };
            let extra = Some(rest.trim())
                .filter(|r| !r.is_empty())
                .map(str::to_string);
            if word == "approve" {
                OwnerReply::Approve {
                    escalation,
                    note: extra,
                }
            } else {
                OwnerReply::Deny {
                    escalation,
                    reason: extra,
                }
            }
        }
        "go" | "skip" => {
            let (gid, rest) = split_word(rest);
            let gid = gid.trim_matches('`');
            if gid.is_empty() || !rest.trim().is_empty() {
                return OwnerReply::Note(text.to_string());
            }
            let gid = gid.to_string();
            if word == "go" {
                OwnerReply::Go { gid }
            } else {
                OwnerReply::Skip { gid }
            }
        }
        "cancel" => {
            let (target, rest) = split_word(rest);
            let target = target.trim_matches('`').trim_start_matches('#');
            if target.is_empty() {
                return OwnerReply::Note(text.to_string());
            }
            OwnerReply::Cancel {
                target: target.to_string(),
                reason: Some(rest.trim())
                    .filter(|r| !r.is_empty())
                    .map(str::to_string),
            }
        }
        "retry" => {
            let (gid, rest) = split_word(rest);
            let gid = gid.trim_matches('`');
            if gid.is_empty() || !rest.trim().is_empty() {
                return OwnerReply::Note(text.to_string());
            }
            OwnerReply::Retry {
                gid: gid.to_string(),
            }
        }
        _ => OwnerReply::Note(text.to_string()),
    }
}

/// `text` without the mentions it starts with.
fn strip_mentions(mut text: &str) -> &str {
    loop {
        let rest = text
            .strip_prefix("@**")
            .or_else(|| text.strip_prefix("@_**"));
        let Some(rest) = rest else {
            return text;
        };
        match rest.find("**") {
            Some(end) => text = rest[end + 2..].trim_start(),
            None => return text,
        }
    }
}

/// The first whitespace-separated word and what follows it.
fn split_word(text: &str) -> (&str, &str) {
    let text = text.trim_start();
    match text.find(char::is_whitespace) {
        Some(at) => (&text[..at], &text[at..]),
        None => (text, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approvals_and_denials_with_and_without_notes() {
        assert_eq!(
            parse("approve 17"),
            OwnerReply::Approve {
                escalation: 17,
                note: None
            }
        );
        assert_eq!(
            parse("  Approve #17 ship it  "),
            OwnerReply::Approve {
                escalation: 17,
                note: Some("ship it".into())
            }
        );
        assert_eq!(
            parse("deny 17 not now"),
            OwnerReply::Deny {
                escalation: 17,
                reason: Some("not now".into())
            }
        );
        assert_eq!(
            parse("DENY 3"),
            OwnerReply::Deny {
                escalation: 3,
                reason: None
            }
        );
    }

    #[test]
    fn go_and_skip_take_exactly_one_gid() {
        assert_eq!(
            parse("go T-123"),
            OwnerReply::Go {
                gid: "T-123".into()
            }
        );
        assert_eq!(
            parse("skip `gh:o:r#4`"),
            OwnerReply::Skip {
                gid: "gh:o:r#4".into()
            }
        );
        assert_eq!(parse("go home now"), OwnerReply::Note("go home now".into()));
        assert_eq!(parse("go"), OwnerReply::Note("go".into()));
    }

    #[test]
    fn cancel_takes_a_run_or_task_and_a_reason_retry_exactly_one_gid() {
        assert_eq!(
            parse("cancel 4 wrong approach"),
            OwnerReply::Cancel {
                target: "4".into(),
                reason: Some("wrong approach".into())
            }
        );
        assert_eq!(
            parse("Cancel #4"),
            OwnerReply::Cancel {
                target: "4".into(),
                reason: None
            }
        );
        assert_eq!(
            parse("cancel `T-1`"),
            OwnerReply::Cancel {
                target: "T-1".into(),
                reason: None
            }
        );
        assert_eq!(parse("cancel"), OwnerReply::Note("cancel".into()));
        assert_eq!(parse("retry T-1"), OwnerReply::Retry { gid: "T-1".into() });
        assert_eq!(
            parse("retry it later"),
            OwnerReply::Note("retry it later".into())
        );
    }

    #[test]
    fn mentions_in_front_are_dropped() {
        assert_eq!(
            parse("@**Executor** approve 17"),
            OwnerReply::Approve {
                escalation: 17,
                note: None
            }
        );
        assert_eq!(
            parse("@_**Executor** @**Executor worker** go T-1"),
            OwnerReply::Go { gid: "T-1".into() }
        );
        assert_eq!(
            parse("@**Executor** status"),
            OwnerReply::Note("status".into())
        );
    }

    #[test]
    fn anything_else_is_a_note_kept_whole() {
        for text in [
            "please approve 17 later",
            "approve seventeen",
            "approve -4",
            "approve 0",
            "deny",
            "looks good, but use the old API",
            "",
            "@**Executor",
        ] {
            assert!(
                matches!(parse(text), OwnerReply::Note(_)),
                "{text:?} must be a note"
            );
        }
        assert_eq!(
            parse("looks good, but\nuse the old API"),
            OwnerReply::Note("looks good, but\nuse the old API".into())
        );
    }

    #[test]
    fn never_panics_on_odd_input() {
        for text in [
            "@**",
            "@_**",
            "approve #",
            "go `",
            "\u{feff}approve 1",
            "é 1",
        ] {
            let _ = parse(text);
        }
    }
}

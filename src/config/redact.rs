//! Secrets out of config errors: a TOML error quotes the line it stopped on (and a type
//! error quotes the value), so before it is shown every value written inline for a key
//! that names a secret (`token`, `key`, `secret`, `password`, `url`, and keys holding those
//! words, such as `api_key` or `webhook_url`) is replaced with `***`.
//!
//! Pure text work on the message and the file's text; it reads nothing else.
//!
//! What it must never do: let such a value through, whichever line or part of the message
//! it appears in. Keys that only name where a secret lives (`…_env`, `…_file`) are left
//! as they are: their values are names, and an error about them should say which.

/// The words that make a key a secret's.
const SECRET_WORDS: [&str; 5] = ["token", "key", "secret", "password", "url"];

/// What a secret value is shown as.
const HIDDEN: &str = "***";

/// `message` (an error about the config `text`) with every inline secret value of `text`
/// replaced, in the lines it quotes and anywhere else.
pub(crate) fn redact(message: &str, text: &str) -> String {
    let mut out = message.to_string();
    for line in text.lines() {
        let Some((redacted, values)) = redact_line(line) else {
            continue;
        };
        out = out.replace(line.trim_end(), redacted.trim_end());
        for value in values {
            // A very short value could match unrelated text; it is hidden in its line.
            if value.chars().count() >= 3 {
                out = out.replace(&value, HIDDEN);
            }
        }
    }
    out
}

/// `line` with each secret assignment's value replaced, and the values replaced (raw and
/// unquoted); `None` when it has none.
fn redact_line(line: &str) -> Option<(String, Vec<String>)> {
    let mut redacted = String::new();
    let mut values = Vec::new();
    let mut rest = line;
    while let Some(eq) = rest.find('=') {
        let (before, after) = rest.split_at(eq);
        let key = before
            .rsplit(|c: char| c == '{' || c == ',' || c.is_whitespace())
            .find(|k| !k.is_empty())
            .unwrap_or("")
            .trim_matches(|c| c == '"' || c == '\'')
            .rsplit('.')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        redacted.push_str(before);
        redacted.push('=');
        let after = &after[1..];
        if !is_secret_key(&key) {
            rest = after;
            continue;
        }
        // The value runs to the next `,` or `}` outside quotes, or to the end of the line.
        let end = value_end(after);
        let raw = &after[..end];
        let value = raw.trim();
        if !value.is_empty() {
            values.push(value.to_string());
            let unquoted = value.trim_matches(|c| c == '"' || c == '\'');
            if unquoted != value && !unquoted.is_empty() {
                values.push(unquoted.to_string());
            }
        }
        redacted.push(' ');
        redacted.push_str(HIDDEN);
        rest = &after[end..];
    }
    redacted.push_str(rest);
    (!values.is_empty()).then_some((redacted, values))
}

fn is_secret_key(key: &str) -> bool {
    !key.ends_with("_env")
        && !key.ends_with("_file")
        && SECRET_WORDS.iter().any(|word| key.contains(word))
}

/// Where an inline value starting `text` ends: a `,` or `}` outside quotes, else the end.
fn value_end(text: &str) -> usize {
    let mut quote: Option<char> = None;
    for (at, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, ',' | '}') => return at,
            (None, '#') => return at,
            _ => {}
        }
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_error_on_a_secret_line_shows_the_line_without_the_value() {
        let text = "[chat.zulip]\nsite = \"https://x\"\ntoken = \"s3cr3tTOKEN\" oops\n";
        let message = toml::from_str::<toml::Value>(text)
            .expect_err("bad TOML")
            .to_string();
        assert!(message.contains("s3cr3tTOKEN"), "toml quotes it: {message}");
        let shown = redact(&message, text);
        assert!(!shown.contains("s3cr3tTOKEN"), "{shown}");
        assert!(shown.contains("token = ***"), "{shown}");
        assert!(shown.contains("line 3"), "{shown}");
    }

    #[test]
    fn every_secret_kind_and_inline_tables_are_hidden() {
        for (line, secret) in [
            ("key = 'k-123456'", "k-123456"),
            ("api_key = \"abcdef\"", "abcdef"),
            ("secret = \"xyzzy1\"", "xyzzy1"),
            ("password = \"hunter2\"", "hunter2"),
            ("url = \"postgres://u:pw@h/db\"", "u:pw@h"),
            ("storage.url = \"postgres://u:pw@h/db\"", "u:pw@h"),
            (
                "hook = { name = \"a\", webhook_url = \"https://h/T0K3N\" }",
                "T0K3N",
            ),
        ] {
            let message = format!("error at line 1\n1 | {line}\n  | ^ bad");
            let shown = redact(&message, line);
            assert!(!shown.contains(secret), "{line}: {shown}");
            assert!(shown.contains("***"), "{line}: {shown}");
        }
        // A type error quotes the value itself.
        let text = "token = \"s3cr3tTOKEN\"\n";
        let shown = redact(
            "invalid type: string \"s3cr3tTOKEN\", expected a table",
            text,
        );
        assert!(!shown.contains("s3cr3tTOKEN"), "{shown}");
    }

    #[test]
    fn names_of_where_a_secret_lives_and_other_keys_stay() {
        let text = "token_env = \"ASANA_TOKEN\"\nkey_file = \"secrets/k\"\nname = \"pager\"\n";
        let message = "line 1: token_env = \"ASANA_TOKEN\" and name = \"pager\"";
        assert_eq!(redact(message, text), message);
    }
}

//! The parser against the examples of docs/design.md §5 and the prompts, the malformed lines,
//! and properties: round trip, never a panic, code fences.

use proptest::prelude::*;

use super::*;

fn msg(line: &str) -> Message {
    match parse_line(line) {
        Ok(Some(Parsed::Message(m))) => m,
        other => panic!("{line:?} is not a message: {other:?}"),
    }
}

fn err(line: &str) -> ParseError {
    match parse_line(line) {
        Err(e) => e,
        other => panic!("{line:?} should be malformed, got {other:?}"),
    }
}

fn args(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn message(tag: Tag, kind: &str, pairs: &[(&str, &str)], text: &str) -> Message {
    Message {
        tag,
        kind: kind.into(),
        args: args(pairs),
        text: text.into(),
    }
}

// ---------------------------------------------------------------- docs/design.md §5

#[test]
fn design_request_with_bare_values() {
    assert_eq!(
        msg("[REQUEST:create_worktree] branch=fix/tab-preview-stuck run_id=42"),
        message(
            Tag::Request,
            "create_worktree",
            &[("branch", "fix/tab-preview-stuck"), ("run_id", "42")],
            ""
        )
    );
}

#[test]
fn design_request_with_a_quoted_value() {
    assert_eq!(
        msg(r#"[REQUEST:run_tests] scheme="macOS UI Tests CI""#),
        message(
            Tag::Request,
            "run_tests",
            &[("scheme", "macOS UI Tests CI")],
            ""
        )
    );
}

#[test]
fn design_status_with_free_text() {
    assert_eq!(
        msg("[STATUS:investigation] Analysing bug..."),
        message(Tag::Status, "investigation", &[], "Analysing bug...")
    );
    assert_eq!(
        msg("[STATUS:pr_open] PR #1234 https://github.com/o/r/pull/1234"),
        message(
            Tag::Status,
            "pr_open",
            &[],
            "PR #1234 https://github.com/o/r/pull/1234"
        )
    );
}

#[test]
fn design_done_and_escalate() {
    assert_eq!(
        msg("[DONE:pr_ready] CI green, no comments"),
        message(Tag::Done, "pr_ready", &[], "CI green, no comments")
    );
    assert_eq!(
        msg("[ESCALATE:scope_expansion] Found unrelated issue in TabBar.swift"),
        message(
            Tag::Escalate,
            "scope_expansion",
            &[],
            "Found unrelated issue in TabBar.swift"
        )
    );
}

#[test]
fn design_acknowledged_marker() {
    assert_eq!(
        parse_line("[ACKNOWLEDGED: won't fix, out of scope]"),
        Ok(Some(Parsed::Acknowledged(Acknowledged {
            text: "won't fix, out of scope".into()
        })))
    );
}

// ---------------------------------------------------------------- the prompts

#[test]
fn prompt_request_with_escaped_quotes_and_free_text() {
    assert_eq!(
        msg(
            r#"[REQUEST:run_tests] scheme="macOS UI Tests CI" filter="TabPreview \"hover\" cases" needs the simulator"#
        ),
        message(
            Tag::Request,
            "run_tests",
            &[
                ("scheme", "macOS UI Tests CI"),
                ("filter", r#"TabPreview "hover" cases"#)
            ],
            "needs the simulator"
        )
    );
}

#[test]
fn prompt_examples() {
    assert_eq!(
        msg("[REQUEST:push_branch] branch=executor/t-1"),
        message(
            Tag::Request,
            "push_branch",
            &[("branch", "executor/t-1")],
            ""
        )
    );
    assert_eq!(
        msg("[STATUS:investigation] Reproduced the bug in a unit test"),
        message(
            Tag::Status,
            "investigation",
            &[],
            "Reproduced the bug in a unit test"
        )
    );
    assert_eq!(
        msg("[ESCALATE:unclear] The task can mean X or Y"),
        message(Tag::Escalate, "unclear", &[], "The task can mean X or Y")
    );
    assert_eq!(
        msg("[REQUEST:run_build]"),
        message(Tag::Request, "run_build", &[], "")
    );
    assert_eq!(
        msg(r#"[REQUEST:open_draft_pr] title="Fix the stuck tab preview""#),
        message(
            Tag::Request,
            "open_draft_pr",
            &[("title", "Fix the stuck tab preview")],
            ""
        )
    );
    // A quoted string with no key ends the pairs: it is free text, quotes included.
    assert_eq!(
        msg(r#"[REQUEST:post_comment] target=tracker "Fixed in #12""#),
        message(
            Tag::Request,
            "post_comment",
            &[("target", "tracker")],
            r#""Fixed in #12""#
        )
    );
    // The format line's placeholders are not a tag.
    assert_eq!(
        parse_line(r#"[TAG:kind] key=value key="a value with spaces" free text"#),
        Ok(None)
    );
}

/// Every inline example of the protocol prompt that starts with a tag parses, with the
/// template's variables filled in: a prompt edit cannot teach workers a line the parser
/// rejects.
#[test]
fn every_example_in_the_protocol_prompt_parses() {
    let prompt = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../src/assets/prompts/_protocol.md"
    ))
    .replace("{{ run.branch }}", "executor/t-1")
    .replace("{{ run.worktree }}", "/w/t-1");
    let mut checked = 0;
    for span in prompt.split('`').skip(1).step_by(2) {
        if !span.starts_with('[') || parse::message_start(span.as_bytes()).is_none() {
            continue;
        }
        match parse_line(span) {
            Ok(Some(_)) => checked += 1,
            other => panic!("the prompt's example {span:?} does not parse: {other:?}"),
        }
    }
    assert!(
        checked >= 8,
        "only {checked} examples found in the prompt: did its format change?"
    );
}

// ---------------------------------------------------------------- lenience and strictness

#[test]
fn leading_blanks_are_allowed_but_not_bullets_quotes_or_code() {
    assert_eq!(msg("   \t[DONE:x] ok").kind, "x");
    assert_eq!(parse_line("- [DONE:x] ok"), Ok(None));
    assert_eq!(parse_line("> [DONE:x] ok"), Ok(None));
    assert_eq!(parse_line("`[DONE:x]` when finished"), Ok(None));
    assert_eq!(parse_line("I will write [DONE:x] at the end"), Ok(None));
}

#[test]
fn unknown_or_lowercase_tags_are_ordinary_lines() {
    for line in [
        "[request:push_branch] branch=x",
        "[INFO:x] y",
        "[REQUEST push_branch]",
        "[DONE]",
        "[",
        "",
        "   ",
        "[ACK: x]",
    ] {
        assert_eq!(parse_line(line), Ok(None), "{line:?}");
    }
}

#[test]
fn line_endings_are_dropped() {
    assert_eq!(msg("[DONE:x] ok\n").text, "ok");
    assert_eq!(msg("[DONE:x] ok\r\n").text, "ok");
    assert_eq!(msg("[DONE:x] ok  \t").text, "ok");
}

#[test]
fn pairs_end_at_the_first_token_that_is_not_a_pair() {
    assert_eq!(
        msg("[STATUS:tests] passed=12 of 14, see log=out.txt"),
        message(
            Tag::Status,
            "tests",
            &[("passed", "12")],
            "of 14, see log=out.txt"
        )
    );
    assert_eq!(
        msg("[STATUS:x] url=https://x.org/?a=b https://y.org/?c=d"),
        message(
            Tag::Status,
            "x",
            &[("url", "https://x.org/?a=b")],
            "https://y.org/?c=d"
        )
    );
    // `=` first, or a key with characters outside [A-Za-z0-9_], starts the text.
    assert_eq!(msg("[STATUS:x] =y").text, "=y");
    assert_eq!(msg("[STATUS:x] a-b=c").text, "a-b=c");
}

#[test]
fn bare_values_keep_equals_signs_and_backslashes_and_may_be_empty() {
    assert_eq!(
        msg(r"[REQUEST:x] a=b=c path=C:\tmp\x empty= last").args,
        args(&[("a", "b=c"), ("path", r"C:\tmp\x"), ("empty", "")])
    );
    assert_eq!(msg(r"[REQUEST:x] empty=").args, args(&[("empty", "")]));
}

#[test]
fn quoted_values_unescape_quotes_and_backslashes_and_keep_other_escapes() {
    assert_eq!(
        msg(r#"[REQUEST:x] v="a \"b\" \\ c \n \x é=日本""#).args,
        args(&[("v", r#"a "b" \ c \n \x é=日本"#)])
    );
    assert_eq!(msg(r#"[REQUEST:x] v="""#).args, args(&[("v", "")]));
    assert_eq!(msg(r#"[REQUEST:x] v="\\""#).args, args(&[("v", "\\")]));
    assert_eq!(msg("[REQUEST:x] v=\"a\tb\"\tt").text, "t");
}

#[test]
fn keys_may_hold_capitals_and_digits() {
    assert_eq!(msg("[REQUEST:x] Run_ID2=7").args, args(&[("Run_ID2", "7")]));
}

#[test]
fn any_utf8_in_values_and_text() {
    assert_eq!(
        msg("[STATUS:progress] who=\"José 日本\" 🦀 fertig übermorgen"),
        message(
            Tag::Status,
            "progress",
            &[("who", "José 日本")],
            "🦀 fertig übermorgen"
        )
    );
    assert_eq!(msg("[STATUS:x] v=日本=語").args, args(&[("v", "日本=語")]));
}

// ---------------------------------------------------------------- malformed lines

#[test]
fn malformed_lines_name_the_column_and_what_was_expected() {
    let cases: &[(&str, usize, ParseErrorKind)] = &[
        ("[DONE:pr_ready", 15, ParseErrorKind::MissingBracket),
        ("[DONE:", 7, ParseErrorKind::MissingBracket),
        ("[DONE:]", 7, ParseErrorKind::EmptyKind),
        (
            "[DONE: pr_ready]",
            7,
            ParseErrorKind::BadKind {
                found: FoundChar(' '),
            },
        ),
        (
            "[DONE:Pr_ready]",
            7,
            ParseErrorKind::BadKind {
                found: FoundChar('P'),
            },
        ),
        (
            "[DONE:pr-ready]",
            9,
            ParseErrorKind::BadKind {
                found: FoundChar('-'),
            },
        ),
        (
            "  [STATUS:進捗] x",
            11,
            ParseErrorKind::BadKind {
                found: FoundChar('進'),
            },
        ),
        (
            "[DONE:x]text",
            9,
            ParseErrorKind::NoSpaceAfterTag {
                found: FoundChar('t'),
            },
        ),
        (
            r#"[REQUEST:run_tests] scheme="macOS UI"#,
            28,
            ParseErrorKind::UnterminatedQuote {
                key: "scheme".into(),
            },
        ),
        (
            r#"[REQUEST:x] v="a\""#,
            15,
            ParseErrorKind::UnterminatedQuote { key: "v".into() },
        ),
        (
            r#"[REQUEST:x] v="a"b"#,
            18,
            ParseErrorKind::NoSpaceAfterQuote {
                key: "v".into(),
                found: FoundChar('b'),
            },
        ),
        (
            r#"[REQUEST:x] title=a"b""#,
            20,
            ParseErrorKind::QuoteInBareValue {
                key: "title".into(),
            },
        ),
        (
            "[REQUEST:push_branch] branch=executor/x branch=main",
            41,
            ParseErrorKind::DuplicateKey {
                key: "branch".into(),
            },
        ),
        ("[DONE:x] a\nb", 11, ParseErrorKind::LineBreak),
        ("[DONE:x] a\rb", 11, ParseErrorKind::LineBreak),
        (
            "[ACKNOWLEDGED: no bracket",
            26,
            ParseErrorKind::MissingBracket,
        ),
    ];
    for (line, column, kind) in cases {
        let e = err(line);
        assert_eq!((&e.kind, e.column), (kind, *column), "{line:?}: got {e}");
        assert!(e
            .to_string()
            .starts_with(&format!("column {column}: expected")));
    }
}

#[test]
fn error_messages_read_as_instructions() {
    assert_eq!(
        err("[DONE: pr_ready]").to_string(),
        "column 7: expected a snake_case kind character ([a-z0-9_]) or `]`, found a space"
    );
    assert_eq!(
        err(r#"[REQUEST:x] title=a"b""#).to_string(),
        "column 20: expected no `\"` inside the unquoted value of `title` (quote the whole value: title=\"…\")"
    );
}

#[test]
fn non_utf8_message_lines_are_errors_and_other_lines_are_skipped() {
    assert_eq!(parse_bytes(b"\xff\xfe plain output"), Ok(None));
    assert_eq!(parse_bytes(b"{\"type\":\"x\"}\n"), Ok(None));
    let e = parse_bytes(b"[DONE:x] caf\xe9\n").unwrap_err();
    assert_eq!(e.column, 13);
    assert_eq!(e.kind, ParseErrorKind::NotUtf8 { byte: 0xe9 });
    assert_eq!(
        parse_bytes("[DONE:x] café\n".as_bytes()),
        parse_line("[DONE:x] café")
    );
}

// ---------------------------------------------------------------- acknowledgements

#[test]
fn acknowledged_text_runs_to_the_last_bracket() {
    let ack = |line: &str| match parse_line(line) {
        Ok(Some(Parsed::Acknowledged(a))) => a.text,
        other => panic!("{line:?}: {other:?}"),
    };
    assert_eq!(ack("[ACKNOWLEDGED: done [see #3]]"), "done [see #3]");
    assert_eq!(ack("[ACKNOWLEDGED:fixed] thanks"), "fixed");
    assert_eq!(ack("  [ACKNOWLEDGED:]"), "");
}

// ---------------------------------------------------------------- rendering, JSON, actions

#[test]
fn to_line_quotes_only_what_needs_quotes() {
    let m = message(
        Tag::Request,
        "run_tests",
        &[
            ("scheme", "macOS UI Tests CI"),
            ("filter", r#"a "b" \c"#),
            ("branch", "executor/x"),
            ("empty", ""),
            ("eq", "a=b"),
        ],
        "needs the simulator",
    );
    let line = m.to_line();
    assert_eq!(
        line,
        r#"[REQUEST:run_tests] scheme="macOS UI Tests CI" filter="a \"b\" \\c" branch=executor/x empty="" eq="a=b" needs the simulator"#
    );
    assert_eq!(msg(&line), m);
    assert_eq!(m.to_string(), line);
}

#[test]
fn json_form_has_args_as_an_object_in_order() {
    let m = msg(r#"[REQUEST:push_branch] branch=executor/x remote=origin now please"#);
    assert_eq!(
        serde_json::to_string(&Parsed::Message(m)).unwrap(),
        r#"{"tag":"REQUEST","kind":"push_branch","args":{"branch":"executor/x","remote":"origin"},"text":"now please"}"#
    );
    let ack = parse_line("[ACKNOWLEDGED: won't fix]").unwrap().unwrap();
    assert_eq!(
        serde_json::to_string(&ack).unwrap(),
        r#"{"tag":"ACKNOWLEDGED","text":"won't fix"}"#
    );
}

#[test]
fn requests_become_policy_actions_and_other_tags_do_not() {
    let m = msg("[REQUEST:push_branch] branch=executor/x remote=origin because");
    assert_eq!(
        m.to_action(),
        Some(
            crate::policy::Action::new("push_branch")
                .with("branch", "executor/x")
                .with("remote", "origin")
        )
    );
    assert_eq!(m.arg("remote"), Some("origin"));
    assert_eq!(m.arg("nope"), None);
    assert_eq!(msg("[DONE:push_branch] branch=x").to_action(), None);
}

#[test]
fn a_request_line_is_judged_by_the_worker_contract() {
    use crate::policy::{Contract, Decision, Scope};
    let contract = Contract::parse("worker-policy.json", crate::policy::WORKER_CONTRACT)
        .unwrap_or_else(|e| panic!("{e}"));
    let scope = Scope::new("/w/run", Some("executor/run-1"));
    let decide = |line: &str| {
        let action = msg(line).to_action().expect("a request");
        contract.decide(&action, &scope).decision
    };
    assert_eq!(
        decide("[REQUEST:push_branch] branch=executor/run-1"),
        Decision::Approve
    );
    assert_eq!(decide("[REQUEST:push_branch] branch=main"), Decision::Deny);
    assert_eq!(decide("[REQUEST:merge_pr] pr=12"), Decision::Escalate);
}

// ---------------------------------------------------------------- text blocks and fences

#[test]
fn messages_in_a_text_block_are_found_in_order() {
    let text =
        "Wrote out.txt.\n[STATUS:tests] all green\r\n  [DONE:pr_ready] summary=x\nnot [DONE:x]\n";
    let found: Vec<_> = messages_in(text).collect();
    assert_eq!(
        found,
        vec![
            Ok(message(Tag::Status, "tests", &[], "all green")),
            Ok(message(Tag::Done, "pr_ready", &[("summary", "x")], "")),
        ]
    );
}

#[test]
fn lines_inside_fenced_code_blocks_are_not_messages() {
    let text = "\
Here is how I will report:
```text
[DONE:pr_ready] example inside a fence
```
~~~~
[REQUEST:merge_pr] inside tildes
```
[REQUEST:merge_pr] still inside: a backtick run does not close a tilde fence
~~~~
  ````md
  ```
  [REQUEST:merge_pr] a shorter fence does not close a longer one
  ````
[DONE:pr_ready] real one
";
    let found: Vec<_> = messages_in(text).collect();
    assert_eq!(
        found,
        vec![Ok(message(Tag::Done, "pr_ready", &[], "real one"))]
    );
}

#[test]
fn an_unclosed_fence_runs_to_the_end() {
    let mut scanner = Scanner::new();
    assert_eq!(scanner.line("```"), Ok(None));
    assert_eq!(scanner.line("[DONE:x]"), Ok(None));
    assert!(scanner.in_fence());
    assert_eq!(messages_in("```\n[DONE:x]").count(), 0);
}

#[test]
fn two_backticks_or_inline_triple_backticks_are_not_a_fence() {
    assert_eq!(messages_in("``x``\n[DONE:x]").count(), 1);
    assert_eq!(messages_in("```inline``` code\n[DONE:x]").count(), 1);
}

#[test]
fn scan_gives_line_numbers_errors_and_acknowledgements() {
    let text = "a\n[DONE:Bad]\n[ACKNOWLEDGED: ok]\n[ACKNOWLEDGED: broken\n";
    let found: Vec<_> = scan(text).collect();
    assert_eq!(found.len(), 3);
    assert_eq!((found[0].line_number, found[0].line), (2, "[DONE:Bad]"));
    assert!(found[0].parsed.is_err());
    assert_eq!(found[1].line_number, 3);
    assert!(matches!(found[1].parsed, Ok(Parsed::Acknowledged(_))));
    // messages_in leaves markers out, broken ones too.
    assert_eq!(messages_in(text).count(), 1);
}

// ---------------------------------------------------------------- linearity

#[test]
fn many_distinct_keys_and_long_values_parse_in_one_pass() {
    let mut line = String::from("[REQUEST:x]");
    for i in 0..200_000 {
        line.push_str(&format!(" k{i}=v"));
    }
    assert_eq!(msg(&line).args.len(), 200_000);
    line.push_str(" k7=again");
    assert!(matches!(
        err(&line).kind,
        ParseErrorKind::DuplicateKey { .. }
    ));
    let long = format!("[REQUEST:x] v=\"{}", "\\\\a".repeat(1_000_000));
    assert!(matches!(
        err(&long).kind,
        ParseErrorKind::UnterminatedQuote { .. }
    ));
}

// ---------------------------------------------------------------- properties

fn arb_tag() -> impl Strategy<Value = Tag> {
    prop::sample::select(Tag::ALL.to_vec())
}

/// Any character but line breaks, weighted towards the ones the grammar cares about.
fn arb_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => prop::sample::select(vec![' ', '\t', '"', '\\', '=', '[', ']', ':', 'a', 'Z', '_', '-', 'é', '日', '🦀']),
        2 => any::<char>().prop_filter("no line breaks", |c| *c != '\n' && *c != '\r'),
    ]
}

fn arb_value() -> impl Strategy<Value = String> {
    prop::collection::vec(arb_char(), 0..12).prop_map(|cs| cs.into_iter().collect())
}

/// Free text as a parser returns it: trimmed, and not starting with a `key=` token.
fn arb_text() -> impl Strategy<Value = String> {
    arb_value().prop_map(|s| {
        let s = s.trim_matches([' ', '\t']).to_string();
        let first = s.split([' ', '\t']).next().unwrap_or("");
        let key_len = first
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        if key_len > 0 && first.as_bytes().get(key_len) == Some(&b'=') {
            format!("-{s}")
        } else {
            s
        }
    })
}

fn arb_message() -> impl Strategy<Value = Message> {
    (
        arb_tag(),
        "[a-z0-9_]{1,12}",
        prop::collection::btree_map("[A-Za-z0-9_]{1,8}", arb_value(), 0..5),
        arb_text(),
    )
        .prop_map(|(tag, kind, args, text)| Message {
            tag,
            kind,
            args: args.into_iter().collect(),
            text,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn generated_messages_round_trip(m in arb_message()) {
        let line = m.to_line();
        prop_assert_eq!(parse_line(&line), Ok(Some(Parsed::Message(m.clone()))), "{}", line);
        prop_assert_eq!(parse_bytes(line.as_bytes()), Ok(Some(Parsed::Message(m))));
    }

    #[test]
    fn generated_acknowledgements_round_trip(text in arb_text()) {
        let ack = Acknowledged { text };
        prop_assert_eq!(
            parse_line(&ack.to_line()),
            Ok(Some(Parsed::Acknowledged(ack)))
        );
    }

    #[test]
    fn whatever_parses_renders_back_to_itself(
        tag in prop::sample::select(vec!["[REQUEST:", "[DONE:", "[ACKNOWLEDGED:", "  [STATUS:"]),
        rest in prop::collection::vec(arb_char(), 0..40),
    ) {
        let line = format!("{tag}{}", rest.into_iter().collect::<String>());
        if let Ok(Some(parsed)) = parse_line(&line) {
            prop_assert_eq!(parse_line(&parsed.to_line()), Ok(Some(parsed)));
        }
    }

    #[test]
    fn arbitrary_strings_never_panic(s in "\\PC*") {
        let _ = parse_line(&s);
        let _ = scan(&s).count();
        let with_prefix = format!("[REQUEST:{s}");
        let _ = parse_line(&with_prefix);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_bytes(&bytes);
        let mut prefixed = b"[ESCALATE:".to_vec();
        prefixed.extend_from_slice(&bytes);
        let _ = parse_bytes(&prefixed);
        let mut scanner = Scanner::new();
        for line in prefixed.split(|b| *b == b'\n') {
            let _ = scanner.line_bytes(line);
        }
    }

    #[test]
    fn bytes_and_str_entry_points_agree(s in "\\PC*") {
        prop_assert_eq!(parse_bytes(s.as_bytes()), parse_line(&s));
    }
}

//! Reading the analyzer agent's answer: the triage of one task, found in what the agent
//! wrote and checked field by field.
//!
//! Where the answer is looked for, first found wins:
//! 1. the agent's structured output (Claude's `structured_output`, when it was started with
//!    `--json-schema` [`schema`]);
//! 2. the last fenced ```` ```json ```` block of its text (or, when it wrote none tagged
//!    `json`, its last fenced block that holds a JSON object);
//! 3. its last text, or all of its text, when that is a JSON object and nothing else.
//!
//! Checked strictly: an unknown status, a priority that is not an integer from 1 to 4, an
//! unknown complexity or feasibility, a missing or empty summary is an [`AnswerError`] naming
//! the field. Fields it does not know are ignored (a model may add its reasoning).
//!
//! Pure: no I/O, and nothing here trusts the agent's text (a malformed answer is an error,
//! never a panic).

use serde::Serialize;
use serde_json::{json, Value};
use thiserror::Error;

use crate::core::queue::Verdict;

/// The statuses the analyzer may answer, as written in the answer.
pub const STATUSES: [&str; 3] = ["for_review", "awaiting_go", "skip"];
/// The complexities it may answer.
pub const COMPLEXITIES: [&str; 3] = ["small", "medium", "large"];
/// The feasibilities it may answer.
pub const FEASIBILITIES: [&str; 3] = ["high", "medium", "low"];
/// The priorities it may answer: 1 is the most urgent.
pub const PRIORITIES: std::ops::RangeInclusive<i64> = 1..=4;

/// Longest excerpt of the agent's text quoted in an error.
const EXCERPT: usize = 200;

/// What the analyzer found about one task. Serialised with the column names of
/// `executor_queue` (`status`, `priority`, `complexity`, `feasibility`, `analysis_summary`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Triage {
    #[serde(rename = "status", serialize_with = "serialize_verdict")]
    pub verdict: Verdict,
    /// 1 (most urgent) to 4.
    pub priority: Option<i64>,
    /// `small`, `medium` or `large`.
    pub complexity: Option<String>,
    /// `high`, `medium` or `low`.
    pub feasibility: Option<String>,
    /// Never empty.
    #[serde(rename = "analysis_summary")]
    pub summary: String,
}

/// The status `verdict` moves a task to, as the answer and the queue spell it.
pub fn verdict_name(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::ForReview => "for_review",
        Verdict::AwaitingGo => "awaiting_go",
        Verdict::Skip => "skip",
    }
}

fn serialize_verdict<S: serde::Serializer>(verdict: &Verdict, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(verdict_name(*verdict))
}

/// Why an answer is not a triage.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum AnswerError {
    #[error("the agent gave no answer (no text and no structured output)")]
    Empty,
    #[error("no JSON answer found: expected a ```json block; the agent wrote: {excerpt}")]
    NoJson { excerpt: String },
    #[error("the answer is not valid JSON ({detail}): {excerpt}")]
    NotJson { detail: String, excerpt: String },
    #[error("the answer is JSON but not an object: {excerpt}")]
    NotAnObject { excerpt: String },
    #[error("the answer has no `{field}`")]
    Missing { field: &'static str },
    #[error("the answer's `{field}` is {found}; expected {expected}")]
    Invalid {
        field: &'static str,
        found: String,
        expected: String,
    },
}

/// The JSON Schema of an answer, for agents that can be held to one (Claude's
/// `--json-schema`). It says what [`parse_triage`] checks.
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": STATUSES},
            "priority": {
                "type": "integer",
                "minimum": PRIORITIES.start(),
                "maximum": PRIORITIES.end(),
            },
            "complexity": {"type": "string", "enum": COMPLEXITIES},
            "feasibility": {"type": "string", "enum": FEASIBILITIES},
            "analysis_summary": {"type": "string", "minLength": 1},
        },
        "required": ["status", "priority", "complexity", "feasibility", "analysis_summary"],
        "additionalProperties": false,
    })
}

/// The triage in what the agent produced: its structured output if it has one, else its
/// texts (in the order written; see the module comment for where the answer is looked for).
pub fn read_triage<'a>(
    structured: Option<&Value>,
    texts: impl IntoIterator<Item = &'a str>,
) -> Result<Triage, AnswerError> {
    if let Some(value) = structured.filter(|value| !value.is_null()) {
        return parse_triage(value);
    }
    let texts: Vec<&str> = texts
        .into_iter()
        .filter(|text| !text.trim().is_empty())
        .collect();
    let Some(last) = texts.last() else {
        return Err(AnswerError::Empty);
    };
    // An agent whose every output line is a text (a command) spreads one block over many
    // texts: the blocks are looked for in all of them together.
    let all = texts.join("\n");
    let candidate = match last_fenced_block(&all) {
        Some(block) => block,
        None => {
            let last = last.trim();
            let whole = all.trim();
            if last.starts_with('{') {
                last
            } else if whole.starts_with('{') {
                whole
            } else {
                return Err(AnswerError::NoJson {
                    excerpt: excerpt(whole),
                });
            }
        }
    };
    let value: Value = serde_json::from_str(candidate).map_err(|error| AnswerError::NotJson {
        detail: error.to_string(),
        excerpt: excerpt(candidate),
    })?;
    parse_triage(&value)
}

/// Checks one answer object.
pub fn parse_triage(value: &Value) -> Result<Triage, AnswerError> {
    let Value::Object(fields) = value else {
        return Err(AnswerError::NotAnObject {
            excerpt: excerpt(&value.to_string()),
        });
    };
    let present = |name: &str| fields.get(name).filter(|value| !value.is_null());

    let status = present("status").ok_or(AnswerError::Missing { field: "status" })?;
    let verdict = match status
        .as_str()
        .map(|s| s.trim().to_ascii_lowercase())
        .as_deref()
    {
        Some("for_review") => Verdict::ForReview,
        Some("awaiting_go") => Verdict::AwaitingGo,
        Some("skip") => Verdict::Skip,
        _ => return Err(invalid("status", status, one_of(&STATUSES))),
    };

    let priority = match present("priority") {
        None => None,
        Some(found) => match found.as_i64() {
            Some(priority) if PRIORITIES.contains(&priority) => Some(priority),
            _ => {
                return Err(invalid(
                    "priority",
                    found,
                    format!(
                        "an integer from {} (most urgent) to {}",
                        PRIORITIES.start(),
                        PRIORITIES.end()
                    ),
                ))
            }
        },
    };

    let complexity = word(present("complexity"), "complexity", &COMPLEXITIES)?;
    let feasibility = word(present("feasibility"), "feasibility", &FEASIBILITIES)?;

    let summary = present("analysis_summary").ok_or(AnswerError::Missing {
        field: "analysis_summary",
    })?;
    let summary = match summary.as_str().map(str::trim) {
        Some(text) if !text.is_empty() => text.to_string(),
        _ => {
            return Err(invalid(
                "analysis_summary",
                summary,
                "a non-empty text".into(),
            ))
        }
    };

    Ok(Triage {
        verdict,
        priority,
        complexity,
        feasibility,
        summary,
    })
}

/// An optional field whose value is one of `allowed` (case and surrounding blanks ignored).
fn word(
    found: Option<&Value>,
    field: &'static str,
    allowed: &[&str],
) -> Result<Option<String>, AnswerError> {
    let Some(found) = found else {
        return Ok(None);
    };
    let normalised = found.as_str().map(|s| s.trim().to_ascii_lowercase());
    match normalised {
        Some(word) if allowed.contains(&word.as_str()) => Ok(Some(word)),
        _ => Err(invalid(field, found, one_of(allowed))),
    }
}

fn invalid(field: &'static str, found: &Value, expected: String) -> AnswerError {
    AnswerError::Invalid {
        field,
        found: excerpt(&found.to_string()),
        expected,
    }
}

fn one_of(words: &[&str]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
    format!("one of {}", quoted.join(", "))
}

/// The body of the last fenced block tagged `json` in `text`; without one, the body of the
/// last fenced block that starts with `{`.
fn last_fenced_block(text: &str) -> Option<&str> {
    let blocks = fenced_blocks(text);
    blocks
        .iter()
        .rev()
        .find(|(info, _)| info.eq_ignore_ascii_case("json"))
        .or_else(|| {
            blocks
                .iter()
                .rev()
                .find(|(_, body)| body.trim_start().starts_with('{'))
        })
        .map(|(_, body)| body.trim())
}

/// Every fenced code block of `text` as (info string, body). A fence is a line of three or
/// more backticks (after blanks); it is closed by a line of at least as many backticks and
/// nothing else. An unclosed block runs to the end of the text.
fn fenced_blocks(text: &str) -> Vec<(&str, &str)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, &str, usize)> = None; // (fence length, info, body start)
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim();
        let ticks = trimmed.bytes().take_while(|b| *b == b'`').count();
        match open {
            None if ticks >= 3 => {
                let info = trimmed[ticks..].trim();
                // A backtick in the info string means inline code, not a fence.
                if !info.contains('`') {
                    open = Some((ticks, info, offset));
                }
            }
            Some((fence, info, body)) if ticks >= fence && trimmed.len() == ticks => {
                blocks.push((info, &text[body..start]));
                open = None;
            }
            _ => {}
        }
    }
    if let Some((_, info, body)) = open {
        blocks.push((info, &text[body.min(text.len())..]));
    }
    blocks
}

/// `text` on one line, cut to [`EXCERPT`] bytes at a character boundary.
pub(crate) fn excerpt(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.len() <= EXCERPT {
        return flat;
    }
    let mut end = EXCERPT;
    while !flat.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &flat[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = r#"{"status": "awaiting_go", "priority": 2, "complexity": "small", "feasibility": "high", "analysis_summary": "A one-line fix in the tab bar."}"#;

    fn expected() -> Triage {
        Triage {
            verdict: Verdict::AwaitingGo,
            priority: Some(2),
            complexity: Some("small".into()),
            feasibility: Some("high".into()),
            summary: "A one-line fix in the tab bar.".into(),
        }
    }

    fn with(field: &str, value: Value) -> Value {
        let mut answer: Value = serde_json::from_str(VALID).expect("valid");
        answer[field] = value;
        answer
    }

    fn without(field: &str) -> Value {
        let mut answer: Value = serde_json::from_str(VALID).expect("valid");
        answer.as_object_mut().expect("object").remove(field);
        answer
    }

    #[test]
    fn structured_output_comes_first() {
        let structured: Value = serde_json::from_str(VALID).expect("valid");
        let text = "```json\n{\"status\": \"skip\", \"analysis_summary\": \"no\"}\n```";
        assert_eq!(read_triage(Some(&structured), [text]), Ok(expected()));
        // A null structured output is none: the text is read.
        assert_eq!(
            read_triage(Some(&Value::Null), [text]).map(|t| t.verdict),
            Ok(Verdict::Skip)
        );
    }

    #[test]
    fn the_last_json_block_is_the_answer() {
        let text = format!(
            "Looking at it.\n\n```json\n{{\"status\": \"skip\", \"analysis_summary\": \"draft\"}}\n```\n\nOn reflection:\n\n```json\n{VALID}\n```\n"
        );
        assert_eq!(read_triage(None, [text.as_str()]), Ok(expected()));
        // Across texts too: the last text's block wins over an earlier one's.
        let first = "```json\n{\"status\": \"skip\", \"analysis_summary\": \"x\"}\n```";
        let last = format!("```JSON\n{VALID}\n```");
        assert_eq!(read_triage(None, [first, last.as_str()]), Ok(expected()));
    }

    #[test]
    fn a_block_spread_over_many_texts_is_read_whole() {
        // A command agent: every output line is one text.
        let lines = [
            "thinking about it",
            "```json",
            "{",
            r#"  "status": "awaiting_go", "priority": 2,"#,
            r#"  "complexity": "small", "feasibility": "high","#,
            r#"  "analysis_summary": "A one-line fix in the tab bar.""#,
            "}",
            "```",
        ];
        assert_eq!(read_triage(None, lines), Ok(expected()));
    }

    #[test]
    fn an_untagged_block_with_an_object_is_taken_when_no_json_block_is_there() {
        let text = format!("```\n{VALID}\n```");
        assert_eq!(read_triage(None, [text.as_str()]), Ok(expected()));
        // A json-tagged block wins over a later untagged one.
        let text = format!(
            "```json\n{VALID}\n```\n```\n{{\"status\": \"skip\", \"analysis_summary\": \"x\"}}\n```"
        );
        assert_eq!(read_triage(None, [text.as_str()]), Ok(expected()));
    }

    #[test]
    fn a_bare_object_is_taken_as_the_last_text_or_the_whole_text() {
        assert_eq!(read_triage(None, ["Here it is:", VALID]), Ok(expected()));
        let pretty = serde_json::to_string_pretty(&serde_json::from_str::<Value>(VALID).unwrap())
            .expect("pretty");
        let lines: Vec<&str> = pretty.lines().collect();
        assert_eq!(read_triage(None, lines), Ok(expected()));
    }

    #[test]
    fn optional_fields_may_be_left_out_or_null_and_words_ignore_case() {
        let answer = json!({"status": " For_Review ", "priority": null, "complexity": "LARGE", "analysis_summary": "  Needs the owner.  "});
        assert_eq!(
            parse_triage(&answer),
            Ok(Triage {
                verdict: Verdict::ForReview,
                priority: None,
                complexity: Some("large".into()),
                feasibility: None,
                summary: "Needs the owner.".into(),
            })
        );
        // Fields it does not know are ignored.
        assert_eq!(
            parse_triage(&with("reasoning", json!("because"))),
            Ok(expected())
        );
    }

    #[test]
    fn nothing_to_read_is_an_error() {
        assert_eq!(read_triage(None, []), Err(AnswerError::Empty));
        assert_eq!(read_triage(None, ["  ", "\n"]), Err(AnswerError::Empty));
        match read_triage(None, ["I think it should be skipped."]) {
            Err(AnswerError::NoJson { excerpt }) => {
                assert!(excerpt.contains("skipped"), "{excerpt}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_block_that_is_not_json_or_not_an_object_is_an_error() {
        assert!(matches!(
            read_triage(None, ["```json\n{\"status\": \"skip\",\n```"]),
            Err(AnswerError::NotJson { .. })
        ));
        assert!(matches!(
            read_triage(None, ["{not json"]),
            Err(AnswerError::NotJson { .. })
        ));
        assert!(matches!(
            read_triage(None, ["```json\n[1, 2]\n```"]),
            Err(AnswerError::NotAnObject { .. })
        ));
        assert!(matches!(
            read_triage(Some(&json!("awaiting_go")), []),
            Err(AnswerError::NotAnObject { .. })
        ));
    }

    #[test]
    fn an_unknown_status_is_an_error_naming_it() {
        let error = parse_triage(&with("status", json!("approved"))).unwrap_err();
        assert!(matches!(
            error,
            AnswerError::Invalid {
                field: "status",
                ..
            }
        ));
        let message = error.to_string();
        assert!(
            message.contains("`status`") && message.contains("\"approved\""),
            "{message}"
        );
        assert!(message.contains("awaiting_go"), "{message}");
        assert!(matches!(
            parse_triage(&with("status", json!(1))),
            Err(AnswerError::Invalid {
                field: "status",
                ..
            })
        ));
        assert_eq!(
            parse_triage(&without("status")),
            Err(AnswerError::Missing { field: "status" })
        );
    }

    #[test]
    fn a_priority_outside_one_to_four_or_not_an_integer_is_an_error() {
        for bad in [
            json!(0),
            json!(5),
            json!(-1),
            json!(2.5),
            json!("2"),
            json!(true),
        ] {
            match parse_triage(&with("priority", bad.clone())) {
                Err(AnswerError::Invalid {
                    field: "priority", ..
                }) => {}
                other => panic!("{bad}: {other:?}"),
            }
        }
        for good in 1..=4 {
            assert_eq!(
                parse_triage(&with("priority", json!(good))).map(|t| t.priority),
                Ok(Some(good))
            );
        }
        let message = parse_triage(&with("priority", json!(9)))
            .unwrap_err()
            .to_string();
        assert!(message.contains("`priority` is 9"), "{message}");
    }

    #[test]
    fn an_unknown_complexity_or_feasibility_is_an_error() {
        assert!(matches!(
            parse_triage(&with("complexity", json!("tiny"))),
            Err(AnswerError::Invalid {
                field: "complexity",
                ..
            })
        ));
        assert!(matches!(
            parse_triage(&with("feasibility", json!(3))),
            Err(AnswerError::Invalid {
                field: "feasibility",
                ..
            })
        ));
    }

    #[test]
    fn a_missing_or_empty_summary_is_an_error() {
        assert_eq!(
            parse_triage(&without("analysis_summary")),
            Err(AnswerError::Missing {
                field: "analysis_summary"
            })
        );
        assert_eq!(
            parse_triage(&with("analysis_summary", Value::Null)),
            Err(AnswerError::Missing {
                field: "analysis_summary"
            })
        );
        for bad in [json!("  "), json!(["a"])] {
            assert!(matches!(
                parse_triage(&with("analysis_summary", bad)),
                Err(AnswerError::Invalid {
                    field: "analysis_summary",
                    ..
                })
            ));
        }
    }

    #[test]
    fn a_triage_serialises_with_the_queue_column_names() {
        let json = serde_json::to_value(expected()).expect("serialises");
        assert_eq!(
            json,
            json!({"status": "awaiting_go", "priority": 2, "complexity": "small", "feasibility": "high", "analysis_summary": "A one-line fix in the tab bar."})
        );
        for (verdict, name) in [
            (Verdict::ForReview, "for_review"),
            (Verdict::AwaitingGo, "awaiting_go"),
            (Verdict::Skip, "skip"),
        ] {
            assert_eq!(verdict_name(verdict), name);
            assert!(STATUSES.contains(&name));
        }
    }

    #[test]
    fn the_schema_allows_exactly_what_is_checked() {
        let schema = schema();
        assert_eq!(schema["properties"]["status"]["enum"], json!(STATUSES));
        assert_eq!(schema["properties"]["priority"]["minimum"], json!(1));
        assert_eq!(schema["properties"]["priority"]["maximum"], json!(4));
        let required: Vec<&str> = schema["required"]
            .as_array()
            .expect("required")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for field in required {
            assert!(schema["properties"].get(field).is_some(), "{field}");
        }
    }

    #[test]
    fn fences_need_a_closing_line_of_backticks_only() {
        assert_eq!(
            fenced_blocks("a\n```json\n{}\n```\nb\n````\n```\n````\n"),
            vec![("json", "{}\n"), ("", "```\n")]
        );
        // Unclosed: to the end.
        assert_eq!(
            fenced_blocks("```json\n{\"a\":1}"),
            vec![("json", "{\"a\":1}")]
        );
        // Inline code is not a fence.
        assert!(fenced_blocks("```not `a` fence``` here").is_empty());
    }

    #[test]
    fn excerpts_are_one_bounded_line() {
        let long = "é".repeat(500);
        let cut = excerpt(&long);
        assert!(cut.len() <= EXCERPT + "…".len(), "{}", cut.len());
        assert_eq!(excerpt("a\n  b\tc"), "a b c");
    }
}

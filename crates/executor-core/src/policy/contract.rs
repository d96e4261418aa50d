//! The role contract file: parse, validate strictly, compile.
//!
//! A contract is parsed twice: serde reads the JSON into raw structs (unknown fields,
//! missing fields and unknown decisions are serde errors), then each rule is validated and
//! compiled (globs and regexes built once here, so that deciding never compiles anything).
//! Every error names the file, the line (and column where serde knows it) and the field,
//! e.g. `roles/worker-policy.json:7: rules[3].decision: missing field`. The line of a rule is
//! exact: rules are kept as raw JSON slices of the text, whose offset gives their position.
//!
//! The only I/O is [`Contract::load`]; [`Contract::parse`] is pure.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use regex::Regex;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::Decision;

/// The contract versions this engine understands.
pub const SUPPORTED_VERSIONS: &[u32] = &[1];

/// The argument names a `when` condition may test directly (besides `branch`, `path` and
/// `command`, which have their own matching). Anything else must be written `arg:NAME`, so
/// that a typo (`"brnach"`) is an error rather than a condition that never holds.
#[rustfmt::skip]
pub const KNOWN_ARGS: &[&str] = &[
    "target", "remote", "force", "delete", "tool", "server", "host", "url", "query", "readonly",
    "program", "reason", "pr", "base", "on", "method", "run_id",
    "change",
];

/// A contract that failed to load. Shown as `file:line[:column]: field: message`.
#[derive(Debug, thiserror::Error)]
pub enum ContractError {
    /// The file is not there. Never answered with a built-in contract instead: the owner's
    /// file is the policy, and a run judged by another one than they wrote is a guess.
    #[error("{file} does not exist; `executor init` writes it (the built-in contract is not used in its place)")]
    Missing { file: String },
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}:{line}{}: {field}: {message}", column.map(|c| format!(":{c}")).unwrap_or_default())]
    Invalid {
        file: String,
        line: usize,
        column: Option<usize>,
        /// The JSON path of the offending field: `rules[3].decision`, `contract_version`.
        field: String,
        kind: ProblemKind,
        message: String,
    },
}

/// What is wrong with an invalid contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// Not JSON, not UTF-8, or a value of the wrong type.
    Syntax,
    UnknownField,
    MissingField,
    UnknownVersion,
    UnknownDecision,
    DuplicateRuleId,
    UnknownCondition,
    BadGlob,
    BadRegex,
    /// An empty id, action or why; a condition value of the wrong type.
    BadValue,
}

impl ContractError {
    pub fn line(&self) -> Option<usize> {
        match self {
            ContractError::Invalid { line, .. } => Some(*line),
            ContractError::Read { .. } | ContractError::Missing { .. } => None,
        }
    }

    pub fn field(&self) -> Option<&str> {
        match self {
            ContractError::Invalid { field, .. } => Some(field),
            ContractError::Read { .. } | ContractError::Missing { .. } => None,
        }
    }

    pub fn kind(&self) -> Option<ProblemKind> {
        match self {
            ContractError::Invalid { kind, .. } => Some(*kind),
            ContractError::Read { .. } | ContractError::Missing { .. } => None,
        }
    }
}

/// A validated, compiled role contract.
#[derive(Debug, Clone)]
pub struct Contract {
    /// Where it came from, for messages.
    pub file: String,
    pub contract_version: u32,
    pub role: String,
    pub default: Decision,
    pub(crate) rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub id: String,
    /// `None` for `*`: any action.
    pub action: Option<String>,
    pub conditions: Vec<Condition>,
    pub decision: Decision,
    pub why: String,
    pub notify: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Condition {
    /// The action argument tested.
    pub arg: String,
    pub test: Test,
}

#[derive(Debug, Clone)]
pub(crate) enum Test {
    Absent,
    Exact(String),
    Glob(GlobMatcher),
    Regex(Regex),
    RunBranch,
    InsideWorktree,
    OutsideWorktree,
    /// `confined`: holds when [`super::Scope::confined`] equals the value; no argument.
    Confined(bool),
    /// `process_cap`: holds when [`super::Scope::process_cap`] equals the value; no argument.
    ProcessCap(bool),
    /// `network`: holds when the wall's network ([`super::Scope::network`]) is known and its
    /// name (`none`, `allowlist`, `host`) passes the inner test; no argument.
    Network(Box<Test>),
    /// `url: "within_reach"`: the worker could reach the URL through the wall's network by
    /// itself ([`super::WallNetwork::reaches`]); never when the network is not known.
    WithinReach,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContract<'a> {
    contract_version: u32,
    role: String,
    default: Decision,
    #[serde(borrow)]
    rules: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule<'a> {
    id: String,
    action: String,
    #[serde(default, borrow)]
    when: Option<BTreeMap<String, &'a RawValue>>,
    decision: Decision,
    why: String,
    #[serde(default)]
    notify: bool,
}

impl Contract {
    /// Reads and parses a contract file. The only function of the policy engine that reads a
    /// file; `path` as given is the name used in messages.
    pub fn load(path: &Path) -> Result<Contract, ContractError> {
        let file = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| ContractError::Read {
            file: file.clone(),
            source,
        })?;
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                let offset = e.utf8_error().valid_up_to();
                let valid = String::from_utf8_lossy(&e.as_bytes()[..offset]).into_owned();
                let (line, column) = line_col(&valid, valid.len());
                return Err(ContractError::Invalid {
                    file,
                    line,
                    column: Some(column),
                    field: "(file)".into(),
                    kind: ProblemKind::Syntax,
                    message: "not valid UTF-8".into(),
                });
            }
        };
        Contract::parse(&file, &text)
    }

    /// Parses and validates a contract's text; `file` names it in errors. Pure.
    pub fn parse(file: &str, text: &str) -> Result<Contract, ContractError> {
        let raw: RawContract<'_> =
            serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text))
                .map_err(|e| serde_error(file, text, "", None, e))?;

        if !SUPPORTED_VERSIONS.contains(&raw.contract_version) {
            let (line, column) = position_of_key(text, 0, "contract_version");
            return Err(invalid(
                file,
                (line, Some(column)),
                "contract_version",
                ProblemKind::UnknownVersion,
                format!(
                    "version {} is not supported (this executor reads {:?})",
                    raw.contract_version, SUPPORTED_VERSIONS
                ),
            ));
        }
        if raw.role.trim().is_empty() {
            let (line, column) = position_of_key(text, 0, "role");
            return Err(invalid(
                file,
                (line, Some(column)),
                "role",
                ProblemKind::BadValue,
                "empty".into(),
            ));
        }

        let mut rules = Vec::with_capacity(raw.rules.len());
        let mut ids = HashSet::new();
        for (i, raw_rule) in raw.rules.iter().enumerate() {
            let offset = offset_in(text, raw_rule.get());
            let rule_pos = line_col(text, offset);
            let prefix = format!("rules[{i}]");
            let rule: RawRule<'_> = serde_path_to_error::deserialize(
                &mut serde_json::Deserializer::from_str(raw_rule.get()),
            )
            .map_err(|e| serde_error(file, text, &prefix, Some((offset, rule_pos)), e))?;

            let key_pos = |key: &str| position_of_key(text, offset, key);
            for (name, value) in [
                ("id", &rule.id),
                ("action", &rule.action),
                ("why", &rule.why),
            ] {
                if value.trim().is_empty() {
                    return Err(invalid(
                        file,
                        to_opt(key_pos(name)),
                        &format!("{prefix}.{name}"),
                        ProblemKind::BadValue,
                        "empty".into(),
                    ));
                }
            }
            if !ids.insert(rule.id.clone()) {
                return Err(invalid(
                    file,
                    to_opt(key_pos("id")),
                    &format!("{prefix}.id"),
                    ProblemKind::DuplicateRuleId,
                    format!("duplicate rule id {:?}", rule.id),
                ));
            }

            let mut conditions = Vec::new();
            for (key, value) in rule.when.iter().flatten() {
                let pos = line_col(text, offset_in(text, value.get()));
                let field = format!("{prefix}.when.{key}");
                let condition = compile_condition(key, value.get())
                    .map_err(|(kind, message)| invalid(file, to_opt(pos), &field, kind, message))?;
                conditions.push(condition);
            }

            rules.push(Rule {
                id: rule.id,
                action: (rule.action != "*").then_some(rule.action),
                conditions,
                decision: rule.decision,
                why: rule.why,
                notify: rule.notify,
            });
        }

        Ok(Contract {
            file: file.to_string(),
            contract_version: raw.contract_version,
            role: raw.role,
            default: raw.default,
            rules,
        })
    }

    /// The ids of the rules, in order.
    pub fn rule_ids(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.id.as_str())
    }
}

fn to_opt((line, column): (usize, usize)) -> (usize, Option<usize>) {
    (line, Some(column))
}

fn invalid(
    file: &str,
    (line, column): (usize, Option<usize>),
    field: &str,
    kind: ProblemKind,
    message: String,
) -> ContractError {
    ContractError::Invalid {
        file: file.to_string(),
        line,
        column,
        field: field.to_string(),
        kind,
        message,
    }
}

/// Turns a serde error into one naming the field. `rule` is the rule's byte offset and
/// position when the error came from parsing one rule's slice of the text.
fn serde_error(
    file: &str,
    text: &str,
    prefix: &str,
    rule: Option<(usize, (usize, usize))>,
    e: serde_path_to_error::Error<serde_json::Error>,
) -> ContractError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    let mut message = inner.to_string();
    // serde_json appends its own position; ours is in front.
    if let Some(at) = message.rfind(" at line ") {
        message.truncate(at);
    }
    let named = quoted_name(&message);
    let kind = if message.starts_with("missing field") {
        ProblemKind::MissingField
    } else if message.starts_with("unknown field") {
        ProblemKind::UnknownField
    } else if message.starts_with("unknown variant") {
        ProblemKind::UnknownDecision
    } else {
        ProblemKind::Syntax
    };

    let mut field = String::from(prefix);
    let mut push = |part: &str| {
        if part.is_empty() || part == "." || part == "?" {
            return;
        }
        if !field.is_empty() && !part.starts_with('[') {
            field.push('.');
        }
        field.push_str(part);
    };
    push(&path);
    if kind == ProblemKind::MissingField {
        if let Some(name) = &named {
            push(name);
        }
    }
    if field.is_empty() {
        field.push_str("(file)");
    }
    if kind == ProblemKind::MissingField {
        message = "missing".into();
    }

    let (line, column) = match rule {
        // A missing field is reported where its rule starts (serde points at the closing brace).
        Some((_, (line, column))) if kind == ProblemKind::MissingField => (line, Some(column)),
        Some((offset, _)) => {
            // serde's line and column are within the rule's slice; shift them into the file.
            let (rule_line, rule_col) = line_col(text, offset);
            let line = rule_line + inner.line().saturating_sub(1);
            let column = if inner.line() <= 1 {
                rule_col + inner.column().saturating_sub(1)
            } else {
                inner.column()
            };
            (line, Some(column))
        }
        None => (
            inner.line().max(1),
            (inner.column() > 0).then_some(inner.column()),
        ),
    };
    ContractError::Invalid {
        file: file.to_string(),
        line,
        column,
        field,
        kind,
        message,
    }
}

/// The first name between backticks in a serde message: "missing field `decision`".
fn quoted_name(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(message[start..start + len].to_string())
}

/// The byte offset of `part` in `text`; `part` must be a slice of it (serde's borrowed raw
/// values are).
fn offset_in(text: &str, part: &str) -> usize {
    (part.as_ptr() as usize)
        .saturating_sub(text.as_ptr() as usize)
        .min(text.len())
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Where `"key"` first appears at or after `from` (the start of a rule or of the file);
/// falls back to `from` itself.
fn position_of_key(text: &str, from: usize, key: &str) -> (usize, usize) {
    let needle = format!("\"{key}\"");
    let at = text
        .get(from..)
        .and_then(|t| t.find(&needle))
        .map_or(from, |i| from + i);
    line_col(text, at)
}

fn compile_condition(key: &str, raw: &str) -> Result<Condition, (ProblemKind, String)> {
    let value: serde_json::Value =
        serde_json::from_str(raw).map_err(|e| (ProblemKind::Syntax, e.to_string()))?;
    if key == "confined" || key == "process_cap" {
        // A property of the worker, not of the action: only a boolean means anything.
        return match value {
            serde_json::Value::Bool(b) => Ok(Condition {
                arg: String::new(),
                test: if key == "confined" {
                    Test::Confined(b)
                } else {
                    Test::ProcessCap(b)
                },
            }),
            other => Err((
                ProblemKind::BadValue,
                format!("{key} is true or false, found {other}"),
            )),
        };
    }
    if key == "network" {
        // A property of the wall, not of the action: a name or a glob of names.
        return match value {
            serde_json::Value::String(s) => Ok(Condition {
                arg: String::new(),
                test: Test::Network(Box::new(string_test(&s)?)),
            }),
            other => Err((
                ProblemKind::BadValue,
                format!("network is a string (none, allowlist, host or a glob), found {other}"),
            )),
        };
    }
    let text = match &value {
        serde_json::Value::Null => {
            return Ok(Condition {
                arg: arg_name(key)?,
                test: Test::Absent,
            })
        }
        serde_json::Value::Bool(b) => b.to_string(),
        serde_json::Value::String(s) => s.clone(),
        other => {
            return Err((
                ProblemKind::BadValue,
                format!("expected a string, true, false or null, found {other}"),
            ))
        }
    };
    let test = match key {
        "branch" if text == "$run_branch" => Test::RunBranch,
        "branch" if text.starts_with('$') => {
            return Err((
                ProblemKind::BadValue,
                format!("unknown token {text:?} (only $run_branch)"),
            ))
        }
        "path" if text == "inside_worktree" => Test::InsideWorktree,
        "path" if text == "outside_worktree" => Test::OutsideWorktree,
        "url" if text == "within_reach" => Test::WithinReach,
        "command" => Test::Regex(
            Regex::new(&text)
                .map_err(|e| (ProblemKind::BadRegex, format!("invalid regex: {e}")))?,
        ),
        _ => string_test(&text)?,
    };
    Ok(Condition {
        arg: arg_name(key)?,
        test,
    })
}

/// The argument a condition key tests; an unknown key is an error.
fn arg_name(key: &str) -> Result<String, (ProblemKind, String)> {
    if let Some(name) = key.strip_prefix("arg:") {
        if name.is_empty() {
            return Err((ProblemKind::UnknownCondition, "arg: needs a name".into()));
        }
        return Ok(name.to_string());
    }
    if matches!(key, "branch" | "path" | "command") || KNOWN_ARGS.contains(&key) {
        return Ok(key.to_string());
    }
    Err((
        ProblemKind::UnknownCondition,
        format!("unknown condition {key:?}: use branch, path, command, confined, process_cap, network, one of {KNOWN_ARGS:?}, or arg:NAME"),
    ))
}

/// An exact match, or a glob if the value has glob syntax (`*?[{`).
fn string_test(value: &str) -> Result<Test, (ProblemKind, String)> {
    if !value.contains(['*', '?', '[', '{']) {
        return Ok(Test::Exact(value.to_string()));
    }
    let glob = GlobBuilder::new(value)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map_err(|e| (ProblemKind::BadGlob, format!("invalid glob: {e}")))?;
    Ok(Test::Glob(glob.compile_matcher()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "roles/worker-policy.json";

    fn err(text: &str) -> ContractError {
        match Contract::parse(FILE, text) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e,
        }
    }

    fn rules(rules: &str) -> String {
        format!(
            "{{\n  \"contract_version\": 1,\n  \"role\": \"worker\",\n  \"default\": \"escalate\",\n  \"rules\": [\n{rules}\n  ]\n}}\n"
        )
    }

    const OK1: &str =
        r#"    { "id": "a", "action": "run_tests", "decision": "approve", "why": "safe" },"#;

    #[test]
    fn the_shipped_contracts_parse() {
        for (file, text) in [
            ("worker", crate::policy::WORKER_CONTRACT),
            ("conductor", crate::policy::CONDUCTOR_CONTRACT),
        ] {
            let c = Contract::parse(file, text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(c.role, file);
            assert_eq!(
                c.default,
                Decision::Escalate,
                "the owner's default is escalate"
            );
        }
    }

    #[test]
    fn bad_json_names_file_line_and_column() {
        let e = err(
            "{\n  \"contract_version\": 1,\n  \"role\": \"worker\"\n  \"default\": \"escalate\"\n}",
        );
        assert_eq!(e.kind(), Some(ProblemKind::Syntax));
        assert_eq!(e.line(), Some(4));
        let shown = e.to_string();
        assert!(
            shown.starts_with("roles/worker-policy.json:4:3: "),
            "{shown}"
        );
    }

    #[test]
    fn unknown_field_in_a_rule_is_named() {
        let text = rules(&format!(
            "{OK1}\n    {{ \"id\": \"b\", \"action\": \"merge_pr\", \"decison\": \"deny\", \"why\": \"x\" }}"
        ));
        let e = err(&text);
        assert_eq!(e.kind(), Some(ProblemKind::UnknownField));
        assert_eq!(e.line(), Some(7));
        assert_eq!(e.field(), Some("rules[1].decison"));
        assert!(
            e.to_string().starts_with("roles/worker-policy.json:7:"),
            "{e}"
        );
    }

    #[test]
    fn unknown_field_at_the_top_is_named() {
        let e = err("{\"contract_version\": 1, \"role\": \"w\", \"default\": \"deny\", \"rules\": [], \"extra\": 1}");
        assert_eq!(e.kind(), Some(ProblemKind::UnknownField));
        assert_eq!(e.field(), Some("extra"));
        assert_eq!(e.line(), Some(1));
    }

    #[test]
    fn rule_with_no_decision_is_rejected_at_its_line() {
        let text = rules(&format!(
            "{OK1}\n    {{ \"id\": \"b\", \"action\": \"merge_pr\", \"why\": \"x\" }}"
        ));
        let e = err(&text);
        assert_eq!(e.kind(), Some(ProblemKind::MissingField));
        assert_eq!(e.field(), Some("rules[1].decision"));
        assert_eq!(
            e.to_string(),
            "roles/worker-policy.json:7:5: rules[1].decision: missing"
        );
    }

    #[test]
    fn unknown_decision_is_rejected() {
        let text =
            rules(r#"    { "id": "b", "action": "merge_pr", "decision": "allow", "why": "x" }"#);
        let e = err(&text);
        assert_eq!(e.kind(), Some(ProblemKind::UnknownDecision));
        assert_eq!(e.field(), Some("rules[0].decision"));
        assert_eq!(e.line(), Some(6));
    }

    #[test]
    fn duplicate_rule_id_is_rejected_at_the_second() {
        let text = rules(&format!(
            "{OK1}\n    {{ \"id\": \"x\", \"action\": \"b\", \"decision\": \"deny\", \"why\": \"x\" }},\n    {{ \"id\": \"a\", \"action\": \"c\", \"decision\": \"deny\", \"why\": \"x\" }}"
        ));
        let e = err(&text);
        assert_eq!(e.kind(), Some(ProblemKind::DuplicateRuleId));
        assert_eq!(e.field(), Some("rules[2].id"));
        assert_eq!(e.line(), Some(8));
    }

    #[test]
    fn unknown_version_is_rejected() {
        let e =
            err("{\"contract_version\": 2, \"role\": \"w\", \"default\": \"deny\", \"rules\": []}");
        assert_eq!(e.kind(), Some(ProblemKind::UnknownVersion));
        assert_eq!(e.field(), Some("contract_version"));
    }

    #[test]
    fn unknown_condition_bad_glob_and_bad_regex_are_rejected() {
        let cases = [
            (
                r#"{ "brnach": "x" }"#,
                ProblemKind::UnknownCondition,
                "rules[0].when.brnach",
            ),
            (
                r#"{ "branch": "executor/[" }"#,
                ProblemKind::BadGlob,
                "rules[0].when.branch",
            ),
            (
                r#"{ "command": "gh (pr" }"#,
                ProblemKind::BadRegex,
                "rules[0].when.command",
            ),
            (
                r#"{ "target": 3 }"#,
                ProblemKind::BadValue,
                "rules[0].when.target",
            ),
            (
                r#"{ "branch": "$main" }"#,
                ProblemKind::BadValue,
                "rules[0].when.branch",
            ),
            (
                r#"{ "confined": "yes" }"#,
                ProblemKind::BadValue,
                "rules[0].when.confined",
            ),
            (
                r#"{ "confined": null }"#,
                ProblemKind::BadValue,
                "rules[0].when.confined",
            ),
            (
                r#"{ "confinde": true }"#,
                ProblemKind::UnknownCondition,
                "rules[0].when.confinde",
            ),
        ];
        for (when, kind, field) in cases {
            let text = rules(&format!(
                "    {{ \"id\": \"a\", \"action\": \"x\",\n      \"when\": {when},\n      \"decision\": \"deny\", \"why\": \"x\" }}"
            ));
            let e = err(&text);
            assert_eq!(e.kind(), Some(kind), "{when}: {e}");
            assert_eq!(e.field(), Some(field), "{when}");
            assert_eq!(e.line(), Some(7), "{when}: {e}");
        }
    }

    #[test]
    fn unknown_field_in_when_arg_prefix_is_allowed() {
        let text = rules(
            r#"    { "id": "a", "action": "run_tests", "when": { "arg:scheme": "macOS*", "force": null, "readonly": true }, "decision": "approve", "why": "x" }"#,
        );
        let c = Contract::parse(FILE, &text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.rules[0].conditions.len(), 3);
    }

    #[test]
    fn load_reads_a_file_and_names_it_in_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = dir.path().join("worker-policy.json");
        std::fs::write(&good, crate::policy::WORKER_CONTRACT).expect("write");
        assert!(Contract::load(&good).is_ok());

        let missing = dir.path().join("nope.json");
        let e = Contract::load(&missing).expect_err("missing file");
        assert!(matches!(e, ContractError::Read { .. }), "{e}");
        assert!(e.to_string().contains("nope.json"), "{e}");

        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, b"{\n  \"role\": \"w\xff\"\n}").expect("write");
        let e = Contract::load(&bad).expect_err("not UTF-8");
        assert_eq!(
            (e.kind(), e.line()),
            (Some(ProblemKind::Syntax), Some(2)),
            "{e}"
        );
        assert!(
            e.to_string().starts_with(&format!("{}:2:", bad.display())),
            "{e}"
        );
    }
}

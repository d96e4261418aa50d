//! The conductor's worker task file, read by `executor dispatch TASK.json`: parse, validate
//! strictly.
//!
//! ```json
//! {"taskVersion": 1, "id": "t-worker-docs", "prompt": "…", "workspace": "docs",
//!  "capabilities": {"tools": ["read", "write", "edit", "bash"]},
//!  "session": "worker-1", "timeoutSeconds": 600}
//! ```
//!
//! The file is read twice over: serde reads the JSON into a raw struct (not JSON, a value of
//! the wrong type, an unknown or repeated key are serde errors, reported with the JSON path,
//! the line and the column), then each field is checked (missing, blank, malformed, out of
//! range; reported with the field's name). A file of a version this executor does not read
//! is reported as such before anything else, so that a newer file's new keys do not hide
//! the real reason.
//!
//! Pure: nothing here reads a file or the store; the caller reads `TASK.json` and passes its
//! text and its name.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Number;

/// The task file version this executor reads.
pub const TASK_VERSION: u64 = 1;

/// The largest prompt, in bytes of UTF-8 (1 MiB).
pub const MAX_PROMPT_BYTES: usize = 1 << 20;

/// The longest timeout: a day.
pub const MAX_TIMEOUT_SECONDS: u64 = 86_400;

/// The longest name in an id (`t-worker-<name>`).
const MAX_ID_NAME_CHARS: usize = 63;

/// The longest workspace or session name.
const MAX_NAME_CHARS: usize = 64;

/// What a worker may use. Each maps to the tool names of the agent CLI that runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tool {
    Read,
    Write,
    Edit,
    Bash,
}

impl Tool {
    pub const ALL: [Tool; 4] = [Tool::Read, Tool::Write, Tool::Edit, Tool::Bash];

    /// The name in the task file: `read`, `write`, `edit`, `bash`.
    pub fn as_str(self) -> &'static str {
        match self {
            Tool::Read => "read",
            Tool::Write => "write",
            Tool::Edit => "edit",
            Tool::Bash => "bash",
        }
    }

    /// The tool named `name` in a task file (lowercase, exactly).
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Claude Code's built-in tools for it, as named in its tools reference
    /// (<https://code.claude.com/docs/en/tools-reference>; the names used in permission
    /// rules, `--allowedTools` and `--tools`). Reading includes finding files (`Glob`) and
    /// searching them (`Grep`); editing includes Jupyter cells (`NotebookEdit`). Claude
    /// Code's `LS` and `MultiEdit` tools are gone (Grep/Glob and Bash list folders; Edit
    /// makes every change), so they are not named. Claude Code refuses `Edit` and `Write` on
    /// an existing file it has not read, so `edit` is of little use to Claude without
    /// `read`.
    pub fn claude_tools(self) -> &'static [&'static str] {
        match self {
            Tool::Read => &["Read", "Grep", "Glob"],
            Tool::Write => &["Write"],
            Tool::Edit => &["Edit", "NotebookEdit"],
            Tool::Bash => &["Bash"],
        }
    }

    /// pi's tools for it (`pi --tools read,grep,find,ls,…`): pi's four default tools are
    /// `read`, `bash`, `edit` and `write`; its read-only exploration tools `grep` (search
    /// contents), `find` (files by glob) and `ls` (list a folder), off by default, belong
    /// to reading.
    pub fn pi_tools(self) -> &'static [&'static str] {
        match self {
            Tool::Read => &["read", "grep", "find", "ls"],
            Tool::Write => &["write"],
            Tool::Edit => &["edit"],
            Tool::Bash => &["bash"],
        }
    }
}

/// A validated worker task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerTask {
    /// `t-worker-<name>`.
    pub id: String,
    /// As written (not trimmed); never blank, at most [`MAX_PROMPT_BYTES`].
    pub prompt: String,
    /// The worktree folder's name: no `/`, not `.` or `..`.
    pub workspace: String,
    /// In the order written, without duplicates, never empty.
    pub tools: Vec<Tool>,
    /// The agent session to continue, if any.
    pub session: Option<String>,
    /// From 1 second to [`MAX_TIMEOUT_SECONDS`]; shown as `10m`.
    #[serde(serialize_with = "humantime_serde::serialize")]
    pub timeout: Duration,
}

/// A task file that does not validate.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WorkerTaskError {
    /// Not JSON at all, trailing text after it, a value of the wrong type somewhere, or an
    /// unknown or repeated key: `field` is the JSON path (`capabilities.tools[2]`,
    /// `(file)` for the whole file), `line` and `column` where serde stopped (from 1).
    #[error("{path}: line {line}, column {column}: `{field}`: {message}")]
    Invalid {
        /// The file, as the caller named it.
        path: String,
        line: usize,
        column: usize,
        field: String,
        message: String,
    },
    /// A field missing or with a bad value (`taskVersion`, `capabilities.tools[1]`, …).
    #[error("{path}: `{field}`: {message}")]
    Field {
        /// The file, as the caller named it.
        path: String,
        field: String,
        message: String,
    },
}

impl WorkerTaskError {
    /// The field (or JSON path) the error names.
    pub fn field(&self) -> &str {
        match self {
            WorkerTaskError::Invalid { field, .. } | WorkerTaskError::Field { field, .. } => field,
        }
    }

    /// What is wrong with it.
    pub fn message(&self) -> &str {
        match self {
            WorkerTaskError::Invalid { message, .. } | WorkerTaskError::Field { message, .. } => {
                message
            }
        }
    }
}

/// The file as serde reads it. Every field is optional here so that a missing one is
/// reported by [`parse`] with its name, not by serde.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    #[serde(rename = "taskVersion")]
    task_version: Option<Number>,
    id: Option<String>,
    prompt: Option<String>,
    workspace: Option<String>,
    capabilities: Option<Object<RawCapabilities>>,
    session: Option<String>,
    #[serde(rename = "timeoutSeconds")]
    timeout_seconds: Option<Number>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCapabilities {
    tools: Option<Vec<String>>,
}

/// What a JSON object is read into, named in messages.
trait Expected {
    const EXPECTED: &'static str;
}

impl Expected for RawTask {
    const EXPECTED: &'static str = "a worker task object";
}

impl Expected for RawCapabilities {
    const EXPECTED: &'static str = "a capabilities object";
}

impl Expected for VersionProbe {
    const EXPECTED: &'static str = "a worker task object";
}

/// A struct read from a JSON object only: serde's derived structs also take an array of
/// the values in order (`["read"]` for `{"tools": ["read"]}`), which a strict file refuses.
struct Object<T>(T);

impl<'de, T: Deserialize<'de> + Expected> Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);

        impl<'de, T: Deserialize<'de> + Expected> serde::de::Visitor<'de> for Visit<T> {
            type Value = T;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(T::EXPECTED)
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }

        deserializer
            .deserialize_map(Visit(std::marker::PhantomData))
            .map(Object)
    }
}

/// Only the version, anything else ignored: read first, so that a file of another version
/// is reported as such even when its other keys are unknown here.
#[derive(Deserialize)]
struct VersionProbe {
    #[serde(rename = "taskVersion")]
    task_version: Option<serde_json::Value>,
}

/// Parses and validates a worker task file's text. `path` is only used in errors.
pub fn parse(path: &str, text: &str) -> Result<WorkerTask, WorkerTaskError> {
    let field_error = |field: &str, message: String| WorkerTaskError::Field {
        path: path.to_string(),
        field: field.to_string(),
        message,
    };

    if let Ok(Object(VersionProbe {
        task_version: Some(serde_json::Value::Number(version)),
    })) = serde_json::from_str::<Object<VersionProbe>>(text)
    {
        if version.as_u64() != Some(TASK_VERSION) {
            return Err(field_error("taskVersion", unknown_version(&version)));
        }
    }

    let mut deserializer = serde_json::Deserializer::from_str(text);
    let Object(raw): Object<RawTask> = serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|e| serde_error(path, e.path().to_string(), e.into_inner()))?;
    deserializer
        .end()
        .map_err(|e| serde_error(path, String::new(), e))?;

    match &raw.task_version {
        None => {
            return Err(field_error(
                "taskVersion",
                format!("missing (this executor reads {TASK_VERSION})"),
            ))
        }
        Some(version) if version.as_u64() != Some(TASK_VERSION) => {
            return Err(field_error("taskVersion", unknown_version(version)))
        }
        Some(_) => {}
    }

    let id = required(raw.id).map_err(|m| field_error("id", m))?;
    check_id(&id).map_err(|m| field_error("id", m))?;

    let prompt = required(raw.prompt).map_err(|m| field_error("prompt", m))?;
    check_prompt(&prompt).map_err(|m| field_error("prompt", m))?;

    let workspace = required(raw.workspace).map_err(|m| field_error("workspace", m))?;
    check_name(&workspace).map_err(|m| field_error("workspace", m))?;

    let capabilities = required(raw.capabilities).map_err(|m| field_error("capabilities", m))?;
    let names = required(capabilities.0.tools).map_err(|m| field_error("capabilities.tools", m))?;
    let tools = check_tools(&names).map_err(|(field, m)| field_error(&field, m))?;

    let session = match raw.session {
        None => None,
        Some(session) => {
            check_name(&session).map_err(|m| field_error("session", m))?;
            Some(session)
        }
    };

    let seconds = required(raw.timeout_seconds).map_err(|m| field_error("timeoutSeconds", m))?;
    let seconds = check_timeout(&seconds).map_err(|m| field_error("timeoutSeconds", m))?;

    Ok(WorkerTask {
        id,
        prompt,
        workspace,
        tools,
        session,
        timeout: Duration::from_secs(seconds),
    })
}

fn unknown_version(version: &Number) -> String {
    format!("unknown task version {version} (this executor reads {TASK_VERSION})")
}

/// `Err("missing")` for a field left out (or `null`).
fn required<T>(value: Option<T>) -> Result<T, String> {
    value.ok_or_else(|| "missing".to_string())
}

/// Turns a serde error into one naming the JSON path, the line and the column. `json_path`
/// is serde_path_to_error's (`capabilities.tools[2]`, `.` or empty for the whole file).
fn serde_error(path: &str, json_path: String, e: serde_json::Error) -> WorkerTaskError {
    let mut message = e.to_string();
    // serde_json appends its own position; ours is in the error's own fields.
    if let Some(at) = message.rfind(" at line ") {
        message.truncate(at);
    }
    // serde_path_to_error writes `?` for a key it could not read (broken JSON after it).
    let mut field = json_path.as_str();
    while let Some(rest) = field.strip_suffix('?') {
        field = rest.strip_suffix('.').unwrap_or(rest);
    }
    let mut field = if field.is_empty() || field == "." {
        String::new()
    } else {
        field.to_string()
    };
    // A repeated key is reported by the object that holds it; name the key itself.
    if message.starts_with("duplicate field") {
        if let Some(key) = quoted_name(&message) {
            if !field.is_empty() {
                field.push('.');
            }
            field.push_str(key);
        }
    }
    if field.is_empty() {
        field.push_str("(file)");
    }
    WorkerTaskError::Invalid {
        path: path.to_string(),
        line: e.line().max(1),
        column: e.column().max(1),
        field,
        message,
    }
}

/// The first name between backticks in a serde message: "duplicate field `id`".
fn quoted_name(message: &str) -> Option<&str> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(&message[start..start + len])
}

/// A value for a message: quoted, and cut short if long.
fn shown(value: &str) -> String {
    const MAX: usize = 64;
    if value.chars().count() <= MAX {
        format!("{value:?}")
    } else {
        let cut: String = value.chars().take(MAX).collect();
        format!("{cut:?}…")
    }
}

/// `t-worker-<name>`, the name `[a-z0-9][a-z0-9-]{0,62}`.
fn check_id(id: &str) -> Result<(), String> {
    let bad = || {
        format!(
            "{} is not t-worker-<name> (name: a lowercase letter or digit, then up to {} lowercase letters, digits or `-`)",
            shown(id),
            MAX_ID_NAME_CHARS - 1
        )
    };
    let name = id.strip_prefix("t-worker-").ok_or_else(bad)?;
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if first_ok && rest_ok && name.len() <= MAX_ID_NAME_CHARS {
        Ok(())
    } else {
        Err(bad())
    }
}

fn check_prompt(prompt: &str) -> Result<(), String> {
    if prompt.trim().is_empty() {
        return Err("blank".into());
    }
    if prompt.len() > MAX_PROMPT_BYTES {
        return Err(format!(
            "{} bytes, more than the limit of {MAX_PROMPT_BYTES} (1 MiB)",
            prompt.len()
        ));
    }
    Ok(())
}

/// A workspace or session name: `[A-Za-z0-9._-]{1,64}`, not `.` or `..`.
fn check_name(name: &str) -> Result<(), String> {
    if name == "." || name == ".." {
        return Err(format!("{} is not a folder name", shown(name)));
    }
    let chars_ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if name.is_empty() || name.len() > MAX_NAME_CHARS || !chars_ok {
        return Err(format!(
            "{} is not 1 to {MAX_NAME_CHARS} of the letters A-Z and a-z, the digits, `.`, `_` and `-` (no `/`)",
            shown(name)
        ));
    }
    Ok(())
}

/// The tools in the order written; an error names the element (`capabilities.tools[2]`).
fn check_tools(names: &[String]) -> Result<Vec<Tool>, (String, String)> {
    let known = || {
        Tool::ALL
            .iter()
            .map(|t| t.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if names.is_empty() {
        return Err((
            "capabilities.tools".into(),
            format!("empty: name at least one of {}", known()),
        ));
    }
    let mut tools = Vec::with_capacity(names.len());
    let mut seen: HashMap<Tool, usize> = HashMap::new();
    for (i, name) in names.iter().enumerate() {
        let field = format!("capabilities.tools[{i}]");
        let Some(tool) = Tool::from_name(name) else {
            return Err((
                field,
                format!("unknown tool {} (known: {})", shown(name), known()),
            ));
        };
        if let Some(first) = seen.insert(tool, i) {
            return Err((
                field,
                format!(
                    "duplicate tool {:?} (already capabilities.tools[{first}])",
                    tool.as_str()
                ),
            ));
        }
        tools.push(tool);
    }
    Ok(tools)
}

/// A whole number of seconds from 1 to [`MAX_TIMEOUT_SECONDS`].
fn check_timeout(seconds: &Number) -> Result<u64, String> {
    let range = format!("from 1 to {MAX_TIMEOUT_SECONDS} (a day)");
    match seconds.as_u64() {
        Some(0) => Err(format!("0: the timeout must be {range} seconds")),
        Some(s) if s > MAX_TIMEOUT_SECONDS => {
            Err(format!("{s} seconds is too long: at most {range}"))
        }
        Some(s) => Ok(s),
        None if seconds.is_f64() => Err(format!(
            "{seconds} is not a whole number of seconds {range}"
        )),
        None => Err(format!(
            "{seconds} is negative: the timeout must be {range} seconds"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FILE: &str = "tasks/TASK.json";

    const TEMPLATE: &str = r#"{"taskVersion": 1, "id": "t-worker-docs", "prompt": "Fix the typo in README.md.", "workspace": "docs", "capabilities": {"tools": ["read", "write", "edit", "bash"]}, "session": "worker-1", "timeoutSeconds": 600}"#;

    fn err(text: &str) -> WorkerTaskError {
        match parse(FILE, text) {
            Ok(task) => panic!("accepted {text}: {task:?}"),
            Err(e) => e,
        }
    }

    /// The template with one top-level key's value replaced (`None`: the key removed).
    fn with(key: &str, value: Option<&str>) -> String {
        let mut map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(TEMPLATE).expect("template");
        match value {
            Some(v) => {
                map.insert(key.into(), serde_json::from_str(v).expect("value"));
            }
            None => {
                map.remove(key);
            }
        }
        serde_json::to_string_pretty(&map).expect("json")
    }

    fn is_field(e: &WorkerTaskError) -> bool {
        matches!(e, WorkerTaskError::Field { .. })
    }

    #[test]
    fn the_template_parses() {
        let task = parse(FILE, TEMPLATE).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            task,
            WorkerTask {
                id: "t-worker-docs".into(),
                prompt: "Fix the typo in README.md.".into(),
                workspace: "docs".into(),
                tools: vec![Tool::Read, Tool::Write, Tool::Edit, Tool::Bash],
                session: Some("worker-1".into()),
                timeout: Duration::from_secs(600),
            }
        );
    }

    #[test]
    fn session_is_optional_and_tool_order_is_kept() {
        let text = with("session", None);
        let text = text.replace(
            r#""read",
      "write",
      "edit",
      "bash""#,
            r#""bash", "read""#,
        );
        let task = parse(FILE, &text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(task.session, None);
        assert_eq!(task.tools, [Tool::Bash, Tool::Read]);
        assert!(parse(FILE, &with("session", Some("null"))).is_ok());
    }

    #[test]
    fn a_task_serializes_with_lowercase_tools_and_a_readable_timeout() {
        let task = parse(FILE, TEMPLATE).expect("template");
        let json = serde_json::to_value(&task).expect("serialize");
        assert_eq!(
            json["tools"],
            serde_json::json!(["read", "write", "edit", "bash"])
        );
        assert_eq!(json["timeout"], "10m");
        assert_eq!(json["session"], "worker-1");
    }

    #[test]
    fn missing_fields_are_named() {
        for key in [
            "taskVersion",
            "id",
            "prompt",
            "workspace",
            "capabilities",
            "timeoutSeconds",
        ] {
            let e = err(&with(key, None));
            assert!(is_field(&e), "{key}: {e}");
            assert_eq!(e.field(), key, "{e}");
            assert!(e.message().starts_with("missing"), "{e}");
        }
        let e = err(&with("capabilities", Some("{}")));
        assert_eq!(e.field(), "capabilities.tools", "{e}");
        assert_eq!(e.message(), "missing");
        let e = err(&with("prompt", Some("null")));
        assert_eq!((e.field(), e.message()), ("prompt", "missing"));
    }

    #[test]
    fn a_missing_prompt_is_named() {
        let e = err(&with("prompt", None));
        assert_eq!(
            e,
            WorkerTaskError::Field {
                path: FILE.into(),
                field: "prompt".into(),
                message: "missing".into()
            }
        );
        assert_eq!(e.to_string(), "tasks/TASK.json: `prompt`: missing");
    }

    #[test]
    fn an_unknown_task_version_is_named() {
        let e = err(&with("taskVersion", Some("2")));
        assert_eq!(e.field(), "taskVersion");
        assert_eq!(
            e.message(),
            "unknown task version 2 (this executor reads 1)"
        );
        for version in ["0", "-1", "1.5", "1.0", "18446744073709551615"] {
            let e = err(&with("taskVersion", Some(version)));
            assert_eq!(e.field(), "taskVersion", "{version}: {e}");
            assert!(is_field(&e), "{e}");
        }
        // A string is the wrong type, with its position.
        let e = err(&with("taskVersion", Some("\"1\"")));
        assert!(matches!(e, WorkerTaskError::Invalid { .. }), "{e}");
        assert_eq!(e.field(), "taskVersion");
    }

    #[test]
    fn a_newer_version_is_reported_before_its_unknown_keys() {
        let e = err(r#"{"taskVersion": 2, "id": "t-worker-a", "sandbox": "strict"}"#);
        assert_eq!(e.field(), "taskVersion", "{e}");
        assert!(e.message().starts_with("unknown task version 2"), "{e}");
    }

    #[test]
    fn an_unknown_tool_is_named_with_the_known_ones() {
        let e = err(&with(
            "capabilities",
            Some(r#"{"tools": ["read", "write", "browse"]}"#),
        ));
        assert!(is_field(&e), "{e}");
        assert_eq!(e.field(), "capabilities.tools[2]");
        assert_eq!(
            e.message(),
            r#"unknown tool "browse" (known: read, write, edit, bash)"#
        );
        // Names are lowercase, exactly.
        let e = err(&with("capabilities", Some(r#"{"tools": ["Read"]}"#)));
        assert_eq!(e.field(), "capabilities.tools[0]");
    }

    #[test]
    fn a_duplicate_tool_is_named_at_the_second() {
        let e = err(&with(
            "capabilities",
            Some(r#"{"tools": ["read", "bash", "read"]}"#),
        ));
        assert!(is_field(&e), "{e}");
        assert_eq!(e.field(), "capabilities.tools[2]");
        assert_eq!(
            e.message(),
            r#"duplicate tool "read" (already capabilities.tools[0])"#
        );
    }

    #[test]
    fn no_tools_is_refused() {
        let e = err(&with("capabilities", Some(r#"{"tools": []}"#)));
        assert_eq!(e.field(), "capabilities.tools");
        assert!(e.message().starts_with("empty"), "{e}");
    }

    #[test]
    fn tools_not_an_array_is_refused_with_its_path() {
        let e = err(&with("capabilities", Some(r#"{"tools": "read,write"}"#)));
        assert!(matches!(e, WorkerTaskError::Invalid { .. }), "{e}");
        assert_eq!(e.field(), "capabilities.tools");
        assert!(e.message().starts_with("invalid type: string"), "{e}");

        let e = err(&with("capabilities", Some(r#"{"tools": ["read", 3]}"#)));
        assert_eq!(e.field(), "capabilities.tools[1]", "{e}");

        // Not an array of the values in order either (serde's structs would take one).
        for capabilities in [r#"["read"]"#, r#"[["read"]]"#] {
            let e = err(&with("capabilities", Some(capabilities)));
            assert_eq!(e.field(), "capabilities", "{e}");
            assert_eq!(
                e.message(),
                "invalid type: sequence, expected a capabilities object"
            );
        }
    }

    #[test]
    fn bad_ids_are_refused() {
        for id in [
            "",
            "worker-docs",
            "t-worker-",
            "t-worker--docs",
            "t-worker-Docs",
            "t-worker-do_cs",
            "t-worker-docs/x",
            "T-worker-docs",
            "t-worker-é",
        ] {
            let e = err(&with("id", Some(&serde_json::to_string(id).expect("json"))));
            assert!(is_field(&e), "{id}: {e}");
            assert_eq!(e.field(), "id", "{id}: {e}");
        }
        let longest = format!("t-worker-{}", "a".repeat(63));
        assert!(parse(FILE, &with("id", Some(&format!("{longest:?}")))).is_ok());
        let too_long = format!("t-worker-{}", "a".repeat(64));
        assert_eq!(
            err(&with("id", Some(&format!("{too_long:?}")))).field(),
            "id"
        );
        for id in ["t-worker-0", "t-worker-a-b-", "t-worker-9lives"] {
            assert!(
                parse(FILE, &with("id", Some(&format!("{id:?}")))).is_ok(),
                "{id}"
            );
        }
        let e = err(&with("id", Some("7")));
        assert!(matches!(e, WorkerTaskError::Invalid { .. }), "{e}");
        assert_eq!(e.field(), "id");
    }

    #[test]
    fn a_blank_or_huge_prompt_is_refused() {
        for prompt in [r#""""#, r#"" \n\t ""#] {
            let e = err(&with("prompt", Some(prompt)));
            assert_eq!((e.field(), e.message()), ("prompt", "blank"), "{prompt}");
        }
        let at_limit = "x".repeat(MAX_PROMPT_BYTES);
        assert!(parse(FILE, &with("prompt", Some(&format!("{at_limit:?}")))).is_ok());
        let over = "x".repeat(MAX_PROMPT_BYTES + 1);
        let e = err(&with("prompt", Some(&format!("{over:?}"))));
        assert_eq!(e.field(), "prompt");
        assert!(e.message().contains("1048577 bytes"), "{e}");
    }

    #[test]
    fn a_workspace_with_a_slash_is_refused() {
        let e = err(&with("workspace", Some(r#""docs/sub""#)));
        assert!(is_field(&e), "{e}");
        assert_eq!(e.field(), "workspace");
        assert!(e.message().contains("no `/`"), "{e}");
    }

    #[test]
    fn bad_workspace_and_session_names_are_refused() {
        let long = format!("{:?}", "w".repeat(65));
        for bad in [
            r#""""#,
            r#"".""#,
            r#""..""#,
            r#""a b""#,
            r#""a\\b""#,
            r#""é""#,
            &long,
        ] {
            assert_eq!(
                err(&with("workspace", Some(bad))).field(),
                "workspace",
                "{bad}"
            );
            assert_eq!(err(&with("session", Some(bad))).field(), "session", "{bad}");
        }
        let longest = format!("{:?}", "w".repeat(64));
        for good in [r#""...""#, r#""A.b_c-9""#, r#"".hidden""#, &longest] {
            assert!(
                parse(FILE, &with("workspace", Some(good))).is_ok(),
                "{good}"
            );
            assert!(parse(FILE, &with("session", Some(good))).is_ok(), "{good}");
        }
    }

    #[test]
    fn timeouts_out_of_range_or_not_whole_are_refused() {
        for bad in [
            "0",
            "1.5",
            "600.0",
            "-5",
            "86401",
            "1e3",
            "18446744073709551615",
        ] {
            let e = err(&with("timeoutSeconds", Some(bad)));
            assert!(is_field(&e), "{bad}: {e}");
            assert_eq!(e.field(), "timeoutSeconds", "{bad}: {e}");
        }
        assert_eq!(
            err(&with("timeoutSeconds", Some("0"))).message(),
            "0: the timeout must be from 1 to 86400 (a day) seconds"
        );
        assert_eq!(
            err(&with("timeoutSeconds", Some("1.5"))).message(),
            "1.5 is not a whole number of seconds from 1 to 86400 (a day)"
        );
        for (good, secs) in [("1", 1), ("86400", 86_400)] {
            let task = parse(FILE, &with("timeoutSeconds", Some(good))).expect(good);
            assert_eq!(task.timeout, Duration::from_secs(secs));
        }
        let e = err(&with("timeoutSeconds", Some(r#""600""#)));
        assert!(matches!(e, WorkerTaskError::Invalid { .. }), "{e}");
        assert_eq!(e.field(), "timeoutSeconds");
    }

    #[test]
    fn an_unknown_top_level_key_is_named() {
        let e = err(&with("timeout", Some("600")));
        assert!(matches!(e, WorkerTaskError::Invalid { .. }), "{e}");
        assert_eq!(e.field(), "timeout");
        assert!(
            e.message()
                .starts_with("unknown field `timeout`, expected one of"),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_capabilities_key_is_named() {
        let e = err(&with(
            "capabilities",
            Some(r#"{"tools": ["read"], "network": true}"#),
        ));
        assert_eq!(e.field(), "capabilities.network", "{e}");
        assert!(e.message().starts_with("unknown field `network`"), "{e}");
    }

    #[test]
    fn a_repeated_key_is_refused() {
        let e = err(
            r#"{"taskVersion": 1, "id": "t-worker-a", "id": "t-worker-b", "prompt": "p", "workspace": "w", "capabilities": {"tools": ["read"]}, "timeoutSeconds": 5}"#,
        );
        assert_eq!(e.field(), "id", "{e}");
        assert!(e.message().starts_with("duplicate field"), "{e}");
    }

    #[test]
    fn not_json_names_the_line_and_column() {
        let e = err("{\n  \"taskVersion\": 1,\n  \"id\": \"t-worker-a\"\n  \"prompt\": \"p\"\n}");
        assert_eq!(
            e,
            WorkerTaskError::Invalid {
                path: FILE.into(),
                line: 4,
                column: 3,
                field: "(file)".into(),
                message: "expected `,` or `}`".into(),
            }
        );
        assert_eq!(
            e.to_string(),
            "tasks/TASK.json: line 4, column 3: `(file)`: expected `,` or `}`"
        );
        for text in ["", "   ", "not json", "{", "[]", "null", "\"task\"", "600"] {
            let e = err(text);
            assert!(
                matches!(e, WorkerTaskError::Invalid { .. }),
                "{text:?}: {e}"
            );
            assert_eq!(e.field(), "(file)", "{text:?}: {e}");
        }
        assert_eq!(
            err("[]").message(),
            "invalid type: sequence, expected a worker task object"
        );
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing_the_stack() {
        let deep = "[".repeat(100_000);
        for text in [
            format!(r#"{{"taskVersion": {deep}"#),
            format!(r#"{{"extra": {deep}"#),
            format!(r#"{{"capabilities": {{"tools": {deep}"#),
            deep.clone(),
            "{\"a\":".repeat(100_000),
        ] {
            let e = err(&text);
            assert!(matches!(e, WorkerTaskError::Invalid { .. }), "{e}");
        }
        // An array of the values in order is not a task, whatever its first value.
        let e = err(r#"[2, "t-worker-a"]"#);
        assert_eq!(e.field(), "(file)", "{e}");
    }

    #[test]
    fn text_after_the_object_is_refused() {
        let e = err(&format!("{TEMPLATE}\n{{}}"));
        assert!(matches!(e, WorkerTaskError::Invalid { line: 2, .. }), "{e}");
        assert_eq!(e.field(), "(file)");
        assert!(e.message().starts_with("trailing characters"), "{e}");
        assert!(parse(FILE, &format!("\n{TEMPLATE}\n\n")).is_ok());
    }

    #[test]
    fn tool_names_map_to_each_agent() {
        assert_eq!(
            Tool::ALL.map(Tool::as_str),
            ["read", "write", "edit", "bash"]
        );
        for tool in Tool::ALL {
            assert_eq!(Tool::from_name(tool.as_str()), Some(tool));
            let json = serde_json::to_string(&tool).expect("serialize");
            assert_eq!(json, format!("\"{}\"", tool.as_str()));
            assert_eq!(
                serde_json::from_str::<Tool>(&json).expect("deserialize"),
                tool
            );
            assert_eq!(
                tool.pi_tools()[0],
                tool.as_str(),
                "pi's own name comes first"
            );
        }
        assert_eq!(Tool::from_name("Read"), None);

        assert_eq!(Tool::Read.claude_tools(), ["Read", "Grep", "Glob"]);
        assert_eq!(Tool::Write.claude_tools(), ["Write"]);
        assert_eq!(Tool::Edit.claude_tools(), ["Edit", "NotebookEdit"]);
        assert_eq!(Tool::Bash.claude_tools(), ["Bash"]);

        assert_eq!(Tool::Read.pi_tools(), ["read", "grep", "find", "ls"]);
        assert_eq!(Tool::Write.pi_tools(), ["write"]);
        assert_eq!(Tool::Edit.pi_tools(), ["edit"]);
        assert_eq!(Tool::Bash.pi_tools(), ["bash"]);

        // No agent tool is granted by two of ours.
        for names in [
            Tool::ALL.map(Tool::claude_tools),
            Tool::ALL.map(Tool::pi_tools),
        ] {
            let all: Vec<&str> = names.concat();
            let unique: std::collections::HashSet<&str> = all.iter().copied().collect();
            assert_eq!(all.len(), unique.len(), "{all:?}");
        }
    }

    /// A JSON-ish value for fuzzing one field.
    fn arb_json() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("null".to_string()),
            any::<bool>().prop_map(|b| b.to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|f| format!("{f:?}")),
            "\\PC{0,20}".prop_map(|s| format!("{s:?}")),
            prop::collection::vec(
                prop::sample::select(vec!["read", "write", "edit", "bash", "ls", ""]),
                0..6
            )
            .prop_map(|names| format!("{names:?}")),
            "[\\[\\]{}\",:0-9a-z .-]{0,24}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        #[test]
        fn arbitrary_strings_never_panic(s in "\\PC*") {
            let _ = parse(FILE, &s);
        }

        #[test]
        fn arbitrary_bytes_in_the_template_never_panic(
            at in 0..TEMPLATE.len(),
            cut in 0usize..8,
            insert in "\\PC{0,8}",
        ) {
            let at = (0..=at).rev().find(|i| TEMPLATE.is_char_boundary(*i)).unwrap_or(0);
            let end = (at + cut).min(TEMPLATE.len());
            let end = (end..=TEMPLATE.len()).find(|i| TEMPLATE.is_char_boundary(*i)).unwrap_or(TEMPLATE.len());
            let text = format!("{}{insert}{}", &TEMPLATE[..at], &TEMPLATE[end..]);
            let _ = parse(FILE, &text);
        }

        #[test]
        fn whatever_parses_is_valid(
            which in 0usize..7,
            value in arb_json(),
            tools in arb_json(),
        ) {
            let mut fields = [
                "1", r#""t-worker-a""#, r#""p""#, r#""w""#, r#"["read"]"#, r#""s""#, "5",
            ]
            .map(String::from);
            fields[which] = value;
            fields[4] = tools;
            let [version, id, prompt, workspace, tools, session, timeout] = fields;
            let text = format!(
                r#"{{"taskVersion": {version}, "id": {id}, "prompt": {prompt}, "workspace": {workspace}, "capabilities": {{"tools": {tools}}}, "session": {session}, "timeoutSeconds": {timeout}}}"#
            );
            match parse(FILE, &text) {
                Ok(task) => {
                    prop_assert!(!task.tools.is_empty());
                    let unique: std::collections::HashSet<_> = task.tools.iter().collect();
                    prop_assert_eq!(unique.len(), task.tools.len());
                    prop_assert!(task.timeout >= Duration::from_secs(1));
                    prop_assert!(task.timeout <= Duration::from_secs(MAX_TIMEOUT_SECONDS));
                    prop_assert!(check_id(&task.id).is_ok());
                    prop_assert!(check_prompt(&task.prompt).is_ok());
                    prop_assert!(check_name(&task.workspace).is_ok());
                    if let Some(session) = &task.session {
                        prop_assert!(check_name(session).is_ok());
                    }
                }
                Err(e) => {
                    prop_assert!(!e.field().is_empty());
                    prop_assert!(e.to_string().starts_with(FILE));
                }
            }
        }
    }
}

//! The code's shape, checked over every source file of the workspace (tests excepted):
//! no module-level glob import (a reader, and a tool, can see what each file uses), and no
//! function longer than [`MAX_FN_LINES`] lines (configuration is read by serde into typed
//! sections, each validated by a function of its own; a long match becomes a table or
//! helpers).

use std::path::Path;

use crate::support::rust_files;

const MAX_FN_LINES: usize = 150;

/// What the scanner found in one file.
#[derive(Default)]
struct Shape {
    /// Lines (1-based) of module-level glob imports outside tests.
    globs: Vec<usize>,
    /// (name, first line, lines) of each function with a body, outside tests.
    functions: Vec<(String, usize, usize)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Lex {
    Code,
    LineComment,
    BlockComment(u32),
    Str,
    RawStr(usize),
}

/// Reads `text` as Rust closely enough to count braces: comments, strings, raw strings
/// and char literals are skipped; `#[cfg(test)]` items are left out.
fn scan(text: &str) -> Shape {
    let chars: Vec<char> = text.chars().collect();
    let mut shape = Shape::default();
    let (mut state, mut depth, mut line) = (Lex::Code, 0usize, 1usize);
    let mut test_attr = false;
    let mut test_depth: Option<usize> = None;
    // A `fn NAME` seen, waiting for its `{` (a body) or `;` (a declaration).
    let mut pending: Option<(String, usize)> = None;
    let mut open: Vec<(String, usize, usize)> = Vec::new(); // (name, line, depth at `{`)
    let mut line_start = true;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied().unwrap_or('\0');
        if c == '\n' {
            line += 1;
            line_start = true;
            if state == Lex::LineComment {
                state = Lex::Code;
            }
            i += 1;
            continue;
        }
        match state {
            Lex::LineComment => {}
            Lex::BlockComment(n) => {
                if c == '*' && next == '/' {
                    state = if n == 1 {
                        Lex::Code
                    } else {
                        Lex::BlockComment(n - 1)
                    };
                    i += 1;
                } else if c == '/' && next == '*' {
                    state = Lex::BlockComment(n + 1);
                    i += 1;
                }
            }
            Lex::Str => {
                if c == '\\' {
                    i += 1;
                } else if c == '"' {
                    state = Lex::Code;
                }
            }
            Lex::RawStr(hashes) => {
                if c == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
                    state = Lex::Code;
                    i += hashes;
                }
            }
            Lex::Code => {
                let in_test = test_depth.is_some();
                if line_start && !c.is_whitespace() {
                    line_start = false;
                    let rest: String = chars[i..].iter().take_while(|&&c| c != '\n').collect();
                    if depth == 0 && !in_test && is_glob_import(&rest) {
                        shape.globs.push(line);
                    }
                    if rest.starts_with("#[cfg(test)]") {
                        test_attr = true;
                    }
                }
                match c {
                    '/' if next == '/' => state = Lex::LineComment,
                    '/' if next == '*' => {
                        state = Lex::BlockComment(1);
                        i += 1;
                    }
                    '"' => state = Lex::Str,
                    'r' if (next == '"' || next == '#') && !ident_char(prev(&chars, i)) => {
                        let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
                        if chars.get(i + 1 + hashes) == Some(&'"') {
                            state = Lex::RawStr(hashes);
                            i += 1 + hashes;
                        }
                    }
                    '\'' => {
                        // A char literal ('x', '\n', '\u{..}'), not a lifetime.
                        if next == '\\' {
                            if let Some(end) = chars[i + 2..].iter().position(|&c| c == '\'') {
                                i += 2 + end;
                            }
                        } else if chars.get(i + 2) == Some(&'\'') {
                            i += 2;
                        }
                    }
                    '{' => {
                        if test_attr && test_depth.is_none() {
                            test_depth = Some(depth);
                            test_attr = false;
                        }
                        if let Some((name, at)) = pending.take() {
                            if test_depth.is_none() {
                                open.push((name, at, depth));
                            }
                        }
                        depth += 1;
                    }
                    '}' => {
                        depth = depth.saturating_sub(1);
                        if let Some(&(_, at, d)) = open.last() {
                            if d == depth {
                                let (name, _, _) = open.pop().unwrap_or_default();
                                shape.functions.push((name, at, line - at + 1));
                            }
                        }
                        if test_depth == Some(depth) {
                            test_depth = None;
                        }
                    }
                    ';' => {
                        pending = None;
                        if test_attr && test_depth.is_none() {
                            // `#[cfg(test)] use …;` or `mod tests;`: the attribute is spent.
                            test_attr = false;
                        }
                    }
                    'f' if next == 'n'
                        && !ident_char(prev(&chars, i))
                        && chars.get(i + 2).is_some_and(|c| c.is_whitespace()) =>
                    {
                        let name: String = chars[i + 2..]
                            .iter()
                            .skip_while(|c| c.is_whitespace())
                            .take_while(|&&c| ident_char(c))
                            .collect();
                        if !name.is_empty() {
                            pending = Some((name, line));
                        }
                    }
                    _ => {}
                }
            }
        }
        i += 1;
    }
    shape
}

fn prev(chars: &[char], i: usize) -> char {
    if i == 0 {
        ' '
    } else {
        chars[i - 1]
    }
}

fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `use a::*;`, `pub use a::*;`, `pub(crate) use a::*;`.
fn is_glob_import(line: &str) -> bool {
    let line = line.trim_end();
    let import = line.starts_with("use ") || (line.starts_with("pub") && line.contains(" use "));
    import && line.ends_with("::*;")
}

/// Every source file of the workspace's crates, tests and test-only files left out.
pub(crate) fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let crates = std::fs::read_dir(root.join("crates")).expect("crates/");
    for krate in crates.flatten() {
        rust_files(&krate.path().join("src"), &mut files);
    }
    files
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "tests.rs"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read source");
            let name = p.strip_prefix(root).unwrap_or(&p).display().to_string();
            (name, text)
        })
        .collect()
}

#[test]
fn the_scanner_sees_functions_globs_and_tests() {
    let text = "use a::*;\nfn short() {\n    let s = \"}\";\n    let c = '}';\n}\n\
                trait T {\n    fn decl(&self);\n}\n\
                fn long() {\n    let r = r#\"{\"#;\n    // }\n\n\n}\n\
                #[cfg(test)]\nmod tests {\n    use super::*;\n    fn in_test() {}\n}\n";
    let shape = scan(text);
    assert_eq!(shape.globs, [1]);
    let names: Vec<(&str, usize)> = shape
        .functions
        .iter()
        .map(|(n, _, len)| (n.as_str(), *len))
        .collect();
    assert_eq!(names, [("short", 4), ("long", 6)]);
}

#[test]
fn no_module_level_glob_import_and_no_function_over_the_limit() {
    let mut globs = Vec::new();
    let mut long = Vec::new();
    let mut seen = 0;
    for (file, text) in sources() {
        let shape = scan(&text);
        seen += shape.functions.len();
        globs.extend(shape.globs.iter().map(|n| format!("{file}:{n}")));
        for (name, at, lines) in shape.functions {
            if lines > MAX_FN_LINES {
                long.push((file.clone(), name, at, lines));
            }
        }
    }
    assert!(
        seen > 1000,
        "only {seen} functions found: is the scanner broken?"
    );
    assert!(
        globs.is_empty(),
        "module-level glob imports (name what is used):\n{}",
        globs.join("\n")
    );
    let long: Vec<String> = long
        .iter()
        .map(|(f, n, at, lines)| format!("{f}:{at}: {n} is {lines} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The module path of `file` under a crate's `src` (`cli/console/pages.rs` → `cli::console::pages`).
fn module_of(file: &Path) -> Vec<String> {
    let mut parts: Vec<String> = file
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The files of one crate's `src` that each file names through a `crate::` or `super::`
/// path (to a sibling or an ancestor's module), outside comments and tests.
fn file_edges(src: &Path) -> Vec<(String, Vec<String>)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: std::collections::BTreeMap<Vec<String>, String> = files
        .iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(src).ok()?;
            Some((module_of(rel), rel.display().to_string()))
        })
        .collect();
    let resolve = |path: &[String]| {
        (1..=path.len())
            .rev()
            .find_map(|n| modules.get(&path[..n]).cloned())
    };
    let mut edges = Vec::new();
    for file in &files {
        let Ok(rel) = file.strip_prefix(src) else {
            continue;
        };
        let me = module_of(rel);
        let name = rel.display().to_string();
        let text = std::fs::read_to_string(file).expect("read source");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let mut to = std::collections::BTreeSet::new();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (at, _) in line
                .match_indices("crate::")
                .chain(line.match_indices("super::"))
            {
                if at > 0 && ident_char(line[..at].chars().last().unwrap_or(' ')) {
                    continue;
                }
                let path: Vec<String> = line[at..]
                    .split(|c: char| !(ident_char(c) || c == ':'))
                    .next()
                    .unwrap_or_default()
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                let full = if path[0] == "crate" {
                    path[1..].to_vec()
                } else {
                    let ups = path.iter().take_while(|p| *p == "super").count();
                    let mut base = me[..me.len().saturating_sub(ups)].to_vec();
                    base.extend_from_slice(&path[ups..]);
                    base
                };
                if let Some(target) = resolve(&full).filter(|t| *t != name) {
                    to.insert(target);
                }
            }
        }
        edges.push((name, to.into_iter().collect()));
    }
    edges
}

/// A cycle among `edges`, if there is one, as the files around it.
fn a_cycle(edges: &[(String, Vec<String>)]) -> Option<Vec<String>> {
    let next: std::collections::BTreeMap<&str, &Vec<String>> =
        edges.iter().map(|(f, to)| (f.as_str(), to)).collect();
    // 0 unseen, 1 on the path, 2 done.
    let mut mark: std::collections::BTreeMap<&str, u8> = Default::default();
    fn visit<'a>(
        at: &'a str,
        next: &std::collections::BTreeMap<&'a str, &'a Vec<String>>,
        mark: &mut std::collections::BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        mark.insert(at, 1);
        path.push(at);
        for to in next.get(at).map(|v| v.iter()).into_iter().flatten() {
            match mark.get(to.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = path.iter().position(|p| *p == to.as_str()).unwrap_or(0);
                    let mut cycle: Vec<String> =
                        path[from..].iter().map(|s| s.to_string()).collect();
                    cycle.push(to.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(cycle) = visit(to.as_str(), next, mark, path) {
                        return Some(cycle);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        mark.insert(at, 2);
        None
    }
    for (file, _) in edges {
        if mark.get(file.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(cycle) = visit(file, &next, &mut mark, &mut Vec::new()) {
                return Some(cycle);
            }
        }
    }
    None
}

#[test]
fn the_cycle_finder_finds_a_cycle_and_only_one() {
    let edges = |list: &[(&str, &[&str])]| -> Vec<(String, Vec<String>)> {
        list.iter()
            .map(|(f, to)| (f.to_string(), to.iter().map(|t| t.to_string()).collect()))
            .collect()
    };
    assert_eq!(
        a_cycle(&edges(&[
            ("a.rs", &["b.rs"]),
            ("b.rs", &["c.rs"]),
            ("c.rs", &[])
        ])),
        None
    );
    assert_eq!(
        a_cycle(&edges(&[("a.rs", &["b.rs"]), ("b.rs", &["a.rs"])])),
        Some(vec!["a.rs".into(), "b.rs".into(), "a.rs".into()])
    );
    assert_eq!(
        module_of(Path::new("cli/console/mod.rs")),
        ["cli", "console"]
    );
}

/// No two files of a crate name each other, directly or around a loop, through `crate::`
/// or `super::` paths: each file's dependencies can be read, and moved, without the rest.
/// (A parent module's own `child::item` calls are its declaration of the child, and are not
/// counted.)
#[test]
fn no_import_cycle_between_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut srcs = vec![root.join("src")];
    for krate in std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .flatten()
    {
        srcs.push(krate.path().join("src"));
    }
    let mut seen = 0;
    for src in srcs {
        let edges = file_edges(&src);
        seen += edges.iter().map(|(_, to)| to.len()).sum::<usize>();
        if let Some(cycle) = a_cycle(&edges) {
            panic!(
                "an import cycle in {}:\n{}",
                src.display(),
                cycle.join(" → ")
            );
        }
    }
    assert!(
        seen > 300,
        "only {seen} edges between files: is the scan broken?"
    );
}

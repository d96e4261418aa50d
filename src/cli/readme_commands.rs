//! Every `executor …` command line the README and the pages of `docs/` show in a shell
//! code block, parsed by the real argument table, so no page names a subcommand or flag
//! that does not exist.
//!
//! Test-only. It must never run a command: it only parses them.

use clap::Parser;

use super::Cli;

/// The shell code blocks of `markdown` (```sh, ```bash, ```console and unlabelled
/// blocks), as (line number, line) pairs with `\` continuations joined.
fn shell_lines(markdown: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut in_shell = None::<bool>;
    let mut pending: Option<(usize, String)> = None;
    for (index, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(label) = trimmed.strip_prefix("```") {
            in_shell = match in_shell {
                Some(_) => None,
                None => Some(matches!(label.trim(), "" | "sh" | "bash" | "console")),
            };
            continue;
        }
        if in_shell != Some(true) {
            continue;
        }
        let (number, mut joined) = pending.take().unwrap_or_else(|| (index + 1, String::new()));
        joined.push_str(trimmed);
        match joined.strip_suffix('\\') {
            Some(head) => pending = Some((number, format!("{} ", head.trim_end()))),
            None => lines.push((number, joined)),
        }
    }
    lines
}

/// Splits a shell line into words: quotes group, `#` at a word's start ends the line, and
/// `&&`, `||`, `;`, `|`, `>` and `<` become words of their own.
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    word.push(q);
                }
            }
            '#' if !in_word => break,
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '&' | '|' | ';' | '>' | '<' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
                let mut op = c.to_string();
                if chars.peek() == Some(&c) {
                    op.push(c);
                    chars.next();
                }
                words.push(op);
            }
            _ => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// The `executor` invocations on one line: each runs from the word `executor` at the start
/// of a command (after `VAR=value` prefixes) to the next operator.
fn invocations(line: &str) -> Vec<Vec<String>> {
    let line = line.strip_prefix("$ ").unwrap_or(line);
    let mut found = Vec::new();
    let mut command: Vec<String> = Vec::new();
    let is_operator = |w: &str| matches!(w, "&&" | "||" | ";" | "|" | ">" | ">>" | "<");
    let mut flush = |command: &mut Vec<String>| {
        let start = command.iter().position(|w| !is_assignment(w));
        if let Some(start) = start {
            if command[start] == "executor" {
                found.push(command[start..].to_vec());
            }
        }
        command.clear();
    };
    let mut skipping_target = false;
    for word in words(line) {
        if is_operator(&word) {
            flush(&mut command);
            // What follows a redirection is its file, not a command.
            skipping_target = word.starts_with('>') || word == "<";
            continue;
        }
        if skipping_target {
            skipping_target = false;
            continue;
        }
        command.push(word);
    }
    flush(&mut command);
    found
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
    })
}

/// Words the README writes for a value the reader fills in.
fn has_placeholder(args: &[String]) -> bool {
    args.iter().any(|a| {
        a.contains('…')
            || a.contains('<')
            || (a.len() > 1 && a.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
    })
}

#[test]
fn the_line_reader_finds_each_invocation_and_leaves_the_rest() {
    assert_eq!(
        invocations("cd demo && executor run --once && executor show EXAMPLE-1 # a comment"),
        vec![
            vec!["executor".to_string(), "run".into(), "--once".into()],
            vec!["executor".to_string(), "show".into(), "EXAMPLE-1".into()],
        ]
    );
    assert_eq!(
        invocations("EXECUTOR_SANDBOX_MODE=off executor completions bash > ~/executor"),
        vec![vec![
            "executor".to_string(),
            "completions".into(),
            "bash".into()
        ]]
    );
    assert_eq!(
        invocations(r#"executor add --title "Fix tab preview" --gid T-1"#)[0][3],
        "Fix tab preview"
    );
    assert!(invocations("cargo install --locked --path .").is_empty());
    assert!(invocations("echo executor run").is_empty());
    let block = "```sh\nexecutor policy check \\\n  --bash 'ls'\n```\n```toml\nexecutor = 1\n```\n";
    assert_eq!(
        shell_lines(block),
        vec![(2, "executor policy check --bash 'ls'".to_string())]
    );
    // The parser the README is held to refuses what does not exist.
    assert!(Cli::try_parse_from(["executor", "run", "--twice"]).is_err());
}

/// The README and every page of `docs/`: (its path from the repository, its text).
#[cfg(test)]
fn pages() -> Vec<(String, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = vec![root.join("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .expect("read docs/")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read a page");
            let name = p.strip_prefix(root).unwrap_or(&p).display().to_string();
            (name, text)
        })
        .collect()
}

#[test]
fn every_executor_command_in_the_readme_parses() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for (page, readme) in pages() {
        for (number, line) in shell_lines(&readme) {
            for args in invocations(&line) {
                match Cli::try_parse_from(&args) {
                    Ok(_) => checked += 1,
                    // `--help`, `--version` and the like end the parse as clap's own answer.
                    Err(e) if !e.use_stderr() => checked += 1,
                    Err(_) if has_placeholder(&args) => {
                        eprintln!(
                        "skipped {page} line {number}: `{}` has a placeholder and does not parse as written",
                        args.join(" ")
                    );
                    }
                    Err(e) => failures.push(format!(
                        "{page} line {number}: `{}`: {}",
                        args.join(" "),
                        e.render().to_string().lines().next().unwrap_or_default()
                    )),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        checked > 30,
        "only {checked} commands found: is the reader broken?"
    );
}

/// The `executor …` spans of inline code outside the code blocks: often a command named
/// without its arguments (`executor show`), so not parsed whole.
fn inline_spans(markdown: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut in_block = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
        } else if !in_block {
            prose.push_str(line);
            prose.push(' ');
        }
    }
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|span| span.strip_prefix("executor "))
        .map(str::to_string)
        .collect()
}

/// Why the subcommands and `--flags` of `span` (the words after `executor`) are not all in
/// the argument table, if they are not.
fn unknown_in(span: &str) -> Option<String> {
    use clap::CommandFactory;
    let root = Cli::command();
    let mut command = &root;
    let mut words = words(span).into_iter().peekable();
    // A version line (`executor 0.1.0 (…)`) or an author (`executor <…>`) is no command.
    let first = words.peek()?.clone();
    if !first.starts_with('-') && !first.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
        return None;
    }
    while let Some(word) = words.peek() {
        match command.find_subcommand(word) {
            Some(sub) => {
                command = sub;
                words.next();
            }
            None => break,
        }
    }
    if command.get_name() == root.get_name() && !first.starts_with('-') {
        return Some(format!("no subcommand `{first}`"));
    }
    for word in words {
        let Some(long) = word.strip_prefix("--") else {
            continue;
        };
        let long = long.split('=').next().unwrap_or(long);
        let known = matches!(long, "help" | "version")
            || command
                .get_arguments()
                .chain(root.get_arguments())
                .any(|a| a.get_long() == Some(long));
        if !known {
            return Some(format!("`{}` has no flag --{long}", command.get_name()));
        }
    }
    None
}

#[test]
fn every_subcommand_and_flag_the_readmes_prose_names_exists() {
    assert!(unknown_in("run --twice").is_some());
    assert!(unknown_in("rnu --once").is_some());
    assert_eq!(unknown_in("policy check --bash 'ls' --confined"), None);
    let spans: Vec<_> = pages()
        .iter()
        .flat_map(|(_, text)| inline_spans(text))
        .collect();
    assert!(spans.len() > 30, "only {} spans found", spans.len());
    let failures: Vec<String> = spans
        .iter()
        .filter_map(|span| unknown_in(span).map(|why| format!("`executor {span}`: {why}")))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

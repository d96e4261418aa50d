//! What a command line's variables expand to, as far as it can be known without running it.
//!
//! Two questions, both answered from the words the lexer kept ([`SimpleCommand::params`],
//! `$f` in a word's text, [`Word::substitution`]):
//!
//! - **Does it print the environment?** `echo $GH_TOKEN` prints a variable as surely as
//!   `printenv GH_TOKEN`. A parameter expanded by a command is `read_environment` unless it
//!   is one of [`GIVEN`] (what every worker is given and holds no secret: `HOME`, `PATH`,
//!   the `EXECUTOR_*` run facts, the shell's own) or the line itself set it before (`x=1;
//!   echo $x`, `for f in …`, `read l`). A name that looks like a secret (`TOKEN`, `KEY`,
//!   `SECRET`, …) is never taken as set by the line: an assignment may not run (`false &&
//!   GH_TOKEN=x`, a subshell), and then the real value is printed.
//! - **Which paths does a word stand for?** `"$f"` in `for f in src/*.rs; do wc -l "$f";
//!   done` is one of the loop's words, and `$(git ls-files)` names files of the repository
//!   the command runs in; such a word is judged as each of its values (as `.` for a
//!   listing of the current repository, as the start paths for `find`). A loop variable the
//!   line may assign some other way (`f=…`, `read f`, `eval`) stands for nothing known.

use std::collections::BTreeMap;

use super::{is_assignment, Classifier};
use crate::policy::shell::{self, RedirectKind, SimpleCommand, Word};
use crate::policy::Action;

/// Variables a worker may expand: what every worker is given (docs/policy.md) and the
/// shell's own; none holds a secret. `EXECUTOR_*` (the run's facts) are given too.
#[rustfmt::skip]
pub(super) const GIVEN: &[&str] = &[
    "HOME", "PATH", "PWD", "OLDPWD", "USER", "LOGNAME", "TMPDIR", "LANG", "LANGUAGE", "LC_ALL",
    "LC_CTYPE", "LC_MESSAGES", "TERM", "SHELL", "CI", "IFS", "HOSTNAME", "HOSTTYPE", "OSTYPE",
    "MACHTYPE", "BASH", "BASH_VERSION", "BASH_VERSINFO", "BASHPID", "BASH_SOURCE",
    "BASH_LINENO", "BASH_REMATCH", "FUNCNAME", "LINENO", "RANDOM", "SRANDOM", "SECONDS",
    "EPOCHSECONDS", "EPOCHREALTIME", "PPID", "UID", "EUID", "GROUPS", "PIPESTATUS", "REPLY",
    "OPTARG", "OPTIND", "OPTERR", "COLUMNS", "LINES", "SHLVL", "MAPFILE",
];

/// Parts of a name that mark it as a secret, whatever the line does to it.
const SECRET_WORDS: &[&str] = &[
    "TOKEN",
    "KEY",
    "SECRET",
    "PASS",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
    "PRIVATE",
];

/// How many values a word standing for a loop's values may be judged as.
const MAX_STAND_INS: usize = 64;

fn given(name: &str) -> bool {
    GIVEN.contains(&name) || name.starts_with("EXECUTOR_")
}

fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|w| upper.contains(w))
}

/// Reserved words that may lead a simple command.
fn is_keyword(w: &Word) -> bool {
    !w.quoted
        && matches!(
            w.text.as_str(),
            "if" | "then"
                | "else"
                | "elif"
                | "fi"
                | "do"
                | "done"
                | "while"
                | "until"
                | "!"
                | "{"
                | "}"
                | "esac"
                | "time"
        )
}

/// The words of `cmd` after its reserved words.
fn body(cmd: &SimpleCommand) -> &[Word] {
    let at = cmd
        .words
        .iter()
        .position(|w| !is_keyword(w))
        .unwrap_or(cmd.words.len());
    &cmd.words[at..]
}

/// The variables `cmd` sets for the commands after it: a line of assignments alone,
/// `for`/`select NAME`, `read NAME…`, `mapfile NAME`, `getopts SPEC NAME`, `printf -v
/// NAME`, and assignments given to `export`, `declare`, `local`, `readonly`, `typeset`.
fn definitions(cmd: &SimpleCommand) -> Vec<String> {
    let words = body(cmd);
    let name_of = |w: &Word| {
        w.text
            .split_once('=')
            .filter(|(n, _)| !n.ends_with('+'))
            .map(|(n, _)| n.to_string())
    };
    let Some(program) = words.iter().find(|w| !is_assignment(w)) else {
        // `x=1 y=2`: the shell's own variables from here on (`x+=1` keeps what was there).
        return words.iter().filter_map(name_of).collect();
    };
    let args = words
        .iter()
        .skip_while(|w| is_assignment(w))
        .skip(1)
        .collect::<Vec<_>>();
    let plain = |w: &&&Word| !w.dynamic && shell::is_name(&w.text);
    match (program.quoted, program.text.as_str()) {
        (false, "for" | "select") => args
            .first()
            .filter(plain)
            .map(|w| w.text.clone())
            .into_iter()
            .collect(),
        (_, "read") => {
            let mut names = Vec::new();
            let mut i = 0;
            while i < args.len() {
                let t = args[i].text.as_str();
                if matches!(t, "-p" | "-d" | "-n" | "-N" | "-t" | "-u" | "-i") {
                    i += 2;
                    continue;
                }
                if t == "-a" {
                    names.extend(args.get(i + 1).filter(plain).map(|w| w.text.clone()));
                    i += 2;
                    continue;
                }
                if !t.starts_with('-') && shell::is_name(t) && !args[i].dynamic {
                    names.push(t.to_string());
                }
                i += 1;
            }
            names
        }
        (_, "mapfile" | "readarray") => args
            .iter()
            .rev()
            .find(plain)
            .map(|w| w.text.clone())
            .into_iter()
            .collect(),
        (_, "getopts") => args
            .get(1)
            .filter(plain)
            .map(|w| w.text.clone())
            .into_iter()
            .collect(),
        (_, "printf") => args
            .iter()
            .position(|w| w.text == "-v")
            .and_then(|at| args.get(at + 1))
            .filter(plain)
            .map(|w| w.text.clone())
            .into_iter()
            .collect(),
        (_, "export" | "declare" | "local" | "readonly" | "typeset") => args
            .iter()
            .filter(|w| is_assignment(w))
            .filter_map(|w| name_of(w))
            .collect(),
        _ => Vec::new(),
    }
}

/// The program `cmd` runs, for the message: its first word after keywords and assignments.
fn program(cmd: &SimpleCommand) -> String {
    body(cmd)
        .iter()
        .find(|w| !is_assignment(w))
        .map(|w| w.text.rsplit('/').next().unwrap_or(&w.text).to_string())
        .unwrap_or_else(|| "sh".into())
}

/// A command substitution whose output is paths inside what it names: `git ls-files …` and
/// `git diff --name-only …` (files of the repository it runs in: `.`), `find START… TESTS`
/// (paths under its starts). `None` for anything else, or anything that could run more.
fn listing(src: &str) -> Option<Vec<Word>> {
    let cmds = shell::split(src).ok()?;
    let [cmd] = cmds.as_slice() else { return None };
    let quiet = cmd.redirects.iter().all(|r| {
        r.kind == RedirectKind::Duplicate
            || (r.kind == RedirectKind::Write && r.target.text == "/dev/null")
    });
    if !quiet || cmd.words.iter().any(|w| w.dynamic) || !cmd.params.is_empty() {
        return None;
    }
    let word = |text: &str| Word {
        text: text.to_string(),
        dynamic: false,
        quoted: true,
        ..Default::default()
    };
    let words: Vec<&str> = cmd.words.iter().map(|w| w.text.as_str()).collect();
    match words.as_slice() {
        ["git", "ls-files", rest @ ..] if !rest.iter().any(|w| w.starts_with("--with-tree")) => {
            Some(vec![word(".")])
        }
        ["git", "diff", rest @ ..]
            if rest.contains(&"--name-only")
                && !rest
                    .iter()
                    .any(|w| w.starts_with("--output") || w.starts_with("--ext-diff")) =>
        {
            Some(vec![word(".")])
        }
        ["find", rest @ ..] => {
            let starts: Vec<&&str> = rest
                .iter()
                .take_while(|w| !w.starts_with('-') && !matches!(**w, "(" | "!" | ")"))
                .collect();
            let expr = &rest[starts.len()..];
            let runs_or_writes = expr.iter().any(|w| {
                matches!(
                    *w,
                    "-exec"
                        | "-execdir"
                        | "-ok"
                        | "-okdir"
                        | "-delete"
                        | "-fprint"
                        | "-fprint0"
                        | "-fprintf"
                        | "-fls"
                        | "-L"
                        | "-follow"
                        | "-H"
                )
            });
            if runs_or_writes {
                return None;
            }
            if starts.is_empty() {
                return Some(vec![word(".")]);
            }
            Some(starts.iter().map(|s| word(s)).collect())
        }
        _ => None,
    }
}

/// A piece of a word's text: literal text, or a variable (`$f`, `${f}`).
enum Piece<'a> {
    Text(&'a str),
    Var(&'a str),
}

/// The pieces of `text`; `None` when it holds another expansion (`$(..)`, `${..}`, `$1`).
fn pieces(text: &str) -> Option<Vec<Piece<'_>>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        if at > 0 {
            out.push(Piece::Text(&rest[..at]));
        }
        let after = &rest[at + 1..];
        let (name, len) = if let Some(inner) = after.strip_prefix('{') {
            let end = inner.find('}')?;
            (&inner[..end], end + 2)
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        if !shell::is_name(name) {
            return None;
        }
        out.push(Piece::Var(name));
        rest = &after[len..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Some(out)
}

impl Classifier {
    /// The parameters `cmd` expands that the worker was not given and the line did not set
    /// before: each prints (or hands on) a variable of the environment.
    pub(super) fn expansions(&mut self, cmd: &SimpleCommand) {
        for name in &cmd.params {
            if self.may_expand(name) {
                continue;
            }
            let why = if let Some(target) = name.strip_prefix('!') {
                format!("${{!{target}}} reads variables named only at run time")
            } else {
                format!("${name} is not one of the variables every worker is given")
            };
            self.push(
                Action::new("read_environment")
                    .with("program", program(cmd))
                    .with("variable", name.as_str())
                    .with("reason", why),
            );
        }
        self.defined.extend(definitions(cmd));
    }

    /// Whether expanding `name` shows nothing the worker was not given.
    pub(super) fn may_expand(&self, name: &str) -> bool {
        if name.starts_with('!') {
            return false;
        }
        given(name) || (self.defined.contains(name) && !looks_secret(name))
    }

    /// Binds each `for` variable of `cmds` whose values are all known to them, unless the
    /// line may give it another value (`src` assigns it, or reads into variables some way).
    pub(super) fn bind_loop_variables(&mut self, cmds: &[SimpleCommand], src: &str) {
        let mut lists: BTreeMap<String, Option<Vec<Word>>> = BTreeMap::new();
        let mut assigns_some_other_way = false;
        for cmd in cmds {
            let words = body(cmd);
            let Some(first) = words.first() else { continue };
            if !first.quoted && matches!(first.text.as_str(), "for" | "select") {
                let Some(name) = words
                    .get(1)
                    .filter(|w| !w.dynamic && shell::is_name(&w.text))
                else {
                    continue;
                };
                let values = match words.get(2) {
                    Some(w) if !w.quoted && w.text == "in" => {
                        let mut values = Some(Vec::new());
                        for w in &words[3..] {
                            let known = if w.dynamic {
                                w.substitution
                                    .as_deref()
                                    .and_then(listing)
                                    .map(|_| w.clone())
                            } else {
                                Some(w.clone())
                            };
                            match (known, values.as_mut()) {
                                (Some(w), Some(list)) => list.push(w),
                                _ => values = None,
                            }
                        }
                        values
                    }
                    // `for f; do` walks the positional parameters.
                    _ => None,
                };
                let entry = lists.entry(name.text.clone()).or_insert(Some(Vec::new()));
                match (entry.as_mut(), values) {
                    (Some(list), Some(more)) => list.extend(more),
                    _ => *entry = None,
                }
                continue;
            }
            let program = words.iter().find(|w| !is_assignment(w));
            if program.is_some_and(|p| {
                matches!(
                    p.text.as_str(),
                    "read"
                        | "mapfile"
                        | "readarray"
                        | "getopts"
                        | "eval"
                        | "source"
                        | "."
                        | "declare"
                        | "typeset"
                        | "local"
                        | "let"
                        | "export"
                        | "readonly"
                        | "unset"
                ) || (p.text == "printf" && words.iter().any(|w| w.text == "-v"))
            }) {
                assigns_some_other_way = true;
            }
        }
        for (name, values) in lists {
            let assigned = assigns_some_other_way || assigns(src, &name);
            match values {
                Some(values) if !assigned => {
                    self.bindings.insert(name, values);
                }
                _ => {
                    self.bindings.remove(&name);
                }
            }
        }
    }

    /// What a word known only at run time stands for, when every value is known: a listing
    /// substitution's paths, or each value of the loop variables in its text.
    pub(super) fn stand_ins(&self, raw: &Word) -> Option<Vec<Word>> {
        if let Some(src) = &raw.substitution {
            return listing(src);
        }
        // Brace expansion and `$'…'` escapes make other words than the text shows.
        if raw.text.replace("${", "").contains(['{', '\\']) {
            return None;
        }
        let pieces = pieces(&raw.text)?;
        if !pieces.iter().any(|p| matches!(p, Piece::Var(_))) {
            return None;
        }
        let mut out: Vec<String> = vec![String::new()];
        for piece in &pieces {
            match piece {
                Piece::Text(t) => out.iter_mut().for_each(|o| o.push_str(t)),
                Piece::Var(name) => {
                    let values = self.bindings.get(*name)?;
                    if let [Piece::Var(_)] = pieces.as_slice() {
                        // The whole word is the variable: a listing's value stands as itself.
                        return Some(
                            values
                                .iter()
                                .flat_map(|v| match &v.substitution {
                                    Some(src) => listing(src).unwrap_or_default(),
                                    None => vec![v.clone()],
                                })
                                .collect(),
                        );
                    }
                    if values.iter().any(|v| v.dynamic) {
                        return None;
                    }
                    let mut next = Vec::new();
                    for prefix in &out {
                        for v in values {
                            next.push(format!("{prefix}{}", v.text));
                        }
                    }
                    if next.len() > MAX_STAND_INS {
                        return None;
                    }
                    out = next;
                }
            }
        }
        Some(
            out.into_iter()
                .map(|text| Word {
                    text,
                    dynamic: false,
                    quoted: true,
                    ..Default::default()
                })
                .collect(),
        )
    }
}

/// Whether `src` assigns `name` anywhere (`name=`, `name+=`, `name[i]=`), nested strings
/// included: such a loop variable may hold something else than the loop's words.
fn assigns(src: &str, name: &str) -> bool {
    let bytes = src.as_bytes();
    let mut from = 0;
    while let Some(at) = src[from..].find(name).map(|i| from + i) {
        from = at + name.len();
        let before_ok =
            at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        let after = &src[from..];
        let after_ok = after.starts_with('=') || after.starts_with("+=") || after.starts_with('[');
        if before_ok && after_ok {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_split_variables_from_text() {
        assert!(pieces("$(..)").is_none());
        assert!(pieces("${..}").is_none());
        assert!(pieces("$1").is_none());
        let p = pieces("src/${f}.bak").expect("pieces");
        assert_eq!(p.len(), 3);
    }

    #[test]
    fn a_listing_is_what_lists_paths_and_nothing_else() {
        assert!(listing("git ls-files '*.rs'").is_some());
        assert!(listing("git diff --name-only main").is_some());
        assert_eq!(
            listing("find src tests -name '*.rs'")
                .map(|v| v.into_iter().map(|w| w.text).collect::<Vec<_>>()),
            Some(vec!["src".to_string(), "tests".to_string()])
        );
        for other in [
            "cat list",
            "find . -exec cat {} +",
            "git ls-files; id",
            "git -C /x ls-files",
            "find $D",
        ] {
            assert!(listing(other).is_none(), "{other}");
        }
    }

    #[test]
    fn an_assignment_is_found_anywhere() {
        assert!(assigns("for f in a; do f=/x; done", "f"));
        assert!(assigns("eval 'f+=x'", "f"));
        assert!(!assigns("for f in a; do cat \"$f\"; done", "f"));
        assert!(!assigns("elf=1", "f"));
    }
}

//! Commands that can start processes without bound: a fork bomb (`:(){ :|:& };:`), a
//! function that calls itself through a pipe or in the background, a loop without a fixed
//! end that backgrounds what it runs. Each of those is ordinary shell, made only of
//! programs the classifier knows (`:` is a no-op), so nothing else in the classifier sees
//! them; what they do is fill the process table. The contract approves them only where the
//! kernel holds the worker to its process cap.
//!
//! It works on the simple commands the lexer found ([`super::shell::split`]), in their
//! order, and answers with the reason, never with a guess that a shape is harmless: a
//! function run through a pipe or `&` is read as recursion whether or not its body calls
//! it (the body's extent is not tracked), which only ever errs toward asking.

use super::shell::SimpleCommand;

/// Words of a `for` list a loop that backgrounds each turn may have and still count as
/// bounded (`for i in 1 2 3; do job & done`).
const BOUNDED_LIST: usize = 64;

/// Why `cmds` can start processes without bound, if they can.
pub fn unbounded(cmds: &[SimpleCommand]) -> Option<String> {
    recursion(cmds).or_else(|| looping(cmds))
}

/// Reserved words that may lead a simple command without being its program.
fn is_leading_keyword(word: &str) -> bool {
    matches!(
        word,
        "{" | "}" | "!" | "do" | "then" | "else" | "elif" | "if" | "while" | "until" | "time"
    )
}

/// The program a simple command runs: its first word after the reserved words (and after
/// `function NAME {`).
fn program(cmd: &SimpleCommand) -> Option<&str> {
    let mut words = cmd.words.iter().peekable();
    if words
        .peek()
        .is_some_and(|w| !w.quoted && w.text == "function")
    {
        words.next();
        words.next();
    }
    words
        .find(|w| w.quoted || !is_leading_keyword(&w.text))
        .map(|w| w.text.as_str())
}

/// A function defined here and run through a pipe or in the background: each call is a
/// new process, so one that calls itself that way doubles without end.
fn recursion(cmds: &[SimpleCommand]) -> Option<String> {
    let defined: Vec<&str> = cmds.iter().filter_map(|c| c.defines.as_deref()).collect();
    if defined.is_empty() {
        return None;
    }
    cmds.iter()
        // A head is not a call, but `function f { f | f & }` holds the first call after it.
        .filter(|c| c.defines.is_none() || c.words.len() > 2)
        .filter(|c| c.piped || c.pipes_out || c.background)
        .find_map(|c| {
            let name = program(c)?;
            defined.contains(&name).then(|| {
                format!("the function `{name}` is defined here and run through a pipe or in the background, so each call starts new processes: a fork bomb's shape")
            })
        })
}

/// A `while`/`until` loop, or a `for` over a list known only at run time or longer than
/// [`BOUNDED_LIST`], whose body backgrounds a command: each turn leaves a process behind.
fn looping(cmds: &[SimpleCommand]) -> Option<String> {
    // One entry per open loop: whether it has no fixed end.
    let mut open: Vec<bool> = Vec::new();
    for cmd in cmds {
        let mut opened_here = false;
        for (i, w) in cmd.words.iter().enumerate() {
            if w.quoted {
                break;
            }
            match w.text.as_str() {
                "while" | "until" => {
                    open.push(true);
                    opened_here = true;
                }
                "for" | "select" => {
                    open.push(!for_list_is_bounded(&cmd.words[i + 1..]));
                    opened_here = true;
                    break;
                }
                "done" => {
                    open.pop();
                }
                word if is_leading_keyword(word) => {}
                _ => break,
            }
        }
        // `while cond &` backgrounds the condition's command, not a loop body.
        if cmd.background && !opened_here && open.iter().any(|&unbounded| unbounded) {
            return Some(format!(
                "a loop without a fixed end starts `{}` in the background on every turn",
                program(cmd).unwrap_or_default()
            ));
        }
    }
    None
}

/// The words after `for`/`select`: `NAME in WORD…` with every word known and at most
/// [`BOUNDED_LIST`] of them. `for NAME` alone (the positional parameters) and C-style
/// `for ((…))` are not.
fn for_list_is_bounded(words: &[super::shell::Word]) -> bool {
    let Some(at) = words.iter().position(|w| !w.quoted && w.text == "in") else {
        return false;
    };
    let list = &words[at + 1..];
    list.len() <= BOUNDED_LIST && list.iter().all(|w| !w.dynamic)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(src: &str) -> Option<String> {
        unbounded(&crate::policy::shell::split(src).expect("parses"))
    }

    #[test]
    fn fork_bombs_are_found_in_their_usual_spellings() {
        for bomb in [
            ":(){ :|:& };:",
            ":() { : | : & }; :",
            "bomb() { bomb | bomb & }; bomb",
            "f(){ f & f & }; f",
            "function f { f | f & }; f",
            "function f() { f|f& }\nf",
            "x() ( x | x & ); x",
        ] {
            let why = reason(bomb).unwrap_or_else(|| panic!("not seen: {bomb}"));
            assert!(why.contains("fork bomb"), "{bomb}: {why}");
        }
    }

    #[test]
    fn loops_without_an_end_that_background_are_found() {
        for storm in [
            "while true; do sleep 100 & done",
            "while :; do (sleep 100 &) ; done",
            "until false; do yes > /dev/null & done",
            "for i in $(seq 1 100000); do sleep 100 & done",
            "for ((i=0;;i++)); do sleep 1 & done",
            "for x; do sleep 1 & done",
            "while read l; do if true; then sleep 1 & fi; done < list",
        ] {
            assert!(
                reason(storm).is_some_and(|w| w.contains("loop")),
                "not seen: {storm}"
            );
        }
    }

    #[test]
    fn everyday_commands_are_not_storms() {
        for everyday in [
            "cargo test &",
            "sleep 1 & wait",
            "for f in src/*.rs; do wc -l \"$f\"; done",
            "for i in 1 2 3; do ./job.sh $i & done; wait",
            "while read l; do echo \"$l\"; done < file",
            "while true; do sleep 1; done &",
            "git log | head -5",
            "f() { echo hi; }; f",
            "python3 --version",
            "echo '(){ :|:& };:'",
            "grep -n 'fn main()' src/main.rs",
        ] {
            assert_eq!(reason(everyday), None, "{everyday}");
        }
    }
}

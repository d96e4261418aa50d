//! Option specs: which flags of a program exist and which take a value.
//!
//! Without them the classifier has to guess whether the word after a flag is the flag's
//! value or an operand, and every guess is a hole: a list saying `-n` takes a value makes
//! `cat -n ~/.ssh/id_rsa` read nothing, and `sort -f` swallow its file. With a spec the
//! operands are exactly the words the program will open, and a flag the spec does not know
//! makes the command "not understood completely" (the caller escalates it unconfined).
//!
//! A spec is written as the program's own help text would list it: the short flags without
//! a value as one string, the short flags with a value as another, the long ones as lists.
//! Parsing follows GNU getopt: combined short flags (`-la`), attached values (`-n5`,
//! `--lines=5`), options after operands, and `--` ending the options.

use crate::policy::shell::Word;

/// The options of one program.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OptSpec {
    /// Short flags that take no value: `"lahR"`.
    pub flags: &'static str,
    /// Short flags whose value is attached or the next word: `"nc"`.
    pub values: &'static str,
    /// Long flags that take no value (`--all`); `--color=auto` style optional values are
    /// accepted for these too.
    pub long: &'static [&'static str],
    /// Long flags whose value is attached (`--lines=5`) or the next word.
    pub long_values: &'static [&'static str],
    /// `-5` means a count (`head -5`, `tail -20`).
    pub numeric: bool,
}

impl OptSpec {
    pub const fn new(flags: &'static str, values: &'static str) -> OptSpec {
        OptSpec {
            flags,
            values,
            long: &[],
            long_values: &[],
            numeric: false,
        }
    }

    pub const fn long(
        mut self,
        long: &'static [&'static str],
        long_values: &'static [&'static str],
    ) -> OptSpec {
        self.long = long;
        self.long_values = long_values;
        self
    }

    pub const fn numeric(mut self) -> OptSpec {
        self.numeric = true;
        self
    }
}

/// A command line read by its spec.
#[derive(Debug, Default, Clone)]
pub(crate) struct Parsed {
    /// The non-option words, in order.
    pub operands: Vec<Word>,
    /// Options as written (`-n`, `--lines`), with their value when they take one.
    pub options: Vec<(String, Option<Word>)>,
    /// The first flag the spec does not know, if any.
    pub unknown: Option<String>,
}

impl Parsed {
    /// Whether any of `names` was given (`-i`, `--in-place`; short flags also inside a group).
    pub fn has(&self, names: &[&str]) -> bool {
        self.options
            .iter()
            .any(|(o, _)| names.contains(&o.as_str()))
    }

    /// The value of the first of `names` given.
    pub fn value(&self, names: &[&str]) -> Option<&Word> {
        self.options
            .iter()
            .find(|(o, v)| names.contains(&o.as_str()) && v.is_some())
            .and_then(|(_, v)| v.as_ref())
    }

    /// Every value of `names`, in order.
    pub fn values<'p>(&'p self, names: &'p [&'p str]) -> impl Iterator<Item = &'p Word> + 'p {
        self.options
            .iter()
            .filter(move |(o, _)| names.contains(&o.as_str()))
            .filter_map(|(_, v)| v.as_ref())
    }
}

/// Reads `args` by `spec`. Never fails: an unknown flag is recorded in [`Parsed::unknown`]
/// and taken as a flag without a value, so that every other word stays an operand (the
/// safe side: an operand is judged as a path, a swallowed value is not judged at all).
pub(crate) fn parse(args: &[Word], spec: &OptSpec) -> Parsed {
    let mut out = Parsed::default();
    let mut i = 0;
    let mut done = false;
    let unknown = |out: &mut Parsed, flag: &str| {
        if out.unknown.is_none() {
            out.unknown = Some(flag.to_string());
        }
    };
    while i < args.len() {
        let w = &args[i];
        let t = w.text.as_str();
        i += 1;
        if done || t == "-" || !t.starts_with('-') {
            out.operands.push(w.clone());
            continue;
        }
        if t == "--" {
            done = true;
            continue;
        }
        if w.dynamic {
            // `-$X`: which flag it is is known only at run time.
            unknown(&mut out, t);
            continue;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let name = format!("--{name}");
            if spec.long_values.contains(&name.as_str()) {
                let value = match attached {
                    Some(v) => Some(Word {
                        text: v.to_string(),
                        ..w.clone()
                    }),
                    None => {
                        i += 1;
                        args.get(i - 1).cloned()
                    }
                };
                out.options.push((name, value));
            } else if spec.long.contains(&name.as_str()) {
                let value = attached.map(|v| Word {
                    text: v.to_string(),
                    ..w.clone()
                });
                out.options.push((name, value));
            } else {
                unknown(&mut out, &name);
                out.options.push((name, None));
            }
            continue;
        }
        let body = &t[1..];
        if spec.numeric && body.bytes().all(|b| b.is_ascii_digit()) {
            out.options.push(("-NUM".into(), None));
            continue;
        }
        for (at, ch) in body.char_indices() {
            let flag = format!("-{ch}");
            if spec.values.contains(ch) {
                let rest = &body[at + ch.len_utf8()..];
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i - 1).cloned()
                } else {
                    Some(Word {
                        text: rest.to_string(),
                        ..w.clone()
                    })
                };
                out.options.push((flag, value));
                break;
            }
            if !spec.flags.contains(ch) {
                unknown(&mut out, &flag);
            }
            out.options.push((flag, None));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<Word> {
        s.split_whitespace()
            .map(|t| Word {
                text: t.into(),
                dynamic: false,
                quoted: false,
                ..Default::default()
            })
            .collect()
    }

    fn ops(p: &Parsed) -> Vec<&str> {
        p.operands.iter().map(|w| w.text.as_str()).collect()
    }

    const CAT: OptSpec = OptSpec::new("AbeEnstTuv", "");
    const HEAD: OptSpec = OptSpec::new("qvz", "nc")
        .long(&["--quiet"], &["--lines", "--bytes"])
        .numeric();

    #[test]
    fn a_flag_without_a_value_leaves_the_file_an_operand() {
        let p = parse(&words("-n ~/.ssh/id_rsa"), &CAT);
        assert_eq!(ops(&p), ["~/.ssh/id_rsa"]);
        assert!(p.unknown.is_none());
    }

    #[test]
    fn values_attached_separate_long_and_numeric() {
        let p = parse(&words("-n 5 a -n5 b --lines=3 c --lines 4 d -20 e"), &HEAD);
        assert_eq!(ops(&p), ["a", "b", "c", "d", "e"]);
        assert_eq!(p.value(&["--lines"]).map(|w| w.text.as_str()), Some("3"));
        assert!(p.unknown.is_none());
    }

    #[test]
    fn combined_short_flags_and_a_trailing_value() {
        let spec = OptSpec::new("rnil", "e");
        let p = parse(&words("-rnie pattern src"), &spec);
        assert_eq!(ops(&p), ["src"]);
        assert_eq!(p.value(&["-e"]).map(|w| w.text.as_str()), Some("pattern"));
    }

    #[test]
    fn an_unknown_flag_is_named_and_every_other_word_stays_an_operand() {
        let p = parse(&words("-Z secret --frob x -- -y"), &CAT);
        assert_eq!(p.unknown.as_deref(), Some("-Z"));
        assert_eq!(ops(&p), ["secret", "x", "-y"]);
        let p = parse(&words("--frob=1 a"), &CAT);
        assert_eq!(p.unknown.as_deref(), Some("--frob"));
    }

    #[test]
    fn a_flag_known_only_at_run_time_is_unknown() {
        let mut args = words("-x a");
        args[0].dynamic = true;
        assert!(parse(&args, &CAT).unknown.is_some());
    }
}

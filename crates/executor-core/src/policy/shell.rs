//! Splitting a shell command line into the simple commands it would run.
//!
//! The policy judges a compound command by its most dangerous part, so every part must be
//! found: commands joined by `&&`, `||`, `;`, `&`, `|`, `|&` and newlines; inside `( … )` and
//! `{ …; }`; inside `$( … )`, `` `…` ``, `<( … )` and `>( … )` — also inside double quotes,
//! `${…}` and unquoted here-documents, where bash runs them too. Words come back with their
//! quotes removed and a `dynamic` mark when their value is only known at run time
//! (`$VAR`, a substitution, `$'\x…'`, brace expansion), so that the classifier never takes a
//! guess for a fact.
//!
//! This is a lexer, not a shell: it never expands or runs anything. It is written here rather
//! than taken from a crate because the quote-aware lexing and the operator splitting are one
//! pass (a quote decides whether `;` is an operator), and a shell-words crate does only the
//! first half. Unbalanced quotes or parentheses are an error (the caller escalates), never a
//! panic; nesting deeper than [`MAX_DEPTH`] is an error too.

/// How deep substitutions may nest before the input is refused.
pub const MAX_DEPTH: usize = 12;

/// One word of a command, quotes removed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Word {
    pub text: String,
    /// Its value depends on an expansion (`$X`, `$(…)`, `` `…` ``, `{a,b}`, `$'\x..'`).
    pub dynamic: bool,
    /// Some part of it was quoted (so it is not an fd number, a keyword or an assignment).
    pub quoted: bool,
    /// The source of the one command substitution the whole word is (`$(git ls-files)`,
    /// `"`…`"`), so that a classifier can tell what stands in its place; `None` otherwise.
    pub substitution: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectKind {
    /// `<`: reads the target.
    Read,
    /// `>`, `>|`, `&>`, `>&file`: truncates or creates the target.
    Write,
    /// `>>`, `&>>`.
    Append,
    /// `<>`: opens the target for reading and writing.
    ReadWrite,
    /// `<&N`, `>&N`, `>&-`: duplicates a descriptor, no file.
    Duplicate,
    /// `<<WORD`, `<<-WORD`, `<<<word`: no file.
    Here,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    pub kind: RedirectKind,
    pub target: Word,
}

/// One simple command: its words (assignments and keywords included) and redirections.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimpleCommand {
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
    /// Its standard input comes from a pipe (`a | b`: true for `b`).
    pub piped: bool,
    /// Its standard output goes into a pipe (`a | b`: true for `a`).
    pub pipes_out: bool,
    /// It runs in the background (ended by a lone `&`).
    pub background: bool,
    /// It is the head of a function definition (`NAME()` or `function NAME`): the name.
    pub defines: Option<String>,
    /// Its text as written, for messages and the `command` argument.
    pub source: String,
    /// The parameters its words, redirections and here-documents expand, by name (`HOME`
    /// for `$HOME` and `${HOME:-x}`; `!X` for the indirect `${!X}`), in order of appearance.
    /// Special parameters (`$1`, `$@`, `$?`, …) are not listed.
    pub params: Vec<String>,
    /// The text its last here-document or here-string feeds it (`git apply <<'EOF'`), as
    /// written: a classifier that reads a program's input (a patch) reads it here.
    pub input: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShellError {
    #[error("unbalanced {0}")]
    Unbalanced(&'static str),
    #[error("a redirection without a target")]
    MissingRedirectTarget,
    #[error("substitutions nested deeper than {MAX_DEPTH}")]
    TooDeep,
}

/// Splits `src` into its simple commands, those inside substitutions first (they run first).
pub fn split(src: &str) -> Result<Vec<SimpleCommand>, ShellError> {
    split_at_depth(src, 0)
}

pub(crate) fn split_at_depth(src: &str, depth: usize) -> Result<Vec<SimpleCommand>, ShellError> {
    if depth > MAX_DEPTH {
        return Err(ShellError::TooDeep);
    }
    let mut lexer = Lexer {
        s: src.as_bytes(),
        src,
        i: 0,
        depth,
        out: Vec::new(),
        params: Vec::new(),
        last_substitution: None,
    };
    lexer.sequence(false)?;
    // Parameters of here-documents read after the last command belong to it.
    if let Some(last) = lexer.out.last_mut() {
        last.params.append(&mut lexer.params);
    }
    Ok(lexer.out)
}

struct Lexer<'a> {
    s: &'a [u8],
    src: &'a str,
    i: usize,
    depth: usize,
    out: Vec<SimpleCommand>,
    /// Parameters expanded since the last command was finished (see [`SimpleCommand::params`]).
    params: Vec<String>,
    /// The source of the last command substitution read, for [`Word::substitution`].
    last_substitution: Option<String>,
}

struct HereDoc {
    delimiter: String,
    strip_tabs: bool,
    quoted: bool,
    /// The index in `out` of the command it feeds, once that command is finished.
    owner: Option<usize>,
}

fn is_meta(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'\t' | b'\n' | b'\r' | b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')'
    )
}

impl<'a> Lexer<'a> {
    fn peek(&self, off: usize) -> Option<u8> {
        self.s.get(self.i + off).copied()
    }

    fn starts_with(&self, pat: &[u8]) -> bool {
        self.s
            .get(self.i..)
            .is_some_and(|rest| rest.starts_with(pat))
    }

    /// Parses commands until the end (or, inside `$(`, the matching `)`, which it consumes).
    fn sequence(&mut self, in_substitution: bool) -> Result<(), ShellError> {
        let mut cur = SimpleCommand::default();
        let mut start: Option<usize> = None;
        let mut end = 0;
        let mut open_parens = 0usize;
        let mut heredocs: Vec<HereDoc> = Vec::new();
        let mut next_piped = false;

        loop {
            // Blanks and line continuations.
            while let Some(c) = self.peek(0) {
                if c == b' ' || c == b'\t' || c == b'\r' {
                    self.i += 1;
                } else if c == b'\\' && self.peek(1) == Some(b'\n') {
                    self.i += 2;
                } else {
                    break;
                }
            }
            let Some(c) = self.peek(0) else {
                if in_substitution {
                    return Err(ShellError::Unbalanced("$( … )"));
                }
                self.finish(&mut cur, start, end, &mut next_piped);
                return Ok(());
            };
            match c {
                b'#' if cur.words.is_empty() || self.i == 0 || is_meta(self.s[self.i - 1]) => {
                    while self.peek(0).is_some_and(|c| c != b'\n') {
                        self.i += 1;
                    }
                }
                b'\n' => {
                    self.i += 1;
                    self.finish(&mut cur, start.take(), end, &mut next_piped);
                    own_heredocs(&mut heredocs, self.out.len());
                    for doc in heredocs.drain(..) {
                        self.heredoc_body(&doc)?;
                    }
                }
                b';' | b'&' | b'|' if !self.starts_with(b"&>") => {
                    let op_len = if self.starts_with(b";;&") {
                        3
                    } else if self.starts_with(b"&&")
                        || self.starts_with(b"||")
                        || self.starts_with(b"|&")
                        || self.starts_with(b";;")
                        || self.starts_with(b";&")
                    {
                        2
                    } else {
                        1
                    };
                    let pipe = c == b'|' && !self.starts_with(b"||");
                    cur.pipes_out |= pipe;
                    cur.background |= c == b'&' && op_len == 1;
                    self.i += op_len;
                    self.finish(&mut cur, start.take(), end, &mut next_piped);
                    own_heredocs(&mut heredocs, self.out.len());
                    next_piped = pipe;
                }
                b'(' => {
                    self.i += 1;
                    if let Some(name) = self.function_head(&cur) {
                        // `NAME()`: the `)` is part of the head, not a subshell's end.
                        cur.defines = Some(name);
                        end = self.i;
                    } else {
                        open_parens += 1;
                    }
                    self.finish(&mut cur, start.take(), end, &mut next_piped);
                    own_heredocs(&mut heredocs, self.out.len());
                }
                b')' => {
                    self.i += 1;
                    self.finish(&mut cur, start.take(), end, &mut next_piped);
                    own_heredocs(&mut heredocs, self.out.len());
                    if open_parens > 0 {
                        open_parens -= 1;
                    } else if in_substitution {
                        return Ok(());
                    }
                    // A stray `)` (a `case` pattern) separates like `;`.
                }
                b'<' | b'>' | b'&' => {
                    if (c == b'<' || c == b'>') && self.peek(1) == Some(b'(') {
                        // Process substitution: a word whose commands run.
                        let at = self.i;
                        self.i += 2;
                        self.nested_substitution()?;
                        start.get_or_insert(at);
                        end = self.i;
                        cur.words.push(Word {
                            text: "/dev/fd/63".into(),
                            dynamic: true,
                            quoted: false,
                            ..Default::default()
                        });
                        continue;
                    }
                    start.get_or_insert(self.i);
                    let here_string = self.starts_with(b"<<<");
                    let redirect = self.redirect(&mut heredocs)?;
                    end = self.i;
                    if here_string {
                        cur.input = Some(redirect.target.text.clone());
                    }
                    cur.redirects.push(redirect);
                }
                _ => {
                    let at = self.i;
                    let word = self.word()?;
                    // `2>file`: digits right before a redirection are its descriptor.
                    let fd = !word.quoted
                        && !word.text.is_empty()
                        && word.text.bytes().all(|b| b.is_ascii_digit())
                        && matches!(self.peek(0), Some(b'<' | b'>'));
                    start.get_or_insert(at);
                    end = self.i;
                    if !fd {
                        cur.words.push(word);
                    }
                }
            }
        }
    }

    /// Right after a `(`: when `cur` is a lone name (or `function NAME`) and the next
    /// non-blank is `)`, this is a function definition's head; consumes the `)` and returns
    /// the name.
    fn function_head(&mut self, cur: &SimpleCommand) -> Option<String> {
        let plain = |w: &Word| !w.quoted && !w.dynamic && !w.text.is_empty();
        let name = match cur.words.as_slice() {
            [name] if plain(name) => name,
            [kw, name] if plain(kw) && kw.text == "function" && plain(name) => name,
            _ => return None,
        };
        let mut at = self.i;
        while matches!(self.s.get(at), Some(b' ' | b'\t')) {
            at += 1;
        }
        if self.s.get(at) != Some(&b')') {
            return None;
        }
        self.i = at + 1;
        Some(name.text.clone())
    }

    fn finish(
        &mut self,
        cur: &mut SimpleCommand,
        start: Option<usize>,
        end: usize,
        piped: &mut bool,
    ) {
        if cur.words.is_empty() && cur.redirects.is_empty() {
            return;
        }
        let mut cmd = std::mem::take(cur);
        cmd.piped = std::mem::take(piped);
        cmd.params = std::mem::take(&mut self.params);
        if cmd.defines.is_none() {
            if let [kw, name, ..] = cmd.words.as_slice() {
                if kw.text == "function" && !kw.quoted && !name.dynamic {
                    cmd.defines = Some(name.text.clone());
                }
            }
        }
        if let Some(start) = start {
            cmd.source = self
                .src
                .get(start..end.max(start))
                .unwrap_or_default()
                .to_string();
        }
        self.out.push(cmd);
    }

    /// After `$(` or `<(`: the commands up to the matching `)`.
    fn nested_substitution(&mut self) -> Result<(), ShellError> {
        if self.depth + 1 > MAX_DEPTH {
            return Err(ShellError::TooDeep);
        }
        self.depth += 1;
        let r = self.sequence(true);
        self.depth -= 1;
        r
    }

    /// Parses the commands of a separate piece of text (backticks, `${…}`, a here-document).
    fn nested_text(&mut self, text: &str, as_double_quoted: bool) -> Result<(), ShellError> {
        if self.depth + 1 > MAX_DEPTH {
            return Err(ShellError::TooDeep);
        }
        let mut inner = Lexer {
            s: text.as_bytes(),
            src: text,
            i: 0,
            depth: self.depth + 1,
            out: Vec::new(),
            params: Vec::new(),
            last_substitution: None,
        };
        if as_double_quoted {
            let mut sink = Word::default();
            inner.double_quoted(&mut sink, None)?;
        } else {
            inner.sequence(false)?;
        }
        self.out.append(&mut inner.out);
        // What the text expands outside its commands (`${X:-$Y}`, a here-document's `$Y`)
        // belongs to the command being read here.
        self.params.append(&mut inner.params);
        Ok(())
    }

    fn redirect(&mut self, heredocs: &mut Vec<HereDoc>) -> Result<Redirect, ShellError> {
        const OPS: &[(&[u8], RedirectKind)] = &[
            (b"&>>", RedirectKind::Append),
            (b"&>", RedirectKind::Write),
            (b"<<<", RedirectKind::Here),
            (b"<<-", RedirectKind::Here),
            (b"<<", RedirectKind::Here),
            (b"<>", RedirectKind::ReadWrite),
            (b"<&", RedirectKind::Duplicate),
            (b">>", RedirectKind::Append),
            (b">|", RedirectKind::Write),
            (b">&", RedirectKind::Duplicate),
            (b"<", RedirectKind::Read),
            (b">", RedirectKind::Write),
        ];
        let Some(&(op, mut kind)) = OPS.iter().find(|(op, _)| self.starts_with(op)) else {
            // A lone `&` that is not `&>` was handled as an operator; unreachable in practice.
            self.i += 1;
            return Err(ShellError::MissingRedirectTarget);
        };
        self.i += op.len();
        while matches!(self.peek(0), Some(b' ' | b'\t')) {
            self.i += 1;
        }
        if self.peek(0).is_none_or(is_meta) {
            return Err(ShellError::MissingRedirectTarget);
        }
        let target = self.word()?;
        if op == b"<<" || op == b"<<-" {
            heredocs.push(HereDoc {
                delimiter: target.text.clone(),
                strip_tabs: op == b"<<-",
                quoted: target.quoted,
                owner: None,
            });
        }
        if kind == RedirectKind::Duplicate && op == b">&" {
            // `>&file` writes to a file; only `>&2`, `>&-` duplicate.
            let t = target.text.as_str();
            if !(t == "-"
                || (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                || t.ends_with('-'))
            {
                kind = RedirectKind::Write;
            }
        }
        Ok(Redirect { kind, target })
    }

    /// Consumes a here-document's body (after the newline that ends its command). An unquoted
    /// delimiter means the body is expanded: its substitutions run, so they are parsed.
    fn heredoc_body(&mut self, doc: &HereDoc) -> Result<(), ShellError> {
        let body_start = self.i;
        let mut body_end = self.s.len();
        while self.i < self.s.len() {
            let line_start = self.i;
            let line_end = self.s[self.i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(self.s.len(), |p| self.i + p);
            self.i = (line_end + 1).min(self.s.len());
            let line = self.src.get(line_start..line_end).unwrap_or_default();
            let line = if doc.strip_tabs {
                line.trim_start_matches('\t')
            } else {
                line
            };
            if line.trim_end_matches('\r') == doc.delimiter {
                body_end = line_start;
                break;
            }
        }
        let body = self.src.get(body_start..body_end).unwrap_or_default();
        if let Some(cmd) = doc.owner.and_then(|at| self.out.get_mut(at)) {
            cmd.input = Some(body.to_string());
        }
        if !doc.quoted {
            // Its substitutions run and its parameters expand (`cat <<EOF` of `$TOKEN`).
            let body = self.src.get(body_start..body_end).unwrap_or_default();
            if body.contains('$') || body.contains('`') {
                self.nested_text(body, true)?;
            }
        }
        Ok(())
    }

    /// One word, up to an unquoted metacharacter.
    fn word(&mut self) -> Result<Word, ShellError> {
        let mut w = Word::default();
        self.last_substitution = None;
        let mut brace = false;
        let mut bytes: Vec<u8> = Vec::new();
        while let Some(c) = self.peek(0) {
            if is_meta(c) {
                break;
            }
            match c {
                b'\\' => {
                    match self.peek(1) {
                        Some(b'\n') => {}
                        Some(n) => bytes.push(n),
                        None => {}
                    }
                    w.quoted = true;
                    self.i += 2.min(self.s.len() - self.i);
                }
                b'\'' => {
                    w.quoted = true;
                    self.i += 1;
                    let Some(len) = self.s[self.i..].iter().position(|&c| c == b'\'') else {
                        return Err(ShellError::Unbalanced("single quote"));
                    };
                    bytes.extend_from_slice(&self.s[self.i..self.i + len]);
                    self.i += len + 1;
                }
                b'"' => {
                    w.quoted = true;
                    self.i += 1;
                    self.flush(&mut w, &mut bytes);
                    self.double_quoted(&mut w, Some(b'"'))?;
                }
                b'`' => {
                    self.i += 1;
                    self.backticks()?;
                    w.dynamic = true;
                    bytes.extend_from_slice(b"$(..)");
                }
                b'$' => {
                    self.flush(&mut w, &mut bytes);
                    self.dollar(&mut w)?;
                }
                b'{' => {
                    brace = true;
                    bytes.push(c);
                    self.i += 1;
                }
                _ => {
                    bytes.push(c);
                    self.i += 1;
                }
            }
        }
        self.flush(&mut w, &mut bytes);
        if brace && (w.text.contains(',') || w.text.contains("..")) {
            // `{a,../b}` and `{1..3}` expand to several words.
            w.dynamic = true;
        }
        if w.text == "$(..)" {
            w.substitution = self.last_substitution.take();
        }
        Ok(w)
    }

    fn flush(&self, w: &mut Word, bytes: &mut Vec<u8>) {
        if !bytes.is_empty() {
            // Bytes were copied whole from valid UTF-8 between ASCII delimiters.
            w.text.push_str(&String::from_utf8_lossy(bytes));
            bytes.clear();
        }
    }

    /// The inside of `"…"` (terminator `"`) or of an expanded here-document (no terminator):
    /// backslash escapes, `$…` expansions and backticks.
    fn double_quoted(&mut self, w: &mut Word, terminator: Option<u8>) -> Result<(), ShellError> {
        let mut bytes = Vec::new();
        loop {
            let Some(c) = self.peek(0) else {
                if terminator.is_some() {
                    return Err(ShellError::Unbalanced("double quote"));
                }
                break;
            };
            if Some(c) == terminator {
                self.i += 1;
                break;
            }
            match c {
                b'\\' => {
                    match self.peek(1) {
                        Some(n @ (b'$' | b'`' | b'"' | b'\\')) => bytes.push(n),
                        Some(b'\n') => {}
                        Some(n) => bytes.extend_from_slice(&[b'\\', n]),
                        None => bytes.push(b'\\'),
                    }
                    self.i += 2.min(self.s.len() - self.i);
                }
                b'`' => {
                    self.i += 1;
                    self.backticks()?;
                    w.dynamic = true;
                    bytes.extend_from_slice(b"$(..)");
                }
                b'$' => {
                    self.flush(w, &mut bytes);
                    self.dollar(w)?;
                }
                _ => {
                    bytes.push(c);
                    self.i += 1;
                }
            }
        }
        self.flush(w, &mut bytes);
        Ok(())
    }

    /// At a `$`: a substitution, a parameter, an ANSI-C string, or a plain `$`.
    fn dollar(&mut self, w: &mut Word) -> Result<(), ShellError> {
        match self.peek(1) {
            Some(b'(') => {
                // `$(…)` and `$((…))` alike: the arithmetic form parses as a subshell.
                self.i += 2;
                let start = self.i;
                self.nested_substitution()?;
                let inner = self.src.get(start..self.i.saturating_sub(1));
                self.last_substitution = inner.map(str::to_string);
                w.dynamic = true;
                w.text.push_str("$(..)");
            }
            Some(b'{') => {
                self.i += 2;
                let start = self.i;
                let mut depth = 1;
                let mut quote: Option<u8> = None;
                while let Some(c) = self.peek(0) {
                    self.i += 1;
                    match (quote, c) {
                        (Some(q), c) if c == q => quote = None,
                        (Some(_), b'\\') | (None, b'\\') => self.i += 1,
                        (Some(_), _) => {}
                        (None, b'\'' | b'"') => quote = Some(c),
                        (None, b'{') => depth += 1,
                        (None, b'}') => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                if depth != 0 {
                    return Err(ShellError::Unbalanced("${ … }"));
                }
                let inner = self
                    .src
                    .get(start..self.i.saturating_sub(1))
                    .unwrap_or_default();
                let name = parameter_name(inner);
                if !name.is_empty() {
                    self.params.push(name.to_string());
                }
                if inner.contains('$') || inner.contains('`') {
                    // `${x:-$(cmd)}` runs cmd; `${x:-$Y}` expands Y.
                    self.nested_text(inner, true)?;
                }
                w.dynamic = true;
                if is_name(inner) {
                    // `${f}` keeps its name, like `$f`, for a classifier that knows `f`.
                    w.text.push_str(&format!("${{{inner}}}"));
                } else {
                    w.text.push_str("${..}");
                }
            }
            Some(b'\'') => {
                // ANSI-C quoting: `$'\x67h'` is `gh`; escapes make the value dynamic.
                self.i += 2;
                w.quoted = true;
                let start = self.i;
                loop {
                    match self.peek(0) {
                        None => return Err(ShellError::Unbalanced("$' quote")),
                        Some(b'\\') => {
                            w.dynamic = true;
                            self.i += 2;
                        }
                        Some(b'\'') => break,
                        Some(_) => self.i += 1,
                    }
                }
                let end = self.i.min(self.s.len());
                w.text
                    .push_str(self.src.get(start..end).unwrap_or_default());
                self.i += 1;
            }
            Some(b'"') => {
                // `$"…"`: a translatable double-quoted string.
                self.i += 2;
                w.quoted = true;
                self.double_quoted(w, Some(b'"'))?;
            }
            Some(c) if c.is_ascii_alphanumeric() || b"_@*#?$!-".contains(&c) => {
                let start = self.i;
                self.i += 1;
                if c.is_ascii_alphabetic() || c == b'_' {
                    while self
                        .peek(0)
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
                    {
                        self.i += 1;
                    }
                } else {
                    self.i += 1;
                }
                let name = self.src.get(start + 1..self.i).unwrap_or_default();
                if is_name(name) {
                    self.params.push(name.to_string());
                }
                w.dynamic = true;
                w.text.push_str(self.src.get(start..self.i).unwrap_or("$"));
            }
            _ => {
                self.i += 1;
                w.text.push('$');
            }
        }
        Ok(())
    }

    /// After an opening backtick: the commands up to the closing one.
    fn backticks(&mut self) -> Result<(), ShellError> {
        let mut inner = Vec::new();
        loop {
            match self.peek(0) {
                None => return Err(ShellError::Unbalanced("backquote")),
                Some(b'`') => {
                    self.i += 1;
                    break;
                }
                Some(b'\\') => {
                    match self.peek(1) {
                        Some(n @ (b'`' | b'\\' | b'$')) => inner.push(n),
                        Some(n) => inner.extend_from_slice(&[b'\\', n]),
                        None => inner.push(b'\\'),
                    }
                    self.i += 2.min(self.s.len() - self.i);
                }
                Some(c) => {
                    inner.push(c);
                    self.i += 1;
                }
            }
        }
        let text = String::from_utf8_lossy(&inner).into_owned();
        self.nested_text(&text, false)?;
        self.last_substitution = Some(text);
        Ok(())
    }
}

/// The here-documents read so far without a command belong to the one just finished
/// (`count` commands are out): their bodies come after the line, and feed it.
fn own_heredocs(heredocs: &mut [HereDoc], count: usize) {
    for doc in heredocs.iter_mut().filter(|d| d.owner.is_none()) {
        doc.owner = count.checked_sub(1);
    }
}

/// A shell variable's name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The parameter a `${…}` expands: `X` for `${X}`, `${X:-y}`, `${#X}`, `${X[0]}`; `!X` for
/// the indirect `${!X}` and `${!X*}` (the value, or the names, of other variables); empty
/// for a special one (`${1}`, `${@}`).
fn parameter_name(inner: &str) -> String {
    let (bang, rest) = match inner.strip_prefix('!') {
        Some(rest) => ("!", rest),
        None => (
            "",
            inner
                .strip_prefix('#')
                .filter(|r| !r.is_empty())
                .unwrap_or(inner),
        ),
    };
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let name = &rest[..end];
    if is_name(name) {
        format!("{bang}{name}")
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(src: &str) -> Vec<Vec<String>> {
        split(src)
            .unwrap_or_else(|e| panic!("{src}: {e}"))
            .into_iter()
            .map(|c| c.words.into_iter().map(|w| w.text).collect())
            .collect()
    }

    fn v(parts: &[&[&str]]) -> Vec<Vec<String>> {
        parts
            .iter()
            .map(|p| p.iter().map(|s| s.to_string()).collect())
            .collect()
    }

    #[test]
    fn operators_split_commands() {
        assert_eq!(
            words("true && gh pr merge 1 || a; b | c |& d & e\nf"),
            v(&[
                &["true"],
                &["gh", "pr", "merge", "1"],
                &["a"],
                &["b"],
                &["c"],
                &["d"],
                &["e"],
                &["f"]
            ])
        );
    }

    #[test]
    fn quotes_are_removed_and_keep_operators_inside() {
        assert_eq!(
            words(r#"echo "a && b" 'c; d' e\ f"#),
            v(&[&["echo", "a && b", "c; d", "e f"]])
        );
        assert_eq!(
            words(r#"echo "say \"hi\"" \$HOME"#),
            v(&[&["echo", "say \"hi\"", "$HOME"]])
        );
    }

    #[test]
    fn substitutions_are_found_everywhere_and_run_first() {
        assert_eq!(
            words("echo $(gh pr merge 1)"),
            v(&[&["gh", "pr", "merge", "1"], &["echo", "$(..)"]])
        );
        assert_eq!(
            words("echo \"x $(a `b`)\""),
            v(&[&["b"], &["a", "$(..)"], &["echo", "x $(..)"]])
        );
        assert_eq!(
            words("echo `gh pr merge 1`"),
            v(&[&["gh", "pr", "merge", "1"], &["echo", "$(..)"]])
        );
        assert_eq!(
            words("echo ${X:-$(rm -rf /)}"),
            v(&[&["rm", "-rf", "/"], &["echo", "${..}"]])
        );
        assert_eq!(
            words("diff <(git show a) b"),
            v(&[&["git", "show", "a"], &["diff", "/dev/fd/63", "b"]])
        );
        assert_eq!(words("(cd .. && rm x)"), v(&[&["cd", ".."], &["rm", "x"]]));
        assert_eq!(
            words("echo $((1 + 2))"),
            v(&[&["1", "+", "2"], &["echo", "$(..)"]])
        );
        // Single quotes stop all of it.
        assert_eq!(
            words("echo '$(gh pr merge 1)'"),
            v(&[&["echo", "$(gh pr merge 1)"]])
        );
    }

    #[test]
    fn redirections_are_kept_apart_from_words() {
        let cmds = split("echo hi > out.txt 2>/dev/null >>log 2>&1 &>all <in").expect("parse");
        assert_eq!(cmds.len(), 1);
        let kinds: Vec<(RedirectKind, &str)> = cmds[0]
            .redirects
            .iter()
            .map(|r| (r.kind, r.target.text.as_str()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (RedirectKind::Write, "out.txt"),
                (RedirectKind::Write, "/dev/null"),
                (RedirectKind::Append, "log"),
                (RedirectKind::Duplicate, "1"),
                (RedirectKind::Write, "all"),
                (RedirectKind::Read, "in"),
            ]
        );
        assert_eq!(cmds[0].words.len(), 2, "{:?}", cmds[0].words);
    }

    #[test]
    fn heredoc_bodies_are_not_commands_but_their_substitutions_are() {
        assert_eq!(
            words("cat <<EOF > f\ngh pr merge 1\nEOF\nls"),
            v(&[&["cat"], &["ls"]])
        );
        assert_eq!(
            words("cat <<EOF\n$(gh pr merge 1)\nEOF"),
            v(&[&["cat"], &["gh", "pr", "merge", "1"]])
        );
        assert_eq!(words("cat <<'EOF'\n$(gh pr merge 1)\nEOF"), v(&[&["cat"]]));
    }

    #[test]
    fn dynamic_words_are_marked() {
        let cmds = split("$CMD push {a,b} $'\\x67h' plain").expect("parse");
        let dynamic: Vec<bool> = cmds[0].words.iter().map(|w| w.dynamic).collect();
        assert_eq!(dynamic, vec![true, false, true, true, false]);
    }

    #[test]
    fn comments_and_continuations() {
        assert_eq!(
            words("echo a # && gh pr merge\nb"),
            v(&[&["echo", "a"], &["b"]])
        );
        assert_eq!(words("git \\\n push"), v(&[&["git", "push"]]));
        assert_eq!(words("echo a#b"), v(&[&["echo", "a#b"]]));
    }

    #[test]
    fn unbalanced_input_is_an_error() {
        for src in [
            "echo 'a", "echo \"a", "echo $(a", "echo `a", "echo ${a", "echo >", "echo $'a",
        ] {
            assert!(split(src).is_err(), "{src}");
        }
        let deep = "$(".repeat(MAX_DEPTH + 2) + &")".repeat(MAX_DEPTH + 2);
        assert_eq!(split(&deep), Err(ShellError::TooDeep));
    }
}

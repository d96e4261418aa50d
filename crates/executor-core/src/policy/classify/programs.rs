//! The program table: which programs the classifier understands, and how.
//!
//! A shell command is an open language (docs/design.md §6), so the classifier answers for a
//! program only when it can see through it completely: its name is in [`PROGRAMS`], its
//! flags are in its [`OptSpec`] (when its operands are files), and whatever it runs in turn
//! (a wrapper's command, `bash -c`'s string) is understood the same way. Everything else is
//! named for what it is — `run_unknown`, `run_inline_code`, `run_indirect`, `git_admin` —
//! and the contract decides: escalated unconfined, possibly approved inside the wall.
//!
//! The tables, each one place to read and extend:
//!
//! | table | holds |
//! |---|---|
//! | [`PROGRAMS`] | program names → handler |
//! | [`FILE_SPECS`] | option specs of the programs whose operands are files |
//! | [`WRAPPERS`] | programs that run another program: their options and leading operands |
//! | [`INTERPRETERS`] | language interpreters: the flags that take inline code |
//! | [`super::git::GIT_SUBCOMMANDS`] | git subcommands → what they do |
//! | [`SECRET_PLACES`] | files whose reading is denied confined or not |
//! | [`RISKY_ENV`] | variables that change what a later program runs |

use super::options::{self, OptSpec, Parsed};
use super::{
    fetch, first_operand, is_assignment, join, operands, operands_chmod, option_value,
    skip_options, Classifier, Mods, CURL_OPTIONS_WITH_VALUES,
};
use crate::policy::shell::{SimpleCommand, Word};
use crate::policy::Action;

/// One command as a handler sees it.
pub(super) struct Call<'a> {
    /// The program's base name (`/usr/bin/git` → `git`).
    pub name: &'a str,
    pub args: &'a [Word],
    pub text: String,
    pub cmd: &'a SimpleCommand,
    pub mods: Mods,
}

impl Call<'_> {
    pub fn run(&self, kind: &str) -> Action {
        Action::new(kind).with("program", self.name)
    }

    /// A command understood completely that changes nothing (its reads are judged apart).
    pub fn readonly(&self) -> Action {
        self.ordinary().with("readonly", "true")
    }

    /// A command understood completely whose effects are classified apart.
    pub fn ordinary(&self) -> Action {
        Action::new("run_command")
            .with("command", self.text.as_str())
            .with("program", self.name)
    }

    /// A program (or a form of it) the classifier cannot see through.
    pub fn unknown(&self, reason: impl Into<String>) -> Action {
        Action::new("run_unknown")
            .with("command", self.text.as_str())
            .with("program", self.name)
            .with("reason", reason)
    }

    /// A command that runs other commands the classifier does not see whole.
    pub fn indirect(&self, reason: impl Into<String>) -> Action {
        Action::new("run_indirect")
            .with("command", self.text.as_str())
            .with("program", self.name)
            .with("reason", reason)
    }

    pub fn inline(&self, reason: impl Into<String>) -> Action {
        Action::new("run_inline_code")
            .with("program", self.name)
            .with("reason", reason)
    }
}

pub(super) type Handler = fn(&mut Classifier, &Call<'_>);

/// Program names → handler. A name not here is `run_unknown` (or, written as a path,
/// a script: `run_script`).
#[rustfmt::skip]
pub(super) const PROGRAMS: &[(&[&str], Handler)] = &[
    // ---- programs that run other programs ----
    (&["sudo", "doas", "su", "chroot", "pkexec"], privileged),
    (&["nohup", "setsid", "nice", "ionice", "stdbuf", "time", "timeout", "chronic", "unbuffer",
       "caffeinate", "taskset", "flock", "unshare", "strace", "ltrace", "exec", "command",
       "builtin", "npx", "pnpx", "bunx", "script"], wrapper),
    (&["env"], env),
    (&["xargs"], xargs),
    (&["parallel"], parallel),
    (&["watch"], watch),
    (&["busybox", "toybox"], busybox),
    (&["tmux", "screen", "byobu"], multiplexer),
    (&["bash", "sh", "zsh", "dash", "ksh", "ash", "mksh", "fish", "csh", "tcsh"], shell),
    (&["eval"], eval),
    (&["source", "."], source),
    (&["trap"], trap),
    (&["expect"], expect),
    (&["crontab", "systemctl", "launchctl", "service", "at", "batch", "atq", "atrm",
       "loginctl", "systemd-run"], system_service),
    // ---- working directory ----
    (&["cd", "pushd"], cd),
    (&["popd"], popd),
    // ---- version control and the forge ----
    (&["git"], git),
    (&["gh"], gh),
    (&["glab", "hub"], forge_cli),
    // ---- builds and tests ----
    (&["cargo"], cargo),
    (&["npm", "pnpm", "yarn", "bun"], npm),
    (&["pytest", "py.test", "tox", "nox", "jest", "vitest", "mocha", "ctest", "rspec", "phpunit",
       "playwright", "cypress"], tests),
    (&["tsc", "webpack", "vite", "esbuild", "rollup", "ninja", "meson", "cmake", "bazel", "javac",
       "rustc", "gcc", "g++", "clang", "clang++", "cc", "c++", "swiftc", "rustfmt", "prettier",
       "eslint", "black", "ruff", "isort", "mypy", "flake8", "gofmt", "shellcheck"], build),
    (&["go"], go),
    (&["make", "gmake"], make),
    (&["xcodebuild", "swift", "mvn", "gradle", "gradlew", "mvnw", "dotnet"], xcode_like),
    // ---- interpreters ----
    (&["python", "python3", "python2", "pypy", "pypy3", "node", "nodejs", "deno", "perl",
       "ruby", "php", "lua", "Rscript", "osascript", "pwsh", "powershell", "julia", "tclsh",
       "irb"], interpreter),
    (&["awk", "gawk", "mawk", "nawk"], awk),
    (&["sed", "gsed"], sed),
    (&["vim", "vi", "nvim", "view", "ex", "emacs", "nano", "ed", "red"], editor),
    (&["sqlite3", "sqlite", "psql", "mysql", "redis-cli", "mongosh"], database),
    // ---- files ----
    (&["rm", "rmdir", "unlink", "shred", "mkfifo", "mknod", "touch", "mkdir", "truncate"], modify),
    (&["chmod", "chown", "chgrp"], chmod),
    (&["mv", "cp", "ln", "install"], copy),
    (&["rsync"], rsync),
    (&["tee"], tee),
    (&["dd"], dd),
    (&["split", "csplit"], split),
    (&["patch"], patch),
    (&["tar", "unzip", "zip", "gunzip", "gzip", "bunzip2", "xz", "unxz"], archive),
    // ---- network and the rest of the machine ----
    (&["curl", "wget", "http", "https", "xh", "aria2c"], curl),
    (&["nslookup", "dig", "host", "drill", "ping", "ping6", "traceroute", "tracepath", "whois",
       "mtr", "resolvectl"], dns),
    (&["ssh", "scp", "sftp", "nc", "ncat", "netcat", "telnet", "ftp", "socat", "mosh"],
       remote_access),
    (&["kill", "pkill", "killall"], signal),
    (&["shutdown", "reboot", "halt", "poweroff", "mkfs", "fdisk", "parted", "wipefs", "mount",
       "umount", "swapon", "swapoff", "sysctl", "modprobe", "insmod", "rmmod"], machine),
    (&["docker", "podman", "kubectl", "helm", "terraform", "aws", "gcloud", "az", "heroku",
       "fly", "flyctl", "vercel", "netlify"], infrastructure),
    (&["apt", "apt-get", "brew", "pip", "pip3", "pipx", "gem", "yum", "dnf", "pacman", "snap",
       "port", "conda", "uv"], packages),
    // ---- reading ----
    (&["find"], find),
    (&["fd", "fdfind"], fd),
    (&["grep", "egrep", "fgrep", "rg", "ag", "ack"], grep),
    (&["jq", "yq"], jq),
    (&["ls", "cat", "head", "tail", "wc", "less", "more", "file", "stat", "du", "diff", "cmp",
       "nl", "tac", "rev", "paste", "join", "comm", "column", "fold", "expand", "unexpand", "xxd",
       "od", "hexdump", "strings", "md5sum", "sha1sum", "sha256sum", "sha512sum", "shasum",
       "cksum", "b2sum", "base64", "readlink", "realpath", "cut", "bat", "exa", "eza", "sort",
       "uniq", "tree", "iconv"], read_files),
    (&["echo", "printf", "pwd", "true", "false", ":", "test", "[", "[[", "]]", "which", "type",
       "whereis", "date", "id", "whoami", "uname", "hostname", "basename", "dirname", "seq",
       "sleep", "tr", "expr", "yes", "ps", "free", "uptime", "locale", "tput", "nproc",
       "getconf", "groups", "cal", "df", "set", "unset", "shift", "wait", "read", "return",
       "exit", "shopt", "hash", "ulimit", "umask", "history", "jobs", "fg", "bg", "disown",
       "let", "break", "continue", "man", "help", "info", "clear", "reset", "tty", "stty",
       "diffstat"], no_files),
    (&["printenv"], print_environment),
    (&["export", "declare", "typeset", "local", "readonly"], declare),
    (&["alias"], alias),
];

/// The handler of `name`, if the classifier knows it.
pub(super) fn handler(name: &str) -> Option<Handler> {
    // `python3.12` is python3.
    let name = if name.starts_with("python3.") {
        "python3"
    } else if name.starts_with("mkfs.") {
        "mkfs"
    } else {
        name
    };
    PROGRAMS
        .iter()
        .find(|(names, _)| names.contains(&name))
        .map(|(_, h)| *h)
}

// ---- option specs ----

/// The readers that share one option spec (see [`read_files`]).
pub(super) const SHARED_SPEC: &[&str] = &[
    "rev", "fold", "expand", "unexpand", "column", "strings", "cut", "paste", "join", "comm",
    "xxd", "od", "hexdump", "base64",
];

/// The option specs of the programs whose operands are files. A program of [`PROGRAMS`]
/// handled by [`read_files`], [`modify`] or [`copy`] must be here.
#[rustfmt::skip]
pub(super) const FILE_SPECS: &[(&[&str], OptSpec)] = &[
    (&["ls", "exa", "eza"], OptSpec::new("aAbBcCdDfFgGhHiklLmnNopqQrRsStuUvxXZ1@T", "wIT")
        .long(&["--all", "--almost-all", "--human-readable", "--color", "--colour", "--classify",
                "--directory", "--recursive", "--reverse", "--size", "--group-directories-first",
                "--full-time", "--inode", "--long", "--git", "--icons", "--tree", "--oneline",
                "--no-group", "--dereference", "--time-style", "--sort"],
              &["--ignore", "--width", "--level", "--format", "--block-size", "--hide"])),
    (&["cat", "bat", "tac"], OptSpec::new("AbeEnstTuvps", "lrH")
        .long(&["--number", "--number-nonblank", "--show-all", "--squeeze-blank", "--plain",
                "--paging", "--color", "--style", "--show-ends", "--show-tabs"],
              &["--language", "--line-range", "--highlight-line", "--separator"])),
    (&["head", "tail"], OptSpec::new("qvzfF", "ncs")
        .long(&["--quiet", "--silent", "--verbose", "--follow", "--retry", "--zero-terminated"],
              &["--lines", "--bytes", "--sleep-interval", "--max-unchanged-stats"])
        .numeric()),
    (&["wc"], OptSpec::new("clmwL", "").long(&["--bytes", "--chars", "--lines", "--words",
        "--max-line-length"], &["--files0-from"])),
    (&["less", "more"], OptSpec::new("RSFXNnMmiIqQdefgGJKLrsuUwW~", "xyhbjkoOptTPz")
        .numeric()),
    (&["file"], OptSpec::new("bhiLzkNnrsSpElI0", "Fefm")
        .long(&["--brief", "--mime", "--mime-type", "--mime-encoding", "--dereference",
                "--no-dereference", "--keep-going"], &["--separator", "--exclude"])),
    (&["stat"], OptSpec::new("LftZ", "c").long(&["--dereference", "--file-system", "--terse"],
        &["--format", "--printf"])),
    (&["du"], OptSpec::new("acshHkmLlPxSb0", "dBtX")
        .long(&["--all", "--human-readable", "--summarize", "--si", "--total", "--apparent-size",
                "--one-file-system", "--bytes", "--count-links", "--dereference"],
              &["--max-depth", "--block-size", "--threshold", "--exclude", "--time"])),
    (&["diff"], OptSpec::new("abBdeEfHiNnpPqrsStTuwyZ", "CDFIlLUWx")
        .long(&["--brief", "--recursive", "--new-file", "--unified", "--context", "--ignore-case",
                "--ignore-all-space", "--ignore-space-change", "--ignore-blank-lines", "--text",
                "--report-identical-files", "--side-by-side", "--color", "--normal",
                "--strip-trailing-cr", "--suppress-common-lines", "--minimal", "--expand-tabs"],
              &["--label", "--exclude", "--ignore-matching-lines", "--width", "--tabsize",
                "--starting-file", "--from-file", "--to-file", "--exclude-from"])),
    (&["cmp"], OptSpec::new("blsv", "in").long(&["--print-bytes", "--verbose", "--silent",
        "--quiet"], &["--ignore-initial", "--bytes"])),
    (&["nl"], OptSpec::new("p", "bdfhilnsvw")),
    (SHARED_SPEC,
       OptSpec::new("0123456789abcCdDeiLnprstuvwxz123ps", "AbcdfFjlnNoSstwWgx")
        .long(&["--decode", "--ignore-garbage", "--zero-terminated", "--complement",
                "--only-delimited", "--serial", "--nocheck-order", "--check-order", "--all",
                "--spaces", "--bytes", "--wrap", "--table"],
              &["--delimiter", "--fields", "--characters", "--output-delimiter", "--width",
                "--tabs", "--separator", "--input-separator", "--output-separator"])),
    (&["md5sum", "sha1sum", "sha256sum", "sha512sum", "shasum", "cksum", "b2sum"],
       OptSpec::new("bctwz0", "al").long(&["--binary", "--check", "--text", "--quiet",
        "--status", "--strict", "--warn", "--tag", "--zero", "--ignore-missing"],
        &["--algorithm", "--length"])),
    (&["readlink", "realpath"], OptSpec::new("efmnqsvzLPE", "").long(&["--canonicalize",
        "--canonicalize-existing", "--canonicalize-missing", "--no-newline", "--quiet",
        "--silent", "--verbose", "--zero", "--logical", "--physical", "--strip", "--no-symlinks"],
        &["--relative-to", "--relative-base"])),
    (&["sort"], OptSpec::new("bdfgiMhnRrVcCmsuz", "kotST")
        .long(&["--ignore-leading-blanks", "--dictionary-order", "--ignore-case",
                "--general-numeric-sort", "--human-numeric-sort", "--numeric-sort", "--reverse",
                "--unique", "--stable", "--version-sort", "--check", "--merge",
                "--zero-terminated", "--random-sort"],
              &["--key", "--output", "--field-separator", "--buffer-size",
                "--temporary-directory", "--parallel"])),
    (&["uniq"], OptSpec::new("cdDiuz", "fsw").long(&["--count", "--repeated", "--unique",
        "--ignore-case", "--zero-terminated", "--all-repeated"], &["--skip-fields",
        "--skip-chars", "--check-chars"])),
    (&["iconv"], OptSpec::new("cs", "fto").long(&["--silent"], &["--from-code", "--to-code",
        "--output"])),
    (&["tree"], OptSpec::new("adfFgilpsuDhCnNqQrtvxJ", "LIPo")
        .long(&["--dirsfirst", "--noreport", "--gitignore"], &["--filelimit", "--charset"])),
    // ---- writing ----
    (&["rm"], OptSpec::new("dfiIrRv", "").long(&["--force", "--recursive", "--dir",
        "--verbose", "--interactive", "--one-file-system", "--preserve-root",
        "--no-preserve-root"], &[])),
    (&["rmdir"], OptSpec::new("pv", "").long(&["--parents", "--verbose",
        "--ignore-fail-on-non-empty"], &[])),
    (&["unlink", "mkfifo", "mknod"], OptSpec::new("", "m").long(&[], &["--mode"])),
    (&["shred"], OptSpec::new("fuvxz", "ns").long(&["--force", "--remove", "--zero"],
        &["--iterations", "--size"])),
    (&["touch"], OptSpec::new("acmhf", "drt").long(&["--no-create", "--no-dereference"],
        &["--date", "--reference", "--time"])),
    (&["mkdir"], OptSpec::new("pv", "m").long(&["--parents", "--verbose"], &["--mode"])),
    (&["truncate"], OptSpec::new("co", "sr").long(&["--no-create", "--io-blocks"],
        &["--size", "--reference"])),
    (&["mv"], OptSpec::new("bfinTuvZ", "St").long(&["--force", "--interactive", "--no-clobber",
        "--no-target-directory", "--update", "--verbose", "--backup", "--strip-trailing-slashes"],
        &["--suffix", "--target-directory"])),
    (&["cp"], OptSpec::new("aAbdfHilLnpPrRsTuvxZ", "St").long(&["--archive", "--force",
        "--interactive", "--link", "--dereference", "--no-clobber", "--no-dereference",
        "--preserve", "--no-preserve", "--parents", "--recursive", "--symbolic-link",
        "--no-target-directory", "--update", "--verbose", "--one-file-system", "--backup",
        "--reflink", "--sparse", "--attributes-only", "--remove-destination"],
        &["--suffix", "--target-directory"])),
    (&["ln"], OptSpec::new("bdfFinLPrsTv", "St").long(&["--force", "--interactive", "--logical",
        "--no-dereference", "--physical", "--relative", "--symbolic", "--verbose",
        "--no-target-directory", "--backup"], &["--suffix", "--target-directory"])),
    (&["install"], OptSpec::new("bcCdDpsTvZ", "gmoSt").long(&["--compare", "--directory",
        "--preserve-timestamps", "--strip", "--verbose", "--no-target-directory"],
        &["--group", "--mode", "--owner", "--suffix", "--target-directory"])),
];

/// The spec of `name` in [`FILE_SPECS`].
pub(super) fn file_spec(name: &str) -> Option<&'static OptSpec> {
    FILE_SPECS
        .iter()
        .find(|(names, _)| names.contains(&name))
        .map(|(_, spec)| spec)
}

/// Parses by the program's spec and reports a flag it does not know as `run_unknown`: a flag
/// can change what a program opens or runs (`sort --compress-program`, `tail --pid`).
fn parse_files(c: &mut Classifier, k: &Call<'_>) -> Parsed {
    let Some(spec) = file_spec(k.name) else {
        c.push(k.unknown("no option spec for this program"));
        return Parsed {
            operands: operands(k.args, &[]),
            ..Parsed::default()
        };
    };
    let parsed = options::parse(k.args, spec);
    if let Some(flag) = &parsed.unknown {
        c.push(k.unknown(format!("the option {flag} of {} is not known", k.name)));
    }
    parsed
}

// ---- wrappers ----

/// A program that runs another: its options (which take a value), how many operands come
/// before the command (`timeout 10 cmd`), and options whose value is a shell string.
pub(super) struct Wrapper {
    pub names: &'static [&'static str],
    pub spec: OptSpec,
    pub leading: usize,
    /// Options whose value is a command line run by a shell: `flock -c`, `script -c`.
    pub string_options: &'static [&'static str],
    /// Options that make it something else than a wrapper (`taskset -p PID`, `strace -p`):
    /// not understood.
    pub refuse: &'static [&'static str],
    /// Options whose value is a file it writes: `strace -o`, `time -o`.
    pub writes: &'static [&'static str],
}

#[rustfmt::skip]
pub(super) const WRAPPERS: &[Wrapper] = &[
    Wrapper { names: &["nohup", "setsid", "chronic", "caffeinate", "builtin"],
        spec: OptSpec::new("fwcdimsu", ""), leading: 0, string_options: &[], refuse: &[], writes: &[] },
    Wrapper { names: &["exec"], spec: OptSpec::new("cl", "a"), leading: 0,
        string_options: &[], refuse: &[], writes: &[] },
    Wrapper { names: &["command"], spec: OptSpec::new("pvV", ""), leading: 0,
        string_options: &[], refuse: &[], writes: &[] },
    Wrapper { names: &["nice"], spec: OptSpec::new("", "n").long(&[], &["--adjustment"]).numeric(),
        leading: 0, string_options: &[], refuse: &[], writes: &[] },
    Wrapper { names: &["ionice"], spec: OptSpec::new("t", "cnp"), leading: 0,
        string_options: &[], refuse: &["-p"], writes: &[] },
    Wrapper { names: &["stdbuf"], spec: OptSpec::new("", "ioe").long(&[], &["--input", "--output",
        "--error"]), leading: 0, string_options: &[], refuse: &[], writes: &[] },
    Wrapper { names: &["time"], spec: OptSpec::new("apqv", "fo").long(&["--portability",
        "--verbose", "--append", "--quiet"], &["--format", "--output"]), leading: 0,
        string_options: &[], refuse: &[], writes: &["-o", "--output"] },
    Wrapper { names: &["timeout"], spec: OptSpec::new("v", "sk").long(&["--preserve-status",
        "--foreground", "--verbose"], &["--signal", "--kill-after"]), leading: 1,
        string_options: &[], refuse: &[], writes: &[] },
    Wrapper { names: &["unbuffer"], spec: OptSpec::new("p", ""), leading: 0,
        string_options: &[], refuse: &[], writes: &[] },
    Wrapper { names: &["taskset"], spec: OptSpec::new("acp", "").long(&["--all-tasks",
        "--cpu-list", "--pid"], &[]), leading: 1, string_options: &[],
        refuse: &["-p", "--pid"], writes: &[] },
    Wrapper { names: &["flock"], spec: OptSpec::new("sexnuoFh", "wEc").long(&["--shared",
        "--exclusive", "--nonblock", "--unlock", "--close", "--no-fork"],
        &["--timeout", "--conflict-exit-code", "--command"]), leading: 1,
        string_options: &["-c", "--command"], refuse: &[], writes: &[] },
    Wrapper { names: &["unshare"], spec: OptSpec::new("muinpUCrfT", "S").long(&["--mount",
        "--uts", "--ipc", "--net", "--pid", "--user", "--cgroup", "--map-root-user", "--fork",
        "--kill-child", "--mount-proc"], &["--setuid", "--setgid", "--root", "--wd"]),
        leading: 0, string_options: &[], refuse: &["--root", "--wd"], writes: &[] },
    Wrapper { names: &["strace", "ltrace"], spec: OptSpec::new("fFcCdhiqrtTvVxyzwk", "eEoOpPsSuXab")
        .long(&["--follow-forks", "--summary-only"], &["--output", "--trace"]), leading: 0,
        string_options: &[], refuse: &["-p", "-u", "-E"], writes: &["-o", "--output"] },
    Wrapper { names: &["npx", "pnpx", "bunx"], spec: OptSpec::new("yq", "pc")
        .long(&["--yes", "--no", "--quiet", "--no-install", "--ignore-existing"],
              &["--package", "--call"]), leading: 0, string_options: &["-c", "--call"],
        refuse: &[], writes: &[] },
    Wrapper { names: &["script"], spec: OptSpec::new("aefqkt", "cEOIBTm").long(&["--append",
        "--return", "--flush", "--quiet", "--force"], &["--command", "--echo", "--log-out",
        "--log-in", "--log-io", "--log-timing", "--timing"]), leading: 0,
        string_options: &["-c", "--command"], refuse: &[], writes: &["-O", "-I", "-B", "-T",
        "--log-out", "--log-in", "--log-io", "--log-timing", "--timing"] },
];

/// Programs that run another one, known by [`WRAPPERS`]: the command they run is classified
/// as if it were given alone, so a wrapper is understood exactly when its command is.
fn wrapper(c: &mut Classifier, k: &Call<'_>) {
    let Some(w) = WRAPPERS.iter().find(|w| w.names.contains(&k.name)) else {
        c.push(k.unknown("a wrapper without a spec"));
        return;
    };
    if k.name == "command"
        && k.args
            .first()
            .is_some_and(|a| a.text == "-v" || a.text == "-V")
    {
        c.push(k.readonly());
        return;
    }
    // The options end at the first operand: what follows belongs to the wrapped command.
    let first_operand = k
        .args
        .iter()
        .position(|a| !a.text.starts_with('-') || a.text == "-")
        .unwrap_or(k.args.len());
    let mut own_end = first_operand;
    // Values of options are words too: walk the options to find where they end.
    let mut i = 0;
    while i < k.args.len() {
        let t = k.args[i].text.as_str();
        if t == "--" {
            own_end = i + 1;
            break;
        }
        if !t.starts_with('-') || t == "-" {
            own_end = i;
            break;
        }
        let takes_value = if let Some(long) = t.strip_prefix("--") {
            !long.contains('=') && w.spec.long_values.contains(&t)
        } else {
            let body = &t[1..];
            body.char_indices()
                .find(|(_, ch)| w.spec.values.contains(*ch))
                .is_some_and(|(at, ch)| at + ch.len_utf8() == body.len())
        };
        i += if takes_value { 2 } else { 1 };
        own_end = i.min(k.args.len());
    }
    // `flock FILE -c CMD`: a command-string option may follow the leading operands, so such
    // a wrapper's whole line is read by its spec.
    let string_form = !w.string_options.is_empty()
        && options::parse(k.args, &w.spec)
            .options
            .iter()
            .any(|(o, _)| w.string_options.contains(&o.as_str()));
    if string_form {
        own_end = k.args.len();
    }
    let own = options::parse(&k.args[..own_end.min(k.args.len())], &w.spec);
    if let Some(flag) = &own.unknown {
        c.push(k.unknown(format!("the option {flag} of {} is not known", k.name)));
    }
    if let Some((flag, _)) = own
        .options
        .iter()
        .find(|(o, _)| w.refuse.contains(&o.as_str()))
    {
        c.push(k.unknown(format!(
            "{} {flag} is not a wrapper around a command",
            k.name
        )));
        return;
    }
    for file in own.values(w.writes) {
        c.path_action("modify_files", file);
    }
    let rest: &[Word] = if string_form {
        &own.operands
    } else {
        k.args.get(own_end..).unwrap_or_default()
    };
    let leading = rest.get(..w.leading.min(rest.len())).unwrap_or_default();
    if k.name == "flock" {
        // flock creates its lock file.
        for file in leading {
            c.path_action("modify_files", file);
        }
    }
    let rest = rest.get(w.leading..).unwrap_or_default();
    let strings: Vec<&Word> = own.values(w.string_options).collect();
    if !strings.is_empty() {
        for s in strings {
            if s.dynamic {
                c.push(k.inline("a command string known only at run time"));
            } else {
                c.nested_shell(&s.text);
            }
        }
        if k.name == "script" {
            // `script -c cmd FILE`: the typescript is written.
            for file in rest {
                c.path_action("modify_files", file);
            }
        }
        return;
    }
    if rest.is_empty() {
        match k.name {
            // `script` alone starts an interactive shell; `exec 3>f` only redirects.
            "exec" | "command" | "builtin" | "time" => c.push(k.readonly()),
            _ => c.push(k.unknown(format!("{} without a command", k.name))),
        }
        return;
    }
    if matches!(k.name, "npx" | "pnpx" | "bunx") {
        // npx runs a package's binary: understood only when the binary is.
        c.wrapped(rest, k.cmd, k.mods);
        return;
    }
    c.wrapped(rest, k.cmd, k.mods);
}

/// `sudo`, `doas`, `su -c`, `chroot`: root's powers, and the command run with them.
fn privileged(c: &mut Classifier, k: &Call<'_>) {
    c.push(Action::new("run_privileged").with("command", k.text.as_str()));
    match k.name {
        "su" => match option_value(k.args, &["-c", "--command"]) {
            Some(s) if !s.dynamic => c.nested_shell(&s.text),
            _ => c.push(k.unknown("su without a command it can read")),
        },
        "chroot" => {
            let rest = skip_options(k.args, &["--userspec", "--groups"]);
            c.wrapped(rest.get(1..).unwrap_or_default(), k.cmd, k.mods);
        }
        _ => {
            let rest = skip_options(
                k.args,
                &[
                    "-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R",
                ],
            );
            if rest.is_empty() {
                c.push(k.unknown("a root shell"));
            }
            c.wrapped(rest, k.cmd, k.mods);
        }
    }
}

fn env(c: &mut Classifier, k: &Call<'_>) {
    c.env(k.args, k.cmd, k.mods);
}

/// `xargs cmd`: cmd runs with operands from the input, which nothing here can see.
fn xargs(c: &mut Classifier, k: &Call<'_>) {
    let rest = skip_options(
        k.args,
        &[
            "-I",
            "-i",
            "-n",
            "-P",
            "-L",
            "-l",
            "-d",
            "-E",
            "-e",
            "-s",
            "-a",
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--replace",
            "--max-lines",
            "--eof",
        ],
    );
    c.push(k.indirect("xargs runs a command with operands read from its input"));
    // `-P 0`: as many at once as the input has lines, with no bound.
    let unbounded = option_value(k.args, &["-P", "--max-procs"])
        .is_some_and(|w| w.dynamic || w.text.trim_start_matches('0').is_empty());
    if unbounded {
        c.push(
            Action::new("spawn_unbounded")
                .with("command", k.text.as_str())
                .with(
                    "reason",
                    "xargs -P 0 runs as many commands at once as its input has",
                ),
        );
    }
    if !rest.is_empty() {
        c.wrapped(
            rest,
            k.cmd,
            Mods {
                operands_unknown: true,
                reads_unknown: true,
            },
        );
    }
}

fn parallel(c: &mut Classifier, k: &Call<'_>) {
    c.push(k.indirect("parallel builds its commands from its arguments or input"));
    let rest: Vec<Word> = k
        .args
        .iter()
        .take_while(|w| !w.text.starts_with(":::"))
        .filter(|w| !w.text.starts_with('-'))
        .cloned()
        .collect();
    if !rest.is_empty() && rest.iter().all(|w| !w.dynamic) {
        c.nested_shell(&join(&rest));
    }
}

fn watch(c: &mut Classifier, k: &Call<'_>) {
    let rest = skip_options(k.args, &["-n", "-d", "--interval", "-x", "-g"]);
    if rest.iter().any(|w| w.dynamic) {
        c.push(k.inline("watch with a command known only at run time"));
    } else if rest.is_empty() {
        c.push(k.unknown("watch without a command"));
    } else {
        c.nested_shell(&join(rest));
    }
}

/// `busybox sh -c …`: the applet is the program.
fn busybox(c: &mut Classifier, k: &Call<'_>) {
    let rest = skip_options(k.args, &[]);
    if rest.is_empty() {
        c.push(k.unknown("busybox without an applet"));
    } else {
        c.wrapped(rest, k.cmd, k.mods);
    }
}

/// tmux and screen start sessions that outlive the call; their commands are classified too.
fn multiplexer(c: &mut Classifier, k: &Call<'_>) {
    c.push(k.indirect(format!(
        "{} runs commands in a session that outlives this call",
        k.name
    )));
    if let Some(last) = k.args.last().filter(|w| w.text.contains(' ')) {
        if !last.dynamic {
            c.nested_shell(&last.text);
        }
    }
}

fn shell(c: &mut Classifier, k: &Call<'_>) {
    c.sub_shell(k);
}

fn eval(c: &mut Classifier, k: &Call<'_>) {
    c.push(k.indirect("eval runs text as a command"));
    if k.args.iter().any(|w| w.dynamic) {
        c.push(k.inline("eval of text known only at run time"));
    } else {
        c.nested_shell(&join(k.args));
    }
}

/// `source f` / `. f`: the file's commands run in this shell, unseen.
fn source(c: &mut Classifier, k: &Call<'_>) {
    c.push(k.indirect("source runs a file's commands in this shell"));
    match k.args.first() {
        Some(f) if f.dynamic => c.push(k.inline("a file known only at run time")),
        Some(f) => c.script(f, k.name),
        None => c.push(k.inline("source without a file")),
    }
}

fn trap(c: &mut Classifier, k: &Call<'_>) {
    // `trap 'cmd' EXIT` runs cmd.
    if let Some(w) = k.args.first().filter(|w| !w.text.starts_with('-')) {
        if w.dynamic {
            c.push(k.inline("trap with a command known only at run time"));
        } else {
            c.nested_shell(&w.text);
        }
    } else {
        c.push(k.readonly());
    }
}

fn expect(c: &mut Classifier, k: &Call<'_>) {
    let p = options::parse(k.args, &OptSpec::new("bdDinNv", "cf"));
    if p.has(&["-c"]) || p.operands.is_empty() || p.unknown.is_some() {
        c.push(k.inline("expect runs its program inline or from its input"));
    }
    if let Some(f) = p.value(&["-f"]).or(p.operands.first()) {
        c.script(f, k.name);
    }
}

/// Schedulers and service managers: what they start runs later, outside the worker.
fn system_service(c: &mut Classifier, k: &Call<'_>) {
    c.push(
        Action::new("system_service")
            .with("program", k.name)
            .with("command", k.text.as_str()),
    );
}

fn cd(c: &mut Classifier, k: &Call<'_>) {
    let target = k
        .args
        .iter()
        .find(|w| !(w.text.starts_with('-') && w.text.len() > 1));
    c.cd(target);
    c.push(k.readonly());
}

fn popd(c: &mut Classifier, k: &Call<'_>) {
    c.cwds.insert(super::Cwd::Unknown);
    c.push(k.readonly());
}

fn git(c: &mut Classifier, k: &Call<'_>) {
    c.git(k.args, &k.text);
}

fn gh(c: &mut Classifier, k: &Call<'_>) {
    c.gh(k.args, &k.text);
}

fn forge_cli(c: &mut Classifier, k: &Call<'_>) {
    if k.args.iter().any(|w| w.text == "merge") {
        c.push(Action::new("merge_pr"));
    } else {
        c.push(Action::new("forge_write").with("command", k.text.as_str()));
    }
}

// ---- builds and tests ----

fn cargo(c: &mut Classifier, k: &Call<'_>) {
    if k.args
        .iter()
        .any(|w| w.text == "--config" || w.text.starts_with("--config=") || w.text == "-Z")
    {
        // `--config target.x.runner=…` names a program to run.
        c.push(k.indirect("cargo --config or -Z can name programs to run"));
    }
    let sub = first_operand(k.args, &["-Z", "--config", "-C", "--color"])
        .map(|w| w.text.trim_start_matches('+'));
    match sub {
        Some("test" | "t" | "nextest" | "bench") => c.push(k.run("run_tests")),
        Some(
            "build" | "b" | "check" | "c" | "clippy" | "doc" | "d" | "fmt" | "rustc" | "fix"
            | "run" | "r" | "metadata" | "tree" | "clean" | "update" | "fetch" | "new" | "init"
            | "add" | "remove" | "generate-lockfile" | "locate-project" | "pkgid" | "version"
            | "help" | "search" | "vendor" | "package" | "verify-project" | "rustdoc",
        ) => c.push(k.run("run_build")),
        Some("install" | "uninstall") => c.push(k.run("install_package")),
        Some("publish" | "yank" | "owner" | "login" | "logout") => c.push(k.run("publish_package")),
        // A cargo subcommand not listed is a plugin: another program.
        Some(other) => c.push(k.unknown(format!("cargo {other} runs a plugin"))),
        None => c.push(k.readonly()),
    }
}

fn npm(c: &mut Classifier, k: &Call<'_>) {
    let ops = operands(
        k.args,
        &["--prefix", "-w", "--workspace", "--filter", "-C", "--cwd"],
    );
    let sub = ops.first().map(|w| w.text.as_str());
    let script = ops.get(1).map(|w| w.text.as_str()).unwrap_or("");
    let global = k
        .args
        .iter()
        .any(|w| w.text == "-g" || w.text == "--global");
    match sub {
        Some("test" | "t" | "tst") => c.push(k.run("run_tests")),
        Some("run" | "run-script") if script.contains("test") => c.push(k.run("run_tests")),
        Some("run" | "run-script" | "build" | "start" | "lint" | "format" | "typecheck") => {
            c.push(k.run("run_build"))
        }
        Some(
            "install" | "i" | "ci" | "add" | "remove" | "uninstall" | "rm" | "update" | "up"
            | "link",
        ) if global => c.push(k.run("install_package")),
        Some(
            "install" | "i" | "ci" | "add" | "remove" | "uninstall" | "rm" | "update" | "up" | "ls"
            | "list" | "outdated" | "why" | "audit" | "view" | "info" | "pack" | "init" | "prune"
            | "dedupe" | "version" | "help",
        ) => c.push(k.run("run_build")),
        Some(
            "publish" | "unpublish" | "deprecate" | "dist-tag" | "owner" | "login" | "adduser"
            | "token",
        ) => c.push(k.run("publish_package")),
        Some("exec" | "x" | "dlx") => c.wrapped(&ops[1..], k.cmd, k.mods),
        // yarn and pnpm run package scripts by name: `yarn lint`.
        Some(_) if k.name != "npm" => c.push(k.run("run_build")),
        Some(other) => c.push(k.unknown(format!("npm {other} is not known"))),
        None => c.push(k.readonly()),
    }
}

fn tests(c: &mut Classifier, k: &Call<'_>) {
    c.push(k.run("run_tests"));
}

fn build(c: &mut Classifier, k: &Call<'_>) {
    c.push(k.run("run_build"));
}

fn go(c: &mut Classifier, k: &Call<'_>) {
    match first_operand(k.args, &[]).map(|w| w.text.as_str()) {
        Some("test") => c.push(k.run("run_tests")),
        Some(
            "build" | "vet" | "run" | "fmt" | "mod" | "list" | "version" | "doc" | "generate"
            | "clean" | "work" | "help",
        ) => c.push(k.run("run_build")),
        Some("env") if !k.args.iter().any(|w| w.text == "-w" || w.text == "-u") => {
            c.push(k.readonly())
        }
        Some("install" | "get") => c.push(k.run("install_package")),
        Some(other) => c.push(k.unknown(format!("go {other} is not known"))),
        None => c.push(k.readonly()),
    }
}

/// make runs its makefile: the makefile is a script (`run_script`), so a makefile written by
/// the same command is seen (`echo … > m.mk; make -f m.mk`).
fn make(c: &mut Classifier, k: &Call<'_>) {
    let mut targets = Vec::new();
    let mut dirs: Vec<Word> = Vec::new();
    let mut files: Vec<Word> = Vec::new();
    let mut i = 0;
    while i < k.args.len() {
        let t = k.args[i].text.as_str();
        if t == "-C" || t == "--directory" {
            if let Some(dir) = k.args.get(i + 1) {
                c.path_action("modify_files", dir);
                dirs.push(dir.clone());
            }
            i += 2;
            continue;
        }
        if t == "-f" || t == "--file" || t == "--makefile" {
            if let Some(f) = k.args.get(i + 1) {
                files.push(f.clone());
            }
            i += 2;
            continue;
        }
        if matches!(t, "-j" | "-l" | "-o" | "-W" | "--jobs" | "-I") {
            i += 2;
            continue;
        }
        if !t.starts_with('-') && !t.contains('=') {
            targets.push(t);
        }
        i += 1;
    }
    if files.is_empty() {
        let makefile = Word {
            text: match dirs.first() {
                Some(d) => format!("{}/Makefile", d.text.trim_end_matches('/')),
                None => "Makefile".into(),
            },
            dynamic: dirs.first().is_some_and(|d| d.dynamic),
            quoted: true,
            ..Default::default()
        };
        files.push(makefile);
    }
    for f in &files {
        c.script(f, k.name);
    }
    if targets
        .iter()
        .any(|t| *t == "install" || t.starts_with("install-"))
    {
        c.push(k.run("install_package"));
    } else if targets
        .iter()
        .any(|t| matches!(*t, "test" | "tests" | "check" | "unittest") || t.starts_with("test-"))
    {
        c.push(k.run("run_tests"));
    } else {
        c.push(k.run("run_build"));
    }
}

fn xcode_like(c: &mut Classifier, k: &Call<'_>) {
    let test = k.args.iter().any(|w| {
        matches!(
            w.text.as_str(),
            "test" | "test-without-building" | "verify" | "check"
        )
    });
    if test {
        c.push(k.run("run_tests"));
    } else if k.name == "swift" && !k.args.iter().any(|w| w.text == "build") {
        c.push(k.unknown("swift without build or test"));
    } else {
        c.push(k.run("run_build"));
    }
}

// ---- interpreters ----

/// A language interpreter: which flags take a program inline, which take another value.
pub(super) struct Interpreter {
    pub names: &'static [&'static str],
    /// Flags whose value (or the rest of the word) is a program: `-c`, `-e`, `--eval`.
    pub inline: &'static [&'static str],
    /// Short flag letters that mean inline code inside a group: perl's `-pe`, `-ne`.
    pub inline_letters: &'static str,
    /// Flags that take a value that is not a program: python's `-W`, node's `-r`.
    pub with_values: &'static [&'static str],
    /// How a module is run: python's `-m`.
    pub module: Option<&'static str>,
}

#[rustfmt::skip]
pub(super) const INTERPRETERS: &[Interpreter] = &[
    Interpreter { names: &["python", "python3", "python2", "pypy", "pypy3"], inline: &["-c"],
        inline_letters: "c", with_values: &["-W", "-X", "-Q"], module: Some("-m") },
    Interpreter { names: &["node", "nodejs"], inline: &["-e", "-p", "--eval", "--print"],
        inline_letters: "ep", with_values: &["-r", "--require", "--import", "--loader",
        "--inspect-port", "--max-old-space-size", "--env-file"], module: None },
    Interpreter { names: &["deno"], inline: &["eval", "repl"], inline_letters: "",
        with_values: &[], module: None },
    Interpreter { names: &["perl"], inline: &["-e", "-E"], inline_letters: "eE",
        with_values: &["-I", "-M", "-m", "-x"], module: None },
    Interpreter { names: &["ruby", "irb"], inline: &["-e"], inline_letters: "e",
        with_values: &["-I", "-r", "-C"], module: None },
    Interpreter { names: &["php"], inline: &["-r", "-R", "-B", "-E"], inline_letters: "rRBE",
        with_values: &["-d", "-c", "-z"], module: None },
    Interpreter { names: &["lua", "julia", "Rscript", "osascript", "tclsh"], inline: &["-e"],
        inline_letters: "e", with_values: &["-l"], module: None },
    Interpreter { names: &["pwsh", "powershell"], inline: &["-Command", "-c",
        "-EncodedCommand", "-e", "-ec"], inline_letters: "", with_values: &["-File", "-f"],
        module: None },
];

/// An interpreter runs a program: inline (`-c`, `-e`, `--eval=`), fed on its input (`-`, a
/// pipe, a here-document, none at all), from a substitution (`<(…)`: known only at run
/// time), or from a file (a script, judged by where it is and whether this same command
/// wrote it).
fn interpreter(c: &mut Classifier, k: &Call<'_>) {
    let name = if k.name.starts_with("python3.") {
        "python3"
    } else {
        k.name
    };
    let Some(spec) = INTERPRETERS.iter().find(|s| s.names.contains(&name)) else {
        c.push(k.unknown("an interpreter without a spec"));
        return;
    };
    if name == "deno" {
        match k.args.first().map(|w| w.text.as_str()) {
            Some("test") => return c.push(k.run("run_tests")),
            Some("fmt" | "lint" | "check" | "compile" | "bundle" | "doc") => {
                return c.push(k.run("run_build"))
            }
            Some("eval" | "repl") | None => return c.push(k.inline("deno eval")),
            Some("run") => {
                if let Some(f) = k.args.iter().skip(1).find(|w| !w.text.starts_with('-')) {
                    return c.script(f, k.name);
                }
                return c.push(k.inline("deno run without a file"));
            }
            Some(_) => return c.push(k.unknown("deno subcommand not known")),
        }
    }
    // `python3 --version`, `node -v`: a probe of the interpreter that runs no code.
    if !k.args.is_empty()
        && k.args.iter().all(|w| {
            !w.dynamic && matches!(w.text.as_str(), "--version" | "-V" | "-v" | "--help" | "-h")
        })
    {
        return c.push(k.readonly());
    }
    let mut i = 0;
    while i < k.args.len() {
        let w = &k.args[i];
        let t = w.text.as_str();
        if t == "--" {
            i += 1;
            break;
        }
        if t == "-" {
            return c.push(k.inline("an interpreter reading its program from its input"));
        }
        if !t.starts_with('-') {
            break;
        }
        let flag = t.split_once('=').map_or(t, |(f, _)| f);
        let short_group = !t.starts_with("--") && t.len() > 1;
        if spec.inline.contains(&flag)
            || short_group
                && !spec.inline_letters.is_empty()
                && t[1..].chars().any(|ch| spec.inline_letters.contains(ch))
                && !spec.with_values.contains(&t)
        {
            return c.push(k.inline(format!("{} {t} runs a program given inline", k.name)));
        }
        if Some(t) == spec.module {
            let module = k.args.get(i + 1).map(|w| w.text.as_str()).unwrap_or("");
            let sub = k.args.get(i + 2).map(|w| w.text.as_str()).unwrap_or("");
            match module {
                "pytest" | "unittest" | "tox" | "nox" => c.push(k.run("run_tests")),
                "pip" if matches!(sub, "install" | "uninstall") => c.push(k.run("install_package")),
                "pip" if matches!(sub, "list" | "show" | "freeze" | "--version") => {
                    c.push(k.readonly())
                }
                "build" | "compileall" | "black" | "ruff" | "mypy" | "isort" | "flake8"
                | "py_compile" => c.push(k.run("run_build")),
                "venv" => {
                    if let Some(dir) = k.args.get(i + 2) {
                        c.path_action("modify_files", dir);
                    }
                    c.push(k.run("run_build"));
                }
                _ => c.push(k.unknown(format!("the module {module} is not known"))),
            }
            return;
        }
        i += if spec.with_values.contains(&t) { 2 } else { 1 };
    }
    match k.args.get(i) {
        Some(script) if script.dynamic => {
            c.push(k.inline("a program known only at run time (a substitution)"))
        }
        Some(script) => c.script(script, k.name),
        None => c.push(k.inline("an interpreter reading its program from its input")),
    }
}

fn awk(c: &mut Classifier, k: &Call<'_>) {
    c.awk(k.args, &k.text, k.name);
}

fn sed(c: &mut Classifier, k: &Call<'_>) {
    c.sed(k.args, &k.text, k.name, k.mods);
}

/// Editors run commands of their own (`vim -es +'w! /x'`, `:!cmd`, `ed`'s `!`): their
/// changes are not seen.
fn editor(c: &mut Classifier, k: &Call<'_>) {
    c.push(k.inline(format!(
        "{} runs editor commands that are not classified",
        k.name
    )));
    for w in operands(
        k.args,
        &["-c", "-S", "-u", "-i", "-s", "-w", "-W", "-T", "--cmd"],
    ) {
        if !w.text.starts_with('+') {
            c.path_action("modify_files", &w);
        }
    }
}

/// A database shell runs the statements it is given (SQL is a program; `.shell` runs
/// commands) and writes its database file.
fn database(c: &mut Classifier, k: &Call<'_>) {
    c.push(k.inline(format!(
        "{} runs statements that are not classified",
        k.name
    )));
    if matches!(k.name, "sqlite3" | "sqlite") {
        if let Some(db) = operands(k.args, &["-cmd", "-init", "-separator", "-newline"]).first() {
            c.path_action("read_files", db);
            c.path_action("modify_files", db);
        }
    } else {
        c.push(fetch("").with("program", k.name));
    }
}

// ---- files ----

fn modify(c: &mut Classifier, k: &Call<'_>) {
    let p = parse_files(c, k);
    c.modify_operands(p.operands.clone(), k.mods);
    for r in p.values(&["-r", "--reference"]) {
        c.path_action("read_files", r);
    }
}

fn chmod(c: &mut Classifier, k: &Call<'_>) {
    let ops = operands_chmod(k.args);
    let files = if k.args.iter().any(|w| w.text.starts_with("--reference")) {
        &ops[..]
    } else {
        ops.get(1..).unwrap_or_default()
    };
    let start = c.out.len();
    c.modify_operands(files.to_vec(), k.mods);
    // A mode changed, not the text: running the file afterwards runs what was already
    // there (and judged when it was written).
    for action in &mut c.out[start..] {
        if action.kind == "modify_files" && action.arg("path").is_some() {
            action.args.insert("mode_only".into(), "true".into());
        }
    }
}

fn rsync(c: &mut Classifier, k: &Call<'_>) {
    if k.args.iter().any(|w| w.text.contains(':')) {
        return c.push(k.run("remote_access"));
    }
    c.push(k.unknown("rsync's options are not classified"));
    let ops = operands(k.args, &["-e", "--exclude", "--include", "-f", "--filter"]);
    if let Some((last, sources)) = ops.split_last() {
        c.path_action("modify_files", last);
        for w in sources {
            c.path_action("read_files", w);
        }
    }
}

fn copy(c: &mut Classifier, k: &Call<'_>) {
    let p = parse_files(c, k);
    let ops = p.operands.clone();
    let name = k.name;
    let target_dir = p.value(&["-t", "--target-directory"]).cloned();
    if let Some(dir) = &target_dir {
        c.path_action("modify_files", dir);
    }
    let creates_dirs = name == "install" && p.has(&["-d", "--directory"]);
    if name == "mv" || name == "ln" || creates_dirs {
        // A link is a way to write to its target later (`ln -s /etc/x l && echo > l`): its
        // target counts as modified, like the link itself.
        if name == "ln" && ops.len() == 1 {
            let base = ops[0]
                .text
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string();
            c.path_action(
                "modify_files",
                &Word {
                    text: base,
                    ..ops[0].clone()
                },
            );
        }
        c.modify_operands(ops, k.mods);
    } else if target_dir.is_some() {
        for w in &ops {
            c.path_action("read_files", w);
        }
    } else if let Some((last, sources)) = ops.split_last() {
        c.path_action("modify_files", last);
        for w in sources {
            c.path_action("read_files", w);
        }
    }
    if k.mods.operands_unknown {
        c.unknown_modification(&k.text);
    }
    c.push(k.ordinary());
}

fn tee(c: &mut Classifier, k: &Call<'_>) {
    let p = options::parse(
        k.args,
        &OptSpec::new("aip", "").long(&["--append", "--ignore-interrupts"], &["--output-error"]),
    );
    if let Some(flag) = &p.unknown {
        c.push(k.unknown(format!("the option {flag} of tee is not known")));
    }
    let ops: Vec<Word> = p.operands.into_iter().filter(|w| w.text != "-").collect();
    c.modify_operands(ops, k.mods);
    c.push(k.ordinary());
}

fn dd(c: &mut Classifier, k: &Call<'_>) {
    for w in k.args {
        if let Some(p) = w.text.strip_prefix("of=") {
            c.path_action(
                "modify_files",
                &Word {
                    text: p.to_string(),
                    ..w.clone()
                },
            );
        } else if let Some(p) = w.text.strip_prefix("if=") {
            c.path_action(
                "read_files",
                &Word {
                    text: p.to_string(),
                    ..w.clone()
                },
            );
        }
    }
    c.push(k.ordinary());
}

/// `split FILE PREFIX` / `csplit -f PREFIX FILE …`: the pieces are written at the prefix.
fn split(c: &mut Classifier, k: &Call<'_>) {
    let spec = if k.name == "split" {
        OptSpec::new("dxe", "abClnt")
            .long(
                &[
                    "--numeric-suffixes",
                    "--hex-suffixes",
                    "--verbose",
                    "--elide-empty-files",
                ],
                &[
                    "--suffix-length",
                    "--bytes",
                    "--line-bytes",
                    "--lines",
                    "--number",
                    "--additional-suffix",
                    "--filter",
                ],
            )
            .numeric()
    } else {
        OptSpec::new("ksqz", "fbn").long(
            &["--keep-files", "--quiet", "--silent", "--elide-empty-files"],
            &["--prefix", "--suffix-format", "--digits"],
        )
    };
    let p = options::parse(k.args, &spec);
    if let Some(flag) = &p.unknown {
        c.push(k.unknown(format!("the option {flag} of {} is not known", k.name)));
    }
    if p.has(&["--filter"]) {
        c.push(k.indirect("split --filter runs a shell command"));
    }
    let piece = |prefix: &Word| Word {
        text: format!("{}x", prefix.text),
        ..prefix.clone()
    };
    if k.name == "split" {
        if let Some(file) = p.operands.first() {
            c.path_action("read_files", file);
        }
        match p.operands.get(1) {
            Some(prefix) => c.path_action("modify_files", &piece(prefix)),
            None => c.path_action(
                "modify_files",
                &Word {
                    text: "x".into(),
                    dynamic: false,
                    quoted: true,
                    ..Default::default()
                },
            ),
        }
    } else {
        if let Some(file) = p.operands.first() {
            c.path_action("read_files", file);
        }
        let prefix = p.value(&["-f", "--prefix"]).cloned().unwrap_or(Word {
            text: "xx".into(),
            dynamic: false,
            quoted: true,
            ..Default::default()
        });
        c.path_action("modify_files", &piece(&prefix));
    }
    c.push(k.ordinary());
}

/// `patch [ORIGINAL [PATCHFILE]]`: it writes ORIGINAL when named, else the files its patch
/// names, read from the command's here-document (see [`super::patch`]); a patch in a file
/// (`-i`, `<`, a pipe) is not read here, so its writes are not known.
fn patch(c: &mut Classifier, k: &Call<'_>) {
    let spec = OptSpec::new("bcefElnNRsStuUvZ", "BdDFgiopqrVxYz").long(
        &[
            "--dry-run",
            "--forward",
            "--reverse",
            "--silent",
            "--quiet",
            "--batch",
            "--force",
            "--backup",
            "--unified",
            "--context",
            "--ed",
            "--normal",
            "--remove-empty-files",
            "--ignore-whitespace",
            "--verbose",
            "--posix",
            "--binary",
            "--merge",
        ],
        &[
            "--strip",
            "--input",
            "--output",
            "--directory",
            "--fuzz",
            "--reject-file",
            "--prefix",
            "--suffix",
            "--basename-prefix",
            "--version-control",
            "--define",
            "--reject-format",
            "--quoting-style",
            "--read-only",
        ],
    );
    let p = options::parse(k.args, &spec);
    if let Some(flag) = &p.unknown {
        c.push(k.unknown(format!("the option {flag} of patch is not known")));
    }
    c.push(k.ordinary());
    if p.has(&["--dry-run"]) {
        return;
    }
    for out in p.values(&["-o", "--output", "-r", "--reject-file"]) {
        c.path_action("modify_files", out);
    }
    if p.has(&["-d", "--directory"]) {
        return c.unknown_modification("patch -d applies somewhere else");
    }
    if let Some(original) = p.operands.first() {
        return c.modify_operands(vec![original.clone()], k.mods);
    }
    let strip = p
        .value(&["-p", "--strip"])
        .and_then(|w| w.text.parse::<usize>().ok());
    let input = if p.has(&["-i", "--input"]) {
        None
    } else {
        c.input.clone()
    };
    c.patch_writes(input.as_deref(), strip, "patch");
}

fn archive(c: &mut Classifier, k: &Call<'_>) {
    // Archives write where they are told or into the current directory.
    if let Some(dir) = option_value(k.args, &["-C", "--directory", "-d"]) {
        c.path_action("modify_files", &dir);
    }
    for w in operands(
        k.args,
        &["-C", "--directory", "-d", "-f", "--file", "-x", "-X"],
    ) {
        c.path_action("modify_files", &w);
    }
    if let Some(f) = option_value(k.args, &["-f", "--file"]) {
        c.path_action("modify_files", &f);
    }
    if k.args.iter().any(|w| {
        w.text.starts_with("--to-command")
            || w.text.starts_with("--use-compress-program")
            || w.text.starts_with("--checkpoint-action")
            || w.text == "-I"
            || w.text == "-T"
            || w.text == "-TT"
            || w.text.starts_with("--info-script")
            || w.text.starts_with("--new-volume-script")
    }) {
        c.push(k.indirect("the archive program runs a command of its options"));
    }
    let here = Word {
        text: ".".into(),
        dynamic: false,
        quoted: false,
        ..Default::default()
    };
    c.path_action("modify_files", &here);
    c.push(k.ordinary());
}

// ---- network and the rest of the machine ----

fn curl(c: &mut Classifier, k: &Call<'_>) {
    let url = k
        .args
        .iter()
        .find(|w| w.text.contains("://"))
        .map(|w| w.text.clone())
        .or_else(|| {
            operands(k.args, CURL_OPTIONS_WITH_VALUES)
                .first()
                .map(|w| w.text.clone())
        })
        .unwrap_or_default();
    let action = fetch(&url).with("program", k.name);
    if action.arg("host").is_some_and(|h| h.ends_with("asana.com")) && url.contains("/stories") {
        c.push(
            Action::new("post_comment")
                .with("target", "tracker")
                .with("program", k.name),
        );
    }
    c.push(action);
    if let Some(out) = option_value(
        k.args,
        &[
            "-o",
            "--output",
            "-O",
            "--output-document",
            "-P",
            "--directory-prefix",
        ],
    ) {
        c.path_action("modify_files", &out);
    }
    for names in [
        &["-T", "--upload-file"][..],
        &["-K", "--config"],
        &[
            "-d",
            "--data",
            "--data-binary",
            "--data-raw",
            "-F",
            "--form",
        ],
    ] {
        if let Some(up) = option_value(k.args, names) {
            // `-d @file` and `-F x=@file` upload a file.
            let file = up
                .text
                .split_once('@')
                .map(|(_, f)| f.to_string())
                .filter(|_| names[0] != "-T" && names[0] != "-K");
            match file {
                Some(f) => c.path_action("read_files", &Word { text: f, ..up }),
                None if names[0] == "-T" || names[0] == "-K" => c.path_action("read_files", &up),
                None => {}
            }
        }
    }
}

/// Name lookups and probes reach the network (a DNS query can carry data out in its name).
fn dns(c: &mut Classifier, k: &Call<'_>) {
    let host = operands(
        k.args,
        &["-t", "-c", "-p", "-q", "-W", "-w", "-i", "-s", "-I"],
    )
    .into_iter()
    .find(|w| !w.text.starts_with('@'))
    .map(|w| w.text)
    .unwrap_or_default();
    c.push(
        Action::new("fetch_url")
            .with("host", host)
            .with("program", k.name),
    );
}

/// Programs that act on the machine rather than the worktree: root's, and named as
/// `run_command` too so that the contract's rule on their names (`system-command`) sees them.
fn machine(c: &mut Classifier, k: &Call<'_>) {
    c.push(Action::new("run_privileged").with("command", k.text.as_str()));
    c.push(k.ordinary());
}

fn remote_access(c: &mut Classifier, k: &Call<'_>) {
    c.push(k.run("remote_access"));
}

fn signal(c: &mut Classifier, k: &Call<'_>) {
    c.push(k.run("signal_process"));
}

fn infrastructure(c: &mut Classifier, k: &Call<'_>) {
    c.push(k.run("infrastructure"));
}

fn packages(c: &mut Classifier, k: &Call<'_>) {
    let sub = first_operand(k.args, &[])
        .map(|w| w.text.as_str())
        .unwrap_or("");
    if matches!(
        sub,
        "install"
            | "uninstall"
            | "remove"
            | "upgrade"
            | "update"
            | "add"
            | "purge"
            | "reinstall"
            | "autoremove"
            | "tap"
            | "sync"
    ) {
        c.push(k.run("install_package"));
    } else if k.name == "uv" && sub == "run" {
        c.wrapped(
            operands(k.args, &[]).get(1..).unwrap_or_default(),
            k.cmd,
            k.mods,
        );
    } else if matches!(
        sub,
        "list" | "show" | "freeze" | "search" | "info" | "--version"
    ) {
        c.push(k.readonly());
    } else {
        c.push(k.unknown(format!("{} {sub} is not known", k.name)));
    }
}

// ---- reading ----

fn find(c: &mut Classifier, k: &Call<'_>) {
    c.find(k.args, &k.text, k.cmd);
}

fn fd(c: &mut Classifier, k: &Call<'_>) {
    if let Some(at) = k
        .args
        .iter()
        .position(|w| matches!(w.text.as_str(), "-x" | "--exec" | "-X" | "--exec-batch"))
    {
        c.push(k.indirect("fd --exec runs a command on each file found"));
        c.wrapped(
            &k.args[at + 1..],
            k.cmd,
            Mods {
                operands_unknown: true,
                reads_unknown: true,
            },
        );
    }
    let ops = operands(
        k.args,
        &[
            "-e",
            "-t",
            "-E",
            "-d",
            "-j",
            "--extension",
            "--type",
            "--exclude",
            "--max-depth",
        ],
    );
    for w in ops.iter().skip(1) {
        c.path_action("read_files", w);
    }
    c.push(k.readonly());
}

#[rustfmt::skip]
const GREP: OptSpec = OptSpec::new("abcEFGhHiIlLnoPqrRsTuUvwxyzZ0", "efmABCdD")
    .long(&["--recursive", "--ignore-case", "--line-number", "--count", "--files-with-matches",
            "--files-without-match", "--only-matching", "--quiet", "--silent", "--no-messages",
            "--invert-match", "--word-regexp", "--line-regexp", "--extended-regexp",
            "--fixed-strings", "--perl-regexp", "--basic-regexp", "--with-filename",
            "--no-filename", "--color", "--colour", "--null", "--text", "--binary",
            "--dereference-recursive", "--byte-offset", "--initial-tab", "--line-buffered"],
          &["--regexp", "--file", "--max-count", "--after-context", "--before-context",
            "--context", "--include", "--exclude", "--exclude-dir", "--exclude-from",
            "--devices", "--directories", "--binary-files", "--label"])
    .numeric();

#[rustfmt::skip]
const RG: OptSpec = OptSpec::new("abcFiIlLnNoPqsSuUvwxzH0.", "efmABCgtTjEdrM")
    .long(&["--ignore-case", "--smart-case", "--case-sensitive", "--line-number", "--count",
            "--files-with-matches", "--files-without-match", "--only-matching", "--quiet",
            "--invert-match", "--word-regexp", "--line-regexp", "--fixed-strings", "--hidden",
            "--no-ignore", "--no-heading", "--heading", "--with-filename", "--no-filename",
            "--color", "--colour", "--files", "--follow", "--json", "--vimgrep", "--multiline",
            "--multiline-dotall", "--no-messages", "--stats", "--trim", "--pcre2", "--text",
            "--column", "--null", "--sort-files", "--unrestricted", "--no-config",
            "--count-matches", "--type-list", "--search-zip", "--no-line-number"],
          &["--regexp", "--file", "--max-count", "--after-context", "--before-context",
            "--context", "--glob", "--iglob", "--type", "--type-not", "--threads", "--encoding",
            "--max-depth", "--max-filesize", "--replace", "--sort", "--sortr", "--colors",
            "--max-columns", "--context-separator", "--field-match-separator", "--path-separator"])
    .numeric();

fn grep(c: &mut Classifier, k: &Call<'_>) {
    let spec = if k.name == "rg" { &RG } else { &GREP };
    if k.name == "rg"
        && k.args.iter().any(|w| {
            w.text == "--pre" || w.text.starts_with("--pre=") || w.text.starts_with("--pre-glob")
        })
    {
        // `rg --pre cmd` runs cmd on every file.
        c.push(k.indirect("rg --pre runs a command on every file"));
    }
    let p = options::parse(k.args, spec);
    if let Some(flag) = &p.unknown {
        if k.name == "rg" || k.name == "grep" || k.name == "egrep" || k.name == "fgrep" {
            c.push(k.unknown(format!("the option {flag} of {} is not known", k.name)));
        }
    }
    let pattern_given = p.has(&["-e", "-f", "--regexp", "--file"]);
    let files = if pattern_given {
        &p.operands[..]
    } else {
        p.operands.get(1..).unwrap_or_default()
    };
    for w in files {
        c.path_action("read_files", w);
    }
    for f in p.values(&["-f", "--file"]) {
        c.path_action("read_files", f);
    }
    c.unknown_read(k.mods);
    c.push(k.readonly());
}

fn jq(c: &mut Classifier, k: &Call<'_>) {
    if k.args
        .iter()
        .any(|w| w.text == "-i" || w.text == "--inplace")
    {
        c.modify_operands(
            operands(k.args, &["--arg", "--argjson", "-f", "--from-file"])
                .get(1..)
                .unwrap_or_default()
                .to_vec(),
            k.mods,
        );
    } else {
        for w in jq_reads(k.args) {
            c.path_action("read_files", w);
        }
    }
    c.unknown_read(k.mods);
    c.push(k.readonly());
}

/// The files `jq` (or `yq`) reads: each `--rawfile`/`--slurpfile` file, the `-f` program
/// file, and every operand after the filter (all of them with `-f`), up to `--args`.
fn jq_reads(args: &[Word]) -> Vec<&Word> {
    let mut reads = Vec::new();
    let mut operands = Vec::new();
    let mut from_file = false;
    let mut i = 0;
    while i < args.len() {
        let t = args[i].text.as_str();
        match t {
            "--arg" | "--argjson" => i += 3,
            "--slurpfile" | "--rawfile" => {
                reads.extend(args.get(i + 2));
                i += 3;
            }
            "-f" | "--from-file" => {
                reads.extend(args.get(i + 1));
                from_file = true;
                i += 2;
            }
            "--indent" => i += 2,
            "--args" | "--jsonargs" => break,
            "--" => {
                operands.extend(args[i + 1..].iter());
                break;
            }
            _ if t.starts_with('-') && t.len() > 1 => i += 1,
            _ => {
                operands.push(&args[i]);
                i += 1;
            }
        }
    }
    reads.extend(operands.into_iter().skip(usize::from(!from_file)));
    reads
}

/// Read-only programs whose operands are files, read by their [`FILE_SPECS`].
fn read_files(c: &mut Classifier, k: &Call<'_>) {
    let p = parse_files(c, k);
    let mut ops = p.operands.clone();
    if k.name == "uniq" && ops.len() >= 2 {
        // `uniq in out` writes out.
        let out = ops.remove(1);
        c.path_action("modify_files", &out);
    }
    if let Some(out) = p
        .value(&["-o", "--output"])
        .filter(|_| matches!(k.name, "sort" | "tree" | "iconv"))
    {
        c.path_action("modify_files", out);
    }
    for w in &ops {
        c.path_action("read_files", w);
    }
    // These programs share one spec, the union of their options: a letter that takes a
    // value for one of them may be a flag for another (`od -c`, `column -t`), so its
    // "value" may be a file the program reads. Every value is judged as a path too.
    if SHARED_SPEC.contains(&k.name) {
        for (_, value) in &p.options {
            if let Some(value) = value {
                c.path_action("read_files", value);
            }
        }
    }
    for names in [&["--files0-from", "--from-file", "--exclude-from"][..]] {
        for f in p.values(names) {
            c.path_action("read_files", f);
        }
    }
    c.unknown_read(k.mods);
    c.push(k.readonly());
}

fn no_files(c: &mut Classifier, k: &Call<'_>) {
    // `set` alone prints every variable of the shell.
    if k.name == "set" && k.args.is_empty() {
        return c.push(super::environment_dump("set"));
    }
    // `ps e`, `ps auxe`, `ps -o env`: every process's environment.
    if k.name == "ps"
        && k.args
            .iter()
            .any(|w| (!w.text.starts_with('-') && w.text.contains('e')) || w.text.contains("env"))
    {
        return c.push(super::environment_dump("ps"));
    }
    c.push(k.readonly());
}

/// `printenv` prints the environment, or the variables it names.
fn print_environment(c: &mut Classifier, k: &Call<'_>) {
    c.push(super::environment_dump(k.name));
}

/// `export VAR=…` changes what later commands of the same line run.
fn declare(c: &mut Classifier, k: &Call<'_>) {
    // `export`, `export -p`, `declare`, `declare -x` without a name print the environment.
    let names = k.args.iter().filter(|w| !w.text.starts_with('-')).count();
    let prints = k
        .args
        .iter()
        .all(|w| matches!(w.text.as_str(), "-p" | "-x" | "-px" | "-xp"));
    if names == 0 && prints && matches!(k.name, "export" | "declare" | "typeset") {
        return c.push(super::environment_dump(k.name));
    }
    // `declare -p GH_TOKEN` prints the variable, as `echo "$GH_TOKEN"` would.
    let shows = k
        .args
        .iter()
        .any(|w| w.text.starts_with('-') && !w.text.starts_with("--") && w.text.contains('p'));
    if shows {
        for w in k.args.iter().filter(|w| !w.text.starts_with('-')) {
            let name = w.text.split_once('=').map_or(w.text.as_str(), |(n, _)| n);
            if w.dynamic || !c.may_expand(name) {
                c.push(
                    super::environment_dump(k.name)
                        .with("variable", name)
                        .with("reason", format!("{} -p prints {name}", k.name)),
                );
            }
        }
    }
    for w in k.args.iter().filter(|w| is_assignment(w)) {
        c.assignment(w);
    }
    c.push(k.readonly());
}

fn alias(c: &mut Classifier, k: &Call<'_>) {
    if k.args.iter().any(|w| w.text.contains('=')) {
        c.push(k.indirect("an alias renames what a later command runs"));
    } else {
        c.push(k.readonly());
    }
}

// ---- secrets and variables ----

/// Places whose reading is denied, confined or not: keys, tokens, other processes' memory
/// and environment, executor's own database. Matched on the path's components after `~`,
/// `..` and symlinks are resolved; `*` is one component.
#[rustfmt::skip]
pub(crate) const SECRET_PLACES: &[&str] = &[
    ".ssh", ".aws", ".gnupg", ".netrc", ".git-credentials", ".config/gh", ".config/hub",
    ".config/gcloud", ".azure", ".kube", ".docker/config.json", ".npmrc", ".pypirc",
    ".cargo/credentials", ".cargo/credentials.toml", ".config/glab-cli", ".config/git/credentials",
    ".password-store", ".vault-token", ".terraform.d/credentials.tfrc.json",
    "proc/*/environ", "proc/*/mem", "proc/*/task/*/environ", "proc/*/task/*/mem",
    "proc/*/cmdline", "proc/*/fd", "proc/*/root", "proc/*/cwd", "proc/*/maps",
];

/// File names that are secrets wherever they are outside the worktree: SQLite databases
/// (executor's `executor.db` among them) and private keys.
#[rustfmt::skip]
pub(crate) const SECRET_NAMES: &[&str] = &[
    "*.db", "*.db-wal", "*.db-shm", "*.sqlite", "*.sqlite3", "id_rsa*", "id_ed25519*", "id_ecdsa*",
    "id_dsa*", "*.pem", "*.key", ".env",
];

/// Whether `path` (absolute, or `~…`, or an unresolved text) names a secret place.
pub(crate) fn is_secret(path: &str, outside_worktree: bool) -> bool {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let component_match = |pattern: &str| {
        let pat: Vec<&str> = pattern.split('/').collect();
        parts.windows(pat.len()).any(|win| {
            win.iter()
                .zip(&pat)
                .all(|(part, want)| *want == "*" || part == want)
        })
    };
    // `/proc/…` patterns are anchored at the root (or at a `$X`).
    if SECRET_PLACES
        .iter()
        .filter(|p| !p.starts_with("proc/"))
        .any(|p| component_match(p))
    {
        return true;
    }
    let proc_like = path.starts_with("/proc/") || path.contains("/proc/");
    if proc_like
        && SECRET_PLACES
            .iter()
            .filter(|p| p.starts_with("proc/"))
            .any(|p| component_match(p))
    {
        return true;
    }
    if !outside_worktree {
        return false;
    }
    let Some(name) = parts.last() else {
        return false;
    };
    SECRET_NAMES.iter().any(|pattern| {
        if let Some(suffix) = pattern.strip_prefix('*') {
            name.ends_with(suffix)
        } else if let Some(prefix) = pattern.strip_suffix('*') {
            name.starts_with(prefix)
        } else {
            name == pattern
        }
    })
}

/// Variables that change which program a later command runs, or what it loads: an
/// assignment to one (`GIT_SSH_COMMAND=… git fetch`, `LD_PRELOAD=… cargo test`) is not
/// understood. A name ending in `*` is a prefix. `GIT_*` is `git_admin`; the rest
/// `run_indirect`.
#[rustfmt::skip]
pub(crate) const RISKY_ENV: &[&str] = &[
    "GIT_*", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_*", "BASH_ENV", "ENV",
    "PATH", "PROMPT_COMMAND", "PERL5OPT", "PERL5LIB", "PERLLIB", "PYTHONSTARTUP", "PYTHONPATH",
    "PYTHONHOME", "NODE_OPTIONS", "NODE_PATH", "RUBYOPT", "RUBYLIB", "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER", "RUSTC", "RUSTDOC", "CARGO_BUILD_*", "CARGO_TARGET_*",
    "CARGO_HOME", "RUSTUP_HOME", "PAGER", "MANPAGER", "EDITOR", "VISUAL", "BROWSER",
    "SSH_ASKPASS", "SUDO_ASKPASS", "LESSOPEN", "LESSCLOSE", "IFS", "HOME", "SHELL", "SHELLOPTS",
    "BASHOPTS", "ZDOTDIR", "XDG_CONFIG_HOME", "CC", "CXX", "LD", "AR", "MAKE", "MAKEFLAGS",
    "MFLAGS", "CFLAGS", "LDFLAGS", "NPM_CONFIG_*", "npm_config_*", "PIP_*", "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS", "GOFLAGS",
];

/// Whether assigning `name` changes what a later program runs.
pub(crate) fn risky_variable(name: &str) -> bool {
    RISKY_ENV
        .iter()
        .any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == *pattern,
        })
}

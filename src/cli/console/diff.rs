//! A run's diff as its Run page shows it: the run's branch against the base branch, read
//! with executor's own hardened git ([`crate::runner::git::Git`], in the owner's
//! repository, never through a worktree a worker could have rewired), cut to a bound, and
//! split into files whose lines are classed for display.
//!
//! What it must never do: run a program the repository configures (no external diff, no
//! textconv), take a ref from a run that could read as an option, or hand a page more
//! than [`MAX_BYTES`] of diff. The text is returned as text: the template escapes it.

use std::path::Path;

use serde::Serialize;

use crate::runner::git::{Git, NO_DIFF_PROGRAMS};

/// The most of a diff a page shows; the rest is cut (and said to be).
pub const MAX_BYTES: usize = 512 * 1024;

/// The most files a page lists; a change wider than this is cut too.
const MAX_FILES: usize = 500;

/// One line of a file's diff and what kind it is: `add`, `del`, `hunk` (an `@@` header),
/// `meta` (the file's own header lines) or `ctx`.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct DiffLine {
    pub kind: &'static str,
    pub text: String,
}

/// One file of the diff.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct FileDiff {
    pub path: String,
    /// Its place on the page (`file-N`), for the file list's links.
    pub anchor: String,
    pub added: usize,
    pub removed: usize,
    pub binary: bool,
    pub lines: Vec<DiffLine>,
}

/// The whole diff as the page shows it.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct DiffView {
    /// What was compared: `base...branch`.
    pub range: String,
    pub files: Vec<FileDiff>,
    pub added: usize,
    pub removed: usize,
    /// The diff was longer than the page shows.
    pub cut: bool,
}

/// Whether `name` can be given to git as a branch of the run's: no option, no range, no
/// control character, nothing git would read as other than a name.
fn plain_ref(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && !name.contains("..")
        && !name.contains("@{")
        && name
            .chars()
            .all(|c| !c.is_control() && !c.is_whitespace() && !"~^:?*[\\".contains(c))
}

/// The diff of `branch` against `base` in the repository `repo` (`git diff base...branch`:
/// what the branch changed since it left the base), cut to [`MAX_BYTES`]. An error says
/// why there is none, in a sentence for the page.
pub fn read(repo: &Path, base: &str, branch: &str) -> Result<DiffView, String> {
    if !plain_ref(base) || !plain_ref(branch) {
        return Err(format!(
            "the run's branch {branch:?} or the base {base:?} is not a plain branch name"
        ));
    }
    let range = format!("{base}...refs/heads/{branch}");
    let git = Git::repository(repo);
    let args = [
        "diff",
        NO_DIFF_PROGRAMS[0],
        NO_DIFF_PROGRAMS[1],
        "--no-color",
        "--find-renames",
        range.as_str(),
        "--",
    ];
    let output = git.output(&args).map_err(|e| e.to_string())?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "git diff {range} failed: {}",
            stderr.lines().next().unwrap_or("no reason given")
        ));
    }
    let cut = output.stdout.len() > MAX_BYTES;
    let shown = &output.stdout[..output.stdout.len().min(MAX_BYTES)];
    let mut view = parse(&String::from_utf8_lossy(shown), cut);
    view.range = format!("{base}...{branch}");
    Ok(view)
}

/// A unified diff (`git diff` output) split into files, each line classed.
pub fn parse(text: &str, cut: bool) -> DiffView {
    let mut view = DiffView {
        range: String::new(),
        files: Vec::new(),
        added: 0,
        removed: 0,
        cut,
    };
    let mut in_hunk = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            if view.files.len() == MAX_FILES {
                view.cut = true;
                break;
            }
            // `a/path b/path`: the new side's path (a rename shows where it went).
            let path = rest.rsplit_once(" b/").map_or(rest, |(_, b)| b).to_string();
            view.files.push(FileDiff {
                path,
                anchor: format!("file-{}", view.files.len() + 1),
                added: 0,
                removed: 0,
                binary: false,
                lines: Vec::new(),
            });
            in_hunk = false;
        }
        let Some(file) = view.files.last_mut() else {
            continue;
        };
        let kind = if line.starts_with("diff --git ") {
            "meta"
        } else if line.starts_with("@@") {
            in_hunk = true;
            "hunk"
        } else if !in_hunk {
            if line.starts_with("Binary files ") || line == "GIT binary patch" {
                file.binary = true;
            }
            "meta"
        } else if line.starts_with('+') {
            file.added += 1;
            "add"
        } else if line.starts_with('-') {
            file.removed += 1;
            "del"
        } else {
            "ctx"
        };
        file.lines.push(DiffLine {
            kind,
            text: line.to_string(),
        });
    }
    view.added = view.files.iter().map(|f| f.added).sum();
    view.removed = view.files.iter().map(|f| f.removed).sum();
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "diff --git a/src/lib.rs b/src/lib.rs
index 1111111..2222222 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,3 +1,3 @@
 fn main() {
-    old();
+    new(\"<script>\");
 }
diff --git a/logo.png b/logo.png
new file mode 100644
index 0000000..3333333
Binary files /dev/null and b/logo.png differ
diff --git a/old name.md b/new name.md
similarity index 90%
rename from old name.md
rename to new name.md
";

    #[test]
    fn a_diff_is_split_into_files_with_their_lines_counted_and_classed() {
        let view = parse(DIFF, false);
        let paths: Vec<&str> = view.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["src/lib.rs", "logo.png", "new name.md"]);
        assert_eq!((view.added, view.removed), (1, 1));
        let lib = &view.files[0];
        let kinds: Vec<&str> = lib.lines.iter().map(|l| l.kind).collect();
        assert_eq!(
            kinds,
            ["meta", "meta", "meta", "meta", "hunk", "ctx", "del", "add", "ctx"]
        );
        // The text stays as it was: escaping is the template's.
        assert!(lib.lines[7].text.contains("<script>"));
        assert!(view.files[1].binary && !lib.binary);
        assert_eq!(view.files[2].anchor, "file-3");
        // A header line that looks like a change is no change.
        assert_eq!((lib.added, lib.removed), (1, 1));
    }

    #[test]
    fn only_plain_branch_names_reach_git() {
        for good in ["main", "executor/T-1-change-the-schema", "release-1.2"] {
            assert!(plain_ref(good), "{good}");
        }
        for bad in [
            "",
            "-p",
            "--output=/tmp/x",
            "a..b",
            "a b",
            "x@{1}",
            "a\nb",
            "a:b",
        ] {
            assert!(!plain_ref(bad), "{bad:?}");
        }
    }
}

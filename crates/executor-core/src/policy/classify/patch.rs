//! Patches: which files `git apply` and `patch` write, read from the patch when the command
//! itself holds it (a here-document or here-string), and never guessed when it does not.
//!
//! A patch names the files it writes (`+++ b/src/a.rs`, `rename to …`), and it can create a
//! symlink (`new file mode 120000`, its one line of content the target): a link pointing
//! outside the worktree is a way to write there later, so its target counts as written, as
//! `ln -s` does. A patch read from a file (`git apply fix.diff`, `patch -p1 < fix.diff`) or
//! a pipe is not seen by the classifier, which reads no files: its writes are not known,
//! and such a call is never approved by a path rule (the owner is asked; inside the wall
//! it can write only the worktree anyway).

use super::Classifier;
use crate::policy::shell::Word;

/// One file a patch writes, and where it points when the patch makes it a symlink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Written {
    /// As the patch names it, before any `-p` stripping.
    pub path: String,
    /// The patch's own name for it carries no `a/`/`b/` prefix (`rename to`, `copy to`).
    pub bare: bool,
    pub link_to: Option<String>,
}

/// The files `text` writes, in order; `None` when it holds no file header at all (then it
/// is not a patch this reader understands, and its writes are not known).
pub(super) fn written(text: &str) -> Option<Vec<Written>> {
    let mut out: Vec<Written> = Vec::new();
    let mut symlink = false;
    let mut in_git_header = false;
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(rest) = line.strip_prefix("diff --git ") {
            symlink = false;
            in_git_header = true;
            let path = rest.rsplit_once(" b/").map_or(rest, |(_, b)| b);
            out.push(Written {
                path: format!("b/{path}"),
                bare: false,
                link_to: None,
            });
        } else if line == "new file mode 120000" || line == "new mode 120000" {
            symlink = true;
        } else if let Some(rest) = line
            .strip_prefix("rename to ")
            .or_else(|| line.strip_prefix("copy to "))
        {
            out.push(Written {
                path: rest.to_string(),
                bare: true,
                link_to: None,
            });
        } else if let Some(rest) = line.strip_prefix("+++ ") {
            // `+++ b/x\t2024-01-01 …`: the name ends at a tab.
            let path = rest.split('\t').next().unwrap_or_default().trim_end();
            let path = path.trim_matches('"');
            if path != "/dev/null" && !(in_git_header && out.last().is_some_and(|w| w.path == path))
            {
                out.push(Written {
                    path: path.to_string(),
                    bare: false,
                    link_to: None,
                });
            }
            in_git_header = false;
        } else if let Some(target) = line.strip_prefix('+') {
            if symlink {
                if let Some(last) = out.last_mut().filter(|w| w.link_to.is_none()) {
                    last.link_to = Some(target.to_string());
                }
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// `path` with its first `strip` components removed (`-p1`: `b/src/a.rs` → `src/a.rs`).
fn stripped(path: &str, strip: usize) -> String {
    path.split('/')
        .filter(|p| !p.is_empty())
        .skip(strip)
        .collect::<Vec<_>>()
        .join("/")
}

fn word(text: String) -> Word {
    Word {
        text,
        dynamic: false,
        quoted: true,
        ..Default::default()
    }
}

impl Classifier {
    /// The writes of a patch fed to `program` on its input (`None`: read from a file or a
    /// pipe, so not known). `strip` is `-pN` (`None`: not given; each reading is judged).
    pub(super) fn patch_writes(
        &mut self,
        input: Option<&str>,
        strip: Option<usize>,
        program: &str,
    ) {
        let Some(files) = input.and_then(written) else {
            self.unknown_modification(&format!(
                "{program}: the patch is not in the command, so the files it writes are not known"
            ));
            return;
        };
        for file in files {
            let mut names = Vec::new();
            if file.bare {
                names.push(file.path.clone());
            } else {
                match strip {
                    Some(n) => names.push(stripped(&file.path, n)),
                    // Without `-p`, judge every way it may be read: as given, and its name.
                    None => {
                        names.push(file.path.clone());
                        names.push(stripped(&file.path, file.path.matches('/').count()));
                    }
                }
            }
            if file.path.starts_with('/') && strip.is_some() {
                // An absolute name stays absolute for a reader that strips nothing useful.
                names.push(file.path.clone());
            }
            for name in names {
                if let Some(target) = &file.link_to {
                    // The link is a way to write its target later, like `ln -s`.
                    let target = if target.starts_with('/') || target.starts_with('~') {
                        target.clone()
                    } else {
                        match name.rsplit_once('/') {
                            Some((dir, _)) => format!("{dir}/{target}"),
                            None => target.clone(),
                        }
                    };
                    self.path_action("modify_files", &word(target));
                }
                self.path_action("modify_files", &word(name));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_patch_names_its_files_and_its_links() {
        let text = "diff --git a/link b/link\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\ndiff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-a\n+b\n";
        let files = written(text).expect("a patch");
        assert_eq!(files.len(), 2, "{files:?}");
        assert_eq!(files[0].link_to.as_deref(), Some("/etc/passwd"));
        assert_eq!(files[1].path, "b/src/a.rs");
        assert_eq!(files[1].link_to, None);
        assert_eq!(stripped("b/src/a.rs", 1), "src/a.rs");
    }

    #[test]
    fn a_plain_unified_diff_and_renames() {
        let files = written("--- x.orig\n+++ ../../etc/cron.d/x\n@@ -1 +1 @@\n+* * * * * id\n")
            .expect("a patch");
        assert_eq!(files[0].path, "../../etc/cron.d/x");
        let files = written("diff --git a/a b/b\nrename from a\nrename to ../b\n").expect("patch");
        assert!(files.iter().any(|f| f.bare && f.path == "../b"));
        assert!(written("just text\n").is_none());
    }
}

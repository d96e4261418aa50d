//! Paths: where a path a tool call names really points, and whether that is inside the run's
//! worktree.
//!
//! Everything here is lexical and pure except [`resolve_on_disk`] (and [`resolve_actions`],
//! which only loops over it) and [`checked_out_branch`]: symlinks and the checked-out branch
//! can only be seen on disk. Nothing here decides; the contract's `path` condition calls
//! [`is_inside`].

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use super::Action;

/// How many symlinks one resolution follows before giving up (the kernel's own limit).
const MAX_SYMLINK_HOPS: usize = 40;

/// Resolves `..`, `.` and repeated separators of an absolute path without the filesystem.
/// `..` at the root stays at the root, as the kernel does.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                // Never pop the root itself.
                if out.parent().is_some() {
                    out.pop();
                }
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// Whether the path argument `path` (as an action carries it) lies inside `worktree`.
/// `Some(true)` inside, `Some(false)` outside (`~…` is always outside: it names the home
/// directory), `None` for an empty value. A relative value is taken relative to the worktree
/// (a `[REQUEST:…]` names paths that way). Pure: symlinks must have been resolved before
/// (see [`resolve_actions`]).
pub fn is_inside(worktree: &Path, path: &str) -> Option<bool> {
    if path.is_empty() {
        return None;
    }
    if path.starts_with('~') {
        return Some(false);
    }
    let p = Path::new(path);
    let resolved = if p.is_absolute() {
        normalize(p)
    } else {
        normalize(&worktree.join(p))
    };
    // The worktree is normalised too, so that `/w/run/` or `/w/x/../run` compare equal.
    Some(resolved.starts_with(normalize(worktree)))
}

/// Resolves every symlink of an absolute path on disk, component by component, so that the
/// result names the file the kernel would open or create — including through a dangling
/// symlink, and for a file that does not exist yet (the missing tail is kept lexically).
/// A relative path or a symlink loop comes back as given (see [`resolve_actions`], which
/// moves an unresolvable path out of the `path` argument instead).
///
/// With [`checked_out_branch`], the policy engine's only filesystem access besides reading a
/// contract.
pub fn resolve_on_disk(path: &Path) -> PathBuf {
    resolve_symlinks(path).unwrap_or_else(|| path.to_path_buf())
}

/// The branch `worktree` has checked out: `NAME` of the `ref: refs/heads/NAME` its git HEAD
/// holds (through a linked worktree's `.git` file, `gitdir: …`). `None` when detached or
/// unreadable. Read when a call is judged, so it is what git sees then; with
/// [`resolve_on_disk`], the policy engine's only filesystem access besides a contract.
pub fn checked_out_branch(worktree: &Path) -> Option<String> {
    let dot_git = worktree.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        let text = read_small(&dot_git)?;
        let target = text.trim().strip_prefix("gitdir:")?.trim();
        let target = Path::new(target);
        if target.is_absolute() {
            target.to_path_buf()
        } else {
            worktree.join(target)
        }
    };
    let head = read_small(&git_dir.join("HEAD"))?;
    let name = head
        .trim()
        .strip_prefix("ref:")?
        .trim()
        .strip_prefix("refs/heads/")?;
    (!name.is_empty()).then(|| name.to_string())
}

/// A small text file (a HEAD, a `.git` link): at most 4 KiB read, `None` on any error.
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

fn resolve_symlinks(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut pending: VecDeque<OsString> = VecDeque::new();
    push_components(&mut pending, path, false);
    let mut out = PathBuf::from("/");
    let mut hops = 0;
    while let Some(c) = pending.pop_front() {
        if c == ".." {
            // `out` has no symlinks left, so popping it is what the kernel does.
            out.pop();
            continue;
        }
        out.push(&c);
        // A component that does not exist (yet) is kept as written; `symlink_metadata`
        // (not `metadata`) so that a dangling symlink is followed to where a write would go.
        if let Ok(meta) = std::fs::symlink_metadata(&out) {
            if meta.file_type().is_symlink() {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return None;
                }
                let target = std::fs::read_link(&out).ok()?;
                out.pop();
                if target.is_absolute() {
                    out = PathBuf::from("/");
                }
                push_components(&mut pending, &target, true);
            }
        }
    }
    Some(out)
}

fn push_components(pending: &mut VecDeque<OsString>, path: &Path, front: bool) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect();
    if front {
        for p in parts.into_iter().rev() {
            pending.push_front(p);
        }
    } else {
        pending.extend(parts);
    }
}

/// Resolves the `path` argument of every action on disk (see [`resolve_on_disk`]); a
/// relative one (from a `[REQUEST:…]`) is taken relative to the worktree first. A path that
/// cannot be resolved (a symlink loop) moves to `path_unresolved`, which no path condition
/// matches.
pub fn resolve_actions(actions: &mut [Action], worktree: &Path) {
    for action in actions {
        let Some(path) = action.args.get("path") else {
            continue;
        };
        if path.is_empty() || path.starts_with('~') {
            continue;
        }
        let p = Path::new(path);
        let absolute = if p.is_absolute() {
            p.to_path_buf()
        } else {
            worktree.join(p)
        };
        match resolve_symlinks(&absolute) {
            Some(resolved) => {
                let resolved = resolved.to_string_lossy().into_owned();
                action.args.insert("path".into(), resolved);
            }
            None => {
                if let Some(raw) = action.args.remove("path") {
                    action.args.insert("path_unresolved".into(), raw);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_resolves_dots_and_stops_at_the_root() {
        assert_eq!(
            normalize(Path::new("/a/b/../c/./d")),
            PathBuf::from("/a/c/d")
        );
        assert_eq!(
            normalize(Path::new("/a/../../../etc")),
            PathBuf::from("/etc")
        );
        assert_eq!(normalize(Path::new("/")), PathBuf::from("/"));
    }

    #[test]
    fn inside_and_outside_the_worktree() {
        let wt = Path::new("/w/run");
        assert_eq!(is_inside(wt, "/w/run/src/a.rs"), Some(true));
        assert_eq!(is_inside(wt, "/w/run"), Some(true));
        assert_eq!(
            is_inside(wt, "/w/run2/a"),
            Some(false),
            "a sibling with a common prefix"
        );
        assert_eq!(is_inside(wt, "/w/run/../other/a"), Some(false));
        assert_eq!(is_inside(wt, "src/../../x"), Some(false));
        assert_eq!(is_inside(wt, "src/x"), Some(true));
        assert_eq!(is_inside(wt, "~/x"), Some(false));
        assert_eq!(is_inside(wt, ""), None);
    }

    #[test]
    fn symlinks_out_of_the_worktree_are_followed_even_dangling() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = resolve_on_disk(dir.path());
        let wt = root.join("wt");
        let out = root.join("outside");
        std::fs::create_dir_all(wt.join("sub")).expect("mkdir");
        std::fs::create_dir_all(&out).expect("mkdir");
        std::os::unix::fs::symlink(&out, wt.join("escape")).expect("symlink");
        std::os::unix::fs::symlink(out.join("new-file"), wt.join("dangling")).expect("symlink");
        std::os::unix::fs::symlink("../..", wt.join("sub/up")).expect("symlink");

        assert_eq!(resolve_on_disk(&wt.join("escape/f")), out.join("f"));
        assert_eq!(resolve_on_disk(&wt.join("dangling")), out.join("new-file"));
        assert_eq!(resolve_on_disk(&wt.join("sub/up/outside/x")), out.join("x"));
        assert_eq!(
            resolve_on_disk(&wt.join("sub/not-yet/x")),
            wt.join("sub/not-yet/x")
        );
        // A loop cannot be resolved.
        std::os::unix::fs::symlink(wt.join("loop"), wt.join("loop")).expect("symlink");
        assert_eq!(resolve_symlinks(&wt.join("loop/x")), None);
    }
}

//! Task identifiers (`task_gid`): what a valid one looks like, and the stable ids derived for
//! tasks that arrive without one.
//!
//! A gid later names a log folder and part of a git branch, so it must never contain a path
//! separator, whitespace or a control character.

use sha2::{Digest, Sha256};
use thiserror::Error;

const MAX_LEN: usize = 128;

/// Why a string cannot be a task gid.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum GidError {
    #[error("task gid is empty")]
    Empty,
    #[error("task gid is longer than {MAX_LEN} characters")]
    TooLong,
    #[error("task gid `{0}` contains `{1}`; use letters, digits and . _ - : # only")]
    BadCharacter(String, char),
    #[error("task gid `{0}` is reserved")]
    Reserved(String),
}

/// Checks that `gid` can name a task. Returns it trimmed.
pub fn validate(gid: &str) -> Result<&str, GidError> {
    let gid = gid.trim();
    if gid.is_empty() {
        return Err(GidError::Empty);
    }
    if gid.chars().count() > MAX_LEN {
        return Err(GidError::TooLong);
    }
    if gid == "." || gid == ".." {
        return Err(GidError::Reserved(gid.to_string()));
    }
    if let Some(bad) = gid
        .chars()
        .find(|c| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '#')))
    {
        return Err(GidError::BadCharacter(gid.to_string(), bad));
    }
    Ok(gid)
}

/// Lowercase ASCII slug of `text`: runs of anything else become one `-`, at most `max` chars.
pub fn slug(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= max {
            break;
        }
    }
    out.trim_end_matches('-').to_string()
}

/// Short hex digest of `text`, for ids that must be stable and unique but stay readable.
pub fn short_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

/// The gid of a plans-folder note that names none: `plan-<slug>-<hash>`, derived from the
/// note's path relative to the folder (with `/` separators), so it survives edits and
/// restarts, and two notes never share one.
pub fn for_plan_note(relative_path: &str) -> String {
    let stem = relative_path.strip_suffix(".md").unwrap_or(relative_path);
    let slug = slug(stem, 48);
    let hash = short_hash(relative_path);
    if slug.is_empty() {
        format!("plan-{hash}")
    } else {
        format!("plan-{slug}-{hash}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_owner_style_gids() {
        for gid in [
            "T-1",
            "1209876543210987",
            "gh:lumen#12",
            "plan-fix-tab-0a1b2c3d",
        ] {
            assert_eq!(validate(gid), Ok(gid));
        }
    }

    #[test]
    fn rejects_gids_that_cannot_name_a_folder_or_branch() {
        assert_eq!(validate("  "), Err(GidError::Empty));
        assert_eq!(validate(".."), Err(GidError::Reserved("..".into())));
        assert_eq!(
            validate("a/b"),
            Err(GidError::BadCharacter("a/b".into(), '/'))
        );
        assert_eq!(
            validate("a b"),
            Err(GidError::BadCharacter("a b".into(), ' '))
        );
        assert_eq!(validate(&"x".repeat(129)), Err(GidError::TooLong));
    }

    #[test]
    fn plan_note_gid_is_stable_readable_and_path_specific() {
        let a = for_plan_note("Fix tab preview.md");
        assert_eq!(a, for_plan_note("Fix tab preview.md"));
        assert!(a.starts_with("plan-fix-tab-preview-"), "{a}");
        assert_ne!(a, for_plan_note("fix-tab-preview.md"));
        assert_ne!(a, for_plan_note("sub/Fix tab preview.md"));
        assert_eq!(validate(&a), Ok(a.as_str()));
        assert!(for_plan_note("???.md").starts_with("plan-"));
    }
}

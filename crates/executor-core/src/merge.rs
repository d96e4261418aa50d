//! Auto-merge (`[forge] auto_merge`): whether executor merges a complete run's PR itself,
//! decided from one look at the PR, the run's PR memory and the settings.
//!
//! A complete run's PR is merged by executor (no worker turn) only when all of these hold
//! on the look:
//! - it is out of draft (the owner marked it ready: that is the owner's consent);
//! - CI is green on its head, by the same rule the `pr` machine completes by;
//! - its head is the one executor's review passed;
//! - with `require_approval`, someone other than the PR's author (and other than executor)
//!   approved that very head, and nobody's latest verdict asks for changes;
//! - the forge says it merges without conflicts.
//!
//! Otherwise the owner is told what holds it, once per head ([`Gate::Hold`]); a look whose
//! mergeability the forge is still computing only waits. The merge is decided and kept in
//! [`MergeAttempt`] before it is sent, and sent again after a crash until the forge says
//! it happened or refused it: a merged PR is seen as merged before anything else is
//! decided, and the request names the head it may merge, so the same head is never merged
//! twice and a head pushed since is never merged unreviewed.
//!
//! What it must never do: I/O, read the clock, or merge a head it did not see green,
//! reviewed and approved on the same look.

use serde::{Deserialize, Serialize};

/// `[forge] auto_merge`, when `enabled`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoMerge {
    pub method: MergeMethod,
    /// An approval of the head by someone other than the PR's author is needed.
    pub require_approval: bool,
    /// The run's branch is deleted once the PR is merged.
    pub delete_branch: bool,
}

/// How the forge merges: the forges' own three words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeMethod {
    Merge,
    Squash,
    Rebase,
}

impl MergeMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            MergeMethod::Merge => "merge",
            MergeMethod::Squash => "squash",
            MergeMethod::Rebase => "rebase",
        }
    }

    /// Reads `merge`, `squash` or `rebase`.
    pub fn parse(text: &str) -> Option<MergeMethod> {
        match text.trim() {
            "merge" => Some(MergeMethod::Merge),
            "squash" => Some(MergeMethod::Squash),
            "rebase" => Some(MergeMethod::Rebase),
            _ => None,
        }
    }
}

/// One reviewer's latest verdict on a PR, as the forge keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The reviewer's login.
    pub by: String,
    pub approved: bool,
    /// The head the verdict was given on (`None`: the forge did not say).
    #[serde(default)]
    pub commit: Option<String>,
}

/// Each reviewer's latest verdict from a forge's reviews, oldest first: `(login, verdict)`,
/// where `None` (a dismissed review) takes the reviewer's standing verdict away. Reviews
/// that give no verdict (comments) are left out by the caller.
pub fn latest_verdicts(
    reviews: impl IntoIterator<Item = (String, Option<Verdict>)>,
) -> Vec<Verdict> {
    let mut latest = std::collections::BTreeMap::new();
    for (login, verdict) in reviews {
        latest.insert(login, verdict);
    }
    latest.into_values().flatten().collect()
}

/// The merge executor decided for a head, kept before it is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeAttempt {
    pub head_sha: String,
    /// The forge said it merged.
    #[serde(default)]
    pub done: bool,
    /// The forge refused it (not mergeable, the head moved, a rule of the repository):
    /// its words, for the owner. Not sent again for this head.
    #[serde(default)]
    pub refused: Option<String>,
}

/// What auto-merge does on one look at a complete run's PR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Merge this head now (or again: a merge decided before a crash and never answered).
    Merge,
    /// Not now, for these reasons; the owner is told once per head.
    Hold(Vec<String>),
    /// Nothing to do or say (merged already, or the forge is still computing mergeability).
    Wait,
}

/// What one look says of the PR, for [`gate`].
#[derive(Debug, Clone, Copy)]
pub struct Look<'a> {
    pub head_sha: &'a str,
    pub draft: bool,
    /// `None`: the forge is still computing it.
    pub mergeable: Option<bool>,
    pub ci_green: bool,
    /// The head executor's review passed, if any.
    pub reviewed_head: Option<&'a str>,
    /// The PR's author (`None`: the forge did not say).
    pub author: Option<&'a str>,
    pub verdicts: &'a [Verdict],
    /// executor's own logins: an approval by one of them is no one else's.
    pub executor_logins: &'a [String],
}

/// The gate for `look`, given the merge already decided (if any).
pub fn gate(look: &Look<'_>, attempt: Option<&MergeAttempt>, auto: &AutoMerge) -> Gate {
    // A merge decided for this head says only whether it is done or refused: one whose
    // answer never came is decided again on this look, by every condition below.
    if let Some(attempt) = attempt.filter(|a| a.head_sha == look.head_sha) {
        match &attempt.refused {
            Some(why) => return Gate::Hold(vec![format!("the forge refused to merge it: {why}")]),
            None if attempt.done => return Gate::Wait,
            None => {}
        }
    }
    let short = short(look.head_sha);
    let mut held = Vec::new();
    if look.draft {
        held.push("it is still a draft (marking it ready lets it merge)".to_string());
    }
    if !look.ci_green {
        held.push(format!("CI is not green on {short}"));
    }
    if look.reviewed_head != Some(look.head_sha) {
        held.push(format!("executor's review did not pass on {short}"));
    }
    let asking: Vec<&str> = look
        .verdicts
        .iter()
        .filter(|v| !v.approved)
        .map(|v| v.by.as_str())
        .collect();
    if !asking.is_empty() {
        held.push(format!("changes are requested by {}", asking.join(", ")));
    }
    if auto.require_approval {
        let others = |v: &&Verdict| {
            !same_login(Some(&v.by), look.author)
                && !look
                    .executor_logins
                    .iter()
                    .any(|l| same_login(Some(l), Some(&v.by)))
        };
        let approved = look
            .verdicts
            .iter()
            .filter(others)
            .any(|v| v.approved && v.commit.as_deref() == Some(look.head_sha));
        if !approved {
            held.push(format!(
                "nobody but its author has approved {short} (a review approving this head lets it merge)"
            ));
        }
    }
    match look.mergeable {
        Some(false) => held.push("it conflicts with its base branch".to_string()),
        None if held.is_empty() => return Gate::Wait,
        _ => {}
    }
    if held.is_empty() {
        Gate::Merge
    } else {
        Gate::Hold(held)
    }
}

/// The same forge login (`[bot]` and case aside).
fn same_login(a: Option<&str>, b: Option<&str>) -> bool {
    let bare = |l: &str| l.strip_suffix("[bot]").unwrap_or(l).to_ascii_lowercase();
    match (a, b) {
        (Some(a), Some(b)) => bare(a) == bare(b),
        _ => false,
    }
}

/// A commit as the owner reads it in a sentence: its first seven characters.
pub fn short(sha: &str) -> &str {
    sha.get(..7).unwrap_or(sha)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "9d41c2e7a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5";

    fn auto() -> AutoMerge {
        AutoMerge {
            method: MergeMethod::Squash,
            require_approval: true,
            delete_branch: true,
        }
    }

    fn approval(by: &str, commit: &str) -> Verdict {
        Verdict {
            by: by.into(),
            approved: true,
            commit: Some(commit.into()),
        }
    }

    fn ready<'a>(verdicts: &'a [Verdict], logins: &'a [String]) -> Look<'a> {
        Look {
            head_sha: HEAD,
            draft: false,
            mergeable: Some(true),
            ci_green: true,
            reviewed_head: Some(HEAD),
            author: Some("mkowalski"),
            verdicts,
            executor_logins: logins,
        }
    }

    fn held(gate: Gate) -> Vec<String> {
        match gate {
            Gate::Hold(why) => why,
            other => panic!("not held: {other:?}"),
        }
    }

    #[test]
    fn a_ready_green_reviewed_approved_clean_head_merges() {
        let verdicts = [approval("reviewer", HEAD)];
        assert_eq!(gate(&ready(&verdicts, &[]), None, &auto()), Gate::Merge);
        let unrequired = AutoMerge {
            require_approval: false,
            ..auto()
        };
        assert_eq!(gate(&ready(&[], &[]), None, &unrequired), Gate::Merge);
    }

    #[test]
    fn each_unmet_condition_holds_it_and_is_named() {
        let verdicts = [approval("reviewer", HEAD)];
        let cases: [(&str, Look<'_>); 5] = [
            (
                "draft",
                Look {
                    draft: true,
                    ..ready(&verdicts, &[])
                },
            ),
            (
                "CI is not green on 9d41c2e",
                Look {
                    ci_green: false,
                    ..ready(&verdicts, &[])
                },
            ),
            (
                "review did not pass on 9d41c2e",
                Look {
                    reviewed_head: Some("0000000"),
                    ..ready(&verdicts, &[])
                },
            ),
            (
                "conflicts",
                Look {
                    mergeable: Some(false),
                    ..ready(&verdicts, &[])
                },
            ),
            ("nobody but its author", ready(&[], &[])),
        ];
        for (expected, look) in cases {
            let why = held(gate(&look, None, &auto()));
            assert!(
                why.iter().any(|w| w.contains(expected)),
                "{expected}: {why:?}"
            );
            assert_eq!(why.len(), 1, "only what is unmet: {why:?}");
        }
    }

    #[test]
    fn approvals_that_do_not_count_leave_it_held() {
        let logins = vec!["executor-app[bot]".to_string()];
        let not_counted = [
            approval("MKowalski", HEAD),
            approval("executor-app", HEAD),
            approval("reviewer", "an-older-head"),
            Verdict {
                commit: None,
                ..approval("other", HEAD)
            },
        ];
        let why = held(gate(&ready(&not_counted, &logins), None, &auto()));
        assert!(why[0].contains("nobody but its author"), "{why:?}");
        let asked = [
            approval("reviewer", HEAD),
            Verdict {
                approved: false,
                ..approval("second", HEAD)
            },
        ];
        let why = held(gate(&ready(&asked, &logins), None, &auto()));
        assert!(
            why[0].contains("changes are requested by second"),
            "{why:?}"
        );
    }

    #[test]
    fn mergeability_still_computed_waits_without_telling_and_a_decided_merge_goes_again() {
        let verdicts = [approval("reviewer", HEAD)];
        let computing = Look {
            mergeable: None,
            ..ready(&verdicts, &[])
        };
        assert_eq!(gate(&computing, None, &auto()), Gate::Wait);
        // Held anyway for another reason: that is said, computing or not.
        let draft = Look {
            draft: true,
            ..computing
        };
        assert!(matches!(gate(&draft, None, &auto()), Gate::Hold(_)));

        let look = ready(&verdicts, &[]);
        let sent = MergeAttempt {
            head_sha: HEAD.into(),
            done: false,
            refused: None,
        };
        assert_eq!(gate(&look, Some(&sent), &auto()), Gate::Merge);
        // ...but only while every condition still holds on the new look.
        let asked = [
            approval("reviewer", HEAD),
            Verdict {
                approved: false,
                ..approval("second", HEAD)
            },
        ];
        let changed = ready(&asked, &[]);
        assert!(matches!(
            gate(&changed, Some(&sent), &auto()),
            Gate::Hold(_)
        ));
        let unrequired = AutoMerge {
            require_approval: false,
            ..auto()
        };
        assert!(
            matches!(gate(&changed, None, &unrequired), Gate::Hold(_)),
            "a request for changes holds it even when no approval is required"
        );
        let done = MergeAttempt {
            done: true,
            ..sent.clone()
        };
        assert_eq!(gate(&look, Some(&done), &auto()), Gate::Wait);
        let refused = MergeAttempt {
            refused: Some("Head branch was modified".into()),
            ..sent.clone()
        };
        let why = held(gate(&look, Some(&refused), &auto()));
        assert!(why[0].contains("Head branch was modified"), "{why:?}");
        // An attempt for an older head says nothing of this one.
        let older = MergeAttempt {
            head_sha: "older".into(),
            done: true,
            refused: None,
        };
        assert_eq!(gate(&look, Some(&older), &auto()), Gate::Merge);
    }

    #[test]
    fn methods_read_and_say_their_forge_word() {
        for m in [MergeMethod::Merge, MergeMethod::Squash, MergeMethod::Rebase] {
            assert_eq!(MergeMethod::parse(m.as_str()), Some(m));
        }
        assert_eq!(MergeMethod::parse("fast-forward"), None);
    }
}

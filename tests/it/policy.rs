//! `executor policy check`: the owner's table (docs/design.md §6) as the written contract
//! decides it, row by row, through the command line; and a broken contract named with its
//! file and line.

use crate::support::Workspace;

fn check(ws: &Workspace, args: &[&str]) -> (String, String) {
    let mut full = vec!["policy", "check"];
    full.extend_from_slice(args);
    let out = ws.ok(&full);
    let mut fields = out.trim_end().split('\t');
    let decision = fields.next().unwrap_or_default().to_string();
    let rule = fields
        .next()
        .unwrap_or_default()
        .trim_start_matches("rule ")
        .to_string();
    (decision, rule)
}

#[test]
fn the_owners_table_holds_through_policy_check() {
    let ws = Workspace::init();
    let own = ["--branch", "executor/T-1-fix"];
    let rows: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--action", "create_worktree", "branch=executor/T-1-fix"],
            "approve",
        ),
        (vec!["--action", "run_build"], "approve"),
        (
            vec!["--action", "run_tests", "scheme=macOS UI Tests CI"],
            "approve",
        ),
        (vec!["--action", "open_draft_pr"], "approve"),
        (
            vec![
                "--action",
                "push_branch",
                "branch=executor/T-1-fix",
                own[0],
                own[1],
            ],
            "approve",
        ),
        (
            vec!["--action", "push_branch", "branch=main", own[0], own[1]],
            "deny",
        ),
        (
            vec![
                "--action",
                "push_branch",
                "branch=executor/T-2-other",
                own[0],
                own[1],
            ],
            "deny",
        ),
        (
            vec!["--action", "post_comment", "target=tracker"],
            "escalate",
        ),
        (vec!["--action", "merge_pr", "pr=12"], "escalate"),
        (
            vec!["--action", "modify_files", "path=../elsewhere/file"],
            "deny",
        ),
        (vec!["--action", "modify_files", "path=/etc/hosts"], "deny"),
        (vec!["--action", "scope_expansion"], "deny"),
        (vec!["--action", "something_new"], "escalate"),
    ];
    for (args, expected) in rows {
        let (decision, rule) = check(&ws, &args);
        assert_eq!(decision, expected, "{args:?} (rule {rule})");
    }
}

#[test]
fn policy_check_dry_runs_a_decision_unconfined_by_default_or_confined() {
    let ws = Workspace::init();
    // An inline program is escalated for an unconfined worker and contained for a confined one.
    let (decision, rule) = check(&ws, &["--bash", "python3 -c 'print(1)'"]);
    assert_eq!(
        (decision.as_str(), rule.as_str()),
        ("escalate", "inline-code")
    );
    let (decision, rule) = check(&ws, &["--confined", "--bash", "python3 -c 'print(1)'"]);
    assert_eq!(
        (decision.as_str(), rule.as_str()),
        ("approve", "inline-code-confined")
    );
    let (decision, _) = check(&ws, &["--confined", "--action", "run_unknown"]);
    assert_eq!(decision, "approve");
    let (decision, _) = check(&ws, &["--action", "run_unknown"]);
    assert_eq!(decision, "escalate");
    // Secrets and pushes keep their own rules inside the wall.
    let (decision, _) = check(&ws, &["--confined", "--bash", "cat ~/.ssh/id_rsa"]);
    assert_eq!(decision, "deny");
    let (decision, _) = check(
        &ws,
        &[
            "--confined",
            "--branch",
            "executor/T-1",
            "--bash",
            "git push origin main",
        ],
    );
    assert_eq!(decision, "deny");
}

#[test]
fn a_broken_contract_is_refused_with_its_file_line_and_field() {
    let ws = Workspace::init();
    let path = ws.path().join("roles/worker-policy.json");
    std::fs::write(
        &path,
        "{\n  \"contract_version\": 1,\n  \"role\": \"worker\",\n  \"default\": \"escalate\",\n  \"rules\": [\n    { \"id\": \"a\", \"action\": \"run_tests\", \"why\": \"x\" }\n  ]\n}\n",
    )
    .expect("write");
    let err = ws.fails_with(2, &["policy", "check", "--action", "run_tests"]);
    assert!(err.contains("worker-policy.json:6"), "{err}");
    assert!(err.contains("decision"), "{err}");

    let err = ws.fails_with(2, &["policy", "check", "--action", "run_tests", "oops"]);
    assert!(err.contains("`oops` is not key=value"), "{err}");
}

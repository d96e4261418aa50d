//! `executor doctor`: one line per check, a failure named with its fix, exit 1 when any
//! check failed.

use crate::support::{git, Workspace};

fn doctor(ws: &Workspace) -> (Option<i32>, String) {
    let out = crate::support::confined(&mut ws.command(&["doctor"]))
        .output()
        .expect("doctor");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The line of check `name` (its first word: `base` for the base branch).
fn line<'a>(report: &'a str, name: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name))
        .unwrap_or_else(|| panic!("no {name} line in {report}"))
}

#[test]
fn a_healthy_workspace_passes_every_check() {
    let ws = crate::runner::workspace(&["/bin/true"], &["/bin/true"], "");
    let (code, report) = doctor(&ws);
    assert_eq!(code, Some(0), "{report}");
    for name in [
        "config",
        "store",
        "agent",
        "git",
        "repository",
        "base",
        "verify",
        "confinement",
    ] {
        assert!(line(&report, name).starts_with("ok"), "{name}: {report}");
    }
    let json = ws.json(&["doctor", "--json"]);
    let checks = json.as_array().expect("a list of checks");
    assert!(checks.iter().all(|c| c["level"] != "fail"), "{json}");
    assert!(checks.iter().any(|c| c["check"] == "base branch"));
}

#[test]
fn a_missing_base_branch_and_verify_program_fail_with_the_fix() {
    let ws = crate::runner::workspace(
        &["/bin/true"],
        &["no-such-verify-program-7", "--all"],
        "base_branch = \"master\"\n",
    );
    git(&ws.path().join("repo"), &["branch", "feature-x"]);
    let (code, report) = doctor(&ws);
    assert_eq!(code, Some(1), "{report}");
    let base = line(&report, "base");
    assert!(base.starts_with("FAIL"), "{report}");
    assert!(
        base.contains("base_branch = \"master\"")
            && base.contains("main")
            && base.contains("feature-x"),
        "{base}"
    );
    let verify = line(&report, "verify");
    assert!(
        verify.starts_with("FAIL") && verify.contains("no-such-verify-program-7"),
        "{verify}"
    );
}

#[test]
fn the_example_worker_and_a_missing_wall_are_warnings() {
    let ws = Workspace::init();
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replacen(
        "\n[sandbox]\n",
        "\n[sandbox]\nbwrap = \"/nonexistent/bwrap\"\n",
        1,
    ));
    // No agent CLI on this PATH: `auto` falls back to the bundled example worker.
    let out = crate::support::confined(&mut ws.command(&["doctor"]))
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("doctor");
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    let agent = line(&report, "agent");
    assert!(
        agent.starts_with("warn")
            && agent.contains("executor-example-worker")
            && agent.contains("no real work"),
        "{agent}"
    );
    let wall = line(&report, "confinement");
    assert!(
        wall.starts_with("warn") && wall.contains("/nonexistent/bwrap"),
        "{wall}"
    );
    // Not a git repository: a failure that says what to set.
    let repo = line(&report, "repository");
    assert!(
        repo.starts_with("FAIL") && repo.contains("[runner] repository"),
        "{repo}"
    );
}

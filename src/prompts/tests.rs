use std::fs;
use std::path::Path;

use super::set::{blockquote, fence, line_of};
use super::*;
use crate::core::queue::QueueStatus;
use crate::core::task::Task;

const PROTOCOL_HEADING: &str = "## Talking to the orchestrator";
const TAGS: [&str; 4] = ["[REQUEST:", "[STATUS:", "[DONE:", "[ESCALATE:"];

fn builtin() -> PromptSet {
    PromptSet::builtin().expect("the built-in templates load")
}

fn render(set: &PromptSet, context: &PromptContext) -> String {
    set.render(context.phase, context)
        .unwrap_or_else(|err| panic!("the {} prompt renders: {err}", context.phase))
}

/// A prompts folder holding `files` (name, contents).
fn prompts_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, text) in files {
        fs::write(dir.path().join(name), text).expect("write template");
    }
    dir
}

fn load_error(dir: &Path) -> PromptError {
    match PromptSet::load(dir) {
        Ok(_) => panic!("the prompts in {} should not load", dir.display()),
        Err(err) => err,
    }
}

#[test]
fn every_builtin_template_renders_for_its_phase_with_the_protocol_section() {
    let set = builtin();
    for phase in Phase::ALL {
        assert_eq!(set.origin(phase.file_name()), Some(&Origin::BuiltIn));
        let context = PromptContext::example(phase);
        let prompt = render(&set, &context);
        assert!(
            prompt.contains(PROTOCOL_HEADING),
            "{phase}: no protocol section"
        );
        for tag in TAGS {
            assert!(
                prompt.contains(tag),
                "{phase}: the protocol never shows {tag}"
            );
        }
        assert!(
            prompt.contains(r#"`\"`"#),
            "{phase}: quoting with \\\" not taught"
        );
        assert!(prompt.contains("Never use credentials"), "{phase}");
        assert!(prompt.contains("never open, update, merge or close a pull request"));
        for kind in phase.done_kinds() {
            assert!(
                prompt.contains(&format!("`[DONE:{kind}]")),
                "{phase}: does not teach [DONE:{kind}]"
            );
        }
        assert!(
            prompt.contains(&context.task.title),
            "{phase}: no task title"
        );
        assert!(prompt.contains(&context.task.gid), "{phase}: no task gid");
        assert!(prompt.contains(&context.run.branch), "{phase}: no branch");
        assert!(
            prompt.contains(&context.run.worktree),
            "{phase}: no worktree"
        );
        assert!(
            prompt.contains(&format!("phase `{phase}`")),
            "{phase}: no phase"
        );
        assert!(
            prompt.contains("Keep the hover delay"),
            "{phase}: no messages"
        );
        assert!(!prompt.contains("{{") && !prompt.contains("{%") && !prompt.contains("{#"));
        assert!(!prompt.contains("\n\n\n\n"), "{phase}: runs of blank lines");

        let minimal = render(&set, &PromptContext::minimal(phase));
        assert!(
            minimal.contains(PROTOCOL_HEADING),
            "{phase}: minimal context"
        );
        assert!(
            !minimal.contains("## Recent messages"),
            "{phase}: empty window shown"
        );
    }
}

#[test]
fn every_phase_template_includes_the_one_protocol_partial() {
    let names: Vec<&str> = builtin_files().iter().map(|(name, _)| *name).collect();
    for phase in Phase::ALL {
        assert!(names.contains(&phase.file_name()), "{phase} not built in");
        let text = builtin_file(phase.file_name()).expect("built in");
        assert!(text.contains(r#"{% include "_protocol.md" %}"#), "{phase}");
        assert!(
            !text.contains(PROTOCOL_HEADING),
            "{phase} copies the protocol"
        );
    }
    for partial in PARTIALS {
        assert!(names.contains(&partial), "{partial} not built in");
    }
    assert_eq!(names.len(), Phase::ALL.len() + PARTIALS.len());
}

/// A prompt echoed to a worker's output must never be read as the worker's own message.
#[test]
fn no_line_of_a_rendered_prompt_starts_with_a_protocol_tag() {
    let set = builtin();
    for phase in Phase::ALL {
        let prompt = render(&set, &PromptContext::example(phase));
        for line in prompt.lines() {
            let line = line.trim_start();
            assert!(
                !TAGS.iter().any(|tag| line.starts_with(tag)),
                "{phase}: a line starts with a tag: {line}"
            );
        }
    }
}

#[test]
fn a_missing_prompts_folder_means_every_template_is_built_in() {
    let dir = tempfile::tempdir().expect("temp dir");
    let set = PromptSet::load(&dir.path().join("prompts")).expect("loads");
    assert!(set.origins().all(|(_, origin)| *origin == Origin::BuiltIn));
    let context = PromptContext::example(Phase::Queued);
    assert_eq!(render(&set, &context), render(&builtin(), &context));
}

#[test]
fn an_override_file_replaces_the_builtin() {
    let dir = prompts_dir(&[(
        "executor-worker-queued.md",
        "Owner's prompt for {{ task.title }} on {{ run.branch }}\n",
    )]);
    let set = PromptSet::load(dir.path()).expect("loads");
    let path = dir.path().join("executor-worker-queued.md");
    assert_eq!(
        set.origin(Phase::Queued.file_name()),
        Some(&Origin::File(path))
    );
    assert_eq!(set.origin(Phase::FixCi.file_name()), Some(&Origin::BuiltIn));

    let context = PromptContext::example(Phase::Queued);
    assert_eq!(
        render(&set, &context),
        "Owner's prompt for Fix tab preview on executor/T-7-fix-tab-preview\n"
    );
    let fix_ci = render(&set, &PromptContext::example(Phase::FixCi));
    assert!(
        fix_ci.contains("# Make CI green"),
        "other phases stay built in"
    );
}

#[test]
fn an_overridden_partial_and_an_owner_partial_reach_every_phase() {
    let dir = prompts_dir(&[
        (
            "_protocol.md",
            "## Our protocol\n{% include \"_house_rules.md\" %}\n",
        ),
        ("_house_rules.md", "Branch {{ run.branch }} only.\n"),
    ]);
    let set = PromptSet::load(dir.path()).expect("loads");
    for phase in Phase::ALL {
        let prompt = render(&set, &PromptContext::example(phase));
        assert!(prompt.contains("## Our protocol"), "{phase}");
        assert!(
            prompt.contains("Branch executor/T-7-fix-tab-preview only."),
            "{phase}"
        );
        assert!(!prompt.contains(PROTOCOL_HEADING), "{phase}");
    }
}

#[test]
fn an_override_with_an_unknown_variable_fails_at_load_naming_file_line_and_variable() {
    let dir = prompts_dir(&[(
        "executor-worker-queued.md",
        "# Start\n\nWork on {{ task.nmae }}.\n",
    )]);
    let err = load_error(dir.path());
    let PromptError::UnknownVariable { at, variable, .. } = &err else {
        panic!("not an unknown variable: {err}");
    };
    assert_eq!(variable, "task.nmae");
    assert_eq!(
        at.file,
        dir.path()
            .join("executor-worker-queued.md")
            .display()
            .to_string()
    );
    assert_eq!(at.line, Some(3));
    let message = err.to_string();
    assert!(
        message.contains("executor-worker-queued.md, line 3"),
        "{message}"
    );
    assert!(
        message.contains("unknown variable `task.nmae`"),
        "{message}"
    );
    assert!(
        message.contains("`task` has: description, gid"),
        "{message}"
    );
}

#[test]
fn an_unknown_variable_in_a_branch_never_taken_still_fails_at_load() {
    let dir = prompts_dir(&[(
        "executor-worker-pr-review.md",
        "{% if false %}\n{{ taks.title }}\n{% endif %}\n",
    )]);
    let err = load_error(dir.path());
    let PromptError::UnknownVariable { at, variable, .. } = &err else {
        panic!("not an unknown variable: {err}");
    };
    assert_eq!((variable.as_str(), at.line), ("taks", Some(2)));
    assert!(err.to_string().contains("the variables are: attempt, ci"));
}

#[test]
fn a_loop_variables_unknown_field_fails_at_load_with_its_line() {
    let dir = prompts_dir(&[(
        "_messages.md",
        "{% for message in messages %}\n- {{ message.txt }}\n{% endfor %}\n",
    )]);
    let err = load_error(dir.path());
    let PromptError::UnknownVariable { at, variable, .. } = &err else {
        panic!("not an unknown variable: {err}");
    };
    assert_eq!(variable, "message.txt");
    assert!(at.file.ends_with("_messages.md"), "{}", at.file);
    assert_eq!(at.line, Some(2));
}

#[test]
fn a_value_that_can_be_absent_used_unguarded_fails_at_load() {
    let dir = prompts_dir(&[("executor-worker-queued.md", "{{ ci.log_excerpt }}\n")]);
    let err = load_error(dir.path());
    let PromptError::UnknownVariable {
        at,
        variable,
        detail,
    } = &err
    else {
        panic!("not an unknown variable: {err}");
    };
    assert_eq!((variable.as_str(), at.line), ("ci.log_excerpt", Some(1)));
    assert!(
        detail.contains("none or empty in a queued prompt"),
        "{detail}"
    );
}

#[test]
fn a_syntax_error_names_the_file_and_line() {
    let dir = prompts_dir(&[(
        "executor-worker-fix-ci.md",
        "# Fix\n\n{% for check in ci.checks %}\n- {{ check.name }}\n",
    )]);
    let err = load_error(dir.path());
    let PromptError::Syntax { at, .. } = &err else {
        panic!("not a syntax error: {err}");
    };
    assert!(
        at.file.ends_with("executor-worker-fix-ci.md"),
        "{}",
        at.file
    );
    assert!(at.line.is_some(), "no line: {err}");
    assert!(err.to_string().contains("template syntax error"), "{err}");

    let dir = prompts_dir(&[("executor-worker-queued.md", "one\ntwo {{ task.title\n")]);
    let err = load_error(dir.path());
    let PromptError::Syntax { at, .. } = &err else {
        panic!("not a syntax error: {err}");
    };
    assert_eq!(at.line, Some(2), "{err}");
}

#[test]
fn an_unreadable_override_is_an_error_not_the_builtin() {
    let dir = tempfile::tempdir().expect("temp dir");
    fs::write(
        dir.path().join("executor-worker-queued.md"),
        b"\xff\xfe bad",
    )
    .expect("write");
    let err = load_error(dir.path());
    assert!(matches!(err, PromptError::Read { .. }), "{err}");
    assert!(
        err.to_string().contains("executor-worker-queued.md"),
        "{err}"
    );

    let dir = tempfile::tempdir().expect("temp dir");
    fs::create_dir(dir.path().join("executor-worker-fix-ci.md")).expect("mkdir");
    assert!(matches!(load_error(dir.path()), PromptError::Read { .. }));
}

#[test]
fn fix_ci_renders_the_failed_checks_and_the_log_excerpt() {
    let mut context = PromptContext::example(Phase::FixCi);
    context.ci = Some(CiFailure {
        checks: vec![
            FailedCheck {
                name: "clippy (stable)".into(),
                summary: None,
                url: Some("https://ci.example/lint/17".into()),
            },
            FailedCheck {
                name: "test (ubuntu-latest)".into(),
                summary: Some("2 failed, 310 passed".into()),
                url: None,
            },
        ],
        failing_step: Some("cargo test --locked".into()),
        log_excerpt: "error[E0308]: mismatched types\n```\nthread 'main' panicked".into(),
        run_url: Some("https://github.com/o/r/actions/runs/99".into()),
    });
    let prompt = render(&builtin(), &context);
    assert!(
        prompt.contains("- `clippy (stable)` (https://ci.example/lint/17)\n"),
        "{prompt}"
    );
    assert!(prompt.contains("- `test (ubuntu-latest)`: 2 failed, 310 passed\n"));
    assert!(prompt.contains("- Failing step: `cargo test --locked`"));
    assert!(prompt.contains("- CI run: https://github.com/o/r/actions/runs/99"));
    assert!(
        prompt.contains("````\nerror[E0308]: mismatched types\n```\nthread 'main' panicked\n````"),
        "the excerpt is fenced past its own backticks: {prompt}"
    );
    assert!(prompt.contains("fix attempt 2 of 3"));
    assert!(
        !prompt.contains("Xcode test report"),
        "the example's check leaked"
    );
}

#[test]
fn fix_comments_renders_exactly_the_threads_given() {
    let mut context = PromptContext::example(Phase::FixComments);
    context.review_threads = vec![
        ReviewThread {
            id: "PRRT_one".into(),
            path: "src/tab.rs".into(),
            line: Some(12),
            comments: vec![
                ReviewComment {
                    author: "alice".into(),
                    body: "Rename this.\n\nIt reads badly.".into(),
                },
                ReviewComment {
                    author: "bob".into(),
                    body: "Agreed.".into(),
                },
            ],
        },
        ReviewThread {
            id: "PRRT_two".into(),
            path: "docs/tabs.md".into(),
            line: None,
            comments: vec![ReviewComment {
                author: "carol".into(),
                body: "Outdated?".into(),
            }],
        },
    ];
    let prompt = render(&builtin(), &context);
    assert!(prompt.contains("2 unresolved thread(s)"), "{prompt}");
    assert!(prompt.contains("### 1. `src/tab.rs`, line 12\n\nThread `PRRT_one`."));
    assert!(prompt.contains("**alice** wrote:\n\n> Rename this.\n>\n> It reads badly."));
    assert!(prompt.contains("**bob** wrote:\n\n> Agreed."));
    assert!(prompt.contains("### 2. `docs/tabs.md` (outdated"));
    assert!(prompt.contains("**carol** wrote:\n\n> Outdated?"));
    let thread_headings = prompt
        .lines()
        .filter(|line| {
            line.starts_with("### ") && line[4..].starts_with(|c: char| c.is_ascii_digit())
        })
        .count();
    assert_eq!(thread_headings, 2, "{prompt}");
    assert!(
        !prompt.contains("PRRT_kwDOMGtpR85h4iMD"),
        "the example's thread leaked"
    );
    assert!(prompt.contains("`[STATUS:thread_fixed] thread=<id>"));
    assert!(prompt.contains("`[STATUS:thread_acknowledged] thread=<id>"));
}

#[test]
fn pr_review_renders_the_rules_files_and_required_checks() {
    let mut context = PromptContext::example(Phase::PrReview);
    context.review = Some(ReviewInputs {
        rules_files: vec!["CONTRIBUTING.md".into(), "docs/style.md".into()],
        required_checks: vec![CheckStatus {
            name: "build".into(),
            conclusion: "success".into(),
        }],
    });
    let prompt = render(&builtin(), &context);
    assert!(
        prompt.contains("- `CONTRIBUTING.md`\n- `docs/style.md`\n"),
        "{prompt}"
    );
    assert!(prompt.contains("- `build`: success"));
    assert!(prompt.contains("git diff main...HEAD"));
}

#[test]
fn in_progress_renders_the_reason_and_the_message_window() {
    let context = PromptContext::example(Phase::InProgress);
    let prompt = render(&builtin(), &context);
    assert!(prompt.contains("before it finished: no output for 30 min"));
    assert!(prompt.contains(
        "2026-03-16T09:10:00.000000Z worker: [STATUS:investigation] Reproduced in \
         TabPreviewUITests\n2026-03-16T09:20:00.000000Z owner: Keep the hover delay"
    ));
    assert!(prompt.contains("stopped 1 time(s) for going silent"));
}

#[test]
fn render_refuses_a_context_without_its_phase_input_or_for_another_phase() {
    let set = builtin();
    let mut context = PromptContext::example(Phase::FixCi);
    context.ci = None;
    let err = set.render(Phase::FixCi, &context).unwrap_err();
    assert!(matches!(
        err,
        PromptError::MissingInput {
            phase: Phase::FixCi,
            ..
        }
    ));

    let mut context = PromptContext::example(Phase::FixComments);
    context.review_threads.clear();
    assert!(matches!(
        set.render(Phase::FixComments, &context),
        Err(PromptError::MissingInput { .. })
    ));

    let context = PromptContext::example(Phase::Queued);
    let err = set.render(Phase::PrReview, &context).unwrap_err();
    assert_eq!(
        err.to_string(),
        "asked for the pr_review prompt with a context for the queued phase"
    );
}

#[test]
fn phases_have_the_owners_names_and_file_names() {
    for phase in Phase::ALL {
        assert_eq!(phase.as_str().parse::<Phase>(), Ok(phase));
        let json = serde_json::to_string(&phase).expect("serialises");
        assert_eq!(json, format!("\"{}\"", phase.as_str()));
    }
    assert_eq!(
        Phase::InProgress.file_name(),
        "executor-worker-inprogress.md"
    );
    assert_eq!(Phase::FixCi.as_str(), "fix_ci");
    assert!("analysis".parse::<Phase>().is_err());
}

#[test]
fn a_task_becomes_the_prompts_task() {
    let at = chrono::DateTime::from_timestamp(1_790_000_000, 0).expect("a fixed time");
    let task = Task {
        id: 1,
        task_gid: "T-1".into(),
        added_at: at,
        updated_at: at,
        source: Some("cli".into()),
        description: Some("# Fix tab preview\n\nIt sticks.".into()),
        notes: Some("  ".into()),
        status: QueueStatus::Approved,
        priority: Some(2),
        complexity: None,
        feasibility: None,
        analysis_summary: None,
        executor_run_id: None,
    };
    let context = TaskContext::from_task(&task);
    assert_eq!(context.title, "Fix tab preview");
    assert_eq!(context.description.as_deref(), Some("It sticks."));
    assert_eq!(context.notes, None);
    assert_eq!(context.priority, Some(2));
}

#[test]
fn fence_outgrows_the_backticks_inside() {
    assert_eq!(fence("a".into(), None), "```\na\n```");
    assert_eq!(
        fence("\n``` x\n".into(), Some("text".into())),
        "````text\n``` x\n````"
    );
    assert_eq!(fence(String::new(), None), "```\n```");
    assert_eq!(blockquote("a\n\nb\n".into()), "> a\n>\n> b");
}

#[test]
fn line_of_finds_the_variable_inside_a_tag_only() {
    let source = "task.nmae in prose\n{# task.nmae #}\n{{ task.nmaex }}\n{{ task.nmae }}\n";
    assert_eq!(line_of(source, "task.nmae"), Some(4));
    assert_eq!(line_of("{{ x }}", "task"), None);
}

#[test]
fn an_include_of_a_missing_partial_or_an_unknown_filter_fails_at_load() {
    let dir = prompts_dir(&[(
        "executor-worker-queued.md",
        "a\n{% include \"_nope.md\" %}\n",
    )]);
    let err = load_error(dir.path());
    assert_eq!(err.location().and_then(|at| at.line), Some(2), "{err}");
    assert!(err.to_string().contains("_nope.md"), "{err}");

    let dir = prompts_dir(&[("executor-worker-fix-ci.md", "{{ task.title | shout }}\n")]);
    let err = load_error(dir.path());
    assert!(err.to_string().contains("shout"), "{err}");
}

#[test]
fn a_prompt_set_can_be_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<PromptSet>();
}

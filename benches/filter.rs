//! The analyzer's rule filters over 100,000 tasks: the owner's five rules plus fifteen more
//! (substrings, regular expressions, labels, sources, nested `any`/`all`/`not`), twenty in
//! all, printed as a markdown table. Target: under 1 s for the lot.
//!
//! Run with `cargo bench --bench filter`.

use std::time::{Duration, Instant};

use executor::core::facts::TaskFacts;
use executor::core::filter::{Candidate, FilterSpec, Filters, OWNER_RULES_TOML};

const TASKS: usize = 100_000;
const ROUNDS: usize = 5;
const TARGET: Duration = Duration::from_secs(1);

/// Fifteen rules beside the owner's five.
const MORE_RULES: &str = r#"
[[rules]]
id = "r6"
when = { text_contains = "do not automate" }
[[rules]]
id = "r7"
when = { text_matches = "(?i)\\bmeeting notes\\b" }
[[rules]]
id = "r8"
when = { label = "blocked" }
[[rules]]
id = "r9"
when = { all = [{ label = "design" }, { not = { text_contains = "implement" } }] }
[[rules]]
id = "r10"
when = { source = "zendesk" }
[[rules]]
id = "r11"
when = { text_contains = "legal review" }
[[rules]]
id = "r12"
when = { text_matches = "(?i)^# (wip|draft):" }
[[rules]]
id = "r13"
when = { any = [{ label = "wontfix" }, { label = "duplicate" }] }
[[rules]]
id = "r14"
when = { text_contains = "ios only" }
[[rules]]
id = "r15"
when = { text_matches = "(?i)docs\\.google\\.com/(document|spreadsheets)" }
[[rules]]
id = "r16"
when = { all = [{ unassigned = true }, { text_contains = "someday" }] }
[[rules]]
id = "r17"
when = { text_contains = "marketing copy" }
[[rules]]
id = "r18"
when = { label = "needs-info" }
[[rules]]
id = "r19"
when = { text_matches = "(?i)\\bhiring\\b" }
[[rules]]
id = "r20"
when = { not = { any = [{ source = "asana" }, { source = "github" }, { source = "plans" }] } }
"#;

struct Task {
    source: &'static str,
    text: String,
    facts: TaskFacts,
}

fn tasks() -> Vec<Task> {
    let sources = [
        "asana",
        "asana",
        "asana",
        "github",
        "plans",
        "user_feedback_raw",
    ];
    let bodies = [
        "The tab preview stays visible after the pointer leaves the tab strip on macOS.",
        "Timeline: Q3. Project Advisor: Ana. Milestones below.",
        "New toolbar icons, see https://www.figma.com/file/abc123/Toolbar",
        "Crash when opening a PDF from the downloads shelf; macOS 15.3.",
        "Windows installer fails on ARM machines with a signature error.",
        "Sync bookmarks across devices; needs a server change first.",
    ];
    (0..TASKS)
        .map(|i| {
            let body = bodies[i % bodies.len()];
            Task {
                source: sources[i % sources.len()],
                text: format!(
                    "# Task {i}: {}\n\n{body}\n\nReported by user {}.",
                    &body[..20],
                    i % 97
                ),
                facts: TaskFacts {
                    labels: if i % 3 == 0 {
                        vec!["macOS".into()]
                    } else {
                        vec!["bug".into()]
                    },
                    assignee_id: (i % 4 != 0).then(|| {
                        if i % 10 == 1 {
                            "1201999999999999".into()
                        } else {
                            "1201987654320001".into()
                        }
                    }),
                    closed: i % 50 == 0,
                    ..TaskFacts::default()
                },
            }
        })
        .collect()
}

fn main() {
    let mut spec: FilterSpec = toml::from_str(OWNER_RULES_TOML).expect("the owner's rules");
    let more: FilterSpec = toml::from_str(MORE_RULES).expect("more rules");
    spec.rules.extend(more.rules);
    let filters = Filters::compile(&spec).expect("the rules compile");
    assert_eq!(filters.rule_count(), 20);
    let tasks = tasks();

    let mut times = Vec::with_capacity(ROUNDS);
    let mut skipped = 0;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        skipped = tasks
            .iter()
            .filter(|t| {
                filters
                    .judge(Candidate {
                        source: t.source,
                        text: &t.text,
                        facts: &t.facts,
                    })
                    .is_some()
            })
            .count();
        times.push(started.elapsed());
    }
    times.sort();
    let median = times[ROUNDS / 2];
    let worst = times[ROUNDS - 1];
    println!("| measurement | n | median | worst | target | met |");
    println!("|---|---:|---:|---:|---|---|");
    println!(
        "| filters: {TASKS} tasks through {} rules ({skipped} skipped) | {ROUNDS} | {:.1} ms | {:.1} ms | < 1 s | {} |",
        filters.rule_count(),
        median.as_secs_f64() * 1000.0,
        worst.as_secs_f64() * 1000.0,
        if worst < TARGET { "yes" } else { "**no**" }
    );
}

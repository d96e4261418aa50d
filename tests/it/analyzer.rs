//! The analyzer's engine on a real SQLite store, with a shell script as its "model" (the
//! `command` agent kind): rules skip without a model call, verdicts and findings are
//! recorded, garbage is asked again once and then handed to the owner with the error in the
//! notes, and a pass leaves no task pending. One test runs the real Claude Code CLI against
//! the scripted model server, when it is installed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use executor::agents::Adapter;
use executor::analyzer::{
    AgentUnavailable, Analyzed, Analyzer, Outcome, PromptTemplate, DEFAULT_LIMITS,
};
use executor::core::facts::TaskFacts;
use executor::core::filter::{FilterSpec, Filters};
use executor::core::queue::{QueueStatus, Verdict};
use executor::core::task::{NewTask, Task};
use executor::core::watchdog::Limits;
use executor::store::sqlite::SqliteStore;
use executor::store::Store;

use crate::model_server::{ModelServer, Turn};

/// The scripted model: it reads the prompt, records the call (one line per call, the task's
/// gid), keeps the prompt and a listing of its working folder, and prints
/// `answers/{gid}.{n}` (the n-th call for that task), else `answers/{gid}`, else
/// `answers/default`. An answer file ending in `.sh` is run instead of printed.
const MODEL: &str = r#"#!/bin/sh
dir="$1"
prompt=$(cat)
gid=$(printf '%s\n' "$prompt" | sed -n 's/^Task id: //p' | head -n 1)
echo "$gid" >> "$dir/calls"
n=$(grep -c -x -F -- "$gid" "$dir/calls")
printf '%s\n' "$prompt" > "$dir/prompts/$gid.$n"
{ pwd; ls -A; } > "$dir/cwd/$gid.$n"
for answer in "$dir/answers/$gid.$n" "$dir/answers/$gid" "$dir/answers/default"; do
  if [ -f "$answer.sh" ]; then . "$answer.sh"; exit $?; fi
  if [ -f "$answer" ]; then cat "$answer"; exit 0; fi
done
echo "no answer scripted for $gid"
"#;

const RULES: &str = r#"
qualifying_sources = ["asana", "github", "cli"]
owner = ["owner-1"]

[[rules]]
id = "figma"
reason = "design work (a Figma link)"
when = { text_matches = "(?i)https?://(www\\.)?figma\\.com/" }

[[rules]]
id = "closed-or-someone-elses"
reason = "closed upstream, or assigned to someone other than the owner"
when = { any = [{ closed = true }, { assigned_to_other = true }] }
"#;

fn answer(
    status: &str,
    priority: i64,
    complexity: &str,
    feasibility: &str,
    summary: &str,
) -> String {
    format!(
        "Let me look at this task.\n\n```json\n{{\"status\": \"{status}\", \"priority\": {priority}, \"complexity\": \"{complexity}\", \"feasibility\": \"{feasibility}\", \"analysis_summary\": \"{summary}\"}}\n```\n"
    )
}

struct Bench {
    _root: tempfile::TempDir,
    dir: PathBuf,
    store: Arc<dyn Store>,
}

impl Bench {
    async fn new() -> Self {
        let root = tempfile::tempdir().expect("temp dir");
        let dir = root.path().to_path_buf();
        for sub in ["answers", "prompts", "cwd", "work"] {
            std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
        }
        std::fs::write(dir.join("model.sh"), MODEL).expect("write the model script");
        let store = SqliteStore::open(&dir.join("executor.db"))
            .await
            .expect("open SQLite");
        Bench {
            _root: root,
            dir,
            store: Arc::new(store),
        }
    }

    fn command(&self) -> Adapter {
        Adapter::Command {
            argv: vec![
                "/bin/sh".into(),
                self.dir.join("model.sh").to_string_lossy().into_owned(),
                self.dir.to_string_lossy().into_owned(),
            ],
        }
    }

    fn env() -> HashMap<String, String> {
        let mut env = HashMap::new();
        env.insert(
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        );
        env
    }

    fn analyzer_with(&self, adapter: Adapter, limits: Limits) -> Analyzer {
        let spec: FilterSpec = toml::from_str(RULES).expect("rules parse");
        Analyzer::new(
            self.store.clone(),
            adapter,
            Filters::compile(&spec).expect("rules compile"),
            PromptTemplate::builtin().expect("the built-in prompt loads"),
            limits,
            Duration::from_millis(200),
            self.work(),
            Bench::env(),
        )
    }

    fn analyzer(&self) -> Analyzer {
        self.analyzer_with(self.command(), DEFAULT_LIMITS)
    }

    fn work(&self) -> PathBuf {
        self.dir.join("work")
    }

    fn script(&self, name: &str, text: &str) {
        std::fs::write(self.dir.join("answers").join(name), text).expect("write answer");
    }

    /// The model's calls, one gid per call.
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("calls"))
            .map(|text| text.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    fn prompt(&self, gid: &str, n: u32) -> String {
        std::fs::read_to_string(self.dir.join("prompts").join(format!("{gid}.{n}")))
            .unwrap_or_else(|e| panic!("no prompt {gid}.{n}: {e}"))
    }

    async fn add(&self, gid: &str, source: &str, description: &str, notes: Option<&str>) -> Task {
        let new = NewTask {
            task_gid: gid.to_string(),
            source: source.to_string(),
            description: description.to_string(),
            notes: notes.map(str::to_string),
            priority: None,
            initial_status: QueueStatus::Pending,
        };
        self.store
            .upsert_task(&new, "cli", Utc::now())
            .await
            .expect("add a task")
            .0
    }

    async fn facts(&self, gid: &str, facts: &TaskFacts) {
        let json = serde_json::to_string(facts).expect("facts serialise");
        self.store
            .save_task_facts(gid, &json, Utc::now())
            .await
            .expect("save facts");
    }

    async fn task(&self, gid: &str) -> Task {
        self.store
            .task(gid)
            .await
            .expect("read")
            .expect("the task exists")
    }

    /// The task's last event, as (kind, actor, detail).
    async fn last_event(&self, gid: &str) -> (String, String, Option<String>) {
        let events = self.store.events(gid).await.expect("events");
        let last = events.last().expect("an event");
        (last.kind.clone(), last.actor.clone(), last.detail.clone())
    }
}

#[tokio::test]
async fn tasks_a_rule_skips_never_reach_the_model() {
    let bench = Bench::new().await;
    bench.script(
        "default",
        &answer("awaiting_go", 2, "small", "high", "fine"),
    );
    let figma = bench
        .add(
            "T-figma",
            "asana",
            "# New onboarding screens\n\nSee https://www.figma.com/file/abc",
            None,
        )
        .await;
    let closed = bench.add("T-closed", "github", "# Fix crash", None).await;
    bench
        .facts(
            "T-closed",
            &TaskFacts {
                closed: true,
                ..TaskFacts::default()
            },
        )
        .await;
    let theirs = bench.add("T-theirs", "asana", "# Fix login", None).await;
    bench
        .facts(
            "T-theirs",
            &TaskFacts {
                assignee: Some("Someone Else".into()),
                assignee_id: Some("other-7".into()),
                ..TaskFacts::default()
            },
        )
        .await;
    let raw = bench
        .add("T-raw", "user_feedback_raw", "# It is slow", None)
        .await;

    let analyzer = bench.analyzer();
    let expected = [
        (&figma, "figma"),
        (&closed, "closed-or-someone-elses"),
        (&theirs, "closed-or-someone-elses"),
        (&raw, "source-not-qualifying"),
    ];
    for (task, rule) in expected {
        let analyzed = analyzer.analyze_one(task).await.expect("analyzed");
        match &analyzed.outcome {
            Outcome::SkippedByRule { rule: by, .. } => assert_eq!(by, rule),
            other => panic!("{}: {other:?}", task.task_gid),
        }
        let stored = bench.task(&task.task_gid).await;
        assert_eq!(stored.status, QueueStatus::Skip);
        let summary = stored.analysis_summary.expect("a summary");
        assert!(
            summary.starts_with(&format!("skipped by rule `{rule}`")),
            "{summary}"
        );
        let (kind, actor, detail) = bench.last_event(&task.task_gid).await;
        assert_eq!((kind.as_str(), actor.as_str()), ("analyzed", "analyzer"));
        let detail = detail.expect("a detail");
        assert!(detail.contains(rule), "{detail}");
    }
    let figma = bench.task("T-figma").await;
    assert!(figma
        .analysis_summary
        .as_deref()
        .is_some_and(|s| s.contains("design work")));
    assert!(
        bench.calls().is_empty(),
        "the model was called: {:?}",
        bench.calls()
    );
}

#[tokio::test]
async fn the_models_verdicts_move_tasks_with_their_findings_recorded() {
    let bench = Bench::new().await;
    bench.script(
        "T-go",
        &answer(
            "awaiting_go",
            3,
            "small",
            "high",
            "A typo in the settings label.",
        ),
    );
    bench.script(
        "T-review",
        &answer(
            "for_review",
            1,
            "large",
            "medium",
            "Touches the sync protocol.",
        ),
    );
    bench.script(
        "T-skip",
        &answer("skip", 4, "medium", "low", "A meeting, not a code change."),
    );
    let go = bench
        .add(
            "T-go",
            "github",
            "# Fix the settings label\n\nIt says \"Setings\".",
            Some("owner: quick one"),
        )
        .await;
    bench
        .facts(
            "T-go",
            &TaskFacts {
                assignee: Some("Owner".into()),
                assignee_id: Some("owner-1".into()),
                labels: vec!["macOS".into(), "good first issue".into()],
                location: Some("o/app".into()),
                url: Some("https://github.com/o/app/issues/12".into()),
                ..TaskFacts::default()
            },
        )
        .await;
    let review = bench
        .add(
            "T-review",
            "asana",
            "# Rework sync\n\nMake it faster.",
            None,
        )
        .await;
    // Unreadable facts: analyzed without them.
    bench
        .store
        .save_task_facts("T-review", "{not json", Utc::now())
        .await
        .expect("save");
    let skip = bench.add("T-skip", "cli", "# Plan the offsite", None).await;

    let analyzer = bench.analyzer();
    let cases = [
        (
            &go,
            Verdict::AwaitingGo,
            QueueStatus::AwaitingGo,
            3,
            "small",
            "high",
            "A typo in the settings label.",
        ),
        (
            &review,
            Verdict::ForReview,
            QueueStatus::ForReview,
            1,
            "large",
            "medium",
            "Touches the sync protocol.",
        ),
        (
            &skip,
            Verdict::Skip,
            QueueStatus::Skip,
            4,
            "medium",
            "low",
            "A meeting, not a code change.",
        ),
    ];
    for (task, verdict, status, priority, complexity, feasibility, summary) in cases {
        let analyzed = analyzer.analyze_one(task).await.expect("analyzed");
        match &analyzed.outcome {
            Outcome::Triaged(triage) => assert_eq!(triage.verdict, verdict),
            other => panic!("{}: {other:?}", task.task_gid),
        }
        assert_eq!(analyzed.status(), status);
        let stored = bench.task(&task.task_gid).await;
        assert_eq!(stored.status, status, "{}", task.task_gid);
        assert_eq!(stored.priority, Some(priority));
        assert_eq!(stored.complexity.as_deref(), Some(complexity));
        assert_eq!(stored.feasibility.as_deref(), Some(feasibility));
        assert_eq!(stored.analysis_summary.as_deref(), Some(summary));
        let (kind, actor, detail) = bench.last_event(&task.task_gid).await;
        assert_eq!((kind.as_str(), actor.as_str()), ("analyzed", "analyzer"));
        assert!(detail.is_some_and(|d| d.contains(summary)));
    }
    assert_eq!(bench.calls(), ["T-go", "T-review", "T-skip"]);
    // The owner's notes are kept.
    assert_eq!(
        bench.task("T-go").await.notes.as_deref(),
        Some("owner: quick one")
    );

    // The model read the task and its facts, in an empty folder of its own.
    let prompt = bench.prompt("T-go", 1);
    for expected in [
        "Title: Fix the settings label",
        "It says \"Setings\".",
        "Assignee: Owner",
        "Labels: macOS, good first issue",
        "Location: o/app",
        "Link: https://github.com/o/app/issues/12",
        "owner: quick one",
    ] {
        assert!(
            prompt.contains(expected),
            "{expected} missing from:\n{prompt}"
        );
    }
    let cwd = std::fs::read_to_string(bench.dir.join("cwd/T-go.1")).expect("cwd listing");
    let mut lines = cwd.lines();
    let folder = PathBuf::from(lines.next().expect("pwd"));
    assert!(folder.starts_with(bench.work().join("T-go")), "{cwd}");
    assert_eq!(lines.next(), None, "the folder was not empty: {cwd}");
    assert!(!folder.exists(), "the working folder is removed afterwards");
    // The raw output is kept beside it.
    let transcripts = jsonl_files(&bench.work().join("T-go"));
    assert_eq!(transcripts.len(), 1, "{transcripts:?}");
    let transcript = std::fs::read_to_string(&transcripts[0]).expect("read");
    assert!(
        transcript.contains("A typo in the settings label."),
        "{transcript}"
    );
}

fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn garbage_twice_goes_to_the_owner_with_the_error_in_the_notes() {
    let bench = Bench::new().await;
    bench.script("T-1", "I am not sure what to do here.\n");
    let task = bench
        .add(
            "T-1",
            "cli",
            "# Something vague",
            Some("owner: asked by Ana\nsecond line"),
        )
        .await;

    let analyzed = bench.analyzer().analyze_one(&task).await.expect("analyzed");
    match &analyzed.outcome {
        Outcome::Failed { error } => assert!(error.contains("no JSON answer"), "{error}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(bench.calls(), ["T-1", "T-1"], "asked exactly twice");
    let stored = bench.task("T-1").await;
    assert_eq!(stored.status, QueueStatus::ForReview);
    let notes = stored.notes.expect("notes");
    assert!(
        notes.starts_with("owner: asked by Ana\nsecond line\n[analyzer "),
        "{notes}"
    );
    assert!(notes.contains("the analysis failed 2 times"), "{notes}");
    assert!(notes.contains("no JSON answer found"), "{notes}");
    assert!(notes.contains("I am not sure"), "{notes}");
    let summary = stored.analysis_summary.expect("summary");
    assert!(summary.contains("analysis failed"), "{summary}");
    let (kind, actor, detail) = bench.last_event("T-1").await;
    assert_eq!((kind.as_str(), actor.as_str()), ("analyzed", "analyzer"));
    assert!(detail.is_some_and(|d| d.contains("analysis failed")));
    // The second ask said what was wrong with the first answer.
    let retry = bench.prompt("T-1", 2);
    assert!(
        retry.contains("Your previous answer could not be used"),
        "{retry}"
    );
    assert!(retry.contains("no JSON answer found"), "{retry}");
}

#[tokio::test]
async fn garbage_once_then_a_valid_answer_takes_the_valid_verdict() {
    let bench = Bench::new().await;
    bench.script(
        "T-1.1",
        "```json\n{\"status\": \"approved\", \"analysis_summary\": \"go\"}\n```\n",
    );
    bench.script(
        "T-1.2",
        &answer("awaiting_go", 2, "small", "high", "Clear and small."),
    );
    let task = bench.add("T-1", "cli", "# Bump the version", None).await;

    let analyzed = bench.analyzer().analyze_one(&task).await.expect("analyzed");
    match &analyzed.outcome {
        Outcome::Triaged(triage) => assert_eq!(triage.verdict, Verdict::AwaitingGo),
        other => panic!("{other:?}"),
    }
    assert_eq!(bench.calls(), ["T-1", "T-1"]);
    let stored = bench.task("T-1").await;
    assert_eq!(stored.status, QueueStatus::AwaitingGo);
    assert_eq!(stored.analysis_summary.as_deref(), Some("Clear and small."));
    assert_eq!(stored.notes, None, "nothing written to the notes");
    let retry = bench.prompt("T-1", 2);
    assert!(retry.contains("`status` is \"approved\""), "{retry}");
}

#[tokio::test]
async fn a_stopped_or_failing_agent_counts_as_a_failed_answer() {
    let bench = Bench::new().await;
    // First: silent past the no-output limit. Second: exits with an error.
    bench.script("T-1.1.sh", "sleep 30\n");
    bench.script("T-1.2.sh", "echo 'quota exceeded' >&2\nexit 3\n");
    // A failure then a valid answer.
    bench.script("T-2.1.sh", "echo 'partial'\nexit 1\n");
    bench.script(
        "T-2.2",
        &answer("for_review", 2, "medium", "medium", "Needs a decision."),
    );
    let one = bench.add("T-1", "cli", "# One", Some("keep me")).await;
    let two = bench.add("T-2", "cli", "# Two", None).await;
    let limits = Limits {
        no_output: Duration::from_millis(700),
        hard: Duration::from_secs(20),
    };
    let analyzer = bench.analyzer_with(bench.command(), limits);

    let analyzed = analyzer.analyze_one(&one).await.expect("analyzed");
    let Outcome::Failed { error } = &analyzed.outcome else {
        panic!("{analyzed:?}");
    };
    assert!(error.contains("exited with status 3"), "{error}");
    assert!(error.contains("quota exceeded"), "{error}");
    let stored = bench.task("T-1").await;
    assert_eq!(stored.status, QueueStatus::ForReview);
    let notes = stored.notes.expect("notes");
    assert!(notes.starts_with("keep me\n"), "{notes}");
    assert!(notes.contains("stopped: no output"), "{notes}");

    let analyzed = analyzer.analyze_one(&two).await.expect("analyzed");
    assert_eq!(analyzed.status(), QueueStatus::ForReview);
    assert!(
        matches!(analyzed.outcome, Outcome::Triaged(_)),
        "{analyzed:?}"
    );
    assert_eq!(bench.calls(), ["T-1", "T-1", "T-2", "T-2"]);
}

#[tokio::test]
async fn a_task_that_is_not_pending_is_not_analyzed() {
    let bench = Bench::new().await;
    bench.script(
        "default",
        &answer("awaiting_go", 2, "small", "high", "fine"),
    );
    let new = NewTask {
        task_gid: "T-1".into(),
        source: "plans".into(),
        description: "# Owner's own plan".into(),
        notes: None,
        priority: None,
        initial_status: QueueStatus::Approved,
    };
    let (task, _) = bench
        .store
        .upsert_task(&new, "plans", Utc::now())
        .await
        .expect("add");
    let error = bench.analyzer().analyze_one(&task).await.unwrap_err();
    assert!(format!("{error:#}").contains("not pending"), "{error:#}");
    assert_eq!(bench.task("T-1").await.status, QueueStatus::Approved);
    assert!(bench.calls().is_empty());
}

#[tokio::test]
async fn an_agent_that_cannot_start_stops_the_pass_and_leaves_tasks_pending() {
    let bench = Bench::new().await;
    bench.add("T-1", "cli", "# One", Some("keep")).await;
    bench.add("T-2", "cli", "# Two", None).await;
    let missing = Adapter::Command {
        argv: vec![bench
            .dir
            .join("no-such-agent")
            .to_string_lossy()
            .into_owned()],
    };
    let analyzer = bench.analyzer_with(missing, DEFAULT_LIMITS);
    let error = analyzer.analyze_pending(|_| {}).await.unwrap_err();
    assert!(
        error.downcast_ref::<AgentUnavailable>().is_some(),
        "{error:#}"
    );
    for gid in ["T-1", "T-2"] {
        let task = bench.task(gid).await;
        assert_eq!(task.status, QueueStatus::Pending, "{gid}");
        assert_eq!(task.analysis_summary, None);
    }
    assert_eq!(bench.task("T-1").await.notes.as_deref(), Some("keep"));
}

#[tokio::test]
async fn analyze_pending_leaves_no_task_pending() {
    let bench = Bench::new().await;
    bench.script(
        "default",
        &answer("awaiting_go", 3, "small", "high", "Small and clear."),
    );
    for i in 0..50 {
        let gid = format!("T-{i:02}");
        let description = if i % 5 == 0 {
            format!("# Screen {i}\n\nhttps://figma.com/file/{i}")
        } else {
            format!("# Task {i}\n\nDo thing {i}.")
        };
        bench.add(&gid, "cli", &description, None).await;
    }
    bench.script("T-07", &answer("skip", 4, "small", "low", "Not code."));
    bench.script(
        "T-08",
        &answer("for_review", 1, "large", "medium", "Risky."),
    );
    bench.script("T-09", "garbage\n");

    let mut heard: Vec<Analyzed> = Vec::new();
    let report = bench
        .analyzer()
        .analyze_pending(|analyzed| heard.push(analyzed.clone()))
        .await
        .expect("a pass");

    let pending = bench
        .store
        .tasks(Some(&QueueStatus::Pending))
        .await
        .expect("list");
    assert!(pending.is_empty(), "left pending: {pending:?}");
    assert_eq!(heard.len(), 50);
    assert_eq!(report.analyzed(), 50);
    assert_eq!(report.skipped_by_rule.get("figma"), Some(&10));
    assert_eq!(report.verdicts.awaiting_go, 37);
    assert_eq!(report.verdicts.skip, 1);
    assert_eq!(report.verdicts.for_review, 1);
    assert_eq!(report.analysis_failed, 1);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    // One call per task the rules let through, two for the garbage one; in queue order.
    let calls = bench.calls();
    assert_eq!(calls.len(), 41);
    assert!(!calls
        .iter()
        .any(|gid| gid.ends_with('0') || gid.ends_with('5')));
    let heard_gids: Vec<&str> = heard.iter().map(|a| a.gid.as_str()).collect();
    let mut sorted = heard_gids.clone();
    sorted.sort_unstable();
    assert_eq!(heard_gids, sorted, "oldest first");

    // A second pass finds nothing to do.
    let again = bench
        .analyzer()
        .analyze_pending(|_| {})
        .await
        .expect("a pass");
    assert_eq!(again.analyzed(), 0);
    assert_eq!(bench.calls().len(), 41);
}

/// The real Claude Code CLI, offline against the scripted model server: the analyzer's
/// command line (no tools, `--json-schema`) is one the CLI accepts, and an answer in a
/// fenced block is read when the model does not use the structured output.
#[tokio::test]
async fn claude_code_is_asked_with_no_tools_and_a_schema() {
    let Some(cli) = crate::real_agents::agent_cli("claude") else {
        return;
    };
    let reply = answer("awaiting_go", 2, "small", "high", "Clear and small.");
    // Claude Code asks once more for the structured output when the model answers in text.
    let server = ModelServer::start(vec![Turn::text(reply.clone()), Turn::text(reply)]);
    let bench = Bench::new().await;
    let home = bench.dir.join("home");
    let config = bench.dir.join("claude-config");
    let tmp = bench.dir.join("tmp");
    for dir in [&home, &config, &tmp] {
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    let mut env = Bench::env();
    env.insert("HOME".into(), home.to_string_lossy().into_owned());
    env.insert(
        "CLAUDE_CONFIG_DIR".into(),
        config.to_string_lossy().into_owned(),
    );
    env.insert("TMPDIR".into(), tmp.to_string_lossy().into_owned());
    for (key, value) in server.claude_env() {
        env.insert(key.to_string(), value);
    }
    let spec: FilterSpec = toml::from_str(RULES).expect("rules parse");
    let analyzer = Analyzer::new(
        bench.store.clone(),
        Adapter::Claude { program: cli },
        Filters::compile(&spec).expect("rules compile"),
        PromptTemplate::builtin().expect("prompt"),
        Limits {
            no_output: Duration::from_secs(60),
            hard: Duration::from_secs(120),
        },
        Duration::from_secs(1),
        bench.work(),
        env,
    );
    let task = bench
        .add("T-1", "cli", "# Fix the settings label\n\nA typo.", None)
        .await;

    let analyzed = analyzer.analyze_one(&task).await.expect("analyzed");
    assert_eq!(
        analyzed.status(),
        QueueStatus::AwaitingGo,
        "{analyzed:?}\n{}",
        std::fs::read_to_string(&jsonl_files(&bench.work().join("T-1"))[0]).unwrap_or_default()
    );
    let stored = bench.task("T-1").await;
    assert_eq!(stored.analysis_summary.as_deref(), Some("Clear and small."));

    let requests = server.model_requests();
    let first = requests.first().expect("the model was asked");
    let tools: Vec<&str> = first.body["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(tools.contains(&"StructuredOutput"), "{tools:?}");
    assert!(!tools.contains(&"Bash"), "no tools: {tools:?}");
    let schema = tools
        .iter()
        .position(|t| *t == "StructuredOutput")
        .map(|i| first.body["tools"][i]["input_schema"].clone())
        .expect("schema");
    assert_eq!(schema["properties"]["status"]["enum"][1], "awaiting_go");
    assert!(first
        .user_texts()
        .iter()
        .any(|text| text.contains("Title: Fix the settings label")));
}

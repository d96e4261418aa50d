//! Every way a run ends goes through one operation (`ops::end::end_run`), and on both stores
//! that operation writes the run, its task's move, the history line and the release of the
//! lease together, or nothing: the same answers for every origin, every outcome.

use chrono::{DateTime, Duration, TimeZone, Utc};
use executor::core::clock::ManualClock;
use executor::core::ending::{Origin, Outcome};
use executor::core::lifecycle::Stage;
use executor::core::queue::QueueStatus;
use executor::core::record::{NewEvent, StatusChange};
use executor::core::run::RunState;
use executor::core::task::NewTask;
use executor::ops::end::{end_run, Ending};
use executor::store::postgres::PgStore;
use executor::store::sqlite::SqliteStore;
use executor::store::Store;

use crate::support::{conformance, PgSchema};

const RUNNER: &str = "host-a:10:1";
const OTHER: &str = "host-b:20:2";

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 3, 9, 0, 0)
        .single()
        .expect("valid time")
}

/// A task in progress with its run's worker started, leased to `RUNNER`.
async fn running(store: &dyn Store, gid: &str) -> executor::core::record::Run {
    let new = NewTask {
        task_gid: gid.to_string(),
        source: "cli".to_string(),
        description: format!("# {gid}"),
        notes: None,
        priority: None,
        initial_status: QueueStatus::Pending,
    };
    store.upsert_task(&new, "cli", t0()).await.expect("add");
    store
        .change_status(&StatusChange {
            task_gid: gid.to_string(),
            from: QueueStatus::Pending,
            to: QueueStatus::InProgress,
            event: NewEvent {
                kind: "go".to_string(),
                actor: "owner".to_string(),
                detail: None,
                at: t0(),
            },
        })
        .await
        .expect("in progress");
    let mut run = store
        .create_leased_run(gid, RUNNER, t0(), t0() + Duration::minutes(10))
        .await
        .expect("leased run");
    run.state = RunState::InProgress;
    run.worker_pid = Some(4242);
    store.save_run(&run).await.expect("its worker started");
    run
}

/// Each origin, each outcome: the run ended, the task moved with a history line naming the
/// origin's actor and the run, the lease given back; all of it as one read after.
async fn every_origin_and_outcome_lands_whole(store: &dyn Store) {
    let clock = ManualClock::new(t0() + Duration::minutes(3));
    let outcomes = [
        (Outcome::completed(), RunState::Complete, QueueStatus::Done),
        (
            Outcome::abandoned("its PR was closed without a merge"),
            RunState::Abandoned,
            QueueStatus::ForReview,
        ),
    ];
    for origin in Origin::ALL {
        for (outcome, state, status) in &outcomes {
            let gid = format!("T-{origin:?}-{state:?}");
            let mut run = running(store, &gid).await;
            let ending = Ending {
                origin,
                outcome: outcome.clone(),
                holder: Some(RUNNER),
            };
            let moved = end_run(store, &clock, &mut run, &ending)
                .await
                .unwrap_or_else(|e| panic!("{gid}: {e}"))
                .expect("the task moved");
            assert_eq!(&moved.status, status, "{gid}");

            let stored = store.run(run.id).await.expect("read").expect("there");
            assert_eq!(
                stored, run,
                "{gid}: the run as returned is the run as stored"
            );
            assert_eq!(&stored.state, state, "{gid}");
            assert_eq!(stored.worker_pid, None, "{gid}");
            let view = stored.lifecycle.expect("a lifecycle view");
            assert_eq!(
                view.stage,
                Stage::Ended {
                    complete: *state == RunState::Complete
                },
                "{gid}"
            );
            assert_eq!(view.ended_because, outcome_why(outcome), "{gid}");
            assert_eq!(
                stored.completed_at.is_some(),
                *state == RunState::Complete,
                "{gid}"
            );
            assert_eq!(store.lease(run.id).await.expect("lease"), None, "{gid}");

            let events = store.events(&gid).await.expect("events");
            let last = events.last().expect("an event");
            assert_eq!(
                (
                    last.kind.as_str(),
                    last.actor.as_str(),
                    last.to_status.as_deref(),
                    last.run_id,
                    last.detail.clone(),
                ),
                (
                    outcome.task_event().name(),
                    origin.actor(),
                    Some(status.as_str()),
                    Some(run.id),
                    outcome.detail(),
                ),
                "{gid}"
            );
        }
    }
}

fn outcome_why(outcome: &Outcome) -> Option<String> {
    match outcome {
        Outcome::Abandoned { why } => Some(why.clone()),
        Outcome::Completed { .. } => None,
    }
}

/// A run whose lease another runner took writes nothing: not the run, not the task, not a
/// history line, and the other runner keeps the lease.
async fn an_ending_without_the_lease_writes_nothing(store: &dyn Store) {
    let clock = ManualClock::new(t0() + Duration::minutes(30));
    let mut run = running(store, "T-1").await;
    store
        .take_lease(
            run.id,
            OTHER,
            t0() + Duration::minutes(20),
            t0() + Duration::minutes(40),
            None,
        )
        .await
        .expect("take")
        .expect("the lease had lapsed");
    let before = run.clone();
    let events_before = store.events("T-1").await.expect("events").len();
    for origin in Origin::ALL {
        let ending = Ending {
            origin,
            outcome: Outcome::completed(),
            holder: Some(RUNNER),
        };
        let refused = end_run(store, &clock, &mut run, &ending)
            .await
            .expect_err("fenced");
        assert!(refused.is_fenced(), "{origin:?}: {refused}");
        assert_eq!(run, before, "{origin:?}: the caller's run is as it was");
    }
    let stored = store.run(run.id).await.expect("read").expect("there");
    assert_eq!(stored.state, RunState::InProgress);
    assert_eq!(stored.completed_at, None);
    let task = store.task("T-1").await.expect("read").expect("there");
    assert_eq!(task.status, QueueStatus::InProgress);
    assert_eq!(
        store.events("T-1").await.expect("events").len(),
        events_before
    );
    assert_eq!(
        store
            .lease(run.id)
            .await
            .expect("lease")
            .map(|lease| lease.holder),
        Some(OTHER.to_string())
    );
}

/// An ending tried again (its answer lost, or a second path reaching the same end) lands
/// once: one history line, the first completion time kept, nothing moved twice.
async fn an_ending_tried_again_lands_once(store: &dyn Store) {
    let clock = ManualClock::new(t0() + Duration::minutes(3));
    let mut run = running(store, "T-1").await;
    let ending = Ending {
        origin: Origin::Pr,
        outcome: Outcome::completed(),
        holder: None,
    };
    end_run(store, &clock, &mut run, &ending)
        .await
        .expect("first")
        .expect("moved");
    let first = run.clone();
    assert_eq!(
        store.lease(run.id).await.expect("lease").map(|l| l.holder),
        Some(RUNNER.to_string()),
        "an ending without a holder keeps the lease for what it still owes"
    );

    clock.advance(Duration::minutes(2));
    let mut again = first.clone();
    let moved = end_run(
        store,
        &clock,
        &mut again,
        &Ending {
            holder: Some(RUNNER),
            ..ending
        },
    )
    .await
    .expect("again");
    assert_eq!(
        moved, None,
        "the task is done already and does not move again"
    );
    assert_eq!(again.completed_at, first.completed_at);
    assert_eq!(store.lease(run.id).await.expect("lease"), None, "released");
    let events = store.events("T-1").await.expect("events");
    assert_eq!(
        events.iter().filter(|e| e.kind == "run_completed").count(),
        1
    );

    // A PR closed after its run completed abandons the run (the run machine allows it), and
    // leaves the task where the completion put it.
    let mut late = again.clone();
    let moved = end_run(
        store,
        &clock,
        &mut late,
        &Ending {
            origin: Origin::Pr,
            outcome: Outcome::abandoned("its PR was closed"),
            holder: None,
        },
    )
    .await
    .expect("abandon after completion");
    assert_eq!(moved, None);
    assert_eq!(late.state, RunState::Abandoned);
    assert_eq!(
        store
            .task("T-1")
            .await
            .expect("read")
            .expect("there")
            .status,
        QueueStatus::Done
    );
}

/// An abandoned run cannot complete: the core refuses the move before the store is touched,
/// and the lease is kept.
async fn an_illegal_ending_is_refused_before_any_write(store: &dyn Store) {
    let clock = ManualClock::new(t0() + Duration::minutes(3));
    let mut run = running(store, "T-1").await;
    let mut abandoned = run.clone();
    end_run(
        store,
        &clock,
        &mut abandoned,
        &Ending {
            origin: Origin::Local,
            outcome: Outcome::abandoned("exited 1 without [DONE]"),
            holder: None,
        },
    )
    .await
    .expect("abandoned");
    let events = store.events("T-1").await.expect("events").len();
    run = abandoned.clone();
    let refused = end_run(
        store,
        &clock,
        &mut run,
        &Ending {
            origin: Origin::Local,
            outcome: Outcome::completed(),
            holder: Some(RUNNER),
        },
    )
    .await
    .expect_err("an abandoned run does not complete");
    assert!(!refused.is_fenced(), "{refused}");
    assert_eq!(run, abandoned);
    assert_eq!(store.events("T-1").await.expect("events").len(), events);
    assert!(store.lease(run.id).await.expect("lease").is_some());
}

conformance!(
    every_origin_and_outcome_lands_whole,
    an_ending_without_the_lease_writes_nothing,
    an_ending_tried_again_lands_once,
    an_illegal_ending_is_refused_before_any_write,
);

/// Outside the core's machines and the one operation, nothing ends a run: no other file
/// names the run's or the task's ending events, moves a run's state or stage to its end, or
/// calls the store's ending write. (Reading an event's name, to find it in a history, is
/// not an ending.)
#[test]
fn nothing_but_the_one_operation_ends_a_run() {
    const MAY_END: &[&str] = &[
        "crates/executor-core/src/run.rs",
        "crates/executor-core/src/queue.rs",
        "crates/executor-core/src/pr.rs",
        "crates/executor-core/src/lifecycle.rs",
        "crates/executor-core/src/lifecycle/pr_stage.rs",
        "crates/executor-core/src/ending.rs",
        "crates/executor-store/src/lib.rs",
        "crates/executor-store/src/sqlite.rs",
        "crates/executor-store/src/postgres.rs",
        "src/ops/end.rs",
    ];
    const ENDINGS: &[&str] = &[
        "RunEvent::Completed",
        "RunEvent::Abandoned",
        "QueueEvent::RunCompleted",
        "QueueEvent::RunAbandoned",
        "state = RunState::Complete",
        "state = RunState::Abandoned",
        "Stage::Ended",
        ".end_run(",
    ];
    let sources = crate::code_shape::sources();
    assert!(
        sources.iter().any(|(file, _)| file == "src/ops/end.rs"),
        "the scan does not see src/ops/end.rs: is it reading the workspace?"
    );
    let mut found = Vec::new();
    for (file, text) in &sources {
        if MAY_END.contains(&file.as_str()) {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            for ending in ENDINGS {
                let mut rest = line;
                while let Some(at) = rest.find(ending) {
                    let after = &rest[at + ending.len()..];
                    if !after.starts_with(".name()") {
                        found.push(format!("{file}:{}: {ending}", n + 1));
                    }
                    rest = after;
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "a run ended outside ops::end::end_run (call it instead):\n{}",
        found.join("\n")
    );
}

//! One conformance suite, run against every store backend: the same calls must give the
//! same answers on SQLite and on Postgres.

use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use executor::core::exchange::{DecidedRequest, NewExchange, RequestAnswer};
use executor::core::outbox::{NewOutgoing, OutboxBacklog, Priority};
use executor::core::queue::QueueStatus;
use executor::core::record::{
    Decision, Heartbeat, NewDecision, NewEvent, NewMessage, Resolved, StatusChange, StoredMessage,
    WorkerRecord,
};
use executor::core::run::RunState;
use executor::core::task::{Analysis, NewTask, UpsertOutcome};
use executor::core::tree::{AgentSession, TaskDependency, TaskLink};
use executor::store::postgres::PgStore;
use executor::store::sqlite::SqliteStore;
use executor::store::{Store, StoreError};

use crate::support::{conformance, PgSchema};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 9, 30, 0)
        .single()
        .expect("valid time")
}

fn new_task(gid: &str, description: &str) -> NewTask {
    NewTask {
        task_gid: gid.to_string(),
        source: "cli".to_string(),
        description: description.to_string(),
        notes: None,
        priority: None,
        initial_status: QueueStatus::Pending,
    }
}

fn change(gid: &str, from: QueueStatus, to: QueueStatus, at: DateTime<Utc>) -> StatusChange {
    StatusChange {
        task_gid: gid.to_string(),
        from,
        to,
        event: NewEvent {
            kind: "go".to_string(),
            actor: "owner".to_string(),
            detail: Some("looks right".to_string()),
            at,
        },
    }
}

async fn added_task_reads_back_with_every_column(store: &dyn Store) {
    let mut new = new_task("T-1", "# Fix tab preview\n\nIt sticks — ünïcode kept.");
    new.notes = Some("area: browser".into());
    new.priority = Some(-3);
    let (task, outcome) = store.upsert_task(&new, "cli", t0()).await.expect("add");
    assert_eq!(outcome, UpsertOutcome::Created);
    let read = store.task("T-1").await.expect("read").expect("present");
    assert_eq!(read, task);
    assert_eq!(read.task_gid, "T-1");
    assert_eq!(read.added_at, t0());
    assert_eq!(read.updated_at, t0());
    assert_eq!(read.source.as_deref(), Some("cli"));
    assert_eq!(read.description.as_deref(), Some(new.description.as_str()));
    assert_eq!(read.notes.as_deref(), Some("area: browser"));
    assert_eq!(read.status, QueueStatus::Pending);
    assert_eq!(read.priority, Some(-3));
    assert_eq!(read.executor_run_id, None);
    assert_eq!(read.title(), "Fix tab preview");
    let events = store.events("T-1").await.expect("events");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, "added");
    assert_eq!(events[0].to_status.as_deref(), Some("pending"));
    assert_eq!(events[0].actor, "cli");
    assert!(store.task("T-404").await.expect("read").is_none());
}

async fn adding_the_same_gid_updates_instead_of_duplicating(store: &dyn Store) {
    store
        .upsert_task(&new_task("T-1", "# One"), "cli", t0())
        .await
        .expect("add");
    let later = t0() + Duration::seconds(5);
    let mut again = new_task("T-1", "# One, reworded");
    again.priority = Some(1);
    again.initial_status = QueueStatus::Approved;
    let (task, outcome) = store
        .upsert_task(&again, "cli", later)
        .await
        .expect("add again");
    assert_eq!(outcome, UpsertOutcome::Updated);
    assert_eq!(task.description.as_deref(), Some("# One, reworded"));
    assert_eq!(task.priority, Some(1));
    assert_eq!(
        task.status,
        QueueStatus::Pending,
        "an update never moves the status"
    );
    assert_eq!(task.added_at, t0());
    assert_eq!(task.updated_at, later);
    assert_eq!(store.tasks(None).await.expect("list").len(), 1);
    let events = store.events("T-1").await.expect("events");
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].kind, "updated");
    assert_eq!(events[1].detail.as_deref(), Some("description, priority"));
}

async fn an_identical_upsert_writes_nothing(store: &dyn Store) {
    store
        .upsert_task(&new_task("T-1", "# Same"), "cli", t0())
        .await
        .expect("add");
    let later = t0() + Duration::seconds(5);
    let (task, outcome) = store
        .upsert_task(&new_task("T-1", "# Same"), "cli", later)
        .await
        .expect("add again");
    assert_eq!(outcome, UpsertOutcome::Unchanged);
    assert_eq!(task.updated_at, t0());
    assert_eq!(store.events("T-1").await.expect("events").len(), 1);
}

async fn a_new_task_enters_with_the_sources_initial_status(store: &dyn Store) {
    let mut new = new_task("P-1", "# From the plans folder");
    new.initial_status = QueueStatus::Approved;
    let (task, _) = store.upsert_task(&new, "plans", t0()).await.expect("add");
    assert_eq!(task.status, QueueStatus::Approved);
}

async fn status_change_is_compare_and_set_and_recorded(store: &dyn Store) {
    store
        .upsert_task(&new_task("T-1", "# A"), "cli", t0())
        .await
        .expect("add");
    let at = t0() + Duration::minutes(1);
    let task = store
        .change_status(&change(
            "T-1",
            QueueStatus::Pending,
            QueueStatus::Approved,
            at,
        ))
        .await
        .expect("go");
    assert_eq!(task.status, QueueStatus::Approved);
    assert_eq!(task.updated_at, at);

    let stale = store
        .change_status(&change("T-1", QueueStatus::Pending, QueueStatus::Skip, at))
        .await
        .expect_err("a stale `from` must not apply");
    match stale {
        StoreError::StatusConflict {
            gid,
            expected,
            actual,
        } => {
            assert_eq!(
                (gid.as_str(), expected.as_str(), actual.as_str()),
                ("T-1", "pending", "approved")
            );
        }
        other => panic!("expected a conflict, got {other}"),
    }
    let read = store.task("T-1").await.expect("read").expect("present");
    assert_eq!(read.status, QueueStatus::Approved);

    let events = store.events("T-1").await.expect("events");
    let go = events.last().expect("go recorded");
    assert_eq!(go.kind, "go");
    assert_eq!(go.from_status.as_deref(), Some("pending"));
    assert_eq!(go.to_status.as_deref(), Some("approved"));
    assert_eq!(go.actor, "owner");
    assert_eq!(go.detail.as_deref(), Some("looks right"));
    assert_eq!(go.at, at);
    assert_eq!(events.len(), 2, "the refused change left no event");
}

async fn status_change_of_an_unknown_task_is_not_found(store: &dyn Store) {
    let err = store
        .change_status(&change(
            "T-404",
            QueueStatus::Pending,
            QueueStatus::Approved,
            t0(),
        ))
        .await
        .expect_err("unknown task");
    assert!(
        matches!(err, StoreError::TaskNotFound(ref gid) if gid == "T-404"),
        "{err}"
    );
}

async fn tasks_list_in_insertion_order_and_filter_by_status(store: &dyn Store) {
    for (i, gid) in ["C", "A", "B"].iter().enumerate() {
        store
            .upsert_task(
                &new_task(gid, "# x"),
                "cli",
                t0() + Duration::seconds(i as i64),
            )
            .await
            .expect("add");
    }
    store
        .change_status(&change("A", QueueStatus::Pending, QueueStatus::Skip, t0()))
        .await
        .expect("skip");
    let all: Vec<String> = store
        .tasks(None)
        .await
        .expect("list")
        .into_iter()
        .map(|t| t.task_gid)
        .collect();
    assert_eq!(all, ["C", "A", "B"]);
    let pending: Vec<String> = store
        .tasks(Some(&QueueStatus::Pending))
        .await
        .expect("list")
        .into_iter()
        .map(|t| t.task_gid)
        .collect();
    assert_eq!(pending, ["C", "B"]);
    let skipped = store.tasks(Some(&QueueStatus::Skip)).await.expect("list");
    assert_eq!(skipped.len(), 1);
    assert!(store
        .tasks(Some(&QueueStatus::Done))
        .await
        .expect("list")
        .is_empty());
}

async fn task_pages_follow_ids_and_keep_the_filter(store: &dyn Store) {
    for n in 0..5 {
        store
            .upsert_task(&new_task(&format!("T-{n}"), "# x"), "cli", t0())
            .await
            .expect("add");
    }
    store
        .change_status(&change(
            "T-2",
            QueueStatus::Pending,
            QueueStatus::Skip,
            t0(),
        ))
        .await
        .expect("skip");
    let mut seen = Vec::new();
    let mut after = i64::MIN;
    loop {
        let page = store.tasks_page(None, after, 2).await.expect("page");
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        after = last.id;
        seen.extend(page.into_iter().map(|t| t.task_gid));
    }
    assert_eq!(seen, ["T-0", "T-1", "T-2", "T-3", "T-4"]);
    let pending = store
        .tasks_page(Some(&QueueStatus::Pending), i64::MIN, 10)
        .await
        .expect("page");
    assert_eq!(pending.len(), 4);
    let after_first = store
        .tasks_page(Some(&QueueStatus::Pending), pending[0].id, 2)
        .await
        .expect("page");
    let gids: Vec<&str> = after_first.iter().map(|t| t.task_gid.as_str()).collect();
    assert_eq!(gids, ["T-1", "T-3"]);
}

async fn a_run_is_created_queued_and_linked_to_its_task(store: &dyn Store) {
    store
        .upsert_task(&new_task("T-1", "# A"), "cli", t0())
        .await
        .expect("add");
    let run = store.create_run("T-1", t0()).await.expect("run");
    assert_eq!(run.state, RunState::Queued);
    assert_eq!(run.task_gid, "T-1");
    assert_eq!(run.started_at, Some(t0()));
    assert_eq!(run.ci_attempts, 0);
    assert_eq!(run.worker_stuck_count, 0);
    let task = store.task("T-1").await.expect("read").expect("present");
    assert_eq!(task.executor_run_id, Some(run.id));
    assert_eq!(
        store.runs(Some("T-1")).await.expect("runs"),
        vec![run.clone()]
    );
    assert_eq!(store.runs(None).await.expect("runs"), vec![run]);
    assert!(store.runs(Some("other")).await.expect("runs").is_empty());
    let err = store
        .create_run("T-404", t0())
        .await
        .expect_err("unknown task");
    assert!(matches!(err, StoreError::TaskNotFound(_)), "{err}");
}

async fn a_run_keeps_the_text_it_was_given_and_later_edits_are_listed(store: &dyn Store) {
    use executor::core::record::ChangedTask;
    for (gid, text) in [("T-1", "# A\n\nfirst"), ("T-2", "# B")] {
        store
            .upsert_task(&new_task(gid, text), "cli", t0())
            .await
            .expect("add");
    }
    let first = store.create_run("T-1", t0()).await.expect("run");
    let other = store.create_run("T-2", t0()).await.expect("run");
    assert_eq!(
        store
            .run_task_text(first.id)
            .await
            .expect("text")
            .as_deref(),
        Some("# A\n\nfirst")
    );
    assert_eq!(
        store
            .run_task_text(first.id + other.id + 100)
            .await
            .expect("text"),
        None
    );
    for gid in ["T-1", "T-2"] {
        store
            .change_status(&change(gid, QueueStatus::Pending, QueueStatus::Done, t0()))
            .await
            .expect("done");
    }
    assert!(
        store.changed_since_run().await.expect("changed").is_empty(),
        "done as they were run: nothing changed"
    );

    let later = t0() + chrono::Duration::minutes(5);
    store
        .upsert_task(&new_task("T-1", "# A\n\nsecond"), "plans", later)
        .await
        .expect("edit");
    assert_eq!(
        store
            .run_task_text(first.id)
            .await
            .expect("text")
            .as_deref(),
        Some("# A\n\nfirst"),
        "the run keeps the text it was given"
    );
    assert_eq!(
        store.changed_since_run().await.expect("changed"),
        vec![ChangedTask {
            task_gid: "T-1".into(),
            run_id: first.id,
        }]
    );

    // A fresh run is given the new text, and the task is no longer listed.
    let second = store.create_run("T-1", later).await.expect("run");
    assert_eq!(
        store
            .run_task_text(second.id)
            .await
            .expect("text")
            .as_deref(),
        Some("# A\n\nsecond")
    );
    assert!(store.changed_since_run().await.expect("changed").is_empty());
}

async fn a_saved_run_reads_back_with_every_column(store: &dyn Store) {
    store
        .upsert_task(&new_task("T-1", "# A"), "cli", t0())
        .await
        .expect("add");
    let mut run = store.create_run("T-1", t0()).await.expect("run");
    run.worktree_path = Some("/w/executor-T-1-a".into());
    run.branch_name = Some("executor/T-1-a".into());
    run.pr_url = Some("https://example.com/pr/7".into());
    run.pr_number = Some(7);
    run.thread_id = Some("run 1 · executor/T-1-a".into());
    run.updated_at = t0() + Duration::seconds(9);
    run.completed_at = Some(t0() + Duration::seconds(10));
    run.state = RunState::Complete;
    run.ci_attempts = 2;
    run.worker_session_id = Some("e7a20cf3".into());
    run.worker_last_update = Some(t0() + Duration::seconds(8));
    run.worker_pid = Some(4242);
    run.worker_stuck_count = 1;
    run.lifecycle = Some(executor::core::lifecycle::RunView {
        stage: executor::core::lifecycle::Stage::RetryDelay {
            until: t0() + Duration::seconds(30),
        },
        failed_workers: 2,
        reason: Some("exited 1 without [DONE]".into()),
        ..Default::default()
    });
    store.save_run(&run).await.expect("save");
    assert_eq!(store.runs(Some("T-1")).await.expect("runs"), vec![run]);
}

async fn a_save_lands_only_under_the_runs_current_lease_epoch(store: &dyn Store) {
    store
        .upsert_task(&new_task("T-1", "# A"), "cli", t0())
        .await
        .expect("add");
    let run = store.create_run("T-1", t0()).await.expect("run");
    let (a, b) = ("host-a:10:1", "host-b:20:2");
    let minutes = |m: i64| t0() + Duration::minutes(m);
    let first = store
        .take_lease(run.id, a, t0(), minutes(1), None)
        .await
        .expect("take")
        .expect("free");
    let mut held_by_a = run.clone();
    held_by_a.lease_epoch = first;
    held_by_a.ci_attempts = 1;
    store.save_run(&held_by_a).await.expect("a holds the lease");

    // a's lease expires; b claims the run: a new epoch.
    let second = store
        .take_lease(run.id, b, minutes(2), minutes(3), None)
        .await
        .expect("take")
        .expect("expired");
    assert!(second > first, "{second} after {first}");
    held_by_a.ci_attempts = 9;
    held_by_a.state = RunState::Abandoned;
    let refused = store.save_run(&held_by_a).await.expect_err("fenced");
    assert!(
        matches!(refused, executor::store::StoreError::Fenced { run_id } if run_id == run.id),
        "{refused}"
    );
    let stored = store.runs(Some("T-1")).await.expect("runs").remove(0);
    assert_eq!(
        (stored.ci_attempts, stored.state.clone()),
        (1, RunState::Queued),
        "nothing of a's late save landed"
    );
    assert_eq!(stored.lease_epoch, second);
    let mut held_by_b = stored;
    held_by_b.ci_attempts = 2;
    store.save_run(&held_by_b).await.expect("b holds the lease");
    // Taking a lease one holds already is a claim too: older copies are fenced.
    let third = store
        .take_lease(run.id, b, minutes(2), minutes(4), None)
        .await
        .expect("take")
        .expect("b's own");
    assert!(third > second);
    assert!(store.save_run(&held_by_b).await.is_err());
}

/// Two runners' lease holders.
const HOLDERS: (&str, &str) = ("host-a:10:1", "host-b:20:2");

/// `t0()` and `m` minutes.
fn minutes(m: i64) -> DateTime<Utc> {
    t0() + Duration::minutes(m)
}

/// The start record of a `queued` worker of run `run_id` on host `h1`, process `pid`.
fn worker_on_h1(run_id: i64, pid: i64) -> WorkerRecord {
    WorkerRecord {
        id: 0,
        run_id,
        phase: "queued".into(),
        host: "h1".into(),
        pid,
        start_time: Some(4242),
        started_at: t0(),
        ended_at: None,
        outcome: None,
    }
}

/// Adds task `gid` (pending).
async fn add_task(store: &dyn Store, gid: &str) {
    store
        .upsert_task(&new_task(gid, "# A"), "cli", t0())
        .await
        .expect("add");
}

/// A run created with its lease is leased to its creator from its first epoch: a save
/// under that epoch lands, another holder cannot take the lease before it expires.
async fn a_run_created_with_its_lease_is_its_creators(store: &dyn Store) {
    add_task(store, "T-1").await;
    let (a, b) = HOLDERS;
    let mut run = store
        .create_leased_run("T-1", a, t0(), minutes(1))
        .await
        .expect("create");
    assert_eq!(run.state, RunState::Queued);
    assert!(run.lease_epoch > 0, "a claimed run has an epoch");
    let task = store.task("T-1").await.expect("task").expect("there");
    assert_eq!(task.executor_run_id, Some(run.id));
    let lease = store.lease(run.id).await.expect("lease").expect("taken");
    assert_eq!((lease.holder.as_str(), lease.expires_at), (a, minutes(1)));
    assert_eq!(
        store.runs(Some("T-1")).await.expect("runs"),
        vec![run.clone()],
        "the run reads back with its epoch"
    );
    run.ci_attempts = 1;
    store
        .save_run(&run)
        .await
        .expect("the creator holds the lease");
    assert_eq!(
        store
            .take_lease(run.id, b, t0() + Duration::seconds(30), minutes(2), None)
            .await
            .expect("take"),
        None,
        "a live lease is not taken"
    );
    assert!(
        matches!(
            store.create_leased_run("T-404", a, t0(), minutes(1)).await,
            Err(StoreError::TaskNotFound(gid)) if gid == "T-404"
        ),
        "a run of no task is refused"
    );
}

/// A run's save with its last worker's end: both land under the lease; once the lease is
/// gone the end is still recorded (so nobody takes the worker for live) and the run's row
/// is not touched; a retried write succeeds again.
async fn a_workers_end_is_saved_with_its_run_and_survives_a_fence(store: &dyn Store) {
    use executor::core::record::WorkerEnd;
    let (a, b) = HOLDERS;
    add_task(store, "T-1").await;
    let mut run = store
        .create_leased_run("T-1", a, t0(), minutes(1))
        .await
        .expect("create");
    let worker = |pid: i64| worker_on_h1(run.id, pid);
    let first = store.record_worker(&worker(100)).await.expect("worker");
    run.ci_attempts = 1;
    let end = |id: i64, outcome: &str| WorkerEnd {
        id,
        at: minutes(0) + Duration::seconds(30),
        outcome: outcome.into(),
    };
    store
        .save_run_ending_worker(&run, &end(first, "done"))
        .await
        .expect("under the lease");
    assert_eq!(
        store.runs(Some("T-1")).await.expect("runs")[0].ci_attempts,
        1
    );
    assert!(store.open_workers("h1").await.expect("open").is_empty());
    // The same write again (a retry after a lost answer): it lands again.
    store
        .save_run_ending_worker(&run, &end(first, "later"))
        .await
        .expect("again");

    // The lease taken over: the end lands, the run's row does not.
    let second = store.record_worker(&worker(200)).await.expect("worker");
    store
        .take_lease(run.id, b, minutes(2), minutes(3), None)
        .await
        .expect("take")
        .expect("expired");
    run.ci_attempts = 9;
    let refused = store
        .save_run_ending_worker(&run, &end(second, "stopped"))
        .await
        .expect_err("fenced");
    assert!(
        matches!(refused, StoreError::Fenced { run_id } if run_id == run.id),
        "{refused}"
    );
    assert_eq!(
        store.runs(Some("T-1")).await.expect("runs")[0].ci_attempts,
        1
    );
    assert!(
        store.open_workers("h1").await.expect("open").is_empty(),
        "the fenced worker's end is recorded"
    );
}

/// A claim moves the task and creates its leased run in one write: both land, or (the
/// task moved since it was read) neither.
async fn a_claim_moves_the_task_and_creates_its_leased_run_or_writes_nothing(store: &dyn Store) {
    let (a, b) = HOLDERS;
    add_task(store, "T-1").await;
    let claim = change("T-1", QueueStatus::Pending, QueueStatus::InProgress, t0());
    let (task, run) = store
        .claim_task(&claim, a, minutes(1))
        .await
        .expect("claimed");
    assert_eq!(task.status, QueueStatus::InProgress);
    assert_eq!(
        task.executor_run_id,
        Some(run.id),
        "the task is linked to its run"
    );
    assert_eq!(run.state, RunState::Queued);
    assert_eq!(
        store.lease(run.id).await.expect("lease").map(|l| l.holder),
        Some(a.to_string())
    );
    let mut saved = run.clone();
    saved.ci_attempts = 1;
    store
        .save_run(&saved)
        .await
        .expect("the claimant holds the lease");

    // A second claim from the same read: the task moved, nothing is written.
    let refused = store
        .claim_task(&claim, b, minutes(1))
        .await
        .expect_err("moved since");
    assert!(
        matches!(refused, StoreError::StatusConflict { .. }),
        "{refused}"
    );
    assert_eq!(
        store.runs(Some("T-1")).await.expect("runs").len(),
        1,
        "no second run"
    );
    assert_eq!(
        store
            .task("T-1")
            .await
            .expect("task")
            .expect("there")
            .executor_run_id,
        Some(run.id)
    );
}

/// A run's ending write (the run, its task's move, its lease's release) is all or nothing:
/// it lands whole under the lease and from the task's status, and writes nothing when the
/// lease is gone or the task moved since.
async fn a_runs_ending_write_lands_whole_or_not_at_all(store: &dyn Store) {
    let (a, b) = HOLDERS;
    for gid in ["T-1", "T-2", "T-3"] {
        store
            .upsert_task(&new_task(gid, "# A"), "cli", t0())
            .await
            .expect("add");
        store
            .change_status(&change(
                gid,
                QueueStatus::Pending,
                QueueStatus::InProgress,
                t0(),
            ))
            .await
            .expect("in progress");
    }
    let done = |gid: &str| change(gid, QueueStatus::InProgress, QueueStatus::Done, minutes(1));
    let completed = |mut run: executor::core::record::Run| {
        run.state = RunState::Complete;
        run.completed_at = Some(minutes(1));
        run.updated_at = minutes(1);
        run
    };

    // Under the lease: the run, the task and the lease, together.
    let run = store
        .create_leased_run("T-1", a, t0(), minutes(5))
        .await
        .expect("create");
    let run = completed(run);
    let task = store
        .end_run(&run, Some(&done("T-1")), Some(a))
        .await
        .expect("settled")
        .expect("moved");
    assert_eq!(task.status, QueueStatus::Done);
    assert_eq!(
        store.runs(Some("T-1")).await.expect("runs"),
        vec![run.clone()]
    );
    assert_eq!(store.lease(run.id).await.expect("lease"), None, "released");
    let events = store.events("T-1").await.expect("events");
    let last = events.last().expect("an event");
    assert_eq!(
        (last.kind.as_str(), last.to_status.as_deref(), last.run_id),
        ("go", Some("done"), Some(run.id))
    );

    // The lease taken over: nothing of the late write lands.
    let run = store
        .create_leased_run("T-2", a, t0(), minutes(1))
        .await
        .expect("create");
    store
        .take_lease(run.id, b, minutes(2), minutes(3), None)
        .await
        .expect("take")
        .expect("expired");
    let refused = store
        .end_run(&completed(run.clone()), Some(&done("T-2")), Some(a))
        .await
        .expect_err("fenced");
    assert!(
        matches!(refused, StoreError::Fenced { run_id } if run_id == run.id),
        "{refused}"
    );
    assert_eq!(
        store
            .task("T-2")
            .await
            .expect("task")
            .expect("there")
            .status,
        QueueStatus::InProgress,
        "the task did not move"
    );
    assert_eq!(
        store.runs(Some("T-2")).await.expect("runs")[0].state,
        RunState::Queued
    );
    assert_eq!(
        store.lease(run.id).await.expect("lease").map(|l| l.holder),
        Some(b.to_string()),
        "the new holder keeps its lease"
    );

    // The task moved since it was read: nothing lands, the lease is kept.
    let run = store
        .create_leased_run("T-3", a, t0(), minutes(5))
        .await
        .expect("create");
    store
        .change_status(&change(
            "T-3",
            QueueStatus::InProgress,
            QueueStatus::ForReview,
            t0(),
        ))
        .await
        .expect("moved by the owner");
    let refused = store
        .end_run(&completed(run.clone()), Some(&done("T-3")), Some(a))
        .await
        .expect_err("conflict");
    assert!(
        matches!(refused, StoreError::StatusConflict { .. }),
        "{refused}"
    );
    assert_eq!(
        store.runs(Some("T-3")).await.expect("runs")[0].state,
        RunState::Queued
    );
    assert!(store.lease(run.id).await.expect("lease").is_some());
}

/// A worker's start record and its run's row are one write: both land under the run's
/// lease; once the lease is gone the worker is still recorded (so a recovery stops it)
/// and the run's row is not touched.
async fn a_workers_start_is_recorded_with_its_runs_row_and_survives_a_fence(store: &dyn Store) {
    store
        .upsert_task(&new_task("T-1", "# A"), "cli", t0())
        .await
        .expect("add");
    let mut run = store.create_run("T-1", t0()).await.expect("run");
    let (a, b) = ("host-a:10:1", "host-b:20:2");
    let minutes = |m: i64| t0() + Duration::minutes(m);
    run.lease_epoch = store
        .take_lease(run.id, a, t0(), minutes(1), None)
        .await
        .expect("take")
        .expect("free");
    let worker = |pid: i64| worker_on_h1(run.id, pid);
    run.worker_pid = Some(100);
    run.worker_last_update = Some(minutes(0));
    let id = store
        .record_worker_start(&worker(100), &run)
        .await
        .expect("under the lease");
    let stored = store.runs(Some("T-1")).await.expect("runs").remove(0);
    assert_eq!(stored.worker_pid, Some(100));
    let open = store.open_workers("h1").await.expect("open");
    assert_eq!(
        open.iter().map(|w| (w.id, w.pid)).collect::<Vec<_>>(),
        vec![(id, 100)]
    );

    // Another runner takes the run: the late start is fenced, its worker recorded anyway.
    store
        .take_lease(run.id, b, minutes(2), minutes(3), None)
        .await
        .expect("take")
        .expect("expired");
    run.worker_pid = Some(200);
    let refused = store
        .record_worker_start(&worker(200), &run)
        .await
        .expect_err("fenced");
    assert!(
        matches!(refused, executor::store::StoreError::Fenced { run_id } if run_id == run.id),
        "{refused}"
    );
    let stored = store.runs(Some("T-1")).await.expect("runs").remove(0);
    assert_eq!(stored.worker_pid, Some(100), "the run's row is untouched");
    let pids: Vec<i64> = store
        .open_workers("h1")
        .await
        .expect("open")
        .iter()
        .map(|w| w.pid)
        .collect();
    assert_eq!(
        pids,
        vec![100, 200],
        "the fenced worker is recorded for recovery"
    );
}

async fn workers_are_recorded_and_open_ones_listed_per_host(store: &dyn Store) {
    let worker = |run_id: i64, host: &str, pid: i64| WorkerRecord {
        id: 0,
        run_id,
        phase: "queued".into(),
        host: host.into(),
        pid,
        start_time: Some(987_654),
        started_at: t0(),
        ended_at: None,
        outcome: None,
    };
    let a = store
        .record_worker(&worker(1, "h1", 100))
        .await
        .expect("record");
    let b = store
        .record_worker(&worker(2, "h1", 200))
        .await
        .expect("record");
    store
        .record_worker(&worker(3, "h2", 300))
        .await
        .expect("record");
    store
        .end_worker(a, t0() + Duration::seconds(5), "done")
        .await
        .expect("end");
    let open = store.open_workers("h1").await.expect("open");
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].id, b);
    assert_eq!(open[0].pid, 200);
    assert_eq!(open[0].start_time, Some(987_654));
    assert_eq!(open[0].started_at, t0());
}

async fn a_workers_spend_is_recorded_and_read_back_by_task(store: &dyn Store) {
    use executor::core::spend::{Spend, TaskSpend};
    for gid in ["T-1", "T-2"] {
        store
            .upsert_task(&new_task(gid, "# A"), "cli", t0())
            .await
            .expect("add");
    }
    let first = store.create_run("T-1", t0()).await.expect("run");
    let other = store.create_run("T-2", t0()).await.expect("run");
    let worker = |run_id: i64| WorkerRecord {
        id: 0,
        run_id,
        phase: "queued".into(),
        host: "h1".into(),
        pid: 100,
        start_time: None,
        started_at: t0(),
        ended_at: None,
        outcome: None,
    };
    let claude = Spend {
        input_tokens: 200,
        output_tokens: 40,
        cached_tokens: 900,
        turns: 2,
        cost_usd: Some(0.0016),
        priced: false,
    };
    let codex = Spend {
        input_tokens: 1_000_000,
        output_tokens: 10,
        cached_tokens: 0,
        turns: 1,
        cost_usd: None,
        priced: false,
    };
    let priced = Spend {
        cost_usd: Some(1.25),
        priced: true,
        ..codex
    };
    let ids = [
        store
            .record_worker(&worker(first.id))
            .await
            .expect("record"),
        store
            .record_worker(&worker(first.id))
            .await
            .expect("record"),
        store
            .record_worker(&worker(other.id))
            .await
            .expect("record"),
        // A worker whose agent said nothing of its spend.
        store
            .record_worker(&worker(other.id))
            .await
            .expect("record"),
    ];
    let ended = t0() + Duration::seconds(5);
    for id in ids {
        store.end_worker(id, ended, "done").await.expect("end");
    }
    store
        .record_spend(ids[0], "claude", &claude)
        .await
        .expect("spend");
    store
        .record_spend(ids[1], "codex", &codex)
        .await
        .expect("spend");
    store
        .record_spend(ids[2], "codex", &priced)
        .await
        .expect("spend");

    let all = store.spend(None).await.expect("spend");
    assert_eq!(
        all.iter().map(|r| r.worker_id).collect::<Vec<_>>(),
        &ids[..3]
    );
    assert_eq!(all[0].spend, claude);
    assert_eq!(all[1].spend, codex);
    assert_eq!(all[2].spend, priced);
    assert_eq!((all[0].agent.as_str(), all[0].at), ("claude", ended));
    assert_eq!((all[2].run_id, all[2].task_gid.as_str()), (other.id, "T-2"));
    let of_first = store.spend(Some("T-1")).await.expect("spend");
    let summed = TaskSpend::of(&of_first);
    assert_eq!(summed.total.workers, 2);
    assert_eq!(summed.total.input_tokens, 1_000_200);
    assert_eq!(summed.total.unpriced_workers, 1);
    assert!((summed.total.cost_usd - 0.0016).abs() < 1e-12);
    assert_eq!(summed.by_run[&first.id], summed.total);
    assert!(store.spend(Some("T-404")).await.expect("spend").is_empty());
}

async fn outcomes_since_read_each_runs_figures(store: &dyn Store) {
    use executor::core::pr::{PrMemory, ReviewRecord};
    use executor::core::run::RunState;
    use executor::core::spend::Spend;
    let mut github = new_task("T-1", "# A");
    github.source = "github".into();
    store.upsert_task(&github, "cli", t0()).await.expect("add");
    let mut plans = new_task("T-2", "# B");
    plans.source = "plans".into();
    store.upsert_task(&plans, "cli", t0()).await.expect("add");
    store
        .save_task_facts("T-1", r#"{"labels":["bug"]}"#, t0())
        .await
        .expect("facts");
    let started = |run: &mut executor::core::record::Run, at: DateTime<Utc>, state: RunState| {
        run.started_at = Some(at);
        run.state = state;
    };
    // Before the window: left out.
    let mut old = store.create_run("T-2", t0()).await.expect("run");
    started(&mut old, t0() - Duration::days(2), RunState::Abandoned);
    store.save_run(&old).await.expect("save");
    // Merged after a fix_ci round, one escalation answered after 10 minutes.
    let mut merged = store.create_run("T-1", t0()).await.expect("run");
    started(&mut merged, t0() + Duration::minutes(1), RunState::Complete);
    merged.completed_at = Some(t0() + Duration::minutes(31));
    merged.pr_number = Some(7);
    store.save_run(&merged).await.expect("save");
    let memory = PrMemory {
        merged: true,
        review: Some(ReviewRecord {
            head_sha: "abc".into(),
            passed: true,
            posted: true,
            body: String::new(),
        }),
        ..PrMemory::default()
    };
    store
        .save_pr_memory(
            merged.id,
            &serde_json::to_string(&memory).expect("json"),
            t0(),
        )
        .await
        .expect("memory");
    for (phase, cost) in [("queued", 1.5), ("fix_ci", 0.5)] {
        let id = store
            .record_worker(&WorkerRecord {
                phase: phase.into(),
                ..worker_on_h1(merged.id, 100)
            })
            .await
            .expect("worker");
        let spend = Spend {
            input_tokens: 1,
            output_tokens: 1,
            cached_tokens: 0,
            turns: 1,
            cost_usd: Some(cost),
            priced: false,
        };
        store
            .record_spend(id, "claude", &spend)
            .await
            .expect("spend");
    }
    let mut asked = decision_for(merged.id, "needs_decision", "escalate");
    asked.at = t0() + Duration::minutes(5);
    let asked = store.record_decision(&asked).await.expect("escalate");
    store
        .resolve_escalation(
            asked.id,
            "approve",
            None,
            "owner",
            t0() + Duration::minutes(15),
        )
        .await
        .expect("answer");
    // Cancelled by the owner (kept `abandoned`), no worker; its task retried once.
    let mut abandoned = store.create_run("T-2", t0()).await.expect("run");
    started(
        &mut abandoned,
        t0() + Duration::minutes(2),
        RunState::Abandoned,
    );
    abandoned.updated_at = t0() + Duration::minutes(4);
    store.save_run(&abandoned).await.expect("save");
    let mut retried = change("T-2", QueueStatus::Pending, QueueStatus::Approved, t0());
    retried.event.kind = "retry".into();
    store.change_status(&retried).await.expect("retry");
    let mut cancelled = change(
        "T-2",
        QueueStatus::Approved,
        QueueStatus::ForReview,
        t0() + Duration::minutes(3),
    );
    cancelled.event.kind = "run_abandoned".into();
    cancelled.event.detail = Some(format!(
        "{}: not needed",
        executor::core::ending::CANCELLED_BY_OWNER
    ));
    store.change_status(&cancelled).await.expect("cancel");
    let mut went = change("T-1", QueueStatus::Pending, QueueStatus::Approved, t0());
    went.event.kind = "go".into();
    store.change_status(&went).await.expect("go");

    let outcomes = store.outcomes_since(t0(), 100).await.expect("outcomes");
    let ids: Vec<i64> = outcomes.runs.iter().map(|r| r.run_id).collect();
    assert_eq!(
        ids,
        [abandoned.id, merged.id],
        "newest first, the old one left out"
    );
    let m = &outcomes.runs[1];
    assert_eq!(m.source.as_deref(), Some("github"));
    assert_eq!(m.state, "complete");
    assert_eq!(m.pr_number, Some(7));
    assert_eq!(m.agent.as_deref(), Some("claude"));
    assert!((m.cost_usd.unwrap_or_default() - 2.0).abs() < 1e-9, "{m:?}");
    assert_eq!((m.fix_ci_workers, m.fix_comments_workers), (1, 0));
    assert_eq!(m.started_at, Some(t0() + Duration::minutes(1)));
    let a = &outcomes.runs[0];
    assert_eq!((a.agent.as_deref(), a.cost_usd), (None, None), "{a:?}");
    assert_eq!(
        outcomes.escalations,
        [(
            merged.id,
            t0() + Duration::minutes(5),
            Some(t0() + Duration::minutes(15))
        )]
    );
    assert!(a.cancelled, "the owner's cancel ended it: {a:?}");
    assert!(!m.cancelled);
    // The retry came before the run started; the cancel while it ran.
    assert_eq!(outcomes.owner_actions, [(abandoned.id, 1)]);

    // The figures of those rows.
    let figures =
        executor::core::analytics::compute(&executor::core::analytics::facts_of(&outcomes));
    let all = &figures.all;
    assert_eq!(
        (all.started, all.completed, all.abandoned, all.cancelled),
        (2, 1, 0, 1)
    );
    assert_eq!((all.funnel.pr_opened, all.funnel.merged), (1, 1));
    assert_eq!(all.clean_success, 0, "the merged run escalated");
    assert_eq!(all.time_to_complete.median_s, Some(1800.0));
    assert_eq!(all.escalation_answer.median_s, Some(600.0));
    assert_eq!(figures.by_label["bug"].started, 1);
    assert_eq!(figures.by_source["plans"].cancelled, 1);
}

async fn decisions_are_recorded_and_pending_escalations_counted(store: &dyn Store) {
    store
        .upsert_task(&new_task("T-1", "# A"), "cli", t0())
        .await
        .expect("add");
    let decision = store
        .record_decision(&NewDecision {
            task_gid: Some("T-1".into()),
            run_id: None,
            at: t0(),
            role: "worker".into(),
            action: "merge_pr".into(),
            decision: "escalate".into(),
            rule_id: Some("merge".into()),
            detail: Some("{\"pr\":1234}".into()),
            tool_use_id: None,
            message_window: None,
            confined: None,
        })
        .await
        .expect("record");
    assert_eq!(decision.decision, "escalate");
    assert_eq!(decision.resolved_at, None);
    assert_eq!(store.decisions("T-1").await.expect("list"), vec![decision]);
    assert_eq!(
        store.summary().await.expect("summary").pending_escalations,
        1
    );
}

fn decision_for(run_id: i64, action: &str, decision: &str) -> NewDecision {
    NewDecision {
        task_gid: Some("T-1".into()),
        run_id: Some(run_id),
        at: t0(),
        role: "worker".into(),
        action: action.into(),
        decision: decision.into(),
        rule_id: Some(format!("{action}-rule")),
        detail: None,
        tool_use_id: None,
        message_window: None,
        confined: None,
    }
}

async fn each_decision_keeps_whether_its_worker_was_confined(store: &dyn Store) {
    store
        .upsert_task(&new_task("T-1", "# A"), "cli", t0())
        .await
        .expect("add");
    let run = store.create_run("T-1", t0()).await.expect("run");
    let mut recorded = Vec::new();
    for confined in [Some(true), Some(false), None] {
        let mut new = decision_for(run.id, "merge_pr", "escalate");
        new.confined = confined;
        let decision = store.record_decision(&new).await.expect("record");
        assert_eq!(decision.confined, confined, "as recorded");
        recorded.push(decision);
    }
    // Every way a decision is read back carries it.
    assert_eq!(store.decisions("T-1").await.expect("list"), recorded);
    for decision in &recorded {
        assert_eq!(
            store.decision(decision.id).await.expect("read"),
            Some(decision.clone())
        );
    }
    assert_eq!(store.escalations(true).await.expect("pending"), recorded);
    assert_eq!(
        store.run_escalations(run.id).await.expect("run's"),
        recorded
    );
    // Answering an escalation leaves it as it was.
    let Some(Resolved::Recorded(answered)) = store
        .resolve_escalation(recorded[1].id, "deny", None, "cli", t0())
        .await
        .expect("resolve")
    else {
        panic!("the escalation was pending");
    };
    assert_eq!(answered.confined, Some(false));
}

async fn an_escalation_is_resolved_once_and_applied_once(store: &dyn Store) {
    store
        .upsert_task(&new_task("T-1", "# A"), "cli", t0())
        .await
        .expect("add");
    let run = store.create_run("T-1", t0()).await.expect("run");
    let other_run = store.create_run("T-1", t0()).await.expect("other run");
    let window = r#"["[STATUS:investigation] Analysing","[REQUEST:merge_pr] pr=1234"]"#;
    let mut new = decision_for(run.id, "merge_pr", "escalate");
    new.tool_use_id = Some("toolu_01ABC".into());
    new.message_window = Some(window.into());
    let escalation = store.record_decision(&new).await.expect("record");
    assert!(escalation.is_escalation() && escalation.is_pending());
    assert_eq!(escalation.tool_use_id.as_deref(), Some("toolu_01ABC"));
    assert_eq!(escalation.message_window.as_deref(), Some(window));
    assert_eq!(
        (
            &escalation.resolution,
            &escalation.resolution_note,
            &escalation.resolved_by,
            &escalation.applied_at
        ),
        (&None, &None, &None, &None)
    );
    let approved = store
        .record_decision(&decision_for(run.id, "run_tests", "approve"))
        .await
        .expect("record approve");
    assert!(!approved.is_escalation() && !approved.is_pending());
    let elsewhere = store
        .record_decision(&decision_for(other_run.id, "post_comment", "escalate"))
        .await
        .expect("record other");

    assert_eq!(
        store.decision(escalation.id).await.expect("read"),
        Some(escalation.clone())
    );
    assert_eq!(store.decision(999_999).await.expect("read"), None);
    assert_eq!(
        store.escalations(true).await.expect("pending"),
        vec![escalation.clone(), elsewhere.clone()]
    );
    assert_eq!(
        store.run_escalations(run.id).await.expect("run's"),
        vec![escalation.clone()]
    );
    assert_eq!(
        store.summary().await.expect("summary").pending_escalations,
        2
    );

    assert_eq!(
        store.answered_escalations().await.expect("answered"),
        vec![]
    );

    // Nothing to apply before the owner answers.
    let applied_at = t0() + Duration::minutes(10);
    assert!(!store
        .apply_escalation(escalation.id, applied_at)
        .await
        .expect("apply unresolved"));

    let answered_at = t0() + Duration::minutes(5);
    let first = store
        .resolve_escalation(
            escalation.id,
            "approve",
            Some("merge once CI is green"),
            "owner",
            answered_at,
        )
        .await
        .expect("resolve")
        .expect("known id");
    let Resolved::Recorded(resolved) = first else {
        panic!("the first answer must be recorded, got {first:?}");
    };
    assert_eq!(resolved.id, escalation.id);
    assert_eq!(resolved.resolution.as_deref(), Some("approve"));
    assert_eq!(
        resolved.resolution_note.as_deref(),
        Some("merge once CI is green")
    );
    assert_eq!(resolved.resolved_by.as_deref(), Some("owner"));
    assert_eq!(resolved.resolved_at, Some(answered_at));
    assert_eq!(resolved.applied_at, None);
    assert_eq!(resolved.tool_use_id.as_deref(), Some("toolu_01ABC"));
    assert!(resolved.is_escalation() && !resolved.is_pending());

    let second = store
        .resolve_escalation(
            escalation.id,
            "deny",
            None,
            "chat",
            answered_at + Duration::minutes(1),
        )
        .await
        .expect("resolve again")
        .expect("known id");
    assert_eq!(second, Resolved::AlreadyResolved(resolved.clone()));
    assert_eq!(
        store
            .resolve_escalation(approved.id, "deny", None, "owner", answered_at)
            .await
            .expect("resolve an approve"),
        Some(Resolved::NotAnEscalation(approved.clone()))
    );
    assert_eq!(
        store.decision(approved.id).await.expect("read"),
        Some(approved.clone()),
        "a decision that is no escalation stays as it was"
    );
    assert_eq!(
        store
            .resolve_escalation(999_999, "approve", None, "owner", answered_at)
            .await
            .expect("resolve unknown"),
        None
    );

    assert_eq!(
        store.escalations(true).await.expect("pending"),
        vec![elsewhere.clone()]
    );
    assert_eq!(
        store.escalations(false).await.expect("all"),
        vec![resolved.clone(), elsewhere.clone()]
    );
    assert_eq!(
        store.run_escalations(run.id).await.expect("run's"),
        vec![resolved.clone()]
    );
    assert_eq!(
        store.summary().await.expect("summary").pending_escalations,
        1
    );

    assert_eq!(
        store.answered_escalations().await.expect("answered"),
        vec![resolved.clone()],
        "answered and not yet taken up"
    );
    assert!(store
        .apply_escalation(escalation.id, applied_at)
        .await
        .expect("apply"));
    assert_eq!(
        store.answered_escalations().await.expect("answered"),
        vec![],
        "taken up"
    );
    assert!(!store
        .apply_escalation(escalation.id, applied_at + Duration::minutes(1))
        .await
        .expect("apply again"));
    assert!(!store
        .apply_escalation(elsewhere.id, applied_at)
        .await
        .expect("apply an unresolved one"));
    assert!(!store
        .apply_escalation(approved.id, applied_at)
        .await
        .expect("apply an approve"));
    assert!(!store
        .apply_escalation(999_999, applied_at)
        .await
        .expect("apply unknown"));
    let read = store
        .decision(escalation.id)
        .await
        .expect("read")
        .expect("present");
    assert_eq!(read.applied_at, Some(applied_at), "the first apply stands");
    assert_eq!(read.resolution.as_deref(), Some("approve"));
}

fn message(run_id: i64, n: usize) -> NewMessage {
    NewMessage {
        run_id,
        task_gid: "T-1".into(),
        at: t0() + Duration::seconds(n as i64),
        source: if n.is_multiple_of(2) {
            "worker"
        } else {
            "chat"
        }
        .into(),
        tag: "STATUS".into(),
        kind: "investigation".into(),
        args: format!("{{\"step\":\"{n}\"}}"),
        text: format!("step {n} — ünïcode"),
        line: format!("[STATUS:investigation] step={n} step {n} — ünïcode"),
    }
}

async fn messages_keep_a_window_of_the_runs_most_recent(store: &dyn Store) {
    let (run, other) = (7, 8);
    let mut ids = Vec::new();
    for n in 0..25 {
        ids.push(
            store
                .record_message(&message(run, n))
                .await
                .expect("record"),
        );
        if n < 3 {
            store
                .record_message(&message(other, 100 + n))
                .await
                .expect("record other");
        }
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let window = store.messages(run, 20).await.expect("window");
    assert_eq!(window.len(), 20);
    assert_eq!(
        window.iter().map(|m| m.id).collect::<Vec<_>>(),
        ids[5..].to_vec()
    );
    for (stored, n) in window.iter().zip(5..) {
        let expected = message(run, n);
        assert_eq!(stored.run_id, run);
        assert_eq!(stored.task_gid, expected.task_gid);
        assert_eq!(stored.at, expected.at);
        assert_eq!(stored.source, expected.source);
        assert_eq!(stored.tag, expected.tag);
        assert_eq!(stored.kind, expected.kind);
        assert_eq!(stored.args, expected.args);
        assert_eq!(stored.text, expected.text);
        assert_eq!(stored.line, expected.line);
    }
    let others = store.messages(other, 20).await.expect("other window");
    assert_eq!(
        others.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
        [
            "step 100 — ünïcode",
            "step 101 — ünïcode",
            "step 102 — ünïcode"
        ]
    );
    assert_eq!(store.messages(run, 0).await.expect("none").len(), 0);
    assert_eq!(store.messages(404, 20).await.expect("no run").len(), 0);
}

/// A test's decided request: the decision shows the window's ids; the answer and its
/// notice name the decision's id; `fail` makes the answer impossible to build.
struct Decides {
    window: u32,
    fail: bool,
}

impl DecidedRequest for Decides {
    fn window(&self) -> u32 {
        self.window
    }

    fn decision(&self, window: &[StoredMessage]) -> Result<NewDecision, String> {
        let ids: Vec<i64> = window.iter().map(|m| m.id).collect();
        let mut d = decision_for(window.last().map_or(0, |m| m.run_id), "push", "escalate");
        d.message_window = Some(serde_json::to_string(&ids).map_err(|e| e.to_string())?);
        Ok(d)
    }

    fn answer(&self, recorded: &Decision, _: &[StoredMessage]) -> Result<RequestAnswer, String> {
        if self.fail {
            return Err("no answer for this one".into());
        }
        let run_id = recorded.run_id.unwrap_or_default();
        let mut message = message(run_id, 99);
        message.line = format!("[STATUS:request_escalated] escalation={}", recorded.id);
        Ok(RequestAnswer {
            outgoing: vec![outgoing(
                "zulip",
                &format!("escalation {} waits", recorded.id),
                t0(),
            )],
            message,
        })
    }
}

/// Everything the store holds of a run's exchanges: its lines, the decisions, the outbox.
async fn exchanged_rows(store: &dyn Store, run_id: i64) -> (Vec<String>, usize, Vec<String>) {
    let lines = store
        .messages(run_id, 100)
        .await
        .expect("messages")
        .into_iter()
        .map(|m| m.line)
        .collect();
    let decisions = store.decisions("T-1").await.expect("decisions").len();
    (lines, decisions, outbox_bodies(store, None, false).await)
}

async fn a_workers_line_and_its_decision_land_whole_or_not_at_all(store: &dyn Store) {
    let (a, b) = HOLDERS;
    add_task(store, "T-1").await;
    let run = store
        .create_leased_run("T-1", a, t0(), minutes(5))
        .await
        .expect("create");
    let exchange = |n: usize, request: Option<Decides>, epoch: i64| NewExchange {
        lease_epoch: epoch,
        message: message(run.id, n),
        outgoing: vec![outgoing("zulip", &format!("line {n}"), t0())],
        request: request.map(|r| Arc::new(r) as Arc<dyn DecidedRequest>),
        retry: false,
    };

    // A line alone: the line and its notice.
    let plain = store
        .record_exchange(exchange(0, None, run.lease_epoch))
        .await
        .expect("a line");
    assert_eq!(plain.request, None);
    assert_eq!(plain.outbox_ids.len(), 1);
    let (lines, decisions, outbox) = exchanged_rows(store, run.id).await;
    assert_eq!((lines.len(), decisions), (1, 0));
    assert_eq!(outbox, ["line 0"]);

    // A request whose answer cannot be built: nothing of it, not even its line.
    let failed = store
        .record_exchange(exchange(
            1,
            Some(Decides {
                window: 5,
                fail: true,
            }),
            run.lease_epoch,
        ))
        .await;
    assert!(
        matches!(failed, Err(StoreError::Exchange { run_id, .. }) if run_id == run.id),
        "{failed:?}"
    );
    assert_eq!(
        exchanged_rows(store, run.id).await,
        (lines.clone(), 0, outbox.clone())
    );

    // Tried again, it lands once: the line, its notice, the decision that saw the line,
    // the decision's notice and the answer naming the decision, in that order.
    let landed = store
        .record_exchange(exchange(
            1,
            Some(Decides {
                window: 5,
                fail: false,
            }),
            run.lease_epoch,
        ))
        .await
        .expect("a request");
    let (recorded, window) = landed.request.clone().expect("decided");
    assert_eq!(
        window.iter().map(|m| m.id).collect::<Vec<_>>(),
        [lines_ids(store, run.id).await[0], landed.message_id]
    );
    assert_eq!(
        store.decision(recorded.id).await.expect("read"),
        Some(recorded.clone())
    );
    assert_eq!(
        recorded.message_window.as_deref(),
        Some(
            serde_json::to_string(&[window[0].id, window[1].id])
                .expect("json")
                .as_str()
        )
    );
    assert_eq!(landed.outbox_ids.len(), 2);
    assert!(landed.outbox_ids[0] < landed.outbox_ids[1]);
    let (lines, decisions, outbox) = exchanged_rows(store, run.id).await;
    assert_eq!(decisions, 1);
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[1], message(run.id, 1).line);
    assert_eq!(
        lines[2],
        format!("[STATUS:request_escalated] escalation={}", recorded.id)
    );
    assert_eq!(
        outbox,
        [
            "line 0".to_string(),
            "line 1".to_string(),
            format!("escalation {} waits", recorded.id)
        ]
    );

    // A try after one whose answer was lost (it had landed): nothing is written again.
    let mut again = exchange(
        1,
        Some(Decides {
            window: 5,
            fail: false,
        }),
        run.lease_epoch,
    );
    again.retry = true;
    let again = store.record_exchange(again).await.expect("a retry");
    assert!(again.landed_before, "{again:?}");
    assert_eq!(again.message_id, landed.message_id);
    assert_eq!(
        exchanged_rows(store, run.id).await,
        (lines.clone(), 1, outbox.clone())
    );
    // A retry of a line that never landed writes it.
    let mut first_try = exchange(3, None, run.lease_epoch);
    first_try.retry = true;
    let written = store
        .record_exchange(first_try)
        .await
        .expect("a retried line");
    assert!(!written.landed_before);
    let (lines, _, outbox) = exchanged_rows(store, run.id).await;
    assert_eq!(lines.last(), Some(&message(run.id, 3).line));

    // Once another runner took the run over, the first one's lines land no more.
    store
        .take_lease(run.id, b, minutes(6), minutes(9), None)
        .await
        .expect("take")
        .expect("taken");
    let late = store
        .record_exchange(exchange(
            2,
            Some(Decides {
                window: 5,
                fail: false,
            }),
            run.lease_epoch,
        ))
        .await;
    assert!(
        matches!(late, Err(StoreError::Fenced { run_id }) if run_id == run.id),
        "{late:?}"
    );
    assert_eq!(exchanged_rows(store, run.id).await, (lines, 1, outbox));
    let unknown = store
        .record_exchange(NewExchange {
            lease_epoch: 0,
            message: message(404, 0),
            outgoing: Vec::new(),
            request: None,
            retry: false,
        })
        .await;
    assert!(
        matches!(unknown, Err(StoreError::Fenced { run_id: 404 })),
        "{unknown:?}"
    );
}

async fn lines_ids(store: &dyn Store, run_id: i64) -> Vec<i64> {
    store
        .messages(run_id, 100)
        .await
        .expect("messages")
        .into_iter()
        .map(|m| m.id)
        .collect()
}

async fn intake_errors_are_refreshed_and_retained(store: &dyn Store) {
    store
        .report_intake_error("plans", "/p/a.md", "empty", t0())
        .await
        .expect("report");
    store
        .report_intake_error("plans", "/p/b.md", "bad YAML", t0())
        .await
        .expect("report");
    let later = t0() + Duration::seconds(30);
    store
        .report_intake_error("plans", "/p/a.md", "not UTF-8", later)
        .await
        .expect("report again");
    let errors = store.intake_errors().await.expect("list");
    assert_eq!(errors.len(), 2);
    assert_eq!(errors[0].path, "/p/a.md");
    assert_eq!(errors[0].reason, "not UTF-8");
    assert_eq!(errors[0].first_seen, t0());
    assert_eq!(errors[0].last_seen, later);
    store
        .retain_intake_errors("plans", &["/p/b.md".to_string()])
        .await
        .expect("retain");
    let errors = store.intake_errors().await.expect("list");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].path, "/p/b.md");
    store
        .retain_intake_errors("plans", &[])
        .await
        .expect("retain none");
    assert!(store.intake_errors().await.expect("list").is_empty());
}

async fn heartbeats_are_replaced_per_component_and_host(store: &dyn Store) {
    let mut beat = Heartbeat {
        component: "daemon".into(),
        host: "h1".into(),
        pid: 42,
        started_at: t0(),
        beat_at: t0(),
        stopped_at: None,
    };
    store.beat(&beat).await.expect("beat");
    beat.beat_at = t0() + Duration::seconds(5);
    beat.stopped_at = Some(beat.beat_at);
    store.beat(&beat).await.expect("beat again");
    let summary = store.summary().await.expect("summary");
    assert_eq!(summary.heartbeats, vec![beat]);
}

async fn a_components_last_error_is_counted_and_cleared_by_its_next_start(store: &dyn Store) {
    let mut beat = Heartbeat {
        component: "daemon".into(),
        host: "h1".into(),
        pid: 42,
        started_at: t0(),
        beat_at: t0(),
        stopped_at: None,
    };
    store.beat(&beat).await.expect("beat");
    for (n, message) in ["first failure", "second failure"].iter().enumerate() {
        let at = t0() + Duration::seconds(n as i64 + 1);
        store
            .record_component_error("daemon", "h1", message, at)
            .await
            .expect("record the error");
    }
    // A component that never started has no row to carry an error.
    store
        .record_component_error("analyzer", "h1", "nobody", t0())
        .await
        .expect("an error of a component without a heartbeat");
    let errors = store.summary().await.expect("summary").component_errors;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        (errors[0].message.as_str(), errors[0].count, errors[0].at),
        ("second failure", 2, t0() + Duration::seconds(2))
    );
    // Beating on keeps it; a new start clears it.
    beat.beat_at = t0() + Duration::seconds(5);
    store.beat(&beat).await.expect("beat on");
    assert_eq!(
        store
            .summary()
            .await
            .expect("summary")
            .component_errors
            .len(),
        1
    );
    beat.started_at = t0() + Duration::seconds(60);
    beat.beat_at = beat.started_at;
    store.beat(&beat).await.expect("a new start");
    assert!(store
        .summary()
        .await
        .expect("summary")
        .component_errors
        .is_empty());
}

async fn an_agents_pause_is_extended_while_in_force_and_new_once_ended(store: &dyn Store) {
    use executor::core::usage_limit::AgentPause;
    let pause = |since: DateTime<Utc>, minutes: i64, reason: &str, run_id: i64| AgentPause {
        agent: "claude".into(),
        since,
        until: since + Duration::minutes(minutes),
        reason: reason.into(),
        run_id: Some(run_id),
        task_gid: Some(format!("T-{run_id}")),
    };
    assert!(store.agent_pauses().await.expect("pauses").is_empty());
    // Sub-second times survive as Postgres keeps them (microseconds).
    let first = pause(t0() + Duration::nanoseconds(123_456_789), 60, "first", 1);
    assert!(
        store.pause_agent(&first).await.expect("pause"),
        "a new pause"
    );
    // Met again while in force: extended, not new, its start and reason kept.
    let again = pause(t0() + Duration::minutes(10), 90, "again", 2);
    assert!(!store.pause_agent(&again).await.expect("pause"));
    // A shorter one never shortens it.
    let shorter = pause(t0() + Duration::minutes(20), 5, "shorter", 3);
    assert!(!store.pause_agent(&shorter).await.expect("pause"));
    let other = AgentPause {
        agent: "codex".into(),
        ..pause(t0(), 30, "codex's", 4)
    };
    assert!(store.pause_agent(&other).await.expect("pause"));
    let stored = store.agent_pauses().await.expect("pauses");
    assert_eq!(stored.len(), 2, "{stored:?}");
    let claude = &stored[0];
    assert_eq!(claude.agent, "claude");
    assert_eq!(
        claude.since.timestamp_micros(),
        first.since.timestamp_micros()
    );
    assert_eq!(claude.until, again.until);
    assert_eq!(
        (
            claude.reason.as_str(),
            claude.run_id,
            claude.task_gid.as_deref()
        ),
        ("first", Some(1), Some("T-1"))
    );
    assert_eq!(stored[1].agent, "codex");
    // Once it ended, the next limit begins a new pause.
    let later = pause(again.until + Duration::minutes(1), 30, "later", 5);
    assert!(
        store.pause_agent(&later).await.expect("pause"),
        "a new pause"
    );
    let stored = store.agent_pauses().await.expect("pauses");
    assert_eq!(
        (stored[0].reason.as_str(), stored[0].until),
        ("later", later.until)
    );
}

async fn a_services_pause_is_its_latest_answer_and_read_only_while_in_force(store: &dyn Store) {
    use executor::store::ServicePause;
    let gitea = "gitea http://127.0.0.1:3000/api/v1/";
    let pause = |service: &str, since: DateTime<Utc>, seconds: i64| ServicePause {
        service: service.into(),
        // Sub-second times survive as Postgres keeps them (microseconds).
        since: since + Duration::microseconds(250_001),
        until: since + Duration::seconds(seconds),
    };
    assert!(store.service_pauses(t0()).await.expect("pauses").is_empty());
    let first = pause(gitea, t0(), 30);
    store.pause_service(&first).await.expect("pause");
    store
        .pause_service(&pause("github https://api.github.com/", t0(), 5))
        .await
        .expect("pause");
    assert_eq!(
        store
            .service_pauses(t0() + Duration::seconds(4))
            .await
            .expect("pauses")
            .iter()
            .map(|p| p.service.as_str())
            .collect::<Vec<_>>(),
        vec![gitea, "github https://api.github.com/"],
        "both in force, by name"
    );
    assert_eq!(
        store
            .service_pauses(t0() + Duration::seconds(5))
            .await
            .expect("pauses"),
        vec![first.clone()],
        "an ended pause is not read"
    );
    // The latest answer replaces the last, shorter or not.
    let shorter = pause(gitea, t0() + Duration::seconds(1), 3);
    store.pause_service(&shorter).await.expect("pause");
    assert_eq!(
        store.service_pauses(t0()).await.expect("pauses")[0],
        shorter
    );
    // Past both: the shortened Gitea pause and GitHub's.
    assert!(store
        .service_pauses(t0() + Duration::seconds(5))
        .await
        .expect("pauses")
        .is_empty());
    assert_eq!(
        store
            .service_pauses(shorter.until - Duration::microseconds(1))
            .await
            .expect("pauses")
            .len(),
        2,
        "the shortened pause holds to its own end"
    );
}

async fn a_runs_network_refusals_add_up_per_host_and_port_with_one_history_entry(
    store: &dyn Store,
) {
    use executor::core::net_refusals::{NetRefusal, Refused};
    use executor::store::NetRefusalEvent;
    store
        .upsert_task(&new_task("T-1", "# a"), "cli", t0())
        .await
        .expect("add");
    let run = store.create_run("T-1", t0()).await.expect("run");
    let row = |host: &str, port: u16, count: u64, first: i64, last: i64| NetRefusal {
        run_id: run.id,
        task_gid: "T-1".into(),
        host: host.into(),
        port,
        kind: Refused::NotAllowed,
        count,
        // Sub-second times survive as Postgres keeps them (microseconds).
        first_at: t0() + Duration::seconds(first) + Duration::microseconds(250),
        last_at: t0() + Duration::seconds(last),
    };
    let told = NetRefusalEvent {
        task_gid: "T-1".into(),
        run_id: run.id,
        event: NewEvent {
            kind: "net_refused".into(),
            actor: "runner".into(),
            detail: Some("CONNECT example.org:443 (3 times)".into()),
            at: t0() + Duration::seconds(1),
        },
    };
    store
        .record_net_refusals(&[row("example.org", 443, 3, 0, 1)], Some(&told))
        .await
        .expect("first write");
    // A later write of the same worker, and one of another worker that began earlier.
    store
        .record_net_refusals(
            &[row("example.org", 443, 7, 2, 9), row("::1", 5432, 1, 3, 3)],
            None,
        )
        .await
        .expect("second write");
    store
        .record_net_refusals(&[row("example.org", 443, 1, -5, -5)], None)
        .await
        .expect("third write");
    let stored = store.net_refusals("T-1").await.expect("read");
    assert_eq!(stored.len(), 2, "{stored:?}");
    let example = stored
        .iter()
        .find(|r| r.host == "example.org")
        .expect("example.org");
    assert_eq!((example.port, example.count), (443, 11));
    assert_eq!(example.first_at, row("", 0, 0, -5, 0).first_at);
    assert_eq!(example.last_at, row("", 0, 0, 0, 9).last_at);
    assert_eq!(example.kind, Refused::NotAllowed);
    assert!(store.net_refusals("T-2").await.expect("read").is_empty());
    let events = store.events("T-1").await.expect("events");
    let refused: Vec<_> = events.iter().filter(|e| e.kind == "net_refused").collect();
    assert_eq!(refused.len(), 1, "one entry, with the first write only");
    assert_eq!(refused[0].run_id, Some(run.id));
    assert_eq!(
        refused[0].detail.as_deref(),
        Some("CONNECT example.org:443 (3 times)")
    );
}

async fn summary_counts_every_known_status(store: &dyn Store) {
    store
        .upsert_task(&new_task("A", "# a"), "cli", t0())
        .await
        .expect("add");
    store
        .upsert_task(&new_task("B", "# b"), "cli", t0())
        .await
        .expect("add");
    store
        .change_status(&change(
            "B",
            QueueStatus::Pending,
            QueueStatus::Approved,
            t0(),
        ))
        .await
        .expect("go");
    let summary = store.summary().await.expect("summary");
    let counts: Vec<(String, i64)> = summary
        .queue
        .iter()
        .map(|(s, n)| (s.to_string(), *n))
        .collect();
    assert_eq!(
        counts,
        [
            ("pending".to_string(), 1),
            ("for_review".to_string(), 0),
            ("awaiting_go".to_string(), 0),
            ("approved".to_string(), 1),
            ("in_progress".to_string(), 0),
            ("done".to_string(), 0),
            ("skip".to_string(), 0),
        ]
    );
    assert_eq!(summary.live_workers, 0);
    assert_eq!(summary.pending_escalations, 0);
}

/// Two processes' worth of stores on one database: the daemon and the CLI, or two hosts.
async fn concurrent_adds_of_one_gid_leave_one_task(a: &dyn Store, b: &dyn Store) {
    for n in 0..10 {
        let gid = format!("T-{n}");
        let (from_a, from_b) = (new_task(&gid, "# From a"), new_task(&gid, "# From b"));
        let (first, second) = tokio::join!(
            a.upsert_task(&from_a, "a", t0()),
            b.upsert_task(&from_b, "b", t0())
        );
        let outcomes = [first.expect("a adds").1, second.expect("b adds").1];
        assert_eq!(
            outcomes
                .iter()
                .filter(|o| **o == UpsertOutcome::Created)
                .count(),
            1,
            "{gid}: {outcomes:?}"
        );
    }
    assert_eq!(a.tasks(None).await.expect("list").len(), 10);
    assert_eq!(b.tasks(None).await.expect("list").len(), 10);
}

async fn competing_status_changes_apply_exactly_once(a: &dyn Store, b: &dyn Store) {
    for n in 0..10 {
        let gid = format!("T-{n}");
        a.upsert_task(&new_task(&gid, "# x"), "cli", t0())
            .await
            .expect("add");
        let to_approved = change(&gid, QueueStatus::Pending, QueueStatus::Approved, t0());
        let to_skip = change(&gid, QueueStatus::Pending, QueueStatus::Skip, t0());
        let (go, skip) = tokio::join!(a.change_status(&to_approved), b.change_status(&to_skip));
        let winner = match (go, skip) {
            (Ok(task), Err(StoreError::StatusConflict { .. })) => task.status,
            (Err(StoreError::StatusConflict { .. }), Ok(task)) => task.status,
            (go, skip) => panic!("{gid}: exactly one change must apply, got {go:?} and {skip:?}"),
        };
        let stored = b.task(&gid).await.expect("read").expect("present");
        assert_eq!(stored.status, winner);
        assert_eq!(
            a.events(&gid).await.expect("events").len(),
            2,
            "{gid}: added + one move"
        );
    }
}

async fn competing_answers_to_an_escalation_record_exactly_one(a: &dyn Store, b: &dyn Store) {
    a.upsert_task(&new_task("T-1", "# x"), "cli", t0())
        .await
        .expect("add");
    let run = a.create_run("T-1", t0()).await.expect("run");
    for n in 0..10 {
        let escalation = a
            .record_decision(&decision_for(run.id, "merge_pr", "escalate"))
            .await
            .expect("record");
        let at = t0() + Duration::minutes(n);
        let (approve, deny) = tokio::join!(
            a.resolve_escalation(escalation.id, "approve", Some("ok"), "owner", at),
            b.resolve_escalation(escalation.id, "deny", None, "chat", at)
        );
        let (approve, deny) = (
            approve.expect("approve").expect("known id"),
            deny.expect("deny").expect("known id"),
        );
        let winner = match (&approve, &deny) {
            (Resolved::Recorded(won), Resolved::AlreadyResolved(seen))
            | (Resolved::AlreadyResolved(seen), Resolved::Recorded(won)) => {
                assert_eq!(seen, won, "{n}: the loser sees the winner's answer");
                won.clone()
            }
            _ => panic!("{n}: exactly one answer must be recorded, got {approve:?} and {deny:?}"),
        };
        let stored = b
            .decision(escalation.id)
            .await
            .expect("read")
            .expect("present");
        assert_eq!(stored, winner);
        let expected = if matches!(approve, Resolved::Recorded(_)) {
            ("approve", Some("ok"), "owner")
        } else {
            ("deny", None, "chat")
        };
        assert_eq!(
            (
                stored.resolution.as_deref(),
                stored.resolution_note.as_deref(),
                stored.resolved_by.as_deref()
            ),
            (Some(expected.0), expected.1, Some(expected.2))
        );
        let (first, second) = tokio::join!(
            a.apply_escalation(escalation.id, at),
            b.apply_escalation(escalation.id, at)
        );
        assert!(
            first.expect("apply a") ^ second.expect("apply b"),
            "{n}: applied exactly once"
        );
    }
    assert!(a.escalations(true).await.expect("pending").is_empty());
}

async fn a_run_lease_is_taken_once_renewed_expired_and_released(store: &dyn Store) {
    let (a, b) = ("host-a:10:1", "host-b:20:2");
    let minutes = |m: i64| t0() + chrono::Duration::minutes(m);
    assert_eq!(store.lease(1).await.expect("read"), None);
    assert!(store
        .take_lease(1, a, t0(), minutes(1), None)
        .await
        .expect("take")
        .is_some());
    assert!(
        store
            .take_lease(1, b, t0(), minutes(1), None)
            .await
            .expect("take")
            .is_none(),
        "held by a, not expired"
    );
    assert!(
        store
            .take_lease(1, a, t0(), minutes(2), None)
            .await
            .expect("take")
            .is_some(),
        "a holds it already"
    );
    let lease = store.lease(1).await.expect("read").expect("a lease");
    assert_eq!(lease.holder, a);
    assert_eq!(lease.expires_at, minutes(2));

    assert_eq!(store.renew_leases(a, minutes(5)).await.expect("renew"), [1]);
    assert!(store
        .renew_leases(b, minutes(9))
        .await
        .expect("renew")
        .is_empty());
    assert!(
        store
            .take_lease(1, b, minutes(4), minutes(6), None)
            .await
            .expect("take")
            .is_none(),
        "renewed past minute 4"
    );
    assert!(
        store
            .take_lease(1, b, minutes(6), minutes(7), None)
            .await
            .expect("take")
            .is_some(),
        "expired at minute 5"
    );
    assert!(
        store
            .take_lease(1, a, minutes(6), minutes(7), Some(b))
            .await
            .expect("take")
            .is_some(),
        "taken over from a holder found dead"
    );

    store
        .release_lease(1, b)
        .await
        .expect("release by a non-holder does nothing");
    assert_eq!(
        store.lease(1).await.expect("read").map(|l| l.holder),
        Some(a.to_string())
    );
    store.release_lease(1, a).await.expect("release");
    assert_eq!(store.lease(1).await.expect("read"), None);
}

async fn a_runs_pr_memory_is_replaced_and_read_back(store: &dyn Store) {
    assert_eq!(store.pr_memory(3).await.expect("read"), None);
    store
        .save_pr_memory(3, r#"{"ci_attempts":1}"#, t0())
        .await
        .expect("save");
    store
        .save_pr_memory(3, r#"{"ci_attempts":2}"#, t0())
        .await
        .expect("replace");
    store
        .save_pr_memory(4, r#"{"ci_attempts":9}"#, t0())
        .await
        .expect("another run");
    assert_eq!(
        store.pr_memory(3).await.expect("read").as_deref(),
        Some(r#"{"ci_attempts":2}"#)
    );
}

async fn task_facts_are_replaced_and_the_analysis_recorded(store: &dyn Store) {
    store
        .upsert_task(&new_task("T-1", "# A"), "cli", t0())
        .await
        .expect("add");
    assert_eq!(store.task_facts("T-1").await.expect("read"), None);
    store
        .save_task_facts("T-1", r#"{"closed":false}"#, t0())
        .await
        .expect("save");
    store
        .save_task_facts("T-1", r#"{"closed":true}"#, t0())
        .await
        .expect("replace");
    assert_eq!(
        store.task_facts("T-1").await.expect("read").as_deref(),
        Some(r#"{"closed":true}"#)
    );

    let later = t0() + Duration::minutes(5);
    let analysis = Analysis {
        priority: Some(2),
        complexity: Some("small".into()),
        feasibility: Some("high".into()),
        summary: Some("A one-line fix in the tab strip.".into()),
        append_notes: None,
    };
    assert!(store
        .record_analysis("T-1", &analysis, later)
        .await
        .expect("record"));
    let task = store.task("T-1").await.expect("read").expect("present");
    assert_eq!(task.priority, Some(2));
    assert_eq!(task.complexity.as_deref(), Some("small"));
    assert_eq!(task.feasibility.as_deref(), Some("high"));
    assert_eq!(
        task.analysis_summary.as_deref(),
        Some("A one-line fix in the tab strip.")
    );
    assert_eq!(task.notes, None, "notes left as they were");
    assert_eq!(task.updated_at, later);

    // A line is added to the notes as they are, never replacing them.
    let mut noted = new_task("T-2", "# B");
    noted.notes = Some("the owner's context\n".into());
    store.upsert_task(&noted, "cli", t0()).await.expect("add");
    for line in ["first failure", "second failure"] {
        assert!(store
            .record_analysis(
                "T-2",
                &Analysis {
                    append_notes: Some(line.into()),
                    ..analysis.clone()
                },
                later,
            )
            .await
            .expect("record"));
    }
    let task = store.task("T-2").await.expect("read").expect("present");
    assert_eq!(
        task.notes.as_deref(),
        Some("the owner's context\nfirst failure\nsecond failure")
    );

    // A task that left pending meanwhile is not written.
    store
        .change_status(&change(
            "T-1",
            QueueStatus::Pending,
            QueueStatus::Approved,
            later,
        ))
        .await
        .expect("the owner's go");
    let overwritten = store
        .record_analysis(
            "T-1",
            &Analysis {
                summary: Some("late".into()),
                ..Analysis::default()
            },
            later,
        )
        .await
        .expect("record");
    assert!(!overwritten);
    let task = store.task("T-1").await.expect("read").expect("present");
    assert_eq!(
        task.analysis_summary.as_deref(),
        Some("A one-line fix in the tab strip.")
    );
    assert!(matches!(
        store
            .record_analysis("T-404", &Analysis::default(), later)
            .await,
        Err(StoreError::TaskNotFound(gid)) if gid == "T-404"
    ));
}

async fn a_sources_cursor_is_replaced_and_read_back(store: &dyn Store) {
    assert_eq!(store.source_cursor("asana").await.expect("read"), None);
    for cursor in ["2026-03-16T09:14:35.118Z", "2026-03-16T10:00:00.000Z"] {
        store
            .save_source_cursor("asana", cursor, t0())
            .await
            .expect("save");
    }
    store
        .save_source_cursor("github", "etag-1", t0())
        .await
        .expect("another source");
    assert_eq!(
        store.source_cursor("asana").await.expect("read").as_deref(),
        Some("2026-03-16T10:00:00.000Z")
    );
}

async fn competing_runners_take_a_run_lease_once(a: &dyn Store, b: &dyn Store) {
    for run in 1..=10 {
        let (x, y) = tokio::join!(
            a.take_lease(
                run,
                "host-a:1:1",
                t0(),
                t0() + chrono::Duration::minutes(1),
                None
            ),
            b.take_lease(
                run,
                "host-b:2:2",
                t0(),
                t0() + chrono::Duration::minutes(1),
                None
            ),
        );
        let (x, y) = (x.expect("a takes"), y.expect("b takes"));
        assert!(
            x.is_some() ^ y.is_some(),
            "run {run}: exactly one runner holds it ({x:?}, {y:?})"
        );
    }
}

fn outgoing(notifier: &str, body: &str, at: DateTime<Utc>) -> NewOutgoing {
    NewOutgoing {
        notifier: notifier.to_string(),
        persona: None,
        priority: Priority::Info,
        task_gid: None,
        run_id: None,
        body: body.to_string(),
        created_at: at,
    }
}

/// The bodies of the outbox, in id order.
async fn outbox_bodies(
    store: &dyn Store,
    notifier: Option<&str>,
    undelivered: bool,
) -> Vec<String> {
    store
        .outbox(notifier, undelivered, 1_000)
        .await
        .expect("outbox")
        .into_iter()
        .map(|o| o.body)
        .collect()
}

async fn the_outbox_keeps_every_column_in_enqueue_order(store: &dyn Store) {
    assert_eq!(
        store.enqueue_outgoing(&[]).await.expect("nothing"),
        Vec::<i64>::new()
    );
    let first = NewOutgoing {
        notifier: "zulip".into(),
        persona: Some("orchestrator".into()),
        priority: Priority::Urgent,
        task_gid: Some("T-1".into()),
        run_id: Some(7),
        body: "**CI failed** on #12 — ünïcode kept\n\n```\nlog\n```".into(),
        created_at: t0(),
    };
    let mut second = outgoing("webhook:ops", "two", t0() - Duration::seconds(5));
    second.priority = Priority::Action;
    let third = outgoing("zulip", "three", t0() + Duration::seconds(1));
    let ids = store
        .enqueue_outgoing(&[first.clone(), second, third])
        .await
        .expect("enqueue");
    assert_eq!(ids.len(), 3);
    assert!(ids[0] < ids[1] && ids[1] < ids[2], "{ids:?}");
    let more = store
        .enqueue_outgoing(&[outgoing("zulip", "four", t0())])
        .await
        .expect("enqueue more");
    assert!(more[0] > ids[2]);

    let all = store.outbox(None, false, 100).await.expect("outbox");
    assert_eq!(
        all.iter().map(|o| o.id).collect::<Vec<_>>(),
        [ids[0], ids[1], ids[2], more[0]]
    );
    let read = &all[0];
    assert_eq!(read.notifier, first.notifier);
    assert_eq!(read.persona, first.persona);
    assert_eq!(read.priority, Priority::Urgent);
    assert_eq!(read.task_gid.as_deref(), Some("T-1"));
    assert_eq!(read.run_id, Some(7));
    assert_eq!(read.body, first.body);
    assert_eq!(read.created_at, t0());
    assert_eq!(read.next_attempt_at, t0(), "first due when written");
    assert_eq!(read.attempts, 0);
    assert_eq!(read.delivered_at, None);
    assert_eq!(read.last_error, None);
    assert_eq!(all[1].priority, Priority::Action);
    assert_eq!(all[1].next_attempt_at, t0() - Duration::seconds(5));
    assert_eq!(all[1].persona, None);

    assert_eq!(
        outbox_bodies(store, Some("zulip"), false).await,
        [first.body.as_str(), "three", "four"]
    );
    assert_eq!(store.outbox(None, false, 2).await.expect("limit").len(), 2);
}

async fn claiming_takes_only_the_head_of_a_notifiers_line(store: &dyn Store) {
    let (holder, later) = ("host-a:1:1", t0() + Duration::minutes(1));
    assert!(store
        .claim_outgoing("zulip", holder, later, t0())
        .await
        .expect("empty")
        .is_none());
    store
        .enqueue_outgoing(&[
            outgoing("zulip", "one", t0()),
            outgoing("zulip", "two", t0()),
            outgoing("zulip", "three", t0()),
        ])
        .await
        .expect("enqueue");

    // The head, not yet due: nothing, although nothing else blocks it.
    assert!(store
        .claim_outgoing("zulip", holder, later, t0() - Duration::seconds(1))
        .await
        .expect("early")
        .is_none());
    let head = store
        .claim_outgoing("zulip", holder, later, t0())
        .await
        .expect("claim")
        .expect("the head");
    assert_eq!(head.body, "one");

    // It fails and waits a minute: the line waits with it, "two" is not handed out.
    let retry_at = t0() + Duration::minutes(1);
    store
        .outgoing_failed(head.id, "Zulip answered 502", retry_at)
        .await
        .expect("failed");
    for now in [t0(), t0() + Duration::seconds(59)] {
        assert!(
            store
                .claim_outgoing("zulip", holder, later, now)
                .await
                .expect("blocked")
                .is_none(),
            "at {now} the failed head blocks its line"
        );
    }
    let again = store
        .claim_outgoing("zulip", holder, retry_at + Duration::minutes(1), retry_at)
        .await
        .expect("claim again")
        .expect("due again");
    assert_eq!(again.id, head.id);
    assert_eq!(again.attempts, 1);
    assert_eq!(again.last_error.as_deref(), Some("Zulip answered 502"));
    assert_eq!(again.next_attempt_at, retry_at);

    // Delivered: skipped from now on; the next in line comes up.
    store
        .outgoing_delivered(head.id, retry_at)
        .await
        .expect("delivered");
    let next = store
        .claim_outgoing("zulip", holder, retry_at + Duration::minutes(1), retry_at)
        .await
        .expect("claim")
        .expect("the next");
    assert_eq!(next.body, "two");
    let delivered = store.outbox(Some("zulip"), false, 10).await.expect("all");
    assert_eq!(delivered[0].delivered_at, Some(retry_at));
    assert_eq!(delivered[0].attempts, 1, "the failure stays on record");
    assert_eq!(
        outbox_bodies(store, Some("zulip"), true).await,
        ["two", "three"]
    );
}

async fn a_live_claim_of_another_holder_blocks_an_expired_one_does_not(store: &dyn Store) {
    store
        .enqueue_outgoing(&[
            outgoing("zulip", "one", t0()),
            outgoing("zulip", "two", t0()),
        ])
        .await
        .expect("enqueue");
    let until = t0() + Duration::minutes(1);
    let a = store
        .claim_outgoing("zulip", "host-a:1:1", until, t0())
        .await
        .expect("claim")
        .expect("a takes the head");
    assert_eq!(a.body, "one");
    for now in [t0(), until - Duration::seconds(1)] {
        assert!(
            store
                .claim_outgoing("zulip", "host-b:2:2", now + Duration::minutes(1), now)
                .await
                .expect("claim")
                .is_none(),
            "a's claim is live at {now}; b gets neither the head nor the next"
        );
    }
    let renewed = store
        .claim_outgoing("zulip", "host-a:1:1", until + Duration::minutes(1), t0())
        .await
        .expect("renew")
        .expect("a may claim its own again");
    assert_eq!(renewed.id, a.id);
    // a died: once its claim runs out, b takes the same head over.
    let expired_at = until + Duration::minutes(1);
    let b = store
        .claim_outgoing(
            "zulip",
            "host-b:2:2",
            expired_at + Duration::minutes(1),
            expired_at,
        )
        .await
        .expect("claim")
        .expect("the claim expired");
    assert_eq!(b.id, a.id);
    assert!(
        store
            .claim_outgoing(
                "zulip",
                "host-a:1:1",
                expired_at + Duration::minutes(1),
                expired_at
            )
            .await
            .expect("claim")
            .is_none(),
        "now b holds it"
    );
    // A failure lets go of the claim: anyone may try once it is due.
    store
        .outgoing_failed(b.id, "timeout", expired_at)
        .await
        .expect("failed");
    let c = store
        .claim_outgoing(
            "zulip",
            "host-c:3:3",
            expired_at + Duration::minutes(1),
            expired_at,
        )
        .await
        .expect("claim")
        .expect("no claim left");
    assert_eq!((c.id, c.attempts), (a.id, 1));
}

async fn a_dead_holders_claim_is_taken_over_and_shows_who_had_it(store: &dyn Store) {
    store
        .enqueue_outgoing(&[outgoing("zulip", "one", t0())])
        .await
        .expect("enqueue");
    let until = t0() + Duration::minutes(2);
    let first = store
        .claim_outgoing("zulip", "host-a:1:1", until, t0())
        .await
        .expect("claim")
        .expect("a takes the head");
    assert_eq!((first.claimed_by, first.claimed_until), (None, None));
    // The head as inspection shows it: who claims it, and until when.
    let head = store.outbox(Some("zulip"), true, 1).await.expect("outbox");
    assert_eq!(head[0].claimed_by.as_deref(), Some("host-a:1:1"));
    assert_eq!(head[0].claimed_until, Some(until));
    // Only from the holder named: a wrong guess takes nothing.
    assert!(!store
        .take_over_outgoing(first.id, "host-a:9:9", "host-a:2:2", until)
        .await
        .expect("take over"));
    assert!(store
        .take_over_outgoing(first.id, "host-a:1:1", "host-a:2:2", until)
        .await
        .expect("take over"));
    assert!(!store
        .take_over_outgoing(first.id, "host-a:1:1", "host-a:3:3", until)
        .await
        .expect("take over"));
    // The claim is the new holder's now, long before a's would have run out; the row says
    // it was claimed and never let go.
    let row = store
        .claim_outgoing("zulip", "host-a:2:2", until, t0())
        .await
        .expect("claim")
        .expect("b holds it");
    assert_eq!(row.id, first.id);
    assert_eq!(row.claimed_by.as_deref(), Some("host-a:2:2"));
    store
        .outgoing_delivered(row.id, t0())
        .await
        .expect("delivered");
    assert!(!store
        .take_over_outgoing(first.id, "host-a:2:2", "host-a:3:3", until)
        .await
        .expect("take over"));
    let all = store
        .outbox(Some("zulip"), false, 10)
        .await
        .expect("outbox");
    assert_eq!(
        (all[0].claimed_by.clone(), all[0].claimed_until),
        (None, None)
    );
}

async fn notifiers_have_lines_of_their_own_and_a_backlog(store: &dyn Store) {
    assert_eq!(store.outbox_backlog().await.expect("backlog"), Vec::new());
    let ids = store
        .enqueue_outgoing(&[
            outgoing("zulip", "z1", t0()),
            outgoing("webhook:ops", "w1", t0() + Duration::seconds(1)),
            outgoing("zulip", "z2", t0() + Duration::seconds(2)),
            outgoing("webhook:ops", "w2", t0() + Duration::seconds(3)),
            outgoing("slack:team", "s1", t0() + Duration::seconds(4)),
        ])
        .await
        .expect("enqueue");
    let until = t0() + Duration::hours(1);
    let now = t0() + Duration::seconds(10);
    // Zulip's head fails and waits; the webhook's line goes on regardless.
    store
        .outgoing_failed(ids[0], "Zulip is down", t0() + Duration::hours(1))
        .await
        .expect("failed");
    assert!(store
        .claim_outgoing("zulip", "h", until, now)
        .await
        .expect("claim")
        .is_none());
    let w1 = store
        .claim_outgoing("webhook:ops", "h", until, now)
        .await
        .expect("claim")
        .expect("webhook head");
    assert_eq!(w1.body, "w1");
    store
        .outgoing_delivered(w1.id, now)
        .await
        .expect("delivered");
    let s1 = store
        .claim_outgoing("slack:team", "h", until, now)
        .await
        .expect("claim")
        .expect("slack head");
    store
        .outgoing_delivered(s1.id, now)
        .await
        .expect("delivered");

    assert_eq!(
        store.outbox_backlog().await.expect("backlog"),
        [
            OutboxBacklog {
                notifier: "webhook:ops".into(),
                undelivered: 1,
                oldest: Some(t0() + Duration::seconds(3)),
                attempts: 0,
                last_error: None,
            },
            OutboxBacklog {
                notifier: "zulip".into(),
                undelivered: 2,
                oldest: Some(t0()),
                attempts: 1,
                last_error: Some("Zulip is down".into()),
            },
        ]
    );
    assert_eq!(outbox_bodies(store, None, true).await, ["z1", "z2", "w2"]);
    assert_eq!(
        outbox_bodies(store, None, false).await,
        ["z1", "w1", "z2", "w2", "s1"]
    );
    assert_eq!(
        outbox_bodies(store, Some("slack:team"), true).await,
        Vec::<String>::new()
    );
}

async fn a_chat_message_is_claimed_once(store: &dyn Store) {
    assert!(store
        .claim_chat_message("zulip", "4711", t0())
        .await
        .expect("first"));
    assert!(!store
        .claim_chat_message("zulip", "4711", t0() + Duration::seconds(1))
        .await
        .expect("again"));
    assert!(store
        .claim_chat_message("slack", "4711", t0())
        .await
        .expect("another chat, same id"));
    assert!(store
        .claim_chat_message("zulip", "4712", t0())
        .await
        .expect("another id"));
    assert!(!store
        .claim_chat_message("slack", "4711", t0())
        .await
        .expect("slack again"));
    // A claim given back (its handling failed) can be taken again, once.
    store
        .release_chat_message("zulip", "4711")
        .await
        .expect("release");
    assert!(store
        .claim_chat_message("zulip", "4711", t0())
        .await
        .expect("after release"));
    assert!(!store
        .claim_chat_message("zulip", "4711", t0())
        .await
        .expect("claimed again"));
}

fn link(parent: &str, gid: &str, depth: u32, key: &str, position: u32) -> TaskLink {
    TaskLink {
        task_gid: gid.to_string(),
        parent_gid: parent.to_string(),
        depth,
        key: key.to_string(),
        position,
        created_at: t0() + Duration::seconds(i64::from(position)),
    }
}

fn edge(task_gid: &str, depends_on: &str) -> TaskDependency {
    TaskDependency {
        task_gid: task_gid.to_string(),
        depends_on: depends_on.to_string(),
    }
}

/// The gids of `parent_gid`'s children, in the store's order.
async fn child_gids(store: &dyn Store, parent_gid: &str) -> Vec<String> {
    store
        .children(parent_gid)
        .await
        .expect("children")
        .into_iter()
        .map(|l| l.task_gid)
        .collect()
}

async fn a_decomposition_reads_back_in_the_planners_order(store: &dyn Store) {
    let (a, b, c) = (
        link("G-1", "G-1.A", 1, "A", 0),
        link("G-1", "G-1.B", 1, "B", 1),
        link("G-1", "G-1.C", 1, "C", 2),
    );
    // Given out of order: the planner's position decides, not the order of the slice.
    store
        .link_children(
            "G-1",
            &[c.clone(), a.clone(), b.clone()],
            &[edge("G-1.B", "G-1.A")],
        )
        .await
        .expect("link");
    assert_eq!(
        store.children("G-1").await.expect("children"),
        [a.clone(), b.clone(), c.clone()]
    );
    assert_eq!(
        store.task_link("G-1.B").await.expect("link of B"),
        Some(b.clone())
    );
    assert_eq!(store.task_link("G-1").await.expect("the goal's link"), None);
    assert_eq!(store.dependencies("G-1.B").await.expect("B"), ["G-1.A"]);
    assert!(store.dependencies("G-1.A").await.expect("A").is_empty());
    assert!(store.dependencies("G-404").await.expect("none").is_empty());
    assert!(store.children("G-404").await.expect("none").is_empty());
    assert!(store.children("G-1.A").await.expect("a leaf").is_empty());
    assert!(
        store.link_children("G-2", &[], &[]).await.is_ok(),
        "an empty decomposition stores nothing"
    );
    assert!(store.children("G-2").await.expect("none").is_empty());
}

async fn a_decomposition_is_stored_whole_or_not_at_all(store: &dyn Store) {
    store
        .link_children(
            "G-1",
            &[
                link("G-1", "G-1.A", 1, "A", 0),
                link("G-1", "G-1.B", 1, "B", 1),
            ],
            &[edge("G-1.B", "G-1.A")],
        )
        .await
        .expect("first decomposition");

    // A second goal that reuses G-1.B: refused, and its new child and edges are not kept.
    let err = store
        .link_children(
            "G-2",
            &[
                link("G-2", "G-2.X", 1, "X", 0),
                link("G-2", "G-1.B", 1, "Y", 1),
            ],
            &[edge("G-2.X", "G-1.A"), edge("G-1.B", "G-2.X")],
        )
        .await
        .expect_err("G-1.B already has a parent");
    assert!(
        matches!(err, StoreError::AlreadyLinked(ref gid) if gid == "G-1.B"),
        "{err}"
    );
    assert!(store.children("G-2").await.expect("children").is_empty());
    assert_eq!(store.task_link("G-2.X").await.expect("link of X"), None);
    assert!(store.dependencies("G-2.X").await.expect("X").is_empty());
    assert_eq!(store.dependencies("G-1.B").await.expect("B"), ["G-1.A"]);
    assert_eq!(
        store
            .task_link("G-1.B")
            .await
            .expect("link of B")
            .map(|l| l.parent_gid),
        Some("G-1".to_string())
    );

    // Linking the same child twice in one call is refused the same way.
    let err = store
        .link_children(
            "G-3",
            &[
                link("G-3", "G-3.A", 1, "A", 0),
                link("G-3", "G-3.A", 1, "B", 1),
            ],
            &[],
        )
        .await
        .expect_err("one child twice");
    assert!(matches!(err, StoreError::AlreadyLinked(_)), "{err}");
    assert!(store.children("G-3").await.expect("children").is_empty());

    // A key used twice among siblings is refused by the schema: nothing kept either.
    store
        .link_children(
            "G-4",
            &[
                link("G-4", "G-4.A", 1, "A", 0),
                link("G-4", "G-4.B", 1, "A", 1),
            ],
            &[edge("G-4.B", "G-4.A")],
        )
        .await
        .expect_err("a key twice among siblings");
    assert!(store.children("G-4").await.expect("children").is_empty());
    assert!(store.dependencies("G-4.B").await.expect("B").is_empty());

    // What the schema cannot tell is checked before anything is written.
    for (children, edges) in [
        (vec![link("G-9", "G-5.A", 1, "A", 0)], vec![]),
        (
            vec![link("G-5", "G-5.A", 1, "A", 0)],
            vec![edge("G-1.A", "G-5.A")],
        ),
        (
            vec![link("G-5", "G-5.A", 1, "A", 0)],
            vec![edge("G-5.A", "G-5.A")],
        ),
    ] {
        let err = store
            .link_children("G-5", &children, &edges)
            .await
            .expect_err("malformed");
        assert!(
            matches!(err, StoreError::InvalidDecomposition { ref parent, .. } if parent == "G-5"),
            "{err}"
        );
    }
    assert!(store.children("G-5").await.expect("children").is_empty());
    assert!(store.children("G-9").await.expect("children").is_empty());
    assert_eq!(
        store.dependencies("G-1.A").await.expect("A"),
        Vec::<String>::new()
    );
}

async fn a_childs_children_sit_one_level_further_down(store: &dyn Store) {
    store
        .link_children(
            "G-1",
            &[
                link("G-1", "G-1.A", 1, "A", 0),
                link("G-1", "G-1.B", 1, "B", 1),
            ],
            &[],
        )
        .await
        .expect("goal");
    let (a1, a2) = (
        link("G-1.A", "G-1.A.1", 2, "A", 0),
        link("G-1.A", "G-1.A.2", 2, "B", 1),
    );
    store
        .link_children(
            "G-1.A",
            &[a2.clone(), a1.clone()],
            &[edge("G-1.A.2", "G-1.A.1")],
        )
        .await
        .expect("child");
    assert_eq!(
        store.children("G-1.A").await.expect("children"),
        [a1, a2.clone()]
    );
    assert_eq!(child_gids(store, "G-1").await, ["G-1.A", "G-1.B"]);
    let link = store
        .task_link("G-1.A.2")
        .await
        .expect("link")
        .expect("linked");
    assert_eq!((link.parent_gid.as_str(), link.depth), ("G-1.A", 2));
    assert_eq!(link, a2);
    // Keys are unique among siblings only: "A" again one level down is fine.
    assert_eq!(
        store
            .task_link("G-1.A")
            .await
            .expect("link")
            .map(|l| l.depth),
        Some(1)
    );
}

async fn unmet_dependencies_follow_the_queue_status(store: &dyn Store) {
    for gid in ["G-1.A", "G-1.B", "G-1.C"] {
        store
            .upsert_task(&new_task(gid, "# child"), "conductor", t0())
            .await
            .expect("add");
    }
    store
        .link_children(
            "G-1",
            &[
                link("G-1", "G-1.A", 1, "A", 0),
                link("G-1", "G-1.B", 1, "B", 1),
                link("G-1", "G-1.C", 1, "C", 2),
            ],
            &[
                edge("G-1.C", "G-1.Z-missing"),
                edge("G-1.C", "G-1.B"),
                edge("G-1.C", "G-1.A"),
                edge("G-1.B", "G-1.A"),
            ],
        )
        .await
        .expect("link");
    assert!(store
        .unmet_dependencies("G-1.A")
        .await
        .expect("A")
        .is_empty());
    assert_eq!(
        store.unmet_dependencies("G-1.B").await.expect("B"),
        ["G-1.A"]
    );
    assert_eq!(
        store.unmet_dependencies("G-1.C").await.expect("C"),
        ["G-1.A", "G-1.B", "G-1.Z-missing"]
    );

    let at = t0() + Duration::minutes(1);
    store
        .change_status(&change(
            "G-1.A",
            QueueStatus::Pending,
            QueueStatus::InProgress,
            at,
        ))
        .await
        .expect("start A");
    assert_eq!(
        store.unmet_dependencies("G-1.B").await.expect("B"),
        ["G-1.A"],
        "in progress is not done"
    );
    store
        .change_status(&change(
            "G-1.A",
            QueueStatus::InProgress,
            QueueStatus::Done,
            at,
        ))
        .await
        .expect("finish A");
    assert!(store
        .unmet_dependencies("G-1.B")
        .await
        .expect("B")
        .is_empty());
    assert_eq!(
        store.unmet_dependencies("G-1.C").await.expect("C"),
        ["G-1.B", "G-1.Z-missing"]
    );
    store
        .change_status(&change(
            "G-1.B",
            QueueStatus::Pending,
            QueueStatus::Skip,
            at,
        ))
        .await
        .expect("skip B");
    assert_eq!(
        store.unmet_dependencies("G-1.C").await.expect("C"),
        ["G-1.B", "G-1.Z-missing"],
        "skipped is not done"
    );
    store
        .change_status(&change("G-1.B", QueueStatus::Skip, QueueStatus::Done, at))
        .await
        .expect("finish B");
    assert_eq!(
        store.unmet_dependencies("G-1.C").await.expect("C"),
        ["G-1.Z-missing"],
        "a task missing from the queue is never done"
    );
    assert!(store
        .unmet_dependencies("G-404")
        .await
        .expect("none")
        .is_empty());
}

async fn dependencies_of_children_are_the_edges_of_one_decomposition(store: &dyn Store) {
    store
        .link_children(
            "G-1",
            &[
                link("G-1", "G-1.c", 1, "c", 0),
                link("G-1", "G-1.B", 1, "B", 1),
                link("G-1", "G-1.a", 1, "a", 2),
            ],
            &[
                edge("G-1.c", "G-1.a"),
                edge("G-1.c", "G-1.B"),
                edge("G-1.a", "G-1.B"),
                edge("G-1.c", "G-0"),
            ],
        )
        .await
        .expect("goal");
    // Edges of other decompositions (a grandchild's, another goal's) are not among them.
    store
        .link_children(
            "G-1.a",
            &[
                link("G-1.a", "G-1.a.1", 2, "A", 0),
                link("G-1.a", "G-1.a.2", 2, "B", 1),
            ],
            &[edge("G-1.a.2", "G-1.a.1")],
        )
        .await
        .expect("child");
    store
        .link_children(
            "G-2",
            &[
                link("G-2", "G-2.A", 1, "A", 0),
                link("G-2", "G-2.B", 1, "B", 1),
            ],
            &[edge("G-2.B", "G-2.A")],
        )
        .await
        .expect("another goal");
    // Sorted byte-wise, as Rust sorts strings: upper case before lower case.
    assert_eq!(
        store.dependencies_of_children("G-1").await.expect("edges"),
        [
            edge("G-1.a", "G-1.B"),
            edge("G-1.c", "G-0"),
            edge("G-1.c", "G-1.B"),
            edge("G-1.c", "G-1.a"),
        ]
    );
    assert_eq!(
        store.dependencies("G-1.c").await.expect("c"),
        ["G-0", "G-1.B", "G-1.a"]
    );
    assert_eq!(
        store
            .dependencies_of_children("G-1.a")
            .await
            .expect("edges"),
        [edge("G-1.a.2", "G-1.a.1")]
    );
    assert_eq!(
        store.dependencies_of_children("G-2").await.expect("edges"),
        [edge("G-2.B", "G-2.A")]
    );
    assert!(store
        .dependencies_of_children("G-404")
        .await
        .expect("none")
        .is_empty());
}

async fn agent_sessions_are_replaced_by_name_and_read_back(store: &dyn Store) {
    assert_eq!(store.agent_session("reviewer").await.expect("none"), None);
    let first = AgentSession {
        name: "reviewer".to_string(),
        agent: "claude".to_string(),
        session_id: "0f6c1e2a-ünï".to_string(),
        updated_at: t0(),
    };
    store.save_agent_session(&first).await.expect("save");
    assert_eq!(
        store.agent_session("reviewer").await.expect("read"),
        Some(first.clone())
    );
    let other = AgentSession {
        name: "implementer".to_string(),
        agent: "codex".to_string(),
        session_id: "thread-1".to_string(),
        updated_at: t0(),
    };
    store.save_agent_session(&other).await.expect("save other");
    let replaced = AgentSession {
        agent: "pi".to_string(),
        session_id: "s-2".to_string(),
        updated_at: t0() + Duration::minutes(3),
        ..first
    };
    store.save_agent_session(&replaced).await.expect("replace");
    assert_eq!(
        store.agent_session("reviewer").await.expect("read"),
        Some(replaced)
    );
    assert_eq!(
        store.agent_session("implementer").await.expect("read"),
        Some(other)
    );
    assert_eq!(store.agent_session("Reviewer").await.expect("none"), None);
}

/// Claims and delivers `notifier`'s messages as `holder` until none is left; the ids it
/// delivered, in the order it delivered them.
async fn deliver_all(store: &dyn Store, notifier: &str, holder: &str) -> Vec<i64> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut delivered = Vec::new();
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "{holder} never finished"
        );
        let until = t0() + Duration::minutes(5);
        match store
            .claim_outgoing(notifier, holder, until, t0())
            .await
            .expect("claim")
        {
            Some(head) => {
                store
                    .outgoing_delivered(head.id, t0())
                    .await
                    .expect("delivered");
                delivered.push(head.id);
            }
            None => {
                if store
                    .outbox(Some(notifier), true, 1)
                    .await
                    .expect("outbox")
                    .is_empty()
                {
                    return delivered;
                }
                tokio::task::yield_now().await;
            }
        }
    }
}

async fn competing_deliverers_send_each_message_once_in_order(a: &dyn Store, b: &dyn Store) {
    let items: Vec<NewOutgoing> = (0..20)
        .map(|n| outgoing("zulip", &format!("m{n}"), t0()))
        .collect();
    let ids = a.enqueue_outgoing(&items).await.expect("enqueue");
    let (by_a, by_b) = tokio::join!(
        deliver_all(a, "zulip", "host-a:1:1"),
        deliver_all(b, "zulip", "host-b:2:2"),
    );
    for (who, delivered) in [("a", &by_a), ("b", &by_b)] {
        assert!(
            delivered.windows(2).all(|w| w[0] < w[1]),
            "{who} delivered out of order: {delivered:?}"
        );
    }
    let mut all: Vec<i64> = by_a.iter().chain(&by_b).copied().collect();
    all.sort_unstable();
    assert_eq!(
        all, ids,
        "each message exactly once (a: {by_a:?}, b: {by_b:?})"
    );
    assert!(a.outbox_backlog().await.expect("backlog").is_empty());
}

async fn competing_handlers_claim_a_chat_message_once(a: &dyn Store, b: &dyn Store) {
    for n in 0..20 {
        let id = n.to_string();
        let (x, y) = tokio::join!(
            a.claim_chat_message("zulip", &id, t0()),
            b.claim_chat_message("zulip", &id, t0()),
        );
        let (x, y) = (x.expect("a claims"), y.expect("b claims"));
        assert!(x ^ y, "message {n}: exactly one handler ({x}, {y})");
    }
}

/// A webhook delivery is taken once, per source.
async fn a_webhook_delivery_is_taken_once(store: &dyn Store) {
    assert!(store
        .take_delivery("github", "d-1", t0())
        .await
        .expect("take"));
    assert!(!store
        .take_delivery("github", "d-1", t0())
        .await
        .expect("again"));
    assert!(store
        .take_delivery("github", "d-2", t0())
        .await
        .expect("another"));
    assert!(store
        .take_delivery("gitea", "d-1", t0())
        .await
        .expect("another source"));
}

/// A wake-up sent through the store reaches its listener; with nobody listening it is no
/// error. (Postgres's channel is shared by the whole database, so other tests' wake-ups may
/// come first.)
async fn a_wake_up_reaches_the_listener(store: &dyn Store) {
    use executor::store::wake::{Heard, Wake};
    store.wake(Wake::Queue).await.expect("nobody listening");
    let mut wakes = store.listen_wakes().await.expect("listen");
    store.wake(Wake::Answer).await.expect("wake");
    let heard = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            match wakes.recv().await {
                Some(Heard::Wake(Wake::Answer)) => return true,
                Some(_) => continue,
                None => return false,
            }
        }
    })
    .await;
    assert_eq!(heard.ok(), Some(true), "the answer's wake-up arrived");
}

/// A hint arrives within `limit`, or the test fails (a generous bound: this waits for an
/// event, it does not measure how fast it came).
async fn hinted(hints: &mut tokio::sync::watch::Receiver<u64>, what: &str) {
    tokio::time::timeout(std::time::Duration::from_secs(30), hints.changed())
        .await
        .unwrap_or_else(|_| panic!("no change hint after {what}"))
        .unwrap_or_else(|_| panic!("the change hints stopped before {what}"));
}

#[tokio::test]
async fn sqlite_a_write_through_another_connection_is_hinted_and_a_read_is_not() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("executor.db");
    let reader = SqliteStore::open(&path).await.expect("open the reader");
    let writer = SqliteStore::open(&path).await.expect("open the writer");
    let source = reader.change_hints().await.expect("watch");
    let mut hints = source.subscribe();
    hints.borrow_and_update();

    // Reads by either connection, and a command opening the file, are no change.
    writer.tasks(None).await.expect("read");
    reader.messages(1, 20).await.expect("read");
    drop(SqliteStore::open(&path).await.expect("open a third"));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !hints.has_changed().expect("hints live"),
        "a read hinted a change"
    );

    writer
        .upsert_task(&new_task("T-1", "# A"), "cli", t0())
        .await
        .expect("add");
    hinted(&mut hints, "a task added by another connection").await;
    hints.borrow_and_update();
    writer.record_message(&message(1, 1)).await.expect("a line");
    hinted(&mut hints, "a line written by another connection").await;
    drop(source);
    assert!(hints.changed().await.is_err(), "stopped with its source");
}

/// Waits for the notification naming `table` of `schema`. The channel is the database's:
/// other tests' schemas notify it too, so anything else is passed over.
async fn notified(listener: &mut sqlx::postgres::PgListener, schema: &str, table: &str) {
    let wanted = format!("{schema}.{table}");
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let heard = listener.recv().await.expect("a notification");
            if heard.payload() == wanted {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no notification {wanted}"));
}

#[tokio::test]
async fn postgres_a_commit_to_the_feeds_tables_notifies_the_change_channel() {
    let Some(schema) = PgSchema::create("change_hints").await else {
        return;
    };
    let store = PgStore::connect_with(schema.options())
        .await
        .expect("open Postgres");
    let mut listener = sqlx::postgres::PgListener::connect_with(store.pool())
        .await
        .expect("listen");
    listener
        .listen(executor::store::changed::CHANNEL)
        .await
        .expect("listen");
    store
        .upsert_task(&new_task("T-1", "# A"), "cli", t0())
        .await
        .expect("add");
    notified(&mut listener, &schema.name, "executor_events").await;
    store.record_message(&message(1, 1)).await.expect("a line");
    notified(&mut listener, &schema.name, "executor_messages").await;
    let decision = store
        .record_decision(&decision_for(1, "push", "escalate"))
        .await
        .expect("decide");
    notified(&mut listener, &schema.name, "executor_decisions").await;
    store
        .resolve_escalation(decision.id, "approve", None, "owner", minutes(1))
        .await
        .expect("resolve");
    notified(&mut listener, &schema.name, "executor_decisions").await;
    // And the store's own hints follow a commit.
    let source = store.change_hints().await.expect("hints");
    let mut hints = source.subscribe();
    hints.borrow_and_update();
    store.record_message(&message(1, 2)).await.expect("a line");
    hinted(&mut hints, "a line on Postgres").await;
    drop(listener);
    drop(source);
    store.pool().close().await;
    schema.drop().await;
}

macro_rules! concurrent {
    ($($case:ident),* $(,)?) => {
        mod sqlite_two_connections {
            $(
                #[tokio::test]
                async fn $case() {
                    let dir = tempfile::tempdir().expect("temp dir");
                    let path = dir.path().join("executor.db");
                    let a = super::SqliteStore::open(&path).await.expect("open a");
                    let b = super::SqliteStore::open(&path).await.expect("open b");
                    super::$case(&a, &b).await;
                }
            )*
        }
        mod postgres_two_pools {
            $(
                #[tokio::test]
                async fn $case() {
                    let Some(schema) = super::PgSchema::create(stringify!($case)).await else {
                        return;
                    };
                    let a = super::PgStore::connect_with(schema.options()).await.expect("open a");
                    let b = super::PgStore::connect_with(schema.options()).await.expect("open b");
                    super::$case(&a, &b).await;
                    a.pool().close().await;
                    b.pool().close().await;
                    schema.drop().await;
                }
            )*
        }
    };
}

concurrent!(
    concurrent_adds_of_one_gid_leave_one_task,
    competing_status_changes_apply_exactly_once,
    competing_answers_to_an_escalation_record_exactly_one,
    competing_runners_take_a_run_lease_once,
    competing_deliverers_send_each_message_once_in_order,
    competing_handlers_claim_a_chat_message_once,
);

conformance!(
    added_task_reads_back_with_every_column,
    a_wake_up_reaches_the_listener,
    a_webhook_delivery_is_taken_once,
    adding_the_same_gid_updates_instead_of_duplicating,
    an_identical_upsert_writes_nothing,
    a_new_task_enters_with_the_sources_initial_status,
    status_change_is_compare_and_set_and_recorded,
    status_change_of_an_unknown_task_is_not_found,
    tasks_list_in_insertion_order_and_filter_by_status,
    task_pages_follow_ids_and_keep_the_filter,
    a_run_is_created_queued_and_linked_to_its_task,
    a_run_keeps_the_text_it_was_given_and_later_edits_are_listed,
    a_saved_run_reads_back_with_every_column,
    a_save_lands_only_under_the_runs_current_lease_epoch,
    workers_are_recorded_and_open_ones_listed_per_host,
    a_workers_spend_is_recorded_and_read_back_by_task,
    outcomes_since_read_each_runs_figures,
    decisions_are_recorded_and_pending_escalations_counted,
    each_decision_keeps_whether_its_worker_was_confined,
    an_escalation_is_resolved_once_and_applied_once,
    messages_keep_a_window_of_the_runs_most_recent,
    a_workers_line_and_its_decision_land_whole_or_not_at_all,
    a_run_lease_is_taken_once_renewed_expired_and_released,
    a_runs_pr_memory_is_replaced_and_read_back,
    task_facts_are_replaced_and_the_analysis_recorded,
    a_sources_cursor_is_replaced_and_read_back,
    the_outbox_keeps_every_column_in_enqueue_order,
    claiming_takes_only_the_head_of_a_notifiers_line,
    a_live_claim_of_another_holder_blocks_an_expired_one_does_not,
    a_dead_holders_claim_is_taken_over_and_shows_who_had_it,
    notifiers_have_lines_of_their_own_and_a_backlog,
    a_chat_message_is_claimed_once,
    a_decomposition_reads_back_in_the_planners_order,
    a_decomposition_is_stored_whole_or_not_at_all,
    a_childs_children_sit_one_level_further_down,
    unmet_dependencies_follow_the_queue_status,
    dependencies_of_children_are_the_edges_of_one_decomposition,
    agent_sessions_are_replaced_by_name_and_read_back,
    intake_errors_are_refreshed_and_retained,
    heartbeats_are_replaced_per_component_and_host,
    a_components_last_error_is_counted_and_cleared_by_its_next_start,
    summary_counts_every_known_status,
    an_agents_pause_is_extended_while_in_force_and_new_once_ended,
    a_services_pause_is_its_latest_answer_and_read_only_while_in_force,
    a_runs_network_refusals_add_up_per_host_and_port_with_one_history_entry,
    a_workers_start_is_recorded_with_its_runs_row_and_survives_a_fence,
    a_run_created_with_its_lease_is_its_creators,
    a_runs_ending_write_lands_whole_or_not_at_all,
    a_claim_moves_the_task_and_creates_its_leased_run_or_writes_nothing,
    a_workers_end_is_saved_with_its_run_and_survives_a_fence,
);

#[tokio::test]
async fn sqlite_state_survives_reopening_and_migrations_run_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("nested/executor.db");
    {
        let store = SqliteStore::open(&path).await.expect("open");
        store
            .upsert_task(&new_task("T-1", "# A"), "cli", t0())
            .await
            .expect("add");
    }
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.expect("reopen"));
    assert_eq!(store.tasks(None).await.expect("list").len(), 1);
    let version: i64 = rusqlite::Connection::open(&path)
        .expect("open file")
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .expect("user_version");
    assert_eq!(
        version,
        executor::store::migrations::latest(executor::store::migrations::SQLITE)
    );
}

#[tokio::test]
async fn sqlite_refuses_a_database_from_a_newer_version() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("executor.db");
    SqliteStore::open(&path).await.expect("create");
    rusqlite::Connection::open(&path)
        .expect("open file")
        .execute_batch("PRAGMA user_version = 999")
        .expect("bump version");
    let err = match SqliteStore::open(&path).await {
        Ok(_) => panic!("a newer schema must be refused"),
        Err(err) => err,
    };
    assert!(
        matches!(err, StoreError::SchemaTooNew { found: 999, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn sqlite_wal_stays_bounded_across_short_lived_connections() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("executor.db");
    for n in 0..300 {
        let store = SqliteStore::open(&path).await.expect("open");
        store
            .upsert_task(
                &new_task(&format!("T-{n}"), &"# padding ".repeat(200)),
                "cli",
                t0(),
            )
            .await
            .expect("add");
    }
    let wal = std::fs::metadata(dir.path().join("executor.db-wal"))
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(wal < 1024 * 1024, "the WAL grew to {wal} bytes");
    let store = SqliteStore::open(&path).await.expect("open");
    assert_eq!(store.tasks(None).await.expect("list").len(), 300);
}

#[tokio::test]
async fn sqlite_pending_includes_rows_with_a_null_status() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("executor.db");
    let store = SqliteStore::open(&path).await.expect("open");
    store
        .upsert_task(&new_task("T-1", "# a"), "cli", t0())
        .await
        .expect("add");
    rusqlite::Connection::open(&path)
        .expect("open file")
        .execute_batch(
            "INSERT INTO executor_queue (task_gid, added_at, updated_at, status) \
             VALUES ('OLD-1', '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z', NULL)",
        )
        .expect("insert a NULL status");
    let pending = store
        .tasks(Some(&QueueStatus::Pending))
        .await
        .expect("list");
    let gids: Vec<&str> = pending.iter().map(|t| t.task_gid.as_str()).collect();
    assert_eq!(gids, ["T-1", "OLD-1"]);
}

/// The schema as it stood before decisions recorded `confined`.
const BEFORE_CONFINED: i64 = 9;

/// A decision as executor recorded it before it knew the worker's posture.
const OLD_DECISION: &str = "INSERT INTO executor_decisions (task_gid, run_id, at, role, action, \
     decision, rule_id) VALUES ('T-OLD', 7, '2026-01-01T00:00:00.000000Z', 'worker', 'merge_pr', \
     'escalate', 'merge')";

async fn an_old_decision_reads_back_not_known_beside_new_ones(store: &dyn Store) {
    let old = store.decisions("T-OLD").await.expect("old decisions");
    assert_eq!(old.len(), 1, "the old row is kept");
    assert_eq!(
        (
            old[0].action.as_str(),
            old[0].rule_id.as_deref(),
            old[0].confined
        ),
        ("merge_pr", Some("merge"), None)
    );
    let mut new = decision_for(7, "run_tests", "approve");
    new.task_gid = Some("T-OLD".into());
    new.confined = Some(false);
    store.record_decision(&new).await.expect("record");
    let all = store.decisions("T-OLD").await.expect("all decisions");
    let confined: Vec<Option<bool>> = all.iter().map(|d| d.confined).collect();
    assert_eq!(confined, [None, Some(false)]);
}

#[tokio::test]
async fn sqlite_decisions_from_before_confined_was_kept_stay_not_known() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("executor.db");
    {
        let conn = rusqlite::Connection::open(&path).expect("open file");
        for migration in executor::store::migrations::SQLITE
            .iter()
            .filter(|m| m.version <= BEFORE_CONFINED)
        {
            conn.execute_batch(migration.sql).expect("old migration");
        }
        conn.execute_batch(&format!("PRAGMA user_version = {BEFORE_CONFINED}"))
            .expect("old version");
        conn.execute_batch(OLD_DECISION).expect("old decision");
    }
    let store = SqliteStore::open(&path).await.expect("migrate");
    an_old_decision_reads_back_not_known_beside_new_ones(&store).await;
    let column: Option<i64> = rusqlite::Connection::open(&path)
        .expect("open file")
        .query_row(
            "SELECT confined FROM executor_decisions WHERE task_gid = 'T-OLD' ORDER BY id LIMIT 1",
            [],
            |row| row.get(0),
        )
        .expect("the column");
    assert_eq!(column, None, "the old row is NULL");
}

#[tokio::test]
async fn postgres_decisions_from_before_confined_was_kept_stay_not_known() {
    let Some(schema) = PgSchema::create("decisions_before_confined").await else {
        return;
    };
    let admin = schema.admin().await;
    sqlx::raw_sql(
        "CREATE TABLE executor_schema_migrations (\
            version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    )
    .execute(&admin)
    .await
    .expect("migrations table");
    for migration in executor::store::migrations::POSTGRES
        .iter()
        .filter(|m| m.version <= BEFORE_CONFINED)
    {
        sqlx::raw_sql(migration.sql)
            .execute(&admin)
            .await
            .expect("old migration");
        sqlx::query("INSERT INTO executor_schema_migrations (version, name) VALUES ($1, $2)")
            .bind(migration.version)
            .bind(migration.name)
            .execute(&admin)
            .await
            .expect("record old migration");
    }
    sqlx::raw_sql(OLD_DECISION)
        .execute(&admin)
        .await
        .expect("old decision");
    let store = PgStore::connect_with(schema.options())
        .await
        .expect("migrate");
    an_old_decision_reads_back_not_known_beside_new_ones(&store).await;
    let column: Option<bool> = sqlx::query_scalar(
        "SELECT confined FROM executor_decisions WHERE task_gid = 'T-OLD' ORDER BY id LIMIT 1",
    )
    .fetch_one(&admin)
    .await
    .expect("the column");
    assert_eq!(column, None, "the old row is NULL");
    store.pool().close().await;
    admin.close().await;
    schema.drop().await;
}

#[tokio::test]
async fn postgres_refuses_a_nul_in_text_as_this_rows_value_only() {
    let Some(schema) = PgSchema::create("refused_value").await else {
        return;
    };
    let store = PgStore::connect_with(schema.options())
        .await
        .expect("open Postgres");
    let error = store
        .upsert_task(&new_task("T-1", "# A\n\nnul \0 here"), "cli", t0())
        .await
        .expect_err("Postgres cannot store NUL");
    assert!(error.is_refused_value(), "{}", error.with_causes());
    // The store itself is fine: the next row goes in.
    store
        .upsert_task(&new_task("T-2", "# B"), "cli", t0())
        .await
        .expect("the next row");
    assert!(!StoreError::TaskNotFound("T-9".into()).is_refused_value());
    store.pool().close().await;
    schema.drop().await;
}

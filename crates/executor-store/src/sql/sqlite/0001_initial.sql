-- The owner's two tables, with exactly the columns of DESIGN section 4.
CREATE TABLE IF NOT EXISTS executor_queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_gid TEXT NOT NULL UNIQUE,
    added_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    source TEXT,
    description TEXT,
    notes TEXT,
    status TEXT,
    priority INTEGER,
    complexity TEXT,
    feasibility TEXT,
    analysis_summary TEXT,
    executor_run_id INTEGER
);
CREATE INDEX IF NOT EXISTS executor_queue_status_idx ON executor_queue (status);

CREATE TABLE IF NOT EXISTS executor_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_gid TEXT NOT NULL,
    worktree_path TEXT,
    branch_name TEXT,
    pr_url TEXT,
    pr_number INTEGER,
    thread_id TEXT,
    started_at TEXT,
    updated_at TEXT NOT NULL,
    completed_at TEXT,
    state TEXT NOT NULL,
    ci_attempts INTEGER NOT NULL DEFAULT 0,
    worker_session_id TEXT,
    worker_last_update TEXT,
    worker_pid INTEGER,
    worker_stuck_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS executor_runs_task_gid_idx ON executor_runs (task_gid);

-- What the design needs beside them.
CREATE TABLE IF NOT EXISTS executor_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_gid TEXT NOT NULL,
    run_id INTEGER,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    from_status TEXT,
    to_status TEXT,
    actor TEXT NOT NULL,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS executor_events_task_gid_idx ON executor_events (task_gid);

CREATE TABLE IF NOT EXISTS executor_decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_gid TEXT,
    run_id INTEGER,
    at TEXT NOT NULL,
    role TEXT NOT NULL,
    action TEXT NOT NULL,
    decision TEXT NOT NULL,
    rule_id TEXT,
    detail TEXT,
    resolved_at TEXT,
    resolution TEXT
);
CREATE INDEX IF NOT EXISTS executor_decisions_task_gid_idx ON executor_decisions (task_gid);

CREATE TABLE IF NOT EXISTS executor_intake_errors (
    source TEXT NOT NULL,
    path TEXT NOT NULL,
    reason TEXT NOT NULL,
    first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL,
    PRIMARY KEY (source, path)
);

CREATE TABLE IF NOT EXISTS executor_heartbeats (
    component TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    beat_at TEXT NOT NULL,
    stopped_at TEXT,
    PRIMARY KEY (component, host)
);

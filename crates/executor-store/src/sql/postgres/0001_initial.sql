-- The owner's two tables, with exactly the columns of DESIGN section 4. An existing copy is
-- adopted in place: every statement here only creates what is missing.
CREATE TABLE IF NOT EXISTS executor_queue (
    id BIGSERIAL PRIMARY KEY,
    task_gid TEXT NOT NULL,
    added_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    source TEXT,
    description TEXT,
    notes TEXT,
    status TEXT,
    priority INTEGER,
    complexity TEXT,
    feasibility TEXT,
    analysis_summary TEXT,
    executor_run_id BIGINT
);
-- An older copy may lack some of the columns.
ALTER TABLE executor_queue ADD COLUMN IF NOT EXISTS added_at TIMESTAMPTZ NOT NULL DEFAULT now();
ALTER TABLE executor_queue ADD COLUMN IF NOT EXISTS updated_at TIMESTAMPTZ NOT NULL DEFAULT now();
ALTER TABLE executor_queue ADD COLUMN IF NOT EXISTS source TEXT;
ALTER TABLE executor_queue ADD COLUMN IF NOT EXISTS description TEXT;
ALTER TABLE executor_queue ADD COLUMN IF NOT EXISTS notes TEXT;
ALTER TABLE executor_queue ADD COLUMN IF NOT EXISTS status TEXT;
ALTER TABLE executor_queue ADD COLUMN IF NOT EXISTS priority INTEGER;
ALTER TABLE executor_queue ADD COLUMN IF NOT EXISTS complexity TEXT;
ALTER TABLE executor_queue ADD COLUMN IF NOT EXISTS feasibility TEXT;
ALTER TABLE executor_queue ADD COLUMN IF NOT EXISTS analysis_summary TEXT;
ALTER TABLE executor_queue ADD COLUMN IF NOT EXISTS executor_run_id BIGINT;
CREATE UNIQUE INDEX IF NOT EXISTS executor_queue_task_gid_key ON executor_queue (task_gid);
CREATE INDEX IF NOT EXISTS executor_queue_status_idx ON executor_queue (status);

-- An older copy's free-form `user_context` is carried into `notes`; the column itself stays.
DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM information_schema.columns
        WHERE table_schema = current_schema()
          AND table_name = 'executor_queue'
          AND column_name = 'user_context'
    ) THEN
        EXECUTE $carry$
            UPDATE executor_queue
            SET notes = CASE
                    WHEN notes IS NULL OR notes = '' THEN user_context::text
                    ELSE notes || E'\n\n' || user_context::text
                END
            WHERE user_context IS NOT NULL
              AND user_context::text <> ''
              AND (notes IS NULL OR position(user_context::text IN notes) = 0)
        $carry$;
    END IF;
END
$$;

CREATE TABLE IF NOT EXISTS executor_runs (
    id BIGSERIAL PRIMARY KEY,
    task_gid TEXT NOT NULL,
    worktree_path TEXT,
    branch_name TEXT,
    pr_url TEXT,
    pr_number INTEGER,
    thread_id TEXT,
    started_at TIMESTAMPTZ,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    completed_at TIMESTAMPTZ,
    state TEXT NOT NULL DEFAULT 'queued',
    ci_attempts INTEGER NOT NULL DEFAULT 0,
    worker_session_id TEXT,
    worker_last_update TIMESTAMPTZ,
    worker_pid INTEGER,
    worker_stuck_count INTEGER NOT NULL DEFAULT 0
);
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS worktree_path TEXT;
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS branch_name TEXT;
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS pr_url TEXT;
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS pr_number INTEGER;
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS thread_id TEXT;
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS started_at TIMESTAMPTZ;
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS updated_at TIMESTAMPTZ NOT NULL DEFAULT now();
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS completed_at TIMESTAMPTZ;
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS state TEXT NOT NULL DEFAULT 'queued';
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS ci_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS worker_session_id TEXT;
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS worker_last_update TIMESTAMPTZ;
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS worker_pid INTEGER;
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS worker_stuck_count INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS executor_runs_task_gid_idx ON executor_runs (task_gid);

-- What the design needs beside them.
CREATE TABLE IF NOT EXISTS executor_events (
    id BIGSERIAL PRIMARY KEY,
    task_gid TEXT NOT NULL,
    run_id BIGINT,
    at TIMESTAMPTZ NOT NULL,
    kind TEXT NOT NULL,
    from_status TEXT,
    to_status TEXT,
    actor TEXT NOT NULL,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS executor_events_task_gid_idx ON executor_events (task_gid);

CREATE TABLE IF NOT EXISTS executor_decisions (
    id BIGSERIAL PRIMARY KEY,
    task_gid TEXT,
    run_id BIGINT,
    at TIMESTAMPTZ NOT NULL,
    role TEXT NOT NULL,
    action TEXT NOT NULL,
    decision TEXT NOT NULL,
    rule_id TEXT,
    detail TEXT,
    resolved_at TIMESTAMPTZ,
    resolution TEXT
);
CREATE INDEX IF NOT EXISTS executor_decisions_task_gid_idx ON executor_decisions (task_gid);

CREATE TABLE IF NOT EXISTS executor_intake_errors (
    source TEXT NOT NULL,
    path TEXT NOT NULL,
    reason TEXT NOT NULL,
    first_seen TIMESTAMPTZ NOT NULL,
    last_seen TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (source, path)
);

CREATE TABLE IF NOT EXISTS executor_heartbeats (
    component TEXT NOT NULL,
    host TEXT NOT NULL,
    pid BIGINT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    beat_at TIMESTAMPTZ NOT NULL,
    stopped_at TIMESTAMPTZ,
    PRIMARY KEY (component, host)
);

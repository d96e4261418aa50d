-- What the console reads on a big store, each without a scan: tasks by status and runs by
-- state newest first, the workers' spend of a day (by when each ended, or started while it
-- runs), and the last look the runner took at each run's PR (the forge's observation as
-- JSON), which the Run page shows without asking the forge itself.
CREATE INDEX IF NOT EXISTS executor_queue_status_id_idx ON executor_queue (status, id);
CREATE INDEX IF NOT EXISTS executor_runs_state_idx ON executor_runs (state, id);
CREATE INDEX IF NOT EXISTS executor_workers_ended_idx ON executor_workers (ended_at);
CREATE INDEX IF NOT EXISTS executor_workers_started_idx ON executor_workers (started_at);
CREATE TABLE IF NOT EXISTS executor_pr_looks (
    run_id BIGINT PRIMARY KEY,
    observation TEXT NOT NULL,
    observed_at TIMESTAMPTZ NOT NULL
);

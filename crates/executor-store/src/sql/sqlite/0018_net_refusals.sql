-- What the wall's proxy refused each run's workers: one row per run, host and port (the
-- host in its one spelling; nothing else of a request is kept), how many times, first and
-- last. A worker's refusals are added to its row every few seconds, never one write each.
-- `kind`: not_allowed | loopback | loopback_forwarded.
CREATE TABLE IF NOT EXISTS executor_net_refusals (
    run_id INTEGER NOT NULL,
    task_gid TEXT NOT NULL,
    host TEXT NOT NULL,
    port INTEGER NOT NULL,
    kind TEXT NOT NULL,
    count INTEGER NOT NULL,
    first_at TEXT NOT NULL,
    last_at TEXT NOT NULL,
    PRIMARY KEY (run_id, host, port)
);
CREATE INDEX IF NOT EXISTS executor_net_refusals_task_idx ON executor_net_refusals (task_gid);

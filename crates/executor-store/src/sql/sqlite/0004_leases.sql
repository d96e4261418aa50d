-- Who carries a run: a runner (host:pid:start time) holds a run's lease until it expires.
-- The holder renews it while it works; another runner takes a run only when its lease has
-- expired, or its holder is a dead process on the same host.
CREATE TABLE IF NOT EXISTS executor_run_leases (
    run_id INTEGER PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS executor_run_leases_holder_idx ON executor_run_leases (holder);

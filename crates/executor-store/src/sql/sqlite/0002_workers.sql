-- One row per worker process: which run and phase it served, where it ran, and the
-- (pid, start time) pair that identifies its process group even after the runner that
-- started it is gone. Rows with no ended_at are workers a crashed runner may have left.
CREATE TABLE IF NOT EXISTS executor_workers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL,
    phase TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    start_time INTEGER,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    outcome TEXT
);
CREATE INDEX IF NOT EXISTS executor_workers_open_idx ON executor_workers (host, ended_at);

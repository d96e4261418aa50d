-- What a run in `pr` remembers between ticks (the `pr` state machine's memory, as JSON):
-- CI attempts, the review threads already sent to a worker, the review's head, the last
-- owner comment seen.
CREATE TABLE IF NOT EXISTS executor_pr_memory (
    run_id INTEGER PRIMARY KEY,
    memory TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

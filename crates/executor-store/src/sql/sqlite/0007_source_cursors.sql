-- Where each polled source got to (for Asana, the newest `modified_at` taken in), so the
-- next poll, in this process or the next, reads only what changed since.
CREATE TABLE IF NOT EXISTS executor_source_cursors (
    source TEXT PRIMARY KEY,
    cursor TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

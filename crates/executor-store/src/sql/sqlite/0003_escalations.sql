-- Escalations are the decisions whose `decision` is 'escalate'; the owner's answer is
-- `resolution` ('approve' | 'deny') at `resolved_at`. Beside it: what the owner said, who
-- answered, when the answer was carried out, the agent's tool call it answers, and the
-- worker messages that led to it (a JSON array, as text).
ALTER TABLE executor_decisions ADD COLUMN resolution_note TEXT;
ALTER TABLE executor_decisions ADD COLUMN resolved_by TEXT;
ALTER TABLE executor_decisions ADD COLUMN applied_at TEXT;
ALTER TABLE executor_decisions ADD COLUMN tool_use_id TEXT;
ALTER TABLE executor_decisions ADD COLUMN message_window TEXT;
CREATE INDEX IF NOT EXISTS executor_decisions_run_id_idx ON executor_decisions (run_id);

-- Worker messages (DESIGN section 5), one row per recognised line, kept so the orchestrator
-- can read the sliding window of a run's most recent ones.
CREATE TABLE IF NOT EXISTS executor_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL,
    task_gid TEXT NOT NULL,
    at TEXT NOT NULL,
    source TEXT NOT NULL,
    tag TEXT NOT NULL,
    kind TEXT NOT NULL,
    args TEXT NOT NULL,
    text TEXT NOT NULL,
    line TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS executor_messages_run_idx ON executor_messages (run_id, id);

-- Escalations are the decisions whose `decision` is 'escalate'; the owner's answer is
-- `resolution` ('approve' | 'deny') at `resolved_at`. Beside it: what the owner said, who
-- answered, when the answer was carried out, the agent's tool call it answers, and the
-- worker messages that led to it (a JSON array, as text).
ALTER TABLE executor_decisions ADD COLUMN IF NOT EXISTS resolution_note TEXT;
ALTER TABLE executor_decisions ADD COLUMN IF NOT EXISTS resolved_by TEXT;
ALTER TABLE executor_decisions ADD COLUMN IF NOT EXISTS applied_at TIMESTAMPTZ;
ALTER TABLE executor_decisions ADD COLUMN IF NOT EXISTS tool_use_id TEXT;
ALTER TABLE executor_decisions ADD COLUMN IF NOT EXISTS message_window TEXT;
CREATE INDEX IF NOT EXISTS executor_decisions_run_id_idx ON executor_decisions (run_id);

-- Worker messages (DESIGN section 5), one row per recognised line, kept so the orchestrator
-- can read the sliding window of a run's most recent ones.
CREATE TABLE IF NOT EXISTS executor_messages (
    id BIGSERIAL PRIMARY KEY,
    run_id BIGINT NOT NULL,
    task_gid TEXT NOT NULL,
    at TIMESTAMPTZ NOT NULL,
    source TEXT NOT NULL,
    tag TEXT NOT NULL,
    kind TEXT NOT NULL,
    args TEXT NOT NULL,
    text TEXT NOT NULL,
    line TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS executor_messages_run_idx ON executor_messages (run_id, id);

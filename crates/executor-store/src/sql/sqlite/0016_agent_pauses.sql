-- Agents paused at their usage limit: no worker of `agent` starts before `until` (the reset
-- the agent gave, or the configured back-off), across restarts. One row per agent, the
-- latest pause; `since` is when it began (a worker meeting the limit again while it is in
-- force extends it and keeps its `since`, so the owner is told once).
CREATE TABLE IF NOT EXISTS executor_agent_pauses (
    agent TEXT PRIMARY KEY,
    since TEXT NOT NULL,
    until TEXT NOT NULL,
    reason TEXT NOT NULL,
    run_id INTEGER,
    task_gid TEXT
);

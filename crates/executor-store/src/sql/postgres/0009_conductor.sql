-- The conductor's tree: a goal task decomposed into child tasks (and a child into children
-- of its own), one row per child naming its parent, its depth below the goal, the planner's
-- key for it (unique among its siblings) and the order it was listed in. A decomposition is
-- written whole, in one transaction. No foreign key to executor_queue: like the other
-- executor_* tables these stay loose, so an adopted queue without constraints is no obstacle.
CREATE TABLE IF NOT EXISTS executor_task_links (
    task_gid TEXT PRIMARY KEY,
    parent_gid TEXT NOT NULL,
    depth INTEGER NOT NULL,
    key TEXT NOT NULL,
    position INTEGER NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (parent_gid, key)
);
CREATE INDEX IF NOT EXISTS executor_task_links_parent_idx ON executor_task_links (parent_gid);

-- Dependency edges: `task_gid` may start only once `depends_on` is done in executor_queue
-- (a task missing there counts as not done).
CREATE TABLE IF NOT EXISTS executor_task_dependencies (
    task_gid TEXT NOT NULL,
    depends_on TEXT NOT NULL,
    PRIMARY KEY (task_gid, depends_on)
);
CREATE INDEX IF NOT EXISTS executor_task_dependencies_depends_on_idx
    ON executor_task_dependencies (depends_on);

-- Named agent sessions kept across review rounds (a worker task file's `session`): which
-- agent holds it and the agent's own id to resume it. Never a credential or a transcript.
CREATE TABLE IF NOT EXISTS executor_agent_sessions (
    name TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    session_id TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- What a source knows of a task beyond its text (assignee, closed upstream, labels or tags,
-- where it sits, its link, when it last changed), as JSON (`core::facts::TaskFacts`). The
-- analyzer's rule filters read it; the queue row keeps only the owner's columns.
CREATE TABLE IF NOT EXISTS executor_task_facts (
    task_gid TEXT PRIMARY KEY,
    facts TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

-- The task's text as a run was given it (`executor_queue.description` when the run was
-- created), so `executor show` says what was worked on even after the note or issue was
-- edited, and `executor status` can list done tasks whose text changed since. Old rows:
-- unknown (NULL).
ALTER TABLE executor_runs ADD COLUMN task_text TEXT;

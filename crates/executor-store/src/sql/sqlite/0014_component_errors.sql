-- The last error each component (the daemon's passes, the analyzer) met, with when and
-- how often since it started, so `executor status` says what is wrong where a person looks.
ALTER TABLE executor_heartbeats ADD COLUMN last_error TEXT;
ALTER TABLE executor_heartbeats ADD COLUMN last_error_at TEXT;
ALTER TABLE executor_heartbeats ADD COLUMN error_count INTEGER NOT NULL DEFAULT 0;

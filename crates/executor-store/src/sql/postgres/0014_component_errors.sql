-- The last error each component (the daemon's passes, the analyzer) met, with when and
-- how often since it started, so `executor status` says what is wrong where a person looks.
ALTER TABLE executor_heartbeats ADD COLUMN IF NOT EXISTS last_error TEXT;
ALTER TABLE executor_heartbeats ADD COLUMN IF NOT EXISTS last_error_at TIMESTAMPTZ;
ALTER TABLE executor_heartbeats ADD COLUMN IF NOT EXISTS error_count BIGINT NOT NULL DEFAULT 0;

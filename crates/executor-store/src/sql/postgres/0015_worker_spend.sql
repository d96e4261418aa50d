-- What each worker spent, from its agent's own result events: the agent, tokens (fresh
-- input, output, read from a cache), turns, and the cost in US dollars (NULL when the
-- agent reported none and no price is set; cost_priced when executor priced it).
ALTER TABLE executor_workers ADD COLUMN IF NOT EXISTS agent TEXT;
ALTER TABLE executor_workers ADD COLUMN IF NOT EXISTS input_tokens BIGINT;
ALTER TABLE executor_workers ADD COLUMN IF NOT EXISTS output_tokens BIGINT;
ALTER TABLE executor_workers ADD COLUMN IF NOT EXISTS cached_tokens BIGINT;
ALTER TABLE executor_workers ADD COLUMN IF NOT EXISTS turns BIGINT;
ALTER TABLE executor_workers ADD COLUMN IF NOT EXISTS cost_usd DOUBLE PRECISION;
ALTER TABLE executor_workers ADD COLUMN IF NOT EXISTS cost_priced BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX IF NOT EXISTS executor_workers_run_idx ON executor_workers (run_id);

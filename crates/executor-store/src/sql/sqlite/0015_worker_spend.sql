-- What each worker spent, from its agent's own result events: the agent, tokens (fresh
-- input, output, read from a cache), turns, and the cost in US dollars (NULL when the
-- agent reported none and no price is set; cost_priced when executor priced it).
ALTER TABLE executor_workers ADD COLUMN agent TEXT;
ALTER TABLE executor_workers ADD COLUMN input_tokens INTEGER;
ALTER TABLE executor_workers ADD COLUMN output_tokens INTEGER;
ALTER TABLE executor_workers ADD COLUMN cached_tokens INTEGER;
ALTER TABLE executor_workers ADD COLUMN turns INTEGER;
ALTER TABLE executor_workers ADD COLUMN cost_usd REAL;
ALTER TABLE executor_workers ADD COLUMN cost_priced INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS executor_workers_run_idx ON executor_workers (run_id);

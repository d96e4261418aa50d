-- The run engine (DESIGN section 10). `lifecycle`: the run's lifecycle view as JSON (stage,
-- every counter that decides, what the next worker is told), so a restarted runner makes
-- the same decisions. `lease_epoch`: raised by every claim of the run's lease; every write
-- of the run by a runner is conditional on the epoch it claimed, so a runner whose lease
-- was taken over writes nothing more for that run. Old rows: no view (carried on from their
-- state), epoch 0.
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS lifecycle TEXT;
ALTER TABLE executor_runs ADD COLUMN IF NOT EXISTS lease_epoch BIGINT NOT NULL DEFAULT 0;

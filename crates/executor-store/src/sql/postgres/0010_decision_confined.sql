-- Whether the worker a decision was made for ran inside the wall (DESIGN sections 6 and 11):
-- true confined, false unconfined, NULL not known (decisions recorded before executor kept
-- it, and decisions made for no worker, such as the owner's or the conductor's). Old rows
-- stay NULL.
ALTER TABLE executor_decisions ADD COLUMN IF NOT EXISTS confined BOOLEAN;

-- Outside services that said "not before" (a 429's Retry-After): nothing is sent to
-- `service` (its kind and API URL) before `until`, by any process of this store, so a
-- `run --once` started inside the wait does not hit the limit again. One row per service,
-- the latest answer's; `since` is when it was given.
CREATE TABLE IF NOT EXISTS executor_service_pauses (
    service TEXT PRIMARY KEY,
    since TIMESTAMPTZ NOT NULL,
    until TIMESTAMPTZ NOT NULL
);

-- The outbox: every message for the owner (a Zulip post, a webhook call) is written here
-- first and delivered from here, one notifier at a time in id order, so it survives a crash
-- or a chat service that is down. A failed attempt counts in `attempts`, keeps its error and
-- waits until `next_attempt_at`; a deliverer holds the head of its line (`claimed_by`,
-- `claimed_until`) while it sends it. Bodies are message text only, never a secret.
CREATE TABLE IF NOT EXISTS executor_outbox (
    id BIGSERIAL PRIMARY KEY,
    notifier TEXT NOT NULL,
    persona TEXT,
    priority TEXT NOT NULL,
    task_gid TEXT,
    run_id BIGINT,
    body TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL,
    delivered_at TIMESTAMPTZ,
    last_error TEXT,
    claimed_by TEXT,
    claimed_until TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS executor_outbox_undelivered_idx
    ON executor_outbox (notifier, id) WHERE delivered_at IS NULL;

-- Chat messages received and taken in: the first to record a message handles it, so a
-- message seen twice (a replayed event queue, two runners) is acted on exactly once.
CREATE TABLE IF NOT EXISTS executor_chat_inbox (
    chat TEXT NOT NULL,
    message_id TEXT NOT NULL,
    received_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (chat, message_id)
);

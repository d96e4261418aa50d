-- Each webhook delivery taken in, by the id its sender gave it (GitHub's
-- `X-GitHub-Delivery`), so a delivery sent twice (a redelivery from the settings page, a
-- retry by a proxy) is acted on once.
CREATE TABLE IF NOT EXISTS executor_webhook_deliveries (
    source TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    received_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (source, delivery_id)
);

-- outboxkit inbox, PostgreSQL. Idempotent: safe to run at every start.
CREATE TABLE IF NOT EXISTS {{.Table}} (
    consumer_name VARCHAR(128) NOT NULL,
    event_id      VARCHAR(255) NOT NULL,
    processed_at  TIMESTAMPTZ  NOT NULL,
    PRIMARY KEY (consumer_name, event_id)
);
--
CREATE INDEX IF NOT EXISTS {{.Index}} ON {{.Table}} (consumer_name, processed_at);

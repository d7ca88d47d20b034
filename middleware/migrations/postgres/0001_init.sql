-- outboxkit inbox v1, PostgreSQL. Statements are separated by "-- statement" lines.
-- IF NOT EXISTS: an inbox table created before migrations were recorded is kept as it is.
CREATE TABLE IF NOT EXISTS {{.Table}} (
    consumer_name VARCHAR(128) NOT NULL,
    event_id      VARCHAR(255) NOT NULL,
    processed_at  TIMESTAMPTZ  NOT NULL,
    PRIMARY KEY (consumer_name, event_id)
)
-- statement
CREATE INDEX IF NOT EXISTS {{.Index}} ON {{.Table}} (consumer_name, processed_at)

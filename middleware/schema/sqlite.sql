-- outboxkit inbox, SQLite. Idempotent: safe to run at every start.
-- processed_at holds Unix microseconds (UTC).
CREATE TABLE IF NOT EXISTS {{.Table}} (
    consumer_name TEXT    NOT NULL,
    event_id      TEXT    NOT NULL,
    processed_at  INTEGER NOT NULL,
    PRIMARY KEY (consumer_name, event_id)
);
--
CREATE INDEX IF NOT EXISTS {{.QualifiedIndex}} ON {{.BareTable}} (consumer_name, processed_at);

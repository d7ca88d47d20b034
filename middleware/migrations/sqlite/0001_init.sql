-- outboxkit inbox v1, SQLite. Statements are separated by "-- statement" lines.
-- processed_at is fixed-width UTC text ("2006-01-02 15:04:05.000000"), outboxkit's one time
-- encoding for SQLite, so that text comparison orders it.
-- IF NOT EXISTS: an inbox table created before migrations were recorded is kept as it is
-- (0002 converts its times).
CREATE TABLE IF NOT EXISTS {{.Table}} (
    consumer_name TEXT NOT NULL,
    event_id      TEXT NOT NULL,
    processed_at  TEXT NOT NULL,
    PRIMARY KEY (consumer_name, event_id)
)
-- statement
CREATE INDEX IF NOT EXISTS {{.QualifiedIndex}} ON {{.BareTable}} (consumer_name, processed_at)

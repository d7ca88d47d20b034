-- outboxkit inbox v1, MariaDB (tested: 10.11) and MySQL 8 (expected, untested).
-- IF NOT EXISTS: an inbox table created before migrations were recorded is kept as it is.
-- VARBINARY, not VARCHAR: ids compare byte for byte, never case- or pad-insensitively, so two
-- distinct event ids can never be taken for duplicates by a collation.
CREATE TABLE IF NOT EXISTS {{.Table}} (
    consumer_name VARBINARY(128) NOT NULL,
    event_id      VARBINARY(255) NOT NULL,
    processed_at  DATETIME(6)    NOT NULL,
    PRIMARY KEY (consumer_name, event_id),
    KEY {{.Index}} (consumer_name, processed_at)
) ENGINE=InnoDB

-- outboxkit schema v1 for SQLite. Statements are separated by "-- statement" lines.
-- Times are stored as fixed-width UTC text ("2006-01-02 15:04:05.000000") so they compare correctly.
CREATE TABLE IF NOT EXISTS {{.Events}} (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id        TEXT    NOT NULL,
    topic           TEXT    NOT NULL,
    aggregate_type  TEXT    NOT NULL DEFAULT '',
    aggregate_id    TEXT    NOT NULL,
    event_type      TEXT    NOT NULL,
    tenant_id       TEXT    NOT NULL DEFAULT '',
    payload         BLOB    NOT NULL,
    headers         TEXT    NOT NULL DEFAULT '{}',
    key_hash        INTEGER NOT NULL,
    partition_no    INTEGER NOT NULL,
    created_at      TEXT    NOT NULL,
    status          INTEGER NOT NULL DEFAULT 0,  -- 0 pending, 1 published (kept for retention), 2 dead
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT,
    last_error      TEXT,
    published_at    TEXT
)
-- statement
CREATE INDEX IF NOT EXISTS {{.Short}}_pending ON {{.Events}} (seq) WHERE status = 0
-- statement
CREATE INDEX IF NOT EXISTS {{.Short}}_parked ON {{.Events}} (partition_no, key_hash) WHERE status = 2 OR attempts > 0
-- statement
CREATE INDEX IF NOT EXISTS {{.Short}}_published ON {{.Events}} (published_at) WHERE status = 1
-- statement
-- One row per (lease group, partition), created by the forwarders of the group.
CREATE TABLE IF NOT EXISTS {{.Leases}} (
    lease_group  TEXT    NOT NULL,
    partition_no INTEGER NOT NULL,
    owner        TEXT,
    expires_at   TEXT    NOT NULL DEFAULT '1970-01-01 00:00:00.000000',
    PRIMARY KEY (lease_group, partition_no)
)
-- statement
CREATE TABLE IF NOT EXISTS {{.Relays}} (
    lease_group  TEXT NOT NULL,
    owner        TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL,
    PRIMARY KEY (lease_group, owner)
)

-- outboxkit schema v1 for PostgreSQL 14+ (CREATE OR REPLACE TRIGGER; the tests run 15). Statements are separated by "-- statement" lines.
CREATE TABLE IF NOT EXISTS {{.Events}} (
    seq             BIGSERIAL PRIMARY KEY,
    event_id        UUID        NOT NULL,
    topic           TEXT        NOT NULL,
    aggregate_type  TEXT        NOT NULL DEFAULT '',
    aggregate_id    TEXT        NOT NULL,
    event_type      TEXT        NOT NULL,
    tenant_id       TEXT        NOT NULL DEFAULT '',
    payload         BYTEA       NOT NULL,
    headers         JSONB       NOT NULL DEFAULT '{}',
    key_hash        BIGINT      NOT NULL,
    partition_no    SMALLINT    NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    status          SMALLINT    NOT NULL DEFAULT 0,  -- 0 pending, 1 published (kept for retention), 2 dead
    attempts        INTEGER     NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ,
    last_error      TEXT,
    published_at    TIMESTAMPTZ
)
-- statement
-- The relay's hot query: pending rows in commit (sequence) order.
CREATE INDEX IF NOT EXISTS {{.Short}}_pending ON {{.Events}} (seq) WHERE status = 0
-- statement
-- Keys held back by a failing or dead event.
CREATE INDEX IF NOT EXISTS {{.Short}}_parked ON {{.Events}} (partition_no, key_hash) WHERE status = 2 OR attempts > 0
-- statement
CREATE INDEX IF NOT EXISTS {{.Short}}_published ON {{.Events}} (published_at) WHERE status = 1
-- statement
-- One row per (lease group, partition), created by the forwarders of the group.
CREATE TABLE IF NOT EXISTS {{.Leases}} (
    lease_group  TEXT        NOT NULL,
    partition_no INTEGER     NOT NULL,
    owner        TEXT,
    expires_at   TIMESTAMPTZ NOT NULL DEFAULT 'epoch',
    PRIMARY KEY (lease_group, partition_no)
)
-- statement
CREATE TABLE IF NOT EXISTS {{.Relays}} (
    lease_group  TEXT        NOT NULL,
    owner        TEXT        NOT NULL,
    heartbeat_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (lease_group, owner)
)
-- statement
-- Wake idle relays on commit: one notification per inserting transaction.
CREATE OR REPLACE FUNCTION {{.Events}}_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{{.Channel}}', '');
    RETURN NULL;
END
$$
-- statement
CREATE OR REPLACE TRIGGER {{.Short}}_notify AFTER INSERT ON {{.Events}}
    FOR EACH STATEMENT EXECUTE FUNCTION {{.Events}}_notify()

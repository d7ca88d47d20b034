-- outboxkit schema v6: the installation's identity and the exactly-once units' cleanup marks
-- (docs/exactly-once.md). The identity is made once, here; exactly-once delivery puts it in
-- its default transactional ids and in every checkpoint, and refuses a checkpoint of another
-- installation. singleton keeps the table at one row.
CREATE TABLE IF NOT EXISTS {{.Installation}} (
    singleton       SMALLINT    PRIMARY KEY DEFAULT 1 CHECK (singleton = 1),
    installation_id TEXT        NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
)
-- statement
INSERT INTO {{.Installation}} (singleton, installation_id) VALUES (1, gen_random_uuid()::text) ON CONFLICT DO NOTHING
-- statement
-- The last checkpoint of each unit whose rows are acknowledged (a digest of its bytes), written
-- in the acknowledgement's transaction.
CREATE TABLE IF NOT EXISTS {{.Units}} (
    unit       TEXT        PRIMARY KEY,
    cleaned    TEXT        NOT NULL,
    cleaned_at TIMESTAMPTZ NOT NULL
)

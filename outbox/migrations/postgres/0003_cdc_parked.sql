-- outboxkit schema v3 (the CDC source, docs/cdc.md): the keys the CDC relay leaves to its retry path. A pending row with a
-- next attempt time (a failed event, a replayed dead letter, or a later event of such a key that
-- the stream passed on) holds its key back from the stream; this index finds them per batch.
CREATE INDEX IF NOT EXISTS {{.Short}}_retry_keys ON {{.Events}} (partition_no, key_hash) WHERE status = 2 OR next_attempt_at IS NOT NULL
-- statement
-- One row per replication slot of the CDC relay: drained_at is set once the rows committed before
-- the slot existed have been drained from the table, so a relay resuming a slot whose creator died
-- before that knows to drain them.
CREATE TABLE IF NOT EXISTS {{.Events}}_cdc_slots (
    slot_name  TEXT        PRIMARY KEY,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    drained_at TIMESTAMPTZ
)

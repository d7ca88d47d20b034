-- outboxkit schema v13: an operator's discard on the wal source holds (docs/wal.md, "Parking").
-- The wal relay confirms the slot's position only every StatusInterval, so a relay killed before
-- its confirmed position passed a parked event streams that event again from the slot. While the
-- event's row is in the table, parking it again writes nothing (the park skips an event id its
-- key has); once an operator discarded the dead row, nothing said so, and the event was parked
-- anew, dead again, holding its key. A tombstone of each discarded event id now says so: the
-- park skips a tombstoned event id. The trigger writes one when a dead row is deleted (Discard,
-- DiscardDeadLetters, plain SQL alike) of a table with a registered wal slot; the position is the
-- server's WAL position at the discard, after the event's commit: the relay deletes a tombstone
-- once the slot's confirmed position passed it, when no session can stream the event again.
CREATE TABLE IF NOT EXISTS {{.Events}}_wal_discarded (
    event_id      UUID        PRIMARY KEY,
    discarded_lsn PG_LSN      NOT NULL DEFAULT pg_current_wal_lsn(),
    discarded_at  TIMESTAMPTZ NOT NULL DEFAULT now()
)
-- statement
CREATE OR REPLACE FUNCTION {{.Events}}_wal_discard() RETURNS trigger
    LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM {{.Events}}_wal_slots) THEN
        INSERT INTO {{.Events}}_wal_discarded (event_id) VALUES (OLD.event_id) ON CONFLICT DO NOTHING;
    END IF;
    RETURN OLD;
END
$$
-- statement
CREATE OR REPLACE TRIGGER {{.Short}}_wal_discard AFTER DELETE ON {{.Events}}
    FOR EACH ROW WHEN (OLD.status = 2) EXECUTE FUNCTION {{.Events}}_wal_discard()

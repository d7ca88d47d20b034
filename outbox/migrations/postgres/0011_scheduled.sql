-- outboxkit schema v11: scheduled events (docs/scheduled.md). A row written with a delivery time
-- (deliver_at) and status 4 (scheduled) is left out of every claim: it holds no event of its key
-- back and waits for none. The relay releases it (status 4 -> 0, a short transaction of its own)
-- once deliver_at has passed by the database's clock; from then on it is an ordinary pending
-- event. Until then outbox.Writer.Cancel (DELETE ... WHERE status = 4) removes it and Reschedule
-- moves it, atomically with the caller's business change. Adding a nullable column rewrites nothing.
ALTER TABLE {{.Events}} ADD COLUMN IF NOT EXISTS deliver_at TIMESTAMPTZ
-- statement
-- The release of the due events, earliest first, and "how many are scheduled, when is the next
-- due": only scheduled rows are in it, so a million of them in the future cost a claim nothing.
CREATE INDEX IF NOT EXISTS {{.Short}}_scheduled ON {{.Events}} (deliver_at, seq) WHERE status = 4
-- statement
-- Cancel and Reschedule find a scheduled event by its id.
CREATE INDEX IF NOT EXISTS {{.Short}}_scheduled_id ON {{.Events}} (event_id) WHERE status = 4
-- statement
-- A plain-SQL writer sets deliver_at only: the row becomes scheduled here. outbox.Writer sets
-- status 4 itself, so the trigger's condition skips its rows, and rows without deliver_at.
CREATE OR REPLACE FUNCTION {{.Events}}_schedule() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF extract(year FROM NEW.deliver_at AT TIME ZONE 'UTC') NOT BETWEEN 1 AND 9999 THEN
        RAISE EXCEPTION 'outboxkit: deliver_at %: the year must be between 1 and 9999', NEW.deliver_at
            USING ERRCODE = 'check_violation', COLUMN = 'deliver_at';
    END IF;
    NEW.status := 4;
    RETURN NEW;
END
$$
-- statement
CREATE OR REPLACE TRIGGER {{.Short}}_schedule BEFORE INSERT ON {{.Events}}
    FOR EACH ROW WHEN (NEW.deliver_at IS NOT NULL AND NEW.status = 0) EXECUTE FUNCTION {{.Events}}_schedule()

-- outboxkit schema v5 (SQLite): scheduled events (docs/scheduled.md). A row written with a
-- delivery time (deliver_at, UTC text in the fixed-width layout of created_at) and status 4
-- (scheduled) is left out of every claim: it holds no event of its key back and waits for none.
-- The relay releases it (status 4 -> 0) once deliver_at has passed by the database's clock; from
-- then on it is an ordinary pending event. Until then outbox.Writer.Cancel removes it and
-- Reschedule moves it, atomically with the caller's business change.
ALTER TABLE {{.Events}} ADD COLUMN deliver_at TEXT
-- statement
-- The release of the due events, earliest first, and "how many are scheduled, when is the next due".
CREATE INDEX IF NOT EXISTS {{.Short}}_scheduled ON {{.Events}} (deliver_at, seq) WHERE status = 4
-- statement
-- Cancel and Reschedule find a scheduled event by its id.
CREATE INDEX IF NOT EXISTS {{.Short}}_scheduled_id ON {{.Events}} (event_id) WHERE status = 4
-- statement
-- A plain-SQL writer sets deliver_at only: the row becomes scheduled here (SQLite's BEFORE
-- triggers cannot change the new row). outbox.Writer sets status 4 itself.
CREATE TRIGGER IF NOT EXISTS {{.Events}}_schedule AFTER INSERT ON {{.Events}} FOR EACH ROW
    WHEN NEW.deliver_at IS NOT NULL AND NEW.status = 0
BEGIN
    UPDATE {{.Events}} SET status = 4 WHERE seq = NEW.seq;
END

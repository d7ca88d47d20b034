-- outboxkit schema v6 (MySQL): scheduled events (docs/scheduled.md). A row written with a delivery
-- time (deliver_at, UTC) and status 4 (scheduled) is left out of every claim: it holds no event
-- of its key back and waits for none. The relay releases it (status 4 -> 0, a short transaction
-- of its own) once deliver_at has passed by the database's clock (UTC_TIMESTAMP); from then on it
-- is an ordinary pending event. Until then outbox.Writer.Cancel removes it and Reschedule moves
-- it, atomically with the caller's business change. <table>_scheduled serves the release of the
-- due events (earliest first) and "how many are scheduled, when is the next due";
-- <table>_scheduled_id finds an event by id for Cancel and Reschedule (MySQL has no partial
-- indexes: both lead with status). One statement, so a run that stopped before it reruns it
-- whole (MySQL 8 has no ADD COLUMN IF NOT EXISTS).
ALTER TABLE {{.Events}} ADD COLUMN deliver_at DATETIME(6) NULL,
    ADD KEY {{.Short}}_scheduled (status, deliver_at, seq),
    ADD KEY {{.Short}}_scheduled_id (status, event_id)
-- statement
-- A plain-SQL writer sets deliver_at only: the row becomes scheduled here. outbox.Writer sets
-- status 4 itself.
CREATE TRIGGER IF NOT EXISTS {{.Events}}_schedule BEFORE INSERT ON {{.Events}} FOR EACH ROW
IF NEW.deliver_at IS NOT NULL AND NEW.status = 0 THEN
    IF YEAR(NEW.deliver_at) NOT BETWEEN 1 AND 9999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'outboxkit: deliver_at: the year must be between 1 and 9999', COLUMN_NAME = 'deliver_at';
    END IF;
    SET NEW.status = 4;
END IF

-- outboxkit schema v8: a committing insert notifies only while a polling relay waits for it. A
-- NOTIFY takes a database-wide lock at commit and holds it until the commit is flushed, so every
-- notifying transaction commits alone: under concurrent writers it cost most of their throughput.
-- A relay's listener (forwarder.ListenPostgres) holds outboxkit's advisory lock
-- (WakeNamespace, outbox.Table.WakeLock) on its session while it waits; the trigger's
-- condition tries the same lock in shared mode for the rest of the writer's transaction and
-- notifies only when a waiting relay holds it. A writer that did not notify holds the shared lock
-- until its transaction ends, so a relay can start waiting (take the lock) only once every such
-- writer has committed or rolled back: its next claim sees their rows, and every later writer
-- notifies. While it does not wait (busy), the relay watches max(seq) instead. A table whose notify
-- trigger was dropped (the cdc source) keeps it dropped.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '{{.Events}}'::regclass AND tgname = '{{.Short}}_notify') THEN
        CREATE OR REPLACE TRIGGER {{.Short}}_notify AFTER INSERT ON {{.Events}}
            FOR EACH STATEMENT WHEN (NOT pg_try_advisory_xact_lock_shared({{.WakeNamespace}}, {{.WakeLock}}))
            EXECUTE FUNCTION {{.Events}}_notify();
    END IF;
END
$$

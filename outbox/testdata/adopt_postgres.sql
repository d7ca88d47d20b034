-- install
SELECT set_config('search_path', current_setting('search_path') || ', pg_temp', true) WHERE current_setting('search_path') !~ '(^|,)\s*"?pg_temp"?\s*(,|$)';
CREATE OR REPLACE FUNCTION golden_relay_adopt_headers(h jsonb) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $adopt$
DECLARE
    header RECORD;
    result jsonb := '{}';
BEGIN
    IF h IS NULL OR jsonb_typeof(h) = 'null' THEN
        RETURN result;
    END IF;
    IF jsonb_typeof(h) <> 'object' THEN
        RAISE EXCEPTION 'outboxkit adopt: column % of % must hold a JSON object of headers, not a JSON %', 'headers', '"golden_adopt_team"."outbox_events"', jsonb_typeof(h)
            USING ERRCODE = 'check_violation', COLUMN = 'headers';
    END IF;
    FOR header IN SELECT key, value FROM jsonb_each(h) LOOP
        CONTINUE WHEN header.key IN ('aggregate_id', 'aggregate_type', 'created_at', 'event_id', 'event_type', 'handler_poisoned', 'outbox_topic', 'reason_poisoned', 'subscriber_poisoned', 'tenant_id', 'topic_poisoned') OR starts_with(header.key, '_watermill_') OR starts_with(header.key, 'outbox_')
            OR jsonb_typeof(header.value) = 'null';
        IF jsonb_typeof(header.value) IN ('object', 'array') THEN
            RAISE EXCEPTION 'outboxkit adopt: header % in column % of % is a JSON %; header values must be strings, numbers or booleans',
                to_json(header.key), 'headers', '"golden_adopt_team"."outbox_events"', jsonb_typeof(header.value) USING ERRCODE = 'check_violation', COLUMN = 'headers';
        END IF;
        result := result || jsonb_build_object(header.key, header.value #>> '{}');
    END LOOP;
    RETURN result;
END$adopt$;
CREATE OR REPLACE FUNCTION golden_relay_adopt_forward() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $adopt$BEGIN
    IF NEW."status" IS DISTINCT FROM 'PENDING' THEN
        RETURN NULL;
    END IF;
    INSERT INTO golden_relay (event_id, topic, aggregate_id, event_type, aggregate_type, payload, headers, created_at)
        VALUES (NEW."id", (lower(NEW."aggregate_type"::text) || '.events'), NEW."aggregate_id"::text, NEW."event_type"::text, NEW."aggregate_type"::text, convert_to(NEW."payload"::text, 'UTF8'), golden_relay_adopt_headers(NEW."headers"::text::jsonb), NEW."created_at"::timestamptz);
    RETURN NULL;
END$adopt$;
CREATE OR REPLACE FUNCTION golden_relay_adopt_mark() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $adopt$BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.status = 0 THEN
            UPDATE "golden_adopt_team"."outbox_events" SET "status" = 'PUBLISHED', "published_at" = now(), "next_retry_at" = NULL WHERE "id" = OLD.event_id;
        END IF;
        RETURN NULL;
    END IF;
    IF NEW.status = 1 AND OLD.status <> 1 THEN
        UPDATE "golden_adopt_team"."outbox_events" SET "status" = 'PUBLISHED', "published_at" = coalesce(NEW.published_at, now()), "next_retry_at" = NULL WHERE "id" = NEW.event_id;
    ELSIF NEW.status IN (2, 3) AND OLD.status NOT IN (2, 3) THEN
        UPDATE "golden_adopt_team"."outbox_events" SET "status" = 'FAILED', "retry_count" = NEW.attempts, "next_retry_at" = NULL WHERE "id" = NEW.event_id;
    ELSIF NEW.status = 0 AND OLD.status IN (2, 3) THEN
        UPDATE "golden_adopt_team"."outbox_events" SET "status" = 'PENDING', "retry_count" = 0, "next_retry_at" = NULL WHERE "id" = NEW.event_id;
    ELSIF NEW.status = 0 AND NEW.attempts IS DISTINCT FROM OLD.attempts THEN
        UPDATE "golden_adopt_team"."outbox_events" SET "retry_count" = NEW.attempts, "next_retry_at" = NEW.next_attempt_at WHERE "id" = NEW.event_id;
    END IF;
    RETURN NULL;
END$adopt$;
CREATE OR REPLACE TRIGGER golden_relay_adopt_forward AFTER INSERT ON "golden_adopt_team"."outbox_events"
    FOR EACH ROW EXECUTE FUNCTION golden_relay_adopt_forward();
CREATE OR REPLACE TRIGGER golden_relay_adopt_mark AFTER UPDATE OR DELETE ON golden_relay
    FOR EACH ROW EXECUTE FUNCTION golden_relay_adopt_mark();
-- backfill ([PENDING])
INSERT INTO golden_relay (event_id, topic, aggregate_id, event_type, aggregate_type, payload, headers, created_at)
    SELECT t."id", (lower(t."aggregate_type"::text) || '.events'), t."aggregate_id"::text, t."event_type"::text, t."aggregate_type"::text, convert_to(t."payload"::text, 'UTF8'), golden_relay_adopt_headers(t."headers"::text::jsonb), t."created_at"::timestamptz FROM "golden_adopt_team"."outbox_events" t
    WHERE t."status" = $1 AND NOT EXISTS (SELECT 1 FROM golden_relay r WHERE r.event_id = t."id")
    ORDER BY t."created_at", t."id";
-- undo --drop-relay-table
DROP TRIGGER IF EXISTS golden_relay_adopt_forward ON "golden_adopt_team"."outbox_events";
DROP FUNCTION IF EXISTS golden_relay_adopt_forward(), golden_relay_adopt_mark() CASCADE;
DROP FUNCTION IF EXISTS golden_relay_adopt_headers(jsonb);
DROP TABLE IF EXISTS golden_relay;
DROP TABLE IF EXISTS golden_relay_leases;
DROP TABLE IF EXISTS golden_relay_relays;
DROP TABLE IF EXISTS golden_relay_cdc_slots;
DROP TABLE IF EXISTS golden_relay_wal_slots;
DROP TABLE IF EXISTS golden_relay_wal_discarded;
DROP TABLE IF EXISTS golden_relay_installation;
DROP TABLE IF EXISTS golden_relay_units;
DROP TABLE IF EXISTS golden_relay_migrations;
DROP FUNCTION IF EXISTS golden_relay_notify(), golden_relay_key_hash(text, text, text), golden_relay_prepare(), golden_relay_schedule(), golden_relay_emit(text, text, text, text, bytea, jsonb, text, uuid, timestamptz, timestamptz), golden_relay_emit(text, text, text, text, bytea, jsonb, text, uuid, timestamptz), golden_relay_wal_guard(), golden_relay_wal_refuse(text), golden_relay_wal_discard() CASCADE;

-- outboxkit schema v10: the write side of the wal source for any language (docs/wal.md,
-- docs/writers.md). <table>_emit(...) checks an event the way outbox.Writer does (validate.go, and
-- ModeWAL's UTF-8 rule, which PostgreSQL text keeps by itself) with errors naming the argument,
-- then emits it as a transactional logical decoding message with the table's prefix
-- (outbox.Table.WALPrefix) and the same envelope, byte for byte, as outbox.Writer in ModeWAL
-- (outbox.AppendWALEnvelope; TestWALGoAndSQLEnvelopesAreIdentical). It returns the event id.
-- Arguments left out get the trigger's defaults (docs/writers.md); the payload's size is not
-- checked here (outbox.Config.MaxPayloadBytes belongs to the Go writer). Every statement can
-- run again.
CREATE OR REPLACE FUNCTION {{.Events}}_emit(
    topic TEXT, aggregate_type TEXT, aggregate_id TEXT, event_type TEXT,
    payload BYTEA DEFAULT ''::bytea, headers JSONB DEFAULT '{}'::jsonb, tenant_id TEXT DEFAULT '',
    event_id UUID DEFAULT NULL, created_at TIMESTAMPTZ DEFAULT NULL) RETURNS UUID
    LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    id      UUID := coalesce(event_id, gen_random_uuid());
    at      TIMESTAMPTZ := coalesce(created_at, now());
    texts   BYTEA[];
    content BYTEA;
    header  RECORD;
    name    BYTEA;
    value   BYTEA;
    size    BIGINT := 0;
    n       INT := 0;
    encoded BYTEA := ''::bytea;
BEGIN
    IF id = '00000000-0000-0000-0000-000000000000' THEN
        RAISE EXCEPTION 'outboxkit: event_id must not be the nil UUID' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(topic, '') = '' THEN
        RAISE EXCEPTION 'outboxkit: topic must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(convert_to(topic, 'UTF8')) > {{.MaxTextField}} OR topic !~ '^[A-Za-z0-9._:$-]+$' THEN
        RAISE EXCEPTION 'outboxkit: topic % may only contain letters, digits and . _ - : $ (1 to {{.MaxTextField}} characters)',
            to_json(topic) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(aggregate_id, '') = '' THEN
        RAISE EXCEPTION 'outboxkit: aggregate_id must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(event_type, '') = '' THEN
        RAISE EXCEPTION 'outboxkit: event_type must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    texts := ARRAY[convert_to(topic, 'UTF8'), convert_to(coalesce(aggregate_type, ''), 'UTF8'),
        convert_to(aggregate_id, 'UTF8'), convert_to(event_type, 'UTF8'), convert_to(coalesce(tenant_id, ''), 'UTF8')];
    FOR i IN 2 .. 5 LOOP
        IF octet_length(texts[i]) > {{.MaxTextField}} THEN
            RAISE EXCEPTION 'outboxkit: % is % bytes, the limit is {{.MaxTextField}}',
                (ARRAY['topic', 'aggregate_type', 'aggregate_id', 'event_type', 'tenant_id'])[i], octet_length(texts[i])
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    headers := coalesce(headers, '{}'::jsonb);
    IF jsonb_typeof(headers) <> 'object' THEN
        RAISE EXCEPTION 'outboxkit: headers must be a JSON object of string values, not a JSON %', jsonb_typeof(headers)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Headers in the byte order of their names, as outbox.AppendWALEnvelope sorts them.
    FOR header IN SELECT h.key, h.value FROM jsonb_each(headers) AS h ORDER BY convert_to(h.key, 'UTF8') LOOP
        IF jsonb_typeof(header.value) <> 'string' THEN
            RAISE EXCEPTION 'outboxkit: header % must be a JSON string, not a JSON %', to_json(header.key), jsonb_typeof(header.value)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF header.key IN ({{range $i, $h := .ReservedHeaders}}{{if $i}}, {{end}}'{{$h}}'{{end}}){{range .ReservedPrefixes}}
            OR starts_with(header.key, '{{.}}'){{end}} THEN
            RAISE EXCEPTION 'outboxkit: header % is reserved (outbox.IsReservedHeader)', to_json(header.key)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF header.key !~ '^[!-~]{1,255}$' THEN
            RAISE EXCEPTION 'outboxkit: header name % must be 1-255 printable ASCII characters without spaces', to_json(header.key)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        name := convert_to(header.key, 'UTF8');
        value := convert_to(header.value #>> '{}', 'UTF8');
        size := size + octet_length(name) + octet_length(value);
        IF size > {{.MaxHeadersBytes}} THEN
            RAISE EXCEPTION 'outboxkit: headers are more than {{.MaxHeadersBytes}} bytes (names and values), the limit is {{.MaxHeadersBytes}}'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        n := n + 1;
        encoded := encoded || set_byte('\x00'::bytea, 0, octet_length(name)) || name
            || substring(int4send(octet_length(value)) FROM 3) || value;
    END LOOP;
    IF extract(year FROM at AT TIME ZONE 'UTC') NOT BETWEEN 1 AND 9999 THEN
        RAISE EXCEPTION 'outboxkit: created_at %: the year must be between 1 and 9999', at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    payload := coalesce(payload, ''::bytea);
    -- The envelope of one event (outbox/wal.go, docs/wal.md): version 1, one event.
    content := '\x010001'::bytea || uuid_send(id) || int8send((extract(epoch FROM at) * 1000000)::int8);
    FOR i IN 1 .. 5 LOOP
        content := content || set_byte('\x00'::bytea, 0, octet_length(texts[i])) || texts[i];
    END LOOP;
    content := content || substring(int4send(n) FROM 3) || encoded || int4send(octet_length(payload)) || payload;
    PERFORM pg_logical_emit_message(true, '{{.WALPrefix}}', content);
    RETURN id;
END
$$

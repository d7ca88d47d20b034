-- outboxkit schema v14: <table>_emit schedules (docs/scheduled.md, docs/writers.md). It takes an
-- optional deliver_at, last: an event with one is written as a row of the outbox table with that
-- delivery time (status 4, scheduled), in the caller's transaction, as outbox.Writer does in
-- ModeWAL, after the same checks (and the year of deliver_at, as outbox.Event.Validate); the
-- wal relay's drain releases and publishes it when it is due. Without it, the function emits the
-- event as schema v12's does, byte for byte. A function with another argument list is another
-- function (an overload): the old one is dropped, so that calls without deliver_at resolve to
-- this one and outbox.Table.Functions names every function there is. The migration runs in one
-- transaction: a concurrent emit finds the old function or the new one. Every statement can run again.
DROP FUNCTION IF EXISTS {{.Events}}_emit(TEXT, TEXT, TEXT, TEXT, BYTEA, JSONB, TEXT, UUID, TIMESTAMPTZ)
-- statement
CREATE OR REPLACE FUNCTION {{.Events}}_emit(
    topic TEXT, aggregate_type TEXT, aggregate_id TEXT, event_type TEXT,
    payload BYTEA DEFAULT ''::bytea, headers JSONB DEFAULT '{}'::jsonb, tenant_id TEXT DEFAULT '',
    event_id UUID DEFAULT NULL, created_at TIMESTAMPTZ DEFAULT NULL, deliver_at TIMESTAMPTZ DEFAULT NULL) RETURNS UUID
    LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    id       UUID := coalesce(event_id, gen_random_uuid());
    at       TIMESTAMPTZ := coalesce(created_at, now());
    b_topic  BYTEA;
    b_type   BYTEA := convert_to(coalesce(aggregate_type, ''), 'UTF8');
    b_id     BYTEA;
    b_event  BYTEA;
    b_tenant BYTEA := convert_to(coalesce(tenant_id, ''), 'UTF8');
    bad_key  BYTEA;
    bad_name TEXT;
    n        BIGINT := 0;
    size     BIGINT := 0;
    encoded  BYTEA := ''::bytea;
    slots_ok BOOLEAN;
    bad_slot TEXT;
BEGIN
    IF id = '00000000-0000-0000-0000-000000000000' THEN
        RAISE EXCEPTION 'outboxkit: event_id must not be the nil UUID' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(topic, '') = '' THEN
        RAISE EXCEPTION 'outboxkit: topic must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(aggregate_id, '') = '' THEN
        RAISE EXCEPTION 'outboxkit: aggregate_id must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(event_type, '') = '' THEN
        RAISE EXCEPTION 'outboxkit: event_type must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    b_topic := convert_to(topic, 'UTF8');
    b_id := convert_to(aggregate_id, 'UTF8');
    b_event := convert_to(event_type, 'UTF8');
    IF octet_length(b_topic) > {{.MaxTextField}} OR topic !~ '^[A-Za-z0-9._:$-]+$' THEN
        RAISE EXCEPTION 'outboxkit: topic % may only contain letters, digits and . _ - : $ (1 to {{.MaxTextField}} characters)',
            to_json(topic) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(b_type) > {{.MaxTextField}} THEN
        RAISE EXCEPTION 'outboxkit: aggregate_type is % bytes, the limit is {{.MaxTextField}}', octet_length(b_type)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(b_id) > {{.MaxTextField}} THEN
        RAISE EXCEPTION 'outboxkit: aggregate_id is % bytes, the limit is {{.MaxTextField}}', octet_length(b_id)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(b_event) > {{.MaxTextField}} THEN
        RAISE EXCEPTION 'outboxkit: event_type is % bytes, the limit is {{.MaxTextField}}', octet_length(b_event)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(b_tenant) > {{.MaxTextField}} THEN
        RAISE EXCEPTION 'outboxkit: tenant_id is % bytes, the limit is {{.MaxTextField}}', octet_length(b_tenant)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    headers := coalesce(headers, '{}'::jsonb);
    IF jsonb_typeof(headers) <> 'object' THEN
        RAISE EXCEPTION 'outboxkit: headers must be a JSON object of string values, not a JSON %', jsonb_typeof(headers)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF headers <> '{}'::jsonb THEN
        -- One query: the headers encoded in the byte order of their names (as
        -- outbox.AppendWALEnvelope sorts them), their size, and the first bad name in that order.
        SELECT count(*), sum(octet_length(s.k) + octet_length(s.v)),
               string_agg(set_byte('\x00'::bytea, 0, octet_length(s.k)) || s.k || substring(int4send(octet_length(s.v)) FROM 3) || s.v,
                          ''::bytea ORDER BY s.k) FILTER (WHERE NOT s.bad),
               (array_agg(s.k ORDER BY s.k) FILTER (WHERE s.bad))[1]
          INTO n, size, encoded, bad_key
          FROM (SELECT convert_to(h.key, 'UTF8') AS k, convert_to(h.value #>> '{}', 'UTF8') AS v,
                       jsonb_typeof(h.value) <> 'string'
                       OR h.key IN ({{range $i, $h := .ReservedHeaders}}{{if $i}}, {{end}}'{{$h}}'{{end}}){{range .ReservedPrefixes}}
                       OR starts_with(h.key, '{{.}}'){{end}}
                       OR octet_length(h.key) > 255 OR h.key !~ '^[!-~]+$' AS bad
                  FROM jsonb_each(headers) AS h) AS s;
        IF bad_key IS NOT NULL THEN
            bad_name := convert_from(bad_key, 'UTF8');
            IF jsonb_typeof(headers -> bad_name) <> 'string' THEN
                RAISE EXCEPTION 'outboxkit: header % must be a JSON string, not a JSON %', to_json(bad_name), jsonb_typeof(headers -> bad_name)
                    USING ERRCODE = 'invalid_parameter_value';
            ELSIF bad_name IN ({{range $i, $h := .ReservedHeaders}}{{if $i}}, {{end}}'{{$h}}'{{end}}){{range .ReservedPrefixes}}
                OR starts_with(bad_name, '{{.}}'){{end}} THEN
                RAISE EXCEPTION 'outboxkit: header % is reserved (outbox.IsReservedHeader)', to_json(bad_name)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            RAISE EXCEPTION 'outboxkit: header name % must be 1-255 printable ASCII characters without spaces', to_json(bad_name)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF size > {{.MaxHeadersBytes}} THEN
            RAISE EXCEPTION 'outboxkit: headers are % bytes (names and values), the limit is {{.MaxHeadersBytes}}', size
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF extract(year FROM at AT TIME ZONE 'UTC') NOT BETWEEN 1 AND 9999 THEN
        RAISE EXCEPTION 'outboxkit: created_at %: the year must be between 1 and 9999', at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    payload := coalesce(payload, ''::bytea);
    IF deliver_at IS NOT NULL THEN
        IF extract(year FROM deliver_at AT TIME ZONE 'UTC') NOT BETWEEN 1 AND 9999 THEN
            RAISE EXCEPTION 'outboxkit: deliver_at %: the year must be between 1 and 9999', deliver_at
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- A scheduled event is a row, as outbox.Writer writes it in ModeWAL: the table's triggers
        -- compute its key hash, take its key's lock and make it scheduled (status 4); the relay's
        -- drain releases it when it is due. Like the Go writer's, this write emits nothing and
        -- so does not check the slot: the table keeps the event until a relay comes.
        INSERT INTO {{.Events}} (event_id, topic, aggregate_type, aggregate_id, event_type, payload, headers, tenant_id,
                                 created_at, deliver_at)
        VALUES (id, topic, coalesce(aggregate_type, ''), aggregate_id, event_type, payload, headers, coalesce(tenant_id, ''),
                at, deliver_at);
        RETURN id;
    END IF;
    -- No slot, no message: the same guard as outbox.Writer's statement.
    SELECT g.ok, g.bad INTO slots_ok, bad_slot FROM {{.Events}}_wal_guard() AS g;
    IF NOT slots_ok THEN
        PERFORM {{.Events}}_wal_refuse(bad_slot);
    END IF;
    -- The envelope of one event (outbox/wal.go, docs/wal.md): version 1, one event.
    PERFORM pg_logical_emit_message(true, '{{.WALPrefix}}', '\x010001'::bytea || uuid_send(id)
        || int8send((extract(epoch FROM at) * 1000000)::int8)
        || set_byte('\x00'::bytea, 0, octet_length(b_topic)) || b_topic
        || set_byte('\x00'::bytea, 0, octet_length(b_type)) || b_type
        || set_byte('\x00'::bytea, 0, octet_length(b_id)) || b_id
        || set_byte('\x00'::bytea, 0, octet_length(b_event)) || b_event
        || set_byte('\x00'::bytea, 0, octet_length(b_tenant)) || b_tenant
        || substring(int4send(n::int4) FROM 3) || encoded || int4send(octet_length(payload)) || payload);
    RETURN id;
END
$$

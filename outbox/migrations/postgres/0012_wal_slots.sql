-- outboxkit schema v12: no silent loss without a slot (docs/wal.md, "The slot"). A logical
-- decoding message is kept only by a replication slot: pg_logical_emit_message succeeds with no
-- slot at all, and the event is gone once the WAL is recycled. So every emit now checks in the
-- same statement that its slots exist and are not invalidated, and fails, naming the slot, when
-- one is not: <table>_emit every slot registered here (and at least one), outbox.Writer the slot
-- of its configuration. The business transaction cannot commit an event that no slot will read.
--
-- <table>_wal_slots is the register (outbox.CreateWALSlot writes it, with outboxkit wal-slot
-- create, outboxkit migrate --wal-slot or the wal relay's first start). A row outlives its slot
-- on purpose: it is how a relay tells its first start (no row: create the slot) from a slot that
-- existed and is gone (a row, no slot: dropped, invalidated by max_slot_wal_keep_size, or a
-- replica promoted without it), which it must not re-create by itself.
CREATE TABLE IF NOT EXISTS {{.Events}}_wal_slots (
    slot_name   TEXT        PRIMARY KEY,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The slot's first position (its consistent point, or its confirmed position when an
    -- existing slot was registered): events committed before it were never the slot's.
    created_lsn PG_LSN      NOT NULL,
    -- When an operator last replaced the lost slot by a new one (outbox.ResetWALSlot).
    reset_at    TIMESTAMPTZ
)
-- statement
-- ok: at least one slot is registered and every registered slot exists as a logical slot that
-- is not invalidated; bad: the first registered slot that is not so. <table>_emit checks it;
-- outbox.Writer checks the one slot it is configured with (outbox.Config.WALSlot), without this
-- register, which is cheaper. pg_get_replication_slots() rather than the pg_replication_slots
-- view: the view's join with pg_database costs more than the rest of the check. A slot of the
-- same name in another database of the cluster would pass here; the relay's check at start
-- (forwarder/internal/walslot) refuses it.
CREATE OR REPLACE FUNCTION {{.Events}}_wal_guard() RETURNS TABLE (ok BOOLEAN, bad TEXT)
    LANGUAGE sql STABLE AS $$
SELECT count(*) > 0 AND count(*) FILTER (WHERE NOT r.alive) = 0, min(r.slot_name) FILTER (WHERE NOT r.alive)
  FROM (SELECT w.slot_name, EXISTS (SELECT 1 FROM pg_catalog.pg_get_replication_slots() AS s
                                     WHERE s.slot_name = w.slot_name AND s.datoid IS NOT NULL
                                       AND s.wal_status IS DISTINCT FROM 'lost') AS alive
          FROM {{.Events}}_wal_slots AS w) AS r
$$
-- statement
-- Raises the error of a refused emit, naming the slot and what to do; it never returns.
CREATE OR REPLACE FUNCTION {{.Events}}_wal_refuse(slot TEXT) RETURNS PG_LSN
    LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    status TEXT;
BEGIN
    IF slot IS NULL THEN
        RAISE EXCEPTION 'outboxkit: no replication slot is registered for the outbox {{.Events}}: nothing would read this event, so it is refused'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Create the wal relay''s slot first: outboxkit wal-slot create <slot> (or outboxkit migrate --wal-slot <slot>), see docs/wal.md.';
    END IF;
    SELECT s.wal_status INTO status FROM pg_catalog.pg_replication_slots AS s
     WHERE s.slot_name = slot AND s.database = current_database() AND s.slot_type = 'logical';
    IF status = 'lost' THEN
        RAISE EXCEPTION 'outboxkit: replication slot "%" of the outbox {{.Events}} is invalidated (wal_status lost, max_slot_wal_keep_size): nothing would read this event, so it is refused', slot
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Events not yet relayed before the slot was lost are lost; see the runbook in docs/cdc.md, then outboxkit wal-slot reset ' || slot || '.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM {{.Events}}_wal_slots AS w WHERE w.slot_name = slot) THEN
        RAISE EXCEPTION 'outboxkit: replication slot "%" of the outbox {{.Events}} does not exist in this database and was never registered: nothing would read this event, so it is refused', slot
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Create it first: outboxkit wal-slot create ' || slot || ' (or outboxkit migrate --wal-slot ' || slot || '), see docs/wal.md.';
    END IF;
    RAISE EXCEPTION 'outboxkit: replication slot "%" of the outbox {{.Events}} does not exist in this database (dropped, or a replica promoted without it): nothing would read this event, so it is refused', slot
        USING ERRCODE = 'object_not_in_prerequisite_state',
              HINT = 'Events not yet relayed before the slot was lost are lost; see the runbook in docs/cdc.md, then outboxkit wal-slot reset ' || slot || '.';
END
$$
-- statement
-- <table>_emit of schema v10 with the guard before the emit; the envelope is unchanged.
CREATE OR REPLACE FUNCTION {{.Events}}_emit(
    topic TEXT, aggregate_type TEXT, aggregate_id TEXT, event_type TEXT,
    payload BYTEA DEFAULT ''::bytea, headers JSONB DEFAULT '{}'::jsonb, tenant_id TEXT DEFAULT '',
    event_id UUID DEFAULT NULL, created_at TIMESTAMPTZ DEFAULT NULL) RETURNS UUID
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

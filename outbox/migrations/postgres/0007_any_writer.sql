-- outboxkit schema v7: plain SQL is a first-class writer (docs/writers.md). An INSERT that leaves
-- key_hash NULL, from any language, gets in the database what outbox.Writer computes in Go:
-- outbox.KeyHash and PartitionOf, outbox.Writer's validation (validate.go), and the per-key
-- advisory lock of lock.go taken BEFORE the row's seq is drawn, so that seq order is commit order
-- per key among SQL and Go writers alike. outbox.Writer sets key_hash, so the trigger's WHEN
-- condition skips its rows: its cost does not change. Every statement can run again.
--
-- The key hash: 64-bit FNV-1a over the UTF-8 bytes of tenant_id, 0x1f, aggregate_type, 0x1f,
-- aggregate_id, masked to 63 bits (event.go). bigint arithmetic overflows instead of wrapping, so
-- the 64-bit state is kept as two 32-bit halves: FNV's prime is 2^40 + 435, and
-- (hi*2^32 + lo) * (256*2^32 + 435) mod 2^64 has the low half lo*435 mod 2^32 and the high half
-- hi*435 + lo*256 + (lo*435 >> 32) mod 2^32. The offset basis 14695981039346656037 is
-- 3421674724*2^32 + 2216829733.
CREATE OR REPLACE FUNCTION {{.Events}}_key_hash(tenant_id TEXT, aggregate_type TEXT, aggregate_id TEXT) RETURNS BIGINT
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    k     BYTEA  := convert_to(tenant_id || chr(31) || aggregate_type || chr(31) || aggregate_id, 'UTF8');
    hi    BIGINT := 3421674724;
    lo    BIGINT := 2216829733;
    low   BIGINT;
BEGIN
    FOR i IN 0 .. length(k) - 1 LOOP
        lo := lo # get_byte(k, i);
        low := lo * 435;
        hi := (hi * 435 + lo * 256 + (low >> 32)) & 4294967295;
        lo := low & 4294967295;
    END LOOP;
    RETURN ((hi & 2147483647) << 32) | lo;
END
$$
-- statement
-- The row of a plain-SQL writer: defaults for what it may leave out (event_id, tenant_id,
-- aggregate_type, payload, headers, created_at), outbox.Writer's checks with errors naming the
-- column, the key hash and partition, the key's lock, then a new seq drawn under that lock (the
-- seq DEFAULT was evaluated before this trigger ran, possibly long before the lock was granted).
CREATE OR REPLACE FUNCTION {{.Events}}_prepare() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    h      BIGINT;
    folded BIGINT;
    header RECORD;
    size   BIGINT := 0;
BEGIN
    NEW.event_id := coalesce(NEW.event_id, gen_random_uuid());
    IF NEW.event_id = '00000000-0000-0000-0000-000000000000' THEN
        RAISE EXCEPTION 'outboxkit: event_id must not be the nil UUID' USING ERRCODE = 'check_violation', COLUMN = 'event_id';
    END IF;
    IF coalesce(NEW.topic, '') = '' THEN
        RAISE EXCEPTION 'outboxkit: topic must not be empty' USING ERRCODE = 'check_violation', COLUMN = 'topic';
    END IF;
    IF octet_length(NEW.topic) > {{.MaxTextField}} OR NEW.topic !~ '^[A-Za-z0-9._:$-]+$' THEN
        RAISE EXCEPTION 'outboxkit: topic % may only contain letters, digits and . _ - : $ (1 to {{.MaxTextField}} characters)',
            to_json(NEW.topic) USING ERRCODE = 'check_violation', COLUMN = 'topic';
    END IF;
    IF coalesce(NEW.aggregate_id, '') = '' THEN
        RAISE EXCEPTION 'outboxkit: aggregate_id must not be empty' USING ERRCODE = 'check_violation', COLUMN = 'aggregate_id';
    END IF;
    IF coalesce(NEW.event_type, '') = '' THEN
        RAISE EXCEPTION 'outboxkit: event_type must not be empty' USING ERRCODE = 'check_violation', COLUMN = 'event_type';
    END IF;
    NEW.aggregate_type := coalesce(NEW.aggregate_type, '');
    NEW.tenant_id := coalesce(NEW.tenant_id, '');
    IF octet_length(NEW.aggregate_type) > {{.MaxTextField}} THEN
        RAISE EXCEPTION 'outboxkit: aggregate_type is % bytes, the limit is {{.MaxTextField}}', octet_length(NEW.aggregate_type)
            USING ERRCODE = 'check_violation', COLUMN = 'aggregate_type';
    END IF;
    IF octet_length(NEW.aggregate_id) > {{.MaxTextField}} THEN
        RAISE EXCEPTION 'outboxkit: aggregate_id is % bytes, the limit is {{.MaxTextField}}', octet_length(NEW.aggregate_id)
            USING ERRCODE = 'check_violation', COLUMN = 'aggregate_id';
    END IF;
    IF octet_length(NEW.event_type) > {{.MaxTextField}} THEN
        RAISE EXCEPTION 'outboxkit: event_type is % bytes, the limit is {{.MaxTextField}}', octet_length(NEW.event_type)
            USING ERRCODE = 'check_violation', COLUMN = 'event_type';
    END IF;
    IF octet_length(NEW.tenant_id) > {{.MaxTextField}} THEN
        RAISE EXCEPTION 'outboxkit: tenant_id is % bytes, the limit is {{.MaxTextField}}', octet_length(NEW.tenant_id)
            USING ERRCODE = 'check_violation', COLUMN = 'tenant_id';
    END IF;
    NEW.payload := coalesce(NEW.payload, ''::bytea);
    NEW.headers := coalesce(NEW.headers, '{}');
    IF jsonb_typeof(NEW.headers) <> 'object' THEN
        RAISE EXCEPTION 'outboxkit: headers must be a JSON object of string values, not a JSON %', jsonb_typeof(NEW.headers)
            USING ERRCODE = 'check_violation', COLUMN = 'headers';
    END IF;
    FOR header IN SELECT key, value FROM jsonb_each(NEW.headers) LOOP
        IF jsonb_typeof(header.value) <> 'string' THEN
            RAISE EXCEPTION 'outboxkit: header % must be a JSON string, not a JSON %', to_json(header.key), jsonb_typeof(header.value)
                USING ERRCODE = 'check_violation', COLUMN = 'headers';
        END IF;
        IF header.key IN ({{range $i, $h := .ReservedHeaders}}{{if $i}}, {{end}}'{{$h}}'{{end}}){{range .ReservedPrefixes}}
            OR starts_with(header.key, '{{.}}'){{end}} THEN
            RAISE EXCEPTION 'outboxkit: header % is reserved (outbox.IsReservedHeader)', to_json(header.key)
                USING ERRCODE = 'check_violation', COLUMN = 'headers';
        END IF;
        IF header.key !~ '^[!-~]{1,255}$' THEN
            RAISE EXCEPTION 'outboxkit: header name % must be 1-255 printable ASCII characters without spaces', to_json(header.key)
                USING ERRCODE = 'check_violation', COLUMN = 'headers';
        END IF;
        size := size + octet_length(header.key) + octet_length(header.value #>> '{}');
    END LOOP;
    IF size > {{.MaxHeadersBytes}} THEN
        RAISE EXCEPTION 'outboxkit: headers are % bytes (names and values), the limit is {{.MaxHeadersBytes}}', size
            USING ERRCODE = 'check_violation', COLUMN = 'headers';
    END IF;
    NEW.created_at := coalesce(NEW.created_at, now());
    IF extract(year FROM NEW.created_at AT TIME ZONE 'UTC') NOT BETWEEN 1 AND 9999 THEN
        RAISE EXCEPTION 'outboxkit: created_at %: the year must be between 1 and 9999', NEW.created_at
            USING ERRCODE = 'check_violation', COLUMN = 'created_at';
    END IF;
    h := {{.Events}}_key_hash(NEW.tenant_id, NEW.aggregate_type, NEW.aggregate_id);
    NEW.key_hash := h;
    NEW.partition_no := h % {{.Partitions}};
    -- lock.go's foldKeyHash: the low 32 bits of h XOR h >> 32, as a signed int4.
    folded := (h # (h >> 32)) & 4294967295;
    IF folded >= 2147483648 THEN
        folded := folded - 4294967296;
    END IF;
    PERFORM pg_advisory_xact_lock({{.AdvisoryNamespace}}, folded::int4);
    NEW.seq := nextval(pg_get_serial_sequence('{{.Events}}', 'seq'));
    RETURN NEW;
END
$$
-- statement
CREATE OR REPLACE TRIGGER {{.Short}}_prepare BEFORE INSERT ON {{.Events}}
    FOR EACH ROW WHEN (NEW.key_hash IS NULL) EXECUTE FUNCTION {{.Events}}_prepare()

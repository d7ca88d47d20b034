-- outboxkit schema v4 (MySQL): plain SQL is a first-class writer (docs/writers.md). A row
-- inserted with key_hash NULL, from any language, gets in the database what outbox.Writer
-- computes in Go: defaults for the columns it may leave out, outbox.Writer's validation
-- (validate.go) with errors naming the column, outbox.KeyHash and PartitionOf, and the lock of the
-- key's slot row in <table>_key_locks (the row outbox.Writer locks). InnoDB assigns the
-- AUTO_INCREMENT seq after BEFORE INSERT triggers (NEW.seq is 0 in here), so a single-row INSERT
-- draws its seq under the key's lock: seq order is commit order per key among SQL and Go writers.
-- A multi-row INSERT or INSERT ... SELECT reserves the seqs of all its rows when its first row is
-- written, before the later rows' locks: docs/writers.md says what that costs.
-- outbox.Writer sets key_hash: its rows skip the trigger's body.
--
-- The key hash: 64-bit FNV-1a over the UTF-8 bytes of tenant_id, 0x1f, aggregate_type, 0x1f,
-- aggregate_id, masked to 63 bits (event.go). BIGINT UNSIGNED arithmetic fails on overflow
-- instead of wrapping, so the 64-bit state is kept as two 32-bit halves: FNV's prime is
-- 2^40 + 435, and (hi*2^32 + lo) * (256*2^32 + 435) mod 2^64 has the low half lo*435 mod 2^32
-- and the high half hi*435 + lo*256 + (lo*435 >> 32) mod 2^32. The offset basis
-- 14695981039346656037 is 3421674724*2^32 + 2216829733.
--
-- One statement, created only if missing: MySQL commits DDL implicitly, so a rerun completes a
-- run that stopped before it. Values are compared as binary strings, as Go compares bytes: the
-- table's collation is case-insensitive and pads spaces.
CREATE TRIGGER IF NOT EXISTS {{.Events}}_prepare BEFORE INSERT ON {{.Events}} FOR EACH ROW
IF NEW.key_hash IS NULL THEN
BEGIN
    -- Declared in here, not for outbox.Writer's rows: a trigger's declarations cost each row.
    DECLARE k VARBINARY(1024);
    DECLARE i, n INT;
    DECLARE hi, lo, low BIGINT UNSIGNED;
    DECLARE v_size BIGINT DEFAULT 0;
    DECLARE v_msg VARCHAR(512);
    DECLARE v_col VARCHAR(64);
    DECLARE v_names, v_values, v_name, v_value LONGTEXT;
    DECLARE v_slot INT;
    SET NEW.event_id = LOWER(COALESCE(NEW.event_id, CAST(UUID() AS CHAR(36))));
    IF CAST(NEW.event_id AS BINARY) NOT REGEXP '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        SET v_col = 'event_id', v_msg = CONCAT('outboxkit: event_id ', JSON_QUOTE(LEFT(NEW.event_id, 64)), ' is not a UUID (8-4-4-4-12 hexadecimal digits)');
    ELSEIF NEW.event_id = '00000000-0000-0000-0000-000000000000' THEN
        SET v_col = 'event_id', v_msg = 'outboxkit: event_id must not be the nil UUID';
    ELSEIF COALESCE(LENGTH(NEW.topic), 0) = 0 THEN
        SET v_col = 'topic', v_msg = 'outboxkit: topic must not be empty';
    ELSEIF LENGTH(NEW.topic) > {{.MaxTextField}} OR CAST(NEW.topic AS BINARY) NOT REGEXP '^[A-Za-z0-9._:$-]+$' THEN
        SET v_col = 'topic', v_msg = CONCAT('outboxkit: topic ', JSON_QUOTE(LEFT(NEW.topic, 64)),
            ' may only contain letters, digits and . _ - : $ (1 to {{.MaxTextField}} characters)');
    ELSEIF COALESCE(LENGTH(NEW.aggregate_id), 0) = 0 THEN
        SET v_col = 'aggregate_id', v_msg = 'outboxkit: aggregate_id must not be empty';
    ELSEIF COALESCE(LENGTH(NEW.event_type), 0) = 0 THEN
        SET v_col = 'event_type', v_msg = 'outboxkit: event_type must not be empty';
    ELSEIF LENGTH(NEW.aggregate_type) > {{.MaxTextField}} THEN
        SET v_col = 'aggregate_type', v_msg = CONCAT('outboxkit: aggregate_type is ', LENGTH(NEW.aggregate_type), ' bytes, the limit is {{.MaxTextField}}');
    ELSEIF LENGTH(NEW.aggregate_id) > {{.MaxTextField}} THEN
        SET v_col = 'aggregate_id', v_msg = CONCAT('outboxkit: aggregate_id is ', LENGTH(NEW.aggregate_id), ' bytes, the limit is {{.MaxTextField}}');
    ELSEIF LENGTH(NEW.event_type) > {{.MaxTextField}} THEN
        SET v_col = 'event_type', v_msg = CONCAT('outboxkit: event_type is ', LENGTH(NEW.event_type), ' bytes, the limit is {{.MaxTextField}}');
    ELSEIF LENGTH(NEW.tenant_id) > {{.MaxTextField}} THEN
        SET v_col = 'tenant_id', v_msg = CONCAT('outboxkit: tenant_id is ', LENGTH(NEW.tenant_id), ' bytes, the limit is {{.MaxTextField}}');
    ELSEIF NEW.headers IS NOT NULL AND (NOT JSON_VALID(NEW.headers) OR JSON_TYPE(NEW.headers) <> 'OBJECT') THEN
        SET v_col = 'headers', v_msg = 'outboxkit: headers must be a JSON object of string values';
    END IF;
    IF v_msg IS NOT NULL THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, COLUMN_NAME = v_col;
    END IF;
    SET NEW.aggregate_type = COALESCE(NEW.aggregate_type, ''), NEW.tenant_id = COALESCE(NEW.tenant_id, ''),
        NEW.payload = COALESCE(NEW.payload, ''), NEW.headers = COALESCE(NEW.headers, '{}'),
        NEW.created_at = COALESCE(NEW.created_at, UTC_TIMESTAMP(6));
    -- Each header: a free, valid name and a JSON string value, as outbox.Writer's validateHeaders.
    SET v_names = JSON_KEYS(NEW.headers), i = 0, n = JSON_LENGTH(v_names);
    WHILE i < n DO
        SET v_name = JSON_UNQUOTE(JSON_EXTRACT(v_names, CONCAT('$[', i, ']')));
        SET v_value = JSON_EXTRACT(NEW.headers, CONCAT('$.', JSON_QUOTE(v_name)));
        IF CAST(v_name AS BINARY) IN ({{range $i, $h := .ReservedHeaders}}{{if $i}}, {{end}}'{{$h}}'{{end}}){{range .ReservedPrefixes}}
            OR LEFT(CAST(v_name AS BINARY), LENGTH('{{.}}')) = '{{.}}'{{end}} THEN
            SET v_msg = CONCAT('outboxkit: header ', JSON_QUOTE(v_name), ' is reserved (outbox.IsReservedHeader)');
        ELSEIF LENGTH(v_name) NOT BETWEEN 1 AND 255 OR CAST(v_name AS BINARY) NOT REGEXP '^[!-~]+$' THEN
            SET v_msg = CONCAT('outboxkit: header name ', JSON_QUOTE(LEFT(v_name, 64)), ' must be 1-255 printable ASCII characters without spaces');
        ELSEIF COALESCE(JSON_TYPE(v_value), '') <> 'STRING' THEN
            SET v_msg = CONCAT('outboxkit: header ', JSON_QUOTE(v_name), ' must be a JSON string, not a JSON ', LOWER(COALESCE(JSON_TYPE(v_value), 'null')));
        END IF;
        IF v_msg IS NOT NULL THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, COLUMN_NAME = 'headers';
        END IF;
        SET v_size = v_size + LENGTH(v_name) + LENGTH(JSON_UNQUOTE(v_value)), i = i + 1;
    END WHILE;
    -- A name given twice is listed once above; every value must be a string all the same.
    SET v_values = COALESCE(JSON_EXTRACT(NEW.headers, '$.*'), '[]'), i = 0, n = JSON_LENGTH(v_values);
    WHILE i < n DO
        IF JSON_TYPE(JSON_EXTRACT(v_values, CONCAT('$[', i, ']'))) <> 'STRING' THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'outboxkit: headers must be a JSON object of string values', COLUMN_NAME = 'headers';
        END IF;
        SET i = i + 1;
    END WHILE;
    IF v_size > {{.MaxHeadersBytes}} THEN
        SET v_msg = CONCAT('outboxkit: headers are ', v_size, ' bytes (v_names and values), the limit is {{.MaxHeadersBytes}}');
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, COLUMN_NAME = 'headers';
    END IF;
    SET k = CAST(CONCAT(CONVERT(NEW.tenant_id USING utf8mb4), CHAR(31 USING utf8mb4), CONVERT(NEW.aggregate_type USING utf8mb4),
        CHAR(31 USING utf8mb4), CONVERT(NEW.aggregate_id USING utf8mb4)) AS BINARY);
    SET hi = 3421674724, lo = 2216829733, i = 1, n = LENGTH(k);
    WHILE i <= n DO
        SET lo = lo ^ ORD(SUBSTRING(k, i, 1));
        SET low = lo * 435;
        SET hi = (hi * 435 + lo * 256 + (low >> 32)) & 4294967295;
        SET lo = low & 4294967295, i = i + 1;
    END WHILE;
    SET NEW.key_hash = ((hi & 2147483647) << 32) | lo;
    SET NEW.partition_no = NEW.key_hash MOD {{.Partitions}};
    -- outbox.Writer's key lock (adapter.go keyLockQuery): the slot row of the key, to commit.
    SELECT slot INTO v_slot FROM {{.KeyLocks}} WHERE slot = NEW.key_hash MOD {{.KeyLockSlots}} FOR UPDATE;
END;
END IF

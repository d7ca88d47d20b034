-- ensureLeaseRows
INSERT IGNORE INTO golden_outbox_leases (lease_group, partition_no) VALUES (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?);
INSERT IGNORE INTO golden_outbox_leases (lease_group, partition_no) VALUES (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?), (?, ?);

-- heartbeat (acquire)
INSERT INTO golden_outbox_relays (lease_group, owner, heartbeat_at) VALUES (?, ?, (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) ON DUPLICATE KEY UPDATE heartbeat_at = VALUES(heartbeat_at);
INSERT INTO golden_outbox_relays (lease_group, owner, heartbeat_at) VALUES (?, ?, (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) ON DUPLICATE KEY UPDATE heartbeat_at = VALUES(heartbeat_at);
DELETE FROM golden_outbox_relays WHERE lease_group = ? AND heartbeat_at < (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND);
DELETE FROM golden_outbox_relays WHERE lease_group = ? AND heartbeat_at < (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND);
SELECT COUNT(*) FROM golden_outbox_relays WHERE lease_group = ?;
SELECT COUNT(*) FROM golden_outbox_relays WHERE lease_group = ?;
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = ? AND owner = ? ORDER BY partition_no;
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = ? AND owner = ? ORDER BY partition_no;
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = ? AND (owner IS NULL OR expires_at < (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) ORDER BY partition_no LIMIT ?;
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = ? AND (owner IS NULL OR expires_at < (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) ORDER BY partition_no LIMIT ?;
SET SESSION idle_transaction_timeout = 5;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE SKIP LOCKED;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE SKIP LOCKED;
UPDATE golden_outbox_leases SET owner = ?, epoch = epoch + 1, expires_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) WHERE lease_group = ? AND (owner IS NULL OR expires_at < (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);
UPDATE golden_outbox_leases SET owner = ?, epoch = epoch + 1, expires_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) WHERE lease_group = ? AND (owner IS NULL OR expires_at < (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);
SET SESSION idle_transaction_timeout = DEFAULT;

-- liveLeases
SELECT partition_no, epoch FROM golden_outbox_leases WHERE lease_group = ? AND owner = ? AND partition_no % ? = ? AND expires_at > (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) ORDER BY partition_no;
SELECT partition_no, epoch FROM golden_outbox_leases WHERE lease_group = ? AND owner = ? AND partition_no % ? = ? AND expires_at > (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) ORDER BY partition_no;

-- releaseDue
SET SESSION idle_transaction_timeout = 5;
SELECT seq FROM golden_outbox WHERE status = 4 AND deliver_at <= (SELECT (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ORDER BY deliver_at, seq LIMIT ? FOR UPDATE SKIP LOCKED;
SELECT seq FROM golden_outbox WHERE status = 4 AND deliver_at <= (SELECT (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ORDER BY deliver_at, seq LIMIT ? FOR UPDATE SKIP LOCKED;
SET SESSION idle_transaction_timeout = DEFAULT;

-- nextDue
SELECT (SELECT deliver_at FROM golden_outbox WHERE status = 4 AND deliver_at <= (SELECT (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ORDER BY deliver_at LIMIT 1), (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND);
SELECT (SELECT deliver_at FROM golden_outbox WHERE status = 4 AND deliver_at <= (SELECT (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ORDER BY deliver_at LIMIT 1), (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND);

-- claim
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no, LENGTH(payload) AS bytes, SUM(LENGTH(payload)) OVER (ORDER BY seq) AS running FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM golden_outbox IGNORE INDEX FOR ORDER BY (PRIMARY) WHERE status = 0 AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) AND key_hash NOT IN (SELECT key_hash FROM (SELECT DISTINCT p.key_hash FROM golden_outbox p WHERE p.partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) AND (p.status = 2 OR (p.status = 0 AND p.attempts > 0 AND p.next_attempt_at > ?))) parked) ORDER BY seq LIMIT ?) c) w WHERE running <= ? OR running = bytes ORDER BY seq;
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no, LENGTH(payload) AS bytes, SUM(LENGTH(payload)) OVER (ORDER BY seq) AS running FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM golden_outbox IGNORE INDEX FOR ORDER BY (PRIMARY) WHERE status = 0 AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) AND key_hash NOT IN (SELECT key_hash FROM (SELECT DISTINCT p.key_hash FROM golden_outbox p WHERE p.partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) AND (p.status = 2 OR (p.status = 0 AND p.attempts > 0 AND p.next_attempt_at > ?))) parked) ORDER BY seq LIMIT ?) c) w WHERE running <= ? OR running = bytes ORDER BY seq;

-- claim (tenants)
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no, LENGTH(payload) AS bytes, SUM(LENGTH(payload)) OVER (ORDER BY seq) AS running FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM golden_outbox IGNORE INDEX FOR ORDER BY (PRIMARY) WHERE status = 0 AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) AND key_hash NOT IN (SELECT key_hash FROM (SELECT DISTINCT p.key_hash FROM golden_outbox p WHERE p.partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) AND (p.status = 2 OR (p.status = 0 AND p.attempts > 0 AND p.next_attempt_at > ?))) parked) AND tenant_id IN (?, ?) ORDER BY seq LIMIT ?) c) w WHERE running <= ? OR running = bytes ORDER BY seq;
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no, LENGTH(payload) AS bytes, SUM(LENGTH(payload)) OVER (ORDER BY seq) AS running FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM golden_outbox IGNORE INDEX FOR ORDER BY (PRIMARY) WHERE status = 0 AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) AND key_hash NOT IN (SELECT key_hash FROM (SELECT DISTINCT p.key_hash FROM golden_outbox p WHERE p.partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) AND (p.status = 2 OR (p.status = 0 AND p.attempts > 0 AND p.next_attempt_at > ?))) parked) AND tenant_id IN (?, ?) ORDER BY seq LIMIT ?) c) w WHERE running <= ? OR running = bytes ORDER BY seq;

-- acknowledge (fence, ack, fail)
SET SESSION idle_transaction_timeout = 5;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE;
DELETE e FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox e ON e.seq = p.n;
DELETE e FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox e ON e.seq = p.n;
UPDATE golden_outbox SET status = ?, attempts = ?, next_attempt_at = ?, last_error = ? WHERE seq = ? AND status = 0;
UPDATE golden_outbox SET status = ?, attempts = ?, next_attempt_at = ?, last_error = ? WHERE seq = ? AND status = 0;
SET SESSION idle_transaction_timeout = DEFAULT;

-- ack (retain)
UPDATE golden_outbox SET status = 1, published_at = ?, next_attempt_at = NULL WHERE seq IN (?);
UPDATE golden_outbox SET status = 1, published_at = ?, next_attempt_at = NULL WHERE seq IN (?);

-- fail (dead)
UPDATE golden_outbox SET status = ?, attempts = ?, next_attempt_at = ?, last_error = ? WHERE seq = ? AND status = 0;
UPDATE golden_outbox SET status = ?, attempts = ?, next_attempt_at = ?, last_error = ? WHERE seq = ? AND status = 0;

-- prune
DELETE FROM golden_outbox WHERE status = 1 AND published_at < ? ORDER BY published_at LIMIT ?;
DELETE FROM golden_outbox WHERE status = 1 AND published_at < ? ORDER BY published_at LIMIT ?;

-- stats
SELECT tenant_id, status, COUNT(*), MIN(CASE WHEN deliver_at > created_at AND deliver_at <= (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) THEN deliver_at ELSE created_at END) FROM golden_outbox WHERE status IN (0, 2) GROUP BY tenant_id, status;
SELECT tenant_id, status, COUNT(*), MIN(CASE WHEN deliver_at > created_at AND deliver_at <= (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) THEN deliver_at ELSE created_at END) FROM golden_outbox WHERE status IN (0, 2) GROUP BY tenant_id, status;

-- ownedPartitions
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = ? AND owner = ? ORDER BY partition_no;
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = ? AND owner = ? ORDER BY partition_no;

-- renew
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = ? AND owner = ? ORDER BY partition_no;
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = ? AND owner = ? ORDER BY partition_no;
SET SESSION idle_transaction_timeout = 5;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE;
UPDATE golden_outbox_leases SET expires_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) WHERE lease_group = ? AND owner = ? AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);
UPDATE golden_outbox_leases SET expires_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) WHERE lease_group = ? AND owner = ? AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);
SET SESSION idle_transaction_timeout = DEFAULT;

-- release
SET SESSION idle_transaction_timeout = 5;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE;
UPDATE golden_outbox_leases SET owner = NULL, expires_at = ? WHERE lease_group = ? AND owner = ? AND partition_no IN (?, ?);
UPDATE golden_outbox_leases SET owner = NULL, expires_at = ? WHERE lease_group = ? AND owner = ? AND partition_no IN (?, ?);
SET SESSION idle_transaction_timeout = DEFAULT;

-- acquire
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = ? AND (owner IS NULL OR expires_at < (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) ORDER BY partition_no LIMIT ?;
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = ? AND (owner IS NULL OR expires_at < (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) ORDER BY partition_no LIMIT ?;
SET SESSION idle_transaction_timeout = 5;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE SKIP LOCKED;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE SKIP LOCKED;
UPDATE golden_outbox_leases SET owner = ?, epoch = epoch + 1, expires_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) WHERE lease_group = ? AND (owner IS NULL OR expires_at < (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) AND partition_no IN (?, ?);
UPDATE golden_outbox_leases SET owner = ?, epoch = epoch + 1, expires_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) WHERE lease_group = ? AND (owner IS NULL OR expires_at < (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) AND partition_no IN (?, ?);
SET SESSION idle_transaction_timeout = DEFAULT;

-- lockLeases (skip locked)
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE SKIP LOCKED;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE SKIP LOCKED;

-- heartbeat (units)
INSERT INTO golden_outbox_relays (lease_group, owner, heartbeat_at) VALUES (?, ?, (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) ON DUPLICATE KEY UPDATE heartbeat_at = VALUES(heartbeat_at);
INSERT INTO golden_outbox_relays (lease_group, owner, heartbeat_at) VALUES (?, ?, (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)) ON DUPLICATE KEY UPDATE heartbeat_at = VALUES(heartbeat_at);
DELETE FROM golden_outbox_relays WHERE lease_group = ? AND heartbeat_at < (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND);
DELETE FROM golden_outbox_relays WHERE lease_group = ? AND heartbeat_at < (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND);
SELECT COUNT(*) FROM golden_outbox_relays WHERE lease_group = ?;
SELECT COUNT(*) FROM golden_outbox_relays WHERE lease_group = ?;
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = ? AND owner = ? ORDER BY partition_no;
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = ? AND owner = ? ORDER BY partition_no;
SET SESSION idle_transaction_timeout = 5;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE;
UPDATE golden_outbox_leases SET expires_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) WHERE lease_group = ? AND owner = ? AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);
UPDATE golden_outbox_leases SET expires_at = (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) WHERE lease_group = ? AND owner = ? AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);
SET SESSION idle_transaction_timeout = DEFAULT;

-- installationID
SELECT installation_id, bound_to FROM golden_outbox_installation;
SELECT DATABASE();
SHOW GLOBAL VARIABLES LIKE 'server_uuid';

-- ensureUnitRow
INSERT IGNORE INTO golden_outbox_units (unit, cleaned, cleaned_at) VALUES (?, '', ?);
INSERT IGNORE INTO golden_outbox_units (unit, cleaned, cleaned_at) VALUES (?, '', ?);

-- cleanedDigest
SELECT cleaned FROM golden_outbox_units WHERE unit = ?;
SELECT cleaned FROM golden_outbox_units WHERE unit = ?;

-- recordedUnits
SELECT unit FROM golden_outbox_units;

-- recordUnitCount
INSERT IGNORE INTO golden_outbox_units (unit, cleaned, cleaned_at) VALUES (?, ?, ?);
INSERT IGNORE INTO golden_outbox_units (unit, cleaned, cleaned_at) VALUES (?, ?, ?);

-- unitCount
SELECT cleaned FROM golden_outbox_units WHERE unit = ?;
SELECT cleaned FROM golden_outbox_units WHERE unit = ?;

-- markCleaned
UPDATE golden_outbox_units SET cleaned = CASE unit WHEN ? THEN ? WHEN ? THEN ? END, cleaned_at = ? WHERE unit IN (?, ?);
UPDATE golden_outbox_units SET cleaned = CASE unit WHEN ? THEN ? WHEN ? THEN ? END, cleaned_at = ? WHERE unit IN (?, ?);

-- applyCheckpoint
SELECT e.seq, e.event_id, e.partition_no FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox e ON e.seq = p.n;
SELECT e.seq, e.event_id, e.partition_no FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox e ON e.seq = p.n;
UPDATE golden_outbox SET status = ?, attempts = ?, next_attempt_at = ?, last_error = ? WHERE seq = ? AND status = 0;
UPDATE golden_outbox SET status = ?, attempts = ?, next_attempt_at = ?, last_error = ? WHERE seq = ? AND status = 0;

-- admin Status
SELECT topic, SUM(CASE WHEN status = 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 0 AND attempts > 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 2 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 3 THEN 1 ELSE 0 END), MIN(CASE WHEN status = 0 THEN CASE WHEN deliver_at > created_at AND deliver_at <= (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) THEN deliver_at ELSE created_at END END) FROM golden_outbox WHERE status IN (0, 2, 3) GROUP BY topic ORDER BY topic;
SELECT topic, SUM(CASE WHEN status = 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 0 AND attempts > 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 2 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 3 THEN 1 ELSE 0 END), MIN(CASE WHEN status = 0 THEN CASE WHEN deliver_at > created_at AND deliver_at <= (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) THEN deliver_at ELSE created_at END END) FROM golden_outbox WHERE status IN (0, 2, 3) GROUP BY topic ORDER BY topic;

-- admin DeadLetters
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at FROM golden_outbox WHERE status = 2 ORDER BY seq LIMIT ?;
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at FROM golden_outbox WHERE status = 2 ORDER BY seq LIMIT ?;

-- admin Replay
UPDATE golden_outbox SET status = 0, attempts = 0, next_attempt_at = ?, last_error = NULL WHERE status = 2 AND event_id IN (?);
UPDATE golden_outbox SET status = 0, attempts = 0, next_attempt_at = ?, last_error = NULL WHERE status = 2 AND event_id IN (?);

-- admin Discard
UPDATE golden_outbox SET next_attempt_at = ? WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN (SELECT key_hash FROM (SELECT key_hash FROM golden_outbox WHERE status = 2 AND event_id IN (?)) d);
UPDATE golden_outbox SET next_attempt_at = ? WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN (SELECT key_hash FROM (SELECT key_hash FROM golden_outbox WHERE status = 2 AND event_id IN (?)) d);
DELETE FROM golden_outbox WHERE status = 2 AND event_id IN (?);
DELETE FROM golden_outbox WHERE status = 2 AND event_id IN (?);

-- admin BlockedKeys
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > ? AND h.topic = ? AND h.key_hash = ? AND h.tenant_id = ? AND h.aggregate_type = ? AND h.aggregate_id = ? AND h.event_id IN (?) ORDER BY h.seq LIMIT ?;
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > ? AND h.topic = ? AND h.key_hash = ? AND h.tenant_id = ? AND h.aggregate_type = ? AND h.aggregate_id = ? AND h.event_id IN (?) ORDER BY h.seq LIMIT ?;

-- blocked gauges
SELECT h.status, COUNT(*), MIN(CASE WHEN h.deliver_at > h.created_at AND h.deliver_at <= (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) THEN h.deliver_at ELSE h.created_at END) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head GROUP BY h.status;
SELECT h.status, COUNT(*), MIN(CASE WHEN h.deliver_at > h.created_at AND h.deliver_at <= (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) THEN h.deliver_at ELSE h.created_at END) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head GROUP BY h.status;

-- admin FindDeadLetters
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND topic = ? AND event_type = ? AND key_hash = ? AND tenant_id = ? AND aggregate_type = ? AND aggregate_id = ? AND event_id IN (?) AND created_at >= ? AND created_at < ? AND seq > ? ORDER BY seq LIMIT ?;
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND topic = ? AND event_type = ? AND key_hash = ? AND tenant_id = ? AND aggregate_type = ? AND aggregate_id = ? AND event_id IN (?) AND created_at >= ? AND created_at < ? AND seq > ? ORDER BY seq LIMIT ?;

-- admin FailureGroups
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND topic = ? AND event_type = ? AND key_hash = ? AND tenant_id = ? AND aggregate_type = ? AND aggregate_id = ? AND event_id IN (?) AND created_at >= ? AND created_at < ? AND seq > ? ORDER BY seq LIMIT ?;
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND topic = ? AND event_type = ? AND key_hash = ? AND tenant_id = ? AND aggregate_type = ? AND aggregate_id = ? AND event_id IN (?) AND created_at >= ? AND created_at < ? AND seq > ? ORDER BY seq LIMIT ?;
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > ? AND h.topic = ? AND h.key_hash = ? AND h.tenant_id = ? AND h.aggregate_type = ? AND h.aggregate_id = ? AND h.event_id IN (?) ORDER BY h.seq LIMIT ?;
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > ? AND h.topic = ? AND h.key_hash = ? AND h.tenant_id = ? AND h.aggregate_type = ? AND h.aggregate_id = ? AND h.event_id IN (?) ORDER BY h.seq LIMIT ?;

-- admin Event
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status, payload, headers, key_hash, partition_no, next_attempt_at FROM golden_outbox WHERE event_id = ?;
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status, payload, headers, key_hash, partition_no, next_attempt_at FROM golden_outbox WHERE event_id = ?;

-- admin Relays
SELECT lease_group, owner, heartbeat_at FROM golden_outbox_relays;
SELECT lease_group, partition_no, COALESCE(owner, ''), expires_at < ?, epoch FROM golden_outbox_leases ORDER BY lease_group, partition_no;
SELECT lease_group, partition_no, COALESCE(owner, ''), expires_at < ?, epoch FROM golden_outbox_leases ORDER BY lease_group, partition_no;

-- admin SkipKeys
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > ? AND h.topic = ? AND h.key_hash = ? AND h.tenant_id = ? AND h.aggregate_type = ? AND h.aggregate_id = ? AND h.event_id IN (?) ORDER BY h.seq LIMIT ?;
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > ? AND h.topic = ? AND h.key_hash = ? AND h.tenant_id = ? AND h.aggregate_type = ? AND h.aggregate_id = ? AND h.event_id IN (?) ORDER BY h.seq LIMIT ?;
UPDATE golden_outbox SET status = 3, next_attempt_at = NULL WHERE seq IN (?) AND (status = 2 OR (status = 0 AND attempts > 0));
UPDATE golden_outbox SET status = 3, next_attempt_at = NULL WHERE seq IN (?) AND (status = 2 OR (status = 0 AND attempts > 0));
UPDATE golden_outbox SET next_attempt_at = ? WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN (?);
UPDATE golden_outbox SET next_attempt_at = ? WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN (?);

-- admin ReplayDeadLetters
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND topic = ? AND event_type = ? AND key_hash = ? AND tenant_id = ? AND aggregate_type = ? AND aggregate_id = ? AND event_id IN (?) AND created_at >= ? AND created_at < ? AND seq > ? ORDER BY seq LIMIT ?;
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND topic = ? AND event_type = ? AND key_hash = ? AND tenant_id = ? AND aggregate_type = ? AND aggregate_id = ? AND event_id IN (?) AND created_at >= ? AND created_at < ? AND seq > ? ORDER BY seq LIMIT ?;
UPDATE golden_outbox SET status = 0, attempts = 0, next_attempt_at = ?, last_error = NULL WHERE status IN (2, 3) AND seq IN (?);
UPDATE golden_outbox SET status = 0, attempts = 0, next_attempt_at = ?, last_error = NULL WHERE status IN (2, 3) AND seq IN (?);

-- admin DiscardDeadLetters
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND topic = ? AND event_type = ? AND key_hash = ? AND tenant_id = ? AND aggregate_type = ? AND aggregate_id = ? AND event_id IN (?) AND created_at >= ? AND created_at < ? AND seq > ? ORDER BY seq LIMIT ?;
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND topic = ? AND event_type = ? AND key_hash = ? AND tenant_id = ? AND aggregate_type = ? AND aggregate_id = ? AND event_id IN (?) AND created_at >= ? AND created_at < ? AND seq > ? ORDER BY seq LIMIT ?;
UPDATE golden_outbox SET next_attempt_at = ? WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN (?);
UPDATE golden_outbox SET next_attempt_at = ? WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN (?);
DELETE FROM golden_outbox WHERE status IN (2, 3) AND seq IN (?);
DELETE FROM golden_outbox WHERE status IN (2, 3) AND seq IN (?);

-- admin (tenants) Status
SELECT topic, SUM(CASE WHEN status = 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 0 AND attempts > 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 2 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 3 THEN 1 ELSE 0 END), MIN(CASE WHEN status = 0 THEN CASE WHEN deliver_at > created_at AND deliver_at <= (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) THEN deliver_at ELSE created_at END END) FROM golden_outbox WHERE status IN (0, 2, 3) AND tenant_id IN (?, ?) GROUP BY topic ORDER BY topic;
SELECT topic, SUM(CASE WHEN status = 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 0 AND attempts > 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 2 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 3 THEN 1 ELSE 0 END), MIN(CASE WHEN status = 0 THEN CASE WHEN deliver_at > created_at AND deliver_at <= (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) THEN deliver_at ELSE created_at END END) FROM golden_outbox WHERE status IN (0, 2, 3) AND tenant_id IN (?, ?) GROUP BY topic ORDER BY topic;

-- admin (tenants) BlockedKeys
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > ? AND h.tenant_id IN (?, ?) AND h.topic = ? ORDER BY h.seq LIMIT ?;
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > ? AND h.tenant_id IN (?, ?) AND h.topic = ? ORDER BY h.seq LIMIT ?;

-- admin (tenants) FindDeadLetters
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND tenant_id IN (?, ?) AND topic = ? AND seq > ? ORDER BY seq LIMIT ?;
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND tenant_id IN (?, ?) AND topic = ? AND seq > ? ORDER BY seq LIMIT ?;

-- admin (tenants) Event
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status, payload, headers, key_hash, partition_no, next_attempt_at FROM golden_outbox WHERE event_id = ? AND tenant_id IN (?, ?);
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status, payload, headers, key_hash, partition_no, next_attempt_at FROM golden_outbox WHERE event_id = ? AND tenant_id IN (?, ?);

-- admin (tenants) SkipKeys
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > ? AND h.tenant_id IN (?, ?) AND h.topic = ? ORDER BY h.seq LIMIT ?;
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > ? AND h.tenant_id IN (?, ?) AND h.topic = ? ORDER BY h.seq LIMIT ?;
UPDATE golden_outbox SET status = 3, next_attempt_at = NULL WHERE seq IN (?) AND (status = 2 OR (status = 0 AND attempts > 0)) AND tenant_id IN (?, ?);
UPDATE golden_outbox SET status = 3, next_attempt_at = NULL WHERE seq IN (?) AND (status = 2 OR (status = 0 AND attempts > 0)) AND tenant_id IN (?, ?);
UPDATE golden_outbox SET next_attempt_at = ? WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN (?);
UPDATE golden_outbox SET next_attempt_at = ? WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN (?);

-- admin (tenants) ReplayDeadLetters
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND tenant_id IN (?, ?) AND topic = ? AND seq > ? ORDER BY seq LIMIT ?;
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND tenant_id IN (?, ?) AND topic = ? AND seq > ? ORDER BY seq LIMIT ?;
UPDATE golden_outbox SET status = 0, attempts = 0, next_attempt_at = ?, last_error = NULL WHERE status IN (2, 3) AND seq IN (?) AND tenant_id IN (?, ?);
UPDATE golden_outbox SET status = 0, attempts = 0, next_attempt_at = ?, last_error = NULL WHERE status IN (2, 3) AND seq IN (?) AND tenant_id IN (?, ?);

-- admin (tenants) DiscardDeadLetters
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND tenant_id IN (?, ?) AND topic = ? AND seq > ? ORDER BY seq LIMIT ?;
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND tenant_id IN (?, ?) AND topic = ? AND seq > ? ORDER BY seq LIMIT ?;
UPDATE golden_outbox SET next_attempt_at = ? WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN (?);
UPDATE golden_outbox SET next_attempt_at = ? WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN (?);
DELETE FROM golden_outbox WHERE status IN (2, 3) AND seq IN (?) AND tenant_id IN (?, ?);
DELETE FROM golden_outbox WHERE status IN (2, 3) AND seq IN (?) AND tenant_id IN (?, ?);

-- releaseAll
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = ? AND owner = ? ORDER BY partition_no;
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = ? AND owner = ? ORDER BY partition_no;
SET SESSION idle_transaction_timeout = 5;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE;
SELECT l.partition_no, l.owner, l.epoch FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS p STRAIGHT_JOIN golden_outbox_leases l ON l.lease_group = ? AND l.partition_no = p.n ORDER BY p.n FOR UPDATE;
UPDATE golden_outbox_leases SET owner = NULL, expires_at = ? WHERE lease_group = ? AND owner = ? AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);
UPDATE golden_outbox_leases SET owner = NULL, expires_at = ? WHERE lease_group = ? AND owner = ? AND partition_no IN (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);
SET SESSION idle_transaction_timeout = DEFAULT;
DELETE FROM golden_outbox_relays WHERE lease_group = ? AND owner = ?;
DELETE FROM golden_outbox_relays WHERE lease_group = ? AND owner = ?;


-- ensureLeaseRows
INSERT INTO golden_outbox_leases (lease_group, partition_no) VALUES ($1, $2), ($3, $4), ($5, $6), ($7, $8), ($9, $10), ($11, $12), ($13, $14), ($15, $16), ($17, $18), ($19, $20), ($21, $22), ($23, $24), ($25, $26), ($27, $28), ($29, $30), ($31, $32), ($33, $34), ($35, $36), ($37, $38), ($39, $40), ($41, $42), ($43, $44), ($45, $46), ($47, $48), ($49, $50), ($51, $52), ($53, $54), ($55, $56), ($57, $58), ($59, $60), ($61, $62), ($63, $64), ($65, $66), ($67, $68), ($69, $70), ($71, $72), ($73, $74), ($75, $76), ($77, $78), ($79, $80), ($81, $82), ($83, $84), ($85, $86), ($87, $88), ($89, $90), ($91, $92), ($93, $94), ($95, $96), ($97, $98), ($99, $100), ($101, $102), ($103, $104), ($105, $106), ($107, $108), ($109, $110), ($111, $112), ($113, $114), ($115, $116), ($117, $118), ($119, $120), ($121, $122), ($123, $124), ($125, $126), ($127, $128) ON CONFLICT DO NOTHING;

-- heartbeat (acquire)
INSERT INTO golden_outbox_relays (lease_group, owner, heartbeat_at) VALUES ($1, $2, (clock_timestamp() + $3::bigint * interval '1 microsecond')) ON CONFLICT (lease_group, owner) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at;
DELETE FROM golden_outbox_relays WHERE lease_group = $1 AND heartbeat_at < (clock_timestamp() + $2::bigint * interval '1 microsecond');
SELECT COUNT(*) FROM golden_outbox_relays WHERE lease_group = $1;
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = $1 AND owner = $2 ORDER BY partition_no;
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = $1 AND (owner IS NULL OR expires_at < (clock_timestamp() + $2::bigint * interval '1 microsecond')) ORDER BY partition_no LIMIT $3;
SET LOCAL idle_in_transaction_session_timeout = 5000;
SELECT partition_no, owner, epoch FROM golden_outbox_leases WHERE lease_group = $1 AND partition_no IN ($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65) ORDER BY partition_no FOR UPDATE SKIP LOCKED;
UPDATE golden_outbox_leases SET owner = $1, epoch = epoch + 1, expires_at = (clock_timestamp() + $2::bigint * interval '1 microsecond') WHERE lease_group = $3 AND (owner IS NULL OR expires_at < (clock_timestamp() + $4::bigint * interval '1 microsecond')) AND partition_no IN ($5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65, $66, $67, $68);

-- liveLeases
SELECT partition_no, epoch FROM golden_outbox_leases WHERE lease_group = $1 AND owner = $2 AND partition_no % $3 = $4 AND expires_at > (clock_timestamp() + $5::bigint * interval '1 microsecond') ORDER BY partition_no;

-- releaseDue
SET LOCAL enable_sort = off;
UPDATE golden_outbox SET status = 0 WHERE seq = ANY(ARRAY(SELECT seq FROM golden_outbox WHERE status = 4 AND deliver_at <= (SELECT (clock_timestamp() + $1::bigint * interval '1 microsecond')) AND partition_no IN ($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65) ORDER BY deliver_at, seq LIMIT $66 FOR UPDATE SKIP LOCKED));

-- nextDue
SELECT (SELECT deliver_at FROM golden_outbox WHERE status = 4 AND deliver_at <= (SELECT (clock_timestamp() + $1::bigint * interval '1 microsecond')) AND partition_no IN ($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65) ORDER BY deliver_at LIMIT 1), (clock_timestamp() + $66::bigint * interval '1 microsecond');

-- claim
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no, LENGTH(payload) AS bytes, SUM(LENGTH(payload)) OVER (ORDER BY seq) AS running FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM golden_outbox WHERE status = 0 AND partition_no IN ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64) AND key_hash NOT IN (SELECT key_hash FROM (SELECT DISTINCT p.key_hash FROM golden_outbox p WHERE p.partition_no IN ($65, $66, $67, $68, $69, $70, $71, $72, $73, $74, $75, $76, $77, $78, $79, $80, $81, $82, $83, $84, $85, $86, $87, $88, $89, $90, $91, $92, $93, $94, $95, $96, $97, $98, $99, $100, $101, $102, $103, $104, $105, $106, $107, $108, $109, $110, $111, $112, $113, $114, $115, $116, $117, $118, $119, $120, $121, $122, $123, $124, $125, $126, $127, $128) AND (p.status = 2 OR (p.status = 0 AND p.attempts > 0 AND p.next_attempt_at > $129))) parked) ORDER BY seq LIMIT $130) c) w WHERE running <= $131 OR running = bytes ORDER BY seq;

-- claim (tenants)
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no, LENGTH(payload) AS bytes, SUM(LENGTH(payload)) OVER (ORDER BY seq) AS running FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM golden_outbox WHERE status = 0 AND partition_no IN ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64) AND key_hash NOT IN (SELECT key_hash FROM (SELECT DISTINCT p.key_hash FROM golden_outbox p WHERE p.partition_no IN ($65, $66, $67, $68, $69, $70, $71, $72, $73, $74, $75, $76, $77, $78, $79, $80, $81, $82, $83, $84, $85, $86, $87, $88, $89, $90, $91, $92, $93, $94, $95, $96, $97, $98, $99, $100, $101, $102, $103, $104, $105, $106, $107, $108, $109, $110, $111, $112, $113, $114, $115, $116, $117, $118, $119, $120, $121, $122, $123, $124, $125, $126, $127, $128) AND (p.status = 2 OR (p.status = 0 AND p.attempts > 0 AND p.next_attempt_at > $129))) parked) AND tenant_id IN ($130, $131) ORDER BY seq LIMIT $132) c) w WHERE running <= $133 OR running = bytes ORDER BY seq;

-- acknowledge (fence, ack, fail)
SET LOCAL idle_in_transaction_session_timeout = 5000;
SELECT partition_no, owner, epoch FROM golden_outbox_leases WHERE lease_group = $1 AND partition_no IN ($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65) ORDER BY partition_no FOR UPDATE;
DELETE FROM golden_outbox WHERE seq IN ($1);
UPDATE golden_outbox SET status = $1, attempts = $2, next_attempt_at = $3, last_error = $4 WHERE seq = $5 AND status = 0;

-- ack (retain)
UPDATE golden_outbox SET status = 1, published_at = $1, next_attempt_at = NULL WHERE seq IN ($2);

-- fail (dead)
UPDATE golden_outbox SET status = $1, attempts = $2, next_attempt_at = $3, last_error = $4 WHERE seq = $5 AND status = 0;

-- prune
DELETE FROM golden_outbox WHERE seq IN (SELECT seq FROM golden_outbox WHERE status = 1 AND published_at < $1 LIMIT $2);

-- stats
SELECT tenant_id, status, COUNT(*), MIN(CASE WHEN deliver_at > created_at AND deliver_at <= (clock_timestamp() + $1::bigint * interval '1 microsecond') THEN deliver_at ELSE created_at END) FROM golden_outbox WHERE status IN (0, 2) GROUP BY tenant_id, status;

-- ownedPartitions
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = $1 AND owner = $2 ORDER BY partition_no;

-- renew
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = $1 AND owner = $2 ORDER BY partition_no;
SET LOCAL idle_in_transaction_session_timeout = 5000;
SELECT partition_no, owner, epoch FROM golden_outbox_leases WHERE lease_group = $1 AND partition_no IN ($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65) ORDER BY partition_no FOR UPDATE;
UPDATE golden_outbox_leases SET expires_at = (clock_timestamp() + $1::bigint * interval '1 microsecond') WHERE lease_group = $2 AND owner = $3 AND partition_no IN ($4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65, $66, $67);

-- release
SET LOCAL idle_in_transaction_session_timeout = 5000;
SELECT partition_no, owner, epoch FROM golden_outbox_leases WHERE lease_group = $1 AND partition_no IN ($2, $3) ORDER BY partition_no FOR UPDATE;
UPDATE golden_outbox_leases SET owner = NULL, expires_at = $1 WHERE lease_group = $2 AND owner = $3 AND partition_no IN ($4, $5);

-- acquire
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = $1 AND (owner IS NULL OR expires_at < (clock_timestamp() + $2::bigint * interval '1 microsecond')) ORDER BY partition_no LIMIT $3;
SET LOCAL idle_in_transaction_session_timeout = 5000;
SELECT partition_no, owner, epoch FROM golden_outbox_leases WHERE lease_group = $1 AND partition_no IN ($2, $3) ORDER BY partition_no FOR UPDATE SKIP LOCKED;
UPDATE golden_outbox_leases SET owner = $1, epoch = epoch + 1, expires_at = (clock_timestamp() + $2::bigint * interval '1 microsecond') WHERE lease_group = $3 AND (owner IS NULL OR expires_at < (clock_timestamp() + $4::bigint * interval '1 microsecond')) AND partition_no IN ($5, $6);

-- lockLeases (skip locked)
SELECT partition_no, owner, epoch FROM golden_outbox_leases WHERE lease_group = $1 AND partition_no IN ($2, $3, $4, $5) ORDER BY partition_no FOR UPDATE SKIP LOCKED;

-- heartbeat (units)
INSERT INTO golden_outbox_relays (lease_group, owner, heartbeat_at) VALUES ($1, $2, (clock_timestamp() + $3::bigint * interval '1 microsecond')) ON CONFLICT (lease_group, owner) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at;
DELETE FROM golden_outbox_relays WHERE lease_group = $1 AND heartbeat_at < (clock_timestamp() + $2::bigint * interval '1 microsecond');
SELECT COUNT(*) FROM golden_outbox_relays WHERE lease_group = $1;
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = $1 AND owner = $2 ORDER BY partition_no;
SET LOCAL idle_in_transaction_session_timeout = 5000;
SELECT partition_no, owner, epoch FROM golden_outbox_leases WHERE lease_group = $1 AND partition_no IN ($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65) ORDER BY partition_no FOR UPDATE;
UPDATE golden_outbox_leases SET expires_at = (clock_timestamp() + $1::bigint * interval '1 microsecond') WHERE lease_group = $2 AND owner = $3 AND partition_no IN ($4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65, $66, $67);

-- installationID
SELECT installation_id, bound_to FROM golden_outbox_installation;
SELECT (SELECT system_identifier FROM pg_control_system())::text, (SELECT oid FROM pg_database WHERE datname = current_database())::text;

-- ensureUnitRow
INSERT INTO golden_outbox_units (unit, cleaned, cleaned_at) VALUES ($1, '', $2) ON CONFLICT DO NOTHING;

-- cleanedDigest
SELECT cleaned FROM golden_outbox_units WHERE unit = $1;

-- recordedUnits
SELECT unit FROM golden_outbox_units;

-- recordUnitCount
INSERT INTO golden_outbox_units (unit, cleaned, cleaned_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING;

-- unitCount
SELECT cleaned FROM golden_outbox_units WHERE unit = $1;

-- markCleaned
UPDATE golden_outbox_units SET cleaned = CASE unit WHEN $1 THEN $2 WHEN $3 THEN $4 END, cleaned_at = $5 WHERE unit IN ($6, $7);

-- applyCheckpoint
SELECT seq, event_id, partition_no FROM golden_outbox WHERE seq IN ($1, $2);
UPDATE golden_outbox SET status = $1, attempts = $2, next_attempt_at = $3, last_error = $4 WHERE seq = $5 AND status = 0;

-- cdc admit
SELECT seq, status = 0 AND next_attempt_at IS NULL AND key_hash NOT IN (SELECT p.key_hash FROM golden_outbox p WHERE p.partition_no = ANY((SELECT $2::smallint[])::smallint[]) AND p.key_hash = ANY((SELECT $3::bigint[])::bigint[]) AND (p.status = 2 OR p.next_attempt_at IS NOT NULL)) FROM golden_outbox WHERE seq = ANY((SELECT $1::bigint[])::bigint[]);

-- cdc transactionsRunning
SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'transactionid' AND transactionid::text = ANY($1));

-- cdc markRetry
WITH owned AS (SELECT l.partition_no FROM golden_outbox_leases l WHERE l.lease_group = $1 AND l.owner = $2 AND l.partition_no = ANY((SELECT $3::int[])::int[]) AND l.epoch = ((SELECT $4::bigint[])::bigint[])[array_position((SELECT $3::int[])::int[], l.partition_no)] ORDER BY l.partition_no FOR UPDATE OF l), marked AS (UPDATE golden_outbox e SET next_attempt_at = clock_timestamp(), commit_lsn = NULLIF(m.lsn, 0) FROM unnest((SELECT $5::bigint[])::bigint[], (SELECT $6::bigint[])::bigint[]) AS m(seq, lsn) WHERE e.seq = m.seq AND e.status = 0 AND e.next_attempt_at IS NULL AND e.partition_no = ANY(ARRAY(SELECT partition_no FROM owned)) RETURNING 1) SELECT partition_no, (SELECT COUNT(*) FROM marked) FROM owned;

-- cdc markParkedUpTo
UPDATE golden_outbox SET next_attempt_at = clock_timestamp() WHERE status = 0 AND next_attempt_at IS NULL AND seq <= $1 AND key_hash IN (SELECT p.key_hash FROM golden_outbox p WHERE p.status = 2 OR p.next_attempt_at IS NOT NULL);

-- cdc maxSeq
SELECT COALESCE(MAX(seq), 0) FROM golden_outbox;

-- cdc claimRetry
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no, claim_order, LENGTH(payload) AS bytes, SUM(LENGTH(payload)) OVER (ORDER BY claim_order, seq) AS running FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no, COALESCE(commit_lsn, 0) AS claim_order FROM golden_outbox WHERE status = 0 AND partition_no IN ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64) AND key_hash NOT IN (SELECT key_hash FROM (SELECT DISTINCT p.key_hash FROM golden_outbox p WHERE p.partition_no IN ($65, $66, $67, $68, $69, $70, $71, $72, $73, $74, $75, $76, $77, $78, $79, $80, $81, $82, $83, $84, $85, $86, $87, $88, $89, $90, $91, $92, $93, $94, $95, $96, $97, $98, $99, $100, $101, $102, $103, $104, $105, $106, $107, $108, $109, $110, $111, $112, $113, $114, $115, $116, $117, $118, $119, $120, $121, $122, $123, $124, $125, $126, $127, $128) AND (p.status = 2 OR (p.status = 0 AND p.attempts > 0 AND p.next_attempt_at > $129))) parked) AND next_attempt_at IS NOT NULL ORDER BY claim_order, seq LIMIT $130) c) w WHERE running <= $131 OR running = bytes ORDER BY claim_order, seq;

-- cdc claimUpTo
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no, LENGTH(payload) AS bytes, SUM(LENGTH(payload)) OVER (ORDER BY seq) AS running FROM (SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, created_at, attempts, partition_no FROM golden_outbox WHERE status = 0 AND partition_no IN ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64) AND key_hash NOT IN (SELECT key_hash FROM (SELECT DISTINCT p.key_hash FROM golden_outbox p WHERE p.partition_no IN ($65, $66, $67, $68, $69, $70, $71, $72, $73, $74, $75, $76, $77, $78, $79, $80, $81, $82, $83, $84, $85, $86, $87, $88, $89, $90, $91, $92, $93, $94, $95, $96, $97, $98, $99, $100, $101, $102, $103, $104, $105, $106, $107, $108, $109, $110, $111, $112, $113, $114, $115, $116, $117, $118, $119, $120, $121, $122, $123, $124, $125, $126, $127, $128) AND (p.status = 2 OR (p.status = 0 AND p.attempts > 0 AND p.next_attempt_at > $129))) parked) AND seq <= $130 ORDER BY seq LIMIT $131) c) w WHERE running <= $132 OR running = bytes ORDER BY seq;

-- cdc releaseDueByWrite
WITH due AS (SELECT seq FROM golden_outbox WHERE status = 4 AND deliver_at <= (SELECT clock_timestamp()) ORDER BY deliver_at, seq LIMIT $1 FOR UPDATE SKIP LOCKED), gone AS (DELETE FROM golden_outbox WHERE seq IN (SELECT seq FROM due) RETURNING *) INSERT INTO golden_outbox SELECT r.* FROM (SELECT * FROM gone ORDER BY seq) g, LATERAL jsonb_populate_record(NULL::golden_outbox, to_jsonb(g) || jsonb_build_object('seq', nextval(pg_get_serial_sequence('golden_outbox', 'seq')))) r RETURNING seq;

-- cdc otherLiveOwners
SELECT COUNT(*) FROM golden_outbox_leases WHERE lease_group = $1 AND owner IS NOT NULL AND owner <> $2 AND expires_at > clock_timestamp();

-- cdc setSlotDrained
INSERT INTO golden_outbox_cdc_slots (slot_name, drained_at) VALUES ($1, now()) ON CONFLICT (slot_name) DO UPDATE SET drained_at = now();

-- cdc slotDrained
SELECT COALESCE((SELECT drained_at IS NOT NULL FROM golden_outbox_cdc_slots WHERE slot_name = $1), false);

-- cdc ackFenced
WITH owned AS (SELECT l.partition_no FROM golden_outbox_leases l WHERE l.lease_group = $1 AND l.owner = $2 AND l.partition_no = ANY((SELECT $3::int[])::int[]) AND l.epoch = ((SELECT $4::bigint[])::bigint[])[array_position((SELECT $3::int[])::int[], l.partition_no)] ORDER BY l.partition_no FOR UPDATE OF l), acked AS (DELETE FROM golden_outbox WHERE seq = ANY((SELECT $5::bigint[])::bigint[]) AND partition_no = ANY(ARRAY(SELECT partition_no FROM owned)) RETURNING 1) SELECT partition_no FROM owned;

-- cdc strandedRows
SELECT COUNT(*), COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - MIN(GREATEST(created_at, deliver_at))), 0)::float8 FROM golden_outbox WHERE status = 0 AND next_attempt_at IS NULL AND created_at < clock_timestamp() - make_interval(secs => $1) AND (deliver_at IS NULL OR deliver_at < clock_timestamp() - make_interval(secs => $1));

-- wal parkFenced
SET LOCAL idle_in_transaction_session_timeout = 5000;
SELECT partition_no, owner, epoch FROM golden_outbox_leases WHERE lease_group = $1 AND partition_no IN ($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65) ORDER BY partition_no FOR UPDATE;
INSERT INTO golden_outbox (event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, partition_no, created_at, status, attempts, next_attempt_at, last_error) SELECT $1::uuid, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10, $11, $12, $13, $14::timestamptz, $15 WHERE NOT EXISTS (SELECT 1 FROM golden_outbox WHERE partition_no = $16 AND key_hash = $17 AND event_id = $18::uuid) AND NOT EXISTS (SELECT 1 FROM golden_outbox_wal_discarded WHERE event_id = $19::uuid);

-- wal parkedKeys
SELECT DISTINCT key_hash FROM golden_outbox WHERE status IN (0, 2);

-- admin WAL
SELECT created_at, created_lsn::text FROM golden_outbox_wal_slots WHERE slot_name = $1;
SELECT database IS NOT DISTINCT FROM current_database() AND slot_type = 'logical', plugin, wal_status, active, confirmed_flush_lsn::text, pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint, safe_wal_size FROM pg_catalog.pg_replication_slots WHERE slot_name = $1;
SELECT pg_catalog.pg_current_wal_lsn()::text, s.active_pid, r.sent_lsn::text, r.flush_lsn::text, r.reply_time FROM (SELECT 1) AS one LEFT JOIN pg_catalog.pg_replication_slots s ON s.slot_name = $1 LEFT JOIN pg_catalog.pg_stat_replication r ON r.pid = s.active_pid;
SELECT tenant_id, aggregate_type, aggregate_id, count(*), count(*) FILTER (WHERE status = 2), min(created_at), count(*) OVER () FROM golden_outbox WHERE status IN (0, 2) GROUP BY tenant_id, aggregate_type, aggregate_id ORDER BY min(seq) LIMIT $1;

-- admin Status
SELECT topic, SUM(CASE WHEN status = 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 0 AND attempts > 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 2 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 3 THEN 1 ELSE 0 END), MIN(CASE WHEN status = 0 THEN CASE WHEN deliver_at > created_at AND deliver_at <= (clock_timestamp() + $1::bigint * interval '1 microsecond') THEN deliver_at ELSE created_at END END) FROM golden_outbox WHERE status IN (0, 2, 3) GROUP BY topic ORDER BY topic;

-- admin DeadLetters
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at FROM golden_outbox WHERE status = 2 ORDER BY seq LIMIT $1;

-- admin Replay
UPDATE golden_outbox SET status = 0, attempts = 0, next_attempt_at = $1, last_error = NULL WHERE status = 2 AND event_id IN ($2);

-- admin Discard
UPDATE golden_outbox AS e SET next_attempt_at = $1, commit_lsn = (SELECT MAX(p.commit_lsn) FROM golden_outbox p WHERE p.key_hash = e.key_hash AND p.seq < e.seq AND p.status = 0 AND p.next_attempt_at IS NOT NULL) WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN (SELECT key_hash FROM (SELECT key_hash FROM golden_outbox WHERE status = 2 AND event_id IN ($2)) d);
DELETE FROM golden_outbox WHERE status = 2 AND event_id IN ($1);

-- admin BlockedKeys
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > $1 AND h.topic = $2 AND h.key_hash = $3 AND h.tenant_id = $4 AND h.aggregate_type = $5 AND h.aggregate_id = $6 AND h.event_id IN ($7) ORDER BY h.seq LIMIT $8;

-- blocked gauges
SELECT h.status, COUNT(*), MIN(CASE WHEN h.deliver_at > h.created_at AND h.deliver_at <= (clock_timestamp() + $1::bigint * interval '1 microsecond') THEN h.deliver_at ELSE h.created_at END) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head GROUP BY h.status;

-- admin FindDeadLetters
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND topic = $1 AND event_type = $2 AND key_hash = $3 AND tenant_id = $4 AND aggregate_type = $5 AND aggregate_id = $6 AND event_id IN ($7) AND created_at >= $8 AND created_at < $9 AND seq > $10 ORDER BY seq LIMIT $11;

-- admin FailureGroups
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND topic = $1 AND event_type = $2 AND key_hash = $3 AND tenant_id = $4 AND aggregate_type = $5 AND aggregate_id = $6 AND event_id IN ($7) AND created_at >= $8 AND created_at < $9 AND seq > $10 ORDER BY seq LIMIT $11;
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > $1 AND h.topic = $2 AND h.key_hash = $3 AND h.tenant_id = $4 AND h.aggregate_type = $5 AND h.aggregate_id = $6 AND h.event_id IN ($7) ORDER BY h.seq LIMIT $8;

-- admin Event
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status, payload, headers, key_hash, partition_no, next_attempt_at FROM golden_outbox WHERE event_id = $1;

-- admin Relays
SELECT lease_group, owner, heartbeat_at FROM golden_outbox_relays;
SELECT lease_group, partition_no, COALESCE(owner, ''), expires_at < $1, epoch FROM golden_outbox_leases ORDER BY lease_group, partition_no;

-- admin SkipKeys
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > $1 AND h.topic = $2 AND h.key_hash = $3 AND h.tenant_id = $4 AND h.aggregate_type = $5 AND h.aggregate_id = $6 AND h.event_id IN ($7) ORDER BY h.seq LIMIT $8;
UPDATE golden_outbox SET status = 3, next_attempt_at = NULL WHERE seq IN ($1) AND (status = 2 OR (status = 0 AND attempts > 0));
UPDATE golden_outbox AS e SET next_attempt_at = $1, commit_lsn = (SELECT MAX(p.commit_lsn) FROM golden_outbox p WHERE p.key_hash = e.key_hash AND p.seq < e.seq AND p.status = 0 AND p.next_attempt_at IS NOT NULL) WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN ($2);

-- admin ReplayDeadLetters
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND topic = $1 AND event_type = $2 AND key_hash = $3 AND tenant_id = $4 AND aggregate_type = $5 AND aggregate_id = $6 AND event_id IN ($7) AND created_at >= $8 AND created_at < $9 AND seq > $10 ORDER BY seq LIMIT $11;
UPDATE golden_outbox SET status = 0, attempts = 0, next_attempt_at = $1, last_error = NULL WHERE status IN (2, 3) AND seq IN ($2);

-- admin DiscardDeadLetters
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND topic = $1 AND event_type = $2 AND key_hash = $3 AND tenant_id = $4 AND aggregate_type = $5 AND aggregate_id = $6 AND event_id IN ($7) AND created_at >= $8 AND created_at < $9 AND seq > $10 ORDER BY seq LIMIT $11;
UPDATE golden_outbox AS e SET next_attempt_at = $1, commit_lsn = (SELECT MAX(p.commit_lsn) FROM golden_outbox p WHERE p.key_hash = e.key_hash AND p.seq < e.seq AND p.status = 0 AND p.next_attempt_at IS NOT NULL) WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN ($2);
DELETE FROM golden_outbox WHERE status IN (2, 3) AND seq IN ($1);

-- admin (tenants) Status
SELECT topic, SUM(CASE WHEN status = 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 0 AND attempts > 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 2 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 3 THEN 1 ELSE 0 END), MIN(CASE WHEN status = 0 THEN CASE WHEN deliver_at > created_at AND deliver_at <= (clock_timestamp() + $1::bigint * interval '1 microsecond') THEN deliver_at ELSE created_at END END) FROM golden_outbox WHERE status IN (0, 2, 3) AND tenant_id IN ($2, $3) GROUP BY topic ORDER BY topic;

-- admin (tenants) BlockedKeys
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > $1 AND h.tenant_id IN ($2, $3) AND h.topic = $4 ORDER BY h.seq LIMIT $5;

-- admin (tenants) FindDeadLetters
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND tenant_id IN ($1, $2) AND topic = $3 AND seq > $4 ORDER BY seq LIMIT $5;

-- admin (tenants) Event
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status, payload, headers, key_hash, partition_no, next_attempt_at FROM golden_outbox WHERE event_id = $1 AND tenant_id IN ($2, $3);

-- admin (tenants) SkipKeys
SELECT h.seq, h.event_id, h.topic, h.aggregate_type, h.aggregate_id, h.event_type, h.tenant_id, h.attempts, COALESCE(h.last_error, ''), h.created_at, h.status, h.key_hash, h.partition_no, h.next_attempt_at, (SELECT COUNT(*) FROM golden_outbox w WHERE w.key_hash = h.key_hash AND w.status = 0 AND w.seq > h.seq) FROM golden_outbox h JOIN (SELECT key_hash, MIN(seq) AS head FROM golden_outbox WHERE status = 2 OR (status = 0 AND attempts > 0) GROUP BY key_hash) k ON h.seq = k.head WHERE h.seq > $1 AND h.tenant_id IN ($2, $3) AND h.topic = $4 ORDER BY h.seq LIMIT $5;
UPDATE golden_outbox SET status = 3, next_attempt_at = NULL WHERE seq IN ($1) AND (status = 2 OR (status = 0 AND attempts > 0)) AND tenant_id IN ($2, $3);
UPDATE golden_outbox AS e SET next_attempt_at = $1, commit_lsn = (SELECT MAX(p.commit_lsn) FROM golden_outbox p WHERE p.key_hash = e.key_hash AND p.seq < e.seq AND p.status = 0 AND p.next_attempt_at IS NOT NULL) WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN ($2);

-- admin (tenants) ReplayDeadLetters
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND tenant_id IN ($1, $2) AND topic = $3 AND seq > $4 ORDER BY seq LIMIT $5;
UPDATE golden_outbox SET status = 0, attempts = 0, next_attempt_at = $1, last_error = NULL WHERE status IN (2, 3) AND seq IN ($2) AND tenant_id IN ($3, $4);

-- admin (tenants) DiscardDeadLetters
SELECT seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, COALESCE(last_error, ''), created_at, status FROM golden_outbox WHERE status IN (2, 3) AND tenant_id IN ($1, $2) AND topic = $3 AND seq > $4 ORDER BY seq LIMIT $5;
UPDATE golden_outbox AS e SET next_attempt_at = $1, commit_lsn = (SELECT MAX(p.commit_lsn) FROM golden_outbox p WHERE p.key_hash = e.key_hash AND p.seq < e.seq AND p.status = 0 AND p.next_attempt_at IS NOT NULL) WHERE status = 0 AND next_attempt_at IS NULL AND key_hash IN ($2);
DELETE FROM golden_outbox WHERE status IN (2, 3) AND seq IN ($1) AND tenant_id IN ($2, $3);

-- releaseAll
SELECT partition_no FROM golden_outbox_leases WHERE lease_group = $1 AND owner = $2 ORDER BY partition_no;
SET LOCAL idle_in_transaction_session_timeout = 5000;
SELECT partition_no, owner, epoch FROM golden_outbox_leases WHERE lease_group = $1 AND partition_no IN ($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65) ORDER BY partition_no FOR UPDATE;
UPDATE golden_outbox_leases SET owner = NULL, expires_at = $1 WHERE lease_group = $2 AND owner = $3 AND partition_no IN ($4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64, $65, $66, $67);
DELETE FROM golden_outbox_relays WHERE lease_group = $1 AND owner = $2;


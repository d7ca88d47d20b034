-- outboxkit schema v2: a fencing token per lease. Every takeover of a partition increments its
-- epoch, and the forwarder's acknowledgement checks the epoch it claimed the rows under, so a
-- relay that lost a partition can no longer acknowledge or mark its rows.
-- One statement: MySQL commits DDL implicitly, and MySQL 8 has no ADD COLUMN IF NOT EXISTS.
ALTER TABLE {{.Leases}} ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0

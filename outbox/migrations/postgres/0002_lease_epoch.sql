-- outboxkit schema v2: a fencing token per lease. Every takeover of a partition increments its
-- epoch, and the forwarder's acknowledgement checks the epoch it claimed the rows under, so a
-- relay that lost a partition can no longer acknowledge or mark its rows.
ALTER TABLE {{.Leases}} ADD COLUMN IF NOT EXISTS epoch BIGINT NOT NULL DEFAULT 0

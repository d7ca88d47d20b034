-- outboxkit schema v5 (the cdc source, docs/cdc.md): the commit position in the WAL of a row the
-- stream leaves to its retry path (the end of its transaction, as a number), written with the
-- mark. The retry path claims a key's marked rows in that order, then by seq: commit order, which
-- seq order is not when writers take no key locks. NULL (rows marked by the table drain, by a
-- replay, or by the failure of an event) sorts first. Adding a nullable column rewrites nothing.
ALTER TABLE {{.Events}} ADD COLUMN IF NOT EXISTS commit_lsn BIGINT

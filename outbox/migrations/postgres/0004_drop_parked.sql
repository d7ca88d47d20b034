-- outboxkit schema v4: drop the <table>_parked index on PostgreSQL. Since v3 the <table>_retry_keys
-- index (status = 2 OR next_attempt_at IS NOT NULL) serves the polling relay's parked keys too: a
-- retrying event has a next attempt time, so the claim's condition implies that index's predicate
-- and the planner already chose it over <table>_parked, which only cost every INSERT of an event
-- one more index to open and test. MariaDB and SQLite keep theirs (they have no v3).
DROP INDEX IF EXISTS {{.Schema}}{{.Short}}_parked

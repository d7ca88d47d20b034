-- outboxkit inbox v2, SQLite: inbox tables created before migrations were recorded stored
-- processed_at as Unix microseconds (INTEGER). Rewrite those values as outboxkit's UTC text, so
-- that PruneBefore compares like with like (SQLite orders every integer before every text).
-- Upgrade every consumer of one inbox table together: an older one would keep writing integers.
UPDATE {{.Table}}
SET processed_at = strftime('%Y-%m-%d %H:%M:%S', processed_at / 1000000, 'unixepoch') || '.' || printf('%06d', processed_at % 1000000)
WHERE typeof(processed_at) = 'integer'

-- outboxkit schema v3 (SQLite): the installation's identity and the exactly-once units' cleanup
-- marks (docs/exactly-once.md). The identity is made once, here, as a random UUID (version 4).
CREATE TABLE IF NOT EXISTS {{.Installation}} (
    singleton       INTEGER PRIMARY KEY DEFAULT 1 CHECK (singleton = 1),
    installation_id TEXT    NOT NULL,
    created_at      TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
)
-- statement
INSERT OR IGNORE INTO {{.Installation}} (singleton, installation_id)
SELECT 1, lower(substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-4' || substr(h, 14, 3) || '-' ||
       substr('89ab', 1 + (abs(random()) % 4), 1) || substr(h, 18, 3) || '-' || substr(h, 21, 12))
FROM (SELECT hex(randomblob(16)) AS h)
-- statement
CREATE TABLE IF NOT EXISTS {{.Units}} (
    unit       TEXT PRIMARY KEY,
    cleaned    TEXT NOT NULL,
    cleaned_at TEXT NOT NULL
)

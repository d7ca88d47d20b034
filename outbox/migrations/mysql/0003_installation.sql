-- outboxkit schema v3 (MySQL): the installation's identity and the exactly-once units' cleanup
-- marks (docs/exactly-once.md). The identity is made once, here; exactly-once delivery puts it
-- in its default transactional ids and in every checkpoint, and refuses a checkpoint of
-- another installation. Each statement can run again: MySQL commits DDL implicitly, so a run
-- that stopped halfway is completed by the next one.
CREATE TABLE IF NOT EXISTS {{.Installation}} (
    singleton       TINYINT      NOT NULL PRIMARY KEY DEFAULT 1,
    installation_id VARCHAR(64)  NOT NULL,
    created_at      DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
-- statement
INSERT IGNORE INTO {{.Installation}} (singleton, installation_id) VALUES (1, LOWER(UUID()))
-- statement
CREATE TABLE IF NOT EXISTS {{.Units}} (
    unit       VARCHAR(191) NOT NULL PRIMARY KEY,
    cleaned    VARCHAR(64)  NOT NULL,
    cleaned_at DATETIME(6)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4

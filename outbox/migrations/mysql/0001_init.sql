-- outboxkit schema v1 for MariaDB (tested: 10.11) and MySQL 8 (expected, untested). Statements are separated by "-- statement" lines.
CREATE TABLE IF NOT EXISTS {{.Events}} (
    seq             BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    event_id        CHAR(36)     NOT NULL,
    topic           VARCHAR(255) NOT NULL,
    aggregate_type  VARCHAR(255) NOT NULL DEFAULT '',
    aggregate_id    VARCHAR(255) NOT NULL,
    event_type      VARCHAR(255) NOT NULL,
    tenant_id       VARCHAR(255) NOT NULL DEFAULT '',
    payload         LONGBLOB     NOT NULL,
    headers         LONGTEXT     NOT NULL,
    key_hash        BIGINT       NOT NULL,
    partition_no    SMALLINT     NOT NULL,
    created_at      DATETIME(6)  NOT NULL,
    status          TINYINT      NOT NULL DEFAULT 0,  -- 0 pending, 1 published (kept for retention), 2 dead
    attempts        INT          NOT NULL DEFAULT 0,
    next_attempt_at DATETIME(6)  NULL,
    last_error      TEXT         NULL,
    published_at    DATETIME(6)  NULL,
    -- MySQL has no partial indexes: each index leads with status instead.
    KEY {{.Short}}_pending (status, seq),
    KEY {{.Short}}_parked (status, attempts, partition_no, key_hash),
    KEY {{.Short}}_published (status, published_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
-- statement
-- One row per (lease group, partition), created by the forwarders of the group.
CREATE TABLE IF NOT EXISTS {{.Leases}} (
    lease_group  VARCHAR(191) NOT NULL,
    partition_no INT          NOT NULL,
    owner        VARCHAR(191) NULL,
    expires_at   DATETIME(6)  NOT NULL DEFAULT '1970-01-01 00:00:01',
    PRIMARY KEY (lease_group, partition_no)
) ENGINE=InnoDB
-- statement
CREATE TABLE IF NOT EXISTS {{.Relays}} (
    lease_group  VARCHAR(191) NOT NULL,
    owner        VARCHAR(191) NOT NULL,
    heartbeat_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (lease_group, owner)
) ENGINE=InnoDB
-- statement
-- Writers lock the slot rows of their ordering keys so transactions writing the same key
-- serialize. The rows exist up front: locking existing rows by primary key takes record locks
-- only, where inserting new lock rows would take gap locks and deadlock concurrent writers.
CREATE TABLE IF NOT EXISTS {{.KeyLocks}} (
    slot INT NOT NULL PRIMARY KEY
) ENGINE=InnoDB
-- statement
INSERT IGNORE INTO {{.KeyLocks}} (slot) VALUES {{range $i, $p := .KeyLockSlotList}}{{if $i}}, {{end}}({{$p}}){{end}}

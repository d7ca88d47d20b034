-- outboxkit schema v5 (MySQL): the installation is bound to the database it was made in
-- (binding.go): the server's server_uuid (MySQL; MariaDB has none) and the schema's name. A dump
-- restored into another schema or server copies the installation row but not those, so reading
-- the identity there is refused until the copy is re-identified or rebound (outboxkit migrate
-- --reidentify / --rebind). An existing installation is bound here, to the database it is in
-- when this migration runs. MySQL commits DDL implicitly and MySQL 8 has no ADD COLUMN IF NOT
-- EXISTS: a run that stopped after the ALTER is completed by hand (the statements after it, then
-- INSERT INTO <table>_migrations (version, applied_at) VALUES (5, UTC_TIMESTAMP(6))).
ALTER TABLE {{.Installation}} ADD COLUMN bound_to VARCHAR(255) NULL
-- statement
-- The same text as outbox.DatabaseBinding. @@server_uuid is an error on MariaDB even in a branch
-- not taken, so the statement is chosen by the server's version and prepared.
SET @outboxkit_bind = IF(VERSION() LIKE '%MariaDB%',
    'UPDATE {{.Installation}} SET bound_to = CONCAT(''mysql:schema='', DATABASE()) WHERE bound_to IS NULL',
    'UPDATE {{.Installation}} SET bound_to = CONCAT(''mysql:server_uuid='', @@server_uuid, '',schema='', DATABASE()) WHERE bound_to IS NULL')
-- statement
PREPARE outboxkit_bind FROM @outboxkit_bind
-- statement
EXECUTE outboxkit_bind
-- statement
DEALLOCATE PREPARE outboxkit_bind

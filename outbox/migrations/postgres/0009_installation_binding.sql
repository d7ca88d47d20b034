-- outboxkit schema v9: the installation is bound to the database it was made in (binding.go): the
-- cluster's system identifier and the database's OID. A dump restored elsewhere, CREATE DATABASE
-- ... TEMPLATE or a restore into another cluster copies the installation row but not those, so
-- reading the identity there is refused until the copy is re-identified or rebound (outboxkit
-- migrate --reidentify / --rebind). An existing installation is bound here, to the database it
-- is in when this migration runs.
ALTER TABLE {{.Installation}} ADD COLUMN IF NOT EXISTS bound_to TEXT
-- statement
-- The same text as outbox.DatabaseBinding.
UPDATE {{.Installation}} SET bound_to = 'postgres:system_identifier=' || (SELECT system_identifier FROM pg_control_system())::text ||
    ',database_oid=' || (SELECT oid FROM pg_database WHERE datname = current_database())::text
WHERE bound_to IS NULL

-- outboxkit schema v4 (SQLite): the column of the installation's binding to its database
-- (binding.go). A SQLite database is a file, and a copy of the file is the same database to
-- every reader: nothing in it tells a copy from the original (a path is not an identity), so
-- SQLite installations are bound to nothing (bound_to stays empty) and a copied file must be
-- re-identified by hand (outboxkit migrate --reidentify).
ALTER TABLE {{.Installation}} ADD COLUMN bound_to TEXT
-- statement
UPDATE {{.Installation}} SET bound_to = '' WHERE bound_to IS NULL

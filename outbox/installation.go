package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// ErrNoInstallation is returned by [ReadInstallation] for a table migrated by a version without
// the installation table: run [Migrate] (outboxkit migrate) with this version.
var ErrNoInstallation = errors.New("the outbox has no installation identity: run outboxkit migrate (outbox.Migrate) with this version")

// RowQuerier is what *sql.DB, *sql.Conn and *sql.Tx have in common for one-row queries.
type RowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ReadInstallation returns the identity the migration made for table (schema v6 on PostgreSQL,
// v3 on MySQL and SQLite; a UUID made once, in the table's [Table.Installation] table). It names
// what the relays of this outbox make on shared infrastructure: exactly-once units and their
// checkpoints, cdc replication slots and publications.
//
// The identity is bound to the database it was made in (binding.go, schema v9 on PostgreSQL, v5
// on MySQL): read from a copy of that database, it is refused with a [*RestoredCopyError]; read
// from a table migrated by an earlier version, with an error wrapping [ErrInstallationBinding].
func ReadInstallation(ctx context.Context, q RowQuerier, table Table) (string, error) {
	var id string
	var bound sql.NullString
	err := q.QueryRowContext(ctx, "SELECT installation_id, bound_to FROM "+table.Installation()).Scan(&id, &bound)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", fmt.Errorf("outbox: read the installation of %s: %w", table, ErrNoInstallation)
	case err != nil && missingTable(err):
		return "", fmt.Errorf("outbox: read the installation of %s: %w (%v)", table, ErrNoInstallation, err)
	case err != nil && missingColumn(err):
		return "", fmt.Errorf("outbox: read the installation of %s: %w: it was migrated by an earlier version; "+
			"run outboxkit migrate (outbox.Migrate) with this version (%v)", table, ErrInstallationBinding, err)
	case err != nil:
		return "", fmt.Errorf("outbox: read the installation of %s: %w", table, err)
	}
	if err := checkBinding(ctx, q, table, id, bound); err != nil {
		return "", err
	}
	return id, nil
}

// missingTable reports whether err says a table does not exist (PostgreSQL 42P01, MySQL 1146,
// SQLite "no such table").
func missingTable(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "42P01") || strings.Contains(msg, "Error 1146") || strings.Contains(msg, "no such table")
}

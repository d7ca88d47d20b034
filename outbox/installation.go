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
func ReadInstallation(ctx context.Context, q RowQuerier, table Table) (string, error) {
	var id string
	err := q.QueryRowContext(ctx, "SELECT installation_id FROM "+table.Installation()).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", fmt.Errorf("outbox: read the installation of %s: %w", table, ErrNoInstallation)
	case err != nil && missingTable(err):
		return "", fmt.Errorf("outbox: read the installation of %s: %w (%v)", table, ErrNoInstallation, err)
	case err != nil:
		return "", fmt.Errorf("outbox: read the installation of %s: %w", table, err)
	}
	return id, nil
}

// missingTable reports whether err says a table does not exist (PostgreSQL 42P01, MySQL 1146,
// SQLite "no such table").
func missingTable(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "42P01") || strings.Contains(msg, "Error 1146") || strings.Contains(msg, "no such table")
}

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// An installation's identity (ReadInstallation) is bound to the database it was made in, so that
// a copy of that database (a restored dump, CREATE DATABASE … TEMPLATE, a staging copy of
// production, the green side of a blue/green cutover) is not taken for the original: its relays
// would use the original's exactly-once units, checkpoints and cdc slot names on shared
// infrastructure, fencing the original's transactions and applying its checkpoints to the copy.
//
// The binding is the database's own identity, which a logical copy does not carry:
//
//   - PostgreSQL: the cluster's system identifier (pg_control_system(), made by initdb) and the
//     database's OID. A pg_dump restore or CREATE DATABASE … TEMPLATE makes a new database (a new
//     OID); a restore into another cluster has another system identifier; pg_upgrade makes a new
//     cluster (a new system identifier). A physical copy (pg_basebackup, a volume snapshot,
//     point-in-time recovery, a promoted replica) keeps both: it is the same installation to
//     this check;
//   - MySQL: the server's server_uuid (auto.cnf in the data directory) and the schema's name;
//     MariaDB has no persistent server identity (its server_uid is derived from the MAC address
//     and port, and changes when a container is recreated), so there the binding is the schema's
//     name alone: a restore into a schema of the same name on another server is not detected;
//   - SQLite: nothing. A copy of the file is the same database to every reader, and a path names
//     where a file is mounted, not which database it is.

// ErrInstallationBinding is wrapped by the errors of [ReadInstallation] that no waiting can cure:
// the installation is bound to another database ([RestoredCopyError]) or to none yet (the table
// was migrated by an earlier version).
var ErrInstallationBinding = errors.New("the outbox's installation is not bound to this database")

// RestoredCopyError is returned by [ReadInstallation] when the installation row was made in
// another database than the one it is read from: the database is a copy of another
// installation's. It wraps [ErrInstallationBinding].
type RestoredCopyError struct {
	// Table is the outbox table.
	Table string
	// Installation is the identity read, the original's.
	Installation string
	// BoundTo is the database the installation was made in (or last rebound to).
	BoundTo string
	// Database is the database it was read from.
	Database string
}

// Error names both bindings and the two ways out.
func (e *RestoredCopyError) Error() string {
	return fmt.Sprintf("outbox: the installation %s of table %s is bound to database %q, but this is database %q: "+
		"this database is a copy of another one (a restored dump, CREATE DATABASE … TEMPLATE, a restore into another "+
		"server), and its relays would share the original's exactly-once units, checkpoints and cdc slot. "+
		"If the copy runs next to the original, give it an identity of its own: outboxkit migrate --reidentify "+
		"(drops the copy's exactly-once unit marks and cdc slot records of the old identity). "+
		"If it is the same installation moved and the original database is gone (pg_upgrade, a restore after a loss), "+
		"keep the identity: outboxkit migrate --rebind",
		e.Installation, e.Table, e.BoundTo, e.Database)
}

// Unwrap returns [ErrInstallationBinding].
func (e *RestoredCopyError) Unwrap() error { return ErrInstallationBinding }

// DatabaseBinding returns the identity of the database q is connected to, as an installation of
// dialect is bound to it ("" on SQLite, which binds to nothing): for example
// "postgres:system_identifier=7716462892642897479,database_oid=16385" or
// "mysql:server_uuid=…,schema=app" ("mysql:schema=app" on MariaDB).
func DatabaseBinding(ctx context.Context, q RowQuerier, dialect Dialect) (string, error) {
	switch dialect {
	case Postgres:
		var system, oid string
		err := q.QueryRowContext(ctx, "SELECT (SELECT system_identifier FROM pg_control_system())::text, "+
			"(SELECT oid FROM pg_database WHERE datname = current_database())::text").Scan(&system, &oid)
		if err != nil {
			return "", fmt.Errorf("outbox: read the database's identity (pg_control_system, pg_database): %w", err)
		}
		return "postgres:system_identifier=" + system + ",database_oid=" + oid, nil
	case MySQL:
		var schema sql.NullString
		if err := q.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&schema); err != nil {
			return "", fmt.Errorf("outbox: read the current schema: %w", err)
		}
		if !schema.Valid {
			return "", errors.New("outbox: the connection has no current schema (name one in the DSN)")
		}
		var name, server string
		err := q.QueryRowContext(ctx, "SHOW GLOBAL VARIABLES LIKE 'server_uuid'").Scan(&name, &server)
		switch {
		case errors.Is(err, sql.ErrNoRows): // MariaDB
			return "mysql:schema=" + schema.String, nil
		case err != nil:
			return "", fmt.Errorf("outbox: read the server's server_uuid: %w", err)
		}
		return "mysql:server_uuid=" + server + ",schema=" + schema.String, nil
	case SQLite:
		return "", nil
	}
	return "", dialect.Validate()
}

// checkBinding compares the binding recorded with the installation to the database's own.
func checkBinding(ctx context.Context, q RowQuerier, table Table, id string, bound sql.NullString) error {
	if !bound.Valid {
		return fmt.Errorf("outbox: read the installation of %s: %w: it was migrated by an earlier version; "+
			"run outboxkit migrate (outbox.Migrate) with this version", table, ErrInstallationBinding)
	}
	current, err := DatabaseBinding(ctx, q, table.dialect)
	if err != nil {
		return err
	}
	if current != bound.String {
		return &RestoredCopyError{Table: table.String(), Installation: id, BoundTo: bound.String, Database: current}
	}
	return nil
}

// bindInstallation binds an installation not yet bound (one made before the binding existed,
// or just made by the migrations) to the database db is connected to.
func bindInstallation(ctx context.Context, db *sql.DB, table Table) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("outbox: bind the installation of %s: %w", table, err)
	}
	defer conn.Close()
	binding, err := DatabaseBinding(ctx, conn, table.dialect)
	if err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, table.dialect.Rebind("UPDATE "+table.Installation()+
		" SET bound_to = ? WHERE bound_to IS NULL"), binding)
	if err != nil {
		return fmt.Errorf("outbox: bind the installation of %s: %w", table, err)
	}
	return nil
}

// missingColumn reports whether err says a column does not exist (PostgreSQL 42703, MySQL 1054,
// SQLite "no such column").
func missingColumn(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "42703") || strings.Contains(msg, "Error 1054") || strings.Contains(msg, "no such column")
}

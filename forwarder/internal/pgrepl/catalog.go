package pgrepl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
)

// The replication objects as the catalog shows them, read and changed through an ordinary
// connection pool: slots (pg_replication_slots) and publications (pg_publication). Table and
// publication names are validated identifiers (outbox.Table), written into the SQL unquoted.

// SlotState is a replication slot as pg_replication_slots shows it.
type SlotState struct {
	Exists    bool
	WALStatus string // reserved, extended, unreserved or lost
	ActivePID int
}

// ReadSlot reads the slot's state (Exists false when there is no such slot).
func ReadSlot(ctx context.Context, db *sql.DB, slot string) (SlotState, error) {
	var pid sql.NullInt64
	var walStatus sql.NullString
	err := db.QueryRowContext(ctx, "SELECT wal_status, active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).
		Scan(&walStatus, &pid)
	if errors.Is(err, sql.ErrNoRows) {
		return SlotState{}, nil
	}
	if err != nil {
		return SlotState{}, fmt.Errorf("cdc: read slot %s: %w", slot, err)
	}
	return SlotState{Exists: true, WALStatus: walStatus.String, ActivePID: int(pid.Int64)}, nil
}

// DropSlot drops the slot; an active slot cannot be dropped (Code ObjectInUse).
func DropSlot(ctx context.Context, db *sql.DB, slot string) error {
	if _, err := db.ExecContext(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil {
		return fmt.Errorf("cdc: drop replication slot %s: %w", slot, err)
	}
	return nil
}

// TerminateWalsender ends the walsender holding the slot, if any (it needs pg_signal_backend
// or superuser); it reports whether one was terminated.
func TerminateWalsender(ctx context.Context, db *sql.DB, slot string) (bool, error) {
	var done sql.NullBool
	err := db.QueryRowContext(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots"+
		" WHERE slot_name = $1 AND active_pid IS NOT NULL", slot).Scan(&done)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cdc: terminate the walsender of slot %s: %w", slot, err)
	}
	return done.Bool, nil
}

// SlotBehind is the WAL between the server's current position and the slot's confirmed one
// (0 for a missing slot).
func SlotBehind(ctx context.Context, db *sql.DB, slot string) (int64, error) {
	var behind int64
	err := db.QueryRowContext(ctx, "SELECT COALESCE((SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint"+
		" FROM pg_replication_slots WHERE slot_name = $1), 0)", slot).Scan(&behind)
	if err != nil {
		return 0, fmt.Errorf("cdc: read the position of slot %s: %w", slot, err)
	}
	return behind, nil
}

// SlotOfOtherDatabase reports whether the slot exists for another database of the cluster.
func SlotOfOtherDatabase(ctx context.Context, db *sql.DB, slot string) (bool, error) {
	var elsewhere bool
	if err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1"+
		" AND database IS DISTINCT FROM current_database())", slot).Scan(&elsewhere); err != nil {
		return false, fmt.Errorf("cdc: read slot %s: %w", slot, err)
	}
	return elsewhere, nil
}

// Target is a table as PostgreSQL resolved it.
type Target struct {
	OID          uint32
	Schema, Name string
}

// String is the schema-qualified name of the relation, as stored.
func (t Target) String() string { return t.Schema + "." + t.Name }

// ResolveTable resolves a table name the way SQL does (to_regclass parses it as an SQL name:
// unquoted parts folded, an unqualified name on the search_path).
func ResolveTable(ctx context.Context, db *sql.DB, table string) (Target, error) {
	var t Target
	var oid int64
	err := db.QueryRowContext(ctx, "SELECT c.oid::bigint, n.nspname, c.relname FROM pg_class c"+
		" JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)", table).
		Scan(&oid, &t.Schema, &t.Name)
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("cdc: table %s does not exist (is it migrated, and on the search_path?)", table)
	}
	if err != nil {
		return t, fmt.Errorf("cdc: resolve table %s: %w", table, err)
	}
	t.OID = uint32(oid)
	return t, nil
}

// Coverage is what pg_publication says about a publication and one table.
type Coverage struct {
	Exists, Inserts, Covers, Filtered bool
}

// ReadPublication reads whether the publication exists, publishes inserts, covers the table
// (listed, or FOR ALL TABLES) and filters its rows (a WHERE clause: rows it filters out are
// never streamed).
func ReadPublication(ctx context.Context, db *sql.DB, pub string, target Target) (Coverage, error) {
	var c Coverage
	err := db.QueryRowContext(ctx, "SELECT true, p.pubinsert, p.puballtables OR r.prrelid IS NOT NULL,"+
		// A row filter is pg_publication_rel.prqual, from PostgreSQL 15 on (the key is absent before).
		" to_jsonb(r) ->> 'prqual' IS NOT NULL"+
		" FROM pg_publication p LEFT JOIN pg_publication_rel r ON r.prpubid = p.oid AND r.prrelid = $2::bigint::oid"+
		" WHERE p.pubname = $1", pub, int64(target.OID)).Scan(&c.Exists, &c.Inserts, &c.Covers, &c.Filtered)
	if errors.Is(err, sql.ErrNoRows) {
		return Coverage{}, nil
	}
	if err != nil {
		return c, fmt.Errorf("cdc: read publication %s: %w", pub, err)
	}
	return c, nil
}

// CreatePublication creates the publication of the table's inserts (creating it needs
// ownership of the table). One that exists already fails with Code DuplicateObject.
func CreatePublication(ctx context.Context, db *sql.DB, pub, table string) error {
	_, err := db.ExecContext(ctx, "CREATE PUBLICATION "+pub+" FOR TABLE "+table+" WITH (publish = 'insert')")
	return err
}

// AddTable adds the table to the publication.
func AddTable(ctx context.Context, db *sql.DB, pub, table string) error {
	_, err := db.ExecContext(ctx, "ALTER PUBLICATION "+pub+" ADD TABLE "+table)
	return err
}

// DropTable takes the table out of the publication.
func DropTable(ctx context.Context, db *sql.DB, pub, table string) error {
	_, err := db.ExecContext(ctx, "ALTER PUBLICATION "+pub+" DROP TABLE "+table)
	return err
}

// PublicationTables counts the tables the publication lists.
func PublicationTables(ctx context.Context, db *sql.DB, pub string) (int, error) {
	var tables int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_publication_tables WHERE pubname = $1", pub).Scan(&tables); err != nil {
		return 0, fmt.Errorf("cdc: read publication %s: %w", pub, err)
	}
	return tables, nil
}

// DropPublication drops the publication if it exists.
func DropPublication(ctx context.Context, db *sql.DB, pub string) error {
	if _, err := db.ExecContext(ctx, "DROP PUBLICATION IF EXISTS "+pub); err != nil {
		return fmt.Errorf("cdc: drop publication %s: %w", pub, err)
	}
	return nil
}

// CreateEmptyPublication creates a publication of no table, if it does not exist: pgoutput
// needs one to start, and logical decoding messages are not filtered by publications.
func CreateEmptyPublication(ctx context.Context, db *sql.DB, pub string) error {
	_, err := db.ExecContext(ctx, "CREATE PUBLICATION "+pub)
	if err != nil && Code(err) != DuplicateObject {
		return fmt.Errorf("wal: create publication %s: %w", pub, err)
	}
	return nil
}

// CurrentLSN is the server's current WAL write position.
func CurrentLSN(ctx context.Context, db *sql.DB) (LSN, error) {
	var text string
	if err := db.QueryRowContext(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&text); err != nil {
		return 0, fmt.Errorf("wal: read the current WAL position: %w", err)
	}
	lsn, err := pglogrepl.ParseLSN(text)
	if err != nil {
		return 0, fmt.Errorf("wal: read the current WAL position %q: %w", text, err)
	}
	return lsn, nil
}

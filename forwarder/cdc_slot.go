package forwarder

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// PostgreSQL error codes the cdc source tells apart.
const (
	pgObjectInUse       = "55006" // the slot is active for another walsender
	pgDuplicateObject   = "42710" // the publication or slot exists already
	pgUndefinedObject   = "42704" // the slot does not exist
	pgPrerequisiteState = "55000" // the slot was invalidated
)

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// replicationConnect opens a logical replication connection (replication=database) to dsn.
func replicationConnect(ctx context.Context, dsn string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("cdc: CDC.DSN is not a valid PostgreSQL connection string")
	}
	cfg.RuntimeParams["replication"] = "database"
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "outboxkit-cdc"
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cdc: open the replication connection to %s:%d: %w", cfg.Host, cfg.Port, err)
	}
	return conn, nil
}

// ensurePublication makes sure the table's publication exists and streams the table's inserts,
// and returns its name as stored (folded: the name in SQL is unquoted). It creates a missing
// one (inserts only; creating it needs ownership of the table, or an operator creates it
// beforehand, docs/cdc.md), adds the table to one that does not cover it (a table dropped and
// migrated again leaves its old publication empty), and refuses one that does not publish
// inserts. A row filter is warned about: the rows it filters out are never streamed (the stall
// check reports them).
func (f *Forwarder) ensurePublication(ctx context.Context, target cdcTarget) (string, error) {
	table := f.cdc.table
	pub := f.cdc.publication // lower case: the name in SQL is unquoted
	c, err := readPublication(ctx, f.cfg.DB, pub, target)
	if err != nil {
		return "", err
	}
	// Both names are validated identifiers (outbox.Table), resolved by PostgreSQL as target was.
	switch {
	case !c.exists:
		_, err := f.cfg.DB.ExecContext(ctx, "CREATE PUBLICATION "+pub+" FOR TABLE "+table.Events()+" WITH (publish = 'insert')")
		if err != nil && pgCode(err) != pgDuplicateObject {
			return "", fmt.Errorf("cdc: create publication %s on %s: %w", pub, target, err)
		}
		return pub, nil
	case !c.inserts:
		return "", fmt.Errorf("cdc: publication %s does not publish inserts: recreate it WITH (publish = 'insert')", pub)
	case !c.covers:
		f.log.Warn("cdc: the publication does not cover the table (dropped and recreated?); adding it", "publication", pub, "relation", target.String())
		if _, err := f.cfg.DB.ExecContext(ctx, "ALTER PUBLICATION "+pub+" ADD TABLE "+table.Events()); err != nil {
			return "", fmt.Errorf("cdc: add table %s to publication %s: %w", target, pub, err)
		}
	case c.filtered:
		f.log.Warn("cdc: the publication has a row filter: the rows it filters out are not streamed and stay pending",
			"publication", pub, "relation", target.String())
	}
	return pub, nil
}

// slotState is a replication slot as pg_replication_slots shows it.
type slotState struct {
	exists    bool
	walStatus string // reserved, extended, unreserved or lost
	activePID int
}

func readSlot(ctx context.Context, db *sql.DB, slot string) (slotState, error) {
	var st slotState
	var pid sql.NullInt64
	var walStatus sql.NullString
	err := db.QueryRowContext(ctx, "SELECT wal_status, active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).
		Scan(&walStatus, &pid)
	if errors.Is(err, sql.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("cdc: read slot %s: %w", slot, err)
	}
	return slotState{exists: true, walStatus: walStatus.String, activePID: int(pid.Int64)}, nil
}

// createSlot creates the logical slot (pgoutput) on the replication connection; it reports
// whether it created it (false: another relay did meanwhile).
func createSlot(ctx context.Context, conn *pgconn.PgConn, slot string) (bool, error) {
	_, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
	switch {
	case err == nil:
		return true, nil
	case pgCode(err) == pgDuplicateObject:
		return false, nil
	}
	return false, fmt.Errorf("cdc: create replication slot %s: %w", slot, err)
}

// dropSlot drops the slot through a plain connection; an active slot cannot be dropped.
func dropSlot(ctx context.Context, db *sql.DB, slot string) error {
	if _, err := db.ExecContext(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil {
		return fmt.Errorf("cdc: drop replication slot %s: %w", slot, err)
	}
	return nil
}

// terminateWalsender ends the walsender holding the slot, if any (it needs pg_signal_backend
// or superuser); it reports whether one was terminated.
func terminateWalsender(ctx context.Context, db *sql.DB, slot string) (bool, error) {
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

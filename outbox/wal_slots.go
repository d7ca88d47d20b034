package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// The register of the wal source's replication slots ([Table.WALSlots], schema v12). Without a
// table an event lives only in the WAL until a slot's reader publishes it, and
// pg_logical_emit_message succeeds with no slot at all. So writers emit only while every
// registered slot exists and is not invalidated (emitStatement), and a register row outlives its
// slot: it is how a relay tells its first start (no row: create the slot) from a slot that
// existed and is gone (a row, no slot), which nothing re-creates without an operator
// ([ResetWALSlot]). docs/wal.md, "The slot".

// ErrWALSlotLost is wrapped by the errors of a registered slot that is gone: dropped, invalidated
// by max_slot_wal_keep_size (wal_status lost), or missing on a replica promoted without it.
// Events committed after the slot's last confirmed position and before writes were refused are
// lost; [ResetWALSlot] replaces the slot once an operator has dealt with that.
var ErrWALSlotLost = errors.New("replication slot lost")

// slotName is what PostgreSQL accepts as a replication slot name.
var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// ValidateSlotName checks a replication slot name as PostgreSQL does: 1 to 63 lower-case
// letters, digits and underscores.
func ValidateSlotName(slot string) error {
	if !slotName.MatchString(slot) {
		return fmt.Errorf("outbox: replication slot name %q: want 1 to 63 lower-case letters, digits and underscores", slot)
	}
	return nil
}

// WALSlotState is a slot of the register as the database shows it.
type WALSlotState struct {
	// Slot is the slot's name.
	Slot string
	// Registered: the slot has a row in [Table.WALSlots]; CreatedAt and CreatedLSN are its
	// registration (or last reset) and the slot's first position then.
	Registered bool
	CreatedAt  time.Time
	CreatedLSN string
	// Exists: a logical slot of this name exists in this database. Elsewhere: a slot of this name
	// exists but is physical or belongs to another database of the cluster.
	Exists, Elsewhere bool
	// Plugin, WALStatus (reserved, extended, unreserved or lost), Active and ConfirmedLSN are
	// pg_replication_slots' columns; LagBytes is the WAL between the server's position and
	// ConfirmedLSN.
	Plugin, WALStatus, ConfirmedLSN string
	Active                          bool
	LagBytes                        int64
	// SafeWALBytes is pg_replication_slots.safe_wal_size: the WAL that can still be written
	// before max_slot_wal_keep_size invalidates the slot (negative past the limit), when
	// SafeWALLimited; without max_slot_wal_keep_size (or for a lost slot) there is no such size.
	SafeWALBytes   int64
	SafeWALLimited bool
}

// Usable reports whether the slot reads the table's messages: registered, existing and not
// invalidated.
func (s WALSlotState) Usable() bool { return s.Registered && s.Exists && s.WALStatus != "lost" }

// Lost reports whether the slot was registered and is now gone or invalidated.
func (s WALSlotState) Lost() bool { return s.Registered && !s.Usable() }

// LostError is the error of a lost slot: what happened, and what to do. It wraps
// [ErrWALSlotLost].
func (s WALSlotState) LostError(table Table) error {
	what := "does not exist in this database (it was dropped, or this server is a replica promoted without it)"
	switch {
	case s.Exists:
		what = "is invalidated (wal_status lost: it fell more than max_slot_wal_keep_size behind)"
	case s.Elsewhere:
		what = "is not a logical slot of this database (a slot of that name is physical or belongs to another database)"
	}
	return fmt.Errorf("outbox %s: %w: replication slot %q, registered at %s (position %s), %s; "+
		"writers are refused meanwhile, and the events committed after its last confirmed position are lost. "+
		"Find the time range and re-send what the business needs (docs/cdc.md, runbook), then run "+
		"`outboxkit wal-slot reset %s` to start a new slot",
		table, ErrWALSlotLost, s.Slot, s.CreatedAt.UTC().Format(time.RFC3339), s.CreatedLSN, what, s.Slot)
}

// ReadWALSlot reads slot's register row and pg_replication_slots row (PostgreSQL, schema v12).
func ReadWALSlot(ctx context.Context, db *sql.DB, table Table, slot string) (WALSlotState, error) {
	st := WALSlotState{Slot: slot}
	if err := checkWALSlotArgs(table, slot); err != nil {
		return st, err
	}
	var createdAt sql.NullTime
	var createdLSN sql.NullString
	err := db.QueryRowContext(ctx, "SELECT created_at, created_lsn::text FROM "+table.WALSlots()+" WHERE slot_name = $1", slot).
		Scan(&createdAt, &createdLSN)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return st, fmt.Errorf("outbox %s: read the register of replication slot %s: %w", table, slot, err)
	default:
		st.Registered, st.CreatedAt, st.CreatedLSN = true, createdAt.Time, createdLSN.String
	}
	var plugin, status, confirmed sql.NullString
	var lag, safe sql.NullInt64
	var here bool
	err = db.QueryRowContext(ctx, "SELECT database IS NOT DISTINCT FROM current_database() AND slot_type = 'logical', "+
		"plugin, wal_status, active, confirmed_flush_lsn::text, "+
		"pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint, safe_wal_size "+
		"FROM pg_catalog.pg_replication_slots WHERE slot_name = $1", slot).
		Scan(&here, &plugin, &status, &st.Active, &confirmed, &lag, &safe)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("outbox %s: read replication slot %s: %w", table, slot, err)
	}
	st.Exists, st.Elsewhere = here, !here
	st.Plugin, st.WALStatus, st.ConfirmedLSN, st.LagBytes = plugin.String, status.String, confirmed.String, lag.Int64
	st.SafeWALBytes, st.SafeWALLimited = safe.Int64, safe.Valid
	return st, nil
}

// CreateWALSlot makes slot the table's wal slot: it creates the logical replication slot (plugin
// pgoutput) unless it exists, and registers it, so that [ModeWAL] writers and <table>_emit may
// emit. It is idempotent. It never re-creates a registered slot that is gone: that is an error
// wrapping [ErrWALSlotLost] ([ResetWALSlot] is the operator's way out). An existing slot not yet
// registered is registered as it is, keeping what it holds (a Go [ModeWAL] writer may already
// have emitted for it: its guard checks only that the slot exists, not that it is registered),
// unless it is invalidated, uses another plugin or belongs elsewhere. When it creates the
// slot, it first creates the empty publication of the slot's name the wal source streams with. It must not
// run inside a transaction that has written (PostgreSQL creates slots only outside one); it waits
// for the transactions running meanwhile to end. It reports whether it created the slot.
func CreateWALSlot(ctx context.Context, db *sql.DB, table Table, slot string) (created bool, err error) {
	for attempt := 0; ; attempt++ {
		st, err := ReadWALSlot(ctx, db, table, slot)
		if err != nil {
			return false, err
		}
		switch {
		case st.Usable():
			return false, nil
		case st.Lost():
			return false, st.LostError(table)
		case st.Exists:
			return false, registerExisting(ctx, db, table, st)
		case st.Elsewhere:
			return false, fmt.Errorf("outbox %s: replication slot %q exists but is physical or belongs to another database of the cluster: choose another name",
				table, slot)
		}
		err = createAndRegister(ctx, db, table, slot, false)
		var pgErr *pgconn.PgError
		if attempt == 0 && errors.As(err, &pgErr) && pgErr.Code == "42710" {
			continue // created meanwhile by another process: register it as it is
		}
		return err == nil, err
	}
}

// registerExisting registers a slot that exists unregistered, after checking it can serve.
func registerExisting(ctx context.Context, db *sql.DB, table Table, st WALSlotState) error {
	if st.WALStatus == "lost" {
		return fmt.Errorf("outbox %s: replication slot %q exists unregistered but is invalidated (wal_status lost): drop it (SELECT pg_drop_replication_slot('%s')) and create it again",
			table, st.Slot, st.Slot)
	}
	if st.Plugin != "pgoutput" {
		return fmt.Errorf("outbox %s: replication slot %q uses the output plugin %q; the wal source reads pgoutput: choose another name",
			table, st.Slot, st.Plugin)
	}
	_, err := db.ExecContext(ctx, "INSERT INTO "+table.WALSlots()+" (slot_name, created_lsn) VALUES ($1, $2::pg_lsn) ON CONFLICT DO NOTHING",
		st.Slot, st.ConfirmedLSN)
	if err != nil {
		return fmt.Errorf("outbox %s: register replication slot %s: %w", table, st.Slot, err)
	}
	return nil
}

// createAndRegister creates the empty publication of the slot's name that the wal source
// streams with, then the slot, then writes its register row (inserted, or with reset the
// existing row updated). The publication comes first: pgoutput looks it up as of the WAL it
// decodes, and on PostgreSQL < 18 a transaction that changed a table between the slot's creation
// and the publication's fails the stream with `publication "<slot>" does not exist`. A process
// dying between the steps leaves an unregistered slot, which the next CreateWALSlot registers.
func createAndRegister(ctx context.Context, db *sql.DB, table Table, slot string, reset bool) error {
	if err := createPublication(ctx, db, table, slot); err != nil {
		return err
	}
	var lsn string
	if err := db.QueryRowContext(ctx, "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')", slot).Scan(&lsn); err != nil {
		return fmt.Errorf("outbox %s: create replication slot %s: %w", table, slot, err)
	}
	q := "INSERT INTO " + table.WALSlots() + " (slot_name, created_lsn) VALUES ($1, $2::pg_lsn) ON CONFLICT DO NOTHING"
	if reset {
		q = "UPDATE " + table.WALSlots() + " SET created_at = now(), created_lsn = $2::pg_lsn, reset_at = now() WHERE slot_name = $1"
	}
	if _, err := db.ExecContext(ctx, q, slot, lsn); err != nil {
		return fmt.Errorf("outbox %s: register replication slot %s: %w", table, slot, err)
	}
	return nil
}

// createPublication creates the empty publication named slot unless it exists (the name is a
// valid slot name: lower-case letters, digits and underscores).
func createPublication(ctx context.Context, db *sql.DB, table Table, slot string) error {
	_, err := db.ExecContext(ctx, `CREATE PUBLICATION "`+slot+`"`)
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42710") {
		return fmt.Errorf("outbox %s: create the publication %s of replication slot %s: %w", table, slot, slot, err)
	}
	return nil
}

// ResetWALSlot replaces a registered slot that is lost ([ErrWALSlotLost]) by a new one of the
// same name, starting at the server's current position: the operator's acknowledgement that the
// events between the old slot's last confirmed position and the moment writes were refused are
// lost (docs/cdc.md, runbook). An invalidated slot is dropped first. It refuses a usable slot
// (resetting it would skip what it still holds) and an unregistered one ([CreateWALSlot]).
func ResetWALSlot(ctx context.Context, db *sql.DB, table Table, slot string) error {
	st, err := ReadWALSlot(ctx, db, table, slot)
	if err != nil {
		return err
	}
	switch {
	case !st.Registered:
		return fmt.Errorf("outbox %s: replication slot %q is not registered: create it instead (outboxkit wal-slot create)", table, slot)
	case st.Usable():
		return fmt.Errorf("outbox %s: replication slot %q is usable (wal_status %s): refusing to reset it, which would skip the events it holds",
			table, slot, st.WALStatus)
	case st.Elsewhere:
		return fmt.Errorf("outbox %s: replication slot %q is physical or belongs to another database: drop it there or register another name", table, slot)
	case st.Exists:
		if _, err := db.ExecContext(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil {
			return fmt.Errorf("outbox %s: drop the invalidated replication slot %s: %w", table, slot, err)
		}
	}
	return createAndRegister(ctx, db, table, slot, true)
}

// DropWALSlot retires slot: it drops the replication slot if it exists, removes its register
// row and drops the publication of its name that CreateWALSlot made. Once no slot is registered, [ModeWAL] writers and <table>_emit are refused; switch the
// writers to ModeTable first. Events the slot had not delivered are lost.
func DropWALSlot(ctx context.Context, db *sql.DB, table Table, slot string) error {
	st, err := ReadWALSlot(ctx, db, table, slot)
	if err != nil {
		return err
	}
	if st.Exists {
		if _, err := db.ExecContext(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil {
			return fmt.Errorf("outbox %s: drop replication slot %s: %w", table, slot, err)
		}
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM "+table.WALSlots()+" WHERE slot_name = $1", slot); err != nil {
		return fmt.Errorf("outbox %s: unregister replication slot %s: %w", table, slot, err)
	}
	if _, err := db.ExecContext(ctx, `DROP PUBLICATION IF EXISTS "`+slot+`"`); err != nil {
		return fmt.Errorf("outbox %s: drop the publication %s of replication slot %s: %w", table, slot, slot, err)
	}
	return nil
}

func checkWALSlotArgs(table Table, slot string) error {
	if table.dialect != Postgres {
		return fmt.Errorf("outbox %s: wal slots need the postgres dialect, not %s", table, table.dialect)
	}
	return ValidateSlotName(slot)
}

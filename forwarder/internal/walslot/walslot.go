// Package walslot is the wal source's guard on its replication slot: at start it refuses a slot
// that existed and is gone (dropped, invalidated by max_slot_wal_keep_size, or missing on a
// replica promoted without it), creates and registers the slot on the first start only, and
// exports the slot's state as metrics. The register it reads is the outbox's
// (outbox.Table.WALSlots): a row outlives its slot, which is how a first start is told from a
// lost slot (docs/wal.md, "The slot").
package walslot

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/outboxkit/outboxkit/outbox"
)

// Start is what the wal source calls before it streams slot. On the first start (the slot not
// registered for table) it creates the slot if needed and registers it, and reports created when
// it made the slot. A registered slot that exists and is not invalidated passes. A registered
// slot that is gone or invalidated is an error wrapping outbox.ErrWALSlotLost that names the slot,
// says what happened and what to do: the relay must not start, and must not re-create it, since
// the events between its last confirmed position and the refusal of writes are lost and only an
// operator can decide what to do about them (outboxkit wal-slot reset). Writers are refused
// meanwhile, so nothing more is lost while the relay is down.
//
// It refuses, naming both, when the register holds another slot than slot: the writers emit for
// that one (their Config.WALSlot), and a second slot would be created and streamed while
// nothing relays the first one's events.
func Start(ctx context.Context, db *sql.DB, table outbox.Table, slot string) (created bool, err error) {
	if err := checkOneSlot(ctx, db, table, slot); err != nil {
		return false, err
	}
	created, err = outbox.CreateWALSlot(ctx, db, table, slot)
	if err != nil {
		return false, fmt.Errorf("wal source: refusing to start on replication slot %s: %w", slot, err)
	}
	return created, nil
}

// ErrOtherSlotRegistered is wrapped by Start's error when the outbox's register holds another
// slot than the relay's: a configuration error that waiting cannot fix.
var ErrOtherSlotRegistered = errors.New("another replication slot is registered for the outbox")

// checkOneSlot fails when the register of table holds a slot other than slot.
func checkOneSlot(ctx context.Context, db *sql.DB, table outbox.Table, slot string) error {
	var other string
	err := db.QueryRowContext(ctx, "SELECT slot_name FROM "+table.WALSlots()+" WHERE slot_name <> $1 ORDER BY slot_name LIMIT 1", slot).Scan(&other)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("wal source: read the register %s of the outbox %s: %w", table.WALSlots(), table, err)
	}
	return fmt.Errorf("wal source: refusing to start on replication slot %q: %w: the outbox %s already has replication slot %q registered "+
		"(its writers emit for it; a second slot would leave its events unrelayed): set the relay's wal slot to %q, "+
		"or retire %q (outboxkit wal-slot drop) once the writers use %q", slot, ErrOtherSlotRegistered, table, other, other, other, slot)
}

// Check reports whether slot is still usable, for a running wal source whose stream failed: nil
// when it is registered, exists and is not invalidated; the error of Start otherwise (a slot not
// registered, for example removed by outboxkit wal-slot drop, is an error too: the source did
// not start on it).
func Check(ctx context.Context, db *sql.DB, table outbox.Table, slot string) error {
	st, err := outbox.ReadWALSlot(ctx, db, table, slot)
	switch {
	case err != nil:
		return err
	case st.Usable():
		return nil
	case st.Lost():
		return fmt.Errorf("wal source: stopping: %w", st.LostError(table))
	}
	return fmt.Errorf("wal source: stopping: replication slot %q is no longer registered for the outbox %s (outboxkit wal-slot drop?)", slot, table)
}

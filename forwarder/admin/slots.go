package admin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/outbox"
)

// SlotStatus is one replication slot of the cdc source, as PostgreSQL reports it.
type SlotStatus struct {
	// Publication is the publication the table's slots stream (outbox.Table.Publication of the
	// table's installation): the same for every slot of the table.
	Publication string
	// Name of the slot (outbox.Table.Slot of its lease group).
	Name string
	// LeaseGroup is the group the slot belongs to when it is the one asked about ("" otherwise).
	LeaseGroup string
	// Missing is true when the slot of the lease group asked about does not exist: not created
	// yet, or lost (the relay recreates it and drains the table).
	Missing bool
	// Active is true while a relay streams it; ActivePID is its walsender.
	Active    bool
	ActivePID int
	// WALStatus is reserved, extended, unreserved or lost (invalidated by max_slot_wal_keep_size).
	WALStatus string
	// LagBytes is the WAL between the server's current position and the slot's confirmed one:
	// what the slot pins on disk.
	LagBytes int64
	// Drained is false while the rows committed before the slot existed still have to be drained.
	Drained bool
	// Waiting counts the table's pending rows that are not on the retry path (no next attempt
	// time): the rows the stream has yet to deliver. OldestWaiting is the age of the oldest (by
	// the database's clock against created_at, or deliver_at for a released scheduled event). A row waiting longer than forwarder.Config.CDC.StallAfter
	// (forwarder.DefaultCDCStallAfter) is stranded if the stream is not behind: see docs/cdc.md, Stalls.
	// The same for every slot of the table (all tenants).
	Waiting       int64
	OldestWaiting time.Duration
}

// Slots returns the cdc replication slots of the table (PostgreSQL; nil on other dialects).
// The slot of each of leaseGroups is listed even when it does not exist (Missing).
func (a *Admin) Slots(ctx context.Context, leaseGroups ...string) ([]SlotStatus, error) {
	if !a.sql().Replicates() {
		return nil, nil
	}
	table := a.table
	// The identity names the slots asked about and the publication of the slots listed; a table
	// with neither (an at-least-once polling relay's) does not read it, so that status works on a
	// restored copy not yet re-identified (outbox.RestoredCopyError), where such a relay runs.
	var id string
	var err error
	if len(leaseGroups) > 0 {
		if id, err = outbox.ReadInstallation(ctx, a.db, a.table); err != nil {
			return nil, fmt.Errorf("admin: %w", err)
		}
	}
	asked := make([]string, len(leaseGroups))
	for i, g := range leaseGroups {
		if asked[i], err = table.Slot(id, g); err != nil {
			return nil, fmt.Errorf("admin: %w", err)
		}
	}
	// This outbox's slots: those its slot table records (created by its relays) and those asked
	// about. Another outbox's slots with the same table name (in another schema or database) are
	// not listed.
	rows, err := a.sql().CDC().Slots(asked).Query(ctx, a.db)
	if err != nil {
		return nil, fmt.Errorf("admin: read the replication slots of %s: %w", table, err)
	}
	defer rows.Close()
	var out []SlotStatus
	for rows.Next() {
		var s SlotStatus
		if err := rows.Scan(&s.Name, &s.Active, &s.ActivePID, &s.WALStatus, &s.LagBytes); err != nil {
			return nil, fmt.Errorf("admin: read the replication slots of %s: %w", table, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("admin: read the replication slots of %s: %w", table, err)
	}
	for i := range out {
		if out[i].Drained, err = bookkeeping.SlotDrained(ctx, a.db, a.sql().CDC(), out[i].Name); err != nil {
			return nil, err
		}
	}
	var waiting int64
	var oldest time.Duration
	if len(out) > 0 || len(leaseGroups) > 0 {
		if waiting, oldest, err = bookkeeping.StrandedRows(ctx, a.db, a.sql().CDC(), 0); err != nil {
			return nil, fmt.Errorf("admin: %w", err)
		}
	}
	for i, g := range leaseGroups {
		name := asked[i]
		found := false
		for i := range out {
			if out[i].Name == name {
				out[i].LeaseGroup, found = g, true
			}
		}
		if !found {
			out = append(out, SlotStatus{Name: name, LeaseGroup: g, Missing: true})
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	if len(leaseGroups) == 0 {
		if id, err = outbox.ReadInstallation(ctx, a.db, a.table); err != nil {
			return nil, fmt.Errorf("admin: %w", err)
		}
	}
	pub, err := table.Publication(id)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	for i := range out {
		out[i].Waiting, out[i].OldestWaiting, out[i].Publication = waiting, oldest, pub
	}
	return out, nil
}

// ErrSlotActive is returned by DropSlot for a slot a relay streams, unless asked to terminate it.
var ErrSlotActive = errors.New("the replication slot is being streamed")

// DropSlot drops the replication slot of leaseGroup. A slot being streamed is refused with
// ErrSlotActive unless terminate is set: then its walsender is terminated first (the relay
// reconnects, finds the slot gone, recreates it and drains the table). Dropping a slot loses
// no event (the table is the source of truth) but the next relay drains the whole backlog
// from the table, in seq order.
func (a *Admin) DropSlot(ctx context.Context, leaseGroup string, terminate bool) (string, error) {
	if !a.sql().Replicates() {
		return "", fmt.Errorf("admin: replication slots need the postgres dialect, the table is %s", a.dialect)
	}
	id, err := outbox.ReadInstallation(ctx, a.db, a.table)
	if err != nil {
		return "", fmt.Errorf("admin: %w", err)
	}
	name, err := a.table.Slot(id, leaseGroup)
	if err != nil {
		return "", fmt.Errorf("admin: %w", err)
	}
	st, err := pgrepl.ReadSlot(ctx, a.db, name)
	if err != nil {
		return name, err
	}
	if !st.Exists {
		return name, fmt.Errorf("admin: replication slot %s (lease group %q) does not exist", name, leaseGroup)
	}
	if st.ActivePID != 0 && !terminate {
		return name, fmt.Errorf("admin: slot %s: %w by PID %d (stop the relays, or terminate it)", name, ErrSlotActive, st.ActivePID)
	}
	// A streaming relay reconnects at once: terminate and drop until the drop wins.
	for attempt := 0; ; attempt++ {
		if terminate {
			if _, err := pgrepl.TerminateWalsender(ctx, a.db, name); err != nil {
				return name, err
			}
		}
		err := pgrepl.DropSlot(ctx, a.db, name)
		if err == nil {
			break
		}
		if pgrepl.Code(err) != pgrepl.ObjectInUse || attempt == 100 {
			return name, err
		}
		if !wait(ctx, 10*time.Millisecond) {
			return name, ctx.Err()
		}
	}
	if _, err := a.sql().CDC().ForgetSlot(name).Exec(ctx, a.db); err != nil &&
		!errors.Is(err, sql.ErrNoRows) {
		return name, fmt.Errorf("admin: forget the drain state of slot %s: %w", name, err)
	}
	return name, nil
}

// wait waits d unless ctx ends first, which it reports as false.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

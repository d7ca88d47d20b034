package faultinject

import (
	"context"
	"database/sql"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// dropCDCSlot removes the replication slot and the publication a cdc run created (best effort:
// a walsender may outlive its SIGKILLed relay for a moment).
func dropCDCSlot(db *sql.DB, table outbox.Table) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := outbox.ReadInstallation(ctx, db, table)
	if err != nil {
		return
	}
	slot, err := table.Slot(id, "default")
	if err != nil {
		return
	}
	pub, err := table.Publication(id)
	if err != nil {
		return
	}
	for ctx.Err() == nil {
		_, _ = db.ExecContext(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", slot)
		var left int
		_, _ = db.ExecContext(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", slot)
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&left); err != nil || left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, _ = db.ExecContext(ctx, "DROP PUBLICATION IF EXISTS "+pub)
}

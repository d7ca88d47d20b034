package testsupport

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// DropCDCObjects drops what the cdc source made for table: the replication slots of every lease
// group (waiting up to 20 s for their walsenders to go, as a stopped relay's may linger), the
// publication and the slot table. Call it after the relays stopped.
func DropCDCObjects(t testing.TB, db *sql.DB, table outbox.Table) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix, err := table.Slot("")
	if err != nil {
		t.Error(err)
		return
	}
	prefix = prefix[:len(prefix)-8] // obk_<table>_, then the lease group's hash
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := db.ExecContext(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "+
			"WHERE slot_name LIKE $1 || '%' AND NOT active", prefix)
		var left int
		if err == nil {
			err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_replication_slots WHERE slot_name LIKE $1 || '%'", prefix).Scan(&left)
		}
		if err == nil && left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("drop the test's replication slots %s*: %v (%d left)", prefix, err, left)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, q := range []string{"DROP PUBLICATION IF EXISTS " + table.Publication(), "DROP TABLE IF EXISTS " + table.CDCSlots()} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// WaitForCDCStream waits up to 60 s until a relay streams table's slot of the default lease
// group and has drained what was committed before the slot existed (from then on, commits go
// through the WAL), by a walsender other than the one with process id notPID (0: any). It
// returns the walsender's process id.
func WaitForCDCStream(t testing.TB, db *sql.DB, table outbox.Table, notPID int) int {
	t.Helper()
	slot, err := table.Slot("default")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var pid int
		err := db.QueryRow("SELECT COALESCE((SELECT s.active_pid FROM pg_replication_slots s JOIN "+table.CDCSlots()+
			" d ON d.slot_name = s.slot_name WHERE s.slot_name = $1 AND s.active AND d.drained_at IS NOT NULL), 0)", slot).Scan(&pid)
		if err == nil && pid != 0 && pid != notPID {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no relay streams slot %s after 60s (last error: %v)", slot, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

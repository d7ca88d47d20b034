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
	prefix, err := table.Slot("", "")
	if err != nil {
		t.Error(err)
		return
	}
	prefix = prefix[:len(prefix)-8] // obk_<table>_, then the hash of the installation and the lease group
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
	legacy, err := table.Publication("")
	if err != nil {
		t.Error(err)
		return
	}
	// The table's publications: the one of each installation ("<legacy>_<8 hex>") and the legacy one.
	rows, err := db.QueryContext(ctx, "SELECT pubname FROM pg_publication WHERE pubname = $1 OR pubname ~ ('^' || $1 || '_[0-9a-f]{8}$')", legacy)
	if err != nil {
		t.Errorf("list the test's publications: %v", err)
		return
	}
	var drops []string
	for rows.Next() {
		var pub string
		if rows.Scan(&pub) == nil {
			drops = append(drops, "DROP PUBLICATION IF EXISTS "+pub)
		}
	}
	rows.Close()
	for _, q := range append(drops, "DROP TABLE IF EXISTS "+table.CDCSlots()) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// CDCSlot returns the name of table's replication slot of lease group group, which includes the
// table's installation identity (read from the database).
func CDCSlot(t testing.TB, db *sql.DB, table outbox.Table, group string) string {
	t.Helper()
	id, err := outbox.ReadInstallation(context.Background(), db, table)
	if err != nil {
		t.Fatal(err)
	}
	slot, err := table.Slot(id, group)
	if err != nil {
		t.Fatal(err)
	}
	return slot
}

// CDCPublication returns the name of table's publication, which includes the table's
// installation identity (read from the database).
func CDCPublication(t testing.TB, db *sql.DB, table outbox.Table) string {
	t.Helper()
	id, err := outbox.ReadInstallation(context.Background(), db, table)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := table.Publication(id)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// WaitForCDCStream waits up to 60 s until a relay streams table's slot of the default lease
// group and has drained what was committed before the slot existed (from then on, commits go
// through the WAL), by a walsender other than the one with process id notPID (0: any). It
// returns the walsender's process id.
func WaitForCDCStream(t testing.TB, db *sql.DB, table outbox.Table, notPID int) int {
	t.Helper()
	slot := CDCSlot(t, db, table, "default")
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

package forwarder

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/outbox"
)

// unitCountDB returns a migrated SQLite outbox for the unit-count tests.
func unitCountDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "outbox.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	table, err := outbox.NewTable(outbox.SQLite, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	return db
}

// startExactlyOnce makes a forwarder with units (0: the default) and runs its pipeline's start.
func startExactlyOnce(t *testing.T, db *sql.DB, units int) (*Forwarder, error) {
	t.Helper()
	f, err := New(Config{DB: db, Dialect: outbox.SQLite, Publisher: &fakeTxPublisher{}, Delivery: ExactlyOnce, TransactionalUnits: units})
	if err != nil {
		t.Fatal(err)
	}
	return f, f.pipeline.start(context.Background())
}

// recordUnits gives the units table a row for each of the first n units of f's group, as their
// openings do.
func recordUnits(t *testing.T, f *Forwarder, n int) {
	t.Helper()
	for u := range n {
		if err := f.store.ensureUnitRow(context.Background(), f.cfg.DB, f.unitName(u)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnitCountDefaultsToTheGroupsRecordedOne: a group that never ran exactly-once gets the
// default (2 with 2 workers); a group whose units table records 8 units (the default of earlier
// versions) keeps 8 when TransactionalUnits is unset, so an upgrade does not regroup its
// partitions while rows of the old units' checkpoints may be pending.
func TestUnitCountDefaultsToTheGroupsRecordedOne(t *testing.T) {
	db := unitCountDB(t)
	fresh, err := startExactlyOnce(t, db, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := fresh.cfg.TransactionalUnits; got != 2 {
		t.Fatalf("a new group got %d units, want 2", got)
	}
	recordUnits(t, fresh, 8)
	upgraded, err := startExactlyOnce(t, db, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, share := upgraded.cfg.TransactionalUnits, upgraded.share.units; got != 8 || share != 8 {
		t.Fatalf("a group recording 8 units got %d units (share granule %d), want 8", got, share)
	}
}

// TestUnitCountChangeIsRefusedWhileRowsArePending: a configured count other than the group's
// recorded one is refused, naming both, while a row is pending; once none is, it is taken and
// the rows of the units it no longer has are deleted.
func TestUnitCountChangeIsRefusedWhileRowsArePending(t *testing.T) {
	db := unitCountDB(t)
	first, err := startExactlyOnce(t, db, 8)
	if err != nil {
		t.Fatal(err)
	}
	recordUnits(t, first, 8)
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := inTx(ctx, db, func(tx *sql.Tx) error {
		return w.WriteTx(ctx, tx, outbox.Event{Topic: "orders", AggregateType: "order", AggregateID: "o-1", EventType: "Placed", Payload: []byte("{}")})
	}); err != nil {
		t.Fatal(err)
	}
	_, err = startExactlyOnce(t, db, 4)
	if err == nil || !strings.Contains(err.Error(), "TransactionalUnits 4") || !strings.Contains(err.Error(), "runs with 8 units") ||
		!strings.Contains(err.Error(), "1 rows are pending") {
		t.Fatalf("4 units on a group of 8 with a pending row: %v, want a refusal naming 4, 8 and the pending row", err)
	}
	if _, err := db.Exec("DELETE FROM " + first.store.table.Events()); err != nil {
		t.Fatal(err)
	}
	changed, err := startExactlyOnce(t, db, 4)
	if err != nil {
		t.Fatalf("4 units on a group of 8 with no row pending: %v", err)
	}
	recorded, _, err := changed.store.recordedUnits(ctx, db, changed.cfg.TransactionalIDPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if recorded != 4 {
		t.Fatalf("after the change the units table records %d units, want 4", recorded)
	}
}

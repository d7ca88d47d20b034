package walslot_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder/internal/walslot"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// fixture is a migrated outbox with a ModeWAL writer, on db; the test drops it and any slot of
// its name.
type fixture struct {
	db     *sql.DB
	writer *outbox.Writer
	slot   string
}

func newFixture(t *testing.T, db *sql.DB, name string) fixture {
	t.Helper()
	ctx := context.Background()
	slot := testsupport.UniqueName("obk_walslot")
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: name, Mode: outbox.ModeWAL, WALSlot: slot})
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, db, w.Table()); err != nil {
		t.Fatal(err)
	}
	f := fixture{db: db, writer: w, slot: slot}
	t.Cleanup(func() {
		if _, err := db.Exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", f.slot); err != nil {
			t.Errorf("drop slot %s: %v", f.slot, err)
		}
		_, _ = db.Exec("DROP PUBLICATION IF EXISTS " + f.slot) // created by Start with the slot
		for _, tbl := range w.Table().Tables() {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tbl)
		}
		for _, fn := range w.Table().Functions() {
			_, _ = db.Exec("DROP FUNCTION IF EXISTS " + fn)
		}
	})
	return f
}

// write writes one event in its own transaction.
func (f fixture) write(ctx context.Context) error {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	ev := outbox.Event{Topic: "orders.events", AggregateType: "order", AggregateID: "o-1", EventType: "OrderPlaced", Payload: []byte("{}")}
	if err := f.writer.WriteTx(ctx, tx, ev); err != nil {
		return err
	}
	return tx.Commit()
}

func (f fixture) slotExists(t *testing.T) bool {
	t.Helper()
	var n int
	if err := f.db.QueryRow("SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", f.slot).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestStartCreatesOnFirstStartAndRefusesALostSlot: the first Start creates and registers the slot
// (writes, refused before, then commit); a second Start passes; after the slot is lost (dropped
// on the shared server, invalidated by max_slot_wal_keep_size on a private one) Start and Check
// refuse with an error that names the slot, says what happened and what to do, wraps
// outbox.ErrWALSlotLost, and nothing re-creates the slot; the collector says usable 0.
func TestStartCreatesOnFirstStartAndRefusesALostSlot(t *testing.T) {
	for _, loss := range []string{"dropped", "invalidated"} {
		t.Run(loss, func(t *testing.T) {
			ctx := context.Background()
			var db *sql.DB
			if loss == "dropped" {
				db = testsupport.OpenPostgres(t)
			} else {
				db = testsupport.OpenDSN(t, "pgx", testsupport.PrivatePostgres(t, "max_slot_wal_keep_size=2MB"))
			}
			f := newFixture(t, db, testsupport.UniqueName("walslot"))
			table := f.writer.Table()
			if err := f.write(ctx); err == nil || !strings.Contains(err.Error(), "was never registered") {
				t.Fatalf("a write before the first start: want a refusal, got %v", err)
			}
			if created, err := walslot.Start(ctx, db, table, f.slot); err != nil || !created {
				t.Fatalf("first Start: created %v, %v", created, err)
			}
			if created, err := walslot.Start(ctx, db, table, f.slot); err != nil || created {
				t.Fatalf("second Start: created %v, %v; want the slot as it is", created, err)
			}
			if err := f.write(ctx); err != nil {
				t.Fatalf("a write after the first start: %v", err)
			}
			collector := walslot.NewCollector(db, table, f.slot)
			if got := gauge(t, collector, "outboxkit_wal_slot_usable"); got != 1 {
				t.Errorf("usable %v before the loss, want 1", got)
			}
			if got := gauge(t, collector, "outboxkit_wal_slot_lag_bytes"); got <= 0 {
				t.Errorf("lag %v bytes with an unread event, want more than 0", got)
			}

			why := "does not exist in this database"
			if loss == "dropped" {
				if _, err := db.Exec("SELECT pg_drop_replication_slot($1)", f.slot); err != nil {
					t.Fatal(err)
				}
			} else {
				why = "is invalidated"
				invalidate(t, db, f.slot)
			}
			_, startErr := walslot.Start(ctx, db, table, f.slot)
			checkErr := walslot.Check(ctx, db, table, f.slot)
			for name, err := range map[string]error{"Start": startErr, "Check": checkErr} {
				if !errors.Is(err, outbox.ErrWALSlotLost) {
					t.Errorf("%s after the slot was %s: want outbox.ErrWALSlotLost, got %v", name, loss, err)
					continue
				}
				for _, want := range []string{`"` + f.slot + `"`, why, "outboxkit wal-slot reset " + f.slot} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s's error should contain %q: %v", name, want, err)
					}
				}
			}
			if loss == "dropped" && f.slotExists(t) {
				t.Errorf("the dropped slot %s was re-created", f.slot)
			}
			if err := f.write(ctx); err == nil || !strings.Contains(err.Error(), f.slot) {
				t.Errorf("a write after the loss: want a refusal naming the slot, got %v", err)
			}
			if got := gauge(t, collector, "outboxkit_wal_slot_usable"); got != 0 {
				t.Errorf("usable %v after the loss, want 0", got)
			}
		})
	}
}

// invalidate writes WAL past max_slot_wal_keep_size and checkpoints until the slot is lost.
func invalidate(t *testing.T, db *sql.DB, slot string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		var status sql.NullString
		if err := db.QueryRow("SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&status); err != nil {
			t.Fatal(err)
		}
		if status.String == "lost" {
			return
		}
		if _, err := db.Exec("SELECT pg_logical_emit_message(false, 'filler', repeat('x', 1000000)), pg_switch_wal()"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("CHECKPOINT"); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("slot %s not invalidated after 100 MB of WAL and 100 checkpoints", slot)
}

// gauge collects c and returns the value of the metric named name.
func gauge(t *testing.T, c prometheus.Collector, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s among %d families", name, len(families))
	return 0
}

// TestStartRefusesASecondSlot: the register already holds the writers' slot (created by the
// deployment step under another name than the relay's default). Start with the relay's slot
// refuses, naming both slots, and creates no second slot, which would never relay the first
// one's events.
func TestStartRefusesASecondSlot(t *testing.T) {
	ctx := context.Background()
	db := testsupport.OpenPostgres(t)
	f := newFixture(t, db, testsupport.UniqueName("walslot"))
	if _, err := outbox.CreateWALSlot(ctx, db, f.writer.Table(), f.slot); err != nil {
		t.Fatal(err)
	}
	relaySlot := testsupport.UniqueName("obk_walslot_relay")
	t.Cleanup(func() {
		_, _ = db.Exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", relaySlot)
		_, _ = db.Exec("DROP PUBLICATION IF EXISTS " + relaySlot)
	})
	created, err := walslot.Start(ctx, db, f.writer.Table(), relaySlot)
	if err == nil || !strings.Contains(err.Error(), `"`+f.slot+`"`) || !strings.Contains(err.Error(), `"`+relaySlot+`"`) {
		t.Fatalf("Start(%s) with %s registered: created %v, %v; want a refusal naming both slots", relaySlot, f.slot, created, err)
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", relaySlot).Scan(&n); err != nil || n != 0 {
		t.Fatalf("Start created the second slot %s (%d, %v)", relaySlot, n, err)
	}
	t.Logf("refused: %v", err)
}

package exactlyonce

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/outboxkit/outboxkit/forwarder/internal/ack"
	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// The cleanup of a unit's last checkpoint, in the opening's transaction, on a SQLite table (a
// real database: the cleanup is statements).

// startDeliverer returns a deliverer of the default lease group over table (2 units, 2 workers,
// the forwarder's defaults) after its start: installation read, unit count recorded.
func startDeliverer(t *testing.T, db *sql.DB, table outbox.Table) *Deliverer {
	t.Helper()
	m, err := relay.NewMetrics(nil, table.Events())
	if err != nil {
		t.Fatal(err)
	}
	core := relay.Core{DB: db, RelayID: "test-relay", Workers: 2, BatchSize: 10, MaxBatchBytes: 1 << 20, LeaseTTL: 10e9,
		DeadLetterTopic: "dead", Metrics: m, Log: slog.New(slog.DiscardHandler),
		Store: &relay.Store{Table: table, Dialect: outbox.SQLite, Group: "default", IdleTimeout: 5e9}}
	d := New(core, Config{Units: 2, CheckpointTopic: bookkeeping.DefaultCheckpointTopic, LeaseGroup: "default"},
		&fakeTx{}, ack.New(core), deadletter.NewSettler(core, nil))
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}

// migratedSQLite opens a SQLite file in the test's directory, closed when the test ends, with
// the default outbox table migrated.
func migratedSQLite(t *testing.T) (*sql.DB, outbox.Table) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "outbox.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	table, err := outbox.NewTable(outbox.SQLite, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	return db, table
}

// TestFormatOneCheckpointIsTheInstallationsOnlyBeforeItsOwn: a checkpoint of format 1 (no
// installation in it, written by a relay of an older version) is applied on a unit's first
// cleanup after the upgrade, and refused as another installation's once this installation has
// cleaned a checkpoint of its own on the unit: two installations sharing a prefix, one not yet
// upgraded, would otherwise apply the old one's checkpoint to the other's table by sequence
// number (deleting rows never published).
func TestFormatOneCheckpointIsTheInstallationsOnlyBeforeItsOwn(t *testing.T) {
	db, table := migratedSQLite(t)
	ctx := context.Background()
	f := startDeliverer(t, db, table)
	const unit = "legacy/u00"
	v1 := bookkeeping.Checkpoint{Version: 1, Unit: unit, Relay: "old-relay", Txn: 7, Rows: []bookkeeping.RowRef{{Seq: 1}}}
	cleanUp := func(data string) error {
		return relay.InTx(ctx, db, func(tx *sql.Tx) error {
			if err := f.core.Store.EnsureUnitRow(ctx, tx, unit); err != nil {
				return err
			}
			_, _, err := f.cleanUpCheckpoint(ctx, tx, unit, f.txUnits.get(0), v1, []byte(data))
			return err
		})
	}
	if err := cleanUp(`{"v":1,"txn":7}`); err != nil {
		t.Fatalf("the first cleanup after the upgrade refused a checkpoint of format 1: %v", err)
	}
	err := cleanUp(`{"v":1,"txn":8}`)
	if !errors.Is(err, errForeignCheckpoint) {
		t.Fatalf("a checkpoint of format 1 after this installation's own cleanup: %v, want errForeignCheckpoint", err)
	}
	if !f.txUnits.get(0).foreign {
		t.Error("the unit is not marked foreign: its rows would still be claimed")
	}
}

// TestCleanupSkipsThePartitionsItsAcknowledgementSettled: the relay that committed a unit's
// transaction acknowledged it after losing one of the unit's partitions. Its mark names the
// partitions it settled; the unit's next opening applies the checkpoint to the rows of the lost
// partition (a published row still there is deleted: it must not go out twice) and leaves those
// of the settled ones alone (a dead letter replayed since stays pending, and is not dropped from
// a batch). A relay that owned the unit whole leaves nothing to apply.
func TestCleanupSkipsThePartitionsItsAcknowledgementSettled(t *testing.T) {
	db, table := migratedSQLite(t)
	ctx := context.Background()
	f := startDeliverer(t, db, table)
	units := f.units
	// Two events in two partitions of unit 0.
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite, Table: table.Events()})
	if err != nil {
		t.Fatal(err)
	}
	var events []outbox.Event
	seen := map[int]bool{}
	for i := 0; len(events) < 2; i++ {
		e := outbox.Event{Topic: "t", AggregateType: "order", AggregateID: fmt.Sprintf("o-%d", i), EventType: "Happened", Payload: []byte("{}")}
		if p := outbox.PartitionOf(outbox.KeyHash(e.TenantID, e.AggregateType, e.AggregateID)); p%units == 0 && !seen[p] {
			seen[p] = true
			events = append(events, e)
		}
	}
	if err := relay.InTx(ctx, db, func(tx *sql.Tx) error { return w.WriteTx(ctx, tx, events...) }); err != nil {
		t.Fatal(err)
	}
	type row struct {
		seq       int64
		id        string
		partition int
	}
	read := func() map[string]row {
		rs, err := db.Query("SELECT seq, event_id, partition_no, status FROM " + table.Events())
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		out := map[string]row{}
		for rs.Next() {
			var r row
			var status int
			if err := rs.Scan(&r.seq, &r.id, &r.partition, &status); err != nil {
				t.Fatal(err)
			}
			if status == 0 { // pending
				out[r.id] = r
			}
		}
		return out
	}
	pending := read()
	dead, published := pending[events[0].ID.String()], pending[events[1].ID.String()]
	// The transaction dead-lettered the first event and published the second. The relay then lost
	// the second's partition; its acknowledgement marked the first dead, and an operator has
	// replayed it since (pending again, as the test's table holds it).
	const unit = "partial/u00"
	cp := bookkeeping.Checkpoint{Version: bookkeeping.CheckpointVersion, Installation: f.installation, Unit: unit, Relay: "a", Txn: 1,
		Rows: []bookkeeping.RowRef{{Seq: published.seq, EventID: published.id}},
		Dead: []bookkeeping.DeadRow{{Seq: dead.seq, EventID: dead.id, Attempts: 3, Reason: "too large"}}}
	data := []byte(`{"v":2,"txn":1}`)
	owned := map[int]bool{}
	for p := 0; p < outbox.Partitions; p += units {
		owned[p] = p != published.partition
	}
	marks := ack.OwnedUnitMarks([]relay.UnitMark{{Unit: 0, Name: unit, Digest: relay.CheckpointDigest(data)}}, owned, units)
	if len(marks) != 1 || marks[0].Settled == 0 || marks[0].Settled&(1<<uint(published.partition)) != 0 ||
		marks[0].Settled&(1<<uint(dead.partition)) == 0 {
		t.Fatalf("marks of an acknowledgement without partition %d: %+v", published.partition, marks)
	}
	var recovered map[int64]bool
	err = relay.InTx(ctx, db, func(tx *sql.Tx) error {
		if err := f.core.Store.EnsureUnitRow(ctx, tx, unit); err != nil {
			return err
		}
		if err := f.core.Store.MarkCleaned(ctx, tx, marks); err != nil {
			return err
		}
		recovered, _, err = f.cleanUpCheckpoint(ctx, tx, unit, f.txUnits.get(0), cp, data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	after := read()
	if _, ok := after[published.id]; ok {
		t.Errorf("the published row of the lost partition is still pending: it would go out twice")
	}
	if _, ok := after[dead.id]; !ok {
		t.Errorf("the replayed row of a settled partition is no longer pending: the cleanup undid the replay")
	}
	if !recovered[published.seq] || recovered[dead.seq] {
		t.Errorf("recovered rows %v, want %d and not %d", recovered, published.seq, dead.seq)
	}

	// Owned whole: the mark names the checkpoint alone, and the next opening applies nothing.
	for p := range owned {
		owned[p] = true
	}
	marks = ack.OwnedUnitMarks([]relay.UnitMark{{Unit: 0, Name: unit, Digest: relay.CheckpointDigest(data)}}, owned, units)
	if len(marks) != 1 || marks[0].Settled != 0 {
		t.Fatalf("marks of an acknowledgement owning the unit whole: %+v", marks)
	}
	err = relay.InTx(ctx, db, func(tx *sql.Tx) error {
		if err := f.core.Store.MarkCleaned(ctx, tx, marks); err != nil {
			return err
		}
		recovered, _, err = f.cleanUpCheckpoint(ctx, tx, unit, f.txUnits.get(0), cp, data)
		return err
	})
	if err != nil || recovered != nil {
		t.Fatalf("cleanup after a whole acknowledgement: recovered %v, %v; want nothing", recovered, err)
	}
}

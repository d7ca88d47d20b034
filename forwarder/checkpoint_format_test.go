package forwarder

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/outbox"
)

// fakeTxPublisher is a TransactionalPublisher that never runs a transaction: for tests of the
// forwarder's own bookkeeping.
type fakeTxPublisher struct{ fakeOutcomePublisher }

func (*fakeTxPublisher) OpenUnit(context.Context, string, string, int) ([]byte, error) {
	return nil, nil
}
func (*fakeTxPublisher) CommitUnit(context.Context, string, []string, []*message.Message, []byte) ([]error, error) {
	return nil, errors.New("no transactions here")
}
func (*fakeTxPublisher) CloseUnit(string) {}

// TestFormatOneCheckpointIsTheInstallationsOnlyBeforeItsOwn: a checkpoint of format 1 (no
// installation in it, written by a relay of an older version) is applied on a unit's first
// cleanup after the upgrade, and refused as another installation's once this installation has
// cleaned a checkpoint of its own on the unit: two installations sharing a prefix, one not yet
// upgraded, would otherwise apply the old one's checkpoint to the other's table by sequence
// number (deleting rows never published).
func TestFormatOneCheckpointIsTheInstallationsOnlyBeforeItsOwn(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "outbox.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	table, err := outbox.NewTable(outbox.SQLite, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{DB: db, Dialect: outbox.SQLite, Publisher: &fakeTxPublisher{}, Delivery: ExactlyOnce})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.pipeline.start(ctx); err != nil {
		t.Fatal(err)
	}
	const unit = "legacy/u00"
	v1 := checkpoint{Version: 1, Unit: unit, Relay: "old-relay", Txn: 7, Rows: []rowRef{{Seq: 1}}}
	cleanUp := func(data string) error {
		return inTx(ctx, db, func(tx *sql.Tx) error {
			if err := f.store.ensureUnitRow(ctx, tx, unit); err != nil {
				return err
			}
			_, _, err := f.cleanUpCheckpoint(ctx, tx, unit, f.units.get(0), v1, []byte(data))
			return err
		})
	}
	if err := cleanUp(`{"v":1,"txn":7}`); err != nil {
		t.Fatalf("the first cleanup after the upgrade refused a checkpoint of format 1: %v", err)
	}
	err = cleanUp(`{"v":1,"txn":8}`)
	if !errors.Is(err, errForeignCheckpoint) {
		t.Fatalf("a checkpoint of format 1 after this installation's own cleanup: %v, want errForeignCheckpoint", err)
	}
	if !f.units.get(0).foreign {
		t.Error("the unit is not marked foreign: its rows would still be claimed")
	}
}
